//! The host policy in the main job (SPEC §16): loading it before the request is read, the
//! command-line options it leaves no room for, and — once the request's tool is known and
//! allowed — the settings its entry gives one call.
//!
//! One meaning per setting: the command line and the policy both build a [`CallSettings`],
//! the one value `plan`, confinement, the ledger step and the report read. Without a policy it
//! is the command line's, as it always was; with one it is the deciding entry's over
//! `[defaults]`, each confinement key read by the command line's own parser
//! (`Entry::confine_raw`, `Options::parse_beside_ledger`) and confinement on by default.

use super::{gate, DispatchError, UsageError};
use crate::cli::{DispatchArgs, LEDGER_ENV, SESSION_ENV};
use crate::settings::{AskSettings, CallSettings, DEFAULT_APPROVAL_TTL};
use ptd_ledger::Budgets;
use ptd_policy::{Compiled, Decision, LoadContext, Policy, Problem};
use ptd_sys::confine::{OptionName, Options};
use ptd_sys::hostenv::HostEnv;
use ptd_wire::envelope::result::PolicyDiagnostics;
use std::path::{Path, PathBuf};

/// Load the host policy at `path` as `policy check` does: every check of the loader. `ledger`
/// is the command line's `--ledger`; `bridge_timeout_ms` the bridge's, when it is known.
pub(crate) fn load(
    path: &Path,
    ledger: Option<&Path>,
    bridge_timeout_ms: Option<u64>,
    env: &HostEnv,
) -> Result<Policy, Vec<Problem>> {
    ptd_policy::load(path, &context(ledger, bridge_timeout_ms, env))
}

/// [`load`] for the main job: through the compiled-policy cache of a root dispatcher
/// (`ptd_policy::load_cached`, docs/PERFORMANCE.md), the same policy or the same problems.
pub(crate) fn load_for_call(
    path: &Path,
    ledger: Option<&Path>,
    env: &HostEnv,
) -> Result<Compiled, Vec<Problem>> {
    ptd_policy::load_cached(path, &context(ledger, None, env))
}

/// What every load of this dispatcher checks a policy against: the command line's
/// `--ledger`, the bridge's timeout when known, `PATH`; what it does not do yet is refused.
fn context(ledger: Option<&Path>, bridge_timeout_ms: Option<u64>, env: &HostEnv) -> LoadContext {
    LoadContext {
        bridge_timeout_ms,
        ledger: ledger.map(Path::to_path_buf),
        path: env.var_os("PATH"),
    }
}

/// The variable that stands for a budget flag.
fn budget_env(flag: &str) -> &'static str {
    match flag {
        "--budget-calls" => crate::cli::BUDGET_CALLS_ENV,
        "--budget-tool" => crate::cli::BUDGET_TOOL_ENV,
        "--budget-adapter-ms" => crate::cli::BUDGET_ADAPTER_MS_ENV,
        _ => crate::cli::MAX_CONCURRENT_ENV,
    }
}

/// The main job's options beside a policy, checked (usage errors, exit 2): the policy owns
/// confinement and budgets, so their options — flags and `PARENT_TOOL_DISPATCH_*` variables —
/// are refused; `--ledger`, `--session`, `--pass-env` and `--secret-env` are refused when the
/// policy sets the same (`[ledger] path`, `session_env`, `pass_env`, `secret_env` anywhere).
/// No silent precedence.
pub(super) fn refuse_beside(
    args: &DispatchArgs,
    env: &HostEnv,
    policy: Option<&Compiled>,
) -> Result<(), UsageError> {
    let confine = OptionName::ALL.iter().find_map(|name| {
        if confine_flag_given(args, *name) {
            Some((*name, name.flag()))
        } else if env.var_os(name.env_var()).is_some_and(|v| !v.is_empty()) {
            Some((*name, name.env_var()))
        } else {
            None
        }
    });
    if let Some((name, shown)) = confine {
        return Err(UsageError(format!(
            "{shown} cannot be used with --policy: the policy confines each tool; write it as \
             `{}` in the policy's [defaults] or the tool's entry",
            ptd_policy::key_of(name)
        )));
    }
    let ledger = &args.ledger;
    let budgets = [
        (
            "--budget-calls",
            ledger.budget_calls.is_some(),
            "[ledger] budget_calls",
        ),
        (
            "--budget-tool",
            !ledger.budget_tool.is_empty(),
            "budget_calls in the tool's entry",
        ),
        (
            "--budget-adapter-ms",
            ledger.budget_adapter_ms.is_some(),
            "[ledger] budget_adapter_ms",
        ),
        (
            "--max-concurrent",
            ledger.max_concurrent.is_some(),
            "[ledger] max_concurrent",
        ),
    ];
    if let Some((flag, _, key)) = budgets.iter().find(|(_, given, _)| *given) {
        let var = budget_env(flag);
        return Err(UsageError(format!(
            "{flag} (or {var}) cannot be used with --policy: the policy keeps the budgets; \
             write it as {key}"
        )));
    }
    let Some(policy) = policy else {
        return Ok(());
    };
    let section = policy.ledger.as_ref();
    let both = [
        (
            "--ledger",
            LEDGER_ENV,
            ledger.ledger.is_some(),
            section.is_some_and(|l| l.path.is_some()),
            "[ledger] path",
        ),
        (
            "--session",
            SESSION_ENV,
            ledger.session.is_some(),
            section.is_some_and(|l| l.session_env.is_some()),
            "[ledger] session_env",
        ),
        (
            "--pass-env",
            "",
            !args.run.pass_env.is_empty(),
            policy.sets_pass_env,
            "pass_env",
        ),
        (
            "--secret-env",
            "",
            !args.run.secret_env.is_empty(),
            policy.sets_secret_env,
            "secret_env",
        ),
    ];
    match both.iter().find(|(_, _, given, set, _)| *given && *set) {
        Some((flag, var, _, _, key)) => {
            let or_var = if var.is_empty() {
                String::new()
            } else {
                format!(" (or {var})")
            };
            Err(UsageError(format!(
                "{flag}{or_var} cannot be used with this policy: it sets {key} itself"
            )))
        }
        None => Ok(()),
    }
}

/// Whether the command line gives the confinement option `name` as a flag.
fn confine_flag_given(args: &DispatchArgs, name: OptionName) -> bool {
    let confine = &args.run.confine;
    match name {
        OptionName::FsRead => !confine.fs_read.is_empty(),
        OptionName::FsWrite => !confine.fs_write.is_empty(),
        OptionName::Network => confine.network.is_some(),
        OptionName::NetworkMaxBytes => confine.network_max_bytes.is_some(),
        OptionName::LimitMemory => confine.limit_memory.is_some(),
        OptionName::LimitPids => confine.limit_pids.is_some(),
        OptionName::LimitOpenFiles => confine.limit_open_files.is_some(),
        OptionName::LimitFileSize => confine.limit_file_size.is_some(),
        OptionName::RunAs => confine.run_as.is_some(),
    }
}

/// The ledger and the host's session of a main job under `policy` (SPEC §16): the ledger is
/// `[ledger] path`, or else `--ledger`; the session is read from the variable `session_env`
/// names, or else `--session` (`cli_session`); the budgets are the section's. Any budget — the
/// section's, or an entry's `budget_calls` — needs the host's session (SPEC §14.4).
pub(super) fn ledger_and_session(
    args: &DispatchArgs,
    env: &HostEnv,
    policy: &Compiled,
    cli_session: Option<String>,
) -> Result<(Option<gate::Options>, Option<String>), UsageError> {
    let section = policy.ledger.clone().unwrap_or_default();
    let session = match &section.session_env {
        Some(name) => {
            let value = env.var(name).ok_or_else(|| {
                UsageError(format!(
                    "the policy's [ledger] session_env names {name}, which is not set: the \
                     host's session comes from it"
                ))
            })?;
            let session = ptd_ledger::parse_session(&value).map_err(|err| {
                UsageError(format!(
                    "the policy's [ledger] session_env {name}: {}",
                    err.reason
                ))
            })?;
            Some(session)
        }
        None => cli_session,
    };
    let budgets: Budgets = section.budgets();
    if (budgets.any() || policy.sets_budget_calls) && session.is_none() {
        return Err(UsageError(format!(
            "the policy's budgets need the host's session: set [ledger] session_env in the \
             policy, or pass --session ID (or set {SESSION_ENV})"
        )));
    }
    let path = section
        .path
        .map(PathBuf::from)
        .or_else(|| args.ledger.ledger.clone());
    let location = path.as_deref().map(gate::location_of).transpose()?;
    let lease_ttl = match section.lease_ttl {
        Some(_) if args.ledger.lease_ttl.is_some() => {
            return Err(UsageError(
                "--lease-ttl (or PARENT_TOOL_DISPATCH_LEASE_TTL) cannot be used with this \
                 policy: it sets [ledger] lease_ttl itself"
                    .into(),
            ))
        }
        Some(seconds) => std::time::Duration::from_secs(seconds),
        None => gate::lease_ttl(&args.ledger)?,
    };
    let durability =
        match section.durability {
            Some(_) if args.ledger.ledger_durability.is_some() => return Err(UsageError(
                "--ledger-durability (or PARENT_TOOL_DISPATCH_LEDGER_DURABILITY) cannot be used \
                 with this policy: it sets [ledger] durability itself"
                    .into(),
            )),
            Some(durability) => durability,
            None => gate::durability(&args.ledger),
        };
    Ok((
        location.map(|location| gate::Options {
            location,
            budgets,
            lease_ttl,
            durability,
        }),
        session,
    ))
}

/// What the policy's entry for `tool` (a canonical id the bridge and the request allow) gives
/// the call, over `base` (the command line's `--pass-env` and `--secret-env`, which a policy
/// that sets neither leaves in force): the diagnostics naming the deciding entry, and the
/// settings (with what `decision = "ask"` brings, SPEC §18) — or `tool_denied_by_policy` for
/// `decision = "deny"`. `ledger` is the job's
/// ledger file: no grant may cover its folder.
pub(crate) fn routed(
    policy: &Compiled,
    tool: &str,
    base: &CallSettings,
    ledger: Option<&Path>,
) -> (PolicyDiagnostics, Result<CallSettings, DispatchError>) {
    let route = policy.route(tool);
    let (entry, line) = (route.entry, route.line);
    let diagnostics = PolicyDiagnostics {
        sha256: policy.sha256.clone(),
        entry: entry.clone(),
        line,
    };
    let effective = route.effective;
    let decision = effective.decision.unwrap_or(Decision::Allow);
    if decision == Decision::Deny {
        let denied = DispatchError::DeniedByPolicy {
            tool: tool.to_string(),
            entry,
            line,
        };
        return (diagnostics, Err(denied));
    }
    let ask = (decision == Decision::Ask).then(|| AskSettings {
        ttl: effective.approval_ttl.unwrap_or(DEFAULT_APPROVAL_TTL),
        notify: effective.approval_notify.clone(),
    });
    // The ledger as the host named it: the policy's `[ledger] path`, or else `--ledger`.
    let named_by = match policy.ledger.as_ref().and_then(|l| l.path.as_ref()) {
        Some(_) => "[ledger] path",
        None => "--ledger",
    };
    let settings = confinement(&effective, ledger, named_by)
        .map_err(|message| invalid_at(policy, line, message))
        .map(|confine| CallSettings {
            adapter: effective.adapter.clone(),
            cwd: effective.cwd.clone(),
            timeout_ms: effective.timeout_ms,
            pass_env: effective
                .pass_env
                .clone()
                .unwrap_or_else(|| base.pass_env.clone()),
            secret_env: effective
                .secret_env
                .clone()
                .unwrap_or_else(|| base.secret_env.clone()),
            confine,
            tool_budget: effective.budget_calls,
            policy: Some(diagnostics.clone()),
            ask,
        });
    (diagnostics, settings)
}

/// An entry's confinement: none for `unconfined = true`; else its keys (over `[defaults]`)
/// read by the command line's parser, on top of the baseline (SPEC §16: confined by default).
fn confinement(
    effective: &ptd_policy::Entry,
    ledger: Option<&Path>,
    named_by: &'static str,
) -> Result<Options, String> {
    if effective.unconfined == Some(true) {
        return Ok(Options::default());
    }
    let mut options =
        Options::parse_beside_named_ledger(&effective.confine_raw(), ledger, named_by)
            .map_err(|err| format!("the entry's confinement: {err}"))?;
    options.baseline = true;
    Ok(options)
}

/// `policy_invalid` for a problem found at run time in the entry at `line` (a grant path
/// removed since the policy was loaded, say).
fn invalid_at(policy: &Compiled, line: Option<usize>, message: String) -> DispatchError {
    let at = ptd_policy::Location {
        line: line.unwrap_or(1),
        column: 1,
    };
    DispatchError::PolicyInvalid {
        problems: vec![Problem::new(
            &policy.file.display().to_string(),
            at,
            message,
        )],
    }
}
