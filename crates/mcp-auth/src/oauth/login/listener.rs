//! [`CallbackListener`]: the loopback end of a login's redirect (RFC 8252 §7.3). A few lines
//! of HTTP/1.1 on a TCP socket bound to 127.0.0.1: it reads one request line, answers with a
//! short page, and hands the query over as a [`Callback`]. Not an HTTP client, and not a
//! general server: anything but `GET <redirect path>?…` is answered 404 and ignored, and
//! [`CallbackListener::wait_for`] waits past a redirect of another login (any local process
//! can reach the port) with `400`.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use url::Url;

use super::flow::{Callback, PendingLogin, loopback_redirect_uri};

/// The longest request head read from the browser.
const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// How long one connection may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

const DONE_PAGE: &str = "<!doctype html><meta charset=utf-8><title>mcp-agent</title>\
<p>Login received. You can close this window and return to the terminal.</p>";
const FAILED_PAGE: &str = "<!doctype html><meta charset=utf-8><title>mcp-agent</title>\
<p>The authorization server did not grant access. Details are in the terminal.</p>";
const OTHER_PAGE: &str = "<!doctype html><meta charset=utf-8><title>mcp-agent</title>\
<p>This is not the redirect of the login in progress.</p>";

/// Listens on `127.0.0.1:<port>` for the browser's redirect after a login.
///
/// ```no_run
/// # async fn run(login: mcp_auth::Login) -> Result<(), Box<dyn std::error::Error>> {
/// use mcp_auth::CallbackListener;
///
/// let listener = CallbackListener::bind(0).await?; // any free port
/// let pending = login.with_redirect_uri(listener.redirect_uri().clone()).start().await?;
/// println!("{}", pending.authorization_url());
/// let callback = listener.wait_for(&pending).await?;
/// let stored = pending.finish(callback).await?;
/// # drop(stored); Ok(()) }
/// ```
#[derive(Debug)]
pub struct CallbackListener {
    listener: TcpListener,
    redirect_uri: Url,
}

impl CallbackListener {
    /// Binds `127.0.0.1:port` (`0`: a free port); the redirect URI is
    /// `http://127.0.0.1:<port>/callback`.
    pub async fn bind(port: u16) -> io::Result<Self> {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await?;
        let port = listener.local_addr()?.port();
        Ok(Self {
            listener,
            redirect_uri: loopback_redirect_uri(port),
        })
    }

    /// Where the authorization server sends the browser back.
    pub fn redirect_uri(&self) -> &Url {
        &self.redirect_uri
    }

    /// Waits for the redirect (bound it with a timeout of your own: a user may never log
    /// in): the first `GET` of the redirect path with a query. Other requests (a favicon, a
    /// probe) are answered 404 and waited past. Prefer [`wait_for`](Self::wait_for), which
    /// also waits past a redirect that is not the login's.
    pub async fn wait(self) -> io::Result<Callback> {
        self.wait_until(|_| true).await
    }

    /// Waits for the redirect of `login`, as [`wait`](Self::wait) does, but a redirect whose
    /// `state` is not the one `login` sent is answered `400` and waited past: any process on
    /// this machine can reach the port, and one that sent a redirect first would otherwise end
    /// the wait with a callback [`PendingLogin::finish`] refuses.
    pub async fn wait_for(self, login: &PendingLogin) -> io::Result<Callback> {
        self.wait_until(|callback| login.is_for(callback)).await
    }

    async fn wait_until(self, expected: impl Fn(&Callback) -> bool) -> io::Result<Callback> {
        loop {
            let (stream, _) = self.listener.accept().await?;
            if let Ok(Ok(Some(callback))) =
                tokio::time::timeout(REQUEST_TIMEOUT, self.serve(stream, &expected)).await
            {
                return Ok(callback);
            }
        }
    }

    /// Reads one request; the callback when it is the redirect `expected` takes.
    async fn serve(
        &self,
        mut stream: TcpStream,
        expected: &impl Fn(&Callback) -> bool,
    ) -> io::Result<Option<Callback>> {
        let mut head = Vec::new();
        let mut buf = [0u8; 2048];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await?;
            if n == 0 || head.len() + n > MAX_REQUEST_BYTES {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        let line = head
            .split(|b| *b == b'\n')
            .next()
            .map(|l| String::from_utf8_lossy(l).trim_end().to_owned())
            .unwrap_or_default();
        let mut parts = line.split(' ');
        let (method, target) = (
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
        );
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if method != "GET" || path != self.redirect_uri.path() || query.is_empty() {
            respond(&mut stream, "404 Not Found", "<p>Not found.</p>").await?;
            return Ok(None);
        }
        let callback = Callback::from_redirect(query);
        if !expected(&callback) {
            respond(&mut stream, "400 Bad Request", OTHER_PAGE).await?;
            return Ok(None);
        }
        let page = if callback.error().is_some() {
            FAILED_PAGE
        } else {
            DONE_PAGE
        };
        respond(&mut stream, "200 OK", page).await?;
        Ok(Some(callback))
    }
}

async fn respond(stream: &mut TcpStream, status: &str, body: &str) -> io::Result<()> {
    let answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncache-control: no-store\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(answer.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(port: u16, target: &str) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        stream
            .write_all(format!("GET {target} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    }

    #[tokio::test]
    async fn the_redirect_is_read_and_anything_else_ignored() {
        let listener = CallbackListener::bind(0).await.unwrap();
        let port = listener.redirect_uri().port().unwrap();
        assert_eq!(
            listener.redirect_uri().as_str(),
            format!("http://127.0.0.1:{port}/callback")
        );
        let waiting = tokio::spawn(listener.wait());
        assert!(get(port, "/favicon.ico").await.starts_with("HTTP/1.1 404"));
        assert!(get(port, "/callback").await.starts_with("HTTP/1.1 404"));
        let answer = get(port, "/callback?code=c1&state=s1&iss=https%3A%2F%2Fas").await;
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(answer.contains("You can close this window"), "{answer}");
        let callback = waiting.await.unwrap().unwrap();
        assert!(callback.has_code());
        let shown = format!("{callback:?}");
        assert!(!shown.contains("c1") && !shown.contains("s1"), "{shown}");
    }

    #[tokio::test]
    async fn a_redirect_of_another_login_is_waited_past() {
        let listener = CallbackListener::bind(0).await.unwrap();
        let port = listener.redirect_uri().port().unwrap();
        let sent = mcp_config::Secret::new("s-sent".to_owned());
        let waiting =
            tokio::spawn(async move { listener.wait_until(|c| c.carries_state(&sent)).await });
        for forged in [
            "/callback?x=1",
            "/callback?code=c0&state=s-other",
            "/callback?error=access_denied&state=s-other",
        ] {
            let answer = get(port, forged).await;
            assert!(answer.starts_with("HTTP/1.1 400"), "{forged}: {answer}");
        }
        let answer = get(port, "/callback?code=c1&state=s-sent").await;
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        let callback = waiting.await.unwrap().unwrap();
        assert!(callback.has_code());
    }
}
