//! Provider-chosen text made safe to show: secrets redacted, control and bidi-override
//! characters removed, length bounded.

use agent_core::Redactor;

/// Shows provider text: redacts the configured secrets (the API key, header values), then
/// cleans and cuts.
#[derive(Clone)]
pub(crate) struct Shown {
    redactor: Redactor,
    max_chars: usize,
}

impl Shown {
    pub(crate) fn new(secrets: &[&str], max_chars: usize) -> Self {
        Self {
            redactor: Redactor::new().with_secrets(secrets.iter().copied()),
            max_chars,
        }
    }

    /// `text` redacted, one line, without control characters, at most `max_chars` characters
    /// (an ellipsis marks a cut).
    pub(crate) fn text(&self, text: &str) -> String {
        let redacted = self.redactor.redact_text(text);
        let mut out = String::with_capacity(redacted.len().min(self.max_chars * 4));
        let mut count = 0;
        let mut last_space = false;
        for c in redacted.chars() {
            let c = match c {
                '\n' | '\r' | '\t' => ' ',
                c if c.is_control() || is_bidi_control(c) => continue,
                c => c,
            };
            if c == ' ' && last_space {
                continue;
            }
            if count == self.max_chars {
                out.push('…');
                return out.trim().to_owned();
            }
            last_space = c == ' ';
            out.push(c);
            count += 1;
        }
        out.trim().to_owned()
    }
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_go_first_then_controls_then_the_bound() {
        let shown = Shown::new(&["sk-abcdef123456"], 24);
        assert_eq!(
            shown.text("key\tsk-abcdef123456\u{202E}\x07 is wrong"),
            "key [REDACTED] is wrong"
        );
        assert_eq!(
            shown.text("0123456789012345678901234567890"),
            "012345678901234567890123…"
        );
        assert_eq!(shown.text("a\n\n\nb"), "a b");
    }
}
