//! Log output: `tracing` events on stderr as plain text, or as JSON lines with
//! `--log-format json` (then the command's own messages and the runs' events too, see
//! [`say`] and [`LoggedEvents`]), never on stdout (which carries the command's output, exact
//! JSON with `--json`).
//!
//! The level comes from `RUST_LOG` when it is set (the ecosystem's convention), else from
//! `-v` / `-q`: warnings by default. The libraries log spans for a run, each server session
//! and each call with server, tool, duration and outcome — never argument values or secrets.
//! What other crates log at trace level (rmcp logs whole messages, which may echo a secret)
//! passes through the secret engine of what the command runs ([`LogSecrets`]: the
//! configuration's, then the run's once it is open).

use std::fmt;
use std::io::Write as _;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use mcp_agent::Event as RunEvent;
use mcp_agent::Redactor;
use mcp_agent::events::EventSink;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer, Registry};

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

/// How log lines are written on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// For people.
    Text,
    /// One JSON object a line, for log shippers.
    Json,
}

/// The format the process logs in: set once, by [`init`] (the subscriber it goes with is the
/// process's too).
static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// The target of the runs' events in the log.
pub(crate) const EVENT_TARGET: &str = "mcp_agent::event";

/// What the process reports besides its log lines, kept until the command ends: dropping it
/// flushes the traces still queued (feature `otel`, see `mcp_agent::otlp`).
#[derive(Debug, Default)]
pub(crate) struct Telemetry {
    #[cfg(feature = "otel")]
    _traces: Option<mcp_agent::otlp::OtlpTraces>,
}

/// Installs the subscriber, scrubbing with `secrets`. `verbose` counts `-v` flags; `quiet`
/// keeps errors only.
///
/// At the default level (and with `-q`) a text line reads like the CLI's own messages —
/// `warning: server `web`: …` — without a timestamp, Rust module path or span names
/// ([`Plain`]); with `-v` or `RUST_LOG` it is tracing's full format, for whoever debugs. In
/// JSON every line is an object; the default level keeps the command's messages and the
/// runs' events besides warnings.
///
/// With the `otel` feature and an OTLP endpoint in the environment, the spans at `info` and
/// above (rmcp's aside) are also exported as traces, whatever the log level.
pub(crate) fn init(verbose: u8, quiet: bool, format: LogFormat, secrets: &LogSecrets) -> Telemetry {
    let format = *FORMAT.get_or_init(|| format);
    // rmcp reports a transport's failure as an ERROR log of its own, in Rust's debug
    // notation; the CLI tells that failure itself, in words, so by default rmcp stays silent
    // (docs/upstream.md#rmcp-error-logs).
    let level = match (quiet, verbose, format) {
        (true, _, _) => "error,rmcp=off",
        (false, 0, LogFormat::Text) => "warn,rmcp=off",
        (false, 0, LogFormat::Json) => "warn,rmcp=off,mcp_agent=info",
        (false, 1, _) => "info",
        (false, 2, _) => "debug",
        (false, _, _) => "trace",
    };
    let from_env = EnvFilter::try_from_default_env().ok();
    let plain = from_env.is_none() && (quiet || verbose == 0);
    let filter = from_env.unwrap_or_else(|| EnvFilter::new(level));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer({
            let secrets = secrets.clone();
            move || ScrubbedStderr(secrets.clone())
        })
        .with_ansi(false);
    let fmt = match format {
        LogFormat::Json => fmt
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_filter(filter)
            .boxed(),
        LogFormat::Text if plain => fmt.event_format(Plain).with_filter(filter).boxed(),
        LogFormat::Text => fmt.with_filter(filter).boxed(),
    };
    #[cfg_attr(not(feature = "otel"), allow(unused_mut))]
    let mut layers: Vec<Box<dyn Layer<Registry> + Send + Sync>> = vec![fmt];
    #[cfg_attr(not(feature = "otel"), allow(unused_mut))]
    let mut telemetry = Telemetry::default();
    #[cfg(feature = "otel")]
    match mcp_agent::otlp::OtlpTraces::from_env() {
        None => {}
        Some(Ok(traces)) => {
            layers.push(traces.layer().boxed());
            telemetry._traces = Some(traces);
        }
        Some(Err(reason)) => say(&format!("warning: traces are not exported: {reason}")),
    }
    // A second subscriber (tests calling `run` twice) is not an error worth a panic.
    let _ = tracing_subscriber::registry().with(layers).try_init();
    telemetry
}

/// Writes one of the command's own messages (`error: …`, `warning: …`, `note: …` or a
/// plain line) on stderr: as it is, or in JSON as a log line of the level its prefix names
/// (`info` without one). Best effort: a closed stderr is not worth a panic.
pub(crate) fn say(text: &str) {
    if FORMAT.get() != Some(&LogFormat::Json) {
        let _ = writeln!(std::io::stderr().lock(), "{text}");
        return;
    }
    for (prefix, level) in [
        ("error: ", Level::ERROR),
        ("warning: ", Level::WARN),
        ("note: ", Level::INFO),
    ] {
        if let Some(message) = text.strip_prefix(prefix) {
            return log_at(level, message);
        }
    }
    log_at(Level::INFO, text);
}

fn log_at(level: Level, message: &str) {
    match level {
        Level::ERROR => tracing::error!(target: "mcp_agent", "{message}"),
        Level::WARN => tracing::warn!(target: "mcp_agent", "{message}"),
        _ => tracing::info!(target: "mcp_agent", "{message}"),
    }
}

/// The runs' events as log lines (target [`EVENT_TARGET`], level `info`): the kind as the
/// message, then principal, server, tool, call id, duration, sizes, outcome and the event's own message
/// as `detail` (scrubbed by the run already). Shown by default in JSON, with `-v` in text.
pub(crate) struct LoggedEvents;

impl EventSink for LoggedEvents {
    fn emit(&self, event: RunEvent) {
        tracing::info!(
            target: EVENT_TARGET,
            principal = event.principal.as_deref(),
            server = event.server.as_deref(),
            tool = event.tool.as_deref(),
            call_id = event.call_id.as_deref(),
            duration_ms = event.duration.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            input_bytes = event.input_bytes,
            output_bytes = event.output_bytes,
            outcome = event.outcome.as_ref().map(word),
            detail = event.message.as_deref(),
            step = event.step,
            "{}",
            word(&event.kind)
        );
    }
}

/// A value's serde name (`tool_call_finished`, `ok`).
fn word<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(word)) => word,
        _ => String::new(),
    }
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
