//! The bounds on what servers list: names, schema sizes and depths, description and title
//! lengths.

use agent_core::{JsonObject, ToolAnnotations};
use rmcp::model::Tool;
use serde_json::Value;

use crate::sanitize::{Lines, clean, is_unsafe_char};
use crate::{SkipReason, SkippedTool, ToolLimits};

impl ToolLimits {
    /// Whether the catalog takes `tool`: `Err` with the reason it would be left out.
    ///
    /// ```
    /// use mcp_catalog::{SkipReason, ToolLimits};
    /// use mcp_catalog::testing::tool;
    ///
    /// let limits = ToolLimits::default();
    /// assert!(limits.check(&tool("fine", "", serde_json::json!({}))).is_ok());
    /// let long = tool(&"x".repeat(129), "", serde_json::json!({}));
    /// assert_eq!(limits.check(&long), Err(SkipReason::NameTooLong { chars: 129, limit: 128 }));
    /// ```
    pub fn check(&self, tool: &Tool) -> Result<(), SkipReason> {
        check_tool(tool, self).map(|_| ())
    }

    /// The tools of one listing of `server` that the catalog leaves out, with why, in listing
    /// order: [`check`](Self::check)'s reasons, and a name that is empty or listed more than
    /// once (every copy is left out; the name is reported once).
    ///
    /// ```
    /// use mcp_catalog::{SkipReason, ToolLimits};
    /// use mcp_catalog::testing::tool;
    ///
    /// let listing = [
    ///     tool("fine", "", serde_json::json!({})),
    ///     tool("twice", "", serde_json::json!({})),
    ///     tool("", "", serde_json::json!({})),
    ///     tool("twice", "", serde_json::json!({})),
    /// ];
    /// let left_out = ToolLimits::default().left_out("srv", &listing);
    /// assert_eq!(left_out.len(), 2);
    /// assert_eq!(left_out[0].reason, SkipReason::ListedTwice { times: 2 });
    /// assert_eq!(left_out[0].to_string(), "server `srv`: tool `twice` left out: its name is listed 2 times");
    /// assert_eq!(left_out[1].reason, SkipReason::NameEmpty);
    /// ```
    pub fn left_out(&self, server: &str, tools: &[Tool]) -> Vec<SkippedTool> {
        tools
            .iter()
            .zip(check_listing(tools, self))
            .filter_map(|(tool, checked)| match checked {
                Checked::LeftOut(reason) => Some(SkippedTool::new(server, &tool.name, reason)),
                _ => None,
            })
            .collect()
    }
}

/// Checks a tool against the limits: its name, then the size and depth of its schemas. Returns
/// the input and output schemas as compact JSON text.
fn check_tool(tool: &Tool, limits: &ToolLimits) -> Result<(String, Option<String>), SkipReason> {
    let chars = tool.name.chars().count();
    if chars > limits.max_name_chars {
        return Err(SkipReason::NameTooLong {
            chars,
            limit: limits.max_name_chars,
        });
    }
    if tool.name.chars().any(is_unsafe_char) {
        return Err(SkipReason::NameCharacters);
    }
    let input = check_schema("input", &tool.input_schema, limits)?;
    let output = match &tool.output_schema {
        Some(output) => Some(check_schema("output", output, limits)?),
        None => None,
    };
    Ok((input, output))
}

/// What the catalog makes of one tool of a listing (see [`check_listing`]).
#[derive(Debug)]
pub(crate) enum Checked {
    /// The tool joins: its input and output schemas as compact JSON text.
    Kept(String, Option<String>),
    /// The tool is left out, for this reason.
    LeftOut(SkipReason),
    /// A second or later copy of a name listed more than once: left out, reported with the
    /// first copy.
    Repeat,
}

/// Checks one listing, tool by tool and in order: an empty name, a name listed more than once
/// (every copy is left out, reported once), then [`check_tool`].
pub(crate) fn check_listing(tools: &[Tool], limits: &ToolLimits) -> Vec<Checked> {
    let mut times: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for tool in tools {
        *times.entry(&tool.name).or_default() += 1;
    }
    let mut reported = std::collections::HashSet::new();
    tools
        .iter()
        .map(|tool| {
            let name: &str = &tool.name;
            if name.is_empty() {
                return Checked::LeftOut(SkipReason::NameEmpty);
            }
            match times.get(name).copied().unwrap_or(0) {
                n if n > 1 && !reported.insert(name) => Checked::Repeat,
                n if n > 1 => Checked::LeftOut(SkipReason::ListedTwice { times: n }),
                _ => match check_tool(tool, limits) {
                    Ok((input, output)) => Checked::Kept(input, output),
                    Err(reason) => Checked::LeftOut(reason),
                },
            }
        })
        .collect()
}

/// The schema as compact JSON text, if it is within the limits of size and depth.
fn check_schema(
    which: &'static str,
    schema: &JsonObject,
    limits: &ToolLimits,
) -> Result<String, SkipReason> {
    /// Keeps the bytes written, failing past the limit (so a huge schema is not written whole).
    struct Bounded {
        text: Vec<u8>,
        limit: usize,
    }
    impl std::io::Write for Bounded {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.text.len() + buf.len() > self.limit {
                return Err(std::io::Error::other("over the limit"));
            }
            self.text.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut out = Bounded {
        text: Vec::new(),
        limit: limits.max_schema_bytes,
    };
    if serde_json::to_writer(&mut out, schema).is_err() {
        return Err(SkipReason::SchemaTooLarge {
            which,
            limit: limits.max_schema_bytes,
        });
    }
    if object_too_deep(schema, limits.max_schema_depth) {
        return Err(SkipReason::SchemaTooDeep {
            which,
            limit: limits.max_schema_depth,
        });
    }
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8(out.text).unwrap_or_default())
}

/// True when `object` (one level) and what it holds need more than `levels` levels.
fn object_too_deep(object: &JsonObject, levels: usize) -> bool {
    levels == 0 || object.values().any(|v| too_deep(v, levels - 1))
}

fn too_deep(value: &Value, levels: usize) -> bool {
    match value {
        Value::Object(o) => object_too_deep(o, levels),
        Value::Array(a) => levels == 0 || a.iter().any(|v| too_deep(v, levels - 1)),
        _ => false,
    }
}

/// The texts a model sees of an MCP tool: the server's description and its hints with the title
/// (bounded, without control characters).
pub(super) fn texts(tool: &Tool, limits: &ToolLimits) -> (Option<Box<str>>, ToolAnnotations) {
    let title = |t: &String| clean(t, limits.max_title_bytes, Lines::Single).into_owned();
    let description = tool
        .description
        .as_ref()
        .map(|s| clean(s, limits.max_description_bytes, Lines::Multi).into());
    let mut hints = ToolAnnotations::default();
    if let Some(a) = &tool.annotations {
        hints.title = a.title.as_ref().map(title);
        hints.read_only_hint = a.read_only_hint;
        hints.destructive_hint = a.destructive_hint;
        hints.idempotent_hint = a.idempotent_hint;
        hints.open_world_hint = a.open_world_hint;
    }
    if hints.title.is_none() {
        hints.title = tool.title.as_ref().map(title);
    }
    (description, hints)
}
