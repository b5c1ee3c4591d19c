use super::*;
use std::net::UdpSocket;
use std::thread::JoinHandle;

const TYPE_A: u16 = 1;
const TYPE_AAAA: u16 = 28;
const TYPE_CNAME: u16 = 5;
const CLASS_IN: u16 = 1;
const A: RecordType = RecordType::A;
const AAAA: RecordType = RecordType::AAAA;

/// The name and type a query asks for (read by `hickory-proto`).
fn question(packet: &[u8]) -> (String, u16) {
    let message = Message::from_vec(packet).unwrap();
    let q = &message.queries[0];
    let name = q.name().to_ascii();
    (
        name.trim_end_matches('.').to_ascii_lowercase(),
        u16::from(q.query_type()),
    )
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

#[test]
fn resolv_conf_is_read_as_glibc_reads_it() {
    let conf = parse_resolv_conf(
        b"# comment\n\
         nameserver 10.0.0.1\n\
         nameserver ::1 ; trailing comment\n\
         nameserver not-an-ip\n\
         nameserver 10.0.0.2\n\
         nameserver 10.0.0.3\n\
         domain ignored.example\n\
         search corp.example. lan\n\
         options ndots:2 timeout:3 attempts:4 rotate\n",
    );
    assert_eq!(
        conf.nameservers,
        vec![
            "10.0.0.1:53".parse().unwrap(),
            "[::1]:53".parse().unwrap(),
            "10.0.0.2:53".parse().unwrap(),
        ],
        "at most three, IP literals only"
    );
    assert_eq!(conf.search, vec!["corp.example", "lan"], "the last wins");
    assert_eq!(conf.ndots, 2);
    assert_eq!(conf.timeout, Duration::from_secs(3));
    assert_eq!(conf.attempts, 4);
    let empty = parse_resolv_conf(b"");
    assert_eq!(empty.nameservers, vec!["127.0.0.1:53".parse().unwrap()]);
    assert_eq!((empty.ndots, empty.attempts), (1, 2));
    // Out-of-range options are clamped, never zero.
    let odd = parse_resolv_conf(b"options timeout:0 attempts:0 ndots:99\n");
    assert_eq!(
        (odd.timeout, odd.attempts, odd.ndots),
        (Duration::from_secs(1), 1, 15)
    );
}

#[test]
fn the_hosts_file_matches_whole_names_in_file_order() {
    let hosts = "127.0.0.1 localhost\n\
                 ::1 localhost ip6-localhost\n\
                 # 10.9.9.9 commented.example\n\
                 10.1.1.1 Svc.Example svc # alias\n\
                 10.1.1.2 svc.example.\n\
                 bogus line here\n\
                 10.1.1.3 svc.example.org\n";
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert_eq!(
        hosts_lookup(hosts, "localhost"),
        vec![ip("127.0.0.1"), ip("::1")]
    );
    assert_eq!(
        hosts_lookup(hosts, "svc.example"),
        vec![ip("10.1.1.1"), ip("10.1.1.2")]
    );
    assert_eq!(hosts_lookup(hosts, "svc"), vec![ip("10.1.1.1")]);
    assert!(hosts_lookup(hosts, "commented.example").is_empty());
    assert!(
        hosts_lookup(hosts, "example").is_empty(),
        "no partial match"
    );
}

#[test]
fn names_with_enough_dots_are_tried_as_written_first() {
    let conf = Conf {
        search: vec!["corp.example".into(), "lan".into()],
        ndots: 1,
        ..Conf::default()
    };
    assert_eq!(
        candidates("api.service", &conf),
        vec!["api.service", "api.service.corp.example", "api.service.lan"]
    );
    assert_eq!(
        candidates("api", &conf),
        vec!["api.corp.example", "api.lan", "api"]
    );
}

#[test]
fn literals_and_the_hosts_file_need_no_nameserver() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts");
    let conf = dir.path().join("resolv.conf");
    std::fs::write(&hosts, "127.0.0.1 endpoint.test\n").unwrap();
    // A nameserver nobody answers at: never asked for these.
    std::fs::write(&conf, "nameserver 192.0.2.1\n").unwrap();
    let files = &Sources {
        hosts,
        resolv_conf: conf,
        dns_port: 53,
    };
    let quick = Instant::now() + Duration::from_millis(300);
    assert_eq!(
        resolve("endpoint.test.", 8080, quick, files),
        Ok(vec!["127.0.0.1:8080".parse().unwrap()])
    );
    assert_eq!(
        resolve("ENDPOINT.test", 1, quick, files),
        Ok(vec!["127.0.0.1:1".parse().unwrap()])
    );
    assert_eq!(
        resolve("10.2.3.4", 443, quick, files),
        Ok(vec!["10.2.3.4:443".parse().unwrap()])
    );
    assert_eq!(
        resolve("[::1]", 443, quick, files),
        Ok(vec!["[::1]:443".parse().unwrap()])
    );
    // A name DNS cannot carry is refused without asking anyone.
    let started = Instant::now();
    assert_eq!(
        resolve("bad name", 80, soon(), files),
        Err(ResolveError::Failed(LookupFailure::InvalidName))
    );
    assert_eq!(
        resolve(&"a".repeat(64), 80, soon(), files),
        Err(ResolveError::Failed(LookupFailure::InvalidName))
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// A reply to `query` (as this module writes queries): `rcode`, the flags' other bits in
/// `extra_flags`, and `answers` as (owner, type, data) with the owner written out in full.
fn reply(query: &[u8], rcode: u16, extra_flags: u16, answers: &[(&str, u16, Vec<u8>)]) -> Vec<u8> {
    let question_end = query.len();
    let mut r = Vec::new();
    r.extend_from_slice(&query[..2]);
    r.extend_from_slice(&(0x8180u16 | extra_flags | rcode).to_be_bytes());
    r.extend_from_slice(&1u16.to_be_bytes());
    r.extend_from_slice(&(answers.len() as u16).to_be_bytes());
    r.extend_from_slice(&[0, 0, 0, 0]);
    r.extend_from_slice(&query[12..question_end]);
    for (owner, rtype, data) in answers {
        if *owner == "@" {
            // A pointer to the question's name.
            r.extend_from_slice(&[0xC0, 12]);
        } else {
            r.extend_from_slice(&wire(owner));
        }
        r.extend_from_slice(&rtype.to_be_bytes());
        r.extend_from_slice(&CLASS_IN.to_be_bytes());
        r.extend_from_slice(&60u32.to_be_bytes());
        r.extend_from_slice(&(data.len() as u16).to_be_bytes());
        r.extend_from_slice(data);
    }
    r
}

/// A name in DNS wire form.
fn wire(name: &str) -> Vec<u8> {
    let q = query(0, name, A).unwrap();
    q[12..q.len() - 4].to_vec()
}

#[test]
fn answers_are_read_with_compression_and_cname_chains() {
    let q = query(7, "svc.example", A).unwrap();
    let answer = reply(
        &q,
        0,
        0,
        &[
            ("@", TYPE_CNAME, wire("real.example")),
            ("real.example", TYPE_A, vec![10, 0, 0, 7]),
            // Not on the chain: ignored.
            ("other.example", TYPE_A, vec![10, 6, 6, 6]),
            // The wrong type for this question: ignored.
            ("@", TYPE_AAAA, vec![0; 16]),
        ],
    );
    assert_eq!(
        parse_answer(&answer, 7, "svc.example", A),
        Some(Answer::Addresses(vec!["10.0.0.7".parse().unwrap()]))
    );
    // Another id, another name or type: not this query's answer.
    assert_eq!(parse_answer(&answer, 8, "svc.example", A), None);
    assert_eq!(parse_answer(&answer, 7, "svc.example.org", A), None);
    assert_eq!(parse_answer(&answer, 7, "svc.example", AAAA), None);
    // A query is not an answer.
    assert_eq!(parse_answer(&q, 7, "svc.example", A), None);
    let nx = reply(&q, 3, 0, &[]);
    assert_eq!(
        parse_answer(&nx, 7, "svc.example", A),
        Some(Answer::NoSuchName)
    );
    let servfail = reply(&q, 2, 0, &[]);
    assert_eq!(
        parse_answer(&servfail, 7, "svc.example", A),
        Some(Answer::Failed(LookupFailure::ServerFailure))
    );
    let refused = reply(&q, 5, 0, &[]);
    assert_eq!(
        parse_answer(&refused, 7, "svc.example", A),
        Some(Answer::Failed(LookupFailure::Refused))
    );
    let truncated = reply(&q, 0, 0x0200, &[("@", TYPE_A, vec![1, 2, 3, 4])]);
    assert_eq!(
        parse_answer(&truncated, 7, "svc.example", A),
        Some(Answer::Truncated),
        "what a truncated answer holds is never taken"
    );
}

#[test]
fn hostile_answers_are_refused_in_bounded_time() {
    let q = query(9, "loop.example", A).unwrap();
    // A pointer to itself, a pointer forwards, a record running past the end, a cut packet.
    let mut self_pointer = reply(&q, 0, 0, &[("@", TYPE_A, vec![1, 2, 3, 4])]);
    let at = q.len();
    self_pointer[at] = 0xC0;
    self_pointer[at + 1] = at as u8;
    assert_eq!(parse_answer(&self_pointer, 9, "loop.example", A), None);
    let mut forward = self_pointer.clone();
    forward[at + 1] = (at + 20) as u8;
    assert_eq!(parse_answer(&forward, 9, "loop.example", A), None);
    let mut long = reply(&q, 0, 0, &[("@", TYPE_A, vec![1, 2, 3, 4])]);
    let len_at = long.len() - 6;
    long[len_at] = 0xFF;
    assert_eq!(parse_answer(&long, 9, "loop.example", A), None);
    let whole = reply(&q, 0, 0, &[("@", TYPE_A, vec![1, 2, 3, 4])]);
    for cut in 0..whole.len() {
        let parsed = parse_answer(&whole[..cut], 9, "loop.example", A);
        assert!(
            parsed.is_none() || parsed == Some(Answer::Addresses(vec![])),
            "{cut}: {parsed:?}"
        );
    }
}

/// A scripted nameserver on a loopback port: answers `A` for `names` with `v4`, nothing for
/// `AAAA`, `NXDOMAIN` for everything else; stops by itself after `max` queries or 10 s.
fn nameserver(
    names: &'static [&'static str],
    v4: [u8; 4],
    max: usize,
) -> (SocketAddr, JoinHandle<Vec<String>>) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let addr = socket.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(10);
        let mut asked = Vec::new();
        let mut buf = [0u8; 512];
        while asked.len() < max && Instant::now() < until {
            let Ok((n, from)) = socket.recv_from(&mut buf) else {
                continue;
            };
            let q = &buf[..n];
            let (name, qtype) = question(q);
            asked.push(format!("{name}/{qtype}"));
            let known = names.contains(&name.as_str());
            let answer = match (known, qtype) {
                (true, TYPE_A) => reply(q, 0, 0, &[("@", TYPE_A, v4.to_vec())]),
                (true, _) => reply(q, 0, 0, &[]),
                (false, _) => reply(q, 3, 0, &[]),
            };
            // A stray packet from elsewhere first: a wrong id must be ignored.
            let mut stray = answer.clone();
            stray[0] ^= 0xFF;
            socket.send_to(&stray, from).unwrap();
            socket.send_to(&answer, from).unwrap();
        }
        asked
    });
    (addr, handle)
}

#[test]
fn a_nameserver_is_asked_for_both_families_and_the_search_list_is_followed() {
    let (server, handle) = nameserver(&["api.corp.example"], [10, 20, 30, 40], 10);
    let conf = Conf {
        nameservers: vec![server],
        search: vec!["lan".into(), "corp.example".into()],
        timeout: Duration::from_secs(2),
        ..Conf::default()
    };
    assert_eq!(
        ask_dns("api", 443, soon(), &conf),
        Ok(vec!["10.20.30.40:443".parse().unwrap()])
    );
    assert_eq!(
        ask_dns("nowhere.example", 443, soon(), &conf),
        Err(ResolveError::Failed(LookupFailure::NoSuchName))
    );
    let asked = handle.join().unwrap();
    assert_eq!(
        asked,
        vec![
            "api.lan/1",
            "api.lan/28",
            "api.corp.example/1",
            "api.corp.example/28",
            "nowhere.example/1",
            "nowhere.example/28",
            "nowhere.example.lan/1",
            "nowhere.example.lan/28",
            "nowhere.example.corp.example/1",
            "nowhere.example.corp.example/28",
        ],
        "search domains first for a name without a dot, last for one with; a found name \
         stops the list"
    );
}

#[test]
fn a_silent_nameserver_ends_at_the_deadline_as_a_timeout() {
    // Bound, never answered.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let conf = Conf {
        nameservers: vec![silent.local_addr().unwrap()],
        timeout: Duration::from_secs(30),
        attempts: 5,
        ..Conf::default()
    };
    let started = Instant::now();
    let deadline = started + Duration::from_millis(400);
    assert_eq!(
        ask_dns("quiet.example", 80, deadline, &conf),
        Err(ResolveError::TimedOut)
    );
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(350), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
}

/// A nameserver whose UDP answers to `A` are truncated (and hold a decoy address) and whose TCP
/// listener on the same port answers in full with `v4s`, in two pieces — to another query id
/// when `tcp_id_flip`. Returns how many TCP answers it gave (it stops after one, or 10 s).
fn truncating_nameserver(
    v4s: &'static [[u8; 4]],
    tcp_id_flip: bool,
) -> (SocketAddr, JoinHandle<usize>) {
    // The TCP listener must share the UDP socket's port number.
    let (socket, listener) = loop {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        if let Ok(listener) = std::net::TcpListener::bind(socket.local_addr().unwrap()) {
            break (socket, listener);
        }
    };
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = socket.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(10);
        let mut tcp_answers = 0;
        let mut buf = [0u8; 512];
        while Instant::now() < until && tcp_answers < 1 {
            if let Ok((n, from)) = socket.recv_from(&mut buf) {
                let q = &buf[..n];
                let answer = match question(q).1 {
                    TYPE_A => reply(q, 0, 0x0200, &[("@", TYPE_A, vec![6, 6, 6, 6])]),
                    _ => reply(q, 0, 0, &[]),
                };
                socket.send_to(&answer, from).unwrap();
            }
            if let Ok((mut stream, _)) = listener.accept() {
                use std::io::{Read, Write};
                stream.set_nonblocking(false).unwrap();
                let mut len = [0u8; 2];
                stream.read_exact(&mut len).unwrap();
                let mut q = vec![0u8; usize::from(u16::from_be_bytes(len))];
                stream.read_exact(&mut q).unwrap();
                let records: Vec<(&str, u16, Vec<u8>)> =
                    v4s.iter().map(|ip| ("@", TYPE_A, ip.to_vec())).collect();
                let mut answer = reply(&q, 0, 0, &records);
                if tcp_id_flip {
                    answer[0] ^= 0xFF;
                }
                let mut framed = (answer.len() as u16).to_be_bytes().to_vec();
                framed.extend_from_slice(&answer);
                // In two writes: the reader must put the pieces together.
                stream.write_all(&framed[..3]).unwrap();
                std::thread::sleep(Duration::from_millis(20));
                stream.write_all(&framed[3..]).unwrap();
                tcp_answers += 1;
            }
        }
        tcp_answers
    });
    (addr, handle)
}

#[test]
fn a_truncated_answer_is_asked_again_over_tcp() {
    static MANY: [[u8; 4]; 40] = {
        let mut ips = [[10, 9, 0, 0]; 40];
        let mut i = 0;
        while i < 40 {
            ips[i][3] = i as u8;
            i += 1;
        }
        ips
    };
    let (server, handle) = truncating_nameserver(&MANY, false);
    let conf = Conf {
        nameservers: vec![server],
        timeout: Duration::from_secs(3),
        attempts: 1,
        ..Conf::default()
    };
    let found = ask_dns("big.example", 443, soon(), &conf).unwrap();
    assert_eq!(found.len(), 40, "{found:?}");
    assert_eq!(found[39], "10.9.0.39:443".parse().unwrap());
    assert!(
        !found.contains(&"6.6.6.6:443".parse().unwrap()),
        "nothing of the truncated UDP answer"
    );
    assert_eq!(handle.join().unwrap(), 1);
    // A TCP answer to another id is no answer: the nameserver failed.
    let (server, handle) = truncating_nameserver(&MANY, true);
    let conf = Conf {
        nameservers: vec![server],
        ..conf
    };
    assert!(ask_dns("big.example", 443, soon(), &conf).is_err());
    assert_eq!(handle.join().unwrap(), 1);
}

#[test]
fn a_tcp_answer_that_never_comes_ends_at_the_deadline() {
    // A listener that accepts and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let server = listener.local_addr().unwrap();
    let started = Instant::now();
    let answer = ask_tcp(
        server,
        "slow.example",
        A,
        started + Duration::from_millis(300),
    );
    assert_eq!(answer, None);
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(250), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    drop(listener);
}

/// A scripted nameserver on a loopback UDP port: `answer(query, name, qtype)` is sent back for
/// each query (nothing when `None`); stops by itself after `max` queries or 10 s, and returns
/// what it was asked (`name/qtype`).
fn scripted(
    max: usize,
    answer: impl Fn(&[u8], &str, u16) -> Option<Vec<u8>> + Send + 'static,
) -> (SocketAddr, JoinHandle<Vec<String>>) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let addr = socket.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(10);
        let mut asked = Vec::new();
        let mut buf = [0u8; 512];
        while asked.len() < max && Instant::now() < until {
            let Ok((n, from)) = socket.recv_from(&mut buf) else {
                continue;
            };
            let (name, qtype) = question(&buf[..n]);
            asked.push(format!("{name}/{qtype}"));
            if let Some(reply) = answer(&buf[..n], &name, qtype) {
                socket.send_to(&reply, from).unwrap();
            }
        }
        asked
    });
    (addr, handle)
}

/// A hosts file and a resolv.conf in `dir`, the nameservers on `port`.
fn sources(dir: &std::path::Path, hosts: &str, resolv_conf: &str, port: u16) -> Sources {
    std::fs::write(dir.join("hosts"), hosts).unwrap();
    std::fs::write(dir.join("resolv.conf"), resolv_conf).unwrap();
    Sources {
        hosts: dir.join("hosts"),
        resolv_conf: dir.join("resolv.conf"),
        dns_port: port,
    }
}

#[test]
fn localhost_is_loopback_and_never_asked_of_dns() {
    // #34: with no localhost line in the hosts file, `localhost` went to DNS, search domain
    // first, and whatever address came back got the request (and its bearer token).
    let (server, handle) = scripted(2, |q, _, qtype| {
        Some(match qtype {
            TYPE_A => reply(q, 0, 0, &[("@", TYPE_A, vec![192, 0, 2, 7])]),
            _ => reply(q, 0, 0, &[]),
        })
    });
    let dir = tempfile::tempdir().unwrap();
    let files = sources(
        dir.path(),
        "10.1.1.1 other.example\n",
        "nameserver 127.0.0.1\nsearch corp.example\n",
        server.port(),
    );
    let loopback: Vec<SocketAddr> = vec![
        "127.0.0.1:8080".parse().unwrap(),
        "[::1]:8080".parse().unwrap(),
    ];
    for name in ["localhost", "LOCALHOST.", "api.localhost", "a.b.Localhost"] {
        assert_eq!(
            resolve(name, 8080, soon(), &files),
            Ok(loopback.clone()),
            "{name}"
        );
    }
    // Names that only look like it are asked as any other.
    assert_eq!(
        resolve("localhost.example", 80, soon(), &files),
        Ok(vec!["192.0.2.7:80".parse().unwrap()])
    );
    assert!(!is_localhost("notlocalhost") && !is_localhost("localhost.example"));
    let asked = handle.join().unwrap();
    assert_eq!(asked, ["localhost.example/1", "localhost.example/28"]);
}

#[test]
fn a_failed_lookup_is_its_reason_at_once_not_a_timeout() {
    // #34: SERVFAIL and REFUSED ended as a timeout (the whole exchange's, at once). Each is
    // now a failure with its reason, long before the deadline (and the nameserver's timeout).
    for (rcode, want) in [
        (2, LookupFailure::ServerFailure),
        (5, LookupFailure::Refused),
        (3, LookupFailure::NoSuchName),
        (0, LookupFailure::NoAddress),
    ] {
        let (server, handle) = scripted(8, move |q, _, _| Some(reply(q, rcode, 0, &[])));
        let dir = tempfile::tempdir().unwrap();
        let files = sources(
            dir.path(),
            "",
            "nameserver 127.0.0.1\noptions timeout:30\n",
            server.port(),
        );
        let started = Instant::now();
        let deadline = started + Duration::from_secs(30);
        assert_eq!(
            resolve("api.example", 443, deadline, &files),
            Err(ResolveError::Failed(want)),
            "rcode {rcode}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        drop(handle);
    }
    // Nobody listens at the nameserver's port: no answer, at once (not at the deadline).
    let closed = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let files = sources(
        dir.path(),
        "",
        "nameserver 127.0.0.1\noptions timeout:30\n",
        port,
    );
    let started = Instant::now();
    assert_eq!(
        resolve(
            "api.example",
            443,
            started + Duration::from_secs(30),
            &files
        ),
        Err(ResolveError::Failed(LookupFailure::NoAnswer))
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_nameserver_failure_under_one_search_domain_outranks_nxdomain_elsewhere() {
    let (server, handle) = scripted(8, |q, name, _| {
        Some(if name.ends_with(".lan") {
            reply(q, 2, 0, &[])
        } else {
            reply(q, 3, 0, &[])
        })
    });
    let conf = Conf {
        nameservers: vec![server],
        search: vec!["lan".into(), "corp.example".into()],
        attempts: 1,
        ..Conf::default()
    };
    assert_eq!(
        ask_dns("api", 443, soon(), &conf),
        Err(ResolveError::Failed(LookupFailure::ServerFailure))
    );
    drop(handle);
}

#[test]
fn a_deadline_already_passed_is_an_immediate_failure() {
    // #34: a TCP read whose deadline had passed got no timeout at all (`None` means "wait for
    // ever"), hidden only by the exchange's own thread.
    let passed = Instant::now() - Duration::from_millis(1);
    let mut called = false;
    let got: io::Result<()> = bounded(passed, |_| {
        called = true;
        Ok(())
    });
    assert_eq!(got.unwrap_err().kind(), io::ErrorKind::TimedOut);
    assert!(!called, "no I/O once the deadline passed");
    // A listener that accepts and never answers: the read is never started.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let started = Instant::now();
    assert_eq!(
        ask_tcp(listener.local_addr().unwrap(), "slow.example", A, passed),
        None
    );
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
    // And a UDP question asked with no time left is no answer, at once.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let started = Instant::now();
    assert_eq!(
        ask(silent.local_addr().unwrap(), "quiet.example", passed),
        Answer::Failed(LookupFailure::NoAnswer)
    );
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn queries_are_built_by_hickory_proto_and_read_back() {
    let q = query(0x1234, "svc.example", AAAA).unwrap();
    let message = Message::from_vec(&q).unwrap();
    assert_eq!(message.metadata.id, 0x1234);
    assert!(message.metadata.recursion_desired);
    assert_eq!(message.metadata.message_type, MessageType::Query);
    assert_eq!(question(&q), ("svc.example".to_string(), TYPE_AAAA));
    assert_eq!(query(1, &"a".repeat(64), A), None, "a label over 63 bytes");
}
