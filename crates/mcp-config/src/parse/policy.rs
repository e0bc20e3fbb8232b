//! The `[policy]` table: rule lists, annotation switches and the output bound, each problem
//! reported at its path.

use agent_core::{MIN_MAX_OUTPUT_BYTES, Rule};
use serde_json::Value;

use super::read::{as_bool, expect_object, field, non_empty_str, reject_unknown, type_name};
use crate::ProblemKind::*;
use crate::path::{JsonPath, Problems};

/// The keys of the `[policy]` table.
pub(crate) const POLICY_FIELDS: &[&str] = &[
    "allow",
    "deny",
    "approve",
    "approve_destructive",
    "approve_open_world",
    "max_output_bytes",
    "max_spill_bytes",
];

const RULE_FIELDS: &[&str] = &[
    "server", "tool", "resource", "prompt", "skill", "subject", "scopes", "claims",
];

/// The keys of which a rule names at most one: what it is about.
const TARGET_FIELDS: &[&str] = &["tool", "resource", "prompt", "skill"];

/// What one source's `[policy]` sets; unset keys are `None`, so a later source overrides only
/// the keys it sets.
#[derive(Debug, Default)]
pub(crate) struct PolicyLayer {
    pub(crate) allow: Option<Vec<Rule>>,
    pub(crate) deny: Option<Vec<Rule>>,
    pub(crate) approve: Option<Vec<Rule>>,
    pub(crate) approve_destructive: Option<bool>,
    pub(crate) approve_open_world: Option<bool>,
    pub(crate) max_output_bytes: Option<usize>,
    pub(crate) max_spill_bytes: Option<u64>,
}

impl PolicyLayer {
    /// Applies the keys this layer sets to `policy`.
    pub(crate) fn apply(self, policy: &mut crate::PolicyConfig) {
        if let Some(v) = self.allow {
            policy.identity.allow = v;
        }
        if let Some(v) = self.deny {
            policy.identity.deny = v;
        }
        if let Some(v) = self.approve {
            policy.approval.approve = v;
        }
        if let Some(v) = self.approve_destructive {
            policy.approval.approve_destructive = v;
        }
        if let Some(v) = self.approve_open_world {
            policy.approval.approve_open_world = v;
        }
        if let Some(v) = self.max_output_bytes {
            policy.max_output_bytes = Some(v);
        }
        if let Some(v) = self.max_spill_bytes {
            policy.max_spill_bytes = Some(v);
        }
    }
}

/// Reads a `[policy]` table at `path`.
pub(crate) fn parse_policy(value: &Value, path: &JsonPath, p: &mut Problems) -> PolicyLayer {
    let mut layer = PolicyLayer::default();
    let Some(obj) = expect_object(value, path, "`policy`", p) else {
        return layer;
    };
    reject_unknown(obj, POLICY_FIELDS, path, p);
    let rules =
        |key: &str, p: &mut Problems| field(obj, key).map(|v| rule_list(v, &path.key(key), p));
    layer.allow = rules("allow", p);
    layer.deny = rules("deny", p);
    layer.approve = rules("approve", p);
    if let Some(approve) = &layer.approve {
        for (i, rule) in approve.iter().enumerate() {
            if !rule.is_tool_rule() {
                let key = if rule.resource.is_some() {
                    "resource"
                } else if rule.prompt.is_some() {
                    "prompt"
                } else {
                    "skill"
                };
                p.push(
                    &path.key("approve").index(i).key(key),
                    NotApplicable,
                    "`approve` rules are about tool calls: name a `tool`, not a resource, a \
                     prompt or a skill",
                );
            }
        }
    }
    let flag =
        |key: &str, p: &mut Problems| field(obj, key).and_then(|v| as_bool(v, &path.key(key), p));
    layer.approve_destructive = flag("approve_destructive", p);
    layer.approve_open_world = flag("approve_open_world", p);
    if let Some(v) = field(obj, "max_output_bytes") {
        layer.max_output_bytes = output_bound(v, &path.key("max_output_bytes"), p);
    }
    if let Some(v) = field(obj, "max_spill_bytes") {
        layer.max_spill_bytes = bytes(v, &path.key("max_spill_bytes"), p);
    }
    layer
}

/// An array of `{ server, tool }` rules.
fn rule_list(value: &Value, path: &JsonPath, p: &mut Problems) -> Vec<Rule> {
    let Some(items) = value.as_array() else {
        p.push(
            path,
            WrongType,
            format!(
                "expected an array of {{ server, tool }} rules, found {}",
                type_name(value)
            ),
        );
        return Vec::new();
    };
    items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| rule(item, &path.index(i), p))
        .collect()
}

fn rule(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<Rule> {
    let obj = expect_object(value, path, "a rule", p)?;
    reject_unknown(obj, RULE_FIELDS, path, p);
    let server = match field(obj, "server") {
        Some(v) => non_empty_str(v, &path.key("server"), p),
        None => {
            p.push(
                &path.key("server"),
                MissingField,
                "a rule needs a `server` glob (`*` for any server)",
            );
            None
        }
    };
    let named: Vec<&str> = TARGET_FIELDS
        .iter()
        .copied()
        .filter(|key| field(obj, key).is_some())
        .collect();
    if let [first, second, ..] = named[..] {
        p.push(
            &path.key(second),
            ConflictingFields,
            format!(
                "a rule names one of `tool`, `resource`, `prompt` and `skill`, not `{first}` and \
                 `{second}`"
            ),
        );
        return None;
    }
    let target = |key: &str, p: &mut Problems| match field(obj, key) {
        Some(v) => non_empty_str(v, &path.key(key), p).map(Some),
        None => Some(None),
    };
    let tool = target("tool", p)?;
    let resource = target("resource", p)?;
    let prompt = target("prompt", p)?;
    let skill = target("skill", p)?;
    // Every key is read (and each problem reported) before any is given up on.
    let subject = field(obj, "subject").map(|v| non_empty_str(v, &path.key("subject"), p));
    let scopes = field(obj, "scopes").map(|v| strings(v, &path.key("scopes"), p));
    let claims = field(obj, "claims").map(|v| claim_globs(v, &path.key("claims"), p));
    let server = server?;
    let mut rule = match (resource, prompt, skill) {
        (Some(uri), _, _) => Rule::resource(server, uri),
        (None, Some(name), _) => Rule::prompt(server, name),
        (None, None, Some(name)) => Rule::skill(server, name),
        (None, None, None) => Rule::new(server, tool.unwrap_or_else(|| "*".to_owned())),
    };
    if let Some(subject) = subject {
        rule = rule.for_subject(subject?);
    }
    for scope in scopes.unwrap_or(Some(Vec::new()))? {
        rule = rule.for_scope(scope);
    }
    for (name, glob) in claims.unwrap_or(Some(Vec::new()))? {
        rule = rule.for_claim(name, glob);
    }
    Some(rule)
}

/// A table of claim names and globs.
fn claim_globs(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<Vec<(String, String)>> {
    let claims = expect_object(value, path, "a table of claim names and globs", p)?;
    let parsed: Vec<Option<(String, String)>> = claims
        .iter()
        .map(|(name, glob)| Some((name.clone(), non_empty_str(glob, &path.key(name), p)?)))
        .collect();
    parsed.into_iter().collect()
}

/// An array of non-empty strings.
fn strings(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<Vec<String>> {
    let Some(items) = value.as_array() else {
        p.push(
            path,
            WrongType,
            format!("expected an array of strings, found {}", type_name(value)),
        );
        return None;
    };
    let parsed: Vec<Option<String>> = items
        .iter()
        .enumerate()
        .map(|(i, item)| non_empty_str(item, &path.index(i), p))
        .collect();
    parsed.into_iter().collect()
}

/// A whole number of bytes.
fn bytes(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<u64> {
    if let Some(bytes) = value.as_u64() {
        return Some(bytes);
    }
    let found = match value {
        Value::Number(n) => format!("{n}"),
        other => type_name(other).to_owned(),
    };
    p.push(
        path,
        WrongType,
        format!("expected a whole number of bytes, found {found}"),
    );
    None
}

/// A whole number of bytes, at least [`MIN_MAX_OUTPUT_BYTES`].
fn output_bound(value: &Value, path: &JsonPath, p: &mut Problems) -> Option<usize> {
    let bytes = bytes(value, path, p)?;
    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    if bytes < MIN_MAX_OUTPUT_BYTES {
        p.push(
            path,
            InvalidValue,
            format!(
                "must be at least {MIN_MAX_OUTPUT_BYTES} bytes (room for the marker of a cut \
                 result), not {bytes}"
            ),
        );
        return None;
    }
    Some(bytes)
}
