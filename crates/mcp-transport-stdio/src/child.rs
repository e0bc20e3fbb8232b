//! A started server's first process as the host holds it: a `std::process::Child` the host
//! spawned, or (Linux with glibc) a child the zygote cloned on the host's behalf, which std
//! cannot wrap, known by its pid. Both have std's shape: the pipes as fields, `id`, `kill`,
//! `try_wait` and `wait`.

use std::process::{ChildStderr, ChildStdin, ChildStdout, ExitStatus};

/// A child of this process with its pipes (see the [module docs](self)).
#[derive(Debug)]
pub(crate) struct Supervised {
    pub(crate) stdin: Option<ChildStdin>,
    pub(crate) stdout: Option<ChildStdout>,
    pub(crate) stderr: Option<ChildStderr>,
    process: Process,
}

#[derive(Debug)]
enum Process {
    Std(std::process::Child),
    /// A child by pid, with its status once reaped (after which the pid is not ours).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    Adopted {
        pid: nix::unistd::Pid,
        status: Option<ExitStatus>,
    },
}

impl From<std::process::Child> for Supervised {
    fn from(mut child: std::process::Child) -> Self {
        Self {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            process: Process::Std(child),
        }
    }
}

impl Supervised {
    /// A child of this process that nothing else waits for, with its pipes.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    pub(crate) fn adopt(
        pid: nix::unistd::Pid,
        stdin: std::os::fd::OwnedFd,
        stdout: std::os::fd::OwnedFd,
        stderr: std::os::fd::OwnedFd,
    ) -> Self {
        Self {
            stdin: Some(stdin.into()),
            stdout: Some(stdout.into()),
            stderr: Some(stderr.into()),
            process: Process::Adopted { pid, status: None },
        }
    }

    /// The child's pid.
    pub(crate) fn id(&self) -> u32 {
        match &self.process {
            Process::Std(child) => child.id(),
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            Process::Adopted { pid, .. } => pid.as_raw().unsigned_abs(),
        }
    }

    /// SIGKILL, unless the child was reaped already (then nothing: its pid is not ours).
    pub(crate) fn kill(&mut self) -> std::io::Result<()> {
        match &mut self.process {
            Process::Std(child) => child.kill(),
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            Process::Adopted {
                status: Some(_), ..
            } => Ok(()),
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            Process::Adopted { pid, status: None } => {
                nix::sys::signal::kill(*pid, nix::sys::signal::Signal::SIGKILL)
                    .map_err(std::io::Error::from)
            }
        }
    }

    /// The exit status if the child has ended (reaping it), `None` while it runs.
    pub(crate) fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        match &mut self.process {
            Process::Std(child) => child.try_wait(),
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            Process::Adopted { pid, status } => reap(*pid, status, false),
        }
    }

    /// Waits for the child to end and reaps it.
    pub(crate) fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match &mut self.process {
            Process::Std(child) => child.wait(),
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            Process::Adopted { pid, status } => reap(*pid, status, true)?
                .ok_or_else(|| std::io::Error::other("waitpid returned no status")),
        }
    }
}

/// `waitpid` on `pid` (blocking or not), remembering the status as std does.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn reap(
    pid: nix::unistd::Pid,
    status: &mut Option<ExitStatus>,
    block: bool,
) -> std::io::Result<Option<ExitStatus>> {
    use std::os::unix::process::ExitStatusExt as _;

    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};

    if let Some(status) = status {
        return Ok(Some(*status));
    }
    let flags = (!block).then_some(WaitPidFlag::WNOHANG);
    loop {
        // The raw status std reads: the code in the second byte, or the signal and the
        // core-dump bit in the first.
        let raw = match waitpid(pid, flags) {
            Ok(WaitStatus::StillAlive) => return Ok(None),
            Ok(WaitStatus::Exited(_, code)) => (code & 0xff) << 8,
            Ok(WaitStatus::Signaled(_, signal, core)) => {
                signal as i32 | if core { 0x80 } else { 0 }
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        };
        let done = ExitStatus::from_raw(raw);
        *status = Some(done);
        return Ok(Some(done));
    }
}
