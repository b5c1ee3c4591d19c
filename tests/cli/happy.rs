//! The main job when everything is in order: what the adapter receives, and what comes back.

use super::*;

#[test]
fn happy_path_prints_the_adapters_envelope_and_the_adapter_got_the_request() {
    let run = Dispatch::adapter(&["echo"]).run();
    run.expect("succeeded", None, 0);
    let env = &run.envelope;
    assert_eq!(env["schema"], "wp-codebox/parent-tool-result/v1");
    assert_eq!(env["request_id"], "ptr_123");
    assert_eq!(env["tool"], "workspace.read");
    assert_eq!(env["operation"], "call");
    assert_eq!(env["artifacts"], json!({"transcripts": [], "evidence": []}));
    assert_eq!(env["metadata"], json!({}));
    // The adapter received the validated request, re-serialized compactly, one line.
    let stdin = env["output"]["stdin"].as_str().unwrap();
    assert!(
        stdin.ends_with('\n') && stdin.matches('\n').count() == 1,
        "{stdin:?}"
    );
    let received: Value = serde_json::from_str(stdin).unwrap();
    assert_eq!(received, request());
    // The adapter's own diagnostics are kept; the dispatcher adds its own.
    assert_eq!(env["diagnostics"]["adapter"], "test");
    let d = run.dispatch();
    assert_eq!(d["exit_code"], 0);
    assert_eq!(d["signal"], Value::Null);
    assert_eq!(d["stdin_bytes_written"], json!(stdin.len()));
    assert_eq!(d["timeout_ms"], 20000);
    assert_eq!(d["leaked_processes"], 0);
    assert_eq!(d["adapter_started"], true);
    assert_eq!(d["version"], env!("CARGO_PKG_VERSION"));
    assert!(d["duration_ms"].is_u64() && d["stdout_bytes"].as_u64().unwrap() > 0);
    assert!(
        run.stderr.is_empty(),
        "nothing on stderr on success: {}",
        run.stderr
    );
}

#[test]
fn request_may_come_from_a_file_or_dash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("request.json");
    std::fs::write(&path, request().to_string()).unwrap();
    let run = Dispatch::adapter(&["echo"])
        .stdin("")
        .args(&[path.to_str().unwrap()])
        .run();
    run.expect("succeeded", None, 0);
    let run = Dispatch::adapter(&["echo"]).args(&["-"]).run();
    run.expect("succeeded", None, 0);
}

#[test]
fn bridge_may_come_from_a_file_or_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bridge.json");
    std::fs::write(&path, bridge(&["echo"]).to_string()).unwrap();
    let at = format!("@{}", path.display());
    Dispatch::adapter(&[])
        .raw_bridge(Some(&at))
        .run()
        .expect("succeeded", None, 0);
    Dispatch::adapter(&[])
        .raw_bridge(None)
        .env(
            "PARENT_TOOL_DISPATCH_BRIDGE",
            &bridge(&["echo"]).to_string(),
        )
        .run()
        .expect("succeeded", None, 0);
}

#[test]
fn environment_is_cleared_and_rebuilt_from_the_listed_sources() {
    let run = Dispatch::adapter(&["echo"])
        .bridge(|b| b["dispatcher"]["command"]["env"] = json!({"FROM_BRIDGE": "b-value"}))
        .env("HOST_ONLY", "must-not-pass")
        .env("PASS_ME", "passed")
        .env("LANG", "C.UTF-8")
        .args(&["--pass-env", "PASS_ME", "--pass-env", "NOT_SET_ANYWHERE"])
        .run();
    run.expect("succeeded", None, 0);
    let env = run.envelope["output"]["env"].as_object().unwrap();
    assert!(!env.contains_key("HOST_ONLY"), "{env:?}");
    assert!(!env.contains_key("NOT_SET_ANYWHERE"));
    assert_eq!(env["PASS_ME"], "passed");
    assert_eq!(env["FROM_BRIDGE"], "b-value");
    assert_eq!(env["LANG"], "C.UTF-8");
    assert!(env.contains_key("PATH"));
    assert_eq!(env["WP_CODEBOX_PARENT_TOOL_REQUEST_ID"], "ptr_123");
    assert_eq!(env["WP_CODEBOX_PARENT_TOOL_TOOL"], "workspace.read");
    assert_eq!(env["WP_CODEBOX_PARENT_TOOL_OPERATION"], "call");
    assert_eq!(env["WP_CODEBOX_PARENT_TOOL_TIMEOUT_MS"], "20000");
    assert_eq!(
        env["WP_CODEBOX_PARENT_TOOL_REQUEST_SCHEMA"],
        "wp-codebox/parent-tool-request/v1"
    );
    assert_eq!(
        env["WP_CODEBOX_PARENT_TOOL_RESULT_SCHEMA"],
        "wp-codebox/parent-tool-result/v1"
    );
    let allowed = [
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TZ",
        "TMPDIR",
        "FROM_BRIDGE",
        "PASS_ME",
    ];
    for key in env.keys() {
        assert!(
            allowed.contains(&key.as_str()) || key.starts_with("WP_CODEBOX_PARENT_TOOL_"),
            "unexpected variable {key}"
        );
    }
}

#[test]
fn argv_reaches_the_adapter_unchanged_with_no_shell() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("shell-ran");
    let nasty = [
        "two words".to_string(),
        "\"double\" 'single'".to_string(),
        format!("$(touch {})", marker.display()),
        format!("; touch {}", marker.display()),
        "`id`".to_string(),
        " spaced ".to_string(),
        "".to_string(),
        "--f".to_string(),
        "--f".to_string(),
    ];
    let mut steps = vec!["echo", "--"];
    steps.extend(nasty.iter().map(String::as_str));
    let run = Dispatch::adapter(&steps).run();
    run.expect("succeeded", None, 0);
    let argv: Vec<String> = serde_json::from_value(run.envelope["output"]["argv"].clone()).unwrap();
    assert_eq!(argv[1..4], ["adapter", "echo", "--"]);
    assert_eq!(argv[4..], nasty);
    assert!(!marker.exists(), "a shell interpreted argv");
}

#[test]
fn cwd_env_sets_the_adapters_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let run = Dispatch::adapter(&["echo"])
        .bridge(|b| b["dispatcher"]["command"]["cwd_env"] = json!("ADAPTER_CWD"))
        .env("ADAPTER_CWD", dir.path().to_str().unwrap())
        .run();
    run.expect("succeeded", None, 0);
    let cwd = std::fs::canonicalize(run.envelope["output"]["cwd"].as_str().unwrap()).unwrap();
    assert_eq!(cwd, std::fs::canonicalize(dir.path()).unwrap());
}

#[test]
fn relative_argv0_is_resolved_against_the_dispatchers_directory() {
    let dir = tempfile::tempdir().unwrap();
    let bin_dir = test_bin().parent().unwrap().to_path_buf();
    let run = Dispatch::adapter(&["echo"])
        .bridge(|b| {
            b["dispatcher"]["command"]["argv"][0] = json!("./ptd-test");
            b["dispatcher"]["command"]["cwd_env"] = json!("ADAPTER_CWD");
        })
        .env("ADAPTER_CWD", dir.path().to_str().unwrap())
        .cwd(&bin_dir)
        .run();
    run.expect("succeeded", None, 0);
    // argv[0] itself is passed exactly as written.
    assert_eq!(run.envelope["output"]["argv"][0], "./ptd-test");
}

#[test]
fn file_transport_uses_private_files_and_removes_them() {
    let run = Dispatch::adapter(&["print:noise on stdout", "file-echo"])
        .bridge(|b| b["dispatcher"]["command"]["transport"] = json!("file"))
        .run();
    run.expect("succeeded", None, 0);
    let out = &run.envelope["output"];
    let received: Value = serde_json::from_str(out["stdin"].as_str().unwrap()).unwrap();
    assert_eq!(received, request());
    let request_file = out["env"]["WP_CODEBOX_PARENT_TOOL_REQUEST_FILE"]
        .as_str()
        .unwrap();
    let result_file = out["env"]["WP_CODEBOX_PARENT_TOOL_RESULT_FILE"]
        .as_str()
        .unwrap();
    assert!(!Path::new(request_file).exists(), "request file removed");
    assert!(!Path::new(result_file).exists(), "result file removed");
    assert!(
        !Path::new(request_file).parent().unwrap().exists(),
        "private folder removed"
    );
    assert_eq!(run.dispatch()["transport"], "file");
    // stdout is only a diagnostic in this transport.
    assert_eq!(
        run.dispatch()["stdout_bytes"],
        json!("noise on stdout".len())
    );
}

#[test]
fn file_transport_request_file_is_private() {
    let run = Dispatch::adapter(&["file-echo"])
        .bridge(|b| b["dispatcher"]["command"]["transport"] = json!("file"))
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(run.envelope["output"]["request_file_mode"], "600");
}

#[test]
fn file_transport_without_a_result_file_is_result_invalid() {
    Dispatch::adapter(&["print:{}"])
        .bridge(|b| b["dispatcher"]["command"]["transport"] = json!("file"))
        .run()
        .expect("failed", Some("result_invalid"), 1);
}

#[test]
fn pretty_prints_one_indented_envelope() {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), request().to_string()).unwrap();
    Cmd::new(["--pretty", "--parent-tool-bridge"])
        .arg(bridge(&["echo"]).to_string())
        .arg("-")
        .stdin_file(std::fs::File::open(file.path()).unwrap())
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_with(|text| {
            assert!(
                text.lines().count() > 5 && text.starts_with("{\n"),
                "{text}"
            );
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(v["status"], "succeeded");
        });
}

#[test]
fn tool_map_shows_the_adapter_the_external_id_and_keeps_the_canonical_one() {
    let run = Dispatch::adapter(&["echo"])
        .args(&["--tool-map", "provider-safe"])
        .run();
    run.expect("succeeded", None, 0);
    let received: Value =
        serde_json::from_str(run.envelope["output"]["stdin"].as_str().unwrap()).unwrap();
    assert_eq!(received["tool"], "workspace_read");
    assert_eq!(
        run.envelope["output"]["env"]["WP_CODEBOX_PARENT_TOOL_TOOL"],
        "workspace_read"
    );
    assert_eq!(run.envelope["tool"], "workspace.read");

    let run = Dispatch::adapter(&["echo"])
        .args(&["--tool-map", r#"{"workspace.read": "fs_cat"}"#])
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(
        run.envelope["output"]["env"]["WP_CODEBOX_PARENT_TOOL_TOOL"],
        "fs_cat"
    );
    assert_eq!(run.envelope["tool"], "workspace.read");
}

#[test]
fn tool_map_never_changes_what_the_allowlist_checks() {
    // The request asks for the external id: it is not the canonical allowed one.
    let run = Dispatch::adapter(&["echo"])
        .args(&["--tool-map", "provider-safe"])
        .request(|r| {
            r["tool"] = json!("workspace_read");
            r["authorization"]["allowed_tools"] = json!(["workspace_read"]);
        })
        .run();
    run.expect("denied", Some("tool_not_allowed"), 77);
}

#[test]
fn a_bad_tool_map_is_a_usage_error() {
    let run = Dispatch::adapter(&["echo"])
        .args(&["--tool-map", "{not json"])
        .run();
    run.output()
        .exit(2)
        .stdout_empty()
        .stderr_contains("--tool-map");
}

#[test]
fn an_unreadable_tool_map_file_is_named_with_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("map.json");
    let run = Dispatch::adapter(&["echo"])
        .args(&["--tool-map", &format!("@{}", missing.display())])
        .run();
    run.output().exit(2).stdout_empty().stderr_eq(format!(
        "error[usage]: the --tool-map value cannot be used: reading tool map file {}: \
         No such file or directory (os error 2)\n\nFor more information, try '--help'.\n",
        missing.display()
    ));
}
