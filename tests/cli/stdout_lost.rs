//! A stdout that cannot be written — `/dev/full`, or a pipe whose reader is gone — is reported
//! by every command that prints: `error[stdout]: could not write …` on stderr and exit 74,
//! never exit 0 with the output lost, never a panic (exit 101).

use super::support::Cmd;
use super::{bridge, request, test_adapter};
use std::path::Path;

/// The exit status of a lost output (`exit::IO_ERROR`).
const LOST: i32 = 74;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Run `cmd` (made fresh per sink by `make`) with stdout on /dev/full and on a closed pipe;
/// each must exit 74 with one `error[stdout]: could not write <what>: …` line, after
/// `stderr_before` (what the command says on stderr anyway).
fn assert_lost(make: impl Fn() -> Cmd, what: &str, stderr_before: &str) {
    for (sink, cmd, os_error) in [
        (
            "/dev/full",
            make().stdout_dev_full(),
            "No space left on device (os error 28)",
        ),
        (
            "a closed pipe",
            make().stdout_closed_pipe(),
            "Broken pipe (os error 32)",
        ),
    ] {
        let out = cmd.run();
        let want = format!("{stderr_before}error[stdout]: could not write {what}: {os_error}\n");
        out.exit_with(|code| assert_eq!(code, LOST, "{what} to {sink}: {}", out.stderr()))
            .stdout_empty()
            .stderr_eq(&want);
    }
}

#[test]
fn the_main_job_reports_a_lost_envelope() {
    let bridge = bridge(&["echo"]).to_string();
    let request = request().to_string();
    assert_lost(
        || Cmd::new(["--parent-tool-bridge", &bridge]).stdin(request.clone()),
        "the envelope",
        "",
    );
    // A failure's own line comes first; the exit status is the lost output's, not the denial's.
    let mut denied = super::request();
    denied["tool"] = "workspace.write".into();
    denied["authorization"]["allowed_tools"] = serde_json::json!(["workspace.write"]);
    let denied = denied.to_string();
    let out = Cmd::new(["--parent-tool-bridge", &bridge])
        .stdin(denied.clone())
        .run();
    let first = out
        .exit(77)
        .stdout_contains("tool_not_allowed")
        .stderr_starts_with("error[tool_not_allowed]: ")
        .stderr()
        .to_string();
    assert_lost(
        || Cmd::new(["--parent-tool-bridge", &bridge]).stdin(denied.clone()),
        "the envelope",
        &first,
    );
}

#[test]
fn validate_reports_a_lost_report_instead_of_panicking() {
    let request = root().join("fixtures/request.json");
    assert_lost(
        || Cmd::new(["validate", "request"]).arg(&request),
        "the report",
        "",
    );
}

#[test]
fn sandbox_env_reports_lost_variables() {
    let bridge = root().join("fixtures/bridge.json");
    for format in ["env", "json"] {
        assert_lost(
            || {
                Cmd::new(["sandbox-env", "--format", format])
                    .arg("--parent-tool-bridge")
                    .arg(format!("@{}", bridge.display()))
            },
            "the variables",
            "",
        );
    }
}

#[test]
fn schema_and_completions_report_lost_text() {
    assert_lost(|| Cmd::new(["schema", "bridge"]), "the schema", "");
    assert_lost(|| Cmd::new(["completions", "bash"]), "the completions", "");
}

#[test]
fn help_and_version_report_lost_text() {
    assert_lost(|| Cmd::new(["--help"]), "the help", "");
    assert_lost(|| Cmd::new(["--version"]), "the help", "");
    assert_lost(|| Cmd::new(["validate", "--help"]), "the help", "");
}

#[test]
fn delegation_reports_a_lost_report_or_envelope() {
    let request = std::fs::read(root().join("fixtures/delegation/request.json")).unwrap();
    assert_lost(
        || Cmd::new(["delegation", "check-request"]).stdin(request.clone()),
        "the report",
        "",
    );
    let adapter = test_adapter(&["delegation-echo"]);
    let argv: Vec<String> = adapter
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert_lost(
        || {
            Cmd::new(["delegation", "run", "--"])
                .args(&argv)
                .stdin(request.clone())
        },
        "the envelope",
        "",
    );
}

#[test]
fn replay_reports_a_lost_report() {
    let case = root().join("fixtures/cases/happy/recorded-answer.case.json");
    assert_lost(|| Cmd::new(["replay"]).arg(&case), "the replay report", "");
}

#[test]
fn the_workspace_adapter_reports_a_lost_result() {
    let request = request().to_string();
    let workspace = root().join("fixtures/workspace");
    assert_lost(
        || {
            Cmd::new(["adapter", "workspace", "--root"])
                .arg(&workspace)
                .stdin(request.clone())
        },
        "the result",
        "",
    );
}

#[test]
fn audit_reports_a_lost_report_or_lost_records() {
    let s = super::ledger_rules::Setup::new();
    s.dispatch(&["echo"]).run().expect("succeeded", None, 0);
    let ledger = s.path().to_string();
    assert_lost(
        || Cmd::new(["audit", "verify", "--ledger", &ledger]),
        "the audit report",
        "",
    );
    assert_lost(
        || Cmd::new(["audit", "export", "--ledger", &ledger]),
        "the audit records",
        "",
    );
}

#[test]
fn the_mcp_and_git_adapters_report_a_lost_result() {
    let request = request().to_string();
    assert_lost(
        || {
            Cmd::new(["adapter", "mcp", "--"])
                .arg(super::test_bin())
                .arg("mcp-server")
                .stdin(request.clone())
        },
        "the result",
        "",
    );
    let dir = tempfile::tempdir().unwrap();
    assert_lost(
        || {
            Cmd::new(["adapter", "git", "--root"])
                .arg(dir.path())
                .stdin(request.clone())
        },
        "the result",
        "",
    );
}

/// Run the binary with `args`, `stdin`, stderr on `/dev/full`; returns exit status and stdout.
fn with_stderr_full(args: &[&str], stdin: &[u8]) -> (Option<i32>, String) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(super::bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create("/dev/full").unwrap())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

#[test]
fn a_stderr_that_cannot_be_written_loses_only_the_messages() {
    // A denial says so on stderr first: the line is lost, the envelope and status are not
    // (was: a panic, exit 101, no envelope).
    let bridge = bridge(&["echo"]).to_string();
    let mut denied = super::request();
    denied["tool"] = "workspace.write".into();
    denied["authorization"]["allowed_tools"] = serde_json::json!(["workspace.write"]);
    let (code, stdout) = with_stderr_full(
        &["--parent-tool-bridge", &bridge],
        denied.to_string().as_bytes(),
    );
    assert_eq!(code, Some(77), "{stdout}");
    let envelope: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(envelope["error"]["code"], "tool_not_allowed");
    // A usage error is only a message: exit 2, nothing else.
    assert_eq!(
        with_stderr_full(&["--no-such-flag"], b""),
        (Some(2), String::new())
    );
    // A subcommand's error line, beside its report on stdout.
    let (code, stdout) = with_stderr_full(&["validate", "request"], b"{}");
    assert_eq!(code, Some(65), "{stdout}");
    assert!(stdout.contains("\"valid\":false"), "{stdout}");
}
