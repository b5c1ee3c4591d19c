//! The PostgreSQL ledger's versioned schema: `ptd_ledger_meta` names the application and the
//! version; [`migrate`] alone creates or upgrades it, [`check`] refuses anything else.

use super::{connect, db, LedgerError};
use crate::ledger::location::{Password, PgUrl};
use crate::ledger::MigrateReport;
use postgres::error::SqlState;
use postgres::Client;
use std::time::Instant;

/// The schema version this dispatcher reads and writes.
pub(crate) const SCHEMA_VERSION: i64 = 1;

/// What `ptd_ledger_meta.application` holds.
const APPLICATION: &str = "parent-tool-dispatch ledger";

/// Version 1: the tables of the SQLite ledger (schema 4), with each call's heartbeat.
const SCHEMA_V1: &str = "
CREATE TABLE ptd_ledger_meta (
    only_one    INTEGER PRIMARY KEY CHECK (only_one = 1),
    application TEXT NOT NULL,
    version     BIGINT NOT NULL
);
CREATE TABLE calls (
    bridge_ref   TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    request_id   TEXT NOT NULL,
    digest       TEXT NOT NULL,
    tool         TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('running', 'retryable', 'final')),
    attempt      BIGINT NOT NULL,
    lease_boot   TEXT NOT NULL,
    lease_pid    BIGINT NOT NULL,
    lease_start  BIGINT NOT NULL,
    heartbeat_ms BIGINT NOT NULL,
    envelope     TEXT,
    exit_status  BIGINT,
    record_seq   BIGINT,
    updated_ms   BIGINT NOT NULL,
    PRIMARY KEY (bridge_ref, session_id, request_id)
);
CREATE INDEX calls_running ON calls (bridge_ref, session_id) WHERE state = 'running';
CREATE TABLE session_usage (
    bridge_ref TEXT NOT NULL,
    session_id TEXT NOT NULL,
    calls      BIGINT NOT NULL,
    adapter_ms BIGINT NOT NULL,
    PRIMARY KEY (bridge_ref, session_id)
);
CREATE TABLE tool_usage (
    bridge_ref TEXT NOT NULL,
    session_id TEXT NOT NULL,
    tool       TEXT NOT NULL,
    calls      BIGINT NOT NULL,
    PRIMARY KEY (bridge_ref, session_id, tool)
);
CREATE TABLE audit (
    seq     BIGINT PRIMARY KEY,
    time_ms BIGINT NOT NULL,
    prev    TEXT NOT NULL,
    hash    TEXT NOT NULL,
    body    TEXT NOT NULL
);
CREATE INDEX audit_time ON audit (time_ms);
CREATE TABLE head (
    only_one INTEGER PRIMARY KEY CHECK (only_one = 1),
    seq      BIGINT NOT NULL,
    hash     TEXT NOT NULL
);
CREATE TABLE approvals (
    id            TEXT PRIMARY KEY NOT NULL,
    bridge_ref    TEXT NOT NULL,
    session_key   TEXT NOT NULL,
    request_key   TEXT NOT NULL,
    digest        TEXT NOT NULL,
    tool          TEXT NOT NULL,
    operation     TEXT NOT NULL,
    session_shown TEXT NOT NULL,
    request_shown TEXT NOT NULL,
    input_shown   TEXT NOT NULL,
    policy_sha256 TEXT NOT NULL,
    entry         TEXT NOT NULL,
    line          BIGINT,
    created_ms    BIGINT NOT NULL,
    expires_ms    BIGINT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied')),
    for_session   BOOLEAN NOT NULL,
    decided_by    TEXT,
    note          TEXT,
    decided_ms    BIGINT
);
CREATE UNIQUE INDEX approvals_key ON approvals (bridge_ref, session_key, request_key);
CREATE INDEX approvals_grant ON approvals (bridge_ref, session_key, tool, state);
";

/// The version the database holds: `None` without our meta table.
fn version(client: &mut Client) -> Result<Option<i64>, LedgerError> {
    // Typed (here: no parameter), so that it is one round trip (rows.rs, `PgType`).
    let rows = client.query_typed(
        "SELECT application, version FROM ptd_ledger_meta WHERE only_one = 1",
        &[],
    );
    match rows {
        Ok(rows) => match rows.first() {
            Some(row) => {
                let app: String = row.try_get(0).map_err(db)?;
                if app != APPLICATION {
                    return Err(LedgerError::Foreign(format!(
                        "a database of another application ({app:?})"
                    )));
                }
                row.try_get(1).map(Some).map_err(db)
            }
            None => Ok(None),
        },
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => Ok(None),
        Err(e) => Err(db(e)),
    }
}

/// The main job's check: the schema is [`SCHEMA_VERSION`], else [`LedgerError::Schema`]
/// saying how to migrate.
pub(super) fn check(client: &mut Client, url: &PgUrl) -> Result<(), LedgerError> {
    match version(client)? {
        Some(SCHEMA_VERSION) => Ok(()),
        Some(other) => Err(LedgerError::Schema(format!(
            "the database holds ledger schema version {other}, this dispatcher reads \
             {SCHEMA_VERSION}; run `parent-tool-dispatch ledger migrate --ledger {url}` with a \
             dispatcher that knows it"
        ))),
        None => Err(LedgerError::Schema(format!(
            "the database holds no ledger schema; run `parent-tool-dispatch ledger migrate \
             --ledger {url}` first"
        ))),
    }
}

/// Create the schema (or leave it as it is when it is current) in ONE transaction, with an
/// advisory lock so that two migrations at once do it once.
pub(crate) fn migrate(
    url: &PgUrl,
    password: Option<&Password>,
    deadline: Instant,
) -> Result<MigrateReport, LedgerError> {
    let mut client = connect(url, password, deadline)?;
    let mut tx = client.transaction().map_err(db)?;
    let left = deadline.saturating_duration_since(Instant::now());
    let ms = left.as_millis().clamp(1, i32::MAX as u128);
    tx.batch_execute(&format!(
        "SET LOCAL lock_timeout = {ms}; SET LOCAL statement_timeout = {ms}; \
         SELECT pg_advisory_xact_lock(1347568716)"
    ))
    .map_err(db)?;
    let found = {
        // A savepoint: a missing table must not abort the transaction.
        let mut look = tx.transaction().map_err(db)?;
        let rows = look.query(
            "SELECT application, version FROM ptd_ledger_meta WHERE only_one = 1",
            &[],
        );
        match rows {
            Ok(rows) => match rows.first() {
                Some(row) => Some((
                    row.try_get::<_, String>(0).map_err(db)?,
                    row.try_get::<_, i64>(1).map_err(db)?,
                )),
                None => None,
            },
            Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => None,
            Err(e) => return Err(db(e)),
        }
    };
    let from = match found {
        Some((app, _)) if app != APPLICATION => {
            return Err(LedgerError::Foreign(format!(
                "a database of another application ({app:?})"
            )))
        }
        Some((_, SCHEMA_VERSION)) => {
            return Ok(MigrateReport {
                from: Some(SCHEMA_VERSION),
                to: SCHEMA_VERSION,
            })
        }
        Some((_, other)) => {
            return Err(LedgerError::Schema(format!(
                "the database holds ledger schema version {other}, newer than this \
                 dispatcher's {SCHEMA_VERSION}: nothing was changed"
            )))
        }
        None => None,
    };
    tx.batch_execute(SCHEMA_V1).map_err(db)?;
    tx.execute(
        "INSERT INTO ptd_ledger_meta (only_one, application, version) VALUES (1, $1, $2)",
        &[&APPLICATION, &SCHEMA_VERSION],
    )
    .map_err(db)?;
    tx.commit().map_err(db)?;
    Ok(MigrateReport {
        from,
        to: SCHEMA_VERSION,
    })
}
