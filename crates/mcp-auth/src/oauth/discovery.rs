//! Where the authorization server is, and whether a credential may go there.
//!
//! RFC 9728 protected-resource metadata (from the challenge's `resource_metadata`, else the
//! well-known URLs of the MCP URL), then RFC 8414 / OpenID Connect authorization-server
//! metadata at the issuer's path-aware well-known URLs, with the issuer check. The documents
//! are typed (`metadata.rs`); the `WWW-Authenticate` challenge is read by [`crate::Challenge`].
//! Client credentials and a user's login share it ([`Discovery`], with a policy each); every
//! refusal comes before anything is sent to the authorization server.

use std::time::Duration;

use bytes::Bytes;
use http::header::ACCEPT;
use mcp_config::{is_internal_host, is_loopback_host};
use serde::de::DeserializeOwned;
use url::Url;

use super::failure::{Failure, shown};
use super::metadata::{self, AuthorizationServer, ProtectedResource};
use crate::Challenge;
use crate::fetch::HttpFetch;

/// One discovery: where to look, through which client, and what to refuse.
pub(crate) struct Discovery<'a> {
    pub(crate) http: &'a dyn HttpFetch,
    /// Bound on each exchange.
    pub(crate) timeout: Duration,
    pub(crate) max_response_bytes: usize,
    pub(crate) mcp_url: &'a Url,
    /// Issuers a confined credential may go to besides one on the MCP server's host.
    pub(crate) allowed_issuers: &'a [Url],
    /// The spec is SSRF-guarded: no discovered URL may name an internal address.
    pub(crate) guarded: bool,
    /// A client secret goes to what is found: the issuer must be on the MCP server's host or
    /// allowed, and the token endpoint on the issuer's host.
    pub(crate) confine: bool,
    /// Why a plain-`http` MCP URL that is not loopback is refused, when it is.
    pub(crate) plain_http_refusal: Option<&'static str>,
    /// The grant the client will use (`client_credentials`, `authorization_code`): metadata
    /// whose `grant_types_supported` leaves it out is refused.
    pub(crate) grant: &'static str,
}

/// What discovery found.
#[derive(Debug)]
pub(crate) struct Discovered {
    /// The issuer, as the metadata names it (checked against the one it was fetched for).
    pub(crate) issuer: String,
    /// The metadata document's URL.
    pub(crate) metadata_url: Url,
    pub(crate) metadata: AuthorizationServer,
    pub(crate) token_url: Url,
    /// The protected resource's identifier, when its metadata gave it.
    pub(crate) resource: Option<String>,
    /// The protected resource's `scopes_supported`, when its metadata gave it.
    pub(crate) resource_scopes: Option<Vec<String>>,
}

impl Discovery<'_> {
    /// Protected-resource metadata, then the authorization server's metadata, with every
    /// check of the policy.
    pub(crate) async fn run(&self, challenge: &Challenge) -> Result<Discovered, Failure> {
        let mcp_url = self.mcp_url;
        let loopback = mcp_url.host().is_some_and(|h| is_loopback_host(&h));
        if mcp_url.scheme() == "http"
            && !loopback
            && let Some(why) = self.plain_http_refusal
        {
            return Err(Failure::Discovery(format!(
                "the server URL {mcp_url} is plain http, so {why}"
            )));
        }
        let mut candidates = Vec::new();
        if let Some(hint) = &challenge.resource_metadata {
            let url = Url::parse(hint).map_err(|_| {
                Failure::Discovery(format!(
                    "the server's WWW-Authenticate names `resource_metadata` `{}`, which is not a URL",
                    shown(hint)
                ))
            })?;
            candidates.push(url);
        }
        for url in protected_resource_urls(mcp_url) {
            if !candidates.contains(&url) {
                candidates.push(url);
            }
        }
        let mut tried = Vec::new();
        let mut resource_metadata = None;
        for url in candidates {
            self.check_url(&url, "protected resource metadata")?;
            match self
                .get_document::<ProtectedResource>(&url, "protected resource metadata")
                .await?
            {
                Ok(doc) => {
                    resource_metadata = Some((url, doc));
                    break;
                }
                Err(status) => tried.push(format!("{} (HTTP {status})", shown(&url))),
            }
        }
        let (issuer, resource, resource_scopes) = match resource_metadata {
            Some((url, doc)) => {
                let resource = doc.resource.ok_or_else(|| {
                    Failure::Discovery(format!(
                        "the protected resource metadata at {} has no `resource`",
                        shown(&url)
                    ))
                })?;
                if !resource_covers(&resource, mcp_url) {
                    return Err(Failure::Discovery(format!(
                        "the protected resource metadata at {} is for resource `{}`, not for {mcp_url}; refused (RFC 9728 §3.3)",
                        shown(&url),
                        shown(&resource)
                    )));
                }
                let issuer = doc
                    .authorization_servers
                    .and_then(|list| list.into_iter().next())
                    .ok_or_else(|| {
                        Failure::Discovery(format!(
                            "the protected resource metadata at {} lists no `authorization_servers`",
                            shown(&url)
                        ))
                    })?;
                (issuer, Some(resource), doc.scopes_supported)
            }
            None => {
                // No protected-resource metadata: the MCP server's origin is the
                // authorization server (the 2025-03-26 MCP authorization spec).
                tracing::debug!(
                    tried = %tried.join(", "),
                    "no protected resource metadata; trying the MCP server's origin as the authorization server"
                );
                (mcp_url.origin().ascii_serialization(), None, None)
            }
        };
        let issuer_url = Url::parse(&issuer)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| {
                Failure::Discovery(format!(
                    "the authorization server `{}` is not an http(s) URL",
                    shown(&issuer)
                ))
            })?;
        if self.confine {
            self.check_issuer(&issuer_url)?;
        }
        for url in authorization_server_urls(&issuer_url) {
            self.check_url(&url, "authorization server metadata")?;
            let doc = match self
                .get_document::<AuthorizationServer>(&url, "authorization server metadata")
                .await?
            {
                Ok(doc) => doc,
                Err(status) => {
                    tried.push(format!("{} (HTTP {status})", shown(&url)));
                    continue;
                }
            };
            let found = doc.issuer.clone().unwrap_or_default();
            if !same_issuer(&issuer, &found) {
                return Err(Failure::IssuerMismatch {
                    metadata_url: shown(&url),
                    expected: shown(&issuer),
                    found: shown(&found),
                });
            }
            if let Some(grants) = &doc.grant_types_supported
                && !grants.iter().any(|g| g == self.grant)
            {
                return Err(Failure::Discovery(format!(
                    "the authorization server `{}` does not offer the {} grant (grant_types_supported at {})",
                    shown(&issuer),
                    self.grant,
                    shown(&url)
                )));
            }
            let token_url = self.endpoint(doc.token_endpoint.as_deref(), "token_endpoint", &url)?;
            if self.confine && token_url.host() != issuer_url.host() {
                return Err(Failure::Discovery(format!(
                    "the token endpoint {} is not on the host of the authorization server `{}`; \
                     refused (set `token_url` to use it)",
                    shown(&token_url),
                    shown(&issuer)
                )));
            }
            tracing::debug!(
                server_url = %mcp_url,
                issuer = %issuer,
                token_url = %token_url,
                "discovered the OAuth authorization server"
            );
            return Ok(Discovered {
                issuer: found,
                metadata_url: url,
                metadata: doc,
                token_url,
                resource,
                resource_scopes,
            });
        }
        if resource.is_none() && self.grant == "authorization_code" {
            // Neither document: a 2025-03-26 server, whose origin serves the default
            // endpoints `/authorize`, `/token` and `/register` (that revision's fallback for
            // a login; a credential of another grant is not sent to a guessed endpoint).
            return self.default_endpoints(&issuer_url, tried);
        }
        Err(Failure::Discovery(format!(
            "no authorization server metadata found for `{}` (tried {})",
            shown(&issuer),
            tried.join(", ")
        )))
    }

    /// The 2025-03-26 default endpoints at `origin`, as if its metadata listed them (with
    /// PKCE S256, which that revision requires of every server).
    fn default_endpoints(&self, origin: &Url, tried: Vec<String>) -> Result<Discovered, Failure> {
        let at = |path: &str| well_known(origin, path);
        let metadata = AuthorizationServer {
            issuer: Some(origin.origin().ascii_serialization()),
            token_endpoint: Some(at("/token").to_string()),
            authorization_endpoint: Some(at("/authorize").to_string()),
            registration_endpoint: Some(at("/register").to_string()),
            code_challenge_methods_supported: Some(vec!["S256".to_owned()]),
            ..AuthorizationServer::default()
        };
        let token_url = at("/token");
        self.check_url(&token_url, "token endpoint")?;
        tracing::debug!(
            server_url = %self.mcp_url,
            tried = %tried.join(", "),
            "no OAuth metadata; using the default endpoints at the server's origin (2025-03-26)"
        );
        Ok(Discovered {
            issuer: origin.origin().ascii_serialization(),
            metadata_url: at("/"),
            metadata,
            token_url,
            resource: None,
            resource_scopes: None,
        })
    }

    /// The http(s) endpoint `field` of the metadata at `metadata_url`, checked like every
    /// discovered URL.
    pub(crate) fn endpoint(
        &self,
        value: Option<&str>,
        field: &str,
        metadata_url: &Url,
    ) -> Result<Url, Failure> {
        let url = value
            .and_then(|t| Url::parse(t).ok())
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| {
                Failure::Discovery(format!(
                    "the authorization server metadata at {} has no http(s) `{field}`",
                    shown(metadata_url)
                ))
            })?;
        self.check_url(&url, &field.replace('_', " "))?;
        Ok(url)
    }

    /// The client credential goes only to an authorization server on the MCP server's own
    /// host (ports may differ) or one the configuration lists in `allowed_issuers`.
    fn check_issuer(&self, issuer: &Url) -> Result<(), Failure> {
        let mcp_url = self.mcp_url;
        let same_host = issuer.host().is_some() && issuer.host() == mcp_url.host();
        let listed = self
            .allowed_issuers
            .iter()
            .any(|allowed| same_issuer(allowed.as_str(), issuer.as_str()));
        if same_host || listed {
            return Ok(());
        }
        Err(Failure::Discovery(format!(
            "the server names the authorization server `{}`, which is neither on its own host `{}` nor in `allowed_issuers`; \
             refused (list it in `allowed_issuers`, or set `token_url`)",
            shown(issuer),
            mcp_url.host_str().unwrap_or_default()
        )))
    }

    /// A discovered URL must not lower the transport's security (https → http), and an
    /// SSRF-guarded (caller-supplied) spec must not lead to an internal address literal (names
    /// resolving to one are refused by the guarded HTTP client).
    pub(crate) fn check_url(&self, url: &Url, what: &str) -> Result<(), Failure> {
        let mcp_url = self.mcp_url;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Failure::Discovery(format!(
                "the {what} URL {} is not http(s)",
                shown(url)
            )));
        }
        if mcp_url.scheme() == "https" && url.scheme() != "https" {
            return Err(Failure::Discovery(format!(
                "the {what} URL {} is not https while the server is; refused",
                shown(url)
            )));
        }
        if self.guarded && url.host().is_some_and(|h| is_internal_host(&h)) {
            return Err(Failure::Discovery(format!(
                "the {what} URL {} targets an internal address, which a caller-supplied server may not lead to (SSRF guard)",
                shown(url)
            )));
        }
        Ok(())
    }

    /// GETs a metadata document: `Ok(Ok(doc))` for a 200 answer that is a JSON object whose
    /// fields have their types, `Ok(Err(status))` for another status (the next candidate is
    /// tried); a 200 answer that is not such a document is an error naming it.
    async fn get_document<T: DeserializeOwned>(
        &self,
        url: &Url,
        what: &str,
    ) -> Result<Result<T, u16>, Failure> {
        let what = format!("{what} request to {url}");
        let request = http::Request::get(url.as_str())
            .header(ACCEPT, "application/json")
            .body(Bytes::new())
            .map_err(|_| Failure::invalid(&what, "the URL cannot be requested"))?;
        let response = exchange(
            self.http,
            self.timeout,
            self.max_response_bytes,
            &what,
            request,
        )
        .await?;
        if response.status() != http::StatusCode::OK {
            return Ok(Err(response.status().as_u16()));
        }
        metadata::parse(response.body())
            .map(Ok)
            .map_err(|message| Failure::invalid(what, message))
    }
}

/// One exchange through `http`, bounded by `timeout` and `max_response_bytes`; `what` names
/// the request in a failure.
pub(crate) async fn exchange(
    http: &dyn HttpFetch,
    timeout: Duration,
    max_response_bytes: usize,
    what: &str,
    request: http::Request<Bytes>,
) -> Result<http::Response<Bytes>, Failure> {
    match tokio::time::timeout(timeout, http.fetch(request, max_response_bytes)).await {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(error)) => Err(Failure::fetch(what.to_owned(), error)),
        Err(_) => Err(Failure::timeout(what.to_owned(), timeout)),
    }
}

/// The protected-resource metadata URLs of `resource` (RFC 9728 §3.1), path-based first,
/// then the root: `https://h/.well-known/oauth-protected-resource/mcp`,
/// `https://h/.well-known/oauth-protected-resource`.
pub(super) fn protected_resource_urls(resource: &Url) -> Vec<Url> {
    let path = resource.path().trim_end_matches('/');
    let mut urls = Vec::new();
    if !path.is_empty() {
        urls.push(well_known(
            resource,
            &format!("/.well-known/oauth-protected-resource{path}"),
        ));
    }
    urls.push(well_known(
        resource,
        "/.well-known/oauth-protected-resource",
    ));
    urls
}

/// The authorization-server metadata URLs of `issuer`, in the order the MCP authorization
/// spec gives: RFC 8414 with the issuer's path after the well-known segment, OpenID Connect
/// with the path after it, OpenID Connect with the path before it. An issuer without a path
/// has two: `/.well-known/oauth-authorization-server` and `/.well-known/openid-configuration`.
pub(super) fn authorization_server_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let mut urls = Vec::new();
    if path.is_empty() {
        urls.push(well_known(
            issuer,
            "/.well-known/oauth-authorization-server",
        ));
        urls.push(well_known(issuer, "/.well-known/openid-configuration"));
    } else {
        urls.push(well_known(
            issuer,
            &format!("/.well-known/oauth-authorization-server{path}"),
        ));
        urls.push(well_known(
            issuer,
            &format!("/.well-known/openid-configuration{path}"),
        ));
        urls.push(well_known(
            issuer,
            &format!("{path}/.well-known/openid-configuration"),
        ));
    }
    urls
}

fn well_known(base: &Url, path: &str) -> Url {
    let mut url = base.clone();
    url.set_query(None);
    url.set_fragment(None);
    url.set_path(path);
    url
}

/// True when two issuer identifiers are the same (RFC 8414 §3.3 asks for identical values;
/// URL normalisation only removes differences that do not change the identifier: case of the
/// scheme and host, a default port, an empty path versus `/`).
pub(crate) fn same_issuer(expected: &str, found: &str) -> bool {
    if expected == found {
        return true;
    }
    match (Url::parse(expected), Url::parse(found)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// True when the protected-resource metadata's `resource` covers the MCP endpoint `url`:
/// same scheme, host and port, and its path is a prefix of the endpoint's at a segment
/// boundary (so `https://h/mcp` covers `https://h/mcp` and `https://h/mcp/x`, and `https://h/`
/// covers everything on the host).
fn resource_covers(resource: &str, url: &Url) -> bool {
    let Ok(resource) = Url::parse(resource) else {
        return false;
    };
    if resource.scheme() != url.scheme()
        || resource.host_str() != url.host_str()
        || resource.port_or_known_default() != url.port_or_known_default()
        || resource.fragment().is_some()
    {
        return false;
    }
    let prefix = resource.path().trim_end_matches('/');
    let path = url.path().trim_end_matches('/');
    path == prefix || path.starts_with(&format!("{prefix}/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(list: Vec<Url>) -> Vec<String> {
        list.into_iter().map(String::from).collect()
    }

    #[test]
    fn well_known_locations() {
        let mcp: Url = "https://h:8443/api/mcp?x=1".parse().unwrap();
        assert_eq!(
            urls(protected_resource_urls(&mcp)),
            [
                "https://h:8443/.well-known/oauth-protected-resource/api/mcp",
                "https://h:8443/.well-known/oauth-protected-resource",
            ]
        );
        let root: Url = "https://h/".parse().unwrap();
        assert_eq!(
            urls(protected_resource_urls(&root)),
            ["https://h/.well-known/oauth-protected-resource"]
        );
        assert_eq!(
            urls(authorization_server_urls(&root)),
            [
                "https://h/.well-known/oauth-authorization-server",
                "https://h/.well-known/openid-configuration",
            ]
        );
        let tenant: Url = "https://as/tenant1/".parse().unwrap();
        assert_eq!(
            urls(authorization_server_urls(&tenant)),
            [
                "https://as/.well-known/oauth-authorization-server/tenant1",
                "https://as/.well-known/openid-configuration/tenant1",
                "https://as/tenant1/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn issuers_and_resources() {
        assert!(same_issuer("http://localhost:1", "http://localhost:1/"));
        assert!(same_issuer(
            "https://AS.example/t1",
            "https://as.example/t1"
        ));
        assert!(!same_issuer(
            "https://as.example/t1",
            "https://as.example/t2"
        ));
        assert!(!same_issuer("https://as.example", "https://evil.example"));

        let mcp: Url = "http://localhost:9/mcp".parse().unwrap();
        assert!(resource_covers("http://localhost:9/mcp", &mcp));
        assert!(resource_covers("http://localhost:9/", &mcp));
        assert!(resource_covers("http://localhost:9", &mcp));
        assert!(!resource_covers("http://localhost:9/mc", &mcp));
        assert!(!resource_covers("https://evil.example.com/mcp", &mcp));
        assert!(!resource_covers("http://localhost:10/mcp", &mcp));
        assert!(!resource_covers("not a url", &mcp));
    }
}
