//! The main job with `--ledger` (SPEC §14), rule by rule, through the binary: idempotency
//! (§14.1), budgets (§14.2), the audit trail and failing closed (§14.3), and the options'
//! usage errors. The adapter appends its pid to a file each time it runs (`pidfile:`), so
//! every test can count how often a key really ran.

use super::*;
use rustix::process::Signal;

/// A temporary folder holding the ledger and the adapter's run log.
pub(crate) struct Setup {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) ledger: PathBuf,
    pub(crate) ran: PathBuf,
}

impl Setup {
    pub(crate) fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("ledger.db");
        let ran = dir.path().join("ran");
        Setup { dir, ledger, ran }
    }

    /// The bridge whose adapter logs its run, then runs `steps`.
    pub(crate) fn bridge(&self, steps: &[&str]) -> Value {
        let log = format!("pidfile:{}", self.ran.display());
        let mut all = vec![log.as_str()];
        all.extend(steps);
        bridge(&all)
    }

    /// The main job on this ledger with that bridge.
    pub(crate) fn dispatch(&self, steps: &[&str]) -> Dispatch {
        Dispatch::with_bridge(self.bridge(steps)).args(&["--ledger", self.path()])
    }

    pub(crate) fn path(&self) -> &str {
        self.ledger.to_str().unwrap()
    }

    /// How often the adapter ran.
    pub(crate) fn runs(&self) -> usize {
        pids(&self.ran).len()
    }

    /// Wait until the adapter ran `n` times (it is then under way).
    pub(crate) fn wait_runs(&self, n: usize) {
        let until = Instant::now() + Duration::from_secs(20);
        while self.runs() < n {
            assert!(Instant::now() < until, "the adapter never started");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// `audit export`, parsed.
    pub(crate) fn records(&self) -> Vec<Value> {
        let mut records = Vec::new();
        Cmd::new(["audit", "export", "--ledger", self.path()])
            .run()
            .exit(0)
            .stderr_empty()
            .stdout_with(|text| {
                records = text
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect();
            });
        records
    }

    /// `audit verify` passes, over `n` records.
    pub(crate) fn verify(&self, n: usize) {
        Cmd::new(["audit", "verify", "--ledger", self.path()])
            .run()
            .exit(0)
            .stderr_empty()
            .stdout_json(|v| {
                assert_eq!(v["intact"], json!(true), "{v}");
                assert_eq!(v["records"], json!(n), "{v}");
            });
    }

    /// `audit verify` passes, whatever the number of records.
    pub(crate) fn verify_any(&self) {
        Cmd::new(["audit", "verify", "--ledger", self.path()])
            .run()
            .exit(0)
            .stderr_empty()
            .stdout_json(|v| assert_eq!(v["intact"], json!(true), "{v}"));
    }

    /// The main job's command for a concurrent or killed run: `steps`' bridge, `request_id`.
    pub(crate) fn command(&self, steps: &[&str], request_id: &str) -> Cmd {
        let mut req = request();
        req["request_id"] = json!(request_id);
        Cmd::new(["--ledger", self.path(), "--parent-tool-bridge"])
            .arg(self.bridge(steps).to_string())
            .stdin(req.to_string())
    }
}

/// The envelope without `diagnostics.ledger` and the durations that differ run to run.
fn without_ledger(envelope: &Value) -> Value {
    let mut v = envelope.clone();
    v["diagnostics"].as_object_mut().unwrap().remove("ledger");
    v
}

#[test]
fn a_repeated_request_is_answered_from_the_ledger_exactly_as_printed_without_running() {
    let s = Setup::new();
    let artifacts = s.dir.path().join("out");
    let art = artifacts.to_str().unwrap();
    let first = s.dispatch(&["echo"]).args(&["--artifact-dir", art]).run();
    first.expect("succeeded", None, 0);
    assert_eq!(
        first.envelope["diagnostics"]["ledger"],
        json!({"replayed": false, "attempt": 1})
    );
    let result_file = s.dir.path().join("result.json");
    let again = s
        .dispatch(&["echo"])
        .args(&[
            "--artifact-dir",
            art,
            "--result-file",
            result_file.to_str().unwrap(),
        ])
        .run();
    again.expect("succeeded", None, 0);
    assert_eq!(std::fs::read_to_string(&result_file).unwrap(), again.stdout);
    assert_eq!(
        again.envelope["diagnostics"]["ledger"],
        json!({"replayed": true, "attempt": 1})
    );
    assert_eq!(
        without_ledger(&again.envelope),
        without_ledger(&first.envelope)
    );
    // The transcript ref is the first run's; no second transcript was written.
    let refs = &again.envelope["artifacts"]["transcripts"];
    assert_eq!(refs.as_array().unwrap().len(), 1, "{refs}");
    let folder = artifacts.join("files/parent-tools");
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 1);
    assert_eq!(s.runs(), 1);
    let records = s.records();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["decision"], "admit");
    assert_eq!(records[0]["rule"], "bridge.allowed_tools");
    assert_eq!(records[0]["transcript_ref"], refs[0]["path"]);
    assert_eq!(records[1]["decision"], "replay");
    assert_eq!(records[1]["rule"], "ledger:replay");
    assert_eq!(records[1]["transcript_ref"], refs[0]["path"]);
    assert_eq!(records[0]["request_digest"], records[1]["request_digest"]);
    s.verify(2);
}

#[test]
fn a_replayed_failure_keeps_its_exit_status_and_stderr_line() {
    let s = Setup::new();
    let first = s.dispatch(&["echo:failed:tool_broke"]).run();
    first.expect("failed", Some("tool_broke"), 1);
    let again = s.dispatch(&["echo:failed:tool_broke"]).run();
    again.expect("failed", Some("tool_broke"), 1);
    assert_eq!(again.envelope["diagnostics"]["ledger"]["replayed"], true);
    assert_eq!(
        without_ledger(&again.envelope),
        without_ledger(&first.envelope)
    );
    // --pretty applies to a replay too.
    let pretty = s
        .command(&["echo:failed:tool_broke"], "ptr_123")
        .arg("--pretty")
        .run();
    pretty
        .exit(1)
        .stderr_eq("error[tool_broke]: the test adapter was told to fail\n");
    pretty.stdout_with(|text| {
        assert!(text.lines().count() > 1, "{text}");
        let printed: Value = serde_json::from_str(text).unwrap();
        assert_eq!(without_ledger(&printed), without_ledger(&first.envelope));
    });
    assert_eq!(s.runs(), 1);
}

#[test]
fn the_same_request_id_with_another_request_is_denied_and_runs_nothing() {
    let s = Setup::new();
    s.dispatch(&["echo"]).run().expect("succeeded", None, 0);
    let other = s
        .dispatch(&["echo"])
        .request(|r| r["input"] = json!({"path": "other.md"}))
        .run();
    other.expect("denied", Some("request_id_reused"), 77);
    assert_eq!(other.envelope["diagnostics"]["ledger"]["replayed"], false);
    assert_eq!(s.runs(), 1);
    let records = s.records();
    assert_eq!(records[1]["decision"], "deny");
    assert_eq!(records[1]["rule"], "ledger:request_id");
    assert_ne!(records[0]["request_digest"], records[1]["request_digest"]);
    // Key order and layout do not make another request.
    let reordered = r#"{"metadata":{},"version":1,"schema":"wp-codebox/parent-tool-request/v1",
        "tool":"workspace.read","request_id":"ptr_123","operation":"call",
        "input":{"path":"README.md"},
        "sandbox_session":{"caller_session_id":"job_456","sandbox_session_id":"sandbox_123"},
        "authorization":{"principal":{},"capability":"read","allowed_tools":["workspace.read"]}}"#;
    let same = s.dispatch(&["echo"]).stdin(reordered).run();
    same.expect("succeeded", None, 0);
    assert_eq!(same.envelope["diagnostics"]["ledger"]["replayed"], true);
}

#[test]
fn a_retryable_outcome_is_not_final_and_the_key_runs_again() {
    let s = Setup::new();
    let slow = |s: &Setup| {
        s.dispatch(&["sleep:5000"])
            .bridge(|b| b["dispatcher"]["timeout_ms"] = json!(300))
            .run()
    };
    let first = slow(&s);
    first.expect("timeout", Some("dispatch_timeout"), 124);
    assert_eq!(first.envelope["error"]["retryable"], true);
    let second = slow(&s);
    second.expect("timeout", Some("dispatch_timeout"), 124);
    assert_eq!(
        second.envelope["diagnostics"]["ledger"],
        json!({"replayed": false, "attempt": 2})
    );
    assert_eq!(s.runs(), 2);
    let records = s.records();
    assert_eq!(records[1]["attempt"], 2);
    assert!(
        records[1]["adapter_ms"].as_u64().unwrap() >= 250,
        "{}",
        records[1]
    );
}

#[test]
fn a_duplicate_waits_for_its_live_holder_then_replays_its_outcome() {
    let s = Setup::new();
    let holder = s.command(&["sleep:1500", "echo"], "ptr_123").spawn();
    s.wait_runs(1);
    let waiter = s.dispatch(&["sleep:1500", "echo"]).run();
    waiter.expect("succeeded", None, 0);
    assert_eq!(waiter.envelope["diagnostics"]["ledger"]["replayed"], true);
    holder.wait().exit(0).stderr_empty().stdout_with(|text| {
        let printed = json_line(text);
        assert_eq!(without_ledger(&waiter.envelope), without_ledger(&printed));
    });
    assert_eq!(s.runs(), 1);
}

#[test]
fn a_duplicate_held_past_its_own_timeout_is_a_timeout() {
    let s = Setup::new();
    let steps = ["sleep:20000", "echo"];
    let timeout = |b: &mut Value| b["dispatcher"]["timeout_ms"] = json!(800);
    let holder = {
        let mut b = s.bridge(&steps);
        timeout(&mut b);
        Cmd::new(["--ledger", s.path(), "--parent-tool-bridge"])
            .arg(b.to_string())
            .stdin(request().to_string())
            .spawn()
    };
    s.wait_runs(1);
    // Stopped, the holder is alive but never finishes.
    holder.signal(Signal::STOP);
    let waiter = s.dispatch(&steps).bridge(timeout).run();
    waiter.expect("timeout", Some("dispatch_timeout"), 124);
    assert!(
        waiter.elapsed >= Duration::from_millis(700),
        "{:?}",
        waiter.elapsed
    );
    holder.signal(Signal::CONT);
    holder
        .wait()
        .exit(124)
        .stderr_contains("error[dispatch_timeout]")
        .stdout_contains("\"code\":\"dispatch_timeout\"");
    assert_eq!(s.runs(), 1);
    let records = s.records();
    let rules: Vec<&str> = records
        .iter()
        .map(|r| r["rule"].as_str().unwrap())
        .collect();
    assert!(rules.contains(&"ledger:held"), "{rules:?}");
}

#[test]
fn a_key_whose_dispatcher_died_is_indeterminate_final_and_never_runs_again() {
    let s = Setup::new();
    let holder = s.command(&["sleep:20000", "echo"], "ptr_123").spawn();
    s.wait_runs(1);
    holder.signal(Signal::KILL);
    let killed = holder.wait();
    killed.exit(-1).stdout_empty().stderr_empty();
    for _ in 0..2 {
        let after = s.dispatch(&["sleep:20000", "echo"]).run();
        after.expect("failed", Some("dispatch_indeterminate"), 1);
        assert_eq!(after.envelope["error"]["retryable"], false);
        assert_eq!(after.envelope["error"]["details"], json!({"attempt": 1}));
    }
    assert_eq!(s.runs(), 1);
    let records = s.records();
    assert_eq!(records.len(), 2, "the killed run recorded nothing");
    assert_eq!(records[0]["rule"], "ledger:lease");
    assert_eq!(records[0]["decision"], "refuse");
    assert_eq!(records[1]["rule"], "ledger:replay");
    s.verify(2);
}

/// The default request with another request id.
fn id(n: usize) -> impl FnOnce(&mut Value) {
    move |r: &mut Value| r["request_id"] = json!(format!("call-{n}"))
}

#[test]
fn budget_calls_admits_n_calls_per_session_and_replays_and_denials_spend_nothing() {
    let s = Setup::new();
    let budget = ["--session", "sandbox_123", "--budget-calls", "2"];
    // Denied by the allowlist: spends nothing.
    s.dispatch(&["echo"])
        .args(&budget)
        .request(|r| r["tool"] = json!("workspace.write"))
        .run()
        .expect("denied", Some("tool_not_allowed"), 77);
    for n in 0..2 {
        s.dispatch(&["echo"])
            .args(&budget)
            .request(id(n))
            .run()
            .expect("succeeded", None, 0);
    }
    // A replay is free.
    let replay = s.dispatch(&["echo"]).args(&budget).request(id(0)).run();
    replay.expect("succeeded", None, 0);
    assert_eq!(replay.envelope["diagnostics"]["ledger"]["replayed"], true);
    let over = s.dispatch(&["echo"]).args(&budget).request(id(2)).run();
    over.expect("denied", Some("budget_exhausted"), 77);
    assert_eq!(
        over.envelope["error"]["details"],
        json!({"budget": "calls", "limit": 2, "used": 2})
    );
    // Another session has its own budget.
    s.dispatch(&["echo"])
        .args(&["--session", "another", "--budget-calls", "2"])
        .request(|r| {
            r["request_id"] = json!("call-2");
            r["sandbox_session"]["sandbox_session_id"] = json!("another");
        })
        .run()
        .expect("succeeded", None, 0);
    assert_eq!(s.runs(), 3);
    let rules: Vec<String> = s
        .records()
        .iter()
        .map(|r| r["rule"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        rules,
        [
            "bridge.allowed_tools",
            "bridge.allowed_tools",
            "bridge.allowed_tools",
            "ledger:replay",
            "budget:calls",
            "bridge.allowed_tools"
        ]
    );
}

#[test]
fn budget_tool_counts_one_tool_and_a_tool_the_bridge_does_not_allow_is_accepted() {
    let s = Setup::new();
    let budget = [
        "--session",
        "sandbox_123",
        "--budget-tool",
        "workspace.read=1",
        "--budget-tool",
        "never.allowed=5",
    ];
    s.dispatch(&["echo"])
        .args(&budget)
        .request(id(0))
        .run()
        .expect("succeeded", None, 0);
    let over = s.dispatch(&["echo"]).args(&budget).request(id(1)).run();
    over.expect("denied", Some("budget_exhausted"), 77);
    assert_eq!(
        over.envelope["error"]["details"],
        json!({"budget": "tool", "limit": 1, "used": 1, "tool": "workspace.read"})
    );
    assert_eq!(s.runs(), 1);
    assert_eq!(s.records()[1]["rule"], "budget:tool");
}

#[test]
fn the_budgets_and_the_session_are_also_read_from_their_variables() {
    let s = Setup::new();
    let with_env = |d: Dispatch| {
        d.env("PARENT_TOOL_DISPATCH_SESSION", "sandbox_123")
            .env("PARENT_TOOL_DISPATCH_BUDGET_CALLS", "3")
            .env(
                "PARENT_TOOL_DISPATCH_BUDGET_TOOL",
                "workspace.read=2,never.allowed=5",
            )
    };
    for n in 0..2 {
        with_env(s.dispatch(&["echo"]).request(id(n)))
            .run()
            .expect("succeeded", None, 0);
    }
    let over = with_env(s.dispatch(&["echo"]).request(id(2))).run();
    over.expect("denied", Some("budget_exhausted"), 77);
    assert_eq!(
        over.envelope["error"]["details"],
        json!({"budget": "tool", "limit": 2, "used": 2, "tool": "workspace.read"})
    );
    // A flag beats its variable, as everywhere.
    with_env(s.dispatch(&["echo"]).request(id(3)))
        .args(&["--budget-tool", "workspace.read=5"])
        .run()
        .expect("succeeded", None, 0);
    let calls = with_env(s.dispatch(&["echo"]).request(id(4)))
        .args(&["--budget-tool", "workspace.read=5"])
        .run();
    calls.expect("denied", Some("budget_exhausted"), 77);
    assert_eq!(calls.envelope["error"]["details"]["budget"], "calls");
    // A bad value in a variable is a usage error naming it.
    let bad = s
        .dispatch(&["echo"])
        .env("PARENT_TOOL_DISPATCH_SESSION", "sandbox_123")
        .env("PARENT_TOOL_DISPATCH_MAX_CONCURRENT", "zero")
        .run();
    bad.output()
        .exit(2)
        .stdout_empty()
        .stderr_contains("--max-concurrent");
    assert_eq!(s.runs(), 3);
}

#[test]
fn the_adapter_is_told_the_cut_timeout_in_its_variable() {
    let s = Setup::new();
    let budget = ["--session", "sandbox_123", "--budget-adapter-ms", "1500"];
    let var = "WP_CODEBOX_PARENT_TOOL_TIMEOUT_MS";
    let first = s
        .dispatch(&["sleep:400", "echo"])
        .args(&budget)
        .request(id(0))
        .run();
    first.expect("succeeded", None, 0);
    assert_eq!(first.envelope["output"]["env"][var], "1500");
    let second = s
        .dispatch(&["sleep:400", "echo"])
        .args(&budget)
        .request(id(1))
        .run();
    second.expect("succeeded", None, 0);
    let left = second.envelope["diagnostics"]["ledger"]["adapter_ms_left"]
        .as_u64()
        .unwrap();
    assert!(left <= 1100, "{left}");
    assert_eq!(second.envelope["output"]["env"][var], left.to_string());
    assert_eq!(second.dispatch()["timeout_ms"], left);
}

#[test]
fn budget_adapter_ms_cuts_the_timeout_to_what_is_left_then_refuses() {
    let s = Setup::new();
    let budget = ["--session", "sandbox_123", "--budget-adapter-ms", "1500"];
    let first = s
        .dispatch(&["sleep:900", "echo"])
        .args(&budget)
        .request(id(0))
        .run();
    first.expect("succeeded", None, 0);
    assert_eq!(
        first.envelope["diagnostics"]["ledger"]["adapter_ms_left"],
        1500
    );
    assert_eq!(first.dispatch()["timeout_ms"], 1500);
    let second = s
        .dispatch(&["sleep:900", "echo"])
        .args(&budget)
        .request(id(1))
        .run();
    second.expect("timeout", Some("dispatch_timeout"), 124);
    let left = second.envelope["diagnostics"]["ledger"]["adapter_ms_left"]
        .as_u64()
        .unwrap();
    assert!(left < 650, "{left}");
    assert_eq!(second.dispatch()["timeout_ms"], left);
    let third = s
        .dispatch(&["sleep:900", "echo"])
        .args(&budget)
        .request(id(2))
        .run();
    third.expect("denied", Some("budget_exhausted"), 77);
    let details = &third.envelope["error"]["details"];
    assert_eq!(details["budget"], "adapter_ms");
    assert_eq!(details["limit"], 1500);
    assert!(details["used"].as_u64().unwrap() >= 1500, "{details}");
    assert_eq!(s.runs(), 2);
}

#[test]
fn max_concurrent_refuses_a_call_over_the_limit_while_a_live_one_runs() {
    let s = Setup::new();
    let holder = s
        .command(&["sleep:20000", "echo"], "call-0")
        .args(["--session", "sandbox_123", "--max-concurrent", "1"])
        .spawn();
    s.wait_runs(1);
    let over = s
        .dispatch(&["sleep:20000", "echo"])
        .args(&["--session", "sandbox_123", "--max-concurrent", "1"])
        .request(id(1))
        .run();
    over.expect("unavailable", Some("concurrency_limited"), 69);
    assert_eq!(over.envelope["error"]["retryable"], true);
    assert_eq!(
        over.envelope["error"]["details"],
        json!({"budget": "concurrent", "limit": 1, "used": 1})
    );
    holder.signal(Signal::KILL);
    holder.wait().exit(-1);
    // Only live holders count: the killed one no longer does.
    s.dispatch(&["echo"])
        .args(&["--session", "sandbox_123", "--max-concurrent", "1"])
        .request(id(2))
        .run()
        .expect("succeeded", None, 0);
    assert_eq!(s.runs(), 2);
}

#[test]
fn calls_refused_before_the_ledger_step_are_on_the_record_with_their_rule() {
    let s = Setup::new();
    s.dispatch(&["echo"])
        .request(|r| r["tool"] = json!("workspace.write"))
        .run()
        .expect("denied", Some("tool_not_allowed"), 77);
    s.dispatch(&["echo"])
        .request(|r| r["authorization"]["allowed_tools"] = json!([]))
        .run()
        .expect("denied", Some("tool_not_allowed"), 77);
    s.dispatch(&["echo"])
        .request(|r| r["metadata"]["bridge_ref"] = json!("sha256:not-this-bridge"))
        .run()
        .expect("denied", Some("bridge_ref_mismatch"), 77);
    s.dispatch(&["echo"])
        .request(|r| r["version"] = json!(2))
        .run()
        .expect("failed", Some("request_invalid"), 65);
    assert_eq!(s.runs(), 0);
    let records = s.records();
    let got: Vec<(&str, &str, &str)> = records
        .iter()
        .map(|r| {
            (
                r["decision"].as_str().unwrap(),
                r["rule"].as_str().unwrap(),
                r["code"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("deny", "bridge.allowed_tools", "tool_not_allowed"),
            (
                "deny",
                "request.authorization.allowed_tools",
                "tool_not_allowed"
            ),
            ("deny", "bridge_ref", "bridge_ref_mismatch"),
            ("refuse", "request.schema", "request_invalid"),
        ]
    );
    for r in &records {
        assert_eq!(r["session_id"], "sandbox_123");
        assert_eq!(r["request_id"], "ptr_123");
        assert!(r["bridge_ref"].as_str().unwrap().starts_with("sha256:"));
        assert_eq!(r["request_digest"].as_str().unwrap().len(), 64);
    }
    s.verify(4);
}

#[test]
fn the_audit_trail_holds_no_payload_and_no_secret() {
    let s = Setup::new();
    let secret = "s3cr3t-token-value-1234";
    s.dispatch(&["echo"])
        .args(&["--secret-env", "LEDGER_TEST_TOKEN"])
        .env("LEDGER_TEST_TOKEN", secret)
        .request(|r| {
            r["request_id"] = json!(format!("id-with-{secret}"));
            r["input"] = json!({"path": "payload-marker.txt"});
        })
        .run()
        .expect("succeeded", None, 0);
    let out = Cmd::new(["audit", "export", "--ledger", s.path()]).run();
    out.exit(0)
        .stderr_empty()
        .stdout_lacks(secret)
        .stdout_lacks("payload-marker")
        .stdout_lacks("stdin")
        .stdout_contains("[redacted]");
    // The stored envelope (which replays need, payload included) is the printed one, with
    // the secret scrubbed: not in the file, not in its WAL.
    let mut stored = 0;
    for entry in std::fs::read_dir(s.dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().contains("ledger.db") {
            let bytes = std::fs::read(&path).unwrap();
            stored += bytes.len();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(secret),
                "{path:?}"
            );
        }
    }
    assert!(stored > 0);
}

#[test]
fn an_edited_record_written_by_the_dispatcher_is_named_by_audit_verify() {
    let s = Setup::new();
    for n in 0..3 {
        s.dispatch(&["echo"])
            .request(id(n))
            .run()
            .expect("succeeded", None, 0);
    }
    s.verify(3);
    rusqlite::Connection::open(&s.ledger)
        .unwrap()
        .execute(
            "UPDATE audit SET body = replace(body, '\"decision\":\"admit\"', '\"decision\":\"deny\"') WHERE seq = 2",
            [],
        )
        .unwrap();
    Cmd::new(["audit", "verify", "--ledger", s.path()])
        .run()
        .exit(1)
        .stdout_json(|v| {
            assert_eq!(v["intact"], false);
            assert_eq!(v["records_intact"], 1);
            assert_eq!(v["first_bad"]["seq"], 2);
        })
        .stderr_starts_with("error[audit_chain_broken]: record 2: ");
}

#[test]
fn a_ledger_that_cannot_be_used_fails_closed_before_anything_starts() {
    let s = Setup::new();
    let corrupt = s.dir.path().join("corrupt.db");
    std::fs::write(&corrupt, vec![0x5a; 8192]).unwrap();
    let foreign = s.dir.path().join("foreign.db");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE mine (x); INSERT INTO mine VALUES (1);")
        .unwrap();
    let foreign_before = std::fs::read(&foreign).unwrap();
    let read_only = s.dir.path().join("read-only.db");
    Dispatch::with_bridge(s.bridge(&["echo"]))
        .args(&["--ledger", read_only.to_str().unwrap()])
        .run()
        .expect("succeeded", None, 0);
    std::fs::set_permissions(
        &read_only,
        std::os::unix::fs::PermissionsExt::from_mode(0o400),
    )
    .unwrap();
    let missing = s.dir.path().join("no/such/folder/ledger.db");
    let folder = s.dir.path().to_path_buf();
    let cases: [(&Path, &str); 5] = [
        (&missing, "the ledger's folder cannot be opened"),
        (&corrupt, "the ledger is corrupt"),
        (&foreign, "the file is not a parent-tool-dispatch ledger"),
        (&read_only, "the ledger file is read-only"),
        (&folder, "the ledger path is a folder"),
    ];
    let runs = s.runs();
    for (path, why) in cases {
        let run = Dispatch::with_bridge(s.bridge(&["echo"]))
            .args(&["--ledger", path.to_str().unwrap()])
            .run();
        run.expect("unavailable", Some("ledger_unavailable"), 69);
        let message = run.envelope["error"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{path:?}: {message}");
        assert!(
            !message.contains(s.dir.path().to_str().unwrap()),
            "{message}"
        );
        assert_eq!(run.dispatch()["adapter_started"], false);
    }
    assert_eq!(s.runs(), runs, "nothing ran");
    assert!(!missing.exists());
    assert_eq!(std::fs::read(&foreign).unwrap(), foreign_before);
    // The environment variable names the ledger as well.
    let by_env = Dispatch::with_bridge(s.bridge(&["echo"]))
        .env("PARENT_TOOL_DISPATCH_LEDGER", missing.to_str().unwrap())
        .run();
    by_env.expect("unavailable", Some("ledger_unavailable"), 69);
}

#[test]
fn a_new_ledger_is_created_0600() {
    let s = Setup::new();
    s.dispatch(&["echo"]).run().expect("succeeded", None, 0);
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&s.ledger).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_recording_failure_after_the_run_still_prints_the_real_envelope() {
    let s = Setup::new();
    let steps = ["sleep:300", "echo"];
    // Create the ledger, then hold its write lock while the call runs and finishes.
    s.dispatch(&steps)
        .request(id(0))
        .run()
        .expect("succeeded", None, 0);
    let result_file = s.dir.path().join("result.json");
    let running = s
        .command(&steps, "call-1")
        .arg("--result-file")
        .arg(&result_file)
        .spawn();
    s.wait_runs(2);
    let lock = rusqlite::Connection::open(&s.ledger).unwrap();
    lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let out = running.wait();
    lock.execute_batch("ROLLBACK").unwrap();
    out.exit(0)
        .stderr_with(|stderr| {
            assert!(
                stderr.starts_with(
                    "warning[ledger_unavailable]: the call's outcome was not recorded"
                ),
                "{stderr}"
            );
            assert!(!stderr.contains("error["), "{stderr}");
        })
        .stdout_with(|text| {
            let envelope = json_line(text);
            assert_eq!(envelope["status"], "succeeded");
            let error = envelope["diagnostics"]["ledger"]["error"].as_str().unwrap();
            assert!(error.contains("locked"), "{error}");
            // The result file is what stdout got.
            assert_eq!(std::fs::read_to_string(&result_file).unwrap(), text);
        });
    // Nobody knows now that it ran: a retry under the same id is indeterminate.
    s.dispatch(&steps)
        .request(id(1))
        .run()
        .expect("failed", Some("dispatch_indeterminate"), 1);
    assert_eq!(s.runs(), 2);
}

#[test]
fn ledger_options_that_do_not_parse_are_usage_errors_naming_the_option() {
    let s = Setup::new();
    let cases: [(&[&str], &str); 7] = [
        (&["--budget-calls", "ten"], "--budget-calls"),
        (&["--budget-calls=-1"], "--budget-calls"),
        (&["--budget-tool", "workspace.read"], "--budget-tool"),
        (
            &["--budget-tool", "a=1", "--budget-tool", "a=2"],
            "--budget-tool",
        ),
        (&["--budget-adapter-ms", "1.5"], "--budget-adapter-ms"),
        (&["--max-concurrent", "0"], "--max-concurrent"),
        (
            &["--budget-calls", "1", "--budget-calls", "2"],
            "--budget-calls",
        ),
    ];
    for (args, flag) in cases {
        let run = s.dispatch(&["echo"]).args(args).run();
        run.output().exit(2).stdout_empty().stderr_contains(flag);
    }
    // A budget needs a ledger.
    let run = Dispatch::with_bridge(s.bridge(&["echo"]))
        .args(&["--budget-calls", "3"])
        .run();
    run.output()
        .exit(2)
        .stdout_empty()
        .stderr_eq("error[usage]: --budget-calls needs a ledger: pass --ledger PATH or set PARENT_TOOL_DISPATCH_LEDGER\n\nFor more information, try '--help'.\n");
    assert_eq!(s.runs(), 0);
    assert!(!s.ledger.exists());
}
