//! Name resolution and the TCP connector under the pools, with the SSRF guard.
//!
//! Every connection of a connector goes through [`TcpConnect`]: hyper-util's TCP connector
//! on a resolver of ours. A connector keeps two pools on it: one open, and one *guarded* for
//! [SSRF-guarded](mcp_config::ServerSpec::ssrf_guarded) specs (caller-supplied ones), whose
//! MCP and OAuth requests may reach only addresses that [`mcp_config::is_internal_ip`]
//! accepts. The guard sits where the address is chosen, so nothing can slip between a check
//! and the connect:
//!
//! - a host name is resolved, and the internal addresses among its answers are dropped; when
//!   none is left the connect fails with [`Blocked`] (naming the host, not the addresses);
//! - an IP literal is refused before any connect when it is internal.
//!
//! The pools are separate, so a connection a guarded request uses was opened under the guard.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_trait::async_trait;
use http::Uri;
use hyper_util::client::legacy::connect::HttpConnector as HyperTcp;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::rt::TokioIo;
use mcp_config::is_internal_ip;
use tokio::net::TcpStream;

use mcp_connector::BoxError;

/// Resolves host names for an [`HttpConnector`](crate::HttpConnector): the system resolver
/// by default, or one of yours ([`HttpOptions::with_resolver`](crate::HttpOptions::with_resolver)),
/// e.g. for service discovery or tests.
///
/// The SSRF guard applies to whatever it answers: for a guarded spec, internal addresses
/// are dropped from the answer.
///
/// ```
/// use std::net::IpAddr;
/// use async_trait::async_trait;
/// use mcp_transport_http::Resolve;
///
/// /// Every name is one address.
/// #[derive(Debug)]
/// struct Fixed(IpAddr);
///
/// #[async_trait]
/// impl Resolve for Fixed {
///     async fn resolve(&self, _host: &str) -> std::io::Result<Vec<IpAddr>> {
///         Ok(vec![self.0])
///     }
/// }
/// ```
#[async_trait]
pub trait Resolve: Send + Sync + fmt::Debug {
    /// The addresses of `host`, a DNS name (never an IP literal), in the order to try them.
    async fn resolve(&self, host: &str) -> io::Result<Vec<IpAddr>>;
}

/// The operating system's resolver (`getaddrinfo` on a blocking thread).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SystemResolver;

#[async_trait]
impl Resolve for SystemResolver {
    async fn resolve(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        Ok(tokio::net::lookup_host((host, 0))
            .await?
            .map(|addr| addr.ip())
            .collect())
    }
}

/// A connection refused by the SSRF guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Blocked {
    /// The host of the URL.
    pub(crate) host: String,
    /// The host is an IP literal (rather than a name that resolved to internal addresses).
    pub(crate) literal: bool,
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = &self.host;
        if self.literal {
            write!(f, "`{host}` is an internal address")?;
        } else {
            write!(f, "`{host}` resolves only to internal addresses")?;
        }
        f.write_str(" (loopback, private, link-local…), which a caller-supplied server may not reach (SSRF guard)")
    }
}

impl StdError for Blocked {}

/// A host name that did not resolve: the resolver failed, or answered no address.
#[derive(Debug)]
pub(crate) struct DnsFailure {
    /// The host name.
    pub(crate) host: String,
    /// The resolver's error; `None` when it answered no address.
    pub(crate) error: Option<io::Error>,
}

impl DnsFailure {
    /// Why, in words.
    pub(crate) fn reason(&self) -> String {
        match &self.error {
            Some(error) => error.to_string(),
            None => "no address found".to_owned(),
        }
    }
}

impl fmt::Display for DnsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` could not be resolved: {}",
            self.host,
            self.reason()
        )
    }
}

impl StdError for DnsFailure {}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// hyper-util's resolver seam over a [`Resolve`], dropping internal addresses when guarded.
#[derive(Clone)]
pub(crate) struct GuardedResolver {
    resolver: Arc<dyn Resolve>,
    guard: bool,
}

impl tower_service::Service<Name> for GuardedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = BoxError;
    type Future = BoxFuture<Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let (resolver, guard) = (self.resolver.clone(), self.guard);
        Box::pin(async move {
            let host = name.as_str();
            let found = resolver.resolve(host).await.map_err(|error| DnsFailure {
                host: host.to_owned(),
                error: Some(error),
            })?;
            if found.is_empty() {
                return Err(DnsFailure {
                    host: host.to_owned(),
                    error: None,
                }
                .into());
            }
            let kept = filter(found, guard).map_err(|()| Blocked {
                host: host.to_owned(),
                literal: false,
            })?;
            // hyper-util sets the port of the URL.
            let addrs: Vec<SocketAddr> = kept.into_iter().map(|ip| (ip, 0).into()).collect();
            Ok(addrs.into_iter())
        })
    }
}

/// The addresses a connection may use: all of them, or when `guard` is on the non-internal
/// ones; `Err` when the guard left none of a non-empty answer.
fn filter(found: Vec<IpAddr>, guard: bool) -> Result<Vec<IpAddr>, ()> {
    if !guard || found.is_empty() {
        return Ok(found);
    }
    let kept: Vec<IpAddr> = found
        .into_iter()
        .filter(|ip| !is_internal_ip(*ip))
        .collect();
    if kept.is_empty() { Err(()) } else { Ok(kept) }
}

/// The TCP connector of one pool: hyper-util's, on a [`GuardedResolver`], refusing internal
/// IP literals when guarded (hyper-util connects to a literal without asking the resolver).
#[derive(Clone)]
pub(crate) struct TcpConnect {
    tcp: HyperTcp<GuardedResolver>,
    guard: bool,
}

impl TcpConnect {
    /// A connector resolving with `resolver`, guarded or not.
    pub(crate) fn new(
        resolver: Arc<dyn Resolve>,
        guard: bool,
        configure: impl FnOnce(&mut HyperTcp<GuardedResolver>),
    ) -> Self {
        let mut tcp = HyperTcp::new_with_resolver(GuardedResolver { resolver, guard });
        configure(&mut tcp);
        Self { tcp, guard }
    }
}

impl tower_service::Service<Uri> for TcpConnect {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future = BoxFuture<Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        if self.guard
            && let Some(blocked) = blocked_literal(&uri)
        {
            return Box::pin(std::future::ready(Err(blocked.into())));
        }
        let connecting = self.tcp.call(uri);
        Box::pin(async move { connecting.await.map_err(Into::into) })
    }
}

/// The URI's host when it is an internal IP literal.
fn blocked_literal(uri: &Uri) -> Option<Blocked> {
    let host = uri.host()?;
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let ip: IpAddr = bare.parse().ok()?;
    is_internal_ip(ip).then(|| Blocked {
        host: host.to_owned(),
        literal: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|ip| ip.parse().unwrap()).collect()
    }

    #[test]
    fn the_guard_drops_internal_answers() {
        let mixed = ips(&["10.0.0.7", "93.184.216.34", "::1", "2606:4700::1111"]);
        assert_eq!(filter(mixed.clone(), false), Ok(mixed.clone()));
        assert_eq!(
            filter(mixed, true),
            Ok(ips(&["93.184.216.34", "2606:4700::1111"]))
        );
        assert_eq!(
            filter(ips(&["127.0.0.1", "::ffff:169.254.169.254"]), true),
            Err(())
        );
        // No answer at all is the resolver's error to report, not the guard's.
        assert_eq!(filter(Vec::new(), true), Ok(Vec::new()));
    }

    #[test]
    fn internal_literals_are_refused() {
        for (uri, blocked) in [
            ("http://127.0.0.1:8080/mcp", Some("127.0.0.1")),
            ("http://[::1]:9/mcp", Some("[::1]")),
            ("https://[::ffff:a9fe:a9fe]/", Some("[::ffff:a9fe:a9fe]")),
            ("http://10.1.2.3/", Some("10.1.2.3")),
            ("https://93.184.216.34/", None),
            ("https://mcp.example.com/", None),
        ] {
            let uri: Uri = uri.parse().unwrap();
            let found = blocked_literal(&uri);
            assert_eq!(found.as_ref().map(|b| b.host.as_str()), blocked, "{uri}");
            assert!(found.is_none_or(|b| b.literal));
        }
    }

    #[test]
    fn blocked_names_the_host_not_the_addresses() {
        let blocked = Blocked {
            host: "internal.example".into(),
            literal: false,
        };
        assert_eq!(
            blocked.to_string(),
            "`internal.example` resolves only to internal addresses (loopback, private, link-local…), \
             which a caller-supplied server may not reach (SSRF guard)"
        );
    }
}
