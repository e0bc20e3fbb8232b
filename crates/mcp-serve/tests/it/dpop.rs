//! DPoP-bound tokens at the gateway (`JwtAuth::dpop`): a token bound to a key (`cnf.jkt`)
//! with a fresh proof of that key passes; a replayed proof, one for another URL or method, one
//! ten minutes old, one by another key than the token's, and a bearer token where DPoP is
//! required are answered 401 (`invalid_dpop_proof` for a proof) and reach nothing.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use mcp_serve::{BearerAuth, DpopPolicy, HttpOptions, HttpServer, JwtAuth};
use ring::digest::{SHA256, digest};
use ring::rand::{SecureRandom as _, SystemRandom};
use ring::signature::{self, EcdsaKeyPair, KeyPair as _};
use serde_json::{Value, json};

use crate::jwt::{ISSUER, Jwks, Signer, claims, now};
use crate::support::{POST_HEADERS, Tools, all_but_hidden, initialize_body, send, serve_http};

/// A client's DPoP key.
struct ProofKey(EcdsaKeyPair);

impl ProofKey {
    fn new() -> Self {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        Self(EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap())
    }

    fn xy(&self) -> (String, String) {
        let point = self.0.public_key().as_ref();
        (
            URL_SAFE_NO_PAD.encode(&point[1..33]),
            URL_SAFE_NO_PAD.encode(&point[33..65]),
        )
    }

    /// RFC 7638 thumbprint: what a bound token's `cnf.jkt` holds.
    fn jkt(&self) -> String {
        let (x, y) = self.xy();
        let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
        URL_SAFE_NO_PAD.encode(digest(&SHA256, canonical.as_bytes()))
    }

    /// A proof for `htm` `htu` at `iat`, bound to `token`, with a fresh `jti`.
    fn proof(&self, htm: &str, htu: &str, iat: u64, token: &str) -> String {
        let (x, y) = self.xy();
        let mut jti = [0u8; 16];
        SystemRandom::new().fill(&mut jti).unwrap();
        let header = json!({"typ": "dpop+jwt", "alg": "ES256",
                            "jwk": {"kty": "EC", "crv": "P-256", "x": x, "y": y}});
        let claims = json!({"htm": htm, "htu": htu, "iat": iat,
                            "jti": URL_SAFE_NO_PAD.encode(jti),
                            "ath": URL_SAFE_NO_PAD.encode(digest(&SHA256, token.as_bytes()))});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let sig = self.0.sign(&SystemRandom::new(), input.as_bytes()).unwrap();
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
    }
}

async fn gateway(tools: &Arc<Tools>, jwt: JwtAuth) -> HttpServer {
    let options = HttpOptions::default()
        .with_auth(BearerAuth::jwt(jwt).expect("JWT settings"))
        .with_auth_failure_limit(None);
    serve_http(tools, all_but_hidden(), options).await
}

/// POSTs `initialize` with `authorization` and `proof`; the status and the challenge.
async fn post(server: &HttpServer, authorization: &str, proof: Option<&str>) -> (u16, String) {
    let mut headers: Vec<(&str, &str)> = POST_HEADERS.to_vec();
    headers.push(("authorization", authorization));
    if let Some(proof) = proof {
        headers.push(("dpop", proof));
    }
    let answer = send("POST", server.url().as_str(), &headers, initialize_body()).await;
    let www = answer
        .headers
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (answer.status, www)
}

/// A token of the issuer for `aud`, bound to `jkt` when given.
fn token(signer: &Signer, aud: &str, jkt: Option<&str>) -> String {
    let mut claims: Value = claims(aud);
    if let Some(jkt) = jkt {
        claims["cnf"] = json!({"jkt": jkt});
    }
    signer.token("ec-1", &claims)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_fresh_proof_of_the_tokens_own_key_for_this_request_passes() {
    let issuer = Signer::ec();
    let jwks = Jwks::serve(json!([issuer.jwk("ec-1")])).await;
    let tools = Arc::new(Tools::default());
    let jwt = JwtAuth::new(ISSUER, jwks.url.clone()).with_dpop(DpopPolicy::Required);
    let server = gateway(&tools, jwt).await;
    let url = server.url().to_string();
    let key = ProofKey::new();
    let bound = token(&issuer, &url, Some(&key.jkt()));
    let authorization = format!("DPoP {bound}");

    let proof = key.proof("POST", &url, now(), &bound);
    assert_eq!(post(&server, &authorization, Some(&proof)).await.0, 200);

    let refused = |what: &'static str, (status, www): (u16, String)| {
        assert_eq!(status, 401, "{what}");
        assert!(www.starts_with("DPoP resource_metadata="), "{what}: {www}");
        www
    };
    let www = refused(
        "a replayed proof",
        post(&server, &authorization, Some(&proof)).await,
    );
    assert!(www.contains(r#"error="invalid_dpop_proof""#), "{www}");
    for (what, proof) in [
        (
            "another URL",
            key.proof("POST", &format!("{url}/other"), now(), &bound),
        ),
        ("another method", key.proof("GET", &url, now(), &bound)),
        (
            "ten minutes old",
            key.proof("POST", &url, now() - 600, &bound),
        ),
        (
            "another key than the token's",
            ProofKey::new().proof("POST", &url, now(), &bound),
        ),
        (
            "for another token",
            key.proof("POST", &url, now(), "another-token"),
        ),
    ] {
        let www = refused(what, post(&server, &authorization, Some(&proof)).await);
        assert!(
            www.contains(r#"error="invalid_dpop_proof""#),
            "{what}: {www}"
        );
    }
    refused("no proof", post(&server, &authorization, None).await);

    // Bearer tokens where DPoP is required: an unbound one, and the bound one presented as
    // bearer (RFC 9449 §7.2).
    let unbound = token(&issuer, &url, None);
    let www = refused(
        "a bearer token",
        post(&server, &format!("Bearer {unbound}"), None).await,
    );
    assert!(www.contains(r#"error="invalid_token""#), "{www}");
    refused(
        "a bound token as bearer",
        post(
            &server,
            &format!("Bearer {bound}"),
            Some(&key.proof("POST", &url, now(), &bound)),
        )
        .await,
    );
    // An unbound token with the DPoP scheme.
    refused(
        "an unbound token as DPoP",
        post(
            &server,
            &format!("DPoP {unbound}"),
            Some(&key.proof("POST", &url, now(), &unbound)),
        )
        .await,
    );
    assert_eq!(tools.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_dpop_takes_both_and_without_it_only_bearer_tokens_pass() {
    let issuer = Signer::ec();
    let jwks = Jwks::serve(json!([issuer.jwk("ec-1")])).await;
    let tools = Arc::new(Tools::default());
    let allowed = gateway(
        &tools,
        JwtAuth::new(ISSUER, jwks.url.clone()).with_dpop(DpopPolicy::Allowed),
    )
    .await;
    let url = allowed.url().to_string();
    let key = ProofKey::new();
    let bound = token(&issuer, &url, Some(&key.jkt()));
    let proof = key.proof("POST", &url, now(), &bound);
    assert_eq!(
        post(&allowed, &format!("DPoP {bound}"), Some(&proof))
            .await
            .0,
        200
    );
    let unbound = token(&issuer, &url, None);
    assert_eq!(
        post(&allowed, &format!("Bearer {unbound}"), None).await.0,
        200
    );
    // The challenge offers both schemes.
    let (status, www) = post(&allowed, "Bearer nope", None).await;
    assert_eq!(status, 401);
    assert!(
        www.starts_with("DPoP ") && www.contains(", Bearer resource_metadata="),
        "{www}"
    );

    let bearer_only = gateway(&tools, JwtAuth::new(ISSUER, jwks.url.clone())).await;
    let url = bearer_only.url().to_string();
    let bound = token(&issuer, &url, Some(&key.jkt()));
    let proof = key.proof("POST", &url, now(), &bound);
    let (status, www) = post(&bearer_only, &format!("DPoP {bound}"), Some(&proof)).await;
    assert_eq!(status, 401);
    assert!(www.starts_with("Bearer "), "{www}");
    // Nor does a bound token pass as a bearer token there: whoever stole it holds no key.
    let (status, www) = post(&bearer_only, &format!("Bearer {bound}"), None).await;
    assert_eq!(status, 401);
    assert!(www.contains("invalid_token"), "{www}");
    let unbound = token(&issuer, &url, None);
    assert_eq!(
        post(&bearer_only, &format!("Bearer {unbound}"), None)
            .await
            .0,
        200
    );
}
