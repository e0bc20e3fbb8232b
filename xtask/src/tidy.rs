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
            "agent-model-openai",
            &[
                "rmcp",
                "mcp-config",
                "mcp-auth",
                "mcp-catalog",
                "mcp-connector",
                "mcp-client",
                transports[0],
                transports[1],
                "reqwest",
            ],
            "the model adapter knows agent-core and HTTP, nothing of MCP",
        ),
        (
            "mcp-embed",
            &[
                "mcp-config",
                "mcp-client",
                "mcp-connector",
                transports[0],
                transports[1],
                "reqwest",
            ],
            "embedding back ends know the catalog's search seam and HTTP, nothing of MCP",
        ),
        (
            "mcp-agent",
            &["reqwest"],
            "HTTP goes through hyper, so TLS and pooling are ours",
        ),
        (
            "mcp-param-headers",
            &["rmcp", "hyper", "tokio", "mcp-config", "agent-core"],
            "the header rules both sides share are pure functions over JSON and headers",
        ),
        (
            "mcp-serve",
            &[
                transports[0],
                transports[1],
                "mcp-client",
                "mcp-connector",
                "reqwest",
            ],
            "serving knows the agent-side traits and rmcp's server side, no client transport",
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

/// Rule: the library's front door pulls in no command-line machinery: no argument parser, no
/// `anyhow`, no server side of rmcp — with default features and without.
#[test]
fn tidy_the_library_has_no_cli_dependencies() {
    for features in [&[][..], &["--no-default-features"]] {
        let out = crate::cargo()
            .current_dir(root())
            .args([
                "tree",
                "--offline",
                "-p",
                "mcp-agent",
                "-e",
                "normal,features",
            ])
            .args(["--prefix", "none"])
            .args(features)
            .output()
            .expect("run cargo tree");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let tree = String::from_utf8(out.stdout).unwrap();
        for line in tree.lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            assert!(
                !["clap", "anyhow"].contains(&name) && !line.starts_with("rmcp feature \"server\""),
                "mcp-agent {features:?} depends on `{line}`"
            );
        }
    }
}

/// Rule: agent-core's `testing` feature (an ungoverned `Permit`, for tests that drive a
/// `CallResolver` directly) never reaches a product: no package's normal dependency tree turns
/// it on, so the governed layer stays the only way to a run's tools.
#[test]
fn tidy_no_product_enables_ungoverned_permits() {
    for dir in crate_dirs() {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let Some(name) = manifest
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|l| l.strip_suffix('"'))
        else {
            continue;
        };
        let tree = cargo_tree(name);
        assert!(
            !tree
                .lines()
                .any(|l| l.starts_with("agent-core feature \"testing\"")),
            "{name} turns on agent-core's `testing` feature outside its dev-dependencies"
        );
    }
}

/// Rule: the README's library example is `examples/embed/src/main.rs` word for word, so the
/// project CI builds and runs is the one a reader copies.
#[test]
fn tidy_the_readme_library_example_is_the_embed_example() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme
        .find("```rust,no_run\nuse mcp_agent::prelude::*;")
        .expect("the README's library example");
    let code = &readme[start..];
    let code = &code[code.find('\n').unwrap() + 1..];
    let code = &code[..code.find("```").unwrap()];
    let example = std::fs::read_to_string(root().join("examples/embed/src/main.rs")).unwrap();
    let body: String = example
        .lines()
        .skip_while(|l| l.starts_with("//!") || l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        body, code,
        "examples/embed/src/main.rs differs from the README"
    );
}

/// Every `.rs` file of the repository (not under `target/`), with its text.
fn sources() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name == "target" || name == "node_modules" {
                continue;
            }
            if path.is_dir() {
                walk(&path, out);
            } else if name.ends_with(".rs") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                out.push((path, text));
            }
        }
    }
    let mut out = Vec::new();
    walk(&root(), &mut out);
    out
}

/// Rule: the docs claim only what exists. Every test the docs name (a backticked name next to
/// the word "test") is a function somewhere, and every backticked source path is a file or
/// folder of the repository (relative to the root, or ending a path that exists).
#[test]
fn tidy_docs_name_only_what_exists() {
    let sources = sources();
    let files: Vec<String> = sources
        .iter()
        .map(|(p, _)| {
            p.strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let mut missing = Vec::new();
    for doc in ["docs/ARCHITECTURE.md", "README.md"] {
        let text = std::fs::read_to_string(root().join(doc)).unwrap();
        let mut spans = text.split('`');
        let mut before = spans.next().unwrap_or("").to_owned();
        while let (Some(span), Some(after)) = (spans.next(), spans.next()) {
            let near = format!("{} {}", tail(&before, 24), head(after, 8));
            let is_ident = !span.is_empty()
                && span
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                && span.contains('_');
            if is_ident && near.contains("test") {
                let def = format!("fn {span}(");
                let file = format!("/{span}.rs");
                if !sources.iter().any(|(_, t)| t.contains(&def))
                    && !files.iter().any(|f| f.ends_with(&file))
                {
                    missing.push(format!("{doc}: test `{span}`"));
                }
            }
            let is_path = span.ends_with(".rs")
                && !span.contains(' ')
                && !span.contains('<')
                && !span.contains('*');
            if is_path
                && !root().join(span).exists()
                && !files
                    .iter()
                    .any(|f| f.ends_with(&format!("/{span}")) || f == span)
            {
                missing.push(format!("{doc}: file `{span}`"));
            }
            before = after.to_owned();
        }
    }
    assert!(
        missing.is_empty(),
        "the docs name what does not exist:\n{}",
        missing.join("\n")
    );
}

fn tail(text: &str, chars: usize) -> String {
    let n = text.chars().count();
    text.chars().skip(n.saturating_sub(chars)).collect()
}

fn head(text: &str, chars: usize) -> String {
    text.chars().take(chars).collect()
}

/// Rule: a package has at most one integration-test binary, `tests/it/main.rs`, with one module
/// per behaviour. Every file directly in `tests/` would be a binary of its own, linked
/// separately: on a 2-core machine the links, not the tests, take the time.
#[test]
fn tidy_one_integration_test_binary_per_crate() {
    for dir in crate_dirs() {
        // The `tests` package keeps its tests in `tests/tests/`, like any other package.
        let Ok(entries) = std::fs::read_dir(dir.join("tests")) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let is_rust = path.extension().is_some_and(|e| e == "rs");
            let is_binary_dir = path.is_dir() && path.join("main.rs").exists();
            assert!(
                !is_rust && (!is_binary_dir || path.ends_with("it")),
                "{} is a test binary of its own: make it a module of tests/it/main.rs",
                path.display()
            );
        }
    }
}
