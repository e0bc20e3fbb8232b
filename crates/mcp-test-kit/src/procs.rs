//! Process checks for tests, by pid and process group, read from `/proc` — never by process
//! name, so tests running side by side never see each other's servers.

use std::time::Duration;

/// How long the assertions below wait for processes to stop: a bound for failing, never a
/// delay (they return as soon as the processes are gone), generous for a loaded machine.
const BOUND: Duration = Duration::from_secs(20);

/// The state letter of `pid` (`R`, `S`, `Z`, …), or `None` when no such process exists.
pub fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) S ...`: comm may contain spaces and parentheses; the state follows the last `)`.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// The process group of `pid`, if the process exists.
pub fn group_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
}

/// The processes of group `pgid` that are not zombies.
pub fn live_members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| group_of(pid) == Some(pgid) && state(pid).is_some_and(|s| s != 'Z'))
        .collect()
}

/// True while `pid` runs (exists and is not a zombie).
pub fn running(pid: u32) -> bool {
    state(pid).is_some_and(|s| s != 'Z' && s != 'X')
}

/// True when `pid` is gone and reaped (no zombie) and nothing of its process group still runs
/// (every server leads its own group, so its pid is the group id).
pub fn gone(pid: u32) -> bool {
    state(pid).is_none() && live_members(pid).is_empty()
}

/// Waits until `check` holds, re-checking every 10 ms for at most `timeout`. Returns whether it
/// held. For conditions another process brings about (a signal delivered, a file written),
/// which no channel announces.
pub async fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Asserts that every pid of `pids`, and its process group, is gone, waiting at most 20 s
/// (SIGKILL and reaping are asynchronous).
pub async fn assert_gone(pids: &[u32]) {
    let all_gone = eventually(BOUND, || pids.iter().all(|&p| gone(p))).await;
    let left: Vec<String> = pids
        .iter()
        .filter(|&&p| !gone(p))
        .map(|&p| {
            format!(
                "{p} (state {:?}, live group members {:?})",
                state(p),
                live_members(p)
            )
        })
        .collect();
    assert!(all_gone, "processes left behind: {}", left.join(", "));
}

/// Asserts that `pid` does not run (gone, or a zombie waiting for whoever adopted it), waiting
/// at most 20 s.
pub async fn assert_not_running(pid: u32) {
    let stopped = eventually(BOUND, || state(pid).is_none_or(|s| s == 'Z')).await;
    assert!(stopped, "process {pid} still runs ({:?})", state(pid));
}

/// Asserts that none of `pids` runs (each gone, or a zombie), waiting at most 20 s; the message
/// counts and lists those left running.
pub async fn assert_none_running(pids: &[u32]) {
    let running_now = || {
        pids.iter()
            .copied()
            .filter(|&p| running(p))
            .collect::<Vec<_>>()
    };
    eventually(BOUND, || running_now().is_empty()).await;
    let left = running_now();
    assert!(
        left.is_empty(),
        "{} of {} processes still run: {left:?}",
        left.len(),
        pids.len()
    );
}
