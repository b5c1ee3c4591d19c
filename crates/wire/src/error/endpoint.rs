//! The endpoint client's failures (SPEC §11), as [`super::DispatchError`] carries them: why an
//! endpoint cannot be used as configured, why it could not be reached, why a lookup failed.
//! Defined here, beside the other reasons a call ends without an answer, so that the error
//! vocabulary sits below the client that produces it.

use std::fmt;
use std::path::PathBuf;

/// Why the endpoint cannot be used as the host configured it. Nothing was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unconfigured {
    /// `url_env` names a variable that is not set (or not valid Unicode).
    UrlUnset { var: String },
    /// `url_env`'s variable is empty.
    UrlEmpty { var: String },
    /// `url_env`'s variable is not an absolute `http`/`https` URL: why.
    UrlInvalid { var: String, why: &'static str },
    /// `dispatcher.endpoint.method` is not `POST`.
    Method { method: String },
    /// `token_env` names a variable that is not set.
    TokenUnset { var: String },
    /// `token_env`'s variable is empty.
    TokenEmpty { var: String },
    /// `token_env`'s value cannot be sent in a header (spaces, control or non-ASCII
    /// characters).
    TokenInvalid { var: String },
    /// Plain `http` to a host that is not a loopback address: an IP literal (refused before
    /// anything is sent), or a name that resolved to an address that is not loopback
    /// (`resolved`: refused after resolution, before connecting).
    PlainHttp {
        var: String,
        origin: String,
        resolved: bool,
    },
    /// `--ca-cert` cannot be read or holds no PEM certificate.
    CaCert { path: PathBuf, why: String },
}

impl Unconfigured {
    /// One sentence for `error.message`: variable NAMES and the origin only, never a value or
    /// a host path.
    pub fn message(&self) -> String {
        match self {
            Unconfigured::UrlUnset { var } => {
                format!("the endpoint URL variable {var} (url_env) is not set on the host")
            }
            Unconfigured::UrlEmpty { var } => {
                format!("the endpoint URL variable {var} (url_env) is empty")
            }
            Unconfigured::UrlInvalid { var, why } => format!(
                "the endpoint URL in {var} (url_env) is not an absolute http or https URL: {why}"
            ),
            Unconfigured::Method { method } => format!(
                "the endpoint method {} is not supported; only POST is",
                shown(method)
            ),
            Unconfigured::TokenUnset { var } => {
                format!("the endpoint token variable {var} (token_env) is not set on the host")
            }
            Unconfigured::TokenEmpty { var } => {
                format!("the endpoint token variable {var} (token_env) is empty")
            }
            Unconfigured::TokenInvalid { var } => format!(
                "the endpoint token in {var} (token_env) holds characters that cannot be sent in \
                 an HTTP header (only visible ASCII can)"
            ),
            Unconfigured::PlainHttp {
                var,
                origin,
                resolved: false,
            } => format!(
                "the endpoint URL in {var} (url_env) is plain http to {origin}, which is not a \
                 loopback address; use https (a bearer token never crosses a network in clear text)"
            ),
            Unconfigured::PlainHttp {
                var,
                origin,
                resolved: true,
            } => format!(
                "the endpoint URL in {var} (url_env) is plain http to {origin}, whose host name \
                 resolves to an address that is not loopback; use https (a bearer token never \
                 crosses a network in clear text)"
            ),
            Unconfigured::CaCert { why, .. } => format!("the --ca-cert file {why}"),
        }
    }

    /// What stderr says: the same, naming the `--ca-cert` file.
    pub fn human(&self) -> String {
        match self {
            Unconfigured::CaCert { path, why } => {
                format!("the --ca-cert file {} {why}", path.display())
            }
            other => other.message(),
        }
    }
}

/// A bridge's value made safe to quote in one line: escaped, and cut.
fn shown(value: &str) -> String {
    let mut out: String = value
        .chars()
        .take(32)
        .flat_map(char::escape_debug)
        .collect();
    if value.chars().count() > 32 {
        out.push('…');
    }
    format!("\"{out}\"")
}

/// Why the endpoint could not be reached, in words that never quote the URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreachable {
    /// The host name's lookup failed, before the deadline (SPEC §11.1).
    Lookup(LookupFailure),
    /// The HTTP client found no address to connect to.
    HostNotFound,
    /// Nothing listens there.
    Refused,
    /// The connection was reset or closed before a complete answer.
    Reset,
    /// The TLS handshake failed (a certificate that does not verify, …): the TLS library's
    /// account.
    Tls(String),
    /// The server did not speak HTTP/1.1 (or its headers were over 64 KiB).
    Protocol,
    /// Any other I/O failure, by its kind.
    Io(std::io::ErrorKind),
    /// The HTTP client refused the request before sending it.
    Client,
}

impl fmt::Display for Unreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreachable::Lookup(failure) => write!(f, "{failure}"),
            Unreachable::HostNotFound => f.write_str("its host name does not resolve"),
            Unreachable::Refused => f.write_str("the connection was refused"),
            Unreachable::Reset => {
                f.write_str("the connection was reset or closed before a complete answer")
            }
            Unreachable::Tls(why) => write!(f, "the TLS handshake failed: {why}"),
            Unreachable::Protocol => f.write_str("it did not answer in HTTP/1.1"),
            Unreachable::Io(kind) => write!(f, "{kind}"),
            Unreachable::Client => f.write_str("the HTTP client refused to send the request"),
        }
    }
}

impl Unreachable {
    /// The stable word for `error.details.reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            Unreachable::Lookup(failure) => failure.reason(),
            Unreachable::HostNotFound => "host_not_found",
            Unreachable::Refused => "connection_refused",
            Unreachable::Reset => "connection_reset",
            Unreachable::Tls(_) => "tls",
            Unreachable::Protocol => "protocol",
            Unreachable::Io(_) => "io",
            Unreachable::Client => "client",
        }
    }
}

/// Why a lookup failed before the deadline (`error.details.reason` of `endpoint_unreachable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LookupFailure {
    /// The name is not one DNS can carry (never asked).
    InvalidName,
    /// `NXDOMAIN` for every name tried.
    NoSuchName,
    /// The name exists but has no `A` or `AAAA` record.
    NoAddress,
    /// No nameserver gave a usable answer within its own `timeout` (silent, unreachable, or
    /// answering what cannot be read).
    NoAnswer,
    /// A nameserver answered `REFUSED`.
    Refused,
    /// A nameserver answered `SERVFAIL` (or another error code).
    ServerFailure,
}

impl LookupFailure {
    /// The stable word for `details.reason`.
    pub fn reason(self) -> &'static str {
        match self {
            LookupFailure::InvalidName => "dns_invalid_name",
            LookupFailure::NoSuchName => "dns_nxdomain",
            LookupFailure::NoAddress => "dns_no_address",
            LookupFailure::NoAnswer => "dns_no_answer",
            LookupFailure::Refused => "dns_refused",
            LookupFailure::ServerFailure => "dns_servfail",
        }
    }
}

impl fmt::Display for LookupFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LookupFailure::InvalidName => "its host name is not one DNS can carry",
            LookupFailure::NoSuchName => "its host name does not exist (NXDOMAIN)",
            LookupFailure::NoAddress => "its host name has no address",
            LookupFailure::NoAnswer => "no nameserver answered the lookup of its host name",
            LookupFailure::Refused => {
                "the nameserver refused the lookup of its host name (REFUSED)"
            }
            LookupFailure::ServerFailure => {
                "the nameserver failed the lookup of its host name (SERVFAIL)"
            }
        })
    }
}
