//! The ledger on PostgreSQL (SPEC §19.1) through the binary, against this test process's own
//! throwaway cluster (`ptd_sys::pgtest`: `initdb` + `pg_ctl` on a loopback port, removed at
//! exit): `ledger migrate`, the main job's once-then-replay, the refusals (no schema, a
//! password in the URL, a server that is not there), `audit` and `approvals` on a URL, and
//! `ledger backup` / `ledger restore`.

use super::*;
use ptd_sys::pgtest;

/// A fresh database's URL, and the cluster's password (given as `PGPASSWORD`).
fn database() -> (String, String) {
    let url = pgtest::fresh_database();
    let password = pgtest::cluster().unwrap().password.clone();
    (url, password)
}

fn migrate(url: &str, password: &str) -> Value {
    let out = Cmd::new(["ledger", "migrate", "--ledger", url])
        .env("PGPASSWORD", password)
        .run();
    let mut report = Value::Null;
    out.exit(0)
        .stderr_empty()
        .stdout_json(|r| report = r.clone());
    report
}

/// `audit verify` of the ledger at `url` says it is intact.
fn verify_intact(url: &str, password: &str) {
    Cmd::new(["audit", "verify", "--ledger", url])
        .env("PGPASSWORD", password)
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_contains("\"intact\"");
}

#[test]
fn the_main_job_runs_a_call_once_then_replays_it_from_postgresql() {
    require!(skip::postgres());
    let (url, password) = database();
    // No schema yet: refused, with what to run; not retryable (running again will not help).
    let run = Dispatch::adapter(&["echo"])
        .args(&["--ledger", &url])
        .env("PGPASSWORD", &password)
        .run();
    run.expect("unavailable", Some("ledger_unavailable"), 69);
    assert_eq!(run.envelope["error"]["retryable"], false);
    run.output()
        .stderr_contains("parent-tool-dispatch ledger migrate --ledger postgres://");
    assert_eq!(migrate(&url, &password), json!({"from": null, "to": 1}));
    assert_eq!(migrate(&url, &password), json!({"from": 1, "to": 1}));
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let log = format!("pidfile:{}", ran.display());
    let first = Dispatch::adapter(&[&log, "echo"])
        .args(&["--ledger", &url])
        .env("PGPASSWORD", &password)
        .run();
    first.expect("succeeded", None, 0);
    let again = Dispatch::adapter(&[&log, "echo"])
        .args(&["--ledger", &url])
        .env("PGPASSWORD", &password)
        .run();
    again.expect("succeeded", None, 0);
    assert_eq!(again.envelope["diagnostics"]["ledger"]["replayed"], true);
    assert_eq!(pids(&ran).len(), 1, "the adapter ran once");
    // The audit trail is there, and intact.
    verify_intact(&url, &password);
    let out = Cmd::new(["audit", "export", "--ledger", &url])
        .env("PGPASSWORD", &password)
        .run();
    out.exit(0).stderr_empty().stdout_with(|text| {
        assert_eq!(text.lines().count(), 2, "{text}");
    });
    // The password is nowhere in what the runs printed.
    for text in [&first.stderr, &again.stderr] {
        assert!(!text.contains(&password));
    }
    assert!(!first.envelope.to_string().contains(&password));
}

#[test]
fn normal_durability_on_postgresql_runs_a_call_once_and_replays_it() {
    require!(skip::postgres());
    let (url, password) = database();
    migrate(&url, &password);
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let log = format!("pidfile:{}", ran.display());
    // The commits do not wait for the server's flush (`synchronous_commit = off` in each
    // write transaction: ptd-ledger's own test asks the server); every rule still holds.
    let call = || {
        Dispatch::adapter(&[&log, "echo"])
            .args(&["--ledger", &url, "--ledger-durability", "normal"])
            .env("PGPASSWORD", &password)
            .run()
    };
    let first = call();
    first.expect("succeeded", None, 0);
    assert_eq!(first.envelope["diagnostics"]["ledger"]["replayed"], false);
    let again = call();
    again.expect("succeeded", None, 0);
    assert_eq!(again.envelope["diagnostics"]["ledger"]["replayed"], true);
    assert_eq!(pids(&ran).len(), 1, "the adapter ran once");
    verify_intact(&url, &password);
}

#[test]
fn a_server_that_is_not_there_is_retryable_and_a_password_in_the_url_is_a_usage_error() {
    // Nothing listens on a port just taken and released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://ptd@127.0.0.1:{port}/ptd?sslmode=disable&connect_timeout=2");
    let run = Dispatch::adapter(&["echo"])
        .args(&["--ledger", &url])
        .env("PGPASSWORD", "not-used")
        .run();
    run.expect("unavailable", Some("ledger_unavailable"), 69);
    assert_eq!(run.envelope["error"]["retryable"], true);
    assert_eq!(run.dispatch()["adapter_started"], false);
    let secret = "postgres://ptd:hunter2-pw@127.0.0.1:5432/ptd";
    let run = Dispatch::adapter(&["echo"])
        .args(&["--ledger", secret])
        .run();
    run.output()
        .exit(2)
        .stdout_empty()
        .stderr_starts_with("error[usage]: --ledger: ")
        .stderr_lacks("hunter2-pw");
}

#[test]
fn a_backup_of_a_postgresql_ledger_restores_into_another() {
    require!(skip::postgres());
    let (url, password) = database();
    migrate(&url, &password);
    Dispatch::adapter(&["echo"])
        .args(&["--ledger", &url])
        .env("PGPASSWORD", &password)
        .run()
        .expect("succeeded", None, 0);
    let dir = tempfile::tempdir().unwrap();
    let backup = dir.path().join("ledger.jsonl");
    Cmd::new([
        "ledger",
        "backup",
        "--ledger",
        &url,
        backup.to_str().unwrap(),
    ])
    .env("PGPASSWORD", &password)
    .run()
    .exit(0)
    .stdout_empty()
    .stderr_empty();
    let (other, _) = database();
    migrate(&other, &password);
    let out = Cmd::new([
        "ledger",
        "restore",
        "--ledger",
        &other,
        backup.to_str().unwrap(),
    ])
    .env("PGPASSWORD", &password)
    .run();
    out.exit(0).stderr_empty().stdout_json(|report| {
        assert!(report["rows"].as_u64().unwrap() >= 2, "{report}");
    });
    // The restored ledger answers the same request from its record: the adapter never runs.
    let again = Dispatch::adapter(&["echo"])
        .args(&["--ledger", &other])
        .env("PGPASSWORD", &password)
        .run();
    again.expect("succeeded", None, 0);
    assert_eq!(again.envelope["diagnostics"]["ledger"]["replayed"], true);
    // A second restore into a ledger that is not empty is refused.
    Cmd::new([
        "ledger",
        "restore",
        "--ledger",
        &other,
        backup.to_str().unwrap(),
    ])
    .env("PGPASSWORD", &password)
    .run()
    .exit(69)
    .stdout_empty()
    .stderr_starts_with("error[");
}

#[test]
fn a_policy_names_a_postgresql_ledger_and_approvals_are_kept_there() {
    require!(skip::postgres());
    let (url, password) = database();
    migrate(&url, &password);
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "version = 1\n[ledger]\npath = {url:?}\n\n[[tool]]\nmatch = \"workspace.read\"\n\
             unconfined = true\ndecision = \"ask\"\n"
        ),
    )
    .unwrap();
    let held = Dispatch::adapter(&["echo"])
        .args(&["--policy", policy.to_str().unwrap()])
        .env("PGPASSWORD", &password)
        .run();
    held.expect("denied", Some("approval_required"), 75);
    let out = Cmd::new(["approvals", "list", "--ledger", &url, "--json"])
        .env("PGPASSWORD", &password)
        .run();
    out.exit(0).stderr_empty().stdout_with(|text| {
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.contains("workspace.read"), "{text}");
    });
}

#[test]
fn the_lease_ttl_is_checked_on_the_command_line_and_in_the_policy() {
    let run = Dispatch::adapter(&["echo"])
        .args(&["--ledger", "/tmp/ptd-unused.db", "--lease-ttl", "1s"])
        .run();
    run.output()
        .exit(2)
        .stdout_empty()
        .stderr_starts_with("error[usage]: --lease-ttl: `1s` is not a duration from 3s to 24h");
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "version = 1\n[ledger]\nlease_ttl = \"2s\"\n").unwrap();
    Cmd::new(["policy", "check", policy.to_str().unwrap()])
        .run()
        .exit(65)
        .stdout_empty()
        .stderr_contains("`lease_ttl`: expected a duration from 3s to 24h");
    std::fs::write(&policy, "version = 1\n[ledger]\nlease_ttl = \"45s\"\n").unwrap();
    let beside = Dispatch::adapter(&["echo"])
        .args(&["--policy", policy.to_str().unwrap(), "--lease-ttl", "30s"])
        .run();
    beside.output().exit(2).stdout_empty().stderr_contains(
        "--lease-ttl (or PARENT_TOOL_DISPATCH_LEASE_TTL) cannot be used with this policy",
    );
}

#[test]
fn tls_is_verified_up_to_the_server_s_name() {
    require!(skip::postgres());
    let (url, password) = database();
    let Some(root) = pgtest::cluster().unwrap().tls_root.clone() else {
        require!(skip::unmet(
            "openssl",
            "the test cluster has no TLS (no openssl to make its certificate)"
        ));
        return;
    };
    migrate(&url, &password);
    let base = url.trim_end_matches("?sslmode=disable").to_string();
    let verified = format!("{base}?sslmode=verify-full&sslrootcert={}", root.display());
    Dispatch::adapter(&["echo"])
        .args(&["--ledger", &verified])
        .env("PGPASSWORD", &password)
        .run()
        .expect("succeeded", None, 0);
    // A certificate nobody vouches for is refused under verify-ca (the platform's roots do not
    // know the test's), and nothing runs.
    let unverified = format!("{base}?sslmode=verify-ca");
    let refused = Dispatch::adapter(&["echo"])
        .args(&["--ledger", &unverified])
        .env("PGPASSWORD", &password)
        .run();
    refused.expect("unavailable", Some("ledger_unavailable"), 69);
    assert_eq!(refused.dispatch()["adapter_started"], false);
    // `require` encrypts without checking the certificate.
    Dispatch::adapter(&["echo"])
        .args(&["--ledger", &format!("{base}?sslmode=require")])
        .env("PGPASSWORD", &password)
        .run()
        .expect("succeeded", None, 0);
}

#[test]
fn behind_a_session_pooler_each_key_still_runs_once() {
    // docs/ledger.md recommends pgbouncer in session mode for a host that makes many calls:
    // the ledger's rules hold through it — one run per key among racing dispatchers, the
    // others waiting and replaying, one intact chain.
    require!(skip::postgres());
    require!(skip::pgbouncer());
    let password = pgtest::cluster().unwrap().password.clone();
    let url = pgtest::fresh_pooled_database();
    assert_eq!(migrate(&url, &password), json!({"from": null, "to": 1}));
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let log = format!("pidfile:{}", ran.display());
    let runs: Vec<Run> = std::thread::scope(|s| {
        let racers: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    Dispatch::adapter(&[&log, "sleep:300", "echo"])
                        .args(&["--ledger", &url])
                        .env("PGPASSWORD", &password)
                        .run()
                })
            })
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for run in &runs {
        run.expect("succeeded", None, 0);
        assert!(!run.stderr.contains(&password));
    }
    let replayed = runs
        .iter()
        .filter(|r| r.envelope["diagnostics"]["ledger"]["replayed"] == true)
        .count();
    assert_eq!(replayed, runs.len() - 1, "all but one replay");
    assert_eq!(pids(&ran).len(), 1, "the adapter ran once");
    verify_intact(&url, &password);
}
