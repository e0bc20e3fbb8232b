//! W3C trace context on outgoing calls (SEP-414): every `tools/call`, `resources/read`,
//! `prompts/get` and `completion/complete` carries the caller's trace as `_meta`
//! `traceparent` (and `tracestate` when there is one), so a trace an agent service started
//! continues into the MCP server; over streamable HTTP the transport repeats both as headers.
//!
//! With the feature `otel`, the context is the one tracing-opentelemetry keeps for the current
//! `tracing` span (a span of this process, child of the caller's). Without a valid one —
//! no such layer in the subscriber, or the feature off — it is the context the caller passed
//! through [`agent_core::trace::with_context`], unchanged; with neither, nothing is added.

use rmcp::model::RequestParamsMeta;

/// Writes the caller's trace context into `params`' `_meta`, replacing any
/// `traceparent`/`tracestate` there; leaves `params` as they are when there is none.
pub(crate) fn inject(params: &mut impl RequestParamsMeta) {
    #[cfg(feature = "otel")]
    if let Some((traceparent, tracestate)) = from_span() {
        params.set_traceparent(&traceparent);
        if let Some(tracestate) = tracestate {
            params.set_tracestate(&tracestate);
        }
        return;
    }
    if let Some(context) = agent_core::trace::current() {
        params.set_traceparent(context.traceparent());
        if let Some(tracestate) = context.tracestate() {
            params.set_tracestate(tracestate);
        }
    }
}

/// The current span's W3C fields, when it has a valid OpenTelemetry context.
#[cfg(feature = "otel")]
fn from_span() -> Option<(String, Option<String>)> {
    use opentelemetry::propagation::{Injector, TextMapPropagator};
    use opentelemetry::trace::TraceContextExt as _;
    use opentelemetry_sdk::propagation::TraceContextPropagator;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;

    /// The two W3C fields the propagator writes.
    #[derive(Default)]
    struct Fields {
        traceparent: Option<String>,
        tracestate: Option<String>,
    }

    impl Injector for Fields {
        fn set(&mut self, key: &str, value: String) {
            match key {
                "traceparent" => self.traceparent = Some(value),
                "tracestate" if !value.is_empty() => self.tracestate = Some(value),
                _ => {}
            }
        }
    }

    let context = tracing::Span::current().context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut fields = Fields::default();
    TraceContextPropagator::new().inject_context(&context, &mut fields);
    Some((fields.traceparent?, fields.tracestate))
}
