//! The connector's pooled client as `mcp-auth`'s [`HttpFetch`]: OAuth token and metadata
//! requests share the TLS roots and the connection pools of MCP requests (the guarded pool
//! for caller-supplied specs).

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::Full;
use mcp_auth::{FetchError, HttpFetch};

use crate::body::{ReadError, read_bounded};
use crate::cause::{Cause, Target, reason};
use crate::client::Pool;

/// [`HttpFetch`] on one of the connector's pools.
#[derive(Clone)]
pub(crate) struct PoolFetch {
    pool: Pool,
    /// The pool's TCP connect timeout, to name it when it expires.
    connect_timeout: Duration,
}

impl PoolFetch {
    pub(crate) fn new(pool: Pool, connect_timeout: Duration) -> Self {
        Self {
            pool,
            connect_timeout,
        }
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
        let uri = parts.uri.clone();
        let response = self
            .pool
            .request(http::Request::from_parts(parts, Full::new(body)))
            .await
            // The cause in words: the client's own wrapping adds nothing but type names.
            .map_err(|e| {
                FetchError::Request(Box::new(Cause::of(&e, &uri, self.connect_timeout)))
            })?;
        let (parts, body) = response.into_parts();
        match read_bounded(&parts.headers, body, max_body_bytes).await {
            Ok(bytes) => Ok(http::Response::from_parts(parts, bytes)),
            Err(ReadError::TooLarge { .. }) => Err(FetchError::BodyTooLarge {
                limit: max_body_bytes,
            }),
            Err(ReadError::Body(e)) => Err(FetchError::Request(Box::new(Cause::Request {
                target: Target::of(&uri),
                reason: reason(e.as_ref()),
            }))),
        }
    }
}
