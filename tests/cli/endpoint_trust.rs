//! Where the `host_endpoint` mode's request goes (SPEC §11.1), with the endpoint servers of
//! `endpoint.rs`: only to an endpoint the host configured; HTTPS verified against `--ca-cert`
//! (nothing sent to a certificate that does not verify); and name resolution against a scripted
//! nameserver on a loopback UDP port — `localhost` without DNS, plain HTTP only to names whose
//! every address is loopback, and a failed lookup named at once.

use super::endpoint::{
    assert_no_secrets, endpoint_bridge, ok_answer, stderr_line, to, Server, SECRET_PATH,
    SERVER_BOUND, TOKEN, TOKEN_ENV, URL_ENV,
};
use super::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

#[test]
fn an_endpoint_the_host_did_not_configure_is_never_called() {
    let server = Server::start(ok_answer);
    let url = server.url();
    let port = server.port;
    let with_method = |method: &str| {
        let mut b = endpoint_bridge(10_000);
        b["dispatcher"]["endpoint"]["method"] = json!(method);
        b
    };
    type Case = (
        &'static str,
        Value,
        Vec<(&'static str, String)>,
        Vec<String>,
        &'static str,
    );
    let cases: Vec<Case> = vec![
        (
            "url unset",
            endpoint_bridge(10_000),
            vec![(TOKEN_ENV, TOKEN.into())],
            vec![],
            "is not set",
        ),
        (
            "url empty",
            endpoint_bridge(10_000),
            vec![(URL_ENV, "".into()), (TOKEN_ENV, TOKEN.into())],
            vec![],
            "is empty",
        ),
        (
            "no scheme",
            endpoint_bridge(10_000),
            vec![
                (URL_ENV, format!("127.0.0.1:{port}/x")),
                (TOKEN_ENV, TOKEN.into()),
            ],
            vec![],
            "no scheme",
        ),
        (
            "not http",
            endpoint_bridge(10_000),
            vec![
                (URL_ENV, format!("ftp://127.0.0.1:{port}/")),
                (TOKEN_ENV, TOKEN.into()),
            ],
            vec![],
            "not http or https",
        ),
        (
            "credentials in the url",
            endpoint_bridge(10_000),
            vec![
                (URL_ENV, format!("http://u:{TOKEN}@127.0.0.1:{port}/")),
                (TOKEN_ENV, TOKEN.into()),
            ],
            vec![],
            "credentials",
        ),
        (
            "method GET",
            with_method("GET"),
            vec![(URL_ENV, url.clone()), (TOKEN_ENV, TOKEN.into())],
            vec![],
            "only POST",
        ),
        (
            "token unset",
            endpoint_bridge(10_000),
            vec![(URL_ENV, url.clone())],
            vec![],
            "is not set",
        ),
        (
            "token empty",
            endpoint_bridge(10_000),
            vec![(URL_ENV, url.clone()), (TOKEN_ENV, "".into())],
            vec![],
            "is empty",
        ),
        (
            "token with a newline",
            endpoint_bridge(10_000),
            vec![
                (URL_ENV, url.clone()),
                (TOKEN_ENV, format!("{TOKEN}\r\nX-Evil: 1")),
            ],
            vec![],
            "cannot be sent",
        ),
        // TEST-NET-1: refused before any connection is tried.
        (
            "plain http off loopback",
            endpoint_bridge(10_000),
            vec![
                (URL_ENV, format!("http://192.0.2.1:{port}{SECRET_PATH}")),
                (TOKEN_ENV, TOKEN.into()),
            ],
            vec![],
            "not a loopback address",
        ),
        (
            "ca cert missing",
            endpoint_bridge(10_000),
            vec![(URL_ENV, url.clone()), (TOKEN_ENV, TOKEN.into())],
            vec!["--ca-cert".into(), "/nonexistent/ptd-ca.pem".into()],
            "could not be read",
        ),
    ];
    for (name, bridge, env, args, says) in cases {
        let mut dispatch = Dispatch::with_bridge(bridge);
        for (k, v) in &env {
            dispatch = dispatch.env(k, v);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = dispatch.args(&args).run();
        run.expect("unavailable", Some("endpoint_unconfigured"), 69);
        assert_eq!(run.envelope["error"]["retryable"], false, "{name}");
        let message = run.envelope["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{name}: {message}");
        assert!(
            stderr_line(&run).starts_with("error[endpoint_unconfigured]:")
                && !run.stderr.trim_end().contains('\n'),
            "{name}: {}",
            run.stderr
        );
        assert!(
            !run.stdout.contains("/nonexistent"),
            "{name}: a host path in the envelope"
        );
        assert_eq!(run.dispatch().get("http_status"), None, "{name}");
        assert_no_secrets(&run);
    }
    // The --ca-cert file is named for the host's eyes only.
    assert_eq!(server.connections(), 0, "nothing may reach the endpoint");
}

/// A CA, and a server certificate for 127.0.0.1 and localhost signed by it.
struct Pki {
    ca_pem: String,
    server: Arc<rustls::ServerConfig>,
}

fn test_pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "parent-tool-dispatch test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![leaf.der().clone(), ca_cert.der().clone()], key)
    .unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        server: Arc::new(server),
    }
}

#[test]
fn https_is_verified_against_the_ca_cert() {
    let pki = test_pki();
    let server = Server::start_tls(pki.server.clone(), ok_answer);
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let run = to(&server.url(), 10_000)
        .args(&["--ca-cert", ca.to_str().unwrap()])
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(run.stderr, "");
    assert_eq!(run.dispatch()["endpoint"], server.origin());
    let got = server.received();
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].headers.get("authorization").map(String::as_str),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_no_secrets(&run);
}

#[test]
fn a_certificate_that_does_not_verify_is_unreachable_and_nothing_is_sent() {
    let pki = test_pki();
    let server = Server::start_tls(pki.server.clone(), ok_answer);
    let run = to(&server.url(), 10_000).run();
    run.expect("unavailable", Some("endpoint_unreachable"), 69);
    assert_eq!(run.envelope["error"]["retryable"], true);
    let message = run.envelope["error"]["message"].as_str().unwrap();
    assert!(message.contains("TLS handshake failed"), "{message}");
    assert!(
        stderr_line(&run).starts_with("error[endpoint_unreachable]:"),
        "{}",
        run.stderr
    );
    assert_eq!(server.connections(), 1, "a handshake was tried");
    assert!(
        server.received().is_empty(),
        "no request crossed an unverified connection"
    );
    assert_no_secrets(&run);

    // A CA file that verifies something else does not help.
    let other = test_pki().ca_pem;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("other.pem");
    std::fs::write(&ca, other).unwrap();
    let run = to(&server.url(), 10_000)
        .args(&["--ca-cert", ca.to_str().unwrap()])
        .run();
    run.expect("unavailable", Some("endpoint_unreachable"), 69);
    assert!(
        stderr_line(&run).starts_with("error[endpoint_unreachable]:"),
        "{}",
        run.stderr
    );
    assert!(server.received().is_empty());
}

/// A scripted nameserver on a loopback UDP port, for the resolver's test hook (debug builds:
/// `PARENT_TOOL_DISPATCH_TEST_RESOLVER=PORT:DIR`, `DIR` holding `hosts` and `resolv.conf`).
/// `script` gives, for a lower-case name asked, the response code and the IPv4 addresses of
/// its `A` answer (`AAAA` is always empty). It records every name asked.
struct Nameserver {
    port: u16,
    asked: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    dir: tempfile::TempDir,
}

impl Nameserver {
    fn start(
        script: impl Fn(&str) -> (hickory_proto::op::ResponseCode, Vec<[u8; 4]>) + Send + 'static,
    ) -> Nameserver {
        use hickory_proto::op::{Message, OpCode};
        use hickory_proto::rr::{rdata::A, RData, Record, RecordType};
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let port = socket.local_addr().unwrap().port();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (asked2, stop2) = (asked.clone(), stop.clone());
        std::thread::spawn(move || {
            let until = Instant::now() + SERVER_BOUND;
            let mut buf = [0u8; 512];
            while !stop2.load(Ordering::SeqCst) && Instant::now() < until {
                let Ok((n, from)) = socket.recv_from(&mut buf) else {
                    continue;
                };
                let Ok(query) = Message::from_vec(&buf[..n]) else {
                    continue;
                };
                let question = query.queries[0].clone();
                let name = question
                    .name()
                    .to_ascii()
                    .trim_end_matches('.')
                    .to_ascii_lowercase();
                asked2.lock().unwrap().push(name.clone());
                let (rcode, v4s) = script(&name);
                let mut reply = Message::response(query.metadata.id, OpCode::Query);
                reply.metadata.recursion_desired = true;
                reply.metadata.recursion_available = true;
                reply.metadata.response_code = rcode;
                reply.add_query(question.clone());
                if question.query_type() == RecordType::A {
                    for ip in v4s {
                        reply.add_answer(Record::from_rdata(
                            question.name().clone(),
                            60,
                            RData::A(A(ip.into())),
                        ));
                    }
                }
                let _ = socket.send_to(&reply.to_vec().unwrap(), from);
            }
        });
        let dir = tempfile::tempdir().unwrap();
        // No localhost line: `localhost` must not need one (RFC 6761).
        std::fs::write(dir.path().join("hosts"), "10.1.1.1 other.example\n").unwrap();
        std::fs::write(
            dir.path().join("resolv.conf"),
            "nameserver 127.0.0.1\nsearch corp.example\noptions timeout:30\n",
        )
        .unwrap();
        Nameserver {
            port,
            asked,
            stop,
            dir,
        }
    }

    /// The test hook's value.
    fn hook(&self) -> String {
        format!("{}:{}", self.port, self.dir.path().display())
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl Drop for Nameserver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

const RESOLVER_HOOK: &str = "PARENT_TOOL_DISPATCH_TEST_RESOLVER";

#[test]
fn localhost_is_loopback_without_a_hosts_line_and_never_asked_of_dns() {
    // #34: `localhost` went to DNS (`localhost.corp.example` first) and the token to whatever
    // address came back. The nameserver here answers every name with a TEST-NET address.
    use hickory_proto::op::ResponseCode;
    let dns = Nameserver::start(|_| (ResponseCode::NoError, vec![[192, 0, 2, 7]]));
    let server = Server::start(ok_answer);
    for host in ["localhost", "api.localhost"] {
        let run = to(
            &format!("http://{host}:{}{SECRET_PATH}", server.port),
            10_000,
        )
        .env(RESOLVER_HOOK, &dns.hook())
        .run();
        run.expect("succeeded", None, 0);
        assert_eq!(run.stderr, "", "{host}");
        assert_no_secrets(&run);
    }
    assert_eq!(
        server.received().len(),
        2,
        "both reached the loopback server"
    );
    assert_eq!(dns.asked(), Vec::<String>::new(), "no DNS question at all");
}

#[test]
fn plain_http_to_a_name_needs_every_resolved_address_to_be_loopback() {
    use hickory_proto::op::ResponseCode;
    let dns = Nameserver::start(|name| match name {
        "loop.corp.example" => (ResponseCode::NoError, vec![[127, 0, 0, 1]]),
        "mixed.corp.example" => (ResponseCode::NoError, vec![[127, 0, 0, 1], [192, 0, 2, 7]]),
        "far.corp.example" => (ResponseCode::NoError, vec![[192, 0, 2, 7]]),
        _ => (ResponseCode::NXDomain, vec![]),
    });
    let server = Server::start(ok_answer);
    let run = to(&format!("http://loop:{}{SECRET_PATH}", server.port), 10_000)
        .env(RESOLVER_HOOK, &dns.hook())
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(server.connections(), 1);
    for name in ["mixed", "far"] {
        let started = Instant::now();
        let run = to(
            &format!("http://{name}:{}{SECRET_PATH}", server.port),
            30_000,
        )
        .env(RESOLVER_HOOK, &dns.hook())
        .run();
        run.expect("unavailable", Some("endpoint_unconfigured"), 69);
        let message = run.envelope["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("plain http to http://{name}:{}", server.port))
                && message.contains("resolves to an address that is not loopback"),
            "{message}"
        );
        assert_eq!(
            stderr_line(&run),
            format!("error[endpoint_unconfigured]: {message}")
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert_no_secrets(&run);
    }
    assert_eq!(
        server.connections(),
        1,
        "no connection once an address was not loopback"
    );
}

#[test]
fn a_failed_lookup_is_unreachable_at_once_with_its_reason() {
    // #34: SERVFAIL and REFUSED became `dispatch_timeout` ("did not answer within 30000 ms").
    use hickory_proto::op::ResponseCode;
    let dns = Nameserver::start(|name| match name {
        "servfail.corp.example" => (ResponseCode::ServFail, vec![]),
        "refused.corp.example" => (ResponseCode::Refused, vec![]),
        "empty.corp.example" => (ResponseCode::NoError, vec![]),
        _ => (ResponseCode::NXDomain, vec![]),
    });
    for (host, reason, says) in [
        ("servfail", "dns_servfail", "SERVFAIL"),
        ("refused", "dns_refused", "REFUSED"),
        ("empty", "dns_no_address", "has no address"),
        ("nowhere", "dns_nxdomain", "NXDOMAIN"),
    ] {
        let started = Instant::now();
        let run = to(&format!("https://{host}{SECRET_PATH}"), 30_000)
            .env(RESOLVER_HOOK, &dns.hook())
            .run();
        run.expect("unavailable", Some("endpoint_unreachable"), 69);
        assert_eq!(run.envelope["error"]["retryable"], true);
        assert_eq!(run.envelope["error"]["details"]["reason"], reason, "{host}");
        let message = run.envelope["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!(
                "the endpoint https://{host}:443 could not be reached: "
            )) && message.contains(says),
            "{message}"
        );
        assert_eq!(
            stderr_line(&run),
            format!("error[endpoint_unreachable]: {message}")
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{host}: {:?}",
            started.elapsed()
        );
        assert_no_secrets(&run);
    }
}
