//! Linux with glibc: the function glibc runs before `main` in every process of an executable
//! that holds this crate, which turns a process started as `mcp-agent-supervisor host-pid
//! program args…` into that server's supervisor ([`crate::reexec`]) and one started as
//! `mcp-agent-supervisor host-pid` into the zygote ([`crate::zygote`]); and whether this
//! process can start its executable that way at all.
//!
//! Used only where it works: glibc (which passes the arguments to `.init_array` functions),
//! this code in the main executable (not a library loaded into another program, whose `main`
//! would run instead), `/proc` mounted, and not a set-user-id or otherwise secure-mode host
//! (whose executable, started anew, would regain what the host gave up).

use std::ffi::CStr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::libc::{self, c_char, c_int};

use crate::startup::{NAME, SELF_EXE, host_pid};

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
            crate::reexec::run(std::slice::from_raw_parts(argv, count), argv.add(2))
        }
        match host_pid(CStr::from_ptr(*argv.add(1))) {
            Some(host) => crate::zygote::serve::serve(host),
            None => libc::_exit(126),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_is_in_this_executable() {
        assert!(in_main_executable());
        assert!(usable());
    }
}
