//! `mcp-conformance-client <server URL>`: the client the MCP conformance suite drives.
//!
//! Reads the scenario from `MCP_CONFORMANCE_SCENARIO` and its context from
//! `MCP_CONFORMANCE_CONTEXT`, connects over streamable HTTP through `mcp-transport-http`'s
//! `HttpConnector`, does what the scenario needs (see [`mcp_conformance::plan`]) and exits 0,
//! or prints the error chain and exits 1 (2 for a usage error). Its last line on stderr is
//! `scenario <name>: done` or `scenario <name>: error: <chain>`: `cargo xtask conformance`
//! reads it where the suite keeps no exit status (a whole requirement set run at once).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use mcp_auth::{AuthProvider, MemoryTokenStore};
use mcp_conformance::{
    CONTEXT_ENV, HeadlessBrowser, MAX_LOGINS, MAX_STEP_UPS, SCENARIO_ENV, credential_env, plan,
    run, run_skills, server_spec, uses_skills,
};
use mcp_transport_http::{HttpConnector, HttpOptions};

/// Set in the run started again with the credential variables (see `credential_env`).
const REEXEC_ENV: &str = "MCP_CONFORMANCE_CLIENT_CREDENTIALS_SET";
/// Bound on the whole run, under the suite's own client timeout.
const RUN_TIMEOUT: Duration = Duration::from_secs(15);
/// Bound on each request of the headless browser.
const LOGIN_STEP_TIMEOUT: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(url), None) = (args.next(), args.next()) else {
        eprintln!("usage: {SCENARIO_ENV}=<scenario> mcp-conformance-client <server URL>");
        return ExitCode::from(2);
    };
    let Ok(url) = url.parse::<url::Url>() else {
        eprintln!("not a URL: {url}");
        return ExitCode::from(2);
    };
    let Ok(scenario) = std::env::var(SCENARIO_ENV) else {
        eprintln!("{SCENARIO_ENV} is not set");
        return ExitCode::from(2);
    };
    let context = match std::env::var(CONTEXT_ENV) {
        Ok(text) => match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(value) => Some(value),
            Err(e) => {
                eprintln!("{CONTEXT_ENV} is not JSON: {e}");
                return ExitCode::from(2);
            }
        },
        Err(_) => None,
    };
    // A federated credential is read from a variable (a configuration never holds one): run
    // again with the context's credentials in the variables the spec names.
    let vars = credential_env(&scenario, context.as_ref());
    if vars
        .iter()
        .any(|(var, value)| std::env::var(var).ok().as_deref() != Some(value.as_str()))
    {
        if std::env::var_os(REEXEC_ENV).is_some() {
            eprintln!(
                "scenario {scenario}: error: the credential variables did not reach the client"
            );
            return ExitCode::FAILURE;
        }
        let status = std::env::current_exe().and_then(|exe| {
            std::process::Command::new(exe)
                .arg(url.as_str())
                .envs(vars)
                .env(REEXEC_ENV, "1")
                .status()
        });
        return match status {
            Ok(status) if status.success() => ExitCode::SUCCESS,
            Ok(_) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("scenario {scenario}: error: cannot run the client again: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("scenario {scenario}: {url}");
    let result = runtime.block_on(async {
        let spec = server_spec(&url, &scenario, context.as_ref())?;
        let mut connector = HttpConnector::new(HttpOptions::default())
            .map_err(|e| mcp_conformance::Error::Config(Box::new(e)))?;
        // A user's login (the `oauth` table): tokens in memory, the browser played headless.
        let login = match &spec.auth.oauth {
            None => None,
            Some(_) => {
                let registry = connector.auth_registry().clone();
                registry.use_token_store(Arc::new(MemoryTokenStore::new()));
                let browser = HeadlessBrowser::new(registry.fetch_for(&spec), LOGIN_STEP_TIMEOUT);
                let hook = registry
                    .login_on_demand(&spec, Arc::new(browser), MAX_LOGINS, MAX_STEP_UPS)
                    .map_err(|e| mcp_conformance::Error::Config(Box::new(e)))?;
                Some(Arc::new(hook))
            }
        };
        if let Some(hook) = login.clone() {
            connector =
                connector.with_auth_factory(move |_| Ok(hook.clone() as Arc<dyn AuthProvider>));
        }
        let mut log = |line: String| eprintln!("  {line}");
        let steps = plan(&scenario);
        let ran = if uses_skills(&steps) {
            let connectors = mcp_client::Connectors::new().with(connector);
            tokio::time::timeout(RUN_TIMEOUT, run_skills(&connectors, spec, &steps, &mut log)).await
        } else {
            tokio::time::timeout(
                RUN_TIMEOUT,
                run(&connector, &spec, &steps, context.as_ref(), &mut log),
            )
            .await
        };
        match ran {
            Ok(result) => result,
            Err(_) => Err(mcp_conformance::Error::Timeout {
                what: format!("scenario {scenario}"),
                after: RUN_TIMEOUT,
            }),
        }
    });
    // Background tasks (an SSE stream still reconnecting) must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_secs(1));
    match result {
        Ok(()) => {
            eprintln!("scenario {scenario}: done");
            ExitCode::SUCCESS
        }
        Err(e) => {
            let message = agent_core::error_chain(&e);
            eprintln!("scenario {scenario}: error: {message}");
            ExitCode::FAILURE
        }
    }
}
