//! Egress by name (SPEC §17) through the binary, on the real kernel: the adapter runs in an
//! empty network namespace whose only way out is the dispatcher's proxy, and the clients are
//! the real ones — `curl` (absolute-form HTTP, and `CONNECT` with `--proxytunnel`) and Python's
//! `urllib` — reading the proxy variables the dispatcher sets.
//!
//! Every target is a server of this test on the host's loopback: `127.0.0.1:PORT` is allowed
//! only because it is listed as an address. Refused targets (a name that resolves to loopback,
//! the metadata address, a private address) are refused before any connection, and the server
//! counts the connections it saw to prove it.

use super::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A small HTTP/1.1 server on the host's `127.0.0.1`, one thread per connection, every
/// request answered with `Connection: close`:
/// - `/hello` → `hello from upstream`;
/// - `/bytes/N` → N bytes of `x`;
/// - `/endless` → headers, then a byte every 200 ms until the client is gone (at most 60 s).
pub(crate) struct Upstream {
    pub(crate) port: u16,
    /// Connections accepted.
    connections: Arc<AtomicUsize>,
    /// The request lines received, in order.
    lines: Arc<Mutex<Vec<String>>>,
    /// The request heads received, whole.
    heads: Arc<Mutex<Vec<String>>>,
    /// Connections whose client went away (a read or write failed, or end of file).
    closed: Arc<AtomicUsize>,
}

impl Upstream {
    pub(crate) fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let upstream = Upstream {
            port,
            connections: Arc::default(),
            lines: Arc::default(),
            heads: Arc::default(),
            closed: Arc::default(),
        };
        let (connections, lines, heads, closed) = (
            upstream.connections.clone(),
            upstream.lines.clone(),
            upstream.heads.clone(),
            upstream.closed.clone(),
        );
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                connections.fetch_add(1, Ordering::SeqCst);
                let (lines, heads, closed) = (lines.clone(), heads.clone(), closed.clone());
                std::thread::spawn(move || {
                    serve(stream, &lines, &heads);
                    closed.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        upstream
    }

    pub(crate) fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }

    /// Wait (at most 10 s) until every connection accepted is closed.
    fn all_closed(&self) -> bool {
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if self.closed.load(Ordering::SeqCst) == self.connections() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

fn serve(stream: TcpStream, lines: &Mutex<Vec<String>>, heads: &Mutex<Vec<String>>) {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut head = String::new();
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let first = head.lines().next().unwrap_or("").to_string();
    lines.lock().unwrap().push(first.clone());
    heads.lock().unwrap().push(head);
    let path = first.split(' ').nth(1).unwrap_or("");
    let mut out = stream;
    let respond = |out: &mut TcpStream, body: &[u8]| {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        out.write_all(head.as_bytes())
            .and_then(|()| out.write_all(body))
    };
    let _ = if path == "/hello" {
        respond(&mut out, b"hello from upstream\n")
    } else if let Some(n) = path.strip_prefix("/bytes/") {
        let n: usize = n.parse().unwrap_or(0);
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n");
        let chunk = vec![b'x'; 64 << 10];
        let mut left = n;
        let mut result = out.write_all(head.as_bytes());
        while result.is_ok() && left > 0 {
            let take = left.min(chunk.len());
            result = out.write_all(&chunk[..take]);
            left -= take;
        }
        result
    } else if path == "/endless" {
        let mut result = out
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\nConnection: close\r\n\r\n");
        let until = Instant::now() + Duration::from_secs(60);
        while result.is_ok() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(200));
            result = out.write_all(b"x");
        }
        result
    } else {
        out.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    };
    // Wait for the client to go: a read returns end of file or fails.
    let _ = out.shutdown(std::net::Shutdown::Write);
    let mut rest = Vec::new();
    let _ = reader.read_to_end(&mut rest);
}

/// The adapter: a Python script that runs the request's `input.steps` — `["urllib", URL]`,
/// `["curl", URL]`, `["curl-tunnel", URL]` (`CONNECT`), `["getaddrinfo", NAME]`,
/// `["direct", "HOST:PORT"]` (a connection that ignores the proxy), `["env", NAME]` — and
/// answers with one result per step.
const ADAPTER: &str = r#"import json, os, socket, subprocess, sys, urllib.error, urllib.request
r = json.load(sys.stdin)
results = []
def curl(args):
    p = subprocess.run(['curl', '-sS', '-m', '30', '-o', '-', '-w', '\n%{http_code}'] + args,
                       capture_output=True, text=True)
    body, _, code = p.stdout.rpartition('\n')
    return {'exit': p.returncode, 'http': code, 'body': body, 'stderr': p.stderr.strip()}
for kind, arg in r['input']['steps']:
    try:
        if kind == 'urllib':
            try:
                with urllib.request.urlopen(arg, timeout=30) as f:
                    results.append({'http': str(f.status), 'body': f.read().decode()})
            except urllib.error.HTTPError as e:
                results.append({'http': str(e.code), 'body': e.read().decode()})
        elif kind == 'curl':
            results.append(curl([arg]))
        elif kind == 'curl-tunnel':
            results.append(curl(['--proxytunnel', arg]))
        elif kind == 'getaddrinfo':
            results.append({'addresses': [a[4][0] for a in socket.getaddrinfo(arg, 80)]})
        elif kind == 'direct':
            host, port = arg.rsplit(':', 1)
            socket.create_connection((host, int(port)), timeout=5).close()
            results.append({'connected': True})
        elif kind == 'env':
            results.append({'value': os.environ.get(arg)})
    except Exception as e:
        results.append({'error': type(e).__name__})
print(json.dumps({'schema': 'wp-codebox/parent-tool-result/v1', 'version': 1,
  'request_id': r['request_id'], 'tool': r['tool'], 'operation': r['operation'],
  'status': 'succeeded', 'output': {'results': results}}))
"#;

/// What egress tests need: confinement, and the two clients.
fn clients() -> Need {
    confinable()?;
    skip::program("curl", &["--version"])?;
    skip::program("/usr/bin/python3", &["--version"])
}

/// The adapter script in a folder the adapter's user can read.
fn adapter_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("adapter.py"), ADAPTER).unwrap();
    give_to_adapter(dir.path());
    dir
}

/// The main job running the adapter with `steps`, under `args`.
fn fetch(dir: &Path, steps: Value, args: &[&str]) -> Dispatch {
    let script = dir.join("adapter.py").to_str().unwrap().to_string();
    Dispatch::with_bridge(bridge(&[]))
        .bridge(move |b| {
            b["dispatcher"]["command"]["argv"] = json!(["/usr/bin/python3", script]);
        })
        .request(move |r| r["input"] = json!({ "steps": steps }))
        .args(args)
}

fn results(run: &Run) -> Vec<Value> {
    run.expect("succeeded", None, 0);
    run.envelope["output"]["results"]
        .as_array()
        .unwrap()
        .clone()
}

fn network(run: &Run) -> &Value {
    &run.dispatch()["network"]
}

#[test]
fn curl_and_urllib_reach_a_listed_address_through_the_proxy_and_nothing_else() {
    require!(clients());
    let up = Upstream::start();
    let dir = adapter_dir();
    let allow = format!("allow:127.0.0.1:{}", up.port);
    let hello = up.url("/hello");
    let run = fetch(
        dir.path(),
        json!([["urllib", hello], ["curl", hello], ["curl-tunnel", hello]]),
        &["--network", &allow],
    )
    .run();
    let got = results(&run);
    for (i, result) in got.iter().enumerate() {
        assert_eq!(result["http"], "200", "step {i}: {result}");
        assert_eq!(
            result["body"], "hello from upstream\n",
            "step {i}: {result}"
        );
    }
    // Plain HTTP arrived in origin form, without the proxy's headers, closing.
    let lines = up.lines();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines.iter().all(|l| l == "GET /hello HTTP/1.1"),
        "{lines:?}"
    );
    for head in &up.heads()[..2] {
        let lower = head.to_ascii_lowercase();
        assert!(lower.contains("\r\nconnection: close\r\n"), "{head}");
        assert!(!lower.contains("proxy-"), "{head}");
    }
    let net = network(&run);
    assert_eq!(net["mode"], "allow");
    assert_eq!(net["allowed"], 3);
    assert_eq!(net["refused"], 0);
    let connections = net["connections"].as_array().unwrap();
    assert_eq!(connections.len(), 3);
    for c in connections {
        assert_eq!(c["host"], "127.0.0.1");
        assert_eq!(c["port"], up.port);
        assert_eq!(c["allowed"], true);
        assert!(c["bytes_up"].as_u64().unwrap() > 0, "{c}");
        assert!(c["bytes_down"].as_u64().unwrap() >= 20, "{c}");
    }
    let confinement = &run.dispatch()["confinement"];
    assert_eq!(confinement["network"], "allow");
    let mechanisms = confinement["mechanisms"].as_array().unwrap();
    for m in ["network_namespace", "network_proxy", "seccomp"] {
        assert!(mechanisms.contains(&json!(m)), "{mechanisms:?}");
    }
    assert!(
        up.all_closed(),
        "every upstream connection ended with the call"
    );
}

#[test]
fn the_adapter_gets_the_proxy_variables_and_nothing_of_the_hosts() {
    require!(clients());
    let up = Upstream::start();
    let dir = adapter_dir();
    let allow = format!("allow:127.0.0.1:{}", up.port);
    let names = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    ];
    let steps: Vec<Value> = names.iter().map(|n| json!(["env", n])).collect();
    let run = fetch(dir.path(), json!(steps), &["--network", &allow])
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("https_proxy", "http://host-proxy.example:3128")
        .run();
    let got = results(&run);
    for (name, result) in names.iter().zip(&got) {
        let expected = if name.eq_ignore_ascii_case("no_proxy") {
            ""
        } else {
            "http://127.0.0.1:3128"
        };
        assert_eq!(result["value"], expected, "{name}");
    }
}

#[test]
fn a_name_that_resolves_to_loopback_another_port_and_the_metadata_address_are_refused() {
    require!(clients());
    let up = Upstream::start();
    let dir = adapter_dir();
    let allow = format!("allow:localhost:{p},127.0.0.1:{p}", p = up.port);
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let other_port = other.local_addr().unwrap().port();
    let by_name = format!("http://localhost:{}/hello", up.port);
    let other_url = format!("http://127.0.0.1:{other_port}/hello");
    let metadata = "http://169.254.169.254/latest/meta-data/";
    let run = fetch(
        dir.path(),
        json!([
            ["curl", by_name],
            ["urllib", other_url],
            ["curl-tunnel", other_url],
            ["curl", metadata],
            ["curl-tunnel", metadata],
        ]),
        &["--network", &allow],
    )
    .run();
    let got = results(&run);
    // curl with --proxytunnel reports a refused CONNECT as its own failure (exit 56).
    for (i, result) in got.iter().enumerate() {
        let refused = result["http"] == "403" || result["exit"] == 56;
        assert!(refused, "step {i}: {result}");
    }
    assert!(
        got[0]["body"].as_str().unwrap().contains("loopback"),
        "{}",
        got[0]
    );
    // localhost is 127.0.0.1 and ::1: 127.0.0.1:PORT is listed, [::1]:PORT is not.
    assert!(
        got[0]["body"]
            .as_str()
            .unwrap()
            .contains(&format!("list [::1]:{} to allow it", up.port)),
        "the reason says what to list: {}",
        got[0]
    );
    assert_eq!(up.connections(), 0, "nothing reached the server");
    let net = network(&run);
    assert_eq!(net["allowed"], 0);
    assert_eq!(net["refused"], 5);
    let first = &net["connections"][0];
    assert_eq!(first["host"], "localhost");
    assert_eq!(first["allowed"], false);
    assert!(first["reason"].as_str().unwrap().contains("loopback"));
    assert_eq!(net["connections"][3]["host"], "169.254.169.254");
    drop(other);
}

#[test]
fn names_resolve_on_the_host_side_and_a_private_answer_is_refused() {
    require!(clients());
    let up = Upstream::start();
    let dir = adapter_dir();
    // The host side's resolver reads this hosts file (the debug build's test hook).
    let hosts = tempfile::tempdir().unwrap();
    std::fs::write(
        hosts.path().join("hosts"),
        "169.254.169.254 metadata.test\n10.1.2.3 private.test\n127.0.0.1 loop.test\n",
    )
    .unwrap();
    std::fs::write(hosts.path().join("resolv.conf"), "nameserver 127.0.0.1\n").unwrap();
    let resolver = format!("1:{}", hosts.path().display());
    let p = up.port;
    let allow = format!("allow:metadata.test:80,private.test:{p},loop.test:{p},127.0.0.1:{p}");
    let run = fetch(
        dir.path(),
        json!([
            ["curl", "http://metadata.test/latest/meta-data/"],
            ["curl", format!("http://private.test:{p}/hello")],
            ["urllib", format!("http://loop.test:{p}/hello")],
        ]),
        &["--network", &allow],
    )
    .env("PARENT_TOOL_DISPATCH_TEST_RESOLVER", &resolver)
    .run();
    let got = results(&run);
    assert_eq!(got[0]["http"], "403", "{}", got[0]);
    assert!(
        got[0]["body"].as_str().unwrap().contains("metadata"),
        "{}",
        got[0]
    );
    assert_eq!(got[1]["http"], "403", "{}", got[1]);
    assert!(
        got[1]["body"].as_str().unwrap().contains("private"),
        "{}",
        got[1]
    );
    // loop.test resolves to 127.0.0.1, and 127.0.0.1:PORT is listed literally: allowed.
    assert_eq!(got[2]["http"], "200", "{}", got[2]);
    assert_eq!(up.connections(), 1, "only the listed address was reached");
}

#[test]
fn a_client_that_ignores_the_proxy_has_no_route_and_no_dns() {
    require!(clients());
    let up = Upstream::start();
    let dir = adapter_dir();
    let allow = format!("allow:127.0.0.1:{}", up.port);
    let run = fetch(
        dir.path(),
        json!([
            ["direct", format!("127.0.0.1:{}", up.port)],
            ["getaddrinfo", "example.com"],
            ["getaddrinfo", "localhost"],
        ]),
        &["--network", &allow],
    )
    .run();
    let got = results(&run);
    assert_eq!(got[0]["error"], "ConnectionRefusedError", "{}", got[0]);
    assert_eq!(got[1]["error"], "gaierror", "{}", got[1]);
    // What needs no DNS still works: localhost is the namespace's own loopback.
    assert!(got[2]["addresses"].as_array().is_some(), "{}", got[2]);
    assert_eq!(up.connections(), 0);
    assert_eq!(network(&run)["connections"], json!([]));
}

#[test]
fn an_endless_upstream_is_bounded_by_the_call_and_by_the_byte_limit() {
    require!(clients());
    let up = Upstream::start();
    let dir = adapter_dir();
    let allow = format!("allow:127.0.0.1:{}", up.port);
    // The deadline: the adapter is stopped, the proxy ends with the call.
    let started = Instant::now();
    let run = fetch(
        dir.path(),
        json!([["curl", up.url("/endless")]]),
        &["--network", &allow],
    )
    .bridge(|b| b["dispatcher"]["timeout_ms"] = json!(2000))
    .run();
    run.expect("timeout", Some("dispatch_timeout"), 124);
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(
        up.all_closed(),
        "the endless connection was closed with the call"
    );
    let c = &network(&run)["connections"][0];
    assert_eq!(c["allowed"], true);
    // The byte limit: a 4 MiB answer under a 1 MiB limit is cut.
    let run = fetch(
        dir.path(),
        json!([
            ["curl", up.url(&format!("/bytes/{}", 4 << 20))],
            ["curl", up.url("/hello")]
        ]),
        &["--network", &allow, "--network-max-bytes", "1M"],
    )
    .run();
    let got = results(&run);
    assert_ne!(
        got[0]["exit"], 0,
        "a cut transfer is an error for curl: {}",
        got[0]
    );
    assert_eq!(got[1]["http"], "403", "the budget is spent: {}", got[1]);
    let net = network(&run);
    let cut = &net["connections"][0];
    assert!(
        cut["reason"]
            .as_str()
            .unwrap()
            .contains("network_max_bytes"),
        "{cut}"
    );
    assert!(cut["bytes_down"].as_u64().unwrap() <= 1 << 20, "{cut}");
    assert!(up.all_closed());
}

#[test]
fn a_policy_entry_allows_by_name_and_the_audit_record_counts() {
    require!(clients());
    let up = Upstream::start();
    let dir = adapter_dir();
    let work = tempfile::tempdir().unwrap();
    let ledger = work.path().join("ledger.db");
    let policy = work.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "version = 1\n\n[ledger]\npath = {ledger:?}\n\n[[tool]]\nmatch = \"workspace.read\"\n\
             fs_read = [{script:?}]\nnetwork = {{ allow = [\"127.0.0.1:{p}\"] }}\n\
             network_max_bytes = \"1M\"\n",
            p = up.port,
            script = dir.path(),
        ),
    )
    .unwrap();
    let run = fetch(
        dir.path(),
        json!([
            ["curl", up.url("/hello")],
            ["curl", up.url("/nope").replace(&up.port.to_string(), "1")]
        ]),
        &["--policy", policy.to_str().unwrap()],
    )
    .run();
    let got = results(&run);
    assert_eq!(got[0]["http"], "200", "{}", got[0]);
    assert_eq!(got[1]["http"], "403", "{}", got[1]);
    let exported = Cmd::new(["audit", "export", "--ledger", ledger.to_str().unwrap()]).run();
    exported.exit(0).stderr_empty().stdout_with(|text| {
        let record: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(record["network"], json!({"allowed": 1, "refused": 1}));
    });
    // `policy explain` shows the rules and the bound the proxy will use.
    let explained = Cmd::new(["policy", "explain", "--policy", policy.to_str().unwrap()])
        .args(["--parent-tool-bridge", &bridge(&[]).to_string(), "--json"])
        .stdin(request().to_string())
        .run();
    explained.exit(0).stderr_empty().stdout_json(|report| {
        assert_eq!(
            report["confinement"]["network"],
            json!({"allow": [format!("127.0.0.1:{}", up.port)], "max_bytes": 1 << 20}),
            "{report:#}"
        );
    });
}

#[test]
fn a_dispatcher_that_is_not_root_sets_the_proxy_up_in_its_user_namespace() {
    require!(clients());
    require!(skip::root());
    let up = Upstream::start();
    let (_dir, cmd) = super::host_reach::dispatcher_as_nobody(&["echo"]);
    let allow = format!("allow:127.0.0.1:{}", up.port);
    let out = cmd.args(["--network", allow.as_str()]).run();
    out.exit(0).stderr_empty();
    let envelope = out.json();
    let mechanisms = &envelope["diagnostics"]["dispatch"]["confinement"]["mechanisms"];
    assert!(
        mechanisms
            .as_array()
            .unwrap()
            .contains(&json!("user_namespace"))
            && mechanisms
                .as_array()
                .unwrap()
                .contains(&json!("network_proxy")),
        "{mechanisms}"
    );
    assert_eq!(
        envelope["diagnostics"]["dispatch"]["network"]["connections"],
        json!([])
    );
}

#[test]
fn malformed_allow_lists_are_usage_errors() {
    for (value, says) in [
        ("allow:", "no port"),
        ("allow:example.com", "no port"),
        ("allow:example.com:0", "not a port"),
        ("allow:*.example.com:70000", "not a port"),
        ("allow:a*.example.com:443", "whole first label"),
        ("allow:*:443", "`*` alone"),
    ] {
        let run = Dispatch::adapter(&["echo"])
            .args(&["--network", value])
            .run();
        run.output()
            .exit(2)
            .stdout_empty()
            .stderr_contains(format!("error[usage]: --network: `{value}`"))
            .stderr_contains(says);
    }
    let run = Dispatch::adapter(&["echo"])
        .args(&["--network-max-bytes", "1M"])
        .run();
    run.output()
        .exit(2)
        .stdout_empty()
        .stderr_contains("--network-max-bytes");
}

#[test]
fn adapter_mcp_refuses_an_allow_list_for_its_server() {
    Cmd::new([
        "adapter",
        "mcp",
        "--network",
        "allow:127.0.0.1:9",
        "--",
        "/bin/true",
    ])
    .run()
    .exit(2)
    .stdout_empty()
    .stderr_contains("error[usage]: --network allow: is not available for adapter mcp's server");
}

#[test]
fn a_proxy_that_cannot_be_set_up_fails_closed() {
    require!(confinable());
    // As another user the user namespace's step comes first and runs out of descriptors
    // before the proxy's (the note below names whichever step it was).
    require!(skip::root());
    // Three open files per process: the child's listener for the proxy cannot be made, so the
    // handoff step fails in the child and the adapter never runs.
    let run = Dispatch::adapter(&["echo"])
        .args(&["--network", "allow:127.0.0.1:1", "--limit-open-files", "3"])
        .run();
    run.expect("unavailable", Some("confinement_unavailable"), 69);
    assert_eq!(
        run.envelope["error"]["details"]["missing"],
        json!(["network_proxy"])
    );
    assert_eq!(run.dispatch()["adapter_started"], false);
    assert!(run.dispatch().get("network").is_none());
    run.output()
        .stderr_contains("confinement step network_proxy failed: Too many open files")
        .stderr_contains("note: the open-files limit (3: --limit-open-files")
        .stderr_contains("it left the network_proxy step none");
}

#[test]
fn delegation_run_gets_the_same_namespace_and_proxy() {
    require!(confinable());
    let up = Upstream::start();
    let ptd_test = test_bin().display().to_string();
    let request = json!({"goal": "g", "request_id": "hd-1"}).to_string();
    let allow = format!("allow:127.0.0.1:{}", up.port);
    let proxy = "connect:127.0.0.1:3128".to_string();
    let direct = format!("connect:127.0.0.1:{}", up.port);
    let out = Cmd::new([
        "delegation",
        "run",
        "--network",
        &allow,
        "--",
        &ptd_test,
        "adapter",
        &proxy,
        &direct,
        "exit:4",
    ])
    .stdin(request)
    .run();
    out.exit(1).stderr_starts_with(
        "error[wp_codebox_host_delegation_provider_result_invalid]: the host adapter exited with \
         status 4",
    );
    let envelope = out.json();
    assert_eq!(
        envelope["error"]["data"]["stderr_tail"],
        format!(
            "host-reach: connect=ok\nhost-reach: connect=refused({})\n",
            libc::ECONNREFUSED
        ),
        "{envelope:#}"
    );
    assert_eq!(up.connections(), 0);
}
