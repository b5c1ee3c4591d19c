//! Sockets the product makes itself beyond what `std::net` offers: a TCP connection that a
//! stop can interrupt (the egress proxy's, SPEC §17).

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::net::{AddressFamily, SocketFlags, SocketType};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long one wait for the connection lasts before `stopped` is asked again.
const SLICE: Duration = Duration::from_millis(100);

/// Connect to `addr` by `until`, asking `stopped` at least every 100 ms: one socket, one
/// `connect`, waited for in slices (a slow handshake is never started again). The stream is
/// blocking and close-on-exec. A stop is an error of kind `Interrupted`, the bound one of kind
/// `TimedOut`.
pub fn connect_until(
    addr: SocketAddr,
    until: Instant,
    stopped: &dyn Fn() -> bool,
) -> io::Result<TcpStream> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let fd = rustix::net::socket_with(
        family,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )?;
    match rustix::net::connect(&fd, &addr) {
        Ok(()) => {}
        Err(Errno::INPROGRESS | Errno::INTR) => loop {
            if stopped() {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            let slice = Timespec::try_from(left.min(SLICE)).map_err(|_| Errno::INVAL)?;
            let mut fds = [PollFd::new(&fd, PollFlags::OUT)];
            match rustix::event::poll(&mut fds, Some(&slice)) {
                Ok(0) | Err(Errno::INTR) => continue,
                Ok(_) => {}
                Err(e) => return Err(e.into()),
            }
            rustix::net::sockopt::socket_error(&fd)??;
            break;
        },
        Err(e) => return Err(e.into()),
    }
    rustix::io::ioctl_fionbio(&fd, false)?;
    Ok(TcpStream::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn connects_refuses_and_stops() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let soon = Instant::now() + Duration::from_secs(5);
        let mut stream = connect_until(addr, soon, &|| false).unwrap();
        let (mut accepted, _) = listener.accept().unwrap();
        stream.write_all(b"x").unwrap();
        let mut byte = [0u8; 1];
        accepted.read_exact(&mut byte).unwrap();
        assert_eq!(&byte, b"x");
        // Blocking again: a read waits (here: for the byte written back).
        accepted.write_all(b"y").unwrap();
        stream.read_exact(&mut byte).unwrap();
        assert_eq!(&byte, b"y");
        drop(listener);
        let refused = connect_until(addr, soon, &|| false).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
        // Already stopped, or past the bound: nothing waits. (A connect to loopback completes
        // at once, so these are asked only when it is in progress; a refused one is neither.)
        let past = Instant::now();
        let err = connect_until(addr, past, &|| true).unwrap_err();
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::ConnectionRefused | io::ErrorKind::Interrupted
            ),
            "{err}"
        );
    }

    /// A listener whose backlog is full drops the next SYN: the handshake stays in progress,
    /// and only the bound or a stop ends the wait.
    #[test]
    fn a_handshake_in_progress_ends_at_the_bound_or_at_a_stop() {
        let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        rustix::net::bind(&fd, &any).unwrap();
        rustix::net::listen(&fd, 0).unwrap();
        let listener = std::net::TcpListener::from(fd);
        let addr = listener.local_addr().unwrap();
        let mut held = Vec::new();
        let outcome = |until: Instant, stop: bool| {
            let started = Instant::now();
            let result = connect_until(addr, until, &|| stop && started.elapsed() > SLICE);
            (result, started.elapsed())
        };
        // Fill the backlog (what fits connects at once), then one more hangs.
        let mut hung = None;
        for _ in 0..8 {
            let (result, took) = outcome(Instant::now() + Duration::from_millis(300), false);
            match result {
                Ok(stream) => held.push(stream),
                Err(e) => {
                    hung = Some((e.kind(), took));
                    break;
                }
            }
        }
        let (kind, took) = hung.expect("a full backlog leaves a handshake in progress");
        assert_eq!(kind, io::ErrorKind::TimedOut);
        assert!(took >= Duration::from_millis(250), "{took:?}");
        let (result, took) = outcome(Instant::now() + Duration::from_secs(30), true);
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::Interrupted);
        assert!(took < Duration::from_secs(10), "{took:?}");
        drop(listener);
    }
}
