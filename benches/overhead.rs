//! Benchmark: what the dispatcher costs on top of running its adapter directly, and how much
//! memory it holds for a large answer. The SPEC's target is "about what `timeout(1)` costs":
//! a few milliseconds of wall time per call, memory bounded by the output cap.
//!
//! Run with `cargo bench --bench overhead` (release build). Prints a table; it asserts nothing,
//! since timings belong to the machine it runs on. `PTD_BENCH_RUNS` sets the iteration count.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench that cannot set up fails loudly

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_parent-tool-dispatch"))
}

fn request(input_bytes: usize) -> String {
    format!(
        r#"{{"schema":"wp-codebox/parent-tool-request/v1","version":1,"request_id":"bench","tool":"t","operation":"call","input":"{}","sandbox_session":{{"sandbox_session_id":"s"}},"authorization":{{"allowed_tools":["t"]}},"metadata":{{}}}}"#,
        "x".repeat(input_bytes)
    )
}

fn bridge(steps: &[&str]) -> String {
    let mut argv = vec![
        format!("{:?}", bin().display().to_string()),
        "\"__test-adapter\"".into(),
    ];
    argv.extend(steps.iter().map(|s| format!("{s:?}")));
    format!(
        r#"{{"schema":"wp-codebox/parent-tool-bridge/v1","version":1,"allowed_tools":["t"],"dispatcher":{{"owner":"wp-codebox","mode":"host_command","command":{{"argv":[{}]}},"request_schema":"wp-codebox/parent-tool-request/v1","result_schema":"wp-codebox/parent-tool-result/v1","timeout_ms":30000}},"sandbox_env":{{}},"authorization":{{}},"redaction":{{}},"metadata":{{}}}}"#,
        argv.join(",")
    )
}

fn time(mut cmd: Command, stdin: &str) -> Duration {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let bytes = stdin.as_bytes().to_vec();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&bytes);
    });
    child.wait().unwrap();
    let _ = writer.join();
    start.elapsed()
}

fn summary(mut samples: Vec<Duration>) -> (f64, f64, f64) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mean = samples.iter().map(|d| ms(*d)).sum::<f64>() / samples.len() as f64;
    (
        mean,
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() * 95 / 100]),
    )
}

fn children_max_rss_kib() -> i64 {
    // SAFETY: getrusage fills the struct we own.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage.ru_maxrss
    }
}

fn main() {
    let runs: usize = std::env::var("PTD_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    println!(
        "{:<44} {:>9} {:>9} {:>9}",
        "case", "mean ms", "p50 ms", "p95 ms"
    );
    for (name, input) in [("1 KiB request", 1024), ("1 MiB request", 1 << 20)] {
        let req = request(input);
        let direct: Vec<_> = (0..runs)
            .map(|_| {
                let mut cmd = Command::new(bin());
                cmd.args(["__test-adapter", "echo"]);
                time(cmd, &req)
            })
            .collect();
        let b = bridge(&["echo"]);
        let dispatched: Vec<_> = (0..runs)
            .map(|_| {
                let mut cmd = Command::new(bin());
                cmd.args(["--parent-tool-bridge", &b]);
                time(cmd, &req)
            })
            .collect();
        let (dm, dp50, dp95) = summary(direct);
        let (m, p50, p95) = summary(dispatched);
        println!(
            "{:<44} {dm:>9.2} {dp50:>9.2} {dp95:>9.2}",
            format!("adapter alone, {name}")
        );
        println!(
            "{:<44} {m:>9.2} {p50:>9.2} {p95:>9.2}",
            format!("through the dispatcher, {name}")
        );
        println!(
            "{:<44} {:>9.2} {:>9.2} {:>9.2}",
            "  overhead",
            m - dm,
            p50 - dp50,
            p95 - dp95
        );
    }
    // Memory: one dispatch with a 16 MiB answer; the dispatcher's peak RSS is reported by the
    // kernel for waited-for children (the adapter's own peak is included in the max, so run it
    // last and alone).
    let before = children_max_rss_kib();
    let b = bridge(&["big-echo:16000000", "read-stdin"]);
    let mut cmd = Command::new(bin());
    cmd.args(["--parent-tool-bridge", &b, "--max-output-bytes", "20000000"]);
    let elapsed = time(cmd, &request(16 << 20));
    println!(
        "16 MiB in, 16 MiB out: {:.1} ms, peak RSS of the largest child {} MiB (before: {} MiB)",
        elapsed.as_secs_f64() * 1000.0,
        children_max_rss_kib() / 1024,
        before / 1024
    );
}
