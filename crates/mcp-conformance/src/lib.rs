//! The client side of the official MCP conformance suite (`@modelcontextprotocol/conformance`).
//!
//! For each client scenario the suite starts a mock server and runs
//! `mcp-conformance-client <server URL>` with `MCP_CONFORMANCE_SCENARIO` (and, for auth
//! scenarios, `MCP_CONFORMANCE_CONTEXT`) set, then judges what the client did on the wire.
//! This crate is that client, built on the workspace's own pieces: the server spec comes from
//! `mcp-config`'s parser ([`server_spec`]), the transport from a [`Connector`] (the binary uses
//! `mcp-transport-http`'s `HttpConnector`), and the protocol from rmcp, as `mcp-client` does.
//! It declares the same client capabilities as `mcp-client` (none), so the suite measures
//! what the library offers, not a special build.
//!
//! `cargo xtask conformance` runs every client scenario against it and compares the outcomes
//! with `peers/conformance-baseline.txt`.
//!
//! ```
//! use mcp_conformance::{Step, plan};
//!
//! assert!(matches!(plan("tools_call")[1], Step::CallTool { name: "add_numbers", .. }));
//! ```

mod error;

use std::time::Duration;

use mcp_config::{ServerSpec, SpecOrigin};
use mcp_connector::{Connection, Connector};

pub use error::Error;
use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, JsonObject,
    ProtocolVersion,
};
use serde_json::{Value, json};
use url::Url;

/// The environment variable naming the scenario.
pub const SCENARIO_ENV: &str = "MCP_CONFORMANCE_SCENARIO";
/// The environment variable with the scenario's JSON context (credentials for auth scenarios).
pub const CONTEXT_ENV: &str = "MCP_CONFORMANCE_CONTEXT";

/// One thing the client does after the handshake.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Step {
    /// `tools/list`, every page.
    ListTools,
    /// `tools/call`; a result with `isError: true` is a failure.
    CallTool {
        /// The tool.
        name: &'static str,
        /// Its arguments.
        arguments: JsonObject,
    },
}

/// What the client does for `scenario`, after connecting and initialising.
///
/// Scenarios not named here (the auth ones) check the connection itself, so listing the tools
/// over an authenticated session is all they need.
pub fn plan(scenario: &str) -> Vec<Step> {
    let call = |name, arguments: Value| Step::CallTool {
        name,
        arguments: arguments.as_object().cloned().unwrap_or_default(),
    };
    match scenario {
        "tools_call" => vec![
            Step::ListTools,
            call("add_numbers", json!({"a": 5, "b": 3})),
        ],
        "sse-retry" => vec![Step::ListTools, call("test_reconnection", json!({}))],
        "elicitation-sep1034-client-defaults" => vec![
            Step::ListTools,
            call("test_client_elicitation_defaults", json!({})),
        ],
        _ => vec![Step::ListTools],
    }
}

/// The spec of the suite's mock server at `url`, through `mcp-config`'s own parser, with the
/// credentials of `context` as OAuth2 client credentials: `client_id` and `client_secret`, or
/// `client_id` and `private_key_pem` (`private_key_jwt`, the key where the secret goes).
pub fn server_spec(url: &Url, context: Option<&Value>) -> Result<ServerSpec, Error> {
    let mut spec = json!({"name": "conformance", "url": url.as_str()});
    if let Some((id, secret)) = context.and_then(|c| c.get("client_id").zip(c.get("client_secret")))
    {
        spec["auth"] = json!({"oauth_client_credentials": {
            "client_id": id, "client_secret": secret,
        }});
    } else if let Some((id, key)) =
        context.and_then(|c| c.get("client_id").zip(c.get("private_key_pem")))
    {
        spec["auth"] = json!({"oauth_client_credentials": {
            "client_id": id, "client_secret": key,
            "token_endpoint_auth_method": "private_key_jwt",
        }});
    }
    ServerSpec::from_json(&spec, SpecOrigin::Operator).map_err(|e| Error::Config(Box::new(e)))
}

/// The client's side of the handshake: identity and (no) capabilities, as `mcp-client`.
///
/// The requested protocol version is the newest one that still has an `initialize`
/// handshake (`2025-11-25`), not rmcp's default `LATEST` (`2026-07-28`, which replaced the
/// handshake with per-request metadata): the suite's `initialize` scenario fails a client
/// that asks for a version it does not know.
#[derive(Debug, Clone, Copy, Default)]
struct Handler;

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mcp-agent-conformance-client", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// Connects to `spec` through `connector`, initialises, runs `steps`, and closes the session
/// (HTTP `DELETE`). Each request is bounded by `spec.call_timeout`. Progress goes to `log`.
pub async fn run(
    connector: &dyn Connector,
    spec: &ServerSpec,
    steps: &[Step],
    log: &mut dyn FnMut(String),
) -> Result<(), Error> {
    let limit = spec.call_timeout;
    let bounded = |what: String| move |_| Error::Timeout { what, after: limit };
    let Connection { transport, handle } = connector.connect(spec).await?;
    let service = tokio::time::timeout(limit, rmcp::serve_client(Handler, transport))
        .await
        .map_err(bounded("initialize".into()))?
        .map_err(|e| Error::Initialize(Box::new(e)))?;
    if let Some(info) = service.peer().peer_info() {
        log(format!(
            "initialized: server {:?}, protocol {}",
            info.server_info.as_ref().map(|i| &i.name),
            info.protocol_version
        ));
    }
    let result = run_steps(service.peer(), steps, limit, log).await;
    let _ = tokio::time::timeout(limit, service.cancel()).await;
    handle.shutdown(Duration::from_secs(1)).await;
    result
}

async fn run_steps(
    peer: &rmcp::service::Peer<rmcp::RoleClient>,
    steps: &[Step],
    limit: Duration,
    log: &mut dyn FnMut(String),
) -> Result<(), Error> {
    for step in steps {
        match step {
            Step::ListTools => {
                let tools = tokio::time::timeout(limit, peer.list_all_tools())
                    .await
                    .map_err(|_| Error::Timeout {
                        what: "tools/list".into(),
                        after: limit,
                    })?
                    .map_err(|e| Error::Request {
                        method: "tools/list".into(),
                        source: Box::new(e),
                    })?;
                let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
                log(format!("tools/list: {names:?}"));
            }
            Step::CallTool { name, arguments } => {
                let params =
                    CallToolRequestParams::new(name.to_string()).with_arguments(arguments.clone());
                let result = tokio::time::timeout(limit, peer.call_tool(params))
                    .await
                    .map_err(|_| Error::Timeout {
                        what: format!("tools/call {name}"),
                        after: limit,
                    })?
                    .map_err(|e| Error::Request {
                        method: format!("tools/call {name}"),
                        source: Box::new(e),
                    })?;
                let content = serde_json::to_string(&result.content).unwrap_or_default();
                if result.is_error == Some(true) {
                    return Err(Error::ToolError {
                        tool: name.to_string(),
                        content,
                    });
                }
                log(format!("tools/call {name}: {content}"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_scenarios_list_tools() {
        assert_eq!(plan("auth/metadata-default"), vec![Step::ListTools]);
        assert_eq!(plan("initialize"), vec![Step::ListTools]);
    }

    #[test]
    fn context_credentials_become_oauth_client_credentials() {
        let url: Url = "http://localhost:1234/mcp".parse().unwrap();
        let spec = server_spec(
            &url,
            Some(&json!({"client_id": "id-1", "client_secret": "s3cret"})),
        )
        .unwrap();
        let oauth = spec.auth.oauth_client_credentials.as_ref().unwrap();
        assert_eq!(oauth.client_id, "id-1");
        assert!(!format!("{spec:?}").contains("s3cret"));
        let plain = server_spec(&url, None).unwrap();
        assert!(plain.auth.is_empty());
    }
}
