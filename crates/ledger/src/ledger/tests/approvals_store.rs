//! Approvals in the store (SPEC §18): one pending approval per key, a run exactly once after
//! approval, denial, expiry, session grants, refused decisions, the race, backups and the
//! migration of a version-3 ledger. The rules alone are in `approvals.rs`.

use super::approvals::{an_ask, asking, decided};
use super::*;

// The shared suite: these run unchanged against SQLite and PostgreSQL.
both!(
    a_key_is_asked_once_and_a_retry_gets_the_same_approval,
    an_ask_out_of_bounds_is_refused_before_anything_is_written,
    an_approved_key_runs_once_then_replays_and_a_denied_one_never_runs,
    an_approval_past_its_expiry_ends_the_key,
    a_grant_for_the_session_starts_its_tool_in_that_session_only,
    a_pending_key_starts_once_its_session_has_a_grant,
    a_refused_decision_changes_nothing,
    many_connections_racing_on_an_approved_key_start_it_once,
    an_approval_on_a_record_is_bounded,
);

/// How many approvals the ledger holds, whatever their state.
fn approval_rows(db: &Db) -> usize {
    db.reader()
        .approvals(&ApprovalFilter::default())
        .unwrap()
        .len()
}

/// `begin` that must answer `ApprovalRequired`: its id, expiry and `new`.
#[track_caller]
fn required(ledger: &mut Ledger, c: &Call<'_>) -> (String, u64, bool) {
    match ledger.begin(c, &Lease::current().unwrap()).unwrap() {
        Decision::ApprovalRequired {
            approval_id,
            expires_ms,
            new,
        } => (approval_id, expires_ms, new),
        other => panic!("{other:?}"),
    }
}

/// `audit verify`'s record count and head, of a SQLite file.
#[track_caller]
fn intact(path: &Path) -> (u64, String) {
    match verify(path) {
        Verification::Intact { records, head } => (records, head),
        other => panic!("{other:?}"),
    }
}

fn a_key_is_asked_once_and_a_retry_gets_the_same_approval(backend: Backend) {
    let Some(db) = Db::new(backend) else { return };
    let mut ledger = db.open();
    let none = Budgets::default();
    let ask = an_ask(60_000);
    let k = key("r1");
    let c = asking(&k, "d1", &none, &ask);
    let before = now_ms();
    let (id, expires, new) = required(&mut ledger, &c);
    assert!(new);
    assert!(crate::ledger::audit::is_approval_id(&id), "{id}");
    // A retry, through another connection: the same approval, none added.
    let mut other = db.open();
    assert_eq!(required(&mut other, &c), (id.clone(), expires, false));
    assert_eq!(approval_rows(&db), 1);
    // Nothing ran: no call row, nothing counted.
    assert_eq!(ledger.call(&k).unwrap(), None);
    assert_eq!(
        (ledger.peek(&c).unwrap().calls, ledger.peek(&c).unwrap().row),
        (0, None)
    );
    let stored = ledger.approval(&id).unwrap().unwrap();
    assert_eq!(
        stored,
        Approval {
            id: id.clone(),
            bridge_ref: k.bridge_ref.clone(),
            session_key: k.session_id.clone(),
            request_key: k.request_id.clone(),
            digest: "d1".into(),
            tool: "workspace.read".into(),
            operation: "call".into(),
            session_shown: "sandbox-1".into(),
            request_shown: "req-shown".into(),
            input_shown: "{\"path\":\"a.txt\"}".into(),
            policy_sha256: "ab".repeat(32),
            entry: "workspace.*".into(),
            line: Some(7),
            created_ms: expires - 60_000,
            expires_ms: expires,
            state: ApprovalState::Pending,
            for_session: false,
            decided_by: None,
            note: None,
            decided_ms: None,
        }
    );
    assert!(stored.created_ms >= before && stored.created_ms <= now_ms());
    // The peek sees it too, and decides as begin did.
    let snap = ledger.peek(&c).unwrap();
    assert_eq!(snap.approval.as_ref(), Some(&stored));
    assert!(matches!(
        decide(&c, &snap, &|l| l.is_live()).0,
        Decision::ApprovalRequired { new: false, .. }
    ));
    // Another digest under the id: reused, whatever the approval.
    assert_eq!(
        ledger
            .begin(&asking(&k, "d2", &none, &ask), &Lease::current().unwrap())
            .unwrap(),
        Decision::Reused
    );
    // Listed (pending, of its session), and through a read-only opening.
    let mut reader = db.reader();
    let pending = ApprovalFilter {
        pending_only: true,
        session_key: Some(k.session_id.clone()),
    };
    assert_eq!(
        reader.approvals(&pending).unwrap(),
        std::slice::from_ref(&stored)
    );
    let elsewhere = ApprovalFilter {
        session_key: Some("s9".into()),
        ..ApprovalFilter::default()
    };
    assert_eq!(reader.approvals(&elsewhere).unwrap(), []);
    assert_eq!(reader.approval(&id).unwrap(), Some(stored));
    assert_eq!(reader.approval("apr_none").unwrap(), None);
    // `wait` does not wait for a person.
    let got = ledger
        .wait(&c, &Lease::current().unwrap(), soon(), &mut |_| {
            panic!("no pause")
        })
        .unwrap();
    assert!(matches!(
        got.decision,
        Decision::ApprovalRequired { new: false, .. }
    ));
    // Asking wrote no record: the main job records its own answer.
    assert_eq!(db.intact().0, 0);
}

fn an_ask_out_of_bounds_is_refused_before_anything_is_written(backend: Backend) {
    let Some(db) = Db::new(backend) else { return };
    let mut ledger = db.open();
    let none = Budgets::default();
    let k = key("r");
    let mut max = an_ask(1000);
    max.input_shown = "x".repeat(MAX_INPUT_SHOWN_BYTES);
    required(&mut ledger, &asking(&k, "d", &none, &max));
    type Change<'a> = &'a dyn Fn(&mut Ask);
    let bad: [(Change<'_>, &str); 6] = [
        (&|a| a.input_shown.push('x'), "input is longer"),
        (&|a| a.policy_sha256 = "AB".repeat(32), "policy sha256"),
        (&|a| a.entry = String::new(), "policy entry is empty"),
        (&|a| a.line = Some(0), "policy line is 0"),
        (
            &|a| a.session_shown = "a\nb".into(),
            "session holds a control",
        ),
        (
            &|a| a.request_shown = "x".repeat(crate::ledger::audit::MAX_FIELD_BYTES + 1),
            "request id is longer",
        ),
    ];
    for (change, says) in bad {
        let mut ask = max.clone();
        change(&mut ask);
        let k = key("other");
        match ledger.begin(&asking(&k, "d", &none, &ask), &Lease::current().unwrap()) {
            Err(LedgerError::Record(m)) => assert!(m.contains(says), "{m} / {says}"),
            other => panic!("{says}: {other:?}"),
        }
    }
    assert_eq!(approval_rows(&db), 1);
}

fn an_approved_key_runs_once_then_replays_and_a_denied_one_never_runs(backend: Backend) {
    let Some(db) = Db::new(backend) else { return };
    let mut ledger = db.open();
    let me = Lease::current().unwrap();
    let none = Budgets::default();
    let ask = an_ask(60_000);
    let k = key("yes");
    let c = asking(&k, "d", &none, &ask);
    let (id, _, _) = required(&mut ledger, &c);
    let approved = ledger
        .decide_approval(&id, &decided(true, now_ms()))
        .unwrap();
    assert_eq!(approved.state, ApprovalState::Approved);
    assert_eq!(approved.decided_by.as_deref(), Some("alice"));
    assert_eq!(approved.note.as_deref(), Some("looked at it"));
    assert!(approved.decided_ms.is_some());
    assert_eq!(ledger.approval(&id).unwrap(), Some(approved));
    assert!(matches!(
        ledger.begin(&c, &me).unwrap(),
        Decision::Start { attempt: 1, .. }
    ));
    // While it runs: held, not a second start.
    assert_eq!(ledger.begin(&c, &me).unwrap(), Decision::Held(me.clone()));
    let rec = record(&k, Verdict::Admit, "bridge.allowed_tools", "succeeded");
    ledger
        .finish(&k, &me, &outcome("{\"ran\":1}", false), &rec)
        .unwrap();
    assert!(
        matches!(ledger.begin(&c, &me).unwrap(), Decision::Replay(r) if r.envelope == "{\"ran\":1}")
    );

    let no = key("no");
    let c = asking(&no, "d", &none, &ask);
    let (id, _, _) = required(&mut ledger, &c);
    let denied = ledger
        .decide_approval(&id, &decided(false, now_ms()))
        .unwrap();
    assert_eq!(denied.state, ApprovalState::Denied);
    for _ in 0..2 {
        assert_eq!(
            ledger.begin(&c, &me).unwrap(),
            Decision::ApprovalDenied {
                approval_id: id.clone()
            }
        );
    }
    assert_eq!(ledger.call(&no).unwrap(), None);

    // The decisions are on the chain, which verifies; export prints who and why.
    assert_eq!(db.intact().0, 3);
    let mut lines = Vec::new();
    db.reader()
        .scan(0, &mut |row| {
            let line = crate::ledger::audit::export_line(&row.unwrap()).unwrap();
            lines.push(serde_json::from_str::<serde_json::Value>(&line).unwrap());
            true
        })
        .unwrap();
    let first = &lines[0];
    assert_eq!(first["rule"], "approval:approve");
    assert_eq!(first["decision"], "admit");
    assert_eq!(first["status"], "approved");
    assert_eq!(first["attempt"], 0);
    assert_eq!(first["request_id"], "req-shown");
    assert_eq!(first["session_id"], "sandbox-1");
    assert_eq!(first["request_digest"], "d");
    assert_eq!(first["code"], serde_json::Value::Null);
    assert_eq!(
        first["policy"],
        serde_json::json!({"sha256": "ab".repeat(32), "entry": "workspace.*", "line": 7})
    );
    assert_eq!(lines[1].get("approval"), None, "the call's own record");
    let last = &lines[2];
    assert_eq!(
        (&last["rule"], &last["decision"], &last["status"]),
        (
            &serde_json::json!("approval:deny"),
            &serde_json::json!("deny"),
            &serde_json::json!("denied")
        )
    );
    assert_eq!(
        last["approval"],
        serde_json::json!({"id": id, "by": "alice", "note": "looked at it", "for_session": false})
    );
}

fn an_approval_past_its_expiry_ends_the_key(backend: Backend) {
    let Some(db) = Db::new(backend) else { return };
    let mut ledger = db.open();
    let me = Lease::current().unwrap();
    let none = Budgets::default();
    // Pending until it expired.
    let short = an_ask(1);
    let k = key("late");
    let c = asking(&k, "d", &none, &short);
    let (id, expires, _) = required(&mut ledger, &c);
    while now_ms() <= expires {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(
        ledger.begin(&c, &me).unwrap(),
        Decision::ApprovalExpired {
            approval_id: id.clone()
        }
    );
    assert!(matches!(
        ledger.decide_approval(&id, &decided(true, now_ms())),
        Err(ApprovalError::Expired { id: ref got }) if *got == id
    ));
    // Approved in time, but not run before it expired.
    let ask = an_ask(50);
    let k = key("slow");
    let c = asking(&k, "d", &none, &ask);
    let (id, expires, _) = required(&mut ledger, &c);
    let created = ledger.approval(&id).unwrap().unwrap().created_ms;
    ledger
        .decide_approval(&id, &decided(true, created))
        .unwrap();
    while now_ms() <= expires {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(
        ledger.begin(&c, &me).unwrap(),
        Decision::ApprovalExpired { approval_id: id }
    );
    // A new request id asks again.
    let k = key("slow-again");
    assert!(required(&mut ledger, &asking(&k, "d", &none, &ask)).2);
}

fn a_grant_for_the_session_starts_its_tool_in_that_session_only(backend: Backend) {
    let Some(db) = Db::new(backend) else { return };
    let mut ledger = db.open();
    let me = Lease::current().unwrap();
    let none = Budgets::default();
    let ask = an_ask(60_000);
    let first = key("first");
    let (id, _, _) = required(&mut ledger, &asking(&first, "d", &none, &ask));
    // Denying for the session is not a thing.
    let deny_all = Decided {
        for_session: true,
        ..decided(false, now_ms())
    };
    assert!(matches!(
        ledger.decide_approval(&id, &deny_all),
        Err(ApprovalError::Invalid(m)) if m.contains("for_session")
    ));
    let grant = Decided {
        for_session: true,
        note: None,
        ..decided(true, now_ms())
    };
    assert!(ledger.decide_approval(&id, &grant).unwrap().for_session);
    // Another key of the same tool and session: starts, no approval of its own.
    let second = key("second");
    assert!(matches!(
        ledger
            .begin(&asking(&second, "d2", &none, &ask), &me)
            .unwrap(),
        Decision::Start { attempt: 1, .. }
    ));
    assert_eq!(approval_rows(&db), 1);
    // Another tool, another session, another bridge: asked.
    let third = key("third");
    let write = Call {
        tool: "workspace.write",
        ..asking(&third, "d", &none, &ask)
    };
    assert!(required(&mut ledger, &write).2);
    let s2 = Key {
        session_id: "s2".into(),
        ..key("fourth")
    };
    assert!(required(&mut ledger, &asking(&s2, "d", &none, &ask)).2);
    let bridge = Key {
        bridge_ref: "sha256:other".into(),
        ..key("fifth")
    };
    assert!(required(&mut ledger, &asking(&bridge, "d", &none, &ask)).2);
    assert_eq!(approval_rows(&db), 4);
    // The grant's own key runs as approved.
    assert!(matches!(
        ledger
            .begin(&asking(&first, "d", &none, &ask), &me)
            .unwrap(),
        Decision::Start { .. }
    ));
}

fn a_pending_key_starts_once_its_session_has_a_grant(backend: Backend) {
    let Some(db) = Db::new(backend) else { return };
    let mut ledger = db.open();
    let me = Lease::current().unwrap();
    let none = Budgets::default();
    let ask = an_ask(60_000);
    let (waiting, granted) = (key("waiting"), key("granted"));
    let c = asking(&waiting, "d", &none, &ask);
    let (waiting_id, _, _) = required(&mut ledger, &c);
    let (id, _, _) = required(&mut ledger, &asking(&granted, "d", &none, &ask));
    let grant = Decided {
        for_session: true,
        ..decided(true, now_ms())
    };
    ledger.decide_approval(&id, &grant).unwrap();
    assert!(matches!(
        ledger.begin(&c, &me).unwrap(),
        Decision::Start { .. }
    ));
    // Its own approval stays as it was: pending, for a person to see.
    assert_eq!(
        ledger.approval(&waiting_id).unwrap().unwrap().state,
        ApprovalState::Pending
    );
}

fn a_refused_decision_changes_nothing(backend: Backend) {
    let Some(db) = Db::new(backend) else { return };
    let mut ledger = db.open();
    let none = Budgets::default();
    let ask = an_ask(60_000);
    let (open_key, done_key) = (key("open"), key("done"));
    let (open, expires, _) = required(&mut ledger, &asking(&open_key, "d", &none, &ask));
    let (done, _, _) = required(&mut ledger, &asking(&done_key, "d", &none, &ask));
    ledger
        .decide_approval(&done, &decided(false, now_ms()))
        .unwrap();
    let look = |ledger: &mut Ledger| {
        (
            ledger.approvals(&ApprovalFilter::default()).unwrap(),
            db.intact(),
        )
    };
    let before = look(&mut ledger);
    assert_eq!(before.0.len(), 2);
    let with = |f: &dyn Fn(&mut Decided)| {
        let mut d = decided(true, now_ms());
        f(&mut d);
        d
    };
    let invalid = [
        (with(&|d| d.by = String::new()), "by is empty"),
        (with(&|d| d.by = "x".repeat(257)), "by is longer than 256"),
        (with(&|d| d.by = "al\u{1b}ice".into()), "by holds a control"),
        (
            with(&|d| d.note = Some("x".repeat(1025))),
            "note is longer than 1024",
        ),
        (
            with(&|d| d.note = Some("a\nb".into())),
            "note holds a control",
        ),
        (
            with(&|d| {
                d.approve = false;
                d.for_session = true;
            }),
            "for_session",
        ),
    ];
    for (d, says) in invalid {
        match ledger.decide_approval(&open, &d) {
            Err(ApprovalError::Invalid(m)) => assert!(m.contains(says), "{m} / {says}"),
            other => panic!("{says}: {other:?}"),
        }
    }
    assert!(matches!(
        ledger.decide_approval("apr_0123", &decided(true, now_ms())),
        Err(ApprovalError::Unknown(id)) if id == "apr_0123"
    ));
    for approve in [true, false] {
        assert!(matches!(
            ledger.decide_approval(&done, &decided(approve, now_ms())),
            Err(ApprovalError::AlreadyDecided {
                state: ApprovalState::Denied,
                ..
            })
        ));
    }
    assert!(matches!(
        ledger.decide_approval(&open, &decided(true, expires)),
        Err(ApprovalError::Expired { .. })
    ));
    assert_eq!(look(&mut ledger), before);
    // At the bounds, accepted.
    let bounds = Decided {
        by: "x".repeat(256),
        note: Some("n".repeat(1024)),
        ..decided(true, expires - 1)
    };
    ledger.decide_approval(&open, &bounds).unwrap();
    assert_eq!(db.intact().0, before.1 .0 + 1);
    assert!(matches!(
        ledger.decide_approval(&open, &decided(true, now_ms())),
        Err(ApprovalError::AlreadyDecided {
            state: ApprovalState::Approved,
            ..
        })
    ));
}

fn many_connections_racing_on_an_approved_key_start_it_once(backend: Backend) {
    let Some(db) = Db::new(backend) else { return };
    let mut ledger = db.open();
    let none = Budgets::default();
    let ask = an_ask(600_000);
    let k = key("raced");
    let (id, _, _) = required(&mut ledger, &asking(&k, "d", &none, &ask));
    ledger
        .decide_approval(&id, &decided(true, now_ms()))
        .unwrap();
    let gate = std::sync::Barrier::new(20);
    let decisions: Vec<Decision> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..20)
            .map(|_| {
                let (db, gate, k, ask) = (&db, &gate, &k, &ask);
                s.spawn(move || {
                    let mut ledger = db.open();
                    let lease = Lease::current().unwrap();
                    let none = Budgets::default();
                    let c = asking(k, "d", &none, ask);
                    gate.wait();
                    let decision = ledger.begin(&c, &lease).unwrap();
                    if matches!(decision, Decision::Start { .. }) {
                        let rec = record(k, Verdict::Admit, "bridge.allowed_tools", "succeeded");
                        let out = outcome("{\"once\":1}", false);
                        let done = ledger.finish(k, &lease, &out, &rec);
                        assert_eq!(done.unwrap(), Finished::Stored);
                    }
                    decision
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let starts = decisions
        .iter()
        .filter(|d| matches!(d, Decision::Start { attempt: 1, .. }))
        .count();
    assert_eq!(starts, 1, "{decisions:?}");
    assert!(
        decisions.iter().all(|d| matches!(
            d,
            Decision::Start { .. } | Decision::Held(_) | Decision::Replay(_)
        )),
        "{decisions:?}"
    );
    assert!(matches!(
        ledger.begin(&asking(&k, "d", &none, &ask), &Lease::current().unwrap()).unwrap(),
        Decision::Replay(r) if r.envelope == "{\"once\":1}"
    ));
    assert_eq!(db.intact().0, 2);
}

// SQLite-only: the backup is a copy of the file (PostgreSQL's, an export, is in `pg.rs`).
#[test]
fn a_backup_carries_the_approvals() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut ledger) = ledger_in(dir.path());
    let none = Budgets::default();
    let ask = an_ask(600_000);
    let (a, b) = (key("a"), key("b"));
    let (id, _, _) = required(&mut ledger, &asking(&a, "d", &none, &ask));
    required(&mut ledger, &asking(&b, "d", &none, &ask));
    ledger
        .decide_approval(&id, &decided(true, now_ms()))
        .unwrap();
    let all = ledger.approvals(&ApprovalFilter::default()).unwrap();
    assert_eq!(all.len(), 2);
    let dest = dir.path().join("copy.db");
    Ledger::open_existing(&path, soon())
        .unwrap()
        .backup(&dest)
        .unwrap();
    let mut copy = Ledger::open_existing(&dest, soon()).unwrap();
    assert_eq!(copy.approvals(&ApprovalFilter::default()).unwrap(), all);
    assert_eq!(intact(&dest), intact(&path));
    // The copy, used as a ledger, runs the approved key.
    let mut restored = Ledger::open(&dest, soon()).unwrap();
    assert!(matches!(
        restored
            .begin(&asking(&a, "d", &none, &ask), &Lease::current().unwrap())
            .unwrap(),
        Decision::Start { .. }
    ));
}

// SQLite-only: the migration of an old SQLite schema.
#[test]
fn a_version_3_ledger_is_read_as_it_is_and_migrated_when_written() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut ledger) = ledger_in(dir.path());
    let me = Lease::current().unwrap();
    let none = Budgets::default();
    let k = key("old");
    assert!(matches!(
        ledger.begin(&call(&k, "d", &none), &me).unwrap(),
        Decision::Start { .. }
    ));
    let rec = record(&k, Verdict::Admit, "bridge.allowed_tools", "succeeded");
    ledger
        .finish(&k, &me, &outcome("{\"old\":1}", false), &rec)
        .unwrap();
    ledger
        .record(&record(&key("x"), Verdict::Deny, "bridge_ref", "denied"))
        .unwrap();
    ledger.checkpoint();
    drop(ledger);
    // Version 3: the same file without the approvals.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP INDEX approvals_grant; DROP INDEX approvals_key; DROP TABLE approvals; \
         PRAGMA user_version = 3; PRAGMA wal_checkpoint(TRUNCATE);",
    )
    .unwrap();
    drop(conn);
    let chain = intact(&path);
    assert_eq!(chain.0, 2);

    // Read as it is: audit, the approvals (none), a peek with ask.
    let ask = an_ask(60_000);
    let mut reader = Ledger::open_existing(&path, soon()).unwrap();
    assert_eq!(reader.approvals(&ApprovalFilter::default()).unwrap(), []);
    assert_eq!(reader.approval("apr_x").unwrap(), None);
    let fresh = key("fresh");
    let snap = reader.peek(&asking(&fresh, "d", &none, &ask)).unwrap();
    assert_eq!((snap.approval, snap.session_grant), (None, None));
    drop(reader);
    let version = |path: &Path| -> i64 {
        rusqlite::Connection::open(path)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(version(&path), 3, "reading changed nothing");

    // Another older schema is still refused.
    let older = dir.path().join("older.db");
    std::fs::copy(&path, &older).unwrap();
    rusqlite::Connection::open(&older)
        .unwrap()
        .execute_batch("PRAGMA user_version = 2;")
        .unwrap();
    assert!(matches!(
        Ledger::open(&older, soon()).unwrap_err(),
        LedgerError::Foreign(m) if m.contains("schema version 2")
    ));
    assert!(matches!(
        Ledger::open_existing(&older, soon()).unwrap_err(),
        LedgerError::Foreign(_)
    ));

    // `ledger migrate` on a copy says what it found: 3, then 4; on a new file, none.
    let copy = dir.path().join("copy.db");
    std::fs::copy(&path, &copy).unwrap();
    let env = ptd_sys::hostenv::HostEnv::with(Vec::<(String, String)>::new());
    let migrated = |at: &Path| migrate(&Location::File(at.to_path_buf()), &env, soon()).unwrap();
    assert_eq!(
        migrated(&copy),
        MigrateReport {
            from: Some(3),
            to: 4
        }
    );
    assert_eq!(version(&copy), 4);
    assert_eq!(
        migrated(&copy),
        MigrateReport {
            from: Some(4),
            to: 4
        }
    );
    let new = dir.path().join("new.db");
    assert_eq!(migrated(&new), MigrateReport { from: None, to: 4 });
    assert_eq!(
        migrated(&new),
        MigrateReport {
            from: Some(4),
            to: 4
        }
    );

    // Opened by the main job: version 4, the calls and the chain as they were.
    let mut ledger = Ledger::open(&path, soon()).unwrap();
    assert_eq!(version(&path), 4);
    assert_eq!(ledger.approvals(&ApprovalFilter::default()).unwrap(), []);
    assert_eq!(intact(&path), chain);
    assert!(matches!(
        ledger.begin(&call(&k, "d", &none), &me).unwrap(),
        Decision::Replay(r) if r.envelope == "{\"old\":1}"
    ));
    // A second opening finds it done; asking works.
    let mut again = Ledger::open(&path, soon()).unwrap();
    let (id, _, _) = required(&mut again, &asking(&fresh, "d", &none, &ask));
    again
        .decide_approval(&id, &decided(true, now_ms()))
        .unwrap();
    assert!(matches!(
        ledger
            .begin(&asking(&fresh, "d", &none, &ask), &me)
            .unwrap(),
        Decision::Start { .. }
    ));
    assert_eq!(intact(&path).0, 3);
}

fn an_approval_on_a_record_is_bounded(backend: Backend) {
    let Some(db) = Db::new(backend) else { return };
    refuse_approvals_out_of_bounds(&db);
}

/// Appends a record with an approval to the new ledger `db`, then each of the approvals out
/// of bounds, which are refused; returns them.
fn refuse_approvals_out_of_bounds(db: &Db) -> Vec<(ApprovalRef, &'static str)> {
    use crate::ledger::audit::{open, seal, GENESIS};
    let mut rec = record(&key("r"), Verdict::Deny, "approval", "denied");
    rec.approval = Some(ApprovalRef {
        id: format!("apr_{}", "0f".repeat(16)),
        by: None,
        note: None,
        for_session: false,
    });
    let sealed = seal(&rec, 1, GENESIS).unwrap();
    assert!(
        sealed.body.contains(&format!(
            r#""approval":{{"for_session":false,"id":"apr_{}"}}"#,
            "0f".repeat(16)
        )),
        "{}",
        sealed.body
    );
    assert_eq!(open(&sealed.body).unwrap().2, rec);
    let good = rec.approval.clone().unwrap();
    let bad = [
        (
            ApprovalRef {
                id: "apr_ABC".into(),
                ..good.clone()
            },
            "approval.id",
        ),
        (
            ApprovalRef {
                id: format!("apr_{}", "A".repeat(32)),
                ..good.clone()
            },
            "approval.id",
        ),
        (
            ApprovalRef {
                by: Some(String::new()),
                ..good.clone()
            },
            "approval.by is empty",
        ),
        (
            ApprovalRef {
                by: Some("x".repeat(257)),
                ..good.clone()
            },
            "approval.by is longer",
        ),
        (
            ApprovalRef {
                note: Some("x".repeat(1025)),
                ..good.clone()
            },
            "approval.note is longer",
        ),
        (
            ApprovalRef {
                note: Some("\u{7}".into()),
                ..good.clone()
            },
            "approval.note holds a control",
        ),
    ];
    let mut ledger = db.open();
    ledger.record(&rec).unwrap();
    for (approval, says) in &bad {
        let mut rec = rec.clone();
        rec.approval = Some(approval.clone());
        match ledger.record(&rec) {
            Err(LedgerError::Record(m)) => assert!(m.contains(says), "{m} / {says}"),
            other => panic!("{says}: {other:?}"),
        }
    }
    assert_eq!(db.intact().0, 1);
    bad.to_vec()
}

// SQLite-only: the edit is made with rusqlite on the file (see `sqlite.rs`).
#[test]
fn an_approval_on_a_record_out_of_bounds_is_named_by_verify() {
    let db = Db::new(Backend::Sqlite).unwrap();
    let bad = refuse_approvals_out_of_bounds(&db);
    let path = db.path();
    // Stored anyway (an edit with its hash recomputed): verify names it.
    let conn = rusqlite::Connection::open(path).unwrap();
    let body: String = conn
        .query_row("SELECT body FROM audit WHERE seq = 1", [], |r| r.get(0))
        .unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&body).unwrap();
    value["approval"] = serde_json::to_value(&bad[3].0).unwrap();
    let body = ptd_wire::envelope::canonical::to_string(&value);
    let hash = ptd_wire::envelope::canonical::sha256_hex(body.as_bytes());
    conn.execute(
        "UPDATE audit SET body = ?1, hash = ?2 WHERE seq = 1",
        rusqlite::params![body, hash],
    )
    .unwrap();
    conn.execute("UPDATE head SET hash = ?1", rusqlite::params![hash])
        .unwrap();
    match verify(path) {
        Verification::Broken { at, .. } => {
            assert!(at.reason.contains("approval.by is longer"), "{at:?}")
        }
        other => panic!("{other:?}"),
    }
}
