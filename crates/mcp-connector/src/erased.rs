//! Type erasure for rmcp client transports, so connectors of different kinds return one type.

use std::borrow::Cow;
use std::sync::Arc;

use futures::TryFutureExt as _;
use futures::future::{BoxFuture, Either};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use crate::TransportError;

trait ErasedTransport: Send {
    fn name(&self) -> Cow<'static, str>;
    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> BoxFuture<'static, Result<(), TransportError>>;
    fn receive(&mut self) -> BoxFuture<'_, Option<RxJsonRpcMessage<RoleClient>>>;
    fn close(&mut self) -> BoxFuture<'_, Result<(), TransportError>>;
}

impl<T> ErasedTransport for T
where
    T: Transport<RoleClient> + 'static,
{
    fn name(&self) -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> BoxFuture<'static, Result<(), TransportError>> {
        // A combinator, not an `async` block: a block awaiting a future it captured holds it
        // twice over (as captured and as awaited), doubling the box rmcp's send task points to.
        Box::pin(
            Transport::send(self, item).map_err(|e| TransportError::new(T::name(), Box::new(e))),
        )
    }

    fn receive(&mut self) -> BoxFuture<'_, Option<RxJsonRpcMessage<RoleClient>>> {
        Box::pin(Transport::receive(self))
    }

    fn close(&mut self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async move {
            Transport::close(self)
                .await
                .map_err(|e| TransportError::new(T::name(), Box::new(e)))
        })
    }
}

/// Any rmcp client transport, boxed. Implements rmcp's `Transport<RoleClient>` itself, so it is
/// handed to `rmcp::serve_client` like the transport it wraps.
pub struct BoxTransport {
    inner: Box<dyn ErasedTransport>,
    tap: Option<Arc<dyn Tap>>,
}

/// Sees each message a [`BoxTransport`] sends and receives, in order, on the session's own
/// loop: keep its work short.
///
/// A session hands the notifications it receives to tasks of their own, so a notification sent
/// just before a response can be handled after the response reached its caller; a tap sees
/// it first, in the order the server sent them (docs/upstream.md#rmcp-notification-tasks).
pub trait Tap: Send + Sync + 'static {
    /// Sees (and may amend) a message before it is sent.
    fn sending(&self, message: &mut TxJsonRpcMessage<RoleClient>) {
        let _ = message;
    }

    /// Sees a message as it arrives, before the session handles it.
    fn received(&self, message: &RxJsonRpcMessage<RoleClient>) {
        let _ = message;
    }
}

impl BoxTransport {
    /// Boxes a transport.
    pub fn new<T: Transport<RoleClient> + 'static>(transport: T) -> Self {
        Self {
            inner: Box::new(transport),
            tap: None,
        }
    }

    /// Shows `tap` every message sent and received (see [`Tap`]), in place of any tap set
    /// before.
    pub fn with_tap(mut self, tap: Arc<dyn Tap>) -> Self {
        self.tap = Some(tap);
        self
    }
}

impl std::fmt::Debug for BoxTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoxTransport")
            .field("name", &self.inner.name())
            .field("tap", &self.tap.is_some())
            .finish()
    }
}

impl Transport<RoleClient> for BoxTransport {
    type Error = TransportError;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let Some(tap) = &self.tap {
            tap.sending(&mut item);
        }
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        let received = self.inner.receive();
        let Some(tap) = self.tap.as_ref() else {
            return Either::Left(received);
        };
        Either::Right(async move {
            let message = received.await;
            if let Some(message) = &message {
                tap.received(message);
            }
            message
        })
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use rmcp::model::{ClientJsonRpcMessage, ClientNotification, InitializedNotification};

    use super::*;

    /// A send future of a known size (the bytes stand for the state it would hold).
    struct Sending(#[expect(dead_code, reason = "only its size matters")] [u8; 1000]);

    impl Future for Sending {
        type Output = Result<(), std::io::Error>;

        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
            Poll::Ready(Ok(()))
        }
    }

    struct Sink;

    impl Transport<RoleClient> for Sink {
        type Error = std::io::Error;

        fn send(
            &mut self,
            _: TxJsonRpcMessage<RoleClient>,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            Sending([0; 1000])
        }

        fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> {
            std::future::pending()
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    /// The boxed send holds the transport's send future once: rmcp spawns it as a task of its
    /// own for every message sent.
    #[test]
    fn a_boxed_send_holds_the_transports_future_once() {
        let message = ClientJsonRpcMessage::notification(
            ClientNotification::InitializedNotification(InitializedNotification::default()),
        );
        let sending = ErasedTransport::send(&mut Sink, message);
        let size = std::mem::size_of_val(&*sending);
        assert!(
            size < 2 * std::mem::size_of::<Sending>(),
            "the boxed send future takes {size} bytes around a send future of {}",
            std::mem::size_of::<Sending>()
        );
    }
}
