//! One call's metrics (SPEC §20) as OTLP messages (`opentelemetry-proto`'s metrics): the
//! `gen_ai.execute_tool.duration` histogram by tool and status, and `parent_tool.calls` by
//! code, each one data point of delta temporality (a dispatcher process is one call).

use crate::config::{Config, Protocol};
use crate::span::{key_value, resource, scope, unix_nanos, Value};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::{
    metric, number_data_point, AggregationTemporality, Histogram, HistogramDataPoint, Metric,
    NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
};
use ptd_wire::redact::Redactor;
use std::time::SystemTime;

/// The duration histogram's upper bounds, in seconds: OTLP's explicit bounds here and the
/// `le` labels of `serve`'s `/metrics`.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// What one call's metrics say: its labels and its time.
#[derive(Debug, Clone)]
pub struct CallMetrics {
    /// `gen_ai.tool.name`: the tool as requested.
    pub tool: String,
    /// `parent_tool.status`: the envelope's status.
    pub status: String,
    /// `error.type`: the envelope's `error.code`, `None` for a call without one.
    pub code: Option<String>,
    pub start: SystemTime,
    pub end: SystemTime,
}

impl CallMetrics {
    /// The export body for `config`'s protocol; every label value through `redactor`.
    pub fn encode(&self, config: &Config, redactor: &Redactor) -> Vec<u8> {
        let (start, end) = (unix_nanos(self.start), unix_nanos(self.end.max(self.start)));
        let secs = self
            .end
            .duration_since(self.start)
            .map_or(0.0, |d| d.as_secs_f64());
        let text = |s: &str| Value::Str(s.to_string());
        let mut labels = vec![
            key_value("gen_ai.tool.name", &text(&self.tool), redactor),
            key_value("parent_tool.status", &text(&self.status), redactor),
        ];
        if let Some(code) = &self.code {
            labels.push(key_value("error.type", &text(code), redactor));
        }
        let mut buckets = vec![0u64; DURATION_BUCKETS.len() + 1];
        let slot = DURATION_BUCKETS
            .iter()
            .position(|le| secs <= *le)
            .unwrap_or(DURATION_BUCKETS.len());
        buckets[slot] = 1;
        let duration = Metric {
            name: "gen_ai.execute_tool.duration".into(),
            description: "The time of one tool call, from its request read to its envelope.".into(),
            unit: "s".into(),
            data: Some(metric::Data::Histogram(Histogram {
                data_points: vec![HistogramDataPoint {
                    attributes: labels,
                    start_time_unix_nano: start,
                    time_unix_nano: end,
                    count: 1,
                    sum: Some(secs),
                    bucket_counts: buckets,
                    explicit_bounds: DURATION_BUCKETS.to_vec(),
                    min: Some(secs),
                    max: Some(secs),
                    ..HistogramDataPoint::default()
                }],
                aggregation_temporality: AggregationTemporality::Delta as i32,
            })),
            ..Metric::default()
        };
        let code = self.code.as_deref().unwrap_or("");
        let calls = Metric {
            name: "parent_tool.calls".into(),
            description: "Tool calls, by the envelope's error code (empty when none).".into(),
            unit: "{call}".into(),
            data: Some(metric::Data::Sum(Sum {
                data_points: vec![NumberDataPoint {
                    attributes: vec![key_value("parent_tool.code", &text(code), redactor)],
                    start_time_unix_nano: start,
                    time_unix_nano: end,
                    value: Some(number_data_point::Value::AsInt(1)),
                    ..NumberDataPoint::default()
                }],
                aggregation_temporality: AggregationTemporality::Delta as i32,
                is_monotonic: true,
            })),
            ..Metric::default()
        };
        let request = ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(resource(config, redactor)),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(scope()),
                    metrics: vec![duration, calls],
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        };
        match config.protocol {
            Protocol::Protobuf => prost::Message::encode_to_vec(&request),
            // Serializing these plain structs cannot fail.
            Protocol::Json => serde_json::to_vec(&request).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use std::time::Duration;

    #[test]
    fn one_call_is_one_histogram_point_and_one_count_redacted() {
        let config = Config {
            url: "http://127.0.0.1:1/v1/traces".into(),
            protocol: Protocol::Protobuf,
            headers: Vec::new(),
            timeout: Duration::from_millis(100),
            service_name: "svc".into(),
            resource: Vec::new(),
            metrics_url: Some("http://127.0.0.1:1/v1/metrics".into()),
        };
        let start = SystemTime::now();
        let call = CallMetrics {
            tool: "tool-hunter2-secret".into(),
            status: "failed".into(),
            code: Some("tool_failed".into()),
            start,
            end: start + Duration::from_millis(30),
        };
        let mut redactor = Redactor::new();
        redactor.add_secret("hunter2-secret");
        let body = call.encode(&config, &redactor);
        assert!(!String::from_utf8_lossy(&body).contains("hunter2-secret"));
        let decoded = ExportMetricsServiceRequest::decode(&body[..]).unwrap();
        let metrics = &decoded.resource_metrics[0].scope_metrics[0].metrics;
        assert_eq!(metrics[0].name, "gen_ai.execute_tool.duration");
        let Some(metric::Data::Histogram(h)) = &metrics[0].data else {
            panic!("a histogram");
        };
        let point = &h.data_points[0];
        assert_eq!(point.count, 1);
        assert_eq!(point.bucket_counts.len(), DURATION_BUCKETS.len() + 1);
        assert_eq!(point.bucket_counts[4], 1, "30 ms is in the 0.05 s bucket");
        assert_eq!(metrics[1].name, "parent_tool.calls");
        let json = call.encode(
            &Config {
                protocol: Protocol::Json,
                ..config
            },
            &redactor,
        );
        let again: ExportMetricsServiceRequest = serde_json::from_slice(&json).unwrap();
        assert_eq!(again.resource_metrics[0].scope_metrics[0].metrics.len(), 2);
    }
}
