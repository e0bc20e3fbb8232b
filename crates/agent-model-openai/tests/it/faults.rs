//! Endpoints that stall, send too much, or are not there.

use std::time::Duration;

use agent_core::{Message, ModelRequest, Role};
use agent_model_openai::{
    LimitKind, Limits, OpenAiConfig, OpenAiError, OpenAiModel, RetryPolicy, TimeoutKind,
};
use serde_json::json;

use crate::provider::{End, Provider, Reply, completion, shown};

fn request() -> ModelRequest {
    ModelRequest::new(vec![Message::new(Role::User, "Hi.")], vec![])
}

#[tokio::test]
async fn a_stream_that_stops_sending_fails_with_the_idle_timeout() {
    let provider = Provider::always(|| Reply::Sse {
        frames: vec![format!(
            "data: {}\n\n: keep-alive\n\n",
            json!({"choices": [{"delta": {"content": "Thinking"}}]})
        )],
        then: End::Stall,
    })
    .await;
    let config = provider.config();
    let timeouts = config.timeouts.with_idle(Duration::from_millis(200));
    let model = OpenAiModel::new(config.with_timeouts(timeouts)).unwrap();

    let mut text = String::new();
    let err = model
        .chat_stream(&request(), &mut |d| {
            if let agent_model_openai::StreamDelta::Text(t) = d {
                text.push_str(t);
            }
        })
        .await
        .unwrap_err();
    assert_eq!(text, "Thinking");
    assert!(
        matches!(
            err,
            OpenAiError::Timeout {
                kind: TimeoutKind::IdleStream,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "idle-stream timeout of 0.2 s expired");
    // Text was handed on: the attempt is not repeated.
    assert_eq!(provider.requests().len(), 1);
}

/// A stream of `frame` every 5 ms, for ever, read with these idle and whole-stream timeouts
/// (and retries allowed): the error, the text handed on, how long it took, and the requests.
async fn read_endless_stream(
    frame: String,
    idle: Duration,
    stream: Duration,
) -> (OpenAiError, String, Duration, usize) {
    let provider = Provider::always(move || Reply::Trickle {
        frame: frame.clone(),
        every: Duration::from_millis(5),
    })
    .await;
    let config = provider.config();
    let timeouts = config.timeouts.with_idle(idle).with_stream(stream);
    let model = OpenAiModel::new(config.with_timeouts(timeouts)).unwrap();
    let mut text = String::new();
    let started = tokio::time::Instant::now();
    let err = model
        .chat_stream(&request(), &mut |d| {
            if let agent_model_openai::StreamDelta::Text(t) = d {
                text.push_str(t);
            }
        })
        .await
        .unwrap_err();
    (err, text, started.elapsed(), provider.requests().len())
}

#[tokio::test]
async fn a_stream_of_keep_alives_for_ever_fails_with_the_stream_timeout() {
    // The idle timeout (20 s) is far off: only the whole-stream bound can end this.
    let (err, text, took, requests) = read_endless_stream(
        ": keep-alive\n\n".into(),
        Duration::from_secs(20),
        Duration::from_millis(300),
    )
    .await;
    assert!(
        matches!(
            err,
            OpenAiError::Timeout {
                kind: TimeoutKind::Stream,
                after
            } if after == Duration::from_millis(300)
        ),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "stream timeout of 0.3 s expired");
    assert_eq!(text, "");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(20),
        "{took:?}"
    );
    // A timeout is final: the attempt is not repeated.
    assert_eq!(requests, 1);
}

#[tokio::test]
async fn a_stream_sending_text_for_ever_fails_with_the_stream_timeout_and_is_not_retried() {
    let event = format!(
        "data: {}\n\n",
        json!({"choices": [{"delta": {"content": "."}}]})
    );
    let (err, text, took, requests) =
        read_endless_stream(event, Duration::from_secs(20), Duration::from_millis(300)).await;
    assert!(
        matches!(
            err,
            OpenAiError::Timeout {
                kind: TimeoutKind::Stream,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!text.is_empty() && text.chars().all(|c| c == '.'), "{text}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert_eq!(requests, 1);
}

#[tokio::test]
async fn keep_alive_comments_do_not_hold_off_the_idle_timeout() {
    // Comments every 5 ms, the idle timeout 200 ms, the whole-stream bound 20 s far off.
    let (err, _, took, requests) = read_endless_stream(
        ": ping\n\n".into(),
        Duration::from_millis(200),
        Duration::from_secs(20),
    )
    .await;
    assert!(
        matches!(
            err,
            OpenAiError::Timeout {
                kind: TimeoutKind::IdleStream,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "idle-stream timeout of 0.2 s expired");
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert_eq!(requests, 1);
}

#[tokio::test]
async fn a_request_without_an_answer_fails_with_the_request_timeout() {
    let provider = Provider::always(|| Reply::Sse {
        frames: vec![],
        then: End::Stall,
    })
    .await;
    let config = provider.config().with_stream(false);
    let timeouts = config.timeouts.with_request(Duration::from_millis(200));
    let model = OpenAiModel::new(config.with_timeouts(timeouts)).unwrap();
    let err = model.chat(&request()).await.unwrap_err();
    assert_eq!(err.to_string(), "request timeout of 0.2 s expired");
}

#[tokio::test]
async fn an_oversized_body_is_refused_naming_the_limit() {
    let big = "x".repeat(4096);
    let provider = Provider::always(move || {
        Reply::ok(completion(
            json!({"role": "assistant", "content": big}),
            "stop",
            None,
        ))
    })
    .await;
    let config = provider
        .config()
        .with_stream(false)
        .with_limits(Limits::default().with_max_body_bytes(1024));
    let model = OpenAiModel::new(config).unwrap();
    let err = model.chat(&request()).await.unwrap_err();
    assert!(
        matches!(
            err,
            OpenAiError::TooLarge {
                kind: LimitKind::Body,
                limit: 1024
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the response body exceeds the limit of 1024 bytes (limits.max_body_bytes)"
    );
}

#[tokio::test]
async fn an_endless_body_is_cut_at_the_limit() {
    let provider = Provider::always(|| Reply::Endless).await;
    let config = provider
        .config()
        .with_stream(false)
        .with_limits(Limits::default().with_max_body_bytes(256 * 1024));
    let model = OpenAiModel::new(config).unwrap();
    let err = model.chat(&request()).await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("the response body exceeds the limit of 262144 bytes"),
        "{err}"
    );
}

#[tokio::test]
async fn an_event_that_never_ends_is_cut_at_the_event_limit() {
    let provider = Provider::always(|| Reply::Sse {
        frames: std::iter::once("data: {\"choices\": [{\"delta\": {\"content\": \"".to_owned())
            .chain(std::iter::repeat_n("a".repeat(1024), 64))
            .collect(),
        then: End::Stall,
    })
    .await;
    let config = provider
        .config()
        .with_limits(Limits::default().with_max_event_bytes(16 * 1024));
    let model = OpenAiModel::new(config).unwrap();
    let err = model
        .chat_stream(&request(), &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the server-sent event exceeds the limit of 16384 bytes (limits.max_event_bytes)"
    );
}

#[tokio::test]
async fn an_unreachable_endpoint_names_its_host() {
    // A port that was free a moment ago: nothing listens there now.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = OpenAiConfig::new("m")
        .with_base_url(format!("http://127.0.0.1:{port}/v1"))
        .with_retry(RetryPolicy::none());
    let model = OpenAiModel::new(config).unwrap();
    let err = model.chat(&request()).await.unwrap_err();
    let (text, _) = shown(&err);
    assert!(
        text.starts_with(&format!("could not connect to 127.0.0.1:{port}: ")),
        "{text}"
    );
    assert!(text.to_lowercase().contains("refused"), "{text}");
}

#[tokio::test]
async fn a_ten_megabyte_reply_is_read_whole_within_the_default_limits() {
    const SIZE: usize = 10 * 1024 * 1024;
    let piece = "y".repeat(4096);
    let events: Vec<serde_json::Value> = (0..SIZE / piece.len())
        .map(|_| json!({"choices": [{"delta": {"content": piece}}]}))
        .chain([json!({"choices": [{"delta": {}, "finish_reason": "stop"}]})])
        .collect();
    let whole = "z".repeat(SIZE);
    let provider = Provider::start(move |n, _| match n {
        0 => Reply::stream(&events),
        _ => Reply::ok(completion(
            json!({"role": "assistant", "content": whole}),
            "stop",
            None,
        )),
    })
    .await;
    let model = OpenAiModel::new(provider.config()).unwrap();
    let mut pieces = 0;
    let streamed = model
        .chat_stream(&request(), &mut |_| pieces += 1)
        .await
        .unwrap();
    assert_eq!((streamed.text.len(), pieces), (SIZE, SIZE / 4096));
    let answer = model.chat(&request()).await.unwrap();
    assert_eq!(answer.text.len(), SIZE);
}
