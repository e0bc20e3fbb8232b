//! The run's known secrets, kept out of everything a server chose that the client passes on.
//!
//! A server may echo what it was sent or what it holds — a bearer token in a JSON-RPC error,
//! its environment in a tool result. The run's [`Redactor`] knows each spec's static secrets
//! ([`mcp_config::ServerSpec::secret_values`]) and learns the tokens its sessions' transports
//! report ([`mcp_connector::ConnectionHandle::report_secrets_to`]); every server-chosen text
//! passes it once ([`Redactor::scrub`]: known values only) before it reaches an error, an event
//! or the model.

use std::fmt;

use mcp_config::Redactor;
use mcp_connector::{BoxError, ConnectError};

use crate::SessionError;
use rmcp::model::CallToolResult;

/// A cause whose text held a secret value of the run, with that value replaced.
///
/// Its `Display` is the text of the whole original cause chain
/// ([`agent_core::error_chain`]), every known
/// secret replaced by [`mcp_config::REDACTED`]; it has no `source()`, since the original chain
/// still holds the secret. The client puts one in place of a cause only when the cause's text
/// (or its `Debug`) held a secret: other causes stay as they were, typed.
///
/// ```
/// use mcp_client::Scrubbed;
/// use std::error::Error;
///
/// let scrubbed = Scrubbed::new("bad key [REDACTED]");
/// assert_eq!(scrubbed.to_string(), "bad key [REDACTED]");
/// assert!(scrubbed.source().is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scrubbed {
    text: String,
}

impl Scrubbed {
    /// A cause with this (already scrubbed) text.
    pub fn new(text: impl Into<String>) -> Self {
        Self { text: text.into() }
    }

    /// The scrubbed text.
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Scrubbed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Scrubbed {}

/// True when `text` holds a known secret.
fn holds_secret(redactor: &Redactor, text: &str) -> bool {
    matches!(redactor.scrub(text), std::borrow::Cow::Owned(_))
}

/// `error` unchanged when neither its chain's text nor its `Debug` holds a known secret, else a
/// [`Scrubbed`] with its chain's text scrubbed.
pub(crate) fn scrub_error(redactor: &Redactor, error: BoxError) -> BoxError {
    if redactor.is_empty() {
        return error;
    }
    let text = agent_core::error_chain(&*error);
    if holds_secret(redactor, &text) || holds_secret(redactor, &format!("{error:?}")) {
        return Box::new(Scrubbed::new(redactor.scrub(&text)));
    }
    error
}

/// A connect error whose cause (if any) went through [`scrub_error`].
pub(crate) fn scrub_connect(redactor: &Redactor, error: ConnectError) -> ConnectError {
    match error {
        ConnectError::Io {
            server,
            kind,
            source,
        } => ConnectError::Io {
            server,
            kind,
            source: scrub_error(redactor, source),
        },
        ConnectError::Config { server, message } => ConnectError::Config {
            server,
            message: redactor.scrub(&message).into_owned(),
        },
        other => other,
    }
}

/// `text` scrubbed.
pub(crate) fn scrub_text(redactor: &Redactor, text: Option<String>) -> Option<String> {
    text.map(|t| redactor.scrub(&t).into_owned())
}

/// A server's `text` as it may be shown: its unsafe characters (controls, bidirectional
/// overrides) removed first — so none can split a secret the redactor would otherwise find —,
/// then every known secret replaced, then cut to `max` bytes.
pub(crate) fn shown_text(
    redactor: &Redactor,
    text: &str,
    max: usize,
    lines: mcp_catalog::sanitize::Lines,
) -> String {
    use mcp_catalog::sanitize::clean;
    let safe = clean(text, usize::MAX, lines);
    clean(&redactor.scrub(&safe), max, lines).into_owned()
}

/// A tool result with every known secret replaced in every string it holds (texts, structured
/// content, resource texts, metadata). `Err` with a scrubbed note when the scrubbed result no
/// longer reads as a result, which only a secret inside binary data could cause.
pub(crate) fn scrub_result(
    redactor: &Redactor,
    result: CallToolResult,
) -> Result<CallToolResult, Scrubbed> {
    if redactor.is_empty() {
        return Ok(result);
    }
    let withheld =
        |_| Scrubbed::new("the result could not be checked for secret values and was withheld");
    // The common result holds no secret: one serialisation tells, and the result stays as it
    // came instead of being rebuilt from a JSON value.
    let text = serde_json::to_string(&result).map_err(withheld)?;
    if !redactor.occurs_in_json(&text) {
        return Ok(result);
    }
    let mut value = serde_json::to_value(&result).map_err(withheld)?;
    redactor.scrub_json(&mut value);
    serde_json::from_value(value).map_err(withheld)
}

/// `error` with the run's known secrets out of every server-chosen text it holds: causes
/// (replaced by a [`Scrubbed`](crate::Scrubbed) when they held one) and stderr tails.
pub(crate) fn scrub_session_error(redactor: &Redactor, error: SessionError) -> SessionError {
    if redactor.is_empty() {
        return error;
    }
    match error {
        SessionError::Connect(e) => SessionError::Connect(scrub_connect(redactor, e)),
        SessionError::Initialize {
            server,
            diagnostics,
            source,
        } => SessionError::Initialize {
            server,
            diagnostics: scrub_text(redactor, diagnostics),
            source: scrub_error(redactor, source),
        },
        SessionError::Discovery {
            server,
            diagnostics,
            source,
        } => SessionError::Discovery {
            server,
            diagnostics: scrub_text(redactor, diagnostics),
            source: scrub_error(redactor, source),
        },
        SessionError::Catalog { server, source } => SessionError::Catalog {
            server,
            source: scrub_error(redactor, source),
        },
        SessionError::ConnectTimeout {
            server,
            after,
            diagnostics,
        } => SessionError::ConnectTimeout {
            server,
            after,
            diagnostics: scrub_text(redactor, diagnostics),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::ContentBlock;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_result_is_scrubbed_of_a_secret_json_escapes_and_kept_whole_without_one() {
        let secret = "se\"cret\n-value";
        let redactor = Redactor::new().with_secrets([secret]);
        let mut result =
            CallToolResult::success(vec![ContentBlock::text(format!("got {secret}."))]);
        result.structured_content = Some(json!({"echo": secret, "n": 1}));
        let scrubbed = scrub_result(&redactor, result).unwrap();
        let text = serde_json::to_string(&scrubbed).unwrap();
        assert!(!text.contains("cret"), "{text}");
        assert_eq!(
            scrubbed.structured_content,
            Some(json!({"echo": "[REDACTED]", "n": 1}))
        );

        let mut clean = CallToolResult::success(vec![ContentBlock::text("se\"cret")]);
        clean.structured_content = Some(json!({"echo": "value", "n": 1}));
        assert_eq!(scrub_result(&redactor, clean.clone()).unwrap(), clean);
    }
}
