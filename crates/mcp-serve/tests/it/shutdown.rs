//! Graceful shutdown: stop accepting, let the call in flight finish and its answer go out,
//! refuse new calls, then stop — and cut off what outlives the drain timeout.

use std::sync::Arc;
use std::time::Duration;

use mcp_serve::{Exposure, HttpOptions, ServeState, ToolServer};
use serde_json::json;

use crate::support::{
    Tools, bounded, call_through, in_memory, mcp_client_http, rmcp_call, serve_http, text_of,
};

async fn reach(state: &mut tokio::sync::watch::Receiver<ServeState>, wanted: ServeState) {
    bounded(
        &format!("state {wanted:?}"),
        state.wait_for(|s| *s == wanted),
    )
    .await
    .expect("the server's state");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_shutdown_drains_the_call_in_flight_then_stops() {
    let tools = Arc::new(Tools::default());
    let mut started = tools.on_gate();
    let options = HttpOptions::default().with_drain_timeout(Duration::from_secs(60));
    let server = serve_http(&tools, Exposure::only(["gate", "mapping"]), options).await;
    let addr = server.local_addr();
    let mut state = server.state();
    let runner = Arc::new(mcp_client_http(server.url(), None).await);

    let in_flight = tokio::spawn({
        let runner = Arc::clone(&runner);
        async move { call_through(&runner, "gate", json!({})).await }
    });
    bounded("the call runs", started.recv()).await.unwrap();

    let shutdown = tokio::spawn(server.shutdown());
    reach(&mut state, ServeState::Draining).await;
    // No new connection is accepted…
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "the listener is closed while draining"
    );
    // …but the call in flight holds the shutdown open.
    assert!(!shutdown.is_finished());
    assert_eq!(*state.borrow(), ServeState::Draining);

    tools.open_gate();
    let result = bounded("the drained call", in_flight)
        .await
        .unwrap()
        .expect("the call in flight is answered");
    assert_eq!(result.structured, Some(json!({"gate": "passed"})));

    let report = bounded("the shutdown", shutdown).await.unwrap();
    assert_eq!(report.in_flight, 1);
    assert_eq!(report.abandoned, 0);
    assert_eq!(*state.borrow(), ServeState::Stopped);
    agent_core::Runner::close(&*runner).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_shutdown_refuses_new_calls_and_drains() {
    let tools = Arc::new(Tools::default());
    let mut started = tools.on_gate();
    let server = ToolServer::new(tools.clone(), Exposure::only(["gate", "mapping"]));
    let (client, session) = in_memory(server).await;
    let client = Arc::new(client);
    let mut state = session.state();

    let in_flight = tokio::spawn({
        let client = client.clone();
        async move { rmcp_call(&client, "gate", json!({})).await }
    });
    bounded("the call runs", started.recv()).await.unwrap();
    let shutdown = tokio::spawn(session.shutdown(Duration::from_secs(60)));
    reach(&mut state, ServeState::Draining).await;

    let refused = rmcp_call(&client, "mapping", json!({})).await.unwrap();
    assert_eq!(refused.is_error, Some(true));
    assert_eq!(
        text_of(&refused),
        "the server is shutting down; `mapping` was not run"
    );
    assert!(!shutdown.is_finished());

    tools.open_gate();
    let drained = bounded("the drained call", in_flight)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(drained.structured_content, Some(json!({"gate": "passed"})));
    let report = bounded("the shutdown", shutdown).await.unwrap();
    assert_eq!(report.in_flight, 1);
    assert_eq!(report.abandoned, 0);
    assert_eq!(*state.borrow(), ServeState::Stopped);
    assert_eq!(tools.calls(), 1, "the refused call never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_outliving_the_drain_timeout_is_cut_off() {
    let tools = Arc::new(Tools::default());
    let mut started = tools.on_gate();
    let (client, session) = in_memory(ToolServer::new(tools, Exposure::only(["gate"]))).await;
    let client = Arc::new(client);
    let in_flight = tokio::spawn({
        let client = client.clone();
        async move { rmcp_call(&client, "gate", json!({})).await }
    });
    bounded("the call runs", started.recv()).await.unwrap();
    let report = bounded("the shutdown", session.shutdown(Duration::from_millis(50))).await;
    assert_eq!(report.in_flight, 1);
    assert_eq!(report.abandoned, 1);
    assert!(
        bounded("the cut-off call", in_flight)
            .await
            .unwrap()
            .is_err(),
        "the client learns that its call was cut off"
    );
}
