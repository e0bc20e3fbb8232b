//! Which scope a login asks for, and step-up when the server wants more.

use crate::{AuthError, Challenge};

/// The scope a login asks for (space-separated), in the MCP authorization spec's order:
/// the configured `scopes`; else the `scope` of the server's `WWW-Authenticate` challenge;
/// else the protected resource's `scopes_supported`; else none (the parameter is omitted).
///
/// When a scope is sent and the authorization server lists `offline_access` in its
/// `scopes_supported`, it is added so the login gets a refresh token.
///
/// ```
/// use mcp_auth::{Challenge, select_scope};
///
/// let challenge = Challenge::parse(r#"Bearer scope="files:read""#);
/// let resource = ["files:read".to_owned(), "files:write".to_owned()];
/// assert_eq!(select_scope(None, Some(&challenge), Some(&resource), None).as_deref(), Some("files:read"));
/// assert_eq!(select_scope(None, None, Some(&resource), None).as_deref(), Some("files:read files:write"));
/// assert_eq!(select_scope(None, None, None, None), None);
/// ```
pub fn select_scope(
    configured: Option<&[String]>,
    challenge: Option<&Challenge>,
    resource_scopes: Option<&[String]>,
    server_scopes: Option<&[String]>,
) -> Option<String> {
    let mut scopes: Vec<String> = if let Some(configured) = configured {
        configured.to_vec()
    } else if let Some(scope) = challenge
        .and_then(|c| c.scope.as_deref())
        .filter(|s| !s.trim().is_empty())
    {
        split(scope)
    } else if let Some(list) = resource_scopes.filter(|l| !l.is_empty()) {
        list.to_vec()
    } else {
        return None;
    };
    dedup(&mut scopes);
    if scopes.is_empty() {
        return None;
    }
    if server_scopes.is_some_and(|l| l.iter().any(|s| s == OFFLINE_ACCESS))
        && !scopes.iter().any(|s| s == OFFLINE_ACCESS)
    {
        scopes.push(OFFLINE_ACCESS.to_owned());
    }
    Some(scopes.join(" "))
}

/// The scope that asks for refresh tokens (OpenID Connect §11).
pub const OFFLINE_ACCESS: &str = "offline_access";

fn split(scope: &str) -> Vec<String> {
    scope.split_whitespace().map(str::to_owned).collect()
}

fn dedup(scopes: &mut Vec<String>) {
    let mut seen = Vec::new();
    scopes.retain(|s| {
        let new = !seen.contains(s);
        seen.push(s.clone());
        new
    });
}

/// Step-up authorization: after a `403` with `error="insufficient_scope"`, log in again for
/// the scope granted so far plus the scope the challenge asks for, at most
/// [`max_attempts`](Self::max_attempts) times, and never for a scope already tried (a server
/// that keeps asking for what it got would otherwise loop).
///
/// ```
/// use mcp_auth::{Challenge, StepUp};
///
/// let mut step_up = StepUp::new(2);
/// let challenge = Challenge::parse(r#"Bearer error="insufficient_scope", scope="files:write""#);
/// let scope = step_up.next_scope("srv", Some("files:read"), &challenge).unwrap();
/// assert_eq!(scope, "files:read files:write");
/// // The same challenge again: nothing new to ask for.
/// assert!(step_up.next_scope("srv", Some(&scope), &challenge).is_err());
/// ```
#[derive(Debug, Clone)]
pub struct StepUp {
    max_attempts: u32,
    attempts: u32,
    tried: Vec<String>,
}

impl StepUp {
    /// At most `max_attempts` step-ups.
    pub fn new(max_attempts: u32) -> Self {
        Self {
            max_attempts,
            attempts: 0,
            tried: Vec::new(),
        }
    }

    /// The most step-ups allowed.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The step-ups so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The scope to log in with next, for server `server` that answered with `challenge`
    /// while holding `granted`: the union of both. An error ([`AuthError::LoginRequired`]'s
    /// kin, [`AuthError::Login`]) when the challenge is not `insufficient_scope`, asks for no
    /// scope beyond the granted one, repeats a scope already tried, or the attempts ran out.
    pub fn next_scope(
        &mut self,
        server: &str,
        granted: Option<&str>,
        challenge: &Challenge,
    ) -> Result<String, AuthError> {
        let refuse = |message: String| AuthError::Login {
            server: server.to_owned(),
            message,
        };
        if challenge.error.as_deref() != Some("insufficient_scope") {
            return Err(refuse(
                "the server refused the token without asking for more scope (no `insufficient_scope`)"
                    .to_owned(),
            ));
        }
        let asked = challenge.scope.as_deref().map(split).unwrap_or_default();
        let mut scopes = granted.map(split).unwrap_or_default();
        let before = scopes.len();
        scopes.extend(asked);
        dedup(&mut scopes);
        let scope = scopes.join(" ");
        if scopes.len() == before {
            return Err(refuse(format!(
                "the server asks for more scope but names none beyond the granted `{}`; step-up stopped",
                crate::oauth::shown_text(&scope)
            )));
        }
        if self.tried.contains(&scope) {
            return Err(refuse(format!(
                "the scope `{}` was already tried; step-up stopped",
                crate::oauth::shown_text(&scope)
            )));
        }
        if self.attempts >= self.max_attempts {
            return Err(refuse(format!(
                "the server still asks for more scope after {} step-ups; stopped",
                self.attempts
            )));
        }
        self.attempts += 1;
        self.tried.push(scope.clone());
        Ok(scope)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn scope_selection_order() {
        let challenge = Challenge::parse(r#"Bearer scope="a b a""#);
        let empty = Challenge::parse(r#"Bearer scope="  ""#);
        let resource = list(&["r1", "r2"]);
        let configured = list(&["c"]);
        let offline = list(&["r1", "offline_access"]);
        type Case<'a> = (
            Option<&'a [String]>,
            Option<&'a Challenge>,
            Option<&'a [String]>,
            Option<&'a [String]>,
            Option<&'a str>,
        );
        let cases: [Case<'_>; 8] = [
            (
                Some(&configured),
                Some(&challenge),
                Some(&resource),
                None,
                Some("c"),
            ),
            (None, Some(&challenge), Some(&resource), None, Some("a b")),
            (None, Some(&empty), Some(&resource), None, Some("r1 r2")),
            (None, None, Some(&resource), None, Some("r1 r2")),
            (None, None, None, None, None),
            (None, None, Some(&[]), Some(&offline), None),
            (
                None,
                Some(&challenge),
                None,
                Some(&offline),
                Some("a b offline_access"),
            ),
            (
                Some(&offline),
                None,
                None,
                Some(&offline),
                Some("r1 offline_access"),
            ),
        ];
        for (configured, challenge, resource, server, expected) in cases {
            assert_eq!(
                select_scope(configured, challenge, resource, server).as_deref(),
                expected,
                "{configured:?} {challenge:?} {resource:?} {server:?}"
            );
        }
    }

    #[test]
    fn step_up_has_a_limit_and_needs_progress() {
        let ask = |scope: &str| {
            Challenge::parse(&format!(
                r#"Bearer error="insufficient_scope", scope="{scope}""#
            ))
        };
        let mut step_up = StepUp::new(2);
        assert_eq!(step_up.next_scope("s", None, &ask("a")).unwrap(), "a");
        assert_eq!(
            step_up.next_scope("s", Some("a"), &ask("b")).unwrap(),
            "a b"
        );
        let err = step_up.next_scope("s", Some("a b"), &ask("c")).unwrap_err();
        assert!(err.to_string().contains("after 2 step-ups"), "{err}");

        let mut step_up = StepUp::new(5);
        let err = step_up.next_scope("s", Some("a"), &ask("a")).unwrap_err();
        assert!(err.to_string().contains("names none beyond"), "{err}");
        let err = step_up
            .next_scope(
                "s",
                Some("a"),
                &Challenge::parse(r#"Bearer error="invalid_token""#),
            )
            .unwrap_err();
        assert!(err.to_string().contains("insufficient_scope"), "{err}");
        assert_eq!(step_up.attempts(), 0);
    }
}
