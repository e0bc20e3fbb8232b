//! Linux with glibc: a server's supervisor started as a new program, not as a fork of the
//! host (where the zygote, [`crate::zygote`], does not work).
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
//! Before the server exists, the supervisor writes its record ([`crate::startup`]).
//!
//! The dynamic loader reads the supervisor's environment too (it is the server's): variables
//! named `LD_*` that the host sets for the server travel under the prefix
//! `MCP_AGENT_SUPERVISED_` and are put back before the server's `exec`, so a preload meant
//! for the server is not loaded into the supervisor.
//!
//! Used only where it works ([`crate::entry::usable`]). A spawn that gets no
//! record (the executable did not start as a supervisor: e.g. a host that needs
//! `LD_LIBRARY_PATH` to load, which the server's environment lacks) turns this off for the
//! process and falls back to the fork. A spawn that fails outright falls back to the fork for
//! that server; if the fork works, the executable was the problem, and this is turned off too.
//!
//! Before `main` the process has one thread, so the supervisor's start may allocate (the
//! environment, the program's path); from its fork on it keeps to the supervisor's rules.

use std::ffi::{CStr, OsStr, OsString};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command};

use nix::libc::{self, c_char};

use crate::startup::{
    Failure, MAGIC, NAME, RECORD, RECORD_WAIT_MS, Record, SELF_EXE, host_pid, read_record,
    start_server,
};

/// The prefix under which the server's `LD_*` variables pass through the supervisor.
const LOADER_PREFIX: &str = "MCP_AGENT_SUPERVISED_";

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

/// The supervisor's start: `args` is `[NAME, host-pid, program, args…]`, `server_argv` the
/// same array from `program` on (null-terminated).
///
/// # Safety
///
/// Only from the `.init_array` entry ([`crate::entry`]), before `main`, in a process of one
/// thread.
#[allow(unsafe_code)]
pub(crate) unsafe fn run(args: &[*const c_char], server_argv: *const *const c_char) -> ! {
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
