//! Server-sent events with a bound on the size of one event.
//!
//! The SSE parser buffers an event until its terminating blank line, so a server that never
//! ends an event could make it buffer without limit. [`EventSizeLimit`] counts the bytes of
//! the event in progress as they stream by, before the parser sees them, and fails the stream
//! once an event grows past the limit.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use sse_stream::{Error as SseError, Sse, SseStream};

use crate::error::HttpError;

/// Tracks the size of the SSE event in progress across chunk boundaries.
///
/// Line ends are `\n`, `\r\n` or `\r`; a blank line ends the event. Line-end bytes are not
/// counted; everything else (field names, values, comments) is.
#[derive(Debug, Clone)]
pub(crate) struct EventSizeCounter {
    max: usize,
    event_bytes: usize,
    at_line_start: bool,
    after_cr: bool,
}

impl EventSizeCounter {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max,
            event_bytes: 0,
            at_line_start: true,
            after_cr: false,
        }
    }

    /// Feeds one chunk; `false` once the event in progress exceeds the limit.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> bool {
        for &byte in chunk {
            let after_cr = std::mem::replace(&mut self.after_cr, false);
            match byte {
                // The `\n` of a `\r\n`: the line already ended at the `\r`.
                b'\n' if after_cr => {}
                b'\r' | b'\n' => {
                    if self.at_line_start {
                        self.event_bytes = 0;
                    }
                    self.at_line_start = true;
                    self.after_cr = byte == b'\r';
                }
                _ => {
                    self.at_line_start = false;
                    self.event_bytes += 1;
                    if self.event_bytes > self.max {
                        return false;
                    }
                }
            }
        }
        true
    }
}

pin_project_lite::pin_project! {
    /// A byte stream that fails once one SSE event grows past the limit.
    pub(crate) struct EventSizeLimit<S> {
        #[pin]
        inner: S,
        counter: EventSizeCounter,
        server: Arc<str>,
        done: bool,
    }
}

impl<S, E> Stream for EventSizeLimit<S>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    type Item = Result<Bytes, HttpError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        let item = match this.inner.poll_next(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(item) => item,
        };
        Poll::Ready(match item {
            None => None,
            Some(Ok(chunk)) if this.counter.feed(&chunk) => Some(Ok(chunk)),
            Some(Ok(_)) => {
                *this.done = true;
                Some(Err(HttpError::SseEventTooLarge {
                    server: this.server.to_string(),
                    limit: this.counter.max,
                }))
            }
            Some(Err(e)) => {
                *this.done = true;
                Some(Err(HttpError::Body {
                    server: this.server.to_string(),
                    source: Box::new(e),
                }))
            }
        })
    }
}

/// Parses `bytes` as SSE, failing when one event exceeds `max_event_bytes`.
pub(crate) fn bounded_sse<S, E>(
    bytes: S,
    max_event_bytes: usize,
    server: Arc<str>,
) -> BoxStream<'static, Result<Sse, SseError>>
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    SseStream::from_bytes_stream(EventSizeLimit {
        inner: bytes,
        counter: EventSizeCounter::new(max_event_bytes),
        server,
        done: false,
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` to a counter with limit `max`; returns the index of the chunk that broke
    /// the limit, if any.
    fn check(max: usize, chunks: &[&str], expected: Option<usize>) {
        let mut counter = EventSizeCounter::new(max);
        let broke = chunks.iter().position(|c| !counter.feed(c.as_bytes()));
        assert_eq!(broke, expected, "max {max}, chunks {chunks:?}");
    }

    #[test]
    fn event_size_is_counted_per_event_across_chunks() {
        // Each event is within the limit.
        check(8, &["data: a\n\n", "data: b\n\n"], None);
        check(9, &["data:", " abc\n", "\n", "data: xyz\r\n\r\n"], None);
        // CR-only line ends also end events.
        check(8, &["data: a\r\rdata: b\r\r"], None);
        // One event split over chunks grows past the limit.
        check(8, &["data: ab", "c\n", "\n"], Some(1));
        // Two data lines of one event add up (line ends excluded).
        check(16, &["data: abc\ndata: d\n\n"], None);
        check(16, &["data: abc\ndata: def\n\n"], Some(0));
        // Without a blank line the counter never resets.
        check(10, &["data: a\n", "data: b\n"], Some(1));
    }

    #[tokio::test]
    async fn oversized_event_fails_the_stream_and_names_the_server() {
        let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
            Ok(Bytes::from_static(b"data: ok\n\n")),
            Ok(Bytes::from(format!("data: {}\n\n", "x".repeat(64)))),
        ];
        let mut events = bounded_sse(futures::stream::iter(chunks), 32, Arc::from("srv"));
        let first = events.next().await.unwrap().unwrap();
        assert_eq!(first.data.as_deref(), Some("ok"));
        let err = events.next().await.unwrap().unwrap_err();
        assert!(err.to_string().contains("server `srv`"), "{err}");
        assert!(err.to_string().contains("32 bytes"), "{err}");
    }
}
