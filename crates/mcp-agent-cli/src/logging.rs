//! Log output: `tracing` events on stderr as plain text, never on stdout (which carries the
//! command's output, exact JSON with `--json`).
//!
//! The level comes from `RUST_LOG` when it is set (the ecosystem's convention), else from
//! `-v` / `-q`: warnings by default. The libraries log spans for a run, each server session
//! and each call with server, tool, duration and outcome — never argument values or secrets.
//! What other crates log at trace level (rmcp logs whole messages, which may echo a secret)
//! passes through the same scrubber as everything else the CLI prints.

use tracing_subscriber::EnvFilter;

/// Installs the subscriber. `verbose` counts `-v` flags; `quiet` keeps errors only.
pub(crate) fn init(verbose: u8, quiet: bool) {
    // rmcp reports a transport's failure as an ERROR log of its own, in Rust's debug
    // notation; the CLI tells that failure itself, in words, so by default rmcp stays silent.
    let level = match (quiet, verbose) {
        (true, _) => "error,rmcp=off",
        (false, 0) => "warn,rmcp=off",
        (false, 1) => "info",
        (false, 2) => "debug",
        (false, _) => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    // A second subscriber (tests calling `run` twice) is not an error worth a panic.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| ScrubbedStderr)
        .with_ansi(false)
        .try_init();
}

/// Stderr, with every known secret replaced. The formatter writes each event in one call, so
/// a secret is never split across two writes.
struct ScrubbedStderr;

impl std::io::Write for ScrubbedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr()
            .lock()
            .write_all(crate::term::scrub(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().lock().flush()
    }
}
