//! Benchmark: what a ledger adds to one call — none, SQLite, PostgreSQL (SPEC §19.1's goal: the
//! PostgreSQL ledger adds at most 2 ms a call on a local server). Run with
//! `cargo bench --bench ledger` (release build, as root: the PostgreSQL server is this
//! benchmark's own throwaway cluster, `ptd_sys::pgtest`, on a loopback port).
//!
//! The variants of the same small call, interleaved round by round (`PTD_BENCH_LEDGER_RUNS`,
//! default 100): no ledger; SQLite on a new key; PostgreSQL over TCP with SCRAM on a new key (a
//! new sandbox session each time, so each is an admitted call: the claim and the outcome, two
//! transactions) and on a recorded key (a replay); PostgreSQL over its unix socket; and, where
//! `pgbouncer` is installed, PostgreSQL through it in session mode (`ptd_sys::pgtest::pooler`).
//! `PTD_BENCH_DISPATCHER` names another build to measure (several, separated by `:`, are
//! measured in the same rounds, each with the median of its round-by-round differences
//! against the first). **Every run is checked before it
//! counts**: exit 0, a succeeded envelope of the call, and `diagnostics.ledger.replayed` as the
//! variant expects. Nothing is asserted about times: they belong to the machine. The adapter is
//! this benchmark's own binary (`ledger __bench-adapter`), which answers at once.
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

/// The argument that makes this benchmark's binary the adapter.
const ADAPTER_ROLE: &str = "__bench-adapter";

/// The adapter: read the request to its end, answer a succeeded envelope.
fn adapter() -> i32 {
    use std::io::Read;
    let mut request = Vec::new();
    if std::io::stdin().read_to_end(&mut request).is_err() {
        return 3;
    }
    let answer = r#"{"schema":"wp-codebox/parent-tool-result/v1","version":1,"request_id":"bench-1","tool":"bench.tool","operation":"call","status":"succeeded","output":"ok"}"#;
    match std::io::stdout().lock().write_all(answer.as_bytes()) {
        Ok(()) => 0,
        Err(_) => 4,
    }
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some(ADAPTER_ROLE) {
        std::process::exit(adapter());
    }
    if let Err(unmet) = ptd_sys::skip::postgres() {
        println!("ledger: skipped: {}", unmet.reason);
        return;
    }
    // Several builds separated by `:` are measured in the same rounds.
    let dispatchers: Vec<PathBuf> = std::env::var_os("PTD_BENCH_DISPATCHER").map_or_else(
        || vec![PathBuf::from(env!("CARGO_BIN_EXE_parent-tool-dispatch"))],
        |list| std::env::split_paths(&list).collect(),
    );
    let dispatcher = &dispatchers[0];
    let cluster = ptd_sys::pgtest::cluster().unwrap();
    let url = ptd_sys::pgtest::fresh_database();
    let name = url.rsplit('/').next().unwrap().split('?').next().unwrap();
    // The same database over the server's unix socket (the test cluster trusts it; a host
    // would use `peer`): no TCP, no SCRAM.
    let socket = format!(
        "postgres://{}@/{name}?host={}&port={}",
        ptd_sys::pgtest::USER,
        cluster.dir.join("sock").display(),
        cluster.port
    );
    // And through a connection pooler in session mode, when there is one.
    let pooled = match ptd_sys::pgtest::pooler() {
        Ok(pooler) => Some(pooler.url(name)),
        Err(why) => {
            println!("ledger: the pooler's variant is skipped: {why}");
            None
        }
    };
    let dir = tempfile::tempdir().unwrap();
    // Each build on a SQLite ledger of its own.
    let sqlite: Vec<String> = (0..dispatchers.len())
        .map(|b| {
            dir.path()
                .join(format!("ledger-{b}.db"))
                .display()
                .to_string()
        })
        .collect();
    // This binary is the adapter: a compiled program that answers at once, so that the
    // differences are the ledger's.
    let me = std::env::current_exe().unwrap();
    let bridge = dir.path().join("bridge.json");
    std::fs::write(
        &bridge,
        serde_json::json!({
            "schema": "wp-codebox/parent-tool-bridge/v1", "version": 1,
            "allowed_tools": ["bench.tool"],
            "dispatcher": {
                "owner": "wp-codebox", "mode": "host_command",
                "command": {"argv": [me, ADAPTER_ROLE]},
                "request_schema": "wp-codebox/parent-tool-request/v1",
                "result_schema": "wp-codebox/parent-tool-result/v1", "timeout_ms": 30000
            },
            "sandbox_env": {}, "authorization": {}, "redaction": {}, "metadata": {}
        })
        .to_string(),
    )
    .unwrap();
    let migrated = Command::new(dispatcher)
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
    let calls: Vec<Call<'_>> = dispatchers
        .iter()
        .map(|dispatcher| Call {
            dispatcher,
            bridge: &bridge,
            password: &cluster.password,
        })
        .collect();
    // The recorded key of the replay variant.
    calls[0].run(Some(&url), "replayed", false);
    let mut variants: Vec<(&str, Option<&str>, bool)> = vec![
        ("no ledger", None, false),
        ("SQLite, a new key", Some(""), false),
        ("PostgreSQL (TCP, SCRAM), a new key", Some(&url), false),
        ("PostgreSQL (TCP, SCRAM), a replay", Some(&url), true),
        ("PostgreSQL (unix socket), a new key", Some(&socket), false),
    ];
    if let Some(pooled) = &pooled {
        variants.push(("PostgreSQL via pgbouncer, a new key", Some(pooled), false));
    }
    let (kinds, builds) = (variants.len(), calls.len());
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); kinds * builds];
    for round in 0..runs {
        // Every build's variants, starting one further each round.
        for k in 0..kinds * builds {
            let which = (round + k) % (kinds * builds);
            let (b, i) = (which / kinds, which % kinds);
            let (_, ledger, replayed) = variants[i];
            let ledger = match ledger {
                Some("") => Some(sqlite[b].as_str()),
                other => other,
            };
            let session = if replayed {
                "replayed".to_string()
            } else {
                format!("bench-{round}-{i}-{b}")
            };
            times[which].push(calls[b].run(ledger, &session, replayed));
        }
    }
    let median = |v: &[Duration]| {
        let mut v = v.to_vec();
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1e3
    };
    for (b, dispatcher) in dispatchers.iter().enumerate() {
        let own = &times[b * kinds..(b + 1) * kinds];
        let medians: Vec<f64> = own.iter().map(|v| median(v)).collect();
        let none = medians[0];
        println!(
            "ledger, {runs} rounds, median wall time of a whole call ({}):",
            dispatcher.display()
        );
        for (k, ((label, ..), m)) in variants.iter().zip(&medians).enumerate() {
            // Against the first build: the median of the round-by-round differences.
            let against = if b > 0 {
                let mut d: Vec<f64> = own[k]
                    .iter()
                    .zip(&times[k])
                    .map(|(a, f)| (a.as_secs_f64() - f.as_secs_f64()) * 1e3)
                    .collect();
                d.sort_by(f64::total_cmp);
                format!("   against the first build {:+.2} ms", d[d.len() / 2])
            } else {
                String::new()
            };
            println!("    {label:38} {m:8.2} ms   {:+.2} ms{against}", m - none);
        }
        let pg = medians[2] - none;
        println!(
            "    PostgreSQL adds {pg:+.2} ms a call (target +2 ms: {})",
            if pg <= 2.0 { "met" } else { "NOT met" }
        );
        if pooled.is_some() {
            let pooled = medians[kinds - 1] - none;
            println!(
                "    through the pooler {pooled:+.2} ms a call (target +2 ms: {})",
                if pooled <= 2.0 { "met" } else { "NOT met" }
            );
        }
    }
}

struct Call<'a> {
    dispatcher: &'a Path,
    bridge: &'a Path,
    password: &'a str,
}

impl Call<'_> {
    /// One call in sandbox session `session`, with `ledger` (none: without), checked; its wall
    /// time.
    fn run(&self, ledger: Option<&str>, session: &str, replayed: bool) -> Duration {
        let request = serde_json::json!({
            "schema": "wp-codebox/parent-tool-request/v1", "version": 1,
            "request_id": "bench-1", "tool": "bench.tool", "operation": "call",
            "input": {"path": "docs/hello.txt"},
            "sandbox_session": {"sandbox_session_id": session},
            "authorization": {"allowed_tools": ["bench.tool"]}, "metadata": {}
        });
        let mut cmd = Command::new(self.dispatcher);
        let mut bridge = std::ffi::OsString::from("@");
        bridge.push(self.bridge);
        cmd.arg("--parent-tool-bridge")
            .arg(bridge)
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
