//! The rules on a real store, SQLite and PostgreSQL alike (`both!`): a call runs once, then
//! replays; retryable outcomes, dead holders, waiting for a live one; budgets; `peek` reads
//! what `begin` decides on.

use super::*;
use std::process::Command;

// The shared suite: these run unchanged against SQLite and PostgreSQL.
both!(
    a_call_runs_once_then_replays_across_connections,
    retryable_outcomes_run_again_and_dead_holders_are_indeterminate,
    wait_returns_when_the_holder_finishes_or_dies_and_gives_up_at_the_deadline,
    budgets_are_counted_in_the_ledger_and_replays_do_not_spend,
    decide_on_a_peek_answers_what_the_next_begin_answers,
);

fn a_call_runs_once_then_replays_across_connections(backend: Backend) {
    let Some(db) = Db::new(backend) else { return };
    let mut ledger = db.open();
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
    let mut again = db.open();
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
    // And through a reader.
    assert_eq!(db.intact().0, 2);
}

fn retryable_outcomes_run_again_and_dead_holders_are_indeterminate(backend: Backend) {
    let Some(db) = Db::new(backend) else { return };
    let mut ledger = db.open();
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
    let rec = record(&k2, Verdict::Refuse, "ledger:lease", "failed");
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

fn wait_returns_when_the_holder_finishes_or_dies_and_gives_up_at_the_deadline(backend: Backend) {
    let Some(db) = Db::new(backend) else { return };
    let mut ledger = db.open();
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
    let got = std::thread::scope(|s| {
        let finisher = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            let mut other = db.open();
            let rec = record(&k, Verdict::Admit, "bridge.allowed_tools", "succeeded");
            other
                .finish(&k, &holder, &outcome("{\"done\":1}", false), &rec)
                .unwrap()
        });
        let got = ledger.wait(&c, &me, soon(), &mut sleep).unwrap().decision;
        assert_eq!(finisher.join().unwrap(), Finished::Stored);
        got
    });
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

fn budgets_are_counted_in_the_ledger_and_replays_do_not_spend(backend: Backend) {
    let Some(db) = Db::new(backend) else { return };
    let mut ledger = db.open();
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
            .begin(&call(&k5, "d", &Budgets::default()), &dead_lease())
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

/// `c` for the tool `workspace.write`.
fn write(c: Call<'_>) -> Call<'_> {
    Call {
        tool: "workspace.write",
        ..c
    }
}

/// `decide` on what `peek` read for `c` — through `ledger` and through a read-only opening of
/// the same ledger, which read the same — then the decision of a real `begin` under `lease`,
/// which must be the same; returns it.
#[track_caller]
fn peeked_then_begun(db: &Db, ledger: &mut Ledger, c: &Call<'_>, lease: &Lease) -> Decision {
    let snap = ledger.peek(c).unwrap();
    let read_only = db.reader().peek(c).unwrap();
    assert_eq!(read_only, snap);
    let (peeked, _) = decide(c, &snap, &|l| l.is_live());
    // Peeking wrote nothing: a second look reads the same.
    assert_eq!(ledger.peek(c).unwrap(), snap);
    let begun = ledger.begin(c, lease).unwrap();
    assert_eq!(peeked, begun, "{snap:?}");
    begun
}

fn decide_on_a_peek_answers_what_the_next_begin_answers(backend: Backend) {
    let Some(db) = Db::new(backend) else { return };
    let mut ledger = db.open();
    let me = Lease::current().unwrap();
    let budgets = Budgets {
        calls: Some(3),
        tools: [("workspace.write".to_string(), 1)].into(),
        adapter_ms: Some(100),
        max_concurrent: None,
    };
    let [fresh, tool_1, tool_2, read, over] =
        ["fresh", "tool-1", "tool-2", "read", "over"].map(key);
    let (fresh, tool_1, tool_2, read, over) = (&fresh, &tool_1, &tool_2, &read, &over);
    let finish = |ledger: &mut Ledger, c: &Call<'_>| {
        let mut rec = record(c.key, Verdict::Admit, "bridge.allowed_tools", "succeeded");
        rec.tool = c.tool.into();
        let done = ledger.finish(c.key, &me, &outcome("{\"done\":1}", false), &rec);
        assert_eq!(done.unwrap(), Finished::Stored);
    };

    // A fresh key: Start, and the peek claimed nothing.
    let c = call(fresh, "d", &budgets);
    assert_eq!(ledger.peek(&c).unwrap(), snapshot(None));
    assert_eq!(ledger.call(fresh).unwrap(), None);
    assert_eq!(
        peeked_then_begun(&db, &mut ledger, &c, &me),
        Decision::Start {
            attempt: 1,
            adapter_ms_left: Some(100),
            approval: None,
        }
    );
    // Held by this (live) process while it runs.
    assert_eq!(
        peeked_then_begun(&db, &mut ledger, &c, &me),
        Decision::Held(me.clone())
    );
    finish(&mut ledger, &c);
    // A recorded final key: Replay; the same id with another digest: Reused.
    assert!(matches!(
        peeked_then_begun(&db, &mut ledger, &c, &me),
        Decision::Replay(Recorded { ref envelope, exit_status: 0 }) if envelope == "{\"done\":1}"
    ));
    assert_eq!(
        peeked_then_begun(&db, &mut ledger, &call(fresh, "other", &budgets), &me),
        Decision::Reused
    );
    // Over a per-tool budget.
    let c = write(call(tool_1, "d", &budgets));
    assert!(matches!(
        peeked_then_begun(&db, &mut ledger, &c, &me),
        Decision::Start { attempt: 1, .. }
    ));
    finish(&mut ledger, &c);
    assert_eq!(
        peeked_then_begun(&db, &mut ledger, &write(call(tool_2, "d", &budgets)), &me),
        Decision::BudgetExhausted(OverBudget {
            budget: BudgetKind::Tool,
            limit: 1,
            used: 1,
            tool: Some("workspace.write".into())
        })
    );
    // Over `--budget-calls`, the snapshot saying what each budget used.
    let c = call(read, "d", &budgets);
    assert!(matches!(
        peeked_then_begun(&db, &mut ledger, &c, &me),
        Decision::Start {
            adapter_ms_left: Some(90),
            ..
        }
    ));
    finish(&mut ledger, &c);
    let c = call(over, "d", &budgets);
    let snap = ledger.peek(&c).unwrap();
    assert_eq!(
        (snap.calls, snap.tool_calls, snap.adapter_ms),
        (3, 2, 15),
        "{snap:?}"
    );
    assert_eq!(
        peeked_then_begun(&db, &mut ledger, &c, &me),
        Decision::BudgetExhausted(OverBudget {
            budget: BudgetKind::Calls,
            limit: 3,
            used: 3,
            tool: None
        })
    );

    // A dead holder: indeterminate (begin then takes the key over); the calls in flight.
    let none = Budgets::default();
    let crashed = Key {
        session_id: "s2".into(),
        ..key("crashed")
    };
    let dead = dead_lease();
    assert!(matches!(
        ledger.begin(&call(&crashed, "d", &none), &dead).unwrap(),
        Decision::Start { .. }
    ));
    assert_eq!(
        peeked_then_begun(&db, &mut ledger, &call(&crashed, "d", &none), &me),
        Decision::Indeterminate {
            attempt: 1,
            holder: dead
        }
    );
    let one = Budgets {
        max_concurrent: Some(1),
        ..Budgets::default()
    };
    let second = Key {
        session_id: "s2".into(),
        ..key("second")
    };
    let snap = ledger.peek(&call(&second, "d", &one)).unwrap();
    assert_eq!(snap.running, std::slice::from_ref(&me));
    assert!(matches!(
        peeked_then_begun(&db, &mut ledger, &call(&second, "d", &one), &me),
        Decision::ConcurrencyLimited(OverBudget {
            used: 1,
            limit: 1,
            ..
        })
    ));
    let v = db.verify();
    assert!(
        matches!(v, Verification::Intact { records: 3, .. }),
        "{v:?}"
    );
}
