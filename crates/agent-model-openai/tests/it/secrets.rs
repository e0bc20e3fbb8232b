//! The API key and header values never appear in an error or in `Debug`, even when the provider
//! echoes them.

use agent_core::{Message, Model, ModelRequest, Role};
use agent_model_openai::OpenAiModel;
use serde_json::json;

use crate::provider::{End, Provider, Reply, shown};

const KEY: &str = "sk-test-0123456789abcdef";
const GATEWAY: &str = "gw-secret-98765";

fn request() -> ModelRequest {
    ModelRequest::new(vec![Message::new(Role::User, "Hi.")], vec![])
}

fn assert_hidden(text: &str) {
    for secret in [KEY, GATEWAY] {
        assert!(!text.contains(secret), "{secret} shown in: {text}");
    }
}

#[tokio::test]
async fn a_key_echoed_by_the_provider_never_reaches_errors_or_debug() {
    let provider = Provider::start(|n, _| match n % 3 {
        0 => Reply::status(
            401,
            vec![],
            json!({"error": {
                "message": format!("Incorrect API key provided: {KEY}\n(gateway key {GATEWAY})"),
                "code": format!("invalid_api_key:{KEY}"),
                "type": format!("auth\u{1b}[31m{GATEWAY}"),
            }}),
        ),
        1 => Reply::Json {
            status: 400,
            headers: vec![],
            body: format!("<html>Bearer {KEY} rejected</html>"),
        },
        _ => Reply::Sse {
            frames: vec![format!(
                "data: {}\n\n",
                json!({"error": {"message": format!("bad key {KEY}")}})
            )],
            then: End::Close,
        },
    })
    .await;
    let config = provider.config().with_header("X-Gateway-Key", GATEWAY);
    assert_hidden(&format!("{config:?}"));
    let model = OpenAiModel::new(config).unwrap();
    assert_hidden(&format!("{model:?}"));

    let err = model.chat(&request()).await.unwrap_err();
    let (text, debug) = shown(&err);
    assert_hidden(&text);
    assert_hidden(&debug);
    assert_eq!(
        text,
        "HTTP 401 Unauthorized: Incorrect API key provided: [REDACTED] (gateway key [REDACTED]) (code `invalid_api_key:[REDACTED]`, type `auth[31m[REDACTED]`)"
    );

    let err = model.chat(&request()).await.unwrap_err();
    let (text, debug) = shown(&err);
    assert_hidden(&text);
    assert_hidden(&debug);
    assert!(
        text.starts_with("HTTP 400 Bad Request: <html>Bearer [REDACTED]"),
        "{text}"
    );

    let err = model.complete(request()).await.unwrap_err();
    let (text, debug) = shown(&err);
    assert_hidden(&text);
    assert_hidden(&debug);
    assert!(
        text.ends_with("the provider reported an error: bad key [REDACTED]"),
        "{text}"
    );

    // The key was sent all the same.
    assert_eq!(
        provider.requests()[0].headers["authorization"],
        format!("Bearer {KEY}")
    );
}
