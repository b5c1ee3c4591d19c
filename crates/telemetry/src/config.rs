//! The standard `OTEL_*` variables (SPEC §20), read from the job's host environment.

use ptd_sys::hostenv::HostEnv;
use std::time::Duration;

/// The longest an export may take, whatever `OTEL_EXPORTER_OTLP_TIMEOUT` says (SPEC §20).
pub const MAX_EXPORT_TIMEOUT: Duration = Duration::from_secs(2);

/// The service name when `OTEL_SERVICE_NAME` is unset.
const DEFAULT_SERVICE_NAME: &str = "parent-tool-dispatch";

/// How spans are sent (`OTEL_EXPORTER_OTLP_PROTOCOL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `http/protobuf`, the default.
    Protobuf,
    /// `http/json`.
    Json,
}

/// Where and how one call's spans are exported.
#[derive(Debug, Clone)]
pub struct Config {
    /// The traces URL: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as given, else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`.
    pub url: String,
    pub protocol: Protocol,
    /// `OTEL_EXPORTER_OTLP_HEADERS` (and `…_TRACES_HEADERS`), percent-decoded.
    pub headers: Vec<(String, String)>,
    /// `OTEL_EXPORTER_OTLP_TIMEOUT` (ms, default 10 s) capped at [`MAX_EXPORT_TIMEOUT`].
    pub timeout: Duration,
    /// `service.name`.
    pub service_name: String,
    /// `OTEL_RESOURCE_ATTRIBUTES`, percent-decoded.
    pub resource: Vec<(String, String)>,
    /// The metrics URL: `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` as given, else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/metrics`; `None` when neither is set or
    /// `OTEL_METRICS_EXPORTER=none`. Metrics go with the spans: only while traces are on.
    pub metrics_url: Option<String>,
}

impl Config {
    /// The configuration in `env`, or `None` when telemetry is off: neither endpoint
    /// variable set (or set empty), or `OTEL_SDK_DISABLED=true`.
    pub fn from_env(env: &HostEnv) -> Option<Config> {
        let set = |name: &str| env.var(name).filter(|v| !v.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return None;
        }
        let url = match set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            Some(url) => url.trim().to_string(),
            None => {
                let base = set("OTEL_EXPORTER_OTLP_ENDPOINT")?;
                format!("{}/v1/traces", base.trim().trim_end_matches('/'))
            }
        };
        let protocol = set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .map_or(Protocol::Protobuf, |p| match p.trim() {
                "http/json" => Protocol::Json,
                _ => Protocol::Protobuf,
            });
        let mut headers = pairs(set("OTEL_EXPORTER_OTLP_HEADERS").as_deref());
        headers.extend(pairs(set("OTEL_EXPORTER_OTLP_TRACES_HEADERS").as_deref()));
        let timeout = set("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
            .or_else(|| set("OTEL_EXPORTER_OTLP_TIMEOUT"))
            .and_then(|t| t.trim().parse::<u64>().ok())
            .map_or(MAX_EXPORT_TIMEOUT, Duration::from_millis)
            .min(MAX_EXPORT_TIMEOUT);
        let service_name = set("OTEL_SERVICE_NAME").unwrap_or_else(|| DEFAULT_SERVICE_NAME.into());
        let metrics_off = set("OTEL_METRICS_EXPORTER").is_some_and(|v| v.trim() == "none");
        let metrics_url = match set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") {
            _ if metrics_off => None,
            Some(url) => Some(url.trim().to_string()),
            None => set("OTEL_EXPORTER_OTLP_ENDPOINT")
                .map(|base| format!("{}/v1/metrics", base.trim().trim_end_matches('/'))),
        };
        Some(Config {
            url,
            protocol,
            headers,
            timeout,
            service_name,
            resource: pairs(set("OTEL_RESOURCE_ATTRIBUTES").as_deref()),
            metrics_url,
        })
    }
}

/// `key1=value1,key2=value2` (the W3C Baggage form the OTLP variables use), each side
/// trimmed and percent-decoded; a member without `=` or with an empty key is skipped.
fn pairs(text: Option<&str>) -> Vec<(String, String)> {
    let Some(text) = text else {
        return Vec::new();
    };
    text.split(',')
        .filter_map(|member| {
            let (key, value) = member.split_once('=')?;
            let key = percent_decoded(key.trim());
            (!key.is_empty()).then(|| (key, percent_decoded(value.trim())))
        })
        .collect()
}

/// `%XX` escapes decoded; anything else (a bad escape included) kept as written.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> HostEnv {
        let mut all: Vec<(String, String)> = [
            "OTEL_SDK_DISABLED",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_SERVICE_NAME",
            "OTEL_RESOURCE_ATTRIBUTES",
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            "OTEL_METRICS_EXPORTER",
        ]
        .iter()
        .map(|n| (n.to_string(), String::new()))
        .collect();
        all.extend(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        HostEnv::with(all)
    }

    #[test]
    fn off_unless_an_endpoint_is_set_and_not_disabled() {
        assert!(Config::from_env(&env(&[])).is_none());
        let on = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/")];
        let config = Config::from_env(&env(&on)).unwrap();
        assert_eq!(config.url, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(config.protocol, Protocol::Protobuf);
        assert_eq!(config.timeout, MAX_EXPORT_TIMEOUT);
        assert_eq!(config.service_name, "parent-tool-dispatch");
        assert_eq!(
            config.metrics_url.as_deref(),
            Some("http://127.0.0.1:4318/v1/metrics")
        );
        let off = [on[0], ("OTEL_SDK_DISABLED", "TRUE")];
        assert!(Config::from_env(&env(&off)).is_none());
    }

    #[test]
    fn the_traces_endpoint_is_used_as_given_and_the_rest_is_read() {
        let config = Config::from_env(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:2/custom"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b, x = y ,bad"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "150"),
            ("OTEL_SERVICE_NAME", "svc"),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod"),
        ]))
        .unwrap();
        assert_eq!(config.url, "http://b:2/custom");
        assert_eq!(config.protocol, Protocol::Json);
        assert_eq!(
            config.headers,
            vec![("api-key".into(), "a b".into()), ("x".into(), "y".into())]
        );
        assert_eq!(config.timeout, Duration::from_millis(150));
        assert_eq!(config.service_name, "svc");
        assert_eq!(config.resource.len(), 1);
        assert_eq!(config.metrics_url.as_deref(), Some("http://a:1/v1/metrics"));
        let metrics = [
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:2/t"),
            ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://c:3/m"),
        ];
        let config = Config::from_env(&env(&metrics)).unwrap();
        assert_eq!(config.metrics_url.as_deref(), Some("http://c:3/m"));
        let none = [metrics[0], metrics[1], ("OTEL_METRICS_EXPORTER", "none")];
        assert_eq!(Config::from_env(&env(&none)).unwrap().metrics_url, None);
        let traces_only = [metrics[0]];
        assert_eq!(
            Config::from_env(&env(&traces_only)).unwrap().metrics_url,
            None
        );
        let long = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "60000"),
        ];
        assert_eq!(
            Config::from_env(&env(&long)).unwrap().timeout,
            MAX_EXPORT_TIMEOUT
        );
    }
}
