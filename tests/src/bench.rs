//! What the benchmarks in `tests/benches/` share: their runtime, the echo arguments every
//! measured call sends, timing, medians, and the `main` that runs criterion and then the
//! paired measurement.

use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::runtime::Runtime;

/// A two-worker multi-threaded runtime, the size of the machines the figures are taken on.
pub fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// The arguments of every measured `echo` call.
pub fn echo_args() -> Value {
    json!({"text": "hello, server", "n": 42, "flags": [true, false]})
}

/// The wall time of `iters` sequential iterations of `body` on `rt` (criterion's
/// `iter_custom`).
pub fn timed<F: Future<Output = ()>>(
    rt: &Runtime,
    iters: u64,
    mut body: impl FnMut() -> F,
) -> Duration {
    rt.block_on(async {
        let started = Instant::now();
        for _ in 0..iters {
            body().await;
        }
        started.elapsed()
    })
}

/// This process's context switches so far, `(voluntary, involuntary)`, every thread's, ended
/// ones included (`getrusage(RUSAGE_SELF)`). A voluntary switch is a thread that went to sleep
/// (to be woken by another thread, a timer or I/O): their difference over some calls counts the
/// hand-offs, which cost a call latency beyond its CPU time. An involuntary one is a thread
/// preempted: it grows with the machine's load and the work done.
///
/// ```
/// let (voluntary, _) = integration_tests::bench::context_switches();
/// std::thread::sleep(std::time::Duration::from_millis(1));
/// assert!(integration_tests::bench::context_switches().0 > voluntary);
/// ```
pub fn context_switches() -> (u64, u64) {
    #[allow(unsafe_code)]
    // SAFETY: `getrusage` fills the `rusage` it is given; all zeroes is a valid `rusage`.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return (0, 0);
        }
        usage
    };
    (usage.ru_nvcsw as u64, usage.ru_nivcsw as u64)
}

/// The median of `values` (the mean of the middle two for an even count); NaN for none.
///
/// ```
/// use integration_tests::bench::median;
/// assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
/// assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
/// ```
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    match values.len() {
        0 => f64::NAN,
        n if n.is_multiple_of(2) => (values[mid - 1] + values[mid]) / 2.0,
        _ => values[mid],
    }
}

/// The tail of a benchmark's `main`, after its criterion group ran: the paired measurement,
/// unless criterion's filter (the first argument that is not a flag) excludes `paired`.
///
/// Under `cargo bench` (`--bench` among the arguments) `paired(true)` is the full measurement;
/// under `cargo test --benches` `paired(false)` runs it once, small. The figures go to the file
/// `MCP_AGENT_BENCH_PAIRED` names, when set (`cargo xtask bench --json` reads them there).
pub fn run_paired(paired: impl FnOnce(bool) -> Value) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filter = args.iter().find(|a| !a.starts_with('-'));
    if filter.is_none_or(|f| "paired".contains(f.as_str())) {
        let figures = paired(args.iter().any(|a| a == "--bench"));
        if let Some(path) = std::env::var_os("MCP_AGENT_BENCH_PAIRED") {
            std::fs::write(&path, figures.to_string()).expect("write the paired results");
        }
    }
}
