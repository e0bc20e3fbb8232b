//! Skills (the `io.modelcontextprotocol/skills` extension, SEP-2640): what a server's skill
//! listing becomes on this side, and the checks a skill passes before anything of it is used.
//!
//! A server lists its skills (`skills/list`); each entry names the skill's `SKILL.md`, its
//! frontmatter (at least `name` and `description`) and a manifest of its files, each with the
//! SHA-256 digest and the size of its bytes. Nothing of a skill is read when it is listed: its
//! `SKILL.md` is read when it is loaded ([`Session::load_skill`](crate::Session::load_skill)),
//! each other file on its first use ([`LoadedSkill`]), and every read is checked against the
//! manifest (size, digest) before any of it is used. The `SKILL.md`'s own frontmatter must
//! equal the entry's, field by field.
//!
//! What the server chooses is bounded: [`MAX_SKILL_FILES`] files and [`MAX_SKILL_BYTES`]
//! bytes a skill, [`MAX_FRONTMATTER_BYTES`] of frontmatter; an entry over a bound stays in the
//! listing, named and marked [`SkillEntry::refused`], and cannot be loaded. Names and
//! descriptions are shown without escape sequences or control characters.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mcp_catalog::sanitize::{Lines, clean};
use rmcp::model::JsonObject;
use serde_json::Value;

/// The most files a skill's manifest may list (the extension's own bound, `SKILL.md`
/// included); a larger skill is refused, named.
pub const MAX_SKILL_FILES: usize = 512;
/// The most bytes a skill's files may add up to, by its manifest (the extension's bound,
/// 16 MiB); a larger skill is refused, named.
pub const MAX_SKILL_BYTES: u64 = 16 * 1024 * 1024;
/// The most bytes of frontmatter a skill may have (as the entry's JSON, and as the YAML block
/// of its `SKILL.md`); a skill with more is refused.
pub const MAX_FRONTMATTER_BYTES: usize = 16 * 1024;
/// The longest skill name shown, in bytes (the extension allows 64 characters).
pub const MAX_SKILL_NAME_BYTES: usize = 256;

/// One file of a skill's manifest: its URI, the `sha256:` digest and the size in bytes the
/// server promises for it.
///
/// ```
/// let file = mcp_client::SkillFile {
///     uri: "skill://pdf/references/FORMS.md".into(),
///     digest: format!("sha256:{}", "0".repeat(64)),
///     size: 12,
/// };
/// assert_eq!(file.size, 12);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFile {
    /// The file's resource URI, read with `resources/read`.
    pub uri: String,
    /// `sha256:` and 64 lowercase hex digits.
    pub digest: String,
    /// The length of its bytes.
    pub size: u64,
}

/// The files of a skill.
///
/// ```
/// let files = mcp_client::SkillFiles::Dynamic;
/// assert!(files.listed().is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkillFiles {
    /// A manifest: every file of the skill (its `SKILL.md` included), each read checked
    /// against its entry.
    Listed(Vec<SkillFile>),
    /// `"dynamic"`: the server keeps no manifest; files within the skill's directory are read
    /// unchecked (bounded by [`MAX_SKILL_BYTES`]), the `SKILL.md`'s frontmatter still compared.
    Dynamic,
}

impl SkillFiles {
    /// The manifest's files (none for a dynamic skill).
    pub fn listed(&self) -> &[SkillFile] {
        match self {
            Self::Listed(files) => files,
            Self::Dynamic => &[],
        }
    }
}

/// Why a skill, or one of its files, is refused. [`FeatureError::Skill`](crate::FeatureError::Skill)
/// names the server, the skill and the file around it.
///
/// ```
/// use mcp_client::SkillProblem;
///
/// let problem = SkillProblem::Size { expected: 10, actual: 11 };
/// assert_eq!(problem.to_string(), "is 11 bytes, its manifest entry says 10");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SkillProblem {
    /// The entry breaks a rule of the extension (its name differs from its URI's last path
    /// segment, a file lies outside its directory, a digest is malformed, …).
    #[error("its entry breaks the skills extension's rules: {0}")]
    Invalid(String),
    /// The manifest lists more than [`MAX_SKILL_FILES`] files.
    #[error("it lists {count} files, more than {limit} (the file limit)")]
    TooManyFiles {
        /// How many it lists.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// The manifest's sizes add up to more than [`MAX_SKILL_BYTES`].
    #[error("its files add up to {total} bytes, more than {limit} (the size limit)")]
    TooLarge {
        /// Their sum.
        total: u64,
        /// The limit.
        limit: u64,
    },
    /// The frontmatter is larger than [`MAX_FRONTMATTER_BYTES`].
    #[error("its frontmatter is larger than {limit} bytes (the frontmatter limit)")]
    FrontmatterTooLarge {
        /// The limit.
        limit: usize,
    },
    /// The file read is not the size its manifest entry says.
    #[error("is {actual} bytes, its manifest entry says {expected}")]
    Size {
        /// The size the manifest says.
        expected: u64,
        /// The size read.
        actual: u64,
    },
    /// The file read is larger than its manifest entry says, by more than could be read.
    #[error("is larger than the {expected} bytes its manifest entry says")]
    Oversized {
        /// The size the manifest says.
        expected: u64,
    },
    /// The file read does not have the digest its manifest entry says.
    #[error("has digest {actual}, its manifest entry says {expected}")]
    Digest {
        /// The digest the manifest says.
        expected: Box<str>,
        /// The digest of what was read.
        actual: Box<str>,
    },
    /// The `SKILL.md`'s frontmatter is missing, unreadable or not the entry's.
    #[error("its frontmatter is not the skill entry's: {0}")]
    Frontmatter(String),
    /// The file is not in the skill's manifest (or, for a dynamic skill, not within its
    /// directory).
    #[error("is not a file of the skill")]
    NotListed,
    /// The server lists no skill of this name.
    #[error("no skill of this name is listed")]
    Unknown,
    /// The server lists several skills of this name.
    #[error("{count} skills of this name are listed: name one by its URI")]
    Ambiguous {
        /// How many.
        count: usize,
    },
    /// The read returned no content.
    #[error("the server returned no content for it")]
    NoContent,
}

/// One skill as listed by a server, cleaned and checked (see [`McpRunner::list_skills`](crate::McpRunner::list_skills)).
///
/// Only [`uri`](Self::uri), [`name`](Self::name), [`description`](Self::description) and the
/// manifest are kept for use; the entry's whole frontmatter is kept as the server sent it, to
/// compare with its `SKILL.md` when it is loaded.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SkillEntry {
    /// The URI of its `SKILL.md` (a URI that is empty, too long or holds control characters
    /// leaves the entry out of the listing).
    pub uri: String,
    /// Its name, without escape sequences or control characters, at most
    /// [`MAX_SKILL_NAME_BYTES`].
    pub name: String,
    /// Its description, without escape sequences or control characters (`\n` and `\t`
    /// kept), at most [`MAX_FEATURE_DESCRIPTION_BYTES`](crate::MAX_FEATURE_DESCRIPTION_BYTES).
    pub description: String,
    /// Its files (an empty manifest when the entry is refused for its size).
    pub files: SkillFiles,
    /// Why it cannot be loaded, when it cannot.
    pub refused: Option<SkillProblem>,
    /// The frontmatter as the server sent it (bounded), compared with the `SKILL.md`'s.
    pub(crate) frontmatter: JsonObject,
}

impl SkillEntry {
    /// The manifest entry of `uri`, if the manifest lists it.
    pub fn file(&self, uri: &str) -> Option<&SkillFile> {
        self.files.listed().iter().find(|f| f.uri == uri)
    }

    /// The URI of the skill's directory, with its trailing `/` (its `SKILL.md` URI without
    /// `SKILL.md`).
    pub fn directory(&self) -> &str {
        self.uri.strip_suffix("SKILL.md").unwrap_or(&self.uri)
    }
}

/// The body of a file read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkillData {
    /// Text: UTF-8, the run's secrets replaced.
    Text(String),
    /// Bytes that came as a blob.
    Binary(Vec<u8>),
}

/// One file of a skill, read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SkillFileContents {
    /// Its URI.
    pub uri: String,
    /// Its MIME type, as the server gave it (cleaned).
    pub mime_type: Option<String>,
    /// Its body.
    pub data: SkillData,
    /// The bytes read (what the digest covers).
    pub bytes: usize,
}

/// A skill whose `SKILL.md` was read and checked: its size and digest against the manifest,
/// its frontmatter against the entry. Its other files are read on first use only
/// ([`Session::read_skill_file`](crate::Session::read_skill_file),
/// [`McpRunner::read_skill_file`](crate::McpRunner::read_skill_file)), each checked, and kept
/// for the next use.
#[derive(Debug)]
#[non_exhaustive]
pub struct LoadedSkill {
    /// The server key.
    pub server: String,
    /// The entry it was loaded by.
    pub entry: SkillEntry,
    /// The `SKILL.md` text, the run's secrets replaced and escape sequences and control
    /// characters (but `\n` and `\t`) removed.
    pub instructions: String,
    /// The bytes of the `SKILL.md` read.
    pub bytes: usize,
    pub(crate) files: Mutex<HashMap<String, Arc<SkillFileContents>>>,
    /// The directories of the other listed skills within this one's, when it was loaded:
    /// their files are theirs, read under their own rules.
    pub(crate) nested: Vec<String>,
}

impl LoadedSkill {
    /// The files read so far (the `SKILL.md` is not among them).
    pub fn files_read(&self) -> Vec<String> {
        let mut uris: Vec<String> = lock(&self.files).keys().cloned().collect();
        uris.sort();
        uris
    }

    pub(crate) fn cached(&self, uri: &str) -> Option<Arc<SkillFileContents>> {
        lock(&self.files).get(uri).cloned()
    }

    /// Keeps `contents` for the next use while the files kept stay within a skill's bounds
    /// ([`MAX_SKILL_FILES`], [`MAX_SKILL_BYTES`]); past them (a dynamic skill has no manifest
    /// to bound it), a file is returned and read again on its next use.
    pub(crate) fn keep(&self, contents: SkillFileContents) -> Arc<SkillFileContents> {
        let contents = Arc::new(contents);
        let mut files = lock(&self.files);
        let kept = files
            .values()
            .fold(0u64, |n, f| n.saturating_add(f.bytes as u64));
        if files.len() < MAX_SKILL_FILES
            && kept.saturating_add(contents.bytes as u64) <= MAX_SKILL_BYTES
        {
            files.insert(contents.uri.clone(), contents.clone());
        }
        contents
    }
}

/// How many loaded skills a session keeps for `mcp_read` (each with the files read of it).
pub(crate) const MAX_KEPT_SKILLS: usize = 32;

/// The skills `mcp_read` loaded on a session, by name: each `SKILL.md` read and checked once,
/// the files read of it kept in its [`LoadedSkill`]. At most [`MAX_KEPT_SKILLS`]; past that, a
/// skill loaded is used for its read and not kept.
#[derive(Debug, Default)]
pub(crate) struct KeptSkills(Mutex<HashMap<String, Arc<LoadedSkill>>>);

impl KeptSkills {
    pub(crate) fn get(&self, name: &str) -> Option<Arc<LoadedSkill>> {
        lock(&self.0).get(name).cloned()
    }

    pub(crate) fn keep(&self, name: &str, skill: LoadedSkill) -> Arc<LoadedSkill> {
        let skill = Arc::new(skill);
        let mut kept = lock(&self.0);
        if kept.len() < MAX_KEPT_SKILLS || kept.contains_key(name) {
            kept.insert(name.to_owned(), Arc::clone(&skill));
        }
        skill
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A server's `text` as a skill shows it: its escape sequences and controls removed first ([`without_escapes`]) —
/// so none can split a secret the redactor would otherwise find —, then every known secret
/// replaced, then cut to `max` bytes.
pub(crate) fn shown_without_escapes(
    redactor: &agent_core::Redactor,
    text: &str,
    max: usize,
    lines: Lines,
) -> String {
    let safe = without_escapes(text, usize::MAX, lines);
    without_escapes(&redactor.scrub(&safe), max, lines)
}

/// `text` without ANSI escape sequences (CSI `ESC [ … final`, OSC `ESC ] … BEL|ESC \`, and
/// two-character `ESC x`), then without any other control character ([`clean`]), cut to
/// `max` bytes.
pub(crate) fn without_escapes(text: &str, max: usize, lines: Lines) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']' | 'P' | '_' | '^') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' || c == '\u{9c}' {
                            break;
                        }
                        if c == '\u{1b}' {
                            let _ = chars.next_if_eq(&'\\');
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\u{9b}' => {
                for c in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            c => out.push(c),
        }
    }
    clean(&out, max, lines).into_owned()
}

/// The YAML frontmatter block of a `SKILL.md` (a leading BOM allowed): the text between a
/// first line `---` and the next line `---`, at most [`MAX_FRONTMATTER_BYTES`], parsed as a
/// YAML mapping into JSON.
pub(crate) fn parse_frontmatter(text: &str) -> Result<JsonObject, SkillProblem> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\r\n")
        .or_else(|| text.strip_prefix("---\n"))
        .ok_or_else(|| SkillProblem::Frontmatter("SKILL.md does not begin with `---`".into()))?;
    let mut block_end = None;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if bare
            .strip_prefix("---")
            .is_some_and(|t| t.trim_matches([' ', '\t']).is_empty())
        {
            block_end = Some(offset);
            break;
        }
        offset += line.len();
        if offset > MAX_FRONTMATTER_BYTES {
            return Err(SkillProblem::FrontmatterTooLarge {
                limit: MAX_FRONTMATTER_BYTES,
            });
        }
    }
    let end = block_end.ok_or_else(|| {
        SkillProblem::Frontmatter("SKILL.md's frontmatter has no closing `---`".into())
    })?;
    let block = &rest[..end];
    let value: Value = serde_yaml_ng::from_str(block).map_err(|e| {
        SkillProblem::Frontmatter(format!(
            "SKILL.md's frontmatter is not YAML: {}",
            without_escapes(&e.to_string(), 512, Lines::Single)
        ))
    })?;
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(SkillProblem::Frontmatter(
            "SKILL.md's frontmatter is not a mapping".into(),
        )),
    }
}

/// `Ok` when `file` (the `SKILL.md`'s frontmatter) and `entry` (the listing's) hold the same
/// fields with equal values (an absent field equals `null`); else the differing fields, named.
pub(crate) fn compare_frontmatter(
    file: &JsonObject,
    entry: &JsonObject,
) -> Result<(), SkillProblem> {
    let mut differ: Vec<String> = file
        .keys()
        .chain(entry.keys())
        .filter(|key| {
            let a = file.get(*key).unwrap_or(&Value::Null);
            let b = entry.get(*key).unwrap_or(&Value::Null);
            !same(a, b)
        })
        .map(|key| format!("`{}`", without_escapes(key, 64, Lines::Single)))
        .collect();
    differ.sort();
    differ.dedup();
    if differ.is_empty() {
        return Ok(());
    }
    let more = differ.len().saturating_sub(5);
    differ.truncate(5);
    let mut list = differ.join(", ");
    if more > 0 {
        list.push_str(&format!(" and {more} more"));
    }
    Err(SkillProblem::Frontmatter(format!("{list} differ")))
}

/// JSON equality with numbers compared by value (YAML `1` and JSON `1.0` are equal).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// How many characters of base64 encode `bytes` bytes.
pub(crate) fn base64_len(bytes: u64) -> u64 {
    bytes.div_ceil(3).saturating_mul(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_kept_of_a_skill_stay_within_its_bounds() {
        let entry = SkillEntry {
            uri: "skill://big/SKILL.md".into(),
            name: "big".into(),
            description: String::new(),
            files: SkillFiles::Dynamic,
            refused: None,
            frontmatter: JsonObject::new(),
        };
        let skill = LoadedSkill {
            server: "docs".into(),
            entry,
            instructions: String::new(),
            bytes: 0,
            files: Mutex::new(HashMap::new()),
            nested: Vec::new(),
        };
        let file = |i: usize, bytes: usize| SkillFileContents {
            uri: format!("skill://big/f{i}"),
            mime_type: None,
            data: SkillData::Binary(Vec::new()),
            bytes,
        };
        // Bytes: 15 MiB kept, then a 2 MiB file is returned but not kept; a small one is.
        skill.keep(file(0, 15 * 1024 * 1024));
        let returned = skill.keep(file(1, 2 * 1024 * 1024));
        assert_eq!(returned.uri, "skill://big/f1");
        assert!(skill.cached("skill://big/f1").is_none());
        skill.keep(file(2, 1024));
        assert_eq!(skill.files_read(), ["skill://big/f0", "skill://big/f2"]);
        // Count: no more than a manifest may list.
        for i in 3..MAX_SKILL_FILES + 10 {
            skill.keep(file(i, 1));
        }
        assert_eq!(skill.files_read().len(), MAX_SKILL_FILES);
    }

    #[test]
    fn a_secret_split_by_an_escape_sequence_or_a_control_is_still_found() {
        let secret = "sk-live-0123456789abcdef";
        let redactor = agent_core::Redactor::new().with_secrets([secret]);
        let (head, tail) = secret.split_at(8);
        for split in [
            format!("key {head}\u{1b}[0m{tail} here"),
            format!("key {head}\u{7}{tail} here"),
            format!("key {head}\u{1b}]0;title\u{7}{tail} here"),
        ] {
            for lines in [Lines::Single, Lines::Multi] {
                let shown = shown_without_escapes(&redactor, &split, usize::MAX, lines);
                assert!(!shown.contains(secret), "{split:?} showed {shown:?}");
                assert!(shown.contains("[REDACTED]"), "{split:?} showed {shown:?}");
            }
        }
        // Cut after scrubbing, on a character boundary.
        let shown =
            shown_without_escapes(&redactor, &format!("{secret} and more"), 12, Lines::Single);
        assert!(shown.len() <= 12 && !shown.contains(secret), "{shown:?}");
    }

    #[test]
    fn escape_sequences_and_controls_are_removed_whole() {
        assert_eq!(
            without_escapes(
                "\u{1b}[31mred\u{1b}[0m \u{1b}]0;title\u{7}bell\u{7}",
                64,
                Lines::Single
            ),
            "red bell"
        );
        assert_eq!(
            without_escapes(
                "a\u{1b}]8;;http://x\u{1b}\\link\u{9b}2Jb\nc",
                64,
                Lines::Multi
            ),
            "alinkb\nc"
        );
        assert_eq!(without_escapes("tail\u{1b}", 64, Lines::Single), "tail");
    }

    #[test]
    fn frontmatter_is_the_leading_yaml_block() {
        let fm = parse_frontmatter(
            "\u{feff}---\r\nname: pdf\ndescription: \"x\\e[31m\"\nn: 1\n---  \nbody\n",
        )
        .unwrap();
        assert_eq!(fm["name"], "pdf");
        assert_eq!(fm["description"], "x\u{1b}[31m");
        assert!(parse_frontmatter("no block").is_err());
        assert!(parse_frontmatter("---\nname: x\n").is_err());
        assert!(parse_frontmatter("---\n- a list\n---\n").is_err());
        let big = format!("---\nd: {}\n---\n", "x".repeat(MAX_FRONTMATTER_BYTES));
        assert_eq!(
            parse_frontmatter(&big),
            Err(SkillProblem::FrontmatterTooLarge {
                limit: MAX_FRONTMATTER_BYTES
            })
        );
    }

    #[test]
    fn frontmatter_fields_are_compared_one_by_one() {
        let file = parse_frontmatter("---\nname: a\ndescription: b\nv: 1\n---\n").unwrap();
        let entry = serde_json::json!({"name": "a", "description": "b", "v": 1.0});
        assert!(compare_frontmatter(&file, entry.as_object().unwrap()).is_ok());
        let entry = serde_json::json!({"name": "a", "description": "c", "extra": null});
        let err = compare_frontmatter(&file, entry.as_object().unwrap()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "its frontmatter is not the skill entry's: `description`, `v` differ"
        );
    }
}
