//! Tool names: the external `server__tool` id and the name a model sees.

/// The separator between a server key and a tool name.
pub const SEPARATOR: &str = "__";

/// The longest name a model is shown (the limit of the common model APIs).
pub const MAX_MODEL_NAME_LEN: usize = 64;

/// Length of the hash suffix, `-` and eight hex digits.
const SUFFIX_LEN: usize = 9;

/// The external id of a tool: `server__tool`, exactly as the server and configuration spell it.
///
/// ```
/// assert_eq!(mcp_catalog::external_name("github", "create_issue"), "github__create_issue");
/// ```
pub fn external_name(server: &str, tool: &str) -> String {
    format!("{server}{SEPARATOR}{tool}")
}

/// The name a model is shown for a tool: `server__tool` restricted to `[A-Za-z0-9_-]` and to at
/// most 64 characters.
///
/// - A `.` (common in MCP tool names) becomes `-`.
/// - Any other character outside the set becomes `_` (a run of them, one `_`), and since that
///   loses information the name gets a suffix `-` + 8 hex digits of a stable hash (FNV-1a) of
///   the external name, so two names that differ only there still differ.
/// - A name longer than 64 characters is cut and gets the same suffix.
///
/// The result depends on nothing but the input: the same tool has the same name on every
/// machine and in every release. Two tools may still map to one name (`a.b` and `a-b`); the
/// catalog reports that as a collision naming both.
///
/// ```
/// use mcp_catalog::model_name;
/// assert_eq!(model_name("github", "create_issue"), "github__create_issue");
/// assert_eq!(model_name("bfcl", "math.factorial"), "bfcl__math-factorial");
/// let long = model_name("server", &"x".repeat(100));
/// assert_eq!(long.len(), 64);
/// assert_eq!(long, model_name("server", &"x".repeat(100)));
/// ```
pub fn model_name(server: &str, tool: &str) -> String {
    let external = external_name(server, tool);
    let mut out = String::with_capacity(external.len());
    let mut lossy = false;
    let mut in_run = false;
    for c in external.chars() {
        match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '_' | '-' => {
                out.push(c);
                in_run = false;
            }
            '.' => {
                out.push('-');
                in_run = false;
            }
            _ => {
                lossy = true;
                if !in_run {
                    out.push('_');
                }
                in_run = true;
            }
        }
    }
    if lossy || out.len() > MAX_MODEL_NAME_LEN {
        out.truncate(MAX_MODEL_NAME_LEN - SUFFIX_LEN);
        // Truncation never splits a character: `out` is ASCII.
        out.push_str(&format!("-{:08x}", stable_hash(external.as_bytes()) as u32));
    }
    out
}

/// 64-bit FNV-1a: tiny, and stable across platforms and releases (unlike `DefaultHasher`).
fn stable_hash(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// True when `name` may be shown to a model as it is.
pub(crate) fn is_model_safe(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_MODEL_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(server: &str, tool: &str, expected: &str) {
        let name = model_name(server, tool);
        assert_eq!(name, expected, "{server} / {tool}");
        assert!(is_model_safe(&name), "{name} is not model-safe");
    }

    #[test]
    fn plain_names_pass_through() {
        check("github", "create_issue", "github__create_issue");
        check("fs", "read-file", "fs__read-file");
        check("Srv1", "getHTTPThing", "Srv1__getHTTPThing");
    }

    #[test]
    fn dots_become_dashes() {
        check("bfcl", "math.factorial", "bfcl__math-factorial");
        check("a.b", "c.d.e", "a-b__c-d-e");
    }

    #[test]
    fn other_characters_get_a_hash_suffix() {
        let name = model_name("srv", "검색 도구");
        assert!(name.starts_with("srv___"), "{name}");
        assert!(is_model_safe(&name));
        assert_eq!(name.len(), "srv___".len() + SUFFIX_LEN, "{name}");
        // Different unicode names stay apart.
        assert_ne!(name, model_name("srv", "검색 도구2"));
        assert_ne!(model_name("srv", "é"), model_name("srv", "è"));
        check(
            "srv",
            "a b",
            &format!("srv__a_b-{:08x}", stable_hash(b"srv__a b") as u32),
        );
        // A run of replaced characters is one `_`.
        assert!(model_name("srv", "a  /b").starts_with("srv__a_b-"));
    }

    #[test]
    fn the_64_character_edge() {
        // Exactly 64: kept as is.
        let tool = "t".repeat(MAX_MODEL_NAME_LEN - "srv__".len());
        check("srv", &tool, &format!("srv__{tool}"));
        // 65: cut to 55 and suffixed, 64 in all.
        let tool = "t".repeat(MAX_MODEL_NAME_LEN - "srv__".len() + 1);
        let name = model_name("srv", &tool);
        assert_eq!(name.len(), MAX_MODEL_NAME_LEN);
        assert!(is_model_safe(&name));
        assert_eq!(
            &name[..MAX_MODEL_NAME_LEN - SUFFIX_LEN],
            &format!("srv__{tool}")[..55]
        );
        // Two long names that share their first 55 characters still differ.
        assert_ne!(name, model_name("srv", &format!("{tool}x")));
    }

    #[test]
    fn hashes_are_stable() {
        // Pinned values: a change here renames tools for every user.
        assert_eq!(stable_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(
            model_name("srv", &"y".repeat(80)),
            format!(
                "srv__{}-{:08x}",
                "y".repeat(50),
                stable_hash(format!("srv__{}", "y".repeat(80)).as_bytes()) as u32
            )
        );
    }
}
