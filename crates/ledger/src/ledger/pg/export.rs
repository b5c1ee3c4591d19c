//! `ledger backup` of a PostgreSQL ledger (SPEC §19.1): a JSON Lines export of every table,
//! read in ONE snapshot, and its counterpart [`restore`] into a freshly migrated database.
//!
//! The first line is `{"ptd_ledger_export":1,"schema":N}`; every other line is
//! `{"table":NAME,"row":{…}}`, the row as PostgreSQL's `row_to_json` writes it.

use super::{db, BackupError, LedgerError, SCHEMA_VERSION};
use postgres::{Client, IsolationLevel};
use ptd_sys::fs::{self as pfs, Mode, OFlags};
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The tables, in the order a restore inserts them.
const TABLES: [&str; 6] = [
    "calls",
    "session_usage",
    "tool_usage",
    "audit",
    "head",
    "approvals",
];

/// The largest export [`restore`] reads.
const MAX_EXPORT: u64 = 1 << 30;

fn write_err(what: &str, e: &dyn std::fmt::Display) -> BackupError {
    BackupError::Write(format!("{what}: {e}"))
}

/// Write the export to the new file `dest` (0600, never replacing anything).
pub(super) fn export(client: &mut Client, dest: &Path) -> Result<(), BackupError> {
    let name = dest
        .file_name()
        .ok_or_else(|| BackupError::Write("the destination has no file name".into()))?;
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir =
        pfs::open_dir_path(parent).map_err(|e| write_err("its folder cannot be opened", &e))?;
    let cname = pfs::cstring(name.as_bytes()).map_err(|e| write_err("its name", &e))?;
    if pfs::lstat_at(dir.as_fd(), &cname).is_ok() {
        return Err(BackupError::Exists);
    }
    let mut tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::Serializable)
        .read_only(true)
        .deferrable(true)
        .start()
        .map_err(|e| BackupError::Ledger(db(e)))?;
    let mut out = format!("{{\"ptd_ledger_export\":1,\"schema\":{SCHEMA_VERSION}}}\n");
    for table in TABLES {
        let rows = tx
            .query(
                &format!("SELECT row_to_json(t)::text FROM {table} t ORDER BY 1"),
                &[],
            )
            .map_err(|e| BackupError::Ledger(db(e)))?;
        for row in rows {
            let json: String = row.try_get(0).map_err(|e| BackupError::Ledger(db(e)))?;
            out.push_str(&format!("{{\"table\":\"{table}\",\"row\":{json}}}\n"));
        }
    }
    tx.commit().map_err(|e| BackupError::Ledger(db(e)))?;
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
    let fd = pfs::open_at(dir.as_fd(), &cname, flags, Mode::from_raw_mode(0o600)).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            BackupError::Exists
        } else {
            write_err("the destination", &e)
        }
    })?;
    let mut file = std::fs::File::from(fd);
    let written = file
        .write_all(out.as_bytes())
        .and_then(|()| file.sync_all());
    if let Err(e) = written {
        drop(file);
        let _ = pfs::unlink_at(dir.as_fd(), &cname);
        return Err(write_err("the export cannot be written", &e));
    }
    Ok(())
}

/// Read the export at `src` into `client`'s database, which must hold the current schema and
/// no call, record or approval yet; all in ONE transaction.
pub(crate) fn restore(client: &mut Client, src: &Path) -> Result<u64, LedgerError> {
    let bytes = pfs::read_file(src, MAX_EXPORT)
        .map_err(|e| LedgerError::Database(format!("the export cannot be read: {e}")))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| LedgerError::Database("the export is not UTF-8".into()))?;
    let mut lines = text.lines();
    let header: serde_json::Value = lines
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| LedgerError::Database("the export has no header line".into()))?;
    if header.get("ptd_ledger_export").and_then(|v| v.as_u64()) != Some(1)
        || header.get("schema").and_then(|v| v.as_i64()) != Some(SCHEMA_VERSION)
    {
        return Err(LedgerError::Database(
            "not an export of this ledger schema".into(),
        ));
    }
    let mut tx = client.transaction().map_err(db)?;
    let present: i64 = tx
        .query_one(
            "SELECT (SELECT count(*) FROM calls) + (SELECT count(*) FROM audit) \
             + (SELECT count(*) FROM approvals)",
            &[],
        )
        .and_then(|r| r.try_get(0))
        .map_err(db)?;
    if present != 0 {
        return Err(LedgerError::Database(
            "the database's ledger is not empty: a restore needs a new one".into(),
        ));
    }
    let mut count = 0;
    for (n, line) in lines.enumerate() {
        let value: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| LedgerError::Database(format!("export line {}: {e}", n + 2)))?;
        let table = value.get("table").and_then(|t| t.as_str());
        let table = TABLES.iter().find(|t| Some(**t) == table).ok_or_else(|| {
            LedgerError::Database(format!("export line {}: no known table", n + 2))
        })?;
        let row = value
            .get("row")
            .map(ToString::to_string)
            .ok_or_else(|| LedgerError::Database(format!("export line {}: no row", n + 2)))?;
        tx.execute(
            &format!("INSERT INTO {table} SELECT * FROM json_populate_record(NULL::{table}, $1::text::json)"),
            &[&row],
        )
        .map_err(db)?;
        count += 1;
    }
    tx.commit().map_err(db)?;
    Ok(count)
}
