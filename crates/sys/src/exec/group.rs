//! [`ProcessGroup`]: one child in a session and process group of its own (started through
//! the one child-setup path, `child.rs`), held through a pidfd, with the kill ladder and the
//! sweep of everything it leaves behind. [`run`](super::run) is built on it;
//! so can be any other caller that keeps a child with interactive pipes (an MCP server).
//!
//! Invariants:
//! - the leader is reaped only by [`ProcessGroup::finish`] or by `Drop`, after the sweep: as
//!   long as the value exists the leader is unreaped (running or a zombie), so its pid, which
//!   is also the group's id, cannot be recycled and every signal sent to `-pgid` reaches the
//!   group this value started;
//! - other processes are signalled by pid only while they are our own unreaped children
//!   (their pid is pinned the same way), or through a pidfd opened and checked first; other
//!   groups only through the pidfd of their leader, and only in a session the adapter's
//!   lineage created — the adapter's own session included (see `sweep.rs`);
//! - the sweep ends only when the process has no child left besides the leader, and then
//!   none at all (`ECHILD`), or when its deadline passes — never on one empty `/proc` scan
//!   while something may still be forking;
//! - dropping the value, unwinding included, kills the group and sweeps (bounded).

use super::child::Setup;
use super::ladder::{walk, Target};
use super::sweep::{kill_descendants, own_children, Sweeper};
use super::timespec;
use super::{SpawnError, Termination, KILL_WAIT, SWEEP_BUDGET};
use crate::confine::Prepared;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use rustix::io::Errno;
use rustix::process::{
    kill_process_group, pidfd_open, waitid, Pid, PidfdFlags, Signal, WaitId, WaitIdOptions,
    WaitIdStatus,
};
use std::io;
use std::path::Path;
use std::process::{ChildStderr, ChildStdin, ChildStdout, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to start.
#[derive(Debug, Clone, Copy)]
pub struct Launch<'a> {
    /// The program to execute (resolved through the `PATH` of `env` when it has no `/`, and
    /// started with `execve`: never through a shell).
    pub program: &'a Path,
    /// argv exactly as given; `argv[0]` is what the child sees as its name.
    pub argv: &'a [String],
    /// The complete environment of the child; the parent's is never inherited.
    pub env: &'a [(String, String)],
    /// Working directory; `None` keeps the parent's.
    pub cwd: Option<&'a Path>,
    /// Give the child a pipe on stdin (`true`) or `/dev/null`.
    pub stdin: bool,
    /// The confinement prepared for the child (SPEC §13), applied in `child.rs`'s ordered
    /// set-up; `None` runs it unconfined. The group keeps it until the child is reaped (its
    /// cgroup is what `cgroup.kill` writes to).
    pub confinement: Option<&'a Arc<Prepared>>,
}

/// The parent's ends of the child's pipes (blocking, close-on-exec).
#[derive(Debug)]
pub struct Pipes {
    /// The child's stdin, when [`Launch::stdin`] asked for a pipe; drop it to send EOF.
    pub stdin: Option<ChildStdin>,
    /// The child's stdout.
    pub stdout: ChildStdout,
    /// The child's stderr.
    pub stderr: ChildStderr,
}

/// What a sweep found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// How the leader ended (`Unreaped` when it could not be reaped in time).
    pub termination: Termination,
    /// Distinct live processes found after the leader was gone, all killed.
    pub leaked_processes: usize,
    /// The leader's peak resident set, its reaped descendants' included, in bytes (`wait`'s
    /// resource usage of the leader); 0 when this call did not reap it.
    pub leader_max_rss_bytes: u64,
}

/// A child running in its own process group, and everything it starts.
///
/// Dropping it kills the group, sweeps and reaps (bounded by about 200 ms), so an early
/// return or a panic never leaves the child running.
///
/// One process should hold one `ProcessGroup` at a time: the dispatcher is a child subreaper,
/// every orphan of the child comes back to it, and the sweep kills and reaps *every* child of
/// the process. A caller that wants runs in parallel uses separate processes.
///
/// ```no_run
/// use ptd_sys::exec::{Launch, ProcessGroup};
/// use std::time::{Duration, Instant};
///
/// let argv = vec!["mcp-server".to_string(), "--stdio".to_string()];
/// let env = vec![("PATH".to_string(), "/usr/bin:/bin".to_string())];
/// let launch = Launch {
///     program: "mcp-server".as_ref(), argv: &argv, env: &env, cwd: None, stdin: true,
///     confinement: None,
/// };
/// let (mut server, pipes) = ProcessGroup::spawn(&launch)?;
/// // … exchange messages over pipes.stdin / pipes.stdout, drain pipes.stderr …
/// drop(pipes); // EOF on its stdin
/// let ended = server.terminate(Duration::from_secs(2)); // SIGTERM, grace, SIGKILL
/// let swept = server.finish(Instant::now() + Duration::from_millis(100));
/// # let _ = (ended, swept);
/// # Ok::<(), ptd_sys::exec::SpawnError>(())
/// ```
#[derive(Debug)]
pub struct ProcessGroup {
    pid: Pid,
    pidfd: OwnedFd,
    /// Set once the leader was seen exited (it stays a zombie until the sweep is done).
    exit: Option<Termination>,
    /// Set once the leader is reaped, or was found reaped by someone else: from then on its
    /// number may belong to another process and is never signalled again.
    released: bool,
    /// Set by [`finish`](Self::finish): its deadline was the last word, `Drop` adds nothing.
    finished: bool,
    /// The child's confinement: kept (its cgroup and private folders with it) until the
    /// leader is reaped, and its cgroup killed through with the group.
    confinement: Option<Arc<Prepared>>,
    /// The leader's peak RSS in bytes, from its reap ([`Swept::leader_max_rss_bytes`]).
    leader_max_rss_bytes: u64,
}

impl ProcessGroup {
    /// Start `launch` in a session and process group of its own (no controlling terminal)
    /// with exactly the environment given, piped stdout/stderr and no other descriptor,
    /// through the one child-setup path (`child.rs`), and make this process a child
    /// subreaper. Call it from a thread that outlives the child (the parent-death signal is
    /// tied to the forking thread).
    // exec/ owns forking and signals (clippy.toml's disallowed-methods).
    #[allow(clippy::disallowed_methods)]
    pub fn spawn(launch: &Launch<'_>) -> Result<(ProcessGroup, Pipes), SpawnError> {
        become_subreaper();
        let env = launch.env.iter().map(|(k, v)| (k, v));
        let mut setup = Setup::new(launch.program, launch.argv, env, launch.cwd)?;
        let program = setup.program().to_path_buf();
        let report = match launch.confinement {
            Some(prepared) => Some(setup.confine(Arc::clone(prepared))?),
            None => None,
        };
        let mut command = setup.into_command(launch.cwd);
        command
            .stdin(if launch.stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A confinement step the kernel refused, or else the execve's own answer (a busy
        // program file is tried again first: `child::BUSY_PAUSES_MS`).
        let mut refused = None;
        let spawned = super::child::spawn_unless_busy(&mut command, |err| {
            refused = report.as_ref().and_then(|r| r.refused(err.raw_os_error()));
            if let (None, Some(prepared)) = (&refused, launch.confinement) {
                prepared.spawn_tried_again();
            }
            refused.is_none()
        });
        if let Some(prepared) = launch.confinement {
            prepared.spawn_returned();
        }
        let mut child = spawned.map_err(|err| {
            match refused
                .take()
                .or_else(|| report.as_ref().and_then(|r| r.refused(err.raw_os_error())))
            {
                Some(step) => SpawnError::Confinement(step),
                None => explained(err, &program, launch.cwd, run_as(launch)),
            }
        })?;
        // A spawned child always has a positive pid and the pipes asked for above; should
        // std ever answer otherwise, end the child rather than run it unsupervised.
        let pid = i32::try_from(child.id()).ok().and_then(Pid::from_raw);
        let (Some(pid), Some(stdout), Some(stderr)) =
            (pid, child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(SpawnError::Other(io::ErrorKind::Other));
        };
        let pidfd = match pidfd_open(pid, PidfdFlags::empty()) {
            Ok(fd) => fd,
            Err(err) => {
                // Without a pidfd the run cannot be supervised safely (kernel older than
                // 5.3, or a seccomp filter). The child is unreaped, so its pid is ours.
                let _ = kill_process_group(pid, Signal::KILL);
                let _ = child.wait();
                return Err(SpawnError::Other(io::Error::from(err).kind()));
            }
        };
        let pipes = Pipes {
            stdin: child.stdin.take(),
            stdout,
            stderr,
        };
        // `Child` neither waits nor kills on drop: from here on the pidfd is the handle.
        drop(child);
        let group = ProcessGroup {
            pid,
            pidfd,
            exit: None,
            released: false,
            finished: false,
            confinement: launch.confinement.cloned(),
            leader_max_rss_bytes: 0,
        };
        Ok((group, pipes))
    }

    /// The leader's pid, which is also the group's id.
    pub fn id(&self) -> u32 {
        self.pid.as_raw_nonzero().get().unsigned_abs()
    }

    /// A descriptor that becomes readable when the leader exits (for `poll(2)`).
    pub fn exit_fd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }

    /// How the leader ended, if it has; non-blocking, and it leaves the leader unreaped.
    pub fn try_exit(&mut self) -> Option<Termination> {
        if self.exit.is_none() && !self.released {
            let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
            match waitid(WaitId::PidFd(self.pidfd.as_fd()), options) {
                Ok(Some(status)) => self.exit = Some(termination_of(&status)),
                Ok(None) | Err(Errno::INTR) => {}
                Err(_) => {
                    // Reaped behind our back (a second waiter in this process): its number
                    // is no longer ours to signal.
                    self.released = true;
                    self.exit = Some(Termination::Unreaped);
                }
            }
        }
        self.exit
    }

    /// Wait up to `until` for the leader to exit; it stays unreaped.
    pub fn wait_exit(&mut self, until: Instant) -> Option<Termination> {
        loop {
            if let Some(termination) = self.try_exit() {
                return Some(termination);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let mut fds = [PollFd::new(&self.pidfd, PollFlags::IN)];
            let _ = poll(&mut fds, Some(&timespec(left)));
        }
    }

    /// Send `sig` to the whole group.
    // exec/ owns signals (clippy.toml's disallowed-methods).
    #[allow(clippy::disallowed_methods)]
    pub fn signal(&self, sig: crate::signal::Signal) -> io::Result<()> {
        if self.released {
            return Err(io::Error::from(Errno::SRCH));
        }
        let sig = sig.to_rustix().ok_or(io::Error::from(Errno::INVAL))?;
        kill_process_group(self.pid, sig).map_err(io::Error::from)
    }

    /// SIGKILL the group and every descendant of the leader that left it (`setsid`); where the
    /// child runs in a cgroup v2 of its own, also everything in that cgroup (`cgroup.kill`,
    /// which a process cannot escape by leaving the session).
    // exec/ owns signals (clippy.toml's disallowed-methods).
    #[allow(clippy::disallowed_methods)]
    pub fn kill(&self) {
        if self.released {
            return;
        }
        if let Some(prepared) = &self.confinement {
            prepared.kill_cgroup();
        }
        let _ = kill_process_group(self.pid, Signal::KILL);
        kill_descendants(self.pid);
    }

    /// The kill ladder outside [`run`](super::run) ([`walk`] with no first wait): SIGTERM to
    /// the group, up to `grace` for the leader to exit, then SIGKILL to everything and
    /// [`KILL_WAIT`]. Returns how the leader ended (`Unreaped` if it outlived SIGKILL); call
    /// [`finish`](Self::finish) afterwards.
    pub fn terminate(&mut self, grace: Duration) -> Termination {
        walk(self, Duration::ZERO, grace);
        self.try_exit().unwrap_or(Termination::Unreaped)
    }

    /// After the leader exited (or [`terminate`](Self::terminate) gave up on it): kill and
    /// reap everything it left behind until `until`, then reap the leader. Nothing runs past
    /// `until`: a leader stuck in the kernel after SIGKILL is left unreaped.
    pub fn finish(mut self, until: Instant) -> Swept {
        let leaked_processes = self.sweep(until);
        self.finished = true;
        Swept {
            termination: self.exit.unwrap_or(Termination::Unreaped),
            leaked_processes,
            leader_max_rss_bytes: self.leader_max_rss_bytes,
        }
    }

    /// The sweep; returns how many distinct live processes it found. See the module doc.
    // exec/ owns signals (clippy.toml's disallowed-methods).
    #[allow(clippy::disallowed_methods)]
    fn sweep(&mut self, until: Instant) -> usize {
        let mut sweeper = Sweeper::new(until);
        let leader = self.pid.as_raw_nonzero().get();
        self.try_exit();
        // Phase 1, the leader unreaped: its number still names its group, which is killed
        // every round. Done when no other child is left (its orphans all come back to us).
        loop {
            let others: Vec<i32> = own_children()
                .into_iter()
                .filter(|&pid| pid != leader)
                .collect();
            let group = (!self.released).then_some(self.pid);
            if others.is_empty() {
                if let Some(group) = group {
                    let _ = kill_process_group(group, Signal::KILL);
                }
                break;
            }
            if !sweeper.round(&others, group) {
                break;
            }
        }
        if self.exit.is_some() && !self.released {
            // Reap the leader last: its group is empty and no other child is left (or the
            // deadline passed, and nothing will be signalled any more).
            self.leader_max_rss_bytes = reap_pidfd(&self.pidfd).unwrap_or(0);
            self.released = true;
        }
        if self.released {
            // Phase 2: confirm with the kernel rather than /proc — no child at all (ECHILD).
            while Instant::now() < until {
                match waitid(WaitId::All, WaitIdOptions::EXITED | WaitIdOptions::NOHANG) {
                    Ok(Some(_)) | Err(Errno::INTR) => {}
                    // Some child is alive (a round also sleeps when /proc lags behind).
                    Ok(None) => {
                        if !sweeper.round(&own_children(), None) {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        }
        sweeper.found()
    }
}

impl Target for ProcessGroup {
    fn wait_exit(&mut self, until: Instant) -> bool {
        ProcessGroup::wait_exit(self, until).is_some()
    }

    fn signal(&mut self, sig: crate::signal::Signal) {
        let _ = ProcessGroup::signal(self, sig);
    }

    fn kill(&mut self) {
        ProcessGroup::kill(self);
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if self.released || self.finished {
            return;
        }
        if self.try_exit().is_none() {
            self.kill();
            self.wait_exit(Instant::now() + KILL_WAIT);
        }
        self.sweep(Instant::now() + SWEEP_BUDGET);
    }
}

/// Make this process the reaper of orphaned descendants (Linux), so that processes that
/// escape the child's process group (double fork, `setsid`) come back to it and can be killed.
/// Idempotent; [`ProcessGroup::spawn`] calls it too.
pub fn become_subreaper() {
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
}

fn termination_of(status: &WaitIdStatus) -> Termination {
    match (
        status.exit_status(),
        status
            .terminating_signal()
            .and_then(crate::signal::Signal::from_raw),
    ) {
        (Some(code), _) => Termination::Exited(code),
        (None, Some(sig)) => Termination::Signaled(sig),
        (None, None) => Termination::Unreaped,
    }
}

pub(super) fn classify_spawn_error(err: io::Error) -> SpawnError {
    match err.raw_os_error() {
        Some(libc::ENOENT) => SpawnError::NotFound(None),
        Some(libc::EACCES | libc::ENOEXEC | libc::EISDIR | libc::EPERM | libc::ETXTBSY) => {
            SpawnError::NotExecutable(None)
        }
        _ => match err.kind() {
            io::ErrorKind::NotFound => SpawnError::NotFound(None),
            io::ErrorKind::PermissionDenied => SpawnError::NotExecutable(None),
            kind => SpawnError::Other(kind),
        },
    }
}

/// The uid a confined child runs as when it is not the dispatcher's (SPEC §13.2).
fn run_as(launch: &Launch<'_>) -> Option<u32> {
    launch
        .confinement
        .map(|prepared| prepared.credentials)
        .filter(|c| c.change_ids)
        .map(|c| c.uid)
}

/// [`classify_spawn_error`], with what the resolved program file says about the failure; for
/// a child that runs as `run_as`, first whether that user can reach the program at all.
fn explained(
    err: io::Error,
    program: &Path,
    cwd: Option<&Path>,
    run_as: Option<u32>,
) -> SpawnError {
    let unreachable = || {
        let uid = run_as?;
        let program = match cwd {
            Some(cwd) if program.is_relative() => cwd.join(program),
            _ => program.to_path_buf(),
        };
        super::child::unreachable_for(&program, uid).then_some(super::Why::UnreachableForRunAs(uid))
    };
    let why = match err.raw_os_error() {
        Some(libc::EACCES) => unreachable(),
        _ => None,
    }
    .or_else(|| {
        err.raw_os_error()
            .and_then(|errno| super::child::diagnose(program, cwd, errno))
    });
    match classify_spawn_error(err) {
        SpawnError::NotFound(_) => SpawnError::NotFound(why),
        SpawnError::NotExecutable(_) => SpawnError::NotExecutable(why),
        other => other,
    }
}

/// Reap the exited process `pidfd` names (non-blocking) and return its peak resident set in
/// bytes, its reaped descendants' included: the raw `waitid(2)`, whose fifth argument (a
/// `struct rusage`, which neither glibc's wrapper nor rustix passes) is the usage of that one
/// child. `None` when nothing was reaped.
fn reap_pidfd(pidfd: &OwnedFd) -> Option<u64> {
    const P_PIDFD: libc::c_int = 3;
    // SAFETY: `siginfo_t` and `rusage` are plain old data, valid when zeroed; waitid(2) writes
    // into the two we pass (both live locals of the kernel's layout) and reads nothing else;
    // the descriptor is borrowed from `pidfd` for the call.
    let (rc, usage) = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let mut usage: libc::rusage = std::mem::zeroed();
        let rc = libc::syscall(
            libc::SYS_waitid,
            P_PIDFD,
            pidfd.as_raw_fd(),
            std::ptr::from_mut(&mut info),
            libc::WEXITED | libc::WNOHANG,
            std::ptr::from_mut(&mut usage),
        );
        (rc, usage)
    };
    (rc == 0).then(|| super::outcome::max_rss_bytes(&usage))
}

#[cfg(test)]
mod tests {
    use super::super::isolated;
    use super::*;

    fn launch<'a>(argv: &'a [String], env: &'a [(String, String)]) -> Launch<'a> {
        Launch {
            program: Path::new(&argv[0]),
            argv,
            env,
            cwd: None,
            stdin: false,
            confinement: None,
        }
    }

    fn argv(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    /// A shell that runs `first`, starts a sleeper in the background, records its pid on
    /// stdout, then runs `then`.
    fn with_background_sleeper(first: &str, then: &str) -> Vec<String> {
        argv(&[
            "/bin/sh",
            "-c",
            &format!("{first} sleep 30 & echo $!; {then}"),
        ])
    }

    fn read_line(pipe: &mut ChildStdout) -> i32 {
        use std::io::Read;
        let mut text = String::new();
        let mut byte = [0u8; 1];
        while pipe.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
            text.push(byte[0] as char);
        }
        text.trim().parse().unwrap()
    }

    /// Gone, and reaped: not even a zombie is left.
    fn gone(pid: i32) -> bool {
        !Path::new(&format!("/proc/{pid}")).exists()
    }

    #[test]
    fn a_panic_after_spawn_kills_and_reaps_the_group() {
        if !isolated("exec::group::tests::a_panic_after_spawn_kills_and_reaps_the_group") {
            return;
        }
        let argv = with_background_sleeper("", "exec sleep 30");
        let mut pids = (0, 0);
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let (group, mut pipes) = ProcessGroup::spawn(&launch(&argv, &[])).unwrap();
            pids = (group.id() as i32, read_line(&mut pipes.stdout));
            panic!("a bug between spawn and the end of the run");
        }));
        assert!(unwound.is_err());
        let (leader, sleeper) = pids;
        assert!(leader > 0 && sleeper > 0);
        assert!(gone(leader), "the leader survived the panic");
        assert!(gone(sleeper), "its child survived the panic");
    }

    #[test]
    fn terminate_walks_the_ladder_and_finish_counts_the_leftovers() {
        if !isolated(
            "exec::group::tests::terminate_walks_the_ladder_and_finish_counts_the_leftovers",
        ) {
            return;
        }
        // The leader ignores SIGTERM (before it says so); its background sleeper is in the group.
        let argv = with_background_sleeper("trap '' TERM;", "while :; do sleep 1; done");
        let (mut group, mut pipes) = ProcessGroup::spawn(&launch(&argv, &[])).unwrap();
        let sleeper = read_line(&mut pipes.stdout);
        let start = Instant::now();
        let termination = group.terminate(Duration::from_millis(200));
        assert_eq!(
            termination,
            Termination::Signaled(crate::signal::Signal::KILL)
        );
        assert!(start.elapsed() >= Duration::from_millis(200));
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        let leader = group.id() as i32;
        let swept = group.finish(Instant::now() + SWEEP_BUDGET);
        assert_eq!(
            swept.termination,
            Termination::Signaled(crate::signal::Signal::KILL)
        );
        assert!(gone(leader) && gone(sleeper));
        assert_eq!(
            waitid(WaitId::All, WaitIdOptions::EXITED | WaitIdOptions::NOHANG).unwrap_err(),
            Errno::CHILD,
            "no child of any kind is left"
        );
    }

    #[test]
    fn an_escaped_orphan_is_counted_killed_and_reaped() {
        if !isolated("exec::group::tests::an_escaped_orphan_is_counted_killed_and_reaped") {
            return;
        }
        // The sleeper leaves the group and the leader exits at once: a subreaper orphan.
        let argv = argv(&["/bin/sh", "-c", "setsid sleep 30 & echo $!; exit 7"]);
        let (mut group, mut pipes) = ProcessGroup::spawn(&launch(&argv, &[])).unwrap();
        let orphan = read_line(&mut pipes.stdout);
        assert_eq!(
            group.wait_exit(Instant::now() + Duration::from_secs(5)),
            Some(Termination::Exited(7))
        );
        let leader = group.id() as i32;
        assert!(
            !gone(leader),
            "the leader stays a zombie until the sweep is done"
        );
        let swept = group.finish(Instant::now() + SWEEP_BUDGET);
        assert_eq!(swept.termination, Termination::Exited(7));
        assert_eq!(swept.leaked_processes, 1);
        assert!(gone(leader) && gone(orphan));
    }

    #[test]
    fn a_leader_reaped_behind_its_back_is_never_signalled_again() {
        if !isolated("exec::group::tests::a_leader_reaped_behind_its_back_is_never_signalled_again")
        {
            return;
        }
        let argv = argv(&["/bin/sh", "-c", "exit 0"]);
        let (mut group, _pipes) = ProcessGroup::spawn(&launch(&argv, &[])).unwrap();
        // A second waiter in the process (what the one-run-per-process rule forbids).
        let pid = Pid::from_raw(group.id() as i32).unwrap();
        waitid(WaitId::Pid(pid), WaitIdOptions::EXITED).unwrap();
        assert_eq!(group.try_exit(), Some(Termination::Unreaped));
        let err = group.signal(crate::signal::Signal::TERM).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ESRCH));
    }

    #[test]
    fn the_child_leads_a_session_of_its_own_and_inherits_no_descriptor() {
        if !isolated(
            "exec::group::tests::the_child_leads_a_session_of_its_own_and_inherits_no_descriptor",
        ) {
            return;
        }
        use std::os::fd::AsRawFd;
        // A descriptor without close-on-exec, as the host may leave one open.
        let file = std::fs::File::open("/dev/null").unwrap();
        // SAFETY: dup of our own descriptor; closed below.
        let fd = unsafe { libc::dup(file.as_raw_fd()) };
        assert!(fd > 2);
        let script = format!(
            "if [ -e /proc/$$/fd/{fd} ]; then echo open; else echo closed; fi; exec sleep 30"
        );
        let argv = argv(&["/bin/sh", "-c", &script]);
        let (group, mut pipes) = ProcessGroup::spawn(&launch(&argv, &[])).unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(&mut pipes.stdout), &mut line)
            .unwrap();
        let pid = group.id() as i32;
        let stat = super::super::ProcStat::read(pid).unwrap().unwrap();
        drop(group);
        // SAFETY: closing our own duplicate.
        unsafe { libc::close(fd) };
        assert_eq!(line.trim(), "closed", "the child saw fd {fd}");
        assert_eq!(
            (stat.session, stat.pgrp),
            (pid, pid),
            "session and group leader"
        );
        assert_eq!(stat.tty_nr, 0, "no controlling terminal");
    }

    #[test]
    fn a_file_without_an_interpreter_line_is_not_run_through_a_shell() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let script = dir.path().join("script");
        std::fs::write(&script, format!("touch {}\n", marker.display())).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let env = [("PATH".to_string(), dir.path().display().to_string())];
        for program in [script.display().to_string(), "script".to_string()] {
            let argv = argv(&[&program]);
            assert!(
                matches!(
                    ProcessGroup::spawn(&launch(&argv, &env)),
                    Err(SpawnError::NotExecutable(Some(crate::exec::Why::NoShebang)))
                ),
                "{program}"
            );
            assert!(!marker.exists(), "{program} was run by a shell");
        }
    }

    /// A script in `dir`, still open for writing (as a copy being finished is): the returned
    /// file. Its `execve` is `ETXTBSY` until the file is closed.
    fn script_held_open(dir: &Path) -> (std::path::PathBuf, std::fs::File) {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = dir.join("adapter");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o755)
            .open(&path)
            .unwrap();
        file.write_all(b"#!/bin/sh\necho started\n").unwrap();
        (path, file)
    }

    #[test]
    fn a_program_busy_for_a_moment_is_tried_again_and_runs() {
        if !isolated("exec::group::tests::a_program_busy_for_a_moment_is_tried_again_and_runs") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (path, file) = script_held_open(dir.path());
        let program = path.display().to_string();
        let argv = argv(&[&program]);
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(40));
            drop(file);
        });
        let started = Instant::now();
        let (mut group, mut pipes) = ProcessGroup::spawn(&launch(&argv, &[])).unwrap();
        let waited = started.elapsed();
        writer.join().unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(&mut pipes.stdout), &mut line)
            .unwrap();
        assert_eq!(line, "started\n");
        assert!(
            waited >= Duration::from_millis(10),
            "it ran before the file was closed? {waited:?}"
        );
        let _ = group.terminate(Duration::from_secs(1));
    }

    #[test]
    fn a_program_that_stays_busy_is_reported_as_busy_within_the_bound() {
        if !isolated(
            "exec::group::tests::a_program_that_stays_busy_is_reported_as_busy_within_the_bound",
        ) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (path, file) = script_held_open(dir.path());
        let program = path.display().to_string();
        let argv = argv(&[&program]);
        let started = Instant::now();
        let result = ProcessGroup::spawn(&launch(&argv, &[]));
        let waited = started.elapsed();
        drop(file);
        assert!(
            matches!(
                result,
                Err(SpawnError::NotExecutable(Some(crate::exec::Why::FileBusy)))
            ),
            "{result:?}"
        );
        let pauses: u64 = crate::exec::child::BUSY_PAUSES_MS.iter().sum();
        assert!(
            waited >= Duration::from_millis(pauses) && waited < Duration::from_secs(2),
            "{waited:?}"
        );
        let why = crate::exec::Why::FileBusy;
        assert_eq!(why.reason(), "file_busy");
        assert!(why.describe(true).contains("text file busy"));
    }

    #[test]
    fn the_kill_goes_through_cgroup_kill_where_the_cgroup_is_v2() {
        if !isolated("exec::group::tests::the_kill_goes_through_cgroup_kill_where_the_cgroup_is_v2")
        {
            return;
        }
        use crate::confine::cgroup::{CallCgroup, Host, Limits};
        // cgroup v2 cannot be exercised on this host's kernel: a fake root of plain folders,
        // where the files the dispatcher writes are what the kernel's would have received.
        let root = tempfile::tempdir().unwrap();
        let own = root.path().join("svc");
        std::fs::create_dir(&own).unwrap();
        std::fs::write(own.join("cgroup.controllers"), "memory pids").unwrap();
        std::fs::write(own.join("cgroup.subtree_control"), "pids").unwrap();
        let mountinfo = format!(
            "31 25 0:27 / {} rw - cgroup2 cgroup2 rw\n",
            root.path().display()
        );
        let host = Host::parse(&mountinfo, "0::/svc\n");
        let limits = Limits {
            memory_bytes: None,
            pids: Some(64),
        };
        let cgroup = CallCgroup::create(&host, &limits).unwrap();
        let dir = cgroup.dirs()[0].to_path_buf();
        std::fs::write(dir.join("cgroup.kill"), "").unwrap();
        let prepared = Arc::new(Prepared::bare(Some(cgroup), Default::default()));
        let script = argv(&["/bin/sh", "-c", "echo up; exec sleep 30"]);
        let mut confined = launch(&script, &[]);
        confined.confinement = Some(&prepared);
        let (mut group, mut pipes) = ProcessGroup::spawn(&confined).unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(&mut pipes.stdout), &mut line)
            .unwrap();
        assert_eq!(line, "up\n");
        // The child joined through the descriptor opened before the fork.
        assert_eq!(
            std::fs::read_to_string(dir.join("cgroup.procs")).unwrap(),
            "0"
        );
        assert_eq!(std::fs::read_to_string(dir.join("pids.max")).unwrap(), "64");
        assert_eq!(
            std::fs::read_to_string(dir.join("cgroup.kill")).unwrap(),
            ""
        );
        group.kill();
        assert_eq!(
            std::fs::read_to_string(dir.join("cgroup.kill")).unwrap(),
            "1"
        );
        assert!(group
            .wait_exit(Instant::now() + Duration::from_secs(5))
            .is_some());
        let swept = group.finish(Instant::now() + SWEEP_BUDGET);
        assert_eq!(
            swept.termination,
            Termination::Signaled(crate::signal::Signal::KILL)
        );
    }

    #[test]
    fn a_refused_confinement_step_is_told_apart_from_a_failed_execve() {
        // Above every kernel's fs.nr_open: refused even to root.
        let prepared = Arc::new(Prepared::bare(
            None,
            crate::confine::rlimit::Rlimits {
                open_files: Some(i64::MAX as u64),
                file_size_bytes: None,
            },
        ));
        let refused = refused_at_spawn(&prepared);
        assert_eq!(refused.step, crate::confine::Step::Rlimits);
        assert_eq!(refused.errno, Errno::PERM);
        // A missing program under confinement is still a missing program.
        let missing = argv(&["/nonexistent/adapter"]);
        let mut confined = launch(&missing, &[]);
        drop(prepared);
        let fine = Arc::new(Prepared::bare(None, Default::default()));
        confined.confinement = Some(&fine);
        assert!(matches!(
            ProcessGroup::spawn(&confined),
            Err(SpawnError::NotFound(_))
        ));
    }

    /// What `spawn` says when `/bin/true` is started under `prepared` and a step is refused.
    fn refused_at_spawn(prepared: &Arc<Prepared>) -> crate::confine::ChildError {
        let truth = argv(&["/bin/true"]);
        let mut confined = launch(&truth, &[]);
        confined.confinement = Some(prepared);
        match ProcessGroup::spawn(&confined) {
            Err(SpawnError::Confinement(refused)) => refused,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_step_refused_in_the_adapters_own_process_names_that_step() {
        // The last step before `execve`, in the process the namespace's init started (not the
        // one the dispatcher forked): its step and its errno still reach the dispatcher.
        let mut prepared = Prepared::bare(None, Default::default());
        prepared.seccomp = crate::confine::seccomp::Filter::refused_by_the_kernel();
        let refused = refused_at_spawn(&Arc::new(prepared));
        assert_eq!(refused.step, crate::confine::Step::Seccomp);
        assert_eq!(refused.errno, Errno::INVAL);
    }

    #[test]
    fn the_adapter_runs_as_the_inits_child_with_no_signal_blocked() {
        // `finish` sweeps every descendant of the test process: alone in a process of its own.
        if !isolated(
            "exec::group::tests::the_adapter_runs_as_the_inits_child_with_no_signal_blocked",
        ) {
            return;
        }
        // The init blocks every signal; the adapter's process, started from it, must run the
        // program with the mask the dispatcher's child had (none blocked), as PID 2 of the
        // namespace, child of its PID 1.
        let prepared = Arc::new(Prepared::bare(None, Default::default()));
        let script = argv(&[
            "/bin/sh",
            "-c",
            "exec grep -E '^(Pid|PPid|SigBlk):' /proc/self/status",
        ]);
        let mut confined = launch(&script, &[]);
        confined.confinement = Some(&prepared);
        let (mut group, mut pipes) = ProcessGroup::spawn(&confined).unwrap();
        let mut out = String::new();
        std::io::Read::read_to_string(&mut pipes.stdout, &mut out).unwrap();
        assert!(group
            .wait_exit(Instant::now() + Duration::from_secs(5))
            .is_some());
        let swept = group.finish(Instant::now() + SWEEP_BUDGET);
        assert_eq!(swept.termination, Termination::Exited(0), "{out}");
        let fields: Vec<Vec<&str>> = out
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            fields,
            [
                vec!["Pid:", "2"],
                vec!["PPid:", "1"],
                vec!["SigBlk:", "0000000000000000"]
            ],
            "{out}"
        );
    }

    #[test]
    fn spawn_errors_are_classified() {
        let env = [];
        let missing = argv(&["/nonexistent/adapter"]);
        assert!(matches!(
            ProcessGroup::spawn(&launch(&missing, &env)),
            Err(SpawnError::NotFound(None))
        ));
        let directory = argv(&["/"]);
        assert!(matches!(
            ProcessGroup::spawn(&launch(&directory, &env)),
            Err(SpawnError::NotExecutable(Some(crate::exec::Why::Directory)))
        ));
    }
}
