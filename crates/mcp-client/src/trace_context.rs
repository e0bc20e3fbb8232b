//! W3C trace context on outgoing calls (feature `otel`, SEP-414): every `tools/call` carries
//! the caller's current span as `_meta` `traceparent` (and `tracestate` when there is one),
//! so a trace an agent service started continues into the MCP server. The context is the one
//! tracing-opentelemetry keeps for the current `tracing` span: without its layer in the
//! subscriber (or with a span that is not sampled into any trace) nothing is added.

use opentelemetry::propagation::{Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use rmcp::model::RequestParamsMeta;
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

/// Writes the current span's trace context into `params`' `_meta`, replacing any
/// `traceparent`/`tracestate` there; leaves `params` as they are when the current span has
/// no valid OpenTelemetry context.
pub(crate) fn inject(params: &mut impl RequestParamsMeta) {
    let context = tracing::Span::current().context();
    if !context.span().span_context().is_valid() {
        return;
    }
    let mut fields = Fields::default();
    TraceContextPropagator::new().inject_context(&context, &mut fields);
    if let Some(traceparent) = fields.traceparent {
        params.set_traceparent(&traceparent);
    }
    if let Some(tracestate) = fields.tracestate {
        params.set_tracestate(&tracestate);
    }
}
