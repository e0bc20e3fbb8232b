//! Inbound JWT authentication against a JWKS served by an in-test hyper server: RS256 and
//! ES256 tokens signed here pass; no token, an expired one, another audience, another
//! issuer, an unknown key, `alg: none` and an HS256 token keyed with the public key are
//! answered 401 with the resource metadata and reach nothing; a rotated key is found after
//! one refetch (and an unknown `kid` does not refetch again within the interval); a JWKS
//! that cannot be fetched gives 401 and leaves the gateway up; an RSA key published with
//! leading zero bytes verifies; an over-long `kid` is refused without a refetch; the
//! metadata names the issuer exactly as configured; an HTTP/2 client resetting its stream
//! while the JWKS is held does not cancel the refetch, and a cached key is served meanwhile.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use mcp_serve::{BearerAuth, HttpOptions, HttpServer, JwtAuth, RateLimit};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair};
use serde_json::{Value, json};

use crate::support::{POST_HEADERS, Tools, all_but_hidden, initialize_body, send, serve_http};

pub(crate) const ISSUER: &str = "https://issuer.test";
/// A 2048-bit RSA key made for these tests only.
const RSA_PEM: &str = include_str!("keys/rsa-2048-test-only.pem");

/// A signing key and the JWK of its public half.
pub(crate) enum Signer {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
}

impl Signer {
    fn rsa() -> Self {
        let body: String = RSA_PEM
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect();
        let der = STANDARD.decode(body).unwrap();
        Self::Rsa(RsaKeyPair::from_pkcs8(&der).unwrap())
    }

    pub(crate) fn ec() -> Self {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        Self::Ec(EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap())
    }

    fn alg(&self) -> &'static str {
        match self {
            Self::Rsa(_) => "RS256",
            Self::Ec(_) => "ES256",
        }
    }

    pub(crate) fn jwk(&self, kid: &str) -> Value {
        match self {
            Self::Rsa(key) => {
                let (n, e) = rsa_public(key.public().as_ref());
                json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                       "n": URL_SAFE_NO_PAD.encode(n), "e": URL_SAFE_NO_PAD.encode(e)})
            }
            Self::Ec(key) => {
                let point = key.public_key().as_ref();
                json!({"kty": "EC", "kid": kid, "crv": "P-256",
                       "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
                       "y": URL_SAFE_NO_PAD.encode(&point[33..65])})
            }
        }
    }

    /// A compact JWT with these `claims`, signed with this key and naming `kid`.
    pub(crate) fn token(&self, kid: &str, claims: &Value) -> String {
        let header = json!({"alg": self.alg(), "typ": "JWT", "kid": kid});
        let input = format!("{}.{}", b64(&header), b64(claims));
        let rng = SystemRandom::new();
        let sig = match self {
            Self::Rsa(key) => {
                let mut sig = vec![0; key.public().modulus_len()];
                key.sign(
                    &signature::RSA_PKCS1_SHA256,
                    &rng,
                    input.as_bytes(),
                    &mut sig,
                )
                .unwrap();
                sig
            }
            Self::Ec(key) => key.sign(&rng, input.as_bytes()).unwrap().as_ref().to_vec(),
        };
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig))
    }
}

fn b64(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

/// `n` and `e` of a DER `RSAPublicKey` (SEQUENCE of two INTEGERs).
fn rsa_public(der: &[u8]) -> (Vec<u8>, Vec<u8>) {
    fn item(der: &[u8]) -> (u8, &[u8], &[u8]) {
        let tag = der[0];
        let (len, start) = if der[1] < 0x80 {
            (der[1] as usize, 2)
        } else {
            let count = (der[1] & 0x7f) as usize;
            let len = der[2..2 + count]
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | *b as usize);
            (len, 2 + count)
        };
        (tag, &der[start..start + len], &der[start + len..])
    }
    let (_, seq, _) = item(der);
    let (_, n, rest) = item(seq);
    let (_, e, _) = item(rest);
    let strip = |b: &[u8]| b.iter().skip_while(|x| **x == 0).copied().collect();
    (strip(n), strip(e))
}

pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Claims valid for `aud` for the next ten minutes.
pub(crate) fn claims(aud: &str) -> Value {
    json!({"iss": ISSUER, "aud": aud, "sub": "client-1", "iat": now(), "exp": now() + 600})
}

/// A JWKS endpoint on 127.0.0.1 serving whatever `keys` holds, counting its requests; while
/// held ([`Jwks::hold`]) it counts them but answers only once released.
pub(crate) struct Jwks {
    pub(crate) url: url::Url,
    keys: Arc<Mutex<Value>>,
    hits: Arc<tokio::sync::watch::Sender<usize>>,
    open: Arc<tokio::sync::watch::Sender<bool>>,
    task: tokio::task::JoinHandle<()>,
}

impl Jwks {
    pub(crate) async fn serve(keys: Value) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let keys = Arc::new(Mutex::new(keys));
        let hits = Arc::new(tokio::sync::watch::Sender::new(0));
        let open = Arc::new(tokio::sync::watch::Sender::new(true));
        let (k, h, o) = (keys.clone(), hits.clone(), open.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (k, h, o) = (k.clone(), h.clone(), o.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |_request| {
                        h.send_modify(|n| *n += 1);
                        let (k, mut open) = (k.clone(), o.subscribe());
                        async move {
                            let _ = open.wait_for(|open| *open).await;
                            let body = json!({"keys": k.lock().unwrap().clone()}).to_string();
                            Ok::<_, Infallible>(
                                http::Response::builder()
                                    .header("content-type", "application/json")
                                    .body(Full::new(Bytes::from(body)))
                                    .unwrap(),
                            )
                        }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            url: format!("http://{addr}/jwks").parse().unwrap(),
            keys,
            hits,
            open,
            task,
        }
    }

    pub(crate) fn hits(&self) -> usize {
        *self.hits.borrow()
    }

    /// Returns once the endpoint has received `n` requests.
    async fn reached(&self, n: usize) {
        let _ = self.hits.subscribe().wait_for(|hits| *hits >= n).await;
    }

    /// Requests are counted but not answered until [`Jwks::release`].
    fn hold(&self) {
        self.open.send_replace(false);
    }

    fn release(&self) {
        self.open.send_replace(true);
    }

    fn publish(&self, keys: Value) {
        *self.keys.lock().unwrap() = keys;
    }
}

impl Drop for Jwks {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A gateway verifying `jwt`; every refused token is checked (no budget of failures: these
/// tests send more refused tokens than it allows).
async fn gateway(tools: &Arc<Tools>, jwt: JwtAuth) -> HttpServer {
    let auth = BearerAuth::jwt(jwt).expect("JWT settings");
    let options = HttpOptions::default()
        .with_auth(auth)
        .with_auth_failure_limit(None);
    serve_http(tools, all_but_hidden(), options).await
}

/// JWT settings whose JWKS is on a port nothing listens on any more.
async fn unreachable_jwks() -> JwtAuth {
    let closed = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap()
    };
    let url: url::Url = format!("http://{closed}/jwks").parse().unwrap();
    JwtAuth::new(ISSUER, url).with_fetch_timeout(Duration::from_secs(5))
}

/// POSTs `initialize` with `token` (none: no `Authorization`) and returns status and challenge.
async fn attempt(server: &HttpServer, token: Option<&str>) -> (u16, String) {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers: Vec<(&str, &str)> = POST_HEADERS.to_vec();
    if let Some(b) = &bearer {
        headers.push(("authorization", b.as_str()));
    }
    let answer = send("POST", server.url().as_str(), &headers, initialize_body()).await;
    let www = answer
        .headers
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (answer.status, www)
}

fn assert_refused(server: &HttpServer, (status, www): &(u16, String), what: &str) {
    assert_eq!(*status, 401, "{what}");
    let metadata = server.resource_metadata_url().unwrap();
    assert!(
        www.starts_with(&format!("Bearer resource_metadata=\"{metadata}\"")),
        "{what}: {www}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_current_token_of_the_issuer_for_this_endpoint_passes() {
    let rsa = Signer::rsa();
    let ec = Signer::ec();
    let jwks = Jwks::serve(json!([rsa.jwk("rsa-1"), ec.jwk("ec-1")])).await;
    let tools = Arc::new(Tools::default());
    let server = gateway(&tools, JwtAuth::new(ISSUER, jwks.url.clone())).await;
    let aud = server.url().to_string();

    // The metadata names the issuer as the authorization server.
    let metadata = server.resource_metadata_url().unwrap().clone();
    let doc = send("GET", metadata.as_str(), &[], Bytes::new())
        .await
        .json();
    assert_eq!(doc["resource"], aud.as_str());
    assert_eq!(doc["authorization_servers"], json!(["https://issuer.test"]));

    // Valid tokens: RS256, ES256, and an audience list holding the endpoint.
    for token in [
        rsa.token("rsa-1", &claims(&aud)),
        ec.token("ec-1", &claims(&aud)),
        ec.token(
            "ec-1",
            &json!({"iss": ISSUER, "aud": ["other", aud], "exp": now() + 60, "nbf": now()}),
        ),
    ] {
        assert_eq!(attempt(&server, Some(&token)).await.0, 200);
    }
    // A real client calls a tool with one.
    let token = rsa.token("rsa-1", &claims(&aud));
    let runner = crate::support::mcp_client_http(server.url(), Some(&token)).await;
    let out = crate::support::call_through(&runner, "mapping", json!({"a": 2})).await;
    assert_eq!(out.unwrap().structured, Some(json!({"sum": 2.0})));
    assert_eq!(tools.calls(), 1);
    agent_core::Runner::close(&runner).await;

    let stranger = Signer::ec();
    let mut expired = claims(&aud);
    expired["exp"] = json!(now() - 120);
    let mut early = claims(&aud);
    early["nbf"] = json!(now() + 600);
    let mut no_exp = claims(&aud);
    no_exp.as_object_mut().unwrap().remove("exp");
    let mut issuer = claims(&aud);
    issuer["iss"] = json!("https://issuer.test/");
    let unsigned = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "kid": "rsa-1"})),
        b64(&claims(&aud))
    );
    // HS256 keyed with the RSA public key's JWK modulus (the classic confusion attack).
    let hs256 = {
        let input = format!(
            "{}.{}",
            b64(&json!({"alg": "HS256", "kid": "rsa-1"})),
            b64(&claims(&aud))
        );
        let secret = rsa.jwk("rsa-1")["n"].as_str().unwrap().to_owned();
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
        let tag = ring::hmac::sign(&key, input.as_bytes());
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    };
    let tampered = {
        let good = rsa.token("rsa-1", &claims(&aud));
        let mut parts: Vec<&str> = good.split('.').collect();
        let other = b64(&claims("https://elsewhere.test/mcp"));
        parts[1] = &other;
        parts.join(".")
    };
    let cases: Vec<(&str, Option<String>, &str)> = vec![
        ("no token", None, ""),
        ("expired", Some(rsa.token("rsa-1", &expired)), "expired"),
        (
            "not yet valid",
            Some(rsa.token("rsa-1", &early)),
            "invalid_token",
        ),
        ("no exp", Some(rsa.token("rsa-1", &no_exp)), "invalid_token"),
        (
            "another audience",
            Some(rsa.token("rsa-1", &claims("https://elsewhere.test/mcp"))),
            "invalid_token",
        ),
        (
            "another issuer",
            Some(rsa.token("rsa-1", &issuer)),
            "invalid_token",
        ),
        (
            "an unknown key under a known kid",
            Some(stranger.token("ec-1", &claims(&aud))),
            "invalid_token",
        ),
        (
            "an unknown kid",
            Some(stranger.token("ec-9", &claims(&aud))),
            "invalid_token",
        ),
        ("alg none", Some(unsigned), "invalid_token"),
        ("HS256", Some(hs256), "invalid_token"),
        ("tampered claims", Some(tampered), "invalid_token"),
        ("not a JWT", Some("abc.def".into()), "invalid_token"),
    ];
    for (what, token, challenge) in cases {
        let answer = attempt(&server, token.as_deref()).await;
        assert_refused(&server, &answer, what);
        assert!(answer.1.contains(challenge), "{what}: {}", answer.1);
        assert!(!answer.1.contains("issuer.test"), "{what}: {}", answer.1);
    }
    assert_eq!(tools.calls(), 1, "no refused request reached the tools");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_is_fetched_once_and_unknown_kids_do_not_refetch_within_the_interval() {
    let old = Signer::ec();
    let new = Signer::ec();
    let jwks = Jwks::serve(json!([old.jwk("k1")])).await;
    let tools = Arc::new(Tools::default());
    let jwt =
        JwtAuth::new(ISSUER, jwks.url.clone()).with_refetch_interval(Duration::from_secs(600));
    let server = gateway(&tools, jwt).await;
    let aud = server.url().to_string();
    assert_eq!(jwks.hits(), 0, "keys are fetched on demand");

    assert_eq!(
        attempt(&server, Some(&old.token("k1", &claims(&aud))))
            .await
            .0,
        200
    );
    assert_eq!(
        attempt(&server, Some(&old.token("k1", &claims(&aud))))
            .await
            .0,
        200
    );
    assert_eq!(jwks.hits(), 1, "known keys come from the cache");

    // The issuer rotates: the set now holds the new key only.
    jwks.publish(json!([new.jwk("k2")]));
    assert_eq!(
        attempt(&server, Some(&new.token("k2", &claims(&aud))))
            .await
            .0,
        200
    );
    assert_eq!(jwks.hits(), 2, "an unknown kid fetched the set once");
    assert_eq!(
        attempt(&server, Some(&new.token("k2", &claims(&aud))))
            .await
            .0,
        200
    );
    assert_eq!(jwks.hits(), 2);

    // The old key is gone; a token naming yet another kid does not refetch again.
    let answer = attempt(&server, Some(&old.token("k1", &claims(&aud)))).await;
    assert_refused(&server, &answer, "the retired key");
    for _ in 0..3 {
        let answer = attempt(&server, Some(&new.token("k3", &claims(&aud)))).await;
        assert_refused(&server, &answer, "an unknown kid");
    }
    assert_eq!(jwks.hits(), 2, "refetches are rate-limited");
    assert_eq!(tools.calls(), 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_that_cannot_be_fetched_refuses_tokens_and_the_gateway_stays_up() {
    let tools = Arc::new(Tools::default());
    let jwt = unreachable_jwks().await;
    let server = gateway(&tools, jwt).await;
    let aud = server.url().to_string();
    let signer = Signer::ec();
    for _ in 0..3 {
        let answer = attempt(&server, Some(&signer.token("k1", &claims(&aud)))).await;
        assert_refused(&server, &answer, "JWKS down");
        assert!(answer.1.contains("cannot be verified now"), "{}", answer.1);
    }
    // Still serving: the metadata answers.
    let metadata = server.resource_metadata_url().unwrap().clone();
    assert_eq!(
        send("GET", metadata.as_str(), &[], Bytes::new())
            .await
            .status,
        200
    );
    assert_eq!(tools.calls(), 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_that_cannot_be_verified_now_do_not_spend_the_address_s_failure_budget() {
    let tools = Arc::new(Tools::default());
    let jwt = unreachable_jwks().await;
    // Two failures, then `429` for the budget's (practically) whole refill.
    let options = HttpOptions::default()
        .with_auth(BearerAuth::jwt(jwt).expect("JWT settings"))
        .with_auth_failure_limit(Some(RateLimit::new(0.001, 2)));
    let server = serve_http(&tools, all_but_hidden(), options).await;
    let aud = server.url().to_string();
    let signer = Signer::ec();
    for attempt_no in 0..4 {
        let answer = attempt(&server, Some(&signer.token("k1", &claims(&aud)))).await;
        assert_eq!(
            answer.0, 401,
            "attempt {attempt_no}: the keys' outage is not the client's"
        );
        assert!(answer.1.contains("cannot be verified now"), "{}", answer.1);
    }
    // A bad token is still the client's failure, counted as before.
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(attempt(&server, Some("not-a-jwt")).await.0);
    }
    assert_eq!(statuses, [401, 401, 429]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_without_usable_keys_is_not_fetched_again_on_every_request() {
    let jwks = Jwks::serve(json!([{"kty": "oct", "k": "c2VjcmV0", "kid": "h"}])).await;
    let tools = Arc::new(Tools::default());
    let jwt =
        JwtAuth::new(ISSUER, jwks.url.clone()).with_refetch_interval(Duration::from_secs(600));
    let server = gateway(&tools, jwt).await;
    let aud = server.url().to_string();
    let signer = Signer::ec();
    for _ in 0..5 {
        let answer = attempt(&server, Some(&signer.token("k1", &claims(&aud)))).await;
        assert_refused(&server, &answer, "no usable key");
    }
    assert_eq!(
        jwks.hits(),
        2,
        "the first fetch and one retry, then the interval"
    );
    assert_eq!(tools.calls(), 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rsa_key_published_with_leading_zero_bytes_verifies() {
    // Some Java and .NET issuers publish `n` and `e` as two's-complement integers.
    let rsa = Signer::rsa();
    let mut jwk = rsa.jwk("padded");
    for member in ["n", "e"] {
        let mut bytes = URL_SAFE_NO_PAD
            .decode(jwk[member].as_str().unwrap())
            .unwrap();
        bytes.insert(0, 0);
        jwk[member] = json!(URL_SAFE_NO_PAD.encode(bytes));
    }
    let jwks = Jwks::serve(json!([jwk])).await;
    let tools = Arc::new(Tools::default());
    let server = gateway(&tools, JwtAuth::new(ISSUER, jwks.url.clone())).await;
    let aud = server.url().to_string();
    let token = rsa.token("padded", &claims(&aud));
    assert_eq!(attempt(&server, Some(&token)).await.0, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_over_long_kid_is_refused_without_a_refetch() {
    let ec = Signer::ec();
    let jwks = Jwks::serve(json!([ec.jwk("k1")])).await;
    let tools = Arc::new(Tools::default());
    let server = gateway(&tools, JwtAuth::new(ISSUER, jwks.url.clone())).await;
    let aud = server.url().to_string();
    assert_eq!(
        attempt(&server, Some(&ec.token("k1", &claims(&aud))))
            .await
            .0,
        200
    );
    assert_eq!(jwks.hits(), 1);
    // The first refetch would be allowed now: an over-long kid does not get it.
    let long = "k".repeat(257);
    let answer = attempt(&server, Some(&ec.token(&long, &claims(&aud)))).await;
    assert_refused(&server, &answer, "an over-long kid");
    assert_eq!(jwks.hits(), 1, "no refetch for an over-long kid");
    assert_eq!(tools.calls(), 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_resetting_its_stream_mid_fetch_does_not_cancel_the_fetch() {
    let old = Signer::ec();
    let new = Signer::ec();
    let jwks = Jwks::serve(json!([old.jwk("k1")])).await;
    let tools = Arc::new(Tools::default());
    let jwt =
        JwtAuth::new(ISSUER, jwks.url.clone()).with_refetch_interval(Duration::from_secs(600));
    let server = gateway(&tools, jwt).await;
    let aud = server.url().to_string();
    let token = old.token("k1", &claims(&aud));
    assert_eq!(attempt(&server, Some(&token)).await.0, 200);
    assert_eq!(jwks.hits(), 1);

    // The issuer rotates. Over HTTP/2, a token with a random kid starts the refetch, and its
    // stream is reset (the request dropped) while the JWKS has not answered.
    jwks.publish(json!([new.jwk("k2")]));
    jwks.hold();
    let addr = format!(
        "{}:{}",
        server.url().host_str().unwrap(),
        server.url().port().unwrap()
    );
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .unwrap();
    let connection = tokio::spawn(connection);
    let bearer = format!("Bearer {}", old.token("random", &claims(&aud)));
    let mut request = http::Request::post(server.url().as_str());
    for (name, value) in POST_HEADERS {
        request = request.header(*name, *value);
    }
    let request = request
        .header("authorization", bearer)
        .body(Full::new(Bytes::from(initialize_body())))
        .unwrap();
    tokio::select! {
        answer = sender.send_request(request) => panic!("answered while the JWKS is held: {answer:?}"),
        () = jwks.reached(2) => {}
    }
    drop(sender);
    connection.abort();
    jwks.release();

    // The refetch went on without its request: the rotated key is known, with no new fetch
    // (another would not be allowed for ten minutes).
    let token = new.token("k2", &claims(&aud));
    assert_eq!(attempt(&server, Some(&token)).await.0, 200);
    assert_eq!(jwks.hits(), 2);
    assert_eq!(tools.calls(), 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_key_is_served_while_a_refetch_hangs() {
    let signer = Signer::ec();
    let jwks = Jwks::serve(json!([signer.jwk("k1")])).await;
    let tools = Arc::new(Tools::default());
    let jwt = JwtAuth::new(ISSUER, jwks.url.clone()).with_fetch_timeout(Duration::from_secs(30));
    let server = Arc::new(gateway(&tools, jwt).await);
    let aud = server.url().to_string();
    let token = signer.token("k1", &claims(&aud));
    assert_eq!(attempt(&server, Some(&token)).await.0, 200);

    // A token naming an unknown kid starts a refetch the JWKS holds.
    jwks.hold();
    let unknown = tokio::spawn({
        let (server, token) = (server.clone(), signer.token("k9", &claims(&aud)));
        async move { attempt(&server, Some(&token)).await.0 }
    });
    jwks.reached(2).await;
    // The known kid is verified from the cache while that fetch is still held.
    assert_eq!(attempt(&server, Some(&token)).await.0, 200);
    assert!(
        !unknown.is_finished(),
        "the unknown kid waits for the fetch"
    );
    jwks.release();
    assert_eq!(unknown.await.unwrap(), 401);
    assert_eq!(jwks.hits(), 2);
    assert_eq!(tools.calls(), 0);
    Arc::into_inner(server).unwrap().shutdown().await;
}

#[test]
fn unsafe_settings_are_refused_by_name() {
    let err = BearerAuth::jwt(JwtAuth::new(
        ISSUER,
        "http://auth.example.com/jwks".parse().unwrap(),
    ))
    .unwrap_err();
    assert!(err.to_string().contains("auth.jwt"), "{err}");
    assert!(
        err.to_string().contains("http://auth.example.com/jwks"),
        "{err}"
    );
    let err = BearerAuth::jwt(
        JwtAuth::new(ISSUER, "https://auth.example.com/jwks".parse().unwrap()).with_algorithms([]),
    )
    .unwrap_err();
    assert!(err.to_string().contains("no algorithm"), "{err}");
    let jwks: url::Url = "https://auth.example.com/jwks".parse().unwrap();
    let leeway = JwtAuth::new(ISSUER, jwks).with_leeway(Duration::from_secs(3600));
    let err = BearerAuth::jwt(leeway).unwrap_err();
    assert!(err.to_string().contains("leeway"), "{err}");
}

/// Opens an empty tool set per session, noting who each session acts for.
#[derive(Default)]
struct Subjects {
    seen: std::sync::Mutex<Vec<Option<agent_core::Principal>>>,
}

impl Subjects {
    fn subjects(&self) -> Vec<Option<String>> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .map(|p| p.as_ref().map(|p| p.subject().to_owned()))
            .collect()
    }
}

/// A per-session server noting who each session acts for, behind `jwt` (no limit on failed
/// attempts, so refusals can be probed freely).
async fn subjects_behind(jwt: JwtAuth) -> (Arc<Subjects>, HttpServer) {
    let subjects = Arc::new(Subjects::default());
    let auth = BearerAuth::jwt(jwt).expect("JWT settings");
    let server = mcp_serve::ToolServer::per_session(Arc::clone(&subjects))
        .serve_http(
            HttpOptions::default()
                .with_auth(auth)
                .with_auth_failure_limit(None),
        )
        .await
        .unwrap();
    (subjects, server)
}

struct NoTools;

impl agent_core::ToolCatalog for NoTools {
    fn tools(&self) -> Vec<agent_core::ToolDescriptor> {
        Vec::new()
    }
}

#[async_trait::async_trait]
impl agent_core::ToolDispatcher for NoTools {
    async fn dispatch(
        &self,
        call: agent_core::ToolCall,
    ) -> Result<agent_core::ToolOutput, agent_core::ToolError> {
        Err(agent_core::ToolError::unknown_tool(call.name, Vec::new()))
    }
}

impl mcp_serve::SessionTools for NoTools {}

#[async_trait::async_trait]
impl mcp_serve::OpenTools for Subjects {
    async fn open(&self) -> Result<Arc<dyn mcp_serve::SessionTools>, mcp_serve::OpenError> {
        self.open_for(mcp_serve::Downstream::none()).await
    }

    async fn open_for(
        &self,
        downstream: mcp_serve::Downstream,
    ) -> Result<Arc<dyn mcp_serve::SessionTools>, mcp_serve::OpenError> {
        self.seen
            .lock()
            .unwrap()
            .push(downstream.principal().cloned());
        Ok(Arc::new(NoTools))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_acts_for_its_token_s_subject_and_refuses_another_one() {
    let ec = Signer::ec();
    let jwks = Jwks::serve(json!([ec.jwk("ec-1")])).await;
    let (subjects, server) = subjects_behind(JwtAuth::new(ISSUER, jwks.url.clone())).await;
    let aud = server.url().to_string();
    let token_of = |sub: &str| {
        let mut claims = claims(&aud);
        claims["sub"] = json!(sub);
        ec.token("ec-1", &claims)
    };
    let (alice, bob) = (token_of("alice"), token_of("bob"));
    let url = server.url().as_str();
    let bearer = format!("Bearer {alice}");
    let mut headers: Vec<(&str, &str)> = POST_HEADERS.to_vec();
    headers.push(("authorization", &bearer));
    let opened = send("POST", url, &headers, initialize_body()).await;
    assert_eq!(opened.status, 200, "{}", opened.body);
    let session = opened.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    headers.push(("mcp-session-id", &session));
    headers.push(("mcp-protocol-version", "2025-11-25"));
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    send("POST", url, &headers, initialized).await;
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let listed = send("POST", url, &headers, list).await;
    assert!(listed.body.contains(r#""tools":[]"#), "{}", listed.body);
    assert_eq!(subjects.subjects(), [Some("alice".to_owned())]);

    // Bob's valid token does not make Alice's session his.
    let bearer = format!("Bearer {bob}");
    headers[POST_HEADERS.len()] = ("authorization", &bearer);
    let refused = send("POST", url, &headers, list).await;
    assert!(
        refused.body.contains("opened for another principal"),
        "{}",
        refused.body
    );
    assert!(!refused.body.contains(r#""tools""#), "{}", refused.body);

    // A `sub` with a control character is no subject: the token is refused.
    let forged = token_of("alice\nadmin");
    assert_refused(
        &server,
        &attempt(&server, Some(&forged)).await,
        "control character in sub",
    );
    assert_eq!(subjects.seen.lock().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_s_principal_holds_the_token_s_scopes_and_kept_claims_within_bounds() {
    let ec = Signer::ec();
    let jwks = Jwks::serve(json!([ec.jwk("ec-1")])).await;
    let jwt = JwtAuth::new(ISSUER, jwks.url.clone()).with_claims(["groups", "level"]);
    let (subjects, server) = subjects_behind(jwt).await;
    let aud = server.url().to_string();
    let token_with = |extra: Value| {
        let mut claims = claims(&aud);
        claims["sub"] = json!("alice");
        for (k, v) in extra.as_object().unwrap() {
            claims[k] = v.clone();
        }
        ec.token("ec-1", &claims)
    };
    // A session opened with `token` and its tools listed (which opens them): the status.
    let open = |token: String| {
        let url = server.url().to_string();
        async move {
            let bearer = format!("Bearer {token}");
            let mut headers: Vec<(&str, &str)> = POST_HEADERS.to_vec();
            headers.push(("authorization", &bearer));
            let opened = send("POST", &url, &headers, initialize_body()).await;
            let Some(session) = opened.headers.get("mcp-session-id") else {
                return opened.status;
            };
            let session = session.to_str().unwrap().to_owned();
            headers.push(("mcp-session-id", &session));
            headers.push(("mcp-protocol-version", "2025-11-25"));
            let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
            send("POST", &url, &headers, initialized).await;
            let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
            send("POST", &url, &headers, list).await.status
        }
    };

    let granted = token_with(json!({
        "scope": "files:read files:write",
        "groups": ["admins", "staff"],
        "level": 3,
        "department": "not kept",
    }));
    assert_eq!(open(granted).await, 200);
    let seen = subjects.seen.lock().unwrap().pop().flatten().unwrap();
    assert_eq!(seen.subject(), "alice");
    assert_eq!(seen.scopes(), ["files:read", "files:write"]);
    assert_eq!(seen.claim("groups"), ["admins", "staff"]);
    assert_eq!(seen.claim("level"), ["3"]);
    assert!(seen.claim("department").is_empty());

    // `scp` as an array reads the same.
    assert_eq!(open(token_with(json!({"scp": ["a", "b"]}))).await, 200);
    let seen = subjects.seen.lock().unwrap().pop().flatten().unwrap();
    assert_eq!(seen.scopes(), ["a", "b"]);

    // Beyond the bounds, a signed token is refused: no session is opened.
    let many: Vec<String> = (0..300).map(|i| format!("s{i}")).collect();
    let long = "x".repeat(300);
    for (what, extra) in [
        ("300 scopes", json!({"scope": many.join(" ")})),
        ("300 group values", json!({"groups": many})),
        ("a 300-byte group", json!({"groups": [long]})),
        ("a 20 kB claim", json!({"groups": "y".repeat(20_000)})),
        ("a control character in a scope", json!({"scp": ["a\u{7}"]})),
    ] {
        let token = token_with(extra);
        assert_refused(&server, &attempt(&server, Some(&token)).await, what);
    }
    assert!(subjects.seen.lock().unwrap().is_empty());
}
