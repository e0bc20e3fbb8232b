//! A call's progress, end to end: a native tool served over streamable HTTP reports with
//! `agent_core::progress::report`, the server sends it as `notifications/progress` under the
//! token its client chose, and that client (`mcp_client`, for its caller's
//! `agent_core::progress::with_progress` scope) hands it to its caller — at both revisions.
//! Reports that do not increase or are not finite never leave the server, a message loses its
//! control characters, and a caller that does not listen gets nothing.

use std::sync::Arc;

use agent_core::progress::{self, Progress, ProgressSink};
use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
use async_trait::async_trait;
use mcp_serve::{Exposure, HttpOptions, ToolServer};
use serde_json::json;
use tokio::sync::mpsc;

use crate::downstream::downstream;
use crate::support::{bounded, call_through, object, output_text};

/// One tool, `work`, that reports its progress as it goes.
struct Reporter;

impl ToolCatalog for Reporter {
    fn tools(&self) -> Vec<ToolDescriptor> {
        vec![ToolDescriptor::new(
            "work",
            object(json!({"type": "object"})),
        )]
    }
}

#[async_trait]
impl ToolDispatcher for Reporter {
    async fn dispatch(&self, _call: ToolCall) -> Result<ToolOutput, ToolError> {
        let steps = [
            Progress::new(1.0)
                .with_total(3.0)
                .with_message("\u{1b}[2Jstarted\n"),
            Progress::new(f64::NAN),
            Progress::new(0.5),
            Progress::new(2.0).with_total(3.0),
            Progress::new(2.0),
            Progress::new(3.0).with_total(3.0).with_message("done"),
        ];
        for step in steps {
            progress::report(step);
            tokio::task::yield_now().await;
        }
        Ok(ToolOutput::text("worked"))
    }
}

#[tokio::test]
async fn a_served_tool_s_progress_reaches_the_caller_of_the_client_at_both_revisions() {
    let server = ToolServer::new(Arc::new(Reporter), Exposure::only(["work"]))
        .serve_http(HttpOptions::default().with_sse_keep_alive(None))
        .await
        .expect("serve over HTTP");
    for discover in [false, true] {
        let runner = downstream(server.url(), discover, None).await;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let sink: ProgressSink = Arc::new(move |p: Progress| {
            let _ = tx.send(p);
        });
        let output = progress::with_progress(sink, call_through(&runner, "work", json!({})))
            .await
            .unwrap();
        assert_eq!(output_text(&output), "worked");
        let mut seen = Vec::new();
        while seen.len() < 3 {
            seen.push(bounded("a progress report", rx.recv()).await.unwrap());
        }
        let expected = [
            Progress::new(1.0)
                .with_total(3.0)
                .with_message("[2Jstarted"),
            Progress::new(2.0).with_total(3.0),
            Progress::new(3.0).with_total(3.0).with_message("done"),
        ];
        assert_eq!(seen, expected, "discover = {discover}");

        // Nobody listening: the client passes on nothing (rmcp still sends a token of its own,
        // so the tool reports to it).
        let output = call_through(&runner, "work", json!({})).await.unwrap();
        assert_eq!(output_text(&output), "worked");
        let _ = runner.shutdown().await;
        assert!(rx.try_recv().is_err(), "nothing more was reported");
    }
    bounded("shutdown", server.shutdown()).await;
}
