//! The vocabulary of host delegation (SPEC §8): statuses, lifecycle events, the upstream
//! `wp_codebox_host_delegation_*` failure codes with their status, retryability and exit
//! status, and the upstream issue codes of `check-request` / `check-result`.
//!
//! This file is the single source of truth for these tables: docs/delegation.md, the man
//! pages (through [`after_help`]) and the pinning test in `tests/cli/delegation.rs` all follow
//! it. Changing a row is a breaking change. It holds no logic beyond lookups.

use crate::error::{exit, wire_table};

wire_table! {
    /// The four statuses of a `wp-codebox/host-delegation-result/v1` envelope, in the
    /// contract's order. A vocabulary of its own, not the parent-tool
    /// [`Status`](ptd_wire::error::Status): a delegation envelope can be neither `denied` nor
    /// `succeeded`, and the types keep it so.
    pub enum DelegationStatus {
        /// The host took the work on; it finishes later (counts as success).
        Accepted = "accepted",
        /// The host did the work.
        Completed = "completed",
        /// The work failed, or its answer could not be trusted.
        Failed = "failed",
        /// No host adapter could take the work.
        Unavailable = "unavailable",
    }
}

impl DelegationStatus {
    /// `success` of an envelope with this status: `accepted` and `completed` (upstream).
    pub fn is_success(self) -> bool {
        matches!(
            self,
            DelegationStatus::Accepted | DelegationStatus::Completed
        )
    }

    /// The exit status of `delegation run` for an envelope with this status, when no failure
    /// code of the dispatcher's decides it.
    pub fn exit_code(self) -> u8 {
        match self {
            DelegationStatus::Accepted | DelegationStatus::Completed => exit::SUCCESS,
            DelegationStatus::Failed => exit::FAILED,
            DelegationStatus::Unavailable => exit::UNAVAILABLE,
        }
    }

    /// The event that ends a run with this status.
    pub fn final_event(self) -> Event {
        match self {
            DelegationStatus::Accepted => Event::Accepted,
            DelegationStatus::Completed => Event::Completed,
            DelegationStatus::Failed => Event::Failed,
            DelegationStatus::Unavailable => Event::Unavailable,
        }
    }
}

wire_table! {
    /// The lifecycle events of a `wp-codebox/host-delegation-event/v1`, in the contract's
    /// order.
    pub enum Event {
        Requested = "host-delegation.requested",
        Unavailable = "host-delegation.unavailable",
        Accepted = "host-delegation.accepted",
        Completed = "host-delegation.completed",
        Failed = "host-delegation.failed",
    }
}

wire_table! {
    /// A failure of `delegation run` that the dispatcher detected (the adapter's own failures
    /// keep their own codes), in docs/delegation.md's order: its spelling (every one is
    /// `wp_codebox_host_delegation_<suffix>`), the status of the envelope, whether the same
    /// request may succeed when sent again, and the exit status of `delegation run`.
    pub enum Code(status: DelegationStatus, exit) {
        RequestInvalid = ("wp_codebox_host_delegation_request_invalid", Failed, false, exit::DATA_INVALID),
        SourceDigestInvalid = ("wp_codebox_host_delegation_source_digest_invalid", Failed, false, exit::DATA_INVALID),
        Unavailable = ("wp_codebox_host_delegation_unavailable", Unavailable, false, exit::UNAVAILABLE),
        ProviderResultInvalid = ("wp_codebox_host_delegation_provider_result_invalid", Failed, false, exit::FAILED),
        ProviderResultSchemaInvalid = ("wp_codebox_host_delegation_provider_result_schema_invalid", Failed, false, exit::FAILED),
        ProviderStatusInvalid = ("wp_codebox_host_delegation_provider_status_invalid", Failed, false, exit::FAILED),
        RequestIdMismatch = ("wp_codebox_host_delegation_request_id_mismatch", Failed, false, exit::FAILED),
        ScopeMismatch = ("wp_codebox_host_delegation_scope_mismatch", Failed, false, exit::FAILED),
        SourceDigestMismatch = ("wp_codebox_host_delegation_source_digest_mismatch", Failed, false, exit::FAILED),
        Timeout = ("wp_codebox_host_delegation_timeout", Failed, true, exit::TIMEOUT),
        Interrupted = ("wp_codebox_host_delegation_interrupted", Failed, true, exit::FAILED),
    }
}

/// What a validation issue is about. Each kind has its upstream issue code, and decides the
/// failure code of `delegation run` when it is the most important issue found (the order of
/// the variants: the first kind present wins, as upstream checks them in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IssueKind {
    /// `schema` names another envelope.
    SchemaInvalid,
    /// The answer's status is missing, not one of the four, or contradicts `success`.
    StatusInvalid,
    /// The answer is not a JSON object, or a member has the wrong shape.
    ResultInvalid,
    /// The request breaks a rule other than its digest's.
    RequestInvalid,
    /// The answer is for another request.
    RequestIdMismatch,
    /// The answer is for another sandbox session.
    ScopeMismatch,
    /// The request's `source_digest` is not a SHA-256.
    SourceDigestInvalid,
    /// The answer was computed from another source.
    SourceDigestMismatch,
}

impl IssueKind {
    /// The upstream issue code.
    pub fn issue_code(self) -> &'static str {
        match self {
            IssueKind::SchemaInvalid => "schema-invalid",
            IssueKind::StatusInvalid | IssueKind::ResultInvalid => "result-invalid",
            IssueKind::RequestInvalid | IssueKind::SourceDigestInvalid => "request-invalid",
            IssueKind::RequestIdMismatch => "request-id-mismatch",
            IssueKind::ScopeMismatch => "scope-mismatch",
            IssueKind::SourceDigestMismatch => "source-digest-mismatch",
        }
    }

    /// The failure code when this is the most important issue of a request.
    pub fn request_code(self) -> Code {
        match self {
            IssueKind::SourceDigestInvalid => Code::SourceDigestInvalid,
            _ => Code::RequestInvalid,
        }
    }

    /// The failure code when this is the most important issue of an adapter's answer.
    pub fn answer_code(self) -> Code {
        match self {
            IssueKind::SchemaInvalid => Code::ProviderResultSchemaInvalid,
            IssueKind::StatusInvalid => Code::ProviderStatusInvalid,
            IssueKind::RequestIdMismatch => Code::RequestIdMismatch,
            IssueKind::ScopeMismatch => Code::ScopeMismatch,
            IssueKind::SourceDigestMismatch => Code::SourceDigestMismatch,
            IssueKind::ResultInvalid
            | IssueKind::RequestInvalid
            | IssueKind::SourceDigestInvalid => Code::ProviderResultInvalid,
        }
    }
}

/// The upstream issue codes, for documentation.
pub const ISSUE_CODES: [&str; 6] = [
    "schema-invalid",
    "request-invalid",
    "result-invalid",
    "request-id-mismatch",
    "scope-mismatch",
    "source-digest-mismatch",
];

/// The exit statuses of `delegation run`, one line each (help text and man page).
pub(crate) const RUN_EXIT_STATUSES: [(u8, &str); 7] = [
    (exit::SUCCESS, "accepted or completed"),
    (exit::FAILED, "failed, untrusted answer, or interrupted"),
    (exit::USAGE, "usage error (bad flags); no envelope"),
    (exit::DATA_INVALID, "invalid request (nothing ran)"),
    (
        exit::UNAVAILABLE,
        "unavailable (adapter missing, or said so)",
    ),
    (
        exit::IO_ERROR,
        "stdout could not be written: the envelope is lost",
    ),
    (exit::TIMEOUT, "the adapter timed out (failed, retryable)"),
];

/// The `after_help` of `delegation run`: exit statuses and failure codes, from the tables.
pub fn after_help() -> String {
    let mut s = String::from(
        "The adapter gets the request on stdin (compact JSON and a newline) and must print \
         one JSON object on stdout: its answer, with a status (accepted, completed, failed, \
         unavailable); without one, success: false or (with no success) an error means \
         failed, anything else completed.\n\nExit status:\n",
    );
    for (code, meaning) in RUN_EXIT_STATUSES {
        s.push_str(&format!("  {code:>3}  {meaning}\n"));
    }
    s.push_str("\nFailure codes (status, retryable, exit):\n");
    for code in Code::ALL {
        s.push_str(&format!(
            "  {}\n      {}, {}, {}\n",
            code.as_str(),
            code.status(),
            code.retryable(),
            code.exit_code()
        ));
    }
    s.pop();
    s
}

/// The `after_help` of `check-request` and `check-result`.
pub fn check_after_help() -> String {
    format!(
        "Prints {{\"valid\": true|false, \"issues\": [{{code, path, message}}]}} with path a JSON \
         Pointer. Issue codes: {}.\n\nExit status: 0 valid, 65 invalid (or unreadable), 2 usage \
         error.",
        ISSUE_CODES.join(", ")
    )
}
