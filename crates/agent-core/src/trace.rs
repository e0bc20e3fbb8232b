//! A W3C trace context passed through unchanged, for a process that traces nothing itself.
//!
//! A process with an OpenTelemetry tracer continues a caller's trace in spans of its own and
//! propagates theirs. One without (a gateway with no OTLP endpoint, an agent service that
//! exports nothing) must still not break the trace: a call made inside [`with_context`] tells
//! the MCP server the caller's `traceparent`/`tracestate` as they came, so the server's spans
//! join the caller's trace directly. An MCP client reads [`current`] only when the current span
//! has no trace context of its own. The scope is the task's: it follows a call through every
//! `await` of the same task, not into a task spawned from it.
//!
//! The values are a peer's choice: [`W3cContext::parse`] keeps only a `traceparent` of the W3C
//! form and a `tracestate` within the W3C bounds.
//!
//! ```
//! use agent_core::trace::{self, W3cContext};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let context = W3cContext::parse(
//!     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
//!     Some("vendor=abc"),
//! )
//! .expect("a valid traceparent");
//! let seen = trace::with_context(context.clone(), async { trace::current() }).await;
//! assert_eq!(seen, Some(context));
//! assert_eq!(trace::current(), None);
//! assert!(W3cContext::parse("00-not-a-trace", None).is_none());
//! # });
//! ```

use std::future::Future;

/// The longest `tracestate` kept (the W3C limit for propagation: 32 members, 512 characters).
pub const MAX_TRACESTATE_BYTES: usize = 512;

/// A caller's W3C trace context: a valid `traceparent` and, when it came with one within
/// bounds, its `tracestate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct W3cContext {
    traceparent: String,
    tracestate: Option<String>,
}

impl W3cContext {
    /// The context of `traceparent` (version `00`: `00-<32 hex>-<16 hex>-<2 hex>`, lower case,
    /// trace and parent ids not all zero) and `tracestate`; `None` when `traceparent` is not
    /// of that form. A `tracestate` over [`MAX_TRACESTATE_BYTES`], empty or with characters
    /// outside printable ASCII is dropped.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        if !is_traceparent(traceparent) {
            return None;
        }
        let tracestate = tracestate
            .filter(|s| !s.is_empty() && s.len() <= MAX_TRACESTATE_BYTES)
            .filter(|s| s.bytes().all(|b| (0x20..0x7f).contains(&b)))
            .map(str::to_owned);
        Some(Self {
            traceparent: traceparent.to_owned(),
            tracestate,
        })
    }

    /// The `traceparent`.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The `tracestate`, when kept.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }
}

fn is_traceparent(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let nonzero = |s: &str| s.bytes().any(|b| b != b'0');
    matches!(parts.as_slice(), [version, trace, parent, flags]
        if *version == "00"
            && hex(trace, 32)
            && hex(parent, 16)
            && hex(flags, 2)
            && nonzero(trace)
            && nonzero(parent))
}

tokio::task_local! {
    static CURRENT: W3cContext;
}

/// Runs `call` with `context` as the trace context its MCP calls pass on (when no span of
/// this process carries one).
pub async fn with_context<F: Future>(context: W3cContext, call: F) -> F::Output {
    CURRENT.scope(context, call).await
}

/// The context of the [`with_context`] scope this task runs in, if any.
pub fn current() -> Option<W3cContext> {
    CURRENT.try_with(Clone::clone).ok()
}

#[cfg(test)]
mod tests {
    use super::W3cContext;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn only_the_w3c_form_is_kept() {
        assert!(W3cContext::parse(VALID, None).is_some());
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0\n",
        ] {
            assert!(W3cContext::parse(bad, None).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn a_tracestate_out_of_bounds_is_dropped() {
        let kept = W3cContext::parse(VALID, Some("a=1,b=2")).unwrap();
        assert_eq!(kept.tracestate(), Some("a=1,b=2"));
        let long = "k=v,".repeat(200);
        for bad in ["", "a=1\r\nx: y", long.as_str()] {
            let context = W3cContext::parse(VALID, Some(bad)).unwrap();
            assert_eq!(context.tracestate(), None, "{bad:?}");
        }
    }
}
