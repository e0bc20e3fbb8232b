//! The front's `Mcp-Param-*` check: a `tools/call` from a 2026-07-28 client whose headers
//! disagree with its arguments is refused `400` with the error of a [`ParamHeaderCheck`].

use http::{Request, StatusCode};

use super::answer::{Answer, jsonrpc};
use super::body::Whole;
use super::check::Check;
use super::message_check::Refusal;
use crate::param_headers::ParamHeaderCheck;

/// Runs its [`ParamHeaderCheck`] on every request. The refusal gives way to a body that is no
/// message ([`Refusal::Yields`]).
impl Check<Whole> for ParamHeaderCheck {
    type Kept = ();

    fn check(&self, request: &Request<Whole>) -> Result<(), Answer> {
        let Some(error) = self.refusal(request.headers(), request.body().bytes()) else {
            return Ok(());
        };
        let mut refused = jsonrpc(StatusCode::BAD_REQUEST, error);
        refused.extensions_mut().insert(Refusal::Yields);
        Err(refused)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use rmcp::model::Tool;
    use serde_json::json;
    use std::sync::Arc;

    use super::*;
    use crate::http::answer::testing::through;
    use crate::http::check::CheckLayer;

    fn call(region: &'static str) -> Request<Whole> {
        let body = json!({
            "jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "find", "arguments": {"region": "eu"}}
        });
        Request::post("/mcp")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-param-region", region)
            .body(Whole::from(Bytes::from(body.to_string())))
            .unwrap()
    }

    #[tokio::test]
    async fn a_call_whose_headers_disagree_is_refused() {
        let schema = json!({
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}
        });
        let tool = Tool::new("find", "", Arc::new(schema.as_object().unwrap().clone()));
        let layer = CheckLayer::new(ParamHeaderCheck::new(move |name| {
            (name == "find").then(|| tool.clone())
        }));
        let (answer, reached) = through(&layer, call("eu")).await;
        assert_eq!((answer.status.as_u16(), reached), (200, 1));
        let (answer, reached) = through(&layer, call("us")).await;
        assert_eq!((answer.status.as_u16(), reached), (400, 0));
        let error = answer.json();
        assert_eq!(
            (error["id"].clone(), error["error"]["code"].clone()),
            (json!(3), json!(-32020))
        );
    }
}
