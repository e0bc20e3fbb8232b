//! The innermost service of a governed stack: it runs the resolver's call, with the
//! [`Permit`] that only it can make.

use std::sync::Arc;

use async_trait::async_trait;

use super::{CallRequest, CallResolver, CallService, Permit};
use crate::{ToolError, ToolOutput};

/// Runs what every layer above let through. Crate-private: the only way to a resolver's
/// `dispatch_resolved` is through a [`Governed`](super::Governed) stack.
pub(super) struct Dispatch<D> {
    pub(super) resolver: Arc<D>,
}

#[async_trait]
impl<D: CallResolver> CallService<D::Target> for Dispatch<D> {
    async fn call(&self, request: CallRequest<D::Target>) -> Result<ToolOutput, ToolError> {
        request.trace.start();
        self.resolver
            .dispatch_resolved(Permit::new(), request.call, request.target)
            .await
    }
}
