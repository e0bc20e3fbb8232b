//! The checks in front of rmcp, on raw HTTP requests: a foreign `Origin` (403), a missing or
//! wrong bearer token (401 naming the protected-resource metadata, which is served), an
//! oversized body (413), and a body that is no JSON-RPC message (400 with a JSON-RPC error) —
//! none of which reaches the dispatcher or stops the server.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use mcp_serve::{BearerAuth, HttpOptions, ServeError, ToolServer};
use serde_json::json;

use crate::support::{
    POST_HEADERS, Tools, all_but_hidden, bounded, initialize_body, mcp_client_http, send,
    serve_http,
};

const TOKEN: &str = "a-long-random-inbound-token";

fn with<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    POST_HEADERS.iter().chain(extra).copied().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_loopback_by_default() {
    let tools = Arc::new(Tools::default());
    let server = serve_http(&tools, all_but_hidden(), HttpOptions::default()).await;
    assert!(server.local_addr().ip().is_loopback());
    assert_eq!(server.url().path(), "/mcp");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_proxy_network_holding_every_address_is_refused_before_binding() {
    let tools = Arc::new(Tools::default());
    for everyone in ["0.0.0.0/0", "::ffff:0:0/96"] {
        let everyone: mcp_serve::IpNet = everyone.parse().unwrap();
        let options = HttpOptions::default().with_trusted_proxies([everyone]);
        let refused = ToolServer::new(tools.clone(), all_but_hidden())
            .serve_http(options)
            .await
            .map(|server| server.url().clone())
            .unwrap_err();
        assert!(
            matches!(
                &refused,
                ServeError::InvalidOption {
                    option: "trusted_proxies",
                    ..
                }
            ),
            "{refused:?}"
        );
        assert!(
            refused
                .to_string()
                .contains(&format!("{everyone} trusts every address")),
            "{refused}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_origin_is_forbidden() {
    let tools = Arc::new(Tools::default());
    let options = HttpOptions::default().with_allowed_origins(["https://app.example"]);
    let server = serve_http(&tools, all_but_hidden(), options).await;
    let url = server.url().as_str();
    for origin in [
        "http://evil.example",
        "null",
        "https://app.example:444",
        "garbage",
    ] {
        let answer = send("POST", url, &with(&[("origin", origin)]), initialize_body()).await;
        assert_eq!(answer.status, 403, "{origin}");
    }
    let own = format!("http://{}", server.local_addr());
    for origin in [
        own.as_str(),
        "https://app.example",
        "https://app.example:443",
    ] {
        let answer = send("POST", url, &with(&[("origin", origin)]), initialize_body()).await;
        assert_eq!(answer.status, 200, "{origin}: {}", answer.body);
    }
    // A `Host` that is not the server's (DNS rebinding) is refused by rmcp's check.
    let answer = send(
        "POST",
        url,
        &with(&[("host", "evil.example")]),
        initialize_body(),
    )
    .await;
    assert_eq!(answer.status, 403);
    assert_eq!(tools.calls(), 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_or_a_wrong_one_is_unauthorized_and_reaches_nothing() {
    let tools = Arc::new(Tools::default());
    let auth = BearerAuth::new(TOKEN).with_scopes(["tools"]);
    let server = serve_http(
        &tools,
        all_but_hidden(),
        HttpOptions::default().with_auth(auth),
    )
    .await;
    let url = server.url().as_str();
    let metadata_url = server.resource_metadata_url().expect("auth is on").clone();
    assert_eq!(
        metadata_url.path(),
        "/.well-known/oauth-protected-resource/mcp"
    );
    let call = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "mapping", "arguments": {}}
    })
    .to_string();
    let wrong = format!("Bearer {TOKEN}x");
    let cases: [(&[(&str, &str)], &str); 4] = [
        (&[], "Bearer resource_metadata="),
        (&[("authorization", wrong.as_str())], "invalid_token"),
        (&[("authorization", "Basic YTpi")], "invalid_token"),
        (&[("authorization", TOKEN)], "invalid_token"),
    ];
    for (extra, challenge) in cases {
        for body in [initialize_body(), call.clone()] {
            let headers: Vec<_> = POST_HEADERS.iter().chain(extra).copied().collect();
            let answer = send("POST", url, &headers, body).await;
            assert_eq!(answer.status, 401, "{extra:?}");
            let www = answer.headers["www-authenticate"].to_str().unwrap();
            assert!(
                www.contains(&format!("resource_metadata=\"{metadata_url}\"")),
                "{www}"
            );
            assert!(www.contains(challenge), "{www}");
            assert!(!www.contains(TOKEN), "{www}");
        }
    }
    assert_eq!(tools.calls(), 0, "nothing reached the dispatcher");

    // The metadata (RFC 9728) names the endpoint as the resource; no token needed.
    for path in [
        metadata_url.as_str(),
        &format!(
            "http://{}/.well-known/oauth-protected-resource",
            server.local_addr()
        ),
    ] {
        let answer = send("GET", path, &[], Bytes::new()).await;
        assert_eq!(answer.status, 200, "{path}");
        let doc = answer.json();
        assert_eq!(doc["resource"], server.url().as_str());
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
        assert_eq!(doc["scopes_supported"], json!(["tools"]));
    }

    // With the token, a real client works.
    let runner = mcp_client_http(server.url(), Some(TOKEN)).await;
    let out = crate::support::call_through(&runner, "mapping", json!({"a": 1})).await;
    assert_eq!(out.unwrap().structured, Some(json!({"sum": 1.0})));
    assert_eq!(tools.calls(), 1);
    agent_core::Runner::close(&runner).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_50_mb_body_is_too_large() {
    let tools = Arc::new(Tools::default());
    let server = serve_http(&tools, all_but_hidden(), HttpOptions::default()).await;
    let url = server.url().as_str();
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(50 * 1024 * 1024)
    );

    // Declared with Content-Length: refused before it is read.
    let answer = send("POST", url, POST_HEADERS, huge.clone()).await;
    assert_eq!(answer.status, 413);

    // Chunked, no length: refused once the limit is passed while reading.
    let chunks: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = Bytes::from(huge)
        .chunks(1 << 20)
        .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
        .collect();
    let body = StreamBody::new(futures::stream::iter(chunks)).boxed();
    let client = Client::builder(TokioExecutor::new()).build_http();
    let mut request = http::Request::post(url);
    for (name, value) in POST_HEADERS {
        request = request.header(*name, *value);
    }
    let response = bounded(
        "a chunked upload",
        client.request(request.body(body).unwrap()),
    )
    .await
    .expect("an answer");
    assert_eq!(response.status(), 413);

    // The server goes on.
    let answer = send("POST", url, POST_HEADERS, initialize_body()).await;
    assert_eq!(answer.status, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_rpc_is_answered_and_the_server_stays_up() {
    let tools = Arc::new(Tools::default());
    let server = serve_http(&tools, all_but_hidden(), HttpOptions::default()).await;
    let url = server.url().as_str();
    // A session opened before the garbage keeps working after it.
    let runner = mcp_client_http(server.url(), None).await;

    let cases: [(&str, i64, serde_json::Value); 6] = [
        ("{not json", -32700, json!(null)),
        ("", -32700, json!(null)),
        (&"[".repeat(100_000), -32700, json!(null)),
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            -32600,
            json!(null),
        ),
        (r#"{"jsonrpc":"2.0","id":7,"method":42}"#, -32600, json!(7)),
        (
            r#"{"jsonrpc":"1.0","id":"x","method":"ping"}"#,
            -32600,
            json!("x"),
        ),
    ];
    for (body, code, id) in cases {
        let answer = send("POST", url, POST_HEADERS, body.to_owned()).await;
        assert_eq!(answer.status, 400, "{}", &body[..body.len().min(40)]);
        let error = answer.json();
        assert_eq!(error["jsonrpc"], "2.0");
        assert_eq!(error["error"]["code"], code, "{error}");
        assert_eq!(error.get("id").cloned().unwrap_or(json!(null)), id);
    }
    // rmcp refuses a body without `text/event-stream` in `Accept` before it reads the body: a
    // body that is no message is still answered as such.
    let json_only = &[
        ("content-type", "application/json"),
        ("accept", "application/json"),
    ];
    let answer = send("POST", url, json_only, "{not json".to_owned()).await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.json()["error"]["code"], -32700);
    // A message with the same fault gets rmcp's own answer.
    let answer = send("POST", url, json_only, initialize_body()).await;
    assert_eq!(answer.status, 406);
    assert_eq!(tools.calls(), 0);

    // In a session, `tools/call` whose `arguments` are no object: invalid params (-32602).
    let opened = send("POST", url, POST_HEADERS, initialize_body()).await;
    let session = opened.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let in_session = with(&[
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ]);
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    send("POST", url, &in_session, initialized).await;
    let bad = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"mapping","arguments":[1,2]}}"#;
    let answer = send("POST", url, &in_session, bad).await;
    assert!(
        answer.body.contains(r#""code":-32602"#) && answer.body.contains(r#""id":9"#),
        "{}",
        answer.body
    );
    assert_eq!(tools.calls(), 0);

    let out = crate::support::call_through(&runner, "scalar", json!({"a": 2, "b": 3})).await;
    assert_eq!(out.unwrap().structured, Some(json!({"result": 5.0})));
    agent_core::Runner::close(&runner).await;
    server.shutdown().await;
}
