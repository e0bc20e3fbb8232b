//! The connector's pooled client as `mcp-auth`'s [`HttpFetch`]: OAuth token and metadata
//! requests share the TLS roots and the connection pool of MCP requests.

use std::fmt;

use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use mcp_auth::{FetchError, HttpFetch};

use crate::client::Pool;

/// [`HttpFetch`] on the connector's pool.
#[derive(Clone)]
pub(crate) struct PoolFetch {
    pool: Pool,
}

impl PoolFetch {
    pub(crate) fn new(pool: Pool) -> Self {
        Self { pool }
    }
}

impl fmt::Debug for PoolFetch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolFetch").finish_non_exhaustive()
    }
}

#[async_trait]
impl HttpFetch for PoolFetch {
    async fn fetch(
        &self,
        request: http::Request<Bytes>,
        max_body_bytes: usize,
    ) -> Result<http::Response<Bytes>, FetchError> {
        let (parts, body) = request.into_parts();
        let response = self
            .pool
            .request(http::Request::from_parts(parts, Full::new(body)))
            .await
            .map_err(|e| FetchError::Request(Box::new(e)))?;
        let (parts, body) = response.into_parts();
        let too_large = FetchError::BodyTooLarge {
            limit: max_body_bytes,
        };
        let declared = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|len| len > max_body_bytes as u64) {
            return Err(too_large);
        }
        match Limited::new(body, max_body_bytes).collect().await {
            Ok(collected) => Ok(http::Response::from_parts(parts, collected.to_bytes())),
            Err(e) if e.is::<LengthLimitError>() => Err(too_large),
            Err(e) => Err(FetchError::Request(e)),
        }
    }
}
