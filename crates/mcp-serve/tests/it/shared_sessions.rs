//! Sessions shared by the replicas of a fleet (`HttpOptions::shared_sessions`), replicas in
//! this process sharing one `InProcessSessions` (the fleet on Redis is tested by the
//! gateway's CLI): a session opened on one replica is served by another with no sticky
//! routing, bound to the principal it was opened for; `DELETE` ends it everywhere; an id the
//! store does not hold is `404`; a failing store is refused (closed) or gone around (open); a
//! store restarted empty loses no session a replica holds, and brings back none that ended.
//! An idle session is parked (`HttpOptions::park_after`) and restored at its next request.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
use async_trait::async_trait;
use mcp_serve::{
    BearerAuth, Downstream, HttpOptions, HttpServer, InProcessSessions, JwtAuth, OnStoreError,
    OpenError, OpenTools, SessionNotice, SessionStore, SessionTools, SharedSessions, StoreError,
    ToolServer,
};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::jwt::{ISSUER, Jwks, Signer, claims};
use crate::support::{Answer, POST_HEADERS, Tools, bounded, initialize_body, send};

/// The tools one replica opened for its sessions: for whom, with which label and promoted
/// tools, and how many are still open.
#[derive(Default)]
struct Opened {
    subjects: Mutex<Vec<Option<String>>>,
    sessions: Mutex<Vec<(Option<String>, Vec<String>)>>,
    open: AtomicUsize,
}

impl Opened {
    fn subjects(&self) -> Vec<Option<String>> {
        self.subjects.lock().unwrap().clone()
    }

    fn sessions(&self) -> Vec<(Option<String>, Vec<String>)> {
        self.sessions.lock().unwrap().clone()
    }

    fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }
}

/// Opens the shared native tools for each session, recording it.
struct Opener {
    tools: Arc<Tools>,
    opened: Arc<Opened>,
}

/// One session's view of the native tools, and `promote`, which promotes the tool it names.
struct Opening {
    tools: Arc<Tools>,
    opened: Arc<Opened>,
    promoted: Mutex<Vec<String>>,
}

impl ToolCatalog for Opening {
    fn tools(&self) -> Vec<ToolDescriptor> {
        let mut tools = self.tools.tools();
        tools.push(ToolDescriptor::new(
            "promote",
            crate::support::object(json!({"type": "object"})),
        ));
        tools
    }
}

#[async_trait]
impl ToolDispatcher for Opening {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        if call.name == "promote" {
            let name = call.arguments["name"].as_str().unwrap_or_default();
            self.promoted.lock().unwrap().push(name.to_owned());
            return Ok(ToolOutput::text("promoted"));
        }
        self.tools.dispatch(call).await
    }
}

#[async_trait]
impl SessionTools for Opening {
    fn promoted(&self) -> Vec<String> {
        self.promoted.lock().unwrap().clone()
    }

    async fn close(&self) {
        self.opened.open.fetch_sub(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl OpenTools for Opener {
    async fn open(&self) -> Result<Arc<dyn SessionTools>, OpenError> {
        self.open_for(Downstream::none()).await
    }

    async fn open_for(&self, downstream: Downstream) -> Result<Arc<dyn SessionTools>, OpenError> {
        let subject = downstream.principal().map(|p| p.subject().to_owned());
        self.opened.subjects.lock().unwrap().push(subject);
        let promoted = downstream.promoted().to_vec();
        let label = downstream.session().map(str::to_owned);
        self.opened
            .sessions
            .lock()
            .unwrap()
            .push((label, promoted.clone()));
        self.opened.open.fetch_add(1, Ordering::SeqCst);
        Ok(Arc::new(Opening {
            tools: self.tools.clone(),
            opened: self.opened.clone(),
            promoted: Mutex::new(promoted),
        }))
    }
}

/// One replica: its endpoint, what it opened and the tools it serves.
struct Replica {
    server: HttpServer,
    opened: Arc<Opened>,
    tools: Arc<Tools>,
}

impl Replica {
    /// A replica keeping its sessions in `store`, with `options`.
    async fn start(
        store: Arc<dyn SessionStore>,
        on_error: OnStoreError,
        options: HttpOptions,
    ) -> Self {
        Self::start_with(options.with_shared_sessions(SharedSessions::new(store, on_error))).await
    }

    /// A replica with `options` as given.
    async fn start_with(options: HttpOptions) -> Self {
        let opened = Arc::new(Opened::default());
        let tools = Arc::new(Tools::default());
        let opener = Opener {
            tools: tools.clone(),
            opened: opened.clone(),
        };
        let server = ToolServer::per_session(Arc::new(opener))
            .serve_http(options.with_sse_keep_alive(None))
            .await
            .expect("serve over HTTP");
        Self {
            server,
            opened,
            tools,
        }
    }

    fn url(&self) -> &str {
        self.server.url().as_str()
    }
}

/// The headers of a request of `session`, with `token` as bearer when given.
fn headers<'a>(session: &'a str, bearer: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut headers = POST_HEADERS.to_vec();
    headers.push(("mcp-session-id", session));
    headers.push(("mcp-protocol-version", "2025-11-25"));
    if let Some(bearer) = bearer {
        headers.push(("authorization", bearer));
    }
    headers
}

/// Opens a session on `replica` (`initialize`, `notifications/initialized`) as `bearer`.
async fn open(replica: &Replica, bearer: Option<&str>) -> String {
    let mut first = POST_HEADERS.to_vec();
    if let Some(bearer) = bearer {
        first.push(("authorization", bearer));
    }
    let opened = send("POST", replica.url(), &first, initialize_body()).await;
    assert_eq!(opened.status, 200, "{}", opened.body);
    let session = opened.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let answer = send(
        "POST",
        replica.url(),
        &headers(&session, bearer),
        initialized,
    )
    .await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    session
}

/// The JSON-RPC message of an answer (a one-event stream, or JSON).
fn message(answer: &Answer) -> Value {
    answer.messages().remove(0)
}

/// `tools/list` of `session` on `replica`.
async fn list(replica: &Replica, session: &str, bearer: Option<&str>) -> Answer {
    let body = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    send("POST", replica.url(), &headers(session, bearer), body).await
}

/// `tools/call` of `mapping` (1 + 2) in `session` on `replica`.
async fn call(replica: &Replica, session: &str, bearer: Option<&str>) -> Answer {
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "mapping", "arguments": {"a": 1, "b": 2}}});
    send(
        "POST",
        replica.url(),
        &headers(session, bearer),
        body.to_string(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_served_by_any_replica_bound_to_its_own_principal() {
    let ec = Signer::ec();
    let jwks = Jwks::serve(json!([ec.jwk("ec-1")])).await;
    let store: Arc<dyn SessionStore> = Arc::new(InProcessSessions::default());
    let options = || {
        let jwt = JwtAuth::new(ISSUER, jwks.url.clone()).with_audience("fleet");
        HttpOptions::default()
            .with_auth(BearerAuth::jwt(jwt).unwrap())
            .with_auth_failure_limit(None)
    };
    let [a, b, c] = [
        Replica::start(store.clone(), OnStoreError::Closed, options()).await,
        Replica::start(store.clone(), OnStoreError::Closed, options()).await,
        Replica::start(store.clone(), OnStoreError::Closed, options()).await,
    ];
    let bearer_of = |sub: &str| {
        let mut claims = claims("fleet");
        claims["sub"] = json!(sub);
        format!("Bearer {}", ec.token("ec-1", &claims))
    };
    let (alice, bob) = (bearer_of("alice"), bearer_of("bob"));
    let session = open(&a, Some(&alice)).await;
    until(
        "A opens Alice's tools",
        Duration::from_secs(10),
        async || !a.opened.subjects().is_empty(),
    )
    .await;
    assert_eq!(a.opened.subjects(), [Some("alice".to_owned())]);

    // B never saw the session: it is restored there, for Alice, and serves her.
    let listed = message(&list(&b, &session, Some(&alice)).await);
    assert!(
        listed["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{listed}"
    );
    let called = message(&call(&b, &session, Some(&alice)).await);
    assert_eq!(
        called["result"]["structuredContent"],
        json!({"sum": 3.0}),
        "{called}"
    );
    assert_eq!(b.opened.subjects(), [Some("alice".to_owned())]);
    // And back on A.
    let called = message(&call(&a, &session, Some(&alice)).await);
    assert_eq!(
        called["result"]["structuredContent"],
        json!({"sum": 3.0}),
        "{called}"
    );

    // Bob's valid token does not make her session his, on a replica that holds it…
    let refused = message(&list(&b, &session, Some(&bob)).await);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another principal")
    );
    // …nor on one that restores it for his request: it is restored for Alice all the same.
    let refused = message(&call(&c, &session, Some(&bob)).await);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another principal")
    );
    assert!(
        !c.opened.subjects().contains(&Some("bob".to_owned())),
        "{:?}",
        c.opened.subjects()
    );
    let called = message(&call(&c, &session, Some(&alice)).await);
    assert_eq!(
        called["result"]["structuredContent"],
        json!({"sum": 3.0}),
        "{called}"
    );
    assert_eq!(
        c.opened.subjects(),
        [Some("alice".to_owned())],
        "tools opened once, for her"
    );
}

/// Waits (bounded) until `done` holds.
async fn until(what: &str, deadline: Duration, mut done: impl AsyncFnMut() -> bool) {
    let end = Instant::now() + deadline;
    while !done().await {
        assert!(Instant::now() < end, "{what}: not within {deadline:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_on_one_replica_ends_the_session_on_every_replica() {
    let store: Arc<dyn SessionStore> = Arc::new(InProcessSessions::default());
    // The check of a session held is due every 30 s: what ends it on B sooner is the notice.
    let options = || HttpOptions::default().with_session_idle_timeout(Duration::from_secs(600));
    let a = Replica::start(store.clone(), OnStoreError::Closed, options()).await;
    let b = Replica::start(store.clone(), OnStoreError::Closed, options()).await;
    let session = open(&a, None).await;
    let called = message(&call(&b, &session, None).await);
    assert_eq!(
        called["result"]["structuredContent"],
        json!({"sum": 3.0}),
        "{called}"
    );
    until(
        "A opens the session's tools",
        Duration::from_secs(10),
        async || a.opened.open() == 1,
    )
    .await;
    assert_eq!(b.opened.open(), 1);

    let ended = send("DELETE", a.url(), &headers(&session, None), "").await;
    assert_eq!(ended.status, 204, "{}", ended.body);
    assert_eq!(list(&a, &session, None).await.status, 404);
    // B drops it as the end is announced, and with it the tools it opened for it.
    until("B drops the session", Duration::from_secs(10), async || {
        list(&b, &session, None).await.status == 404
    })
    .await;
    until(
        "B's tools are closed",
        Duration::from_secs(10),
        async || b.opened.open() == 0,
    )
    .await;
    assert_eq!(a.opened.open(), 0);
    // A third replica finds nothing either.
    let c = Replica::start(store.clone(), OnStoreError::Closed, options()).await;
    assert_eq!(call(&c, &session, None).await.status, 404);
    assert!(c.opened.subjects().is_empty());
}

/// The store's key of `session`: SHA-256 of the id, in hex.
fn key_of(session: &str) -> String {
    ring::digest::digest(&ring::digest::SHA256, session.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_the_store_does_not_hold_are_404_and_never_another_session() {
    let sessions = Arc::new(InProcessSessions::default());
    let store: Arc<dyn SessionStore> = sessions.clone();
    let a = Replica::start(store.clone(), OnStoreError::Closed, HttpOptions::default()).await;
    let b = Replica::start(store.clone(), OnStoreError::Closed, HttpOptions::default()).await;
    let session = open(&a, None).await;
    let long = "a".repeat(4096);
    for forged in [
        "4a1e7c3e-0000-4000-8000-000000000000",
        "not a session id",
        long.as_str(),
        &session.to_uppercase(),
        &session[..session.len() - 1],
    ] {
        let answer = list(&b, forged, None).await;
        assert_eq!(answer.status, 404, "{forged:?}: {}", answer.body);
    }
    // A record that is not one (altered in the store) reads as absent.
    let other = open(&a, None).await;
    bounded(
        "alter",
        sessions.put(
            &key_of(&other),
            b"{\"v\":1,\"principal\":null}",
            Duration::from_secs(60),
        ),
    )
    .await
    .unwrap();
    assert_eq!(list(&b, &other, None).await.status, 404);
    assert!(b.opened.subjects().is_empty(), "nothing was opened on B");
    // The genuine one still works there.
    assert_eq!(list(&b, &session, None).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_unused_for_its_idle_timeout_is_gone_from_every_replica() {
    let sessions = Arc::new(InProcessSessions::default());
    let store: Arc<dyn SessionStore> = sessions.clone();
    let options = || HttpOptions::default().with_session_idle_timeout(Duration::from_secs(1));
    let a = Replica::start(store.clone(), OnStoreError::Closed, options()).await;
    let b = Replica::start(store.clone(), OnStoreError::Closed, options()).await;
    let session = open(&a, None).await;
    let key = key_of(&session);
    assert!(sessions.get(&key).await.unwrap().is_some());
    until("the record expires", Duration::from_secs(20), async || {
        sessions.get(&key).await.unwrap().is_none()
    })
    .await;
    assert_eq!(list(&b, &session, None).await.status, 404);
    assert_eq!(list(&a, &session, None).await.status, 404);
    until(
        "A's tools are closed",
        Duration::from_secs(10),
        async || a.opened.open() == 0,
    )
    .await;
}

/// A store restarted empty: the sessions held go on. A's session, which B never saw, is
/// written back by A alone; until then B answers it `503` (never `404`), then serves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_the_store_lost_is_written_back_by_its_only_holder() {
    let sessions = Arc::new(InProcessSessions::default());
    let store: Arc<dyn SessionStore> = sessions.clone();
    // No check falls due by itself meanwhile: what writes the record back is the notice.
    let options = || HttpOptions::default().with_session_idle_timeout(Duration::from_secs(600));
    let a = Replica::start(store.clone(), OnStoreError::Closed, options()).await;
    let b = Replica::start(store.clone(), OnStoreError::Closed, options()).await;
    let session = open(&a, None).await;
    let key = key_of(&session);
    sessions.clear();
    let mut statuses = Vec::new();
    until(
        "B serves the session",
        Duration::from_secs(10),
        async || {
            let status = call(&b, &session, None).await.status;
            statuses.push(status);
            status == 200
        },
    )
    .await;
    assert!(
        statuses.iter().all(|s| [200, 503].contains(s)),
        "{statuses:?}"
    );
    assert!(sessions.get(&key).await.unwrap().is_some(), "written back");
    assert_eq!(
        a.opened.subjects(),
        b.opened.subjects(),
        "the same principal"
    );
}

/// A parked session keeps nothing on its replica but its record, which the store alone held:
/// when the store loses it (restarted empty), the replica that parked the session writes it
/// back, and the session goes on, on any replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_session_the_store_lost_is_written_back_by_the_replica_that_parked_it() {
    let sessions = Arc::new(InProcessSessions::default());
    let store: Arc<dyn SessionStore> = sessions.clone();
    let idle = || HttpOptions::default().with_session_idle_timeout(Duration::from_secs(600));
    let parking = idle().with_park_after(Duration::from_millis(300));
    let a = Replica::start(store.clone(), OnStoreError::Closed, parking).await;
    let b = Replica::start(store.clone(), OnStoreError::Closed, idle()).await;
    let session = open(&a, None).await;
    let key = key_of(&session);
    until(
        "A parks the session (its tools closed)",
        Duration::from_secs(10),
        async || a.opened.open() == 0,
    )
    .await;
    sessions.clear();
    until(
        "A writes the parked session's record back",
        Duration::from_secs(10),
        async || sessions.get(&key).await.unwrap().is_some(),
    )
    .await;
    let called = message(&call(&b, &session, None).await);
    assert_eq!(
        called["result"]["structuredContent"],
        json!({"sum": 3.0}),
        "{called}"
    );
    assert_eq!(
        a.opened.subjects(),
        b.opened.subjects(),
        "the same principal"
    );
}

/// A `DELETE` the store could not take (open: the client was answered) is ended there once
/// it answers again, before any holder writes the session back: it stays ended everywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ended_while_the_store_failed_is_never_written_back() {
    let sessions = Arc::new(InProcessSessions::default());
    let flaky = Arc::new(Flaky {
        inner: sessions.clone(),
        down: AtomicBool::new(false),
    });
    let options = || HttpOptions::default().with_session_idle_timeout(Duration::from_secs(600));
    let a = Replica::start(flaky.clone(), OnStoreError::Open, options()).await;
    let b = Replica::start(flaky.clone(), OnStoreError::Open, options()).await;
    let session = open(&a, None).await;
    assert_eq!(call(&b, &session, None).await.status, 200, "B holds it too");
    flaky.down.store(true, Ordering::SeqCst);
    let ended = send("DELETE", a.url(), &headers(&session, None), "").await;
    assert!(ended.status < 300, "{}", ended.body);
    // The store comes back empty; B still holds the session, A remembers ending it.
    flaky.down.store(false, Ordering::SeqCst);
    sessions.clear();
    until(
        "B drops the session and closes its tools",
        Duration::from_secs(10),
        async || b.opened.open() == 0,
    )
    .await;
    assert!(sessions.get(&key_of(&session)).await.unwrap().is_none());
    let c = Replica::start(flaky.clone(), OnStoreError::Open, options()).await;
    assert_eq!(call(&c, &session, None).await.status, 404);
}

/// A store that fails while `down`, else is `inner`.
struct Flaky {
    inner: Arc<InProcessSessions>,
    down: AtomicBool,
}

impl Flaky {
    fn up(&self) -> Result<&InProcessSessions, StoreError> {
        if self.down.load(Ordering::SeqCst) {
            Err(StoreError::new("test store", "down"))
        } else {
            Ok(&self.inner)
        }
    }
}

#[async_trait]
impl SessionStore for Flaky {
    async fn put(&self, key: &str, record: &[u8], ttl: Duration) -> Result<(), StoreError> {
        self.up()?.put(key, record, ttl).await
    }
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.up()?.get(key).await
    }
    async fn touch(&self, key: &str, ttl: Duration) -> Result<bool, StoreError> {
        self.up()?.touch(key, ttl).await
    }
    async fn end(&self, key: &str, ttl: Duration) -> Result<(), StoreError> {
        self.up()?.end(key, ttl).await
    }
    async fn restore(&self, key: &str, record: &[u8], ttl: Duration) -> Result<bool, StoreError> {
        self.up()?.restore(key, record, ttl).await
    }
    async fn replace(&self, key: &str, record: &[u8], ttl: Duration) -> Result<bool, StoreError> {
        self.up()?.replace(key, record, ttl).await
    }
    fn notices(&self) -> broadcast::Receiver<SessionNotice> {
        self.inner.notices()
    }
}

/// A store that always fails.
struct Down(broadcast::Sender<SessionNotice>);

#[async_trait]
impl SessionStore for Down {
    async fn put(&self, _: &str, _: &[u8], _: Duration) -> Result<(), StoreError> {
        Err(StoreError::new("test store", "down"))
    }
    async fn get(&self, _: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Err(StoreError::new("test store", "down"))
    }
    async fn touch(&self, _: &str, _: Duration) -> Result<bool, StoreError> {
        Err(StoreError::new("test store", "down"))
    }
    async fn end(&self, _: &str, _: Duration) -> Result<(), StoreError> {
        Err(StoreError::new("test store", "down"))
    }
    async fn restore(&self, _: &str, _: &[u8], _: Duration) -> Result<bool, StoreError> {
        Err(StoreError::new("test store", "down"))
    }
    async fn replace(&self, _: &str, _: &[u8], _: Duration) -> Result<bool, StoreError> {
        Err(StoreError::new("test store", "down"))
    }
    fn notices(&self) -> broadcast::Receiver<SessionNotice> {
        self.0.subscribe()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_store_is_refused_when_closed_and_gone_around_when_open() {
    let down: Arc<dyn SessionStore> = Arc::new(Down(broadcast::channel(1).0));
    let closed = Replica::start(down.clone(), OnStoreError::Closed, HttpOptions::default()).await;
    let answer = send("POST", closed.url(), POST_HEADERS, initialize_body()).await;
    assert_eq!(answer.status, 503, "{}", answer.body);
    assert!(answer.body.contains("shared session store is unreachable"));
    assert!(closed.opened.subjects().is_empty());
    let unknown = list(&closed, "4a1e7c3e-0000-4000-8000-000000000000", None).await;
    assert_eq!(unknown.status, 503, "{}", unknown.body);

    let open_ = Replica::start(down.clone(), OnStoreError::Open, HttpOptions::default()).await;
    let session = open(&open_, None).await;
    let called = message(&call(&open_, &session, None).await);
    assert_eq!(
        called["result"]["structuredContent"],
        json!({"sum": 3.0}),
        "{called}"
    );
    let unknown = list(&open_, "4a1e7c3e-0000-4000-8000-000000000000", None).await;
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    let ended = send("DELETE", open_.url(), &headers(&session, None), "").await;
    assert_eq!(ended.status, 204, "{}", ended.body);
}

/// A TCP proxy handing each new connection to the next of `backends` in turn: a load
/// balancer without sticky sessions.
async fn round_robin(backends: Vec<SocketAddr>) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut next = 0;
        while let Ok((mut client, _)) = listener.accept().await {
            let backend = backends[next % backends.len()];
            next += 1;
            tokio::spawn(async move {
                if let Ok(mut server) = tokio::net::TcpStream::connect(backend).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    (addr, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rmcp_client_behind_a_round_robin_balancer_keeps_one_session() {
    use mcp_config::{HttpSpec, ServerSpec, TransportSpec};
    use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};
    let store: Arc<dyn SessionStore> = Arc::new(InProcessSessions::default());
    let a = Replica::start(store.clone(), OnStoreError::Closed, HttpOptions::default()).await;
    let b = Replica::start(store.clone(), OnStoreError::Closed, HttpOptions::default()).await;
    let (addr, proxy) = round_robin(vec![a.server.local_addr(), b.server.local_addr()]).await;
    let url: url::Url = format!("http://{addr}/mcp").parse().unwrap();
    // A connection per request, so that requests alternate between the replicas.
    let mut options = mcp_transport_http::HttpOptions::default();
    options.pool_max_idle_per_host = 0;
    let connector = mcp_transport_http::HttpConnector::new(options).expect("the HTTP connector");
    let spec = ServerSpec::new("fleet", TransportSpec::StreamableHttp(HttpSpec::new(url)));
    let transport = connector.transport(&spec).expect("the transport");
    // A client of sessions (2025-11-25), not of stateless requests.
    let info = ClientConfig::default().with_protocol_version(ProtocolVersion::V_2025_11_25);
    let client = bounded("initialize", rmcp::serve_client(info, transport))
        .await
        .expect("the handshake");
    for n in 0..6 {
        let params = CallToolRequestParams::new("mapping")
            .with_arguments(crate::support::object(json!({"a": n, "b": 1})));
        let result = bounded("tools/call", client.call_tool(params))
            .await
            .unwrap_or_else(|e| panic!("call {n}: {e}"));
        assert_eq!(
            result.structured_content,
            Some(json!({"sum": f64::from(n + 1)}))
        );
    }
    let tools = bounded("tools/list", client.list_all_tools())
        .await
        .unwrap();
    assert!(!tools.is_empty());
    // One session, served by both replicas: each opened its tools once (a session lost and
    // initialized again would have opened them again).
    assert_eq!(a.opened.subjects().len(), 1);
    assert_eq!(b.opened.subjects().len(), 1);
    bounded("close", client.cancel()).await.unwrap();
    proxy.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_promoted_on_one_replica_are_promoted_again_where_the_session_is_restored() {
    let store: Arc<dyn SessionStore> = Arc::new(InProcessSessions::default());
    let a = Replica::start(store.clone(), OnStoreError::Closed, HttpOptions::default()).await;
    let b = Replica::start(store.clone(), OnStoreError::Closed, HttpOptions::default()).await;
    let session = open(&a, None).await;
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "promote", "arguments": {"name": "mapping"}}});
    let promoted = send("POST", a.url(), &headers(&session, None), body.to_string()).await;
    assert_eq!(
        message(&promoted)["result"]["isError"],
        false,
        "{}",
        promoted.body
    );
    assert_eq!(list(&b, &session, None).await.status, 200);
    let [(label_a, on_a)] = a.opened.sessions().try_into().unwrap();
    let [(label_b, on_b)] = b.opened.sessions().try_into().unwrap();
    assert!(on_a.is_empty(), "a new session promoted nothing");
    assert_eq!(on_b, ["mapping"], "promoted again on B");
    // Both name the session alike, never by its id.
    let label = label_a.expect("a label");
    assert_eq!(label_b.as_deref(), Some(label.as_str()));
    assert_eq!(label.len(), 16);
    assert!(!session.contains(&label));
}

/// `tools/call` of `name` with `arguments` in `session` on `replica`.
async fn call_tool(replica: &Replica, session: &str, name: &str, arguments: Value) -> Answer {
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}});
    send(
        "POST",
        replica.url(),
        &headers(session, None),
        body.to_string(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_is_parked_and_restored_and_a_busy_one_is_not_parked() {
    // No store configured: the records of parked sessions stay in this process.
    let replica = Replica::start_with(
        HttpOptions::default()
            .with_park_after(Duration::from_millis(300))
            .with_session_idle_timeout(Duration::from_secs(600)),
    )
    .await;
    let mut gate_started = replica.tools.on_gate();

    // A session with a call in progress, opened first: due first, but never parked.
    let busy = open(&replica, None).await;
    let gated = tokio::spawn({
        let url = replica.url().to_owned();
        let busy = busy.clone();
        async move {
            let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                "params": {"name": "gate", "arguments": {}}});
            send("POST", &url, &headers(&busy, None), body.to_string()).await
        }
    });
    bounded("the gate call starts", gate_started.recv()).await;

    // An idle session, which promoted a tool.
    let idle = open(&replica, None).await;
    let promoted =
        message(&call_tool(&replica, &idle, "promote", json!({"name": "mapping"})).await);
    assert!(promoted["result"].is_object(), "{promoted}");
    assert_eq!(replica.opened.open(), 2);

    until(
        "the idle session is parked (its tools closed)",
        Duration::from_secs(10),
        async || replica.opened.open() == 1,
    )
    .await;
    // The busy one was due as early, and is still open: its call goes through.
    replica.tools.open_gate();
    let gated = message(&bounded("the gate call", gated).await.unwrap());
    assert_eq!(
        gated["result"]["structuredContent"],
        json!({"gate": "passed"}),
        "{gated}"
    );
    assert_eq!(
        replica.opened.subjects().len(),
        2,
        "no session was reopened yet"
    );

    // The parked session's next request restores it, its promoted tool promoted again.
    let called = message(&call(&replica, &idle, None).await);
    assert_eq!(
        called["result"]["structuredContent"],
        json!({"sum": 3.0}),
        "{called}"
    );
    let sessions = replica.opened.sessions();
    assert_eq!(sessions.len(), 3, "{sessions:?}");
    assert_eq!(sessions[2].1, ["mapping"], "{sessions:?}");

    // Parked again, then ended: DELETE of a parked session ends it for good.
    until(
        "both sessions parked",
        Duration::from_secs(10),
        async || replica.opened.open() == 0,
    )
    .await;
    let deleted = send("DELETE", replica.url(), &headers(&idle, None), "").await;
    assert!(deleted.status < 300, "{} {}", deleted.status, deleted.body);
    let gone = call(&replica, &idle, None).await;
    assert_eq!(gone.status, 404, "{}", gone.body);
    // The other parked session is still there.
    let called = message(&call(&replica, &busy, None).await);
    assert_eq!(
        called["result"]["structuredContent"],
        json!({"sum": 3.0}),
        "{called}"
    );
}
