//! What the memory benchmarks (`tests/benches/run_memory.rs`, `tests/benches/gateway_memory.rs`)
//! share: their global allocator (counting live bytes), the allocators a process can be measured
//! under (another `malloc` preloaded), a process's resident memory, glibc's trim, the upstream
//! server in a child process (the benchmark's own binary again), and waiting for memory to
//! settle after a close.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
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
    let mut command = Command::new(std::env::current_exe().expect("this binary"));
    command
        .env(UPSTREAM, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // The upstream's memory is not measured: it runs on the system's allocator.
    Allocator::SYSTEM.apply(&mut command);
    let mut child = command.spawn().expect("start the upstream");
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

/// The global allocator of a memory benchmark's process: the system's (`malloc`, glibc's unless
/// another allocator was preloaded, see [`allocators`]), counting the bytes it hands out and
/// takes back ([`live`](Self::live)).
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

impl BenchAllocator {
    /// A counter over the system's allocator.
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
}

impl Default for BenchAllocator {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: every call goes to the system's allocator with the caller's arguments.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for BenchAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.allocated.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.allocated.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.freed.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.allocated.fetch_add(new_size, Ordering::Relaxed);
        self.freed.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// The variable that names the jemalloc shared library: Debian's `libjemalloc2`, which
/// `cargo xtask peers` unpacks (`cargo xtask bench` and `cargo xtask peers --env` set it).
pub const JEMALLOC_VAR: &str = "MCP_AGENT_PEER_JEMALLOC";

/// An allocator a memory benchmark can measure under, in a process of its own: the system's
/// (glibc's `malloc`, what a host gets by default), or a shared library preloaded in front of
/// it (`LD_PRELOAD`), whose `malloc` the process's [`BenchAllocator`] then calls; each with its
/// per-thread caches, as it comes, or without them.
#[derive(Debug, Clone)]
pub struct Allocator {
    /// `system`, `system_no_tcache`, `jemalloc` or `jemalloc_no_tcache`.
    pub name: &'static str,
    /// The library whose `malloc` the process runs on ([`in_use`]): `system` or `jemalloc`.
    pub library: &'static str,
    preload: Option<PathBuf>,
    /// Without the per-thread caches of freed blocks (glibc's tcache, jemalloc's tcache).
    no_thread_cache: bool,
}

impl Allocator {
    /// The system's allocator: nothing preloaded.
    pub const SYSTEM: Allocator = Allocator {
        name: "system",
        library: "system",
        preload: None,
        no_thread_cache: false,
    };

    /// Sets what makes `cmd`'s process use this allocator. jemalloc runs with its background
    /// thread, which gives freed pages back on its decay timer without waiting for the process
    /// to allocate again. Without thread caches: glibc's `glibc.malloc.tcache_count=0` tunable,
    /// jemalloc's `tcache:false`.
    pub fn apply(&self, cmd: &mut Command) {
        cmd.env_remove("GLIBC_TUNABLES");
        match &self.preload {
            Some(library) => {
                let conf = if self.no_thread_cache {
                    "background_thread:true,tcache:false"
                } else {
                    "background_thread:true"
                };
                cmd.env("LD_PRELOAD", library).env("MALLOC_CONF", conf)
            }
            None => {
                if self.no_thread_cache {
                    cmd.env("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0");
                }
                cmd.env_remove("LD_PRELOAD").env_remove("MALLOC_CONF")
            }
        };
    }
}

/// The allocators to measure under: the system's, and jemalloc from [`JEMALLOC_VAR`], each
/// with and without its thread caches. Without that library, jemalloc is left out with a
/// note, or the call panics where a missing peer must fail ([`mcp_test_kit::peer::required`]).
pub fn allocators() -> Vec<Allocator> {
    let mut out = vec![
        Allocator::SYSTEM,
        Allocator {
            name: "system_no_tcache",
            no_thread_cache: true,
            ..Allocator::SYSTEM
        },
    ];
    if let Some(library) = mcp_test_kit::peer::path(JEMALLOC_VAR) {
        let jemalloc = Allocator {
            name: "jemalloc",
            library: "jemalloc",
            preload: Some(library),
            no_thread_cache: false,
        };
        let lean = Allocator {
            name: "jemalloc_no_tcache",
            no_thread_cache: true,
            ..jemalloc.clone()
        };
        out.extend([jemalloc, lean]);
    }
    out
}

/// The allocator this process's `malloc` is: `jemalloc` when the `malloc` the process's
/// symbols resolve to lies in a library named for jemalloc (one was preloaded in front of
/// glibc's), else `system`. A child measured under an [`Allocator`] reports this, so that a
/// preload that did not happen cannot pass for one.
///
/// ```
/// // Nothing is preloaded under the test runner.
/// assert_eq!(integration_tests::memory::in_use(), "system");
/// ```
pub fn in_use() -> &'static str {
    #[allow(unsafe_code)]
    // SAFETY: `dlsym` with `RTLD_DEFAULT` and a NUL-terminated name only looks a symbol up;
    // `dladdr` fills the `Dl_info` it is given, whose `dli_fname` is null or a NUL-terminated
    // path the loader keeps while the library is loaded (libc's or the preloaded one: never
    // unloaded).
    let library = unsafe {
        let malloc = libc::dlsym(libc::RTLD_DEFAULT, c"malloc".as_ptr());
        let mut info: libc::Dl_info = std::mem::zeroed();
        if malloc.is_null() || libc::dladdr(malloc, &mut info) == 0 || info.dli_fname.is_null() {
            return "system";
        }
        std::ffi::CStr::from_ptr(info.dli_fname).to_bytes()
    };
    let name = library.rsplit(|&b| b == b'/').next().unwrap_or(library);
    if name.starts_with(b"libjemalloc") {
        "jemalloc"
    } else {
        "system"
    }
}
