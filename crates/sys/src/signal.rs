//! [`Signal`]: a signal as the dispatcher receives, forwards, sends and reports it — one type
//! from the handler to the envelope, never a bare number — and its name for messages and
//! diagnostics (`SIGTERM`, not `15`).

use std::num::NonZeroI32;

/// A signal number the kernel can deliver or report (1 to 64, real-time ones included).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Signal(NonZeroI32);

impl Signal {
    pub const HUP: Signal = Signal::named(libc::SIGHUP);
    pub const INT: Signal = Signal::named(libc::SIGINT);
    pub const KILL: Signal = Signal::named(libc::SIGKILL);
    pub const TERM: Signal = Signal::named(libc::SIGTERM);

    /// The highest signal number Linux has.
    const MAX: i32 = 64;

    const fn named(raw: i32) -> Signal {
        match NonZeroI32::new(raw) {
            Some(raw) => Signal(raw),
            None => panic!("signal numbers are not zero"),
        }
    }

    /// The signal numbered `raw`, if there is one.
    pub fn from_raw(raw: i32) -> Option<Signal> {
        if !(1..=Signal::MAX).contains(&raw) {
            return None;
        }
        NonZeroI32::new(raw).map(Signal)
    }

    /// Its number.
    pub const fn raw(self) -> i32 {
        self.0.get()
    }

    /// `SIGTERM` for 15, and so on; `signal N` for the rest.
    pub fn name(self) -> String {
        let name = match self.raw() {
            libc::SIGHUP => "SIGHUP",
            libc::SIGINT => "SIGINT",
            libc::SIGQUIT => "SIGQUIT",
            libc::SIGILL => "SIGILL",
            libc::SIGABRT => "SIGABRT",
            libc::SIGBUS => "SIGBUS",
            libc::SIGFPE => "SIGFPE",
            libc::SIGKILL => "SIGKILL",
            libc::SIGSEGV => "SIGSEGV",
            libc::SIGPIPE => "SIGPIPE",
            libc::SIGALRM => "SIGALRM",
            libc::SIGTERM => "SIGTERM",
            libc::SIGUSR1 => "SIGUSR1",
            libc::SIGUSR2 => "SIGUSR2",
            libc::SIGXFSZ => "SIGXFSZ",
            sig => return format!("signal {sig}"),
        };
        name.to_string()
    }

    /// rustix's type for sending it: only the named (non-real-time) signals, which are all
    /// the dispatcher ever sends.
    pub(crate) fn to_rustix(self) -> Option<rustix::process::Signal> {
        rustix::process::Signal::from_named_raw(self.raw())
    }
}

impl std::fmt::Debug for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl From<Signal> for i32 {
    fn from(sig: Signal) -> i32 {
        sig.raw()
    }
}

/// The name of `sig` (see [`Signal::name`]), for a signal or a raw number.
pub fn signal_name(sig: impl Into<i32>) -> String {
    let raw = sig.into();
    match Signal::from_raw(raw) {
        Some(sig) => sig.name(),
        None => format!("signal {raw}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_named_and_numbered() {
        assert_eq!(Signal::TERM.raw(), libc::SIGTERM);
        assert_eq!(Signal::TERM.name(), "SIGTERM");
        assert_eq!(Signal::from_raw(9), Some(Signal::KILL));
        assert_eq!(
            Signal::from_raw(34).map(Signal::name).as_deref(),
            Some("signal 34")
        );
        assert_eq!(Signal::from_raw(0), None);
        assert_eq!(Signal::from_raw(65), None);
        assert_eq!(Signal::from_raw(-15), None);
        assert_eq!(signal_name(Signal::HUP), "SIGHUP");
        assert_eq!(signal_name(libc::SIGINT), "SIGINT");
        assert_eq!(signal_name(99), "signal 99");
        assert_eq!(format!("{:?}", Signal::KILL), "SIGKILL");
        assert_eq!(
            Signal::TERM.to_rustix(),
            Some(rustix::process::Signal::TERM)
        );
        assert_eq!(Signal::from_raw(40).and_then(Signal::to_rustix), None);
    }
}
