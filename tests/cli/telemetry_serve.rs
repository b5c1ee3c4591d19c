//! Telemetry through `serve` (SPEC §20, §19.2): the caller's `traceparent`/`tracestate`
//! headers become the child dispatcher's parent (checked at the real OTLP receiver of
//! `telemetry.rs`), and `/metrics` shows `gen_ai_execute_tool_duration_seconds`,
//! `parent_tool_calls_total` and, with a ledger, `parent_tool_approvals_pending`.

use super::telemetry::{hex, spans_of, Mode, Receiver, PARENT_SPAN, PARENT_TRACE};
use crate::{bridge, request, Cmd};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

const TOKEN: &str = "telemetry-token-0123456789";

/// A `serve` on a free loopback port.
struct Serve {
    running: Option<crate::Running>,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Serve {
    /// Started with these environment variables and extra options; returns once it answers.
    fn start(env: &[(&str, &str)], extra: &[&str]) -> Serve {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens");
        std::fs::write(&tokens, format!("{TOKEN} session=sandbox_123\n")).unwrap();
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
        let bridge_file = dir.path().join("bridge.json");
        std::fs::write(&bridge_file, bridge(&["read-stdin", "echo"]).to_string()).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut args = vec![
            "serve".to_string(),
            "--listen".into(),
            format!("127.0.0.1:{port}"),
            "--token-file".into(),
            tokens.display().to_string(),
            "--parent-tool-bridge".into(),
            format!("@{}", bridge_file.display()),
        ];
        args.extend(
            extra
                .iter()
                .map(|s| s.replace("{dir}", &dir.path().display().to_string())),
        );
        let mut cmd = Cmd::new(&args)
            .env_remove("PARENT_TOOL_DISPATCH_SESSION")
            .watchdog(Duration::from_secs(120));
        for (name, value) in env {
            cmd = cmd.env(name, value);
        }
        let serve = Serve {
            running: Some(cmd.spawn()),
            port,
            _dir: dir,
        };
        let until = Instant::now() + Duration::from_secs(20);
        while serve.request("GET /healthz", "", b"").0 != 200 {
            assert!(Instant::now() < until, "serve did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        serve
    }

    /// One request (`METHOD PATH`) with the token, extra header lines and a body: the HTTP
    /// status and the body.
    fn request(&self, line: &str, headers: &str, body: &[u8]) -> (u16, String) {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return (0, String::new());
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut raw = format!(
            "{line} HTTP/1.1\r\nHost: t\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\n{headers}Content-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        raw.extend_from_slice(body);
        let mut out = Vec::new();
        if stream.write_all(&raw).is_err() || stream.read_to_end(&mut out).is_err() {
            return (0, String::new());
        }
        let text = String::from_utf8_lossy(&out).to_string();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, body.to_string())
    }

    /// `POST /v1/dispatch` of the test request with these header lines: its envelope.
    fn dispatch(&self, headers: &str) -> Value {
        let (status, body) = self.request(
            "POST /v1/dispatch",
            headers,
            request().to_string().as_bytes(),
        );
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    fn metrics(&self) -> String {
        let (status, body) = self.request("GET /metrics", "", b"");
        assert_eq!(status, 200, "{body}");
        body
    }

    /// SIGTERM: exit 0, nothing on stdout, JSON lines on stderr.
    fn stop(mut self) {
        let running = self.running.take().unwrap();
        running.signal(rustix::process::Signal::TERM);
        running.wait().exit(0).stdout_empty().stderr_with(|err| {
            for line in err.lines() {
                assert!(serde_json::from_str::<Value>(line).is_ok(), "{line}");
            }
        });
    }
}

#[test]
fn serve_passes_the_callers_traceparent_to_its_child() {
    let receiver = Receiver::start(Mode::Accept);
    // The server's own TRACEPARENT is no request's parent.
    let server = Serve::start(
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url()),
            (
                "TRACEPARENT",
                "00-11111111111111111111111111111111-2222222222222222-01",
            ),
        ],
        &[],
    );
    let headers =
        format!("traceparent: 00-{PARENT_TRACE}-{PARENT_SPAN}-01\r\ntracestate: vendor=abc\r\n");
    let envelope = server.dispatch(&headers);
    assert_eq!(envelope["status"], "succeeded", "{envelope}");
    assert_eq!(
        envelope["diagnostics"]["dispatch"]["trace_id"],
        PARENT_TRACE
    );
    let traces = receiver.traces();
    assert_eq!(traces.len(), 1, "the child exported once, before it exited");
    let spans = spans_of(&traces[0]);
    let call = spans
        .iter()
        .find(|s| s.name == "execute_tool workspace.read")
        .expect("the child's call span");
    assert_eq!(hex(&call.trace_id), PARENT_TRACE);
    assert_eq!(hex(&call.parent_span_id), PARENT_SPAN);
    assert_eq!(call.trace_state, "vendor=abc");

    // A malformed traceparent is ignored: a new trace, no parent, no tracestate.
    let envelope = server.dispatch("traceparent: 00-nonsense-01\r\ntracestate: vendor=abc\r\n");
    assert_eq!(envelope["status"], "succeeded", "{envelope}");
    // No header at all: the same (not the server's own TRACEPARENT).
    let plain = server.dispatch("");
    let traces = receiver.traces();
    assert_eq!(traces.len(), 3);
    for (export, envelope) in traces[1..].iter().zip([&envelope, &plain]) {
        let spans = spans_of(export);
        let call = spans
            .iter()
            .find(|s| s.name.starts_with("execute_tool"))
            .unwrap();
        assert!(call.parent_span_id.is_empty());
        assert_eq!(call.trace_state, "");
        assert_ne!(hex(&call.trace_id), PARENT_TRACE);
        assert_ne!(hex(&call.trace_id), "11111111111111111111111111111111");
        assert_eq!(
            envelope["diagnostics"]["dispatch"]["trace_id"],
            hex(&call.trace_id)
        );
    }
    server.stop();
}

#[test]
fn serve_metrics_show_the_duration_by_tool_and_status_and_calls_by_code() {
    let server = Serve::start(&[], &[]);
    assert_eq!(server.dispatch("")["status"], "succeeded");
    let (status, _) = server.request("POST /v1/dispatch", "", b"{\"x\":1}");
    assert_eq!(status, 200);
    let metrics = server.metrics();
    for line in [
        "# TYPE gen_ai_execute_tool_duration_seconds histogram",
        "gen_ai_execute_tool_duration_seconds_count{gen_ai_tool_name=\"workspace.read\",parent_tool_status=\"succeeded\"} 1",
        "gen_ai_execute_tool_duration_seconds_bucket{gen_ai_tool_name=\"workspace.read\",parent_tool_status=\"succeeded\",le=\"+Inf\"} 1",
        "gen_ai_execute_tool_duration_seconds_count{gen_ai_tool_name=\"\",parent_tool_status=\"failed\"} 1",
        "# TYPE parent_tool_calls_total counter",
        "parent_tool_calls_total{code=\"\"} 1",
        "parent_tool_calls_total{code=\"request_invalid\"} 1",
        // What was there before is still there.
        "ptd_serve_dispatches_total{status=\"succeeded\",code=\"\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    assert!(
        !metrics.contains("parent_tool_approvals_pending"),
        "no ledger"
    );
    server.stop();

    let server = Serve::start(&[], &["--ledger", "{dir}/ledger.db"]);
    assert_eq!(server.dispatch("")["status"], "succeeded");
    let metrics = server.metrics();
    assert!(
        metrics.contains(
            "# TYPE parent_tool_approvals_pending gauge\nparent_tool_approvals_pending 0\n"
        ),
        "{metrics}"
    );
    server.stop();
}
