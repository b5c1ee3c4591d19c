//! Benchmark: replaying 1,000 recorded cases with the built binary, the way CI runs the
//! suite (`parent-tool-dispatch replay DIR`): reading and checking every case file, running
//! each through the main job's pipeline in process, comparing, printing. The target is "well
//! under one second on 2 cores".
//!
//! Run with `cargo bench --bench replay` (release build). Prints a table; it asserts nothing,
//! since timings belong to the machine it runs on, but it checks that every case passed so
//! that a broken suite is never timed. `PTD_BENCH_RUNS` sets the iteration count (default 7),
//! `PTD_BENCH_CASES` the number of cases (default 1000).
#![allow(clippy::unwrap_used, clippy::expect_used)]
// a bench that cannot set up fails loudly
// A benchmark reads its files and starts its processes directly (the product goes through
// `fs/read.rs` and `exec/`).
#![allow(clippy::disallowed_methods)]

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_parent-tool-dispatch"))
}

fn bridge() -> Value {
    json!({
        "schema": "wp-codebox/parent-tool-bridge/v1", "version": 1,
        "allowed_tools": ["workspace.read"],
        "dispatcher": {"owner": "wp-codebox", "mode": "host_command",
            "command": {"argv": ["recorded-adapter"]},
            "request_schema": "wp-codebox/parent-tool-request/v1",
            "result_schema": "wp-codebox/parent-tool-result/v1", "timeout_ms": 10000},
        "sandbox_env": {}, "authorization": {}, "redaction": {}, "metadata": {}
    })
}

fn request(id: &str, tool: &str) -> Value {
    json!({
        "schema": "wp-codebox/parent-tool-request/v1", "version": 1, "request_id": id,
        "tool": tool, "operation": "call", "input": {"path": "docs/hello.txt"},
        "sandbox_session": {"sandbox_session_id": "s"},
        "authorization": {"allowed_tools": [tool]}, "metadata": {}
    })
}

fn answer(id: &str, output: Value) -> Value {
    json!({
        "schema": "wp-codebox/parent-tool-result/v1", "version": 1, "request_id": id,
        "tool": "workspace.read", "operation": "call", "status": "succeeded", "output": output,
        "artifacts": {"transcripts": [], "evidence": []}, "diagnostics": {}, "metadata": {}
    })
}

/// Case `i`: a mix of what a real suite holds — recorded successes with about 1 KiB of
/// output, result-form answers, denials, invalid requests, and secrets to scrub.
fn case(i: usize) -> Value {
    let id = format!("bench-{i}");
    let text = "lorem ipsum dolor sit amet ".repeat(40);
    let mut case = json!({
        "schema": "parent-tool-dispatch/fixture/v1",
        "name": format!("case {i:04}"),
        "bridge": bridge(),
        "request": request(&id, "workspace.read"),
    });
    match i % 5 {
        0 | 1 => {
            let stdout = format!(
                "{}\n",
                answer(&id, json!({"content": text, "bytes": text.len()}))
            );
            case["adapter"] =
                json!({"recorded": {"stdout": stdout, "exit_code": 0, "stderr": "ok\n"}});
            case["expect"] = json!({"status": "succeeded", "exit_code": 0,
                "result": {"output": {"bytes": text.len()}}});
        }
        2 => {
            case["adapter"] = json!({"result": answer(&id, json!({"n": i}))});
            case["expect"] = json!({"status": "succeeded", "result": {"output": {"n": i}}});
        }
        3 => {
            case["request"] = request(&id, "shell.exec");
            case["adapter"] = json!({"result": answer(&id, json!({}))});
            case["expect"] =
                json!({"status": "denied", "error_code": "tool_not_allowed", "exit_code": 77});
        }
        _ => {
            let secret = format!("bench-secret-{i}-value");
            case["adapter"] = json!({"result": answer(&id, json!({"echo": secret}))});
            case["env"] = json!({"BENCH_SECRET": secret});
            case["options"] = json!(["--secret-env", "BENCH_SECRET"]);
            case["expect"] =
                json!({"status": "succeeded", "result": {"output": {"echo": "[redacted]"}}});
        }
    }
    case
}

fn replay(dir: &Path, jobs: Option<&str>) -> Duration {
    let mut cmd = Command::new(bin());
    cmd.arg("replay").arg(dir);
    if let Some(jobs) = jobs {
        cmd.args(["--jobs", jobs]);
    }
    let start = Instant::now();
    let out = cmd.output().unwrap();
    let elapsed = start.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.ends_with(" passed, 0 failed\n"),
        "the benchmark suite must pass: {}",
        stdout
            .lines()
            .filter(|l| !l.starts_with("ok "))
            .collect::<Vec<_>>()
            .join("\n")
    );
    elapsed
}

fn main() {
    let runs: usize = std::env::var("PTD_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let cases: usize = std::env::var("PTD_BENCH_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = 0;
    for i in 0..cases {
        let text = serde_json::to_string_pretty(&case(i)).unwrap();
        bytes += text.len();
        std::fs::write(dir.path().join(format!("c{i:04}.case.json")), text).unwrap();
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "replay of {cases} recorded cases ({} KiB of case files), {runs} runs, {cpus} CPUs",
        bytes / 1024
    );
    println!(
        "{:<24} {:>10} {:>10} {:>10}",
        "jobs", "min ms", "median ms", "max ms"
    );
    for (label, jobs) in [("default (CPUs)", None), ("1", Some("1"))] {
        replay(dir.path(), jobs); // warm the page cache
        let mut samples: Vec<Duration> = (0..runs).map(|_| replay(dir.path(), jobs)).collect();
        samples.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "{label:<24} {:>10.1} {:>10.1} {:>10.1}",
            ms(samples[0]),
            ms(samples[samples.len() / 2]),
            ms(samples[samples.len() - 1])
        );
    }
}
