//! The facade's one error: setting up the default connectors.

/// Why the default connectors could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// The HTTP transport could not be set up (e.g. TLS roots).
    #[cfg(feature = "http")]
    #[error("the HTTP transport could not be set up")]
    Http(#[from] mcp_transport_http::HttpError),
}
