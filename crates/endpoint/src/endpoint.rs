//! The `host_endpoint` exchange (SPEC §11): one HTTP `POST` of the validated request to the
//! host's endpoint, bounded in time and size, handing back the HTTP status and the body for
//! [`ptd_wire::judge`] to judge exactly like an adapter's stdout.
//!
//! It owns: reading the endpoint's URL and token on the host (through [`HostEnv`], at dispatch
//! time), every check that must pass before a connection ([`target`]), the HTTP client's
//! configuration, the deadline, signals, and the size cap on the answer ([`exchange`]).
//!
//! Invariants:
//! - Nothing is sent unless every check passed: an unset, empty or non-absolute-`http(s)` URL,
//!   a method other than `POST`, a named but unset or empty token, plain `http` to an IP
//!   address that is not loopback, an unusable `--ca-cert` — each is an [`Unconfigured`], before
//!   any socket. Plain `http` to a host name is checked after resolution, before connecting:
//!   every address must be loopback ([`Failure::Unconfigured`] otherwise); `localhost` and the
//!   names under it are loopback by definition and never looked up (SPEC §11.1).
//! - The host is resolved by [`resolve`] before the HTTP client starts, within the deadline; a
//!   failed lookup is [`Unreachable::Lookup`] at once, [`Failure::Timeout`] only when the
//!   deadline passed.
//! - The URL leaves this module only as its origin (`scheme://host:port`) and the token not at
//!   all: no error, message or `Debug` output here carries either ([`Target`]'s `Debug` is
//!   written by hand for that reason; the HTTP client's own error texts, which may quote the
//!   URL, are never shown).
//! - Redirects are never followed (a bearer token must not travel to another origin), no proxy
//!   is used (proxy variables are not read: a proxy would see the token of a plain-`http`
//!   loopback endpoint), and no compression is offered (the body is judged as sent).
//! - HTTPS verifies the server against the platform's roots plus `--ca-cert`.
//! - The whole exchange — resolve, connect, TLS, send, receive — ends by the deadline, whatever
//!   the server does (accept and never answer, trickle bytes); a signal ends the wait at once.
//!   The exchange runs on its own thread, which the HTTP client's own global timeout (the same
//!   deadline) ends shortly after if it was abandoned.
//! - At most `max_bytes` + one read of the body is ever held in memory.
//!
//! It must not judge the body (the judge does), redact or print anything (the report does).

use ptd_sys::hostenv::HostEnv;
use ptd_sys::interrupt::Interrupts;
use ptd_wire::envelope::bridge::EndpointSpec;
pub use ptd_wire::error::endpoint::{Unconfigured, Unreachable};
use std::fmt;
use std::io::Read;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig, TlsProvider};

/// The only method an endpoint is called with.
pub const METHOD: &str = "POST";
/// Largest `--ca-cert` file read.
const MAX_CA_CERT_BYTES: u64 = 1024 * 1024;
/// How often the waiting thread looks at signals.
const POLL: Duration = Duration::from_millis(20);
/// Size of one read of the body.
const READ_CHUNK: usize = 64 * 1024;

/// Where and how to send: everything [`exchange`] needs, checked.
#[derive(Clone)]
pub struct Target {
    /// The URL as sent (no fragment). Secret beyond its origin.
    url: String,
    origin: String,
    token: Option<String>,
    https: bool,
    /// The host as the URL writes it (an IPv6 literal in brackets), and the port.
    host: String,
    port: u16,
    /// Plain `http` to a host name: every address it resolves to must be loopback.
    loopback_only: bool,
    /// The `url_env` variable's name (for the plain-`http` refusal after resolution).
    var: String,
    /// Where the host name is resolved from (the system's files; tests point them elsewhere).
    sources: resolve::Sources,
    /// `--ca-cert`'s certificates, trusted besides the platform's roots (which the exchange
    /// loads itself, within its deadline).
    extra_roots: Arc<Vec<Certificate<'static>>>,
    /// `traceparent` and `tracestate` (SPEC §20), sent with the request when set.
    trace_headers: Vec<(&'static str, String)>,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("origin", &self.origin)
            .field("token", &self.token.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

impl Target {
    /// Send the caller's span context (SPEC §20): `traceparent`, and `tracestate` when
    /// there is one.
    pub fn with_trace_context(mut self, traceparent: String, tracestate: Option<&str>) -> Target {
        self.trace_headers = vec![("traceparent", traceparent)];
        if let Some(state) = tracestate {
            self.trace_headers.push(("tracestate", state.to_string()));
        }
        self
    }

    /// `scheme://host:port`: the only part of the URL that may be shown.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Plain `http` to a host name that is not `localhost`: the exchange refuses to connect
    /// unless every address the name resolves to is loopback (SPEC §11.1).
    pub fn loopback_checked_after_resolution(&self) -> bool {
        self.loopback_only
    }

    /// What of the URL is secret, as exact secrets for the redactor, when the URL carries more
    /// than its origin (a path or a query may hold a credential: a capability path, a signed
    /// query). An endpoint never sends the absolute URL back, but its error pages echo what it
    /// received ("Cannot POST /hooks/…"), so each piece a server may quote is registered:
    ///
    /// - the URL as sent, and its request target (path and query, as on the request line);
    /// - the path alone (without the query);
    /// - each query value (`v` of `k=v`, or the whole of an item without `=`).
    ///
    /// Each also as it reads percent-decoded (and with `+` as a space, form-style) when that
    /// differs. The redactor adds its own encodings of each (JSON-escaped, percent-encoded,
    /// base64). Only pieces that pass [`ptd_wire::redact::qualifies_as_secret`] are returned (at
    /// least 8 characters, not a number or a boolean): `/`, `1` or `json` would shred every
    /// envelope and protect nothing. Path segments are not registered on their own: a segment
    /// is too often a common word (`webhooks`).
    pub fn secret_parts(&self) -> Vec<String> {
        let rest = self
            .url
            .get(self.url.find("://").map_or(0, |i| i + 3)..)
            .unwrap_or_default();
        let target = rest.find(['/', '?']).map_or("", |i| &rest[i..]);
        if matches!(target, "" | "/") {
            return Vec::new();
        }
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let mut pieces = vec![self.url.clone(), target.to_string()];
        if path != "/" {
            pieces.push(path.to_string());
        }
        for item in query.split('&') {
            pieces.push(item.split_once('=').map_or(item, |(_, v)| v).to_string());
        }
        let decoded: Vec<String> = pieces
            .iter()
            .flat_map(|p| [percent_decoded(p, false), percent_decoded(p, true)])
            .flatten()
            .collect();
        pieces.extend(decoded);
        let mut parts: Vec<String> = Vec::new();
        for piece in pieces {
            if ptd_wire::redact::qualifies_as_secret(&piece) && !parts.contains(&piece) {
                parts.push(piece);
            }
        }
        parts
    }
}

/// `text` with its `%XX` escapes decoded (and `+` as a space when `plus_is_space`), when that
/// changes it and the result is UTF-8.
fn percent_decoded(text: &str, plus_is_space: bool) -> Option<String> {
    let bytes = text.as_bytes();
    let hex = |b: u8| char::from(b).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escape = match bytes.get(i + 1..i + 3) {
            Some(&[high, low]) if bytes[i] == b'%' => hex(high).zip(hex(low)),
            _ => None,
        };
        match (escape, bytes[i]) {
            (Some((high, low)), _) => {
                out.extend(u8::try_from(high * 16 + low).ok());
                i += 3;
                continue;
            }
            (None, b'+') if plus_is_space => out.push(b' '),
            (None, b) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok().filter(|d| d != text)
}

/// Check the endpoint as the host configured it (SPEC §11), before anything is sent: the
/// method, the URL in `url_env`, the token in `token_env`, plain `http` only to loopback, and
/// `--ca-cert` (read and parsed here, whatever the scheme).
pub fn target(
    spec: &EndpointSpec,
    token_env: Option<&str>,
    ca_cert: Option<&Path>,
    env: &HostEnv,
) -> Result<Target, Unconfigured> {
    if spec.method != METHOD {
        return Err(Unconfigured::Method {
            method: spec.method.clone(),
        });
    }
    let var = spec.url_env.clone();
    let text = match env.var(&var) {
        None => return Err(Unconfigured::UrlUnset { var }),
        Some(text) if text.is_empty() => return Err(Unconfigured::UrlEmpty { var }),
        Some(text) => text,
    };
    let url = Url::parse(&text).map_err(|why| Unconfigured::UrlInvalid {
        var: var.clone(),
        why,
    })?;
    let token = match token_env {
        None => None,
        Some(name) => {
            let var = name.to_string();
            match env.var(name) {
                None => return Err(Unconfigured::TokenUnset { var }),
                Some(token) if token.is_empty() => return Err(Unconfigured::TokenEmpty { var }),
                Some(token) if !token.bytes().all(|b| b.is_ascii_graphic()) => {
                    return Err(Unconfigured::TokenInvalid { var })
                }
                Some(token) => Some(token),
            }
        }
    };
    // An IP literal is known now; a name (other than `localhost`, which is loopback by
    // definition) only once resolved, just before connecting (SPEC §11.1).
    if !url.https && !url.loopback && !url.name {
        return Err(Unconfigured::PlainHttp {
            var,
            origin: url.origin,
            resolved: false,
        });
    }
    let extra_roots = ca_cert.map(read_ca_cert).transpose()?.unwrap_or_default();
    Ok(Target {
        url: url.request,
        origin: url.origin,
        token,
        https: url.https,
        loopback_only: !url.https && !url.loopback,
        host: url.host,
        port: url.port,
        var,
        sources: sources(env),
        extra_roots: Arc::new(extra_roots),
        trace_headers: Vec::new(),
    })
}

/// The variable with which tests point the resolver at their own files and a scripted
/// nameserver: `PORT:DIR`, `DIR` holding `hosts` and `resolv.conf`, the nameservers listening
/// on `PORT`. Read in debug builds only; release builds always use the system's files.
pub(crate) const TEST_RESOLVER_ENV: &str = "PARENT_TOOL_DISPATCH_TEST_RESOLVER";

/// Where names are resolved for this host: the system's files, or — in a debug build — those
/// [`TEST_RESOLVER_ENV`] names. The endpoint and the egress proxy (SPEC §17) both resolve
/// through it.
pub fn sources(env: &HostEnv) -> resolve::Sources {
    test_sources(env).unwrap_or_else(resolve::Sources::system)
}

fn test_sources(env: &HostEnv) -> Option<resolve::Sources> {
    if !cfg!(debug_assertions) {
        return None;
    }
    let value = env.var(TEST_RESOLVER_ENV)?;
    let (port, dir) = value.split_once(':')?;
    let dir = PathBuf::from(dir);
    Some(resolve::Sources {
        hosts: dir.join("hosts"),
        resolv_conf: dir.join("resolv.conf"),
        dns_port: port.parse().ok()?,
    })
}

/// The certificates of a `--ca-cert` PEM file (at most 1 MiB).
fn read_ca_cert(path: &Path) -> Result<Vec<Certificate<'static>>, Unconfigured> {
    let refuse = |why: String| Unconfigured::CaCert {
        path: path.to_path_buf(),
        why,
    };
    let bytes = ptd_sys::fs::read_file(path, MAX_CA_CERT_BYTES).map_err(|e| match e {
        ptd_sys::fs::ReadError::TooLarge { .. } => refuse("is larger than 1 MiB".into()),
        ptd_sys::fs::ReadError::NotRegular(_) => refuse(format!("could not be read: {e}")),
        e => refuse(format!(
            "could not be read: {}",
            std::io::Error::from(e).kind()
        )),
    })?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&bytes) {
        match item {
            Ok(PemItem::Certificate(cert)) => certs.push(cert),
            Ok(_) => {}
            Err(_) => return Err(refuse("is not valid PEM".into())),
        }
    }
    if certs.is_empty() {
        return Err(refuse("holds no PEM certificate".into()));
    }
    Ok(certs)
}

/// The platform's roots (what `rustls-native-certs` finds: the system store, or
/// `SSL_CERT_FILE`/`SSL_CERT_DIR`) plus `extra`. A store that cannot be read adds nothing:
/// verification then fails closed.
pub fn trust_anchors(extra: &[Certificate<'static>]) -> Vec<Certificate<'static>> {
    let platform = rustls_native_certs::load_native_certs();
    let mut roots: Vec<Certificate<'static>> = platform
        .certs
        .iter()
        .map(|der| Certificate::from_der(der.as_ref()).to_owned())
        .collect();
    roots.extend(extra.iter().cloned());
    roots
}

/// An endpoint URL, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Url {
    https: bool,
    /// A loopback IP literal, or `localhost` or a name under `.localhost` (RFC 6761).
    loopback: bool,
    /// The host is a name (not an IP literal).
    name: bool,
    /// The host as written (an IPv6 literal in brackets), and the port.
    host: String,
    port: u16,
    /// `scheme://host:port`, scheme and host lower-cased, port always written.
    origin: String,
    /// What is sent: the URL without its fragment.
    request: String,
}

impl Url {
    /// Parse an absolute `http`/`https` URL strictly: visible ASCII only, no userinfo, a host,
    /// an optional port in 1–65535. The `why` never quotes the value.
    fn parse(text: &str) -> Result<Url, &'static str> {
        if !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("it holds spaces, control or non-ASCII characters");
        }
        let (scheme, rest) = text
            .split_once("://")
            .ok_or("it has no scheme (expected http:// or https://)")?;
        let https = if scheme.eq_ignore_ascii_case("https") {
            true
        } else if scheme.eq_ignore_ascii_case("http") {
            false
        } else {
            return Err("its scheme is not http or https");
        };
        let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(end);
        if authority.contains('@') {
            return Err("it carries credentials before the host; put the token in token_env");
        }
        let (host, port) = split_host_port(authority)?;
        let port = match port {
            None => {
                if https {
                    443
                } else {
                    80
                }
            }
            Some(digits) => digits
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0 && digits.bytes().all(|b| b.is_ascii_digit()))
                .ok_or("its port is not a number from 1 to 65535")?,
        };
        let is_name = matches!(host, Host::Name(_));
        let (shown_host, loopback) = match host {
            Host::Name(name) => {
                let name = name.to_ascii_lowercase();
                let loopback = resolve::is_localhost(&name);
                (name, loopback)
            }
            Host::V4(ip) => (ip.to_string(), ip.is_loopback()),
            Host::V6(ip) => (
                format!("[{ip}]"),
                ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
            ),
        };
        let scheme = if https { "https" } else { "http" };
        let path = match path {
            "" => "/".to_string(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_string(),
        };
        let request = format!("{scheme}://{authority}{path}");
        // The HTTP client must accept it too, so that it fails here rather than after the
        // checks said yes.
        if ureq::http::Uri::try_from(request.as_str()).is_err() {
            return Err("its path or query holds characters a URL cannot carry");
        }
        let written_host = authority
            .rsplit_once(':')
            .filter(|(_, p)| !p.contains(']'))
            .map_or(authority, |(host, _)| host)
            .to_string();
        Ok(Url {
            https,
            loopback,
            name: is_name,
            host: written_host,
            port,
            origin: format!("{scheme}://{shown_host}:{port}"),
            request,
        })
    }
}

enum Host<'a> {
    Name(&'a str),
    V4(Ipv4Addr),
    V6(Ipv6Addr),
}

fn split_host_port(authority: &str) -> Result<(Host<'_>, Option<&str>), &'static str> {
    if authority.is_empty() {
        return Err("it has no host");
    }
    if let Some(inner) = authority.strip_prefix('[') {
        let (ip, after) = inner
            .split_once(']')
            .ok_or("its IPv6 address has no closing bracket")?;
        let ip: Ipv6Addr = ip.parse().map_err(|_| "its IPv6 address is not valid")?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or("it has characters after the host")?,
            ),
        };
        return Ok((Host::V6(ip), port));
    }
    let (host, port) = match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    };
    if host.is_empty() {
        return Err("it has no host");
    }
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return Ok((Host::V4(ip), port));
    }
    let name_ok = host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if !name_ok {
        return Err("its host is not a name or an IP address");
    }
    Ok((Host::Name(host), port))
}

/// The `Idempotency-Key` for a request id: the id itself when it is visible ASCII without
/// `%`; otherwise every byte outside that set (and `%`) percent-encoded, so that two
/// different ids never share a key and nothing can break out of the header line.
pub fn idempotency_key(request_id: &str) -> String {
    if request_id
        .bytes()
        .all(|b| b.is_ascii_graphic() && b != b'%')
    {
        return request_id.to_string();
    }
    let mut out = String::with_capacity(request_id.len() * 3);
    for b in request_id.bytes() {
        if b.is_ascii_graphic() && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The bounds of one exchange.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub timeout_ms: u64,
    /// Cap on the response body (`--max-output-bytes`).
    pub max_bytes: usize,
}

/// A complete answer: its HTTP status and body (at most `max_bytes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Why an exchange ended without a complete answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The deadline passed.
    Timeout,
    /// A termination signal arrived.
    Interrupted(ptd_sys::signal::Signal),
    /// The body is over the cap; reading stopped there.
    TooLarge,
    /// No HTTP exchange could be completed.
    Unreachable(Unreachable),
    /// Plain `http` to a host name that resolved to an address that is not loopback: nothing
    /// was sent.
    Unconfigured(Unconfigured),
    /// The dispatcher could not run the exchange (a thread could not be started).
    Internal(String),
}

/// One exchange: its outcome and what was observed on the way (for diagnostics), also when
/// it failed part-way.
#[derive(Debug, Clone)]
pub struct Exchanged {
    pub outcome: Result<Response, Failure>,
    /// The status line's code, once one was received.
    pub http_status: Option<u16>,
    /// Body bytes received.
    pub response_bytes: u64,
}

/// What the exchange thread reports as it goes (0 = no status yet).
#[derive(Default)]
struct Progress {
    status: AtomicU64,
    bytes: AtomicU64,
}

/// POST `body` to the target and wait for the answer, at most until the deadline
/// (`limits.timeout_ms` from now), giving up at once on a termination signal.
pub fn exchange(
    target: &Target,
    body: Vec<u8>,
    request_id: &str,
    limits: Limits,
    interrupts: &Interrupts,
) -> Exchanged {
    let started = Instant::now();
    let deadline = started + Duration::from_millis(limits.timeout_ms);
    let progress = Arc::new(Progress::default());
    let observed = |outcome: Result<Response, Failure>, progress: &Progress| Exchanged {
        outcome,
        http_status: match progress.status.load(Ordering::SeqCst) {
            0 => None,
            s => u16::try_from(s).ok(),
        },
        response_bytes: progress.bytes.load(Ordering::SeqCst),
    };
    if let Some(signal) = interrupts.received() {
        return observed(Err(Failure::Interrupted(signal)), &progress);
    }
    let call = Call {
        target: target.clone(),
        body,
        key: idempotency_key(request_id),
        max_bytes: limits.max_bytes,
        deadline,
    };
    let (tx, rx) = mpsc::channel();
    let worker_progress = Arc::clone(&progress);
    let spawned = std::thread::Builder::new()
        .name("endpoint".into())
        .spawn(move || {
            let _ = tx.send(call.run(&worker_progress));
        });
    if let Err(err) = spawned {
        return observed(
            Err(Failure::Internal(format!(
                "the exchange thread could not start: {}",
                err.kind()
            ))),
            &progress,
        );
    }
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return observed(Err(Failure::Timeout), &progress);
        }
        match rx.recv_timeout(left.min(POLL)) {
            Ok(outcome) => return observed(outcome, &progress),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Some(signal) = interrupts.received() {
                    return observed(Err(Failure::Interrupted(signal)), &progress);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return observed(
                    Err(Failure::Internal("the exchange thread stopped".into())),
                    &progress,
                )
            }
        }
    }
}

/// What the exchange thread owns.
struct Call {
    target: Target,
    body: Vec<u8>,
    key: String,
    max_bytes: usize,
    deadline: Instant,
}

impl Call {
    fn run(self, progress: &Progress) -> Result<Response, Failure> {
        let target = &self.target;
        let addrs = resolve::resolve(&target.host, target.port, self.deadline, &target.sources)
            .map_err(|err| match err {
                resolve::ResolveError::TimedOut => Failure::Timeout,
                resolve::ResolveError::Failed(why) => {
                    Failure::Unreachable(Unreachable::Lookup(why))
                }
            })?;
        // Checked after resolution, before connecting: every address, not just the first.
        if target.loopback_only && !addrs.iter().all(|a| is_loopback(a.ip())) {
            return Err(Failure::Unconfigured(Unconfigured::PlainHttp {
                var: target.var.clone(),
                origin: target.origin.clone(),
                resolved: true,
            }));
        }
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Failure::Timeout);
        }
        let mut tls = TlsConfig::builder()
            .provider(TlsProvider::Rustls)
            .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()));
        if self.target.https {
            // Here rather than in `target`: reading the platform's store is I/O, so it runs
            // within the deadline.
            let roots = trust_anchors(&self.target.extra_roots);
            tls = tls.root_certs(RootCerts::Specific(Arc::new(roots)));
        }
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None)
            .user_agent(concat!("parent-tool-dispatch/", env!("CARGO_PKG_VERSION")))
            .accept("application/json")
            .accept_encoding(ureq::config::AutoHeaderValue::None)
            .timeout_global(Some(left))
            .max_idle_connections(0)
            .tls_config(tls.build())
            .build();
        let agent = ureq::Agent::with_parts(
            config,
            ureq::unversioned::transport::DefaultConnector::new(),
            Resolved(addrs),
        );
        let mut request = agent
            .post(&self.target.url)
            .header("Content-Type", "application/json")
            .header("Idempotency-Key", &self.key);
        if let Some(token) = &self.target.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        for (name, value) in &self.target.trace_headers {
            request = request.header(*name, value.as_str());
        }
        let response = request.send(&self.body[..]).map_err(classify)?;
        let status = response.status().as_u16();
        progress.status.store(u64::from(status), Ordering::SeqCst);
        let body = response.into_body();
        if body
            .content_length()
            .is_some_and(|n| n > self.max_bytes as u64)
        {
            return Err(Failure::TooLarge);
        }
        let mut reader = body.into_reader();
        let mut out = Vec::new();
        let mut chunk = vec![0u8; READ_CHUNK];
        loop {
            let n = match reader.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(classify(ureq::Error::from(e))),
            };
            progress.bytes.fetch_add(n as u64, Ordering::SeqCst);
            if out.len() + n > self.max_bytes {
                return Err(Failure::TooLarge);
            }
            out.extend_from_slice(&chunk[..n]);
        }
        Ok(Response { status, body: out })
    }
}

/// A loopback address: `127.0.0.0/8`, `::1`, or `::ffff:127.x.y.z`.
fn is_loopback(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
        std::net::IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// The HTTP client's resolver: the addresses [`resolve`] found (and checked) before the
/// client was started, not the C library's (see its module docs). The OTLP export uses it too.
#[derive(Debug)]
pub struct Resolved(pub Vec<std::net::SocketAddr>);

impl ureq::unversioned::resolver::Resolver for Resolved {
    fn resolve(
        &self,
        _uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        _timeout: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        let mut out = self.empty();
        for addr in config
            .ip_family()
            .keep_wanted(self.0.iter().copied())
            .take(16)
        {
            out.push(addr);
        }
        if out.is_empty() {
            return Err(ureq::Error::HostNotFound);
        }
        Ok(out)
    }
}

/// The HTTP client's error, in our terms. Its own texts are never kept: some quote the URL.
fn classify(error: ureq::Error) -> Failure {
    use std::io::ErrorKind as K;
    let unreachable = |why| Failure::Unreachable(why);
    match error {
        ureq::Error::Timeout(_) => Failure::Timeout,
        ureq::Error::HostNotFound => unreachable(Unreachable::HostNotFound),
        ureq::Error::Rustls(e) => unreachable(Unreachable::Tls(e.to_string())),
        ureq::Error::Tls(why) => unreachable(Unreachable::Tls(why.to_string())),
        ureq::Error::Protocol(_) | ureq::Error::LargeResponseHeader(..) => {
            unreachable(Unreachable::Protocol)
        }
        ureq::Error::Io(e) => {
            if let Some(tls) = e.get_ref().and_then(|r| r.downcast_ref::<rustls::Error>()) {
                return unreachable(Unreachable::Tls(tls.to_string()));
            }
            match e.kind() {
                K::TimedOut | K::WouldBlock => Failure::Timeout,
                K::ConnectionRefused => unreachable(Unreachable::Refused),
                K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof => {
                    unreachable(Unreachable::Reset)
                }
                kind => unreachable(Unreachable::Io(kind)),
            }
        }
        ureq::Error::ConnectionFailed => unreachable(Unreachable::Refused),
        ureq::Error::BadUri(_) | ureq::Error::Http(_) => unreachable(Unreachable::Client),
        _ => unreachable(Unreachable::Client),
    }
}

pub mod resolve;

#[cfg(test)]
mod tests;
