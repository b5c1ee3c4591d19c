//! Why the main job ends without an answer of the adapter's own: one variant per failure,
//! carrying its data, mapped once and exhaustively to the stable code of SPEC §6 (and from
//! there to status, retryable and exit status, `error.rs`).
//!
//! Two renderings: [`DispatchError::message`] goes into the envelope and must never name a
//! host path, a program path or a file; [`DispatchError::human`] goes to stderr and names
//! what failed and where, so a person can fix it.

use ptd_endpoint::{Unconfigured, Unreachable};
use ptd_sys::exec::SpawnError;
use ptd_sys::signal::signal_name;
use ptd_wire::authorize::Denial;
use ptd_wire::envelope::bridge::Mode;
use ptd_wire::envelope::request::Echo;
use ptd_wire::envelope::result::{ErrorBody, ResultEnvelope};
use ptd_wire::error::{exit_code_for, http_status_class, ErrorCode, Status};
use ptd_wire::json::{human_bytes, JsonIssue};
use ptd_wire::transcript::TranscriptError;
use ptd_wire::validate::{summary, Issue};
use serde_json::{json, Value};
use std::path::PathBuf;

/// A failure of the main job, before or instead of an answer.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// The request file or stdin could not be read.
    #[error("the request could not be read")]
    RequestUnreadable {
        /// The file, when the request came from one.
        path: Option<PathBuf>,
        source: std::io::Error,
    },
    /// A signal arrived before an answer.
    #[error("interrupted")]
    Interrupted {
        signal: ptd_sys::signal::Signal,
        /// Whether the adapter had started (the signal was forwarded to it).
        adapter_started: bool,
    },
    /// `--artifact-dir` cannot hold transcripts.
    #[error("the artifact directory cannot be used")]
    ArtifactDir {
        dir: PathBuf,
        source: TranscriptError,
    },
    /// The bridge cannot be read, parsed or validated.
    #[error("the parent-tool bridge is invalid")]
    BridgeInvalid {
        issues: Vec<Issue>,
        /// A human account of what failed (may name the bridge file).
        human: Option<String>,
    },
    /// The request is over `--max-request-bytes`.
    #[error("the request is too large")]
    RequestTooLarge { limit: usize },
    /// The request is not a valid request envelope.
    #[error("the request envelope is invalid")]
    RequestInvalid { issues: Vec<Issue> },
    /// Authorization refused the request; `status` is the bridge's `failure_status`.
    #[error("not authorized")]
    Denied {
        denial: Denial,
        tool: String,
        status: Status,
    },
    /// The bridge's mode is not one this dispatcher serves.
    #[error("dispatch mode unsupported")]
    ModeUnsupported { mode: Mode },
    /// The variable named by `cwd_env` is unset or names no directory.
    #[error("the working directory is unavailable")]
    /// `var`: the bridge's `cwd_env`; `None`: the host policy's `cwd` (SPEC §16).
    CwdUnavailable {
        var: Option<String>,
        value: Option<PathBuf>,
    },
    /// The adapter could not be started.
    #[error("the adapter could not be started")]
    Spawn { program: String, error: SpawnError },
    /// The dispatcher could not prepare the run (the file transport's private folder).
    #[error("the run could not be prepared")]
    Setup(#[source] std::io::Error),
    /// The deadline passed; the adapter was stopped.
    #[error("timeout")]
    Timeout { timeout_ms: u64 },
    /// The answer is over `--max-output-bytes`.
    #[error("the answer is too large")]
    ResultTooLarge { max_bytes: usize, in_file: bool },
    /// A signal the dispatcher did not send ended the adapter.
    #[error("the adapter was killed by a signal")]
    AdapterSignaled { signal: ptd_sys::signal::Signal },
    /// The adapter exited 0 without a valid result envelope.
    #[error("the adapter's answer is not a valid result envelope")]
    ResultInvalid { issues: Vec<Issue> },
    /// The file transport's result path holds something that is not a readable regular file.
    #[error("{0}")]
    ResultFileUnusable(String),
    /// The adapter exited non-zero without a valid failure envelope.
    #[error("the adapter exited with a non-zero status")]
    AdapterExitNonzero {
        code: i32,
        issues: Option<Vec<Issue>>,
    },
    /// A bug, or a state the dispatcher cannot account for.
    #[error("internal error: {0}")]
    Internal(String),
    /// A panic (a bug) was caught in the main job: where, and what it said, for stderr only.
    #[error("internal error: a panic in the main job")]
    Panicked { what: String },
    /// The `host_endpoint` bridge's endpoint cannot be used as the host configured it;
    /// nothing was sent.
    #[error("the endpoint is not configured")]
    EndpointUnconfigured(Unconfigured),
    /// No HTTP exchange with the endpoint could be completed (DNS, connect, TLS, reset).
    #[error("the endpoint could not be reached")]
    EndpointUnreachable { origin: String, cause: Unreachable },
    /// The endpoint answered a non-2xx status without a valid failure envelope.
    #[error("the endpoint answered with an HTTP error status")]
    EndpointHttpStatus {
        status: u16,
        /// Why the body is no valid failure envelope, when it is not one at all.
        issues: Option<Vec<Issue>>,
    },
    /// The endpoint did not answer within the deadline.
    #[error("timeout")]
    EndpointTimeout { timeout_ms: u64 },
    /// A signal arrived while waiting for the endpoint.
    #[error("interrupted")]
    EndpointInterrupted { signal: ptd_sys::signal::Signal },
    /// The endpoint's answer is over `--max-output-bytes`.
    #[error("the answer is too large")]
    EndpointTooLarge { max_bytes: usize },
    /// The ledger cannot be opened, read or written (SPEC §14.3); nothing was started.
    #[error("the ledger is unavailable")]
    LedgerUnavailable(ptd_ledger::LedgerError),
    /// The key was used before by another request (SPEC §14.1).
    #[error("the request id was used before")]
    RequestIdReused,
    /// The request names another sandbox session than the host's `--session` (SPEC §14.4).
    #[error("the request names another session")]
    SessionMismatch,
    /// The host policy (`--policy`, SPEC §16) cannot be loaded or used: nothing runs. Each
    /// problem names the file, line and column (for stderr; the envelope gives only how many).
    #[error("the host policy is invalid")]
    PolicyInvalid { problems: Vec<ptd_policy::Problem> },
    /// The host policy's entry for the tool says `decision = "deny"` (SPEC §16).
    #[error("denied by the host policy")]
    DeniedByPolicy {
        tool: String,
        /// The deciding entry's `match`, or `defaults`.
        entry: String,
        /// The line of its header (`[[tool]]` or `[defaults]`).
        line: Option<usize>,
    },
    /// The host policy asks a person first (SPEC §18), who has not said yes yet: nothing ran;
    /// retry the same request later.
    #[error("a person has not approved the call yet")]
    ApprovalRequired {
        approval_id: String,
        expires_ms: u64,
    },
    /// A person said no to this request (SPEC §18): final.
    #[error("a person denied the call")]
    ApprovalDenied { approval_id: String },
    /// The approval expired before it was used (SPEC §18): final for this request id.
    #[error("the approval expired")]
    ApprovalExpired { approval_id: String },
    /// The key's holder died while running it (SPEC §14.1).
    #[error("the call's outcome is indeterminate")]
    Indeterminate { attempt: u32 },
    /// Another live dispatcher held the key past this call's timeout.
    #[error("timeout")]
    HeldTimeout { timeout_ms: u64 },
    /// Over a budget of SPEC §14.2.
    #[error("a budget is exhausted")]
    BudgetExhausted(ptd_ledger::OverBudget),
    /// Over `--max-concurrent`.
    #[error("too many calls in flight")]
    ConcurrencyLimited(ptd_ledger::OverBudget),
    /// Confinement was asked for and cannot be put in place (SPEC §13 "Fail closed"): the
    /// adapter was not started. `(missing, message)` pairs: the names for
    /// `error.details.missing`, and for stderr what each is (it may name host paths).
    #[error("confinement is unavailable")]
    ConfinementUnavailable { missing: Vec<(String, String)> },
    /// The adapter failed without a valid failure envelope and a limit's own counter shows
    /// the limit was reached (SPEC §13): `cause` is what the failure would have been.
    #[error("a resource limit was reached")]
    ResourceLimitExceeded {
        limit: ptd_sys::confine::Limit,
        cause: Box<DispatchError>,
    },
}

impl From<ptd_sys::confine::Unavailable> for DispatchError {
    fn from(unavailable: ptd_sys::confine::Unavailable) -> DispatchError {
        DispatchError::ConfinementUnavailable {
            missing: unavailable.missing,
        }
    }
}

impl From<ptd_sys::confine::ChildError> for DispatchError {
    fn from(refused: ptd_sys::confine::ChildError) -> DispatchError {
        DispatchError::ConfinementUnavailable {
            missing: vec![(refused.step.missing().to_string(), refused.to_string())],
        }
    }
}

impl DispatchError {
    /// The stable code. Exhaustive on purpose: a new failure must pick its code here.
    pub fn code(&self) -> ErrorCode {
        use DispatchError as E;
        match self {
            E::RequestUnreadable { .. } | E::RequestInvalid { .. } => ErrorCode::RequestInvalid,
            E::Interrupted { .. } => ErrorCode::Interrupted,
            E::ArtifactDir { .. } => ErrorCode::ArtifactDirUnavailable,
            E::BridgeInvalid { .. } => ErrorCode::BridgeInvalid,
            E::RequestTooLarge { .. } => ErrorCode::RequestTooLarge,
            E::Denied { denial, .. } => denial.code(),
            E::ModeUnsupported { .. } => ErrorCode::DispatchModeUnsupported,
            E::CwdUnavailable { .. } => ErrorCode::CwdUnavailable,
            E::Spawn {
                error: SpawnError::NotFound(_),
                ..
            } => ErrorCode::AdapterNotFound,
            E::Spawn { .. } => ErrorCode::AdapterNotExecutable,
            E::Setup(_) | E::Internal(_) | E::Panicked { .. } => ErrorCode::InternalError,
            E::Timeout { .. } => ErrorCode::DispatchTimeout,
            E::ResultTooLarge { .. } => ErrorCode::ResultTooLarge,
            E::AdapterSignaled { .. } => ErrorCode::AdapterSignaled,
            E::ResultInvalid { .. } | E::ResultFileUnusable(_) => ErrorCode::ResultInvalid,
            E::AdapterExitNonzero { .. } => ErrorCode::AdapterExitNonzero,
            E::EndpointUnconfigured(_) => ErrorCode::EndpointUnconfigured,
            E::EndpointUnreachable { .. } => ErrorCode::EndpointUnreachable,
            E::EndpointHttpStatus { .. } => ErrorCode::EndpointHttpStatus,
            E::EndpointTimeout { .. } => ErrorCode::DispatchTimeout,
            E::EndpointInterrupted { .. } => ErrorCode::Interrupted,
            E::EndpointTooLarge { .. } => ErrorCode::ResultTooLarge,
            E::ConfinementUnavailable { .. } => ErrorCode::ConfinementUnavailable,
            E::ResourceLimitExceeded { .. } => ErrorCode::ResourceLimitExceeded,
            E::LedgerUnavailable(_) => ErrorCode::LedgerUnavailable,
            E::RequestIdReused => ErrorCode::RequestIdReused,
            E::SessionMismatch => ErrorCode::SessionMismatch,
            E::PolicyInvalid { .. } => ErrorCode::PolicyInvalid,
            E::DeniedByPolicy { .. } => ErrorCode::ToolDeniedByPolicy,
            E::ApprovalRequired { .. } => ErrorCode::ApprovalRequired,
            E::ApprovalDenied { .. } => ErrorCode::ApprovalDenied,
            E::ApprovalExpired { .. } => ErrorCode::ApprovalExpired,
            E::Indeterminate { .. } => ErrorCode::DispatchIndeterminate,
            E::HeldTimeout { .. } => ErrorCode::DispatchTimeout,
            E::BudgetExhausted(_) => ErrorCode::BudgetExhausted,
            E::ConcurrencyLimited(_) => ErrorCode::ConcurrencyLimited,
        }
    }

    /// The status of the envelope: the code's, except that authorization failures take the
    /// bridge's `failure_status` and an HTTP status its class (SPEC §6).
    pub fn status(&self) -> Status {
        match self {
            DispatchError::Denied { status, .. } => *status,
            DispatchError::EndpointHttpStatus { status, .. } => http_status_class(*status).0,
            other => other.code().status(),
        }
    }

    /// `error.retryable`: the code's, except that an HTTP status has its class's.
    pub fn retryable(&self) -> bool {
        match self {
            DispatchError::EndpointHttpStatus { status, .. } => http_status_class(*status).1,
            // SPEC §19.1: a database that could not be reached, or refused the connection, may
            // answer next time — the one retryable case of `ledger_unavailable`.
            DispatchError::LedgerUnavailable(err) => err.is_unreachable(),
            other => other.code().retryable(),
        }
    }

    /// The exit status of the main job (SPEC §3.1).
    pub fn exit_code(&self) -> u8 {
        exit_code_for(self.status(), Some(self.code()))
    }

    /// The issues behind the failure, when there are any.
    pub fn issues(&self) -> Option<&[Issue]> {
        match self {
            DispatchError::BridgeInvalid { issues, .. }
            | DispatchError::RequestInvalid { issues }
            | DispatchError::ResultInvalid { issues }
            | DispatchError::AdapterExitNonzero {
                issues: Some(issues),
                ..
            }
            | DispatchError::EndpointHttpStatus {
                issues: Some(issues),
                ..
            } => Some(issues),
            _ => None,
        }
    }

    /// One human sentence for `error.message`: no host path, no program path, no file name.
    pub fn message(&self) -> String {
        use DispatchError as E;
        match self {
            E::RequestUnreadable { source, .. } => {
                format!("the request could not be read: {}", source.kind())
            }
            E::Interrupted {
                signal,
                adapter_started,
            } => interrupted(*signal, *adapter_started),
            E::ArtifactDir { source, .. } => {
                format!("the artifact directory cannot be used: {source}")
            }
            E::BridgeInvalid { issues, .. } => {
                with_first_issue("the parent-tool bridge is invalid", issues)
            }
            E::RequestTooLarge { limit } => format!(
                "the request is over the {} limit (--max-request-bytes)",
                human_bytes(*limit)
            ),
            E::RequestInvalid { issues } => {
                with_first_issue("the request envelope is invalid", issues)
            }
            E::Denied { denial, tool, .. } => denial.message(tool),
            E::ModeUnsupported { mode } => format!(
                "dispatch mode {:?} is not supported by this dispatcher",
                mode.as_str()
            ),
            E::CwdUnavailable { var: Some(var), .. } => format!(
                "the working directory named by {var} is not set or is not an existing directory"
            ),
            E::CwdUnavailable { var: None, .. } => {
                "the working directory the host policy names is not an existing directory"
                    .to_string()
            }
            E::Spawn { error, .. } => error.to_string(),
            E::Setup(err) => format!(
                "the private request file could not be created: {}",
                err.kind()
            ),
            E::Timeout { timeout_ms } => {
                format!("the adapter did not finish within {timeout_ms} ms and was stopped")
            }
            E::ResultTooLarge { max_bytes, in_file } => result_too_large(*max_bytes, *in_file),
            E::AdapterSignaled { signal } => {
                format!("the adapter was killed by {}", signal_name(*signal))
            }
            E::ResultInvalid { issues } => with_first_issue(
                "the adapter's answer is not a valid result envelope",
                issues,
            ),
            E::AdapterExitNonzero { code, .. } => {
                format!("the adapter exited with status {code} without a valid failure envelope")
            }
            E::ResultFileUnusable(what) => what.clone(),
            E::Internal(what) => {
                format!("the dispatcher hit an internal error ({what}); please report it")
            }
            E::Panicked { .. } => "the dispatcher hit an internal error (a panic in the main \
                                   job); please report it"
                .to_string(),
            E::EndpointUnconfigured(why) => why.message(),
            E::EndpointUnreachable { origin, cause } => {
                format!("the endpoint {origin} could not be reached: {cause}")
            }
            E::EndpointHttpStatus { status, .. } => endpoint_http_status(*status),
            E::EndpointTimeout { timeout_ms } => {
                format!("the endpoint did not answer within {timeout_ms} ms")
            }
            E::EndpointInterrupted { signal } => format!(
                "the dispatcher received {} while waiting for the endpoint",
                signal_name(*signal)
            ),
            E::EndpointTooLarge { max_bytes } => format!(
                "the endpoint's answer is over the {} limit (--max-output-bytes)",
                human_bytes(*max_bytes)
            ),
            E::ConfinementUnavailable { missing } => confinement_unavailable(missing),
            E::ResourceLimitExceeded { limit, .. } => format!(
                "the adapter reached its {} limit ({}) and failed without an answer",
                limit.as_str(),
                limit.flag()
            ),
            E::LedgerUnavailable(_)
            | E::SessionMismatch
            | E::PolicyInvalid { .. }
            | E::DeniedByPolicy { .. }
            | E::ApprovalRequired { .. }
            | E::ApprovalDenied { .. }
            | E::ApprovalExpired { .. }
            | E::RequestIdReused
            | E::Indeterminate { .. }
            | E::HeldTimeout { .. }
            | E::BudgetExhausted(_)
            | E::ConcurrencyLimited(_) => self.host_rule_message(),
        }
    }

    /// [`DispatchError::message`] of a refusal by one of the host's rules: the ledger's, the
    /// session's, the policy's (SPEC §14, §16).
    fn host_rule_message(&self) -> String {
        use DispatchError as E;
        match self {
            E::LedgerUnavailable(err) => format!("the ledger is unavailable: {err}"),
            E::SessionMismatch => "the request's sandbox_session.sandbox_session_id is not the \
                                   session this dispatcher serves (--session)"
                .to_string(),
            E::PolicyInvalid { problems } => policy_invalid(problems.len()),
            E::DeniedByPolicy { tool, .. } => format!("the host's policy denies the tool {tool}"),
            E::ApprovalRequired {
                approval_id,
                expires_ms,
            } => format!(
                "the host asks a person to approve this call first (approval {approval_id}); \
                 retry the same request once they have, before {}",
                ptd_ledger::flags::format_rfc3339_ms(*expires_ms)
            ),
            E::ApprovalDenied { approval_id } => {
                format!("a person denied this call (approval {approval_id})")
            }
            E::ApprovalExpired { approval_id } => format!(
                "the approval {approval_id} expired before the call ran; a new request_id asks \
                 again"
            ),
            E::RequestIdReused => "this request_id was already used in this sandbox session \
                                   for a different request"
                .to_string(),
            E::Indeterminate { attempt } => indeterminate(*attempt),
            E::HeldTimeout { timeout_ms } => {
                format!("another dispatcher was still running this request after {timeout_ms} ms")
            }
            E::BudgetExhausted(over) => budget_exhausted(over),
            E::ConcurrencyLimited(over) => format!(
                "the sandbox session already has {} calls in flight (at most {})",
                over.used, over.limit
            ),
            // Only the arms above call this.
            other => other.code().as_str().to_string(),
        }
    }

    /// `error.details`, when the failure has machine-readable details.
    pub fn details(&self) -> Option<Value> {
        use DispatchError as E;
        match self {
            E::BridgeInvalid { issues, .. }
            | E::RequestInvalid { issues }
            | E::ResultInvalid { issues } => Some(json!({ "issues": issues })),
            E::RequestTooLarge { limit } => Some(json!({
                "issues": [Issue::from_json(&JsonIssue::TooLarge { limit: *limit })],
                "max_request_bytes": limit,
            })),
            E::Denied { denial, .. } => Some(denial.details()),
            E::Interrupted { signal, .. } => Some(json!({ "signal": signal_name(*signal) })),
            E::AdapterSignaled { signal } => Some(json!({ "signal": signal_name(*signal) })),
            E::ResultTooLarge { max_bytes, .. } => Some(json!({ "max_output_bytes": max_bytes })),
            E::Spawn { error, .. } => error.why().map(|why| {
                let mut details = json!({ "reason": why.reason() });
                if let Some(name) = why.interpreter_name() {
                    details["interpreter"] = json!(name);
                }
                details
            }),
            E::AdapterExitNonzero { code, issues } => {
                let mut details = json!({ "exit_code": code });
                if let Some(issues) = issues {
                    details["issues"] = json!(issues);
                }
                Some(details)
            }
            E::EndpointHttpStatus { status, issues } => {
                let mut details = json!({ "http_status": status });
                if let Some(issues) = issues {
                    details["issues"] = json!(issues);
                }
                Some(details)
            }
            E::EndpointInterrupted { signal } => Some(json!({ "signal": signal_name(*signal) })),
            E::EndpointUnreachable { cause, .. } => Some(json!({ "reason": cause.reason() })),
            E::EndpointTooLarge { max_bytes } => Some(json!({ "max_output_bytes": max_bytes })),
            E::ConfinementUnavailable { missing } => Some(json!({
                "missing": missing.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            })),
            E::ResourceLimitExceeded { limit, cause } => {
                // What the adapter's end was (exit_code, signal), beside the limit.
                let mut details = match cause.details() {
                    Some(Value::Object(map)) => map,
                    _ => serde_json::Map::new(),
                };
                details.remove("issues");
                details.insert("limit".into(), json!(limit.as_str()));
                Some(Value::Object(details))
            }
            E::BudgetExhausted(over) | E::ConcurrencyLimited(over) => Some(json!(over)),
            E::Indeterminate { attempt } => Some(json!({ "attempt": attempt })),
            E::ApprovalRequired {
                approval_id,
                expires_ms,
            } => Some(json!({
                "approval_id": approval_id,
                "expires_at": ptd_ledger::flags::format_rfc3339_ms(*expires_ms),
            })),
            E::ApprovalDenied { approval_id } | E::ApprovalExpired { approval_id } => {
                Some(json!({ "approval_id": approval_id }))
            }
            E::RequestUnreadable { .. }
            | E::ArtifactDir { .. }
            | E::ModeUnsupported { .. }
            | E::CwdUnavailable { .. }
            | E::Setup(_)
            | E::Timeout { .. }
            | E::ResultFileUnusable(_)
            | E::Internal(_)
            | E::Panicked { .. }
            | E::EndpointUnconfigured(_)
            | E::EndpointTimeout { .. }
            | E::LedgerUnavailable(_)
            | E::RequestIdReused
            | E::SessionMismatch
            | E::PolicyInvalid { .. }
            | E::DeniedByPolicy { .. }
            | E::HeldTimeout { .. } => None,
        }
    }

    /// What stderr says: the cause, naming files, programs and variables where that helps.
    pub fn human(&self) -> String {
        use DispatchError as E;
        match self {
            E::RequestUnreadable {
                path: Some(path),
                source,
            } => format!("reading the request file {}: {source}", path.display()),
            E::RequestUnreadable { path: None, source } => {
                format!("reading the request from stdin: {source}")
            }
            E::ArtifactDir { dir, source } => {
                format!("the artifact directory {} cannot be used: {source}", dir.display())
            }
            E::BridgeInvalid {
                human: Some(human), ..
            } => human.clone(),
            E::BridgeInvalid { issues, .. } => {
                format!("the parent-tool bridge is invalid: {}", summary(issues))
            }
            E::RequestInvalid { issues } => summary(issues),
            E::ResultInvalid { issues } => {
                format!("the adapter's answer is not a valid result envelope: {}", summary(issues))
            }
            E::AdapterExitNonzero {
                code,
                issues: Some(issues),
            } => format!(
                "the adapter exited with status {code} without a valid failure envelope: {}",
                summary(issues)
            ),
            E::CwdUnavailable {
                var: Some(var),
                value: None,
            } => format!(
                "the bridge's cwd_env names {var}, which is not set in the dispatcher's environment"
            ),
            E::CwdUnavailable {
                var: Some(var),
                value: Some(dir),
            } => format!(
                "the bridge's cwd_env names {var}={}, which is not an existing directory",
                dir.display()
            ),
            E::CwdUnavailable {
                var: None,
                value,
            } => format!(
                "the host policy's cwd {} is not an existing directory",
                value.as_deref().unwrap_or(std::path::Path::new("")).display()
            ),
            E::Spawn { program, error } => match error {
                SpawnError::NotFound(Some(why)) | SpawnError::NotExecutable(Some(why)) => format!(
                    "the adapter program {program} could not be started: {}",
                    why.describe(false)
                ),
                SpawnError::NotFound(None) if program.contains('/') => format!(
                    "the adapter program {program} was not found (a relative path is resolved against the dispatcher's working directory)"
                ),
                SpawnError::NotFound(None) => format!(
                    "the adapter program {program} was not found in PATH"
                ),
                other => format!("the adapter program {program}: {other}"),
            },
            E::Setup(err) => format!("creating the file transport's private folder: {err}"),
            E::Panicked { what } => {
                format!("the dispatcher hit an internal error: {what}; please report it")
            }
            E::ConfinementUnavailable { missing } => format!(
                "confinement is unavailable, the adapter was not started: {}",
                missing
                    .iter()
                    .map(|(_, message)| message.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            E::ResourceLimitExceeded { cause, .. } => {
                format!("{} ({})", self.message(), cause.human())
            }
            E::PolicyInvalid { problems } => format!(
                "the host policy cannot be used, nothing was run: {}",
                problems_list(problems)
            ),
            E::DeniedByPolicy { tool, entry, line } => format!(
                "the host policy denies {tool}: {} says decision = \"deny\"",
                ptd_policy::entry_name(entry, *line)
            ),
            E::EndpointUnconfigured(why) => why.human(),
            E::EndpointHttpStatus {
                status,
                issues: Some(issues),
            } if !(300..400).contains(status) => format!(
                "the endpoint answered HTTP {status} without a valid failure envelope: {}",
                summary(issues)
            ),
            _ => self.message(),
        }
    }

    /// The dispatcher-made envelope for this failure.
    pub fn envelope(&self, echo: &Echo) -> ResultEnvelope<'static> {
        let mut body = ErrorBody::new(self.code(), self.message(), self.details());
        body.retryable = self.retryable();
        ResultEnvelope::failure(echo.clone(), self.status(), body)
    }
}

/// `error.message` of [`DispatchError::EndpointHttpStatus`]: a redirect is named as one.
fn endpoint_http_status(status: u16) -> String {
    if (300..400).contains(&status) {
        format!("the endpoint answered HTTP {status}, a redirect, which is never followed")
    } else {
        format!("the endpoint answered HTTP {status} without a valid failure envelope")
    }
}

/// `error.message` of [`DispatchError::PolicyInvalid`]: how many problems, never which (the
/// sandbox has no business reading the host's policy).
fn policy_invalid(problems: usize) -> String {
    format!(
        "the host's policy cannot be used ({}), so nothing was run; the host's \
         `parent-tool-dispatch policy check` lists {}",
        count(problems, "problem"),
        if problems == 1 { "it" } else { "them" }
    )
}

/// `N thing` or `N things`.
fn count(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// The problems of a policy as stderr gives them: the first in full, then how many more (each
/// follows on a note line of its own).
fn problems_list(problems: &[ptd_policy::Problem]) -> String {
    match problems {
        [] => "it could not be loaded".to_string(),
        [only] => only.to_string(),
        [first, rest @ ..] => format!("{first} (and {} more, below)", rest.len()),
    }
}

/// `error.message` of [`DispatchError::Indeterminate`].
fn indeterminate(attempt: u32) -> String {
    format!(
        "the dispatcher running attempt {attempt} of this request died: whether the tool's \
         effect happened is unknown; check the real state, then retry under a new request_id"
    )
}

/// `error.message` of [`DispatchError::Interrupted`].
fn interrupted(signal: ptd_sys::signal::Signal, adapter_started: bool) -> String {
    if adapter_started {
        format!(
            "the dispatcher received {} and stopped the adapter",
            signal_name(signal)
        )
    } else {
        format!(
            "the dispatcher received {} before the adapter started",
            signal_name(signal)
        )
    }
}

/// `error.message` of [`DispatchError::ResultTooLarge`].
fn result_too_large(max_bytes: usize, in_file: bool) -> String {
    if in_file {
        format!(
            "the adapter's result file is over the {} limit (--max-output-bytes)",
            human_bytes(max_bytes)
        )
    } else {
        format!(
            "the adapter wrote more than the {} limit to stdout and was stopped (--max-output-bytes)",
            human_bytes(max_bytes)
        )
    }
}

/// `error.message` of [`DispatchError::ConfinementUnavailable`]: the missing parts by name.
fn confinement_unavailable(missing: &[(String, String)]) -> String {
    let names: Vec<&str> = missing.iter().map(|(name, _)| name.as_str()).collect();
    format!(
        "the confinement asked for cannot be put in place on this host (missing: {}); \
         the adapter was not started",
        names.join(", ")
    )
}

/// `error.message` of [`DispatchError::BudgetExhausted`].
fn budget_exhausted(over: &ptd_ledger::OverBudget) -> String {
    match &over.tool {
        Some(tool) => format!(
            "the sandbox session's budget of {} calls of {tool:?} is spent",
            over.limit
        ),
        None if over.budget == ptd_ledger::BudgetKind::AdapterMs => format!(
            "the sandbox session's budget of {} ms of adapter time is spent",
            over.limit
        ),
        None => format!(
            "the sandbox session's budget of {} calls is spent",
            over.limit
        ),
    }
}

/// `what: first issue` — the envelope's message names the first cause (paths in issues are
/// JSON Pointers, never host paths).
fn with_first_issue(what: &str, issues: &[Issue]) -> String {
    match issues.first() {
        Some(_) => format!("{what}: {}", summary(issues)),
        None => what.to_string(),
    }
}
