//! The stdio server binary, `mcp-test-server`: its arguments, its main loop, and how tests in
//! other crates find it.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use rmcp::model::JsonRpcMessage;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use tokio::io::AsyncBufReadExt as _;
use tokio::net::unix::pipe;
use tokio_util::either::Either;

use crate::{CrashAction, Observations, SkillHostility, Skills, TestServer, TestServerOptions};

/// The environment variable that overrides where [`binary`] looks for `mcp-test-server`.
pub const BINARY_ENV: &str = "MCP_TEST_SERVER_BIN";

/// The personality of the stdio server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
#[non_exhaustive]
pub enum Mode {
    /// The [`TestServer`] with all its tools.
    #[default]
    Test,
    /// The test server plus 1,000 synthetic tools, served 100 a page (both adjustable).
    Paginated,
    /// The test server, answering `initialize` after 30 s (adjustable with `--init-delay-ms`).
    SlowInitialize,
    /// The test server, staying up after stdin closes and ignoring SIGTERM.
    IgnoresStdinClose,
    /// Answers the first line it reads with non-JSON lines on stdout, then exits with status 2.
    GarbageOnStdout,
    /// Answers `initialize` with one line of `--message-bytes` bytes (default 50 MB), then
    /// stays up until stdin closes.
    OversizedInitialize,
    /// Answers `initialize` well and `tools/list` with a tool whose input schema nests
    /// `--depth` arrays (default 10,000), then stays up until stdin closes.
    DeepTools,
    /// Offers one resource, `test://gigabyte`, whose `resources/read` answer is one line of
    /// `--message-bytes` bytes (default 1 GiB), written as it is made, 1 MiB at a time, until
    /// the client stops reading; then stays up until stdin closes.
    HugeResource,
}

/// Arguments of `mcp-test-server`, and a builder for them in tests.
///
/// ```
/// use mcp_test_kit::stdio::{Mode, StdioServerArgs};
///
/// let args = StdioServerArgs::new(Mode::Paginated).with_page_size(50).to_args();
/// assert_eq!(args, ["--mode", "paginated", "--page-size", "50"]);
/// ```
#[derive(Debug, Clone, Default, Parser)]
#[command(
    name = "mcp-test-server",
    version,
    about = "MCP servers for tests, over stdio"
)]
#[non_exhaustive]
pub struct StdioServerArgs {
    /// The personality.
    #[arg(long, value_enum, default_value_t)]
    pub mode: Mode,
    /// Delay before answering `initialize`, in milliseconds.
    #[arg(long)]
    pub init_delay_ms: Option<u64>,
    /// How many synthetic tools to add.
    #[arg(long)]
    pub extra_tools: Option<usize>,
    /// Tools per `tools/list` page.
    #[arg(long)]
    pub page_size: Option<usize>,
    /// The size of the oversized message, in bytes.
    #[arg(long)]
    pub message_bytes: Option<usize>,
    /// The nesting depth of the deep message.
    #[arg(long)]
    pub depth: Option<usize>,
    /// Keep running after stdin closes.
    #[arg(long)]
    pub ignore_stdin_close: bool,
    /// Ignore SIGTERM.
    #[arg(long)]
    pub ignore_sigterm: bool,
    /// Print a few non-JSON lines on stdout before speaking MCP.
    #[arg(long)]
    pub stdout_noise: bool,
    /// List the `route` tool, whose arguments declare `x-mcp-header` (SEP-2243).
    #[arg(long)]
    pub header_params: bool,
    /// Answer `server/discover` (revision 2026-07-28): a discovering client then speaks
    /// 2026-07-28, where a tool asks for input with an input-required result.
    #[arg(long)]
    pub discover: bool,
    /// List the `ask` tool, which sends the client the elicitation request it is given.
    #[arg(long)]
    pub ask: bool,
    /// List the tools the MCP conformance suite's server scenarios call by name
    /// (`test_simple_text`, …, `json_schema_2020_12_tool`).
    #[arg(long)]
    pub suite_tools: bool,
    /// Offer resources (with subscriptions), templates, prompts and completions, well-formed
    /// and hostile ones, and list the `flood_updates` and `roots` tools.
    #[arg(long)]
    pub features: bool,
    /// Offer the resources, templates, prompts and completions the MCP conformance suite's
    /// server scenarios read by name (`test://static-text`, …, `test_simple_prompt`, …).
    #[arg(long)]
    pub suite_resources: bool,
    /// Append calls and cancellations to this file (JSON lines; see [`crate::RecordFile`]).
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Serve the skills below this directory (the skills extension): each folder holding a
    /// `SKILL.md` is one.
    #[arg(long, value_name = "DIR")]
    pub skills: Option<PathBuf>,
    /// Serve hostile skills too (repeatable): `wrong-digest`, `wrong-size`, `many-files`,
    /// `escapes`.
    #[arg(long, value_enum, value_name = "KIND")]
    pub skills_hostile: Vec<SkillHostility>,
    /// Serve over streamable HTTP on 127.0.0.1 (ephemeral port) instead of stdio; prints the
    /// URL as the first line of stdout and runs until stdin closes.
    #[arg(long)]
    pub http: bool,
    /// Hostile: before serving, start four 10-minute `sleep` processes that try to outlive the
    /// server — one in its process group, one orphaned in its group (a shell that exits at
    /// once), one in a session of its own (`setsid`), one orphaned in a session of its own (a
    /// daemon's double fork) — and write the server's own pid and then theirs to this file,
    /// one a line ([`escapees`] reads it).
    #[arg(long, value_name = "FILE")]
    pub escapees: Option<PathBuf>,
}

impl StdioServerArgs {
    /// Arguments for `mode` with its defaults.
    pub fn new(mode: Mode) -> Self {
        Self {
            mode,
            ..Self::default()
        }
    }

    /// Sets the `initialize` delay.
    pub fn with_init_delay(mut self, delay: Duration) -> Self {
        self.init_delay_ms = Some(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX));
        self
    }

    /// Sets the number of synthetic tools.
    pub fn with_extra_tools(mut self, count: usize) -> Self {
        self.extra_tools = Some(count);
        self
    }

    /// Sets the page size of `tools/list`.
    pub fn with_page_size(mut self, size: usize) -> Self {
        self.page_size = Some(size);
        self
    }

    /// Sets the size of the oversized message.
    pub fn with_message_bytes(mut self, bytes: usize) -> Self {
        self.message_bytes = Some(bytes);
        self
    }

    /// Sets the nesting depth of the deep message.
    pub fn with_depth(mut self, depth: usize) -> Self {
        self.depth = Some(depth);
        self
    }

    /// Records calls and cancellations into `path`.
    pub fn with_record(mut self, path: impl Into<PathBuf>) -> Self {
        self.record = Some(path.into());
        self
    }

    /// Starts processes that try to outlive the server, their pids written to `path`.
    pub fn with_escapees(mut self, path: impl Into<PathBuf>) -> Self {
        self.escapees = Some(path.into());
        self
    }

    /// Serves the skills below `dir`.
    pub fn with_skills(mut self, dir: impl Into<PathBuf>) -> Self {
        self.skills = Some(dir.into());
        self
    }

    /// Serves a hostile skill twist too.
    pub fn with_skills_hostile(mut self, hostility: SkillHostility) -> Self {
        self.skills_hostile.push(hostility);
        self
    }

    /// Prints non-JSON lines on stdout before speaking MCP.
    pub fn with_stdout_noise(mut self) -> Self {
        self.stdout_noise = true;
        self
    }

    /// The command-line arguments that parse back into `self`.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.mode != Mode::Test {
            let mode = self
                .mode
                .to_possible_value()
                .map(|v| v.get_name().to_owned());
            args.extend(["--mode".to_owned(), mode.unwrap_or_default()]);
        }
        let numbers = [
            ("--init-delay-ms", self.init_delay_ms),
            ("--extra-tools", self.extra_tools.map(|n| n as u64)),
            ("--page-size", self.page_size.map(|n| n as u64)),
            ("--message-bytes", self.message_bytes.map(|n| n as u64)),
            ("--depth", self.depth.map(|n| n as u64)),
        ];
        for (flag, value) in numbers {
            if let Some(value) = value {
                args.extend([flag.to_owned(), value.to_string()]);
            }
        }
        let flags = [
            ("--ignore-stdin-close", self.ignore_stdin_close),
            ("--ignore-sigterm", self.ignore_sigterm),
            ("--stdout-noise", self.stdout_noise),
            ("--http", self.http),
            ("--header-params", self.header_params),
            ("--discover", self.discover),
            ("--ask", self.ask),
            ("--suite-tools", self.suite_tools),
            ("--features", self.features),
            ("--suite-resources", self.suite_resources),
        ];
        args.extend(flags.iter().filter(|f| f.1).map(|f| f.0.to_owned()));
        if let Some(path) = &self.record {
            args.extend(["--record".to_owned(), path.display().to_string()]);
        }
        if let Some(path) = &self.escapees {
            args.extend(["--escapees".to_owned(), path.display().to_string()]);
        }
        if let Some(path) = &self.skills {
            args.extend(["--skills".to_owned(), path.display().to_string()]);
        }
        for hostility in &self.skills_hostile {
            if let Some(value) = hostility.to_possible_value() {
                args.extend(["--skills-hostile".to_owned(), value.get_name().to_owned()]);
            }
        }
        args
    }

    /// [`server_options`](Self::server_options) with the skills loaded (`--skills`,
    /// `--skills-hostile`).
    pub fn server_options_with_skills(&self) -> std::io::Result<TestServerOptions> {
        let options = self.server_options();
        if self.skills.is_none() && self.skills_hostile.is_empty() {
            return Ok(options);
        }
        let mut skills = match &self.skills {
            Some(dir) => Skills::from_dir(dir)?,
            None => Skills::default(),
        };
        for hostility in &self.skills_hostile {
            skills = skills.with_hostility(*hostility);
        }
        Ok(options.with_skills(skills))
    }

    /// The test-server options these arguments describe (mode presets applied).
    pub fn server_options(&self) -> TestServerOptions {
        let (extra, page, delay) = match self.mode {
            Mode::Paginated => (1_000, Some(100), 0),
            Mode::SlowInitialize => (0, None, 30_000),
            _ => (0, None, 0),
        };
        let observations = match &self.record {
            Some(path) => Observations::with_record_file(path),
            None => Observations::new(),
        };
        let mut options = TestServerOptions::default()
            .with_extra_tools(self.extra_tools.unwrap_or(extra))
            .with_init_delay(Duration::from_millis(self.init_delay_ms.unwrap_or(delay)))
            .with_observations(observations)
            .with_header_params(self.header_params)
            .with_discover(self.discover)
            .with_ask(self.ask)
            .with_suite_tools(self.suite_tools)
            .with_features(self.features)
            .with_suite_resources(self.suite_resources)
            .with_crash(CrashAction::ExitProcess(3));
        options.page_size = self.page_size.or(page).map(|n| n.max(1));
        options
    }

    fn ignores_stdin_close(&self) -> bool {
        self.ignore_stdin_close || self.mode == Mode::IgnoresStdinClose
    }

    fn ignores_sigterm(&self) -> bool {
        self.ignore_sigterm || self.mode == Mode::IgnoresStdinClose
    }
}

/// Runs the stdio server until stdin closes (or forever, if it ignores that); returns the
/// process exit code. The body of `mcp-test-server`.
pub async fn run(args: StdioServerArgs) -> std::io::Result<i32> {
    // Holding the signal stream keeps tokio's handler installed, which replaces the default
    // action (terminate): SIGTERM is then ignored.
    let _sigterm = if args.ignores_sigterm() {
        Some(tokio::signal::unix::signal(
            tokio::signal::unix::SignalKind::terminate(),
        )?)
    } else {
        None
    };
    eprintln!(
        "mcp-test-server: mode {:?}, pid {}",
        args.mode,
        std::process::id()
    );

    if let Some(path) = &args.escapees {
        crate::escape::start_escapees(path, 600)?;
    }
    if args.mode == Mode::GarbageOnStdout {
        return garbage().await;
    }
    if matches!(
        args.mode,
        Mode::OversizedInitialize | Mode::DeepTools | Mode::HugeResource
    ) {
        return hostile(&args).await;
    }
    if args.stdout_noise {
        let mut out = std::io::stdout().lock();
        writeln!(out, "mcp-test-server starting (this line is not JSON)")?;
        writeln!(out, "{{\"log\": \"nor is this a JSON-RPC message\"}}")?;
        out.flush()?;
    }

    if args.http {
        let server = crate::serve_http(args.server_options_with_skills()?).await?;
        println!("{}", server.url());
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while lines.next_line().await?.is_some() {}
        server.shutdown().await;
    } else {
        serve_stdio(TestServer::new(args.server_options_with_skills()?)).await;
    }

    if args.ignores_stdin_close() {
        // Not `eprintln!`, which panics when stderr is gone (its reader, the host, died).
        let _ = writeln!(
            std::io::stderr(),
            "mcp-test-server: stdin closed; staying up anyway"
        );
        std::future::pending::<()>().await;
    }
    Ok(0)
}

/// What a server started with `--escapees path` wrote, once it has written it all (`None`
/// before): its own pid, then the pids of the four processes it left.
pub fn escapees(path: &std::path::Path) -> Option<Vec<u32>> {
    crate::escape::read_escapees(path)
}

async fn serve_stdio<S: ServerHandler>(server: S) {
    let (stdin, stdout) = stdio();
    let transport = IgnoreIdlessErrors(AsyncRwTransport::new_server(stdin, stdout));
    match server.serve(transport).await {
        Ok(running) => {
            let _ = running.waiting().await;
        }
        // Not `eprintln!`: a server that stays up must survive a dead stderr reader.
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "mcp-test-server: handshake failed: {e}");
        }
    }
}

/// Stdin and stdout, read and written on the runtime's own threads when they are pipes (as
/// when a client spawned the server): tokio's `stdin()` and `stdout()` hand every read and
/// write to a blocking thread, a thread switch per message that a flood of notifications
/// pays thousands of times. Each pipe is opened anew (Linux: `/proc/self/fd`), so its
/// non-blocking mode is not shared with descriptors 0 and 1. Anything else (a terminal, a
/// file) keeps tokio's. The product's `mcp_serve::process_stdio` does the same; the kit
/// depends on no product crate.
fn stdio() -> (
    Either<pipe::Receiver, tokio::io::Stdin>,
    Either<pipe::Sender, tokio::io::Stdout>,
) {
    let input = reopened_pipe(0, |path| pipe::OpenOptions::new().open_receiver(path));
    let output = reopened_pipe(1, |path| pipe::OpenOptions::new().open_sender(path));
    (
        input.map_or_else(|| Either::Right(tokio::io::stdin()), Either::Left),
        output.map_or_else(|| Either::Right(tokio::io::stdout()), Either::Left),
    )
}

/// This process's descriptor `fd` opened anew with `open`, when it is a pipe.
fn reopened_pipe<T>(fd: u8, open: impl FnOnce(&str) -> std::io::Result<T>) -> Option<T> {
    use std::os::unix::fs::FileTypeExt as _;
    let path = format!("/proc/self/fd/{fd}");
    let metadata = std::fs::metadata(&path).ok()?;
    if !metadata.file_type().is_fifo() {
        return None;
    }
    open(&path).ok()
}

/// The stdio transport, minus the JSON-RPC errors without an id a client sends back for a
/// line of ours that was not JSON-RPC (`--stdout-noise`): they answer nothing the server
/// asked, and rmcp's server refuses any such message before the client has chosen a
/// lifecycle (after a `server/discover` answered method-not-found, before `initialize`).
struct IgnoreIdlessErrors<T>(T);

impl<T: Transport<RoleServer>> Transport<RoleServer> for IgnoreIdlessErrors<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.0.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.0.receive().await? {
                JsonRpcMessage::Error(error) if error.id.is_none() => {
                    let _ = writeln!(
                        std::io::stderr(),
                        "mcp-test-server: the client sent an error without id: {}",
                        error.error.message
                    );
                }
                message => return Some(message),
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.0.close()
    }
}

/// Reads one line, answers it with lines that are not JSON-RPC, and gives up.
async fn garbage() -> std::io::Result<i32> {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let _ = lines.next_line().await?;
    let mut out = std::io::stdout().lock();
    out.write_all(b"this is not JSON\n")?;
    out.write_all(b"{\"truncated\": \n")?;
    out.write_all(b"\xff\xfe invalid UTF-8 \x00\n")?;
    out.write_all(b"[1, 2, 3]\n")?;
    out.write_all(&vec![b'g'; 100_000])?;
    out.write_all(b"\n")?;
    out.flush()?;
    eprintln!("mcp-test-server: wrote garbage on stdout; exiting with status 2");
    Ok(2)
}

/// Speaks JSON-RPC by hand so that one answer can break the rules: an `initialize` answer of
/// `--message-bytes` bytes, a `tools/list` answer nested `--depth` levels deep, or a
/// `resources/read` answer of `--message-bytes` bytes never held whole. Then reads stdin until
/// it closes, so a client that waits learns nothing from the process ending.
async fn hostile(args: &StdioServerArgs) -> std::io::Result<i32> {
    use serde_json::{Value, json};
    use tokio::io::AsyncWriteExt as _;

    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::stdout();
    while let Some(line) = lines.next_line().await? {
        let Ok(request) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(id), Some(method)) = (request.get("id"), request["method"].as_str()) else {
            continue; // a notification
        };
        let answer = match method {
            "initialize" => {
                let version = request["params"]["protocolVersion"].clone();
                let capabilities = if args.mode == Mode::HugeResource {
                    json!({"tools": {}, "resources": {}})
                } else {
                    json!({"tools": {}})
                };
                let result = json!({
                    "protocolVersion": version,
                    "capabilities": capabilities,
                    "serverInfo": {"name": "hostile", "version": "1"},
                });
                let answer = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
                if args.mode == Mode::OversizedInitialize {
                    let bytes = args.message_bytes.unwrap_or(50_000_000);
                    // The padding goes into `instructions`; the line has `bytes` bytes in all.
                    let head = format!(
                        r#"{},"instructions":""#,
                        answer.strip_suffix("}}").unwrap_or(&answer)
                    );
                    let pad = bytes.saturating_sub(head.len() + 3);
                    format!("{head}{}\"}}}}", "x".repeat(pad))
                } else {
                    answer
                }
            }
            "tools/list" if args.mode == Mode::HugeResource => {
                json!({"jsonrpc": "2.0", "id": id, "result": {"tools": []}}).to_string()
            }
            "resources/list" => json!({"jsonrpc": "2.0", "id": id, "result": {"resources": [
                {"uri": "test://gigabyte", "name": "gigabyte"}]}})
            .to_string(),
            "resources/templates/list" => {
                json!({"jsonrpc": "2.0", "id": id, "result": {"resourceTemplates": []}}).to_string()
            }
            "resources/read" => {
                let bytes = args.message_bytes.unwrap_or(1 << 30);
                let head = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"contents":[{{"uri":"test://gigabyte","text":""#
                );
                let tail = "\"}]}}\n";
                let chunk = vec![b'x'; 1 << 20];
                let mut left = bytes.saturating_sub(head.len() + tail.len());
                let written: std::io::Result<()> = async {
                    out.write_all(head.as_bytes()).await?;
                    while left > 0 {
                        let n = left.min(chunk.len());
                        out.write_all(&chunk[..n]).await?;
                        left -= n;
                    }
                    out.write_all(tail.as_bytes()).await?;
                    out.flush().await
                }
                .await;
                if written.is_err() {
                    // The client stopped reading: wait for stdin to close.
                    while lines.next_line().await?.is_some() {}
                    return Ok(0);
                }
                continue;
            }
            "tools/list" => {
                let depth = args.depth.unwrap_or(10_000);
                // `{"default": [[…]]}` as the schema of one property.
                let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
                let schema = format!(
                    r#"{{"type":"object","properties":{{"deep":{{"default":{nested}}}}}}}"#
                );
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"deep","inputSchema":{schema}}}]}}}}"#
                )
            }
            _ => json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {"code": -32601, "message": "method not found"},
            })
            .to_string(),
        };
        out.write_all(answer.as_bytes()).await?;
        out.write_all(b"\n").await?;
        out.flush().await?;
    }
    Ok(0)
}

/// The path of the `mcp-test-server` binary, for tests of other crates.
///
/// Looks at `$MCP_TEST_SERVER_BIN`, then beside the running test executable (cargo puts test
/// executables in `target/<profile>/deps/` and binaries in `target/<profile>/`). The binary
/// must be built first: `cargo build --workspace --bins` (which `cargo xtask test` runs).
///
/// # Panics
///
/// When the binary is not found, with a message saying how to build it.
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os(BINARY_ENV) {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the path of the running executable");
    let name = format!("mcp-test-server{}", std::env::consts::EXE_SUFFIX);
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join(&name))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "`{name}` not found beside {}: run `cargo build --workspace --bins` (or \
                 `cargo xtask test`), or set {BINARY_ENV}",
                exe.display()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_round_trip() {
        let args = StdioServerArgs {
            mode: Mode::SlowInitialize,
            init_delay_ms: Some(5),
            extra_tools: Some(3),
            page_size: Some(2),
            message_bytes: Some(7),
            depth: Some(9),
            ignore_stdin_close: true,
            ignore_sigterm: true,
            stdout_noise: true,
            record: Some(PathBuf::from("/tmp/r.jsonl")),
            http: true,
            header_params: true,
            discover: true,
            ask: true,
            suite_tools: true,
            features: true,
            suite_resources: true,
            escapees: Some(PathBuf::from("/tmp/e.pids")),
            skills: Some(PathBuf::from("/tmp/skills")),
            skills_hostile: vec![SkillHostility::WrongDigest, SkillHostility::Escapes],
        };
        let parsed = StdioServerArgs::try_parse_from(
            std::iter::once("mcp-test-server".to_owned()).chain(args.to_args()),
        )
        .unwrap();
        assert_eq!(parsed.to_args(), args.to_args());
        assert_eq!(parsed.mode, Mode::SlowInitialize);
        assert_eq!(parsed.record, args.record);
        assert_eq!(parsed.escapees, args.escapees);
        assert!(parsed.server_options().header_params);
        assert!(parsed.server_options().ask);
        assert!(parsed.server_options().suite_tools);
    }

    #[test]
    fn presets_fill_what_is_not_given() {
        let options = StdioServerArgs::new(Mode::Paginated).server_options();
        assert_eq!((options.extra_tools, options.page_size), (1_000, Some(100)));
        let options = StdioServerArgs::new(Mode::Paginated)
            .with_extra_tools(5)
            .server_options();
        assert_eq!(options.extra_tools, 5);
        let options = StdioServerArgs::new(Mode::SlowInitialize).server_options();
        assert_eq!(options.init_delay, Duration::from_secs(30));
    }
}
