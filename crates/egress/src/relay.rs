//! Relaying a served connection both ways: one thread a direction, 256 KiB at a time, every
//! byte taken from the call's budget of its direction.
//!
//! An end of file on one side is passed on as a half-close of the other (`shutdown(Write)`)
//! and the other direction goes on until it ends too. A failure on either side, or a direction
//! whose budget ran out, cuts the whole connection (both sockets shut down both ways), which
//! ends the other direction as well.

use crate::state::{Shared, MAX_BYTES_REACHED};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::AtomicU64;

/// The size of each direction's buffer.
const BUFFER: usize = 256 * 1024;

/// One direction: where it reads, where it writes, its counter, and its ends' names for a
/// reason.
struct Direction<'a> {
    from: &'a TcpStream,
    to: &'a TcpStream,
    total: &'a AtomicU64,
    from_name: &'static str,
    to_name: &'static str,
    /// From upstream to the client.
    down: bool,
}

/// Relay until both directions ended, or the connection was cut; the bytes moved up and down.
pub(crate) fn relay(
    shared: &Shared,
    id: u64,
    client: &TcpStream,
    upstream: &TcpStream,
) -> (u64, u64) {
    let up = Direction {
        from: client,
        to: upstream,
        total: &shared.up,
        from_name: "the client",
        to_name: "the upstream server",
        down: false,
    };
    let down = Direction {
        from: upstream,
        to: client,
        total: &shared.down,
        from_name: "the upstream server",
        to_name: "the client",
        down: true,
    };
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("ptd-egress-down".into())
            .spawn_scoped(scope, || pump(shared, id, &down));
        match spawned {
            Ok(thread) => {
                let moved_up = pump(shared, id, &up);
                let moved_down = thread.join().unwrap_or(0);
                (moved_up, moved_down)
            }
            Err(e) => {
                shared.cut(
                    id,
                    &format!("the proxy could not start a relay thread: {e}"),
                );
                (0, 0)
            }
        }
    })
}

/// One direction until its end of file, a failure or its budget; the bytes it moved.
fn pump(shared: &Shared, id: u64, way: &Direction<'_>) -> u64 {
    let mut buf = vec![0u8; BUFFER];
    let (mut from, mut to) = (way.from, way.to);
    let mut moved = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => {
                shared.ended(id, way.down);
                let _ = to.shutdown(Shutdown::Write);
                return moved;
            }
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                shared.cut(id, &format!("reading from {} failed: {e}", way.from_name));
                return moved;
            }
        };
        let granted = shared.reserve(way.total, n);
        if let Err(e) = to.write_all(&buf[..granted]) {
            shared.cut(id, &format!("writing to {} failed: {e}", way.to_name));
            return moved;
        }
        moved += granted as u64;
        if granted < n {
            shared.cut(id, MAX_BYTES_REACHED);
            return moved;
        }
    }
}

/// Send `bytes` upstream (a rewritten head, what the client sent after its head) through the
/// budget: `Ok` with their count, or `Err` with the count sent when the connection was cut.
pub(crate) fn send_up(
    shared: &Shared,
    id: u64,
    upstream: &TcpStream,
    bytes: &[u8],
) -> Result<u64, u64> {
    if bytes.is_empty() {
        return Ok(0);
    }
    let granted = shared.reserve(&shared.up, bytes.len());
    let mut upstream = upstream;
    if let Err(e) = upstream.write_all(&bytes[..granted]) {
        shared.cut(id, &format!("writing to the upstream server failed: {e}"));
        return Err(0);
    }
    if granted < bytes.len() {
        shared.cut(id, MAX_BYTES_REACHED);
        return Err(granted as u64);
    }
    Ok(granted as u64)
}
