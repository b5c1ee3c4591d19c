//! Telemetry (SPEC §20) against a real OTLP/HTTP receiver run by the test on 127.0.0.1,
//! which decodes every body with the OpenTelemetry project's own messages
//! (`opentelemetry-proto`), not with the dispatcher's encoder: the call's span, its
//! attributes, status, parent and link, the step spans, the trace id in the envelope, the
//! context passed on to the adapter and to an endpoint, redaction of every exported byte, and
//! a receiver that is down or hangs.

use super::*;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point, Metric};
use opentelemetry_proto::tonic::trace::v1::Span;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

pub(crate) const PARENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
pub(crate) const PARENT_SPAN: &str = "00f067aa0ba902b7";
const LINKED: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// One request as the receiver read it.
#[derive(Debug, Clone)]
pub(crate) struct Got {
    pub(crate) path: String,
    /// Header names lower-cased.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Got {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the receiver does with a request.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Mode {
    /// `200 OK`, empty body.
    Accept,
    /// Read the request, never answer (for 10 s).
    Hang,
    /// Answer as a `host_endpoint` would: a result envelope echoing the request.
    Endpoint,
}

/// A small HTTP/1.1 server on 127.0.0.1: one thread, one request per connection.
pub(crate) struct Receiver {
    port: u16,
    got: Arc<Mutex<Vec<Got>>>,
}

impl Receiver {
    pub(crate) fn start(mode: Mode) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&got);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let into = Arc::clone(&into);
                std::thread::spawn(move || serve(stream, mode, &into));
            }
        });
        Receiver { port, got }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn received(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    /// The trace exports received (`/v1/traces`), in order.
    pub(crate) fn traces(&self) -> Vec<Got> {
        self.path("/v1/traces")
    }

    /// The requests received on `path`, in order.
    pub(crate) fn path(&self, path: &str) -> Vec<Got> {
        self.received()
            .into_iter()
            .filter(|g| g.path == path)
            .collect()
    }
}

fn serve(mut stream: TcpStream, mode: Mode, into: &Mutex<Vec<Got>>) {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.lines();
    let path = lines
        .next()
        .unwrap_or("")
        .split(' ')
        .nth(1)
        .unwrap_or("")
        .to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let got = Got {
        path,
        headers,
        body: buf[head_end..head_end + length].to_vec(),
    };
    into.lock().unwrap().push(got.clone());
    let body = match mode {
        Mode::Hang => {
            std::thread::sleep(Duration::from_secs(10));
            return;
        }
        Mode::Accept => Vec::new(),
        Mode::Endpoint => {
            let req: Value = serde_json::from_slice(&got.body).unwrap_or(Value::Null);
            json!({
                "schema": "wp-codebox/parent-tool-result/v1",
                "version": 1,
                "request_id": req["request_id"],
                "tool": req["tool"],
                "operation": req["operation"],
                "status": "succeeded",
                "output": {"ok": true},
                "artifacts": {"transcripts": [], "evidence": []},
                "diagnostics": {},
                "metadata": {}
            })
            .to_string()
            .into_bytes()
        }
    };
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(&body);
}

/// The spans of one OTLP/HTTP protobuf body, decoded with the official messages.
pub(crate) fn spans_of(got: &Got) -> Vec<Span> {
    let request = match got.header("content-type") {
        Some("application/json") => {
            serde_json::from_slice::<ExportTraceServiceRequest>(&got.body).expect("OTLP/JSON body")
        }
        _ => <ExportTraceServiceRequest as prost::Message>::decode(&got.body[..])
            .expect("OTLP protobuf body"),
    };
    request
        .resource_spans
        .into_iter()
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
        .collect()
}

/// The metrics of one OTLP/HTTP metrics body, decoded with the official messages.
pub(crate) fn metrics_of(got: &Got) -> Vec<Metric> {
    let request = match got.header("content-type") {
        Some("application/json") => {
            serde_json::from_slice::<ExportMetricsServiceRequest>(&got.body)
                .expect("OTLP/JSON body")
        }
        _ => <ExportMetricsServiceRequest as prost::Message>::decode(&got.body[..])
            .expect("OTLP protobuf body"),
    };
    request
        .resource_metrics
        .into_iter()
        .flat_map(|r| r.scope_metrics)
        .flat_map(|s| s.metrics)
        .collect()
}

/// A data point's attributes as `key=value` strings, sorted.
fn labels(attributes: &[opentelemetry_proto::tonic::common::v1::KeyValue]) -> Vec<String> {
    let mut out: Vec<String> = attributes
        .iter()
        .map(|kv| match kv.value.as_ref().and_then(|v| v.value.clone()) {
            Some(any_value::Value::StringValue(s)) => format!("{}={s}", kv.key),
            other => format!("{}={other:?}", kv.key),
        })
        .collect();
    out.sort();
    out
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attr(span: &Span, key: &str) -> Option<any_value::Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone())
        .and_then(|v| v.value)
}

pub(crate) fn text_attr(span: &Span, key: &str) -> Option<String> {
    match attr(span, key) {
        Some(any_value::Value::StringValue(s)) => Some(s),
        _ => None,
    }
}

/// A dispatch with telemetry pointed at `receiver`.
fn traced(dispatch: Dispatch, receiver: &Receiver) -> Dispatch {
    dispatch.env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url())
}

/// The adapter: prints its `TRACEPARENT` on stderr, then echoes the request.
fn env_printing_adapter() -> Value {
    let mut b = bridge(&[]);
    let script = format!(
        "printf 'traceparent=%s\\n' \"$TRACEPARENT\" >&2; exec '{}' adapter echo",
        test_bin().display()
    );
    b["dispatcher"]["command"]["argv"] = json!(["/bin/sh", "-c", script]);
    b
}

#[test]
fn the_call_span_reaches_a_real_receiver_with_its_parent_link_children_and_context() {
    let receiver = Receiver::start(Mode::Accept);
    let run = traced(Dispatch::with_bridge(env_printing_adapter()), &receiver)
        .env(
            "TRACEPARENT",
            &format!("00-{PARENT_TRACE}-{PARENT_SPAN}-01"),
        )
        .env("TRACESTATE", "vendor=abc")
        .request(|r| r["metadata"]["traceparent"] = json!(LINKED))
        .run();
    run.expect("succeeded", None, 0);
    let got = receiver.traces();
    assert_eq!(got.len(), 1, "one export");
    assert_eq!(got[0].path, "/v1/traces");
    assert_eq!(
        got[0].header("content-type"),
        Some("application/x-protobuf")
    );
    let spans = spans_of(&got[0]);
    let call = spans
        .iter()
        .find(|s| s.name == "execute_tool workspace.read")
        .expect("the call's span");
    // Parent: TRACEPARENT; the envelope's trace id is the exported one.
    assert_eq!(hex(&call.trace_id), PARENT_TRACE);
    assert_eq!(hex(&call.parent_span_id), PARENT_SPAN);
    assert_eq!(run.dispatch()["trace_id"], json!(PARENT_TRACE));
    assert_eq!(call.trace_state, "vendor=abc");
    // The request's metadata.traceparent is a link, never the parent.
    assert_eq!(call.links.len(), 1);
    assert_eq!(
        format!(
            "00-{}-{}-01",
            hex(&call.links[0].trace_id),
            hex(&call.links[0].span_id)
        ),
        LINKED
    );
    let s = |k| text_attr(call, k);
    assert_eq!(s("gen_ai.operation.name").as_deref(), Some("execute_tool"));
    assert_eq!(s("gen_ai.tool.name").as_deref(), Some("workspace.read"));
    assert_eq!(s("gen_ai.tool.call.id").as_deref(), Some("ptr_123"));
    assert_eq!(s("parent_tool.status").as_deref(), Some("succeeded"));
    assert_eq!(s("parent_tool.session").as_deref(), Some("sandbox_123"));
    assert_eq!(s("parent_tool.transport").as_deref(), Some("stdin"));
    assert!(s("parent_tool.bridge_ref").is_some_and(|r| r.starts_with("sha256:")));
    assert_eq!(s("error.type"), None);
    assert_eq!(
        attr(call, "parent_tool.exit_code"),
        Some(any_value::Value::IntValue(0))
    );
    assert_eq!(
        attr(call, "parent_tool.replayed"),
        Some(any_value::Value::BoolValue(false))
    );
    assert!(attr(call, "parent_tool.resources.max_rss_bytes").is_some());
    assert_ne!(call.status.as_ref().map(|s| s.code), Some(2));
    // The steps are the call's children, in its trace.
    for name in ["admit", "adapter_run", "judge"] {
        let step = spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
            panic!(
                "no {name} span among {:?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        });
        assert_eq!(step.parent_span_id, call.span_id, "{name}");
        assert_eq!(step.trace_id, call.trace_id, "{name}");
        assert!(
            step.start_time_unix_nano >= call.start_time_unix_nano,
            "{name}"
        );
        assert!(step.end_time_unix_nano <= call.end_time_unix_nano, "{name}");
    }
    // Passed on: the adapter saw the call's span as its parent.
    let want = format!("traceparent=00-{PARENT_TRACE}-{}-01", hex(&call.span_id));
    let tail = run.dispatch()["stderr_tail"].as_str().unwrap_or_default();
    assert!(tail.contains(&want), "want {want} in {tail}");
}

#[test]
fn a_malformed_traceparent_is_ignored_and_a_new_trace_starts() {
    let receiver = Receiver::start(Mode::Accept);
    let run = traced(Dispatch::adapter(&["echo"]), &receiver)
        .env("TRACEPARENT", "00-not-a-trace-01")
        .run();
    run.expect("succeeded", None, 0);
    let spans = spans_of(&receiver.traces()[0]);
    let call = spans
        .iter()
        .find(|s| s.name.starts_with("execute_tool"))
        .unwrap();
    assert!(call.parent_span_id.is_empty());
    assert_eq!(run.dispatch()["trace_id"], json!(hex(&call.trace_id)));
}

#[test]
fn a_denied_call_gets_an_error_span_and_json_is_otlp_json() {
    let receiver = Receiver::start(Mode::Accept);
    let run = traced(Dispatch::adapter(&["echo"]), &receiver)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .request(|r| {
            r["tool"] = json!("workspace.write");
            r["authorization"]["allowed_tools"] = json!(["workspace.write"]);
        })
        .run();
    run.expect("denied", Some("tool_not_allowed"), 77);
    let got = receiver.traces();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].header("content-type"), Some("application/json"));
    let spans = spans_of(&got[0]);
    let call = spans
        .iter()
        .find(|s| s.name == "execute_tool workspace.write")
        .unwrap();
    assert_eq!(
        call.status.as_ref().map(|s| s.code),
        Some(2),
        "status error"
    );
    assert_eq!(
        text_attr(call, "error.type").as_deref(),
        Some("tool_not_allowed")
    );
    assert_eq!(
        text_attr(call, "parent_tool.status").as_deref(),
        Some("denied")
    );
    // Nothing ran: no adapter span.
    assert!(spans.iter().all(|s| s.name != "adapter_run"));
    assert_eq!(run.dispatch()["trace_id"], json!(hex(&call.trace_id)));
}

#[test]
fn no_secret_or_host_path_is_in_any_exported_byte() {
    const SECRET: &str = "telemetry-secret-8d7c6b5a4f3e";
    let home = tempfile::tempdir().unwrap();
    let home_path = home.path().display().to_string();
    for protocol in ["http/protobuf", "http/json"] {
        let receiver = Receiver::start(Mode::Accept);
        let run = traced(Dispatch::with_bridge(env_printing_adapter()), &receiver)
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
            .env("PTD_TELEMETRY_SECRET", SECRET)
            .env("HOME", &home_path)
            .env(
                "OTEL_RESOURCE_ATTRIBUTES",
                &format!("where={home_path}/x,key={SECRET}"),
            )
            .args(&["--secret-env", "PTD_TELEMETRY_SECRET"])
            .request(|r| {
                r["request_id"] = json!(format!("ptr_{SECRET}"));
                r["sandbox_session"]["sandbox_session_id"] = json!(format!("{home_path}/s"));
                r["input"] = json!({"path": SECRET, "where": home_path});
            })
            .run();
        run.expect("succeeded", None, 0);
        let got = receiver.received();
        assert_eq!(got.len(), 2, "{protocol}: spans and metrics");
        for export in &got {
            let body = &export.body;
            let found = |needle: &str| body.windows(needle.len()).any(|w| w == needle.as_bytes());
            let path = &export.path;
            assert!(!found(SECRET), "{protocol} {path}: the secret was exported");
            assert!(
                !found(&home_path),
                "{protocol} {path}: a host path was exported"
            );
            assert!(
                !found("README"),
                "{protocol} {path}: the input was exported"
            );
        }
        // Still valid exports.
        assert!(!spans_of(&receiver.traces()[0]).is_empty());
        assert_eq!(metrics_of(&receiver.path("/v1/metrics")[0]).len(), 2);
    }
}

#[test]
fn a_receiver_that_is_down_is_one_warning_and_changes_nothing() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let run = Dispatch::adapter(&["echo"])
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            &format!("http://127.0.0.1:{port}"),
        )
        .run();
    run.expect("succeeded", None, 0);
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("warning[telemetry]"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(run.dispatch()["trace_id"].is_string());
}

#[test]
fn a_receiver_that_hangs_is_given_up_on_within_the_bound() {
    let receiver = Receiver::start(Mode::Hang);
    let plain = Dispatch::adapter(&["echo"]).run();
    plain.expect("succeeded", None, 0);
    let run = traced(Dispatch::adapter(&["echo"]), &receiver)
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "60000")
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(receiver.traces().len(), 1);
    assert_eq!(
        run.stderr
            .lines()
            .filter(|l| l.starts_with("warning[telemetry]"))
            .count(),
        1,
        "{}",
        run.stderr
    );
    // The envelope is the plain run's but for the volatile members.
    let strip = |mut v: Value| {
        let d = &mut v["diagnostics"]["dispatch"];
        for key in ["duration_ms", "resources", "trace_id", "stdout_bytes"] {
            d.as_object_mut().unwrap().remove(key);
        }
        // The echo adapter shows its environment, which has the call's TRACEPARENT.
        v["output"]["env"]
            .as_object_mut()
            .unwrap()
            .remove("TRACEPARENT");
        v
    };
    assert_eq!(strip(run.envelope.clone()), strip(plain.envelope.clone()));
    // At most 2 s more, whatever OTEL_EXPORTER_OTLP_TIMEOUT says.
    assert!(
        run.elapsed < plain.elapsed + Duration::from_millis(3500),
        "took {:?}",
        run.elapsed
    );
    assert!(
        run.elapsed >= Duration::from_millis(1900),
        "took {:?}",
        run.elapsed
    );
}

#[test]
fn telemetry_off_adds_nothing_to_the_envelope_or_the_adapter() {
    let run = Dispatch::with_bridge(env_printing_adapter())
        .env(
            "TRACEPARENT",
            &format!("00-{PARENT_TRACE}-{PARENT_SPAN}-01"),
        )
        .run();
    run.expect("succeeded", None, 0);
    assert!(run.dispatch().get("trace_id").is_none());
    let tail = run.dispatch()["stderr_tail"].as_str().unwrap_or_default();
    assert!(tail.contains("traceparent=\n"), "{tail}");
}

#[test]
fn an_endpoint_gets_the_traceparent_header() {
    let collector = Receiver::start(Mode::Accept);
    let endpoint = Receiver::start(Mode::Endpoint);
    let mut b = bridge(&[]);
    let d = &mut b["dispatcher"];
    d["mode"] = json!("host_endpoint");
    d.as_object_mut().unwrap().remove("command");
    d["endpoint"] = json!({"url_env": "PTD_TEST_TRACE_ENDPOINT", "method": "POST"});
    let run = traced(Dispatch::with_bridge(b), &collector)
        .env(
            "PTD_TEST_TRACE_ENDPOINT",
            &format!("{}/call", endpoint.url()),
        )
        .env(
            "TRACEPARENT",
            &format!("00-{PARENT_TRACE}-{PARENT_SPAN}-01"),
        )
        .run();
    run.expect("succeeded", None, 0);
    let spans = spans_of(&collector.traces()[0]);
    let call = spans
        .iter()
        .find(|s| s.name.starts_with("execute_tool"))
        .unwrap();
    assert!(spans.iter().any(|s| s.name == "endpoint_exchange"));
    assert_eq!(
        text_attr(call, "parent_tool.transport").as_deref(),
        Some("http")
    );
    let sent = &endpoint.received()[0];
    assert_eq!(
        sent.header("traceparent"),
        Some(format!("00-{PARENT_TRACE}-{}-01", hex(&call.span_id)).as_str())
    );
}

#[test]
fn the_calls_metrics_go_with_its_spans_by_tool_status_and_code() {
    let receiver = Receiver::start(Mode::Accept);
    let run = traced(Dispatch::adapter(&["echo"]), &receiver).run();
    run.expect("succeeded", None, 0);
    let got = receiver.path("/v1/metrics");
    assert_eq!(got.len(), 1, "one metrics export");
    assert_eq!(receiver.traces().len(), 1);
    let metrics = metrics_of(&got[0]);
    let duration = metrics
        .iter()
        .find(|m| m.name == "gen_ai.execute_tool.duration")
        .expect("the duration histogram");
    assert_eq!(duration.unit, "s");
    let Some(metric::Data::Histogram(histogram)) = &duration.data else {
        panic!("a histogram: {duration:?}");
    };
    let point = &histogram.data_points[0];
    assert_eq!(point.count, 1);
    assert_eq!(point.bucket_counts.iter().sum::<u64>(), 1);
    assert!(point.sum.is_some_and(|s| s > 0.0 && s < 30.0));
    assert_eq!(
        labels(&point.attributes),
        [
            "gen_ai.tool.name=workspace.read",
            "parent_tool.status=succeeded"
        ]
    );
    let calls = metrics
        .iter()
        .find(|m| m.name == "parent_tool.calls")
        .unwrap();
    let Some(metric::Data::Sum(sum)) = &calls.data else {
        panic!("a sum: {calls:?}");
    };
    assert!(sum.is_monotonic);
    assert_eq!(
        sum.data_points[0].value,
        Some(number_data_point::Value::AsInt(1))
    );
    assert_eq!(
        labels(&sum.data_points[0].attributes),
        ["parent_tool.code="]
    );

    // A denied call, to a metrics endpoint of its own, in OTLP/JSON.
    let elsewhere = Receiver::start(Mode::Accept);
    let run = traced(Dispatch::adapter(&["echo"]), &receiver)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .env(
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            &format!("{}/custom", elsewhere.url()),
        )
        .request(|r| {
            r["tool"] = json!("workspace.write");
            r["authorization"]["allowed_tools"] = json!(["workspace.write"]);
        })
        .run();
    run.expect("denied", Some("tool_not_allowed"), 77);
    let got = elsewhere.path("/custom");
    assert_eq!(got.len(), 1);
    let metrics = metrics_of(&got[0]);
    let Some(metric::Data::Histogram(histogram)) = &metrics[0].data else {
        panic!("a histogram");
    };
    assert_eq!(
        labels(&histogram.data_points[0].attributes),
        [
            "error.type=tool_not_allowed",
            "gen_ai.tool.name=workspace.write",
            "parent_tool.status=denied"
        ]
    );
    assert_eq!(
        receiver.path("/v1/metrics").len(),
        1,
        "not to the generic one"
    );

    // OTEL_METRICS_EXPORTER=none: spans only.
    let quiet = Receiver::start(Mode::Accept);
    traced(Dispatch::adapter(&["echo"]), &quiet)
        .env("OTEL_METRICS_EXPORTER", "none")
        .run()
        .expect("succeeded", None, 0);
    assert_eq!(quiet.received().len(), 1);
    assert_eq!(quiet.traces().len(), 1);
}
