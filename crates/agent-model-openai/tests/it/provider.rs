//! A scripted chat-completions provider on 127.0.0.1: each request gets the reply the test's
//! script chooses for it (by its number, from 0), and every request is recorded.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_model_openai::{OpenAiConfig, RetryPolicy, Timeouts};
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// What the provider does with one request.
pub(crate) enum Reply {
    /// A whole answer.
    Json {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// A server-sent event stream: each string is written as one frame, as given (a test
    /// splits events across frames as it likes); then the stream ends or stalls.
    Sse { frames: Vec<String>, then: End },
    /// A `200` JSON body that never ends: the same bytes again and again.
    Endless,
    /// A server-sent event stream that never ends: `frame` at once, then again every `every`.
    Trickle { frame: String, every: Duration },
    /// The connection is reset (TCP RST) instead of an answer.
    Reset,
}

/// How a stream ends.
pub(crate) enum End {
    /// The body ends.
    Close,
    /// Nothing more is ever sent, and the connection stays open.
    Stall,
}

impl Reply {
    /// A `200` JSON answer.
    pub(crate) fn ok(body: Value) -> Self {
        Self::Json {
            status: 200,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }

    /// An error answer with the given JSON body and headers.
    pub(crate) fn status(status: u16, headers: Vec<(&'static str, String)>, body: Value) -> Self {
        Self::Json {
            status,
            headers,
            body: body.to_string(),
        }
    }

    /// A stream of these chunks (each one event, one frame), then `[DONE]`.
    pub(crate) fn stream(chunks: &[Value]) -> Self {
        let mut frames: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        frames.push("data: [DONE]\n\n".into());
        Self::Sse {
            frames,
            then: End::Close,
        }
    }
}

/// One request as the provider saw it.
#[derive(Clone)]
pub(crate) struct Recorded {
    pub(crate) body: Value,
    pub(crate) headers: http::HeaderMap,
}

type Script = dyn Fn(usize, &Value) -> Reply + Send + Sync;

pub(crate) struct Provider {
    pub(crate) base_url: String,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Provider {
    /// A provider answering with `script`.
    pub(crate) async fn start(
        script: impl Fn(usize, &Value) -> Reply + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(script);
        let task = tokio::spawn({
            let recorded = Arc::clone(&recorded);
            async move {
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        return;
                    };
                    tokio::spawn(connection(tcp, Arc::clone(&script), Arc::clone(&recorded)));
                }
            }
        });
        Self {
            base_url,
            recorded,
            task,
        }
    }

    /// A provider giving every request the same reply.
    pub(crate) async fn always(reply: impl Fn() -> Reply + Send + Sync + 'static) -> Self {
        Self::start(move |_, _| reply()).await
    }

    /// The requests so far.
    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.recorded.lock().unwrap().clone()
    }

    /// A configuration for this provider: quick retries and short timeouts, so a test that
    /// goes wrong fails fast.
    pub(crate) fn config(&self) -> OpenAiConfig {
        OpenAiConfig::new("test-model")
            .with_base_url(&self.base_url)
            .with_api_key("sk-test-0123456789abcdef")
            .with_retry(
                RetryPolicy::default()
                    .with_initial_backoff(Duration::from_millis(1))
                    .with_max_backoff(Duration::from_millis(5)),
            )
            .with_timeouts(
                Timeouts::default()
                    .with_request(Duration::from_secs(20))
                    .with_idle(Duration::from_secs(20)),
            )
    }
}

async fn connection(tcp: TcpStream, script: Arc<Script>, recorded: Arc<Mutex<Vec<Recorded>>>) {
    let std = tcp.into_std().unwrap();
    let spare = std.try_clone().unwrap();
    let tcp = TcpStream::from_std(std).unwrap();
    let reset = Arc::new(Notify::new());
    let service = {
        let reset = Arc::clone(&reset);
        service_fn(move |request: Request<Incoming>| {
            let script = Arc::clone(&script);
            let recorded = Arc::clone(&recorded);
            let reset = Arc::clone(&reset);
            async move {
                let (parts, body) = request.into_parts();
                let body = body.collect().await.unwrap().to_bytes();
                let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let number = {
                    let mut recorded = recorded.lock().unwrap();
                    recorded.push(Recorded {
                        body: body.clone(),
                        headers: parts.headers,
                    });
                    recorded.len() - 1
                };
                let reply = script(number, &body);
                respond(reply, &reset).await
            }
        })
    };
    let serve =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), service);
    tokio::select! {
        _ = serve => {}
        () = reset.notified() => {
            let spare = TcpStream::from_std(spare).unwrap();
            spare.set_zero_linger().unwrap();
        }
    }
}

type Body = BoxBody<Bytes, Infallible>;

async fn respond(reply: Reply, reset: &Notify) -> Result<Response<Body>, Infallible> {
    let response = match reply {
        Reply::Json {
            status,
            headers,
            body,
        } => {
            let mut response = Response::builder()
                .status(status)
                .header("content-type", "application/json");
            for (name, value) in headers {
                response = response.header(name, value);
            }
            response.body(Full::new(Bytes::from(body)).boxed())
        }
        Reply::Sse { frames, then } => {
            let frames = futures::stream::iter(frames)
                .map(|f| Ok::<_, Infallible>(Frame::data(Bytes::from(f))));
            let body = match then {
                End::Close => BodyExt::boxed(StreamBody::new(frames)),
                End::Stall => {
                    BodyExt::boxed(StreamBody::new(frames.chain(futures::stream::pending())))
                }
            };
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(body)
        }
        Reply::Endless => {
            let chunk = Bytes::from(vec![b' '; 16 * 1024]);
            let frames =
                futures::stream::repeat(chunk).map(|c| Ok::<_, Infallible>(Frame::data(c)));
            Response::builder()
                .header("content-type", "application/json")
                .body(BodyExt::boxed(StreamBody::new(frames)))
        }
        Reply::Trickle { frame, every } => {
            let frame = Bytes::from(frame);
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let frames = futures::stream::unfold(ticks, move |mut ticks| {
                let frame = frame.clone();
                async move {
                    ticks.tick().await;
                    Some((Ok::<_, Infallible>(Frame::data(frame)), ticks))
                }
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(BodyExt::boxed(StreamBody::new(frames)))
        }
        Reply::Reset => {
            reset.notify_one();
            std::future::pending::<()>().await;
            unreachable!()
        }
    };
    Ok(response.unwrap())
}

/// A whole completion with `message`.
pub(crate) fn completion(message: Value, finish_reason: &str, usage: Option<(u64, u64)>) -> Value {
    let mut body = serde_json::json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    });
    if let Some((prompt, completion)) = usage {
        body["usage"] = serde_json::json!({
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        });
    }
    body
}

/// The text of an error and all its causes, and its `Debug`.
pub(crate) fn shown(error: &(dyn std::error::Error + 'static)) -> (String, String) {
    (agent_core::error_chain(error), format!("{error:?}"))
}
