//! Host names to addresses for the endpoint mode (SPEC §11.1), without the C library's name
//! service switch: `localhost` locally, `/etc/hosts`, then DNS to the nameservers
//! `/etc/resolv.conf` names.
//!
//! Why not `getaddrinfo`: a statically linked glibc resolves names only through NSS modules
//! loaded at run time from the very glibc version it was linked with — the obstacle that kept
//! the static build (no dynamic loader to run at each start) from being the one people get.
//! Reading the two files ourselves works in every build, static or not, and is the same in
//! both. What it gives up: name sources that only NSS knows (LDAP, NIS, mDNS, `myhostname`,
//! systemd's `resolve` module — a host with systemd-resolved is still served, through the stub
//! nameserver `resolv.conf` names), and `/etc/nsswitch.conf`'s order (the hosts file always
//! comes first, as its default says).
//!
//! What is ours and what is not: the DNS wire format (building queries, reading answers) is
//! `hickory-proto`'s and `resolv.conf` is read by `resolv-conf` — the resolver project's own
//! crates, not packet code of our own. Ours is the small transport (one UDP socket per
//! nameserver asked, TCP when the answer was truncated) and the rules below.
//!
//! The rules:
//! - an IP literal is itself;
//! - `localhost` and every name under `.localhost` are `127.0.0.1` and `::1`, never looked up
//!   (RFC 6761 §6.3): not in the hosts file, and above all never through DNS, where a search
//!   domain would turn `localhost` into `localhost.corp.example` and whatever address that has;
//! - the hosts file's lines are matched whole names, case-insensitively, every address in file
//!   order;
//! - then DNS, as glibc does it: a name with at least `ndots` dots (default 1) is tried as
//!   written first, then with each `search` domain, a shorter one the other way round; each try
//!   asks every nameserver in turn (`attempts` rounds, `timeout` seconds each, both from
//!   `options`, always within the caller's deadline) for `A` and `AAAA` at once. `NXDOMAIN` or
//!   an empty answer moves on to the next name; `SERVFAIL`, `REFUSED`, silence past the
//!   nameserver's `timeout` or an unreachable nameserver moves on to the next nameserver, and
//!   then to the next name.
//! - An answer the nameserver truncated (too long for UDP) is asked again of the same nameserver
//!   over TCP (RFC 7766: a two-byte length before each message, one connection per question);
//!   a truncated or failed answer there too counts as that nameserver failing. Answers are taken
//!   only from the nameserver asked, with the query's random id and question, from a socket of a
//!   random port.
//! - Every read and write is bounded by what is left of the deadline, and a deadline already
//!   passed is an immediate failure (never a socket without a timeout).
//! - A lookup that fails before the deadline is a [`ResolveError::Failed`] with its
//!   [`LookupFailure`], at once; [`ResolveError::TimedOut`] only when the deadline itself passed.

use hickory_proto::op::{Header, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RData, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};
pub use ptd_wire::error::endpoint::LookupFailure;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Where the resolver reads its configuration: the hosts file, `resolv.conf`, and the port the
/// nameservers listen on (53; `resolv.conf` cannot say another). Tests point them elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sources {
    pub hosts: PathBuf,
    pub resolv_conf: PathBuf,
    pub dns_port: u16,
}

impl Sources {
    /// The system's files, and port 53.
    pub fn system() -> Sources {
        Sources {
            hosts: PathBuf::from("/etc/hosts"),
            resolv_conf: PathBuf::from("/etc/resolv.conf"),
            dns_port: 53,
        }
    }
}

/// The largest hosts or resolv.conf file read (ad-blocking hosts files run to megabytes).
const MAX_FILE_BYTES: u64 = 32 << 20;
/// The largest DNS answer over UDP (EDNS is not offered: 512 bytes is the classic limit, and
/// anything past it comes truncated).
const MAX_ANSWER: usize = 512;

/// What `/etc/resolv.conf` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conf {
    pub nameservers: Vec<SocketAddr>,
    pub search: Vec<String>,
    pub ndots: usize,
    pub timeout: Duration,
    pub attempts: usize,
}

impl Default for Conf {
    fn default() -> Conf {
        Conf {
            nameservers: Vec::new(),
            search: Vec::new(),
            ndots: 1,
            timeout: Duration::from_secs(5),
            attempts: 2,
        }
    }
}

/// Read `resolv.conf`'s text (with `resolv-conf`, best effort: a line it cannot read is
/// skipped, as glibc skips it) into what the resolver uses, with glibc's bounds: at most three
/// nameservers (port 53), the last of `search` or `domain`, `ndots` at most 15, `timeout` from
/// 1 to 30 s, `attempts` from 1 to 5. No nameserver at all means the local one.
pub fn parse_resolv_conf(text: &[u8]) -> Conf {
    let (mut parsed, _skipped) = resolv_conf::Config::parse_with_errors(text);
    parsed.glibc_normalize();
    let mut nameservers: Vec<SocketAddr> = parsed
        .nameservers
        .iter()
        .map(|ip| SocketAddr::new(IpAddr::from(ip), 53))
        .collect();
    if nameservers.is_empty() {
        nameservers.push(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 53));
    }
    Conf {
        nameservers,
        search: parsed
            .get_last_search_or_domain()
            .map(|d| d.trim_end_matches('.').to_string())
            .filter(|d| !d.is_empty())
            .collect(),
        ndots: parsed.ndots.min(15) as usize,
        timeout: Duration::from_secs(u64::from(parsed.timeout.clamp(1, 30))),
        attempts: parsed.attempts.clamp(1, 5) as usize,
    }
}

/// Every address the hosts file's text gives `name` (already lower case, no trailing dot), in
/// file order.
pub fn hosts_lookup(text: &str, name: &str) -> Vec<IpAddr> {
    let mut found = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        let Some(ip) = words.next().and_then(|w| w.parse::<IpAddr>().ok()) else {
            continue;
        };
        if words.any(|w| w.trim_end_matches('.').eq_ignore_ascii_case(name)) && !found.contains(&ip)
        {
            found.push(ip);
        }
    }
    found
}

/// Why a name did not resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveError {
    /// The lookup failed, before the deadline.
    Failed(LookupFailure),
    /// The deadline passed first.
    TimedOut,
}

/// The addresses of `localhost` and the names under `.localhost` (RFC 6761 §6.3).
pub fn is_localhost(name: &str) -> bool {
    let name = name.trim_end_matches('.');
    name.eq_ignore_ascii_case("localhost")
        || name
            .len()
            .checked_sub(".localhost".len())
            .and_then(|at| name.get(at..))
            .is_some_and(|tail| tail.eq_ignore_ascii_case(".localhost"))
}

/// `host` (as the URL has it: a name, an IPv4 literal or a bracketed IPv6 literal) and `port`
/// to the addresses to try, in order, by `deadline`.
pub fn resolve(
    host: &str,
    port: u16,
    deadline: Instant,
    sources: &Sources,
) -> Result<Vec<SocketAddr>, ResolveError> {
    let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    if let Ok(ip) = literal.unwrap_or(host).parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    if !valid_name(&name) {
        return Err(ResolveError::Failed(LookupFailure::InvalidName));
    }
    let with_port = |ips: Vec<IpAddr>| ips.into_iter().map(|ip| SocketAddr::new(ip, port));
    if is_localhost(&name) {
        let loopback = vec![Ipv4Addr::LOCALHOST.into(), Ipv6Addr::LOCALHOST.into()];
        return Ok(with_port(loopback).collect());
    }
    let read = |path: &PathBuf| ptd_sys::fs::read_file(path, MAX_FILE_BYTES).unwrap_or_default();
    let from_file = hosts_lookup(&String::from_utf8_lossy(&read(&sources.hosts)), &name);
    if !from_file.is_empty() {
        return Ok(with_port(from_file).collect());
    }
    let mut conf = parse_resolv_conf(&read(&sources.resolv_conf));
    for server in &mut conf.nameservers {
        server.set_port(sources.dns_port);
    }
    ask_dns(&name, port, deadline, &conf)
}

/// The DNS part of [`resolve`] for a valid lower-case `name`, with `conf`'s nameservers.
pub(crate) fn ask_dns(
    name: &str,
    port: u16,
    deadline: Instant,
    conf: &Conf,
) -> Result<Vec<SocketAddr>, ResolveError> {
    // What the names tried gave: the most telling failure is reported (a nameserver's own
    // failure over a name that does not exist under one search domain).
    let mut worst = LookupFailure::NoSuchName;
    for candidate in candidates(name, conf) {
        match ask_all(&candidate, conf, deadline) {
            Asked::Found(ips) => {
                return Ok(ips
                    .into_iter()
                    .map(|ip| SocketAddr::new(ip, port))
                    .collect())
            }
            Asked::Failed(failure) => worst = worst.max(failure),
            Asked::DeadlinePassed => return Err(ResolveError::TimedOut),
        }
    }
    Err(ResolveError::Failed(worst))
}

/// A host name DNS can carry: labels of 1 to 63 bytes of letters, digits, `-` and `_`, 253
/// bytes in all.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// The names to ask for, in order (glibc's `ndots` rule).
fn candidates(name: &str, conf: &Conf) -> Vec<String> {
    let searched = conf
        .search
        .iter()
        .map(|domain| format!("{name}.{domain}"))
        .filter(|n| valid_name(n));
    let dots = name.bytes().filter(|&b| b == b'.').count();
    let mut out = Vec::new();
    if dots >= conf.ndots {
        out.push(name.to_string());
        out.extend(searched);
    } else {
        out.extend(searched);
        out.push(name.to_string());
    }
    out
}

/// What asking the nameservers for one name gave.
#[derive(Debug, PartialEq, Eq)]
enum Asked {
    Found(Vec<IpAddr>),
    Failed(LookupFailure),
    DeadlinePassed,
}

fn ask_all(name: &str, conf: &Conf, deadline: Instant) -> Asked {
    let mut failure = None;
    for _ in 0..conf.attempts {
        for &server in &conf.nameservers {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Asked::DeadlinePassed;
            }
            let answer = ask(server, name, Instant::now() + left.min(conf.timeout));
            match answer {
                Answer::Addresses(ips) if !ips.is_empty() => return Asked::Found(ips),
                Answer::Addresses(_) => return Asked::Failed(LookupFailure::NoAddress),
                Answer::NoSuchName => return Asked::Failed(LookupFailure::NoSuchName),
                Answer::Failed(why) => failure = failure.max(Some(why)),
                Answer::Truncated => failure = failure.max(Some(LookupFailure::NoAnswer)),
            }
            if Instant::now() >= deadline {
                return Asked::DeadlinePassed;
            }
        }
    }
    Asked::Failed(failure.unwrap_or(LookupFailure::NoAnswer))
}

/// One nameserver's answer.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// The addresses of the answer (of both answers, `A` first, from [`ask`]).
    Addresses(Vec<IpAddr>),
    /// `NXDOMAIN`.
    NoSuchName,
    /// No usable answer: ask the next nameserver.
    Failed(LookupFailure),
    /// The answer did not fit (the `TC` flag): ask the same nameserver over TCP.
    Truncated,
}

/// Ask `server` for the `A` and `AAAA` records of `name`, by `deadline` (this nameserver's
/// share of the caller's): never [`Answer::Truncated`] (a truncated answer is asked again over
/// TCP); [`Answer::Failed`] with [`LookupFailure::NoAnswer`] when it did not answer both in time
/// or cannot be reached.
pub fn ask(server: SocketAddr, name: &str, deadline: Instant) -> Answer {
    let no_answer = Answer::Failed(LookupFailure::NoAnswer);
    let bind: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let Ok(socket) = UdpSocket::bind(bind).and_then(|s| s.connect(server).map(|()| s)) else {
        return no_answer;
    };
    let base = random_id();
    let queries = [
        (base, RecordType::A),
        (base.wrapping_add(1), RecordType::AAAA),
    ];
    for (id, qtype) in queries {
        let sent = query(id, name, qtype).map(|q| socket.send(&q));
        if !matches!(sent, Some(Ok(_))) {
            return no_answer;
        }
    }
    let mut answers: [Option<Answer>; 2] = [None, None];
    let mut buf = [0u8; MAX_ANSWER];
    while answers.iter().any(Option::is_none) {
        // A connected UDP socket only receives from the nameserver asked.
        let n = match bounded(deadline, |left| {
            socket.set_read_timeout(Some(left))?;
            socket.recv(&mut buf)
        }) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // Silence past the deadline, or an ICMP "port unreachable" (nobody listens there).
            Err(_) => return no_answer,
        };
        for (slot, (id, qtype)) in answers.iter_mut().zip(queries) {
            if slot.is_none() {
                *slot = parse_answer(&buf[..n], id, name, qtype);
            }
        }
    }
    let over_tcp = |answer: Option<Answer>, qtype| match answer {
        Some(Answer::Truncated) => ask_tcp(server, name, qtype, deadline)
            .unwrap_or(Answer::Failed(LookupFailure::NoAnswer)),
        Some(answer) => answer,
        None => Answer::Failed(LookupFailure::NoAnswer),
    };
    let [a, aaaa] = answers;
    match (over_tcp(a, RecordType::A), over_tcp(aaaa, RecordType::AAAA)) {
        (Answer::Addresses(mut v4), Answer::Addresses(v6)) => {
            v4.extend(v6);
            Answer::Addresses(v4)
        }
        // One family found and the other failed: the addresses found. One family empty and
        // the other failed: nothing is known yet — the next nameserver is asked.
        (Answer::Addresses(ips), _) | (_, Answer::Addresses(ips)) if !ips.is_empty() => {
            Answer::Addresses(ips)
        }
        (Answer::NoSuchName, _) | (_, Answer::NoSuchName) => Answer::NoSuchName,
        (Answer::Failed(a), Answer::Failed(b)) => Answer::Failed(a.max(b)),
        (Answer::Failed(why), _) | (_, Answer::Failed(why)) => Answer::Failed(why),
        _ => Answer::Failed(LookupFailure::NoAnswer),
    }
}

/// `io` given what is left until `deadline`; a deadline already passed is `TimedOut` at once,
/// without calling `io` (a zero or absent socket timeout would mean "wait for ever").
pub fn bounded<T>(deadline: Instant, io: impl FnOnce(Duration) -> io::Result<T>) -> io::Result<T> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::ErrorKind::TimedOut.into());
    }
    io(left)
}

/// Ask `server` for `name`'s `qtype` records over TCP, by `deadline` (the answer UDP could not
/// carry): one query, one answer of at most 64 KiB, each read and write bounded by what is
/// left of the deadline, so a nameserver that drips its answer cannot hold the call past it.
/// `None` when there is no usable answer in time (a truncated one here counts as failed).
pub(crate) fn ask_tcp(
    server: SocketAddr,
    name: &str,
    qtype: RecordType,
    deadline: Instant,
) -> Option<Answer> {
    let mut stream = bounded(deadline, |left| TcpStream::connect_timeout(&server, left)).ok()?;
    let id = random_id();
    let q = query(id, name, qtype)?;
    let mut message = u16::try_from(q.len()).ok()?.to_be_bytes().to_vec();
    message.extend_from_slice(&q);
    bounded(deadline, |left| {
        stream.set_write_timeout(Some(left))?;
        stream.write_all(&message)
    })
    .ok()?;
    let mut read_full = |buf: &mut [u8]| -> Option<()> {
        let mut done = 0;
        while done < buf.len() {
            let read = bounded(deadline, |left| {
                stream.set_read_timeout(Some(left))?;
                stream.read(&mut buf[done..])
            });
            match read {
                Ok(0) => return None,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        Some(())
    };
    let mut len = [0u8; 2];
    read_full(&mut len)?;
    let mut answer = vec![0u8; usize::from(u16::from_be_bytes(len))];
    read_full(&mut answer)?;
    match parse_answer(&answer, id, name, qtype)? {
        Answer::Truncated => Some(Answer::Failed(LookupFailure::NoAnswer)),
        answer => Some(answer),
    }
}

fn random_id() -> u16 {
    ptd_sys::fs::random_u64() as u16
}

/// `name` (a valid host name, no trailing dot) as a fully qualified DNS name.
fn dns_name(name: &str) -> Option<Name> {
    Name::from_ascii(format!("{name}.")).ok()
}

/// A query for `name`'s `qtype` records, recursion desired (built by `hickory-proto`); `None`
/// for a name DNS cannot carry.
pub fn query(id: u16, name: &str, qtype: RecordType) -> Option<Vec<u8>> {
    let mut message = Message::new(id, MessageType::Query, OpCode::Query);
    message.metadata.recursion_desired = true;
    message.add_query(Query::query(dns_name(name)?, qtype));
    message.to_vec().ok()
}

/// The answer in `packet` to query `id` for `name`'s `qtype` (read by `hickory-proto`), or
/// `None` when the packet is not that answer (another id or question, not a response,
/// malformed). Only the records of the name asked and of the `CNAME` chain from it count.
pub fn parse_answer(packet: &[u8], id: u16, name: &str, qtype: RecordType) -> Option<Answer> {
    // The header and the question first: a truncated answer may be cut inside a record, and
    // nothing past its question is used.
    let mut decoder = BinDecoder::new(packet);
    let header = Header::read(&mut decoder).ok()?;
    let meta = header.metadata;
    if meta.id != id
        || meta.message_type != MessageType::Response
        || meta.op_code != OpCode::Query
        || header.counts.queries != 1
    {
        return None;
    }
    let asked = dns_name(name)?;
    let question = Message::read_queries(&mut decoder, 1).ok()?;
    let question = question.first()?;
    if question.name() != &asked
        || question.query_type() != qtype
        || question.query_class() != DNSClass::IN
    {
        return None;
    }
    if meta.truncation {
        return Some(Answer::Truncated);
    }
    match meta.response_code {
        ResponseCode::NoError => {}
        ResponseCode::NXDomain => return Some(Answer::NoSuchName),
        ResponseCode::Refused => return Some(Answer::Failed(LookupFailure::Refused)),
        _ => return Some(Answer::Failed(LookupFailure::ServerFailure)),
    }
    let message = Message::from_vec(packet).ok()?;
    let mut owners = vec![asked];
    let mut ips = Vec::new();
    for record in &message.answers {
        if record.dns_class != DNSClass::IN || !owners.contains(&record.name) {
            continue;
        }
        match (&record.data, qtype) {
            (RData::A(a), RecordType::A) => ips.push(IpAddr::V4(a.0)),
            (RData::AAAA(aaaa), RecordType::AAAA) => ips.push(IpAddr::V6(aaaa.0)),
            (RData::CNAME(target), _) => owners.push(target.0.clone()),
            _ => {}
        }
    }
    Some(Answer::Addresses(ips))
}

#[cfg(test)]
mod tests;
