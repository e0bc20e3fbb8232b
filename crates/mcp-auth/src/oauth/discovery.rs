//! Where the token endpoint is: the `WWW-Authenticate` challenge, RFC 9728 protected-resource
//! metadata, RFC 8414 / OpenID Connect authorization-server metadata.

use url::Url;

/// The parameters of a `WWW-Authenticate` challenge this crate uses.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Challenge {
    /// RFC 9728 §5.1: where the protected-resource metadata is.
    pub(crate) resource_metadata: Option<String>,
    /// The scope the resource asks for.
    pub(crate) scope: Option<String>,
}

/// Reads the auth-params of a `WWW-Authenticate` header value (any scheme; several challenges
/// separated by commas). Quoted strings may contain commas and escaped quotes.
pub(crate) fn parse_challenge(header: &str) -> Challenge {
    let mut challenge = Challenge::default();
    for (name, value) in auth_params(header) {
        match name.to_ascii_lowercase().as_str() {
            "resource_metadata" if challenge.resource_metadata.is_none() => {
                challenge.resource_metadata = Some(value);
            }
            "scope" if challenge.scope.is_none() => challenge.scope = Some(value),
            _ => {}
        }
    }
    challenge
}

/// Every `name=value` pair of a challenge list, values unquoted.
fn auth_params(header: &str) -> Vec<(String, String)> {
    let chars: Vec<char> = header.chars().collect();
    let mut params = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        // A token: a scheme, or a parameter name when `=` follows.
        while i < chars.len() && (chars[i] == ',' || chars[i].is_whitespace()) {
            i += 1;
        }
        let start = i;
        while i < chars.len() && !matches!(chars[i], '=' | ',' | ' ' | '\t') {
            i += 1;
        }
        let token: String = chars[start..i].iter().collect();
        let mut j = i;
        while j < chars.len() && chars[j].is_whitespace() {
            j += 1;
        }
        if j < chars.len() && chars[j] == '=' && !token.is_empty() {
            // `token68` values end in `=` padding; a parameter has a value after it.
            j += 1;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            let mut value = String::new();
            if j < chars.len() && chars[j] == '"' {
                j += 1;
                while j < chars.len() && chars[j] != '"' {
                    if chars[j] == '\\' && j + 1 < chars.len() {
                        j += 1;
                    }
                    value.push(chars[j]);
                    j += 1;
                }
                j += 1; // the closing quote
            } else {
                while j < chars.len() && !matches!(chars[j], ',' | ' ' | '\t') {
                    value.push(chars[j]);
                    j += 1;
                }
            }
            params.push((token, value));
            i = j;
        } else if i == start {
            i += 1;
        }
    }
    params
}

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
    fn challenges() {
        let check = |header: &str, metadata: Option<&str>, scope: Option<&str>| {
            let c = parse_challenge(header);
            assert_eq!(c.resource_metadata.as_deref(), metadata, "{header}");
            assert_eq!(c.scope.as_deref(), scope, "{header}");
        };
        check(
            r#"Bearer resource_metadata="http://h/.well-known/oauth-protected-resource/mcp""#,
            Some("http://h/.well-known/oauth-protected-resource/mcp"),
            None,
        );
        check(
            r#"Bearer realm="a, b", error="invalid_token", error_description="bad \"one\"", resource_metadata="https://h/m", scope="read write""#,
            Some("https://h/m"),
            Some("read write"),
        );
        check(
            "Basic realm=x, Bearer resource_metadata=https://h/m,scope=s",
            Some("https://h/m"),
            Some("s"),
        );
        check("Bearer", None, None);
        check("Negotiate abc==", None, None);
        check("", None, None);
        check(
            r#"Bearer resource_metadata="unterminated"#,
            Some("unterminated"),
            None,
        );
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
