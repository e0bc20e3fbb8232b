//! The content the test server's tools answer with: large text, one block of each content
//! type, and the encodings they need.

use rmcp::model::{ContentBlock, Resource, ResourceContents};

pub(super) fn huge_text(bytes: usize) -> String {
    const LINE: &str = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_\n";
    let mut text = LINE.repeat(bytes / LINE.len() + 1);
    text.truncate(bytes);
    text
}

/// `unit` repeated up to `bytes` bytes, cut at a character boundary.
pub(super) fn repeated(unit: &str, bytes: usize) -> String {
    let mut text = unit.repeat(bytes / unit.len().max(1) + 1);
    let mut end = bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text
}

/// A 1×1 transparent PNG.
pub(super) const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

pub(super) fn content_blocks() -> Vec<ContentBlock> {
    vec![
        ContentBlock::text("one block of each content type follows"),
        ContentBlock::image(PNG_1X1, "image/png"),
        ContentBlock::audio(base64(&silent_wav()), "audio/wav"),
        ContentBlock::resource(ResourceContents::text(
            "embedded resource text",
            "test://resources/embedded.txt",
        )),
        ContentBlock::resource_link(
            Resource::new("test://resources/linked.txt", "linked.txt")
                .with_mime_type("text/plain")
                .with_description("A resource the result links to"),
        ),
    ]
}

/// A WAV file of eight silent 8-bit mono samples at 8 kHz.
pub(super) fn silent_wav() -> Vec<u8> {
    let samples = [128u8; 8];
    let data_len = u32::try_from(samples.len()).unwrap_or(0);
    let mut wav = Vec::with_capacity(44 + samples.len());
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + data_len).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // mono
    wav.extend_from_slice(&8_000u32.to_le_bytes()); // sample rate
    wav.extend_from_slice(&8_000u32.to_le_bytes()); // byte rate
    wav.extend_from_slice(&1u16.to_le_bytes()); // block align
    wav.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&data_len.to_le_bytes());
    wav.extend_from_slice(&samples);
    wav
}

/// Standard base64 with padding.
pub(super) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> shift & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}
