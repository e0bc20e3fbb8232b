//! DPoP (RFC 9449): proofs at the token endpoint and on resource requests, the authorization
//! server's nonce (retried once, a loop refused), and what `dpop = true` and `"preferred"` do
//! with a server that issues bearer tokens.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use mcp_auth::{AuthError, AuthRegistry, Callback, TokenStore};
use mcp_config::{DpopMode, OAuthLogin};
use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
use serde_json::{Value, json};

use crate::fake::*;

fn token_key() -> String {
    format!("POST {TOKEN_URL}")
}

fn dpop_login(mode: DpopMode) -> OAuthLogin {
    let mut login = OAuthLogin::default();
    login.dpop = mode;
    login
}

fn dpop_answer(access: &str) -> Value {
    json!({"access_token": access, "token_type": "DPoP", "expires_in": 3600, "refresh_token": "refresh-dpop-123456"})
}

/// A proof's header and claims, after checking its signature with the key it names.
fn verified(proof: &str) -> (Value, Value) {
    let part = |i: usize| -> Value {
        let text = proof.split('.').nth(i).unwrap();
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(text).unwrap()).unwrap()
    };
    let (header, claims) = (part(0), part(1));
    assert_eq!(header["typ"], "dpop+jwt");
    assert_eq!(header["alg"], "ES256");
    assert!(
        header["jwk"].get("d").is_none(),
        "no private key in a proof"
    );
    let coordinate = |name: &str| URL_SAFE_NO_PAD.decode(header["jwk"][name].as_str().unwrap());
    let mut point = vec![4u8];
    point.extend(coordinate("x").unwrap());
    point.extend(coordinate("y").unwrap());
    let (input, signature) = proof.rsplit_once('.').unwrap();
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
        .verify(
            input.as_bytes(),
            &URL_SAFE_NO_PAD.decode(signature).unwrap(),
        )
        .expect("the proof verifies with its own jwk");
    (header, claims)
}

async fn finish(
    fake: &Arc<Fake>,
    mode: DpopMode,
    store: Arc<dyn TokenStore>,
) -> Result<mcp_auth::StoredLogin, AuthError> {
    let pending = login_with(fake, dpop_login(mode), store)
        .start()
        .await
        .unwrap();
    let url = pending.authorization_url().clone();
    pending
        .finish(Callback::parse(&redirect(
            &url,
            "code-dpop-123456",
            Some(ISSUER),
        )))
        .await
}

#[tokio::test]
async fn a_dpop_login_proves_its_key_at_the_token_endpoint_and_on_every_request() {
    let fake = server(json!({"dpop_signing_alg_values_supported": ["ES256"]}));
    fake.route(&token_key(), 200, dpop_answer("access-dpop-123456"));
    let store = memory();
    let stored = finish(&fake, DpopMode::Required, store.clone())
        .await
        .unwrap();
    assert!(
        stored.dpop_key.is_some(),
        "the key is kept with the bound tokens"
    );

    let requests = fake.sent_to(&token_key());
    assert_eq!(requests.len(), 1);
    let proof = requests[0].headers["dpop"].to_str().unwrap();
    let (token_header, claims) = verified(proof);
    assert_eq!(claims["htm"], "POST");
    assert_eq!(claims["htu"], TOKEN_URL);
    assert!(claims.get("ath").is_none(), "no access token yet");
    assert!(claims["iat"].is_u64() && claims["jti"].is_string());

    // The MCP server's requests: the DPoP scheme and a fresh proof each time.
    let registry = AuthRegistry::new(fake.clone()).with_token_store(store.clone());
    let auth = registry
        .provider(&spec(dpop_login(DpopMode::Required)))
        .unwrap();
    let mut jtis = Vec::new();
    for method in [http::Method::POST, http::Method::GET] {
        let credentials = auth
            .credentials_for(&method, &format!("{MCP_URL}?session=1"))
            .await
            .unwrap();
        assert_eq!(
            credentials.get("authorization").unwrap(),
            "DPoP access-dpop-123456"
        );
        let (header, claims) = verified(credentials.get("dpop").unwrap().to_str().unwrap());
        assert_eq!(header["jwk"], token_header["jwk"], "one key for the login");
        assert_eq!(claims["htm"], method.as_str());
        assert_eq!(claims["htu"], MCP_URL, "no query in htu");
        let ath = URL_SAFE_NO_PAD.encode(ring::digest::digest(
            &ring::digest::SHA256,
            b"access-dpop-123456",
        ));
        assert_eq!(claims["ath"], ath);
        jtis.push(claims["jti"].clone());
    }
    assert_ne!(jtis[0], jtis[1]);

    // The resource server's nonce goes into the next proof.
    let mut headers = http::HeaderMap::new();
    headers.insert("dpop-nonce", "rs-nonce-1".parse().unwrap());
    assert!(auth.observe_response(MCP_URL, &headers));
    assert!(!auth.observe_response(MCP_URL, &headers), "not new twice");
    let credentials = auth
        .credentials_for(&http::Method::POST, MCP_URL)
        .await
        .unwrap();
    let (_, claims) = verified(credentials.get("dpop").unwrap().to_str().unwrap());
    assert_eq!(claims["nonce"], "rs-nonce-1");
}

#[tokio::test]
async fn the_authorization_servers_nonce_is_sent_on_one_retry() {
    let fake = server(json!({}));
    fake.sequence(
        &token_key(),
        vec![
            (400, json!({"error": "use_dpop_nonce"})),
            (200, dpop_answer("access-dpop-123456")),
        ],
    );
    *fake.dpop_nonce.lock().unwrap() = Some(("as-nonce".into(), 0));
    let stored = finish(&fake, DpopMode::Required, memory()).await.unwrap();
    assert!(stored.dpop_key.is_some());
    let requests = fake.sent_to(&token_key());
    assert_eq!(requests.len(), 2);
    let (_, first) = verified(requests[0].headers["dpop"].to_str().unwrap());
    let (_, second) = verified(requests[1].headers["dpop"].to_str().unwrap());
    assert!(first.get("nonce").is_none());
    // The metadata requests before it also carried nonces; the token endpoint's is the last.
    assert!(second["nonce"].as_str().unwrap().starts_with("as-nonce-"));
    assert_ne!(first["jti"], second["jti"]);
}

#[tokio::test]
async fn an_authorization_server_asking_for_a_nonce_again_and_again_is_refused() {
    let fake = server(json!({}));
    fake.route(&token_key(), 400, json!({"error": "use_dpop_nonce"}));
    *fake.dpop_nonce.lock().unwrap() = Some(("loop".into(), 0));
    let err = finish(&fake, DpopMode::Required, memory())
        .await
        .unwrap_err();
    assert!(matches!(err, AuthError::Dpop { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.starts_with("server `srv`: DPoP: "), "{text}");
    assert!(text.contains("use_dpop_nonce"), "{text}");
    assert_eq!(fake.sent_to(&token_key()).len(), 2, "one retry, no more");
}

#[tokio::test]
async fn a_bearer_token_is_refused_when_dpop_is_required_and_taken_when_preferred() {
    let fake = server(json!({}));
    let err = finish(&fake, DpopMode::Required, memory())
        .await
        .unwrap_err();
    assert!(matches!(err, AuthError::Dpop { .. }), "{err:?}");
    assert!(err.to_string().contains("Bearer"), "{err}");
    assert!(!err.to_string().contains("access-one-123456"), "{err}");

    let store = memory();
    let stored = finish(&fake, DpopMode::Preferred, store.clone())
        .await
        .unwrap();
    assert!(stored.dpop_key.is_none(), "a bearer login keeps no key");
    // The proof was offered all the same.
    assert!(
        fake.sent_to(&token_key())
            .last()
            .unwrap()
            .headers
            .contains_key("dpop")
    );
    let registry = AuthRegistry::new(fake.clone()).with_token_store(store);
    let auth = registry
        .provider(&spec(dpop_login(DpopMode::Preferred)))
        .unwrap();
    let credentials = auth
        .credentials_for(&http::Method::POST, MCP_URL)
        .await
        .unwrap();
    assert_eq!(
        credentials.get("authorization").unwrap(),
        "Bearer access-one-123456"
    );
    assert!(credentials.get("dpop").is_none());
}

#[tokio::test]
async fn client_credentials_with_dpop_bind_their_token_to_a_key_of_their_own() {
    let fake = Arc::new(Fake::default());
    fake.route(&token_key(), 200, dpop_answer("cc-dpop-123456"));
    let spec = mcp_config::ServerSpec::from_json(
        &json!({"name": "srv", "url": MCP_URL, "auth": {"oauth_client_credentials": {
            "client_id": "client", "client_secret": "secret-123456",
            "token_url": TOKEN_URL, "dpop": true,
        }}}),
        mcp_config::SpecOrigin::Operator,
    )
    .unwrap();
    let registry = AuthRegistry::new(fake.clone());
    let auth = registry.provider(&spec).unwrap();
    let credentials = auth
        .credentials_for(&http::Method::POST, MCP_URL)
        .await
        .unwrap();
    assert_eq!(
        credentials.get("authorization").unwrap(),
        "DPoP cc-dpop-123456"
    );
    let (header, _) = verified(credentials.get("dpop").unwrap().to_str().unwrap());
    let sent = fake.sent_to(&token_key());
    let (token_header, _) = verified(sent[0].headers["dpop"].to_str().unwrap());
    assert_eq!(header["jwk"], token_header["jwk"]);
}
