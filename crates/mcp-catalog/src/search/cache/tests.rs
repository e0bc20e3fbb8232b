//! The disk cache against hostile files and concurrent writers.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::{CacheLoad, EmbeddingCache, MAX_CACHED_VECTORS, STALE_TEMP_AGE, encode};

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
