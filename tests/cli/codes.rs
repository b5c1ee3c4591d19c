//! The SPEC §6 table is public interface: this pins every row, and checks that the README
//! prints the same table.

use parent_tool_dispatch::error::{ErrorCode, Status};

const TABLE: [(&str, &str, bool, u8); 17] = [
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
fn readme_prints_the_error_code_table() {
    let readme = include_str!("../../README.md");
    for (code, status, retryable, exit) in TABLE {
        let row = format!("| `{code}` | {status} | {retryable} | {exit} |");
        assert!(readme.contains(&row), "README lacks the row: {row}");
    }
}
