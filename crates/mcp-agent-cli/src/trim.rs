//! Gives the memory of closed sessions back to the system.
//!
//! glibc's malloc keeps what it frees in its arenas: after a thousand gateway sessions close, a
//! process stays at the size it had with all of them open (and grows round after round, as the
//! arenas fragment). `malloc_trim(0)` returns every free page. [`after_close`] asks for one a
//! second after a session closed, on the blocking pool, one at a time: the sessions closing
//! meanwhile ride on it, so a steady stream of closes trims at most once a second, and a call
//! never waits for it. docs/benchmarks.md ("Memory of gateway sessions") has the figures, and
//! those of jemalloc and mimalloc, which gave less back.

use std::time::Duration;

/// How long after a close the trim runs: closes in a burst share one.
const DELAY: Duration = Duration::from_secs(1);

/// Asks for a trim [`DELAY`] from now, unless one is already waiting. Needs a tokio runtime.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn after_close() {
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A trim is waiting to run.
    static WAITING: AtomicBool = AtomicBool::new(false);

    if WAITING.swap(true, Ordering::AcqRel) {
        return;
    }
    tokio::spawn(async {
        tokio::time::sleep(DELAY).await;
        // A close from now on asks for the next trim.
        WAITING.store(false, Ordering::Release);
        let _ = tokio::task::spawn_blocking(|| {
            // SAFETY: `malloc_trim` only releases free memory of glibc's own arenas; it takes no
            // pointer and may be called from any thread at any time.
            #[allow(unsafe_code)]
            unsafe {
                libc::malloc_trim(0);
            }
        })
        .await;
    });
}

/// Elsewhere the allocator is not glibc's: nothing to do.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn after_close() {
    let _ = DELAY;
}
