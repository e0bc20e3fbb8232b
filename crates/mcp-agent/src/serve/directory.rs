//! A run's directory reads served to a gateway's client (`resources/directory/read`): the URI
//! routed by `mcp_serve::UpstreamNames` to the one upstream it names (dot segments and other
//! servers' prefixes refused there), read through the run's governed
//! `McpRunner::read_directory`, each child's URI named back as the client knows it.

use mcp_client::FeatureError;
use mcp_serve::not_a_directory;
use rmcp::ErrorData;
use rmcp::model::Resource;

use super::RunTools;

impl RunTools {
    /// The children of the directory the client knows as `uri`; -32602 for a URI that is no
    /// directory (the upstream's own answer, or one that offers no directory reads).
    pub(super) async fn served_directory(&self, uri: &str) -> Result<Vec<Resource>, ErrorData> {
        let (server, own) = self.upstream.route_uri(uri)?;
        let children = match self.runner.read_directory(server, &own).await {
            Ok(children) => children,
            Err(FeatureError::NotOffered { .. }) => return Err(not_a_directory(uri)),
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
}
