//! The ledger file itself: who owns it and its folder, how it is made (under a temporary name,
//! then renamed into place) and opened without following a symlink, and how a read-only open
//! notices the file changing under it (SPEC §14.4).

use super::*;

/// The files of a ledger read as immutable, and how they looked before it was opened: the
/// file's identity, size, modification and change times, and the WAL's size (`None`: none).
pub(super) struct ReadGuard {
    pub(super) dir: std::os::fd::OwnedFd,
    pub(super) name: std::ffi::CString,
    pub(super) wal: std::ffi::CString,
    pub(super) seen: Option<Look>,
}

type Look = ((u64, u64, i64, i64, u64, i64, u64), Option<i64>);

impl ReadGuard {
    /// A guard of the file `name` (and its `wal`) in `dir`, remembering how they are now.
    pub(super) fn new(
        dir: &std::os::fd::OwnedFd,
        name: &std::ffi::CStr,
        wal: &std::ffi::CStr,
    ) -> Result<ReadGuard, LedgerError> {
        let mut guard = ReadGuard {
            dir: rustix::io::dup(dir).map_err(|e| LedgerError::Folder(e.into()))?,
            name: name.to_owned(),
            wal: wal.to_owned(),
            seen: None,
        };
        guard.seen = Some(guard.look().ok_or(LedgerError::Replaced)?);
        Ok(guard)
    }

    pub(super) fn look(&self) -> Option<Look> {
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
    pub(super) fn unchanged(&self) -> bool {
        let now = self.look();
        now.is_some() && now == self.seen && now.is_some_and(|(_, wal)| wal.unwrap_or(0) == 0)
    }
}

/// How [`SqliteStore::open_read_only`] reads a ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::ledger) enum ReadMode {
    /// `mode=ro`, with SQLite's locks and the `-wal` and `-shm` that are there (the `-shm`
    /// read-only when this user cannot write it): consistent with writers at work.
    Shared,
    /// `immutable=1`: no lock, no `-wal` and no `-shm` opened or made; for a ledger whose WAL
    /// is absent or empty, checked again after reading ([`ReadGuard`]).
    Immutable,
}

/// Which [`ReadMode`] reads a ledger whose `-wal` and `-shm` are as given (`lstat`, and
/// whether this user can open each for reading), or why none can without making a file.
pub(in crate::ledger) fn read_mode(
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
pub(in crate::ledger) fn uri_path(path: &Path) -> String {
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

pub(super) fn kind_name(kind: FileType) -> &'static str {
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
pub(super) fn open_file(
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
pub(super) fn own_file(st: &pfs::Stat, what: &'static str) -> Result<(), LedgerError> {
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
pub(super) fn own_folder(st: &pfs::Stat) -> Result<(), LedgerError> {
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
pub(super) fn create_ledger(
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
            approvals: true,
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

pub(super) fn identity(st: &pfs::Stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}
