//! Streamed answers: text as it arrives, tool-call fragments assembled by index, usage, and
//! streams that end badly.

use agent_core::{Message, Model, ModelRequest, Role};
use agent_model_openai::{OpenAiError, OpenAiModel, StreamDelta, Usage};
use serde_json::{Value, json};

use crate::provider::{End, Provider, Reply};

fn request() -> ModelRequest {
    ModelRequest::new(vec![Message::new(Role::User, "Go.")], vec![])
}

fn delta(delta: Value) -> Value {
    json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]})
}

fn finish(reason: &str) -> Value {
    json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

fn fragment(index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) -> Value {
    let mut call = json!({"index": index, "function": {"arguments": arguments}});
    if let Some(id) = id {
        call["id"] = id.into();
        call["type"] = "function".into();
    }
    if let Some(name) = name {
        call["function"]["name"] = name.into();
    }
    delta(json!({"tool_calls": [call]}))
}

#[tokio::test]
async fn text_is_handed_on_as_it_arrives_and_the_last_usage_is_reported() {
    let provider = Provider::always(|| {
        Reply::stream(&[
            delta(json!({"role": "assistant", "content": ""})),
            delta(json!({"content": "Hel"})),
            delta(json!({"content": "lo."})),
            finish("stop"),
            json!({"id": "c", "choices": [], "usage":
                {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}),
        ])
    })
    .await;
    let model = OpenAiModel::new(provider.config()).unwrap();

    let mut seen = Vec::new();
    let response = model
        .chat_stream(&request(), &mut |d| {
            if let StreamDelta::Text(t) = d {
                seen.push(t.to_owned());
            }
        })
        .await
        .unwrap();
    assert_eq!(seen, ["Hel", "lo."]);
    assert_eq!(response.text, "Hello.");
    assert_eq!(response.finish_reason.as_deref(), Some("stop"));
    assert_eq!(response.usage, Some(Usage::new(5, 2)));

    let answer = model.complete(request()).await.unwrap();
    assert_eq!(answer.message.content, "Hello.");
    assert_eq!(answer.usage, Some(Usage::new(5, 2)));

    // Through the Model trait: the same pieces reach its text sink.
    let pieces = std::sync::Mutex::new(Vec::new());
    let sink = |t: &str| pieces.lock().unwrap().push(t.to_owned());
    let answer = model.complete_streaming(request(), &sink).await.unwrap();
    assert_eq!(answer.message.content, "Hello.");
    assert_eq!(*pieces.lock().unwrap(), ["Hel", "lo."]);
    assert_eq!(model.total_usage(), Usage::new(15, 6));

    let sent = &provider.requests()[0];
    assert_eq!(sent.body["stream"], true);
    assert_eq!(sent.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(sent.headers["accept"], "text/event-stream");
}

#[tokio::test]
async fn tool_call_fragments_split_across_chunks_and_interleaved_are_assembled_by_index() {
    let events = [
        fragment(0, Some("call_a"), Some("weather"), ""),
        fragment(1, Some("call_b"), Some("weather"), "{\"ci"),
        fragment(0, None, None, "{\"city\""),
        fragment(1, None, None, "ty\": \"Os"),
        fragment(0, None, None, ": \"Paris\"}"),
        fragment(1, None, None, "lo\"}"),
        finish("tool_calls"),
    ];
    // Every event is split in two frames, and the second half shares a frame with the next
    // event's first half.
    let text: String = events
        .iter()
        .map(|e| format!("data: {e}\n\n"))
        .collect::<String>()
        + "data: [DONE]\n\n";
    let bytes = text.as_bytes();
    let frames: Vec<String> = bytes
        .chunks(37)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect();
    let provider = Provider::always(move || Reply::Sse {
        frames: frames.clone(),
        then: End::Close,
    })
    .await;
    let model = OpenAiModel::new(provider.config()).unwrap();

    let mut started = Vec::new();
    let response = model
        .chat_stream(&request(), &mut |d| {
            if let StreamDelta::ToolCall { index, name } = d {
                started.push((index, name.to_owned()));
            }
        })
        .await
        .unwrap();
    assert_eq!(
        started,
        [(0, "weather".to_owned()), (1, "weather".to_owned())]
    );
    let calls: Vec<_> = response
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("call_a", "{\"city\": \"Paris\"}"),
            ("call_b", "{\"city\": \"Oslo\"}")
        ]
    );

    let answer = model.complete(request()).await.unwrap();
    let cities: Vec<_> = answer
        .message
        .tool_calls
        .iter()
        .map(|c| c.arguments["city"].clone())
        .collect();
    assert_eq!(cities, [json!("Paris"), json!("Oslo")]);
}

#[tokio::test]
async fn a_stream_cut_in_the_middle_of_a_tool_call_gives_no_call() {
    let provider = Provider::always(|| Reply::Sse {
        frames: vec![format!(
            "data: {}\n\n",
            fragment(
                0,
                Some("call_a"),
                Some("delete_everything"),
                "{\"path\": \"/tm"
            )
        )],
        then: End::Close,
    })
    .await;
    let model = OpenAiModel::new(provider.config()).unwrap();

    let err = model
        .chat_stream(&request(), &mut |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, OpenAiError::StreamCut), "{err:?}");
    let err = model.complete(request()).await.unwrap_err();
    assert!(
        agent_core::error_chain(&err).ends_with("the stream ended before the answer was complete"),
        "{err}"
    );
    // Something was handed on (the call's start), so the attempt was not repeated.
    assert_eq!(provider.requests().len(), 2);
}

#[tokio::test]
async fn a_malformed_chunk_is_a_clear_error() {
    let provider = Provider::always(|| Reply::Sse {
        frames: vec!["data: {\"choices\": [{\"delta\": \n\n".into()],
        then: End::Close,
    })
    .await;
    let model = OpenAiModel::new(provider.config()).unwrap();
    let err = model
        .chat_stream(&request(), &mut |_| {})
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("the answer is not a chat completion: a stream chunk is not valid: "),
        "{text}"
    );
}

#[tokio::test]
async fn a_server_that_answers_a_stream_request_with_json_still_answers() {
    let provider = Provider::always(|| {
        Reply::ok(crate::provider::completion(
            json!({"role": "assistant", "content": "whole"}),
            "stop",
            None,
        ))
    })
    .await;
    let model = OpenAiModel::new(provider.config()).unwrap();
    let mut seen = String::new();
    let response = model
        .chat_stream(&request(), &mut |d| {
            if let StreamDelta::Text(t) = d {
                seen.push_str(t);
            }
        })
        .await
        .unwrap();
    assert_eq!((response.text.as_str(), seen.as_str()), ("whole", "whole"));
}
