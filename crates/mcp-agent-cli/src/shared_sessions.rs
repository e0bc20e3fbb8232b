//! `[serve] state` for sessions: mcp-state's sealed store as mcp-serve's [`SessionStore`], so
//! that a session opened on one replica is served by any other. A record (the principal the
//! session is bound to, the client's `initialize`, the tools it promoted) lives under
//! `<prefix>session:<digest of the id>`, sealed with the seal key and bound to its key, with the
//! idle timeout as its time to live; `DELETE` removes it, leaves `<prefix>session-ended:<digest>`
//! for as long (a replica holding the session never writes it again, as it does a record
//! Redis lost by restarting empty), and publishes its key on `<prefix>session-ended`, which
//! every replica hears.
//!
//! A replica serving a session it did not open opens the session's own upstream run, with the
//! promoted tools promoted again and the run recorded under the session's label; an upstream
//! server's own state (a stdio server's memory, its upstream session) stays on the replica
//! that made it, so a client moved to another replica sees a fresh upstream with the same
//! tools.
//!
//! The seal key is required: a record names the principal a session acts for, and a record
//! that anyone with access to Redis could write would let them bind a session to anyone.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcp_serve::{SessionNotice, SessionStore, SharedSessions, StoreError};
use mcp_state::{Notice, SealKey, SealedStore, StateError};

use super::shared_state::FleetState;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

/// The channel ended sessions are announced on, under the prefix.
const ENDED: &str = "session-ended";

/// How many notices a replica may fall behind before it checks every session it holds.
const BACKLOG: usize = 1024;

/// Session records in the fleet's Redis.
struct RedisSessions {
    fleet: Arc<FleetState>,
    records: SealedStore,
    notices: broadcast::Sender<SessionNotice>,
    hearing: JoinHandle<()>,
}

impl Drop for RedisSessions {
    fn drop(&mut self) {
        self.hearing.abort();
    }
}

impl RedisSessions {
    fn failed(&self, e: &StateError) -> StoreError {
        self.fleet.store_error(e)
    }
}

/// The name of the record under `key` (a digest of the session id), below the prefix.
fn record(key: &str) -> String {
    format!("session:{key}")
}

/// The name of the mark of the session under `key` ended, below the prefix.
fn ended(key: &str) -> String {
    format!("{ENDED}:{key}")
}

/// A key as announced: 64 hex digits, else nothing this gateway announced.
fn announced(message: &[u8]) -> Option<String> {
    let key = std::str::from_utf8(message).ok()?;
    (key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit())).then(|| key.to_owned())
}

#[async_trait]
impl SessionStore for RedisSessions {
    async fn put(&self, key: &str, bytes: &[u8], ttl: Duration) -> Result<(), StoreError> {
        self.records
            .put(&record(key), bytes, ttl)
            .await
            .map_err(|e| self.failed(&e))
    }

    async fn replace(&self, key: &str, bytes: &[u8], ttl: Duration) -> Result<bool, StoreError> {
        self.records
            .replace(&record(key), bytes, ttl)
            .await
            .map_err(|e| self.failed(&e))
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.records
            .get(&record(key))
            .await
            .map_err(|e| self.failed(&e))
    }

    async fn touch(&self, key: &str, ttl: Duration) -> Result<bool, StoreError> {
        self.records
            .touch(&record(key), ttl)
            .await
            .map_err(|e| self.failed(&e))
    }

    async fn get_touched(&self, key: &str, ttl: Duration) -> Result<Option<Vec<u8>>, StoreError> {
        self.records
            .get_touched(&record(key), ttl)
            .await
            .map_err(|e| self.failed(&e))
    }

    async fn end(&self, key: &str, ttl: Duration) -> Result<(), StoreError> {
        self.records
            .retire(&record(key), &ended(key), ttl)
            .await
            .map_err(|e| self.failed(&e))?;
        self.fleet
            .redis()
            .publish(ENDED, key.as_bytes())
            .await
            .map_err(|e| self.failed(&e))
    }

    async fn restore(&self, key: &str, bytes: &[u8], ttl: Duration) -> Result<bool, StoreError> {
        self.records
            .restore(&record(key), bytes, ttl, &ended(key))
            .await
            .map_err(|e| self.failed(&e))
    }

    fn notices(&self) -> broadcast::Receiver<SessionNotice> {
        self.notices.subscribe()
    }
}

/// The gateway's sessions kept in the fleet's Redis, sealed with its seal key, doing what
/// `on_error` says when Redis fails; `None` without a seal key (a stored session names the
/// principal it acts for: a record anyone with access to Redis could write would let them
/// bind a session to anyone).
pub(crate) async fn shared_sessions(
    fleet: &Arc<FleetState>,
) -> Result<Option<SharedSessions>, StateError> {
    let Some(key) = fleet.seal_key() else {
        return Ok(None);
    };
    sealed_with(fleet, key).await.map(Some)
}

/// [`shared_sessions`] with the records sealed with `key`.
async fn sealed_with(fleet: &Arc<FleetState>, key: SealKey) -> Result<SharedSessions, StateError> {
    let redis = fleet.redis();
    let mut subscription = redis.subscribe(ENDED).await?;
    let (notices, _) = broadcast::channel(BACKLOG);
    let heard = notices.clone();
    let hearing = tokio::spawn(async move {
        while let Some(notice) = subscription.recv().await {
            let notice = match notice {
                Notice::Message(message) => match announced(&message) {
                    Some(key) => SessionNotice::Ended(key),
                    None => continue,
                },
                Notice::Gap => SessionNotice::Missed,
            };
            let _ = heard.send(notice);
        }
    });
    let sessions = RedisSessions {
        records: redis.sealed_store(key),
        fleet: fleet.clone(),
        notices,
        hearing,
    };
    let on_error = fleet.on_store_error();
    Ok(SharedSessions::new(Arc::new(sessions), on_error))
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use mcp_agent::prelude::{ToolCatalog, ToolDispatcher};
    use mcp_agent::{ToolCall, ToolDescriptor, ToolError, ToolOutput};
    use mcp_serve::{Exposure, HttpOptions, HttpServer, ToolServer};
    use mcp_test_kit::bounded;
    use mcp_test_kit::redis::RedisServer;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    #[test]
    fn only_keys_are_heard_as_announcements() {
        let key = "ab".repeat(32);
        assert_eq!(announced(key.as_bytes()), Some(key.clone()));
        let long_text = b"not hex at all, but sixty-four bytes long: 0123456789abcdef012";
        for other in [&b"ab"[..], long_text, &[0xff; 64]] {
            assert_eq!(announced(other), None);
        }
    }

    /// No tools: the requests under test are the session's own.
    struct NoTools;

    impl ToolCatalog for NoTools {
        fn tools(&self) -> Vec<ToolDescriptor> {
            Vec::new()
        }
    }

    #[async_trait]
    impl ToolDispatcher for NoTools {
        async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
            Err(ToolError::unknown_tool(call.name, Vec::new()))
        }
    }

    /// A replica keeping sessions idle for at most 2 s in the Redis at `url`, sealed with `key`.
    async fn replica(url: &str, key: &[u8; 32]) -> HttpServer {
        let fleet = bounded(FleetState::connect(&mcp_state::StateConfig::new(url)))
            .await
            .expect("the state");
        let sessions = bounded(sealed_with(&Arc::new(fleet), SealKey::from_bytes(key)))
            .await
            .expect("the sessions");
        let options = HttpOptions::default()
            .with_session_idle_timeout(Duration::from_secs(2))
            .with_shared_sessions(sessions)
            .with_sse_keep_alive(None);
        ToolServer::new(Arc::new(NoTools), Exposure::read_only())
            .serve_http(options)
            .await
            .expect("serve over HTTP")
    }

    /// POSTs `body` (of `session`, when given) to `server` over a fresh connection: the status
    /// and the head, lower-cased.
    async fn post(server: &HttpServer, session: Option<&str>, body: &str) -> (u16, String) {
        let mut request = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
             MCP-Protocol-Version: 2025-11-25\r\nConnection: close\r\n",
            server.url().path(),
            server.local_addr(),
            body.len()
        );
        if let Some(session) = session {
            request.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        bounded(async {
            let mut stream = TcpStream::connect(server.local_addr()).await.unwrap();
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).await.unwrap();
            let answer = String::from_utf8_lossy(&answer).to_ascii_lowercase();
            let head = answer
                .split("\r\n\r\n")
                .next()
                .unwrap_or_default()
                .to_owned();
            (head[9..12].parse().unwrap(), head)
        })
        .await
    }

    const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_record_lives_while_its_session_is_used_and_expires_once_idle() {
        let Some(redis) = bounded(RedisServer::start()).await else {
            return;
        };
        let key = [5; 32];
        let (a, b) = (
            replica(&redis.url(), &key).await,
            replica(&redis.url(), &key).await,
        );
        let (status, head) = post(&a, None, INITIALIZE).await;
        assert_eq!(status, 200, "{head}");
        let session = head
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id:"))
            .map(|v| v.trim().to_owned())
            .unwrap();
        assert_eq!(post(&a, Some(&session), INITIALIZED).await.0, 202);
        let digest = ring::digest::digest(&ring::digest::SHA256, session.as_bytes());
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        let name = format!("mcp-agent:session:{hex}");
        let mut raw = redis::Client::open(redis.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let mut pttl = async || -> i64 {
            redis::cmd("PTTL")
                .arg(&name)
                .query_async(&mut raw)
                .await
                .unwrap()
        };
        // The idle timeout and one check interval (a tenth of it).
        let first = pttl().await;
        assert!((1..=2_200).contains(&first), "{first}");
        // Used on either replica once an interval has passed, it is kept for as long again.
        for replica in [&b, &a, &b] {
            let since = Instant::now();
            bounded(async {
                while since.elapsed() < Duration::from_millis(1_000) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
            .await;
            let before = pttl().await;
            assert_eq!(post(replica, Some(&session), LIST).await.0, 200);
            let after = pttl().await;
            assert!(after > before + 300, "{before} → {after}");
        }
        // Left alone, it expires, and no replica serves it any more.
        bounded(async {
            while pttl().await != -2 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert_eq!(post(&a, Some(&session), LIST).await.0, 404);
        assert_eq!(post(&b, Some(&session), LIST).await.0, 404);
    }
}
