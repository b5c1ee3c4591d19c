//! Approvals (SPEC §18): [`decide_at`]'s rules one by one and their order. On a real SQLite
//! file: `approvals_store.rs`.

use super::*;

/// The policy's ask, open for `ttl_ms`.
pub(super) fn an_ask(ttl_ms: u64) -> Ask {
    Ask {
        ttl_ms,
        policy_sha256: "ab".repeat(32),
        entry: "workspace.*".into(),
        line: Some(7),
        session_shown: "sandbox-1".into(),
        request_shown: "req-shown".into(),
        operation: "call".into(),
        input_shown: "{\"path\":\"a.txt\"}".into(),
    }
}

/// `call(key, digest, budgets)` with `ask`.
pub(super) fn asking<'a>(
    key: &'a Key,
    digest: &'a str,
    budgets: &'a Budgets,
    ask: &'a Ask,
) -> Call<'a> {
    Call {
        ask: Some(ask),
        ..call(key, digest, budgets)
    }
}

/// An approval of `key` for `digest` (tool `workspace.read`), in `state`, expiring at
/// `expires_ms`.
fn approval_of(key: &Key, digest: &str, state: ApprovalState, expires_ms: u64) -> Approval {
    Approval {
        id: format!("apr_{}", "0".repeat(32)),
        bridge_ref: key.bridge_ref.clone(),
        session_key: key.session_id.clone(),
        request_key: key.request_id.clone(),
        digest: digest.into(),
        tool: "workspace.read".into(),
        operation: "call".into(),
        session_shown: "sandbox-1".into(),
        request_shown: "req".into(),
        input_shown: "{}".into(),
        policy_sha256: "ab".repeat(32),
        entry: "workspace.*".into(),
        line: Some(7),
        created_ms: expires_ms.saturating_sub(1000),
        expires_ms,
        state,
        for_session: false,
        decided_by: None,
        note: None,
        decided_ms: None,
    }
}

pub(super) fn decided(approve: bool, now_ms: u64) -> Decided {
    Decided {
        approve,
        by: "alice".into(),
        note: Some("looked at it".into()),
        for_session: false,
        now_ms,
    }
}

const NOW: u64 = 1_800_000_000_000;

fn start(attempt: u32) -> (Decision, Claim) {
    started(attempt, None)
}

/// `Start` admitted by `approval` (its id).
fn started(attempt: u32, approval: Option<&Approval>) -> (Decision, Claim) {
    (
        Decision::Start {
            attempt,
            adapter_ms_left: None,
            approval: approval.map(|a| a.id.clone()),
        },
        Claim::Admit { attempt },
    )
}

#[test]
fn decide_asks_once_then_follows_the_keys_approval() {
    let k = key("r");
    let none = Budgets::default();
    let ask = an_ask(60_000);
    let c = asking(&k, "d", &none, &ask);
    let live = |_: &Lease| true;
    let with = |approval: Option<Approval>| Snapshot {
        approval,
        ..snapshot(None)
    };

    // No approval: a new one, pending for the ttl, recorded by the claim.
    let (decision, claim) = decide_at(&c, &with(None), &live, NOW);
    let Decision::ApprovalRequired {
        approval_id,
        expires_ms,
        new: true,
    } = decision
    else {
        panic!("{decision:?}")
    };
    assert!(
        crate::ledger::audit::is_approval_id(&approval_id),
        "{approval_id}"
    );
    assert_eq!(expires_ms, NOW + 60_000);
    assert_eq!(
        claim,
        Claim::Ask {
            approval_id: approval_id.clone(),
            expires_ms
        }
    );
    let (again, _) = decide_at(&c, &with(None), &live, NOW);
    assert!(
        !matches!(again, Decision::ApprovalRequired { approval_id: ref other, .. } if *other == approval_id),
        "each new approval has an id of its own"
    );

    // Another digest under the same id.
    let other = approval_of(&k, "other", ApprovalState::Pending, NOW + 1);
    assert_eq!(
        decide_at(&c, &with(Some(other)), &live, NOW),
        (Decision::Reused, Claim::None)
    );
    // Pending: the same approval, nothing written.
    let pending = approval_of(&k, "d", ApprovalState::Pending, NOW + 1);
    assert_eq!(
        decide_at(&c, &with(Some(pending.clone())), &live, NOW),
        (
            Decision::ApprovalRequired {
                approval_id: pending.id.clone(),
                expires_ms: NOW + 1,
                new: false
            },
            Claim::None
        )
    );
    // Denied, expired (pending or approved, at the expiry exactly).
    let denied = approval_of(&k, "d", ApprovalState::Denied, NOW + 1);
    assert_eq!(
        decide_at(&c, &with(Some(denied.clone())), &live, NOW),
        (
            Decision::ApprovalDenied {
                approval_id: denied.id.clone()
            },
            Claim::None
        )
    );
    for state in [ApprovalState::Pending, ApprovalState::Approved] {
        let expired = approval_of(&k, "d", state, NOW);
        assert_eq!(
            decide_at(&c, &with(Some(expired.clone())), &live, NOW),
            (
                Decision::ApprovalExpired {
                    approval_id: expired.id
                },
                Claim::None
            ),
            "{state}"
        );
    }
    // Approved, not expired: it starts as without ask.
    let approved = approval_of(&k, "d", ApprovalState::Approved, NOW + 1);
    assert_eq!(
        decide_at(&c, &with(Some(approved.clone())), &live, NOW),
        started(1, Some(&approved))
    );
    // A retryable attempt runs again while the approval stands, and not after.
    let retry = Snapshot {
        approval: Some(approved.clone()),
        ..snapshot(Some(row(CallState::Retryable, "d")))
    };
    assert_eq!(
        decide_at(&c, &retry, &live, NOW),
        started(3, Some(&approved))
    );
    assert!(matches!(
        decide_at(&c, &retry, &live, NOW + 1).0,
        Decision::ApprovalExpired { .. }
    ));
    // Without ask, an approval in the snapshot changes nothing.
    let plain = call(&k, "d", &none);
    for approval in [pending, denied, approved] {
        assert_eq!(
            decide_at(&plain, &with(Some(approval)), &live, NOW),
            start(1)
        );
    }
}

#[test]
fn the_keys_row_and_the_budgets_come_before_an_approval() {
    let k = key("r");
    let ask = an_ask(60_000);
    let none = Budgets::default();
    let c = asking(&k, "d", &none, &ask);
    let live = |_: &Lease| true;
    let dead = |_: &Lease| false;
    let denied = approval_of(&k, "d", ApprovalState::Denied, NOW + 1);
    let expired = approval_of(&k, "d", ApprovalState::Approved, NOW - 1);
    // A replay of the final outcome beats the approval, whatever its state now.
    for approval in [None, Some(denied.clone()), Some(expired.clone())] {
        let done = Snapshot {
            approval,
            ..snapshot(Some(row(CallState::Final, "d")))
        };
        assert!(matches!(
            decide_at(&c, &done, &live, NOW),
            (Decision::Replay(_), Claim::None)
        ));
    }
    let reused = Snapshot {
        approval: Some(expired.clone()),
        ..snapshot(Some(row(CallState::Final, "other")))
    };
    assert_eq!(decide_at(&c, &reused, &live, NOW).0, Decision::Reused);
    let running = Snapshot {
        approval: Some(expired.clone()),
        ..snapshot(Some(row(CallState::Running, "d")))
    };
    assert!(matches!(
        decide_at(&c, &running, &live, NOW).0,
        Decision::Held(_)
    ));
    assert!(matches!(
        decide_at(&c, &running, &dead, NOW),
        (Decision::Indeterminate { .. }, Claim::TakeOver)
    ));
    // A budget refusal beats asking: nothing is asked that could not run.
    let spent = Budgets {
        calls: Some(1),
        max_concurrent: Some(1),
        ..Budgets::default()
    };
    let c = asking(&k, "d", &spent, &ask);
    let mut snap = snapshot(None);
    snap.calls = 1;
    assert!(matches!(
        decide_at(&c, &snap, &live, NOW),
        (Decision::BudgetExhausted(_), Claim::None)
    ));
    snap.calls = 0;
    snap.running = vec![dead_lease()];
    assert!(matches!(
        decide_at(&c, &snap, &live, NOW),
        (Decision::ConcurrencyLimited(_), Claim::None)
    ));
    snap.approval = Some(denied);
    assert!(matches!(
        decide_at(&c, &snap, &live, NOW),
        (Decision::ConcurrencyLimited(_), Claim::None)
    ));
}

#[test]
fn a_session_grant_starts_the_sessions_calls_of_its_tool_until_it_expires() {
    let k = key("r");
    let none = Budgets::default();
    let ask = an_ask(60_000);
    let c = asking(&k, "d", &none, &ask);
    let live = |_: &Lease| true;
    let mut grant = approval_of(&key("granted"), "g", ApprovalState::Approved, NOW + 1);
    grant.for_session = true;
    let snap = |approval: Option<Approval>, grant: Approval| Snapshot {
        approval,
        session_grant: Some(grant),
        ..snapshot(None)
    };
    // No approval of its own, or a pending one: it starts, admitted by the grant.
    assert_eq!(
        decide_at(&c, &snap(None, grant.clone()), &live, NOW),
        started(1, Some(&grant))
    );
    let pending = approval_of(&k, "d", ApprovalState::Pending, NOW + 1);
    assert_eq!(
        decide_at(&c, &snap(Some(pending.clone()), grant.clone()), &live, NOW),
        started(1, Some(&grant))
    );
    // A denial, an expiry or another digest of its own stays.
    let denied = approval_of(&k, "d", ApprovalState::Denied, NOW + 1);
    assert!(matches!(
        decide_at(&c, &snap(Some(denied), grant.clone()), &live, NOW).0,
        Decision::ApprovalDenied { .. }
    ));
    let expired = approval_of(&k, "d", ApprovalState::Pending, NOW);
    assert!(matches!(
        decide_at(&c, &snap(Some(expired), grant.clone()), &live, NOW).0,
        Decision::ApprovalExpired { .. }
    ));
    let other = approval_of(&k, "other", ApprovalState::Pending, NOW + 1);
    assert_eq!(
        decide_at(&c, &snap(Some(other), grant.clone()), &live, NOW).0,
        Decision::Reused
    );
    // An expired grant, one not for the session, of another tool or session: asked.
    let asked = |g: Approval| {
        matches!(
            decide_at(&c, &snap(None, g), &live, NOW).0,
            Decision::ApprovalRequired { new: true, .. }
        )
    };
    assert!(asked(Approval {
        expires_ms: NOW,
        ..grant.clone()
    }));
    assert!(asked(Approval {
        for_session: false,
        ..grant.clone()
    }));
    assert!(asked(Approval {
        tool: "workspace.write".into(),
        ..grant.clone()
    }));
    assert!(asked(Approval {
        session_key: "s2".into(),
        ..grant.clone()
    }));
    assert!(asked(Approval {
        state: ApprovalState::Pending,
        ..grant.clone()
    }));
}
