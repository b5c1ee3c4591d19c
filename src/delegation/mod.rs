//! Host delegation (SPEC §8; the contract's "Host Delegation Validation"): a sandbox asks the
//! host for generic work with a `wp-codebox/host-delegation-request/v1`; a product host adapter
//! does it; Codebox validates the envelope before and after the adapter runs and reports a
//! `wp-codebox/host-delegation-result/v1`.
//!
//! - `checks` — the request and answer rules, collecting every issue (upstream issue codes);
//! - `codes` — statuses, events, the `wp_codebox_host_delegation_*` table, exit statuses;
//! - `envelopes` — the printed envelope and its events, always redacted;
//! - `run` — `delegation run` on the main job's process engine;
//! - `schema` — the JSON Schemas of the three envelopes.
//!
//! This file holds the two `check-*` subcommands, which read, check and print: they never
//! start a process. Inputs are read bounded and strictly (`json`); a file that cannot
//! be read or parsed is an issue in the report, never a panic.

pub mod checks;
pub use ptd_wire::error::delegation as codes;
pub mod envelopes;
pub mod run;
pub mod schema;

pub use schema::{schema, Kind as SchemaKind};

use crate::cli::{DelegationCheckRequestArgs, DelegationCheckResultArgs, DelegationCommand};
use checks::{check_answer, check_request, Findings, Scope};
use codes::IssueKind;
use ptd_wire::error::exit;
use ptd_wire::json;
use ptd_wire::redact::Redactor;
use ptd_wire::validate::{Issue, Report};
use std::path::Path;

/// `wp-codebox/host-delegation-request/v1`.
pub const REQUEST_SCHEMA: &str = "wp-codebox/host-delegation-request/v1";
/// `wp-codebox/host-delegation-result/v1`.
pub const RESULT_SCHEMA: &str = "wp-codebox/host-delegation-result/v1";
/// `wp-codebox/host-delegation-event/v1`.
pub(crate) const EVENT_SCHEMA: &str = "wp-codebox/host-delegation-event/v1";

/// Run a `delegation` subcommand; returns the exit status. `run` makes the process a child
/// subreaper and takes over SIGINT/SIGTERM/SIGHUP first, as the main job does.
pub fn main(command: &DelegationCommand) -> u8 {
    match command {
        DelegationCommand::CheckRequest(args) => check_request_command(args),
        DelegationCommand::CheckResult(args) => check_result_command(args),
        DelegationCommand::Run(args) => {
            // Usage errors first (exit 2, no envelope): a confinement option that does not
            // parse or names no existing path, checked before anything is read or run.
            let host = ptd_sys::hostenv::HostEnv::process();
            let confine = match crate::dispatch::confine_options(&args.run.confine, &host, None) {
                Ok(confine) => confine,
                Err(message) => {
                    stderr_line!("error[usage]: {message}");
                    return exit::USAGE;
                }
            };
            ptd_sys::exec::become_subreaper();
            let interrupts = ptd_sys::interrupt::Interrupts::install();
            run::run(args, &confine, &interrupts)
        }
    }
}

/// `delegation check-request [FILE]`.
pub(crate) fn check_request_command(args: &DelegationCheckRequestArgs) -> u8 {
    let findings = match read(
        args.file.as_deref(),
        args.max_bytes,
        IssueKind::RequestInvalid,
    ) {
        Err(findings) => findings,
        Ok(bytes) => match json::check_object(&bytes, max(args.max_bytes)) {
            Err(issue) => reader_findings(&issue, IssueKind::RequestInvalid),
            Ok(text) => check_request(text).1,
        },
    };
    print_report(findings.into_issues())
}

/// `delegation check-result --request FILE [RESULT]`.
pub(crate) fn check_result_command(args: &DelegationCheckResultArgs) -> u8 {
    let stdin = |p: Option<&Path>| p.is_none_or(|p| p.as_os_str() == "-");
    if stdin(Some(&args.request)) && stdin(args.result.as_deref()) {
        stderr_line!("error[usage]: --request and RESULT cannot both read stdin; give one a file");
        return exit::USAGE;
    }
    let mut findings = Findings::default();
    let scope = match read(
        Some(&args.request),
        args.max_bytes,
        IssueKind::RequestInvalid,
    ) {
        Err(f) => {
            findings.absorb(f, "/request");
            Scope::default()
        }
        Ok(bytes) => match json::check_object(&bytes, max(args.max_bytes)) {
            Err(issue) => {
                findings.absorb(
                    reader_findings(&issue, IssueKind::RequestInvalid),
                    "/request",
                );
                Scope::default()
            }
            Ok(text) => {
                let (scope, f) = check_request(text);
                findings.absorb(f, "/request");
                scope
            }
        },
    };
    match read(
        args.result.as_deref(),
        args.max_bytes,
        IssueKind::ResultInvalid,
    ) {
        Err(f) => findings.absorb(f, ""),
        Ok(bytes) => match json::check_object(&bytes, max(args.max_bytes)) {
            Err(issue) => findings.absorb(reader_findings(&issue, IssueKind::ResultInvalid), ""),
            Ok(text) => {
                if let Err(f) = check_answer(text, &scope) {
                    findings.absorb(f, "");
                }
            }
        },
    }
    print_report(findings.into_issues())
}

fn max(bytes: u64) -> usize {
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

/// A file (or stdin for none / `-`), at most `max_bytes + 1` bytes.
fn read(path: Option<&Path>, max_bytes: u64, kind: IssueKind) -> Result<Vec<u8>, Findings> {
    ptd_wire::envelope::read_input(path, max_bytes).map_err(|err| {
        let mut f = Findings::default();
        f.push(
            kind,
            "",
            format!("the file could not be read: {}", err.kind()),
        );
        f
    })
}

fn reader_findings(issue: &json::JsonIssue, kind: IssueKind) -> Findings {
    let mut f = Findings::default();
    f.push(kind, issue.pointer(), issue.to_string());
    f
}

/// Print `{"valid":…,"issues":[…]}` with host paths and credentials redacted from messages;
/// exit 0 when valid, 65 otherwise, 74 when stdout could not be written.
fn print_report(mut issues: Vec<Issue>) -> u8 {
    let mut redactor = Redactor::new();
    if let Ok(cwd) = std::env::current_dir() {
        redactor.add_host_path(&cwd.to_string_lossy());
    }
    for name in ["HOME", "TMPDIR"] {
        if let Some(value) = std::env::var_os(name) {
            redactor.add_host_path(&value.to_string_lossy());
        }
    }
    redactor.add_host_path(&std::env::temp_dir().to_string_lossy());
    for issue in &mut issues {
        issue.message = redactor.redact_str(&issue.message);
        issue.path = redactor.redact_str(&issue.path);
    }
    let report = Report::from_issues(issues);
    let status = if report.valid {
        exit::SUCCESS
    } else {
        exit::DATA_INVALID
    };
    ptd_wire::stdout::print(&crate::commands::json_line(&report), "the report", status)
}
