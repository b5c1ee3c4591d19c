//! Many real processes on one ledger: the test binary re-invoked on the ignored [`worker`]
//! test, at once and killed at random moments.

use super::*;
use std::io::Write as _;
use std::process::{Child, Command, Stdio};

// The shared suite: these run unchanged against SQLite and PostgreSQL.
both!(
    many_processes_share_one_ledger_without_losing_a_record,
    sigkill_at_any_moment_leaves_the_ledger_consistent_and_no_key_runs_twice,
);

const WORKER_LEDGER: &str = "PTD_LEDGER_TEST_WORKER";

/// A worker process on the ledger `db` (its password, if any, in its environment).
fn spawn_worker(db: &Db, side: &Path, keys: &str, extra: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "ledger::tests::processes::worker",
        "--ignored",
        "--nocapture",
        "--test-threads",
        "1",
        "-q",
    ])
    .env(WORKER_LEDGER, &db.spelled)
    .env("PTD_LEDGER_TEST_SIDE", side)
    .env("PTD_LEDGER_TEST_KEYS", keys)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if let Location::Postgres(_) = db.location {
        cmd.env("PGPASSWORD", pg_env().var("PGPASSWORD").unwrap_or_default());
    }
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// One dispatcher-like process: for each key in `PTD_LEDGER_TEST_KEYS` (`session/request`),
/// begin (waiting), "run" it (a line in the side file, a pause), finish; print `@@ what key`.
#[test]
#[ignore = "a worker process of the multi-process tests"]
fn worker() {
    let Ok(ledger) = std::env::var(WORKER_LEDGER) else {
        return;
    };
    let side = std::env::var_os("PTD_LEDGER_TEST_SIDE").unwrap();
    let keys = std::env::var("PTD_LEDGER_TEST_KEYS").unwrap();
    let pause_ms: u64 = std::env::var("PTD_LEDGER_TEST_PAUSE_MS").map_or(0, |v| v.parse().unwrap());
    let mut budgets = Budgets::default();
    if let Ok(n) = std::env::var("PTD_LEDGER_TEST_CALLS") {
        parse_budget_flag(&mut budgets, "--budget-calls", &n).unwrap();
    }
    let lease = Lease::current().unwrap();
    let mut ledger = Ledger::open_at(
        &Location::parse(&ledger).unwrap(),
        &ptd_sys::hostenv::HostEnv::process(),
        Instant::now() + Duration::from_secs(60),
    )
    .unwrap();
    for item in keys.split(',') {
        let (session, request) = item.split_once('/').unwrap();
        let k = Key {
            bridge_ref: "sha256:bridge".into(),
            session_id: session.into(),
            request_id: request.into(),
        };
        // The budget is the "b" session's only.
        let unlimited = Budgets::default();
        let c = call(
            &k,
            "digest",
            if session == "b" { &budgets } else { &unlimited },
        );
        let decision = ledger
            .wait(
                &c,
                &lease,
                Instant::now() + Duration::from_secs(60),
                &mut sleep,
            )
            .unwrap()
            .decision;
        let what = match decision {
            Decision::Start { .. } => {
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(&side)
                    .unwrap();
                f.write_all(format!("{item} {}\n", lease.pid).as_bytes())
                    .unwrap();
                std::thread::sleep(Duration::from_millis(pause_ms));
                let rec = record(&k, Verdict::Admit, "bridge.allowed_tools", "succeeded");
                let env = format!("{{\"ran_by\":{}}}", lease.pid);
                assert_eq!(
                    ledger
                        .finish(&k, &lease, &outcome(&env, false), &rec)
                        .unwrap(),
                    Finished::Stored
                );
                "start"
            }
            Decision::Replay(_) => {
                ledger
                    .record(&record(&k, Verdict::Replay, "ledger:replay", "succeeded"))
                    .unwrap();
                "replay"
            }
            Decision::Indeterminate { .. } => {
                let rec = record(&k, Verdict::Refuse, "ledger:lease", "failed");
                ledger
                    .finish(
                        &k,
                        &lease,
                        &outcome("{\"indeterminate\":true}", false),
                        &rec,
                    )
                    .unwrap();
                "indeterminate"
            }
            Decision::BudgetExhausted(_) => {
                ledger
                    .record(&record(&k, Verdict::Deny, "budget:calls", "denied"))
                    .unwrap();
                "budget"
            }
            other => panic!("{other:?}"),
        };
        println!("@@ {what} {item}");
    }
}

fn side_counts(side: &Path) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for line in std::fs::read_to_string(side).unwrap_or_default().lines() {
        *counts
            .entry(line.split(' ').next().unwrap().to_string())
            .or_insert(0) += 1;
    }
    counts
}

fn many_processes_share_one_ledger_without_losing_a_record(backend: Backend) {
    const PROCESSES: usize = 60;
    let Some(db) = Db::new(backend) else { return };
    let dir = tempfile::tempdir().unwrap();
    let side = dir.path().join("ran");
    let children: Vec<Child> = (0..PROCESSES)
        .map(|i| {
            // Four keys every process wants, one of its own, one on a session with a budget.
            let keys = format!("s/shared0,s/shared1,s/shared2,s/shared3,s/own{i},b/call{i}");
            spawn_worker(&db, &side, &keys, &[("PTD_LEDGER_TEST_CALLS", "25")])
        })
        .collect();
    let mut said = std::collections::BTreeMap::<String, usize>::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(rest) = line.strip_prefix("@@ ") {
                let what = rest.split(' ').next().unwrap();
                let tag = if rest.contains(" b/") {
                    format!("{what} b")
                } else {
                    what.to_string()
                };
                *said.entry(tag).or_insert(0) += 1;
            }
        }
    }
    assert_eq!(said.get("start b"), Some(&25), "{said:?}");
    assert_eq!(said.get("budget b"), Some(&(PROCESSES - 25)), "{said:?}");
    assert_eq!(said.get("start"), Some(&(4 + PROCESSES)), "{said:?}");
    assert_eq!(said.get("replay"), Some(&(4 * (PROCESSES - 1))), "{said:?}");
    let ran = side_counts(&side);
    assert!(ran.values().all(|&n| n == 1), "a key ran twice: {ran:?}");
    assert_eq!(ran.len(), 4 + PROCESSES + 25);
    match db.verify() {
        Verification::Intact { records, .. } => assert_eq!(records as usize, 6 * PROCESSES),
        broken => panic!("{broken:?}"),
    }
}

/// A small xorshift: the crash test's "random moments", seeded from the clock.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn sigkill_at_any_moment_leaves_the_ledger_consistent_and_no_key_runs_twice(backend: Backend) {
    const ROUNDS: usize = 8;
    const WORKERS: usize = 8;
    let keys: Vec<String> = (0..6).map(|i| format!("s/k{i}")).collect();
    let Some(db) = Db::new(backend) else { return };
    let dir = tempfile::tempdir().unwrap();
    let side = dir.path().join("ran");
    let mut seed = now_ms() | 1;
    let mut ledger = db.open();
    for round in 0..ROUNDS {
        let round_keys: Vec<String> = keys.iter().map(|k| format!("{k}r{round}")).collect();
        let mut children: Vec<Child> = (0..WORKERS)
            .map(|_| {
                spawn_worker(
                    &db,
                    &side,
                    &round_keys.join(","),
                    &[("PTD_LEDGER_TEST_PAUSE_MS", "3")],
                )
            })
            .collect();
        for child in children.iter_mut() {
            std::thread::sleep(Duration::from_millis(xorshift(&mut seed) % 40));
            if !xorshift(&mut seed).is_multiple_of(3) {
                let _ = child.kill();
            }
        }
        for child in children {
            let out = child.wait_with_output().unwrap();
            // Killed or finished: a worker that exited by itself must have succeeded.
            use std::os::unix::process::ExitStatusExt;
            assert!(
                out.status.success() || out.status.signal() == Some(9),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            matches!(db.verify(), Verification::Intact { .. }),
            "round {round}: {:?}",
            db.verify()
        );
        for item in &round_keys {
            let (s, r) = item.split_once('/').unwrap();
            let k = Key {
                bridge_ref: "sha256:bridge".into(),
                session_id: s.into(),
                request_id: r.into(),
            };
            match ledger.call(&k).unwrap() {
                None => {}
                Some(row) if row.state == CallState::Final => {}
                Some(row) => {
                    assert_eq!(row.state, CallState::Running);
                    assert!(!row.lease.is_live(), "{row:?}");
                }
            }
        }
    }
    // One clean pass settles every key: done (replayed), or indeterminate, or run now.
    let all: Vec<String> = (0..ROUNDS)
        .flat_map(|round| keys.iter().map(move |k| format!("{k}r{round}")))
        .collect();
    let out = spawn_worker(&db, &side, &all.join(","), &[])
        .wait_with_output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let ran = side_counts(&side);
    for item in &all {
        let line = stdout
            .lines()
            .find(|l| l.ends_with(&format!(" {item}")))
            .unwrap_or_else(|| panic!("{item} not settled: {stdout}"));
        let n = ran.get(item).copied().unwrap_or(0);
        assert!(n <= 1, "{item} ran {n} times");
        if line.starts_with("@@ replay") {
            // Final before the clean pass: it finished (so it ran) or was declared
            // indeterminate by a worker of its round.
            let (s, r) = item.split_once('/').unwrap();
            let k = Key {
                bridge_ref: "sha256:bridge".into(),
                session_id: s.into(),
                request_id: r.into(),
            };
            let row = ledger.call(&k).unwrap().unwrap();
            let env = &row.outcome.unwrap().envelope;
            assert!(
                env.contains("ran_by") == (n == 1) || env.contains("indeterminate"),
                "{item}: {env}"
            );
        } else if line.starts_with("@@ start") {
            assert_eq!(n, 1);
        }
    }
    assert!(matches!(db.verify(), Verification::Intact { .. }));
}
