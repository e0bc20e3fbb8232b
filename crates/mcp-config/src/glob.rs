//! Tool-name globs: `*` matches any run of characters, `?` one character, everything else
//! itself.

/// True when `name` matches `pattern`.
pub(crate) fn matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative matcher with one backtrack point for the last `*` seen: linear in practice,
    // never exponential.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) && p[pi] != '*' {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn globs() {
        for (pattern, name, expected) in [
            ("search", "search", true),
            ("search", "search2", false),
            ("*", "anything", true),
            ("*", "", true),
            ("get_*", "get_issue", true),
            ("get_*", "list_issues", false),
            ("*_issue", "get_issue", true),
            ("*issue*", "list_issues_fast", true),
            ("g?t", "get", true),
            ("g?t", "gt", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
        ] {
            assert_eq!(matches(pattern, name), expected, "{pattern} vs {name}");
        }
    }
}
