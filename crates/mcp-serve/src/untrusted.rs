//! An upstream server's request for user input, made fit to relay to a downstream client:
//! every string without control characters (line feed and tab kept), bounded, and a URL
//! request only with an `http(s)` URL.

use rmcp::model::ElicitRequestParams;
use serde_json::Value;

/// At most this many bytes of a request's `message`.
pub(crate) const MAX_MESSAGE: usize = 4096;

/// At most this many bytes of any other string of a request (schema titles, descriptions,
/// enum values, defaults, property names).
pub(crate) const MAX_STRING: usize = 1024;

/// `request` with every string cleaned and bounded, or `None` when it must be declined
/// instead: a URL request whose URL holds control characters or is not `http(s)`, or a
/// request that cannot be read back once cleaned.
pub(crate) fn clean_request(request: ElicitRequestParams) -> Option<ElicitRequestParams> {
    let mut value = serde_json::to_value(&request).ok()?;
    let object = value.as_object_mut()?;
    if let Some(url) = object.get("url") {
        let url = url.as_str()?;
        if !acceptable_url(url) {
            return None;
        }
    }
    for (key, field) in object.iter_mut() {
        let max = if key == "message" {
            MAX_MESSAGE
        } else {
            MAX_STRING
        };
        clean_value(field, max);
    }
    serde_json::from_value(value).ok()
}

/// Whether `url` may be shown to a person: `http` or `https`, no control character, no
/// whitespace.
fn acceptable_url(url: &str) -> bool {
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) || url.len() > MAX_STRING {
        return false;
    }
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://")
}

/// Cleans every string in `value` (object keys too), each cut to `max` bytes.
fn clean_value(value: &mut Value, max: usize) {
    match value {
        Value::String(text) => *text = clean_text(text, max),
        Value::Array(items) => items.iter_mut().for_each(|v| clean_value(v, MAX_STRING)),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            for (key, mut item) in entries {
                clean_value(&mut item, MAX_STRING);
                map.insert(clean_text(&key, MAX_STRING), item);
            }
        }
        _ => {}
    }
}

/// `text` without control characters (C0, DEL, C1) other than `\n` and `\t`, cut to `max`
/// bytes.
pub(crate) fn clean_text(text: &str, max: usize) -> String {
    let kept: String = text
        .chars()
        .filter(|&c| c == '\n' || c == '\t' || !c.is_control())
        .collect();
    crate::cut(&kept, max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(value: Value) -> ElicitRequestParams {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn controls_are_removed_from_every_string_and_sizes_are_bounded() {
        let hostile = request(json!({
            "mode": "form",
            "message": format!("pay\u{1b}[2J\u{9b}31m now\r\nline two\t{}", "x".repeat(10_000)),
            "requestedSchema": {"type": "object", "properties": {
                "na\u{7}me": {"type": "string", "title": "T\u{0}itle", "description": "d\u{1b}]8;;x\u{7}"},
            }},
        }));
        let cleaned = serde_json::to_value(clean_request(hostile).unwrap()).unwrap();
        let message = cleaned["message"].as_str().unwrap();
        assert!(
            message.starts_with("pay[2J31m now\nline two\t"),
            "{message:?}"
        );
        assert!(
            message.len() <= MAX_MESSAGE + '…'.len_utf8(),
            "{}",
            message.len()
        );
        let property = &cleaned["requestedSchema"]["properties"]["name"];
        assert_eq!(property["title"], "Title");
        assert_eq!(property["description"], "d]8;;x");
    }

    #[test]
    fn a_url_that_is_not_http_or_holds_controls_is_refused() {
        let url = |url: &str| {
            request(json!({"mode": "url", "message": "m", "url": url, "elicitationId": "e"}))
        };
        assert!(clean_request(url("https://example.com/a")).is_some());
        assert!(clean_request(url("HTTP://example.com/a")).is_some());
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "https://example.com/\u{1b}[2J",
            "https://exa mple.com",
            "https://example.com/\u{85}",
        ] {
            assert!(clean_request(url(bad)).is_none(), "{bad:?}");
        }
    }
}
