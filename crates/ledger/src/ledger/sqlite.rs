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
//!   database, a newer schema, not a database) is refused without writing to it.
//!   `trusted_schema = OFF`, so a crafted file's views and triggers cannot call functions.
//! - **Concurrency and durability.** WAL (readers never block writers), every write step one
//!   short `BEGIN IMMEDIATE` transaction (the write lock taken up front, so no deadlock and no
//!   `SQLITE_BUSY` on upgrade), the busy handler waiting until the caller's deadline, and
//!   `synchronous = FULL`: the WAL is fsynced at every commit, so a `running` row is on disk
//!   before the adapter starts and an outcome before its envelope is printed, power loss
//!   included (`NORMAL` would keep them through a crash of the process but not of the host,
//!   and a call lost that way could run twice).

use super::audit::{self, Break, StoredRecord, GENESIS};
use super::{
    AuditRecord, BackupError, Call, CallRow, CallState, Claim, Decision, Finished, Key, Lease,
    LedgerError, Outcome, Recorded, Snapshot, Store, StoredVisit, Usage,
};
use ptd_sys::fs::{self as pfs, FileType, Mode, OFlags};
use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// `PRAGMA application_id` of a ledger: "PTDL".
pub(super) const APPLICATION_ID: i64 = 0x5054_444c;
/// `PRAGMA user_version` of this schema.
pub(super) const SCHEMA_VERSION: i64 = 3;

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
}

/// The files of a ledger read as immutable, and how they looked before it was opened: the
/// file's identity, size, modification and change times, and the WAL's size (`None`: none).
pub(super) struct ReadGuard {
    dir: std::os::fd::OwnedFd,
    name: std::ffi::CString,
    wal: std::ffi::CString,
    seen: Option<Look>,
}

type Look = ((u64, u64, i64, i64, u64, i64, u64), Option<i64>);

impl ReadGuard {
    fn look(&self) -> Option<Look> {
        let st = pfs::lstat_at(self.dir.as_fd(), &self.name).ok()?;
        let wal = pfs::lstat_at(self.dir.as_fd(), &self.wal)
            .ok()
            .map(|st| st.st_size);
        Some((
            (
                st.st_dev,
                st.st_ino,
                st.st_size,
                st.st_mtime,
                st.st_mtime_nsec,
                st.st_ctime,
                st.st_ctime_nsec,
            ),
            wal,
        ))
    }

    /// Whether the files are as they were (and no WAL with commits appeared).
    fn unchanged(&self) -> bool {
        let now = self.look();
        now.is_some() && now == self.seen && now.is_some_and(|(_, wal)| wal.unwrap_or(0) == 0)
    }
}

/// How [`SqliteStore::open_read_only`] reads a ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReadMode {
    /// `mode=ro`, with SQLite's locks and the `-wal` and `-shm` that are there (the `-shm`
    /// read-only when this user cannot write it): consistent with writers at work.
    Shared,
    /// `immutable=1`: no lock, no `-wal` and no `-shm` opened or made; for a ledger whose WAL
    /// is absent or empty, checked again after reading ([`ReadGuard`]).
    Immutable,
}

/// Which [`ReadMode`] reads a ledger whose `-wal` and `-shm` are as given (`lstat`, and
/// whether this user can open each for reading), or why none can without making a file.
pub(super) fn read_mode(
    wal: Option<(&pfs::Stat, bool)>,
    shm: Option<(&pfs::Stat, bool)>,
) -> Result<ReadMode, LedgerError> {
    for (side, st) in [("-wal", wal), ("-shm", shm)] {
        if let Some((st, _)) = st {
            if pfs::kind(st) != FileType::RegularFile {
                return Err(LedgerError::NotRegular(match side {
                    "-wal" => "-wal that is not a regular file",
                    _ => "-shm that is not a regular file",
                }));
            }
        }
    }
    match (wal, shm) {
        (Some((_, true)), Some((_, true))) => Ok(ReadMode::Shared),
        (None, _) => Ok(ReadMode::Immutable),
        (Some((st, _)), _) if st.st_size == 0 => Ok(ReadMode::Immutable),
        (Some((_, false)), _) | (_, Some((_, false))) => Err(LedgerError::Unreadable(
            "its -wal holds commits and this user cannot read its -wal or -shm",
        )),
        (Some(_), None) => Err(LedgerError::Unreadable(
            "its -wal holds commits and it has no -shm (a read-only reader would have to make one)",
        )),
    }
}

/// `path` as an SQLite URI's path: every byte but `[A-Za-z0-9/._~-]` percent-encoded.
pub(super) fn uri_path(path: &Path) -> String {
    let mut out = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'~' | b'-') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
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

fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::Directory => "folder",
        FileType::Symlink => "symlink",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        _ => "special file",
    }
}

/// Open (or create) the file itself, checked as the module docs say; returns its descriptor.
fn open_file(
    folder: &Path,
    dir: std::os::fd::BorrowedFd<'_>,
    name: &std::ffi::CStr,
) -> Result<(std::os::fd::OwnedFd, bool), LedgerError> {
    // Two rounds at most: made (by us or a concurrent creator), then opened.
    let mut created = false;
    for _ in 0..2 {
        match pfs::lstat_at(dir, name) {
            Ok(st) => {
                let kind = pfs::kind(&st);
                if kind != FileType::RegularFile {
                    return Err(LedgerError::NotRegular(kind_name(kind)));
                }
                if st.st_mode & 0o200 == 0 {
                    return Err(LedgerError::ReadOnly);
                }
                // Before opening: a file of another user may not even be readable.
                own_file(&st, "the ledger file")?;
                let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
                let fd =
                    pfs::open_at(dir, name, flags, Mode::empty()).map_err(LedgerError::Open)?;
                let st = rustix::fs::fstat(&fd).map_err(|e| LedgerError::Open(e.into()))?;
                own_file(&st, "the ledger file")?;
                return Ok((fd, created));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                created = create_ledger(folder, dir, name)?;
            }
            Err(e) => return Err(LedgerError::Open(e)),
        }
    }
    Err(LedgerError::Replaced)
}

/// A file of the ledger (the database, its `-wal`, its `-shm`) must be a regular file owned by
/// this process's effective user, without a group or other write bit (SPEC §14.4).
fn own_file(st: &pfs::Stat, what: &'static str) -> Result<(), LedgerError> {
    if pfs::kind(st) != FileType::RegularFile {
        return Err(LedgerError::NotRegular(kind_name(pfs::kind(st))));
    }
    if st.st_uid != rustix::process::geteuid().as_raw() {
        return Err(LedgerError::NotOwn(match what {
            "the ledger file" => "the ledger file belongs to another user",
            "the WAL" => "the ledger's -wal file belongs to another user",
            _ => "the ledger's -shm file belongs to another user",
        }));
    }
    if st.st_mode & 0o022 != 0 {
        return Err(LedgerError::NotOwn(match what {
            "the ledger file" => "the ledger file is writable by its group or others",
            "the WAL" => "the ledger's -wal file is writable by its group or others",
            _ => "the ledger's -shm file is writable by its group or others",
        }));
    }
    Ok(())
}

/// The ledger's folder must not be writable by another user: not group- or other-writable,
/// and ours when its owner may write it — unless it is sticky (like `/tmp`), where nobody
/// else can rename or remove our files (theirs are refused by [`own_file`]).
fn own_folder(st: &pfs::Stat) -> Result<(), LedgerError> {
    let me = rustix::process::geteuid().as_raw();
    let others_write = st.st_mode & 0o022 != 0 || (st.st_uid != me && st.st_mode & 0o200 != 0);
    if others_write && st.st_mode & 0o1000 == 0 {
        return Err(LedgerError::NotOwn(
            "the ledger's folder is writable by another user",
        ));
    }
    Ok(())
}

/// Make a new ledger at `name` (SPEC §14.4): created 0600 under a temporary name, given the
/// schema, checkpointed (the file stands alone, without a WAL), synced, and moved into place
/// without replacing anything. Returns false when another dispatcher's ledger got there first
/// (then ours is removed and theirs is used).
fn create_ledger(
    folder: &Path,
    dir: std::os::fd::BorrowedFd<'_>,
    name: &std::ffi::CStr,
) -> Result<bool, LedgerError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut temp = b".".to_vec();
    temp.extend_from_slice(name.to_bytes());
    temp.extend_from_slice(format!(".{}.{nanos}.new", std::process::id()).as_bytes());
    let temp = pfs::cstring(&temp).map_err(LedgerError::Open)?;
    let remove = |suffix: &[u8]| {
        let mut n = temp.to_bytes().to_vec();
        n.extend_from_slice(suffix);
        if let Ok(n) = pfs::cstring(&n) {
            let _ = pfs::unlink_at(dir, &n);
        }
    };
    let made = (|| {
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
        let fd = pfs::open_at(dir, &temp, flags, Mode::from_raw_mode(0o600))
            .map_err(LedgerError::Open)?;
        // The umask may have taken bits away; 0600 exactly.
        pfs::set_mode(fd.as_fd(), Mode::from_raw_mode(0o600)).map_err(LedgerError::Open)?;
        let path = folder.join(std::ffi::OsStr::from_bytes(temp.to_bytes()));
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let conn = Connection::open_with_flags(&path, flags).map_err(db)?;
        let mut store = SqliteStore {
            conn,
            deadline: Instant::now() + Duration::from_secs(5),
            guard: None,
        };
        store
            .conn
            .execute_batch("PRAGMA trusted_schema = OFF; PRAGMA synchronous = FULL;")
            .map_err(db)?;
        store.create_schema()?;
        store
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(db)?;
        // Closing the only connection checkpoints again and removes the WAL and -shm.
        store.conn.close().map_err(|(_, e)| db(e))?;
        pfs::fsync(fd.as_fd()).map_err(LedgerError::Open)?;
        Ok(())
    })();
    remove(b"-wal");
    remove(b"-shm");
    if let Err(err) = made {
        remove(b"");
        return Err(err);
    }
    let moved = rustix::fs::renameat_with(
        dir,
        temp.as_c_str(),
        dir,
        name,
        rustix::fs::RenameFlags::NOREPLACE,
    );
    match moved {
        Ok(()) => {
            pfs::fsync(dir).map_err(LedgerError::Open)?;
            Ok(true)
        }
        Err(rustix::io::Errno::EXIST) => {
            remove(b"");
            Ok(false)
        }
        Err(e) => {
            remove(b"");
            Err(LedgerError::Open(e.into()))
        }
    }
}

fn identity(st: &pfs::Stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

/// The pause between two looks at a ledger another dispatcher is setting up.
const PREPARE_RETRY: std::time::Duration = std::time::Duration::from_millis(5);

impl SqliteStore {
    /// Open the ledger at `path` (creating it when there is none), waiting for other writers
    /// until `deadline`. The read-only openings of `audit` and `ledger backup` are
    /// `Ledger::open_existing`'s.
    pub(super) fn open(path: &Path, deadline: Instant) -> Result<SqliteStore, LedgerError> {
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
                    done?;
                    settle(dir.as_fd(), &wal_name, created, wal_before)?;
                    return Ok(store);
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
            ReadMode::Immutable => {
                let mut guard = ReadGuard {
                    dir: rustix::io::dup(&dir).map_err(|e| LedgerError::Folder(e.into()))?,
                    name: cname.clone(),
                    wal: wal_name.clone(),
                    seen: None,
                };
                guard.seen = Some(guard.look().ok_or(LedgerError::Replaced)?);
                Some(guard)
            }
        };
        let uri = format!(
            "{}?{}",
            uri_path(&parent.join(name)),
            match mode {
                ReadMode::Shared => "mode=ro",
                ReadMode::Immutable => "mode=ro&immutable=1",
            }
        );
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW
            | OpenFlags::SQLITE_OPEN_URI;
        let conn =
            Connection::open_with_flags(&uri, flags).map_err(|e| match e.sqlite_error_code() {
                Some(ErrorCode::CannotOpen) => {
                    LedgerError::Open(io::Error::other("SQLite cannot open the file"))
                }
                _ => db(e),
            })?;
        match pfs::lstat_at(dir.as_fd(), &cname) {
            Ok(now) if identity(&now) == identity(&st) => {}
            _ => return Err(LedgerError::Replaced),
        }
        drop(fd);
        let mut store = SqliteStore {
            conn,
            deadline,
            guard,
        };
        store.arm()?;
        store
            .conn
            .execute_batch(
                "PRAGMA trusted_schema = OFF; PRAGMA cell_size_check = ON; \
                 PRAGMA query_only = ON;",
            )
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
        if version != SCHEMA_VERSION {
            return Err(LedgerError::Foreign(format!(
                "schema version {version}, this dispatcher reads {SCHEMA_VERSION}"
            )));
        }
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
    /// synchronous FULL.
    fn prepare(&mut self) -> Result<(), LedgerError> {
        self.arm()?;
        self.conn
            .execute_batch("PRAGMA trusted_schema = OFF; PRAGMA cell_size_check = ON;")
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
        if version != SCHEMA_VERSION {
            return Err(LedgerError::Foreign(format!(
                "schema version {version}, this dispatcher reads {SCHEMA_VERSION}"
            )));
        }
        // WAL is kept in the file's header: asking costs little, setting it again (a no-op
        // that still takes a fraction of a millisecond) is only done when it is not.
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
            .map(|_| ())
            .map_err(db)
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

/// How many tables, indexes and the like the database holds (0: an empty file).
fn object_count(conn: &rusqlite::Connection) -> Result<i64, LedgerError> {
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(db)
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn read_call(tx: &Connection, key: &Key) -> Result<Option<CallRow>, LedgerError> {
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
        },
        outcome,
    }))
}

/// The seq the next appended record gets.
fn next_seq(tx: &Connection) -> Result<u64, LedgerError> {
    let head: Option<i64> = tx
        .query_row("SELECT seq FROM head WHERE only = 1", [], |r| r.get(0))
        .optional()
        .map_err(db)?;
    u64::try_from(head.unwrap_or(0))
        .map(|seq| seq + 1)
        .map_err(|_| LedgerError::Corrupt("the audit head is invalid".into()))
}

/// Append `record` to the chain; returns its seq.
fn append(tx: &Connection, record: &AuditRecord) -> Result<u64, LedgerError> {
    let head: Option<(i64, String)> = tx
        .query_row("SELECT seq, hash FROM head WHERE only = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()
        .map_err(db)?;
    let (seq, prev) = head.unwrap_or((0, GENESIS.to_string()));
    let seq = u64::try_from(seq)
        .map_err(|_| LedgerError::Corrupt("the audit head is invalid".into()))?
        + 1;
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
fn check_covered(tx: &Connection, key: &Key, recorded: &Recorded) -> Result<(), LedgerError> {
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

/// What the ledger holds about `call`, its session and the session's other running calls.
fn read_snapshot(tx: &Connection, call: &Call<'_>) -> Result<Snapshot, LedgerError> {
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
                    })
                },
            )
            .map_err(db)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(db)?
    };
    Ok(Snapshot {
        row,
        calls: u64::try_from(calls).unwrap_or(0),
        tool_calls: u64::try_from(tool_calls).unwrap_or(0),
        adapter_ms: u64::try_from(adapter_ms).unwrap_or(0),
        running,
    })
}

/// Record `call` as admitted (running, attempt `attempt`, under `lease`) and count it in the
/// session's and the tool's usage.
fn write_admit(
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
fn write_takeover(tx: &Connection, key: &Key, lease: &Lease, now: i64) -> Result<(), LedgerError> {
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

impl Store for SqliteStore {
    fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = deadline;
    }

    fn begin(
        &mut self,
        call: &Call<'_>,
        lease: &Lease,
        decide: &mut dyn FnMut(&Snapshot) -> (Decision, Claim),
    ) -> Result<Decision, LedgerError> {
        self.retrying(|store| {
            let tx = store.immediate()?;
            let snap = read_snapshot(&tx, call)?;
            let (decision, claim) = decide(&snap);
            if let Decision::Replay(recorded) = &decision {
                check_covered(&tx, call.key, recorded)?;
            }
            let now = i64_of(super::now_ms());
            match claim {
                Claim::None => {}
                Claim::Admit { attempt } => write_admit(&tx, call, lease, attempt, now)?,
                Claim::TakeOver => write_takeover(&tx, call.key, lease, now)?,
            }
            tx.commit().map_err(db)?;
            Ok(decision)
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
        {
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
                        return Ok(None);
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
                    return Ok(None);
                }
            }
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

    fn backup(&mut self, dest: &Path) -> Result<(), BackupError> {
        self.arm()?;
        backup_to(self, dest)
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

/// [`Store::scan`]'s `usage`, inside its read transaction: the counters as stored, and one
/// call per running claim (counted when it was admitted, its record not written yet).
fn read_usage(conn: &Connection, usage: &mut Usage) -> Result<(), LedgerError> {
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
fn visit_stored(conn: &Connection, visit: &mut StoredVisit<'_>) -> Result<(), LedgerError> {
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
fn backup_to(store: &SqliteStore, dest: &Path) -> Result<(), BackupError> {
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
