//! Repository conventions, checked by tests rather than by review.
//!
//! Each rule says why it exists.

#![cfg(test)]

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn cargo_tree(package: &str) -> String {
    let out = crate::cargo()
        .current_dir(root())
        .args([
            "tree",
            "--offline",
            "-p",
            package,
            "-e",
            "normal,build,features",
            "--prefix",
            "none",
        ])
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn crate_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<_> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    dirs.push(root().join("xtask"));
    dirs.push(root().join("tests"));
    dirs.sort();
    dirs
}

/// Rule: `agent-core` is the agent-side vocabulary and must stay free of MCP, HTTP and process
/// spawning, so that any agent can depend on it and MCP stays one pluggable source of tools.
#[test]
fn tidy_agent_core_knows_no_mcp() {
    let tree = cargo_tree("agent-core");
    for line in tree.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        assert!(!name.starts_with("rmcp"), "agent-core depends on {line}");
        assert!(!name.starts_with("hyper"), "agent-core depends on {line}");
        assert!(
            !line.contains("tokio feature \"process\""),
            "agent-core enables {line}"
        );
    }
}

/// Rule: the catalog is usable and testable alone; it never knows how a session is transported.
#[test]
fn tidy_catalog_knows_no_transport() {
    let tree = cargo_tree("mcp-catalog");
    for line in tree.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        assert!(
            !name.starts_with("mcp-transport"),
            "mcp-catalog depends on {line}"
        );
        assert!(!name.starts_with("hyper"), "mcp-catalog depends on {line}");
        assert!(
            !line.contains("tokio feature \"process\""),
            "mcp-catalog enables {line}"
        );
    }
}

/// Rule: no crate of the tree pulls reqwest; HTTP goes through hyper so TLS and pooling are ours.
#[test]
fn tidy_no_reqwest() {
    let tree = cargo_tree("mcp-agent");
    assert!(
        !tree.lines().any(|l| l.starts_with("reqwest")),
        "reqwest in the tree of mcp-agent"
    );
}

/// Rule: lints are set once for the workspace; a crate that opts out loses `missing_docs` and
/// friends silently.
#[test]
fn tidy_every_crate_uses_workspace_lints() {
    for dir in crate_dirs() {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(
            manifest.contains("[lints]\nworkspace = true"),
            "{} lacks `[lints] workspace = true`",
            dir.display()
        );
    }
}

/// Rule: the code map names every crate, so a newcomer finds each one there.
#[test]
fn tidy_architecture_names_every_crate() {
    let map = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    for dir in crate_dirs() {
        let rel = dir
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        assert!(
            map.contains(&format!("`{rel}`")),
            "docs/ARCHITECTURE.md does not mention `{rel}`"
        );
    }
}
