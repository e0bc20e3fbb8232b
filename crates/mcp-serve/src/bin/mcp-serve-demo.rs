//! A few native tools served as an MCP server: `mcp-serve-demo stdio`, or
//! `mcp-serve-demo http [ADDR]` (prints `listening on <url>` on stderr once bound; the
//! `MCP_SERVE_DEMO_TOKEN` variable, when set, is the bearer token clients must send;
//! `MCP_SERVE_DEMO_TIMEOUT_MS`, when set, is the header, body and idle timeout).
//! SIGTERM or SIGINT shuts it down gracefully.
//!
//! Tools: `echo` (its arguments back, a mapping), `add` (`a + b`, a scalar), `greet` (text),
//! `fail` (a tool error) and `secret`, which exists but is not exposed.

use std::process::ExitCode;
use std::sync::Arc;

use agent_core::{
    ToolAnnotations, ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput,
};
use async_trait::async_trait;
use mcp_serve::{BearerAuth, Exposure, HttpOptions, ToolServer};
use serde_json::{Value, json};
use tokio::signal::unix::{SignalKind, signal};

struct Demo;

fn schema(value: Value) -> agent_core::JsonObject {
    value.as_object().cloned().unwrap_or_default()
}

impl ToolCatalog for Demo {
    fn tools(&self) -> Vec<ToolDescriptor> {
        let numbers = json!({
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        });
        vec![
            ToolDescriptor::new("echo", schema(json!({"type": "object"})))
                .with_description("Returns its arguments."),
            ToolDescriptor::new("add", schema(numbers))
                .with_description("Adds two numbers.")
                .with_output_schema(schema(json!({"type": "number"})))
                .with_annotations(ToolAnnotations::read_only()),
            ToolDescriptor::new(
                "greet",
                schema(json!({"type": "object", "properties": {"name": {"type": "string"}}})),
            )
            .with_description("Greets by name."),
            ToolDescriptor::new(
                "fail",
                schema(json!({"type": "object", "properties": {"message": {"type": "string"}}})),
            )
            .with_description("Always fails."),
            ToolDescriptor::new("secret", schema(json!({"type": "object"})))
                .with_description("Not exposed."),
        ]
    }
}

#[async_trait]
impl ToolDispatcher for Demo {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        let text = |key: &str| {
            call.arguments
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let number = |key: &str| call.arguments.get(key).and_then(Value::as_f64);
        match call.name.as_str() {
            "echo" => Ok(ToolOutput::structured(Value::Object(
                call.arguments.clone(),
            ))),
            "add" => match (number("a"), number("b")) {
                (Some(a), Some(b)) => Ok(ToolOutput::structured(json!(a + b))),
                _ => Err(ToolError::InvalidArguments {
                    server: None,
                    tool: call.name.clone(),
                    message: "`a` and `b` must be numbers".into(),
                }),
            },
            "greet" => Ok(ToolOutput::text(format!("Hello, {}!", text("name")))),
            "fail" => Err(ToolError::Invocation {
                server: None,
                tool: call.name.clone(),
                message: text("message"),
            }),
            "secret" => Ok(ToolOutput::text("the secret tool ran")),
            _ => Err(ToolError::unknown_tool(call.name.clone(), Vec::new())),
        }
    }
}

async fn stop_signal() {
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let server = ToolServer::new(
        Arc::new(Demo),
        Exposure::only(["echo", "add", "greet", "fail"]),
    )
    .name("mcp-serve-demo", env!("CARGO_PKG_VERSION"))
    .instructions("Demo tools served by mcp-serve.");
    let outcome = match args.first().map(String::as_str) {
        Some("stdio") => serve_stdio(server).await,
        Some("http") => serve_http(server, args.get(1)).await,
        _ => Err("usage: mcp-serve-demo stdio | http [ADDR]".to_owned()),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("mcp-serve-demo: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn serve_stdio(server: ToolServer) -> Result<(), String> {
    let session = server.serve_stdio().await.map_err(|e| e.to_string())?;
    tokio::select! {
        () = stop_signal() => {
            session.shutdown(std::time::Duration::from_secs(10)).await;
        }
        () = session.wait() => {}
    }
    Ok(())
}

async fn serve_http(server: ToolServer, addr: Option<&String>) -> Result<(), String> {
    let mut options = HttpOptions::default();
    if let Some(addr) = addr {
        options = options.with_bind(addr.parse().map_err(|e| format!("`{addr}`: {e}"))?);
    }
    if let Ok(token) = std::env::var("MCP_SERVE_DEMO_TOKEN") {
        options = options.with_auth(BearerAuth::new(token));
    }
    if let Ok(ms) = std::env::var("MCP_SERVE_DEMO_TIMEOUT_MS") {
        let ms: u64 = ms
            .parse()
            .map_err(|e| format!("MCP_SERVE_DEMO_TIMEOUT_MS: {e}"))?;
        let timeout = std::time::Duration::from_millis(ms);
        options = options
            .with_header_read_timeout(timeout)
            .with_body_read_timeout(timeout)
            .with_idle_timeout(timeout);
    }
    let http = server
        .serve_http(options)
        .await
        .map_err(|e| e.to_string())?;
    eprintln!("listening on {}", http.url());
    stop_signal().await;
    http.shutdown().await;
    Ok(())
}
