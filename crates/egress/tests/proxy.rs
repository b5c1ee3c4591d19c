//! The proxy against real sockets, on loopback only: every upstream server here listens on
//! 127.0.0.1, and the refused addresses (the metadata address, private networks) are refused
//! before any connection, so no packet leaves the machine.

// All of this crate is test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(
    clippy::disallowed_macros,
    clippy::disallowed_methods,
    clippy::too_many_lines
)]

use ptd_egress::{Config, Connection, Proxy, Report, DEFAULT_MAX_BYTES, MAX_REPORTED};
use ptd_endpoint::resolve::Sources;
use ptd_sys::confine::allow::AllowRule;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::mpsc;
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";
/// How long a test waits for what must come (a hung test fails instead of hanging).
const PATIENCE: Duration = Duration::from_secs(30);

/// A hosts file and a `resolv.conf` in a temporary folder; the nameserver it names is a
/// loopback port where nothing answers.
struct Names {
    _dir: tempfile::TempDir,
    sources: Sources,
}

fn names(hosts: &str) -> Names {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hosts"), hosts).unwrap();
    std::fs::write(
        dir.path().join("resolv.conf"),
        "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n",
    )
    .unwrap();
    let dns_port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let sources = Sources {
        hosts: dir.path().join("hosts"),
        resolv_conf: dir.path().join("resolv.conf"),
        dns_port,
    };
    Names { _dir: dir, sources }
}

fn config(allow: &[String], names: &Names) -> Config {
    Config {
        allow: allow.iter().map(|r| AllowRule::parse(r).unwrap()).collect(),
        max_bytes: DEFAULT_MAX_BYTES,
        max_connections: 8,
        deadline: Instant::now() + Duration::from_secs(120),
        sources: names.sources.clone(),
    }
}

fn start(config: Config) -> (Proxy, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    (Proxy::serve(listener, config).unwrap(), addr)
}

fn client(proxy: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(proxy).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    stream
}

/// Send `head` to the proxy and read its whole answer: the status and the body.
fn ask(proxy: SocketAddr, head: &[u8]) -> (u16, String) {
    let mut stream = client(proxy);
    stream.write_all(head).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    split_answer(&answer)
}

fn split_answer(answer: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(answer);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, body.to_string())
}

/// `CONNECT target` through the proxy, expecting `200`: the tunnel.
fn tunnel(proxy: SocketAddr, target: &str) -> TcpStream {
    let mut stream = client(proxy);
    write!(
        stream,
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"
    )
    .unwrap();
    let mut answer = vec![0; ESTABLISHED.len()];
    stream.read_exact(&mut answer).unwrap();
    assert_eq!(answer, ESTABLISHED, "{}", String::from_utf8_lossy(&answer));
    stream
}

/// A loopback server that runs `each` on every connection it accepts, until `count` were.
struct Upstream {
    addr: SocketAddr,
    thread: JoinHandle<()>,
}

fn upstream(count: usize, each: impl Fn(TcpStream) + Send + Sync + Clone + 'static) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let thread = std::thread::spawn(move || {
        let mut threads = Vec::new();
        for _ in 0..count {
            let (stream, _) = listener.accept().unwrap();
            stream.set_read_timeout(Some(PATIENCE)).unwrap();
            let each = each.clone();
            threads.push(std::thread::spawn(move || each(stream)));
        }
        for thread in threads {
            thread.join().unwrap();
        }
    });
    Upstream { addr, thread }
}

/// A listener that must never see a connection.
fn untouched() -> TcpListener {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    listener
}

fn assert_untouched(listener: &TcpListener) {
    let err = listener.accept().map(|_| ()).unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::WouldBlock,
        "the server saw a connection"
    );
}

/// Read until end of file (a reset counts as one: the other side is gone either way).
fn read_to_eof(stream: &mut TcpStream) -> Vec<u8> {
    let mut buf = Vec::new();
    match stream.read_to_end(&mut buf) {
        Ok(_) => {}
        Err(e) => assert_ne!(e.kind(), ErrorKind::WouldBlock, "no end of file in time"),
    }
    buf
}

fn only(report: &Report) -> &Connection {
    assert_eq!(report.connections.len(), 1, "{report:#?}");
    &report.connections[0]
}

#[test]
fn connect_relays_both_ways_and_counts_the_bytes() {
    let server = upstream(1, |mut s| {
        let mut hello = [0; 5];
        s.read_exact(&mut hello).unwrap();
        assert_eq!(&hello, b"hello");
        s.write_all(b"world!").unwrap();
        // The client's end of file comes through as ours.
        assert!(read_to_eof(&mut s).is_empty());
    });
    let port = server.addr.port();
    let names = names("");
    let (proxy, addr) = start(config(&[format!("127.0.0.1:{port}")], &names));
    let mut tunnel = tunnel(addr, &format!("127.0.0.1:{port}"));
    tunnel.write_all(b"hello").unwrap();
    let mut world = [0; 6];
    tunnel.read_exact(&mut world).unwrap();
    assert_eq!(&world, b"world!");
    tunnel.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(
        read_to_eof(&mut tunnel).is_empty(),
        "the server's end of file"
    );
    server.thread.join().unwrap();
    let report = proxy.finish();
    assert_eq!(
        only(&report),
        &Connection {
            host: "127.0.0.1".into(),
            port,
            allowed: true,
            reason: None,
            bytes_up: 5,
            bytes_down: 6,
        }
    );
    assert_eq!((report.allowed, report.refused, report.more), (1, 0, 0));
    assert!(report.listening);
}

#[test]
fn an_end_of_file_half_closes_and_the_other_direction_goes_on() {
    let (tx, rx) = mpsc::channel();
    let server = upstream(1, move |mut s| {
        s.write_all(b"bye").unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        tx.send(read_to_eof(&mut s)).unwrap();
    });
    let port = server.addr.port();
    let names = names("");
    let (proxy, addr) = start(config(&[format!("127.0.0.1:{port}")], &names));
    let mut tunnel = tunnel(addr, &format!("127.0.0.1:{port}"));
    // The server's end of file reaches the client; the client may still send.
    assert_eq!(read_to_eof(&mut tunnel), b"bye");
    tunnel.write_all(b"more").unwrap();
    tunnel.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), b"more");
    server.thread.join().unwrap();
    let report = proxy.finish();
    let first = only(&report);
    assert_eq!((first.bytes_up, first.bytes_down), (4, 3));
}

/// A plain HTTP server that answers with the head (and body) it received.
fn echo_server(count: usize) -> Upstream {
    upstream(count, |mut s| {
        let mut got = Vec::new();
        let mut buf = [0; 4096];
        let end = loop {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "end of file before the head");
            got.extend_from_slice(&buf[..n]);
            if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
        };
        let head = String::from_utf8(got[..end].to_vec()).unwrap();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .map_or(0, |n| n.parse().unwrap());
        while got.len() < end + length {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        let body = &got[..];
        write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .unwrap();
        s.write_all(body).unwrap();
    })
}

#[test]
fn absolute_form_reaches_the_server_in_origin_form() {
    let server = echo_server(3);
    let port = server.addr.port();
    let names = names("127.0.0.1 web.test\n");
    let allow = [format!("127.0.0.1:{port}"), format!("web.test:{port}")];
    let (proxy, addr) = start(config(&allow, &names));
    let (status, body) = ask(
        addr,
        format!(
            "GET http://127.0.0.1:{port}/p?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
             Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eDp5\r\n\
             Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\nUser-Agent: t\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        format!(
            "GET /p?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: t\r\n\
             Connection: close\r\n\r\n"
        )
    );
    // No Host header: the URL's; the body sent with the head goes along.
    let (status, body) = ask(
        addr,
        format!("POST http://WEB.test:{port} HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc").as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        format!(
            "POST / HTTP/1.1\r\nHost: WEB.test:{port}\r\nContent-Length: 3\r\n\
             Connection: close\r\n\r\nabc"
        )
    );
    // Another site's name in Host (what a front end serving many sites routes by): upstream
    // gets the URL's, the one the allow list judged.
    let (status, body) = ask(
        addr,
        format!("GET http://web.test:{port}/ HTTP/1.1\r\nHost: unlisted.test\r\n\r\n").as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        format!("GET / HTTP/1.1\r\nHost: web.test:{port}\r\nConnection: close\r\n\r\n")
    );
    server.thread.join().unwrap();
    let report = proxy.finish();
    assert_eq!(report.allowed, 3);
    assert_eq!(report.connections[1].host, "web.test");
    assert!(report.connections.iter().all(|c| c.reason.is_none()));
    assert!(report.connections.iter().all(|c| c.bytes_down > c.bytes_up));
}

#[test]
fn localhost_listed_by_name_is_refused_for_resolving_to_loopback() {
    let server = untouched();
    let port = server.local_addr().unwrap().port();
    let names = names("");
    let (proxy, addr) = start(config(&[format!("localhost:{port}")], &names));
    let (status, body) = ask(
        addr,
        format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n").as_bytes(),
    );
    assert_eq!(status, 403);
    assert_eq!(
        body,
        format!(
            "localhost resolves to 127.0.0.1, a loopback address: list 127.0.0.1:{port} to \
             allow it\n"
        )
    );
    let (status, _) = ask(
        addr,
        format!("GET http://localhost:{port}/ HTTP/1.1\r\n\r\n").as_bytes(),
    );
    assert_eq!(status, 403);
    assert_untouched(&server);
    let report = proxy.finish();
    assert_eq!((report.allowed, report.refused), (0, 2));
    let first = &report.connections[0];
    assert_eq!(
        (first.host.as_str(), first.port, first.allowed),
        ("localhost", port, false)
    );
    assert!(first.reason.as_deref().unwrap().contains("loopback"));
}

#[test]
fn a_host_or_port_not_listed_is_refused() {
    let server = untouched();
    let port = server.local_addr().unwrap().port();
    let names = names("127.0.0.1 loop.test\n");
    let (proxy, addr) = start(config(&[format!("127.0.0.1:{port}")], &names));
    let other = if port == 65535 { 1 } else { port + 1 };
    for (target, reason) in [
        (
            format!("127.0.0.1:{other}"),
            format!("127.0.0.1:{other} is not in the allow list"),
        ),
        (
            format!("loop.test:{port}"),
            format!("loop.test:{port} is not in the allow list"),
        ),
        (
            format!("LOCALHOST:{port}"),
            format!("localhost:{port} is not in the allow list"),
        ),
        (
            format!("127.0.0.2:{port}"),
            format!("127.0.0.2:{port} is not in the allow list"),
        ),
    ] {
        let (status, body) = ask(
            addr,
            format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes(),
        );
        assert_eq!((status, body), (403, format!("{reason}\n")), "{target}");
    }
    assert_untouched(&server);
    let report = proxy.finish();
    assert_eq!((report.allowed, report.refused), (0, 4));
}

#[test]
fn names_resolving_to_metadata_or_private_addresses_are_refused_before_any_connection() {
    let server = untouched();
    let port = server.local_addr().unwrap().port();
    let names = names(
        "169.254.169.254 metadata.test\n10.0.0.1 private.test\nfd00:ec2::254 metadata6.test\n\
         127.0.0.1 mixed.test\n10.0.0.2 mixed.test\n100.64.0.1 cgnat.test\n",
    );
    let allow = [
        "metadata.test:80".to_string(),
        "private.test:443".into(),
        "metadata6.test:80".into(),
        "cgnat.test:80".into(),
        format!("mixed.test:{port}"),
        format!("127.0.0.1:{port}"),
    ];
    let (proxy, addr) = start(config(&allow, &names));
    for (head, reason) in [
        (
            "CONNECT metadata.test:80 HTTP/1.1\r\n\r\n".to_string(),
            "metadata.test resolves to 169.254.169.254, a metadata address: list \
             169.254.169.254:80 to allow it"
                .to_string(),
        ),
        (
            "GET http://metadata.test/latest/meta-data/ HTTP/1.1\r\n\r\n".into(),
            "metadata.test resolves to 169.254.169.254, a metadata address: list \
             169.254.169.254:80 to allow it"
                .into(),
        ),
        (
            "CONNECT private.test:443 HTTP/1.1\r\n\r\n".into(),
            "private.test resolves to 10.0.0.1, a private address: list 10.0.0.1:443 to allow it"
                .into(),
        ),
        (
            "CONNECT metadata6.test:80 HTTP/1.1\r\n\r\n".into(),
            "metadata6.test resolves to fd00:ec2::254, a metadata address: list \
             [fd00:ec2::254]:80 to allow it"
                .into(),
        ),
        (
            "CONNECT cgnat.test:80 HTTP/1.1\r\n\r\n".into(),
            "cgnat.test resolves to 100.64.0.1, a cgnat address: list 100.64.0.1:80 to allow it"
                .into(),
        ),
        (
            // One of its addresses is listed; the other is not: refused.
            format!("CONNECT mixed.test:{port} HTTP/1.1\r\n\r\n"),
            format!(
                "mixed.test resolves to 10.0.0.2, a private address: list 10.0.0.2:{port} to \
                 allow it"
            ),
        ),
    ] {
        let (status, body) = ask(addr, head.as_bytes());
        assert_eq!((status, body), (403, format!("{reason}\n")), "{head}");
    }
    assert_untouched(&server);
    let report = proxy.finish();
    assert_eq!((report.allowed, report.refused), (0, 6));
}

#[test]
fn an_address_listed_literally_passes_the_check() {
    let server = upstream(2, |mut s| {
        s.write_all(b"hi").unwrap();
    });
    let port = server.addr.port();
    let names = names("127.0.0.1 loop.test\n");
    let allow = [format!("loop.test:{port}"), format!("127.0.0.1:{port}")];
    let (proxy, addr) = start(config(&allow, &names));
    for target in [format!("loop.test:{port}"), format!("127.0.0.1:{port}")] {
        let mut tunnel = tunnel(addr, &target);
        assert_eq!(read_to_eof(&mut tunnel), b"hi");
    }
    server.thread.join().unwrap();
    let report = proxy.finish();
    assert_eq!((report.allowed, report.refused), (2, 0));
    assert_eq!(report.connections[0].host, "loop.test");
    assert_eq!(report.connections[0].bytes_down, 2);
}

#[test]
fn a_failed_lookup_is_a_502_and_nothing_is_sent() {
    let names = names("");
    let (proxy, addr) = start(config(&["nowhere.test:80".to_string()], &names));
    let (status, body) = ask(addr, b"GET http://nowhere.test/ HTTP/1.1\r\n\r\n");
    assert_eq!(status, 502, "{body}");
    assert!(body.starts_with("nowhere.test: "), "{body}");
    let report = proxy.finish();
    assert_eq!(report.refused, 1);
}

#[test]
fn an_upstream_that_refuses_the_connection_is_a_502() {
    let port = {
        let gone = TcpListener::bind("127.0.0.1:0").unwrap();
        gone.local_addr().unwrap().port()
    };
    let names = names("");
    let (proxy, addr) = start(config(&[format!("127.0.0.1:{port}")], &names));
    let (status, body) = ask(
        addr,
        format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes(),
    );
    assert_eq!(status, 502, "{body}");
    assert!(
        body.starts_with(&format!("could not connect to 127.0.0.1:{port}")),
        "{body}"
    );
    let report = proxy.finish();
    // The checks passed; the upstream failed.
    assert!(only(&report).allowed);
    assert_eq!(report.allowed, 1);
}

#[test]
fn malformed_heads_are_400_and_huge_ones_431() {
    let names = names("");
    let (proxy, addr) = start(config(&["a.test:80".to_string()], &names));
    let cases: [&[u8]; 10] = [
        b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
        b"GET https://a.test/ HTTP/1.1\r\n\r\n",
        b"GET ftp://a.test/ HTTP/1.1\r\n\r\n",
        b"GET http://user:pw@a.test/ HTTP/1.1\r\n\r\n",
        b"CONNECT a.test HTTP/1.1\r\n\r\n",
        b"GET http://a.test/\r\n\r\n",
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n",
        b"CONNECT a..test:80 HTTP/1.1\r\n\r\n",
        b"CONNECT \xff\xfe:80 HTTP/1.1\r\n\r\n",
        b"GET http://a.test/ HTTP/1.1\r\n",
    ];
    for (i, head) in cases.iter().enumerate() {
        let mut stream = client(addr);
        stream.write_all(head).unwrap();
        if i == cases.len() - 1 {
            // An incomplete head, then the client's end of file.
            stream.shutdown(std::net::Shutdown::Write).unwrap();
        }
        let (status, body) = split_answer(&read_to_eof(&mut stream));
        assert_eq!(status, 400, "{:?}: {body}", String::from_utf8_lossy(head));
        assert_eq!(body.matches('\n').count(), 1, "one line: {body}");
    }
    let mut huge = b"GET http://a.test/ HTTP/1.1\r\nX-Big: ".to_vec();
    huge.resize(20 * 1024, b'a');
    huge.extend_from_slice(b"\r\n\r\n");
    let (status, body) = ask(addr, &huge);
    assert_eq!(status, 431, "{body}");
    let report = proxy.finish();
    assert_eq!((report.allowed, report.refused), (0, 11));
    for connection in &report.connections {
        assert!(!connection.allowed);
        assert!(connection.host.len() <= 255);
        assert!(
            connection.host.chars().all(|c| c.is_ascii_graphic()),
            "{connection:?}"
        );
    }
    assert_eq!(report.connections[7].host, "a..test");
}

/// A server that holds every connection open until the client's end of file.
fn holding_server(count: usize) -> Upstream {
    upstream(count, |mut s| {
        read_to_eof(&mut s);
    })
}

#[test]
fn one_connection_too_many_is_a_503() {
    let server = holding_server(2);
    let port = server.addr.port();
    let names = names("");
    let mut config = config(&[format!("127.0.0.1:{port}")], &names);
    config.max_connections = 2;
    let (proxy, addr) = start(config);
    let target = format!("127.0.0.1:{port}");
    let mut held = vec![tunnel(addr, &target), tunnel(addr, &target)];
    let (status, body) = ask(
        addr,
        format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes(),
    );
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("more than 2 connections at once"), "{body}");
    let report = proxy.finish();
    for tunnel in &mut held {
        assert!(read_to_eof(tunnel).is_empty());
    }
    server.thread.join().unwrap();
    assert_eq!((report.allowed, report.refused), (2, 1));
    assert_eq!(report.connections[2].port, port);
    assert_eq!(
        report.connections[0].reason.as_deref(),
        Some("the call ended")
    );
}

#[test]
fn the_byte_limit_cuts_a_transfer_and_spends_the_budget() {
    let server = upstream(1, |mut s| {
        // Written until the proxy cuts the connection.
        let _ = s.write_all(&vec![7u8; 1 << 20]);
    });
    let port = server.addr.port();
    let names = names("");
    let mut config = config(&[format!("127.0.0.1:{port}")], &names);
    config.max_bytes = 100_000;
    let (proxy, addr) = start(config);
    let target = format!("127.0.0.1:{port}");
    let mut tunnel = tunnel(addr, &target);
    assert_eq!(read_to_eof(&mut tunnel).len(), 100_000);
    server.thread.join().unwrap();
    let (status, body) = ask(
        addr,
        format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes(),
    );
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("network_max_bytes") && body.contains("spent"),
        "{body}"
    );
    let report = proxy.finish();
    let first = &report.connections[0];
    assert_eq!(first.reason.as_deref(), Some("network_max_bytes reached"));
    assert_eq!((first.allowed, first.bytes_down), (true, 100_000));
    assert_eq!((report.allowed, report.refused), (1, 1));
}

#[test]
fn the_deadline_ends_an_endless_upstream() {
    let (tx, rx) = mpsc::channel();
    let server = upstream(1, move |mut s| {
        // Sends a little, then nothing, until the proxy's end of file.
        s.write_all(b"tick").unwrap();
        let eof = read_to_eof(&mut s).is_empty();
        tx.send(eof).unwrap();
    });
    let port = server.addr.port();
    let names = names("");
    let mut config = config(&[format!("127.0.0.1:{port}")], &names);
    config.deadline = Instant::now() + Duration::from_millis(1500);
    let (proxy, addr) = start(config);
    let mut tunnel = tunnel(addr, &format!("127.0.0.1:{port}"));
    assert_eq!(read_to_eof(&mut tunnel), b"tick");
    assert!(
        rx.recv_timeout(PATIENCE).unwrap(),
        "the server saw end of file"
    );
    server.thread.join().unwrap();
    let report = proxy.finish();
    let first = only(&report);
    assert_eq!(first.reason.as_deref(), Some("the call's deadline passed"));
    assert_eq!(first.bytes_down, 4);
}

#[test]
fn finish_closes_every_open_connection() {
    let (tx, rx) = mpsc::channel();
    let server = upstream(1, move |mut s| {
        let got = read_to_eof(&mut s);
        tx.send(got).unwrap();
    });
    let port = server.addr.port();
    let names = names("");
    let (proxy, addr) = start(config(&[format!("127.0.0.1:{port}")], &names));
    let mut open = tunnel(addr, &format!("127.0.0.1:{port}"));
    open.write_all(b"up").unwrap();
    // A client that never finishes its head, and one that asked nothing yet.
    let mut halfway = client(addr);
    halfway.write_all(b"CONNECT 127.0.0.1:").unwrap();
    let mut idle = client(addr);
    // The proxy has the bytes before it stops (its report counts them).
    std::thread::sleep(Duration::from_millis(200));
    let report = proxy.finish();
    assert!(read_to_eof(&mut open).is_empty());
    assert!(read_to_eof(&mut halfway).is_empty());
    assert!(read_to_eof(&mut idle).is_empty());
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), b"up");
    server.thread.join().unwrap();
    assert_eq!(report.connections.len(), 3, "{report:#?}");
    assert_eq!(
        report.connections[0].reason.as_deref(),
        Some("the call ended")
    );
    assert_eq!(report.connections[0].bytes_up, 2);
    // The proxy no longer accepts.
    let late = TcpStream::connect(addr);
    if let Ok(mut late) = late {
        late.set_read_timeout(Some(PATIENCE)).unwrap();
        assert!(read_to_eof(&mut late).is_empty());
    }
}

#[test]
fn pending_without_a_listener_ends_at_cancel() {
    let (tx, rx) = mpsc::channel::<TcpListener>();
    let tx = Mutex::new(Some(tx));
    let names = names("");
    let proxy = Proxy::pending(
        Box::new(move || Ok(rx.recv().ok())),
        Box::new(move || drop(tx.lock().unwrap().take())),
        config(&[], &names),
    )
    .unwrap();
    let report = proxy.finish();
    assert!(!report.listening);
    assert_eq!((report.connections.len(), report.more), (0, 0));
}

#[test]
fn pending_serves_once_the_listener_arrives() {
    let (tx, rx) = mpsc::channel::<TcpListener>();
    let names = names("");
    let proxy = Proxy::pending(
        Box::new(move || Ok(rx.recv().ok())),
        Box::new(|| ()),
        config(&[], &names),
    )
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    tx.send(listener).unwrap();
    let (status, _) = ask(addr, b"CONNECT a.test:443 HTTP/1.1\r\n\r\n");
    assert_eq!(status, 403);
    let report = proxy.finish();
    assert!(report.listening);
    assert_eq!(report.refused, 1);
}

#[test]
fn the_report_lists_the_first_connections_and_counts_the_rest() {
    let names = names("");
    let (proxy, addr) = start(config(&[], &names));
    let extra = 6;
    for i in 0..MAX_REPORTED + extra {
        let (status, _) = ask(
            addr,
            format!("CONNECT 127.0.0.1:{} HTTP/1.1\r\n\r\n", i + 1).as_bytes(),
        );
        assert_eq!(status, 403);
    }
    let report = proxy.finish();
    assert_eq!(report.connections.len(), MAX_REPORTED);
    assert_eq!(report.more, extra as u64);
    assert_eq!(report.refused, (MAX_REPORTED + extra) as u64);
    for (i, connection) in report.connections.iter().enumerate() {
        assert_eq!(connection.port as usize, i + 1, "in order of arrival");
    }
}

/// Not a test of the suite (speed is measured, not asserted there): a 64 MiB download through
/// the proxy against the same download direct (SPEC §17's goal: at most 1.5×).
/// `cargo test --release -p ptd-egress --test proxy -- --ignored --nocapture throughput`
#[test]
#[ignore = "a measurement: run it by name"]
fn throughput_of_a_64_mib_download() {
    const SIZE: usize = 64 << 20;
    let server = upstream(6, |mut s| {
        let chunk = vec![1u8; 1 << 20];
        for _ in 0..SIZE / chunk.len() {
            s.write_all(&chunk).unwrap();
        }
    });
    let port = server.addr.port();
    let names = names("");
    let (proxy, addr) = start(config(&[format!("127.0.0.1:{port}")], &names));
    let mut direct = Duration::ZERO;
    let mut proxied = Duration::ZERO;
    for _ in 0..3 {
        let start = Instant::now();
        let mut stream = TcpStream::connect(server.addr).unwrap();
        assert_eq!(read_to_eof(&mut stream).len(), SIZE);
        direct += start.elapsed();
        let start = Instant::now();
        let mut stream = tunnel(addr, &format!("127.0.0.1:{port}"));
        assert_eq!(read_to_eof(&mut stream).len(), SIZE);
        proxied += start.elapsed();
    }
    server.thread.join().unwrap();
    proxy.finish();
    let ratio = proxied.as_secs_f64() / direct.as_secs_f64();
    println!("64 MiB ×3: direct {direct:?}, through the proxy {proxied:?}: {ratio:.2}×");
    assert!(ratio <= 1.5, "{ratio:.2}× is over the goal of 1.5×");
}
