//! Byte search that asks the CPU nothing for a short text.
//!
//! `memchr::memchr` picks its AVX2 or SSE2 routine at its first call in a process by asking the
//! CPU what it has (std's feature detection: seven `cpuid` instructions). A hypervisor traps
//! every `cpuid`: 6 µs each on the benchmark's VM, so ~45 µs of a call whose texts (the stderr
//! tail, an envelope's strings) are a few hundred bytes (docs/PERFORMANCE.md, "Round two,
//! fourth part"). SSE2 is part of x86_64 itself, so its routine needs no question and is as
//! fast on a short text; from [`ASK_FROM`] bytes on, the detecting routine (AVX2 where there
//! is one) is worth its one-time cost. Elsewhere than x86_64 this is `memchr` as it is.

/// The haystack length from which the search asks for the CPU's best routine.
pub(crate) const ASK_FROM: usize = 64 * 1024;

/// The index of the first `needle` in `haystack`.
pub fn byte(needle: u8, haystack: &[u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if haystack.len() < ASK_FROM {
        if let Some(one) = memchr::arch::x86_64::sse2::memchr::One::new(needle) {
            return one.find(haystack);
        }
    }
    memchr::memchr(needle, haystack)
}

/// The index of the first `a` or `b` in `haystack`.
pub(crate) fn byte2(a: u8, b: u8, haystack: &[u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if haystack.len() < ASK_FROM {
        if let Some(two) = memchr::arch::x86_64::sse2::memchr::Two::new(a, b) {
            return two.find(haystack);
        }
    }
    memchr::memchr2(a, b, haystack)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive(set: &[u8], haystack: &[u8]) -> Option<usize> {
        haystack.iter().position(|b| set.contains(b))
    }

    /// A haystack of `len` bytes from a small alphabet (so that needles are found and missed),
    /// with the needle planted at `at` when that is inside it.
    fn haystack(len: usize, seed: u8, at: usize, needle: u8) -> Vec<u8> {
        let mut h: Vec<u8> = (0..len)
            .map(|i| b"abc"[(i + usize::from(seed)) % 3])
            .collect();
        if at < len {
            h[at] = needle;
        }
        h
    }

    #[test]
    fn both_sides_of_the_threshold_find_what_a_plain_scan_finds() {
        for len in [
            0,
            1,
            15,
            16,
            17,
            63,
            64,
            ASK_FROM - 1,
            ASK_FROM,
            ASK_FROM + 33,
        ] {
            for at in [0, 1, len / 2, len.saturating_sub(1), len, usize::MAX] {
                let h = haystack(len, 0, at, b'/');
                assert_eq!(byte(b'/', &h), naive(b"/", &h), "len {len} at {at}");
                assert_eq!(byte2(b':', b'/', &h), naive(b":/", &h), "len {len} at {at}");
                let mut both = h.clone();
                if len > 3 {
                    both[len - 3] = b':';
                }
                assert_eq!(
                    byte2(b':', b'/', &both),
                    naive(b":/", &both),
                    "len {len} at {at}"
                );
            }
        }
        assert_eq!(byte(b'a', b"xyz"), None);
        assert_eq!(byte2(b'a', b'b', b""), None);
    }

    proptest! {
        #[test]
        fn any_haystack_any_needles(h in proptest::collection::vec(any::<u8>(), 0..300), a: u8, b: u8, from in 0usize..300) {
            let from = from.min(h.len());
            prop_assert_eq!(byte(a, &h[from..]), naive(&[a], &h[from..]));
            prop_assert_eq!(byte2(a, b, &h[from..]), naive(&[a, b], &h[from..]));
        }
    }
}
