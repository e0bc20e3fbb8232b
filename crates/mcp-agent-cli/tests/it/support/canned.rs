//! A model endpoint for what no registry mock can send: a few lines of HTTP/1.1 on std that
//! answer each chat-completions request with a stream this test writes, chosen from what the
//! client sent (one request per connection, at most [`MAX_REQUESTS`]).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::Duration;

/// The most requests one endpoint answers before it stops.
const MAX_REQUESTS: usize = 16;

/// A running endpoint; its thread ends after [`MAX_REQUESTS`] or with the test process.
pub(crate) struct Canned {
    /// Its base URL, `http://127.0.0.1:PORT/v1`.
    pub(crate) base_url: String,
}

/// One `data:` event per item of `events`, then `[DONE]`: the body of a streamed answer.
pub(crate) fn sse(events: &[serde_json::Value]) -> String {
    let mut body = String::new();
    for event in events {
        body.push_str(&format!("data: {event}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    body
}

impl Canned {
    /// An endpoint answering each request body with the SSE body `answer` gives.
    pub(crate) fn start(answer: impl Fn(&str) -> String + Send + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(MAX_REQUESTS) {
                let Ok(mut stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(value) = lower.strip_prefix("content-length:") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0u8; length];
                if reader.read_exact(&mut body).is_err() {
                    continue;
                }
                let text = answer(&String::from_utf8_lossy(&body));
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                    text.len()
                );
            }
        });
        Self {
            base_url: format!("http://127.0.0.1:{port}/v1"),
        }
    }
}
