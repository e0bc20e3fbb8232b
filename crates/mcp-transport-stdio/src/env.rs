//! The child's environment: a small safe set inherited from the parent, plus what the spec
//! declares.

use std::ffi::OsString;

use mcp_config::StdioSpec;

/// The variables a child inherits from the parent by default: enough to find programs, a home
/// directory, the user, a terminal, the locale, a temporary directory and the time zone —
/// and nothing that usually holds a credential.
pub const SAFE_ENV_VARS: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TMPDIR",
    "TZ",
];

/// How to set up the child's environment.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct EnvPlan {
    /// Start from an empty environment (otherwise: the parent's whole environment).
    pub(crate) clear: bool,
    /// Variables to set, in order (later ones win).
    pub(crate) vars: Vec<(OsString, OsString)>,
}

/// The plan for `spec`: with `inherit_env`, the parent's environment plus the declared
/// variables; otherwise only the `inherited` names the parent has (looked up with `parent`),
/// plus the declared variables, which win.
pub(crate) fn plan(
    spec: &StdioSpec,
    inherited: &[String],
    parent: impl Fn(&str) -> Option<OsString>,
) -> EnvPlan {
    let declared = spec
        .env
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v.expose())));
    if spec.inherit_env {
        return EnvPlan {
            clear: false,
            vars: declared.collect(),
        };
    }
    let safe = inherited
        .iter()
        .filter(|name| !spec.env.contains_key(name.as_str()))
        .filter_map(|name| parent(name).map(|value| (OsString::from(name), value)));
    EnvPlan {
        clear: true,
        vars: safe.chain(declared).collect(),
    }
}

#[cfg(test)]
mod tests {
    use mcp_config::Secret;

    use super::*;

    fn parent(name: &str) -> Option<OsString> {
        match name {
            "PATH" => Some("/usr/bin".into()),
            "HOME" => Some("/home/u".into()),
            "AWS_SECRET_ACCESS_KEY" => Some("parent-secret".into()),
            _ => None,
        }
    }

    fn safe() -> Vec<String> {
        SAFE_ENV_VARS.iter().map(|s| (*s).to_owned()).collect()
    }

    fn vars(plan: &EnvPlan) -> Vec<(&str, &str)> {
        plan.vars
            .iter()
            .map(|(k, v)| (k.to_str().unwrap(), v.to_str().unwrap()))
            .collect()
    }

    #[test]
    fn only_the_safe_set_and_declared_variables() {
        let mut spec = StdioSpec::new("srv", Vec::<String>::new());
        spec.env.insert("API_KEY".into(), Secret::new("declared"));
        let plan = plan(&spec, &safe(), parent);
        assert!(plan.clear);
        assert_eq!(
            vars(&plan),
            [
                ("PATH", "/usr/bin"),
                ("HOME", "/home/u"),
                ("API_KEY", "declared")
            ]
        );
    }

    #[test]
    fn declared_variables_override_inherited_ones() {
        let mut spec = StdioSpec::new("srv", Vec::<String>::new());
        spec.env.insert("PATH".into(), Secret::new("/opt/bin"));
        let plan = plan(&spec, &safe(), parent);
        assert_eq!(vars(&plan), [("HOME", "/home/u"), ("PATH", "/opt/bin")]);
    }

    #[test]
    fn inherit_env_keeps_everything() {
        let mut spec = StdioSpec::new("srv", Vec::<String>::new());
        spec.inherit_env = true;
        spec.env.insert("EXTRA".into(), Secret::new("1"));
        let plan = plan(&spec, &safe(), parent);
        assert_eq!(
            plan,
            EnvPlan {
                clear: false,
                vars: vec![("EXTRA".into(), "1".into())]
            }
        );
    }
}
