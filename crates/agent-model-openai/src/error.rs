//! The adapter's one error type.
//!
//! Messages never contain the API key or a header value: every text the provider chose passes
//! through the model's redactor, has its control characters removed and is cut to
//! [`Limits::max_error_chars`](crate::Limits::max_error_chars). `Display` never repeats its
//! `source()`, and no message names a Rust type.

use std::fmt;
use std::time::Duration;

use agent_core::BoxError;

/// Which timeout expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeoutKind {
    /// [`Timeouts::request`](crate::Timeouts::request).
    Request,
    /// [`Timeouts::idle`](crate::Timeouts::idle).
    IdleStream,
    /// [`Timeouts::stream`](crate::Timeouts::stream): the whole stream took too long.
    Stream,
}

/// Which bound was passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitKind {
    /// [`Limits::max_body_bytes`](crate::Limits::max_body_bytes).
    Body,
    /// [`Limits::max_event_bytes`](crate::Limits::max_event_bytes).
    Event,
}

/// The error object of an OpenAI-compatible answer (`{"error": {"message", "code", "type"}}`),
/// or the start of a body that is not one. Every field is redacted, cleaned and bounded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProviderError {
    /// `error.message`, or the start of a body that is not an error object.
    pub message: Option<String>,
    /// `error.code`.
    pub code: Option<String>,
    /// `error.type`.
    pub kind: Option<String>,
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut details = Vec::new();
        if let Some(code) = &self.code {
            details.push(format!("code `{code}`"));
        }
        if let Some(kind) = &self.kind {
            details.push(format!("type `{kind}`"));
        }
        match (&self.message, details.is_empty()) {
            (Some(message), true) => write!(f, "{message}"),
            (Some(message), false) => write!(f, "{message} ({})", details.join(", ")),
            (None, false) => write!(f, "{}", details.join(", ")),
            (None, true) => write!(f, "no error message"),
        }
    }
}

fn status_text(status: &http::StatusCode, provider: &Option<ProviderError>) -> String {
    let reason = status
        .canonical_reason()
        .map(|r| format!(" {r}"))
        .unwrap_or_default();
    match provider {
        Some(p) => format!("HTTP {}{reason}: {p}", status.as_u16()),
        None => format!("HTTP {}{reason}", status.as_u16()),
    }
}

fn after_text(after: &Duration) -> String {
    format!("{:.1} s", after.as_secs_f64())
}

/// Why a chat completion failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenAiError {
    /// The configuration cannot be used; `field` names the setting, `reason` what is wrong
    /// (never its value when it may be secret).
    #[error("invalid model configuration: {field}: {reason}")]
    Config {
        /// The setting.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// The TLS client could not be set up.
    #[error("could not set up TLS")]
    Tls {
        /// The cause.
        #[source]
        source: rustls::Error,
    },
    /// The request body could not be encoded.
    #[error("could not encode the request")]
    Encode {
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// No connection to the endpoint (refused, name not resolved, TLS failed…).
    #[error("could not connect to {host}")]
    Connect {
        /// `host:port` of the endpoint.
        host: String,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// The connection failed during the exchange (reset, closed before the answer).
    #[error("the connection to {host} failed")]
    Connection {
        /// `host:port` of the endpoint.
        host: String,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// A timeout expired.
    #[error("{} timeout of {} expired", match kind {
        TimeoutKind::Request => "request",
        TimeoutKind::IdleStream => "idle-stream",
        TimeoutKind::Stream => "stream",
    }, after_text(after))]
    Timeout {
        /// Which one.
        kind: TimeoutKind,
        /// Its length.
        after: Duration,
    },
    /// The endpoint answered with an error status.
    #[error("{}", status_text(status, provider))]
    Status {
        /// The status.
        status: http::StatusCode,
        /// What the provider said.
        provider: Option<ProviderError>,
        /// The wait the provider asked for (`Retry-After`).
        retry_after: Option<Duration>,
    },
    /// The endpoint reported an error inside a successful answer or a stream.
    #[error("the provider reported an error: {provider}")]
    Provider {
        /// What the provider said.
        provider: ProviderError,
    },
    /// The endpoint sent more than a bound allows.
    #[error("the {} exceeds the limit of {limit} bytes ({})", match kind {
        LimitKind::Body => "response body",
        LimitKind::Event => "server-sent event",
    }, match kind {
        LimitKind::Body => "limits.max_body_bytes",
        LimitKind::Event => "limits.max_event_bytes",
    })]
    TooLarge {
        /// Which bound.
        kind: LimitKind,
        /// Its value.
        limit: usize,
    },
    /// The answer is not a chat completion.
    #[error("the answer is not a chat completion: {reason}")]
    InvalidResponse {
        /// What is wrong (redacted, bounded).
        reason: String,
    },
    /// The stream ended before its last chunk (`[DONE]` or a finish reason).
    #[error("the stream ended before the answer was complete")]
    StreamCut,
    /// A tool call's arguments are not a JSON object. The call must not be run.
    #[error("the arguments of tool call `{id}` of tool `{tool}` are not a JSON object: {reason}")]
    ToolArguments {
        /// The call's id.
        id: String,
        /// The tool's name as the model gave it.
        tool: String,
        /// What is wrong.
        reason: String,
    },
    /// Retries were spent; the last attempt's error is the source.
    #[error("gave up after {attempts} attempt{}{}", if *attempts == 1 { "" } else { "s" }, if *budget_spent {
        " (the retry time budget is spent)"
    } else {
        ""
    })]
    GaveUp {
        /// Attempts made.
        attempts: u32,
        /// Whether the time budget (rather than the count) stopped the retries.
        budget_spent: bool,
        /// The last attempt's error.
        #[source]
        last: Box<OpenAiError>,
    },
}

impl OpenAiError {
    /// The error of the last attempt (`self` unless retries were spent).
    pub fn last_attempt(&self) -> &OpenAiError {
        match self {
            Self::GaveUp { last, .. } => last,
            other => other,
        }
    }

    /// The HTTP status of the last attempt, if the endpoint answered with one.
    pub fn status(&self) -> Option<http::StatusCode> {
        match self.last_attempt() {
            Self::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_error_shows_the_provider_message_code_and_type() {
        let err = OpenAiError::Status {
            status: http::StatusCode::UNAUTHORIZED,
            provider: Some(ProviderError {
                message: Some("Incorrect API key provided".into()),
                code: Some("invalid_api_key".into()),
                kind: Some("invalid_request_error".into()),
            }),
            retry_after: None,
        };
        assert_eq!(
            err.to_string(),
            "HTTP 401 Unauthorized: Incorrect API key provided (code `invalid_api_key`, type `invalid_request_error`)"
        );
    }

    #[test]
    fn no_message_repeats_its_source() {
        let last = OpenAiError::Timeout {
            kind: TimeoutKind::IdleStream,
            after: Duration::from_millis(1500),
        };
        let err = OpenAiError::GaveUp {
            attempts: 2,
            budget_spent: false,
            last: Box::new(last),
        };
        assert_eq!(
            agent_core::error_chain(&err),
            "gave up after 2 attempts: idle-stream timeout of 1.5 s expired"
        );
        let too_large = OpenAiError::TooLarge {
            kind: LimitKind::Event,
            limit: 10,
        };
        assert_eq!(
            too_large.to_string(),
            "the server-sent event exceeds the limit of 10 bytes (limits.max_event_bytes)"
        );
    }
}
