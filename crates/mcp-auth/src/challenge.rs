//! The `WWW-Authenticate` challenge (RFC 9110 §11.6.1) of a 401 or 403.

/// The parameters of a `WWW-Authenticate` header (RFC 9110 §11.6.1) that MCP clients use:
/// where the protected-resource metadata is, the scope asked for, the error code.
///
/// The header may hold several challenges (any schemes) separated by commas; quoted values
/// may contain commas and escaped quotes. For each parameter the first occurrence counts.
/// Values are the server's text, unbounded: show them only shortened.
///
/// ```
/// use mcp_auth::Challenge;
///
/// let c = Challenge::parse(
///     r#"Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata="https://h/.well-known/oauth-protected-resource""#,
/// );
/// assert_eq!(c.scope.as_deref(), Some("files:read files:write"));
/// assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
/// assert_eq!(c.resource_metadata.as_deref(), Some("https://h/.well-known/oauth-protected-resource"));
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Challenge {
    /// RFC 9728 §5.1 `resource_metadata`: where the protected-resource metadata is.
    pub resource_metadata: Option<String>,
    /// `scope`: the scope the resource asks for (space-separated).
    pub scope: Option<String>,
    /// `error` (RFC 6750 §3.1): `invalid_token`, `insufficient_scope`, …
    pub error: Option<String>,
}

impl Challenge {
    /// Reads the parameters of a `WWW-Authenticate` header value.
    pub fn parse(header: &str) -> Self {
        let mut challenge = Self::default();
        for (name, value) in auth_params(header) {
            let slot = match name.to_ascii_lowercase().as_str() {
                "resource_metadata" => &mut challenge.resource_metadata,
                "scope" => &mut challenge.scope,
                "error" => &mut challenge.error,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(value);
            }
        }
        challenge
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges() {
        let check = |header: &str, metadata: Option<&str>, scope: Option<&str>| {
            let c = Challenge::parse(header);
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
        check("Bearer scope=read:data, error=x", None, Some("read:data"));
        check(r#"Bearer error="insufficient_scope""#, None, None);
        let c = Challenge::parse(r#"Bearer error="a", error="b", scope="""#);
        assert_eq!(c.error.as_deref(), Some("a"), "the first occurrence counts");
        assert_eq!(c.scope.as_deref(), Some(""));
    }
}
