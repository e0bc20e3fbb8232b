//! Type erasure for rmcp client transports, so connectors of different kinds return one type.

use std::borrow::Cow;

use futures::future::BoxFuture;
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
pub struct BoxTransport(Box<dyn ErasedTransport>);

impl BoxTransport {
    /// Boxes a transport.
    pub fn new<T: Transport<RoleClient> + 'static>(transport: T) -> Self {
        Self(Box::new(transport))
    }
}

impl std::fmt::Debug for BoxTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("BoxTransport").field(&self.0.name()).finish()
    }
}

impl Transport<RoleClient> for BoxTransport {
    type Error = TransportError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.0.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.0.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.0.close()
    }
}
