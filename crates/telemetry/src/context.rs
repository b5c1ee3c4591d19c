//! W3C Trace Context (`traceparent`, `tracestate`): parsed strictly, written back, and new
//! ids from the operating system's random source.

/// A span's place in a trace, as `traceparent` carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanContext {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
}

impl SpanContext {
    /// A `traceparent` value (version `00`, or a later version read as `00` with anything
    /// after the flags ignored, as the W3C text says); `None` for anything malformed,
    /// including the all-zero ids and version `ff`.
    pub fn parse(text: &str) -> Option<SpanContext> {
        let text = text.trim();
        let mut parts = text.splitn(5, '-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let rest = parts.next();
        let version = hex::<1>(version)?[0];
        if version == 0xff || (version == 0 && rest.is_some()) {
            return None;
        }
        if flags.len() != 2 {
            return None;
        }
        let context = SpanContext {
            trace_id: hex::<16>(trace)?,
            span_id: hex::<8>(span)?,
            flags: hex::<1>(flags)?[0],
        };
        let zero = context.trace_id == [0; 16] || context.span_id == [0; 8];
        (!zero).then_some(context)
    }

    /// A new span of this trace.
    pub fn child(&self) -> SpanContext {
        SpanContext {
            span_id: new_span_id(),
            ..*self
        }
    }

    /// A new trace's root span, sampled.
    pub fn new_root() -> SpanContext {
        let mut trace_id = [0u8; 16];
        while trace_id == [0; 16] {
            trace_id = random_bytes();
        }
        SpanContext {
            trace_id,
            span_id: new_span_id(),
            flags: 1,
        }
    }

    /// `00-{trace id}-{span id}-{flags}`.
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            to_hex(&self.trace_id),
            to_hex(&self.span_id),
            self.flags
        )
    }

    /// The trace id as 32 lower-case hex digits (`diagnostics.dispatch.trace_id`).
    pub fn trace_id_hex(&self) -> String {
        to_hex(&self.trace_id)
    }
}

/// A `tracestate` value worth passing on: at most 512 bytes, at most 32 members, each
/// `key=value` of visible ASCII without `,` or `=` in the value's place (a loose check of the
/// W3C grammar); `None` otherwise, and then nothing is passed on.
pub fn tracestate(text: &str) -> Option<String> {
    let text = text.trim();
    if text.is_empty() || text.len() > 512 {
        return None;
    }
    let members: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .collect();
    let valid = |member: &str| {
        member.split_once('=').is_some_and(|(key, value)| {
            !key.is_empty()
                && key
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-*/@".contains(&b))
                && !value.is_empty()
                && value
                    .bytes()
                    .all(|b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=')
        })
    };
    (members.len() <= 32 && !members.is_empty() && members.iter().all(|m| valid(m)))
        .then(|| members.join(","))
}

fn new_span_id() -> [u8; 8] {
    let mut id = [0u8; 8];
    while id == [0; 8] {
        id = random_bytes();
    }
    id
}

/// `N` random bytes from the OS's source; should it fail, from std's randomly keyed hasher
/// (ids need to be unique, not secret).
fn random_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    if getrandom::fill(&mut out).is_err() {
        use std::hash::{BuildHasher, Hasher};
        for chunk in out.chunks_mut(8) {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
            );
            let bytes = hasher.finish().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
    out
}

/// Exactly `2 * N` lower-case hex digits (W3C: upper case is invalid).
fn hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let bytes = text.as_bytes();
    if bytes.len() != 2 * N
        || !bytes
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    {
        return None;
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

pub(crate) fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_round_trips() {
        let context = SpanContext::parse(VALID).unwrap();
        assert_eq!(context.traceparent(), VALID);
        assert_eq!(context.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        let child = context.child();
        assert_eq!(child.trace_id, context.trace_id);
        assert_ne!(child.span_id, context.span_id);
    }

    #[test]
    fn malformed_traceparents_are_none() {
        for bad in [
            "",
            "00",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(SpanContext::parse(bad), None, "{bad}");
        }
        // A later version may carry more after the flags.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more";
        assert!(SpanContext::parse(later).is_some());
    }

    #[test]
    fn new_roots_differ_and_are_sampled() {
        let (a, b) = (SpanContext::new_root(), SpanContext::new_root());
        assert_ne!(a.trace_id, b.trace_id);
        assert_eq!(a.flags, 1);
        assert_eq!(SpanContext::parse(&a.traceparent()), Some(a));
    }

    #[test]
    fn tracestate_is_checked_loosely() {
        assert_eq!(
            tracestate("rojo=00f067aa0ba902b7, congo=t61rcWkgMzE").as_deref(),
            Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
        );
        assert_eq!(tracestate(""), None);
        assert_eq!(tracestate("novalue"), None);
        assert_eq!(tracestate("Upper=x"), None);
        assert_eq!(tracestate(&"a=b,".repeat(200)), None);
    }
}
