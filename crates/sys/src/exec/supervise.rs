//! The I/O half of the supervisor: the dispatcher's ends of the adapter's three pipes, all
//! non-blocking, served from one `poll(2)` together with the adapter's pidfd and the signal
//! wake-up descriptor. No thread, no blocking read or write: a round never waits past the
//! deadline it is given.

use super::group::Pipes;
use super::sink::{HeadSink, Scratch, TailSink};
use super::{timespec, StdinError};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::io::Errno;
use std::io;
use std::time::{Duration, Instant};

/// The most written to stdin, or read from an output pipe, per call.
const CHUNK: usize = 64 * 1024;
/// Reads per output pipe per round, so that a fast writer cannot starve the deadline.
const READS_PER_ROUND: usize = 4;
/// The size asked for the adapter's stdout pipe (Linux's default limit for an unprivileged
/// process, `/proc/sys/fs/pipe-max-size`).
const STDOUT_PIPE_BYTES: usize = 1 << 20;

/// What a round of [`Io::poll_once`] saw besides the pipes.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Ready {
    /// The exit descriptor is readable: the adapter exited.
    pub(crate) exited: bool,
    /// The wake-up descriptor is readable: a signal arrived.
    pub(crate) signaled: bool,
    /// stdout went past its cap during this round (it is closed now).
    pub(crate) overflow: bool,
}

struct Feed {
    fd: OwnedFd,
    bytes: Vec<u8>,
    written: usize,
}

pub(crate) struct Io {
    stdin: Option<Feed>,
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
    pub(crate) out: HeadSink,
    pub(crate) err: TailSink,
    pub(crate) stdin_written: u64,
    pub(crate) stdin_error: Option<StdinError>,
    /// Also sees stderr as it arrives (`--verbose`).
    pub(crate) tap: Option<super::Tap>,
    /// Also sees stdout as it grows (the judge's prescan).
    pub(crate) watch: Option<super::Viewer>,
    buf: Scratch,
}

enum Drained {
    Open,
    Eof,
    Overflow,
}

impl Io {
    pub(crate) fn new(
        pipes: Pipes,
        stdin: Option<Vec<u8>>,
        max_stdout_bytes: u64,
        stderr_keep_bytes: usize,
    ) -> io::Result<Io> {
        let nonblocking = |fd: OwnedFd| -> io::Result<OwnedFd> {
            rustix::io::ioctl_fionbio(&fd, true)?;
            Ok(fd)
        };
        let feed = match (pipes.stdin, stdin) {
            (Some(pipe), Some(bytes)) if !bytes.is_empty() => Some(Feed {
                fd: nonblocking(pipe.into())?,
                bytes,
                written: 0,
            }),
            // Nothing to write: dropping the pipe gives the adapter EOF at once.
            _ => None,
        };
        let stdout: OwnedFd = pipes.stdout.into();
        // A larger pipe lets a large answer through in fewer rounds (fewer wake-ups of either
        // side); the default stays when the system's limit refuses it.
        let _ = rustix::pipe::fcntl_setpipe_size(&stdout, STDOUT_PIPE_BYTES);
        Ok(Io {
            stdin: feed,
            stdout: Some(nonblocking(stdout)?),
            stderr: Some(nonblocking(pipes.stderr.into())?),
            out: HeadSink::new(max_stdout_bytes),
            err: TailSink::new(stderr_keep_bytes),
            stdin_written: 0,
            stdin_error: None,
            tap: None,
            watch: None,
            buf: Scratch::new(CHUNK),
        })
    }

    /// stdout or stderr has not reached EOF yet.
    pub(crate) fn outputs_open(&self) -> bool {
        self.stdout.is_some() || self.stderr.is_some()
    }

    /// Stop feeding stdin (what was not written is dropped).
    pub(crate) fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Serve the pipes until stdout and stderr reached EOF or `until` passed.
    pub(crate) fn drain(&mut self, until: Instant) {
        while self.outputs_open() && Instant::now() < until {
            self.poll_once(None, None, until);
        }
    }

    /// One `poll(2)` over the open pipes and the given descriptors, waiting at most until
    /// `until`, then whatever I/O is ready.
    pub(crate) fn poll_once(
        &mut self,
        exit: Option<BorrowedFd<'_>>,
        wake: Option<BorrowedFd<'_>>,
        until: Instant,
    ) -> Ready {
        const EXIT: usize = 0;
        const WAKE: usize = 1;
        const STDIN: usize = 2;
        const STDOUT: usize = 3;
        const STDERR: usize = 4;
        let wanted: [(Option<BorrowedFd<'_>>, PollFlags); 5] = [
            (exit, PollFlags::IN),
            (wake, PollFlags::IN),
            (self.stdin.as_ref().map(|f| f.fd.as_fd()), PollFlags::OUT),
            (self.stdout.as_ref().map(AsFd::as_fd), PollFlags::IN),
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
        match poll(&mut fds, Some(&timespec(left))) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(_) => {
                // Out of kernel memory or the like: do not spin, let the caller's deadline act.
                std::thread::sleep(left.min(Duration::from_millis(1)));
                return Ready::default();
            }
        }
        let mut revents = [PollFlags::empty(); 5];
        for (i, &s) in slot.iter().enumerate() {
            if s != usize::MAX {
                revents[i] = fds[s].revents();
            }
        }
        drop(fds);

        let any = |r: PollFlags| !r.is_empty();
        let mut ready = Ready {
            exited: any(revents[EXIT]),
            signaled: any(revents[WAKE]),
            overflow: false,
        };
        if any(revents[STDIN]) {
            self.feed();
        }
        if any(revents[STDOUT]) {
            let before = self.out.kept().len();
            let drained = self.read_stdout();
            if let Some(watch) = &self.watch {
                if self.out.kept().len() > before && !self.out.overflowed() {
                    watch.0.grew(self.out.kept());
                }
            }
            match drained {
                Drained::Open => {}
                Drained::Eof => self.stdout = None,
                Drained::Overflow => {
                    // Stop reading: the adapter gets EPIPE and is being killed anyway.
                    self.stdout = None;
                    ready.overflow = true;
                }
            }
        }
        if any(revents[STDERR]) && !revents[STDERR].contains(PollFlags::IN) {
            // Hung up with nothing left in the pipe (a pipe is readable while it holds
            // anything): end of file, no read needed — and no buffer made for a run that
            // never wrote to stderr.
            self.stderr = None;
        } else if any(revents[STDERR]) {
            let (pipe, err, buf) = (&mut self.stderr, &mut self.err, &mut self.buf);
            let tap = self.tap.as_ref();
            let drained = read_some(pipe, buf.get(), |bytes| {
                err.push(bytes);
                if let Some(tap) = tap {
                    tap.0.chunk(bytes);
                }
                false
            });
            if matches!(drained, Drained::Eof) {
                *pipe = None;
            }
        }
        ready
    }

    /// Read what stdout holds (a few reads at most) straight into the kept head.
    fn read_stdout(&mut self) -> Drained {
        let Some(fd) = &self.stdout else {
            return Drained::Eof;
        };
        for _ in 0..READS_PER_ROUND {
            match self.out.read_from(fd.as_fd(), &mut self.buf) {
                Ok(0) => return Drained::Eof,
                Ok(_) if self.out.overflowed() => return Drained::Overflow,
                Ok(_) | Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => return Drained::Open,
                Err(_) => return Drained::Eof,
            }
        }
        Drained::Open
    }

    /// Write to stdin until the pipe is full, done, or broken. EPIPE (the adapter closed its
    /// stdin early) is normal and recorded as [`StdinError::BrokenPipe`].
    fn feed(&mut self) {
        let Some(feed) = &mut self.stdin else {
            return;
        };
        let outcome = loop {
            let end = feed.bytes.len().min(feed.written + CHUNK);
            match rustix::io::write(&feed.fd, &feed.bytes[feed.written..end]) {
                Ok(n) => {
                    feed.written += n;
                    if feed.written == feed.bytes.len() {
                        break Some(None);
                    }
                }
                Err(Errno::AGAIN) => break None,
                Err(Errno::INTR) => {}
                Err(Errno::PIPE) => break Some(Some(StdinError::BrokenPipe)),
                Err(err) => break Some(Some(StdinError::Other(io::Error::from(err).kind()))),
            }
        };
        self.stdin_written = feed.written as u64;
        if let Some(error) = outcome {
            // Done or broken: closing gives the adapter EOF and frees the request bytes.
            self.stdin_error = error;
            self.stdin = None;
        }
    }
}

/// Read what is there (a few chunks at most) from `pipe` into `sink`, which returns `true`
/// when it wants no more.
fn read_some(
    pipe: &Option<OwnedFd>,
    buf: &mut [u8],
    mut sink: impl FnMut(&[u8]) -> bool,
) -> Drained {
    let Some(fd) = pipe else {
        return Drained::Eof;
    };
    let mut reads = 0;
    while reads < READS_PER_ROUND {
        match rustix::io::read(fd, &mut *buf) {
            Ok(0) => return Drained::Eof,
            Ok(n) => {
                reads += 1;
                if sink(&buf[..n]) {
                    return Drained::Overflow;
                }
            }
            Err(Errno::AGAIN) => return Drained::Open,
            Err(Errno::INTR) => {}
            Err(_) => return Drained::Eof,
        }
    }
    Drained::Open
}
