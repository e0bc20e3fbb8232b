//! Serving one accepted connection: HTTP/1 or HTTP/2, the request head read within its
//! timeout, the connection closed once idle, and ended by a shutdown.

use std::net::IpAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::answer::ClientAddr;
use super::front::Front;
use crate::drain::{InFlight, InFlightGuard, Lifecycle};

/// How long one connection may take over each step.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    /// A request head, from when the connection waits for one (on a kept-alive HTTP/1
    /// connection that wait is its idle time too).
    pub(crate) header: Duration,
    /// No request in progress (HTTP/2, and a connection that has not said which protocol it
    /// speaks): closed after this.
    pub(crate) idle: Duration,
}

/// What ends a connection besides its client.
pub(crate) struct Stops {
    pub(crate) lifecycle: Lifecycle,
    pub(crate) hard_stop: CancellationToken,
}

/// A response body that counts its exchange as a request in progress on its connection
/// until it is sent or dropped.
struct Active<B> {
    inner: B,
    _guard: InFlightGuard,
}

impl<B: Body + Unpin> Body for Active<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Serves `stream` from `peer` until the client leaves, the connection is idle for
/// `timeouts.idle`, a shutdown ends it gracefully, or a hard stop drops it.
pub(crate) async fn serve(
    stream: TcpStream,
    peer: IpAddr,
    front: Front,
    timeouts: Timeouts,
    stops: Stops,
) {
    let activity = InFlight::default();
    let requests = activity.clone();
    let service = service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
        let front = front.clone();
        let guard = requests.enter();
        request.extensions_mut().insert(ClientAddr(peer));
        async move {
            let response = front.oneshot(request).await?;
            Ok::<_, std::convert::Infallible>(response.map(|inner| Active {
                inner,
                _guard: guard,
            }))
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.header);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    // How long a connection told to close may still take: a drain waits for its exchanges
    // (bounded by the server's own hard stop); an idle one has none, so a short bound.
    let grace = tokio::select! {
        _ = connection.as_mut() => return,
        () = stops.lifecycle.leaving() => None,
        () = activity.quiet_for(timeouts.idle) => Some(timeouts.header.min(timeouts.idle)),
        () = stops.hard_stop.cancelled() => return,
    };
    connection.as_mut().graceful_shutdown();
    let bound = async {
        match grace {
            Some(grace) => tokio::time::sleep(grace).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = connection.as_mut() => {}
        () = bound => {}
        () = stops.hard_stop.cancelled() => {}
    }
}
