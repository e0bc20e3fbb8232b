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
    cargo_tree_with(package, "normal,build,features", &[])
}

/// `package`'s dependency tree over `edges` with `features` (feature flags), one crate a line.
fn cargo_tree_with(package: &str, edges: &str, features: &[&str]) -> String {
    let out = crate::cargo()
        .current_dir(root())
        .args(["tree", "--offline", "-p", package, "-e", edges])
        .args(["--prefix", "none"])
        .args(features)
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every workspace member's directory, relative to the root (`crates/agent-core`, `xtask`,
/// `examples/embed`…), as cargo reads the workspace.
fn workspace_members() -> Vec<String> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut members: Vec<String> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|package| {
            let manifest = PathBuf::from(package["manifest_path"].as_str()?);
            let dir = manifest.parent()?.strip_prefix(root()).ok()?.to_owned();
            Some(dir.to_string_lossy().replace('\\', "/"))
        })
        .collect();
    members.sort();
    members
}

fn crate_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<_> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    dirs.push(root().join("xtask"));
    dirs.push(root().join("tests"));
    // Not examples/embed: a workspace member, but written as a user's package (no workspace
    // lints; its section of the code map is checked with every member's).
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
            &["mcp-catalog", "mcp-client", "rmcp", "mcp-state", "redis"],
            "auth is a hook of the HTTP transport; a fleet's token store is a seam it defines",
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
            "mcp-embed-local",
            &[
                "mcp-config",
                "mcp-client",
                "mcp-connector",
                transports[0],
                transports[1],
                "hyper",
                "reqwest",
            ],
            "the local model knows the catalog's search seam, nothing of MCP or HTTP",
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
                "mcp-state",
                "redis",
                "reqwest",
            ],
            "serving knows the agent-side traits and rmcp's server side, no client transport",
        ),
        (
            "mcp-state",
            &[
                "agent-core",
                "mcp-config",
                "rmcp",
                "hyper",
                "tokio/process",
                "aws-lc",
                "openssl-sys",
                "native-tls",
                "reqwest",
            ],
            "shared state is Redis and ring only: no MCP, no HTTP, one crypto stack",
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

/// Rule: the code map has a section for every workspace member, as cargo reads the workspace (a
/// `### `<its directory>`` heading: `crates/<name>`, `xtask`, `tests`, `examples/embed`), so a
/// newcomer finds each one there and a merge that adds a member without its section fails.
#[test]
fn tidy_architecture_has_a_section_per_crate() {
    let map = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let headings: Vec<&str> = map.lines().filter(|l| l.starts_with("### ")).collect();
    let missing: Vec<String> = workspace_members()
        .into_iter()
        .filter(|rel| !headings.contains(&format!("### `{rel}`").as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md has no section `### `<crate>`` for: {}",
        missing.join(", ")
    );
}

/// Rule: the code map stays a map (at most 300 lines) and the README a guide (at most 450): figures
/// and measurement logs go to `docs/benchmarks.md`, every key of a table to its reference page
/// (`docs/serve.md`, `docs/auth.md`), the reasoning behind a number to the code that depends on it.
/// A document nobody reads to the end is not kept current.
#[test]
fn tidy_docs_stay_short() {
    for (doc, max) in [("docs/ARCHITECTURE.md", 300), ("README.md", 450)] {
        let lines = std::fs::read_to_string(root().join(doc))
            .unwrap()
            .lines()
            .count();
        assert!(
            lines <= max,
            "{doc} has {lines} lines, more than {max}: move figures to docs/benchmarks.md and cut \
             repeated prose"
        );
    }
}

/// Rule: comments and docs stand alone. A citation of a requirement id from a document that is
/// not in the repository (`SPEC` followed by an id such as `A7`, `FR-`/`NFR-` numbers) tells
/// the reader nothing; say what the requirement is instead.
#[test]
fn tidy_no_requirement_ids_from_outside() {
    fn is_id(rest: &str) -> bool {
        let mut chars = rest.chars();
        matches!(chars.next(), Some(c) if c.is_ascii_uppercase())
            && matches!(chars.next(), Some(c) if c.is_ascii_digit())
    }
    let spec = ["SP", "EC "].concat();
    let numbered = [["F", "R-"].concat(), ["NF", "R-"].concat()];
    let mut found = Vec::new();
    let docs = [
        "README.md",
        "docs/ARCHITECTURE.md",
        "docs/benchmarks.md",
        "docs/upstream.md",
        "docs/serve.md",
        "docs/auth.md",
        "docs/metrics.md",
        "docs/tracing.md",
        "peers/README.md",
    ];
    let texts = sources().into_iter().chain(docs.iter().filter_map(|doc| {
        let path = root().join(doc);
        std::fs::read_to_string(&path).ok().map(|text| (path, text))
    }));
    for (path, text) in texts {
        for (n, line) in text.lines().enumerate() {
            let spec_id = line
                .match_indices(&spec)
                .any(|(i, _)| is_id(&line[i + spec.len()..]));
            let numbered_id = numbered.iter().any(|prefix| {
                line.match_indices(prefix.as_str()).any(|(i, _)| {
                    let before = line[..i].chars().next_back();
                    !before.is_some_and(|c| c.is_ascii_alphanumeric())
                        && line[i + prefix.len()..].starts_with(|c: char| c.is_ascii_digit())
                })
            });
            if spec_id || numbered_id {
                let rel = path.strip_prefix(root()).unwrap_or(&path).display();
                found.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "requirement ids of a document outside the repository:\n{}",
        found.join("\n")
    );
}

/// Rule: the library's front door pulls in no command-line machinery: no argument parser, no
/// `anyhow`, no server side of rmcp — with default features and without.
#[test]
fn tidy_the_library_has_no_cli_dependencies() {
    for features in [&[][..], &["--no-default-features"]] {
        for line in cargo_tree_with("mcp-agent", "normal,features", features).lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            assert!(
                !["clap", "anyhow"].contains(&name) && !line.starts_with("rmcp feature \"server\""),
                "mcp-agent {features:?} depends on `{line}`"
            );
        }
    }
}

/// Rule: a stdio-only build of the facade has no OAuth stack: `mcp-auth` (and with it `ring`,
/// `base64` and the token exchange) comes only with the `http` feature, its OAuth parts only
/// with `oauth`. `url` stays, through `mcp-config`'s HTTP specs.
#[test]
fn tidy_a_stdio_only_facade_has_no_oauth_stack() {
    let features = ["--no-default-features", "--features", "stdio"];
    for line in cargo_tree_with("mcp-agent", "normal,features", &features).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        assert!(
            !["mcp-auth", "ring", "base64", "mcp-transport-http"].contains(&name),
            "mcp-agent with only `stdio` depends on `{line}`"
        );
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
/// package CI checks and runs is the one a reader copies.
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
    for doc in [
        "docs/ARCHITECTURE.md",
        "README.md",
        "docs/serve.md",
        "docs/auth.md",
        "docs/metrics.md",
        "docs/tracing.md",
    ] {
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

/// Rule: every rmcp workaround has its entry in `docs/upstream.md`, and every entry its
/// workaround. A comment links its entry by that file's path and the entry's anchor (a `### `
/// heading); each anchor a source file links is an entry, each entry is linked from at least
/// one source file, and each `crates/` path an entry names exists. On an rmcp upgrade the file
/// is the list to go through, so neither a workaround missing from it nor an entry whose code
/// is gone may pass.
#[test]
fn tidy_upstream_workarounds_are_linked() {
    let doc = std::fs::read_to_string(root().join("docs/upstream.md")).unwrap();
    let entries: Vec<&str> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .map(str::trim)
        .collect();
    let marker = ["docs/upstream", ".md#"].concat();
    let mut linked = std::collections::BTreeSet::new();
    let mut problems = Vec::new();
    for (path, text) in sources() {
        let rel = path
            .strip_prefix(root())
            .unwrap_or(&path)
            .display()
            .to_string();
        for (i, _) in text.match_indices(&marker) {
            let anchor: String = text[i + marker.len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
                .collect();
            if !entries.contains(&anchor.as_str()) {
                problems.push(format!("{rel}: links `{anchor}`, which is no entry"));
            }
            linked.insert(anchor);
        }
    }
    for entry in &entries {
        if !linked.contains(*entry) {
            problems.push(format!("entry `{entry}` is linked from no source file"));
        }
    }
    for span in doc.split('`').skip(1).step_by(2) {
        if span.starts_with("crates/") && !root().join(span).exists() {
            problems.push(format!("entry names `{span}`, which does not exist"));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/upstream.md and the code's links to it disagree:\n{}",
        problems.join("\n")
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

/// The module path of `rel`, a file under a crate's `src/`: `lib.rs`/`main.rs` are the root,
/// `a.rs` and `a/mod.rs` are `a`, `a/b.rs` is `a::b`.
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if matches!(parts.as_slice(), [one] if one == "lib" || one == "main")
        || parts.last().is_some_and(|l| l == "mod")
    {
        parts.pop();
    }
    parts
}

/// `text` without `//` comments (doc links are not imports) and without
/// `#[cfg(test)] mod name { … }` blocks.
fn import_text(text: &str) -> String {
    let code: String = text
        .lines()
        .map(|l| match l.find("//") {
            Some(at) if !l[..at].contains('"') => &l[..at],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = String::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = rest[at + "#[cfg(test)]".len()..].trim_start();
        let is_block = after.starts_with("mod ")
            && after
                .find(['{', ';'])
                .is_some_and(|i| after.as_bytes()[i] == b'{');
        if !is_block {
            out.push_str("#[cfg(test)]");
            rest = &rest[at + "#[cfg(test)]".len()..];
            continue;
        }
        let open = after.find('{').unwrap();
        let mut depth = 0usize;
        let mut end = after.len();
        for (i, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The paths written at the start of `s` (just past `crate::`, `super::` or `self::`), as
/// segment lists, with use-groups (`{a::X, b}`) expanded.
fn path_tails(s: &str) -> Vec<Vec<String>> {
    let s = s.trim_start();
    if let Some(group) = s.strip_prefix('{') {
        let mut depth = 0usize;
        let mut items = Vec::new();
        let mut start = 0;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    items.push(&group[start..i]);
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&group[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        return items.into_iter().flat_map(path_tails).collect();
    }
    let ident: String = s
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if ident.is_empty() {
        return vec![Vec::new()];
    }
    let rest = &s[ident.len()..];
    match rest.trim_start().strip_prefix("::") {
        Some(more) => path_tails(more)
            .into_iter()
            .map(|mut tail| {
                tail.insert(0, ident.clone());
                tail
            })
            .collect(),
        None => vec![vec![ident]],
    }
}

/// The file-to-file import edges of one crate, `files` being (path under `src/`, text):
/// `crate::`, `super::` and `self::` paths anywhere in a file (outside comments and
/// `#[cfg(test)] mod … { }` blocks), each mapped to the longest module prefix that is a file.
/// A module's `pub use` re-exports of its own descendants are not edges (a facade is the
/// normal shape), nor are `mod x;` declarations (they are not paths).
fn import_edges(files: &[(String, String)]) -> Vec<(String, String, String)> {
    let modules: std::collections::HashMap<Vec<String>, &str> = files
        .iter()
        .map(|(rel, _)| (module_of(rel), rel.as_str()))
        .collect();
    let codes: Vec<String> = files.iter().map(|(_, text)| import_text(text)).collect();
    let spans: Vec<_> = codes.iter().map(|code| reexport_spans(code)).collect();
    // What each module re-exports: a path through it names the item where it is defined.
    let renamed: std::collections::HashMap<
        Vec<String>,
        std::collections::HashMap<String, Vec<String>>,
    > = files
        .iter()
        .zip(codes.iter().zip(&spans))
        .map(|((rel, _), (code, spans))| {
            let here = module_of(rel);
            let names = reexported_names(&here, code, spans);
            (here, names)
        })
        .collect();
    // The longest module prefix of `full` that is a file, after following re-exports.
    let resolve = |mut full: Vec<String>| -> Option<Vec<String>> {
        for _ in 0..8 {
            let target = (0..=full.len())
                .rev()
                .map(|n| &full[..n])
                .find(|m| modules.contains_key(*m))
                .map(<[String]>::to_vec)?;
            let source = full
                .get(target.len())
                .and_then(|name| renamed.get(&target)?.get(name));
            match source {
                Some(source) if !source.starts_with(&full[..=target.len()]) => {
                    let rest = full.split_off(target.len() + 1);
                    full = source.clone();
                    full.extend(rest);
                }
                _ => return Some(target),
            }
        }
        None
    };
    let mut edges = Vec::new();
    for ((rel, _), (code, reexports)) in files.iter().zip(codes.iter().zip(&spans)) {
        let here = module_of(rel);
        for anchor in ["crate::", "super::", "self::"] {
            for (at, _) in code.match_indices(anchor) {
                let before = code[..at].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':') {
                    continue;
                }
                let mut base = match anchor {
                    "crate::" => Vec::new(),
                    _ => here.clone(),
                };
                let mut tail_at = at + anchor.len();
                if anchor == "super::" {
                    base.pop();
                    while code[tail_at..].starts_with("super::") {
                        base.pop();
                        tail_at += "super::".len();
                    }
                }
                let in_reexport = reexports.iter().any(|r| r.contains(&at));
                for tail in path_tails(&code[tail_at..]) {
                    let mut full = base.clone();
                    full.extend(tail);
                    let Some(target) = resolve(full) else {
                        continue;
                    };
                    if target == here || (in_reexport && target.starts_with(&here)) {
                        continue;
                    }
                    let name = format!(
                        "{}{}",
                        anchor,
                        code[tail_at..]
                            .split([';', '\n', '(', ' '])
                            .next()
                            .unwrap_or("")
                    );
                    edges.push((rel.clone(), modules[&target].to_owned(), name));
                }
            }
        }
    }
    edges.sort();
    edges.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    edges
}

/// The spans of `code`'s `pub … use …;` statements.
fn reexport_spans(code: &str) -> Vec<std::ops::Range<usize>> {
    let mut spans = Vec::new();
    for (at, _) in code.match_indices("pub") {
        let after = code[at + 3..].trim_start();
        let after = if after.starts_with('(') {
            after.find(')').map_or("", |i| after[i + 1..].trim_start())
        } else {
            after
        };
        if after.starts_with("use ") {
            let end = code[at..].find(';').map_or(code.len(), |i| at + i);
            spans.push(at..end);
        }
    }
    spans
}

/// The names module `here` re-exports in `spans` of its `code` (`pub use list::{Limit, x::Y};`),
/// each with the module path it names (`list::Limit`, `list::x::Y`). A glob names nothing (a
/// path through it stays with the re-exporting file), a rename is known by its original name.
fn reexported_names(
    here: &[String],
    code: &str,
    spans: &[std::ops::Range<usize>],
) -> std::collections::HashMap<String, Vec<String>> {
    let mut names = std::collections::HashMap::new();
    for span in spans {
        let text = &code[span.clone()];
        let Some(at) = text.find("use ") else {
            continue;
        };
        let mut rest = text[at + 4..].trim_start();
        let mut base = here.to_vec();
        if let Some(after) = rest.strip_prefix("crate::") {
            base.clear();
            rest = after;
        } else if let Some(after) = rest.strip_prefix("self::") {
            rest = after;
        } else {
            while let Some(after) = rest.strip_prefix("super::") {
                base.pop();
                rest = after;
            }
        }
        for tail in path_tails(rest) {
            let Some(name) = tail.last().cloned() else {
                continue;
            };
            let mut full = base.clone();
            full.extend(tail);
            names.insert(name, full);
        }
    }
    names
}

/// Every import circle among `files` (see [`import_edges`]), one line per edge inside a
/// circle: `a.rs → b.rs (crate::b::X)`.
fn import_circles(files: &[(String, String)]) -> Vec<String> {
    let edges = import_edges(files);
    let reaches = |from: &str, to: &str| {
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(node) = stack.pop() {
            if node == to {
                return true;
            }
            if seen.insert(node.clone()) {
                stack.extend(edges.iter().filter(|e| e.0 == node).map(|e| e.1.clone()));
            }
        }
        false
    };
    edges
        .iter()
        .filter(|(from, to, _)| reaches(to, from))
        .map(|(from, to, name)| format!("{from} → {to} ({name})"))
        .collect()
}

#[test]
fn import_circles_are_found() {
    let files = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    };
    let circle = files(&[
        ("lib.rs", "mod a;\nmod b;\npub use crate::a::{A, b::B};\n"),
        ("a.rs", "use crate::{b::B, Top};\npub struct A;\n"),
        ("a/c.rs", "use super::super::b::B;\n"),
        (
            "b.rs",
            "// crate::a::A in a comment\nfn f() -> super::a::c::C { todo!() }\n",
        ),
    ]);
    // a.rs → b.rs is not in the circle: nothing leads back to a.rs.
    assert_eq!(
        import_circles(&circle),
        [
            "a/c.rs → b.rs (super::b::B)",
            "b.rs → a/c.rs (super::a::c::C)"
        ]
    );
    // A circle through the crate root's re-exports: `crate::Limit` is `list.rs`'s.
    let through_root = files(&[
        (
            "lib.rs",
            "mod error;\nmod list;\npub use list::{Limit, Limits};\npub use error::Error;\n",
        ),
        ("error.rs", "use crate::Limit;\npub struct Error;\n"),
        ("list.rs", "use crate::Error;\npub struct Limit;\n"),
    ]);
    assert_eq!(
        import_circles(&through_root),
        [
            "error.rs → list.rs (crate::Limit)",
            "list.rs → error.rs (crate::Error)"
        ]
    );
    // Not circles: a facade re-exporting its children, a test block, a comment, a parent's
    // own use of its child when the child does not use the parent.
    let clean = files(&[
        (
            "lib.rs",
            "mod a;\npub(crate) use crate::a::A;\npub use self::b::B;\n",
        ),
        (
            "a.rs",
            "use crate::Top;\n#[cfg(test)]\nmod tests {\n    use crate::b::B;\n}\n",
        ),
        ("b.rs", "// use crate::a::A;\nuse crate::a::A;\n"),
    ]);
    assert_eq!(import_circles(&clean), Vec::<String>::new());
}

/// Rule: no two files of a crate import each other, directly or around a circle (a file is one
/// job; a circle means two jobs share a piece that belongs in a file of its own). Integration
/// tests, benches, examples and `src/bin/` programs are not part of the graph.
#[test]
fn tidy_no_import_circles() {
    fn walk(src: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path != src.join("bin") {
                    walk(src, &path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path
                    .strip_prefix(src)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let mut report = Vec::new();
    for dir in crate_dirs() {
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        let mut files = Vec::new();
        walk(&src, &src, &mut files);
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        report.extend(
            import_circles(&files)
                .into_iter()
                .map(|line| format!("{name}: {line}")),
        );
    }
    assert!(
        report.is_empty(),
        "files of a crate import each other (move the shared piece into the lower file or a \
         file of its own):\n{}",
        report.join("\n")
    );
}

/// Words that make a `static` (or `thread_local!`) item a holder of secrets, in its name.
const SECRET_STATIC_WORDS: &[&str] = &["SECRET", "LEARNED", "KNOWN", "REDACT", "SCRUB"];

/// Words that make a type a secret engine, in its name.
const ENGINE_WORDS: &[&str] = &["Scrubber", "Redactor", "Sanitizer"];

/// The one secret engine and the one printer of an error's cause chain.
const THE_ENGINE: (&str, &str) = ("crates/agent-core/src/redact.rs", "Redactor");
const THE_CHAIN_PRINTER: &str = "crates/agent-core/src/error.rs";

/// The name declared after `keyword ` on a code line (`pub(crate) struct Name<…>` → `Name`).
fn declared(line: &str, keyword: &str) -> Option<String> {
    let code = line.trim_start();
    let at = code.find(&format!("{keyword} "))?;
    // Only visibility and qualifiers may come first (`pub(crate) async fn`); `static mut` too.
    let qualifier = |w: &str| w.starts_with("pub") || ["async", "const", "unsafe"].contains(&w);
    if !code[..at].split_whitespace().all(qualifier) {
        return None;
    }
    let rest = code[at + keyword.len() + 1..].trim_start();
    let rest = rest.strip_prefix("mut ").unwrap_or(rest);
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// What breaks the secret rules in the file `rel` (a path from the repository root): a second
/// secret-engine type, a `static` holding secrets (by its name, or a `Redactor` / `Secret` in
/// its type), a second `fn error_chain`.
fn secret_rule_findings(rel: &str, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let at = format!("{rel}:{}", n + 1);
        for keyword in ["struct", "enum", "type", "trait"] {
            if let Some(name) = declared(line, keyword)
                && ENGINE_WORDS.iter().any(|w| name.contains(w))
                && (rel, name.as_str()) != THE_ENGINE
            {
                found.push(format!("{at}: a second secret engine `{name}`"));
            }
        }
        if let Some(name) = declared(line, "static") {
            let upper = name.to_ascii_uppercase();
            let ty = code.split_once(':').map_or("", |(_, ty)| ty);
            let holds = |word: &str| {
                ty.split(|c: char| !c.is_alphanumeric() && c != '_')
                    .any(|t| t == word)
            };
            if SECRET_STATIC_WORDS.iter().any(|w| upper.contains(w))
                || holds("Redactor")
                || holds("Secret")
            {
                found.push(format!("{at}: secrets in the static `{name}`"));
            }
        }
        if declared(line, "fn").as_deref() == Some("error_chain") && rel != THE_CHAIN_PRINTER {
            found.push(format!(
                "{at}: a second `fn error_chain` (use agent_core::error_chain)"
            ));
        }
    }
    found
}

#[test]
fn secret_rule_findings_are_precise() {
    let flagged = |rel: &str, text: &str| secret_rule_findings(rel, text).len();
    // Flagged: another engine, process-wide secrets, a second chain printer.
    assert_eq!(flagged("crates/x/src/a.rs", "pub struct Scrubber {"), 1);
    assert_eq!(
        flagged("crates/x/src/a.rs", "pub(crate) async fn error_chain() {"),
        1
    );
    assert_eq!(
        flagged("crates/x/src/a.rs", "pub(crate) struct SentScrubbers;"),
        1
    );
    assert_eq!(flagged("crates/x/src/a.rs", "pub type Sanitizer = Foo;"), 1);
    assert_eq!(flagged("crates/x/src/a.rs", "pub struct Redactor;"), 1);
    assert_eq!(
        flagged(
            "crates/x/src/a.rs",
            "static LEARNED: RwLock<Vec<String>> = x;"
        ),
        1
    );
    assert_eq!(
        flagged(
            "crates/x/src/a.rs",
            "    pub(crate) static known_values: X = x;"
        ),
        1
    );
    assert_eq!(
        flagged(
            "crates/x/src/a.rs",
            "static ENGINE: OnceLock<Redactor> = OnceLock::new();"
        ),
        1
    );
    assert_eq!(
        flagged(
            "crates/x/src/a.rs",
            "thread_local! {\n    static TOKENS: RefCell<Vec<Secret>> = x;\n}"
        ),
        1
    );
    assert_eq!(
        flagged(
            "crates/x/tests/it/a.rs",
            "fn error_chain(e: &dyn Error) -> String {"
        ),
        1
    );
    // Not flagged: the engine itself, the printer itself, unrelated statics and types,
    // comments.
    assert_eq!(flagged(THE_ENGINE.0, "pub struct Redactor {"), 0);
    assert_eq!(
        flagged(
            THE_CHAIN_PRINTER,
            "pub fn error_chain(error: &E) -> String {"
        ),
        0
    );
    assert_eq!(
        flagged(
            "crates/x/src/a.rs",
            "static NEXT_ID: AtomicU64 = AtomicU64::new(0);"
        ),
        0
    );
    assert_eq!(
        flagged("crates/x/src/a.rs", "pub const MIN_SECRET_LEN: usize = 6;"),
        0
    );
    assert_eq!(
        flagged("crates/x/src/a.rs", "pub struct Scrubbed { text: String }"),
        0
    );
    assert_eq!(
        flagged("crates/x/src/a.rs", "let redactor = Redactor::new();"),
        0
    );
    assert_eq!(
        flagged("crates/x/src/a.rs", "fn f(x: &'static SecretSink) {}"),
        0
    );
    assert_eq!(flagged("crates/x/src/a.rs", "// static LEARNED: X;"), 0);
    assert_eq!(
        flagged(
            "crates/x/src/a.rs",
            "    assert!(error_chain(&e).contains(\"x\"));"
        ),
        0
    );
}

/// Rule: one secret engine, no process-wide secret state, one printer of a cause chain. Every
/// place that shows or passes on text uses `agent_core::Redactor`, owned by the run (or the
/// command) and passed to whoever needs it: no second engine type (`…Scrubber`, `…Redactor`,
/// `…Sanitizer`), no `static` or `thread_local!` holding secrets, no `fn error_chain` but
/// agent-core's.
#[test]
fn tidy_one_secret_engine_and_no_secret_statics() {
    let root = root();
    let mut report = Vec::new();
    for (path, text) in sources() {
        let rel = path
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel.starts_with("crates/") {
            report.extend(secret_rule_findings(&rel, &text));
        }
    }
    assert!(
        report.is_empty(),
        "one secret engine (agent_core::Redactor, owned by a run and passed on), no secrets in \
         statics, one cause-chain printer (agent_core::error_chain):\n{}",
        report.join("\n")
    );
}
