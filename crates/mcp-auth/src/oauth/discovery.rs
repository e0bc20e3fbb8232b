//! Where the token endpoint is: RFC 9728 protected-resource metadata, RFC 8414 / OpenID
//! Connect authorization-server metadata (the `WWW-Authenticate` challenge is read by
//! [`crate::Challenge`]).

use url::Url;

/// The protected-resource metadata URLs of `resource` (RFC 9728 §3.1), path-based first,
/// then the root: `https://h/.well-known/oauth-protected-resource/mcp`,
/// `https://h/.well-known/oauth-protected-resource`.
pub(crate) fn protected_resource_urls(resource: &Url) -> Vec<Url> {
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
pub(crate) fn authorization_server_urls(issuer: &Url) -> Vec<Url> {
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
pub(crate) fn resource_covers(resource: &str, url: &Url) -> bool {
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
