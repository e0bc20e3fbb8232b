//! What a run adds to its model's system prompt: each server's `instructions`, attributed to
//! the server, and the skills its servers offer, all bounded, cleaned and scrubbed.

use mcp_catalog::sanitize::{Lines, clean};
use mcp_catalog::{READ_TOOL, SEARCH_TOOL};

use crate::McpRunner;

/// The most bytes of one server's instructions in a run's system prompt (the session keeps
/// at most [`MAX_INSTRUCTIONS_BYTES`](crate::MAX_INSTRUCTIONS_BYTES) of them); longer ones
/// are cut and end with `…`.
pub const MAX_SERVER_INSTRUCTIONS_BYTES: usize = 8 * 1024;
/// The most bytes of the whole addendum; servers past it are named, their instructions left
/// out.
pub const MAX_ADDENDUM_BYTES: usize = 32 * 1024;
/// The most skills listed by name and one line; past it, the model is told to search.
pub const MAX_PROMPT_SKILLS: usize = 50;
/// The longest one-line description of a skill, in bytes.
const MAX_SKILL_LINE_BYTES: usize = 200;

impl McpRunner {
    /// What this run adds to its model's system prompt, or `None` when there is nothing: the
    /// `instructions` each server gave at initialization — attributed to its server, control
    /// characters (but `\n` and `\t`) removed, the run's secrets replaced, cut to
    /// [`MAX_SERVER_INSTRUCTIONS_BYTES`] per server and [`MAX_ADDENDUM_BYTES`] in all; a
    /// server configured with `instructions = false` is left out — then the skills its
    /// servers offer, by name with a one-line description (at most [`MAX_PROMPT_SKILLS`];
    /// past that, a pointer to `mcp_search_tools`).
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use agent_core::{AgentLoop, Model, RunInput};
    /// use mcp_client::McpClient;
    ///
    /// # async fn run(client: McpClient, model: Arc<dyn Model>) -> Result<(), Box<dyn std::error::Error>> {
    /// let runner = client.open_runner(&RunInput::new("run-1", "Summarise the docs")).await?;
    /// let mut agent = AgentLoop::new(model).in_context(runner.context());
    /// if let Some(addendum) = runner.system_prompt_addendum() {
    ///     agent = agent.system_prompt(addendum);
    /// }
    /// let outcome = agent.run(&runner, "Summarise the docs").await?;
    /// runner.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub fn system_prompt_addendum(&self) -> Option<String> {
        let mut out = String::new();
        let mut left_out: Vec<&str> = Vec::new();
        for session in self.sessions() {
            if !session.spec().instructions {
                continue;
            }
            let Some(text) = session.identity().instructions.as_deref() else {
                continue;
            };
            let scrubbed = self.redactor().scrub(text);
            let text = clean(&scrubbed, MAX_SERVER_INSTRUCTIONS_BYTES, Lines::Multi);
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            let section = format!(
                "\n\n## Instructions of MCP server `{}` (written by the server, not the user)\n\n{text}",
                session.name()
            );
            if out.len() + section.len() > MAX_ADDENDUM_BYTES {
                left_out.push(session.name());
                continue;
            }
            out.push_str(&section);
        }
        if !left_out.is_empty() {
            out.push_str(&format!(
                "\n\n(The instructions of {} were left out: the limit of {MAX_ADDENDUM_BYTES} \
                 bytes was reached.)",
                left_out
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let skills = self.catalog().skills();
        if !skills.is_empty() {
            out.push_str(&format!(
                "\n\n## Skills\n\nRead a skill's files with {READ_TOOL} (server, skill, file; \
                 SKILL.md first) before following it."
            ));
            for skill in skills.iter().take(MAX_PROMPT_SKILLS) {
                let line = skill.description.as_deref().unwrap_or_default();
                let line = clean(line, MAX_SKILL_LINE_BYTES, Lines::Single);
                out.push_str(&format!(
                    "\n- `{}` (server `{}`): {line}",
                    skill.name, skill.server
                ));
            }
            if skills.len() > MAX_PROMPT_SKILLS {
                out.push_str(&format!(
                    "\n- … and {} more: find them with {SEARCH_TOOL}.",
                    skills.len() - MAX_PROMPT_SKILLS
                ));
            }
        }
        let out = out.trim_start();
        (!out.is_empty()).then(|| out.to_owned())
    }
}
