//! An OpenAI-compatible chat-completions endpoint as an [`agent_core::Model`].
//!
//! [`OpenAiModel`] speaks the `POST {base_url}/chat/completions` wire format that OpenAI and
//! most local servers share: the conversation and the tools go out, text and tool calls (several
//! per turn) come back, whole or streamed as server-sent events whose text and tool-call
//! fragments are assembled by index. It runs on hyper + hyper-util with rustls (ring, Mozilla
//! roots), the HTTP stack of the rest of the workspace.
//!
//! # Endpoints
//!
//! | Server | `base_url` | Key |
//! |---|---|---|
//! | OpenAI | `https://api.openai.com/v1` (the default) | required |
//! | vLLM (`vllm serve <model>`) | `http://localhost:8000/v1` | only if started with `--api-key` |
//! | Ollama | `http://localhost:11434/v1` | none (any value is accepted) |
//! | llama.cpp's `llama-server` | `http://localhost:8080/v1` | only if started with `--api-key` |
//!
//! The model name is the server's: `gpt-4o-mini` at OpenAI, the served model's path or
//! `--served-model-name` for vLLM, the pulled tag (`qwen3:8b`) for Ollama; llama.cpp serves one
//! model whatever the name.
//!
//! # Configuration
//!
//! [`OpenAiConfig::from_env`] reads `OPENAI_BASE_URL` (default `https://api.openai.com/v1`)
//! and `OPENAI_API_KEY`, the ecosystem's convention; every field also has a `with_<field>`
//! setter so a config file and flags can be laid over it.
//!
//! ```no_run
//! use agent_core::{Message, Model, ModelRequest, Role};
//! use agent_model_openai::{ChatOptions, OpenAiConfig, OpenAiModel, StreamDelta};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // OPENAI_BASE_URL=http://localhost:11434/v1 for Ollama, or unset for OpenAI.
//! let config = OpenAiConfig::from_env()
//!     .with_model("qwen3:8b")
//!     .with_options(ChatOptions::default().with_temperature(0.2).with_max_tokens(512));
//! let model = OpenAiModel::new(config)?;
//!
//! let request = ModelRequest::new(vec![Message::new(Role::User, "Say hello.")], vec![]);
//! // As an agent_core::Model (the agent loop's view)…
//! let answer = model.complete(request.clone()).await?;
//! println!("{}", answer.message.content);
//! // …or streamed, text as it arrives.
//! let whole = model
//!     .chat_stream(&request, &mut |delta| {
//!         if let StreamDelta::Text(text) = delta {
//!             print!("{text}");
//!         }
//!     })
//!     .await?;
//! println!("\n{:?} tokens so far", model.total_usage());
//! # let _ = whole;
//! # Ok(())
//! # }
//! ```
//!
//! [`StreamDecoder`] is the stream decoding alone, for a caller with a transport of its own.
//!
//! # Failures
//!
//! `408`, `429` and `5xx` answers and connections reset or closed before the answer are retried
//! ([`RetryPolicy`]: bounded in count and in total time, exponential backoff with jitter, the
//! provider's `Retry-After` or `retry-after-ms` honoured); a stream that already handed text on
//! is not. Each attempt has a request timeout, and a stream an idle timeout (keep-alive comments
//! do not reset it) and a bound on its whole length ([`Timeouts`]); bodies and single events
//! are bounded ([`Limits`]). The provider's error (`error.message`,
//! `code`, `type`) is shown with the key and header values redacted, control characters removed
//! and its length bounded. The key never appears in an error or `Debug` output.
//!
//! # Architecture invariant
//!
//! Depends on `agent-core` and the HTTP stack only: no MCP crate, no reqwest.

mod config;
mod error;
mod http;
mod model;
mod response;
mod sse;
mod stream;
mod text;
mod wire;

pub use agent_core::{ToolChoice, Usage};
pub use config::{
    API_KEY_ENV, ApiKey, BASE_URL_ENV, ChatOptions, DEFAULT_BASE_URL, Limits, MaxTokensField,
    OpenAiConfig, RetryPolicy, Timeouts,
};
pub use error::{LimitKind, OpenAiError, ProviderError, TimeoutKind};
pub use model::OpenAiModel;
pub use response::{ChatResponse, RawToolCall, StreamDelta};
pub use stream::StreamDecoder;
