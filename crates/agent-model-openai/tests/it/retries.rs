//! Retries: 429 with `Retry-After`, 5xx given up after the configured count, connection
//! resets, what is not retried, and the time budget.

use std::time::Duration;

use agent_core::{Message, ModelRequest, Role};
use agent_model_openai::{OpenAiError, OpenAiModel, RetryPolicy};
use serde_json::json;

use crate::provider::{Provider, Reply, completion, shown};

fn request() -> ModelRequest {
    ModelRequest::new(vec![Message::new(Role::User, "Hi.")], vec![])
}

fn answer() -> Reply {
    Reply::ok(completion(
        json!({"role": "assistant", "content": "fine"}),
        "stop",
        None,
    ))
}

fn overloaded(status: u16, headers: Vec<(&'static str, String)>) -> Reply {
    Reply::status(
        status,
        headers,
        json!({"error": {"message": "The server is overloaded", "type": "server_error", "code": "overloaded"}}),
    )
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_and_then_succeeds() {
    let provider = Provider::start(|n, _| match n {
        0 => overloaded(429, vec![("retry-after", "0".into())]),
        1 => overloaded(429, vec![("retry-after-ms", "1".into())]),
        _ => answer(),
    })
    .await;
    let model = OpenAiModel::new(provider.config().with_stream(false)).unwrap();
    let response = model.chat(&request()).await.unwrap();
    assert_eq!(response.text, "fine");
    assert_eq!(response.attempts, 3);
    assert_eq!(provider.requests().len(), 3);
}

#[tokio::test]
async fn a_500_is_retried_up_to_the_configured_count_then_shows_the_providers_error() {
    let provider = Provider::always(|| overloaded(500, vec![])).await;
    let config = provider.config().with_stream(false);
    let retry = config.retry.with_max_retries(2);
    let model = OpenAiModel::new(config.with_retry(retry)).unwrap();

    let err = model.chat(&request()).await.unwrap_err();
    assert_eq!(provider.requests().len(), 3);
    assert_eq!(err.status(), Some(http::StatusCode::INTERNAL_SERVER_ERROR));
    let (text, _) = shown(&err);
    assert_eq!(
        text,
        "gave up after 3 attempts: HTTP 500 Internal Server Error: The server is overloaded (code `overloaded`, type `server_error`)"
    );
}

#[tokio::test]
async fn a_streamed_request_is_retried_too_while_nothing_was_handed_on() {
    let provider = Provider::start(|n, _| match n {
        0 => overloaded(503, vec![]),
        _ => Reply::stream(&[
            json!({"choices": [{"delta": {"content": "ok"}, "finish_reason": "stop"}]}),
        ]),
    })
    .await;
    let model = OpenAiModel::new(provider.config()).unwrap();
    let response = model.chat_stream(&request(), &mut |_| {}).await.unwrap();
    assert_eq!((response.text.as_str(), response.attempts), ("ok", 2));
}

#[tokio::test]
async fn a_connection_reset_is_retried() {
    let provider = Provider::start(|n, _| match n {
        0 => Reply::Reset,
        _ => answer(),
    })
    .await;
    let model = OpenAiModel::new(provider.config().with_stream(false)).unwrap();
    let response = model.chat(&request()).await.unwrap();
    assert_eq!(response.attempts, 2);
    assert_eq!(provider.requests().len(), 2);
}

#[tokio::test]
async fn resets_that_go_on_give_up_naming_the_host() {
    let provider = Provider::always(|| Reply::Reset).await;
    let config = provider.config().with_stream(false);
    let retry = config.retry.with_max_retries(1);
    let model = OpenAiModel::new(config.with_retry(retry)).unwrap();
    let err = model.chat(&request()).await.unwrap_err();
    assert_eq!(provider.requests().len(), 2);
    let host = provider
        .base_url
        .trim_start_matches("http://")
        .trim_end_matches("/v1");
    let (text, _) = shown(&err);
    assert!(
        text.starts_with(&format!(
            "gave up after 2 attempts: the connection to {host} failed: "
        )),
        "{text}"
    );
    assert!(
        matches!(err.last_attempt(), OpenAiError::Connection { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_client_error_is_not_retried() {
    let provider = Provider::always(|| {
        Reply::status(
            404,
            vec![],
            json!({"error": {"message": "The model `nope` does not exist", "type": "invalid_request_error", "code": "model_not_found"}}),
        )
    })
    .await;
    let model = OpenAiModel::new(provider.config().with_stream(false)).unwrap();
    let err = model.chat(&request()).await.unwrap_err();
    assert_eq!(provider.requests().len(), 1);
    assert_eq!(
        err.to_string(),
        "HTTP 404 Not Found: The model `nope` does not exist (code `model_not_found`, type `invalid_request_error`)"
    );
}

#[tokio::test]
async fn a_retry_after_beyond_the_time_budget_gives_up_at_once() {
    let provider = Provider::always(|| overloaded(429, vec![("retry-after", "3600".into())])).await;
    let config = provider
        .config()
        .with_stream(false)
        .with_retry(RetryPolicy::default().with_max_elapsed(Duration::from_secs(60)));
    let model = OpenAiModel::new(config).unwrap();
    let err = model.chat(&request()).await.unwrap_err();
    assert_eq!(provider.requests().len(), 1);
    let (text, _) = shown(&err);
    assert!(
        text.starts_with("gave up after 1 attempt (the retry time budget is spent): HTTP 429 Too Many Requests: The server is overloaded"),
        "{text}"
    );
    match err.last_attempt() {
        OpenAiError::Status { retry_after, .. } => {
            assert_eq!(*retry_after, Some(Duration::from_secs(3600)));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn without_retries_the_first_failure_is_the_error() {
    let provider = Provider::always(|| overloaded(502, vec![])).await;
    let config = provider
        .config()
        .with_stream(false)
        .with_retry(RetryPolicy::none());
    let model = OpenAiModel::new(config).unwrap();
    let err = model.chat(&request()).await.unwrap_err();
    assert_eq!(provider.requests().len(), 1);
    assert!(
        err.to_string().starts_with("HTTP 502 Bad Gateway: "),
        "{err}"
    );
}
