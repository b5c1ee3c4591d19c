//! The approvals table (SPEC §18): one row per asked key, read into the snapshot of a call with
//! `ask`, written by `begin`'s [`Claim::Ask`] and by a person's decision — each inside a
//! transaction its caller holds.

use super::*;
use crate::ledger::{Approval, ApprovalFilter, ApprovalState, Ask};

/// The approvals table and its indexes: added by schema version 4 (made with a new ledger, or
/// by [`SqliteStore::migrate`] on a version-3 one).
pub(super) const APPROVALS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS approvals (
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
    line          INTEGER,
    created_ms    INTEGER NOT NULL,
    expires_ms    INTEGER NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied')),
    for_session   INTEGER NOT NULL CHECK (for_session IN (0, 1)),
    decided_by    TEXT,
    note          TEXT,
    decided_ms    INTEGER
);
CREATE UNIQUE INDEX IF NOT EXISTS approvals_key ON approvals (bridge_ref, session_key, request_key);
CREATE INDEX IF NOT EXISTS approvals_grant ON approvals (bridge_ref, session_key, tool, state);
";

/// The columns [`read_row`] reads, in its order.
const COLUMNS: &str = "id, bridge_ref, session_key, request_key, digest, tool, operation, \
     session_shown, request_shown, input_shown, policy_sha256, entry, line, created_ms, \
     expires_ms, state, for_session, decided_by, note, decided_ms";

fn u64_of(n: i64, what: &str) -> Result<u64, LedgerError> {
    u64::try_from(n)
        .map_err(|_| LedgerError::Corrupt(format!("an approval row has an invalid {what}")))
}

/// One row of [`COLUMNS`].
fn read_row(row: &rusqlite::Row<'_>) -> Result<Approval, LedgerError> {
    let text = |i: usize| row.get::<_, String>(i).map_err(db);
    let state: String = text(15)?;
    let state = ApprovalState::parse(&state)
        .ok_or_else(|| LedgerError::Corrupt("an approval row has an invalid state".into()))?;
    let line = row
        .get::<_, Option<i64>>(12)
        .map_err(db)?
        .map(|l| u64_of(l, "line"))
        .transpose()?;
    let decided_ms = row
        .get::<_, Option<i64>>(19)
        .map_err(db)?
        .map(|t| u64_of(t, "decision time"))
        .transpose()?;
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
        line,
        created_ms: u64_of(row.get(13).map_err(db)?, "creation time")?,
        expires_ms: u64_of(row.get(14).map_err(db)?, "expiry")?,
        state,
        for_session: row.get::<_, i64>(16).map_err(db)? != 0,
        decided_by: row.get(17).map_err(db)?,
        note: row.get(18).map_err(db)?,
        decided_ms,
    })
}

/// The rows `sql` (selecting [`COLUMNS`]) finds with `params`.
fn query(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<Approval>, LedgerError> {
    let mut stmt = conn.prepare_cached(sql).map_err(db)?;
    let mut rows = stmt.query(params).map_err(db)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(db)? {
        out.push(read_row(row)?);
    }
    Ok(out)
}

/// The approval of `key`, if any.
pub(super) fn read_for_key(conn: &Connection, key: &Key) -> Result<Option<Approval>, LedgerError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM approvals \
         WHERE bridge_ref = ?1 AND session_key = ?2 AND request_key = ?3"
    );
    Ok(query(
        conn,
        &sql,
        params![key.bridge_ref, key.session_id, key.request_id],
    )?
    .pop())
}

/// The session's approved `for_session` approval of `tool` that expires last, if any.
pub(super) fn read_grant(
    conn: &Connection,
    key: &Key,
    tool: &str,
) -> Result<Option<Approval>, LedgerError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM approvals INDEXED BY approvals_grant \
         WHERE bridge_ref = ?1 AND session_key = ?2 AND tool = ?3 AND state = 'approved' \
         AND for_session = 1 ORDER BY expires_ms DESC, id LIMIT 1"
    );
    Ok(query(conn, &sql, params![key.bridge_ref, key.session_id, tool])?.pop())
}

/// The approval `id`, if any.
pub(super) fn read_by_id(conn: &Connection, id: &str) -> Result<Option<Approval>, LedgerError> {
    let sql = format!("SELECT {COLUMNS} FROM approvals WHERE id = ?1");
    Ok(query(conn, &sql, params![id])?.pop())
}

/// The approvals `filter` lets through, newest first.
pub(super) fn read_list(
    conn: &Connection,
    filter: &ApprovalFilter,
) -> Result<Vec<Approval>, LedgerError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM approvals \
         WHERE (?1 = 0 OR state = 'pending') AND (?2 IS NULL OR session_key = ?2) \
         ORDER BY created_ms DESC, id DESC"
    );
    query(
        conn,
        &sql,
        params![i64::from(filter.pending_only), filter.session_key],
    )
}

/// [`Claim::Ask`]: a new pending approval for `call`'s key, with what `ask` says.
pub(super) fn insert_pending(
    tx: &Connection,
    call: &Call<'_>,
    ask: &Ask,
    approval_id: &str,
    expires_ms: u64,
) -> Result<(), LedgerError> {
    let key = call.key;
    let created_ms = expires_ms.saturating_sub(ask.ttl_ms);
    tx.execute(
        &format!(
            "INSERT INTO approvals ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, \
             ?11, ?12, ?13, ?14, ?15, 'pending', 0, NULL, NULL, NULL)"
        ),
        params![
            approval_id,
            key.bridge_ref,
            key.session_id,
            key.request_id,
            call.digest,
            call.tool,
            ask.operation,
            ask.session_shown,
            ask.request_shown,
            ask.input_shown,
            ask.policy_sha256,
            ask.entry,
            ask.line.map(i64_of),
            i64_of(created_ms),
            i64_of(expires_ms),
        ],
    )
    .map_err(db)?;
    Ok(())
}

/// Store a person's decision on the approval `updated.id`, still pending: whether it was.
pub(super) fn write_decision(tx: &Connection, updated: &Approval) -> Result<bool, LedgerError> {
    let changed = tx
        .execute(
            "UPDATE approvals SET state = ?2, for_session = ?3, decided_by = ?4, note = ?5, \
             decided_ms = ?6 WHERE id = ?1 AND state = 'pending'",
            params![
                updated.id,
                updated.state.as_str(),
                i64::from(updated.for_session),
                updated.decided_by,
                updated.note,
                updated.decided_ms.map(i64_of),
            ],
        )
        .map_err(db)?;
    Ok(changed == 1)
}
