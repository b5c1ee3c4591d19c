//! The kill ladder of SPEC §4.3 as a pure state machine: running → (deadline, signal) →
//! terminating (SIGTERM or the forwarded signal, then `kill_grace`) → killed (SIGKILL, then
//! [`KILL_WAIT`]) → given up. The supervisor feeds it events and carries out the actions; no
//! process is touched here, so every transition is unit-tested without one.
//!
//! It is the one ladder: [`run`](super::run) drives it from its `poll(2)` loop (deadline,
//! forwarded signals, the stdout cap); [`walk`] drives it for every other stop — the MCP
//! adapter's server shutdown, replay's watchdog on a child dispatcher,
//! [`ProcessGroup::terminate`](super::ProcessGroup::terminate) — through a [`Target`].

use std::time::{Duration, Instant};

use super::{Stop, KILL_WAIT};
use crate::signal::Signal;

/// What [`walk`] stops: a process (and its group) it can wait for and signal.
pub trait Target {
    /// Wait until `until` at most for the process to exit (serving its pipes meanwhile, if
    /// it has any); `true` once it has. May return early: the walk asks again.
    fn wait_exit(&mut self, until: Instant) -> bool;
    /// Send `sig` to it (to its group, where it leads one).
    fn signal(&mut self, sig: Signal);
    /// SIGKILL it and everything it started that can be reached.
    fn kill(&mut self);
}

/// Where a [`walk`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rung {
    /// It exited during the first wait, before any signal.
    Exited,
    /// It exited after SIGTERM, within the grace.
    Terminated,
    /// It exited after SIGKILL, within [`KILL_WAIT`].
    Killed,
    /// It had not exited [`KILL_WAIT`] after SIGKILL (stuck in the kernel): the walk stopped
    /// waiting for it.
    GaveUp,
}

/// Walk the ladder on `target` from now: wait up to `first` for it to exit (a timeout, or
/// the wait after closing its stdin), then SIGTERM and up to `grace`, then SIGKILL and up to
/// [`KILL_WAIT`]. Returns by `first + grace + KILL_WAIT`, plus the target's own overrun of a
/// wait.
pub fn walk(target: &mut impl Target, first: Duration, grace: Duration) -> Rung {
    let mut ladder = Ladder::new(Instant::now(), first, grace, KILL_WAIT);
    loop {
        if target.wait_exit(ladder.deadline()) {
            return ladder.rung();
        }
        let now = Instant::now();
        if now < ladder.deadline() {
            continue;
        }
        match ladder.on_deadline(now) {
            Action::Nothing => {}
            Action::Signal(sig) => target.signal(sig),
            Action::KillAll => target.kill(),
            Action::GiveUp => return Rung::GaveUp,
        }
    }
}

/// What the supervisor must do after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Nothing,
    /// Send this signal to the adapter's process group.
    Signal(Signal),
    /// SIGKILL the group and every descendant.
    KillAll,
    /// The adapter did not die within the wait after SIGKILL: stop waiting for it.
    GiveUp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    Terminating,
    Killed,
}

#[derive(Debug)]
pub(crate) struct Ladder {
    phase: Phase,
    deadline: Instant,
    stopped: Option<Stop>,
    grace: Duration,
    kill_wait: Duration,
}

impl Ladder {
    pub(crate) fn new(
        start: Instant,
        timeout: Duration,
        grace: Duration,
        kill_wait: Duration,
    ) -> Ladder {
        Ladder {
            phase: Phase::Running,
            deadline: start + timeout,
            stopped: None,
            grace,
            kill_wait,
        }
    }

    /// When [`on_deadline`](Self::on_deadline) is due.
    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Why the adapter was stopped, when it was; the first reason wins.
    pub(crate) fn stopped(&self) -> Option<Stop> {
        self.stopped
    }

    /// The rung reached: what an exit now is [`walk`]'s answer.
    fn rung(&self) -> Rung {
        match self.phase {
            Phase::Running => Rung::Exited,
            Phase::Terminating => Rung::Terminated,
            Phase::Killed => Rung::Killed,
        }
    }

    /// The current deadline passed.
    pub(crate) fn on_deadline(&mut self, now: Instant) -> Action {
        match self.phase {
            Phase::Running => {
                self.stopped.get_or_insert(Stop::Timeout);
                self.terminate(now);
                Action::Signal(Signal::TERM)
            }
            Phase::Terminating => self.kill(now),
            Phase::Killed => Action::GiveUp,
        }
    }

    /// stdout went past its cap.
    pub(crate) fn on_overflow(&mut self, now: Instant) -> Action {
        self.stopped.get_or_insert(Stop::OutputCap);
        match self.phase {
            Phase::Killed => Action::Nothing,
            Phase::Running | Phase::Terminating => self.kill(now),
        }
    }

    /// The dispatcher received `sig`: forward it, and start the grace period if not yet.
    pub(crate) fn on_signal(&mut self, sig: Signal, now: Instant) -> Action {
        self.stopped.get_or_insert(Stop::Interrupted(sig));
        match self.phase {
            Phase::Running => {
                self.terminate(now);
                Action::Signal(sig)
            }
            Phase::Terminating => Action::Signal(sig),
            // Nothing a signal could add to SIGKILL.
            Phase::Killed => Action::Nothing,
        }
    }

    fn terminate(&mut self, now: Instant) {
        self.phase = Phase::Terminating;
        self.deadline = now + self.grace;
    }

    fn kill(&mut self, now: Instant) -> Action {
        self.phase = Phase::Killed;
        self.deadline = now + self.kill_wait;
        Action::KillAll
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn ladder(t0: Instant) -> Ladder {
        Ladder::new(t0, 300 * MS, 200 * MS, 100 * MS)
    }

    #[test]
    fn timeout_then_grace_then_kill_then_give_up() {
        let t0 = Instant::now();
        let mut l = ladder(t0);
        assert_eq!(l.deadline(), t0 + 300 * MS);
        assert_eq!(l.stopped(), None);
        let t1 = l.deadline();
        assert_eq!(l.on_deadline(t1), Action::Signal(Signal::TERM));
        assert_eq!(l.stopped(), Some(Stop::Timeout));
        assert_eq!(l.deadline(), t1 + 200 * MS);
        let t2 = l.deadline();
        assert_eq!(l.on_deadline(t2), Action::KillAll);
        assert_eq!(l.deadline(), t2 + 100 * MS);
        assert_eq!(l.on_deadline(l.deadline()), Action::GiveUp);
        assert_eq!(l.stopped(), Some(Stop::Timeout));
    }

    #[test]
    fn the_whole_ladder_fits_the_spec_bound() {
        // timeout + grace + kill wait leaves room in the 250 ms for the sweep and pipes.
        let t0 = Instant::now();
        let mut l = ladder(t0);
        while l.on_deadline(l.deadline()) != Action::GiveUp {}
        assert!(l.deadline() <= t0 + (300 + 200 + 100) * MS);
    }

    #[test]
    fn a_signal_is_forwarded_and_starts_the_grace() {
        let t0 = Instant::now();
        let mut l = ladder(t0);
        let t1 = t0 + 50 * MS;
        assert_eq!(l.on_signal(Signal::INT, t1), Action::Signal(Signal::INT));
        assert_eq!(l.stopped(), Some(Stop::Interrupted(Signal::INT)));
        assert_eq!(l.deadline(), t1 + 200 * MS);
        // A second signal is forwarded too, but neither restarts the grace nor wins.
        assert_eq!(
            l.on_signal(Signal::HUP, t1 + 10 * MS),
            Action::Signal(Signal::HUP)
        );
        assert_eq!(l.deadline(), t1 + 200 * MS);
        assert_eq!(l.stopped(), Some(Stop::Interrupted(Signal::INT)));
        assert_eq!(l.on_deadline(l.deadline()), Action::KillAll);
        assert_eq!(l.on_signal(Signal::TERM, l.deadline()), Action::Nothing);
    }

    #[test]
    fn overflow_kills_at_once_and_only_once() {
        let t0 = Instant::now();
        let mut l = ladder(t0);
        let t1 = t0 + 10 * MS;
        assert_eq!(l.on_overflow(t1), Action::KillAll);
        assert_eq!(l.stopped(), Some(Stop::OutputCap));
        assert_eq!(l.deadline(), t1 + 100 * MS);
        assert_eq!(l.on_overflow(t1 + MS), Action::Nothing);
        assert_eq!(l.deadline(), t1 + 100 * MS, "the kill wait is not extended");
    }

    /// A process that exits once it has been sent `exits_after` actions (never: `usize::MAX`).
    struct Fake {
        sent: Vec<&'static str>,
        exits_after: usize,
    }

    impl Target for Fake {
        fn wait_exit(&mut self, until: Instant) -> bool {
            if self.sent.len() >= self.exits_after {
                return true;
            }
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
            false
        }
        fn signal(&mut self, sig: Signal) {
            assert_eq!(sig, Signal::TERM);
            self.sent.push("TERM");
        }
        fn kill(&mut self) {
            self.sent.push("KILL");
        }
    }

    #[test]
    fn walk_climbs_until_the_target_exits() {
        for (exits_after, rung, sent) in [
            (0, Rung::Exited, &[][..]),
            (1, Rung::Terminated, &["TERM"][..]),
            (2, Rung::Killed, &["TERM", "KILL"][..]),
            (usize::MAX, Rung::GaveUp, &["TERM", "KILL"][..]),
        ] {
            let mut fake = Fake {
                sent: Vec::new(),
                exits_after,
            };
            let start = Instant::now();
            assert_eq!(walk(&mut fake, 20 * MS, 20 * MS), rung);
            assert_eq!(fake.sent, sent);
            if rung == Rung::GaveUp {
                // first + grace + KILL_WAIT, each waited in full.
                assert!(start.elapsed() >= 40 * MS + KILL_WAIT);
            }
        }
    }

    #[test]
    fn the_first_reason_wins() {
        let t0 = Instant::now();
        let mut l = ladder(t0);
        l.on_deadline(l.deadline());
        l.on_overflow(t0 + 310 * MS);
        l.on_signal(Signal::TERM, t0 + 320 * MS);
        assert_eq!(l.stopped(), Some(Stop::Timeout));
    }
}
