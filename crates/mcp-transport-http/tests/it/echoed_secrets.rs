//! A server that echoes the credentials it was sent never gets them shown: a JSON-RPC error
//! quoting the `Authorization` header, a 500 or 400 whose body lists the request headers, an
//! SSE event or a tool result repeating them, a `WWW-Authenticate` challenge or a
//! `Content-Type` naming the token — for a bearer token, an `X-Api-Key` header, a static
//! transport header and an OAuth access token. Each value (whole, and the token without its
//! `Bearer ` scheme, also JSON-escaped) is `[REDACTED]` in every level of the error and in
//! what rmcp delivers.

use crate::common;
use crate::oauth_support;

use std::sync::Arc;

use common::{Handler, Script, bounded, echo, json_answer, respond, scripted, serve, text_of};
use http::StatusCode;
use http::request::Parts;
use mcp_config::{REDACTED, Secret, SecretSource, ServerSpec, TransportSpec};
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};
use oauth_support::{AsState, AuthServer, SECRET, chain, oauth_spec};
use serde_json::{Value, json};

/// With a `/` and a `+`, as base64 tokens have: JSON encoders may escape the `/`.
const TOKEN: &str = "tok/very+secret=1";
const API_KEY: &str = "key-very-secret-2";
const STATIC: &str = "static-very-secret-3";

/// How the server answers `tools/call`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Echo {
    /// A JSON-RPC error quoting the headers.
    JsonRpcError,
    /// The same, with `/` escaped as `\/` (as PHP's encoder does).
    JsonRpcErrorEscaped,
    /// A 500 whose JSON body is such an error.
    Json500,
    /// A 400 whose text body lists the headers.
    Text400,
    /// An SSE event carrying such an error.
    SseError,
    /// A tool result repeating the headers, as JSON.
    JsonResult,
    /// A tool result repeating the headers, as an SSE event.
    SseResult,
    /// A 401 whose challenge quotes the headers.
    Unauthorized,
    /// A 403 whose challenge names the token as the scope.
    Forbidden,
    /// A `Content-Type` naming the token.
    ContentType,
}

const ALL: [Echo; 10] = [
    Echo::JsonRpcError,
    Echo::JsonRpcErrorEscaped,
    Echo::Json500,
    Echo::Text400,
    Echo::SseError,
    Echo::JsonResult,
    Echo::SseResult,
    Echo::Unauthorized,
    Echo::Forbidden,
    Echo::ContentType,
];

/// The request's credential headers, as an echoing server would list them.
fn echoed(parts: &Parts) -> String {
    ["authorization", "x-api-key", "x-static"]
        .iter()
        .filter_map(|name| {
            let value = parts.headers.get(*name)?.to_str().ok()?;
            Some(format!("{name}: {value}"))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The bare token of the request's `Authorization` header.
fn token(parts: &Parts) -> String {
    parts
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .map(|(_, t)| t.to_owned())
        .unwrap_or_default()
}

fn answer(mode: Echo, parts: &Parts, id: &Value) -> http::Response<common::Body> {
    let text = echoed(parts);
    let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": format!("denied for {text}")}});
    let result = json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}});
    let sse = |message: &Value| {
        respond(
            StatusCode::OK,
            "text/event-stream",
            format!("data: {message}\n\n"),
        )
    };
    let challenged = |status: StatusCode, challenge: String| {
        let mut response = respond(status, "text/plain", "");
        response
            .headers_mut()
            .insert("www-authenticate", challenge.parse().unwrap());
        response
    };
    match mode {
        Echo::JsonRpcError => json_answer(&error),
        Echo::JsonRpcErrorEscaped => respond(
            StatusCode::OK,
            "application/json",
            error.to_string().replace('/', "\\/"),
        ),
        Echo::Json500 => respond(
            StatusCode::INTERNAL_SERVER_ERROR,
            "application/json",
            error.to_string(),
        ),
        Echo::Text400 => respond(
            StatusCode::BAD_REQUEST,
            "text/plain",
            format!("bad request; you sent {text}"),
        ),
        Echo::SseError => sse(&error),
        Echo::JsonResult => json_answer(&result),
        Echo::SseResult => sse(&result),
        Echo::Unauthorized => challenged(
            StatusCode::UNAUTHORIZED,
            format!(r#"Bearer error="invalid_token", error_description="refused {text}""#),
        ),
        Echo::Forbidden => challenged(
            StatusCode::FORBIDDEN,
            format!(
                r#"Bearer error="insufficient_scope", scope="{}""#,
                token(parts)
            ),
        ),
        Echo::ContentType => respond(
            StatusCode::OK,
            &format!("text/x-echo; token={}", token(parts)),
            "",
        ),
    }
}

/// A server echoing in `mode`; with `tokens`, only their live tokens pass (401 otherwise).
fn echo_server(mode: Echo, tokens: Option<Arc<AsState>>) -> Handler {
    let script: Script = Arc::new(move |parts: &Parts, message: &Value| {
        if let Some(tokens) = &tokens
            && !tokens.accepts(&token(parts))
        {
            return Some(respond(StatusCode::UNAUTHORIZED, "text/plain", ""));
        }
        (message["method"] == "tools/call").then(|| answer(mode, parts, &message["id"]))
    });
    scripted(script)
}

/// Opens `spec`, calls `echo` once and returns everything shown of the outcome: the result's
/// text and `Debug`, or the error's every level and its `Debug`.
async fn outcome(connector: &HttpConnector, spec: &ServerSpec) -> String {
    let connection = connector.connect(spec).await.unwrap();
    let client = rmcp::serve_client((), connection.transport).await.unwrap();
    let shown = match client.peer().call_tool(echo("x")).await {
        Ok(result) => format!("ok: {} {result:?}", text_of(&result)),
        Err(err) => format!("error: {} {err:?}", chain(&err)),
    };
    let _ = client.cancel().await;
    shown
}

/// `shown` proves the echo arrived (a redaction) and holds none of `secrets`.
fn assert_scrubbed(mode: Echo, shown: &str, secrets: &[&str]) {
    assert!(
        shown.contains(REDACTED),
        "{mode:?}: nothing echoed? {shown}"
    );
    for secret in secrets {
        let bare = secret.split_once(' ').map_or(*secret, |(_, t)| t);
        assert!(!shown.contains(bare), "{mode:?}: `{bare}` shown: {shown}");
        let escaped = bare.replace('/', "\\/");
        assert!(
            !shown.contains(&escaped),
            "{mode:?}: `{escaped}` shown: {shown}"
        );
    }
}

#[tokio::test]
async fn static_credentials_echoed_by_the_server_are_redacted() {
    bounded(async {
        let connector = HttpConnector::new(HttpOptions::default()).unwrap();
        for mode in ALL {
            let server = serve(echo_server(mode, None)).await;
            let mut spec = server.spec("echoing");
            let TransportSpec::StreamableHttp(http) = &mut spec.transport else {
                unreachable!()
            };
            http.headers.insert("X-Static".into(), Secret::from(STATIC));
            spec.auth
                .headers
                .insert("X-Api-Key".into(), Secret::from(API_KEY));
            spec.auth.bearer = Some(SecretSource::Inline(Secret::from(TOKEN)));

            let shown = outcome(&connector, &spec).await;
            assert_scrubbed(mode, &shown, &[TOKEN, API_KEY, STATIC]);
            // The server did receive them (and so could echo them).
            let call = server
                .seen()
                .into_iter()
                .find(|s| s.rpc.as_deref() == Some("tools/call"))
                .unwrap();
            assert_eq!(call.header("x-api-key"), Some(API_KEY));
            assert_eq!(
                call.header("authorization"),
                Some(format!("Bearer {TOKEN}").as_str())
            );
        }
    })
    .await;
}

#[tokio::test]
async fn oauth_access_tokens_echoed_by_the_server_are_redacted() {
    bounded(async {
        let auth = AuthServer::start(vec!["client_secret_basic"], None).await;
        auth.state
            .token_prefix
            .set("access-token-echo-".to_owned())
            .unwrap();
        let connector = HttpConnector::new(HttpOptions::default()).unwrap();
        for mode in ALL {
            let server = serve(echo_server(mode, Some(auth.state.clone()))).await;
            let mut spec = oauth_spec(&server, Some(&auth.token_url()), SECRET, None);
            spec.auth
                .headers
                .insert("X-Api-Key".into(), Secret::from(API_KEY));

            let shown = outcome(&connector, &spec).await;
            let issued = auth.state.issued.lock().unwrap().clone();
            let mut secrets: Vec<&str> = issued.iter().map(String::as_str).collect();
            secrets.extend([API_KEY, SECRET]);
            assert_scrubbed(mode, &shown, &secrets);
        }
        // After a 401 the token was renewed, and the new one is redacted too.
        assert!(auth.state.issued.lock().unwrap().len() >= 2);
    })
    .await;
}
