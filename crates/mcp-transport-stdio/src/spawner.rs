//! Linux: every server is started under its supervisor, on a blocking thread of the runtime,
//! so that servers start concurrently and no runtime worker waits for a spawn.
//!
//! With glibc, the supervisor is cloned by the zygote ([`crate::zygote`]) as the host's child;
//! where that does not work, it is the host's own executable started anew
//! ([`crate::reexec`]): a `posix_spawn`, whose cost does not grow with the host's memory
//! either. Elsewhere, or when neither works in this process, the host forks and the child
//! becomes the supervisor through a pre-exec hook ([`crate::supervisor`]). Every way the
//! supervisor asks for a signal at its parent's death (a clone's parent is the thread that
//! started the zygote). The kernel sends that signal when the *thread* that spawned the child
//! exits, and again at every later change of parent: while the host lives, the child goes to
//! another of the host's threads (the supervisor sees the same parent process and goes on);
//! when the host's last thread is gone, however the host died, it goes to a subreaper or init,
//! and the supervisor ends the server. So any thread may spawn: a blocking-pool thread that
//! ends after 10 s idle costs the supervisor one spurious wake-up, nothing more.
//!
//! A fork never runs on the main thread, though: the forked supervisor keeps, of the host's
//! anonymous memory, only the mapping that holds the forking thread's stack, which for a
//! spawned thread also holds its thread control block ([`fork`] moves a call from the main
//! thread to a thread of its own).
//!
//! The pre-exec hook is one of this crate's `unsafe` blocks; see its safety comment.

use std::ffi::OsStr;
use std::process::{Child, Command, Stdio};

use crate::child::Supervised;
use crate::plan::Plan;

/// Spawns `plan`'s server under a supervisor, on a blocking thread of the current Tokio
/// runtime, with piped stdio and a process group of its own (the supervisor leads it; the
/// server is in it): the [`Supervised`] child is the supervisor. Spawns run concurrently. If
/// the caller is gone by the time the spawn is done (its open timed out), the new process
/// group is killed.
pub(crate) async fn spawn(plan: Plan) -> std::io::Result<Supervised> {
    let (reply, answer) = tokio::sync::oneshot::channel();
    tokio::task::spawn_blocking(move || {
        // Unsent or unread, the answer is dropped, and the guard in it kills the child.
        let _ = reply.send(start(&plan).map(Unclaimed::new));
    });
    match answer.await {
        Ok(spawned) => spawned.map(Unclaimed::claim),
        Err(_) => Err(std::io::Error::other(
            "the runtime ended the spawn before it was done",
        )),
    }
}

/// What every supervisor gets besides the plan: piped stdio and a process group of its own.
fn configure(plan: &Plan, command: &mut Command) {
    use std::os::unix::process::CommandExt as _;

    plan.configure(command);
    command
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
}

/// Spawns under a supervisor from the calling thread: one the zygote clones where that works
/// ([`crate::zygote`]), else one started anew, else a fork. Blocks until the supervisor has
/// found the server's program (or the fork and the exec are done).
fn start(plan: &Plan) -> std::io::Result<Supervised> {
    let setup = |command: &mut Command| configure(plan, command);
    #[cfg(target_env = "gnu")]
    if crate::entry::usable() {
        if crate::zygote::usable() {
            match crate::zygote::spawn(plan) {
                Ok(child) => return Ok(child),
                Err(crate::startup::Failure::Server(e)) => return Err(e),
                Err(failure) => crate::zygote::failed(&failure),
            }
        }
        match reexecute(&plan.program, &setup) {
            Ok(child) => return Ok(child.into()),
            Err(crate::startup::Failure::Server(e)) => return Err(e),
            Err(crate::startup::Failure::NotASupervisor(e)) => {
                tracing::warn!(
                    error = %e,
                    "stdio servers: this executable does not start as a supervisor; forking instead"
                );
                crate::entry::give_up();
            }
            // The server's directory, a resource limit, or the executable: the fork tells.
            Err(crate::startup::Failure::Spawn(e)) => {
                let forked = fork(&plan.program, &setup)?;
                tracing::warn!(
                    error = %e,
                    "stdio servers: this executable cannot be started anew; forking instead"
                );
                crate::entry::give_up();
                return Ok(forked.into());
            }
        }
    }
    fork(&plan.program, &setup).map(Supervised::from)
}

/// Spawns under a supervisor that is this executable started anew ([`crate::reexec`]).
#[cfg(target_env = "gnu")]
fn reexecute(
    program: &OsStr,
    setup: &dyn Fn(&mut Command),
) -> Result<Child, crate::startup::Failure> {
    let mut command = crate::reexec::command(program);
    setup(&mut command);
    crate::reexec::spawn(command)
}

/// A spawned supervisor nobody has claimed yet: dropped unclaimed, it is killed with its
/// group (the server is in it) and reaped.
struct Unclaimed(Option<Supervised>);

impl Unclaimed {
    fn new(child: Supervised) -> Self {
        Self(Some(child))
    }

    fn claim(mut self) -> Supervised {
        self.0.take().expect("claimed once")
    }
}

impl Drop for Unclaimed {
    fn drop(&mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Spawns under a supervisor forked from the calling thread (from a thread of its own when
/// called on the main thread, see the [module docs](self)). Blocks for as long as the forks
/// and the exec take.
fn fork(program: &OsStr, setup: &dyn Fn(&mut Command)) -> std::io::Result<Child> {
    let mut command = Command::new(program);
    setup(&mut command);
    arm(&mut command);
    if nix::unistd::gettid() == nix::unistd::getpid() {
        return std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("mcp-stdio-spawn".into())
                .stack_size(256 * 1024)
                .spawn_scoped(scope, || command.spawn())?
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the spawning thread panicked")))
        });
    }
    command.spawn()
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
        command.pre_exec(move || crate::supervisor::split(host, crate::supervisor::WAKE, true));
    }
}

#[cfg(test)]
mod tests {
    use std::io::BufRead as _;
    use std::process::Stdio;
    use std::sync::mpsc;
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

    /// The ways a supervisor is started, each tested.
    #[derive(Debug, Clone, Copy)]
    enum How {
        Zygote,
        Reexec,
        Fork,
    }

    const EVERY: [How; 3] = [How::Zygote, How::Reexec, How::Fork];

    /// Spawns `plan` under a supervisor started `how`, with piped stdio.
    fn supervised(how: How, plan: &Plan) -> Supervised {
        let setup = |command: &mut Command| configure(plan, command);
        match how {
            How::Zygote => crate::zygote::spawn(plan)
                .unwrap_or_else(|e| panic!("spawn of {:?} by the zygote: {e:?}", plan.program)),
            How::Reexec => reexecute(&plan.program, &setup)
                .unwrap_or_else(|e| panic!("re-executed spawn of {:?}: {e:?}", plan.program))
                .into(),
            How::Fork => fork(&plan.program, &setup).unwrap().into(),
        }
    }

    /// `sh -c script`.
    fn sh(script: &str) -> Plan {
        Plan::new("sh").args(["-c", script])
    }

    /// Starts `sh -c script` under a supervisor; returns it and the pid the script prints first.
    fn printing_a_pid(how: How, script: &str) -> (Supervised, u32) {
        let mut child = supervised(how, &sh(script));
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        (child, line.trim().parse().unwrap())
    }

    #[test]
    fn an_orphan_of_the_server_is_re_parented_to_the_supervisor() {
        for how in EVERY {
            an_orphan_is_re_parented(how);
        }
    }

    fn an_orphan_is_re_parented(how: How) {
        // The subshell starts a sleep, prints its pid and exits: the sleep is orphaned.
        let (mut child, orphan) = printing_a_pid(how, "(sleep 600 & echo $!); exec sleep 600");

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
        assert_eq!(
            parent,
            Some(child.id()),
            "{how:?}: the orphan went elsewhere"
        );
    }

    /// The pending-signal masks (`SigPnd`, `ShdPnd`) of `pid`, from `/proc`.
    fn pending(pid: u32) -> Option<(u64, u64)> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let mask = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        };
        Some((mask("SigPnd:")?, mask("ShdPnd:")?))
    }

    #[test]
    fn a_server_outlives_the_thread_that_spawned_it() {
        for how in EVERY {
            outlives_its_spawning_thread(how);
        }
    }

    fn outlives_its_spawning_thread(how: How) {
        // `cat` echoes each line: the server answers as long as it runs.
        let forker = std::thread::spawn(move || {
            let child = supervised(how, &Plan::new("cat"));
            (nix::unistd::gettid(), child)
        });
        let (tid, mut child) = forker.join().unwrap();
        // Gone from the task list: the thread has fully exited, so the parent-death signal
        // tied to it has been sent; the supervisor has taken it once nothing is pending.
        let task = format!("/proc/self/task/{tid}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while (std::path::Path::new(&task).exists() || pending(child.id()) != Some((0, 0)))
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            pending(child.id()),
            Some((0, 0)),
            "{how:?}: the wake-up was not taken"
        );

        let mut stdin = child.stdin.take().unwrap();
        std::io::Write::write_all(&mut stdin, b"alive\n").unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let running = child.try_wait().unwrap().is_none();
        drop(stdin);
        let status = child.wait().unwrap();
        assert_eq!(line, "alive\n", "{how:?}: the server was gone");
        assert!(running, "{how:?}: the supervisor ended");
        assert!(status.success(), "{status:?}");
    }

    #[test]
    fn an_unclaimed_spawn_is_killed_with_its_server() {
        for how in EVERY {
            unclaimed_is_killed(how);
        }
    }

    fn unclaimed_is_killed(how: How) {
        let (child, server) = printing_a_pid(how, "echo $$; exec sleep 600");
        let server = i32::try_from(server).unwrap();
        let supervisor = child.id();
        drop(Unclaimed::new(child));
        assert!(
            !std::path::Path::new(&format!("/proc/{supervisor}")).exists(),
            "{how:?}: the supervisor was not reaped"
        );
        // Killed by the group's SIGKILL; its reaper (init or a subreaper) may take a moment.
        let deadline = Instant::now() + Duration::from_secs(10);
        let alive = || {
            std::fs::read_to_string(format!("/proc/{server}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')')
                        .map(|(_, rest)| rest.trim_start().starts_with('Z'))
                })
                .is_some_and(|zombie| !zombie)
        };
        while alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let survived = alive();
        let _ = nix::sys::signal::kill(Pid::from_raw(server), Signal::SIGKILL);
        assert!(
            !survived,
            "{how:?}: the server outlived its unclaimed spawn"
        );
    }

    #[test]
    fn the_supervisor_exits_as_its_server_did() {
        use std::os::unix::process::ExitStatusExt as _;

        for how in EVERY {
            let status = |script: &str| supervised(how, &sh(script)).wait().unwrap();
            assert_eq!(status("exit 7").code(), Some(7), "{how:?}");
            let killed = status("kill -USR1 $$");
            assert_eq!(
                killed.signal(),
                Some(nix::libc::SIGUSR1),
                "{how:?}: {killed:?}"
            );
            assert!(!killed.core_dumped(), "{how:?}");
        }
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
        // A first spawn starts what every later one reuses (the zygote), so that the
        // supervisor below is the next process made.
        start(&Plan::new("true")).unwrap().wait().unwrap();
        next_pid(q);
        let mut bystander = Command::new("sleep").arg("600").spawn().unwrap();
        assert_eq!(bystander.id(), q);
        next_pid(p);
        let mut server = start(&sh("(sleep 600 &); read line; exit 7")).unwrap();
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
        let mut child = supervised(How::Fork, &Plan::new("sleep").args(["600"]));
        for byte in heap.iter_mut().step_by(4096) {
            *byte = 2;
        }
        std::hint::black_box(&heap);
        let kept = private_dirty_kb(child.id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(kept < 8 << 10, "the supervisor keeps {kept} kB of its own");
    }

    #[test]
    fn a_missing_program_fails_the_re_executed_spawn_as_a_direct_one() {
        for program in ["mcp-agent-no-such-program", "/no/such/program"] {
            let direct = Command::new(program).spawn().unwrap_err();
            let failure = reexecute(program.as_ref(), &|c| {
                c.stdout(Stdio::piped());
            })
            .unwrap_err();
            let crate::startup::Failure::Server(error) = failure else {
                panic!("{program}: not the server's failure: {failure:?}");
            };
            assert_eq!(error.kind(), direct.kind(), "{program}: {error}");
            assert_eq!(error.raw_os_error(), direct.raw_os_error(), "{program}");
        }
    }

    #[test]
    fn a_re_executed_supervisor_is_named_and_keeps_the_servers_loader_variables_out() {
        let script = "echo \"$LD_MCP_TEST|$MCP_AGENT_SUPERVISED_LD_MCP_TEST\"; \
                      tr '\\0' '\\n' < /proc/$PPID/environ | grep -c '^LD_MCP_TEST=' || true; \
                      tr '\\0' ' ' < /proc/$PPID/cmdline; echo";
        let mut plan = sh(script);
        plan.env
            .vars
            .push(("LD_MCP_TEST".into(), "for the server".into()));
        let mut child = supervised(How::Reexec, &plan);
        let mut out = String::new();
        std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
        let status = child.wait().unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.first(), Some(&"for the server|"), "{out}");
        assert_eq!(lines.get(1), Some(&"0"), "the supervisor had it: {out}");
        let host = std::process::id().to_string();
        let cmdline = format!("{} {host} sh -c ", crate::startup::NAME);
        assert!(
            lines.get(2).is_some_and(|l| l.starts_with(&cmdline)),
            "{out}"
        );
        assert!(status.success(), "{status:?}");
    }

    #[test]
    fn a_file_the_kernel_refuses_ends_the_re_executed_server_with_127_and_a_line() {
        use std::os::unix::fs::PermissionsExt as _;

        let dir = std::env::temp_dir().join(format!("mcp-refused-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("not-a-program");
        // Executable, but neither an ELF file nor a `#!` script: never run under `/bin/sh`.
        std::fs::write(&file, "echo ran-under-sh\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        let program = file.to_str().unwrap().to_owned();
        let mut child = supervised(How::Reexec, &Plan::new(&program));
        let mut out = String::new();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        let status = child.wait().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(status.code(), Some(127), "{status:?}");
        assert!(out.is_empty(), "it ran: {out}");
        assert!(
            err.contains("cannot execute") && err.contains("not-a-program"),
            "{err}"
        );
    }
}
