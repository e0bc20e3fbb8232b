//! W3C trace context as HTTP headers: a request whose `_meta` carries `traceparent` (and
//! `tracestate`), as the client's calls do when the caller's span is traced (SEP-414), goes
//! out with the same values as `traceparent`/`tracestate` headers, so HTTP-level tooling in
//! front of the server (proxies, load balancers, servers that read only headers) joins the
//! same trace.
//!
//! The values come from the caller's `_meta`: one longer than the W3C bounds, or that is not
//! a valid header value, is not repeated (the `_meta` copy still goes out).

use http::{HeaderMap, HeaderName, HeaderValue};
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, GetMeta as _, JsonRpcMessage, RequestParamsMeta,
};

/// The longest `traceparent` repeated (version `00` takes 55 characters).
const MAX_TRACEPARENT_BYTES: usize = 256;

/// The longest `tracestate` repeated (the W3C propagation limit).
const MAX_TRACESTATE_BYTES: usize = 512;

const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// Adds `message`'s trace context to `headers`; anything but a request with a `traceparent`
/// in its `_meta` leaves them as they are.
pub(crate) fn mirror(message: &ClientJsonRpcMessage, headers: &mut HeaderMap) {
    let JsonRpcMessage::Request(request) = message else {
        return;
    };
    let Some((traceparent, tracestate)) = context(&request.request) else {
        return;
    };
    let Some(traceparent) = value(traceparent, MAX_TRACEPARENT_BYTES) else {
        return;
    };
    headers.insert(TRACEPARENT, traceparent);
    match tracestate.and_then(|s| value(s, MAX_TRACESTATE_BYTES)) {
        Some(tracestate) => headers.insert(TRACESTATE, tracestate),
        None => headers.remove(TRACESTATE),
    };
}

/// The request's `traceparent` and `tracestate`: its typed parameters' `_meta` for the
/// requests the client traces, else the request-level `_meta` (which rmcp merges over the
/// parameters' when it writes the message, so it wins here too).
fn context(request: &ClientRequest) -> Option<(&str, Option<&str>)> {
    let meta = request.get_meta();
    if let Some(traceparent) = meta.get_traceparent() {
        return Some((traceparent, meta.get_tracestate()));
    }
    let params: &dyn RequestParamsMeta = match request {
        ClientRequest::CallToolRequest(r) => &r.params,
        ClientRequest::ReadResourceRequest(r) => &r.params,
        ClientRequest::GetPromptRequest(r) => &r.params,
        ClientRequest::CompleteRequest(r) => &r.params,
        _ => return None,
    };
    let meta = params.meta()?;
    Some((meta.get_traceparent()?, meta.get_tracestate()))
}

fn value(text: &str, max: usize) -> Option<HeaderValue> {
    if text.is_empty() || text.len() > max {
        return None;
    }
    HeaderValue::from_str(text).ok()
}

#[cfg(test)]
mod tests {
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, RequestId};

    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn call(traceparent: Option<&str>, tracestate: Option<&str>) -> ClientJsonRpcMessage {
        let mut params = CallToolRequestParams::new("echo");
        if let Some(t) = traceparent {
            params.set_traceparent(t);
        }
        if let Some(t) = tracestate {
            params.set_tracestate(t);
        }
        ClientJsonRpcMessage::request(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            RequestId::Number(1),
        )
    }

    #[test]
    fn a_traced_call_carries_both_headers() {
        let mut headers = HeaderMap::new();
        mirror(&call(Some(PARENT), Some("vendor=abc")), &mut headers);
        assert_eq!(headers[TRACEPARENT], PARENT);
        assert_eq!(headers[TRACESTATE], "vendor=abc");
    }

    #[test]
    fn an_untraced_call_adds_nothing() {
        let mut headers = HeaderMap::new();
        mirror(&call(None, Some("vendor=abc")), &mut headers);
        assert!(headers.is_empty());
    }

    #[test]
    fn values_that_cannot_be_headers_are_not_repeated() {
        let mut headers = HeaderMap::new();
        mirror(&call(Some("00-bad\r\nx-injected: 1"), None), &mut headers);
        assert!(headers.is_empty());
        let long = "a".repeat(MAX_TRACEPARENT_BYTES + 1);
        mirror(&call(Some(&long), None), &mut headers);
        assert!(headers.is_empty());
        // A valid parent keeps its header though its state is dropped.
        let state = "k=v,".repeat(200);
        mirror(&call(Some(PARENT), Some(&state)), &mut headers);
        assert_eq!(headers[TRACEPARENT], PARENT);
        assert!(!headers.contains_key(TRACESTATE));
    }
}
