//! The MCP adapter passes the dispatcher's span on (SPEC §20): with telemetry on and a
//! `TRACEPARENT`, the scripted server (`ptd-test mcp-server log:PATH`) reads
//! `params._meta.traceparent` on `tools/call` naming the exported call span; with telemetry
//! off it reads none.

use super::telemetry::{hex, spans_of, Mode, Receiver, PARENT_SPAN, PARENT_TRACE};
use crate::{bin, test_bin, Dispatch};
use serde_json::{json, Value};

/// A dispatch through `adapter mcp` to the scripted server in `era`, logging what it reads.
fn through_mcp(log: &std::path::Path, era: &str) -> Dispatch {
    let argv = json!([
        bin().display().to_string(),
        "adapter",
        "mcp",
        "--",
        test_bin().display().to_string(),
        "mcp-server",
        format!("log:{}", log.display()),
        era
    ]);
    Dispatch::adapter(&[])
        .bridge(move |b| b["dispatcher"]["command"]["argv"] = argv)
        .env(
            "TRACEPARENT",
            &format!("00-{PARENT_TRACE}-{PARENT_SPAN}-01"),
        )
}

/// `params._meta` of the first `tools/call` the server logged.
fn call_meta(log: &std::path::Path) -> Value {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|m| m["method"] == "tools/call")
        .expect("a tools/call")["params"]["_meta"]
        .clone()
}

#[test]
fn tools_call_carries_the_dispatchers_span_as_meta_traceparent() {
    let collector = Receiver::start(Mode::Accept);
    for era in ["era:legacy", "era:modern"] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let run = through_mcp(&log, era)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.url())
            .run();
        run.expect("succeeded", None, 0);
        let traces = collector.traces();
        let spans = spans_of(traces.last().unwrap());
        let call = spans
            .iter()
            .find(|s| s.name.starts_with("execute_tool"))
            .unwrap();
        let want = format!("00-{PARENT_TRACE}-{}-01", hex(&call.span_id));
        let meta = call_meta(&log);
        assert_eq!(meta["traceparent"], json!(want), "{era}: {meta}");
    }
    // Telemetry off: the dispatcher is no part of a trace and the server gets none.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    through_mcp(&log, "era:modern")
        .run()
        .expect("succeeded", None, 0);
    let meta = call_meta(&log);
    assert!(meta.get("traceparent").is_none(), "{meta}");
}
