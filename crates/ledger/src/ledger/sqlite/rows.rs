//! The rows: reading a call, appending to the audit chain, the budget snapshot and the writes
//! of an admission or a takeover, the usage counters and the walk of stored records — each
//! inside a transaction its caller holds.

use super::*;

/// How many tables, indexes and the like the database holds (0: an empty file).
pub(super) fn object_count(conn: &rusqlite::Connection) -> Result<i64, LedgerError> {
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(db)
}

pub(super) fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(super) fn read_call(tx: &Connection, key: &Key) -> Result<Option<CallRow>, LedgerError> {
    let row = tx
        .query_row(
            "SELECT digest, state, attempt, lease_boot, lease_pid, lease_start, envelope, \
             exit_status FROM calls WHERE bridge_ref = ?1 AND session_id = ?2 AND request_id = ?3",
            params![key.bridge_ref, key.session_id, key.request_id],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, i64>(5)?,
                    r.get::<_, Option<String>>(6)?,
                    r.get::<_, Option<i64>>(7)?,
                ))
            },
        )
        .optional()
        .map_err(db)?;
    let Some((digest, state, attempt, boot_id, pid, start, envelope, exit)) = row else {
        return Ok(None);
    };
    let corrupt = |what: &str| LedgerError::Corrupt(format!("a call row has an invalid {what}"));
    let state = match state.as_str() {
        "running" => CallState::Running,
        "retryable" => CallState::Retryable,
        "final" => CallState::Final,
        _ => return Err(corrupt("state")),
    };
    let outcome = match (envelope, exit) {
        (Some(envelope), Some(exit)) => Some(Recorded {
            envelope,
            exit_status: u8::try_from(exit).map_err(|_| corrupt("exit status"))?,
        }),
        _ => None,
    };
    Ok(Some(CallRow {
        digest,
        state,
        attempt: u32::try_from(attempt).map_err(|_| corrupt("attempt"))?,
        lease: Lease {
            boot_id,
            pid: u32::try_from(pid).map_err(|_| corrupt("lease"))?,
            start_ticks: u64::try_from(start).map_err(|_| corrupt("lease"))?,
            heartbeat_ms: None,
        },
        outcome,
    }))
}

/// The chain's head: the last record's seq and hash (`0` and [`GENESIS`] for an empty chain).
/// One compiled statement for [`next_seq`] and [`append`], which a call's outcome runs both.
fn head(tx: &Connection) -> Result<(u64, String), LedgerError> {
    let mut stmt = tx
        .prepare_cached("SELECT seq, hash FROM head WHERE only = 1")
        .map_err(db)?;
    let head: Option<(i64, String)> = stmt
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(db)?;
    let (seq, hash) = head.unwrap_or((0, GENESIS.to_string()));
    let seq =
        u64::try_from(seq).map_err(|_| LedgerError::Corrupt("the audit head is invalid".into()))?;
    Ok((seq, hash))
}

/// The seq the next appended record gets.
pub(super) fn next_seq(tx: &Connection) -> Result<u64, LedgerError> {
    Ok(head(tx)?.0 + 1)
}

/// Append `record` to the chain; returns its seq.
pub(super) fn append(tx: &Connection, record: &AuditRecord) -> Result<u64, LedgerError> {
    let (seq, prev) = head(tx)?;
    let seq = seq + 1;
    let sealed = audit::seal(record, seq, &prev).map_err(LedgerError::Record)?;
    tx.execute(
        "INSERT INTO audit (seq, time_ms, prev, hash, body) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            i64_of(sealed.seq),
            i64_of(sealed.time_ms),
            sealed.prev,
            sealed.hash,
            sealed.body
        ],
    )
    .map_err(db)?;
    tx.execute(
        "INSERT INTO head (only, seq, hash) VALUES (1, ?1, ?2) \
         ON CONFLICT (only) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
        params![i64_of(sealed.seq), sealed.hash],
    )
    .map_err(db)?;
    Ok(sealed.seq)
}

/// Before a recorded envelope is printed again (SPEC §14.4): its audit record must be intact,
/// hold its digest and exit status, and still be linked into the chain (the next record's
/// `prev`, or the head). A ledger that fails this is never used to replay.
pub(super) fn check_covered(
    tx: &Connection,
    key: &Key,
    recorded: &Recorded,
) -> Result<(), LedgerError> {
    let tampered = |why: &str| LedgerError::Tampered(why.to_string());
    let seq: Option<i64> = tx
        .query_row(
            "SELECT record_seq FROM calls WHERE bridge_ref = ?1 AND session_id = ?2 \
             AND request_id = ?3",
            params![key.bridge_ref, key.session_id, key.request_id],
            |r| r.get(0),
        )
        .map_err(db)?;
    let seq = seq.ok_or_else(|| tampered("a stored envelope has no audit record"))?;
    let (hash, body): (String, String) = tx
        .query_row(
            "SELECT hash, body FROM audit WHERE seq = ?1",
            params![seq],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(db)?
        .ok_or_else(|| tampered("the stored envelope's audit record is missing"))?;
    audit::covers(&body, &hash, &recorded.envelope, recorded.exit_status)
        .map_err(|why| LedgerError::Tampered(format!("record {seq}: {why}")))?;
    let next: Option<String> = tx
        .query_row(
            "SELECT prev FROM audit WHERE seq = ?1",
            params![seq + 1],
            |r| r.get(0),
        )
        .optional()
        .map_err(db)?;
    let linked = match next {
        Some(prev) => prev == hash,
        None => tx
            .query_row("SELECT seq, hash FROM head WHERE only = 1", [], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })
            .optional()
            .map_err(db)?
            .is_some_and(|(head, head_hash)| head == seq && head_hash == hash),
    };
    if !linked {
        return Err(LedgerError::Tampered(format!(
            "record {seq}: it is no longer linked into the chain (edited)"
        )));
    }
    Ok(())
}

/// What the ledger holds about `call`, its session and the session's other running calls —
/// and, for a call with `ask` on a ledger that has the table (`approvals`), the key's approval
/// and the session's grant for the tool.
pub(super) fn read_snapshot(
    tx: &Connection,
    call: &Call<'_>,
    approvals: bool,
) -> Result<Snapshot, LedgerError> {
    let key = call.key;
    let row = read_call(tx, key)?;
    let (calls, adapter_ms): (i64, i64) = tx
        .query_row(
            "SELECT calls, adapter_ms FROM session_usage WHERE bridge_ref = ?1 AND session_id = ?2",
            params![key.bridge_ref, key.session_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(db)?
        .unwrap_or((0, 0));
    let tool_calls: i64 = tx
        .query_row(
            "SELECT calls FROM tool_usage WHERE bridge_ref = ?1 AND session_id = ?2 AND tool = ?3",
            params![key.bridge_ref, key.session_id, call.tool],
            |r| r.get(0),
        )
        .optional()
        .map_err(db)?
        .unwrap_or(0);
    let running = {
        let mut stmt = tx.prepare_cached(RUNNING_CALLS).map_err(db)?;
        let rows = stmt
            .query_map(
                params![key.bridge_ref, key.session_id, key.request_id],
                |r| {
                    Ok(Lease {
                        boot_id: r.get(0)?,
                        pid: u32::try_from(r.get::<_, i64>(1)?).unwrap_or(u32::MAX),
                        start_ticks: u64::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
                        heartbeat_ms: None,
                    })
                },
            )
            .map_err(db)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(db)?
    };
    let (approval, session_grant) = if call.ask.is_some() && approvals {
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

/// Record `call` as admitted (running, attempt `attempt`, under `lease`) and count it in the
/// session's and the tool's usage.
pub(super) fn write_admit(
    tx: &Connection,
    call: &Call<'_>,
    lease: &Lease,
    attempt: u32,
    now: i64,
) -> Result<(), LedgerError> {
    let key = call.key;
    tx.execute(
        "INSERT INTO calls (bridge_ref, session_id, request_id, digest, tool, state, \
         attempt, lease_boot, lease_pid, lease_start, envelope, exit_status, updated_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?6, ?7, ?8, ?9, NULL, NULL, ?10) \
         ON CONFLICT (bridge_ref, session_id, request_id) DO UPDATE SET \
         state = 'running', attempt = excluded.attempt, lease_boot = excluded.lease_boot, \
         lease_pid = excluded.lease_pid, lease_start = excluded.lease_start, \
         envelope = NULL, exit_status = NULL, updated_ms = excluded.updated_ms",
        params![
            key.bridge_ref,
            key.session_id,
            key.request_id,
            call.digest,
            call.tool,
            i64::from(attempt),
            lease.boot_id,
            i64::from(lease.pid),
            i64_of(lease.start_ticks),
            now
        ],
    )
    .map_err(db)?;
    tx.execute(
        "INSERT INTO session_usage (bridge_ref, session_id, calls, adapter_ms) \
         VALUES (?1, ?2, 1, 0) ON CONFLICT (bridge_ref, session_id) \
         DO UPDATE SET calls = calls + 1",
        params![key.bridge_ref, key.session_id],
    )
    .map_err(db)?;
    tx.execute(
        "INSERT INTO tool_usage (bridge_ref, session_id, tool, calls) \
         VALUES (?1, ?2, ?3, 1) ON CONFLICT (bridge_ref, session_id, tool) \
         DO UPDATE SET calls = calls + 1",
        params![key.bridge_ref, key.session_id, call.tool],
    )
    .map_err(db)?;
    Ok(())
}

/// Take over `key`'s running call: its lease becomes `lease`.
pub(super) fn write_takeover(
    tx: &Connection,
    key: &Key,
    lease: &Lease,
    now: i64,
) -> Result<(), LedgerError> {
    tx.execute(
        "UPDATE calls SET lease_boot = ?4, lease_pid = ?5, lease_start = ?6, \
         state = 'running', updated_ms = ?7 \
         WHERE bridge_ref = ?1 AND session_id = ?2 AND request_id = ?3",
        params![
            key.bridge_ref,
            key.session_id,
            key.request_id,
            lease.boot_id,
            i64::from(lease.pid),
            i64_of(lease.start_ticks),
            now
        ],
    )
    .map_err(db)?;
    Ok(())
}

/// [`Store::scan`]'s `usage`, inside its read transaction: the counters as stored, and one
/// call per running claim (counted when it was admitted, its record not written yet).
pub(super) fn read_usage(conn: &Connection, usage: &mut Usage) -> Result<(), LedgerError> {
    let mut stmt = conn
        .prepare("SELECT bridge_ref, session_id, calls, adapter_ms FROM session_usage")
        .map_err(db)?;
    let mut rows = stmt.query([]).map_err(db)?;
    while let Some(row) = rows.next().map_err(db)? {
        let key: (String, String) = (row.get(0).map_err(db)?, row.get(1).map_err(db)?);
        let counted: (i64, i64) = (row.get(2).map_err(db)?, row.get(3).map_err(db)?);
        usage.stored.sessions.insert(key, counted);
    }
    let mut stmt = conn
        .prepare("SELECT bridge_ref, session_id, tool, calls FROM tool_usage")
        .map_err(db)?;
    let mut rows = stmt.query([]).map_err(db)?;
    while let Some(row) = rows.next().map_err(db)? {
        let key: (String, String, String) = (
            row.get(0).map_err(db)?,
            row.get(1).map_err(db)?,
            row.get(2).map_err(db)?,
        );
        usage.stored.tools.insert(key, row.get(3).map_err(db)?);
    }
    let mut stmt = conn
        .prepare("SELECT bridge_ref, session_id, tool FROM calls WHERE state = 'running'")
        .map_err(db)?;
    let mut rows = stmt.query([]).map_err(db)?;
    while let Some(row) = rows.next().map_err(db)? {
        let (bridge, session, tool): (String, String, String) = (
            row.get(0).map_err(db)?,
            row.get(1).map_err(db)?,
            row.get(2).map_err(db)?,
        );
        usage.running.add(&bridge, &session, Some(&tool), 0);
    }
    Ok(())
}

/// [`Store::scan`]'s `stored` visit, inside its read transaction.
pub(super) fn visit_stored(
    conn: &Connection,
    visit: &mut StoredVisit<'_>,
) -> Result<(), LedgerError> {
    {
        let mut stmt = conn
            .prepare(
                "SELECT record_seq, envelope, exit_status FROM calls \
                 WHERE envelope IS NOT NULL",
            )
            .map_err(db)?;
        let mut rows = stmt.query([]).map_err(db)?;
        while let Some(row) = rows.next().map_err(db)? {
            let seq = row
                .get::<_, Option<i64>>(0)
                .map_err(db)?
                .and_then(|s| u64::try_from(s).ok());
            let envelope: String = row.get(1).map_err(db)?;
            let exit = row
                .get::<_, Option<i64>>(2)
                .map_err(db)?
                .and_then(|e| u8::try_from(e).ok())
                .unwrap_or(u8::MAX);
            if !visit(seq, &envelope, exit) {
                break;
            }
        }
    }
    Ok(())
}

/// [`Store::backup`]: the copy is made under a temporary name in `dest`'s folder (`O_CREAT |
/// O_EXCL | O_NOFOLLOW`, 0600), filled by SQLite's online backup in ONE step (one read
/// snapshot of the ledger, so the copy is consistent while dispatchers write), left without a
/// WAL, synced, and moved to `dest` by a rename that replaces nothing. On any failure the
/// temporary file is removed and `dest` is not there.
pub(super) fn backup_to(store: &SqliteStore, dest: &Path) -> Result<(), BackupError> {
    let write = |what: &str, e: &dyn std::fmt::Display| BackupError::Write(format!("{what}: {e}"));
    let name = dest
        .file_name()
        .ok_or_else(|| BackupError::Write("the destination has no file name".into()))?;
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let parent = std::path::absolute(parent).map_err(|e| write("its folder", &e))?;
    let dir = pfs::open_dir_path(&parent).map_err(|e| write("its folder cannot be opened", &e))?;
    let cname = pfs::cstring(name.as_bytes()).map_err(|e| write("its name", &e))?;
    match pfs::lstat_at(dir.as_fd(), &cname) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Ok(_) => return Err(BackupError::Exists),
        Err(e) => return Err(write("the destination cannot be looked at", &e)),
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut temp = b".".to_vec();
    temp.extend_from_slice(name.as_bytes());
    temp.extend_from_slice(format!(".{}.{nanos}.backup", std::process::id()).as_bytes());
    let temp = pfs::cstring(&temp).map_err(|e| write("its name", &e))?;
    let remove = |suffix: &[u8]| {
        let mut n = temp.to_bytes().to_vec();
        n.extend_from_slice(suffix);
        if let Ok(n) = pfs::cstring(&n) {
            let _ = pfs::unlink_at(dir.as_fd(), &n);
        }
    };
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = pfs::open_at(dir.as_fd(), &temp, flags, Mode::from_raw_mode(0o600))
        .map_err(|e| write("the destination's folder", &e))?;
    let copied = (|| -> Result<(), BackupError> {
        pfs::set_mode(fd.as_fd(), Mode::from_raw_mode(0o600))
            .map_err(|e| write("the copy's mode", &e))?;
        let path = parent.join(std::ffi::OsStr::from_bytes(temp.to_bytes()));
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let mut to =
            Connection::open_with_flags(&path, flags).map_err(|e| write("the copy", &e))?;
        {
            let backup = rusqlite::backup::Backup::new(&store.conn, &mut to)
                .map_err(|e| write("the copy", &e))?;
            loop {
                match backup.step(-1).map_err(|e| write("the copy", &e))? {
                    rusqlite::backup::StepResult::Done => break,
                    _ if Instant::now() >= store.deadline => {
                        return Err(BackupError::Ledger(LedgerError::Locked))
                    }
                    _ => std::thread::sleep(PREPARE_RETRY),
                }
            }
        }
        // A ledger read as immutable that changed meanwhile: the copy may mix two states.
        store.check_guard()?;
        // The copy is in WAL mode, as the ledger: fold its WAL in and close it, so that the
        // file stands alone.
        to.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(|e| write("the copy", &e))?;
        to.close().map_err(|(_, e)| write("the copy", &e))?;
        pfs::fsync(fd.as_fd()).map_err(|e| write("the copy cannot be synced", &e))?;
        Ok(())
    })();
    for side in [&b"-wal"[..], b"-shm", b"-journal"] {
        remove(side);
    }
    if let Err(err) = copied {
        remove(b"");
        return Err(err);
    }
    let moved = rustix::fs::renameat_with(
        dir.as_fd(),
        temp.as_c_str(),
        dir.as_fd(),
        cname.as_c_str(),
        rustix::fs::RenameFlags::NOREPLACE,
    );
    match moved {
        Ok(()) => pfs::fsync(dir.as_fd()).map_err(|e| write("its folder cannot be synced", &e)),
        Err(e) => {
            remove(b"");
            Err(if e == rustix::io::Errno::EXIST {
                BackupError::Exists
            } else {
                write("the copy cannot be moved into place", &io::Error::from(e))
            })
        }
    }
}
