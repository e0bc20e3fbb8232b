//! What the memory benchmarks (`tests/benches/run_memory.rs`, `tests/benches/gateway_memory.rs`)
//! share: their allocator (chosen per process, counting live bytes), a process's resident
//! memory, glibc's trim, the upstream server in a child process (the benchmark's own binary
//! again), and waiting for memory to settle after a close.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcp_test_kit::{TestServerOptions, serve_http};

use crate::bench::runtime;

/// The environment variable that makes a memory benchmark's binary the upstream server.
pub const UPSTREAM: &str = "MCP_AGENT_MEMORY_UPSTREAM";

/// Resident memory of process `pid` (`self` for this one), in bytes (`VmRSS`); `None` once it
/// has exited.
pub fn rss_of(pid: &str) -> Option<usize> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .map(|kib| kib * 1024)
}

/// Resident memory of this process, in bytes (`VmRSS`).
///
/// ```
/// assert!(integration_tests::memory::rss() > 0);
/// ```
pub fn rss() -> usize {
    rss_of("self").expect("VmRSS in /proc/self/status")
}

/// Asks glibc's allocator to give the operating system back the free pages it keeps in its
/// arenas (`malloc_trim(0)`); returns how long that took.
pub fn trim() -> Duration {
    let started = Instant::now();
    // SAFETY: `malloc_trim` only releases free memory of the allocator's own arenas; it takes
    // no pointer and is safe to call at any time from any thread.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
    started.elapsed()
}

/// The upstream: the test kit's streamable HTTP server (its default tools) in a child process
/// (this binary again, with [`UPSTREAM`] set; its `main` calls [`serve_upstream`]), whose URL
/// it prints on its first line. Closing the child's stdin ends it.
pub fn upstream() -> (Child, String) {
    let mut child = Command::new(std::env::current_exe().expect("this binary"))
        .env(UPSTREAM, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the upstream");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the upstream's URL");
    (child, line.trim().to_owned())
}

/// Serves the upstream until stdin closes (the parent ended): the `main` of the child
/// [`upstream`] starts.
pub fn serve_upstream() {
    runtime().block_on(async {
        let server = serve_http(TestServerOptions::default())
            .await
            .expect("the HTTP test server");
        let mut out = std::io::stdout();
        writeln!(out, "{}", server.url()).expect("print the URL");
        out.flush().expect("flush");
        let _ = tokio::task::spawn_blocking(|| {
            let mut sink = String::new();
            let _ = std::io::stdin().read_line(&mut sink);
        })
        .await;
        server.shutdown().await;
    });
}

/// Waits until `measure` stops falling (tasks of closed sessions may still be ending when
/// `close` returns; an allocator may give memory back some time after it was freed, on a timer
/// of its own): it is read every `every`, and the wait ends once `quiet` readings in a row were
/// none lower than the lowest before them, or after `bound`. Returns how long that took.
pub async fn settle(
    every: Duration,
    quiet: usize,
    bound: Duration,
    measure: impl Fn() -> usize,
) -> Duration {
    let started = Instant::now();
    let mut lowest = measure();
    let mut still = 0;
    while still < quiet && started.elapsed() < bound {
        tokio::time::sleep(every).await;
        let now = measure();
        if now < lowest {
            lowest = now;
            still = 0;
        } else {
            still += 1;
        }
    }
    started.elapsed()
}

/// Sleeps `$MCP_AGENT_MEMORY_PAUSE` seconds (none when unset), saying so with this process's
/// id: a heap profiler's snapshot can be taken meanwhile.
pub async fn pause() {
    let Some(seconds) = std::env::var("MCP_AGENT_MEMORY_PAUSE")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        return;
    };
    println!(
        "pausing {seconds} s (pid {}): take a snapshot now",
        std::process::id()
    );
    tokio::time::sleep(Duration::from_secs(seconds)).await;
}

/// `bytes` in KiB.
pub fn kib(bytes: usize) -> f64 {
    bytes as f64 / 1024.0
}

/// The allocator of a memory benchmark's process, counting the bytes it hands out and takes
/// back ([`live`](Self::live)) over the allocator named by `MCP_AGENT_BENCH_ALLOCATOR` when the
/// process makes its first allocation: `system` (the default: glibc's malloc) or `jemalloc`
/// (its options from `_RJEM_MALLOC_CONF`: `background_thread:true` gives freed pages back
/// without waiting for the process to allocate again).
///
/// ```
/// use integration_tests::memory::BenchAllocator;
/// static ALLOCATOR: BenchAllocator = BenchAllocator::new();
/// assert_eq!(ALLOCATOR.live(), 0);
/// ```
#[derive(Debug)]
pub struct BenchAllocator {
    allocated: AtomicUsize,
    freed: AtomicUsize,
}

/// The allocator [`BenchAllocator`] uses, fixed at the process's first allocation.
static CHOSEN: AtomicU8 = AtomicU8::new(0);
const SYSTEM: u8 = 1;
const JEMALLOC: u8 = 2;

/// The variable that names a memory benchmark's allocator.
pub const ALLOCATOR_VAR: &str = "MCP_AGENT_BENCH_ALLOCATOR";

#[allow(unsafe_code)]
fn chosen() -> u8 {
    let c = CHOSEN.load(Ordering::Relaxed);
    if c != 0 {
        return c;
    }
    // SAFETY: `getenv` allocates nothing (this runs inside the allocator) and the environment
    // is not written while the process makes its first allocation, on its main thread.
    let value = unsafe { libc::getenv(c"MCP_AGENT_BENCH_ALLOCATOR".as_ptr()) };
    let c = if value.is_null() {
        SYSTEM
    } else {
        // SAFETY: a non-null `getenv` result is a NUL-terminated string.
        match unsafe { std::ffi::CStr::from_ptr(value) }.to_bytes() {
            b"jemalloc" => JEMALLOC,
            _ => SYSTEM,
        }
    };
    CHOSEN.store(c, Ordering::Relaxed);
    c
}

impl BenchAllocator {
    /// A counter over the chosen allocator.
    pub const fn new() -> Self {
        Self {
            allocated: AtomicUsize::new(0),
            freed: AtomicUsize::new(0),
        }
    }

    /// The bytes handed out and not yet taken back.
    pub fn live(&self) -> usize {
        self.allocated
            .load(Ordering::Relaxed)
            .saturating_sub(self.freed.load(Ordering::Relaxed))
    }

    /// The name of the allocator in use.
    pub fn name(&self) -> &'static str {
        match chosen() {
            JEMALLOC => "jemalloc",
            _ => "system",
        }
    }
}

impl Default for BenchAllocator {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "jemalloc")]
static JE: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
/// Without the `jemalloc` feature, the system's: [`ALLOCATORS`] does not name jemalloc then.
#[cfg(not(feature = "jemalloc"))]
static JE: System = System;

/// The allocators a memory benchmark can measure under: glibc's (what a host gets by default)
/// and, with the `jemalloc` feature, jemalloc.
pub const ALLOCATORS: &[&str] = if cfg!(feature = "jemalloc") {
    &["system", "jemalloc"]
} else {
    &["system"]
};

// SAFETY: every call goes to the one allocator chosen at the first allocation, which never
// changes, so each block is freed or resized by the allocator that made it.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for BenchAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.allocated.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe {
            match chosen() {
                JEMALLOC => JE.alloc(layout),
                _ => System.alloc(layout),
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.allocated.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe {
            match chosen() {
                JEMALLOC => JE.alloc_zeroed(layout),
                _ => System.alloc_zeroed(layout),
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.freed.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe {
            match chosen() {
                JEMALLOC => JE.dealloc(ptr, layout),
                _ => System.dealloc(ptr, layout),
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.allocated.fetch_add(new_size, Ordering::Relaxed);
        self.freed.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe {
            match chosen() {
                JEMALLOC => JE.realloc(ptr, layout, new_size),
                _ => System.realloc(ptr, layout, new_size),
            }
        }
    }
}
