//! The vocabulary of host delegation (SPEC §8): statuses, lifecycle events, the upstream
//! `wp_codebox_host_delegation_*` failure codes with their status, retryability and exit
//! status, and the upstream issue codes of `check-request` / `check-result`.
//!
//! This file is the single source of truth for these tables: the README section, the man
//! pages (through [`after_help`]) and the pinning test in `tests/cli/delegation.rs` all follow
//! it. Changing a row is a breaking change. It holds no logic beyond lookups.

use crate::error::exit;
use std::fmt;

/// The four statuses of a `wp-codebox/host-delegation-result/v1` envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// The host took the work on; it finishes later (counts as success).
    Accepted,
    /// The host did the work.
    Completed,
    /// The work failed, or its answer could not be trusted.
    Failed,
    /// No host adapter could take the work.
    Unavailable,
}

impl Status {
    /// Every status, in the contract's order.
    pub const ALL: [Status; 4] = [
        Status::Accepted,
        Status::Completed,
        Status::Failed,
        Status::Unavailable,
    ];

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Accepted => "accepted",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Unavailable => "unavailable",
        }
    }

    /// Parse the wire spelling (exactly; no trimming, no case folding).
    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|status| status.as_str() == s)
    }

    /// `success` of an envelope with this status: `accepted` and `completed` (upstream).
    pub fn is_success(self) -> bool {
        matches!(self, Status::Accepted | Status::Completed)
    }

    /// The exit status of `delegation run` for an envelope with this status, when no failure
    /// code of the dispatcher's decides it.
    pub fn exit_code(self) -> u8 {
        match self {
            Status::Accepted | Status::Completed => exit::SUCCESS,
            Status::Failed => exit::FAILED,
            Status::Unavailable => exit::UNAVAILABLE,
        }
    }

    /// The event that ends a run with this status.
    pub fn final_event(self) -> Event {
        match self {
            Status::Accepted => Event::Accepted,
            Status::Completed => Event::Completed,
            Status::Failed => Event::Failed,
            Status::Unavailable => Event::Unavailable,
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The lifecycle events of a `wp-codebox/host-delegation-event/v1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    Requested,
    Unavailable,
    Accepted,
    Completed,
    Failed,
}

impl Event {
    /// Every event, in the contract's order.
    pub const ALL: [Event; 5] = [
        Event::Requested,
        Event::Unavailable,
        Event::Accepted,
        Event::Completed,
        Event::Failed,
    ];

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Event::Requested => "host-delegation.requested",
            Event::Unavailable => "host-delegation.unavailable",
            Event::Accepted => "host-delegation.accepted",
            Event::Completed => "host-delegation.completed",
            Event::Failed => "host-delegation.failed",
        }
    }
}

/// A failure of `delegation run` that the dispatcher detected (the adapter's own failures keep
/// their own codes). Every one is spelled `wp_codebox_host_delegation_<suffix>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    RequestInvalid,
    SourceDigestInvalid,
    Unavailable,
    ProviderResultInvalid,
    ProviderResultSchemaInvalid,
    ProviderStatusInvalid,
    RequestIdMismatch,
    ScopeMismatch,
    SourceDigestMismatch,
    Timeout,
    Interrupted,
}

impl Code {
    /// Every code, in the README's order.
    pub const ALL: [Code; 11] = [
        Code::RequestInvalid,
        Code::SourceDigestInvalid,
        Code::Unavailable,
        Code::ProviderResultInvalid,
        Code::ProviderResultSchemaInvalid,
        Code::ProviderStatusInvalid,
        Code::RequestIdMismatch,
        Code::ScopeMismatch,
        Code::SourceDigestMismatch,
        Code::Timeout,
        Code::Interrupted,
    ];

    /// The stable spelling.
    pub fn as_str(self) -> &'static str {
        self.row().0
    }

    /// The status of an envelope failing with this code.
    pub fn status(self) -> Status {
        self.row().1
    }

    /// Whether the same request may succeed when sent again.
    pub fn retryable(self) -> bool {
        self.row().2
    }

    /// The exit status of `delegation run`.
    pub fn exit_code(self) -> u8 {
        self.row().3
    }

    /// One row of the table. Exhaustive on purpose: a new code must get a row.
    fn row(self) -> (&'static str, Status, bool, u8) {
        use Code::*;
        use Status::{Failed as F, Unavailable as U};
        match self {
            RequestInvalid => (
                "wp_codebox_host_delegation_request_invalid",
                F,
                false,
                exit::DATA_INVALID,
            ),
            SourceDigestInvalid => (
                "wp_codebox_host_delegation_source_digest_invalid",
                F,
                false,
                exit::DATA_INVALID,
            ),
            Unavailable => (
                "wp_codebox_host_delegation_unavailable",
                U,
                false,
                exit::UNAVAILABLE,
            ),
            ProviderResultInvalid => (
                "wp_codebox_host_delegation_provider_result_invalid",
                F,
                false,
                exit::FAILED,
            ),
            ProviderResultSchemaInvalid => (
                "wp_codebox_host_delegation_provider_result_schema_invalid",
                F,
                false,
                exit::FAILED,
            ),
            ProviderStatusInvalid => (
                "wp_codebox_host_delegation_provider_status_invalid",
                F,
                false,
                exit::FAILED,
            ),
            RequestIdMismatch => (
                "wp_codebox_host_delegation_request_id_mismatch",
                F,
                false,
                exit::FAILED,
            ),
            ScopeMismatch => (
                "wp_codebox_host_delegation_scope_mismatch",
                F,
                false,
                exit::FAILED,
            ),
            SourceDigestMismatch => (
                "wp_codebox_host_delegation_source_digest_mismatch",
                F,
                false,
                exit::FAILED,
            ),
            Timeout => ("wp_codebox_host_delegation_timeout", F, true, exit::TIMEOUT),
            Interrupted => (
                "wp_codebox_host_delegation_interrupted",
                F,
                true,
                exit::FAILED,
            ),
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
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
pub const RUN_EXIT_STATUSES: [(u8, &str); 7] = [
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
