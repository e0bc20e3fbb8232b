//! `mcp-agent resources …`: list and read the configured servers' resources, through the
//! configuration's `[policy]` (a resource its rules refuse is neither listed nor read).

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use mcp_agent::rmcp::model::ResourceContents;
use mcp_agent::{FeatureError, McpRunner};
use serde_json::{Value, json};

use super::exit::Exit;
use super::logging::LogSecrets;
use super::open::{failed, offering, with_config_runner};
use super::term::{first_line, inline, name, out, out_json, out_text, say};

/// The `resources` commands.
#[derive(Debug, Subcommand)]
pub(crate) enum ResourcesCommand {
    /// List the resources and resource templates of every configured server (or of one), as
    /// `server<TAB>uri<TAB>description`; templates are marked `(template)`.
    List {
        /// Only this server's.
        server: Option<String>,
        /// Print JSON (server, uri or uri_template, name, description, mime type, size).
        #[arg(long)]
        json: bool,
    },
    /// Read a resource of a server and print its text; binary contents are summarised
    /// (`--json` prints them base64-encoded, as the server sent them). The read is an event
    /// of the run (`resource_read`), refused with exit 1 when `[policy]` does not allow it.
    Read {
        /// The server.
        server: String,
        /// The resource's URI, as listed.
        uri: String,
        /// Print the contents as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `resources` command.
pub(crate) fn run(cmd: ResourcesCommand, file: Option<&Path>, logs: &LogSecrets) -> ExitCode {
    let json = match &cmd {
        ResourcesCommand::List { json, .. } | ResourcesCommand::Read { json, .. } => *json,
    };
    with_config_runner(file, json, logs, async |runner| {
        match cmd {
            ResourcesCommand::List { server, json } => list(runner, server.as_deref(), json).await,
            ResourcesCommand::Read { server, uri, json } => read(runner, &server, &uri, json).await,
        }
        .unwrap_or_else(|code| code)
    })
}

async fn list(runner: &McpRunner, only: Option<&str>, json: bool) -> Result<ExitCode, ExitCode> {
    let secrets = runner.redactor();
    let mut rows = Vec::new();
    for server in offering(runner, only, "resources") {
        let resources = runner
            .list_resources(server)
            .await
            .map_err(|e| failed(secrets, json, "list", &e))?;
        // Templates are optional within the capability: a server without them answers
        // "method not found".
        let templates = match runner.list_resource_templates(server).await {
            Ok(templates) => templates,
            Err(FeatureError::Rpc { code: -32601, .. }) => Vec::new(),
            Err(e) => return Err(failed(secrets, json, "list", &e)),
        };
        for r in resources {
            rows.push(json!({
                "server": server,
                "uri": r.uri,
                "name": r.name,
                "description": r.description,
                "mime_type": r.mime_type,
                "size": r.size,
            }));
        }
        for t in templates {
            rows.push(json!({
                "server": server,
                "uri_template": t.uri_template,
                "name": t.name,
                "description": t.description,
                "mime_type": t.mime_type,
            }));
        }
    }
    if json {
        out_json(secrets, &Value::Array(rows))?;
        return Ok(Exit::Success.into());
    }
    for row in &rows {
        let (uri, mark) = match row["uri"].as_str() {
            Some(uri) => (uri, ""),
            None => (row["uri_template"].as_str().unwrap_or(""), "(template) "),
        };
        let about = row["description"].as_str().or(row["name"].as_str());
        out(format_args!(
            "{}\t{}\t{mark}{}",
            name(secrets, row["server"].as_str().unwrap_or("")),
            name(secrets, uri),
            first_line(secrets, about)
        ))?;
    }
    say(format_args!("{} resources and templates", rows.len()));
    Ok(Exit::Success.into())
}

async fn read(
    runner: &McpRunner,
    server: &str,
    uri: &str,
    json: bool,
) -> Result<ExitCode, ExitCode> {
    let secrets = runner.redactor();
    let contents = runner
        .read_resource(server, uri)
        .await
        .map_err(|e| failed(secrets, json, "read", &e))?;
    if json {
        let value = serde_json::to_value(&contents).unwrap_or_default();
        out_json(secrets, &value)?;
        return Ok(Exit::Success.into());
    }
    for content in &contents {
        match content {
            ResourceContents::TextResourceContents { text, .. } => {
                out_text(secrets, text)?;
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => say(format_args!(
                "{}: binary, {} bytes base64-encoded ({}); --json prints it",
                name(secrets, uri),
                blob.len(),
                inline(secrets, mime_type.as_deref().unwrap_or("no MIME type"), 128)
            )),
            _ => say("(contents of a kind this version does not show; --json prints them)"),
        }
    }
    Ok(Exit::Success.into())
}
