//! Safe defaults for caller-supplied (inline) specs and the SSRF address check.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;
use url::{Host, Url};

use crate::path::{JsonPath, Problems};
use crate::{ProblemKind, SecretSource, ServerSpec, TokenSource, TransportSpec};

/// What caller-supplied (inline) specs may do. Operator-configured specs are never restricted.
///
/// The defaults are the safe ones: no stdio, no environment secrets, SSRF guard on. In config
/// files and the environment the fields are the top-level keys `allow_inline_stdio`,
/// `allow_inline_env_secrets` and `ssrf_guard` (`MCP_AGENT__ALLOW_INLINE_STDIO`, …).
///
/// ```
/// use mcp_config::InlinePolicy;
///
/// let policy = InlinePolicy::default();
/// assert!(!policy.allow_stdio && !policy.allow_env_secrets && policy.ssrf_guard);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct InlinePolicy {
    /// Let a run's inline spec use the stdio transport. Off by default: it runs a
    /// caller-chosen command on this host (remote code execution).
    #[serde(rename = "allow_inline_stdio")]
    pub allow_stdio: bool,
    /// Let a run's inline spec name environment variables for its secrets
    /// (`bearer_token_env`, `client_secret_env`). Off by default: the environment belongs to
    /// the operator, and a caller could send any of its secrets to a URL of its choice.
    #[serde(rename = "allow_inline_env_secrets")]
    pub allow_env_secrets: bool,
    /// Refuse inline URLs (server, token endpoint, allowed issuers) whose host is `localhost`
    /// or an IP literal in a loopback, private, link-local, unspecified or otherwise internal
    /// range (see [`is_internal_host`]). On by default. Host names are not resolved here: the
    /// selection marks each inline spec (see [`ServerSpec::ssrf_guarded`]) and the HTTP
    /// transport checks the *resolved* addresses of guarded specs, for MCP and OAuth requests
    /// alike.
    pub ssrf_guard: bool,
}

impl Default for InlinePolicy {
    fn default() -> Self {
        Self {
            allow_stdio: false,
            allow_env_secrets: false,
            ssrf_guard: true,
        }
    }
}

impl InlinePolicy {
    /// Allows inline stdio specs.
    #[must_use]
    pub fn with_allow_stdio(mut self, allow: bool) -> Self {
        self.allow_stdio = allow;
        self
    }

    /// Allows `*_env` secret references in inline specs.
    #[must_use]
    pub fn with_allow_env_secrets(mut self, allow: bool) -> Self {
        self.allow_env_secrets = allow;
        self
    }

    /// Turns the SSRF guard on or off.
    #[must_use]
    pub fn with_ssrf_guard(mut self, on: bool) -> Self {
        self.ssrf_guard = on;
        self
    }
}

/// Checks an inline spec against `policy`; problems name the server and sit at the field.
pub(crate) fn check_inline(
    spec: &ServerSpec,
    policy: &InlinePolicy,
    path: &JsonPath,
    p: &mut Problems,
) {
    let name = &spec.name;
    match &spec.transport {
        TransportSpec::Stdio(_) if !policy.allow_stdio => p.push(
            &path.key("transport"),
            ProblemKind::InlineStdio,
            format!(
                "server `{name}`: a run may not start a stdio server (it would run a command on this host); \
                 the operator can allow it with `allow_inline_stdio`"
            ),
        ),
        // The whole parent environment holds the operator's secrets: a caller may have it
        // only where the operator allows environment secrets for callers too.
        TransportSpec::Stdio(stdio) if stdio.inherit_env && !policy.allow_env_secrets => {
            env_secret(name, "inherit_env", &path.key("inherit_env"), p);
        }
        TransportSpec::StreamableHttp(http) if policy.ssrf_guard => {
            check_url(name, &http.url, &path.key("url"), p);
        }
        TransportSpec::Custom(custom) => p.push(
            &path.key("transport"),
            ProblemKind::InlineTransport,
            format!(
                "server `{name}`: a run may not use the `{}` transport; caller-supplied servers use streamable_http",
                custom.kind
            ),
        ),
        _ => {}
    }
    let auth = path.key("auth");
    if let Some(SecretSource::Env(_)) = &spec.auth.bearer
        && !policy.allow_env_secrets
    {
        env_secret(name, "bearer_token_env", &auth.key("bearer_token_env"), p);
    }
    if let Some(oauth) = &spec.auth.oauth_client_credentials {
        let at = auth.key("oauth_client_credentials");
        if matches!(oauth.client_secret, SecretSource::Env(_)) && !policy.allow_env_secrets {
            env_secret(name, "client_secret_env", &at.key("client_secret_env"), p);
        }
        if policy.ssrf_guard {
            if let Some(url) = &oauth.token_url {
                check_url(name, url, &at.key("token_url"), p);
            }
            for (i, url) in oauth.allowed_issuers.iter().enumerate() {
                check_url(name, url, &at.key("allowed_issuers").index(i), p);
            }
        }
    }
    check_federated(spec, &auth, policy, p);
    if let Some(login) = &spec.auth.oauth {
        let at = auth.key("oauth");
        if matches!(login.client_secret, Some(SecretSource::Env(_))) && !policy.allow_env_secrets {
            env_secret(name, "client_secret_env", &at.key("client_secret_env"), p);
        }
        if policy.ssrf_guard {
            for (i, url) in login.allowed_issuers.iter().enumerate() {
                check_url(name, url, &at.key("allowed_issuers").index(i), p);
            }
        }
    }
}

/// The `enterprise` and `workload_identity` tables of a caller-supplied spec: a variable only
/// where the operator allows environment secrets, a file never (it would read this host's
/// files), the identity provider under the SSRF guard.
fn check_federated(spec: &ServerSpec, auth: &JsonPath, policy: &InlinePolicy, p: &mut Problems) {
    let name = spec.name.as_str();
    let mut sources = Vec::new();
    if let Some(enterprise) = &spec.auth.enterprise {
        let at = auth.key("enterprise");
        let (env, file) = ("subject_token_env", "subject_token_file");
        sources.push((&enterprise.subject_token, at.clone(), env, file));
        for (secret, key) in [
            (&enterprise.client_secret, "client_secret_env"),
            (&enterprise.idp_client_secret, "idp_client_secret_env"),
        ] {
            if secret.is_some() && !policy.allow_env_secrets {
                env_secret(name, key, &at.key(key), p);
            }
        }
        if policy.ssrf_guard {
            check_url(name, &enterprise.idp_token_url, &at.key("idp_token_url"), p);
            for (i, url) in enterprise.allowed_issuers.iter().enumerate() {
                check_url(name, url, &at.key("allowed_issuers").index(i), p);
            }
        }
    }
    if let Some(workload) = &spec.auth.workload_identity {
        let at = auth.key("workload_identity");
        if policy.ssrf_guard {
            for (i, url) in workload.allowed_issuers.iter().enumerate() {
                check_url(name, url, &at.key("allowed_issuers").index(i), p);
            }
        }
        sources.push((&workload.token, at, "token_env", "token_file"));
    }
    for (source, at, env, file) in sources {
        match source {
            TokenSource::Env(_) if !policy.allow_env_secrets => {
                env_secret(name, env, &at.key(env), p);
            }
            TokenSource::File(_) => p.push(
                &at.key(file),
                ProblemKind::InlineEnvSecret,
                format!(
                    "server `{name}`: a run may not read a token from a file on this host (`{file}`); send the server with a token it may use"
                ),
            ),
            _ => {}
        }
    }
}

fn env_secret(server: &str, field: &str, path: &JsonPath, p: &mut Problems) {
    p.push(
        path,
        ProblemKind::InlineEnvSecret,
        format!(
            "server `{server}`: a run may not read secrets from the operator's environment (`{field}`); \
             send the secret itself, or the operator can allow it with `allow_inline_env_secrets`"
        ),
    );
}

fn check_url(server: &str, url: &Url, path: &JsonPath, p: &mut Problems) {
    if let Some(why) = internal_host(url) {
        p.push(
            path,
            ProblemKind::BlockedAddress,
            format!(
                "server `{server}`: the URL targets {why}, which a run may not reach (SSRF guard); \
                 the operator can turn the guard off with `ssrf_guard = false`"
            ),
        );
    }
}

/// Why `url`'s host is internal, if it is.
fn internal_host(url: &Url) -> Option<&'static str> {
    let host = url.host()?;
    if !is_internal_host(&host) {
        return None;
    }
    Some(match host {
        Host::Domain(_) => "`localhost`",
        Host::Ipv4(_) | Host::Ipv6(_) => "an internal IP address",
    })
}

/// True for a `localhost` name (`localhost`, `*.localhost`, with or without the final dot, in
/// any case: RFC 6761 reserves them for loopback).
fn is_localhost_name(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

/// True when a URL host is internal without resolving it: a `localhost` name, or an IP
/// literal that [`is_internal_ip`] refuses. Other names are not resolved (this crate does no
/// I/O): the HTTP transport checks what they resolve to.
///
/// ```
/// use mcp_config::is_internal_host;
/// use url::Url;
///
/// let host = |u: &str| Url::parse(u).unwrap().host().unwrap().to_owned();
/// assert!(is_internal_host(&host("http://LOCALHOST./mcp")));
/// assert!(is_internal_host(&host("http://[::ffff:169.254.169.254]/")));
/// assert!(!is_internal_host(&host("https://mcp.example.com/")));
/// ```
pub fn is_internal_host<S: AsRef<str>>(host: &Host<S>) -> bool {
    match host {
        Host::Domain(name) => is_localhost_name(name.as_ref()),
        Host::Ipv4(ip) => is_internal_ip(IpAddr::V4(*ip)),
        Host::Ipv6(ip) => is_internal_ip(IpAddr::V6(*ip)),
    }
}

/// True when a URL host is this machine without resolving it: a `localhost` name or a
/// loopback IP literal (`127.0.0.0/8`, `::1`, and IPv4-mapped loopback). Plain `http` to such
/// a host never crosses a network.
///
/// ```
/// use mcp_config::is_loopback_host;
/// use url::Url;
///
/// let host = |u: &str| Url::parse(u).unwrap().host().unwrap().to_owned();
/// assert!(is_loopback_host(&host("http://127.0.0.1:8080/mcp")));
/// assert!(is_loopback_host(&host("http://localhost:3000/")));
/// assert!(!is_loopback_host(&host("http://10.0.0.5/")));
/// ```
pub fn is_loopback_host<S: AsRef<str>>(host: &Host<S>) -> bool {
    match host {
        Host::Domain(name) => is_localhost_name(name.as_ref()),
        Host::Ipv4(ip) => ip.is_loopback(),
        Host::Ipv6(ip) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// True for addresses a caller-chosen URL must not reach: loopback, private (RFC 1918, IPv6
/// unique local `fc00::/7`), link-local (`169.254.0.0/16`, where cloud metadata services
/// live, and `fe80::/10`), unspecified, shared (CGNAT), benchmarking, multicast, broadcast and
/// reserved ranges; IPv4-mapped, IPv4-compatible, NAT64 and 6to4 IPv6 addresses are judged by
/// the IPv4 address they carry.
///
/// ```
/// use mcp_config::is_internal_ip;
///
/// for internal in ["127.0.0.1", "10.0.0.5", "169.254.169.254", "::1", "fe80::1", "fd00::1", "::ffff:10.1.2.3"] {
///     assert!(is_internal_ip(internal.parse().unwrap()), "{internal}");
/// }
/// for public in ["93.184.216.34", "2606:4700::1111"] {
///     assert!(!is_internal_ip(public.parse().unwrap()), "{public}");
/// }
/// ```
pub fn is_internal_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_internal_v4(v4),
        IpAddr::V6(v6) => is_internal_v6(v6),
    }
}

fn is_internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240 // reserved
}

fn is_internal_v6(ip: Ipv6Addr) -> bool {
    let seg = ip.segments();
    if let Some(v4) = embedded_v4(ip) {
        return is_internal_v4(v4);
    }
    ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (seg[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (seg[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (seg[0] & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated)
}

/// The IPv4 address an IPv6 address carries: mapped `::ffff:a.b.c.d`, compatible
/// `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, 6to4 `2002:aabb:ccdd::`.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let seg = ip.segments();
    let low = |hi: u16, lo: u16| {
        Ipv4Addr::new(
            (hi >> 8) as u8,
            (hi & 0xff) as u8,
            (lo >> 8) as u8,
            (lo & 0xff) as u8,
        )
    };
    if seg[..5] == [0; 5] && seg[5] == 0xffff {
        return Some(low(seg[6], seg[7]));
    }
    if seg[..6] == [0; 6] && !(seg[6] == 0 && seg[7] <= 1) {
        return Some(low(seg[6], seg[7]));
    }
    if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(low(seg[6], seg[7]));
    }
    if seg[0] == 0x2002 {
        return Some(low(seg[1], seg[2]));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses() {
        for ip in [
            "127.0.0.1",
            "127.9.9.9",
            "10.0.0.5",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "255.255.255.255",
            "224.0.0.1",
            "::",
            "::1",
            "fe80::1",
            "fc00::1",
            "fdff:ffff::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a00:5",
            "2002:a00:5::1",
            "ff02::1",
        ] {
            assert!(
                is_internal_ip(ip.parse().unwrap()),
                "{ip} should be internal"
            );
        }
        for ip in [
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2001:4860:4860::8888",
            "::ffff:8.8.8.8",
            "2002:808:808::1",
        ] {
            assert!(
                !is_internal_ip(ip.parse().unwrap()),
                "{ip} should be public"
            );
        }
    }

    #[test]
    fn internal_hosts_in_urls() {
        for url in [
            "http://localhost:8080/mcp",
            "http://LOCALHOST./mcp",
            "http://api.localhost/mcp",
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://[::1]:9000/",
            "http://[::ffff:7f00:1]/",
            "http://[fe80::1%25eth0]/",
        ] {
            let parsed = Url::parse(url);
            // A zone id is not valid in a URL; url refuses it, which is as good as refusing.
            if let Ok(parsed) = parsed {
                assert!(internal_host(&parsed).is_some(), "{url}");
            }
        }
        for url in ["https://mcp.example.com/", "https://localhost.example.com/"] {
            assert!(internal_host(&Url::parse(url).unwrap()).is_none(), "{url}");
        }
    }
}
