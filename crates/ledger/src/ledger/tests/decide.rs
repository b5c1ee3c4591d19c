//! The rules as one pure function: [`decide`] on snapshots of what the store read.

use super::*;

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
                adapter_ms_left: None,
                approval: None,
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
        heartbeat_ms: None,
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
                adapter_ms_left: Some(60),
                approval: None,
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
