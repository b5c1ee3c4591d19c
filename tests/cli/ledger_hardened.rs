//! The ledger, hardened (SPEC §14.4), through the binary: budgets belong to the host's
//! `--session`, host-side failures are not final, the chain covers the stored envelopes, only
//! the dispatcher's own file is a ledger, and a ledger file stands alone after use.

use super::ledger_rules::Setup;
use super::*;

/// The default request with another request id and sandbox session id.
fn call(request_id: &str, session: &str) -> impl FnOnce(&mut Value) {
    let (request_id, session) = (request_id.to_string(), session.to_string());
    move |r: &mut Value| {
        r["request_id"] = json!(request_id);
        r["sandbox_session"]["sandbox_session_id"] = json!(session);
    }
}

#[test]
fn budgets_count_the_hosts_session_and_a_made_up_session_id_is_denied() {
    let s = Setup::new();
    let budget = ["--session", "sandbox_123", "--budget-calls", "1"];
    s.dispatch(&["echo"])
        .args(&budget)
        .request(call("call-0", "sandbox_123"))
        .run()
        .expect("succeeded", None, 0);
    // Before --session, each made-up id had a budget of its own: three more calls ran.
    for n in 1..4 {
        let run = s
            .dispatch(&["echo"])
            .args(&budget)
            .request(call(&format!("call-{n}"), &format!("made-up-{n}")))
            .run();
        run.expect("denied", Some("session_mismatch"), 77);
        assert_eq!(run.envelope["error"]["retryable"], false);
        assert_eq!(run.dispatch()["adapter_started"], false);
    }
    s.dispatch(&["echo"])
        .args(&budget)
        .request(call("call-4", "sandbox_123"))
        .run()
        .expect("denied", Some("budget_exhausted"), 77);
    assert_eq!(s.runs(), 1);
    let got: Vec<(String, String)> = s
        .records()
        .iter()
        .map(|r| (r["decision"].to_string(), r["rule"].to_string()))
        .collect();
    let want = |d: &str, r: &str| (format!("\"{d}\""), format!("\"{r}\""));
    assert_eq!(
        got,
        [
            want("admit", "bridge.allowed_tools"),
            want("deny", "session"),
            want("deny", "session"),
            want("deny", "session"),
            want("deny", "budget:calls"),
        ]
    );
    s.verify(5);
}

#[test]
fn the_session_check_applies_without_a_ledger_and_the_variable_names_the_session() {
    let s = Setup::new();
    Dispatch::with_bridge(s.bridge(&["echo"]))
        .args(&["--session", "another"])
        .run()
        .expect("denied", Some("session_mismatch"), 77);
    Dispatch::with_bridge(s.bridge(&["echo"]))
        .env("PARENT_TOOL_DISPATCH_SESSION", "another")
        .run()
        .expect("denied", Some("session_mismatch"), 77);
    assert_eq!(s.runs(), 0);
    Dispatch::with_bridge(s.bridge(&["echo"]))
        .env("PARENT_TOOL_DISPATCH_SESSION", "sandbox_123")
        .run()
        .expect("succeeded", None, 0);
    assert_eq!(s.runs(), 1);
    assert!(!s.ledger.exists());
}

#[test]
fn a_budget_without_the_hosts_session_and_a_bad_session_id_are_usage_errors() {
    let s = Setup::new();
    for budget in [
        &["--budget-calls", "3"][..],
        &["--budget-tool", "workspace.read=1"],
        &["--budget-adapter-ms", "100"],
        &["--max-concurrent", "2"],
    ] {
        let run = s.dispatch(&["echo"]).args(budget).run();
        run.output().exit(2).stdout_empty().stderr_eq(format!(
            "error[usage]: {} needs the host's session: pass --session ID or set \
             PARENT_TOOL_DISPATCH_SESSION\n\nFor more information, try '--help'.\n",
            budget[0]
        ));
    }
    let long = "x".repeat(257);
    for (session, why) in [
        ("", "the session id is empty"),
        (long.as_str(), "the session id is longer than 256 bytes"),
        ("a\tb", "the session id holds a control character"),
    ] {
        let run = s
            .dispatch(&["echo"])
            .args(&["--session", session, "--budget-calls", "1"])
            .run();
        run.output().exit(2).stdout_empty().stderr_eq(format!(
            "error[usage]: invalid value for --session: {why}\n\nFor more information, try \
             '--help'.\n"
        ));
    }
    assert_eq!(s.runs(), 0);
    assert!(!s.ledger.exists());
}

#[test]
fn a_host_side_failure_is_not_final_and_runs_once_the_host_fixed_it() {
    let s = Setup::new();
    let cwd = s.dir.path().join("work");
    let with_cwd = |b: &mut Value| b["dispatcher"]["command"]["cwd_env"] = json!("ADAPTER_CWD");
    let first = s
        .dispatch(&["echo"])
        .bridge(with_cwd)
        .env("ADAPTER_CWD", cwd.to_str().unwrap())
        .run();
    first.expect("unavailable", Some("cwd_unavailable"), 69);
    assert_eq!(s.runs(), 0);
    std::fs::create_dir(&cwd).unwrap();
    let fixed = s
        .dispatch(&["echo"])
        .bridge(with_cwd)
        .env("ADAPTER_CWD", cwd.to_str().unwrap())
        .run();
    fixed.expect("succeeded", None, 0);
    assert_eq!(
        fixed.envelope["diagnostics"]["ledger"],
        json!({"replayed": false, "attempt": 2})
    );
    assert_eq!(s.runs(), 1);
    // And now it is final.
    let again = s
        .dispatch(&["echo"])
        .bridge(with_cwd)
        .env("ADAPTER_CWD", cwd.to_str().unwrap())
        .run();
    again.expect("succeeded", None, 0);
    assert_eq!(again.envelope["diagnostics"]["ledger"]["replayed"], true);
    assert_eq!(s.runs(), 1);
    s.verify(3);
}

#[test]
fn a_missing_adapter_is_not_final_either() {
    let s = Setup::new();
    let missing = s.dir.path().join("adapter");
    let argv = |b: &mut Value| {
        b["dispatcher"]["command"]["argv"] = json!([s.dir.path().join("adapter")]);
    };
    let first = s.dispatch(&["echo"]).bridge(argv).run();
    first.expect("unavailable", Some("adapter_not_found"), 69);
    std::fs::write(&missing, "#!/bin/sh\nexit 3\n").unwrap();
    let second = s.dispatch(&["echo"]).bridge(argv).run();
    second.expect("unavailable", Some("adapter_not_executable"), 69);
    assert_eq!(second.envelope["diagnostics"]["ledger"]["attempt"], 2);
    let records = s.records();
    assert_eq!(records.len(), 2);
    assert_eq!(records[1]["attempt"], 2);
}

#[test]
fn an_edited_stored_envelope_fails_verify_and_is_never_replayed() {
    let s = Setup::new();
    s.dispatch(&["echo"]).run().expect("succeeded", None, 0);
    s.verify(1);
    // Whoever can write the file makes the replay say something else.
    let edited = rusqlite::Connection::open(&s.ledger)
        .unwrap()
        .execute(
            "UPDATE calls SET envelope = replace(envelope, '\"succeeded\"', '\"forged\"')",
            [],
        )
        .unwrap();
    assert_eq!(edited, 1);
    Cmd::new(["audit", "verify", "--ledger", s.path()])
        .run()
        .exit(1)
        .stdout_json(|v| {
            assert_eq!(v["intact"], false);
            assert_eq!(v["records_intact"], 1);
            assert_eq!(v["first_bad"]["seq"], 1);
        })
        .stderr_eq(
            "error[audit_chain_broken]: record 1: the envelope stored with this record does \
             not match it (edited)\n",
        );
    let replay = s.dispatch(&["echo"]).run();
    replay.expect("unavailable", Some("ledger_unavailable"), 69);
    let message = replay.envelope["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("the ledger fails verification: record 1: the stored envelope does not match its audit record (edited)"),
        "{message}"
    );
    assert!(!replay.stdout.contains("forged"));
    assert_eq!(s.runs(), 1);
}
