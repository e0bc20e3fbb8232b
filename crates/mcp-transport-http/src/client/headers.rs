//! Reading and naming the headers of an exchange: a header's text, the media type, and a
//! protocol header value that cannot be sent.

use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderName};

/// A protocol header value that cannot be sent (named; the value is not kept).
pub(super) struct InvalidHeader(pub(super) &'static str);

/// A header's value as text, if it is text.
pub(super) fn header_text(headers: &HeaderMap, name: &HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Whether `Content-Type` is `expected`, ignoring case and parameters.
pub(super) fn is_media_type(headers: &HeaderMap, expected: &str) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(expected))
}
