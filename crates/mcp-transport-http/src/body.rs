//! Reading a whole response body, bounded: the JSON answers of MCP requests and the OAuth
//! answers read through [`PoolFetch`](crate::fetch::PoolFetch) share one helper.

use bytes::Bytes;
use http::HeaderMap;
use http::header::CONTENT_LENGTH;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use mcp_connector::BoxError;

/// Why a bounded read failed.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The body is larger than the limit: by the size it declared (`Content-Length`), or
    /// found while reading (`None`).
    TooLarge { declared: Option<u64> },
    /// Reading failed.
    Body(BoxError),
}

/// The `Content-Length` of a response, if it declares one.
pub(crate) fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// The whole `body` of at most `max` bytes; a larger one (by its `Content-Length` in
/// `headers`, or as it arrives) is [`ReadError::TooLarge`] and is not buffered past `max`.
pub(crate) async fn read_bounded<B>(
    headers: &HeaderMap,
    body: B,
    max: usize,
) -> Result<Bytes, ReadError>
where
    B: hyper::body::Body,
    B::Error: Into<BoxError>,
{
    if let Some(len) = content_length(headers).filter(|len| *len > max as u64) {
        return Err(ReadError::TooLarge {
            declared: Some(len),
        });
    }
    match Limited::new(body, max).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(ReadError::TooLarge { declared: None }),
        Err(e) => Err(ReadError::Body(e)),
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::Full;

    use super::*;

    #[tokio::test]
    async fn bodies_are_read_up_to_the_limit() {
        let body = || Full::new(Bytes::from_static(b"0123456789"));
        let none = HeaderMap::new();
        assert_eq!(read_bounded(&none, body(), 10).await.unwrap(), "0123456789");
        assert!(matches!(
            read_bounded(&none, body(), 9).await,
            Err(ReadError::TooLarge { declared: None })
        ));
        // A declared length over the limit is refused before reading.
        let mut declared = HeaderMap::new();
        declared.insert(CONTENT_LENGTH, "1000000".parse().unwrap());
        assert!(matches!(
            read_bounded(&declared, body(), 100).await,
            Err(ReadError::TooLarge {
                declared: Some(1_000_000)
            })
        ));
    }
}
