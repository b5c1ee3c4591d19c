//! `policy check` and `policy explain` (SPEC §16).
//!
//! `check` loads the file exactly as the main job does (`dispatch::policy::load`) and prints
//! each problem as `error[policy]: FILE:LINE:COL: message` (exit 65), or the lints as
//! `warning[policy]:` lines and one summary line on stdout (exit 0; 65 with `--strict` and a
//! warning). `explain` runs the main job's own admission and reports it
//! (`dispatch::explain`); it starts nothing and writes nothing.

use crate::cli::{PolicyCheckArgs, PolicyExplainArgs};
use crate::dispatch;
use ptd_sys::hostenv::HostEnv;
use ptd_wire::envelope::bridge::Bridge;
use ptd_wire::error::exit;
use ptd_wire::stdout;
use ptd_wire::terminal::escape;

/// Run `policy check`; returns the exit status.
pub(crate) fn check(args: &PolicyCheckArgs) -> u8 {
    let env = HostEnv::process();
    let bridge = match args.bridge.parent_tool_bridge.as_deref().map(Bridge::load) {
        None => None,
        Some(Ok(bridge)) => Some(bridge),
        Some(Err(err)) => {
            stderr_line!("error[bridge_invalid]: {}", escape(&err.to_string()));
            return exit::DATA_INVALID;
        }
    };
    let timeout = bridge.as_ref().map(|b| b.timeout_ms);
    let policy = match dispatch::policy::load(&args.file, args.ledger.as_deref(), timeout, &env) {
        Ok(policy) => policy,
        Err(problems) => {
            for problem in &problems {
                stderr_line!("error[policy]: {}", escape(&problem.to_string()));
            }
            return exit::DATA_INVALID;
        }
    };
    let allowed = bridge.map(|b| b.allowed_tools);
    let lints = policy.lints(allowed.as_deref());
    for lint in &lints {
        stderr_line!("warning[policy]: {}", escape(&lint.to_string()));
    }
    let summary = format!(
        "{}: valid, {} [[tool]] {}, sha256 {}\n",
        escape(&policy.file.display().to_string()),
        policy.tools.len(),
        if policy.tools.len() == 1 {
            "entry"
        } else {
            "entries"
        },
        policy.sha256
    );
    let status = if args.strict && !lints.is_empty() {
        exit::DATA_INVALID
    } else {
        exit::SUCCESS
    };
    stdout::print(summary.as_bytes(), "the policy check", status)
}

/// Run `policy explain`; returns the exit status.
pub(crate) fn explain(args: &PolicyExplainArgs) -> u8 {
    dispatch::explain::run(&args.dispatch_args(), args.json)
}
