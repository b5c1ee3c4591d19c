//! Opening the ledger a command names (`--ledger`: a file, or a PostgreSQL URL, SPEC §19.1)
//! for the commands that read or write it outside the main job: `audit`, `ledger` and
//! `approvals`.
//!
//! Must not: decide anything of the ledger's rules; print.

use ptd_ledger::{Ledger, LedgerError};
use std::time::{Duration, Instant};

/// How long `audit` waits for a ledger locked by writers (reads do not wait in WAL; opening
/// may, while another process recovers the WAL after a crash).
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(30);

/// The ledger `path` names (a file, or a PostgreSQL URL: SPEC §19.1), opened only to read it.
pub(crate) fn reading(path: &std::path::Path) -> Result<Ledger, LedgerError> {
    let location = ptd_ledger::Location::of_path(path)?;
    let env = ptd_sys::hostenv::HostEnv::process();
    Ledger::open_existing_at(&location, &env, Instant::now() + LOCK_WAIT)
}

/// The ledger `path` names, opened to write it (a file is made if missing).
pub(crate) fn writing(path: &std::path::Path) -> Result<Ledger, LedgerError> {
    let location = ptd_ledger::Location::of_path(path)?;
    let env = ptd_sys::hostenv::HostEnv::process();
    Ledger::open_at(&location, &env, Instant::now() + LOCK_WAIT)
}

/// How often `verify` reads a ledger again that changed while it was read without SQLite's
/// locks (the writer made a WAL: the next read uses it).
pub(crate) const READS: usize = 3;
