//! `RedisState`: one checked connection to the fleet's Redis, shared by every store of a
//! gateway replica; it reconnects by itself after the server comes back.

use std::time::Duration;

use redis::AsyncConnectionConfig;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::config::{OnError, StateConfig, target};
use crate::error::StateError;

/// How long one connection attempt may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one command may wait for its answer.
pub(crate) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Reconnection attempts after a lost connection, before a command fails.
pub(crate) const RECONNECT_TRIES: usize = 3;

/// A connection to the shared state, checked at [`connect`](Self::connect) (reachable,
/// credentials accepted). Clones share the connection.
///
/// ```no_run
/// # async fn demo() -> Result<(), mcp_state::StateError> {
/// use mcp_state::{RedisState, SealKey, StateConfig};
///
/// let state = RedisState::connect(&StateConfig::new("redis://127.0.0.1:6379")).await?;
/// let store = state.sealed_store(SealKey::generate());
/// store.put("session:42", b"opaque", std::time::Duration::from_secs(60)).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisState {
    client: redis::Client,
    connection: ConnectionManager,
    addr: String,
    prefix: String,
    on_error: OnError,
    password: Option<String>,
}

impl RedisState {
    /// Connects to the server of `config` and checks it with `PING`. Errors name `host:port`
    /// and never the password: [`StateError::BadUrl`], [`StateError::MissingUrl`],
    /// [`StateError::CaFile`], [`StateError::Unreachable`] (a certificate not trusted, too),
    /// [`StateError::AuthFailed`].
    ///
    /// ```no_run
    /// # async fn demo() {
    /// use mcp_state::{RedisState, StateConfig, StateError};
    ///
    /// match RedisState::connect(&StateConfig::new("redis://:pw@127.0.0.1:1")).await {
    ///     Err(StateError::Unreachable { addr, .. }) => assert_eq!(addr, "127.0.0.1:1"),
    ///     other => panic!("{other:?}"),
    /// }
    /// # }
    /// ```
    pub async fn connect(config: &StateConfig) -> Result<Self, StateError> {
        let url = config.resolve_url()?;
        let (addr, password, tls) = target(&url)?;
        let client = crate::tls::client(&url, tls, config.ca_file.as_deref())?.map_err(|e| {
            StateError::BadUrl {
                reason: StateError::from_redis(&e, &addr, None, password.as_deref()).to_string(),
            }
        })?;
        let mapped =
            |e: redis::RedisError| StateError::from_redis(&e, &addr, None, password.as_deref());
        // One attempt, checked with PING, so that a refusal or a wrong password is reported at
        // once; the manager (which retries with a backoff) is made only for a server that
        // answers.
        let once = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT));
        let mut check = client
            .get_multiplexed_async_connection_with_config(&once)
            .await
            .map_err(mapped)?;
        redis::cmd("PING")
            .query_async::<String>(&mut check)
            .await
            .map_err(mapped)?;
        drop(check);
        let settings = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(RECONNECT_TRIES);
        let connection = ConnectionManager::new_with_config(client.clone(), settings)
            .await
            .map_err(mapped)?;
        Ok(Self {
            client,
            connection,
            addr,
            prefix: config.key_prefix.clone(),
            on_error: config.on_error,
            password,
        })
    }

    /// The server as `host:port`.
    ///
    /// ```no_run
    /// # async fn demo(state: mcp_state::RedisState) {
    /// println!("shared state at {}", state.addr());
    /// # }
    /// ```
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// What the configuration says to do when the state is unreachable; the callers act on it.
    ///
    /// ```no_run
    /// # async fn demo(state: mcp_state::RedisState) {
    /// if state.on_error() == mcp_state::OnError::Closed { /* refuse */ }
    /// # }
    /// ```
    pub fn on_error(&self) -> OnError {
        self.on_error
    }

    /// Checks that the server answers now (`PING`), within the command timeout: for a
    /// readiness probe, which bounds it tighter. A failure is [`StateError::Command`] (or
    /// [`StateError::AuthFailed`]).
    ///
    /// ```no_run
    /// # async fn demo(state: mcp_state::RedisState) {
    /// let ready = state.ping().await.is_ok();
    /// # }
    /// ```
    pub async fn ping(&self) -> Result<(), StateError> {
        self.query::<String>("ping", &redis::cmd("PING"))
            .await
            .map(drop)
    }

    /// [`ping`](Self::ping), given at most `within`: a server that does not answer by then is
    /// a failed exchange too ([`StateError::Command`], counted in
    /// [`STATE_ERRORS`](crate::STATE_ERRORS) like every other).
    ///
    /// ```no_run
    /// # async fn demo(state: mcp_state::RedisState) {
    /// use std::time::Duration;
    /// let ready = state.ping_within(Duration::from_secs(1)).await.is_ok();
    /// # }
    /// ```
    pub async fn ping_within(&self, within: Duration) -> Result<(), StateError> {
        match tokio::time::timeout(within, self.ping()).await {
            Ok(answer) => answer,
            Err(_) => {
                metrics::counter!(crate::STATE_ERRORS).increment(1);
                Err(StateError::Command {
                    addr: self.addr().to_owned(),
                    op: "ping",
                    reason: format!("no answer within {within:?}"),
                })
            }
        }
    }

    /// The full Redis key of `name`: the configured prefix, then `name`.
    ///
    /// ```no_run
    /// # async fn demo(state: mcp_state::RedisState) {
    /// assert_eq!(state.key("session:1"), "mcp-agent:session:1"); // the default prefix
    /// # }
    /// ```
    pub fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// Runs `cmd` for `op`, mapping a failure to [`StateError::Command`] (or
    /// [`StateError::AuthFailed`]).
    pub(crate) async fn query<T: redis::FromRedisValue>(
        &self,
        op: &'static str,
        cmd: &redis::Cmd,
    ) -> Result<T, StateError> {
        let mut connection = self.connection.clone();
        cmd.query_async(&mut connection)
            .await
            .map_err(|e| StateError::from_redis(&e, &self.addr, Some(op), self.password.as_deref()))
    }
}

impl RedisState {
    /// The client of the server, for connections of their own (subscriptions).
    pub(crate) fn client(&self) -> &redis::Client {
        &self.client
    }

    /// A client error during `op` (`None`: while connecting), typed, without the password.
    pub(crate) fn error(&self, e: &redis::RedisError, op: Option<&'static str>) -> StateError {
        StateError::from_redis(e, &self.addr, op, self.password.as_deref())
    }

    /// Runs the script `invocation` for `op`, mapping a failure like [`query`](Self::query).
    pub(crate) async fn invoke<T: redis::FromRedisValue>(
        &self,
        op: &'static str,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<T, StateError> {
        let mut connection = self.connection.clone();
        invocation
            .invoke_async(&mut connection)
            .await
            .map_err(|e| StateError::from_redis(&e, &self.addr, Some(op), self.password.as_deref()))
    }
}

impl RedisState {
    /// Runs the pipeline `pipe` for `op`, mapping a failure like [`query`](Self::query).
    pub(crate) async fn query_pipe<T: redis::FromRedisValue>(
        &self,
        op: &'static str,
        pipe: &redis::Pipeline,
    ) -> Result<T, StateError> {
        let mut connection = self.connection.clone();
        pipe.query_async(&mut connection)
            .await
            .map_err(|e| StateError::from_redis(&e, &self.addr, Some(op), self.password.as_deref()))
    }
}

impl std::fmt::Debug for RedisState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisState")
            .field("addr", &self.addr)
            .field("prefix", &self.prefix)
            .field("on_error", &self.on_error)
            .finish_non_exhaustive()
    }
}
