//! The disk cache against hostile files and concurrent writers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use super::{
    CacheLoad, EmbeddingCache, MAX_CACHE_FILE_BYTES, MAX_CACHED_VECTORS, STALE_TEMP_AGE, encode,
    max_entries,
};

/// Where a save is, for the hook of [`Probe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// About to take the model's write lock.
    Waiting,
    /// Holds the write lock and has cloned the model's vectors, not checked yet.
    Snapshot,
    /// Holds the write lock and has written the temporary file: about to rename it.
    Rename,
}

type Hook = Arc<dyn Fn(Step) + Send + Sync>;

/// What the tests observe of a cache: how often it read its file, and a hook at each step of
/// a save.
#[derive(Default)]
pub(super) struct Probe {
    pub(super) reads: AtomicU64,
    hook: Mutex<Option<Hook>>,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe").field("reads", &self.reads).finish()
    }
}

impl Probe {
    pub(super) fn step(&self, step: Step) {
        let hook = self.hook.lock().unwrap().clone();
        if let Some(hook) = hook {
            hook(step);
        }
    }
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-vec-c-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_vector_not_of_unit_length_is_corruption() {
    let dir = temp_dir("unit");
    let cache = EmbeddingCache::on_disk(&dir);
    let file = cache.file_of("m").unwrap();
    let bytes = encode("m", 2, &[(1, Arc::from(vec![3.0f32, 4.0]))]);
    std::fs::write(&file, bytes).unwrap();
    assert!(matches!(cache.load("m", 2), CacheLoad::Rebuilt(why) if why.contains("unit")));
    assert!(cache.get("m", 1).is_none());
    // A unit vector in the same layout is read.
    std::fs::write(&file, encode("m", 2, &[(1, Arc::from(vec![0.6f32, 0.8]))])).unwrap();
    assert_eq!(cache.load("m", 2), CacheLoad::Loaded(1));
    // A non-unit vector inserted in memory is never written.
    cache.insert("m", 2, vec![3.0, 4.0]);
    cache.save("m", 2).unwrap();
    assert_eq!(
        EmbeddingCache::on_disk(&dir).load("m", 2),
        CacheLoad::Loaded(1)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[cfg(unix)]
#[test]
fn a_cache_file_symlinked_to_a_device_is_refused_unread() {
    let dir = temp_dir("zero");
    let cache = EmbeddingCache::on_disk(&dir);
    let file = cache.file_of("m").unwrap();
    std::os::unix::fs::symlink("/dev/zero", &file).unwrap();
    // Without the check this read would never end.
    assert!(matches!(cache.load("m", 2), CacheLoad::Rebuilt(why) if why.contains("regular")));
    // A save replaces the link itself, never writing through it.
    cache.insert("m", 1, vec![1.0, 0.0]);
    cache.save("m", 2).unwrap();
    assert!(
        std::fs::symlink_metadata(&file)
            .unwrap()
            .file_type()
            .is_file()
    );
    assert_eq!(
        EmbeddingCache::on_disk(&dir).load("m", 2),
        CacheLoad::Loaded(1)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_oversized_cache_file_is_refused_before_it_is_read() {
    let dir = temp_dir("huge");
    let cache = EmbeddingCache::on_disk(&dir);
    let file = cache.file_of("m").unwrap();
    // A sparse file of 1 GiB behind a valid header: refused by its length alone.
    let mut bytes = encode("m", 2, &[(1, Arc::from(vec![1.0f32, 0.0]))]);
    std::fs::write(&file, &bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    assert!(matches!(cache.load("m", 2), CacheLoad::Rebuilt(why) if why.contains("bytes")));
    // A header announcing more entries than allowed is refused too.
    bytes[12..16].copy_from_slice(&(MAX_CACHED_VECTORS as u32 + 1).to_le_bytes());
    std::fs::write(&file, &bytes).unwrap();
    assert!(matches!(cache.load("m", 2), CacheLoad::Rebuilt(why) if why.contains("announces")));
    // A header whose count disagrees with the length.
    bytes[12..16].copy_from_slice(&2u32.to_le_bytes());
    std::fs::write(&file, &bytes).unwrap();
    assert!(matches!(cache.load("m", 2), CacheLoad::Rebuilt(why) if why.contains("size")));
    std::fs::remove_dir_all(&dir).ok();
}

#[cfg(unix)]
#[test]
fn a_save_never_follows_a_planted_temporary_name() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = temp_dir("plant");
    let victim = dir.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let cache = EmbeddingCache::on_disk(&dir);
    let file = cache.file_of("m").unwrap();
    let base = file.file_name().unwrap().to_str().unwrap().to_owned();
    // The names an earlier writer used: `.<file>.<pid>.<counter>.tmp`.
    for n in 0..64 {
        let name = format!(".{base}.{}.{n}.tmp", std::process::id());
        std::os::unix::fs::symlink(&victim, dir.join(name)).unwrap();
    }
    for i in 0..8u64 {
        cache.insert("m", i, vec![0.0, 1.0]);
        cache.save("m", 2).unwrap();
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    assert_eq!(
        EmbeddingCache::on_disk(&dir).load("m", 2),
        CacheLoad::Loaded(8)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_save_removes_stale_temporary_files_only() {
    let dir = temp_dir("stale");
    let cache = EmbeddingCache::on_disk(&dir);
    let file = cache.file_of("m").unwrap();
    let base = file.file_name().unwrap().to_str().unwrap().to_owned();
    let stale = dir.join(format!(".{base}.crashed.tmp"));
    let fresh = dir.join(format!(".{base}.writing.tmp"));
    let other = dir.join(".another.vectors.old.tmp");
    for f in [&stale, &fresh, &other] {
        std::fs::write(f, b"half").unwrap();
    }
    let long_ago = SystemTime::now() - STALE_TEMP_AGE - Duration::from_secs(60);
    for f in [&stale, &other] {
        std::fs::File::options()
            .write(true)
            .open(f)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
    }
    cache.insert("m", 1, vec![1.0, 0.0]);
    cache.save("m", 2).unwrap();
    assert!(!stale.exists(), "a crashed writer's file is removed");
    assert!(fresh.exists(), "a live writer's file is kept");
    assert!(other.exists(), "another file's temporaries are not ours");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn each_model_file_is_read_once_per_cache() {
    let dir = temp_dir("once");
    let writer = EmbeddingCache::on_disk(&dir);
    writer.insert("m", 1, vec![1.0, 0.0]);
    writer.save("m", 2).unwrap();
    let cache = Arc::new(EmbeddingCache::on_disk(&dir));
    assert_eq!(cache.load_once("m", 2).await, Some(CacheLoad::Loaded(1)));
    // Spoiled afterwards: not read again.
    std::fs::write(cache.file_of("m").unwrap(), b"garbage").unwrap();
    assert_eq!(cache.load_once("m", 2).await, None);
    assert!(cache.get("m", 1).is_some());
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn a_claimed_text_is_waited_for_and_released_on_drop() {
    let cache = Arc::new(EmbeddingCache::in_memory());
    let (first, theirs) = cache.claim("m", &[1, 2]);
    assert_eq!(first.hashes(), &[1, 2]);
    assert!(theirs.is_empty());
    let (second, mut theirs) = cache.claim("m", &[2, 3]);
    assert_eq!(second.hashes(), &[3]);
    assert_eq!(theirs.len(), 1);
    assert_eq!(theirs[0].0, 2);
    // Another model's texts are not the same texts.
    let (other, _) = cache.claim("n", &[1]);
    assert_eq!(other.hashes(), &[1]);
    drop(first);
    // The waiter wakes once the first claim is gone.
    assert!(theirs[0].1.changed().await.is_err());
    let (third, theirs) = cache.claim("m", &[1, 2, 3]);
    assert_eq!(third.hashes(), &[1, 2]);
    assert_eq!(theirs.len(), 1);
}

impl EmbeddingCache {
    fn set_hook(&self, hook: impl Fn(Step) + Send + Sync + 'static) {
        *self.probe.hook.lock().unwrap() = Some(Arc::new(hook));
    }

    fn reads(&self) -> u64 {
        self.probe.reads.load(Ordering::SeqCst)
    }
}

#[test]
fn a_save_reads_the_file_only_when_another_writer_changed_it() {
    let dir = temp_dir("reread");
    let cache = EmbeddingCache::on_disk(&dir);
    cache.insert("m", 1, vec![1.0, 0.0]);
    cache.save("m", 2).unwrap();
    cache.insert("m", 2, vec![0.0, 1.0]);
    cache.save("m", 2).unwrap();
    // Everything in the file came from memory: never read back.
    assert_eq!(cache.reads(), 0);
    // Another writer adds an entry.
    let other = EmbeddingCache::on_disk(&dir);
    other.insert("m", 3, vec![0.6, 0.8]);
    other.save("m", 2).unwrap();
    assert_eq!(other.reads(), 1, "a file this cache never saw is merged");
    cache.insert("m", 4, vec![0.8, 0.6]);
    cache.save("m", 2).unwrap();
    assert_eq!(cache.reads(), 1, "the changed file is merged once");
    assert!(
        cache.get("m", 3).is_some(),
        "and its entries taken into memory"
    );
    cache.insert("m", 5, vec![1.0, 0.0]);
    cache.save("m", 2).unwrap();
    assert_eq!(cache.reads(), 1);
    assert_eq!(
        EmbeddingCache::on_disk(&dir).load("m", 2),
        CacheLoad::Loaded(5)
    );
    // A file loaded is not read again by the next save either.
    let loaded = EmbeddingCache::on_disk(&dir);
    assert_eq!(loaded.load("m", 2), CacheLoad::Loaded(5));
    loaded.insert("m", 6, vec![0.0, 1.0]);
    loaded.save("m", 2).unwrap();
    assert_eq!(loaded.reads(), 1);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_file_over_the_byte_bound_is_refused_unread() {
    let dir = temp_dir("bytes");
    let cache = EmbeddingCache::on_disk(&dir);
    let file = cache.file_of("m").unwrap();
    // Vectors of 100,000 numbers: 700 of them are far fewer than MAX_CACHED_VECTORS but take
    // more than MAX_CACHE_FILE_BYTES. A sparse file of exactly the length its header announces.
    let dimension = 100_000usize;
    let mut head = encode("m", dimension, &[]);
    head.truncate(head.len() - 8);
    head[12..16].copy_from_slice(&700u32.to_le_bytes());
    std::fs::write(&file, &head).unwrap();
    let len = head.len() as u64 + 700 * (8 + 4 * dimension as u64) + 8;
    assert!(len > MAX_CACHE_FILE_BYTES);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(len)
        .unwrap();
    assert!(
        matches!(cache.load("m", dimension), CacheLoad::Rebuilt(why) if why.contains("bytes")),
        "refused by its length, not read and found corrupted"
    );
    // A save keeps to both bounds.
    let entry = 8 + 4 * 1536;
    assert_eq!(
        max_entries("m", 1536) as u64,
        (MAX_CACHE_FILE_BYTES - 29) / entry
    );
    assert_eq!(max_entries("m", 2), MAX_CACHED_VECTORS);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn two_saves_at_once_never_lose_the_later_batch() {
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc;
    let dir = temp_dir("race");
    let cache = Arc::new(EmbeddingCache::on_disk(&dir));
    cache.insert("m", 1, vec![1.0, 0.0]);
    // The first save stops before its rename until the second one is done or waits for it.
    let (to_first, first_hears) = mpsc::channel::<&'static str>();
    let (to_test, test_hears) = mpsc::channel::<()>();
    let first_hears = Mutex::new(first_hears);
    let to_first_hook = Mutex::new(to_first.clone());
    let to_test = Mutex::new(to_test);
    let first = AtomicBool::new(true);
    cache.set_hook(move |step| match step {
        Step::Rename if first.swap(false, Ordering::SeqCst) => {
            to_test.lock().unwrap().send(()).unwrap();
            first_hears.lock().unwrap().recv().unwrap();
        }
        Step::Waiting if !first.load(Ordering::SeqCst) => {
            to_first_hook.lock().unwrap().send("waiting").unwrap();
        }
        _ => {}
    });
    let a = {
        let cache = Arc::clone(&cache);
        std::thread::spawn(move || cache.save("m", 2).unwrap())
    };
    test_hears.recv().unwrap();
    // A batch finishes while the first save is writing: the second save must carry it.
    cache.insert("m", 2, vec![0.0, 1.0]);
    let b = {
        let cache = Arc::clone(&cache);
        std::thread::spawn(move || {
            cache.save("m", 2).unwrap();
            to_first.send("done").ok();
        })
    };
    a.join().unwrap();
    b.join().unwrap();
    let fresh = EmbeddingCache::on_disk(&dir);
    assert_eq!(fresh.load("m", 2), CacheLoad::Loaded(2));
    assert!(fresh.get("m", 2).is_some(), "the later batch is on disk");
    std::fs::remove_dir_all(&dir).ok();
}

#[cfg(unix)]
#[test]
fn a_fifo_or_symlink_is_refused_by_the_open_itself() {
    use std::sync::mpsc;
    let dir = temp_dir("fifo");
    let fifo = dir.join("fifo");
    nix::unistd::mkfifo(
        &fifo,
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    )
    .unwrap();
    // Opening a FIFO without a writer blocks forever unless opened non-blocking: the check
    // runs on another thread so that a regression fails here instead of hanging the suite.
    let (tx, rx) = mpsc::channel();
    let path = fifo.clone();
    std::thread::spawn(move || tx.send(super::open_regular(&path).map(|f| f.is_some())));
    let opened = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("opening a FIFO blocked");
    assert!(
        matches!(&opened, Err(why) if why.contains("regular")),
        "{opened:?}"
    );
    // A symlink, even to a regular file, is refused by the open (nothing swapped in between a
    // check and the open can be read).
    let target = dir.join("target");
    std::fs::write(&target, b"x").unwrap();
    let link = dir.join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let opened = super::open_regular(&link).map(|f| f.is_some());
    assert!(
        matches!(&opened, Err(why) if why.contains("symlink")),
        "{opened:?}"
    );
    assert!(matches!(super::open_regular(&target), Ok(Some(_))));
    assert!(matches!(super::open_regular(&dir.join("none")), Ok(None)));
    // The cache file itself a FIFO: the load is refused, never stuck.
    let cache = EmbeddingCache::on_disk(&dir);
    std::fs::rename(&fifo, cache.file_of("m").unwrap()).unwrap();
    assert!(matches!(cache.load("m", 2), CacheLoad::Rebuilt(why) if why.contains("regular")));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_save_holds_the_memory_lock_only_to_clone_the_vectors() {
    let dir = temp_dir("snapshot");
    let cache = Arc::new(EmbeddingCache::on_disk(&dir));
    for i in 0..64u64 {
        cache.insert("m", i, vec![0.6, 0.8]);
    }
    let weak = Arc::downgrade(&cache);
    let free = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&free);
    cache.set_hook(move |step| {
        if let (Step::Snapshot | Step::Rename, Some(cache)) = (step, weak.upgrade()) {
            // Catalogs sharing the cache read and insert while the save checks and writes.
            seen.lock().unwrap().push(cache.vectors.try_lock().is_ok());
        }
    });
    cache.save("m", 2).unwrap();
    assert_eq!(*free.lock().unwrap(), [true, true]);
    assert_eq!(
        EmbeddingCache::on_disk(&dir).load("m", 2),
        CacheLoad::Loaded(64)
    );
    std::fs::remove_dir_all(&dir).ok();
}
