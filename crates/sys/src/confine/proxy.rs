//! The proxy's listener of `--network allow:` (SPEC §17), handed from the adapter's network
//! namespace to the dispatcher.
//!
//! Under [`Network::Allow`](super::Network::Allow) the adapter runs in a new, empty network
//! namespace (as under `none`), and the dispatcher's proxy listens inside it on
//! `127.0.0.1:`[`PROXY_PORT`] while it makes its own connections from the host's namespace. A
//! socket belongs to the namespace it was made in, whoever holds it later; so the child makes
//! the listener and gives it to its parent:
//!
//! - *prepare* (parent, before the fork; [`handoff`]): a `socketpair(AF_UNIX, SOCK_SEQPACKET |
//!   SOCK_CLOEXEC)`. The child's end goes to `PreparedNamespaces::proxy`, the parent's to
//!   `Prepared`, which gives it out once as a [`ProxyReceiver`]. No socket pair: the
//!   confinement is unavailable (`missing: network_proxy`).
//! - *child step* ([`ProxyChildEnd::hand_over`], right after the network namespace is entered,
//!   before the PID namespace's init is forked, so the init never holds what it opens): bring
//!   `lo` up (`SIOCGIFFLAGS`, then `SIOCSIFFLAGS` with `IFF_UP`, on a throwaway `AF_INET`
//!   datagram socket), make a TCP socket, `SO_REUSEADDR`, bind `127.0.0.1:3128`, listen (backlog
//!   128), send it with `SCM_RIGHTS` (one byte of data, the control message in a stack buffer),
//!   then close the listener and the child's end. System calls only: no allocation, no lock.
//!   A child that is not root has entered a user namespace first and holds every capability
//!   there until `execve`, so it may bring up the loopback of a network namespace that user
//!   namespace owns.
//! - *parent* ([`ProxyReceiver::receive`]): waits for the message (`poll`, then `recvmsg`),
//!   and checks that what came is a listening TCP socket on `127.0.0.1:3128` before it becomes a
//!   [`TcpListener`]. `exec/` closes the dispatcher's copy of the child's end once the spawn
//!   returned, so the parent's end reads end of file when the child is gone without sending;
//!   a start tried again (`ETXTBSY`) drops what the failed attempt sent.
//!
//! [`wake_acceptor`] ends an `accept` blocked in another thread (the proxy's shutdown).
//!
//! Must not: accept, connect or check a destination (the proxy does); allocate or lock in the
//! child step.

use rustix::fd::{AsFd, AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use rustix::io::Errno;
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags, Shutdown, SocketFlags, SocketType,
};
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The port the proxy listens on, on the adapter's own loopback: a fresh namespace, so nothing
/// else holds it. Squid's port, which clients and people recognise as a proxy's.
pub const PROXY_PORT: u16 = 3128;

/// The listener's backlog.
const BACKLOG: i32 = 128;

/// The one byte of data the message carries beside the descriptor.
const TAG: u8 = b'L';

/// The most descriptors one message is read with: one is expected, the rest are read only to
/// be closed (and the message refused).
const MAX_FDS: usize = 4;

/// The address the listener must be bound to.
fn proxy_address() -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::LOCALHOST, PROXY_PORT)
}

/// Prepare the handoff (parent, before the fork): the parent's end and the child's end of a
/// new socket pair.
pub(crate) fn handoff() -> Result<(ProxyParentEnd, ProxyChildEnd), Errno> {
    let (parent, child) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    let parent = ProxyParentEnd {
        shared: Arc::new(Shared {
            end: parent,
            closed: AtomicBool::new(false),
        }),
        given: AtomicBool::new(false),
    };
    let child = ProxyChildEnd {
        fd: AtomicI32::new(child.into_raw_fd()),
    };
    Ok((parent, child))
}

/// The child's end of the handoff. The descriptor is kept as a number in an atomic, so the
/// child can take it without a lock and the dispatcher can close its own copy after the spawn
/// while the value stays shared (`Arc<Prepared>`). `-1`: closed.
#[derive(Debug)]
pub struct ProxyChildEnd {
    fd: AtomicI32,
}

impl ProxyChildEnd {
    /// Child step: bring `lo` up, listen on `127.0.0.1:`[`PROXY_PORT`], send the listener to
    /// the parent, close both. System calls only (the buffers are on the stack).
    pub(crate) fn hand_over(&self) -> Result<(), Errno> {
        let raw = self.fd.swap(-1, Ordering::SeqCst);
        if raw < 0 {
            return Err(Errno::BADF);
        }
        // SAFETY: `raw` came from `handoff`'s `OwnedFd` and was taken out of the atomic just
        // now, so nothing else closes it: this process owns it from here.
        let end = unsafe { OwnedFd::from_raw_fd(raw) };
        loopback_up()?;
        let listener = listen_on_loopback()?;
        send_listener(&end, &listener)
    }

    /// The dispatcher's own copy closed (after the spawn): the parent's end then reads end of
    /// file as soon as the child's copy is gone too. A later child step finds `-1` (`EBADF`).
    pub(crate) fn close(&self) {
        let raw = self.fd.swap(-1, Ordering::SeqCst);
        if raw >= 0 {
            // SAFETY: as in `hand_over`: taken out of the atomic, so owned here alone.
            drop(unsafe { OwnedFd::from_raw_fd(raw) });
        }
    }
}

impl Drop for ProxyChildEnd {
    fn drop(&mut self) {
        self.close();
    }
}

/// `ip link set lo up`: `SIOCGIFFLAGS` then `SIOCSIFFLAGS` with `IFF_UP`, on a throwaway
/// datagram socket. System calls only.
fn loopback_up() -> Result<(), Errno> {
    let socket = rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    // SAFETY: `ifreq` is plain data (a name and a union of integers and addresses), for which
    // all zeroes is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (to, from) in request.ifr_name.iter_mut().zip(b"lo") {
        *to = *from as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the NUL-terminated name of the `ifreq` and writes its flags;
    // the struct is ours and lives for the call.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut request) } != 0 {
        return Err(super::landlock::last_errno());
    }
    // SAFETY: the kernel wrote the union's flags member just now.
    unsafe { request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    // SAFETY: SIOCSIFFLAGS reads the name and the flags of the `ifreq`, ours for the call.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS as _, &request) } != 0 {
        return Err(super::landlock::last_errno());
    }
    Ok(())
}

/// A TCP socket listening on `127.0.0.1:`[`PROXY_PORT`]. System calls only.
fn listen_on_loopback() -> Result<OwnedFd, Errno> {
    let listener = rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::sockopt::set_socket_reuseaddr(&listener, true)?;
    rustix::net::bind(&listener, &proxy_address())?;
    rustix::net::listen(&listener, BACKLOG)?;
    Ok(listener)
}

/// Send `listener` over `end`: one byte and one `SCM_RIGHTS` message. No `SIGPIPE` when the
/// parent's end is shut (`EPIPE` then). System calls only.
fn send_listener(end: &OwnedFd, listener: &OwnedFd) -> Result<(), Errno> {
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let fds = [listener.as_fd()];
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(Errno::NOBUFS);
    }
    let data = [TAG];
    let sent = rustix::net::sendmsg(
        end,
        &[IoSlice::new(&data)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    if sent != data.len() {
        return Err(Errno::MSGSIZE);
    }
    Ok(())
}

/// The parent's end, shared between `Prepared` and the [`ProxyReceiver`] it gave out.
#[derive(Debug)]
struct Shared {
    end: OwnedFd,
    /// [`ProxyReceiver::close`] was called.
    closed: AtomicBool,
}

/// The parent's end of the handoff, as `Prepared` keeps it.
#[derive(Debug)]
pub(crate) struct ProxyParentEnd {
    shared: Arc<Shared>,
    /// The receiver was given out.
    given: AtomicBool,
}

impl ProxyParentEnd {
    /// The receiver, the first time only.
    pub(crate) fn receiver(&self) -> Option<ProxyReceiver> {
        if self.given.swap(true, Ordering::SeqCst) {
            return None;
        }
        Some(ProxyReceiver {
            shared: Arc::clone(&self.shared),
        })
    }

    /// Drop every listener already sent: a start that failed and is tried again made a
    /// namespace no adapter runs in.
    pub(crate) fn discard_sent(&self) {
        while let Ok(Message::Listener(_) | Message::Refused(_)) = read_message(&self.shared.end) {}
    }
}

/// The dispatcher's side of the handoff: the proxy's listener, made in the adapter's namespace,
/// once the child sent it. `Send` and `Sync`: one thread may wait in [`ProxyReceiver::receive`]
/// while another calls [`ProxyReceiver::close`].
#[derive(Debug)]
pub struct ProxyReceiver {
    shared: Arc<Shared>,
}

impl ProxyReceiver {
    /// Wait up to `timeout` for the listener. `Ok(None)`: the time ran out, the child ended
    /// without sending it (end of file: its set-up failed, and the spawn says why), or
    /// [`ProxyReceiver::close`] was called. An error when what came is not a listening TCP
    /// socket on `127.0.0.1:`[`PROXY_PORT`]. Call it once the spawn returned: a start tried
    /// again drops the failed attempt's listener then.
    pub fn receive(&self, timeout: Duration) -> io::Result<Option<TcpListener>> {
        let start = Instant::now();
        loop {
            if self.shared.closed.load(Ordering::SeqCst) {
                return Ok(None);
            }
            let left = timeout.saturating_sub(start.elapsed());
            let wait = rustix::event::Timespec::try_from(left).unwrap_or(rustix::event::Timespec {
                tv_sec: i64::MAX,
                tv_nsec: 0,
            });
            let mut fds = [rustix::event::PollFd::new(
                &self.shared.end,
                rustix::event::PollFlags::IN,
            )];
            match rustix::event::poll(&mut fds, Some(&wait)) {
                Ok(0) if left.is_zero() => return Ok(None),
                Ok(_) | Err(Errno::INTR) => {}
                Err(errno) => return Err(errno.into()),
            }
            if self.shared.closed.load(Ordering::SeqCst) {
                return Ok(None);
            }
            match read_message(&self.shared.end)? {
                Message::Listener(fd) => return checked_listener(fd).map(Some),
                Message::Refused(why) => {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, why))
                }
                Message::End => return Ok(None),
                Message::Empty if left.is_zero() => return Ok(None),
                Message::Empty => {}
            }
        }
    }

    /// Give up: a [`ProxyReceiver::receive`] waiting in another thread returns `Ok(None)`
    /// promptly, and so does every later one. The parent's end is shut down, so a child that
    /// has not sent yet fails its step (`EPIPE`) and nothing runs.
    pub fn close(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        let _ = rustix::net::shutdown(&self.shared.end, Shutdown::Both);
    }
}

/// What one read of the parent's end found.
enum Message {
    /// The listener (not yet checked).
    Listener(OwnedFd),
    /// A message that is not the child's: why (its descriptors are closed).
    Refused(&'static str),
    /// End of file: every copy of the child's end is closed.
    End,
    /// Nothing yet.
    Empty,
}

/// Read one message without waiting.
fn read_message(end: &OwnedFd) -> io::Result<Message> {
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut data = [0u8; 8];
    let received = rustix::net::recvmsg(
        end,
        &mut [IoSliceMut::new(&mut data)],
        &mut control,
        RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
    );
    let message = match received {
        Ok(message) => message,
        Err(Errno::AGAIN) => return Ok(Message::Empty),
        Err(errno) => return Err(errno.into()),
    };
    let mut fds: Vec<OwnedFd> = Vec::new();
    for part in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = part {
            fds.extend(received);
        }
    }
    if message.bytes == 0 && fds.is_empty() {
        return Ok(Message::End);
    }
    let truncated = message
        .flags
        .intersects(ReturnFlags::CTRUNC | ReturnFlags::TRUNC);
    if truncated || message.bytes != 1 || data[0] != TAG || fds.len() != 1 {
        return Ok(Message::Refused(
            "the proxy's handoff carried something else than one listener",
        ));
    }
    Ok(fds.pop().map_or(Message::End, Message::Listener))
}

/// `fd` as a [`TcpListener`], when it is a listening TCP socket on `127.0.0.1:`[`PROXY_PORT`].
fn checked_listener(fd: OwnedFd) -> io::Result<TcpListener> {
    let refuse = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the proxy's listener from the adapter's namespace is not {what}"),
        )
    };
    if rustix::net::sockopt::socket_domain(&fd)? != AddressFamily::INET
        || rustix::net::sockopt::socket_type(&fd)? != SocketType::STREAM
    {
        return Err(refuse("a TCP/IPv4 socket"));
    }
    if !rustix::net::sockopt::socket_acceptconn(&fd)? {
        return Err(refuse("listening"));
    }
    let bound = SocketAddrV4::try_from(rustix::net::getsockname(&fd)?).ok();
    if bound != Some(proxy_address()) {
        return Err(refuse("bound to 127.0.0.1:3128"));
    }
    Ok(TcpListener::from(fd))
}

/// Make an `accept` blocked on `listener` in another thread return (with `EINVAL`, on Linux):
/// `shutdown(SHUT_RDWR)` of a listening socket stops it listening. For the proxy's end.
pub fn wake_acceptor(listener: &TcpListener) -> io::Result<()> {
    rustix::net::shutdown(listener, Shutdown::Both).map_err(Into::into)
}

#[cfg(test)]
mod tests;
