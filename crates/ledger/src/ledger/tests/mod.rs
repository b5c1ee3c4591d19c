//! The ledger's tests: the rules of [`decide`] (`decide.rs`), the rules on a real store
//! (`store.rs`), approvals (`approvals.rs`, `approvals_store.rs`), the audit chain
//! (`audit.rs`), pruning (`prune.rs`), many real processes on one ledger (`processes.rs`, the
//! test binary re-invoked on its ignored `worker` test) — the tests on a store run on SQLite
//! and PostgreSQL alike through `both!` — then what only the SQLite file has (`sqlite.rs`,
//! which lists the SQLite-only tests and why) and what only PostgreSQL has (`pg.rs`). Here:
//! what they share.

use super::*;
use std::path::PathBuf;

mod approvals;
mod approvals_store;
mod audit;
mod decide;
mod pg;
mod processes;
mod prune;
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
        checkpoint: None,
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

/// Which store a test of the shared suite runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Backend {
    /// A new SQLite file in a temporary folder.
    Sqlite,
    /// A new database of the process's throwaway PostgreSQL cluster (`ptd_sys::pgtest`),
    /// migrated.
    Postgres,
}

/// A fresh ledger of one backend: open it as many times (connections) as a test needs.
pub(super) struct Db {
    _dir: Option<tempfile::TempDir>,
    pub(super) location: Location,
    /// `location` as `--ledger` spells it, for a worker process.
    pub(super) spelled: String,
}

/// The environment that gives the test cluster's password.
pub(super) fn pg_env() -> ptd_sys::hostenv::HostEnv {
    let password = ptd_sys::pgtest::cluster()
        .map(|c| c.password.clone())
        .unwrap_or_default();
    ptd_sys::hostenv::HostEnv::with([("PGPASSWORD".to_string(), password)])
}

impl Db {
    /// A new ledger; `None` (the skip reported) when PostgreSQL is asked for and this host
    /// cannot run it.
    pub(super) fn new(backend: Backend) -> Option<Db> {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("ledger.db");
                Some(Db {
                    _dir: Some(dir),
                    spelled: path.display().to_string(),
                    location: Location::File(path),
                })
            }
            Backend::Postgres => {
                if let Err(unmet) = ptd_sys::skip::postgres() {
                    ptd_sys::skip::report(&unmet);
                    return None;
                }
                let spelled = ptd_sys::pgtest::fresh_database();
                let location = Location::parse(&spelled).unwrap();
                migrate(&location, &pg_env(), soon()).unwrap();
                Some(Db {
                    _dir: None,
                    location,
                    spelled,
                })
            }
        }
    }

    /// A new connection to it, for the main job.
    pub(super) fn open(&self) -> Ledger {
        Ledger::open_at(&self.location, &pg_env(), soon()).unwrap()
    }

    /// A new read-only connection to it, as `audit` and `approvals` open it.
    pub(super) fn reader(&self) -> Ledger {
        Ledger::open_existing_at(&self.location, &pg_env(), soon()).unwrap()
    }

    /// `audit verify` of it, through a reader.
    pub(super) fn verify(&self) -> Verification {
        self.reader().verify().unwrap()
    }

    /// `audit verify`'s record count and head, which must be intact.
    #[track_caller]
    pub(super) fn intact(&self) -> (u64, String) {
        match self.verify() {
            Verification::Intact { records, head } => (records, head),
            other => panic!("{other:?}"),
        }
    }

    /// The SQLite file, for the tests whose subject is the file itself.
    pub(super) fn path(&self) -> &Path {
        match &self.location {
            Location::File(path) => path,
            other => panic!("not a file: {other:?}"),
        }
    }
}

/// The test `$name(backend: Backend)` of the shared suite, run as `$name::sqlite` and
/// `$name::postgres` (skipped, and said so, where PostgreSQL cannot run).
macro_rules! both {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[test]
            fn sqlite() {
                super::$name(super::Backend::Sqlite);
            }
            #[test]
            fn postgres() {
                super::$name(super::Backend::Postgres);
            }
        }
    )+};
}
pub(super) use both;
