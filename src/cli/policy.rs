//! The arguments of `policy check` and `policy explain` (SPEC §16): what `--help` and the man
//! pages say of them. Like the rest of `cli`, only descriptions: nothing is read here.

use super::{BridgeArg, DispatchArgs, LEDGER_ENV, POLICY_ENV, SESSION_ENV};
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// `policy` subcommands (SPEC 16).
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Check a host policy file: every problem at its FILE:LINE:COL, then the lints
    ///
    /// Loads FILE exactly as the main job would (--ledger and, with a bridge, its
    /// dispatcher.timeout_ms are checked against it). Each problem is an `error[policy]:
    /// FILE:LINE:COL: message` line on stderr, exit 65. A policy that loads gets its lints as
    /// `warning[policy]:` lines: a tool the bridge allows that no entry covers, an entry that
    /// matches no tool the bridge allows (both only with --parent-tool-bridge), an entry that
    /// runs unconfined. Then stdout gets one line, `FILE: valid, N [[tool]] entries, sha256
    /// HEX`, and the exit status is 0 (65 with --strict when there was a warning). A bridge
    /// that cannot be loaded is `error[bridge_invalid]`, exit 65.
    Check(PolicyCheckArgs),
    /// Explain what the main job would do with a request under a policy, running nothing
    ///
    /// The same admission as the main job (bridge, request, allowlists, session, the policy's
    /// routing), then, instead of a run: which entry decided (FILE:LINE), the decision, the
    /// adapter's argv and working directory, the names of the variables it gets (never a
    /// value), its confinement, its timeout and, with a ledger, each budget with what is used
    /// and left and what the ledger would answer. Nothing is started and no file is written or
    /// changed (the ledger is only read). --json prints one object (schema
    /// "parent-tool-dispatch/policy-explain/v1") instead of the text. Exit 0 whenever the call
    /// could be explained, whatever the decision; 65 for a policy, bridge or request that
    /// cannot be used; 2 for usage.
    Explain(PolicyExplainArgs),
}

/// Arguments of `policy check`.
#[derive(Debug, Args)]
pub struct PolicyCheckArgs {
    /// The policy file.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    #[command(flatten)]
    pub bridge: BridgeArg,
    /// The ledger the main job is given (--ledger) when the policy has no `[ledger] path`:
    /// approvals and budgets need one, and no grant may cover its folder.
    #[arg(long, value_name = "PATH", env = LEDGER_ENV)]
    pub ledger: Option<PathBuf>,
    /// Exit 65 when there is any warning.
    #[arg(long)]
    pub strict: bool,
}

/// Arguments of `policy explain`: the main job's options that decide a call.
#[derive(Debug, Args)]
pub struct PolicyExplainArgs {
    /// The policy file.
    #[arg(long, value_name = "FILE", env = POLICY_ENV, hide_env_values = true)]
    pub policy: PathBuf,
    #[command(flatten)]
    pub bridge: BridgeArg,
    /// The request envelope file; absent or `-` reads stdin.
    #[arg(value_name = "REQUEST")]
    pub request: Option<PathBuf>,
    /// As the main job's --tool-map.
    #[arg(long, value_name = "JSON|@FILE|provider-safe")]
    pub tool_map: Option<String>,
    /// As the main job's --ledger: read (never written) for the budgets.
    #[arg(long, value_name = "PATH", env = LEDGER_ENV)]
    pub ledger: Option<PathBuf>,
    /// As the main job's --session.
    #[arg(long, value_name = "ID", env = SESSION_ENV)]
    pub session: Option<String>,
    /// As the main job's --pass-env.
    #[arg(long, value_name = "NAME")]
    pub pass_env: Vec<String>,
    /// As the main job's --secret-env.
    #[arg(long, value_name = "NAME")]
    pub secret_env: Vec<String>,
    /// Print one JSON object instead of the text.
    #[arg(long)]
    pub json: bool,
}

impl PolicyExplainArgs {
    /// The main job's command line these options stand for (the request and the bridge as
    /// given, every other option at its default): explained by the main job's own admission.
    pub fn dispatch_args(&self) -> DispatchArgs {
        let mut args = DispatchArgs::with_bridge(String::new());
        args.bridge = self.bridge.clone();
        args.request.clone_from(&self.request);
        args.tool_map.clone_from(&self.tool_map);
        args.policy = Some(self.policy.clone());
        args.ledger.ledger.clone_from(&self.ledger);
        args.ledger.session.clone_from(&self.session);
        args.run.pass_env.clone_from(&self.pass_env);
        args.run.secret_env.clone_from(&self.secret_env);
        args
    }
}
