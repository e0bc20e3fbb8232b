//! [`StreamDecoder`]: a chat-completions event stream from bytes to a [`ChatResponse`], bounded
//! by [`Limits`]. [`OpenAiModel`](crate::OpenAiModel) feeds it what arrives; a caller with a
//! transport of its own can too.

use crate::config::Limits;
use crate::error::{LimitKind, OpenAiError};
use crate::response::{Assembler, ChatResponse, StreamDelta};
use crate::sse::SseDecoder;
use crate::text::Shown;

/// Decodes the body of a streamed chat completion (`data:` events, `[DONE]`), assembling text
/// and tool-call fragments by index and handing each [`StreamDelta`] on as it completes.
///
/// ```
/// use agent_model_openai::{Limits, StreamDecoder, StreamDelta};
///
/// let mut decoder = StreamDecoder::new(Limits::default());
/// let mut text = String::new();
/// let mut sink = |d: StreamDelta<'_>| {
///     if let StreamDelta::Text(t) = d {
///         text.push_str(t);
///     }
/// };
/// decoder.feed(b"data: {\"choices\": [{\"delta\": {\"content\": \"Hel\"}}]}\n\nda", &mut sink)?;
/// decoder.feed(b"ta: {\"choices\": [{\"delta\": {\"content\": \"lo\"}}]}\n\ndata: [DONE]\n\n", &mut sink)?;
/// assert!(decoder.is_done());
/// let response = decoder.finish(&mut sink)?;
/// assert_eq!((response.text.as_str(), text.as_str()), ("Hello", "Hello"));
/// # Ok::<(), agent_model_openai::OpenAiError>(())
/// ```
pub struct StreamDecoder {
    sse: SseDecoder,
    assembler: Assembler,
    shown: Shown,
    total: usize,
    max_body: usize,
}

impl std::fmt::Debug for StreamDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamDecoder")
            .field("bytes", &self.total)
            .field("done", &self.assembler.done)
            .finish_non_exhaustive()
    }
}

impl StreamDecoder {
    /// A decoder with these bounds (body, event, and shown error text).
    pub fn new(limits: Limits) -> Self {
        Self::with_shown(limits, Shown::new(&[], limits.max_error_chars))
    }

    pub(crate) fn with_shown(limits: Limits, shown: Shown) -> Self {
        Self {
            sse: SseDecoder::new(limits.max_event_bytes),
            assembler: Assembler::default(),
            shown,
            total: 0,
            max_body: limits.max_body_bytes,
        }
    }

    /// The next bytes of the body, cut anywhere.
    pub fn feed(
        &mut self,
        bytes: &[u8],
        on_delta: &mut (dyn FnMut(StreamDelta<'_>) + Send),
    ) -> Result<(), OpenAiError> {
        self.total = self.total.saturating_add(bytes.len());
        if self.total > self.max_body {
            return Err(OpenAiError::TooLarge {
                kind: LimitKind::Body,
                limit: self.max_body,
            });
        }
        let Self {
            sse,
            assembler,
            shown,
            ..
        } = self;
        sse.feed(bytes, &mut |data| assembler.event(data, shown, on_delta))
    }

    /// Whether `[DONE]` arrived (what follows it is ignored).
    pub fn is_done(&self) -> bool {
        self.assembler.done
    }

    /// Bytes of event fields received so far: keep-alive comments and blank lines are not
    /// counted, so a stream sending only those makes no progress.
    pub(crate) fn progress(&self) -> u64 {
        self.sse.progress()
    }

    /// Whether a delta was handed on.
    pub fn has_emitted(&self) -> bool {
        self.assembler.emitted
    }

    /// The body ended: the whole answer, or [`OpenAiError::StreamCut`] when the stream stopped
    /// before `[DONE]` or a finish reason (then no tool call of it may run).
    pub fn finish(
        mut self,
        on_delta: &mut (dyn FnMut(StreamDelta<'_>) + Send),
    ) -> Result<ChatResponse, OpenAiError> {
        if !self.assembler.done {
            let Self {
                sse,
                assembler,
                shown,
                ..
            } = &mut self;
            sse.finish(&mut |data| assembler.event(data, shown, on_delta))?;
        }
        self.assembler.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_bound_counts_every_byte_of_the_stream() {
        let mut decoder = StreamDecoder::new(Limits::default().with_max_body_bytes(64));
        let event = b"data: {\"choices\": [{\"delta\": {\"content\": \"abc\"}}]}\n\n";
        decoder.feed(event, &mut |_| {}).unwrap();
        let err = decoder.feed(event, &mut |_| {}).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the response body exceeds the limit of 64 bytes (limits.max_body_bytes)"
        );
    }
}
