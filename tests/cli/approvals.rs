//! Approvals (SPEC §18) through the binary: a policy entry with `decision = "ask"` holds the
//! call for a person (`approval_required`, exit 75, the same approval on every retry); `approvals
//! approve` lets the same request run exactly once, then replay; `deny` and expiry are final;
//! `--for-session`; the notifier; every decision in the audit trail; the refusals of the
//! `approvals` commands.

use super::*;
use std::os::unix::fs::PermissionsExt;

/// A host: a ledger folder, a file the adapter appends a line to each time it runs, and a
/// policy whose `git.commit` (and `git.push`) ask a person first.
struct Host {
    dir: tempfile::TempDir,
    policy: PathBuf,
    ledger: PathBuf,
    runs: PathBuf,
}

const TOOLS: [&str; 3] = ["git.commit", "git.push", "git.status"];

impl Host {
    fn new(extra: &str) -> Host {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("ledger.db");
        let runs = dir.path().join("runs");
        let steps = [format!("pidfile:{}", runs.display()), "echo".to_string()];
        let mut argv: Vec<String> = vec![test_bin().display().to_string(), "adapter".into()];
        argv.extend(steps);
        let quoted: Vec<String> = argv.iter().map(|a| format!("{a:?}")).collect();
        let text = format!(
            "version = 1\n[ledger]\npath = {:?}\nsession_env = \"PTD_SESSION\"\n\
             [defaults]\nunconfined = true\nadapter = [{}]\n\
             [[tool]]\nmatch = \"git.commit\"\ndecision = \"ask\"\n{extra}\n\
             [[tool]]\nmatch = \"git.push\"\ndecision = \"ask\"\n",
            ledger.display().to_string(),
            quoted.join(", ")
        );
        let policy = dir.path().join("policy.toml");
        std::fs::write(&policy, text).unwrap();
        std::fs::set_permissions(&policy, std::fs::Permissions::from_mode(0o600)).unwrap();
        Host {
            dir,
            policy,
            ledger,
            runs,
        }
    }

    /// The main job for `tool` with request id `id` in `session`.
    fn call_in(&self, tool: &str, id: &str, session: &str) -> Dispatch {
        let mut b = bridge(&["echo"]);
        b["allowed_tools"] = json!(TOOLS);
        Dispatch::with_bridge(b)
            .request(|r| {
                r["tool"] = json!(tool);
                r["request_id"] = json!(id);
                r["input"] = json!({"message": "fix the build", "token": "tok-abc-123"});
                r["authorization"]["allowed_tools"] = json!([tool]);
                r["sandbox_session"]["sandbox_session_id"] = json!(session);
            })
            .env("PTD_SESSION", session)
            .args(&["--policy", &self.policy.display().to_string()])
    }

    fn call(&self, tool: &str, id: &str) -> Dispatch {
        self.call_in(tool, id, "sandbox_123")
    }

    /// How many times the adapter ran.
    fn ran(&self) -> usize {
        std::fs::read_to_string(&self.runs)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    fn approvals(&self, args: &[&str]) -> Cmd {
        Cmd::new(["approvals"])
            .args(args)
            .args(["--ledger", &self.ledger.display().to_string()])
    }

    fn records(&self) -> Vec<Value> {
        let out = Cmd::new([
            "audit",
            "export",
            "--ledger",
            &self.ledger.display().to_string(),
        ])
        .run();
        out.exit(0).stderr_empty();
        let mut records = Vec::new();
        out.stdout_with(|text| {
            records = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
        });
        records
    }
}

/// The approval id of an `approval_required` answer.
fn held(run: &Run) -> String {
    run.expect("denied", Some("approval_required"), 75);
    assert_eq!(run.envelope["error"]["retryable"], true);
    assert_eq!(run.dispatch()["adapter_started"], false);
    let details = &run.envelope["error"]["details"];
    assert!(details["expires_at"].as_str().unwrap().ends_with('Z'));
    let id = details["approval_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("apr_") && id.len() == 36, "{id}");
    id
}

#[test]
fn ask_then_approve_runs_exactly_once_then_replays() {
    let host = Host::new("");
    let explain = |id: &str| {
        let mut b = bridge(&["echo"]);
        b["allowed_tools"] = json!(TOOLS);
        let mut r = request();
        r["tool"] = json!("git.commit");
        r["request_id"] = json!(id);
        r["input"] = json!({"message": "fix the build", "token": "tok-abc-123"});
        r["authorization"]["allowed_tools"] = json!(["git.commit"]);
        let out = Cmd::new(["policy", "explain", "--json"])
            .args(["--policy", &host.policy.display().to_string()])
            .args(["--parent-tool-bridge", &b.to_string()])
            .env("PTD_SESSION", "sandbox_123")
            .stdin(r.to_string())
            .run();
        out.exit(0).stderr_empty();
        out.json()
    };
    // A dry run says a person would be asked, and asks nobody.
    let before = explain("ptr_1");
    assert_eq!(
        before["decision"],
        json!({"runs": false, "code": "approval_required", "replays": false})
    );
    assert_eq!(
        before["ledger"]["answer"],
        "ask a person: a new approval would be made"
    );
    assert_eq!(
        before["checks"][5],
        json!({"check": "decision", "result": "ask"})
    );
    assert_eq!(
        before["approval"],
        json!({"ttl_ms": 3_600_000, "notify": null})
    );
    let first = held(&host.call("git.commit", "ptr_1").run());
    // Retries while pending: the same approval, nothing runs.
    assert_eq!(held(&host.call("git.commit", "ptr_1").run()), first);
    assert_eq!(host.ran(), 0);
    // A person sees it, the secret in its input redacted.
    let list = host.approvals(&["list"]).run();
    list.exit(0)
        .stderr_empty()
        .stdout_contains(&first)
        .stdout_contains("git.commit")
        .stdout_contains("1 approval\n")
        .stdout_lacks("tok-abc-123");
    let shown = host.approvals(&["show", &first, "--json"]).run();
    shown.exit(0).stderr_empty();
    let shown = shown.json();
    assert_eq!(shown["state"], "pending");
    assert_eq!(shown["request_id"], "ptr_1");
    assert!(shown["input"].as_str().unwrap().contains("fix the build"));
    assert!(!shown["input"].as_str().unwrap().contains("tok-abc-123"));
    host.approvals(&["approve", &first, "--by", "alice", "--note", "looks fine"])
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_contains(format!("approved {first}: git.commit ptr_1"));
    // explain sees the approval as the main job will: it runs.
    assert_eq!(explain("ptr_1")["decision"]["runs"], true);
    // Now the same request runs, once; its retry replays.
    let ran = host.call("git.commit", "ptr_1").run();
    ran.expect("succeeded", None, 0);
    assert_eq!(host.ran(), 1);
    let again = host.call("git.commit", "ptr_1").run();
    again.expect("succeeded", None, 0);
    assert_eq!(again.envelope["diagnostics"]["ledger"]["replayed"], true);
    assert_eq!(host.ran(), 1);
    // Deciding again changes nothing.
    host.approvals(&["deny", &first])
        .run()
        .exit(65)
        .stdout_empty()
        .stderr_starts_with("error[approval_decided]: ");
    // The trail: two holds, the decision (who, note), the run, the replay.
    let records = host.records();
    let rules: Vec<&str> = records
        .iter()
        .map(|r| r["rule"].as_str().unwrap())
        .collect();
    assert_eq!(
        rules,
        [
            "approval",
            "approval",
            "approval:approve",
            "bridge.allowed_tools",
            "ledger:replay"
        ]
    );
    assert_eq!(records[0]["code"], "approval_required");
    assert_eq!(records[0]["approval"]["id"], first);
    assert_eq!(records[2]["approval"]["by"], "alice");
    assert_eq!(records[2]["approval"]["note"], "looks fine");
    // The run names the approval that let it start.
    assert_eq!(records[3]["approval"]["id"], first);
    assert_eq!(records[3]["status"], "succeeded");
    Cmd::new([
        "audit",
        "verify",
        "--ledger",
        &host.ledger.display().to_string(),
    ])
    .run()
    .exit(0)
    .stderr_empty()
    .stdout_contains("\"intact\":true");
}

#[test]
fn deny_and_expiry_are_final_and_another_request_under_the_id_is_reused() {
    let host = Host::new("approval_ttl = \"2s\"");
    let denied = held(&host.call("git.push", "ptr_d").run());
    host.approvals(&["deny", &denied, "--by", "bob"])
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_contains(format!("denied {denied}"));
    for _ in 0..2 {
        host.call("git.push", "ptr_d")
            .run()
            .expect("denied", Some("approval_denied"), 77);
    }
    // git.commit's approvals expire after 2 s.
    let expiring = held(&host.call("git.commit", "ptr_e").run());
    // The same id with another request: reused, whatever the approval says.
    host.call("git.commit", "ptr_e")
        .request(|r| r["input"] = json!({"message": "another"}))
        .run()
        .expect("denied", Some("request_id_reused"), 77);
    std::thread::sleep(Duration::from_millis(2500));
    let late = host.call("git.commit", "ptr_e").run();
    late.expect("denied", Some("approval_expired"), 77);
    assert_eq!(late.envelope["error"]["details"]["approval_id"], expiring);
    host.approvals(&["approve", &expiring])
        .run()
        .exit(65)
        .stdout_empty()
        .stderr_starts_with("error[approval_expired]: ");
    // The default list shows only what can still be decided; --all shows the rest.
    host.approvals(&["list"])
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_eq("ID  STATE  TOOL  SESSION  REQUEST  AGE  LEFT  INPUT\n0 approvals\n");
    host.approvals(&["list", "--all"])
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_contains(format!("{denied}  denied "))
        .stdout_contains(format!("{expiring}  expired"))
        .stdout_contains("2 approvals\n");
    assert_eq!(host.ran(), 0);
    // Unknown ids and bad options change nothing either.
    host.approvals(&["approve", "apr_00000000000000000000000000000000"])
        .run()
        .exit(65)
        .stdout_empty()
        .stderr_starts_with("error[approval_unknown]: ");
    host.approvals(&["deny", &expiring, "--for-session"])
        .run()
        .exit(2)
        .stdout_empty()
        .stderr_contains("--for-session");
}

#[test]
fn twenty_retries_of_an_approved_call_run_it_once() {
    let host = Host::new("");
    let id = held(&host.call("git.commit", "ptr_race").run());
    host.approvals(&["approve", &id])
        .run()
        .exit(0)
        .stdout_contains("approved")
        .stderr_empty();
    let running: Vec<Running> = (0..20)
        .map(|_| {
            let mut b = bridge(&["echo"]);
            b["allowed_tools"] = json!(TOOLS);
            let request = {
                let mut r = request();
                r["tool"] = json!("git.commit");
                r["request_id"] = json!("ptr_race");
                r["input"] = json!({"message": "fix the build", "token": "tok-abc-123"});
                r["authorization"]["allowed_tools"] = json!(["git.commit"]);
                r
            };
            Cmd::new(["--parent-tool-bridge", &b.to_string()])
                .args(["--policy", &host.policy.display().to_string()])
                .env("PTD_SESSION", "sandbox_123")
                .stdin(request.to_string())
                .spawn()
        })
        .collect();
    for child in running {
        let out = child.wait();
        out.exit(0);
        out.stderr_with(|_| ());
        out.stdout_with(|text| assert!(text.contains("\"status\":\"succeeded\""), "{text}"));
    }
    assert_eq!(host.ran(), 1);
}

#[test]
fn for_session_approves_the_sessions_later_calls_of_the_tool() {
    let host = Host::new("");
    let id = held(&host.call("git.commit", "ptr_s1").run());
    host.approvals(&["approve", &id, "--for-session"])
        .run()
        .exit(0)
        .stdout_contains("the session's later git.commit calls");
    host.call("git.commit", "ptr_s1")
        .run()
        .expect("succeeded", None, 0);
    // Another request of the same tool and session: no approval of its own; its record names
    // the grant.
    host.call("git.commit", "ptr_s2")
        .run()
        .expect("succeeded", None, 0);
    assert_eq!(host.ran(), 2);
    let records = host.records();
    let last = records.last().unwrap();
    assert_eq!(last["request_id"], "ptr_s2");
    assert_eq!(last["approval"]["id"], id);
    // Another tool, or another session: asks.
    held(&host.call("git.push", "ptr_s3").run());
    held(&host.call_in("git.commit", "ptr_s4", "sandbox_other").run());
    assert_eq!(host.ran(), 2);
}

#[test]
fn the_notifier_gets_the_approval_and_never_holds_the_answer() {
    require!(confinable());
    // A notifier that shows what it read (on stderr, which a failure's warning quotes).
    let host = Host::new(
        "approval_notify = [\"/bin/sh\", \"-c\", \"tr -d '\\\\n' >&2; echo >&2; exit 3\"]",
    );
    let run = host.call("git.commit", "ptr_n").run();
    let id = held(&run);
    let warning = run
        .stderr
        .lines()
        .find(|l| l.starts_with("warning[approval_notify]: "))
        .unwrap_or_else(|| panic!("no notifier warning: {}", run.stderr));
    assert!(warning.contains("exited with status 3"), "{warning}");
    assert!(warning.contains(&id), "{warning}");
    assert!(
        warning.contains("parent-tool-dispatch/approval-notice/v1"),
        "{warning}"
    );
    assert!(!warning.contains("tok-abc-123"), "{warning}");
    // A retry while pending makes no new approval, so no notice.
    let again = host.call("git.commit", "ptr_n").run();
    held(&again);
    assert!(
        !again.stderr.contains("warning[approval_notify]"),
        "{}",
        again.stderr
    );

    // A notifier that hangs: the envelope comes at once, the notifier is stopped at 5 s.
    let slow = Host::new("approval_notify = [\"/bin/sleep\", \"60\"]");
    let mut b = bridge(&["echo"]);
    b["allowed_tools"] = json!(TOOLS);
    let mut r = request();
    r["tool"] = json!("git.commit");
    r["authorization"]["allowed_tools"] = json!(["git.commit"]);
    let out = Cmd::new(["--parent-tool-bridge", &b.to_string()])
        .args(["--policy", &slow.policy.display().to_string()])
        .env("PTD_SESSION", "sandbox_123")
        .stdin(r.to_string())
        .run();
    out.exit(75)
        .stdout_contains("approval_required")
        .stderr_contains(
            "warning[approval_notify]: the approval notifier /bin/sleep: was stopped after 5000 ms",
        );
    let first = out.first_line_after().expect("an envelope line");
    assert!(
        first < Duration::from_secs(4),
        "the answer waited {first:?}"
    );
    assert!(
        out.elapsed() < Duration::from_secs(30),
        "{:?}",
        out.elapsed()
    );
}

#[test]
fn a_person_without_access_to_the_ledger_is_told_so() {
    require!(skip::root());
    let host = Host::new("");
    held(&host.call("git.commit", "ptr_u").run());
    std::fs::set_permissions(host.dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    host.approvals(&["list"])
        .user(65534, 65534)
        .run()
        .exit(69)
        .stdout_empty()
        .stderr_starts_with("error[ledger_unavailable]: ");
}

#[test]
fn an_approval_ttl_that_does_not_parse_is_a_load_error_at_its_line() {
    let host = Host::new("approval_ttl = \"soon\"");
    let file = host.policy.display().to_string();
    Cmd::new(["policy", "check", &file])
        .run()
        .exit(65)
        .stdout_empty()
        .stderr_starts_with(format!("error[policy]: {file}:11:16: `approval_ttl`"));
}
