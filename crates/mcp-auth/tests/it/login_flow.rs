//! The login: discovery, client choice (pre-registered, metadata document, registration), the
//! authorization URL, and the redirect's checks (`state`, `iss`) before the code is exchanged.

use std::sync::Arc;

use mcp_auth::{AuthError, Callback, Challenge, Pkce};
use mcp_config::{OAuthLogin, SecretSource, TokenEndpointAuthMethod};
use serde_json::{Value, json};

use crate::fake::*;

fn token_key() -> String {
    format!("POST {TOKEN_URL}")
}

#[tokio::test]
async fn the_authorization_url_carries_pkce_state_scope_and_resource() {
    let fake = server(json!({}));
    let store = memory();
    let pending = login_with(&fake, OAuthLogin::default(), store.clone())
        .start()
        .await
        .unwrap();
    let url = pending.authorization_url().clone();
    assert_eq!(url.host_str(), Some("auth.example"));
    assert_eq!(url.path(), "/authorize");
    let p = |name| param(&url, name);
    assert_eq!(
        p("tenant").as_deref(),
        Some("t1"),
        "the endpoint's own query is kept"
    );
    assert_eq!(p("response_type").as_deref(), Some("code"));
    assert_eq!(p("client_id").as_deref(), Some("dyn-client"));
    assert_eq!(
        p("redirect_uri").as_deref(),
        Some("http://127.0.0.1:8765/callback")
    );
    assert_eq!(p("code_challenge_method").as_deref(), Some("S256"));
    assert_eq!(p("code_challenge").unwrap().len(), 43);
    assert_eq!(p("state").unwrap().len(), 43);
    assert_eq!(
        p("scope").as_deref(),
        Some("files:read files:write offline_access"),
        "the resource's scopes_supported, plus offline_access the server offers"
    );
    assert_eq!(p("resource").as_deref(), Some(MCP_URL));
    assert_eq!(pending.issuer(), ISSUER);
    assert_eq!(pending.client_id(), "dyn-client");
    assert!(pending.expects_iss());

    // Dynamic registration, as RFC 7591 asks.
    let registrations = fake.sent_to(&format!("POST {REGISTER_URL}"));
    assert_eq!(registrations.len(), 1);
    let body: Value = serde_json::from_str(&registrations[0].body).unwrap();
    assert_eq!(
        body["redirect_uris"],
        json!(["http://127.0.0.1:8765/callback"])
    );
    assert_eq!(
        body["grant_types"],
        json!(["authorization_code", "refresh_token"])
    );
    assert_eq!(body["response_types"], json!(["code"]));
    assert_eq!(body["token_endpoint_auth_method"], "none");
    assert_eq!(body["client_name"], "mcp-agent");
    assert!(
        fake.sent_to(&token_key()).is_empty(),
        "no token request yet"
    );

    // The redirect comes back: the code is exchanged with the verifier.
    let challenge = p("code_challenge").unwrap();
    let login = pending
        .finish(Callback::parse(&redirect(
            &url,
            "code-xyz-123456",
            Some(ISSUER),
        )))
        .await
        .unwrap();
    let sent = fake.sent_to(&token_key());
    assert_eq!(sent.len(), 1);
    let token = &sent[0];
    assert_eq!(
        token.form("grant_type").as_deref(),
        Some("authorization_code")
    );
    assert_eq!(token.form("code").as_deref(), Some("code-xyz-123456"));
    assert_eq!(
        token.form("redirect_uri").as_deref(),
        Some("http://127.0.0.1:8765/callback")
    );
    assert_eq!(token.form("client_id").as_deref(), Some("dyn-client"));
    assert_eq!(token.form("resource").as_deref(), Some(MCP_URL));
    let verifier = token.form("code_verifier").unwrap();
    assert_eq!(Pkce::from_verifier(verifier.into()).challenge(), challenge);
    assert!(
        token.headers.get("authorization").is_none(),
        "a public client"
    );

    assert_eq!(login.access_token.expose(), "access-one-123456");
    assert_eq!(
        login.refresh_token.as_ref().unwrap().expose(),
        "refresh-one-123456"
    );
    assert_eq!(login.issuer, ISSUER);
    assert_eq!(login.resource, MCP_URL);
    assert_eq!(
        login.scope.as_deref(),
        Some("files:read files:write offline_access")
    );
    assert!(login.expires_at.is_some());
    let kept = store.load(&login.key()).await.unwrap().unwrap();
    assert_eq!(kept, login);
}

#[tokio::test]
async fn scope_comes_from_configuration_then_challenge_then_resource_else_none() {
    async fn scope_of(
        fake: &Arc<Fake>,
        login: OAuthLogin,
        challenge: Option<&str>,
    ) -> Option<String> {
        let mut flow = login_with(fake, login, memory());
        if let Some(header) = challenge {
            flow = flow.with_challenge(Challenge::parse(header));
        }
        let pending = flow.start().await.unwrap();
        param(pending.authorization_url(), "scope")
    }
    let no_offline = json!({"scopes_supported": ["files:read"]});
    let fake = server(no_offline.clone());
    let mut configured = OAuthLogin::default();
    configured.scopes = Some(vec!["admin".into()]);
    assert_eq!(
        scope_of(&fake, configured, Some(r#"Bearer scope="files:read""#))
            .await
            .as_deref(),
        Some("admin")
    );
    assert_eq!(
        scope_of(
            &fake,
            OAuthLogin::default(),
            Some(r#"Bearer error="invalid_token", scope="files:read""#)
        )
        .await
        .as_deref(),
        Some("files:read")
    );
    assert_eq!(
        scope_of(&fake, OAuthLogin::default(), None)
            .await
            .as_deref(),
        Some("files:read files:write")
    );
    // Step-up: the union of the granted scope and the one a 403 asks for, exactly.
    let mut step_up = mcp_auth::StepUp::new(2);
    let scope = step_up
        .next_scope(
            "srv",
            Some("files:read"),
            &Challenge::parse(r#"Bearer error="insufficient_scope", scope="files:write""#),
        )
        .unwrap();
    let pending = login_with(&fake, OAuthLogin::default(), memory())
        .with_scope(scope)
        .start()
        .await
        .unwrap();
    assert_eq!(
        param(pending.authorization_url(), "scope").as_deref(),
        Some("files:read files:write")
    );
    drop(pending);
    // Neither a challenge scope nor scopes_supported: no scope parameter at all.
    let bare = server(no_offline);
    bare.route(
        &format!("GET {PRM_URL}"),
        200,
        json!({"resource": MCP_URL, "authorization_servers": [ISSUER]}),
    );
    assert_eq!(scope_of(&bare, OAuthLogin::default(), None).await, None);
}

/// Starts a login on `fake` and finishes it with `callback` built from the URL.
async fn finish_with(
    fake: &Arc<Fake>,
    callback: impl FnOnce(&url::Url) -> Callback,
) -> Result<mcp_auth::StoredLogin, AuthError> {
    let pending = login_with(fake, OAuthLogin::default(), memory())
        .start()
        .await
        .unwrap();
    let url = pending.authorization_url().clone();
    pending.finish(callback(&url)).await
}

#[tokio::test]
async fn a_wrong_iss_or_none_when_advertised_is_refused_and_nothing_is_sent() {
    let fake = server(json!({}));
    let err = finish_with(&fake, |url| {
        Callback::parse(&redirect(url, "code-1", Some("https://evil.example")))
    })
    .await
    .unwrap_err();
    assert!(matches!(err, AuthError::Login { .. }), "{err:?}");
    assert!(
        err.to_string().contains("`iss` is `https://evil.example`"),
        "{err}"
    );
    assert!(err.to_string().contains("RFC 9207"), "{err}");

    // Compared as a string (RFC 9207 §2.4): a normalised form is another issuer.
    let err = finish_with(&fake, |url| {
        Callback::parse(&redirect(url, "code-1", Some("https://auth.example/")))
    })
    .await
    .unwrap_err();
    assert!(err.to_string().contains("RFC 9207"), "{err}");

    let err = finish_with(&fake, |url| Callback::parse(&redirect(url, "code-1", None)))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("carries no `iss`"), "{err}");
    assert!(fake.sent_to(&token_key()).is_empty(), "no code was sent");

    // A server that does not advertise `iss` may leave it out.
    let quiet = server(json!({"authorization_response_iss_parameter_supported": null}));
    finish_with(&quiet, |url| {
        Callback::parse(&redirect(url, "code-1", None))
    })
    .await
    .unwrap();
    // But one it sends is still checked.
    let err = finish_with(&quiet, |url| {
        Callback::parse(&redirect(url, "code-1", Some("https://auth.example/other")))
    })
    .await
    .unwrap_err();
    assert!(err.to_string().contains("RFC 9207"), "{err}");
    assert_eq!(quiet.sent_to(&token_key()).len(), 1);
}

#[tokio::test]
async fn a_wrong_or_missing_state_is_refused_and_nothing_is_sent() {
    let fake = server(json!({}));
    let err = finish_with(&fake, |_| {
        Callback::from_redirect(&format!(
            "http://127.0.0.1:8765/callback?code=c&state=forged&iss={ISSUER}"
        ))
    })
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("`state` is not the one sent"),
        "{err}"
    );
    let err = finish_with(&fake, |_| {
        Callback::from_redirect(&format!("?code=c&iss={ISSUER}"))
    })
    .await
    .unwrap_err();
    assert!(err.to_string().contains("carries no `state`"), "{err}");
    // An error redirect is reported, after its state is checked.
    let err = finish_with(&fake, |url| {
        Callback::from_redirect(&format!(
            "?error=access_denied&error_description=the+user+said+no&state={}",
            param(url, "state").unwrap()
        ))
    })
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "server `srv`: OAuth login failed: the authorization server answered `access_denied`: the user said no"
    );
    assert!(fake.sent_to(&token_key()).is_empty());

    // A code pasted on its own has no state to check.
    finish_with(&fake, |_| Callback::parse("code-pasted"))
        .await
        .unwrap();
    assert_eq!(
        fake.sent_to(&token_key())[0].form("code").as_deref(),
        Some("code-pasted")
    );
}

#[tokio::test]
async fn metadata_naming_another_issuer_is_refused() {
    let fake = server(json!({"issuer": "https://evil.example"}));
    let err = login_with(&fake, OAuthLogin::default(), memory())
        .start()
        .await
        .unwrap_err();
    assert!(matches!(err, AuthError::IssuerMismatch { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("names issuer `https://evil.example`"),
        "{err}"
    );
    assert_eq!(fake.posts(), 0, "no registration, no token request");
}

#[tokio::test]
async fn a_server_without_pkce_s256_or_the_code_grant_is_refused() {
    for changes in [
        json!({"code_challenge_methods_supported": null}),
        json!({"code_challenge_methods_supported": ["plain"]}),
    ] {
        let err = login_with(&server(changes), OAuthLogin::default(), memory())
            .start()
            .await
            .unwrap_err();
        assert!(err.to_string().contains("S256"), "{err}");
    }
    let err = login_with(
        &server(json!({"grant_types_supported": ["client_credentials"]})),
        OAuthLogin::default(),
        memory(),
    )
    .start()
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("authorization_code grant"),
        "{err}"
    );
}

#[tokio::test]
async fn a_pre_registered_client_is_used_as_configured() {
    // A public client: its id in the body, no registration.
    let fake = server(json!({}));
    let mut login = OAuthLogin::default();
    login.client_id = Some("my-app".into());
    let pending = login_with(&fake, login, memory()).start().await.unwrap();
    assert_eq!(
        param(pending.authorization_url(), "client_id").as_deref(),
        Some("my-app")
    );
    let url = pending.authorization_url().clone();
    pending
        .finish(Callback::parse(&redirect(&url, "c", Some(ISSUER))))
        .await
        .unwrap();
    assert!(fake.sent_to(&format!("POST {REGISTER_URL}")).is_empty());
    assert_eq!(
        fake.sent_to(&token_key())[0].form("client_id").as_deref(),
        Some("my-app")
    );

    // Confidential: basic and post. The secret goes only to an issuer on the server's host
    // or an allowed one.
    for (method, basic) in [
        (TokenEndpointAuthMethod::ClientSecretBasic, true),
        (TokenEndpointAuthMethod::ClientSecretPost, false),
    ] {
        let fake = server(json!({}));
        let mut login = OAuthLogin::default();
        login.client_id = Some("my-app".into());
        login.client_secret = Some(SecretSource::Inline("app-secret-987654".into()));
        login.token_endpoint_auth_method = Some(method);
        let err = login_with(&fake, login.clone(), memory())
            .start()
            .await
            .unwrap_err();
        assert!(err.to_string().contains("allowed_issuers"), "{err}");
        login.allowed_issuers = vec![ISSUER.parse().unwrap()];
        let pending = login_with(&fake, login, memory()).start().await.unwrap();
        let url = pending.authorization_url().clone();
        let stored = pending
            .finish(Callback::parse(&redirect(&url, "c", Some(ISSUER))))
            .await
            .unwrap();
        let sent = &fake.sent_to(&token_key())[0];
        assert_eq!(sent.headers.get("authorization").is_some(), basic);
        assert_eq!(
            sent.form("client_secret").as_deref(),
            (!basic).then_some("app-secret-987654")
        );
        assert!(
            stored.client_secret.is_none(),
            "a configured secret is not stored"
        );
    }
}

#[tokio::test]
async fn a_client_metadata_document_is_the_client_id_when_the_server_supports_them() {
    let mut login = OAuthLogin::default();
    login.client_metadata_url = Some("https://agent.example/client.json".parse().unwrap());
    let fake = server(json!({"client_id_metadata_document_supported": true}));
    let pending = login_with(&fake, login.clone(), memory())
        .start()
        .await
        .unwrap();
    assert_eq!(pending.client_id(), "https://agent.example/client.json");
    assert!(fake.sent_to(&format!("POST {REGISTER_URL}")).is_empty());

    // Not supported: registration instead.
    let fake = server(json!({}));
    let pending = login_with(&fake, login, memory()).start().await.unwrap();
    assert_eq!(pending.client_id(), "dyn-client");
}

#[tokio::test]
async fn registration_answers_are_checked_and_no_way_to_a_client_is_explained() {
    let fake = server(json!({}));
    fake.route(
        &format!("POST {REGISTER_URL}"),
        400,
        json!({"error": "invalid_redirect_uri", "error_description": "https only"}),
    );
    let err = login_with(&fake, OAuthLogin::default(), memory())
        .start()
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "server `srv`: client registration at https://auth.example/register: refused (HTTP 400): invalid_redirect_uri: https only"
    );

    // A registration that issues a secret: it is used and kept with the login.
    let fake = server(json!({}));
    fake.route(
        &format!("POST {REGISTER_URL}"),
        201,
        json!({"client_id": "dyn-2", "client_secret": "dyn-secret-123456", "token_endpoint_auth_method": "client_secret_post"}),
    );
    let pending = login_with(&fake, OAuthLogin::default(), memory())
        .start()
        .await
        .unwrap();
    let url = pending.authorization_url().clone();
    let stored = pending
        .finish(Callback::parse(&redirect(&url, "c", Some(ISSUER))))
        .await
        .unwrap();
    assert_eq!(
        stored.client_secret.as_ref().unwrap().expose(),
        "dyn-secret-123456"
    );
    assert_eq!(stored.token_endpoint_auth_method, "client_secret_post");
    assert_eq!(
        fake.sent_to(&token_key())[0]
            .form("client_secret")
            .as_deref(),
        Some("dyn-secret-123456")
    );

    let fake = server(json!({"registration_endpoint": null}));
    let err = login_with(&fake, OAuthLogin::default(), memory())
        .start()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("set `client_id`"), "{err}");
}

#[tokio::test]
async fn a_refused_code_is_reported_without_the_code() {
    let fake = server(json!({}));
    fake.route(
        &token_key(),
        400,
        json!({"error": "invalid_grant", "error_description": "code code-secret-999 expired"}),
    );
    let err = finish_with(&fake, |url| {
        Callback::parse(&redirect(url, "code-secret-999", Some(ISSUER)))
    })
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "server `srv`: OAuth login failed: the token endpoint refused the authorization code (HTTP 400): invalid_grant: code [REDACTED] expired"
    );
}

#[tokio::test]
async fn a_login_over_plain_http_is_refused_unless_loopback() {
    let fake = server(json!({}));
    let mut spec = spec(OAuthLogin::default());
    if let mcp_config::TransportSpec::StreamableHttp(http) = &mut spec.transport {
        http.url = "http://mcp.example/mcp".parse().unwrap();
    }
    let err = mcp_auth::Login::new(&spec, fake.clone(), memory())
        .unwrap()
        .with_redirect_uri(mcp_auth::loopback_redirect_uri(1))
        .start()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("plain http"), "{err}");
    assert!(fake.sent().is_empty());
}
