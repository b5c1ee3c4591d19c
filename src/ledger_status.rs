//! `audit stats`, `ledger status` and `ledger prune` (SPEC §14.3–§14.4): what `ptd-ledger`
//! reads or removes, printed.
//!
//! `stats` and `status` only read (the ledger opened as `audit` opens it); `prune` writes, in
//! one transaction. `status` reads the counters through [`Ledger::peek`], the very read the
//! main job's decision makes, so what it says is left is what the next call gets.

use crate::cli::{AuditStatsArgs, LedgerPruneArgs, LedgerStatusArgs};
use crate::ledger_open::{reading, writing, READS};
use ptd_ledger::stats::Tally;
use ptd_ledger::{Budgets, Call, Key, Lease, Ledger, LedgerError, Pruned, Snapshot, StatsError};
use ptd_wire::envelope::bridge::Bridge;
use ptd_wire::error::exit;
use ptd_wire::stdout;
use ptd_wire::terminal::{error_line, escape};
use serde_json::json;
use std::fmt::Write as _;

/// A ledger error on stderr; exit 69.
fn unavailable(err: &LedgerError) -> u8 {
    stderr_line!("{}", error_line(err.code(), &err.to_string()));
    exit::UNAVAILABLE
}

/// `audit stats`.
pub(crate) fn stats(args: &AuditStatsArgs) -> u8 {
    let records = &args.records;
    let filter = records.filter.filter();
    let mut read = 0;
    let done = loop {
        read += 1;
        let done = reading(&records.ledger)
            .map_err(StatsError::from)
            .and_then(|mut ledger| ledger.stats(records.since.unwrap_or(0), &filter));
        match done {
            Err(StatsError::Ledger(LedgerError::ChangedWhileRead)) if read < READS => {}
            done => break done,
        }
    };
    let stats = match done {
        Ok(stats) => stats,
        Err(StatsError::Ledger(err)) => return unavailable(&err),
        Err(err @ StatsError::Unreadable(_)) => {
            stderr_line!("{}", error_line("audit_unreadable", &err.to_string()));
            return exit::FAILED;
        }
    };
    let text = if args.json {
        format!("{}\n", json!(stats))
    } else {
        stats_table(&stats.rows)
    };
    stdout::print(text.as_bytes(), "the audit stats", exit::SUCCESS)
}

/// `RULE=N` pairs, space-separated; `-` for none.
fn counts(map: &std::collections::BTreeMap<String, u64>) -> String {
    if map.is_empty() {
        return "-".into();
    }
    let pairs: Vec<String> = map.iter().map(|(k, n)| format!("{k}={n}")).collect();
    pairs.join(" ")
}

/// The human table of `audit stats`: one row per session and tool.
fn stats_table(rows: &[Tally]) -> String {
    if rows.is_empty() {
        return "no records\n".into();
    }
    let cells: Vec<[String; 9]> = rows
        .iter()
        .map(|t| {
            let or_dash = |s: &str| {
                if s.is_empty() {
                    "-".to_string()
                } else {
                    escape(s).into_owned()
                }
            };
            [
                or_dash(&t.session_id),
                or_dash(&t.tool),
                t.admitted.to_string(),
                t.replays.to_string(),
                t.denied.values().sum::<u64>().to_string(),
                t.refused.values().sum::<u64>().to_string(),
                t.failures.values().sum::<u64>().to_string(),
                t.adapter_ms.to_string(),
                [&t.denied, &t.refused, &t.failures]
                    .iter()
                    .filter(|m| !m.is_empty())
                    .map(|m| counts(m))
                    .collect::<Vec<_>>()
                    .join(" "),
            ]
        })
        .collect();
    let head = [
        "SESSION",
        "TOOL",
        "ADMITTED",
        "REPLAYS",
        "DENIED",
        "REFUSED",
        "FAILED",
        "ADAPTER_MS",
        "WHY",
    ];
    table(&head, &cells)
}

/// Columns padded to their widest cell, two spaces apart, the last one unpadded.
fn table<const N: usize>(head: &[&str; N], rows: &[[String; N]]) -> String {
    let mut widths = head.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let head = head.map(str::to_string);
    for row in std::iter::once(&head).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == N {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ", w = widths[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `ledger status --session ID`.
pub(crate) fn status(args: &LedgerStatusArgs) -> u8 {
    let usage = |message: &str| {
        stderr_line!("{}", error_line("usage", message));
        exit::USAGE
    };
    let options = match crate::dispatch::ledger_options(&args.ledger) {
        Ok(Some(options)) => options,
        Ok(None) => return usage("ledger status needs a ledger: pass --ledger PATH"),
        Err(err) => return usage(&err.to_string()),
    };
    let session = match args
        .ledger
        .session
        .as_deref()
        .map(ptd_ledger::parse_session)
    {
        Some(Ok(session)) => session,
        Some(Err(err)) => return usage(&err.to_string()),
        None => return usage("ledger status needs the host's session: pass --session ID"),
    };
    let bridge = match args.bridge.parent_tool_bridge.as_deref().map(Bridge::load) {
        Some(Ok(bridge)) => bridge,
        Some(Err(err)) => {
            stderr_line!("error[bridge_invalid]: {}", escape(&err.to_string()));
            return exit::DATA_INVALID;
        }
        None => return usage("ledger status needs the bridge: pass --parent-tool-bridge"),
    };
    let key = Key {
        bridge_ref: bridge.bridge_ref(),
        session_id: crate::dispatch::id_digest(&session),
        // No call's key is empty: every running call of the session is another's.
        request_id: String::new(),
    };
    let budgets = &options.budgets;
    let env = ptd_sys::hostenv::HostEnv::process();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let snapshots = match Ledger::open_existing_at(&options.location, &env, deadline) {
        Ok(mut ledger) => peek_all(&mut ledger, &key, budgets),
        // No ledger yet: the main job makes it, empty.
        Err(LedgerError::Missing) => Ok(vec![Snapshot::default()]),
        Err(err) => Err(err),
    };
    let snapshots = match snapshots {
        Ok(snapshots) => snapshots,
        Err(err) => return unavailable(&err),
    };
    let live = |l: &Lease| l.is_live_within(options.lease_ttl);
    let report = status_report(&session, &key.bridge_ref, budgets, &snapshots, &live);
    let text = if args.json {
        format!("{report}\n")
    } else {
        status_text(&report)
    };
    stdout::print(text.as_bytes(), "the ledger status", exit::SUCCESS)
}

/// One [`Ledger::peek`] for the session (the first) and one per `--budget-tool` tool, in
/// that order: the counters `decide` reads for a call of that tool.
fn peek_all(
    ledger: &mut Ledger,
    key: &Key,
    budgets: &Budgets,
) -> Result<Vec<Snapshot>, LedgerError> {
    let tools = std::iter::once("").chain(budgets.tools.keys().map(String::as_str));
    tools
        .map(|tool| {
            ledger.peek(&Call {
                key,
                digest: "",
                tool,
                budgets,
                ask: None,
            })
        })
        .collect()
}

/// `ledger status`'s object: the session, the bridge ref, what it used, its calls in flight
/// and each budget set with its limit, used and left.
fn status_report(
    session: &str,
    bridge_ref: &str,
    budgets: &Budgets,
    snapshots: &[Snapshot],
    live: &dyn Fn(&Lease) -> bool,
) -> serde_json::Value {
    let first = &snapshots[0];
    // As `decide` counts them: the session's running calls whose holder is alive.
    let in_flight = first.running.iter().filter(|l| live(l)).count() as u64;
    let row = |budget: &str, limit: u64, used: u64| {
        json!({"budget": budget, "limit": limit, "used": used,
               "left": limit.saturating_sub(used)})
    };
    let mut rows = Vec::new();
    if let Some(limit) = budgets.calls {
        rows.push(row("calls", limit, first.calls));
    }
    for ((tool, limit), snap) in budgets.tools.iter().zip(&snapshots[1..]) {
        let mut r = row("tool", *limit, snap.tool_calls);
        r["tool"] = json!(tool);
        rows.push(r);
    }
    if let Some(limit) = budgets.adapter_ms {
        rows.push(row("adapter_ms", limit, first.adapter_ms));
    }
    if let Some(limit) = budgets.max_concurrent {
        rows.push(row("concurrent", limit, in_flight));
    }
    json!({
        "session": session,
        "bridge_ref": bridge_ref,
        "calls": first.calls,
        "adapter_ms": first.adapter_ms,
        "in_flight": in_flight,
        "running": first.running.len(),
        "budgets": rows,
    })
}

/// The human form of [`status_report`].
fn status_text(report: &serde_json::Value) -> String {
    let num = |v: &serde_json::Value| v.as_u64().unwrap_or(0).to_string();
    let mut out = format!(
        "session {} of bridge {}\nadmitted calls {}, adapter ms {}, in flight {} ({} running)\n",
        escape(report["session"].as_str().unwrap_or_default()),
        report["bridge_ref"].as_str().unwrap_or_default(),
        num(&report["calls"]),
        num(&report["adapter_ms"]),
        num(&report["in_flight"]),
        num(&report["running"]),
    );
    let budgets = report["budgets"].as_array().cloned().unwrap_or_default();
    if budgets.is_empty() {
        out.push_str("no budget set\n");
        return out;
    }
    let rows: Vec<[String; 4]> = budgets
        .iter()
        .map(|b| {
            let name = match b["tool"].as_str() {
                Some(tool) => format!("tool {}", escape(tool)),
                None => b["budget"].as_str().unwrap_or_default().to_string(),
            };
            [name, num(&b["limit"]), num(&b["used"]), num(&b["left"])]
        })
        .collect();
    out.push_str(&table(&["BUDGET", "LIMIT", "USED", "LEFT"], &rows));
    out
}

/// `ledger prune --before TIME`.
pub(crate) fn prune(args: &LedgerPruneArgs) -> u8 {
    let pruned = match writing(&args.ledger).and_then(|mut ledger| ledger.prune(args.before)) {
        Ok(pruned) => pruned,
        Err(err) => return unavailable(&err),
    };
    let report = match &pruned {
        Pruned::Removed {
            seq,
            hash,
            removed,
            checkpoint,
        } => json!({"removed": removed, "last_removed": {"seq": seq, "hash": hash},
                    "checkpoint": checkpoint}),
        Pruned::Nothing => json!({"removed": 0}),
        Pruned::Broken(at) => {
            stderr_line!(
                "{}",
                error_line(
                    "audit_chain_broken",
                    &format!("record {}: {}; nothing was removed", at.seq, at.reason)
                )
            );
            return exit::FAILED;
        }
    };
    stdout::print(
        format!("{report}\n").as_bytes(),
        "the prune report",
        exit::SUCCESS,
    )
}
