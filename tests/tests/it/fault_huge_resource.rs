//! A server whose resource is 1 GiB: `resources/read` fails promptly with an error naming the
//! server and the message limit, the 1 GiB is never held (the server writes it as it makes it,
//! the transport stops reading at its 16 MiB bound), and the other servers of the run go on.

use std::time::{Duration, Instant};

use integration_tests::harness::{Harness, bounded, call_tool, chain, stdio_server};
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use serde_json::json;

/// The resource's size.
const GIB: usize = 1 << 30;

/// The process's peak resident memory (`VmHWM`), in bytes.
fn peak_rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .expect("VmHWM in /proc/self/status");
    line.trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<usize>()
        .unwrap()
        * 1024
}

#[tokio::test]
async fn a_1_gib_resource_is_refused_at_the_bound_with_memory_bounded() {
    let harness = Harness::new();
    let client = harness.client(vec![
        stdio_server(
            "big",
            &StdioServerArgs::new(Mode::HugeResource).with_message_bytes(GIB),
        ),
        stdio_server("steady", &StdioServerArgs::new(Mode::Test)),
    ]);
    let runner = bounded(client.open_runner(&harness.input())).await.unwrap();
    let listed = bounded(runner.list_resources("big")).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");

    let started = Instant::now();
    let error = bounded(runner.read_resource("big", "test://gigabyte"))
        .await
        .unwrap_err();
    let took = started.elapsed();
    let text = chain(&error);
    assert!(text.contains("`big`"), "names the server: {text}");
    assert!(text.contains("16 MiB"), "names the limit: {text}");
    assert!(took < Duration::from_secs(30), "failed after {took:?}");
    // Under a quarter of the resource at the peak, all of this process's tests included.
    let peak = peak_rss();
    assert!(peak < GIB / 4, "peak RSS {} MiB", peak >> 20);

    let echoed = call_tool(&runner, "steady__echo", json!({"n": 1}))
        .await
        .unwrap();
    assert_eq!(echoed.structured, Some(json!({"n": 1})));
}
