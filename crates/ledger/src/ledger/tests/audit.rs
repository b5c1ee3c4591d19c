//! The audit chain: `verify` names the first record that was edited, removed or cannot be
//! read; a record holds no free text.

use super::*;

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

#[test]
fn a_record_cannot_carry_control_characters_or_free_text_names() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut ledger) = ledger_in(dir.path());
    let mut rec = record(&key("r"), Verdict::Deny, "bridge_ref", "denied");
    rec.request_id = "a\nb".into();
    assert!(matches!(ledger.record(&rec), Err(LedgerError::Record(m)) if m.contains("request_id")));
    rec.request_id = "x".repeat(crate::ledger::audit::MAX_FIELD_BYTES + 1);
    assert!(matches!(ledger.record(&rec), Err(LedgerError::Record(_))));
    for bad in ["", "Has Space", "UPPER", "a\"b", &"x".repeat(65)] {
        assert!(Name::new(bad).is_err(), "{bad:?}");
    }
    assert!(Name::new("request.authorization.allowed_tools").is_ok());
    assert!(matches!(
        verify(&dir.path().join("ledger.db")),
        Verification::Intact { records: 0, .. }
    ));
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
