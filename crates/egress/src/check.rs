//! The checks before any connection, in SPEC §17's order, and the one connection they allow.
//!
//! 1. The host as asked must be listed with its port (`allows`): an address only by an address
//!    rule, a name by a name or `*.` rule.
//! 2. A name is resolved on the host side (`ptd_endpoint::resolve`, SPEC §11.1), and every
//!    address it resolves to must pass `address_refusal`: public, or listed literally. One
//!    refused address refuses the request.
//! 3. The proxy connects to those addresses, in order, the first that answers — never a second
//!    lookup, so what was checked is what is reached.

use crate::response::Status;
use crate::state::Shared;
use crate::Config;
use ptd_endpoint::resolve::{resolve, ResolveError};
use ptd_sys::confine::allow::{address_refusal, allows, Asked};
use std::io::{self, ErrorKind};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The bound of each step of a request (reading its head, the lookup, each connect), within
/// the call's deadline.
pub(crate) const STEP_BOUND: Duration = Duration::from_secs(10);

/// Why a request is not served: the status to answer and the one-line reason.
pub(crate) type Refused = (Status, String);

/// The addresses `asked`:`port` may be reached at, or why it may not.
pub(crate) fn check(config: &Config, asked: &Asked, port: u16) -> Result<Vec<SocketAddr>, Refused> {
    if !allows(&config.allow, asked, port) {
        return Err((
            Status::Forbidden,
            format!("{asked}:{port} is not in the allow list"),
        ));
    }
    let addrs = match asked {
        Asked::Address(ip) => vec![SocketAddr::new(*ip, port)],
        Asked::Name(name) => lookup(config, name, port)?,
    };
    for addr in &addrs {
        if let Some(kind) = address_refusal(&config.allow, *addr) {
            let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
                "an"
            } else {
                "a"
            };
            return Err((
                Status::Forbidden,
                format!(
                    "{asked} resolves to {}, {article} {kind} address: list {addr} to allow it",
                    addr.ip()
                ),
            ));
        }
    }
    Ok(addrs)
}

/// A name's addresses, looked up on the host side within the step's bound.
fn lookup(config: &Config, name: &str, port: u16) -> Result<Vec<SocketAddr>, Refused> {
    let until = config.deadline.min(Instant::now() + STEP_BOUND);
    match resolve(name, port, until, &config.sources) {
        Ok(addrs) if !addrs.is_empty() => Ok(addrs),
        Ok(_) => Err((Status::BadGateway, format!("{name}: no address"))),
        Err(ResolveError::Failed(failure)) => {
            Err((Status::BadGateway, format!("{name}: {failure}")))
        }
        Err(ResolveError::TimedOut) => Err((
            Status::GatewayTimeout,
            format!("the lookup of {name} did not finish in time"),
        )),
    }
}

/// Connect to the first of `addrs` that answers (`target` names them in a reason).
pub(crate) fn connect(
    shared: &Shared,
    addrs: &[SocketAddr],
    target: &str,
) -> Result<TcpStream, Refused> {
    let mut last = None;
    for &addr in addrs {
        let until = shared.config.deadline.min(Instant::now() + STEP_BOUND);
        match connect_one(shared, addr, until) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some((addr, e)),
        }
    }
    Err(match last {
        Some((addr, e)) if e.kind() == ErrorKind::TimedOut => (
            Status::GatewayTimeout,
            format!("connecting to {target} ({addr}) timed out"),
        ),
        Some((addr, e)) => (
            Status::BadGateway,
            format!("could not connect to {target} ({addr}): {e}"),
        ),
        None => (Status::BadGateway, format!("{target}: no address")),
    })
}

/// One connect, within `until`; a stop ends the wait for the handshake within 100 ms
/// (`ptd_sys::net::connect_until`), and a slow handshake is never started again.
fn connect_one(shared: &Shared, addr: SocketAddr, until: Instant) -> io::Result<TcpStream> {
    ptd_sys::net::connect_until(addr, until, &|| shared.stopped().is_some()).map_err(|e| {
        match (e.kind(), shared.stopped()) {
            (ErrorKind::Interrupted, Some(reason)) => io::Error::other(reason),
            _ => e,
        }
    })
}
