//! The spill root against what another user (or a stray file) may have put in a shared
//! temporary directory, and the sweep against names and symlinks that would reach outside it.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use crate::{OutputLimits, OutputStore, ToolOutput};

use super::*;

/// A store spilling every output under `parent`.
fn spilling(parent: &Path) -> OutputStore {
    OutputStore::new(
        OutputLimits::default()
            .with_max_output_bytes(1024)
            .with_memory_budget(0)
            .with_spill_dir(parent),
    )
}

/// The marker of an output of 5000 bytes cut by `store`.
fn spill_marker(store: &OutputStore) -> String {
    store
        .limit(ToolOutput::text("s".repeat(5000)))
        .output
        .to_model_text()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn each_user_has_a_root_of_their_own() {
    let parent = tempfile::tempdir().unwrap();
    let store = spilling(parent.path());
    assert!(spill_marker(&store).contains("the rest is kept as"));
    let root = spill_root(parent.path());
    let uid = nix::unistd::geteuid();
    assert_eq!(
        root.file_name().unwrap().to_str().unwrap(),
        format!("mcp-agent-spill-{uid}")
    );
    assert!(store.spill_dir().unwrap().starts_with(&root));
    let mode = fs::metadata(&root).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

#[test]
fn a_root_planted_as_a_symlink_is_never_written_through() {
    let parent = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    fs::set_permissions(elsewhere.path(), fs::Permissions::from_mode(0o700)).unwrap();
    symlink(elsewhere.path(), spill_root(parent.path())).unwrap();

    let store = spilling(parent.path());
    let marker = spill_marker(&store);
    assert!(
        marker.contains("the rest could not be kept") && marker.contains("symlink"),
        "{marker}"
    );
    assert!(store.spill_dir().is_none());
    assert_eq!(
        entries(elsewhere.path()),
        Vec::<String>::new(),
        "nothing made there"
    );
}

#[test]
fn a_root_open_to_others_or_of_another_user_is_refused() {
    let parent = tempfile::tempdir().unwrap();
    let root = spill_root(parent.path());
    fs::create_dir(&root).unwrap();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o777)).unwrap();
    let store = spilling(parent.path());
    let marker = spill_marker(&store);
    assert!(marker.contains("the rest could not be kept"), "{marker}");
    assert_eq!(entries(&root), Vec::<String>::new(), "nothing made in it");

    // Another user's private root (only root can make one for a test).
    if nix::unistd::geteuid().is_root() {
        fs::set_permissions(&root, fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&root, Some(65534), None).unwrap();
        let marker = spill_marker(&store);
        assert!(marker.contains("another user's"), "{marker}");
        assert_eq!(entries(&root), Vec::<String>::new(), "nothing made in it");
    }
}

#[test]
fn the_sweep_touches_only_area_names_and_never_follows_a_symlink() {
    let parent = tempfile::tempdir().unwrap();
    let root = spill_root(parent.path());
    fs::create_dir(&root).unwrap();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o700)).unwrap();
    let canary = parent.path().join("canary");
    fs::write(&canary, "keep").unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("canary"), "keep").unwrap();
    fs::write(outside.path().join("a.lock"), "").unwrap();

    // Free lock files whose names would make the sweep remove the root itself (`.lock`), the
    // temporary directory (`...lock`), or something that is not an area's.
    for name in [".lock", "...lock", "x.lock"] {
        fs::write(root.join(name), "").unwrap();
    }
    fs::create_dir(root.join("x")).unwrap();
    // An area-named lock file and directory that are symlinks to what lies outside.
    symlink(outside.path().join("a.lock"), root.join("3-300-0.lock")).unwrap();
    symlink(outside.path(), root.join("3-300-0")).unwrap();
    // A dead area whose directory is a symlink: the link goes, not what it points to.
    fs::write(root.join("4-400-0.lock"), "").unwrap();
    symlink(outside.path(), root.join("4-400-0")).unwrap();

    let store = spilling(parent.path());
    assert!(spill_marker(&store).contains("the rest is kept as"));
    assert!(canary.exists(), "the temporary directory is left alone");
    assert!(outside.path().join("canary").exists());
    assert!(outside.path().join("a.lock").exists());
    assert!(root.join(".lock").exists() && root.join("...lock").exists());
    assert!(root.join("x").is_dir() && root.join("x.lock").exists());
    assert!(
        root.join("3-300-0.lock").is_symlink(),
        "a symlinked lock is never opened"
    );
    assert!(!root.join("4-400-0").is_symlink() && !root.join("4-400-0.lock").exists());
    drop(store);
}

#[test]
fn two_areas_of_one_process_never_sweep_each_other() {
    let parent = tempfile::tempdir().unwrap();
    let first = spilling(parent.path());
    let handle = first
        .limit(ToolOutput::text("f".repeat(5000)))
        .handle
        .unwrap();
    let dir = first.spill_dir().unwrap();
    // A second area (its own lock file) sweeps the root when it makes its directory: the
    // first one's lock is held through another open file description, so it stays.
    let second = spilling(parent.path());
    assert!(spill_marker(&second).contains("the rest is kept as"));
    assert_ne!(second.spill_dir().unwrap(), dir);
    assert!(dir.is_dir());
    assert_eq!(first.read(&handle, 4990, 100).unwrap().text, "f".repeat(10));
}

#[test]
fn max_spill_bytes_0_makes_nothing_on_disk() {
    let parent = tempfile::tempdir().unwrap();
    let store = OutputStore::new(
        OutputLimits::default()
            .with_max_output_bytes(1024)
            .with_memory_budget(0)
            .with_max_spill_bytes(0)
            .with_spill_dir(parent.path()),
    );
    let marker = spill_marker(&store);
    assert!(marker.contains("max_spill_bytes (0 bytes)"), "{marker}");
    assert_eq!(entries(parent.path()), Vec::<String>::new());
}
