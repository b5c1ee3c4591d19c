//! The rules of SPEC §14.1–§14.2 and §18 in one pure function: a snapshot of the key's row and
//! the session's usage in, the answer and what to write out. Every store calls it inside its
//! one transaction; `policy explain` calls it on a read-only snapshot.

use super::*;

/// The rules of SPEC §14.1–§14.2 (and §18 for a call with [`Call::ask`]) on one snapshot, now:
/// what to answer and what to write. `is_live` tells whether a lease's process still runs.
/// [`decide_at`] with the time given.
pub fn decide(
    call: &Call<'_>,
    snap: &Snapshot,
    is_live: &dyn Fn(&Lease) -> bool,
) -> (Decision, Claim) {
    decide_at(call, snap, is_live, now_ms())
}

/// [`decide`] at `now_ms` (ms since the Unix epoch), which only a call with [`Call::ask`]
/// looks at.
///
/// Without `ask` the rules are SPEC §14's alone. With it, the key's row is looked at first as
/// always (another digest: `Reused`; a final outcome: `Replay`; a live holder: `Held`; a dead
/// one: `Indeterminate`), then the budgets and `--max-concurrent`, and only then the approvals
/// (SPEC §18):
///
/// 1. the key's approval holds another digest → `Reused`;
/// 2. it was denied → `ApprovalDenied`;
/// 3. it is approved and not expired → `Start`, as without `ask`;
/// 4. the session has an approved `for_session` grant for the tool, not expired, and the key
///    has no approval of its own or a pending one not expired → `Start`;
/// 5. the key has no approval → `ApprovalRequired` with a new id, expiring `ttl_ms` from now
///    ([`Claim::Ask`] records it);
/// 6. it is pending and not expired → `ApprovalRequired`, the same id and expiry, nothing
///    written;
/// 7. it is pending or approved and expired → `ApprovalExpired`.
///
/// An approved key runs once: `Start` marks it `running`, its final outcome is then replayed
/// by the row's rules. An attempt that ends retryable leaves the key open, and it may run
/// again while its approval stands (not expired); after that, `ApprovalExpired`.
pub fn decide_at(
    call: &Call<'_>,
    snap: &Snapshot,
    is_live: &dyn Fn(&Lease) -> bool,
    now_ms: u64,
) -> (Decision, Claim) {
    let next_attempt = match &snap.row {
        Some(row) if row.digest != call.digest => return (Decision::Reused, Claim::None),
        Some(row) => match (row.state, &row.outcome) {
            (CallState::Final, Some(recorded)) => {
                return (Decision::Replay(recorded.clone()), Claim::None)
            }
            (CallState::Running, _) if is_live(&row.lease) => {
                return (Decision::Held(row.lease.clone()), Claim::None)
            }
            (CallState::Running, _) => {
                return (
                    Decision::Indeterminate {
                        attempt: row.attempt,
                        holder: row.lease.clone(),
                    },
                    Claim::TakeOver,
                )
            }
            // Final, its answer forgotten (`ledger prune` removed its record): nobody can say
            // what it did, and its claim was closed (and counted) long ago, so nothing is
            // taken over: the caller's outcome is only recorded, and every retry gets the same.
            (CallState::Final, None) => {
                return (
                    Decision::Indeterminate {
                        attempt: row.attempt,
                        holder: row.lease.clone(),
                    },
                    Claim::None,
                )
            }
            (CallState::Retryable, _) => row.attempt.saturating_add(1),
        },
        None => 1,
    };
    let budgets = call.budgets;
    let over = |budget, limit, used, tool: Option<&str>| OverBudget {
        budget,
        limit,
        used,
        tool: tool.map(str::to_string),
    };
    if let Some(limit) = budgets.calls.filter(|&l| snap.calls >= l) {
        let o = over(BudgetKind::Calls, limit, snap.calls, None);
        return (Decision::BudgetExhausted(o), Claim::None);
    }
    if let Some(&limit) = budgets
        .tools
        .get(call.tool)
        .filter(|&&l| snap.tool_calls >= l)
    {
        let o = over(BudgetKind::Tool, limit, snap.tool_calls, Some(call.tool));
        return (Decision::BudgetExhausted(o), Claim::None);
    }
    if let Some(limit) = budgets.adapter_ms.filter(|&l| snap.adapter_ms >= l) {
        let o = over(BudgetKind::AdapterMs, limit, snap.adapter_ms, None);
        return (Decision::BudgetExhausted(o), Claim::None);
    }
    if let Some(limit) = budgets.max_concurrent {
        let live = snap.running.iter().filter(|l| is_live(l)).count() as u64;
        if live >= limit {
            let o = over(BudgetKind::Concurrent, limit, live, None);
            return (Decision::ConcurrencyLimited(o), Claim::None);
        }
    }
    let approval = match call.ask {
        Some(ask) => match approval_rules(call, ask, snap, now_ms) {
            Ok(approval) => approval,
            Err(refused) => return refused,
        },
        None => None,
    };
    (
        Decision::Start {
            attempt: next_attempt,
            adapter_ms_left: budgets.adapter_ms.map(|l| l - snap.adapter_ms),
            approval,
        },
        Claim::Admit {
            attempt: next_attempt,
        },
    )
}

/// SPEC §18's rules for a call with `ask` that passed every other rule ([`decide_at`]'s list):
/// `Ok` with the approval that lets it start, else the refusal.
fn approval_rules(
    call: &Call<'_>,
    ask: &Ask,
    snap: &Snapshot,
    now_ms: u64,
) -> Result<Option<String>, (Decision, Claim)> {
    let own = snap.approval.as_ref();
    if let Some(own) = own {
        let id = || own.id.clone();
        if own.digest != call.digest {
            return Err((Decision::Reused, Claim::None));
        }
        match own.state {
            ApprovalState::Denied => {
                return Err((Decision::ApprovalDenied { approval_id: id() }, Claim::None))
            }
            ApprovalState::Approved if !own.expired_at(now_ms) => return Ok(Some(id())),
            _ => {}
        }
    }
    let grant = snap.session_grant.as_ref().is_some_and(|grant| {
        grant.for_session
            && grant.grants_at(now_ms)
            && grant.bridge_ref == call.key.bridge_ref
            && grant.session_key == call.key.session_id
            && grant.tool == call.tool
    });
    let open = own.is_none_or(|a| a.state == ApprovalState::Pending && !a.expired_at(now_ms));
    if let (true, true, Some(grant)) = (grant, open, snap.session_grant.as_ref()) {
        return Ok(Some(grant.id.clone()));
    }
    Err(match own {
        None => {
            let approval_id = approval::new_approval_id();
            let expires_ms = now_ms.saturating_add(ask.ttl_ms);
            (
                Decision::ApprovalRequired {
                    approval_id: approval_id.clone(),
                    expires_ms,
                    new: true,
                },
                Claim::Ask {
                    approval_id,
                    expires_ms,
                },
            )
        }
        Some(own) if own.state == ApprovalState::Pending && !own.expired_at(now_ms) => (
            Decision::ApprovalRequired {
                approval_id: own.id.clone(),
                expires_ms: own.expires_ms,
                new: false,
            },
            Claim::None,
        ),
        Some(own) => (
            Decision::ApprovalExpired {
                approval_id: own.id.clone(),
            },
            Claim::None,
        ),
    })
}
