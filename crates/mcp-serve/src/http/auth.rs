//! Inbound bearer authentication and the RFC 9728 protected-resource metadata.

use http::HeaderMap;
use ring::digest::{SHA256, digest};
use serde_json::{Value, json};
use url::Url;

/// The bearer token downstream clients must send (`Authorization: Bearer <token>`), compared
/// in constant time. A request without it, or with another, is answered `401` with a
/// `WWW-Authenticate` challenge naming the RFC 9728 protected-resource metadata, which the
/// server publishes, and reaches nothing else.
///
/// The token never appears in `Debug`, an error or a log line.
///
/// ```
/// use mcp_serve::BearerAuth;
///
/// let auth = BearerAuth::new("s3cret-token")
///     .with_authorization_servers(["https://auth.example.com".parse().unwrap()])
///     .with_scopes(["tools"]);
/// assert!(!format!("{auth:?}").contains("s3cret"));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct BearerAuth {
    /// SHA-256 of the token: compared digest to digest, so neither the token's length nor
    /// its bytes show in timing.
    expected: [u8; 32],
    /// Authorization servers named in the metadata (where a client may obtain a token).
    pub authorization_servers: Vec<Url>,
    /// Scopes named in the metadata and the challenge.
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for BearerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerAuth")
            .field("token", &"[REDACTED]")
            .field("authorization_servers", &self.authorization_servers)
            .field("scopes", &self.scopes)
            .finish()
    }
}

impl BearerAuth {
    /// Requires `token`.
    pub fn new(token: impl AsRef<str>) -> Self {
        Self {
            expected: sha256(token.as_ref().as_bytes()),
            authorization_servers: Vec::new(),
            scopes: Vec::new(),
        }
    }

    /// Names authorization servers in the metadata document.
    #[must_use]
    pub fn with_authorization_servers(mut self, servers: impl IntoIterator<Item = Url>) -> Self {
        self.authorization_servers = servers.into_iter().collect();
        self
    }

    /// Names scopes in the metadata document and the challenge.
    #[must_use]
    pub fn with_scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Checks the request's `Authorization` header.
    pub(crate) fn check(&self, headers: &HeaderMap) -> Verdict {
        let mut values = headers.get_all(http::header::AUTHORIZATION).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return if headers.contains_key(http::header::AUTHORIZATION) {
                Verdict::Invalid
            } else {
                Verdict::Missing
            };
        };
        let Some(token) = value
            .to_str()
            .ok()
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
        else {
            return Verdict::Invalid;
        };
        if same(&sha256(token.as_bytes()), &self.expected) {
            Verdict::Allowed
        } else {
            Verdict::Invalid
        }
    }

    /// The `WWW-Authenticate` value of a 401 (RFC 6750 §3, RFC 9728 §5.1).
    pub(crate) fn challenge(&self, metadata_url: &Url, verdict: Verdict) -> String {
        let mut challenge = format!("Bearer resource_metadata=\"{metadata_url}\"");
        if !self.scopes.is_empty() {
            challenge.push_str(&format!(", scope=\"{}\"", self.scopes.join(" ")));
        }
        if verdict == Verdict::Invalid {
            challenge.push_str(
                ", error=\"invalid_token\", error_description=\"the access token is not valid\"",
            );
        }
        challenge
    }

    /// The protected-resource metadata document of `resource` (RFC 9728 §2).
    pub(crate) fn metadata(&self, resource: &Url, name: &str) -> Value {
        let mut doc = json!({
            "resource": resource.as_str(),
            "bearer_methods_supported": ["header"],
            "resource_name": name,
        });
        if !self.authorization_servers.is_empty() {
            let servers: Vec<&str> = self.authorization_servers.iter().map(Url::as_str).collect();
            doc["authorization_servers"] = json!(servers);
        }
        if !self.scopes.is_empty() {
            doc["scopes_supported"] = json!(self.scopes);
        }
        doc
    }
}

/// What a request's credentials are worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Allowed,
    Missing,
    Invalid,
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0; 32];
    out.copy_from_slice(digest(&SHA256, bytes).as_ref());
    out
}

/// Equality of two digests that looks at every byte, whatever differs.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let diff = a
        .iter()
        .zip(b)
        .fold(0u8, |acc, (x, y)| acc | std::hint::black_box(x ^ y));
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(http::header::AUTHORIZATION, v.parse().unwrap());
        }
        map
    }

    #[test]
    fn only_the_one_token_passes() {
        let auth = BearerAuth::new("tok");
        assert_eq!(auth.check(&headers(&["Bearer tok"])), Verdict::Allowed);
        assert_eq!(auth.check(&headers(&["bearer tok"])), Verdict::Allowed);
        assert_eq!(auth.check(&headers(&[])), Verdict::Missing);
        for bad in [
            &["Bearer tok2"][..],
            &["Basic tok"],
            &["tok"],
            &["Bearer tok", "Bearer tok"],
        ] {
            assert_eq!(auth.check(&headers(bad)), Verdict::Invalid, "{bad:?}");
        }
    }

    #[test]
    fn the_challenge_names_the_metadata() {
        let auth = BearerAuth::new("t").with_scopes(["a", "b"]);
        let url: Url = "http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp"
            .parse()
            .unwrap();
        assert_eq!(
            auth.challenge(&url, Verdict::Missing),
            format!("Bearer resource_metadata=\"{url}\", scope=\"a b\"")
        );
        assert!(
            auth.challenge(&url, Verdict::Invalid)
                .contains("invalid_token")
        );
    }
}
