//! Tool vectors cached by (model, document hash): in memory, and optionally in a directory.
//!
//! On disk each model has one file, `<model>-<hash of model id>.vectors`:
//!
//! ```text
//! "MCPVEC01" | dimension u32 | count u32 | model id length u32 | model id
//! | count × (document hash u64 | dimension × f32) | FNV-1a 64 of everything before
//! ```
//!
//! all little-endian. A file is written whole to a temporary file in the same directory and
//! renamed over the old one, so a reader sees the old file or the new one, never half of one;
//! concurrent writers each write the union of what was on disk and what they hold, and the last
//! rename wins (entries another writer added meanwhile are embedded again next time, never
//! corrupted). A file with a wrong magic, model, size or checksum is ignored and rewritten.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const MAGIC: &[u8; 8] = b"MCPVEC01";

/// Vectors by (model, document hash).
type VectorMap = HashMap<(Arc<str>, u64), Arc<[f32]>>;

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
            vectors: Mutex::default(),
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
        self.vectors.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The vector of `model` for the document of hash `doc`.
    pub fn get(&self, model: &str, doc: u64) -> Option<Arc<[f32]>> {
        self.lock().get(&(Arc::from(model), doc)).cloned()
    }

    /// Holds `vector` for (`model`, `doc`).
    pub fn insert(&self, model: &str, doc: u64, vector: Vec<f32>) {
        self.lock()
            .insert((Arc::from(model), doc), Arc::from(vector));
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
    /// check out is ignored.
    pub fn load(&self, model: &str, dimension: usize) -> CacheLoad {
        let Some(path) = self.file_of(model) else {
            return CacheLoad::Missing;
        };
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return CacheLoad::Missing,
            Err(e) => return CacheLoad::Rebuilt(format!("{}: {e}", path.display())),
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

    /// Writes every vector of `model` held in memory, merged with what the file holds now, to
    /// `model`'s file (atomically: temporary file, then rename). Nothing to do without a
    /// directory.
    pub fn save(&self, model: &str, dimension: usize) -> std::io::Result<()> {
        let Some(path) = self.file_of(model) else {
            return Ok(());
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let mut entries: HashMap<u64, Arc<[f32]>> = HashMap::new();
        if let Ok(bytes) = std::fs::read(&path)
            && let Ok(old) = decode(&bytes, model, dimension)
        {
            for (hash, v) in old {
                entries.insert(hash, Arc::from(v));
            }
        }
        for ((m, hash), v) in self.lock().iter() {
            if &**m == model && v.len() == dimension {
                entries.insert(*hash, Arc::clone(v));
            }
        }
        let mut sorted: Vec<_> = entries.into_iter().collect();
        sorted.sort_unstable_by_key(|(h, _)| *h);
        let bytes = encode(model, dimension, &sorted);
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let tmp = dir.join(format!(
            ".{}.{}.{}.tmp",
            path.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("vectors"),
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            std::fs::rename(&tmp, &path)
        })();
        if written.is_err() {
            std::fs::remove_file(&tmp).ok();
        }
        written
    }
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
        out.push((u64::from_le_bytes(h), v));
    }
    Ok(out)
}
