//! `mcp-agent skills …`: list and show the configured servers' skills (the skills extension),
//! through the configuration's `[policy]` `skill` rules, terminal-safe.

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use mcp_agent::skills::{SkillEntry, SkillFiles};
use mcp_agent::{FeatureError, McpRunner};
use serde_json::{Value, json};

use super::exit::Exit;
use super::logging::LogSecrets;
use super::open::{failed, with_config_runner};
use super::term::{block, chain, first_line, name, out, out_json, say};

/// The `skills` commands.
#[derive(Debug, Subcommand)]
pub(crate) enum SkillsCommand {
    /// List the skills of every configured server that offers them (or of SERVER), as
    /// `server<TAB>skill<TAB>description`. No file of any skill is read. A skill over a bound
    /// (512 files, 16 MiB) or breaking the extension's rules is marked `(refused: why)`; a
    /// skill the `[policy]` refuses is not listed.
    List {
        /// Only this server's skills.
        server: Option<String>,
        /// Print JSON (server, name, URI, description, files with digest and size, refused).
        #[arg(long)]
        json: bool,
    },
    /// Load a skill and print its instructions (its `SKILL.md`, checked against the server's
    /// listing: size, digest, frontmatter) and, on stderr, its other files (not read). A
    /// mismatch exits 1, naming the server, the skill and the file.
    Show {
        /// The server.
        server: String,
        /// The skill: its name, or the URI of its `SKILL.md`.
        skill: String,
        /// Print JSON (the entry, its files, and the instructions).
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `skills` command.
pub(crate) fn run(cmd: SkillsCommand, file: Option<&Path>, logs: &LogSecrets) -> ExitCode {
    let json = match &cmd {
        SkillsCommand::List { json, .. } | SkillsCommand::Show { json, .. } => *json,
    };
    with_config_runner(file, json, logs, async |runner| {
        match cmd {
            SkillsCommand::List { server, json } => list(runner, server.as_deref(), json).await,
            SkillsCommand::Show {
                server,
                skill,
                json,
            } => show(runner, &server, &skill, json).await,
        }
        .unwrap_or_else(|code| code)
    })
}

/// The entry as JSON (its texts already cleaned by the library).
fn entry_json(server: &str, entry: &SkillEntry) -> Value {
    let files: Vec<Value> = entry
        .files
        .listed()
        .iter()
        .map(|f| json!({"uri": f.uri, "digest": f.digest, "size": f.size}))
        .collect();
    json!({
        "server": server,
        "name": entry.name,
        "uri": entry.uri,
        "description": entry.description,
        "files": files,
        "dynamic": matches!(entry.files, SkillFiles::Dynamic),
        "refused": entry.refused.as_ref().map(ToString::to_string),
    })
}

async fn list(runner: &McpRunner, server: Option<&str>, json: bool) -> Result<ExitCode, ExitCode> {
    let secrets = runner.redactor();
    let listings = match server {
        Some(server) => vec![(server.to_owned(), runner.list_skills(server).await)],
        None => runner.list_all_skills().await,
    };
    let servers = listings.len();
    let mut rows: Vec<(String, SkillEntry)> = Vec::new();
    let mut failure: Option<FeatureError> = None;
    for (server, listed) in listings {
        match listed {
            Ok(skills) => rows.extend(skills.into_iter().map(|s| (server.clone(), s))),
            Err(e) => {
                if let Some(first) = &failure {
                    say(format_args!("error: {}", chain(secrets, first)));
                }
                failure = Some(e);
            }
        }
    }
    if let Some(e) = failure {
        return Err(failed(secrets, json, "skills", &e));
    }
    if json {
        let list: Vec<Value> = rows.iter().map(|(s, e)| entry_json(s, e)).collect();
        out_json(secrets, &Value::Array(list))?;
    } else {
        for (server, entry) in &rows {
            let mark = entry
                .refused
                .as_ref()
                .map(|why| {
                    format!(
                        "(refused: {}) ",
                        first_line(secrets, Some(why.to_string().as_str()))
                    )
                })
                .unwrap_or_default();
            out(format_args!(
                "{}\t{}\t{mark}{}",
                name(secrets, server),
                name(secrets, &entry.name),
                first_line(secrets, Some(entry.description.as_str()))
            ))?;
        }
        say(format_args!("{} skills from {servers} servers", rows.len()));
    }
    Ok(Exit::Success.into())
}

async fn show(
    runner: &McpRunner,
    server: &str,
    skill: &str,
    json: bool,
) -> Result<ExitCode, ExitCode> {
    let secrets = runner.redactor();
    let loaded = runner
        .load_skill(server, skill)
        .await
        .map_err(|e| failed(secrets, json, "skills", &e))?;
    let entry = &loaded.entry;
    let others: Vec<_> = entry
        .files
        .listed()
        .iter()
        .filter(|f| f.uri != entry.uri)
        .collect();
    if json {
        let mut value = entry_json(server, entry);
        value["instructions"] = Value::String(loaded.instructions.clone());
        out_json(secrets, &value)?;
    } else {
        out(block(secrets, &loaded.instructions))?;
        say(format_args!(
            "skill {} of {}: {} bytes of instructions, {} other files (read on use)",
            name(secrets, &entry.name),
            name(secrets, server),
            loaded.bytes,
            others.len()
        ));
        for file in others {
            say(format_args!(
                "  {}\t{} bytes",
                name(secrets, &file.uri),
                file.size
            ));
        }
    }
    Ok(Exit::Success.into())
}
