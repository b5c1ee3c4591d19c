//! The audit chain: `verify` names the first record that was edited, removed or cannot be
//! read; a record holds no free text.

use super::*;

// The shared suite: these run unchanged against SQLite and PostgreSQL. The tests that edit
// the file with rusqlite to break the chain are SQLite-only (see `sqlite.rs`).
both!(
    a_record_cannot_carry_control_characters_or_free_text_names,
    a_record_with_a_policy_round_trips_verifies_and_is_exported_with_it,
    a_policy_out_of_bounds_is_refused_on_append,
);

/// A ledger with three records in the new folder `dir`, and a raw connection to tamper with
/// it.
fn three_records(dir: &Path) -> (PathBuf, rusqlite::Connection) {
    std::fs::create_dir(dir).unwrap();
    let (path, mut ledger) = ledger_in(dir);
    for id in ["a", "b", "c"] {
        ledger
            .record(&record(
                &key(id),
                Verdict::Deny,
                "bridge.allowed_tools",
                "denied",
            ))
            .unwrap();
    }
    (path.clone(), rusqlite::Connection::open(&path).unwrap())
}

#[track_caller]
fn broken_at(path: &Path, seq: u64, says: &str) {
    match verify(path) {
        Verification::Broken { intact, at } => {
            assert_eq!((at.seq, intact), (seq, seq - 1), "{at:?}");
            assert!(at.reason.contains(says), "{at:?}");
        }
        intact => panic!("{intact:?}"),
    }
}

// SQLite-only: the edits are made with rusqlite on the file.
#[test]
fn verify_names_the_first_edited_removed_or_unreadable_record() {
    let dir = tempfile::tempdir().unwrap();
    let (path, conn) = three_records(&dir.path().join("x"));
    assert!(matches!(
        verify(&path),
        Verification::Intact { records: 3, .. }
    ));
    conn.execute(
        "UPDATE audit SET body = replace(body, '\"denied\"', '\"succeeded\"') WHERE seq = 2",
        [],
    )
    .unwrap();
    broken_at(&path, 2, "hash does not match");

    // Rewritten record with a fresh, self-consistent hash: the next record's prev catches it.
    let (path, conn) = three_records(&dir.path().join("y"));
    let body: String = conn
        .query_row("SELECT body FROM audit WHERE seq = 2", [], |r| r.get(0))
        .unwrap();
    let body = body.replace("\"denied\"", "\"failed\"");
    let hash = ptd_wire::envelope::canonical::sha256_hex(body.as_bytes());
    conn.execute(
        "UPDATE audit SET body = ?1, hash = ?2 WHERE seq = 2",
        rusqlite::params![body, hash],
    )
    .unwrap();
    broken_at(&path, 3, "prev does not match");

    let (path, conn) = three_records(&dir.path().join("z"));
    conn.execute("DELETE FROM audit WHERE seq = 2", []).unwrap();
    broken_at(&path, 2, "missing");

    let (path, conn) = three_records(&dir.path().join("w"));
    conn.execute("DELETE FROM audit WHERE seq = 3", []).unwrap();
    broken_at(&path, 3, "missing");

    let (path, conn) = three_records(&dir.path().join("v"));
    conn.execute("UPDATE audit SET body = x'ff00' WHERE seq = 1", [])
        .unwrap();
    broken_at(&path, 1, "cannot be read");

    let (path, conn) = three_records(&dir.path().join("u"));
    conn.execute("UPDATE audit SET time_ms = time_ms + 1 WHERE seq = 1", [])
        .unwrap();
    broken_at(&path, 1, "columns do not match");

    let (path, conn) = three_records(&dir.path().join("t"));
    conn.execute(
        "UPDATE audit SET body = replace(body, '\"attempt\":1', '\"attempt\":1,\"input\":\"x\"') WHERE seq = 1",
        [],
    )
    .unwrap();
    broken_at(&path, 1, "not an audit record");
}

fn a_record_cannot_carry_control_characters_or_free_text_names(backend: Backend) {
    let Some(db) = Db::new(backend) else { return };
    let mut ledger = db.open();
    let mut rec = record(&key("r"), Verdict::Deny, "bridge_ref", "denied");
    rec.request_id = "a\nb".into();
    assert!(matches!(ledger.record(&rec), Err(LedgerError::Record(m)) if m.contains("request_id")));
    rec.request_id = "x".repeat(crate::ledger::audit::MAX_FIELD_BYTES + 1);
    assert!(matches!(ledger.record(&rec), Err(LedgerError::Record(_))));
    for bad in ["", "Has Space", "UPPER", "a\"b", &"x".repeat(65)] {
        assert!(Name::new(bad).is_err(), "{bad:?}");
    }
    assert!(Name::new("request.authorization.allowed_tools").is_ok());
    assert_eq!(db.intact().0, 0);
}

#[test]
fn rules_keep_their_stored_spelling_and_an_unknown_one_is_an_error() {
    // The ledger's format: these spellings are in stored records and `audit export`.
    let spelled: Vec<&str> = Rule::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(
        spelled,
        [
            "bridge.allowed_tools",
            "request.authorization.allowed_tools",
            "bridge_ref",
            "bridge.schema",
            "request.schema",
            "request.max_bytes",
            "artifact_dir",
            "session",
            "budget:calls",
            "budget:tool",
            "budget:adapter_ms",
            "budget:concurrent",
            "ledger:replay",
            "ledger:request_id",
            "ledger:held",
            "ledger:lease",
            "ledger",
            "confinement",
            "dispatch",
            "policy",
            "approval",
            "approval:approve",
            "approval:deny",
            "ledger:checkpoint",
        ]
    );
    for rule in Rule::ALL {
        assert_eq!(Rule::parse(rule.as_str()), Ok(rule));
        assert_eq!(rule.to_string(), rule.as_str());
        // A stored rule is a valid name, as it was when it was one.
        assert!(Name::new(rule.as_str()).is_ok(), "{rule:?}");
    }
    for bad in [
        "",
        "ledger:indeterminate",
        "LEDGER:REPLAY",
        "ledger:replay ",
        "budget",
    ] {
        let err = Rule::parse(bad).unwrap_err();
        assert!(err.contains("is not a rule"), "{err}");
    }

    let rec = record(&key("r"), Verdict::Replay, "ledger:replay", "succeeded");
    let sealed = crate::ledger::audit::seal(&rec, 1, crate::ledger::audit::GENESIS).unwrap();
    assert!(
        sealed.body.contains(r#""rule":"ledger:replay""#),
        "{}",
        sealed.body
    );
    let (_, _, back) = crate::ledger::audit::open(&sealed.body).unwrap();
    assert_eq!(back.rule, Rule::LedgerReplay);
    let unknown = sealed.body.replace("ledger:replay", "ledger:unheard_of");
    let err = crate::ledger::audit::open(&unknown).unwrap_err();
    assert!(
        err.contains("not an audit record") && err.contains("ledger:unheard_of"),
        "{err}"
    );
}

// SQLite-only: the edit is made with rusqlite on the file.
#[test]
fn verify_names_a_record_whose_rule_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let (path, conn) = three_records(&dir.path().join("t"));
    conn.execute(
        "UPDATE audit SET body = replace(body, 'bridge.allowed_tools', 'bridge.allowed_tool') WHERE seq = 2",
        [],
    )
    .unwrap();
    broken_at(&path, 2, "is not a rule");
}

/// A record as the dispatcher wrote them before [`AuditRecord::policy`] existed, every other
/// optional field set.
fn old_format_record() -> AuditRecord {
    AuditRecord {
        time_ms: 1_769_817_600_123,
        bridge_ref: "sha256:bridge".into(),
        session_id: "s1".into(),
        request_id: "req-1".into(),
        tool: "workspace.write".into(),
        operation: "call".into(),
        request_digest: "d".repeat(64),
        attempt: 1,
        decision: Verdict::Admit,
        rule: Rule::BridgeAllowedTools,
        policy: None,
        approval: None,
        status: Name::new("succeeded").unwrap(),
        code: None,
        duration_ms: 12,
        adapter_ms: Some(9),
        exit_status: 0,
        resources: Resources {
            max_rss_kb: Some(2048),
            stdout_bytes: Some(17),
            ..Resources::default()
        },
        transcript_ref: Some("t-1.json".into()),
        envelope_sha256: Some("e".repeat(64)),
        session_key: Some("sha256:s".into()),
        network: None,
        checkpoint: None,
        admitted: true,
    }
}

/// The body and hash [`old_format_record`] had as record 1, sealed before the field existed.
const OLD_BODY: &str = concat!(
    r#"{"adapter_ms":9,"admitted":true,"attempt":1,"bridge_ref":"sha256:bridge","code":null,"#,
    r#""decision":"admit","duration_ms":12,"envelope_sha256":"#,
    r#""eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee","exit_status":0,"#,
    r#""operation":"call","prev":"#,
    r#""0000000000000000000000000000000000000000000000000000000000000000","request_digest":"#,
    r#""dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd","request_id":"req-1","#,
    r#""resources":{"max_rss_kb":2048,"stderr_bytes":null,"stdout_bytes":17,"#,
    r#""system_cpu_ms":null,"user_cpu_ms":null},"rule":"bridge.allowed_tools","seq":1,"#,
    r#""session_id":"s1","session_key":"sha256:s","status":"succeeded","#,
    r#""time_ms":1769817600123,"tool":"workspace.write","transcript_ref":"t-1.json"}"#
);
const OLD_HASH: &str = "d0e930012a36134f171a9f874b9a50c6d533922f4cfaf5616b954b4e4b2f245a";

fn a_policy() -> PolicyRef {
    PolicyRef {
        sha256: "0123456789abcdef".repeat(4),
        entry: "workspace.*".into(),
        line: Some(12),
    }
}

#[test]
fn a_record_without_a_policy_keeps_the_bytes_and_hash_it_had_before_the_field() {
    use crate::ledger::audit::{open, seal, Chain, StoredRecord, GENESIS};
    let sealed = seal(&old_format_record(), 1, GENESIS).unwrap();
    assert_eq!(sealed.body, OLD_BODY);
    assert_eq!(sealed.hash, OLD_HASH);
    assert!(!sealed.body.contains("policy"), "{}", sealed.body);
    // A body stored before the field existed reads back without one and checks in the chain.
    let (_, _, back) = open(OLD_BODY).unwrap();
    assert_eq!(back, old_format_record());
    let mut chain = Chain::default();
    chain
        .push(Ok(StoredRecord {
            seq: 1,
            time_ms: 1_769_817_600_123,
            prev: GENESIS.into(),
            hash: OLD_HASH.into(),
            body: OLD_BODY.into(),
        }))
        .unwrap();
    assert_eq!(
        chain.finish(Some((1, OLD_HASH.into()))).unwrap(),
        (1, OLD_HASH.to_string())
    );
}

#[test]
fn a_record_with_network_counts_round_trips_and_an_old_one_keeps_its_hash() {
    use crate::ledger::audit::{open, seal, GENESIS};
    let mut rec = old_format_record();
    assert_eq!(seal(&rec, 1, GENESIS).unwrap().hash, OLD_HASH);
    rec.network = Some(crate::ledger::NetworkCounts {
        allowed: 3,
        refused: 2,
    });
    let sealed = seal(&rec, 1, GENESIS).unwrap();
    assert!(
        sealed
            .body
            .contains(r#""network":{"allowed":3,"refused":2}"#),
        "{}",
        sealed.body
    );
    assert_ne!(sealed.hash, OLD_HASH, "the counts are covered by the hash");
    assert_eq!(open(&sealed.body).unwrap().2, rec);
}

fn a_record_with_a_policy_round_trips_verifies_and_is_exported_with_it(backend: Backend) {
    use crate::ledger::audit::{export_line, open, seal, GENESIS};
    let mut rec = old_format_record();
    rec.policy = Some(a_policy());
    let sealed = seal(&rec, 1, GENESIS).unwrap();
    let stored = format!(
        r#""policy":{{"entry":"workspace.*","line":12,"sha256":"{}"}}"#,
        "0123456789abcdef".repeat(4)
    );
    assert!(sealed.body.contains(&stored), "{}", sealed.body);
    assert_ne!(sealed.hash, OLD_HASH, "the policy is covered by the hash");
    assert_eq!(open(&sealed.body).unwrap().2, rec);
    // `line` is left out when there is none, and read back as none.
    rec.policy = Some(PolicyRef {
        entry: "defaults".into(),
        line: None,
        ..a_policy()
    });
    let sealed = seal(&rec, 1, GENESIS).unwrap();
    assert!(
        sealed
            .body
            .contains(r#""policy":{"entry":"defaults","sha256":"#),
        "{}",
        sealed.body
    );
    assert_eq!(open(&sealed.body).unwrap().2, rec);

    // Through a ledger: appended by `record` and by `finish`, verified, exported as stored.
    let Some(db) = Db::new(backend) else { return };
    let mut ledger = db.open();
    let me = Lease::current().unwrap();
    let none = Budgets::default();
    let mut denied = record(&key("a"), Verdict::Deny, "bridge.allowed_tools", "denied");
    denied.policy = Some(a_policy());
    ledger.record(&denied).unwrap();
    let k = key("b");
    assert!(matches!(
        ledger.begin(&call(&k, "d", &none), &me).unwrap(),
        Decision::Start { .. }
    ));
    let mut ran = record(&k, Verdict::Admit, "bridge.allowed_tools", "succeeded");
    ran.policy = Some(PolicyRef {
        entry: "defaults".into(),
        line: None,
        ..a_policy()
    });
    ledger
        .finish(&k, &me, &outcome("{\"ran\":1}", false), &ran)
        .unwrap();
    ledger
        .record(&record(&key("c"), Verdict::Deny, "bridge_ref", "denied"))
        .unwrap();
    assert_eq!(db.intact().0, 3);
    let mut lines = Vec::new();
    db.reader()
        .scan(0, &mut |row| {
            lines.push(export_line(&row.unwrap()).unwrap());
            true
        })
        .unwrap();
    let exported: Vec<serde_json::Value> = lines
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(
        exported[0]["policy"],
        serde_json::json!({"sha256": "0123456789abcdef".repeat(4), "entry": "workspace.*", "line": 12})
    );
    assert_eq!(
        exported[1]["policy"],
        serde_json::json!({"sha256": "0123456789abcdef".repeat(4), "entry": "defaults"})
    );
    assert!(exported[2].get("policy").is_none(), "{}", lines[2]);
    // A replay of the finished call: its record (with the policy) covers the envelope.
    assert!(matches!(
        ledger.begin(&call(&k, "d", &none), &me).unwrap(),
        Decision::Replay(_)
    ));
}

/// Records whose policy breaks a bound, with what the refusal names.
fn bad_policies() -> Vec<(PolicyRef, &'static str)> {
    let with = |f: &dyn Fn(&mut PolicyRef)| {
        let mut p = a_policy();
        f(&mut p);
        p
    };
    vec![
        (with(&|p| p.sha256 = "0123".into()), "policy.sha256"),
        (with(&|p| p.sha256 = "A".repeat(64)), "policy.sha256"),
        (with(&|p| p.sha256 = "g".repeat(64)), "policy.sha256"),
        (with(&|p| p.sha256 = "a".repeat(65)), "policy.sha256"),
        (with(&|p| p.entry = String::new()), "policy.entry is empty"),
        (
            with(&|p| p.entry = "x".repeat(crate::ledger::audit::MAX_FIELD_BYTES + 1)),
            "policy.entry is longer",
        ),
        (
            with(&|p| p.entry = "git.\ncommit".into()),
            "policy.entry holds a control character",
        ),
        (
            with(&|p| p.entry = "git.\u{7f}".into()),
            "policy.entry holds a control character",
        ),
        (with(&|p| p.line = Some(0)), "policy.line is 0"),
    ]
}

fn a_policy_out_of_bounds_is_refused_on_append(backend: Backend) {
    let Some(db) = Db::new(backend) else { return };
    refuse_policies_out_of_bounds(&db);
}

/// Appends a record with a policy at the bounds to the new ledger `db`, then each policy out
/// of bounds, which is refused.
fn refuse_policies_out_of_bounds(db: &Db) {
    let mut ledger = db.open();
    let entry_max = PolicyRef {
        entry: "x".repeat(crate::ledger::audit::MAX_FIELD_BYTES),
        line: Some(1),
        ..a_policy()
    };
    let mut rec = record(&key("ok"), Verdict::Deny, "bridge.allowed_tools", "denied");
    rec.policy = Some(entry_max);
    ledger.record(&rec).unwrap();
    for (policy, says) in bad_policies() {
        let mut rec = record(&key("r"), Verdict::Deny, "bridge.allowed_tools", "denied");
        rec.policy = Some(policy.clone());
        match ledger.record(&rec) {
            Err(LedgerError::Record(m)) => assert!(m.contains(says), "{m} / {says}"),
            other => panic!("{policy:?}: {other:?}"),
        }
        // Nor through the store directly (`seal` checks before it appends).
        let err = crate::ledger::audit::seal(&rec, 2, crate::ledger::audit::GENESIS).unwrap_err();
        assert!(err.contains(says), "{err}");
    }
    assert_eq!(db.intact().0, 1);
}

// SQLite-only: the edits are made with rusqlite on the file.
#[test]
fn a_policy_out_of_bounds_is_named_by_verify() {
    let db = Db::new(Backend::Sqlite).unwrap();
    refuse_policies_out_of_bounds(&db);
    let path = db.path();
    // Stored anyway (an edit, or a writer that skipped the check), each is named by verify
    // even with a hash recomputed for the edited body.
    let conn = rusqlite::Connection::open(path).unwrap();
    let good: String = conn
        .query_row("SELECT body FROM audit WHERE seq = 1", [], |r| r.get(0))
        .unwrap();
    let good_hash: String = conn
        .query_row("SELECT hash FROM audit WHERE seq = 1", [], |r| r.get(0))
        .unwrap();
    for (policy, says) in bad_policies() {
        let mut value: serde_json::Value = serde_json::from_str(&good).unwrap();
        value["policy"] = serde_json::to_value(&policy).unwrap();
        let body = ptd_wire::envelope::canonical::to_string(&value);
        let hash = ptd_wire::envelope::canonical::sha256_hex(body.as_bytes());
        conn.execute(
            "UPDATE audit SET body = ?1, hash = ?2 WHERE seq = 1",
            rusqlite::params![body, hash],
        )
        .unwrap();
        conn.execute("UPDATE head SET hash = ?1", rusqlite::params![hash])
            .unwrap();
        broken_at(path, 1, says);
    }
    conn.execute(
        "UPDATE audit SET body = ?1, hash = ?2 WHERE seq = 1",
        rusqlite::params![good, good_hash],
    )
    .unwrap();
    conn.execute("UPDATE head SET hash = ?1", rusqlite::params![good_hash])
        .unwrap();
    assert!(matches!(
        verify(path),
        Verification::Intact { records: 1, .. }
    ));
}
