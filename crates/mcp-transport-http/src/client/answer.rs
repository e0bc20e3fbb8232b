//! How the server's answers that are not what was asked for become rmcp's errors: a final
//! 401 or a 403 with a challenge, an unexpected status or content type, a refused sessionless
//! `server/discover`. Every text taken from the answer is scrubbed of the session's
//! credentials first.

use std::borrow::Cow;

use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderName, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use mcp_auth::Challenge;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorData, JsonRpcMessage, ServerJsonRpcMessage,
};
use rmcp::transport::common::http_header::JSON_MIME_TYPE;
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};

use super::headers::{InvalidHeader, header_text, is_media_type};
use super::{Error, HttpClient};
use crate::error::HttpError;

impl HttpClient {
    /// A final 401, its challenge scrubbed (a server may echo the token it refused).
    pub(super) fn auth_required(&self, challenge: Option<String>) -> Error {
        let challenge = self.scrubbed(&challenge.unwrap_or_default());
        self.record(HttpError::Refused {
            server: self.server_name(),
            status: StatusCode::UNAUTHORIZED,
            challenge: (!challenge.is_empty()).then(|| shown(&challenge)),
        });
        StreamableHttpError::AuthRequired(AuthRequiredError::new(challenge))
    }

    /// A 403 with a challenge, scrubbed.
    pub(super) fn insufficient_scope(&self, challenge: &str) -> Error {
        self.record(HttpError::Refused {
            server: self.server_name(),
            status: StatusCode::FORBIDDEN,
            challenge: Some(shown(&self.scrubbed(challenge))),
        });
        let scope = scope_of(challenge).map(|scope| self.scrubbed(&scope));
        StreamableHttpError::InsufficientScope(InsufficientScopeError::new(
            self.scrubbed(challenge),
            scope,
        ))
    }

    /// An unexpected `Content-Type`, scrubbed.
    pub(super) fn unexpected_content_type(&self, headers: &HeaderMap) -> Error {
        StreamableHttpError::UnexpectedContentType(
            header_text(headers, &CONTENT_TYPE).map(|t| self.scrubbed(&t)),
        )
    }

    pub(super) fn invalid_header(&self, InvalidHeader(name): InvalidHeader) -> Error {
        self.unexpected(format!("the {name} value cannot be sent as an HTTP header"))
    }

    /// The first `max` bytes of a body, for an error message; the rest is not read.
    pub(super) async fn read_prefix(response: Response<Incoming>, max: usize) -> Vec<u8> {
        let mut body = response.into_body();
        let mut prefix = Vec::new();
        while prefix.len() < max {
            let Some(Ok(frame)) = body.frame().await else {
                break;
            };
            if let Ok(data) = frame.into_data() {
                let take = data.len().min(max - prefix.len());
                prefix.extend_from_slice(&data[..take]);
            }
        }
        prefix
    }

    pub(super) fn unexpected(&self, what: String) -> Error {
        StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
            "server `{}`: {what}",
            self.inner.server
        )))
    }

    /// A non-success answer to a POST.
    pub(super) async fn failed_post(
        &self,
        message: &ClientJsonRpcMessage,
        session_was_attached: bool,
        response: Response<Incoming>,
        limits: &StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let status = response.status();
        let session_id = header_text(
            response.headers(),
            &HeaderName::from_static("mcp-session-id"),
        );
        if is_media_type(response.headers(), JSON_MIME_TYPE) && status != StatusCode::FORBIDDEN {
            let body = self
                .read_bounded(response, limits.max_json_response_size)
                .await?;
            let text = self.scrubbed(&String::from_utf8_lossy(&body));
            if let Ok(error @ JsonRpcMessage::Error(_)) = self.message(&body) {
                return Ok(
                    discover_rejection(message, session_was_attached, status, &text)
                        .unwrap_or(StreamableHttpPostResponse::Json(error, session_id)),
                );
            }
            return self.status_error(message, session_was_attached, status, None, &text);
        }
        let retry_after = header_text(response.headers(), &RETRY_AFTER);
        let prefix = Self::read_prefix(response, limits.max_error_response_size).await;
        self.status_error(
            message,
            session_was_attached,
            status,
            retry_after,
            &self.scrubbed(&String::from_utf8_lossy(&prefix)),
        )
    }

    pub(super) fn status_error(
        &self,
        message: &ClientJsonRpcMessage,
        session_was_attached: bool,
        status: StatusCode,
        retry_after: Option<String>,
        body: &str,
    ) -> Result<StreamableHttpPostResponse, Error> {
        if let Some(response) = discover_rejection(message, session_was_attached, status, body) {
            return Ok(response);
        }
        self.record(HttpError::Status {
            server: self.server_name(),
            status,
            retry_after: retry_after.as_deref().map(shown),
            detail: shown(body.trim()),
        });
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            return Err(StreamableHttpError::HttpStatus(HttpStatusError::new(
                status.as_u16(),
                retry_after,
            )));
        }
        Err(self.unexpected(format!("HTTP {status}: {}", body.trim())))
    }
}

/// At most this many characters of server-chosen text go into an error message.
const MAX_SHOWN_CHARS: usize = 512;

/// Server-chosen text (already scrubbed) fit for an error message: on one line, without
/// control characters, cut after [`MAX_SHOWN_CHARS`] characters.
fn shown(text: &str) -> String {
    let mut out: String = text
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_SHOWN_CHARS)
        .collect();
    if text
        .chars()
        .filter(|c| !c.is_control())
        .nth(MAX_SHOWN_CHARS)
        .is_some()
    {
        out.push('…');
    }
    out
}

/// The `scope` parameter of a `WWW-Authenticate` challenge, when not empty.
fn scope_of(challenge: &str) -> Option<String> {
    Challenge::parse(challenge)
        .scope
        .filter(|scope| !scope.is_empty())
}

/// A sessionless `server/discover` refused with a 4xx: turned into a JSON-RPC error answering
/// the request, so rmcp's lifecycle can fall back to `initialize`, as rmcp's own clients do
/// (docs/upstream.md#rmcp-discover-rejection).
fn discover_rejection(
    message: &ClientJsonRpcMessage,
    session_was_attached: bool,
    status: StatusCode,
    body: &str,
) -> Option<StreamableHttpPostResponse> {
    if session_was_attached
        || !status.is_client_error()
        || matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
    {
        return None;
    }
    let JsonRpcMessage::Request(request) = message else {
        return None;
    };
    if !matches!(request.request, ClientRequest::DiscoverRequest(_)) {
        return None;
    }
    let error = match serde_json::from_str::<ServerJsonRpcMessage>(body) {
        Ok(JsonRpcMessage::Error(error)) => error.error,
        _ => ErrorData::invalid_request(format!("server/discover answered HTTP {status}"), None),
    };
    Some(StreamableHttpPostResponse::Json(
        ServerJsonRpcMessage::error(error, Some(request.id.clone())),
        None,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_is_read_from_challenges() {
        for (challenge, expected) in [
            (
                r#"Bearer scope="files:read files:write", error="insufficient_scope""#,
                Some("files:read files:write"),
            ),
            ("Bearer scope=read:data, error=x", Some("read:data")),
            ("Bearer error=insufficient_scope", None),
            (r#"Bearer scope="""#, None),
        ] {
            assert_eq!(scope_of(challenge).as_deref(), expected, "{challenge}");
        }
    }
}
