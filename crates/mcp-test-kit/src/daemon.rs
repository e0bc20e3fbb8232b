//! What the test kit's peer servers (Redis, nginx) share: a free loopback port, a start
//! tried again on another port when a process took the one picked first, and a readiness
//! wait that ends at the first good probe, when the child exits, or at a bound.

use std::future::Future;
use std::net::Ipv4Addr;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// How long a peer may take to answer after its start: a bound for failing, never a delay.
pub(crate) const START: Duration = Duration::from_secs(20);

/// The pause between two readiness probes while the peer is not yet listening.
const PROBE_INTERVAL: Duration = Duration::from_millis(10);

/// How many ports are tried when another process takes the free port first.
const PORT_TRIES: usize = 3;

/// Why a peer is not ready.
pub(crate) enum NotReady {
    /// The child ended.
    Exited(ExitStatus),
    /// No good probe within the bound.
    Silent(Duration),
}

impl NotReady {
    /// In words, followed by the peer's `output`.
    pub(crate) fn with_output(self, output: &str) -> String {
        match self {
            Self::Exited(status) => format!("exited ({status}); output:\n{output}"),
            Self::Silent(bound) => format!("no answer within {bound:?}; output:\n{output}"),
        }
    }
}

/// A port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

/// Starts `name` with `start` on a free port; a start that fails with "Address already in
/// use" (another process took the port between its pick and the bind) is tried again on
/// another port. Panics with the peer's output when it cannot start.
pub(crate) async fn on_a_free_port<T, F, Fut>(name: &str, mut start: F) -> T
where
    F: FnMut(u16) -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let mut last = String::new();
    for _ in 0..PORT_TRIES {
        match start(free_port()).await {
            Ok(started) => return started,
            Err(output) if output.contains("Address already in use") => last = output,
            Err(output) => panic!("{name} did not start; its output:\n{output}"),
        }
    }
    panic!("{name} found no free port in {PORT_TRIES} tries; last output:\n{last}");
}

/// Probes until `probe` holds, the child exits or the bound passes.
pub(crate) async fn until_ready<P, Fut>(child: &mut Child, mut probe: P) -> Result<(), NotReady>
where
    P: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + START;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(NotReady::Exited(status));
        }
        if probe().await {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(NotReady::Silent(START));
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}
