//! SEP-2243 (MCP 2026-07-28): a served tool's input schema may mark a property with
//! `x-mcp-header: "<Token>"`; a client then mirrors that argument of a `tools/call` into the
//! `Mcp-Param-<Token>` request header, so intermediaries can route on it without parsing the
//! body. The front checks the header against the body before the call reaches a session: both
//! present and equal, or both absent (`null` counts as absent). A value is plain visible ASCII,
//! or `=?base64?<standard, padded, canonical base64 of UTF-8>?=`; anything else is literal.
//! A disagreement is [`ParamHeaderError`], answered `400` with JSON-RPC error `-32020`
//! (HeaderMismatch) naming the header and the tool, never echoing the values.
//!
//! Where the check runs depends on where the called tool's schema is known. For a fixed
//! catalog the front knows it and answers before rmcp sees the request. Per-session tools
//! (a gateway's upstream run) exist only once the session has opened them, which for a
//! stateless 2026-07-28 request happens inside the request, so the session's handler runs
//! [`check_call`] on the tool it is about to dispatch, with the headers rmcp put into the
//! request's extensions (`http::request::Parts`), and returns the `-32020` error before
//! anything is dispatched (rmcp checks only the tools a new service knows:
//! docs/upstream.md#rmcp-param-header-lookup). rmcp answers a 2026-07-28 request whose
//! handler returns `-32020`
//! with `400 Bad Request` (the status the spec requires: every 2026-07-28 request carries
//! its protocol version in `_meta`, which routes it to rmcp's per-request path), the same
//! answer the front gives. A lazy gateway's `mcp_call_tool` declares no `x-mcp-header`, so a
//! downstream client mirrors nothing for it and nothing is checked (unrecognized
//! `Mcp-Param-*` headers are ignored, as the spec asks): the inner call's headers are the
//! upstream hop's business, where the gateway is the client.

use agent_core::ToolDescriptor;
use http::HeaderMap;
use rmcp::model::{ErrorCode, ErrorData, Extensions, JsonRpcError, RequestId, Tool};
use serde_json::{Map, Value};

use crate::convert::mcp_tool;

use mcp_param_headers::{PREFIX, decode_value as decode};
pub(crate) use mcp_param_headers::{applies, declarations};

/// JSON-RPC error code of a header that disagrees with the body (SEP-2243).
pub(crate) const HEADER_MISMATCH: i32 = -32020;
/// Bound on what an error shows of a schema- or body-given name.
const MAX_SHOWN: usize = 64;

/// Why a `tools/call`'s `Mcp-Param-*` header disagrees with its arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ParamHeaderError {
    /// The argument is in the body but its header was not sent.
    #[error("header `{header}` is missing, but argument `{argument}` of tool `{tool}` is present")]
    Missing {
        tool: String,
        header: String,
        argument: String,
    },
    /// The header was sent but the body has no value for its argument.
    #[error("header `{header}` is present, but argument `{argument}` of tool `{tool}` is absent")]
    Unexpected {
        tool: String,
        header: String,
        argument: String,
    },
    /// The header was sent more than once.
    #[error("header `{header}` of tool `{tool}` appears more than once")]
    Duplicated { tool: String, header: String },
    /// The header's value is not visible ASCII, or its base64 form is invalid.
    #[error("header `{header}` of tool `{tool}` is malformed: {why}")]
    Malformed {
        tool: String,
        header: String,
        why: &'static str,
    },
    /// The header's (decoded) value differs from the argument.
    #[error("header `{header}` does not match argument `{argument}` of tool `{tool}`")]
    Mismatch {
        tool: String,
        header: String,
        argument: String,
    },
}

impl ParamHeaderError {
    /// The header the error is about.
    pub(crate) fn header(&self) -> &str {
        match self {
            Self::Missing { header, .. }
            | Self::Unexpected { header, .. }
            | Self::Duplicated { header, .. }
            | Self::Malformed { header, .. }
            | Self::Mismatch { header, .. } => header,
        }
    }

    /// The tool the error is about.
    pub(crate) fn tool(&self) -> &str {
        match self {
            Self::Missing { tool, .. }
            | Self::Unexpected { tool, .. }
            | Self::Duplicated { tool, .. }
            | Self::Malformed { tool, .. }
            | Self::Mismatch { tool, .. } => tool,
        }
    }
}

impl From<&ParamHeaderError> for ErrorData {
    /// JSON-RPC error `-32020` with the message, and the header and tool as data.
    fn from(error: &ParamHeaderError) -> Self {
        let data = serde_json::json!({ "header": error.header(), "tool": error.tool() });
        ErrorData::new(ErrorCode(HEADER_MISMATCH), error.to_string(), Some(data))
    }
}

/// Finds a served tool by name, for [`ParamHeaderCheck`].
type Lookup = Box<dyn Fn(&str) -> Option<Tool> + Send + Sync>;

/// The check an HTTP front runs on every request before rmcp sees it: a `tools/call` from a
/// 2026-07-28 client to a tool it is given, whose `Mcp-Param-*` headers disagree with the
/// arguments, is refused. The front is given the check with the tools known before any
/// session opens (a fixed catalog's); per-session tools are checked by the session's handler
/// ([`check_call`]).
pub(crate) struct ParamHeaderCheck {
    lookup: Lookup,
}

impl std::fmt::Debug for ParamHeaderCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParamHeaderCheck").finish_non_exhaustive()
    }
}

impl ParamHeaderCheck {
    /// Checks calls of the tools `lookup` finds by name (as served: the schema a client read
    /// its declarations from); a tool it does not find is not checked.
    pub(crate) fn new(lookup: impl Fn(&str) -> Option<Tool> + Send + Sync + 'static) -> Self {
        Self {
            lookup: Box::new(lookup),
        }
    }

    /// The JSON-RPC error (`-32020`, naming the header and the tool, with the request's id)
    /// to refuse the request of `headers` and `body` with, or `None` when it passes: not a
    /// 2026-07-28 request, not a `tools/call`, a tool not found, or headers that agree.
    pub(crate) fn refusal(&self, headers: &HeaderMap, body: &[u8]) -> Option<JsonRpcError> {
        if !applies(headers) {
            return None;
        }
        let value: Value = serde_json::from_slice(body).ok()?;
        if value.get("method").and_then(Value::as_str) != Some("tools/call") {
            return None;
        }
        let call = value.get("params")?;
        let name = call.get("name").and_then(Value::as_str)?;
        let tool = (self.lookup)(name)?;
        let arguments = call.get("arguments").and_then(Value::as_object);
        let error = check(name, &tool.input_schema, arguments, headers).err()?;
        let id = value
            .get("id")
            .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
        Some(JsonRpcError::new(id, ErrorData::from(&error)))
    }
}

/// The check of a call to `tool` with `arguments`, by a session's handler: the headers are
/// those of the HTTP request it came in (none over stdio or in memory: nothing to check),
/// and only a 2026-07-28 request is held to it.
/// The schema checked is the tool's as served ([`mcp_tool`]), which is what the client read
/// its declarations from.
pub(crate) fn check_call(
    tool: &ToolDescriptor,
    arguments: Option<&Map<String, Value>>,
    extensions: &Extensions,
) -> Result<(), ErrorData> {
    let Some(parts) = extensions.get::<http::request::Parts>() else {
        return Ok(());
    };
    if !applies(&parts.headers) {
        return Ok(());
    }
    let served = mcp_tool(tool);
    check(
        &served.name,
        &served.input_schema,
        arguments,
        &parts.headers,
    )
    .map_err(|e| (&e).into())
}

/// Checks the `Mcp-Param-*` headers of a call to `tool` (input schema `schema`) against
/// `arguments`.
pub(crate) fn check(
    tool: &str,
    schema: &Map<String, Value>,
    arguments: Option<&Map<String, Value>>,
    headers: &HeaderMap,
) -> Result<(), ParamHeaderError> {
    for (path, token) in declarations(schema) {
        let header = format!("{PREFIX}{token}");
        let argument = shown(&path.join("."));
        let tool = shown(tool);
        let mut values = headers.get_all(header.as_str()).iter();
        let raw = values.next();
        if raw.is_some() && values.next().is_some() {
            return Err(ParamHeaderError::Duplicated { tool, header });
        }
        let value = arguments
            .and_then(|a| value_at(a, &path))
            .filter(|v| !v.is_null());
        let (raw, value) = match (raw, value) {
            (None, None) => continue,
            (Some(_), None) => {
                return Err(ParamHeaderError::Unexpected {
                    tool,
                    header,
                    argument,
                });
            }
            (None, Some(_)) => {
                return Err(ParamHeaderError::Missing {
                    tool,
                    header,
                    argument,
                });
            }
            (Some(raw), Some(value)) => (raw, value),
        };
        let decoded = raw
            .to_str()
            .map_err(|_| "not visible ASCII")
            .and_then(|raw| decode(raw.trim_matches([' ', '\t'])))
            .map_err(|why| ParamHeaderError::Malformed {
                tool: tool.clone(),
                header: header.clone(),
                why,
            })?;
        if !matches(value, &decoded) {
            return Err(ParamHeaderError::Mismatch {
                tool,
                header,
                argument,
            });
        }
    }
    Ok(())
}

fn value_at<'a>(arguments: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    rest.iter()
        .try_fold(arguments.get(first)?, |node, key| node.get(key))
}

/// Whether the decoded header value is the argument as a client renders it: a string as is,
/// a boolean as `true`/`false`, a number in decimal (integral values compared as integers).
fn matches(value: &Value, decoded: &str) -> bool {
    match value {
        Value::String(s) => s == decoded,
        Value::Bool(b) => decoded == if *b { "true" } else { "false" },
        Value::Number(n) => {
            if n.to_string() == decoded {
                return true;
            }
            let integral = |s: &str| {
                let (whole, fraction) = s.split_once('.').unwrap_or((s, ""));
                (fraction.bytes().all(|b| b == b'0')
                    && !whole.is_empty()
                    && whole
                        .trim_start_matches('-')
                        .bytes()
                        .all(|b| b.is_ascii_digit()))
                .then(|| whole.parse::<i128>().ok())
                .flatten()
            };
            match (integral(&n.to_string()), integral(decoded)) {
                (Some(a), Some(b)) => a == b,
                _ => false,
            }
        }
        _ => false,
    }
}

/// A schema- or body-given name as shown in an error: control characters dropped, bounded.
fn shown(s: &str) -> String {
    let clean: String = s.chars().filter(|c| !c.is_control()).collect();
    if clean.chars().count() <= MAX_SHOWN {
        return clean;
    }
    let mut cut: String = clean.chars().take(MAX_SHOWN).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use http::HeaderValue;
    use serde_json::json;

    fn schema() -> Map<String, Value> {
        json!({
            "type": "object",
            "properties": {
                "region": { "type": "string", "x-mcp-header": "Region" },
                "count": { "type": "integer", "x-mcp-header": "Count" },
                "dry": { "type": "boolean", "x-mcp-header": "Dry" },
                "nested": { "type": "object", "properties": {
                    "zone": { "type": "string", "x-mcp-header": "Zone" }
                } },
                "plain": { "type": "string" }
            }
        })
        .as_object()
        .cloned()
        .unwrap()
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn run(args: Value, pairs: &[(&str, &str)]) -> Result<(), ParamHeaderError> {
        check("kit__route", &schema(), args.as_object(), &headers(pairs))
    }

    #[test]
    fn declarations_follow_the_properties_chain() {
        let found = declarations(&schema());
        assert_eq!(found.len(), 4);
        assert!(found.contains(&(vec!["nested".into(), "zone".into()], "Zone".into())));
    }

    #[test]
    fn invalid_declarations_declare_nothing() {
        for bad in [
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A B"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": 3}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A"},
                                  "b": {"type": "string", "x-mcp-header": "a"}}}),
            json!({"x-mcp-header": "Root", "properties": {}}),
        ] {
            assert!(declarations(bad.as_object().unwrap()).is_empty(), "{bad}");
        }
    }

    #[test]
    fn matching_headers_pass() {
        let hello = format!("=?base64?{}?=", STANDARD.encode("Hello"));
        assert_eq!(
            run(json!({"region": "Hello"}), &[("Mcp-Param-Region", &hello)]),
            Ok(())
        );
        assert_eq!(
            run(json!({"region": "eu"}), &[("mcp-param-region", " eu ")]),
            Ok(())
        );
        assert_eq!(
            run(
                json!({"count": 42, "dry": true, "nested": {"zone": "a"}, "plain": "x"}),
                &[
                    ("Mcp-Param-Count", "42.0"),
                    ("Mcp-Param-Dry", "true"),
                    ("Mcp-Param-Zone", "a")
                ]
            ),
            Ok(())
        );
        assert_eq!(run(json!({"region": null}), &[]), Ok(()));
    }

    #[test]
    fn values_outside_the_sentinel_are_literal() {
        let b64 = STANDARD.encode("Hello");
        assert_eq!(
            run(json!({"region": b64}), &[("Mcp-Param-Region", &b64)]),
            Ok(())
        );
        let open = format!("=?base64?{b64}");
        assert_eq!(
            run(json!({"region": open}), &[("Mcp-Param-Region", &open)]),
            Ok(())
        );
    }

    #[test]
    fn invalid_base64_is_malformed() {
        for bad in [
            "=?base64?SGVsbG8?=",
            "=?base64?SGVs!!!bG8=?=",
            "=?base64?SGVsbG9=?=",
        ] {
            let err = run(json!({"region": "Hello"}), &[("Mcp-Param-Region", bad)]).unwrap_err();
            assert!(
                matches!(err, ParamHeaderError::Malformed { .. }),
                "{bad}: {err}"
            );
            assert_eq!(err.header(), "Mcp-Param-Region");
            assert_eq!(err.tool(), "kit__route");
        }
    }

    #[test]
    fn disagreements_are_refused_by_kind() {
        let err = run(json!({"region": "eu"}), &[]).unwrap_err();
        assert!(matches!(err, ParamHeaderError::Missing { .. }));
        assert_eq!(
            err.to_string(),
            "header `Mcp-Param-Region` is missing, but argument `region` of tool `kit__route` is present"
        );
        let err = run(json!({}), &[("Mcp-Param-Region", "eu")]).unwrap_err();
        assert!(matches!(err, ParamHeaderError::Unexpected { .. }));
        let err = run(json!({"region": "eu"}), &[("Mcp-Param-Region", "us")]).unwrap_err();
        assert!(matches!(err, ParamHeaderError::Mismatch { .. }));
        assert!(!err.to_string().contains("us"), "values are not echoed");
        let err = run(
            json!({"region": "eu"}),
            &[("Mcp-Param-Region", "eu"), ("Mcp-Param-Region", "eu")],
        )
        .unwrap_err();
        assert!(matches!(err, ParamHeaderError::Duplicated { .. }));
        let err = run(json!({"count": 42}), &[("Mcp-Param-Count", "42.5")]).unwrap_err();
        assert!(matches!(err, ParamHeaderError::Mismatch { .. }));
        let err = run(json!({"dry": false}), &[("Mcp-Param-Dry", "False")]).unwrap_err();
        assert!(matches!(err, ParamHeaderError::Mismatch { .. }));
    }

    #[test]
    fn only_2026_clients_are_held_to_it() {
        assert!(applies(&headers(&[("MCP-Protocol-Version", "2026-07-28")])));
        assert!(!applies(&headers(&[(
            "MCP-Protocol-Version",
            "2025-11-25"
        )])));
        assert!(!applies(&HeaderMap::new()));
    }

    #[test]
    fn a_handler_checks_only_2026_http_requests() {
        let tool = ToolDescriptor::new("kit__route", schema());
        let args = json!({"region": "eu"});
        let extensions = |version: &str| {
            let (parts, ()) = http::Request::builder()
                .header("MCP-Protocol-Version", version)
                .header("Mcp-Param-Region", "xyzzy")
                .body(())
                .unwrap()
                .into_parts();
            let mut extensions = Extensions::new();
            extensions.insert(parts);
            extensions
        };
        assert!(check_call(&tool, args.as_object(), &Extensions::new()).is_ok());
        assert!(check_call(&tool, args.as_object(), &extensions("2025-11-25")).is_ok());
        let error = check_call(&tool, args.as_object(), &extensions("2026-07-28")).unwrap_err();
        assert_eq!(error.code, ErrorCode(HEADER_MISMATCH));
        assert_eq!(
            error.data,
            Some(json!({"header": "Mcp-Param-Region", "tool": "kit__route"}))
        );
        assert!(!error.message.contains("xyzzy"), "{}", error.message);
    }

    #[test]
    fn shown_names_are_clean_and_bounded() {
        assert_eq!(shown("a\u{1b}[31mb"), "a[31mb");
        assert_eq!(shown(&"x".repeat(100)).chars().count(), MAX_SHOWN + 1);
    }
}
