//! `ledger prune`'s transaction on SQLite, and the walk of the audit rows it shares with
//! `scan`.

use super::*;
use crate::ledger::prune::Pruning;

/// Visit the audit rows with `time_ms >= since_ms` (every row for 0) in `seq` order; a row
/// whose columns cannot be read is handed over as the reason. False when `visit` stopped.
pub(super) fn visit_audit(
    tx: &Connection,
    since_ms: u64,
    visit: &mut dyn FnMut(Result<StoredRecord, Break>) -> bool,
) -> Result<bool, LedgerError> {
    let mut stmt = tx
        .prepare(
            "SELECT seq, time_ms, prev, hash, body FROM audit \
                 WHERE ?1 = 0 OR time_ms >= ?1 ORDER BY seq",
        )
        .map_err(db)?;
    let mut rows = stmt.query(params![i64_of(since_ms)]).map_err(db)?;
    let mut last = 0u64;
    loop {
        let row = match rows.next() {
            Ok(Some(row)) => row,
            Ok(None) => break,
            Err(e) => {
                visit(Err(Break {
                    seq: last + 1,
                    reason: format!("cannot be read: {e}"),
                }));
                return Ok(false);
            }
        };
        let seq = row
            .get::<_, i64>(0)
            .ok()
            .and_then(|s| u64::try_from(s).ok());
        let read = || -> rusqlite::Result<StoredRecord> {
            Ok(StoredRecord {
                seq: seq.unwrap_or(0),
                time_ms: u64::try_from(row.get::<_, i64>(1)?).unwrap_or(u64::MAX),
                prev: row.get(2)?,
                hash: row.get(3)?,
                body: row.get(4)?,
            })
        };
        let item = match (seq, read()) {
            (Some(seq), Ok(record)) => {
                last = seq;
                Ok(record)
            }
            (seq, Err(e)) => Err(Break {
                seq: seq.unwrap_or(last + 1),
                reason: format!("cannot be read: {e}"),
            }),
            (None, Ok(_)) => Err(Break {
                seq: last + 1,
                reason: "its seq cannot be read".into(),
            }),
        };
        if !visit(item) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// [`Store::prune`] inside its write transaction.
pub(super) fn prune_in(
    tx: &Connection,
    pruning: &mut dyn Pruning,
) -> Result<Option<u64>, LedgerError> {
    let floor: Option<i64> = tx
        .query_row(
            "SELECT min(record_seq) FROM calls WHERE state = 'running'",
            [],
            |r| r.get(0),
        )
        .map_err(db)?;
    pruning.start(floor.and_then(|s| u64::try_from(s).ok()));
    if !visit_audit(tx, 0, &mut |row| pruning.visit(row))? {
        return Ok(None);
    }
    let head: Option<(i64, String)> = tx
        .query_row("SELECT seq, hash FROM head WHERE only = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()
        .map_err(db)?;
    let head = head.map(|(seq, hash)| (u64::try_from(seq).unwrap_or(u64::MAX), hash));
    let Some((cut, record)) = pruning.finish(head)? else {
        return Ok(None);
    };
    let seq = append(tx, &record)?;
    tx.execute("DELETE FROM audit WHERE seq <= ?1", params![i64_of(cut)])
        .map_err(db)?;
    tx.execute(
        "UPDATE calls SET envelope = NULL, exit_status = NULL, record_seq = NULL \
         WHERE record_seq <= ?1",
        params![i64_of(cut)],
    )
    .map_err(db)?;
    Ok(Some(seq))
}
