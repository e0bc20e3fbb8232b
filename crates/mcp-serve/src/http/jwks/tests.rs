//! The JWKS parser, the fetcher's failures and the key cache.

use super::*;

#[test]
fn only_signing_keys_of_known_types_are_kept() {
    let url: Url = "https://a.example/jwks".parse().unwrap();
    let x = URL_SAFE_NO_PAD.encode([1u8; 32]);
    let body = serde_json::json!({"keys": [
        {"kty": "oct", "k": "c2VjcmV0", "kid": "h"},
        {"kty": "RSA", "n": "AQAB", "e": "AQAB", "use": "enc", "kid": "enc"},
        {"kty": "EC", "crv": "P-256", "x": x, "y": x, "kid": "ec"},
        {"kty": "EC", "crv": "P-256", "x": "AA", "y": x, "kid": "short"},
        {"kty": "RSA", "n": "AQAB", "e": "AQAB", "kid": "rsa", "alg": "RS256"},
    ]});
    let keys = parse_jwks(body.to_string().as_bytes(), &url).unwrap();
    let kids: Vec<_> = keys.iter().filter_map(|k| k.kid.as_deref()).collect();
    assert_eq!(kids, ["ec", "rsa"]);
    let err = parse_jwks(br#"{"keys": []}"#, &url).unwrap_err();
    assert!(err.to_string().contains("https://a.example/jwks"), "{err}");
    assert!(parse_jwks(b"<html>", &url).is_err());
}

/// A server on 127.0.0.1 answering every connection with `answer` (none: never answers).
async fn answering(answer: Option<String>) -> Url {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                match answer {
                    Some(a) => {
                        let _ = stream.write_all(a.as_bytes()).await;
                    }
                    None => std::future::pending::<()>().await,
                }
            });
        }
    });
    url.parse().unwrap()
}

#[tokio::test]
async fn fetch_failures_are_typed_and_name_the_url() {
    let fetch = |url: Url| async move {
        Fetcher::new(url, Duration::from_millis(300), 1024)
            .unwrap()
            .fetch()
            .await
            .unwrap_err()
    };
    let url = answering(Some(
        "HTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n".into(),
    ))
    .await;
    let err = fetch(url.clone()).await;
    assert!(
        matches!(err, JwksError::Status { status: 302, .. }),
        "{err}"
    );
    assert!(err.to_string().contains(url.as_str()), "{err}");

    let big = "x".repeat(4096);
    let answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{big}",
        big.len()
    );
    let err = fetch(answering(Some(answer)).await).await;
    assert!(
        matches!(err, JwksError::TooLarge { limit: 1024, .. }),
        "{err}"
    );

    let err = fetch(answering(None).await).await;
    assert!(matches!(err, JwksError::Timeout { .. }), "{err}");

    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let url: Url = format!("http://{closed}/jwks").parse().unwrap();
    let err = fetch(url.clone()).await;
    assert!(matches!(err, JwksError::Unreachable { .. }), "{err}");
    assert!(err.to_string().contains(url.as_str()), "{err}");
}

#[test]
fn malformed_members_and_key_ops_without_verify_drop_the_key() {
    let url: Url = "https://a.example/jwks".parse().unwrap();
    let rsa = |extra: serde_json::Value| {
        let mut key = serde_json::json!({"kty": "RSA", "n": "AQAB", "e": "AQAB"});
        key.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        key
    };
    let long = "k".repeat(MAX_KID_BYTES + 1);
    let body = serde_json::json!({"keys": [
        rsa(serde_json::json!({"kid": "use-number", "use": 1})),
        rsa(serde_json::json!({"kid": "alg-array", "alg": ["RS256"]})),
        rsa(serde_json::json!({"kid": 7})),
        rsa(serde_json::json!({"kid": long})),
        rsa(serde_json::json!({"kid": "ops-encrypt", "key_ops": ["encrypt"]})),
        rsa(serde_json::json!({"kid": "ops-string", "key_ops": "verify"})),
        rsa(serde_json::json!({"kid": "ops-verify", "key_ops": ["sign", "verify"]})),
        rsa(serde_json::json!({"kid": "plain", "use": "sig", "alg": "RS256"})),
    ]});
    let keys = parse_jwks(body.to_string().as_bytes(), &url).unwrap();
    let kids: Vec<_> = keys.iter().filter_map(|k| k.kid.as_deref()).collect();
    assert_eq!(kids, ["ops-verify", "plain"]);
}

#[test]
fn leading_zero_bytes_of_rsa_integers_are_stripped() {
    let url: Url = "https://a.example/jwks".parse().unwrap();
    let n = URL_SAFE_NO_PAD.encode([0u8, 0, 0xc1, 2, 3]);
    let e = URL_SAFE_NO_PAD.encode([0u8, 1, 0, 1]);
    let body = serde_json::json!({"keys": [{"kty": "RSA", "n": n, "e": e}]});
    let keys = parse_jwks(body.to_string().as_bytes(), &url).unwrap();
    let PublicKey::Rsa { n, e } = &keys[0].key else {
        panic!("{keys:?}")
    };
    assert_eq!(
        (n.as_slice(), e.as_slice()),
        (&[0xc1, 2, 3][..], &[1, 0, 1][..])
    );
}

/// A JWKS endpoint whose answers the test controls: each request is counted (observable
/// through `hits`), then answered once `open` is true: 200 with the key `kid`, or 503 when
/// `kid` is empty.
struct Gate {
    url: Url,
    hits: watch::Receiver<usize>,
    open: watch::Sender<bool>,
    kid: Arc<std::sync::Mutex<String>>,
}

impl Gate {
    async fn start(kid: &str, open: bool) -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks", listener.local_addr().unwrap());
        let (hits_tx, hits) = watch::channel(0usize);
        let (open_tx, open_rx) = watch::channel(open);
        let kid = Arc::new(std::sync::Mutex::new(kid.to_owned()));
        let served = kid.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (hits_tx, mut open_rx, served) =
                    (hits_tx.clone(), open_rx.clone(), served.clone());
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    hits_tx.send_modify(|h| *h += 1);
                    if open_rx.wait_for(|open| *open).await.is_err() {
                        return;
                    }
                    let kid = served.lock().unwrap().clone();
                    let answer = if kid.is_empty() {
                        "HTTP/1.1 503 Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_owned()
                    } else {
                        let body = serde_json::json!({"keys": [
                            {"kty": "RSA", "n": "AQAB", "e": "AQAB", "kid": kid}
                        ]})
                        .to_string();
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        )
                    };
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        Self {
            url: url.parse().unwrap(),
            hits,
            open: open_tx,
            kid,
        }
    }

    fn hits(&self) -> usize {
        *self.hits.borrow()
    }

    /// Returns once the endpoint has received `n` requests.
    async fn reached(&self, n: usize) {
        self.hits.clone().wait_for(|h| *h >= n).await.unwrap();
    }

    fn publish(&self, kid: &str) {
        *self.kid.lock().unwrap() = kid.to_owned();
    }

    fn set_open(&self, open: bool) {
        self.open.send_replace(open);
    }

    fn cache(&self, refetch: Duration, max_age: Duration, expiry: Duration) -> KeyCache {
        let fetcher = Fetcher::new(self.url.clone(), Duration::from_secs(5), 64 * 1024).unwrap();
        KeyCache::new(fetcher, refetch, max_age, expiry)
    }
}

fn kids(lookup: &Lookup) -> Vec<&str> {
    match lookup {
        Lookup::Keys(keys) => keys.iter().filter_map(|k| k.kid.as_deref()).collect(),
        Lookup::Unknown | Lookup::Unavailable => Vec::new(),
    }
}

const HOUR: Duration = Duration::from_secs(3600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_dropped_mid_fetch_does_not_cancel_the_fetch() {
    let gate = Gate::start("k1", true).await;
    let cache = gate.cache(HOUR, HOUR, 24 * HOUR);
    assert_eq!(kids(&cache.lookup(Some("k1")).await), ["k1"]);
    assert_eq!(gate.hits(), 1);

    // The issuer rotates; a token with a random `kid` starts the refetch, and its request
    // goes away (a client resetting its stream) while the JWKS has not answered yet.
    gate.publish("k2");
    gate.set_open(false);
    tokio::select! {
        _ = cache.lookup(Some("random")) => panic!("the fetch was held"),
        () = gate.reached(2) => {}
    }
    gate.set_open(true);

    // The refetch went on without its request: the rotated key is known, with no new fetch
    // (another one would not be allowed for an hour).
    assert_eq!(kids(&cache.lookup(Some("k2")).await), ["k2"]);
    assert_eq!(gate.hits(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_kid_is_served_while_a_fetch_hangs() {
    let gate = Gate::start("k1", true).await;
    let clock_offset = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let offset = clock_offset.clone();
    let cache = Arc::new(
        gate.cache(Duration::from_secs(1), HOUR, 24 * HOUR)
            .with_clock(Arc::new(move || {
                Instant::now()
                    + Duration::from_secs(offset.load(std::sync::atomic::Ordering::SeqCst))
            })),
    );
    assert_eq!(kids(&cache.lookup(Some("k1")).await), ["k1"]);

    // An unknown `kid` starts a refetch the JWKS holds.
    gate.set_open(false);
    let miss = tokio::spawn({
        let cache = cache.clone();
        async move { cache.lookup(Some("other")).await }
    });
    gate.reached(2).await;
    // The cached key is served while that fetch is still held.
    assert_eq!(kids(&cache.lookup(Some("k1")).await), ["k1"]);
    assert!(!miss.is_finished(), "the miss waits for the fetch");
    assert_eq!(gate.hits(), 2);
    gate.set_open(true);
    assert!(matches!(miss.await.unwrap(), Lookup::Unknown));

    // Stale keys are refreshed in the background: served at once while the refresh is held.
    gate.set_open(false);
    clock_offset.store(2 * 3600, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(kids(&cache.lookup(Some("k1")).await), ["k1"]);
    gate.reached(3).await;
    assert_eq!(kids(&cache.lookup(Some("k1")).await), ["k1"]);
    gate.set_open(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_expire_when_every_refresh_fails() {
    let gate = Gate::start("k1", true).await;
    let clock_offset = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let offset = clock_offset.clone();
    let cache = gate
        .cache(Duration::from_secs(60), HOUR, 3 * HOUR)
        .with_clock(Arc::new(move || {
            Instant::now() + Duration::from_secs(offset.load(std::sync::atomic::Ordering::SeqCst))
        }));
    assert_eq!(kids(&cache.lookup(Some("k1")).await), ["k1"]);

    // The JWKS fails from now on. Two hours later the keys are stale but still used (the
    // background refresh fails).
    gate.publish("");
    clock_offset.store(2 * 3600, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(kids(&cache.lookup(Some("k1")).await), ["k1"]);
    let mut ended = cache.inner.done.subscribe();
    ended.wait_for(|fetches| *fetches >= 2).await.unwrap();
    assert_eq!(gate.hits(), 2);

    // Past the expiry they are refused, and the fetch that follows fails too.
    clock_offset.store(3 * 3600, std::sync::atomic::Ordering::SeqCst);
    assert!(matches!(
        cache.lookup(Some("k1")).await,
        Lookup::Unavailable
    ));
    assert_eq!(gate.hits(), 3);
}
