//! Server-sent events, bounded: bytes in, the `data` of each complete event out. An event (its
//! data lines, or one line still without its end) longer than the bound is an error at once,
//! before more of it is buffered.
//!
//! Hand-written rather than `sse-stream` (0.2.6, the version rmcp pulls in), for what that
//! version does with the same bytes: it has no size bound (a line or an event grows in its
//! buffers until it ends, and bounding the body in front of it would mean splitting lines and
//! events there again, as here), and it fails the whole stream on lines the SSE spec says to
//! accept or ignore: an unknown field (`foo: bar`) or a line without a colon (`data`, `ping`)
//! is `InvalidLine`, a second `event:` in one event `DuplicatedEventLine`, a `retry:` that is
//! not a number `IntParse`. The test `lines_the_spec_accepts_or_ignores_do_not_end_the_stream`
//! keeps those inputs working. It also reads an `http_body::Body` as a pull `Stream`, while
//! [`StreamDecoder::feed`](crate::StreamDecoder::feed) is pushed bytes.

use crate::error::{LimitKind, OpenAiError};

pub(crate) struct SseDecoder {
    /// The current line, not yet ended.
    line: Vec<u8>,
    /// The current event's data lines, joined by `\n`.
    data: Vec<u8>,
    has_data: bool,
    /// A `\r` ended the last line; a `\n` right after it belongs to it.
    after_cr: bool,
    max_event: usize,
    /// Bytes of lines that are neither comments nor blank: what counts as the stream going on.
    progress: u64,
}

impl SseDecoder {
    pub(crate) fn new(max_event: usize) -> Self {
        Self {
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            after_cr: false,
            max_event,
            progress: 0,
        }
    }

    /// Bytes of field lines (`data`, `event`, …) seen so far; comments (`: ping`) and blank
    /// lines are not counted.
    pub(crate) fn progress(&self) -> u64 {
        self.progress
    }

    /// Feeds bytes; each complete event's data is passed to `on_event`.
    pub(crate) fn feed(
        &mut self,
        mut bytes: &[u8],
        on_event: &mut dyn FnMut(&[u8]) -> Result<(), OpenAiError>,
    ) -> Result<(), OpenAiError> {
        while !bytes.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if bytes[0] == b'\n' {
                    bytes = &bytes[1..];
                    continue;
                }
            }
            match bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(end) => {
                    self.push_line_part(&bytes[..end])?;
                    self.after_cr = bytes[end] == b'\r';
                    bytes = &bytes[end + 1..];
                    self.end_line(on_event)?;
                }
                None => {
                    self.push_line_part(bytes)?;
                    bytes = &[];
                }
            }
        }
        Ok(())
    }

    /// The stream ended: an event without its blank line still counts.
    pub(crate) fn finish(
        &mut self,
        on_event: &mut dyn FnMut(&[u8]) -> Result<(), OpenAiError>,
    ) -> Result<(), OpenAiError> {
        if !self.line.is_empty() {
            self.end_line(on_event)?;
        }
        self.dispatch(on_event)
    }

    fn push_line_part(&mut self, part: &[u8]) -> Result<(), OpenAiError> {
        if self.data.len() + self.line.len() + part.len() > self.max_event {
            return Err(OpenAiError::TooLarge {
                kind: LimitKind::Event,
                limit: self.max_event,
            });
        }
        if self.line.first().or(part.first()) != Some(&b':') {
            self.progress = self.progress.saturating_add(part.len() as u64);
        }
        self.line.extend_from_slice(part);
        Ok(())
    }

    fn end_line(
        &mut self,
        on_event: &mut dyn FnMut(&[u8]) -> Result<(), OpenAiError>,
    ) -> Result<(), OpenAiError> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            return self.dispatch(on_event);
        }
        if let Some(value) = line.strip_prefix(b"data") {
            let value = match value {
                [] => value,
                [b':', b' ', rest @ ..] | [b':', rest @ ..] => rest,
                // Another field whose name starts with `data`.
                _ => return Ok(()),
            };
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        // Comments (`:`), `event`, `id` and `retry` carry nothing the adapter uses.
        Ok(())
    }

    fn dispatch(
        &mut self,
        on_event: &mut dyn FnMut(&[u8]) -> Result<(), OpenAiError>,
    ) -> Result<(), OpenAiError> {
        if !self.has_data {
            return Ok(());
        }
        self.has_data = false;
        let data = std::mem::take(&mut self.data);
        on_event(&data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(decoder: &mut SseDecoder, parts: &[&[u8]]) -> Result<Vec<String>, OpenAiError> {
        let mut out = Vec::new();
        let mut push = |data: &[u8]| {
            out.push(String::from_utf8(data.to_vec()).unwrap());
            Ok(())
        };
        for part in parts {
            decoder.feed(part, &mut push)?;
        }
        decoder.finish(&mut push)?;
        Ok(out)
    }

    #[test]
    fn events_split_anywhere_and_every_line_ending_decode_alike() {
        let text: &[u8] = b": keep-alive\n\ndata: {\"a\":1}\r\n\r\nevent: x\ndata:one\ndata: two\r\rdata: [DONE]\n\n";
        let whole = events(&mut SseDecoder::new(1024), &[text]).unwrap();
        assert_eq!(whole, ["{\"a\":1}", "one\ntwo", "[DONE]"]);
        for split in 1..text.len() {
            let (a, b) = text.split_at(split);
            let parts = events(&mut SseDecoder::new(1024), &[a, b]).unwrap();
            assert_eq!(parts, whole, "split at {split}");
        }
    }

    #[test]
    fn lines_the_spec_accepts_or_ignores_do_not_end_the_stream() {
        // Unknown fields, colon-less lines, a repeated `event` and a `retry` that is not a
        // number are ignored; a bare `data` is an empty data line.
        let text: &[u8] =
            b"foo: bar\nping\ndataset: no\nevent: a\nevent: b\nretry: soon\ndata\ndata: x\n\ndata\n\n";
        let out = events(&mut SseDecoder::new(1024), &[text]).unwrap();
        assert_eq!(out, ["\nx", ""]);
    }

    #[test]
    fn only_field_lines_count_as_progress() {
        let mut decoder = SseDecoder::new(1024);
        let mut ignore = |_: &[u8]| Ok(());
        for part in [&b": ping\n\n"[..], b":", b" keep-alive\r\n", b"\n\r\n"] {
            decoder.feed(part, &mut ignore).unwrap();
        }
        assert_eq!(decoder.progress(), 0);
        decoder.feed(b"da", &mut ignore).unwrap();
        decoder.feed(b"ta: x\n\n: ping\n", &mut ignore).unwrap();
        assert_eq!(decoder.progress(), "data: x".len() as u64);
        decoder.feed(b"event: e\n", &mut ignore).unwrap();
        assert_eq!(decoder.progress(), "data: xevent: e".len() as u64);
    }

    #[test]
    fn an_event_over_the_bound_fails_before_it_ends() {
        let mut decoder = SseDecoder::new(16);
        let err = events(&mut decoder, &[b"data: 0123456789", b"0123456789"]).unwrap_err();
        assert!(matches!(
            err,
            OpenAiError::TooLarge {
                kind: LimitKind::Event,
                limit: 16
            }
        ));
        let mut decoder = SseDecoder::new(16);
        let err = events(&mut decoder, &[b"data: 0123\ndata: 456789\ndata: abcdef\n"]).unwrap_err();
        assert!(matches!(err, OpenAiError::TooLarge { .. }));
    }
}
