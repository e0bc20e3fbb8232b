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

/// One dependency rule: `package`'s normal dependency tree holds none of `forbidden` (crate
/// name prefixes; `tokio/process` stands for tokio's `process` feature).
fn check_forbidden(package: &str, forbidden: &[&str], why: &str) {
    let tree = cargo_tree(package);
    for line in tree.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        for rule in forbidden {
            let hit = match *rule {
                "tokio/process" => line.contains("tokio feature \"process\""),
                prefix => name == prefix || name.starts_with(&format!("{prefix}-")),
            };
            assert!(
                !hit,
                "{package} must not depend on {rule} ({why}); found `{line}`"
            );
        }
    }
}

/// Rule: the layering of docs/ARCHITECTURE.md, one line per crate. Each names what the crate
/// must not know, so that a backend or a layer can be swapped without touching the others.
#[test]
fn tidy_dependency_rules() {
    let transports = ["mcp-transport-stdio", "mcp-transport-http"];
    let rules: &[(&str, &[&str], &str)] = &[
        (
            "agent-core",
            &[
                "rmcp",
                "hyper",
                "tokio/process",
                "mcp-config",
                "mcp-catalog",
            ],
            "the agent-side vocabulary knows no MCP, HTTP or processes",
        ),
        (
            "mcp-config",
            &["rmcp", "hyper", "tokio/process"],
            "configuration is pure data",
        ),
        (
            "mcp-catalog",
            &[
                transports[0],
                transports[1],
                "mcp-connector",
                "mcp-client",
                "hyper",
                "tokio/process",
            ],
            "the catalog is testable alone and never knows how a session is transported",
        ),
        (
            "mcp-connector",
            &[
                transports[0],
                transports[1],
                "mcp-catalog",
                "mcp-client",
                "hyper",
                "tokio/process",
            ],
            "the seam knows specs and rmcp's transport trait only",
        ),
        (
            "mcp-client",
            &[transports[0], transports[1], "hyper", "tokio/process"],
            "orchestration reaches transports only through the connector trait",
        ),
        (
            "mcp-transport-stdio",
            &["mcp-catalog", "mcp-client", "hyper"],
            "transports never depend on the catalog or the orchestration",
        ),
        (
            "mcp-transport-http",
            &["mcp-catalog", "mcp-client", "tokio/process"],
            "transports never depend on the catalog or the orchestration",
        ),
        (
            "mcp-auth",
            &["mcp-catalog", "mcp-client", "rmcp"],
            "auth is a hook of the HTTP transport",
        ),
        (
            "mcp-agent",
            &["reqwest"],
            "HTTP goes through hyper, so TLS and pooling are ours",
        ),
    ];
    for (package, forbidden, why) in rules {
        check_forbidden(package, forbidden, why);
    }
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
