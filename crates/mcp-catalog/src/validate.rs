//! Argument validation against a tool's input JSON Schema.

use std::sync::Arc;

use agent_core::JsonObject;
use serde_json::Value;

/// At most this many problems are listed in one error.
const MAX_PROBLEMS: usize = 5;
/// A problem's message is cut to this many characters (it may quote a large value).
const MAX_MESSAGE: usize = 200;

/// A compiled input schema, or the reason it could not be compiled.
pub(crate) type Compiled = Result<Arc<jsonschema::Validator>, String>;

/// Compiles a tool's input schema. Remote `$ref`s are not fetched (the crate is built without
/// network retrieval): a schema that needs one fails to compile, and its tool's calls are then
/// refused (arguments that cannot be checked are not sent). The reason is bounded and free of
/// control characters (it may quote the server's schema).
pub(crate) fn compile(schema: Value) -> Compiled {
    jsonschema::validator_for(&schema)
        .map(Arc::new)
        .map_err(|e| {
            crate::sanitize::clean(&e.to_string(), MAX_MESSAGE, crate::sanitize::Lines::Single)
                .into_owned()
        })
}

/// Checks `arguments` (and hands them back, unchanged: checked in place, not copied); on
/// failure, says which fields are wrong and why, one `` `/json/pointer`: message `` per
/// problem, `(root)` for the object itself.
pub(crate) fn check(
    validator: &jsonschema::Validator,
    arguments: JsonObject,
) -> (JsonObject, Result<(), String>) {
    let instance = Value::Object(arguments);
    let verdict = problems(validator, &instance);
    let Value::Object(arguments) = instance else {
        unreachable!("the instance was made an object just above")
    };
    (arguments, verdict)
}

fn problems(validator: &jsonschema::Validator, instance: &Value) -> Result<(), String> {
    if validator.is_valid(instance) {
        return Ok(());
    }
    let mut problems = Vec::new();
    let mut more = 0usize;
    for error in validator.iter_errors(instance) {
        if problems.len() == MAX_PROBLEMS {
            more += 1;
            continue;
        }
        let path = error.instance_path().as_str();
        let path = if path.is_empty() { "(root)" } else { path };
        let mut message = error.to_string();
        if message.chars().count() > MAX_MESSAGE {
            message = message.chars().take(MAX_MESSAGE).collect::<String>() + "…";
        }
        problems.push(format!("`{path}`: {message}"));
    }
    if problems.is_empty() {
        return Ok(());
    }
    let mut out = problems.join("; ");
    if more > 0 {
        out.push_str(&format!("; and {more} more"));
    }
    Err(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(v: Value) -> JsonObject {
        v.as_object().unwrap().clone()
    }

    fn schema() -> JsonObject {
        obj(json!({
            "type": "object",
            "properties": {
                "repo": {"type": "string"},
                "count": {"type": "integer", "minimum": 1},
                "labels": {"type": "array", "items": {"type": "string"}},
                "state": {"enum": ["open", "closed"]}
            },
            "required": ["repo"],
            "additionalProperties": false
        }))
    }

    fn problems(args: Value) -> String {
        let v = compile(Value::Object(schema())).unwrap();
        let (back, verdict) = check(&v, obj(args.clone()));
        assert_eq!(
            Value::Object(back),
            args,
            "the arguments come back unchanged"
        );
        verdict.unwrap_err()
    }

    #[test]
    fn valid_arguments_pass_and_come_back_unchanged() {
        let v = compile(Value::Object(schema())).unwrap();
        let args = obj(json!({"repo": "a/b", "count": 2}));
        assert_eq!(check(&v, args.clone()), (args, Ok(())));
    }

    #[test]
    fn each_problem_names_its_field_and_why() {
        for (args, expected) in [
            (json!({}), r#"`(root)`: "repo" is a required property"#),
            (json!({"repo": 5}), r#"`/repo`: 5 is not of type "string""#),
            (
                json!({"repo": "a", "count": 0}),
                "`/count`: 0 is less than the minimum of 1",
            ),
            (
                json!({"repo": "a", "labels": ["x", 3]}),
                r#"`/labels/1`: 3 is not of type "string""#,
            ),
            (
                json!({"repo": "a", "state": "merged"}),
                r#"`/state`: "merged" is not one of "open" or "closed""#,
            ),
            (
                json!({"repo": "a", "extra": 1}),
                "`(root)`: Additional properties are not allowed ('extra' was unexpected)",
            ),
        ] {
            assert_eq!(problems(args.clone()), expected, "{args}");
        }
    }

    #[test]
    fn several_problems_are_listed_together() {
        let msg = problems(json!({"count": "x", "labels": 1}));
        assert!(
            msg.contains("`(root)`: \"repo\" is a required property"),
            "{msg}"
        );
        assert!(msg.contains("`/count`"), "{msg}");
        assert!(msg.contains("`/labels`"), "{msg}");
    }

    #[test]
    fn a_broken_schema_does_not_compile() {
        assert!(compile(json!({"type": 12})).is_err());
    }
}
