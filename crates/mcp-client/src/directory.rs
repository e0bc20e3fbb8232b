//! Directory reads (`resources/directory/read`, the skills extension's `directoryRead`): a
//! directory resource's direct children, every page within the session's
//! [`ListLimits`](crate::ListLimits), each child cleaned like a listed resource and kept only
//! when it lies directly in the directory; governed on [`McpRunner`] like a skill file's read
//! (a skill's directory: its skill's `[policy]` `skill` rules) or a resource's (any other).

use std::time::Instant;

use agent_core::EventKind;
use mcp_catalog::sanitize::{Lines, clean};
use rmcp::model::{ReadResourceDirectoryRequestParams, Resource};

use crate::resources::is_clean_uri;
use crate::{FeatureError, MAX_URI_BYTES, McpRunner, Session, SessionView, SkillEntry};

/// The method's name, as errors and events name it.
const METHOD: &str = "resources/directory/read";

/// The JSON-RPC code of a method the server does not know.
const METHOD_NOT_FOUND: i32 = -32601;

impl Session {
    /// True when the server declared the skills extension with `directoryRead: true`.
    ///
    /// ```no_run
    /// # fn show(session: &mcp_client::Session) {
    /// if session.offers_directory_read() {
    ///     println!("{} lists its skills' directories", session.name());
    /// }
    /// # }
    /// ```
    pub fn offers_directory_read(&self) -> bool {
        self.peer()
            .peer_info()
            .is_some_and(|info| info.capabilities.supports_directory_read())
    }

    /// The direct children of the directory resource at `uri` (`resources/directory/read`,
    /// every page) within the session's [`ListLimits`](crate::ListLimits) and the call
    /// timeout; subdirectories carry the MIME type `inode/directory`. Each child is cleaned
    /// like a listed resource ([`list_resources`](Self::list_resources)); one whose URI is not
    /// clean or does not lie directly in the directory is left out. A server that did not
    /// declare `directoryRead` (or answers -32601) is [`FeatureError::NotOffered`]; a URI that
    /// is not clean ([`MAX_URI_BYTES`], a `.`/`..` segment) is [`FeatureError::InvalidUri`],
    /// nothing sent; a URI the server holds no directory at is its -32602,
    /// [`FeatureError::Rpc`].
    ///
    /// ```no_run
    /// # async fn show(session: &mcp_client::Session) -> Result<(), mcp_client::FeatureError> {
    /// for child in session.read_directory("skill://pdf-processing").await? {
    ///     println!("{} {}", child.uri, child.mime_type.unwrap_or_default());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn read_directory(&self, uri: &str) -> Result<Vec<Resource>, FeatureError> {
        if !self.offers_directory_read() {
            return Err(self.not_offered());
        }
        if !is_clean_uri(uri) {
            return Err(FeatureError::InvalidUri {
                server: self.name().to_owned(),
                limit: MAX_URI_BYTES,
            });
        }
        let peer = self.peer().clone();
        let directory = uri.to_owned();
        let listed = self
            .feature_listing(METHOD, move |params| {
                let peer = peer.clone();
                let mut request = ReadResourceDirectoryRequestParams::new(directory.clone());
                request.cursor = params.and_then(|p| p.cursor);
                async move {
                    let page = peer.read_resource_directory(request).await?;
                    Ok((page.resources, page.next_cursor))
                }
            })
            .await
            .map_err(|e| match e {
                FeatureError::Rpc { code, .. } if code == METHOD_NOT_FOUND => self.not_offered(),
                other => other,
            })?;
        Ok(listed
            .into_iter()
            .filter(|child| is_child(uri, &child.uri))
            .filter_map(|child| self.cleaned_resource(child))
            .collect())
    }

    fn not_offered(&self) -> FeatureError {
        FeatureError::NotOffered {
            server: self.name().to_owned(),
            method: METHOD,
        }
    }
}

/// True when `child` names an entry directly in the directory `directory`: below it by one
/// non-empty segment (a trailing `/` allowed), without a query or fragment.
fn is_child(directory: &str, child: &str) -> bool {
    let prefix = directory.trim_end_matches('/');
    child
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('/'))
        .map(|name| name.strip_suffix('/').unwrap_or(name))
        .is_some_and(|name| !name.is_empty() && !name.contains(['/', '?', '#']))
}

impl SessionView {
    /// True when the server declared `directoryRead` (see [`Session::offers_directory_read`]).
    ///
    /// ```no_run
    /// # fn show(runner: &mcp_client::McpRunner) {
    /// let readable = runner.sessions().iter().filter(|s| s.offers_directory_read()).count();
    /// # }
    /// ```
    pub fn offers_directory_read(&self) -> bool {
        self.0.offers_directory_read()
    }
}

impl McpRunner {
    /// The children of the directory at `uri` of `server` ([`Session::read_directory`]), if
    /// the run's `[policy]` allows it (else [`FeatureError::Denied`], nothing sent): a
    /// directory within one of the server's skills is decided by that skill's `skill` rules,
    /// any other by the `resource` rules. Children the `resource` rules refuse (outside a
    /// skill), and those of skills the `skill` rules refuse, are left out. Emits a
    /// `skill_read` (within a skill) or `resource_read` event either way.
    ///
    /// ```no_run
    /// # async fn show(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::FeatureError> {
    /// let children = runner.read_directory("docs", "skill://pdf-processing").await?;
    /// let subdirectories = children.iter().filter(|c| c.is_directory()).count();
    /// # Ok(()) }
    /// ```
    pub async fn read_directory(
        &self,
        server: &str,
        uri: &str,
    ) -> Result<Vec<Resource>, FeatureError> {
        let session = self.session_of(server)?;
        let started = Instant::now();
        let listed = if session.offers_skills() && session.offers_directory_read() {
            session.list_skills().await?
        } else {
            Vec::new()
        };
        // The innermost skill whose directory holds this one.
        let inside = format!("{}/", uri.trim_end_matches('/'));
        let owner = listed
            .iter()
            .filter(|skill| inside.starts_with(skill.directory()))
            .max_by_key(|skill| skill.directory().len());
        let decided = match owner {
            Some(skill) => self.skill_allowed(session, &skill.name),
            None => self.resource_allowed(session, uri),
        };
        let outcome = match decided {
            Ok(()) => session.read_directory(uri).await.map(|children| {
                let refused: Vec<&SkillEntry> = listed
                    .iter()
                    .filter(|s| self.skill_allowed(session, &s.name).is_err())
                    .collect();
                children
                    .into_iter()
                    .filter(|child| !refused.iter().any(|skill| hides(skill, &child.uri)))
                    .filter(|child| {
                        owner.is_some() || self.resource_allowed(session, &child.uri).is_ok()
                    })
                    .collect()
            }),
            Err(denied) => Err(denied),
        };
        let kind = if owner.is_some() {
            EventKind::SkillRead
        } else {
            EventKind::ResourceRead
        };
        self.tell(
            kind,
            session,
            uri,
            started,
            &outcome,
            |children: &Vec<Resource>| children.iter().map(|c| c.uri.len()).sum(),
        );
        outcome
    }

    fn resource_allowed(&self, session: &Session, uri: &str) -> Result<(), FeatureError> {
        let identity = session.identity().name.as_deref();
        self.governed()
            .identity_rules()
            .allows_resource(identity, uri)
            .map_err(|denial| FeatureError::Denied {
                server: session.name().to_owned(),
                what: "resource",
                target: clean(uri, MAX_URI_BYTES, Lines::Single).into_owned(),
                reason: denial.to_string(),
            })
    }
}

/// True when `uri` is `skill`'s directory or lies within it.
fn hides(skill: &SkillEntry, uri: &str) -> bool {
    skill.owns(uri) || format!("{}/", uri.trim_end_matches('/')).starts_with(skill.directory())
}

#[cfg(test)]
mod tests {
    use super::is_child;

    #[test]
    fn only_direct_children_are_kept() {
        let dir = "skill://pdf";
        for child in [
            "skill://pdf/SKILL.md",
            "skill://pdf/references",
            "skill://pdf/refs/",
        ] {
            assert!(is_child(dir, child), "{child}");
            assert!(
                is_child("skill://pdf/", child),
                "{child} of a `/` directory"
            );
        }
        for other in [
            "skill://pdf",
            "skill://pdf/",
            "skill://pdf/refs/FORMS.md",
            "skill://pdfx/SKILL.md",
            "skill://other/SKILL.md",
            "file:///etc/passwd",
            "skill://pdf/a?b",
            "skill://pdf/a#b",
        ] {
            assert!(!is_child(dir, other), "{other}");
        }
    }
}
