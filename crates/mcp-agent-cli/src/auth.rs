//! `mcp-agent auth …`: a user's OAuth login to an HTTP server with an `oauth` auth table
//! (authorization code with PKCE), what is stored, and logging out.
//!
//! The flow is `mcp-auth`'s (`AuthRegistry::login` on the HTTP connector's registry, whose
//! token store is the file store under the user's state directory — the same registry kind
//! `tools` and `run` open their sessions with, so they find the stored tokens). This module
//! only binds the loopback listener, prints the authorization URL, waits for the redirect (or
//! a pasted one) and prints what was stored: never a token, code or verifier.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use mcp_agent::{
    Config, ServerSpec,
    auth::{AuthRegistry, Callback, CallbackListener, StoredLogin},
    config::TransportSpec,
    http::{HttpConnector, HttpOptions},
};

use super::exit::Exit;
use super::open::{fail, load, runtime};
use super::signals::Signals;
use mcp_agent::Redactor;

use super::logging::LogSecrets;
use super::term::{MAX_LINE, MAX_NAME, inline, out, out_json, say};

/// Longest authorization URL printed (it is ours, built from the server's metadata).
const MAX_URL: usize = 8 * 1024;

/// The `auth` commands.
#[derive(Debug, Subcommand)]
pub(crate) enum AuthCommand {
    /// Log in to an HTTP server whose config has an `oauth` auth table: prints the
    /// authorization URL to open in a browser, waits for its redirect to
    /// `http://127.0.0.1:<port>/callback` and stores the tokens (a file of mode 0600 under
    /// `$XDG_STATE_HOME/mcp-agent/oauth/`). `tools` and `run` then use them.
    Login(LoginArgs),
    /// List the stored logins: server, issuer, client, scope and how long the access token
    /// has left (never a token).
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Forget the stored logins of a server.
    Logout {
        /// The configured server's name.
        server: String,
    },
}

/// `auth login`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct LoginArgs {
    /// The configured server's name.
    server: String,
    /// Do not wait for the browser only: paste the address the browser was sent to (or the
    /// code) on stdin (for a browser on another machine).
    #[arg(long)]
    no_browser: bool,
    /// How long to wait for the redirect, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    timeout: u64,
    /// The loopback port of the redirect (`0`: any free port).
    #[arg(long, value_name = "PORT", default_value_t = 0)]
    port: u16,
}

/// Runs an `auth` command.
pub(crate) fn run(cmd: AuthCommand, file: Option<&Path>, logs: &LogSecrets) -> ExitCode {
    let (config, secrets) = match load(file, false, logs) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let secrets = &secrets;
    let registry = match HttpConnector::new(HttpOptions::default()) {
        Ok(connector) => connector.auth_registry().clone(),
        Err(e) => return fail(secrets, &e),
    };
    let result = match cmd {
        AuthCommand::Login(args) => runtime().block_on(login(secrets, &config, &registry, &args)),
        AuthCommand::Status { json } => runtime().block_on(status(secrets, &registry, json)),
        AuthCommand::Logout { server } => {
            runtime().block_on(logout(secrets, &config, &registry, &server))
        }
    };
    result.unwrap_or_else(|code| code)
}

/// The configured HTTP server `name` with an `oauth` table, or exit 2 naming it.
fn oauth_server<'a>(
    secrets: &Redactor,
    config: &'a Config,
    name: &str,
) -> Result<&'a ServerSpec, ExitCode> {
    let shown = inline(secrets, name, MAX_NAME);
    let Some(spec) = config.servers.iter().find(|s| s.name == name) else {
        say(format_args!("error: no server `{shown}` is configured"));
        return Err(Exit::InvalidConfig.into());
    };
    if !matches!(spec.transport, TransportSpec::StreamableHttp(_)) {
        say(format_args!(
            "error: server `{shown}` is not an HTTP server: only HTTP servers log in with OAuth"
        ));
        return Err(Exit::InvalidConfig.into());
    }
    if spec.auth.oauth.is_none() {
        say(format_args!(
            "error: server `{shown}` has no `oauth` auth table: add `auth = {{ oauth = {{}} }}` \
             to its config to log in"
        ));
        return Err(Exit::InvalidConfig.into());
    }
    Ok(spec)
}

fn url_of(spec: &ServerSpec) -> String {
    match &spec.transport {
        TransportSpec::StreamableHttp(http) => http.url.to_string(),
        _ => String::new(),
    }
}

async fn login(
    secrets: &Redactor,
    config: &Config,
    registry: &Arc<AuthRegistry>,
    args: &LoginArgs,
) -> Result<ExitCode, ExitCode> {
    let spec = oauth_server(secrets, config, &args.server)?;
    let mut signals = Signals::install();
    // A configured `redirect_uri` is kept (a pre-registered client's must match): on
    // loopback its port is the one listened on; elsewhere the redirect can only be pasted.
    let configured = spec
        .auth
        .oauth
        .as_ref()
        .and_then(|o| o.redirect_uri.clone());
    // The port of a plain-`http` loopback redirect URI with an explicit port.
    let configured_port = configured.as_ref().and_then(|uri| {
        let loopback = matches!(uri.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
        (uri.scheme() == "http" && loopback)
            .then(|| uri.port())
            .flatten()
    });
    let port = match (args.port, configured_port) {
        (0, Some(port)) => port,
        (port, _) => port,
    };
    let listener = CallbackListener::bind(port).await.map_err(|e| {
        say(format_args!(
            "error: cannot listen for the redirect on 127.0.0.1:{port}: {}",
            inline(secrets, &e.to_string(), MAX_LINE)
        ));
        ExitCode::from(Exit::Failed)
    })?;
    let login = registry.login(spec).map_err(|e| fail(secrets, &e))?;
    let paste = args.no_browser || configured.is_some() && configured_port.is_none();
    let login = match configured {
        Some(_) if args.port == 0 => login,
        _ => login.with_redirect_uri(listener.redirect_uri().clone()),
    };
    let pending = tokio::select! {
        started = login.start() => started.map_err(|e| fail(secrets, &e))?,
        code = signals.recv() => {
            say("interrupted: the login was not started");
            return Err(code);
        }
    };
    let name = inline(secrets, &spec.name, MAX_NAME);
    say(format_args!(
        "Open this address in a browser to log in to `{name}` at {}:",
        inline(secrets, pending.issuer(), MAX_LINE)
    ));
    out(inline(
        secrets,
        pending.authorization_url().as_str(),
        MAX_URL,
    ))?;
    if paste {
        say(format_args!(
            "Then paste here the address the browser was sent to (it starts with {}), or the \
             code (waiting {} s)",
            pending.redirect_uri(),
            args.timeout
        ));
    } else {
        say(format_args!(
            "Waiting {} s for the browser to come back to {}",
            args.timeout,
            pending.redirect_uri()
        ));
    }
    let pasted = async {
        if paste {
            pasted_line(secrets).await
        } else {
            std::future::pending().await
        }
    };
    let callback = tokio::select! {
        got = listener.wait_for(&pending) => got.map_err(|e| {
            say(format_args!(
                "error: the browser's redirect could not be read: {}",
                inline(secrets, &e.to_string(), MAX_LINE)
            ));
            ExitCode::from(Exit::Failed)
        })?,
        got = pasted => got?,
        () = tokio::time::sleep(Duration::from_secs(args.timeout)) => {
            say(format_args!(
                "error: no redirect came back within {} s; run `mcp-agent auth login {name}` \
                 again (`--timeout SECS` waits longer)",
                args.timeout
            ));
            return Err(Exit::Failed.into());
        }
        code = signals.recv() => {
            say("interrupted: the login was abandoned");
            return Err(code);
        }
    };
    let stored = tokio::select! {
        finished = pending.finish(callback) => finished.map_err(|e| fail(secrets, &e))?,
        code = signals.recv() => {
            say("interrupted: the login was abandoned");
            return Err(code);
        }
    };
    out(format_args!(
        "logged in to `{name}`: {}",
        describe(secrets, &stored, SystemTime::now())
    ))?;
    Ok(Exit::Success.into())
}

/// One line read from stdin on a thread of its own (a blocked read does not hold the
/// runtime, nor the process when the command ends).
async fn pasted_line(secrets: &Redactor) -> Result<Callback, ExitCode> {
    let (line, read) = tokio::sync::oneshot::channel();
    let reading = std::thread::Builder::new()
        .name("paste".into())
        .spawn(move || {
            let mut text = String::new();
            let got = std::io::stdin().read_line(&mut text).map(|_| text);
            let _ = line.send(got);
        });
    let failed = |why: &str| {
        say(format_args!("error: {why}"));
        Exit::Failed.into()
    };
    if reading.is_err() {
        return Err(failed("cannot read stdin"));
    }
    match read.await {
        Ok(Ok(text)) if !text.trim().is_empty() => Ok(Callback::parse(&text)),
        Ok(Ok(_)) => Err(failed(
            "nothing was pasted: paste the address the browser was sent to, or the code",
        )),
        Ok(Err(e)) => Err(failed(&format!(
            "cannot read stdin: {}",
            inline(secrets, &e.to_string(), MAX_LINE)
        ))),
        Err(_) => Err(failed("cannot read stdin")),
    }
}

/// `issuer …, client …, scope …, expires in …` — what was stored, without any secret.
fn describe(secrets: &Redactor, login: &StoredLogin, now: SystemTime) -> String {
    format!(
        "issuer {}, client {}, scope {}, {}, {}",
        inline(secrets, &login.issuer, MAX_LINE),
        inline(secrets, &login.client_id, MAX_LINE),
        login
            .scope
            .as_deref()
            .map_or_else(|| "(none)".to_owned(), |s| inline(secrets, s, MAX_LINE)),
        expiry(login, now),
        if login.refresh_token.is_some() {
            "refreshable"
        } else {
            "no refresh token"
        }
    )
}

fn expiry(login: &StoredLogin, now: SystemTime) -> String {
    match login.remaining(now) {
        None => "no expiry given".to_owned(),
        Some(left) if left.is_zero() => "expired".to_owned(),
        Some(left) => format!("expires in {} s", left.as_secs()),
    }
}

async fn status(
    secrets: &Redactor,
    registry: &Arc<AuthRegistry>,
    json: bool,
) -> Result<ExitCode, ExitCode> {
    let store = registry.token_store().map_err(|e| fail(secrets, &e))?;
    let mut logins = store.list().await.map_err(|e| fail(secrets, &e))?;
    logins.sort_by(|a, b| (&a.server, &a.server_url).cmp(&(&b.server, &b.server_url)));
    let now = SystemTime::now();
    if json {
        let report: Vec<Value> = logins
            .iter()
            .map(|l| {
                json!({
                    "server": l.server,
                    "server_url": l.server_url,
                    "issuer": l.issuer,
                    "client_id": l.client_id,
                    "resource": l.resource,
                    "scope": l.scope,
                    "expires_at": l.expires_at,
                    "expires_in_seconds": l.remaining(now).map(|d| d.as_secs()),
                    "refresh_token": l.refresh_token.is_some(),
                    "obtained_at": l.obtained_at,
                })
            })
            .collect();
        out_json(secrets, &Value::Array(report))?;
        return Ok(Exit::Success.into());
    }
    if logins.is_empty() {
        say("no stored logins: log in with `mcp-agent auth login <server>`");
    }
    for l in &logins {
        out(format_args!(
            "{}\t{}\t{}",
            inline(secrets, &l.server, MAX_NAME),
            inline(secrets, &l.server_url, MAX_LINE),
            describe(secrets, l, now)
        ))?;
    }
    Ok(Exit::Success.into())
}

async fn logout(
    secrets: &Redactor,
    config: &Config,
    registry: &Arc<AuthRegistry>,
    server: &str,
) -> Result<ExitCode, ExitCode> {
    let spec = oauth_server(secrets, config, server)?;
    let store = registry.token_store().map_err(|e| fail(secrets, &e))?;
    let removed = store
        .forget(&url_of(spec))
        .await
        .map_err(|e| fail(secrets, &e))?;
    let name = inline(secrets, &spec.name, MAX_NAME);
    if removed == 0 {
        say(format_args!("no stored login for `{name}`"));
    } else {
        out(format_args!("logged out of `{name}`"))?;
    }
    Ok(Exit::Success.into())
}
