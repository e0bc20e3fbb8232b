//! The HTTP side: the pooled hyper-util client with rustls, the endpoint's URL, causes of
//! failed exchanges told in words, bounded body reading and `Retry-After`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::HeaderMap;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::error::{LimitKind, OpenAiError};

pub(crate) type HttpClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A pooled client: rustls with the ring provider and the Mozilla roots, HTTP/2 by ALPN.
pub(crate) fn client(connect_timeout: Duration) -> Result<HttpClient, OpenAiError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|source| OpenAiError::Tls { source })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(connect_timeout));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_all_versions()
        .wrap_connector(tcp);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .build(https))
}

/// A URL as shown: scheme, host, port and path, without credentials, query or fragment.
pub(crate) fn shown_url(url: &str) -> String {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return "(an invalid URL)".to_owned();
    };
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return "(an invalid URL)".to_owned();
    };
    let host = authority
        .as_str()
        .rsplit_once('@')
        .map_or(authority.as_str(), |(_, host)| host);
    format!("{scheme}://{host}{}", uri.path().trim_end_matches('/'))
}

/// The endpoint of a base URL: `{base_url}/chat/completions`, checked.
pub(crate) fn endpoint(base_url: &str) -> Result<(http::Uri, String), OpenAiError> {
    let invalid = |reason: &str| OpenAiError::Config {
        field: "base_url".into(),
        reason: reason.to_owned(),
    };
    let base = base_url.trim();
    if base.is_empty() {
        return Err(invalid("it is empty"));
    }
    let uri: http::Uri = base
        .parse()
        .map_err(|_| invalid("it is not a URL (expected e.g. `https://api.openai.com/v1`)"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(invalid("the scheme must be http or https")),
    }
    let Some(authority) = uri.authority() else {
        return Err(invalid("it has no host"));
    };
    if authority.as_str().contains('@') {
        return Err(invalid(
            "it must not hold credentials; set the API key or a header instead",
        ));
    }
    if uri.query().is_some() {
        return Err(invalid("it must not have a query"));
    }
    let host = authority.as_str().to_owned();
    // A base URL given with the endpoint's path already on it is taken as the endpoint.
    let base = base.trim_end_matches('/');
    let base = base.strip_suffix("/chat/completions").unwrap_or(base);
    let url = format!("{base}/chat/completions");
    let endpoint = url
        .parse()
        .map_err(|_| invalid("it is not a URL (expected e.g. `https://api.openai.com/v1`)"))?;
    Ok((endpoint, host))
}

/// A cause told in words, without the wrappers' text.
#[derive(Debug)]
pub(crate) struct Cause(String);

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Cause {}

/// A failed exchange as an error, and whether a new attempt may help (a connection reset or
/// closed before the answer).
pub(crate) fn failure(
    error: &(dyn std::error::Error + 'static),
    connect: bool,
    host: &str,
) -> (OpenAiError, bool) {
    let mut deepest = error.to_string();
    let mut reset = false;
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            reset |= matches!(
                io.kind(),
                ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
            );
        }
        if let Some(hyper) = e.downcast_ref::<hyper::Error>() {
            reset |= hyper.is_incomplete_message() || hyper.is_canceled();
        }
        deepest = e.to_string();
        current = e.source();
    }
    let source = Box::new(Cause(deepest));
    let host = host.to_owned();
    let error = if connect {
        OpenAiError::Connect { host, source }
    } else {
        OpenAiError::Connection { host, source }
    };
    (error, reset)
}

/// A body of at most `limit` bytes.
pub(crate) async fn read_bounded(
    body: &mut Incoming,
    limit: usize,
    host: &str,
) -> Result<Vec<u8>, (OpenAiError, bool)> {
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| failure(&e, false, host))?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > limit {
                return Err((
                    OpenAiError::TooLarge {
                        kind: LimitKind::Body,
                        limit,
                    },
                    false,
                ));
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out)
}

/// At most `limit` bytes of a body; the rest is left unread.
pub(crate) async fn read_prefix(body: &mut Incoming, limit: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(data) = frame.into_data() {
            let room = limit - out.len();
            out.extend_from_slice(&data[..data.len().min(room)]);
            if out.len() == limit {
                break;
            }
        }
    }
    out
}

/// The wait the provider asks for: `retry-after-ms` (OpenAI's), else `Retry-After` in seconds
/// or as an HTTP date (a date in the past is no wait).
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| headers.get(name)?.to_str().ok().map(str::trim);
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64((ms / 1000.0).min(1e9)));
    }
    let value = text("retry-after")?;
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_dates_and_milliseconds() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, value.parse().unwrap());
            }
            map
        };
        assert_eq!(
            retry_after(&headers(&[("retry-after", " 7 ")]), now),
            Some(Duration::from_secs(7))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            retry_after(&headers(&[("retry-after", &later)]), now),
            Some(Duration::from_secs(30))
        );
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(
            retry_after(&headers(&[("retry-after", &earlier)]), now),
            Some(Duration::ZERO)
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after-ms", "250"), ("retry-after", "9")]),
                now
            ),
            Some(Duration::from_millis(250))
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn endpoints_are_checked_and_shown_without_credentials() {
        let (uri, host) = endpoint("http://localhost:11434/v1/").unwrap();
        assert_eq!(
            uri.to_string(),
            "http://localhost:11434/v1/chat/completions"
        );
        assert_eq!(host, "localhost:11434");
        for (bad, reason) in [
            ("", "it is empty"),
            ("ftp://x/v1", "the scheme must be http or https"),
            ("localhost:8000/v1", "it is not a URL"),
            ("https://u:p@x/v1", "it must not hold credentials"),
        ] {
            let err = endpoint(bad).unwrap_err().to_string();
            assert!(err.contains(reason), "{bad}: {err}");
        }
        assert_eq!(
            shown_url("https://u:secret@example.com/v1/?key=secret"),
            "https://example.com/v1"
        );
    }
}
