//! The MCP server as a child process on the stdio transport: started in its own process group
//! ([`ProcessGroup`]), fed lines on stdin, read line by line on stdout, its stderr passed on
//! to the adapter's own, and shut down along the MCP stdio order.
//!
//! Owns the pipes and the process, nothing of JSON-RPC. Invariants:
//! - no call blocks past the deadline it is given: the three pipes are non-blocking and served
//!   from one `poll(2)` with the server's pidfd and the signal wake-up descriptor, so a server
//!   that never reads its stdin or floods stderr cannot stall the adapter;
//! - memory is bounded whatever the server writes: a line longer than the message cap is
//!   reported as soon as the cap is passed and never buffered beyond it (at most one read
//!   chunk besides), and at most one read's worth of complete lines waits to be taken;
//! - stderr is forwarded to the adapter's stderr up to [`MAX_STDERR_FORWARD_BYTES`], then
//!   counted and dropped (a note says how much); the last [`STDERR_TAIL_BYTES`] are kept for
//!   the adapter's own message when the server dies;
//! - [`Server::shutdown`] always walks the ladder — stdin closed, a wait, SIGTERM to the group,
//!   a wait, SIGKILL — while it keeps draining both output pipes (a server blocked writing
//!   must still be able to exit), then sweeps and reaps everything the server left; if the
//!   adapter unwinds instead, `ProcessGroup`'s drop kills and sweeps.

use ptd_sys::exec::{
    self, timespec, Launch, ProcessGroup, Rung, SpawnError, Target, Termination, EOF_WAIT,
    SWEEP_BUDGET,
};
use ptd_sys::interrupt::Interrupts;
use ptd_sys::signal::Signal;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::io::Errno;
use std::collections::VecDeque;
use std::io::Write;
use std::time::{Duration, Instant};

/// The most read from a pipe, or written to stdin, per call.
const CHUNK: usize = 64 * 1024;
/// Reads per output pipe per round, so that a fast writer cannot starve the deadline.
const READS_PER_ROUND: usize = 4;
/// How long stdout may stay open after the server exited (a descendant holding it) before
/// the exit is reported anyway.
const EOF_AFTER_EXIT: Duration = Duration::from_millis(200);
/// How long the server may take to exit once it closed its stdout, before that is reported
/// as a closed stdout rather than an exit.
const EXIT_AFTER_EOF: Duration = Duration::from_millis(100);
/// The most of the server's stderr passed on to the adapter's stderr; the rest is counted.
pub const MAX_STDERR_FORWARD_BYTES: usize = 1 << 20;
/// The end of the server's stderr kept for the adapter's own messages.
pub const STDERR_TAIL_BYTES: usize = 4 * 1024;

/// What [`Server::next`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Event {
    /// One line of stdout, without its newline (blank lines are skipped).
    Line(Vec<u8>),
    /// A line went past the message cap: reading stopped there.
    Oversized,
    /// The server has nothing more to say.
    Ended(Ending),
    /// `until` passed.
    Deadline,
    /// The adapter received this signal.
    Interrupted(Signal),
}

/// How the server stopped talking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// It exited (or was killed).
    Exited(Termination),
    /// It closed its stdout and is still running.
    StdoutClosed,
}

/// How the ladder ended, for a note on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// The server exited when its stdin closed (or had exited already).
    StdinClosed,
    /// It needed SIGTERM.
    Terminated,
    /// It needed SIGKILL.
    Killed,
}

/// What [`Server::shutdown`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shutdown {
    pub step: Step,
    pub termination: Termination,
    /// Processes the server left behind, all killed.
    pub leaked_processes: usize,
}

/// The running server.
pub(super) struct Server {
    group: ProcessGroup,
    stdin: Option<OwnedFd>,
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
    outbox: Vec<u8>,
    written: usize,
    lines: LineReader,
    errlog: StderrLog,
    exited: Option<(Termination, Instant)>,
    buf: Vec<u8>,
}

impl Server {
    /// Start `argv` (argv[0] through `PATH` when it has no slash) with exactly `env`, in the
    /// adapter's working directory; lines on stdout longer than `max_line_bytes` are refused.
    pub(super) fn spawn(
        argv: &[String],
        env: &[(String, String)],
        max_line_bytes: usize,
        confinement: Option<&std::sync::Arc<ptd_sys::confine::Prepared>>,
    ) -> Result<Server, SpawnError> {
        let program = ptd_sys::exec::resolve_program(&argv[0]);
        let launch = Launch {
            program: &program,
            argv,
            env,
            cwd: None,
            stdin: true,
            confinement,
        };
        let (group, pipes) = ProcessGroup::spawn(&launch)?;
        let nonblocking = |fd: OwnedFd| -> Result<OwnedFd, SpawnError> {
            rustix::io::ioctl_fionbio(&fd, true)
                .map_err(|err| SpawnError::Other(std::io::Error::from(err).kind()))?;
            Ok(fd)
        };
        Ok(Server {
            stdin: pipes
                .stdin
                .map(OwnedFd::from)
                .map(nonblocking)
                .transpose()?,
            stdout: Some(nonblocking(pipes.stdout.into())?),
            stderr: Some(nonblocking(pipes.stderr.into())?),
            group,
            outbox: Vec::new(),
            written: 0,
            lines: LineReader::new(max_line_bytes),
            errlog: StderrLog::default(),
            exited: None,
            buf: vec![0; CHUNK],
        })
    }

    /// Queue one message (a line without its newline) for the server's stdin and write what
    /// the pipe takes now; the rest goes out while [`next`](Self::next) waits. Dropped when
    /// the server closed its stdin.
    pub(super) fn send(&mut self, message: &str) {
        if self.stdin.is_none() {
            return;
        }
        self.outbox.extend_from_slice(message.as_bytes());
        self.outbox.push(b'\n');
        self.flush();
    }

    /// The last bytes of the server's stderr, as text.
    pub(super) fn stderr_tail(&self) -> String {
        String::from_utf8_lossy(&self.errlog.tail).into_owned()
    }

    /// Wait for the next line of stdout, or for the server to end, a signal, or `until`.
    pub(super) fn next(&mut self, until: Instant, interrupts: &Interrupts) -> Event {
        loop {
            if let Some(line) = self.lines.pop() {
                return Event::Line(line);
            }
            if self.lines.oversized {
                return Event::Oversized;
            }
            if let Some(sig) = interrupts.received() {
                return Event::Interrupted(sig);
            }
            let now = Instant::now();
            if self.stdout.is_none() {
                self.await_exit(now + EXIT_AFTER_EOF);
                return Event::Ended(match self.exited {
                    Some((termination, _)) => Ending::Exited(termination),
                    None => Ending::StdoutClosed,
                });
            }
            let mut wait = until;
            if let Some((termination, at)) = self.exited {
                if now >= at + EOF_AFTER_EXIT {
                    return Event::Ended(Ending::Exited(termination));
                }
                wait = wait.min(at + EOF_AFTER_EXIT);
            }
            if now >= until {
                return Event::Deadline;
            }
            self.serve_once(wait, interrupts.wake_fd(), Lines::Keep);
        }
    }

    /// Shut the server down: close its stdin and wait up to `close_wait` for it to exit, then
    /// SIGTERM to its group and up to `term_grace`, then SIGKILL; then kill and reap whatever
    /// it left behind. Both output pipes are drained throughout (stdout is discarded).
    pub(super) fn shutdown(mut self, close_wait: Duration, term_grace: Duration) -> Shutdown {
        self.stdin = None;
        self.outbox.clear();
        // exec's one ladder, its first wait being the one after closing stdin.
        let step = match exec::walk(&mut self, close_wait, term_grace) {
            Rung::Exited => Step::StdinClosed,
            Rung::Terminated => Step::Terminated,
            Rung::Killed | Rung::GaveUp => Step::Killed,
        };
        let Server {
            group,
            stdout,
            stderr,
            mut errlog,
            mut buf,
            ..
        } = self;
        let swept = group.finish(Instant::now() + SWEEP_BUDGET);
        // Everything that could hold the pipes is dead: the last of stderr follows at once.
        drop(stdout);
        let mut stderr = stderr;
        let until = Instant::now() + EOF_WAIT;
        while let Some(fd) = &stderr {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let mut fds = [PollFd::new(fd, PollFlags::IN)];
            let _ = poll(&mut fds, Some(&timespec(left)));
            if !read_some(fd, &mut buf, |bytes| errlog.push(bytes)) {
                stderr = None;
            }
        }
        errlog.finish();
        Shutdown {
            step,
            termination: swept.termination,
            leaked_processes: swept.leaked_processes,
        }
    }

    /// Serve the pipes until the server exited or `until` passed (stdout discarded);
    /// returns whether it exited.
    fn await_exit(&mut self, until: Instant) -> bool {
        loop {
            if self.exited.is_none() {
                if let Some(termination) = self.group.try_exit() {
                    self.exited = Some((termination, Instant::now()));
                }
            }
            if self.exited.is_some() {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            self.serve_once(until, None, Lines::Discard);
        }
    }

    /// One `poll(2)` over the open pipes, the exit descriptor and `wake`, then whatever I/O is
    /// ready.
    fn serve_once(&mut self, until: Instant, wake: Option<BorrowedFd<'_>>, lines: Lines) {
        // Slot 1 is the wake-up descriptor: it only ends the wait; the caller reads the flags.
        const EXIT: usize = 0;
        const STDIN: usize = 2;
        const STDOUT: usize = 3;
        const STDERR: usize = 4;
        let pending = self.written < self.outbox.len();
        let reading = !self.lines.oversized || lines == Lines::Discard;
        let wanted: [(Option<BorrowedFd<'_>>, PollFlags); 5] = [
            (
                self.exited.is_none().then(|| self.group.exit_fd()),
                PollFlags::IN,
            ),
            (wake, PollFlags::IN),
            (
                self.stdin.as_ref().filter(|_| pending).map(AsFd::as_fd),
                PollFlags::OUT,
            ),
            (
                self.stdout.as_ref().filter(|_| reading).map(AsFd::as_fd),
                PollFlags::IN,
            ),
            (self.stderr.as_ref().map(AsFd::as_fd), PollFlags::IN),
        ];
        let mut fds = Vec::with_capacity(wanted.len());
        let mut slot = [usize::MAX; 5];
        for (i, (fd, flags)) in wanted.into_iter().enumerate() {
            if let Some(fd) = fd {
                slot[i] = fds.len();
                fds.push(PollFd::from_borrowed_fd(fd, flags));
            }
        }
        let left = until.saturating_duration_since(Instant::now());
        if let Err(err) = poll(&mut fds, Some(&timespec(left))) {
            if err != Errno::INTR {
                // Out of kernel memory or the like: do not spin; the caller's deadline acts.
                std::thread::sleep(left.min(Duration::from_millis(1)));
                return;
            }
        }
        let mut ready = [false; 5];
        for (i, &s) in slot.iter().enumerate() {
            if s != usize::MAX {
                ready[i] = !fds[s].revents().is_empty();
            }
        }
        drop(fds);
        if ready[EXIT] {
            if let Some(termination) = self.group.try_exit() {
                self.exited = Some((termination, Instant::now()));
            }
        }
        if ready[STDIN] {
            self.flush();
        }
        if ready[STDOUT] {
            let open = match (&self.stdout, lines) {
                (Some(fd), Lines::Keep) => {
                    let reader = &mut self.lines;
                    read_some(fd, &mut self.buf, |bytes| reader.push(bytes))
                }
                (Some(fd), Lines::Discard) => read_some(fd, &mut self.buf, |_| {}),
                (None, _) => false,
            };
            if !open {
                self.stdout = None;
                self.lines.finish();
            }
        }
        if ready[STDERR] {
            if let Some(fd) = &self.stderr {
                let errlog = &mut self.errlog;
                if !read_some(fd, &mut self.buf, |bytes| errlog.push(bytes)) {
                    self.stderr = None;
                }
            }
        }
    }

    /// Write queued bytes until the pipe is full or the queue empty. A broken pipe (the server
    /// closed its stdin) drops the queue: the server's end, or its silence, tells the rest.
    fn flush(&mut self) {
        let Some(fd) = &self.stdin else {
            return;
        };
        while self.written < self.outbox.len() {
            let end = self.outbox.len().min(self.written + CHUNK);
            match rustix::io::write(fd, &self.outbox[self.written..end]) {
                Ok(n) => self.written += n,
                Err(Errno::AGAIN) => return,
                Err(Errno::INTR) => {}
                Err(_) => {
                    self.stdin = None;
                    break;
                }
            }
        }
        self.outbox.clear();
        self.written = 0;
    }
}

/// The ladder acts on the server's group while its pipes are served (a server blocked
/// writing must still be able to exit).
impl Target for Server {
    fn wait_exit(&mut self, until: Instant) -> bool {
        self.await_exit(until)
    }

    fn signal(&mut self, sig: Signal) {
        let _ = self.group.signal(sig);
    }

    fn kill(&mut self) {
        self.group.kill();
    }
}

/// What to do with stdout lines while serving the pipes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lines {
    Keep,
    Discard,
}

/// Read what is there (a few chunks at most) from `fd` into `sink`; `false` at EOF or on an
/// error that ends the stream.
fn read_some(fd: &OwnedFd, buf: &mut [u8], mut sink: impl FnMut(&[u8])) -> bool {
    for _ in 0..READS_PER_ROUND {
        match rustix::io::read(fd, &mut *buf) {
            Ok(0) => return false,
            Ok(n) => sink(&buf[..n]),
            Err(Errno::AGAIN) => return true,
            Err(Errno::INTR) => {}
            Err(_) => return false,
        }
    }
    true
}

/// Splits stdout into lines, refusing one longer than `max` without keeping more of it.
#[derive(Debug)]
struct LineReader {
    partial: Vec<u8>,
    lines: VecDeque<Vec<u8>>,
    max: usize,
    /// A line went past `max`: nothing more is taken.
    oversized: bool,
}

impl LineReader {
    fn new(max: usize) -> LineReader {
        LineReader {
            partial: Vec::new(),
            lines: VecDeque::new(),
            max,
            oversized: false,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        while !self.oversized && !bytes.is_empty() {
            let (piece, rest, ended) = match bytes.iter().position(|&b| b == b'\n') {
                Some(at) => (&bytes[..at], &bytes[at + 1..], true),
                None => (bytes, &bytes[bytes.len()..], false),
            };
            if self.partial.len() + piece.len() > self.max {
                self.oversized = true;
                self.partial = Vec::new();
                return;
            }
            self.partial.extend_from_slice(piece);
            if ended {
                self.take_partial();
            }
            bytes = rest;
        }
    }

    /// At EOF, an unterminated last line still counts.
    fn finish(&mut self) {
        if !self.oversized {
            self.take_partial();
        }
    }

    fn take_partial(&mut self) {
        let line = std::mem::take(&mut self.partial);
        // Blank lines (a stray `\n`, or `\r\n` framing) carry no message.
        if !line.iter().all(|b| b" \t\r".contains(b)) {
            self.lines.push_back(line);
        }
    }

    fn pop(&mut self) -> Option<Vec<u8>> {
        self.lines.pop_front()
    }
}

/// The server's stderr: passed on to the adapter's stderr (`out`) up to a cap, its end kept.
#[derive(Debug)]
struct StderrLog<W = std::io::Stderr> {
    forwarded: usize,
    dropped: u64,
    tail: Vec<u8>,
    out: W,
    /// `out` is a terminal: each line is shown escaped ([`ptd_wire::terminal::escape`]), line
    /// breaks kept.
    escape: bool,
    /// With `escape`: the start of a line not ended yet (at most [`HELD_LINE_BYTES`]), so that a
    /// character cut between two reads is shown whole.
    held: ptd_wire::terminal::HeldLines,
}

/// The longest piece of one stderr line held back before it is shown escaped.
const HELD_LINE_BYTES: usize = 4096;

impl Default for StderrLog {
    fn default() -> Self {
        use std::io::IsTerminal;
        let out = std::io::stderr();
        let escape = out.is_terminal();
        StderrLog {
            escape,
            ..StderrLog::to(out)
        }
    }
}

impl<W: Write> StderrLog<W> {
    fn to(out: W) -> Self {
        StderrLog {
            forwarded: 0,
            dropped: 0,
            tail: Vec::new(),
            out,
            escape: false,
            held: ptd_wire::terminal::HeldLines::default(),
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = MAX_STDERR_FORWARD_BYTES - self.forwarded;
        let (now, later) = bytes.split_at(room.min(bytes.len()));
        if !now.is_empty() {
            // The adapter's stderr is the dispatcher's pipe (drained, redacted and escaped
            // there) or, run by hand (`--list-tools`), a terminal: there the server's bytes
            // must not drive it (ESC sequences, bidi controls), so each line is escaped.
            self.pass_on(now);
            self.forwarded += now.len();
        }
        self.dropped += later.len() as u64;
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > 2 * STDERR_TAIL_BYTES {
            let cut = self.tail.len() - STDERR_TAIL_BYTES;
            self.tail.drain(..cut);
        }
    }

    /// Write `bytes` to `out`: as they are, or with `escape` a line at a time, escaped.
    fn pass_on(&mut self, bytes: &[u8]) {
        if !self.escape {
            let _ = self.out.write_all(bytes);
            return;
        }
        let out = &mut self.out;
        self.held.push(bytes, HELD_LINE_BYTES, |line, whole| {
            let shown = ptd_wire::terminal::escape(&String::from_utf8_lossy(line)).into_owned();
            let _ = if whole {
                writeln!(out, "{shown}")
            } else {
                write!(out, "{shown}")
            };
        });
    }

    fn finish(&mut self) {
        let rest = self.held.take();
        if !rest.is_empty() {
            let _ = write!(
                self.out,
                "{}",
                ptd_wire::terminal::escape(&String::from_utf8_lossy(&rest))
            );
        }
        if self.tail.len() > STDERR_TAIL_BYTES {
            let cut = self.tail.len() - STDERR_TAIL_BYTES;
            self.tail.drain(..cut);
        }
        if self.dropped > 0 {
            let _ = writeln!(
                self.out,
                "\nadapter mcp: {} more bytes of the MCP server's stderr were not shown",
                self.dropped
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_across_reads_and_blank_ones_skipped() {
        let mut r = LineReader::new(100);
        r.push(b"{\"a\":");
        r.push(b"1}\n\n  \r\n{\"b\"");
        r.push(b":2}\r\n{\"c\":3}");
        assert_eq!(r.pop(), Some(b"{\"a\":1}".to_vec()));
        assert_eq!(r.pop(), Some(b"{\"b\":2}\r".to_vec()));
        assert_eq!(r.pop(), None);
        r.finish();
        assert_eq!(r.pop(), Some(b"{\"c\":3}".to_vec()));
    }

    #[test]
    fn a_line_over_the_cap_is_refused_without_keeping_it() {
        let mut r = LineReader::new(10);
        r.push(b"0123456789\n");
        assert_eq!(r.pop(), Some(b"0123456789".to_vec()));
        r.push(b"01234567");
        r.push(b"890");
        assert!(r.oversized);
        assert!(
            r.partial.capacity() == 0,
            "nothing of the long line is kept"
        );
        r.push(b"\nmore\n");
        assert_eq!(r.pop(), None, "nothing is read after an oversized line");
    }

    #[test]
    fn the_stderr_tail_keeps_the_end() {
        // Into a buffer, not the test's own stderr: a passing test prints nothing.
        let mut log = StderrLog::to(Vec::new());
        for _ in 0..10 {
            log.push(&[b'a'; 1000]);
        }
        log.push(b"END");
        log.finish();
        assert_eq!(log.tail.len(), STDERR_TAIL_BYTES);
        assert!(log.tail.ends_with(b"aEND"));
        // Under the cap everything is passed on, and no note of dropped bytes follows.
        let mut want = vec![b'a'; 10_000];
        want.extend_from_slice(b"END");
        assert_eq!(log.out, want);
    }

    #[test]
    fn past_the_cap_the_stderr_is_dropped_and_counted() {
        let mut log = StderrLog::to(Vec::new());
        log.push(&vec![b'x'; MAX_STDERR_FORWARD_BYTES - 1]);
        log.push(b"yz");
        log.finish();
        let mut want = vec![b'x'; MAX_STDERR_FORWARD_BYTES - 1];
        want.extend_from_slice(
            b"y\nadapter mcp: 1 more bytes of the MCP server's stderr were not shown\n",
        );
        assert!(
            log.out == want,
            "{:?}",
            String::from_utf8_lossy(&log.out[log.out.len() - 80..])
        );
        assert!(log.tail.ends_with(b"xyz"));
    }

    #[test]
    fn on_a_terminal_the_servers_stderr_is_escaped_line_by_line() {
        let hostile = b"plain\n\x1b[2J\x1b]0;title\x07red\r\xe2\x80\xaeevil\n";
        let mut log = StderrLog::to(Vec::new());
        log.escape = true;
        // In pieces that cut a character and a line; the last line has no newline.
        let (first, rest) = hostile.split_at(hostile.len() - 7);
        log.push(first);
        log.push(rest);
        log.push("caf\u{e9}".as_bytes().split_at(4).0);
        log.push("caf\u{e9}".as_bytes().split_at(4).1);
        log.finish();
        assert_eq!(
            String::from_utf8(log.out).unwrap(),
            "plain\n\\x1b[2J\\x1b]0;title\\x07red\\r\\u{202e}evil\ncaf\u{e9}"
        );
        // The tail keeps the raw bytes (the adapter's own messages escape what they quote).
        assert!(log.tail.ends_with("evil\ncaf\u{e9}".as_bytes()));
        // Not a terminal (the dispatcher's pipe): passed on as it is.
        let mut raw = StderrLog::to(Vec::new());
        raw.push(hostile);
        assert_eq!(raw.out, hostile);
    }
}
