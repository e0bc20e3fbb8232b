//! An OAuth2 authorization server and a protected MCP server on 127.0.0.1, for the OAuth
//! tests: hyper servers (from `common`) with counters, so a test can say how many token
//! requests were made.
#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine as _;
use bytes::Bytes;
use http::StatusCode;
use http::request::Parts;
use serde_json::{Value, json};

use crate::common::{Handler, Mode, RmcpServer, Server, respond, serve};

/// The client id the authorization server knows.
pub const CLIENT_ID: &str = "agent-client";
/// Its secret.
pub const SECRET: &str = "cc-secret-XYZ-0123456789";

/// RFC 7523's grant type.
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// How the client authenticated one token request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenCall {
    /// `client_secret_basic`, `client_secret_post` or `none`.
    pub method: &'static str,
    /// The form body's fields.
    pub form: Vec<(String, String)>,
}

/// What the authorization server does.
pub struct AsState {
    /// Its base URL (`http://127.0.0.1:PORT`), known once bound.
    pub base: OnceLock<String>,
    /// Advertised `token_endpoint_auth_methods_supported`.
    pub methods: Vec<&'static str>,
    /// The `issuer` the metadata names (default: its own base URL).
    pub issuer_override: Option<String>,
    /// `expires_in` of the next tokens.
    pub expires_in: AtomicU64,
    /// Token requests answered.
    pub token_requests: AtomicUsize,
    /// Every token request.
    pub calls: Mutex<Vec<TokenCall>>,
    /// Tokens issued, in order.
    pub issued: Mutex<Vec<String>>,
    /// Tokens issued before this index are revoked.
    pub valid_from: AtomicUsize,
    /// Tokens are this followed by their number (default `tok-`).
    pub token_prefix: OnceLock<String>,
    /// The assertions of JWT bearer grants, in order (any client; `bad` is `invalid_grant`).
    pub assertions: Mutex<Vec<String>>,
}

impl AsState {
    /// Whether `token` is a live token of this server.
    pub fn accepts(&self, token: &str) -> bool {
        let issued = self.issued.lock().unwrap();
        let from = self.valid_from.load(Ordering::SeqCst);
        issued.iter().skip(from).any(|t| t == token)
    }

    /// Revokes every token issued so far.
    pub fn revoke_all(&self) {
        let n = self.issued.lock().unwrap().len();
        self.valid_from.store(n, Ordering::SeqCst);
    }

    /// Token requests so far.
    pub fn token_requests(&self) -> usize {
        self.token_requests.load(Ordering::SeqCst)
    }
}

/// A running authorization server.
pub struct AuthServer {
    pub state: Arc<AsState>,
    pub server: Server,
}

impl AuthServer {
    /// Serves metadata at `/.well-known/oauth-authorization-server` and tokens at `/token`.
    pub async fn start(methods: Vec<&'static str>, issuer_override: Option<String>) -> Self {
        let state = Arc::new(AsState {
            base: OnceLock::new(),
            methods,
            issuer_override,
            expires_in: AtomicU64::new(3600),
            token_requests: AtomicUsize::new(0),
            calls: Mutex::new(Vec::new()),
            issued: Mutex::new(Vec::new()),
            valid_from: AtomicUsize::new(0),
            token_prefix: OnceLock::new(),
            assertions: Mutex::new(Vec::new()),
        });
        let handler_state = state.clone();
        let handler: Handler = Arc::new(move |parts: Parts, body: Bytes| {
            let state = handler_state.clone();
            Box::pin(async move { state.answer(&parts, &body) })
        });
        let server = serve(handler).await;
        let base = format!(
            "http://{}:{}",
            server.url.host_str().unwrap(),
            server.url.port().unwrap()
        );
        state.base.set(base).unwrap();
        Self { state, server }
    }

    /// The issuer (base URL).
    pub fn issuer(&self) -> String {
        self.state.base.get().unwrap().clone()
    }

    /// The token endpoint.
    pub fn token_url(&self) -> String {
        format!("{}/token", self.issuer())
    }
}

impl AsState {
    fn answer(&self, parts: &Parts, body: &[u8]) -> http::Response<crate::common::Body> {
        let base = self.base.get().cloned().unwrap_or_default();
        match (parts.method.as_str(), parts.uri.path()) {
            ("GET", "/.well-known/oauth-authorization-server") => json_response(
                StatusCode::OK,
                json!({
                    "issuer": self.issuer_override.clone().unwrap_or(base.clone()),
                    "token_endpoint": format!("{base}/token"),
                    "grant_types_supported": ["client_credentials", JWT_BEARER],
                    "token_endpoint_auth_methods_supported": self.methods,
                }),
            ),
            ("POST", "/token") => {
                self.token_requests.fetch_add(1, Ordering::SeqCst);
                let form: Vec<(String, String)> = form_urlencoded::parse(body)
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect();
                let field =
                    |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
                let basic = parts
                    .headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Basic "))
                    .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                    .and_then(|b| String::from_utf8(b).ok());
                let (method, id, secret) = match (basic, field("client_secret")) {
                    (Some(pair), _) => {
                        let (id, secret) = pair.split_once(':').unwrap_or((&pair, ""));
                        let decode = |s: &str| {
                            form_urlencoded::parse(format!("v={s}").as_bytes())
                                .next()
                                .map(|(_, v)| v.into_owned())
                                .unwrap_or_default()
                        };
                        ("client_secret_basic", decode(id), decode(secret))
                    }
                    (None, Some(secret)) => (
                        "client_secret_post",
                        field("client_id").unwrap_or_default(),
                        secret,
                    ),
                    (None, None) => ("none", String::new(), String::new()),
                };
                self.calls.lock().unwrap().push(TokenCall {
                    method,
                    form: form.clone(),
                });
                let jwt_bearer = field("grant_type").as_deref() == Some(JWT_BEARER);
                if jwt_bearer {
                    let assertion = field("assertion").unwrap_or_default();
                    self.assertions.lock().unwrap().push(assertion.clone());
                    if assertion.is_empty() || assertion == "bad" {
                        return json_response(
                            StatusCode::BAD_REQUEST,
                            json!({"error": "invalid_grant"}),
                        );
                    }
                } else if field("grant_type").as_deref() != Some("client_credentials") {
                    return json_response(
                        StatusCode::BAD_REQUEST,
                        json!({"error": "unsupported_grant_type"}),
                    );
                }
                if !jwt_bearer
                    && (id != CLIENT_ID || secret != SECRET || !self.methods.contains(&method))
                {
                    return json_response(
                        StatusCode::UNAUTHORIZED,
                        json!({"error": "invalid_client", "error_description": "Invalid client credentials"}),
                    );
                }
                let mut issued = self.issued.lock().unwrap();
                let prefix = self.token_prefix.get().map_or("tok-", String::as_str);
                let token = format!("{prefix}{}", issued.len() + 1);
                issued.push(token.clone());
                json_response(
                    StatusCode::OK,
                    json!({
                        "access_token": token,
                        "token_type": "Bearer",
                        "expires_in": self.expires_in.load(Ordering::SeqCst),
                    }),
                )
            }
            _ => json_response(StatusCode::NOT_FOUND, json!({"error": "not_found"})),
        }
    }
}

/// A JSON response.
pub fn json_response(status: StatusCode, body: Value) -> http::Response<crate::common::Body> {
    respond(status, "application/json", body.to_string())
}

/// How the protected MCP server treats tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// Live tokens of the authorization server pass.
    Tokens,
    /// Every request gets 401.
    Always401,
}

/// An rmcp MCP server behind a bearer-token check, publishing RFC 9728 metadata that points at
/// `auth`.
pub async fn protected_server(auth: &AuthServer, guard: Guard) -> Server {
    let rmcp = Arc::new(RmcpServer::new(Mode::SessionSse));
    let inner = rmcp.handler();
    let state = auth.state.clone();
    let issuer = auth.issuer();
    let own: Arc<OnceLock<String>> = Arc::new(OnceLock::new());
    let own_in_handler = own.clone();
    let server = serve(Arc::new(move |parts: Parts, body: Bytes| {
        let base = own_in_handler.get().cloned().unwrap_or_default();
        let metadata = format!("{base}/.well-known/oauth-protected-resource/mcp");
        if parts.uri.path() == "/.well-known/oauth-protected-resource/mcp" {
            let doc = json!({
                "resource": format!("{base}/mcp"),
                "authorization_servers": [issuer.clone()],
            });
            return Box::pin(async move { json_response(StatusCode::OK, doc) });
        }
        let token = parts
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_owned);
        let allowed = guard == Guard::Tokens && token.is_some_and(|t| state.accepts(&t));
        if allowed {
            return inner(parts, body);
        }
        Box::pin(async move {
            let mut response =
                json_response(StatusCode::UNAUTHORIZED, json!({"error": "invalid_token"}));
            response.headers_mut().insert(
                "www-authenticate",
                format!(r#"Bearer error="invalid_token", resource_metadata="{metadata}""#)
                    .parse()
                    .unwrap(),
            );
            response
        })
    }))
    .await;
    own.set(format!(
        "http://{}:{}",
        server.url.host_str().unwrap(),
        server.url.port().unwrap()
    ))
    .unwrap();
    server
}

/// A spec for `server` with OAuth2 client credentials (`token_url` optional: discovery).
pub fn oauth_spec(
    server: &Server,
    token_url: Option<&str>,
    secret: &str,
    method: Option<&str>,
) -> mcp_config::ServerSpec {
    let mut oauth = json!({"client_id": CLIENT_ID, "client_secret": secret});
    if let Some(url) = token_url {
        oauth["token_url"] = json!(url);
    }
    if let Some(method) = method {
        oauth["token_endpoint_auth_method"] = json!(method);
    }
    mcp_config::ServerSpec::from_json(
        &json!({
            "name": "guarded",
            "url": server.url.as_str(),
            "connect_timeout_seconds": 10,
            "auth": {"oauth_client_credentials": oauth}
        }),
        mcp_config::SpecOrigin::Operator,
    )
    .expect("valid spec")
}

/// The error and its whole cause chain, as one line.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
