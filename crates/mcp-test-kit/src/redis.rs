//! A real Redis server per test: the pinned `redis-server` peer (`MCP_AGENT_PEER_REDIS`,
//! installed by `cargo xtask peers`) on a free 127.0.0.1 port, with no persistence, ready
//! when it answers with its own process id, killed on drop. With TLS, the Redis built with it
//! (`MCP_AGENT_PEER_REDIS_TLS`), speaking TLS only, with a certificate of a [`TestCa`] of its
//! own.

use crate::daemon::{NotReady, START, on_a_free_port, until_ready};
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::tls::TestCa;

/// The variable holding the `redis-server` binary's path.
pub const REDIS: &str = "MCP_AGENT_PEER_REDIS";

/// The variable holding the path of a `redis-server` built with TLS (Debian's, unpacked with
/// its libraries by `cargo xtask peers`).
pub const REDIS_TLS: &str = "MCP_AGENT_PEER_REDIS_TLS";

/// The most of the server's output kept for failure messages.
const LOG_LIMIT: usize = 64 * 1024;

/// A `redis-server` child on `127.0.0.1:port` (`--save "" --appendonly no`, so nothing is
/// written to disk), optionally with `--requirepass`. Dropping it kills the process and reaps
/// it.
///
/// ```no_run
/// # async fn demo() {
/// use mcp_test_kit::redis::RedisServer;
///
/// // `None` (after a note on stderr) when the peer is not installed and not required.
/// let Some(server) = RedisServer::start().await else { return };
/// assert!(server.url().starts_with("redis://127.0.0.1:"));
/// drop(server); // the process is gone
/// # }
/// ```
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
    password: Option<String>,
    tls: Option<Arc<TestCa>>,
    log: Arc<Mutex<String>>,
    drains: Vec<std::thread::JoinHandle<()>>,
}

impl RedisServer {
    /// A server without a password. `None` when the peer is missing and not required (see
    /// [`crate::peer::path`]); panics when it cannot be started.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let Some(server) = mcp_test_kit::redis::RedisServer::start().await else { return };
    /// println!("redis at {}", server.addr());
    /// # }
    /// ```
    pub async fn start() -> Option<Self> {
        Self::launch(None, None).await
    }

    /// A server that requires `password` (`--requirepass`); use URL-safe characters, since
    /// [`url`](Self::url) embeds it as is.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// use mcp_test_kit::redis::RedisServer;
    ///
    /// let Some(server) = RedisServer::start_with_password("s3cret").await else { return };
    /// assert_eq!(server.password(), Some("s3cret"));
    /// assert!(server.url().contains(":s3cret@127.0.0.1:"));
    /// # }
    /// ```
    pub async fn start_with_password(password: &str) -> Option<Self> {
        Self::launch(Some(password.to_owned()), None).await
    }

    /// A server that speaks TLS only (no plain port), with a server certificate for
    /// `127.0.0.1` issued by a [`TestCa`] of its own ([`ca_file`](Self::ca_file)), optionally
    /// requiring `password`; [`url`](Self::url) is `rediss://`. It is the TLS-built peer
    /// ([`REDIS_TLS`]): `None` when that is missing and not required.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// use mcp_test_kit::redis::RedisServer;
    ///
    /// let Some(server) = RedisServer::start_tls(Some("s3cret")).await else { return };
    /// assert!(server.url().starts_with("rediss://:s3cret@127.0.0.1:"));
    /// assert!(server.ca_file().unwrap().exists());
    /// # }
    /// ```
    pub async fn start_tls(password: Option<&str>) -> Option<Self> {
        Self::launch(password.map(str::to_owned), Some(Arc::new(TestCa::new()))).await
    }

    async fn launch(password: Option<String>, tls: Option<Arc<TestCa>>) -> Option<Self> {
        let binary = crate::peer::path(if tls.is_some() { REDIS_TLS } else { REDIS })?;
        let started = on_a_free_port("redis-server", |port| {
            let mut server = Self::spawn(&binary, port, password.clone(), tls.clone());
            async move { server.ready().await.map(|()| server) }
        })
        .await;
        Some(started)
    }

    fn spawn(binary: &Path, port: u16, password: Option<String>, tls: Option<Arc<TestCa>>) -> Self {
        let mut cmd = Command::new(binary);
        cmd.args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            // Where a stray dump would go; with the two settings above none is written.
            .arg("--dir")
            .arg(std::env::temp_dir())
            .args(["--loglevel", "warning"]);
        match &tls {
            None => {
                cmd.arg("--port").arg(port.to_string());
            }
            Some(ca) => {
                // TLS only: no plain port; clients are not asked for certificates.
                cmd.args(["--port", "0", "--tls-port"])
                    .arg(port.to_string())
                    .arg("--tls-cert-file")
                    .arg(ca.cert_file())
                    .arg("--tls-key-file")
                    .arg(ca.key_file())
                    .arg("--tls-ca-cert-file")
                    .arg(ca.ca_file())
                    .args(["--tls-auth-clients", "no"]);
            }
        }
        if let Some(libs) = crate::peer::library_dir(binary) {
            cmd.env("LD_LIBRARY_PATH", libs);
        }
        if let Some(password) = &password {
            cmd.arg("--requirepass").arg(password);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", binary.display()));
        let log = Arc::new(Mutex::new(String::new()));
        let mut drains = Vec::new();
        if let Some(out) = child.stdout.take() {
            drains.push(drain(out, log.clone()));
        }
        if let Some(err) = child.stderr.take() {
            drains.push(drain(err, log.clone()));
        }
        Self {
            child,
            port,
            password,
            tls,
            log,
            drains,
        }
    }

    /// Probes the port until this server answers (after `AUTH` when it has a password). `Err`
    /// holds the server's output when it exited or did not answer in time.
    ///
    /// The answer must name this child's process id: when two tests pick the same free port,
    /// the second server fails to bind, but until it has exited a probe would reach the first
    /// one, and the two tests would share a server.
    async fn ready(&mut self) -> Result<(), String> {
        let pid = self.child.id();
        let (addr, password) = (self.addr(), self.password.clone());
        let tls = self
            .tls
            .as_ref()
            .map(|ca| tokio_rustls::TlsConnector::from(Arc::new(ca.client_config())));
        let ready = until_ready(&mut self.child, || {
            let (password, tls) = (password.clone(), tls.clone());
            async move { process_id(addr, password.as_deref(), tls).await == Some(pid) }
        })
        .await;
        ready.map_err(|why| {
            // Its pipes are closed when it exited: the drains end once they have read the
            // last lines.
            if matches!(why, NotReady::Exited(_)) {
                for drain in self.drains.drain(..) {
                    let _ = drain.join();
                }
            }
            why.with_output(&self.log())
        })
    }

    /// Kills the server (SIGKILL: nothing is saved, every connection drops) and reaps it; its
    /// port stays this server's, for [`restart`](Self::restart).
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let Some(mut server) = mcp_test_kit::redis::RedisServer::start().await else { return };
    /// let pid = server.pid();
    /// server.stop();
    /// assert!(!mcp_test_kit::procs::running(pid));
    /// # }
    /// ```
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for drain in self.drains.drain(..) {
            let _ = drain.join();
        }
    }

    /// Starts the server again, empty, on the same port with the same password (stopping it
    /// first if it runs), and returns once it answers `PING`. Panics when it cannot (another
    /// process took the port meanwhile, say).
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let Some(mut server) = mcp_test_kit::redis::RedisServer::start().await else { return };
    /// let port = server.port();
    /// server.stop();
    /// server.restart().await;
    /// assert_eq!(server.port(), port);
    /// # }
    /// ```
    pub async fn restart(&mut self) {
        self.stop();
        let var = if self.tls.is_some() { REDIS_TLS } else { REDIS };
        let binary = crate::peer::path(var).expect("the redis-server that started before");
        let mut fresh = Self::spawn(&binary, self.port, self.password.clone(), self.tls.clone());
        if let Err(log) = fresh.ready().await {
            panic!(
                "redis-server did not restart on port {}; its output:\n{log}",
                self.port
            );
        }
        *self = fresh;
    }

    /// The port on 127.0.0.1.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let Some(server) = mcp_test_kit::redis::RedisServer::start().await else { return };
    /// assert_ne!(server.port(), 0);
    /// # }
    /// ```
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let Some(server) = mcp_test_kit::redis::RedisServer::start().await else { return };
    /// assert!(server.addr().ip().is_loopback());
    /// # }
    /// ```
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The password given at the start, if any.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let Some(server) = mcp_test_kit::redis::RedisServer::start().await else { return };
    /// assert_eq!(server.password(), None);
    /// # }
    /// ```
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// `redis://127.0.0.1:port/`, or `redis://:password@127.0.0.1:port/` with a password;
    /// `rediss://` with TLS.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let Some(server) = mcp_test_kit::redis::RedisServer::start().await else { return };
    /// assert_eq!(server.url(), format!("redis://127.0.0.1:{}/", server.port()));
    /// # }
    /// ```
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        match &self.password {
            Some(password) => format!("{scheme}://:{password}@{}/", self.addr()),
            None => format!("{scheme}://{}/", self.addr()),
        }
    }

    /// The PEM file of the certificate authority that issued a TLS server's certificate;
    /// `None` without TLS.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let Some(server) = mcp_test_kit::redis::RedisServer::start().await else { return };
    /// assert_eq!(server.ca_file(), None);
    /// # }
    /// ```
    pub fn ca_file(&self) -> Option<PathBuf> {
        self.tls.as_ref().map(|ca| ca.ca_file())
    }

    /// The certificate authority of a TLS server (for a client configuration trusting it);
    /// `None` without TLS.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let Some(server) = mcp_test_kit::redis::RedisServer::start_tls(None).await else { return };
    /// let _config: rustls::ClientConfig = server.test_ca().unwrap().client_config();
    /// # }
    /// ```
    pub fn test_ca(&self) -> Option<&TestCa> {
        self.tls.as_deref()
    }

    /// The server's process id.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let Some(server) = mcp_test_kit::redis::RedisServer::start().await else { return };
    /// assert!(mcp_test_kit::procs::running(server.pid()));
    /// # }
    /// ```
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the server printed so far (bounded), for failure messages.
    ///
    /// ```no_run
    /// # async fn demo() {
    /// let Some(server) = mcp_test_kit::redis::RedisServer::start().await else { return };
    /// let _output: String = server.log();
    /// # }
    /// ```
    pub fn log(&self) -> String {
        self.log.lock().map(|log| log.clone()).unwrap_or_default()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A command in RESP: an array of bulk strings.
fn resp_command(words: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", words.len()).into_bytes();
    for word in words {
        out.extend(format!("${}\r\n{word}\r\n", word.len()).into_bytes());
    }
    out
}

/// Copies `from` into `log` (up to [`LOG_LIMIT`]) on a thread, so the server never blocks on a
/// full pipe.
fn drain(
    mut from: impl Read + Send + 'static,
    log: Arc<Mutex<String>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            if let Ok(mut log) = log.lock()
                && log.len() < LOG_LIMIT
            {
                log.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        }
    })
}

/// A connection to the server: plain TCP, or TLS over it.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// One probe: connect (through `tls` when given), (`AUTH`,) `INFO server`, and read the
/// `process_id` of the server that answers on the port.
async fn process_id(
    addr: SocketAddr,
    password: Option<&str>,
    tls: Option<tokio_rustls::TlsConnector>,
) -> Option<u32> {
    let tcp = TcpStream::connect(addr).await.ok()?;
    let mut stream: Box<dyn Stream> = match tls {
        None => Box::new(tcp),
        Some(connector) => {
            let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
            let handshake = connector.connect(name, tcp);
            Box::new(tokio::time::timeout(START, handshake).await.ok()?.ok()?)
        }
    };
    let mut request = Vec::new();
    if let Some(password) = password {
        request.extend(resp_command(&["AUTH", password]));
    }
    request.extend(resp_command(&["INFO", "server"]));
    stream.write_all(&request).await.ok()?;
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let text = String::from_utf8_lossy(&seen);
        if let Some(at) = text.find("process_id:")
            && let Some(end) = text[at..].find("\r\n")
        {
            return text[at + "process_id:".len()..at + end].parse().ok();
        }
        if seen.len() > 64 * 1024 {
            return None;
        }
        match tokio::time::timeout(START, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&buf[..n]),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_resp_arrays_of_bulk_strings() {
        assert_eq!(resp_command(&["PING"]), b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(
            resp_command(&["AUTH", "pw"]),
            b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"
        );
    }
}
