//! The rows on PostgreSQL: the same reads and writes as `sqlite/rows.rs` and
//! `sqlite/approvals.rs`, each inside a transaction its caller holds.

use super::*;
use crate::ledger::audit::{self, GENESIS};
use crate::ledger::{ApprovalState, Ask, CallState, Recorded};
use postgres::types::{ToSql, Type};
use postgres::Row;

pub(super) fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(super) fn u64_of(n: i64, what: &str) -> Result<u64, LedgerError> {
    u64::try_from(n).map_err(|_| LedgerError::Corrupt(format!("a row has an invalid {what}")))
}

/// The PostgreSQL type of a parameter's Rust type. Naming it lets each statement go to the
/// server in one round trip (`query_typed`: parse, bind and execute together) where an untyped
/// one needs two (a prepare first, for the server to infer the types); every process opens its
/// own connection, so a prepared statement would never be used twice anyway.
pub(super) trait PgType {
    const TYPE: Type;
}

impl PgType for str {
    const TYPE: Type = Type::TEXT;
}

impl PgType for String {
    const TYPE: Type = Type::TEXT;
}

impl PgType for i64 {
    const TYPE: Type = Type::INT8;
}

impl PgType for bool {
    const TYPE: Type = Type::BOOL;
}

impl<T: PgType> PgType for Option<T> {
    const TYPE: Type = T::TYPE;
}

impl<T: PgType + ?Sized> PgType for &T {
    const TYPE: Type = T::TYPE;
}

/// The type of the value `_value` points at.
pub(super) fn type_of<T: PgType + ?Sized>(_value: &T) -> Type {
    T::TYPE
}

/// `typed![&a, &b]`: the parameters of a statement with their PostgreSQL types ([`Params`]).
macro_rules! typed {
    ($($param:expr),* $(,)?) => {
        &[$(($param as &(dyn ToSql + Sync), type_of($param))),*]
    };
}

/// A statement's parameters, each with its PostgreSQL type ([`typed!`]).
pub(super) type Params<'a> = [(&'a (dyn ToSql + Sync), Type)];

fn one(tx: &mut Transaction<'_>, sql: &str, p: &Params<'_>) -> Result<Option<Row>, LedgerError> {
    tx.query_typed_opt(sql, p).map_err(db)
}

fn lease_of(row: &Row, at: usize) -> Result<Lease, LedgerError> {
    let get = |i: usize| row.try_get::<_, i64>(i).map_err(db);
    Ok(Lease {
        boot_id: row.try_get(at).map_err(db)?,
        pid: u32::try_from(get(at + 1)?)
            .map_err(|_| LedgerError::Corrupt("a call row has an invalid lease".into()))?,
        start_ticks: u64_of(get(at + 2)?, "lease")?,
        heartbeat_ms: Some(u64_of(get(at + 3)?, "heartbeat")?),
    })
}

pub(super) fn read_call(
    tx: &mut Transaction<'_>,
    key: &Key,
) -> Result<Option<CallRow>, LedgerError> {
    let Some(row) = one(
        tx,
        "SELECT digest, state, attempt, lease_boot, lease_pid, lease_start, heartbeat_ms, \
         envelope, exit_status FROM calls \
         WHERE bridge_ref = $1 AND session_id = $2 AND request_id = $3",
        typed![&key.bridge_ref, &key.session_id, &key.request_id],
    )?
    else {
        return Ok(None);
    };
    let corrupt = |what: &str| LedgerError::Corrupt(format!("a call row has an invalid {what}"));
    let state: String = row.try_get(1).map_err(db)?;
    let state = match state.as_str() {
        "running" => CallState::Running,
        "retryable" => CallState::Retryable,
        "final" => CallState::Final,
        _ => return Err(corrupt("state")),
    };
    let envelope: Option<String> = row.try_get(7).map_err(db)?;
    let exit: Option<i64> = row.try_get(8).map_err(db)?;
    let outcome = match (envelope, exit) {
        (Some(envelope), Some(exit)) => Some(Recorded {
            envelope,
            exit_status: u8::try_from(exit).map_err(|_| corrupt("exit status"))?,
        }),
        _ => None,
    };
    Ok(Some(CallRow {
        digest: row.try_get(0).map_err(db)?,
        state,
        attempt: u32::try_from(row.try_get::<_, i64>(2).map_err(db)?)
            .map_err(|_| corrupt("attempt"))?,
        lease: lease_of(&row, 3)?,
        outcome,
    }))
}

pub(super) fn head(tx: &mut Transaction<'_>) -> Result<Option<(u64, String)>, LedgerError> {
    one(
        tx,
        "SELECT seq, hash FROM head WHERE only_one = 1",
        typed![],
    )?
    .map(|r| {
        Ok((
            u64_of(r.try_get(0).map_err(db)?, "audit head")?,
            r.try_get(1).map_err(db)?,
        ))
    })
    .transpose()
}

/// Append `record` to the chain; returns its seq.
pub(super) fn append(tx: &mut Transaction<'_>, record: &AuditRecord) -> Result<u64, LedgerError> {
    let current = head(tx)?;
    append_after(tx, record, current)
}

/// Append `record` after `current`, the chain's head this transaction read.
fn append_after(
    tx: &mut Transaction<'_>,
    record: &AuditRecord,
    current: Option<(u64, String)>,
) -> Result<u64, LedgerError> {
    let (seq, prev) = current.unwrap_or((0, GENESIS.to_string()));
    let sealed = audit::seal(record, seq + 1, &prev).map_err(LedgerError::Record)?;
    // The record and the chain's head in one statement (two tables).
    tx.execute_typed(
        "WITH appended AS (\
           INSERT INTO audit (seq, time_ms, prev, hash, body) VALUES ($1, $2, $3, $4, $5)) \
         INSERT INTO head (only_one, seq, hash) VALUES (1, $1, $4) \
         ON CONFLICT (only_one) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
        typed![
            &i64_of(sealed.seq),
            &i64_of(sealed.time_ms),
            &sealed.prev,
            &sealed.hash,
            &sealed.body,
        ],
    )
    .map_err(db)?;
    Ok(sealed.seq)
}

/// As `sqlite/rows.rs`'s: a recorded envelope is replayed only while its record covers it
/// and is still linked into the chain (SPEC §14.4).
pub(super) fn check_covered(
    tx: &mut Transaction<'_>,
    key: &Key,
    recorded: &Recorded,
) -> Result<(), LedgerError> {
    let tampered = |why: &str| LedgerError::Tampered(why.to_string());
    let seq: Option<i64> = one(
        tx,
        "SELECT record_seq FROM calls WHERE bridge_ref = $1 AND session_id = $2 \
         AND request_id = $3",
        typed![&key.bridge_ref, &key.session_id, &key.request_id],
    )?
    .map(|r| r.try_get(0).map_err(db))
    .transpose()?
    .flatten();
    let seq = seq.ok_or_else(|| tampered("a stored envelope has no audit record"))?;
    let row = one(
        tx,
        "SELECT hash, body FROM audit WHERE seq = $1",
        typed![&seq],
    )?
    .ok_or_else(|| tampered("the stored envelope's audit record is missing"))?;
    let (hash, body): (String, String) = (row.try_get(0).map_err(db)?, row.try_get(1).map_err(db)?);
    audit::covers(&body, &hash, &recorded.envelope, recorded.exit_status)
        .map_err(|why| LedgerError::Tampered(format!("record {seq}: {why}")))?;
    let next = one(
        tx,
        "SELECT prev FROM audit WHERE seq = $1",
        typed![&(seq + 1)],
    )?;
    let linked = match next {
        Some(r) => r.try_get::<_, String>(0).map_err(db)? == hash,
        None => head(tx)?.is_some_and(|(h, hh)| i64_of(h) == seq && hh == hash),
    };
    if !linked {
        return Err(LedgerError::Tampered(format!(
            "record {seq}: it is no longer linked into the chain (edited)"
        )));
    }
    Ok(())
}

/// What `begin` decides on (as `sqlite/rows.rs`'s `read_snapshot`).
pub(super) fn read_snapshot(
    tx: &mut Transaction<'_>,
    call: &Call<'_>,
) -> Result<Snapshot, LedgerError> {
    let key = call.key;
    let row = read_call(tx, key)?;
    // The session's and the tool's counters in one round trip (0 where there is no row yet).
    let usage = tx
        .query_typed_one(
            "SELECT \
             COALESCE((SELECT calls FROM session_usage \
                       WHERE bridge_ref = $1 AND session_id = $2), 0), \
             COALESCE((SELECT adapter_ms FROM session_usage \
                       WHERE bridge_ref = $1 AND session_id = $2), 0), \
             COALESCE((SELECT calls FROM tool_usage \
                       WHERE bridge_ref = $1 AND session_id = $2 AND tool = $3), 0)",
            typed![&key.bridge_ref, &key.session_id, &call.tool],
        )
        .map_err(db)?;
    let count = |i: usize| usage.try_get::<_, i64>(i).map_err(db);
    let (calls, adapter_ms, tool_calls) = (count(0)?, count(1)?, count(2)?);
    let running = tx
        .query_typed(
            "SELECT lease_boot, lease_pid, lease_start, heartbeat_ms FROM calls \
             WHERE bridge_ref = $1 AND session_id = $2 AND state = 'running' \
             AND request_id <> $3",
            typed![&key.bridge_ref, &key.session_id, &key.request_id],
        )
        .map_err(db)?
        .iter()
        .map(|r| lease_of(r, 0))
        .collect::<Result<Vec<_>, _>>()?;
    let (approval, session_grant) = if call.ask.is_some() {
        (read_for_key(tx, key)?, read_grant(tx, key, call.tool)?)
    } else {
        (None, None)
    };
    Ok(Snapshot {
        row,
        calls: u64::try_from(calls).unwrap_or(0),
        tool_calls: u64::try_from(tool_calls).unwrap_or(0),
        adapter_ms: u64::try_from(adapter_ms).unwrap_or(0),
        running,
        approval,
        session_grant,
    })
}

/// Record `call` as admitted under `lease` and count it (as `sqlite/rows.rs`'s).
pub(super) fn write_admit(
    tx: &mut Transaction<'_>,
    call: &Call<'_>,
    lease: &Lease,
    attempt: u32,
    now: i64,
) -> Result<(), LedgerError> {
    let key = call.key;
    // The call row and both counters in one statement (three tables, so its parts cannot see
    // one another's rows and need not).
    tx.execute_typed(
        "WITH admitted AS (\
           INSERT INTO calls (bridge_ref, session_id, request_id, digest, tool, state, attempt, \
           lease_boot, lease_pid, lease_start, heartbeat_ms, envelope, exit_status, updated_ms) \
           VALUES ($1, $2, $3, $4, $5, 'running', $6, $7, $8, $9, $10, NULL, NULL, $10) \
           ON CONFLICT (bridge_ref, session_id, request_id) DO UPDATE SET \
           state = 'running', attempt = excluded.attempt, lease_boot = excluded.lease_boot, \
           lease_pid = excluded.lease_pid, lease_start = excluded.lease_start, \
           heartbeat_ms = excluded.heartbeat_ms, envelope = NULL, exit_status = NULL, \
           updated_ms = excluded.updated_ms), \
         session AS (\
           INSERT INTO session_usage (bridge_ref, session_id, calls, adapter_ms) \
           VALUES ($1, $2, 1, 0) ON CONFLICT (bridge_ref, session_id) \
           DO UPDATE SET calls = session_usage.calls + 1) \
         INSERT INTO tool_usage (bridge_ref, session_id, tool, calls) \
         VALUES ($1, $2, $5, 1) ON CONFLICT (bridge_ref, session_id, tool) \
         DO UPDATE SET calls = tool_usage.calls + 1",
        typed![
            &key.bridge_ref,
            &key.session_id,
            &key.request_id,
            &call.digest,
            &call.tool,
            &i64::from(attempt),
            &lease.boot_id,
            &i64::from(lease.pid),
            &i64_of(lease.start_ticks),
            &now,
        ],
    )
    .map_err(db)?;
    Ok(())
}

/// Take over `key`'s running call: its lease becomes `lease`.
pub(super) fn write_takeover(
    tx: &mut Transaction<'_>,
    key: &Key,
    lease: &Lease,
    now: i64,
) -> Result<(), LedgerError> {
    tx.execute_typed(
        "UPDATE calls SET lease_boot = $4, lease_pid = $5, lease_start = $6, heartbeat_ms = $7, \
         state = 'running', updated_ms = $7 \
         WHERE bridge_ref = $1 AND session_id = $2 AND request_id = $3",
        typed![
            &key.bridge_ref,
            &key.session_id,
            &key.request_id,
            &lease.boot_id,
            &i64::from(lease.pid),
            &i64_of(lease.start_ticks),
            &now,
        ],
    )
    .map_err(db)?;
    Ok(())
}

/// [`Store::renew`]: the key's heartbeat, while `lease` holds it.
pub(super) fn renew_in(
    tx: &mut Transaction<'_>,
    key: &Key,
    lease: &Lease,
) -> Result<bool, LedgerError> {
    let changed = tx
        .execute_typed(
            "UPDATE calls SET heartbeat_ms = $7 \
             WHERE bridge_ref = $1 AND session_id = $2 AND request_id = $3 \
             AND state = 'running' AND lease_boot = $4 AND lease_pid = $5 AND lease_start = $6",
            typed![
                &key.bridge_ref,
                &key.session_id,
                &key.request_id,
                &lease.boot_id,
                &i64::from(lease.pid),
                &i64_of(lease.start_ticks),
                &i64_of(crate::ledger::now_ms()),
            ],
        )
        .map_err(db)?;
    Ok(changed == 1)
}

/// [`Store::finish`]'s transaction (as `sqlite/mod.rs`'s `finish_once`).
pub(super) fn finish_in(
    tx: &mut Transaction<'_>,
    key: &Key,
    lease: &Lease,
    outcome: &Outcome<'_>,
    record: &AuditRecord,
) -> Result<Finished, LedgerError> {
    let current = head(tx)?;
    let seq = current.as_ref().map_or(0, |(s, _)| *s) + 1;
    let state = if outcome.retryable {
        "retryable"
    } else {
        "final"
    };
    let changed = tx
        .execute_typed(
            "UPDATE calls SET state = $4, envelope = $5, exit_status = $6, updated_ms = $7, \
             record_seq = $11 \
             WHERE bridge_ref = $1 AND session_id = $2 AND request_id = $3 \
             AND state = 'running' AND lease_boot = $8 AND lease_pid = $9 AND lease_start = $10",
            typed![
                &key.bridge_ref,
                &key.session_id,
                &key.request_id,
                &state,
                &outcome.envelope,
                &i64::from(outcome.exit_status),
                &i64_of(crate::ledger::now_ms()),
                &lease.boot_id,
                &i64::from(lease.pid),
                &i64_of(lease.start_ticks),
                &i64_of(seq),
            ],
        )
        .map_err(db)?;
    let record = AuditRecord {
        session_key: Some(key.session_id.clone()),
        admitted: changed == 1,
        ..record.clone()
    };
    append_after(tx, &record, current)?;
    if outcome.adapter_ms > 0 {
        tx.execute_typed(
            "INSERT INTO session_usage (bridge_ref, session_id, calls, adapter_ms) \
             VALUES ($1, $2, 0, $3) ON CONFLICT (bridge_ref, session_id) \
             DO UPDATE SET adapter_ms = session_usage.adapter_ms + excluded.adapter_ms",
            typed![
                &key.bridge_ref,
                &key.session_id,
                &i64_of(outcome.adapter_ms),
            ],
        )
        .map_err(db)?;
    }
    Ok(if changed == 1 {
        Finished::Stored
    } else {
        Finished::NotHolder
    })
}

/// [`Store::scan`] inside its read transaction.
pub(super) fn scan_in(
    tx: &mut Transaction<'_>,
    since_ms: u64,
    visit: &mut dyn FnMut(Result<StoredRecord, Break>) -> bool,
    stored: &mut Option<&mut StoredVisit<'_>>,
    usage: &mut Option<&mut Usage>,
) -> Result<Option<(u64, String)>, LedgerError> {
    if !visit_audit_in(tx, since_ms, visit)? {
        return Ok(None);
    }
    if let Some(stored) = stored {
        let rows = tx
            .query_typed(
                "SELECT record_seq, envelope, exit_status FROM calls WHERE envelope IS NOT NULL",
                typed![],
            )
            .map_err(db)?;
        for row in &rows {
            let seq: Option<i64> = row.try_get(0).map_err(db)?;
            let envelope: String = row.try_get(1).map_err(db)?;
            let exit: Option<i64> = row.try_get(2).map_err(db)?;
            let exit = exit.and_then(|e| u8::try_from(e).ok()).unwrap_or(u8::MAX);
            if !stored(seq.and_then(|s| u64::try_from(s).ok()), &envelope, exit) {
                break;
            }
        }
    }
    if let Some(usage) = usage {
        read_usage(tx, usage)?;
    }
    head(tx)
}

fn read_usage(tx: &mut Transaction<'_>, usage: &mut Usage) -> Result<(), LedgerError> {
    for row in tx
        .query_typed(
            "SELECT bridge_ref, session_id, calls, adapter_ms FROM session_usage",
            typed![],
        )
        .map_err(db)?
    {
        let key: (String, String) = (row.try_get(0).map_err(db)?, row.try_get(1).map_err(db)?);
        let counted: (i64, i64) = (row.try_get(2).map_err(db)?, row.try_get(3).map_err(db)?);
        usage.stored.sessions.insert(key, counted);
    }
    for row in tx
        .query_typed(
            "SELECT bridge_ref, session_id, tool, calls FROM tool_usage",
            typed![],
        )
        .map_err(db)?
    {
        let key: (String, String, String) = (
            row.try_get(0).map_err(db)?,
            row.try_get(1).map_err(db)?,
            row.try_get(2).map_err(db)?,
        );
        usage.stored.tools.insert(key, row.try_get(3).map_err(db)?);
    }
    for row in tx
        .query_typed(
            "SELECT bridge_ref, session_id, tool FROM calls WHERE state = 'running'",
            typed![],
        )
        .map_err(db)?
    {
        let (bridge, session, tool): (String, String, String) = (
            row.try_get(0).map_err(db)?,
            row.try_get(1).map_err(db)?,
            row.try_get(2).map_err(db)?,
        );
        usage.running.add(&bridge, &session, Some(&tool), 0);
    }
    Ok(())
}

/// The approvals' columns, in [`approval_of`]'s order.
const COLUMNS: &str = "id, bridge_ref, session_key, request_key, digest, tool, operation, \
     session_shown, request_shown, input_shown, policy_sha256, entry, line, created_ms, \
     expires_ms, state, for_session, decided_by, note, decided_ms";

fn approval_of(row: &Row) -> Result<Approval, LedgerError> {
    let text = |i: usize| row.try_get::<_, String>(i).map_err(db);
    let opt = |i: usize, what: &str| -> Result<Option<u64>, LedgerError> {
        row.try_get::<_, Option<i64>>(i)
            .map_err(db)?
            .map(|n| u64_of(n, what))
            .transpose()
    };
    let state = ApprovalState::parse(&text(15)?)
        .ok_or_else(|| LedgerError::Corrupt("an approval row has an invalid state".into()))?;
    Ok(Approval {
        id: text(0)?,
        bridge_ref: text(1)?,
        session_key: text(2)?,
        request_key: text(3)?,
        digest: text(4)?,
        tool: text(5)?,
        operation: text(6)?,
        session_shown: text(7)?,
        request_shown: text(8)?,
        input_shown: text(9)?,
        policy_sha256: text(10)?,
        entry: text(11)?,
        line: opt(12, "line")?,
        created_ms: u64_of(row.try_get(13).map_err(db)?, "creation time")?,
        expires_ms: u64_of(row.try_get(14).map_err(db)?, "expiry")?,
        state,
        for_session: row.try_get(16).map_err(db)?,
        decided_by: row.try_get(17).map_err(db)?,
        note: row.try_get(18).map_err(db)?,
        decided_ms: opt(19, "decision time")?,
    })
}

fn approvals_where(
    tx: &mut Transaction<'_>,
    rest: &str,
    p: &Params<'_>,
) -> Result<Vec<Approval>, LedgerError> {
    tx.query_typed(&format!("SELECT {COLUMNS} FROM approvals {rest}"), p)
        .map_err(db)?
        .iter()
        .map(approval_of)
        .collect()
}

fn read_for_key(tx: &mut Transaction<'_>, key: &Key) -> Result<Option<Approval>, LedgerError> {
    Ok(approvals_where(
        tx,
        "WHERE bridge_ref = $1 AND session_key = $2 AND request_key = $3",
        typed![&key.bridge_ref, &key.session_id, &key.request_id],
    )?
    .pop())
}

fn read_grant(
    tx: &mut Transaction<'_>,
    key: &Key,
    tool: &str,
) -> Result<Option<Approval>, LedgerError> {
    Ok(approvals_where(
        tx,
        "WHERE bridge_ref = $1 AND session_key = $2 AND tool = $3 AND state = 'approved' \
         AND for_session ORDER BY expires_ms DESC, id LIMIT 1",
        typed![&key.bridge_ref, &key.session_id, &tool],
    )?
    .pop())
}

pub(super) fn read_by_id(
    tx: &mut Transaction<'_>,
    id: &str,
) -> Result<Option<Approval>, LedgerError> {
    Ok(approvals_where(tx, "WHERE id = $1", typed![&id])?.pop())
}

pub(super) fn read_list(
    tx: &mut Transaction<'_>,
    filter: &ApprovalFilter,
) -> Result<Vec<Approval>, LedgerError> {
    approvals_where(
        tx,
        "WHERE (NOT $1::bool OR state = 'pending') \
         AND ($2::text IS NULL OR session_key = $2::text) \
         ORDER BY created_ms DESC, id DESC",
        typed![&filter.pending_only, &filter.session_key],
    )
}

pub(super) fn insert_pending(
    tx: &mut Transaction<'_>,
    call: &Call<'_>,
    ask: &Ask,
    approval_id: &str,
    expires_ms: u64,
) -> Result<(), LedgerError> {
    let key = call.key;
    let created_ms = expires_ms.saturating_sub(ask.ttl_ms);
    tx.execute_typed(
        &format!(
            "INSERT INTO approvals ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, \
             $11, $12, $13, $14, $15, 'pending', false, NULL, NULL, NULL)"
        ),
        typed![
            &approval_id,
            &key.bridge_ref,
            &key.session_id,
            &key.request_id,
            &call.digest,
            &call.tool,
            &ask.operation,
            &ask.session_shown,
            &ask.request_shown,
            &ask.input_shown,
            &ask.policy_sha256,
            &ask.entry,
            &ask.line.map(i64_of),
            &i64_of(created_ms),
            &i64_of(expires_ms),
        ],
    )
    .map_err(db)?;
    Ok(())
}

pub(super) fn write_decision(
    tx: &mut Transaction<'_>,
    updated: &Approval,
) -> Result<bool, LedgerError> {
    let changed = tx
        .execute_typed(
            "UPDATE approvals SET state = $2, for_session = $3, decided_by = $4, note = $5, \
             decided_ms = $6 WHERE id = $1 AND state = 'pending'",
            typed![
                &updated.id,
                &updated.state.as_str(),
                &updated.for_session,
                &updated.decided_by,
                &updated.note,
                &updated.decided_ms.map(i64_of),
            ],
        )
        .map_err(db)?;
    Ok(changed == 1)
}
