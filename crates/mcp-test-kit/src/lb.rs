//! A real round-robin load balancer per test: the pinned nginx peer (`MCP_AGENT_PEER_NGINX`,
//! installed by `cargo xtask peers` from Debian's package) on a free 127.0.0.1 port, in front
//! of the backends it is given, with its own prefix directory, configuration and logs; killed
//! on drop.
//!
//! What it is set up to do, as a fleet's balancer would: round robin over the backends,
//! HTTP/1.1 with kept-alive connections to them, the client's address appended to
//! `X-Forwarded-For`, no buffering either way (event streams pass as they come), a read timeout long enough for any event stream, a failed backend skipped
//! for 10 s after one connection failure. A request that was sent to a backend is never sent
//! to another (nginx does not retry a non-idempotent request such as a `POST`), so a backend
//! dying mid-request fails exactly the requests it held, answered `502`. Its access log
//! records, for each request, the backend(s) tried and the status ([`LoadBalancer::passed`]).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::daemon::{on_a_free_port, until_ready};

/// The variable holding the nginx binary's path.
pub const NGINX: &str = "MCP_AGENT_PEER_NGINX";

/// How long a proxied response may stay silent (an event stream between two events).
const READ_TIMEOUT_S: u32 = 3_600;

/// The most of a log file read back, for failure messages and [`LoadBalancer::passed`].
const LOG_LIMIT: u64 = 64 * 1024 * 1024;

/// nginx in front of `backends`, round robin, on `127.0.0.1:port`. Dropping it kills the
/// process (it runs as one process: `master_process off`, so nothing outlives it) and
/// removes its directory.
///
/// ```no_run
/// # async fn demo(a: std::net::SocketAddr, b: std::net::SocketAddr) {
/// use mcp_test_kit::lb::LoadBalancer;
///
/// // `None` (after a note on stderr) when the peer is not installed and not required.
/// let Some(lb) = LoadBalancer::start(&[a, b]).await else { return };
/// println!("the fleet is at {}", lb.url("/mcp"));
/// for request in lb.passed() {
///     println!("{} by {:?}", request.status, request.backends);
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct LoadBalancer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

/// One request the balancer answered, from its access log.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Passed {
    /// When the answer ended (nginx's clock, millisecond resolution).
    pub ended: SystemTime,
    /// The status sent to the client (`502` when the backend failed mid-request).
    pub status: u16,
    /// The request's method (`POST`, `GET`, `DELETE`).
    pub method: String,
    /// The backends tried, in order (`127.0.0.1:port`); more than one when a connection to
    /// the first failed before the request was sent.
    pub backends: Vec<String>,
    /// How long the request took, as nginx measured it.
    pub took: Duration,
}

impl LoadBalancer {
    /// A balancer over `backends` (at least one). `None` when the peer is missing and not
    /// required (see [`crate::peer::path`]); panics when it cannot be started.
    ///
    /// ```no_run
    /// # async fn demo(backend: std::net::SocketAddr) {
    /// let Some(lb) = mcp_test_kit::lb::LoadBalancer::start(&[backend]).await else { return };
    /// assert!(lb.addr().ip().is_loopback());
    /// # }
    /// ```
    pub async fn start(backends: &[SocketAddr]) -> Option<Self> {
        assert!(!backends.is_empty(), "a load balancer needs a backend");
        let binary = crate::peer::path(NGINX)?;
        let started = on_a_free_port("nginx", |port| {
            let dir = tempfile::Builder::new()
                .prefix("mcp-lb-")
                .tempdir()
                .expect("a directory for nginx");
            let mut lb = Self::spawn(&binary, dir, port, backends);
            async move { lb.ready().await.map(|()| lb) }
        })
        .await;
        Some(started)
    }

    fn spawn(binary: &Path, dir: tempfile::TempDir, port: u16, backends: &[SocketAddr]) -> Self {
        let conf = dir.path().join("nginx.conf");
        std::fs::write(&conf, config(dir.path(), port, backends)).expect("write nginx.conf");
        // Whatever it prints before its own error log is open (a bad flag, a bad file).
        let stderr = std::fs::File::create(dir.path().join("stderr.log")).expect("stderr.log");
        let child = Command::new(binary)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf)
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", binary.display()));
        Self { child, port, dir }
    }

    /// Probes the port until it accepts a connection. `Err` holds nginx's output when it
    /// exited or did not listen in time.
    async fn ready(&mut self) -> Result<(), String> {
        let addr = self.addr();
        until_ready(&mut self.child, || async move {
            tokio::net::TcpStream::connect(addr).await.is_ok()
        })
        .await
        .map_err(|why| why.with_output(&self.log()))
    }

    /// `127.0.0.1:port`.
    ///
    /// ```no_run
    /// # async fn demo(lb: mcp_test_kit::lb::LoadBalancer) {
    /// assert_ne!(lb.addr().port(), 0);
    /// # }
    /// ```
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `http://127.0.0.1:port` followed by `path` (which starts with `/`).
    ///
    /// ```no_run
    /// # async fn demo(lb: mcp_test_kit::lb::LoadBalancer) {
    /// assert_eq!(lb.url("/mcp"), format!("http://{}/mcp", lb.addr()));
    /// # }
    /// ```
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr())
    }

    /// The nginx process id.
    ///
    /// ```no_run
    /// # async fn demo(lb: mcp_test_kit::lb::LoadBalancer) {
    /// assert!(mcp_test_kit::procs::running(lb.pid()));
    /// # }
    /// ```
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What nginx printed and logged as errors so far (bounded), for failure messages: a
    /// backend that refused a connection or closed one mid-request is named here.
    ///
    /// ```no_run
    /// # async fn demo(lb: mcp_test_kit::lb::LoadBalancer) {
    /// let _errors: String = lb.log();
    /// # }
    /// ```
    pub fn log(&self) -> String {
        let read = |name: &str| read_bounded(&self.dir.path().join(name));
        format!("{}{}", read("stderr.log"), read("error.log"))
    }

    /// Every request answered so far, in the order they ended (the access log: nginx writes
    /// each line when the answer has been sent).
    ///
    /// ```no_run
    /// # async fn demo(lb: mcp_test_kit::lb::LoadBalancer) {
    /// let failed = lb.passed().iter().filter(|p| p.status >= 500).count();
    /// println!("{failed} requests failed at a backend");
    /// # }
    /// ```
    pub fn passed(&self) -> Vec<Passed> {
        read_bounded(&self.dir.path().join("access.log"))
            .lines()
            .filter_map(parse_line)
            .collect()
    }
}

impl Drop for LoadBalancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The configuration: one process, everything under `dir`, round robin over `backends`.
fn config(dir: &Path, port: u16, backends: &[SocketAddr]) -> String {
    let dir = dir.display();
    let servers: String = backends
        .iter()
        .map(|b| format!("        server {b} max_fails=1 fail_timeout=10s;\n"))
        .collect();
    format!(
        r#"master_process off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{
    worker_connections 4096;
}}
http {{
    log_format fleet '$msec $status $request_time $request_method "$upstream_addr"';
    access_log {dir}/access.log fleet;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    upstream replicas {{
{servers}        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        client_max_body_size 16m;
        location / {{
            proxy_pass http://replicas;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_connect_timeout 5s;
            proxy_read_timeout {READ_TIMEOUT_S}s;
            proxy_send_timeout {READ_TIMEOUT_S}s;
        }}
    }}
}}
"#
    )
}

/// One access-log line: `msec status request_time method "upstream_addr"`.
fn parse_line(line: &str) -> Option<Passed> {
    let (head, upstream) = line.split_once(" \"")?;
    let mut words = head.split_whitespace();
    let ended = seconds(words.next()?)?;
    let status = words.next()?.parse().ok()?;
    let took = seconds(words.next()?)?;
    let method = words.next()?.to_owned();
    // `a, b` for attempts on several backends, `a : b` across internal redirects, `-` none.
    let backends = upstream
        .trim_end_matches('"')
        .split(", ")
        .flat_map(|attempt| attempt.split(" : "))
        .map(str::trim)
        .filter(|b| !b.is_empty() && *b != "-")
        .map(str::to_owned)
        .collect();
    Some(Passed {
        ended: UNIX_EPOCH + ended,
        status,
        method,
        backends,
        took,
    })
}

/// nginx's `seconds.milliseconds` (`1700000000.123`, `0.004`), exactly.
fn seconds(text: &str) -> Option<Duration> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let millis = format!("{fraction:0<3}");
    if millis.len() != 3 {
        return None;
    }
    Some(Duration::from_secs(whole.parse().ok()?) + Duration::from_millis(millis.parse().ok()?))
}

fn read_bounded(path: &Path) -> String {
    use std::io::Read as _;
    let Ok(file) = std::fs::File::open(path) else {
        return String::new();
    };
    let mut text = String::new();
    let _ = file.take(LOG_LIMIT).read_to_string(&mut text);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_lines_name_status_and_every_backend_tried() {
        let one = parse_line(r#"1700000000.123 200 0.004 POST "127.0.0.1:4001""#).unwrap();
        assert_eq!(one.status, 200);
        assert_eq!(one.method, "POST");
        assert_eq!(one.backends, ["127.0.0.1:4001"]);
        assert_eq!(one.took, Duration::from_millis(4));
        assert_eq!(
            one.ended.duration_since(UNIX_EPOCH).unwrap().as_millis(),
            1_700_000_000_123
        );
        let retried =
            parse_line(r#"1700000000.5 502 1.250 GET "127.0.0.1:4001, 127.0.0.1:4002""#).unwrap();
        assert_eq!(retried.backends, ["127.0.0.1:4001", "127.0.0.1:4002"]);
        let none = parse_line(r#"1700000000.5 400 0.000 DELETE "-""#).unwrap();
        assert!(none.backends.is_empty());
        assert_eq!(parse_line("garbage"), None);
    }

    #[test]
    fn the_configuration_balances_every_backend_without_buffering() {
        let backends = [
            "127.0.0.1:4001".parse().unwrap(),
            "127.0.0.1:4002".parse().unwrap(),
        ];
        let text = config(Path::new("/tmp/x"), 4000, &backends);
        for needed in [
            "server 127.0.0.1:4001 max_fails=1",
            "server 127.0.0.1:4002 max_fails=1",
            "listen 127.0.0.1:4000",
            "proxy_buffering off;",
            "proxy_http_version 1.1;",
            "master_process off;",
            "access_log /tmp/x/access.log fleet;",
            "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
        ] {
            assert!(text.contains(needed), "{needed} not in\n{text}");
        }
    }
}
