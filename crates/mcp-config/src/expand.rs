//! `${VAR}` / `${VAR:-default}` expansion in the string values of a config file.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::ProblemKind;
use crate::path::{JsonPath, Problems};

/// Expands `${…}` in every string value of `value`.
pub(crate) fn expand_value(
    value: &mut Value,
    path: &JsonPath,
    vars: &BTreeMap<String, String>,
    p: &mut Problems,
) {
    match value {
        Value::String(s) if s.contains('$') => match expand(s, vars) {
            Ok(expanded) => {
                *s = expanded.text;
                p.note_empty_vars(path, expanded.empty);
                p.note_expanded(path, expanded.values);
            }
            Err((kind, message)) => p.push(path, kind, message),
        },
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                expand_value(v, &path.index(i), vars, p);
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                expand_value(v, &path.key(k), vars, p);
            }
        }
        _ => {}
    }
}

/// How deep `${…}` references may nest in defaults (`${A:-${B:-x}}` nests two).
const MAX_NESTING: usize = 8;

/// One string after `${…}` expansion.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Expanded {
    /// The text.
    pub(crate) text: String,
    /// The variables whose reference gave nothing: set to the empty string, or unset (or
    /// empty) with an empty default.
    pub(crate) empty: Vec<String>,
    /// The variables' values that went into the text (those not empty), in order.
    pub(crate) values: Vec<String>,
}

/// Expands `${VAR}`, `${VAR:-default}` (the default may itself hold references, up to
/// [`MAX_NESTING`] deep, and is only evaluated when used) and the escape `$${` in one string.
///
/// Every reference is checked, used or not: a malformed one is an `InvalidValue`; unset
/// variables without a default are one `UndefinedVariable` naming them all.
pub(crate) fn expand(
    s: &str,
    vars: &BTreeMap<String, String>,
) -> Result<Expanded, (ProblemKind, String)> {
    let mut expander = Expander {
        vars,
        text: s,
        pos: 0,
        undefined: Vec::new(),
        empty: Vec::new(),
        values: Vec::new(),
    };
    let mut out = String::with_capacity(s.len());
    expander
        .sequence(0, Some(&mut out))
        .map_err(|message| (ProblemKind::InvalidValue, message))?;
    match expander.undefined.as_slice() {
        [] => Ok(Expanded {
            text: out,
            empty: expander.empty,
            values: expander.values,
        }),
        [name] => Err((
            ProblemKind::UndefinedVariable,
            format!(
                "environment variable `{name}` is not set (use `${{{name}:-default}}` for a default)"
            ),
        )),
        names => Err((
            ProblemKind::UndefinedVariable,
            format!(
                "environment variables {} are not set (use `${{NAME:-default}}` for a default)",
                names
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// A recursive-descent reader of one string's references.
struct Expander<'a> {
    vars: &'a BTreeMap<String, String>,
    text: &'a str,
    pos: usize,
    undefined: Vec<String>,
    empty: Vec<String>,
    values: Vec<String>,
}

impl Expander<'_> {
    /// Reads text up to its end (`depth` 0) or, inside the default of a reference at `depth`,
    /// up to and past the `}` that closes it; writes the expansion to `out` unless it is `None`
    /// (a default that is not used: checked, not evaluated).
    fn sequence(&mut self, depth: usize, mut out: Option<&mut String>) -> Result<(), String> {
        loop {
            let rest = &self.text[self.pos..];
            let stop = if depth == 0 {
                rest.find('$')
            } else {
                rest.find(['$', '}'])
            };
            let Some(i) = stop else {
                if depth > 0 {
                    return Err(Self::unterminated());
                }
                push(&mut out, rest);
                self.pos = self.text.len();
                return Ok(());
            };
            push(&mut out, &rest[..i]);
            let tail = &rest[i..];
            self.pos += i;
            if tail.starts_with('}') {
                self.pos += 1;
                return Ok(());
            } else if tail.starts_with("$${") {
                push(&mut out, "${");
                self.pos += 3;
            } else if tail.starts_with("${") {
                self.pos += 2;
                self.reference(depth + 1, out.as_deref_mut())?;
            } else {
                push(&mut out, "$");
                self.pos += 1;
            }
        }
    }

    /// Reads one reference after its `${`.
    fn reference(&mut self, depth: usize, out: Option<&mut String>) -> Result<(), String> {
        if depth > MAX_NESTING {
            return Err(format!(
                "`${{…}}` references are nested more than {MAX_NESTING} deep"
            ));
        }
        let rest = &self.text[self.pos..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let (name, after) = rest.split_at(len);
        if after.is_empty() {
            return Err(Self::unterminated());
        }
        let valid = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
        let value = self.vars.get(name).map(String::as_str);
        if valid && after.starts_with('}') {
            self.pos += len + 1;
            if let Some(out) = out {
                match value {
                    Some(v) => {
                        out.push_str(v);
                        if v.is_empty() {
                            self.note_empty(name);
                        } else {
                            self.values.push(v.to_owned());
                        }
                    }
                    None if !self.undefined.iter().any(|n| n == name) => {
                        self.undefined.push(name.to_owned());
                    }
                    None => {}
                }
            }
            Ok(())
        } else if valid && after.starts_with(":-") {
            self.pos += len + 2;
            match (out, value) {
                (Some(out), Some(v)) if !v.is_empty() => {
                    out.push_str(v);
                    self.values.push(v.to_owned());
                    self.sequence(depth, None)
                }
                (Some(out), _) => {
                    let before = out.len();
                    self.sequence(depth, Some(out))?;
                    if out.len() == before {
                        self.note_empty(name);
                    }
                    Ok(())
                }
                (None, _) => self.sequence(depth, None),
            }
        } else {
            Err(
                "bad variable reference: use `${NAME}` or `${NAME:-default}` (and `$${` for a literal `${`)"
                    .to_owned(),
            )
        }
    }

    fn note_empty(&mut self, name: &str) {
        if !self.empty.iter().any(|n| n == name) {
            self.empty.push(name.to_owned());
        }
    }

    fn unterminated() -> String {
        "unterminated `${` (close it with `}`, or write `$${` for a literal `${`)".to_owned()
    }
}

fn push(out: &mut Option<&mut String>, s: &str) {
    if let Some(out) = out {
        out.push_str(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::collect_vars;

    fn vars() -> BTreeMap<String, String> {
        collect_vars([("HOME", "/home/me"), ("EMPTY", ""), ("TOKEN", "t0k")])
    }

    #[test]
    fn expansion() {
        for (input, expected) in [
            ("plain", "plain"),
            ("${HOME}/x", "/home/me/x"),
            ("Bearer ${TOKEN}", "Bearer t0k"),
            ("${UNSET:-fallback}", "fallback"),
            ("${EMPTY:-fallback}", "fallback"),
            ("${EMPTY}", ""),
            ("${HOME:-}", "/home/me"),
            ("${UNSET:-}", ""),
            ("$${HOME}", "${HOME}"),
            ("cost: $5", "cost: $5"),
            ("$", "$"),
            ("${A:-x}${TOKEN}$", "xt0k$"),
            ("${UNSET:-${HOME}}", "/home/me"),
            ("${UNSET:-${EMPTY:-${TOKEN}}}/x", "t0k/x"),
            ("${HOME:-${UNSET}}", "/home/me"),
            ("${UNSET:-a${TOKEN}b$c}", "at0kb$c"),
            ("${UNSET:-$${x}}", "${x}"),
            ("${UNSET:-{x}}", "{x}"),
            ("}{$}", "}{$}"),
        ] {
            assert_eq!(expand(input, &vars()).unwrap().text, expected, "{input}");
        }
        for (input, kind) in [
            ("${UNSET}", ProblemKind::UndefinedVariable),
            ("${HOME", ProblemKind::InvalidValue),
            ("${}", ProblemKind::InvalidValue),
            ("${1X}", ProblemKind::InvalidValue),
            ("${A-b}", ProblemKind::InvalidValue),
            ("${A:=b}", ProblemKind::InvalidValue),
            ("${", ProblemKind::InvalidValue),
            ("${UNSET:-${HOME}", ProblemKind::InvalidValue),
            ("${UNSET:-x", ProblemKind::InvalidValue),
            ("${HOME:-${}}", ProblemKind::InvalidValue),
            ("${HOME:-${1BAD:-x}}", ProblemKind::InvalidValue),
            ("${UNSET:-${ALSO_UNSET}}", ProblemKind::UndefinedVariable),
            ("${HOME:-${UNSET}} ${X", ProblemKind::InvalidValue),
        ] {
            assert_eq!(expand(input, &vars()).unwrap_err().0, kind, "{input}");
        }
        let nine = format!("{}x{}", "${A:-".repeat(9), "}".repeat(9));
        assert_eq!(
            expand(&nine, &vars()).unwrap_err().0,
            ProblemKind::InvalidValue
        );
        let eight = format!("{}x{}", "${A:-".repeat(8), "}".repeat(8));
        assert_eq!(expand(&eight, &vars()).unwrap().text, "x");
    }

    #[test]
    fn every_unset_variable_is_named_once() {
        let (kind, message) = expand("${A}/${B:-${C}}/${A}/${HOME:-${D}}", &vars()).unwrap_err();
        assert_eq!(kind, ProblemKind::UndefinedVariable);
        assert!(message.contains("`A`, `C` are not set"), "{message}");
        assert!(
            !message.contains("`D`"),
            "an unused default is not evaluated: {message}"
        );
    }

    #[test]
    fn references_that_give_nothing_are_noted() {
        let empty = |s: &str| expand(s, &vars()).unwrap().empty;
        assert_eq!(empty("Bearer ${EMPTY}"), ["EMPTY"]);
        assert_eq!(empty("${UNSET:-${EMPTY}}"), ["EMPTY", "UNSET"]);
        assert_eq!(empty("${UNSET:-}${EMPTY}${EMPTY}"), ["UNSET", "EMPTY"]);
        assert!(empty("${EMPTY:-x}${HOME}${UNSET:-${HOME}}").is_empty());
    }

    proptest::proptest! {
        /// `$${` escapes every `${`: any text, escaped, expands back to itself.
        #[test]
        fn escaped_text_expands_to_itself(text in "[$}{a:_-]{0,40}") {
            let escaped = text.replace("${", "$${");
            proptest::prop_assert_eq!(expand(&escaped, &vars()).unwrap().text, text);
        }

        /// A chain of defaults `${V1:-${V2:-…:-last}}` gives the first variable set to a
        /// non-empty value, else the last default.
        #[test]
        fn nested_defaults_give_the_first_non_empty_variable(
            chain in proptest::collection::vec(
                proptest::option::of(proptest::option::of("[a-z/]{1,4}")), 1..=MAX_NESTING),
            last in "[a-z]{0,3}",
        ) {
            let mut vars = BTreeMap::new();
            let mut template = String::new();
            for (i, value) in chain.iter().enumerate() {
                template.push_str(&format!("${{V{i}:-"));
                match value {
                    Some(Some(v)) => { vars.insert(format!("V{i}"), v.clone()); }
                    Some(None) => { vars.insert(format!("V{i}"), String::new()); }
                    None => {}
                }
            }
            template.push_str(&last);
            template.push_str(&"}".repeat(chain.len()));
            let expected = chain.iter().flatten().flatten().next().cloned().unwrap_or(last);
            proptest::prop_assert_eq!(expand(&template, &vars).unwrap().text, expected);
        }
    }
}
