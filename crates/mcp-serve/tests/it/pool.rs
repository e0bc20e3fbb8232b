//! `PooledTools` behind the HTTP endpoint, driven by raw 2026-07-28 (stateless) requests with
//! JWTs of several subjects: a principal's requests share one run (N requests, one open; the
//! same N without the pool open N), another principal gets another run, concurrent requests
//! of a principal use the same run at once, sessions still open their own, a run that is no
//! longer reusable is closed after its request, at most `max_runs` are pooled (the longest
//! idle evicted; when all are in use the request's run is its own), an idle run is closed
//! after the idle timeout, and a shutdown closes every pooled run.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
use async_trait::async_trait;
use mcp_serve::{
    BearerAuth, Downstream, HttpOptions, HttpServer, JwtAuth, OpenError, OpenTools, PoolOptions,
    PooledTools, SessionTools, ToolServer,
};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::jwt::{ISSUER, Jwks, Signer, claims};
use crate::support::{POST_HEADERS, bounded, initialize_body, object, send, stateless_call};

/// What the runs of one opener did: counts that tests wait on.
#[derive(Default)]
struct Counts {
    opened: watch::Sender<usize>,
    closed: watch::Sender<usize>,
    /// `hold` calls running now.
    holding: watch::Sender<usize>,
    /// Opened for a request that can be asked for input, or for a session.
    not_detached: AtomicUsize,
}

/// One run: `whoami` answers its number and principal; `hold` waits until released; `break`
/// makes it not reusable.
struct Run {
    n: usize,
    principal: Option<String>,
    counts: Arc<Counts>,
    release: watch::Receiver<bool>,
    broken: AtomicBool,
}

impl ToolCatalog for Run {
    fn tools(&self) -> Vec<ToolDescriptor> {
        ["whoami", "hold", "break"]
            .into_iter()
            .map(|name| ToolDescriptor::new(name, object(json!({"type": "object"}))))
            .collect()
    }
}

#[async_trait]
impl ToolDispatcher for Run {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        match call.name.as_str() {
            "hold" => {
                self.counts.holding.send_modify(|n| *n += 1);
                let _ = self.release.clone().wait_for(|go| *go).await;
                self.counts.holding.send_modify(|n| *n -= 1);
            }
            "break" => self.broken.store(true, Ordering::SeqCst),
            _ => {}
        }
        Ok(ToolOutput::structured(
            json!({"run": self.n, "principal": self.principal}),
        ))
    }
}

#[async_trait]
impl SessionTools for Run {
    fn reusable(&self) -> bool {
        !self.broken.load(Ordering::SeqCst)
    }

    async fn close(&self) {
        self.counts.closed.send_modify(|n| *n += 1);
    }
}

/// Opens numbered runs for the downstream's principal.
struct Opener {
    counts: Arc<Counts>,
    release: watch::Sender<bool>,
    next: AtomicUsize,
}

impl Opener {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            counts: Arc::default(),
            release: watch::Sender::new(false),
            next: AtomicUsize::new(0),
        })
    }

    fn opened(&self) -> usize {
        *self.counts.opened.borrow()
    }

    fn closed(&self) -> usize {
        *self.counts.closed.borrow()
    }

    async fn wait(&self, what: &str, counter: &watch::Sender<usize>, n: usize) {
        let mut rx = counter.subscribe();
        bounded(what, rx.wait_for(|seen| *seen == n)).await.unwrap();
    }
}

#[async_trait]
impl OpenTools for Opener {
    async fn open(&self) -> Result<Arc<dyn SessionTools>, OpenError> {
        self.open_for(Downstream::none()).await
    }

    async fn open_for(&self, downstream: Downstream) -> Result<Arc<dyn SessionTools>, OpenError> {
        if !downstream.is_stateless() {
            self.counts.not_detached.fetch_add(1, Ordering::SeqCst);
        }
        self.counts.opened.send_modify(|n| *n += 1);
        Ok(Arc::new(Run {
            n: self.next.fetch_add(1, Ordering::SeqCst),
            principal: downstream.principal().map(|p| p.subject().to_owned()),
            counts: Arc::clone(&self.counts),
            release: self.release.subscribe(),
            broken: AtomicBool::new(false),
        }))
    }
}

/// The pool, when there is one.
type Pool = Option<Arc<PooledTools<Opener>>>;

/// An endpoint checking JWTs of `jwks`, serving `opener` (pooled within `pool`, if given).
async fn endpoint(
    jwks: &Jwks,
    opener: &Arc<Opener>,
    pool: Option<PoolOptions>,
) -> (HttpServer, Pool) {
    let auth = BearerAuth::jwt(JwtAuth::new(ISSUER, jwks.url.clone())).expect("JWT settings");
    let pool = pool.map(|options| Arc::new(PooledTools::new(Arc::clone(opener), options)));
    let server = match &pool {
        Some(pool) => ToolServer::per_session(Arc::clone(pool)),
        None => ToolServer::per_session(Arc::clone(opener)),
    };
    let http = server
        .serve_http(HttpOptions::default().with_auth(auth))
        .await
        .unwrap();
    (http, pool)
}

/// Tokens of the endpoint's audience, one per subject.
struct Tokens {
    signer: Signer,
    aud: String,
}

impl Tokens {
    fn of(&self, sub: &str) -> String {
        let mut claims = claims(&self.aud);
        claims["sub"] = json!(sub);
        self.signer.token("k1", &claims)
    }
}

/// What a test works with.
struct Setup {
    _jwks: Jwks,
    opener: Arc<Opener>,
    server: Arc<HttpServer>,
    pool: Pool,
    tokens: Tokens,
}

impl Setup {
    async fn new(pool: Option<PoolOptions>) -> Self {
        let signer = Signer::ec();
        let jwks = Jwks::serve(json!([signer.jwk("k1")])).await;
        let opener = Opener::new();
        let (server, pool) = endpoint(&jwks, &opener, pool).await;
        let aud = server.url().to_string();
        Self {
            _jwks: jwks,
            opener,
            server: Arc::new(server),
            pool,
            tokens: Tokens { signer, aud },
        }
    }

    /// Waits until `n` pooled runs are idle (the requests that used them are over: a request's
    /// answer may reach the client before its handler gives the run back).
    async fn idle(&self, n: usize) {
        let pool = self.pool.as_ref().expect("a pool");
        bounded("idle runs", async {
            while pool.idle() != n {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
    }

    async fn shutdown(self) {
        let server = Arc::into_inner(self.server).expect("no request in flight");
        server.shutdown().await;
    }
}

/// A stateless (2026-07-28) `tools/call` of `tool` with `token`: its structured result.
async fn call(server: &HttpServer, token: &str, tool: &str) -> Value {
    let bearer = format!("Bearer {token}");
    let headers = [("authorization", bearer.as_str())];
    let url = server.url().as_str();
    let answer = stateless_call(url, tool, json!({}), json!({}), &headers).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let message = (answer.messages().into_iter())
        .find(|m| m.get("result").is_some() || m.get("error").is_some())
        .unwrap_or_else(|| panic!("no answer in {}", answer.body));
    message["result"]["structuredContent"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_s_stateless_requests_share_one_run_and_others_get_their_own() {
    const N: usize = 10;
    // Without the pool, each request opens its tools and closes them after.
    let t = Setup::new(None).await;
    let alice = t.tokens.of("alice");
    for _ in 0..N {
        call(&t.server, &alice, "whoami").await;
    }
    assert_eq!(t.opener.opened(), N, "an open per request");
    t.opener
        .wait("every close", &t.opener.counts.closed, N)
        .await;
    t.shutdown().await;

    let t = Setup::new(Some(PoolOptions::default())).await;
    let (opener, server) = (Arc::clone(&t.opener), Arc::clone(&t.server));
    let (alice, bob) = (t.tokens.of("alice"), t.tokens.of("bob"));
    let first = call(&server, &alice, "whoami").await;
    assert_eq!(first["principal"], "alice");
    for _ in 1..N {
        assert_eq!(call(&server, &alice, "whoami").await, first);
    }
    assert_eq!(opener.opened(), 1, "one open for {N} requests");
    let theirs = call(&server, &bob, "whoami").await;
    assert_eq!(theirs["principal"], "bob");
    assert_ne!(theirs["run"], first["run"], "never another principal's run");
    assert_eq!(call(&server, &alice, "whoami").await, first);
    assert_eq!(opener.opened(), 2);
    assert_eq!(opener.closed(), 0, "both kept");
    assert_eq!(opener.counts.not_detached.load(Ordering::SeqCst), 0);

    // A 2025-11-25 session opens its own tools (given its client), closed when it ends.
    let bearer = format!("Bearer {alice}");
    let mut headers = POST_HEADERS.to_vec();
    headers.push(("authorization", &bearer));
    let url = server.url().as_str();
    let opened = send("POST", url, &headers, initialize_body()).await;
    let session = opened.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    headers.extend([
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ]);
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    send("POST", url, &headers, initialized).await;
    let whoami = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami"}}"#;
    let answer = send("POST", url, &headers, whoami).await;
    assert!(answer.body.contains(r#""run":2"#), "{}", answer.body);
    assert_eq!(opener.counts.not_detached.load(Ordering::SeqCst), 1);
    send("DELETE", url, &headers, "").await;
    opener
        .wait("the session's close", &opener.counts.closed, 1)
        .await;
    assert_eq!(t.pool.as_ref().unwrap().pooled(), 2);

    // The shutdown closes the pooled runs.
    drop(server);
    t.shutdown().await;
    assert_eq!((opener.opened(), opener.closed()), (3, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_share_the_run_and_a_broken_run_is_not_lent_again() {
    let t = Setup::new(Some(PoolOptions::default())).await;
    let opener = Arc::clone(&t.opener);
    let alice = t.tokens.of("alice");
    let first = call(&t.server, &alice, "whoami").await;
    let held: Vec<_> = (0..4)
        .map(|_| {
            let (server, alice) = (Arc::clone(&t.server), alice.clone());
            tokio::spawn(async move { call(&server, &alice, "hold").await })
        })
        .collect();
    opener
        .wait("four holds at once", &opener.counts.holding, 4)
        .await;
    assert_eq!(opener.opened(), 1, "four requests at once on one run");
    opener.release.send_replace(true);
    for held in held {
        assert_eq!(bounded("a hold", held).await.unwrap(), first);
    }

    // A request leaves the run not reusable: it is closed after it, the next opens anew.
    assert_eq!(call(&t.server, &alice, "break").await, first);
    opener
        .wait("the broken run's close", &opener.counts.closed, 1)
        .await;
    let next = call(&t.server, &alice, "whoami").await;
    assert_ne!(next["run"], first["run"]);
    assert_eq!(opener.opened(), 2);
    t.shutdown().await;
    assert_eq!(opener.closed(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_max_runs_are_pooled_and_the_longest_idle_makes_room() {
    let t = Setup::new(Some(PoolOptions::default().with_max_runs(2))).await;
    let (opener, server) = (Arc::clone(&t.opener), Arc::clone(&t.server));
    let [a, b, c] = ["a", "b", "c"].map(|sub| t.tokens.of(sub));
    call(&server, &a, "whoami").await;
    t.idle(1).await;
    call(&server, &b, "whoami").await;
    t.idle(2).await;
    // a, idle the longest, makes room for c.
    call(&server, &c, "whoami").await;
    opener
        .wait("a's run evicted", &opener.counts.closed, 1)
        .await;
    assert_eq!(opener.opened(), 3);
    t.idle(2).await;
    call(&server, &c, "whoami").await;
    t.idle(2).await;
    call(&server, &b, "whoami").await;
    t.idle(2).await;
    assert_eq!(opener.opened(), 3, "b and c were pooled");
    // Now c is idle the longest.
    let again = call(&server, &a, "whoami").await;
    assert_eq!(again["run"], 3);
    opener
        .wait("c's run evicted", &opener.counts.closed, 2)
        .await;
    t.idle(2).await;

    // Both pooled runs in use: a third principal's run is its request's alone.
    let held: Vec<_> = [&a, &b]
        .map(|token| {
            let (server, token) = (Arc::clone(&server), token.clone());
            tokio::spawn(async move { call(&server, &token, "hold").await })
        })
        .into_iter()
        .collect();
    opener.wait("two holds", &opener.counts.holding, 2).await;
    call(&server, &c, "whoami").await;
    assert_eq!(opener.opened(), 5);
    opener
        .wait("c's own run closed", &opener.counts.closed, 3)
        .await;
    assert_eq!(t.pool.as_ref().unwrap().pooled(), 2, "the bound holds");
    opener.release.send_replace(true);
    for held in held {
        bounded("a hold", held).await.unwrap();
    }
    drop(server);
    t.shutdown().await;
    assert_eq!((opener.opened(), opener.closed()), (5, 5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_run_is_closed_after_the_idle_timeout() {
    let pool = PoolOptions::default().with_idle_timeout(Duration::from_millis(100));
    let t = Setup::new(Some(pool)).await;
    let alice = t.tokens.of("alice");
    let first = call(&t.server, &alice, "whoami").await;
    t.opener
        .wait("the idle run's close", &t.opener.counts.closed, 1)
        .await;
    assert_eq!(t.pool.as_ref().unwrap().pooled(), 0);
    let next = call(&t.server, &alice, "whoami").await;
    assert_ne!(next, first, "a new run after the idle one closed");
    let opener = Arc::clone(&t.opener);
    t.shutdown().await;
    assert_eq!((opener.opened(), opener.closed()), (2, 2));
}

#[test]
fn the_pool_shows_its_bound_and_counts() {
    let pool = PooledTools::new(Opener::new(), PoolOptions::default().with_max_runs(3));
    let shown = format!("{pool:?}");
    assert!(
        shown.contains("max_runs: 3") && shown.contains("pooled: 0"),
        "{shown}"
    );
}
