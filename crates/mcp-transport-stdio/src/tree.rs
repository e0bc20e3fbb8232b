//! Linux: the server's whole process tree, found through `/proc` and killed frozen.
//!
//! Killing the server's process group misses a process that left it: one that called
//! `setsid` (or `setpgid`) is in a group and session of its own. Those are found by parent
//! pid instead: the tree of a server is the server, its descendants, and every process in a
//! group or session that one of them leads. Descendants stay findable while their ancestors
//! live — a daemon's double fork re-parents to the server's supervisor, a child subreaper
//! (see [`crate::supervisor`]) — but once the supervisor is killed, its children go to init
//! and the link is lost. So the tree is also *noted* (pid and start time) just before each
//! step that may end it — closing its stdin, SIGTERM — and what was noted is killed with it.
//!
//! Killing is done frozen: SIGSTOP to every member, re-read `/proc` until no new member
//! appears (a stopped process cannot fork; one that forked in between is found by the next
//! reading), then SIGKILL to all. Every signal goes to a pid whose start time was just read
//! again, so a pid reused by an unrelated process is not hit (the window left is the few
//! microseconds between that reading and the signal).
//!
//! The supervisor covers the rest: when the server exits on its own (a crash mid-session)
//! and when the host is SIGKILLed, it kills every process it holds. What this walk adds is
//! the close that does not wait for the server: everything frozen and killed at once.

use std::collections::{HashMap, HashSet};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// At most this many processes are noted per server (a fork bomb does not grow the note
/// without bound; the live tree is still read whole at kill time).
const MAX_NOTED: usize = 4096;

/// Freezing re-reads `/proc` at most this many times.
const MAX_ROUNDS: usize = 32;

/// A process: its pid and its start time (clock ticks after boot), which tell it apart from a
/// later process with the same pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Member {
    pub(crate) pid: i32,
    start: u64,
}

impl Member {
    /// `pid` as it is now, if it exists.
    pub(crate) fn of(pid: i32) -> Option<Self> {
        read(pid).map(|p| p.member)
    }

    /// Still the same process (not exited and reaped, its pid not reused).
    fn is_current(self) -> bool {
        read(self.pid).is_some_and(|p| p.member == self)
    }
}

/// One line of `/proc/<pid>/stat`, the fields used here.
#[derive(Debug, Clone, Copy)]
struct Proc {
    member: Member,
    /// Ended and not yet reaped, with no thread left: it can start nothing more. (A process
    /// whose main thread ended while others run shows `Z` too, and may still fork.)
    zombie: bool,
    ppid: i32,
    pgid: i32,
    sid: i32,
}

fn read(pid: i32) -> Option<Proc> {
    parse(
        pid,
        &std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?,
    )
}

/// `pid (comm) state ppid pgrp session … starttime(22nd) …`; comm may hold spaces and `)`.
fn parse(pid: i32, stat: &str) -> Option<Proc> {
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // Field n of proc(5) is at index n - 3 here.
    let number = |n: usize| fields.get(n - 3)?.parse::<i64>().ok();
    Some(Proc {
        member: Member {
            pid,
            start: u64::try_from(number(22)?).ok()?,
        },
        zombie: matches!(fields.first(), Some(&("Z" | "X"))) && number(20)? <= 1,
        ppid: i32::try_from(number(4)?).ok()?,
        pgid: i32::try_from(number(5)?).ok()?,
        sid: i32::try_from(number(6)?).ok()?,
    })
}

/// Every process now.
fn scan() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(read)
        .collect()
}

/// The tree of `roots` (those still current) in `procs`: the roots, their descendants, and
/// the members of every group or session one of them leads; parents before children. Never
/// this process or init.
fn tree(procs: &[Proc], roots: &[Member]) -> Vec<Member> {
    tree_of(procs, roots)
        .into_iter()
        .map(|p| p.member)
        .collect()
}

/// [`tree`], each member with what `/proc` said of it.
fn tree_of(procs: &[Proc], roots: &[Member]) -> Vec<Proc> {
    let this = Pid::this().as_raw();
    let by_pid: HashMap<i32, &Proc> = procs.iter().map(|p| (p.member.pid, p)).collect();
    let mut found: Vec<Proc> = Vec::new();
    let mut pids: HashSet<i32> = HashSet::new();
    for root in roots {
        if let Some(&&p) = by_pid.get(&root.pid)
            && p.member == *root
            && pids.insert(root.pid)
        {
            found.push(p);
        }
    }
    // A pid's own group or session counts only when it leads it (pgid or sid equals a member's
    // pid), so the host's group and session, which no member leads, never join.
    loop {
        let before = found.len();
        for p in procs {
            let pid = p.member.pid;
            if pid == this || pid <= 1 || pids.contains(&pid) {
                continue;
            }
            if pids.contains(&p.ppid) || pids.contains(&p.pgid) || pids.contains(&p.sid) {
                pids.insert(pid);
                found.push(*p);
            }
        }
        if found.len() == before {
            return found;
        }
    }
}

/// The tree of `roots` as it is now.
pub(crate) fn note(roots: &[Member]) -> Vec<Member> {
    let mut members = tree(&scan(), roots);
    members.truncate(MAX_NOTED);
    members
}

/// Adds `more` to `noted`, without duplicates, up to [`MAX_NOTED`].
pub(crate) fn merge(noted: &mut Vec<Member>, more: Vec<Member>) {
    for member in more {
        if noted.len() >= MAX_NOTED {
            return;
        }
        if !noted.contains(&member) {
            noted.push(member);
        }
    }
}

/// Freezes the tree of `roots` and kills it: SIGSTOP to each member until no new one appears,
/// then SIGKILL to all. A reading that finds only zombies needs no other: a zombie starts
/// nothing, so nothing can have appeared since (what a server's close usually leaves: its
/// supervisor, ended, its tree already killed by it).
pub(crate) fn kill_tree(roots: &[Member]) {
    let mut stopped: Vec<Member> = Vec::new();
    for _ in 0..MAX_ROUNDS {
        // Stopped members are roots too: their children are found even if a root is gone.
        let mut all = roots.to_vec();
        all.extend_from_slice(&stopped);
        let fresh: Vec<Proc> = tree_of(&scan(), &all)
            .into_iter()
            .filter(|p| !stopped.contains(&p.member))
            .collect();
        if fresh.is_empty() {
            break;
        }
        let settled = fresh.iter().all(|p| p.zombie);
        for p in fresh {
            signal(p.member, Signal::SIGSTOP);
            stopped.push(p.member);
        }
        if settled {
            break;
        }
    }
    for member in stopped {
        signal(member, Signal::SIGKILL);
    }
}

fn signal(member: Member, signal: Signal) {
    if member.is_current() {
        let _ = kill(Pid::from_raw(member.pid), signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: i32, ppid: i32, pgid: i32, sid: i32) -> Proc {
        Proc {
            member: Member { pid, start: 7 },
            zombie: false,
            ppid,
            pgid,
            sid,
        }
    }

    fn pids(members: &[Member]) -> Vec<i32> {
        members.iter().map(|m| m.pid).collect()
    }

    #[test]
    fn parses_stat_lines_with_odd_names() {
        let stat = "4242 (a) b (c)) S 17 4242 99 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 123456 \
                    0 0";
        let p = parse(4242, stat).unwrap();
        assert_eq!(
            (p.ppid, p.pgid, p.sid, p.member.start),
            (17, 4242, 99, 123456)
        );
        assert!(!p.zombie);
        let ended = parse(4242, &stat.replace(") S 17", ") Z 17")).unwrap();
        assert!(ended.zombie);
        // Its main thread ended, two others still run: it may still fork.
        let running = parse(
            4242,
            &stat
                .replace(") S 17", ") Z 17")
                .replace(" 20 0 1 0 ", " 20 0 3 0 "),
        )
        .unwrap();
        assert!(!running.zombie);
    }

    #[test]
    fn the_tree_follows_parents_groups_and_sessions_it_leads() {
        let host = Pid::this().as_raw();
        let procs = [
            proc(host, 1, host, host),   // the host: never a member
            proc(100, host, 100, host),  // the server, leading its group
            proc(101, 100, 100, host),   // a helper in its group
            proc(102, 100, 102, 102),    // a child that called setsid
            proc(103, 102, 102, 102),    // its child
            proc(104, 1, 102, 102),      // an orphan of that session, now under init
            proc(105, 1, 105, 105),      // unrelated daemon
            proc(106, host, host, host), // another child of the host
            proc(107, 1, 100, host),     // an orphan left in the server's group
        ];
        let server = procs[1].member;
        assert_eq!(
            pids(&tree(&procs, &[server])),
            [100, 101, 102, 103, 104, 107]
        );
    }

    #[test]
    fn a_root_whose_pid_was_reused_is_ignored() {
        let procs = [proc(100, 1, 100, 100), proc(101, 100, 100, 100)];
        let stale = Member { pid: 100, start: 6 };
        assert!(tree(&procs, &[stale]).is_empty());
    }

    #[test]
    fn merging_keeps_one_of_each() {
        let a = Member { pid: 1, start: 1 };
        let b = Member { pid: 2, start: 1 };
        let mut noted = vec![a];
        merge(&mut noted, vec![a, b, b]);
        assert_eq!(noted, [a, b]);
    }
}
