//! The [`Store`] on one SQLite file (rusqlite, SQLite compiled in): the only place that knows
//! the ledger is SQLite.
//!
//! - **The file.** Made by us under a temporary name (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode
//!   exactly 0600), given the schema, checkpointed and synced, then renamed into place with
//!   `RENAME_NOREPLACE` ([`create_ledger`]); for the main job the file, its `-wal` and `-shm`
//!   must be ours and not group/other-writable, and the folder not writable by another user
//!   ([`own_file`], [`own_folder`]); an existing one must be a regular file (never a symlink, FIFO,
//!   device or folder: looked at with `lstat` and again with `fstat` on what was opened),
//!   writable by its owner, and still the same inode when SQLite has opened it (SQLite opens
//!   it with `SQLITE_OPEN_NOFOLLOW` and without `SQLITE_OPEN_CREATE`). Our descriptor is closed
//!   before SQLite takes any lock: closing a descriptor drops the process's POSIX locks on the
//!   file.
//! - **Readers write nothing.** `audit` opens the ledger with `SQLITE_OPEN_READ_ONLY`
//!   ([`SqliteStore::open_read_only`]): through its `-wal` and `-shm` when both are there and
//!   readable, else (no WAL, or an empty one) as `immutable=1`, checked afterwards
//!   ([`ReadGuard`]); never a file made beside it, whoever owns it.
//! - **Backups.** [`Store::backup`] copies the ledger with SQLite's online backup in one step
//!   (one read snapshot) into a new 0600 file renamed into place without replacing
//!   ([`backup_to`]).
//! - **Ours or refused.** `PRAGMA application_id` is [`APPLICATION_ID`] and `user_version` is
//!   [`SCHEMA_VERSION`]; an existing empty file is never given the schema; anything else (another application's
//!   database, a newer schema, not a database) is refused without writing to it — but a ledger
//!   of [`MIGRATES_FROM`], which the main job brings to [`SCHEMA_VERSION`] in place, in one
//!   transaction ([`SqliteStore::migrate`]), and a reader reads as it is (it has no approvals).
//!   `trusted_schema = OFF`, so a crafted file's views and triggers cannot call functions.
//! - **Concurrency and durability.** WAL (readers never block writers), every write step one
//!   short `BEGIN IMMEDIATE` transaction (the write lock taken up front, so no deadlock and no
//!   `SQLITE_BUSY` on upgrade), the busy handler waiting until the caller's deadline, and
//!   `synchronous = FULL`: the WAL is fsynced at every commit, so a `running` row is on disk
//!   before the adapter starts and an outcome before its envelope is printed, power loss
//!   included (`NORMAL` would keep them through a crash of the process but not of the host,
//!   and a call lost that way could run twice). `NORMAL` only when the host chose it
//!   (`--ledger-durability normal`, [`Store::set_durability`]): then the checkpoint after the
//!   envelope is what syncs the WAL and the file.

use super::audit::{self, Break, StoredRecord, GENESIS};
use super::{
    Approval, ApprovalError, ApprovalFilter, AuditRecord, BackupError, Call, CallRow, CallState,
    Claim, Decision, Durability, Finished, Key, Lease, LedgerError, Outcome, Recorded, Settle,
    Snapshot, Store, StoredVisit, Usage,
};
use ptd_sys::fs::{self as pfs, FileType, Mode, OFlags};
use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

mod approvals;
mod files;
mod prune;
mod rows;

use approvals::*;
use files::*;
#[cfg(test)]
pub(super) use files::{read_mode, uri_path, ReadMode};
use prune::*;
use rows::*;

/// `PRAGMA application_id` of a ledger: "PTDL".
pub(super) const APPLICATION_ID: i64 = 0x5054_444c;
/// `PRAGMA user_version` of this schema: 4, which added the `approvals` table (SPEC §18).
pub(super) const SCHEMA_VERSION: i64 = 4;
/// The one older schema that is still read (by `audit`, as it is) and brought to
/// [`SCHEMA_VERSION`] in place when the main job opens it ([`SqliteStore::migrate`]): version
/// 3 is version 4 without the approvals.
pub(super) const MIGRATES_FROM: i64 = 3;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS calls (
    bridge_ref  TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    digest      TEXT NOT NULL,
    tool        TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('running', 'retryable', 'final')),
    attempt     INTEGER NOT NULL,
    lease_boot  TEXT NOT NULL,
    lease_pid   INTEGER NOT NULL,
    lease_start INTEGER NOT NULL,
    envelope    TEXT,
    exit_status INTEGER,
    record_seq  INTEGER,
    updated_ms  INTEGER NOT NULL,
    PRIMARY KEY (bridge_ref, session_id, request_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS calls_running ON calls (bridge_ref, session_id) WHERE state = 'running';
CREATE TABLE IF NOT EXISTS session_usage (
    bridge_ref TEXT NOT NULL,
    session_id TEXT NOT NULL,
    calls      INTEGER NOT NULL,
    adapter_ms INTEGER NOT NULL,
    PRIMARY KEY (bridge_ref, session_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tool_usage (
    bridge_ref TEXT NOT NULL,
    session_id TEXT NOT NULL,
    tool       TEXT NOT NULL,
    calls      INTEGER NOT NULL,
    PRIMARY KEY (bridge_ref, session_id, tool)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS audit (
    seq     INTEGER PRIMARY KEY,
    time_ms INTEGER NOT NULL,
    prev    TEXT NOT NULL,
    hash    TEXT NOT NULL,
    body    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_time ON audit (time_ms);
CREATE TABLE IF NOT EXISTS head (
    only INTEGER PRIMARY KEY CHECK (only = 1),
    seq  INTEGER NOT NULL,
    hash TEXT NOT NULL
);
";

/// How many pages the WAL may hold before a commit checkpoints it (SQLite's default is 1000).
///
/// A dispatcher is usually the only connection while it runs, so when it opens the ledger it
/// rebuilds the WAL's index by reading every frame the WAL holds since it was last reset: with
/// the default, up to 4 MiB on every call. An admitted call writes about 14 pages, so 128 keeps
/// that read under half a MiB and checkpoints (copying the pages into the file, two `fsync`s)
/// about every ninth call.
const WAL_CHECKPOINT_PAGES: u32 = 128;

/// The leases of a session's calls in flight but the key's own, for `--max-concurrent`.
/// `INDEXED BY` the partial index: without statistics SQLite would walk the primary key's
/// prefix instead — every call the session ever made, envelopes included, on every call.
pub(super) const RUNNING_CALLS: &str = "SELECT lease_boot, lease_pid, lease_start FROM calls \
     INDEXED BY calls_running WHERE bridge_ref = ?1 AND session_id = ?2 AND state = 'running' \
     AND request_id <> ?3";

/// The ledger on SQLite.
pub(super) struct SqliteStore {
    conn: Connection,
    deadline: Instant,
    /// For a ledger read as immutable (see [`SqliteStore::open_read_only`]): how its file and
    /// WAL looked before; a [`Store::scan`] that ends with them changed is not trusted.
    guard: Option<ReadGuard>,
    /// Whether the ledger has the approvals table: false only for a version-3 ledger opened
    /// read-only, which has no approval.
    approvals: bool,
}

fn db(err: rusqlite::Error) -> LedgerError {
    match err.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => LedgerError::Locked,
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
            LedgerError::Corrupt(err.to_string())
        }
        Some(ErrorCode::ReadOnly) => LedgerError::ReadOnly,
        _ => LedgerError::Database(err.to_string()),
    }
}

/// The pause between two looks at a ledger another dispatcher is setting up.
const PREPARE_RETRY: std::time::Duration = std::time::Duration::from_millis(5);

impl SqliteStore {
    /// Open the ledger at `path` (creating it when there is none), waiting for other writers
    /// until `deadline`. The read-only openings of `audit` and `ledger backup` are
    /// `Ledger::open_existing`'s.
    pub(super) fn open(path: &Path, deadline: Instant) -> Result<SqliteStore, LedgerError> {
        SqliteStore::open_found(path, deadline).map(|(store, _)| store)
    }

    /// [`SqliteStore::open`], and the schema version the file had before it was opened:
    /// `None` for a ledger this call made (what `ledger migrate` reports).
    pub(super) fn open_found(
        path: &Path,
        deadline: Instant,
    ) -> Result<(SqliteStore, Option<i64>), LedgerError> {
        let name = path.file_name().ok_or(LedgerError::NoFileName)?;
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let parent = std::path::absolute(parent).map_err(LedgerError::Folder)?;
        let dir = pfs::open_dir_path(&parent).map_err(LedgerError::Folder)?;
        let folder_st = rustix::fs::fstat(&dir).map_err(|e| LedgerError::Folder(e.into()))?;
        own_folder(&folder_st)?;
        let cname = pfs::cstring(name.as_bytes()).map_err(LedgerError::Open)?;
        let (fd, created) = open_file(&parent, dir.as_fd(), &cname)?;
        let st = rustix::fs::fstat(&fd).map_err(|e| LedgerError::Open(e.into()))?;
        let mut wal = name.as_bytes().to_vec();
        wal.extend_from_slice(b"-wal");
        let wal_name = pfs::cstring(&wal).map_err(LedgerError::Open)?;
        let wal_st = pfs::lstat_at(dir.as_fd(), &wal_name).ok();
        let mut shm = name.as_bytes().to_vec();
        shm.extend_from_slice(b"-shm");
        let shm_name = pfs::cstring(&shm).map_err(LedgerError::Open)?;
        if let Some(st) = &wal_st {
            own_file(st, "the WAL")?;
        }
        if let Ok(st) = pfs::lstat_at(dir.as_fd(), &shm_name) {
            own_file(&st, "the shm")?;
        }
        let wal_before = wal_st.map(|st| identity(&st));
        if pfs::kind(&st) != FileType::RegularFile {
            return Err(LedgerError::NotRegular(kind_name(pfs::kind(&st))));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let conn = Connection::open_with_flags(parent.join(name), flags).map_err(|e| {
            match e.sqlite_error_code() {
                Some(ErrorCode::CannotOpen) => {
                    LedgerError::Open(io::Error::other("SQLite cannot open the file"))
                }
                _ => db(e),
            }
        })?;
        // SQLite opens lazily: nothing was read or locked yet. Same inode as ours?
        match pfs::lstat_at(dir.as_fd(), &cname) {
            Ok(now) if identity(&now) == identity(&st) => {}
            _ => return Err(LedgerError::Replaced),
        }
        drop(fd);
        let mut store = SqliteStore {
            conn,
            deadline,
            guard: None,
            approvals: true,
        };
        // While another dispatcher creates the ledger or switches it to WAL, SQLite may answer
        // BUSY at once, without its busy handler (a lock it will not wait for, to avoid a
        // deadlock): look again until the deadline, as the handler would.
        loop {
            match store.prepare() {
                Err(LedgerError::Locked) if Instant::now() < deadline => {
                    std::thread::sleep(PREPARE_RETRY);
                }
                // The WAL is open now (SQLite opens, or makes, it at the first read): its name
                // is made durable before anything is claimed.
                done => {
                    let found = done?;
                    settle(dir.as_fd(), &wal_name, created, wal_before)?;
                    return Ok((store, (!created).then_some(found)));
                }
            }
        }
    }

    /// Open the existing ledger at `path` only to read it (`audit`, `ledger backup`; SPEC
    /// §14.4): `SQLITE_OPEN_READ_ONLY`, no file made or changed beside it, for any user who
    /// can read it. Its `-wal` and `-shm`, when both there and readable, are used as they are
    /// ([`ReadMode::Shared`]); a ledger without a WAL, or with an empty one, is read as
    /// immutable ([`ReadMode::Immutable`]) and checked again when read ([`ReadGuard`]). The
    /// owner's write bit, the owners and the folder are not looked at: reading harms nothing.
    pub(super) fn open_read_only(
        path: &Path,
        deadline: Instant,
    ) -> Result<SqliteStore, LedgerError> {
        let name = path.file_name().ok_or(LedgerError::NoFileName)?;
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let parent = std::path::absolute(parent).map_err(LedgerError::Folder)?;
        let dir = pfs::open_dir_path(&parent).map_err(LedgerError::Folder)?;
        let cname = pfs::cstring(name.as_bytes()).map_err(LedgerError::Open)?;
        let st = match pfs::lstat_at(dir.as_fd(), &cname) {
            Ok(st) => st,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(LedgerError::Missing),
            Err(e) => return Err(LedgerError::Open(e)),
        };
        if pfs::kind(&st) != FileType::RegularFile {
            return Err(LedgerError::NotRegular(kind_name(pfs::kind(&st))));
        }
        let read = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
        let fd =
            pfs::open_at(dir.as_fd(), &cname, read, Mode::empty()).map_err(LedgerError::Open)?;
        let st = rustix::fs::fstat(&fd).map_err(|e| LedgerError::Open(e.into()))?;
        if pfs::kind(&st) != FileType::RegularFile {
            return Err(LedgerError::NotRegular(kind_name(pfs::kind(&st))));
        }
        let side = |suffix: &[u8]| {
            let mut n = name.as_bytes().to_vec();
            n.extend_from_slice(suffix);
            pfs::cstring(&n).map_err(LedgerError::Open)
        };
        let (wal_name, shm_name) = (side(b"-wal")?, side(b"-shm")?);
        let look = |n: &std::ffi::CStr| {
            pfs::lstat_at(dir.as_fd(), n).ok().map(|st| {
                let readable = pfs::kind(&st) == FileType::RegularFile
                    && pfs::open_at(dir.as_fd(), n, read, Mode::empty()).is_ok();
                (st, readable)
            })
        };
        let (wal, shm) = (look(&wal_name), look(&shm_name));
        let mode = read_mode(
            wal.as_ref().map(|(st, r)| (st, *r)),
            shm.as_ref().map(|(st, r)| (st, *r)),
        )?;
        let guard = match mode {
            ReadMode::Shared => None,
            ReadMode::Immutable => Some(ReadGuard::new(&dir, &cname, &wal_name)?),
        };
        let conn = connect_read_only(&parent.join(name), mode)?;
        match pfs::lstat_at(dir.as_fd(), &cname) {
            Ok(now) if identity(&now) == identity(&st) => {}
            _ => return Err(LedgerError::Replaced),
        }
        drop(fd);
        let mut store = SqliteStore {
            conn,
            deadline,
            guard,
            approvals: true,
        };
        store.arm()?;
        distrust_schema(&store.conn)?;
        store
            .conn
            .execute_batch("PRAGMA cell_size_check = ON; PRAGMA query_only = ON;")
            .map_err(db)?;
        // A reader never checkpoints, and so never deletes the WAL, when it closes.
        store
            .conn
            .set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                true,
            )
            .map_err(db)?;
        loop {
            match store.check_ours() {
                Err(LedgerError::Locked) if Instant::now() < deadline => {
                    std::thread::sleep(PREPARE_RETRY);
                }
                done => return done.map(|()| store),
            }
        }
    }

    /// The read-only half of [`SqliteStore::prepare`]: our `application_id` and schema.
    fn check_ours(&mut self) -> Result<(), LedgerError> {
        let id = self.pragma_int("application_id")?;
        if id == 0 {
            return Err(LedgerError::Foreign(if object_count(&self.conn)? != 0 {
                "a database of another application".into()
            } else {
                "an empty file, not a complete ledger".into()
            }));
        }
        if id != APPLICATION_ID {
            return Err(LedgerError::Foreign(format!(
                "a database of another application (application_id {id:#x})"
            )));
        }
        let version = self.pragma_int("user_version")?;
        if version != SCHEMA_VERSION && version != MIGRATES_FROM {
            return Err(LedgerError::Foreign(format!(
                "schema version {version}, this dispatcher reads {SCHEMA_VERSION}"
            )));
        }
        // Read as it is: a version-3 ledger has no approvals.
        self.approvals = version == SCHEMA_VERSION;
        Ok(())
    }

    /// For a ledger read as immutable: its file and WAL must still be as they were before
    /// it was opened, or what was read may mix two states ([`LedgerError::ChangedWhileRead`]).
    fn check_guard(&self) -> Result<(), LedgerError> {
        match &self.guard {
            Some(guard) if !guard.unchanged() => Err(LedgerError::ChangedWhileRead),
            _ => Ok(()),
        }
    }

    fn arm(&mut self) -> Result<(), LedgerError> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        self.conn
            .busy_timeout(left.max(Duration::from_millis(1)))
            .map_err(db)
    }

    /// Check the file is our ledger (a new one was made whole before it was moved here), WAL,
    /// synchronous FULL; bring a version-3 ledger to this version. Returns the version found.
    fn prepare(&mut self) -> Result<i64, LedgerError> {
        self.arm()?;
        distrust_schema(&self.conn)?;
        self.conn
            .execute_batch("PRAGMA cell_size_check = ON;")
            .map_err(db)?;
        let mut id = self.pragma_int("application_id")?;
        if id == 0 {
            if object_count(&self.conn)? != 0 {
                // Tables but no id of ours: another application's database — unless another
                // dispatcher made this file a ledger between the two looks (its tables and
                // id are one transaction, so the id says which). Nothing is written.
                id = self.pragma_int("application_id")?;
                if id == 0 {
                    return Err(LedgerError::Foreign(
                        "a database of another application".into(),
                    ));
                }
            } else {
                // A new ledger is made whole under another name and moved into place: an
                // existing file without our schema (empty, a copy without its WAL, planted)
                // is never made a ledger (SPEC §14.4).
                return Err(LedgerError::Foreign(
                    "an empty file, not a complete ledger".into(),
                ));
            }
        }
        if id != APPLICATION_ID {
            return Err(LedgerError::Foreign(format!(
                "a database of another application (application_id {id:#x})"
            )));
        }
        let version = self.pragma_int("user_version")?;
        if version != SCHEMA_VERSION && version != MIGRATES_FROM {
            return Err(LedgerError::Foreign(format!(
                "schema version {version}, this dispatcher reads {SCHEMA_VERSION}"
            )));
        }
        // WAL is kept in the file's header: it is asked, and set only when it is not (setting
        // it again is a no-op that still does work).
        let mut mode: String = self
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .map_err(db)?;
        if !mode.eq_ignore_ascii_case("wal") {
            mode = self
                .conn
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
                .map_err(db)?;
        }
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(LedgerError::Database(format!(
                "the ledger cannot use WAL (journal mode {mode})"
            )));
        }
        self.conn
            .execute_batch(&format!(
                "PRAGMA synchronous = FULL; PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES};"
            ))
            .map_err(db)?;
        // Each dispatcher is usually the ledger's last connection when it closes, and SQLite
        // would then checkpoint the WAL into the file and delete it — and the next dispatcher
        // would make a new WAL and sync the folder for it. The main job checkpoints itself
        // instead, after its envelope ([`Store::checkpoint`]: the WAL emptied, not deleted),
        // and the automatic checkpoint (every [`WAL_CHECKPOINT_PAGES`] pages, inside a
        // commit) bounds the WAL in between.
        self.conn
            .set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                true,
            )
            .map_err(db)?;
        if version == MIGRATES_FROM {
            self.migrate()?;
        }
        Ok(version)
    }

    /// Bring a version-3 ledger to version 4 in ONE transaction: the approvals table and its
    /// indexes, and `user_version` 4 (which SQLite keeps in the file's header, written with the
    /// transaction). Nothing else changes: the calls, the counters and the audit chain stay as
    /// they are. Another dispatcher may have done it since we looked: then there is nothing to
    /// do.
    fn migrate(&mut self) -> Result<(), LedgerError> {
        let tx = self.immediate()?;
        let version: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(db)?;
        match version {
            SCHEMA_VERSION => return Ok(()),
            MIGRATES_FROM => {}
            other => {
                return Err(LedgerError::Foreign(format!(
                    "schema version {other}, this dispatcher reads {SCHEMA_VERSION}"
                )))
            }
        }
        tx.execute_batch(APPROVALS_SCHEMA).map_err(db)?;
        tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION};"))
            .map_err(db)?;
        tx.commit().map_err(db)
    }

    fn pragma_int(&self, name: &str) -> Result<i64, LedgerError> {
        self.conn
            .query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
            .map_err(db)
    }

    fn create_schema(&mut self) -> Result<(), LedgerError> {
        // WAL before the first table: switching needs no transaction open.
        let _: String = self
            .conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(db)?;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db)?;
        // Another process may have made it ours between our look and our lock.
        let id: i64 = tx
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .map_err(db)?;
        if id == 0 {
            if object_count(&tx)? != 0 {
                return Err(LedgerError::Foreign(
                    "a database of another application".into(),
                ));
            }
            tx.execute_batch(SCHEMA).map_err(db)?;
            tx.execute_batch(APPROVALS_SCHEMA).map_err(db)?;
            tx.execute_batch(&format!(
                "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {SCHEMA_VERSION};"
            ))
            .map_err(db)?;
        }
        tx.commit().map_err(db)
    }

    /// One attempt at [`Store::finish`]'s transaction.
    fn finish_once(
        &mut self,
        key: &Key,
        lease: &Lease,
        outcome: &Outcome<'_>,
        record: &AuditRecord,
    ) -> Result<Finished, LedgerError> {
        let tx = self.immediate()?;
        // The record's seq, named by the key's row.
        let seq = next_seq(&tx)?;
        let state = if outcome.retryable {
            "retryable"
        } else {
            "final"
        };
        let changed = tx
            .execute(
                "UPDATE calls SET state = ?4, envelope = ?5, exit_status = ?6, updated_ms = ?7, \
                 record_seq = ?11 \
                 WHERE bridge_ref = ?1 AND session_id = ?2 AND request_id = ?3 \
                 AND state = 'running' AND lease_boot = ?8 AND lease_pid = ?9 AND lease_start = ?10",
                params![
                    key.bridge_ref,
                    key.session_id,
                    key.request_id,
                    state,
                    outcome.envelope,
                    i64::from(outcome.exit_status),
                    i64_of(super::now_ms()),
                    lease.boot_id,
                    i64::from(lease.pid),
                    i64_of(lease.start_ticks),
                    i64_of(seq)
                ],
            )
            .map_err(db)?;
        // What this transaction charges, on the record (SPEC §14.4): the session's adapter
        // time, and — when it closes the key's running claim — the admitted call counted
        // when that claim was made.
        let record = AuditRecord {
            session_key: Some(key.session_id.clone()),
            admitted: changed == 1,
            ..record.clone()
        };
        if append(&tx, &record)? != seq {
            return Err(LedgerError::Corrupt("the audit head moved".into()));
        }
        if outcome.adapter_ms > 0 {
            tx.execute(
                "INSERT INTO session_usage (bridge_ref, session_id, calls, adapter_ms) \
                 VALUES (?1, ?2, 0, ?3) ON CONFLICT (bridge_ref, session_id) \
                 DO UPDATE SET adapter_ms = adapter_ms + excluded.adapter_ms",
                params![key.bridge_ref, key.session_id, i64_of(outcome.adapter_ms)],
            )
            .map_err(db)?;
        }
        tx.commit().map_err(db)?;
        Ok(if changed == 1 {
            Finished::Stored
        } else {
            Finished::NotHolder
        })
    }

    /// One attempt at [`Store::decide_approval`]'s transaction; a refusal rolls it back.
    fn decide_approval_once(
        &mut self,
        id: &str,
        settle: &mut Settle<'_>,
    ) -> Result<Approval, ApprovalError> {
        if !self.approvals {
            return Err(ApprovalError::Unknown(id.to_string()));
        }
        let tx = self.immediate()?;
        let current = read_by_id(&tx, id)?.ok_or_else(|| ApprovalError::Unknown(id.to_string()))?;
        let (updated, record) = settle(&current)?;
        if updated.id != current.id || !write_decision(&tx, &updated)? {
            return Err(ApprovalError::Ledger(LedgerError::Database(
                "the approval changed while it was decided".into(),
            )));
        }
        append(&tx, &record)?;
        tx.commit().map_err(db)?;
        Ok(updated)
    }

    /// Run one whole transaction, again while SQLite answers BUSY before the deadline. SQLite
    /// answers some BUSY at once, without its busy handler (while another connection resets
    /// or recovers the WAL, say); a transaction that failed is rolled back whole, so trying it
    /// again is safe.
    fn retrying<T>(
        &mut self,
        mut step: impl FnMut(&mut SqliteStore) -> Result<T, LedgerError>,
    ) -> Result<T, LedgerError> {
        loop {
            match step(self) {
                Err(LedgerError::Locked) if Instant::now() < self.deadline => {
                    std::thread::sleep(PREPARE_RETRY);
                }
                done => return done,
            }
        }
    }

    fn immediate(&mut self) -> Result<rusqlite::Transaction<'_>, LedgerError> {
        self.arm()?;
        self.conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db)
    }
}

/// `trusted_schema = OFF`: a crafted file's views and triggers cannot call functions with
/// side effects. Set through the connection's configuration: no statement to compile.
fn distrust_schema(conn: &Connection) -> Result<(), LedgerError> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA,
        false,
    )
    .map(|_| ())
    .map_err(db)
}

/// A read-only SQLite connection to the ledger at `path` (its URI form), immutable when `mode`
/// says the file is read without its WAL.
fn connect_read_only(path: &Path, mode: ReadMode) -> Result<Connection, LedgerError> {
    let uri = format!(
        "{}?{}",
        uri_path(path),
        match mode {
            ReadMode::Shared => "mode=ro",
            ReadMode::Immutable => "mode=ro&immutable=1",
        }
    );
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW
        | OpenFlags::SQLITE_OPEN_URI;
    Connection::open_with_flags(&uri, flags).map_err(|e| match e.sqlite_error_code() {
        Some(ErrorCode::CannotOpen) => {
            LedgerError::Open(io::Error::other("SQLite cannot open the file"))
        }
        _ => db(e),
    })
}

/// Once the ledger is open, before anything is committed through it: make the WAL's name
/// durable when the WAL is new (SQLite made it for this connection, or another one did since
/// we looked: `wal_before`), and the ledger's own name when this process `created` the file,
/// with one `fsync` of the folder. A failure is `ledger_unavailable` before any key is claimed.
///
/// SQLite is built with `SQLITE_DISABLE_DIRSYNC` (`.cargo/config.toml`): otherwise it `fsync`s
/// the folder at the first commit of every connection — one more `fsync` on every call —
/// because it cannot tell a WAL it created from one that was there. We can: the WAL of a
/// ledger is never deleted by a dispatcher (no checkpoint on close), so this is one `lstat`
/// per call and an `fsync` only the first time.
fn settle(
    dir: std::os::fd::BorrowedFd<'_>,
    wal_name: &std::ffi::CStr,
    created: bool,
    wal_before: Option<(u64, u64)>,
) -> Result<(), LedgerError> {
    let now = pfs::lstat_at(dir, wal_name).ok().map(|st| identity(&st));
    if needs_folder_sync(created, wal_before, now) {
        pfs::fsync(dir).map_err(LedgerError::Open)?;
    }
    Ok(())
}

/// Whether [`settle`] must `fsync` the ledger's folder: this process created the ledger, or
/// the WAL is not the one that was there before SQLite opened the ledger (there was none, or
/// another was put in its place).
pub(super) fn needs_folder_sync(
    created: bool,
    wal_before: Option<(u64, u64)>,
    wal_now: Option<(u64, u64)>,
) -> bool {
    created || wal_before.is_none() || wal_now != wal_before
}

impl Store for SqliteStore {
    fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = deadline;
    }

    fn set_durability(&mut self, durability: Durability) -> Result<(), LedgerError> {
        let level = match durability {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        };
        self.conn
            .execute_batch(&format!("PRAGMA synchronous = {level};"))
            .map_err(db)
    }

    fn begin(
        &mut self,
        call: &Call<'_>,
        lease: &Lease,
        decide: &mut dyn FnMut(&Snapshot) -> (Decision, Claim),
    ) -> Result<Decision, LedgerError> {
        self.retrying(|store| {
            let approvals = store.approvals;
            let tx = store.immediate()?;
            let snap = read_snapshot(&tx, call, approvals)?;
            let (decision, claim) = decide(&snap);
            if let Decision::Replay(recorded) = &decision {
                check_covered(&tx, call.key, recorded)?;
            }
            let now = i64_of(super::now_ms());
            match claim {
                Claim::None => {}
                Claim::Admit { attempt } => write_admit(&tx, call, lease, attempt, now)?,
                Claim::TakeOver => write_takeover(&tx, call.key, lease, now)?,
                Claim::Ask {
                    approval_id,
                    expires_ms,
                } => {
                    let ask = call.ask.ok_or_else(|| {
                        LedgerError::Database(
                            "an approval was claimed for a call without ask".into(),
                        )
                    })?;
                    insert_pending(&tx, call, ask, &approval_id, expires_ms)?;
                }
            }
            tx.commit().map_err(db)?;
            Ok(decision)
        })
    }

    /// [`read_snapshot`], as `begin` reads it, but in a deferred (read) transaction: no write
    /// lock is taken, nothing is written, and a read-only connection (`open_read_only`) can do
    /// it. A ledger read as immutable must not have changed meanwhile ([`ReadGuard`]).
    fn peek(&mut self, call: &Call<'_>) -> Result<Snapshot, LedgerError> {
        self.retrying(|store| {
            store.arm()?;
            let approvals = store.approvals;
            let tx = store.conn.transaction().map_err(db)?;
            let snap = read_snapshot(&tx, call, approvals)?;
            // Ends the read transaction; it wrote nothing, so nothing is committed.
            tx.commit().map_err(db)?;
            store.check_guard()?;
            Ok(snap)
        })
    }

    fn finish(
        &mut self,
        key: &Key,
        lease: &Lease,
        outcome: &Outcome<'_>,
        record: &AuditRecord,
    ) -> Result<Finished, LedgerError> {
        self.retrying(|store| store.finish_once(key, lease, outcome, record))
    }

    fn append(&mut self, record: &AuditRecord) -> Result<(), LedgerError> {
        self.retrying(|store| {
            let tx = store.immediate()?;
            append(&tx, record)?;
            tx.commit().map_err(db)
        })
    }

    fn call(&mut self, key: &Key) -> Result<Option<CallRow>, LedgerError> {
        self.arm()?;
        read_call(&self.conn, key)
    }

    /// One host shares an SQLite ledger, where a holder is judged by its process: there is
    /// no heartbeat to write. Answers whether `lease` still holds the key, as PostgreSQL's
    /// renewal does.
    fn renew(&mut self, key: &Key, lease: &Lease) -> Result<bool, LedgerError> {
        self.arm()?;
        Ok(read_call(&self.conn, key)?
            .is_some_and(|row| row.state == CallState::Running && row.lease == *lease))
    }

    fn scan(
        &mut self,
        since_ms: u64,
        visit: &mut dyn FnMut(Result<StoredRecord, Break>) -> bool,
        stored: Option<&mut StoredVisit<'_>>,
        usage: Option<&mut Usage>,
    ) -> Result<Option<(u64, String)>, LedgerError> {
        self.arm()?;
        // One read transaction: the rows and the head are one snapshot.
        let tx = self.conn.transaction().map_err(db)?;
        if !visit_audit(&tx, since_ms, visit)? {
            return Ok(None);
        }
        if let Some(stored) = stored {
            visit_stored(&tx, stored)?;
        }
        if let Some(usage) = usage {
            read_usage(&tx, usage)?;
        }
        let head: Option<(i64, String)> = tx
            .query_row("SELECT seq, hash FROM head WHERE only = 1", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
            .map_err(db)?;
        tx.commit().map_err(db)?;
        self.check_guard()?;
        Ok(head.map(|(seq, hash)| (u64::try_from(seq).unwrap_or(u64::MAX), hash)))
    }

    fn prune(
        &mut self,
        pruning: &mut dyn super::prune::Pruning,
    ) -> Result<Option<u64>, LedgerError> {
        self.retrying(|store| {
            let tx = store.immediate()?;
            let done = prune_in(&tx, pruning)?;
            tx.commit().map_err(db)?;
            Ok(done)
        })
    }

    fn backup(&mut self, dest: &Path) -> Result<(), BackupError> {
        self.arm()?;
        backup_to(self, dest)
    }

    fn approvals(&mut self, filter: &ApprovalFilter) -> Result<Vec<Approval>, LedgerError> {
        if !self.approvals {
            return Ok(Vec::new());
        }
        self.retrying(|store| {
            store.arm()?;
            let tx = store.conn.transaction().map_err(db)?;
            let list = read_list(&tx, filter)?;
            tx.commit().map_err(db)?;
            store.check_guard()?;
            Ok(list)
        })
    }

    fn approval(&mut self, id: &str) -> Result<Option<Approval>, LedgerError> {
        if !self.approvals {
            return Ok(None);
        }
        self.retrying(|store| {
            store.arm()?;
            let tx = store.conn.transaction().map_err(db)?;
            let found = read_by_id(&tx, id)?;
            tx.commit().map_err(db)?;
            store.check_guard()?;
            Ok(found)
        })
    }

    fn decide_approval(
        &mut self,
        id: &str,
        settle: &mut Settle<'_>,
    ) -> Result<Approval, ApprovalError> {
        loop {
            match self.decide_approval_once(id, settle) {
                Err(ApprovalError::Ledger(LedgerError::Locked))
                    if Instant::now() < self.deadline =>
                {
                    std::thread::sleep(PREPARE_RETRY);
                }
                done => return done,
            }
        }
    }

    /// `PRAGMA wal_checkpoint(TRUNCATE)` without a busy handler: when another connection
    /// writes or reads an older snapshot, SQLite copies what it can without waiting (as a
    /// `PASSIVE` checkpoint would) and answers BUSY, which is ignored — the last dispatcher
    /// to finish leaves the WAL empty. The WAL file stays (empty), so [`settle`] still sees
    /// the same WAL and does not sync the folder again.
    fn checkpoint(&mut self) {
        if self.conn.busy_timeout(Duration::ZERO).is_ok() {
            let _ = self
                .conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_main_job_and_a_reader_distrust_the_schema_and_check_cells() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let deadline = Instant::now() + Duration::from_secs(20);
        let writer = SqliteStore::open(&path, deadline).unwrap();
        let reader = SqliteStore::open_read_only(&path, deadline).unwrap();
        for store in [&writer, &reader] {
            assert_eq!(store.pragma_int("trusted_schema").unwrap(), 0);
            assert_eq!(store.pragma_int("cell_size_check").unwrap(), 1);
        }
        assert_eq!(writer.pragma_int("synchronous").unwrap(), 2, "FULL");
    }

    #[test]
    fn the_hosts_durability_choice_sets_synchronous_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut writer = SqliteStore::open(&path, deadline).unwrap();
        writer.set_durability(Durability::Normal).unwrap();
        assert_eq!(writer.pragma_int("synchronous").unwrap(), 1, "NORMAL");
        // Still WAL, still checked, and a second dispatcher is FULL until told otherwise.
        let mode: String = writer
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        assert_eq!(writer.pragma_int("cell_size_check").unwrap(), 1);
        let other = SqliteStore::open(&path, deadline).unwrap();
        assert_eq!(other.pragma_int("synchronous").unwrap(), 2, "FULL");
        writer.set_durability(Durability::Full).unwrap();
        assert_eq!(writer.pragma_int("synchronous").unwrap(), 2, "FULL");
    }
}
