//! SIGINT, SIGTERM and SIGHUP to the dispatcher (SPEC §4.3).
//!
//! While the main job runs, these signals do not kill the dispatcher: they are recorded, and a
//! byte is written to a wake-up pipe, so that whoever waits in `poll(2)` (the adapter
//! supervisor in `exec`) wakes at once, forwards them to the adapter's process group, and the
//! dispatcher can still print its `interrupted` envelope and leave nothing running.
//!
//! Invariants:
//! - the dispositions are installed once per process, by [`Interrupts::install`]; nothing here
//!   runs per call, and there is no listener thread;
//! - the signal handlers only store to atomics and `write(2)` one byte to a non-blocking pipe
//!   (signal-hook's async-signal-safe building blocks); all the rest happens in normal code;
//! - a signal's flag is set before its wake-up byte is written, so a reader that drains the
//!   pipe and then reads the flags never misses one.
//!
//! It owns no process handling itself.

use crate::signal::Signal;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The signals taken over, in the order their flags are read.
const HANDLED: [Signal; 3] = [Signal::HUP, Signal::INT, Signal::TERM];

#[derive(Default)]
struct Inner {
    /// One flag per handled signal: set by the handler, cleared by [`Interrupts::take_pending`].
    flags: Vec<(Signal, Arc<AtomicBool>)>,
    /// The number of the first signal seen (0: none yet). Never cleared.
    first: AtomicI32,
    /// Read end of the wake-up pipe (non-blocking); readable once a signal arrived.
    wake: Option<OwnedFd>,
}

/// The dispatcher's record of termination signals.
#[derive(Clone, Default)]
pub struct Interrupts {
    inner: Arc<Inner>,
}

impl Interrupts {
    /// Take over SIGINT, SIGTERM and SIGHUP for the rest of the process. If the wake-up pipe
    /// cannot be created the default dispositions stay (the dispatcher still works, it just
    /// cannot report an interruption).
    pub fn install() -> Interrupts {
        match Self::try_install() {
            Ok(inner) => Interrupts {
                inner: Arc::new(inner),
            },
            Err(_) => Interrupts::none(),
        }
    }

    fn try_install() -> std::io::Result<Inner> {
        use rustix::pipe::{pipe_with, PipeFlags};
        // Allocate every descriptor first: once a handler is registered it stays, so nothing
        // may fail after the first registration.
        let (read, write) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        let mut writers = Vec::with_capacity(HANDLED.len());
        for _ in HANDLED {
            writers.push(write.try_clone()?);
        }
        drop(write);
        let mut flags = Vec::with_capacity(HANDLED.len());
        for (sig, writer) in HANDLED.into_iter().zip(writers) {
            let flag = Arc::new(AtomicBool::new(false));
            // signal-hook runs a signal's actions in registration order: flag, then byte.
            signal_hook::flag::register(sig.raw(), Arc::clone(&flag))?;
            signal_hook::low_level::pipe::register(sig.raw(), writer)?;
            flags.push((sig, flag));
        }
        Ok(Inner {
            flags,
            first: AtomicI32::new(0),
            wake: Some(read),
        })
    }

    /// A record that never receives anything (for `replay` and tests).
    pub fn none() -> Interrupts {
        Interrupts::default()
    }

    /// The first signal received, if any.
    pub fn received(&self) -> Option<Signal> {
        if let Some(sig) = self.first() {
            return Some(sig);
        }
        let arrived = self
            .inner
            .flags
            .iter()
            .find(|(_, flag)| flag.load(Ordering::SeqCst))
            .map(|&(sig, _)| sig)?;
        self.note_first(arrived);
        self.first()
    }

    /// The signals that arrived since the last call (each at most once, however often it
    /// was sent), emptying the wake-up pipe. [`received`](Self::received) still reports
    /// the first one afterwards.
    pub(crate) fn take_pending(&self) -> Vec<Signal> {
        if let Some(wake) = &self.inner.wake {
            let mut buf = [0u8; 64];
            // Drain before reading the flags: a byte written after this point belongs to a
            // flag that is set after it, which the next call sees.
            while matches!(rustix::io::read(wake, &mut buf), Ok(n) if n > 0) {}
        }
        let pending: Vec<Signal> = self
            .inner
            .flags
            .iter()
            .filter(|(_, flag)| flag.swap(false, Ordering::SeqCst))
            .map(|&(sig, _)| sig)
            .collect();
        if let Some(&sig) = pending.first() {
            self.note_first(sig);
        }
        pending
    }

    /// A descriptor that becomes readable when a signal arrives (until
    /// [`take_pending`](Self::take_pending) empties it); `None` when nothing is installed.
    pub fn wake_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.wake.as_ref().map(|fd| fd.as_fd())
    }

    /// Block until a signal has been received or `timeout` passed; returns the first signal.
    pub fn wait(&self, timeout: Duration) -> Option<Signal> {
        if let Some(sig) = self.received() {
            return Some(sig);
        }
        let wake = self.wake_fd()?;
        let timeout = rustix::event::Timespec::try_from(timeout).ok();
        let mut fds = [PollFd::from_borrowed_fd(wake, PollFlags::IN)];
        let _ = poll(&mut fds, timeout.as_ref());
        self.received()
    }

    fn first(&self) -> Option<Signal> {
        Signal::from_raw(self.inner.first.load(Ordering::SeqCst))
    }

    fn note_first(&self, sig: Signal) {
        let _ = self
            .inner
            .first
            .compare_exchange(0, sig.raw(), Ordering::SeqCst, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_reports_nothing_and_has_no_wake_fd() {
        let interrupts = Interrupts::none();
        assert_eq!(interrupts.received(), None);
        assert!(interrupts.take_pending().is_empty());
        assert!(interrupts.wake_fd().is_none());
        assert_eq!(interrupts.wait(Duration::from_millis(1)), None);
    }

    #[test]
    fn pending_flags_are_taken_once_and_the_first_stays() {
        // The handler's half, by hand: a flag and a wake-up byte.
        let (read, write) = rustix::pipe::pipe_with(
            rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
        )
        .unwrap();
        let flags: Vec<_> = HANDLED
            .iter()
            .map(|&sig| (sig, Arc::new(AtomicBool::new(false))))
            .collect();
        let interrupts = Interrupts {
            inner: Arc::new(Inner {
                flags: flags.clone(),
                first: AtomicI32::new(0),
                wake: Some(read),
            }),
        };
        flags[2].1.store(true, Ordering::SeqCst);
        rustix::io::write(&write, b"X").unwrap();
        assert_eq!(interrupts.wait(Duration::from_secs(5)), Some(Signal::TERM));
        assert_eq!(interrupts.take_pending(), vec![Signal::TERM]);
        assert!(interrupts.take_pending().is_empty());

        flags[1].1.store(true, Ordering::SeqCst);
        rustix::io::write(&write, b"X").unwrap();
        assert_eq!(interrupts.take_pending(), vec![Signal::INT]);
        assert_eq!(
            interrupts.received(),
            Some(Signal::TERM),
            "the first signal wins"
        );
        // The pipe was drained: nothing wakes a waiter now.
        let mut fds = [PollFd::from_borrowed_fd(
            interrupts.wake_fd().unwrap(),
            PollFlags::IN,
        )];
        assert_eq!(poll(&mut fds, Some(&Default::default())).unwrap(), 0);
    }
}
