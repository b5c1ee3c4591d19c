//! Running the host adapter (SPEC §4.2–§4.3): spawn, feed stdin, drain pipes, deadline, kill
//! ladder, sweep, reap.
//!
//! Invariants:
//! - the adapter runs in a session and process group of its own (no controlling terminal),
//!   with the environment the caller built (the host's is never inherited), no descriptor
//!   beyond stdin, stdout and stderr, a parent-death signal, and no shell: every child is
//!   started through `child.rs`, the one child-setup path (SPEC §13.1);
//! - stdin is written while stdout and stderr are drained, all non-blocking from one `poll(2)`
//!   loop (no thread per run), so no pipe size can deadlock;
//! - the call returns by `timeout + kill_grace + 250 ms` whatever the adapter's descendants
//!   do: every wait after the adapter's end (leak window, sweep, pipe EOF) has its own bound
//!   and all of them fit in the 250 ms; nothing here waits for pipe EOF without a bound;
//! - after the adapter is gone, every process it left behind is killed (the process group,
//!   and on Linux every descendant, which comes back to the dispatcher through the
//!   child-subreaper link) and reaped; the adapter itself stays a zombie until then, so its
//!   group id is never recycled while it is signalled (see [`ProcessGroup`]);
//! - whatever way `run` is left — return, early error, panic — the process group is killed
//!   and swept (`ProcessGroup`'s `Drop`).
//!
//! **One process runs one adapter at a time.** The dispatcher is a child subreaper and the
//! sweep kills and reaps *every* child of the process, not only the adapter's descendants
//! (orphans cannot be told apart once reparented). A caller wanting parallel runs must use
//! separate processes.
//!
//! For other children that need the same guarantees — an MCP server kept with interactive
//! pipes — use [`ProcessGroup`] directly: [`ProcessGroup::spawn`] (own session and group,
//! cleared env), [`walk`] or [`ProcessGroup::terminate`] (the SIGTERM → grace → SIGKILL
//! ladder), [`ProcessGroup::finish`] (sweep and reap), and sweep-on-drop. A child that must not
//! be swept (replay's child dispatchers, many at once) is a [`Watched`].
//!
//! This module owns the timeout policy: the deadline, the grace, the one ladder
//! (`ladder.rs`), the sweep, and the bound after the ladder ([`AFTER_LADDER`], [`bound`]).
//! Nothing outside it sends a signal.
//!
//! Linux only (pidfds: kernel 5.4 or later). This module knows nothing about JSON or
//! envelopes; `judge.rs` interprets what it returns.

#[cfg(not(target_os = "linux"))]
compile_error!("exec needs Linux: pidfds, PR_SET_CHILD_SUBREAPER and /proc");

mod child;
pub use child::crlf_shebang;
pub use child::locate;
/// Where a child would find its program (`PATH` resolution as `execvp`), for a caller that
/// grants it before it runs (the git adapter's self-confinement).
/// `PATH` in an environment list.
pub use child::path_var;
mod group;
mod init;
mod ladder;
mod outcome;
#[cfg(test)]
mod proxy_tests;
mod sink;
mod supervise;
mod sweep;
mod watched;

pub use group::{become_subreaper, Launch, Pipes, ProcessGroup, Swept};
pub use ladder::{walk, Rung, Target};
pub use outcome::{Finished, Resources, Stop, Termination};
pub use sweep::ProcStat;
pub use watched::{Watch, Watched};

use crate::confine::cgroup::Host;
use crate::confine::{ChildError, Options, Prepared, Run, Unavailable};
use crate::interrupt::Interrupts;
pub use crate::signal::Signal;
use ladder::{Action, Ladder};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use supervise::Io;

/// How long descendants may keep the adapter's pipes open after it exited (SPEC §4.3).
pub(crate) const LEAK_WINDOW: Duration = Duration::from_millis(100);
/// How long to wait for the adapter to die after SIGKILL before giving up on it.
pub(crate) const KILL_WAIT: Duration = Duration::from_millis(100);
/// How long the final sweep may spend killing and reaping leftovers.
pub const SWEEP_BUDGET: Duration = Duration::from_millis(100);
/// How long to wait for pipe EOF once everything that could hold a pipe was killed.
pub const EOF_WAIT: Duration = Duration::from_millis(40);
/// The SPEC's bound after `timeout + kill_grace`: the kill wait, the sweep and the last EOF
/// wait (or the leak window, the sweep and the EOF wait after a normal exit) fit in it.
pub const AFTER_LADDER: Duration = Duration::from_millis(250);

/// The SPEC §4.3 bound on one run: it returns by `timeout + kill_grace + AFTER_LADDER`
/// whatever the adapter and its descendants do.
pub fn bound(timeout: Duration, kill_grace: Duration) -> Duration {
    timeout
        .saturating_add(kill_grace)
        .saturating_add(AFTER_LADDER)
}

/// `d` for `poll(2)`, saturated (a wait too long to represent is a very long one).
pub fn timespec(d: Duration) -> rustix::event::Timespec {
    rustix::event::Timespec::try_from(d).unwrap_or(rustix::event::Timespec {
        tv_sec: i64::MAX,
        tv_nsec: 0,
    })
}
/// Size of the stderr tail reported in diagnostics (after redaction).
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;
/// How much of the end of stderr is kept raw: twice the reported tail, so that redaction sees
/// a secret whole even when it straddles the cut to [`STDERR_TAIL_BYTES`].
pub const STDERR_KEEP_BYTES: usize = 2 * STDERR_TAIL_BYTES;

/// What to run and under which bounds.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The program to execute (argv[0] resolved by the caller or through `PATH`).
    pub program: PathBuf,
    /// argv exactly as given; `argv[0]` is what the adapter sees as its name.
    pub argv: Vec<String>,
    /// The complete environment of the adapter.
    pub env: Vec<(String, String)>,
    /// Working directory; `None` keeps the dispatcher's.
    pub cwd: Option<PathBuf>,
    /// Bytes for the adapter's stdin; `None` gives it `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    pub kill_grace: Duration,
    pub max_stdout_bytes: u64,
    /// The confinement prepared for the adapter (SPEC §13); `None` runs it unconfined. Keep
    /// another handle to read its counters after the run (its cgroup and private `TMPDIR`
    /// live until the last handle is dropped).
    pub confinement: Option<Arc<Prepared>>,
    /// Also handed every piece of the adapter's stderr as it arrives (`--verbose`).
    pub stderr_tap: Option<Tap>,
    /// Also shown the kept stdout each time it grew (the judge's prescan).
    pub stdout_watch: Option<Viewer>,
}

/// Why the confinement asked for could not be prepared: nothing was started.
#[derive(Debug)]
pub enum Unconfinable {
    /// The program cannot be found or run (the error `run` would have given).
    Spawn(SpawnError),
    /// The host cannot put in place what was asked for (SPEC §13 "Fail closed").
    Unavailable(Unavailable),
}

/// Prepare the confinement `options` ask for (SPEC §13) for a child that runs `program`
/// (resolved through the `PATH` of `env`, as the child will) in `cwd`, before anything
/// starts; `Ok(None)` when nothing is asked for. With Landlock, `env`'s `TMPDIR` becomes the
/// private one; with `--network allow:`, the proxy variables point at the egress proxy
/// ([`PROXY_VARS`]). `transport_dir` is the file transport's private folder, granted in full.
pub fn prepare_confinement(
    options: &Options,
    program: &Path,
    env: &mut Vec<(String, String)>,
    cwd: Option<&Path>,
    transport_dir: Option<&Path>,
) -> Result<Option<Arc<Prepared>>, Unconfinable> {
    if !options.is_requested() {
        return Ok(None);
    }
    let program = child::locate(program, env, cwd).map_err(Unconfinable::Spawn)?;
    // A program named by its path that is not there is what `execve` would say it is — not
    // found — not a confinement the host cannot give (Landlock's rules name the program).
    if matches!(std::fs::metadata(&program), Err(err) if err.kind() == std::io::ErrorKind::NotFound)
    {
        return Err(Unconfinable::Spawn(SpawnError::NotFound(None)));
    }
    let path_var = child::path_var(env).map(std::ffi::OsString::from);
    let tmp_parent = std::env::temp_dir();
    let run = Run {
        program: &program,
        path_var: path_var.as_deref(),
        transport_dir,
        tmp_parent: &tmp_parent,
    };
    let prepared =
        Prepared::prepare(options, &run, Host::read).map_err(Unconfinable::Unavailable)?;
    let Some(prepared) = prepared else {
        return Ok(None);
    };
    if let Some(tmpdir) = prepared.tmpdir() {
        env.retain(|(k, _)| k != "TMPDIR");
        env.push(("TMPDIR".into(), tmpdir.to_string_lossy().into_owned()));
    }
    if options.network == crate::confine::Network::Allow {
        set_proxy_env(env);
    }
    Ok(Some(Arc::new(prepared)))
}

/// The variables that send an HTTP client through the egress proxy (SPEC §17), over whatever
/// the environment had: every spelling clients read points at the proxy on the namespace's
/// loopback, and nothing is exempt from it.
pub const PROXY_VARS: [&str; 8] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

fn set_proxy_env(env: &mut Vec<(String, String)>) {
    let proxy = format!("http://127.0.0.1:{}", crate::confine::proxy::PROXY_PORT);
    env.retain(|(k, _)| !PROXY_VARS.contains(&k.as_str()));
    for name in PROXY_VARS {
        let value = if name.eq_ignore_ascii_case("no_proxy") {
            String::new()
        } else {
            proxy.clone()
        };
        env.push((name.to_string(), value));
    }
}

impl Spec {
    /// [`prepare_confinement`] for this run: on success the spec carries the confinement
    /// (and the private `TMPDIR`), and so does the handle returned, to read its counters
    /// after the run.
    pub fn confine(
        &mut self,
        options: &Options,
        transport_dir: Option<&Path>,
    ) -> Result<Option<Arc<Prepared>>, Unconfinable> {
        let prepared = prepare_confinement(
            options,
            &self.program,
            &mut self.env,
            self.cwd.as_deref(),
            transport_dir,
        )?;
        self.confinement = prepared.clone();
        Ok(prepared)
    }
}

/// What sees the adapter's stderr as it arrives, besides the kept tail. `exec` only hands
/// the bytes over; what becomes of them (redacted, escaped, printed) is the caller's.
pub trait StderrTap {
    /// The next bytes the adapter wrote to stderr.
    fn chunk(&self, bytes: &[u8]);
    /// stderr is closed, or the run is over: nothing more comes.
    fn finish(&self);
}

/// A shared [`StderrTap`].
#[derive(Clone)]
pub struct Tap(pub std::rc::Rc<dyn StderrTap>);

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tap")
    }
}

/// What looks at the adapter's stdout while it arrives, besides keeping it. `exec` only shows
/// the bytes; what is made of them is the caller's.
pub trait StdoutWatch {
    /// The kept stdout so far (the same bytes as before and what is new; the buffer may have
    /// moved). Called at most once per round of the supervisor, for at most a few reads'
    /// worth of new bytes, and never after stdout went past its cap.
    fn grew(&self, kept: &[u8]);
}

/// A shared [`StdoutWatch`].
#[derive(Clone)]
pub struct Viewer(pub std::rc::Rc<dyn StdoutWatch>);

impl std::fmt::Debug for Viewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Viewer")
    }
}

/// Why the adapter could not be started. `NotFound` and `NotExecutable` are the two codes
/// (`adapter_not_found`, `adapter_not_executable`); what the program file says about the
/// failure, when it says more than the errno, rides along ([`Why`]).
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// `execve` said `ENOENT`: the program does not exist (or is not on `PATH`), or it does
    /// and what it needs does not (its `#!` interpreter, its dynamic loader).
    #[error("{}", spawn_message("the adapter program was not found", .0))]
    NotFound(Option<Why>),
    /// It exists but cannot be executed (permissions, exec format, no `#!` line).
    #[error("{}", spawn_message("the adapter program is not executable", .0))]
    NotExecutable(Option<Why>),
    /// Anything else the kernel refused.
    #[error("the adapter could not be started: {0}")]
    Other(io::ErrorKind),
    /// The kernel refused a confinement step in the child (SPEC §13.1): nothing was run.
    #[error("the adapter was not started: {0}")]
    Confinement(ChildError),
}

impl SpawnError {
    /// What the program file says about the failure, when anything.
    pub fn why(&self) -> Option<&Why> {
        match self {
            SpawnError::NotFound(why) | SpawnError::NotExecutable(why) => why.as_ref(),
            SpawnError::Other(_) | SpawnError::Confinement(_) => None,
        }
    }
}

/// The one-sentence form, for `error.message`: no path, only an interpreter's file name.
fn spawn_message(plain: &str, why: &Option<Why>) -> String {
    match why {
        None => plain.to_string(),
        Some(why) => format!(
            "the adapter program could not be started: {}",
            why.describe(true)
        ),
    }
}

/// Why a program that exists could not be run, as its file shows (read after `execve`
/// failed, for the message only; `child.rs` works it out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// The `#!` line names this interpreter (as written), which does not exist.
    MissingInterpreter(String),
    /// The `#!` line ends in a carriage return (the file has CRLF line endings): the
    /// interpreter, or `env`'s program, is this name with the `\r`, which does not exist.
    CrlfShebang(String),
    /// The `#!` line names this interpreter, which exists but cannot be executed.
    InterpreterNotExecutable(String),
    /// An empty `#!` line.
    EmptyShebang,
    /// No `#!` line, and not a binary this system runs.
    NoShebang,
    /// A dynamically linked binary whose loader (ELF interpreter) does not exist.
    MissingLoader,
    /// A binary for another kind of system.
    ForeignBinary,
    /// A directory.
    Directory,
    /// No execute permission for this user.
    NoExecutePermission,
    /// Confined, the adapter runs as another user (SPEC §13.2), and a folder above the program
    /// is not searchable by that user (its uid).
    UnreachableForRunAs(u32),
    /// `ETXTBSY`: the file is open for writing, and stayed so while the spawn was tried again
    /// (`child::BUSY_PAUSES_MS`).
    FileBusy,
}

impl Why {
    /// The stable word for `error.details.reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            Why::MissingInterpreter(_) => "missing_interpreter",
            Why::CrlfShebang(_) => "crlf_shebang",
            Why::InterpreterNotExecutable(_) => "interpreter_not_executable",
            Why::EmptyShebang => "empty_shebang",
            Why::NoShebang => "no_shebang",
            Why::MissingLoader => "missing_loader",
            Why::ForeignBinary => "exec_format",
            Why::Directory => "directory",
            Why::NoExecutePermission => "no_execute_permission",
            Why::UnreachableForRunAs(_) => "unreachable_for_run_as",
            Why::FileBusy => "file_busy",
        }
    }

    /// The interpreter named, as written (a host path), when the reason is about one.
    pub fn interpreter(&self) -> Option<&str> {
        match self {
            Why::MissingInterpreter(name)
            | Why::CrlfShebang(name)
            | Why::InterpreterNotExecutable(name) => Some(name),
            _ => None,
        }
    }

    /// The interpreter's file name (what `error.details` and `error.message` may show).
    pub fn interpreter_name(&self) -> Option<&str> {
        self.interpreter()
            .map(|name| name.rsplit('/').next().unwrap_or(name))
    }

    /// The reason in words, after "could not be started: "; the interpreter by its file name
    /// only when `short` (the envelope's message), else as written (stderr).
    pub fn describe(&self, short: bool) -> String {
        let interpreter = if short {
            self.interpreter_name()
        } else {
            self.interpreter()
        }
        .unwrap_or_default();
        match self {
            Why::MissingInterpreter(_) => {
                format!("its #! line names the interpreter {interpreter}, which does not exist")
            }
            Why::CrlfShebang(_) => format!(
                "its #! line ends in a carriage return (the file has CRLF line endings): it \
                 names `{interpreter}`, carriage return included, which does not exist; convert \
                 the file to LF line endings (e.g. dos2unix)"
            ),
            Why::InterpreterNotExecutable(_) => {
                format!("its #! line names the interpreter {interpreter}, which is not executable")
            }
            Why::EmptyShebang => "its #! line names no interpreter".to_string(),
            Why::NoShebang => "it has no #! line and is not a binary this system runs (a script \
                               needs a first line such as #!/bin/sh)"
                .to_string(),
            Why::MissingLoader => "it is a dynamically linked binary whose loader (its ELF \
                                   interpreter) does not exist"
                .to_string(),
            Why::ForeignBinary => {
                "it is a binary for another kind of system (exec format error)".to_string()
            }
            Why::Directory => "it is a directory".to_string(),
            Why::NoExecutePermission => {
                "it has no execute permission for this user (chmod +x)".to_string()
            }
            Why::UnreachableForRunAs(uid) => format!(
                "the confined adapter runs as uid {uid} (--run-as), and a folder above the \
                 program is not searchable by that user (file modes apply under confinement: \
                 install the adapter where that user can reach it)"
            ),
            Why::FileBusy => "it is open for writing by a process (text file busy: still being \
                              written or copied), and stayed so while it was tried again for \
                              150 ms"
                .to_string(),
        }
    }
}

/// Why writing the request to the adapter's stdin stopped before all of it was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdinError {
    /// EPIPE: the adapter closed its stdin early (normal for adapters that need no request).
    BrokenPipe,
    /// Any other write error, by its kind.
    Other(io::ErrorKind),
}

/// Run the adapter to completion under the bounds in `spec`.
pub fn run(spec: Spec, interrupts: &Interrupts) -> Result<Finished, SpawnError> {
    let start = Instant::now();
    // A signal that arrived before now means: do not start at all. Later ones wake the loop
    // and are forwarded to the adapter's group.
    if let Some(sig) = interrupts.received() {
        return Ok(not_started(sig, start));
    }
    let usage_before = outcome::children_usage();
    let launch = Launch {
        program: &spec.program,
        argv: &spec.argv,
        env: &spec.env,
        cwd: spec.cwd.as_deref(),
        stdin: spec.stdin.is_some(),
        confinement: spec.confinement.as_ref(),
    };
    // From here on `group` kills and sweeps on every way out, unwinding included.
    let (mut group, pipes) = ProcessGroup::spawn(&launch)?;
    // Test-only (debug builds, armed by the main job): proves the guard above end to end.
    crate::fault::panic_point::reach(crate::fault::PanicPoint::AdapterStarted);
    let mut io = Io::new(pipes, spec.stdin, spec.max_stdout_bytes, STDERR_KEEP_BYTES)
        .map_err(|err| SpawnError::Other(err.kind()))?;
    io.tap = spec.stderr_tap.clone();
    io.watch = spec.stdout_watch.clone();
    let hard = start + bound(spec.timeout, spec.kill_grace);

    let mut ladder = Ladder::new(start, spec.timeout, spec.kill_grace, KILL_WAIT);
    loop {
        let now = Instant::now();
        if now >= ladder.deadline() {
            if carry_out(ladder.on_deadline(now), &group) {
                break;
            }
            continue;
        }
        let ready = io.poll_once(
            Some(group.exit_fd()),
            interrupts.wake_fd(),
            ladder.deadline(),
        );
        if ready.signaled {
            for sig in interrupts.take_pending() {
                carry_out(ladder.on_signal(sig, Instant::now()), &group);
            }
        }
        if ready.overflow {
            carry_out(ladder.on_overflow(Instant::now()), &group);
        }
        if ready.exited && group.try_exit().is_some() {
            break;
        }
    }

    let stopped = ladder.stopped();
    if stopped.is_none() {
        // Descendants that still write get a short window to finish, never more.
        io.drain(hard.min(Instant::now() + LEAK_WINDOW));
    }
    let swept = group.finish(hard.min(Instant::now() + SWEEP_BUDGET));
    // Everything that could hold a pipe is dead now; EOF follows at once.
    io.close_stdin();
    io.drain(hard.min(Instant::now() + EOF_WAIT));
    if let Some(tap) = &spec.stderr_tap {
        tap.0.finish();
    }
    Ok(Finished {
        termination: swept.termination,
        stopped,
        stdout_bytes: io.out.total(),
        stderr_truncated: io.err.truncated(),
        stderr_bytes: io.err.total(),
        stdin_bytes_written: io.stdin_written,
        stdin_error: io.stdin_error,
        stdout: io.out.into_data(),
        stderr_tail: io.err.into_tail(),
        duration: start.elapsed(),
        leaked_processes: swept.leaked_processes,
        resources: Resources::since(usage_before, swept.leader_max_rss_bytes),
    })
}

/// Do what the ladder says; returns `true` when it gave up waiting for the adapter.
fn carry_out(action: Action, group: &ProcessGroup) -> bool {
    match action {
        Action::Nothing => {}
        Action::Signal(sig) => {
            let _ = group.signal(sig);
        }
        Action::KillAll => group.kill(),
        Action::GiveUp => return true,
    }
    false
}

fn not_started(sig: Signal, start: Instant) -> Finished {
    Finished {
        termination: Termination::NotStarted,
        stopped: Some(Stop::Interrupted(sig)),
        stdout: Vec::new(),
        stdout_bytes: 0,
        stderr_tail: Vec::new(),
        stderr_truncated: false,
        stderr_bytes: 0,
        stdin_bytes_written: 0,
        stdin_error: None,
        duration: start.elapsed(),
        leaked_processes: 0,
        resources: Resources::default(),
    }
}

/// What the child of [`fork_report`] sent back, and how it ended.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Forked<const N: usize> {
    /// The child's report: `None` when it sent none in time.
    pub report: Option<[u8; N]>,
    /// Its wait status, when it was reaped.
    pub status: Option<rustix::process::WaitStatus>,
}

/// Fork a child that runs `child`, writes the `N` bytes it returns to a pipe and `_exit`s;
/// wait at most `timeout` for them, then reap the child — killed with SIGKILL when it is still
/// there a second later. `None` when no child could be started. For `doctor`'s probes
/// (`probe/`), whose children try one forbidden thing.
///
/// `child` runs between `fork` and `_exit` of a possibly multi-threaded process: it must not
/// allocate, lock or panic (system calls on data the caller prepared).
// exec/ owns every fork and every signal sent (clippy.toml).
#[allow(clippy::disallowed_methods)]
pub(crate) fn fork_report<const N: usize>(
    timeout: Duration,
    child: impl FnOnce() -> [u8; N],
) -> Option<Forked<N>> {
    use rustix::process::{Pid, Signal, WaitOptions};
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).ok()?;
    // SAFETY: the child only runs `child` (system calls on prepared data, per this
    // function's contract), writes to a pipe and `_exit`s; it never returns into Rust code
    // that could touch locks held by other threads at the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let bytes = child();
        let _ = rustix::io::write(&write, &bytes);
        // SAFETY: `_exit` ends the child without running the parent's atexit handlers or
        // destructors.
        unsafe { libc::_exit(0) };
    }
    drop(write);
    let pid = Pid::from_raw(pid.max(0))?;
    let report = read_report(&read, timeout);
    let mut status = None;
    for _ in 0..200 {
        match rustix::process::waitpid(Some(pid), WaitOptions::NOHANG) {
            Ok(Some((_, ended))) => {
                status = Some(ended);
                break;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break,
        }
    }
    if status.is_none() {
        // Our own unreaped child: its pid cannot have been recycled.
        let _ = rustix::process::kill_process(pid, Signal::KILL);
        status = rustix::process::waitpid(Some(pid), WaitOptions::empty())
            .ok()
            .flatten()
            .map(|(_, s)| s);
    }
    Some(Forked { report, status })
}

/// The `N` bytes of a report on `read`, if they come within `timeout`.
fn read_report<const N: usize>(read: &rustix::fd::OwnedFd, timeout: Duration) -> Option<[u8; N]> {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(read, PollFlags::IN)];
    if poll(&mut fds, Some(&timespec(timeout))).ok()? == 0 {
        return None;
    }
    let mut bytes = [0u8; N];
    match rustix::io::read(read, &mut bytes) {
        Ok(n) if n == N => Some(bytes),
        _ => None,
    }
}

/// Fork a child that `_exit`s at once, and reap it: `Ok` when this process could fork, else
/// the errno of the refusal (`EAGAIN` past a cgroup's `pids.max`). System calls only: for a
/// probe's child (the `pids` probe of `probe/`).
// exec/ owns every fork (clippy.toml).
#[allow(clippy::disallowed_methods)]
pub(crate) fn fork_and_reap() -> Result<(), rustix::io::Errno> {
    // SAFETY: the new child only `_exit`s, touching nothing the fork may have left locked.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: ends the new child at once.
        unsafe { libc::_exit(0) };
    }
    match rustix::process::Pid::from_raw(pid.max(0)) {
        Some(pid) => {
            let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
            Ok(())
        }
        None => Err(
            rustix::io::Errno::from_io_error(&io::Error::last_os_error())
                .unwrap_or(rustix::io::Errno::IO),
        ),
    }
}

/// Run the test named `name` alone in a fresh copy of this test binary and assert it passed
/// there. The sweep kills and reaps every child of its process, so in the shared test process
/// it could take the children of tests running in parallel. Returns `true` in the copy, where
/// the caller runs the body.
/// `path` made absolute against the dispatcher's working directory.
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// argv[0] with a slash is a path, taken relative to the dispatcher's working directory (not
/// the adapter's); a bare name is looked up in `PATH` at spawn.
pub fn resolve_program(argv0: &str) -> PathBuf {
    if argv0.contains('/') {
        absolute(Path::new(argv0))
    } else {
        PathBuf::from(argv0)
    }
}

#[cfg(test)]
fn isolated(name: &str) -> bool {
    const ISOLATED: &str = "PTD_EXEC_ISOLATED_TEST";
    if std::env::var_os(ISOLATED).is_some() {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(ISOLATED, "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "the test did not run: {text}");
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(script: &str, stdin: Option<&[u8]>) -> Spec {
        Spec {
            program: PathBuf::from("/bin/sh"),
            argv: vec!["sh".into(), "-c".into(), script.into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: None,
            stdin: stdin.map(<[u8]>::to_vec),
            timeout: Duration::from_secs(20),
            kill_grace: Duration::from_millis(500),
            max_stdout_bytes: 1 << 20,
            confinement: None,
            stderr_tap: None,
            stdout_watch: None,
        }
    }

    fn threads() -> usize {
        std::fs::read_dir("/proc/self/task").unwrap().count()
    }

    #[test]
    fn a_run_starts_no_thread() {
        if !isolated("exec::tests::a_run_starts_no_thread") {
            return;
        }
        let before = threads();
        // The adapter counts the dispatcher's threads while the run is on.
        let spec = shell(
            "cat >/dev/null; ls /proc/$PPID/task | wc -l",
            Some(b"request"),
        );
        let finished = run(spec, &Interrupts::none()).unwrap();
        assert_eq!(finished.termination, Termination::Exited(0));
        let during: usize = String::from_utf8_lossy(&finished.stdout)
            .trim()
            .parse()
            .unwrap();
        assert_eq!(during, before, "threads while running");
        assert_eq!(finished.stdin_bytes_written, 7);
        assert_eq!(finished.stdin_error, None);
        assert_eq!(threads(), before);
    }

    #[test]
    fn stderr_keeps_twice_the_reported_tail() {
        if !isolated("exec::tests::stderr_keeps_twice_the_reported_tail") {
            return;
        }
        // 200 KiB of stderr, then a marker: the raw tail is 128 KiB and ends with the marker.
        let spec = shell(
            "head -c 204800 /dev/zero | tr '\\0' e >&2; printf END >&2",
            None,
        );
        let finished = run(spec, &Interrupts::none()).unwrap();
        assert_eq!(finished.stderr_tail.len(), STDERR_KEEP_BYTES);
        assert!(finished.stderr_tail.ends_with(b"eEND"));
        assert!(finished.stderr_truncated);
        assert_eq!(finished.leaked_processes, 0);
    }

    /// Records each view of stdout: where the buffer was and how long.
    struct Views(std::cell::RefCell<Vec<(usize, usize)>>);

    impl StdoutWatch for Views {
        fn grew(&self, kept: &[u8]) {
            let view = (kept.as_ptr() as usize, kept.len());
            self.0.borrow_mut().push(view);
        }
    }

    #[test]
    fn the_stdout_viewer_sees_it_grow_and_last_sees_the_buffer_returned() {
        if !isolated(
            "exec::tests::the_stdout_viewer_sees_it_grow_and_last_sees_the_buffer_returned",
        ) {
            return;
        }
        // Three pieces with a pause after each: the supervisor finds the pipe empty in each
        // pause, so a round ends and the viewer is shown what came (one round could otherwise
        // read everything, and did on a loaded machine).
        let written: u64 = 3_000_000;
        let script = "for i in 1 2 3; do head -c 1000000 /dev/zero | tr '\\0' a; sleep 0.05; done";
        for cap in [4 << 20, 1 << 20] {
            let views = std::rc::Rc::new(Views(Default::default()));
            let mut spec = shell(script, None);
            spec.max_stdout_bytes = cap;
            spec.stdout_watch = Some(Viewer(views.clone()));
            let finished = run(spec, &Interrupts::none()).unwrap();
            let views = views.0.borrow();
            assert!(views.windows(2).all(|w| w[0].1 < w[1].1), "only growth");
            if cap > written {
                assert!(views.len() > 1, "{views:?}");
                // The prescan's proof is about this buffer: the one the run returns.
                let returned = (finished.stdout.as_ptr() as usize, finished.stdout.len());
                assert_eq!(views.last(), Some(&returned));
                assert_eq!(finished.stdout.len() as u64, written);
            } else {
                // Never shown past the cap.
                assert!(views.iter().all(|&(_, len)| len as u64 <= cap), "{views:?}");
                assert_eq!(finished.stopped, Some(Stop::OutputCap));
            }
        }
    }

    #[test]
    fn a_run_that_never_started_reports_no_resources() {
        let sig = Signal::from_raw(libc::SIGTERM).unwrap();
        assert_eq!(not_started(sig, Instant::now()).resources_used(), None);
    }

    #[test]
    fn a_run_reports_what_its_tree_used() {
        if !isolated("exec::tests::a_run_reports_what_its_tree_used") {
            return;
        }
        // A grandchild spins and is reaped by its parent: it still counts.
        let spec = shell(
            "sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done'; :",
            None,
        );
        let finished = run(spec, &Interrupts::none()).unwrap();
        let used = finished.resources_used().unwrap();
        assert!(used.user_ms + used.system_ms > 0, "{used:?}");
        assert!(used.max_rss_bytes > 0, "{used:?}");
    }

    #[test]
    fn a_peak_from_before_the_run_does_not_stand_for_the_adapter_s() {
        if !isolated("exec::tests::a_peak_from_before_the_run_does_not_stand_for_the_adapter_s") {
            return;
        }
        // A 64 MiB child reaped before the run, as a shell that `exec`s the dispatcher leaves
        // in its children's totals.
        let big = std::process::Command::new("dd")
            .args(["if=/dev/zero", "of=/dev/null", "bs=64M", "count=1"])
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(big.success());
        assert!(outcome::children_usage().0 >= 64 << 20);
        let finished = run(shell("exit 0", None), &Interrupts::none()).unwrap();
        let used = finished.resources_used().unwrap();
        assert!(used.max_rss_bytes > 0, "{used:?}");
        assert!(used.max_rss_bytes < 32 << 20, "the earlier peak: {used:?}");
        // A run that goes past the earlier peak reports its own.
        let finished = run(
            shell(
                "dd if=/dev/zero of=/dev/null bs=96M count=1 2>/dev/null",
                None,
            ),
            &Interrupts::none(),
        )
        .unwrap();
        let used = finished.resources_used().unwrap();
        assert!(used.max_rss_bytes >= 96 << 20, "{used:?}");
    }
}
