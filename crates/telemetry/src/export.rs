//! One bounded OTLP/HTTP export: POST the encoded spans, never past the configured timeout.

use crate::config::{Config, Protocol};
use ptd_endpoint::{resolve, Resolved};
use ptd_sys::hostenv::HostEnv;
use std::sync::Arc;
use std::time::{Duration, Instant};
use ureq::tls::{RootCerts, TlsConfig, TlsProvider};

/// POST `body` to `url` (the configured traces or metrics URL) with the configured protocol
/// and headers, before `deadline` (the caller's: one bound for everything a call exports).
/// `Err` says why in a few words of our own (never the HTTP client's text, which may quote
/// the URL).
pub fn export(
    config: &Config,
    url: &str,
    body: &[u8],
    env: &HostEnv,
    deadline: Instant,
) -> Result<(), String> {
    let uri: ureq::http::Uri = url
        .parse()
        .map_err(|_| "the endpoint is not a URL".to_string())?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err("the endpoint is not an http or https URL".into()),
    };
    let host = uri.host().ok_or("the endpoint has no host")?;
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let timed_out = || format!("no answer within {} ms", config.timeout.as_millis());
    let addrs = resolve::resolve(host, port, deadline, &ptd_endpoint::sources(env)).map_err(
        |err| match err {
            resolve::ResolveError::TimedOut => timed_out(),
            resolve::ResolveError::Failed(_) => "the collector's host name did not resolve".into(),
        },
    )?;
    let left = deadline.saturating_duration_since(Instant::now());
    if left < Duration::from_millis(1) {
        return Err(timed_out());
    }
    let mut tls = TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()));
    if https {
        let roots = ptd_endpoint::trust_anchors(&[]);
        tls = tls.root_certs(RootCerts::Specific(Arc::new(roots)));
    }
    let agent_config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .proxy(None)
        .user_agent(concat!("parent-tool-dispatch/", env!("CARGO_PKG_VERSION")))
        .timeout_global(Some(left))
        .max_idle_connections(0)
        .tls_config(tls.build())
        .build();
    let agent = ureq::Agent::with_parts(
        agent_config,
        ureq::unversioned::transport::DefaultConnector::new(),
        Resolved(addrs),
    );
    let content_type = match config.protocol {
        Protocol::Protobuf => "application/x-protobuf",
        Protocol::Json => "application/json",
    };
    let mut request = agent.post(url).header("Content-Type", content_type);
    for (name, value) in &config.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let response = request
        .send(body)
        .map_err(|err| describe(&err, config.timeout))?;
    let status = response.status().as_u16();
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(format!("the collector answered HTTP {status}"))
    }
}

fn describe(error: &ureq::Error, timeout: Duration) -> String {
    match error {
        ureq::Error::Timeout(_) => format!("no answer within {} ms", timeout.as_millis()),
        ureq::Error::Io(io) => format!("the connection failed ({:?})", io.kind()),
        ureq::Error::ConnectionFailed => "could not connect".into(),
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) => "the TLS handshake failed".into(),
        ureq::Error::Http(_) => "a header of OTEL_EXPORTER_OTLP_HEADERS is invalid".into(),
        _ => "the request failed".into(),
    }
}
