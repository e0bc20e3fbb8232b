//! The seam every governance layer shares: a resolved call on its way to the tool
//! ([`CallRequest`]), the service that takes it ([`CallService`]), and the trace through which
//! inner layers tell outer ones what happened ([`CallTrace`]).
//!
//! A layer is a [`tower_layer::Layer`] whose service wraps another `CallService`; the innermost
//! service of a [`Governed`](super::Governed) stack is the only one that can run a resolver's
//! call (it alone holds a [`Permit`](super::Permit)), so a stack of layers over any other
//! service can be built and tested freely without opening an ungoverned path.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use async_trait::async_trait;
use tokio::time::Instant;

use super::ResolvedCall;
use crate::{ApprovalTrigger, Event, EventBus, EventSink, ToolCall, ToolError, ToolOutput};

/// A call resolved to its real tool, as the layers see it.
#[derive(Debug)]
#[non_exhaustive]
pub struct CallRequest<T> {
    /// The call as it was asked (for a generic caller, the generic call), without the
    /// arguments the resolver moved into `resolved`: the innermost service hands them back
    /// with the call when it runs. A layer reads the arguments from `resolved`.
    pub call: ToolCall,
    /// The real tool it runs: what rules, policy, approval and events are about (shared, so
    /// a layer that keeps it past the call clones no arguments).
    pub resolved: Arc<ResolvedCall>,
    /// What the innermost service needs to run exactly the resolved tool.
    pub target: T,
    /// Why approval is needed, when a layer (the policy) already decided it is.
    pub approval: Option<ApprovalTrigger>,
    /// When the call was asked.
    pub began: Instant,
    /// What inner layers report to outer ones.
    pub trace: CallTrace,
}

impl<T> CallRequest<T> {
    /// A request for `resolved` (from `call`), to run as `target`.
    ///
    /// ```
    /// use agent_core::{CallRequest, ResolvedCall, ToolCall};
    ///
    /// let call = ToolCall::new("1", "clock", Default::default());
    /// let request = CallRequest::new(call, ResolvedCall::native("clock", Default::default()), ());
    /// assert!(request.trace.started().is_none());
    /// ```
    pub fn new(call: ToolCall, resolved: ResolvedCall, target: T) -> Self {
        Self {
            call,
            resolved: Arc::new(resolved),
            target,
            approval: None,
            began: Instant::now(),
            trace: CallTrace::default(),
        }
    }
}

/// A service that takes a resolved call: a governance layer's, or the innermost dispatch.
///
/// ```
/// use agent_core::{CallRequest, CallService, ResolvedCall, ToolCall, ToolError, ToolOutput};
/// use async_trait::async_trait;
///
/// /// Answers every call with the tool's name.
/// struct Name;
/// #[async_trait]
/// impl CallService<()> for Name {
///     async fn call(&self, request: CallRequest<()>) -> Result<ToolOutput, ToolError> {
///         request.trace.start();
///         Ok(ToolOutput::text(request.resolved.action_ref.clone()))
///     }
/// }
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let call = ToolCall::new("1", "clock", Default::default());
/// let request = CallRequest::new(call, ResolvedCall::native("clock", Default::default()), ());
/// assert_eq!(Name.call(request).await.unwrap().to_model_text(), "clock");
/// # });
/// ```
#[async_trait]
pub trait CallService<T: Send + 'static>: Send + Sync {
    /// Runs `request` (or refuses it).
    async fn call(&self, request: CallRequest<T>) -> Result<ToolOutput, ToolError>;
}

/// Forwards to the shared service's own future (no second boxed future per hop).
impl<T: Send + 'static, S: CallService<T> + ?Sized> CallService<T> for Arc<S> {
    fn call<'life0, 'async_trait>(
        &'life0 self,
        request: CallRequest<T>,
    ) -> Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        (**self).call(request)
    }
}

/// A stack of layers with its type erased (what [`Governed`](super::Governed) holds).
pub type BoxCallService<T> = Arc<dyn CallService<T>>;

/// What the output limit kept of a call's result: the sizes shown and whole, and the handle of
/// the whole when it was kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shown {
    /// Bytes the caller gets.
    pub shown_bytes: u64,
    /// Bytes of the whole result.
    pub full_bytes: u64,
    /// The handle of the whole, kept for reading back.
    pub handle: Option<String>,
}

impl Shown {
    /// Whether the caller gets less than the whole, or the whole was kept under a handle:
    /// what an end event reports sizes for.
    pub fn differs(&self) -> bool {
        self.handle.is_some() || self.full_bytes > self.shown_bytes
    }
}

/// What inner layers tell outer ones about a call: when it started running, and what the
/// output limit kept. A clone shares the same record.
///
/// The innermost service calls [`start`](Self::start) right before the tool runs; a layer that
/// watches (the events layer) can ask to be told at that moment with
/// [`announce`](Self::announce).
#[derive(Clone, Default)]
pub struct CallTrace {
    inner: Arc<Trace>,
}

#[derive(Default)]
struct Trace {
    started: OnceLock<Instant>,
    announce: Mutex<Option<(Arc<EventBus>, Event)>>,
    shown: Mutex<Option<Shown>>,
}

impl std::fmt::Debug for CallTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallTrace")
            .field("started", &self.started())
            .field("shown", &self.shown())
            .finish()
    }
}

impl CallTrace {
    /// Marks the call as running (once; later calls change nothing) and emits the announced
    /// event, if a layer asked for one.
    pub fn start(&self) {
        let now = Instant::now();
        if self.inner.started.set(now).is_ok()
            && let Some((bus, event)) = self
                .inner
                .announce
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
        {
            bus.emit(event);
        }
    }

    /// When the call started running, if it did.
    pub fn started(&self) -> Option<Instant> {
        self.inner.started.get().copied()
    }

    /// Emits `event` on `bus` when the call starts (the last request before the start wins).
    pub fn announce(&self, bus: Arc<EventBus>, event: Event) {
        *self
            .inner
            .announce
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((bus, event));
    }

    /// Records what the output limit kept.
    pub fn set_shown(&self, shown: Shown) {
        *self
            .inner
            .shown
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(shown);
    }

    /// What the output limit kept, if it ran.
    pub fn shown(&self) -> Option<Shown> {
        self.inner
            .shown
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
