//! `mcp-agent prompts …`: list the configured servers' prompts and get one with arguments,
//! through the configuration's `[policy]` (a prompt its rules refuse is neither listed nor got).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use mcp_agent::McpRunner;
use mcp_agent::rmcp::model::{ContentBlock, Role};
use serde_json::{Value, json};

use super::exit::Exit;
use super::logging::LogSecrets;
use super::open::{failed, json_error, offering, with_config_runner};
use super::term::{first_line, inline, name, out, out_json, out_text, say};

/// The `prompts` commands.
#[derive(Debug, Subcommand)]
pub(crate) enum PromptsCommand {
    /// List the prompts of every configured server (or of one), as `server__prompt`, with
    /// their arguments (`name*` is required).
    List {
        /// Only this server's.
        server: Option<String>,
        /// Print JSON (name, server, prompt, description, arguments).
        #[arg(long)]
        json: bool,
    },
    /// Get a prompt with arguments and print its messages, one `role:` block each. Missing
    /// required arguments are refused before anything is sent, naming them; the request is an
    /// event of the run (`prompt_got`), refused with exit 1 when `[policy]` does not allow it.
    Get {
        /// The prompt: `server__prompt`.
        name: String,
        /// An argument, `name=value` (repeat for more).
        #[arg(long = "arg", value_name = "NAME=VALUE")]
        args: Vec<String>,
        /// Print the result as JSON (description and messages, as the server sent them).
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `prompts` command.
pub(crate) fn run(cmd: PromptsCommand, file: Option<&Path>, logs: &LogSecrets) -> ExitCode {
    let json = match &cmd {
        PromptsCommand::List { json, .. } | PromptsCommand::Get { json, .. } => *json,
    };
    // Bad arguments are the command line's mistake: exit 2 before any server starts.
    let parsed = match &cmd {
        PromptsCommand::Get { name, args, .. } => match parse(name, args) {
            Ok(parsed) => Some(parsed),
            Err(message) => {
                say(format_args!("error: {message}"));
                if json {
                    json_error(
                        &mcp_agent::Redactor::new(),
                        Exit::InvalidConfig,
                        "arguments",
                        &message,
                        json!({}),
                    );
                }
                return Exit::InvalidConfig.into();
            }
        },
        PromptsCommand::List { .. } => None,
    };
    with_config_runner(file, json, logs, async |runner| {
        match (cmd, parsed) {
            (PromptsCommand::List { server, json }, _) => {
                list(runner, server.as_deref(), json).await
            }
            (PromptsCommand::Get { json, .. }, Some((server, prompt, args))) => {
                get(runner, &server, &prompt, args, json).await
            }
            (PromptsCommand::Get { .. }, None) => unreachable!("parsed above"),
        }
        .unwrap_or_else(|code| code)
    })
}

/// `server__prompt` and `name=value` arguments; an argument given twice is a mistake.
fn parse(
    full: &str,
    args: &[String],
) -> Result<(String, String, BTreeMap<String, String>), String> {
    let Some((server, prompt)) = full
        .split_once("__")
        .filter(|(s, p)| !s.is_empty() && !p.is_empty())
    else {
        return Err(format!(
            "`{}` is not `server__prompt` (see `mcp-agent prompts list`)",
            super::term::escaped(full, 256)
        ));
    };
    let mut arguments = BTreeMap::new();
    for arg in args {
        let Some((key, value)) = arg.split_once('=') else {
            return Err(format!(
                "`--arg {}` is not NAME=VALUE",
                super::term::escaped(arg, 256)
            ));
        };
        if arguments.insert(key.to_owned(), value.to_owned()).is_some() {
            return Err(format!(
                "the argument `{}` is given twice",
                super::term::escaped(key, 256)
            ));
        }
    }
    Ok((server.to_owned(), prompt.to_owned(), arguments))
}

async fn list(runner: &McpRunner, only: Option<&str>, json: bool) -> Result<ExitCode, ExitCode> {
    let secrets = runner.redactor();
    let mut rows = Vec::new();
    for server in offering(runner, only, "prompts") {
        let prompts = runner
            .list_prompts(server)
            .await
            .map_err(|e| failed(secrets, json, "list", &e))?;
        for p in prompts {
            let arguments: Vec<Value> = p
                .arguments
                .iter()
                .flatten()
                .map(|a| {
                    json!({
                        "name": a.name,
                        "description": a.description,
                        "required": a.required.unwrap_or(false),
                    })
                })
                .collect();
            rows.push(json!({
                "name": format!("{server}__{}", p.name),
                "server": server,
                "prompt": p.name,
                "description": p.description,
                "arguments": arguments,
            }));
        }
    }
    if json {
        out_json(secrets, &Value::Array(rows))?;
        return Ok(Exit::Success.into());
    }
    for row in &rows {
        let arguments: Vec<String> = row["arguments"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                let star = if a["required"] == true { "*" } else { "" };
                format!("{}{star}", name(secrets, a["name"].as_str().unwrap_or("")))
            })
            .collect();
        out(format_args!(
            "{}({})\t{}",
            name(secrets, row["name"].as_str().unwrap_or("")),
            arguments.join(", "),
            first_line(secrets, row["description"].as_str())
        ))?;
    }
    say(format_args!("{} prompts", rows.len()));
    Ok(Exit::Success.into())
}

async fn get(
    runner: &McpRunner,
    server: &str,
    prompt: &str,
    arguments: BTreeMap<String, String>,
    json: bool,
) -> Result<ExitCode, ExitCode> {
    let secrets = runner.redactor();
    let result = runner
        .get_prompt(server, prompt, arguments)
        .await
        .map_err(|e| failed(secrets, json, "get", &e))?;
    if json {
        out_json(secrets, &serde_json::to_value(&result).unwrap_or_default())?;
        return Ok(Exit::Success.into());
    }
    if let Some(description) = &result.description {
        say(format_args!("{}", first_line(secrets, Some(description))));
    }
    for message in &result.messages {
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        out(format_args!("{role}:"))?;
        let text = match &message.content {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::Resource(r) => format!(
                "(embedded resource) {}",
                serde_json::to_string(&r.resource).unwrap_or_default()
            ),
            ContentBlock::ResourceLink(link) => format!(
                "(resource link) {} — read it with `mcp-agent resources read {server} {}`",
                link.uri, link.uri
            ),
            ContentBlock::Image(image) => format!(
                "(image, {}, {} bytes base64-encoded; --json prints it)",
                inline(secrets, &image.mime_type, 128),
                image.data.len()
            ),
            ContentBlock::Audio(audio) => format!(
                "(audio, {}, {} bytes base64-encoded; --json prints it)",
                inline(secrets, &audio.mime_type, 128),
                audio.data.len()
            ),
            _ => "(content of a kind this version does not show; --json prints it)".to_owned(),
        };
        out_text(secrets, &text)?;
    }
    Ok(Exit::Success.into())
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn names_and_arguments_are_parsed_or_refused() {
        let (server, prompt, args) = parse(
            "git__review",
            &["code=fn main() {}".into(), "lang=rust".into()],
        )
        .unwrap();
        assert_eq!((server.as_str(), prompt.as_str()), ("git", "review"));
        assert_eq!(args["code"], "fn main() {}");
        assert_eq!(args["lang"], "rust");
        assert!(parse("review", &[]).unwrap_err().contains("server__prompt"));
        assert!(parse("__review", &[]).is_err());
        assert!(
            parse("git__r", &["novalue".into()])
                .unwrap_err()
                .contains("NAME=VALUE")
        );
        assert!(
            parse("git__r", &["a=1".into(), "a=2".into()])
                .unwrap_err()
                .contains("twice")
        );
    }
}
