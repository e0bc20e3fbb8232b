use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

use tokio::io::AsyncReadExt as _;

use super::*;
use crate::limits::{Guarded, Violation};

/// Hands out the given chunks, one per read (split further when the reader's buffer is short).
struct Chunks(VecDeque<Vec<u8>>);

impl Chunks {
    fn new<C: AsRef<[u8]>>(chunks: &[C]) -> Self {
        Self(chunks.iter().map(|c| c.as_ref().to_vec()).collect())
    }
}

impl AsyncRead for Chunks {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if let Some(mut chunk) = this.0.pop_front() {
            let n = chunk.len().min(out.remaining());
            out.put_slice(&chunk[..n]);
            if n < chunk.len() {
                this.0.push_front(chunk.split_off(n));
            }
        }
        Poll::Ready(Ok(()))
    }
}

async fn filtered<C: AsRef<[u8]>>(chunks: &[C]) -> Vec<u8> {
    let mut reader = JsonRpcLines::new(Chunks::new(chunks), "s".into(), None);
    let mut out = Vec::new();
    reader.read_to_end(&mut out).await.unwrap();
    out
}

const MESSAGE: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";

#[tokio::test]
async fn a_message_line_passes_unchanged_and_noise_is_dropped() {
    let mut input = Vec::new();
    input.extend_from_slice(b"{\"log\": \"starting\"}\n");
    input.extend_from_slice(MESSAGE);
    input.extend_from_slice(b"plain text, not JSON\n\n");
    input.extend_from_slice(b"{\"id\":2,\"jsonrpc\":\"2.0\",\"method\":\"ping\"}\n");
    input.extend_from_slice(b"{\"jsonrpc_version\": 2}\n");
    let mut expected = MESSAGE.to_vec();
    expected.extend_from_slice(b"{\"id\":2,\"jsonrpc\":\"2.0\",\"method\":\"ping\"}\n");
    assert_eq!(filtered(&[&input]).await, expected);
}

#[tokio::test]
async fn lines_split_across_reads_at_every_byte_give_the_same_result() {
    let mut input = b"{\"log\": 1}\n".to_vec();
    input.extend_from_slice(MESSAGE);
    input.extend_from_slice(b"noise without a marker\n");
    input.extend_from_slice(MESSAGE);
    for size in 1..=input.len() {
        let chunks: Vec<&[u8]> = input.chunks(size).collect();
        let mut expected = MESSAGE.to_vec();
        expected.extend_from_slice(MESSAGE);
        assert_eq!(filtered(&chunks).await, expected, "reads of {size} bytes");
    }
}

#[tokio::test]
async fn the_marker_split_between_reads_is_found() {
    let chunks: [&[u8]; 4] = [
        b"{\"json",
        b"rpc\":\"2.0\",\"id\":1}",
        b"\n{\"lo",
        b"g\":1}\n",
    ];
    assert_eq!(
        filtered(&chunks).await,
        b"{\"jsonrpc\":\"2.0\",\"id\":1}\n".to_vec()
    );
}

#[tokio::test]
async fn crlf_lines_pass_or_drop_whole() {
    let input: &[u8] = b"{\"log\":1}\r\n{\"jsonrpc\":\"2.0\",\"id\":1}\r\nnoise\r\n";
    assert_eq!(
        filtered(&[input]).await,
        b"{\"jsonrpc\":\"2.0\",\"id\":1}\r\n".to_vec()
    );
}

#[tokio::test]
async fn lines_of_exactly_the_bound_pass_the_guard_and_are_sorted() {
    const LIMIT: usize = 64;
    let padded = |prefix: &[u8]| {
        let mut line = prefix.to_vec();
        line.resize(LIMIT - 1, b' ');
        line.push(b'}');
        assert_eq!(line.len(), LIMIT);
        line.push(b'\n');
        line
    };
    let message = padded(b"{\"jsonrpc\":\"2.0\",\"id\":1");
    let noise = padded(b"{\"log\":\"x\"");
    let input = [noise.clone(), message.clone(), noise].concat();
    let violation = Arc::new(OnceLock::new());
    let guarded = Guarded::new(
        Chunks::new(&input.chunks(7).collect::<Vec<_>>()),
        LIMIT,
        8,
        violation.clone(),
        "s".into(),
    );
    let mut reader = JsonRpcLines::new(guarded, "s".into(), None);
    let mut out = Vec::new();
    reader.read_to_end(&mut out).await.unwrap();
    assert_eq!(out, message);
    assert_eq!(violation.get(), None);

    // One byte more is still the guard's violation: the line before it passes, then the end.
    let mut long = padded(b"{\"jsonrpc\":\"2.0\",\"id\":2");
    long.insert(1, b' ');
    let input = [message.clone(), long].concat();
    let violation = Arc::new(OnceLock::new());
    let guarded = Guarded::new(
        Chunks::new(&[input]),
        LIMIT,
        8,
        violation.clone(),
        "s".into(),
    );
    let mut reader = JsonRpcLines::new(guarded, "s".into(), None);
    let mut out = Vec::new();
    reader.read_to_end(&mut out).await.unwrap();
    assert_eq!(out, message);
    assert_eq!(violation.get(), Some(&Violation::TooLarge { limit: LIMIT }));
}

#[tokio::test]
async fn a_partial_line_at_the_end_passes_only_if_it_is_a_message() {
    let noise_tail: [&[u8]; 2] = [MESSAGE, b"{\"log\": \"cut off"];
    assert_eq!(filtered(&noise_tail).await, MESSAGE.to_vec());
    let message_tail: [&[u8]; 2] = [MESSAGE, b"{\"jsonrpc\":\"2.0\",\"id\""];
    assert_eq!(
        filtered(&message_tail).await,
        [MESSAGE, b"{\"jsonrpc\":\"2.0\",\"id\""].concat()
    );
}

#[tokio::test]
async fn short_reads_of_the_output_lose_nothing() {
    let input = [b"{\"log\":1}\n".as_slice(), MESSAGE, MESSAGE].concat();
    let mut reader = JsonRpcLines::new(Chunks::new(&[input]), "s".into(), None);
    let mut out = Vec::new();
    let mut small = [0u8; 3];
    loop {
        let n = reader.read(&mut small).await.unwrap();
        if n == 0 {
            break;
        }
        out.extend_from_slice(&small[..n]);
    }
    assert_eq!(out, [MESSAGE, MESSAGE].concat());
}

#[tokio::test]
async fn a_long_message_streams_through_without_being_held_whole() {
    let mut message = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"".to_vec();
    message.resize(4 << 20, b'a');
    message.extend_from_slice(b"\"}\n");
    let mut reader = JsonRpcLines::new(Chunks::new(&[&message]), "s".into(), None);
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 16 << 10];
    loop {
        let n = reader.read(&mut chunk).await.unwrap();
        assert!(
            reader.buf.len() <= MAX_READ,
            "held {} bytes",
            reader.buf.len()
        );
        if n == 0 {
            break;
        }
        out.extend_from_slice(&chunk[..n]);
    }
    assert_eq!(out, message);
}

#[test]
fn the_excerpt_is_short_and_free_of_control_characters() {
    let line = format!("{{\"log\": \"\u{1b}[31mred\u{7}\r\n{}", "x".repeat(1000));
    let text = excerpt(line.as_bytes());
    assert!(text.starts_with("{\"log\": \"[31mred"), "{text}");
    assert_eq!(text.chars().count(), EXCERPT_CHARS);
    assert!(!text.chars().any(char::is_control));
}

/// A log writer into a shared buffer.
#[derive(Clone, Default)]
struct Log(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Log {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_dropped_line_is_logged_at_debug_with_the_server_and_an_excerpt() {
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let noise = format!("{{\"log\": \"boot\u{1b}[2J {}\"}}\n", "y".repeat(500));
    let input = [noise.as_bytes(), MESSAGE].concat();
    let out = tracing::subscriber::with_default(subscriber, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut reader = JsonRpcLines::new(Chunks::new(&[input]), "loud".into(), None);
            let mut out = Vec::new();
            reader.read_to_end(&mut out).await.unwrap();
            out
        })
    });
    assert_eq!(out, MESSAGE);
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("DEBUG"), "{text}");
    assert!(text.contains("server=loud"), "{text}");
    assert!(text.contains("not a JSON-RPC message"), "{text}");
    assert!(text.contains("boot[2J yyy"), "{text}");
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(
        !text.contains(&"y".repeat(100)),
        "the whole line was logged: {text}"
    );
}
