//! The span of one `tools/call`, and the W3C trace context it continues (feature `otel`,
//! SEP-414): a request's `_meta` `traceparent`/`tracestate`, else its HTTP `traceparent` and
//! `tracestate` headers, parent the call's span, so the caller's trace runs on through the
//! server and into whatever the tool calls. Both are the peer's choice: a `traceparent` that
//! is oversized or not of the W3C form is ignored and the call starts a trace of its own; an
//! oversized or malformed `tracestate` is dropped. Neither is ever an error to the client.

use rmcp::model::{Extensions, RequestMetaObject};

/// The longest `traceparent` read: version `00` takes 55 characters; later versions may
/// append fields, within reason.
#[cfg(feature = "otel")]
const MAX_TRACEPARENT_BYTES: usize = 256;

/// The longest `tracestate` kept: the W3C limit for propagation (32 list members, 512
/// characters).
#[cfg(feature = "otel")]
const MAX_TRACESTATE_BYTES: usize = 512;

/// The span of a call of `tool` (a name the server lists): a root of its own, with the
/// request's trace context as its remote parent when it carries a valid one.
pub(crate) fn call_span(
    tool: &str,
    meta: &RequestMetaObject,
    extensions: &Extensions,
) -> tracing::Span {
    let span = tracing::info_span!(parent: None, "mcp_serve_call", tool = %tool);
    #[cfg(feature = "otel")]
    if let Some(parent) = remote_parent(meta, extensions) {
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        // Fails only without tracing-opentelemetry's layer: then there is no trace to join.
        let _ = span.set_parent(parent);
    }
    #[cfg(not(feature = "otel"))]
    let _ = (meta, extensions);
    span
}

/// The trace context the request carries: `_meta`'s when it has a `traceparent`, else the
/// HTTP headers'; `None` when absent or invalid.
#[cfg(feature = "otel")]
fn remote_parent(
    meta: &RequestMetaObject,
    extensions: &Extensions,
) -> Option<opentelemetry::Context> {
    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry::trace::TraceContextExt as _;
    use opentelemetry_sdk::propagation::TraceContextPropagator;

    let carried = match meta.get_traceparent() {
        Some(traceparent) => Carried {
            traceparent,
            tracestate: meta.get_tracestate(),
        },
        None => {
            let headers = &extensions.get::<http::request::Parts>()?.headers;
            Carried {
                traceparent: single_header(headers, "traceparent")?,
                tracestate: single_header(headers, "tracestate"),
            }
        }
    };
    if carried.traceparent.len() > MAX_TRACEPARENT_BYTES {
        return None;
    }
    let context = TraceContextPropagator::new().extract(&carried);
    context.span().span_context().is_valid().then_some(context)
}

/// A header's value when it is sent once, as text (W3C: several `traceparent` headers are
/// invalid).
#[cfg(feature = "otel")]
fn single_header<'a>(headers: &'a http::HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    values.next().is_none().then_some(())?;
    value.to_str().ok()
}

/// The two W3C fields, as the propagator reads them.
#[cfg(feature = "otel")]
struct Carried<'a> {
    traceparent: &'a str,
    tracestate: Option<&'a str>,
}

#[cfg(feature = "otel")]
impl opentelemetry::propagation::Extractor for Carried<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => Some(self.traceparent),
            "tracestate" => self
                .tracestate
                .filter(|state| state.len() <= MAX_TRACESTATE_BYTES),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec!["traceparent", "tracestate"]
    }
}

#[cfg(all(test, feature = "otel"))]
mod tests {
    use super::*;

    fn meta(traceparent: &str, tracestate: Option<&str>) -> RequestMetaObject {
        let mut meta = RequestMetaObject::new();
        meta.set_traceparent(traceparent);
        if let Some(state) = tracestate {
            meta.set_tracestate(state);
        }
        meta
    }

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_in_meta_is_the_parent() {
        use opentelemetry::trace::TraceContextExt as _;
        let parent = remote_parent(&meta(VALID, Some("k=v")), &Extensions::new()).unwrap();
        let span = parent.span();
        let context = span.span_context();
        assert_eq!(
            context.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(context.is_remote());
        assert_eq!(context.trace_state().get("k"), Some("v"));
    }

    #[test]
    fn malformed_or_oversized_traceparents_are_ignored() {
        for bad in [
            "",
            "garbage",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            &format!("{VALID}{}", "-x".repeat(200)),
        ] {
            assert!(
                remote_parent(&meta(bad, None), &Extensions::new()).is_none(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn an_oversized_tracestate_is_dropped_and_the_parent_kept() {
        use opentelemetry::trace::TraceContextExt as _;
        let state = (0..40)
            .map(|i| format!("k{i}=v{}", "x".repeat(20)))
            .collect::<Vec<_>>()
            .join(",");
        assert!(state.len() > MAX_TRACESTATE_BYTES);
        let parent = remote_parent(&meta(VALID, Some(&state)), &Extensions::new()).unwrap();
        assert_eq!(parent.span().span_context().trace_state().header(), "");
    }

    #[test]
    fn the_http_header_is_read_when_meta_has_none() {
        use opentelemetry::trace::TraceContextExt as _;
        let request = http::Request::builder()
            .header("traceparent", VALID)
            .body(())
            .unwrap();
        let (parts, ()) = request.into_parts();
        let mut extensions = Extensions::new();
        extensions.insert(parts);
        let parent = remote_parent(&RequestMetaObject::new(), &extensions).unwrap();
        assert_eq!(
            parent.span().span_context().span_id().to_string(),
            "00f067aa0ba902b7"
        );
    }

    #[test]
    fn two_traceparent_headers_are_ignored() {
        let request = http::Request::builder()
            .header("traceparent", VALID)
            .header("traceparent", VALID)
            .body(())
            .unwrap();
        let (parts, ()) = request.into_parts();
        let mut extensions = Extensions::new();
        extensions.insert(parts);
        assert!(remote_parent(&RequestMetaObject::new(), &extensions).is_none());
    }
}
