//! The proxy's handoff, the parent's side on its own (a confined child through the real exec
//! path is `exec/proxy_tests.rs`).

use super::*;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Send `fd` over the child's end as the child step would.
fn send_as_child(child: &ProxyChildEnd, fd: &OwnedFd) {
    let raw = child.fd.load(Ordering::SeqCst);
    // SAFETY: the child end's descriptor, open for as long as `child` is.
    let end = unsafe { rustix::fd::BorrowedFd::borrow_raw(raw) };
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let fds = [fd.as_fd()];
    assert!(control.push(SendAncillaryMessage::ScmRights(&fds)));
    rustix::net::sendmsg(
        end,
        &[IoSlice::new(&[TAG])],
        &mut control,
        SendFlags::empty(),
    )
    .unwrap();
}

#[test]
fn the_receiver_is_given_out_once() {
    let (parent, _child) = handoff().unwrap();
    assert!(parent.receiver().is_some());
    assert!(parent.receiver().is_none());
}

#[test]
fn receive_returns_none_promptly_after_close_from_another_thread() {
    let (parent, _child) = handoff().unwrap();
    let receiver = Arc::new(parent.receiver().unwrap());
    let waiting = Arc::clone(&receiver);
    let start = Instant::now();
    let thread = std::thread::spawn(move || waiting.receive(Duration::from_secs(60)));
    std::thread::sleep(Duration::from_millis(100));
    receiver.close();
    let got = thread.join().unwrap().unwrap();
    assert!(got.is_none());
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    // And every later call, at once, even with a listener on its way.
    let start = Instant::now();
    assert!(receiver.receive(Duration::from_secs(60)).unwrap().is_none());
    assert!(start.elapsed() < Duration::from_secs(1));
}

#[test]
fn receive_times_out_then_reads_the_end_of_file() {
    let (parent, child) = handoff().unwrap();
    let receiver = parent.receiver().unwrap();
    let start = Instant::now();
    assert!(receiver
        .receive(Duration::from_millis(50))
        .unwrap()
        .is_none());
    assert!(start.elapsed() >= Duration::from_millis(50));
    // The dispatcher's copy closed after the spawn, and no child holds one: end of file.
    child.close();
    let start = Instant::now();
    assert!(receiver.receive(Duration::from_secs(60)).unwrap().is_none());
    assert!(start.elapsed() < Duration::from_secs(10));
    // A child step after that has nothing to send over.
    assert_eq!(child.hand_over(), Err(Errno::BADF));
}

#[test]
fn anything_but_a_listener_on_the_proxy_port_is_refused() {
    // Listening, but on another port; bound but not listening; a datagram socket.
    let elsewhere = TcpListener::bind("127.0.0.1:0").unwrap();
    let unlistened = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    rustix::net::bind(&unlistened, &SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
    let datagram = rustix::net::socket(AddressFamily::INET, SocketType::DGRAM, None).unwrap();
    let cases: [(OwnedFd, &str); 3] = [
        (OwnedFd::from(elsewhere), "bound to 127.0.0.1:3128"),
        (unlistened, "listening"),
        (datagram, "a TCP/IPv4 socket"),
    ];
    for (fd, why) in cases {
        let (parent, child) = handoff().unwrap();
        let receiver = parent.receiver().unwrap();
        send_as_child(&child, &fd);
        let err = receiver.receive(Duration::from_secs(10)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().ends_with(why), "{err}");
    }
    // A message without a descriptor.
    let (parent, child) = handoff().unwrap();
    let receiver = parent.receiver().unwrap();
    let raw = child.fd.load(Ordering::SeqCst);
    // SAFETY: the child end's descriptor, open for as long as `child` is.
    let end = unsafe { rustix::fd::BorrowedFd::borrow_raw(raw) };
    rustix::net::send(end, b"L", SendFlags::empty()).unwrap();
    let err = receiver.receive(Duration::from_secs(10)).unwrap_err();
    assert!(err.to_string().contains("one listener"), "{err}");
}

#[test]
fn a_start_tried_again_drops_the_listener_already_sent() {
    let (parent, child) = handoff().unwrap();
    let stale = TcpListener::bind("127.0.0.1:0").unwrap();
    send_as_child(&child, &OwnedFd::from(stale));
    parent.discard_sent();
    let receiver = parent.receiver().unwrap();
    assert!(receiver
        .receive(Duration::from_millis(50))
        .unwrap()
        .is_none());
}

#[test]
fn wake_acceptor_ends_an_accept_blocked_in_another_thread() {
    let listener = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
    let accepting = Arc::clone(&listener);
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || done.send(accepting.accept().map(|_| ())));
    std::thread::sleep(Duration::from_millis(100));
    wake_acceptor(&listener).unwrap();
    let accepted = finished.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(
        accepted.unwrap_err().raw_os_error(),
        Some(libc::EINVAL),
        "accept returns EINVAL once the listener is shut down"
    );
}
