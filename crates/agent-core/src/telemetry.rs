//! The figures the library reports through the [`metrics`] facade: where a call, a session, an
//! upstream open, a token request or a state error happens, the crate that sees it counts it
//! under one of the names below. Nothing is kept unless the host installs a recorder
//! (`metrics::set_global_recorder`; `mcp-agent serve --metrics` installs a Prometheus one):
//! the host chooses the exporter. [`describe`] gives each name its help text and unit, and
//! shows the label-less counters at zero before anything happened.
//!
//! Label values are bounded ([`LabelValues`]): a tool name is chosen by a server (or, for a
//! call that names no tool, by a client), so it is cleaned, cut, and past a number of distinct
//! values per label it is [`OTHER`]. The series of a metric stay bounded whatever peers send.
//!
//! ```
//! use agent_core::telemetry::{LabelValues, OTHER};
//!
//! let tools = LabelValues::new(2, 16);
//! assert_eq!(&*tools.value_in("github", "create issue"), "create_issue");
//! assert_eq!(*tools.value_in("github", &"x".repeat(40)), "x".repeat(16));
//! assert_eq!(&*tools.value_in("github", "third"), OTHER);
//! assert_eq!(&*tools.value_in("github", "create issue"), "create_issue", "a value seen stays");
//! ```

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, PoisonError};

use metrics::{Key, Label, SharedString, Unit};

/// HTTP requests the gateway answered, by `method` (the JSON-RPC method of a POSTed message,
/// else the HTTP method) and `status` (the HTTP status code).
pub const GATEWAY_REQUESTS: &str = "mcp_gateway_requests_total";
/// Tool calls ended, by `server` (the configured key; empty for the gateway's own tools and
/// calls that named no tool), `tool` and `outcome` ([`CallOutcomeLabel`]).
pub const TOOL_CALLS: &str = "mcp_tool_calls_total";
/// How long the tool calls that ran took (from past rules and approval to their end), by
/// `server`, in seconds.
pub const TOOL_CALL_DURATION: &str = "mcp_tool_call_duration_seconds";
/// Downstream sessions initialised and not yet ended.
pub const SESSIONS_ACTIVE: &str = "mcp_sessions_active";
/// Upstream sessions opened (connect, lifecycle, tool listing), by `server` and `outcome`
/// (`ok`, `timeout`, `error`).
pub const UPSTREAM_OPENS: &str = "mcp_upstream_opens_total";
/// Requests sent to an OAuth token endpoint (client credentials, authorization code,
/// refresh), by `server` and `outcome` (`ok`; `rejected`: the endpoint answered with an
/// error; `error`: no usable answer).
pub const OAUTH_TOKEN_REQUESTS: &str = "mcp_oauth_token_requests_total";
/// Requests answered `429 Too Many Requests` by a rate limit.
pub const RATE_LIMITED: &str = "mcp_rate_limited_total";
/// Failed exchanges with the fleet's shared state (Redis): connections and commands.
pub const STATE_ERRORS: &str = "mcp_state_errors_total";

/// The histogram buckets of [`TOOL_CALL_DURATION`], in seconds: from 5 ms to 2 minutes.
pub const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// The value a label takes once its bound on distinct values is reached.
pub const OTHER: &str = "other";

/// Distinct server labels kept (servers are configured, or supplied per run by a caller).
pub const MAX_SERVER_LABELS: usize = 256;

/// Distinct (server, tool) label pairs kept.
pub const MAX_TOOL_LABELS: usize = 1000;

/// The longest label value kept, in bytes (a catalog name is at most 64).
pub const MAX_LABEL_BYTES: usize = 64;

/// The outcome label of a tool call: what [`crate::CallOutcome`] comes to for an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallOutcomeLabel {
    /// The tool answered (whole or cut to the output limit).
    Ok,
    /// The tool reported an error, or the call named no tool or gave arguments it refused.
    ToolError,
    /// Rules, policy or approval refused it.
    Denied,
    /// It did not finish within its timeout.
    Timeout,
    /// The connection to the server failed, or the server is misconfigured.
    UpstreamError,
    /// The caller stopped waiting (or the tool panicked) before it ended.
    Cancelled,
}

impl CallOutcomeLabel {
    /// Every outcome, in the order of the variants.
    const ALL: [Self; 6] = [
        Self::Ok,
        Self::ToolError,
        Self::Denied,
        Self::Timeout,
        Self::UpstreamError,
        Self::Cancelled,
    ];

    /// The label of `outcome`.
    ///
    /// ```
    /// use agent_core::CallOutcome;
    /// use agent_core::telemetry::CallOutcomeLabel;
    ///
    /// assert_eq!(CallOutcomeLabel::of(CallOutcome::Truncated).as_str(), "ok");
    /// assert_eq!(CallOutcomeLabel::of(CallOutcome::Transport).as_str(), "upstream_error");
    /// ```
    pub fn of(outcome: crate::CallOutcome) -> Self {
        use crate::CallOutcome as O;
        match outcome {
            O::Ok | O::Truncated => Self::Ok,
            O::Denied => Self::Denied,
            O::ToolError | O::UnknownTool | O::InvalidArguments => Self::ToolError,
            O::Timeout => Self::Timeout,
            O::Transport | O::Configuration => Self::UpstreamError,
            O::Cancelled => Self::Cancelled,
        }
    }

    /// The label's text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool_error",
            Self::Denied => "denied",
            Self::Timeout => "timeout",
            Self::UpstreamError => "upstream_error",
            Self::Cancelled => "cancelled",
        }
    }
}

/// Gives every metric its help text and unit, and registers the label-less counters and the
/// session gauge (so that they show, at zero, before anything happened). Call it once the
/// recorder is installed.
///
/// ```
/// agent_core::telemetry::describe(); // without a recorder: does nothing
/// ```
pub fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        GATEWAY_REQUESTS,
        Unit::Count,
        "HTTP requests the gateway answered, by JSON-RPC method (else HTTP method) and status"
    );
    describe_counter!(
        TOOL_CALLS,
        Unit::Count,
        "Tool calls ended, by server, tool and outcome"
    );
    describe_histogram!(
        TOOL_CALL_DURATION,
        Unit::Seconds,
        "Duration of the tool calls that ran, by server"
    );
    describe_gauge!(
        SESSIONS_ACTIVE,
        Unit::Count,
        "Downstream sessions initialised and not yet ended"
    );
    describe_counter!(
        UPSTREAM_OPENS,
        Unit::Count,
        "Upstream sessions opened, by server and outcome"
    );
    describe_counter!(
        OAUTH_TOKEN_REQUESTS,
        Unit::Count,
        "Requests to OAuth token endpoints, by server and outcome"
    );
    describe_counter!(
        RATE_LIMITED,
        Unit::Count,
        "Requests answered 429 by a rate limit"
    );
    describe_counter!(
        STATE_ERRORS,
        Unit::Count,
        "Failed exchanges with the fleet's shared state (Redis)"
    );
    metrics::counter!(RATE_LIMITED).increment(0);
    metrics::counter!(STATE_ERRORS).increment(0);
    metrics::gauge!(SESSIONS_ACTIVE).increment(0.0);
}

/// The `server` label of `server` (empty for none), bounded by [`MAX_SERVER_LABELS`].
///
/// ```
/// assert_eq!(&*agent_core::telemetry::server_label(Some("github")), "github");
/// assert_eq!(&*agent_core::telemetry::server_label(None), "");
/// ```
pub fn server_label(server: Option<&str>) -> SharedString {
    static SERVERS: LazyLock<LabelValues> =
        LazyLock::new(|| LabelValues::new(MAX_SERVER_LABELS, MAX_LABEL_BYTES));
    match server {
        None | Some("") => SharedString::const_str(""),
        Some(name) => SERVERS.value_in("", name),
    }
}

/// The `tool` label of `tool` on the server labelled `server`, bounded by
/// [`MAX_TOOL_LABELS`] pairs.
///
/// ```
/// assert_eq!(&*agent_core::telemetry::tool_label("fs", "read file"), "read_file");
/// ```
pub fn tool_label(server: &str, tool: &str) -> SharedString {
    static TOOLS: LazyLock<LabelValues> =
        LazyLock::new(|| LabelValues::new(MAX_TOOL_LABELS, MAX_LABEL_BYTES));
    TOOLS.value_in(server, tool)
}

/// The `server` and `tool` labels of one tool's calls, worked out once: a caller that calls
/// the same tool many times (a catalog, per tool) keeps them and hands them to the metrics
/// layer with each call ([`ResolvedCall::with_labels`](crate::ResolvedCall::with_labels)),
/// which otherwise works them out per call.
///
/// ```
/// use agent_core::telemetry::CallLabels;
///
/// let labels = CallLabels::of(Some("fs"), "read file");
/// assert_eq!((&*labels.server, &*labels.tool), ("fs", "read_file"));
/// ```
///
/// The metric keys made of them are kept with them (shared by their clones), so that a tool's
/// calls after its first build no key of their own: no label vector, no hash.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CallLabels {
    /// The `server` label ([`server_label`]).
    pub server: SharedString,
    /// The `tool` label ([`tool_label`]).
    pub tool: SharedString,
    keys: Arc<CallKeys>,
}

impl PartialEq for CallLabels {
    fn eq(&self, other: &Self) -> bool {
        (&self.server, &self.tool) == (&other.server, &other.tool)
    }
}

impl Eq for CallLabels {}

/// The metric keys of one [`CallLabels`], each made when first needed.
#[derive(Debug, Default)]
struct CallKeys {
    /// [`TOOL_CALLS`], by outcome (in [`CallOutcomeLabel::ALL`]'s order).
    calls: [OnceLock<Key>; CallOutcomeLabel::ALL.len()],
    /// [`TOOL_CALL_DURATION`].
    duration: OnceLock<Key>,
}

impl CallLabels {
    /// The labels of `tool` on `server` (none for a native or meta tool).
    pub fn of(server: Option<&str>, tool: &str) -> Self {
        let server = server_label(server);
        let tool = tool_label(&server, tool);
        Self {
            server,
            tool,
            keys: Arc::default(),
        }
    }

    /// The [`TOOL_CALLS`] key of a call that ended with `outcome`.
    pub(crate) fn calls_key(&self, outcome: CallOutcomeLabel) -> &Key {
        self.keys.calls[outcome as usize].get_or_init(|| {
            Key::from_parts(
                TOOL_CALLS,
                vec![
                    Label::new("server", self.server.clone()),
                    Label::new("tool", self.tool.clone()),
                    Label::new("outcome", outcome.as_str()),
                ],
            )
        })
    }

    /// The [`TOOL_CALL_DURATION`] key.
    pub(crate) fn duration_key(&self) -> &Key {
        self.keys.duration.get_or_init(|| {
            Key::from_parts(
                TOOL_CALL_DURATION,
                vec![Label::new("server", self.server.clone())],
            )
        })
    }
}

/// The values one label has taken, bounded: each value is cleaned (ASCII letters, digits and
/// `_ - . : /` are kept, any other character becomes `_`), cut to a number of bytes, and once
/// the label has taken its number of distinct values, any value not seen before is [`OTHER`].
/// Values are counted per scope and label together (a tool name within its server), so the
/// bound is on the series the label can make.
#[derive(Debug)]
pub struct LabelValues {
    max_values: usize,
    max_bytes: usize,
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    by_scope: HashMap<Box<str>, HashSet<Arc<str>>>,
    count: usize,
}

impl LabelValues {
    /// A label taking at most `max_values` distinct values, each at most `max_bytes` long.
    pub fn new(max_values: usize, max_bytes: usize) -> Self {
        Self {
            max_values,
            max_bytes,
            seen: Mutex::default(),
        }
    }

    /// The label value of `raw` in `scope`: cleaned and cut, or [`OTHER`] when it is new and
    /// the bound is reached.
    pub fn value_in(&self, scope: &str, raw: &str) -> SharedString {
        let cleaned = clean(raw, self.max_bytes);
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(value) = seen
            .by_scope
            .get(scope)
            .and_then(|values| values.get(cleaned.as_ref()))
        {
            return SharedString::from(Arc::clone(value));
        }
        if seen.count >= self.max_values {
            return SharedString::const_str(OTHER);
        }
        let value: Arc<str> = Arc::from(cleaned.as_ref());
        seen.count += 1;
        seen.by_scope
            .entry(scope.into())
            .or_default()
            .insert(Arc::clone(&value));
        SharedString::from(value)
    }

    /// How many distinct values the label has taken (at most its bound).
    pub fn len(&self) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .count
    }

    /// Whether the label has taken no value yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `raw` with every character but ASCII letters, digits and `_ - . : /` replaced by `_`, cut
/// to `max_bytes` (all of it ASCII, so any cut is at a character boundary).
fn clean(raw: &str, max_bytes: usize) -> Cow<'_, str> {
    let keep = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '/');
    if raw.len() <= max_bytes && raw.chars().all(keep) {
        return Cow::Borrowed(raw);
    }
    Cow::Owned(
        raw.chars()
            .map(|c| if keep(c) { c } else { '_' })
            .take(max_bytes)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_cleaned_and_cut() {
        let label = LabelValues::new(10, 8);
        assert_eq!(&*label.value_in("", "fs.read/v2:x-y_z"), "fs.read/");
        assert_eq!(&*label.value_in("", "a\"b}c\nd"), "a_b_c_d");
        assert_eq!(&*label.value_in("", "é{x}"), "__x_");
        assert_eq!(&*label.value_in("", "\u{202e}evil"), "_evil");
        assert_eq!(&*label.value_in("", ""), "");
        // Cut by characters of the cleaned text: never inside one.
        assert_eq!(*label.value_in("", &"ü".repeat(20)), "_".repeat(8));
    }

    #[test]
    fn past_the_bound_new_values_are_other_and_seen_ones_stay() {
        let label = LabelValues::new(3, 64);
        for name in ["a", "b", "c"] {
            assert_eq!(&*label.value_in("s", name), name);
        }
        assert_eq!(&*label.value_in("s", "d"), OTHER);
        assert_eq!(
            &*label.value_in("t", "a"),
            OTHER,
            "a pair counts, not a name"
        );
        assert_eq!(&*label.value_in("s", "b"), "b");
        assert_eq!(label.len(), 3);
    }

    #[test]
    fn fifty_thousand_hostile_names_take_the_bound_and_no_more() {
        let label = LabelValues::new(MAX_TOOL_LABELS, MAX_LABEL_BYTES);
        let mut distinct = HashSet::new();
        for i in 0..50_000 {
            let name = format!("tool_{i}_{}", "\u{1F4A5}".repeat(i % 7));
            distinct.insert(label.value_in("hostile", &name).into_owned());
        }
        assert_eq!(
            distinct.len(),
            MAX_TOOL_LABELS + 1,
            "the bound, and `other`"
        );
        assert!(distinct.contains(OTHER));
        assert_eq!(label.len(), MAX_TOOL_LABELS);
        assert!(distinct.iter().all(|v| v.len() <= MAX_LABEL_BYTES));
    }

    #[test]
    fn every_outcome_has_one_of_the_six_labels() {
        use crate::CallOutcome as O;
        let all = [
            O::Ok,
            O::Truncated,
            O::Denied,
            O::UnknownTool,
            O::InvalidArguments,
            O::ToolError,
            O::Timeout,
            O::Transport,
            O::Configuration,
            O::Cancelled,
        ];
        let labels: HashSet<_> = all
            .into_iter()
            .map(|o| CallOutcomeLabel::of(o).as_str())
            .collect();
        let expected: HashSet<_> = [
            "ok",
            "tool_error",
            "denied",
            "timeout",
            "upstream_error",
            "cancelled",
        ]
        .into();
        assert_eq!(labels, expected);
    }
}
