//! Serving over streamable HTTP on 127.0.0.1.

use std::net::SocketAddr;
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::ServerHandler;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::{CrashAction, TestServer, TestServerOptions};

/// A streamable HTTP MCP server on an ephemeral port of 127.0.0.1. Dropping it stops it.
#[derive(Debug)]
pub struct HttpServer {
    url: String,
    addr: SocketAddr,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl HttpServer {
    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections, ends every session and waits for the accept loop to end.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Serves a [`TestServer`] with `options` over streamable HTTP, one server per session. The
/// `crash` tool stops the whole HTTP server (like a process that died).
///
/// ```
/// use mcp_test_kit::{TestServerOptions, serve_http};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let server = serve_http(TestServerOptions::default()).await?;
/// assert!(server.url().starts_with("http://127.0.0.1:"));
/// server.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub async fn serve_http(options: TestServerOptions) -> std::io::Result<HttpServer> {
    let stop = CancellationToken::new();
    let options = options.with_crash(CrashAction::Disconnect(stop.clone()));
    serve_handler_http_with(move || TestServer::new(options.clone()), stop).await
}

/// Serves the handlers `factory` makes (one per session) over streamable HTTP.
pub async fn serve_handler_http<S, F>(factory: F) -> std::io::Result<HttpServer>
where
    S: ServerHandler + Send + 'static,
    F: Fn() -> S + Send + Sync + 'static,
{
    serve_handler_http_with(factory, CancellationToken::new()).await
}

/// An HTTP endpoint that answers every request with `status`, the `headers` given and an
/// empty body: a server that refuses everything (say 401 with a `WWW-Authenticate`
/// challenge, or 503).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let locked = mcp_test_kit::serve_status(401, &[("www-authenticate", "Bearer realm=\"x\"")]).await?;
/// assert!(locked.url().ends_with("/mcp"));
/// locked.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub async fn serve_status(status: u16, headers: &[(&str, &str)]) -> std::io::Result<HttpServer> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let headers: Arc<Vec<(String, String)>> = Arc::new(
        headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect(),
    );
    let stop = CancellationToken::new();
    accept_loop(listener, stop, move |stream| {
        let headers = headers.clone();
        let service = hyper::service::service_fn(move |_request| {
            let mut response = hyper::Response::builder().status(status);
            for (name, value) in headers.iter() {
                response = response.header(name.as_str(), value.as_str());
            }
            let response = response
                .body(http_body_util::Empty::<hyper::body::Bytes>::new())
                .map_err(std::io::Error::other);
            std::future::ready(response)
        });
        async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    })
}

async fn serve_handler_http_with<S, F>(
    factory: F,
    stop: CancellationToken,
) -> std::io::Result<HttpServer>
where
    S: ServerHandler + Send + 'static,
    F: Fn() -> S + Send + Sync + 'static,
{
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(stop.child_token())
        .with_sse_keep_alive(None);
    let service = StreamableHttpService::new(
        move || Ok(factory()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    accept_loop(listener, stop, move |stream| {
        // Responses go out in several small writes (headers, SSE events): without
        // TCP_NODELAY, Nagle's algorithm meets the client's delayed ACK and each exchange
        // stalls for ~40 ms, as no production server would.
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(service.clone());
        async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    })
}

/// Accepts connections on `listener` until `stop` is cancelled, each served by the future
/// `serve` makes on its own task. Stopping drops open connections at once, as a dying server
/// would.
pub(crate) fn accept_loop<C, Fut>(
    listener: TcpListener,
    stop: CancellationToken,
    serve: C,
) -> std::io::Result<HttpServer>
where
    C: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let addr = listener.local_addr()?;
    let accept_stop = stop.clone();
    let task = tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                () = accept_stop.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(_) => continue,
                },
            };
            let conn = serve(stream);
            let conn_stop = accept_stop.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = conn => {}
                    () = conn_stop.cancelled() => {}
                }
            });
        }
    });
    Ok(HttpServer {
        url: format!("http://{addr}/mcp"),
        addr,
        stop,
        task: Some(task),
    })
}
