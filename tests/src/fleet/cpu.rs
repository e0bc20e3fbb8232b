//! The CPU time processes spent, read from `/proc/<pid>/stat` (user and system, in the
//! kernel's clock ticks): where a load's work went, process by process, which the wall time
//! of a CPU-bound load on a small machine does not tell.
//!
//! ```no_run
//! use integration_tests::fleet::cpu::Ticks;
//!
//! let before = Ticks::of(&[("self", std::process::id())]);
//! // … the load …
//! let spent = Ticks::of(&[("self", std::process::id())]).since(&before);
//! println!("{}", spent.get("self"));
//! ```

use std::collections::BTreeMap;

/// CPU ticks by part (a part may sum several processes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ticks(BTreeMap<String, u64>);

impl Ticks {
    /// The ticks each process has spent so far, summed by part name; a process gone reads 0.
    pub fn of(parts: &[(&str, u32)]) -> Self {
        let mut ticks = BTreeMap::new();
        for (part, pid) in parts {
            *ticks.entry((*part).to_owned()).or_insert(0) += spent(*pid);
        }
        Self(ticks)
    }

    /// What was spent between `before` and these.
    #[must_use]
    pub fn since(&self, before: &Ticks) -> Ticks {
        Self(
            self.0
                .iter()
                .map(|(part, t)| (part.clone(), t.saturating_sub(before.get(part))))
                .collect(),
        )
    }

    /// The ticks of `part` (0 when it has none).
    pub fn get(&self, part: &str) -> u64 {
        self.0.get(part).copied().unwrap_or(0)
    }

    /// Every part's ticks, and their total.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// The parts and their ticks.
    pub fn parts(&self) -> impl Iterator<Item = (&str, u64)> {
        self.0.iter().map(|(part, t)| (part.as_str(), *t))
    }
}

/// User and system ticks of `pid` (fields 14 and 15 of `/proc/<pid>/stat`), 0 when unreadable.
fn spent(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // The command name (field 2) may hold spaces; the fields after it are plain.
    let Some((_, after_name)) = stat.rsplit_once(')') else {
        return 0;
    };
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    field(11) + field(12)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_process_spends_ticks_and_a_missing_one_none() {
        let me = [("self", std::process::id())];
        let before = Ticks::of(&me);
        let started = std::time::Instant::now();
        let mut x = 0u64;
        // Busy until a tick shows (one is 10 ms of CPU), however loaded the machine.
        while Ticks::of(&me).since(&before).get("self") == 0 {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "no tick counted in a minute of busy work"
            );
        }
        assert_eq!(Ticks::of(&[("gone", u32::MAX)]).get("gone"), 0);
    }
}
