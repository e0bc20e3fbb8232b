//! The output limit: a tool output larger than what the model may see is cut at a
//! safe boundary with a marker, and its full text stays readable for the rest of the run
//! by its handle ([`OutputStore::read`], which the layer's [`OutputReader`](crate::OutputReader)
//! serves to the model) — in memory up to a budget, in a temporary file beyond it
//! (`spill.rs`: the per-process directory, bounded by `max_spill_bytes`). An error text is cut
//! the same way ([`OutputStore::limit_error`]).

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::{ContentPart, OutputError, ToolError, ToolOutput};

/// The default of [`OutputLimits::max_output_bytes`]: 64 KiB.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 64 * 1024;

/// The default of [`OutputLimits::max_spill_bytes`]: 256 MiB.
pub const DEFAULT_MAX_SPILL_BYTES: u64 = 256 << 20;

/// How many dropped handles a store remembers as dropped (older ones read as expired).
const REMEMBERED_DROPS: usize = 4096;

/// The smallest accepted [`OutputLimits::max_output_bytes`]: the marker needs room.
pub const MIN_MAX_OUTPUT_BYTES: usize = 1024;

/// Room kept for the marker of a cut output and the trailer of a read chunk.
const MARKER_RESERVE: usize = 256;

const HANDLE_PREFIX: &str = "out_";

/// How much of a tool's output the model sees, and how much of the rest is kept.
///
/// ```
/// use agent_core::OutputLimits;
///
/// let limits = OutputLimits::default().with_max_output_bytes(16 * 1024).with_memory_budget(1 << 20);
/// assert_eq!(limits.max_output_bytes, 16 * 1024);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutputLimits {
    /// The most bytes of one output the model sees (its text as
    /// [`ToolOutput::to_model_text`] renders it; image, audio and blob parts count by their
    /// encoded data), marker included. At least [`MIN_MAX_OUTPUT_BYTES`].
    pub max_output_bytes: usize,
    /// The most bytes of cut outputs kept in memory; later ones go to a temporary file.
    pub memory_budget: usize,
    /// The most bytes of cut outputs kept at all (memory and files); past it the oldest are
    /// dropped and their handles expire.
    pub max_retained_bytes: u64,
    /// The most bytes of spilled outputs on disk, for one run and for all the runs sharing
    /// [`spill_area`](Self::spill_area) (a process's): past it the run's oldest spilled
    /// outputs are dropped (reading one says so, naming this limit); an output that finds no
    /// room is not kept.
    pub max_spill_bytes: u64,
    /// Where the `mcp-agent-spill` directory of spilled outputs is made (default: the system's
    /// temporary directory), when [`spill_area`](Self::spill_area) is not set.
    pub spill_dir: Option<PathBuf>,
    /// The spill area shared with other stores (a process makes one for all its runs); each
    /// store makes its own when `None`.
    pub spill_area: Option<SpillArea>,
}

impl Default for OutputLimits {
    fn default() -> Self {
        Self {
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            memory_budget: 8 << 20,
            max_retained_bytes: 1 << 30,
            max_spill_bytes: DEFAULT_MAX_SPILL_BYTES,
            spill_dir: None,
            spill_area: None,
        }
    }
}

impl OutputLimits {
    /// Sets [`max_output_bytes`](Self::max_output_bytes) (raised to
    /// [`MIN_MAX_OUTPUT_BYTES`] if smaller).
    #[must_use]
    pub fn with_max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output_bytes = bytes;
        self
    }

    /// Sets [`memory_budget`](Self::memory_budget).
    #[must_use]
    pub fn with_memory_budget(mut self, bytes: usize) -> Self {
        self.memory_budget = bytes;
        self
    }

    /// Sets [`max_retained_bytes`](Self::max_retained_bytes).
    #[must_use]
    pub fn with_max_retained_bytes(mut self, bytes: u64) -> Self {
        self.max_retained_bytes = bytes;
        self
    }

    /// Sets [`max_spill_bytes`](Self::max_spill_bytes).
    #[must_use]
    pub fn with_max_spill_bytes(mut self, bytes: u64) -> Self {
        self.max_spill_bytes = bytes;
        self
    }

    /// Sets [`spill_dir`](Self::spill_dir).
    #[must_use]
    pub fn with_spill_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.spill_dir = Some(dir.into());
        self
    }

    /// Sets [`spill_area`](Self::spill_area).
    #[must_use]
    pub fn with_spill_area(mut self, area: SpillArea) -> Self {
        self.spill_area = Some(area);
        self
    }

    fn max(&self) -> usize {
        self.max_output_bytes.max(MIN_MAX_OUTPUT_BYTES)
    }
}

/// An output after the limit: what the model sees, and how it relates to the whole.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Limited {
    /// What the model sees: the output unchanged, or its cut start plus a marker.
    pub output: ToolOutput,
    /// The size of the whole output, in bytes of model text.
    pub full_bytes: u64,
    /// The size of what the model sees, in bytes of model text (marker included).
    pub shown_bytes: u64,
    /// The handle of the full text, when the output was cut and kept.
    pub handle: Option<String>,
}

impl Limited {
    /// True when the output was cut.
    pub fn is_cut(&self) -> bool {
        self.full_bytes > self.shown_bytes
    }
}

/// One piece of a stored output.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutputChunk {
    /// The text, whole characters only.
    pub text: String,
    /// Its start, in bytes into the whole output.
    pub offset: u64,
    /// Its end (exclusive), where the next read starts.
    pub end: u64,
    /// The whole output's size.
    pub total: u64,
}

/// An error after the limit: what the model sees, and how it relates to the whole.
#[derive(Debug)]
#[non_exhaustive]
pub struct LimitedError {
    /// The error as the model sees it: unchanged, or with its text cut and a marker.
    pub error: ToolError,
    /// The size of the whole error text ([`crate::error_chain`]), in bytes.
    pub full_bytes: u64,
    /// The size of what the model sees, in bytes (marker included).
    pub shown_bytes: u64,
    /// The handle of the whole cut text (the tool's message, or the cause chain), when kept.
    pub handle: Option<String>,
}

enum Data {
    Memory(Arc<str>),
    Spilled(PathBuf),
}

struct Entry {
    size: u64,
    data: Data,
}

#[derive(Default)]
struct State {
    next: u64,
    /// By handle number, so the oldest comes first.
    entries: BTreeMap<u64, Entry>,
    memory: usize,
    retained: u64,
    /// Bytes of this store's spilled outputs.
    spilled: u64,
    /// Handles dropped to stay under `max_spill_bytes` (the newest few).
    dropped: BTreeSet<u64>,
    closed: bool,
}

impl State {
    fn remove(&mut self, n: u64, area: &SpillArea) {
        if let Some(entry) = self.entries.remove(&n) {
            self.retained -= entry.size;
            match entry.data {
                Data::Memory(_) => self.memory -= entry.size as usize,
                Data::Spilled(path) => {
                    let _ = fs::remove_file(path);
                    self.spilled -= entry.size;
                    area.release(entry.size);
                }
            }
        }
    }

    /// Drops the oldest spilled output other than `keep`, to make room on disk: false when
    /// there is none.
    fn drop_oldest_spilled(&mut self, keep: u64, area: &SpillArea) -> bool {
        let oldest = self
            .entries
            .iter()
            .find(|(n, e)| **n != keep && matches!(e.data, Data::Spilled(_)))
            .map(|(n, _)| *n);
        let Some(n) = oldest else {
            return false;
        };
        self.remove(n, area);
        self.dropped.insert(n);
        if self.dropped.len() > REMEMBERED_DROPS {
            self.dropped.pop_first();
        }
        true
    }

    fn release(&mut self, area: &SpillArea) {
        let numbers: Vec<u64> = self.entries.keys().copied().collect();
        for n in numbers {
            self.remove(n, area);
        }
    }
}

/// Applies the output limit and keeps cut outputs for reading by handle, for one run.
///
/// Memory stays bounded: past [`OutputLimits::memory_budget`], full texts are written to files
/// in a private temporary directory, deleted by [`close`](Self::close) or on drop.
///
/// ```
/// use agent_core::{OutputLimits, OutputStore, ToolOutput};
///
/// let store = OutputStore::new(OutputLimits::default().with_max_output_bytes(1024));
/// let limited = store.limit(ToolOutput::text("x".repeat(5000)));
/// assert!(limited.is_cut());
/// assert!(limited.shown_bytes <= 1024);
/// let handle = limited.handle.unwrap();
/// let chunk = store.read(&handle, 4990, 100).unwrap();
/// assert_eq!(chunk.text, "x".repeat(10));
/// assert!(store.read("out_999", 0, 10).is_err());
/// ```
pub struct OutputStore {
    limits: OutputLimits,
    /// The tool that reads kept outputs, named in the markers.
    reader: Option<String>,
    area: SpillArea,
    /// This store's number in its area, naming its files there.
    id: u64,
    state: Mutex<State>,
}

impl std::fmt::Debug for OutputStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("OutputStore")
            .field("limits", &self.limits)
            .field("outputs", &state.entries.len())
            .field("memory", &state.memory)
            .field("retained", &state.retained)
            .finish()
    }
}

impl Drop for OutputStore {
    fn drop(&mut self) {
        let area = self.area.clone();
        self.lock().release(&area);
    }
}

impl OutputStore {
    /// A store with `limits`, spilling to their [`spill_area`](OutputLimits::spill_area) or an
    /// area of its own.
    pub fn new(limits: OutputLimits) -> Self {
        let area = limits
            .spill_area
            .clone()
            .unwrap_or_else(|| SpillArea::new(limits.spill_dir.clone()));
        Self {
            id: area.store_id(),
            area,
            limits,
            reader: None,
            state: Mutex::new(State::default()),
        }
    }

    /// Names `tool` in the markers of cut outputs as the way to read the rest (the layer's
    /// [`OutputReader`](crate::OutputReader)); without it a marker gives the handle and offset
    /// alone.
    ///
    /// ```
    /// use agent_core::{OutputLimits, OutputStore, ToolOutput};
    ///
    /// let limits = OutputLimits::default().with_max_output_bytes(1024);
    /// let store = OutputStore::new(limits).with_reader_name("read_more");
    /// let cut = store.limit(ToolOutput::text("x".repeat(5000))).output.to_model_text();
    /// assert!(cut.contains(r#"read the rest with read_more {"handle": "out_0""#), "{cut}");
    /// ```
    #[must_use]
    pub fn with_reader_name(mut self, tool: impl Into<String>) -> Self {
        self.reader = Some(tool.into());
        self
    }

    /// The limits.
    pub fn limits(&self) -> &OutputLimits {
        &self.limits
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes of full outputs held in memory now.
    pub fn memory_bytes(&self) -> usize {
        self.lock().memory
    }

    /// Bytes of full outputs kept now, in memory and in files.
    pub fn retained_bytes(&self) -> u64 {
        self.lock().retained
    }

    /// Bytes of this store's outputs spilled to disk now.
    pub fn spilled_bytes(&self) -> u64 {
        self.lock().spilled
    }

    /// The directory of spilled outputs, while its area holds some.
    pub fn spill_dir(&self) -> Option<PathBuf> {
        self.area.dir()
    }

    /// Applies the limit to `output`: returned unchanged when its model text fits in
    /// [`OutputLimits::max_output_bytes`]; otherwise cut — text at a character boundary,
    /// non-text parts whole or not at all, structured output rendered as JSON text and never
    /// cut inside a number, keyword or escape — followed by a marker with the full size and
    /// the handle to [`read`](Self::read) the rest by.
    pub fn limit(&self, output: ToolOutput) -> Limited {
        let max = self.limits.max();
        // Counted first: an output that fits (most) is never rendered here.
        let length = output.model_text_len();
        if length <= max {
            let total = length as u64;
            return Limited {
                output,
                full_bytes: total,
                shown_bytes: total,
                handle: None,
            };
        }
        let full = output.to_model_text();
        let total = full.len() as u64;
        let (kept, shown) = cut(&output, &full, max - MARKER_RESERVE);
        drop(output);
        let handle = self.keep(full);
        let mut content = kept;
        content.push(ContentPart::text(marker(
            self.reader.as_deref(),
            shown,
            total,
            &handle,
        )));
        let output = ToolOutput::from_parts(content);
        let shown_bytes = output.to_model_text().len() as u64;
        Limited {
            output,
            full_bytes: total,
            shown_bytes,
            handle: handle.ok(),
        }
    }

    /// Applies the limit to the text of `error`: returned unchanged when
    /// [`error_chain`](crate::error_chain) fits in [`OutputLimits::max_output_bytes`];
    /// otherwise the text a tool or server chose — the message of
    /// [`Invocation`](ToolError::Invocation), [`InvalidArguments`](ToolError::InvalidArguments)
    /// and [`Configuration`](ToolError::Configuration), the reason of
    /// [`Denied`](ToolError::Denied), the causes of [`Transport`](ToolError::Transport) — is cut
    /// at a character boundary and followed by the marker of [`limit`](Self::limit), its
    /// whole kept under a handle. The variant stays; the names it
    /// carries (tool, server, suggested tools: a model's, a client's or a server's) are cut to
    /// 128 bytes each, marked `…`, first — all an [`UnknownTool`](ToolError::UnknownTool) or
    /// [`Timeout`](ToolError::Timeout) error has to cut.
    ///
    /// ```
    /// use agent_core::{OutputLimits, OutputStore, ToolError};
    ///
    /// let store = OutputStore::new(OutputLimits::default().with_max_output_bytes(1024));
    /// let error = ToolError::Invocation { server: None, tool: "t".into(), message: "x".repeat(5000) };
    /// let limited = store.limit_error(error);
    /// assert!(agent_core::error_chain(&limited.error).len() <= 1024);
    /// assert_eq!(limited.full_bytes, 5000 + "tool `t` failed: ".len() as u64);
    /// let rest = store.read(&limited.handle.unwrap(), 4990, 100).unwrap();
    /// assert_eq!(rest.text, "x".repeat(10));
    /// ```
    pub fn limit_error(&self, error: ToolError) -> LimitedError {
        let max = self.limits.max();
        let full_bytes = crate::error_chain(&error).len() as u64;
        let unchanged = |error: ToolError, shown_bytes: u64| LimitedError {
            error,
            full_bytes,
            shown_bytes,
            handle: None,
        };
        if full_bytes <= max as u64 {
            return unchanged(error, full_bytes);
        }
        // The names first: a tool's name can be the model's or a client's (an unknown tool)
        // or a server's, and an error of names only (`UnknownTool`, `Timeout`) has no other
        // text to cut.
        let error = error_text::short_names(error);
        let named = crate::error_chain(&error).len();
        if named <= max {
            return unchanged(error, named as u64);
        }
        let (frame, text) = match error_text::split(error) {
            Ok(split) => split,
            Err(error) => return unchanged(error, named as u64),
        };
        let total = text.len() as u64;
        // The bytes of the chain around the text (naming the tool and the server).
        let others = named.saturating_sub(text.len());
        let head = text[..floor_char_boundary(&text, max)].to_owned();
        let handle = self.keep(text);
        // What the chain adds around the text is known only once it is built (a cause may lose
        // a subject already named): cut shorter until it fits.
        let mut budget = max.saturating_sub(MARKER_RESERVE + others);
        loop {
            let end = floor_char_boundary(&head, budget);
            let mut shown = head[..end].to_owned();
            shown.push('\n');
            shown.push_str(&marker(self.reader.as_deref(), end, total, &handle));
            let error = frame.with_text(shown);
            let shown_bytes = crate::error_chain(&error).len();
            if shown_bytes <= max || end == 0 {
                return LimitedError {
                    error,
                    full_bytes,
                    shown_bytes: shown_bytes as u64,
                    handle: handle.ok(),
                };
            }
            budget = end.saturating_sub(shown_bytes - max);
        }
    }

    /// Keeps `full` and returns its handle, or says why it was not kept.
    fn keep(&self, full: String) -> Result<String, String> {
        let size = full.len() as u64;
        if size > self.limits.max_retained_bytes {
            return Err(String::from("the rest is too large to keep"));
        }
        let spill_limit = self.limits.max_spill_bytes;
        let (n, spill_to) = {
            let mut state = self.lock();
            if state.closed {
                return Err(String::from("the run has ended"));
            }
            let n = state.next;
            state.next += 1;
            if state.memory + full.len() <= self.limits.memory_budget {
                // Reserved now so concurrent calls cannot overrun the budget.
                state.memory += full.len();
                (n, None)
            } else {
                if size > spill_limit {
                    return Err(format!(
                        "the rest is larger than max_spill_bytes ({spill_limit} bytes) and was \
                         not kept"
                    ));
                }
                // Dropping every spilled output of this run would not make room in the area
                // (other runs hold the rest): refused before any is dropped for nothing.
                let others = self.area.bytes().saturating_sub(state.spilled);
                if others.saturating_add(size) > spill_limit {
                    return Err(format!(
                        "the rest was not kept: this process's spilled outputs are at \
                         max_spill_bytes ({spill_limit} bytes)"
                    ));
                }
                // The run's own oldest spilled outputs make room: for the run's bound, then
                // for the area's (shared with the process's other runs).
                while state.spilled + size > spill_limit && state.drop_oldest_spilled(n, &self.area)
                {
                }
                let dir = loop {
                    match self.area.reserve(size, spill_limit) {
                        Ok(dir) => break dir,
                        Err(Refused::Full) => {
                            if !state.drop_oldest_spilled(n, &self.area) {
                                return Err(format!(
                                    "the rest was not kept: this process's spilled outputs \
                                     are at max_spill_bytes ({spill_limit} bytes)"
                                ));
                            }
                        }
                        Err(Refused::Io(why)) => {
                            return Err(format!("the rest could not be kept: {why}"));
                        }
                    }
                };
                // Reserved now, as the memory is.
                state.spilled += size;
                (n, Some(dir.join(format!("{}-{}", self.id, handle_of(n)))))
            }
        };
        let data = match spill_to {
            None => Data::Memory(Arc::from(full)),
            Some(path) => match write_new(&path, full.as_bytes()) {
                Ok(()) => Data::Spilled(path),
                Err(_) => {
                    let _ = fs::remove_file(&path);
                    self.lock().spilled -= size;
                    self.area.release(size);
                    return Err(String::from("the rest could not be kept"));
                }
            },
        };
        let mut state = self.lock();
        if state.closed {
            match data {
                Data::Memory(_) => state.memory -= size as usize,
                Data::Spilled(path) => {
                    let _ = fs::remove_file(path);
                    state.spilled -= size;
                    self.area.release(size);
                }
            }
            return Err(String::from("the run has ended"));
        }
        state.entries.insert(n, Entry { size, data });
        state.retained += size;
        while state.retained > self.limits.max_retained_bytes {
            match state.entries.keys().next().copied() {
                Some(oldest) if oldest != n => state.remove(oldest, &self.area),
                _ => break,
            }
        }
        Ok(handle_of(n))
    }

    /// Reads up to `length` bytes (at most what one model reply may hold) of the output under
    /// `handle`, from `offset`, widened or narrowed to whole characters.
    pub fn read(
        &self,
        handle: &str,
        offset: u64,
        length: usize,
    ) -> Result<OutputChunk, OutputError> {
        let length = length.clamp(1, self.chunk_limit());
        let n = parse_handle(handle).ok_or_else(|| OutputError::UnknownHandle {
            handle: handle.to_owned(),
        })?;
        let (total, data) = {
            let state = self.lock();
            match state.entries.get(&n) {
                Some(entry) => (
                    entry.size,
                    match &entry.data {
                        Data::Memory(text) => Data::Memory(Arc::clone(text)),
                        Data::Spilled(path) => Data::Spilled(path.clone()),
                    },
                ),
                None if state.dropped.contains(&n) => {
                    return Err(self.dropped(handle));
                }
                None if n < state.next => {
                    return Err(OutputError::Expired {
                        handle: handle.to_owned(),
                    });
                }
                None => {
                    return Err(OutputError::UnknownHandle {
                        handle: handle.to_owned(),
                    });
                }
            }
        };
        if offset > total {
            return Err(OutputError::OffsetPastEnd {
                handle: handle.to_owned(),
                offset,
                total,
            });
        }
        // A few bytes more than asked, to find the character boundaries around the window.
        let want = (length as u64 + 8).min(total - offset) as usize;
        let window: Vec<u8> = match data {
            Data::Memory(text) => text.as_bytes()[offset as usize..offset as usize + want].to_vec(),
            Data::Spilled(path) => read_window(&path, offset, want).map_err(|source| {
                // The store may have been closed, or the output dropped, while reading.
                if source.kind() == std::io::ErrorKind::NotFound {
                    if self.lock().dropped.contains(&n) {
                        return self.dropped(handle);
                    }
                    OutputError::Expired {
                        handle: handle.to_owned(),
                    }
                } else {
                    OutputError::Io {
                        handle: handle.to_owned(),
                        source,
                    }
                }
            })?,
        };
        let at_end = offset + window.len() as u64 == total;
        let start = window
            .iter()
            .take(3)
            .take_while(|b| is_continuation(**b))
            .count();
        let mut end = length.min(window.len()).max(start);
        if !(at_end && end == window.len()) {
            while end > start && is_continuation(window[end]) {
                end -= 1;
            }
            if end == start && start < window.len() {
                // `length` is smaller than the character there: return that one character.
                end = start + 1;
                while end < window.len() && is_continuation(window[end]) {
                    end += 1;
                }
            }
        }
        let text = String::from_utf8_lossy(&window[start..end]).into_owned();
        Ok(OutputChunk {
            text,
            offset: offset + start as u64,
            end: offset + end as u64,
            total,
        })
    }

    fn dropped(&self, handle: &str) -> OutputError {
        OutputError::Dropped {
            handle: handle.to_owned(),
            max_spill_bytes: self.limits.max_spill_bytes,
        }
    }

    /// The most bytes one [`read`](Self::read) returns: what fits in one model reply beside
    /// a line about where it ends.
    pub fn chunk_limit(&self) -> usize {
        self.limits.max() - MARKER_RESERVE
    }

    /// Drops every kept output and deletes the temporary directory; later reads say their
    /// handles expired. Idempotent.
    pub fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.release(&self.area);
    }
}

/// The marker after the `shown` bytes of a cut text of `total` bytes: where to read on (with
/// the `reader` tool, when there is one), or why the rest was not kept.
fn marker(
    reader: Option<&str>,
    shown: usize,
    total: u64,
    handle: &Result<String, String>,
) -> String {
    match (handle, reader) {
        (Ok(handle), Some(reader)) => format!(
            "[output cut: showing {shown} of {total} bytes; read the rest with \
             {reader} {{\"handle\": \"{handle}\", \"offset\": {shown}}}]"
        ),
        (Ok(handle), None) => format!(
            "[output cut: showing {shown} of {total} bytes; the rest is kept as \
             {{\"handle\": \"{handle}\", \"offset\": {shown}}}]"
        ),
        (Err(why), _) => format!("[output cut: showing {shown} of {total} bytes; {why}]"),
    }
}

fn handle_of(n: u64) -> String {
    format!("{HANDLE_PREFIX}{n}")
}

fn parse_handle(handle: &str) -> Option<u64> {
    let digits = handle.strip_prefix(HANDLE_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

/// The parts that fit in `budget` bytes of model text, and how many bytes of `full` they
/// show.
fn cut(output: &ToolOutput, full: &str, budget: usize) -> (Vec<ContentPart>, usize) {
    if output.structured.is_some() {
        let end = json_cut(full, budget);
        let parts = if end > 0 {
            vec![ContentPart::text(&full[..end])]
        } else {
            Vec::new()
        };
        return (parts, end);
    }
    let mut kept = Vec::new();
    let mut used = 0;
    for part in &output.content {
        let sep = usize::from(!kept.is_empty());
        match part {
            ContentPart::Text { text } => {
                if used + sep + text.len() <= budget {
                    kept.push(part.clone());
                    used += sep + text.len();
                    continue;
                }
                let end = floor_char_boundary(text, budget.saturating_sub(used + sep));
                if end > 0 {
                    kept.push(ContentPart::text(&text[..end]));
                    used += sep + end;
                }
                break;
            }
            other => {
                let len = serde_json::to_string(other).map_or(0, |s| s.len());
                if used + sep + len > budget {
                    break;
                }
                kept.push(other.clone());
                used += sep + len;
            }
        }
    }
    (kept, used)
}

/// The largest `end <= budget` at which compact JSON text `json` can be cut without splitting
/// a number, a keyword, an escape sequence or a character. Strings may be cut between
/// characters: one string can be most of a large output.
fn json_cut(json: &str, budget: usize) -> usize {
    if json.len() <= budget {
        return json.len();
    }
    let bytes = json.as_bytes();
    let literal = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.');
    let mut best = 0;
    let mut in_string = false;
    let mut i = 0;
    while i < budget {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => {
                    i += if bytes.get(i + 1) == Some(&b'u') {
                        6
                    } else {
                        2
                    }
                }
                b'"' => {
                    in_string = false;
                    i += 1;
                }
                _ => i += 1,
            }
            if i <= budget && json.is_char_boundary(i) {
                best = i;
            }
        } else {
            if b == b'"' {
                in_string = true;
            }
            i += 1;
            if !literal(b) || bytes.get(i).is_none_or(|&next| !literal(next)) {
                best = i;
            }
        }
    }
    best
}

fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = File::options();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(bytes)
}

fn read_window(path: &Path, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut buf = vec![0; len];
    file.read_exact(&mut buf)?;
    Ok(buf)
}

mod error_text;
mod spill;
#[cfg(test)]
mod tests;

use error_text::floor_char_boundary;
use spill::Refused;
pub use spill::{SPILL_ROOT, SpillArea, spill_root};
