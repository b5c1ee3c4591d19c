//! The bridge's loading and checks, case by case.

use super::*;
use serde_json::json;

fn bridge(v: Value) -> Result<Bridge, Vec<Issue>> {
    let Value::Object(map) = v else {
        unreachable!()
    };
    Bridge::from_json(map)
}

fn minimal() -> Value {
    json!({
        "schema": SCHEMA, "version": 1, "allowed_tools": ["t"],
        "dispatcher": {"owner": "wp-codebox", "mode": "host_command",
            "command": {"argv": ["x", " a b ", ""]},
            "request_schema": "wp-codebox/parent-tool-request/v1",
            "result_schema": "wp-codebox/parent-tool-result/v1"},
        "sandbox_env": {}, "authorization": {}, "redaction": {}, "metadata": {}
    })
}

/// The keys the unknown-key warnings know are the fields the checks describe (and
/// upstream's `notes`); the order of `LEVELS` is its own (it words the messages).
#[test]
fn the_known_keys_are_the_described_fields() {
    for (level, shape) in LEVELS.iter().zip([
        &fields::DISPATCHER_SHAPE,
        &fields::COMMAND_SHAPE,
        &fields::ENDPOINT_SHAPE,
        &fields::SANDBOX_ENV_SHAPE,
        &fields::AUTHORIZATION_SHAPE,
        &fields::REDACTION_SHAPE,
    ]) {
        let mut known: Vec<&str> = level.keys.to_vec();
        known.sort_unstable();
        let mut described: Vec<&str> = shape.fields.iter().map(|f| f.key).collect();
        described.push("notes");
        described.sort_unstable();
        assert_eq!(known, described, "{}", level.name);
    }
}

#[test]
fn minimal_bridge_gets_defaults_and_keeps_argv_verbatim() {
    let b = bridge(minimal()).unwrap();
    assert_eq!(b.timeout_ms, DEFAULT_TIMEOUT_MS);
    assert_eq!(b.failure_status, Status::Denied);
    let cmd = b.command.unwrap();
    assert_eq!(cmd.argv, ["x", " a b ", ""]);
    assert_eq!(cmd.transport, Transport::Stdin);
    assert!(b.sandbox_variables.is_none());
}

#[test]
fn upstream_example_bridge_is_valid() {
    let text = include_str!("../../../../../fixtures/upstream/example-bridge.host_command.json");
    let v: Value = serde_json::from_str(text).unwrap();
    let b = bridge(v).unwrap();
    assert_eq!(
        b.sandbox_variables.unwrap().name(SandboxVar::BridgeRef),
        Some("WP_CODEBOX_PARENT_TOOL_BRIDGE_REF")
    );
}

#[test]
fn every_issue_is_reported_with_its_pointer() {
    let mut v = minimal();
    v["version"] = json!(2);
    v["dispatcher"]["timeout_ms"] = json!(0);
    v["dispatcher"]["command"]["env"] = json!({"BAD-NAME": "x", "OK": 3});
    v["authorization"]["failure_status"] = json!("maybe");
    v["sandbox_env"]["secret_env"] = json!(["1X"]);
    v.as_object_mut().unwrap().remove("metadata");
    let issues = bridge(v).unwrap_err();
    let got = crate::validate::code_paths(&issues);
    for want in [
        ("wrong_value", "/version"),
        ("out_of_range", "/dispatcher/timeout_ms"),
        ("invalid_env_name", "/dispatcher/command/env/BAD-NAME"),
        ("wrong_type", "/dispatcher/command/env/OK"),
        ("wrong_value", "/authorization/failure_status"),
        ("invalid_env_name", "/sandbox_env/secret_env/0"),
        ("missing", "/metadata"),
    ] {
        assert!(got.contains(&want), "{want:?} not in {got:?}");
    }
}

fn warnings(v: Value) -> Vec<(String, String)> {
    let b = bridge(v).unwrap();
    b.warnings
        .into_iter()
        .map(|i| {
            assert_eq!(i.code, "unknown_key");
            (i.path, i.message)
        })
        .collect()
}

#[test]
fn typos_in_the_dispatcher_objects_are_warnings_with_a_suggestion() {
    let mut v = minimal();
    v["dispatcher"]["timeout_sm"] = json!(5000);
    v["dispatcher"]["transport"] = json!("file");
    v["dispatcher"]["command"]["transprot"] = json!("file");
    v["dispatcher"]["command"]["timeout_ms"] = json!(5000);
    v["dispatcher"]["command"]["frobnicate"] = json!(true);
    v["dispatcher"]["endpoint"] =
        json!({"url_env": "U", "method": "POST", "tokn_env": "T", "cwd_env": "C"});
    assert_eq!(
        warnings(v),
        [
            (
                "/dispatcher/timeout_sm",
                "unknown key \"timeout_sm\" (did you mean \"timeout_ms\"?)"
            ),
            (
                "/dispatcher/transport",
                "key \"transport\" belongs in dispatcher.command, not dispatcher; here it is ignored"
            ),
            (
                "/dispatcher/command/transprot",
                "unknown key \"transprot\" (did you mean \"transport\"?)"
            ),
            (
                "/dispatcher/command/timeout_ms",
                "key \"timeout_ms\" belongs in dispatcher, not dispatcher.command; here it is ignored"
            ),
            (
                "/dispatcher/command/frobnicate",
                "unknown key \"frobnicate\"; dispatcher.command takes argv, cwd_env, env, transport, notes"
            ),
            (
                "/dispatcher/endpoint/tokn_env",
                "unknown key \"tokn_env\" (did you mean \"token_env\"?)"
            ),
            (
                "/dispatcher/endpoint/cwd_env",
                "key \"cwd_env\" belongs in dispatcher.command, not dispatcher.endpoint; here it is ignored"
            ),
        ]
        .map(|(p, m)| (p.to_string(), m.to_string()))
    );
}

#[test]
fn a_typo_still_runs_with_the_default_so_the_warning_is_the_only_signal() {
    let mut v = minimal();
    v["dispatcher"]["timeout_sm"] = json!(5000);
    let b = bridge(v).unwrap();
    assert_eq!(b.timeout_ms, DEFAULT_TIMEOUT_MS);
    assert_eq!(b.warnings.len(), 1);
}

#[test]
fn extra_keys_elsewhere_and_notes_are_not_warned_about() {
    let mut v = minimal();
    v["extra_top_level"] = json!(1);
    v["sandbox_env"]["notes"] = json!("n");
    v["authorization"]["notes"] = json!("n");
    v["metadata"]["timeout_sm"] = json!(1);
    v["dispatcher"]["notes"] = json!("n");
    v["dispatcher"]["command"]["notes"] = json!("n");
    assert_eq!(warnings(v), []);
    let text = include_str!("../../../../../fixtures/upstream/example-bridge.host_command.json");
    let upstream: Value = serde_json::from_str(text).unwrap();
    assert_eq!(warnings(upstream), []);
}

#[test]
fn unknown_keys_inside_authorization_sandbox_env_and_redaction_are_warned() {
    let mut v = minimal();
    v["authorization"]["failure_stauts"] = json!("unavailable");
    v["sandbox_env"]["secret_evn"] = json!(["TOKEN"]);
    v["redaction"]["notes"] = json!("free text is fine");
    v["metadata"]["anything"] = json!("is fine");
    v["extra_top_level"] = json!("is fine");
    let w = bridge(v).unwrap().warnings;
    let shown: Vec<(&str, &str)> = w
        .iter()
        .map(|i| (i.path.as_str(), i.message.as_str()))
        .collect();
    assert_eq!(
        shown,
        [
            (
                "/sandbox_env/secret_evn",
                "unknown key \"secret_evn\" (did you mean \"secret_env\"?)"
            ),
            (
                "/authorization/failure_stauts",
                "unknown key \"failure_stauts\" (did you mean \"failure_status\"?)"
            ),
        ]
    );
}

#[test]
fn unknown_key_warnings_are_bounded() {
    let mut v = minimal();
    for i in 0..1000 {
        v["dispatcher"][format!("k{i}")] = json!(i);
    }
    v["dispatcher"]["command"]["x".repeat(100_000)] = json!(1);
    let w = bridge(v).unwrap().warnings;
    assert_eq!(w.len(), MAX_UNKNOWN_KEY_WARNINGS + 1);
    assert_eq!(w.last().unwrap().message, "and 981 more unknown keys");
    assert_eq!(w.last().unwrap().path, "");
    assert!(w.iter().all(|i| i.message.len() < 200));
}

#[test]
fn invalid_bridges_keep_their_warnings_in_the_load_error() {
    let mut v = minimal();
    let cmd = v["dispatcher"]
        .as_object_mut()
        .unwrap()
        .remove("command")
        .unwrap();
    v["dispatcher"]["comand"] = cmd;
    let err = Bridge::load(&v.to_string()).unwrap_err();
    assert_eq!(
        crate::validate::code_paths(err.issues()),
        [("missing", "/dispatcher/command")]
    );
    assert_eq!(err.warnings()[0].path, "/dispatcher/comand");
    assert_eq!(
        err.to_string(),
        "/dispatcher/command: \"command\" is required when mode is \"host_command\""
    );
}

#[test]
fn a_missing_bridge_file_is_named_on_stderr_but_not_in_the_issues() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("brigde.json");
    let err = Bridge::load(&format!("@{}", path.display())).unwrap_err();
    assert!(matches!(err, LoadError::Read { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "reading bridge file {}: No such file or directory (os error 2)",
            path.display()
        )
    );
    let issues = err.issues();
    assert_eq!(crate::validate::code_paths(issues), [("unreadable", "")]);
    assert_eq!(
        issues[0].message,
        "the bridge file could not be read: No such file or directory (os error 2)"
    );
    let dir_text = dir.path().to_str().unwrap();
    assert!(issues.iter().all(|i| !i.message.contains(dir_text)));
}

#[test]
fn a_bridge_file_given_without_the_at_gets_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bridge.json");
    std::fs::write(&path, minimal().to_string()).unwrap();
    let arg = path.to_str().unwrap();
    let err = Bridge::load(arg).unwrap_err();
    assert_eq!(
        crate::validate::code_paths(err.issues()),
        [("json_syntax", "")]
    );
    let text = err.to_string();
    assert!(
        text.starts_with("parsing the bridge JSON: invalid JSON at line 1"),
        "{text}"
    );
    assert!(
        text.ends_with(&format!(" (did you mean @{arg}?)")),
        "{text}"
    );
    assert!(!err.issues()[0].message.contains(arg));
    // Not a file: no hint.
    let err = Bridge::load("not-a-file.json").unwrap_err();
    assert!(!err.to_string().contains("did you mean"), "{err}");
    // A file's own parse error names the file.
    std::fs::write(&path, "{").unwrap();
    let err = Bridge::load(&format!("@{arg}")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("parsing bridge file {arg}: ")),
        "{err}"
    );
    let err = Bridge::load(&format!("@{}", dir.path().display())).unwrap_err();
    assert!(err.to_string().starts_with("reading bridge file "), "{err}");
}

#[test]
fn endpoint_bridges_name_variables_and_leave_the_method_to_dispatch_time() {
    let mut v = minimal();
    v["dispatcher"]["mode"] = json!("host_endpoint");
    v["dispatcher"]["endpoint"] = json!({"url_env": "EP_URL", "token_env": "EP_TOKEN"});
    let b = bridge(v.clone()).unwrap();
    let spec = b.endpoint.unwrap();
    assert_eq!(
        (spec.url_env.as_str(), spec.method.as_str()),
        ("EP_URL", "POST")
    );
    assert_eq!(b.token_env.as_deref(), Some("EP_TOKEN"));
    // Any string is well-formed here; only POST is sent (endpoint_unconfigured otherwise).
    v["dispatcher"]["endpoint"]["method"] = json!("GET");
    assert_eq!(bridge(v.clone()).unwrap().endpoint.unwrap().method, "GET");

    v["dispatcher"]["endpoint"] = json!({"url_env": "not a name", "method": 1});
    let issues = bridge(v.clone()).unwrap_err();
    let got = crate::validate::code_paths(&issues);
    assert!(
        got.contains(&("invalid_env_name", "/dispatcher/endpoint/url_env")),
        "{got:?}"
    );
    assert!(
        got.contains(&("wrong_type", "/dispatcher/endpoint/method")),
        "{got:?}"
    );
    v["dispatcher"].as_object_mut().unwrap().remove("endpoint");
    let issues = bridge(v).unwrap_err();
    let got = crate::validate::code_paths(&issues);
    assert!(
        got.contains(&("missing", "/dispatcher/endpoint")),
        "{got:?}"
    );
}

#[test]
fn bridge_ref_ignores_key_order_and_whitespace() {
    let a = bridge(minimal()).unwrap().bridge_ref();
    let text = serde_json::to_string_pretty(&minimal()).unwrap();
    let parsed: Map<String, Value> = serde_json::from_str(&text).unwrap();
    let reordered: Map<String, Value> = parsed.into_iter().rev().collect();
    let b = Bridge::from_json(reordered).unwrap().bridge_ref();
    assert_eq!(a, b);
    assert!(a.starts_with("sha256:") && a.len() == 7 + 64);
}
