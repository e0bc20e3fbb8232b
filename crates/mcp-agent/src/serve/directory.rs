//! A run's directory reads served to a gateway's client (`resources/directory/read`): the URI
//! routed by `mcp_serve::UpstreamNames` to the one upstream it names (dot segments and other
//! servers' prefixes refused there), read through the run's governed
//! `McpRunner::read_directory`, each child's URI named back as the client knows it. An
//! upstream that serves skills without `directoryRead` has its skills' folders listed from
//! their manifests, which the gateway holds anyway, so what the gateway declares holds for
//! every upstream.

use std::collections::BTreeMap;

use mcp_client::FeatureError;
use mcp_serve::not_a_directory;
use rmcp::ErrorData;
use rmcp::model::{DIRECTORY_MIME_TYPE, Resource};

use super::RunTools;

impl RunTools {
    /// The children of the directory the client knows as `uri`; -32602 for a URI that is no
    /// directory.
    pub(super) async fn served_directory(&self, uri: &str) -> Result<Vec<Resource>, ErrorData> {
        let (server, own) = self.upstream.route_uri(uri)?;
        let children = match self.runner.read_directory(server, &own).await {
            Ok(children) => children,
            Err(FeatureError::NotOffered { .. }) => self
                .manifest_directory(server, &own)
                .await?
                .ok_or_else(|| not_a_directory(uri))?,
            // An upstream's "not found" is -32602 here, whatever the client's revision.
            Err(e) => return Err(self.answer(&e, None)),
        };
        // A child whose URI could not be routed back is left out.
        Ok(children
            .into_iter()
            .filter_map(|mut child| {
                child.uri = self.upstream.uri(server, &child.uri)?;
                Some(child)
            })
            .collect())
    }

    /// The children of `own` of `server` as the manifest of the skill holding it lists them
    /// (a skill the run's `[policy]` allows, not refused, not dynamic); `None` when no such
    /// skill lists a file below it.
    async fn manifest_directory(
        &self,
        server: &str,
        own: &str,
    ) -> Result<Option<Vec<Resource>>, ErrorData> {
        let skills = self
            .runner
            .list_skills(server)
            .await
            .map_err(|e| self.answer(&e, None))?;
        let prefix = format!("{}/", own.trim_end_matches('/'));
        let Some(skill) = skills
            .iter()
            .filter(|s| s.refused.is_none() && prefix.starts_with(s.directory()))
            .max_by_key(|s| s.directory().len())
        else {
            return Ok(None);
        };
        let mut children = BTreeMap::new();
        for file in skill.files.listed() {
            let Some(rest) = file.uri.strip_prefix(&prefix) else {
                continue;
            };
            let (name, directory) = match rest.split_once('/') {
                Some((name, _)) => (name, true),
                None => (rest, false),
            };
            if name.is_empty() {
                continue;
            }
            let child = Resource::new(format!("{prefix}{name}"), name);
            let child = if directory {
                child.with_mime_type(DIRECTORY_MIME_TYPE)
            } else {
                child
            };
            children.entry(child.uri.clone()).or_insert(child);
        }
        Ok((!children.is_empty()).then(|| children.into_values().collect()))
    }
}
