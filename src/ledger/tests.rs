//! The ledger's rules on a real SQLite file, and many real processes on one ledger (the test
//! binary re-invoked on the ignored [`worker`] test).

use super::*;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A [`Ledger::wait`] pause that sleeps and never stops waiting.
fn sleep(pause: Duration) -> bool {
    std::thread::sleep(pause);
    true
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(20)
}

fn key(request_id: &str) -> Key {
    Key {
        bridge_ref: "sha256:bridge".into(),
        session_id: "s1".into(),
        request_id: request_id.into(),
    }
}

fn record(key: &Key, decision: Verdict, rule: &str, status: &str) -> AuditRecord {
    AuditRecord {
        time_ms: now_ms(),
        bridge_ref: key.bridge_ref.clone(),
        session_id: key.session_id.clone(),
        request_id: key.request_id.clone(),
        tool: "workspace.read".into(),
        operation: "call".into(),
        request_digest: "d".into(),
        attempt: 1,
        decision,
        rule: Name::new(rule).unwrap(),
        status: Name::new(status).unwrap(),
        code: None,
        duration_ms: 3,
        adapter_ms: Some(2),
        exit_status: 0,
        resources: Resources::default(),
        transcript_ref: Some("t-1.json".into()),
    }
}

fn outcome(envelope: &str, retryable: bool) -> Outcome<'_> {
    Outcome {
        envelope,
        exit_status: if retryable { 69 } else { 0 },
        retryable,
        adapter_ms: 5,
    }
}

fn call<'a>(key: &'a Key, digest: &'a str, budgets: &'a Budgets) -> Call<'a> {
    Call {
        key,
        digest,
        tool: "workspace.read",
        budgets,
    }
}

fn ledger_in(dir: &Path) -> (PathBuf, Ledger) {
    let path = dir.join("ledger.db");
    let ledger = Ledger::open(&path, soon()).unwrap();
    (path, ledger)
}

/// A lease of a process that is certainly gone: this process's pid with another start time.
fn dead_lease() -> Lease {
    let me = Lease::current().unwrap();
    Lease {
        start_ticks: me.start_ticks + 12345,
        ..me
    }
}

fn snapshot(row: Option<CallRow>) -> Snapshot {
    Snapshot {
        row,
        calls: 0,
        tool_calls: 0,
        adapter_ms: 0,
        running: Vec::new(),
    }
}

fn row(state: CallState, digest: &str) -> CallRow {
    CallRow {
        digest: digest.into(),
        state,
        attempt: 2,
        lease: dead_lease(),
        outcome: Some(Recorded {
            envelope: "{}".into(),
            exit_status: 0,
        }),
    }
}

#[test]
fn decide_follows_the_idempotency_rules() {
    let k = key("r");
    let none = Budgets::default();
    let c = call(&k, "d", &none);
    let live = |_: &Lease| true;
    let dead = |_: &Lease| false;
    assert_eq!(
        decide(&c, &snapshot(None), &live),
        (
            Decision::Start {
                attempt: 1,
                adapter_ms_left: None
            },
            Claim::Admit { attempt: 1 }
        )
    );
    let other = snapshot(Some(row(CallState::Final, "other")));
    assert_eq!(decide(&c, &other, &live), (Decision::Reused, Claim::None));
    let done = snapshot(Some(row(CallState::Final, "d")));
    assert!(
        matches!(decide(&c, &done, &live), (Decision::Replay(r), Claim::None) if r.envelope == "{}")
    );
    let running = snapshot(Some(row(CallState::Running, "d")));
    assert!(matches!(
        decide(&c, &running, &live),
        (Decision::Held(_), Claim::None)
    ));
    assert!(matches!(
        decide(&c, &running, &dead),
        (Decision::Indeterminate { attempt: 2, .. }, Claim::TakeOver)
    ));
    let retry = snapshot(Some(row(CallState::Retryable, "d")));
    assert_eq!(
        decide(&c, &retry, &live).1,
        Claim::Admit { attempt: 3 },
        "a retryable outcome runs again with the attempt count up"
    );
}

#[test]
fn decide_checks_every_budget_and_counts_only_live_calls_in_flight() {
    let k = key("r");
    let mut budgets = Budgets {
        calls: Some(3),
        adapter_ms: Some(100),
        max_concurrent: Some(2),
        ..Budgets::default()
    };
    budgets.tools.insert("workspace.read".into(), 1);
    let c = call(&k, "d", &budgets);
    let live = |l: &Lease| l.pid == 1;
    let mut snap = snapshot(None);
    snap.calls = 3;
    let over = |budget, limit, used, tool: Option<&str>| OverBudget {
        budget,
        limit,
        used,
        tool: tool.map(String::from),
    };
    assert_eq!(
        decide(&c, &snap, &live).0,
        Decision::BudgetExhausted(over(BudgetKind::Calls, 3, 3, None))
    );
    snap.calls = 2;
    snap.tool_calls = 1;
    assert_eq!(
        decide(&c, &snap, &live).0,
        Decision::BudgetExhausted(over(BudgetKind::Tool, 1, 1, Some("workspace.read")))
    );
    snap.tool_calls = 0;
    snap.adapter_ms = 100;
    assert_eq!(
        decide(&c, &snap, &live).0,
        Decision::BudgetExhausted(over(BudgetKind::AdapterMs, 100, 100, None))
    );
    snap.adapter_ms = 40;
    let lease = |pid| Lease {
        boot_id: "b".into(),
        pid,
        start_ticks: 1,
    };
    snap.running = vec![lease(1), lease(2), lease(1)];
    assert_eq!(
        decide(&c, &snap, &live).0,
        Decision::ConcurrencyLimited(over(BudgetKind::Concurrent, 2, 2, None))
    );
    snap.running = vec![lease(1), lease(2), lease(3)];
    assert_eq!(
        decide(&c, &snap, &live),
        (
            Decision::Start {
                attempt: 1,
                adapter_ms_left: Some(60)
            },
            Claim::Admit { attempt: 1 }
        )
    );
    let details = serde_json::to_value(over(BudgetKind::Tool, 1, 1, Some("x"))).unwrap();
    assert_eq!(
        details,
        serde_json::json!({"budget": "tool", "limit": 1, "used": 1, "tool": "x"})
    );
    let details = serde_json::to_value(over(BudgetKind::AdapterMs, 1, 1, None)).unwrap();
    assert_eq!(
        details,
        serde_json::json!({"budget": "adapter_ms", "limit": 1, "used": 1})
    );
}

#[test]
fn a_new_ledger_is_0600_and_a_call_runs_once_then_replays() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut ledger) = ledger_in(dir.path());
    assert_eq!(crate::fs::test_support::mode(&path), 0o600);
    let me = Lease::current().unwrap();
    let none = Budgets::default();
    let k = key("r1");
    let c = call(&k, "d1", &none);
    assert!(matches!(
        ledger.begin(&c, &me).unwrap(),
        Decision::Start { attempt: 1, .. }
    ));
    let row = ledger.call(&k).unwrap().unwrap();
    assert_eq!(
        (row.state, row.lease.clone()),
        (CallState::Running, me.clone())
    );
    let rec = record(&k, Verdict::Admit, "bridge.allowed_tools", "succeeded");
    assert_eq!(
        ledger
            .finish(&k, &me, &outcome("{\"env\":1}", false), &rec)
            .unwrap(),
        Finished::Stored
    );
    // A second process (a second connection) sees the recorded envelope.
    let mut again = Ledger::open(&path, soon()).unwrap();
    assert_eq!(
        again.begin(&c, &me).unwrap(),
        Decision::Replay(Recorded {
            envelope: "{\"env\":1}".into(),
            exit_status: 0
        })
    );
    assert_eq!(
        again.begin(&call(&k, "d2", &none), &me).unwrap(),
        Decision::Reused
    );
    again
        .record(&record(&k, Verdict::Replay, "ledger:replay", "succeeded"))
        .unwrap();
    match again.verify().unwrap() {
        Verification::Intact { records, head } => {
            assert_eq!(records, 2);
            assert_eq!(head.len(), 64);
        }
        broken => panic!("{broken:?}"),
    }
    // WAL mode persists in the file.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn retryable_outcomes_run_again_and_dead_holders_are_indeterminate() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut ledger) = ledger_in(dir.path());
    let me = Lease::current().unwrap();
    let none = Budgets::default();
    let k = key("r");
    let c = call(&k, "d", &none);
    assert!(matches!(
        ledger.begin(&c, &me).unwrap(),
        Decision::Start { attempt: 1, .. }
    ));
    let rec = record(&k, Verdict::Admit, "bridge.allowed_tools", "unavailable");
    ledger
        .finish(&k, &me, &outcome("{\"try\":1}", true), &rec)
        .unwrap();
    assert_eq!(
        ledger.call(&k).unwrap().unwrap().state,
        CallState::Retryable
    );
    assert!(matches!(
        ledger.begin(&c, &me).unwrap(),
        Decision::Start { attempt: 2, .. }
    ));
    // Held by a dead process: indeterminate, and the caller now holds it.
    let k2 = key("crashed");
    let c2 = call(&k2, "d", &none);
    let dead = dead_lease();
    assert!(matches!(
        ledger.begin(&c2, &dead).unwrap(),
        Decision::Start { .. }
    ));
    match ledger.begin(&c2, &me).unwrap() {
        Decision::Indeterminate { attempt, holder } => {
            assert_eq!((attempt, holder), (1, dead.clone()));
        }
        other => panic!("{other:?}"),
    }
    // The dead holder's late finish is refused; ours stores the final failure.
    let rec = record(&k2, Verdict::Refuse, "ledger:indeterminate", "failed");
    assert_eq!(
        ledger
            .finish(&k2, &dead, &outcome("late", false), &rec)
            .unwrap(),
        Finished::NotHolder
    );
    assert_eq!(
        ledger
            .finish(&k2, &me, &outcome("{\"failed\":1}", false), &rec)
            .unwrap(),
        Finished::Stored
    );
    assert_eq!(
        ledger.begin(&c2, &me).unwrap(),
        Decision::Replay(Recorded {
            envelope: "{\"failed\":1}".into(),
            exit_status: 0
        })
    );
}

#[test]
fn wait_returns_when_the_holder_finishes_or_dies_and_gives_up_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut ledger) = ledger_in(dir.path());
    let me = Lease::current().unwrap();
    let none = Budgets::default();
    let mut child = Command::new("sleep").arg("60").spawn().unwrap();
    let holder = Lease::of(child.id()).unwrap().unwrap();
    let k = key("held");
    let c = call(&k, "d", &none);
    assert!(matches!(
        ledger.begin(&c, &holder).unwrap(),
        Decision::Start { .. }
    ));
    let started = Instant::now();
    let held = ledger
        .wait(
            &c,
            &me,
            Instant::now() + Duration::from_millis(300),
            &mut sleep,
        )
        .unwrap();
    assert_eq!(held.decision, Decision::Held(holder.clone()));
    assert!(held.waited);
    assert!(started.elapsed() >= Duration::from_millis(300));
    // A caller that stops waiting (it received a signal) is answered at once, still held.
    let started = Instant::now();
    let mut pauses = 0;
    let stopped = ledger
        .wait(
            &c,
            &me,
            Instant::now() + Duration::from_secs(30),
            &mut |_| {
                pauses += 1;
                false
            },
        )
        .unwrap();
    assert_eq!(stopped.decision, Decision::Held(holder.clone()));
    assert!(stopped.waited);
    assert_eq!(pauses, 1);
    assert!(started.elapsed() < Duration::from_secs(10));
    // A key nobody holds is answered without a pause.
    let free = key("free");
    let got = ledger
        .wait(&call(&free, "d", &none), &me, soon(), &mut |_| {
            panic!("no pause")
        })
        .unwrap();
    assert!(matches!(got.decision, Decision::Start { .. }), "{got:?}");
    assert!(!got.waited);
    // The holder finishes while we wait: we get its envelope.
    let finisher = {
        let (path, holder, k) = (path.clone(), holder.clone(), k.clone());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            let mut other = Ledger::open(&path, soon()).unwrap();
            let rec = record(&k, Verdict::Admit, "bridge.allowed_tools", "succeeded");
            other
                .finish(&k, &holder, &outcome("{\"done\":1}", false), &rec)
                .unwrap()
        })
    };
    let got = ledger.wait(&c, &me, soon(), &mut sleep).unwrap().decision;
    assert_eq!(finisher.join().unwrap(), Finished::Stored);
    assert!(matches!(got, Decision::Replay(r) if r.envelope == "{\"done\":1}"));
    // A holder that dies while we wait: indeterminate.
    let k2 = key("dies");
    let c2 = call(&k2, "d", &none);
    assert!(matches!(
        ledger.begin(&c2, &holder).unwrap(),
        Decision::Start { .. }
    ));
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        child.kill().unwrap();
        child.wait().unwrap();
    });
    let got = ledger.wait(&c2, &me, soon(), &mut sleep).unwrap().decision;
    killer.join().unwrap();
    assert!(matches!(got, Decision::Indeterminate { .. }), "{got:?}");
}

#[test]
fn budgets_are_counted_in_the_ledger_and_replays_do_not_spend() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut ledger) = ledger_in(dir.path());
    let me = Lease::current().unwrap();
    let budgets = Budgets {
        calls: Some(2),
        adapter_ms: Some(12),
        ..Budgets::default()
    };
    let (k1, k2, k3) = (key("a"), key("b"), key("c"));
    let rec = record(&k1, Verdict::Admit, "bridge.allowed_tools", "succeeded");
    match ledger.begin(&call(&k1, "d", &budgets), &me).unwrap() {
        Decision::Start {
            adapter_ms_left, ..
        } => assert_eq!(adapter_ms_left, Some(12)),
        other => panic!("{other:?}"),
    }
    ledger.finish(&k1, &me, &outcome("1", false), &rec).unwrap();
    assert!(matches!(
        ledger.begin(&call(&k1, "d", &budgets), &me).unwrap(),
        Decision::Replay(_)
    ));
    match ledger.begin(&call(&k2, "d", &budgets), &me).unwrap() {
        Decision::Start {
            adapter_ms_left, ..
        } => assert_eq!(adapter_ms_left, Some(7)),
        other => panic!("{other:?}"),
    }
    ledger.finish(&k2, &me, &outcome("2", false), &rec).unwrap();
    assert_eq!(
        ledger.begin(&call(&k3, "d", &budgets), &me).unwrap(),
        Decision::BudgetExhausted(OverBudget {
            budget: BudgetKind::Calls,
            limit: 2,
            used: 2,
            tool: None
        })
    );
    // Another session has its own budget; adapter time ran out in this one.
    let other = Key {
        session_id: "s2".into(),
        ..k3.clone()
    };
    assert!(matches!(
        ledger.begin(&call(&other, "d", &budgets), &me).unwrap(),
        Decision::Start { .. }
    ));
    let loose = Budgets {
        adapter_ms: Some(10),
        ..Budgets::default()
    };
    assert!(matches!(
        ledger.begin(&call(&k3, "d", &loose), &me).unwrap(),
        Decision::BudgetExhausted(OverBudget {
            budget: BudgetKind::AdapterMs,
            used: 10,
            ..
        })
    ));
    // Concurrency: the live running call of s2 counts, a dead one does not.
    let conc = Budgets {
        max_concurrent: Some(1),
        ..Budgets::default()
    };
    let k4 = Key {
        request_id: "d4".into(),
        ..other.clone()
    };
    assert!(matches!(
        ledger.begin(&call(&k4, "d", &conc), &me).unwrap(),
        Decision::ConcurrencyLimited(OverBudget {
            used: 1,
            limit: 1,
            ..
        })
    ));
    let k5 = Key {
        session_id: "s3".into(),
        ..k4.clone()
    };
    assert!(matches!(
        ledger
            .begin(&call(&k5, "d", &none_budgets()), &dead_lease())
            .unwrap(),
        Decision::Start { .. }
    ));
    let k6 = Key {
        request_id: "d6".into(),
        ..k5.clone()
    };
    assert!(matches!(
        ledger.begin(&call(&k6, "d", &conc), &me).unwrap(),
        Decision::Start { .. }
    ));
}

fn none_budgets() -> Budgets {
    Budgets::default()
}

/// A ledger with three records, and a raw connection to tamper with it.
fn three_records(dir: &Path) -> (PathBuf, rusqlite::Connection) {
    let (path, mut ledger) = ledger_in(dir);
    for id in ["a", "b", "c"] {
        ledger
            .record(&record(
                &key(id),
                Verdict::Deny,
                "bridge.allowed_tools",
                "denied",
            ))
            .unwrap();
    }
    (path.clone(), rusqlite::Connection::open(&path).unwrap())
}

fn verify(path: &Path) -> Verification {
    Ledger::open_existing(path, soon())
        .unwrap()
        .verify()
        .unwrap()
}

#[track_caller]
fn broken_at(path: &Path, seq: u64, says: &str) {
    match verify(path) {
        Verification::Broken { intact, at } => {
            assert_eq!((at.seq, intact), (seq, seq - 1), "{at:?}");
            assert!(at.reason.contains(says), "{at:?}");
        }
        intact => panic!("{intact:?}"),
    }
}

#[test]
fn verify_names_the_first_edited_removed_or_unreadable_record() {
    let dir = tempfile::tempdir().unwrap();
    let (path, conn) = three_records(&dir.path().join("x").tap_mkdir());
    assert!(matches!(
        verify(&path),
        Verification::Intact { records: 3, .. }
    ));
    conn.execute(
        "UPDATE audit SET body = replace(body, '\"denied\"', '\"succeeded\"') WHERE seq = 2",
        [],
    )
    .unwrap();
    broken_at(&path, 2, "hash does not match");

    // Rewritten record with a fresh, self-consistent hash: the next record's prev catches it.
    let (path, conn) = three_records(&dir.path().join("y").tap_mkdir());
    let body: String = conn
        .query_row("SELECT body FROM audit WHERE seq = 2", [], |r| r.get(0))
        .unwrap();
    let body = body.replace("\"denied\"", "\"failed\"");
    let hash = crate::envelope::canonical::sha256_hex(body.as_bytes());
    conn.execute(
        "UPDATE audit SET body = ?1, hash = ?2 WHERE seq = 2",
        rusqlite::params![body, hash],
    )
    .unwrap();
    broken_at(&path, 3, "prev does not match");

    let (path, conn) = three_records(&dir.path().join("z").tap_mkdir());
    conn.execute("DELETE FROM audit WHERE seq = 2", []).unwrap();
    broken_at(&path, 2, "missing");

    let (path, conn) = three_records(&dir.path().join("w").tap_mkdir());
    conn.execute("DELETE FROM audit WHERE seq = 3", []).unwrap();
    broken_at(&path, 3, "missing");

    let (path, conn) = three_records(&dir.path().join("v").tap_mkdir());
    conn.execute("UPDATE audit SET body = x'ff00' WHERE seq = 1", [])
        .unwrap();
    broken_at(&path, 1, "cannot be read");

    let (path, conn) = three_records(&dir.path().join("u").tap_mkdir());
    conn.execute("UPDATE audit SET time_ms = time_ms + 1 WHERE seq = 1", [])
        .unwrap();
    broken_at(&path, 1, "columns do not match");

    let (path, conn) = three_records(&dir.path().join("t").tap_mkdir());
    conn.execute(
        "UPDATE audit SET body = replace(body, '\"attempt\":1', '\"attempt\":1,\"input\":\"x\"') WHERE seq = 1",
        [],
    )
    .unwrap();
    broken_at(&path, 1, "not an audit record");
}

trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}

impl TapMkdir for PathBuf {
    fn tap_mkdir(self) -> PathBuf {
        std::fs::create_dir(&self).unwrap();
        self
    }
}

#[test]
fn a_record_cannot_carry_control_characters_or_free_text_names() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut ledger) = ledger_in(dir.path());
    let mut rec = record(&key("r"), Verdict::Deny, "bridge_ref", "denied");
    rec.request_id = "a\nb".into();
    assert!(matches!(ledger.record(&rec), Err(LedgerError::Record(m)) if m.contains("request_id")));
    rec.request_id = "x".repeat(audit::MAX_FIELD_BYTES + 1);
    assert!(matches!(ledger.record(&rec), Err(LedgerError::Record(_))));
    for bad in ["", "Has Space", "UPPER", "a\"b", &"x".repeat(65)] {
        assert!(Name::new(bad).is_err(), "{bad:?}");
    }
    assert!(Name::new("request.authorization.allowed_tools").is_ok());
    assert!(matches!(
        verify_path(&dir.path().join("ledger.db")),
        Verification::Intact { records: 0, .. }
    ));
}

fn verify_path(path: &Path) -> Verification {
    verify(path)
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
    assert!(matches!(
        Ledger::open_existing(&d.join("empty.db"), soon()).unwrap_err(),
        LedgerError::Foreign(m) if m == "an empty file"
    ));
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
    assert!(matches!(
        err(Path::new("/dev/null")),
        LedgerError::NotRegular("character device")
    ));
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
        crate::fs::test_support::assert_no_host_path(&e, d);
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

const WORKER_LEDGER: &str = "PTD_LEDGER_TEST_WORKER";

fn spawn_worker(ledger: &Path, side: &Path, keys: &str, extra: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "ledger::tests::worker",
        "--ignored",
        "--nocapture",
        "--test-threads",
        "1",
        "-q",
    ])
    .env(WORKER_LEDGER, ledger)
    .env("PTD_LEDGER_TEST_SIDE", side)
    .env("PTD_LEDGER_TEST_KEYS", keys)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// One dispatcher-like process: for each key in `PTD_LEDGER_TEST_KEYS` (`session/request`),
/// begin (waiting), "run" it (a line in the side file, a pause), finish; print `@@ what key`.
#[test]
#[ignore = "a worker process of the multi-process tests"]
fn worker() {
    let Some(path) = std::env::var_os(WORKER_LEDGER) else {
        return;
    };
    let side = std::env::var_os("PTD_LEDGER_TEST_SIDE").unwrap();
    let keys = std::env::var("PTD_LEDGER_TEST_KEYS").unwrap();
    let pause_ms: u64 = std::env::var("PTD_LEDGER_TEST_PAUSE_MS").map_or(0, |v| v.parse().unwrap());
    let mut budgets = Budgets::default();
    if let Ok(n) = std::env::var("PTD_LEDGER_TEST_CALLS") {
        parse_budget_flag(&mut budgets, "--budget-calls", &n).unwrap();
    }
    let lease = Lease::current().unwrap();
    let mut ledger =
        Ledger::open(Path::new(&path), Instant::now() + Duration::from_secs(60)).unwrap();
    for item in keys.split(',') {
        let (session, request) = item.split_once('/').unwrap();
        let k = Key {
            bridge_ref: "sha256:bridge".into(),
            session_id: session.into(),
            request_id: request.into(),
        };
        // The budget is the "b" session's only.
        let unlimited = Budgets::default();
        let c = call(
            &k,
            "digest",
            if session == "b" { &budgets } else { &unlimited },
        );
        let decision = ledger
            .wait(
                &c,
                &lease,
                Instant::now() + Duration::from_secs(60),
                &mut sleep,
            )
            .unwrap()
            .decision;
        let what = match decision {
            Decision::Start { .. } => {
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(&side)
                    .unwrap();
                f.write_all(format!("{item} {}\n", lease.pid).as_bytes())
                    .unwrap();
                std::thread::sleep(Duration::from_millis(pause_ms));
                let rec = record(&k, Verdict::Admit, "bridge.allowed_tools", "succeeded");
                let env = format!("{{\"ran_by\":{}}}", lease.pid);
                assert_eq!(
                    ledger
                        .finish(&k, &lease, &outcome(&env, false), &rec)
                        .unwrap(),
                    Finished::Stored
                );
                "start"
            }
            Decision::Replay(_) => {
                ledger
                    .record(&record(&k, Verdict::Replay, "ledger:replay", "succeeded"))
                    .unwrap();
                "replay"
            }
            Decision::Indeterminate { .. } => {
                let rec = record(&k, Verdict::Refuse, "ledger:indeterminate", "failed");
                ledger
                    .finish(
                        &k,
                        &lease,
                        &outcome("{\"indeterminate\":true}", false),
                        &rec,
                    )
                    .unwrap();
                "indeterminate"
            }
            Decision::BudgetExhausted(_) => {
                ledger
                    .record(&record(&k, Verdict::Deny, "budget:calls", "denied"))
                    .unwrap();
                "budget"
            }
            other => panic!("{other:?}"),
        };
        println!("@@ {what} {item}");
    }
}

fn side_counts(side: &Path) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for line in std::fs::read_to_string(side).unwrap_or_default().lines() {
        *counts
            .entry(line.split(' ').next().unwrap().to_string())
            .or_insert(0) += 1;
    }
    counts
}

#[test]
fn many_processes_share_one_ledger_without_losing_a_record() {
    const PROCESSES: usize = 60;
    let dir = tempfile::tempdir().unwrap();
    let (path, side) = (dir.path().join("ledger.db"), dir.path().join("ran"));
    let children: Vec<Child> = (0..PROCESSES)
        .map(|i| {
            // Four keys every process wants, one of its own, one on a session with a budget.
            let keys = format!("s/shared0,s/shared1,s/shared2,s/shared3,s/own{i},b/call{i}");
            spawn_worker(&path, &side, &keys, &[("PTD_LEDGER_TEST_CALLS", "25")])
        })
        .collect();
    let mut said = std::collections::BTreeMap::<String, usize>::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(rest) = line.strip_prefix("@@ ") {
                let what = rest.split(' ').next().unwrap();
                let tag = if rest.contains(" b/") {
                    format!("{what} b")
                } else {
                    what.to_string()
                };
                *said.entry(tag).or_insert(0) += 1;
            }
        }
    }
    assert_eq!(said.get("start b"), Some(&25), "{said:?}");
    assert_eq!(said.get("budget b"), Some(&(PROCESSES - 25)), "{said:?}");
    assert_eq!(said.get("start"), Some(&(4 + PROCESSES)), "{said:?}");
    assert_eq!(said.get("replay"), Some(&(4 * (PROCESSES - 1))), "{said:?}");
    let ran = side_counts(&side);
    assert!(ran.values().all(|&n| n == 1), "a key ran twice: {ran:?}");
    assert_eq!(ran.len(), 4 + PROCESSES + 25);
    match verify(&path) {
        Verification::Intact { records, .. } => assert_eq!(records as usize, 6 * PROCESSES),
        broken => panic!("{broken:?}"),
    }
}

/// A small xorshift: the crash test's "random moments", seeded from the clock.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn sigkill_at_any_moment_leaves_the_ledger_consistent_and_no_key_runs_twice() {
    const ROUNDS: usize = 8;
    const WORKERS: usize = 8;
    let keys: Vec<String> = (0..6).map(|i| format!("s/k{i}")).collect();
    let dir = tempfile::tempdir().unwrap();
    let (path, side) = (dir.path().join("ledger.db"), dir.path().join("ran"));
    let mut seed = now_ms() | 1;
    let mut ledger = Ledger::open(&path, soon()).unwrap();
    for round in 0..ROUNDS {
        let round_keys: Vec<String> = keys.iter().map(|k| format!("{k}r{round}")).collect();
        let mut children: Vec<Child> = (0..WORKERS)
            .map(|_| {
                spawn_worker(
                    &path,
                    &side,
                    &round_keys.join(","),
                    &[("PTD_LEDGER_TEST_PAUSE_MS", "3")],
                )
            })
            .collect();
        for child in children.iter_mut() {
            std::thread::sleep(Duration::from_millis(xorshift(&mut seed) % 40));
            if !xorshift(&mut seed).is_multiple_of(3) {
                let _ = child.kill();
            }
        }
        for child in children {
            let out = child.wait_with_output().unwrap();
            // Killed or finished: a worker that exited by itself must have succeeded.
            use std::os::unix::process::ExitStatusExt;
            assert!(
                out.status.success() || out.status.signal() == Some(9),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            matches!(verify(&path), Verification::Intact { .. }),
            "round {round}: {:?}",
            verify(&path)
        );
        for item in &round_keys {
            let (s, r) = item.split_once('/').unwrap();
            let k = Key {
                bridge_ref: "sha256:bridge".into(),
                session_id: s.into(),
                request_id: r.into(),
            };
            match ledger.call(&k).unwrap() {
                None => {}
                Some(row) if row.state == CallState::Final => {}
                Some(row) => {
                    assert_eq!(row.state, CallState::Running);
                    assert!(!row.lease.is_live(), "{row:?}");
                }
            }
        }
    }
    // One clean pass settles every key: done (replayed), or indeterminate, or run now.
    let all: Vec<String> = (0..ROUNDS)
        .flat_map(|round| keys.iter().map(move |k| format!("{k}r{round}")))
        .collect();
    let out = spawn_worker(&path, &side, &all.join(","), &[])
        .wait_with_output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let ran = side_counts(&side);
    for item in &all {
        let line = stdout
            .lines()
            .find(|l| l.ends_with(&format!(" {item}")))
            .unwrap_or_else(|| panic!("{item} not settled: {stdout}"));
        let n = ran.get(item).copied().unwrap_or(0);
        assert!(n <= 1, "{item} ran {n} times");
        if line.starts_with("@@ replay") {
            // Final before the clean pass: it finished (so it ran) or was declared
            // indeterminate by a worker of its round.
            let (s, r) = item.split_once('/').unwrap();
            let k = Key {
                bridge_ref: "sha256:bridge".into(),
                session_id: s.into(),
                request_id: r.into(),
            };
            let row = ledger.call(&k).unwrap().unwrap();
            let env = &row.outcome.unwrap().envelope;
            assert!(
                env.contains("ran_by") == (n == 1) || env.contains("indeterminate"),
                "{item}: {env}"
            );
        } else if line.starts_with("@@ start") {
            assert_eq!(n, 1);
        }
    }
    assert!(matches!(verify(&path), Verification::Intact { .. }));
}

#[test]
fn the_calls_in_flight_are_found_through_the_partial_index_not_the_session_history() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _ledger) = ledger_in(dir.path());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let plan: Vec<String> = conn
        .prepare(&format!(
            "EXPLAIN QUERY PLAN {}",
            super::sqlite::RUNNING_CALLS
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
    use super::sqlite::needs_folder_sync;
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
