//! Streamable HTTP transport for MCP sessions, on hyper + hyper-util with rustls.
//!
//! [`HttpConnector`] implements the client's [`Connector`](mcp_connector::Connector) trait:
//! for each streamable HTTP [`ServerSpec`](mcp_config::ServerSpec) it builds an
//! [`HttpClient`] — rmcp's `StreamableHttpClient` trait implemented on a pooled hyper-util
//! client — and wraps it in rmcp's `StreamableHttpClientTransport`.
//!
//! # What happens where
//!
//! - **This crate** sends the requests: connection pooling (HTTP/1.1 keep-alive, HTTP/2 via
//!   ALPN over TLS), `http` and `https` (rustls with the ring provider, Mozilla roots plus
//!   [`HttpOptions::extra_root_certificates`]), per-request credentials from the
//!   [`mcp_auth::AuthProvider`] hook with one retry after `401` when the hook asks for it,
//!   JSON and SSE response bodies bounded by [`HttpOptions::max_response_bytes`] and
//!   [`HttpOptions::max_sse_event_bytes`] and nesting by [`MAX_JSON_DEPTH`] (the pending
//!   request fails at once with an error naming the size or depth and the limit, never an
//!   unbounded buffer or a silent drop), and the mapping of statuses onto rmcp's errors (404
//!   on a session → `SessionExpired`).
//! - **Hostile answers**: every credential value a session sent (the spec's secrets, each
//!   header the auth hook gave, OAuth access tokens included; whole and without its
//!   `Bearer ` scheme, raw and JSON-escaped) is replaced by `[REDACTED]` in everything the
//!   server sends — messages, events, error bodies, challenges — before rmcp or an error
//!   sees it. A failed connection is a typed [`HttpError`] naming the server, the host and
//!   the cause in words: refused, DNS, TLS (why), TCP connect timeout, or otherwise.
//! - **The SSRF guard**: sessions of caller-supplied specs
//!   ([`ServerSpec::ssrf_guarded`](mcp_config::ServerSpec::ssrf_guarded)) and their OAuth
//!   requests use a pool that resolves host names itself ([`Resolve`], the system resolver by
//!   default) and connects only to addresses [`mcp_config::is_internal_ip`] accepts; a host
//!   that is, or resolves only to, internal addresses fails with
//!   [`HttpError::BlockedAddress`]. The operator's specs use an unrestricted pool.
//! - **The standalone GET stream first**: rmcp opens it after the handshake in a task of its
//!   own, alongside the session's next requests. A server may send what it has for a request
//!   (an elicitation for a running call) on that stream alone and lose it when the stream is
//!   not open yet, so after a handshake with a session every request waits until the server
//!   has answered the GET (a stream, 405 or an error), at most
//!   [`HttpOptions::event_stream_wait`] (docs/upstream.md#rmcp-get-stream-order).
//! - **rmcp's worker** runs the protocol over it: `Mcp-Session-Id` and `MCP-Protocol-Version`
//!   headers, the standalone GET stream, SSE resumption with `Last-Event-ID` honouring the
//!   server's `retry` field, `DELETE` of the session when the transport closes (or is dropped),
//!   and the **re-initialisation after HTTP 404**: it waits for the session's other requests,
//!   replays the original `initialize` request and `notifications/initialized` without a
//!   session id, adopts the new session id and protocol version, and resends every request
//!   that failed with 404, once.
//!
//! # Limits of the 404 recovery
//!
//! - Each failed request is retried once; a 404 on the retry is returned as an error.
//! - Control messages (cancellations, replies to server requests) are not retried.
//! - A request of the old session still running when the recovery starts gets up to
//!   [`HttpOptions::session_recovery_timeout`] to finish; if it does not, it fails (the server
//!   may have processed it) rather than being sent twice.
//! - Server-side state of the old session (subscriptions, pending server requests, events not
//!   yet delivered on the GET stream) is lost; the new `initialize` result is not shown to the
//!   client handler, so capability changes of the server go unnoticed until the next
//!   `tools/list`. [`HttpClient::initializations`] counts the handshakes, and
//!   [`HttpClient::renewals`] (the connection handle's `renewals()`) changes after each
//!   completed re-initialisation, so the client can re-list what it caches.
//!
//! # Errors
//!
//! [`HttpError`] is the crate's one error. Most of them reach the caller inside rmcp's
//! `StreamableHttpError::Client`, which shows only their message and drops their `source()`,
//! so those messages are whole: they name the server once, where it applies the host, and
//! the cause in words (refused, DNS, the TLS reason, the OS's or HTTP library's words for the
//! rest), and carry no source. [`HttpError::Auth`] shows the auth error's
//! [`reason`](mcp_auth::AuthError::reason) and keeps the typed [`mcp_auth::AuthError`]
//! ([`HttpError::auth_error`]). Errors whose cause is a typed value of its own
//! ([`HttpError::BuildRequest`], [`HttpError::Encode`], [`HttpError::Tls`]) keep it as their
//! `source()` and do not repeat it. Text the server chose is scrubbed of the session's
//! credentials and bounded before it is kept. No message holds a Rust type path. The OAuth
//! requests sent for `mcp-auth` fail with its `FetchError`, whose boxed cause is this
//! crate's classification of the failure in the same words, without the server (one token
//! request may serve several). The boxed error type is `mcp_connector::BoxError`.
//!
//! # Example
//!
//! ```no_run
//! use mcp_config::{HttpSpec, ServerSpec, TransportSpec};
//! use mcp_connector::Connector;
//! use mcp_transport_http::{HttpConnector, HttpOptions};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let connector = HttpConnector::new(HttpOptions::default().with_max_response_bytes(1 << 20))?;
//! let mut spec = ServerSpec::new(
//!     "search",
//!     TransportSpec::StreamableHttp(HttpSpec::new("http://127.0.0.1:8080/mcp".parse()?)),
//! );
//! spec.auth.bearer = Some(mcp_config::SecretSource::Env("SEARCH_TOKEN".into()));
//! let connection = connector.connect(&spec).await?; // reads SEARCH_TOKEN now
//! # drop(connection);
//! # Ok(())
//! # }
//! ```
//!
//! # Architecture invariant
//!
//! Knows server specs, the auth hook and the connector seam; never the catalog or the
//! orchestration. No reqwest anywhere in the dependency tree.

mod body;
mod cause;
mod client;
mod connector;
mod drain;
mod error;
#[cfg(feature = "oauth")]
mod fetch;
mod inbound;
mod options;
mod param_headers;
mod resolve;
mod sse;
mod trace_headers;

pub use client::HttpClient;
pub use connector::{AuthFactory, HttpConnector, HttpHandle};
pub use error::HttpError;
pub use inbound::MAX_JSON_DEPTH;
pub use options::{DEFAULT_MAX_RESPONSE_BYTES, HttpOptions};
pub use resolve::Resolve;
