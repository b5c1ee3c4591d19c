//! Waking the thread blocked in `accept`.
//!
//! STAND-IN: `ptd_sys::confine::proxy::wake_acceptor` is being written in `ptd-sys` (which owns
//! the system calls); until it lands, this one function does the same: `shutdown(2)` of the
//! listening socket, after which Linux fails a blocked (or later) `accept` with `EINVAL`.
//! Swap the call for `ptd_sys`'s and delete this file (and the `rustix` dependency).

use std::io;
use std::net::TcpListener;

/// Make a thread blocked in `listener.accept()` return (an error), and every later `accept`.
pub(crate) fn wake_acceptor(listener: &TcpListener) -> io::Result<()> {
    rustix::net::shutdown(listener, rustix::net::Shutdown::Both).map_err(io::Error::from)
}
