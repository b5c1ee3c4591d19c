//! Host names to addresses for the endpoint mode (SPEC §11), without the C library's name
//! service switch: `/etc/hosts`, then DNS over UDP to the nameservers `/etc/resolv.conf` names.
//!
//! Why our own: a statically linked glibc resolves names (`getaddrinfo`) only through NSS
//! modules loaded at run time from the very glibc version it was linked with — the obstacle
//! that kept the static build (faster to start) from being the one people get. Reading the two
//! files ourselves works in every build, static or not, and is the same in both. What it
//! gives up: name sources that only NSS knows (LDAP, NIS, mDNS, `myhostname`, systemd's
//! `resolve` module — a host with systemd-resolved is still served, through the stub
//! nameserver `resolv.conf` names), and `/etc/nsswitch.conf`'s order (the hosts file always
//! comes first, as its default says).
//!
//! The rules, as glibc's: an IP literal is itself; the hosts file's lines are matched whole
//! names, case-insensitively, every address in file order; then DNS — a name with at least
//! `ndots` dots (default 1) is tried as written first, then with each `search` domain, a
//! shorter one the other way round; each try asks every nameserver in turn (`attempts` rounds,
//! `timeout` seconds each, both from `options`, always within the caller's deadline) for `A`
//! and `AAAA` at once. A nameserver's `NXDOMAIN` or empty answer moves on to the next name;
//! no answer or a failure moves on to the next nameserver. An answer the nameserver truncated
//! (too long for UDP) is asked again of the same nameserver over TCP (RFC 7766: a two-byte
//! length before each message, one connection per question), within the same deadline; a
//! truncated or failed answer there too counts as that nameserver failing. Answers are taken
//! only from the nameserver asked, with the query's random id and question, from a socket of a
//! random port.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

/// The files read (tests point them elsewhere).
#[derive(Debug, Clone, Copy)]
pub struct Files<'a> {
    pub hosts: &'a Path,
    pub resolv_conf: &'a Path,
}

impl Files<'static> {
    /// The system's files.
    pub fn system() -> Files<'static> {
        Files {
            hosts: Path::new("/etc/hosts"),
            resolv_conf: Path::new("/etc/resolv.conf"),
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

/// Read `resolv.conf`'s text as glibc does: `nameserver` (at most three, IP literals, port
/// 53), `search` or `domain` (the last one given wins), `options ndots:N timeout:N
/// attempts:N`; `#` and `;` start comments. No nameserver at all means the local one.
pub fn parse_resolv_conf(text: &str) -> Conf {
    let mut conf = Conf::default();
    for line in text.lines() {
        let line = line.split(['#', ';']).next().unwrap_or("");
        let mut words = line.split_whitespace();
        match words.next() {
            Some("nameserver") => {
                let ip = words.next().and_then(|w| w.parse::<IpAddr>().ok());
                if let (Some(ip), true) = (ip, conf.nameservers.len() < 3) {
                    conf.nameservers.push(SocketAddr::new(ip, 53));
                }
            }
            Some("search" | "domain") => {
                conf.search = words.map(|w| w.trim_end_matches('.').to_string()).collect();
            }
            Some("options") => {
                for option in words {
                    let (name, value) = option.split_once(':').unwrap_or((option, ""));
                    let value: Option<u64> = value.parse().ok();
                    match (name, value) {
                        ("ndots", Some(n)) => conf.ndots = n.min(15) as usize,
                        ("timeout", Some(n)) => conf.timeout = Duration::from_secs(n.clamp(1, 30)),
                        ("attempts", Some(n)) => conf.attempts = n.clamp(1, 5) as usize,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if conf.nameservers.is_empty() {
        conf.nameservers
            .push(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 53));
    }
    conf
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
    /// Nobody knows the name (the hosts file, and every nameserver that answered).
    NotFound,
    /// No nameserver answered before the deadline.
    TimedOut,
}

/// `host` (as the URL has it: a name, an IPv4 literal or a bracketed IPv6 literal) and `port`
/// to the addresses to try, in order, by `deadline`.
pub fn resolve(
    host: &str,
    port: u16,
    deadline: Instant,
    files: Files<'_>,
) -> Result<Vec<SocketAddr>, ResolveError> {
    let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    if let Ok(ip) = literal.unwrap_or(host).parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    if !valid_name(&name) {
        return Err(ResolveError::NotFound);
    }
    let read = |path: &Path| {
        crate::fs::read_file(path, MAX_FILE_BYTES)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    };
    let from_file = hosts_lookup(&read(files.hosts), &name);
    if !from_file.is_empty() {
        return Ok(from_file
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect());
    }
    let conf = parse_resolv_conf(&read(files.resolv_conf));
    ask_dns(&name, port, deadline, &conf)
}

/// The DNS part of [`resolve`] for a valid lower-case `name`, with `conf`'s nameservers.
pub fn ask_dns(
    name: &str,
    port: u16,
    deadline: Instant,
    conf: &Conf,
) -> Result<Vec<SocketAddr>, ResolveError> {
    let mut timed_out = false;
    for candidate in candidates(name, conf) {
        match ask_all(&candidate, conf, deadline) {
            Asked::Found(ips) => {
                return Ok(ips
                    .into_iter()
                    .map(|ip| SocketAddr::new(ip, port))
                    .collect())
            }
            Asked::NoSuchName => {}
            Asked::NoAnswer => timed_out = true,
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    Err(if timed_out {
        ResolveError::TimedOut
    } else {
        ResolveError::NotFound
    })
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

/// What asking every nameserver for one name gave.
#[derive(Debug, PartialEq, Eq)]
enum Asked {
    Found(Vec<IpAddr>),
    /// A nameserver said the name has no address (`NXDOMAIN`, or no `A`/`AAAA` record).
    NoSuchName,
    /// No nameserver gave a usable answer.
    NoAnswer,
}

fn ask_all(name: &str, conf: &Conf, deadline: Instant) -> Asked {
    for _ in 0..conf.attempts {
        for &server in &conf.nameservers {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Asked::NoAnswer;
            }
            match ask(server, name, Instant::now() + left.min(conf.timeout)) {
                Some(Answer::Addresses(ips)) if !ips.is_empty() => return Asked::Found(ips),
                Some(Answer::Addresses(_) | Answer::NoSuchName) => return Asked::NoSuchName,
                Some(Answer::Failed | Answer::Truncated) | None => {}
            }
        }
    }
    Asked::NoAnswer
}

/// One nameserver's answer to both questions.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// The addresses of both answers (`A` first).
    Addresses(Vec<IpAddr>),
    /// `NXDOMAIN`.
    NoSuchName,
    /// `SERVFAIL`, `REFUSED`, or otherwise unusable: ask the next nameserver.
    Failed,
    /// The answer did not fit (the `TC` flag): ask the same nameserver over TCP.
    Truncated,
}

/// Ask `server` for the `A` and `AAAA` records of `name`, by `deadline`; `None` when it did
/// not answer both in time.
pub fn ask(server: SocketAddr, name: &str, deadline: Instant) -> Option<Answer> {
    let bind: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(bind).ok()?;
    socket.connect(server).ok()?;
    let base = random_id();
    let queries = [(base, TYPE_A), (base.wrapping_add(1), TYPE_AAAA)];
    for (id, qtype) in queries {
        socket.send(&query(id, name, qtype)?).ok()?;
    }
    let mut answers: [Option<Answer>; 2] = [None, None];
    let mut buf = [0u8; MAX_ANSWER];
    while answers.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        socket.set_read_timeout(Some(left)).ok()?;
        // A connected UDP socket only receives from the nameserver asked.
        let n = match socket.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        };
        for (slot, (id, qtype)) in answers.iter_mut().zip(queries) {
            if slot.is_none() {
                if let Some(answer) = parse_answer(&buf[..n], id, name, qtype) {
                    *slot = Some(answer);
                }
            }
        }
    }
    let [Some(a), Some(aaaa)] = answers else {
        return None;
    };
    let over_tcp = |answer: Answer, qtype: u16| match answer {
        Answer::Truncated => ask_tcp(server, name, qtype, deadline).unwrap_or(Answer::Failed),
        answer => answer,
    };
    let (a, aaaa) = (over_tcp(a, TYPE_A), over_tcp(aaaa, TYPE_AAAA));
    Some(match (a, aaaa) {
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
        _ => Answer::Failed,
    })
}

/// Ask `server` for `name`'s `qtype` records over TCP, by `deadline` (the answer UDP could not
/// carry): one query, one answer of at most 64 KiB, each read and write bounded by what is
/// left of the deadline, so a nameserver that drips its answer cannot hold the call past it.
/// `None` when there is no usable answer in time (a truncated one here counts as failed).
pub fn ask_tcp(server: SocketAddr, name: &str, qtype: u16, deadline: Instant) -> Option<Answer> {
    let left = || Some(deadline.saturating_duration_since(Instant::now())).filter(|l| !l.is_zero());
    let mut stream = TcpStream::connect_timeout(&server, left()?).ok()?;
    let id = random_id();
    let q = query(id, name, qtype)?;
    let mut message = u16::try_from(q.len()).ok()?.to_be_bytes().to_vec();
    message.extend_from_slice(&q);
    stream.set_write_timeout(left()).ok()?;
    stream.write_all(&message).ok()?;
    let mut read_full = |buf: &mut [u8]| -> Option<()> {
        let mut done = 0;
        while done < buf.len() {
            stream.set_read_timeout(left()).ok()?;
            match stream.read(&mut buf[done..]) {
                Ok(0) => return None,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
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
        Answer::Truncated => Some(Answer::Failed),
        answer => Some(answer),
    }
}

const TYPE_A: u16 = 1;
const TYPE_AAAA: u16 = 28;
const TYPE_CNAME: u16 = 5;
const CLASS_IN: u16 = 1;

fn random_id() -> u16 {
    crate::fs::random_u64() as u16
}

/// A query for `name`'s `qtype` records, recursion desired; `None` for a name DNS cannot
/// carry.
pub fn query(id: u16, name: &str, qtype: u16) -> Option<Vec<u8>> {
    let mut q = Vec::with_capacity(18 + name.len());
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        let len = u8::try_from(label.len())
            .ok()
            .filter(|&l| l > 0 && l < 64)?;
        q.push(len);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&CLASS_IN.to_be_bytes());
    Some(q)
}

/// The answer in `packet` to query `id` for `name`'s `qtype`, or `None` when the packet is
/// not that answer (another id or question, not a response, malformed).
pub fn parse_answer(packet: &[u8], id: u16, name: &str, qtype: u16) -> Option<Answer> {
    let mut r = Reader { packet, at: 0 };
    if r.u16()? != id {
        return None;
    }
    let flags = r.u16()?;
    let (qdcount, ancount) = (r.u16()?, r.u16()?);
    r.skip(4)?;
    // A response, a standard query, one question.
    if flags & 0x8000 == 0 || (flags >> 11) & 0xF != 0 || qdcount != 1 {
        return None;
    }
    let asked = r.name()?;
    if !asked.eq_ignore_ascii_case(name) || r.u16()? != qtype || r.u16()? != CLASS_IN {
        return None;
    }
    if flags & 0x0200 != 0 {
        return Some(Answer::Truncated);
    }
    match flags & 0xF {
        0 => {}
        3 => return Some(Answer::NoSuchName),
        _ => return Some(Answer::Failed),
    }
    // The owners that count: the name asked and the CNAME chain from it.
    let mut owners = vec![asked];
    let mut ips = Vec::new();
    for _ in 0..ancount {
        let owner = r.name()?;
        let (rtype, class) = (r.u16()?, r.u16()?);
        r.skip(4)?;
        let len = usize::from(r.u16()?);
        let data_at = r.at;
        let ours = owners.iter().any(|o| o.eq_ignore_ascii_case(&owner));
        match (rtype, class, len, ours) {
            (TYPE_A, CLASS_IN, 4, true) if qtype == TYPE_A => {
                let b = r.take(4)?;
                ips.push(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])));
            }
            (TYPE_AAAA, CLASS_IN, 16, true) if qtype == TYPE_AAAA => {
                let b: [u8; 16] = r.take(16)?.try_into().ok()?;
                ips.push(IpAddr::V6(Ipv6Addr::from(b)));
            }
            (TYPE_CNAME, CLASS_IN, _, true) => {
                let target = r.name()?;
                owners.push(target);
            }
            _ => {}
        }
        r.at = data_at.checked_add(len)?;
        if r.at > packet.len() {
            return None;
        }
    }
    Some(Answer::Addresses(ips))
}

/// A cursor over a DNS message.
struct Reader<'p> {
    packet: &'p [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let bytes = self.packet.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(bytes)
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        self.take(n).map(|_| ())
    }

    fn u16(&mut self) -> Option<u16> {
        let b = self.take(2)?;
        Some(u16::from_be_bytes([b[0], b[1]]))
    }

    /// A possibly compressed name, dotted, lower case; the cursor ends after its first
    /// pointer or its end. Pointers must go backwards (no loop can be built), at most 128.
    fn name(&mut self) -> Option<String> {
        let mut out = String::new();
        let mut at = self.at;
        let mut resume = None;
        for _ in 0..128 {
            let len = *self.packet.get(at)?;
            match len {
                0 => {
                    self.at = resume.unwrap_or(at + 1);
                    return Some(out);
                }
                1..=63 => {
                    let label = self.packet.get(at + 1..at + 1 + usize::from(len))?;
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(&String::from_utf8_lossy(label).to_ascii_lowercase());
                    if out.len() > 255 {
                        return None;
                    }
                    at += 1 + usize::from(len);
                }
                0xC0..=0xFF => {
                    let low = *self.packet.get(at + 1)?;
                    let target = (usize::from(len & 0x3F) << 8) | usize::from(low);
                    if target >= at {
                        return None;
                    }
                    resume.get_or_insert(at + 2);
                    at = target;
                }
                _ => return None,
            }
        }
        None
    }
}

#[cfg(test)]
mod tests;
