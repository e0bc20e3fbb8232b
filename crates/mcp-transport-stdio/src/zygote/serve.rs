//! The zygote's side: a process of one thread, the host's executable caught before `main`,
//! that clones a supervisor for each request it reads (see the [parent module](super)).

use std::ffi::CStr;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};

use nix::libc::{self, c_char, c_int, pid_t};
use nix::sys::socket::{self, MsgFlags};

use super::request::{MAX_REQUEST, PIPES, Request, decode};
use crate::startup::{MAGIC_WITH_PID, write_record};

/// [`crate::ZYGOTE_COMM`] for `prctl`.
pub(super) const COMM: &CStr = c"mcp-zygote";

/// How long the zygote waits for a request before it ends.
pub(super) const IDLE_MS: u16 = 10_000;

/// The zygote's life, from the entry before `main` ([`crate::entry`]): its stdin is the
/// socket. Serves requests until the host closes the socket or none comes for [`IDLE_MS`].
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
        // A failure record to a pipe the host has given up on must not end the zygote.
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        // Whatever the host let its children inherit would be held for the zygote's life.
        crate::supervisor::close_from(3);
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
                answer(socket, 0);
                continue;
            };
            let request = if truncated {
                None
            } else {
                decode(&buffer[..len])
            };
            let Some(request) = request else {
                report(&fds[1], libc::E2BIG);
                answer(socket, 0);
                continue;
            };
            // CLONE_PARENT: the clone's parent is the host (see the module docs). Without
            // CLONE_VM it is a copy of this process, as after `fork`.
            let flags = libc::CLONE_PARENT as libc::c_ulong | libc::SIGCHLD as libc::c_ulong;
            match libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) {
                -1 => {
                    report(
                        &fds[1],
                        std::io::Error::last_os_error()
                            .raw_os_error()
                            .unwrap_or(libc::EAGAIN),
                    );
                    answer(socket, 0);
                }
                0 => become_supervisor(host, &request, &fds),
                clone => answer(socket, pid_t::try_from(clone).unwrap_or(0)),
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

/// Answers a request on the socket: the pid of the clone made for it, or 0 when none was. The
/// host learns it before the clone's record, so a clone that ends before writing that record
/// is still reaped.
fn answer(socket: RawFd, pid: pid_t) {
    let bytes = pid.to_le_bytes();
    loop {
        // SAFETY: `send` of a local buffer on the zygote's socket.
        #[allow(unsafe_code)]
        let sent = unsafe {
            libc::send(
                socket,
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if usize::try_from(sent) == Ok(bytes.len()) {
            return;
        }
        if sent == -1 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        // An answer lost would pair the host's later requests with the wrong clones: end
        // instead (the host reads the clone's own record, then starts another zygote).
        // SAFETY: the end of this process.
        #[allow(unsafe_code)]
        unsafe {
            libc::_exit(1)
        };
    }
}

/// Writes a failure record (no clone, so pid 0) on the server's stdout pipe.
fn report(stdout: &OwnedFd, errno: c_int) {
    write_record(stdout.as_raw_fd(), MAGIC_WITH_PID, errno, Some(0));
}

/// The clone's start: the request's pipes as stdin, stdout and stderr, a group of its own,
/// the request's environment and directory; then a supervisor like any other. Every failure
/// before that is reported in a record with this clone's pid, so the host reaps it.
///
/// # Safety
///
/// Only in the zygote's clone, which has one thread.
#[allow(unsafe_code)]
unsafe fn become_supervisor(host: pid_t, request: &Request, fds: &[OwnedFd; PIPES]) -> ! {
    let fail = |stdout: RawFd, code: c_int| -> ! {
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        write_record(
            stdout,
            MAGIC_WITH_PID,
            errno,
            Some(crate::supervisor::own_pid()),
        );
        // SAFETY: the end of this process.
        unsafe { libc::_exit(code) }
    };
    // SAFETY: system calls on this process (one thread) and descriptors it owns; the
    // environment is changed while no other thread can read it.
    unsafe {
        // A clone that ends before its record, as one killed at this point would.
        #[cfg(test)]
        if request.program.as_bytes() == super::tests::ENDS_BEFORE_ITS_RECORD.as_bytes() {
            libc::_exit(9);
        }
        // As a process the host spawned would have it (the zygote ignores it).
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        if libc::setpgid(0, 0) != 0 {
            fail(fds[1].as_raw_fd(), 126);
        }
        for (target, fd) in fds.iter().enumerate() {
            // `dup2` leaves the copy without close-on-exec.
            if libc::dup2(fd.as_raw_fd(), target as c_int) == -1 {
                fail(fds[1].as_raw_fd(), 126);
            }
        }
        // The socket and the received copies: nothing of the zygote's reaches the server.
        crate::supervisor::close_from(3);
        libc::clearenv();
        for entry in &request.env {
            // `putenv` keeps the pointer: the request lives until `exec`.
            libc::putenv(entry.as_ptr().cast_mut());
        }
        if libc::chdir(request.cwd.as_ptr()) != 0 {
            fail(1, 127);
        }
        let mut argv: Vec<*const c_char> = request.argv.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        crate::startup::start_server(
            host,
            &request.program,
            argv.as_ptr(),
            crate::startup::Record::WithPid,
        )
    }
}
