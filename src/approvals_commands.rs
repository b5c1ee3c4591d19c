//! `approvals list|show|approve|deny` (SPEC §18): what a person sees of the calls a host
//! policy holds for them, and how they decide. `list` and `show` only read the ledger
//! ([`Ledger::open_existing`]); `approve` and `deny` change one approval and append its audit
//! record in one transaction (`Ledger::decide_approval`), or change nothing.
//!
//! Exit statuses: 0 done; 65 an id that is unknown, already decided or expired (stderr
//! `error[approval_unknown]`, `error[approval_decided]`, `error[approval_expired]`); 69 a
//! ledger that cannot be opened (`error[ledger_unavailable]`); 2 usage; 74 a lost stdout.

use crate::cli::{ApprovalsCommand, ApprovalsDecideArgs, ApprovalsListArgs, ApprovalsShowArgs};
use crate::dispatch::id_digest;
use ptd_ledger::{Approval, ApprovalError, ApprovalFilter, ApprovalState, Decided, Ledger};
use ptd_wire::error::exit;
use ptd_wire::stdout;
use ptd_wire::terminal::{error_line, escape};
use serde_json::{json, Value};
use std::path::Path;

/// How much of the input `list` shows in its table.
const INPUT_COLUMN: usize = 60;

/// Run `approvals …`; returns the exit status.
pub(crate) fn main(command: &ApprovalsCommand) -> u8 {
    match command {
        ApprovalsCommand::List(args) => list(args),
        ApprovalsCommand::Show(args) => show(args),
        ApprovalsCommand::Approve(args) => decide(args, true),
        ApprovalsCommand::Deny(args) => decide(args, false),
    }
}

/// The ledger, only to read it; the error line and exit 69 when it cannot be.
fn reading(path: &Path) -> Result<Ledger, u8> {
    crate::ledger_open::reading(path).map_err(|err| {
        stderr_line!("{}", error_line(err.code(), &err.to_string()));
        exit::UNAVAILABLE
    })
}

fn list(args: &ApprovalsListArgs) -> u8 {
    let mut ledger = match reading(&args.ledger.ledger) {
        Ok(ledger) => ledger,
        Err(status) => return status,
    };
    let filter = ApprovalFilter {
        pending_only: !args.all,
        session_key: args.session.as_deref().map(id_digest),
    };
    let mut approvals = match ledger.approvals(&filter) {
        Ok(approvals) => approvals,
        Err(err) => {
            stderr_line!("{}", error_line(err.code(), &err.to_string()));
            return exit::UNAVAILABLE;
        }
    };
    let now = ptd_ledger::now_ms();
    // By default only what a person can still decide: pending and not expired.
    if !args.all {
        approvals.retain(|a| state(a, now) == "pending");
    }
    let text = if args.json {
        let all: Vec<Value> = approvals.iter().map(|a| to_json(a, now)).collect();
        format!("{}\n", json!({ "approvals": all }))
    } else {
        table(&approvals, now)
    };
    stdout::print(text.as_bytes(), "the approvals", exit::SUCCESS)
}

fn show(args: &ApprovalsShowArgs) -> u8 {
    let mut ledger = match reading(&args.ledger.ledger) {
        Ok(ledger) => ledger,
        Err(status) => return status,
    };
    let approval = match ledger.approval(&args.id) {
        Ok(Some(approval)) => approval,
        Ok(None) => return refused(&ApprovalError::Unknown(args.id.clone())),
        Err(err) => {
            stderr_line!("{}", error_line(err.code(), &err.to_string()));
            return exit::UNAVAILABLE;
        }
    };
    let now = ptd_ledger::now_ms();
    let text = if args.json {
        format!("{}\n", to_json(&approval, now))
    } else {
        details(&approval, now)
    };
    stdout::print(text.as_bytes(), "the approval", exit::SUCCESS)
}

fn decide(args: &ApprovalsDecideArgs, approve: bool) -> u8 {
    if args.for_session && !approve {
        stderr_line!("error[usage]: --for-session goes with `approve` only");
        return exit::USAGE;
    }
    let path = &args.ledger.ledger;
    // Deciding never makes a ledger: a missing one is no ledger to decide in. (A folder this
    // user cannot look into is not "missing": opening it says why.)
    let is_url = path.to_str().is_some_and(ptd_ledger::Location::is_url);
    if !is_url && matches!(path.try_exists(), Ok(false)) {
        let err = ptd_ledger::LedgerError::Missing;
        stderr_line!("{}", error_line(err.code(), &err.to_string()));
        return exit::UNAVAILABLE;
    }
    let mut ledger = match crate::ledger_open::writing(path) {
        Ok(ledger) => ledger,
        Err(err) => {
            stderr_line!("{}", error_line(err.code(), &err.to_string()));
            return exit::UNAVAILABLE;
        }
    };
    let decided = Decided {
        approve,
        by: args.by.clone().unwrap_or_else(default_by),
        note: args.note.clone(),
        for_session: args.for_session,
        now_ms: ptd_ledger::now_ms(),
    };
    match ledger.decide_approval(&args.id, &decided) {
        Ok(approval) => {
            let what = if approve { "approved" } else { "denied" };
            let scope = if approval.for_session {
                format!(
                    " (and the session's later {} calls until it expires)",
                    approval.tool
                )
            } else {
                String::new()
            };
            let line = format!(
                "{what} {}: {} {} of session {}{scope}",
                approval.id, approval.tool, approval.request_shown, approval.session_shown
            );
            ledger.checkpoint();
            let line = format!("{}\n", escape(&line));
            stdout::print(line.as_bytes(), "the decision", exit::SUCCESS)
        }
        Err(err) => refused(&err),
    }
}

/// The error line and exit status of a decision or look-up that was refused.
fn refused(err: &ApprovalError) -> u8 {
    let (code, status) = match err {
        ApprovalError::Unknown(_) => ("approval_unknown", exit::DATA_INVALID),
        ApprovalError::AlreadyDecided { .. } => ("approval_decided", exit::DATA_INVALID),
        ApprovalError::Expired { .. } => ("approval_expired", exit::DATA_INVALID),
        ApprovalError::Invalid(_) => ("usage", exit::USAGE),
        ApprovalError::Ledger(err) => (err.code(), exit::UNAVAILABLE),
    };
    stderr_line!("{}", error_line(code, &err.to_string()));
    status
}

/// `--by`'s default: the user running the command.
fn default_by() -> String {
    match std::env::var("USER") {
        Ok(user) if !user.is_empty() => user,
        _ => format!("uid {}", rustix::process::getuid().as_raw()),
    }
}

/// An approval's state as `list` and `show` say it: `expired` for a pending or approved one
/// past its expiry.
fn state(approval: &Approval, now: u64) -> &'static str {
    match approval.state {
        ApprovalState::Denied => "denied",
        _ if now >= approval.expires_ms => "expired",
        ApprovalState::Pending => "pending",
        ApprovalState::Approved => "approved",
    }
}

fn to_json(approval: &Approval, now: u64) -> Value {
    let time = ptd_ledger::flags::format_rfc3339_ms;
    json!({
        "approval_id": approval.id,
        "state": state(approval, now),
        "tool": approval.tool,
        "operation": approval.operation,
        "session_id": approval.session_shown,
        "request_id": approval.request_shown,
        "bridge_ref": approval.bridge_ref,
        "request_digest": approval.digest,
        "policy": {"sha256": approval.policy_sha256, "entry": approval.entry, "line": approval.line},
        "created_at": time(approval.created_ms),
        "expires_at": time(approval.expires_ms),
        "for_session": approval.for_session,
        "decided_by": approval.decided_by,
        "note": approval.note,
        "decided_at": approval.decided_ms.map(time),
        "input": approval.input_shown,
    })
}

/// A duration in the largest whole unit: `42s`, `7m`, `3h`, `2d`.
fn span(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// The start of `text` on one line: at most `max` characters, `…` when cut.
fn clip(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match flat.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &flat[..at]),
        None => flat,
    }
}

/// `list`'s table: a header, one aligned row per approval, a count.
fn table(approvals: &[Approval], now: u64) -> String {
    let header = [
        "ID", "STATE", "TOOL", "SESSION", "REQUEST", "AGE", "LEFT", "INPUT",
    ];
    let rows: Vec<[String; 8]> = approvals
        .iter()
        .map(|a| {
            [
                a.id.clone(),
                state(a, now).to_string(),
                a.tool.clone(),
                clip(&a.session_shown, 24),
                clip(&a.request_shown, 24),
                span(now.saturating_sub(a.created_ms)),
                span(a.expires_ms.saturating_sub(now)),
                clip(&a.input_shown, INPUT_COLUMN),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let last = cells.len() - 1;
        for (i, cell) in cells.iter().enumerate() {
            out.push_str(&escape(cell));
            if i < last {
                let pad = widths[i] - cell.chars().count() + 2;
                out.push_str(&" ".repeat(pad));
            }
        }
        out.push('\n');
    };
    line(header.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
    out.push_str(&format!(
        "{} approval{}\n",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" }
    ));
    out
}

/// `show`'s text: one `name: value` line per field, then the input.
fn details(approval: &Approval, now: u64) -> String {
    let time = ptd_ledger::flags::format_rfc3339_ms;
    let mut lines = vec![
        format!("approval: {}", approval.id),
        format!("state: {}", state(approval, now)),
        format!("tool: {} ({})", approval.tool, approval.operation),
        format!("session: {}", approval.session_shown),
        format!("request: {}", approval.request_shown),
        format!(
            "policy: entry {}{} (sha256 {})",
            approval.entry,
            approval
                .line
                .map_or(String::new(), |l| format!(" at line {l}")),
            approval.policy_sha256
        ),
        format!("created: {}", time(approval.created_ms)),
        format!("expires: {}", time(approval.expires_ms)),
    ];
    if let (Some(by), Some(at)) = (&approval.decided_by, approval.decided_ms) {
        let scope = if approval.for_session {
            ", for the session"
        } else {
            ""
        };
        lines.push(format!("decided: by {by} at {}{scope}", time(at)));
    }
    if let Some(note) = &approval.note {
        lines.push(format!("note: {note}"));
    }
    let mut out: String = lines.iter().map(|l| format!("{}\n", escape(l))).collect();
    out.push_str("input:\n");
    for line in approval.input_shown.lines() {
        out.push_str(&format!("  {}\n", escape(line)));
    }
    out
}
