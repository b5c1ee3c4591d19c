//! Benchmark: the egress proxy of SPEC §17, on whole dispatcher processes. Run with
//! `cargo bench --bench egress` (release build). Two parts, each against its target:
//!
//! - **(1) set-up** — a small call whose adapter connects nowhere, confined with `--network
//!   none` and with `--network allow:127.0.0.1:PORT`, interleaved round by round
//!   (`PTD_BENCH_EGRESS_RUNS`, default 200): the difference is what the proxy adds to a call
//!   (the loopback brought up, the listener made and handed over, the proxy's thread started
//!   and finished). Target: at most +1 ms.
//! - **(2) a 64 MiB download** — the adapter fetches `PTD_BENCH_EGRESS_MIB` (default 64) MiB
//!   over HTTP from a server of this benchmark on the host's loopback: directly, with every
//!   confinement but the network on (`--network any --limit-open-files 4096`), and through
//!   the proxy (`--network allow:127.0.0.1:PORT`), interleaved, each first in every other
//!   round (`PTD_BENCH_EGRESS_BIG_RUNS`, default 60). Target: through the proxy at most 1.5×
//!   the direct download, as the ratio of the medians and as the median of the rounds' ratios
//!   (which a load that changes from minute to minute moves less).
//!
//! **The adapter** is this binary (`egress __egress-fetch URL`, or `__egress-none`): it reads
//! the request, fetches URL — through the proxy `http_proxy` names when it is set, else
//! directly — counts the body's bytes and answers with them. **Every run is checked before it
//! counts**: exit status 0, a succeeded envelope, `output.bytes` equal to what was served, and
//! under `allow:` a `diagnostics.dispatch.network` that saw the connection allowed; a run that
//! fails the check stops the benchmark with its stderr. Nothing is asserted about times: they
//! belong to the machine. Only the benchmark's own server on `127.0.0.1` is ever a target.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A benchmark starts its processes and reads its files directly.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_macros,
    clippy::too_many_lines
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FETCH_ROLE: &str = "__egress-fetch";
const NONE_ROLE: &str = "__egress-none";
const REQUEST_ID: &str = "bench-call";
const TOOL: &str = "bench.tool";
const MIB: usize = 1 << 20;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some(FETCH_ROLE) => std::process::exit(fetch(&args[2])),
        Some(NONE_ROLE) => std::process::exit(answer(0)),
        _ => {}
    }
    if !is_root() {
        println!("egress: skipped: the benchmark confines its adapter as root (run it as root)");
        return;
    }
    let server = serve();
    let dispatcher = PathBuf::from(env!("CARGO_BIN_EXE_parent-tool-dispatch"));
    let me = std::env::current_exe().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The adapter (this binary) must be readable by the adapter's user (nobody).
    let adapter = dir.path().join("egress-adapter");
    std::fs::copy(&me, &adapter).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let allow = format!("allow:127.0.0.1:{server}");
    println!(
        "dispatcher: {}\nload average: {}\n",
        dispatcher.display(),
        load()
    );

    let runs = env_number("PTD_BENCH_EGRESS_RUNS", 200);
    let none_argv = vec![adapter.display().to_string(), NONE_ROLE.to_string()];
    let mut none = Vec::new();
    let mut with_proxy = Vec::new();
    for _ in 0..runs {
        none.push(run(
            &dispatcher,
            &none_argv,
            &["--network", "none"],
            0,
            false,
        ));
        with_proxy.push(run(
            &dispatcher,
            &none_argv,
            &["--network", &allow],
            0,
            true,
        ));
    }
    let (a, b) = (median(&none), median(&with_proxy));
    println!("(1) set-up, {runs} rounds, median wall time:");
    println!("    --network none            {a:8.2} ms");
    println!("    --network allow:…         {b:8.2} ms");
    println!(
        "    the proxy adds            {:+8.2} ms   (target +1 ms: {})\n",
        b - a,
        if b - a <= 1.0 { "met" } else { "NOT met" }
    );

    let mib = env_number("PTD_BENCH_EGRESS_MIB", 64);
    let big_runs = env_number("PTD_BENCH_EGRESS_BIG_RUNS", 60);
    let bytes = mib * MIB;
    let url = format!("http://127.0.0.1:{server}/bytes/{bytes}");
    let fetch_argv = vec![adapter.display().to_string(), FETCH_ROLE.to_string(), url];
    let direct_args = ["--network", "any", "--limit-open-files", "4096"];
    let mut direct = Vec::new();
    let mut proxied = Vec::new();
    let proxy_args = ["--network", allow.as_str()];
    for round in 0..big_runs {
        // Each variant goes first in every other round: a run leaves the caches warm for the
        // next, so a fixed order would favour the second.
        let direct_first = round % 2 == 0;
        for proxy in [!direct_first, direct_first] {
            if proxy {
                proxied.push(run(&dispatcher, &fetch_argv, &proxy_args, bytes, true));
            } else {
                direct.push(run(&dispatcher, &fetch_argv, &direct_args, bytes, false));
            }
        }
    }
    let (d, p) = (median(&direct), median(&proxied));
    let ratios: Vec<f64> = direct
        .iter()
        .zip(&proxied)
        .map(|(d, p)| p.as_secs_f64() / d.as_secs_f64())
        .collect();
    let paired = median_f64(ratios);
    println!("(2) a {mib} MiB download, {big_runs} rounds, median wall time of the whole call:");
    println!(
        "    direct (--network any)    {d:8.2} ms   {:7.0} MiB/s",
        mib as f64 / (d / 1e3)
    );
    println!(
        "    through the proxy         {p:8.2} ms   {:7.0} MiB/s",
        mib as f64 / (p / 1e3)
    );
    println!(
        "    ratio                     {:8.2}×      (target 1.5×: {})",
        p / d,
        if p / d <= 1.5 { "met" } else { "NOT met" }
    );
    println!(
        "    round by round, the median ratio {paired:.2}× (target 1.5×: {})",
        if paired <= 1.5 { "met" } else { "NOT met" }
    );
}

/// The median of `values`.
fn median_f64(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
        .max(1)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// The median of `samples`, in ms.
fn median(samples: &[Duration]) -> f64 {
    median_f64(samples.iter().map(|d| d.as_secs_f64() * 1e3).collect())
}

/// One dispatcher call running `argv` under `args`, checked: exit 0, succeeded,
/// `output.bytes` = `bytes`, and with `proxied` the proxy's report of one allowed connection
/// (or none, for a call that fetches nothing). Its wall time.
fn run(
    dispatcher: &PathBuf,
    argv: &[String],
    args: &[&str],
    bytes: usize,
    proxied: bool,
) -> Duration {
    let bridge = serde_json::json!({
        "schema": "wp-codebox/parent-tool-bridge/v1", "version": 1, "allowed_tools": [TOOL],
        "dispatcher": {"owner": "wp-codebox", "mode": "host_command", "command": {"argv": argv},
            "request_schema": "wp-codebox/parent-tool-request/v1",
            "result_schema": "wp-codebox/parent-tool-result/v1", "timeout_ms": 60000},
        "sandbox_env": {}, "authorization": {}, "redaction": {}, "metadata": {}
    });
    let request = serde_json::json!({
        "schema": "wp-codebox/parent-tool-request/v1", "version": 1, "request_id": REQUEST_ID,
        "tool": TOOL, "operation": "call", "input": {},
        "sandbox_session": {"sandbox_session_id": "s"},
        "authorization": {"allowed_tools": [TOOL]}, "metadata": {}
    });
    let started = Instant::now();
    let mut child = Command::new(dispatcher)
        .arg("--parent-tool-bridge")
        .arg(bridge.to_string())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the dispatcher starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let fail = |why: &str| -> ! {
        panic!(
            "a run did not do what it claims, so nothing is reported: {why}\n  args: {args:?}\n  stdout: {}\n  stderr: {stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    };
    if !out.status.success() {
        fail(&format!("exit status {:?}", out.status.code()));
    }
    let envelope: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| fail("stdout is not one envelope"));
    if envelope["status"] != "succeeded" || envelope["request_id"] != REQUEST_ID {
        fail("not a succeeded envelope of the call");
    }
    if envelope["output"]["bytes"] != bytes {
        fail(&format!(
            "the adapter did not receive the {bytes} bytes served"
        ));
    }
    let network = &envelope["diagnostics"]["dispatch"]["network"];
    if proxied {
        let expected = usize::from(bytes > 0);
        if network["allowed"] != expected || network["refused"] != 0 {
            fail("the proxy did not report the connection as allowed");
        }
    } else if !network.is_null() {
        fail("a direct run reports a proxy");
    }
    took
}

/// The benchmark's server on the host's loopback: `GET /bytes/N` answers N bytes.
fn serve() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer_bytes(stream));
        }
    });
    port
}

fn answer_bytes(stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut first = String::new();
    if reader.read_line(&mut first).is_err() {
        return;
    }
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line == "\r\n" => break,
            Ok(_) => {}
        }
    }
    let n: usize = first
        .split(' ')
        .nth(1)
        .and_then(|path| path.rsplit('/').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let mut out = stream;
    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n");
    if out.write_all(head.as_bytes()).is_err() {
        return;
    }
    let chunk = vec![b'x'; 256 << 10];
    let mut left = n;
    while left > 0 {
        let take = left.min(chunk.len());
        if out.write_all(&chunk[..take]).is_err() {
            return;
        }
        left -= take;
    }
}

/// The adapter's answer: `output.bytes` = `bytes`.
fn answer(bytes: usize) -> i32 {
    let mut request = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut request);
    println!(
        r#"{{"schema":"wp-codebox/parent-tool-result/v1","version":1,"request_id":"{REQUEST_ID}","tool":"{TOOL}","operation":"call","status":"succeeded","output":{{"bytes":{bytes}}}}}"#
    );
    0
}

/// The adapter's fetch of `url` (`http://HOST:PORT/PATH`): through the proxy `http_proxy`
/// names, else directly. Reads the whole body and answers with its length.
fn fetch(url: &str) -> i32 {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (connect_to, target) = match std::env::var("http_proxy") {
        Ok(proxy) => (
            proxy
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_string(),
            url.to_string(),
        ),
        Err(_) => (authority.to_string(), path.to_string()),
    };
    let mut stream = match TcpStream::connect(&connect_to) {
        Ok(stream) => stream,
        Err(e) => {
            eprintln!("cannot connect to {connect_to}: {e}");
            return 1;
        }
    };
    let request =
        format!("GET {target} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut reader = BufReader::with_capacity(256 << 10, stream);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    if !status.contains(" 200 ") {
        eprintln!("the answer was {status}");
        return 1;
    }
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
    }
    let mut buf = vec![0u8; 256 << 10];
    let mut total = 0usize;
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(e) => {
                eprintln!("reading the body: {e}");
                return 1;
            }
        }
    }
    answer(total)
}
