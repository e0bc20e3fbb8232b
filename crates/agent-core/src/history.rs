//! Session history: per session a directory holding `messages.jsonl` and
//! `events.jsonl`, one JSON object a line, append-only, secrets redacted.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;

use crate::{Event, EventSink, HistoryError, JsonObject, Message, Redactor};

/// The file of a session's conversation messages.
pub const MESSAGES_FILE: &str = "messages.jsonl";
/// The file of a session's events.
pub const EVENTS_FILE: &str = "events.jsonl";
/// Locked (an advisory lock) while a writer has the session open; the lock goes with the
/// writer, also when its process dies, and the file itself stays.
pub const LOCK_FILE: &str = ".writer.lock";

struct Files {
    messages: File,
    events: File,
    /// Holds the lock file's advisory lock while the session is open; the kernel releases it
    /// when the writer dies, so a crash leaves no session locked.
    _held: File,
}

struct State {
    files: Option<Files>,
    /// The first write failure, reported again by `close`.
    failed: Option<HistoryError>,
}

/// The writer of one session's history.
///
/// [`create`](Self::create) fails at once — naming the path — when the directory cannot be
/// made or written, so a run never starts with a history it cannot keep. Every line is one
/// JSON object with a `ts_ms` timestamp first, redacted (known secret values, values of
/// sensitive keys and headers), and written with a single `write` to a file opened for
/// appending: each line reaches the operating system before the call returns.
/// [`close`](Self::close) syncs both files to disk. One writer per session: a lock file
/// inside the directory refuses a second one until the first closes or is dropped.
///
/// It is also an [`EventSink`]: events emitted to it go to `events.jsonl`.
///
/// ```
/// use agent_core::{Event, EventKind, History, Message, Redactor, Role};
///
/// let dir = tempfile::tempdir().unwrap();
/// let session = dir.path().join("session-1");
/// let history = History::create(&session, Redactor::new().with_secrets(["tok-123456"]))?;
/// history.append_message(&Message::new(Role::User, "use tok-123456"))?;
/// history.append_event(&Event::new(EventKind::ServerConnected).with_server("git"))?;
/// history.close()?;
///
/// let read = History::read(&session)?;
/// assert_eq!(read.messages.records[0]["content"], "use [REDACTED]");
/// assert_eq!(read.events.records[0]["kind"], "server_connected");
/// # Ok::<(), agent_core::HistoryError>(())
/// ```
pub struct History {
    dir: PathBuf,
    redactor: Redactor,
    state: Mutex<State>,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History")
            .field("dir", &self.dir)
            .field("open", &self.lock().files.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for History {
    fn drop(&mut self) {
        if let Some(files) = self.lock().files.take() {
            let _ = files.messages.sync_all();
            let _ = files.events.sync_all();
        }
    }
}

impl History {
    /// Opens the session directory `dir` for writing (creating it and its parents), with
    /// `redactor` applied to every line. An existing session is appended to; a torn last line
    /// left by a crash is ended first, so new lines stay whole.
    pub fn create(dir: impl AsRef<Path>, redactor: Redactor) -> Result<Self, HistoryError> {
        let dir = dir.as_ref().to_path_buf();
        private_dir(&dir).map_err(|source| HistoryError::Create {
            path: dir.clone(),
            source,
        })?;
        let lock = dir.join(LOCK_FILE);
        let held = private_file(
            File::options().write(true).create(true).truncate(false),
            &lock,
        )
        .map_err(|source| HistoryError::Create {
            path: lock.clone(),
            source,
        })?;
        match held.try_lock() {
            Ok(()) => {
                let mut pid = &held;
                let _ = pid.set_len(0);
                let _ = writeln!(pid, "{}", std::process::id());
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(HistoryError::Busy { dir, lock });
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(HistoryError::Create { path: lock, source });
            }
        }
        let open = |name: &str| {
            let path = dir.join(name);
            open_append(&path).map_err(|source| HistoryError::Create { path, source })
        };
        let files = open(MESSAGES_FILE).and_then(|messages| {
            let events = open(EVENTS_FILE)?;
            Ok((messages, events))
        });
        let (messages, events) = files?;
        Ok(Self {
            dir,
            redactor,
            state: Mutex::new(State {
                files: Some(Files {
                    messages,
                    events,
                    _held: held,
                }),
                failed: None,
            }),
        })
    }

    /// The session directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends one message to `messages.jsonl`.
    pub fn append_message(&self, message: &Message) -> Result<(), HistoryError> {
        self.append(MESSAGES_FILE, message)
    }

    /// Appends one event to `events.jsonl`.
    pub fn append_event(&self, event: &Event) -> Result<(), HistoryError> {
        self.append(EVENTS_FILE, event)
    }

    fn append(&self, name: &str, record: &impl Serialize) -> Result<(), HistoryError> {
        let path = || self.dir.join(name);
        let value = serde_json::to_value(record).map_err(|e| HistoryError::Write {
            path: path(),
            source: std::io::Error::other(e),
        })?;
        let mut line = JsonObject::new();
        let ts_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        line.insert("ts_ms".into(), ts_ms.into());
        match self.redactor.redact_json(&value) {
            Value::Object(fields) => line.extend(fields),
            other => {
                line.insert("value".into(), other);
            }
        }
        let mut bytes =
            serde_json::to_vec(&Value::Object(line)).map_err(|e| HistoryError::Write {
                path: path(),
                source: std::io::Error::other(e),
            })?;
        bytes.push(b'\n');
        let mut state = self.lock();
        let Some(files) = state.files.as_mut() else {
            return Err(HistoryError::Closed {
                dir: self.dir.clone(),
            });
        };
        let file = if name == MESSAGES_FILE {
            &mut files.messages
        } else {
            &mut files.events
        };
        match file.write_all(&bytes) {
            Ok(()) => Ok(()),
            Err(source) => {
                if state.failed.is_none() {
                    state.failed = Some(HistoryError::Write {
                        path: path(),
                        source: std::io::Error::new(source.kind(), source.to_string()),
                    });
                }
                Err(HistoryError::Write {
                    path: path(),
                    source,
                })
            }
        }
    }

    /// Syncs both files to disk and releases the session. Reports the first write that failed
    /// since the history was created, if one did. Idempotent: later calls return `Ok`.
    pub fn close(&self) -> Result<(), HistoryError> {
        let mut state = self.lock();
        let Some(files) = state.files.take() else {
            return Ok(());
        };
        let synced = [
            (MESSAGES_FILE, files.messages.sync_all()),
            (EVENTS_FILE, files.events.sync_all()),
        ];
        // The lock is released as `files` drops, at the end of this function.
        if let Some(failed) = state.failed.take() {
            return Err(failed);
        }
        for (name, result) in synced {
            result.map_err(|source| HistoryError::Write {
                path: self.dir.join(name),
                source,
            })?;
        }
        Ok(())
    }

    /// Reads a session directory: every whole line of both files (see [`read_jsonl`]).
    pub fn read(dir: impl AsRef<Path>) -> Result<SessionHistory, HistoryError> {
        let dir = dir.as_ref();
        Ok(SessionHistory {
            messages: read_jsonl(dir.join(MESSAGES_FILE))?,
            events: read_jsonl(dir.join(EVENTS_FILE))?,
        })
    }
}

impl EventSink for History {
    /// Appends the event; a failure is kept and reported by [`History::close`].
    fn emit(&self, event: Event) {
        let _ = self.append_event(&event);
    }
}

/// Creates `dir` and its parents, the directory itself readable by its owner only (a session
/// holds conversations and tool results). An existing directory keeps its mode.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Opens `path` with `options`, a new file readable and writable by its owner only.
fn private_file(options: &mut fs::OpenOptions, path: &Path) -> std::io::Result<File> {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(options, 0o600);
    options.open(path)
}

fn open_append(path: &Path) -> std::io::Result<File> {
    let mut file = private_file(File::options().read(true).append(true).create(true), path)?;
    let len = file.metadata()?.len();
    if len > 0 {
        let mut last = [0u8; 1];
        file.seek(SeekFrom::Start(len - 1))?;
        file.read_exact(&mut last)?;
        if last[0] != b'\n' {
            file.write_all(b"\n")?;
        }
    }
    Ok(file)
}

/// Both files of a session, as [`History::read`] found them.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct SessionHistory {
    /// `messages.jsonl`.
    pub messages: JsonlLines,
    /// `events.jsonl`.
    pub events: JsonlLines,
}

/// The longest line [`read_jsonl`] reads: 16 MiB. A longer line is skipped (its bytes are
/// read past, never held) and reported as an [`OversizedLine`]; the reader goes on with the
/// next line.
pub const MAX_JSONL_LINE_BYTES: usize = 16 * 1024 * 1024;

/// What [`read_jsonl`] found in one file.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct JsonlLines {
    /// Every whole line that is JSON, in order.
    pub records: Vec<Value>,
    /// Whole lines that are not JSON (for example a torn line ended by a later writer).
    pub invalid: Vec<InvalidLine>,
    /// Lines longer than the limit ([`MAX_JSONL_LINE_BYTES`]), skipped.
    pub oversized: Vec<OversizedLine>,
    /// A last line with no newline: a write that did not finish.
    pub torn: Option<TornLine>,
}

/// A whole line that is not JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InvalidLine {
    /// Its number, from 1.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

/// A line longer than the reader's limit, skipped without being held in memory.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("events.jsonl");
/// std::fs::write(&path, format!("{{\"a\":\"{}\"}}\n{{\"a\":2}}\n", "x".repeat(64))).unwrap();
/// let lines = agent_core::read_jsonl_with_limit(&path, 16)?;
/// assert_eq!(lines.records.len(), 1);
/// let skipped = &lines.oversized[0];
/// assert_eq!((skipped.line, skipped.bytes, skipped.limit), (1, 72, 16));
/// assert!(skipped.to_string().contains("events.jsonl"), "{skipped}");
/// # Ok::<(), agent_core::HistoryError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OversizedLine {
    /// The file it is in.
    pub path: PathBuf,
    /// Its number, from 1.
    pub line: usize,
    /// How many bytes it has, without its newline.
    pub bytes: usize,
    /// The limit it is over.
    pub limit: usize,
}

impl std::fmt::Display for OversizedLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` line {}: {} bytes, over the line limit of {} bytes; skipped",
            self.path.display(),
            self.line,
            self.bytes,
            self.limit
        )
    }
}

/// An unterminated last line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TornLine {
    /// Its number, from 1.
    pub line: usize,
    /// How many bytes it has.
    pub bytes: usize,
}

/// Reads a JSONL file: every whole line, the whole lines that are not JSON, the lines over
/// [`MAX_JSONL_LINE_BYTES`] (skipped) and a torn last line — reported, not an error. Blank
/// lines are skipped. Fails only when the file cannot be read, naming it.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("events.jsonl");
/// std::fs::write(&path, "{\"a\":1}\n{\"a\":2}\n{\"a\":").unwrap();
/// let lines = agent_core::read_jsonl(&path)?;
/// assert_eq!(lines.records.len(), 2);
/// assert_eq!(lines.torn.unwrap().line, 3);
/// # Ok::<(), agent_core::HistoryError>(())
/// ```
pub fn read_jsonl(path: impl AsRef<Path>) -> Result<JsonlLines, HistoryError> {
    read_jsonl_with_limit(path, MAX_JSONL_LINE_BYTES)
}

/// [`read_jsonl`] with another line limit (`max_line_bytes`, at least 1): a longer line is
/// read past in bounded chunks, reported as an [`OversizedLine`] and skipped. An oversized
/// last line without a newline is reported as oversized, and as torn.
pub fn read_jsonl_with_limit(
    path: impl AsRef<Path>,
    max_line_bytes: usize,
) -> Result<JsonlLines, HistoryError> {
    let path = path.as_ref();
    let limit = max_line_bytes.max(1);
    let failed = |source| HistoryError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut reader = BufReader::new(File::open(path).map_err(failed)?);
    let mut out = JsonlLines::default();
    let mut buf = Vec::new();
    let mut number = 0;
    loop {
        buf.clear();
        // At most the limit, its newline, and one byte more to tell an oversized line.
        let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
        if (&mut reader)
            .take(cap)
            .read_until(b'\n', &mut buf)
            .map_err(failed)?
            == 0
        {
            break;
        }
        number += 1;
        let Some(line) = buf.strip_suffix(b"\n") else {
            if buf.len() > limit {
                let (rest, ended) = skip_line(&mut reader).map_err(failed)?;
                let bytes = buf.len() + rest;
                out.oversized.push(OversizedLine {
                    path: path.to_path_buf(),
                    line: number,
                    bytes,
                    limit,
                });
                if ended {
                    continue;
                }
                out.torn = Some(TornLine {
                    line: number,
                    bytes,
                });
                break;
            }
            out.torn = Some(TornLine {
                line: number,
                bytes: buf.len(),
            });
            break;
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice(line) {
            Ok(value) => out.records.push(value),
            Err(e) => out.invalid.push(InvalidLine {
                line: number,
                message: e.to_string(),
            }),
        }
    }
    Ok(out)
}

/// Reads past the rest of a line without keeping it: the bytes skipped (without the newline)
/// and whether a newline ended it (else the file did).
fn skip_line(reader: &mut impl BufRead) -> std::io::Result<(usize, bool)> {
    let mut skipped = 0;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok((skipped, false));
        }
        if let Some(at) = chunk.iter().position(|&b| b == b'\n') {
            reader.consume(at + 1);
            return Ok((skipped + at, true));
        }
        let n = chunk.len();
        skipped += n;
        reader.consume(n);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{EventKind, Role};

    #[test]
    fn an_oversized_line_is_skipped_and_named_and_the_reader_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(EVENTS_FILE);
        let big = format!("{{\"blob\":\"{}\"}}", "x".repeat(4096));
        fs::write(
            &path,
            format!("{{\"n\":1}}\n{big}\n{{\"n\":3}}\nnot json\n{big}"),
        )
        .unwrap();
        let lines = read_jsonl_with_limit(&path, 1024).unwrap();
        assert_eq!(lines.records, vec![json!({"n": 1}), json!({"n": 3})]);
        assert_eq!(lines.invalid.len(), 1);
        assert_eq!(lines.invalid[0].line, 4);
        let skipped: Vec<(usize, usize)> =
            lines.oversized.iter().map(|o| (o.line, o.bytes)).collect();
        assert_eq!(skipped, vec![(2, big.len()), (5, big.len())]);
        assert!(
            lines
                .oversized
                .iter()
                .all(|o| o.limit == 1024 && o.path == path)
        );
        // The last one had no newline: it is torn as well.
        assert_eq!(lines.torn.as_ref().map(|t| t.line), Some(5));
        let shown = lines.oversized[0].to_string();
        assert!(shown.contains(&path.display().to_string()), "{shown}");
        assert!(
            shown.contains("line 2") && shown.contains("1024"),
            "{shown}"
        );
        // A line exactly at the limit is read.
        let exact = format!("{{\"s\":\"{}\"}}", "y".repeat(1024 - 8));
        assert_eq!(exact.len(), 1024);
        fs::write(&path, format!("{exact}\n")).unwrap();
        let lines = read_jsonl_with_limit(&path, 1024).unwrap();
        assert_eq!((lines.records.len(), lines.oversized.len()), (1, 0));
    }

    #[test]
    fn the_default_line_limit_is_sixteen_mebibytes() {
        assert_eq!(MAX_JSONL_LINE_BYTES, 16 << 20);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MESSAGES_FILE);
        let mut file = File::create(&path).unwrap();
        let chunk = vec![b'z'; 1 << 20];
        file.write_all(b"{\"n\":1}\n\"").unwrap();
        for _ in 0..17 {
            file.write_all(&chunk).unwrap();
        }
        file.write_all(b"\"\n{\"n\":2}\n").unwrap();
        drop(file);
        let lines = read_jsonl(&path).unwrap();
        assert_eq!(lines.records, vec![json!({"n": 1}), json!({"n": 2})]);
        assert_eq!(lines.oversized.len(), 1);
        assert_eq!(lines.oversized[0].line, 2);
        assert_eq!(lines.oversized[0].bytes, (17 << 20) + 2);
        assert!(lines.torn.is_none());
    }

    #[test]
    fn an_unwritable_directory_fails_at_once_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        // A regular file where a directory should be: unwritable even for root.
        let blocker = dir.path().join("not-a-dir");
        fs::write(&blocker, "x").unwrap();
        let session = blocker.join("session");
        let err = History::create(&session, Redactor::new()).unwrap_err();
        assert!(matches!(err, HistoryError::Create { .. }), "{err:?}");
        assert!(
            err.to_string().contains(&session.display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn a_second_writer_is_refused_until_the_first_closes() {
        let dir = tempfile::tempdir().unwrap();
        let first = History::create(dir.path(), Redactor::new()).unwrap();
        let err = History::create(dir.path(), Redactor::new()).unwrap_err();
        assert!(matches!(err, HistoryError::Busy { .. }), "{err:?}");
        first.close().unwrap();
        let second = History::create(dir.path(), Redactor::new()).unwrap();
        drop(second);
        // Dropping releases the lock.
        assert!(History::create(dir.path(), Redactor::new()).is_ok());
    }

    #[test]
    fn a_lock_file_left_by_a_writer_that_died_does_not_lock_the_session() {
        let dir = tempfile::tempdir().unwrap();
        // What a killed writer leaves: the lock file, with its pid, but no lock on it.
        fs::write(dir.path().join(LOCK_FILE), "4242\n").unwrap();
        let history = History::create(dir.path(), Redactor::new()).unwrap();
        history.close().unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn the_session_is_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s");
        let history = History::create(&session, Redactor::new()).unwrap();
        history.close().unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&session), 0o700);
        for file in [MESSAGES_FILE, EVENTS_FILE, LOCK_FILE] {
            assert_eq!(mode(&session.join(file)), 0o600, "{file}");
        }
    }

    #[test]
    fn lines_are_whole_json_with_a_timestamp_and_appended() {
        let dir = tempfile::tempdir().unwrap();
        let history = History::create(dir.path(), Redactor::new()).unwrap();
        history
            .append_message(&Message::new(Role::User, "one"))
            .unwrap();
        // Visible on disk before close: each line is written when appended.
        let text = fs::read_to_string(dir.path().join(MESSAGES_FILE)).unwrap();
        assert!(text.ends_with("}\n"), "{text}");
        assert!(text.starts_with("{\"ts_ms\":"), "{text}");
        history.close().unwrap();
        assert!(matches!(
            history.append_message(&Message::new(Role::User, "late")),
            Err(HistoryError::Closed { .. })
        ));

        let again = History::create(dir.path(), Redactor::new()).unwrap();
        again
            .append_message(&Message::new(Role::User, "two"))
            .unwrap();
        again.close().unwrap();
        let read = History::read(dir.path()).unwrap();
        let contents: Vec<&Value> = read
            .messages
            .records
            .iter()
            .map(|r| &r["content"])
            .collect();
        assert_eq!(contents, [&json!("one"), &json!("two")]);
        assert!(read.events.records.is_empty());
    }

    #[test]
    fn a_torn_last_line_is_reported_and_later_lines_stay_whole() {
        let dir = tempfile::tempdir().unwrap();
        let history = History::create(dir.path(), Redactor::new()).unwrap();
        history
            .append_event(&Event::new(EventKind::ServerConnected))
            .unwrap();
        history.close().unwrap();
        // A crash in the middle of a write.
        let events = dir.path().join(EVENTS_FILE);
        let mut file = File::options().append(true).open(&events).unwrap();
        let torn = b"{\"ts_ms\":1,\"kind\":\"tool_ca";
        file.write_all(torn).unwrap();
        drop(file);

        let read = read_jsonl(&events).unwrap();
        assert_eq!(read.records.len(), 1);
        assert_eq!(
            read.torn,
            Some(TornLine {
                line: 2,
                bytes: torn.len()
            })
        );
        assert!(read.invalid.is_empty());

        let history = History::create(dir.path(), Redactor::new()).unwrap();
        history
            .append_event(&Event::new(EventKind::ToolsChanged))
            .unwrap();
        history.close().unwrap();
        let read = read_jsonl(&events).unwrap();
        assert_eq!(read.records.len(), 2);
        assert_eq!(read.records[1]["kind"], "tools_changed");
        assert_eq!(read.invalid.len(), 1);
        assert_eq!(read.invalid[0].line, 2);
        assert_eq!(read.torn, None);
    }

    #[test]
    fn reading_a_missing_file_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = History::read(dir.path()).unwrap_err();
        assert!(err.to_string().contains(MESSAGES_FILE), "{err}");
    }
}
