//! Child processes that try to outlive the server that started them: a `sleep` in the
//! server's process group, one in a session of its own (`setsid`), and either of them started
//! through a shell that exits at once (a daemon's double fork: the sleep is orphaned). Used by
//! the `spawn_child` tool and by the stdio server's `--escapees` option.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// How a child tries to escape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Escape {
    /// A plain child, in the server's process group.
    None,
    /// A child in a process group and session of its own.
    Setsid,
    /// A child in a session of its own, orphaned at once (its parent shell exits).
    Detach,
    /// A child left in the server's process group, orphaned at once.
    Orphan,
}

impl Escape {
    /// Every kind, in the order `--escapees` starts them.
    pub(crate) const ALL: [Self; 4] = [Self::None, Self::Orphan, Self::Setsid, Self::Detach];

    /// The `escape` argument of the `spawn_child` tool.
    pub(crate) fn parse(name: Option<&str>) -> Result<Self, String> {
        match name {
            None => Ok(Self::None),
            Some("setsid") => Ok(Self::Setsid),
            Some("detach") => Ok(Self::Detach),
            Some("orphan") => Ok(Self::Orphan),
            Some(other) => Err(format!("unknown escape `{other}`")),
        }
    }
}

/// Starts `sleep seconds` escaping as `escape` and returns its pid, once it is where it went
/// (its own session, for `Setsid` and `Detach`). `inherit_stdio` shares the caller's stdout and
/// stderr (plain and `Setsid` children only; the others get `/dev/null`).
pub(crate) fn sleep_child(
    escape: Escape,
    seconds: u64,
    inherit_stdio: bool,
) -> Result<u32, String> {
    let stdio = || {
        if inherit_stdio {
            Stdio::inherit()
        } else {
            Stdio::null()
        }
    };
    let through_shell = |setsid: &str| -> Result<u32, String> {
        let script = format!("{setsid}sleep {seconds} </dev/null >/dev/null 2>&1 & echo $!");
        let output = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run sh: {e}"))?;
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse::<u32>()
            .map_err(|_| "the shell did not print the detached pid".to_owned())
    };
    let pid = match escape {
        Escape::Detach => through_shell("setsid ")?,
        Escape::Orphan => through_shell("")?,
        Escape::None | Escape::Setsid => {
            let mut command = if escape == Escape::Setsid {
                // Not a group leader, so `setsid` calls setsid(2) itself and execs: same pid.
                let mut command = Command::new("setsid");
                command.arg("sleep");
                command
            } else {
                Command::new("sleep")
            };
            let child = command
                .arg(seconds.to_string())
                .stdin(Stdio::null())
                .stdout(stdio())
                .stderr(stdio())
                .spawn()
                .map_err(|e| format!("cannot spawn sleep: {e}"))?;
            // Deliberately not waited for: the child outlives the caller's call, as a
            // careless server's helper would.
            child.id()
        }
    };
    if matches!(escape, Escape::Setsid | Escape::Detach) && !in_own_session(pid) {
        return Err("the child did not start a session of its own".to_owned());
    }
    Ok(pid)
}

/// Starts one `sleep` of each [`Escape`] kind and writes this process's pid and theirs to
/// `path`, one a line (through a temporary file renamed into place, so a reader sees all or
/// nothing).
pub(crate) fn start_escapees(path: &Path, seconds: u64) -> std::io::Result<Vec<u32>> {
    let mut pids = vec![std::process::id()];
    for escape in Escape::ALL {
        pids.push(sleep_child(escape, seconds, false).map_err(std::io::Error::other)?);
    }
    let text: String = pids.iter().map(|pid| format!("{pid}\n")).collect();
    let partial = path.with_extension("partial");
    std::fs::write(&partial, text)?;
    std::fs::rename(&partial, path)?;
    Ok(pids)
}

/// The pids an `--escapees` file lists, once it is written.
pub(crate) fn read_escapees(path: &Path) -> Option<Vec<u32>> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().map(|line| line.trim().parse().ok()).collect()
}

/// Waits (at most 5 s) until `pid` leads a session of its own, so that a caller told its pid
/// sees it escaped. From `/proc` (Linux); `false` elsewhere or when it never happens.
fn in_own_session(pid: u32) -> bool {
    let session = || -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(3)?
            .parse()
            .ok()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        if session() == Some(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}
