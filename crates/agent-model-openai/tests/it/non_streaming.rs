//! Whole (non-streamed) answers: text, parallel tool calls, what the request carries.

use agent_core::{Message, Model, ModelRequest, ModelSettings, Role, ToolDescriptor};
use agent_model_openai::{ChatOptions, OpenAiModel, ToolChoice, Usage};
use serde_json::json;

use crate::provider::{Provider, Reply, completion};

fn request() -> ModelRequest {
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}});
    ModelRequest::new(
        vec![
            Message::new(Role::System, "You are terse."),
            Message::new(Role::User, "Weather in Paris and Oslo?"),
        ],
        vec![
            ToolDescriptor::new("weather", schema.as_object().unwrap().clone())
                .with_description("Current weather of a city"),
        ],
    )
}

#[tokio::test]
async fn a_plain_answer_is_the_assistants_text_with_its_usage() {
    let provider = Provider::always(|| {
        Reply::ok(completion(
            json!({"role": "assistant", "content": "Hello there."}),
            "stop",
            Some((12, 3)),
        ))
    })
    .await;
    let model = OpenAiModel::new(provider.config().with_stream(false)).unwrap();

    let response = model.chat(&request()).await.unwrap();
    assert_eq!(response.text, "Hello there.");
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.finish_reason.as_deref(), Some("stop"));
    assert_eq!(response.usage, Some(Usage::new(12, 3)));
    assert_eq!(response.attempts, 1);

    let answer = model.complete(request()).await.unwrap();
    assert_eq!(answer.message.role, Role::Assistant);
    assert_eq!(answer.message.content, "Hello there.");
    assert_eq!(answer.usage, Some(Usage::new(12, 3)));
    assert_eq!(model.total_usage(), Usage::new(24, 6));
}

#[tokio::test]
async fn two_parallel_tool_calls_come_back_in_order_with_parsed_arguments() {
    let provider = Provider::always(|| {
        Reply::ok(completion(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_a", "type": "function",
                 "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}},
                {"id": "call_b", "type": "function",
                 "function": {"name": "weather", "arguments": "{\"city\": \"Oslo\"}"}},
            ]}),
            "tool_calls",
            None,
        ))
    })
    .await;
    let model = OpenAiModel::new(provider.config().with_stream(false)).unwrap();

    let answer = model.complete(request()).await.unwrap();
    let calls: Vec<_> = answer
        .message
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments["city"].clone()))
        .collect();
    assert_eq!(
        calls,
        [
            ("call_a", "weather", json!("Paris")),
            ("call_b", "weather", json!("Oslo"))
        ]
    );
    assert_eq!(answer.message.content, "");
}

#[tokio::test]
async fn the_request_carries_model_tools_options_and_the_key() {
    let provider = Provider::always(|| {
        Reply::ok(completion(
            json!({"role": "assistant", "content": "ok"}),
            "stop",
            None,
        ))
    })
    .await;
    let config = provider
        .config()
        .with_stream(false)
        .with_header("OpenAI-Project", "proj_1")
        .with_options(
            ChatOptions::default()
                .with_tool_choice(ToolChoice::Required)
                .with_max_tokens(100)
                .with_temperature(0.25)
                .with_parallel_tool_calls(true),
        );
    let model = OpenAiModel::new(config).unwrap();
    model.chat(&request()).await.unwrap();
    // Options given per call replace the configured ones.
    model
        .with_options(ChatOptions::default().with_tool_choice(ToolChoice::Tool("weather".into())))
        .chat(&request())
        .await
        .unwrap();

    let requests = provider.requests();
    let first = &requests[0];
    assert_eq!(first.body["model"], "test-model");
    assert_eq!(
        first.body["messages"][1]["content"],
        "Weather in Paris and Oslo?"
    );
    assert_eq!(first.body["tools"][0]["function"]["name"], "weather");
    assert_eq!(first.body["tool_choice"], "required");
    assert_eq!(first.body["max_tokens"], 100);
    assert_eq!(first.body["temperature"], 0.25);
    assert_eq!(first.body["parallel_tool_calls"], true);
    assert!(first.body.get("stream").is_none());
    assert_eq!(
        first.headers["authorization"],
        "Bearer sk-test-0123456789abcdef"
    );
    assert_eq!(first.headers["openai-project"], "proj_1");
    assert_eq!(first.headers["content-type"], "application/json");
    assert!(
        first.headers["user-agent"]
            .to_str()
            .unwrap()
            .starts_with("agent-model-openai/")
    );
    assert_eq!(
        requests[1].body["tool_choice"],
        json!({"type": "function", "function": {"name": "weather"}})
    );
    assert!(requests[1].body.get("max_tokens").is_none());

    // A request's own settings win over the configured options.
    let settings = ModelSettings::default()
        .with_tool_choice(ToolChoice::None)
        .with_max_tokens(9);
    model
        .complete(request().with_settings(settings))
        .await
        .unwrap();
    let third = &provider.requests()[2].body;
    assert_eq!(third["tool_choice"], "none");
    assert_eq!(third["max_tokens"], 9);
    assert_eq!(third["temperature"], 0.25);
}

#[tokio::test]
async fn a_call_with_invalid_arguments_becomes_a_malformed_call_that_never_runs() {
    let provider = Provider::always(|| {
        Reply::ok(completion(
            json!({"role": "assistant", "tool_calls": [
                {"id": "call_a", "type": "function",
                 "function": {"name": "weather", "arguments": "{\"city\": \"Par"}},
                {"id": "call_b", "type": "function",
                 "function": {"name": "weather", "arguments": "{\"city\": \"Oslo\"}"}},
            ]}),
            "tool_calls",
            None,
        ))
    })
    .await;
    let model = OpenAiModel::new(provider.config().with_stream(false)).unwrap();

    let raw = model.chat(&request()).await.unwrap();
    assert_eq!(raw.tool_calls[0].arguments, "{\"city\": \"Par");
    let answer = model.complete(request()).await.unwrap();
    let calls = &answer.message.tool_calls;
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].id, "call_a");
    assert!(calls[0].arguments.is_empty());
    let problem = calls[0].invalid_arguments.as_deref().unwrap();
    assert!(problem.starts_with("invalid JSON"), "{problem}");
    assert_eq!(calls[1].invalid_arguments, None);
    assert_eq!(calls[1].arguments["city"], "Oslo");
}
