//! Adapters that misbehave (SPEC §4.2–§4.3): the dispatcher returns within
//! `timeout_ms + kill_grace_ms + 250 ms`, kills what it started, and still prints one envelope.
//! Time bounds here carry generous margins: they check that it returned, not how fast.

use super::*;

/// Slack on top of the SPEC bound for a loaded 2-core CI machine.
const MARGIN: Duration = Duration::from_millis(1500);

fn with_timeout(d: Dispatch, timeout_ms: u64) -> Dispatch {
    d.bridge(move |b| b["dispatcher"]["timeout_ms"] = json!(timeout_ms))
}

fn bound(timeout_ms: u64, grace_ms: u64) -> Duration {
    Duration::from_millis(timeout_ms + grace_ms + 250) + MARGIN
}

struct Pids {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Pids {
    fn new() -> Pids {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pids");
        Pids { _dir: dir, path }
    }
    fn step(&self) -> String {
        format!("pidfile:{}", self.path.display())
    }
    /// A step that starts a copy of the adapter which records its pid and then runs `then`.
    fn spawn(&self, kind: &str, then: &str) -> String {
        format!("{kind}:{}+{then}", self.step())
    }
    fn assert_gone(&self, expected: usize) {
        let pids = pids(&self.path);
        assert_eq!(
            pids.len(),
            expected,
            "processes that recorded themselves: {pids:?}"
        );
        assert_all_gone(&self.path);
    }
}

#[test]
fn sleeping_adapter_times_out_with_124() {
    let p = Pids::new();
    let run = with_timeout(Dispatch::adapter(&[&p.step(), "sleep:60000"]), 300)
        .args(&["--kill-grace-ms", "500"])
        .run();
    run.expect("timeout", Some("dispatch_timeout"), 124);
    assert_eq!(run.envelope["error"]["retryable"], true);
    assert!(
        run.elapsed >= Duration::from_millis(300),
        "{:?}",
        run.elapsed
    );
    assert!(run.elapsed < bound(300, 500), "{:?}", run.elapsed);
    assert_eq!(run.dispatch()["signal"], "SIGTERM");
    p.assert_gone(1);
}

#[test]
fn term_ignoring_adapter_is_killed_after_the_grace() {
    let p = Pids::new();
    let run = with_timeout(
        Dispatch::adapter(&["ignore-term", &p.step(), "sleep:60000"]),
        300,
    )
    .args(&["--kill-grace-ms", "400"])
    .run();
    run.expect("timeout", Some("dispatch_timeout"), 124);
    assert!(
        run.elapsed >= Duration::from_millis(700),
        "waited for the grace: {:?}",
        run.elapsed
    );
    assert!(run.elapsed < bound(300, 400), "{:?}", run.elapsed);
    assert_eq!(run.dispatch()["signal"], "SIGKILL");
    p.assert_gone(1);
}

#[test]
fn busy_looping_adapter_times_out() {
    let run = with_timeout(Dispatch::adapter(&["ignore-term", "busy:60000"]), 300)
        .args(&["--kill-grace-ms", "200"])
        .run();
    run.expect("timeout", Some("dispatch_timeout"), 124);
    assert!(run.elapsed < bound(300, 200), "{:?}", run.elapsed);
}

#[test]
fn adapter_blocked_on_stdin_times_out() {
    // The adapter's grandchild inherits nothing; the adapter itself waits on a pipe that its
    // own child holds open: the dispatcher's deadline does not depend on any EOF.
    let p = Pids::new();
    let hold = p.spawn("spawn", "ignore-term+sleep:60000");
    let run = with_timeout(
        Dispatch::adapter(&[&hold, "ignore-term", "read-stdin", "sleep:60000"]),
        300,
    )
    .args(&["--kill-grace-ms", "200"])
    .run();
    run.expect("timeout", Some("dispatch_timeout"), 124);
    assert!(run.elapsed < bound(300, 200), "{:?}", run.elapsed);
    p.assert_gone(1);
}

#[test]
fn same_group_grandchild_holding_stdout_does_not_hold_the_dispatcher() {
    let p = Pids::new();
    let run = Dispatch::adapter(&[
        &p.spawn("spawn", "ignore-term+sleep:60000"),
        "sleep:200",
        "echo",
    ])
    .run();
    run.expect("succeeded", None, 0);
    assert!(
        run.elapsed < Duration::from_millis(200 + 100) + MARGIN,
        "{:?}",
        run.elapsed
    );
    assert_eq!(run.dispatch()["leaked_processes"], 1);
    p.assert_gone(1);
}

#[test]
fn setsid_grandchild_does_not_hold_the_dispatcher() {
    let p = Pids::new();
    let run = Dispatch::adapter(&[
        &p.spawn("spawn-setsid", "ignore-term+sleep:60000"),
        "sleep:200",
        "echo",
    ])
    .run();
    run.expect("succeeded", None, 0);
    assert!(
        run.elapsed < Duration::from_millis(200 + 100) + MARGIN,
        "{:?}",
        run.elapsed
    );
    assert_eq!(run.dispatch()["leaked_processes"], 1);
    p.assert_gone(1);
}

#[test]
fn setsid_grandchild_is_killed_on_timeout_too() {
    let p = Pids::new();
    let steps = [
        p.spawn("spawn-setsid", "ignore-term+sleep:60000"),
        "sleep:60000".into(),
    ];
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let run = with_timeout(Dispatch::adapter(&steps), 300)
        .args(&["--kill-grace-ms", "200"])
        .run();
    run.expect("timeout", Some("dispatch_timeout"), 124);
    assert!(run.elapsed < bound(300, 200), "{:?}", run.elapsed);
    p.assert_gone(1);
}

#[test]
fn output_beyond_the_cap_is_result_too_large() {
    let run = Dispatch::adapter(&["read-stdin", "flood:1000000", "sleep:60000"])
        .args(&["--max-output-bytes", "10000"])
        .run();
    run.expect("failed", Some("result_too_large"), 1);
    assert!(run.dispatch()["stdout_bytes"].as_u64().unwrap() > 10000);
    assert!(
        run.elapsed < Duration::from_secs(5),
        "killed at once: {:?}",
        run.elapsed
    );
}

#[test]
fn output_cap_hit_while_descendants_are_alive_kills_them_all() {
    let p = Pids::new();
    let steps = [
        p.spawn("spawn-setsid", "ignore-term+sleep:60000"),
        p.spawn("spawn", "ignore-term+sleep:60000"),
        "sleep:200".into(),
        "flood:1000000".into(),
        "sleep:60000".into(),
    ];
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let run = Dispatch::adapter(&steps)
        .args(&["--max-output-bytes", "10000"])
        .run();
    run.expect("failed", Some("result_too_large"), 1);
    p.assert_gone(2);
}

#[test]
fn adapter_that_never_reads_its_stdin_is_normal() {
    // A request far larger than a pipe buffer, to an adapter that closes stdin unread.
    let answer = json!({"schema": "wp-codebox/parent-tool-result/v1", "version": 1,
        "request_id": "ptr_123", "tool": "workspace.read", "operation": "call", "status": "succeeded"});
    let run = Dispatch::adapter(&["close-stdin", "sleep:100", &format!("print:{answer}")])
        .request(|r| r["input"] = json!("y".repeat(4 << 20)))
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(run.dispatch()["stdin_error"], "broken_pipe");
    assert!(run.dispatch()["stdin_bytes_written"].as_u64().unwrap() < 4 << 20);
}

#[test]
fn large_data_both_ways_does_not_deadlock() {
    // 16 MiB in, 16 MiB out, and the adapter writes all of its output before reading.
    let size = 16 << 20;
    let run = Dispatch::adapter(&[&format!("big-echo:{size}"), "read-stdin"])
        .request(|r| r["input"] = json!("z".repeat(size)))
        .args(&[
            "--max-request-bytes",
            "20000000",
            "--max-output-bytes",
            "20000000",
        ])
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(run.envelope["output"].as_str().unwrap().len(), size);
    assert!(run.dispatch()["stdin_bytes_written"].as_u64().unwrap() > size as u64);
    assert_eq!(run.dispatch()["stdin_error"], Value::Null);
}

#[test]
fn stderr_flood_keeps_a_bounded_tail() {
    let run = Dispatch::adapter(&["flood-stderr:5000000", "eprint:THE-END", "echo"]).run();
    run.expect("succeeded", None, 0);
    let tail = run.dispatch()["stderr_tail"].as_str().unwrap();
    assert!(tail.len() <= 64 * 1024, "{}", tail.len());
    assert!(tail.ends_with("THE-END"));
    assert_eq!(run.dispatch()["stderr_truncated"], true);
}

fn interrupt_with(sig: i32, name: &str) {
    let p = Pids::new();
    let mut cmd = std::process::Command::new(bin());
    cmd.arg("--parent-tool-bridge")
        .arg(
            bridge(&[
                &p.step(),
                &p.spawn("spawn-setsid", "sleep:60000"),
                "read-stdin",
                "sleep:60000",
            ])
            .to_string(),
        )
        .args(["--kill-grace-ms", "300"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(request().to_string().as_bytes()).unwrap();
    }
    // Wait until both processes are up.
    let until = Instant::now() + Duration::from_secs(10);
    while pids(&p.path).len() < 2 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let sent = Instant::now();
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        sent.elapsed() < Duration::from_millis(300 + 250) + MARGIN,
        "{:?}",
        sent.elapsed()
    );
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["status"], "failed", "{envelope}");
    assert_eq!(envelope["error"]["code"], "interrupted");
    assert_eq!(envelope["error"]["retryable"], true);
    assert_eq!(envelope["error"]["details"]["signal"], name);
    assert_eq!(out.status.code(), Some(1));
    p.assert_gone(2);
}

#[test]
fn sigterm_to_the_dispatcher_is_forwarded_and_reported() {
    interrupt_with(libc::SIGTERM, "SIGTERM");
}

#[test]
fn sigint_to_the_dispatcher_is_forwarded_and_reported() {
    interrupt_with(libc::SIGINT, "SIGINT");
}

#[test]
fn sighup_to_the_dispatcher_is_forwarded_and_reported() {
    interrupt_with(libc::SIGHUP, "SIGHUP");
}

#[test]
fn signal_while_waiting_for_the_request_still_prints_an_envelope() {
    let mut child = std::process::Command::new(bin())
        .arg("--parent-tool-bridge")
        .arg(bridge(&["echo"]).to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let stdin = child.stdin.take();
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["error"]["code"], "interrupted");
    assert_eq!(out.status.code(), Some(1));
}
