//! Over stdio the server reads and writes its pipes non-blocking through descriptors of its
//! own: descriptors 0 and 1, which a wrapper or the host's other children may share, keep
//! their mode.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::support::bounded;

/// `O_NONBLOCK` in the `flags` of `/proc/PID/fdinfo/FD` (octal; Linux).
const O_NONBLOCK: u32 = 0o4000;

/// The status flags of descriptor `fd` of process `pid`.
fn flags(pid: u32, fd: &str) -> u32 {
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap();
    let octal = info
        .lines()
        .find_map(|line| line.strip_prefix("flags:"))
        .unwrap_or_else(|| panic!("no flags in {info}"));
    u32::from_str_radix(octal.trim(), 8).unwrap()
}

/// The descriptors of process `pid` other than `fd` open on what `fd` is open on.
fn others_on(pid: u32, fd: &str) -> Vec<String> {
    let target = |name: &str| std::fs::read_link(format!("/proc/{pid}/fd/{name}")).ok();
    let pipe = target(fd).expect("the descriptor");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name != fd && target(name).as_ref() == Some(&pipe))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_pipes_are_opened_anew_and_descriptors_0_and_1_keep_their_mode() {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-serve-demo"))
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the demo server");
    let pid = child.id().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    stdin
        .write_all(
            concat!(
                r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"#,
                r#""2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
                "\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    // Answered: the session reads and writes its pipes.
    let answer = bounded("the initialize answer", lines.next_line()).await;
    assert!(answer.unwrap().unwrap().contains(r#""id":0"#));

    for fd in ["0", "1"] {
        assert_eq!(
            flags(pid, fd) & O_NONBLOCK,
            0,
            "descriptor {fd} left blocking"
        );
        let own = others_on(pid, fd);
        assert!(
            own.iter().any(|o| flags(pid, o) & O_NONBLOCK != 0),
            "a non-blocking descriptor of its own beside {fd}: {own:?}"
        );
    }
    drop(stdin);
    let status = bounded("the server exits at stdin's end", child.wait()).await;
    assert!(status.unwrap().success());
}
