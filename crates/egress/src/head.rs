//! A client's request head, read (pure: no I/O): the two forms the proxy speaks, `CONNECT
//! host:port` and absolute-form plain HTTP, and for the second the head sent upstream.
//!
//! Everything else is refused with a one-line reason: origin-form requests (this is a proxy),
//! `https://` in absolute form (a client asks for TLS with `CONNECT`), other schemes, user
//! information in the URL, HTTP/0.9 and anything httparse cannot read. A head that does not
//! fit in [`MAX_HEAD`] bytes or holds more than [`MAX_HEADERS`] headers is too large (`431`).

use crate::response::Status;

/// The largest request head read.
pub(crate) const MAX_HEAD: usize = 16 * 1024;
/// The most headers one request head may hold.
pub(crate) const MAX_HEADERS: usize = 100;
/// The longest rendering of a host the report keeps.
const MAX_SHOWN: usize = 255;

/// What the client asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    /// The host as the target wrote it (a name, a dotted IPv4 address or a bracketed IPv6
    /// one), for `Asked::parse`.
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) form: Form,
}

/// How the request is carried on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Form {
    /// `CONNECT`: answer `200`, then relay.
    Connect,
    /// Absolute-form plain HTTP: this head (origin form, hop-by-hop headers removed,
    /// `Connection: close`) is sent upstream, then the rest is relayed.
    Plain { head: Vec<u8> },
}

/// Why a head is refused, and what of it the report can show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) status: Status,
    pub(crate) reason: String,
    /// The target's host as far as it could be read, rendered for a terminal.
    pub(crate) host: String,
    pub(crate) port: u16,
}

/// What the bytes read so far hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// Not a whole head yet.
    Partial,
    /// A request, whose head is the first `usize` bytes.
    Request(Request, usize),
    /// A head the proxy will not serve.
    Refused(Refusal),
}

/// Read the head at the start of `buf`.
pub(crate) fn parse(buf: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let refused = |status, reason: String| {
        let host = shown(&raw_target(buf));
        Parsed::Refused(Refusal {
            status,
            reason,
            host,
            port: 0,
        })
    };
    let len = match req.parse(buf) {
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
            return refused(Status::TooLarge, too_large());
        }
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Ok(httparse::Status::Complete(len)) => len,
        Err(httparse::Error::TooManyHeaders) => {
            return refused(
                Status::TooLarge,
                format!("the request head holds more than {MAX_HEADERS} headers"),
            );
        }
        Err(e) => {
            return refused(
                Status::BadRequest,
                format!("not an HTTP/1.x request head ({e})"),
            )
        }
    };
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return refused(Status::BadRequest, "an incomplete request line".into());
    };
    let result = if method == "CONNECT" {
        connect(target)
    } else {
        plain(method, target, version, req.headers)
    };
    match result {
        Ok(request) => Parsed::Request(request, len),
        Err(reason) => refused(Status::BadRequest, reason),
    }
}

/// The reason of a head that does not fit.
pub(crate) fn too_large() -> String {
    format!("the request head is larger than {} KiB", MAX_HEAD / 1024)
}

/// `CONNECT host:port`.
fn connect(target: &str) -> Result<Request, String> {
    if target.contains(['/', '@', '?', '#']) {
        return Err(format!(
            "CONNECT asks for host:port, not `{}`",
            shown(target)
        ));
    }
    let (host, port) = split_authority(target, None)?;
    Ok(Request {
        host: host.to_string(),
        port,
        form: Form::Connect,
    })
}

/// `METHOD http://host[:port]/path?query HTTP/1.x`.
fn plain(
    method: &str,
    target: &str,
    version: u8,
    headers: &[httparse::Header<'_>],
) -> Result<Request, String> {
    let Some((scheme, rest)) = target.split_once("://") else {
        if target.starts_with('/') || target == "*" {
            return Err(
                "this is a proxy: ask for an absolute URL (`GET http://host/path`) or \
                 `CONNECT host:port`"
                    .into(),
            );
        }
        return Err(format!(
            "`{}` is not an absolute http:// URL",
            shown(target)
        ));
    };
    if scheme.eq_ignore_ascii_case("https") {
        return Err(
            "https:// is asked for with `CONNECT host:443` (the proxy does not speak TLS)".into(),
        );
    }
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(format!(
            "the proxy speaks http:// and CONNECT only, not `{}://`",
            shown(scheme)
        ));
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if authority.contains('@') {
        return Err("a URL with user information (`user@host`) is refused".into());
    }
    let (host, port) = split_authority(authority, Some(80))?;
    let path = tail.split('#').next().unwrap_or("");
    let path = match path.as_bytes().first() {
        None => "/".to_string(),
        Some(b'?') => format!("/{path}"),
        Some(_) => path.to_string(),
    };
    let head = upstream_head(method, &path, version, headers, authority);
    Ok(Request {
        host: host.to_string(),
        port,
        form: Form::Plain { head },
    })
}

/// The head sent upstream: the request line in origin form, `Host` from the URL's authority,
/// the client's headers minus the hop-by-hop ones and its own `Host`, and `Connection: close`.
///
/// The client's `Host` is never passed on (RFC 9112 §3.2.2: a proxy replaces it with the
/// request target's): the allow list judged the URL's host, and a server that hosts many sites
/// (a CDN's front end) routes by `Host`, so another name there would reach a site nobody listed.
fn upstream_head(
    method: &str,
    path: &str,
    version: u8,
    headers: &[httparse::Header<'_>],
    authority: &str,
) -> Vec<u8> {
    const HOP_BY_HOP: [&str; 4] = [
        "proxy-connection",
        "proxy-authorization",
        "connection",
        "keep-alive",
    ];
    let mut named: Vec<String> = Vec::new();
    for header in headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
    {
        for token in String::from_utf8_lossy(header.value).split(',') {
            let token = token.trim();
            if !token.is_empty() {
                named.push(token.to_ascii_lowercase());
            }
        }
    }
    let mut head = Vec::with_capacity(
        256 + headers
            .iter()
            .map(|h| h.name.len() + h.value.len() + 4)
            .sum::<usize>(),
    );
    head.extend_from_slice(method.as_bytes());
    head.push(b' ');
    head.extend_from_slice(path.as_bytes());
    head.extend_from_slice(if version == 0 {
        b" HTTP/1.0\r\n"
    } else {
        b" HTTP/1.1\r\n"
    });
    head.extend_from_slice(b"Host: ");
    head.extend_from_slice(authority.as_bytes());
    head.extend_from_slice(b"\r\n");
    for header in headers {
        let lower = header.name.to_ascii_lowercase();
        if lower == "host" || HOP_BY_HOP.contains(&lower.as_str()) || named.contains(&lower) {
            continue;
        }
        head.extend_from_slice(header.name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(header.value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    head
}

/// `host:port` (the port optional when `default` is given) → the host as written and the
/// port, 1 to 65535 in plain digits.
fn split_authority(authority: &str, default: Option<u16>) -> Result<(&str, u16), String> {
    let (host, port) = if authority.starts_with('[') {
        match authority.find(']') {
            Some(at) => {
                let (host, after) = authority.split_at(at + 1);
                match after.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None if after.is_empty() => (host, None),
                    None => return Err("an IPv6 address in brackets, then `:port`".into()),
                }
            }
            None => return Err("an IPv6 address is written in brackets: `[::1]`".into()),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, _)) if host.contains(':') => {
                return Err("an IPv6 address is written in brackets: `[::1]`".into())
            }
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match (port, default) {
        (None | Some(""), Some(default)) => default,
        (None | Some(""), None) => {
            return Err(format!(
                "CONNECT needs host:port, and `{}` has no port",
                shown(authority)
            ))
        }
        (Some(text), _) => parse_port(text)?,
    };
    Ok((host, port))
}

fn parse_port(text: &str) -> Result<u16, String> {
    let bad = || format!("`{}` is not a port (1 to 65535)", shown(text));
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    match text.parse::<u16>() {
        Ok(0) | Err(_) => Err(bad()),
        Ok(port) => Ok(port),
    }
}

/// The request target of a head that could not be read whole: the second word of its first
/// line, as far as it is there.
fn raw_target(buf: &[u8]) -> String {
    let line = buf
        .split(|&b| b == b'\n')
        .find(|line| !line.iter().all(u8::is_ascii_whitespace))
        .unwrap_or(&[]);
    let word = line
        .split(|&b| b == b' ')
        .filter(|w| !w.is_empty())
        .nth(1)
        .unwrap_or(&[]);
    String::from_utf8_lossy(&word[..word.len().min(MAX_SHOWN)]).into_owned()
}

/// `text` for a report and a terminal: lower case, every character but visible ASCII escaped,
/// at most 255 bytes.
pub(crate) fn shown(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        let piece: String = if c.is_ascii_graphic() && c != '\\' {
            c.to_ascii_lowercase().to_string()
        } else {
            c.escape_default().collect()
        };
        if out.len() + piece.len() > MAX_SHOWN {
            break;
        }
        out.push_str(&piece);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(text: &str) -> Request {
        match parse(text.as_bytes()) {
            Parsed::Request(request, len) => {
                assert_eq!(len, text.find("\r\n\r\n").unwrap() + 4);
                request
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }

    fn refusal(text: &[u8]) -> Refusal {
        match parse(text) {
            Parsed::Refused(refusal) => refusal,
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(text)),
        }
    }

    fn head_text(request: &Request) -> String {
        match &request.form {
            Form::Plain { head } => String::from_utf8(head.clone()).unwrap(),
            Form::Connect => panic!("CONNECT"),
        }
    }

    #[test]
    fn connect_reads_host_and_port() {
        let r = request("CONNECT Example.COM:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
        assert_eq!(
            (r.host.as_str(), r.port, r.form),
            ("Example.COM", 443, Form::Connect)
        );
        let r = request("CONNECT [::1]:8080 HTTP/1.0\r\n\r\n");
        assert_eq!((r.host.as_str(), r.port), ("[::1]", 8080));
        assert!(matches!(
            parse(b"CONNECT a.com:443 HTTP/1.1\r\n"),
            Parsed::Partial
        ));
    }

    #[test]
    fn absolute_form_becomes_origin_form_without_hop_by_hop_headers() {
        let r = request(
            "POST http://a.test:8080/p/q?x=1#frag HTTP/1.1\r\nHost: a.test:8080\r\n\
             Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\n\
             Connection: keep-alive, X-Drop\r\nKeep-Alive: 5\r\nX-Drop: 1\r\n\
             Content-Length: 3\r\nX-Keep: yes\r\n\r\n",
        );
        assert_eq!((r.host.as_str(), r.port), ("a.test", 8080));
        assert_eq!(
            head_text(&r),
            "POST /p/q?x=1 HTTP/1.1\r\nHost: a.test:8080\r\nContent-Length: 3\r\n\
             X-Keep: yes\r\nConnection: close\r\n\r\n"
        );
        let r = request("GET http://b.test?q HTTP/1.0\r\n\r\n");
        assert_eq!(r.port, 80);
        assert_eq!(
            head_text(&r),
            "GET /?q HTTP/1.0\r\nHost: b.test\r\nConnection: close\r\n\r\n"
        );
        let r = request("GET HTTP://[::1]:81 HTTP/1.1\r\n\r\n");
        assert_eq!((r.host.as_str(), r.port), ("[::1]", 81));
        assert!(head_text(&r).starts_with("GET / HTTP/1.1\r\nHost: [::1]:81\r\n"));
    }

    #[test]
    fn the_client_s_host_is_replaced_by_the_url_s() {
        // Another site behind the same front end, in any spelling, once or twice: upstream
        // gets the one Host the allow list judged.
        for host in [
            "Host: other.test\r\n",
            "host: other.test\r\nHOST: a.test\r\n",
            "Host: a.test\r\nHost: other.test\r\n",
            "Host:\r\n",
        ] {
            let r = request(&format!(
                "GET http://a.test/x HTTP/1.1\r\n{host}Accept: */*\r\n\r\n"
            ));
            assert_eq!(
                head_text(&r),
                "GET /x HTTP/1.1\r\nHost: a.test\r\nAccept: */*\r\nConnection: close\r\n\r\n",
                "{host:?}"
            );
        }
    }

    #[test]
    fn everything_else_is_refused_with_a_reason() {
        for (text, why) in [
            ("GET /path HTTP/1.1\r\n\r\n", "this is a proxy"),
            ("OPTIONS * HTTP/1.1\r\n\r\n", "this is a proxy"),
            ("GET https://a.test/ HTTP/1.1\r\n\r\n", "CONNECT host:443"),
            ("GET ftp://a.test/ HTTP/1.1\r\n\r\n", "not `ftp://`"),
            (
                "GET http://u:p@a.test/ HTTP/1.1\r\n\r\n",
                "user information",
            ),
            ("GET a.test HTTP/1.1\r\n\r\n", "not an absolute"),
            ("CONNECT a.test HTTP/1.1\r\n\r\n", "has no port"),
            ("CONNECT a.test: HTTP/1.1\r\n\r\n", "has no port"),
            ("CONNECT a.test:0 HTTP/1.1\r\n\r\n", "not a port"),
            ("CONNECT a.test:65536 HTTP/1.1\r\n\r\n", "not a port"),
            ("CONNECT a.test:+1 HTTP/1.1\r\n\r\n", "not a port"),
            ("CONNECT ::1:443 HTTP/1.1\r\n\r\n", "brackets"),
            ("CONNECT [::1 HTTP/1.1\r\n\r\n", "brackets"),
            ("CONNECT [::1]x HTTP/1.1\r\n\r\n", "brackets"),
            ("CONNECT http://a.test:443 HTTP/1.1\r\n\r\n", "host:port"),
            ("GET http://a.test/\r\n\r\n", "HTTP/1.x"),
            ("GET http://a.test/ HTTP/2.0\r\n\r\n", "HTTP/1.x"),
            ("\x16\x03\x01\x02\x00\r\n\r\n", "HTTP/1.x"),
        ] {
            let r = refusal(text.as_bytes());
            assert_eq!(r.status, Status::BadRequest, "{text:?}");
            assert!(r.reason.contains(why), "{text:?}: {}", r.reason);
            assert!(!r.reason.contains('\n'), "{text:?}");
        }
    }

    #[test]
    fn too_large_heads_are_431() {
        let mut big = b"GET http://a.test/ HTTP/1.1\r\nX: ".to_vec();
        big.resize(MAX_HEAD, b'a');
        assert_eq!(refusal(&big).status, Status::TooLarge);
        let mut many = String::from("GET http://a.test/ HTTP/1.1\r\n");
        for i in 0..=MAX_HEADERS {
            many.push_str(&format!("X-{i}: 1\r\n"));
        }
        many.push_str("\r\n");
        assert_eq!(refusal(many.as_bytes()).status, Status::TooLarge);
    }

    #[test]
    fn hosts_are_shown_safely() {
        assert_eq!(shown("A.Test"), "a.test");
        assert_eq!(shown("a\u{1b}[31m\n"), "a\\u{1b}[31m\\n");
        assert!(shown(&"\u{1b}".repeat(300)).len() <= MAX_SHOWN);
        assert_eq!(
            refusal(b"GET \x1b]0;x HTTP/1.1\r\n\r\n").host,
            "\\u{1b}]0;x"
        );
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_are_read_without_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn any_head_like_text_is_read_without_panic(
            method in "(GET|CONNECT|POST|[A-Z]{1,8})",
            target in "\\PC{0,60}",
            version in "HTTP/1\\.[01]|HTTP/[0-9]\\.[0-9]|",
            headers in proptest::collection::vec("[A-Za-z-]{1,12}: \\PC{0,20}", 0..6),
        ) {
            let text = format!("{method} {target} {version}\r\n{}\r\n\r\n", headers.join("\r\n"));
            match parse(text.as_bytes()) {
                Parsed::Refused(r) => {
                    proptest::prop_assert!(!r.reason.contains(['\r', '\n']));
                    proptest::prop_assert!(r.host.len() <= MAX_SHOWN);
                    proptest::prop_assert!(r.host.chars().all(|c| c.is_ascii_graphic()));
                }
                Parsed::Request(r, len) => {
                    proptest::prop_assert!(len <= text.len());
                    proptest::prop_assert!(r.port != 0);
                }
                Parsed::Partial => {}
            }
        }

        /// Whatever headers a plain request holds, upstream gets one well-formed head: the
        /// same request line in origin form, one `Host` (the URL's), none of the hop-by-hop
        /// headers or those `Connection` names, the rest in order, and `Connection: close`.
        #[test]
        fn the_upstream_head_is_one_clean_request_with_the_urls_host(
            authority in "(a\\.test|A\\.Test|\\[::1\\]|10\\.0\\.0\\.1)(:[1-9][0-9]{0,3})?",
            path in "(/[a-z0-9%?=&]{0,12}){0,3}",
            headers in proptest::collection::vec(
                (
                    concat!(
                        "(Host|HOST|host|Connection|Proxy-Connection|Proxy-Authorization|",
                        "Keep-Alive|X-[A-Za-z]{1,6}|Accept)"
                    ),
                    "[ -~]{0,16}",
                ),
                0..8,
            ),
        ) {
            let mut text = format!("GET http://{authority}{path} HTTP/1.1\r\n");
            for (name, value) in &headers {
                text.push_str(&format!("{name}: {value}\r\n"));
            }
            text.push_str("\r\n");
            let Parsed::Request(r, _) = parse(text.as_bytes()) else {
                let refused = format!("refused: {text:?}");
                return Err(proptest::test_runner::TestCaseError::fail(refused));
            };
            let Form::Plain { head } = &r.form else {
                return Err(proptest::test_runner::TestCaseError::fail("not plain"));
            };
            let mut parsed_headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut again = httparse::Request::new(&mut parsed_headers);
            let whole = Some(httparse::Status::Complete(head.len()));
            proptest::prop_assert_eq!(again.parse(head).ok(), whole);
            let want_path = if path.is_empty() { "/" } else { path.as_str() };
            proptest::prop_assert_eq!(again.path, Some(want_path));
            let sent: Vec<(String, String)> = again
                .headers
                .iter()
                .map(|h| {
                    let value = String::from_utf8_lossy(h.value).into_owned();
                    (h.name.to_string(), value)
                })
                .collect();
            proptest::prop_assert_eq!(&sent[0], &("Host".to_string(), authority.clone()));
            let close = ("Connection".to_string(), "close".to_string());
            proptest::prop_assert_eq!(sent.last().unwrap(), &close);
            let named: Vec<String> = headers
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
                .flat_map(|(_, v)| v.split(',').map(|t| t.trim().to_ascii_lowercase()))
                .collect();
            let kept: Vec<(String, String)> = headers
                .iter()
                .filter(|(n, _)| {
                    let lower = n.to_ascii_lowercase();
                    let dropped = [
                        "host",
                        "connection",
                        "proxy-connection",
                        "proxy-authorization",
                        "keep-alive",
                    ];
                    !dropped.contains(&lower.as_str())
                        && !named.contains(&lower)
                })
                .map(|(n, v)| (n.clone(), v.trim().to_string()))
                .collect();
            proptest::prop_assert_eq!(&sent[1..sent.len() - 1], &kept[..]);
        }
    }
}
