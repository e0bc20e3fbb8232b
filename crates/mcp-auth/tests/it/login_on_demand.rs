//! The hook that logs in when the server asks: a 401 without a usable login runs one through
//! the runtime's `UserAuthorization` and retries; a 403 `insufficient_scope` steps up to the
//! union of the granted and the asked scope, a bounded number of times.

use std::sync::{Arc, Mutex};

use mcp_auth::{
    AuthError, AuthProvider, AuthRegistry, Callback, Credentials, Login, OnUnauthorized,
    StoredLogin, UserAuthorization, loopback_redirect_uri,
};
use mcp_config::OAuthLogin;
use serde_json::json;

use crate::fake::*;

/// A user who approves every login at once; records the scope each one asked for.
#[derive(Debug, Default)]
struct Approves {
    scopes: Mutex<Vec<Option<String>>>,
}

#[async_trait::async_trait]
impl UserAuthorization for Approves {
    async fn authorize(&self, _server: &str, login: Login) -> Result<StoredLogin, AuthError> {
        let pending = login
            .with_redirect_uri(loopback_redirect_uri(REDIRECT_PORT))
            .start()
            .await?;
        let url = pending.authorization_url().clone();
        self.scopes.lock().unwrap().push(param(&url, "scope"));
        pending
            .finish(Callback::parse(&redirect(&url, "code-1", Some(ISSUER))))
            .await
    }
}

fn bearer(credentials: &Credentials) -> Option<String> {
    credentials
        .get("authorization")
        .map(|v| v.to_str().unwrap().to_owned())
}

const FIRST_401: &str = r#"Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/mcp", scope="files:read""#;

#[tokio::test]
async fn a_401_without_a_login_runs_one_and_the_request_is_retried_with_its_token() {
    let fake = server(json!({}));
    let user = Arc::new(Approves::default());
    let registry = AuthRegistry::new(fake.clone()).with_token_store(memory());
    let hook = registry
        .login_on_demand(&spec(OAuthLogin::default()), user.clone(), 3, 2)
        .unwrap();

    let first = hook.credentials().await.unwrap();
    assert_eq!(
        bearer(&first),
        None,
        "nothing stored yet: sent without a token"
    );
    let decision = hook.on_unauthorized(&first, Some(FIRST_401)).await.unwrap();
    assert_eq!(decision, OnUnauthorized::Retry);
    assert_eq!(hook.logins(), 1);
    assert_eq!(
        *user.scopes.lock().unwrap(),
        vec![Some("files:read offline_access".to_owned())],
        "the challenge's scope, plus offline_access the server offers"
    );
    assert_eq!(
        bearer(&hook.credentials().await.unwrap()).as_deref(),
        Some("Bearer access-one-123456")
    );
    let exchanges = fake.sent_to(&format!("POST {TOKEN_URL}"));
    assert_eq!(exchanges.len(), 1);
    assert_eq!(
        exchanges[0].form("grant_type").as_deref(),
        Some("authorization_code")
    );

    // What the HTTP transport asks after a 403 insufficient_scope: a step-up, then a retry;
    // a static hook answers Fail (the 403 stands).
    let forbidden = r#"Bearer error="insufficient_scope", scope="files:write""#;
    let decision = hook.on_insufficient_scope(&first, forbidden).await.unwrap();
    assert_eq!(decision, OnUnauthorized::Retry);
    assert_eq!(hook.logins(), 2);
    assert_eq!(
        mcp_auth::NoAuth
            .on_insufficient_scope(&first, forbidden)
            .await
            .unwrap(),
        OnUnauthorized::Fail
    );
}

#[tokio::test]
async fn insufficient_scope_steps_up_to_the_union_and_stops_at_the_limit() {
    let fake = server(json!({}));
    fake.sequence(
        &format!("POST {TOKEN_URL}"),
        vec![
            (200, token_answer("access-one-123456", None, 3600)),
            (200, token_answer("access-two-123456", None, 3600)),
        ],
    );
    let user = Arc::new(Approves::default());
    let registry = AuthRegistry::new(fake.clone()).with_token_store(memory());
    let hook = registry
        .login_on_demand(&spec(OAuthLogin::default()), user.clone(), 5, 1)
        .unwrap();
    let first = hook.credentials().await.unwrap();
    hook.on_unauthorized(&first, Some(FIRST_401)).await.unwrap();

    hook.step_up(r#"Bearer error="insufficient_scope", scope="files:write""#)
        .await
        .unwrap();
    assert_eq!(
        user.scopes
            .lock()
            .unwrap()
            .last()
            .cloned()
            .flatten()
            .as_deref(),
        Some("files:read offline_access files:write"),
        "the granted scope and the asked one"
    );
    assert_eq!(
        bearer(&hook.credentials().await.unwrap()).as_deref(),
        Some("Bearer access-two-123456"),
        "the next request carries the new token"
    );

    // Asking for nothing new, or past the limit: refused, no login run.
    let err = hook
        .step_up(r#"Bearer error="insufficient_scope", scope="files:write""#)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("names none beyond"), "{err}");
    let err = hook
        .step_up(r#"Bearer error="insufficient_scope", scope="admin""#)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("after 1 step-ups"), "{err}");
    assert!(err.to_string().contains("`srv`"), "names the server: {err}");
    assert_eq!(hook.logins(), 2);

    // The same through a 401 that says insufficient_scope.
    let err = hook
        .on_unauthorized(
            &Credentials::none(),
            Some(r#"Bearer error="insufficient_scope", scope="other""#),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("after 1 step-ups"), "{err}");
}

#[tokio::test]
async fn logins_are_bounded_and_a_refused_login_is_not_retried() {
    let fake = server(json!({}));
    let user = Arc::new(Approves::default());
    let registry = AuthRegistry::new(fake.clone()).with_token_store(memory());
    let hook = registry
        .login_on_demand(&spec(OAuthLogin::default()), user.clone(), 1, 3)
        .unwrap();
    let first = hook.credentials().await.unwrap();
    hook.on_unauthorized(&first, Some(FIRST_401)).await.unwrap();
    let err = hook
        .step_up(r#"Bearer error="insufficient_scope", scope="files:write""#)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("after 1 logins"), "{err}");
    assert_eq!(user.scopes.lock().unwrap().len(), 1);

    // An authorization server whose redirect carries a wrong `iss`: the login's refusal is
    // the answer, and nothing is exchanged.
    let fake = server(json!({}));
    #[derive(Debug)]
    struct WrongIssuer;
    #[async_trait::async_trait]
    impl UserAuthorization for WrongIssuer {
        async fn authorize(&self, _: &str, login: Login) -> Result<StoredLogin, AuthError> {
            let pending = login
                .with_redirect_uri(loopback_redirect_uri(REDIRECT_PORT))
                .start()
                .await?;
            let url = pending.authorization_url().clone();
            let back = redirect(&url, "code-1", Some("https://evil.example"));
            pending.finish(Callback::parse(&back)).await
        }
    }
    let registry = AuthRegistry::new(fake.clone()).with_token_store(memory());
    let hook = registry
        .login_on_demand(&spec(OAuthLogin::default()), Arc::new(WrongIssuer), 3, 3)
        .unwrap();
    let err = hook
        .on_unauthorized(&Credentials::none(), Some(FIRST_401))
        .await
        .unwrap_err();
    assert!(matches!(err, AuthError::Login { .. }), "{err:?}");
    assert!(fake.sent_to(&format!("POST {TOKEN_URL}")).is_empty());
}
