//! The main job's embedded model: a scripted stand-in for a real one, so that `mcp-agent` with
//! no configuration and no API key shows a whole agent run. It reads the conversation as a
//! model would: it searches the catalog with `mcp_search_tools`, calls the adder it found and
//! the word counter through `mcp_call_tool` (both in one answer), and answers from what the
//! tools returned.

use mcp_agent::{
    CALL_TOOL, SEARCH_TOOL, ToolCall,
    agent::{Message, ModelError, ModelRequest, ModelResponse, Role, ScriptedModel},
};
use serde_json::{Value, json};

/// What the main job asks the demo agent.
pub(crate) const INSTRUCTION: &str =
    "What is 2 + 3, and how many words are in \"the quick brown fox\"?";

/// The text the demo agent counts the words of.
const TEXT: &str = "the quick brown fox";

/// The scripted model.
pub(crate) fn model() -> ScriptedModel {
    ScriptedModel::from_fn(answer)
}

/// The tool results of the conversation so far, in order.
fn results(request: &ModelRequest) -> Vec<&str> {
    request
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect()
}

fn call(id: &str, tool: &str, arguments: Value) -> Result<ToolCall, ModelError> {
    ToolCall::from_json(id, tool, arguments).map_err(|e| ModelError::Unusable(e.to_string()))
}

fn answer(request: &ModelRequest) -> Result<ModelResponse, ModelError> {
    let message = match results(request).as_slice() {
        [] => Message::tool_calls(vec![call(
            "search",
            SEARCH_TOOL,
            json!({ "query": "add two numbers", "limit": 3 }),
        )?]),
        [search] => {
            let found: Vec<String> = serde_json::from_str::<Value>(search)
                .ok()
                .and_then(|v| v["tools"].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect();
            let Some(adder) = found.first() else {
                return Ok(ModelResponse::new(Message::assistant(
                    "The search found no tool to add numbers with, so I cannot answer.",
                )));
            };
            let counter = found
                .iter()
                .find(|name| name.ends_with("word_count"))
                .map_or("demo__word_count", String::as_str);
            Message::tool_calls(vec![
                call(
                    "add",
                    CALL_TOOL,
                    json!({ "tool_name": adder, "arguments": { "a": 2, "b": 3 } }),
                )?,
                call(
                    "count",
                    CALL_TOOL,
                    json!({ "tool_name": counter, "arguments": { "text": TEXT } }),
                )?,
            ])
        }
        [_, sum, rest @ ..] => Message::assistant(final_answer(
            sum,
            rest.first().copied().unwrap_or("nothing"),
        )),
    };
    Ok(ModelResponse::new(message))
}

/// The answer from the two results, or what went wrong with them.
fn final_answer(sum: &str, count: &str) -> String {
    let field = |text: &str, key: &str| {
        serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|v| v[key].as_f64())
    };
    match (field(sum, "sum"), field(count, "words")) {
        (Some(sum), Some(words)) => format!(
            "2 + 3 = {sum}, and \"{TEXT}\" has {words} words (I asked the demo server's \
             tools: its adder and its word counter)."
        ),
        _ => format!(
            "The tools did not give me what I needed. The adder said: {sum} — the word counter \
             said: {count}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(results: &[&str]) -> ModelRequest {
        let mut messages = vec![Message::new(Role::User, INSTRUCTION)];
        for (i, result) in results.iter().enumerate() {
            messages.push(Message::tool_result(format!("c{i}"), *result));
        }
        ModelRequest::new(messages, Vec::new())
    }

    #[test]
    fn it_searches_then_calls_what_it_found_then_answers_from_the_results() {
        let first = answer(&request(&[])).unwrap().message;
        assert_eq!(first.tool_calls[0].name, SEARCH_TOOL);

        let search = r#"{"tools": [{"name": "other__plus"}, {"name": "other__word_count"}]}"#;
        let second = answer(&request(&[search])).unwrap().message;
        let targets: Vec<&str> = second
            .tool_calls
            .iter()
            .map(|c| c.arguments["tool_name"].as_str().unwrap())
            .collect();
        assert_eq!(targets, ["other__plus", "other__word_count"]);

        let last = answer(&request(&[search, r#"{"sum":5.0}"#, r#"{"words":4}"#]))
            .unwrap()
            .message;
        assert!(last.tool_calls.is_empty());
        assert!(
            last.content.starts_with("2 + 3 = 5, and"),
            "{}",
            last.content
        );
        assert!(last.content.contains("has 4 words"), "{}", last.content);
    }

    #[test]
    fn a_failed_tool_is_reported_not_invented() {
        let last = answer(&request(&["{}", "tool failed: boom", r#"{"words":4}"#]))
            .unwrap()
            .message;
        assert!(last.content.contains("boom"), "{}", last.content);
        let none = answer(&request(&[r#"{"tools": []}"#])).unwrap().message;
        assert!(none.content.contains("no tool"), "{}", none.content);
    }
}
