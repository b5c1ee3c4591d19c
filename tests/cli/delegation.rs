//! Host delegation (SPEC §8): `delegation check-request`, `check-result` and `run`.
//!
//! The self-describing cases in `fixtures/delegation/cases/` (request, adapter answer, expected
//! outcome) are replayed here through the real binary, the adapter played by `ptd-test adapter`;
//! the tests below them cover what a case file cannot say (time, signals, leftovers, caps,
//! redaction). The code table, the generated schemas and the docs' examples are checked in
//! `delegation_docs.rs`.

use super::*;
use parent_tool_dispatch::delegation::codes::{Code, DelegationStatus, ISSUE_CODES};

/// Slack on top of a time bound, for a loaded 2-core machine.
const MARGIN: Duration = Duration::from_millis(1500);

pub(super) fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn delegation(args: &[&str], stdin: &[u8]) -> Output {
    delegation_env(args, stdin, &[])
}

fn delegation_env(args: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> Output {
    let mut cmd = Cmd::new(["delegation"]).args(args).stdin(stdin);
    for (name, value) in env {
        cmd = cmd.env(name, value);
    }
    cmd.run()
}

/// `run [OPTIONS] -- <the test adapter with steps>`, the request on stdin.
pub(super) fn run_adapter(options: &[&str], request: &Value, steps: &[&str]) -> Output {
    run_adapter_env(options, request, steps, &[])
}

fn run_adapter_env(
    options: &[&str],
    request: &Value,
    steps: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let ptd_test = test_bin().display().to_string();
    let mut args = vec!["run"];
    args.extend_from_slice(options);
    args.extend_from_slice(&["--", &ptd_test, "adapter"]);
    args.extend_from_slice(steps);
    delegation_env(&args, request.to_string().as_bytes(), env)
}

/// The example request of `fixtures/delegation/request.json`.
pub(super) fn example_request() -> Value {
    let text = std::fs::read_to_string(root().join("fixtures/delegation/request.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn events(envelope: &Value) -> Vec<String> {
    envelope["events"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["event"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// `(code, path)` of every issue in a list.
fn code_paths(issues: &Value) -> Vec<(String, String)> {
    issues
        .as_array()
        .map(|a| {
            a.iter()
                .map(|i| {
                    (
                        i["code"].as_str().unwrap_or("").to_string(),
                        i["path"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Every key of `want` is in `got` with a matching value (arrays match whole).
fn subset(want: &Value, got: &Value, at: &str, diffs: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, v) in w {
                match g.get(k) {
                    Some(gv) => subset(v, gv, &format!("{at}/{k}"), diffs),
                    None => diffs.push(format!("{at}/{k}: missing, want {v}")),
                }
            }
        }
        _ if want == got => {}
        _ => diffs.push(format!("{at}: want {want}, got {got}")),
    }
}

/// The invariants of every printed envelope, whatever happened.
fn check_envelope_shape(e: &Value, diffs: &mut Vec<String>) {
    let mut need = |ok: bool, what: &str| {
        if !ok {
            diffs.push(format!("shape: {what}: {e}"));
        }
    };
    need(
        e["schema"] == "wp-codebox/host-delegation-result/v1",
        "schema",
    );
    need(e["execution"] == "host-delegation", "execution");
    let status = e["status"].as_str().and_then(DelegationStatus::parse);
    need(status.is_some(), "status in the set");
    let success = e["success"].as_bool();
    need(
        success == status.map(DelegationStatus::is_success),
        "success follows the status",
    );
    need(e["request_id"].as_str().is_some(), "request_id");
    need(
        e["request"].is_object() || e["request"].is_null(),
        "request",
    );
    if success == Some(false) {
        need(e.get("result").is_none(), "a failure carries no result");
    }
    let list = e["events"].as_array().cloned().unwrap_or_default();
    need(list.len() == 2, "two events");
    need(
        list.first().map(|v| &v["event"]) == Some(&json!("host-delegation.requested")),
        "requested first",
    );
    if let (Some(last), Some(status)) = (list.last(), status) {
        need(
            last["event"] == status.final_event().as_str(),
            "the last event follows the status",
        );
        need(last["status"] == status.as_str(), "the last event's status");
    }
    for event in &list {
        need(
            event["schema"] == "wp-codebox/host-delegation-event/v1",
            "event schema",
        );
        need(event["request_id"] == e["request_id"], "event request_id");
        need(is_rfc3339_millis(&event["time"]), "event time");
    }
    need(
        is_rfc3339_millis(&e["timings"]["started_at"])
            && is_rfc3339_millis(&e["timings"]["ended_at"])
            && e["timings"]["duration_ms"].is_u64(),
        "timings",
    );
}

/// `2026-01-02T03:04:05.678Z`.
fn is_rfc3339_millis(v: &Value) -> bool {
    let Some(s) = v.as_str() else { return false };
    let b = s.as_bytes();
    b.len() == 24
        && b[4] == b'-'
        && b[10] == b'T'
        && b[19] == b'.'
        && b[23] == b'Z'
        && humantime::parse_rfc3339(s).is_ok()
}

/// Replay one case file; the differences from its expectation.
fn replay(path: &Path) -> Vec<String> {
    let case: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(case["schema"], "parent-tool-dispatch/delegation-case/v1");
    let request_text = match (&case["request"], &case["request_text"]) {
        (Value::Null, Value::String(text)) => text.clone(),
        (Value::Null, _) => example_request().to_string(),
        (request, _) => request.to_string(),
    };
    let answer_text = match (&case["answer"], &case["answer_text"]) {
        (Value::Null, Value::String(text)) => Some(text.clone()),
        (Value::Null, _) => None,
        (answer, _) => Some(format!("{answer}\n")),
    };
    let expect = &case["expect"];
    let dir = tempfile::tempdir().unwrap();
    let out = match case["command"].as_str().unwrap() {
        "run" => {
            let ptd_test = test_bin().display().to_string();
            let print = format!("print:{}", answer_text.unwrap_or_default());
            let exit = format!("exit:{}", case["adapter_exit"].as_u64().unwrap_or(0));
            let args = [
                "run",
                "--",
                &ptd_test,
                "adapter",
                "read-stdin",
                &print,
                &exit,
            ];
            delegation(&args, request_text.as_bytes())
        }
        "check-request" => delegation(&["check-request"], request_text.as_bytes()),
        "check-result" => {
            let file = dir.path().join("request.json");
            std::fs::write(&file, &request_text).unwrap();
            let answer = answer_text.unwrap_or_default();
            delegation(
                &["check-result", "--request", file.to_str().unwrap()],
                answer.as_bytes(),
            )
        }
        other => panic!("unknown command {other}"),
    };
    let mut diffs = Vec::new();
    let mut exit = 0;
    out.exit_with(|code| {
        exit = code;
        if Some(i64::from(code)) != expect["exit"].as_i64() {
            diffs.push(format!("exit: want {}, got {code}", expect["exit"]));
        }
    });
    let got = out.json();
    let issues = if case["command"] == "run" {
        check_envelope_shape(&got, &mut diffs);
        for (key, actual) in [
            ("status", got["status"].clone()),
            ("success", got["success"].clone()),
            ("error_code", got["error"]["code"].clone()),
            ("retryable", got["error"]["retryable"].clone()),
            ("has_result", json!(got.get("result").is_some())),
            ("events", json!(events(&got))),
        ] {
            if let Some(want) = expect.get(key) {
                if *want != actual {
                    diffs.push(format!("{key}: want {want}, got {actual}"));
                }
            }
        }
        if let Some(want) = expect.get("envelope") {
            subset(want, &got, "", &mut diffs);
        }
        // A failure the dispatcher decided is on stderr too; a success says nothing there.
        let stderr_want = match got["error"]["code"].as_str() {
            Some(code) => format!("error[{code}]: "),
            None => String::new(),
        };
        out.stderr_with(|stderr| {
            if !stderr.starts_with(&stderr_want) || (stderr_want.is_empty() && !stderr.is_empty()) {
                diffs.push(format!("stderr: want {stderr_want:?}…, got {stderr:?}"));
            }
        });
        got["error"]["data"]["issues"].clone()
    } else {
        if got["valid"] != json!(exit == 0) {
            diffs.push(format!("valid disagrees with the exit status: {got}"));
        }
        out.stderr_with(|stderr| {
            if !stderr.is_empty() {
                diffs.push(format!("stderr: {stderr:?}"));
            }
        });
        got["issues"].clone()
    };
    if let Some(want) = expect.get("issues") {
        if code_paths(want) != code_paths(&issues) {
            diffs.push(format!("issues: want {want}, got {issues}"));
        }
    }
    diffs
        .into_iter()
        .map(|d| format!("{}: {d}", path.file_name().unwrap().to_string_lossy()))
        .collect()
}

#[test]
fn every_fixture_case_replays() {
    let dir = root().join("fixtures/delegation/cases");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".case.json"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 20, "{paths:?}");
    let failures: Vec<String> = paths.iter().flat_map(|p| replay(p)).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_failure_code_and_issue_code_has_a_fixture_case() {
    let mut seen = String::new();
    for entry in std::fs::read_dir(root().join("fixtures/delegation/cases")).unwrap() {
        seen.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    // Timeout and interruption need a clock and a signal: they have tests of their own below;
    // an adapter missing needs no answer at all.
    let elsewhere = [Code::Timeout, Code::Interrupted, Code::Unavailable];
    for code in Code::ALL.into_iter().filter(|c| !elsewhere.contains(c)) {
        assert!(seen.contains(&format!("\"{code}\"")), "no case for {code}");
    }
    for code in ISSUE_CODES {
        assert!(seen.contains(&format!("\"{code}\"")), "no case for {code}");
    }
}

#[test]
fn the_adapter_gets_the_request_on_stdin_and_a_rebuilt_environment() {
    let mut request = example_request();
    request.as_object_mut().unwrap().remove("request_id");
    request.as_object_mut().unwrap().remove("schema");
    let out = run_adapter_env(
        &["--pass-env", "DELEGATION_PASSED", "--timeout-ms", "20000"],
        &request,
        &["delegation-echo"],
        &[
            ("DELEGATION_PASSED", "yes"),
            ("DELEGATION_HOST_ONLY", "never-seen"),
        ],
    );
    let e = out.exit(0).stderr_empty().json();
    let mut diffs = Vec::new();
    check_envelope_shape(&e, &mut diffs);
    assert!(diffs.is_empty(), "{diffs:?}");

    // A generated id, given to the adapter in the request and in its environment.
    let id = e["request_id"].as_str().unwrap();
    assert!(id.starts_with("hd-"), "{id}");
    let seen = &e["result"]["request"];
    assert_eq!(seen["request_id"], id);
    assert_eq!(seen["schema"], "wp-codebox/host-delegation-request/v1");
    assert_eq!(seen["goal"], request["goal"]);
    assert_eq!(seen["source_digest"], request["source_digest"]);
    assert_eq!(
        e["request"], *seen,
        "the envelope echoes what the adapter got"
    );
    assert_eq!(e["result"]["newline"], true);

    let env = e["result"]["env"].as_object().unwrap();
    assert_eq!(env["WP_CODEBOX_HOST_DELEGATION_REQUEST_ID"], id);
    assert_eq!(env["WP_CODEBOX_HOST_DELEGATION_TIMEOUT_MS"], "20000");
    assert_eq!(
        env["WP_CODEBOX_HOST_DELEGATION_REQUEST_SCHEMA"],
        "wp-codebox/host-delegation-request/v1"
    );
    assert_eq!(
        env["WP_CODEBOX_HOST_DELEGATION_RESULT_SCHEMA"],
        "wp-codebox/host-delegation-result/v1"
    );
    assert_eq!(env["DELEGATION_PASSED"], "yes");
    assert!(!env.contains_key("DELEGATION_HOST_ONLY"), "{env:?}");
    let allowed = [
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TZ",
        "TMPDIR",
        "DELEGATION_PASSED",
    ];
    for name in env.keys() {
        assert!(
            allowed.contains(&name.as_str()) || name.starts_with("WP_CODEBOX_HOST_DELEGATION_"),
            "the adapter inherited {name}"
        );
    }
    assert_eq!(e["provider"], "test-adapter");
    assert_eq!(e["events"][1]["provider"], "test-adapter");
}

#[test]
fn the_request_comes_from_a_file_or_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("request.json");
    std::fs::write(&file, example_request().to_string()).unwrap();
    let ptd_test = test_bin().display().to_string();
    for (request_arg, stdin) in [
        (Some(file.to_str().unwrap()), "not read".as_bytes()),
        (
            Some("-"),
            example_request().to_string().into_bytes().leak() as &[u8],
        ),
        (
            None,
            example_request().to_string().into_bytes().leak() as &[u8],
        ),
    ] {
        let mut args = vec!["run"];
        if let Some(r) = request_arg {
            args.extend(["--request", r]);
        }
        args.extend(["--", &ptd_test, "adapter", "delegation-echo"]);
        let out = delegation(&args, stdin);
        let e = out.exit(0).stderr_empty().json();
        assert_eq!(e["status"], "completed", "{e}");
        assert_eq!(e["request_id"], "hd-demo-1");
    }
    let out = delegation(
        &[
            "run",
            "--request",
            "/nonexistent/request.json",
            "--",
            &ptd_test,
        ],
        b"",
    );
    // stderr names the file for the operator.
    let e = out
        .exit(65)
        .stderr_starts_with("error[wp_codebox_host_delegation_request_invalid]: ")
        .stderr_contains("/nonexistent/request.json")
        .json();
    assert_eq!(
        e["error"]["code"],
        "wp_codebox_host_delegation_request_invalid"
    );
    assert_eq!(e["request"], Value::Null);
    assert!(
        !e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent"),
        "no host path in the envelope: {e}"
    );
}

#[test]
fn a_request_over_the_cap_is_invalid_and_nothing_runs() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let mut request = example_request();
    request["context"] = json!({"blob": "x".repeat(4096)});
    let out = run_adapter(
        &["--max-request-bytes", "1024"],
        &request,
        &[&format!("pidfile:{}", marker.display()), "delegation-echo"],
    );
    let e = out
        .exit(65)
        .stderr_starts_with("error[wp_codebox_host_delegation_request_invalid]: ")
        .json();
    assert_eq!(
        e["error"]["code"],
        "wp_codebox_host_delegation_request_invalid"
    );
    assert!(
        e["error"]["message"].as_str().unwrap().contains("1 KiB"),
        "{e}"
    );
    assert!(!marker.exists(), "the adapter ran");
}

#[test]
fn an_adapter_that_times_out_is_failed_retryable_with_exit_124() {
    let p = tempfile::tempdir().unwrap();
    let pids = p.path().join("pids");
    let out = run_adapter(
        &["--timeout-ms", "300", "--kill-grace-ms", "300"],
        &example_request(),
        &[
            &format!("pidfile:{}", pids.display()),
            "ignore-term",
            "read-stdin",
            "sleep:60000",
        ],
    );
    let e = out
        .exit(124)
        .stderr_starts_with(
            "error[wp_codebox_host_delegation_timeout]: the host adapter did not answer within 300 ms",
        )
        .json();
    assert_eq!(e["status"], "failed");
    assert_eq!(e["success"], false);
    assert_eq!(e["error"]["code"], "wp_codebox_host_delegation_timeout");
    assert_eq!(e["error"]["retryable"], true);
    assert!(e.get("result").is_none());
    assert_eq!(
        events(&e),
        ["host-delegation.requested", "host-delegation.failed"]
    );
    assert!(
        out.elapsed() < Duration::from_millis(300 + 300) + ptd_sys::exec::AFTER_LADDER + MARGIN,
        "{:?}",
        out.elapsed()
    );
    assert_all_gone(&pids);
}

#[test]
fn an_answer_over_the_cap_stops_the_adapter_at_the_cap() {
    // The adapter would write 1 GiB and then sleep for a minute: only stopping it at the cap
    // returns quickly, and only reading at most the cap keeps the envelope small.
    let out = run_adapter(
        &["--max-output-bytes", "65536", "--timeout-ms", "60000"],
        &example_request(),
        &["flood:1073741824", "sleep:60000"],
    );
    let e = out
        .exit(1)
        .stderr_starts_with(
            "error[wp_codebox_host_delegation_provider_result_invalid]: the host adapter's answer is over the 64 KiB limit",
        )
        .stdout_with(|stdout| assert!(stdout.len() < 16 * 1024, "{} bytes", stdout.len()))
        .json();
    assert_eq!(
        e["error"]["code"],
        "wp_codebox_host_delegation_provider_result_invalid"
    );
    assert_eq!(e["error"]["data"]["max_output_bytes"], 65536);
    let read = e["error"]["data"]["stdout_bytes"].as_u64().unwrap();
    assert!(read > 65536, "{e}");
    assert!(e.get("result").is_none());
    assert!(
        out.elapsed() < Duration::from_secs(10),
        "{:?}",
        out.elapsed()
    );
}

#[test]
fn a_missing_or_unexecutable_adapter_is_unavailable_with_exit_69() {
    let dir = tempfile::tempdir().unwrap();
    let not_executable = dir.path().join("adapter.sh");
    std::fs::write(&not_executable, "#!/bin/sh\n").unwrap();
    for (argv0, what) in [
        ("/nonexistent/delegation-adapter", "was not found"),
        ("no-such-delegation-adapter-on-path", "was not found"),
        (
            not_executable.to_str().unwrap(),
            "could not be started: it has no execute permission for this user (chmod +x)",
        ),
    ] {
        let out = delegation(
            &["run", "--", argv0],
            example_request().to_string().as_bytes(),
        );
        let e = out
            .exit(69)
            .stderr_eq(format!(
                "error[wp_codebox_host_delegation_unavailable]: the host adapter {argv0:?} {what}\n"
            ))
            .json();
        assert_eq!(e["status"], "unavailable");
        assert_eq!(e["error"]["code"], "wp_codebox_host_delegation_unavailable");
        assert_eq!(e["error"]["message"], format!("the host adapter {what}"));
        assert_eq!(
            events(&e),
            ["host-delegation.requested", "host-delegation.unavailable"]
        );
    }
}

#[test]
fn an_adapter_killed_by_a_signal_gives_no_answer() {
    let out = run_adapter(
        &[],
        &example_request(),
        &["read-stdin", "eprint:about to crash\n", "raise:9"],
    );
    let e = out
        .exit(1)
        .stderr_starts_with("error[wp_codebox_host_delegation_provider_result_invalid]: ")
        .json();
    assert_eq!(
        e["error"]["code"],
        "wp_codebox_host_delegation_provider_result_invalid"
    );
    assert_eq!(e["error"]["data"]["signal"], "SIGKILL");
    assert_eq!(e["error"]["data"]["stderr_tail"], "about to crash\n");
}

#[test]
fn sigterm_to_the_dispatcher_stops_the_adapter_and_reports_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let ptd_test = test_bin().display().to_string();
    let pid_step = format!("pidfile:{}", pids.display());
    let grandchild = format!("spawn-setsid:{pid_step}+sleep:60000");
    let running = Cmd::new(["delegation", "run", "--kill-grace-ms", "300", "--"])
        .args([
            &ptd_test,
            "adapter",
            &pid_step,
            &grandchild,
            "read-stdin",
            "sleep:60000",
        ])
        .stdin(example_request().to_string())
        .spawn();
    let until = Instant::now() + Duration::from_secs(10);
    while super::pids(&pids).len() < 2 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let sent = Instant::now();
    running.signal(rustix::process::Signal::TERM);
    let out = running.wait();
    assert!(sent.elapsed() < Duration::from_millis(300) + ptd_sys::exec::AFTER_LADDER + MARGIN);
    let e = out
        .exit(1)
        .stderr_starts_with(
            "error[wp_codebox_host_delegation_interrupted]: the dispatcher received SIGTERM",
        )
        .json();
    assert_eq!(e["error"]["code"], "wp_codebox_host_delegation_interrupted");
    assert_eq!(e["error"]["retryable"], true);
    assert_eq!(e["error"]["data"]["signal"], "SIGTERM");
    assert_eq!(
        events(&e),
        ["host-delegation.requested", "host-delegation.failed"]
    );
    assert_all_gone(&pids);
}

#[test]
fn a_signal_while_the_request_is_read_still_prints_an_envelope() {
    let running = Cmd::new(["delegation", "run", "--", "true"])
        .stdin_held()
        .spawn();
    std::thread::sleep(Duration::from_millis(300));
    running.signal(rustix::process::Signal::INT);
    let e = running
        .wait()
        .exit(1)
        .stderr_starts_with("error[wp_codebox_host_delegation_interrupted]: ")
        .stderr_contains("before the host adapter started")
        .json();
    assert_eq!(e["error"]["code"], "wp_codebox_host_delegation_interrupted");
    assert_eq!(e["request"], Value::Null);
}

#[test]
fn processes_the_adapter_leaves_behind_are_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let pid_step = format!("pidfile:{}", pids.display());
    let out = run_adapter(
        &[],
        &example_request(),
        &[
            &format!("spawn-setsid:{pid_step}+sleep:60000"),
            &format!("spawn:{pid_step}+ignore-term+sleep:60000"),
            "delegation-echo",
        ],
    );
    let e = out.exit(0).stderr_empty().json();
    assert_eq!(e["status"], "completed", "{e}");
    assert!(
        out.elapsed() < Duration::from_secs(10),
        "{:?}",
        out.elapsed()
    );
    assert_all_gone(&pids);
}

#[test]
fn secrets_and_host_paths_never_leave() {
    let secret = "s3cr3t-delegation-value-42";
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let mut request = example_request();
    request["context"] =
        json!({"api_key": "plain-request-secret", "note": format!("see {home}/notes")});
    let answer = json!({
        "status": "failed",
        "request_id": "hd-demo-1",
        "error": {"code": "provider_down", "message": format!("token={secret} at {home}/x")},
    });
    let out = run_adapter_env(
        &["--secret-env", "DELEGATION_SECRET"],
        &request,
        &[
            "read-stdin",
            &format!("eprint:using {secret} from {home}/.config\n"),
            &format!("print:{answer}"),
        ],
        &[("DELEGATION_SECRET", secret)],
    );
    let e = out
        .exit(1)
        .stderr_eq("error[provider_down]: token=[redacted] at [host-path]/x\n")
        .json();
    for text in [out.stdout(), out.stderr()] {
        assert!(!text.contains(secret), "{text}");
        assert!(!text.contains("plain-request-secret"), "{text}");
        assert!(!text.contains(&format!("{home}/")), "{text}");
    }
    assert_eq!(e["request"]["context"]["api_key"], "[redacted]");
    assert_eq!(e["error"]["code"], "provider_down");
    assert_eq!(e["error"]["message"], "token=[redacted] at [host-path]/x");

    // The adapter's stderr tail, on a failure the dispatcher decided.
    let out = run_adapter_env(
        &["--secret-env", "DELEGATION_SECRET"],
        &example_request(),
        &[
            "read-stdin",
            &format!("eprint:using {secret} from {home}/.config\n"),
            "print:oops",
        ],
        &[("DELEGATION_SECRET", secret)],
    );
    let e = out
        .exit(1)
        .stderr_starts_with("error[wp_codebox_host_delegation_provider_result_invalid]: ")
        .stderr_lacks(secret)
        .stderr_lacks(format!("{home}/"))
        .json();
    assert_eq!(
        e["error"]["data"]["stderr_tail"],
        "using [redacted] from [host-path]/.config\n"
    );
    assert_eq!(e["error"]["data"]["stdout_head"], "oops");

    // A success passes the result on with exact secrets scrubbed, the rest as written.
    let answer =
        json!({"status": "completed", "result": {"echo": secret, "api_key": "kept-as-payload"}});
    let out = run_adapter_env(
        &["--secret-env", "DELEGATION_SECRET"],
        &example_request(),
        &["read-stdin", &format!("print:{answer}")],
        &[("DELEGATION_SECRET", secret)],
    );
    let e = out.exit(0).stderr_empty().json();
    assert_eq!(
        e["result"],
        json!({"echo": "[redacted]", "api_key": "kept-as-payload"})
    );
}

#[test]
fn control_characters_in_an_answer_cannot_reach_the_terminal() {
    let answer = json!({"status": "failed", "error": {"code": "x\u{1b}[2J", "message": "a\u{1b}[31mred\rfake line"}});
    let out = run_adapter(
        &[],
        &example_request(),
        &["read-stdin", &format!("print:{answer}")],
    );
    out.exit(1)
        .stderr_lacks("\u{1b}")
        .stderr_lacks("\r")
        .stderr_eq("error[x\\x1b[2J]: a\\x1b[31mred\\rfake line\n");
    assert_eq!(out.json()["error"]["message"], "a\u{1b}[31mred\rfake line");
}

#[test]
fn check_commands_read_files_or_stdin_and_report_unreadable_ones() {
    let dir = tempfile::tempdir().unwrap();
    let request = dir.path().join("request.json");
    std::fs::write(&request, example_request().to_string()).unwrap();
    let answer = dir.path().join("answer.json");
    std::fs::write(
        &answer,
        r#"{"status":"completed","request_id":"hd-demo-1"}"#,
    )
    .unwrap();
    let r = request.to_str().unwrap();
    let a = answer.to_str().unwrap();

    for (args, stdin) in [
        (vec!["check-request", r], ""),
        (
            vec!["check-request", "-"],
            &*example_request().to_string().leak(),
        ),
        (vec!["check-result", "--request", r, a], ""),
        (
            vec!["check-result", "--request", r, "-"],
            r#"{"success":false}"#,
        ),
        (
            vec!["check-result", "--request", "-", a],
            &*example_request().to_string().leak(),
        ),
    ] {
        delegation(&args, stdin.as_bytes())
            .exit(0)
            .stdout_json(|v| assert_eq!(*v, json!({"valid": true, "issues": []}), "{args:?}"))
            .stderr_empty();
    }

    delegation(&["check-request", "/nonexistent/r.json"], b"")
        .exit(65)
        .stdout_json(|v| {
            assert_eq!(
                *v,
                json!({"valid": false, "issues": [{"code": "request-invalid", "path": "", "message": "the file could not be read: entity not found"}]})
            )
        })
        .stderr_empty();
    delegation(
        &["check-result", "--request", "/nonexistent/r.json", a],
        b"",
    )
    .exit(65)
    .stdout_json(|v| {
        assert_eq!(
            code_paths(&v["issues"]),
            [("request-invalid".into(), "/request".into())]
        )
    })
    .stderr_empty();
    delegation(
        &["check-result", "--request", r, "/nonexistent/a.json"],
        b"",
    )
    .exit(65)
    .stdout_json(|v| {
        assert_eq!(
            code_paths(&v["issues"]),
            [("result-invalid".into(), "".into())]
        )
    })
    .stderr_empty();

    delegation(
        &["check-request", "--max-bytes", "10"],
        example_request().to_string().as_bytes(),
    )
    .exit(65)
    .stdout_contains("over the 10 bytes limit")
    .stderr_empty();
    delegation(&["check-request"], br#"{"goal":"a","goal":"b"}"#)
        .exit(65)
        .stdout_contains("duplicate key")
        .stderr_empty();
    delegation(&["check-request"], b"\xff\xfe{}")
        .exit(65)
        .stdout_json(|v| {
            assert_eq!(
                code_paths(&v["issues"]),
                [("request-invalid".into(), "".into())]
            )
        })
        .stderr_empty();
}

#[test]
fn a_sensitive_pass_env_value_is_a_secret_as_in_the_main_job() {
    let token = "pass-env-token-value-0042";
    let answer = json!({
        "status": "failed",
        "request_id": "hd-demo-1",
        "error": {"code": "provider_down", "message": format!("rejected {token}")},
    });
    let out = run_adapter_env(
        &["--pass-env", "DELEGATION_API_TOKEN"],
        &example_request(),
        &[
            "read-stdin",
            &format!("eprint:with {token}\n"),
            &format!("print:{answer}"),
        ],
        &[("DELEGATION_API_TOKEN", token)],
    );
    let e = out
        .exit(1)
        .stderr_eq("error[provider_down]: rejected [redacted]\n")
        .json();
    assert_eq!(e["error"]["message"], "rejected [redacted]");
    assert!(!out.stdout().contains(token), "{}", out.stdout());
}

#[test]
fn check_result_accepts_the_envelope_run_prints() {
    let dir = tempfile::tempdir().unwrap();
    let request = dir.path().join("request.json");
    std::fs::write(&request, example_request().to_string()).unwrap();
    let out = run_adapter(&[], &example_request(), &["delegation-echo"]);
    out.exit(0).stderr_empty().json();
    delegation(
        &["check-result", "--request", request.to_str().unwrap()],
        out.stdout().as_bytes(),
    )
    .exit(0)
    .stdout_json(|v| assert_eq!(*v, json!({"valid": true, "issues": []})))
    .stderr_empty();
}

#[test]
fn usage_errors_print_no_envelope() {
    let request = example_request().to_string();
    for args in [
        vec!["run"],
        vec!["run", "--timeout-ms", "0", "--", "true"],
        vec!["check-result"],
        vec!["check-result", "--request", "-"],
        vec!["check-result", "--request", "-", "-"],
    ] {
        // clap's own `error: …`, or the dispatcher's `error[usage]: …`.
        delegation(&args, request.as_bytes())
            .exit(2)
            .stdout_empty()
            .stderr_with(|stderr| {
                assert!(
                    stderr.starts_with("error: ") || stderr.starts_with("error[usage]: "),
                    "{args:?}: {stderr}"
                )
            });
    }
}
