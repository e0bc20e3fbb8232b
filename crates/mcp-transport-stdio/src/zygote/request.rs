//! A request to the zygote: what one server is started with, as bytes over the socket.

use std::ffi::{CStr, CString, OsString};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use nix::libc;

use crate::plan::Plan;

/// The largest request: arguments and environment together. A larger one is started the
/// other way (`E2BIG` here; the kernel's own bound on an `exec` is larger).
pub(super) const MAX_REQUEST: usize = 128 * 1024;

/// The descriptors a request carries: the server's stdin, stdout and stderr.
pub(super) const PIPES: usize = 3;

/// A request: `program`, then the server's `argv` (from `argv[0]`, the program again), its
/// environment as `NAME=value`, and its directory, each NUL-terminated, after two counts
/// (little-endian `u32`: arguments, environment entries).
pub(super) fn encode(plan: &Plan, cwd: &Path) -> std::io::Result<Vec<u8>> {
    let environment = plan.environment();
    let mut out = Vec::with_capacity(1024);
    let count = |n: usize| u32::try_from(n).map_err(std::io::Error::other);
    out.extend_from_slice(&count(plan.args.len() + 1)?.to_le_bytes());
    out.extend_from_slice(&count(environment.len())?.to_le_bytes());
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
    push(cwd.as_os_str().as_bytes())?;
    if out.len() > MAX_REQUEST {
        return Err(std::io::Error::from_raw_os_error(libc::E2BIG));
    }
    Ok(out)
}

/// A request as the zygote reads it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Request {
    pub(super) program: CString,
    pub(super) argv: Vec<CString>,
    pub(super) env: Vec<CString>,
    pub(super) cwd: CString,
}

/// Reads what [`encode`] wrote; `None` for anything else.
pub(super) fn decode(bytes: &[u8]) -> Option<Request> {
    let count = |at: usize| -> Option<usize> {
        let raw: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        usize::try_from(u32::from_le_bytes(raw)).ok()
    };
    let (argc, envc) = (count(0)?, count(4)?);
    if argc == 0 {
        return None;
    }
    let mut strings = bytes.get(8..)?.split_inclusive(|&b| b == 0);
    let mut next = || {
        CStr::from_bytes_with_nul(strings.next()?)
            .ok()
            .map(CStr::to_owned)
    };
    let program = next()?;
    let argv = (0..argc).map(|_| next()).collect::<Option<Vec<_>>>()?;
    let env = (0..envc).map(|_| next()).collect::<Option<Vec<_>>>()?;
    let cwd = next()?;
    next().is_none().then_some(Request {
        program,
        argv,
        env,
        cwd,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_back_as_written() {
        let mut plan = Plan::new("server").args(["--stdio", "x y"]);
        plan.env.clear = true;
        plan.env.vars = vec![("A".into(), "1=2".into())];
        let cwd = Path::new("/tmp");
        let request = decode(&encode(&plan, cwd).unwrap()).unwrap();
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
                cwd: c"/tmp".to_owned(),
            }
        );
        // Cut short, or with more than it announced: not a request.
        let bytes = encode(&plan, cwd).unwrap();
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
            encode(&plan, Path::new("/")).unwrap_err().kind(),
            std::io::ErrorKind::InvalidInput
        );
        let mut plan = Plan::new("server");
        plan.env.clear = true;
        plan.env.vars = vec![("BIG".into(), "x".repeat(MAX_REQUEST).into())];
        assert_eq!(
            encode(&plan, Path::new("/")).unwrap_err().raw_os_error(),
            Some(libc::E2BIG)
        );
        assert_eq!(
            encode(&Plan::new("server"), Path::new("/a\0b"))
                .unwrap_err()
                .kind(),
            std::io::ErrorKind::InvalidInput
        );
    }
}
