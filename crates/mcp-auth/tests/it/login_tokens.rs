//! The hook of a server the user logged in to: the stored token before each request, a
//! refresh before it expires (one at a time), and "log in again" when nothing is left.

use std::sync::Arc;

use http::HeaderValue;
use mcp_auth::{AuthError, AuthProvider, AuthRegistry, Credentials, OnUnauthorized, TokenStore};
use mcp_config::OAuthLogin;
use serde_json::json;
use tokio::sync::Semaphore;

use crate::fake::*;

fn registry(fake: &Arc<Fake>, store: &Arc<dyn TokenStore>) -> AuthRegistry {
    AuthRegistry::new(fake.clone()).with_token_store(store.clone())
}

fn hook(registry: &AuthRegistry) -> Arc<dyn AuthProvider> {
    registry.provider(&spec(OAuthLogin::default())).unwrap()
}

fn bearer(credentials: &Credentials) -> String {
    credentials
        .get("authorization")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

fn token_key() -> String {
    format!("POST {TOKEN_URL}")
}

#[tokio::test]
async fn the_stored_token_is_sent_and_refreshed_before_it_expires() {
    let fake = server(json!({}));
    let store = memory();
    store
        .save(&stored(
            "access-stored-123456",
            Some("refresh-stored-123456"),
            Some(1800),
        ))
        .await
        .unwrap();
    let registry = registry(&fake, &store);
    let auth = hook(&registry);
    assert_eq!(
        bearer(&auth.credentials().await.unwrap()),
        "Bearer access-stored-123456"
    );
    assert_eq!(
        bearer(&auth.credentials().await.unwrap()),
        "Bearer access-stored-123456"
    );
    assert!(fake.sent().is_empty(), "a fresh token needs no request");

    // A token with 10 s left (within the 30 s skew): refreshed before use.
    let store = memory();
    store
        .save(&stored(
            "access-stale-123456",
            Some("refresh-stale-123456"),
            Some(10),
        ))
        .await
        .unwrap();
    fake.route(
        &token_key(),
        200,
        token_answer("access-new-123456", Some("refresh-new-123456"), 3600),
    );
    let registry = self::registry(&fake, &store);
    let auth = hook(&registry);
    assert_eq!(
        bearer(&auth.credentials().await.unwrap()),
        "Bearer access-new-123456"
    );
    let sent = fake.sent_to(&token_key());
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].form("grant_type").as_deref(), Some("refresh_token"));
    assert_eq!(
        sent[0].form("refresh_token").as_deref(),
        Some("refresh-stale-123456")
    );
    assert_eq!(sent[0].form("client_id").as_deref(), Some("dyn-client"));
    assert_eq!(sent[0].form("resource").as_deref(), Some(MCP_URL));
    // The new tokens are stored (the rotated refresh token with them), and used from then on.
    let kept = store.find(MCP_URL).await.unwrap();
    assert_eq!(kept[0].access_token.expose(), "access-new-123456");
    assert_eq!(
        kept[0].refresh_token.as_ref().unwrap().expose(),
        "refresh-new-123456"
    );
    assert_eq!(
        bearer(&auth.credentials().await.unwrap()),
        "Bearer access-new-123456"
    );
    assert_eq!(fake.sent_to(&token_key()).len(), 1);
}

#[tokio::test]
async fn sessions_and_requests_share_one_refresh() {
    let fake = Arc::new(Fake::gated(Semaphore::new(0)));
    fake.route(
        &token_key(),
        200,
        token_answer("access-new-123456", None, 3600),
    );
    let store = memory();
    store
        .save(&stored(
            "access-stale-123456",
            Some("refresh-once-123456"),
            Some(5),
        ))
        .await
        .unwrap();
    let registry = registry(&fake, &store);
    let sessions: Vec<_> = (0..3).map(|_| hook(&registry)).collect();
    let calls = sessions
        .iter()
        .cycle()
        .take(8)
        .map(|auth| {
            let auth = auth.clone();
            tokio::spawn(async move { auth.credentials().await })
        })
        .collect::<Vec<_>>();
    while fake.posts() == 0 {
        tokio::task::yield_now().await;
    }
    fake.gate.as_ref().unwrap().add_permits(10);
    for call in calls {
        assert_eq!(
            bearer(&call.await.unwrap().unwrap()),
            "Bearer access-new-123456"
        );
    }
    assert_eq!(fake.posts(), 1, "one refresh for every session and request");
    // No refresh token came back: the old one is kept.
    let kept = store.find(MCP_URL).await.unwrap();
    assert_eq!(
        kept[0].refresh_token.as_ref().unwrap().expose(),
        "refresh-once-123456"
    );
}

#[tokio::test]
async fn a_revoked_refresh_token_says_to_log_in_again() {
    let fake = server(json!({}));
    fake.route(
        &token_key(),
        400,
        json!({"error": "invalid_grant", "error_description": "token refresh-gone-123456 revoked"}),
    );
    let store = memory();
    store
        .save(&stored(
            "access-old-123456",
            Some("refresh-gone-123456"),
            Some(0),
        ))
        .await
        .unwrap();
    let registry = registry(&fake, &store);
    let err = hook(&registry).credentials().await.unwrap_err();
    assert!(err.is_login_required(), "{err:?}");
    assert_eq!(
        err.to_string(),
        "server `srv`: the authorization server refused the refresh token (invalid_grant: token [REDACTED] revoked): \
         it was revoked or has expired; log in again with `mcp-agent auth login srv`"
    );
}

#[tokio::test]
async fn without_a_usable_token_the_error_says_to_log_in() {
    let fake = server(json!({}));
    let store = memory();
    let registry = registry(&fake, &store);
    let auth = hook(&registry);
    let err = auth.credentials().await.unwrap_err();
    assert!(err.is_login_required(), "{err:?}");
    assert_eq!(
        err.to_string(),
        "server `srv`: no stored OAuth login for https://mcp.example/mcp; log in again with `mcp-agent auth login srv`"
    );
    let err = auth
        .on_unauthorized(
            &Credentials::none(),
            Some(r#"Bearer resource_metadata="x""#),
        )
        .await
        .unwrap_err();
    assert!(err.is_login_required(), "{err:?}");

    // Expired, no refresh token.
    store
        .save(&stored("access-old-123456", None, Some(0)))
        .await
        .unwrap();
    let err = auth.credentials().await.unwrap_err();
    assert!(
        err.to_string()
            .contains("expired and the login has no refresh token"),
        "{err}"
    );
    assert!(fake.sent().is_empty());

    // A login appearing in the store (the user logged in meanwhile) is picked up.
    store
        .save(&stored("access-fresh-123456", None, Some(3000)))
        .await
        .unwrap();
    assert_eq!(
        bearer(&auth.credentials().await.unwrap()),
        "Bearer access-fresh-123456"
    );
}

#[tokio::test]
async fn a_401_with_the_current_token_refreshes_once_then_retries() {
    let fake = server(json!({}));
    fake.route(
        &token_key(),
        200,
        token_answer("access-new-123456", Some("refresh-new-123456"), 3600),
    );
    let store = memory();
    store
        .save(&stored(
            "access-cur-123456",
            Some("refresh-cur-123456"),
            Some(3000),
        ))
        .await
        .unwrap();
    let registry = registry(&fake, &store);
    let auth = hook(&registry);
    let sent = auth.credentials().await.unwrap();
    let challenge = format!(r#"Bearer error="invalid_token", resource_metadata="{PRM_URL}""#);
    assert_eq!(
        auth.on_unauthorized(&sent, Some(&challenge)).await.unwrap(),
        OnUnauthorized::Retry
    );
    assert_eq!(
        bearer(&auth.credentials().await.unwrap()),
        "Bearer access-new-123456"
    );
    // A request still carrying the old token: another one already renewed it.
    assert_eq!(
        auth.on_unauthorized(&sent, Some(&challenge)).await.unwrap(),
        OnUnauthorized::Retry
    );
    assert_eq!(fake.sent_to(&token_key()).len(), 1);

    // The new token refused too, and no refresh token works: log in again.
    fake.route(&token_key(), 400, json!({"error": "invalid_grant"}));
    let current = auth.credentials().await.unwrap();
    let err = auth
        .on_unauthorized(&current, Some(&challenge))
        .await
        .unwrap_err();
    assert!(err.is_login_required(), "{err:?}");
}

#[tokio::test]
async fn a_server_moved_to_another_authorization_server_needs_a_new_login() {
    let fake = server(json!({}));
    let store = memory();
    let mut old = stored("access-cur-123456", Some("refresh-cur-123456"), Some(3000));
    old.issuer = "https://old-auth.example".into();
    store.save(&old).await.unwrap();
    let registry = registry(&fake, &store);
    let auth = hook(&registry);
    let sent = auth.credentials().await.unwrap();
    let err = auth
        .on_unauthorized(
            &sent,
            Some(&format!(r#"Bearer resource_metadata="{PRM_URL}""#)),
        )
        .await
        .unwrap_err();
    assert!(err.is_login_required(), "{err:?}");
    assert_eq!(
        err.to_string(),
        "server `srv`: the server now uses the authorization server `https://auth.example` instead of \
         `https://old-auth.example`; log in again with `mcp-agent auth login srv`"
    );
    assert!(
        fake.sent_to(&token_key()).is_empty(),
        "no refresh token sent to the new server"
    );
}

#[tokio::test]
async fn a_request_for_more_scope_says_to_log_in_for_it() {
    let fake = server(json!({}));
    let store = memory();
    store
        .save(&stored("access-cur-123456", None, Some(3000)))
        .await
        .unwrap();
    let registry = registry(&fake, &store);
    let auth = hook(&registry);
    let mut sent = auth.credentials().await.unwrap();
    sent = sent.with_header(
        http::header::HeaderName::from_static("x-other"),
        HeaderValue::from_static("v"),
    );
    let err = auth
        .on_unauthorized(
            &sent,
            Some(r#"Bearer error="insufficient_scope", scope="files:write""#),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "server `srv`: the server asks for more scope (`files:write`); log in again with `mcp-agent auth login srv`"
    );
    // The next login can ask for it: the challenge is kept for every session of the login.
    let challenge = registry
        .login_tokens(&spec(OAuthLogin::default()))
        .unwrap()
        .last_challenge()
        .unwrap();
    assert_eq!(challenge.scope.as_deref(), Some("files:write"));
}

#[tokio::test]
async fn a_login_of_another_configured_client_is_not_used() {
    let fake = server(json!({}));
    let store = memory();
    store
        .save(&stored("access-dyn-123456", None, Some(3000)))
        .await
        .unwrap();
    let registry = registry(&fake, &store);
    let mut login = OAuthLogin::default();
    login.client_id = Some("my-app".into());
    let err = registry
        .provider(&spec(login))
        .unwrap()
        .credentials()
        .await
        .unwrap_err();
    assert!(err.is_login_required(), "{err:?}");
    let _: &AuthError = &err;
}
