//! The client side of the official MCP conformance suite (`@modelcontextprotocol/conformance`).
//!
//! For each client scenario the suite starts a mock server and runs
//! `mcp-conformance-client <server URL>` with `MCP_CONFORMANCE_SCENARIO` (and, for auth
//! scenarios, `MCP_CONFORMANCE_CONTEXT`) set, then judges what the client did on the wire.
//! This crate is that client, built on the workspace's own pieces: the server spec comes from
//! `mcp-config`'s parser ([`server_spec`]), the transport from a [`Connector`] (the binary uses
//! `mcp-transport-http`'s `HttpConnector`), the lifecycle (`server/discover`, else
//! `initialize`) from `mcp-client`'s [`lifecycle`](mcp_client::lifecycle) and the client side
//! from its [`SessionHandler`], so the suite measures what the library offers, not a special
//! build. Like an embedding runtime with a user who accepts, it answers elicitations with
//! [`AcceptElicitation`] (the library fills in the schema's defaults).
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
mod login;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use mcp_client::lifecycle::DEFAULT_DISCOVER_TIMEOUT;
use mcp_config::{ServerSpec, SpecOrigin};
use mcp_connector::{Connection, Connector};

pub use error::Error;
pub use login::HeadlessBrowser;
use mcp_client::{ElicitationHandler, SessionHandler};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ElicitRequestParams, ElicitResult, ElicitationAction,
    JsonObject, Tool,
};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};
use url::Url;

/// The environment variable naming the scenario.
pub const SCENARIO_ENV: &str = "MCP_CONFORMANCE_SCENARIO";
/// The environment variable with the scenario's JSON context (credentials for auth scenarios).
pub const CONTEXT_ENV: &str = "MCP_CONFORMANCE_CONTEXT";
/// The client ID metadata document (SEP-991) the suite's authorization servers expect as a
/// URL client id.
pub const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";
/// Logins a scenario may run: the first, one after an authorization server moved, and the
/// step-ups.
pub const MAX_LOGINS: u32 = 5;
/// Step-ups (new logins for more scope after a 403 `insufficient_scope`) a scenario may run.
pub const MAX_STEP_UPS: u32 = 3;

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
    /// `tools/call` of every listed tool in the listed order, each with a value for each
    /// required parameter (its result is logged, not judged).
    CallEveryTool,
    /// The calls the scenario's context names (`toolCalls`: `name` and `arguments`).
    ContextCalls,
    /// `tools/call` of `echo` with `{"schema": <focal's inputSchema as listed>}`.
    EchoSchema {
        /// The tool whose schema is sent back.
        focal: &'static str,
        /// The tool that receives it.
        echo: &'static str,
    },
    /// `skills/list`, every page, through `mcp-client`'s skills code: no file of any skill is
    /// read (see [`run_skills`]).
    ListSkills,
    /// Loads each listed skill (its `SKILL.md` read, checked against the manifest and the
    /// entry's frontmatter), then reads each of its other files (each checked); the first
    /// refusal ends the run with an error (see [`run_skills`]).
    LoadSkills,
}

/// What the client does for `scenario`, after connecting and starting the session.
///
/// The auth scenarios list the tools and call each (a call may need more scope than the
/// listing); other scenarios not named here check the connection itself, so listing the
/// tools is all they need.
pub fn plan(scenario: &str) -> Vec<Step> {
    let call = |name, arguments: Value| Step::CallTool {
        name,
        arguments: arguments.as_object().cloned().unwrap_or_default(),
    };
    match scenario {
        "http-custom-headers" => vec![Step::ListTools, Step::ContextCalls],
        "http-invalid-tool-headers" | "sep-2322-client-request-state" => {
            vec![Step::ListTools, Step::CallEveryTool]
        }
        // Authorized, then a call (which may need more scope than the listing: step-up).
        auth if auth.starts_with("auth/") => vec![Step::ListTools, Step::CallEveryTool],
        "json-schema-2020-12-preservation" => vec![Step::EchoSchema {
            focal: "json_schema_2020_12_tool",
            echo: "json_schema_echo",
        }],
        "tools_call" => vec![
            Step::ListTools,
            call("add_numbers", json!({"a": 5, "b": 3})),
        ],
        "sse-retry" => vec![Step::ListTools, call("test_reconnection", json!({}))],
        "elicitation-sep1034-client-defaults" => vec![
            Step::ListTools,
            call("test_client_elicitation_defaults", json!({})),
        ],
        // The skills extension: listing never reads a file; loading checks what it reads.
        "sep-2640-client-no-prefetch" => vec![Step::ListSkills],
        skills if skills.starts_with("sep-2640-client-") => {
            vec![Step::ListSkills, Step::LoadSkills]
        }
        _ => vec![Step::ListTools],
    }
}

/// The variable holding the client secret of `auth/enterprise-managed-authorization`.
pub const CLIENT_SECRET_ENV: &str = "MCP_CONFORMANCE_CLIENT_SECRET";
/// The variable holding the user's identity token of `auth/enterprise-managed-authorization`.
pub const SUBJECT_TOKEN_ENV: &str = "MCP_CONFORMANCE_SUBJECT_TOKEN";
/// The variable holding the workload token of `auth/wif-jwt-bearer`.
pub const WORKLOAD_TOKEN_ENV: &str = "MCP_CONFORMANCE_WORKLOAD_TOKEN";

/// The variables [`server_spec`]'s spec for `scenario` reads its credentials from, with their
/// values from `context`: a configuration names where a federated credential is, never the
/// credential itself, so the binary runs with these set.
///
/// ```
/// use serde_json::json;
///
/// let context = json!({"client_id": "c", "valid_jwt": "h.c.s"});
/// let vars = mcp_conformance::credential_env("auth/wif-jwt-bearer", Some(&context));
/// assert_eq!(vars, [(mcp_conformance::WORKLOAD_TOKEN_ENV, "h.c.s".to_owned())]);
/// ```
pub fn credential_env(scenario: &str, context: Option<&Value>) -> Vec<(&'static str, String)> {
    let field = |name: &str| {
        context
            .and_then(|c| c.get(name))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let wanted: &[(&str, &str)] = match scenario {
        "auth/enterprise-managed-authorization" => &[
            (CLIENT_SECRET_ENV, "client_secret"),
            (SUBJECT_TOKEN_ENV, "idp_id_token"),
        ],
        "auth/wif-jwt-bearer" => &[(WORKLOAD_TOKEN_ENV, "valid_jwt")],
        _ => &[],
    };
    wanted
        .iter()
        .filter_map(|(var, key)| Some((*var, field(key)?)))
        .collect()
}

/// The spec of the suite's mock server at `url` for `scenario`, through `mcp-config`'s own
/// parser:
///
/// - `auth/client-credentials-*`: the context's credentials as OAuth2 client credentials
///   (`client_id` and `client_secret`, or `client_id` and `private_key_pem` for
///   `private_key_jwt`, the key where the secret goes);
/// - `auth/enterprise-managed-authorization`: the `enterprise` table (the context's identity
///   provider, client ids; the secret and identity token from [`credential_env`]'s variables);
/// - `auth/wif-jwt-bearer`: the `workload_identity` table (the token from
///   [`WORKLOAD_TOKEN_ENV`]);
/// - other `auth/*` scenarios: a user's login (the `oauth` table), with the suite's
///   [`CLIENT_METADATA_URL`] and the context's pre-registered `client_id` and
///   `client_secret` when it gives them, and `dpop = true` for `auth/dpop*`;
/// - anything else: no auth.
///
/// ```
/// let url = "http://localhost:1234/mcp".parse().unwrap();
/// let spec = mcp_conformance::server_spec(&url, "auth/metadata-default", None).unwrap();
/// assert!(spec.auth.oauth.is_some());
/// ```
pub fn server_spec(
    url: &Url,
    scenario: &str,
    context: Option<&Value>,
) -> Result<ServerSpec, Error> {
    let mut spec = json!({"name": "conformance", "url": url.as_str()});
    let field = |name: &str| context.and_then(|c| c.get(name));
    if scenario.starts_with("auth/client-credentials") {
        if let Some((id, secret)) = field("client_id").zip(field("client_secret")) {
            spec["auth"] = json!({"oauth_client_credentials": {
                "client_id": id, "client_secret": secret,
            }});
        } else if let Some((id, key)) = field("client_id").zip(field("private_key_pem")) {
            spec["auth"] = json!({"oauth_client_credentials": {
                "client_id": id, "client_secret": key,
                "token_endpoint_auth_method": "private_key_jwt",
            }});
        }
    } else if scenario == "auth/enterprise-managed-authorization" {
        let mut enterprise = json!({
            "subject_token_env": SUBJECT_TOKEN_ENV,
            "client_secret_env": CLIENT_SECRET_ENV,
        });
        for (key, from) in [
            ("idp_token_url", "idp_token_endpoint"),
            ("client_id", "client_id"),
            ("idp_client_id", "idp_client_id"),
        ] {
            if let Some(value) = field(from) {
                enterprise[key] = value.clone();
            }
        }
        spec["auth"] = json!({ "enterprise": enterprise });
    } else if scenario == "auth/wif-jwt-bearer" {
        let mut workload = json!({"token_env": WORKLOAD_TOKEN_ENV});
        if let Some(id) = field("client_id") {
            workload["client_id"] = id.clone();
        }
        spec["auth"] = json!({ "workload_identity": workload });
    } else if scenario.starts_with("auth/") {
        let mut oauth = json!({"client_metadata_url": CLIENT_METADATA_URL});
        if let Some(id) = field("client_id") {
            oauth["client_id"] = id.clone();
        }
        if let Some(secret) = field("client_secret") {
            oauth["client_secret"] = secret.clone();
        }
        if scenario.starts_with("auth/dpop") {
            oauth["dpop"] = json!(true);
        }
        spec["auth"] = json!({ "oauth": oauth });
    }
    ServerSpec::from_json(&spec, SpecOrigin::Operator).map_err(|e| Error::Config(Box::new(e)))
}

/// Accepts every elicitation without filling anything in: the library completes the answer
/// with the requested schema's defaults.
#[derive(Debug, Clone, Copy, Default)]
pub struct AcceptElicitation;

#[async_trait::async_trait]
impl ElicitationHandler for AcceptElicitation {
    async fn elicit(&self, _server: &str, _request: ElicitRequestParams) -> ElicitResult {
        ElicitResult::new(ElicitationAction::Accept)
    }
}

/// True when `steps` are skill steps, which [`run_skills`] runs (through a
/// [`Session`](mcp_client::Session)) instead of [`run`].
///
/// ```
/// use mcp_conformance::{plan, uses_skills};
///
/// assert!(uses_skills(&plan("sep-2640-client-verify-digest")));
/// assert!(!uses_skills(&plan("tools_call")));
/// ```
pub fn uses_skills(steps: &[Step]) -> bool {
    steps
        .iter()
        .any(|s| matches!(s, Step::ListSkills | Step::LoadSkills))
}

/// Opens one session to `spec` with `mcp-client`'s low-level
/// [`Session::open_standalone`](mcp_client::Session::open_standalone) and runs the skill
/// steps of `steps` with the library's skills code ([`Session::list_skills`],
/// [`Session::load_skill`], [`Session::read_skill_file`]); then closes the session.
///
/// [`Session::list_skills`]: mcp_client::Session::list_skills
/// [`Session::load_skill`]: mcp_client::Session::load_skill
/// [`Session::read_skill_file`]: mcp_client::Session::read_skill_file
pub async fn run_skills(
    connectors: &mcp_client::Connectors,
    spec: ServerSpec,
    steps: &[Step],
    log: &mut dyn FnMut(String),
) -> Result<(), Error> {
    let (session, _tools) = mcp_client::Session::open_standalone(connectors, spec)
        .await
        .map_err(|e| Error::Initialize(Box::new(e)))?;
    let result = skill_steps(&session, steps, log).await;
    session.close(Duration::from_secs(1)).await;
    result
}

async fn skill_steps(
    session: &mcp_client::Session,
    steps: &[Step],
    log: &mut dyn FnMut(String),
) -> Result<(), Error> {
    let mut listed = Vec::new();
    for step in steps {
        match step {
            Step::ListSkills => {
                listed = session.list_skills().await?;
                let names: Vec<&str> = listed.iter().map(|s| s.name.as_str()).collect();
                log(format!("skills/list: {names:?}"));
            }
            Step::LoadSkills => {
                for entry in &listed {
                    let skill = session.load_skill(entry).await?;
                    log(format!("loaded {}: {} bytes", entry.name, skill.bytes));
                    for file in entry.files.listed().iter().filter(|f| f.uri != entry.uri) {
                        let read = session.read_skill_file(&skill, &file.uri).await?;
                        log(format!("read {}: {} bytes", file.uri, read.bytes));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Connects to `spec` through `connector`, starts the session, runs `steps` (the calls of
/// [`Step::ContextCalls`] from `context`), and closes the session (HTTP `DELETE`). Each request
/// is bounded by `spec.call_timeout`. Progress goes to `log`. For a user's login (the `oauth`
/// table) give `connector` an auth hook of [`LoginOnDemand`](mcp_auth::LoginOnDemand) with a
/// [`HeadlessBrowser`]: it logs in on the first 401 and steps up on a 403
/// `insufficient_scope`, which the transport then resends.
pub async fn run(
    connector: &dyn Connector,
    spec: &ServerSpec,
    steps: &[Step],
    context: Option<&Value>,
    log: &mut dyn FnMut(String),
) -> Result<(), Error> {
    let limit = spec.call_timeout;
    let bounded = |what: String| move |_| Error::Timeout { what, after: limit };
    let Connection { transport, handle } = connector.connect(spec).await?;
    let service = tokio::time::timeout(
        limit,
        mcp_client::lifecycle::serve(
            SessionHandler::new(&spec.name, Some(Arc::new(AcceptElicitation))).0,
            transport,
            DEFAULT_DISCOVER_TIMEOUT,
        ),
    )
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
    let session = Steps {
        service: &service,
        limit,
    };
    let result = session.run(steps, context, log).await;
    let _ = tokio::time::timeout(limit, service.cancel()).await;
    handle.shutdown(Duration::from_secs(1)).await;
    result
}

/// A started session and how its requests are run.
struct Steps<'a> {
    service: &'a RunningService<RoleClient, SessionHandler>,
    limit: Duration,
}

impl Steps<'_> {
    async fn run(
        &self,
        steps: &[Step],
        context: Option<&Value>,
        log: &mut dyn FnMut(String),
    ) -> Result<(), Error> {
        let mut listed: Vec<Tool> = Vec::new();
        for step in steps {
            match step {
                Step::ListTools => {
                    listed = self.list_tools().await?;
                    let names: Vec<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
                    log(format!("tools/list: {names:?}"));
                }
                Step::CallTool { name, arguments } => {
                    let result = self.call(name, arguments.clone()).await?;
                    if result.is_error == Some(true) {
                        return Err(Error::ToolError {
                            tool: name.to_string(),
                            content: serde_json::to_string(&result.content).unwrap_or_default(),
                        });
                    }
                    log(format!("tools/call {name}: {}", shown(&result)));
                }
                Step::CallEveryTool => {
                    for tool in &listed {
                        let arguments = required_arguments(&tool.input_schema);
                        let result = self.call(&tool.name, arguments).await?;
                        log(format!("tools/call {}: {}", tool.name, shown(&result)));
                    }
                }
                Step::ContextCalls => {
                    let calls = context
                        .and_then(|c| c.get("toolCalls"))
                        .and_then(Value::as_array)
                        .map(Vec::as_slice)
                        .unwrap_or_default();
                    for entry in calls {
                        let name = entry
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        let arguments = entry
                            .get("arguments")
                            .and_then(Value::as_object)
                            .cloned()
                            .unwrap_or_default();
                        let result = self.call(name, arguments).await?;
                        log(format!("tools/call {name}: {}", shown(&result)));
                    }
                }
                // Run by `run_skills`, through a session of the library.
                Step::ListSkills | Step::LoadSkills => {}
                Step::EchoSchema { focal, echo } => {
                    listed = self.list_tools().await?;
                    let tool = listed
                        .iter()
                        .find(|t| t.name == *focal)
                        .ok_or_else(|| Error::MissingTool(focal.to_string()))?;
                    let mut arguments = JsonObject::new();
                    arguments.insert("schema".into(), Value::Object((*tool.input_schema).clone()));
                    let result = self.call(echo, arguments).await?;
                    log(format!("tools/call {echo}: {}", shown(&result)));
                }
            }
        }
        Ok(())
    }

    /// Runs `request` (`method`), bounded by the limit. (A 403 `insufficient_scope` is
    /// answered below this: the transport asks the login hook to step up, then resends.)
    async fn send<T, F>(&self, method: &str, request: impl Fn() -> F) -> Result<T, Error>
    where
        F: Future<Output = Result<T, rmcp::ServiceError>>,
    {
        tokio::time::timeout(self.limit, request())
            .await
            .map_err(|_| Error::Timeout {
                what: method.to_owned(),
                after: self.limit,
            })?
            .map_err(|error| Error::Request {
                method: method.to_owned(),
                source: Box::new(error),
            })
    }

    async fn list_tools(&self) -> Result<Vec<Tool>, Error> {
        self.send("tools/list", || self.service.peer().list_all_tools())
            .await
    }

    /// `tools/call`, answering input-required results through the session's handler.
    async fn call(&self, name: &str, arguments: JsonObject) -> Result<CallToolResult, Error> {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        self.send(&format!("tools/call {name}"), || {
            self.service.call_tool(params.clone())
        })
        .await
    }
}

fn shown(result: &CallToolResult) -> String {
    serde_json::to_string(&result.content).unwrap_or_default()
}

/// A value for each required parameter of `schema`, of its declared type.
fn required_arguments(schema: &JsonObject) -> JsonObject {
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema.get("required").and_then(Value::as_array);
    let mut arguments = JsonObject::new();
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        let kind = properties
            .and_then(|p| p.get(name))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str);
        let value = match kind {
            Some("integer" | "number") => json!(1),
            Some("boolean") => json!(true),
            Some("array") => json!([]),
            Some("object") => json!({}),
            _ => json!("test"),
        };
        arguments.insert(name.to_owned(), value);
    }
    arguments
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_scenarios_list_tools() {
        assert_eq!(
            plan("auth/metadata-default"),
            vec![Step::ListTools, Step::CallEveryTool]
        );
        assert_eq!(plan("initialize"), vec![Step::ListTools]);
    }

    #[test]
    fn required_parameters_get_values_of_their_type() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string"}, "n": {"type": "integer"}, "opt": {"type": "string"},
        }, "required": ["region", "n"]});
        let arguments = required_arguments(schema.as_object().unwrap());
        assert_eq!(Value::Object(arguments), json!({"region": "test", "n": 1}));
    }

    #[test]
    fn federated_scenarios_read_their_credentials_from_variables() {
        let url: Url = "http://localhost:1234/mcp".parse().unwrap();
        let context = json!({
            "client_id": "xaa", "client_secret": "s3cret", "idp_client_id": "idp-c",
            "idp_id_token": "id.tok.en", "idp_token_endpoint": "http://localhost:9/token",
        });
        let scenario = "auth/enterprise-managed-authorization";
        let spec = server_spec(&url, scenario, Some(&context)).unwrap();
        let enterprise = spec.auth.enterprise.as_ref().unwrap();
        assert_eq!(enterprise.client_id, "xaa");
        assert_eq!(enterprise.idp_client_id.as_deref(), Some("idp-c"));
        assert_eq!(
            enterprise.idp_token_url.as_str(),
            "http://localhost:9/token"
        );
        assert!(!format!("{spec:?}").contains("s3cret"));
        assert!(!format!("{spec:?}").contains("id.tok.en"));
        assert_eq!(
            credential_env(scenario, Some(&context)),
            [
                (CLIENT_SECRET_ENV, "s3cret".to_owned()),
                (SUBJECT_TOKEN_ENV, "id.tok.en".to_owned())
            ]
        );
        let wif = server_spec(
            &url,
            "auth/wif-jwt-bearer",
            Some(&json!({"client_id": "w"})),
        );
        let workload = wif.unwrap().auth.workload_identity.unwrap();
        assert_eq!(workload.client_id.as_deref(), Some("w"));
        assert!(credential_env("tools_call", Some(&context)).is_empty());
    }

    #[test]
    fn context_credentials_become_oauth_client_credentials() {
        let url: Url = "http://localhost:1234/mcp".parse().unwrap();
        let spec = server_spec(
            &url,
            "auth/client-credentials-basic",
            Some(&json!({"client_id": "id-1", "client_secret": "s3cret"})),
        )
        .unwrap();
        let oauth = spec.auth.oauth_client_credentials.as_ref().unwrap();
        assert_eq!(oauth.client_id, "id-1");
        assert!(!format!("{spec:?}").contains("s3cret"));
        let plain = server_spec(&url, "tools_call", None).unwrap();
        assert!(plain.auth.is_empty());
        let login = server_spec(
            &url,
            "auth/pre-registration",
            Some(&json!({"client_id": "id-2", "client_secret": "s3cret"})),
        )
        .unwrap();
        let oauth = login.auth.oauth.as_ref().unwrap();
        assert_eq!(oauth.client_id.as_deref(), Some("id-2"));
        assert!(login.auth.oauth_client_credentials.is_none());
        assert!(!format!("{login:?}").contains("s3cret"));
    }
}
