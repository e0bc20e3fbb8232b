//! Linux: servers die with the host, even when the host is SIGKILLed.
//!
//! Each server is started with `PR_SET_PDEATHSIG = SIGKILL`, set in the child between fork and
//! exec. The kernel sends that signal when the *thread* that forked the child exits, not the
//! process: a Tokio blocking-pool thread ends after 10 s idle, and a library user's runtime
//! threads come and go. So every server is forked by one dedicated thread, started on first
//! use and never ended: it lives as long as the process, and the signal fires exactly when the
//! host dies (however it dies).
//!
//! The child also becomes a child subreaper (`PR_SET_CHILD_SUBREAPER`, kept across exec): a
//! process of the server's that double-forks to escape (a daemon whose middle process exits)
//! is re-parented to the server instead of to init, so it stays in the server's tree where
//! [`crate::tree`] finds it at close. The cost to the server: it may inherit such orphans as
//! children (zombies it did not start, until it exits).
//!
//! The pre-exec hook is this crate's one `unsafe` block; see its safety comment.

use std::process::{Child, Command};
use std::sync::mpsc::{self, Sender, SyncSender};
use std::sync::{Mutex, PoisonError};

use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

/// One spawn request: the command, and where the spawner answers.
struct Job {
    command: Command,
    reply: SyncSender<std::io::Result<Child>>,
}

/// The spawner thread's queue; `None` until it is started (or after it died).
static SPAWNER: Mutex<Option<Sender<Job>>> = Mutex::new(None);

/// Spawns `command` on the spawner thread, with the parent-death signal and the subreaper
/// attribute set in the child. Blocks for as long as the fork and exec take.
pub(crate) fn spawn(mut command: Command) -> std::io::Result<Child> {
    arm(&mut command);
    let (reply, answer) = mpsc::sync_channel(1);
    let mut job = Job { command, reply };
    // A second attempt only if the thread died between two spawns (it does not panic, but a
    // failed answer must not lose the spawn).
    for _ in 0..2 {
        let sender = {
            let mut spawner = SPAWNER.lock().unwrap_or_else(PoisonError::into_inner);
            match &*spawner {
                Some(sender) => sender.clone(),
                None => spawner.insert(start()?).clone(),
            }
        };
        match sender.send(job) {
            Ok(()) => {
                return answer
                    .recv()
                    .map_err(|_| std::io::Error::other("the process spawner thread ended"))?;
            }
            Err(mpsc::SendError(returned)) => {
                job = returned;
                SPAWNER
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
            }
        }
    }
    Err(std::io::Error::other("the process spawner thread ended"))
}

/// Starts the spawner thread. It is never joined: it waits for jobs as long as the process
/// lives (the queue's sender is in a static).
fn start() -> std::io::Result<Sender<Job>> {
    let (jobs, queue) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("mcp-stdio-spawner".into())
        .stack_size(256 * 1024)
        .spawn(move || {
            while let Ok(Job { mut command, reply }) = queue.recv() {
                let spawned = command.spawn();
                // The caller blocks on the answer; should it be gone, the child is not leaked.
                if let Err(mpsc::SendError(Ok(mut child))) = reply.send(spawned) {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        })?;
    Ok(jobs)
}

/// Sets the pre-exec hook: parent-death signal, subreaper attribute, and the check that the
/// host did not die before the signal was armed.
#[allow(unsafe_code)]
fn arm(command: &mut Command) {
    use std::os::unix::process::CommandExt as _;

    let host = Pid::this();
    // SAFETY: the hook runs in the child after fork, before exec, where only async-signal-safe
    // work is allowed (another thread of the parent may have held the allocator's lock at the
    // fork). It makes three plain system calls — prctl(PR_SET_PDEATHSIG), prctl
    // (PR_SET_CHILD_SUBREAPER) and getppid — through nix's thin wrappers, which neither
    // allocate nor lock; its errors are `Errno` values turned into `io::Error` from the raw
    // code, which does not allocate either. It captures only a `Pid` (a copied integer).
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            nix::sys::prctl::set_child_subreaper(true)?;
            // The host died after the fork but before the signal was armed: the child was
            // re-parented already and would never get it. Give up; exec does not happen.
            if nix::unistd::getppid() != host {
                return Err(Errno::ESRCH.into());
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use std::io::BufRead as _;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    use super::*;

    fn parent_of(pid: u32) -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    }

    #[test]
    fn an_orphan_of_the_child_is_re_parented_to_the_child() {
        // The subshell starts a sleep, prints its pid and exits: the sleep is orphaned.
        let mut command = Command::new("sh");
        command
            .args(["-c", "(sleep 600 & echo $!); exec sleep 600"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        let mut child = spawn(command).unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let orphan: u32 = line.trim().parse().unwrap();

        let deadline = Instant::now() + Duration::from_secs(10);
        while parent_of(orphan) != Some(child.id()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let parent = parent_of(orphan);
        let _ = nix::sys::signal::kill(
            Pid::from_raw(i32::try_from(orphan).unwrap()),
            Signal::SIGKILL,
        );
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(parent, Some(child.id()), "the orphan went elsewhere");
    }

    #[test]
    fn every_spawn_runs_on_the_one_spawner_thread() {
        let threads = || {
            std::fs::read_dir("/proc/self/task")
                .unwrap()
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .filter(|name| name.trim() == "mcp-stdio-spawn")
                .count()
        };
        for _ in 0..3 {
            let handle = std::thread::spawn(|| spawn(Command::new("true")).unwrap().wait());
            assert!(handle.join().unwrap().unwrap().success());
        }
        // Thread names are cut to 15 bytes in `comm`.
        assert_eq!(threads(), 1);
    }
}
