//! Bounds on what a server writes to its stdout, checked as the bytes arrive.
//!
//! rmcp frames messages by lines and, on its own, drops a line over its length cap and ignores
//! a line its JSON parser refuses (the parser stops at [`PARSER_MAX_DEPTH`] levels): either
//! way the client waits for an answer that never comes. [`Guarded`] sits between the child's
//! stdout and rmcp's reader and scans every byte once, with constant state: the length of the
//! current line and, outside JSON strings, its bracket depth. At the first byte over a limit
//! it records the [`Violation`], hands rmcp only the complete lines before the offending one,
//! and then reports end of file, so the session ends at once and every pending request fails
//! with it instead of timing out (docs/upstream.md#rmcp-stdio-dropped-lines).

use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// The deepest nesting serde_json parses (its recursion limit, 128, counts one more). A message
/// nested deeper is refused by the parser whatever the configured limit, so the limit is
/// capped here to turn that refusal into a clear error too.
pub(crate) const PARSER_MAX_DEPTH: usize = 127;

/// A message the transport refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Violation {
    /// The line grew past `limit` bytes (its line break not counted).
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The message opened more than `limit` nested arrays or objects.
    TooDeep {
        /// The limit, in levels.
        limit: usize,
    },
}

/// `16 MiB (16777216 bytes)`, or `1000 bytes` when not a whole number of KiB.
pub(crate) fn bytes(count: usize) -> String {
    const MIB: usize = 1 << 20;
    const KIB: usize = 1 << 10;
    match count {
        0 => "0 bytes".to_owned(),
        n if n % MIB == 0 => format!("{} MiB ({n} bytes)", n / MIB),
        n if n % KIB == 0 => format!("{} KiB ({n} bytes)", n / KIB),
        n => format!("{n} bytes"),
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLarge { limit } => {
                write!(f, "a message larger than the limit of {}", bytes(*limit))
            }
            Self::TooDeep { limit } => write!(
                f,
                "a message nested deeper than the limit of {limit} levels"
            ),
        }
    }
}

/// The scanner's state between chunks.
#[derive(Debug)]
struct Scanner {
    max_bytes: usize,
    max_depth: usize,
    /// Bytes of the current line so far.
    line: usize,
    /// Open brackets of the current line, outside strings.
    depth: usize,
    in_string: bool,
    escaped: bool,
}

impl Scanner {
    fn new(max_bytes: usize, max_depth: usize) -> Self {
        Self {
            max_bytes,
            max_depth: max_depth.min(PARSER_MAX_DEPTH),
            line: 0,
            depth: 0,
            in_string: false,
            escaped: false,
        }
    }

    /// Scans `chunk`, which continues what was scanned before. On a violation, returns it and
    /// the offset in `chunk` where the offending line starts (0 when it began in an earlier
    /// chunk): the bytes before that offset are complete lines.
    fn scan(&mut self, chunk: &[u8]) -> Result<(), (usize, Violation)> {
        let mut start = 0;
        for segment in chunk.split_inclusive(|&b| b == b'\n') {
            let ends_line = segment.last() == Some(&b'\n');
            let content = if ends_line {
                &segment[..segment.len() - 1]
            } else {
                segment
            };
            // The whole segment belongs to one line: its length is checked at once.
            if self.line.saturating_add(content.len()) > self.max_bytes {
                return Err((
                    start,
                    Violation::TooLarge {
                        limit: self.max_bytes,
                    },
                ));
            }
            self.line += content.len();
            if self.nesting(content) {
                return Err((
                    start,
                    Violation::TooDeep {
                        limit: self.max_depth,
                    },
                ));
            }
            if ends_line {
                self.line = 0;
                self.depth = 0;
                self.in_string = false;
                self.escaped = false;
            }
            start += segment.len();
        }
        Ok(())
    }

    /// Follows the bracket depth through `bytes` (no line break among them); `true` once it
    /// exceeds the limit.
    fn nesting(&mut self, bytes: &[u8]) -> bool {
        let mut i = 0;
        while i < bytes.len() {
            if self.in_string {
                // Skip to the next quote or backslash: string contents are most of the bytes.
                if self.escaped {
                    self.escaped = false;
                    i += 1;
                    continue;
                }
                match bytes[i..].iter().position(|&b| b == b'"' || b == b'\\') {
                    Some(at) if bytes[i + at] == b'"' => {
                        self.in_string = false;
                        i += at + 1;
                    }
                    Some(at) => {
                        self.escaped = true;
                        i += at + 1;
                    }
                    None => return false,
                }
                continue;
            }
            match bytes[i] {
                b'"' => self.in_string = true,
                b'[' | b'{' => {
                    self.depth += 1;
                    if self.depth > self.max_depth {
                        return true;
                    }
                }
                b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
            i += 1;
        }
        false
    }
}

/// A reader that passes through only lines within the limits, then reports end of file.
pub(crate) struct Guarded<R> {
    inner: R,
    scanner: Scanner,
    /// Where the violation is recorded for the connection handle and error messages.
    violation: Arc<OnceLock<Violation>>,
    server: String,
}

impl<R> Guarded<R> {
    pub(crate) fn new(
        inner: R,
        max_bytes: usize,
        max_depth: usize,
        violation: Arc<OnceLock<Violation>>,
        server: String,
    ) -> Self {
        Self {
            inner,
            scanner: Scanner::new(max_bytes, max_depth),
            violation,
            server,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Guarded<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.violation.get().is_some() {
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        std::task::ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        if let Err((keep, violation)) = this.scanner.scan(&buf.filled()[before..]) {
            buf.set_filled(before + keep);
            tracing::warn!(server = %this.server, "{violation}: closing the session");
            let _ = this.violation.set(violation);
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt as _;

    use super::*;

    fn scan_all(scanner: &mut Scanner, chunks: &[&[u8]]) -> Result<(), (usize, usize, Violation)> {
        for (n, chunk) in chunks.iter().enumerate() {
            scanner.scan(chunk).map_err(|(at, v)| (n, at, v))?;
        }
        Ok(())
    }

    #[test]
    fn a_line_of_exactly_the_limit_passes_one_more_byte_does_not() {
        let mut scanner = Scanner::new(10, 100);
        assert_eq!(
            scan_all(&mut scanner, &[b"0123456789\n", b"01234\r\n"]),
            Ok(())
        );
        let mut scanner = Scanner::new(10, 100);
        assert_eq!(
            scan_all(&mut scanner, &[b"{}\n0123", b"45678", b"9A\n"]),
            Err((2, 0, Violation::TooLarge { limit: 10 }))
        );
    }

    #[test]
    fn the_offending_line_starts_after_the_complete_ones() {
        let mut scanner = Scanner::new(4, 100);
        assert_eq!(
            scanner.scan(b"{}\n[1]\n12345\n"),
            Err((7, Violation::TooLarge { limit: 4 }))
        );
    }

    #[test]
    fn depth_counts_brackets_outside_strings_only() {
        let mut scanner = Scanner::new(1 << 20, 3);
        let fine: &[u8] = br#"{"a":[{"b":"[[[[{{{{\"[[[["}]}"#;
        assert_eq!(scanner.scan(fine), Ok(()));
        assert_eq!(scanner.scan(b"\n[[[]]]\n"), Ok(()));
        assert_eq!(
            scanner.scan(b"[[[[]]]]\n"),
            Err((0, Violation::TooDeep { limit: 3 }))
        );
    }

    #[test]
    fn strings_and_escapes_carry_across_chunks() {
        let mut scanner = Scanner::new(1 << 20, 1);
        // `"\` then `"[[` : the escaped quote keeps the string open across the split.
        assert_eq!(
            scan_all(&mut scanner, &[br#"["\"#, br#""[[["]"#, b"\n"]),
            Ok(())
        );
        assert_eq!(
            scan_all(&mut scanner, &[b"[\"\\\\\"", b"[]\n"]),
            Err((1, 0, Violation::TooDeep { limit: 1 }))
        );
    }

    #[test]
    fn a_new_line_resets_an_unbalanced_one() {
        let mut scanner = Scanner::new(1 << 20, 2);
        assert_eq!(scanner.scan(b"log: [[ \"unterminated\n[[]]\n"), Ok(()));
    }

    #[test]
    fn the_depth_limit_is_capped_at_the_parsers() {
        assert_eq!(Scanner::new(1, usize::MAX).max_depth, PARSER_MAX_DEPTH);
    }

    #[test]
    fn serde_json_parses_exactly_the_capped_depth() {
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(serde_json::from_str::<serde_json::Value>(&nested(PARSER_MAX_DEPTH)).is_ok());
        assert!(serde_json::from_str::<serde_json::Value>(&nested(PARSER_MAX_DEPTH + 1)).is_err());
    }

    #[test]
    fn limits_read_as_sizes() {
        assert_eq!(bytes(16 << 20), "16 MiB (16777216 bytes)");
        assert_eq!(bytes(2048), "2 KiB (2048 bytes)");
        assert_eq!(bytes(1000), "1000 bytes");
    }

    #[tokio::test]
    async fn the_reader_delivers_the_complete_lines_then_ends() {
        let input: &[u8] = b"{\"id\":1}\n{\"id\":2}\n0123456789ABCDEF\n{\"id\":3}\n";
        let violation = Arc::new(OnceLock::new());
        let mut reader = Guarded::new(input, 10, 10, violation.clone(), "s".into());
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, b"{\"id\":1}\n{\"id\":2}\n");
        assert_eq!(violation.get(), Some(&Violation::TooLarge { limit: 10 }));
    }

    #[tokio::test]
    async fn the_reader_passes_everything_within_the_limits() {
        let input: &[u8] = b"{\"a\":[1]}\nnot json [[\n";
        let violation = Arc::new(OnceLock::new());
        let mut reader = Guarded::new(input, 64, 2, violation.clone(), "s".into());
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, input);
        assert_eq!(violation.get(), None);
    }
}
