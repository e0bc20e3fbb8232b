//! The accept loop: connections beyond the cap (all clients, or one address) refused at once
//! with a `503`, accept errors such as running out of file descriptors backed off instead of
//! retried in a spin, and each admitted connection served on its own task.
//!
//! A connection beyond the cap is accepted, answered and closed rather than left in the
//! listen backlog: the client learns at once to retry later instead of hanging on a backlog
//! that, once full, drops everyone's handshakes, and the refusal costs a descriptor for
//! microseconds (one non-blocking write, no task).

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::conn::{self, Stops, Timeouts};
use super::front::Front;
use crate::drain::Lifecycle;

/// The bounds on connections.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caps {
    pub(crate) total: usize,
    pub(crate) per_address: Option<usize>,
}

/// Connections open now per client address (only addresses with one).
type PerAddress = Arc<Mutex<HashMap<IpAddr, usize>>>;

/// Connections open now: a slot of the cap each, and a count per client address.
#[derive(Debug)]
pub(crate) struct Slots {
    caps: Caps,
    free: Arc<Semaphore>,
    per_address: PerAddress,
}

/// One admitted connection's slots; dropping it frees them.
struct Slot {
    _permit: OwnedSemaphorePermit,
    address: Option<(IpAddr, PerAddress)>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some((ip, map)) = &self.address {
            let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(n) = map.get_mut(ip) {
                *n -= 1;
                if *n == 0 {
                    map.remove(ip);
                }
            }
        }
    }
}

/// Why a connection was not admitted.
enum Refusal {
    Total,
    PerAddress,
}

impl Slots {
    pub(crate) fn new(caps: Caps) -> Self {
        Self {
            caps,
            free: Arc::new(Semaphore::new(caps.total)),
            per_address: Arc::default(),
        }
    }

    /// Connections open now.
    pub(crate) fn open(&self) -> usize {
        self.caps.total - self.free.available_permits()
    }

    fn admit(&self, ip: IpAddr) -> Result<Slot, Refusal> {
        let permit = self
            .free
            .clone()
            .try_acquire_owned()
            .map_err(|_| Refusal::Total)?;
        let Some(max) = self.caps.per_address else {
            return Ok(Slot {
                _permit: permit,
                address: None,
            });
        };
        let mut map = self
            .per_address
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let n = map.entry(ip).or_insert(0);
        if *n >= max {
            return Err(Refusal::PerAddress);
        }
        *n += 1;
        Ok(Slot {
            _permit: permit,
            address: Some((ip, self.per_address.clone())),
        })
    }
}

/// A whole HTTP/1.1 `503` answer saying `reason`, closing the connection.
fn refusal(reason: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{reason}",
        reason.len()
    )
    .into_bytes()
}

/// Backs off after failed accepts: 10 ms, doubling to 1 s while they go on; logged once
/// per [`Backoff::REPORT_EVERY`] with how many failed.
struct Backoff {
    delay: Duration,
    failed: u64,
    reported: Option<Instant>,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MAX: Duration = Duration::from_secs(1);
    const REPORT_EVERY: Duration = Duration::from_secs(10);

    fn new() -> Self {
        Self {
            delay: Self::FIRST,
            failed: 0,
            reported: None,
        }
    }

    /// How long to wait after `error`.
    fn failed(&mut self, error: &io::Error) -> Duration {
        self.failed += 1;
        if self
            .reported
            .is_none_or(|at| at.elapsed() >= Self::REPORT_EVERY)
        {
            tracing::warn!(
                %error,
                failed = self.failed,
                "accepting connections fails (out of file descriptors?); backing off"
            );
            self.reported = Some(Instant::now());
            self.failed = 0;
        }
        let delay = self.delay;
        self.delay = (self.delay * 2).min(Self::MAX);
        delay
    }

    fn succeeded(&mut self) {
        self.delay = Self::FIRST;
    }
}

/// An accept error that concerns one connection only (the client left before it was
/// accepted): the next accept may succeed at once.
fn of_one_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
    )
}

/// What the accept loop and its connections watch.
pub(crate) struct Loop {
    pub(crate) accepting: CancellationToken,
    pub(crate) lifecycle: Lifecycle,
    pub(crate) connections: TaskTracker,
    pub(crate) hard_stop: CancellationToken,
    pub(crate) slots: Arc<Slots>,
    pub(crate) timeouts: Timeouts,
}

pub(crate) async fn accept_loop(listener: TcpListener, front: Front, watch: Loop) {
    let Loop {
        accepting,
        lifecycle,
        connections,
        hard_stop,
        slots,
        timeouts,
    } = watch;
    let full = refusal(&format!(
        "too many connections: this server allows {} at once; retry later",
        slots.caps.total
    ));
    let address_full = refusal(&format!(
        "too many connections from one address: this server allows {} per address; retry later",
        slots.caps.per_address.unwrap_or(0)
    ));
    let mut backoff = Backoff::new();
    loop {
        let accepted = tokio::select! {
            () = accepting.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => {
                backoff.succeeded();
                accepted
            }
            Err(error) if of_one_connection(&error) => continue,
            // Out of file descriptors (or kernel memory): the pending connection stays in
            // the backlog and the listener stays ready, so retrying at once would spin.
            Err(error) => {
                let delay = backoff.failed(&error);
                tokio::select! {
                    () = accepting.cancelled() => break,
                    () = tokio::time::sleep(delay) => continue,
                }
            }
        };
        let slot = match slots.admit(peer.ip()) {
            Ok(slot) => slot,
            Err(refused) => {
                let answer = match refused {
                    Refusal::Total => &full,
                    Refusal::PerAddress => &address_full,
                };
                // One non-blocking write into a fresh socket's buffer, then closed.
                let _ = stream.try_write(answer);
                continue;
            }
        };
        // Responses go out in several small writes (headers, events): without TCP_NODELAY
        // each exchange would wait for the client's delayed ACK.
        let _ = stream.set_nodelay(true);
        let stops = Stops {
            lifecycle: lifecycle.clone(),
            hard_stop: hard_stop.clone(),
        };
        let front = front.clone();
        connections.spawn(async move {
            conn::serve(stream, peer.ip(), front, timeouts, stops).await;
            drop(slot);
        });
    }
    // The listener drops here: no new connection is accepted.
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_bound_the_total_and_each_address() {
        let slots = Slots::new(Caps {
            total: 3,
            per_address: Some(2),
        });
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = slots.admit(a).ok().unwrap();
        let _a2 = slots.admit(a).ok().unwrap();
        assert!(matches!(slots.admit(a), Err(Refusal::PerAddress)));
        let _b1 = slots.admit(b).ok().unwrap();
        assert!(matches!(slots.admit(b), Err(Refusal::Total)));
        assert_eq!(slots.open(), 3);
        drop(a1);
        assert_eq!(slots.open(), 2);
        assert!(
            slots.admit(a).is_ok(),
            "a freed slot is free for its address"
        );
    }

    #[test]
    fn backoff_doubles_to_a_second_and_resets() {
        let mut backoff = Backoff::new();
        let error = io::Error::from_raw_os_error(24); // EMFILE
        let delays: Vec<_> = (0..9).map(|_| backoff.failed(&error)).collect();
        assert_eq!(delays[0], Duration::from_millis(10));
        assert_eq!(delays[1], Duration::from_millis(20));
        assert_eq!(delays[8], Duration::from_secs(1));
        backoff.succeeded();
        assert_eq!(backoff.failed(&error), Duration::from_millis(10));
        assert!(!of_one_connection(&error));
    }
}
