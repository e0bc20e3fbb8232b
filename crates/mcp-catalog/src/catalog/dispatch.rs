//! Resolving a model's call to the tool it will run, and running it.

use std::sync::Arc;

use agent_core::{
    ApprovalRequest, CallInfo, JsonObject, ToolCall, ToolDispatcher, ToolError, ToolOutput,
};
use async_trait::async_trait;
use serde_json::Value;

use crate::normalize_result;
use crate::session::SessionError;
use crate::suggest::suggest;
use crate::validate;

use super::{CALL_TOOL, Catalog, CatalogTool, SEARCH_TOOL, SearchRequest};

/// What a model's call resolves to, before it runs: what a policy or approval layer needs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CallTarget {
    /// `mcp_search_tools`: reads the catalog, calls no server.
    Search,
    /// A native tool, run by the native dispatcher.
    Native {
        /// Its name.
        name: String,
    },
    /// An MCP tool, called first-class or through `mcp_call_tool`.
    Mcp(ResolvedTool),
}

/// An MCP tool call resolved to the real tool.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ResolvedTool {
    /// The tool.
    pub tool: Arc<CatalogTool>,
    /// Its server's self-declared name, when known.
    pub server_identity: Option<String>,
    /// The argument object, exactly as the model gave it.
    pub arguments: JsonObject,
    /// True when the model called it through `mcp_call_tool`.
    pub via_call_tool: bool,
    /// The model's call id.
    pub call_id: String,
}

impl ResolvedTool {
    /// What [`agent_core::ToolPolicy`] sees: the real tool (`server__tool`), its server, identity,
    /// remote name, arguments and hints.
    pub fn call_info(&self) -> CallInfo<'_> {
        CallInfo::native(&self.tool.id, &self.arguments, self.tool.annotations()).with_server(
            &self.tool.server,
            self.server_identity.as_deref(),
            &self.tool.remote_name,
        )
    }

    /// An approval request naming the real tool: action ref `server__tool`, a prompt naming it
    /// and its server, metadata `mcp_tool_name` and `mcp_arguments` (SPEC F2).
    pub fn approval_request(&self) -> ApprovalRequest {
        let mut metadata = JsonObject::new();
        metadata.insert("mcp_tool_name".into(), self.tool.id.clone().into());
        metadata.insert("mcp_server".into(), self.tool.server.clone().into());
        metadata.insert(
            "mcp_arguments".into(),
            Value::Object(self.arguments.clone()),
        );
        ApprovalRequest::new(
            self.tool.id.clone(),
            format!(
                "Allow the tool `{}` of MCP server `{}` to run?",
                self.tool.remote_name, self.tool.server
            ),
        )
        .with_metadata(metadata)
    }
}

impl Catalog {
    /// Resolves a model's call to what it will run, without running it: the lazy surface's
    /// own tools, a native tool, or the real MCP tool (also behind `mcp_call_tool`).
    ///
    /// Fails for an unknown tool (with up to three close matches) and for a malformed
    /// `mcp_call_tool` input. Arguments are validated later, by [`Catalog::call`].
    pub fn resolve(&self, call: &ToolCall) -> Result<CallTarget, ToolError> {
        match call.name.as_str() {
            SEARCH_TOOL => return Ok(CallTarget::Search),
            CALL_TOOL => {
                let (name, arguments) = call_tool_input(&call.arguments)?;
                return self
                    .resolve_mcp(&name, arguments, true, &call.id)
                    .map(CallTarget::Mcp);
            }
            _ => {}
        }
        if self.natives.iter().any(|n| n.name == call.name) {
            return Ok(CallTarget::Native {
                name: call.name.clone(),
            });
        }
        self.resolve_mcp(&call.name, call.arguments.clone(), false, &call.id)
            .map(CallTarget::Mcp)
    }

    fn resolve_mcp(
        &self,
        name: &str,
        arguments: JsonObject,
        via_call_tool: bool,
        call_id: &str,
    ) -> Result<ResolvedTool, ToolError> {
        let state = self.read();
        let Some(tool) = state.find(name) else {
            let mut candidates: Vec<&str> = state.all().map(|t| t.model_name()).collect();
            if !via_call_tool {
                candidates.extend(self.natives.iter().map(|n| n.name.as_str()));
                candidates.extend([SEARCH_TOOL, CALL_TOOL]);
            }
            candidates.sort_unstable();
            return Err(ToolError::unknown_tool(name, suggest(name, candidates, 3)));
        };
        let server_identity = state
            .servers
            .get(&tool.server)
            .and_then(|s| s.identity.clone());
        Ok(ResolvedTool {
            tool: Arc::clone(tool),
            server_identity,
            arguments,
            via_call_tool,
            call_id: call_id.to_owned(),
        })
    }

    /// Calls a resolved MCP tool: validates the arguments against its input schema, sends them
    /// unchanged through its server's session, and normalises the result.
    pub async fn call(&self, resolved: ResolvedTool) -> Result<ToolOutput, ToolError> {
        let tool = &resolved.tool;
        match tool.validator() {
            Ok(validator) => {
                if let Err(message) = validate::check(validator, &resolved.arguments) {
                    return Err(ToolError::InvalidArguments {
                        server: Some(tool.server.clone()),
                        tool: tool.id.clone(),
                        message,
                    });
                }
            }
            Err(reason) => tracing::warn!(
                tool = %tool.id,
                %reason,
                "the input schema does not compile; calling without validation"
            ),
        }
        let session = {
            let state = self.read();
            match state.servers.get(&tool.server) {
                Some(server) if state.tools.contains(tool.id.as_str()) => {
                    Arc::clone(&server.session)
                }
                _ => {
                    return Err(ToolError::unknown_tool(tool.id.clone(), Vec::new()));
                }
            }
        };
        let result = session
            .call_tool(&tool.remote_name, resolved.arguments)
            .await
            .map_err(|e| session_error(&tool.server, &tool.id, e))?;
        normalize_result(&tool.server, &tool.id, result)
    }
}

/// Parses `mcp_call_tool`'s input: `tool_name` (a string) and `arguments` (an object; absent or
/// `null` means `{}`, and a string holding a JSON object is accepted, as some models send one).
fn call_tool_input(input: &JsonObject) -> Result<(String, JsonObject), ToolError> {
    let invalid = |message: String| ToolError::InvalidArguments {
        server: None,
        tool: CALL_TOOL.into(),
        message,
    };
    let name = match input.get("tool_name") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            return Err(invalid(
                "`(root)`: \"tool_name\" is a required property".into(),
            ));
        }
        Some(other) => return Err(invalid(format!("`/tool_name`: {other} is not a string"))),
    };
    let arguments = match input.get("arguments") {
        None | Some(Value::Null) => JsonObject::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(o)) => o,
            _ => {
                return Err(invalid(
                    "`/arguments`: must be an object of the tool's arguments".into(),
                ));
            }
        },
        Some(other) => {
            return Err(invalid(format!(
                "`/arguments`: {other} is not an object of the tool's arguments"
            )));
        }
    };
    Ok((name, arguments))
}

/// Maps a session failure to the error the model and the events see.
pub(crate) fn session_error(server: &str, tool: &str, error: SessionError) -> ToolError {
    let server = Some(server.to_owned());
    let tool = tool.to_owned();
    match error {
        SessionError::Rpc { code, message } => ToolError::Invocation {
            server,
            tool,
            message: format!("{message} (JSON-RPC error {code})"),
        },
        SessionError::Timeout { after } => ToolError::Timeout {
            server,
            tool,
            after,
        },
        other => ToolError::Transport {
            server,
            tool,
            source: Box::new(other),
        },
    }
}

#[async_trait]
impl ToolDispatcher for Catalog {
    /// Runs `mcp_search_tools`, `mcp_call_tool`, first-class MCP tools (eager, pinned,
    /// promoted — or any MCP tool called by its model-facing name) and native tools.
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        match self.resolve(&call)? {
            CallTarget::Search => {
                let request =
                    SearchRequest::from_arguments(&call.arguments).map_err(|message| {
                        ToolError::InvalidArguments {
                            server: None,
                            tool: SEARCH_TOOL.into(),
                            message,
                        }
                    })?;
                let response = self.search(&request)?;
                Ok(ToolOutput::structured(response.to_json()))
            }
            CallTarget::Native { .. } => match &self.native_dispatcher {
                Some(native) => native.dispatch(call).await,
                None => Err(ToolError::unknown_tool(call.name, Vec::new())),
            },
            CallTarget::Mcp(resolved) => self.call(resolved).await,
        }
    }
}
