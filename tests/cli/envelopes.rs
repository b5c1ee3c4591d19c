//! Every dispatcher error row of SPEC §6 reachable from outside, and each malformed-input
//! class for the request and for the adapter's result.

use super::*;

fn marker() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("started");
    (dir, path)
}

#[test]
fn no_bridge_at_all_is_a_usage_error_without_envelope() {
    let run = Dispatch::adapter(&["echo"]).raw_bridge(None).run();
    run.output()
        .exit(2)
        .stdout_empty()
        .stderr_contains("--parent-tool-bridge");
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let run = Dispatch::adapter(&["echo"]).args(&["--no-such-flag"]).run();
    run.output()
        .exit(2)
        .stdout_empty()
        .stderr_starts_with("error: unexpected argument '--no-such-flag' found");
}

#[test]
fn unreadable_or_unparsable_bridge_is_bridge_invalid_and_echoes_the_request() {
    for text in [
        "@/nonexistent/bridge.json",
        "{not json",
        "[]",
        r#"{"a":1,"a":2}"#,
    ] {
        let run = Dispatch::adapter(&[]).raw_bridge(Some(text)).run();
        run.expect("unavailable", Some("bridge_invalid"), 69);
        assert_eq!(run.envelope["request_id"], "ptr_123", "{text}");
        assert_eq!(run.envelope["error"]["retryable"], false);
        assert!(!run.issue_codes().is_empty(), "{text}");
        assert!(
            !run.stdout.contains("/nonexistent"),
            "no host path in the envelope"
        );
    }
}

#[test]
fn bridge_shape_errors_are_all_listed() {
    let run = Dispatch::adapter(&["echo"])
        .bridge(|b| {
            b["version"] = json!(2);
            b["dispatcher"]["owner"] = json!("someone");
            b["dispatcher"]["command"]["argv"] = json!([]);
            b["authorization"]["failure_status"] = json!("ignored");
        })
        .run();
    run.expect("unavailable", Some("bridge_invalid"), 69);
    let issues = &run.envelope["error"]["details"]["issues"];
    let paths: Vec<&str> = issues
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["path"].as_str().unwrap())
        .collect();
    for want in [
        "/version",
        "/dispatcher/owner",
        "/dispatcher/command/argv",
        "/authorization/failure_status",
    ] {
        assert!(paths.contains(&want), "{want} in {paths:?}");
    }
}

#[test]
fn host_endpoint_bridges_are_served_and_need_their_url_on_the_host() {
    // Once `dispatch_mode_unsupported`; now the endpoint's own checks answer (SPEC §11).
    let run = Dispatch::adapter(&["echo"])
        .bridge(|b| {
            b["dispatcher"]["mode"] = json!("host_endpoint");
            b["dispatcher"]["endpoint"] =
                json!({"url_env": "PTD_TEST_UNSET_EP_URL", "method": "POST"});
        })
        .run();
    run.expect("unavailable", Some("endpoint_unconfigured"), 69);
    assert!(
        run.stderr.starts_with(
            "error[endpoint_unconfigured]: the endpoint URL variable PTD_TEST_UNSET_EP_URL"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn invalid_request_lists_issues_and_echoes_what_it_can() {
    let run = Dispatch::adapter(&["echo"])
        .request(|r| {
            r.as_object_mut().unwrap().remove("sandbox_session");
            r["authorization"]["allowed_tools"] = json!("workspace.read");
            r["version"] = json!("1");
        })
        .run();
    run.expect("failed", Some("request_invalid"), 65);
    assert_eq!(run.envelope["request_id"], "ptr_123");
    assert_eq!(run.envelope["tool"], "workspace.read");
    let issues = &run.envelope["error"]["details"]["issues"];
    let got: Vec<(&str, &str)> = issues
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["code"].as_str().unwrap(), i["path"].as_str().unwrap()))
        .collect();
    assert!(got.contains(&("wrong_type", "/version")), "{got:?}");
    assert!(got.contains(&("missing", "/sandbox_session")), "{got:?}");
    assert!(
        got.contains(&("wrong_type", "/authorization/allowed_tools")),
        "{got:?}"
    );
}

#[test]
fn each_malformed_request_class_has_its_own_issue_code() {
    let good = request().to_string();
    let deep = format!("{{\"a\":{}{}}}", "[".repeat(200), "]".repeat(200));
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"".to_vec(), "empty"),
        (
            [&[0xEF, 0xBB, 0xBF][..], good.as_bytes()].concat(),
            "byte_order_mark",
        ),
        (
            good.replace("ptr_123", "ptr_\u{1}").into_bytes(),
            "json_syntax",
        ),
        ([good.as_bytes(), b" trailing"].concat(), "trailing_bytes"),
        (format!("{good}{good}").into_bytes(), "multiple_documents"),
        (b"[1, 2]".to_vec(), "not_object"),
        (
            good.replacen("\"tool\":", "\"tool\":\"other\",\"tool\":", 1)
                .into_bytes(),
            "duplicate_key",
        ),
        (
            good.replacen("\"input\":{", "\"input\":{\"k\":1,\"k\":2,", 1)
                .into_bytes(),
            "duplicate_key",
        ),
        (deep.into_bytes(), "too_deep"),
        (
            [b"{\"request_id\":\"", &[0xff, 0xfe][..], b"\"}"].concat(),
            "invalid_utf8",
        ),
    ];
    for (bytes, code) in cases {
        let run = Dispatch::adapter(&["echo"]).stdin(bytes).run();
        run.expect("failed", Some("request_invalid"), 65);
        assert_eq!(run.issue_codes(), [code], "{}", run.envelope);
    }
}

#[test]
fn a_duplicate_tool_key_never_reaches_the_adapter() {
    let (_dir, started) = marker();
    let pidfile = format!("pidfile:{}", started.display());
    let text = request()
        .to_string()
        .replacen("\"tool\":", "\"tool\":\"evil.tool\",\"tool\":", 1);
    let run = Dispatch::adapter(&[&pidfile, "echo"]).stdin(text).run();
    run.expect("failed", Some("request_invalid"), 65);
    assert!(!started.exists(), "adapter must not start");
}

#[test]
fn oversized_request_is_request_too_large() {
    let run = Dispatch::adapter(&["echo"])
        .args(&["--max-request-bytes", "100"])
        .run();
    run.expect("failed", Some("request_too_large"), 65);
    assert_eq!(run.issue_codes(), ["too_large"]);
}

#[test]
fn tool_missing_from_either_allowlist_is_denied_and_the_adapter_never_starts() {
    let (_dir, started) = marker();
    let pidfile = format!("pidfile:{}", started.display());
    let run = Dispatch::adapter(&[&pidfile, "echo"])
        .bridge(|b| b["allowed_tools"] = json!(["workspace.search"]))
        .request(|r| {
            r["authorization"]["allowed_tools"] = json!(["workspace.read", "workspace.search"])
        })
        .run();
    run.expect("denied", Some("tool_not_allowed"), 77);
    assert_eq!(run.envelope["error"]["details"]["allowed_by_bridge"], false);
    // The request may narrow, never widen.
    let run = Dispatch::adapter(&[&pidfile, "echo"])
        .request(|r| r["authorization"]["allowed_tools"] = json!([]))
        .run();
    run.expect("denied", Some("tool_not_allowed"), 77);
    assert_eq!(
        run.envelope["error"]["details"]["allowed_by_request"],
        false
    );
    assert_eq!(run.dispatch()["adapter_started"], false);
    assert!(!started.exists(), "adapter must not start on denial");
}

#[test]
fn failure_status_unavailable_turns_denials_into_unavailable() {
    let run = Dispatch::adapter(&["echo"])
        .bridge(|b| {
            b["authorization"]["failure_status"] = json!("unavailable");
            b["allowed_tools"] = json!([]);
        })
        .run();
    run.expect("unavailable", Some("tool_not_allowed"), 69);
}

#[test]
fn bridge_ref_must_match_when_the_request_pins_one() {
    let run = Dispatch::adapter(&["echo"])
        .request(|r| r["metadata"]["bridge_ref"] = json!("sha256:0000"))
        .run();
    run.expect("denied", Some("bridge_ref_mismatch"), 77);

    // The right ref, computed independently: sha256 over sorted-key compact JSON.
    let right = bridge_ref(&bridge(&["echo"]));
    let run = Dispatch::adapter(&["echo"])
        .request(|r| r["metadata"]["bridge_ref"] = json!(right))
        .run();
    run.expect("succeeded", None, 0);
}

#[test]
fn missing_adapter_is_adapter_not_found() {
    for argv0 in ["/nonexistent/adapter", "no-such-adapter-on-path-xyz"] {
        let run = Dispatch::adapter(&[])
            .bridge(|b| b["dispatcher"]["command"]["argv"] = json!([argv0]))
            .run();
        run.expect("unavailable", Some("adapter_not_found"), 69);
        assert!(
            !run.stdout.contains("/nonexistent"),
            "no host path in the envelope"
        );
    }
}

#[test]
fn non_executable_adapter_is_adapter_not_executable() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    let garbage = dir.path().join("garbage");
    std::fs::write(&garbage, [0x7f, b'E', b'L', b'F', 0, 0, 0, 0, 1, 2, 3]).unwrap();
    std::fs::set_permissions(&garbage, std::fs::Permissions::from_mode(0o755)).unwrap();
    for path in [&plain, &garbage, &dir.path().to_path_buf()] {
        let run = Dispatch::adapter(&[])
            .bridge(|b| b["dispatcher"]["command"]["argv"] = json!([path.to_str().unwrap()]))
            .run();
        run.expect("unavailable", Some("adapter_not_executable"), 69);
    }
}

#[test]
fn missing_working_directory_is_cwd_unavailable_without_a_path() {
    let bridge_with_cwd =
        |b: &mut Value| b["dispatcher"]["command"]["cwd_env"] = json!("ADAPTER_CWD");
    let run = Dispatch::adapter(&["echo"]).bridge(bridge_with_cwd).run();
    run.expect("unavailable", Some("cwd_unavailable"), 69);
    let run = Dispatch::adapter(&["echo"])
        .bridge(bridge_with_cwd)
        .env("ADAPTER_CWD", "/nonexistent/secret-place")
        .run();
    run.expect("unavailable", Some("cwd_unavailable"), 69);
    assert!(!run.stdout.contains("secret-place"), "{}", run.stdout);
}

#[test]
fn adapter_statuses_decide_the_exit_status() {
    for (status, exit) in [
        ("denied", 77),
        ("unavailable", 69),
        ("timeout", 124),
        ("failed", 1),
    ] {
        let step = format!("echo:{status}:adapter_own_code");
        let run = Dispatch::adapter(&[&step]).run();
        run.expect(status, Some("adapter_own_code"), exit);
        // An adapter's own codes pass through, even one spelled like a dispatcher code.
        let step = format!("echo:{status}:request_invalid");
        let run = Dispatch::adapter(&[&step, "exit:5"]).run();
        run.expect(status, Some("request_invalid"), exit);
    }
}

#[test]
fn nonzero_exit_without_a_failure_envelope_is_adapter_exit_nonzero() {
    let run = Dispatch::adapter(&["exit:3"]).run();
    run.expect("failed", Some("adapter_exit_nonzero"), 1);
    assert_eq!(run.envelope["error"]["details"]["exit_code"], 3);
    // "succeeded" with a non-zero exit is not believed.
    let run = Dispatch::adapter(&["echo", "exit:3"]).run();
    run.expect("failed", Some("adapter_exit_nonzero"), 1);
    assert!(
        run.envelope.get("output").is_none(),
        "no payload on failure"
    );
}

#[test]
fn adapter_killed_by_a_signal_is_adapter_signaled() {
    let run = Dispatch::adapter(&["echo", "raise:9"]).run();
    run.expect("failed", Some("adapter_signaled"), 1);
    assert_eq!(run.envelope["error"]["retryable"], true);
    assert_eq!(run.dispatch()["signal"], "SIGKILL");
    let run = Dispatch::adapter(&["raise:6"]).run();
    run.expect("failed", Some("adapter_signaled"), 1);
}

#[test]
fn each_malformed_result_class_is_result_invalid_without_payload() {
    let good = |id: &str| {
        json!({"schema": "wp-codebox/parent-tool-result/v1", "version": 1, "request_id": id,
            "tool": "workspace.read", "operation": "call", "status": "succeeded", "output": {"x": 1}})
        .to_string()
    };
    let ok = good("ptr_123");
    let cases: Vec<(String, &str)> = vec![
        (String::new(), "empty"),
        (format!("profile noise\n{ok}"), "json_syntax"),
        (format!("{ok}{ok}"), "multiple_documents"),
        (format!("{ok} trailing"), "trailing_bytes"),
        (format!("\u{feff}{ok}"), "byte_order_mark"),
        ("[]".into(), "not_object"),
        (
            ok.replacen("\"status\":", "\"status\":\"failed\",\"status\":", 1),
            "duplicate_key",
        ),
        (good("someone_else"), "request_id_mismatch"),
        (
            ok.replace("\"tool\":\"workspace.read\"", "\"tool\":\"other\""),
            "tool_mismatch",
        ),
        (
            ok.replace("\"operation\":\"call\"", "\"operation\":\"write\""),
            "operation_mismatch",
        ),
        (
            ok.replace("wp-codebox/parent-tool-result/v1", "other/v1"),
            "wrong_value",
        ),
        (
            ok.replace("\"status\":\"succeeded\"", "\"status\":\"failed\""),
            "missing",
        ),
        (ok.replace("\"version\":1", "\"version\":1.5"), "wrong_type"),
    ];
    for (stdout, code) in cases {
        let step = format!("print:{stdout}");
        let run = Dispatch::adapter(&["read-stdin", &step]).run();
        run.expect("failed", Some("result_invalid"), 1);
        assert_eq!(run.issue_codes(), [code], "{stdout}");
        assert!(
            run.envelope.get("output").is_none(),
            "no output payload: {}",
            run.envelope
        );
    }
}

#[test]
fn invalid_utf8_and_deep_results_are_result_invalid() {
    // Emitted through flood-free steps: the raw bytes go through a file transport result.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("adapter.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\ncat >/dev/null\nprintf '{\"schema\":\"\\377\"}'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = Dispatch::adapter(&[])
        .bridge(|b| b["dispatcher"]["command"]["argv"] = json!([script.to_str().unwrap()]))
        .run();
    run.expect("failed", Some("result_invalid"), 1);
    assert_eq!(run.issue_codes(), ["invalid_utf8"]);

    let deep = format!("{{\"a\":{}{}}}", "[".repeat(300), "]".repeat(300));
    let run = Dispatch::adapter(&["read-stdin", &format!("print:{deep}")]).run();
    run.expect("failed", Some("result_invalid"), 1);
    assert_eq!(run.issue_codes(), ["too_deep"]);
}

#[test]
fn missing_containers_are_filled_in() {
    let minimal = json!({"schema": "wp-codebox/parent-tool-result/v1", "version": 1,
        "request_id": "ptr_123", "tool": "workspace.read", "operation": "call", "status": "succeeded"});
    let run = Dispatch::adapter(&["read-stdin", &format!("print:{minimal}")]).run();
    run.expect("succeeded", None, 0);
    assert_eq!(
        run.envelope["artifacts"],
        json!({"transcripts": [], "evidence": []})
    );
    assert_eq!(run.envelope["metadata"], json!({}));
    assert!(run.dispatch().is_object());
}
