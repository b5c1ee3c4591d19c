//! The ledger's tests: the rules of [`decide`] (`decide.rs`), the rules on a real SQLite
//! file (`store.rs`), approvals (`approvals.rs`), the audit chain (`audit.rs`), the file and SQLite's use of it
//! (`sqlite.rs`), and many real processes on one ledger (`processes.rs`, the test binary
//! re-invoked on its ignored `worker` test). Here: what they share.

use super::*;
use std::path::PathBuf;

mod approvals;
mod approvals_store;
mod audit;
mod decide;
mod processes;
mod sqlite;
mod store;

/// A [`Ledger::wait`] pause that sleeps and never stops waiting.
pub(super) fn sleep(pause: Duration) -> bool {
    std::thread::sleep(pause);
    true
}

pub(super) fn soon() -> Instant {
    Instant::now() + Duration::from_secs(20)
}

pub(super) fn key(request_id: &str) -> Key {
    Key {
        bridge_ref: "sha256:bridge".into(),
        session_id: "s1".into(),
        request_id: request_id.into(),
    }
}

pub(super) fn record(key: &Key, decision: Verdict, rule: &str, status: &str) -> AuditRecord {
    AuditRecord {
        time_ms: now_ms(),
        bridge_ref: key.bridge_ref.clone(),
        session_id: key.session_id.clone(),
        request_id: key.request_id.clone(),
        tool: "workspace.read".into(),
        operation: "call".into(),
        request_digest: "d".into(),
        attempt: 1,
        decision,
        rule: Rule::parse(rule).unwrap(),
        policy: None,
        approval: None,
        status: Name::new(status).unwrap(),
        code: None,
        duration_ms: 3,
        adapter_ms: Some(2),
        exit_status: 0,
        resources: Resources::default(),
        transcript_ref: Some("t-1.json".into()),
        envelope_sha256: None,
        session_key: None,
        network: None,
        admitted: false,
    }
}

pub(super) fn outcome(envelope: &str, retryable: bool) -> Outcome<'_> {
    Outcome {
        envelope,
        exit_status: if retryable { 69 } else { 0 },
        retryable,
        adapter_ms: 5,
    }
}

pub(super) fn call<'a>(key: &'a Key, digest: &'a str, budgets: &'a Budgets) -> Call<'a> {
    Call {
        key,
        digest,
        tool: "workspace.read",
        budgets,
        ask: None,
    }
}

pub(super) fn ledger_in(dir: &Path) -> (PathBuf, Ledger) {
    let path = dir.join("ledger.db");
    let ledger = Ledger::open(&path, soon()).unwrap();
    (path, ledger)
}

/// A lease of a process that is certainly gone: this process's pid with another start time.
pub(super) fn dead_lease() -> Lease {
    let me = Lease::current().unwrap();
    Lease {
        start_ticks: me.start_ticks + 12345,
        ..me
    }
}

pub(super) fn snapshot(row: Option<CallRow>) -> Snapshot {
    Snapshot {
        row,
        calls: 0,
        tool_calls: 0,
        adapter_ms: 0,
        running: Vec::new(),
        approval: None,
        session_grant: None,
    }
}

pub(super) fn row(state: CallState, digest: &str) -> CallRow {
    CallRow {
        digest: digest.into(),
        state,
        attempt: 2,
        lease: dead_lease(),
        outcome: Some(Recorded {
            envelope: "{}".into(),
            exit_status: 0,
        }),
    }
}

/// `audit verify` of the ledger at `path`.
pub(super) fn verify(path: &Path) -> Verification {
    Ledger::open_existing(path, soon())
        .unwrap()
        .verify()
        .unwrap()
}
