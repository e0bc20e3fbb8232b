//! Tunables of the HTTP transport.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::CertificateDer;

use crate::resolve::Resolve;

/// The default maximum size of a JSON response body and of one server-sent event: 16 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// Options of an [`HttpConnector`](crate::HttpConnector), shared by every session it opens.
///
/// Build with [`HttpOptions::default`] and the `with_*` methods:
///
/// ```
/// use std::time::Duration;
/// use mcp_transport_http::HttpOptions;
///
/// let options = HttpOptions::default()
///     .with_max_response_bytes(4 * 1024 * 1024)
///     .with_pool_idle_timeout(Duration::from_secs(30));
/// assert_eq!(options.max_response_bytes, 4 * 1024 * 1024);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Largest JSON response body accepted; a larger one fails the request instead of being
    /// buffered. Default [`DEFAULT_MAX_RESPONSE_BYTES`].
    pub max_response_bytes: usize,
    /// Largest single server-sent event accepted; a larger one fails its stream. Default
    /// [`DEFAULT_MAX_RESPONSE_BYTES`].
    pub max_sse_event_bytes: usize,
    /// How much of an error response body is kept for the error message. Default 8 KiB.
    pub max_error_body_bytes: usize,
    /// How long an idle pooled connection is kept. Default 90 s.
    pub pool_idle_timeout: Duration,
    /// Idle pooled connections kept per host. Default 16.
    pub pool_max_idle_per_host: usize,
    /// Time allowed for the TCP connect of one new connection. Default 30 s (the caller's
    /// connect timeout still bounds the whole connect + initialize + listing).
    pub tcp_connect_timeout: Duration,
    /// Requests a session may have in flight at once. Default 16.
    pub max_concurrent_requests: usize,
    /// After an HTTP 404 for a live session: how long to wait for the session's other
    /// requests, and (separately) for the new `initialize` handshake. Default 10 s.
    pub session_recovery_timeout: Duration,
    /// After the handshake: how long the session's requests wait for the server to answer
    /// the standalone GET stream, which rmcp opens alongside them. A server may send what it
    /// has for a request (an elicitation for a running call, say) on that stream alone and
    /// lose it when the stream is not open yet (docs/upstream.md#rmcp-get-stream-order); after
    /// this long, requests go anyway. Default 5 s.
    pub event_stream_wait: Duration,
    /// Reconnection attempts of an SSE stream that failed (a server's `retry` field sets the
    /// delay; otherwise it doubles from `sse_reconnect_base_delay`). Default 5.
    pub sse_reconnect_attempts: usize,
    /// First reconnection delay of an SSE stream without a server `retry`. Default 1 s.
    pub sse_reconnect_base_delay: Duration,
    /// Longest reconnection delay of an SSE stream. Default 30 s.
    pub sse_reconnect_max_delay: Duration,
    /// Certificates trusted for `https` on top of the Mozilla roots (e.g. a private CA).
    pub extra_root_certificates: Vec<CertificateDer<'static>>,
    /// How host names are resolved. `None` (the default): the system resolver. The SSRF
    /// guard of caller-supplied specs applies to whatever it answers.
    pub resolver: Option<Arc<dyn Resolve>>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_sse_event_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_error_body_bytes: 8 * 1024,
            pool_idle_timeout: Duration::from_secs(90),
            pool_max_idle_per_host: 16,
            tcp_connect_timeout: mcp_config::DEFAULT_CONNECT_TIMEOUT,
            max_concurrent_requests: 16,
            session_recovery_timeout: Duration::from_secs(10),
            event_stream_wait: Duration::from_secs(5),
            sse_reconnect_attempts: 5,
            sse_reconnect_base_delay: Duration::from_secs(1),
            sse_reconnect_max_delay: Duration::from_secs(30),
            extra_root_certificates: Vec::new(),
            resolver: None,
        }
    }
}

impl HttpOptions {
    /// Sets [`max_response_bytes`](Self::max_response_bytes).
    pub fn with_max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// Sets [`max_sse_event_bytes`](Self::max_sse_event_bytes).
    pub fn with_max_sse_event_bytes(mut self, bytes: usize) -> Self {
        self.max_sse_event_bytes = bytes;
        self
    }

    /// Sets [`pool_idle_timeout`](Self::pool_idle_timeout).
    pub fn with_pool_idle_timeout(mut self, timeout: Duration) -> Self {
        self.pool_idle_timeout = timeout;
        self
    }

    /// Sets [`tcp_connect_timeout`](Self::tcp_connect_timeout).
    pub fn with_tcp_connect_timeout(mut self, timeout: Duration) -> Self {
        self.tcp_connect_timeout = timeout;
        self
    }

    /// Sets [`session_recovery_timeout`](Self::session_recovery_timeout).
    pub fn with_session_recovery_timeout(mut self, timeout: Duration) -> Self {
        self.session_recovery_timeout = timeout;
        self
    }

    /// Sets [`event_stream_wait`](Self::event_stream_wait).
    pub fn with_event_stream_wait(mut self, wait: Duration) -> Self {
        self.event_stream_wait = wait;
        self
    }

    /// Sets the SSE reconnection policy: at most `attempts` tries, delays doubling from
    /// `base` up to `max` (a server's `retry` field takes precedence).
    pub fn with_sse_reconnect(mut self, attempts: usize, base: Duration, max: Duration) -> Self {
        self.sse_reconnect_attempts = attempts;
        self.sse_reconnect_base_delay = base;
        self.sse_reconnect_max_delay = max;
        self
    }

    /// Trusts `certificate` (DER) for `https`, on top of the Mozilla roots.
    pub fn with_root_certificate(mut self, certificate: CertificateDer<'static>) -> Self {
        self.extra_root_certificates.push(certificate);
        self
    }

    /// Resolves host names with `resolver` instead of the system resolver (sets
    /// [`resolver`](Self::resolver)).
    pub fn with_resolver(mut self, resolver: Arc<dyn Resolve>) -> Self {
        self.resolver = Some(resolver);
        self
    }
}
