//! `validate`, `sandbox-env` and `completions`.

use super::*;
use std::process::Command;

pub(crate) fn run_with_stdin(args: &[&str], stdin: &str) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(bin())
        .args(args)
        .env_remove("PARENT_TOOL_DISPATCH_BRIDGE")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn validate_reports_valid_envelopes_with_exit_0() {
    let result = json!({"schema": "wp-codebox/parent-tool-result/v1", "version": 1,
        "request_id": "r", "tool": "t", "operation": "call", "status": "succeeded",
        "artifacts": {"transcripts": [], "evidence": []}, "diagnostics": {}, "metadata": {}});
    for (kind, doc) in [
        ("bridge", bridge(&["echo"])),
        ("request", request()),
        ("result", result),
    ] {
        let (exit, stdout, _) = run_with_stdin(&["validate", kind], &doc.to_string());
        assert_eq!(exit, 0, "{kind}: {stdout}");
        assert_eq!(
            serde_json::from_str::<Value>(&stdout).unwrap(),
            json!({"valid": true, "issues": []})
        );
    }
    let upstream = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/upstream/example-bridge.host_command.json");
    let (exit, _, _) = run_with_stdin(&["validate", "bridge", upstream.to_str().unwrap()], "");
    assert_eq!(exit, 0);
}

#[test]
fn validate_lists_every_issue_with_exit_65() {
    let mut doc = request();
    doc["version"] = json!(2);
    doc["tool"] = json!("");
    let (exit, stdout, _) = run_with_stdin(&["validate", "request", "-"], &doc.to_string());
    assert_eq!(exit, 65);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["valid"], false);
    assert_eq!(
        report["issues"],
        json!([
            {"code": "wrong_value", "path": "/version", "message": "\"version\" must be 1, found 2"},
            {"code": "empty", "path": "/tool", "message": "\"tool\" must not be empty"}
        ])
    );
    let (exit, stdout, _) = run_with_stdin(&["validate", "result"], "{} {}");
    assert_eq!(exit, 65);
    assert!(stdout.contains("multiple_documents"));
    let (exit, stdout, _) = run_with_stdin(&["validate", "bridge", "/nonexistent/file"], "");
    assert_eq!(exit, 65);
    assert!(stdout.contains("unreadable"));
}

#[test]
fn completions_are_printed_for_each_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (exit, stdout, _) = run_with_stdin(&["completions", shell], "");
        assert_eq!(exit, 0);
        assert!(stdout.contains("parent-tool-dispatch"), "{shell}");
        assert!(stdout.contains("max-output-bytes"), "{shell}");
    }
}

#[test]
fn help_has_examples_and_exit_statuses() {
    let (exit, stdout, _) = run_with_stdin(&["--help"], "");
    assert_eq!(exit, 0);
    assert!(stdout.contains("Examples:") && stdout.contains("124 timeout"));
}

fn env_lines(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect()
}

#[test]
fn sandbox_env_prints_the_metadata_variables_with_the_bridge_ref() {
    let b = bridge(&["echo", "--secret-arg"]);
    let (exit, stdout, _) =
        run_with_stdin(&["sandbox-env", "--parent-tool-bridge", &b.to_string()], "");
    assert_eq!(exit, 0);
    let lines = env_lines(&stdout);
    let canonical = serde_json::to_string(&super::envelopes::sorted(&b)).unwrap();
    use sha2::Digest;
    let hex: String = sha2::Sha256::digest(canonical.as_bytes())
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect();
    assert_eq!(
        lines,
        [
            (
                "WP_CODEBOX_PARENT_TOOL_BRIDGE_REF".to_string(),
                format!("sha256:{hex}")
            ),
            (
                "WP_CODEBOX_PARENT_TOOL_BRIDGE_SCHEMA".into(),
                "wp-codebox/parent-tool-bridge/v1".into()
            ),
            (
                "WP_CODEBOX_PARENT_TOOL_DISPATCH_MODE".into(),
                "host_command".into()
            ),
            (
                "WP_CODEBOX_PARENT_TOOL_REQUEST_SCHEMA".into(),
                "wp-codebox/parent-tool-request/v1".into()
            ),
            (
                "WP_CODEBOX_PARENT_TOOL_RESULT_SCHEMA".into(),
                "wp-codebox/parent-tool-result/v1".into()
            ),
        ]
    );
    assert!(
        !stdout.contains("--secret-arg") && !stdout.contains("__test-adapter"),
        "no argv"
    );
    let (exit, json_out, _) = run_with_stdin(
        &[
            "sandbox-env",
            "--format",
            "json",
            "--parent-tool-bridge",
            &b.to_string(),
        ],
        "",
    );
    assert_eq!(exit, 0);
    let v: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(
        v["WP_CODEBOX_PARENT_TOOL_BRIDGE_REF"],
        format!("sha256:{hex}")
    );
    assert_eq!(v.as_object().unwrap().len(), 5);
}

#[test]
fn sandbox_env_prints_only_the_named_variables() {
    let mut b = bridge(&["echo"]);
    b["sandbox_env"]["variables"] =
        json!({"dispatch_mode": "MY_MODE", "result_schema": "MY_RESULT"});
    let (exit, stdout, _) =
        run_with_stdin(&["sandbox-env", "--parent-tool-bridge", &b.to_string()], "");
    assert_eq!(exit, 0);
    assert_eq!(
        stdout,
        "MY_MODE=host_command\nMY_RESULT=wp-codebox/parent-tool-result/v1\n"
    );
}

#[test]
fn sandbox_env_refuses_collisions_with_secret_or_token_names() {
    let mut b = bridge(&["echo"]);
    b["sandbox_env"]["secret_env"] = json!(["WP_CODEBOX_PARENT_TOOL_BRIDGE_REF"]);
    let (exit, stdout, stderr) =
        run_with_stdin(&["sandbox-env", "--parent-tool-bridge", &b.to_string()], "");
    assert_ne!(exit, 0);
    assert!(stdout.is_empty());
    assert!(stderr.contains("sandbox_env_collision"), "{stderr}");

    let mut b = bridge(&["echo"]);
    b["dispatcher"]["mode"] = json!("host_endpoint");
    b["dispatcher"]["endpoint"] =
        json!({"url_env": "EP", "method": "POST", "token_env": "MY_MODE"});
    b["sandbox_env"]["variables"] = json!({"dispatch_mode": "MY_MODE"});
    let (exit, stdout, _) =
        run_with_stdin(&["sandbox-env", "--parent-tool-bridge", &b.to_string()], "");
    assert_ne!(exit, 0);
    assert!(stdout.is_empty());
}

#[test]
fn sandbox_env_refuses_an_invalid_bridge_and_needs_one() {
    let (exit, stdout, stderr) = run_with_stdin(&["sandbox-env", "--parent-tool-bridge", "{}"], "");
    assert_eq!(exit, 69);
    assert!(stdout.is_empty() && stderr.contains("bridge_invalid"));
    let (exit, _, _) = run_with_stdin(&["sandbox-env"], "");
    assert_eq!(exit, 2);
}

#[test]
fn help_never_shows_the_bridge_from_the_environment() {
    let out = Command::new(bin())
        .arg("--help")
        .env(
            "PARENT_TOOL_DISPATCH_BRIDGE",
            "{\"secret\":\"do-not-show\"}",
        )
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("PARENT_TOOL_DISPATCH_BRIDGE"));
    assert!(!text.contains("do-not-show"));
}
