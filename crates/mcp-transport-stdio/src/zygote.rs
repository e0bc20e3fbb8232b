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
//! re-executed supervisor's runs ([`crate::reexec::start_server`]): it looks the program up,
//! writes a record on its stdout, forks the server and supervises it. Cloning a small
//! single-threaded process costs a fraction of a millisecond and nothing the host holds.
//!
//! The record carries the supervisor's pid (the host learns it there, so the zygote sends
//! nothing back): [`MAGIC`], the error number, the pid. End of file instead means that the
//! zygote ended before cloning (the pipe's only writer went with it), and the host starts a
//! new one and asks again, once; then it starts that server's supervisor itself.
//!
//! The zygote ends when the host closes the socket (the host died: it has no other way to
//! end it) and after [`IDLE`] without a request, like the runtime's idle blocking threads; a
//! thread of the host reaps it. It holds nothing of the host's but the socket, and is never
//! a server's ancestor, so its end changes nothing for the servers.

use std::ffi::{CStr, CString, OsString};
use std::io::IoSlice;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use nix::libc::{self, c_char, c_int, pid_t};
use nix::sys::socket::{self, AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType};
use nix::unistd::Pid;

use crate::child::Supervised;
use crate::plan::Plan;
use crate::reexec::Failure;

/// [`crate::ZYGOTE_COMM`] for `prctl`.
const COMM: &CStr = c"mcp-zygote";

/// The first four bytes of a cloned supervisor's record; the error number and its pid follow.
pub(crate) const MAGIC: [u8; 4] = *b"MCPZ";

/// The record's length.
const RECORD: usize = 12;

/// How long the zygote waits for a request before it ends.
const IDLE_MS: u16 = 10_000;

/// The largest request: arguments and environment together. A larger one is started the
/// other way (`E2BIG` here; the kernel's own bound on an `exec` is larger).
const MAX_REQUEST: usize = 128 * 1024;

/// The descriptors a request carries: the server's stdin, stdout and stderr.
const PIPES: usize = 3;

/// Set when the zygote did not work in this process: servers' supervisors are then started
/// one by one.
static BROKEN: AtomicBool = AtomicBool::new(false);

/// Whether servers are started through the zygote.
pub(crate) fn usable() -> bool {
    !BROKEN.load(Ordering::Relaxed)
}

/// Notes a failed [`spawn`]: one that any request would meet turns the zygote off for this
/// process (the one request that was too large or held a NUL byte does not).
pub(crate) fn failed(failure: &Failure) {
    let (Failure::Spawn(e) | Failure::NotASupervisor(e) | Failure::Server(e)) = failure;
    let of_the_request = e.kind() == std::io::ErrorKind::InvalidInput
        || matches!(e.raw_os_error(), Some(libc::E2BIG | libc::EMSGSIZE));
    if !of_the_request {
        tracing::debug!(error = %e, "stdio servers: the zygote does not work here; starting supervisors one by one");
        BROKEN.store(true, Ordering::Relaxed);
    }
}

/// The host's zygote, if it has started one.
static ZYGOTE: Mutex<Option<Arc<Zygote>>> = Mutex::new(None);

/// The host's side of a running zygote.
#[derive(Debug)]
struct Zygote {
    socket: OwnedFd,
    pid: u32,
    /// The process that started it: a fork of that process must not use it (its clones would
    /// be children of the process that started the zygote).
    host: u32,
    /// Cleared by the reaper once the zygote has ended.
    alive: Arc<AtomicBool>,
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
    let request = encode(plan).map_err(Failure::Spawn)?;
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
    /// The zygote is gone (ended before it read the request): start another.
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
    let sent = socket::sendmsg::<()>(
        zygote.socket.as_raw_fd(),
        &[IoSlice::new(request)],
        &[ControlMessage::ScmRights(&theirs)],
        MsgFlags::MSG_NOSIGNAL,
        None,
    );
    // The zygote holds its own copies now (or nobody does): the pipe ends only once a
    // supervisor that holds them has gone.
    drop((stdin_read, stdout_write, stderr_write));
    match sent {
        Ok(_) => {}
        Err(e @ (nix::errno::Errno::EPIPE | nix::errno::Errno::ECONNREFUSED)) => {
            return Err(Asked::Gone(e.into()));
        }
        Err(e) => return Err(failed(e)),
    }
    let mut stdout = std::fs::File::from(stdout_read);
    let mut record = [0u8; RECORD];
    if let Err(e) =
        crate::reexec::read_record(&mut stdout, &mut record, crate::reexec::RECORD_WAIT_MS)
    {
        return Err(match e.kind() {
            std::io::ErrorKind::UnexpectedEof => Asked::Gone(e),
            _ => Asked::Failed(Failure::NotASupervisor(e)),
        });
    }
    if record[..4] != MAGIC {
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
    let mut slot = ZYGOTE.lock().unwrap_or_else(PoisonError::into_inner);
    let me = std::process::id();
    if let Some(zygote) = slot.as_ref()
        && zygote.host == me
        && zygote.alive.load(Ordering::Acquire)
    {
        return Ok(zygote.clone());
    }
    let zygote = Arc::new(start()?);
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
fn start() -> std::io::Result<Zygote> {
    let (ours, theirs) = socket::socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    let host = std::process::id();
    let mut child = Command::new(crate::reexec::SELF_EXE)
        .arg0(crate::reexec::NAME)
        .arg(host.to_string())
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let pid = child.id();
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
        socket: ours,
        pid,
        host,
        alive,
    })
}

/// A request: `program`, then the server's `argv` (from `argv[0]`, the program again), its
/// environment as `NAME=value`, and its directory, each NUL-terminated, after three counts
/// (little-endian `u32`: arguments, environment entries, and 1 with a directory else 0).
fn encode(plan: &Plan) -> std::io::Result<Vec<u8>> {
    let environment = plan.environment();
    let mut out = Vec::with_capacity(1024);
    let count = |n: usize| u32::try_from(n).map_err(std::io::Error::other);
    out.extend_from_slice(&count(plan.args.len() + 1)?.to_le_bytes());
    out.extend_from_slice(&count(environment.len())?.to_le_bytes());
    out.extend_from_slice(&u32::from(plan.cwd.is_some()).to_le_bytes());
    let mut push = |bytes: &[u8]| -> std::io::Result<()> {
        if bytes.contains(&0) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "an argument, variable or directory holds a NUL byte",
            ));
        }
        out.extend_from_slice(bytes);
        out.push(0);
        Ok(())
    };
    push(plan.program.as_bytes())?;
    push(plan.program.as_bytes())?;
    for arg in &plan.args {
        push(arg.as_bytes())?;
    }
    for (name, value) in &environment {
        let mut entry = OsString::with_capacity(name.len() + value.len() + 1);
        entry.push(name);
        entry.push("=");
        entry.push(value);
        push(entry.as_bytes())?;
    }
    if let Some(cwd) = &plan.cwd {
        push(cwd.as_os_str().as_bytes())?;
    }
    if out.len() > MAX_REQUEST {
        return Err(std::io::Error::from_raw_os_error(libc::E2BIG));
    }
    Ok(out)
}

/// A request as the zygote reads it.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    program: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
    cwd: Option<CString>,
}

/// Reads what [`encode`] wrote; `None` for anything else.
fn decode(bytes: &[u8]) -> Option<Request> {
    let count = |at: usize| -> Option<usize> {
        let raw: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        usize::try_from(u32::from_le_bytes(raw)).ok()
    };
    let (argc, envc, dirs) = (count(0)?, count(4)?, count(8)?);
    if argc == 0 || dirs > 1 {
        return None;
    }
    let mut strings = bytes.get(12..)?.split_inclusive(|&b| b == 0);
    let mut next = || {
        CStr::from_bytes_with_nul(strings.next()?)
            .ok()
            .map(CStr::to_owned)
    };
    let program = next()?;
    let argv = (0..argc).map(|_| next()).collect::<Option<Vec<_>>>()?;
    let env = (0..envc).map(|_| next()).collect::<Option<Vec<_>>>()?;
    let cwd = if dirs == 1 { Some(next()?) } else { None };
    next().is_none().then_some(Request {
        program,
        argv,
        env,
        cwd,
    })
}

/// The zygote's life, from `reexec`'s entry before `main`: its stdin is the socket. Serves
/// requests until the host closes the socket or none comes for [`IDLE_MS`].
///
/// # Safety
///
/// Only before `main`, in a process of one thread started as the zygote.
#[allow(unsafe_code)]
pub(crate) unsafe fn serve(host: pid_t) -> ! {
    // SAFETY (every block below): system calls on this process, which has one thread, and on
    // descriptors it owns.
    unsafe {
        if libc::getppid() != host {
            libc::_exit(1);
        }
        libc::prctl(libc::PR_SET_NAME, COMM.as_ptr(), 0, 0, 0);
        let socket: RawFd = 0;
        let mut buffer = vec![0u8; MAX_REQUEST];
        loop {
            let mut poll = libc::pollfd {
                fd: socket,
                events: libc::POLLIN,
                revents: 0,
            };
            match libc::poll(&mut poll, 1, c_int::from(IDLE_MS)) {
                0 => libc::_exit(0),
                -1 if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {
                    continue;
                }
                -1 => libc::_exit(1),
                _ => {}
            }
            let Some((len, fds, truncated)) = receive(socket, &mut buffer) else {
                // End of file: the host has gone.
                libc::_exit(0);
            };
            let Ok(fds) = <[OwnedFd; PIPES]>::try_from(fds) else {
                continue;
            };
            let request = if truncated {
                None
            } else {
                decode(&buffer[..len])
            };
            let Some(request) = request else {
                report(&fds[1], libc::E2BIG);
                continue;
            };
            // CLONE_PARENT: the clone's parent is the host (see the module docs). Without
            // CLONE_VM it is a copy of this process, as after `fork`.
            let flags = libc::CLONE_PARENT as libc::c_ulong | libc::SIGCHLD as libc::c_ulong;
            match libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) {
                -1 => report(
                    &fds[1],
                    std::io::Error::last_os_error()
                        .raw_os_error()
                        .unwrap_or(libc::EAGAIN),
                ),
                0 => become_supervisor(host, &request, &fds),
                _ => {}
            }
            // `fds` closes here: the clone holds its copies.
        }
    }
}

/// Receives one request and its descriptors (close-on-exec): `None` at end of file.
fn receive(socket: RawFd, buffer: &mut [u8]) -> Option<(usize, Vec<OwnedFd>, bool)> {
    let mut space = nix::cmsg_space!([RawFd; PIPES]);
    loop {
        let mut iov = [std::io::IoSliceMut::new(buffer)];
        let message = match socket::recvmsg::<()>(
            socket,
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(message) => message,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return None,
        };
        let mut fds = Vec::new();
        if let Ok(messages) = message.cmsgs() {
            for cmsg in messages {
                if let socket::ControlMessageOwned::ScmRights(received) = cmsg {
                    // SAFETY: descriptors the kernel just installed in this process.
                    #[allow(unsafe_code)]
                    fds.extend(
                        received
                            .into_iter()
                            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                    );
                }
            }
        }
        let len = message.bytes;
        let truncated = message
            .flags
            .intersects(MsgFlags::MSG_TRUNC | MsgFlags::MSG_CTRUNC);
        if len == 0 && fds.is_empty() {
            return None;
        }
        return Some((len, fds, truncated));
    }
}

/// Writes a failure record (no clone, so pid 0) on the server's stdout pipe.
#[allow(unsafe_code)]
fn report(stdout: &OwnedFd, errno: c_int) {
    let mut record = [0u8; RECORD];
    record[..4].copy_from_slice(&MAGIC);
    record[4..8].copy_from_slice(&errno.to_le_bytes());
    // SAFETY: writes from a local buffer to a descriptor this process owns.
    unsafe {
        libc::write(stdout.as_raw_fd(), record.as_ptr().cast(), RECORD);
    }
}

/// The clone's start: the request's pipes as stdin, stdout and stderr, a group of its own,
/// the request's environment and directory; then a supervisor like any other.
///
/// # Safety
///
/// Only in the zygote's clone, which has one thread.
#[allow(unsafe_code)]
unsafe fn become_supervisor(host: pid_t, request: &Request, fds: &[OwnedFd; PIPES]) -> ! {
    // SAFETY: system calls on this process (one thread) and descriptors it owns; the
    // environment is changed while no other thread can read it.
    unsafe {
        libc::setpgid(0, 0);
        for (target, fd) in fds.iter().enumerate() {
            // `dup2` leaves the copy without close-on-exec.
            if libc::dup2(fd.as_raw_fd(), target as c_int) == -1 {
                libc::_exit(126);
            }
        }
        // The socket and the received copies: nothing of the zygote's reaches the server.
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) != 0 {
            for fd in 3..1024 {
                libc::close(fd);
            }
        }
        libc::clearenv();
        for entry in &request.env {
            // `putenv` keeps the pointer: the request lives until `exec`.
            libc::putenv(entry.as_ptr().cast_mut());
        }
        if let Some(cwd) = &request.cwd
            && libc::chdir(cwd.as_ptr()) != 0
        {
            let errno = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::ENOENT);
            crate::reexec::write_record(MAGIC, errno, Some(libc::getpid()));
            libc::_exit(127);
        }
        let mut argv: Vec<*const c_char> = request.argv.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        crate::reexec::start_server(
            host,
            &request.program,
            argv.as_ptr(),
            crate::reexec::Record::WithPid,
        )
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead as _, Write as _};

    use super::*;

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
        let mut child = spawn(&Plan::new("sleep").args(["600"])).unwrap();
        let (parent, args) = parent_and_cmdline(child.id());
        let host = std::process::id();
        let _ = child.kill();
        assert!(child.wait().is_ok());
        assert_eq!(parent, host);
        assert_eq!(args, [crate::reexec::NAME.to_owned(), host.to_string()]);
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
    fn the_zygote_is_named_as_documented() {
        assert_eq!(COMM.to_bytes(), crate::ZYGOTE_COMM.as_bytes());
        let _child = spawn(&Plan::new("true")).unwrap().wait().unwrap();
        let zygote = running().expect("the zygote runs");
        let comm = std::fs::read_to_string(format!("/proc/{zygote}/comm")).unwrap();
        assert_eq!(comm.trim_end(), crate::ZYGOTE_COMM);
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

    #[test]
    fn a_request_reads_back_as_written() {
        let mut plan = Plan::new("server").args(["--stdio", "x y"]);
        plan.cwd = Some("/tmp".into());
        plan.env.clear = true;
        plan.env.vars = vec![("A".into(), "1=2".into())];
        let request = decode(&encode(&plan).unwrap()).unwrap();
        assert_eq!(
            request,
            Request {
                program: c"server".to_owned(),
                argv: vec![
                    c"server".to_owned(),
                    c"--stdio".to_owned(),
                    c"x y".to_owned()
                ],
                env: vec![c"A=1=2".to_owned()],
                cwd: Some(c"/tmp".to_owned()),
            }
        );
        // Cut short, or with more than it announced: not a request.
        let bytes = encode(&plan).unwrap();
        assert_eq!(decode(&bytes[..bytes.len() - 1]), None);
        let mut longer = bytes.clone();
        longer.extend_from_slice(b"extra\0");
        assert_eq!(decode(&longer), None);
        assert_eq!(decode(b""), None);
    }

    #[test]
    fn a_nul_byte_or_an_oversized_request_is_refused_before_sending() {
        let plan = Plan::new("a\0b");
        assert_eq!(
            encode(&plan).unwrap_err().kind(),
            std::io::ErrorKind::InvalidInput
        );
        let mut plan = Plan::new("server");
        plan.env.clear = true;
        plan.env.vars = vec![("BIG".into(), "x".repeat(MAX_REQUEST).into())];
        assert_eq!(encode(&plan).unwrap_err().raw_os_error(), Some(libc::E2BIG));
    }
}
