//! Linux: a supervisor between the host and each server, so that no process of the server
//! outlives the host, however the host dies.
//!
//! The host's child for a server becomes the server's supervisor, started one of two ways: as
//! the host's own executable, spawned anew and caught before `main` (`crate::reexec`, glibc),
//! or as a fork of the host that does not exec (the fallback). Either way it is a child
//! subreaper that asks for a signal at its parent's death, forks the real server, and waits.
//! The server execs with `PR_SET_PDEATHSIG = SIGKILL` towards the supervisor. Every process
//! the server starts stays in the supervisor's tree — a child that calls `setsid`, a daemon
//! whose middle process exits: orphans are re-parented to the supervisor, not to init.
//! So when the host dies (even by SIGKILL: the kernel sends the supervisor its signal), and
//! when the server exits, the supervisor kills its children, reaps them, and repeats until it
//! has none left: each killed child's own children are re-parented to it in turn.
//!
//! What the host sees: the supervisor's pid (the process-group leader; the server is in its
//! group), end of file on the server's pipes when the server is gone (the supervisor keeps no
//! descriptor of the host's), and the server's exit status (the supervisor exits with the
//! same code, or dies of the same signal). A signal sent to the group reaches the server
//! directly. The supervisor cannot tell it from one sent to its pid alone, so it passes one
//! on (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2) only when the server left the
//! group (else the server would get a group signal twice): a signal sent to the supervisor's
//! pid alone does not reach a server still in its group. `exec` failing is reported to the
//! host: as a spawn error through std's pipe when the supervisor is a fork of the host; as a
//! spawn error from the supervisor's record, or status 127 and a line on stderr, when it was
//! started anew (`crate::reexec`).
//!
//! From [`split`] on, the supervisor may be a fork of a multithreaded process that never
//! execs, so only async-signal-safe system calls run in this module (no allocation, no lock,
//! fixed buffers on the stack, no panicking operation). It finds its children by reading
//! `/proc/<pid>/stat` (`/proc/<pid>/task/<tid>/children` needs `CONFIG_PROC_CHILDREN`, which
//! not every kernel has); without `/proc` it can only kill the server. It signals a pid only
//! while `waitid` shows it an unreaped child of its own (only the supervisor reaps them, so
//! the pid cannot be reused meanwhile): a `/proc` of another pid namespace, whose numbers name
//! other processes, makes it kill nothing else.

use std::mem::MaybeUninit;

use nix::libc::{self, c_int, pid_t};

/// Signals passed on to the server when it is not in the supervisor's process group.
const FORWARDED: [c_int; 6] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// The signal the supervisor asks for at its parent's death: one nobody sends to a server
/// (any other would do as well, as the supervisor then checks its parent).
pub(crate) const WAKE: c_int = libc::SIGPWR;

/// Splits a child of `host` into the supervisor and the server. Returns in the server (`Ok`:
/// the caller goes on to exec it); never returns in the supervisor. Fails, before anything was
/// forked, if the host has already died. `forked`: the process is a fork of the host, whose
/// memory the supervisor then gives back; `false` for a supervisor that is a program of its
/// own ([`crate::reexec`]).
///
/// # Safety
///
/// Call only in a child of `host` before exec — one forked from it (a `pre_exec` hook), or
/// one started as a supervisor, before `main`: the supervisor never leaves this function and
/// ends with `_exit`.
#[allow(unsafe_code)]
pub(crate) unsafe fn split(host: pid_t, wake: c_int, forked: bool) -> std::io::Result<()> {
    // SAFETY (every block below): plain system calls and libc's signal-set helpers on local
    // values; none allocates or locks.
    let before = unsafe {
        let mut all = empty_set();
        libc::sigfillset(&mut all);
        let mut before = empty_set();
        check(libc::sigprocmask(libc::SIG_SETMASK, &all, &mut before))?;
        // Blocked, SIGCHLD is queued for sigwaitinfo, unless ignored: take the default.
        let mut default: libc::sigaction = MaybeUninit::zeroed().assume_init();
        default.sa_sigaction = libc::SIG_DFL;
        check(libc::sigaction(
            libc::SIGCHLD,
            &default,
            std::ptr::null_mut(),
        ))?;
        check(libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))?;
        check(libc::prctl(libc::PR_SET_PDEATHSIG, wake, 0, 0, 0))?;
        before
    };
    // The host died after the fork but before the signal was armed: the child was
    // re-parented already and would never get it. Give up; exec does not happen.
    if unsafe { libc::getppid() } != host {
        return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
    }
    let supervisor = own_pid();
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()),
        0 => unsafe {
            // The server: dies with the supervisor, and starts with the signal mask std set.
            check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0))?;
            if libc::getppid() != supervisor {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            check(libc::sigprocmask(
                libc::SIG_SETMASK,
                &before,
                std::ptr::null_mut(),
            ))?;
            Ok(())
        },
        server => unsafe { supervise(host, server, wake, forked) },
    }
}

/// The supervisor's life: waits for signals until the server exits or the host dies.
#[allow(unsafe_code)]
unsafe fn supervise(host: pid_t, server: pid_t, wake: c_int, forked: bool) -> ! {
    // SAFETY: as in `split`; the supervisor runs nothing else.
    unsafe {
        let own_group = libc::getpgrp();
        // Before the descriptors: std's error pipe closes here, so the host's spawn returns
        // only once this process holds no copy of the host's memory.
        if forked {
            release_memory();
        }
        drop_descriptors();
        let mut all = empty_set();
        libc::sigfillset(&mut all);
        let mut ended: Option<c_int> = None;
        loop {
            let mut info: libc::siginfo_t = MaybeUninit::zeroed().assume_init();
            let signal = libc::sigwaitinfo(&all, &mut info);
            loop {
                let mut status: c_int = 0;
                let pid = libc::waitpid(-1, &mut status, libc::WNOHANG | libc::__WALL);
                if pid <= 0 {
                    break;
                }
                if pid == server {
                    ended = Some(status);
                }
            }
            if libc::getppid() != host {
                // The host is gone: nobody reads the server any more.
                kill_all(ended.is_none().then_some(server));
                libc::_exit(1);
            }
            if let Some(status) = ended {
                kill_all(None);
                exit_as(status);
            }
            if signal != wake && FORWARDED.contains(&signal) && libc::getpgid(server) != own_group {
                libc::kill(server, signal);
            }
        }
    }
}

/// Points stdin, stdout and stderr at `/dev/null` and closes every other descriptor: the
/// host then sees end of file on the server's pipes when the server's side closes, and std's
/// exec-error pipe carries the server's exec, not the supervisor's.
#[allow(unsafe_code)]
unsafe fn drop_descriptors() {
    // SAFETY: plain system calls on descriptors this process owns.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        for fd in 0..3 {
            if null >= 0 {
                libc::dup2(null, fd);
            } else {
                libc::close(fd);
            }
        }
        close_from(3);
    }
}

/// Closes every descriptor from `first` on.
#[allow(unsafe_code)]
pub(crate) fn close_from(first: c_int) {
    // SAFETY: plain system calls; the caller owns every descriptor from `first` on.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first as u32, u32::MAX, 0u32) != 0 {
            // Before Linux 5.9: one close per possible descriptor.
            let mut limit: libc::rlimit = MaybeUninit::zeroed().assume_init();
            let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                c_int::try_from(limit.rlim_cur.min(1 << 20)).unwrap_or(1 << 20)
            } else {
                1 << 16
            };
            for fd in first..max {
                libc::close(fd);
            }
        }
    }
}

/// This process's pid from the kernel: glibc before 2.25 answers `getpid` from a cache that a
/// clone made with the raw system call (the zygote's) still holds its parent's pid in.
#[allow(unsafe_code)]
pub(crate) fn own_pid() -> pid_t {
    // SAFETY: `getpid` has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_getpid) as pid_t }
}

/// Gives back the host's memory this process holds: a fork shares the host's pages until
/// either side writes one, and the host goes on writing its heap, so a supervisor would end
/// up holding a copy of it all. Every private writable anonymous mapping (the heap, other
/// threads' stacks, allocator arenas) is dropped with `MADV_DONTNEED`, except the one this
/// thread runs on (its stack, with its thread control block), mappings that carry a name
/// (`[stack]`, `[vdso]`, files) and anonymous ones that directly follow a file mapping (a
/// library's `.bss`, whose variables libc may read). The supervisor touches nothing else.
#[allow(unsafe_code)]
unsafe fn release_memory() {
    let here = 0u8;
    let stack = std::ptr::addr_of!(here) as usize;
    // SAFETY: reads of /proc/self/maps into a stack buffer; madvise on mappings this process
    // never touches again (see above).
    unsafe {
        let maps = libc::open(
            c"/proc/self/maps".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if maps < 0 {
            return;
        }
        let mut buffer = [0u8; 8192];
        let mut filled = 0;
        // The end of the previous mapping, when that one had a file name.
        let mut after_file = 0usize;
        while let Some(free) = buffer.get_mut(filled..) {
            let read = libc::read(maps, free.as_mut_ptr().cast(), free.len());
            let Ok(read) = usize::try_from(read) else {
                break;
            };
            if read == 0 {
                break;
            }
            filled += read;
            let mut start = 0;
            while let Some(end) = buffer
                .get(start..filled)
                .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
            {
                if let Some(line) = buffer.get(start..start + end) {
                    after_file = release_mapping(line, stack, after_file);
                }
                start += end + 1;
            }
            if start == 0 && filled == buffer.len() {
                // A line longer than the buffer (a long file name): skip it.
                filled = 0;
                after_file = 0;
                continue;
            }
            buffer.copy_within(start..filled, 0);
            filled -= start;
        }
        libc::close(maps);
    }
}

/// Drops the mapping of one `/proc/self/maps` line (`start-end perms offset dev inode
/// [name]`) if it is private, writable, anonymous, unnamed, not after a file mapping
/// (`after_file`: where the previous file mapping ended) and not holding `stack`. Returns
/// where this mapping ends if it is a file mapping, else 0.
#[allow(unsafe_code)]
unsafe fn release_mapping(line: &[u8], stack: usize, after_file: usize) -> usize {
    let mut fields = line.split(|&b| b == b' ').filter(|f| !f.is_empty());
    let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
        return 0;
    };
    let (_offset, _device, inode) = (fields.next(), fields.next(), fields.next());
    let name = fields.next();
    let mut bounds = range.split(|&b| b == b'-').map(hex);
    let (Some(Some(start)), Some(Some(end))) = (bounds.next(), bounds.next()) else {
        return 0;
    };
    if name.is_some_and(|n| n.first() == Some(&b'/')) || inode.is_some_and(|i| i != b"0") {
        return end;
    }
    let droppable = perms.starts_with(b"rw") && perms.get(3) == Some(&b'p');
    let named = name.is_some_and(|n| n != b"[heap]");
    if droppable && !named && start < end && start != after_file && !(start..end).contains(&stack) {
        // SAFETY: a whole mapping of this process that it never touches again.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
        }
    }
    0
}

/// `text` as a hexadecimal number.
fn hex(text: &[u8]) -> Option<usize> {
    if text.is_empty() || text.len() > 16 {
        return None;
    }
    let mut value = 0usize;
    for &b in text {
        let digit = char::from(b).to_digit(16)?;
        value = value.checked_mul(16)?.checked_add(digit as usize)?;
    }
    Some(value)
}

/// Kills and reaps `server` (if given: it is still unreaped, so its pid is still its own),
/// then every child of this process, until none is left, or none that this process can find
/// and kill: one whose `/proc` entry it cannot see (a `/proc` of another pid namespace) or
/// that it may not signal (one that became another user) is left to init.
#[allow(unsafe_code)]
unsafe fn kill_all(server: Option<pid_t>) {
    // SAFETY: signals to this process's unreaped children (their pids cannot be reused: only
    // this process reaps them), waits, and reads of /proc into stack buffers.
    unsafe {
        let mut status = 0;
        if let Some(server) = server
            && libc::kill(server, libc::SIGKILL) == 0
        {
            libc::waitpid(server, &mut status, libc::__WALL);
        }
        let me = own_pid();
        while has_children() {
            // Each child listed is killed and reaped at once; reaping re-parents its own
            // children here, for a later scan.
            let mut reaped = false;
            let scanned = each_child(me, |pid| {
                // `/proc` says so, but only an unreaped child of this very process is sure
                // to be that process: a `/proc` of another pid namespace lists other
                // processes under these numbers.
                if is_child(pid) && libc::kill(pid, libc::SIGKILL) == 0 {
                    reaped |= libc::waitpid(pid, &mut status, libc::__WALL) == pid;
                }
            });
            while libc::waitpid(-1, &mut status, libc::WNOHANG | libc::__WALL) > 0 {
                reaped = true;
            }
            if !scanned || !reaped {
                return;
            }
        }
    }
}

/// Whether this process has a child, ended or not, that it has not reaped.
#[allow(unsafe_code)]
unsafe fn has_children() -> bool {
    // SAFETY: a wait that reaps nothing (WNOWAIT) and blocks for nothing (WNOHANG).
    unsafe { unreaped(libc::P_ALL, 0) }
}

/// Whether `pid` is a child of this process that it has not reaped.
#[allow(unsafe_code)]
unsafe fn is_child(pid: pid_t) -> bool {
    let Ok(id) = libc::id_t::try_from(pid) else {
        return false;
    };
    // SAFETY: as in `has_children`.
    unsafe { unreaped(libc::P_PID, id) }
}

/// `waitid` for `id` without reaping or blocking: fails (`ECHILD`) only when no such child
/// exists.
#[allow(unsafe_code)]
unsafe fn unreaped(kind: libc::idtype_t, id: libc::id_t) -> bool {
    // SAFETY: a wait into a local; WNOWAIT leaves any ended child unreaped.
    unsafe {
        let mut info: libc::siginfo_t = MaybeUninit::zeroed().assume_init();
        let options = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT | libc::__WALL;
        libc::waitid(kind, id, &mut info, options) == 0
    }
}

/// Calls `found` with the pid of every child of `parent`, read from `/proc`; `false` if
/// `/proc` cannot be read.
#[allow(unsafe_code)]
unsafe fn each_child(parent: pid_t, mut found: impl FnMut(pid_t)) -> bool {
    // SAFETY: reads into stack buffers; every offset into them is checked.
    unsafe {
        let dir = libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if dir < 0 {
            return false;
        }
        // linux_dirent64 records: u64 inode, i64 offset, u16 length, u8 type, name + NUL.
        let mut buffer = [0u64; 512];
        loop {
            let read = libc::syscall(
                libc::SYS_getdents64,
                dir,
                buffer.as_mut_ptr(),
                std::mem::size_of_val(&buffer),
            );
            let Ok(read) = usize::try_from(read) else {
                break;
            };
            if read == 0 {
                break;
            }
            let bytes = std::slice::from_raw_parts(buffer.as_ptr().cast::<u8>(), read);
            let mut at = 0;
            while let Some(record) = bytes.get(at..) {
                let Some(&[low, high]) = record.get(16..18) else {
                    break;
                };
                let length = usize::from(u16::from_ne_bytes([low, high]));
                if length == 0 {
                    break;
                }
                let name = record.get(19..length.min(record.len())).unwrap_or(&[]);
                let name = name.split(|&b| b == 0).next().unwrap_or(&[]);
                if let Some(pid) = number(name)
                    && parent_of(pid) == Some(parent)
                {
                    found(pid);
                }
                at += length;
            }
        }
        libc::close(dir);
        true
    }
}

/// The parent of `pid`, from `/proc/<pid>/stat` (`pid (comm) state ppid …`).
#[allow(unsafe_code)]
unsafe fn parent_of(pid: pid_t) -> Option<pid_t> {
    let mut path = [0u8; 32];
    let mut at = 0;
    for part in [
        b"/proc/".as_slice(),
        digits(pid, &mut [0u8; 12]),
        b"/stat\0",
    ] {
        path.get_mut(at..at + part.len())?.copy_from_slice(part);
        at += part.len();
    }
    let mut stat = [0u8; 512];
    // SAFETY: a NUL-terminated path; a read into a stack buffer of its length.
    let read = unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let read = libc::read(fd, stat.as_mut_ptr().cast(), stat.len());
        libc::close(fd);
        read
    };
    let stat = stat.get(..usize::try_from(read).ok()?)?;
    let after = stat.get(stat.iter().rposition(|&b| b == b')')? + 1..)?;
    // " S 1234 …": the state, then the parent.
    let mut fields = after.split(|&b| b == b' ').filter(|f| !f.is_empty());
    fields.next()?;
    number(fields.next()?)
}

/// `text` as a positive decimal pid.
fn number(text: &[u8]) -> Option<pid_t> {
    if text.is_empty() || text.len() > 10 {
        return None;
    }
    let mut value: pid_t = 0;
    for &b in text {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(pid_t::from(b - b'0'))?;
    }
    (value > 0).then_some(value)
}

/// The decimal digits of `value` (non-negative), written into `buffer`.
fn digits(value: pid_t, buffer: &mut [u8; 12]) -> &[u8] {
    let mut value = value.unsigned_abs();
    let mut at = buffer.len();
    loop {
        at -= 1;
        buffer[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 || at == 0 {
            return &buffer[at..];
        }
    }
}

/// Ends this process the way the server ended: the same exit code, or the same signal
/// (without a core dump).
#[allow(unsafe_code)]
unsafe fn exit_as(status: c_int) -> ! {
    // SAFETY: plain system calls on this process.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            // A `core_pattern` that pipes to a program ignores the limit, not this.
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
            let mut default: libc::sigaction = MaybeUninit::zeroed().assume_init();
            default.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(signal, &default, std::ptr::null_mut());
            let mut only = empty_set();
            libc::sigaddset(&mut only, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &only, std::ptr::null_mut());
            libc::kill(own_pid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(libc::WEXITSTATUS(status));
    }
}

#[allow(unsafe_code)]
fn empty_set() -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set it is given.
    unsafe {
        let mut set = MaybeUninit::<libc::sigset_t>::zeroed().assume_init();
        libc::sigemptyset(&mut set);
        set
    }
}

fn check(result: c_int) -> std::io::Result<()> {
    if result == -1 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_digits() {
        assert_eq!(number(b"4242"), Some(4242));
        assert_eq!(number(b""), None);
        assert_eq!(number(b"self"), None);
        assert_eq!(number(b"0"), None);
        assert_eq!(number(b"99999999999"), None);
        assert_eq!(digits(4242, &mut [0; 12]), b"4242");
        assert_eq!(digits(0, &mut [0; 12]), b"0");
        assert_eq!(digits(pid_t::MAX, &mut [0; 12]), b"2147483647");
        assert_eq!(hex(b"7f1c2a021000"), Some(0x7f1c_2a02_1000));
        assert_eq!(hex(b"xyz"), None);
    }

    /// The `/proc/self/maps` range that holds `address`.
    fn mapping_of(address: usize) -> Option<(usize, usize)> {
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        maps.lines().find_map(|line| {
            let (start, end) = line.split(' ').next()?.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (start..end).contains(&address).then_some((start, end))
        })
    }

    #[test]
    fn a_threads_stack_mapping_holds_its_thread_control_block_and_errno() {
        // `release_memory` keeps, of the anonymous mappings, only the one holding the
        // supervisor's stack: what the supervisor's system calls use of its thread (errno,
        // the cancellation state that sigwaitinfo and waitpid check) must lie there too. The
        // supervisor is a fork of a blocking-pool thread, never of the main thread.
        let on_a_thread = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let here = 0u8;
                let stack = mapping_of(std::ptr::addr_of!(here) as usize);
                #[allow(unsafe_code)]
                // SAFETY: both only return this thread's addresses.
                let (errno, thread) = unsafe { (libc::__errno_location(), libc::pthread_self()) };
                (
                    stack,
                    mapping_of(errno as usize),
                    mapping_of(thread as usize),
                )
            })
            .unwrap()
            .join()
            .unwrap();
        let (stack, errno, thread) = on_a_thread;
        assert!(stack.is_some());
        assert_eq!(errno, stack, "errno lies outside the stack's mapping");
        assert_eq!(thread, stack, "the thread control block lies outside it");
    }

    #[test]
    fn the_parent_of_this_process_is_read_from_proc() {
        #[allow(unsafe_code)]
        let (me, parent) = unsafe { (libc::getpid(), libc::getppid()) };
        #[allow(unsafe_code)]
        let read = unsafe { parent_of(me) };
        assert_eq!(read, Some(parent));
    }
}
