//! `diagnostics.dispatch.resources` (SPEC §13 "Reported"): what the adapter's whole tree used,
//! for every run of the main job and `delegation run`, confined or not, failures included.
//! Bounds are generous: what is asserted is where the numbers come from, never speed.

use super::*;

const MIB: u64 = 1 << 20;

fn resources(dispatch: &Value) -> (u64, u64, u64) {
    let r = &dispatch["resources"];
    let field = |name: &str| {
        r[name]
            .as_u64()
            .unwrap_or_else(|| panic!("resources.{name} in {dispatch:#}"))
    };
    (field("max_rss_bytes"), field("user_ms"), field("system_ms"))
}

#[test]
fn a_grandchild_that_touches_50_mib_shows_in_max_rss() {
    // The grandchild allocates, exits and is reaped by the dispatcher (the subreaper) only
    // after the adapter is gone: its usage still counts.
    let run = Dispatch::adapter(&["spawn:alloc:50", "sleep:1500", "read-stdin", "echo"]).run();
    run.expect("succeeded", None, 0);
    let (max_rss, _, _) = resources(run.dispatch());
    assert!(max_rss >= 50 * MIB, "max_rss_bytes {max_rss}");

    // Without it the tree stays well below: the figure is the grandchild's.
    let plain = Dispatch::adapter(&["read-stdin", "echo"]).run();
    plain.expect("succeeded", None, 0);
    let (small, _, _) = resources(plain.dispatch());
    assert!(small > 0 && small < 40 * MIB, "max_rss_bytes {small}");
}

#[test]
fn a_busy_adapter_shows_user_time() {
    let run = Dispatch::adapter(&["busy:400", "read-stdin", "echo"]).run();
    run.expect("succeeded", None, 0);
    let (_, user_ms, _) = resources(run.dispatch());
    assert!(user_ms > 0, "user_ms {user_ms}");
}

#[test]
fn resources_are_reported_for_a_timeout_and_a_nonzero_exit() {
    let run = Dispatch::adapter(&["alloc:50", "busy:20000"])
        .bridge(|b| b["dispatcher"]["timeout_ms"] = json!(800))
        .args(&["--kill-grace-ms", "200"])
        .run();
    run.expect("timeout", Some("dispatch_timeout"), 124);
    let (max_rss, user_ms, _) = resources(run.dispatch());
    assert!(max_rss >= 50 * MIB, "max_rss_bytes {max_rss}");
    assert!(user_ms > 0, "user_ms {user_ms}");

    let run = Dispatch::adapter(&["read-stdin", "alloc:50", "exit:3"]).run();
    run.expect("failed", Some("adapter_exit_nonzero"), 1);
    let (max_rss, _, _) = resources(run.dispatch());
    assert!(max_rss >= 50 * MIB, "max_rss_bytes {max_rss}");
}

#[test]
fn delegation_run_reports_the_trees_resources_on_success_and_failure() {
    let request = json!({"goal": "g", "request_id": "r-1"});
    let ptd_test = test_bin().display().to_string();
    for (steps, exit) in [
        (vec!["spawn:alloc:50", "sleep:1500", "delegation-echo"], 0),
        (vec!["alloc:50", "exit:3"], 1),
    ] {
        let mut args = vec!["delegation", "run", "--", &ptd_test, "adapter"];
        args.extend(steps.iter().copied());
        let out = Cmd::new(args).stdin(request.to_string()).run();
        out.exit(exit);
        if exit == 0 {
            out.stderr_empty();
        } else {
            out.stderr_contains("error[wp_codebox_host_delegation_");
        }
        let envelope = out.json();
        let (max_rss, _, _) = resources(&envelope["diagnostics"]["dispatch"]);
        assert!(max_rss >= 50 * MIB, "max_rss_bytes {max_rss}: {envelope:#}");
    }
}

#[test]
fn a_delegation_that_never_started_has_no_resources() {
    let out = Cmd::new(["delegation", "run", "--", "/nonexistent/adapter"])
        .stdin(json!({"goal": "g"}).to_string())
        .run();
    out.exit(69)
        .stderr_contains("error[wp_codebox_host_delegation_unavailable]");
    let envelope = out.json();
    assert!(envelope.get("diagnostics").is_none(), "{envelope:#}");
}
