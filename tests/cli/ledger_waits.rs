//! The main job with `--ledger` while another dispatcher holds the key (SPEC §14.1), and what
//! an audit record says of the run's resources (SPEC §14.3): the wait ends on a signal, the
//! time spent waiting comes off the call's own timeout, and the record carries the adapter's
//! usage.

use super::ledger_rules::Setup;
use super::*;
use rustix::process::Signal;

/// SIGTERM to a dispatcher whose adapter runs: it ends `interrupted`, exit 1.
fn interrupt_holder(holder: Running) {
    holder.signal(Signal::TERM);
    holder
        .wait()
        .exit(1)
        .stderr_contains("error[interrupted]")
        .stdout_contains("\"code\":\"interrupted\"");
}

#[test]
fn a_signal_ends_the_wait_for_a_held_key_at_once_and_nothing_runs() {
    let s = Setup::new();
    let steps = ["sleep:30000", "echo"];
    let holder = s.command(&steps, "ptr_123").spawn();
    s.wait_runs(1);
    let waiter = s.command(&steps, "ptr_123").spawn();
    // Let the waiter reach its wait: the bridge gives it 30 s.
    std::thread::sleep(Duration::from_millis(1000));
    waiter.signal(Signal::TERM);
    let out = waiter.wait();
    assert!(
        out.elapsed() < Duration::from_secs(15),
        "the wait outlived the signal: {:?}",
        out.elapsed()
    );
    out.exit(1)
        .stderr_contains("error[interrupted]")
        .stdout_with(|text| {
            let envelope = json_line(text);
            assert_eq!(envelope["status"], "failed", "{envelope}");
            assert_eq!(envelope["error"]["code"], "interrupted", "{envelope}");
            assert_eq!(envelope["error"]["retryable"], true, "{envelope}");
            let message = envelope["error"]["message"].as_str().unwrap();
            assert!(message.contains("before the adapter started"), "{message}");
            assert_eq!(
                envelope["diagnostics"]["dispatch"]["adapter_started"],
                false
            );
        });
    assert_eq!(s.runs(), 1, "the waiter started nothing");
    // The holder is untouched by it and still holds the key.
    interrupt_holder(holder);
    let records = s.records();
    assert_eq!(records.len(), 2, "{records:?}");
    let waited = records
        .iter()
        .find(|r| r["decision"] == "refuse")
        .unwrap_or_else(|| panic!("no refusal on the record: {records:?}"));
    assert_eq!(waited["code"], "interrupted");
    assert_eq!(waited["rule"], "dispatch");
    s.verify(2);
}

#[test]
fn the_time_spent_waiting_for_a_holder_comes_off_the_adapters_timeout() {
    let s = Setup::new();
    let steps = ["sleep:30000", "echo"];
    let timeout = |b: &mut Value| b["dispatcher"]["timeout_ms"] = json!(20_000);
    let command = |s: &Setup| {
        let mut bridge = s.bridge(&steps);
        timeout(&mut bridge);
        Cmd::new(["--ledger", s.path(), "--parent-tool-bridge"])
            .arg(bridge.to_string())
            .stdin(request().to_string())
    };
    let holder = command(&s).spawn();
    s.wait_runs(1);
    let waiter = command(&s).spawn();
    // The waiter waits for the holder a second at least; then the holder is interrupted (a
    // retryable outcome: the key stays open) and the waiter runs the key itself, with what is
    // left of its own 20 s.
    std::thread::sleep(Duration::from_millis(1000));
    interrupt_holder(holder);
    s.wait_runs(2);
    waiter.signal(Signal::TERM);
    waiter
        .wait()
        .exit(1)
        .stderr_contains("error[interrupted]")
        .stdout_with(|text| {
            let envelope = json_line(text);
            assert_eq!(
                envelope["diagnostics"]["ledger"]["attempt"], 2,
                "{envelope}"
            );
            let cut = envelope["diagnostics"]["dispatch"]["timeout_ms"]
                .as_u64()
                .unwrap();
            assert!(
                (1..=19_000).contains(&cut),
                "the timeout was not cut by the wait: {envelope}"
            );
        });
    assert_eq!(s.runs(), 2);
}

#[test]
fn an_audit_record_holds_what_the_adapter_used() {
    let s = Setup::new();
    let said = "twenty-one bytes here";
    let run = s.dispatch(&[&format!("eprint:{said}"), "echo"]).run();
    run.expect("succeeded", None, 0);
    let printed = run.dispatch();
    let records = s.records();
    assert_eq!(records.len(), 1, "{records:?}");
    let resources = &records[0]["resources"];
    assert_eq!(resources["stderr_bytes"], said.len(), "{resources}");
    assert_eq!(
        resources["stdout_bytes"], printed["stdout_bytes"],
        "{resources}"
    );
    let tree = &printed["resources"];
    assert_eq!(
        resources["max_rss_kb"],
        tree["max_rss_bytes"].as_u64().unwrap() / 1024,
        "{resources} {tree}"
    );
    assert!(resources["max_rss_kb"].as_u64().unwrap() > 0, "{resources}");
    assert_eq!(resources["user_cpu_ms"], tree["user_ms"], "{resources}");
    assert_eq!(resources["system_cpu_ms"], tree["system_ms"], "{resources}");
    // A call that ran nothing has nothing to report.
    let replay = s.dispatch(&[&format!("eprint:{said}"), "echo"]).run();
    replay.expect("succeeded", None, 0);
    let records = s.records();
    assert_eq!(records[1]["decision"], "replay");
    let resources = &records[1]["resources"];
    for field in ["max_rss_kb", "user_cpu_ms", "stdout_bytes", "stderr_bytes"] {
        assert!(resources[field].is_null(), "{field}: {resources}");
    }
}
