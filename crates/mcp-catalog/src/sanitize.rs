//! Server-chosen text, made safe to keep and show: bounded, without control characters.
//!
//! A server chooses its tools' names, titles and descriptions and its own `serverInfo`; any of
//! them may be megabytes long or carry terminal escapes (`ESC[…`, `\r`, NUL). The catalog and
//! the orchestration pass such text through [`clean`] before keeping it, and name an unusable
//! tool in a diagnostic through [`escape`].

use std::borrow::Cow;

/// What a cut text ends with.
pub const ELLIPSIS: char = '…';

/// Whether a text may keep line breaks and tabs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Lines {
    /// One line: every control character is removed.
    Single,
    /// Several lines: `\n` and `\t` stay, every other control character is removed.
    Multi,
}

/// True for characters no shown text keeps: C0/C1 controls (`ESC`, `\r`, NUL, …) and the
/// invisible bidirectional overrides that reorder what a terminal or editor shows.
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` without unsafe characters (see [`is_unsafe_char`]; `\n` and `\t` stay with
/// [`Lines::Multi`]), cut to at most `max_bytes` bytes of UTF-8 on a character boundary and then
/// ending with [`ELLIPSIS`]. Borrowed when nothing had to change.
///
/// ```
/// use mcp_catalog::sanitize::{Lines, clean};
///
/// assert_eq!(clean("\u{1b}[31mred\r\nline", 64, Lines::Single), "[31mredline");
/// assert_eq!(clean("one\ntwo\u{7}", 64, Lines::Multi), "one\ntwo");
/// assert_eq!(clean("abcdefgh", 6, Lines::Single), "abc…"); // the ellipsis is 3 bytes
/// assert!(matches!(clean("fine", 64, Lines::Single), std::borrow::Cow::Borrowed(_)));
/// ```
pub fn clean(text: &str, max_bytes: usize, lines: Lines) -> Cow<'_, str> {
    let keep = |c: char| !is_unsafe_char(c) || (lines == Lines::Multi && matches!(c, '\n' | '\t'));
    if text.len() <= max_bytes && text.chars().all(keep) {
        return Cow::Borrowed(text);
    }
    let room = max_bytes.saturating_sub(ELLIPSIS.len_utf8());
    let mut out = String::with_capacity(text.len().min(max_bytes));
    let mut kept = text.chars().filter(|&c| keep(c)).peekable();
    while let Some(&c) = kept.peek() {
        if out.len() + c.len_utf8() > max_bytes {
            break;
        }
        out.push(c);
        kept.next();
    }
    if kept.peek().is_some() {
        // Cut: make room for the ellipsis within the bound.
        while out.len() > room {
            out.pop();
        }
        if max_bytes >= ELLIPSIS.len_utf8() {
            out.push(ELLIPSIS);
        }
    }
    Cow::Owned(out)
}

/// `text` fit to name in a diagnostic: unsafe characters written as `\u{…}` escapes, and cut
/// after `max_chars` characters with [`ELLIPSIS`].
///
/// ```
/// use mcp_catalog::sanitize::escape;
///
/// assert_eq!(escape("\u{1b}[31mred\r\n", 64), "\\u{1b}[31mred\\u{d}\\u{a}");
/// assert_eq!(escape(&"x".repeat(10_000), 4), "xxxx…");
/// ```
pub fn escape(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == max_chars {
            out.push(ELLIPSIS);
            break;
        }
        if is_unsafe_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_never_exceeds_the_bound_and_never_splits_a_character() {
        let text = "é".repeat(100) + "\u{1b}";
        for max in 0..40 {
            let out = clean(&text, max, Lines::Single);
            assert!(out.len() <= max, "{max}: {out}");
            assert!(!out.contains('\u{1b}'));
        }
        assert_eq!(clean("ab\u{202e}cd", 64, Lines::Multi), "abcd");
        assert_eq!(clean("a\u{0}b", 2, Lines::Single), "ab");
    }
}
