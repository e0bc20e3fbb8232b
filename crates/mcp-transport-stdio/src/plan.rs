//! What a server is started with: its program, arguments, directory and environment, as data,
//! so that one plan serves every way of starting it (a `std::process::Command`, or a request
//! to the zygote, which cannot take a `Command`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use crate::env::EnvPlan;

/// How to start one server.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) program: OsString,
    pub(crate) args: Vec<OsString>,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) env: EnvPlan,
}

impl Plan {
    /// `program` with no arguments, in the host's directory, with the host's environment.
    #[cfg(test)]
    pub(crate) fn new(program: impl Into<OsString>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            cwd: None,
            env: EnvPlan {
                clear: false,
                vars: Vec::new(),
            },
        }
    }

    /// Adds arguments.
    #[cfg(test)]
    pub(crate) fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets `command`'s arguments, directory and environment (the program is its own).
    pub(crate) fn configure(&self, command: &mut Command) {
        command.args(&self.args);
        if let Some(cwd) = &self.cwd {
            command.current_dir(cwd);
        }
        if self.env.clear {
            command.env_clear();
        }
        command.envs(self.env.vars.iter().map(|(k, v)| (k, v)));
    }

    /// The server's whole environment, as `configure` leaves it: the host's own now (unless
    /// cleared) with the plan's variables over it, later ones winning.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    pub(crate) fn environment(&self) -> Vec<(OsString, OsString)> {
        let mut all: Vec<(OsString, OsString)> = if self.env.clear {
            Vec::new()
        } else {
            std::env::vars_os().collect()
        };
        for (name, value) in &self.env.vars {
            match all.iter_mut().find(|(n, _)| n == name) {
                Some(slot) => slot.1.clone_from(value),
                None => all.push((name.clone(), value.clone())),
            }
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn the_environment_is_what_a_command_would_get() {
        let mut plan = Plan::new("env");
        plan.env = EnvPlan {
            clear: true,
            vars: vec![
                ("A".into(), "1".into()),
                ("B".into(), "2".into()),
                ("A".into(), "3".into()),
            ],
        };
        let mut command = Command::new("env");
        command.env_clear();
        plan.configure(&mut command);
        let out = command.output().unwrap();
        let mut from_command: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        let mut from_plan: Vec<String> = plan
            .environment()
            .into_iter()
            .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
            .collect();
        from_command.sort();
        from_plan.sort();
        assert_eq!(from_plan, from_command);
        assert_eq!(from_plan, ["A=3", "B=2"]);

        // Not cleared: the host's variables, the plan's over them.
        plan.env.clear = false;
        let all = plan.environment();
        assert!(all.iter().any(|(k, _)| k == "PATH"));
        assert_eq!(all.iter().filter(|(k, _)| k == "A").count(), 1);
    }
}
