//! The OpenAI-compatible back end against a scripted hyper server.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use mcp_catalog::search::{EmbedError, EmbedKind, Embedder};
use mcp_embed::{ApiKey, OpenAiEmbedConfig, OpenAiEmbedder};
use serde_json::{Value, json};

type Reply = (u16, String);

/// A server answering each request with `script(n, request body, authorization)`.
async fn serve(
    script: impl Fn(usize, &Value, Option<&str>) -> Reply + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let script = Arc::new(script);
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (script, log, count) = (script.clone(), log.clone(), count.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<Incoming>| {
                    let (script, log, count) = (script.clone(), log.clone(), count.clone());
                    async move {
                        let auth = req
                            .headers()
                            .get("authorization")
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_owned);
                        assert_eq!(req.uri().path(), "/v1/embeddings");
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let body: Value = serde_json::from_slice(&body).unwrap();
                        let n = count.fetch_add(1, Ordering::SeqCst);
                        let (status, text) = script(n, &body, auth.as_deref());
                        log.lock().unwrap().push(body);
                        Ok::<_, Infallible>(
                            hyper::Response::builder()
                                .status(status)
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from(text)))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (format!("http://{addr}/v1"), seen)
}

/// Vectors `[i, 1, 0]` for the request's texts, listed in reverse order with their indices.
fn vectors(body: &Value) -> String {
    let n = body["input"].as_array().map_or(0, Vec::len);
    let data: Vec<Value> = (0..n)
        .rev()
        .map(|i| json!({"object": "embedding", "index": i, "embedding": [i as f32, 1.0, 0.0]}))
        .collect();
    json!({"object": "list", "data": data, "model": "m"}).to_string()
}

#[tokio::test]
async fn vectors_come_back_in_the_order_of_the_texts_and_the_dimension_is_probed() {
    let (url, seen) = serve(|_, body, auth| {
        assert_eq!(auth, Some("Bearer sk-test-1234"));
        (200, vectors(body))
    })
    .await;
    let config = OpenAiEmbedConfig::new(&url, "mini")
        .with_api_key(Some(ApiKey::new("sk-test-1234")))
        .with_input_type(true);
    let embedder = OpenAiEmbedder::connect(config).await.unwrap();
    assert_eq!(embedder.dimension(), 3);
    assert!(embedder.model_id().starts_with("mini@http://127.0.0.1:"));
    let texts: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
    let v = embedder.embed(&texts, EmbedKind::Document).await.unwrap();
    assert_eq!(v, [[0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [2.0, 1.0, 0.0]]);
    let seen = seen.lock().unwrap();
    assert_eq!(seen[1]["model"], "mini");
    assert_eq!(seen[1]["input_type"], "passage");
    assert_eq!(seen[0]["input_type"], "query");
    assert!(!format!("{embedder:?}").contains("sk-test"));
}

#[tokio::test]
async fn a_server_error_is_tried_again() {
    let (url, _) = serve(|n, body, _| {
        if n == 1 {
            (503, r#"{"error": "busy"}"#.into())
        } else {
            (200, vectors(body))
        }
    })
    .await;
    let embedder = OpenAiEmbedder::connect(OpenAiEmbedConfig::new(&url, "m"))
        .await
        .unwrap();
    let v = embedder
        .embed(&["x".to_owned()], EmbedKind::Query)
        .await
        .unwrap();
    assert_eq!(v.len(), 1);
}

#[tokio::test]
async fn a_refusal_is_not_tried_again_and_never_shows_the_key() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let (url, _) = serve(move |_, _, _| {
        counted.fetch_add(1, Ordering::SeqCst);
        (
            401,
            r#"{"error": "bad key sk-secret-9876\u0007 given"}"#.into(),
        )
    })
    .await;
    let config =
        OpenAiEmbedConfig::new(&url, "m").with_api_key(Some(ApiKey::new("sk-secret-9876")));
    let err = OpenAiEmbedder::connect(config).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("401"), "{text}");
    assert!(!text.contains("sk-secret"), "{text}");
    assert!(!text.contains('\u{7}'), "{text}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_wrong_count_or_a_corrupt_body_is_an_error() {
    let (url, _) = serve(|n, body, _| match n {
        0 => (200, vectors(body)),
        1 => (200, vectors(&json!({"input": ["one", "two"]}))),
        _ => (200, "{not json".into()),
    })
    .await;
    let embedder = OpenAiEmbedder::connect(OpenAiEmbedConfig::new(&url, "m"))
        .await
        .unwrap();
    let one = ["x".to_owned()];
    let err = embedder.embed(&one, EmbedKind::Query).await.unwrap_err();
    assert!(
        matches!(err, EmbedError::Invalid(ref t) if t.contains("2 vectors for 1")),
        "{err}"
    );
    let err = embedder.embed(&one, EmbedKind::Query).await.unwrap_err();
    assert!(
        err.to_string().contains("not an embeddings answer"),
        "{err}"
    );
}

#[tokio::test]
async fn a_key_echoed_where_the_shown_text_is_cut_leaves_no_piece_of_it() {
    // The key starts 10 characters before the 300-character cut of the shown text.
    let key = "sk-proj-SECRETVALUE-4242";
    let body = format!("{}{key} was refused", "x".repeat(290));
    let (url, _) = serve(move |_, _, _| (401, body.clone())).await;
    let config = OpenAiEmbedConfig::new(&url, "m").with_api_key(Some(ApiKey::new(key)));
    let text = OpenAiEmbedder::connect(config)
        .await
        .unwrap_err()
        .to_string();
    assert!(text.contains("<redacted>"), "{text}");
    assert!(!text.contains("sk-proj"), "{text}");
}

#[tokio::test]
async fn duplicated_missing_or_out_of_range_indices_are_an_error() {
    let answer = |indices: Vec<Value>| {
        let data: Vec<Value> = indices
            .into_iter()
            .map(|i| json!({"index": i, "embedding": [1.0, 0.0]}))
            .collect();
        (200, json!({"data": data}).to_string())
    };
    let (url, _) = serve(move |n, _, _| match n {
        0 => answer(vec![json!(0)]),
        1 => answer(vec![json!(1), json!(1), json!(7)]),
        2 => answer(vec![json!(0), json!(2), json!(3)]),
        3 => answer(vec![json!(0), Value::Null, json!(1)]),
        _ => answer(vec![json!(2), json!(0), json!(1)]),
    })
    .await;
    let embedder = OpenAiEmbedder::connect(OpenAiEmbedConfig::new(&url, "m"))
        .await
        .unwrap();
    let three: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
    for shown in ["[1, 1, 7]", "[0, 2, 3]", "[none, 0, 1]"] {
        let err = embedder
            .embed(&three, EmbedKind::Document)
            .await
            .unwrap_err();
        assert!(
            matches!(err, EmbedError::Invalid(ref t)
                if t.contains(&format!("returned indices {shown} for 3 texts"))),
            "{err}"
        );
    }
    // A permutation of 0..n is fine.
    let v = embedder.embed(&three, EmbedKind::Document).await.unwrap();
    assert_eq!(v.len(), 3);
}

#[tokio::test]
async fn a_bad_base_url_or_a_closed_port_is_an_error() {
    let err = OpenAiEmbedder::connect(OpenAiEmbedConfig::new("ftp://x/v1", "m"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("scheme"), "{err}");
    let err = OpenAiEmbedder::connect(OpenAiEmbedConfig::new("http://u:p@x/v1", "m"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("credentials"), "{err}");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = OpenAiEmbedder::connect(OpenAiEmbedConfig::new(
        format!("http://127.0.0.1:{port}/v1"),
        "m",
    ))
    .await
    .unwrap_err();
    assert!(err.to_string().contains("127.0.0.1"), "{err}");
}
