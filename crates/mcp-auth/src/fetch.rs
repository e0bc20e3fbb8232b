//! The HTTP seam of the OAuth provider: the transport supplies the client.

use std::fmt;

use async_trait::async_trait;
use bytes::Bytes;

use crate::FetchError;

/// A small HTTP client for OAuth token requests and metadata documents, supplied by the
/// transport (the HTTP transport implements it on its pooled hyper client, so token requests
/// use the same TLS roots and connection pool as MCP requests).
///
/// This crate owns the trait and no implementation: it sends requests through it and never
/// links an HTTP stack itself.
///
/// Implementations send `request` as it is (no redirects followed, no headers added beyond
/// what the protocol needs), and read the whole response body up to `max_body_bytes`; a larger
/// body is [`FetchError::BodyTooLarge`], never a larger buffer. Timeouts are the caller's: the
/// provider bounds every exchange itself.
#[async_trait]
pub trait HttpFetch: Send + Sync + fmt::Debug {
    /// Sends `request` and returns the response with its whole body.
    async fn fetch(
        &self,
        request: http::Request<Bytes>,
        max_body_bytes: usize,
    ) -> Result<http::Response<Bytes>, FetchError>;
}
