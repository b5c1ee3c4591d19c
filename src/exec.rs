//! Running the host adapter (SPEC §4.2–§4.3): spawn, feed stdin, drain pipes, deadline, kill
//! ladder, reap.
//!
//! Invariants:
//! - the adapter runs in its own process group, with the environment the caller built (the
//!   host's is never inherited) and no shell;
//! - stdin is written on its own thread while stdout and stderr are drained on theirs, so no
//!   pipe size can deadlock;
//! - the call returns by `timeout + kill_grace + ~250 ms` whatever the adapter's descendants
//!   do: nothing here ever waits for pipe EOF without a bound;
//! - after the adapter is gone, every process it left behind is killed (the process group, and
//!   on Linux every descendant found through the child-subreaper link) and reaped.
//!
//! This module knows nothing about JSON or envelopes; `outcome.rs` interprets what it returns.

use crate::interrupt::Interrupts;
use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long descendants may keep the adapter's pipes open after it exited (SPEC §4.3).
pub const LEAK_WINDOW: Duration = Duration::from_millis(100);
/// How long to wait for the adapter to be reaped after SIGKILL before giving up on it.
const KILL_WAIT: Duration = Duration::from_millis(100);
/// How long the final sweep may spend killing and reaping leftovers.
const SWEEP_BUDGET: Duration = Duration::from_millis(100);
/// Size of the stderr tail kept for diagnostics.
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;

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
}

/// Why the adapter could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The program does not exist (or is not on `PATH`).
    #[error("the adapter program was not found")]
    NotFound,
    /// It exists but cannot be executed (permissions, exec format).
    #[error("the adapter program is not executable")]
    NotExecutable,
    /// Anything else the kernel refused.
    #[error("the adapter could not be started: {0}")]
    Other(io::ErrorKind),
}

/// How the adapter ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// It exited with this code.
    Exited(i32),
    /// It was killed by this signal.
    Signaled(i32),
    /// It could not be reaped in time (stuck in the kernel after SIGKILL).
    Unreaped,
    /// It was never started: the dispatcher was interrupted first.
    NotStarted,
}

/// Why the dispatcher stopped the adapter, when it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The deadline passed.
    Timeout,
    /// stdout went past the cap.
    OutputCap,
    /// The dispatcher received this signal and forwarded it.
    Interrupted(i32),
}

/// Everything observed about one run.
#[derive(Debug, Clone)]
pub struct Finished {
    pub termination: Termination,
    /// Set when the dispatcher stopped the adapter; the first reason wins.
    pub stopped: Option<Stop>,
    /// stdout, at most `max_stdout_bytes` of it.
    pub stdout: Vec<u8>,
    /// How many stdout bytes were read in all (more than the cap when it was hit).
    pub stdout_bytes: u64,
    /// The last [`STDERR_TAIL_BYTES`] of stderr, raw.
    pub stderr_tail: Vec<u8>,
    pub stderr_truncated: bool,
    pub stdin_bytes_written: u64,
    /// Set when writing stdin failed: `"broken_pipe"` when the adapter closed it early (normal).
    pub stdin_error: Option<String>,
    pub duration: Duration,
    /// Processes still alive after the adapter was gone (and the leak window), all killed.
    pub leaked_processes: usize,
}

enum Event {
    Exited(io::Result<ExitStatus>),
    StdoutOverflow,
    Signal(i32),
}

#[derive(Default)]
struct Sink {
    data: Vec<u8>,
    total: u64,
    truncated: bool,
}

/// How many of the adapter's output pipes are still open, with a wake-up for the waiter.
#[derive(Default)]
struct OpenPipes {
    count: Mutex<usize>,
    changed: Condvar,
}

impl OpenPipes {
    fn opened(&self) {
        *lock(&self.count) += 1;
    }

    fn closed(&self) {
        *lock(&self.count) -= 1;
        self.changed.notify_all();
    }

    /// Wait until every pipe reached EOF, or `window` passed.
    fn wait(&self, window: Duration) {
        let guard = lock(&self.count);
        let _ = self
            .changed
            .wait_timeout_while(guard, window, |open| *open > 0);
    }
}

#[derive(Default)]
struct StdinState {
    written: u64,
    error: Option<String>,
}

/// Make the dispatcher the reaper of orphaned descendants (Linux), so that processes that
/// escape the adapter's process group (double fork, `setsid`) can still be found and killed.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes a plain integer and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// Run the adapter to completion under the bounds in `spec`.
pub fn run(mut spec: Spec, interrupts: &Interrupts) -> Result<Finished, SpawnError> {
    let start = Instant::now();
    let (tx, rx) = mpsc::channel::<Event>();
    let signal_tx = tx.clone();
    let _subscription = interrupts.subscribe(move |sig| {
        let _ = signal_tx.send(Event::Signal(sig));
    });

    // A signal that arrived before the subscription means: do not start at all. Later ones
    // come through the channel and are forwarded to the adapter's group.
    if let Some(sig) = interrupts.received() {
        return Ok(not_started(sig, start));
    }

    let mut command = Command::new(&spec.program);
    command
        .arg0(OsString::from(&spec.argv[0]))
        .args(&spec.argv[1..])
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    let mut child = command.spawn().map_err(classify_spawn_error)?;
    let pid = child.id() as i32;

    let streams = Streams::default();
    if let (Some(bytes), Some(pipe)) = (spec.stdin.take(), child.stdin.take()) {
        let state = Arc::clone(&streams.stdin);
        thread::spawn(move || feed_stdin(pipe, &bytes, &state));
    }
    if let Some(pipe) = child.stdout.take() {
        let (sink, pipes) = (Arc::clone(&streams.stdout), Arc::clone(&streams.pipes));
        let cap = spec.max_stdout_bytes;
        let tx = tx.clone();
        pipes.opened();
        thread::spawn(move || drain(pipe, Keep::Head(cap), &sink, &pipes, Some(&tx)));
    }
    if let Some(pipe) = child.stderr.take() {
        let (sink, pipes) = (Arc::clone(&streams.stderr), Arc::clone(&streams.pipes));
        pipes.opened();
        thread::spawn(move || drain(pipe, Keep::Tail(STDERR_TAIL_BYTES), &sink, &pipes, None));
    }
    {
        let tx = tx.clone();
        thread::spawn(move || {
            let _ = tx.send(Event::Exited(child.wait()));
        });
    }
    drop(tx);
    let (termination, stopped) = supervise(pid, &spec, start, &rx);
    Ok(finish(pid, termination, stopped, start, &streams))
}

/// What the pipe threads share with the supervisor.
#[derive(Default)]
struct Streams {
    stdout: Arc<Mutex<Sink>>,
    stderr: Arc<Mutex<Sink>>,
    stdin: Arc<Mutex<StdinState>>,
    pipes: Arc<OpenPipes>,
}

fn not_started(sig: i32, start: Instant) -> Finished {
    Finished {
        termination: Termination::NotStarted,
        stopped: Some(Stop::Interrupted(sig)),
        stdout: Vec::new(),
        stdout_bytes: 0,
        stderr_tail: Vec::new(),
        stderr_truncated: false,
        stdin_bytes_written: 0,
        stdin_error: None,
        duration: start.elapsed(),
        leaked_processes: 0,
    }
}

/// The kill ladder. Returns how the adapter ended and why it was stopped, if it was.
fn supervise(
    pid: i32,
    spec: &Spec,
    start: Instant,
    rx: &Receiver<Event>,
) -> (Termination, Option<Stop>) {
    enum Phase {
        Running,
        Terminating,
        Killed,
    }
    let mut phase = Phase::Running;
    let mut deadline = start + spec.timeout;
    let mut stopped = None;
    loop {
        let wait = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok(Event::Exited(status)) => {
                let termination = match status {
                    Ok(status) => match (status.code(), status.signal()) {
                        (Some(code), _) => Termination::Exited(code),
                        (None, Some(sig)) => Termination::Signaled(sig),
                        (None, None) => Termination::Unreaped,
                    },
                    Err(_) => Termination::Unreaped,
                };
                return (termination, stopped);
            }
            Ok(Event::StdoutOverflow) => {
                stopped.get_or_insert(Stop::OutputCap);
                kill_everything(pid);
                phase = Phase::Killed;
                deadline = Instant::now() + KILL_WAIT;
            }
            Ok(Event::Signal(sig)) => {
                stopped.get_or_insert(Stop::Interrupted(sig));
                signal_group(pid, sig);
                if matches!(phase, Phase::Running) {
                    phase = Phase::Terminating;
                    deadline = Instant::now() + spec.kill_grace;
                }
            }
            Err(RecvTimeoutError::Timeout) => match phase {
                Phase::Running => {
                    stopped.get_or_insert(Stop::Timeout);
                    signal_group(pid, libc::SIGTERM);
                    phase = Phase::Terminating;
                    deadline = Instant::now() + spec.kill_grace;
                }
                Phase::Terminating => {
                    kill_everything(pid);
                    phase = Phase::Killed;
                    deadline = Instant::now() + KILL_WAIT;
                }
                Phase::Killed => return (Termination::Unreaped, stopped),
            },
            Err(RecvTimeoutError::Disconnected) => return (Termination::Unreaped, stopped),
        }
    }
}

/// After the adapter is gone: the leak window, then kill and reap whatever is left, then
/// collect what the pipes delivered.
fn finish(
    pid: i32,
    termination: Termination,
    stopped: Option<Stop>,
    start: Instant,
    streams: &Streams,
) -> Finished {
    if stopped.is_none() {
        // Descendants that still write get a short window to finish, never more.
        streams.pipes.wait(LEAK_WINDOW);
    }
    let leaked_processes = sweep(pid);
    // Everything that could hold a pipe is dead now; EOF follows at once.
    streams.pipes.wait(Duration::from_millis(50));

    let take = |sink: &Arc<Mutex<Sink>>| {
        let mut sink = lock(sink);
        (std::mem::take(&mut sink.data), sink.total, sink.truncated)
    };
    let (stdout, stdout_bytes, _) = take(&streams.stdout);
    let (stderr_tail, _, stderr_truncated) = take(&streams.stderr);
    let stdin = lock(&streams.stdin);
    Finished {
        termination,
        stopped,
        stdout,
        stdout_bytes,
        stderr_tail,
        stderr_truncated,
        stdin_bytes_written: stdin.written,
        stdin_error: stdin.error.clone(),
        duration: start.elapsed(),
        leaked_processes,
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A reader thread cannot panic while holding the lock, but stay usable if one ever did.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn feed_stdin(mut pipe: std::process::ChildStdin, bytes: &[u8], state: &Mutex<StdinState>) {
    for chunk in bytes.chunks(64 * 1024) {
        if let Err(err) = pipe.write_all(chunk) {
            lock(state).error = Some(match err.kind() {
                io::ErrorKind::BrokenPipe => "broken_pipe".to_string(),
                kind => format!("{kind:?}").to_lowercase(),
            });
            return;
        }
        lock(state).written += chunk.len() as u64;
    }
    // Dropping the pipe closes it: the adapter sees EOF.
}

/// Which part of a stream a sink keeps.
#[derive(Clone, Copy)]
enum Keep {
    /// The first bytes, up to the cap; past it the adapter is stopped.
    Head(u64),
    /// The last bytes, this many.
    Tail(usize),
}

/// Read `pipe` to EOF (or error) into `sink`. A head sink that overflows reports it on `tx`
/// and stops reading: the supervisor kills the adapter.
fn drain(
    mut pipe: impl Read,
    keep: Keep,
    sink: &Mutex<Sink>,
    pipes: &OpenPipes,
    tx: Option<&Sender<Event>>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut s = lock(sink);
        s.total += n as u64;
        match keep {
            Keep::Head(cap) => {
                let room = cap.saturating_sub(s.data.len() as u64) as usize;
                s.data.extend_from_slice(&buf[..n.min(room)]);
                if s.total > cap {
                    s.truncated = true;
                    drop(s);
                    if let Some(tx) = tx {
                        let _ = tx.send(Event::StdoutOverflow);
                    }
                    break;
                }
            }
            Keep::Tail(len) => {
                s.data.extend_from_slice(&buf[..n]);
                if s.data.len() > len {
                    let cut = s.data.len() - len;
                    s.data.drain(..cut);
                    s.truncated = true;
                }
            }
        }
    }
    pipes.closed();
}

fn classify_spawn_error(err: io::Error) -> SpawnError {
    match err.raw_os_error() {
        Some(libc::ENOENT) => SpawnError::NotFound,
        Some(libc::EACCES | libc::ENOEXEC | libc::EISDIR | libc::EPERM) => {
            SpawnError::NotExecutable
        }
        _ => match err.kind() {
            io::ErrorKind::NotFound => SpawnError::NotFound,
            io::ErrorKind::PermissionDenied => SpawnError::NotExecutable,
            kind => SpawnError::Other(kind),
        },
    }
}

fn signal_group(pgid: i32, sig: i32) {
    // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

fn signal_pid(pid: i32, sig: i32) {
    // SAFETY: as above, for one process.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// SIGKILL the adapter's group and every descendant that escaped it.
fn kill_everything(pgid: i32) {
    signal_group(pgid, libc::SIGKILL);
    for pid in descendants(pgid) {
        signal_pid(pid, libc::SIGKILL);
    }
}

/// Kill and reap what the adapter left behind; returns how many live processes were found.
///
/// Once the adapter has exited, the kernel reparents its surviving descendants to the nearest
/// subreaper — this process — so they are all found among our own descendants.
fn sweep(pgid: i32) -> usize {
    let until = Instant::now() + SWEEP_BUDGET;
    let own = std::process::id() as i32;
    let mut seen = std::collections::BTreeSet::new();
    signal_group(pgid, libc::SIGKILL);
    loop {
        let alive: Vec<i32> = descendants(own)
            .into_iter()
            .filter(|&p| p != pgid && !is_zombie(p))
            .collect();
        for &pid in &alive {
            seen.insert(pid);
            signal_pid(pid, libc::SIGKILL);
        }
        signal_group(pgid, libc::SIGKILL);
        reap_orphans(pgid);
        if alive.is_empty() || Instant::now() >= until {
            break;
        }
        thread::sleep(Duration::from_millis(2));
    }
    reap_orphans(pgid);
    seen.len()
}

/// Reap every exited child except the adapter itself (its waiter thread owns that).
fn reap_orphans(adapter: i32) {
    for pid in children(std::process::id() as i32) {
        if pid == adapter {
            continue;
        }
        let mut status = 0;
        // SAFETY: waitpid on our own child with WNOHANG; `status` is a valid out-pointer.
        unsafe {
            libc::waitpid(pid, &mut status, libc::WNOHANG);
        }
    }
}

/// Direct children of `pid` (Linux `/proc/PID/task/*/children`; empty elsewhere).
fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
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

/// All descendants of `pid`, breadth first (bounded, in case of a fork storm).
fn descendants(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut queue = vec![pid];
    while let Some(p) = queue.pop() {
        for c in children(p) {
            if out.len() >= 10_000 {
                return out;
            }
            if !out.contains(&c) {
                out.push(c);
                queue.push(c);
            }
        }
    }
    out
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // The state follows the parenthesised command name, which may itself hold ") ".
            let after = stat.rfind(')')?;
            stat[after + 1..]
                .split_whitespace()
                .next()
                .map(|s| s == "Z" || s == "X")
        })
        .unwrap_or(true)
}
