//! A client secret never shows where a run reports on its servers: not in events,
//! not in an error's `Display` or `Debug`, not in a skipped server's cause — when the token
//! endpoint refuses the secret (and even echoes it back), and when it accepts it and a call
//! succeeds (nor does the access token show then).
//!
//! The protected MCP server and its token endpoint are a small scripted HTTP/1.1 server on
//! 127.0.0.1 (one request per connection): the endpoint takes `client_secret_post`, and the
//! MCP endpoint answers stateless JSON only to requests with the token it issued (401
//! otherwise).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agent_core::{Event, Runner};
use integration_tests::harness::{Harness, bounded, call_tool, chain};
use mcp_config::{Config, PartialFailure, ServerSpec, SpecOrigin};
use serde_json::{Value, json};

const CLIENT_ID: &str = "agent-service";
const SECRET: &str = "cc-secret-Vq7Zr2Lm9Xw4";
const WRONG_SECRET: &str = "cc-wrong-Hs3Kd8Pf1Ty6";
const TOKEN: &str = "at-Qm5Wn8Ej2Rc7";

/// The scripted server: its URLs and what it was asked.
struct Protected {
    base: String,
    token_requests: Arc<AtomicUsize>,
    authorized_mcp_requests: Arc<AtomicUsize>,
}

impl Protected {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let token_requests = Arc::new(AtomicUsize::new(0));
        let authorized_mcp_requests = Arc::new(AtomicUsize::new(0));
        let counters = (token_requests.clone(), authorized_mcp_requests.clone());
        // The accept loop lives as long as the test process; each connection gets a thread.
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let counters = counters.clone();
                std::thread::spawn(move || {
                    let _ = serve_one(stream, &counters.0, &counters.1);
                });
            }
        });
        Self {
            base,
            token_requests,
            authorized_mcp_requests,
        }
    }

    fn spec(&self, secret: &str) -> ServerSpec {
        ServerSpec::from_json(
            &json!({
                "name": "protected",
                "url": format!("{}/mcp", self.base),
                "connect_timeout_seconds": 10,
                "auth": {"oauth_client_credentials": {
                    "token_url": format!("{}/token", self.base),
                    "client_id": CLIENT_ID,
                    "client_secret": secret,
                    "token_endpoint_auth_method": "client_secret_post",
                }}
            }),
            SpecOrigin::Operator,
        )
        .expect("a valid spec")
    }
}

/// Reads one request, answers it, closes the connection.
fn serve_one(
    stream: TcpStream,
    token_requests: &AtomicUsize,
    authorized: &AtomicUsize,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut words = line.split_whitespace();
    let (method, path) = (
        words.next().unwrap_or_default().to_owned(),
        words.next().unwrap_or_default().to_owned(),
    );
    let (mut length, mut authorization) = (0, None);
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "authorization" => authorization = Some(value.trim().to_owned()),
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let body = String::from_utf8_lossy(&body).into_owned();

    let (status, headers, answer) = match (method.as_str(), path.as_str()) {
        ("POST", "/token") => {
            token_requests.fetch_add(1, Ordering::SeqCst);
            token_answer(&body)
        }
        (_, "/mcp") if authorization.as_deref() != Some(&format!("Bearer {TOKEN}")) => (
            "401 Unauthorized",
            "WWW-Authenticate: Bearer error=\"invalid_token\"\r\n",
            Some(json!({"error": "invalid_token"})),
        ),
        ("POST", "/mcp") => {
            authorized.fetch_add(1, Ordering::SeqCst);
            mcp_answer(&body)
        }
        ("DELETE", "/mcp") => ("200 OK", "", None),
        _ => ("405 Method Not Allowed", "", None),
    };
    let answer = answer.map(|v| v.to_string()).unwrap_or_default();
    let content_type = if answer.is_empty() {
        ""
    } else {
        "Content-Type: application/json\r\n"
    };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status}\r\n{content_type}{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{answer}",
        answer.len()
    )?;
    stream.flush()
}

/// The token endpoint: `client_secret_post` with the right secret gets [`TOKEN`]; anything
/// else is `invalid_client`, with the secret it was sent echoed in the description (a
/// careless server; the client must not pass it on).
fn token_answer(form: &str) -> (&'static str, &'static str, Option<Value>) {
    let field = |name: &str| {
        form.split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.to_owned())
    };
    let secret = field("client_secret").unwrap_or_default();
    if field("grant_type").as_deref() == Some("client_credentials")
        && field("client_id").as_deref() == Some(CLIENT_ID)
        && secret == SECRET
    {
        let token = json!({"access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600});
        return ("200 OK", "", Some(token));
    }
    let refusal = json!({
        "error": "invalid_client",
        "error_description": format!("client secret {secret} is not valid"),
    });
    ("401 Unauthorized", "", Some(refusal))
}

/// A stateless MCP server with one tool, `echo`.
fn mcp_answer(body: &str) -> (&'static str, &'static str, Option<Value>) {
    let Ok(request) = serde_json::from_str::<Value>(body) else {
        return ("400 Bad Request", "", None);
    };
    let Some(id) = request.get("id").cloned() else {
        return ("202 Accepted", "", None); // a notification
    };
    let params = request.get("params").cloned().unwrap_or(json!({}));
    let result = match request["method"].as_str().unwrap_or_default() {
        "initialize" => json!({
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "protected", "version": "1.0.0"},
        }),
        "tools/list" => json!({"tools": [{
            "name": "echo",
            "description": "Returns its arguments.",
            "inputSchema": {"type": "object"},
        }]}),
        "tools/call" => {
            let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
            json!({
                "content": [{"type": "text", "text": arguments.to_string()}],
                "structuredContent": arguments,
            })
        }
        other => {
            let error = json!({"code": -32601, "message": format!("no method {other}")});
            return (
                "200 OK",
                "",
                Some(json!({"jsonrpc": "2.0", "id": id, "error": error})),
            );
        }
    };
    (
        "200 OK",
        "",
        Some(json!({"jsonrpc": "2.0", "id": id, "result": result})),
    )
}

/// Every way `events` can be shown.
fn shown(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| format!("{e:?}\n{}\n", serde_json::to_string(e).unwrap()))
        .collect()
}

fn assert_hidden(what: &str, text: &str, secrets: &[&str]) {
    for secret in secrets {
        assert!(!text.contains(secret), "{what} shows `{secret}`: {text}");
    }
}

#[tokio::test]
async fn a_refused_secret_shows_nowhere() {
    let server = Protected::start();
    let harness = Harness::new();
    let config = Config::new(vec![server.spec(WRONG_SECRET)])
        .unwrap()
        .with_partial_failure(PartialFailure::SkipUnavailable);
    let client = harness.builder(config).build();

    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();
    assert!(runner.sessions().is_empty());
    assert_eq!(server.token_requests.load(Ordering::SeqCst), 1);
    assert_eq!(server.authorized_mcp_requests.load(Ordering::SeqCst), 0);

    let skipped = runner.skipped();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].server, "protected");
    let cause = chain(&skipped[0].error);
    // The refusal is reported, with the echoed secret removed.
    assert!(cause.contains("invalid_client"), "{cause}");
    assert!(
        cause.contains("client secret [REDACTED] is not valid"),
        "{cause}"
    );
    let debug = format!("{:?}", skipped[0].error);
    let display = skipped[0].error.to_string();
    let events = harness.events.all();
    assert!(!events.is_empty());
    for (what, text) in [
        ("the cause chain", cause),
        ("the error's Display", display),
        ("the error's Debug", debug),
        ("the events", shown(&events)),
    ] {
        assert_hidden(what, &text, &[WRONG_SECRET, SECRET]);
    }

    // Without skip_unavailable the run fails, and its error hides the secret as well.
    let config = Config::new(vec![server.spec(WRONG_SECRET)]).unwrap();
    let client = harness.builder(config).build();
    let Err(err) = bounded(client.open_runner(&harness.input())).await else {
        panic!("fail_fast refuses the run");
    };
    assert_hidden("the run's error", &chain(&err), &[WRONG_SECRET]);
    assert_hidden("the run's error", &format!("{err:?}"), &[WRONG_SECRET]);

    bounded(runner.close()).await;
}

#[tokio::test]
async fn an_accepted_secret_and_its_token_show_nowhere() {
    let server = Protected::start();
    let harness = Harness::new();
    let config = Config::new(vec![server.spec(SECRET)])
        .unwrap()
        .with_partial_failure(PartialFailure::SkipUnavailable);
    let client = harness.builder(config).build();

    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();
    assert!(runner.skipped().is_empty());
    assert_eq!(runner.sessions().len(), 1);
    let out = call_tool(&runner, "protected__echo", json!({"hello": "world"}))
        .await
        .unwrap();
    assert_eq!(out.structured, Some(json!({"hello": "world"})));
    assert_eq!(server.token_requests.load(Ordering::SeqCst), 1);
    assert!(server.authorized_mcp_requests.load(Ordering::SeqCst) >= 3);

    bounded(runner.close()).await;
    let events = harness.events.all();
    assert!(!events.is_empty());
    assert_hidden("the events", &shown(&events), &[SECRET, TOKEN]);
    assert_hidden("the call's output", &format!("{out:?}"), &[SECRET, TOKEN]);
    assert_hidden(
        "the session",
        &format!("{:?}", runner.sessions()[0].spec()),
        &[SECRET, TOKEN],
    );
}
