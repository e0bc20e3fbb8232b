//! `Mcp-Param-*` request headers (SEP-2243, MCP revision 2026-07-28), on both sides.
//!
//! A tool's input schema may mark a property with `x-mcp-header: "<Token>"`; a client then
//! mirrors that argument of a `tools/call` into the `Mcp-Param-<Token>` request header, so
//! intermediaries can route on it without parsing the body, and a server refuses a call whose
//! headers disagree with its arguments (JSON-RPC `-32020`).
//!
//! This crate holds what the client side (`mcp-transport-http`) and the server side
//! (`mcp-serve`) must agree on: which declarations a schema makes ([`declarations`]), how an
//! argument is rendered ([`render`]) and carried in a header value ([`encode_value`],
//! [`decode_value`]), and which requests are held to it ([`applies`]).
//!
//! ```
//! use mcp_param_headers::{declarations, encode_value, render};
//!
//! let schema = serde_json::json!({
//!     "type": "object",
//!     "properties": { "region": { "type": "string", "x-mcp-header": "Region" } },
//! });
//! let arguments = serde_json::json!({ "region": "eu-west" });
//! for (path, token) in declarations(schema.as_object().unwrap()) {
//!     let value = render(&arguments[&path[0]]).unwrap();
//!     assert_eq!((token.as_str(), encode_value(&value).as_str()), ("Region", "eu-west"));
//! }
//! ```
//!
//! # Architecture invariant
//!
//! Pure functions over JSON values and HTTP headers: no MCP library, no I/O.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use http::HeaderMap;
use serde_json::{Map, Value};

/// The first protocol revision whose clients send `Mcp-Param-*` headers.
pub const FIRST_REVISION: &str = "2026-07-28";
/// The prefix of the headers, before the declared token.
pub const PREFIX: &str = "Mcp-Param-";
const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";
/// Longest token a declaration may name.
const MAX_TOKEN: usize = 128;
/// Deepest `properties` chain looked at.
const MAX_DEPTH: usize = 16;

/// One declaration: the property path from the arguments' root, and the header token.
pub type Declaration = (Vec<String>, String);

/// The `x-mcp-header` declarations of a tool's input `schema`: `(property path, token)` in
/// schema order, or none when any declaration is invalid (on the schema's root, not a string
/// RFC 9110 token of at most 128 bytes, on a property that is not a string, integer or
/// boolean, or two tokens equal but for case).
///
/// ```
/// use mcp_param_headers::declarations;
///
/// let schema = serde_json::json!({
///     "type": "object",
///     "properties": { "region": { "type": "string", "x-mcp-header": "Region" } },
/// });
/// let found = declarations(schema.as_object().unwrap());
/// assert_eq!(found, vec![(vec!["region".to_owned()], "Region".to_owned())]);
/// ```
pub fn declarations(schema: &Map<String, Value>) -> Vec<Declaration> {
    let mut out = Vec::new();
    if schema.contains_key("x-mcp-header") || !collect(schema, &mut Vec::new(), &mut out, 0) {
        return Vec::new();
    }
    let mut seen: Vec<String> = Vec::new();
    for (_, token) in &out {
        let lower = token.to_ascii_lowercase();
        if seen.contains(&lower) {
            return Vec::new();
        }
        seen.push(lower);
    }
    out
}

/// Walks the `properties` chain; `false` when a declaration is invalid.
fn collect(
    schema: &Map<String, Value>,
    path: &mut Vec<String>,
    out: &mut Vec<Declaration>,
    depth: usize,
) -> bool {
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return true;
    };
    if depth >= MAX_DEPTH {
        return true;
    }
    for (name, property) in properties {
        let Value::Object(property) = property else {
            continue;
        };
        path.push(name.clone());
        if let Some(token) = property.get("x-mcp-header") {
            let typed = matches!(
                property.get("type").and_then(Value::as_str),
                Some("string" | "integer" | "boolean")
            );
            match token.as_str() {
                Some(token) if typed && is_token(token) => {
                    out.push((path.clone(), token.to_owned()));
                }
                _ => return false,
            }
        }
        if !collect(property, path, out, depth + 1) {
            return false;
        }
        path.pop();
    }
    true
}

/// An RFC 9110 token, bounded.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_TOKEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// An argument's text as a header value: as it is when it is visible ASCII without leading
/// or trailing blanks (and does not look like the sentinel), otherwise
/// `=?base64?<standard base64 of its UTF-8>?=`.
///
/// ```
/// use mcp_param_headers::{decode_value, encode_value};
///
/// assert_eq!(encode_value("eu-west"), "eu-west");
/// assert_eq!(encode_value(" köln"), "=?base64?IGvDtmxu?=");
/// assert_eq!(decode_value(&encode_value(" köln")).unwrap(), " köln");
/// ```
pub fn encode_value(value: &str) -> String {
    let blank = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    let bytes = value.as_bytes();
    let wrapped = blank(bytes.first())
        || blank(bytes.last())
        || bytes.iter().any(|b| !(0x20..0x7f).contains(b))
        || (value.starts_with(SENTINEL_START) && value.ends_with(SENTINEL_END));
    if wrapped {
        format!("{SENTINEL_START}{}{SENTINEL_END}", STANDARD.encode(value))
    } else {
        value.to_owned()
    }
}

/// A header value as sent: literal, or the UTF-8 text inside a base64 sentinel (standard,
/// padded, canonical base64). Refused: bytes that are not visible ASCII, invalid base64, a
/// payload that is not UTF-8.
pub fn decode_value(raw: &str) -> Result<String, &'static str> {
    if raw.bytes().any(|b| !(0x20..0x7f).contains(&b)) {
        return Err("not visible ASCII");
    }
    let Some(payload) = raw
        .strip_prefix(SENTINEL_START)
        .and_then(|rest| rest.strip_suffix(SENTINEL_END))
    else {
        return Ok(raw.to_owned());
    };
    // STANDARD requires canonical padding and rejects non-zero trailing bits.
    let bytes = STANDARD
        .decode(payload)
        .map_err(|_| "invalid base64 inside `=?base64?...?=`")?;
    String::from_utf8(bytes).map_err(|_| "base64 payload is not UTF-8")
}

/// An argument's text as a client renders it: a string as is, a boolean or a number as
/// JSON writes it; anything else (null, arrays, objects) has no header.
pub fn render(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Whether a request's `MCP-Protocol-Version` is one whose clients mirror arguments.
pub fn applies(headers: &HeaderMap) -> bool {
    headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim() >= FIRST_REVISION)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn invalid_declarations_declare_nothing() {
        let schema = |properties: Value| {
            json!({ "type": "object", "properties": properties })
                .as_object()
                .unwrap()
                .clone()
        };
        for bad in [
            json!({ "a": { "type": "object", "x-mcp-header": "A" } }),
            json!({ "a": { "type": "string", "x-mcp-header": "" } }),
            json!({ "a": { "type": "string", "x-mcp-header": "with space" } }),
            json!({ "a": { "type": "string", "x-mcp-header": 7 } }),
            json!({ "a": { "type": "string", "x-mcp-header": "X" },
                    "b": { "type": "string", "x-mcp-header": "x" } }),
        ] {
            assert!(declarations(&schema(bad.clone())).is_empty(), "{bad}");
        }
        let rooted = json!({ "type": "object", "x-mcp-header": "R" });
        assert!(declarations(rooted.as_object().unwrap()).is_empty());
    }

    #[test]
    fn values_round_trip_and_odd_ones_are_wrapped() {
        for text in [
            "plain",
            "",
            " lead",
            "trail\t",
            "ünï",
            "=?base64?abc?=",
            "a\nb",
        ] {
            let encoded = encode_value(text);
            assert!(encoded.bytes().all(|b| (0x20..0x7f).contains(&b)));
            assert_eq!(decode_value(&encoded).unwrap(), text);
        }
        assert_eq!(encode_value("plain"), "plain");
        assert!(decode_value("=?base64?SGVsbG8?=").is_err());
        assert!(decode_value("caf\u{e9}").is_err());
    }
}
