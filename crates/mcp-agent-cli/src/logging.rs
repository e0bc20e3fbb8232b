//! Log output: `tracing` events on stderr as plain text, never on stdout (which carries the
//! command's output, exact JSON with `--json`).
//!
//! The level comes from `RUST_LOG` when it is set (the ecosystem's convention), else from
//! `-v` / `-q`: warnings by default. The libraries log spans for a run, each server session
//! and each call with server, tool, duration and outcome — never argument values or secrets.
//! What other crates log at trace level (rmcp logs whole messages, which may echo a secret)
//! passes through the secret engine of what the command runs ([`LogSecrets`]: the
//! configuration's, then the run's once it is open).

use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use mcp_agent::Redactor;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The secret engine the log scrubs with, owned by the command (`main` makes it, the command
/// points it at its configuration's engine, then at its run's): the subscriber is installed
/// before either exists, and lives longer.
#[derive(Clone, Default)]
pub(crate) struct LogSecrets(Arc<RwLock<Redactor>>);

impl LogSecrets {
    /// Scrubs the log with `secrets` (a clone: it keeps learning what the run learns).
    pub(crate) fn scrub_with(&self, secrets: &Redactor) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = secrets.clone();
    }

    fn scrub(&self, text: &str) -> String {
        let secrets = self.0.read().unwrap_or_else(PoisonError::into_inner);
        secrets.scrub(text).into_owned()
    }
}

impl fmt::Debug for LogSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secrets = self.0.read().unwrap_or_else(PoisonError::into_inner);
        f.debug_tuple("LogSecrets").field(&*secrets).finish()
    }
}

/// Installs the subscriber, scrubbing with `secrets`. `verbose` counts `-v` flags; `quiet`
/// keeps errors only.
///
/// At the default level (and with `-q`) a line reads like the CLI's own messages —
/// `warning: server `web`: …` — without a timestamp, Rust module path or span names
/// ([`Plain`]); with `-v` or `RUST_LOG` it is tracing's full format, for whoever debugs.
pub(crate) fn init(verbose: u8, quiet: bool, secrets: &LogSecrets) {
    // rmcp reports a transport's failure as an ERROR log of its own, in Rust's debug
    // notation; the CLI tells that failure itself, in words, so by default rmcp stays silent
    // (docs/upstream.md#rmcp-error-logs).
    let level = match (quiet, verbose) {
        (true, _) => "error,rmcp=off",
        (false, 0) => "warn,rmcp=off",
        (false, 1) => "info",
        (false, 2) => "debug",
        (false, _) => "trace",
    };
    let from_env = EnvFilter::try_from_default_env().ok();
    let plain = from_env.is_none() && (quiet || verbose == 0);
    let filter = from_env.unwrap_or_else(|| EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer({
            let secrets = secrets.clone();
            move || ScrubbedStderr(secrets.clone())
        })
        .with_ansi(false);
    // A second subscriber (tests calling `run` twice) is not an error worth a panic.
    let _ = if plain {
        builder.event_format(Plain).try_init()
    } else {
        builder.try_init()
    };
}

/// A log line for people: `warning: ` (or `error: `…) and the message with its fields.
struct Plain;

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let level = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warning",
            Level::INFO => "info",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        write!(writer, "{level}: ")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// Stderr, with every known secret replaced. The formatter writes each event in one call, so
/// a secret is never split across two writes.
struct ScrubbedStderr(LogSecrets);

impl std::io::Write for ScrubbedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr()
            .lock()
            .write_all(self.0.scrub(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().lock().flush()
    }
}
