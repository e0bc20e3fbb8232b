//! An OAuth 2 authorization server on 127.0.0.1 for tests that count what reaches it: RFC 8414
//! metadata and a token endpoint for the `client_credentials`, `refresh_token` and JWT bearer
//! (RFC 7523, any non-empty assertion) grants,
//! with rotating refresh tokens (each works once; a second use is counted and refused with
//! `invalid_grant`, as a server detecting replay does).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::http::{HttpServer, accept_loop};

/// The client id the server knows.
pub const CLIENT_ID: &str = "fleet-client";

/// That client's secret.
pub const CLIENT_SECRET: &str = "fleet-secret-0123456789abcdef";

/// RFC 7523's grant type.
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// The largest request body read.
const MAX_BODY: usize = 64 * 1024;

/// What a refresh token is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refresh {
    Live,
    Spent,
}

/// The server's books: what it issued and what it was sent.
#[derive(Debug, Default)]
struct Books {
    access: Vec<String>,
    refresh: HashMap<String, Refresh>,
    next_refresh: usize,
    /// Every refresh token sent to the token endpoint, in order.
    refresh_sent: Vec<String>,
}

#[derive(Debug)]
struct State {
    base: String,
    expires_in: AtomicU64,
    delay_ms: AtomicU64,
    token_requests: AtomicUsize,
    client_credentials: AtomicUsize,
    jwt_bearer: AtomicUsize,
    refreshes: AtomicUsize,
    reuses: AtomicUsize,
    books: Mutex<Books>,
}

/// A running authorization server (stopped when dropped).
///
/// ```
/// use mcp_test_kit::oauth::AuthServer;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let server = AuthServer::start().await?;
/// assert!(server.token_url().ends_with("/token"));
/// assert_eq!(server.token_requests(), 0);
/// let refresh = server.issue_refresh_token();
/// assert!(refresh.starts_with("rt-"));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct AuthServer {
    state: Arc<State>,
    _http: HttpServer,
}

impl AuthServer {
    /// Serves on an ephemeral port; tokens live 3600 s until
    /// [`set_expires_in`](Self::set_expires_in) says otherwise.
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            base: format!("http://{addr}"),
            expires_in: AtomicU64::new(3600),
            delay_ms: AtomicU64::new(0),
            token_requests: AtomicUsize::new(0),
            client_credentials: AtomicUsize::new(0),
            jwt_bearer: AtomicUsize::new(0),
            refreshes: AtomicUsize::new(0),
            reuses: AtomicUsize::new(0),
            books: Mutex::new(Books::default()),
        });
        let served = state.clone();
        let http = accept_loop(listener, CancellationToken::new(), move |stream| {
            let _ = stream.set_nodelay(true);
            let state = served.clone();
            let service = hyper::service::service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, std::convert::Infallible>(state.answer(request).await) }
            });
            async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            }
        })?;
        Ok(Self { state, _http: http })
    }

    /// The issuer: `http://127.0.0.1:PORT`.
    pub fn issuer(&self) -> &str {
        &self.state.base
    }

    /// The token endpoint: `<issuer>/token`.
    pub fn token_url(&self) -> String {
        format!("{}/token", self.state.base)
    }

    /// `expires_in` of the tokens issued from now on (0 is sent as 0).
    pub fn set_expires_in(&self, secs: u64) {
        self.state.expires_in.store(secs, Ordering::SeqCst);
    }

    /// The token endpoint answers `delay` after it counted a request (a slow server, so
    /// that concurrent callers overlap).
    pub fn set_delay(&self, delay: Duration) {
        let millis = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.state.delay_ms.store(millis, Ordering::SeqCst);
    }

    /// Requests to the token endpoint, of any grant and outcome.
    pub fn token_requests(&self) -> usize {
        self.state.token_requests.load(Ordering::SeqCst)
    }

    /// `client_credentials` requests.
    pub fn client_credentials_requests(&self) -> usize {
        self.state.client_credentials.load(Ordering::SeqCst)
    }

    /// JWT bearer grant requests (RFC 7523).
    pub fn jwt_bearer_requests(&self) -> usize {
        self.state.jwt_bearer.load(Ordering::SeqCst)
    }

    /// `refresh_token` requests.
    pub fn refresh_requests(&self) -> usize {
        self.state.refreshes.load(Ordering::SeqCst)
    }

    /// Refresh tokens sent again after they were spent (each refused with `invalid_grant`).
    pub fn refresh_reuses(&self) -> usize {
        self.state.reuses.load(Ordering::SeqCst)
    }

    /// Every refresh token sent, in order.
    pub fn refresh_tokens_sent(&self) -> Vec<String> {
        self.state.books.lock().unwrap().refresh_sent.clone()
    }

    /// A new live refresh token (for a login a test stores itself).
    pub fn issue_refresh_token(&self) -> String {
        self.state.books.lock().unwrap().new_refresh()
    }

    /// Whether `token` is an access token this server issued.
    pub fn issued(&self, token: &str) -> bool {
        self.state
            .books
            .lock()
            .unwrap()
            .access
            .iter()
            .any(|t| t == token)
    }

    /// Access tokens issued so far.
    pub fn access_tokens_issued(&self) -> usize {
        self.state.books.lock().unwrap().access.len()
    }
}

impl Books {
    fn new_refresh(&mut self) -> String {
        self.next_refresh += 1;
        let token = format!("rt-{}", self.next_refresh);
        self.refresh.insert(token.clone(), Refresh::Live);
        token
    }

    fn new_access(&mut self) -> String {
        let token = format!("at-{}", self.access.len() + 1);
        self.access.push(token.clone());
        token
    }
}

impl State {
    async fn answer(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        match (parts.method.as_str(), parts.uri.path()) {
            ("GET", "/.well-known/oauth-authorization-server") => json_response(
                StatusCode::OK,
                &json!({
                    "issuer": self.base,
                    "token_endpoint": format!("{}/token", self.base),
                    "grant_types_supported": ["client_credentials", "refresh_token", JWT_BEARER],
                    "token_endpoint_auth_methods_supported":
                        ["client_secret_basic", "client_secret_post", "none"],
                }),
            ),
            ("POST", "/token") => {
                let Ok(body) = Limited::new(body, MAX_BODY).collect().await else {
                    return oauth_error(StatusCode::BAD_REQUEST, "invalid_request");
                };
                self.token_requests.fetch_add(1, Ordering::SeqCst);
                let delay = self.delay_ms.load(Ordering::SeqCst);
                if delay > 0 {
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                }
                self.token(parts.headers.get("authorization"), &body.to_bytes())
            }
            _ => oauth_error(StatusCode::NOT_FOUND, "not_found"),
        }
    }

    fn token(
        &self,
        authorization: Option<&hyper::header::HeaderValue>,
        body: &[u8],
    ) -> Response<Full<Bytes>> {
        let form: HashMap<String, String> = form_urlencoded::parse(body).into_owned().collect();
        let basic = authorization
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Basic "))
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|pair| {
                let (id, secret) = pair.split_once(':')?;
                let decode = |s: &str| {
                    form_urlencoded::parse(format!("v={s}").as_bytes())
                        .next()
                        .map(|(_, v)| v.into_owned())
                };
                Some((decode(id)?, decode(secret)?))
            });
        let client = basic.or_else(|| {
            Some((
                form.get("client_id")?.clone(),
                form.get("client_secret").cloned().unwrap_or_default(),
            ))
        });
        match form.get("grant_type").map(String::as_str) {
            Some("client_credentials") => {
                self.client_credentials.fetch_add(1, Ordering::SeqCst);
                if client != Some((CLIENT_ID.to_owned(), CLIENT_SECRET.to_owned())) {
                    return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
                }
                let access = self.books.lock().unwrap().new_access();
                self.issue(&access, None)
            }
            Some(JWT_BEARER) => {
                self.jwt_bearer.fetch_add(1, Ordering::SeqCst);
                if form.get("assertion").is_none_or(String::is_empty) {
                    return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
                }
                let access = self.books.lock().unwrap().new_access();
                self.issue(&access, None)
            }
            Some("refresh_token") => {
                self.refreshes.fetch_add(1, Ordering::SeqCst);
                let Some(sent) = form.get("refresh_token") else {
                    return oauth_error(StatusCode::BAD_REQUEST, "invalid_request");
                };
                let mut books = self.books.lock().unwrap();
                books.refresh_sent.push(sent.clone());
                match books.refresh.get(sent).copied() {
                    Some(Refresh::Live) => {
                        books.refresh.insert(sent.clone(), Refresh::Spent);
                        let (access, refresh) = (books.new_access(), books.new_refresh());
                        drop(books);
                        self.issue(&access, Some(&refresh))
                    }
                    Some(Refresh::Spent) => {
                        self.reuses.fetch_add(1, Ordering::SeqCst);
                        oauth_error(StatusCode::BAD_REQUEST, "invalid_grant")
                    }
                    None => oauth_error(StatusCode::BAD_REQUEST, "invalid_grant"),
                }
            }
            _ => oauth_error(StatusCode::BAD_REQUEST, "unsupported_grant_type"),
        }
    }

    fn issue(&self, access: &str, refresh: Option<&str>) -> Response<Full<Bytes>> {
        let mut answer = json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.expires_in.load(Ordering::SeqCst),
        });
        if let Some(refresh) = refresh {
            answer["refresh_token"] = Value::from(refresh);
        }
        json_response(StatusCode::OK, &answer)
    }
}

fn oauth_error(status: StatusCode, error: &str) -> Response<Full<Bytes>> {
    json_response(status, &json!({ "error": error }))
}

fn json_response(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .header("cache-control", "no-store")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("a response")
}
