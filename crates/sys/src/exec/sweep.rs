//! The pieces of the sweep that look at `/proc` and kill: what [`ProcessGroup`] uses to find
//! and stop whatever its leader left behind.
//!
//! Invariants:
//! - a process is signalled by pid only while it is our own unreaped child (its pid is pinned
//!   until we reap it), or through a pidfd opened and checked first; a group only through
//!   the number of our unreaped leader (in `group.rs`) or through a pidfd of its leader;
//! - reading `/proc` is observation only: a recycled pid there can at worst miscount;
//! - every loop is bounded by a deadline or by [`MAX_PROCESSES`].
//!
//! [`ProcessGroup`]: super::ProcessGroup

use super::timespec;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fd::OwnedFd;
use rustix::process::{
    kill_process, kill_process_group, pidfd_open, pidfd_send_signal, waitid, Pid, PidfdFlags,
    Signal, WaitId, WaitIdOptions,
};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// How many processes one walk or one sweep round looks at, at most (fork storms).
const MAX_PROCESSES: usize = 4096;
/// How many killed processes one sweep round waits on through pidfds.
const MAX_WAITED: usize = 64;
/// The longest one round waits for what it killed before looking again.
const ROUND_WAIT: Duration = Duration::from_millis(10);

/// Rounds of killing and reaping our own children, and what they found alive.
pub(super) struct Sweeper {
    until: Instant,
    /// The dispatcher's own session, read when a live process is first found: a clean run
    /// (nothing left behind) never needs it.
    own_session: std::cell::OnceCell<Option<i32>>,
    /// Distinct processes found alive (or killed whole with their group) after the leader.
    found: BTreeSet<i32>,
    /// Groups in another session killed whole (by leader pid): their members die unseen by
    /// any scan, and are counted when they are reaped killed.
    killed_groups: BTreeSet<i32>,
}

impl Sweeper {
    pub(super) fn new(until: Instant) -> Sweeper {
        Sweeper {
            until,
            own_session: std::cell::OnceCell::new(),
            found: BTreeSet::new(),
            killed_groups: BTreeSet::new(),
        }
    }

    /// How many distinct live processes the rounds found.
    pub(super) fn found(&self) -> usize {
        self.found.len()
    }

    /// One round over `children` (our own, as just listed): count the live ones and their
    /// descendants; SIGKILL the groups in another session that live ones belong to, then
    /// `group` (our unreaped leader's); reap the dead, SIGKILL the live; wait a little for
    /// them. Returns `false` once the deadline passed.
    pub(super) fn round(&mut self, children: &[i32], group: Option<Pid>) -> bool {
        let children = &children[..children.len().min(MAX_PROCESSES)];
        // Listed as our children, and only this process reaps: each is unreaped (alive or a
        // zombie), so its pid, its /proc entry and a pidfd opened now all name that process.
        // A fork-and-exit chain leaves hundreds of zombies: tell them apart with one cheap
        // non-reaping wait each, and read /proc only for the live ones.
        let peek = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
        let live: Vec<i32> = children
            .iter()
            .copied()
            .filter(|&raw| {
                Pid::from_raw(raw)
                    .is_some_and(|pid| matches!(waitid(WaitId::Pid(pid), peek), Ok(None)))
            })
            .collect();
        for &raw in &live {
            // Count before killing: what the kills below end was alive after the leader.
            self.note_live(raw);
            let Some(stat) = Stat::read(raw) else {
                continue;
            };
            // Its group's leader is pinned if it is one of these unreaped children (a zombie
            // leader included: it still names its group).
            if self.escaped(&stat)
                && children.contains(&stat.pgrp)
                && self.killed_groups.insert(stat.pgrp)
            {
                if let Some(fd) =
                    Pid::from_raw(stat.pgrp).and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok())
                {
                    kill_group_led_by(&fd);
                }
            }
        }
        if let Some(group) = group {
            let _ = kill_process_group(group, Signal::KILL);
        }

        let mut killed: Vec<OwnedFd> = Vec::new();
        let mut reaped = 0usize;
        for &raw in children {
            if Instant::now() >= self.until {
                return false;
            }
            let Some(pid) = Pid::from_raw(raw) else {
                continue;
            };
            match waitid(
                WaitId::Pid(pid),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
            ) {
                Ok(Some(status)) => {
                    reaped += 1;
                    // Killed with a whole group that no scan saw alive: it was alive when the
                    // kill hit. Anything else had exited on its own and is no leak.
                    let sigkill = status.terminating_signal() == Some(libc::SIGKILL);
                    if sigkill && !self.killed_groups.is_empty() && !live.contains(&raw) {
                        self.found.insert(raw);
                    }
                }
                // Alive and our unreaped child: its pid cannot be recycled; kill it by number.
                Ok(None) => {
                    self.found.insert(raw);
                    let _ = kill_process(pid, Signal::KILL);
                    if killed.len() < MAX_WAITED {
                        if let Ok(fd) = pidfd_open(pid, PidfdFlags::empty()) {
                            killed.push(fd);
                        }
                    }
                }
                // Not (or no longer) our child.
                Err(_) => {}
            }
        }

        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        if !killed.is_empty() {
            // Wake as soon as one of them is gone; the next round reaps it and its orphans.
            let mut fds: Vec<PollFd<'_>> = killed
                .iter()
                .map(|fd| PollFd::new(fd, PollFlags::IN))
                .collect();
            let _ = poll(&mut fds, Some(&timespec(left.min(ROUND_WAIT))));
        } else if reaped == 0 {
            // Listed but not ours to wait for (yet): do not spin.
            std::thread::sleep(left.min(Duration::from_millis(1)));
        }
        true
    }

    /// In another session than the dispatcher: the session was created by `setsid()` in the
    /// adapter's own lineage, and no process can join a session from outside, so every member
    /// of a group in it is a descendant of the adapter.
    fn escaped(&self, stat: &Stat) -> bool {
        // From /proc, not getsid(2): in a PID namespace whose session leader lives outside,
        // the session id is 0, which rustix's `Pid` cannot hold.
        let own = self
            .own_session
            .get_or_init(|| Stat::read(std::process::id() as i32).map(|s| s.session));
        own.is_some_and(|own| stat.session != own)
    }

    /// Add `root` and its live descendants to `found` (bounded).
    fn note_live(&mut self, root: i32) {
        let mut queue = vec![root];
        let mut visited = 0usize;
        while let Some(pid) = queue.pop() {
            visited += 1;
            if visited > MAX_PROCESSES {
                return;
            }
            let live = pid == root || Stat::read(pid).is_some_and(|s| s.live);
            if live && self.found.insert(pid) {
                queue.extend(children_of(pid));
            }
        }
    }
}

/// SIGKILL the process group whose id is the pid of the process behind `pidfd` — the group it
/// leads — through `pidfd_send_signal(PIDFD_SIGNAL_PROCESS_GROUP)` (Linux 6.9; an error, and
/// so a no-op, before). The kernel finds the group from the pidfd's own pid, never from a
/// number, so a recycled id cannot be hit, and a zombie leader still names its group.
///
/// A group signal cannot be outrun by `fork()` (the kernel restarts a fork that races with
/// it): this stops a fork-and-exit chain in one step, where killing its members one by one
/// may trail behind it. Only used for groups in another session (see [`Sweeper::escaped`]).
fn kill_group_led_by(pidfd: &OwnedFd) {
    use std::os::fd::AsRawFd;
    // SAFETY: pidfd_send_signal(2) takes a descriptor we own and keep open for the call, a
    // signal number, a null siginfo pointer (allowed: the kernel then builds the siginfo as
    // kill(2) would, and reads nothing of ours) and a flags word. rustix has no call with the
    // flags argument.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            libc::PIDFD_SIGNAL_PROCESS_GROUP,
        );
    }
}

/// SIGKILL every descendant of `leader` (alive, or a zombie we have not reaped) that can be
/// found under `/proc`. Each one is opened as a pidfd and checked to be the child of a process
/// that is still pinned before it is signalled, so a recycled pid is never hit.
pub(super) fn kill_descendants(leader: Pid) {
    // (pid, its pidfd) of processes whose children are still to be visited.
    let mut queue: Vec<(i32, Option<OwnedFd>)> = vec![(leader.as_raw_nonzero().get(), None)];
    let mut seen = 0usize;
    while let Some((parent, parent_fd)) = queue.pop() {
        for child in children_of(parent) {
            seen += 1;
            if seen > MAX_PROCESSES {
                return;
            }
            let Some(fd) =
                Pid::from_raw(child).and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok())
            else {
                continue;
            };
            // Read the parent after opening the pidfd: if `child` is still that process, the
            // stat describes it. `parent` itself must still be pinned when read: the leader is
            // (it is unreaped); any other parent must not have exited since it was opened.
            let parent_now = Stat::read(child).map(|s| s.ppid);
            let parent_pinned = match &parent_fd {
                None => true,
                Some(fd) => !has_exited(fd),
            };
            if parent_now != Some(parent) || !parent_pinned {
                continue;
            }
            let _ = pidfd_send_signal(&fd, Signal::KILL);
            queue.push((child, Some(fd)));
        }
    }
}

/// Whether the process behind `pidfd` has exited (its pidfd is readable).
fn has_exited(pidfd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    matches!(poll(&mut fds, Some(&Timespec::default())), Ok(n) if n > 0)
}

/// Children of every thread of this process (`/proc/self/task/*/children`).
pub(super) fn own_children() -> Vec<i32> {
    children_in("/proc/self/task")
}

/// Children of every thread of `pid`.
fn children_of(pid: i32) -> Vec<i32> {
    children_in(&format!("/proc/{pid}/task"))
}

fn children_in(tasks: &str) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(tasks) else {
        return out;
    };
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// What the sweep reads from `/proc/PID/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stat {
    /// Running or sleeping: not a zombie.
    pub(super) live: bool,
    pub(super) ppid: i32,
    pub(super) pgrp: i32,
    pub(super) session: i32,
}

impl Stat {
    pub(super) fn read(pid: i32) -> Option<Stat> {
        Stat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    fn parse(stat: &str) -> Option<Stat> {
        // The command name is parenthesised and may itself hold ") ": cut at the last one.
        let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
        let state = fields.next()?;
        let mut number = || fields.next()?.parse::<i32>().ok();
        Some(Stat {
            live: !matches!(state, "Z" | "X"),
            ppid: number()?,
            pgrp: number()?,
            session: number()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parsing_takes_the_last_parenthesis() {
        let stat = "42 (evil) R 1 2 3) S 7 8 9 0 -1 4194560";
        assert_eq!(
            Stat::parse(stat),
            Some(Stat {
                live: true,
                ppid: 7,
                pgrp: 8,
                session: 9
            })
        );
        let zombie = "43 (x) Z 1 43 43 0";
        assert!(!Stat::parse(zombie).unwrap().live);
        assert_eq!(Stat::parse("44 (cut) R 1"), None);
        assert_eq!(Stat::parse("no parenthesis"), None);
    }

    #[test]
    fn stat_matches_the_kernel_s_own_answers() {
        use std::os::unix::process::CommandExt;
        let me = std::process::id() as i32;
        let own = Stat::read(me).unwrap();
        assert!(own.live);
        assert_eq!(own.ppid as u32, std::os::unix::process::parent_id());
        // A child in a group of its own: its parent is us, its group is its own pid, and it
        // shares our session (whatever number that has in this PID namespace, 0 included).
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let stat = Stat::read(pid);
        let _ = child.kill();
        let _ = child.wait();
        let stat = stat.unwrap();
        assert!(stat.live);
        assert_eq!(stat.ppid, me);
        assert_eq!(stat.pgrp, pid);
        assert_eq!(stat.session, own.session);
        assert_eq!(Stat::read(i32::MAX), None, "no such process");
    }
}
