//! Mirroring of `Mcp-Param-*` headers (SEP-2243, MCP revision 2026-07-28) from the tool
//! lists a client has carried.
//!
//! rmcp's client worker builds these headers from the tool lists it has seen, but one of its
//! paths (a response whose stream has ended by the time the worker reads it) delivers a
//! `tools/list` answer without recording it, and the next call to such a tool goes out with
//! no `Mcp-Param-*` header at all, which a 2026-07-28 server refuses. [`HttpClient`] keeps
//! its own record of the declarations of every `tools/list` answer it carries
//! ([`ToolHeaders`]) and adds the headers to a 2026-07-28 `tools/call` that has none
//! (docs/upstream.md#rmcp-param-header-cache).
//!
//! [`HttpClient`]: crate::HttpClient

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use http::{HeaderMap, HeaderName, HeaderValue};
use mcp_param_headers::{Declaration, PREFIX, applies, declarations, encode_value, render};
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, ServerJsonRpcMessage, ServerResult, Tool,
};
use sse_stream::Sse;

/// Most tools with declarations one client remembers (a server's list is bounded elsewhere;
/// this bounds what a hostile one can make the client keep).
const MAX_TOOLS: usize = 10_000;

/// The declarations of the tools one client has seen listed, by tool name (only tools that
/// declare something).
#[derive(Debug, Default)]
pub(crate) struct ToolHeaders {
    tools: Mutex<HashMap<String, Arc<[Declaration]>>>,
}

impl ToolHeaders {
    /// Records the tools of a `tools/list` answer; anything else is ignored.
    pub(crate) fn record_message(&self, message: &ServerJsonRpcMessage) {
        if let JsonRpcMessage::Response(response) = message
            && let ServerResult::ListToolsResult(list) = &response.result
        {
            self.record(
                list.tools.iter().map(|tool: &Tool| {
                    (tool.name.as_ref(), declarations(tool.input_schema.as_ref()))
                }),
            );
        }
    }

    /// Records the tools of a `tools/list` answer carried by a server-sent event.
    pub(crate) fn record_event(&self, event: &Sse) {
        let Some(data) = event.data.as_deref() else {
            return;
        };
        // Most lists declare nothing: a list without the keyword can only forget tools, which
        // matters only when some are remembered.
        if !data.contains("x-mcp-header") && self.lock().is_empty() {
            return;
        }
        if let Ok(message) = serde_json::from_str::<ServerJsonRpcMessage>(data) {
            self.record_message(&message);
        }
    }

    fn record<'a>(&self, tools: impl Iterator<Item = (&'a str, Vec<Declaration>)>) {
        let mut known = self.lock();
        for (name, declared) in tools {
            if declared.is_empty() {
                known.remove(name);
            } else if known.len() < MAX_TOOLS || known.contains_key(name) {
                known.insert(name.to_owned(), declared.into());
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<[Declaration]>>> {
        self.tools.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds the `Mcp-Param-*` headers of a 2026-07-28 `tools/call` to `headers` when rmcp
    /// sent none and the called tool declares some; every other message is left alone.
    pub(crate) fn mirror(&self, message: &ClientJsonRpcMessage, headers: &mut HeaderMap) {
        let JsonRpcMessage::Request(request) = message else {
            return;
        };
        let ClientRequest::CallToolRequest(call) = &request.request else {
            return;
        };
        if !applies(headers)
            || headers.keys().any(|name| {
                name.as_str()
                    .as_bytes()
                    .get(..PREFIX.len())
                    .is_some_and(|head| head.eq_ignore_ascii_case(PREFIX.as_bytes()))
            })
        {
            return;
        }
        let Some(declared) = self.lock().get(call.params.name.as_ref()).cloned() else {
            return;
        };
        let Some(arguments) = call.params.arguments.as_ref() else {
            return;
        };
        for (path, token) in declared.iter() {
            let Some((first, rest)) = path.split_first() else {
                continue;
            };
            let mut value = arguments.get(first);
            for key in rest {
                value = value.and_then(|node| node.get(key));
            }
            let Some(text) = value.and_then(render) else {
                continue;
            };
            if let (Ok(name), Ok(value)) = (
                HeaderName::try_from(format!("{PREFIX}{token}")),
                HeaderValue::try_from(encode_value(&text)),
            ) {
                headers.insert(name, value);
            }
        }
    }

    /// Whether `message` asks for a tool list (whose answer is recorded).
    pub(crate) fn is_listing(message: &ClientJsonRpcMessage) -> bool {
        matches!(message, JsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::ListToolsRequest(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_param_headers::FIRST_REVISION;
    use serde_json::{Value, json};

    fn call(name: &str, arguments: Value) -> ClientJsonRpcMessage {
        serde_json::from_value(json!({
            "jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": { "name": name, "arguments": arguments },
        }))
        .unwrap()
    }

    fn listing(tools: Value) -> Sse {
        let data = json!({ "jsonrpc": "2.0", "id": 2, "result": { "tools": tools } });
        Sse::default().data(data.to_string())
    }

    fn route_tool() -> Value {
        json!({ "name": "route", "inputSchema": { "type": "object", "properties": {
            "region": { "type": "string", "x-mcp-header": "Region" },
            "opts": { "type": "object", "properties": {
                "tier": { "type": "integer", "x-mcp-header": "Tier" } } },
            "note": { "type": "string" },
        } } })
    }

    fn headers(version: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            "mcp-protocol-version",
            HeaderValue::try_from(version).unwrap(),
        );
        headers
    }

    #[test]
    fn a_listed_declaration_is_mirrored_into_a_call_without_headers() {
        let known = ToolHeaders::default();
        known.record_event(&listing(json!([route_tool()])));
        let mut sent = headers(FIRST_REVISION);
        let message = call(
            "route",
            json!({ "region": " köln", "opts": { "tier": 2 }, "note": "x" }),
        );
        known.mirror(&message, &mut sent);
        assert_eq!(sent["mcp-param-region"], "=?base64?IGvDtmxu?=");
        assert_eq!(sent["mcp-param-tier"], "2");
        assert_eq!(sent.len(), 3, "{sent:?}");
    }

    #[test]
    fn headers_rmcp_sent_older_revisions_and_other_tools_are_left_alone() {
        let known = ToolHeaders::default();
        known.record_event(&listing(json!([route_tool()])));
        let message = call("route", json!({ "region": "eu", "opts": { "tier": 2 } }));
        // rmcp already mirrored: nothing is added or changed.
        let mut sent = headers(FIRST_REVISION);
        sent.insert("mcp-param-region", HeaderValue::from_static("eu"));
        known.mirror(&message, &mut sent);
        assert_eq!(sent.len(), 2);
        // A 2025-11-25 session sends none.
        let mut old = headers("2025-11-25");
        known.mirror(&message, &mut old);
        assert_eq!(old.len(), 1);
        // A tool that was never listed.
        let mut other = headers(FIRST_REVISION);
        known.mirror(&call("other", json!({ "region": "eu" })), &mut other);
        assert_eq!(other.len(), 1);
        // Absent, null and structured arguments have no header.
        let mut absent = headers(FIRST_REVISION);
        known.mirror(
            &call("route", json!({ "region": null, "opts": { "tier": [1] } })),
            &mut absent,
        );
        assert_eq!(absent.len(), 1);
    }

    #[test]
    fn a_later_list_without_the_declaration_forgets_it() {
        let known = ToolHeaders::default();
        known.record_event(&listing(json!([route_tool()])));
        known.record_event(&listing(
            json!([{ "name": "route", "inputSchema": { "type": "object" } }]),
        ));
        let mut sent = headers(FIRST_REVISION);
        known.mirror(&call("route", json!({ "region": "eu" })), &mut sent);
        assert_eq!(sent.len(), 1);
    }
}
