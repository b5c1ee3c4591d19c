//! The lease of a running call kept fresh on a PostgreSQL ledger (SPEC §19.1), while the
//! adapter runs: a thread of its own, with a connection of its own.
//!
//! Must not: decide anything of the ledger's rules, or outlive the call (it stops when
//! dropped).

use super::gate::{Gate, Options};
use ptd_ledger::{self as ledger, Ledger};
use std::time::Instant;

/// A running call's lease kept fresh on a PostgreSQL ledger (SPEC §19.1): a thread with a
/// connection of its own renews the hold every third of `lease_ttl`, so that dispatchers on
/// other hosts count this one alive while its adapter runs; it stops when dropped. An SQLite
/// ledger needs none (a holder on this host is judged by its process).
pub(super) struct Heartbeat {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    /// Start one for `gate`'s held key, when its ledger is PostgreSQL.
    pub(super) fn start(
        options: &Options,
        gate: &Gate,
        env: &ptd_sys::hostenv::HostEnv,
    ) -> Option<Heartbeat> {
        if !matches!(options.location, ledger::Location::Postgres(_)) {
            return None;
        }
        let (key, lease) = gate.holding()?;
        let (key, lease) = (key.clone(), lease.clone());
        let location = options.location.clone();
        let env = env.clone();
        let period = options.lease_ttl / 3;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("ptd-heartbeat".into())
            .spawn(move || {
                let mut ledger: Option<Ledger> = None;
                // Until the call ends (the sender dropped): renew, then wait a period.
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(period)
                {
                    let deadline = Instant::now() + period;
                    if ledger.is_none() {
                        ledger = Ledger::open_at(&location, &env, deadline).ok();
                    }
                    let renewed = ledger.as_mut().map(|l| l.renew(&key, &lease));
                    match renewed {
                        // Lost the key (another took it over after a stale heartbeat): stop.
                        Some(Ok(false)) => return,
                        // Try a fresh connection next time.
                        Some(Err(_)) => ledger = None,
                        _ => {}
                    }
                }
            })
            .ok()?;
        Some(Heartbeat {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
