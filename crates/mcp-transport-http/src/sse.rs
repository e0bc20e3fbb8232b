//! Server-sent events with a bound on the size of one event, scrubbed and checked for depth.
//!
//! The SSE parser buffers an event until its terminating blank line, so a server that sends
//! an endless event could make it buffer without limit. [`EventLimiter`] sits before the
//! parser: it holds back the event in progress (up to the limit) and forwards only complete
//! events. An event that grows past the limit is dropped as it streams by:
//!
//! - on the response stream of a request, a JSON-RPC error answering that request is sent
//!   on **as soon as the event passes the limit**, so the call fails at once with a message
//!   naming the server and the limit (rather than waiting for the end of an event that may
//!   never come, or for a response that will never be delivered);
//! - its last `id:` line and its last valid `retry:` line are kept (at most 1 KiB each,
//!   however many the event repeats) and sent on when it ends, so the stream's position
//!   still advances and a resumption (`Last-Event-ID`) does not ask for the same oversized
//!   event again;
//! - on other streams it simply disappears (with a warning in the log).
//!
//! Failing the stream instead would not do: rmcp resumes a failed stream from the last event
//! id, the server replays the same event, and the stream would fail again, forever
//! (docs/upstream.md#rmcp-sse-bad-event).
//!
//! After parsing, each event's data goes through [`Inbound::event`]: credentials the session
//! sent are scrubbed, and a message nested deeper than [`MAX_JSON_DEPTH`](crate::MAX_JSON_DEPTH)
//! is replaced the same way as an oversized one (rmcp would drop it silently:
//! docs/upstream.md#rmcp-sse-bad-event).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use rmcp::model::RequestId;
use sse_stream::{Error as SseError, Sse, SseStream};

use crate::error::HttpError;
use crate::inbound::{Inbound, error_answer};

/// Longest `id:` / `retry:` line kept from a dropped event.
const KEEP_LINE_MAX: usize = 1024;

/// Splits a byte stream into SSE events, holding back each event until it is complete and
/// replacing those larger than the limit. Line ends are `\n`, `\r\n` or `\r`; a blank line
/// ends an event; line-end bytes do not count towards the limit.
#[derive(Debug)]
pub(crate) struct EventLimiter {
    max: usize,
    /// The event in progress, when it is within the limit.
    event: Vec<u8>,
    /// Its bytes so far, line ends excluded.
    size: usize,
    /// The event in progress is over the limit: its bytes are being dropped.
    dropping: bool,
    /// While dropping: the start of the line in progress.
    line: Vec<u8>,
    /// While dropping: the event's last `id:` line (the one that counts).
    kept_id: Vec<u8>,
    /// While dropping: the event's last valid `retry:` line (the one that counts).
    kept_retry: Vec<u8>,
    at_line_start: bool,
    after_cr: bool,
    /// The request whose answer replaces the first dropped event (once), built only then.
    replacement: Option<RequestId>,
    server: Arc<str>,
}

impl EventLimiter {
    /// A limiter for the response stream of request `request` (or of no request).
    pub(crate) fn new(max: usize, server: Arc<str>, request: Option<&RequestId>) -> Self {
        Self {
            max,
            event: Vec::new(),
            size: 0,
            dropping: false,
            line: Vec::new(),
            kept_id: Vec::new(),
            kept_retry: Vec::new(),
            at_line_start: true,
            after_cr: false,
            replacement: request.cloned(),
            server,
        }
    }

    /// Feeds one chunk; appends what may go to the parser to `out`.
    pub(crate) fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        for &byte in chunk {
            if std::mem::replace(&mut self.after_cr, false) && byte == b'\n' {
                // The `\n` of a `\r\n`: the line already ended at the `\r`.
                if !self.dropping {
                    let target = if self.event.is_empty() {
                        &mut *out
                    } else {
                        &mut self.event
                    };
                    target.push(byte);
                }
                continue;
            }
            if byte == b'\r' || byte == b'\n' {
                let blank = self.at_line_start;
                self.at_line_start = true;
                self.after_cr = byte == b'\r';
                if self.dropping {
                    self.keep_line();
                    if blank {
                        self.finish_dropped(out);
                    }
                } else {
                    self.event.push(byte);
                    if blank {
                        out.append(&mut self.event);
                        self.size = 0;
                    }
                }
                continue;
            }
            self.at_line_start = false;
            if self.dropping {
                if self.line.len() <= KEEP_LINE_MAX {
                    self.line.push(byte);
                }
                continue;
            }
            self.event.push(byte);
            self.size += 1;
            if self.size > self.max {
                self.start_dropping(out);
            }
        }
    }

    /// Flushes an unterminated event at the end of the stream (the parser drops it).
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>) {
        if !self.dropping {
            out.append(&mut self.event);
        }
    }

    /// The event in progress passed the limit: its complete lines are looked at for `id:`
    /// and `retry:`, and on a request's stream the error answering it goes out now.
    fn start_dropping(&mut self, out: &mut Vec<u8>) {
        tracing::warn!(
            server = %self.server,
            limit = self.max,
            "dropping a server-sent event over the size limit"
        );
        self.dropping = true;
        let event = std::mem::take(&mut self.event);
        let mut lines = event.split(|b| *b == b'\n' || *b == b'\r').peekable();
        while let Some(line) = lines.next() {
            if lines.peek().is_some() {
                self.line.clear();
                self.line
                    .extend_from_slice(&line[..line.len().min(KEEP_LINE_MAX + 1)]);
                self.keep_line();
            } else {
                // The line in progress.
                self.line.clear();
                self.line
                    .extend_from_slice(&line[..line.len().min(KEEP_LINE_MAX + 1)]);
            }
        }
        self.event = Vec::new();
        if let Some(id) = self.replacement.take() {
            let error = HttpError::SseEventTooLarge {
                server: self.server.to_string(),
                limit: self.max,
            };
            let data = error_answer(&id, &error);
            self.emit_kept(out);
            out.extend_from_slice(b"data: ");
            out.extend_from_slice(data.as_bytes());
            out.extend_from_slice(b"\n\n");
        }
    }

    /// Sends on the kept `id:` and `retry:` lines (without ending the event).
    fn emit_kept(&mut self, out: &mut Vec<u8>) {
        for line in [&mut self.kept_id, &mut self.kept_retry] {
            if !line.is_empty() {
                out.append(line);
                out.push(b'\n');
            }
        }
    }

    /// At the end of a line of a dropped event: remembers it if it is a short `id:` line, or
    /// a short `retry:` line the parser would apply. A later one replaces an earlier one, as
    /// it would in the parser, so what is kept never exceeds two lines.
    fn keep_line(&mut self) {
        let line = &self.line;
        if line.len() <= KEEP_LINE_MAX {
            if let Some(value) = line.strip_prefix(b"id:") {
                // The SSE parser ignores an id containing NUL.
                if !value.contains(&0) {
                    self.kept_id.clear();
                    self.kept_id.extend_from_slice(line);
                }
            } else if let Some(value) = line.strip_prefix(b"retry:") {
                let value = value.strip_prefix(b" ").unwrap_or(value);
                // The SSE parser ignores a retry that is not all ASCII digits.
                if !value.is_empty() && value.iter().all(u8::is_ascii_digit) {
                    self.kept_retry.clear();
                    self.kept_retry.extend_from_slice(line);
                }
            }
        }
        self.line.clear();
    }

    #[cfg(test)]
    fn kept_len(&self) -> usize {
        self.kept_id.len() + self.kept_retry.len()
    }

    /// The end of a dropped event: its `id:` and `retry:` lines seen since the error went
    /// out (or all of them, with no error), as an event of their own.
    fn finish_dropped(&mut self, out: &mut Vec<u8>) {
        let before = out.len();
        self.emit_kept(out);
        if out.len() > before {
            out.push(b'\n');
        }
        self.dropping = false;
        self.size = 0;
    }
}

pin_project_lite::pin_project! {
    /// A byte stream of complete SSE events, none larger than the limit.
    pub(crate) struct LimitedEvents<S> {
        #[pin]
        inner: S,
        limiter: EventLimiter,
        done: bool,
    }
}

impl<S, E> Stream for LimitedEvents<S>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    type Item = Result<Bytes, HttpError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        loop {
            let item = match this.inner.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(item) => item,
            };
            let mut out = Vec::new();
            match item {
                Some(Ok(chunk)) => this.limiter.feed(&chunk, &mut out),
                Some(Err(e)) => {
                    *this.done = true;
                    return Poll::Ready(Some(Err(HttpError::Body {
                        server: this.limiter.server.to_string(),
                        reason: crate::cause::reason(&e),
                    })));
                }
                None => {
                    *this.done = true;
                    this.limiter.finish(&mut out);
                    if out.is_empty() {
                        return Poll::Ready(None);
                    }
                }
            }
            if !out.is_empty() {
                return Poll::Ready(Some(Ok(Bytes::from(out))));
            }
        }
    }
}

/// Parses `bytes` as SSE, no event larger than `max_event_bytes`, each event scrubbed and
/// checked for depth (see the module docs for what replaces an oversized or too deep one;
/// `request` is the request whose response stream this is).
pub(crate) fn bounded_sse<S, E>(
    bytes: S,
    max_event_bytes: usize,
    inbound: Inbound,
    request: Option<&RequestId>,
) -> BoxStream<'static, Result<Sse, SseError>>
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let request = request.cloned();
    let answered = request.clone();
    let events = SseStream::from_bytes_stream(LimitedEvents {
        inner: bytes,
        limiter: EventLimiter::new(max_event_bytes, inbound.server.clone(), request.as_ref()),
        done: false,
    })
    .map(move |event| event.map(|event| inbound.event(event, request.as_ref())));
    crate::drain::ending_with_response(events, answered)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` to a limiter (limit `max`, response stream of request 7 when
    /// `for_request`); compares what reaches the parser, chunk by chunk, with `expected`.
    fn check(max: usize, for_request: bool, chunks: &[&str], expected: &[&str]) {
        let id = RequestId::Number(7);
        let mut limiter = EventLimiter::new(max, Arc::from("srv"), for_request.then_some(&id));
        let mut got = Vec::new();
        for chunk in chunks {
            let mut out = Vec::new();
            limiter.feed(chunk.as_bytes(), &mut out);
            got.push(String::from_utf8(out).unwrap());
        }
        let mut out = Vec::new();
        limiter.finish(&mut out);
        got.push(String::from_utf8(out).unwrap());
        assert_eq!(got, expected, "max {max}, chunks {chunks:?}");
    }

    const ERR: &str = r#"data: {"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"server `srv`: a server-sent event exceeds the limit of 8 bytes"}}"#;

    #[test]
    fn events_within_the_limit_pass_whole() {
        check(
            8,
            false,
            &["data: a\n\n", "data: b\n\n"],
            &["data: a\n\n", "data: b\n\n", ""],
        );
        // Held back until complete, across chunks and line-end styles.
        check(
            9,
            false,
            &["data:", " abc\n", "\n", "data: xyz\r\n\r\n"],
            &["", "", "data: abc\n\n", "data: xyz\r\n\r\n", ""],
        );
        check(
            8,
            false,
            &["data: a\r\rdata: b\r\r"],
            &["data: a\r\rdata: b\r\r", ""],
        );
        // A `\r\n` split after the `\r` of the blank line.
        check(
            8,
            false,
            &["data: a\r\n\r", "\ndata: b\n\n"],
            &["data: a\r\n\r", "\ndata: b\n\n", ""],
        );
        // An unterminated event is flushed at the end (the parser discards it).
        check(8, false, &["data: a"], &["", "data: a"]);
    }

    #[test]
    fn oversized_events_are_replaced() {
        // On a request's stream: the error answers the request as soon as the event passes
        // the limit; its id follows when it ends.
        check(
            8,
            true,
            &["data: ok\n\n", "data: abc", "def\nid: 5\n\n", "data: b\n\n"],
            &[
                "data: ok\n\n",
                &format!("{ERR}\n\n"),
                "id: 5\n\n",
                "data: b\n\n",
                "",
            ],
        );
        // An id before the oversized data goes with the error.
        check(
            8,
            true,
            &["id: 4\ndata: abcdef\n\n"],
            &[&format!("id: 4\n{ERR}\n\n"), ""],
        );
        // An event that never ends still answers the request.
        check(8, true, &["data: abcdef"], &[&format!("{ERR}\n\n"), ""]);
        // The request is answered once; a later oversized event only keeps its id.
        check(
            8,
            true,
            &["data: abcdef\n\n", "data: ghijkl\nid: 9\n\n"],
            &[&format!("{ERR}\n\n"), "id: 9\n\n", ""],
        );
        // On another stream: only the id survives, or nothing at all.
        check(8, false, &["data: abcdef\nid: 5\n\n"], &["id: 5\n\n", ""]);
        check(
            8,
            false,
            &["data: abcdef\n\ndata: b\n\n"],
            &["data: b\n\n", ""],
        );
        // Two data lines of one event add up (line ends excluded).
        check(
            16,
            false,
            &["data: abc\ndata: d\n\n"],
            &["data: abc\ndata: d\n\n", ""],
        );
        check(16, false, &["data: abc\ndata: def\n\n"], &["", ""]);
    }

    /// Everything the limiter holds between chunks.
    fn held(limiter: &EventLimiter) -> usize {
        limiter.event.len() + limiter.line.len() + limiter.kept_len()
    }

    #[test]
    fn a_dropped_event_keeps_only_its_last_id_and_retry() {
        let mut limiter = EventLimiter::new(8, Arc::from("srv"), None);
        let mut out = Vec::new();
        limiter.feed(b"data: far too long for the limit\n", &mut out);
        let mut most = 0;
        for i in 0..100_000 {
            limiter.feed(format!("id: {i}\nretry: {i}\n").as_bytes(), &mut out);
            most = most.max(held(&limiter));
        }
        assert!(out.is_empty());
        assert!(most <= 64, "the limiter held {most} bytes");
        limiter.feed(b"retry: x\n\n", &mut out);
        // The last id and the last valid retry, as the parser would have seen them.
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "id: 99999\nretry: 99999\n\n"
        );
    }

    #[tokio::test]
    async fn oversized_response_event_becomes_an_error_naming_the_server() {
        let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
            Ok(Bytes::from_static(b"id: 1\ndata:\n\n")),
            Ok(Bytes::from(format!("data: {}\nid: 2\n\n", "x".repeat(64)))),
        ];
        let id = RequestId::Number(3);
        let inbound = Inbound {
            server: Arc::from("srv"),
            secrets: Arc::new(crate::inbound::Secrets::new([])),
        };
        let mut events = bounded_sse(futures::stream::iter(chunks), 32, inbound, Some(&id));
        let first = events.next().await.unwrap().unwrap();
        assert_eq!(first.id.as_deref(), Some("1"));
        let second = events.next().await.unwrap().unwrap();
        let data = second.data.unwrap();
        assert!(data.contains(r#""id":3"#), "{data}");
        assert!(
            data.contains("server `srv`: a server-sent event exceeds the limit of 32 bytes"),
            "{data}"
        );
        // The dropped event's id still moves the stream on.
        let third = events.next().await.unwrap().unwrap();
        assert_eq!((third.id.as_deref(), third.data), (Some("2"), None));
        assert!(events.next().await.is_none());
    }
}
