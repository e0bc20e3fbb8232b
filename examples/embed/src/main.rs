//! The README's library example: open a run's MCP servers, search their tools, close.
//! With `MCP_AGENT__SERVERS` naming a server called `github` it talks to it.

use mcp_agent::prelude::*;
use mcp_agent::{Config, McpClient, McpSelection, RunInput, ToolCall};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = McpClient::builder(Config::from_env()?)
        .connectors(mcp_agent::connectors()?)
        .build();

    // Per run: the caller may pick servers, or bring an inline spec (with safe defaults).
    let input = RunInput::new("conversation-7", "file the bug")
        .with_meta("mcp", McpSelection::servers(["github"]));
    let runner = client.open_runner(&input).await?;
    let tools = runner.tools(); // mcp_search_tools, mcp_call_tool, mcp_read_output (+ pinned)
    println!("the model sees {} tools", tools.len());
    let found = runner
        .dispatch(ToolCall::from_json(
            "1",
            "mcp_search_tools",
            json!({"query": "create issue"}),
        )?)
        .await?;
    println!("{}", found.to_model_text());
    runner.close().await; // every session closed, every child process gone
    Ok(())
}
