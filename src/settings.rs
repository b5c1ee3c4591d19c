//! [`CallSettings`]: what one call runs with — the one value the command line and the host
//! policy (SPEC §16) both build, and `plan`, confinement, the ledger step and the report read.
//! Without a policy it is the command line's ([`CallSettings::command_line`]); with one, the
//! deciding entry's (`dispatch::policy::routed`).

use crate::cli::DispatchArgs;
use ptd_sys::confine::Options;
use ptd_wire::envelope::result::PolicyDiagnostics;
use std::path::PathBuf;

/// What one call runs with (SPEC §3, §13, §14, §16): from the command line, or from the host
/// policy's entry for its tool.
#[derive(Debug, Clone, Default)]
pub struct CallSettings {
    /// The adapter's argv, when it is not the bridge's `dispatcher.command.argv`.
    pub adapter: Option<Vec<String>>,
    /// The adapter's working directory, when it is not the bridge's `cwd_env`.
    pub cwd: Option<PathBuf>,
    /// The call's time, when shorter than the bridge's `dispatcher.timeout_ms`.
    pub timeout_ms: Option<u64>,
    /// Host variables passed to the adapter (`--pass-env`, `pass_env`).
    pub pass_env: Vec<String>,
    /// Host variables passed to the adapter and scrubbed from everything that leaves
    /// (`--secret-env`, `secret_env`).
    pub secret_env: Vec<String>,
    /// The confinement, checked.
    pub confine: Options,
    /// The admitted calls of this tool allowed per session (`--budget-tool`, `budget_calls`).
    pub tool_budget: Option<u64>,
    /// Which policy and entry decided (`diagnostics.dispatch.policy`); `None` without one.
    pub policy: Option<PolicyDiagnostics>,
    /// `decision = "ask"` (SPEC §18): a person approves the call first.
    pub ask: Option<AskSettings>,
}

/// What `decision = "ask"` brings (SPEC §18).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskSettings {
    /// How long an approval may be waited for, and used (`approval_ttl`; 1 h by default).
    pub ttl: std::time::Duration,
    /// The host command told of each new approval (`approval_notify`).
    pub notify: Option<Vec<String>>,
}

/// `approval_ttl`'s default.
pub const DEFAULT_APPROVAL_TTL: std::time::Duration = std::time::Duration::from_secs(3600);

impl CallSettings {
    /// The command line's settings: its `--pass-env`, `--secret-env` and confinement
    /// (already checked), the bridge's adapter and timeout.
    pub(crate) fn command_line(args: &DispatchArgs, confine: &Options) -> CallSettings {
        CallSettings {
            pass_env: args.run.pass_env.clone(),
            secret_env: args.run.secret_env.clone(),
            confine: confine.clone(),
            ..CallSettings::default()
        }
    }
}
