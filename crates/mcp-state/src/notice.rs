//! Notices between replicas: [`RedisState::publish`] sends a short message on a channel under
//! the state's prefix, [`RedisState::subscribe`] hears them. A subscription has a connection
//! of its own (RESP3, so Redis pushes the messages), which reconnects and subscribes again
//! by itself; whatever may have been missed meanwhile is told as a [`Notice::Gap`].

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ProtocolVersion, PushInfo, PushKind, Value};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::error::StateError;
use crate::state::{CONNECT_TIMEOUT, RECONNECT_TRIES, RESPONSE_TIMEOUT, RedisState};

/// The longest message heard; a longer one is dropped (and told as a gap).
pub const MAX_NOTICE: usize = 4096;

/// How many notices a receiver may fall behind before it is told it missed some.
const BACKLOG: usize = 1024;

/// How often a subscription's connection is checked (and brought back when it was lost).
const PROBE: Duration = Duration::from_secs(5);

/// What a subscription hears.
///
/// ```
/// let notice = mcp_state::Notice::Message(b"ended".to_vec());
/// assert_ne!(notice, mcp_state::Notice::Gap);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A message published on the channel.
    Message(Vec<u8>),
    /// Messages may have been missed: the connection was lost (it is brought back by
    /// itself), a message was over [`MAX_NOTICE`], or the receiver fell behind.
    Gap,
}

/// A subscription to one channel; dropping it unsubscribes (its connection is closed).
///
/// ```no_run
/// # async fn demo(state: mcp_state::RedisState) -> Result<(), mcp_state::StateError> {
/// let mut ended = state.subscribe("session-ended").await?;
/// state.publish("session-ended", b"42").await?;
/// assert_eq!(ended.recv().await, Some(mcp_state::Notice::Message(b"42".to_vec())));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Subscription {
    receiver: broadcast::Receiver<Notice>,
    probe: JoinHandle<()>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.probe.abort();
    }
}

impl Subscription {
    /// The next notice; `None` once the subscription cannot hear any more.
    pub async fn recv(&mut self) -> Option<Notice> {
        match self.receiver.recv().await {
            Ok(notice) => Some(notice),
            Err(broadcast::error::RecvError::Lagged(_)) => Some(Notice::Gap),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
}

impl RedisState {
    /// Publishes `message` on `<prefix><channel>`.
    ///
    /// ```no_run
    /// # async fn demo(state: mcp_state::RedisState) -> Result<(), mcp_state::StateError> {
    /// state.publish("session-ended", b"42").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn publish(&self, channel: &str, message: &[u8]) -> Result<(), StateError> {
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(self.key(channel)).arg(message);
        self.query::<u64>("publish", &cmd).await.map(drop)
    }

    /// Subscribes to `<prefix><channel>` on a connection of its own (checked: the server
    /// speaks RESP3, Redis 6 or later, and took the subscription). Errors name `host:port`,
    /// never the password.
    ///
    /// ```no_run
    /// # async fn demo(state: mcp_state::RedisState) -> Result<(), mcp_state::StateError> {
    /// let mut notices = state.subscribe("session-ended").await?;
    /// while let Some(notice) = notices.recv().await {
    ///     println!("{notice:?}");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn subscribe(&self, channel: &str) -> Result<Subscription, StateError> {
        let name = self.key(channel);
        let (sender, receiver) = broadcast::channel(BACKLOG);
        let heard = sender.clone();
        let wanted = name.clone().into_bytes();
        let push = move |push: PushInfo| -> Result<(), broadcast::error::SendError<Notice>> {
            match heard_notice(&wanted, push) {
                Some(notice) => heard.send(notice).map(drop),
                None => Ok(()),
            }
        };
        let info = self.client().get_connection_info().clone();
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let client = redis::Client::open(info.set_redis_settings(settings))
            .map_err(|e| self.error(&e, Some("subscribe")))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(RECONNECT_TRIES)
            .set_push_sender(push)
            .set_automatic_resubscription();
        let mut connection = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(|e| self.error(&e, None))?;
        connection
            .subscribe(&name)
            .await
            .map_err(|e| self.error(&e, Some("subscribe")))?;
        let probe = tokio::spawn(probe(connection, sender));
        Ok(Subscription { receiver, probe })
    }
}

/// What `push` tells a subscriber of the channel `wanted`, if anything.
fn heard_notice(wanted: &[u8], push: PushInfo) -> Option<Notice> {
    match push.kind {
        PushKind::Disconnection => Some(Notice::Gap),
        PushKind::Message => match push.data.as_slice() {
            [Value::BulkString(channel), Value::BulkString(message)] if channel == wanted => {
                if message.len() > MAX_NOTICE {
                    Some(Notice::Gap)
                } else {
                    Some(Notice::Message(message.clone()))
                }
            }
            _ => None,
        },
        _ => None,
    }
}

/// Checks the subscription's connection every [`PROBE`]: a command on a lost connection
/// brings it back (subscribed again); a failed check is a gap.
async fn probe(mut connection: ConnectionManager, sender: broadcast::Sender<Notice>) {
    let mut every = tokio::time::interval(PROBE);
    every.tick().await;
    loop {
        every.tick().await;
        let answered = redis::cmd("PING")
            .query_async::<Value>(&mut connection)
            .await;
        if answered.is_err() && sender.send(Notice::Gap).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(channel: &[u8], body: &[u8]) -> PushInfo {
        PushInfo {
            kind: PushKind::Message,
            data: vec![
                Value::BulkString(channel.to_vec()),
                Value::BulkString(body.to_vec()),
            ],
        }
    }

    #[test]
    fn only_the_channels_messages_within_the_bound_are_heard() {
        assert_eq!(
            heard_notice(b"p:c", message(b"p:c", b"42")),
            Some(Notice::Message(b"42".to_vec()))
        );
        assert_eq!(heard_notice(b"p:c", message(b"p:other", b"42")), None);
        assert_eq!(
            heard_notice(b"p:c", message(b"p:c", &[0; MAX_NOTICE + 1])),
            Some(Notice::Gap)
        );
        let lost = PushInfo {
            kind: PushKind::Disconnection,
            data: Vec::new(),
        };
        assert_eq!(heard_notice(b"p:c", lost), Some(Notice::Gap));
    }
}
