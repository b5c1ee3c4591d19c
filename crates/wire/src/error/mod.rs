//! The stable error codes of SPEC §6 and the exit statuses of SPEC §3.1.
//!
//! This file is the single source of truth: the tables of docs/guide.md, the man page's EXIT STATUS and
//! ERROR CODES sections, the `--help` exit-status lines and the pinning test in
//! `tests/cli/codes.rs` all come from [`ErrorCode::ALL`] and [`EXIT_STATUSES`].
//! Changing a row here is a breaking change of the public interface.

pub mod delegation;
pub mod endpoint;

/// Declares a table of stable wire names: an enum with one row per variant, written once next
/// to the variant, and generated from the rows `ALL` (row order), `as_str`, `parse` (exact:
/// no trimming, no case folding) and `Display`. Every lookup is an exhaustive `match`, so a
/// new variant without a row does not compile.
///
/// A code table adds two columns, `status` (a variant of the named status enum) and
/// `retryable`, and optionally a third, `exit_code`:
///
/// ```text
/// wire_table! { pub enum Code(status: Status) { NotFound = ("not_found", Failed, false), } }
/// wire_table! { pub enum Code(status: Status, exit) { Bad = ("bad", Failed, false, 65), } }
/// ```
///
/// Every code table of the crate is declared with it: [`ErrorCode`], the delegation codes, the
/// workspace and MCP adapters' codes; and so are the statuses they point to.
#[macro_export]
#[doc(hidden)]
macro_rules! wire_table {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $wire:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every value, in the table's order.
            pub const ALL: [$name; [$(stringify!($variant)),+].len()] = [$($name::$variant),+];

            /// The stable wire spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $wire, )+
                }
            }

            /// Parse the wire spelling (exactly: no trimming, no case folding).
            pub fn parse(s: &str) -> Option<$name> {
                $name::ALL.into_iter().find(|value| value.as_str() == s)
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident(status: $status:ident) {
            $( $(#[$vmeta:meta])* $variant:ident = ($wire:literal, $st:ident, $retry:literal), )+
        }
    ) => {
        $crate::error::wire_table! {
            $(#[$meta])*
            $vis enum $name {
                $( $(#[$vmeta])* $variant = $wire, )+
            }
        }

        impl $name {
            /// The status of an envelope failing with this code.
            pub fn status(self) -> $status {
                match self {
                    $( $name::$variant => $status::$st, )+
                }
            }

            /// Whether the same call may succeed when retried unchanged.
            pub fn retryable(self) -> bool {
                match self {
                    $( $name::$variant => $retry, )+
                }
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident(status: $status:ident, exit) {
            $( $(#[$vmeta:meta])* $variant:ident = ($wire:literal, $st:ident, $retry:literal, $exit:expr), )+
        }
    ) => {
        $crate::error::wire_table! {
            $(#[$meta])*
            $vis enum $name(status: $status) {
                $( $(#[$vmeta])* $variant = ($wire, $st, $retry), )+
            }
        }

        impl $name {
            /// The exit status for this code (with its status from the table).
            pub fn exit_code(self) -> u8 {
                match self {
                    $( $name::$variant => $exit, )+
                }
            }
        }
    };
}
pub use wire_table;

wire_table! {
    /// The five statuses of a `wp-codebox/parent-tool-result/v1` envelope, in the order the
    /// contract lists them.
    pub enum Status {
        Succeeded = "succeeded",
        Denied = "denied",
        Unavailable = "unavailable",
        Timeout = "timeout",
        Failed = "failed",
    }
}

impl Status {
    /// The exit status that summarises an envelope with this status when no more specific
    /// error code decides it (SPEC §3.1: the exit status always follows the printed status).
    pub fn exit_code(self) -> u8 {
        match self {
            Status::Succeeded => exit::SUCCESS,
            Status::Denied => exit::DENIED,
            Status::Unavailable => exit::UNAVAILABLE,
            Status::Timeout => exit::TIMEOUT,
            Status::Failed => exit::FAILED,
        }
    }
}

/// Exit statuses of the main job (SPEC §3.1).
pub mod exit {
    /// `succeeded`.
    pub const SUCCESS: u8 = 0;
    /// `failed`, reported by or caused by the adapter.
    pub const FAILED: u8 = 1;
    /// Usage error: bad flags, no bridge at all. No envelope; the message goes to stderr.
    pub const USAGE: u8 = 2;
    /// The request envelope (or a file given to `validate`) is invalid.
    pub const DATA_INVALID: u8 = 65;
    /// `unavailable`: bridge invalid or unsupported, adapter missing, cwd missing.
    pub const UNAVAILABLE: u8 = 69;
    /// An internal error (a bug). The envelope is still written.
    pub const INTERNAL: u8 = 70;
    /// stdout could not be written (full, closed, a broken pipe): what was to be printed is
    /// lost, whatever its status; `error[stdout]: …` on stderr says so (`EX_IOERR`).
    pub const IO_ERROR: u8 = 74;
    /// `denied` / `approval_required` (SPEC §18): a person has not said yes yet; retry the
    /// same request later (`EX_TEMPFAIL`).
    pub const TEMPFAIL: u8 = 75;
    /// `denied`.
    pub(crate) const DENIED: u8 = 77;
    /// `timeout` (the `timeout(1)` convention).
    pub(crate) const TIMEOUT: u8 = 124;
}

/// One exit status of the main job and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatusRow {
    /// The status.
    pub code: u8,
    /// A few words, for the one-line summary in `--help`.
    pub label: &'static str,
    /// The full meaning, with `code spans` in backticks (Markdown; strip them for plain text).
    pub meaning: &'static str,
}

impl ExitStatusRow {
    /// [`meaning`](Self::meaning) without the backticks.
    pub fn meaning_plain(&self) -> String {
        self.meaning.replace('`', "")
    }
}

/// The exit statuses of the main job, in order: the one table that `--help`, the man page's
/// EXIT STATUS section and docs/guide.md print (a test pins the guide's copy).
pub const EXIT_STATUSES: [ExitStatusRow; 10] = [
    ExitStatusRow {
        code: exit::SUCCESS,
        label: "succeeded",
        meaning: "`succeeded`",
    },
    ExitStatusRow {
        code: exit::FAILED,
        label: "failed",
        meaning: "`failed`, reported by or caused by the adapter (including `interrupted`)",
    },
    ExitStatusRow {
        code: exit::USAGE,
        label: "usage error",
        meaning: "usage error (bad flags, no bridge, a mistyped subcommand); no envelope, message on stderr",
    },
    ExitStatusRow {
        code: exit::DATA_INVALID,
        label: "invalid request",
        meaning: "the request envelope is invalid (`request_invalid`, `request_too_large`)",
    },
    ExitStatusRow {
        code: exit::UNAVAILABLE,
        label: "unavailable",
        meaning: "`unavailable` (bridge invalid or unsupported, adapter missing, cwd missing, artifact dir unusable; a denial when the bridge's `failure_status` is `unavailable`)",
    },
    ExitStatusRow {
        code: exit::INTERNAL,
        label: "internal error",
        meaning: "internal error (a bug); the envelope is still written",
    },
    ExitStatusRow {
        code: exit::IO_ERROR,
        label: "stdout not writable",
        meaning: "stdout could not be written (full, closed, a broken pipe): the envelope is lost, whatever its status; `error[stdout]` on stderr (every subcommand that prints exits 74 the same way)",
    },
    ExitStatusRow {
        code: exit::TEMPFAIL,
        label: "approval pending",
        meaning: "`denied` / `approval_required`: the host policy asks a person first, who has not said yes yet; retry the same request later (SPEC 18)",
    },
    ExitStatusRow {
        code: exit::DENIED,
        label: "denied",
        meaning: "`denied`",
    },
    ExitStatusRow {
        code: exit::TIMEOUT,
        label: "timeout (timeout(1) itself also exits 124: read the envelope)",
        meaning: "`timeout`; `timeout(1)` exits 124 too when it kills a command, but prints no envelope",
    },
];

wire_table! {
    /// A stable error code of SPEC §6, produced by the dispatcher itself, in the order of the
    /// SPEC §6 table: its spelling, the status an envelope with it carries, whether retrying
    /// the same call may succeed, and the exit status of the main job (with that status).
    ///
    /// For the two authorization codes the status is the default; the bridge's
    /// `authorization.failure_status` may turn it into `unavailable`. For
    /// `endpoint_http_status` the row is that of a retryable HTTP status (408, 429, 5xx);
    /// [`http_status_class`] gives the row for any other.
    ///
    /// An adapter's own codes pass through as strings and never become an `ErrorCode`.
    pub enum ErrorCode(status: Status, exit) {
        BridgeInvalid = ("bridge_invalid", Unavailable, false, exit::UNAVAILABLE),
        DispatchModeUnsupported = ("dispatch_mode_unsupported", Unavailable, false, exit::UNAVAILABLE),
        RequestInvalid = ("request_invalid", Failed, false, exit::DATA_INVALID),
        RequestTooLarge = ("request_too_large", Failed, false, exit::DATA_INVALID),
        ToolNotAllowed = ("tool_not_allowed", Denied, false, exit::DENIED),
        BridgeRefMismatch = ("bridge_ref_mismatch", Denied, false, exit::DENIED),
        AdapterNotFound = ("adapter_not_found", Unavailable, false, exit::UNAVAILABLE),
        AdapterNotExecutable = ("adapter_not_executable", Unavailable, false, exit::UNAVAILABLE),
        CwdUnavailable = ("cwd_unavailable", Unavailable, false, exit::UNAVAILABLE),
        ArtifactDirUnavailable = ("artifact_dir_unavailable", Unavailable, false, exit::UNAVAILABLE),
        DispatchTimeout = ("dispatch_timeout", Timeout, true, exit::TIMEOUT),
        Interrupted = ("interrupted", Failed, true, exit::FAILED),
        AdapterExitNonzero = ("adapter_exit_nonzero", Failed, false, exit::FAILED),
        AdapterSignaled = ("adapter_signaled", Failed, true, exit::FAILED),
        ResultInvalid = ("result_invalid", Failed, false, exit::FAILED),
        ResultTooLarge = ("result_too_large", Failed, false, exit::FAILED),
        InternalError = ("internal_error", Failed, false, exit::INTERNAL),
        EndpointUnconfigured = ("endpoint_unconfigured", Unavailable, false, exit::UNAVAILABLE),
        EndpointUnreachable = ("endpoint_unreachable", Unavailable, true, exit::UNAVAILABLE),
        // The retryable half of the row; `http_status_class` has the other.
        EndpointHttpStatus = ("endpoint_http_status", Unavailable, true, exit::UNAVAILABLE),
        // Confinement (SPEC §13).
        ConfinementUnavailable = ("confinement_unavailable", Unavailable, false, exit::UNAVAILABLE),
        ResourceLimitExceeded = ("resource_limit_exceeded", Failed, false, exit::FAILED),
        // The ledger (SPEC §14).
        RequestIdReused = ("request_id_reused", Denied, false, exit::DENIED),
        DispatchIndeterminate = ("dispatch_indeterminate", Failed, false, exit::FAILED),
        BudgetExhausted = ("budget_exhausted", Denied, false, exit::DENIED),
        ConcurrencyLimited = ("concurrency_limited", Unavailable, true, exit::UNAVAILABLE),
        LedgerUnavailable = ("ledger_unavailable", Unavailable, false, exit::UNAVAILABLE),
        // The ledger, hardened (SPEC §14.4).
        SessionMismatch = ("session_mismatch", Denied, false, exit::DENIED),
        // The host policy (SPEC §16).
        PolicyInvalid = ("policy_invalid", Unavailable, false, exit::UNAVAILABLE),
        ToolDeniedByPolicy = ("tool_denied_by_policy", Denied, false, exit::DENIED),
        // Approvals (SPEC §18).
        ApprovalRequired = ("approval_required", Denied, true, exit::TEMPFAIL),
        ApprovalDenied = ("approval_denied", Denied, false, exit::DENIED),
        ApprovalExpired = ("approval_expired", Denied, false, exit::DENIED),
    }
}

impl ErrorCode {
    /// The status, retryable and exit columns as docs/guide.md and the man page print them: the
    /// row itself, except where it depends on the HTTP status (`endpoint_http_status`).
    pub fn columns(self) -> [String; 3] {
        match self {
            ErrorCode::EndpointHttpStatus => {
                let (status, _) = http_status_class(400);
                [
                    format!("{} for 408/429/5xx, else {status}", self.status()),
                    format!("{} for 408/429/5xx", self.retryable()),
                    format!("{} / {}", self.exit_code(), status.exit_code()),
                ]
            }
            _ => [
                self.status().to_string(),
                self.retryable().to_string(),
                self.exit_code().to_string(),
            ],
        }
    }
}

/// Status and retryable of an `endpoint_http_status` failure for this HTTP status (SPEC §6):
/// 408, 429 and 5xx say "try again later" — `unavailable`, retryable; any other status (a
/// 3xx that was not followed, a 4xx) will not change on a retry — `failed`, not retryable.
pub fn http_status_class(http_status: u16) -> (Status, bool) {
    match http_status {
        408 | 429 | 500..=599 => (
            ErrorCode::EndpointHttpStatus.status(),
            ErrorCode::EndpointHttpStatus.retryable(),
        ),
        _ => (Status::Failed, false),
    }
}

/// The exit status for a printed envelope: the status decides, except that the dispatcher's own
/// codes with a dedicated exit status (65 for an invalid request, 70 for an internal error) keep
/// it. An adapter's own codes never match a dispatcher code's special exit.
pub fn exit_code_for(status: Status, dispatcher_code: Option<ErrorCode>) -> u8 {
    match dispatcher_code {
        Some(code) if code.status() == status => code.exit_code(),
        _ => status.exit_code(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_status_table_covers_every_exit_constant_once_in_order() {
        let codes: Vec<u8> = EXIT_STATUSES.iter().map(|r| r.code).collect();
        assert_eq!(
            codes,
            [
                exit::SUCCESS,
                exit::FAILED,
                exit::USAGE,
                exit::DATA_INVALID,
                exit::UNAVAILABLE,
                exit::INTERNAL,
                exit::IO_ERROR,
                exit::TEMPFAIL,
                exit::DENIED,
                exit::TIMEOUT
            ]
        );
        // Every exit an error code or a status can produce has a row.
        for code in ErrorCode::ALL {
            assert!(codes.contains(&code.exit_code()), "{code}");
        }
        for status in Status::ALL {
            assert!(codes.contains(&status.exit_code()), "{status}");
        }
    }

    #[test]
    fn http_statuses_worth_a_retry_are_unavailable() {
        for code in [408, 429, 500, 502, 503, 504, 599] {
            assert_eq!(
                http_status_class(code),
                (Status::Unavailable, true),
                "{code}"
            );
        }
        for code in [
            100, 204, 301, 302, 307, 400, 401, 403, 404, 409, 422, 499, 600,
        ] {
            assert_eq!(http_status_class(code), (Status::Failed, false), "{code}");
        }
    }

    #[test]
    fn exit_status_follows_the_printed_status() {
        // Dispatcher codes with their own status keep their special exit.
        assert_eq!(
            exit_code_for(Status::Failed, Some(ErrorCode::InternalError)),
            exit::INTERNAL
        );
        assert_eq!(
            exit_code_for(Status::Failed, Some(ErrorCode::RequestInvalid)),
            exit::DATA_INVALID
        );
        // A denial turned into `unavailable` by failure_status exits as unavailable.
        assert_eq!(
            exit_code_for(Status::Unavailable, Some(ErrorCode::ToolNotAllowed)),
            exit::UNAVAILABLE
        );
        // An HTTP status that will not change on a retry is a plain failure.
        assert_eq!(
            exit_code_for(Status::Failed, Some(ErrorCode::EndpointHttpStatus)),
            exit::FAILED
        );
        // An adapter's own envelope: only the status counts.
        for status in Status::ALL {
            assert_eq!(exit_code_for(status, None), status.exit_code());
        }
    }
}
