//! `audit verify` and `audit export` through the binary (SPEC §14.3), on ledgers written by
//! the library's own ledger.

use super::*;
use ptd_ledger::{AuditRecord, Ledger, Name, PolicyRef, Resources, Rule, Verdict};

/// A denied call's audit record, as the main job writes one (`ledger_prune.rs` uses it too).
pub(crate) fn record(request_id: &str, time_ms: u64) -> AuditRecord {
    AuditRecord {
        time_ms,
        bridge_ref: "sha256:b".into(),
        session_id: "s".into(),
        request_id: request_id.into(),
        tool: "workspace.read".into(),
        operation: "call".into(),
        request_digest: "d".into(),
        attempt: 1,
        decision: Verdict::Deny,
        rule: Rule::BridgeAllowedTools,
        policy: None,
        approval: None,
        status: Name::new("denied").unwrap(),
        code: Some(Name::new("tool_not_allowed").unwrap()),
        duration_ms: 1,
        adapter_ms: None,
        exit_status: 77,
        resources: Resources::default(),
        transcript_ref: None,
        envelope_sha256: None,
        session_key: None,
        network: None,
        checkpoint: None,
        admitted: false,
    }
}

/// A ledger with records r1 (at 2020-01-01T00:00:00Z) and r2 (a day later).
fn ledger(dir: &Path) -> PathBuf {
    let path = dir.join("ledger.db");
    let mut ledger = Ledger::open(&path, Instant::now() + Duration::from_secs(30)).unwrap();
    ledger.record(&record("r1", 1_577_836_800_000)).unwrap();
    ledger.record(&record("r2", 1_577_923_200_000)).unwrap();
    path
}

#[test]
fn audit_verify_passes_an_intact_trail_and_names_an_edited_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = ledger(dir.path());
    Cmd::new(["audit", "verify", "--ledger"])
        .arg(&path)
        .run()
        .exit(0)
        .stdout_json(|v| {
            assert_eq!(v["intact"], json!(true));
            assert_eq!(v["records"], json!(2));
            assert_eq!(v["head"].as_str().unwrap().len(), 64);
        })
        .stderr_empty();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE audit SET body = replace(body, '\"r2\"', '\"rX\"') WHERE seq = 2",
            [],
        )
        .unwrap();
    Cmd::new(["audit", "verify", "--ledger"])
        .arg(&path)
        .run()
        .exit(1)
        .stdout_json(|v| {
            assert_eq!(v["intact"], json!(false));
            assert_eq!(v["records_intact"], json!(1));
            assert_eq!(v["first_bad"]["seq"], json!(2));
        })
        .stderr_starts_with("error[audit_chain_broken]: record 2: ");
}

#[test]
fn audit_export_prints_json_lines_since_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = ledger(dir.path());
    let out = Cmd::new(["audit", "export", "--ledger"]).arg(&path).run();
    out.exit(0).stderr_empty().stdout_with(|text| {
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["seq"], json!(1));
        assert_eq!(lines[0]["time"], json!("2020-01-01T00:00:00.000Z"));
        assert_eq!(lines[0]["request_id"], json!("r1"));
        assert_eq!(lines[1]["prev"], lines[0]["hash"]);
        assert!(lines[0].get("input").is_none());
    });
    Cmd::new([
        "audit",
        "export",
        "--since",
        "2020-01-01T12:00:00+01:00",
        "--ledger",
    ])
    .arg(&path)
    .run()
    .exit(0)
    .stderr_empty()
    .stdout_with(|text| {
        assert_eq!(text.lines().count(), 1);
        assert!(text.contains("\"request_id\":\"r2\""), "{text}");
    });
    Cmd::new(["audit", "export", "--since", "yesterday", "--ledger"])
        .arg(&path)
        .run()
        .exit(2)
        .stdout_empty()
        .stderr_contains("--since");
}

#[test]
fn audit_verify_and_export_carry_the_policy_that_decided() {
    let dir = tempfile::tempdir().unwrap();
    let path = ledger(dir.path());
    let sha256 = "ab".repeat(32);
    let mut ledger = Ledger::open(&path, Instant::now() + Duration::from_secs(30)).unwrap();
    let mut decided = record("r3", 1_578_009_600_000);
    decided.policy = Some(PolicyRef {
        sha256: sha256.clone(),
        entry: "workspace.*".into(),
        line: Some(14),
    });
    ledger.record(&decided).unwrap();
    decided.request_id = "r4".into();
    decided.policy = Some(PolicyRef {
        sha256: sha256.clone(),
        entry: "defaults".into(),
        line: None,
    });
    ledger.record(&decided).unwrap();
    drop(ledger);
    Cmd::new(["audit", "verify", "--ledger"])
        .arg(&path)
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_json(|v| assert_eq!(v["records"], json!(4), "{v}"));
    Cmd::new(["audit", "export", "--ledger"])
        .arg(&path)
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_with(|text| {
            let lines: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(lines.len(), 4, "{text}");
            // Records written without a policy are exported without the field.
            assert!(
                lines[..2].iter().all(|l| l.get("policy").is_none()),
                "{text}"
            );
            assert_eq!(
                lines[2]["policy"],
                json!({"sha256": sha256, "entry": "workspace.*", "line": 14})
            );
            assert_eq!(
                lines[3]["policy"],
                json!({"sha256": sha256, "entry": "defaults"})
            );
        });
}

#[test]
fn audit_refuses_a_missing_or_foreign_ledger_without_creating_one() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.db");
    for sub in ["verify", "export"] {
        Cmd::new(["audit", sub, "--ledger"])
            .arg(&missing)
            .run()
            .exit(69)
            .stdout_empty()
            .stderr_eq("error[ledger_unavailable]: the ledger file does not exist\n");
    }
    assert!(!missing.exists());
    let foreign = dir.path().join("foreign.db");
    std::fs::write(&foreign, "not a database at all, just text").unwrap();
    Cmd::new(["audit", "verify", "--ledger"])
        .arg(&foreign)
        .run()
        .exit(69)
        .stdout_empty()
        .stderr_starts_with("error[ledger_unavailable]: the ledger is corrupt");
}
