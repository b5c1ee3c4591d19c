//! Benchmark: what a ledger adds to one call — none, SQLite, PostgreSQL (SPEC §19.1's goal: the
//! PostgreSQL ledger adds at most 2 ms a call on a local server). Run with
//! `cargo bench --bench ledger` (release build, as root: the PostgreSQL server is this
//! benchmark's own throwaway cluster, `ptd_sys::pgtest`, on a loopback port).
//!
//! Four variants of the same small call, interleaved round by round (`PTD_BENCH_LEDGER_RUNS`,
//! default 100): no ledger; SQLite on a new key; PostgreSQL on a new key (a new sandbox session
//! each round, so each is an admitted call: the claim and the outcome, two transactions); and
//! PostgreSQL on a recorded key (a replay). **Every run is checked before it counts**: exit 0,
//! a succeeded envelope of the call, and `diagnostics.ledger.replayed` as the variant expects.
//! Nothing is asserted about times: they belong to the machine. The adapter is the dispatcher's
//! own workspace adapter on `fixtures/workspace`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_macros,
    clippy::too_many_lines
)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    if let Err(unmet) = ptd_sys::skip::postgres() {
        println!("ledger: skipped: {}", unmet.reason);
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dispatcher = PathBuf::from(env!("CARGO_BIN_EXE_parent-tool-dispatch"));
    let cluster = ptd_sys::pgtest::cluster().unwrap();
    let url = ptd_sys::pgtest::fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = dir.path().join("ledger.db");
    let migrated = Command::new(&dispatcher)
        .args(["ledger", "migrate", "--ledger", &url])
        .env("PGPASSWORD", &cluster.password)
        .output()
        .unwrap();
    assert!(migrated.status.success(), "{migrated:?}");
    let runs = std::env::var("PTD_BENCH_LEDGER_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100usize)
        .max(1);
    let call = Call {
        dispatcher: &dispatcher,
        root,
        password: &cluster.password,
    };
    // The recorded key of the replay variant.
    call.run(Some(&url), "replayed", false);
    let mut times: [Vec<Duration>; 4] = Default::default();
    for round in 0..runs {
        let session = format!("bench-{round}");
        times[0].push(call.run(None, &session, false));
        times[1].push(call.run(Some(sqlite.to_str().unwrap()), &session, false));
        times[2].push(call.run(Some(&url), &session, false));
        times[3].push(call.run(Some(&url), "replayed", true));
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1e3
    };
    let [none, lite, pg, replay] = &mut times;
    let (none, lite, pg, replay) = (median(none), median(lite), median(pg), median(replay));
    println!("ledger, {runs} rounds, median wall time of a whole call:");
    println!("    no ledger                      {none:8.2} ms");
    println!(
        "    SQLite, a new key              {lite:8.2} ms   {:+.2} ms",
        lite - none
    );
    println!(
        "    PostgreSQL, a new key          {pg:8.2} ms   {:+.2} ms",
        pg - none
    );
    println!(
        "    PostgreSQL, a replay           {replay:8.2} ms   {:+.2} ms",
        replay - none
    );
    println!(
        "    PostgreSQL adds {:+.2} ms a call (target +2 ms: {})",
        pg - none,
        if pg - none <= 2.0 { "met" } else { "NOT met" }
    );
}

struct Call<'a> {
    dispatcher: &'a Path,
    root: &'a Path,
    password: &'a str,
}

impl Call<'_> {
    /// One call in sandbox session `session`, with `ledger` (none: without), checked; its wall
    /// time.
    fn run(&self, ledger: Option<&str>, session: &str, replayed: bool) -> Duration {
        let request = serde_json::json!({
            "schema": "wp-codebox/parent-tool-request/v1", "version": 1,
            "request_id": "bench-1", "tool": "workspace.read", "operation": "call",
            "input": {"path": "docs/hello.txt"},
            "sandbox_session": {"sandbox_session_id": session},
            "authorization": {"allowed_tools": ["workspace.read"]}, "metadata": {}
        });
        let mut cmd = Command::new(self.dispatcher);
        cmd.current_dir(self.root)
            .args(["--parent-tool-bridge", "@fixtures/bridge.json"])
            .env("PGPASSWORD", self.password)
            .env_remove("PARENT_TOOL_DISPATCH_LEDGER")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(ledger) = ledger {
            cmd.args(["--ledger", ledger]);
        }
        let started = Instant::now();
        let mut child = cmd.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(request.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let took = started.elapsed();
        let envelope: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let ok = out.status.success()
            && envelope["status"] == "succeeded"
            && envelope["request_id"] == "bench-1"
            && (ledger.is_none()
                || envelope["diagnostics"]["ledger"]["replayed"] == serde_json::json!(replayed));
        assert!(
            ok,
            "a run did not do what it claims, so nothing is reported: ledger {ledger:?}\n  \
             stdout: {}\n  stderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        took
    }
}
