//! The client secret and the access tokens never show: not in `Debug` or `Display` of specs,
//! connectors, connections, providers and errors, and not in any log event (every tracing
//! event of every crate, at every level, is captured while OAuth sessions succeed and fail).
//!
//! One test in this binary: it installs the process-wide tracing subscriber.

use crate::common;
use crate::oauth_support;

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::{bounded, echo};
use mcp_connector::Connector;
use mcp_transport_http::{HttpConnector, HttpOptions};
use oauth_support::{AuthServer, Guard, SECRET, chain, oauth_spec, protected_server};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Writes every span field and event (target, level, fields) to one string.
#[derive(Default)]
struct Capture {
    text: Arc<Mutex<String>>,
    next_id: AtomicU64,
}

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        let _ = write!(self.0, " {}={value}", field.name());
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut text = self.text.lock().unwrap();
        let _ = write!(text, "span {}:", span.metadata().name());
        span.record(&mut Fields(&mut text));
        text.push('\n');
        Id::from_u64(self.next_id.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn record(&self, _: &Id, values: &Record<'_>) {
        let mut text = self.text.lock().unwrap();
        values.record(&mut Fields(&mut text));
        text.push('\n');
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut text = self.text.lock().unwrap();
        let meta = event.metadata();
        let _ = write!(text, "{} {}:", meta.level(), meta.target());
        event.record(&mut Fields(&mut text));
        text.push('\n');
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

#[tokio::test]
async fn secrets_and_tokens_never_show_in_output_errors_or_logs() {
    let capture = Capture::default();
    let logs = capture.text.clone();
    tracing::subscriber::set_global_default(capture).expect("the only subscriber");

    let mut shown = String::new();
    bounded(async {
        let auth = AuthServer::start(vec!["client_secret_post"], None).await;
        let mcp = protected_server(&auth, Guard::Tokens).await;
        let connector = HttpConnector::new(HttpOptions::default()).unwrap();

        // Success, with discovery, a renewal after a revocation, and a call.
        let spec = oauth_spec(&mcp, None, SECRET, None);
        let connection = connector.connect(&spec).await.unwrap();
        let _ = write!(shown, "{spec:?} {connector:?} {connection:?}");
        let provider = connector.auth_registry().provider(&spec).unwrap();
        let _ = write!(shown, "{provider:?} {:?}", connector.auth_registry());
        let client = rmcp::serve_client((), connection.transport).await.unwrap();
        client.peer().call_tool(echo("one")).await.unwrap();
        auth.state.revoke_all();
        client.peer().call_tool(echo("two")).await.unwrap();
        let credentials = provider.credentials().await.unwrap();
        let _ = write!(shown, "{credentials:?}");
        client.cancel().await.unwrap();

        // Failure: the endpoint refuses a secret (and says so in its description).
        let wrong = "wrong-secret-ABC-987";
        let spec = oauth_spec(&mcp, Some(&auth.token_url()), wrong, None);
        let connection = connector.connect(&spec).await.unwrap();
        let err = rmcp::serve_client((), connection.transport)
            .await
            .unwrap_err();
        let _ = write!(shown, "{err} {err:?} {}", chain(&err));
        let provider = connector.auth_registry().provider(&spec).unwrap();
        let err = provider.credentials().await.unwrap_err();
        let _ = write!(shown, "{err} {err:?} {}", chain(&err));
        assert!(shown.contains("invalid_client"), "{shown}");

        let issued = auth.state.issued.lock().unwrap().clone();
        assert!(issued.len() >= 2, "{issued:?}");
        let logs = logs.lock().unwrap().clone();
        assert!(
            logs.contains("requesting an OAuth token"),
            "the capture works: {logs}"
        );
        for secret in [SECRET, wrong]
            .into_iter()
            .chain(issued.iter().map(String::as_str))
        {
            assert!(!shown.contains(secret), "`{secret}` shown: {shown}");
            assert!(!logs.contains(secret), "`{secret}` logged: {logs}");
        }
    })
    .await;
}
