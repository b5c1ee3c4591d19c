//! The `host_endpoint` mode (SPEC §11), against real HTTP(S) servers on 127.0.0.1 run by the
//! test itself: what is sent, what is never sent, the deadline, signals, sizes, redirects,
//! status rules, TLS verification, and the token staying out of every output.

use super::*;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

pub(super) const URL_ENV: &str = "PTD_TEST_ENDPOINT_URL";
pub(super) const TOKEN_ENV: &str = "PTD_TEST_ENDPOINT_TOKEN";
pub(super) const TOKEN: &str = "ptd-endpoint-token-9f8e7d6c5b4a3210";
/// A path that must never be shown (only the origin may be).
pub(super) const SECRET_PATH: &str = "/hooks/private-path-5c1d9e";
/// Longest any server here keeps a connection open.
pub(super) const SERVER_BOUND: Duration = Duration::from_secs(20);
const MARGIN: Duration = Duration::from_millis(2500);

/// One request as the server read it.
#[derive(Debug, Clone)]
pub(super) struct Received {
    method: String,
    target: String,
    /// Header names lower-cased.
    pub(super) headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

/// What the server does with a request.
pub(super) enum Reply {
    /// Answer with this status, extra headers and body (with a Content-Length).
    With(u16, Vec<(String, String)>, Vec<u8>),
    /// Never answer; keep the connection open.
    Silence,
    /// Send the status line and headers, then the body one byte every 100 ms.
    Trickle,
    /// A 200 without a length, then bytes until the client goes away.
    Endless,
}

type Handler = Arc<dyn Fn(&Received) -> Reply + Send + Sync>;

/// A small threaded HTTP/1.1 server on 127.0.0.1, plain or TLS.
pub(super) struct Server {
    pub(super) port: u16,
    tls: bool,
    received: Arc<Mutex<Vec<Received>>>,
    connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    pub(super) fn start(handler: impl Fn(&Received) -> Reply + Send + Sync + 'static) -> Server {
        Server::launch(Arc::new(handler), None)
    }

    pub(super) fn start_tls(
        tls: Arc<rustls::ServerConfig>,
        handler: impl Fn(&Received) -> Reply + Send + Sync + 'static,
    ) -> Server {
        Server::launch(Arc::new(handler), Some(tls))
    }

    fn launch(handler: Handler, tls: Option<Arc<rustls::ServerConfig>>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let is_tls = tls.is_some();
        let accept = {
            let (received, connections, stop) =
                (received.clone(), connections.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    connections.fetch_add(1, Ordering::SeqCst);
                    let (handler, received, stop, tls) =
                        (handler.clone(), received.clone(), stop.clone(), tls.clone());
                    std::thread::spawn(move || {
                        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                        let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
                        match tls {
                            None => serve(stream, &*handler, &received, &stop),
                            Some(config) => {
                                let Ok(conn) = rustls::ServerConnection::new(config) else {
                                    return;
                                };
                                let tls = rustls::StreamOwned::new(conn, stream);
                                serve(tls, &*handler, &received, &stop)
                            }
                        }
                    });
                }
            })
        };
        Server {
            port,
            tls: is_tls,
            received,
            connections,
            stop,
            accept: Some(accept),
        }
    }

    pub(super) fn origin(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    pub(super) fn url(&self) -> String {
        format!("{}{SECRET_PATH}?sig=url-signature-77aa", self.origin())
    }

    pub(super) fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    pub(super) fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn serve(
    mut stream: impl Read + Write,
    handler: &(dyn Fn(&Received) -> Reply + Send + Sync),
    received: &Mutex<Vec<Received>>,
    stop: &AtomicBool,
) {
    let Some(request) = read_request(&mut stream) else {
        return;
    };
    received.lock().unwrap().push(request.clone());
    let started = Instant::now();
    let going = || !stop.load(Ordering::SeqCst) && started.elapsed() < SERVER_BOUND;
    match handler(&request) {
        Reply::With(status, headers, body) => {
            let mut head = format!(
                "HTTP/1.1 {status} Whatever\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
            let _ = stream.flush();
        }
        Reply::Silence => {
            while going() {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Reply::Trickle => {
            let head = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\nConnection: close\r\n\r\n";
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.flush();
            while going() {
                if stream
                    .write_all(b" ")
                    .and_then(|()| stream.flush())
                    .is_err()
                {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Reply::Endless => {
            let head = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n";
            let _ = stream.write_all(head.as_bytes());
            let chunk = vec![b' '; 64 * 1024];
            while going() {
                if stream.write_all(&chunk).is_err() {
                    return;
                }
            }
        }
    }
}

/// Read one request: headers, then a Content-Length body.
fn read_request(stream: &mut impl Read) -> Option<Received> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if buf.len() > 64 * 1024 || stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).ok()?;
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, target) = (first.next()?.to_string(), first.next()?.to_string());
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).ok()?;
    Some(Received {
        method,
        target,
        headers,
        body,
    })
}

/// A result envelope answering `request` with `status` (and an error for failures).
pub(super) fn answer(request: &Received, status: &str, output: Value) -> Vec<u8> {
    let req: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let mut env = json!({
        "schema": "wp-codebox/parent-tool-result/v1",
        "version": 1,
        "request_id": req["request_id"],
        "tool": req["tool"],
        "operation": req["operation"],
        "status": status,
        "output": output,
        "artifacts": {"transcripts": [], "evidence": []},
        "diagnostics": {},
        "metadata": {}
    });
    if status != "succeeded" {
        env["error"] =
            json!({"code": "forbidden_by_host", "message": "the host said no", "retryable": false});
    }
    env.to_string().into_bytes()
}

pub(super) fn ok_answer(request: &Received) -> Reply {
    Reply::With(
        200,
        vec![("Content-Type".into(), "application/json".into())],
        answer(
            request,
            "succeeded",
            json!({"contents": "hello from the endpoint"}),
        ),
    )
}

/// A `host_endpoint` bridge named by the test variables, with this timeout.
pub(super) fn endpoint_bridge(timeout_ms: u64) -> Value {
    let mut b = bridge(&[]);
    let d = &mut b["dispatcher"];
    d["mode"] = json!("host_endpoint");
    d.as_object_mut().unwrap().remove("command");
    d["endpoint"] = json!({"url_env": URL_ENV, "method": "POST", "token_env": TOKEN_ENV});
    d["timeout_ms"] = json!(timeout_ms);
    b
}

/// A dispatch to `url` with the token set.
pub(super) fn to(url: &str, timeout_ms: u64) -> Dispatch {
    Dispatch::with_bridge(endpoint_bridge(timeout_ms))
        .env(URL_ENV, url)
        .env(TOKEN_ENV, TOKEN)
}

/// Nothing of the token or the URL beyond its origin in what the run printed.
pub(super) fn assert_no_secrets(run: &Run) {
    for text in [&run.stdout, &run.stderr] {
        assert!(!text.contains(TOKEN), "the token leaked: {text}");
        assert!(!text.contains(SECRET_PATH), "the URL path leaked: {text}");
        assert!(
            !text.contains("url-signature"),
            "the URL query leaked: {text}"
        );
    }
}

pub(super) fn stderr_line(run: &Run) -> &str {
    run.stderr.trim_end()
}

#[test]
fn posts_the_validated_request_with_its_headers_and_returns_the_answer() {
    let server = Server::start(ok_answer);
    let run = to(&server.url(), 10_000)
        .args(&["--tool-map", "provider-safe"])
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(run.stderr, "");
    // The printed envelope carries the canonical id; the endpoint saw the mapped one.
    assert_eq!(run.envelope["tool"], "workspace.read");
    assert_eq!(
        run.envelope["output"]["contents"],
        "hello from the endpoint"
    );
    let got = server.received();
    assert_eq!(got.len(), 1, "{got:?}");
    let r = &got[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.target, format!("{SECRET_PATH}?sig=url-signature-77aa"));
    let h = |name: &str| r.headers.get(name).map(String::as_str);
    assert_eq!(h("content-type"), Some("application/json"));
    assert_eq!(h("accept"), Some("application/json"));
    assert_eq!(
        h("user-agent"),
        Some(concat!("parent-tool-dispatch/", env!("CARGO_PKG_VERSION")))
    );
    assert_eq!(h("idempotency-key"), Some("ptr_123"));
    assert_eq!(h("authorization"), Some(format!("Bearer {TOKEN}").as_str()));
    assert_eq!(h("accept-encoding"), None, "no compression is offered");
    assert_eq!(
        h("host"),
        Some(format!("127.0.0.1:{}", server.port).as_str())
    );
    let sent: Value = serde_json::from_slice(&r.body).unwrap();
    let mut want = request();
    want["tool"] = json!("workspace_read");
    assert_eq!(sent, want);
    let d = run.dispatch();
    assert_eq!(d["transport"], "http");
    assert_eq!(d["endpoint"], server.origin());
    assert_eq!(d["http_status"], 200);
    assert_eq!(d["response_bytes"], answer_len(r));
    assert_eq!(d["timeout_ms"], 10_000);
    assert!(d["duration_ms"].is_u64());
    assert_eq!(d.get("exit_code"), None, "no process ran");
    assert_no_secrets(&run);
}

fn answer_len(r: &Received) -> usize {
    answer(
        r,
        "succeeded",
        json!({"contents": "hello from the endpoint"}),
    )
    .len()
}

#[test]
fn a_bridge_without_a_token_sends_no_authorization() {
    let server = Server::start(ok_answer);
    let mut b = endpoint_bridge(10_000);
    b["dispatcher"]["endpoint"] = json!({"url_env": URL_ENV});
    let run = Dispatch::with_bridge(b)
        .env(URL_ENV, &format!("http://localhost:{}/", server.port))
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(run.stderr, "");
    assert_eq!(
        run.dispatch()["endpoint"],
        format!("http://localhost:{}", server.port)
    );
    let got = server.received();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].headers.get("authorization"), None);
    assert_eq!(got[0].target, "/");
}

#[test]
fn denials_and_invalid_requests_never_connect() {
    let server = Server::start(ok_answer);
    let run = to(&server.url(), 10_000)
        .request(|r| r["tool"] = json!("workspace.write"))
        .run();
    run.expect("denied", Some("tool_not_allowed"), 77);
    assert!(
        stderr_line(&run).starts_with("error[tool_not_allowed]:"),
        "{}",
        run.stderr
    );

    let run = to(&server.url(), 10_000)
        .request(|r| {
            r.as_object_mut().unwrap().remove("sandbox_session");
        })
        .run();
    run.expect("failed", Some("request_invalid"), 65);
    assert!(
        stderr_line(&run).starts_with("error[request_invalid]:"),
        "{}",
        run.stderr
    );

    let run = to(&server.url(), 10_000)
        .request(|r| r["metadata"]["bridge_ref"] = json!("sha256:0000"))
        .run();
    run.expect("denied", Some("bridge_ref_mismatch"), 77);
    assert!(
        stderr_line(&run).starts_with("error[bridge_ref_mismatch]:"),
        "{}",
        run.stderr
    );

    assert_eq!(server.connections(), 0, "nothing may reach the endpoint");
}

#[test]
fn the_ca_cert_path_goes_to_stderr_only() {
    let run = to("https://127.0.0.1:9/", 10_000)
        .args(&["--ca-cert", "/nonexistent/ptd-ca.pem"])
        .run();
    run.expect("unavailable", Some("endpoint_unconfigured"), 69);
    assert!(
        run.stderr.contains("/nonexistent/ptd-ca.pem"),
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains("ptd-ca.pem"), "{}", run.stdout);
}

#[test]
fn a_refused_connection_is_unreachable_and_retryable() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let run = to(&format!("http://127.0.0.1:{port}{SECRET_PATH}"), 10_000).run();
    run.expect("unavailable", Some("endpoint_unreachable"), 69);
    assert_eq!(run.envelope["error"]["retryable"], true);
    let message = run.envelope["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("http://127.0.0.1:{port}")),
        "{message}"
    );
    assert!(message.contains("refused"), "{message}");
    assert_eq!(
        run.envelope["error"]["details"]["reason"],
        "connection_refused"
    );
    assert_eq!(
        stderr_line(&run),
        format!("error[endpoint_unreachable]: {message}")
    );
    assert_eq!(
        run.dispatch()["endpoint"],
        format!("http://127.0.0.1:{port}")
    );
    assert_eq!(run.dispatch().get("http_status"), None);
    assert_no_secrets(&run);
}

#[test]
fn a_server_that_never_answers_is_a_timeout_within_the_deadline() {
    let server = Server::start(|_| Reply::Silence);
    let run = to(&server.url(), 700).run();
    run.expect("timeout", Some("dispatch_timeout"), 124);
    assert_eq!(run.envelope["error"]["retryable"], true);
    assert!(
        run.elapsed < Duration::from_millis(700) + MARGIN,
        "{:?}",
        run.elapsed
    );
    assert!(
        stderr_line(&run)
            .starts_with("error[dispatch_timeout]: the endpoint did not answer within 700 ms"),
        "{}",
        run.stderr
    );
    assert_eq!(server.received().len(), 1, "the request did arrive");
    assert_no_secrets(&run);
}

#[test]
fn a_trickling_server_cannot_stretch_the_deadline() {
    let server = Server::start(|_| Reply::Trickle);
    let run = to(&server.url(), 1000).run();
    run.expect("timeout", Some("dispatch_timeout"), 124);
    assert!(
        run.elapsed < Duration::from_millis(1000) + MARGIN,
        "{:?}",
        run.elapsed
    );
    assert!(
        stderr_line(&run).starts_with("error[dispatch_timeout]:"),
        "{}",
        run.stderr
    );
    assert_eq!(run.dispatch()["http_status"], 200);
}

#[test]
fn error_statuses_without_an_envelope_are_endpoint_http_status() {
    let server = Server::start(
        |r| match r.headers.get("idempotency-key").map(String::as_str) {
            Some("s503") => Reply::With(503, vec![], b"<html>busy</html>".to_vec()),
            Some("s404") => Reply::With(404, vec![], b"not here".to_vec()),
            Some("s429") => Reply::With(429, vec![], vec![]),
            // A "succeeded" envelope under an error status is no answer either.
            _ => Reply::With(500, vec![], answer(r, "succeeded", json!({}))),
        },
    );
    for (id, http, status, retryable, exit) in [
        ("s503", 503, "unavailable", true, 69),
        ("s429", 429, "unavailable", true, 69),
        ("s404", 404, "failed", false, 1),
        ("s500", 500, "unavailable", true, 69),
    ] {
        let run = to(&server.url(), 10_000)
            .request(|r| r["request_id"] = json!(id))
            .run();
        run.expect(status, Some("endpoint_http_status"), exit);
        assert_eq!(run.envelope["error"]["retryable"], retryable, "{id}");
        assert_eq!(
            run.envelope["error"]["details"]["http_status"], http,
            "{id}"
        );
        assert_eq!(run.envelope["request_id"], id);
        assert_eq!(run.envelope.get("output"), None, "{id}: no payload");
        assert_eq!(run.dispatch()["http_status"], http, "{id}");
        let message = run.envelope["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("HTTP {http}")), "{message}");
        assert!(
            stderr_line(&run).starts_with("error[endpoint_http_status]:"),
            "{}",
            run.stderr
        );
        assert_no_secrets(&run);
    }
}

#[test]
fn an_error_status_with_a_failure_envelope_is_that_envelope() {
    let server = Server::start(|r| Reply::With(403, vec![], answer(r, "denied", json!(null))));
    let run = to(&server.url(), 10_000).run();
    run.expect("denied", Some("forbidden_by_host"), 77);
    assert_eq!(run.envelope["error"]["message"], "the host said no");
    assert_eq!(run.dispatch()["http_status"], 403);
    assert_eq!(
        stderr_line(&run),
        "error[forbidden_by_host]: the host said no"
    );
}

#[test]
fn a_two_hundred_without_an_envelope_is_result_invalid() {
    let server = Server::start(|_| Reply::With(200, vec![], b"<html>welcome</html>".to_vec()));
    let run = to(&server.url(), 10_000).run();
    run.expect("failed", Some("result_invalid"), 1);
    assert_eq!(run.issue_codes(), ["json_syntax"]);
    assert!(
        stderr_line(&run).starts_with("error[result_invalid]:"),
        "{}",
        run.stderr
    );
}

#[test]
fn redirects_are_never_followed() {
    let elsewhere = Server::start(ok_answer);
    let target = elsewhere.url();
    let server = Server::start(move |r| {
        let status = if r.headers.get("idempotency-key").map(String::as_str) == Some("r307") {
            307
        } else {
            302
        };
        Reply::With(status, vec![("Location".into(), target.clone())], vec![])
    });
    for (id, http) in [("r302", 302), ("r307", 307)] {
        let run = to(&server.url(), 10_000)
            .request(|r| r["request_id"] = json!(id))
            .run();
        run.expect("failed", Some("endpoint_http_status"), 1);
        assert_eq!(run.envelope["error"]["retryable"], false);
        assert_eq!(run.envelope["error"]["details"]["http_status"], http);
        let message = run.envelope["error"]["message"].as_str().unwrap();
        assert!(message.contains("never followed"), "{message}");
        assert!(
            stderr_line(&run).starts_with("error[endpoint_http_status]:"),
            "{}",
            run.stderr
        );
    }
    assert_eq!(server.received().len(), 2);
    assert_eq!(
        elsewhere.connections(),
        0,
        "the redirect target received nothing"
    );
}

#[test]
fn an_oversized_answer_is_result_too_large() {
    let server = Server::start(|_| Reply::With(200, vec![], vec![b' '; 5000]));
    let run = to(&server.url(), 10_000)
        .args(&["--max-output-bytes", "1000"])
        .run();
    run.expect("failed", Some("result_too_large"), 1);
    assert_eq!(run.envelope["error"]["details"]["max_output_bytes"], 1000);
    assert!(
        stderr_line(&run).starts_with("error[result_too_large]: the endpoint's answer is over"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_endless_answer_is_cut_at_the_cap_not_read_to_its_end() {
    // No length, and the body never ends: reading it all would only stop at the deadline.
    let server = Server::start(|_| Reply::Endless);
    let run = to(&server.url(), 15_000)
        .args(&["--max-output-bytes", "200000"])
        .run();
    run.expect("failed", Some("result_too_large"), 1);
    assert!(run.elapsed < Duration::from_secs(10), "{:?}", run.elapsed);
    let read = run.dispatch()["response_bytes"].as_u64().unwrap();
    assert!(read > 200_000 && read <= 200_000 + 64 * 1024, "{read}");
}

#[test]
fn a_signal_while_waiting_for_the_endpoint_is_interrupted() {
    let server = Server::start(|_| Reply::Silence);
    let running = Cmd::new(["--parent-tool-bridge", &endpoint_bridge(20_000).to_string()])
        .env(URL_ENV, server.url())
        .env(TOKEN_ENV, TOKEN)
        .stdin(request().to_string())
        .spawn();
    let until = Instant::now() + Duration::from_secs(10);
    while server.received().is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(server.received().len(), 1, "the request arrived");
    let sent = Instant::now();
    running.signal(rustix::process::Signal::TERM);
    let out = running.wait();
    assert!(sent.elapsed() < MARGIN, "{:?}", sent.elapsed());
    let envelope = out
        .exit(1)
        .stderr_eq(
            "error[interrupted]: the dispatcher received SIGTERM while waiting for the endpoint\n",
        )
        .json();
    assert_eq!(envelope["status"], "failed", "{envelope}");
    assert_eq!(envelope["error"]["code"], "interrupted");
    assert_eq!(envelope["error"]["retryable"], true);
    assert_eq!(envelope["error"]["details"]["signal"], "SIGTERM");
}

#[test]
fn the_token_and_the_url_never_leave_even_when_the_endpoint_echoes_them() {
    // The endpoint repeats what it received everywhere it can: output, error, diagnostics.
    let server = Server::start(|r| {
        let auth = r.headers.get("authorization").cloned().unwrap_or_default();
        let raw_token = auth.trim_start_matches("Bearer ").to_string();
        // The URL exactly as the dispatcher used it.
        let url = format!("http://{}{}", r.headers["host"], r.target);
        let echoed = json!({"auth": auth, "token": raw_token, "url": url});
        let status = if r.headers.get("idempotency-key").map(String::as_str) == Some("fail") {
            "failed"
        } else {
            "succeeded"
        };
        let mut env: Value = serde_json::from_slice(&answer(r, status, echoed.clone())).unwrap();
        env["diagnostics"] = json!({"seen": echoed});
        if status == "failed" {
            env["error"]["message"] = json!(format!("rejected {raw_token}"));
        }
        let http = if status == "failed" { 422 } else { 200 };
        Reply::With(http, vec![], env.to_string().into_bytes())
    });
    for id in ["ok", "fail"] {
        let dir = tempfile::tempdir().unwrap();
        let result_file = dir.path().join("result.json");
        let run = to(&server.url(), 10_000)
            .request(|r| r["request_id"] = json!(id))
            .args(&[
                "--artifact-dir",
                dir.path().to_str().unwrap(),
                "--result-file",
                result_file.to_str().unwrap(),
            ])
            .run();
        if id == "ok" {
            run.expect("succeeded", None, 0);
            assert_eq!(run.stderr, "");
        } else {
            run.expect("failed", Some("forbidden_by_host"), 1);
            assert!(
                stderr_line(&run).starts_with("error[forbidden_by_host]: rejected"),
                "{}",
                run.stderr
            );
        }
        assert_no_secrets(&run);
        let transcript =
            std::fs::read_to_string(dir.path().join(format!("files/parent-tools/{id}.json")))
                .unwrap();
        let written = std::fs::read_to_string(&result_file).unwrap();
        for (what, text) in [("transcript", &transcript), ("result file", &written)] {
            assert!(!text.contains(TOKEN), "the token is in the {what}: {text}");
            assert!(
                !text.contains(SECRET_PATH),
                "the URL is in the {what}: {text}"
            );
        }
        let doc: Value = serde_json::from_str(&transcript).unwrap();
        assert_eq!(
            doc["tool_calls"][0]["metadata"]["dispatch"]["transport"],
            "http"
        );
    }
    // It did travel where it belongs.
    let got = server.received();
    assert!(got
        .iter()
        .all(|r| r.headers.get("authorization") == Some(&format!("Bearer {TOKEN}"))));
}

#[test]
fn sandbox_env_never_shows_the_endpoint() {
    Cmd::new(["sandbox-env", "--parent-tool-bridge"])
        .arg(endpoint_bridge(10_000).to_string())
        .env(URL_ENV, format!("https://example.invalid{SECRET_PATH}"))
        .env(TOKEN_ENV, TOKEN)
        .run()
        .exit(0)
        .stdout_contains("WP_CODEBOX_PARENT_TOOL_DISPATCH_MODE=host_endpoint\n")
        .stdout_with(|stdout| assert_eq!(stdout.lines().count(), 5, "{stdout}"))
        .stdout_lacks(TOKEN)
        .stdout_lacks(SECRET_PATH)
        .stdout_lacks(URL_ENV)
        .stderr_empty();
}

#[test]
fn proxy_variables_are_not_used() {
    // A proxy would see the bearer token of a plain-http loopback endpoint.
    let proxy = Server::start(ok_answer);
    let server = Server::start(ok_answer);
    let proxy_url = format!("http://127.0.0.1:{}", proxy.port);
    let mut dispatch = to(&server.url(), 10_000)
        .env("NO_PROXY", "")
        .env("no_proxy", "");
    for name in [
        "ALL_PROXY",
        "all_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
    ] {
        dispatch = dispatch.env(name, &proxy_url);
    }
    let run = dispatch.run();
    run.expect("succeeded", None, 0);
    assert_eq!(run.stderr, "");
    assert_eq!(server.received().len(), 1);
    assert_eq!(proxy.connections(), 0, "the proxy saw nothing");
}

#[test]
fn the_contracts_example_bridge_dispatches_to_its_endpoint() {
    let server = Server::start(ok_answer);
    let run = Dispatch::with_bridge(Value::Null)
        .raw_bridge(Some("@fixtures/upstream/example-bridge.host_endpoint.json"))
        .env("WP_CODEBOX_PARENT_TOOL_ENDPOINT", &server.url())
        .env("WP_CODEBOX_PARENT_TOOL_TOKEN", TOKEN)
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(run.stderr, "");
    assert_eq!(run.dispatch()["timeout_ms"], 30_000);
    let got = server.received();
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].headers.get("authorization"),
        Some(&format!("Bearer {TOKEN}"))
    );
    assert_no_secrets(&run);
}

#[test]
fn an_endpoint_that_echoes_its_path_and_query_never_shows_them() {
    // What frameworks' error pages and handlers send back: the request target, the path
    // without the query, a query value — never the absolute URL.
    let server = Server::start(|r| {
        let path = r.target.split('?').next().unwrap_or_default().to_string();
        let sig = r
            .target
            .split("sig=")
            .nth(1)
            .unwrap_or_default()
            .to_string();
        let failure = |http: u16, message: String| {
            let mut env: Value = serde_json::from_slice(&answer(r, "failed", Value::Null)).unwrap();
            env["error"]["message"] = json!(message);
            env["diagnostics"] = json!({"request_line": format!("POST {} HTTP/1.1", r.target)});
            Reply::With(http, vec![], env.to_string().into_bytes())
        };
        match r.headers.get("idempotency-key").map(String::as_str) {
            Some("plain404") => Reply::With(
                404,
                vec![],
                format!("Cannot POST {}", r.target).into_bytes(),
            ),
            Some("page404") => failure(404, format!("Cannot POST {}", r.target)),
            Some("page405") => failure(405, format!("Cannot POST {path}")),
            Some("fail") => failure(422, format!("no hook at {path} for signature {sig}")),
            _ => {
                let echoed = json!({"target": r.target, "path": path, "sig": sig});
                let mut env: Value =
                    serde_json::from_slice(&answer(r, "succeeded", echoed.clone())).unwrap();
                env["diagnostics"] = json!({"seen": echoed});
                Reply::With(200, vec![], env.to_string().into_bytes())
            }
        }
    });
    for (id, status, code, exit, message) in [
        ("plain404", "failed", Some("endpoint_http_status"), 1, None),
        (
            "page404",
            "failed",
            Some("forbidden_by_host"),
            1,
            Some("Cannot POST [redacted]"),
        ),
        (
            "page405",
            "failed",
            Some("forbidden_by_host"),
            1,
            Some("Cannot POST [redacted]"),
        ),
        (
            "fail",
            "failed",
            Some("forbidden_by_host"),
            1,
            Some("no hook at [redacted] for signature [redacted]"),
        ),
        ("echo", "succeeded", None, 0, None),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let result_file = dir.path().join("result.json");
        let run = to(&server.url(), 10_000)
            .request(|r| r["request_id"] = json!(id))
            .args(&[
                "--artifact-dir",
                dir.path().to_str().unwrap(),
                "--result-file",
                result_file.to_str().unwrap(),
            ])
            .run();
        run.expect(status, code, exit);
        if status == "succeeded" {
            assert_eq!(run.stderr, "");
            assert_eq!(
                run.envelope["output"],
                json!({"target": "[redacted]", "path": "[redacted]", "sig": "[redacted]"})
            );
            assert_eq!(run.envelope["diagnostics"]["seen"], run.envelope["output"]);
        }
        if let Some(message) = message {
            assert_eq!(run.envelope["error"]["message"], message, "{id}");
            assert_eq!(
                stderr_line(&run),
                format!("error[{}]: {message}", code.unwrap())
            );
            assert_eq!(
                run.envelope["diagnostics"]["request_line"],
                "POST [redacted] HTTP/1.1"
            );
        }
        assert_no_secrets(&run);
        let transcript =
            std::fs::read_to_string(dir.path().join(format!("files/parent-tools/{id}.json")))
                .unwrap();
        let written = std::fs::read_to_string(&result_file).unwrap();
        for (what, text) in [("transcript", &transcript), ("result file", &written)] {
            for secret in [SECRET_PATH, "url-signature"] {
                assert!(
                    !text.contains(secret),
                    "{id}: {secret} in the {what}: {text}"
                );
            }
        }
    }
    assert_eq!(server.received().len(), 5, "every request did arrive");
}
