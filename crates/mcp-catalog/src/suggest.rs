//! Close-match suggestions for an unknown tool name.

use crate::search::split_words_lower;

/// Up to `max` names from `candidates` that look like `wanted`, best first.
///
/// Two measures, whichever is better: edit distance between the lower-cased names (typos:
/// `create_isue`; a swap of neighbours is one edit), and overlap of their words (reordered or partial names: `issue_create`,
/// `github__issue`). Ties go to the alphabetically first name, so suggestions are stable.
pub(crate) fn suggest<'a>(
    wanted: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    max: usize,
) -> Vec<String> {
    let wanted_lower = wanted.to_lowercase();
    let wanted_words = split_words_lower(wanted);
    let mut scored: Vec<(f64, &str)> = candidates
        .into_iter()
        .filter_map(|c| {
            let lower = c.to_lowercase();
            let dist = strsim::osa_distance(&wanted_lower, &lower) as f64;
            let len = wanted_lower
                .chars()
                .count()
                .max(lower.chars().count())
                .max(1) as f64;
            let edit = 1.0 - dist / len;
            let words = split_words_lower(c);
            let common = wanted_words.iter().filter(|w| words.contains(w)).count() as f64;
            let union = (wanted_words.len() + words.len()) as f64 - common;
            let overlap = if union > 0.0 { common / union } else { 0.0 };
            let score = edit.max(overlap);
            (score >= 0.5).then_some((score, c))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored
        .into_iter()
        .take(max)
        .map(|(_, c)| c.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: &[&str] = &[
        "github__create_issue",
        "github__list_issues",
        "github__create_pull_request",
        "fs__read_file",
        "fs__write_file",
    ];

    #[test]
    fn typos_reorderings_and_partial_names() {
        for (wanted, best) in [
            ("github__create_isue", "github__create_issue"),
            ("github__issue_create", "github__create_issue"),
            ("create_issue", "github__create_issue"),
            ("fs__readfile", "fs__read_file"),
        ] {
            let got = suggest(wanted, NAMES.iter().copied(), 3);
            assert_eq!(
                got.first().map(String::as_str),
                Some(best),
                "{wanted}: {got:?}"
            );
            assert!(got.len() <= 3);
        }
    }

    #[test]
    fn nothing_alike_suggests_nothing() {
        assert!(suggest("weather_forecast", NAMES.iter().copied(), 3).is_empty());
    }

    #[test]
    fn edit_distance_counts_a_swap_as_one_edit() {
        // One edit of three (0.67); as Levenshtein, two (0.33), below the bar.
        assert_eq!(suggest("gti", ["git", "web"], 3), ["git"]);
        assert!(suggest("", NAMES.iter().copied(), 3).is_empty());
    }
}
