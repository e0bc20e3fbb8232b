//! The session's requests wait for the server to answer the standalone GET stream.
//!
//! After the handshake rmcp opens the session's standalone GET stream in a task of its own,
//! while the session's next requests go out at once. A server may send what it has for a
//! request — an `elicitation/create` for a running `tools/call`, say — on the GET stream
//! alone, and drop it when that stream is not open yet (the TypeScript SDK's server does,
//! without an event store). Whenever the request reached the server before the GET did (a
//! loaded machine, a slow connect), that message was lost and the call waited forever.
//!
//! [`EventStreamGate`] orders them: once a `notifications/initialized` with a session id is
//! accepted, requests wait until the GET stream's open has ended (the server answered it with
//! a stream, 405 or an error, or the attempt was dropped), for at most the gate's bound —
//! after which they go anyway, as before. A server registers the stream before it answers the
//! GET, so a request sent after the answer finds it open (docs/upstream.md#rmcp-get-stream-order).

use std::time::Duration;

use tokio::sync::watch;

/// Whether the session's requests wait for the GET stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct State {
    /// A GET stream is being opened: requests wait.
    opening: bool,
    /// Counts the handshakes, so an attempt of an older session cannot end a newer wait.
    generation: u64,
}

/// The wait of one session's requests for its standalone GET stream.
#[derive(Debug)]
pub(super) struct EventStreamGate {
    state: watch::Sender<State>,
    /// The longest a request waits.
    bound: Duration,
}

/// Ends the wait of the generation it was made for when dropped: the GET stream's open has
/// ended, however it ended.
pub(super) struct Opening<'a> {
    gate: &'a EventStreamGate,
    generation: u64,
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        self.gate.settle(self.generation);
    }
}

impl EventStreamGate {
    /// A gate whose requests wait at most `bound`.
    pub(super) fn new(bound: Duration) -> Self {
        Self {
            state: watch::Sender::new(State::default()),
            bound,
        }
    }

    /// A handshake with a session completed: the GET stream is opened next, requests wait.
    pub(super) fn handshake_completed(&self) {
        self.state.send_modify(|state| {
            state.opening = true;
            state.generation += 1;
        });
    }

    /// The GET stream's open starts; the wait ends when the returned guard is dropped. `None`
    /// when no request waits for it.
    pub(super) fn opening(&self) -> Option<Opening<'_>> {
        let state = *self.state.borrow();
        state.opening.then_some(Opening {
            gate: self,
            generation: state.generation,
        })
    }

    fn settle(&self, generation: u64) {
        self.state.send_if_modified(|state| {
            let settles = state.opening && state.generation == generation;
            if settles {
                state.opening = false;
            }
            settles
        });
    }

    /// Waits until no GET stream is being opened, or the gate's bound has passed (then the
    /// gate stays open for this session: its requests do not wait again). `server` names the
    /// session in the log.
    pub(super) async fn wait(&self, server: &str) {
        let mut state = self.state.subscribe();
        let generation = state.borrow().generation;
        let settled = tokio::time::timeout(self.bound, state.wait_for(|s| !s.opening)).await;
        if settled.is_err() {
            tracing::warn!(
                server,
                bound = ?self.bound,
                "the server did not answer the standalone GET stream in time: sending requests anyway"
            );
            self.settle(generation);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn requests_wait_for_the_open_of_their_own_generation() {
        let gate = EventStreamGate::new(Duration::from_secs(5));
        // Before any handshake nothing waits, and no open is awaited.
        assert!(gate.opening().is_none());
        gate.wait("s").await;

        gate.handshake_completed();
        let first = gate.opening().expect("the handshake awaits an open");
        gate.handshake_completed(); // a re-initialisation
        let second = gate.opening().expect("the new session awaits an open");
        // The old session's open ending does not release the new session's requests.
        drop(first);
        assert!(gate.state.borrow().opening);
        drop(second);
        assert!(!gate.state.borrow().opening);
        gate.wait("s").await;
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn an_open_that_never_ends_holds_requests_for_the_bound_once() {
        let gate = EventStreamGate::new(Duration::from_secs(5));
        gate.handshake_completed();
        let _never = gate.opening();
        let started = tokio::time::Instant::now();
        gate.wait("s").await;
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        // Later requests go at once.
        let again = tokio::time::Instant::now();
        gate.wait("s").await;
        assert_eq!(again.elapsed(), Duration::ZERO);
    }
}
