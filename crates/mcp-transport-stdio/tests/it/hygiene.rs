//! Linux process hygiene beyond the process group: a server dies with its host even when the
//! host is SIGKILLed, and processes that escaped the group with `setsid` die at close and on
//! drop.

#![cfg(target_os = "linux")]

use crate::common;

use std::io::{BufRead as _, Read as _};
use std::process::Stdio;
use std::time::Duration;

use common::*;
use mcp_connector::ConnectionHandle as _;
use mcp_test_kit::stdio::{Mode, StdioServerArgs};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

/// Set in the environment of the re-executed test binary that plays the host.
const HOST_ENV: &str = "MCP_STDIO_TEST_HOST";

/// Where the host's server writes the pids of its escapees, if set.
const ESCAPEES_ENV: &str = "MCP_STDIO_TEST_ESCAPEES";

/// Set when the host is to print its server's pid only once the thread that forked the
/// server's supervisor has ended.
const FORKER_ENDED_ENV: &str = "MCP_STDIO_TEST_FORKER_ENDED";

/// The threads of this process named `name` (cut to the 15 bytes `comm` keeps).
fn threads_named(name: &str) -> usize {
    let name = &name[..name.len().min(15)];
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .filter(|comm| comm.trim() == name)
                .count()
        })
        .unwrap_or(0)
}

/// SIGKILLs a process when dropped, so a failing test leaves nothing behind.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if running(self.0) {
            let _ = kill(pid(self.0), Signal::SIGKILL);
        }
    }
}

fn pid(pid: u32) -> Pid {
    Pid::from_raw(i32::try_from(pid).unwrap())
}

fn running(pid: u32) -> bool {
    mcp_test_kit::procs::running(pid)
}

/// `(parent, session)` of `pid`, from `/proc`.
fn parent_and_session(pid: u32) -> Option<(u32, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some((fields.get(1)?.parse().ok()?, fields.get(3)?.parse().ok()?))
}

/// The host of [`a_sigkilled_host_takes_its_server_along`]: opens a server that ignores both
/// stdin closing and SIGTERM (and survives its pipes' reader dying), prints its pid once the
/// handshake is done, and waits for its own stdin to close. With [`ESCAPEES_ENV`] set, the
/// server also starts processes that try to outlive it (`--escapees`); with
/// [`FORKER_ENDED_ENV`] set, the pid is printed once the blocking-pool thread that forked the
/// server's supervisor has ended (the runtime's one worker is then its only thread).
#[test]
#[ignore = "the host process that a_sigkilled_host_takes_its_server_along starts and kills"]
fn host_process() {
    if std::env::var_os(HOST_ENV).is_none() {
        return;
    }
    let forker_ends = std::env::var_os(FORKER_ENDED_ENV).is_some();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("host-runtime")
        .thread_keep_alive(Duration::from_millis(if forker_ends { 1 } else { 60_000 }))
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut args = StdioServerArgs::new(Mode::IgnoresStdinClose);
        if let Some(path) = std::env::var_os(ESCAPEES_ENV) {
            args = args.with_escapees(path);
        }
        let (transport, handle) = connector().spawn(&spec("stubborn", &args)).await.unwrap();
        // After the handshake the server is up and serving, past its start-up output.
        let _client = rmcp::serve_client((), transport).await.unwrap();
        if forker_ends {
            assert!(eventually(LIMIT, || threads_named("host-runtime") == 1).await);
        }
        println!("server pid {}", handle.process_id());
        tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new()))
            .await
            .unwrap()
            .unwrap();
    });
}

/// Starts [`host_process`] (its server started with `--escapees escapees`, if given; printing
/// the pid once the forking thread ended, if `forker_ended`), waits for its server, SIGKILLs
/// the host and returns the server's pid.
async fn sigkill_a_host(
    escapees: Option<&std::path::Path>,
    forker_ended: bool,
) -> (u32, KillOnDrop) {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "hygiene::host_process",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(HOST_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(path) = escapees {
        command.env(ESCAPEES_ENV, path);
    }
    if forker_ended {
        command.env(FORKER_ENDED_ENV, "1");
    }
    let mut host = command.spawn().unwrap();
    let _host_guard = KillOnDrop(host.id());
    let stdout = host.stdout.take().unwrap();
    let server: u32 = bounded(tokio::task::spawn_blocking(move || {
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|line| line.strip_prefix("server pid ")?.trim().parse().ok())
    }))
    .await
    .unwrap()
    .expect("the host printed its server's pid");
    let server_guard = KillOnDrop(server);
    assert!(running(server));
    // Every child of the host: the server's supervisor, and (with glibc) the zygote.
    let children = children_of(host.id());
    assert!(children.contains(&server), "{children:?}");
    let _children_guard: Vec<KillOnDrop> = children.iter().map(|&p| KillOnDrop(p)).collect();

    kill(pid(host.id()), Signal::SIGKILL).unwrap();
    assert!(host.wait().is_ok());
    // The host's stdin pipe is still open here: the host did not end on its own.
    drop(host.stdin.take());
    mcp_test_kit::procs::assert_none_running(&children).await;
    (server, server_guard)
}

/// The processes whose parent is `parent`, from `/proc`.
fn children_of(parent: u32) -> Vec<u32> {
    let parent = parent.to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1).map(|p| p == parent))
                    .unwrap_or(false)
            })
        })
        .collect()
}

#[tokio::test]
async fn a_sigkilled_host_takes_its_server_and_every_other_child_along() {
    let (server, _guard) = sigkill_a_host(None, false).await;
    assert_not_running(server).await;
}

/// A unique path for a server's escapee pids.
fn escapees_path() -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "mcp-stdio-escapees-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ))
}

/// SIGKILLs a host whose server started escapees, and checks that none of them, the server
/// and its supervisor survives.
async fn sigkill_a_host_with_escapees(forker_ended: bool) {
    let path = escapees_path();
    let (server, _guard) = sigkill_a_host(Some(&path), forker_ended).await;
    // Written before the server answered `initialize`, so before the host printed its pid.
    // The server's own pid, then its four escapees'; `server` is the pid the host holds (the
    // server's supervisor).
    let mut all = mcp_test_kit::stdio::escapees(&path).expect("the server wrote its escapees");
    let _ = std::fs::remove_file(&path);
    let _guards: Vec<KillOnDrop> = all.iter().map(|&p| KillOnDrop(p)).collect();
    assert_eq!(all.len(), 5);
    all.push(server);
    mcp_test_kit::procs::assert_none_running(&all).await;
}

#[tokio::test]
async fn a_sigkilled_host_takes_the_servers_whole_tree_along() {
    sigkill_a_host_with_escapees(false).await;
}

#[tokio::test]
async fn a_sigkilled_host_takes_the_servers_tree_along_after_the_forking_thread_ended() {
    sigkill_a_host_with_escapees(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_outlives_the_thread_that_opened_it() {
    let runtime = tokio::runtime::Handle::current();
    let args = StdioServerArgs::new(Mode::Test);
    let opener = std::thread::spawn(move || {
        let tid = nix::unistd::gettid().as_raw();
        let opened = runtime.block_on(connector().spawn(&spec("long-lived", &args)));
        (tid, opened.unwrap())
    });
    let (tid, (transport, handle)) = opener.join().unwrap();
    let _guard = KillOnDrop(handle.process_id());
    // Gone from the task list: the thread has fully exited, so a parent-death signal tied to
    // it has been sent.
    let task = format!("/proc/self/task/{tid}");
    assert!(eventually(LIMIT, || !std::path::Path::new(&task).exists()).await);

    let client = bounded(rmcp::serve_client((), transport)).await.unwrap();
    let echoed = call(&client, "echo", json!({"alive": true})).await.unwrap();
    assert_eq!(echoed.structured_content, Some(json!({"alive": true})));
    assert!(running(handle.process_id()));
    bounded(client.cancel()).await.unwrap();
    bounded(handle.shutdown(Duration::from_secs(10))).await;
    assert_all_gone(handle.process_id()).await;
}

/// With glibc, the leader the host sees is the host's own executable as the supervisor
/// (`mcp-agent-supervisor host-pid`, cloned from the one started anew), not a fork of the host.
#[cfg(target_env = "gnu")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_supervisor_is_this_executable_not_a_fork_of_the_host() {
    let started = start("named", &StdioServerArgs::new(Mode::Test)).await;
    let leader = started.pid;
    let cmdline = std::fs::read(format!("/proc/{leader}/cmdline")).unwrap();
    let exe = std::fs::read_link(format!("/proc/{leader}/exe")).unwrap();
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    assert_eq!(
        args.first().map(String::as_str),
        Some("mcp-agent-supervisor"),
        "{args:?}"
    );
    assert_eq!(
        args.get(1),
        Some(&std::process::id().to_string()),
        "{args:?}"
    );
    assert_eq!(exe, std::env::current_exe().unwrap());
    let echoed = call(&started.client, "echo", json!({"named": true}))
        .await
        .unwrap();
    assert_eq!(echoed.structured_content, Some(json!({"named": true})));
}

/// Starts a server and has it spawn an escaped `sleep` (`escape`: `setsid` or `detach`);
/// returns the session and the sleep's pid, checked to be outside the server's group and in a
/// session of its own.
async fn with_escaped_child(name: &str, escape: &str) -> (Started, KillOnDrop) {
    let started = start(name, &StdioServerArgs::new(Mode::Test)).await;
    let spawned = call(&started.client, "spawn_child", json!({"escape": escape}))
        .await
        .unwrap();
    assert_ne!(spawned.is_error, Some(true), "{spawned:?}");
    let child = spawned.structured_content.unwrap()["pid"]
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
        .unwrap();
    let guard = KillOnDrop(child);
    assert!(running(child));
    assert_eq!(group_of(child), Some(child), "left the server's group");
    if escape == "detach" {
        // Its parent, a shell, exited; the supervisor, a child subreaper, adopted it.
        let server = started.pid;
        let adopted = eventually(LIMIT, || {
            parent_and_session(child).is_some_and(|(parent, _)| parent == server)
        })
        .await;
        assert!(adopted, "{:?}", parent_and_session(child));
    }
    assert_eq!(parent_and_session(child).map(|p| p.1), Some(child));
    (started, guard)
}

#[tokio::test]
async fn closing_kills_a_child_that_called_setsid() {
    let (started, child) = with_escaped_child("setsid-close", "setsid").await;
    // The server exits by itself when stdin closes, which cuts its link to the child.
    bounded(started.client.cancel()).await.unwrap();
    bounded(started.handle.shutdown(Duration::from_secs(10))).await;
    let diagnostics = started.handle.diagnostics().unwrap();
    assert!(
        diagnostics.ends_with("exited with status 0]"),
        "{diagnostics}"
    );
    assert_all_gone(started.pid).await;
    assert_not_running(child.0).await;
}

#[tokio::test]
async fn closing_kills_a_double_forked_daemon() {
    let (started, child) = with_escaped_child("detach-close", "detach").await;
    bounded(started.client.cancel()).await.unwrap();
    bounded(started.handle.shutdown(Duration::from_secs(10))).await;
    assert_all_gone(started.pid).await;
    assert_not_running(child.0).await;
}

#[tokio::test]
async fn dropping_kills_a_child_that_called_setsid() {
    let (started, child) = with_escaped_child("setsid-drop", "setsid").await;
    drop(started.handle);
    assert_all_gone(started.pid).await;
    assert_not_running(child.0).await;
}

#[tokio::test]
async fn dropping_kills_a_double_forked_daemon() {
    let (started, child) = with_escaped_child("detach-drop", "detach").await;
    drop(started.handle);
    assert_all_gone(started.pid).await;
    assert_not_running(child.0).await;
}

#[tokio::test]
async fn a_stubborn_server_and_its_escaped_child_are_killed_after_the_grace() {
    let mut args = StdioServerArgs::new(Mode::Test);
    args.ignore_stdin_close = true;
    args.ignore_sigterm = true;
    let started = start("stubborn-tree", &args).await;
    let spawned = call(&started.client, "spawn_child", json!({"escape": "setsid"}))
        .await
        .unwrap();
    let child = KillOnDrop(
        spawned.structured_content.unwrap()["pid"]
            .as_u64()
            .and_then(|p| u32::try_from(p).ok())
            .unwrap(),
    );
    bounded(started.client.cancel()).await.unwrap();
    bounded(started.handle.shutdown(Duration::from_millis(100))).await;
    let diagnostics = started.handle.diagnostics().unwrap();
    assert!(
        diagnostics.ends_with("was killed by SIGKILL]"),
        "{diagnostics}"
    );
    assert_all_gone(started.pid).await;
    assert_not_running(child.0).await;
}
