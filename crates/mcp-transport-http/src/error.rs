//! Errors of the HTTP transport.

use std::time::Duration;

/// An error of the hyper-based HTTP client, as carried by rmcp's
/// `StreamableHttpError::Client`.
///
/// rmcp shows only the message of this error, not its causes, so each message is whole:
/// it names the server, where it applies the host, and the cause in words, once. None
/// contains a header value, a token or a request body; text the server chose has every
/// credential the session sent replaced by `[REDACTED]` (docs/upstream.md#rmcp-error-source).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// An error this session recorded as its last failure (see `HttpHandle`'s
    /// `ConnectionHandle::failure`), shared between rmcp, which got it, and the handle.
    #[error(transparent)]
    Recorded(std::sync::Arc<HttpError>),
    /// Nothing accepted the TCP connection (no server listens there, or a firewall refused).
    #[error(
        "server `{server}`: the connection to {host}:{port} was refused (is the server running?)"
    )]
    ConnectionRefused {
        /// The server.
        server: String,
        /// The host of the URL.
        host: String,
        /// The port.
        port: u16,
    },
    /// The host name of the URL could not be resolved.
    #[error("server `{server}`: the host name `{host}` could not be resolved: {reason}")]
    Dns {
        /// The server.
        server: String,
        /// The host name.
        host: String,
        /// The resolver's answer.
        reason: String,
    },
    /// The TLS handshake failed (an untrusted or wrong certificate, no TLS at all, …).
    #[error("server `{server}`: the TLS handshake with `{host}` failed: {reason}")]
    TlsHandshake {
        /// The server.
        server: String,
        /// The host of the URL.
        host: String,
        /// Why, in words (e.g. the certificate is not trusted, or not valid for the host).
        reason: String,
    },
    /// The TCP connection was not established within
    /// [`HttpOptions::tcp_connect_timeout`](crate::HttpOptions::tcp_connect_timeout).
    #[error(
        "server `{server}`: the TCP connection to {host}:{port} was not established within {}",
        seconds(*after)
    )]
    ConnectTimeout {
        /// The server.
        server: String,
        /// The host of the URL.
        host: String,
        /// The port.
        port: u16,
        /// The timeout.
        after: Duration,
    },
    /// The connection failed for another reason.
    #[error("server `{server}`: could not connect to {host}:{port}: {reason}")]
    Connect {
        /// The server.
        server: String,
        /// The host of the URL.
        host: String,
        /// The port.
        port: u16,
        /// Why, as the operating system or HTTP library put it.
        reason: String,
    },
    /// The request failed once connected: the connection closed or was reset before an
    /// answer, or the server broke the HTTP protocol.
    #[error("server `{server}`: the HTTP exchange with `{host}` failed: {reason}")]
    Request {
        /// The server.
        server: String,
        /// The host of the URL.
        host: String,
        /// Why, as the operating system or HTTP library put it.
        reason: String,
    },
    /// The server refused the request with HTTP 401 (after the auth hook's one retry, if it
    /// asked for one) or 403. `challenge` is its `WWW-Authenticate` header, credentials
    /// redacted and cut to 512 characters.
    #[error(
        "server `{server}`: the request was refused with HTTP {status}{}",
        challenge.as_ref().map(|c| format!(" (WWW-Authenticate: {c})")).unwrap_or_default()
    )]
    Refused {
        /// The server.
        server: String,
        /// 401 or 403.
        status: http::StatusCode,
        /// The `WWW-Authenticate` challenge, when the server sent one.
        challenge: Option<String>,
    },
    /// The server answered a request with an HTTP status that is neither success nor a
    /// refusal of the credentials (a 404, a 429, a 5xx, …). `detail` holds the start of its
    /// body, credentials redacted, control characters removed, cut to 512 characters.
    #[error(
        "server `{server}`: the server answered HTTP {status}{}{}",
        retry_after.as_ref().map(|r| format!(" (Retry-After: {r})")).unwrap_or_default(),
        if detail.is_empty() { String::new() } else { format!(": {detail}") }
    )]
    Status {
        /// The server.
        server: String,
        /// The status.
        status: http::StatusCode,
        /// Its `Retry-After` header, if any.
        retry_after: Option<String>,
        /// The start of the body, shown after the status.
        detail: String,
    },
    /// Reading the response body failed.
    #[error("server `{server}`: reading the HTTP response failed: {reason}")]
    Body {
        /// The server.
        server: String,
        /// Why, as the operating system or HTTP library put it.
        reason: String,
    },
    /// A JSON response body is larger than
    /// [`HttpOptions::max_response_bytes`](crate::HttpOptions::max_response_bytes).
    #[error(
        "server `{server}`: the HTTP response body{} exceeds the limit of {limit} bytes",
        size.map(|s| format!(" of {s} bytes")).unwrap_or_default()
    )]
    BodyTooLarge {
        /// The server.
        server: String,
        /// The size the server declared (`Content-Length`), when it did; otherwise the body
        /// was cut as it passed the limit.
        size: Option<u64>,
        /// The limit, in bytes.
        limit: usize,
    },
    /// One server-sent event is larger than
    /// [`HttpOptions::max_sse_event_bytes`](crate::HttpOptions::max_sse_event_bytes).
    #[error("server `{server}`: a server-sent event exceeds the limit of {limit} bytes")]
    SseEventTooLarge {
        /// The server.
        server: String,
        /// The limit, in bytes.
        limit: usize,
    },
    /// A message nests arrays and objects deeper than the JSON parser accepts
    /// ([`MAX_JSON_DEPTH`](crate::MAX_JSON_DEPTH)).
    #[error(
        "server `{server}`: a message nests {depth} levels deep, more than the {limit} levels accepted"
    )]
    TooDeep {
        /// The server.
        server: String,
        /// The message's depth.
        depth: usize,
        /// The limit.
        limit: usize,
    },
    /// A response body is not a JSON-RPC message.
    #[error("server `{server}`: the answer is not a valid JSON-RPC message: {reason}")]
    InvalidMessage {
        /// The server.
        server: String,
        /// The parser's complaint (bounded, credentials redacted).
        reason: String,
    },
    /// The SSRF guard refused the connection: the spec is caller-supplied (inline) and its
    /// URL's host is, or resolves only to, internal addresses (loopback, private, link-local,
    /// …; see [`mcp_config::is_internal_ip`]). The addresses are not named.
    #[error(
        "server `{server}`: the connection to `{host}` was refused by the SSRF guard: a caller-supplied server may not reach internal addresses (loopback, private, link-local…); the operator can turn the guard off with `ssrf_guard = false`"
    )]
    BlockedAddress {
        /// The server.
        server: String,
        /// The host of the URL (a name, or an IP literal).
        host: String,
    },
    /// The auth hook could not produce credentials. The message holds the auth error's
    /// [`reason`](mcp_auth::AuthError::reason) (for OAuth, the endpoint's `error`), because
    /// rmcp shows only this error's message; [`auth_error`](Self::auth_error) gives the typed
    /// error, which is not this error's `source()` (the message already shows it).
    #[error("server `{server}`: could not obtain credentials: {}", error.reason())]
    Auth {
        /// The server.
        server: String,
        /// The auth hook's error.
        error: mcp_auth::AuthError,
    },
    /// The request could not be built (an invalid URL or header).
    #[error("server `{server}`: could not build the HTTP request")]
    BuildRequest {
        /// The server.
        server: String,
        /// The cause.
        #[source]
        source: http::Error,
    },
    /// The message could not be encoded as JSON.
    #[error("server `{server}`: could not encode the JSON-RPC message")]
    Encode {
        /// The server.
        server: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// The TLS configuration could not be built (e.g. an unusable root certificate).
    #[error("TLS configuration is unusable")]
    Tls {
        /// The cause.
        #[source]
        source: rustls::Error,
    },
}

impl HttpError {
    /// The server this error is about, when it is about one.
    pub fn server(&self) -> Option<&str> {
        match self {
            Self::ConnectionRefused { server, .. }
            | Self::Dns { server, .. }
            | Self::TlsHandshake { server, .. }
            | Self::ConnectTimeout { server, .. }
            | Self::Connect { server, .. }
            | Self::Request { server, .. }
            | Self::Body { server, .. }
            | Self::Refused { server, .. }
            | Self::Status { server, .. }
            | Self::BodyTooLarge { server, .. }
            | Self::SseEventTooLarge { server, .. }
            | Self::TooDeep { server, .. }
            | Self::InvalidMessage { server, .. }
            | Self::BlockedAddress { server, .. }
            | Self::Auth { server, .. }
            | Self::BuildRequest { server, .. }
            | Self::Encode { server, .. } => Some(server),
            Self::Tls { .. } => None,
            Self::Recorded(error) => error.server(),
        }
    }

    /// The error itself, seen through [`HttpError::Recorded`].
    pub fn unwrapped(&self) -> &HttpError {
        match self {
            Self::Recorded(error) => error.unwrapped(),
            other => other,
        }
    }

    /// The auth hook's error, when credentials could not be obtained.
    pub fn auth_error(&self) -> Option<&mcp_auth::AuthError> {
        match self {
            Self::Auth { error, .. } => Some(error),
            Self::Recorded(error) => error.auth_error(),
            _ => None,
        }
    }
}

/// `after` in seconds, for messages.
pub(crate) fn seconds(after: Duration) -> String {
    let secs = after.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0} s")
    } else {
        format!("{secs:.1} s")
    }
}
