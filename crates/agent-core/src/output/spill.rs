//! Where spilled outputs live on disk: one directory per [`SpillArea`] (a process makes one and
//! shares it between its runs) under `<tmp>/mcp-agent-spill-<uid>/`, its size counted, locked while
//! it is in use so that a later start can tell a directory whose owner is gone and remove it.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The start of the name of the directory under the temporary directory that holds every
/// area's directory of a user ([`spill_root`]).
pub const SPILL_ROOT: &str = "mcp-agent-spill";

/// The on-disk place of spilled outputs, shared by every [`OutputStore`](crate::OutputStore)
/// holding a clone (for a gateway: all its sessions), with a byte count that each store keeps
/// under its [`max_spill_bytes`](crate::OutputLimits::max_spill_bytes).
///
/// Its directory, `<parent>/mcp-agent-spill-<uid>/<pid>-<time>-<n>/` ([`spill_root`]), exists only while it holds
/// outputs: it is made on the first spill and removed when the last spilled output is dropped
/// (a store's close or drop) or the area is dropped. Beside it, `<pid>-<time>-<n>.lock` is
/// held locked meanwhile; a process killed without cleanup leaves both, and the next area
/// that makes its directory removes every directory whose lock is free.
///
/// ```
/// use agent_core::SpillArea;
///
/// let tmp = tempfile::tempdir().unwrap();
/// let area = SpillArea::new(Some(tmp.path().to_path_buf()));
/// assert_eq!(area.bytes(), 0);
/// assert_eq!(area.dir(), None); // made on the first spill
/// assert_eq!(area, area.clone());
/// ```
#[derive(Clone)]
pub struct SpillArea {
    inner: Arc<Inner>,
}

struct Inner {
    parent: Option<PathBuf>,
    state: Mutex<AreaState>,
    stores: AtomicU64,
}

#[derive(Default)]
struct AreaState {
    held: Option<Held>,
    bytes: u64,
}

/// A made directory and its held lock.
struct Held {
    dir: PathBuf,
    lock_path: PathBuf,
    _lock: File,
}

impl Held {
    fn remove(self) {
        let _ = fs::remove_dir_all(&self.dir);
        let _ = fs::remove_file(&self.lock_path);
        // The root goes too when no other area uses it (it fails while one does).
        if let Some(root) = self.dir.parent() {
            let _ = fs::remove_dir(root);
        }
    }
}

/// Why a spill could not get room.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The area holds `limit` bytes or more with this output.
    Full,
    /// The directory could not be made: why.
    Io(String),
}

impl std::fmt::Debug for SpillArea {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("SpillArea")
            .field("dir", &state.held.as_ref().map(|h| &h.dir))
            .field("bytes", &state.bytes)
            .finish()
    }
}

impl PartialEq for SpillArea {
    /// The same area (clones of one).
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for SpillArea {}

impl Drop for Inner {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = state.held.take() {
            held.remove();
        }
    }
}

impl SpillArea {
    /// An area under `parent` (default: the system's temporary directory, `TMPDIR`). Nothing
    /// is made until the first spill.
    pub fn new(parent: Option<PathBuf>) -> Self {
        Self {
            inner: Arc::new(Inner {
                parent,
                state: Mutex::new(AreaState::default()),
                stores: AtomicU64::new(0),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, AreaState> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes of spilled outputs it holds now.
    pub fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    /// Its directory, while it holds outputs.
    pub fn dir(&self) -> Option<PathBuf> {
        self.lock().held.as_ref().map(|h| h.dir.clone())
    }

    /// A number for a store's files, unique in this area.
    pub(crate) fn store_id(&self) -> u64 {
        self.inner.stores.fetch_add(1, Ordering::Relaxed)
    }

    /// Counts `bytes` in when they fit under `limit`: the directory to write them in.
    pub(crate) fn reserve(&self, bytes: u64, limit: u64) -> Result<PathBuf, Refused> {
        let mut state = self.lock();
        if state.bytes.saturating_add(bytes) > limit {
            return Err(Refused::Full);
        }
        let dir = match &state.held {
            Some(held) => held.dir.clone(),
            None => {
                let held =
                    make(self.inner.parent.as_deref()).map_err(|e| Refused::Io(e.to_string()))?;
                let dir = held.dir.clone();
                state.held = Some(held);
                dir
            }
        };
        state.bytes += bytes;
        Ok(dir)
    }

    /// Counts `bytes` out (their file was removed, or never written); the directory goes when
    /// nothing is left in it.
    pub(crate) fn release(&self, bytes: u64) {
        let mut state = self.lock();
        state.bytes = state.bytes.saturating_sub(bytes);
        if state.bytes == 0
            && let Some(held) = state.held.take()
        {
            held.remove();
        }
    }
}

/// The directory under `parent` that holds every area's directory of this user:
/// `<parent>/mcp-agent-spill-<uid>` on Unix (each user has their own, so one user's root never
/// stops another's spills), `<parent>/mcp-agent-spill` elsewhere.
///
/// ```
/// let root = agent_core::spill_root(std::path::Path::new("/tmp"));
/// assert!(root.file_name().unwrap().to_str().unwrap().starts_with(agent_core::SPILL_ROOT));
/// ```
pub fn spill_root(parent: &Path) -> PathBuf {
    #[cfg(unix)]
    {
        parent.join(format!("{SPILL_ROOT}-{}", nix::unistd::geteuid()))
    }
    #[cfg(not(unix))]
    {
        parent.join(SPILL_ROOT)
    }
}

/// Makes the root (owner only) or checks the one there is this user's and closed to others,
/// sweeps what dead owners left in it, then makes a locked directory of this area.
fn make(parent: Option<&Path>) -> io::Result<Held> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
    let root = spill_root(&parent);
    let mut last = None;
    // A few attempts: another process may remove an empty root, or sweep a lock file just
    // made, between two steps.
    for _ in 0..8 {
        match private_dir(&root) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        // Before anything is made in it: a root planted by another user (a symlink, a
        // directory of theirs) is never written to. Once it is checked, nobody else can
        // rename or replace it (a sticky temporary directory) nor write in it (0700).
        match trusted_root(&root) {
            Ok(true) => {}
            Ok(false) => return Err(untrusted(&root)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}-{nanos}-{n}", std::process::id());
        let lock_path = root.join(format!("{name}.lock"));
        let lock = match private_file().open(&lock_path) {
            Ok(lock) => lock,
            Err(e) => {
                last = Some(e);
                continue;
            }
        };
        if lock.try_lock().is_err() || !same_file(&lock_path, &lock) {
            // Another start swept it between its making and its locking.
            last = Some(io::Error::other("the lock file was swept"));
            continue;
        }
        sweep(&root);
        let dir = root.join(&name);
        if let Err(e) = private_dir(&dir) {
            let _ = fs::remove_file(&lock_path);
            return Err(e);
        }
        return Ok(Held {
            dir,
            lock_path,
            _lock: lock,
        });
    }
    Err(last.unwrap_or_else(|| io::Error::other("no spill directory could be made")))
}

fn untrusted(root: &Path) -> io::Error {
    io::Error::other(format!(
        "{} is not a directory of this user closed to others (a symlink, or another user's); \
         spilled outputs are not written there",
        root.display()
    ))
}

fn private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    // Readable by the owner only: it holds whole tool results.
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Options making a new file readable by the owner only, never through a symlink.
fn private_file() -> fs::OpenOptions {
    let mut options = File::options();
    options.read(true).write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

/// The root is a real directory (not a symlink), owned by this process's user and closed to
/// others, so nobody else can swap what lies in it.
fn trusted_root(root: &Path) -> io::Result<bool> {
    let meta = fs::symlink_metadata(root)?;
    if !meta.is_dir() {
        return Ok(false);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Ok(meta.uid() == nix::unistd::geteuid().as_raw() && meta.mode() & 0o077 == 0)
    }
    #[cfg(not(unix))]
    {
        Ok(true)
    }
}

/// `path` still names the file `file` is open on.
fn same_file(path: &Path, file: &File) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (fs::symlink_metadata(path), file.metadata()) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        path.exists()
    }
}

/// True for the name of an area's directory, `<pid>-<time>-<n>`: the only names the sweep
/// touches.
fn is_area_name(name: &str) -> bool {
    let mut parts = 0;
    for part in name.split('-') {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        parts += 1;
    }
    parts == 3
}

/// Removes each directory of `root` whose lock file is not held (its owner is gone), and that
/// lock file. Only entries named as an area's are looked at, a lock file is opened only when
/// it is a regular file (never through a symlink), and a directory only removed when it is one
/// (`remove_dir_all` removes a symlink itself, never what it points to).
fn sweep(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".lock"))
            .filter(|n| is_area_name(n))
        else {
            continue;
        };
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let mut options = File::options();
        options.read(true).write(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, nix::libc::O_NOFOLLOW);
        let Ok(lock) = options.open(&path) else {
            continue;
        };
        if lock.try_lock().is_ok() && same_file(&path, &lock) {
            let dir = root.join(name);
            if fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
                let _ = fs::remove_dir_all(&dir);
            } else {
                let _ = fs::remove_file(&dir);
            }
            let _ = fs::remove_file(&path);
        }
    }
}

#[cfg(all(test, unix))]
mod tests;
