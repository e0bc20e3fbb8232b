//! The login's errors: each names the server once, repeats no level of its chain, holds no
//! Rust type path, and the store's errors keep their fix in the message.

use std::error::Error as _;

use mcp_auth::{AuthError, Callback, Challenge, FileTokenStore, StepUp, TokenStore};
use mcp_config::OAuthLogin;
use serde_json::json;

use crate::fake::*;

fn levels(error: &AuthError) -> Vec<String> {
    let mut levels = vec![error.to_string()];
    let mut cause = error.source();
    while let Some(inner) = cause {
        levels.push(inner.to_string());
        cause = inner.source();
    }
    levels
}

#[tokio::test]
async fn login_errors_name_the_server_once_and_repeat_nothing() {
    let mut errors = Vec::new();
    // Login: a forged state.
    let fake = server(json!({}));
    let pending = login_with(&fake, OAuthLogin::default(), memory())
        .start()
        .await
        .unwrap();
    errors.push(
        pending
            .finish(Callback::from_redirect("?code=c&state=forged"))
            .await
            .unwrap_err(),
    );
    // LoginRequired: nothing stored.
    let store = memory();
    let registry = mcp_auth::AuthRegistry::new(fake.clone()).with_token_store(store);
    errors.push(
        registry
            .provider(&spec(OAuthLogin::default()))
            .unwrap()
            .credentials()
            .await
            .unwrap_err(),
    );
    // TokenStore: a login already running.
    let dir = TempDir::new();
    let files = std::sync::Arc::new(FileTokenStore::new(dir.path()));
    let _held = files.lock_login(MCP_URL).unwrap();
    errors.push(
        login_with(&fake, OAuthLogin::default(), files)
            .start()
            .await
            .unwrap_err(),
    );
    // Login: step-up that makes no progress.
    errors.push(
        StepUp::new(1)
            .next_scope(
                "srv",
                Some("a"),
                &Challenge::parse(r#"Bearer error="insufficient_scope", scope="a""#),
            )
            .unwrap_err(),
    );
    let mut variants = Vec::new();
    for error in &errors {
        variants.push(
            format!("{error:?}")
                .split([' ', '{'])
                .next()
                .unwrap()
                .to_owned(),
        );
        let levels = levels(error);
        for (i, level) in levels.iter().enumerate() {
            assert!(!level.contains("::"), "a type path in {levels:?}");
            for (j, other) in levels.iter().enumerate() {
                assert!(i == j || !level.contains(other.as_str()), "{levels:?}");
            }
        }
        assert_eq!(levels.join("\n").matches("`srv`").count(), 1, "{levels:?}");
        assert_eq!(
            error.to_string(),
            format!("server `srv`: {}", error.reason())
        );
    }
    assert_eq!(variants, ["Login", "LoginRequired", "TokenStore", "Login"]);
}
