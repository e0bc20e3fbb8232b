//! Why a client's bytes are no message this server can take, as the JSON-RPC error that says
//! so: shared by the stdio framing and the HTTP front, so both answer the same bytes alike.

use rmcp::model::{ClientJsonRpcMessage, ErrorCode, ErrorData, RequestId};
use serde_json::Value;

/// How deep serde_json reads nested JSON (its recursion limit).
pub(crate) const MAX_DEPTH: usize = 128;

/// The error answering bytes that are no client message, and the request's id when it has a
/// readable one. `None` when the bytes are a message, or are no JSON at all and `quiet`
/// (stdio ignores such lines, as the other MCP SDKs do: answering garbage can start an error
/// storm with a peer that echoes it).
pub(crate) fn refusal(bytes: &[u8], quiet: bool) -> Option<(Option<RequestId>, ErrorData)> {
    let error = match serde_json::from_slice::<ClientJsonRpcMessage>(bytes) {
        Ok(_) => return None,
        Err(error) => error,
    };
    let value = match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => value,
        Err(error) if too_deep(&error) => {
            let message = format!(
                "Parse error: the message nests deeper than the limit of {MAX_DEPTH} levels"
            );
            return Some((None, ErrorData::new(ErrorCode::PARSE_ERROR, message, None)));
        }
        Err(_) if quiet => return None,
        Err(_) => {
            let message = "Parse error: the body is not JSON";
            return Some((None, ErrorData::new(ErrorCode::PARSE_ERROR, message, None)));
        }
    };
    let id = value
        .get("id")
        .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
    let method = value.get("method").and_then(Value::as_str);
    let envelope = value.get("jsonrpc").and_then(Value::as_str) == Some("2.0") && id.is_some();
    if let (true, Some(method)) = (envelope, method) {
        // A request rmcp would take under any method name (unknown ones are custom requests)
        // failed on its params: a known method with params that do not fit it.
        let message = format!(
            "Invalid params: `{}` takes other params ({})",
            crate::cut(method, 64),
            crate::cut(&error.to_string(), 200)
        );
        return Some((id, ErrorData::new(ErrorCode::INVALID_PARAMS, message, None)));
    }
    let message = "Invalid Request: not a JSON-RPC message a client may send";
    Some((
        id,
        ErrorData::new(ErrorCode::INVALID_REQUEST, message, None),
    ))
}

/// The error answering a message larger than `max` bytes, which was not read.
pub(crate) fn too_large(max: usize) -> ErrorData {
    let message = format!(
        "Invalid Request: the message is larger than this server's limit of {max} bytes \
         (max_request_bytes); it was not read"
    );
    ErrorData::new(ErrorCode::INVALID_REQUEST, message, None)
}

/// The answer to a `tools/call` that rmcp read as a custom request because its params do not
/// fit (`arguments` that are no object): invalid params (-32602), instead of "method not found"
/// (docs/upstream.md#rmcp-unfit-params). `None` for any other method: one this server does not
/// serve (or one a protocol revision removed) stays "method not found", which the stateless
/// HTTP front turns into its 404.
pub(crate) fn unfit_params(method: &str, params: Option<&Value>) -> Option<ErrorData> {
    use rmcp::model::{CallToolRequestMethod as Call, ConstString};
    if method != Call::VALUE {
        return None;
    }
    let why = match params {
        Some(params) => {
            serde_json::from_value::<rmcp::model::CallToolRequestParams>(params.clone())
                .err()?
                .to_string()
        }
        None => "no params".to_owned(),
    };
    let message = format!(
        "Invalid params: these params do not fit `{method}`: {}",
        crate::cut(&why, 200)
    );
    Some(ErrorData::new(ErrorCode::INVALID_PARAMS, message, None))
}

fn too_deep(error: &serde_json::Error) -> bool {
    error.to_string().starts_with("recursion limit exceeded")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(bytes: &str, quiet: bool, expected: Option<(Option<i64>, i32)>) {
        let got = refusal(bytes.as_bytes(), quiet).map(|(id, e)| {
            let id = id.map(|id| match id {
                RequestId::Number(n) => n,
                RequestId::String(_) => -1,
            });
            (id, e.code.0)
        });
        assert_eq!(got, expected, "{bytes}");
    }

    #[test]
    fn each_kind_of_bad_message_gets_its_error() {
        check(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, false, None);
        check(
            r#"{"jsonrpc":"2.0","id":1,"method":"x/custom","params":{}}"#,
            false,
            None,
        );
        check("{", false, Some((None, -32700)));
        check("{", true, None);
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        check(&deep, true, Some((None, -32700)));
        check(
            r#"{"jsonrpc":"2.0","id":1}"#,
            false,
            Some((Some(1), -32600)),
        );
        check("[]", false, Some((None, -32600)));
        check(
            r#"{"jsonrpc":"2.0","id":7,"method":"x/custom","params":[1]}"#,
            false,
            Some((Some(7), -32602)),
        );
    }

    #[test]
    fn a_known_method_read_as_custom_has_unfit_params() {
        let params = serde_json::json!({"name": "a", "arguments": [1]});
        let error = unfit_params("tools/call", Some(&params)).unwrap();
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert!(error.message.contains("tools/call"), "{}", error.message);
        assert!(unfit_params("x/custom", Some(&params)).is_none());
        // A method a revision removed stays "method not found" (the stateless front's 404).
        let init = serde_json::json!({"protocolVersion": "2025-11-25"});
        assert!(unfit_params("initialize", Some(&init)).is_none());
        assert!(unfit_params("logging/setLevel", None).is_none());
    }
}
