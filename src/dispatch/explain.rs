//! `policy explain` (SPEC §16): the main job's own usage check and admission of a request,
//! stopped where the ledger step would start — then reported instead of run. Nothing is
//! started, no transcript folder or file transport is made, and the ledger is only read.
//!
//! The report is one JSON value (`--json` prints it; the text is rendered from it), so both
//! say the same. It names host paths and variable names as the host wrote them (it is for the
//! host's eyes) and never a variable's value.

use super::gate::{self, ask_for, call_budgets, call_key};
use super::{admit, check_usage, read_request, Admitted, CallSettings, DispatchError};
use super::{Learned, Usage, UsageError};
use crate::cli::DispatchArgs;
use crate::plan::{self, Planned};
use ptd_ledger::{self as ledger, Budgets, Call, Decision, Lease, Ledger, LedgerError};
use ptd_sys::confine::{Network, Options};
use ptd_sys::hostenv::HostEnv;
use ptd_sys::interrupt::Interrupts;
use ptd_wire::envelope::bridge::{Mode, Transport};
use ptd_wire::error::{exit, ErrorCode};
use ptd_wire::terminal::{error_line, escape};
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

/// The schema id of `policy explain --json`.
pub(crate) const SCHEMA: &str = "parent-tool-dispatch/policy-explain/v1";

/// The checks of the main job's admission, in its order, as the report names them.
const CHECKS: [&str; 6] = [
    "bridge",
    "policy",
    "request",
    "authorization",
    "session",
    "decision",
];

/// Run `policy explain` for the main job `args`; returns the exit status: 0 when the call
/// could be explained (whatever the decision), 65 when the policy, the bridge or the request
/// cannot be used, 2 for usage.
pub(crate) fn run(args: &DispatchArgs, json: bool) -> u8 {
    let env = HostEnv::process();
    let usage = match check_usage(args, &env) {
        Ok(usage) => usage,
        Err(UsageError(message)) => {
            stderr_line!("error[usage]: {message}");
            return exit::USAGE;
        }
    };
    let bytes = match read_request(args, &Interrupts::none()) {
        Ok(bytes) => bytes,
        Err(err) => {
            stderr_line!("{}", error_line(err.code().as_str(), &err.human()));
            return exit::DATA_INVALID;
        }
    };
    let mut learned = Learned::new(args, &env);
    learned.policy(&usage, &env);
    let admitted = admit(args, &env, &usage, bytes, &mut learned);
    let ledger = match &admitted {
        Ok(admitted) => preview(usage.ledger.as_ref(), admitted, &learned, &env),
        Err(_) => None,
    };
    let report = explanation(&usage, &learned, &admitted, ledger, &env);
    let status = match &admitted {
        Err(err) if cannot_explain(err) => {
            stderr_line!("{}", error_line(err.code().as_str(), &err.human()));
            for note in &learned.notes {
                stderr_line!("{note}");
            }
            exit::DATA_INVALID
        }
        _ => exit::SUCCESS,
    };
    let text = if json {
        let mut text = report.to_string();
        text.push('\n');
        text
    } else {
        render(&report)
    };
    ptd_wire::stdout::print(text.as_bytes(), "the explanation", status)
}

/// The failures that leave nothing to explain: the policy, the bridge or the request cannot
/// be used.
fn cannot_explain(err: &DispatchError) -> bool {
    matches!(
        err,
        DispatchError::PolicyInvalid { .. }
            | DispatchError::BridgeInvalid { .. }
            | DispatchError::RequestInvalid { .. }
            | DispatchError::RequestTooLarge { .. }
            | DispatchError::RequestUnreadable { .. }
    )
}

/// The check a failure of admission stopped at.
fn failed_check(err: &DispatchError) -> &'static str {
    match err {
        DispatchError::BridgeInvalid { .. } => "bridge",
        DispatchError::PolicyInvalid { .. } => "policy",
        DispatchError::RequestInvalid { .. }
        | DispatchError::RequestTooLarge { .. }
        | DispatchError::RequestUnreadable { .. } => "request",
        DispatchError::Denied { .. } => "authorization",
        DispatchError::SessionMismatch => "session",
        _ => "decision",
    }
}

/// The report as one JSON value.
fn explanation(
    usage: &Usage,
    learned: &Learned,
    admitted: &Result<Admitted, DispatchError>,
    ledger: Option<Preview>,
    env: &HostEnv,
) -> Value {
    let failed = admitted.as_ref().err().map(failed_check);
    let asks = admitted.as_ref().is_ok_and(|a| a.settings.ask.is_some());
    let mut reached = true;
    let checks: Vec<Value> = CHECKS
        .iter()
        .filter(|check| **check != "policy" || usage.policy.is_some())
        .map(|check| {
            let result = match (reached, failed) {
                (false, _) => "not_reached",
                (true, Some(f)) if f == *check => {
                    reached = false;
                    if *check == "decision" {
                        "denied"
                    } else {
                        "failed"
                    }
                }
                // No host session to compare with (no --session, no session_env).
                (true, _) if *check == "session" && usage.session.is_none() => "not_asked",
                // The entry asks a person first (SPEC §18).
                (true, None) if *check == "decision" && asks => "ask",
                (true, _) => "passed",
            };
            json!({"check": check, "result": result})
        })
        .collect();
    let policy = usage.policy.as_ref().and_then(|p| p.as_ref().ok());
    let mut report = Map::new();
    report.insert("schema".into(), json!(SCHEMA));
    report.insert(
        "policy".into(),
        json!({
            "file": policy.map(|p| p.file.display().to_string()),
            "sha256": policy.map(|p| p.sha256.clone()),
        }),
    );
    report.insert(
        "request".into(),
        json!({
            "request_id": learned.echo.request_id,
            "tool": learned.echo.tool,
            "operation": learned.echo.operation,
        }),
    );
    report.insert("checks".into(), Value::Array(checks));
    let entry = learned
        .dispatch
        .policy
        .as_ref()
        .map(|p| json!({"match": p.entry, "line": p.line}));
    report.insert("entry".into(), json!(entry));
    let (runs, code) = match (admitted, &ledger) {
        (Err(err), _) => (false, Some(err.code().as_str())),
        (Ok(_), Some(preview)) => (preview.runs, preview.code),
        (Ok(_), None) => (true, None),
    };
    report.insert(
        "decision".into(),
        json!({"runs": runs, "code": code, "replays": ledger.as_ref().is_some_and(|l| l.replays)}),
    );
    let run = admitted.as_ref().ok().map(|a| adapter(a, env));
    report.insert("adapter".into(), json!(run));
    let confinement = admitted
        .as_ref()
        .ok()
        .map(|a| confinement(&a.settings.confine));
    report.insert("confinement".into(), json!(confinement));
    let approval = admitted
        .as_ref()
        .ok()
        .and_then(|a| a.settings.ask.as_ref())
        .map(|ask| {
            json!({
                "ttl_ms": u64::try_from(ask.ttl.as_millis()).unwrap_or(u64::MAX),
                "notify": ask.notify,
            })
        });
    report.insert("approval".into(), json!(approval));
    report.insert(
        "ledger".into(),
        json!(ledger.map(|l| json!({
            "path": l.path,
            "durability": l.durability,
            "budgets": l.budgets,
            "answer": l.answer
        }))),
    );
    Value::Object(report)
}

/// What the adapter would be: argv, working directory, timeout, transport, variables.
fn adapter(admitted: &Admitted, env: &HostEnv) -> Value {
    let Some(command) = admitted.bridge.command.as_ref() else {
        return json!({"mode": admitted.bridge.mode.as_str()});
    };
    debug_assert!(admitted.bridge.mode == Mode::HostCommand);
    let settings: &CallSettings = &admitted.settings;
    let planned = Planned {
        timeout_ms: admitted.expected.deadline.timeout_ms(),
        command,
        settings,
        // Only the argv, cwd and variables are read.
        run: &crate::cli::DispatchArgs::with_bridge(String::new()).run,
    };
    let mut names: Vec<String> = planned
        .env(&admitted.expected.sent, env)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    if command.transport == Transport::File {
        names.push(plan::vars::REQUEST_FILE.into());
        names.push(plan::vars::RESULT_FILE.into());
    }
    let cwd = match planned.cwd(env) {
        Ok(dir) => json!(dir.map(|d| d.display().to_string())),
        Err(err) => json!({"error": err.code().as_str(), "message": err.human()}),
    };
    json!({
        "argv": planned.argv(),
        "cwd": cwd,
        "timeout_ms": planned.timeout_ms,
        "transport": match command.transport { Transport::Stdin => "stdin", Transport::File => "file" },
        "variables": names,
        "secret_variables": settings.secret_env,
    })
}

/// The confinement a call would run under; `null` for none.
fn confinement(options: &Options) -> Value {
    if !options.is_requested() {
        return Value::Null;
    }
    let paths = |list: &[std::path::PathBuf]| -> Vec<String> {
        list.iter().map(|p| p.display().to_string()).collect()
    };
    let run_as = match &options.run_as {
        Some(run_as) => run_as.spec.clone(),
        None if rustix::process::geteuid().is_root() => "nobody (the default)".to_string(),
        None => "this user (the default)".to_string(),
    };
    json!({
        "run_as": run_as,
        "network": match options.network {
            Network::Any => json!("any"),
            Network::None => json!("none"),
            // SPEC §17: the rules as the proxy reads them, and its byte bound.
            Network::Allow => json!({
                "allow": options.network_allow.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "max_bytes": options.network_max_bytes.unwrap_or(ptd_egress::DEFAULT_MAX_BYTES),
            }),
        },
        "fs_read": paths(&options.fs_read),
        "fs_write": paths(&options.fs_write),
        "limits": {
            "memory_bytes": options.limit_memory_bytes,
            "pids": options.limit_pids,
            "open_files": options.limit_open_files,
            "file_size_bytes": options.limit_file_size_bytes,
        },
    })
}

/// The text form: one `name: value` line per part, lists indented.
fn render(report: &Value) -> String {
    let mut out = String::new();
    let mut line = |text: String| {
        out.push_str(&escape(&text));
        out.push('\n');
    };
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_string(),
        other => other.to_string(),
    };
    if let Some(file) = report["policy"]["file"].as_str() {
        line(format!(
            "policy: {file} (sha256 {})",
            text(&report["policy"]["sha256"])
        ));
    }
    let request = &report["request"];
    line(format!(
        "request: {} tool {} operation {}",
        text(&request["request_id"]),
        text(&request["tool"]),
        text(&request["operation"])
    ));
    for check in report["checks"].as_array().into_iter().flatten() {
        line(format!(
            "check {}: {}",
            text(&check["check"]),
            text(&check["result"]).replace('_', " ")
        ));
    }
    if let Some(entry) = report["entry"].as_object() {
        let at = match entry.get("line") {
            Some(Value::Number(l)) => format!(" at line {l}"),
            _ => String::new(),
        };
        line(format!(
            "entry: {}{at}",
            text(entry.get("match").unwrap_or(&Value::Null))
        ));
    }
    let decision = &report["decision"];
    line(
        match (decision["runs"].as_bool(), decision["code"].as_str()) {
            (Some(true), _) => "decision: runs the adapter".to_string(),
            (_, Some(code)) => format!("decision: does not run: {code}"),
            _ if decision["replays"].as_bool() == Some(true) => {
                "decision: answers with the recorded envelope (ledger replay)".to_string()
            }
            _ => "decision: does not run".to_string(),
        },
    );
    render_adapter(&report["adapter"], &report["confinement"], &mut line, &text);
    if let Some(approval) = report["approval"].as_object() {
        let notify = match approval.get("notify").and_then(Value::as_array) {
            Some(argv) => argv.iter().map(&text).collect::<Vec<_>>().join(" "),
            None => "none".to_string(),
        };
        line(format!(
            "approval: a person first (SPEC 18), for {} ms; notifier: {notify}",
            text(&approval["ttl_ms"])
        ));
    }
    if let Some(ledger) = report["ledger"].as_object() {
        line(format!(
            "ledger: {} ({} durability; answer: {})",
            text(&ledger["path"]),
            text(&ledger["durability"]),
            text(&ledger["answer"])
        ));
        for budget in ledger["budgets"].as_array().into_iter().flatten() {
            line(format!(
                "  budget {}: used {} of {}, {} left",
                text(&budget["budget"]),
                text(&budget["used"]),
                text(&budget["limit"]),
                text(&budget["left"])
            ));
        }
    }
    out
}

/// The adapter and confinement lines of [`render`].
fn render_adapter(
    adapter: &Value,
    confinement: &Value,
    line: &mut impl FnMut(String),
    text: &impl Fn(&Value) -> String,
) {
    let Some(adapter) = adapter.as_object() else {
        return;
    };
    if let Some(argv) = adapter.get("argv").and_then(Value::as_array) {
        let words: Vec<String> = argv.iter().map(text).collect();
        line(format!("adapter: {}", words.join(" ")));
        line(format!("cwd: {}", text(&adapter["cwd"])));
        line(format!(
            "timeout_ms: {}, transport: {}",
            text(&adapter["timeout_ms"]),
            text(&adapter["transport"])
        ));
        let names: Vec<String> = adapter["variables"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text)
            .collect();
        line(format!("variables: {}", names.join(" ")));
        let secret: Vec<String> = adapter["secret_variables"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text)
            .collect();
        if !secret.is_empty() {
            line(format!("secret variables: {}", secret.join(" ")));
        }
    }
    let Some(c) = confinement.as_object() else {
        line("confinement: none (unconfined)".to_string());
        return;
    };
    line(format!(
        "confinement: run as {}, network {}",
        text(&c["run_as"]),
        match &c["network"] {
            Value::Object(allow) => format!(
                "allow {} (at most {} bytes each way)",
                allow["allow"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(text)
                    .collect::<Vec<_>>()
                    .join(", "),
                allow["max_bytes"]
            ),
            other => text(other),
        }
    ));
    for key in ["fs_read", "fs_write"] {
        for path in c[key].as_array().into_iter().flatten() {
            line(format!("  {key}: {}", text(path)));
        }
    }
    if let Some(limits) = c["limits"].as_object() {
        for (name, value) in limits.iter().filter(|(_, v)| !v.is_null()) {
            line(format!("  limit {name}: {value}"));
        }
    }
}

/// What the ledger would answer an admitted call, seen without changing it (`policy
/// explain`, SPEC §16): the ledger only read ([`Ledger::open_existing`], [`Ledger::peek`]),
/// and the same rules applied ([`ledger::decide`]).
pub(crate) struct Preview {
    /// The ledger file.
    pub(crate) path: String,
    /// `--ledger-durability`'s choice, as written.
    pub(crate) durability: &'static str,
    /// Each budget in force: `{budget, limit, used, left}` (`tool` for the tool's).
    pub(crate) budgets: Vec<serde_json::Value>,
    /// What the ledger would do, in words.
    pub(crate) answer: String,
    /// Whether the adapter would run (the ledger lets the call start).
    pub(crate) runs: bool,
    /// The code of a refusal, `None` when the call runs or replays.
    pub(crate) code: Option<&'static str>,
    /// Whether the recorded envelope would be printed again.
    pub(crate) replays: bool,
}

/// [`Preview`] of `admitted` with the job's ledger `options`; `None` without a ledger.
pub(crate) fn preview(
    options: Option<&gate::Options>,
    admitted: &Admitted,
    learned: &Learned,
    env: &ptd_sys::hostenv::HostEnv,
) -> Option<Preview> {
    let options = options?;
    let request = learned.request.as_deref();
    let (key, session_id, digest) = call_key(learned.bridge_ref.as_deref(), request, &learned.echo);
    let tool = &admitted.expected.canonical_tool;
    let budgets = call_budgets(&options.budgets, tool, admitted.settings.tool_budget);
    let ask = ask_for(
        &admitted.settings,
        &learned.echo,
        request,
        &learned.redactor,
        &session_id,
    );
    let call = Call {
        key: &key,
        digest: &digest,
        tool,
        budgets: &budgets,
        ask: ask.as_ref(),
    };
    let wait = admitted.expected.deadline.timeout_ms().max(1000);
    let deadline = Instant::now() + Duration::from_millis(wait);
    let snapshot = match Ledger::open_existing_at(&options.location, env, deadline) {
        Ok(mut ledger) => ledger.peek(&call),
        // No ledger yet: the main job makes it, empty.
        Err(LedgerError::Missing) => Ok(ledger::Snapshot::default()),
        Err(err) => Err(err),
    };
    let path = options.location.to_string();
    let snapshot = match snapshot {
        Ok(snapshot) => snapshot,
        Err(err) => {
            return Some(Preview {
                path,
                durability: options.durability.name(),
                budgets: Vec::new(),
                answer: format!("the ledger cannot be read: {err}"),
                runs: false,
                code: Some(ErrorCode::LedgerUnavailable.as_str()),
                replays: false,
            })
        }
    };
    let live = |lease: &Lease| lease.is_live();
    let (decision, _) = ledger::decide(&call, &snapshot, &live);
    let (answer, code, replays) = in_words(&decision);
    Some(Preview {
        path,
        durability: options.durability.name(),
        budgets: budget_lines(&budgets, tool, &snapshot, &live),
        runs: matches!(decision, Decision::Start { .. }),
        answer,
        code,
        replays,
    })
}

/// What the ledger would do with a call, in words for `policy explain`: the answer, the code of
/// a refusal, and whether the recorded envelope would be printed again.
fn in_words(decision: &Decision) -> (String, Option<&'static str>, bool) {
    match decision {
        Decision::Start { attempt, .. } => (format!("run, attempt {attempt}"), None, false),
        Decision::Replay(_) => ("print the recorded envelope again".into(), None, true),
        Decision::Reused => (
            "refuse: the request id was used for another request".into(),
            Some(ErrorCode::RequestIdReused.as_str()),
            false,
        ),
        Decision::Held(_) => (
            "wait: another live dispatcher is running this request".into(),
            None,
            false,
        ),
        Decision::Indeterminate { .. } => (
            "refuse: the dispatcher running this request died".into(),
            Some(ErrorCode::DispatchIndeterminate.as_str()),
            false,
        ),
        Decision::BudgetExhausted(over) => (
            format!("refuse: over its budget ({})", over.budget.rule()),
            Some(ErrorCode::BudgetExhausted.as_str()),
            false,
        ),
        Decision::ConcurrencyLimited(_) => (
            "refuse for now: too many calls of the session in flight".into(),
            Some(ErrorCode::ConcurrencyLimited.as_str()),
            false,
        ),
        Decision::ApprovalRequired {
            approval_id, new, ..
        } => (
            if *new {
                "ask a person: a new approval would be made".to_string()
            } else {
                format!("wait for a person: approval {approval_id} is pending")
            },
            Some(ErrorCode::ApprovalRequired.as_str()),
            false,
        ),
        Decision::ApprovalDenied { approval_id } => (
            format!("refuse: approval {approval_id} was denied"),
            Some(ErrorCode::ApprovalDenied.as_str()),
            false,
        ),
        Decision::ApprovalExpired { approval_id } => (
            format!("refuse: approval {approval_id} expired"),
            Some(ErrorCode::ApprovalExpired.as_str()),
            false,
        ),
    }
}

/// Each budget in force with what the session used of it.
fn budget_lines(
    budgets: &Budgets,
    tool: &str,
    snapshot: &ledger::Snapshot,
    live: &dyn Fn(&Lease) -> bool,
) -> Vec<serde_json::Value> {
    let in_flight = snapshot.running.iter().filter(|l| live(l)).count() as u64;
    let rows = [
        ("calls", budgets.calls, snapshot.calls, None),
        (
            "tool",
            budgets.tools.get(tool).copied(),
            snapshot.tool_calls,
            Some(tool),
        ),
        ("adapter_ms", budgets.adapter_ms, snapshot.adapter_ms, None),
        ("concurrent", budgets.max_concurrent, in_flight, None),
    ];
    rows.into_iter()
        .filter_map(|(name, limit, used, tool)| {
            let limit = limit?;
            let mut row = serde_json::json!({
                "budget": name,
                "limit": limit,
                "used": used,
                "left": limit.saturating_sub(used),
            });
            if let Some(tool) = tool {
                row["tool"] = serde_json::json!(tool);
            }
            Some(row)
        })
        .collect()
}
