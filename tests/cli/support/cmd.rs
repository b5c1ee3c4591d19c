//! [`Cmd`]: every run of the binary under test, built up fluently; [`Running`]: the child while
//! it runs, for the tests that signal it or feed it through a terminal; [`Output`]: what it did.
//!
//! An [`Output`] forces the three checks, in the manner of just's `Test`: each of exit status,
//! stdout and stderr is either stated by the test (`.exit(n)`, `.stdout_*`, `.stderr_*`) or held
//! to a strict default when the output is dropped — exit 0, nothing on stdout, nothing on stderr.
//! A test that forgets a check therefore fails instead of passing. The raw values are there for
//! bespoke assertions once all three have been stated.
//!
//! Every run has a watchdog: a binary that hangs is killed and fails its test instead of
//! hanging the suite. `PARENT_TOOL_DISPATCH_BRIDGE` is never inherited from the environment the
//! tests run in, only set when a test sets it.

use serde_json::Value;
use std::cell::Cell;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The variable the dispatcher reads its bridge from when `--parent-tool-bridge` is absent.
const BRIDGE_VAR: &str = "PARENT_TOOL_DISPATCH_BRIDGE";

/// How long any run may take unless a test sets its own watchdog: far beyond every bound the
/// suite tests, so only a hang reaches it.
const WATCHDOG: Duration = Duration::from_secs(300);

/// What the child reads on stdin.
enum Input {
    /// These bytes, written on a thread of their own, then end of file.
    Bytes(Vec<u8>),
    /// A file (or terminal, or directory) opened by the test.
    File(File),
    /// A pipe that is neither written nor closed until the child has exited.
    Held,
}

/// Where the child's stdout goes.
enum Sink {
    /// A pipe the test reads.
    Captured,
    /// `/dev/full`: every write fails with `ENOSPC`.
    DevFull,
    /// A pipe whose read end is closed before the child starts: every write is `EPIPE`.
    ClosedPipe,
}

/// One run of the binary under test, built up fluently.
#[must_use = "a Cmd does nothing until .run() or .spawn()"]
pub struct Cmd {
    program: PathBuf,
    args: Vec<OsString>,
    stdin: Input,
    stdout: Sink,
    /// In order; `None` removes the variable.
    env: Vec<(OsString, Option<OsString>)>,
    cwd: Option<PathBuf>,
    data_limit: Option<u64>,
    umask: Option<u32>,
    /// Descriptors the child inherits without close-on-exec: (number in the child, file).
    extra_fds: Vec<(i32, OwnedFd)>,
    /// A terminal that becomes the child's controlling terminal (in a new session).
    terminal: Option<OwnedFd>,
    /// (uid, gid) the child runs as, its supplementary groups dropped.
    user: Option<(u32, u32)>,
    watchdog: Duration,
}

impl Cmd {
    /// The binary with these arguments, nothing on stdin.
    pub fn new<I, S>(args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Cmd::of(super::super::bin(), args)
    }

    /// The test suite's own `ptd-test` (the test adapter, the test MCP server) with these
    /// arguments, for the tests of the test tools themselves.
    pub fn ptd_test<I, S>(args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Cmd::of(super::super::test_bin(), args)
    }

    /// `program` with these arguments, nothing on stdin.
    pub fn of<I, S>(program: PathBuf, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Cmd {
            program,
            args: Vec::new(),
            stdin: Input::Bytes(Vec::new()),
            stdout: Sink::Captured,
            env: Vec::new(),
            cwd: None,
            data_limit: None,
            umask: None,
            extra_fds: Vec::new(),
            terminal: None,
            user: None,
            watchdog: WATCHDOG,
        }
        .args(args)
    }

    /// One more argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Cmd {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    /// More arguments.
    pub fn args<I, S>(mut self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// These bytes on stdin (written on a thread, so a child that never reads cannot block the
    /// test), then end of file.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Cmd {
        self.stdin = Input::Bytes(bytes.into());
        self
    }

    /// stdin is this file: a regular file, a directory, the slave side of a pty.
    pub fn stdin_file(mut self, file: File) -> Cmd {
        self.stdin = Input::File(file);
        self
    }

    /// stdin is a pipe nobody writes to and that stays open until the child has exited: the
    /// child waits for its request for as long as the test wants.
    pub fn stdin_held(mut self) -> Cmd {
        self.stdin = Input::Held;
        self
    }

    /// stdout is `/dev/full` (every write fails): the output reads as empty.
    pub fn stdout_dev_full(mut self) -> Cmd {
        self.stdout = Sink::DevFull;
        self
    }

    /// stdout is a pipe nobody reads, closed before the child starts (a reader that went
    /// away, as `| head -c0` does at once): the output reads as empty.
    pub fn stdout_closed_pipe(mut self) -> Cmd {
        self.stdout = Sink::ClosedPipe;
        self
    }

    /// An environment variable for the child.
    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Cmd {
        self.env.push((
            name.as_ref().to_os_string(),
            Some(value.as_ref().to_os_string()),
        ));
        self
    }

    /// A variable of the test's environment the child must not inherit.
    pub fn env_remove(mut self, name: impl AsRef<OsStr>) -> Cmd {
        self.env.push((name.as_ref().to_os_string(), None));
        self
    }

    /// The child's working directory.
    pub fn cwd(mut self, dir: impl AsRef<Path>) -> Cmd {
        self.cwd = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Cap the child's data segment (`RLIMIT_DATA`, which its own children inherit): a run
    /// that needs more memory fails instead of passing slowly.
    pub fn data_limit(mut self, bytes: u64) -> Cmd {
        self.data_limit = Some(bytes);
        self
    }

    /// The child's umask.
    pub fn umask(mut self, mask: u32) -> Cmd {
        self.umask = Some(mask);
        self
    }

    /// The child starts with `file` open as descriptor `fd` (≥ 3), not close-on-exec: a
    /// descriptor its host left open.
    pub fn inherit_fd(mut self, fd: i32, file: impl Into<OwnedFd>) -> Cmd {
        assert!(fd > 2, "an extra descriptor is 3 or more");
        self.extra_fds.push((fd, file.into()));
        self
    }

    /// The child runs in a new session with `terminal` (a pty's slave) as its controlling
    /// terminal, as under an operator's shell.
    pub fn controlling_terminal(mut self, terminal: impl Into<OwnedFd>) -> Cmd {
        self.terminal = Some(terminal.into());
        self
    }

    /// The child runs as `uid`:`gid` with no supplementary groups (the suite runs as root).
    pub fn user(mut self, uid: u32, gid: u32) -> Cmd {
        self.user = Some((uid, gid));
        self
    }

    /// Kill the child and fail the test when it has not exited (and closed its stdout and
    /// stderr) this long after it started.
    pub fn watchdog(mut self, limit: Duration) -> Cmd {
        self.watchdog = limit;
        self
    }

    /// Start the child: stdin is being fed, stdout and stderr are being read.
    pub fn spawn(self) -> Running {
        let shown = show_args(&self.program, &self.args);
        let mut command = Command::new(&self.program);
        command.args(&self.args).stderr(Stdio::piped());
        match self.stdout {
            Sink::Captured => command.stdout(Stdio::piped()),
            Sink::DevFull => command.stdout(File::create("/dev/full").expect("open /dev/full")),
            Sink::ClosedPipe => {
                let (reader, writer) = rustix::pipe::pipe().expect("pipe");
                drop(reader);
                command.stdout(Stdio::from(writer))
            }
        };
        if !self.env.iter().any(|(name, _)| name == BRIDGE_VAR) {
            command.env_remove(BRIDGE_VAR);
        }
        for (name, value) in &self.env {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        if let Some(dir) = &self.cwd {
            command.current_dir(dir);
        }
        if let Some(mask) = self.umask {
            use std::os::unix::process::CommandExt;
            // SAFETY: umask(2) is async-signal-safe and touches no memory; it is all that runs
            // between fork and exec.
            unsafe {
                command.pre_exec(move || {
                    rustix::process::umask(rustix::fs::Mode::from_raw_mode(mask));
                    Ok(())
                });
            }
        }
        if let Some((uid, gid)) = self.user {
            use std::os::unix::process::CommandExt;
            // std drops the supplementary groups when root sets a uid.
            command.uid(uid).gid(gid);
        }
        let extra: Vec<(i32, i32)> = self
            .extra_fds
            .iter()
            .map(|(at, fd)| (*at, std::os::fd::AsRawFd::as_raw_fd(fd)))
            .collect();
        let terminal = self.terminal.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
        if !extra.is_empty() || terminal.is_some() {
            use std::os::unix::process::CommandExt;
            // SAFETY: only async-signal-safe system calls on numbers between fork and exec.
            unsafe {
                command.pre_exec(move || {
                    for &(at, fd) in &extra {
                        // dup2 leaves the new descriptor without FD_CLOEXEC.
                        if libc::dup2(fd, at) < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    if let Some(fd) = terminal {
                        if libc::setsid() < 0 || libc::ioctl(fd, libc::TIOCSCTTY, 0) < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
        }
        let (bytes, held) = match self.stdin {
            Input::Bytes(bytes) => {
                command.stdin(Stdio::piped());
                (Some(bytes), false)
            }
            Input::File(file) => {
                command.stdin(Stdio::from(file));
                (None, false)
            }
            Input::Held => {
                command.stdin(Stdio::piped());
                (None, true)
            }
        };
        let start = Instant::now();
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {shown}: {e}"));
        // Dropped now, so that the child holds the only copy of a stdin file (a pty's slave).
        drop(command);
        drop(self.extra_fds);
        drop(self.terminal);
        let pidfd = rustix::process::pidfd_open(
            rustix::process::Pid::from_child(&child),
            rustix::process::PidfdFlags::empty(),
        )
        .expect("pidfd_open on the child");
        if let Some((uid, gid)) = self.user {
            // The child's stdout and stderr pipes belong to its user, as those of a shell
            // pipeline run by that user do. Done before the request is written: the
            // dispatcher starts nothing until it has read it.
            for pipe in [
                std::os::fd::AsFd::as_fd(child.stdout.as_ref().unwrap()),
                std::os::fd::AsFd::as_fd(child.stderr.as_ref().unwrap()),
            ] {
                rustix::fs::fchown(
                    pipe,
                    Some(rustix::fs::Uid::from_raw(uid)),
                    Some(rustix::fs::Gid::from_raw(gid)),
                )
                .expect("give the pipes to the child's user");
            }
        }
        if let Some(limit) = self.data_limit {
            // Set before the request is written: the dispatcher allocates nothing big until it
            // has read it.
            let rlimit = rustix::process::Rlimit {
                current: Some(limit),
                maximum: Some(limit),
            };
            rustix::process::prlimit(
                Some(rustix::process::Pid::from_child(&child)),
                rustix::process::Resource::Data,
                rlimit,
            )
            .expect("set RLIMIT_DATA");
        }
        let pipe = child.stdin.take();
        let (writer, held_stdin) = match (bytes, pipe) {
            (Some(bytes), Some(mut pipe)) => {
                // A child that stops reading gets a broken pipe: that is its business.
                let writer = std::thread::spawn(move || {
                    let _ = pipe.write_all(&bytes);
                });
                (Some(writer), None)
            }
            (None, pipe) if held => (None, pipe),
            _ => (None, None),
        };
        let stdout = match child.stdout.take() {
            Some(pipe) => read_all(pipe, start),
            None => {
                let (tx, rx) = mpsc::channel();
                let _ = tx.send((Vec::new(), None));
                rx
            }
        };
        let stderr = read_all(child.stderr.take().unwrap(), start);
        Running {
            child: Some(child),
            pidfd,
            start,
            shown,
            watchdog: self.watchdog,
            writer,
            held_stdin,
            stdout,
            stderr,
        }
    }

    /// Run the child to its end.
    pub fn run(self) -> Output {
        self.spawn().wait()
    }
}

/// What a reader thread hands back: the bytes, and when the first newline arrived.
type Read2 = (Vec<u8>, Option<Duration>);

/// Read `pipe` to its end on a thread of its own.
fn read_all(mut pipe: impl Read + Send + 'static, start: Instant) -> Receiver<Read2> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut first_line = None;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if first_line.is_none() && buf[..n].contains(&b'\n') {
                        first_line = Some(start.elapsed());
                    }
                    all.extend_from_slice(&buf[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = tx.send((all, first_line));
    });
    rx
}

/// The child while it runs.
pub struct Running {
    /// `None` once reaped.
    child: Option<Child>,
    pidfd: OwnedFd,
    start: Instant,
    shown: String,
    watchdog: Duration,
    writer: Option<JoinHandle<()>>,
    held_stdin: Option<ChildStdin>,
    stdout: Receiver<Read2>,
    stderr: Receiver<Read2>,
}

impl Running {
    /// The child's pid.
    pub fn pid(&self) -> rustix::process::Pid {
        rustix::process::Pid::from_child(self.child.as_ref().unwrap())
    }

    /// Send the child a signal (it is not reaped before [`Running::wait`], so its pid is still
    /// its own).
    pub fn signal(&self, signal: rustix::process::Signal) {
        rustix::process::pidfd_send_signal(&self.pidfd, signal)
            .unwrap_or_else(|e| panic!("signalling {}: {e}", self.shown));
    }

    /// How long ago the child was started.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Wait for the child to exit and its stdout and stderr to end, within the watchdog.
    pub fn wait(mut self) -> Output {
        let deadline = self.start + self.watchdog;
        if !self.exited_by(deadline) {
            self.kill();
            panic!(
                "{} was still running after {:?}; it was killed",
                self.shown, self.watchdog
            );
        }
        let status = self.child.take().unwrap().wait().expect("reap the child");
        let (stdout, first_line) = self.collect(&self.stdout, deadline, "stdout");
        let (stderr, _) = self.collect(&self.stderr, deadline, "stderr");
        let elapsed = self.start.elapsed();
        self.held_stdin.take();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
        use std::os::unix::process::ExitStatusExt;
        Output {
            shown: std::mem::take(&mut self.shown),
            exit: status.code().unwrap_or(-1),
            signal: status.signal(),
            stdout: String::from_utf8(stdout)
                .unwrap_or_else(|e| panic!("stdout is not UTF-8: {e}")),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            elapsed,
            first_line,
            stated: Stated::default(),
        }
    }

    /// Whether the child exited before `deadline` (it is not reaped here).
    fn exited_by(&self, deadline: Instant) -> bool {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let timeout = Timespec::try_from(left).expect("a watchdog fits a timespec");
            let mut fds = [PollFd::new(&self.pidfd, PollFlags::IN)];
            match poll(&mut fds, Some(&timeout)) {
                Ok(0) => return false,
                Ok(_) => return true,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => panic!("poll on the child's pidfd: {e}"),
            }
        }
    }

    fn collect(&self, rx: &Receiver<Read2>, deadline: Instant, name: &str) -> Read2 {
        let left = deadline.saturating_duration_since(Instant::now());
        rx.recv_timeout(left).unwrap_or_else(|_| {
            panic!(
                "{}: its {name} was still open {:?} after it started (a process it left \
                 behind holds it)",
                self.shown, self.watchdog
            )
        })
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Running {
    /// A test that failed while its child ran leaves nothing running.
    fn drop(&mut self) {
        self.kill();
    }
}

/// Which of the three a test has stated.
#[derive(Default)]
struct Stated {
    exit: Cell<bool>,
    stdout: Cell<bool>,
    stderr: Cell<bool>,
}

/// What a run did. Each of exit status, stdout and stderr is checked: by the test, or by the
/// strict default when the output is dropped (exit 0, empty stdout, empty stderr).
pub struct Output {
    shown: String,
    exit: i32,
    signal: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    first_line: Option<Duration>,
    stated: Stated,
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}\n  exit: {}", self.shown, self.exit)?;
        if let Some(signal) = self.signal {
            write!(f, " (signal {signal})")?;
        }
        write!(
            f,
            "\n  stdout: {}\n  stderr: {}",
            excerpt(&self.stdout),
            excerpt(&self.stderr)
        )
    }
}

impl Output {
    /// The exit status is `code` (-1: the child was killed by a signal).
    #[track_caller]
    pub fn exit(&self, code: i32) -> &Output {
        self.stated.exit.set(true);
        assert_eq!(self.exit, code, "exit status of {self:?}");
        self
    }

    /// The exit status, checked by the test itself (for tests that collect differences).
    pub fn exit_with(&self, check: impl FnOnce(i32)) -> &Output {
        self.stated.exit.set(true);
        check(self.exit);
        self
    }

    /// stdout is exactly `want`.
    #[track_caller]
    pub fn stdout_eq(&self, want: impl AsRef<str>) -> &Output {
        self.stated.stdout.set(true);
        assert_eq!(self.stdout, want.as_ref(), "stdout of {self:?}");
        self
    }

    /// stdout holds `needle`.
    #[track_caller]
    pub fn stdout_contains(&self, needle: impl AsRef<str>) -> &Output {
        self.stated.stdout.set(true);
        let needle = needle.as_ref();
        assert!(
            self.stdout.contains(needle),
            "{needle:?} not on stdout of {self:?}"
        );
        self
    }

    /// stdout does not hold `needle` (a secret, a host path).
    #[track_caller]
    pub fn stdout_lacks(&self, needle: impl AsRef<str>) -> &Output {
        self.stated.stdout.set(true);
        let needle = needle.as_ref();
        assert!(
            !self.stdout.contains(needle),
            "{needle:?} is on stdout of {self:?}"
        );
        self
    }

    /// Nothing on stdout.
    #[track_caller]
    pub fn stdout_empty(&self) -> &Output {
        self.stdout_eq("")
    }

    /// stdout is one JSON line (see [`json_line`](super::json_line)), which `check` examines.
    #[track_caller]
    pub fn stdout_json(&self, check: impl FnOnce(&Value)) -> &Output {
        check(&self.json());
        self
    }

    /// stdout, which must be one JSON line (see [`json_line`](super::json_line)), parsed.
    /// Calling this states stdout.
    #[track_caller]
    pub fn json(&self) -> Value {
        self.stated.stdout.set(true);
        if !(self.stdout.ends_with('\n') && self.stdout.matches('\n').count() == 1) {
            panic!("stdout is not one JSON line: {self:?}");
        }
        super::json_line(&self.stdout)
    }

    /// stdout, checked by the test itself.
    pub fn stdout_with(&self, check: impl FnOnce(&str)) -> &Output {
        self.stated.stdout.set(true);
        check(&self.stdout);
        self
    }

    /// stderr is exactly `want`.
    #[track_caller]
    pub fn stderr_eq(&self, want: impl AsRef<str>) -> &Output {
        self.stated.stderr.set(true);
        assert_eq!(self.stderr, want.as_ref(), "stderr of {self:?}");
        self
    }

    /// stderr holds `needle`.
    #[track_caller]
    pub fn stderr_contains(&self, needle: impl AsRef<str>) -> &Output {
        self.stated.stderr.set(true);
        let needle = needle.as_ref();
        assert!(
            self.stderr.contains(needle),
            "{needle:?} not on stderr of {self:?}"
        );
        self
    }

    /// stderr does not hold `needle`.
    #[track_caller]
    pub fn stderr_lacks(&self, needle: impl AsRef<str>) -> &Output {
        self.stated.stderr.set(true);
        let needle = needle.as_ref();
        assert!(
            !self.stderr.contains(needle),
            "{needle:?} is on stderr of {self:?}"
        );
        self
    }

    /// stderr begins with `prefix`.
    #[track_caller]
    pub fn stderr_starts_with(&self, prefix: impl AsRef<str>) -> &Output {
        self.stated.stderr.set(true);
        let prefix = prefix.as_ref();
        assert!(
            self.stderr.starts_with(prefix),
            "stderr does not begin with {prefix:?}: {self:?}"
        );
        self
    }

    /// Nothing on stderr.
    #[track_caller]
    pub fn stderr_empty(&self) -> &Output {
        self.stderr_eq("")
    }

    /// stderr, checked by the test itself.
    pub fn stderr_with(&self, check: impl FnOnce(&str)) -> &Output {
        self.stated.stderr.set(true);
        check(&self.stderr);
        self
    }

    /// The exit status, for bespoke assertions once all three are stated.
    #[track_caller]
    pub fn code(&self) -> i32 {
        self.require_stated("the exit status");
        self.exit
    }

    /// stdout, for bespoke assertions once all three are stated.
    #[track_caller]
    pub fn stdout(&self) -> &str {
        self.require_stated("stdout");
        &self.stdout
    }

    /// stderr, for bespoke assertions once all three are stated.
    #[track_caller]
    pub fn stderr(&self) -> &str {
        self.require_stated("stderr");
        &self.stderr
    }

    /// From the start to the exit and the end of both pipes.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// From the start to the first newline on stdout (the end of an envelope line).
    pub fn first_line_after(&self) -> Option<Duration> {
        self.first_line
    }

    /// The raw values without stating anything: for a builder layered on [`Cmd`] that makes
    /// its own checks and then says so with [`Output::stated_elsewhere`] (the [`Dispatch`]
    /// builder). Tests use the checks above, or [`Output::code`] and the like.
    ///
    /// [`Dispatch`]: super::super::Dispatch
    pub(crate) fn unchecked(&self) -> (i32, &str, &str) {
        (self.exit, &self.stdout, &self.stderr)
    }

    /// Mark what a builder layered on [`Cmd`] checked itself (the [`Dispatch`] builder's
    /// envelope line and `Run::expect`).
    ///
    /// [`Dispatch`]: super::super::Dispatch
    pub(crate) fn stated_elsewhere(&self, exit: bool, stdout: bool, stderr: bool) {
        let s = &self.stated;
        s.exit.set(s.exit.get() || exit);
        s.stdout.set(s.stdout.get() || stdout);
        s.stderr.set(s.stderr.get() || stderr);
    }

    #[track_caller]
    fn require_stated(&self, what: &str) {
        let s = &self.stated;
        let missing: Vec<&str> = [
            (s.exit.get(), "the exit status"),
            (s.stdout.get(), "stdout"),
            (s.stderr.get(), "stderr"),
        ]
        .into_iter()
        .filter_map(|(done, name)| (!done).then_some(name))
        .collect();
        assert!(
            missing.is_empty(),
            "state {} before taking {what} raw: {self:?}",
            missing.join(", ")
        );
    }
}

impl Drop for Output {
    /// The strict defaults for whatever the test did not state.
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let s = &self.stated;
        let mut wrong = Vec::new();
        if !s.exit.get() && self.exit != 0 {
            wrong.push(format!("exit status {} (not stated, so 0)", self.exit));
        }
        if !s.stdout.get() && !self.stdout.is_empty() {
            wrong.push("output on stdout (not stated, so none)".to_string());
        }
        if !s.stderr.get() && !self.stderr.is_empty() {
            wrong.push("output on stderr (not stated, so none)".to_string());
        }
        assert!(
            wrong.is_empty(),
            "{}; state what is expected with .exit(n), .stdout_…, .stderr_…: {self:?}",
            wrong.join(", ")
        );
    }
}

/// Arguments as a shell would show them, each shortened (bridges are long).
fn show_args(program: &Path, args: &[OsString]) -> String {
    let name = program.file_name().unwrap_or(program.as_os_str());
    let mut shown = name.to_string_lossy().into_owned();
    for arg in args {
        let arg = arg.to_string_lossy();
        let short: String = arg.chars().take(120).collect();
        let more = if short.len() < arg.len() { "…" } else { "" };
        shown.push_str(&format!(" {:?}", format!("{short}{more}")));
    }
    shown
}

/// `text` cut to a length a failure message can show.
pub(super) fn excerpt(text: &str) -> String {
    const MAX: usize = 4000;
    if text.len() <= MAX {
        return format!("{text:?}");
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}… ({} bytes)", &text[..end], text.len())
}
