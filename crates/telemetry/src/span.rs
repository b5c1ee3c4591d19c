//! One call's spans and their OTLP encoding, through the OpenTelemetry project's own messages.

use crate::config::{Config, Protocol};
use crate::context::SpanContext;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{span, status, ResourceSpans, ScopeSpans, Status};
use ptd_sys::hostenv::HostEnv;
use ptd_wire::redact::Redactor;
use std::time::{SystemTime, UNIX_EPOCH};

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
}

/// One span: the call's, or one of its steps'.
#[derive(Debug, Clone)]
pub struct Span {
    pub name: String,
    pub context: SpanContext,
    pub parent: Option<[u8; 8]>,
    pub start: SystemTime,
    pub end: SystemTime,
    pub attributes: Vec<(&'static str, Value)>,
    /// `Some(description)`: the span's status is error.
    pub error: Option<String>,
    /// Other spans this one is linked to (the request's `metadata.traceparent`).
    pub links: Vec<SpanContext>,
}

impl Span {
    /// Add an attribute.
    pub fn set(&mut self, key: &'static str, value: Value) {
        self.attributes.push((key, value));
    }
}

/// One call's trace: its configuration, the span the call is, the parent it joined, and
/// the step spans recorded so far.
#[derive(Debug, Clone)]
pub struct Trace {
    config: Config,
    call: SpanContext,
    parent: Option<SpanContext>,
    state: Option<String>,
    steps: Vec<Span>,
}

impl Trace {
    /// Start the call's trace: its parent is `TRACEPARENT` in `env` when that is valid (and
    /// `TRACESTATE` is kept with it); otherwise a new trace. A malformed value is ignored.
    pub fn start(config: Config, env: &HostEnv) -> Trace {
        let parent = env
            .var("TRACEPARENT")
            .and_then(|text| SpanContext::parse(&text));
        let state = parent
            .and(env.var("TRACESTATE"))
            .and_then(|text| crate::context::tracestate(&text));
        Trace {
            config,
            call: parent.map_or_else(SpanContext::new_root, |p| p.child()),
            parent,
            state,
            steps: Vec::new(),
        }
    }

    /// Where and how the spans go.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The call's span: what is passed on to the adapter or endpoint.
    pub fn context(&self) -> SpanContext {
        self.call
    }

    /// The `tracestate` passed on with it (the parent's, when valid).
    pub fn tracestate(&self) -> Option<&str> {
        self.state.as_deref()
    }

    /// The call's span, with no attributes yet.
    pub fn call_span(&self, name: String, start: SystemTime, end: SystemTime) -> Span {
        Span {
            name,
            context: self.call,
            parent: self.parent.map(|p| p.span_id),
            start,
            end,
            attributes: Vec::new(),
            error: None,
            links: Vec::new(),
        }
    }

    /// Record a step of the call as a child span; returns it for attributes.
    pub fn step(&mut self, name: &str, start: SystemTime, end: SystemTime) -> &mut Span {
        let span = Span {
            name: name.to_string(),
            context: self.call.child(),
            parent: Some(self.call.span_id),
            start,
            end,
            attributes: Vec::new(),
            error: None,
            links: Vec::new(),
        };
        let at = self.steps.len();
        self.steps.push(span);
        &mut self.steps[at]
    }

    /// The step spans recorded so far.
    pub fn steps(&self) -> &[Span] {
        &self.steps
    }

    /// The export body of `call` and the steps: every string through `redactor`'s full
    /// rules, in the configured protocol's encoding.
    pub fn encode(&self, call: &Span, redactor: &Redactor) -> Vec<u8> {
        let spans = std::iter::once(call)
            .chain(&self.steps)
            .map(|s| self.message(s, redactor))
            .collect();
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(resource(&self.config, redactor)),
                scope_spans: vec![ScopeSpans {
                    scope: Some(scope()),
                    spans,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        };
        match self.config.protocol {
            Protocol::Protobuf => prost::Message::encode_to_vec(&request),
            // Serializing these plain structs cannot fail.
            Protocol::Json => serde_json::to_vec(&request).unwrap_or_default(),
        }
    }

    fn message(
        &self,
        s: &Span,
        redactor: &Redactor,
    ) -> opentelemetry_proto::tonic::trace::v1::Span {
        // The call's span is the tool's execution; a step that reaches another service
        // (an endpoint exchange) is marked by the caller's attributes, not its kind.
        let kind = span::SpanKind::Internal;
        let status = match &s.error {
            Some(message) => Status {
                message: redactor.redact_str(message),
                code: status::StatusCode::Error as i32,
            },
            None => Status {
                message: String::new(),
                code: status::StatusCode::Unset as i32,
            },
        };
        opentelemetry_proto::tonic::trace::v1::Span {
            trace_id: s.context.trace_id.to_vec(),
            span_id: s.context.span_id.to_vec(),
            trace_state: self
                .state
                .as_deref()
                .map(|t| redactor.redact_str(t))
                .unwrap_or_default(),
            parent_span_id: s.parent.map(|p| p.to_vec()).unwrap_or_default(),
            flags: u32::from(s.context.flags),
            name: redactor.redact_str(&s.name),
            kind: kind as i32,
            start_time_unix_nano: unix_nanos(s.start),
            end_time_unix_nano: unix_nanos(s.end.max(s.start)),
            attributes: s
                .attributes
                .iter()
                .map(|(k, v)| key_value(k, v, redactor))
                .collect(),
            links: s
                .links
                .iter()
                .map(|l| span::Link {
                    trace_id: l.trace_id.to_vec(),
                    span_id: l.span_id.to_vec(),
                    flags: u32::from(l.flags),
                    ..span::Link::default()
                })
                .collect(),
            status: Some(status),
            ..opentelemetry_proto::tonic::trace::v1::Span::default()
        }
    }
}

/// The resource of every export: `service.name` and `OTEL_RESOURCE_ATTRIBUTES`, redacted.
pub(crate) fn resource(config: &Config, redactor: &Redactor) -> Resource {
    let mut attributes = vec![key_value(
        "service.name",
        &Value::Str(config.service_name.clone()),
        redactor,
    )];
    for (key, value) in &config.resource {
        if key != "service.name" {
            attributes.push(key_value(key, &Value::Str(value.clone()), redactor));
        }
    }
    Resource {
        attributes,
        ..Resource::default()
    }
}

/// The instrumentation scope of every export: this program.
pub(crate) fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "parent-tool-dispatch".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..InstrumentationScope::default()
    }
}

pub(crate) fn key_value(key: &str, value: &Value, redactor: &Redactor) -> KeyValue {
    let value = match value {
        Value::Str(text) => any_value::Value::StringValue(redactor.redact_str(text)),
        Value::Int(n) => any_value::Value::IntValue(*n),
        Value::Bool(b) => any_value::Value::BoolValue(*b),
    };
    KeyValue {
        key: redactor.redact_str(key),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

pub(crate) fn unix_nanos(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn trace(protocol: Protocol, parent: Option<&str>) -> Trace {
        let config = Config {
            url: "http://127.0.0.1:1/v1/traces".into(),
            protocol,
            headers: Vec::new(),
            timeout: std::time::Duration::from_millis(100),
            service_name: "svc".into(),
            resource: vec![("host.dir".into(), "/srv/secret-place/x".into())],
            metrics_url: None,
        };
        let mut vars = vec![("TRACESTATE".to_string(), "rojo=1".to_string())];
        vars.push((
            "TRACEPARENT".to_string(),
            parent.unwrap_or("garbage").to_string(),
        ));
        Trace::start(config, &HostEnv::with(vars))
    }

    #[test]
    fn the_encoding_decodes_with_the_official_messages_and_is_redacted() {
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let mut trace = trace(Protocol::Protobuf, Some(parent));
        let now = SystemTime::now();
        trace
            .step("admit", now, now)
            .set("k", Value::Str("hunter2-secret-value".into()));
        let mut call = trace.call_span("execute_tool t".into(), now, now);
        call.set("a", Value::Int(3));
        call.error = Some("tool_failed".into());
        let mut redactor = Redactor::new();
        redactor.add_secret("hunter2-secret-value");
        redactor.add_host_path("/srv/secret-place");
        let body = trace.encode(&call, &redactor);
        let decoded = ExportTraceServiceRequest::decode(&body[..]).unwrap();
        let spans = &decoded.resource_spans[0].scope_spans[0].spans;
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].name, "execute_tool t");
        assert_eq!(hex(&spans[0].trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex(&spans[0].parent_span_id), "00f067aa0ba902b7");
        assert_eq!(spans[1].parent_span_id, spans[0].span_id);
        assert_eq!(spans[0].status.as_ref().unwrap().code, 2);
        assert_eq!(spans[0].trace_state, "rojo=1");
        let text = String::from_utf8_lossy(&body);
        assert!(!text.contains("hunter2-secret-value"));
        assert!(!text.contains("/srv/secret-place"));
    }

    #[test]
    fn json_is_otlp_json_and_a_malformed_parent_starts_a_new_trace() {
        let trace = trace(Protocol::Json, None);
        let now = SystemTime::now();
        let call = trace.call_span("execute_tool t".into(), now, now);
        let body = trace.encode(&call, &Redactor::new());
        let decoded: ExportTraceServiceRequest = serde_json::from_slice(&body).unwrap();
        let span = &decoded.resource_spans[0].scope_spans[0].spans[0];
        assert!(span.parent_span_id.is_empty());
        assert_eq!(span.trace_state, "");
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let id = &json["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"];
        assert_eq!(id.as_str(), Some(trace.context().trace_id_hex().as_str()));
    }

    fn hex(bytes: &[u8]) -> String {
        crate::context::to_hex(bytes)
    }
}
