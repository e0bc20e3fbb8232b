//! The innermost service of a governed stack: it runs the resolver's call, with the
//! [`Permit`] that only it can make, on the arguments the layers above decided on.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::{CallRequest, CallResolver, CallService, Permit};
use crate::{ToolError, ToolOutput};

/// Runs what every layer above let through. Crate-private: the only way to a resolver's
/// `dispatch_resolved` is through a [`Governed`](super::Governed) stack.
pub(super) struct Dispatch<D> {
    pub(super) resolver: Arc<D>,
}

impl<D: CallResolver> CallService<D::Target> for Dispatch<D> {
    /// The resolver's own future (no future of this service's around it).
    fn call<'life0, 'async_trait>(
        &'life0 self,
        request: CallRequest<D::Target>,
    ) -> Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let CallRequest {
            mut call,
            resolved,
            target,
            trace,
            ..
        } = request;
        trace.start();
        // The arguments the layers decided on are the ones that run: moved back when no layer
        // keeps the resolved call past this point, copied otherwise.
        call.arguments = match Arc::try_unwrap(resolved) {
            Ok(resolved) => resolved.arguments,
            Err(shared) => shared.arguments.clone(),
        };
        self.resolver.dispatch_resolved(Permit::new(), call, target)
    }
}
