//! JSON text to a `Value`, with every repeated key of an object reported at its path.
//!
//! `serde_json` keeps the last value of a key given twice without a word; in a configuration
//! that hides a mistake (which of two `command`s runs?), and TOML refuses it. So JSON text is
//! parsed as usual, then walked once more by a small visitor that only tracks each object's
//! keys and pushes a [`ProblemKind::DuplicateKey`] for every repeat: `servers[0].command`.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::ProblemKind;
use crate::parse::shown;
use crate::path::{JsonPath, Problems};

/// Parses `text` as JSON; a repeated key is a problem at its path under `root` (the parsed
/// value keeps one of the values, so the other checks still run). A syntax error is returned
/// as is, with nothing pushed.
pub(crate) fn parse(text: &str, root: &JsonPath, p: &mut Problems) -> serde_json::Result<Value> {
    let value = serde_json::from_str::<Value>(text)?;
    let found = RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_str(text);
    Keys {
        at: At::Root(root),
        found: &found,
    }
    .deserialize(&mut de)?;
    for (path, key) in found.into_inner() {
        p.push(
            &path,
            ProblemKind::DuplicateKey,
            format!(
                "duplicate key {}: this object already has it; keep one",
                shown(&key)
            ),
        );
    }
    Ok(value)
}

/// Where a value is, as a chain of references to its parents (a path is built only for a
/// repeated key).
#[derive(Clone, Copy)]
enum At<'a> {
    Root(&'a JsonPath),
    Key(&'a str, &'a At<'a>),
    Index(usize, &'a At<'a>),
}

impl At<'_> {
    fn path(&self) -> JsonPath {
        match self {
            At::Root(root) => (*root).clone(),
            At::Key(key, parent) => parent.path().key(key),
            At::Index(i, parent) => parent.path().index(*i),
        }
    }
}

/// Visits one value, recording repeated keys of the objects in it.
struct Keys<'a> {
    at: At<'a>,
    found: &'a RefCell<Vec<(JsonPath, String)>>,
}

impl<'de> DeserializeSeed<'de> for Keys<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Keys<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(Keys {
                at: At::Index(i, &self.at),
                found: self.found,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            map.next_value_seed(Keys {
                at: At::Key(&key, &self.at),
                found: self.found,
            })?;
            if seen.contains(&key) {
                let path = At::Key(&key, &self.at).path();
                self.found.borrow_mut().push((path, key));
            } else {
                seen.insert(key);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn duplicates(text: &str) -> Vec<String> {
        let mut p = Problems::new();
        parse(text, &JsonPath::root(), &mut p).unwrap();
        p.into_vec()
            .into_iter()
            .map(|p| {
                assert_eq!(p.kind, ProblemKind::DuplicateKey);
                p.path
            })
            .collect()
    }

    #[test]
    fn repeated_keys_are_found_at_every_depth() {
        assert_eq!(
            duplicates(r#"{"a": 1, "b": {"c": [1, {"d": 2}]}}"#),
            [""; 0]
        );
        assert_eq!(
            duplicates(
                r#"{"a": 1, "a": 2, "b": [{"x": 1}, {"x": 1, "y": {"z": 0, "z": 0}, "x": 2}]}"#
            ),
            ["a", "b[1].y.z", "b[1].x"]
        );
        assert_eq!(
            duplicates(r#"{"k k": 1, "k k": 2, "k k": 3}"#),
            [r#"["k k"]"#, r#"["k k"]"#]
        );
        assert_eq!(duplicates(r#"[{"a": 1}, {"a": 1}]"#), [""; 0]);
    }

    #[test]
    fn the_value_is_the_one_serde_json_builds() {
        let text = r#"{"n": [1, -2, 3.5, 18446744073709551615, null, true, "s\u00e9"], "o": {}}"#;
        let mut p = Problems::new();
        let value = parse(text, &JsonPath::root(), &mut p).unwrap();
        assert_eq!(value, serde_json::from_str::<Value>(text).unwrap());
        assert!(p.is_empty());
        assert!(parse("[1,", &JsonPath::root(), &mut p).is_err());
        assert!(parse("{} x", &JsonPath::root(), &mut p).is_err());
        assert!(p.is_empty());
    }

    fn document() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "[a-z\"\\\\é ]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map("[a-c .]{0,3}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Renders `value` as JSON text, where the `target`-th object with a key (in document
    /// order) repeats its first entry at its end; the path of that repeat, if there is one.
    fn render(
        value: &Value,
        path: &JsonPath,
        target: &mut usize,
        out: &mut String,
    ) -> Option<JsonPath> {
        let mut found = None;
        match value {
            Value::Array(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    found = found.or(render(v, &path.index(i), target, out));
                }
                out.push(']');
            }
            Value::Object(map) if !map.is_empty() => {
                let here = *target == 0;
                *target = if here { usize::MAX } else { *target - 1 };
                out.push('{');
                for (i, (k, v)) in map.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&format!("{}:", Value::from(k.as_str())));
                    found = found.or(render(v, &path.key(k), target, out));
                }
                if here {
                    let (k, v) = map.iter().next().unwrap();
                    out.push_str(&format!(",{}:{v}", Value::from(k.as_str())));
                    found = Some(path.key(k));
                }
                out.push('}');
            }
            other => out.push_str(&other.to_string()),
        }
        found
    }

    proptest::proptest! {
        /// Any document, with one key of one object repeated or none: the value serde_json
        /// reads, and exactly that repeat reported at its path.
        #[test]
        fn exactly_the_repeated_key_is_reported(doc in document(), target in 0usize..6) {
            let mut text = String::new();
            let root = JsonPath::raw("DOC");
            let repeat = render(&doc, &root, &mut { target }, &mut text);
            let mut p = Problems::new();
            let value = parse(&text, &root, &mut p).unwrap();
            proptest::prop_assert_eq!(&value, &doc);
            let found: Vec<String> = p.into_vec().into_iter().map(|p| p.path).collect();
            let expected: Vec<String> = repeat.iter().map(|p| p.as_str().to_owned()).collect();
            proptest::prop_assert_eq!(found, expected, "{}", text);
        }
    }
}
