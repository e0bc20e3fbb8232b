//! Every error the adapter can be made to give, through the public API: no level of its chain
//! repeats another, none names a Rust type, and the `Model` trait's error names model and base
//! URL once.

use std::time::Duration;

use agent_core::{Message, Model, ModelRequest, Role};
use agent_model_openai::{Limits, OpenAiConfig, OpenAiModel, RetryPolicy};
use serde_json::json;

use crate::provider::{End, Provider, Reply, completion};

fn request() -> ModelRequest {
    ModelRequest::new(vec![Message::new(Role::User, "Hi.")], vec![])
}

fn check(error: &(dyn std::error::Error + 'static)) {
    let mut level: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = level {
        let text = e.to_string();
        assert!(!text.is_empty(), "an empty level in {error:?}");
        for type_path in ["::", "Error {", "Kind("] {
            assert!(!text.contains(type_path), "a type in `{text}`");
        }
        if let Some(source) = e.source() {
            let inner = source.to_string();
            assert!(
                !text.contains(&inner),
                "`{text}` repeats its source `{inner}`"
            );
        }
        level = e.source();
    }
}

#[tokio::test]
async fn no_level_of_an_error_chain_repeats_another() {
    let short_wait = Duration::from_millis(100);
    let provider = Provider::start(|n, _| match n {
        0 => Reply::status(500, vec![], json!({"error": {"message": "boom"}})),
        1 => Reply::status(500, vec![], json!({"error": {"message": "boom"}})),
        2 => Reply::Reset,
        3 => Reply::Sse {
            frames: vec![],
            then: End::Stall,
        },
        4 => Reply::Endless,
        5 => Reply::Sse {
            frames: vec!["data: {\"error\": {\"message\": \"stream failed\"}}\n\n".into()],
            then: End::Close,
        },
        6 => Reply::Sse {
            frames: vec!["data: not json\n\n".into()],
            then: End::Close,
        },
        7 => Reply::Sse {
            frames: vec!["data: {\"choices\": []}\n\n".into()],
            then: End::Close,
        },
        _ => Reply::ok(completion(
            json!({"role": "assistant", "tool_calls": [
                {"id": "c", "function": {"name": "f", "arguments": "[1]"}}]}),
            "tool_calls",
            None,
        )),
    })
    .await;
    let base = provider
        .config()
        .with_retry(RetryPolicy::none())
        .with_limits(Limits::default().with_max_body_bytes(64 * 1024));
    let retrying = OpenAiModel::new(
        base.clone().with_retry(
            RetryPolicy::default()
                .with_max_retries(1)
                .with_initial_backoff(Duration::from_millis(1)),
        ),
    )
    .unwrap();
    let single = OpenAiModel::new(base.clone()).unwrap();
    let short = base.timeouts.with_request(short_wait).with_idle(short_wait);
    let impatient = OpenAiModel::new(base.clone().with_timeouts(short)).unwrap();

    let mut errors = Vec::new();
    // 0, 1: HTTP 500 twice, given up.
    errors.push(retrying.complete(request()).await.unwrap_err());
    // 2: reset.
    errors.push(single.complete(request()).await.unwrap_err());
    // 3: a stream that never sends an event.
    errors.push(impatient.complete(request()).await.unwrap_err());
    // 4: a body over the bound (not streamed, so the JSON body is read).
    let whole = OpenAiModel::new(base.clone().with_stream(false)).unwrap();
    errors.push(whole.complete(request()).await.unwrap_err());
    // 5, 6, 7: an error event, a chunk that is not JSON, a stream cut.
    for _ in 0..3 {
        errors.push(single.complete(request()).await.unwrap_err());
    }
    // 8: arguments that are not an object: not an error of the answer (the call is
    // malformed and never runs), but the raw call's own parse error is checked like the rest.
    let answer = single.chat(&request()).await.unwrap();
    let parse_error = answer.tool_calls[0].parse().unwrap_err();
    check(&parse_error);
    assert_eq!(
        agent_core::error_chain(&parse_error),
        "the arguments of tool call `c` of tool `f` are not a JSON object: it is an array"
    );
    assert_eq!(provider.requests().len(), 9);

    // Refused connections and bad configuration.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let closed = OpenAiModel::new(
        base.clone()
            .with_base_url(format!("http://127.0.0.1:{port}/v1")),
    )
    .unwrap();
    errors.push(closed.complete(request()).await.unwrap_err());

    let texts: Vec<String> = errors.iter().map(|e| agent_core::error_chain(e)).collect();
    for (error, text) in errors.iter().zip(&texts) {
        check(error);
        assert!(
            text.starts_with("model request failed: model `test-model` at http://"),
            "{text}"
        );
        assert_eq!(text.matches("test-model").count(), 1, "{text}");
    }
    for expected in [
        "gave up after 2 attempts: HTTP 500 Internal Server Error: boom",
        "failed: Connection reset by peer",
        "idle-stream timeout of 0.1 s expired",
        "the response body exceeds the limit of 65536 bytes (limits.max_body_bytes)",
        "the provider reported an error: stream failed",
        "the answer is not a chat completion: a stream chunk is not valid: ",
        "the stream ended before the answer was complete",
        "could not connect to 127.0.0.1:",
    ] {
        assert!(
            texts.iter().any(|t| t.contains(expected)),
            "no error says `{expected}`: {texts:#?}"
        );
    }

    for config in [
        OpenAiConfig::new("m").with_base_url("localhost:8000"),
        OpenAiConfig::new(""),
        OpenAiConfig::new("m").with_header("Bad Name", "v"),
    ] {
        check(&OpenAiModel::new(config).unwrap_err());
    }
}
