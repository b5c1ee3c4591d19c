//! `ledger prune` through the binary: the records before a time go, a checkpoint record
//! anchors the rest, `audit verify` still passes (the budget counters included), and a trail
//! cut without a checkpoint fails.

use super::ledger::record;
use super::ledger_rules::Setup;
use super::*;
use ptd_ledger::Ledger;

const DAY: u64 = 86_400_000;
const JAN_1_2020: u64 = 1_577_836_800_000;

fn verify(path: &Path, records: u64) {
    Cmd::new(["audit", "verify", "--ledger"])
        .arg(path)
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_json(|v| {
            assert_eq!(v["intact"], true, "{v}");
            assert_eq!(v["records"], records, "{v}");
        });
}

fn prune(path: &Path, before: &str, check: impl FnOnce(&Value)) {
    Cmd::new(["ledger", "prune", "--before", before, "--ledger"])
        .arg(path)
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_json(check);
}

#[test]
fn ledger_prune_removes_old_records_behind_a_checkpoint_that_verify_follows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let mut ledger = Ledger::open(&path, Instant::now() + Duration::from_secs(30)).unwrap();
    for (n, id) in ["r1", "r2", "r3"].iter().enumerate() {
        ledger
            .record(&record(id, JAN_1_2020 + n as u64 * DAY))
            .unwrap();
    }
    drop(ledger);
    prune(&path, "2019-12-01T00:00:00Z", |v| {
        assert_eq!(*v, json!({"removed": 0}))
    });
    let mut removed_hash = String::new();
    prune(&path, "2020-01-02T12:00:00Z", |v| {
        assert_eq!(v["removed"], 2);
        assert_eq!(v["last_removed"]["seq"], 2);
        assert_eq!(v["checkpoint"], 4);
        removed_hash = v["last_removed"]["hash"].as_str().unwrap().to_string();
    });
    verify(&path, 2);
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
            assert_eq!(lines.len(), 2);
            assert_eq!(lines[0]["request_id"], "r3");
            assert_eq!(lines[0]["prev"], json!(removed_hash));
            assert_eq!(lines[1]["rule"], "ledger:checkpoint");
            assert_eq!(
                lines[1]["checkpoint"],
                json!({"seq": 2, "hash": removed_hash, "removed": 2})
            );
        });
    // Removing the first kept record behind the checkpoint's back breaks the chain.
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute("DELETE FROM audit WHERE seq = 3", [])
        .unwrap();
    Cmd::new(["audit", "verify", "--ledger"])
        .arg(&path)
        .run()
        .exit(1)
        .stdout_json(|v| assert_eq!(v["intact"], false))
        .stderr_starts_with(
            "error[audit_chain_broken]: record 3: missing (the trail starts at record 4",
        );
    // A broken trail is not pruned.
    Cmd::new([
        "ledger",
        "prune",
        "--before",
        "2999-01-01T00:00:00Z",
        "--ledger",
    ])
    .arg(&path)
    .run()
    .exit(1)
    .stdout_empty()
    .stderr_starts_with("error[audit_chain_broken]: record 3: ");
}

#[test]
fn ledger_prune_keeps_the_budget_counters_and_forgets_pruned_answers() {
    let s = Setup::new();
    let budget = ["--session", "sandbox_123", "--budget-calls", "2"];
    s.dispatch(&["echo"])
        .args(&budget)
        .request(|r| r["request_id"] = json!("call-0"))
        .run()
        .expect("succeeded", None, 0);
    prune(Path::new(s.path()), "2999-01-01T00:00:00Z", |v| {
        assert_eq!(v["removed"], 1);
    });
    // The counters verify: the checkpoint carries what the removed record implied.
    verify(Path::new(s.path()), 1);
    // The answer went with its record: a retry is never run again, nor replayed unchecked.
    s.dispatch(&["echo"])
        .args(&budget)
        .request(|r| r["request_id"] = json!("call-0"))
        .run()
        .expect("failed", Some("dispatch_indeterminate"), 1);
    assert_eq!(s.runs(), 1);
    // The budget still counts the pruned call.
    s.dispatch(&["echo"])
        .args(&budget)
        .request(|r| r["request_id"] = json!("call-1"))
        .run()
        .expect("succeeded", None, 0);
    s.dispatch(&["echo"])
        .args(&budget)
        .request(|r| r["request_id"] = json!("call-2"))
        .run()
        .expect("denied", Some("budget_exhausted"), 77);
    verify(Path::new(s.path()), 4);
}
