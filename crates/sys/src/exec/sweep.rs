//! The pieces of the sweep that look at `/proc` and kill: what [`ProcessGroup`] uses to find
//! and stop whatever its leader left behind.
//!
//! Invariants:
//! - a process is signalled by pid only while it is our own unreaped child (its pid is pinned
//!   until we reap it), or through a pidfd opened and checked first; a group only through
//!   the number of its leader while that leader is our own unreaped child (ours in
//!   `group.rs`; an escaped group's here, killed before its leader is reaped);
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
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
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
    // exec/ owns signals (clippy.toml's disallowed-methods).
    #[allow(clippy::disallowed_methods)]
    pub(super) fn round(&mut self, children: &[i32], group: Option<Pid>) -> bool {
        let children = &children[..children.len().min(MAX_PROCESSES)];
        // Listed as our children, and only this process reaps: each is unreaped (alive or a
        // zombie), so its pid, its /proc entry and a pidfd opened now all name that process.
        // A fork-and-exit chain leaves hundreds of zombies: tell them apart with one cheap
        // non-reaping wait each, and read /proc only for the live ones (and a zombie leading a
        // group).
        let peek = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
        let mut live = Vec::new();
        for &raw in children {
            let Some(pid) = Pid::from_raw(raw) else {
                continue;
            };
            match waitid(WaitId::Pid(pid), peek) {
                Ok(None) => live.push(raw),
                // A zombie that leads a group in another session (the `setsid()` at the head
                // of a chain) is killed with its group before the loop below reaps it: once
                // reaped, nothing pins its group any more, and a fork-and-exit chain in it
                // can only be killed one member at a time, which it outruns.
                Ok(Some(_)) if is_group_leader(pid) => {
                    if let Some(stat) = ProcStat::of(raw) {
                        self.kill_escaped_group(raw, &stat);
                    }
                }
                _ => {}
            }
        }
        for &raw in &live {
            // Count before killing: what the kills below end was alive after the leader.
            self.note_live(raw);
            let Some(stat) = ProcStat::of(raw) else {
                continue;
            };
            // Its group's leader is pinned if it is one of these unreaped children (a zombie
            // leader included: it still names its group).
            if children.contains(&stat.pgrp) {
                self.kill_escaped_group(stat.pgrp, &stat);
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

    /// SIGKILL the group led by `leader`, once, if `stat` (of a member) shows the group is in
    /// another session ([`escaped`](Self::escaped)). `leader` must be one of our unreaped
    /// children (alive or a zombie): then its number names that process, and so its group.
    ///
    /// A group signal cannot be outrun by `fork()` (the kernel restarts a fork that races with
    /// it, or delivers the signal to the new child too): this stops a fork-and-exit chain in one
    /// step, where killing its members one by one may trail behind it for ever.
    // exec/ owns signals (clippy.toml's disallowed-methods).
    #[allow(clippy::disallowed_methods)]
    fn kill_escaped_group(&mut self, leader: i32, stat: &ProcStat) {
        if !self.escaped(stat) || !self.killed_groups.insert(leader) {
            return;
        }
        if let Some(group) = Pid::from_raw(leader) {
            let _ = kill_process_group(group, Signal::KILL);
        }
    }

    /// In another session than the dispatcher: the session was created by `setsid()` in the
    /// adapter's own lineage, and no process can join a session from outside, so every member
    /// of a group in it is a descendant of the adapter.
    fn escaped(&self, stat: &ProcStat) -> bool {
        // From /proc, not getsid(2): in a PID namespace whose session leader lives outside,
        // the session id is 0, which rustix's `Pid` cannot hold.
        let own = self
            .own_session
            .get_or_init(|| ProcStat::of(std::process::id() as i32).map(|s| s.session));
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
            let live = pid == root || ProcStat::of(pid).is_some_and(|s| s.live());
            if live && self.found.insert(pid) {
                queue.extend(children_of(pid));
            }
        }
    }
}

/// SIGKILL every descendant of `leader` (alive, or a zombie we have not reaped) that can be
/// found under `/proc`. Each one is opened as a pidfd and checked to be the child of a process
/// that is still pinned before it is signalled, so a recycled pid is never hit.
// exec/ owns signals (clippy.toml's disallowed-methods).
#[allow(clippy::disallowed_methods)]
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
            let parent_now = ProcStat::of(child).map(|s| s.ppid);
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

/// Whether `pid` (our unreaped child, so the number is pinned) leads its process group.
fn is_group_leader(pid: Pid) -> bool {
    rustix::process::getpgid(Some(pid)).is_ok_and(|group| group == pid)
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
    let Ok((tasks_found, _)) = crate::fs::list_dir_path(Path::new(tasks), MAX_PROCESSES) else {
        return out;
    };
    for task in tasks_found {
        let children = Path::new(tasks)
            .join(OsStr::from_bytes(&task.name))
            .join("children");
        if let Ok(text) = crate::fs::read_text(&children, MAX_CHILDREN_BYTES) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// The most of one thread's `children` file read: [`MAX_PROCESSES`] pids and their spaces.
const MAX_CHILDREN_BYTES: u64 = MAX_PROCESSES as u64 * 12;

/// What `/proc/PID/stat` says of a process: the fields the sweep, the ledger's leases and the
/// tests use. The one reader and parser of that file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Field 3, the state letter: `R`, `S`, …, `Z` for a zombie, `X` for dead.
    pub state: u8,
    /// Field 4, the parent's pid.
    pub ppid: i32,
    /// Field 5, the process group.
    pub pgrp: i32,
    /// Field 6, the session.
    pub session: i32,
    /// Field 7, the controlling terminal's device number (0 for none).
    pub tty_nr: i32,
    /// Field 22, when the process started: clock ticks since boot.
    pub start_ticks: u64,
}

impl ProcStat {
    /// The most read of one `/proc/PID/stat`: 52 numbers and a name of at most 64 bytes fit
    /// several times over.
    const MAX_BYTES: u64 = 4096;

    /// The fields of a `/proc/PID/stat` text. Field 2, the command name, is in parentheses
    /// and is the process's to choose: it may hold `)`, spaces, newlines and bytes that are
    /// not UTF-8. Everything after it is a state letter and numbers, so the fields are
    /// counted after the LAST `)`.
    pub fn parse(stat: &[u8]) -> Option<ProcStat> {
        let open = stat.iter().position(|&b| b == b'(')?;
        let close = stat.iter().rposition(|&b| b == b')')?;
        if close < open {
            return None;
        }
        let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
        let mut fields = rest.split_ascii_whitespace();
        let state = match fields.next()?.as_bytes() {
            [letter] if letter.is_ascii_alphabetic() => *letter,
            _ => return None,
        };
        let mut number = || fields.next()?.parse::<i32>().ok();
        let (ppid, pgrp, session, tty_nr) = (number()?, number()?, number()?, number()?);
        // Field 7 was the last one read: field 22 is 15 further on.
        let start_ticks = fields.nth(14)?.parse().ok()?;
        Some(ProcStat {
            state,
            ppid,
            pgrp,
            session,
            tty_nr,
            start_ticks,
        })
    }

    /// `/proc/PID/stat` of `pid`, read through `fs::read_file` (bounded, regular files only);
    /// `Ok(None)` when there is no such process or its file does not parse.
    pub fn read(pid: i32) -> std::io::Result<Option<ProcStat>> {
        let path = format!("/proc/{pid}/stat");
        match crate::fs::read_file(Path::new(&path), ProcStat::MAX_BYTES) {
            Ok(bytes) => Ok(ProcStat::parse(&bytes)),
            Err(crate::fs::ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// [`ProcStat::read`] with any failure as `None`: the sweep's reading of `/proc` is
    /// observation only.
    pub(super) fn of(pid: i32) -> Option<ProcStat> {
        ProcStat::read(pid).ok().flatten()
    }

    /// Running or sleeping: not a zombie (`Z`) or dead (`X`).
    pub fn live(&self) -> bool {
        !matches!(self.state, b'Z' | b'X')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stat line of a process named `comm` (as the kernel writes it), with fields 3–52.
    fn line(comm: &[u8], state: &str) -> Vec<u8> {
        let mut text = b"42 (".to_vec();
        text.extend_from_slice(comm);
        text.extend_from_slice(b") ");
        // Fields 4, 5, 6, 7 and then 8..=52 as their own numbers: field 22 reads 22.
        let rest: Vec<String> = (8..=52).map(|n| n.to_string()).collect();
        text.extend_from_slice(format!("{state} 7 8 9 0 {}\n", rest.join(" ")).as_bytes());
        text
    }

    #[test]
    // The head is reaped by the sweep's round, which is what the test is about.
    #[allow(clippy::zombie_processes)]
    fn a_zombie_leading_an_escaped_group_is_killed_with_its_group_before_it_is_reaped() {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        if !super::super::isolated(
            "exec::sweep::tests::a_zombie_leading_an_escaped_group_is_killed_with_its_group_before_it_is_reaped",
        ) {
            return;
        }
        super::super::group::become_subreaper();
        // The head of a chain: a session of its own, a member left behind in its group, and
        // the head gone (a zombie, our child). The member is our child too (an orphan comes
        // to the subreaper), but the round is not told: so a scan sees it when it lists the
        // children just after the member forked on and exited.
        let mut head = std::process::Command::new("/bin/sh");
        head.args(["-c", "sleep 30 & echo $!"])
            .stdout(std::process::Stdio::piped());
        // SAFETY: setsid(2) is async-signal-safe and touches no memory.
        unsafe {
            head.pre_exec(|| {
                rustix::process::setsid()?;
                Ok(())
            });
        }
        let mut head = head.spawn().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(head.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let member = Pid::from_raw(line.trim().parse().unwrap()).unwrap();
        let member_fd = pidfd_open(member, PidfdFlags::empty()).unwrap();
        let head = Pid::from_child(&head);
        let exited = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT;
        waitid(WaitId::Pid(head), exited).unwrap();
        assert_eq!(rustix::process::getpgid(Some(member)).unwrap(), head);

        let mut sweeper = Sweeper::new(Instant::now() + Duration::from_secs(10));
        assert!(sweeper.round(&[head.as_raw_nonzero().get()], None));
        assert!(
            ProcStat::of(head.as_raw_nonzero().get()).is_none(),
            "the round reaped the head"
        );
        let mut fds = [PollFd::new(&member_fd, PollFlags::IN)];
        let ended = poll(&mut fds, Some(&timespec(Duration::from_secs(5)))).unwrap();
        assert_eq!(ended, 1, "the member outlived its group's head");
        // Reaped by the next round, and counted: it was alive when its group was killed.
        assert!(sweeper.round(&[member.as_raw_nonzero().get()], None));
        assert_eq!(sweeper.found(), 1);
        assert!(ProcStat::of(member.as_raw_nonzero().get()).is_none());
    }

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis_whatever_the_name_holds() {
        let plain = ProcStat {
            state: b'S',
            ppid: 7,
            pgrp: 8,
            session: 9,
            tty_nr: 0,
            start_ticks: 22,
        };
        for comm in [
            &b"sleep"[..],
            b"",
            b"a) R 1 2 3",
            b") Z 1 1 1 0",
            b"(",
            b")(",
            b"((x))",
            b"two words",
            b"new\nline",
            b"tab\tand\rcr",
            b"\xff\xfe not utf-8",
            b"ends in ) ",
            b"S 7 8 9 0 1",
        ] {
            assert_eq!(
                ProcStat::parse(&line(comm, "S")),
                Some(plain),
                "{:?}",
                String::from_utf8_lossy(comm)
            );
        }
        let zombie = ProcStat::parse(&line(b"x) S", "Z")).unwrap();
        assert!(!zombie.live());
        assert!(!ProcStat::parse(&line(b"x", "X")).unwrap().live());
        assert!(ProcStat::parse(&line(b"x", "R")).unwrap().live());
    }

    #[test]
    fn a_stat_line_cut_short_or_malformed_is_none() {
        assert_eq!(ProcStat::parse(b"44 (cut) R 1"), None);
        assert_eq!(ProcStat::parse(b"43 (x) Z 1 43 43 0"), None, "no field 22");
        assert_eq!(ProcStat::parse(b"no parenthesis"), None);
        assert_eq!(ProcStat::parse(b"42 ) S (x"), None, "closed before opened");
        assert_eq!(ProcStat::parse(b""), None);
        let full = line(b"x", "S");
        // Field 22 reads ` 22 `: every prefix without both its digits has no field 22.
        let field_22 = full.windows(4).position(|w| w == b" 22 ").unwrap() + 1;
        for cut in 0..full.len() {
            let parsed = ProcStat::parse(&full[..cut]);
            if cut <= field_22 {
                assert_eq!(parsed, None, "cut at {cut}");
            }
        }
        assert_eq!(ProcStat::parse(&line(b"x", "SS")), None, "one state letter");
        assert_eq!(ProcStat::parse(&line(b"x", "1")), None);
        for field in [" 7 ", " 8 ", " 9 ", " 0 ", " 22 "] {
            let text = String::from_utf8(line(b"x", "S")).unwrap();
            let bad = text.replacen(field, " q ", 1);
            assert_eq!(
                ProcStat::parse(bad.as_bytes()),
                None,
                "{field:?} not a number"
            );
        }
    }

    #[test]
    fn stat_matches_the_kernel_s_own_answers() {
        use std::os::unix::process::CommandExt;
        let me = std::process::id() as i32;
        let own = ProcStat::read(me).unwrap().unwrap();
        assert!(own.live());
        assert_eq!(own.ppid as u32, std::os::unix::process::parent_id());
        // A child in a group of its own: its parent is us, its group is its own pid, and it
        // shares our session (whatever number that has in this PID namespace, 0 included).
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let stat = ProcStat::of(pid);
        let _ = child.kill();
        let _ = child.wait();
        let stat = stat.unwrap();
        assert!(stat.live());
        assert_eq!(stat.ppid, me);
        assert_eq!(stat.pgrp, pid);
        assert_eq!(stat.session, own.session);
        assert!(stat.start_ticks >= own.start_ticks);
        assert_eq!(ProcStat::read(i32::MAX).unwrap(), None, "no such process");
        assert_eq!(ProcStat::of(i32::MAX), None);
    }

    #[test]
    fn a_process_may_name_itself_anything_and_is_still_read() {
        // A thread renamed to a hostile comm (PR_SET_NAME: 15 bytes, any but NUL).
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            rustix::thread::set_name(c"x) Z 1 2\n\xff(").unwrap();
            tx.send(rustix::thread::gettid().as_raw_pid()).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        // /proc/TID/stat: a thread's own stat, by the one reader (its name is not UTF-8).
        let stat = ProcStat::read(tid);
        done_tx.send(()).unwrap();
        thread.join().unwrap();
        let stat = stat.unwrap().unwrap();
        let own = ProcStat::read(std::process::id() as i32).unwrap().unwrap();
        assert!(stat.live());
        assert_eq!(
            (stat.ppid, stat.pgrp, stat.session),
            (own.ppid, own.pgrp, own.session)
        );
    }
}
