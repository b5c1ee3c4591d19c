//! The arguments of `delegation` (SPEC §8): what `--help` and the man pages say of them. Like
//! the rest of `cli`, only descriptions: nothing is read here.

use super::RunArgs;
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// The `delegation` subcommands (SPEC §8).
#[derive(Debug, Subcommand)]
pub enum DelegationCommand {
    /// Check a wp-codebox/host-delegation-request/v1 and print {"valid":…,"issues":[…]}.
    ///
    /// Rules: a non-empty (trimmed) goal or task; target, context, execution, orchestrator and
    /// metadata objects when present; expected_artifacts an array when present; source_digest
    /// 64 hex characters (a string, or an object whose value, sha256 and hash members hold it);
    /// schema, when present, the request id; request_id a non-empty string of at most 256
    /// bytes; sandbox_session_id and session_id strings that agree.
    #[command(after_long_help = ptd_wire::error::delegation::check_after_help())]
    CheckRequest(DelegationCheckRequestArgs),
    /// Check a host adapter's answer (or a wp-codebox/host-delegation-result/v1) against its
    /// request and print {"valid":…,"issues":[…]}.
    ///
    /// Rules: a status of accepted, completed, failed or unavailable, agreeing with success when
    /// both are given; without a status, as upstream defaults it: success: false or (with no
    /// success) an error means failed, anything else completed; result an object or null;
    /// schema, when present, the result id; provider a non-empty string; error an object with a
    /// code and a message; request_id, sandbox_session_id / session_id (also inside result) and
    /// source_digest (also inside result) equal to the request's when the request has them.
    /// Issues about the request file have paths under /request.
    #[command(after_long_help = ptd_wire::error::delegation::check_after_help())]
    CheckResult(DelegationCheckResultArgs),
    /// Check a request, run a product host adapter (no shell) with it on stdin, check the
    /// answer it prints, and print one wp-codebox/host-delegation-result/v1 envelope.
    ///
    /// The adapter runs like the main job's: its own process group, an environment cleared and
    /// rebuilt from PATH, HOME, LANG, LC_ALL, TZ, TMPDIR, the --pass-env and --secret-env
    /// variables and WP_CODEBOX_HOST_DELEGATION_REQUEST_ID, _TIMEOUT_MS, _REQUEST_SCHEMA,
    /// _RESULT_SCHEMA; SIGTERM at the deadline, SIGKILL after the grace; no process left behind.
    /// A request without request_id gets a generated one (hd-<unix ms>-<pid>). The
    /// confinement options confine the adapter as the main job's: a host that cannot confine
    /// it as asked gives wp_codebox_host_delegation_unavailable with error.data.missing (the
    /// adapter is not started), a limit it reached gives
    /// wp_codebox_host_delegation_provider_result_invalid with error.data.limit.
    /// Once the adapter ran, the envelope ends with diagnostics.dispatch.resources
    /// {max_rss_bytes, user_ms, system_ms}: what its whole process tree used (SPEC 13), on a
    /// failure too.
    #[command(after_long_help = ptd_wire::error::delegation::after_help())]
    Run(Box<DelegationRunArgs>),
}

/// Arguments of `delegation check-request`.
#[derive(Debug, Args)]
pub struct DelegationCheckRequestArgs {
    /// The request file; absent or `-` reads stdin.
    pub file: Option<PathBuf>,
    /// Size cap on the file.
    #[arg(long, value_name = "N", default_value_t = 8 * 1024 * 1024)]
    pub max_bytes: u64,
}

/// Arguments of `delegation check-result`.
#[derive(Debug, Args)]
pub struct DelegationCheckResultArgs {
    /// The request the result answers (`-` reads stdin, when RESULT is a file).
    #[arg(long, value_name = "FILE")]
    pub request: PathBuf,
    /// The result file; absent or `-` reads stdin.
    pub result: Option<PathBuf>,
    /// Size cap on each file.
    #[arg(long, value_name = "N", default_value_t = 16 * 1024 * 1024)]
    pub max_bytes: u64,
}

/// Arguments of `delegation run`.
#[derive(Debug, Args)]
#[command(
    mut_arg("max_output_bytes", |arg| arg.help(
        "Cap on the adapter's stdout; past it the adapter is killed \
         (`wp_codebox_host_delegation_provider_result_invalid`)"
    )),
    mut_arg("max_request_bytes", |arg| arg.help(
        "Cap on the request (`wp_codebox_host_delegation_request_invalid`)"
    ))
)]
pub struct DelegationRunArgs {
    /// The request file, as the main job takes it; absent or `-` reads stdin.
    #[arg(value_name = "REQUEST")]
    pub request: Option<PathBuf>,
    /// The same as REQUEST (the older spelling, kept working).
    #[arg(
        long = "request",
        value_name = "FILE",
        conflicts_with = "request",
        hide_short_help = true
    )]
    pub request_option: Option<PathBuf>,
    /// Deadline for the adapter, from spawn to exit (then `wp_codebox_host_delegation_timeout`).
    #[arg(long, value_name = "N", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
    #[command(flatten)]
    pub run: RunArgs,
    /// The host adapter's argv, after `--`, run exactly as given (argv[0] through PATH).
    #[arg(last = true, required = true, num_args = 1.., value_name = "ARGV")]
    pub argv: Vec<String>,
}
