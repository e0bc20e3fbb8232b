//! How a gateway names its upstream servers' resources and prompts to its clients, and routes
//! a name back to the one server it came from ([`UpstreamNames`]).

use std::borrow::Cow;

use rmcp::ErrorData;

use crate::features::{check_client_text, shown};

/// The scheme of a resource URI the gateway shows when it has several upstream servers.
pub const UPSTREAM_SCHEME: &str = "upstream";

/// The scheme of skill files (the skills extension), kept when a gateway shows them.
const SKILL_PREFIX: &str = "skill://";

/// The separator of `server__prompt` names (as of `server__tool`).
const SEPARATOR: &str = "__";

/// The longest upstream URI or prompt name routed, in bytes.
pub const MAX_UPSTREAM_URI_BYTES: usize = 2048;

/// Names of upstream resources and prompts as a gateway's clients see them, and the way back.
///
/// With one upstream server everything keeps its own name: a URI or prompt name goes to that
/// server as it is. With several, a resource URI `u` of server `s` is shown as
/// `upstream://s/u` (a resource template likewise, so its expansions route back), a skill file
/// `skill://path` as `skill://s/path` (still a skill's URI, its name its last segment but one),
/// and a prompt `p` as `s__p`. Routing is by exact prefix: the authority must be a server's
/// name exactly
/// (no decoding, no case folding), and the rest goes verbatim to that server and no other. A
/// URI with a dot segment (`.` or `..`, percent-encoded or not) after the authority is refused:
/// a client normalising `upstream://a/../b/x` would turn it into `upstream://b/x` (an upstream
/// resource whose URI has one is not listed). A name that names no server, is empty, holds
/// control characters or is longer than [`MAX_UPSTREAM_URI_BYTES`] is refused with -32602
/// before anything is sent.
///
/// ```
/// use mcp_serve::UpstreamNames;
///
/// let names = UpstreamNames::new(["docs", "git"]);
/// let shown = names.uri("docs", "file:///readme.md").unwrap();
/// assert_eq!(shown, "upstream://docs/file:///readme.md");
/// assert_eq!(names.route_uri(&shown).unwrap(), ("docs", "file:///readme.md".into()));
/// assert!(names.route_uri("upstream://other/file:///x").is_err());
/// assert!(names.route_uri("upstream://docs/../git/x").is_err());
/// let skill = names.uri("git", "skill://review/SKILL.md").unwrap();
/// assert_eq!(skill, "skill://git/review/SKILL.md");
/// assert_eq!(names.route_uri(&skill).unwrap(), ("git", "skill://review/SKILL.md".into()));
/// assert_eq!(names.route_prompt("git__review").unwrap(), ("git", "review"));
///
/// let one = UpstreamNames::new(["docs"]);
/// assert_eq!(one.uri("docs", "file:///readme.md").unwrap(), "file:///readme.md");
/// ```
#[derive(Debug, Clone, Default)]
pub struct UpstreamNames {
    servers: Vec<String>,
}

impl UpstreamNames {
    /// The names of the upstream servers `servers` (configured keys).
    pub fn new<S: Into<String>>(servers: impl IntoIterator<Item = S>) -> Self {
        let mut servers: Vec<String> = servers.into_iter().map(Into::into).collect();
        servers.sort();
        servers.dedup();
        Self { servers }
    }

    /// True when names pass through unchanged (one upstream server).
    pub fn passes_through(&self) -> bool {
        self.servers.len() == 1
    }

    /// The URI (or URI template) `uri` of `server` as shown to clients; `None` when it could
    /// not be routed back (see [`route_uri`](Self::route_uri)), so is not shown.
    pub fn uri(&self, server: &str, uri: &str) -> Option<String> {
        let shown = if self.passes_through() {
            uri.to_owned()
        } else if let Some(path) = uri.strip_prefix(SKILL_PREFIX) {
            format!("{SKILL_PREFIX}{server}/{path}")
        } else {
            format!("{UPSTREAM_SCHEME}://{server}/{uri}")
        };
        matches!(self.route_uri(&shown), Ok((s, own)) if s == server && own == uri).then_some(shown)
    }

    /// The prompt `name` of `server` as shown to clients.
    pub fn prompt(&self, server: &str, name: &str) -> String {
        if self.passes_through() {
            name.to_owned()
        } else {
            format!("{server}{SEPARATOR}{name}")
        }
    }

    /// The server and its own URI that a client's `uri` names; -32602 when it names none.
    pub fn route_uri<'a>(&'a self, uri: &'a str) -> Result<(&'a str, Cow<'a, str>), ErrorData> {
        check_client_text("resource URI", uri)?;
        let server_of = |rest: &'a str| {
            let (server, own) = rest.split_once('/').filter(|(_, own)| !own.is_empty())?;
            let server = self.servers.iter().find(|s| *s == server)?;
            Some((server.as_str(), own))
        };
        let routed = if self.passes_through() {
            Some((self.servers[0].as_str(), Cow::Borrowed(uri)))
        } else if let Some(rest) = uri.strip_prefix(SKILL_PREFIX) {
            // The server's own URI is `skill://` and the rest, checked as a path below.
            server_of(rest)
                .map(|(server, path)| (server, Cow::Owned(format!("{SKILL_PREFIX}{path}"))))
        } else {
            uri.strip_prefix(UPSTREAM_SCHEME)
                .and_then(|rest| rest.strip_prefix("://"))
                .and_then(server_of)
                .map(|(server, own)| (server, Cow::Borrowed(own)))
        };
        match routed {
            Some((server, own))
                if !own.is_empty()
                    && own.len() <= MAX_UPSTREAM_URI_BYTES
                    && (self.passes_through() || !has_dot_segment(&own)) =>
            {
                Ok((server, own))
            }
            _ => Err(unrouted("resource URI", uri)),
        }
    }

    /// The server and its own prompt name that a client's `name` names; -32602 when it names
    /// none (or more than one).
    pub fn route_prompt<'a>(&'a self, name: &'a str) -> Result<(&'a str, &'a str), ErrorData> {
        check_client_text("prompt name", name)?;
        if self.passes_through() {
            return if name.len() <= MAX_UPSTREAM_URI_BYTES {
                Ok((self.servers[0].as_str(), name))
            } else {
                Err(unrouted("prompt name", name))
            };
        }
        let mut matches = self.servers.iter().filter_map(|server| {
            name.strip_prefix(server.as_str())
                .and_then(|rest| rest.strip_prefix(SEPARATOR))
                .filter(|own| !own.is_empty() && own.len() <= MAX_UPSTREAM_URI_BYTES)
                .map(|own| (server.as_str(), own))
        });
        match (matches.next(), matches.next()) {
            (Some(routed), None) => Ok(routed),
            _ => Err(unrouted("prompt name", name)),
        }
    }
}

/// True when a segment of `path` (split at `/`, `?` and `#` aside) is `.` or `..`, in any
/// percent-encoded form: what URI normalisation would resolve against the authority.
fn has_dot_segment(path: &str) -> bool {
    path.split('/').any(|segment| {
        let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
        decoded == "." || decoded == ".."
    })
}

/// The refusal of a name that routes to no upstream server.
fn unrouted(what: &str, name: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "the {what} `{}` names no upstream server of this gateway",
            shown(name)
        ),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> UpstreamNames {
        UpstreamNames::new(["a", "b"])
    }

    #[test]
    fn a_shown_uri_routes_back_to_its_server() {
        let names = two();
        for (server, uri) in [
            ("a", "file:///x"),
            ("b", "test://t/{id}"),
            ("a", "a://b/c"),
            ("b", "skill://pdf/SKILL.md"),
            ("a", "skill://org/team/pdf/references/FORMS.md"),
        ] {
            let shown = names.uri(server, uri).unwrap();
            assert_eq!(names.route_uri(&shown).unwrap(), (server, uri.into()));
        }
    }

    #[test]
    fn no_uri_escapes_its_server() {
        let names = two();
        // The rest goes verbatim to the server the authority names, never elsewhere.
        assert_eq!(
            names.route_uri("upstream://a/upstream://b/x").unwrap(),
            ("a", "upstream://b/x".into())
        );
        for hostile in [
            "upstream://c/x",
            "upstream://%61/x",
            "upstream://A/x",
            "upstream://a",
            "upstream://a/",
            "upstream:/a/x",
            "UPSTREAM://a/x",
            "upstream://../a/x",
            "upstream://a\u{0}/x",
            "upstream://a/../b/x",
            "upstream://a/%2e%2E/b/x",
            "upstream://a/x/./y",
            "upstream://a/.%2e",
            "skill://c/pdf/SKILL.md",
            "skill://a",
            "skill://a/",
            "skill://a/../b/pdf/SKILL.md",
            "skill://a/%2E%2e/b/x",
            "skill://A/pdf/SKILL.md",
            "skill:///a/pdf/SKILL.md",
            "file:///etc/passwd",
            "",
        ] {
            assert!(names.route_uri(hostile).is_err(), "{hostile:?} was routed");
        }
        let long = format!("upstream://a/{}", "x".repeat(MAX_UPSTREAM_URI_BYTES + 1));
        assert!(names.route_uri(&long).is_err());
    }

    #[test]
    fn a_uri_that_could_not_route_back_is_not_shown() {
        let names = two();
        assert_eq!(names.uri("a", "file:///x/../y"), None);
        assert_eq!(names.uri("a", ""), None);
        assert_eq!(
            names.uri("a", &"x".repeat(MAX_UPSTREAM_URI_BYTES + 1)),
            None
        );
    }

    #[test]
    fn prompts_route_by_exact_server_prefix() {
        let names = UpstreamNames::new(["a", "a_", "b"]);
        assert_eq!(names.route_prompt("b__p").unwrap(), ("b", "p"));
        // `a___p`: server `a` with `_p`, or `a_` with `p`: ambiguous, refused.
        assert!(names.route_prompt("a___p").is_err());
        for hostile in ["c__p", "b__", "bp", "__p", "b_p", ""] {
            assert!(
                names.route_prompt(hostile).is_err(),
                "{hostile:?} was routed"
            );
        }
    }

    #[test]
    fn one_upstream_passes_names_through() {
        let names = UpstreamNames::new(["kit"]);
        assert_eq!(
            names.route_uri("test://static-text").unwrap(),
            ("kit", "test://static-text".into())
        );
        assert_eq!(names.route_prompt("p").unwrap(), ("kit", "p"));
        assert!(names.route_uri("test://a\nb").is_err());
    }
}
