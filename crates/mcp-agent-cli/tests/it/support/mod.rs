//! What every CLI test shares.

pub(crate) mod canned;
pub(crate) mod endpoint;
pub(crate) mod gateway;

use std::process::{Command, Output};

/// Runs the `mcp-agent` binary with `args` and only the variables of `env`.
pub(crate) fn mcp_agent(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcp-agent"))
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .expect("run mcp-agent")
}

/// The children of `parent`, read from `/proc`, but for the helper that starts stdio servers'
/// supervisors ([`mcp_agent::stdio::ZYGOTE_COMM`]: no server's ancestor, it ends by itself).
pub(crate) fn children(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The fields after the parenthesised command name: state, ppid, …
        let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
        let zygote = stat.contains(&format!("({})", mcp_agent::stdio::ZYGOTE_COMM));
        if after.split_whitespace().nth(1) == Some(&parent.to_string()) && !zygote {
            out.push(pid);
        }
    }
    out
}

pub(crate) fn alive(pid: u32) -> bool {
    // A zombie still has a /proc entry; its state letter is `Z`.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            stat.rsplit_once(')')
                .map(|(_, r)| r.trim_start().starts_with('Z'))
                != Some(true)
        })
        .unwrap_or(false)
}

/// `MCP_AGENT__SERVERS` with the test kit's stdio server as `kit`, listing the conformance
/// suite's tools (`--suite-tools`: `test_tool_with_progress` and the others).
pub(crate) fn kit_with_suite_tools() -> String {
    serde_json::json!([{
        "name": "kit",
        "command": mcp_test_kit::stdio::binary(),
        "args": ["--suite-tools"],
    }])
    .to_string()
}
