//! `tools search` with `[search]`: hybrid ranking through an OpenAI-compatible embeddings
//! endpoint played by the test (deterministic vectors, no model), and what happens when that
//! endpoint stalls, errs or answers nonsense (lexical results and a warning, never a failed
//! search). With the `embed-local` feature and the installed model, the same with
//! `embedder = { local = … }`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::mcp_agent;

/// A query whose words no demo tool uses: "tally" means counting words here.
const QUERY: &str = "tally the vocabulary of an essay";

/// What the endpoint does with a request that holds the query.
#[derive(Clone, Copy)]
enum OnQuery {
    Answer,
    Hang,
    Refuse,
    WrongDimension,
    NaN,
}

/// An `/v1/embeddings` endpoint on std: each text's vector says which concept it names
/// (counting words, time, anything else), so meaning ranks what words miss.
struct Endpoint {
    base_url: String,
    /// The longest text it was sent, in bytes.
    longest: Arc<AtomicUsize>,
}

fn vector(text: &str) -> Vec<f32> {
    let t = text.to_lowercase();
    if t.contains("word") || t.contains("tally") {
        vec![1.0, 0.0, 0.0]
    } else if t.contains("time") || t.contains("clock") {
        vec![0.0, 1.0, 0.0]
    } else {
        vec![0.0, 0.0, 1.0]
    }
}

impl Endpoint {
    fn start(on_query: OnQuery) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let longest = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&longest);
        std::thread::spawn(move || {
            for stream in listener.incoming().take(64) {
                let Ok(stream) = stream else { continue };
                let seen = Arc::clone(&seen);
                std::thread::spawn(move || answer(stream, on_query, &seen));
            }
        });
        Self {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            longest,
        }
    }
}

/// Reads one request and answers it.
fn answer(mut stream: TcpStream, on_query: OnQuery, longest: &AtomicUsize) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut length = 0usize;
    let mut authorization = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if line.to_ascii_lowercase().starts_with("authorization:") {
            authorization = line["authorization:".len()..].trim().to_owned();
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or_default();
    let texts: Vec<String> = match &request["input"] {
        Value::Array(items) => items
            .iter()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect(),
        Value::String(s) => vec![s.clone()],
        _ => Vec::new(),
    };
    for t in &texts {
        longest.fetch_max(t.len(), Ordering::SeqCst);
    }
    let is_query = texts.iter().any(|t| t.contains("tally"));
    let (status, body) = match (is_query, on_query) {
        (true, OnQuery::Hang) => {
            std::thread::sleep(Duration::from_secs(60));
            return;
        }
        // A hostile endpoint echoes the credentials it was sent.
        (true, OnQuery::Refuse) => (
            "400 Bad Request",
            json!({"error": {"message": format!("no, {authorization}")}}),
        ),
        (true, OnQuery::WrongDimension) => (
            "200 OK",
            json!({"data": [{"index": 0, "embedding": [1.0, 0.0]}]}),
        ),
        (true, OnQuery::NaN) => (
            "200 OK",
            json!({"data": [{"index": 0, "embedding": [1e300, 0.0, 0.0]}]}),
        ),
        _ => {
            let data: Vec<Value> = texts
                .iter()
                .enumerate()
                .map(|(i, t)| json!({"index": i, "embedding": vector(t)}))
                .collect();
            ("200 OK", json!({"data": data, "model": "concepts"}))
        }
    };
    let text = body.to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
}

fn demo_servers() -> String {
    json!([{
        "name": "demo",
        "transport": "stdio",
        "command": env!("CARGO_BIN_EXE_mcp-agent"),
        "args": ["demo-server"],
    }])
    .to_string()
}

/// A config file holding `toml`, removed with the value.
struct ConfigFile(PathBuf);

impl ConfigFile {
    fn new(name: &str, toml: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "mcp-agent-cli-search-{}-{name}.toml",
            std::process::id()
        ));
        std::fs::write(&path, toml).unwrap();
        Self(path)
    }
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        std::fs::remove_file(&self.0).ok();
    }
}

fn openai_config(name: &str, endpoint: &Endpoint, timeout_ms: u64) -> ConfigFile {
    ConfigFile::new(
        name,
        &format!(
            "[search]\nembedder = {{ openai = {{ base_url = {:?}, model = \"concepts\" }} }}\n\
             timeout_ms = {timeout_ms}\n",
            endpoint.base_url
        ),
    )
}

fn search(config: Option<&ConfigFile>, query: &str) -> Output {
    search_with(config, query, &[])
}

fn search_with(config: Option<&ConfigFile>, query: &str, env: &[(&str, &str)]) -> Output {
    let servers = demo_servers();
    let mut args = vec!["tools", "search", query, "--json"];
    let path;
    if let Some(config) = config {
        path = config.0.display().to_string();
        args.extend(["--file", path.as_str()]);
    }
    let mut env = env.to_vec();
    env.push(("MCP_AGENT__SERVERS", &servers));
    mcp_agent(&args, &env)
}

fn names(output: &Output) -> Vec<String> {
    let value: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)));
    value["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn words_alone_miss_the_tool_and_the_embedder_finds_it() {
    let lexical = search(None, QUERY);
    assert_eq!(lexical.status.code(), Some(0), "{}", stderr(&lexical));
    assert_ne!(
        names(&lexical).first().map(String::as_str),
        Some("demo__word_count")
    );

    let endpoint = Endpoint::start(OnQuery::Answer);
    let config = openai_config("hybrid", &endpoint, 10_000);
    let hybrid = search(Some(&config), QUERY);
    assert_eq!(hybrid.status.code(), Some(0), "{}", stderr(&hybrid));
    assert_eq!(names(&hybrid)[0], "demo__word_count");
    assert!(!stderr(&hybrid).contains("warning"), "{}", stderr(&hybrid));
}

/// Each fault: exit 0, the lexical ranking on stdout, a warning naming the cause on stderr.
#[test]
fn a_failing_embedder_gives_lexical_results_and_a_warning() {
    let lexical = names(&search(None, QUERY));
    for (fault, cause) in [
        (OnQuery::Hang, "no answer within 700 ms"),
        (OnQuery::Refuse, "400"),
        (OnQuery::WrongDimension, "dimension"),
        // JSON has no NaN: an f32 out of range is what a broken server can send.
        (OnQuery::NaN, "not an embeddings answer"),
    ] {
        let endpoint = Endpoint::start(fault);
        let config = openai_config("fault", &endpoint, 700);
        let started = Instant::now();
        let output = search(Some(&config), QUERY);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(0), "{err}");
        assert_eq!(names(&output), lexical, "{err}");
        assert!(err.contains("warning: lexical ranking only"), "{err}");
        assert!(err.contains(cause), "{cause}: {err}");
        assert!(started.elapsed() < Duration::from_secs(20), "{err}");
    }
}

#[test]
fn an_unreachable_endpoint_gives_lexical_results_and_a_warning() {
    // A port nothing listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = ConfigFile::new(
        "unreachable",
        &format!(
            "[search]\nembedder = {{ openai = {{ base_url = \"http://127.0.0.1:{port}/v1\", \
             model = \"concepts\" }} }}\ntimeout_ms = 1000\n"
        ),
    );
    let output = search(Some(&config), "count words");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(names(&output)[0], "demo__word_count");
    assert!(stderr(&output).contains("warning: lexical ranking only"));
}

#[test]
fn the_api_key_is_sent_and_never_shown() {
    const KEY: &str = "sk-embed-0123456789abcdef";
    let endpoint = Endpoint::start(OnQuery::Refuse);
    let config = ConfigFile::new(
        "key",
        &format!(
            "[search]\nembedder = {{ openai = {{ base_url = {:?}, model = \"concepts\", \
             api_key_env = \"EMBED_KEY\" }} }}\ntimeout_ms = 5000\n",
            endpoint.base_url
        ),
    );
    let output = search_with(Some(&config), QUERY, &[("EMBED_KEY", KEY)]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    // The endpoint echoed `Bearer <key>` into its refusal: the warning shows neither.
    assert!(err.contains("warning: lexical ranking only"), "{err}");
    assert!(!err.contains(KEY), "{err}");
    assert!(!String::from_utf8_lossy(&output.stdout).contains(KEY));

    // The variable unset: the run does not open, naming the variable (not a silent lexical).
    let output = search(Some(&config), QUERY);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("`EMBED_KEY` is not set"), "{err}");
}

#[test]
fn a_query_of_100_kb_is_refused_before_anything_is_embedded() {
    let endpoint = Endpoint::start(OnQuery::Answer);
    let config = openai_config("long", &endpoint, 10_000);
    let query = "tally ".repeat(100 * 1024 / 6);
    let started = Instant::now();
    let output = search(Some(&config), &query);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("1024 characters"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20));
    // The tools' texts were embedded; the query never was.
    assert!(endpoint.longest.load(Ordering::SeqCst) < 2048);
}

#[test]
fn a_missing_model_folder_is_a_config_error_naming_it() {
    let config = ConfigFile::new(
        "missing",
        "[search]\nembedder = { local = \"/nonexistent/all-MiniLM-L6-v2\" }\n",
    );
    let output = search(Some(&config), QUERY);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("/nonexistent/all-MiniLM-L6-v2"), "{err}");
    assert!(err.contains("search.embedder.local"), "{err}");
}

/// The installed all-MiniLM-L6-v2 folder ranks by meaning in-process.
#[cfg(feature = "embed-local")]
#[test]
fn a_local_model_ranks_by_meaning() {
    let Some(dir) = std::env::var_os("MCP_AGENT_PEER_MINILM") else {
        assert!(
            std::env::var_os("MCP_AGENT_REQUIRE_PEERS").is_none()
                && std::env::var("CI").as_deref() != Ok("true"),
            "MCP_AGENT_PEER_MINILM is not set (run `cargo xtask peers`)"
        );
        eprintln!("skipped: MCP_AGENT_PEER_MINILM is not set");
        return;
    };
    let config = ConfigFile::new(
        "local",
        &format!(
            "[search]\nembedder = {{ local = {:?} }}\ntimeout_ms = 120000\n",
            PathBuf::from(dir).display().to_string()
        ),
    );
    let output = search(Some(&config), "what o'clock is it now");
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert_eq!(names(&output)[0], "demo__current_time", "{err}");
    assert!(!err.contains("warning"), "{err}");
}

/// Without `embed-local`, a local model is refused naming the feature.
#[cfg(not(feature = "embed-local"))]
#[test]
fn a_local_model_without_the_feature_is_refused_naming_it() {
    let Some(dir) = std::env::var_os("MCP_AGENT_PEER_MINILM") else {
        eprintln!("skipped: MCP_AGENT_PEER_MINILM is not set");
        return;
    };
    let config = ConfigFile::new(
        "nolocal",
        &format!(
            "[search]\nembedder = {{ local = {:?} }}\n",
            PathBuf::from(dir).display().to_string()
        ),
    );
    let output = search(Some(&config), QUERY);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("`embed-local` feature"), "{err}");
}
