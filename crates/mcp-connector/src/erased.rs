//! Type erasure for rmcp client transports, so connectors of different kinds return one type.

use std::borrow::Cow;
use std::sync::Arc;

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
        let fut = Transport::send(self, item);
        Box::pin(async move {
            fut.await
                .map_err(|e| TransportError::new(T::name(), Box::new(e)))
        })
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
