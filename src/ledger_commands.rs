//! `audit verify` and `audit export` (SPEC §14.3), and `ledger backup` (SPEC §14.4).
//!
//! `verify` prints one JSON object — `{"intact":true,"records":N,"head":HASH}` (exit 0) or
//! `{"intact":false,"records_intact":K,"first_bad":{"seq":S,"reason":R}}` (exit 1, with an
//! `error[audit_chain_broken]` line on stderr), or — every record intact, but a budget counter
//! not what the records imply (SPEC §14.4) — `{"intact":false,"records_intact":N,
//! "counter":{"name":C,"reason":R}}` (exit 1, with `error[audit_counter_mismatch]`). `export` prints one JSON object per record
//! (JSON Lines) and stops with exit 1 at a record it cannot read. A ledger that cannot be
//! opened is `error[ledger_unavailable]` on stderr, nothing on stdout, exit 69. Output that
//! cannot be written is `error[stdout]` and exit 74, as for every command (`stdout.rs`).
//! Neither creates a ledger, and neither writes to one: the ledger is opened read-only
//! ([`Ledger::open_existing`]), no file is made beside it, and any user who can read the file
//! may run them (SPEC §14.4).

use crate::cli::{AuditCommand, LedgerCommand};
use crate::ledger_open::{reading, LOCK_WAIT, READS};
use ptd_ledger::{audit, BackupError, Ledger, LedgerError, Verification};
use ptd_wire::error::exit;
use ptd_wire::stdout;
use ptd_wire::terminal::error_line;
use serde_json::json;
use std::io::Write;
use std::time::Instant;

/// What `audit verify` and `audit export` print, as a lost write names it.
const REPORT: &str = "the audit report";
const EXPORT: &str = "the audit records";

/// `ledger migrate`: the schema made or brought up to date; `{"from":…,"to":…}` on stdout.
fn migrate(args: &crate::cli::LedgerMigrateArgs) -> u8 {
    let env = ptd_sys::hostenv::HostEnv::process();
    let done = ptd_ledger::Location::of_path(&args.ledger)
        .and_then(|l| ptd_ledger::migrate(&l, &env, Instant::now() + LOCK_WAIT));
    match done {
        Ok(report) => {
            let line = serde_json::json!({"from": report.from, "to": report.to});
            ptd_wire::stdout::print(
                format!("{line}\n").as_bytes(),
                "the migration report",
                exit::SUCCESS,
            )
        }
        Err(err) => {
            stderr_line!("{}", error_line(err.code(), &err.to_string()));
            exit::UNAVAILABLE
        }
    }
}

/// `ledger restore`: a PostgreSQL backup loaded; `{"rows":N}` on stdout.
fn restore(args: &crate::cli::LedgerRestoreArgs) -> u8 {
    let env = ptd_sys::hostenv::HostEnv::process();
    let done = ptd_ledger::Location::of_path(&args.ledger)
        .and_then(|l| ptd_ledger::restore(&l, &env, &args.file, Instant::now() + LOCK_WAIT));
    match done {
        Ok(rows) => {
            let line = serde_json::json!({ "rows": rows });
            ptd_wire::stdout::print(
                format!("{line}\n").as_bytes(),
                "the restore report",
                exit::SUCCESS,
            )
        }
        Err(err) => {
            stderr_line!("{}", error_line(err.code(), &err.to_string()));
            exit::UNAVAILABLE
        }
    }
}

/// Run `audit …`; returns the exit status.
pub(crate) fn main(command: &AuditCommand) -> u8 {
    let (path, since, filter) = match command {
        AuditCommand::Verify(args) => return verify(|| reading(&args.ledger)),
        AuditCommand::Stats(args) => return crate::ledger_status::stats(args),
        AuditCommand::Export(args) => {
            let records = &args.records;
            (&records.ledger, records.since.unwrap_or(0), &records.filter)
        }
    };
    match reading(path) {
        Ok(mut ledger) => export(&mut ledger, since, &filter.filter()),
        Err(err) => {
            stderr_line!("{}", error_line(err.code(), &err.to_string()));
            exit::UNAVAILABLE
        }
    }
}

fn verify(open: impl Fn() -> Result<Ledger, LedgerError>) -> u8 {
    let mut read = 0;
    let outcome = loop {
        read += 1;
        match open().and_then(|mut ledger| ledger.verify()) {
            Err(LedgerError::ChangedWhileRead) if read < READS => {}
            done => break done,
        }
    };
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(err) => {
            stderr_line!("{}", error_line(err.code(), &err.to_string()));
            return exit::UNAVAILABLE;
        }
    };
    match outcome {
        Verification::Intact { records, head } => {
            let report = json!({"intact": true, "records": records, "head": head});
            stdout::print(format!("{report}\n").as_bytes(), REPORT, exit::SUCCESS)
        }
        Verification::Broken { intact, at } => {
            let report = json!({"intact": false, "records_intact": intact,
                                "first_bad": {"seq": at.seq, "reason": at.reason}});
            if let Err(lost) = stdout::write(format!("{report}\n").as_bytes(), REPORT) {
                return lost;
            }
            stderr_line!(
                "{}",
                error_line(
                    "audit_chain_broken",
                    &format!("record {}: {}", at.seq, at.reason)
                )
            );
            exit::FAILED
        }
        Verification::Miscounted {
            records,
            counter,
            reason,
        } => {
            let report = json!({"intact": false, "records_intact": records,
                                "counter": {"name": counter, "reason": reason}});
            if let Err(lost) = stdout::write(format!("{report}\n").as_bytes(), REPORT) {
                return lost;
            }
            stderr_line!(
                "{}",
                error_line(
                    "audit_counter_mismatch",
                    &format!("budget counter of {counter}: {reason}")
                )
            );
            exit::FAILED
        }
    }
}

fn export(ledger: &mut Ledger, since: u64, filter: &ptd_ledger::Filter) -> u8 {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut failure: Option<String> = None;
    let mut lost: Option<std::io::Error> = None;
    let scanned = ledger.scan(since, &mut |row| {
        let line = ptd_ledger::stats::read(row)
            .map_err(|at| format!("record {}: {}", at.seq, at.reason))
            .and_then(|(row, record)| {
                if !filter.matches(&record) {
                    return Ok(None);
                }
                audit::export_line(&row)
                    .map(Some)
                    .map_err(|reason| format!("record {}: {reason}", row.seq))
            });
        let line = match line {
            Ok(None) => return true,
            Ok(Some(line)) => line,
            Err(message) => {
                failure = Some(message);
                return false;
            }
        };
        match writeln!(out, "{line}") {
            Ok(()) => true,
            Err(err) => {
                lost = Some(err);
                false
            }
        }
    });
    let flushed = out.flush();
    if let Some(err) = lost.or(flushed.err()) {
        return stdout::failed(EXPORT, &err);
    }
    if let Err(err) = scanned {
        stderr_line!("{}", error_line(err.code(), &err.to_string()));
        return exit::UNAVAILABLE;
    }
    if let Some(message) = failure {
        stderr_line!("{}", error_line("audit_unreadable", &message));
        return exit::FAILED;
    }
    exit::SUCCESS
}

/// Run `ledger …`; returns the exit status.
///
/// `backup` prints nothing and exits 0 once the copy is in place; an existing destination is
/// `error[destination_exists]` and exit 2 (left as it is), a ledger that cannot be read
/// `error[ledger_unavailable]` and 69, a copy that cannot be written `error[backup_failed]`
/// and 74.
pub(crate) fn ledger(command: &LedgerCommand) -> u8 {
    let args = match command {
        LedgerCommand::Backup(args) => args,
        LedgerCommand::Migrate(args) => return migrate(args),
        LedgerCommand::Restore(args) => return restore(args),
        LedgerCommand::Status(args) => return crate::ledger_status::status(args),
        LedgerCommand::Prune(args) => return crate::ledger_status::prune(args),
    };
    let mut read = 0;
    let done = loop {
        read += 1;
        let backed_up = reading(&args.ledger)
            .map_err(BackupError::from)
            .and_then(|mut ledger| ledger.backup(&args.dest));
        match backed_up {
            Err(BackupError::Ledger(LedgerError::ChangedWhileRead)) if read < READS => {}
            done => break done,
        }
    };
    let (code, status) = match &done {
        Ok(()) => return exit::SUCCESS,
        Err(BackupError::Exists) => ("destination_exists", exit::USAGE),
        Err(BackupError::Write(_)) => ("backup_failed", exit::IO_ERROR),
        Err(BackupError::Ledger(err)) => (err.code(), exit::UNAVAILABLE),
    };
    if let Err(err) = done {
        stderr_line!("{}", error_line(code, &err.to_string()));
    }
    status
}
