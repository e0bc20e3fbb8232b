//! The child's stderr, kept as a bounded tail for diagnostics.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::io::AsyncReadExt as _;
use tokio::process::ChildStderr;
use tokio::sync::watch;

/// The last bytes a child wrote to stderr.
#[derive(Debug)]
pub(crate) struct StderrTail {
    state: Mutex<Tail>,
    closed: watch::Sender<bool>,
}

#[derive(Debug)]
struct Tail {
    bytes: VecDeque<u8>,
    capacity: usize,
    dropped: u64,
}

impl StderrTail {
    /// An empty tail keeping at most `capacity` bytes.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new(Tail {
                bytes: VecDeque::new(),
                capacity,
                dropped: 0,
            }),
            closed: watch::Sender::new(false),
        }
    }

    /// Appends `chunk`, dropping the oldest bytes beyond the capacity.
    pub(crate) fn push(&self, chunk: &[u8]) {
        let mut tail = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let keep = chunk.len().min(tail.capacity);
        let skipped = chunk.len() - keep;
        tail.bytes.extend(&chunk[skipped..]);
        let excess = tail.bytes.len().saturating_sub(tail.capacity);
        tail.bytes.drain(..excess);
        tail.dropped += (skipped + excess) as u64;
    }

    /// Marks the stream as ended.
    pub(crate) fn close(&self) {
        self.closed.send_replace(true);
    }

    /// Waits up to `timeout` for the stream to end, so the tail is complete.
    pub(crate) async fn wait_closed(&self, timeout: Duration) {
        let mut closed = self.closed.subscribe();
        let _ = tokio::time::timeout(timeout, closed.wait_for(|c| *c)).await;
    }

    /// The tail as text (invalid UTF-8 replaced), starting at a line boundary when older
    /// bytes were dropped; `None` when the child wrote nothing.
    pub(crate) fn text(&self) -> Option<String> {
        let tail = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if tail.bytes.is_empty() {
            return None;
        }
        let (front, back) = tail.bytes.as_slices();
        let bytes = [front, back].concat();
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if tail.dropped > 0 {
            // Start at the next whole line, unless that would leave nothing.
            let cut = match text.find('\n') {
                Some(i) if i + 1 < text.len() => i + 1,
                _ => 0,
            };
            let omitted = tail.dropped + cut as u64;
            text.replace_range(..cut, &format!("[… {omitted} earlier bytes omitted]\n"));
        }
        Some(text)
    }
}

/// Copies `stderr` into `tail` until the stream ends (when every process holding it exits).
pub(crate) async fn copy_into(mut stderr: ChildStderr, tail: &StderrTail) {
    let mut buf = vec![0; 8 * 1024];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => tail.push(&buf[..n]),
        }
    }
    tail.close();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_bytes_from_a_line_start() {
        let tail = StderrTail::new(16);
        assert_eq!(tail.text(), None);
        tail.push(b"first line\nsecond\n");
        tail.push(b"third\n");
        assert_eq!(
            tail.text().unwrap(),
            "[… 11 earlier bytes omitted]\nsecond\nthird\n"
        );
    }

    #[test]
    fn a_chunk_larger_than_the_capacity_keeps_its_end() {
        let tail = StderrTail::new(4);
        tail.push(b"abcdefgh");
        assert_eq!(tail.text().unwrap(), "[… 4 earlier bytes omitted]\nefgh");
        let tail = StderrTail::new(8);
        tail.push(b"ab\ncdefgh");
        assert_eq!(tail.text().unwrap(), "[… 3 earlier bytes omitted]\ncdefgh");
    }
}
