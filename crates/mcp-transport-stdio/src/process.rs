//! Process groups: the child leads a group of its own; its exit is observed without reaping it,
//! so the group id stays reserved until every member is killed; then the leader is reaped.
//!
//! Why not reap at once: a process group id is the pid of its leader. While the leader is an
//! unreaped zombie, the kernel cannot hand that number to a new process, so `killpg` can never
//! hit an unrelated group. The watcher therefore waits with `WNOWAIT` (on Linux, Android and
//! FreeBSD; elsewhere it reaps, a small window documented here), and reaping happens only
//! in [`Leader::kill_group_and_reap`], after the group's last signal.
//!
//! When the leader exits, the watcher kills what is left of its group at once: the server is
//! gone, its helpers are orphans, and one of them holding the stdout pipe open would otherwise
//! hide the server's death from the client (no end of file) until shutdown.
//!
//! The watcher is a plain thread, not a runtime task, so a session outlives neither its
//! runtime's shutdown nor blocks it.
//!
//! On Linux the group is not the whole story: the leader is the server's supervisor, spawned
//! by [`crate::spawner`] (the server is its child, in its group; both die with the host, and
//! so does everything the server started), and every kill also freezes and kills the
//! supervisor's process tree ([`crate::tree`]), which finds what left the group with
//! `setsid`; [`Leader::note_tree`] remembers the tree before steps that may end the leader
//! (whose exit cuts the links). The leader's exit status is the server's (the supervisor
//! mirrors it).

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::watch;

use crate::child::Supervised;
use crate::plan::Plan;

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// It exited with this status.
    Code(i32),
    /// A signal killed it.
    Signal(Signal),
    /// It is gone, but how it ended is not known.
    Unknown,
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Code(code) => write!(f, "exited with status {code}"),
            Self::Signal(signal) => write!(f, "was killed by {signal}"),
            Self::Unknown => f.write_str("exited"),
        }
    }
}

/// The pipes of a spawned child, ready for Tokio.
pub(crate) struct Pipes {
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: ChildStdout,
    pub(crate) stderr: ChildStderr,
}

/// A child process that leads its own process group.
pub(crate) struct Leader {
    pid: Pid,
    /// `None` once reaped (or, where `WNOWAIT` is missing, owned by the watcher). Whoever
    /// signals the group after the leader may have exited holds this lock, so the leader
    /// cannot be reaped (and its group id freed) in between.
    child: Arc<Mutex<Option<Supervised>>>,
    exit: watch::Receiver<Option<Exit>>,
    /// Set once the group was killed for good and the leader reaped or handed to a reaper.
    finished: AtomicBool,
    /// The leader, told apart from a later process with its pid.
    #[cfg(target_os = "linux")]
    root: Option<crate::tree::Member>,
    /// Processes of the leader's tree seen by [`Leader::note_tree`], killed with the group.
    #[cfg(target_os = "linux")]
    noted: Arc<Mutex<Vec<crate::tree::Member>>>,
    /// Set by the watcher once it killed the tree after the leader ended: nothing of it can
    /// have appeared since, and nothing is noted once it is set, so it is not read again.
    #[cfg(target_os = "linux")]
    tree_killed: Arc<AtomicBool>,
}

impl fmt::Debug for Leader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leader")
            .field("pid", &self.pid)
            .field("exit", &*self.exit.borrow())
            .finish_non_exhaustive()
    }
}

impl Leader {
    /// Spawns `program`, set up by `setup` (arguments, environment, directory), as the leader
    /// of a new process group, with piped stdio (on Linux, under a supervisor, on a blocking
    /// thread: see [`crate::spawner`]). Must run inside a Tokio runtime (the pipes register
    /// with its reactor).
    pub(crate) async fn spawn(plan: Plan) -> std::io::Result<(Self, Pipes)> {
        #[cfg(target_os = "linux")]
        let mut child = crate::spawner::spawn(plan).await?;
        #[cfg(not(target_os = "linux"))]
        let mut child = Supervised::from({
            use std::os::unix::process::CommandExt as _;

            let mut command = std::process::Command::new(&plan.program);
            plan.configure(&mut command);
            command
                .process_group(0)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            command.spawn()?
        });
        let pid = Pid::from_raw(i32::try_from(child.id()).map_err(std::io::Error::other)?);
        let (stdin, stdout, stderr) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (tx, exit) = watch::channel(None);
        let leader = Self {
            pid,
            child: Arc::new(Mutex::new(Some(child))),
            exit,
            finished: AtomicBool::new(false),
            // Unreaped (its exit is observed with WNOWAIT), so its stat is still there.
            #[cfg(target_os = "linux")]
            root: crate::tree::Member::of(pid.as_raw()),
            #[cfg(target_os = "linux")]
            noted: Arc::default(),
            #[cfg(target_os = "linux")]
            tree_killed: Arc::default(),
        };
        // From here on, an early return drops `leader`, which kills the group.
        leader.start_watcher(tx)?;
        let missing = || std::io::Error::other("a pipe of the child is missing");
        let pipes = Pipes {
            stdin: ChildStdin::from_std(stdin.ok_or_else(missing)?)?,
            stdout: ChildStdout::from_std(stdout.ok_or_else(missing)?)?,
            stderr: ChildStderr::from_std(stderr.ok_or_else(missing)?)?,
        };
        Ok((leader, pipes))
    }

    /// The leader's pid, which is also the group id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid.as_raw().unsigned_abs()
    }

    /// How the leader ended, once it has.
    pub(crate) fn exit(&self) -> Option<Exit> {
        *self.exit.borrow()
    }

    /// Waits up to `timeout` for the leader to end.
    pub(crate) async fn wait_exit(&self, timeout: Duration) -> Option<Exit> {
        let mut exit = self.exit.clone();
        match tokio::time::timeout(timeout, exit.wait_for(Option::is_some)).await {
            Ok(Ok(status)) => *status,
            // The watcher always reports before it ends; a closed channel means it could not.
            Ok(Err(_)) | Err(_) => self.exit(),
        }
    }

    /// Remembers the processes of the leader's tree as they are now, so they are killed with
    /// the group even if the leader exits first (its children then lose their link to it).
    /// Call before a step that may end the leader. Linux only; elsewhere a no-op.
    pub(crate) fn note_tree(&self) {
        // Once the leader has exited, its children went to init already: nothing to learn.
        #[cfg(target_os = "linux")]
        if !self.finished.load(Ordering::Acquire)
            && !self.tree_killed.load(Ordering::Acquire)
            && self.exit().is_none()
        {
            let roots = self.roots();
            let now = crate::tree::note(&roots);
            crate::tree::merge(
                &mut self.noted.lock().unwrap_or_else(PoisonError::into_inner),
                now,
            );
        }
    }

    /// The leader and what was noted of its tree.
    #[cfg(target_os = "linux")]
    fn roots(&self) -> Vec<crate::tree::Member> {
        roots(self.root, &self.noted)
    }

    /// Sends `signal` to every process of the group, unless it was already finished.
    pub(crate) fn signal_group(&self, signal: Signal) {
        // Under the lock, so the leader cannot be reaped (freeing the group id) meanwhile.
        let _unreaped = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        if self.finished.load(Ordering::Acquire) {
            return;
        }
        match killpg(self.pid, signal) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => {
                tracing::warn!(pgid = %self.pid, %signal, "cannot signal the process group: {e}")
            }
        }
    }

    /// Kills every process left in the group (on Linux, first the whole tree: a few reads of
    /// `/proc`) and reaps the leader: at once if it has ended, otherwise on a reaper thread as
    /// soon as SIGKILL takes effect. Idempotent; never waits for a process.
    pub(crate) fn kill_group_and_reap(&self) {
        if self.finished.swap(true, Ordering::AcqRel) {
            return;
        }
        let child = {
            let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
            // What left the group first, frozen so that nothing forks away meanwhile.
            #[cfg(target_os = "linux")]
            if !self.tree_killed.load(Ordering::Acquire) {
                crate::tree::kill_tree(&self.roots());
            }
            match killpg(self.pid, Signal::SIGKILL) {
                Ok(()) | Err(Errno::ESRCH) => {}
                Err(e) => tracing::warn!(pgid = %self.pid, "cannot kill the process group: {e}"),
            }
            child.take()
        };
        let Some(mut child) = child else { return };
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        let reaper = std::thread::Builder::new()
            .name(format!("mcp-stdio-reap-{}", self.pid))
            .stack_size(64 * 1024)
            .spawn(move || {
                let _ = child.wait();
            });
        if let Err(e) = reaper {
            tracing::warn!(pid = %self.pid, "cannot start a reaper thread: {e}");
        }
    }

    fn start_watcher(&self, tx: watch::Sender<Option<Exit>>) -> std::io::Result<()> {
        let pid = self.pid;
        #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
        let child = self.child.clone();
        #[cfg(target_os = "linux")]
        let (root, noted, tree_killed) = (self.root, self.noted.clone(), self.tree_killed.clone());
        #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
        let mut child = self
            .child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        std::thread::Builder::new()
            .name(format!("mcp-stdio-wait-{pid}"))
            .stack_size(64 * 1024)
            .spawn(move || {
                #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
                let exit = {
                    let exit = wait_without_reaping(pid);
                    // Still unreaped (checked under the lock): the group id is still ours.
                    let unreaped = child.lock().unwrap_or_else(PoisonError::into_inner);
                    if unreaped.is_some() {
                        // What it left: its group, and what was noted of its tree (its own
                        // children went to init at its exit, so only notes still find them).
                        #[cfg(target_os = "linux")]
                        {
                            crate::tree::kill_tree(&roots(root, &noted));
                            tree_killed.store(true, Ordering::Release);
                        }
                        let _ = killpg(pid, Signal::SIGKILL);
                    }
                    exit
                };
                #[cfg(not(any(
                    target_os = "linux",
                    target_os = "android",
                    target_os = "freebsd"
                )))]
                let exit = wait_and_reap(child.as_mut());
                let _ = tx.send(Some(exit));
            })
            .map(drop)
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        self.kill_group_and_reap();
    }
}

/// `root` and what `noted` holds.
#[cfg(target_os = "linux")]
fn roots(
    root: Option<crate::tree::Member>,
    noted: &Mutex<Vec<crate::tree::Member>>,
) -> Vec<crate::tree::Member> {
    let mut roots: Vec<_> = root.into_iter().collect();
    roots.extend(noted.lock().unwrap_or_else(PoisonError::into_inner).iter());
    roots
}

/// Blocks until `pid` ends, leaving it a zombie (so its group id stays reserved).
#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
fn wait_without_reaping(pid: Pid) -> Exit {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};

    loop {
        match waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
            Ok(WaitStatus::Exited(_, code)) => return Exit::Code(code),
            Ok(WaitStatus::Signaled(_, signal, _)) => return Exit::Signal(signal),
            Ok(_) | Err(Errno::EINTR) => continue,
            // ECHILD: already reaped by `kill_group_and_reap`.
            Err(_) => return Exit::Unknown,
        }
    }
}

/// Blocks until the child ends, reaping it (platforms without `WNOWAIT` for one pid).
#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
fn wait_and_reap(child: Option<&mut Supervised>) -> Exit {
    use std::os::unix::process::ExitStatusExt as _;

    let Some(child) = child else {
        return Exit::Unknown;
    };
    match child.wait() {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Signal::try_from(signal).map_or(Exit::Unknown, Exit::Signal),
            (None, None) => Exit::Unknown,
        },
        Err(_) => Exit::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `true` while `pid` is a process that has not been reaped (a zombie counts).
    fn exists(pid: u32) -> bool {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    }

    #[tokio::test]
    async fn exit_is_seen_and_the_leader_reaped() {
        let (leader, _pipes) = Leader::spawn(Plan::new("sh").args(["-c", "exit 7"]))
            .await
            .unwrap();
        let pid = leader.pid();
        assert_eq!(
            leader.wait_exit(Duration::from_secs(10)).await,
            Some(Exit::Code(7))
        );
        if cfg!(target_os = "linux") {
            assert!(
                exists(pid),
                "the leader was reaped before its group was killed"
            );
        }
        leader.kill_group_and_reap();
        assert!(!exists(pid), "the leader was not reaped");
    }

    #[tokio::test]
    async fn drop_kills_the_group() {
        let (leader, _pipes) = Leader::spawn(Plan::new("sleep").args(["600"]))
            .await
            .unwrap();
        let mut exit = leader.exit.clone();
        drop(leader);
        let status = tokio::time::timeout(Duration::from_secs(10), exit.wait_for(Option::is_some))
            .await
            .expect("the child outlived the drop")
            .map(|s| *s)
            .unwrap_or(Some(Exit::Unknown));
        assert!(
            matches!(status, Some(Exit::Signal(Signal::SIGKILL) | Exit::Unknown)),
            "{status:?}"
        );
    }
}
