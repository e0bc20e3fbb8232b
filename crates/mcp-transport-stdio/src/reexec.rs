//! Linux with glibc: the supervisor started as a new program, not as a fork of the host; and
//! the zygote ([`crate::zygote`]), the same program with no server's program in its arguments.
//!
//! A fork copies the host's page tables, so its cost grows with the host's memory (about 9 ms
//! for a host with 300 MB resident on a 2-core machine, against 0.1 ms for `posix_spawn`),
//! and the host's address space is locked meanwhile, so concurrent opens queue behind each
//! other. Instead the host spawns its own binary (`/proc/self/exe`, which names the running
//! file even after it was replaced on disk) with `posix_spawn`, under the name
//! [`NAME`] and the arguments `host-pid program args…`. A function in `.init_array`, which
//! glibc runs with the process's arguments before `main`, recognises the name and never
//! returns: the process becomes the server's supervisor (the same [`crate::supervisor`] code),
//! and the host's own `main` never starts in it.
//!
//! Before the server exists, the supervisor looks the program up (an absolute or relative
//! path as given, else each directory of its `PATH`, glibc's `/bin:/usr/bin` without one,
//! as `execvp` does) and writes an 8-byte record on its stdout: `MCPS` and the error number
//! (0 when found). The host reads it before the pipe is handed to the transport, so a missing
//! or non-executable command fails the spawn with the same error a direct spawn gives, and
//! nothing the server writes can come first. An `exec` that still fails (a file the kernel
//! will not run: no `#!` line, a missing interpreter or loader) ends the server with status
//! 127 and a line on its stderr, where a direct spawn would have failed; the supervisor
//! failing to start the server at all (its own fork refused) ends it with 126 and a line.
//!
//! The dynamic loader reads the supervisor's environment too (it is the server's): variables
//! named `LD_*` that the host sets for the server travel under the prefix
//! `MCP_AGENT_SUPERVISED_` and are put back before the server's `exec`, so a preload meant
//! for the server is not loaded into the supervisor.
//!
//! Used only where it works: glibc (which passes the arguments to `.init_array` functions),
//! this code in the main executable (not a library loaded into another program, whose `main`
//! would run instead), `/proc` mounted, and not a set-user-id or otherwise secure-mode host
//! (whose executable, started anew, would regain what the host gave up). A spawn that gets no
//! record (the executable did not start as a supervisor: e.g. a host that needs
//! `LD_LIBRARY_PATH` to load, which the server's environment lacks) turns this off for the
//! process and falls back to the fork. A spawn that fails outright falls back to the fork for
//! that server; if the fork works, the executable was the problem, and this is turned off too.
//!
//! Before `main` the process has one thread, so the supervisor's start may allocate (the
//! environment, the program's path); from its fork on it keeps to the supervisor's rules.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::libc::{self, c_char, c_int};

/// The supervisor's `argv[0]`: what `ps` shows, and what [`enter`] looks for.
pub(crate) const NAME: &str = "mcp-agent-supervisor";

/// The supervisor's command name (`comm`: what `top`, `pgrep` and `/proc/PID/stat` show).
pub(crate) const SUPERVISOR_COMM: &CStr = c"mcp-supervisor";

/// The prefix under which the server's `LD_*` variables pass through the supervisor.
const LOADER_PREFIX: &str = "MCP_AGENT_SUPERVISED_";

/// The first four bytes of the supervisor's record; an `i32` error number follows.
pub(crate) const MAGIC: [u8; 4] = *b"MCPS";

/// The record's length.
const RECORD: usize = 8;

/// How long the host waits for the record: the supervisor writes it before `main` would run,
/// within milliseconds; a process that says nothing for this long is not one.
pub(crate) const RECORD_WAIT_MS: u16 = 10_000;

/// The executable that is running, whatever became of its path.
pub(crate) const SELF_EXE: &str = "/proc/self/exe";

/// Run by glibc before `main` in every process of an executable that holds this crate.
// The one way to run before `main` without a dependency: an `.init_array` entry, which glibc
// calls with the process's arguments (the `ctor` crate's entries get none).
#[allow(unsafe_code)]
#[used]
#[unsafe(link_section = ".init_array")]
static ENTRY: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = enter;

/// Set when a spawn showed that the executable does not start as a supervisor.
static BROKEN: AtomicBool = AtomicBool::new(false);

/// Whether servers are started through a re-executed supervisor (see the module docs).
pub(crate) fn usable() -> bool {
    static IN_MAIN: OnceLock<bool> = OnceLock::new();
    !BROKEN.load(Ordering::Relaxed)
        && *IN_MAIN.get_or_init(|| {
            in_main_executable() && !secure_mode() && std::path::Path::new(SELF_EXE).exists()
        })
}

/// Turns re-executing off for this process.
pub(crate) fn give_up() {
    BROKEN.store(true, Ordering::Relaxed);
}

/// Whether the host runs in the loader's secure mode (set-user-id, set-group-id, file
/// capabilities): its executable, started anew, would not run as the host now does.
#[allow(unsafe_code)]
fn secure_mode() -> bool {
    // SAFETY: `getauxval` reads the auxiliary vector.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

/// Whether [`ENTRY`] lies in the main executable, which is what `/proc/self/exe` starts.
#[allow(unsafe_code)]
fn in_main_executable() -> bool {
    // SAFETY: `dladdr` only reads the loader's tables into `info`; `getauxval` reads the
    // auxiliary vector.
    unsafe {
        let base = |address: *const libc::c_void| {
            let mut info: libc::Dl_info = std::mem::zeroed();
            (libc::dladdr(address, &mut info) != 0).then_some(info.dli_fbase as usize)
        };
        let headers = libc::getauxval(libc::AT_PHDR) as *const libc::c_void;
        let entry = std::hint::black_box(ENTRY) as *const libc::c_void;
        match (base(headers), base(entry)) {
            (Some(main), Some(ours)) => main == ours,
            _ => false,
        }
    }
}

/// A command that starts `program` under a re-executed supervisor; the caller adds the
/// server's arguments, environment, directory and pipes, then calls [`spawn`].
pub(crate) fn command(program: &OsStr) -> Command {
    let mut command = Command::new(SELF_EXE);
    command
        .arg0(NAME)
        .arg(std::process::id().to_string())
        .arg(program);
    command
}

/// How a re-executed spawn failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The spawn itself failed (the executable, the directory, a resource limit): try the
    /// fork for this server.
    Spawn(std::io::Error),
    /// The executable started but not as a supervisor: fall back for good.
    NotASupervisor(std::io::Error),
    /// The supervisor started and reported this about the server's program.
    Server(std::io::Error),
}

/// Spawns `command` (from [`command`]; stdout must be piped) and reads the supervisor's
/// record. Blocks until the supervisor has looked the program up, at most [`RECORD_WAIT_MS`].
pub(crate) fn spawn(mut command: Command) -> Result<Child, Failure> {
    let loader: Vec<(OsString, OsString)> = command
        .get_envs()
        .filter_map(|(name, value)| {
            let value = value?;
            name.as_bytes()
                .starts_with(b"LD_")
                .then(|| (name.to_owned(), value.to_owned()))
        })
        .collect();
    for (name, value) in loader {
        let mut moved = OsString::from(LOADER_PREFIX);
        moved.push(&name);
        command.env_remove(&name).env(moved, value);
    }
    let mut child = command.spawn().map_err(Failure::Spawn)?;
    let mut record = [0u8; RECORD];
    let read = match child.stdout.as_mut() {
        Some(stdout) => read_record(stdout, &mut record, RECORD_WAIT_MS),
        None => Err(std::io::Error::other(
            "the supervisor's stdout is not piped",
        )),
    };
    let answer = match read {
        Ok(()) if record[..4] == MAGIC => {
            let errno = i32::from_le_bytes([record[4], record[5], record[6], record[7]]);
            if errno == 0 {
                return Ok(child);
            }
            Failure::Server(std::io::Error::from_raw_os_error(errno))
        }
        Ok(()) => Failure::NotASupervisor(std::io::Error::other(
            "the executable did not start as a supervisor",
        )),
        Err(e) => Failure::NotASupervisor(e),
    };
    let _ = child.kill();
    let _ = child.wait();
    Err(answer)
}

/// Reads the record from `stdout`, waiting at most `wait_ms` in all: a process
/// that writes part of it and stops is not a supervisor either.
pub(crate) fn read_record(
    stdout: &mut (impl std::io::Read + std::os::fd::AsFd),
    record: &mut [u8],
    wait_ms: u16,
) -> std::io::Result<()> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd as _;

    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(wait_ms.into());
    let mut got = 0;
    while got < record.len() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let left = u16::try_from(left.as_millis()).unwrap_or(wait_ms);
        let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(left)) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no whole answer from the supervisor within {wait_ms} ms"),
                ));
            }
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
        // Readable: this read does not block.
        match stdout.read(&mut record[got..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The `.init_array` entry: becomes a supervisor (`NAME host-pid program args…`) or the
/// zygote (`NAME host-pid`, [`crate::zygote`]) when started as one, else returns at once.
#[allow(unsafe_code)]
extern "C" fn enter(argc: c_int, argv: *const *const c_char, _envp: *const *const c_char) {
    let Ok(count) = usize::try_from(argc) else {
        return;
    };
    if count < 2 || argv.is_null() {
        return;
    }
    // SAFETY: glibc passes the process's `argc` and `argv` (NUL-terminated strings, the
    // array ended by a null pointer) to `.init_array` functions.
    unsafe {
        let first = *argv;
        if first.is_null() {
            return;
        }
        if CStr::from_ptr(first).to_bytes() != NAME.as_bytes() {
            return;
        }
        // With a program, a server's supervisor; with none, the zygote.
        if count >= 3 {
            run(std::slice::from_raw_parts(argv, count), argv.add(2))
        }
        match host_pid(CStr::from_ptr(*argv.add(1))) {
            Some(host) => crate::zygote::serve(host),
            None => libc::_exit(126),
        }
    }
}

/// The host's pid from its decimal argument.
fn host_pid(arg: &CStr) -> Option<libc::pid_t> {
    std::str::from_utf8(arg.to_bytes()).ok()?.parse().ok()
}

/// The supervisor's start: `args` is `[NAME, host-pid, program, args…]`, `server_argv` the
/// same array from `program` on (null-terminated).
///
/// # Safety
///
/// Only from [`enter`], before `main`, in a process of one thread.
#[allow(unsafe_code)]
unsafe fn run(args: &[*const c_char], server_argv: *const *const c_char) -> ! {
    // SAFETY: the strings are the process's arguments; the rest are system calls on this
    // process, before any other thread exists.
    unsafe {
        let arg = |i: usize| CStr::from_ptr(args[i]);
        let Some(host) = host_pid(arg(1)) else {
            libc::_exit(126);
        };
        restore_loader_variables();
        start_server(host, arg(2), server_argv, Record::Plain)
    }
}

/// Which record a supervisor writes before it starts the server.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Record {
    /// [`MAGIC`] and the error number: a supervisor the host spawned (the host knows its pid).
    Plain,
    /// [`crate::zygote::MAGIC`], the error number and the supervisor's pid: one the zygote
    /// cloned, whose pid the host learns from this record.
    WithPid,
}

/// Writes a record on stdout: `magic`, `errno` and, when given, `pid` (little-endian `i32`s).
/// `false` when it could not be written whole.
pub(crate) fn write_record(magic: [u8; 4], errno: c_int, pid: Option<libc::pid_t>) -> bool {
    let mut record = [0u8; 12];
    record[..4].copy_from_slice(&magic);
    record[4..8].copy_from_slice(&errno.to_le_bytes());
    let len = match pid {
        Some(pid) => {
            record[8..].copy_from_slice(&pid.to_le_bytes());
            12
        }
        None => RECORD,
    };
    // SAFETY: writes from a local buffer.
    #[allow(unsafe_code)]
    let written = unsafe { libc::write(1, record.as_ptr().cast(), len) };
    written == len as isize
}

/// What a supervisor started anew does once its environment and directory are the server's:
/// looks `program` up, writes its record on stdout, forks the server (becoming its
/// supervisor) and execs `program` with `server_argv` in the server.
///
/// # Safety
///
/// Only in a process of one thread that is a child of `host` and never returns to other code:
/// a supervisor before `main`, or a child the zygote cloned.
#[allow(unsafe_code)]
pub(crate) unsafe fn start_server(
    host: libc::pid_t,
    program: &CStr,
    server_argv: *const *const c_char,
    record: Record,
) -> ! {
    // SAFETY: system calls on this process, which has one thread; `server_argv` is a
    // null-terminated array of NUL-terminated strings (the caller's).
    unsafe {
        libc::prctl(libc::PR_SET_NAME, SUPERVISOR_COMM.as_ptr(), 0, 0, 0);
        let found = resolve(program);
        let errno = found.as_ref().err().copied().unwrap_or(0);
        let written = match record {
            Record::Plain => write_record(MAGIC, errno, None),
            Record::WithPid => write_record(crate::zygote::MAGIC, errno, Some(libc::getpid())),
        };
        if !written {
            libc::_exit(126);
        }
        let Ok(path) = found else {
            libc::_exit(127);
        };
        match crate::supervisor::split(host, crate::supervisor::WAKE, false) {
            Ok(()) => {
                // The path is resolved: `execv`, which (unlike `execvp`) runs no file the
                // kernel refuses under `/bin/sh`.
                libc::execv(path.as_ptr(), server_argv);
                let error = std::io::Error::last_os_error();
                let line = format!(
                    "{NAME}: cannot execute {}: {error}\n",
                    path.to_string_lossy()
                );
                libc::write(2, line.as_ptr().cast(), line.len());
                libc::_exit(127)
            }
            Err(error) => {
                let line = format!("{NAME}: cannot start the server: {error}\n");
                libc::write(2, line.as_ptr().cast(), line.len());
                libc::_exit(126)
            }
        }
    }
}

/// Puts back the `LD_*` variables the host moved aside, removing the moved copies.
#[allow(unsafe_code)]
unsafe fn restore_loader_variables() {
    let moved: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter_map(|(name, value)| {
            let original = name.as_bytes().strip_prefix(LOADER_PREFIX.as_bytes())?;
            Some((OsStr::from_bytes(original).to_owned(), value))
        })
        .collect();
    for (name, value) in moved {
        let mut prefixed = OsString::from(LOADER_PREFIX);
        prefixed.push(&name);
        // SAFETY: one thread; nothing else reads the environment meanwhile.
        unsafe {
            std::env::remove_var(&prefixed);
            std::env::set_var(&name, &value);
        }
    }
}

/// Where `execvp` would find `program`: as given when it holds a `/`, else in each directory
/// of `PATH`. The error number is `execvp`'s: `ENOENT`, or `EACCES` when a match was found
/// but cannot be executed.
pub(crate) fn resolve(program: &CStr) -> Result<CString, c_int> {
    let bytes = program.to_bytes();
    if bytes.is_empty() {
        return Err(libc::ENOENT);
    }
    if bytes.contains(&b'/') {
        return executable(program).map(|()| program.to_owned());
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/bin:/usr/bin"));
    let mut denied = false;
    for dir in path.as_bytes().split(|&b| b == b':') {
        let dir = if dir.is_empty() { b".".as_slice() } else { dir };
        let mut candidate = dir.to_vec();
        candidate.push(b'/');
        candidate.extend_from_slice(bytes);
        let Ok(candidate) = CString::new(candidate) else {
            continue;
        };
        match executable(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(libc::EACCES) => denied = true,
            Err(_) => {}
        }
    }
    Err(if denied { libc::EACCES } else { libc::ENOENT })
}

/// `Ok` when `path` is a file this process may execute.
#[allow(unsafe_code)]
fn executable(path: &CStr) -> Result<(), c_int> {
    // SAFETY: a NUL-terminated path; `stat` writes into a local.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        if libc::stat(path.as_ptr(), &mut stat) != 0 {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::ENOENT));
        }
        if stat.st_mode & libc::S_IFMT == libc::S_IFDIR {
            return Err(libc::EACCES);
        }
        if libc::access(path.as_ptr(), libc::X_OK) != 0 {
            return Err(libc::EACCES);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_is_in_this_executable() {
        assert!(in_main_executable());
        assert!(usable());
    }

    #[test]
    fn programs_are_looked_up_as_execvp_does() {
        assert_eq!(resolve(c""), Err(libc::ENOENT));
        assert_eq!(resolve(c"/no/such/program"), Err(libc::ENOENT));
        assert_eq!(resolve(c"/"), Err(libc::EACCES));
        assert_eq!(
            resolve(c"mcp-agent-no-such-program-anywhere"),
            Err(libc::ENOENT)
        );
        let sh = resolve(c"sh").expect("sh on PATH");
        assert!(sh.to_bytes().ends_with(b"/sh"), "{sh:?}");
        // A file that exists but is not executable.
        let dir = std::env::temp_dir();
        let file = dir.join(format!("mcp-reexec-{}", std::process::id()));
        std::fs::write(&file, "#!/bin/sh\n").unwrap();
        let path = CString::new(file.as_os_str().as_bytes()).unwrap();
        let denied = resolve(&path);
        let _ = std::fs::remove_file(&file);
        assert_eq!(denied, Err(libc::EACCES));
    }

    /// Spawns `sh -c script` and reads its record as the host reads a supervisor's.
    fn record_of(script: &str) -> (std::io::Result<()>, std::time::Duration) {
        let mut child = Command::new("sh")
            .args(["-c", script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        let mut record = [0u8; RECORD];
        let read = read_record(child.stdout.as_mut().unwrap(), &mut record, 300);
        let took = started.elapsed();
        let _ = child.kill();
        let _ = child.wait();
        (read, took)
    }

    #[test]
    fn a_record_comes_whole_or_not_at_all() {
        // Written in two parts: read whole.
        let (read, _) = record_of("printf MC; sleep 0; printf 'PS\\0\\0\\0\\0'");
        assert!(read.is_ok(), "{read:?}");
        // Part of it, then silence: not a supervisor, within the bound (not at the sleep's end).
        let (read, took) = record_of("printf MC; exec sleep 30");
        assert_eq!(
            read.unwrap_err().kind(),
            std::io::ErrorKind::TimedOut,
            "after {took:?}"
        );
        assert!(took < std::time::Duration::from_secs(20), "{took:?}");
        // Nothing, then the end.
        let (read, _) = record_of("exit 0");
        assert_eq!(read.unwrap_err().kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
