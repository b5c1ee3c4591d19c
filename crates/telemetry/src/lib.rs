//! parent-tool-dispatch's telemetry (SPEC §20): one call's spans, the W3C trace context they
//! join and pass on, and one bounded OTLP/HTTP export of them.
//!
//! It owns: reading the standard `OTEL_*` variables from the job's [`HostEnv`] ([`Config`]:
//! off unless an OTLP endpoint is set, off with `OTEL_SDK_DISABLED=true`), parsing and writing
//! `traceparent`/`tracestate` ([`SpanContext`], [`tracestate`]), new trace and span ids, the
//! spans of one call ([`Trace`], [`Span`]) encoded as the OpenTelemetry project's own OTLP
//! messages (`opentelemetry-proto`: protobuf by `prost`, or OTLP/JSON by `serde_json`), and
//! one call's metrics ([`CallMetrics`], OTLP metrics messages), and
//! the export: one POST through `ureq`, to addresses resolved by `ptd-endpoint`'s resolver,
//! bounded by `OTEL_EXPORTER_OTLP_TIMEOUT` and at most [`MAX_EXPORT_TIMEOUT`] ([`export`]).
//!
//! Invariants:
//! - Every string that leaves in an export — span names, attribute values, the resource's
//!   attributes, the trace state — passes through the job's [`Redactor`] in [`Trace::encode`],
//!   the only way spans become bytes; the caller cannot hand over unredacted text.
//! - Nothing here runs unless telemetry is on: [`Config::from_env`] returning `None` is the
//!   whole cost of it being off (no thread, no allocation beyond reading the variables).
//! - The export never outlives its bound and starts no thread of its own: the HTTP client's
//!   global timeout covers resolve to last byte.
//!
//! It must not: see a request's `input`, an answer's `output` or an adapter's stderr (the
//! caller gives only the attributes of SPEC §20); print anything (the caller words the one
//! warning); decide the envelope or the exit status; start a process.

// Every `unsafe` block of the product lives in `ptd-sys` (ARCHITECTURE.md).
#![deny(unsafe_code)]
#![cfg_attr(test, allow(clippy::disallowed_methods, clippy::too_many_lines))]

mod config;
mod context;
mod export;
mod metrics;
mod span;

pub use config::{Config, Protocol, MAX_EXPORT_TIMEOUT};
pub use context::{tracestate, SpanContext};
pub use export::export;
pub use metrics::{CallMetrics, DURATION_BUCKETS};
pub use span::{Span, Trace, Value};

#[cfg(doc)]
use ptd_sys::hostenv::HostEnv;
#[cfg(doc)]
use ptd_wire::redact::Redactor;
