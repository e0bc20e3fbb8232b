//! The adapter's own cost per streamed chunk: SSE decoding, JSON parsing and assembling, on a
//! stream of text deltas and on one of two interleaved tool calls' argument fragments, fed in
//! network-sized pieces that cut events anywhere.
//!
//! ```text
//! cargo bench -p agent-model-openai --bench stream
//! ```
//!
//! Criterion reports the time per chunk (throughput in elements).

use std::hint::black_box;

use agent_model_openai::{Limits, StreamDecoder, StreamDelta};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;

const CHUNKS: usize = 1_000;

/// A stream's body: `CHUNKS` events made by `event`, then a finish reason and `[DONE]`.
fn body(event: impl Fn(usize) -> serde_json::Value) -> Vec<u8> {
    let mut text = String::new();
    for i in 0..CHUNKS {
        text.push_str(&format!("data: {}\n\n", event(i)));
    }
    let end = json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    text.push_str(&format!("data: {end}\n\ndata: [DONE]\n\n"));
    text.into_bytes()
}

fn decode(body: &[u8]) -> usize {
    let mut decoder = StreamDecoder::new(Limits::default());
    let mut deltas = 0usize;
    let mut sink = |d: StreamDelta<'_>| {
        black_box(d);
        deltas += 1;
    };
    // Pieces of 1,371 bytes: a typical TLS record's worth, never aligned with events.
    for piece in body.chunks(1371) {
        decoder.feed(piece, &mut sink).unwrap();
    }
    let response = decoder.finish(&mut sink).unwrap();
    black_box(response);
    deltas
}

fn stream(c: &mut Criterion) {
    let text = body(|i| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": {"content": format!(" word{i}")}, "finish_reason": null}]})
    });
    let tools = body(|i| {
        let call = i % 2;
        let mut fragment = json!({"index": call, "function": {"arguments": "{\\\"k\\\": 12, "}});
        if i < 2 {
            fragment["id"] = format!("call_{call}").into();
            fragment["function"]["name"] = "weather".into();
            fragment["function"]["arguments"] = "{\"a\": [".into();
        }
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": {"tool_calls": [fragment]}, "finish_reason": null}]})
    });

    let mut group = c.benchmark_group("model_stream");
    group.throughput(Throughput::Elements(CHUNKS as u64));
    group.bench_function("text_chunks", |b| b.iter(|| decode(black_box(&text))));
    group.bench_function("tool_call_fragments", |b| {
        b.iter(|| decode(black_box(&tools)))
    });
    group.finish();
}

criterion_group!(benches, stream);
criterion_main!(benches);
