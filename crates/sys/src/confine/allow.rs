//! Egress by name (SPEC §17): the rules of `--network allow:HOST:PORT,…` (and a policy's
//! `network = { allow = [...] }`), the hosts a client of the proxy asks for, and which
//! addresses are public.
//!
//! Pure: no system call, no lookup. The proxy (`ptd-egress`) asks [`allows`] with the host as
//! the client asked for it, then — for a name — resolves it on the host side and asks
//! [`address_refusal`] of every address, so that a name that resolves to loopback, a private
//! network or the cloud metadata address is refused unless that address is listed literally.
//!
//! The spelling of a rule:
//! - `NAME:PORT`: exactly that name (case-insensitive, a trailing dot ignored);
//! - `*.NAME:PORT`: every name one or more labels under `NAME` (not `NAME` itself);
//! - `ADDRESS:PORT`, `[IPV6]:PORT`: that address, which may then be reached even where it is
//!   loopback or private — the only way to allow such an address.
//!
//! Refused (each with a reason): no port, a port of 0 or above 65535, an empty name, a `*` that
//! is not the whole first label, a `*` alone (`--network any` says that), a label longer than
//! 63 bytes or a name longer than 253, a byte outside letters, digits, `-` and `_`, a name whose
//! last label is all digits (`127.1`, `0x7f.1`: other spellings of addresses, which resolvers
//! read differently), an unbracketed IPv6 address.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The most rules one `allow` list may hold.
pub const MAX_RULES: usize = 256;

/// One allow rule: a host and a port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AllowRule {
    pub host: AllowHost,
    pub port: u16,
}

/// The host part of a rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AllowHost {
    /// Exactly this name (lower case, no trailing dot).
    Name(String),
    /// `*.SUFFIX`: every name one or more labels under `SUFFIX` (lower case, no trailing dot).
    Under(String),
    /// This address, listed literally.
    Address(IpAddr),
}

/// Why a rule or an asked host cannot be read: one line, for a usage error, a policy problem
/// or a `400` from the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowError(pub String);

impl fmt::Display for AllowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AllowError {}

fn refuse<T>(why: impl Into<String>) -> Result<T, AllowError> {
    Err(AllowError(why.into()))
}

impl AllowRule {
    /// One rule: `HOST:PORT` (see the module's doc).
    pub fn parse(text: &str) -> Result<AllowRule, AllowError> {
        let (host, port) = split_port(text)?;
        if host == "*" {
            return refuse(
                "`*` alone would allow every host: list the hosts (or use `--network any`)",
            );
        }
        let host = if let Some(suffix) = host.strip_prefix("*.") {
            match Asked::parse(suffix)? {
                Asked::Name(name) => AllowHost::Under(name),
                Asked::Address(_) => return refuse("`*.` must lead a name, not an address"),
            }
        } else {
            match Asked::parse(host)? {
                Asked::Name(name) => AllowHost::Name(name),
                Asked::Address(ip) => AllowHost::Address(ip),
            }
        };
        Ok(AllowRule { host, port })
    }

    /// A comma-separated list of rules (`--network allow:`'s value after `allow:`): at least
    /// one, at most [`MAX_RULES`]; a repeated rule is kept once.
    pub fn parse_list(text: &str) -> Result<Vec<AllowRule>, AllowError> {
        let mut rules: Vec<AllowRule> = Vec::new();
        for (i, part) in text.split(',').enumerate() {
            if i >= MAX_RULES {
                return refuse(format!("more than {MAX_RULES} rules"));
            }
            let rule = AllowRule::parse(part).map_err(|e| AllowError(format!("`{part}`: {e}")))?;
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
        Ok(rules)
    }

    /// Whether this rule allows `host` (as asked) on `port`: a name rule a name, an address
    /// rule an address.
    pub fn matches(&self, host: &Asked, port: u16) -> bool {
        if self.port != port {
            return false;
        }
        match (&self.host, host) {
            (AllowHost::Name(rule), Asked::Name(name)) => rule == name,
            (AllowHost::Under(suffix), Asked::Name(name)) => name
                .strip_suffix(suffix.as_str())
                .and_then(|head| head.strip_suffix('.'))
                .is_some_and(|head| !head.is_empty()),
            (AllowHost::Address(rule), Asked::Address(ip)) => same_address(*rule, *ip),
            _ => false,
        }
    }
}

impl fmt::Display for AllowRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            AllowHost::Name(name) => write!(f, "{name}:{}", self.port),
            AllowHost::Under(suffix) => write!(f, "*.{suffix}:{}", self.port),
            AllowHost::Address(IpAddr::V4(ip)) => write!(f, "{ip}:{}", self.port),
            AllowHost::Address(IpAddr::V6(ip)) => write!(f, "[{ip}]:{}", self.port),
        }
    }
}

/// A host as a client of the proxy asked for it (`CONNECT`'s authority, an absolute-form
/// URL's host), checked.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Asked {
    /// A valid name, lower case, no trailing dot.
    Name(String),
    /// An IPv4 address or a bracketed IPv6 address.
    Address(IpAddr),
}

impl Asked {
    /// Read a host: a bracketed IPv6 address, a dotted IPv4 address, or a name (see the
    /// module's doc for what a name may not be).
    pub fn parse(host: &str) -> Result<Asked, AllowError> {
        if let Some(inner) = host.strip_prefix('[') {
            let Some(inner) = inner.strip_suffix(']') else {
                return refuse("an IPv6 address is written in brackets: `[::1]`");
            };
            return match inner.parse::<Ipv6Addr>() {
                Ok(ip) => Ok(Asked::Address(IpAddr::V6(ip))),
                Err(_) => refuse("not an IPv6 address between the brackets"),
            };
        }
        if let Ok(ip) = host.parse::<Ipv4Addr>() {
            return Ok(Asked::Address(IpAddr::V4(ip)));
        }
        if host.parse::<Ipv6Addr>().is_ok() {
            return refuse("an IPv6 address is written in brackets: `[::1]`");
        }
        let name = host.strip_suffix('.').unwrap_or(host);
        if name.is_empty() {
            return refuse("an empty host name");
        }
        if name.len() > 253 {
            return refuse("a host name longer than 253 bytes");
        }
        for label in name.split('.') {
            if label.is_empty() {
                return refuse("an empty label in the host name (`..`, or a leading dot)");
            }
            if label.contains('*') {
                return refuse(
                    "a `*` may only be the whole first label, followed by a dot (`*.example.com`)",
                );
            }
            if label.len() > 63 {
                return refuse("a label longer than 63 bytes in the host name");
            }
            if !label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return refuse("a host name holds letters, digits, `-` and `_` only (IDNs in their `xn--` form)");
            }
        }
        let last = name.rsplit('.').next().unwrap_or(name);
        if last.bytes().all(|b| b.is_ascii_digit()) || looks_numeric(last) {
            return refuse(
                "not a dotted IPv4 address, and not a name (its last label is a number)",
            );
        }
        Ok(Asked::Name(name.to_ascii_lowercase()))
    }
}

impl fmt::Display for Asked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Asked::Name(name) => f.write_str(name),
            Asked::Address(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Asked::Address(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
        }
    }
}

/// `0x7f` and the like: a hexadecimal number, which `inet_aton` reads as part of an address.
fn looks_numeric(label: &str) -> bool {
    let lower = label.to_ascii_lowercase();
    lower
        .strip_prefix("0x")
        .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `HOST:PORT` → (`HOST`, port), the port 1–65535 in plain digits (leading zeros allowed).
fn split_port(text: &str) -> Result<(&str, u16), AllowError> {
    let Some((host, port)) = text.rsplit_once(':') else {
        return refuse("no port: write `HOST:PORT`");
    };
    if host.contains(':') && !host.starts_with('[') {
        return refuse("an IPv6 address is written in brackets: `[::1]:PORT`");
    }
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return refuse(format!("`{port}` is not a port (1 to 65535)"));
    }
    match port.trim_start_matches('0').parse::<u16>() {
        Ok(0) | Err(_) => refuse(format!("`{port}` is not a port (1 to 65535)")),
        Ok(n) => Ok((host, n)),
    }
}

/// Whether `rules` allow `host` (as asked) on `port` — the first check, before any lookup.
pub fn allows(rules: &[AllowRule], host: &Asked, port: u16) -> bool {
    rules.iter().any(|rule| rule.matches(host, port))
}

/// Whether `addr` is listed literally (an address rule with its port).
pub fn listed_literally(rules: &[AllowRule], addr: SocketAddr) -> bool {
    allows(rules, &Asked::Address(addr.ip()), addr.port())
}

/// Why the proxy may not connect to `addr`, which a name resolved to: `None` when it is public
/// or listed literally; else the kind of address it is, for the `403`'s reason.
pub fn address_refusal(rules: &[AllowRule], addr: SocketAddr) -> Option<&'static str> {
    if listed_literally(rules, addr) {
        return None;
    }
    not_public(addr.ip())
}

/// Two addresses are the same when equal, or when one is the other's IPv4-mapped form.
fn same_address(a: IpAddr, b: IpAddr) -> bool {
    canonical(a) == canonical(b)
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// What kind of address `ip` is when it is not a public one: `"loopback"`, `"private"`,
/// `"link-local"`, `"metadata"`, `"cgnat"`, `"unique-local"`, `"multicast"`,
/// `"unspecified"`, `"documentation"`, `"reserved"` …; `None` for a public address.
pub fn not_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_class(v4),
        IpAddr::V6(v6) => v6_class(v6),
    }
}

fn v4_class(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    let class = match (a, b, c) {
        (169, 254, 169) if ip == Ipv4Addr::new(169, 254, 169, 254) => "metadata",
        (0, _, _) => "unspecified",
        (127, _, _) => "loopback",
        (10, _, _) => "private",
        (172, 16..=31, _) => "private",
        (192, 168, _) => "private",
        (169, 254, _) => "link-local",
        (100, 64..=127, _) => "cgnat",
        (192, 0, 0) => "reserved",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (198, 18..=19, _) => "benchmarking",
        (192, 88, 99) => "reserved",
        (224..=239, _, _) => "multicast",
        (240..=255, _, _) => "reserved",
        _ => return None,
    };
    Some(class)
}

fn v6_class(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_class(v4);
    }
    let s = ip.segments();
    // fd00:ec2::254, the metadata address of one cloud.
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return Some("metadata");
    }
    let embedded_v4 = |hi: u16, lo: u16| Ipv4Addr::from(((hi as u32) << 16) | lo as u32);
    let class = match s[0] {
        _ if ip.is_unspecified() => "unspecified",
        _ if ip.is_loopback() => "loopback",
        // ::a.b.c.d (deprecated IPv4-compatible): the IPv4 address decides, or it is reserved.
        0 if s[1..6] == [0, 0, 0, 0, 0] => {
            return v4_class(embedded_v4(s[6], s[7])).or(Some("reserved"))
        }
        // 64:ff9b::/96 (NAT64) and 64:ff9b:1::/48 (local NAT64): the IPv4 address inside.
        0x64 if s[1] == 0xff9b => return v4_class(embedded_v4(s[6], s[7])).or(Some("nat64")),
        // 2002::/16 (6to4): the IPv4 address in the next 32 bits.
        0x2002 => return v4_class(embedded_v4(s[1], s[2])).or(Some("6to4")),
        0xfc00..=0xfdff => "unique-local",
        0xfe80..=0xfebf => "link-local",
        0xfec0..=0xfeff => "site-local",
        0xff00..=0xffff => "multicast",
        0x2001 if s[1] == 0x0db8 => "documentation",
        // 2001::/23: IETF protocol assignments (Teredo 2001::/32 among them).
        0x2001 if s[1] < 0x0200 => "reserved",
        0x0100 if s[1..4] == [0, 0, 0] => "discard",
        // Only 2000::/3 is global unicast.
        0x2000..=0x3fff => return None,
        _ => "reserved",
    };
    Some(class)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> AllowRule {
        AllowRule::parse(text).unwrap()
    }

    fn asked(text: &str) -> Asked {
        Asked::parse(text).unwrap()
    }

    #[test]
    fn rules_read_names_patterns_and_addresses() {
        assert_eq!(
            rule("API.GitHub.com.:443"),
            AllowRule {
                host: AllowHost::Name("api.github.com".into()),
                port: 443
            }
        );
        assert_eq!(
            rule("*.pythonhosted.org:443").host,
            AllowHost::Under("pythonhosted.org".into())
        );
        assert_eq!(
            rule("203.0.113.7:8080").host,
            AllowHost::Address("203.0.113.7".parse().unwrap())
        );
        assert_eq!(
            rule("[::1]:80").host,
            AllowHost::Address("::1".parse().unwrap())
        );
        for text in [
            "api.github.com:443",
            "*.x.org:1",
            "10.0.0.1:65535",
            "[fd00::1]:8080",
        ] {
            assert_eq!(rule(text).to_string(), text, "Display reads back");
        }
    }

    #[test]
    fn malformed_rules_say_why() {
        for (text, why) in [
            ("api.github.com", "no port"),
            ("api.github.com:", "not a port"),
            ("api.github.com:0", "not a port"),
            ("api.github.com:65536", "not a port"),
            ("api.github.com:+443", "not a port"),
            (":443", "empty host name"),
            ("*:443", "`*` alone"),
            ("a*.b:443", "whole first label"),
            ("*.*.b:443", "whole first label"),
            ("x.*.b:443", "whole first label"),
            ("*.:443", "empty host name"),
            ("::1:80", "brackets"),
            ("[::1:80", "brackets"),
            ("[nope]:80", "not an IPv6"),
            ("a..b:80", "empty label"),
            ("127.1:80", "last label is a number"),
            ("0x7f.1:80", "last label is a number"),
            ("host.0x1F:80", "last label is a number"),
            ("*.10.0.0.1:80", "must lead a name"),
            ("a b:80", "letters, digits"),
            ("h\u{e9}.com:80", "letters, digits"),
        ] {
            let err = AllowRule::parse(text).unwrap_err();
            assert!(err.0.contains(why), "{text}: {err}");
        }
        let long = format!("{}.com:80", "a".repeat(64));
        assert!(AllowRule::parse(&long).unwrap_err().0.contains("63"));
        let longer = format!("{}com:80", "abcdefghi.".repeat(26));
        assert!(AllowRule::parse(&longer).unwrap_err().0.contains("253"));
    }

    #[test]
    fn lists_are_comma_separated_bounded_and_deduplicated() {
        let rules = AllowRule::parse_list("a.com:443,b.com:80,a.com:443").unwrap();
        assert_eq!(rules.len(), 2);
        let err = AllowRule::parse_list("a.com:443,,b.com:80").unwrap_err();
        assert!(err.0.starts_with("``: "), "{err}");
        let many = vec!["a.com:1"; MAX_RULES + 1].join(",");
        assert!(AllowRule::parse_list(&many)
            .unwrap_err()
            .0
            .contains("more than"));
    }

    #[test]
    fn a_pattern_matches_one_or_more_labels_under_its_suffix_only() {
        let rules = [rule("*.example.com:443")];
        assert!(allows(&rules, &asked("a.example.com"), 443));
        assert!(allows(&rules, &asked("A.B.Example.COM."), 443));
        assert!(!allows(&rules, &asked("example.com"), 443));
        assert!(!allows(&rules, &asked("badexample.com"), 443));
        assert!(!allows(&rules, &asked("a.example.com"), 80), "another port");
        assert!(!allows(&rules, &asked("a.example.com.evil"), 443));
    }

    #[test]
    fn names_and_addresses_never_match_each_other() {
        let rules = [rule("localhost:80"), rule("10.0.0.1:80")];
        assert!(allows(&rules, &asked("LOCALHOST"), 80));
        assert!(!allows(&rules, &asked("127.0.0.1"), 80));
        assert!(allows(&rules, &asked("10.0.0.1"), 80));
        assert!(allows(
            &rules,
            &Asked::Address("::ffff:10.0.0.1".parse().unwrap()),
            80
        ));
        assert!(!allows(&rules, &asked("10.0.0.1.nip.io"), 80));
    }

    #[test]
    fn non_public_addresses_are_refused_unless_listed_literally() {
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        let none: [AllowRule; 0] = [];
        for (text, class) in [
            ("127.0.0.1:80", "loopback"),
            ("127.255.0.9:80", "loopback"),
            ("10.1.2.3:80", "private"),
            ("172.16.0.1:80", "private"),
            ("172.31.255.255:80", "private"),
            ("192.168.1.1:80", "private"),
            ("169.254.169.254:80", "metadata"),
            ("169.254.1.1:80", "link-local"),
            ("100.64.0.1:80", "cgnat"),
            ("0.0.0.0:80", "unspecified"),
            ("224.0.0.1:80", "multicast"),
            ("255.255.255.255:80", "reserved"),
            ("[::1]:80", "loopback"),
            ("[::]:80", "unspecified"),
            ("[fd00:ec2::254]:80", "metadata"),
            ("[fd12::1]:80", "unique-local"),
            ("[fe80::1]:80", "link-local"),
            ("[ff02::1]:80", "multicast"),
            ("[::ffff:127.0.0.1]:80", "loopback"),
            ("[::ffff:169.254.169.254]:80", "metadata"),
            ("[64:ff9b::a00:1]:80", "private"),
            ("[2002:7f00:1::]:80", "loopback"),
            ("[2001:db8::1]:80", "documentation"),
            ("[2001::1]:80", "reserved"),
        ] {
            assert_eq!(address_refusal(&none, addr(text)), Some(class), "{text}");
        }
        for text in [
            "8.8.8.8:53",
            "1.1.1.1:443",
            "172.32.0.1:80",
            "[2606:4700::1111]:443",
        ] {
            assert_eq!(address_refusal(&none, addr(text)), None, "{text}");
        }
        let listed = [rule("127.0.0.1:8080"), rule("[::1]:8080")];
        assert_eq!(address_refusal(&listed, addr("127.0.0.1:8080")), None);
        assert_eq!(address_refusal(&listed, addr("[::1]:8080")), None);
        assert_eq!(
            address_refusal(&listed, addr("127.0.0.1:8081")),
            Some("loopback")
        );
        assert_eq!(
            address_refusal(&listed, addr("127.0.0.2:8080")),
            Some("loopback")
        );
    }

    proptest::proptest! {
        #[test]
        fn parsing_never_panics_and_reads_back(text in "\\PC{0,80}") {
            if let Ok(r) = AllowRule::parse(&text) {
                proptest::prop_assert_eq!(AllowRule::parse(&r.to_string()).unwrap(), r);
            }
            let _ = Asked::parse(&text);
            let _ = AllowRule::parse_list(&text);
        }
    }
}
