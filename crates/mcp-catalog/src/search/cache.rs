//! Tool vectors cached by (model, document hash): in memory, and optionally in a directory.
//!
//! On disk each model has one file, `<model>-<hash of model id>.vectors`:
//!
//! ```text
//! "MCPVEC01" | dimension u32 | count u32 | model id length u32 | model id
//! | count × (document hash u64 | dimension × f32) | FNV-1a 64 of everything before
//! ```
//!
//! all little-endian. A file is written whole to a temporary file in the same directory (a
//! fresh random name opened with `create_new`, mode 0600 on unix, so a planted symlink or
//! another writer's file is never followed or truncated) and renamed over the old one, so a
//! reader sees the old file or the new one, never half of one. A save merges what the file
//! holds only when another writer changed it since this cache last read or wrote it (its
//! length, modification time or inode differ): otherwise everything in it is in memory already
//! and it is not read again. Writers of other processes each write the union of what was on
//! disk and what they hold, and the last rename wins (entries another writer added meanwhile
//! are embedded again next time, never corrupted); saves of one cache and model run one at a
//! time, from the snapshot of memory to the rename, so a later batch is never overwritten by an
//! earlier snapshot. The in-memory lock is held only to clone the model's vectors (their
//! lengths are checked afterwards). Temporary files a crashed writer left are removed by a
//! later save once older than [`STALE_TEMP_AGE`].
//!
//! Reading is bounded: only a regular file is read (on unix it is opened with `O_NOFOLLOW |
//! O_NONBLOCK` and the opened handle checked, so a symlink, directory, device or FIFO swapped
//! in is refused without blocking), and only when its length is the one its header announces
//! for at most [`MAX_CACHED_VECTORS`] entries and [`MAX_CACHE_FILE_BYTES`] bytes. A file with a
//! wrong magic, model, size or checksum, or a vector that is not of unit length, is ignored and
//! rewritten.
//!
//! Within a process, each model's file is read once per cache
//! ([`EmbeddingCache::load`] reads it again on demand), and the texts being embedded are
//! registered by (model, hash) so that catalogs sharing the cache never embed the same text at
//! the same time: a second caller waits for the first one's batch.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use file::{
    Entries, Stamp, create_temp, decode, encode_to, max_entries, read_bounded, remove_stale_temps,
};
#[cfg(test)]
use file::{encode, open_regular};

/// The most vectors a cache file holds (per model); a file announcing more is refused unread,
/// and a save keeps this many (those in memory first).
pub const MAX_CACHED_VECTORS: usize = 200_000;

/// The longest a cache file may be (256 MiB, about 43,000 vectors of 1,536 numbers); a longer
/// file is refused unread, and a save keeps as many vectors as fit (those in memory first).
pub const MAX_CACHE_FILE_BYTES: u64 = 256 << 20;

/// How old a temporary file of a cache file must be before a save removes it as left by a
/// crashed writer.
pub const STALE_TEMP_AGE: Duration = Duration::from_secs(10 * 60);

/// How far from 1 a cached vector's length may be.
const UNIT_TOLERANCE: f32 = 1e-3;

/// Vectors by (model, document hash).
type VectorMap = HashMap<(Arc<str>, u64), Arc<[f32]>>;

/// The texts being embedded, by (model, document hash): the claim's id and its receiver.
type InFlight = HashMap<(Arc<str>, u64), (u64, watch::Receiver<()>)>;

/// FNV-1a, 64 bits: stable across builds and platforms, unlike the std hashers.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The key of a document's vector: a hash of its embedded text.
pub(crate) fn document_hash(text: &str) -> u64 {
    // Length first, so two texts must collide in both to share a key.
    fnv1a(text.as_bytes()) ^ (text.len() as u64).rotate_left(32)
}

/// What happened to a cache file when it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheLoad {
    /// No file yet.
    Missing,
    /// Read, with this many vectors.
    Loaded(usize),
    /// Unreadable, cut short or corrupted: ignored, rebuilt at the next save. The text says how.
    Rebuilt(String),
}

/// Tool vectors of one or more models, keyed by (model, document hash).
///
/// ```
/// use mcp_catalog::search::EmbeddingCache;
///
/// let dir = std::env::temp_dir().join(format!("mcp-vec-doc-{}", std::process::id()));
/// let cache = EmbeddingCache::on_disk(&dir);
/// cache.insert("m", 7, vec![1.0, 0.0]);
/// cache.save("m", 2).unwrap();
///
/// let again = EmbeddingCache::on_disk(&dir);
/// again.load("m", 2);
/// assert_eq!(again.get("m", 7).as_deref(), Some(&[1.0f32, 0.0][..]));
/// # std::fs::remove_dir_all(&dir).ok();
/// ```
#[derive(Debug, Default)]
pub struct EmbeddingCache {
    dir: Option<PathBuf>,
    vectors: Mutex<VectorMap>,
    /// Each model's file, read once (the first caller reads, the others wait).
    loaded: Mutex<HashMap<Arc<str>, Arc<tokio::sync::OnceCell<()>>>>,
    /// The texts being embedded now, by (model, hash): the claim's id and a receiver that
    /// wakes when its batch is over.
    in_flight: Mutex<InFlight>,
    /// Each model's file as this cache last read or wrote it.
    stamps: Mutex<HashMap<Arc<str>, Stamp>>,
    /// One save at a time per model, from the snapshot of memory to the rename.
    writing: Mutex<HashMap<Arc<str>, Arc<Mutex<()>>>>,
    #[cfg(test)]
    probe: tests::Probe,
}

/// The texts one caller embeds now ([`EmbeddingCache::claim`]); dropping it releases them and
/// wakes whoever waits for them.
#[derive(Debug)]
pub(crate) struct Claim {
    cache: Arc<EmbeddingCache>,
    model: Arc<str>,
    id: u64,
    hashes: Vec<u64>,
    _done: watch::Sender<()>,
}

impl Claim {
    /// The hashes claimed.
    pub(crate) fn hashes(&self) -> &[u64] {
        &self.hashes
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut map = lock(&self.cache.in_flight);
        for &h in &self.hashes {
            let key = (Arc::clone(&self.model), h);
            if map.get(&key).is_some_and(|(id, _)| *id == self.id) {
                map.remove(&key);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// True when `v` has length 1 (within [`UNIT_TOLERANCE`]).
fn is_unit(v: &[f32]) -> bool {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    (norm - 1.0).abs() <= UNIT_TOLERANCE
}

impl EmbeddingCache {
    /// A cache held in memory only.
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// A cache kept in `dir` as well (created when first saved).
    pub fn on_disk(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: Some(dir.into()),
            ..Self::default()
        }
    }

    /// The directory, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// How many vectors are held, over all models.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no vector is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VectorMap> {
        lock(&self.vectors)
    }

    /// The vector of `model` for the document of hash `doc`.
    pub fn get(&self, model: &str, doc: u64) -> Option<Arc<[f32]>> {
        self.lock().get(&(Arc::from(model), doc)).cloned()
    }

    /// Holds `vector` for (`model`, `doc`). Vectors are of unit length (as the catalog's
    /// checks make them); others are held but never saved.
    pub fn insert(&self, model: &str, doc: u64, vector: Vec<f32>) {
        self.lock()
            .insert((Arc::from(model), doc), Arc::from(vector));
    }

    /// Claims the texts of `hashes` not already being embedded by another caller: returns the
    /// claim (what this caller embeds; release it by dropping it once their vectors are in
    /// the cache, or not) and, for the others, a receiver whose `changed()` returns when
    /// their batch is over.
    pub(crate) fn claim(
        self: &Arc<Self>,
        model: &str,
        hashes: &[u64],
    ) -> (Claim, Vec<(u64, watch::Receiver<()>)>) {
        static CLAIMS: AtomicU64 = AtomicU64::new(1);
        let id = CLAIMS.fetch_add(1, Ordering::Relaxed);
        let model: Arc<str> = Arc::from(model);
        let (done, rx) = watch::channel(());
        let mut mine = Vec::new();
        let mut theirs = Vec::new();
        let mut map = lock(&self.in_flight);
        for &h in hashes {
            let key = (Arc::clone(&model), h);
            match map.get(&key) {
                Some((_, other)) => theirs.push((h, other.clone())),
                None => {
                    map.insert(key, (id, rx.clone()));
                    mine.push(h);
                }
            }
        }
        drop(map);
        let claim = Claim {
            cache: Arc::clone(self),
            model,
            id,
            hashes: mine,
            _done: done,
        };
        (claim, theirs)
    }

    /// [`load`](Self::load) on the blocking pool, the first time this cache is asked for
    /// `model` (concurrent callers wait for that read); `None` after that.
    pub(crate) async fn load_once(
        self: &Arc<Self>,
        model: &str,
        dimension: usize,
    ) -> Option<CacheLoad> {
        self.dir.as_ref()?;
        let cell = Arc::clone(lock(&self.loaded).entry(Arc::from(model)).or_default());
        let mut outcome = None;
        cell.get_or_init(|| async {
            let this = Arc::clone(self);
            let owned = model.to_owned();
            let read = tokio::task::spawn_blocking(move || this.load(&owned, dimension)).await;
            outcome =
                Some(read.unwrap_or_else(|e| CacheLoad::Rebuilt(format!("reading failed: {e}"))));
        })
        .await;
        outcome
    }

    /// [`save`](Self::save) on the blocking pool.
    pub(crate) async fn save_blocking(
        self: &Arc<Self>,
        model: &str,
        dimension: usize,
    ) -> std::io::Result<()> {
        if self.dir.is_none() {
            return Ok(());
        }
        let this = Arc::clone(self);
        let model = model.to_owned();
        tokio::task::spawn_blocking(move || this.save(&model, dimension))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }

    /// The file of `model`'s vectors in the cache directory.
    pub fn file_of(&self, model: &str) -> Option<PathBuf> {
        let safe: String = model
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        let name = format!("{safe}-{:016x}.vectors", fnv1a(model.as_bytes()));
        self.dir.as_ref().map(|d| d.join(name))
    }

    /// Reads `model`'s file into memory (entries of `dimension` numbers). A file that does not
    /// check out is ignored; so is anything but a regular file, and a file longer than its
    /// header says or than [`MAX_CACHED_VECTORS`] entries take, which is refused unread.
    pub fn load(&self, model: &str, dimension: usize) -> CacheLoad {
        let Some(path) = self.file_of(model) else {
            return CacheLoad::Missing;
        };
        let (bytes, stamp) = match self.read_bounded(&path, model, dimension) {
            Ok(Some(read)) => read,
            Ok(None) => return CacheLoad::Missing,
            Err(why) => return CacheLoad::Rebuilt(format!("{}: {why}", path.display())),
        };
        match decode(&bytes, model, dimension) {
            Ok(entries) => {
                let n = entries.len();
                let model: Arc<str> = Arc::from(model);
                let mut map = self.lock();
                for (hash, v) in entries {
                    map.insert((Arc::clone(&model), hash), Arc::from(v));
                }
                drop(map);
                lock(&self.stamps).insert(model, stamp);
                CacheLoad::Loaded(n)
            }
            Err(why) => CacheLoad::Rebuilt(format!("{}: {why}", path.display())),
        }
    }

    /// The lock that makes the saves of `model` run one at a time.
    fn writing(&self, model: &str) -> Arc<Mutex<()>> {
        Arc::clone(lock(&self.writing).entry(Arc::from(model)).or_default())
    }

    /// The vectors of `model` of `dimension` numbers, cloned under the lock (checked by the
    /// caller, after it).
    fn snapshot(&self, model: &str, dimension: usize) -> Vec<(u64, Arc<[f32]>)> {
        self.lock()
            .iter()
            .filter(|((m, _), v)| &**m == model && v.len() == dimension)
            .map(|((_, hash), v)| (*hash, Arc::clone(v)))
            .collect()
    }

    /// The file's entries this cache does not hold, when another writer changed the file since
    /// this cache last read or wrote it (they are taken into memory too); none otherwise.
    fn changed_entries(&self, path: &Path, model: &str, dimension: usize) -> Entries {
        let now = std::fs::symlink_metadata(path).ok().map(|m| Stamp::of(&m));
        if now.is_none() || now == lock(&self.stamps).get(model).copied() {
            return Vec::new();
        }
        let Ok(Some((bytes, _))) = self.read_bounded(path, model, dimension) else {
            return Vec::new();
        };
        let Ok(entries) = decode(&bytes, model, dimension) else {
            return Vec::new();
        };
        let model: Arc<str> = Arc::from(model);
        let mut map = self.lock();
        entries
            .into_iter()
            .filter(|(hash, v)| {
                let key = (Arc::clone(&model), *hash);
                if map.get(&key).is_some_and(|held| held.len() == dimension) {
                    return false;
                }
                map.insert(key, Arc::from(v.as_slice()));
                true
            })
            .collect()
    }

    /// [`read_bounded`] of this cache's file (counted in tests).
    fn read_bounded(
        &self,
        path: &Path,
        model: &str,
        dimension: usize,
    ) -> Result<Option<(Vec<u8>, Stamp)>, String> {
        #[cfg(test)]
        self.probe.reads.fetch_add(1, Ordering::SeqCst);
        read_bounded(path, model, dimension)
    }

    /// Writes every unit-length vector of `model` held in memory to `model`'s file
    /// (atomically: a new temporary file, then rename), merged with what the file holds when
    /// another writer changed it since this cache last read or wrote it, and removes temporary
    /// files of that file older than [`STALE_TEMP_AGE`]. At most [`MAX_CACHED_VECTORS`]
    /// vectors and [`MAX_CACHE_FILE_BYTES`] bytes are written, those in memory first. Saves of
    /// one model run one at a time. Nothing to do without a directory.
    pub fn save(&self, model: &str, dimension: usize) -> std::io::Result<()> {
        let Some(path) = self.file_of(model) else {
            return Ok(());
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        #[cfg(test)]
        self.probe.step(tests::Step::Waiting);
        let writing = self.writing(model);
        let _one = lock(&writing);
        let mut entries = self.snapshot(model, dimension);
        #[cfg(test)]
        self.probe.step(tests::Step::Snapshot);
        entries.retain(|(_, v)| is_unit(v));
        let held: std::collections::HashSet<u64> = entries.iter().map(|(h, _)| *h).collect();
        for (hash, v) in self.changed_entries(&path, model, dimension) {
            if !held.contains(&hash) && is_unit(&v) {
                entries.push((hash, Arc::from(v)));
            }
        }
        entries.truncate(max_entries(model, dimension));
        entries.sort_unstable_by_key(|(h, _)| *h);
        let base = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("vectors")
            .to_owned();
        remove_stale_temps(dir, &base);
        let (tmp, file) = create_temp(dir, &base)?;
        let written = (|| {
            let mut out = std::io::BufWriter::new(file);
            encode_to(&mut out, model, dimension, &entries)?;
            let file = out.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
            let stamp = Stamp::of(&file.metadata()?);
            drop(file);
            #[cfg(test)]
            self.probe.step(tests::Step::Rename);
            std::fs::rename(&tmp, &path)?;
            Ok(stamp)
        })();
        match written {
            Ok(stamp) => {
                lock(&self.stamps).insert(Arc::from(model), stamp);
                Ok(())
            }
            Err(e) => {
                std::fs::remove_file(&tmp).ok();
                Err(e)
            }
        }
    }
}

mod file;

#[cfg(test)]
mod tests;
