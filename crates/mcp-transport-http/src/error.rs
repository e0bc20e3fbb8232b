//! Errors of the HTTP transport.

/// A boxed error for cause chains.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error of the hyper-based HTTP client, as carried by rmcp's
/// `StreamableHttpError::Client`.
///
/// Messages name the server; none contains a header value, a token or a request body.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The request could not be sent or no response head arrived (connect, TLS, I/O).
    #[error("server `{server}`: HTTP request failed")]
    Request {
        /// The server.
        server: String,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// Reading the response body failed.
    #[error("server `{server}`: reading the HTTP response body failed")]
    Body {
        /// The server.
        server: String,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// A JSON response body is larger than the configured maximum.
    #[error("server `{server}`: the HTTP response body exceeds the limit of {limit} bytes")]
    BodyTooLarge {
        /// The server.
        server: String,
        /// The limit, in bytes.
        limit: usize,
    },
    /// One server-sent event is larger than the configured maximum.
    #[error("server `{server}`: a server-sent event exceeds the limit of {limit} bytes")]
    SseEventTooLarge {
        /// The server.
        server: String,
        /// The limit, in bytes.
        limit: usize,
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
    /// The auth hook could not produce credentials. The message includes the auth error's
    /// (which names the server and, for OAuth, the endpoint's `error`), because rmcp shows
    /// only the top of the chain.
    #[error("could not obtain credentials: {source}")]
    Auth {
        /// The server.
        server: String,
        /// The cause.
        #[source]
        source: mcp_auth::AuthError,
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
            Self::Request { server, .. }
            | Self::Body { server, .. }
            | Self::BodyTooLarge { server, .. }
            | Self::SseEventTooLarge { server, .. }
            | Self::BlockedAddress { server, .. }
            | Self::Auth { server, .. }
            | Self::BuildRequest { server, .. }
            | Self::Encode { server, .. } => Some(server),
            Self::Tls { .. } => None,
        }
    }
}
