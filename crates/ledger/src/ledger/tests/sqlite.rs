//! The file and how the store uses SQLite: unusable files refused unchanged, a lock past the
//! deadline, the partial index, the WAL's size, the folder's sync, a read-only `peek`.
//!
//! The rules of the `Store` and the `Ledger` (decisions, replay, retryable outcomes, budgets,
//! leases and dead holders, waits, approvals, the audit chain through a ledger, `peek`, many
//! connections and processes) are the shared suite's: `both!` runs each of them unchanged on
//! SQLite and on PostgreSQL. These tests stay SQLite-only because their subject is the SQLite
//! file itself, which PostgreSQL does not have:
//!
//! - here, every test: the file's 0600 mode and WAL journal; unusable, foreign, empty or
//!   read-only files refused unchanged; SQLite's lock (`SQLITE_BUSY`) past the deadline; the
//!   partial index SQLite's planner uses; the WAL checkpoint; the folder's fsync; the SQLite
//!   build; a reader that uses the WAL as it is or opens the file immutable; a `peek` that
//!   makes no `-wal`/`-shm` file;
//! - `approvals_store.rs`: `a_backup_carries_the_approvals` (the backup is a copy of the file;
//!   PostgreSQL's backup is an export, in `pg.rs`) and
//!   `a_version_3_ledger_is_read_as_it_is_and_migrated_when_written` (an old SQLite schema,
//!   `PRAGMA user_version`; PostgreSQL's versioned schema and `migrate` are in `pg.rs`);
//!   `an_approval_on_a_record_out_of_bounds_is_named_by_verify`, whose first half (refused on
//!   append) is the shared suite's;
//! - `audit.rs`: `verify_names_the_first_edited_removed_or_unreadable_record`,
//!   `verify_names_a_record_whose_rule_is_unknown` and
//!   `a_policy_out_of_bounds_is_named_by_verify` (whose first half is the shared suite's): the
//!   chain is broken by editing the file's rows with rusqlite. `verify` itself is the same code
//!   on both stores (`audit::Chain` over the rows a `scan` reads).
//!
//! No test of the Ledger's behaviour stays SQLite-only for a difference between the stores.

use super::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn a_new_ledger_file_is_0600_and_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut ledger) = ledger_in(dir.path());
    assert_eq!(ptd_sys::fs::test_support::mode(&path), 0o600);
    ledger
        .record(&record(&key("r"), Verdict::Deny, "bridge_ref", "denied"))
        .unwrap();
    drop(ledger);
    // WAL mode persists in the file.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    assert_eq!(ptd_sys::fs::test_support::mode(&path), 0o600);
}

#[test]
fn unusable_ledger_files_are_refused_without_being_changed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let err = |path: &Path| Ledger::open(path, soon()).unwrap_err();
    assert!(matches!(
        err(&d.join("missing/ledger.db")),
        LedgerError::Folder(_)
    ));
    assert!(!d.join("missing").exists());
    assert!(matches!(
        Ledger::open_existing(&d.join("none.db"), soon()).unwrap_err(),
        LedgerError::Missing
    ));
    assert!(!d.join("none.db").exists());
    std::fs::write(d.join("empty.db"), b"").unwrap();
    for err in [
        Ledger::open_existing(&d.join("empty.db"), soon()).unwrap_err(),
        // Never adopted by the main job either (SPEC §14.4).
        Ledger::open(&d.join("empty.db"), soon()).unwrap_err(),
    ] {
        assert!(
            matches!(&err, LedgerError::Foreign(m) if m == "an empty file, not a complete ledger"),
            "{err:?}"
        );
    }
    assert_eq!(std::fs::read(d.join("empty.db")).unwrap(), b"");
    std::os::unix::fs::symlink(d.join("target.db"), d.join("link.db")).unwrap();
    assert!(matches!(
        err(&d.join("link.db")),
        LedgerError::NotRegular("symlink")
    ));
    assert!(
        !d.join("target.db").exists(),
        "a dangling symlink is not followed to create"
    );
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        d.join("fifo.db"),
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    assert!(matches!(
        err(&d.join("fifo.db")),
        LedgerError::NotRegular("FIFO")
    ));
    // /dev/null is root's: another user's ledger is refused as not its own first.
    match ptd_sys::skip::root() {
        Ok(()) => assert!(matches!(
            err(Path::new("/dev/null")),
            LedgerError::NotRegular("character device")
        )),
        Err(unmet) => ptd_sys::skip::report(&ptd_sys::skip::Unmet {
            reason: format!("the character-device part: {}", unmet.reason),
            ..unmet
        }),
    }
    assert!(matches!(err(d), LedgerError::NotRegular("folder")));
    // Read-only (root ignores the bits, the ledger does not).
    let ro = d.join("ro.db");
    drop(Ledger::open(&ro, soon()).unwrap());
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o400)).unwrap();
    assert!(matches!(err(&ro), LedgerError::ReadOnly));
    // Not a database.
    let junk = d.join("junk.db");
    let bytes: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
    std::fs::write(&junk, &bytes).unwrap();
    assert!(
        matches!(err(&junk), LedgerError::Corrupt(_)),
        "{:?}",
        err(&junk)
    );
    assert_eq!(std::fs::read(&junk).unwrap(), bytes);
    // Another application's database; ours with a foreign id or a newer schema.
    let foreign = d.join("foreign.db");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    let before = std::fs::read(&foreign).unwrap();
    assert!(matches!(err(&foreign), LedgerError::Foreign(_)));
    assert_eq!(std::fs::read(&foreign).unwrap(), before);
    let other_id = d.join("other-id.db");
    rusqlite::Connection::open(&other_id)
        .unwrap()
        .execute_batch("PRAGMA application_id = 7; CREATE TABLE t (x);")
        .unwrap();
    assert!(matches!(err(&other_id), LedgerError::Foreign(m) if m.contains("0x7")));
    let newer = d.join("newer.db");
    drop(Ledger::open(&newer, soon()).unwrap());
    rusqlite::Connection::open(&newer)
        .unwrap()
        .execute_batch("PRAGMA user_version = 99;")
        .unwrap();
    assert!(matches!(err(&newer), LedgerError::Foreign(m) if m.contains("99")));
    for e in [err(&d.join("missing/x.db")), err(&junk), err(&foreign)] {
        ptd_sys::fs::test_support::assert_no_host_path(&e, d);
        assert_eq!(e.code(), "ledger_unavailable");
    }
}

#[test]
fn a_ledger_locked_past_the_deadline_fails_with_locked() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = ledger_in(dir.path());
    let mut holder = rusqlite::Connection::open(&path).unwrap();
    let tx = holder
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    let mut ledger = Ledger::open(&path, soon()).unwrap();
    ledger.set_deadline(Instant::now() + Duration::from_millis(300));
    let started = Instant::now();
    let none = Budgets::default();
    let k = key("r");
    let got = ledger.begin(&call(&k, "d", &none), &Lease::current().unwrap());
    assert!(matches!(got, Err(LedgerError::Locked)), "{got:?}");
    assert!(started.elapsed() >= Duration::from_millis(250));
    tx.rollback().unwrap();
    ledger.set_deadline(soon());
    assert!(ledger
        .begin(&call(&k, "d", &none), &Lease::current().unwrap())
        .is_ok());
}

// ---- many processes -----------------------------------------------------------------------

#[test]
fn the_calls_in_flight_are_found_through_the_partial_index_not_the_session_history() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _ledger) = ledger_in(dir.path());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let plan: Vec<String> = conn
        .prepare(&format!(
            "EXPLAIN QUERY PLAN {}",
            crate::ledger::sqlite::RUNNING_CALLS
        ))
        .unwrap()
        .query_map(["b", "s", "r"], |row| row.get::<_, String>(3))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        plan.iter()
            .any(|step| step.contains("USING INDEX calls_running")),
        "{plan:?}"
    );
    assert!(
        !plan.iter().any(|step| step.contains("PRIMARY KEY")),
        "{plan:?}"
    );
}

#[test]
fn the_wal_is_checkpointed_well_before_sqlites_default_of_1000_pages() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut ledger) = ledger_in(dir.path());
    let me = Lease::current().unwrap();
    let none = Budgets::default();
    for n in 0..60 {
        let k = key(&format!("call-{n}"));
        let c = call(&k, "d", &none);
        assert!(matches!(
            ledger.begin(&c, &me).unwrap(),
            Decision::Start { .. }
        ));
        let rec = record(&k, Verdict::Admit, "bridge.allowed_tools", "succeeded");
        ledger
            .finish(&k, &me, &outcome("{\"done\":1}", false), &rec)
            .unwrap();
    }
    // A new dispatcher reads the whole WAL when it opens the ledger: it stays small.
    let wal = std::fs::metadata(dir.path().join("ledger.db-wal")).unwrap();
    let pages = wal.len() / 4096;
    assert!(pages <= 2 * 128 + 16, "the WAL holds {pages} pages");
    drop(ledger);
    assert!(path.exists());
}

#[test]
fn the_folder_is_synced_only_for_a_new_ledger_or_a_new_wal() {
    use crate::ledger::sqlite::needs_folder_sync;
    let wal = Some((1, 42));
    assert!(
        !needs_folder_sync(false, wal, wal),
        "the same WAL as before"
    );
    assert!(
        needs_folder_sync(true, wal, wal),
        "this process made the ledger"
    );
    assert!(needs_folder_sync(false, None, wal), "SQLite made the WAL");
    assert!(
        needs_folder_sync(false, wal, Some((1, 43))),
        "another WAL in its place"
    );
    assert!(needs_folder_sync(false, None, None));
}

#[test]
fn sqlite_is_built_without_its_own_folder_sync() {
    // `.cargo/config.toml` sets it; `SqliteStore::settle` does that sync when it is needed.
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    let options: Vec<String> = conn
        .prepare("PRAGMA compile_options")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        options.iter().any(|o| o == "DISABLE_DIRSYNC"),
        "{options:?}"
    );
}

#[test]
fn a_reader_uses_the_wal_as_it_is_or_reads_a_ledger_without_one_as_immutable() {
    use crate::ledger::sqlite::{read_mode, uri_path, ReadMode};
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        rustix::fs::lstat(&path).unwrap()
    };
    let (empty, full) = (file("empty", b""), file("full", b"frames"));
    let folder = rustix::fs::lstat(dir.path()).unwrap();
    assert_eq!(read_mode(None, None).unwrap(), ReadMode::Immutable);
    assert_eq!(
        read_mode(Some((&empty, false)), Some((&empty, false))).unwrap(),
        ReadMode::Immutable
    );
    assert_eq!(
        read_mode(Some((&full, true)), Some((&empty, true))).unwrap(),
        ReadMode::Shared
    );
    assert_eq!(
        read_mode(Some((&empty, true)), Some((&empty, true))).unwrap(),
        ReadMode::Shared
    );
    for (wal, shm) in [
        (Some((&full, false)), Some((&empty, true))),
        (Some((&full, true)), Some((&empty, false))),
        (Some((&full, true)), None),
    ] {
        assert!(matches!(
            read_mode(wal, shm),
            Err(LedgerError::Unreadable(_))
        ));
    }
    assert!(matches!(
        read_mode(Some((&folder, true)), None),
        Err(LedgerError::NotRegular(_))
    ));
    assert_eq!(
        uri_path(Path::new("/a b/l?.db#%x")),
        "file:/a%20b/l%3F.db%23%25x"
    );
}

/// The names in `folder`, sorted.
fn names(folder: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

type Look = (u64, String, std::time::SystemTime, (i64, i64));

/// A file's size, the SHA-256 of its bytes, its modification time and its change time.
fn look(path: &Path) -> Look {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).unwrap();
    let bytes = std::fs::read(path).unwrap();
    (
        meta.len(),
        ptd_wire::envelope::canonical::sha256_hex(&bytes),
        meta.modified().unwrap(),
        (meta.ctime(), meta.ctime_nsec()),
    )
}

/// What a [`look`] says of a file's content: its size, bytes and modification time.
fn content(look: &Look) -> (u64, String, std::time::SystemTime) {
    (look.0, look.1.clone(), look.2)
}

#[test]
fn peek_on_a_ledger_opened_read_only_makes_and_changes_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut ledger) = ledger_in(dir.path());
    let me = Lease::current().unwrap();
    let budgets = Budgets {
        calls: Some(5),
        ..Budgets::default()
    };
    let (done, running, new) = (key("done"), key("running"), key("new"));
    assert!(matches!(
        ledger.begin(&call(&done, "d", &budgets), &me).unwrap(),
        Decision::Start { .. }
    ));
    let rec = record(&done, Verdict::Admit, "bridge.allowed_tools", "succeeded");
    ledger
        .finish(&done, &me, &outcome("{\"done\":1}", false), &rec)
        .unwrap();
    assert!(matches!(
        ledger.begin(&call(&running, "d", &budgets), &me).unwrap(),
        Decision::Start { .. }
    ));
    let peeks = |ledger: &mut Ledger| {
        let snap = ledger.peek(&call(&done, "d", &budgets)).unwrap();
        assert_eq!(snap.row.map(|r| r.state), Some(CallState::Final));
        assert_eq!((snap.calls, snap.adapter_ms), (2, 5));
        assert_eq!(snap.running, std::slice::from_ref(&me));
        let snap = ledger.peek(&call(&new, "d", &budgets)).unwrap();
        assert_eq!((snap.row, snap.calls), (None, 2));
        assert_eq!(snap.running, std::slice::from_ref(&me));
    };

    // A copy of the file alone, 0444 in a 0555 folder: read as immutable, nothing made beside
    // it (root may write the folder whatever its bits: nothing appears because nothing is made).
    ledger.checkpoint();
    let archive = dir.path().join("archive");
    std::fs::create_dir(&archive).unwrap();
    let copy = archive.join("ledger.db");
    std::fs::copy(&path, &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(&archive, std::fs::Permissions::from_mode(0o555)).unwrap();
    let before = look(&copy);
    peeks(&mut Ledger::open_existing(&copy, soon()).unwrap());
    assert_eq!(names(&archive), ["ledger.db"]);
    assert_eq!(look(&copy), before);
    std::fs::set_permissions(&archive, std::fs::Permissions::from_mode(0o755)).unwrap();

    // Read as immutable, a ledger a dispatcher writes meanwhile is not trusted, as for `audit`.
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut immutable = Ledger::open_existing(&copy, soon()).unwrap();
    peeks(&mut immutable);
    Ledger::open(&copy, soon())
        .unwrap()
        .record(&record(&key("r"), Verdict::Deny, "bridge_ref", "denied"))
        .unwrap();
    assert!(matches!(
        immutable.peek(&call(&new, "d", &budgets)),
        Err(LedgerError::ChangedWhileRead)
    ));
    drop(immutable);

    // The ledger in use, its -wal holding commits beside its -shm: read with SQLite's locks,
    // nothing added and nothing written.
    ledger
        .record(&record(&key("r"), Verdict::Deny, "bridge_ref", "denied"))
        .unwrap();
    let wal = dir.path().join("ledger.db-wal");
    assert!(std::fs::metadata(&wal).unwrap().len() > 0);
    let in_use = names(dir.path());
    let before = [&path, &wal].map(|p| content(&look(p)));
    let mut reader = Ledger::open_existing(&path, soon()).unwrap();
    // (Opening may touch the WAL's change time: SQLite run as root gives a WAL it opens the
    // database's owner, the one it has. After that nothing, peeking included, touches a file.)
    let opened = [look(&path), look(&wal)];
    peeks(&mut reader);
    assert_eq!([look(&path), look(&wal)], opened);
    drop(reader);
    assert_eq!(names(dir.path()), in_use);
    assert_eq!([&path, &wal].map(|p| content(&look(p))), before);
    // The writer's own look writes nothing either.
    let opened = [look(&path), look(&wal)];
    peeks(&mut ledger);
    assert_eq!([look(&path), look(&wal)], opened);
}
