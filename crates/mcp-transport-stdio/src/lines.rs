//! Lines on the server's stdout that cannot be JSON-RPC messages, dropped before rmcp sees them.
//!
//! A JSON-RPC 2.0 message carries a `"jsonrpc"` member. Servers also print other JSON on
//! stdout (log lines such as `{"log": "starting"}`); rmcp answers well-formed JSON that is not
//! a message with an Invalid Request error without an id, written straight to the server's
//! stdin, and a server between lifecycles (after `server/discover` was refused, before
//! `initialize`) may end on it (docs/upstream.md#rmcp-stdio-invalid-request).
//! [`JsonRpcLines`] sits after [`crate::limits::Guarded`], so
//! every line is already bounded, and drops each complete line that lacks the `"jsonrpc"`
//! substring (no JSON parsing). A line is held only until that substring shows up; from then
//! on its bytes stream through unchanged, so at most one line's prefix and one read are held.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use memchr::memmem;
use tokio::io::{AsyncRead, ReadBuf};

use crate::handle::Shared;

/// The member every JSON-RPC 2.0 message has.
const MARKER: &[u8] = b"\"jsonrpc\"";

/// The smallest read asked of the inner reader.
const MIN_READ: usize = 8 << 10;

/// The largest read asked of the inner reader.
const MAX_READ: usize = 64 << 10;

/// At most this many characters of a dropped line go to the debug log.
const EXCERPT_CHARS: usize = 80;

/// A reader that passes only the lines containing `"jsonrpc"`, byte for byte.
pub(crate) struct JsonRpcLines<R> {
    inner: R,
    /// `buf[..end]` is data: `[..head]` handed on, `[head..ready]` to hand on, `[ready..end]`
    /// the current line not yet known to be a message (of which `[ready..scanned]` holds
    /// neither a line break nor the marker).
    buf: Vec<u8>,
    end: usize,
    head: usize,
    ready: usize,
    scanned: usize,
    /// The current line contains the marker: its bytes pass as they come.
    passing: bool,
    eof: bool,
    /// The server's name, for the log.
    server: String,
    /// Redacts declared secrets from a logged excerpt.
    shared: Option<Arc<Shared>>,
}

impl<R> JsonRpcLines<R> {
    /// Filters `inner`; `shared`, when given, redacts the server's declared secrets from what
    /// is logged.
    pub(crate) fn new(inner: R, server: String, shared: Option<Arc<Shared>>) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            end: 0,
            head: 0,
            ready: 0,
            scanned: 0,
            passing: false,
            eof: false,
            server,
            shared,
        }
    }

    /// Sorts `buf[scanned..end]` into lines to hand on and lines to drop.
    fn sort(&mut self) {
        while self.scanned < self.end {
            let rest = &self.buf[self.scanned..self.end];
            let newline = memchr::memchr(b'\n', rest).map(|at| self.scanned + at);
            if self.passing {
                match newline {
                    Some(at) => {
                        self.passing = false;
                        self.scanned = at + 1;
                        self.ready = self.scanned;
                    }
                    None => {
                        self.scanned = self.end;
                        self.ready = self.end;
                    }
                }
                continue;
            }
            let line_end = newline.unwrap_or(self.end);
            // The marker may straddle what was scanned before and what came now.
            let from = self
                .scanned
                .saturating_sub(MARKER.len() - 1)
                .max(self.ready);
            if memmem::find(&self.buf[from..line_end], MARKER).is_some() {
                self.passing = true;
                continue;
            }
            match newline {
                Some(at) => self.drop_line(at + 1),
                None => self.scanned = self.end,
            }
        }
    }

    /// Removes `buf[ready..line_end]`, a line without the marker.
    fn drop_line(&mut self, line_end: usize) {
        self.note_dropped(self.ready, line_end);
        self.buf.copy_within(line_end..self.end, self.ready);
        self.end -= line_end - self.ready;
        self.scanned = self.ready;
    }

    fn note_dropped(&self, start: usize, end: usize) {
        if tracing::enabled!(tracing::Level::DEBUG) {
            let mut excerpt = excerpt(&self.buf[start..end]);
            if let Some(shared) = &self.shared {
                excerpt = shared.redact(excerpt);
            }
            tracing::debug!(
                server = %self.server,
                bytes = end - start,
                %excerpt,
                "dropped a line on stdout that is not a JSON-RPC message",
            );
        }
    }

    /// Moves the bytes still in use to the front of the buffer.
    fn compact(&mut self) {
        if self.head > 0 {
            self.buf.copy_within(self.head..self.end, 0);
            self.end -= self.head;
            self.ready -= self.head;
            self.scanned -= self.head;
            self.head = 0;
        }
        // A long line held once leaves no large buffer behind.
        if self.buf.len() > 4 * MAX_READ && self.end <= MAX_READ {
            self.buf.truncate(MAX_READ);
            self.buf.shrink_to_fit();
        }
    }
}

/// The start of `line`, control characters removed.
fn excerpt(line: &[u8]) -> String {
    let head = &line[..line.len().min(EXCERPT_CHARS * 4)];
    String::from_utf8_lossy(head)
        .chars()
        .filter(|c| !c.is_control())
        .take(EXCERPT_CHARS)
        .collect()
}

impl<R: AsyncRead + Unpin> AsyncRead for JsonRpcLines<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if out.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            if this.head < this.ready {
                let n = out.remaining().min(this.ready - this.head);
                out.put_slice(&this.buf[this.head..this.head + n]);
                this.head += n;
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                // A trailing line without a line break and without the marker.
                if !this.passing && this.ready < this.end {
                    this.note_dropped(this.ready, this.end);
                    this.end = this.ready;
                    this.scanned = this.ready;
                }
                return Poll::Ready(Ok(()));
            }
            this.compact();
            let want = out.remaining().clamp(MIN_READ, MAX_READ);
            if this.buf.len() < this.end + want {
                this.buf.resize(this.end + want, 0);
            }
            let mut read = ReadBuf::new(&mut this.buf[this.end..this.end + want]);
            std::task::ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            let n = read.filled().len();
            if n == 0 {
                this.eof = true;
            } else {
                this.end += n;
                this.sort();
            }
        }
    }
}

#[cfg(test)]
mod tests;
