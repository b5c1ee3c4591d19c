//! `parent-tool-dispatch serve` (SPEC §19.2), as real processes on 127.0.0.1: each test starts
//! its own server on a free loopback port, talks to it over plain TCP (raw HTTP/1.1, so that
//! hostile clients can be played byte by byte), and stops it with SIGTERM, holding it to exit
//! 0, nothing on stdout and one JSON object per stderr line. After every hostile client a
//! well-formed request is answered promptly and the server has no child process left.

use crate::{bridge, request, Cmd, Dispatch};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

pub(crate) const TOKEN: &str = "test-token-0123456789";
const OTHER: &str = "other-token-0123456789";

/// A running server and where it listens.
pub(crate) struct Server {
    pub(crate) running: Option<crate::Running>,
    pub(crate) port: u16,
    pub(crate) dir: tempfile::TempDir,
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub(crate) fn write_private(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

impl Server {
    /// `serve` with this bridge, token file text and extra options; returns once `/healthz`
    /// answers.
    pub(crate) fn start(bridge: &Value, tokens: &str, extra: &[&str]) -> Server {
        Server::start_with(bridge, tokens, extra, &[])
    }

    /// [`Server::start`] with these variables in the server's environment.
    pub(crate) fn start_with(
        bridge: &Value,
        tokens: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let dir = tempfile::tempdir().unwrap();
        write_private(&dir.path().join("tokens"), tokens);
        std::fs::write(dir.path().join("bridge.json"), bridge.to_string()).unwrap();
        Server::start_in(dir, extra, env)
    }

    fn start_in(dir: tempfile::TempDir, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let bridge_arg = format!("@{}", dir.path().join("bridge.json").display());
        let tokens = dir.path().join("tokens");
        let mut args: Vec<String> = ["serve", "--listen", &listen, "--token-file"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.push(tokens.display().to_string());
        args.extend(["--parent-tool-bridge".to_string(), bridge_arg]);
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut cmd = Cmd::new(&args)
            .env_remove("PARENT_TOOL_DISPATCH_SESSION")
            .watchdog(Duration::from_secs(120));
        for (name, value) in env {
            cmd = cmd.env(name, value);
        }
        let running = cmd.spawn();
        let server = Server {
            running: Some(running),
            port,
            dir,
        };
        let until = Instant::now() + Duration::from_secs(20);
        let tls = extra.contains(&"--tls-cert");
        loop {
            // Up: an HTTP answer (a 503 names an unreachable ledger), or over TLS a connection.
            if tls && TcpStream::connect(("127.0.0.1", server.port)).is_ok() {
                return server;
            }
            if let Ok(reply) =
                server.try_send(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            {
                if !tls && (reply.status == 200 || reply.status == 503) {
                    return server;
                }
            }
            assert!(Instant::now() < until, "serve did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn pid(&self) -> i32 {
        self.running.as_ref().unwrap().pid().as_raw_nonzero().get()
    }

    pub(crate) fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream
    }

    pub(crate) fn try_send(&self, raw: &[u8]) -> std::io::Result<Reply> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        stream.write_all(raw)?;
        let mut out = Vec::new();
        stream.read_to_end(&mut out)?;
        Ok(Reply::parse(&out))
    }

    /// One raw request on its own connection, read to the connection's end.
    pub(crate) fn send(&self, raw: &[u8]) -> Reply {
        self.try_send(raw).unwrap()
    }

    /// `POST /v1/dispatch` with this token and body, and any extra header lines.
    pub(crate) fn post(&self, token: Option<&str>, body: &[u8], headers: &str) -> Reply {
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let mut raw = format!(
            "POST /v1/dispatch HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Type: application/json\r\n{auth}{headers}Content-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        raw.extend_from_slice(body);
        self.send(&raw)
    }

    pub(crate) fn get(&self, path: &str, token: Option<&str>) -> Reply {
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        self.send(
            format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{auth}\r\n").as_bytes(),
        )
    }

    /// A well-formed dispatch is answered within a few seconds, and no child is left after.
    pub(crate) fn still_serves(&self) {
        let started = Instant::now();
        let reply = self.post(Some(TOKEN), request().to_string().as_bytes(), "");
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(reply.json()["status"], "succeeded", "{}", reply.body);
        assert!(started.elapsed() < Duration::from_secs(10));
        self.no_children();
    }

    /// No process whose parent is the server (within a short settling time).
    pub(crate) fn no_children(&self) {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            let left = children(self.pid());
            if left.is_empty() {
                return;
            }
            assert!(Instant::now() < until, "children left: {left:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn signal(&self, signal: rustix::process::Signal) {
        self.running.as_ref().unwrap().signal(signal);
    }

    /// SIGTERM; the server exits 0 with nothing on stdout and JSON lines on stderr, which
    /// are returned.
    pub(crate) fn stop(mut self) -> Vec<Value> {
        let running = self.running.take().unwrap();
        running.signal(rustix::process::Signal::TERM);
        let out = running.wait();
        let mut lines = Vec::new();
        out.exit(0).stdout_empty().stderr_with(|err| {
            for line in err.lines() {
                let value: Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("not one JSON object: {line}: {e}"));
                assert!(value.is_object(), "{line}");
                assert!(!line.contains(TOKEN) && !line.contains(OTHER), "{line}");
                lines.push(value);
            }
        });
        lines
    }
}

pub(crate) fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(n) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
        let ppid = after
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<i32>().ok());
        if ppid == Some(pid) {
            out.push(n);
        }
    }
    out
}

/// One HTTP response.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) head: String,
    pub(crate) body: String,
}

impl Reply {
    pub(crate) fn parse(raw: &[u8]) -> Reply {
        let text = String::from_utf8_lossy(raw).to_string();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Reply {
            status,
            head: head.to_ascii_lowercase(),
            body: body.to_string(),
        }
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// The envelope without what differs from one run to the next.
pub(crate) fn steady(mut envelope: Value) -> Value {
    if let Some(d) = envelope["diagnostics"]["dispatch"].as_object_mut() {
        d.remove("duration_ms");
        d.remove("resources");
    }
    envelope
}

#[test]
fn serve_answers_exactly_as_the_main_job_and_refuses_what_it_must() {
    let bridge: Value =
        serde_json::from_str(&std::fs::read_to_string("fixtures/bridge.json").unwrap()).unwrap();
    let server = Server::start(
        &bridge,
        &format!("{TOKEN}\n"),
        &["--max-request-bytes", "4096"],
    );
    let body = std::fs::read("fixtures/request.json").unwrap();
    let reply = server.post(Some(TOKEN), &body, "Idempotency-Key: ptr_123\r\n");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.head.contains("content-type: application/json"));
    let main = Cmd::new([
        "--parent-tool-bridge",
        "@fixtures/bridge.json",
        "fixtures/request.json",
    ])
    .run();
    main.exit(0).stderr_empty();
    assert_eq!(steady(reply.json()), steady(main.json()));

    assert_eq!(server.post(None, &body, "").status, 401);
    assert_eq!(server.post(Some(OTHER), &body, "").status, 401);
    assert_eq!(server.get("/v1/other", Some(TOKEN)).status, 404);
    let wrong = server.get("/v1/dispatch", Some(TOKEN));
    assert_eq!(wrong.status, 405);
    assert!(wrong.head.contains("allow: post"));
    assert_eq!(server.post(Some(TOKEN), &[b' '; 5000], "").status, 413);
    for bad in [&b""[..], b"not json", b"{} {}", b"{\"a\":"] {
        assert_eq!(server.post(Some(TOKEN), bad, "").status, 400, "{bad:?}");
    }
    let mismatch = server.post(Some(TOKEN), &body, "Idempotency-Key: another\r\n");
    assert_eq!(mismatch.status, 400);
    // A JSON document that is not a request gets the main job's envelope.
    let invalid = server.post(Some(TOKEN), b"{\"x\":1}", "");
    assert_eq!(invalid.status, 200);
    assert_eq!(invalid.json()["error"]["code"], "request_invalid");

    let health = server.get("/healthz", None);
    assert_eq!(health.status, 200);
    assert_eq!(server.get("/metrics", None).status, 401);
    let metrics = server.get("/metrics", Some(TOKEN));
    assert_eq!(metrics.status, 200);
    for name in [
        "ptd_serve_dispatches_total{status=\"succeeded\",code=\"\"} 1",
        "ptd_serve_dispatches_total{status=\"failed\",code=\"request_invalid\"} 1",
        "ptd_serve_http_responses_total{code=\"401\"} 3",
        "ptd_serve_dispatch_duration_seconds_bucket{le=\"+Inf\"} 2",
        "ptd_serve_in_flight 0",
    ] {
        assert!(metrics.body.contains(name), "{name} in {}", metrics.body);
    }
    server.no_children();
    let lines = server.stop();
    assert_eq!(lines[0]["event"], "start");
    assert_eq!(lines.last().unwrap()["event"], "stop");
    let dispatched: Vec<&Value> = lines
        .iter()
        .filter(|l| l["route"] == "/v1/dispatch" && l["http_status"] == 200)
        .collect();
    assert_eq!(dispatched[0]["request_id"], "ptr_123");
    assert_eq!(dispatched[0]["tool"], "workspace.read");
    assert_eq!(dispatched[0]["status"], "succeeded");
    for line in &lines {
        let text = line.to_string();
        assert!(
            !text.contains("Hello from the host") && !text.contains("fixtures/"),
            "{text}"
        );
    }
}

#[test]
fn a_tokens_session_reaches_the_child() {
    let tokens = format!("{TOKEN} session=sandbox_123\n{OTHER} session=someone_else\n");
    let server = Server::start(&bridge(&["read-stdin", "echo"]), &tokens, &[]);
    let body = request().to_string();
    let own = server.post(Some(TOKEN), body.as_bytes(), "");
    assert_eq!(own.json()["status"], "succeeded", "{}", own.body);
    let other = server.post(Some(OTHER), body.as_bytes(), "");
    assert_eq!(other.status, 200);
    assert_eq!(
        other.json()["error"]["code"],
        "session_mismatch",
        "{}",
        other.body
    );
    let lines = server.stop();
    assert!(lines
        .iter()
        .any(|l| l["session"] == "someone_else" && l["code"] == "session_mismatch"));
}

#[test]
fn the_in_flight_limit_answers_503_and_sigterm_drains() {
    let server = Server::start(
        &bridge(&["read-stdin", "sleep:1500", "echo"]),
        &format!("{TOKEN}\n"),
        &["--max-in-flight", "1"],
    );
    let port = server.port;
    let first = std::thread::spawn(move || {
        let body = request().to_string();
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let raw = format!("POST /v1/dispatch HTTP/1.1\r\nHost: t\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        stream.write_all(raw.as_bytes()).unwrap();
        let mut out = Vec::new();
        stream.read_to_end(&mut out).unwrap();
        Reply::parse(&out)
    });
    let until = Instant::now() + Duration::from_secs(10);
    while !server
        .get("/metrics", Some(TOKEN))
        .body
        .contains("ptd_serve_in_flight 1")
    {
        assert!(Instant::now() < until, "the first request never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    let busy = server.post(Some(TOKEN), request().to_string().as_bytes(), "");
    assert_eq!(busy.status, 503);
    assert!(busy.head.contains("retry-after: 1"));
    // SIGTERM while the first is in flight: it is answered, then the server exits 0.
    server.signal(rustix::process::Signal::TERM);
    let reply = first.join().unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json()["status"], "succeeded", "{}", reply.body);
    let running = {
        let mut s = server;
        s.running.take().unwrap()
    };
    running
        .wait()
        .exit(0)
        .stdout_empty()
        .stderr_contains("\"event\":\"stop\"");
}

#[test]
fn a_drain_that_runs_out_stops_the_child_and_answers_internal_error() {
    let server = Server::start(
        &bridge(&["read-stdin", "sleep:20000", "echo"]),
        &format!("{TOKEN}\n"),
        &["--drain-ms", "300", "--kill-grace-ms", "200"],
    );
    let port = server.port;
    let first = std::thread::spawn(move || {
        let body = request().to_string();
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let raw = format!("POST /v1/dispatch HTTP/1.1\r\nHost: t\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        stream.write_all(raw.as_bytes()).unwrap();
        let mut out = Vec::new();
        stream.read_to_end(&mut out).unwrap();
        Reply::parse(&out)
    });
    let until = Instant::now() + Duration::from_secs(10);
    while children(server.pid()).is_empty() {
        assert!(Instant::now() < until, "no child dispatcher started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let started = Instant::now();
    let lines = server.stop();
    assert!(started.elapsed() < Duration::from_secs(10));
    let reply = first.join().unwrap();
    assert_eq!(reply.status, 200);
    // The child dispatcher forwards SIGTERM to its adapter and still prints its envelope.
    assert_ne!(reply.json()["status"], "succeeded", "{}", reply.body);
    assert_eq!(lines.last().unwrap()["event"], "stop");
}

#[test]
fn sighup_reloads_the_tokens_and_keeps_them_when_the_file_is_broken() {
    let server = Server::start(&bridge(&["read-stdin", "echo"]), &format!("{TOKEN}\n"), &[]);
    let tokens = server.dir.path().join("tokens");
    write_private(&tokens, &format!("{OTHER}\n"));
    server.signal(rustix::process::Signal::HUP);
    wait_for(|| server.get("/metrics", Some(OTHER)).status == 200);
    assert_eq!(server.get("/metrics", Some(TOKEN)).status, 401);
    // Broken: a short token, then a file others may write. The old token stays.
    for (text, mode) in [("short\n", 0o600), (&*format!("{TOKEN}\n"), 0o666)] {
        std::fs::write(&tokens, text).unwrap();
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(mode)).unwrap();
        server.signal(rustix::process::Signal::HUP);
        wait_for(|| {
            server
                .get("/metrics", Some(OTHER))
                .body
                .contains("ptd_serve_reloads_refused_total")
        });
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(server.get("/metrics", Some(OTHER)).status, 200);
        assert_eq!(server.get("/metrics", Some(TOKEN)).status, 401);
    }
    let lines = server.stop();
    let refused: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "reload_refused")
        .collect();
    assert_eq!(refused.len(), 2, "{lines:?}");
    assert!(refused[0]["error"].as_str().unwrap().contains("line 1"));
}

pub(crate) fn wait_for(check: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < until, "the condition never held");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_refused_start_exits_2_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    write_private(&tokens, &format!("{TOKEN}\nshort session=x\n"));
    let port = free_port().to_string();
    let listen = format!("127.0.0.1:{port}");
    Cmd::new(["serve", "--listen", &listen, "--token-file"])
        .arg(&tokens)
        .args(["--parent-tool-bridge", "@fixtures/bridge.json"])
        .run()
        .exit(2)
        .stdout_empty()
        .stderr_contains("\"event\":\"refused\"")
        .stderr_contains("token file line 2:")
        .stderr_lacks(TOKEN);
}

#[test]
fn the_main_jobs_host_endpoint_mode_talks_to_serve() {
    let server = Server::start(&bridge(&["read-stdin", "echo"]), &format!("{TOKEN}\n"), &[]);
    let mut endpoint = bridge(&[]);
    let d = &mut endpoint["dispatcher"];
    d["mode"] = json!("host_endpoint");
    d.as_object_mut().unwrap().remove("command");
    d["endpoint"] =
        json!({"url_env": "PTD_SERVE_URL", "method": "POST", "token_env": "PTD_SERVE_TOKEN"});
    let url = format!("http://127.0.0.1:{}/v1/dispatch", server.port);
    let run = Dispatch::with_bridge(endpoint)
        .env("PTD_SERVE_URL", &url)
        .env("PTD_SERVE_TOKEN", TOKEN)
        .run();
    assert_eq!(run.status(), "succeeded");
    server.stop();
}

#[test]
fn hostile_clients_do_not_hold_the_server() {
    let server = Server::start(
        &bridge(&["read-stdin", "echo"]),
        &format!("{TOKEN}\n"),
        &[
            "--body-timeout-ms",
            "1000",
            "--header-timeout-ms",
            "2000",
            "--max-request-bytes",
            "65536",
        ],
    );
    // Slowloris: a header a byte at a time, every 200 ms, while a real request is served.
    let port = server.port;
    let slow = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let started = Instant::now();
        for byte in b"GET /healthz HTTP/1.1\r\nHost: slow\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaa\r\n"
        {
            if stream.write_all(&[*byte]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let mut out = Vec::new();
        let _ = stream.read_to_end(&mut out);
        started.elapsed()
    });
    std::thread::sleep(Duration::from_millis(300));
    server.still_serves();
    let held = slow.join().unwrap();
    assert!(
        held < Duration::from_secs(8),
        "the slow client was held {held:?}"
    );

    // A body that never ends is cut at the body timeout.
    let mut stream = server.connect();
    stream
        .write_all(format!("POST /v1/dispatch HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 1000\r\n\r\n{{\"a\":").as_bytes())
        .unwrap();
    let started = Instant::now();
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    assert_eq!(Reply::parse(&out).status, 408);
    assert!(started.elapsed() < Duration::from_secs(5));
    server.still_serves();

    // A 100 MiB body: refused by its length, never read.
    let mut stream = server.connect();
    let head = format!("POST /v1/dispatch HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n", 100u64 << 20);
    stream.write_all(head.as_bytes()).unwrap();
    let _ = stream.write_all(&vec![b' '; 1 << 20]);
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    assert_eq!(Reply::parse(&out).status, 413);
    // The same without a length (chunked): cut at the limit.
    let mut stream = server.connect();
    let head = format!("POST /v1/dispatch HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let chunk = format!("{:x}\r\n{}\r\n", 1 << 16, " ".repeat(1 << 16));
    for _ in 0..1600 {
        if stream.write_all(chunk.as_bytes()).is_err() {
            break;
        }
    }
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    assert_eq!(Reply::parse(&out).status, 413);
    server.still_serves();

    // Pipelined: two requests in one write, two answers in order.
    let mut stream = server.connect();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\nGET /nothing HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out);
    let first = text.find("HTTP/1.1 200").unwrap();
    let second = text.find("HTTP/1.1 404").unwrap();
    assert!(first < second, "{text}");

    // Malformed request lines.
    for bad in [
        &b"GARBAGE\r\n\r\n"[..],
        b"GET / HTTP/9.9\r\n\r\n",
        b"\x00\x01\x02\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nBad Header\r\n\r\n",
    ] {
        let mut stream = server.connect();
        let _ = stream.write_all(bad);
        let mut out = Vec::new();
        let _ = stream.read_to_end(&mut out);
        let status = Reply::parse(&out).status;
        assert!(
            status == 400 || status == 505 || out.is_empty(),
            "{bad:?}: {status}"
        );
    }
    server.still_serves();

    // 200 connections at once, each then asking for /healthz.
    let mut streams: Vec<TcpStream> = (0..200).map(|_| server.connect()).collect();
    for stream in &mut streams {
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
    }
    for stream in &mut streams {
        let mut out = Vec::new();
        stream.read_to_end(&mut out).unwrap();
        assert_eq!(Reply::parse(&out).status, 200);
    }
    server.still_serves();
    server.stop();
}
