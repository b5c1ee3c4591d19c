//! `audit export`'s filters, `audit stats` and `ledger status` through the binary, on ledgers
//! the main job wrote.

use super::ledger_rules::Setup;
use super::*;

/// The default request with another request id.
fn id(n: usize) -> impl FnOnce(&mut Value) {
    move |r: &mut Value| r["request_id"] = json!(format!("call-{n}"))
}

/// `audit export` with `extra`, parsed.
fn export(s: &Setup, extra: &[&str]) -> Vec<Value> {
    let mut lines = Vec::new();
    Cmd::new(["audit", "export", "--ledger", s.path()])
        .args(extra)
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_with(|text| {
            lines = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
        });
    lines
}

/// Two admitted calls, a replay, a budget denial and an allowlist denial of session
/// sandbox_123; one admitted call of session `another`.
fn calls(s: &Setup) {
    let budget = ["--session", "sandbox_123", "--budget-calls", "2"];
    s.dispatch(&["echo"])
        .args(&budget)
        .request(|r| r["tool"] = json!("workspace.write"))
        .run()
        .expect("denied", Some("tool_not_allowed"), 77);
    for n in [0, 1, 0, 2] {
        let expected = if n == 2 { "denied" } else { "succeeded" };
        let code = (n == 2).then_some("budget_exhausted");
        let status = if n == 2 { 77 } else { 0 };
        s.dispatch(&["echo"])
            .args(&budget)
            .request(id(n))
            .run()
            .expect(expected, code, status);
    }
    s.dispatch(&["echo"])
        .args(&["--session", "another"])
        .request(|r| r["sandbox_session"]["sandbox_session_id"] = json!("another"))
        .run()
        .expect("succeeded", None, 0);
}

#[test]
fn audit_export_filters_by_session_tool_and_status_and_prints_records_as_stored() {
    let s = Setup::new();
    calls(&s);
    let all = export(&s, &[]);
    assert_eq!(all.len(), 6);
    let denied = export(&s, &["--status", "denied"]);
    assert_eq!(denied.len(), 2);
    // As stored: the same lines `export` prints without a filter.
    assert!(denied.iter().all(|d| all.contains(d)));
    assert_eq!(export(&s, &["--tool", "workspace.write"]).len(), 1);
    assert_eq!(
        export(
            &s,
            &["--session", "sandbox_123", "--status", "succeeded,denied"]
        )
        .len(),
        5
    );
    assert_eq!(
        export(&s, &["--session", "sandbox_123", "--session", "another"]).len(),
        6
    );
    let theirs = export(&s, &["--session", "another", "--tool", "workspace.read"]);
    assert_eq!(theirs.len(), 1);
    assert_eq!(theirs[0]["session_id"], "another");
    assert!(export(&s, &["--session", "nobody"]).is_empty());
    assert!(export(
        &s,
        &["--status", "succeeded", "--since", "2999-01-01T00:00:00Z"]
    )
    .is_empty());
}

#[test]
fn audit_stats_adds_up_calls_per_session_and_tool() {
    let s = Setup::new();
    calls(&s);
    Cmd::new(["audit", "stats", "--json", "--ledger", s.path()])
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_json(|v| {
            assert_eq!(v["records"], 6);
            let rows = v["rows"].as_array().unwrap();
            assert_eq!(rows.len(), 3, "{v}");
            assert_eq!(rows[0]["session_id"], "another");
            assert_eq!(rows[0]["admitted"], 1);
            let mine = &rows[1];
            assert_eq!(
                (&mine["session_id"], &mine["tool"]),
                (&json!("sandbox_123"), &json!("workspace.read"))
            );
            assert_eq!(mine["admitted"], 2);
            assert_eq!(mine["replays"], 1);
            assert_eq!(mine["denied"], json!({"budget:calls": 1}));
            assert_eq!(mine["failures"], json!({}));
            assert_eq!(rows[2]["denied"], json!({"bridge.allowed_tools": 1}));
        });
    Cmd::new(["audit", "stats", "--ledger", s.path()])
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_with(|text| {
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 4, "{text}");
            assert!(lines[0].starts_with("SESSION  "), "{text}");
            assert!(
                lines[2].starts_with("sandbox_123  workspace.read  "),
                "{text}"
            );
            assert!(lines[2].ends_with("budget:calls=1"), "{text}");
        });
    Cmd::new([
        "audit",
        "stats",
        "--session",
        "nobody",
        "--ledger",
        s.path(),
    ])
    .run()
    .exit(0)
    .stderr_empty()
    .stdout_with(|text| assert_eq!(text, "no records\n"));
    let missing = s.dir.path().join("none.db");
    Cmd::new(["audit", "stats", "--ledger"])
        .arg(&missing)
        .run()
        .exit(69)
        .stdout_empty()
        .stderr_starts_with("error[ledger_unavailable]: ");
}

#[test]
fn ledger_status_says_what_each_budget_has_left_as_the_next_call_finds_it() {
    let s = Setup::new();
    let budgets = [
        "--session",
        "sandbox_123",
        "--budget-calls",
        "2",
        "--budget-tool",
        "workspace.read=5",
        "--budget-adapter-ms",
        "600000",
        "--max-concurrent",
        "3",
    ];
    let bridge = s.bridge(&["echo"]).to_string();
    let status = |check: &dyn Fn(&Value)| {
        Cmd::new(["ledger", "status", "--json", "--ledger", s.path()])
            .args(["--parent-tool-bridge", bridge.as_str()])
            .args(budgets)
            .run()
            .exit(0)
            .stderr_empty()
            .stdout_json(check);
    };
    // No ledger yet: nothing used.
    status(&|v| {
        assert_eq!(
            v["budgets"][0],
            json!({"budget": "calls", "limit": 2, "used": 0, "left": 2})
        );
    });
    s.dispatch(&["echo"])
        .args(&budgets)
        .request(id(0))
        .run()
        .expect("succeeded", None, 0);
    status(&|v| {
        assert_eq!(v["session"], "sandbox_123");
        assert_eq!(v["in_flight"], 0);
        let b = &v["budgets"];
        assert_eq!(
            b[0],
            json!({"budget": "calls", "limit": 2, "used": 1, "left": 1})
        );
        assert_eq!(b[1]["tool"], "workspace.read");
        assert_eq!((&b[1]["used"], &b[1]["left"]), (&json!(1), &json!(4)));
        assert_eq!(b[2]["budget"], "adapter_ms");
        assert_eq!(
            b[3],
            json!({"budget": "concurrent", "limit": 3, "used": 0, "left": 3})
        );
    });
    s.dispatch(&["echo"])
        .args(&budgets)
        .request(id(1))
        .run()
        .expect("succeeded", None, 0);
    status(&|v| assert_eq!(v["budgets"][0]["left"], 0));
    // What it said is what the next call gets.
    let over = s.dispatch(&["echo"]).args(&budgets).request(id(2)).run();
    over.expect("denied", Some("budget_exhausted"), 77);
    assert_eq!(over.envelope["error"]["details"]["used"], 2);
    Cmd::new(["ledger", "status", "--ledger", s.path()])
        .args(["--parent-tool-bridge", bridge.as_str()])
        .args(budgets)
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_with(|text| {
            assert!(
                text.starts_with("session sandbox_123 of bridge sha256:"),
                "{text}"
            );
            assert!(text.contains("\nBUDGET"), "{text}");
            let calls = text.lines().find(|l| l.starts_with("calls ")).unwrap();
            assert_eq!(
                calls.split_whitespace().collect::<Vec<_>>(),
                ["calls", "2", "2", "0"]
            );
        });
}

#[test]
fn ledger_status_needs_a_session_a_bridge_and_a_ledger() {
    let s = Setup::new();
    let bridge = s.bridge(&["echo"]).to_string();
    let cases: [(&[&str], &str); 3] = [
        (
            &["--ledger", s.path(), "--parent-tool-bridge", &bridge],
            "--session",
        ),
        (
            &["--ledger", s.path(), "--session", "s"],
            "--parent-tool-bridge",
        ),
        (
            &[
                "--ledger",
                s.path(),
                "--parent-tool-bridge",
                &bridge,
                "--budget-calls",
                "x",
            ],
            "--budget-calls",
        ),
    ];
    for (args, named) in cases {
        Cmd::new(["ledger", "status"])
            .args(args)
            .env_remove("PARENT_TOOL_DISPATCH_SESSION")
            .run()
            .exit(2)
            .stdout_empty()
            .stderr_contains(named);
    }
}
