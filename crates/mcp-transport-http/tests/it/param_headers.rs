//! `Mcp-Param-*` headers (MCP 2026-07-28) reach a server that checks them on every call,
//! whichever path the tool list came back on.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use http::{HeaderName, HeaderValue, StatusCode};

use http_body_util::Full;
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientJsonRpcMessage, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    ServerJsonRpcMessage, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_client::{StreamableHttpClient, StreamableHttpPostResponse};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ClientLifecycleMode, ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::common::{Handler, bounded, respond, serve};

/// Listings, each followed by a call.
const ROUNDS: usize = 8;

/// A server with one tool, `route`, whose `region` argument declares `x-mcp-header`; rmcp
/// checks the `Mcp-Param-Region` header of every 2026-07-28 call against it.
#[derive(Debug, Clone, Copy)]
struct Routed;

fn route() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": { "region": { "type": "string", "x-mcp-header": "Region" } },
        "required": ["region"],
    });
    Tool::new(
        "route",
        "Echoes its arguments.",
        schema.as_object().unwrap().clone(),
    )
}

impl ServerHandler for Routed {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        (name == "route").then(route)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![route()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        Ok(CallToolResult::structured(arguments).into())
    }
}

/// Lists the tools, then calls `route`, several times over one client, against rmcp's own
/// server, which refuses a header that is missing, duplicated or different: whether rmcp's
/// worker or the transport's record supplies the header, each call carries it exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_after_a_listing_carries_its_param_headers_once() {
    bounded(async {
        let config = StreamableHttpServerConfig::default().with_sse_keep_alive(None);
        let service = Arc::new(StreamableHttpService::new(
            || Ok(Routed),
            Arc::new(LocalSessionManager::default()),
            config,
        ));
        let handler: Handler = Arc::new(move |parts, body| {
            let service = service.clone();
            Box::pin(async move {
                service
                    .handle(http::Request::from_parts(parts, Full::new(body)))
                    .await
            })
        });
        let server = serve(handler).await;
        let connector = HttpConnector::new(HttpOptions::default()).unwrap();
        let connection = connector.connect(&server.spec("routed")).await.unwrap();
        let lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        let client = rmcp::serve_client_with_lifecycle((), connection.transport, lifecycle)
            .await
            .unwrap();
        for round in 0..ROUNDS {
            let tools = client.peer().list_all_tools().await.unwrap();
            assert_eq!(tools.len(), 1);
            let arguments = json!({ "region": format!(" région {round}") });
            let result = client
                .peer()
                .call_tool(
                    CallToolRequestParams::new("route")
                        .with_arguments(arguments.as_object().unwrap().clone()),
                )
                .await
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
            assert_eq!(result.structured_content, Some(arguments), "round {round}");
        }
        let sent: Vec<_> = server
            .seen()
            .into_iter()
            .filter(|seen| seen.rpc.as_deref() == Some("tools/call"))
            .map(|seen| seen.header("mcp-param-region").map(str::to_owned))
            .collect();
        assert_eq!(sent.len(), ROUNDS);
        assert!(
            sent.iter()
                .all(|h| h.as_deref().is_some_and(|h| h.starts_with("=?base64?")))
        );
        client.cancel().await.unwrap();
    })
    .await;
}

/// A scripted 2026-07-28 server: `tools/list` answered as SSE (or JSON) with `route`, and a
/// `tools/call` answered with the `Mcp-Param-Region` header it carried.
fn scripted(list_as_sse: bool) -> Handler {
    Arc::new(move |parts, body| {
        Box::pin(async move {
            let request: Value = serde_json::from_slice(&body).unwrap();
            let id = request["id"].clone();
            let result = match request["method"].as_str() {
                Some("tools/list") => json!({ "tools": [route()] }),
                _ => {
                    let header = parts.headers.get("mcp-param-region");
                    json!({ "header": header.map(|h| h.to_str().unwrap()) })
                }
            };
            let answer = json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string();
            if list_as_sse {
                respond(
                    StatusCode::OK,
                    "text/event-stream",
                    format!("data: {answer}\n\n"),
                )
            } else {
                respond(StatusCode::OK, "application/json", answer)
            }
        })
    })
}

fn message(value: Value) -> ClientJsonRpcMessage {
    serde_json::from_value(value).unwrap()
}

/// The `Mcp-Param-Region` header a call to `route` went out with, after a tool list the
/// transport carried but rmcp's worker never recorded (it is posted here directly, as the
/// worker does, and its answer read to the end).
async fn header_after_listing(list_as_sse: bool, version: &'static str) -> Option<String> {
    let server = serve(scripted(list_as_sse)).await;
    let connector = HttpConnector::new(HttpOptions::default()).unwrap();
    let client = connector.client(&server.spec("scripted")).unwrap();
    let uri: Arc<str> = Arc::from(server.url.as_str());
    let headers = || {
        HashMap::from([(
            HeaderName::from_static("mcp-protocol-version"),
            HeaderValue::from_static(version),
        )])
    };
    let list = message(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }));
    match client
        .post_message(uri.clone(), list, None, None, headers())
        .await
        .unwrap()
    {
        StreamableHttpPostResponse::Sse(mut events, _) => while events.next().await.is_some() {},
        StreamableHttpPostResponse::Json(..) => {}
        other => panic!("unexpected answer to tools/list: {other:?}"),
    }
    let call = message(json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "route", "arguments": { "region": "eu west" } },
    }));
    let answer = client
        .post_message(uri, call, None, None, headers())
        .await
        .unwrap();
    let answer = match answer {
        StreamableHttpPostResponse::Json(message, _) => message,
        StreamableHttpPostResponse::Sse(mut events, _) => {
            let event = events.next().await.unwrap().unwrap();
            serde_json::from_str(event.data.as_deref().unwrap()).unwrap()
        }
        other => panic!("unexpected answer to tools/call: {other:?}"),
    };
    let ServerJsonRpcMessage::Response(response) = answer else {
        panic!("unexpected answer to tools/call: {answer:?}");
    };
    let result = serde_json::to_value(&response.result).unwrap();
    result["header"].as_str().map(str::to_owned)
}

#[tokio::test]
async fn a_call_gets_the_headers_of_a_listing_rmcp_did_not_record() {
    bounded(async {
        for list_as_sse in [true, false] {
            let header = header_after_listing(list_as_sse, "2026-07-28").await;
            assert_eq!(header.as_deref(), Some("eu west"), "SSE: {list_as_sse}");
        }
        // A 2025-11-25 session has no such headers.
        assert_eq!(header_after_listing(true, "2025-11-25").await, None);
    })
    .await;
}
