//! One client connection, from its request head to its end: read the head, check, connect,
//! answer, relay — or refuse with a status and a reason. Plain HTTP is one request per client
//! connection (`Connection: close` is sent upstream; what the client sends after its request
//! goes on to the same server, raw).

use crate::check::{self, Refused, STEP_BOUND};
use crate::head::{self, Form, Parsed, Request, MAX_HEAD};
use crate::relay::{relay, send_up};
use crate::response::{self, Status, ESTABLISHED};
use crate::state::Shared;
use crate::Connection;
use ptd_sys::confine::allow::Asked;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

/// Why a connection's thread was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// To serve it.
    Served,
    /// To refuse it (`503`): `max_connections` are being served.
    Overflow,
}

/// How a connection ended.
enum Outcome {
    /// Not relayed: the answer and its reason. `allowed`: the checks passed (the upstream
    /// could not be reached).
    Refused {
        status: Status,
        reason: String,
        allowed: bool,
    },
    /// Relayed, these many bytes up and down.
    Relayed { up: u64, down: u64 },
}

fn refused((status, reason): Refused) -> Outcome {
    Outcome::Refused {
        status,
        reason,
        allowed: false,
    }
}

/// The host and port of the request, as far as they were read.
#[derive(Default)]
struct Seen {
    host: String,
    port: u16,
}

/// Serve (or refuse) connection `id` to its end; what happened.
pub(crate) fn serve(shared: &Shared, id: u64, client: TcpStream, slot: Slot) -> Connection {
    let mut seen = Seen::default();
    let outcome = match shared.register(id, &client) {
        Ok(()) => run(shared, id, &client, slot, &mut seen),
        Err(reason) => refused((Status::Unavailable, reason)),
    };
    if let Outcome::Refused { status, reason, .. } = &outcome {
        if shared.stopped().is_none() {
            response::refuse(&client, *status, reason);
        }
    }
    let cut = shared.release(id);
    drop(client);
    let (allowed, reason, bytes_up, bytes_down) = match outcome {
        Outcome::Refused {
            reason, allowed, ..
        } => (allowed, Some(reason), 0, 0),
        Outcome::Relayed { up, down } => (true, cut, up, down),
    };
    Connection {
        host: seen.host,
        port: seen.port,
        allowed,
        reason,
        bytes_up,
        bytes_down,
    }
}

fn run(shared: &Shared, id: u64, client: &TcpStream, slot: Slot, seen: &mut Seen) -> Outcome {
    let (request, rest) = match read_head(shared, client) {
        Ok(read) => read,
        Err(refusal) => {
            seen.host = refusal.host;
            seen.port = refusal.port;
            return refused((refusal.status, refusal.reason));
        }
    };
    seen.port = request.port;
    seen.host = head::shown(&request.host);
    let asked = match Asked::parse(&request.host) {
        Ok(asked) => asked,
        Err(why) => {
            let reason = format!("`{}` is not a host: {why}", seen.host);
            return refused((Status::BadRequest, reason));
        }
    };
    seen.host = asked.to_string();
    if slot == Slot::Overflow {
        let max = shared.config.max_connections;
        let reason = format!("more than {max} connections at once (the proxy's bound)");
        return refused((Status::Unavailable, reason));
    }
    if shared.spent() {
        let reason = "the call's network budget (network_max_bytes) is spent".to_string();
        return refused((Status::Forbidden, reason));
    }
    let addrs = match check::check(&shared.config, &asked, request.port) {
        Ok(addrs) => addrs,
        Err(refusal) => return refused(refusal),
    };
    let target = format!("{asked}:{}", request.port);
    let upstream = match check::connect(shared, &addrs, &target) {
        Ok(upstream) => upstream,
        Err((status, reason)) => {
            return Outcome::Refused {
                status,
                reason,
                allowed: true,
            }
        }
    };
    carry(shared, id, client, &upstream, request, &rest)
}

/// The request passed: answer or forward its head, then relay.
fn carry(
    shared: &Shared,
    id: u64,
    client: &TcpStream,
    upstream: &TcpStream,
    request: Request,
    rest: &[u8],
) -> Outcome {
    let nothing = Outcome::Relayed { up: 0, down: 0 };
    if let Err(reason) = shared.register(id, upstream) {
        shared.cut(id, &reason);
        return nothing;
    }
    let _ = upstream.set_nodelay(true);
    let _ = client.set_nodelay(true);
    let _ = client.set_read_timeout(None);
    let mut up = 0;
    match request.form {
        Form::Connect => {
            let mut client = client;
            if let Err(e) = client.write_all(ESTABLISHED) {
                shared.cut(id, &format!("writing to the client failed: {e}"));
                return nothing;
            }
        }
        Form::Plain { head } => match send_up(shared, id, upstream, &head) {
            Ok(sent) => up += sent,
            Err(sent) => return Outcome::Relayed { up: sent, down: 0 },
        },
    }
    match send_up(shared, id, upstream, rest) {
        Ok(sent) => up += sent,
        Err(sent) => {
            return Outcome::Relayed {
                up: up + sent,
                down: 0,
            }
        }
    }
    let (relayed_up, down) = relay(shared, id, client, upstream);
    Outcome::Relayed {
        up: up + relayed_up,
        down,
    }
}

/// Read the client's request head within the step's bound; the request and the bytes the
/// client sent after its head.
fn read_head(shared: &Shared, client: &TcpStream) -> Result<(Request, Vec<u8>), head::Refusal> {
    let until = shared.config.deadline.min(Instant::now() + STEP_BOUND);
    let mut buf = vec![0u8; MAX_HEAD];
    let mut len = 0;
    let mut client = client;
    let failed = |status, reason: String| head::Refusal {
        status,
        reason,
        host: String::new(),
        port: 0,
    };
    loop {
        match head::parse(&buf[..len]) {
            Parsed::Partial if len >= MAX_HEAD => {
                return Err(failed(Status::TooLarge, head::too_large()))
            }
            Parsed::Partial => {}
            Parsed::Request(request, at) => return Ok((request, buf[at..len].to_vec())),
            Parsed::Refused(refusal) => return Err(refusal),
        }
        let left = until.saturating_duration_since(Instant::now());
        let timed_out = || {
            let reason = shared.stopped().map_or_else(
                || format!("no whole request head within {} s", STEP_BOUND.as_secs()),
                str::to_string,
            );
            failed(Status::RequestTimeout, reason)
        };
        if left.is_zero() || client.set_read_timeout(Some(left)).is_err() {
            return Err(timed_out());
        }
        match client.read(&mut buf[len..]) {
            Ok(0) => {
                let reason = shared.stopped().map_or_else(
                    || "the client closed the connection before a whole request head".to_string(),
                    str::to_string,
                );
                return Err(failed(Status::BadRequest, reason));
            }
            Ok(n) => len += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(timed_out())
            }
            Err(e) => {
                return Err(failed(
                    Status::BadRequest,
                    format!("reading the request failed: {e}"),
                ))
            }
        }
    }
}
