//! `mcp-agent serve` with `[serve] auth = { jwt = { ... } }`: an ES256 token signed here, of
//! the configured issuer and audience, verified against a JWKS this test serves, gets a
//! session; no token, a token for another audience or signed by an unknown key get 401 with
//! the resource metadata and open no upstream; a JWKS that cannot be fetched gives 401 and a
//! log line naming its URL, and the gateway stays up; `none`/HMAC algorithms are refused in
//! the configuration.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use mcp_test_kit::RecordFile;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};

use crate::support::children;
use crate::support::gateway::{Gateway, kit_config, request};

pub(crate) const ISSUER: &str = "https://issuer.test";
pub(crate) const AUDIENCE: &str = "https://gateway.test/mcp";

pub(crate) fn key() -> EcdsaKeyPair {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap()
}

pub(crate) fn jwk(key: &EcdsaKeyPair, kid: &str) -> Value {
    let point = key.public_key().as_ref();
    json!({"kty": "EC", "crv": "P-256", "kid": kid,
           "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..65])})
}

fn token(key: &EcdsaKeyPair, kid: &str, aud: &str) -> String {
    token_of(key, kid, aud, "host")
}

/// A token of [`ISSUER`] for `aud` naming `sub`, signed with `key` under `kid`.
pub(crate) fn token_of(key: &EcdsaKeyPair, kid: &str, aud: &str, sub: &str) -> String {
    token_with(key, kid, aud, json!({"sub": sub}))
}

/// A token of [`ISSUER`] for `aud` with the claims of `extra` too, signed with `key` under
/// `kid`.
pub(crate) fn token_with(key: &EcdsaKeyPair, kid: &str, aud: &str, extra: Value) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = json!({"alg": "ES256", "typ": "JWT", "kid": kid});
    let mut claims = json!({"iss": ISSUER, "aud": aud, "exp": now + 600});
    for (name, value) in extra.as_object().expect("claims") {
        claims[name] = value.clone();
    }
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let sig = key.sign(&SystemRandom::new(), input.as_bytes()).unwrap();
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
}

/// Serves `keys` as a JWKS on 127.0.0.1 from a thread (for the test's life); its URL.
pub(crate) fn serve_jwks(keys: Value) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/jwks", listener.local_addr().unwrap());
    let body = json!({ "keys": keys }).to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let mut seen = Vec::new();
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

fn config(jwks_url: &str, algorithms: &str) -> (tempfile::TempDir, std::path::PathBuf, RecordFile) {
    kit_config(&format!(
        "auth = {{ jwt = {{ issuer = \"{ISSUER}\", audience = \"{AUDIENCE}\", \
         jwks_url = \"{jwks_url}\", algorithms = {algorithms}, leeway_s = 5 }} }}"
    ))
}

/// POSTs an `initialize` with `token`: status, head (lower-cased) and body.
fn initialize(gateway: &Gateway, token: Option<&str>) -> (u16, String, String) {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}},
    })
    .to_string();
    let bearer = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = bearer
        .iter()
        .map(|b| ("Authorization", b.as_str()))
        .collect();
    request(&gateway.addr(), "POST", &headers, body.as_bytes())
}

fn assert_challenged(head: &str) {
    assert!(
        head.contains("www-authenticate: bearer resource_metadata=\"http://")
            && head.contains("/.well-known/oauth-protected-resource/mcp\""),
        "{head}"
    );
}

#[test]
fn a_token_of_the_issuer_for_the_gateway_opens_a_session_and_others_reach_nothing() {
    let signing = key();
    let jwks = serve_jwks(json!([jwk(&signing, "k1")]));
    let (_dir, file, record) = config(&jwks, "[\"ES256\"]");
    let mut gateway = Gateway::start(&file, &[]);

    let (status, head, _) = initialize(&gateway, None);
    assert_eq!(status, 401);
    assert_challenged(&head);
    for bad in [
        token(&signing, "k1", "https://elsewhere.test/mcp"),
        token(&key(), "k1", AUDIENCE),
        token(&key(), "k9", AUDIENCE),
    ] {
        let (status, head, _) = initialize(&gateway, Some(&bad));
        assert_eq!(status, 401);
        assert_challenged(&head);
        assert!(head.contains("error=\"invalid_token\""), "{head}");
    }
    assert!(children(gateway.pid()).is_empty(), "no upstream was opened");
    assert!(record.snapshot().events.is_empty());
    assert!(gateway.is_running());

    let (status, _, body) = initialize(&gateway, Some(&token(&signing, "k1", AUDIENCE)));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"serverInfo\""), "{body}");
}

#[test]
fn a_jwks_that_cannot_be_fetched_is_logged_by_url_and_the_gateway_stays_up() {
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let jwks = format!("http://{closed}/jwks");
    let (_dir, file, _record) = config(&jwks, "[\"ES256\"]");
    let mut gateway = Gateway::start(&file, &[]);
    let (status, head, _) = initialize(&gateway, Some(&token(&key(), "k1", AUDIENCE)));
    assert_eq!(status, 401);
    assert_challenged(&head);
    let line = gateway.line_containing("cannot fetch the JWKS");
    assert!(line.contains(&jwks), "{line}");
    assert!(gateway.is_running());
    let (status, _, _) = initialize(&gateway, None);
    assert_eq!(status, 401, "still answering");
}

#[test]
fn unsigned_and_hmac_algorithms_are_refused_in_the_configuration() {
    let (_dir, file, _record) = config("https://issuer.test/jwks", "[\"none\", \"HS256\"]");
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args(["serve", "--http", "127.0.0.1:0", "--file"])
        .arg(&file)
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("serve.auth.jwt.algorithms[0]"), "{stderr}");
    assert!(stderr.contains("serve.auth.jwt.algorithms[1]"), "{stderr}");
}

#[test]
fn a_leeway_over_five_minutes_is_refused_in_the_configuration() {
    let (_dir, file, _record) = config("https://issuer.test/jwks", "[\"ES256\"]");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("leeway_s = 5", "leeway_s = 86400")).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args(["serve", "--http", "127.0.0.1:0", "--file"])
        .arg(&file)
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("serve.auth.jwt.leeway_s"), "{stderr}");
    assert!(stderr.contains("at most 300"), "{stderr}");
}
