//! The span of one `tools/call`, and the W3C trace context it continues (SEP-414): a
//! request's `_meta` `traceparent`/`tracestate`, else its HTTP `traceparent` and `tracestate`
//! headers. With the feature `otel` and tracing-opentelemetry's layer in the subscriber, they
//! parent the call's span, so the caller's trace runs on through the server and into whatever
//! the tool calls. Without (the feature off, or no exporter configured), the call runs in
//! [`agent_core::trace::with_context`] with the caller's context unchanged, so an MCP client
//! under it passes the trace on to its server instead of breaking it. Both are the peer's
//! choice: a `traceparent` that is oversized or not of the W3C form is ignored and the call
//! starts a trace of its own (or none); an oversized or malformed `tracestate` is dropped.
//! Neither is ever an error to the client.

use agent_core::trace::W3cContext;
use rmcp::model::{Extensions, RequestMetaObject};

/// The longest `traceparent` read: version `00` takes 55 characters; later versions may
/// append fields, within reason.
const MAX_TRACEPARENT_BYTES: usize = 256;

/// The longest `tracestate` kept: the W3C limit for propagation (32 list members, 512
/// characters).
#[cfg(feature = "otel")]
const MAX_TRACESTATE_BYTES: usize = agent_core::trace::MAX_TRACESTATE_BYTES;

/// The span of a call of `tool` (a name the server lists): a root of its own, with the
/// request's trace context as its remote parent when it carries a valid one and a tracer
/// runs here; else that context, to pass on unchanged.
pub(crate) fn call_span(
    tool: &str,
    meta: &RequestMetaObject,
    extensions: &Extensions,
) -> (tracing::Span, Option<W3cContext>) {
    let span = tracing::info_span!(parent: None, "mcp_serve_call", tool = %tool);
    let Some(carried) = carried(meta, extensions) else {
        return (span, None);
    };
    #[cfg(feature = "otel")]
    if let Some(parent) = remote_parent(&carried) {
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        // Fails only without tracing-opentelemetry's layer: then the context passes through.
        if span.set_parent(parent).is_ok() {
            return (span, None);
        }
    }
    let passed = W3cContext::parse(carried.traceparent, carried.tracestate);
    (span, passed)
}

/// The trace fields the request carries: `_meta`'s when it has a `traceparent`, else the
/// HTTP headers'; `None` when absent or oversized.
fn carried<'a>(meta: &'a RequestMetaObject, extensions: &'a Extensions) -> Option<Carried<'a>> {
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
    (carried.traceparent.len() <= MAX_TRACEPARENT_BYTES).then_some(carried)
}

/// The OpenTelemetry context of `carried`; `None` when invalid.
#[cfg(feature = "otel")]
fn remote_parent(carried: &Carried<'_>) -> Option<opentelemetry::Context> {
    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry::trace::TraceContextExt as _;
    use opentelemetry_sdk::propagation::TraceContextPropagator;

    let context = TraceContextPropagator::new().extract(carried);
    context.span().span_context().is_valid().then_some(context)
}

/// A header's value when it is sent once, as text (W3C: several `traceparent` headers are
/// invalid).
fn single_header<'a>(headers: &'a http::HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    values.next().is_none().then_some(())?;
    value.to_str().ok()
}

/// The two W3C fields, as the request carries them.
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

    /// The OpenTelemetry parent `meta` and `extensions` carry.
    fn remote_parent(
        meta: &RequestMetaObject,
        extensions: &Extensions,
    ) -> Option<opentelemetry::Context> {
        super::remote_parent(&carried(meta, extensions)?)
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

#[cfg(test)]
mod pass_through {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn without_a_tracer_the_callers_context_passes_through() {
        // No subscriber with tracing-opentelemetry's layer in this test.
        let mut meta = RequestMetaObject::new();
        meta.set_traceparent(VALID);
        meta.set_tracestate("k=v");
        let (_span, passed) = call_span("echo", &meta, &Extensions::new());
        let passed = passed.expect("passed on");
        assert_eq!(passed.traceparent(), VALID);
        assert_eq!(passed.tracestate(), Some("k=v"));

        let mut bad = RequestMetaObject::new();
        bad.set_traceparent("00-zz");
        assert_eq!(call_span("echo", &bad, &Extensions::new()).1, None);
        assert_eq!(
            call_span("echo", &RequestMetaObject::new(), &Extensions::new()).1,
            None
        );
    }
}
