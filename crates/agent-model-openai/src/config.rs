//! What an [`OpenAiModel`](crate::OpenAiModel) is built from: endpoint, model, key, headers,
//! timeouts, retries, bounds and the sampling options sent with every request.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use agent_core::ToolChoice;

/// The base URL used when none is configured.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The variable holding the base URL (the ecosystem's convention).
pub const BASE_URL_ENV: &str = "OPENAI_BASE_URL";

/// The variable holding the API key (the ecosystem's convention).
pub const API_KEY_ENV: &str = "OPENAI_API_KEY";

/// An API key. `Debug` and `Display` print `[REDACTED]`; only [`ApiKey::expose`] gives the
/// value, and the adapter calls it once per request to build the sensitive `Authorization`
/// header.
///
/// ```
/// use agent_model_openai::ApiKey;
/// let key = ApiKey::new("sk-live-1234");
/// assert_eq!(format!("{key:?} {key}"), "[REDACTED] [REDACTED]");
/// assert_eq!(key.expose(), "sk-live-1234");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// A key.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The key itself. Never log or print it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(agent_core::REDACTED)
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(agent_core::REDACTED)
    }
}

impl From<String> for ApiKey {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for ApiKey {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

/// How long the adapter waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timeouts {
    /// Establishing a TCP connection (TLS handshake excluded). Default 10 s.
    pub connect: Duration,
    /// One attempt: until the response's headers arrive, and for a non-streaming request also
    /// its whole body. Default 300 s (a long answer without streaming takes minutes).
    pub request: Duration,
    /// A stream that sends nothing of its answer for this long is abandoned. Keep-alive
    /// comments (`: ping`) and blank lines do not count: only bytes of an event's fields do.
    /// Default 90 s.
    pub idle: Duration,
    /// One streamed attempt as a whole, from sending the request to the answer's last event:
    /// however steadily the endpoint sends, a stream still going after this long is abandoned
    /// (and not retried). Default 600 s (10 minutes).
    pub stream: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            request: Duration::from_secs(300),
            idle: Duration::from_secs(90),
            stream: Duration::from_secs(600),
        }
    }
}

impl Timeouts {
    /// Sets the connect timeout.
    #[must_use]
    pub fn with_connect(mut self, connect: Duration) -> Self {
        self.connect = connect;
        self
    }

    /// Sets the request timeout.
    #[must_use]
    pub fn with_request(mut self, request: Duration) -> Self {
        self.request = request;
        self
    }

    /// Sets the idle-stream timeout.
    #[must_use]
    pub fn with_idle(mut self, idle: Duration) -> Self {
        self.idle = idle;
        self
    }

    /// Sets the whole-stream timeout.
    #[must_use]
    pub fn with_stream(mut self, stream: Duration) -> Self {
        self.stream = stream;
        self
    }
}

/// When a failed attempt is tried again: on `408`, `429` and `5xx` answers and on a connection
/// reset or closed before the answer (never after streamed text was handed on). The wait is the
/// provider's `Retry-After` (seconds or an HTTP date) when it sends one, else an exponential
/// backoff with jitter; retries stop after `max_retries`, or when the next attempt would start
/// after `max_elapsed` from the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts after the first. Default 3.
    pub max_retries: u32,
    /// The backoff before the first retry; it doubles for each next one. Default 500 ms.
    pub initial_backoff: Duration,
    /// The longest backoff (not applied to `Retry-After`). Default 30 s.
    pub max_backoff: Duration,
    /// The time from the first attempt after which no retry starts. Default 120 s.
    pub max_elapsed: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_elapsed: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// No retries: every failure is final.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// Sets the number of retries.
    #[must_use]
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Sets the first backoff.
    #[must_use]
    pub fn with_initial_backoff(mut self, backoff: Duration) -> Self {
        self.initial_backoff = backoff;
        self
    }

    /// Sets the longest backoff.
    #[must_use]
    pub fn with_max_backoff(mut self, backoff: Duration) -> Self {
        self.max_backoff = backoff;
        self
    }

    /// Sets the time after which no retry starts.
    #[must_use]
    pub fn with_max_elapsed(mut self, max_elapsed: Duration) -> Self {
        self.max_elapsed = max_elapsed;
        self
    }
}

/// Bounds on what the endpoint sends, so a broken or hostile one cannot make the adapter buffer
/// without end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// The bytes of one response body, a whole stream included. Default 32 MiB.
    pub max_body_bytes: usize,
    /// The bytes of one server-sent event. Default 4 MiB.
    pub max_event_bytes: usize,
    /// The characters of provider-chosen text (error messages, codes) shown in an error.
    /// Default 512.
    pub max_error_chars: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 32 * 1024 * 1024,
            max_event_bytes: 4 * 1024 * 1024,
            max_error_chars: 512,
        }
    }
}

impl Limits {
    /// Sets the body bound.
    #[must_use]
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Sets the event bound.
    #[must_use]
    pub fn with_max_event_bytes(mut self, bytes: usize) -> Self {
        self.max_event_bytes = bytes;
        self
    }

    /// Sets the bound on shown provider text.
    #[must_use]
    pub fn with_max_error_chars(mut self, chars: usize) -> Self {
        self.max_error_chars = chars;
        self
    }
}

/// The request field that carries [`ChatOptions::max_tokens`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum MaxTokensField {
    /// `max_tokens`: what vLLM, Ollama, llama.cpp and OpenAI's older models read (the
    /// default).
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: what OpenAI's reasoning models require.
    MaxCompletionTokens,
}

/// What is sent with every request besides the conversation. `None` leaves the provider's
/// default. A request's own [`ModelSettings`](agent_core::ModelSettings) win over these: its
/// `max_tokens` and `temperature` when set, its `tool_choice` when other than `Auto`.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ChatOptions {
    /// `tool_choice`; sent only when the request has tools.
    pub tool_choice: Option<ToolChoice>,
    /// `max_tokens`, the longest answer.
    pub max_tokens: Option<u32>,
    /// `temperature`.
    pub temperature: Option<f32>,
    /// `parallel_tool_calls`; sent only when the request has tools.
    pub parallel_tool_calls: Option<bool>,
    /// The field `max_tokens` is sent as.
    pub max_tokens_field: MaxTokensField,
}

impl ChatOptions {
    /// Sets `tool_choice`.
    #[must_use]
    pub fn with_tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = Some(choice);
        self
    }

    /// Sets `max_tokens`.
    #[must_use]
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Sets `temperature`.
    #[must_use]
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Sets the field `max_tokens` is sent as.
    #[must_use]
    pub fn with_max_tokens_field(mut self, field: MaxTokensField) -> Self {
        self.max_tokens_field = field;
        self
    }

    /// Sets `parallel_tool_calls`.
    #[must_use]
    pub fn with_parallel_tool_calls(mut self, parallel: bool) -> Self {
        self.parallel_tool_calls = Some(parallel);
        self
    }
}

/// An OpenAI-compatible endpoint and how to talk to it.
///
/// Plain data with public fields and `with_<field>` setters, so layers (environment, a config
/// table, flags) apply in order, each setting only what it has:
///
/// ```
/// use agent_model_openai::OpenAiConfig;
/// use std::time::Duration;
///
/// let config = OpenAiConfig::from_lookup(|_| None) // what the environment gives
///     .with_base_url("http://localhost:11434/v1") // a config file
///     .with_model("qwen3:8b") // a flag
///     .with_header("X-Team", "agents");
/// assert_eq!(config.base_url, "http://localhost:11434/v1");
/// assert!(config.api_key.is_none());
/// ```
///
/// `Debug` shows header names, never their values, and the key as `[REDACTED]`.
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct OpenAiConfig {
    /// The API's base URL, up to and including its version (`…/v1`); requests go to
    /// `{base_url}/chat/completions`.
    pub base_url: String,
    /// The model's name as the endpoint knows it.
    pub model: String,
    /// Sent as `Authorization: Bearer …` when set (local servers usually need none).
    pub api_key: Option<ApiKey>,
    /// Extra headers sent with every request (organisation, project, gateway keys). Their
    /// values are treated as secrets.
    pub headers: BTreeMap<String, String>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Retries.
    pub retry: RetryPolicy,
    /// Bounds on what the endpoint sends.
    pub limits: Limits,
    /// Sampling and tool options.
    pub options: ChatOptions,
    /// Whether [`Model::complete`](agent_core::Model::complete) streams the answer (SSE).
    /// Default true: a stream is watched by the idle and whole-stream timeouts rather than one
    /// request timeout.
    pub stream: bool,
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &crate::http::shown_url(&self.base_url))
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("timeouts", &self.timeouts)
            .field("retry", &self.retry)
            .field("limits", &self.limits)
            .field("options", &self.options)
            .field("stream", &self.stream)
            .finish()
    }
}

impl OpenAiConfig {
    /// A configuration for `model` at [`DEFAULT_BASE_URL`], without a key.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.to_owned(),
            model: model.into(),
            api_key: None,
            headers: BTreeMap::new(),
            timeouts: Timeouts::default(),
            retry: RetryPolicy::default(),
            limits: Limits::default(),
            options: ChatOptions::default(),
            stream: true,
        }
    }

    /// A configuration from [`BASE_URL_ENV`] (else [`DEFAULT_BASE_URL`]) and [`API_KEY_ENV`],
    /// with no model yet (set one with [`with_model`](Self::with_model)). A variable that is
    /// unset, empty or blank counts as absent.
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`from_env`](Self::from_env) reading variables through `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let read = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let mut config = Self::new(String::new());
        if let Some(base_url) = read(BASE_URL_ENV) {
            config.base_url = base_url;
        }
        config.api_key = read(API_KEY_ENV).map(ApiKey::new);
        config
    }

    /// Sets the base URL.
    #[must_use]
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// Sets the model.
    #[must_use]
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Sets the API key.
    #[must_use]
    pub fn with_api_key(mut self, key: impl Into<ApiKey>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Adds (or replaces) a header.
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Sets the timeouts.
    #[must_use]
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Sets the retry policy.
    #[must_use]
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the bounds.
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the options sent with every request.
    #[must_use]
    pub fn with_options(mut self, options: ChatOptions) -> Self {
        self.options = options;
        self
    }

    /// Sets whether [`Model::complete`](agent_core::Model::complete) streams.
    #[must_use]
    pub fn with_stream(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_gives_base_url_and_key_and_blank_values_count_as_absent() {
        let config = OpenAiConfig::from_lookup(|name| match name {
            "OPENAI_BASE_URL" => Some("http://localhost:8000/v1".into()),
            "OPENAI_API_KEY" => Some("sk-from-env".into()),
            _ => None,
        });
        assert_eq!(config.base_url, "http://localhost:8000/v1");
        assert_eq!(config.api_key.unwrap().expose(), "sk-from-env");

        let config = OpenAiConfig::from_lookup(|_| Some("  ".into()));
        assert_eq!(config.base_url, DEFAULT_BASE_URL);
        assert!(config.api_key.is_none());
    }

    #[test]
    fn debug_shows_neither_the_key_nor_header_values() {
        let config = OpenAiConfig::new("gpt-4o")
            .with_api_key("sk-very-secret-key")
            .with_header("X-Gateway-Key", "gw-very-secret")
            .with_base_url("https://user:pw-secret@example.com/v1?key=q-secret");
        let debug = format!("{config:?}");
        for secret in [
            "sk-very-secret-key",
            "gw-very-secret",
            "pw-secret",
            "q-secret",
        ] {
            assert!(!debug.contains(secret), "{debug}");
        }
        assert!(debug.contains("X-Gateway-Key"), "{debug}");
        assert!(debug.contains("[REDACTED]"), "{debug}");
    }
}
