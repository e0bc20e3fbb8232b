//! A server's tool listing, page by page, on the client alone (in memory): an empty
//! `nextCursor` ends the list, and the bounds are the client's.

use std::time::Duration;

use agent_core::RunInput;
use mcp_client::{ClientError, ListLimit, ListLimits, McpClient, SessionError};
use mcp_config::Config;
use mcp_connector::Connectors;
use mcp_connector::testing::{InMemoryConnector, spec};
use mcp_test_kit::hostile::{CALLABLE, HostileOptions, HostileServer, Pages};
use mcp_test_kit::serve_handler_in_memory;

async fn open(
    server: HostileServer,
    limits: ListLimits,
) -> Result<mcp_client::McpRunner, ClientError> {
    let memory = InMemoryConnector::new().server("h", move || {
        serve_handler_in_memory(server.clone(), Default::default())
    });
    let client = McpClient::builder(Config::new(vec![spec("h")]).expect("a valid spec"))
        .connectors(Connectors::new().with(memory))
        .list_limits(limits)
        .build();
    let input = RunInput::new("s", "i");
    let opening = client.open_runner(&input);
    tokio::time::timeout(Duration::from_secs(30), opening)
        .await
        .expect("the listing ends")
}

#[tokio::test]
async fn an_empty_next_cursor_ends_the_list() {
    let server = HostileServer::new(HostileOptions::new(Pages::EmptyCursor));
    let requests = server.list_requests();
    let runner = open(server, ListLimits::default())
        .await
        .expect("the run opens");
    assert_eq!(runner.catalog().len(), CALLABLE.len());
    assert_eq!(requests.get(), 1);
    agent_core::Runner::close(&runner).await;
}

#[tokio::test]
async fn a_tool_limit_of_the_clients_choice_stops_the_first_page() {
    let server = HostileServer::new(HostileOptions::new(Pages::EmptyCursor));
    let err = open(server, ListLimits::default().with_max_tools(2))
        .await
        .expect_err("three tools are too many");
    let ClientError::Server(SessionError::ListLimit { server, limit }) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(
        (server.as_str(), limit),
        ("h", &ListLimit::Tools { limit: 2 })
    );
    assert_eq!(
        err.to_string(),
        "server `h`: tools/list stopped: more than 2 tools (the tool limit)"
    );
}
