//! Telemetry's part of the main job (SPEC §20): the call's trace started from the host's
//! `OTEL_*` variables and `TRACEPARENT`, the step spans the sequencer records as it passes
//! them (admit, ledger, the adapter run or endpoint exchange, judge), the call's span built
//! from what was learned and how the job ended, the call's metrics (one data point set), and
//! the export after the envelope — stdout
//! closed first, bounded, a failure one `warning[telemetry]` line.
//!
//! With telemetry off [`Learned::trace`] is `None` and every function here returns at once:
//! no clock read, no allocation, no thread. Attribute values are handed to `ptd-telemetry`,
//! whose encoding puts every one through the job's redactor; no value here is the request's
//! `input`, the answer's `output` or stderr text.

use super::report::Learned;
use ptd_sys::hostenv::HostEnv;
use ptd_telemetry::{CallMetrics, Config, Span, SpanContext, Trace, Value};
use ptd_wire::envelope::result::Transport;
use ptd_wire::error::Status;
use ptd_wire::json::raw::{self, Fields};
use std::time::{Instant, SystemTime};

/// The call's trace when telemetry is on in `env`.
pub(super) fn start(env: &HostEnv) -> Option<Trace> {
    Config::from_env(env).map(|config| Trace::start(config, env))
}

/// How the job ended, for the call's span.
pub(super) struct Ended {
    pub(super) status: Status,
    /// The envelope's `error.code` (the dispatcher's or the adapter's own).
    pub(super) code: Option<String>,
    /// The dispatcher's exit status.
    pub(super) exit: u8,
    /// The ledger printed a recorded envelope again (SPEC §14.1).
    pub(super) replayed: bool,
    pub(super) at: SystemTime,
}

impl Learned {
    /// The start of a step's span: `None` with telemetry off (no clock is read).
    pub(super) fn clock(&self) -> Option<SystemTime> {
        self.trace.as_ref().map(|_| SystemTime::now())
    }

    /// Record the step `name`, from `since` (a [`Learned::clock`]) to now.
    pub(super) fn traced(&mut self, name: &str, since: Option<SystemTime>) {
        if let (Some(trace), Some(since)) = (self.trace.as_mut(), since) {
            trace.step(name, since, SystemTime::now());
        }
    }

    /// Record obtaining the answer: `endpoint_exchange` or `adapter_run` by its transport.
    pub(super) fn traced_obtain(&mut self, since: Option<SystemTime>) {
        let name = match self.dispatch.transport {
            Some(Transport::Http) => "endpoint_exchange",
            _ => "adapter_run",
        };
        self.traced(name, since);
    }

    /// The call's span context and trace state, to pass on (with telemetry on).
    pub(super) fn trace_context(&self) -> Option<(SpanContext, Option<&str>)> {
        self.trace.as_ref().map(|t| (t.context(), t.tracestate()))
    }
}

/// After the envelope: close stdout (the host reads its end now), then export the call's
/// spans, and its metrics where a metrics endpoint is set, all within the one configured
/// bound. A failure is one warning on stderr (one line whatever failed); the exit status is
/// the envelope's whatever happens here.
pub(super) fn export(learned: &Learned, ended: &Ended, env: &HostEnv) {
    let Some(trace) = &learned.trace else {
        return;
    };
    ptd_wire::stdout::close();
    let config = trace.config();
    let deadline = Instant::now() + config.timeout;
    let span = call_span(trace, learned, ended);
    let body = trace.encode(&span, &learned.redactor);
    let spans = ptd_telemetry::export(config, &config.url, &body, env, deadline);
    let metrics = config.metrics_url.as_deref().map(|url| {
        let call = CallMetrics {
            tool: learned.echo.tool.clone(),
            status: ended.status.as_str().to_string(),
            code: (ended.status != Status::Succeeded)
                .then(|| ended.code.clone())
                .map(|code| code.unwrap_or_else(|| ended.status.as_str().to_string())),
            start: learned.started_at,
            end: ended.at,
        };
        let body = call.encode(config, &learned.redactor);
        ptd_telemetry::export(config, url, &body, env, deadline)
    });
    let why = match (spans, metrics) {
        (Err(why), Some(Err(_))) => {
            format!("the call's spans and metrics were not exported: {why}")
        }
        (Err(why), _) => format!("the call's spans were not exported: {why}"),
        (Ok(()), Some(Err(why))) => format!("the call's metrics were not exported: {why}"),
        (Ok(()), _) => return,
    };
    stderr_line!(
        "warning[telemetry]: {}",
        ptd_wire::terminal::escape(&learned.redactor.redact_str(&why))
    );
}

/// The call's span (SPEC §20): `execute_tool {tool}` with the GenAI attributes and ours.
fn call_span(trace: &Trace, learned: &Learned, ended: &Ended) -> Span {
    let tool = &learned.echo.tool;
    let name = if tool.is_empty() {
        "execute_tool".to_string()
    } else {
        format!("execute_tool {tool}")
    };
    let mut span = trace.call_span(name, learned.started_at, ended.at);
    let text = |s: &str| Value::Str(s.to_string());
    let dispatch = &learned.dispatch;
    span.set("gen_ai.operation.name", text("execute_tool"));
    span.set("gen_ai.tool.name", text(tool));
    span.set("gen_ai.tool.call.id", text(&learned.echo.request_id));
    span.set("parent_tool.status", text(ended.status.as_str()));
    if ended.status != Status::Succeeded {
        let code = ended.code.as_deref().unwrap_or(ended.status.as_str());
        span.set("error.type", text(code));
        span.error = Some(code.to_string());
    }
    span.set("parent_tool.exit_code", Value::Int(i64::from(ended.exit)));
    span.set("parent_tool.replayed", Value::Bool(ended.replayed));
    let request = learned.request.as_deref().map(|doc| doc.text());
    if let Some(session) = request.and_then(|r| member(r, "sandbox_session", "sandbox_session_id"))
    {
        span.set("parent_tool.session", Value::Str(session));
    }
    if let Some(link) = request
        .and_then(|r| member(r, "metadata", "traceparent"))
        .and_then(|t| SpanContext::parse(&t))
    {
        span.links.push(link);
    }
    if let Some(bridge_ref) = &learned.bridge_ref {
        span.set("parent_tool.bridge_ref", text(bridge_ref));
    }
    if let Some(transport) = dispatch.transport {
        span.set("parent_tool.transport", text(transport_name(transport)));
    }
    if let Some(policy) = &dispatch.policy {
        span.set("parent_tool.policy_entry", text(&policy.entry));
    }
    if let Some(run) = &dispatch.run {
        if let Some(code) = run.exit_code {
            span.set("parent_tool.adapter.exit_code", Value::Int(i64::from(code)));
        }
        if let Some(r) = run.resources {
            let int = |n: u64| Value::Int(i64::try_from(n).unwrap_or(i64::MAX));
            span.set("parent_tool.resources.max_rss_bytes", int(r.max_rss_bytes));
            span.set("parent_tool.resources.user_ms", int(r.user_ms));
            span.set("parent_tool.resources.system_ms", int(r.system_ms));
        }
    }
    if let Some(status) = dispatch.http_status {
        span.set("http.response.status_code", Value::Int(i64::from(status)));
    }
    span
}

/// The string `outer.inner` of a request's text, when both are there.
fn member(text: &str, outer: &str, inner: &str) -> Option<String> {
    let top = Fields::parse(text)?;
    let object = Fields::parse(top.get(outer)?)?;
    raw::string(object.get(inner)?).map(|s| s.into_owned())
}

fn transport_name(transport: Transport) -> &'static str {
    match transport {
        Transport::Stdin => "stdin",
        Transport::File => "file",
        Transport::Http => "http",
        Transport::Replay => "replay",
    }
}
