//! Reading a Prometheus text exposition with the Prometheus project's own parser: the pinned
//! prometheus-client peer (`MCP_AGENT_PEER_PROMETHEUS_PYTHON`, installed by `cargo xtask
//! peers`) runs `peers/python/prometheus_parse.py`, which prints every sample as JSON.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde::Deserialize;

/// The variable holding the python of the prometheus-client venv.
pub const PROMETHEUS_PYTHON: &str = "MCP_AGENT_PEER_PROMETHEUS_PYTHON";

/// One sample, as the parser read it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Sample {
    /// Its family's name (a counter's without `_total`).
    pub family: String,
    /// Its family's type: `counter`, `gauge`, `histogram`, … (`unknown` without `# TYPE`).
    #[serde(rename = "type")]
    pub kind: String,
    /// Its family's `# HELP` text.
    pub help: String,
    /// The sample's own name (`x_total`, `x_bucket`, …).
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

/// The samples of an exposition, parsed.
///
/// ```no_run
/// use mcp_test_kit::prometheus::Exposition;
///
/// // `None` (after a note on stderr) when the peer is not installed and not required.
/// let Some(parsed) = Exposition::parse("# TYPE up gauge\nup 1\n") else { return };
/// assert_eq!(parsed.value("up", &[]), Some(1.0));
/// ```
#[derive(Debug, Clone)]
pub struct Exposition {
    /// Every sample, in the text's order.
    pub samples: Vec<Sample>,
}

impl Exposition {
    /// Parses `text` with the peer. `None` when the peer is missing and not required (see
    /// [`crate::peer::path`]). Panics when the parser refuses the text, saying why.
    pub fn parse(text: &str) -> Option<Self> {
        let python = crate::peer::path(PROMETHEUS_PYTHON)?;
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../peers/python/prometheus_parse.py");
        let mut child = Command::new(python)
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run the Prometheus parser");
        let mut stdin = child.stdin.take().expect("its stdin");
        let input = text.to_owned();
        // Written on a thread: a large text would fill the pipe while its output waits.
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let out = child.wait_with_output().expect("the parser's output");
        writer.join().expect("the writer").expect("write the text");
        assert!(
            out.status.success(),
            "the Prometheus parser refused the text: {}\n{text}",
            String::from_utf8_lossy(&out.stderr)
        );
        let samples = serde_json::from_slice(&out.stdout).expect("the parser's JSON");
        Some(Self { samples })
    }

    /// The samples named `name` (`x_total`, `x_bucket`, …).
    pub fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| s.name == name)
    }

    /// The value of the sample `name` whose labels are exactly `labels`, if there is one.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.named(name)
            .find(|s| {
                s.labels.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).is_some_and(|have| have == v))
            })
            .map(|s| s.value)
    }
}
