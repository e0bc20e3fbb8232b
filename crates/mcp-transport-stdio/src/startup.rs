//! Linux with glibc: what every supervisor that runs as this executable shares, whether it was
//! started anew for its server ([`crate::reexec`]) or cloned by the zygote ([`crate::zygote`]):
//! its name, the record it writes on its stdout before the server exists (and how the host
//! reads it), and how it finds the server's program and starts it.
//!
//! Before the server exists, the supervisor looks the program up (an absolute or relative
//! path as given, else each directory of its `PATH`, glibc's `/bin:/usr/bin` without one,
//! as `execvp` does) and writes a record on its stdout: a magic number, the error number (0
//! when found) and, from a clone, its pid. The host reads it before the pipe is handed to the
//! transport, so a missing or non-executable command fails the spawn with the same error a
//! direct spawn gives, and nothing the server writes can come first. An `exec` that still
//! fails (a file the kernel will not run: no `#!` line, a missing interpreter or loader) ends
//! the server with status 127 and a line on its stderr, where a direct spawn would have
//! failed; the supervisor failing to start the server at all (its own fork refused) ends it
//! with 126 and a line.

use std::ffi::{CStr, CString, OsString};
use std::os::unix::ffi::OsStrExt as _;

use nix::libc::{self, c_char, c_int};

/// The supervisor's `argv[0]`: what `ps` shows, and what the entry before `main` ([`crate::entry`]) looks for.
pub(crate) const NAME: &str = "mcp-agent-supervisor";

/// The supervisor's command name (`comm`: what `top`, `pgrep` and `/proc/PID/stat` show).
pub(crate) const SUPERVISOR_COMM: &CStr = c"mcp-supervisor";

/// The first four bytes of a record without a pid; an `i32` error number follows.
pub(crate) const MAGIC: [u8; 4] = *b"MCPS";

/// A record's length without a pid.
pub(crate) const RECORD: usize = 8;

/// The first four bytes of a record with the supervisor's pid after the error number.
pub(crate) const MAGIC_WITH_PID: [u8; 4] = *b"MCPZ";

/// A record's length with a pid.
pub(crate) const RECORD_WITH_PID: usize = 12;

/// How long the host waits for the record: the supervisor writes it before `main` would run,
/// within milliseconds; a process that says nothing for this long is not one.
pub(crate) const RECORD_WAIT_MS: u16 = 10_000;

/// The executable that is running, whatever became of its path.
pub(crate) const SELF_EXE: &str = "/proc/self/exe";

/// How a spawn under a supervisor of this executable failed.
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

/// The host's pid from its decimal argument.
pub(crate) fn host_pid(arg: &CStr) -> Option<libc::pid_t> {
    std::str::from_utf8(arg.to_bytes()).ok()?.parse().ok()
}

/// Which record a supervisor writes before it starts the server.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Record {
    /// [`MAGIC`] and the error number: a supervisor the host spawned (the host knows its pid).
    Plain,
    /// [`MAGIC_WITH_PID`], the error number and the supervisor's pid: one the zygote cloned,
    /// whose pid the host learns from this record.
    WithPid,
}

/// Writes a record on `fd`: `magic`, `errno` and, when given, `pid` (little-endian `i32`s).
/// `false` when it could not be written whole.
pub(crate) fn write_record(
    fd: std::os::fd::RawFd,
    magic: [u8; 4],
    errno: c_int,
    pid: Option<libc::pid_t>,
) -> bool {
    let mut record = [0u8; RECORD_WITH_PID];
    record[..4].copy_from_slice(&magic);
    record[4..8].copy_from_slice(&errno.to_le_bytes());
    let len = match pid {
        Some(pid) => {
            record[8..].copy_from_slice(&pid.to_le_bytes());
            RECORD_WITH_PID
        }
        None => RECORD,
    };
    // SAFETY: writes from a local buffer; a descriptor that is not open fails the write.
    #[allow(unsafe_code)]
    let written = unsafe { libc::write(fd, record.as_ptr().cast(), len) };
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
            Record::Plain => write_record(1, MAGIC, errno, None),
            Record::WithPid => {
                write_record(1, MAGIC_WITH_PID, errno, Some(crate::supervisor::own_pid()))
            }
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

/// Where `execvp` would find `program`: as given when it holds a `/`, else in each directory
/// of `PATH`. The error number is `execvp`'s: `ENOENT`, or `EACCES` when a match was found
/// but cannot be executed.
fn resolve(program: &CStr) -> Result<CString, c_int> {
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
    use std::process::Command;

    use super::*;

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
