//! Unit tests of the endpoint exchange: URL checks, the HTTP reading, the limits.

use super::*;

fn url(text: &str) -> Result<Url, &'static str> {
    Url::parse(text)
}

#[test]
fn origins_are_scheme_host_and_port() {
    let u = url("HTTPS://API.Example.com/hooks/abc?x=1#frag").unwrap();
    assert!(u.https && !u.loopback);
    assert_eq!(u.origin, "https://api.example.com:443");
    assert_eq!(u.request, "https://API.Example.com/hooks/abc?x=1");
    let u = url("http://127.0.0.1:8080").unwrap();
    assert_eq!(
        (u.origin.as_str(), u.request.as_str()),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/")
    );
    let u = url("http://[::1]:9/x").unwrap();
    assert_eq!(u.origin, "http://[::1]:9");
    assert!(u.loopback);
}

#[test]
fn only_loopback_hosts_count_as_loopback() {
    for yes in [
        "http://localhost/",
        "http://LOCALHOST:1/",
        "http://127.0.0.1/",
        "http://127.255.3.4/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
    ] {
        assert!(url(yes).unwrap().loopback, "{yes}");
    }
    for no in [
        "http://10.0.0.1/",
        "http://128.0.0.1/",
        "http://[::2]/",
        "http://localhost.example.com/",
        "http://127.0.0.1.nip.io/",
        "http://127.1/",
        "http://0.0.0.0/",
        "http://example.com/",
    ] {
        assert!(!url(no).unwrap().loopback, "{no}");
    }
}

#[test]
fn what_is_not_an_absolute_http_url_is_refused() {
    for bad in [
        "example.com/x",
        "/relative",
        "ftp://example.com/",
        "file:///etc/passwd",
        "http://",
        "http:///x",
        "http://:80/",
        "http://user:pass@example.com/",
        "http://example.com:0/",
        "http://example.com:65536/",
        "http://example.com:+80/",
        "http://example.com:/",
        "http://exa mple.com/",
        " http://example.com/",
        "http://example.com/\n",
        "http://exämple.com/",
        "http://[::1/",
        "http://[zz::1]/",
        "http://[::1]x/",
        "http://a:1:2/",
        "http://ex%41mple.com/",
    ] {
        assert!(url(bad).is_err(), "{bad:?} should be refused");
    }
}

#[test]
fn refusals_never_quote_the_url() {
    let secret = "s3cr3t-value-in-the-url";
    for text in [
        format!("ftp://{secret}/"),
        format!("http://user:{secret}@h/"),
        format!("http://h:{secret}/"),
    ] {
        let why = url(&text).unwrap_err();
        assert!(!why.contains(secret), "{why}");
    }
}

#[test]
fn the_secret_parts_are_the_url_its_target_its_path_and_its_query_values() {
    let t = |u: &str| {
        Target {
            url: Url::parse(u).unwrap().request,
            origin: String::new(),
            token: None,
            https: false,
            host: "localhost".into(),
            port: 1,
            loopback_only: false,
            var: "PTD_UNIT_URL".into(),
            sources: resolve::Sources::system(),
            extra_roots: Arc::default(),
            trace_headers: Vec::new(),
        }
        .secret_parts()
    };
    assert!(t("http://localhost:1").is_empty());
    assert!(t("http://localhost:1/").is_empty());
    assert_eq!(
        t("http://localhost:1/hooks/cap-5c1d9e?sig=url-signature-77aa&n=1&flag"),
        [
            "http://localhost:1/hooks/cap-5c1d9e?sig=url-signature-77aa&n=1&flag",
            "/hooks/cap-5c1d9e?sig=url-signature-77aa&n=1&flag",
            "/hooks/cap-5c1d9e",
            "url-signature-77aa",
        ]
    );
    // A bare query item is a value; `/?` and short values are not registered.
    assert_eq!(
        t("http://localhost:1?capability-token"),
        [
            "http://localhost:1/?capability-token",
            "/?capability-token",
            "capability-token"
        ]
    );
    assert_eq!(
        t("http://localhost:1/x?k=v&n=12345678901"),
        [
            "http://localhost:1/x?k=v&n=12345678901",
            "/x?k=v&n=12345678901"
        ]
    );
    // Decoded forms too, percent-style and form-style.
    let parts = t("http://localhost:1/hooks/a%2Fb?s=sig%3Dvalue+two");
    for want in [
        "/hooks/a%2Fb",
        "/hooks/a/b",
        "sig%3Dvalue+two",
        "sig=value+two",
        "sig=value two",
    ] {
        assert!(parts.iter().any(|p| p == want), "{want} in {parts:?}");
    }
}

#[test]
fn idempotency_keys_are_header_safe_and_distinct() {
    assert_eq!(idempotency_key("ptr_123"), "ptr_123");
    assert_eq!(idempotency_key("a b"), "a%20b");
    assert_eq!(idempotency_key("x\r\nEvil: 1"), "x%0D%0AEvil:%201");
    assert_eq!(idempotency_key("é"), "%C3%A9");
    // `%` is encoded whenever encoding happens, so an encoded id cannot equal a raw one.
    assert_eq!(idempotency_key("a%20b c"), "a%2520b%20c");
    assert_ne!(idempotency_key("a b"), idempotency_key("a%20b"));
}

#[test]
fn the_debug_form_shows_neither_url_nor_token() {
    let t = Target {
        url: "https://h/path-secret".into(),
        origin: "https://h:443".into(),
        token: Some("token-secret".into()),
        https: true,
        host: "h".into(),
        port: 443,
        loopback_only: false,
        var: "PTD_UNIT_URL".into(),
        sources: resolve::Sources::system(),
        extra_roots: Arc::default(),
        trace_headers: Vec::new(),
    };
    let text = format!("{t:?}");
    assert!(text.contains("https://h:443"));
    assert!(!text.contains("path-secret") && !text.contains("token-secret"));
}

#[test]
fn checks_come_before_anything_is_sent() {
    let spec = |method: &str| EndpointSpec {
        url_env: "PTD_UNIT_URL".into(),
        method: method.into(),
    };
    let env = |vars: &[(&str, &str)]| {
        HostEnv::with(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    };
    let ok = env(&[
        ("PTD_UNIT_URL", "http://127.0.0.1:9/x"),
        ("PTD_UNIT_TOKEN", "t0k3n-value"),
    ]);
    assert!(target(&spec("POST"), Some("PTD_UNIT_TOKEN"), None, &ok).is_ok());
    let cases: Vec<(EndpointSpec, Option<&str>, HostEnv, &str)> = vec![
        (spec("GET"), None, ok.clone(), "Method"),
        (spec("post"), None, ok.clone(), "Method"),
        (spec("POST"), None, env(&[]), "UrlUnset"),
        (spec("POST"), None, env(&[("PTD_UNIT_URL", "")]), "UrlEmpty"),
        (
            spec("POST"),
            None,
            env(&[("PTD_UNIT_URL", "localhost:8080")]),
            "UrlInvalid",
        ),
        (
            spec("POST"),
            Some("PTD_UNIT_NO_TOKEN"),
            ok.clone(),
            "TokenUnset",
        ),
        (
            spec("POST"),
            Some("PTD_UNIT_TOKEN"),
            env(&[
                ("PTD_UNIT_URL", "http://127.0.0.1:9/"),
                ("PTD_UNIT_TOKEN", ""),
            ]),
            "TokenEmpty",
        ),
        (
            spec("POST"),
            Some("PTD_UNIT_TOKEN"),
            env(&[
                ("PTD_UNIT_URL", "http://127.0.0.1:9/"),
                ("PTD_UNIT_TOKEN", "a\r\nb"),
            ]),
            "TokenInvalid",
        ),
        (
            spec("POST"),
            None,
            env(&[("PTD_UNIT_URL", "http://192.0.2.1/")]),
            "PlainHttp",
        ),
    ];
    for (spec, token_env, env, want) in cases {
        let got = target(&spec, token_env, None, &env).unwrap_err();
        assert!(
            format!("{got:?}").starts_with(want),
            "{got:?} is not {want}"
        );
    }
}

#[test]
fn a_ca_cert_file_must_hold_a_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not pem at all\n").unwrap();
    let bad = dir.path().join("bad.pem");
    std::fs::write(
        &bad,
        "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let missing = dir.path().join("missing.pem");
    for (path, want) in [
        (&empty, "holds no PEM certificate"),
        (&bad, "is not valid PEM"),
        (&missing, "could not be read"),
    ] {
        match read_ca_cert(path) {
            Err(Unconfigured::CaCert { why, .. }) => assert!(why.contains(want), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn client_errors_map_to_stable_causes() {
    use std::io::{Error, ErrorKind};
    let io = |kind| classify(ureq::Error::Io(Error::from(kind)));
    assert_eq!(
        io(ErrorKind::ConnectionRefused),
        Failure::Unreachable(Unreachable::Refused)
    );
    assert_eq!(
        io(ErrorKind::ConnectionReset),
        Failure::Unreachable(Unreachable::Reset)
    );
    assert_eq!(io(ErrorKind::TimedOut), Failure::Timeout);
    assert_eq!(
        classify(ureq::Error::HostNotFound),
        Failure::Unreachable(Unreachable::HostNotFound)
    );
    assert_eq!(
        classify(ureq::Error::BadUri("http://secret/".into())),
        Failure::Unreachable(Unreachable::Client)
    );
    let tls = classify(ureq::Error::Io(Error::new(
        ErrorKind::InvalidData,
        rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
    )));
    assert!(
        matches!(tls, Failure::Unreachable(Unreachable::Tls(_))),
        "{tls:?}"
    );
}
