//! What the proxy itself answers: `200 Connection established` to a `CONNECT` it serves, and a
//! refusal — a status and a one-line plain-text reason — before it closes the connection.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// The answer to a `CONNECT` the proxy serves; then the relay starts.
pub(crate) const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";

/// How long a refusal may take to write, and how long the proxy reads what the client still
/// sends after it before closing (so that the close does not reset the connection before the
/// client read the answer).
const LINGER: Duration = Duration::from_secs(1);
/// The most bytes read after a refusal.
const LINGER_BYTES: usize = 256 * 1024;

/// The statuses the proxy answers with itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    BadRequest,
    Forbidden,
    RequestTimeout,
    TooLarge,
    BadGateway,
    Unavailable,
    GatewayTimeout,
}

impl Status {
    pub(crate) fn code(self) -> u16 {
        match self {
            Status::BadRequest => 400,
            Status::Forbidden => 403,
            Status::RequestTimeout => 408,
            Status::TooLarge => 431,
            Status::BadGateway => 502,
            Status::Unavailable => 503,
            Status::GatewayTimeout => 504,
        }
    }

    fn phrase(self) -> &'static str {
        match self {
            Status::BadRequest => "Bad Request",
            Status::Forbidden => "Forbidden",
            Status::RequestTimeout => "Request Timeout",
            Status::TooLarge => "Request Header Fields Too Large",
            Status::BadGateway => "Bad Gateway",
            Status::Unavailable => "Service Unavailable",
            Status::GatewayTimeout => "Gateway Timeout",
        }
    }
}

/// The bytes of a refusal: the status, a plain-text body of the reason and a newline.
pub(crate) fn refusal(status: Status, reason: &str) -> Vec<u8> {
    let body = format!("{reason}\n");
    format!(
        "HTTP/1.1 {} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        status.code(),
        status.phrase(),
        body.len()
    )
    .into_bytes()
}

/// Answer `client` with a refusal, then close our side and read what it still sends (briefly,
/// boundedly) so that closing does not reset the connection under the answer. Best effort:
/// a client that went away loses the answer.
pub(crate) fn refuse(client: &TcpStream, status: Status, reason: &str) {
    let mut client = client;
    let _ = client.set_write_timeout(Some(LINGER));
    if client.write_all(&refusal(status, reason)).is_err() {
        return;
    }
    let _ = client.shutdown(Shutdown::Write);
    let until = Instant::now() + LINGER;
    let mut buf = [0u8; 8192];
    let mut read = 0;
    while read < LINGER_BYTES {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || client.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match client.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_says_its_reason_in_one_line() {
        let bytes = refusal(Status::Forbidden, "a.test:443 is not in the allow list");
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Length: 36\r\nConnection: close\r\n\r\na.test:443 is not in the allow list\n"
        );
    }
}
