//! [`OpenAiModel`]: one endpoint's client, its attempts and retries, and the
//! [`agent_core::Model`] implementation.

use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use agent_core::{Model, ModelError, ModelRequest, ModelResponse, TextSink, Usage};
use async_trait::async_trait;
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use tokio::time::{Instant, timeout_at};

use crate::config::{ChatOptions, OpenAiConfig, RetryPolicy};
use crate::error::{LimitKind, OpenAiError, TimeoutKind};
use crate::http::{self as h, HttpClient};
use crate::response::{ChatResponse, StreamDelta, from_completion};
use crate::stream::StreamDecoder;
use crate::text::Shown;
use crate::wire::{Completion, effective_options, error_body, request_body};

/// How much of an error answer's body is read.
const ERROR_BODY_BYTES: usize = 64 * 1024;

/// `start + wait`, a very long wait (`Duration::MAX` for "no limit") capped at 30 years
/// rather than overflowing.
fn deadline_after(start: Instant, wait: Duration) -> Instant {
    start
        .checked_add(wait)
        .unwrap_or_else(|| start + Duration::from_secs(30 * 365 * 86_400))
}

/// An OpenAI-compatible chat-completions endpoint as an [`agent_core::Model`].
///
/// Cheap to clone; clones share the connection pool and the usage total.
#[derive(Clone)]
pub struct OpenAiModel {
    inner: Arc<Inner>,
    options: ChatOptions,
}

struct Inner {
    config: OpenAiConfig,
    endpoint: http::Uri,
    host: String,
    shown_url: String,
    headers: HeaderMap,
    client: HttpClient,
    shown: Shown,
    usage: Mutex<Usage>,
}

impl std::fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("config", &self.inner.config)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Why one attempt failed, and whether another may help.
struct Failure {
    error: OpenAiError,
    retryable: bool,
    retry_after: Option<Duration>,
}

impl From<OpenAiError> for Failure {
    fn from(error: OpenAiError) -> Self {
        Self {
            error,
            retryable: false,
            retry_after: None,
        }
    }
}

impl From<(OpenAiError, bool)> for Failure {
    fn from((error, retryable): (OpenAiError, bool)) -> Self {
        Self {
            error,
            retryable,
            retry_after: None,
        }
    }
}

impl OpenAiModel {
    /// A model for `config`. Checks the base URL, the model name and the headers; connects
    /// only when asked for a completion.
    pub fn new(config: OpenAiConfig) -> Result<Self, OpenAiError> {
        let (endpoint, host) = h::endpoint(&config.base_url)?;
        if config.model.trim().is_empty() {
            return Err(OpenAiError::Config {
                field: "model".into(),
                reason: "no model is set".into(),
            });
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &config.headers {
            let header =
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| OpenAiError::Config {
                    field: format!("headers.{}", Shown::new(&[], 64).text(name)),
                    reason: "it is not a valid header name".into(),
                })?;
            let reserved = [
                CONTENT_TYPE,
                ACCEPT,
                http::header::CONTENT_LENGTH,
                http::header::HOST,
            ];
            if reserved.contains(&header) || (header == AUTHORIZATION && config.api_key.is_some()) {
                return Err(OpenAiError::Config {
                    field: format!("headers.{name}"),
                    reason: "the adapter sets this header itself".into(),
                });
            }
            let mut value = HeaderValue::from_str(value).map_err(|_| OpenAiError::Config {
                field: format!("headers.{name}"),
                reason: "its value is not a valid header value".into(),
            })?;
            value.set_sensitive(true);
            headers.insert(header, value);
        }
        if let Some(key) = &config.api_key {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {}", key.expose())).map_err(|_| {
                    OpenAiError::Config {
                        field: "api_key".into(),
                        reason: "it holds characters a header cannot carry".into(),
                    }
                })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if !headers.contains_key(USER_AGENT) {
            headers.insert(
                USER_AGENT,
                HeaderValue::from_static(concat!("agent-model-openai/", env!("CARGO_PKG_VERSION"))),
            );
        }
        let secrets: Vec<&str> = config
            .api_key
            .iter()
            .map(|k| k.expose())
            .chain(config.headers.values().map(String::as_str))
            .collect();
        let shown = Shown::new(&secrets, config.limits.max_error_chars);
        let client = h::client(config.timeouts.connect)?;
        Ok(Self {
            options: config.options.clone(),
            inner: Arc::new(Inner {
                shown_url: h::shown_url(&config.base_url),
                config,
                endpoint,
                host,
                headers,
                client,
                shown,
                usage: Mutex::new(Usage::default()),
            }),
        })
    }

    /// The configuration it was built from.
    pub fn config(&self) -> &OpenAiConfig {
        &self.inner.config
    }

    /// The base URL as shown in messages (no credentials, query or fragment).
    pub fn shown_base_url(&self) -> &str {
        &self.inner.shown_url
    }

    /// The same model sending `options` instead of the configured ones.
    #[must_use]
    pub fn with_options(&self, options: ChatOptions) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            options,
        }
    }

    /// The options sent with each request.
    pub fn options(&self) -> &ChatOptions {
        &self.options
    }

    /// The tokens of every completion so far (of this model and its clones).
    pub fn total_usage(&self) -> Usage {
        *self.inner.usage.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One completion, not streamed.
    pub async fn chat(&self, request: &ModelRequest) -> Result<ChatResponse, OpenAiError> {
        self.run(request, false, &mut |_| {}).await
    }

    /// One completion, streamed: `on_delta` sees the text and each tool call's start as they
    /// arrive; the result is the whole answer. An attempt that failed after something was
    /// handed to `on_delta` is not retried.
    pub async fn chat_stream(
        &self,
        request: &ModelRequest,
        on_delta: &mut (dyn FnMut(StreamDelta<'_>) + Send),
    ) -> Result<ChatResponse, OpenAiError> {
        self.run(request, true, on_delta).await
    }

    async fn run(
        &self,
        request: &ModelRequest,
        stream: bool,
        sink: &mut (dyn FnMut(StreamDelta<'_>) + Send),
    ) -> Result<ChatResponse, OpenAiError> {
        let inner = &self.inner;
        let options = effective_options(&self.options, &request.settings);
        let body = request_body(&inner.config.model, request, &options, stream)?;
        let body = Bytes::from(
            serde_json::to_vec(&body).map_err(|source| OpenAiError::Encode { source })?,
        );
        let policy = inner.config.retry;
        let started = Instant::now();
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let mut emitted = false;
            let failure = match self.attempt(body.clone(), stream, sink, &mut emitted).await {
                Ok(mut response) => {
                    response.attempts = attempts;
                    if let Some(usage) = response.usage {
                        *inner.usage.lock().unwrap_or_else(|e| e.into_inner()) += usage;
                    }
                    return Ok(response);
                }
                Err(failure) => failure,
            };
            if !failure.retryable || emitted {
                return Err(failure.error);
            }
            if attempts > policy.max_retries {
                return Err(if attempts == 1 {
                    failure.error
                } else {
                    OpenAiError::GaveUp {
                        attempts,
                        budget_spent: false,
                        last: Box::new(failure.error),
                    }
                });
            }
            let delay = failure
                .retry_after
                .unwrap_or_else(|| backoff(&policy, attempts));
            if started.elapsed() + delay > policy.max_elapsed {
                return Err(OpenAiError::GaveUp {
                    attempts,
                    budget_spent: true,
                    last: Box::new(failure.error),
                });
            }
            // The error's text is safe to log: provider text in it is redacted and bounded.
            tracing::debug!(
                attempt = attempts,
                delay_ms = delay.as_millis() as u64,
                error = %failure.error,
                "chat completion attempt failed; retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }

    async fn attempt(
        &self,
        body: Bytes,
        stream: bool,
        sink: &mut (dyn FnMut(StreamDelta<'_>) + Send),
        emitted: &mut bool,
    ) -> Result<ChatResponse, Failure> {
        let inner = &self.inner;
        let timeouts = inner.config.timeouts;
        let started = Instant::now();
        let deadline = deadline_after(started, timeouts.request);
        let request_timeout = || OpenAiError::Timeout {
            kind: TimeoutKind::Request,
            after: timeouts.request,
        };
        let mut request = http::Request::post(inner.endpoint.clone())
            .body(Full::new(body))
            .expect("a request of a checked URI and headers");
        *request.headers_mut() = inner.headers.clone();
        let accept = if stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        request
            .headers_mut()
            .insert(ACCEPT, HeaderValue::from_static(accept));

        let response = match timeout_at(deadline, inner.client.request(request)).await {
            Err(_) => return Err(request_timeout().into()),
            Ok(Err(e)) => return Err(h::failure(&e, e.is_connect(), &inner.host).into()),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        let is_event_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        let retry_after = h::retry_after(response.headers(), SystemTime::now());
        let content_length = response
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        let mut body = response.into_body();

        if !status.is_success() {
            let text = timeout_at(deadline, h::read_prefix(&mut body, ERROR_BODY_BYTES))
                .await
                .unwrap_or_default();
            let provider = error_body(&text, &inner.shown);
            return Err(Failure {
                error: OpenAiError::Status {
                    status,
                    provider,
                    retry_after,
                },
                retryable: status == StatusCode::REQUEST_TIMEOUT
                    || status == StatusCode::TOO_MANY_REQUESTS
                    || status.is_server_error(),
                retry_after,
            });
        }
        let limit = inner.config.limits.max_body_bytes;
        if content_length.is_some_and(|n| n > limit as u64) {
            return Err(OpenAiError::TooLarge {
                kind: LimitKind::Body,
                limit,
            }
            .into());
        }
        if stream && is_event_stream {
            let stream_deadline = deadline_after(started, timeouts.stream);
            return self
                .read_stream(&mut body, stream_deadline, sink, emitted)
                .await;
        }
        let bytes = match timeout_at(deadline, h::read_bounded(&mut body, limit, &inner.host)).await
        {
            Err(_) => return Err(request_timeout().into()),
            Ok(result) => result?,
        };
        let completion: Completion =
            serde_json::from_slice(&bytes).map_err(|e| OpenAiError::InvalidResponse {
                reason: inner.shown.text(&e.to_string()),
            })?;
        let response = from_completion(completion, &inner.shown)?;
        // A server that answered a stream request with one JSON body: hand it on whole.
        if stream && !response.text.is_empty() {
            *emitted = true;
            sink(StreamDelta::Text(&response.text));
        }
        Ok(response)
    }

    /// Reads an event stream until `[DONE]` or its end, within two deadlines: `stream_deadline`
    /// for the whole of it ([`Timeouts::stream`](crate::Timeouts::stream)), and the idle one,
    /// pushed back only by frames that carry event fields (a keep-alive comment or a blank line
    /// does not). Neither timeout is retried.
    async fn read_stream(
        &self,
        body: &mut Incoming,
        stream_deadline: Instant,
        sink: &mut (dyn FnMut(StreamDelta<'_>) + Send),
        emitted: &mut bool,
    ) -> Result<ChatResponse, Failure> {
        let inner = &self.inner;
        let timeouts = inner.config.timeouts;
        let expired = |kind| -> Failure {
            let after = match kind {
                TimeoutKind::Stream => timeouts.stream,
                _ => timeouts.idle,
            };
            OpenAiError::Timeout { kind, after }.into()
        };
        let mut decoder = StreamDecoder::with_shown(inner.config.limits, inner.shown.clone());
        let mut idle_deadline = deadline_after(Instant::now(), timeouts.idle);
        let result = loop {
            // Checked here too: a body whose frames are always ready would never let the timer
            // below fire.
            if Instant::now() >= stream_deadline {
                break Err(expired(TimeoutKind::Stream));
            }
            let next = stream_deadline.min(idle_deadline);
            let frame = match timeout_at(next, body.frame()).await {
                Err(_) if next == stream_deadline => break Err(expired(TimeoutKind::Stream)),
                Err(_) => break Err(expired(TimeoutKind::IdleStream)),
                Ok(None) => break Ok(()),
                Ok(Some(Err(e))) => break Err(Failure::from(h::failure(&e, false, &inner.host))),
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let progress = decoder.progress();
            if let Err(e) = decoder.feed(&data, sink) {
                break Err(e.into());
            }
            if decoder.progress() != progress {
                idle_deadline = deadline_after(Instant::now(), timeouts.idle);
            }
            if decoder.is_done() {
                break Ok(());
            }
        };
        *emitted = decoder.has_emitted();
        result?;
        Ok(decoder.finish(sink)?)
    }
}

/// The backoff before retry `attempt` (1 for the first): the initial backoff doubled per retry,
/// at most the longest, with jitter (between half and all of it).
fn backoff(policy: &RetryPolicy, attempt: u32) -> Duration {
    let doubled = policy.initial_backoff.saturating_mul(
        1u32.checked_shl(attempt.saturating_sub(1))
            .unwrap_or(u32::MAX),
    );
    let capped = doubled.min(policy.max_backoff);
    let random = std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now());
    let fraction = (random >> 11) as f64 / (1u64 << 53) as f64;
    capped.mul_f64(0.5 + 0.5 * fraction)
}

impl OpenAiModel {
    /// A response or error as the [`Model`] trait gives it: the error names model and base URL.
    fn answer(
        &self,
        response: Result<ChatResponse, OpenAiError>,
    ) -> Result<ModelResponse, ModelError> {
        let answer = response.and_then(|response| {
            let usage = response.usage;
            let message = response.into_message()?;
            Ok(match usage {
                Some(usage) => ModelResponse::new(message).with_usage(usage),
                None => ModelResponse::new(message),
            })
        });
        answer.map_err(|error| ModelError::Request {
            message: format!(
                "model `{}` at {}",
                self.inner.config.model, self.inner.shown_url
            ),
            source: Some(Box::new(error)),
        })
    }
}

#[async_trait]
impl Model for OpenAiModel {
    /// Streamed when [`OpenAiConfig::stream`] is set (the default), else one whole answer.
    async fn complete(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        let response = if self.inner.config.stream {
            self.chat_stream(&request, &mut |_| {}).await
        } else {
            self.chat(&request).await
        };
        self.answer(response)
    }

    /// Always streamed: the text goes to `text` as it arrives.
    async fn complete_streaming(
        &self,
        request: ModelRequest,
        text: &dyn TextSink,
    ) -> Result<ModelResponse, ModelError> {
        let response = self
            .chat_stream(&request, &mut |delta| {
                if let StreamDelta::Text(piece) = delta {
                    text.text(piece);
                }
            })
            .await;
        self.answer(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_longest_with_jitter() {
        let policy = RetryPolicy::default()
            .with_initial_backoff(Duration::from_millis(100))
            .with_max_backoff(Duration::from_millis(350));
        for (attempt, full) in [(1, 100), (2, 200), (3, 350), (40, 350)] {
            let full = Duration::from_millis(full);
            let wait = backoff(&policy, attempt);
            assert!(wait >= full / 2 && wait <= full, "{attempt}: {wait:?}");
        }
    }

    #[test]
    fn a_model_needs_a_name_and_usable_headers() {
        let err = OpenAiModel::new(OpenAiConfig::new(" ")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid model configuration: model: no model is set"
        );
        let err =
            OpenAiModel::new(OpenAiConfig::new("m").with_header("X-Key", "line\nbreak-secret"))
                .unwrap_err()
                .to_string();
        assert_eq!(
            err,
            "invalid model configuration: headers.X-Key: its value is not a valid header value"
        );
        let err = OpenAiModel::new(
            OpenAiConfig::new("m")
                .with_api_key("sk-1")
                .with_header("Authorization", "Bearer other"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("sets this header itself"), "{err}");
    }
}
