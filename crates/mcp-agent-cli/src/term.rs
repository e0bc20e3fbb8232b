//! What the CLI prints: server-chosen text made safe for a terminal, and writes that end the
//! command quietly when the reader goes away.
//!
//! Every string a server chose (names, versions, descriptions, results, error texts) passes
//! through [`inline`] (one table cell or line) or [`block`] (multi-line text) before it is
//! printed: the secrets the command's engine knows are replaced (the run's
//! [`Redactor`], or one of the configuration's before a run is open; the
//! caller passes it, nothing here holds one), control characters (ESC, CR, NUL, DEL, C1) and
//! bidi overrides are shown escaped (`\u{1b}`), and the text is cut to a bound. Text the run's
//! engine already scrubbed (approval prompts, elicitations, progress) takes [`escaped`], which
//! only escapes and cuts. `--json` output is serialised by serde_json, which escapes control
//! characters itself, so it stays exact JSON.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::process::ExitCode;

use agent_model_openai::API_KEY_ENV;
use mcp_agent::{Config, Redactor, Secret};

use super::exit::Exit;
use super::settings::Settings;

/// Longest name (tool, server, identity) printed in a table cell.
pub(crate) const MAX_NAME: usize = 128;
/// Longest one-line description printed.
pub(crate) const MAX_LINE: usize = 200;
/// Longest multi-line text printed (an error with its causes, a tool's text result).
pub(crate) const MAX_BLOCK: usize = 256 * 1024;

/// The secret engine of a command before its run is open: every secret value of `config`,
/// its servers' secrets, the `[model]` table's header values and the model API key (from the
/// variable `api_key_env` names, and `OPENAI_API_KEY`).
pub(crate) fn secrets_of(config: &Config, settings: &Settings) -> Redactor {
    Redactor::new().with_secrets(secret_values(config, settings))
}

/// The secret values [`secrets_of`] knows, to add to an engine (a reloaded configuration's).
pub(crate) fn secret_values(config: &Config, settings: &Settings) -> Vec<Secret> {
    let servers = config.servers.iter().flat_map(|s| s.secret_values());
    let model = &settings.model;
    let headers = model
        .config
        .headers
        .values()
        .map(|v| Secret::new(v.as_str()));
    let keys = [
        model
            .api_key_from(|name| std::env::var(name).ok())
            .ok()
            .flatten(),
        model
            .config
            .api_key
            .as_ref()
            .map(|key| Secret::new(key.expose())),
        std::env::var(API_KEY_ENV).ok().map(Secret::new),
    ];
    servers
        .chain(headers)
        .chain(keys.into_iter().flatten())
        .collect()
}

/// True for characters a terminal acts on rather than shows: C0 and C1 controls, DEL, and the
/// bidirectional overrides and isolates that reorder what is displayed.
fn is_hazard(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

/// True for characters that show as nothing, or as a plain space, although they are not one:
/// format characters (general category Cf: zero-width space and joiners, bidi marks, the BOM,
/// the soft hyphen, tag characters…), every separator but the ASCII space, and the invisible
/// letters and marks (variation selectors, the combining grapheme joiner, Hangul fillers, the
/// blank Braille pattern, Mongolian and Khmer invisibles). Two names that differ only by
/// these look alike.
fn is_invisible(c: char) -> bool {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    c != ' '
        && (matches!(
            get_general_category(c),
            G::Format | G::SpaceSeparator | G::LineSeparator | G::ParagraphSeparator
        ) || matches!(
            c,
            '\u{034F}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{2800}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FFA0}'
                | '\u{E0100}'..='\u{E01EF}'
        ))
}

fn clean(secrets: &Redactor, text: &str, max_chars: usize, keep_lines: bool) -> String {
    escape(&secrets.scrub(text), max_chars, keep_lines, is_hazard)
}

/// `text` with the characters `hazard` picks escaped (keeping newlines and tabs when
/// `keep_lines`), cut to `max_chars` characters.
fn escape(text: &str, max_chars: usize, keep_lines: bool, hazard: fn(char) -> bool) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars.saturating_add(16)));
    let mut shown = 0usize;
    let mut chars = text.chars();
    while shown < max_chars {
        let Some(c) = chars.next() else { break };
        if keep_lines && (c == '\n' || c == '\t') || !hazard(c) {
            out.push(c);
        } else {
            let _ = write!(out, "{}", c.escape_unicode());
        }
        shown += 1;
    }
    let rest = chars.count();
    if rest > 0 {
        let _ = write!(out, "… ({rest} more characters)");
    }
    out
}

/// `text` as one terminal-safe line of at most `max_chars` characters (newlines and tabs
/// escaped too, so it cannot forge a row or a column).
pub(crate) fn inline(secrets: &Redactor, text: &str, max_chars: usize) -> String {
    clean(secrets, text, max_chars, false)
}

/// [`inline`] for text the run's engine already scrubbed (an approval prompt, an elicitation,
/// a progress message): escaped and cut only.
pub(crate) fn escaped(text: &str, max_chars: usize) -> String {
    escape(text, max_chars, false, is_hazard)
}

/// A name a user may have to type (a tool's or a server's): whole, on one line, with
/// hazards and invisible characters ([`is_invisible`]) escaped, so that two names that look
/// alike read differently (`read\u{200b}_file` beside `read_file`). Names are bounded where
/// they are taken in (the catalog's tool-name limit, the configuration's server-name limit);
/// [`MAX_NAME_SHOWN`] only guards against a caller that did not bound them.
pub(crate) fn name(secrets: &Redactor, text: &str) -> String {
    escape(&secrets.scrub(text), MAX_NAME_SHOWN, false, |c| {
        is_hazard(c) || is_invisible(c)
    })
}

/// Longest name [`name`] prints: a server name (64) and a tool name (128) with the `__`
/// between them fit whole.
pub(crate) const MAX_NAME_SHOWN: usize = 1024;

/// `text` terminal-safe, keeping its lines and tabs, not cut (a piece of a stream whose
/// secrets were already looked for across pieces).
pub(crate) fn unbounded(secrets: &Redactor, text: &str) -> String {
    clean(secrets, text, usize::MAX, true)
}

/// Writes `text` whole to stdout, terminal-safe ([`unbounded`]), ending with a newline.
pub(crate) fn out_text(secrets: &Redactor, text: &str) -> Result<(), ExitCode> {
    let mut shown = unbounded(secrets, text);
    if !shown.ends_with('\n') {
        shown.push('\n');
    }
    out_part(&shown)
}

/// `text` terminal-safe, keeping its lines and tabs, cut to [`MAX_BLOCK`] characters.
pub(crate) fn block(secrets: &Redactor, text: &str) -> String {
    clean(secrets, text, MAX_BLOCK, true)
}

/// A long text made terminal-safe piece by piece, with no bound on its length (`--full`).
///
/// Each piece is scrubbed together with the end of the one before: the last
/// [`HOLD`](Self::HOLD) characters are held back until more text (or the end) arrives, so a
/// known secret split across two pieces is still found whole.
pub(crate) struct SafeText<S> {
    scrub: S,
    held: String,
}

impl<S: Fn(&str) -> String> SafeText<S> {
    /// How many characters are held back (longer secrets are not expected).
    pub(crate) const HOLD: usize = 4096;

    /// Text scrubbed by `scrub`.
    pub(crate) fn new(scrub: S) -> Self {
        Self {
            scrub,
            held: String::new(),
        }
    }

    /// Takes the next piece; returns what can be printed now.
    pub(crate) fn push(&mut self, piece: &str) -> String {
        self.held.push_str(piece);
        let scrubbed = (self.scrub)(&self.held);
        let split = scrubbed
            .char_indices()
            .rev()
            .nth(Self::HOLD - 1)
            .map_or(0, |(at, _)| at);
        self.held = scrubbed[split..].to_owned();
        escape(&scrubbed[..split], usize::MAX, true, is_hazard)
    }

    /// The rest, at the end of the text.
    pub(crate) fn finish(self) -> String {
        escape(&(self.scrub)(&self.held), usize::MAX, true, is_hazard)
    }
}

/// A [`SafeText`] with the secrets `secrets` knows.
pub(crate) fn safe_text(secrets: &Redactor) -> SafeText<impl Fn(&str) -> String + use<>> {
    let secrets = secrets.clone();
    SafeText::new(move |text: &str| secrets.scrub(text).into_owned())
}

/// Writes `text` to stdout as it is (no newline added); see [`out`].
pub(crate) fn out_part(text: &str) -> Result<(), ExitCode> {
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(write_failed)
}

/// The first line of an optional description, terminal-safe.
pub(crate) fn first_line(secrets: &Redactor, text: Option<&str>) -> String {
    inline(
        secrets,
        text.and_then(|t| t.lines().next()).unwrap_or(""),
        MAX_LINE,
    )
}

/// Writes `text` and a newline to stdout. A closed pipe ends the command quietly with
/// [`Exit::BrokenPipe`]; another write error (a full disk) is reported, [`Exit::Failed`].
pub(crate) fn out(text: impl std::fmt::Display) -> Result<(), ExitCode> {
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{text}")
        .and_then(|()| stdout.flush())
        .map_err(write_failed)
}

/// Prints a value as pretty JSON (exact JSON: serde_json escapes control characters), with
/// known secrets replaced.
pub(crate) fn out_json(secrets: &Redactor, value: &serde_json::Value) -> Result<(), ExitCode> {
    let mut value = value.clone();
    secrets.scrub_json(&mut value);
    let text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
    out(text)
}

/// Prints a value as one line of JSON, with known secrets replaced.
pub(crate) fn out_json_line(secrets: &Redactor, value: &serde_json::Value) -> Result<(), ExitCode> {
    let mut value = value.clone();
    secrets.scrub_json(&mut value);
    out(value)
}

fn write_failed(error: io::Error) -> ExitCode {
    if error.kind() == io::ErrorKind::BrokenPipe {
        Exit::BrokenPipe.into()
    } else {
        say(format_args!("error: cannot write the output: {error}"));
        Exit::Failed.into()
    }
}

/// Writes a line to stderr (a JSON log line with `--log-format json`), best effort: a
/// closed stderr is not worth a panic.
pub(crate) fn say(text: impl std::fmt::Display) {
    super::logging::say(&text.to_string());
}

/// `error: cause: cause…` on one line (multi-line causes such as a stderr tail keep their
/// lines), terminal-safe and with known secrets replaced.
pub(crate) fn chain(secrets: &Redactor, error: &(dyn std::error::Error + 'static)) -> String {
    block(secrets, &mcp_agent::error_chain(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_cannot_reach_the_terminal_or_forge_a_row() {
        let name = "evil\u{1b}[31mred\r\nINJECTED\tcol\u{7}\u{0}\u{9b}x\u{202e}y";
        let shown = inline(&Redactor::new(), name, MAX_NAME);
        assert!(!shown.chars().any(is_hazard), "{shown:?}");
        assert_eq!(
            shown,
            "evil\\u{1b}[31mred\\u{d}\\u{a}INJECTED\\u{9}col\\u{7}\\u{0}\\u{9b}x\\u{202e}y"
        );
    }

    #[test]
    fn blocks_keep_lines_and_tabs_but_not_escapes() {
        assert_eq!(
            block(&Redactor::new(), "a\n\tb\u{1b}]0;title\u{7}"),
            "a\n\tb\\u{1b}]0;title\\u{7}"
        );
    }

    #[test]
    fn a_secret_split_across_pieces_of_a_long_text_is_still_replaced() {
        let secrets = Redactor::new().with_secrets(["tok-split-secret"]);
        let mut text = safe_text(&secrets);
        let mut shown = String::new();
        shown.push_str(&text.push(&"a".repeat(10_000)));
        shown.push_str(&text.push("tok-spl"));
        shown.push_str(&text.push("it-secret\u{1b}[2J"));
        shown.push_str(&text.push(&"b".repeat(5_000)));
        shown.push_str(&text.finish());
        assert!(!shown.contains("tok-split-secret"), "{shown}");
        assert!(!shown.contains('\u{1b}'));
        let expected = format!(
            "{}[REDACTED]\\u{{1b}}[2J{}",
            "a".repeat(10_000),
            "b".repeat(5_000)
        );
        assert_eq!(shown, expected);
    }

    #[test]
    fn long_text_is_cut_and_says_how_much_was_left_out() {
        let version = "9".repeat(100_000);
        assert_eq!(
            inline(&Redactor::new(), &version, 64),
            format!("{}… (99936 more characters)", "9".repeat(64))
        );
        assert_eq!(first_line(&Redactor::new(), Some("one\ntwo")), "one");
        assert_eq!(first_line(&Redactor::new(), None), "");
    }
}
