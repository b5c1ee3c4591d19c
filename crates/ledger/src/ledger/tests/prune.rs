//! `Ledger::prune` on both stores: the oldest records go, a checkpoint anchors the rest, the
//! counters still verify, a running call's records stay, a pruned call's envelope is
//! forgotten (never replayed unchecked, never run again).

use super::*;

both!(pruning_keeps_the_rest_verifiable_and_never_a_running_calls_record);

/// Run `k` to its end (retryable or final) with its record at `time_ms`.
fn run(ledger: &mut Ledger, k: &Key, time_ms: u64, retryable: bool) {
    let me = Lease::current().unwrap();
    let budgets = Budgets::default();
    assert!(matches!(
        ledger.begin(&call(k, "d", &budgets), &me).unwrap(),
        Decision::Start { .. }
    ));
    let rec = AuditRecord {
        time_ms,
        ..record(k, Verdict::Admit, "bridge.allowed_tools", "succeeded")
    };
    let done = ledger
        .finish(k, &me, &outcome("{\"env\":1}", retryable), &rec)
        .unwrap();
    assert_eq!(done, Finished::Stored);
}

fn intact(db: &Db) -> u64 {
    match db.verify() {
        Verification::Intact { records, .. } => records,
        other => panic!("{other:?}"),
    }
}

fn pruning_keeps_the_rest_verifiable_and_never_a_running_calls_record(backend: Backend) {
    let Some(db) = Db::new(backend) else { return };
    let mut ledger = db.open();
    let me = Lease::current().unwrap();
    let (k1, k2, k3, k4) = (key("r1"), key("r2"), key("r3"), key("r4"));
    run(&mut ledger, &k1, 1_000, false); // seq 1
    let denied = AuditRecord {
        time_ms: 2_000,
        ..record(&k2, Verdict::Deny, "budget:calls", "denied")
    };
    ledger.record(&denied).unwrap(); // seq 2
    run(&mut ledger, &k3, 3_000, true); // seq 3: retryable, then running again
    let none = Budgets::default();
    assert!(matches!(
        ledger.begin(&call(&k3, "d", &none), &me).unwrap(),
        Decision::Start { attempt: 2, .. }
    ));
    run(&mut ledger, &k4, 9_000, false); // seq 4
    assert_eq!(ledger.prune(500).unwrap(), Pruned::Nothing);
    // Everything before 5000 is old, but record 3 is named by the running r3.
    let Pruned::Removed {
        seq,
        removed,
        checkpoint,
        ..
    } = ledger.prune(5_000).unwrap()
    else {
        panic!("nothing pruned")
    };
    assert_eq!((seq, removed, checkpoint), (2, 2, 5));
    assert_eq!(intact(&db), 3);
    // r1's answer is gone with its record: it is never replayed unchecked.
    let row = ledger.call(&k1).unwrap().unwrap();
    assert_eq!((row.state, row.outcome), (CallState::Final, None));
    // The counters are untouched, and the checkpoint carries r1's use: the budget holds.
    let budgets = Budgets {
        calls: Some(4),
        ..Budgets::default()
    };
    let snap = ledger.peek(&call(&key("r9"), "d", &budgets)).unwrap();
    assert_eq!((snap.calls, snap.adapter_ms), (4, 15));
    // r3 ends; now everything goes, the first checkpoint included.
    let rec = AuditRecord {
        time_ms: 9_500,
        ..record(&k3, Verdict::Admit, "bridge.allowed_tools", "succeeded")
    };
    ledger
        .finish(&k3, &me, &outcome("{\"env\":3}", false), &rec)
        .unwrap();
    let Pruned::Removed {
        seq,
        removed,
        checkpoint,
        ..
    } = ledger.prune(u64::MAX).unwrap()
    else {
        panic!("nothing pruned")
    };
    assert_eq!((seq, removed, checkpoint), (6, 4, 7));
    assert_eq!(intact(&db), 1);
    // New records chain on.
    run(&mut ledger, &key("r5"), now_ms(), false);
    assert_eq!(intact(&db), 2);
}
