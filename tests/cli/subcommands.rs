//! `validate`, `sandbox-env` and `completions`.

use super::*;

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
        Cmd::new(["validate", kind])
            .stdin(doc.to_string())
            .run()
            .exit(0)
            .stdout_json(|v| assert_eq!(*v, json!({"valid": true, "issues": []})))
            .stderr_empty();
    }
    let upstream = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/upstream/example-bridge.host_command.json");
    Cmd::new(["validate", "bridge"])
        .arg(upstream)
        .run()
        .exit(0)
        .stdout_eq("{\"valid\":true,\"issues\":[]}\n")
        .stderr_empty();
}

#[test]
fn validate_lists_every_issue_with_exit_65() {
    let mut doc = request();
    doc["version"] = json!(2);
    doc["tool"] = json!("");
    Cmd::new(["validate", "request", "-"])
        .stdin(doc.to_string())
        .run()
        .exit(65)
        .stdout_json(|report| {
            assert_eq!(report["valid"], false);
            assert_eq!(
                report["issues"],
                json!([
                    {"code": "wrong_value", "path": "/version", "message": "\"version\" must be 1, found 2"},
                    {"code": "empty", "path": "/tool", "message": "\"tool\" must not be empty"}
                ])
            );
        })
        .stderr_starts_with("error[request_invalid]: /version: ");
    Cmd::new(["validate", "result"])
        .stdin("{} {}")
        .run()
        .exit(65)
        .stdout_contains("multiple_documents")
        .stderr_starts_with("error[result_invalid]: ");
    Cmd::new(["validate", "bridge", "/nonexistent/file"])
        .run()
        .exit(65)
        .stdout_contains("unreadable")
        .stderr_starts_with("error[bridge_invalid]: reading bridge file /nonexistent/file: ");
}

#[test]
fn completions_are_printed_for_each_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        Cmd::new(["completions", shell])
            .run()
            .exit(0)
            .stdout_contains("parent-tool-dispatch")
            .stdout_contains("max-output-bytes")
            .stderr_empty();
    }
}

#[test]
fn help_has_examples_and_exit_statuses() {
    Cmd::new(["--help"])
        .run()
        .exit(0)
        .stdout_contains("Examples:")
        .stdout_contains("124 timeout")
        .stderr_empty();
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
    let out = Cmd::new(["sandbox-env", "--parent-tool-bridge", &b.to_string()]).run();
    let stdout = out
        .exit(0)
        .stderr_empty()
        .stdout_lacks("--secret-arg")
        .stdout();
    let lines = env_lines(stdout);
    let bridge_ref = bridge_ref(&b);
    assert_eq!(
        lines,
        [
            (
                "WP_CODEBOX_PARENT_TOOL_BRIDGE_REF".to_string(),
                bridge_ref.clone()
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
    assert!(!stdout.contains("ptd-test"), "no argv: {stdout}");
    Cmd::new([
        "sandbox-env",
        "--format",
        "json",
        "--parent-tool-bridge",
        &b.to_string(),
    ])
    .run()
    .exit(0)
    .stdout_json(|v| {
        assert_eq!(v["WP_CODEBOX_PARENT_TOOL_BRIDGE_REF"], bridge_ref);
        assert_eq!(v.as_object().unwrap().len(), 5);
    })
    .stderr_empty();
}

#[test]
fn sandbox_env_prints_only_the_named_variables() {
    let mut b = bridge(&["echo"]);
    b["sandbox_env"]["variables"] =
        json!({"dispatch_mode": "MY_MODE", "result_schema": "MY_RESULT"});
    Cmd::new(["sandbox-env", "--parent-tool-bridge", &b.to_string()])
        .run()
        .exit(0)
        .stdout_eq("MY_MODE=host_command\nMY_RESULT=wp-codebox/parent-tool-result/v1\n")
        .stderr_empty();
}

#[test]
fn sandbox_env_refuses_collisions_with_secret_or_token_names() {
    let mut b = bridge(&["echo"]);
    b["sandbox_env"]["secret_env"] = json!(["WP_CODEBOX_PARENT_TOOL_BRIDGE_REF"]);
    Cmd::new(["sandbox-env", "--parent-tool-bridge", &b.to_string()])
        .run()
        .exit(69)
        .stdout_empty()
        .stderr_starts_with("error[sandbox_env_collision]: ");

    let mut b = bridge(&["echo"]);
    b["dispatcher"]["mode"] = json!("host_endpoint");
    b["dispatcher"]["endpoint"] =
        json!({"url_env": "EP", "method": "POST", "token_env": "MY_MODE"});
    b["sandbox_env"]["variables"] = json!({"dispatch_mode": "MY_MODE"});
    Cmd::new(["sandbox-env", "--parent-tool-bridge", &b.to_string()])
        .run()
        .exit(69)
        .stdout_empty()
        .stderr_starts_with("error[sandbox_env_collision]: ");
}

#[test]
fn sandbox_env_refuses_an_invalid_bridge_and_needs_one() {
    Cmd::new(["sandbox-env", "--parent-tool-bridge", "{}"])
        .run()
        .exit(69)
        .stdout_empty()
        .stderr_starts_with("error[bridge_invalid]: ");
    Cmd::new(["sandbox-env"])
        .run()
        .exit(2)
        .stdout_empty()
        .stderr_eq(
            "error[usage]: no bridge: pass --parent-tool-bridge '<json>|@FILE' or set \
             PARENT_TOOL_DISPATCH_BRIDGE\n",
        );
}

#[test]
fn help_never_shows_the_bridge_from_the_environment() {
    Cmd::new(["--help"])
        .env(
            "PARENT_TOOL_DISPATCH_BRIDGE",
            "{\"secret\":\"do-not-show\"}",
        )
        .run()
        .exit(0)
        .stdout_contains("PARENT_TOOL_DISPATCH_BRIDGE")
        .stdout_lacks("do-not-show")
        .stderr_empty();
}

#[test]
fn the_test_tools_are_not_subcommands_of_the_product() {
    // The test adapter and the test MCP server are the test-only `ptd-test` binary; the
    // product answers their old names as unknown subcommands, with or without a bridge.
    let bridge = bridge(&["echo"]).to_string();
    for line in [
        &["__test-adapter", "read-stdin", "echo"][..],
        &["__test-mcp-server", "era:modern"][..],
        &["--parent-tool-bridge", &bridge, "__test-adapter", "echo"][..],
    ] {
        let word = line.iter().find(|a| a.starts_with("__")).unwrap();
        Cmd::new(line)
            .stdin(request().to_string())
            .run()
            .exit(2)
            .stdout_empty()
            .stderr_eq(format!(
                "error: unrecognized subcommand '{word}'\n\nFor more information, try '--help'.\n"
            ));
    }
    // …and never mentions them.
    let help = Cmd::new(["--help"]).run();
    help.exit(0).stderr_empty().stdout_lacks("__test");
    // The test binary itself refuses anything but its two roles.
    Cmd::ptd_test(["__test-adapter", "echo"])
        .run()
        .exit(2)
        .stdout_empty()
        .stderr_eq("usage: ptd-test adapter STEP… | ptd-test mcp-server SCRIPT…\n");
}
