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
//! reader sees the old file or the new one, never half of one; concurrent writers each write
//! the union of what was on disk and what they hold, and the last rename wins (entries another
//! writer added meanwhile are embedded again next time, never corrupted). Temporary files a
//! crashed writer left are removed by a later save once older than [`STALE_TEMP_AGE`].
//!
//! Reading is bounded: only a regular file (not a symlink, directory or device) is read, and
//! only when its length is the one its header announces for at most [`MAX_CACHED_VECTORS`]
//! entries. A file with a wrong magic, model, size or checksum, or a vector that is not of unit
//! length, is ignored and rewritten.
//!
//! Within a process, each model's file is read once per cache
//! ([`EmbeddingCache::load`] reads it again on demand), and the texts being embedded are
//! registered by (model, hash) so that catalogs sharing the cache never embed the same text at
//! the same time: a second caller waits for the first one's batch.

use std::collections::HashMap;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

/// The most vectors a cache file holds (per model); a file announcing more is refused unread,
/// and a save keeps this many (those in memory first).
pub const MAX_CACHED_VECTORS: usize = 200_000;

/// How old a temporary file of a cache file must be before a save removes it as left by a
/// crashed writer.
pub const STALE_TEMP_AGE: Duration = Duration::from_secs(10 * 60);

/// How far from 1 a cached vector's length may be.
const UNIT_TOLERANCE: f32 = 1e-3;

const MAGIC: &[u8; 8] = b"MCPVEC01";

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
        let bytes = match read_bounded(&path, model, dimension) {
            Ok(Some(b)) => b,
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
                CacheLoad::Loaded(n)
            }
            Err(why) => CacheLoad::Rebuilt(format!("{}: {why}", path.display())),
        }
    }

    /// Writes every unit-length vector of `model` held in memory, merged with what the file
    /// holds now, to `model`'s file (atomically: a new temporary file, then rename), and
    /// removes temporary files of that file older than [`STALE_TEMP_AGE`]. Nothing to do
    /// without a directory.
    pub fn save(&self, model: &str, dimension: usize) -> std::io::Result<()> {
        let Some(path) = self.file_of(model) else {
            return Ok(());
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let mut entries: HashMap<u64, Arc<[f32]>> = HashMap::new();
        for ((m, hash), v) in self.lock().iter() {
            if &**m == model && v.len() == dimension && is_unit(v) {
                entries.insert(*hash, Arc::clone(v));
            }
        }
        if let Ok(Some(bytes)) = read_bounded(&path, model, dimension)
            && let Ok(old) = decode(&bytes, model, dimension)
        {
            for (hash, v) in old {
                if entries.len() >= MAX_CACHED_VECTORS {
                    break;
                }
                entries.entry(hash).or_insert_with(|| Arc::from(v));
            }
        }
        let mut sorted: Vec<_> = entries.into_iter().collect();
        sorted.truncate(MAX_CACHED_VECTORS);
        sorted.sort_unstable_by_key(|(h, _)| *h);
        let bytes = encode(model, dimension, &sorted);
        let base = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("vectors")
            .to_owned();
        remove_stale_temps(dir, &base);
        let (tmp, mut file) = create_temp(dir, &base)?;
        let written = (|| {
            file.write_all(&bytes)?;
            file.sync_all()?;
            drop(file);
            std::fs::rename(&tmp, &path)
        })();
        if written.is_err() {
            std::fs::remove_file(&tmp).ok();
        }
        written
    }
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
fn create_temp(dir: &Path, base: &str) -> std::io::Result<(PathBuf, std::fs::File)> {
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
fn remove_stale_temps(dir: &Path, base: &str) {
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

/// The bytes of the cache file at `path`, `None` when there is none; refused unread when it is
/// not a regular file or its length is not what its header announces (at most
/// [`MAX_CACHED_VECTORS`] entries of `dimension` numbers).
fn read_bounded(path: &Path, model: &str, dimension: usize) -> Result<Option<Vec<u8>>, String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => {}
        Ok(_) => return Err("not a regular file (a symlink, directory or device)".into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    }
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let entry = 8 + 4 * dimension as u64;
    let header = 20 + model.len() as u64;
    let bound = header + MAX_CACHED_VECTORS as u64 * entry + 8;
    let len = meta.len();
    if len > bound {
        return Err(format!(
            "{len} bytes, more than {MAX_CACHED_VECTORS} vectors of {dimension} numbers take"
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
    Ok(Some(bytes))
}

fn encode(model: &str, dimension: usize, entries: &[(u64, Arc<[f32]>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + model.len() + entries.len() * (8 + 4 * dimension));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(dimension as u32).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    out.extend_from_slice(&(model.len() as u32).to_le_bytes());
    out.extend_from_slice(model.as_bytes());
    for (hash, v) in entries {
        out.extend_from_slice(&hash.to_le_bytes());
        for x in v.iter() {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
    let sum = fnv1a(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

type Entries = Vec<(u64, Vec<f32>)>;

fn decode(bytes: &[u8], model: &str, dimension: usize) -> Result<Entries, String> {
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

#[cfg(test)]
mod tests;
