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
    assert_eq!(
        fs::metadata(dir.join(&handle)).unwrap().len(),
        size as u64,
        "the full text is in the file"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700, "the spill directory is the owner's only");
        assert_eq!(
            mode(&dir.join(&handle)),
            0o600,
            "a spilled output is the owner's only"
        );
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

#[test]
fn the_meta_tool_checks_its_arguments_and_says_where_to_go_on() {
    let store = store();
    let handle = store
        .limit(ToolOutput::text("r".repeat(3 * MAX)))
        .handle
        .unwrap();
    let args = |v: Value| v.as_object().unwrap().clone();
    let out = store
        .read_call(&args(json!({"handle": handle, "offset": 10, "length": 5})))
        .unwrap();
    assert_eq!(
        out.to_model_text(),
        format!(
            "rrrrr\n[bytes 10..15 of {} of output `{handle}`; continue at offset 15]",
            3 * MAX
        )
    );
    let out = store
        .read_call(&args(json!({"handle": handle, "offset": 3 * MAX - 2})))
        .unwrap();
    assert!(out.to_model_text().ends_with("; end of output]"));
    // A read never returns more than the model may see.
    let out = store
        .read_call(&args(json!({"handle": handle, "length": 10 * MAX})))
        .unwrap();
    assert!(out.to_model_text().len() <= MAX);

    for (bad, says) in [
        (json!({}), "`/handle` is required"),
        (json!({"handle": 3}), "`/handle`: 3 is not a string"),
        (json!({"handle": handle, "offset": -1}), "`/offset`"),
        (json!({"handle": handle, "length": "x"}), "`/length`"),
        (
            json!({"handle": handle, "extra": 1}),
            "unknown argument `extra`",
        ),
        (
            json!({"handle": "out_77"}),
            "unknown output handle `out_77`",
        ),
    ] {
        let err = store.read_call(&args(bad.clone())).unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments { .. }), "{bad}");
        assert!(err.to_string().contains(says), "{bad}: {err}");
        assert!(err.to_string().contains(READ_OUTPUT_TOOL), "{err}");
    }
    let schema = store.descriptor().input_schema;
    assert_eq!(schema["required"], json!(["handle"]));
}
