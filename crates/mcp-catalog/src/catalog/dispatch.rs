//! Resolving a model's call to the tool it will run, and running it — only as the wrapped side
//! of a governed layer ([`agent_core::CallResolver`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use agent_core::{CallResolver, JsonObject, Permit, ResolvedCall, ToolCall, ToolError, ToolOutput};
use serde_json::Value;

use crate::SessionError;
use crate::normalize_result;
use crate::suggest::suggest;
use crate::validate;

use super::{CALL_TOOL, Catalog, CatalogTool, READ_TOOL, ResolvedRead, SEARCH_TOOL, SearchRequest};

/// What a model's call resolves to, before it runs: the [`CallResolver::Target`] of the
/// catalog, which a governed layer hands back to run exactly the tool it approved.
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
    /// `mcp_read`: a resource, prompt or skill file of a server.
    Read(ResolvedRead),
}

/// An MCP tool call resolved to the real tool.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ResolvedTool {
    /// The tool.
    pub tool: Arc<CatalogTool>,
    /// Its server's self-declared name, when known.
    pub server_identity: Option<String>,
    /// The argument object, exactly as the model gave it ([`Catalog::resolve`]; in a target the
    /// governed layer holds, empty: they travel in the resolved call, and come back with the
    /// call when it runs). A call runs on its call's arguments, never on these: what
    /// [`CallResolver::dispatch_resolved`] is given must carry the resolved call's.
    pub arguments: JsonObject,
    /// True when the model called it through `mcp_call_tool`.
    pub via_call_tool: bool,
    /// The model's call id.
    pub call_id: String,
}

impl Catalog {
    /// Resolves a model's call to what it will run, without running it: the lazy surface's
    /// own tools, a native tool, or the real MCP tool (also behind `mcp_call_tool`).
    ///
    /// Fails for an unknown tool (with up to three close matches among the tools the model may
    /// see) and for a malformed `mcp_call_tool` input. A tool hidden by the identity rules
    /// resolves, so that the governed layer denies it naming the rule. Arguments are validated
    /// when the call runs.
    pub fn resolve(&self, call: &ToolCall) -> Result<CallTarget, ToolError> {
        let mut target = self.locate(call)?;
        if let CallTarget::Mcp(mcp) = &mut target {
            mcp.arguments = if mcp.via_call_tool {
                take_call_tool_arguments(&mut call.arguments.clone())
            } else {
                call.arguments.clone()
            };
        }
        Ok(target)
    }

    /// What `call` resolves to, an MCP tool's target without its arguments (still in the call).
    fn locate(&self, call: &ToolCall) -> Result<CallTarget, ToolError> {
        match call.name.as_str() {
            SEARCH_TOOL => return Ok(CallTarget::Search),
            READ_TOOL if self.offers_reads() => {
                return self.resolve_read(&call.arguments).map(CallTarget::Read);
            }
            CALL_TOOL => {
                let name = call_tool_name(&call.arguments)?;
                check_call_tool_arguments(&call.arguments)?;
                return self.resolve_mcp(name, true, &call.id).map(CallTarget::Mcp);
            }
            _ => {}
        }
        if self.natives.iter().any(|n| n.name == call.name) {
            return Ok(CallTarget::Native {
                name: call.name.clone(),
            });
        }
        self.resolve_mcp(&call.name, false, &call.id)
            .map(CallTarget::Mcp)
    }

    fn resolve_mcp(
        &self,
        name: &str,
        via_call_tool: bool,
        call_id: &str,
    ) -> Result<ResolvedTool, ToolError> {
        let state = self.read();
        let Some(tool) = state.find(name) else {
            let mut candidates: Vec<&str> = state.shown().map(|t| t.model_name()).collect();
            if !via_call_tool {
                candidates.extend(self.natives.iter().map(|n| n.name.as_str()));
                candidates.extend([SEARCH_TOOL, CALL_TOOL]);
                if state.offered.any() {
                    candidates.push(READ_TOOL);
                }
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
            arguments: JsonObject::new(),
            via_call_tool,
            call_id: call_id.to_owned(),
        })
    }

    /// Calls a resolved MCP tool: validates the arguments against its input schema, sends them
    /// unchanged through its server's session, and normalises the result. Reached only through
    /// [`CallResolver::dispatch_resolved`], i.e. from a governed layer.
    pub(crate) async fn call(&self, resolved: ResolvedTool) -> Result<ToolOutput, ToolError> {
        let ResolvedTool {
            tool, arguments, ..
        } = resolved;
        let arguments = match tool.validator() {
            Ok(validator) => match validate::check(validator, arguments) {
                (arguments, Ok(())) => arguments,
                (_, Err(message)) => {
                    return Err(ToolError::InvalidArguments {
                        server: Some(tool.server.clone()),
                        tool: tool.id.clone(),
                        message,
                    });
                }
            },
            // Fail closed: arguments that cannot be checked are not sent.
            Err(reason) => {
                return Err(ToolError::Configuration {
                    server: Some(tool.server.clone()),
                    tool: tool.id.clone(),
                    message: format!(
                        "the server's input schema does not compile ({reason}), so the arguments cannot be checked; the call is refused"
                    ),
                });
            }
        };
        // One look at the state: the session, and whether its resource links get hints.
        let (session, hints) = {
            let state = self.read();
            match state.servers.get(&tool.server) {
                Some(server) if state.tools.contains(tool.id.as_str()) => (
                    Arc::clone(&server.session),
                    state.offered.reads(&tool.server).resources,
                ),
                _ => {
                    return Err(ToolError::unknown_tool(tool.id.clone(), Vec::new()));
                }
            }
        };
        let result = session
            .call_tool(&tool.remote_name, arguments)
            .await
            .map_err(|e| session_error(&tool.server, &tool.id, e))?;
        let output = normalize_result(&tool.server, &tool.id, result)?;
        Ok(if hints {
            Self::with_link_hints(&tool.server, output)
        } else {
            output
        })
    }

    /// True when some server of the catalog offers something to read (`mcp_read` is shown).
    pub fn offers_reads(&self) -> bool {
        self.read().offered.any()
    }
}

fn invalid_call_tool_input(message: String) -> ToolError {
    ToolError::InvalidArguments {
        server: None,
        tool: CALL_TOOL.into(),
        message,
    }
}

/// `mcp_call_tool`'s `tool_name`: a non-empty string.
fn call_tool_name(input: &JsonObject) -> Result<&str, ToolError> {
    match input.get("tool_name") {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) | None | Some(Value::Null) => Err(invalid_call_tool_input(
            "`(root)`: \"tool_name\" is a required property".into(),
        )),
        Some(other) => Err(invalid_call_tool_input(format!(
            "`/tool_name`: {other} is not a string"
        ))),
    }
}

/// Checks `mcp_call_tool`'s `arguments`: an object (absent or `null` means `{}`), or a string
/// holding a JSON object, as some models send one.
fn check_call_tool_arguments(input: &JsonObject) -> Result<(), ToolError> {
    match input.get("arguments") {
        None | Some(Value::Null | Value::Object(_)) => Ok(()),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(_)) => Ok(()),
            _ => Err(invalid_call_tool_input(
                "`/arguments`: must be an object of the tool's arguments".into(),
            )),
        },
        Some(other) => Err(invalid_call_tool_input(format!(
            "`/arguments`: {other} is not an object of the tool's arguments"
        ))),
    }
}

/// Moves the inner `arguments` out of `mcp_call_tool`'s input (checked by
/// [`check_call_tool_arguments`] when the call resolved).
fn take_call_tool_arguments(input: &mut JsonObject) -> JsonObject {
    match input.remove("arguments") {
        Some(Value::Object(o)) => o,
        Some(Value::String(s)) => match serde_json::from_str::<Value>(&s) {
            Ok(Value::Object(o)) => o,
            _ => JsonObject::new(),
        },
        _ => JsonObject::new(),
    }
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

/// The catalog as the wrapped side of a [`Governed`](agent_core::Governed) layer, which is the
/// only way its calls run: `mcp_search_tools` resolves to a meta call, a native tool to a
/// native call with its descriptor's hints, and an MCP tool — first-class (eager, pinned,
/// promoted) or through `mcp_call_tool` — to the real tool: action ref `server__tool`, the
/// server key, the remote name, the inner arguments, the server's identity
/// (`serverInfo.name`) and the tool's hints.
///
/// ```
/// use std::sync::Arc;
/// use agent_core::{CallKind, CallResolver, GovernedLayer, IdentityRules, Rule, ToolCall,
///     ToolDispatcher};
/// use mcp_catalog::{Catalog, CatalogConfig, ServerTools};
/// use mcp_catalog::testing::FakeServer;
/// use serde_json::json;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let fake = Arc::new(FakeServer::everything());
/// let catalog = Catalog::new(CatalogConfig::default());
/// catalog.add_server(ServerTools::new("demo", fake.clone(), fake.tools()).with_identity("acme/demo")).unwrap();
///
/// let args = json!({"tool_name": "demo__echo", "arguments": {"text": "hi"}});
/// let call = ToolCall::new("1", "mcp_call_tool", args.as_object().unwrap().clone());
/// let (resolved, _target) = CallResolver::resolve(&catalog, &mut call.clone()).unwrap();
/// assert_eq!(resolved.kind, CallKind::External);
/// assert_eq!(resolved.action_ref, "demo__echo");
/// assert_eq!(resolved.server_identity.as_deref(), Some("acme/demo"));
/// assert_eq!(resolved.arguments["text"], "hi");
///
/// // Governed: the deny rule names the real tool behind `mcp_call_tool`.
/// let governed = GovernedLayer::new()
///     .identity_rules(IdentityRules::default().deny(Rule::new("acme/*", "echo")))
///     .layer(catalog);
/// let err = governed.dispatch(call).await.unwrap_err();
/// assert!(err.to_string().contains("policy.deny[0]"), "{err}");
/// # });
/// ```
impl CallResolver for Catalog {
    type Target = CallTarget;

    fn resolve(&self, call: &mut ToolCall) -> Result<(ResolvedCall, CallTarget), ToolError> {
        let target = self.locate(call)?;
        // Resolved: the real tool's arguments move to what the layers decide on and record,
        // and come back to the dispatch with the call (no copy).
        let arguments = match &target {
            CallTarget::Mcp(mcp) if mcp.via_call_tool => {
                take_call_tool_arguments(&mut call.arguments)
            }
            _ => std::mem::take(&mut call.arguments),
        };
        let resolved = match &target {
            CallTarget::Search => ResolvedCall::meta(SEARCH_TOOL, arguments),
            CallTarget::Native { name } => {
                let annotations = self
                    .natives
                    .iter()
                    .find(|n| n.name == *name)
                    .map(|n| n.annotations.clone())
                    .unwrap_or_default();
                ResolvedCall::native(name.clone(), arguments).with_annotations(annotations)
            }
            CallTarget::Read(read) => read.resolved_call(arguments),
            CallTarget::Mcp(mcp) => {
                let tool = &mcp.tool;
                let resolved = ResolvedCall::external(
                    tool.id.clone(),
                    tool.server.clone(),
                    tool.remote_name.clone(),
                    arguments,
                )
                .with_annotations(tool.annotations().clone())
                .with_labels(tool.labels().clone());
                match &mcp.server_identity {
                    Some(identity) => resolved.with_identity(identity.clone()),
                    None => resolved,
                }
            }
        };
        Ok((resolved, target))
    }

    /// Runs a call [`resolve`](CallResolver::resolve) resolved, as it is: no rule, policy or
    /// approval is checked here. Only the governed layer can call it (it alone makes the
    /// [`Permit`]), once it agreed: an application wraps the catalog in a
    /// [`GovernedLayer`](agent_core::GovernedLayer).
    ///
    /// Each kind of target boxes only its own future: an MCP tool's call does not carry the
    /// room a search or a read would need.
    fn dispatch_resolved<'life0, 'async_trait>(
        &'life0 self,
        _permit: Permit,
        call: ToolCall,
        target: CallTarget,
    ) -> Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        match target {
            CallTarget::Mcp(mut resolved) => {
                resolved.arguments = call.arguments;
                Box::pin(self.call(resolved))
            }
            CallTarget::Search => Box::pin(async move {
                let request =
                    SearchRequest::from_arguments(&call.arguments).map_err(|message| {
                        ToolError::InvalidArguments {
                            server: None,
                            tool: SEARCH_TOOL.into(),
                            message,
                        }
                    })?;
                let response = self.search_ranked(&request).await?;
                Ok(ToolOutput::structured(response.to_json()))
            }),
            CallTarget::Native { .. } => match &self.native_dispatcher {
                Some(native) => native.dispatch(call),
                None => Box::pin(std::future::ready(Err(ToolError::unknown_tool(
                    call.name,
                    Vec::new(),
                )))),
            },
            CallTarget::Read(read) => Box::pin(self.read_feature(read)),
        }
    }
}
