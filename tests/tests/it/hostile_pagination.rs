//! Endless pagination: a server that repeats its `nextCursor`, cycles between two
//! cursors, or returns ever-new pages must not keep the client listing until the connect
//! timeout. The client stops at the first page that breaks a bound, with an error naming the
//! server and the limit.

use crate::in_memory;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::RunInput;
use in_memory::{InMemory, builder, spec};
use integration_tests::harness::{Events, Harness, bounded, chain};
use mcp_client::{ClientError, ListLimit, ListLimits, McpRunner, SessionError};
use mcp_config::{HttpSpec, ServerSpec, TransportSpec};
use mcp_test_kit::hostile::{HostileOptions, HostileServer, Pages};
use mcp_test_kit::{TestServer, TestServerOptions};

/// Far longer than any bound takes to hit: a test that waits for it has failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);

async fn open(server: &HostileServer, limits: ListLimits) -> Result<McpRunner, ClientError> {
    let client = builder(
        vec![spec("hostile", &[], CONNECT_TIMEOUT)],
        InMemory::new(server.clone()),
        Arc::new(Events::default()),
    )
    .list_limits(limits)
    .build();
    bounded(client.open_runner(&RunInput::new("s", "q"))).await
}

/// Opens `pages` with `limits` and returns the bound it broke, with the error's text.
async fn broken_bound(pages: Pages, limits: ListLimits) -> (ListLimit, String, u64) {
    let server = HostileServer::new(HostileOptions::new(pages));
    let err = open(&server, limits)
        .await
        .expect_err("the listing must stop");
    let text = chain(&err);
    let ClientError::Server(SessionError::ListLimit {
        server: name,
        limit,
    }) = err
    else {
        panic!("not a list limit: {text}");
    };
    assert_eq!(name, "hostile");
    assert!(
        text.contains("server `hostile`: tools/list stopped"),
        "{text}"
    );
    (limit, text, server.list_requests().get())
}

#[tokio::test]
async fn a_repeated_cursor_stops_the_listing_at_the_second_page() {
    let (limit, text, requests) = broken_bound(Pages::RepeatCursor, ListLimits::default()).await;
    assert_eq!(limit, ListLimit::RepeatedCursor { page: 2 });
    assert!(text.contains("page 2 repeats an earlier cursor"), "{text}");
    assert_eq!(requests, 2);
}

#[tokio::test]
async fn a_two_cursor_cycle_stops_the_listing_when_it_comes_round() {
    let (limit, _, requests) = broken_bound(Pages::CursorCycle, ListLimits::default()).await;
    assert_eq!(limit, ListLimit::RepeatedCursor { page: 3 });
    assert_eq!(requests, 3);
}

#[tokio::test]
async fn ever_new_pages_of_2000_tools_stop_at_the_tool_limit() {
    let pages = Pages::Endless {
        tools_per_page: 2_000,
    };
    let (limit, text, requests) = broken_bound(pages, ListLimits::default()).await;
    assert_eq!(limit, ListLimit::Tools { limit: 10_000 });
    assert!(
        text.contains("more than 10000 tools (the tool limit)"),
        "{text}"
    );
    // 3 + 2,000 tools on the first page: the fifth would pass 10,000.
    assert_eq!(requests, 5);
}

#[tokio::test]
async fn ever_new_small_pages_stop_at_the_page_limit() {
    let pages = Pages::Endless { tools_per_page: 1 };
    let (limit, text, requests) = broken_bound(pages, ListLimits::default()).await;
    assert_eq!(limit, ListLimit::Pages { limit: 100 });
    assert!(
        text.contains("more than 100 pages (the page limit)"),
        "{text}"
    );
    assert_eq!(requests, 100);
}

#[tokio::test]
async fn large_pages_stop_at_the_byte_limit() {
    let pages = Pages::Endless {
        tools_per_page: 2_000,
    };
    let limits = ListLimits::default().with_max_bytes(64 * 1024);
    let (limit, text, requests) = broken_bound(pages, limits).await;
    assert_eq!(limit, ListLimit::Bytes { limit: 64 * 1024 });
    assert!(
        text.contains("more than 65536 bytes of tool definitions"),
        "{text}"
    );
    assert_eq!(requests, 1);
}

#[tokio::test]
async fn an_honest_paginated_server_lists_whole_and_the_limits_are_the_clients_choice() {
    let paginated = TestServer::new(
        TestServerOptions::default()
            .with_extra_tools(1_000)
            .with_page_size(100),
    );
    let client = |limits: ListLimits| {
        builder(
            vec![spec("kit", &[], CONNECT_TIMEOUT)],
            InMemory::new(paginated.clone()),
            Arc::new(Events::default()),
        )
        .list_limits(limits)
        .build()
    };
    let input = RunInput::new("s", "q");
    let runner = bounded(client(ListLimits::default()).open_runner(&input))
        .await
        .expect("11 pages are within the default bounds");
    assert!(runner.catalog().len() > 1_000);
    agent_core::Runner::close(&runner).await;

    let err = bounded(client(ListLimits::default().with_max_pages(5)).open_runner(&input))
        .await
        .expect_err("5 pages are too few");
    assert!(
        matches!(
            err,
            ClientError::Server(SessionError::ListLimit {
                limit: ListLimit::Pages { limit: 5 },
                ..
            })
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn over_http_a_cursor_cycle_stops_the_listing_too() {
    let server = HostileServer::new(HostileOptions::new(Pages::CursorCycle));
    let factory = server.clone();
    let http = mcp_test_kit::serve_handler_http(move || factory.clone())
        .await
        .expect("an HTTP server");
    let harness = Harness::new();
    let spec = ServerSpec::new(
        "hostile",
        TransportSpec::StreamableHttp(HttpSpec::new(http.url().parse().unwrap())),
    );
    let err = bounded(harness.client(vec![spec]).open_runner(&harness.input()))
        .await
        .expect_err("the listing must stop");
    assert!(
        matches!(
            err,
            ClientError::Server(SessionError::ListLimit {
                limit: ListLimit::RepeatedCursor { page: 3 },
                ..
            })
        ),
        "{err:?}"
    );
    assert_eq!(server.list_requests().get(), 3);
    http.shutdown().await;
}

/// Resident and peak memory of this process, in KiB (`VmRSS`, `VmHWM`).
fn memory_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The figures of the issue: requests sent and memory grown under each endless listing, until
/// the client gives up or a 10 s connect timeout expires. Run by hand:
/// `cargo nextest run -p integration-tests --test it --run-ignored only --no-capture hostile_pagination::`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn measure_endless_listings() {
    let window = Duration::from_secs(10);
    for pages in [
        Pages::RepeatCursor,
        Pages::CursorCycle,
        Pages::Endless {
            tools_per_page: 2_000,
        },
    ] {
        let label = format!("{pages:?}");
        let server = HostileServer::new(HostileOptions::new(pages));
        let client = builder(
            vec![spec("hostile", &[], window)],
            InMemory::new(server.clone()),
            Arc::new(Events::default()),
        )
        .build();
        let (rss_before, _) = memory_kib();
        let started = Instant::now();
        let outcome = bounded(client.open_runner(&RunInput::new("s", "q"))).await;
        let took = started.elapsed();
        let (rss_after, peak) = memory_kib();
        let message = match &outcome {
            Ok(_) => "opened".to_owned(),
            Err(e) => chain(e),
        };
        println!(
            "{label}: {} tools/list requests in {:.2} s; RSS {} -> {} MiB (peak {} MiB); {message}",
            server.list_requests().get(),
            took.as_secs_f64(),
            rss_before / 1024,
            rss_after / 1024,
            peak / 1024,
        );
    }
}
