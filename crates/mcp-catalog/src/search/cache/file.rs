//! The cache file itself: opened without following links or blocking, read within bounds,
//! written as it is encoded, checked when decoded. The format is in the parent module's docs.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use super::{MAX_CACHE_FILE_BYTES, MAX_CACHED_VECTORS, STALE_TEMP_AGE, fnv1a, is_unit};

const MAGIC: &[u8; 8] = b"MCPVEC01";

/// What a cache file looked like when this cache last read or wrote it: while it still looks
/// so, everything in it is in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl Stamp {
    pub(super) fn of(meta: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(meta);
        #[cfg(not(unix))]
        let inode = 0;
        Self {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode,
        }
    }
}

/// How many vectors of `dimension` numbers a file of `model` holds at most: within
/// [`MAX_CACHED_VECTORS`] and [`MAX_CACHE_FILE_BYTES`].
pub(super) fn max_entries(model: &str, dimension: usize) -> usize {
    let entry = 8 + 4 * dimension as u64;
    let room = MAX_CACHE_FILE_BYTES.saturating_sub(20 + model.len() as u64 + 8);
    usize::try_from(room / entry).map_or(MAX_CACHED_VECTORS, |n| n.min(MAX_CACHED_VECTORS))
}

/// A random 64-bit number (std's per-process random hasher keys, the time and a counter).
fn random_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish()
}

/// A new temporary file `.<base>.<random>.tmp` in `dir`: created, never opened if it exists
/// (nor a symlink followed), readable by its owner only on unix.
pub(super) fn create_temp(dir: &Path, base: &str) -> std::io::Result<(PathBuf, std::fs::File)> {
    let mut last = None;
    for _ in 0..16 {
        let tmp = dir.join(format!(".{base}.{:016x}.tmp", random_suffix()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600);
        }
        match options.open(&tmp) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free temporary name")))
}

/// Removes the temporary files of `base` in `dir` older than [`STALE_TEMP_AGE`] (a crashed
/// writer's); symlinks are removed, never followed.
pub(super) fn remove_stale_temps(dir: &Path, base: &str) {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{base}.");
    for entry in listing.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if !name.starts_with(&prefix) || !name.ends_with(".tmp") {
            continue;
        }
        let old = std::fs::symlink_metadata(entry.path())
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= STALE_TEMP_AGE);
        if old {
            std::fs::remove_file(entry.path()).ok();
        }
    }
}

/// The file at `path` opened for reading if it is a regular file, `None` when there is none.
/// On unix a symlink is refused by `open` itself (`O_NOFOLLOW`) and a FIFO opens without
/// blocking (`O_NONBLOCK`); the handle's own metadata then decides, so nothing swapped in
/// between a check and the open is ever read.
pub(super) fn open_regular(
    path: &Path,
) -> Result<Option<(std::fs::File, std::fs::Metadata)>, String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    #[cfg(not(unix))]
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => {}
        Ok(_) => return Err("not a regular file (a symlink, directory or device)".into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    }
    let file = match options.open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err("not a regular file (a symlink)".into());
        }
        Err(e) => return Err(e.to_string()),
    };
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file (a directory, FIFO, socket or device)".into());
    }
    Ok(Some((file, meta)))
}

/// The bytes of the cache file at `path` and its stamp, `None` when there is none; refused
/// unread when it is not a regular file ([`open_regular`]) or its length is not what its
/// header announces (at most [`MAX_CACHED_VECTORS`] entries of `dimension` numbers, at most
/// [`MAX_CACHE_FILE_BYTES`] bytes).
pub(super) fn read_bounded(
    path: &Path,
    model: &str,
    dimension: usize,
) -> Result<Option<(Vec<u8>, Stamp)>, String> {
    let Some((file, meta)) = open_regular(path)? else {
        return Ok(None);
    };
    let entry = 8 + 4 * dimension as u64;
    let header = 20 + model.len() as u64;
    let bound = (header + MAX_CACHED_VECTORS as u64 * entry + 8).min(MAX_CACHE_FILE_BYTES);
    let len = meta.len();
    if len > bound {
        return Err(format!(
            "{len} bytes, more than {bound} ({MAX_CACHED_VECTORS} vectors of {dimension} \
             numbers, {MAX_CACHE_FILE_BYTES} bytes at most)"
        ));
    }
    let mut reader = file.take(bound + 1);
    let mut head = vec![0u8; 20.min(len as usize)];
    reader.read_exact(&mut head).map_err(|e| e.to_string())?;
    if head.len() == 20 && &head[..8] == MAGIC {
        let count = u64::from(u32::from_le_bytes([head[12], head[13], head[14], head[15]]));
        if count > MAX_CACHED_VECTORS as u64 {
            return Err(format!(
                "announces {count} vectors, more than {MAX_CACHED_VECTORS}"
            ));
        }
        if len != header + count * entry + 8 {
            return Err("wrong size".into());
        }
    }
    let mut bytes = Vec::with_capacity(len as usize);
    bytes.extend_from_slice(&head);
    reader.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    if bytes.len() as u64 > bound {
        return Err("longer than its header says".into());
    }
    Ok(Some((bytes, Stamp::of(&meta))))
}

/// A writer that hashes (FNV-1a 64) what passes through it.
struct Hashing<W> {
    inner: W,
    sum: u64,
}

impl<W: std::io::Write> std::io::Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        for &b in &buf[..n] {
            self.sum ^= u64::from(b);
            self.sum = self.sum.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes the file of `entries` to `out` as it goes (no copy of the whole file in memory).
pub(super) fn encode_to(
    out: &mut impl std::io::Write,
    model: &str,
    dimension: usize,
    entries: &[(u64, Arc<[f32]>)],
) -> std::io::Result<()> {
    let mut w = Hashing {
        inner: &mut *out,
        sum: 0xcbf2_9ce4_8422_2325,
    };
    w.write_all(MAGIC)?;
    w.write_all(&(dimension as u32).to_le_bytes())?;
    w.write_all(&(entries.len() as u32).to_le_bytes())?;
    w.write_all(&(model.len() as u32).to_le_bytes())?;
    w.write_all(model.as_bytes())?;
    let mut row = Vec::with_capacity(8 + 4 * dimension);
    for (hash, v) in entries {
        row.clear();
        row.extend_from_slice(&hash.to_le_bytes());
        for x in v.iter() {
            row.extend_from_slice(&x.to_le_bytes());
        }
        w.write_all(&row)?;
    }
    let sum = w.sum;
    out.write_all(&sum.to_le_bytes())
}

/// The whole file of `entries`, in memory.
#[cfg(test)]
pub(super) fn encode(model: &str, dimension: usize, entries: &[(u64, Arc<[f32]>)]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_to(&mut out, model, dimension, entries).expect("a Vec takes every write");
    out
}

pub(super) type Entries = Vec<(u64, Vec<f32>)>;

pub(super) fn decode(bytes: &[u8], model: &str, dimension: usize) -> Result<Entries, String> {
    let u32_at = |at: usize| -> Result<usize, String> {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or_else(|| "cut short".to_owned())
    };
    if bytes.len() < 28 || &bytes[..8] != MAGIC {
        return Err("not a vector cache file".into());
    }
    let (body, sum) = bytes.split_at(bytes.len() - 8);
    let mut sum_bytes = [0u8; 8];
    sum_bytes.copy_from_slice(sum);
    if fnv1a(body) != u64::from_le_bytes(sum_bytes) {
        return Err("checksum mismatch (cut short or corrupted)".into());
    }
    let dim = u32_at(8)?;
    let count = u32_at(12)?;
    let model_len = u32_at(16)?;
    let model_end = 20usize.saturating_add(model_len);
    if body.get(20..model_end) != Some(model.as_bytes()) {
        return Err("written for another model".into());
    }
    if dim != dimension {
        return Err(format!("dimension {dim}, the model's is {dimension}"));
    }
    let entry = 8 + 4 * dim;
    if body.len() != model_end + count.saturating_mul(entry) {
        return Err("wrong size".into());
    }
    let mut out = Vec::with_capacity(count);
    for chunk in body[model_end..].chunks_exact(entry) {
        let mut h = [0u8; 8];
        h.copy_from_slice(&chunk[..8]);
        let v: Vec<f32> = chunk[8..]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if v.iter().any(|x| !x.is_finite()) {
            return Err("a vector holds a NaN".into());
        }
        if !is_unit(&v) {
            return Err("a vector is not of unit length".into());
        }
        out.push((u64::from_le_bytes(h), v));
    }
    Ok(out)
}
