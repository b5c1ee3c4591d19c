//! The ledger, hardened (SPEC §14.4), through the binary: budgets belong to the host's
//! `--session`, host-side failures are not final, the chain covers the stored envelopes, only
//! the dispatcher's own file is a ledger, and a ledger file stands alone after use.

use super::ledger_rules::Setup;
use super::*;

/// The default request with another request id and sandbox session id.
fn call(request_id: &str, session: &str) -> impl FnOnce(&mut Value) {
    let (request_id, session) = (request_id.to_string(), session.to_string());
    move |r: &mut Value| {
        r["request_id"] = json!(request_id);
        r["sandbox_session"]["sandbox_session_id"] = json!(session);
    }
}

#[test]
fn budgets_count_the_hosts_session_and_a_made_up_session_id_is_denied() {
    let s = Setup::new();
    let budget = ["--session", "sandbox_123", "--budget-calls", "1"];
    s.dispatch(&["echo"])
        .args(&budget)
        .request(call("call-0", "sandbox_123"))
        .run()
        .expect("succeeded", None, 0);
    // Before --session, each made-up id had a budget of its own: three more calls ran.
    for n in 1..4 {
        let run = s
            .dispatch(&["echo"])
            .args(&budget)
            .request(call(&format!("call-{n}"), &format!("made-up-{n}")))
            .run();
        run.expect("denied", Some("session_mismatch"), 77);
        assert_eq!(run.envelope["error"]["retryable"], false);
        assert_eq!(run.dispatch()["adapter_started"], false);
    }
    s.dispatch(&["echo"])
        .args(&budget)
        .request(call("call-4", "sandbox_123"))
        .run()
        .expect("denied", Some("budget_exhausted"), 77);
    assert_eq!(s.runs(), 1);
    let got: Vec<(String, String)> = s
        .records()
        .iter()
        .map(|r| (r["decision"].to_string(), r["rule"].to_string()))
        .collect();
    let want = |d: &str, r: &str| (format!("\"{d}\""), format!("\"{r}\""));
    assert_eq!(
        got,
        [
            want("admit", "bridge.allowed_tools"),
            want("deny", "session"),
            want("deny", "session"),
            want("deny", "session"),
            want("deny", "budget:calls"),
        ]
    );
    s.verify(5);
}

#[test]
fn the_session_check_applies_without_a_ledger_and_the_variable_names_the_session() {
    let s = Setup::new();
    Dispatch::with_bridge(s.bridge(&["echo"]))
        .args(&["--session", "another"])
        .run()
        .expect("denied", Some("session_mismatch"), 77);
    Dispatch::with_bridge(s.bridge(&["echo"]))
        .env("PARENT_TOOL_DISPATCH_SESSION", "another")
        .run()
        .expect("denied", Some("session_mismatch"), 77);
    assert_eq!(s.runs(), 0);
    Dispatch::with_bridge(s.bridge(&["echo"]))
        .env("PARENT_TOOL_DISPATCH_SESSION", "sandbox_123")
        .run()
        .expect("succeeded", None, 0);
    assert_eq!(s.runs(), 1);
    assert!(!s.ledger.exists());
}

#[test]
fn a_budget_without_the_hosts_session_and_a_bad_session_id_are_usage_errors() {
    let s = Setup::new();
    for budget in [
        &["--budget-calls", "3"][..],
        &["--budget-tool", "workspace.read=1"],
        &["--budget-adapter-ms", "100"],
        &["--max-concurrent", "2"],
    ] {
        let run = s.dispatch(&["echo"]).args(budget).run();
        run.output().exit(2).stdout_empty().stderr_eq(format!(
            "error[usage]: {} needs the host's session: pass --session ID or set \
             PARENT_TOOL_DISPATCH_SESSION\n\nFor more information, try '--help'.\n",
            budget[0]
        ));
    }
    let long = "x".repeat(257);
    for (session, why) in [
        ("", "the session id is empty"),
        (long.as_str(), "the session id is longer than 256 bytes"),
        ("a\tb", "the session id holds a control character"),
    ] {
        let run = s
            .dispatch(&["echo"])
            .args(&["--session", session, "--budget-calls", "1"])
            .run();
        run.output().exit(2).stdout_empty().stderr_eq(format!(
            "error[usage]: invalid value for --session: {why}\n\nFor more information, try \
             '--help'.\n"
        ));
    }
    assert_eq!(s.runs(), 0);
    assert!(!s.ledger.exists());
}

#[test]
fn a_host_side_failure_is_not_final_and_runs_once_the_host_fixed_it() {
    let s = Setup::new();
    let cwd = s.dir.path().join("work");
    let with_cwd = |b: &mut Value| b["dispatcher"]["command"]["cwd_env"] = json!("ADAPTER_CWD");
    let first = s
        .dispatch(&["echo"])
        .bridge(with_cwd)
        .env("ADAPTER_CWD", cwd.to_str().unwrap())
        .run();
    first.expect("unavailable", Some("cwd_unavailable"), 69);
    assert_eq!(s.runs(), 0);
    std::fs::create_dir(&cwd).unwrap();
    let fixed = s
        .dispatch(&["echo"])
        .bridge(with_cwd)
        .env("ADAPTER_CWD", cwd.to_str().unwrap())
        .run();
    fixed.expect("succeeded", None, 0);
    assert_eq!(
        fixed.envelope["diagnostics"]["ledger"],
        json!({"replayed": false, "attempt": 2})
    );
    assert_eq!(s.runs(), 1);
    // And now it is final.
    let again = s
        .dispatch(&["echo"])
        .bridge(with_cwd)
        .env("ADAPTER_CWD", cwd.to_str().unwrap())
        .run();
    again.expect("succeeded", None, 0);
    assert_eq!(again.envelope["diagnostics"]["ledger"]["replayed"], true);
    assert_eq!(s.runs(), 1);
    s.verify(3);
}

#[test]
fn a_missing_adapter_is_not_final_either() {
    let s = Setup::new();
    let missing = s.dir.path().join("adapter");
    let argv = |b: &mut Value| {
        b["dispatcher"]["command"]["argv"] = json!([s.dir.path().join("adapter")]);
    };
    let first = s.dispatch(&["echo"]).bridge(argv).run();
    first.expect("unavailable", Some("adapter_not_found"), 69);
    std::fs::write(&missing, "#!/bin/sh\nexit 3\n").unwrap();
    let second = s.dispatch(&["echo"]).bridge(argv).run();
    second.expect("unavailable", Some("adapter_not_executable"), 69);
    assert_eq!(second.envelope["diagnostics"]["ledger"]["attempt"], 2);
    let records = s.records();
    assert_eq!(records.len(), 2);
    assert_eq!(records[1]["attempt"], 2);
}

#[test]
fn an_edited_stored_envelope_fails_verify_and_is_never_replayed() {
    let s = Setup::new();
    s.dispatch(&["echo"]).run().expect("succeeded", None, 0);
    s.verify(1);
    // Whoever can write the file makes the replay say something else.
    let edited = rusqlite::Connection::open(&s.ledger)
        .unwrap()
        .execute(
            "UPDATE calls SET envelope = replace(envelope, '\"succeeded\"', '\"forged\"')",
            [],
        )
        .unwrap();
    assert_eq!(edited, 1);
    Cmd::new(["audit", "verify", "--ledger", s.path()])
        .run()
        .exit(1)
        .stdout_json(|v| {
            assert_eq!(v["intact"], false);
            assert_eq!(v["records_intact"], 1);
            assert_eq!(v["first_bad"]["seq"], 1);
        })
        .stderr_eq(
            "error[audit_chain_broken]: record 1: the envelope stored with this record does \
             not match it (edited)\n",
        );
    let replay = s.dispatch(&["echo"]).run();
    replay.expect("unavailable", Some("ledger_unavailable"), 69);
    let message = replay.envelope["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("the ledger fails verification: record 1: the stored envelope does not match its audit record (edited)"),
        "{message}"
    );
    assert!(!replay.stdout.contains("forged"));
    assert_eq!(s.runs(), 1);
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
}

fn mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A run refused with `ledger_unavailable` whose message says `why`; nothing started.
#[track_caller]
fn refused(out: &Output, why: &str) {
    out.exit(69)
        .stderr_contains("error[ledger_unavailable]")
        .stdout_with(|text| {
            let envelope = json_line(text);
            assert_eq!(envelope["error"]["code"], "ledger_unavailable");
            let message = envelope["error"]["message"].as_str().unwrap();
            assert!(message.contains(why), "{message}");
            assert_eq!(
                envelope["diagnostics"]["dispatch"]["adapter_started"],
                false
            );
        });
}

#[test]
fn a_file_planted_at_the_ledgers_name_is_never_adopted() {
    require!(skip::root());
    let s = Setup::new();
    // Another user's empty, world-writable file: today it became the ledger, its owner able
    // to forge every envelope a replay prints.
    std::fs::write(&s.ledger, b"").unwrap();
    mode(&s.ledger, 0o666);
    chown(&s.ledger, super::host_reach::NOBODY);
    refused(
        &s.command(&["echo"], "call-0").run(),
        "the ledger is not this user's own: the ledger file belongs to another user",
    );
    // Our own empty file (a copy without its WAL, say) is not a complete ledger either.
    chown(&s.ledger, 0);
    mode(&s.ledger, 0o600);
    refused(
        &s.command(&["echo"], "call-0").run(),
        "the file is not a parent-tool-dispatch ledger: an empty file, not a complete ledger",
    );
    assert_eq!(std::fs::read(&s.ledger).unwrap(), b"");
    // Ours but writable by others; a -wal or -shm of another user.
    std::fs::remove_file(&s.ledger).unwrap();
    s.command(&["echo"], "call-1")
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_contains("\"succeeded\"");
    mode(&s.ledger, 0o646);
    refused(
        &s.command(&["echo"], "call-2").run(),
        "the ledger file is writable by its group or others",
    );
    mode(&s.ledger, 0o600);
    let wal = s.dir.path().join("ledger.db-wal");
    if !wal.exists() {
        std::fs::write(&wal, b"").unwrap();
    }
    chown(&wal, super::host_reach::NOBODY);
    refused(
        &s.command(&["echo"], "call-3").run(),
        "the ledger's -wal file belongs to another user",
    );
    chown(&wal, 0);
    // A folder another user may write.
    mode(s.dir.path(), 0o777);
    refused(
        &s.command(&["echo"], "call-4").run(),
        "the ledger's folder is writable by another user",
    );
    mode(s.dir.path(), 0o700);
    assert_eq!(s.runs(), 1);
}

#[test]
fn nobody_cannot_use_roots_ledger_and_root_refuses_nobodys() {
    require!(skip::root());
    let (dir, copies) = super::host_reach::copies_for_nobody(&[bin(), test_bin()]);
    let folder = dir.path().join("ledger");
    std::fs::create_dir(&folder).unwrap();
    mode(&folder, 0o700);
    let ledger = folder.join("ledger.db");
    let as_user = |uid: u32| {
        let mut b = bridge(&["echo"]);
        b["dispatcher"]["command"]["argv"][0] = copies[1].to_str().unwrap().into();
        Cmd::of(
            copies[0].clone(),
            [
                "--ledger".to_string(),
                ledger.to_str().unwrap().to_string(),
                "--parent-tool-bridge".to_string(),
                b.to_string(),
            ],
        )
        .stdin(request().to_string())
        .user(uid, uid)
    };
    // Root's ledger, in a folder nobody owns: nobody's dispatcher refuses it.
    as_user(0)
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_contains("\"succeeded\"");
    chown(&folder, super::host_reach::NOBODY);
    refused(
        &as_user(super::host_reach::NOBODY).run(),
        "the ledger file belongs to another user",
    );
    // Nobody's ledger: root's dispatcher refuses it (and its folder, which nobody owns).
    std::fs::remove_file(&ledger).unwrap();
    for side in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(folder.join(format!("ledger.db{side}")));
    }
    as_user(super::host_reach::NOBODY)
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_contains("\"succeeded\"");
    refused(
        &as_user(0).run(),
        "the ledger's folder is writable by another user",
    );
    chown(&folder, 0);
    refused(&as_user(0).run(), "the ledger file belongs to another user");
}

#[test]
fn a_copy_of_the_ledger_file_alone_replays_what_it_recorded() {
    let s = Setup::new();
    s.dispatch(&["echo"]).run().expect("succeeded", None, 0);
    assert_eq!(s.runs(), 1);
    // The dispatcher checkpointed before it exited: its WAL is empty, and the file alone,
    // copied without its -wal and -shm, holds the call.
    let wal = s.dir.path().join("ledger.db-wal");
    assert_eq!(std::fs::metadata(&wal).map_or(0, |m| m.len()), 0);
    let elsewhere = tempfile::tempdir().unwrap();
    let copy = elsewhere.path().join("copy.db");
    std::fs::copy(&s.ledger, &copy).unwrap();
    let replay = Dispatch::with_bridge(s.bridge(&["echo"]))
        .args(&["--ledger", copy.to_str().unwrap()])
        .run();
    replay.expect("succeeded", None, 0);
    assert_eq!(replay.envelope["diagnostics"]["ledger"]["replayed"], true);
    assert_eq!(
        s.runs(),
        1,
        "the copy answered from its record: nothing ran twice"
    );
    Cmd::new(["audit", "verify", "--ledger", copy.to_str().unwrap()])
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_json(|v| assert_eq!(v["records"], json!(2), "{v}"));
}

/// The names in `folder`, sorted.
fn names(folder: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `audit verify` and `audit export` of `ledger` by `cmd`'s user pass, over `n` records.
#[track_caller]
fn audits(cmd: impl Fn(&[&str]) -> Cmd, ledger: &Path, n: usize) {
    let path = ledger.to_str().unwrap();
    cmd(&["audit", "verify", "--ledger", path])
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_json(|v| {
            assert_eq!(v["intact"], json!(true), "{v}");
            assert_eq!(v["records"], json!(n), "{v}");
        });
    cmd(&["audit", "export", "--ledger", path])
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_with(|text| assert_eq!(text.lines().count(), n, "{text}"));
}

#[test]
fn audit_reads_a_0444_copy_in_a_0555_folder_and_makes_no_file_beside_it() {
    let s = Setup::new();
    s.dispatch(&["echo"]).run().expect("succeeded", None, 0);
    s.dispatch(&["echo"]).run().expect("succeeded", None, 0);
    let elsewhere = tempfile::tempdir().unwrap();
    let folder = elsewhere.path().join("archive");
    std::fs::create_dir(&folder).unwrap();
    let copy = folder.join("ledger.db");
    std::fs::copy(&s.ledger, &copy).unwrap();
    mode(&copy, 0o444);
    mode(&folder, 0o555);
    let before = std::fs::read(&copy).unwrap();
    // Root may write the folder whatever its bits: nothing appears because nothing is made.
    audits(|args| Cmd::new(args.iter().copied()), &copy, 2);
    assert_eq!(names(&folder), ["ledger.db"]);
    assert_eq!(std::fs::read(&copy).unwrap(), before);
    // The ledger in use, its -wal and -shm there: read as it is, nothing added.
    let in_use = names(s.dir.path());
    audits(|args| Cmd::new(args.iter().copied()), &s.ledger, 2);
    assert_eq!(names(s.dir.path()), in_use);
    mode(&folder, 0o755);
}

#[test]
fn any_user_who_can_read_the_ledger_can_audit_it() {
    require!(skip::root());
    let (dir, copies) = super::host_reach::copies_for_nobody(&[bin(), test_bin()]);
    let folder = dir.path().join("ledger");
    std::fs::create_dir(&folder).unwrap();
    mode(&folder, 0o755);
    let ledger = folder.join("ledger.db");
    let mut b = bridge(&["echo"]);
    b["dispatcher"]["command"]["argv"][0] = copies[1].to_str().unwrap().into();
    Cmd::of(
        copies[0].clone(),
        [
            "--ledger".to_string(),
            ledger.to_str().unwrap().to_string(),
            "--parent-tool-bridge".to_string(),
            b.to_string(),
        ],
    )
    .stdin(request().to_string())
    .run()
    .exit(0)
    .stderr_empty()
    .stdout_contains("\"succeeded\"");
    // Root's ledger, readable by all; its -wal and -shm root's own 0600.
    mode(&ledger, 0o644);
    let as_nobody = |args: &[&str]| {
        let nobody = super::host_reach::NOBODY;
        Cmd::of(copies[0].clone(), args.iter().copied()).user(nobody, nobody)
    };
    let before = names(&folder);
    audits(as_nobody, &ledger, 1);
    // Its -wal and -shm readable too: read with SQLite's locks, the -shm read-only.
    for side in ["ledger.db-wal", "ledger.db-shm"] {
        mode(&folder.join(side), 0o644);
    }
    audits(as_nobody, &ledger, 1);
    assert_eq!(names(&folder), before);
    // Unreadable: refused, saying so.
    mode(&ledger, 0o600);
    as_nobody(&["audit", "verify", "--ledger", ledger.to_str().unwrap()])
        .run()
        .exit(69)
        .stdout_empty()
        .stderr_contains("error[ledger_unavailable]: the ledger file cannot be opened");
}

#[test]
fn ledger_backup_writes_a_copy_that_verifies_and_replays_and_never_replaces() {
    use std::os::unix::fs::PermissionsExt;
    let s = Setup::new();
    s.dispatch(&["echo"]).run().expect("succeeded", None, 0);
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("backup.db");
    let dest_str = dest.to_str().unwrap();
    Cmd::new(["ledger", "backup", "--ledger", s.path(), dest_str])
        .run()
        .exit(0)
        .stdout_empty()
        .stderr_empty();
    let meta = std::fs::symlink_metadata(&dest).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
    assert_eq!(names(out.path()), ["backup.db"], "the copy stands alone");
    Cmd::new(["audit", "verify", "--ledger", dest_str])
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_json(|v| assert_eq!(v["records"], json!(1), "{v}"));
    let replay = Dispatch::with_bridge(s.bridge(&["echo"]))
        .args(&["--ledger", dest_str])
        .run();
    replay.expect("succeeded", None, 0);
    assert_eq!(replay.envelope["diagnostics"]["ledger"]["replayed"], true);
    assert_eq!(s.runs(), 1);
    // An existing destination of any kind is refused and left as it is.
    let file = out.path().join("file");
    std::fs::write(&file, b"mine").unwrap();
    let link = out.path().join("dangling");
    std::os::unix::fs::symlink(out.path().join("nowhere"), &link).unwrap();
    for existing in [&dest, &file, &link, &out.path().to_path_buf()] {
        let before = std::fs::symlink_metadata(existing).unwrap();
        let content = std::fs::read(existing).ok();
        Cmd::new(["ledger", "backup", "--ledger", s.path()])
            .arg(existing.to_str().unwrap())
            .run()
            .exit(2)
            .stdout_empty()
            .stderr_eq(
                "error[destination_exists]: the destination already exists; nothing was \
                 written\n",
            );
        let after = std::fs::symlink_metadata(existing).unwrap();
        assert_eq!(
            (before.modified().unwrap(), before.len()),
            (after.modified().unwrap(), after.len())
        );
        assert_eq!(std::fs::read(existing).ok(), content);
    }
    assert!(!out.path().join("nowhere").exists());
    // A folder that is not there: nothing made, exit 74; a missing ledger: 69.
    Cmd::new(["ledger", "backup", "--ledger", s.path()])
        .arg(out.path().join("missing/backup.db").to_str().unwrap())
        .run()
        .exit(74)
        .stdout_empty()
        .stderr_contains("error[backup_failed]: the backup cannot be written");
    let missing = out.path().join("none.db");
    Cmd::new(["ledger", "backup", "--ledger", missing.to_str().unwrap()])
        .arg(out.path().join("b2.db").to_str().unwrap())
        .run()
        .exit(69)
        .stderr_eq("error[ledger_unavailable]: the ledger file does not exist\n");
    // (The replay used the copy as a ledger: its -wal and -shm are the main job's.)
    assert_eq!(
        names(out.path()),
        [
            "backup.db",
            "backup.db-shm",
            "backup.db-wal",
            "dangling",
            "file"
        ]
    );
}

/// `audit verify` on `s`'s ledger after `edit` (SQL) fails naming the counter `what`; the
/// edit is then undone with `undo`, and the ledger verifies again.
fn miscounted(s: &Setup, records: usize, edit: &str, undo: &str, what: &str) {
    let conn = rusqlite::Connection::open(&s.ledger).unwrap();
    assert_eq!(conn.execute(edit, []).unwrap(), 1, "{edit}");
    Cmd::new(["audit", "verify", "--ledger", s.path()])
        .run()
        .exit(1)
        .stdout_json(|v| {
            assert_eq!(v["intact"], false, "{v}");
            assert_eq!(v["records_intact"], records, "{v}");
            let name = v["counter"]["name"].as_str().unwrap();
            assert!(name.ends_with(what), "{v}");
            assert!(name.starts_with("session sha256:"), "{v}");
        })
        .stderr_with(|text| {
            assert!(
                text.starts_with("error[audit_counter_mismatch]: budget counter of session "),
                "{text}"
            );
            assert!(text.contains(what), "{text}");
            assert!(text.ends_with("(edited)\n"), "{text}");
        });
    assert_eq!(conn.execute(undo, []).unwrap(), 1, "{undo}");
    s.verify(records);
}

#[test]
fn verify_checks_the_budget_counters_against_the_records() {
    let s = Setup::new();
    s.dispatch(&["echo"])
        .request(call("call-0", "another"))
        .run()
        .expect("succeeded", None, 0);
    let tool = s.records()[0]["tool"].as_str().unwrap().to_string();
    let limit = format!("{tool}=3");
    let budget = [
        "--session",
        "sandbox_123",
        "--budget-calls",
        "3",
        "--budget-tool",
        &limit,
        "--budget-adapter-ms",
        "600000",
    ];
    for n in 1..5 {
        let run = s
            .dispatch(&["echo"])
            .args(&budget)
            .request(call(&format!("call-{n}"), "sandbox_123"))
            .run();
        if n < 4 {
            run.expect("succeeded", None, 0);
        } else {
            run.expect("denied", Some("budget_exhausted"), 77);
        }
    }
    // A replay counts nothing.
    s.dispatch(&["echo"])
        .args(&budget)
        .request(call("call-1", "sandbox_123"))
        .run()
        .expect("succeeded", None, 0);
    let records = s.records();
    let admitted: Vec<bool> = records.iter().map(|r| r["admitted"] == true).collect();
    assert_eq!(admitted, [true, true, true, true, false, false]);
    // The counters' session key is on the records of the calls that ran, never the id itself.
    let key = records[1]["session_key"].as_str().unwrap();
    assert!(key.starts_with("sha256:") && key.len() == 71, "{key}");
    assert!(records[1..4].iter().all(|r| r["session_key"] == key));
    assert!(records[4..].iter().all(|r| r.get("session_key").is_none()));
    assert_ne!(records[0]["session_key"], key);
    s.verify(6);
    // Whoever can write the file gives the session its budget back: verify names the counter.
    let calls = "UPDATE session_usage SET calls = calls - 1 WHERE calls = 3";
    let undo = "UPDATE session_usage SET calls = calls + 1 WHERE calls = 2";
    miscounted(&s, 6, calls, undo, ": calls");
    let tools = format!("UPDATE tool_usage SET calls = 0 WHERE calls = 3 AND tool = '{tool}'");
    let undo = format!("UPDATE tool_usage SET calls = 3 WHERE calls = 0 AND tool = '{tool}'");
    miscounted(&s, 6, &tools, &undo, &format!(": tool {tool}"));
    let ms = "UPDATE session_usage SET adapter_ms = adapter_ms + 1000000 WHERE calls = 3";
    let undo = "UPDATE session_usage SET adapter_ms = adapter_ms - 1000000 WHERE calls = 3";
    miscounted(&s, 6, ms, undo, ": adapter_ms");
    // A counter row that no record implies is named too.
    let planted = "INSERT INTO tool_usage VALUES ('b', 'sha256:0', 't', 1)";
    miscounted(
        &s,
        6,
        planted,
        "DELETE FROM tool_usage WHERE tool = 't'",
        ": tool t",
    );
}
