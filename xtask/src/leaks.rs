//! After the test suite: no server process it started may still be alive.
//!
//! Individual tests check their own servers by pid and process group. This is the net under
//! them: it lists every process whose executable or command line points into this workspace
//! (the target directory, `peers/`, `.peers/`) that did not exist before the suite started.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Result, bail};

/// The pids alive now.
pub(crate) fn snapshot() -> BTreeSet<u32> {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Fails if a process that is not in `before` still runs something from `root` after a short
/// bounded wait (a server killed at the very end of the last test may need a moment to be
/// reaped by init).
pub(crate) fn check(root: &Path, before: &BTreeSet<u32>) -> Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    loop {
        match find(root, before) {
            Ok(()) => return Ok(()),
            Err(e) if std::time::Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(100)),
        }
    }
}

fn find(root: &Path, before: &BTreeSet<u32>) -> Result<()> {
    let root = root.to_string_lossy().into_owned();
    let me = std::process::id();
    let mut leaked = Vec::new();
    for pid in snapshot().difference(before) {
        if *pid == me {
            continue;
        }
        let proc_dir = format!("/proc/{pid}");
        let cmdline = std::fs::read(format!("{proc_dir}/cmdline"))
            .map(|raw| {
                String::from_utf8_lossy(&raw)
                    .replace('\0', " ")
                    .trim()
                    .to_owned()
            })
            .unwrap_or_default();
        let exe = std::fs::read_link(format!("{proc_dir}/exe"))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Zombies have no exe and an empty command line; a zombie of ours is a leak too, but
        // only its parent can reap it, so name it by its stat line.
        let stat = std::fs::read_to_string(format!("{proc_dir}/stat")).unwrap_or_default();
        let ours = exe.starts_with(&root) || cmdline.contains(&root);
        let cargo_or_tooling = cmdline.contains("cargo") || cmdline.contains("rustc");
        if ours && !cargo_or_tooling {
            leaked.push(format!(
                "pid {pid}: {cmdline} [{}]",
                stat.split_whitespace().nth(2).unwrap_or("?")
            ));
        }
    }
    if !leaked.is_empty() {
        bail!(
            "{} process(es) started by the test suite are still alive:\n  {}",
            leaked.len(),
            leaked.join("\n  ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_running_from_the_root_is_found_until_it_is_gone() {
        let root = std::env::temp_dir().join(format!("leak-check-{}", std::process::id()));
        let before = snapshot();
        // `cat - ROOT` waits on its stdin with the root's path in its command line; no
        // grandchild to leave behind.
        let mut child = std::process::Command::new("cat")
            .arg("-")
            .arg(&root)
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Right after the spawn the child may not have exec'd yet: wait, bounded.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let found = loop {
            let found = find(&root, &before);
            if found.is_err() || std::time::Instant::now() > deadline {
                break found;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        child.kill().unwrap();
        child.wait().unwrap();
        let err = found.expect_err("the lingering process is reported");
        assert!(
            err.to_string().contains(&format!("pid {}", child.id())),
            "{err}"
        );
        find(&root, &before).expect("nothing left once it is reaped");
    }
}
