//! Linux with glibc: one helper process per host that starts every server's supervisor, so
//! that the host's executable is loaded once, not once per server.
//!
//! A supervisor started anew ([`crate::reexec`]) loads the host's executable: on a 2-core
//! machine that is about 1.8 ms for a 190 MB test binary (its relocations, its page faults,
//! its exit), paid by every server of every open. Instead the host starts the zygote once —
//! its own executable again, as `mcp-agent-supervisor host-pid` (a supervisor's name with no
//! program), caught before `main` — and sends it one
//! request per server over a socket: the program, its arguments, environment and directory,
//! and the three pipe ends the server gets as stdin, stdout and stderr. The zygote clones
//! itself with `CLONE_PARENT` for each request: the clone is a child of the *host*, not of the
//! zygote, exactly as a supervisor the host spawned itself — the host waits for it, reaps it
//! and signals its group the same way ([`crate::process`]). In the clone, the same code as a
//! re-executed supervisor's runs ([`crate::startup::start_server`]): it looks the program up,
//! writes a record on its stdout, forks the server and supervises it. Cloning a small
//! single-threaded process costs a fraction of a millisecond and nothing the host holds.
//!
//! The record carries the supervisor's pid: [`crate::startup::MAGIC_WITH_PID`], the error
//! number, the pid. The zygote also answers each request on the socket, in order, with the pid
//! of the clone it made (0 for none), so the host knows whom to reap even when a clone ends
//! before writing its record (killed, say): end of file on the pipe then means that clone
//! ended, and the host reaps it and reports the spawn failed. End of file on the socket means
//! that the zygote ended, and the host starts a new one and asks again, once; then it starts
//! that server's supervisor itself.
//!
//! The zygote ends when the host closes the socket (the host died: it has no other way to
//! end it) and after [`serve::IDLE_MS`] without a request, like the runtime's idle blocking threads; a
//! thread of the host reaps it. It holds nothing of the host's but the socket, and is never
//! a server's ancestor, so its end changes nothing for the servers.

mod request;
pub(crate) mod serve;

use std::io::IoSlice;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use nix::libc;
use nix::sys::socket::{self, AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType};
use nix::unistd::Pid;

use self::request::encode;
use crate::child::Supervised;
use crate::plan::Plan;
use crate::startup::{Failure, MAGIC_WITH_PID as MAGIC, RECORD_WITH_PID as RECORD};

/// Set when the zygote did not work in this process: servers' supervisors are then started
/// one by one.
static BROKEN: AtomicBool = AtomicBool::new(false);

/// Whether servers are started through the zygote: on the architectures whose raw `clone`
/// takes its arguments in the order the zygote passes them, until it failed here.
pub(crate) fn usable() -> bool {
    cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) && !BROKEN.load(Ordering::Relaxed)
}

/// Notes a failed [`spawn`]: one that any request would meet turns the zygote off for this
/// process; one of this request (too large, a NUL byte) or of the moment (a process, memory
/// or descriptor limit) does not.
pub(crate) fn failed(failure: &Failure) {
    let (Failure::Spawn(e) | Failure::NotASupervisor(e) | Failure::Server(e)) = failure;
    let passing = matches!(
        e.kind(),
        std::io::ErrorKind::InvalidInput | std::io::ErrorKind::Interrupted
    ) || matches!(
        e.raw_os_error(),
        Some(
            libc::E2BIG
                | libc::EMSGSIZE
                | libc::EAGAIN
                | libc::ENOMEM
                | libc::EMFILE
                | libc::ENFILE
        )
    );
    if !passing {
        tracing::debug!(error = %e, "stdio servers: the zygote does not work here; starting supervisors one by one");
        BROKEN.store(true, Ordering::Relaxed);
    }
}

/// The host's zygote, if it has started one.
static ZYGOTE: Mutex<Option<Arc<Zygote>>> = Mutex::new(None);

/// The host's side of a running zygote.
#[derive(Debug)]
struct Zygote {
    /// The socket (a `File` only to be read as one).
    socket: std::fs::File,
    pid: u32,
    /// The process that started it: a fork of that process must not use it (its clones would
    /// be children of the process that started the zygote).
    host: u32,
    /// Cleared by the reaper once the zygote has ended.
    alive: Arc<AtomicBool>,
    /// The zygote as a descriptor (Linux 5.3 on), to signal it without a reused pid's risk.
    pidfd: Option<OwnedFd>,
    /// What the host was when it started the zygote (see [`host_state`]).
    state: Vec<u8>,
    /// How many requests were sent: held while one is sent, so that a request's number is its
    /// place on the socket.
    sent: Mutex<u64>,
    /// The zygote's answers, one per request in the order sent: how many were read, and those
    /// read for another request than the reader's, until it takes them.
    answers: Mutex<Answers>,
}

/// The answers read so far (see [`Zygote::answers`]).
#[derive(Debug, Default)]
struct Answers {
    read: u64,
    unclaimed: std::collections::HashMap<u64, i32>,
}

impl Zygote {
    /// The answer to request number `ticket` (the pid of its clone, 0 for none, see
    /// [`serve::answer`]; end of file: the zygote has gone): read from the socket in turn,
    /// keeping those of other requests for their askers, so that spawns can be asked for back
    /// to back.
    fn answer(&self, ticket: u64) -> std::io::Result<i32> {
        let mut answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(pid) = answers.unclaimed.remove(&ticket) {
                return Ok(pid);
            }
            let mut bytes = [0u8; 4];
            crate::startup::read_record(
                &mut &self.socket,
                &mut bytes,
                crate::startup::RECORD_WAIT_MS,
            )
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::ConnectionReset => std::io::ErrorKind::UnexpectedEof.into(),
                std::io::ErrorKind::TimedOut => {
                    std::io::Error::new(e.kind(), "the zygote did not answer")
                }
                _ => e,
            })?;
            let pid = i32::from_le_bytes(bytes);
            let number = answers.read;
            answers.read += 1;
            if number == ticket {
                return Ok(pid);
            }
            answers.unclaimed.insert(number, pid);
        }
    }
}

impl Zygote {
    /// Ends a zygote that does not answer, so that it clones nothing for requests already sent.
    fn kill(&self) {
        self.alive.store(false, Ordering::Release);
        if let Some(pidfd) = &self.pidfd {
            // SAFETY: `pidfd_send_signal` on a descriptor this process owns; no info struct.
            #[allow(unsafe_code)]
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    pidfd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0u32,
                );
            }
        }
    }
}

/// What a clone takes from the zygote rather than from the host at the spawn: credentials,
/// capabilities, `no_new_privs`, seccomp, umask (the calling thread's `/proc` status) and
/// resource limits. A host that changed any of them since it started the zygote (dropped
/// privileges, entered a sandbox) gets a new zygote, so its servers start as it now is. (Not
/// covered: namespaces, the cgroup, scheduling priority and affinity, which stay the zygote's.)
fn host_state() -> Vec<u8> {
    const KEPT: [&str; 11] = [
        "Umask:",
        "Uid:",
        "Gid:",
        "Groups:",
        "CapInh:",
        "CapPrm:",
        "CapEff:",
        "CapBnd:",
        "CapAmb:",
        "NoNewPrivs:",
        "Seccomp:",
    ];
    let mut state = Vec::with_capacity(1024);
    if let Ok(status) = std::fs::read_to_string("/proc/thread-self/status") {
        for line in status
            .lines()
            .filter(|l| KEPT.iter().any(|k| l.starts_with(k)))
        {
            state.extend_from_slice(line.as_bytes());
            state.push(b'\n');
        }
    }
    // Linux has 16 (`RLIMIT_RTTIME` is the last); later ones, if any, fail and are skipped.
    for resource in 0..16 {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `getrlimit` writes into a local; an unknown resource fails and is skipped.
        #[allow(unsafe_code)]
        if unsafe { libc::getrlimit(resource as _, &mut limit) } == 0 {
            state.extend_from_slice(&limit.rlim_cur.to_le_bytes());
            state.extend_from_slice(&limit.rlim_max.to_le_bytes());
        }
    }
    state
}

/// Starts `plan`'s server under a supervisor the zygote clones (see the [module docs](self)):
/// the child has its pipes; its group is its own (the supervisor leads it).
///
/// # Errors
///
/// [`Failure::Server`] when the program cannot be found or the directory entered (as a
/// direct spawn would fail); [`Failure::Spawn`] when no supervisor could be started this way
/// (the caller starts one itself).
pub(crate) fn spawn(plan: &Plan) -> Result<Supervised, Failure> {
    // The host's directory now, not the zygote's (the one the host had when it started it).
    let here = std::env::current_dir().map_err(|e| {
        Failure::Spawn(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("the host's working directory: {e}"),
        ))
    })?;
    let cwd = plan
        .cwd
        .as_ref()
        .map_or_else(|| here.clone(), |cwd| here.join(cwd));
    let request = encode(plan, &cwd).map_err(Failure::Spawn)?;
    let mut last = None;
    for _ in 0..2 {
        let zygote = current().map_err(Failure::Spawn)?;
        match ask(&zygote, &request) {
            Ok(child) => return Ok(child),
            Err(Asked::Gone(e)) => {
                zygote.alive.store(false, Ordering::Release);
                last = Some(e);
            }
            Err(Asked::Failed(failure)) => return Err(failure),
        }
    }
    Err(Failure::Spawn(last.unwrap_or_else(|| {
        std::io::Error::other("the zygote ended twice")
    })))
}

/// How one request failed.
enum Asked {
    /// The zygote is gone without a clone for the request (it ended before it read the
    /// request, or before it cloned): start another.
    Gone(std::io::Error),
    Failed(Failure),
}

/// Sends `request` with a fresh set of pipes and reads the clone's record.
fn ask(zygote: &Zygote, request: &[u8]) -> Result<Supervised, Asked> {
    let pipe = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC);
    let failed = |e: nix::errno::Errno| Asked::Failed(Failure::Spawn(e.into()));
    let (stdin_read, stdin_write) = pipe().map_err(failed)?;
    let (stdout_read, stdout_write) = pipe().map_err(failed)?;
    let (stderr_read, stderr_write) = pipe().map_err(failed)?;
    let theirs = [
        stdin_read.as_raw_fd(),
        stdout_write.as_raw_fd(),
        stderr_write.as_raw_fd(),
    ];
    let mut count = zygote.sent.lock().unwrap_or_else(PoisonError::into_inner);
    let ticket = *count;
    let sent = socket::sendmsg::<()>(
        zygote.socket.as_raw_fd(),
        &[IoSlice::new(request)],
        &[ControlMessage::ScmRights(&theirs)],
        MsgFlags::MSG_NOSIGNAL,
        None,
    );
    if sent.is_ok() {
        *count += 1;
    }
    drop(count);
    // The zygote holds its own copies now (or nobody does): the pipe ends only once a
    // supervisor that holds them has gone.
    drop((stdin_read, stdout_write, stderr_write));
    match sent {
        Ok(_) => {}
        Err(
            e @ (nix::errno::Errno::EPIPE
            | nix::errno::Errno::ECONNREFUSED
            | nix::errno::Errno::ECONNRESET
            | nix::errno::Errno::ENOTCONN),
        ) => {
            return Err(Asked::Gone(e.into()));
        }
        Err(e) => return Err(failed(e)),
    }
    // The clone's pid; `None` when the zygote ended before answering (it may have cloned:
    // the record, if any, tells).
    let cloned = match zygote.answer(ticket) {
        Ok(pid) => Some(pid).filter(|pid| *pid > 0),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => None,
        Err(e) => {
            zygote.kill();
            return Err(Asked::Failed(Failure::NotASupervisor(e)));
        }
    };
    let mut stdout = std::fs::File::from(stdout_read);
    let mut record = [0u8; RECORD];
    if let Err(e) =
        crate::startup::read_record(&mut stdout, &mut record, crate::startup::RECORD_WAIT_MS)
    {
        let ended = e.kind() == std::io::ErrorKind::UnexpectedEof;
        if !ended {
            zygote.kill();
        }
        let Some(cloned) = cloned else {
            // No clone known, and no record: the zygote ended before it cloned (its copies
            // of the pipe went with it).
            return Err(if ended {
                Asked::Gone(e)
            } else {
                Asked::Failed(Failure::NotASupervisor(e))
            });
        };
        // A clone that ended before its record, or never wrote it: a child of this process,
        // to be reaped.
        let mut child = Supervised::adopt(
            Pid::from_raw(cloned),
            stdin_write,
            stdout.into(),
            stderr_read,
        );
        let _ = child.kill();
        if !ended {
            // It may be stuck where SIGKILL waits (a hung file system): reaped aside.
            let _ = std::thread::Builder::new()
                .name("mcp-stdio-reap".into())
                .stack_size(64 * 1024)
                .spawn(move || drop(child.wait()));
            return Err(Asked::Failed(Failure::NotASupervisor(e)));
        }
        // Its end closed its end of the pipe: it is gone or going.
        let _ = child.wait();
        return Err(Asked::Failed(Failure::Spawn(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            format!("the supervisor (pid {cloned}) ended before it reported"),
        ))));
    }
    if record[..4] != MAGIC {
        zygote.kill();
        return Err(Asked::Failed(Failure::NotASupervisor(
            std::io::Error::other("the zygote's clone wrote no record"),
        )));
    }
    let errno = i32::from_le_bytes([record[4], record[5], record[6], record[7]]);
    let pid = Pid::from_raw(i32::from_le_bytes([
        record[8], record[9], record[10], record[11],
    ]));
    if pid.as_raw() <= 0 {
        // The zygote could not clone (a process limit): no child exists.
        return Err(Asked::Failed(Failure::Spawn(
            std::io::Error::from_raw_os_error(errno),
        )));
    }
    if cloned.is_some_and(|cloned| cloned != pid.as_raw()) {
        // The answers no longer match the requests: this zygote is not to be asked again.
        zygote.kill();
    }
    let mut child = Supervised::adopt(pid, stdin_write, stdout.into(), stderr_read);
    if errno != 0 {
        // It wrote its record and exits: reap it.
        let _ = child.wait();
        return Err(Asked::Failed(Failure::Server(
            std::io::Error::from_raw_os_error(errno),
        )));
    }
    Ok(child)
}

/// The running zygote of this process, started now if there is none.
fn current() -> std::io::Result<Arc<Zygote>> {
    // Read before the lock: concurrent spawns read it at once.
    let state = host_state();
    let mut slot = ZYGOTE.lock().unwrap_or_else(PoisonError::into_inner);
    let me = std::process::id();
    if let Some(zygote) = slot.as_ref()
        && zygote.host == me
        && zygote.alive.load(Ordering::Acquire)
        && zygote.state == state
    {
        return Ok(zygote.clone());
    }
    let zygote = Arc::new(start(state)?);
    tracing::debug!(pid = zygote.pid, "stdio servers: started the zygote");
    *slot = Some(zygote.clone());
    Ok(zygote)
}

/// The pid of this process's zygote, while it runs.
#[cfg(test)]
fn running() -> Option<u32> {
    let slot = ZYGOTE.lock().unwrap_or_else(PoisonError::into_inner);
    slot.as_ref()
        .filter(|z| z.alive.load(Ordering::Acquire))
        .map(|z| z.pid)
}

/// Starts a zygote for this process, and a thread that reaps it when it ends.
fn start(state: Vec<u8>) -> std::io::Result<Zygote> {
    let (ours, theirs) = socket::socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    let host = std::process::id();
    let mut child = Command::new(crate::startup::SELF_EXE)
        .arg0(crate::startup::NAME)
        .arg(host.to_string())
        // Its own group: a terminal's signals to the host's group (Ctrl-C) do not reach it.
        .process_group(0)
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let pid = child.id();
    // Before the reaper exists, so the pid is still the zygote's.
    // SAFETY: `pidfd_open` of a child not yet reaped; the descriptor is new and ours.
    #[allow(unsafe_code)]
    let pidfd = unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, pid, 0u32);
        (fd >= 0).then(|| OwnedFd::from_raw_fd(fd as RawFd))
    };
    let alive = Arc::new(AtomicBool::new(true));
    let ended = alive.clone();
    let reaper = std::thread::Builder::new()
        .name("mcp-stdio-zygote".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            let _ = child.wait();
            ended.store(false, Ordering::Release);
        });
    // Without a thread (the system refused one), the zygote ends as `ours` closes, unreaped.
    reaper?;
    Ok(Zygote {
        socket: ours.into(),
        pid,
        host,
        alive,
        pidfd,
        state,
        sent: Mutex::new(0),
        answers: Mutex::default(),
    })
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead as _, Write as _};

    use super::*;

    /// Held by the tests that look at the zygote itself or change what every spawn inherits
    /// (`cargo test` runs a binary's tests as threads of one process).
    static SERIAL: Mutex<()> = Mutex::new(());

    /// The program whose clone ends before it writes its record (in this crate's tests only).
    pub(super) const ENDS_BEFORE_ITS_RECORD: &str = "mcp-test-ends-before-its-record";

    /// The children of this process (of any of its threads).
    fn children() -> std::collections::BTreeSet<u32> {
        let mut out = std::collections::BTreeSet::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let path = task.path().join("children");
            let text = std::fs::read_to_string(path).unwrap_or_default();
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
        out
    }

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The parent and the command line of `pid`.
    fn parent_and_cmdline(pid: u32) -> (u32, Vec<String>) {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let parent = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .nth(1)
            .unwrap();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        let args = cmdline
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        (parent.parse().unwrap(), args)
    }

    /// Starts `cat` through the zygote and checks it answers on its own pipes.
    fn echoing_cat(line: &str) -> Supervised {
        let mut child = spawn(&Plan::new("cat")).expect("a spawn through the zygote");
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{line}").unwrap();
        drop(stdin);
        let mut got = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut got)
            .unwrap();
        assert_eq!(got.trim_end(), line);
        child
    }

    #[test]
    fn a_clone_is_a_child_of_the_host_named_as_a_supervisor() {
        let _serial = serial();
        let mut child = spawn(&Plan::new("sleep").args(["600"])).unwrap();
        let (parent, args) = parent_and_cmdline(child.id());
        let host = std::process::id();
        let _ = child.kill();
        assert!(child.wait().is_ok());
        assert_eq!(parent, host);
        assert_eq!(args, [crate::startup::NAME.to_owned(), host.to_string()]);
        let zygote = running().expect("the zygote runs");
        assert_ne!(zygote, child.id());
    }

    #[test]
    fn concurrent_spawns_each_get_their_own_pipes() {
        let threads: Vec<_> = (0..8)
            .map(|i| std::thread::spawn(move || echoing_cat(&format!("line {i}")).wait().unwrap()))
            .collect();
        for thread in threads {
            assert!(thread.join().unwrap().success());
        }
    }

    #[test]
    fn a_killed_zygote_is_replaced() {
        let _serial = serial();
        assert!(echoing_cat("before").wait().unwrap().success());
        let old = running().expect("the zygote runs");
        nix::sys::signal::kill(
            Pid::from_raw(i32::try_from(old).unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        // At once (the host may not have seen it end), and again after it was reaped.
        assert!(echoing_cat("right after").wait().unwrap().success());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::path::Path::new(&format!("/proc/{old}")).exists()
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            !std::path::Path::new(&format!("/proc/{old}")).exists(),
            "the killed zygote was not reaped"
        );
        assert!(echoing_cat("later").wait().unwrap().success());
        assert_ne!(running(), Some(old));
    }

    #[test]
    fn a_host_that_changed_gets_a_zygote_that_is_as_it_now_is() {
        let _serial = serial();
        let umask = |plan: &Plan| output_of(plan).0.trim_end().to_owned();
        let before = umask(&Plan::new("sh").args(["-c", "umask"]));
        let first = running().expect("the zygote runs");
        // SAFETY: `umask` only swaps this process's mask.
        #[allow(unsafe_code)]
        let old = unsafe { libc::umask(0o077) };
        let files =
            nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
        nix::sys::resource::setrlimit(
            nix::sys::resource::Resource::RLIMIT_NOFILE,
            512.min(files.0),
            files.1,
        )
        .unwrap();
        // The directory too: a server without one starts in the host's directory now.
        let here = std::env::current_dir().unwrap();
        let dir = tempfile_dir();
        std::env::set_current_dir(&dir).unwrap();
        let after = umask(&Plan::new("sh").args(["-c", "umask; pwd; ulimit -n"]));
        let second = running().expect("a zygote runs");
        std::env::set_current_dir(&here).unwrap();
        nix::sys::resource::setrlimit(
            nix::sys::resource::Resource::RLIMIT_NOFILE,
            files.0,
            files.1,
        )
        .unwrap();
        // SAFETY: as above.
        #[allow(unsafe_code)]
        unsafe {
            libc::umask(old);
        }
        let real = std::fs::canonicalize(&dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_ne!(before, "0077");
        assert_eq!(
            after,
            format!("0077\n{}\n{}", real.display(), 512.min(files.0))
        );
        assert_ne!(first, second, "the zygote was not started anew");
    }

    #[test]
    fn a_clone_that_ends_before_its_record_is_reaped() {
        let _serial = serial();
        // The zygote runs, so that it is not what appears among the children.
        let _ = spawn(&Plan::new("true")).unwrap().wait();
        let before = children();
        // The zygote is a child: this kernel lists children.
        assert!(before.contains(&running().expect("the zygote runs")));
        let failure = spawn(&Plan::new(ENDS_BEFORE_ITS_RECORD)).expect_err("no server started");
        let Failure::Spawn(e) = &failure else {
            panic!("{failure:?}");
        };
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "{e}");
        // One attempt, and its clone reaped: no new child of this process is left a zombie
        // (nextest runs each test in a process of its own).
        let zombies: Vec<(u32, String)> = children()
            .difference(&before)
            .filter_map(|&pid| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                let state = stat
                    .rsplit_once(')')?
                    .1
                    .split_whitespace()
                    .next()?
                    .to_owned();
                // A zombie's command line is empty; its name is the supervisor's.
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
                (state == "Z").then(|| (pid, comm.trim_end().to_owned()))
            })
            .collect();
        assert!(zombies.is_empty(), "supervisors left unreaped: {zombies:?}");
        // The zygote still serves (the failure is of that clone, not of the zygote).
        assert!(usable());
        let _ = echoing_cat("after").wait();
    }

    #[test]
    fn the_zygote_is_named_as_documented() {
        let _serial = serial();
        assert_eq!(serve::COMM.to_bytes(), crate::ZYGOTE_COMM.as_bytes());
        let _child = spawn(&Plan::new("true")).unwrap().wait().unwrap();
        let zygote = running().expect("the zygote runs");
        let comm = std::fs::read_to_string(format!("/proc/{zygote}/comm")).unwrap();
        assert_eq!(comm.trim_end(), crate::ZYGOTE_COMM);
        // In a group of its own: a terminal's Ctrl-C to the host's group does not reach it.
        let group = nix::unistd::getpgid(Some(Pid::from_raw(i32::try_from(zygote).unwrap())));
        assert_eq!(group.unwrap().as_raw().unsigned_abs(), zygote);
    }

    /// What `plan` prints on stdout through the zygote, and its exit status.
    fn output_of(plan: &Plan) -> (String, std::process::ExitStatus) {
        let mut child = spawn(plan).expect("a spawn through the zygote");
        drop(child.stdin.take());
        let mut out = String::new();
        std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
        (out, child.wait().unwrap())
    }

    #[test]
    fn the_server_gets_its_arguments_environment_and_directory() {
        let _serial = serial();
        use std::os::unix::fs::PermissionsExt as _;

        let dir = tempfile_dir();
        let script = dir.join("print.sh");
        std::fs::write(&script, "#!/bin/sh\necho \"$PWD|$A|$B|$HOME|$1\"\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A relative program is found from the server's directory, as after a `chdir`.
        let mut plan = Plan::new("./print.sh").args(["first arg"]);
        plan.cwd = Some(dir.clone());
        plan.env.clear = true;
        plan.env.vars = vec![
            ("A".into(), "a=1".into()),
            ("B".into(), "".into()),
            ("PATH".into(), "/usr/bin:/bin".into()),
        ];
        let (out, status) = output_of(&plan);
        let real = std::fs::canonicalize(&dir).unwrap();
        assert_eq!(
            out.trim_end(),
            format!("{}|a=1|||first arg", real.display())
        );
        assert!(status.success());

        // Not cleared: the host's own variables come along.
        plan.env.clear = false;
        let home = std::env::var("HOME").unwrap_or_default();
        let (out, _) = output_of(&plan);
        assert!(out.ends_with(&format!("|a=1||{home}|first arg\n")), "{out}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A new directory under the temporary one.
    fn tempfile_dir() -> std::path::PathBuf {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("mcp-zygote-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_missing_program_or_directory_fails_as_a_direct_spawn_does() {
        for program in ["mcp-agent-no-such-program", "/no/such/program"] {
            let direct = Command::new(program).spawn().unwrap_err();
            let Err(Failure::Server(error)) = spawn(&Plan::new(program)) else {
                panic!("{program}: not the server's failure");
            };
            assert_eq!(error.raw_os_error(), direct.raw_os_error(), "{program}");
        }
        let mut plan = Plan::new("true");
        plan.cwd = Some("/no/such/directory".into());
        let direct = Command::new("true")
            .current_dir("/no/such/directory")
            .spawn()
            .unwrap_err();
        let Err(Failure::Server(error)) = spawn(&plan) else {
            panic!("a missing directory: not the server's failure");
        };
        assert_eq!(error.raw_os_error(), direct.raw_os_error());
        // And the zygote still serves.
        assert!(output_of(&Plan::new("true")).1.success());
    }
}
