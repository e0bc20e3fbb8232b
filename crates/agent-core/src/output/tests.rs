use serde_json::json;

use super::*;

const MAX: usize = 4096;

fn store() -> OutputStore {
    OutputStore::new(OutputLimits::default().with_max_output_bytes(MAX))
}

/// The text the model sees before the marker, and the marker.
fn shown(limited: &Limited) -> (String, String) {
    let parts = &limited.output.content;
    let ContentPart::Text { text: marker } = parts.last().unwrap() else {
        panic!("the marker is the last part")
    };
    let head = ToolOutput::from_parts(parts[..parts.len() - 1].to_vec()).to_model_text();
    (head, marker.clone())
}

/// Reads the whole output behind `handle` in chunks of `length` bytes.
fn read_all(store: &OutputStore, handle: &str, length: usize) -> String {
    let mut out = String::new();
    let mut offset = 0;
    loop {
        let chunk = store.read(handle, offset, length).unwrap();
        assert_eq!(chunk.offset, offset, "chunks follow each other");
        out.push_str(&chunk.text);
        offset = chunk.end;
        if chunk.end == chunk.total {
            return out;
        }
    }
}

#[test]
fn an_output_exactly_at_the_limit_is_unchanged() {
    let store = store();
    let output = ToolOutput::text("a".repeat(MAX));
    let limited = store.limit(output.clone());
    assert_eq!(limited.output, output);
    assert!(!limited.is_cut());
    assert_eq!(limited.handle, None);
    assert_eq!(
        (limited.full_bytes, limited.shown_bytes),
        (MAX as u64, MAX as u64)
    );
    assert_eq!(
        store.retained_bytes(),
        0,
        "nothing is kept for a whole output"
    );
}

#[test]
fn one_byte_over_the_limit_is_cut_with_a_marker_and_a_handle() {
    let store = store();
    let text: String = (0..=MAX)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    assert_eq!(text.len(), MAX + 1);
    let limited = store.limit(ToolOutput::text(text.clone()));
    assert!(limited.is_cut());
    assert!(limited.shown_bytes <= MAX as u64, "{}", limited.shown_bytes);
    assert_eq!(limited.full_bytes, MAX as u64 + 1);
    assert_eq!(
        limited.output.to_model_text().len() as u64,
        limited.shown_bytes
    );
    let (head, marker) = shown(&limited);
    assert!(text.starts_with(&head));
    let handle = limited.handle.clone().unwrap();
    assert!(
        marker.contains(&format!("of {} bytes", MAX + 1)),
        "{marker}"
    );
    assert!(
        marker.contains(&format!("\"handle\": \"{handle}\"")),
        "{marker}"
    );
    assert!(
        marker.contains(&format!("\"offset\": {}", head.len())),
        "{marker}"
    );
    // The rest, from the offset the marker gives.
    let rest = store.read(&handle, head.len() as u64, MAX).unwrap();
    assert_eq!(format!("{head}{}", rest.text), text);
    assert_eq!(read_all(&store, &handle, 1000), text);
}

#[test]
fn a_multi_byte_character_at_the_cut_is_kept_whole_or_left_out() {
    let store = store();
    let budget = MAX - MARKER_RESERVE;
    // One ASCII byte, then 3-byte characters: the budget falls inside one of them.
    let text = format!("a{}", "€".repeat(MAX));
    assert!(!text.is_char_boundary(budget) || !text.is_char_boundary(budget - 1));
    let limited = store.limit(ToolOutput::text(text.clone()));
    let (head, _) = shown(&limited);
    assert!(text.starts_with(&head));
    assert!(
        head.len() <= budget && head.len() + 3 > budget,
        "{}",
        head.len()
    );
    // Reading from the middle of a character starts at the next one; reading a length that
    // ends inside one stops before it.
    let handle = limited.handle.unwrap();
    let chunk = store.read(&handle, 2, 7).unwrap();
    assert_eq!((chunk.offset, chunk.end), (4, 7));
    assert_eq!(chunk.text, "€");
    // A length smaller than the character still returns that character.
    let chunk = store.read(&handle, 1, 1).unwrap();
    assert_eq!((chunk.text.as_str(), chunk.end), ("€", 4));
    assert_eq!(read_all(&store, &handle, 1001), text);
}

#[test]
fn structured_output_falls_back_to_text_cut_between_tokens() {
    let store = store();
    let value = json!({
        "numbers": (0..2000).map(|i| 1_000_000_007_u64 * i).collect::<Vec<_>>(),
        "flags": [true, false, null],
    });
    let full = value.to_string();
    let limited = store.limit(ToolOutput::structured(value));
    assert!(limited.is_cut());
    assert_eq!(
        limited.output.structured, None,
        "a cut JSON is not structured output"
    );
    let (head, _) = shown(&limited);
    assert!(full.starts_with(&head));
    let last = head.as_bytes()[head.len() - 1];
    let next = full.as_bytes()[head.len()];
    assert!(
        !(last.is_ascii_digit() && next.is_ascii_digit()),
        "cut inside a number: …{}|{}…",
        &head[head.len() - 5..],
        &full[head.len()..head.len() + 5]
    );
}

#[test]
fn json_cuts_never_split_escapes_keywords_or_characters() {
    let value = json!({"s": "\u{1}é\u{2}€x\"y", "t": true, "n": -12.5e3});
    let full = value.to_string();
    for budget in 0..full.len() {
        let end = json_cut(&full, budget);
        assert!(end <= budget);
        assert!(full.is_char_boundary(end), "budget {budget}");
        let head = &full[..end];
        // No half escape: an odd run of backslashes at the end, or a partial \uXXXX.
        let trailing = head.bytes().rev().take_while(|&b| b == b'\\').count();
        assert_eq!(trailing % 2, 0, "budget {budget}: {head}");
        if let Some(at) = head.rfind("\\u") {
            assert!(head.len() >= at + 6, "budget {budget}: {head}");
        }
        for word in ["true", "-12"] {
            if let Some(at) = full.find(word) {
                assert!(
                    !(end > at && end < at + word.len()),
                    "budget {budget}: {head}"
                );
            }
        }
    }
    assert_eq!(json_cut(&full, full.len()), full.len());
}

#[test]
fn image_parts_count_by_their_bytes_and_are_never_cut() {
    let store = store();
    let output = ToolOutput::from_parts(vec![
        ContentPart::text("a chart:"),
        ContentPart::Image {
            data: "A".repeat(3 * MAX),
            mime_type: "image/png".into(),
        },
        ContentPart::text("done"),
    ]);
    let full = output.to_model_text();
    let limited = store.limit(output);
    assert!(limited.is_cut(), "the image's bytes count");
    assert_eq!(limited.full_bytes, full.len() as u64);
    let parts = &limited.output.content;
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert_eq!(parts[0], ContentPart::text("a chart:"));
    assert_eq!(
        read_all(&store, limited.handle.as_ref().unwrap(), MAX),
        full
    );
}

#[test]
fn a_50_mb_output_is_spilled_to_a_file_and_memory_stays_bounded() {
    let spill_parent = tempfile::tempdir().unwrap();
    let store = OutputStore::new(
        OutputLimits::default()
            .with_memory_budget(1 << 20)
            .with_spill_dir(spill_parent.path()),
    );
    // A small cut output stays in memory.
    let small = store.limit(ToolOutput::text("s".repeat(100_000)));
    assert_eq!(store.memory_bytes(), 100_000);
    assert!(store.spill_dir().is_none());

    let size = 50 * 1024 * 1024;
    let mut text = "z".repeat(size - 4);
    text.push_str("tail");
    let limited = store.limit(ToolOutput::text(text));
    assert_eq!(limited.full_bytes, size as u64);
    assert!(limited.shown_bytes <= DEFAULT_MAX_OUTPUT_BYTES as u64);
    assert_eq!(
        store.memory_bytes(),
        100_000,
        "the big one is not in memory"
    );
    assert_eq!(store.retained_bytes(), 100_000 + size as u64);
    let dir = store.spill_dir().unwrap();
    assert!(dir.starts_with(spill_parent.path()));
    let handle = limited.handle.unwrap();
    // Named after the store (the first of its area) and the handle.
    let file = dir.join(format!("0-{handle}"));
    assert_eq!(
        fs::metadata(&file).unwrap().len(),
        size as u64,
        "the full text is in the file"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700, "the spill directory is the owner's only");
        assert_eq!(mode(&file), 0o600, "a spilled output is the owner's only");
    }
    let tail = store.read(&handle, size as u64 - 6, 100).unwrap();
    assert_eq!((tail.text.as_str(), tail.end), ("zztail", size as u64));
    assert!(store.read(small.handle.as_ref().unwrap(), 0, 10).is_ok());

    store.close();
    assert!(!dir.exists(), "close deletes the spill directory");
    assert_eq!(store.memory_bytes(), 0);
    assert!(matches!(
        store.read(&handle, 0, 10),
        Err(OutputError::Expired { .. })
    ));
    // Nothing is kept after close.
    let late = store.limit(ToolOutput::text("q".repeat(2 * DEFAULT_MAX_OUTPUT_BYTES)));
    assert!(late.is_cut());
    assert_eq!(late.handle, None);
    assert!(late.output.to_model_text().contains("the run has ended"));
}

#[test]
fn dropping_the_store_deletes_its_files() {
    let spill_parent = tempfile::tempdir().unwrap();
    let store = OutputStore::new(
        OutputLimits::default()
            .with_memory_budget(0)
            .with_spill_dir(spill_parent.path()),
    );
    store.limit(ToolOutput::text("d".repeat(2 * DEFAULT_MAX_OUTPUT_BYTES)));
    let dir = store.spill_dir().unwrap();
    assert!(dir.exists());
    drop(store);
    assert!(!dir.exists());
}

#[test]
fn unknown_and_expired_handles_are_clear_errors() {
    let store = OutputStore::new(
        OutputLimits::default()
            .with_max_output_bytes(MAX)
            .with_max_retained_bytes(3 * MAX as u64),
    );
    for handle in ["nope", "out_", "out_x1", "out_0"] {
        let err = store.read(handle, 0, 10).unwrap_err();
        assert!(matches!(err, OutputError::UnknownHandle { .. }), "{handle}");
        assert!(err.to_string().contains(&format!("`{handle}`")), "{err}");
    }
    let first = store
        .limit(ToolOutput::text("1".repeat(2 * MAX)))
        .handle
        .unwrap();
    let second = store
        .limit(ToolOutput::text("2".repeat(2 * MAX)))
        .handle
        .unwrap();
    // Keeping the second went past the retention limit: the first is gone.
    let err = store.read(&first, 0, 10).unwrap_err();
    assert!(matches!(err, OutputError::Expired { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!("output `{first}` has expired and can no longer be read")
    );
    assert_eq!(store.read(&second, 0, 3).unwrap().text, "222");
    let err = store.read(&second, 2 * MAX as u64 + 1, 3).unwrap_err();
    assert!(matches!(err, OutputError::OffsetPastEnd { .. }), "{err:?}");
    let end = store.read(&second, 2 * MAX as u64, 3).unwrap();
    assert_eq!((end.text.as_str(), end.end), ("", 2 * MAX as u64));
}

/// A store spilling every output (no memory budget) under `parent`, or in `area`.
fn spilling(parent: &std::path::Path, max_spill: u64) -> OutputLimits {
    OutputLimits::default()
        .with_max_output_bytes(MAX)
        .with_memory_budget(0)
        .with_max_spill_bytes(max_spill)
        .with_spill_dir(parent)
}

#[test]
fn spilled_outputs_stay_under_max_spill_bytes_and_a_dropped_one_says_why() {
    let parent = tempfile::tempdir().unwrap();
    let store = OutputStore::new(spilling(parent.path(), 25_000));
    let handles: Vec<String> = (0..5)
        .map(|i| {
            let limited = store.limit(ToolOutput::text(format!("{i}").repeat(10_000)));
            assert!(store.spilled_bytes() <= 25_000, "{}", store.spilled_bytes());
            limited.handle.unwrap()
        })
        .collect();
    assert_eq!(store.spilled_bytes(), 20_000);
    assert_eq!(store.read(&handles[4], 0, 3).unwrap().text, "444");
    let error = store.read(&handles[0], 0, 3).unwrap_err();
    assert!(matches!(
        error,
        OutputError::Dropped {
            max_spill_bytes: 25_000,
            ..
        }
    ));
    assert!(
        error.to_string().contains("max_spill_bytes (25000 bytes)"),
        "{error}"
    );

    // One output over the limit is not kept, and the marker names the limit.
    let limited = store.limit(ToolOutput::text("z".repeat(30_000)));
    assert_eq!(limited.handle, None);
    assert!(
        limited
            .output
            .to_model_text()
            .contains("max_spill_bytes (25000 bytes)"),
        "{}",
        limited.output.to_model_text()
    );
    store.close();
    assert_eq!(
        fs::read_dir(parent.path()).unwrap().count(),
        0,
        "nothing left"
    );
}

#[test]
fn stores_sharing_an_area_stay_under_its_limit_together() {
    let parent = tempfile::tempdir().unwrap();
    let area = SpillArea::new(Some(parent.path().to_path_buf()));
    let limits = spilling(parent.path(), 25_000).with_spill_area(area.clone());
    let (a, b) = (OutputStore::new(limits.clone()), OutputStore::new(limits));
    let first = a
        .limit(ToolOutput::text("a".repeat(10_000)))
        .handle
        .unwrap();
    a.limit(ToolOutput::text("a".repeat(10_000)))
        .handle
        .unwrap();
    // b finds no room of its own to free: its output is not kept, a's stay.
    let refused = b.limit(ToolOutput::text("b".repeat(10_000)));
    assert_eq!(refused.handle, None);
    assert!(
        refused
            .output
            .to_model_text()
            .contains("this process's spilled outputs"),
        "{}",
        refused.output.to_model_text()
    );
    assert!(a.read(&first, 0, 1).is_ok());
    assert_eq!(area.bytes(), 20_000);
    // Once a is gone, b has room.
    drop(a);
    assert_eq!(area.bytes(), 0);
    assert!(area.dir().is_none(), "an empty area has no directory");
    assert!(
        b.limit(ToolOutput::text("b".repeat(10_000)))
            .handle
            .is_some()
    );
    assert_eq!(area.bytes(), 10_000);
}

#[test]
fn a_directory_whose_lock_is_free_is_swept_and_a_held_one_is_not() {
    let parent = tempfile::tempdir().unwrap();
    let root = spill_root(parent.path());
    // One left by a killed process (its lock file free), one of a live one (held).
    let leave = |name: &str| {
        fs::create_dir_all(root.join(name)).unwrap();
        fs::write(root.join(name).join("0-out_0"), "x".repeat(1000)).unwrap();
        File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(root.join(format!("{name}.lock")))
            .unwrap()
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::create_dir(&root).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o700)).unwrap();
    }
    drop(leave("1-100-0"));
    let live = leave("2-200-0");
    live.lock().unwrap();

    let store = OutputStore::new(spilling(parent.path(), 1 << 20));
    let handle = store
        .limit(ToolOutput::text("y".repeat(10_000)))
        .handle
        .unwrap();
    assert!(
        !root.join("1-100-0").exists(),
        "the dead owner's directory is swept"
    );
    assert!(!root.join("1-100-0.lock").exists());
    assert!(
        root.join("2-200-0").join("0-out_0").exists(),
        "a live one stays"
    );
    let own = store.spill_dir().unwrap();
    assert!(own.starts_with(&root));
    assert!(own.with_extension("lock").exists(), "its own lock file");
    assert_eq!(store.read(&handle, 0, 2).unwrap().text, "yy");
    drop(store);
    assert!(!own.exists());
    assert!(root.join("2-200-0").exists());
}

#[test]
fn an_error_of_huge_names_is_cut_to_the_limit_too() {
    let store = store();
    let name = "n".repeat(1_000_000);
    // A model's or a client's unknown tool: nothing but a name to cut.
    let limited = store.limit_error(ToolError::unknown_tool(name.clone(), vec![name.clone()]));
    let text = crate::error_chain(&limited.error);
    assert!(text.len() <= MAX, "{} B", text.len());
    assert!(
        text.starts_with(&format!("unknown tool `{}…`", "n".repeat(128))),
        "{text}"
    );
    assert_eq!(
        (limited.shown_bytes, limited.full_bytes),
        (text.len() as u64, 2_000_000 + 33)
    );
    // A timeout of a tool a server listed under a huge name.
    let limited = store.limit_error(ToolError::Timeout {
        server: Some(name.clone()),
        tool: name.clone(),
        after: std::time::Duration::from_secs(1),
    });
    assert!(crate::error_chain(&limited.error).len() <= MAX);
    assert!(limited.full_bytes > 2_000_000);

    // Huge names and a huge text: the names are cut, the text too, its whole kept.
    let limited = store.limit_error(ToolError::Invocation {
        server: Some(name.clone()),
        tool: name.clone(),
        message: "m".repeat(100_000),
    });
    let text = crate::error_chain(&limited.error);
    assert!(text.len() <= MAX, "{} B", text.len());
    assert!(
        text.contains(&"m".repeat(1000)),
        "the text keeps the room the names leave"
    );
    let handle = limited.handle.unwrap();
    assert_eq!(store.read(&handle, 99_998, 10).unwrap().text, "mm");
}

#[test]
fn a_transport_cause_naming_its_server_again_is_cut_to_the_limit() {
    #[derive(Debug)]
    struct Cause(String);
    impl std::fmt::Display for Cause {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }
    impl std::error::Error for Cause {}
    let store = store();
    let server = "s".repeat(120);
    // The chain drops the cause's `server `…`: ` prefix, which the cut text then lacks.
    let cause = format!("server `{server}`: {}", "c".repeat(50_000));
    let limited = store.limit_error(ToolError::Transport {
        server: Some(server),
        tool: "t".repeat(120),
        source: Box::new(Cause(cause)),
    });
    let text = crate::error_chain(&limited.error);
    assert!(text.len() <= MAX, "{} B", text.len());
    assert!(limited.handle.is_some());
}

#[test]
fn a_run_keeps_its_spilled_outputs_when_dropping_them_would_not_make_room() {
    let parent = tempfile::tempdir().unwrap();
    let area = SpillArea::new(Some(parent.path().to_path_buf()));
    let limits = spilling(parent.path(), 25_000).with_spill_area(area.clone());
    let (a, b) = (OutputStore::new(limits.clone()), OutputStore::new(limits));
    let kept = b.limit(ToolOutput::text("b".repeat(5_000))).handle.unwrap();
    a.limit(ToolOutput::text("a".repeat(10_000)))
        .handle
        .unwrap();
    a.limit(ToolOutput::text("a".repeat(8_000))).handle.unwrap();
    // 23 000 bytes held; b's 5 000 freed would leave 18 000, too little for 10 000 more.
    let refused = b.limit(ToolOutput::text("b".repeat(10_000)));
    assert_eq!(refused.handle, None);
    assert_eq!(b.read(&kept, 0, 2).unwrap().text, "bb", "b's output stays");
    assert_eq!(area.bytes(), 23_000);
}
