//! Benchmark: what the dispatcher costs on top of `timeout(1)`, measured on whole processes
//! side by side in one run. The SPEC's target is "about what `timeout` costs".
//!
//! Run with `cargo bench --bench overhead` (release build). It prints the machine, then:
//!
//! - **(a) per call** — a 1 KiB request, a 1 KiB answer: the adapter alone, `timeout 30
//!   ADAPTER`, the dispatcher running the same adapter, and the dispatcher with every
//!   confinement mechanism on (Landlock, a network namespace, the cgroup and rlimit limits,
//!   `no_new_privs`, seccomp: what confinement adds per call), interleaved round by round;
//! - **(b) a 64 MiB answer** — an `output` string of 64 MiB: `timeout 30 ADAPTER` read to the
//!   end by this process (the pipe floor, `timeout 30 ADAPTER | cat >/dev/null`), and the
//!   dispatcher read the same way; wall time and peak RSS of each;
//! - **(c) 1,000 sequential calls** — blocks of (a)'s calls back to back, dispatcher and
//!   `timeout` blocks alternating;
//! - **(d) the ledger** — (a)'s call by the dispatcher without a ledger, with `--ledger` on a
//!   new key (a new sandbox session each round: the claim and the outcome are two durable
//!   commits, `synchronous = FULL` in WAL), with `--ledger` on a recorded key (a replay), and
//!   on a new key with `--ledger-durability normal` (so every build measured must know that
//!   option), interleaved round by round, each run checked for its
//!   `diagnostics.ledger.replayed`; and, where `/dev/shm` is there, a new key on a ledger in
//!   memory (the ledger's own work without the disk's `fsync`s);
//! - **(f) the host policy** — (a)'s call without a policy, and with `--policy` naming a
//!   policy of 200 `[[tool]]` entries (each with an absolute adapter, a grant, a memory limit
//!   and a timeout, all checked at every load) whose exact entry for the benchmark's tool runs
//!   the same adapter unconfined: what loading and routing add per call (SPEC §16's target:
//!   at most 0.2 ms), interleaved round by round (`PTD_BENCH_POLICY_RUNS`, default 200), each
//!   run checked for its `diagnostics.dispatch.policy.entry`;
//! - **(e) confinement by mechanism** — (a)'s call unconfined, then with one mechanism at a
//!   time (rlimits, Landlock, the network namespace, the cgroup limits) and with all of them,
//!   interleaved round by round (`PTD_BENCH_MECHANISM_RUNS`, default 100);
//!
//! and the ratio of each against its target. The in-process micro-benchmarks (parse,
//! validate, redact in MB/s) are `cargo bench --bench pipeline`.
//!
//! **The adapter** is this benchmark binary itself, started as `overhead __bench-adapter
//! BYTES`: it reads its stdin to the end, then writes a succeeded envelope whose `output` is a
//! string of BYTES bytes, streamed in 64 KiB pieces (so its own memory stays small and the
//! peak RSS measured is the dispatcher's). The same program, arguments and request serve all
//! three variants, so the differences are the dispatcher's and `timeout`'s own.
//!
//! **Every run is checked before it counts**: exit status 0, and stdout holding a succeeded
//! envelope echoing the request (for the big answer: of at least the payload's size). A run
//! that fails the check stops the benchmark with the run's stderr — a refusal is never timed.
//!
//! Wall time is from before `posix_spawn` to after `wait4`; CPU time (user + system) and
//! peak RSS come from `wait4`'s resource usage of that child and everything it reaped, so
//! they are per run and not disturbed by other load on the machine as much as wall time is.
//! Nothing is asserted: timings belong to the machine. Environment: `PTD_BENCH_RUNS` (rounds
//! for (a), default 300), `PTD_BENCH_BIG_RUNS` (rounds for (b), default 30),
//! `PTD_BENCH_SEQUENTIAL` (calls per variant for (c), default 1000), `PTD_BENCH_BIG_MIB`
//! (default 64), `PTD_BENCH_PAYLOAD` (`text`, the default: lines of prose with an escaped
//! newline every 64 bytes; or `x`: one repeated byte, the easiest case for every scanner),
//! `PTD_BENCH_TIMEOUT` (the `timeout` program, default `timeout` on `PATH`), `PTD_BENCH_ONLY`
//! (which parts to run, `a,b,c,d,e` by default), `PTD_BENCH_LEDGER_RUNS` (rounds for (d),
//! default 200), `PTD_BENCH_MECHANISM_RUNS` (rounds for (e), default 100),
//! `PTD_BENCH_DISPATCHER` (another build of the dispatcher to measure, e.g. the static one
//! `cargo install-static` installs; default: the one cargo built for the benchmark; several
//! builds separated by `:`, such as a build before a change and after it, are measured in the
//! same rounds by (a), (b), (d) and (e), each against `timeout` or its own baseline and
//! against the first (with the median of the round-by-round differences), and by (c) in
//! blocks of their own; (f) measures the first; in (d) each build has ledgers of its own). The ledger lives in the
//! benchmark's temporary folder (under `TMPDIR`): its cost is mostly that file system's
//! `fsync`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// a bench that cannot set up fails loudly
// A benchmark reads its files and starts its processes directly (the product goes through
// `fs/read.rs` and `exec/`).
#![allow(clippy::disallowed_methods, clippy::too_many_lines)]

#[path = "overhead/measure.rs"]
mod measure;

use measure::{order, run_checked, verdict, Expect, Sample, Series};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// argv[1] that turns this binary into the benchmark's adapter.
const ADAPTER_ROLE: &str = "__bench-adapter";
const REQUEST_ID: &str = "bench-call";
const TOOL: &str = "bench.tool";
const MIB: usize = 1 << 20;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(ADAPTER_ROLE) {
        let bytes = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(0);
        let payload = Payload::from_env();
        std::process::exit(adapter(bytes, payload));
    }
    let bench = Bench::new();
    bench.machine();
    // `PTD_BENCH_ONLY=b` (or `a,c`, …) runs only those parts.
    let only = std::env::var("PTD_BENCH_ONLY").unwrap_or_else(|_| "a,b,c,d,e,f".into());
    let wanted = |part: &str| only.split(',').any(|p| p.trim() == part);
    if wanted("a") {
        bench.per_call();
    }
    if wanted("b") {
        bench.big_answer();
    }
    if wanted("c") {
        bench.sequential();
    }
    if wanted("d") {
        bench.ledger();
    }
    if wanted("e") {
        bench.confinement_by_mechanism();
    }
    if wanted("f") {
        bench.policy();
    }
}

// ---------------------------------------------------------------------------------------------
// The adapter.

/// What the `output` string is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Payload {
    /// Prose with an escaped newline (`\n`) every 64 bytes: what a file's contents look like.
    Text,
    /// One byte repeated: no escape anywhere, the fastest case for every scanner.
    X,
}

impl Payload {
    fn from_env() -> Payload {
        match std::env::var("PTD_BENCH_PAYLOAD").as_deref() {
            Ok("x") => Payload::X,
            _ => Payload::Text,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Payload::Text => "text",
            Payload::X => "x",
        }
    }

    /// 64 KiB of the string's JSON text (a multiple of the 64-byte line).
    fn chunk(self) -> Vec<u8> {
        const LINE: &[u8; 64] =
            b"The quick brown fox jumps over the lazy dog, line after line..\\n";
        match self {
            Payload::Text => LINE.repeat(1024),
            Payload::X => vec![b'x'; 64 * 1024],
        }
    }
}

/// Read stdin to the end, then print a succeeded envelope with an `output` string of `bytes`
/// bytes of JSON text. Returns the exit status.
fn adapter(bytes: usize, payload: Payload) -> i32 {
    let mut request = Vec::new();
    if std::io::stdin().read_to_end(&mut request).is_err() {
        return 3;
    }
    let head = format!(
        r#"{{"schema":"wp-codebox/parent-tool-result/v1","version":1,"request_id":"{REQUEST_ID}","tool":"{TOOL}","operation":"call","status":"succeeded","output":""#
    );
    let chunk = payload.chunk();
    let mut out = std::io::stdout().lock();
    let mut left = bytes;
    let mut written = out.write_all(head.as_bytes());
    while left > 0 && written.is_ok() {
        let n = left.min(chunk.len());
        written = out.write_all(&chunk[..n]);
        left -= n;
    }
    match written
        .and_then(|()| out.write_all(b"\"}\n"))
        .and_then(|()| out.flush())
    {
        Ok(()) => 0,
        Err(_) => 4,
    }
}

// ---------------------------------------------------------------------------------------------
// The benchmark.

struct Bench {
    /// The builds to measure; the first is the one every part measures.
    dispatchers: Vec<PathBuf>,
    adapter: PathBuf,
    timeout: String,
    dir: tempfile::TempDir,
    runs: usize,
    big_runs: usize,
    sequential: usize,
    big_bytes: usize,
    payload: Payload,
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

impl Bench {
    fn new() -> Bench {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let small = request(1024);
        std::fs::write(dir.path().join("request-1k.json"), &small).expect("write the request");
        Bench {
            // Other builds of the dispatcher (the static one `cargo install-static` makes, a
            // build before a change) by `PTD_BENCH_DISPATCHER`.
            dispatchers: std::env::var_os("PTD_BENCH_DISPATCHER").map_or_else(
                || vec![PathBuf::from(env!("CARGO_BIN_EXE_parent-tool-dispatch"))],
                |list| std::env::split_paths(&list).collect(),
            ),
            adapter: std::env::current_exe().expect("this benchmark's own path"),
            timeout: std::env::var("PTD_BENCH_TIMEOUT").unwrap_or_else(|_| "timeout".into()),
            dir,
            runs: env_number("PTD_BENCH_RUNS", 300).max(1),
            big_runs: env_number("PTD_BENCH_BIG_RUNS", 30).max(1),
            sequential: env_number("PTD_BENCH_SEQUENTIAL", 1000).max(10),
            big_bytes: env_number("PTD_BENCH_BIG_MIB", 64) * MIB,
            payload: Payload::from_env(),
        }
    }

    fn small_request(&self) -> PathBuf {
        self.dir.path().join("request-1k.json")
    }

    fn machine(&self) {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                info.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
        println!(
            "machine: {nproc} CPUs, {cpu}, Linux {kernel}, load average {}",
            load()
        );
        for (i, path) in self.dispatchers.iter().enumerate() {
            println!("{}: {}", self.build_name(i), path.display());
        }
        println!(
            "adapter: {} {ADAPTER_ROLE} BYTES (this benchmark)\n",
            self.adapter.display()
        );
    }

    /// How the report names the `i`th build measured.
    fn build_name(&self, i: usize) -> String {
        match self.dispatchers.len() {
            1 => "dispatcher".into(),
            _ => format!("dispatcher {}", i + 1),
        }
    }

    /// The adapter's command line for an answer of `bytes`.
    fn adapter_argv(&self, bytes: usize) -> Vec<String> {
        vec![
            self.adapter.display().to_string(),
            ADAPTER_ROLE.into(),
            bytes.to_string(),
        ]
    }

    fn alone(&self, bytes: usize) -> Command {
        let argv = self.adapter_argv(bytes);
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .env("PTD_BENCH_PAYLOAD", self.payload.name());
        cmd
    }

    fn under_timeout(&self, bytes: usize) -> Command {
        let mut cmd = Command::new(&self.timeout);
        cmd.arg("30")
            .args(self.adapter_argv(bytes))
            .env("PTD_BENCH_PAYLOAD", self.payload.name());
        cmd
    }

    fn dispatched(&self, bytes: usize, extra: &[&str]) -> Command {
        self.dispatched_by(0, bytes, extra)
    }

    /// [`Bench::dispatched`] by the `build`th build measured.
    fn dispatched_by(&self, build: usize, bytes: usize, extra: &[&str]) -> Command {
        let mut cmd = Command::new(&self.dispatchers[build]);
        cmd.arg("--parent-tool-bridge")
            .arg(bridge(&self.adapter_argv(bytes), self.payload))
            .args(extra);
        cmd
    }

    /// The dispatcher's options with every confinement mechanism on (SPEC §13): Landlock (a
    /// folder of this benchmark's to write), a network namespace, the cgroup limits and the
    /// rlimits; `no_new_privs` and seccomp come with any of them.
    fn confinement_options(&self) -> Vec<String> {
        let work = self.dir.path().display().to_string();
        [
            "--fs-write",
            &work,
            "--network",
            "none",
            "--limit-memory",
            "256M",
            "--limit-pids",
            "64",
            "--limit-open-files",
            "256",
            "--limit-file-size",
            "64M",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// (a): one call, interleaved round by round (in a new order each round): the adapter alone,
    /// `timeout`, each build, and the first build with every confinement mechanism on.
    fn per_call(&self) {
        const ANSWER: usize = 1024;
        let req = self.small_request();
        let small = Expect {
            min_stdout: ANSWER,
            tail: None,
        };
        let confine = self.confinement_options();
        let confine: Vec<&str> = confine.iter().map(String::as_str).collect();
        let builds = self.dispatchers.len();
        let variants = builds + 3;
        let command = |which: usize| match which {
            0 => self.alone(ANSWER),
            1 => self.under_timeout(ANSWER),
            // Checked like every run: a refusal (confinement_unavailable) stops it.
            w if w == variants - 1 => self.dispatched(ANSWER, &confine),
            w => self.dispatched_by(w - 2, ANSWER, &[]),
        };
        let mut series: Vec<Series> = (0..variants).map(|_| Series::default()).collect();
        // Warm the page cache and the dynamic loader's files first.
        for _ in 0..5 {
            for which in 1..variants {
                run_checked(&mut command(which), &req, small);
            }
        }
        for round in 0..self.runs {
            for which in order(variants, round) {
                series[which].push(run_checked(&mut command(which), &req, small));
            }
        }
        println!(
            "(a) one call, 1 KiB request, 1 KiB answer, {} rounds (ms)",
            self.runs
        );
        println!(
            "    {:<30} {:>8} {:>8} {:>8} {:>8} {:>9}",
            "", "median", "mean", "p95", "min", "cpu med"
        );
        let mut names = vec!["adapter alone".to_string(), "timeout 30 ADAPTER".into()];
        names.extend((0..builds).map(|i| self.build_name(i)));
        names.push(format!("{}, fully confined", self.build_name(0)));
        for (name, s) in names.iter().zip(&series) {
            let (w, c) = (s.wall(), s.cpu());
            println!(
                "    {name:<30} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9.2}",
                w.median, w.mean, w.p95, w.min, c.median
            );
        }
        let (t, first) = (&series[1], &series[2]);
        for (i, d) in series[2..2 + builds].iter().enumerate() {
            let ratio = d.wall().median / t.wall().median;
            println!(
                "    {} / timeout: {ratio:.2}x median wall ({:.2}x mean, {:.2}x cpu), {:+.2} ms; target <= 1.10x: {}",
                self.build_name(i),
                d.wall().mean / t.wall().mean,
                d.cpu().median / t.cpu().median,
                d.wall().median - t.wall().median,
                verdict(ratio, 1.10)
            );
            if i > 0 {
                println!(
                    "    {} against {}: {:+.3} ms median wall ({:.3}x), {:+.3} ms cpu; \
                     round by round, the median difference {:+.3} ms",
                    self.build_name(i),
                    self.build_name(0),
                    d.wall().median - first.wall().median,
                    d.wall().median / first.wall().median,
                    d.cpu().median - first.cpu().median,
                    d.paired_difference(first)
                );
            }
        }
        let confined = &series[variants - 1];
        let added = confined.wall().median - first.wall().median;
        println!(
            "\n    confinement (every mechanism on) adds {added:+.2} ms median wall per call \
             ({:+.2} ms cpu); goal <= +1 ms: {}\n",
            confined.cpu().median - first.cpu().median,
            verdict(added, 1.0)
        );
    }

    /// (b): a big answer, the pipe floor and each build, in a new order each round.
    fn big_answer(&self) {
        let req = self.small_request();
        let big = Expect {
            min_stdout: self.big_bytes,
            tail: None,
        };
        // Room for the envelope around the payload.
        let cap = (self.big_bytes + MIB).to_string();
        let builds = self.dispatchers.len();
        let command = |which: usize| match which {
            0 => self.under_timeout(self.big_bytes),
            w => self.dispatched_by(w - 1, self.big_bytes, &["--max-output-bytes", &cap]),
        };
        let mut series: Vec<Series> = (0..=builds).map(|_| Series::default()).collect();
        for which in 1..=builds {
            run_checked(&mut command(which), &req, big);
        }
        for round in 0..self.big_runs {
            for which in order(builds + 1, round) {
                series[which].push(run_checked(&mut command(which), &req, big));
            }
        }
        let mib = self.big_bytes as f64 / MIB as f64;
        println!(
            "(b) a {mib:.0} MiB output string ({} payload), {} rounds (ms; RSS in MiB)",
            self.payload.name(),
            self.big_runs
        );
        println!(
            "    {:<30} {:>8} {:>8} {:>8} {:>9} {:>9}",
            "", "median", "mean", "min", "cpu med", "peak RSS"
        );
        let mut names = vec!["timeout 30 ADAPTER | reader".to_string()];
        names.extend((0..builds).map(|i| format!("{} | reader", self.build_name(i))));
        for (name, s) in names.iter().zip(&series) {
            let (w, c) = (s.wall(), s.cpu());
            println!(
                "    {name:<30} {:>8.1} {:>8.1} {:>8.1} {:>9.1} {:>9.1}",
                w.median,
                w.mean,
                w.min,
                c.median,
                s.max_rss as f64 / MIB as f64
            );
        }
        let floor = &series[0];
        let rss_target = 2.0 * mib + 16.0;
        for (i, d) in series[1..].iter().enumerate() {
            let ratio = d.wall().median / floor.wall().median;
            let rss = d.max_rss as f64 / MIB as f64;
            println!(
                "    {} / floor: {ratio:.2}x median wall ({:.2}x cpu); target <= 2.0x: {}",
                self.build_name(i),
                d.cpu().median / floor.cpu().median,
                verdict(ratio, 2.0)
            );
            println!(
                "    {} peak RSS: {rss:.1} MiB = {:.2}x payload; target <= {rss_target:.0} MiB (2 x payload + 16 MiB): {}",
                self.build_name(i),
                rss / mib,
                verdict(rss, rss_target)
            );
            if i > 0 {
                println!(
                    "    {} against {}: {:+.1} ms median wall ({:.3}x); round by round, the \
                     median difference {:+.1} ms",
                    self.build_name(i),
                    self.build_name(0),
                    d.wall().median - series[1].wall().median,
                    d.wall().median / series[1].wall().median,
                    d.paired_difference(&series[1])
                );
            }
        }
        println!();
    }

    /// (c): many calls back to back, in blocks that alternate between the variants.
    fn sequential(&self) {
        const ANSWER: usize = 1024;
        const BLOCKS: usize = 10;
        let req = self.small_request();
        let small = Expect {
            min_stdout: ANSWER,
            tail: None,
        };
        let per_block = self.sequential / BLOCKS;
        let builds = self.dispatchers.len();
        let variants = builds + 2;
        let mut totals = vec![Duration::ZERO; variants];
        for block in 0..BLOCKS {
            for k in 0..variants {
                let which = (block + k) % variants;
                let start = Instant::now();
                for _ in 0..per_block {
                    let mut cmd = match which {
                        0 => self.alone(ANSWER),
                        1 => self.under_timeout(ANSWER),
                        w => self.dispatched_by(w - 2, ANSWER, &[]),
                    };
                    run_checked(&mut cmd, &req, small);
                }
                totals[which] += start.elapsed();
            }
        }
        let calls = per_block * BLOCKS;
        println!("(c) {calls} sequential calls each, in {BLOCKS} alternating blocks (s)");
        let mut names = vec!["adapter alone".to_string(), "timeout 30 ADAPTER".into()];
        names.extend((0..builds).map(|i| self.build_name(i)));
        for (name, total) in names.iter().zip(&totals) {
            println!(
                "    {name:<30} {:>8.2} s  ({:.2} ms a call)",
                total.as_secs_f64(),
                total.as_secs_f64() * 1e3 / calls as f64
            );
        }
        for (i, total) in totals[2..].iter().enumerate() {
            let ratio = total.as_secs_f64() / totals[1].as_secs_f64();
            println!(
                "    {} / timeout: {ratio:.3}x; target <= 1.10x: {}",
                self.build_name(i),
                verdict(ratio, 1.10)
            );
        }
        println!();
        println!("load average at the end: {}", load());
    }
}

impl Bench {
    /// (d): what `--ledger` adds to one call, durably: no ledger, a new key, a replay, and a
    /// new key on a ledger in memory — for every build named, all in the same rounds, each
    /// build on ledgers of its own.
    fn ledger(&self) {
        const ANSWER: usize = 1024;
        let rounds = env_number("PTD_BENCH_LEDGER_RUNS", 200).max(1);
        let builds = self.dispatchers.len();
        let plain_req = self.small_request();
        let plain = Expect {
            min_stdout: ANSWER,
            tail: None,
        };
        // The same ledger work on a file system in memory: what the ledger costs without the
        // disk's `fsync`s (the bound on a slow disk is the disk).
        let memory = tempfile::tempdir_in("/dev/shm").ok();
        let path_in = |dir: &Path, kind: &str, build: usize| {
            dir.join(format!("ledger-{kind}{build}.db"))
                .to_str()
                .expect("a UTF-8 temporary path")
                .to_string()
        };
        let on_disk: Vec<String> = (0..builds)
            .map(|b| path_in(self.dir.path(), "", b))
            .collect();
        // `--ledger-durability normal` on ledgers of its own (the same new key each round).
        let normal: Vec<String> = (0..builds)
            .map(|b| path_in(self.dir.path(), "normal-", b))
            .collect();
        let in_memory: Option<Vec<String>> = memory
            .as_ref()
            .map(|d| (0..builds).map(|b| path_in(d.path(), "", b)).collect());
        let expect = |tail| Expect {
            min_stdout: ANSWER,
            tail: Some(tail),
        };
        let (fresh, replayed) = (
            expect(r#""ledger":{"replayed":false,"attempt":1}"#),
            expect(r#""ledger":{"replayed":true,"attempt":1}"#),
        );
        // The recorded key the replays ask for, and warm ledgers.
        let recorded = self.dir.path().join("request-recorded.json");
        std::fs::write(&recorded, request_in(1024, "recorded")).expect("write the request");
        for (b, ledger) in on_disk.iter().enumerate() {
            let with_ledger = ["--ledger", ledger.as_str()];
            run_checked(
                &mut self.dispatched_by(b, ANSWER, &with_ledger),
                &recorded,
                fresh,
            );
            for _ in 0..5 {
                run_checked(&mut self.dispatched_by(b, ANSWER, &[]), &plain_req, plain);
                run_checked(
                    &mut self.dispatched_by(b, ANSWER, &with_ledger),
                    &recorded,
                    replayed,
                );
            }
        }
        // Each build's variants: 0 no ledger, 1 a new key, 2 a replay, 3 a new key with
        // `--ledger-durability normal`, 4 a new key in memory (where `/dev/shm` is).
        let kinds = if in_memory.is_some() { 5 } else { 4 };
        let variants = builds * kinds;
        let mut series: Vec<Series> = (0..variants).map(|_| Series::default()).collect();
        for round in 0..rounds {
            let new_key = self.dir.path().join("request-new-key.json");
            std::fs::write(&new_key, request_in(1024, &format!("session-{round}")))
                .expect("write the request");
            for which in order(variants, round) {
                let (b, kind) = (which / kinds, which % kinds);
                let disk = ["--ledger", on_disk[b].as_str()];
                let run = |args: &[&str], request: &Path, expect: Expect| {
                    run_checked(&mut self.dispatched_by(b, ANSWER, args), request, expect)
                };
                let sample = match kind {
                    0 => run(&[], &plain_req, plain),
                    1 => run(&disk, &new_key, fresh),
                    2 => run(&disk, &recorded, replayed),
                    3 => run(
                        &["--ledger", &normal[b], "--ledger-durability", "normal"],
                        &new_key,
                        fresh,
                    ),
                    _ => {
                        let memory = in_memory.as_ref().expect("a ledger in memory");
                        run(&["--ledger", &memory[b]], &new_key, fresh)
                    }
                };
                series[which].push(sample);
            }
        }
        println!("(d) the ledger: one call, 1 KiB request, 1 KiB answer, {rounds} rounds (ms)");
        println!(
            "    {:<50} {:>8} {:>8} {:>8} {:>8} {:>9}",
            "", "median", "mean", "p95", "min", "cpu med"
        );
        let names = [
            "no ledger",
            "--ledger, a new key",
            "--ledger, a replay",
            "--ledger-durability normal, a new key",
            "--ledger in /dev/shm, new key",
        ];
        for b in 0..builds {
            for (name, s) in names.iter().zip(&series[b * kinds..(b + 1) * kinds]) {
                let (w, c) = (s.wall(), s.cpu());
                let name = format!("{}, {name}", self.build_name(b));
                println!(
                    "    {name:<50} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9.2}",
                    w.median, w.mean, w.p95, w.min, c.median
                );
            }
        }
        for b in 0..builds {
            let own = &series[b * kinds..(b + 1) * kinds];
            let added = own[1].wall().median - own[0].wall().median;
            println!(
                "    {}: --ledger adds {added:+.2} ms a call (median wall; round by round \
                 {:+.2}); target <= +1.5 ms: {}",
                self.build_name(b),
                own[1].paired_difference(&own[0]),
                verdict(added, 1.5)
            );
            println!(
                "      with --ledger-durability normal {:+.2} ms (round by round {:+.2}; \
                 against full {:+.2})",
                own[3].wall().median - own[0].wall().median,
                own[3].paired_difference(&own[0]),
                own[3].paired_difference(&own[1])
            );
            if kinds == 5 {
                let in_memory = own[4].wall().median - own[0].wall().median;
                println!(
                    "      of which the ledger's own work (in memory, no fsync) \
                     {in_memory:+.2} ms; the disk's syncs and truncations {:+.2} ms",
                    added - in_memory
                );
            }
            if b > 0 {
                let memory = if kinds == 5 {
                    format!(
                        " ({:+.3} ms in memory)",
                        own[4].paired_difference(&series[4])
                    )
                } else {
                    String::new()
                };
                println!(
                    "      against {}: a new key {:+.3} ms round by round{memory}",
                    self.build_name(0),
                    own[1].paired_difference(&series[1]),
                );
            }
        }
        println!();
    }
}

impl Bench {
    /// (e): what each confinement mechanism adds on its own, interleaved round by round.
    /// `no_new_privs` and seccomp come with every one of them (the "rlimits" line is little
    /// more than those two).
    fn confinement_by_mechanism(&self) {
        const ANSWER: usize = 1024;
        let rounds = env_number("PTD_BENCH_MECHANISM_RUNS", 100).max(1);
        let req = self.small_request();
        let small = Expect {
            min_stdout: ANSWER,
            tail: None,
        };
        let work = self.dir.path().display().to_string();
        let all = self.confinement_options();
        let variants: [(&str, Vec<&str>); 6] = [
            ("unconfined", vec![]),
            (
                "rlimits (+ nnp, seccomp)",
                vec!["--limit-open-files", "256"],
            ),
            ("Landlock (--fs-write)", vec!["--fs-write", &work]),
            ("network namespace", vec!["--network", "none"]),
            (
                "cgroup (memory, pids)",
                vec!["--limit-memory", "256M", "--limit-pids", "64"],
            ),
            ("every mechanism", all.iter().map(String::as_str).collect()),
        ];
        let (builds, kinds) = (self.dispatchers.len(), variants.len());
        for b in 0..builds {
            for (_, args) in &variants {
                run_checked(&mut self.dispatched_by(b, ANSWER, args), &req, small);
            }
        }
        // Each build's mechanisms in the same rounds, in a new order each round.
        let mut series: Vec<Series> = (0..builds * kinds).map(|_| Series::default()).collect();
        for round in 0..rounds {
            for which in order(builds * kinds, round) {
                let (b, kind) = (which / kinds, which % kinds);
                let mut cmd = self.dispatched_by(b, ANSWER, &variants[kind].1);
                series[which].push(run_checked(&mut cmd, &req, small));
            }
        }
        println!("(e) confinement by mechanism: one call, 1 KiB answer, {rounds} rounds (ms)");
        for b in 0..builds {
            let own = &series[b * kinds..(b + 1) * kinds];
            println!(
                "    {:<30} {:>8} {:>8} {:>9} {:>9} {:>9}",
                self.build_name(b),
                "median",
                "added",
                "cpu med",
                "cpu added",
                "paired"
            );
            let (base, base_cpu) = (own[0].wall().median, own[0].cpu().median);
            for ((name, _), s) in variants.iter().zip(own) {
                let (w, c) = (s.wall().median, s.cpu().median);
                println!(
                    "    {name:<30} {w:>8.2} {:>+8.2} {c:>9.2} {:>+9.2} {:>+9.2}",
                    w - base,
                    c - base_cpu,
                    s.paired_difference(&own[0])
                );
            }
            if b > 0 {
                println!(
                    "    {} against {}, round by round, what each mechanism adds: {}",
                    self.build_name(b),
                    self.build_name(0),
                    variants
                        .iter()
                        .enumerate()
                        .skip(1)
                        .map(|(k, (name, _))| {
                            let mine = own[k].paired_difference(&own[0]);
                            let first = series[k].paired_difference(&series[0]);
                            format!("{name} {:+.3} ms", mine - first)
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        println!();
    }
}

impl Bench {
    /// (f): what a 200-entry host policy adds per call (SPEC §16), three ways interleaved:
    /// no policy; the policy as a call finds it in steady use (a root dispatcher reads it back
    /// from its compiled-policy cache, ptd-policy's `cache.rs`); and the same policy loaded
    /// whole (its file rewritten, same bytes, before each of those calls: a file that just
    /// changed is never read from the cache).
    fn policy(&self) {
        const ANSWER: usize = 1024;
        const ENTRIES: usize = 200;
        let rounds = env_number("PTD_BENCH_POLICY_RUNS", 200).max(1);
        let req = self.small_request();
        let plain = Expect {
            min_stdout: ANSWER,
            tail: None,
        };
        let routed = Expect {
            min_stdout: ANSWER,
            tail: Some(r#""entry":"bench.tool""#),
        };
        let text = policy_text(self, ENTRIES);
        let steady = self.dir.path().join("policy.toml");
        let fresh = self.dir.path().join("policy-fresh.toml");
        std::fs::write(&steady, &text).expect("write the policy");
        std::fs::write(&fresh, &text).expect("write the policy");
        // A file that changed in the last 2 s is loaded whole (ptd-policy's `SETTLE`).
        std::thread::sleep(Duration::from_millis(2500));
        let (steady, fresh) = (steady.display().to_string(), fresh.display().to_string());
        let with = |file: &str| vec!["--policy".to_string(), file.to_string()];
        let run = |which: usize| -> Sample {
            match which {
                0 => run_checked(&mut self.dispatched(ANSWER, &[]), &req, plain),
                1 => run_checked(
                    &mut self.dispatched_with(ANSWER, &with(&steady)),
                    &req,
                    routed,
                ),
                _ => {
                    std::fs::write(&fresh, &text).expect("rewrite the policy");
                    run_checked(
                        &mut self.dispatched_with(ANSWER, &with(&fresh)),
                        &req,
                        routed,
                    )
                }
            }
        };
        for which in [0, 1, 2, 0, 1, 2] {
            run(which);
        }
        let mut series: [Series; 3] = Default::default();
        for round in 0..rounds {
            for k in 0..3 {
                let which = (round + k) % 3;
                series[which].push(run(which));
            }
        }
        println!(
            "(f) the host policy: one call, 1 KiB answer, {ENTRIES} entries, {rounds} rounds (ms)"
        );
        let names = [
            "without a policy",
            "--policy (steady)",
            "--policy (loaded whole)",
        ];
        let base = (series[0].wall(), series[0].cpu());
        for (name, s) in names.iter().zip(&series) {
            let (wall, cpu) = (s.wall(), s.cpu());
            println!(
                "    {name:<24} median {:>6.2}  mean {:>6.2}  cpu median {:>6.2}  added {:>+7.3} wall, {:>+7.3} cpu",
                wall.median,
                wall.mean,
                cpu.median,
                wall.median - base.0.median,
                cpu.median - base.1.median
            );
        }
        let added = series[1].wall().median - base.0.median;
        println!(
            "    in steady use: {added:+.3} ms per call; target <= 0.200 ms: {}\n",
            verdict(added, 0.2)
        );
    }

    fn dispatched_with(&self, bytes: usize, extra: &[String]) -> Command {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        self.dispatched(bytes, &extra)
    }
}

/// A policy of `entries` `[[tool]]` tables: `entries - 1` for other tools, each with what the
/// loader checks (an absolute adapter, a grant of the benchmark's folder, a memory limit, a
/// timeout), and last the exact entry for the benchmark's tool: its adapter, unconfined.
fn policy_text(bench: &Bench, entries: usize) -> String {
    let dir = bench.dir.path().display().to_string();
    let adapter = bench.adapter.display().to_string();
    let mut text = String::from("version = 1\n[defaults]\ntimeout_ms = 30000\n");
    for i in 1..entries {
        text.push_str(&format!(
            "\n[[tool]]\nmatch = \"other{i}.*\"\nadapter = [{adapter:?}, \"x\"]\n\
             fs_read = [{dir:?}]\nlimit_memory = \"256M\"\ntimeout_ms = 10000\n"
        ));
    }
    let argv: Vec<String> = bench
        .adapter_argv(1024)
        .iter()
        .map(|a| format!("{a:?}"))
        .collect();
    text.push_str(&format!(
        "\n[[tool]]\nmatch = \"{TOOL}\"\nadapter = [{}]\nunconfined = true\n",
        argv.join(", ")
    ));
    text
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// A request of exactly `size` bytes (its `input` string padded to fit).
fn request(size: usize) -> String {
    request_in(size, "s")
}

/// [`request`] in the sandbox session `session`.
fn request_in(size: usize, session: &str) -> String {
    let make = |pad: usize| {
        format!(
            r#"{{"schema":"wp-codebox/parent-tool-request/v1","version":1,"request_id":"{REQUEST_ID}","tool":"{TOOL}","operation":"call","input":"{}","sandbox_session":{{"sandbox_session_id":"{session}"}},"authorization":{{"allowed_tools":["{TOOL}"]}},"metadata":{{}}}}"#,
            "x".repeat(pad)
        )
    };
    let bare = make(0).len();
    make(size.saturating_sub(bare))
}

/// A bridge that runs `argv` (with the payload variable set, the rest of the environment
/// cleared as always).
fn bridge(argv: &[String], payload: Payload) -> String {
    let argv: Vec<String> = argv.iter().map(|a| format!("{a:?}")).collect();
    format!(
        r#"{{"schema":"wp-codebox/parent-tool-bridge/v1","version":1,"allowed_tools":["{TOOL}"],"dispatcher":{{"owner":"wp-codebox","mode":"host_command","command":{{"argv":[{}],"env":{{"PTD_BENCH_PAYLOAD":"{}"}}}},"request_schema":"wp-codebox/parent-tool-request/v1","result_schema":"wp-codebox/parent-tool-result/v1","timeout_ms":30000}},"sandbox_env":{{}},"authorization":{{}},"redaction":{{}},"metadata":{{}}}}"#,
        argv.join(","),
        payload.name()
    )
}
