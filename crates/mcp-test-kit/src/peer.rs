//! Finding a third-party test peer that `cargo xtask peers` installed: its path comes in an
//! `MCP_AGENT_PEER_*` variable. Missing, it fails the test under `CI=true` or
//! `MCP_AGENT_REQUIRE_PEERS=1` (CI must never pass by skipping) and otherwise skips it with a
//! note on stderr.

use std::path::PathBuf;

/// True when a missing peer must fail the test: `CI` or `MCP_AGENT_REQUIRE_PEERS` is `1` or
/// `true`.
///
/// ```
/// // `cargo xtask test` sets MCP_AGENT_REQUIRE_PEERS=1; a plain `cargo test` may not.
/// let _strict: bool = mcp_test_kit::peer::required();
/// ```
pub fn required() -> bool {
    let on = |var: &str| {
        std::env::var(var).is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true"))
    };
    on("CI") || on("MCP_AGENT_REQUIRE_PEERS")
}

/// The existing path in the environment variable `var`. Unset or missing: panics when
/// [`required`], else prints `note: skipping: …` on stderr and returns `None`, so the test
/// returns early.
///
/// ```
/// # if !mcp_test_kit::peer::required() {
/// assert_eq!(mcp_test_kit::peer::path("MCP_AGENT_PEER_NOT_A_PEER"), None);
/// # }
/// ```
#[track_caller]
pub fn path(var: &str) -> Option<PathBuf> {
    let found = std::env::var_os(var).map(PathBuf::from);
    match found {
        Some(path) if path.exists() => Some(path),
        other => {
            let why = match other {
                Some(path) => format!("{var}={} does not exist", path.display()),
                None => format!("{var} is not set"),
            };
            assert!(
                !required(),
                "{why}; run `cargo xtask peers` (the test command installs the peers)"
            );
            eprintln!(
                "note: skipping: {why} (run `eval \"$(cargo xtask peers --env)\"` to run peer tests by hand)"
            );
            None
        }
    }
}

/// The shared-library directory of a binary unpacked from a Debian package with its library
/// packages (`cargo xtask peers` unpacks them into one tree, not installed): for
/// `<tree>/usr/bin/name`, `<tree>/usr/lib/<arch>-linux-gnu` when it exists. Put on
/// `LD_LIBRARY_PATH` when starting the binary.
///
/// ```
/// use std::path::Path;
///
/// assert_eq!(mcp_test_kit::peer::library_dir(Path::new("/no/such/usr/bin/redis-server")), None);
/// ```
pub fn library_dir(binary: &std::path::Path) -> Option<PathBuf> {
    let usr = binary.parent()?.parent()?;
    let dir = usr
        .join("lib")
        .join(format!("{}-linux-gnu", std::env::consts::ARCH));
    dir.is_dir().then_some(dir)
}
