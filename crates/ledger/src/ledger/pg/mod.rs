//! The [`Store`] on PostgreSQL (SPEC §19.1): the only place besides `sqlite/` that knows what
//! the ledger is stored in.
//!
//! - **Correctness from the database.** Every step of [`Store`] is ONE transaction at
//!   `SERIALIZABLE`, run again when PostgreSQL answers a serialization failure (40001), a
//!   deadlock (40P01) or a unique violation of a racing insert (23505), until the deadline
//!   ([`LedgerError::Locked`] past it, as SQLite's busy timeout). Keys are unique by their
//!   primary key (`INSERT … ON CONFLICT`), counters and the audit chain's head are rows the
//!   transactions read and write, so two dispatchers on two hosts cannot both start a key,
//!   overspend a budget or fork the chain.
//! - **A versioned schema.** `ptd_ledger_meta` holds [`SCHEMA_VERSION`]; only [`migrate`]
//!   creates or changes the schema. Opening a database without it, or with another version,
//!   is refused with [`LedgerError::Schema`], which names the command that migrates.
//! - **Leases across hosts.** A call row keeps its holder's heartbeat (`heartbeat_ms`),
//!   written when it is claimed and by [`Store::renew`]; a holder on another host (another
//!   boot id) is alive while its heartbeat is younger than the ledger's `lease_ttl`.
//! - **Nothing leaks the password**: it goes into the client's configuration only, and the
//!   client's errors never carry it.

use super::audit::{Break, StoredRecord};
use super::location::{Password, PgUrl};
use super::{
    Approval, ApprovalError, ApprovalFilter, AuditRecord, BackupError, Call, CallRow, Claim,
    Decision, Durability, Finished, Key, Lease, LedgerError, Outcome, Settle, Snapshot, Store,
    StoredVisit, Usage,
};
use postgres::error::SqlState;
use postgres::{Client, IsolationLevel, Transaction};
use std::path::Path;
use std::time::{Duration, Instant};

mod export;
mod prune;
mod rows;
mod schema;
mod tls;

pub(crate) use export::restore;
use prune::*;
use rows::*;
pub(crate) use schema::{migrate, SCHEMA_VERSION};

/// The pause before a transaction that lost a race is run again (doubling, at most
/// [`MAX_RETRY_PAUSE`]).
const RETRY_PAUSE: Duration = Duration::from_millis(2);
const MAX_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// The ledger on PostgreSQL.
pub(crate) struct PgStore {
    client: Client,
    deadline: Instant,
    /// [`Durability::Normal`]: every write transaction commits with `synchronous_commit =
    /// off` (the server answers before its WAL is flushed).
    durability: Durability,
}

/// A PostgreSQL error as a [`LedgerError`]: lock and statement timeouts are
/// [`LedgerError::Locked`]; the message is the server's (never the password).
pub(crate) fn db(err: postgres::Error) -> LedgerError {
    match err.code() {
        Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE || *c == SqlState::QUERY_CANCELED => {
            LedgerError::Locked
        }
        Some(c) if is_race(c) => LedgerError::Conflict,
        _ => LedgerError::Database(message(&err)),
    }
}

/// The server's message for `err` (the client's own `Display` says only "db error").
fn message(err: &postgres::Error) -> String {
    match err.as_db_error() {
        Some(e) => format!("{} ({})", e.message(), e.code().code()),
        None => err.to_string(),
    }
}

/// A transaction that lost a race with another and may be run again.
fn is_race(code: &SqlState) -> bool {
    *code == SqlState::T_R_SERIALIZATION_FAILURE
        || *code == SqlState::T_R_DEADLOCK_DETECTED
        || *code == SqlState::UNIQUE_VIOLATION
}

/// A connection's failure: [`LedgerError::Unreachable`] when the server could not be reached,
/// refused the connection, or cannot take it now (starting up, too many connections) — the
/// retryable case of SPEC §19.1; else [`LedgerError::Connect`] (a wrong password, a missing
/// database, TLS refused).
fn connect_error(err: &postgres::Error) -> LedgerError {
    let busy = err.code().is_some_and(|c| {
        *c == SqlState::CANNOT_CONNECT_NOW
            || *c == SqlState::TOO_MANY_CONNECTIONS
            || *c == SqlState::ADMIN_SHUTDOWN
            || *c == SqlState::CRASH_SHUTDOWN
    });
    let io = std::error::Error::source(err).is_some_and(|s| s.is::<std::io::Error>());
    if busy || (err.code().is_none() && (io || err.to_string().contains("timeout"))) {
        LedgerError::Unreachable(message(err))
    } else {
        LedgerError::Connect(message(err))
    }
}

/// A client connected to `url` with `password`, giving up at `deadline`.
pub(crate) fn connect(
    url: &PgUrl,
    password: Option<&Password>,
    deadline: Instant,
) -> Result<Client, LedgerError> {
    let (tls, mode) = tls::connector(url)?;
    // A unix socket carries no TLS (libpq's rule too); `check_host` refused the modes that
    // would need it.
    let mode = if url.is_socket() {
        postgres::config::SslMode::Disable
    } else {
        mode
    };
    let mut config = postgres::Config::new();
    config
        .user(&url.user)
        .host(&url.host)
        .port(url.port)
        .dbname(&url.dbname)
        .ssl_mode(mode)
        .application_name(
            url.application_name
                .as_deref()
                .unwrap_or("parent-tool-dispatch"),
        );
    let left = deadline.saturating_duration_since(Instant::now());
    let timeout = match url.connect_timeout {
        Some(t) if !t.is_zero() => t.min(left),
        _ => left,
    };
    config.connect_timeout(timeout.max(Duration::from_millis(1)));
    if let Some(password) = password {
        config.password(&password.0);
    }
    config.connect(tls).map_err(|e| connect_error(&e))
}

impl PgStore {
    /// Open the ledger in the database at `url`: its schema must be [`SCHEMA_VERSION`]
    /// (nothing is created or changed here: [`migrate`] does that).
    pub(crate) fn open(
        url: &PgUrl,
        password: Option<&Password>,
        deadline: Instant,
    ) -> Result<PgStore, LedgerError> {
        let mut client = connect(url, password, deadline)?;
        schema::check(&mut client, url)?;
        Ok(PgStore {
            client,
            deadline,
            durability: Durability::Full,
        })
    }

    /// Run `step` in one SERIALIZABLE transaction (read only when `read_only`), again while it
    /// loses a race, until the deadline. A step's error rolls its transaction back.
    fn serializable<T>(
        &mut self,
        read_only: bool,
        mut step: impl FnMut(&mut Transaction<'_>) -> Result<T, LedgerError>,
    ) -> Result<T, LedgerError> {
        let mut pause = RETRY_PAUSE;
        loop {
            let (deadline, durability) = (self.deadline, self.durability);
            let attempt = (|| {
                let mut tx = self
                    .client
                    .build_transaction()
                    .isolation_level(IsolationLevel::Serializable)
                    .read_only(read_only)
                    .start()
                    .map_err(db)?;
                bound(
                    &mut tx,
                    deadline,
                    durability == Durability::Normal && !read_only,
                )?;
                let value = step(&mut tx)?;
                tx.commit().map_err(db)?;
                Ok(value)
            })();
            match attempt {
                Err(LedgerError::Conflict) if Instant::now() < self.deadline => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(MAX_RETRY_PAUSE);
                }
                Err(LedgerError::Conflict) => return Err(LedgerError::Locked),
                done => return done,
            }
        }
    }
}

/// Bound the transaction's waits by `deadline`: a statement or lock wait past it is cancelled
/// ([`LedgerError::Locked`]). Past the deadline the transaction is still tried once without
/// waiting for a lock (1 ms), as SQLite's busy timeout of 1 ms does: `Ledger::wait`'s last
/// look at its deadline answers `Held`, not `Locked`, when nothing holds a lock. With
/// `unsynced`, the transaction's commit does not wait for the server's WAL flush
/// ([`Durability::Normal`]), set in the same round trip.
fn bound(tx: &mut Transaction<'_>, deadline: Instant, unsynced: bool) -> Result<(), LedgerError> {
    let left = deadline.saturating_duration_since(Instant::now());
    let lock_ms = left.as_millis().clamp(1, i32::MAX as u128);
    let statement_ms = if left.is_zero() {
        PAST_DEADLINE_STATEMENT.as_millis()
    } else {
        lock_ms
    };
    let commit = if unsynced {
        "; SET LOCAL synchronous_commit = off"
    } else {
        ""
    };
    tx.batch_execute(&format!(
        "SET LOCAL statement_timeout = {statement_ms}; SET LOCAL lock_timeout = {lock_ms}{commit}"
    ))
    .map_err(db)
}

/// How long one statement of a transaction tried past its deadline may run (it waits for no
/// lock).
const PAST_DEADLINE_STATEMENT: Duration = Duration::from_secs(1);

impl Store for PgStore {
    fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = deadline;
    }

    fn set_durability(&mut self, durability: Durability) -> Result<(), LedgerError> {
        self.durability = durability;
        Ok(())
    }

    fn begin(
        &mut self,
        call: &Call<'_>,
        lease: &Lease,
        decide: &mut dyn FnMut(&Snapshot) -> (Decision, Claim),
    ) -> Result<Decision, LedgerError> {
        self.serializable(false, |tx| {
            let snap = read_snapshot(tx, call)?;
            let (decision, claim) = decide(&snap);
            if let Decision::Replay(recorded) = &decision {
                check_covered(tx, call.key, recorded)?;
            }
            let now = i64_of(super::now_ms());
            match claim {
                Claim::None => {}
                Claim::Admit { attempt } => write_admit(tx, call, lease, attempt, now)?,
                Claim::TakeOver => write_takeover(tx, call.key, lease, now)?,
                Claim::Ask {
                    approval_id,
                    expires_ms,
                } => {
                    let ask = call.ask.ok_or_else(|| {
                        LedgerError::Database(
                            "an approval was claimed for a call without ask".into(),
                        )
                    })?;
                    insert_pending(tx, call, ask, &approval_id, expires_ms)?;
                }
            }
            Ok(decision)
        })
    }

    fn peek(&mut self, call: &Call<'_>) -> Result<Snapshot, LedgerError> {
        self.serializable(true, |tx| read_snapshot(tx, call))
    }

    fn finish(
        &mut self,
        key: &Key,
        lease: &Lease,
        outcome: &Outcome<'_>,
        record: &AuditRecord,
    ) -> Result<Finished, LedgerError> {
        self.serializable(false, |tx| finish_in(tx, key, lease, outcome, record))
    }

    fn append(&mut self, record: &AuditRecord) -> Result<(), LedgerError> {
        self.serializable(false, |tx| append(tx, record).map(|_| ()))
    }

    fn call(&mut self, key: &Key) -> Result<Option<CallRow>, LedgerError> {
        self.serializable(true, |tx| read_call(tx, key))
    }

    fn renew(&mut self, key: &Key, lease: &Lease) -> Result<bool, LedgerError> {
        self.serializable(false, |tx| renew_in(tx, key, lease))
    }

    fn scan(
        &mut self,
        since_ms: u64,
        visit: &mut dyn FnMut(Result<StoredRecord, Break>) -> bool,
        mut stored: Option<&mut StoredVisit<'_>>,
        mut usage: Option<&mut Usage>,
    ) -> Result<Option<(u64, String)>, LedgerError> {
        // Not retried: `visit` sees each row once. A read-only deferrable transaction never
        // fails to serialize.
        let mut tx = self
            .client
            .build_transaction()
            .isolation_level(IsolationLevel::Serializable)
            .read_only(true)
            .deferrable(true)
            .start()
            .map_err(db)?;
        let head = scan_in(&mut tx, since_ms, visit, &mut stored, &mut usage)?;
        tx.commit().map_err(db)?;
        Ok(head)
    }

    fn prune(
        &mut self,
        pruning: &mut dyn super::prune::Pruning,
    ) -> Result<Option<u64>, LedgerError> {
        self.serializable(false, |tx| prune_in(tx, pruning))
    }

    fn backup(&mut self, dest: &Path) -> Result<(), BackupError> {
        export::export(&mut self.client, dest)
    }

    fn approvals(&mut self, filter: &ApprovalFilter) -> Result<Vec<Approval>, LedgerError> {
        self.serializable(true, |tx| read_list(tx, filter))
    }

    fn approval(&mut self, id: &str) -> Result<Option<Approval>, LedgerError> {
        self.serializable(true, |tx| read_by_id(tx, id))
    }

    fn decide_approval(
        &mut self,
        id: &str,
        settle: &mut Settle<'_>,
    ) -> Result<Approval, ApprovalError> {
        let mut refused = None;
        let decided = self.serializable(false, |tx| {
            let current = read_by_id(tx, id)?;
            let Some(current) = current else {
                refused = Some(ApprovalError::Unknown(id.to_string()));
                return Err(LedgerError::Database("refused".into()));
            };
            let (updated, record) = match settle(&current) {
                Ok(done) => done,
                Err(e) => {
                    refused = Some(e);
                    // Ends the attempt without a retry: `refused` is the answer.
                    return Err(LedgerError::Database("refused".into()));
                }
            };
            if updated.id != current.id || !write_decision(tx, &updated)? {
                return Err(LedgerError::Database(
                    "the approval changed while it was decided".into(),
                ));
            }
            append(tx, &record)?;
            Ok(updated)
        });
        match (decided, refused) {
            (Ok(updated), _) => Ok(updated),
            (Err(_), Some(refusal)) => Err(refusal),
            (Err(e), None) => Err(ApprovalError::Ledger(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::tests::{pg_env, soon, Backend, Db};
    use crate::ledger::Location;

    /// What `synchronous_commit` a write transaction and a read-only one run with.
    fn commits(store: &mut PgStore) -> (String, String) {
        let show = |tx: &mut Transaction<'_>| {
            tx.query_one("SELECT current_setting('synchronous_commit')", &[])
                .map(|row| row.get::<_, String>(0))
                .map_err(db)
        };
        (
            store.serializable(false, show).unwrap(),
            store.serializable(true, show).unwrap(),
        )
    }

    #[test]
    fn normal_durability_turns_off_synchronous_commit_for_writes_only() {
        let Some(db) = Db::new(Backend::Postgres) else {
            return;
        };
        let Location::Postgres(url) = &db.location else {
            panic!("not postgres");
        };
        let password = crate::ledger::location::password_for(url, &pg_env()).unwrap();
        let mut store = PgStore::open(url, password.as_ref(), soon()).unwrap();
        let on = "on".to_string();
        assert_eq!(commits(&mut store), (on.clone(), on.clone()));
        store.set_durability(Durability::Normal).unwrap();
        assert_eq!(commits(&mut store), ("off".into(), on.clone()));
        // Set for each transaction (SET LOCAL), so nothing stays on the connection: a pooler
        // that hands it to another client hands over the server's setting.
        let outside: String = store
            .client
            .query_one("SELECT current_setting('synchronous_commit')", &[])
            .unwrap()
            .get(0);
        assert_eq!(outside, on);
        store.set_durability(Durability::Full).unwrap();
        assert_eq!(commits(&mut store), (on.clone(), on));
    }
}
