//! Linux: every server is forked by one lifelong thread, through its supervisor.
//!
//! The forked child becomes the server's supervisor ([`crate::supervisor`]), which asks for a
//! signal at its parent's death. The kernel sends that signal when the *thread* that forked
//! the child exits, not the process: a Tokio blocking-pool thread ends after 10 s idle, and a
//! library user's runtime threads come and go. So every server is forked by one dedicated
//! thread, started on first use and never ended: it lives as long as the process, and the
//! signal fires exactly when the host dies (however it dies).
//!
//! The pre-exec hook is one of this crate's `unsafe` blocks; see its safety comment.

use std::process::{Child, Command};
use std::sync::mpsc::{self, Sender, SyncSender};
use std::sync::{Mutex, PoisonError};

/// One spawn request: the command, and where the spawner answers.
struct Job {
    command: Command,
    reply: SyncSender<std::io::Result<Child>>,
}

/// The spawner thread's queue; `None` until it is started (or after it died).
static SPAWNER: Mutex<Option<Sender<Job>>> = Mutex::new(None);

/// Spawns `command` on the spawner thread, under a supervisor: the [`Child`] is the
/// supervisor, the server its child. Blocks for as long as the forks and the exec take.
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

/// Sets the pre-exec hook: the child becomes the server's supervisor, which forks the server
/// (see [`crate::supervisor`]).
#[allow(unsafe_code)]
fn arm(command: &mut Command) {
    use std::os::unix::process::CommandExt as _;

    let host = nix::unistd::getpid().as_raw();
    // SAFETY: the hook runs in the child after fork, before exec, which is what `split`
    // requires; it captures only a pid (a copied integer). `split` makes only
    // async-signal-safe system calls (see its module).
    unsafe {
        command.pre_exec(move || crate::supervisor::split(host, crate::supervisor::WAKE));
    }
}

#[cfg(test)]
mod tests {
    use std::io::BufRead as _;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    use nix::sys::signal::Signal;
    use nix::unistd::Pid;

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
    fn an_orphan_of_the_server_is_re_parented_to_the_supervisor() {
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

    #[test]
    fn the_supervisor_exits_as_its_server_did() {
        use std::os::unix::process::ExitStatusExt as _;

        let status = |script: &str| {
            let mut command = Command::new("sh");
            command.args(["-c", script]).stdin(Stdio::null());
            spawn(command).unwrap().wait().unwrap()
        };
        assert_eq!(status("exit 7").code(), Some(7));
        let killed = status("kill -USR1 $$");
        assert_eq!(killed.signal(), Some(nix::libc::SIGUSR1), "{killed:?}");
        assert!(!killed.core_dumped());
    }

    /// Set in the environment of [`host_in_a_foreign_proc`], run in a pid namespace of its own:
    /// `P Q`, an outer process and its child.
    const FOREIGN_PROC_HOST: &str = "MCP_STDIO_TEST_FOREIGN_PROC_HOST";

    /// Makes `pid` the next pid of this pid namespace (needs its `CAP_SYS_ADMIN`).
    fn next_pid(pid: u32) {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).unwrap();
    }

    /// The host of [`a_supervisor_under_a_foreign_proc_kills_nothing_else_and_ends`], pid 1 of
    /// a pid namespace whose `/proc` is the outer one's, where numbers name other processes.
    /// Given an outer process `P` and its child `Q`, it starts a bystander as `Q` and its
    /// server's supervisor as `P`: the outer `/proc` shows `Q` as the supervisor's child. The
    /// server exits leaving an orphan. Prints the server's exit code and whether the bystander
    /// still runs.
    #[test]
    #[ignore = "run by a_supervisor_under_a_foreign_proc_kills_nothing_else_and_ends"]
    fn host_in_a_foreign_proc() {
        let Some(pids) = std::env::var(FOREIGN_PROC_HOST).ok() else {
            return;
        };
        let (p, q) = pids.split_once(' ').unwrap();
        let (p, q): (u32, u32) = (p.parse().unwrap(), q.parse().unwrap());
        // The spawner thread first: a thread takes a pid too.
        spawn(Command::new("true")).unwrap().wait().unwrap();
        next_pid(q);
        let mut bystander = Command::new("sleep").arg("600").spawn().unwrap();
        assert_eq!(bystander.id(), q);
        next_pid(p);
        let mut command = Command::new("sh");
        command
            .args(["-c", "(sleep 600 &); read line; exit 7"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null());
        let mut server = spawn(command).unwrap();
        assert_eq!(server.id(), p);
        drop(server.stdin.take());
        let code = server.wait().unwrap().code();
        let runs = bystander.try_wait().unwrap().is_none();
        println!("RESULT code={code:?} bystander_runs={runs}");
    }

    #[test]
    fn a_supervisor_under_a_foreign_proc_kills_nothing_else_and_ends() {
        let usable = Command::new("unshare")
            .args(["-Urpf", "sh", "-c", "echo 1 >/proc/sys/kernel/ns_last_pid"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !usable {
            eprintln!("note: skipping: `unshare -Urpf` (a user and pid namespace) is not allowed");
            return;
        }
        // An outer process P with a child Q.
        let mut decoy = Command::new("sh")
            .args(["-c", "sleep 600 & echo $!; exec sleep 600"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(decoy.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let decoy_child: i32 = line.trim().parse().unwrap();
        let mut host = Command::new("unshare")
            .arg("-Urpf")
            .arg(std::env::current_exe().unwrap())
            .args([
                "spawner::tests::host_in_a_foreign_proc",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env(FOREIGN_PROC_HOST, format!("{} {decoy_child}", decoy.id()))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = host.stdout.take().unwrap();
        let (result, said) = mpsc::channel();
        std::thread::spawn(move || {
            let found = std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .find_map(|l| l.strip_prefix("RESULT ").map(str::to_owned));
            let _ = result.send(found);
        });
        // A failure bound only: the host answers as soon as its server's supervisor ends.
        let answer = said.recv_timeout(Duration::from_secs(60));
        // Ending the namespace's first process ends every process in it.
        let _ = host.kill();
        let _ = host.wait();
        let _ = nix::sys::signal::kill(Pid::from_raw(decoy_child), Signal::SIGKILL);
        let _ = decoy.kill();
        let _ = decoy.wait();
        let answer = answer.expect("the supervisor did not end within 60 s");
        assert_eq!(
            answer.as_deref(),
            Some("code=Some(7) bystander_runs=true"),
            "the host printed no result"
        );
    }

    /// `Private_Dirty` of `pid`, in kB.
    fn private_dirty_kb(pid: u32) -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("Private_Dirty:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    #[test]
    fn a_supervisor_keeps_no_copy_of_what_the_host_rewrites() {
        // Resident in the host before the spawn, rewritten after: without the release, the
        // supervisor would keep the old 32 MiB as its own.
        let mut heap = vec![1u8; 32 << 20];
        let mut command = Command::new("sleep");
        command.arg("600").stdin(Stdio::null());
        let mut child = spawn(command).unwrap();
        for byte in heap.iter_mut().step_by(4096) {
            *byte = 2;
        }
        std::hint::black_box(&heap);
        let kept = private_dirty_kb(child.id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(kept < 8 << 10, "the supervisor keeps {kept} kB of its own");
    }
}
