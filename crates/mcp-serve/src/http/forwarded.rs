//! Who a request comes from when a proxy relays it: behind a load balancer every connection
//! is the balancer's, so the per-address limits (the rate limit, the failed-authentication
//! limit) would count every client as one. For a connection from a network the operator trusts
//! ([`HttpOptions::trusted_proxies`](super::HttpOptions::trusted_proxies)), the client is the
//! address its `X-Forwarded-For` names last that is not itself one of those networks' (each
//! trusted proxy appends the address it was reached from; what comes before the first one is
//! whatever the client wrote, so it is never believed). A connection from anywhere else keeps
//! its own address whatever it sends, and so does a header that cannot be read.
//!
//! The connection-level bound (`max_connections_per_address`) is counted before any request is
//! read: it stays per TCP peer.

use std::net::IpAddr;

use http::{HeaderMap, Request};
use ipnet::IpNet;

use super::answer::ClientAddr;

/// The header a proxy appends the address it was reached from to.
const X_FORWARDED_FOR: &str = "x-forwarded-for";

/// At most this many hops of `X-Forwarded-For` are read, from the last: a longer chain of
/// trusted proxies is the header of a client, and its first address is taken.
const MAX_HOPS: usize = 16;

/// Why a network cannot be one of [`HttpOptions::trusted_proxies`](super::HttpOptions::trusted_proxies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UntrustableNetwork {
    /// It holds every address of its family (`0.0.0.0/0`, `::/0`, or `::ffff:0:0/96`, which is
    /// every IPv4 address mapped into IPv6): any client could name itself.
    #[error(
        "trusts every address, so any client could name itself: list the balancers' addresses only"
    )]
    Everyone,
    /// Bits are set past its prefix (`10.0.0.1/8`): a typo for an address or a network.
    #[error("has bits set past its prefix: write the network (`10.0.0.0/8`) or the address alone")]
    HostBits,
}

/// `network` as the gateway compares it with a peer (an IPv4 network mapped into IPv6,
/// `::ffff:10.0.0.0/104`, is the IPv4 network `10.0.0.0/8`), or why it cannot be trusted.
/// [`ToolServer::serve_http`](crate::ToolServer::serve_http) refuses what this refuses.
///
/// Only a network of every address (of its family) is refused: a wide one (`::/1`,
/// `0.0.0.0/1` beside `128.0.0.0/1`) passes, and trusts every host in it as much. List the
/// balancers themselves.
///
/// ```
/// use mcp_serve::{UntrustableNetwork, trusted_proxy};
///
/// assert_eq!(trusted_proxy("10.0.0.0/8".parse().unwrap()), Ok("10.0.0.0/8".parse().unwrap()));
/// assert_eq!(trusted_proxy("::ffff:10.0.0.0/104".parse().unwrap()), Ok("10.0.0.0/8".parse().unwrap()));
/// assert_eq!(trusted_proxy("::ffff:0:0/96".parse().unwrap()), Err(UntrustableNetwork::Everyone));
/// assert_eq!(trusted_proxy("10.0.0.1/8".parse().unwrap()), Err(UntrustableNetwork::HostBits));
/// ```
pub fn trusted_proxy(network: IpNet) -> Result<IpNet, UntrustableNetwork> {
    if network != network.trunc() {
        return Err(UntrustableNetwork::HostBits);
    }
    let network = canonical_net(network);
    if network.prefix_len() == 0 {
        return Err(UntrustableNetwork::Everyone);
    }
    Ok(network)
}

/// The networks whose connections say who their client is.
#[derive(Debug, Clone, Default)]
pub(crate) struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Trusts `networks` (none: every connection is its own client), each as
    /// [`trusted_proxy`] makes it, or fails with the first it refuses.
    pub(crate) fn new(networks: &[IpNet]) -> Result<Self, (IpNet, UntrustableNetwork)> {
        networks
            .iter()
            .map(|&net| trusted_proxy(net).map_err(|why| (net, why)))
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Whether none is trusted.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn trusts(&self, addr: IpAddr) -> bool {
        let addr = addr.to_canonical();
        self.0.iter().any(|net| net.contains(&addr))
    }

    /// The client of a request from `peer` with `headers`: see the module.
    pub(crate) fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let mut client = peer;
        // Several `X-Forwarded-For` fields read as one list, in order.
        let hops = headers
            .get_all(X_FORWARDED_FOR)
            .iter()
            .rev()
            .flat_map(|value| value.as_bytes().rsplit(|b| *b == b','))
            .take(MAX_HOPS);
        for hop in hops {
            let Some(addr) = hop_addr(hop) else {
                // Unreadable: the last address read stands (a trusted proxy's, or the peer).
                return client;
            };
            client = addr;
            if !self.trusts(addr) {
                return addr;
            }
        }
        client
    }

    /// `request`'s [`ClientAddr`] made its client's, as [`client`](Self::client) says.
    pub(crate) fn rewrite<B>(&self, mut request: Request<B>) -> Request<B> {
        if let Some(ClientAddr(peer)) = request.extensions().get::<ClientAddr>().copied() {
            let client = self.client(peer, request.headers());
            if client != peer {
                request.extensions_mut().insert(ClientAddr(client));
            }
        }
        request
    }
}

/// One hop of `X-Forwarded-For`: an IPv4 or IPv6 address, bare or bracketed (a port after
/// either is allowed, as some proxies write one).
fn hop_addr(hop: &[u8]) -> Option<IpAddr> {
    let text = std::str::from_utf8(hop).ok()?.trim();
    let bare = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    if let Ok(addr) = bare.parse::<IpAddr>() {
        return Some(addr.to_canonical());
    }
    text.parse::<std::net::SocketAddr>()
        .ok()
        .map(|socket| socket.ip().to_canonical())
}

/// [`IpAddr::to_canonical`] for a network: an IPv4 network mapped into IPv6 as that IPv4
/// network.
fn canonical_net(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.network().to_ipv4_mapped() {
            Some(v4) => ipnet::Ipv4Net::new(v4, v6.prefix_len() - 96).map_or(net, IpNet::V4),
            None => net,
        },
        _ => net,
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn proxies(networks: &[&str]) -> TrustedProxies {
        let networks: Vec<IpNet> = networks.iter().map(|n| n.parse().unwrap()).collect();
        TrustedProxies::new(&networks).unwrap()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn headers(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(X_FORWARDED_FOR, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[test]
    fn a_trusted_proxy_names_the_client_it_was_reached_from() {
        let trusted = proxies(&["127.0.0.1/32", "10.0.0.0/8"]);
        let balancer = ip("127.0.0.1");
        assert_eq!(
            trusted.client(balancer, &headers(&["203.0.113.7"])),
            ip("203.0.113.7")
        );
        // Two trusted hops, then the client; what the client wrote before is not believed.
        assert_eq!(
            trusted.client(balancer, &headers(&["198.51.100.1, 203.0.113.7, 10.1.2.3"])),
            ip("203.0.113.7")
        );
        // Several fields are one list.
        assert_eq!(
            trusted.client(
                balancer,
                &headers(&["198.51.100.1", "203.0.113.7", "10.1.2.3"])
            ),
            ip("203.0.113.7")
        );
        // IPv6, bracketed with a port or without, and an IPv4 peer seen through a dual-stack
        // socket.
        assert_eq!(
            trusted.client(ip("::ffff:127.0.0.1"), &headers(&["[2001:db8::5]:4711"])),
            ip("2001:db8::5")
        );
        assert_eq!(
            trusted.client(balancer, &headers(&["[2001:db8::6]"])),
            ip("2001:db8::6")
        );
        assert_eq!(
            trusted.client(balancer, &headers(&["::ffff:203.0.113.8"])),
            ip("203.0.113.8")
        );
        // A trusted network written mapped into IPv6 is the IPv4 network.
        let mapped = proxies(&["::ffff:10.0.0.0/104"]);
        assert_eq!(
            mapped.client(ip("10.9.8.7"), &headers(&["203.0.113.9"])),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn a_network_holding_every_address_is_refused_however_it_is_written() {
        for everyone in ["0.0.0.0/0", "::/0", "::ffff:0:0/96"] {
            let net: IpNet = everyone.parse().unwrap();
            assert_eq!(
                TrustedProxies::new(&[net]).unwrap_err(),
                (net, UntrustableNetwork::Everyone),
                "{everyone}"
            );
        }
        let typo: IpNet = "::ffff:10.0.0.1/104".parse().unwrap();
        assert_eq!(
            TrustedProxies::new(&["127.0.0.1/32".parse().unwrap(), typo]).unwrap_err(),
            (typo, UntrustableNetwork::HostBits)
        );
        // Half of IPv4 is a (strange) network, not everyone.
        assert!(trusted_proxy("::ffff:0:0/97".parse().unwrap()).is_ok());
    }

    #[test]
    fn an_untrusted_peer_keeps_its_own_address_whatever_it_sends() {
        let trusted = proxies(&["10.0.0.0/8"]);
        let direct = ip("192.0.2.9");
        assert_eq!(trusted.client(direct, &headers(&["203.0.113.7"])), direct);
        assert_eq!(
            proxies(&[]).client(direct, &headers(&["203.0.113.7"])),
            direct
        );
        assert!(proxies(&[]).is_empty());
    }

    #[test]
    fn an_unreadable_or_missing_header_leaves_the_last_trusted_address() {
        let trusted = proxies(&["10.0.0.0/8"]);
        let balancer = ip("10.0.0.1");
        assert_eq!(trusted.client(balancer, &HeaderMap::new()), balancer);
        assert_eq!(
            trusted.client(balancer, &headers(&["203.0.113.7, not-an-address"])),
            balancer
        );
        assert_eq!(
            trusted.client(balancer, &headers(&["203.0.113.7, unknown, 10.9.9.9"])),
            ip("10.9.9.9")
        );
        // Only trusted hops: the first one read is the client.
        assert_eq!(
            trusted.client(balancer, &headers(&["10.0.0.7, 10.0.0.8"])),
            ip("10.0.0.7")
        );
        // Non-UTF-8 bytes are unreadable, not a panic.
        let mut raw = HeaderMap::new();
        raw.insert(
            X_FORWARDED_FOR,
            HeaderValue::from_bytes(b"203.0.113.7, \xff").unwrap(),
        );
        assert_eq!(trusted.client(balancer, &raw), balancer);
    }

    #[test]
    fn a_long_chain_is_read_only_so_far() {
        let trusted = proxies(&["10.0.0.0/8"]);
        let chain: Vec<String> = (0..10_000)
            .map(|i| format!("10.0.{}.{}", i / 256 % 256, i % 256))
            .collect();
        let forged = format!("203.0.113.7, {}", chain.join(", "));
        let client = trusted.client(ip("10.0.0.1"), &headers(&[forged.as_str()]));
        assert!(
            trusted.trusts(client),
            "{client}: beyond {MAX_HOPS} hops nothing is read"
        );
    }

    #[test]
    fn the_request_carries_its_client_after_the_rewrite() {
        let trusted = proxies(&["127.0.0.0/8"]);
        let mut request = Request::new(());
        request
            .headers_mut()
            .insert(X_FORWARDED_FOR, HeaderValue::from_static("198.51.100.4"));
        request.extensions_mut().insert(ClientAddr(ip("127.0.0.1")));
        let request = trusted.rewrite(request);
        assert_eq!(ClientAddr::of(&request), ip("198.51.100.4"));
    }
}
