//! Codes, PKCE verifiers, states, tokens and client secrets never show: not in any tracing
//! event (all captured, every level), not in `Debug` or `Display` of anything the login API
//! returns, not in errors.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mcp_auth::{AuthRegistry, Callback, Credentials};
use mcp_config::OAuthLogin;
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use crate::fake::*;

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
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut text = self.text.lock().unwrap();
        span.record(&mut Fields(&mut text));
        text.push('\n');
        Id::from_u64(self.next_id.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn record(&self, _: &Id, values: &Record<'_>) {
        values.record(&mut Fields(&mut self.text.lock().unwrap()));
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut text = self.text.lock().unwrap();
        let _ = write!(
            text,
            "{} {}:",
            event.metadata().level(),
            event.metadata().target()
        );
        event.record(&mut Fields(&mut text));
        text.push('\n');
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

const CODE: &str = "code-never-shown-4242";
const DYN_SECRET: &str = "dyn-secret-never-shown-4242";
const ACCESS: &str = "access-never-shown-4242";
const REFRESH: &str = "refresh-never-shown-4242";
const ACCESS_2: &str = "access-two-never-shown-4242";

#[tokio::test(flavor = "current_thread")]
async fn codes_verifiers_states_and_tokens_never_show() {
    let capture = Capture::default();
    let logs = capture.text.clone();
    // Tracing caches each callsite's interest process-wide. With one dispatcher alive it asks
    // only the registering thread's default, so a login of another test (no capture on its
    // thread) registering a callsite first would switch it off here too. A second dispatcher
    // makes every registration ask all of them, the capture included.
    let _second = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let _default = tracing::subscriber::set_default(capture);
    let mut shown = String::new();

    let fake = server(json!({}));
    fake.route(
        &format!("POST {REGISTER_URL}"),
        201,
        json!({"client_id": "dyn-client", "client_secret": DYN_SECRET}),
    );
    fake.sequence(
        &format!("POST {TOKEN_URL}"),
        vec![
            (200, token_answer(ACCESS, Some(REFRESH), 0)),
            (200, token_answer(ACCESS_2, None, 3600)),
            (
                400,
                json!({"error": "invalid_grant", "error_description": format!("{REFRESH} {ACCESS_2} {DYN_SECRET}")}),
            ),
        ],
    );
    let store = memory();
    let login = login_with(&fake, OAuthLogin::default(), store.clone());
    let _ = write!(shown, "{login:?}");
    let pending = login.start().await.unwrap();
    let url = pending.authorization_url().clone();
    let state = param(&url, "state").unwrap();
    let _ = write!(shown, "{pending:?}");
    let callback = Callback::parse(&redirect(&url, CODE, Some(ISSUER)));
    let _ = write!(shown, "{callback:?}");
    let stored = pending.finish(callback).await.unwrap();
    let _ = write!(shown, "{stored:?}");
    let verifier = fake.sent_to(&format!("POST {TOKEN_URL}"))[0]
        .form("code_verifier")
        .unwrap();

    // Sessions: a refresh (the token expired at once), then a revoked refresh token.
    let registry = AuthRegistry::new(fake.clone()).with_token_store(store.clone());
    let auth = registry.provider(&spec(OAuthLogin::default())).unwrap();
    let _ = write!(shown, "{auth:?} {registry:?}");
    let credentials = auth.credentials().await.unwrap();
    let _ = write!(shown, "{credentials:?}");
    let err = auth
        .on_unauthorized(
            &credentials,
            Some(&format!(r#"Bearer resource_metadata="{PRM_URL}""#)),
        )
        .await
        .unwrap_err();
    let _ = write!(shown, "{err} {err:?}");
    let err = auth.on_unauthorized(&Credentials::none(), None).await;
    let _ = write!(shown, "{err:?}");

    // A failed login: the token endpoint echoes the code.
    fake.route(
        &format!("POST {TOKEN_URL}"),
        400,
        json!({"error": "invalid_grant", "error_description": format!("bad {CODE}")}),
    );
    let pending = login_with(&fake, OAuthLogin::default(), memory())
        .start()
        .await
        .unwrap();
    let url = pending.authorization_url().clone();
    let err = pending
        .finish(Callback::parse(&redirect(&url, CODE, Some(ISSUER))))
        .await
        .unwrap_err();
    let _ = write!(shown, "{err} {err:?}");

    let logs = logs.lock().unwrap().clone();
    assert!(
        logs.contains("OAuth login complete"),
        "the capture works: {logs}"
    );
    for secret in [
        CODE, DYN_SECRET, ACCESS, REFRESH, ACCESS_2, &state, &verifier,
    ] {
        assert!(!logs.contains(secret), "`{secret}` in the logs:\n{logs}");
        assert!(!shown.contains(secret), "`{secret}` shown:\n{shown}");
    }
}
