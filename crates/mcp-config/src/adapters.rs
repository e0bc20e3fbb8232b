//! Boundary adapters: the `mcp` object of an AG-UI run or an A2A message becomes the
//! same `RunInput.metadata["mcp"]`.
//!
//! Each function returns a metadata map (`{"mcp": …}`, or empty when the request carries no
//! `mcp` object) to merge into [`RunInput::metadata`](agent_core::RunInput) with
//! `metadata.extend(map)`. The `mcp` object is checked as [`RunSelection::from_metadata`]
//! would, with paths in the request's own terms (`forwardedProps.mcp.servers[0]`,
//! `parts[1].data.mcp.servers[0]`), so a bad request is refused at the boundary.
//!
//! ```
//! use agent_core::RunInput;
//! use mcp_config::adapters;
//! use serde_json::json;
//!
//! // AG-UI: RunAgentInput.forwardedProps
//! let forwarded = json!({"mcp": {"servers": ["github"]}, "theme": "dark"});
//! let metadata = adapters::from_ag_ui_forwarded_props(&forwarded)?;
//! let input = RunInput::new("thread-1", "hi").with_metadata(metadata);
//! assert_eq!(input.metadata["mcp"]["servers"][0], "github");
//!
//! // A2A: Message.parts
//! let parts = [
//!     json!({"kind": "text", "text": "hi"}),
//!     json!({"kind": "data", "data": {"mcp": {"servers": []}}}),
//! ];
//! let metadata = adapters::from_a2a_parts(&parts)?;
//! assert_eq!(metadata["mcp"]["servers"], json!([]));
//! # Ok::<(), mcp_config::ConfigError>(())
//! ```

use agent_core::JsonObject;
use serde_json::Value;

use crate::path::{JsonPath, Problems};
use crate::{ConfigError, ProblemKind, RunSelection};

/// The metadata for an AG-UI run from its `forwardedProps` (`null` or absent `mcp`: empty).
pub fn from_ag_ui_forwarded_props(forwarded_props: &Value) -> Result<JsonObject, ConfigError> {
    let root = JsonPath::root().key("forwardedProps");
    match forwarded_props {
        Value::Null => Ok(JsonObject::new()),
        Value::Object(props) => metadata_from_mcp(props.get("mcp"), &root.key("mcp")),
        other => wrong_type(&root, "`forwardedProps`", other),
    }
}

/// The metadata from the `data` object of one A2A data part.
pub fn from_a2a_data(data: &JsonObject) -> Result<JsonObject, ConfigError> {
    metadata_from_mcp(data.get("mcp"), &JsonPath::root().key("data").key("mcp"))
}

/// The metadata from an A2A message's `parts`: the `mcp` object of its data part
/// (`{"kind": "data", "data": {"mcp": …}}`; the older `"type": "data"` is accepted too).
/// Two data parts with an `mcp` object are an error.
pub fn from_a2a_parts(parts: &[Value]) -> Result<JsonObject, ConfigError> {
    let root = JsonPath::root().key("parts");
    let mut found: Option<(JsonPath, &Value)> = None;
    let mut p = Problems::new();
    for (i, part) in parts.iter().enumerate() {
        let is_data = ["kind", "type"]
            .iter()
            .any(|k| part.get(k).and_then(Value::as_str) == Some("data"));
        let Some(mcp) = part
            .get("data")
            .and_then(|d| d.get("mcp"))
            .filter(|m| is_data && !m.is_null())
        else {
            continue;
        };
        let at = root.index(i).key("data").key("mcp");
        if let Some((first, _)) = &found {
            p.push(
                &at,
                ProblemKind::ConflictingFields,
                format!("a second `mcp` object (the first is at {first}); send one"),
            );
        } else {
            found = Some((at, mcp));
        }
    }
    if !p.is_empty() {
        return p.finish(JsonObject::new());
    }
    match found {
        Some((at, mcp)) => metadata_from_mcp(Some(mcp), &at),
        None => Ok(JsonObject::new()),
    }
}

/// `{"mcp": mcp}` after checking it; problems are re-rooted at `at`.
fn metadata_from_mcp(mcp: Option<&Value>, at: &JsonPath) -> Result<JsonObject, ConfigError> {
    let Some(mcp) = mcp.filter(|v| !v.is_null()) else {
        return Ok(JsonObject::new());
    };
    if !mcp.is_object() {
        return wrong_type(at, "`mcp`", mcp);
    }
    let mut metadata = JsonObject::new();
    metadata.insert("mcp".to_owned(), mcp.clone());
    match RunSelection::from_metadata(&metadata) {
        Ok(_) => Ok(metadata),
        Err(ConfigError::Invalid { mut problems }) => {
            for problem in &mut problems {
                if let Some(rest) = problem.path.strip_prefix("metadata.mcp") {
                    problem.path = format!("{at}{rest}");
                }
            }
            Err(ConfigError::invalid(problems))
        }
        Err(other) => Err(other),
    }
}

fn wrong_type(at: &JsonPath, what: &str, found: &Value) -> Result<JsonObject, ConfigError> {
    let mut p = Problems::new();
    p.push(
        at,
        ProblemKind::WrongType,
        format!(
            "{what} must be an object, found {}",
            crate::parse::type_name(found)
        ),
    );
    p.finish(JsonObject::new())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn absent_mcp_gives_empty_metadata() {
        assert!(from_ag_ui_forwarded_props(&Value::Null).unwrap().is_empty());
        assert!(
            from_ag_ui_forwarded_props(&json!({"x": 1}))
                .unwrap()
                .is_empty()
        );
        assert!(
            from_a2a_parts(&[json!({"kind": "text", "text": "hi"})])
                .unwrap()
                .is_empty()
        );
        assert!(from_a2a_data(&JsonObject::new()).unwrap().is_empty());
    }

    #[test]
    fn a2a_legacy_type_and_single_data_part() {
        let data = json!({"mcp": {"servers": ["a"]}});
        let m = from_a2a_parts(&[json!({"type": "data", "data": data})]).unwrap();
        assert_eq!(m["mcp"]["servers"][0], "a");
        let m = from_a2a_data(data.as_object().unwrap()).unwrap();
        assert_eq!(m["mcp"]["servers"][0], "a");
    }

    #[test]
    fn problems_use_the_boundary_paths() {
        let err = from_ag_ui_forwarded_props(
            &json!({"mcp": {"servers": [{"name": "x"}], "allow": true}}),
        )
        .unwrap_err();
        let got: Vec<_> = err
            .problems()
            .iter()
            .map(|p| (p.kind, p.path.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (ProblemKind::UnknownField, "forwardedProps.mcp.allow"),
                (ProblemKind::MissingField, "forwardedProps.mcp.servers[0]"),
            ]
        );
        let err = from_ag_ui_forwarded_props(&json!({"mcp": ["a"]})).unwrap_err();
        assert_eq!(err.problems()[0].path, "forwardedProps.mcp");

        let part = json!({"kind": "data", "data": {"mcp": {"servers": "all"}}});
        let err = from_a2a_parts(std::slice::from_ref(&part)).unwrap_err();
        assert_eq!(err.problems()[0].path, "parts[0].data.mcp.servers");
        let err = from_a2a_parts(&[part.clone(), part]).unwrap_err();
        assert_eq!(err.problems()[0].kind, ProblemKind::ConflictingFields);
        assert_eq!(err.problems()[0].path, "parts[1].data.mcp");
    }
}
