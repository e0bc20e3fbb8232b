//! A session's resources: listed page by page within the session's [`ListLimits`], read
//! within a size bound, subscribed to. Everything the server chose is bounded and cleaned the
//! way its tools are.

use std::future::Future;

use mcp_catalog::sanitize::{Lines, clean};
use rmcp::model::{
    PaginatedRequestParams, ReadResourceRequestParams, Resource, ResourceContents,
    ResourceTemplate, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::ServiceError;
use serde::Serialize;

use crate::error::ProtocolError;
use crate::list::ListError;
use crate::scrub::{scrub_error, shown_text};
use crate::session::MAX_ERROR_MESSAGE_BYTES;
use crate::{FeatureError, ListLimit, ListLimits, Session};

/// The most bytes one `resources/read` may return (texts and base64 blobs together);
/// a larger resource is refused whole with [`FeatureError::TooLarge`]. The transports bound
/// a message before it is parsed (stdio: 16 MiB, HTTP: `max_response_bytes`); this bound is
/// the client's own, below them.
pub const MAX_RESOURCE_BYTES: usize = 8 * 1024 * 1024;
/// The longest URI (or URI template) kept, in bytes. A listed resource whose URI is longer or
/// holds control characters is left out: a cut or cleaned URI would name another resource.
pub const MAX_URI_BYTES: usize = 2048;
/// The longest name, title or MIME type of a resource or prompt kept, in bytes.
pub const MAX_FEATURE_NAME_BYTES: usize = 256;
/// The longest description of a resource or prompt kept, in bytes.
pub const MAX_FEATURE_DESCRIPTION_BYTES: usize = 4 * 1024;

/// The bytes of one content: its text, or its blob as base64 (any other kind as JSON).
pub(crate) fn content_len(content: &ResourceContents) -> usize {
    match content {
        ResourceContents::TextResourceContents { text, .. } => text.len(),
        ResourceContents::BlobResourceContents { blob, .. } => blob.len(),
        other => agent_core::json_len(other).unwrap_or_default(),
    }
}

/// True when `text` is standard base64 (RFC 4648 §4): whole groups of four characters of its
/// alphabet, `=` padding (at most two) only at the end. Checked without decoding.
pub(crate) fn is_base64(text: &str) -> bool {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return false;
    }
    let data = bytes
        .strip_suffix(b"==")
        .or_else(|| bytes.strip_suffix(b"="))
        .unwrap_or(bytes);
    data.iter()
        .all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// True when `uri` can be sent or kept as it is: not empty, within [`MAX_URI_BYTES`], without
/// control characters or whitespace, its scheme lowercase, no `.`/`..` path segment
/// ([`has_dot_segment`]) and no letter, digit, `-`, `.` or `_` percent-encoded
/// ([`encodes_unreserved`]). Each of these would let one resource go by another spelling
/// (`FILE:///secret/key`, ` file:///secret/key`, `file:///%73ecret/key`) that a server reads as
/// the same while a `[policy]` rule or a skill's directory does not match it.
pub(crate) fn is_clean_uri(uri: &str) -> bool {
    !uri.is_empty()
        && matches!(
            clean(uri, MAX_URI_BYTES, Lines::Single),
            std::borrow::Cow::Borrowed(_)
        )
        && !uri.contains(char::is_whitespace)
        && !uri
            .split_once(':')
            .is_some_and(|(scheme, _)| scheme.bytes().any(|b| b.is_ascii_uppercase()))
        && !has_dot_segment(uri)
        && !encodes_unreserved(uri)
}

/// `uri` as two spellings of one resource compare: percent-escapes decoded (`%2F` too), so
/// `skill://pdf%2Freferences` lies within `skill://pdf/`. For telling whose a URI is, never
/// for sending.
pub(crate) fn comparable_uri(uri: &str) -> std::borrow::Cow<'_, str> {
    percent_encoding::percent_decode_str(uri).decode_utf8_lossy()
}

/// True when `uri` lies within `directory`, both compared as [`comparable_uri`]s.
pub(crate) fn lies_within(uri: &str, directory: &str) -> bool {
    comparable_uri(uri).starts_with(&*comparable_uri(directory))
}

/// True when `uri`'s path holds a `.` or `..` segment once its percent-escapes are decoded
/// (`%2e%2e`, `..%2f..%2fetc`), also after a backslash: a server that resolves it could serve
/// what lies outside the prefix a `[policy]` resource rule allows (`file:///public/../etc/passwd`
/// matches `file:///public/*`), so such a URI is never sent, listed or allowed.
pub(crate) fn has_dot_segment(uri: &str) -> bool {
    let rest = uri.split_once("://").map_or(uri, |(_, rest)| rest);
    let path = rest.split(['?', '#']).next().unwrap_or_default();
    let decoded: Vec<u8> = percent_encoding::percent_decode_str(path).collect();
    decoded
        .split(|&b| b == b'/' || b == b'\\')
        .any(|segment| segment == b"." || segment == b"..")
}

/// True when `uri` percent-encodes a character RFC 3986 calls unreserved: a letter, a digit,
/// `-`, `.` or `_`. Such a URI is the same resource as the one with it decoded (§6.2.2.2), so
/// it would name a resource while slipping past a `[policy]` rule written for its plain form
/// (`file:///%73ecret/key` for `file:///secret/*`, `skill://deploy%2Dprod/SKILL.md` for the
/// skill `deploy-prod`); no encoder writes these. `~` is the exception: Java's and .NET's
/// encoders write it as `%7E`, so such a URI stays readable (a rule naming `~` does not
/// match its encoded form).
pub(crate) fn encodes_unreserved(uri: &str) -> bool {
    uri.as_bytes().windows(3).any(|w| {
        let (Some(high), Some(low)) = (hex(w[1]), hex(w[2])) else {
            return false;
        };
        let c = high << 4 | low;
        w[0] == b'%' && (c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'))
    })
}

/// The value of an ASCII hex digit.
fn hex(digit: u8) -> Option<u8> {
    (digit as char).to_digit(16).map(|d| d as u8)
}

impl Session {
    fn feature_error(&self, method: &'static str, error: ServiceError) -> FeatureError {
        let server = self.name().to_owned();
        match error {
            ServiceError::McpError(e) => FeatureError::Rpc {
                server,
                method,
                code: e.code.0,
                message: shown_text(
                    self.redactor(),
                    &e.message,
                    MAX_ERROR_MESSAGE_BYTES,
                    Lines::Multi,
                ),
            },
            ServiceError::Timeout { timeout } => FeatureError::Timeout {
                server,
                method,
                after: timeout,
            },
            ServiceError::TransportClosed | ServiceError::TransportSend(_)
                if let Some(failure) = self.transport_failure() =>
            {
                FeatureError::Transport {
                    server,
                    method,
                    source: scrub_error(self.redactor(), failure),
                }
            }
            other => FeatureError::Failed {
                server,
                method,
                source: ProtocolError::of_service(&other, method),
            },
        }
    }

    /// Runs one request within the server's call timeout.
    pub(crate) async fn feature_request<T>(
        &self,
        method: &'static str,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, FeatureError> {
        let timeout = self.spec().call_timeout;
        match tokio::time::timeout(timeout, request).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(self.feature_error(method, e)),
            Err(_) => Err(FeatureError::Timeout {
                server: self.name().to_owned(),
                method,
                after: timeout,
            }),
        }
    }

    /// Every page of a listing, within the session's [`ListLimits`] and the call timeout.
    pub(crate) async fn feature_listing<T, F, Fut>(
        &self,
        method: &'static str,
        page: F,
    ) -> Result<Vec<T>, FeatureError>
    where
        T: Serialize,
        F: FnMut(Option<PaginatedRequestParams>) -> Fut,
        Fut: Future<Output = Result<(Vec<T>, Option<String>), ServiceError>>,
    {
        let timeout = self.spec().call_timeout;
        match tokio::time::timeout(timeout, list_pages(self.list_limits(), page)).await {
            Ok(Ok(items)) => Ok(items),
            Ok(Err(ListError::Service(e))) => Err(self.feature_error(method, e)),
            Ok(Err(ListError::Limit(limit))) => Err(FeatureError::ListLimit {
                server: self.name().to_owned(),
                method,
                limit,
            }),
            Err(_) => Err(FeatureError::Timeout {
                server: self.name().to_owned(),
                method,
                after: timeout,
            }),
        }
    }

    fn shown(&self, text: &str, max: usize, lines: Lines) -> String {
        shown_text(self.redactor(), text, max, lines)
    }

    /// A name, title or MIME type as it may be shown.
    fn short(&self, text: &str) -> String {
        self.shown(text, MAX_FEATURE_NAME_BYTES, Lines::Single)
    }

    /// Lists the server's resources (`resources/list`, every page) within the session's
    /// [`ListLimits`] and the call timeout. Each resource is cleaned: names, titles, MIME types
    /// and descriptions without control characters, cut to [`MAX_FEATURE_NAME_BYTES`] and
    /// [`MAX_FEATURE_DESCRIPTION_BYTES`], the run's secrets replaced, icons and `_meta`
    /// dropped; one whose URI is not clean ([`MAX_URI_BYTES`]) or holds one of the run's
    /// secrets is left out.
    ///
    /// ```no_run
    /// # async fn show(session: &mcp_client::Session) -> Result<(), mcp_client::FeatureError> {
    /// for resource in session.list_resources().await? {
    ///     println!("{} {}", resource.uri, resource.name);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_resources(&self) -> Result<Vec<Resource>, FeatureError> {
        let peer = self.peer().clone();
        let listed = self
            .feature_listing("resources/list", move |params| {
                let peer = peer.clone();
                async move {
                    let page = peer.list_resources(params).await?;
                    Ok((page.resources, page.next_cursor))
                }
            })
            .await?;
        Ok(listed
            .into_iter()
            .filter_map(|r| self.cleaned_resource(r))
            .collect())
    }

    /// True when `identifier` (a URI or a name the server chose, which must be sent back as
    /// it is, so cannot be scrubbed) holds one of the run's known secrets, as it is or
    /// percent-decoded: what it names is left out, as a tool of such a name is, so the secret
    /// reaches no search, prompt, history or listing served on.
    pub(crate) fn holds_secret(&self, identifier: &str) -> bool {
        let scrubbed =
            |text: &str| matches!(self.redactor().scrub(text), std::borrow::Cow::Owned(_));
        // Also percent-decoded (when it holds escapes): a base64 secret's `/`, `+`, `=` may come
        // encoded in a URI.
        let decoded = comparable_uri(identifier);
        let holds = scrubbed(identifier)
            || (matches!(decoded, std::borrow::Cow::Owned(_)) && scrubbed(&decoded));
        if holds {
            tracing::warn!(
                server = %self.name(),
                "left out a resource, prompt or skill whose URI or name holds a secret"
            );
        }
        holds
    }

    /// A listed resource as it is kept (see [`list_resources`](Self::list_resources)); `None`
    /// when its URI is not clean or holds a known secret.
    pub(crate) fn cleaned_resource(&self, mut r: Resource) -> Option<Resource> {
        if !is_clean_uri(&r.uri) || self.holds_secret(&r.uri) {
            return None;
        }
        r.name = self.short(&r.name);
        r.title = r.title.as_deref().map(|s| self.short(s));
        r.mime_type = r.mime_type.as_deref().map(|s| self.short(s));
        r.description = r
            .description
            .as_deref()
            .map(|d| self.shown(d, MAX_FEATURE_DESCRIPTION_BYTES, Lines::Multi));
        r.icons = None;
        r.meta = None;
        Some(r)
    }

    /// Lists the server's resource templates (`resources/templates/list`, every page), bounded
    /// and cleaned like [`list_resources`](Self::list_resources).
    ///
    /// ```no_run
    /// # async fn show(session: &mcp_client::Session) -> Result<(), mcp_client::FeatureError> {
    /// for template in session.list_resource_templates().await? {
    ///     println!("{}", template.uri_template);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, FeatureError> {
        let peer = self.peer().clone();
        let listed = self
            .feature_listing("resources/templates/list", move |params| {
                let peer = peer.clone();
                async move {
                    let page = peer.list_resource_templates(params).await?;
                    Ok((page.resource_templates, page.next_cursor))
                }
            })
            .await?;
        Ok(listed
            .into_iter()
            .filter(|t| is_clean_uri(&t.uri_template) && !self.holds_secret(&t.uri_template))
            .map(|mut t| {
                t.name = self.short(&t.name);
                t.title = t.title.as_deref().map(|s| self.short(s));
                t.mime_type = t.mime_type.as_deref().map(|s| self.short(s));
                t.description = t
                    .description
                    .as_deref()
                    .map(|d| self.shown(d, MAX_FEATURE_DESCRIPTION_BYTES, Lines::Multi));
                t.icons = None;
                t.meta = None;
                t
            })
            .collect())
    }

    /// Reads a resource (`resources/read`) within [`MAX_RESOURCE_BYTES`]; see
    /// [`read_resource_within`](Self::read_resource_within).
    ///
    /// ```no_run
    /// # async fn show(session: &mcp_client::Session) -> Result<(), mcp_client::FeatureError> {
    /// use rmcp::model::ResourceContents;
    /// for content in session.read_resource("file:///srv/readme.md").await? {
    ///     if let ResourceContents::TextResourceContents { text, .. } = content {
    ///         println!("{text}");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceContents>, FeatureError> {
        self.read_resource_within(uri, MAX_RESOURCE_BYTES).await
    }

    /// Reads a resource (`resources/read`) within the call timeout. Contents whose texts and
    /// blobs together exceed `max_bytes` are refused whole ([`FeatureError::TooLarge`], naming
    /// the server, the URI and the limit); a blob that is not base64 is refused
    /// ([`FeatureError::NotBase64`]). Texts have the run's secrets replaced; URIs and MIME
    /// types are cleaned and bounded; `_meta` is dropped. A `uri` that is empty, longer than
    /// [`MAX_URI_BYTES`] or holds control characters is not sent ([`FeatureError::InvalidUri`]).
    ///
    /// ```no_run
    /// # async fn show(session: &mcp_client::Session) -> Result<(), mcp_client::FeatureError> {
    /// let contents = session.read_resource_within("file:///srv/small.txt", 64 * 1024).await?;
    /// # Ok(()) }
    /// ```
    pub async fn read_resource_within(
        &self,
        uri: &str,
        max_bytes: usize,
    ) -> Result<Vec<ResourceContents>, FeatureError> {
        self.check_uri(uri)?;
        let mut params = ReadResourceRequestParams::new(uri);
        crate::trace_context::inject(&mut params);
        let result = self
            .feature_request("resources/read", self.read_resource_round(params))
            .await?;
        let server = || self.name().to_owned();
        let size = result
            .contents
            .iter()
            .fold(0usize, |n, c| n.saturating_add(content_len(c)));
        if size > max_bytes {
            return Err(FeatureError::TooLarge {
                server: server(),
                target: uri.to_owned(),
                limit: max_bytes,
            });
        }
        let clean_uri = |u: &str| self.shown(u, MAX_URI_BYTES, Lines::Single);
        let clean_mime =
            |m: Option<String>| m.map(|m| self.shown(&m, MAX_FEATURE_NAME_BYTES, Lines::Single));
        result
            .contents
            .into_iter()
            .map(|content| match content {
                ResourceContents::TextResourceContents {
                    uri,
                    mime_type,
                    text,
                    ..
                } => Ok(ResourceContents::TextResourceContents {
                    uri: clean_uri(&uri),
                    mime_type: clean_mime(mime_type),
                    text: self.redactor().scrub(&text).into_owned(),
                    meta: None,
                }),
                ResourceContents::BlobResourceContents {
                    uri: blob_uri,
                    mime_type,
                    blob,
                    ..
                } => {
                    if !is_base64(&blob) {
                        return Err(FeatureError::NotBase64 {
                            server: server(),
                            uri: clean_uri(&blob_uri),
                        });
                    }
                    Ok(ResourceContents::BlobResourceContents {
                        uri: clean_uri(&blob_uri),
                        mime_type: clean_mime(mime_type),
                        blob,
                        meta: None,
                    })
                }
                _ => Err(FeatureError::Failed {
                    server: server(),
                    method: "resources/read",
                    source: ProtocolError::Unexpected,
                }),
            })
            .collect()
    }

    fn check_uri(&self, uri: &str) -> Result<(), FeatureError> {
        if is_clean_uri(uri) {
            Ok(())
        } else {
            Err(FeatureError::InvalidUri {
                server: self.name().to_owned(),
                limit: MAX_URI_BYTES,
            })
        }
    }

    /// Asks the server to announce changes of the resource at `uri`
    /// (`resources/subscribe`). This is the protocol request only; a run's
    /// [`McpRunner::subscribe_resource`](crate::McpRunner::subscribe_resource) also turns the
    /// server's `notifications/resources/updated` into `resource_updated` events.
    ///
    /// ```no_run
    /// # async fn sub(session: &mcp_client::Session) -> Result<(), mcp_client::FeatureError> {
    /// session.subscribe_resource("file:///srv/log.txt").await?;
    /// # Ok(()) }
    /// ```
    pub async fn subscribe_resource(&self, uri: &str) -> Result<(), FeatureError> {
        self.check_uri(uri)?;
        // `resources/subscribe` is the request of the revisions this client speaks with most
        // servers; rmcp marks it legacy in favour of 2026-07-28's `subscriptions/listen`.
        #[allow(deprecated)]
        let request = self.peer().subscribe(SubscribeRequestParams::new(uri));
        self.feature_request("resources/subscribe", request).await
    }

    /// Ends a subscription (`resources/unsubscribe`).
    ///
    /// ```no_run
    /// # async fn unsub(session: &mcp_client::Session) -> Result<(), mcp_client::FeatureError> {
    /// session.unsubscribe_resource("file:///srv/log.txt").await?;
    /// # Ok(()) }
    /// ```
    pub async fn unsubscribe_resource(&self, uri: &str) -> Result<(), FeatureError> {
        self.check_uri(uri)?;
        #[allow(deprecated)]
        let request = self.peer().unsubscribe(UnsubscribeRequestParams::new(uri));
        self.feature_request("resources/unsubscribe", request).await
    }
}

/// Every page of a listing within `limits`: at most `max_pages` pages, `max_tools` entries
/// and `max_bytes` of entries as JSON; a repeated cursor stops it at once.
async fn list_pages<T, F, Fut>(limits: ListLimits, mut page: F) -> Result<Vec<T>, ListError>
where
    T: Serialize,
    F: FnMut(Option<PaginatedRequestParams>) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<String>), ServiceError>>,
{
    let mut items: Vec<T> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut bytes = 0usize;
    let mut cursor: Option<String> = None;
    let mut pages = 0usize;
    loop {
        pages += 1;
        let params = cursor
            .take()
            .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let (entries, next) = page(params).await.map_err(ListError::Service)?;
        if items.len().saturating_add(entries.len()) > limits.max_tools {
            return Err(ListError::Limit(ListLimit::Entries {
                limit: limits.max_tools,
            }));
        }
        let page_bytes = next.as_ref().map_or(0, String::len)
            + agent_core::json_len(&entries).unwrap_or_default();
        bytes = bytes.saturating_add(page_bytes);
        if bytes > limits.max_bytes {
            return Err(ListError::Limit(ListLimit::Bytes {
                limit: limits.max_bytes,
            }));
        }
        items.extend(entries);
        let Some(next) = next.filter(|c| !c.is_empty()) else {
            return Ok(items);
        };
        if !seen.insert(next.clone()) {
            return Err(ListError::Limit(ListLimit::RepeatedCursor { page: pages }));
        }
        if pages >= limits.max_pages {
            return Err(ListError::Limit(ListLimit::Pages {
                limit: limits.max_pages,
            }));
        }
        cursor = Some(next);
    }
}

#[cfg(test)]
mod tests {
    use super::is_base64;

    #[test]
    fn base64_is_whole_groups_of_its_alphabet_with_padding_at_the_end_only() {
        for ok in ["", "AAEC", "AA==", "AAE=", "Zm9vYmFy", "a+/Z"] {
            assert!(is_base64(ok), "{ok}");
        }
        for bad in [
            "A",
            "AAE",
            "not base64!!",
            "A=AA",
            "AA=A",
            "A===",
            "AA-_",
            "AAEC\n",
        ] {
            assert!(!is_base64(bad), "{bad}");
        }
    }
}

#[cfg(test)]
mod dot_segments {
    use super::{encodes_unreserved, has_dot_segment, is_clean_uri};

    #[test]
    fn dot_segments_are_refused_raw_encoded_and_after_backslashes() {
        for escaping in [
            "file:///public/../etc/passwd",
            "file:///public/./x",
            "file:///public/..",
            "file:///public/%2e%2e/etc/passwd",
            "file:///public/%2E%2e/etc",
            "file:///public/.%2e/etc",
            "file:///public\\..\\etc",
            "skill://pdf/../deploy/SKILL.md",
            "../x",
            "file:///public/..%2f..%2fetc%2fpasswd",
            "file:///public/..%5c..%5cetc",
            "file:///public/%2e%2e%2fetc",
        ] {
            assert!(has_dot_segment(escaping), "{escaping}");
            assert!(!is_clean_uri(escaping), "{escaping}");
        }
        for fine in [
            "file:///public/readme.md",
            "file:///public/.hidden",
            "file:///public/a..b",
            "test://static-text",
            "file:///public/x?q=..",
            "file:///public/x#..",
            "skill://pdf-processing/references/FORMS.md",
            "repo://owner%2Fname/README.md",
        ] {
            assert!(!has_dot_segment(fine), "{fine}");
        }
    }

    #[test]
    fn other_spellings_of_a_uri_are_refused() {
        for other in [
            "FILE:///secret/key",
            "Skill://pdf-processing/SKILL.md",
            " file:///secret/key",
            "file:///secret/key ",
            "file:///secret/a b",
            "file:///secret/a\u{a0}b",
        ] {
            assert!(!is_clean_uri(other), "{other:?}");
        }
        for fine in [
            "file:///public/README.md",
            "urn:ISBN:0451450523",
            "test://static-text",
        ] {
            assert!(is_clean_uri(fine), "{fine}");
        }
    }

    #[test]
    fn unreserved_characters_percent_encoded_are_refused() {
        for disguised in [
            "file:///%73ecret/key",
            "skill://deploy%2Dprod/SKILL.md",
            "skill://deploy%2dprod/SKILL.md",
            "file:///public/a%5Fb",
            "file:///public/%41",
        ] {
            assert!(encodes_unreserved(disguised), "{disguised}");
            assert!(!is_clean_uri(disguised), "{disguised}");
        }
        for fine in [
            "repo://owner%2Fname/README.md",
            "file:///home/%7Ealice/notes.md",
            "file:///public/a%20b.md",
            "file:///public/100%25",
            "file:///public/%",
            "file:///public/%zz",
            "file:///public/%4",
            "test://static-text",
        ] {
            assert!(!encodes_unreserved(fine), "{fine}");
            assert!(is_clean_uri(fine), "{fine}");
        }
    }
}
