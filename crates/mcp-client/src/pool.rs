//! The session pool: one session per `shared = true` operator server, reused by every
//! run of the client that owns the pool.
//!
//! - **Keyed by the spec's fingerprint** ([`Fingerprint`]): a 128-bit hash of the whole spec
//!   as configured — name, transport and its parameters, timeouts, tool filter, and the
//!   secret values (headers, tokens, environment), so two specs that differ in a token never
//!   share a session.
//! - **Opened once**: each fingerprint has one slot whose lock is held while its session
//!   opens, so concurrent first opens coalesce into one (the others wait, then reuse it).
//! - **Checked before every reuse**: a run that finds a session in the slot takes its tools
//!   as they are now. When the session's last listing still stands — the session is open, the
//!   server announces tool-list changes and none came, no request failed in the transport or
//!   timed out and the transport did not renew its session since, and the listing is less than 5 s old —
//!   the run takes it without asking the server (its watcher then follows changes from that
//!   listing on). Otherwise the run lists the tools (`tools/list`, within the server's connect
//!   timeout), and a session that fails the listing (its process died, its HTTP session is
//!   gone) is closed and replaced by a new one for this run. A server that went away or hung
//!   since a listing that still stands, with nothing asked of it meanwhile, is found by the
//!   run's first request instead, which fails naming it; the next run lists and re-opens.
//!   Between runs nothing polls: an idle shared session costs nothing. A hung server holds its
//!   slot, and the runs asking for it, for at most its connect timeout.
//! - **Closed by its owner**: a run's close leaves a pooled session open
//!   ([`Session::is_shared`]); [`McpClient::shutdown`](crate::McpClient::shutdown) closes
//!   every one (and later runs get private sessions). Runs still using one then see their
//!   calls fail with an error naming the server.
//! - **Never for caller-supplied specs**: the caller of [`Pool::acquire`] passes only
//!   operator specs; an inline spec with `shared = true` gets a private session.
//!
//! A pooled session's own texts are scrubbed of its spec's secrets (it outlives the run that
//! opened it, so it cannot keep that run's); each run's governed layer still redacts every
//! secret of the run.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use mcp_config::{Redactor, ServerSpec};

use crate::fingerprint::Fingerprint;
use crate::last_listing::Listing;
use crate::lifecycle::known::KnownLifecycles;
use crate::session::SessionOptions;
use crate::{Connectors, Session, SessionError};

impl Session {
    /// True while the session belongs to its client's session pool (a `shared = true`
    /// server): the runs using it do not close it; the client's
    /// [`shutdown`](crate::McpClient::shutdown) does.
    pub fn is_shared(&self) -> bool {
        self.shared.load(Ordering::Acquire)
    }

    /// Marks the session as the pool's, or no longer.
    pub(crate) fn set_shared(&self, shared: bool) {
        self.shared.store(shared, Ordering::Release);
    }
}

/// How a run got its pooled session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reuse {
    /// Opened for this run (the first run to ask).
    Opened,
    /// The pool's session, which passed its check.
    Reused,
    /// The pool's session failed its check and was replaced by a new one.
    Reopened,
}

impl Reuse {
    /// How the `server_connected` event says it.
    pub(crate) fn note(self) -> &'static str {
        match self {
            Self::Opened => "shared session, opened",
            Self::Reused => "shared session, reused",
            Self::Reopened => "shared session, re-opened after it failed its check",
        }
    }
}

/// One fingerprint's place in the pool; its lock is held while its session is checked or
/// opened.
#[derive(Default)]
struct Slot {
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
}

/// The sessions of `shared = true` operator servers, owned by one client.
pub(crate) struct Pool {
    slots: std::sync::Mutex<HashMap<Fingerprint, Arc<Slot>>>,
    closed: AtomicBool,
    opened: AtomicU64,
    /// What the client learned of its servers' lifecycles, pooled or not.
    known: Arc<KnownLifecycles>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("slots", &self.slots.lock().map(|s| s.len()).unwrap_or(0))
            .field("closed", &self.closed.load(Ordering::Acquire))
            .field("opened", &self.opened.load(Ordering::Relaxed))
            .finish()
    }
}

impl Pool {
    /// An empty, open pool.
    pub(crate) fn new() -> Self {
        Self {
            slots: std::sync::Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            opened: AtomicU64::new(0),
            known: Arc::default(),
        }
    }

    /// What the client learned of its servers' lifecycles ([`KnownLifecycles`]), for every
    /// session it opens.
    pub(crate) fn known(&self) -> Arc<KnownLifecycles> {
        Arc::clone(&self.known)
    }

    /// True once [`close`](Self::close) ran: shared servers then get private sessions.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// How many sessions the pool has opened so far (re-opens included).
    pub(crate) fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// The pooled session of `spec` (an operator spec; `fingerprint` is of the spec as
    /// configured) and its tools as they are now (see the module): the slot's session if it passes its check,
    /// else a new one, opened within `connect_timeout` with `options` (its redactor replaced
    /// by one of the spec's own secrets). `None` once the pool is closed: the caller opens a
    /// private session.
    ///
    /// A check that fails closes the old session (its runs' later calls fail naming the
    /// server). An open that fails leaves the slot empty and returns the error; the next run
    /// tries again.
    pub(crate) async fn acquire(
        &self,
        connectors: &Connectors,
        fingerprint: Fingerprint,
        spec: Arc<ServerSpec>,
        connect_timeout: Duration,
        mut options: SessionOptions,
        grace: Duration,
    ) -> Option<Result<(Arc<Session>, Listing, Reuse), SessionError>> {
        if self.is_closed() {
            return None;
        }
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(slots.entry(fingerprint).or_default())
        };
        let mut held = slot.session.lock().await;
        let mut how = Reuse::Opened;
        let run = options.redactor.clone();
        if let Some(session) = held.as_ref() {
            session.report_secrets_to(&run);
            match session.standing_tools().await {
                Ok(listing) => return Some(Ok((Arc::clone(session), listing, Reuse::Reused))),
                Err(error) => {
                    tracing::info!(
                        server = %spec.name,
                        error = %agent_core::error_chain(&error),
                        "shared session failed its check; re-opening it"
                    );
                    if let Some(old) = held.take() {
                        old.set_shared(false);
                        old.close(grace).await;
                    }
                    how = Reuse::Reopened;
                }
            }
        }
        options.redactor = Redactor::new().with_secrets(spec.secret_values());
        let (session, listing) =
            match Session::open(connectors, spec, connect_timeout, options).await {
                Ok(opened) => opened,
                Err(error) => return Some(Err(error)),
            };
        self.opened.fetch_add(1, Ordering::Relaxed);
        session.report_secrets_to(&run);
        let session = Arc::new(session);
        if self.is_closed() {
            // The pool closed while this session opened: it is this run's own.
            return Some(Ok((session, listing, how)));
        }
        session.set_shared(true);
        *held = Some(Arc::clone(&session));
        Some(Ok((session, listing, how)))
    }

    /// Closes every pooled session (each given `grace` to exit) and stops pooling: later
    /// runs get private sessions. Idempotent.
    pub(crate) async fn close(&self, grace: Duration) {
        self.closed.store(true, Ordering::Release);
        let slots: Vec<Arc<Slot>> = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.drain().map(|(_, slot)| slot).collect()
        };
        let closing = slots.into_iter().map(|slot| async move {
            // Waits for an open in flight on this slot, then closes what it left.
            let session = slot.session.lock().await.take();
            if let Some(session) = session {
                session.set_shared(false);
                session.close(grace).await;
            }
        });
        futures::future::join_all(closing).await;
    }
}
