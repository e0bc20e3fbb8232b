//! The texts `hybrid_eval` embeds in place of the catalog's own: queries without their
//! literals, tools' descriptions in other shapes.

use mcp_catalog::eval::DatasetTool;

/// `query` without its numbers, quoted strings, URLs and e-mail addresses: the specifics an
/// embedding should not be steered by.
pub(crate) fn without_literals(query: &str) -> String {
    let mut out = String::new();
    let mut quote: Option<char> = None;
    for word in query.split_whitespace() {
        if let Some(q) = quote {
            if word.ends_with(q) {
                quote = None;
            }
            continue;
        }
        let first = word.chars().next().unwrap_or(' ');
        if (first == '"' || first == '\'') && word.len() > 1 {
            if !word[1..]
                .trim_end_matches(|c: char| !c.is_alphanumeric() && c != first)
                .ends_with(first)
            {
                quote = Some(first);
            }
            continue;
        }
        if word.contains("://") || word.contains('@') {
            continue;
        }
        let digits = word.chars().filter(char::is_ascii_digit).count();
        if digits * 2 >= word.chars().filter(|c| c.is_alphanumeric()).count() && digits > 0 {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    if out.trim().is_empty() {
        query.to_owned()
    } else {
        out
    }
}

/// The description a `--doc-text` variant embeds for `tool` (parameters included in it
/// when the variant has them): `param-names` (the description and the parameters' names only),
/// `first-sentence` (the description's first sentence and the parameters' names),
/// `param-docs` (parameters with their descriptions), `param-docs-short` (each description's
/// first sentence, at most 80 characters), `required-docs` (descriptions of the required
/// parameters only), `first-sentence-param-docs`,
/// `params-only`, `no-params`; `full` is the catalog's own `embedding_text`.
pub(crate) fn doc_variant(tool: &DatasetTool, variant: &str) -> Result<Option<String>, String> {
    let desc = tool.description.clone().unwrap_or_default();
    let first = match desc.find(". ") {
        Some(at) => desc[..at + 1].to_owned(),
        None => desc.clone(),
    };
    let props: Vec<(String, String)> = tool
        .input_schema
        .as_ref()
        .and_then(|s| s.get("properties"))
        .and_then(|p| p.as_object())
        .map(|p| {
            p.iter()
                .map(|(k, v)| {
                    let d = v.get("description").and_then(|d| d.as_str()).unwrap_or("");
                    (k.replace(['_', '.'], " "), d.to_owned())
                })
                .collect()
        })
        .unwrap_or_default();
    let names = props
        .iter()
        .map(|(k, _)| k.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let docs = props
        .iter()
        .map(|(k, d)| {
            if d.is_empty() {
                k.clone()
            } else {
                format!("{k}: {d}")
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    let short_docs = props
        .iter()
        .map(|(k, d)| {
            let d = d.split(". ").next().unwrap_or("");
            let d: String = d.chars().take(80).collect();
            if d.is_empty() {
                k.clone()
            } else {
                format!("{k}: {d}")
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    let required: Vec<&str> = tool
        .input_schema
        .as_ref()
        .and_then(|s| s.get("required"))
        .and_then(|r| r.as_array())
        .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let required_docs = tool
        .input_schema
        .as_ref()
        .and_then(|s| s.get("properties"))
        .and_then(|p| p.as_object())
        .map(|p| {
            p.iter()
                .map(|(k, v)| {
                    let name = k.replace(['_', '.'], " ");
                    let d = v.get("description").and_then(|d| d.as_str()).unwrap_or("");
                    if d.is_empty() || !required.contains(&k.as_str()) {
                        name
                    } else {
                        format!("{name}: {d}")
                    }
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default();
    let with = |head: &str, tail: &str| match tail.is_empty() {
        true => head.to_owned(),
        false => format!("{head}. Parameters: {tail}"),
    };
    Ok(Some(match variant {
        "full" => return Ok(None),
        "param-names" => with(&desc, &names),
        "first-sentence" => with(&first, &names),
        "param-docs" => with(&desc, &docs),
        "param-docs-short" => with(&desc, &short_docs),
        "required-docs" => with(&desc, &required_docs),
        "first-sentence-param-docs" => with(&first, &docs),
        "params-only" => docs,
        "no-params" => desc,
        other => return Err(format!("unknown --doc-text `{other}`")),
    }))
}
