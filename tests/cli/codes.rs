//! The error-code and exit-status tables are public interface: this pins every row, and checks
//! that the guide (`docs/guide.md`) prints the same tables (the help text and the man page are generated from
//! `error.rs` and checked elsewhere).

use ptd_wire::error::{ErrorCode, Status, EXIT_STATUSES};

const TABLE: [(&str, &str, bool, u8); 33] = [
    ("bridge_invalid", "unavailable", false, 69),
    ("dispatch_mode_unsupported", "unavailable", false, 69),
    ("request_invalid", "failed", false, 65),
    ("request_too_large", "failed", false, 65),
    ("tool_not_allowed", "denied", false, 77),
    ("bridge_ref_mismatch", "denied", false, 77),
    ("adapter_not_found", "unavailable", false, 69),
    ("adapter_not_executable", "unavailable", false, 69),
    ("cwd_unavailable", "unavailable", false, 69),
    ("artifact_dir_unavailable", "unavailable", false, 69),
    ("dispatch_timeout", "timeout", true, 124),
    ("interrupted", "failed", true, 1),
    ("adapter_exit_nonzero", "failed", false, 1),
    ("adapter_signaled", "failed", true, 1),
    ("result_invalid", "failed", false, 1),
    ("result_too_large", "failed", false, 1),
    ("internal_error", "failed", false, 70),
    ("endpoint_unconfigured", "unavailable", false, 69),
    ("endpoint_unreachable", "unavailable", true, 69),
    // The retryable half; the guide's row below and `http_status_class` pin the other.
    ("endpoint_http_status", "unavailable", true, 69),
    ("confinement_unavailable", "unavailable", false, 69),
    ("resource_limit_exceeded", "failed", false, 1),
    ("request_id_reused", "denied", false, 77),
    ("dispatch_indeterminate", "failed", false, 1),
    ("budget_exhausted", "denied", false, 77),
    ("concurrency_limited", "unavailable", true, 69),
    ("ledger_unavailable", "unavailable", false, 69),
    ("session_mismatch", "denied", false, 77),
    ("policy_invalid", "unavailable", false, 69),
    ("tool_denied_by_policy", "denied", false, 77),
    ("approval_required", "denied", true, 75),
    ("approval_denied", "denied", false, 77),
    ("approval_expired", "denied", false, 77),
];

#[test]
fn error_code_table_is_pinned() {
    let actual: Vec<_> = ErrorCode::ALL
        .iter()
        .map(|c| {
            (
                c.as_str(),
                c.status().as_str(),
                c.retryable(),
                c.exit_code(),
            )
        })
        .collect();
    assert_eq!(actual, TABLE);
    for code in ErrorCode::ALL {
        assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
    }
}

#[test]
fn status_exit_codes_are_pinned() {
    let got: Vec<_> = Status::ALL
        .iter()
        .map(|s| (s.as_str(), s.exit_code()))
        .collect();
    assert_eq!(
        got,
        [
            ("succeeded", 0),
            ("denied", 77),
            ("unavailable", 69),
            ("timeout", 124),
            ("failed", 1)
        ]
    );
}

#[test]
fn endpoint_http_status_depends_on_the_http_status() {
    use ptd_wire::error::http_status_class;
    for code in [408, 429, 500, 503, 599] {
        assert_eq!(
            http_status_class(code),
            (Status::Unavailable, true),
            "{code}"
        );
    }
    for code in [301, 302, 400, 401, 403, 404, 422] {
        assert_eq!(http_status_class(code), (Status::Failed, false), "{code}");
    }
}

#[test]
fn the_guide_prints_the_error_code_table() {
    let guide = include_str!("../../docs/guide.md");
    for (code, status, retryable, exit) in TABLE {
        let row = match code {
            "endpoint_http_status" => format!(
                "| `{code}` | unavailable for 408/429/5xx, else failed | true for 408/429/5xx | 69 / 1 |"
            ),
            _ => format!("| `{code}` | {status} | {retryable} | {exit} |"),
        };
        assert!(guide.contains(&row), "the guide lacks the row: {row}");
    }
    // The guide's columns are the ones the man page prints.
    for code in ErrorCode::ALL {
        let [status, retryable, exit] = code.columns();
        let row = format!("| `{}` | {status} | {retryable} | {exit} |", code.as_str());
        assert!(guide.contains(&row), "the guide lacks the row: {row}");
    }
}

#[test]
fn exit_statuses_are_pinned() {
    let codes: Vec<u8> = EXIT_STATUSES.iter().map(|r| r.code).collect();
    assert_eq!(codes, [0, 1, 2, 65, 69, 70, 74, 75, 77, 124]);
}

/// The rows of the guide's table under `## Exit status`, as written.
fn guide_exit_rows(guide: &str) -> Vec<String> {
    let section = guide
        .split("\n## Exit status\n")
        .nth(1)
        .expect("the guide has an Exit status section");
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| exit") && !l.starts_with("|--"))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_guide_prints_the_exit_status_table() {
    let guide = include_str!("../../docs/guide.md");
    let want: Vec<String> = EXIT_STATUSES
        .iter()
        .map(|r| format!("| {} | {} |", r.code, r.meaning))
        .collect();
    assert_eq!(
        guide_exit_rows(guide),
        want,
        "the guide's exit-status table differs from error::EXIT_STATUSES"
    );
}
