//! What the server sends, on its way in: every JSON body and server-sent event is checked for
//! nesting depth and has the credentials the session sent replaced by `[REDACTED]` before
//! rmcp (or an error message) sees it.
//!
//! A server may echo what it was sent: `"denied for Bearer tok-…"` in a JSON-RPC error, the
//! request headers in an error page or an event. The transport knows exactly which values
//! it sent — the spec's static secrets and every credential header the auth hook gave
//! (OAuth access tokens included) — so it scrubs each of them, whole and without its
//! `Bearer ` / `Basic ` scheme, in raw and in JSON-escaped form, from everything it receives.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use http::HeaderMap;
use mcp_config::{Redactor, Secret};
use rmcp::model::{RequestId, ServerJsonRpcMessage};
use serde_json::Value;
use sse_stream::Sse;

use crate::error::HttpError;

/// The deepest nesting of arrays and objects a message may have, counted from its top
/// (the JSON-RPC envelope is the first level): the most `serde_json` parses. A deeper message
/// fails its request with [`HttpError::TooDeep`] (rmcp would drop such an event silently:
/// docs/upstream.md#rmcp-sse-bad-event).
pub const MAX_JSON_DEPTH: usize = 127;

/// Credential values sent besides the spec's static ones (renewed OAuth tokens) that are
/// still scrubbed: the most recent ones.
const MAX_RECORDED: usize = 16;

/// Longest parser complaint kept in an error.
const MAX_REASON_CHARS: usize = 300;

/// The secret values one session sent, for scrubbing what it receives.
#[derive(Debug)]
pub(crate) struct Secrets {
    fixed: Vec<String>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Header values sent, most recent last.
    recorded: VecDeque<String>,
    scrubbers: SentForms,
}

/// Redactors for the values as sent and for their JSON-escaped forms.
#[derive(Debug, Clone, Default)]
pub(crate) struct SentForms {
    raw: Redactor,
    escaped: Redactor,
}

/// `value` and, for a header value with a scheme (`Bearer tok`), the part after it.
fn forms(value: &str) -> impl Iterator<Item = &str> {
    let token = value
        .split_once(' ')
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty());
    std::iter::once(value).chain(token)
}

/// The JSON-escaped forms of `value` that differ from it (`"` and `\` escaped; `/` escaped
/// too, as some encoders do).
fn escaped_forms(value: &str) -> Vec<String> {
    let json = serde_json::to_string(value).unwrap_or_default();
    let json = json
        .strip_prefix('"')
        .and_then(|j| j.strip_suffix('"'))
        .unwrap_or_default()
        .to_owned();
    let slashed = json.replace('/', "\\/");
    [json, slashed]
        .into_iter()
        .filter(|form| form != value)
        .collect()
}

impl Secrets {
    /// Secrets known before any request: the spec's static values.
    pub(crate) fn new(fixed: impl IntoIterator<Item = Secret>) -> Self {
        let mut values = Vec::new();
        for secret in fixed {
            for form in forms(secret.expose()) {
                if !values.iter().any(|v| v == form) {
                    values.push(form.to_owned());
                }
            }
        }
        let secrets = Self {
            fixed: values,
            state: Mutex::default(),
        };
        let scrubbers = secrets.build(&VecDeque::new());
        secrets.lock().scrubbers = scrubbers;
        secrets
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn build(&self, recorded: &VecDeque<String>) -> SentForms {
        let values: Vec<&String> = self.fixed.iter().chain(recorded).collect();
        SentForms {
            raw: Redactor::new().with_secrets(values.iter().map(|v| Secret::new(v.as_str()))),
            escaped: Redactor::new().with_secrets(
                values
                    .iter()
                    .flat_map(|v| escaped_forms(v))
                    .map(Secret::from),
            ),
        }
    }

    /// Remembers the sensitive header values of a request about to be sent (credentials
    /// are marked sensitive).
    pub(crate) fn record(&self, headers: &HeaderMap) {
        let sent: Vec<&str> = headers
            .values()
            .filter(|v| v.is_sensitive())
            .filter_map(|v| v.to_str().ok())
            .flat_map(forms)
            .collect();
        let mut state = self.lock();
        let mut changed = false;
        for value in sent {
            if self.fixed.iter().any(|v| v == value) {
                continue;
            }
            if let Some(at) = state.recorded.iter().position(|v| v == value) {
                // Keep the values in use at the recent end.
                if at + 1 != state.recorded.len()
                    && let Some(v) = state.recorded.remove(at)
                {
                    state.recorded.push_back(v);
                }
                continue;
            }
            state.recorded.push_back(value.to_owned());
            if state.recorded.len() > MAX_RECORDED {
                state.recorded.pop_front();
            }
            changed = true;
        }
        if changed {
            state.scrubbers = self.build(&state.recorded);
        }
    }

    /// The scrubbers for what has been sent so far.
    pub(crate) fn current(&self) -> SentForms {
        self.lock().scrubbers.clone()
    }
}

impl SentForms {
    /// Whether `text` contains a known value, as sent or JSON-escaped.
    fn finds(&self, text: &str) -> bool {
        matches!(self.raw.scrub(text), Cow::Owned(_))
            || matches!(self.escaped.scrub(text), Cow::Owned(_))
    }

    /// `text` with every known value replaced (as sent and JSON-escaped).
    pub(crate) fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.raw.scrub(text) {
            Cow::Borrowed(text) => self.escaped.scrub(text),
            Cow::Owned(text) => Cow::Owned(self.escaped.scrub(&text).into_owned()),
        }
    }

    /// JSON `text` with every known value replaced inside its strings (and keys); text that
    /// is not JSON is scrubbed as text.
    fn json_text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if !self.finds(text) {
            return Cow::Borrowed(text);
        }
        match serde_json::from_str::<Value>(text) {
            Ok(mut value) => {
                self.raw.scrub_json(&mut value);
                Cow::Owned(value.to_string())
            }
            Err(_) => Cow::Owned(self.text(text).into_owned()),
        }
    }
}

/// The deepest nesting of arrays and objects in JSON `text` (strings are skipped; the text
/// need not be valid).
pub(crate) fn json_depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &byte in text {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// What the session's reading side needs: the server's name and the secrets it sent.
#[derive(Debug, Clone)]
pub(crate) struct Inbound {
    pub(crate) server: Arc<str>,
    pub(crate) secrets: Arc<Secrets>,
}

impl Inbound {
    /// A JSON body as a message: scrubbed, and refused with an error naming the depth when
    /// it nests too deep.
    pub(crate) fn message(&self, body: &[u8]) -> Result<ServerJsonRpcMessage, HttpError> {
        let scrubbers = self.secrets.current();
        let text = String::from_utf8_lossy(body);
        let parsed = if scrubbers.finds(&text) {
            serde_json::from_str::<Value>(&text).and_then(|mut value| {
                scrubbers.raw.scrub_json(&mut value);
                serde_json::from_value(value)
            })
        } else {
            serde_json::from_str(&text)
        };
        parsed.map_err(|error| {
            let depth = json_depth(body);
            if depth > MAX_JSON_DEPTH {
                return self.too_deep(depth);
            }
            let reason = error.to_string();
            let reason = mcp_config::bounded_text(&scrubbers.text(&reason), MAX_REASON_CHARS);
            HttpError::InvalidMessage {
                server: self.server.to_string(),
                reason,
            }
        })
    }

    /// Server-chosen text for an error message, scrubbed.
    pub(crate) fn text(&self, text: &str) -> String {
        self.secrets.current().text(text).into_owned()
    }

    fn too_deep(&self, depth: usize) -> HttpError {
        HttpError::TooDeep {
            server: self.server.to_string(),
            depth,
            limit: MAX_JSON_DEPTH,
        }
    }

    /// One server-sent event on the response stream of `request` (or of no request): its
    /// data scrubbed; too deep, replaced by an error answering `request` (on other streams
    /// its data is dropped, its id and retry kept).
    pub(crate) fn event(&self, mut event: Sse, request: Option<&RequestId>) -> Sse {
        let Some(data) = &event.data else {
            return event;
        };
        let depth = json_depth(data.as_bytes());
        if depth > MAX_JSON_DEPTH {
            tracing::warn!(
                server = %self.server,
                depth,
                limit = MAX_JSON_DEPTH,
                "dropping a server-sent event nested too deeply"
            );
            let error = self.too_deep(depth);
            event.data = request.map(|id| error_answer(id, &error));
            return event;
        }
        let scrubbers = self.secrets.current();
        if let Cow::Owned(clean) = scrubbers.json_text(data) {
            event.data = Some(clean);
        }
        event
    }
}

/// A JSON-RPC error answering request `id` with `error`'s message.
pub(crate) fn error_answer(id: &RequestId, error: &HttpError) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": -32603, "message": error.to_string() },
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn sensitive(value: &str) -> HeaderValue {
        let mut value = HeaderValue::try_from(value).unwrap();
        value.set_sensitive(true);
        value
    }

    #[test]
    fn depth_counts_arrays_and_objects_outside_strings() {
        assert_eq!(json_depth(b"1"), 0);
        assert_eq!(json_depth(br#"{"a":[1,{"b":[]}]}"#), 4);
        assert_eq!(json_depth(br#"{"a":"[[[[\"{{{"}"#), 1);
        assert_eq!(json_depth(&[b'['; 10_000]), 10_000);
    }

    #[test]
    fn sent_credentials_are_scrubbed_whole_without_scheme_and_escaped() {
        let secrets = Secrets::new([Secret::new("key-static-1")]);
        let mut headers = HeaderMap::new();
        headers.insert("authorization", sensitive("Bearer tok/with\"quote"));
        headers.insert("accept", HeaderValue::from_static("application/json"));
        secrets.record(&headers);
        let scrubbers = secrets.current();
        assert_eq!(
            scrubbers.text("k=key-static-1 a=Bearer tok/with\"quote t=tok/with\"quote"),
            "k=[REDACTED] a=[REDACTED] t=[REDACTED]"
        );
        // Inside JSON, as the server's encoder escaped it.
        assert_eq!(
            scrubbers.json_text(r#"{"m":"tok\/with\"quote"}"#),
            r#"{"m":"[REDACTED]"}"#
        );
        assert_eq!(
            scrubbers.text(r#"<p>tok/with\"quote</p>"#),
            "<p>[REDACTED]</p>"
        );
        // Headers not marked sensitive are not secrets.
        assert_eq!(scrubbers.text("application/json"), "application/json");
    }

    #[test]
    fn renewed_credentials_are_added_and_the_oldest_forgotten() {
        let secrets = Secrets::new([]);
        for i in 0..=MAX_RECORDED {
            let mut headers = HeaderMap::new();
            headers.insert("authorization", sensitive(&format!("Bearer token-{i:04}")));
            secrets.record(&headers);
        }
        let scrubbers = secrets.current();
        let last = format!("token-{MAX_RECORDED:04}");
        assert_eq!(scrubbers.text(&last), "[REDACTED]");
        assert_eq!(scrubbers.text("token-0000"), "token-0000");
    }

    #[test]
    fn too_deep_events_answer_their_request() {
        let inbound = Inbound {
            server: Arc::from("srv"),
            secrets: Arc::new(Secrets::new([])),
        };
        let event = Sse::default().data("[".repeat(200));
        let replaced = inbound.event(event.clone(), Some(&RequestId::Number(4)));
        let data = replaced.data.unwrap();
        assert!(data.contains(r#""id":4"#), "{data}");
        assert!(
            data.contains(
                "server `srv`: a message nests 200 levels deep, more than the 127 levels accepted"
            ),
            "{data}"
        );
        assert_eq!(inbound.event(event, None).data, None);
    }
}
