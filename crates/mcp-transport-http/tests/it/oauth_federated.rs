//! Federated grants over real sockets: enterprise-managed authorization (an identity
//! provider's token exchange, then the JWT bearer grant) and workload identity (a token file as
//! the assertion), against an identity provider, an authorization server and a protected MCP
//! server on 127.0.0.1.

use crate::common;
use crate::oauth_support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use common::{Server, bounded, echo, serve, text_of};
use http::StatusCode;
use http::request::Parts;
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};
use oauth_support::{AuthServer, Guard, JWT_BEARER, chain, json_response, protected_server};
use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::{Value, json};

const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The user's identity token in the subject token file.
const ID_TOKEN: &str = "user-id-token-5f0c2a91";

/// How the identity provider answers a token exchange.
#[derive(Clone, Copy)]
enum Idp {
    /// An identity assertion grant `jag-<n>`.
    Grants,
    /// `invalid_grant`, its description echoing the subject token.
    Refuses,
    /// An access token instead of an identity assertion grant.
    WrongType,
}

/// A form body's fields, in order.
type Form = Vec<(String, String)>;

/// An identity provider's token endpoint at `/token`, recording every form.
struct IdentityProvider {
    server: Server,
    forms: Arc<Mutex<Vec<Form>>>,
}

impl IdentityProvider {
    async fn start(mode: Idp) -> Self {
        let forms: Arc<Mutex<Vec<Form>>> = Arc::default();
        let seen = forms.clone();
        let server = serve(Arc::new(move |_: Parts, body: Bytes| {
            let form: Form = form_urlencoded::parse(&body)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
            let n = {
                let mut forms = seen.lock().unwrap();
                forms.push(form);
                forms.len()
            };
            let (status, answer) = match mode {
                Idp::Grants => (
                    StatusCode::OK,
                    json!({"access_token": format!("jag-{n}"), "issued_token_type": ID_JAG, "token_type": "N_A"}),
                ),
                Idp::Refuses => (
                    StatusCode::BAD_REQUEST,
                    json!({"error": "invalid_grant", "error_description": format!("unknown token {ID_TOKEN}")}),
                ),
                Idp::WrongType => (
                    StatusCode::OK,
                    json!({"access_token": "at-7c1e", "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}),
                ),
            };
            Box::pin(async move { json_response(status, answer) })
        }))
        .await;
        Self { server, forms }
    }

    fn token_url(&self) -> String {
        self.server.url.join("/token").unwrap().to_string()
    }

    fn forms(&self) -> Vec<Form> {
        self.forms.lock().unwrap().clone()
    }
}

fn field<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    form.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// A scratch directory for token files, removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("mcp-http-federated-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn file(&self, name: &str, content: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, content).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn spec(server: &Server, auth: Value) -> mcp_config::ServerSpec {
    mcp_config::ServerSpec::from_json(
        &json!({
            "name": "federated",
            "url": server.url.as_str(),
            "connect_timeout_seconds": 10,
            "auth": auth,
        }),
        mcp_config::SpecOrigin::Operator,
    )
    .expect("valid spec")
}

fn enterprise(idp: &IdentityProvider, subject: &Path) -> Value {
    json!({"enterprise": {
        "idp_token_url": idp.token_url(),
        "subject_token_file": subject,
        "client_id": "agent-at-as",
        "idp_client_id": "agent-at-idp",
        "scope": "files:read",
    }})
}

async fn open(
    connector: &HttpConnector,
    spec: &mcp_config::ServerSpec,
) -> Result<RunningService<RoleClient, ()>, String> {
    let connection = connector.connect(spec).await.map_err(|e| chain(&e))?;
    rmcp::serve_client((), connection.transport)
        .await
        .map_err(|e| chain(&e))
}

fn connector() -> HttpConnector {
    HttpConnector::new(HttpOptions::default()).unwrap()
}

#[tokio::test]
async fn enterprise_exchanges_the_identity_token_then_presents_the_grant() {
    bounded(async {
        let scratch = Scratch::new("enterprise");
        let idp = IdentityProvider::start(Idp::Grants).await;
        let auth = AuthServer::start(vec!["none"], None).await;
        let mcp = protected_server(&auth, Guard::Tokens).await;
        let subject = scratch.file("id_token", &format!("{ID_TOKEN}\n"));
        let client = open(&connector(), &spec(&mcp, enterprise(&idp, &subject)))
            .await
            .unwrap();
        for text in ["a", "b"] {
            let result = client.peer().call_tool(echo(text)).await.unwrap();
            assert_eq!(text_of(&result), text);
        }
        client.cancel().await.unwrap();

        // One exchange at the identity provider, for the discovered authorization server.
        let forms = idp.forms();
        assert_eq!(forms.len(), 1, "{forms:?}");
        let form = &forms[0];
        assert_eq!(field(form, "grant_type"), Some(TOKEN_EXCHANGE));
        assert_eq!(field(form, "requested_token_type"), Some(ID_JAG));
        assert_eq!(field(form, "subject_token"), Some(ID_TOKEN));
        assert_eq!(
            field(form, "subject_token_type"),
            Some("urn:ietf:params:oauth:token-type:id_token")
        );
        assert_eq!(field(form, "audience"), Some(auth.issuer().as_str()));
        assert_eq!(field(form, "resource"), Some(mcp.url.as_str()));
        assert_eq!(field(form, "client_id"), Some("agent-at-idp"));
        assert_eq!(field(form, "scope"), Some("files:read"));

        // One JWT bearer grant with that assertion; every MCP request after the 401 used it.
        assert_eq!(*auth.state.assertions.lock().unwrap(), ["jag-1"]);
        let calls = auth.state.calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 1);
        assert_eq!(field(&calls[0].form, "grant_type"), Some(JWT_BEARER));
        assert_eq!(field(&calls[0].form, "client_id"), Some("agent-at-as"));
        assert_eq!(field(&calls[0].form, "resource"), Some(mcp.url.as_str()));
        let seen = mcp.seen();
        assert_eq!(seen[0].status, StatusCode::UNAUTHORIZED);
        for s in seen.iter().skip(1).filter(|s| s.rpc.is_some()) {
            assert_eq!(s.header("authorization"), Some("Bearer tok-1"), "{s:?}");
        }
    })
    .await;
}

#[tokio::test]
async fn an_identity_provider_refusal_names_the_provider_and_the_grant() {
    bounded(async {
        let scratch = Scratch::new("idp-refuses");
        let subject = scratch.file("id_token", ID_TOKEN);
        for (mode, problem) in [
            (
                Idp::Refuses,
                "refused (HTTP 400): invalid_grant: unknown token [REDACTED]",
            ),
            (
                Idp::WrongType,
                "issued a token of type `urn:ietf:params:oauth:token-type:access_token`, not an identity assertion grant (urn:ietf:params:oauth:token-type:id-jag)",
            ),
        ] {
            let idp = IdentityProvider::start(mode).await;
            let auth = AuthServer::start(vec!["none"], None).await;
            let mcp = protected_server(&auth, Guard::Tokens).await;
            let err = open(&connector(), &spec(&mcp, enterprise(&idp, &subject)))
                .await
                .unwrap_err();
            let expected = format!(
                "server `federated`: could not obtain credentials: the identity provider {} ({TOKEN_EXCHANGE}): {problem}",
                idp.token_url()
            );
            assert!(err.contains(&expected), "{err}");
            assert!(!err.contains(ID_TOKEN) && !err.contains("at-7c1e"), "{err}");
            assert_eq!(idp.forms().len(), 1);
            // Nothing reached the authorization server's token endpoint.
            assert_eq!(auth.state.token_requests(), 0);
        }
    })
    .await;
}

#[tokio::test]
async fn a_workload_token_file_is_read_again_at_each_exchange() {
    bounded(async {
        let scratch = Scratch::new("workload-rotates");
        let auth = AuthServer::start(vec!["none"], None).await;
        let mcp = protected_server(&auth, Guard::Tokens).await;
        let token = scratch.file("token", "workload-token-1\n");
        let spec = spec(&mcp, json!({"workload_identity": {"token_file": token}}));
        let client = open(&connector(), &spec).await.unwrap();
        client.peer().call_tool(echo("one")).await.unwrap();

        // The platform rotates the projected token; the access token is then refused.
        std::fs::write(&token, "workload-token-2").unwrap();
        auth.state.revoke_all();
        let result = client.peer().call_tool(echo("two")).await.unwrap();
        assert_eq!(text_of(&result), "two");
        client.cancel().await.unwrap();

        assert_eq!(
            *auth.state.assertions.lock().unwrap(),
            ["workload-token-1", "workload-token-2"]
        );
        // A public client without a client id: the assertion alone.
        let calls = auth.state.calls.lock().unwrap().clone();
        assert!(calls.iter().all(|c| field(&c.form, "client_id").is_none()));
    })
    .await;
}

#[tokio::test]
async fn workload_token_files_that_cannot_be_used_name_the_file() {
    bounded(async {
        let scratch = Scratch::new("workload-bad");
        let auth = AuthServer::start(vec!["none"], None).await;
        let mcp = protected_server(&auth, Guard::Tokens).await;
        let huge = scratch.0.join("huge");
        let file = std::fs::File::create(&huge).unwrap();
        file.set_len(10 * 1024 * 1024).unwrap();
        let cases = [
            (scratch.0.join("absent"), "does not exist"),
            (scratch.file("empty", " \n"), "is empty"),
            (huge, "is larger than 65536 bytes (MAX_TOKEN_FILE_BYTES); refused"),
            (scratch.0.clone(), "cannot be read: "),
        ];
        for (path, problem) in cases {
            let spec = spec(&mcp, json!({"workload_identity": {"token_file": path}}));
            let err = open(&connector(), &spec).await.unwrap_err();
            let expected = format!(
                "server `federated`: could not obtain credentials: the token file {} (token_file) {problem}",
                path.display()
            );
            assert!(err.contains(&expected), "{err}");
        }
        assert_eq!(auth.state.token_requests(), 0);
    })
    .await;
}

#[tokio::test]
async fn an_unset_token_variable_fails_the_connect_naming_it() {
    bounded(async {
        let auth = AuthServer::start(vec!["none"], None).await;
        let mcp = protected_server(&auth, Guard::Tokens).await;
        let var = "MCP_HTTP_TEST_UNSET_WORKLOAD_TOKEN";
        let spec = spec(&mcp, json!({"workload_identity": {"token_env": var}}));
        let err = open(&connector(), &spec).await.unwrap_err();
        assert!(
            err.contains(&format!(
                "server `federated`: environment variable `{var}` (token_env) is not set or not valid UTF-8"
            )),
            "{err}"
        );
        assert!(mcp.seen().is_empty(), "nothing sent: {:?}", mcp.seen());
    })
    .await;
}
