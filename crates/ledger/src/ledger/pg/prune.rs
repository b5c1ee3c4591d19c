//! `ledger prune`'s transaction on PostgreSQL, and the walk of the audit rows it shares with
//! `scan`.

use super::*;
use crate::ledger::prune::Pruning;

/// Visit the audit rows with `time_ms >= since_ms` (every row for 0) in `seq` order, 512 at a
/// time through a portal. False when `visit` stopped.
pub(super) fn visit_audit_in(
    tx: &mut Transaction<'_>,
    since_ms: u64,
    visit: &mut dyn FnMut(Result<StoredRecord, Break>) -> bool,
) -> Result<bool, LedgerError> {
    let since = i64_of(since_ms);
    let portal = tx
        .bind(
            "SELECT seq, time_ms, prev, hash, body FROM audit \
             WHERE $1::bigint = 0 OR time_ms >= $1::bigint ORDER BY seq",
            &[&since],
        )
        .map_err(db)?;
    loop {
        let rows = tx.query_portal(&portal, 512).map_err(db)?;
        if rows.is_empty() {
            break;
        }
        for row in &rows {
            let read = || -> Result<StoredRecord, LedgerError> {
                Ok(StoredRecord {
                    seq: u64_of(row.try_get(0).map_err(db)?, "seq")?,
                    time_ms: u64_of(row.try_get(1).map_err(db)?, "time")?,
                    prev: row.try_get(2).map_err(db)?,
                    hash: row.try_get(3).map_err(db)?,
                    body: row.try_get(4).map_err(db)?,
                })
            };
            let item = read().map_err(|e| Break {
                seq: row
                    .try_get::<_, i64>(0)
                    .ok()
                    .and_then(|s| u64::try_from(s).ok())
                    .unwrap_or(0),
                reason: format!("cannot be read: {e}"),
            });
            if !visit(item) {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// [`Store::prune`] inside its write transaction.
pub(super) fn prune_in(
    tx: &mut Transaction<'_>,
    pruning: &mut dyn Pruning,
) -> Result<Option<u64>, LedgerError> {
    let floor: Option<i64> = tx
        .query_one(
            "SELECT min(record_seq) FROM calls WHERE state = 'running'",
            &[],
        )
        .map_err(db)?
        .try_get(0)
        .map_err(db)?;
    pruning.start(floor.and_then(|s| u64::try_from(s).ok()));
    if !visit_audit_in(tx, 0, &mut |row| pruning.visit(row))? {
        return Ok(None);
    }
    let head = head(tx)?;
    let Some((cut, record)) = pruning.finish(head)? else {
        return Ok(None);
    };
    let seq = append(tx, &record)?;
    let cut = i64_of(cut);
    tx.execute("DELETE FROM audit WHERE seq <= $1", &[&cut])
        .map_err(db)?;
    tx.execute(
        "UPDATE calls SET envelope = NULL, exit_status = NULL, record_seq = NULL \
         WHERE record_seq <= $1",
        &[&cut],
    )
    .map_err(db)?;
    Ok(Some(seq))
}
