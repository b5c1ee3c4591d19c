//! The fuzz bodies of the two network-facing readers: the `host_endpoint` exchange's HTTP
//! response reading and the MCP adapter's JSON-RPC lines and `tools/call` result.

use super::*;

/// The endpoint: the first line is the URL in `url_env`, the rest the response body, judged
/// under an HTTP status taken from the line's length. [`endpoint::target`] only accepts
/// `http(s)` URLs, plain `http` only to a loopback IP literal, `localhost` or a name whose
/// addresses are checked after resolution (SPEC §11.1), and never shows more of the URL than its
/// origin; [`endpoint::idempotency_key`] is visible ASCII and maps back to the request id;
/// the body is judged like an adapter's stdout, a non-2xx never `succeeded`.
pub fn endpoint(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (url, body) = text.split_once('\n').unwrap_or((&text, ""));
    let spec = ptd_wire::envelope::bridge::EndpointSpec {
        url_env: "PTD_FUZZ_URL".into(),
        method: endpoint::METHOD.into(),
    };
    let env = HostEnv::with([("PTD_FUZZ_URL".to_string(), url.to_string())]);
    match endpoint::target(&spec, None, None, &env) {
        Ok(target) => {
            let origin = target.origin();
            let (scheme, rest) = origin.split_once("://").expect("an origin has a scheme");
            assert!(scheme == "http" || scheme == "https", "{origin}");
            assert!(!rest.contains(['/', '?', '#', '@']), "{origin}");
            let port = rest.rsplit_once(':').expect("a port").1;
            assert!(port.parse::<u16>().is_ok_and(|p| p != 0), "{origin}");
            if scheme == "http" {
                // An IP literal must be loopback now; a name (other than `localhost` and the
                // names under it) is checked after resolution, every address loopback.
                let host = rest.rsplit_once(':').unwrap().0;
                let v4 = host.parse::<std::net::Ipv4Addr>().ok();
                let v6 = host
                    .strip_prefix('[')
                    .and_then(|h| h.strip_suffix(']'))
                    .and_then(|h| h.parse::<std::net::Ipv6Addr>().ok());
                let loopback = endpoint::resolve::is_localhost(host)
                    || v4.is_some_and(|ip| ip.is_loopback())
                    || v6.is_some_and(|ip| {
                        ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v| v.is_loopback())
                    });
                let name = v4.is_none() && v6.is_none();
                assert!(loopback || name, "plain http to {origin}");
                assert_eq!(
                    target.loopback_checked_after_resolution(),
                    !loopback,
                    "{origin}"
                );
            }
            let _ = format!("{target:?}");
        }
        Err(why) => {
            // Beyond the origin, nothing of the URL is ever shown.
            let after = url.split_once("://").map_or("", |(_, r)| r);
            let path = after.find(['/', '?']).map_or("", |i| &after[i..]);
            if path.len() >= 8 {
                assert!(!why.message().contains(path), "{}", why.message());
                assert!(!why.human().contains(path), "{}", why.human());
            }
        }
    }
    let key = endpoint::idempotency_key(url);
    assert!(key.bytes().all(|b| b.is_ascii_graphic()), "{key:?}");
    assert_eq!(
        percent_decode(&key),
        url.as_bytes(),
        "the key maps back to the id"
    );

    let status = 100 + (url.len() % 500) as u16;
    let sent = Echo {
        request_id: "fuzz-1".into(),
        tool: "workspace.read".into(),
        operation: "call".into(),
    };
    let expect = Expect {
        sent: &sent,
        canonical_tool: "workspace.read",
    };
    let answer = Answer {
        ending: Ending::HttpStatus(status),
        body: Body::Bytes(body.as_bytes()),
    };
    let limits = Limits {
        timeout_ms: 1000,
        max_bytes: MAX,
    };
    let envelope = match judge::judge(answer, expect, limits) {
        Ok(envelope) => {
            assert!(
                (200..300).contains(&status) || envelope.status != Status::Succeeded,
                "HTTP {status} succeeded"
            );
            envelope
        }
        Err(err) => {
            assert!(matches!(
                err,
                DispatchError::ResultInvalid { .. } | DispatchError::EndpointHttpStatus { .. }
            ));
            err.envelope(&sent)
        }
    };
    let text = envelope.render(&Redactor::new(), Audience::Caller);
    ResultEnvelope::check(&text, Some(expect)).expect("one valid envelope");
}

/// The MCP adapter's answer side: `data` is what a server wrote on stdout, one JSON-RPC
/// message a line. [`wire::parse`] sorts every line or says why not; a server's request is
/// answered on one line that reads back as a response echoing its id; a `tools/call` result
/// ([`mcp::call_result`]) becomes exactly one valid envelope echoing the request
/// ([`mcp::envelope`]), `succeeded` only with a `content` array as its output, and a tool's
/// error text reaches the envelope escaped for terminals and bounded.
pub fn mcp(data: &[u8]) {
    use ptd_adapters::mcp::wire::{self, Incoming, Malformed, Outcome, ResponseId};
    use ptd_adapters::mcp::{self, limits, CallResult, Code, Failure, Revision};
    let sent = Echo {
        request_id: "fuzz-1".into(),
        tool: "workspace.read".into(),
        operation: "call".into(),
    };
    let expect = Expect {
        sent: &sent,
        canonical_tool: "workspace.read",
    };
    let judged = |outcome: Result<String, Failure>| {
        let wanted = match &outcome {
            Err(failure) => failure.code.status(),
            Ok(_) => Status::Succeeded,
        };
        let text = mcp::envelope(sent.clone(), outcome);
        assert!(!text.contains('\n'), "one line");
        let envelope = ResultEnvelope::check(&text, Some(expect))
            .unwrap_or_else(|issues| panic!("an invalid envelope {text}: {issues:?}"));
        assert_eq!(envelope.status, wanted, "{text}");
    };
    for line in data.split(|&b| b == b'\n').take(64) {
        match wire::parse(line.to_vec(), MAX) {
            Err(Malformed::Json(issue)) => {
                assert!(Document::parse(line.to_vec(), MAX).is_err(), "{issue:?}");
            }
            Err(Malformed::Shape(why)) => {
                assert!(Document::parse(line.to_vec(), MAX).is_ok(), "{why}");
            }
            Ok(Incoming::Notification { .. }) => {}
            Ok(Incoming::Request { id, method }) => {
                assert!(matches!(Kind::of(&id), Kind::String | Kind::Number), "{id}");
                let answers = [
                    wire::result_response(&id, "{}"),
                    wire::error_response(&id, wire::METHOD_NOT_FOUND, &method),
                ];
                for answer in answers {
                    assert!(!answer.contains('\n'), "{answer}");
                    match wire::parse(answer.clone().into_bytes(), MAX) {
                        Ok(Incoming::Response { id: back, outcome }) => {
                            let numeric = raw::integer(&id);
                            match numeric {
                                Some(n) => assert_eq!(back, ResponseId::Number(n)),
                                None => assert_eq!(back, ResponseId::Foreign),
                            }
                            if let Outcome::Error(err) = outcome {
                                assert_eq!(err.code, Some(wire::METHOD_NOT_FOUND));
                                assert_eq!(err.message, method);
                            }
                        }
                        other => panic!("{answer} reads back as {other:?}"),
                    }
                }
            }
            Ok(Incoming::Response { id, outcome }) => match outcome {
                Outcome::Result(result) => {
                    assert_ne!(id, ResponseId::Null);
                    assert_eq!(Kind::of(&result), Kind::Object);
                    assert!(!result.contains('\n'));
                    if let Some(versions) = Fields::parse(&result)
                        .and_then(|f| f.get("supportedVersions").and_then(wire::string_items))
                    {
                        let _ = Revision::choose(&versions);
                    }
                    let outcome = match mcp::call_result(&result) {
                        Ok(CallResult::Output(output)) => {
                            let fields = Fields::parse(&output).expect("an output is an object");
                            let content = fields.get("content").expect("output has content");
                            assert_eq!(Kind::of(content), Kind::Array);
                            Ok(output)
                        }
                        Ok(CallResult::Again(state)) => {
                            assert_eq!(Kind::of(&state), Kind::String);
                            continue;
                        }
                        Ok(CallResult::ToolError { message, details }) => {
                            assert!(!message.is_empty());
                            assert!(
                                message.len() <= limits::MAX_ERROR_TEXT_BYTES + '…'.len_utf8(),
                                "{} bytes",
                                message.len()
                            );
                            assert!(!message.chars().any(char::is_control), "{message:?}");
                            assert!(details.get("content").is_some_and(Value::is_array));
                            Err(Failure::new(Code::ToolError, message).with_details(details))
                        }
                        Err(failure) => {
                            assert!(!failure.message.is_empty());
                            Err(failure)
                        }
                    };
                    judged(outcome);
                }
                Outcome::Error(err) => {
                    let digits = err.code_raw.strip_prefix('-').unwrap_or(&err.code_raw);
                    assert!(!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()));
                    assert_eq!(err.code, err.code_raw.parse::<i64>().ok());
                    if let Some(versions) = err.supported_versions() {
                        let _ = Revision::choose(&versions);
                    }
                    let message = format!("JSON-RPC error {}: {}", err.code_raw, err.message);
                    judged(Err(Failure::new(Code::McpError, message)));
                }
            },
        }
    }
}

/// `%XX` decoded (the inverse of [`endpoint::idempotency_key`] when the id needed encoding).
fn percent_decode(key: &str) -> Vec<u8> {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// The endpoint mode's name resolution (`endpoint::resolve`) on hostile input: `data`'s first
/// byte picks what it is — a nameserver's answer to a fixed query (to both record types), a
/// hosts file or a `resolv.conf`. Nothing panics or loops; an answer is taken only for the
/// query's id and question and holds no more addresses than the packet has room for; a hosts
/// lookup finds only names the text holds; `resolv.conf` gives one to three nameservers on
/// port 53 and options within their bounds.
pub fn dns(data: &[u8]) {
    use ptd_endpoint::resolve::{self, Answer};
    use std::time::Duration;
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    match pick % 3 {
        0 => {
            use hickory_proto::rr::RecordType;
            for qtype in [RecordType::A, RecordType::AAAA] {
                let answer = resolve::parse_answer(rest, 0x4242, "svc.example", qtype);
                if answer.is_some() {
                    assert!(rest.len() >= 12 && rest[..2] == [0x42, 0x42]);
                }
                if let Some(Answer::Addresses(ips)) = answer {
                    let each = if qtype == RecordType::A {
                        4 + 12
                    } else {
                        16 + 12
                    };
                    assert!(ips.len() * each <= rest.len(), "{ips:?}");
                }
            }
        }
        1 => {
            let text = String::from_utf8_lossy(rest);
            for name in ["localhost", "svc.example", ""] {
                let found = resolve::hosts_lookup(&text, name);
                if !found.is_empty() {
                    assert!(text.to_ascii_lowercase().contains(name));
                }
            }
        }
        _ => {
            let conf = resolve::parse_resolv_conf(rest);
            assert!((1..=3).contains(&conf.nameservers.len()));
            assert!(conf.nameservers.iter().all(|s| s.port() == 53));
            assert!(conf.ndots <= 15 && (1..=5).contains(&conf.attempts));
            assert!((Duration::from_secs(1)..=Duration::from_secs(30)).contains(&conf.timeout));
        }
    }
}
