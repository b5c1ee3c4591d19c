//! Benchmark: `parent-tool-dispatch serve` (SPEC §19.2) over loopback HTTP. Run with
//! `cargo bench --bench serve` (release build). The goal on a 2-core machine: at least 200
//! dispatches per second of a trivial adapter, with p99 under 50 ms; the server's own cost per
//! dispatch no more than a plain main-job call's.
//!
//! - **(1) throughput** — `PTD_BENCH_SERVE_CLIENTS` (default 8) client threads, each on one
//!   keep-alive connection, POST one small request after another for `PTD_BENCH_SERVE_SECS`
//!   (default 10) seconds after a 2 s warm-up: dispatches per second, p50, p99 and the largest
//!   latency.
//! - **(2) one at a time** — `PTD_BENCH_SERVE_RUNS` (default 100) dispatches by one client,
//!   interleaved with as many plain main-job calls of the same request (a process started per
//!   call, the request on stdin): the medians side by side, their difference being what the
//!   server adds to a call (HTTP, the child's start by the server instead of by a shell).
//!
//! **The adapter** is this binary (`serve __serve-adapter`): it reads the request and answers
//! succeeded. **Every response is checked before it counts**: HTTP 200 and a succeeded
//! envelope (a main-job call: exit 0 and a succeeded envelope); a response that fails the
//! check stops the benchmark. Nothing is asserted about times: they belong to the machine.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A benchmark starts its processes and reads its files directly.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_macros,
    clippy::too_many_lines
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ADAPTER_ROLE: &str = "__serve-adapter";
const REQUEST_ID: &str = "bench-call";
const TOOL: &str = "bench.tool";
const TOKEN: &str = "bench-token-0123456789";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(ADAPTER_ROLE) {
        std::process::exit(answer());
    }
    let dispatcher = PathBuf::from(env!("CARGO_BIN_EXE_parent-tool-dispatch"));
    let dir = tempfile::tempdir().unwrap();
    let bridge = dir.path().join("bridge.json");
    std::fs::write(&bridge, bridge_text()).unwrap();
    let (server, port) = start(&dispatcher, dir.path(), &bridge);
    println!(
        "dispatcher: {}\ncores: {}\nload average: {}\n",
        dispatcher.display(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load()
    );
    let clients = env_number("PTD_BENCH_SERVE_CLIENTS", 8);
    let secs = env_number("PTD_BENCH_SERVE_SECS", 10);
    run_clients(port, clients, Duration::from_secs(2));
    let started = Instant::now();
    let mut latencies = run_clients(port, clients, Duration::from_secs(secs as u64));
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    println!("(1) throughput: {clients} keep-alive clients for {secs} s");
    println!(
        "    {} dispatches, {:.0} per second (goal: at least 200)",
        latencies.len(),
        latencies.len() as f64 / elapsed
    );
    println!(
        "    latency p50 {:.1} ms, p99 {:.1} ms (goal: under 50 ms), max {:.1} ms\n",
        ms(percentile(&latencies, 50.0)),
        ms(percentile(&latencies, 99.0)),
        ms(*latencies.last().unwrap())
    );

    let runs = env_number("PTD_BENCH_SERVE_RUNS", 100);
    let mut stream = connect(port);
    let (mut served, mut plain) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        dispatch(&mut stream);
        served.push(t.elapsed());
        plain.push(main_job(&dispatcher, &bridge));
    }
    served.sort();
    plain.sort();
    let (s, p) = (ms(percentile(&served, 50.0)), ms(percentile(&plain, 50.0)));
    println!("(2) one at a time, {runs} runs each (medians)");
    println!("    through serve:      {s:.2} ms");
    println!("    a plain main job:   {p:.2} ms");
    println!("    serve adds:         {:+.2} ms a call", s - p);
    stop(server);
}

/// The trivial adapter: read the request, answer succeeded.
fn answer() -> i32 {
    let mut request = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut request);
    println!(
        r#"{{"schema":"wp-codebox/parent-tool-result/v1","version":1,"request_id":"{REQUEST_ID}","tool":"{TOOL}","operation":"call","status":"succeeded","output":{{"ok":true}}}}"#
    );
    0
}

fn bridge_text() -> String {
    let me = std::env::current_exe().unwrap();
    serde_json::json!({
        "schema": "wp-codebox/parent-tool-bridge/v1",
        "version": 1,
        "allowed_tools": [TOOL],
        "dispatcher": {
            "owner": "wp-codebox",
            "mode": "host_command",
            "command": {"argv": [me.display().to_string(), ADAPTER_ROLE]},
            "request_schema": "wp-codebox/parent-tool-request/v1",
            "result_schema": "wp-codebox/parent-tool-result/v1",
            "timeout_ms": 20000
        },
        "sandbox_env": {"mode": "metadata-only", "secret_env": []},
        "authorization": {"mode": "allowlist", "failure_status": "denied"},
        "redaction": {"transcript_artifact_refs": []},
        "metadata": {}
    })
    .to_string()
}

fn request_text() -> String {
    serde_json::json!({
        "schema": "wp-codebox/parent-tool-request/v1",
        "version": 1,
        "request_id": REQUEST_ID,
        "tool": TOOL,
        "operation": "call",
        "input": {"n": 1},
        "sandbox_session": {"sandbox_session_id": "bench", "caller_session_id": "bench"},
        "authorization": {"allowed_tools": [TOOL], "capability": "read", "principal": {}},
        "metadata": {}
    })
    .to_string()
}

/// `serve` on a free loopback port, once `/healthz` answers 200.
// The child is returned to `main`, whose `stop` waits for it.
#[allow(clippy::zombie_processes)]
fn start(dispatcher: &Path, dir: &Path, bridge: &Path) -> (Child, u16) {
    use std::os::unix::fs::PermissionsExt;
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(dispatcher)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--token-file")
        .arg(&tokens)
        .arg("--parent-tool-bridge")
        .arg(format!("@{}", bridge.display()))
        .env_remove("PARENT_TOOL_DISPATCH_SESSION")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: b\r\n\r\n");
            let mut reader = BufReader::new(stream);
            if read_response(&mut reader).is_some_and(|(status, _)| status == 200) {
                return (child, port);
            }
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve did not come up");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn stop(server: Child) {
    let pid = rustix::process::Pid::from_child(&server);
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    let mut server = server;
    let status = server.wait().unwrap();
    assert!(status.success(), "serve exited {status}");
}

/// `clients` threads, each on one keep-alive connection, dispatching for `time`; every
/// latency.
fn run_clients(port: u16, clients: usize, time: Duration) -> Vec<Duration> {
    let until = Instant::now() + time;
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            std::thread::spawn(move || {
                let mut stream = connect(port);
                let mut latencies = Vec::new();
                while Instant::now() < until {
                    let t = Instant::now();
                    dispatch(&mut stream);
                    latencies.push(t.elapsed());
                }
                latencies
            })
        })
        .collect();
    threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect()
}

fn connect(port: u16) -> BufReader<TcpStream> {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    BufReader::new(stream)
}

/// One `POST /v1/dispatch` on the connection, checked: 200 and a succeeded envelope.
fn dispatch(stream: &mut BufReader<TcpStream>) {
    let body = request_text();
    let head = format!(
        "POST /v1/dispatch HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let out = stream.get_mut();
    out.write_all(head.as_bytes()).unwrap();
    out.write_all(body.as_bytes()).unwrap();
    let (status, body) = read_response(stream).expect("a response");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    check_succeeded(&body);
}

fn check_succeeded(envelope: &[u8]) {
    let value: serde_json::Value = serde_json::from_slice(envelope)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(envelope)));
    assert_eq!(value["status"], "succeeded", "{value}");
}

/// One HTTP/1.1 response with a `Content-Length`: its status and body.
fn read_response(reader: &mut BufReader<TcpStream>) -> Option<(u16, Vec<u8>)> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let status = line.split_whitespace().nth(1)?.parse().ok()?;
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 {
            return None;
        }
        if header == "\r\n" {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((status, body))
}

/// One plain main-job call of the same request, checked; its time.
fn main_job(dispatcher: &Path, bridge: &Path) -> Duration {
    let t = Instant::now();
    let mut child = Command::new(dispatcher)
        .arg("--parent-tool-bridge")
        .arg(format!("@{}", bridge.display()))
        .env_remove("PARENT_TOOL_DISPATCH_SESSION")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request_text().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let elapsed = t.elapsed();
    assert!(out.status.success(), "the main job exited {}", out.status);
    check_succeeded(&out.stdout);
    elapsed
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 * p / 100.0).ceil() as usize).clamp(1, sorted.len());
    sorted[i - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
