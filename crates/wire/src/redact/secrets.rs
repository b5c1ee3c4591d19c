//! Exact secrets (SPEC §5): which registered values count as secrets, every spelling of one
//! worth searching for (JSON-escaped, percent-encoded, base64), and the one search that
//! replaces them all with `[redacted]`.
//!
//! Invariants: the markers are patterns of the search that replace to themselves, so a secret
//! never eats into a marker; overlapping forms resolve leftmost-longest. It must not decide
//! which values are secret (the caller registers them) and knows nothing of keys or patterns.

use super::{Edits, MARKERS, MIN_SECRET_CHARS, REDACTED};
use aho_corasick::{AhoCorasick, AhoCorasickKind, Input, MatchKind};
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;

/// One leftmost-longest search over every form of every secret, plus the markers.
#[derive(Debug, Clone)]
pub(super) struct SecretMatcher {
    /// `MARKERS` first, then the forms, longest first.
    patterns: Vec<String>,
    /// `None` only if the automaton could not be built (absurdly many patterns); the slow
    /// search over `patterns` is used instead, never nothing.
    pub(super) automaton: Option<AhoCorasick>,
    /// A form that could overlap a marker: scrubbing runs to a fixed point (see `settle`).
    pub(super) touches_markers: bool,
}

impl SecretMatcher {
    pub(super) fn build(secrets: &[String]) -> Self {
        let mut forms: Vec<String> = secrets.iter().flat_map(|s| secret_forms(s)).collect();
        forms.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        forms.dedup();
        forms.retain(|f| !MARKERS.contains(&f.as_str()));
        let touches_markers = forms
            .iter()
            .any(|f| f.contains(['[', ']']) || MARKERS.iter().any(|m| m.contains(f.as_str())));
        let patterns: Vec<String> = MARKERS.iter().map(|m| m.to_string()).chain(forms).collect();
        // A contiguous NFA, never the DFA the builder would pick for few patterns: building a
        // DFA grows with the square of the forms' length (a 3 KiB secret, a PEM key in a
        // variable, took 10 s in a debug build: found by the `redact` fuzz target), while the
        // NFA builds in linear time and searches as fast behind the same prefilter.
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .build(&patterns)
            .ok();
        SecretMatcher {
            patterns,
            automaton,
            touches_markers,
        }
    }

    /// Record a replacement for every secret form in `s`, leftmost-longest, left to right.
    pub(super) fn replace(&self, s: &str, edits: &mut Edits<'_>) {
        let mut pos = 0;
        while let Some((start, end, pattern)) = self.find(s, pos) {
            if pattern >= MARKERS.len() {
                edits.replace(start, end, REDACTED);
            }
            pos = end;
        }
    }

    /// The leftmost-longest match at or after `from`: (start, end, pattern index).
    fn find(&self, s: &str, from: usize) -> Option<(usize, usize, usize)> {
        if from >= s.len() {
            return None;
        }
        if let Some(automaton) = &self.automaton {
            let found = automaton.find(Input::new(s).span(from..s.len()))?;
            return Some((found.start(), found.end(), found.pattern().as_usize()));
        }
        s[from..].char_indices().find_map(|(i, _)| {
            let at = from + i;
            let (index, len) = self
                .patterns
                .iter()
                .enumerate()
                .filter(|(_, p)| s[at..].starts_with(p.as_str()))
                .map(|(index, p)| (index, p.len()))
                .max_by_key(|&(_, len)| len)?;
            Some((at, at + len, index))
        })
    }
}

/// Whether `value` counts as a secret when registered: at least [`MIN_SECRET_CHARS`]
/// characters, not a boolean, not a plain number.
pub fn qualifies_as_secret(value: &str) -> bool {
    value.chars().count() >= MIN_SECRET_CHARS
        && !value.eq_ignore_ascii_case("true")
        && !value.eq_ignore_ascii_case("false")
        && !is_plain_number(value.trim())
}

/// A decimal number literal: optional sign, digits with at most one point, optional exponent.
fn is_plain_number(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = mantissa.bytes().filter(u8::is_ascii_digit).count();
    let points = mantissa.bytes().filter(|&b| b == b'.').count();
    let mantissa_ok = digits > 0 && points <= 1 && digits + points == mantissa.len();
    let exponent_ok = match exponent {
        None => true,
        Some(e) => {
            let e = e.strip_prefix(['+', '-']).unwrap_or(e);
            !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
        }
    };
    mantissa_ok && exponent_ok
}

/// Every spelling of `secret` worth searching for: as is; JSON-escaped the way common
/// serializers write it (serde/Go/JS, ASCII-only, PHP, and escaped twice for JSON inside a JSON
/// string); percent-encoded the way common encoders write it; base64 in both alphabets, padded
/// and not, plus the alignment-independent core of its encoding inside a longer base64 text.
pub(super) fn secret_forms(secret: &str) -> Vec<String> {
    let mut forms = vec![secret.to_string()];
    let json = json_escape(secret, JsonStyle::default());
    forms.push(json_escape(&json, JsonStyle::default()));
    forms.push(json);
    for style in [
        JsonStyle {
            ascii_only: true,
            ..JsonStyle::default()
        },
        JsonStyle {
            ascii_only: true,
            upper_hex: true,
            ..JsonStyle::default()
        },
        JsonStyle {
            html_safe: true,
            ..JsonStyle::default()
        },
        JsonStyle {
            ascii_only: true,
            escape_slash: true,
            ..JsonStyle::default()
        },
    ] {
        forms.push(json_escape(secret, style));
    }

    const UNRESERVED: &str = "-._~";
    for (safe, plus_for_space, upper) in [
        (UNRESERVED, false, true),  // RFC 3986
        (UNRESERVED, false, false), // lowercase hex
        (UNRESERVED, true, true),   // form encoding (quote_plus)
        ("-._~!'()*", false, true), // JavaScript encodeURIComponent
        ("-._~/", false, true),     // Python quote()
        ("-._*", true, true),       // WHATWG URLSearchParams
    ] {
        forms.push(percent_encode(secret, safe, plus_for_space, upper));
    }

    let bytes = secret.as_bytes();
    for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
        forms.push(engine.encode(bytes));
    }
    for offset in 0..3 {
        let mut shifted = vec![0u8; offset];
        shifted.extend_from_slice(bytes);
        let encoded = STANDARD_NO_PAD.encode(&shifted);
        // The first characters mix in the bytes before the secret, the last one the bytes after.
        let front = [0, 2, 3][offset];
        let back = usize::from(shifted.len() % 3 != 0);
        if let Some(core) = encoded.get(front..encoded.len().saturating_sub(back)) {
            if core.len() >= MIN_SECRET_CHARS {
                forms.push(core.replace('+', "-").replace('/', "_"));
                forms.push(core.to_string());
            }
        }
    }
    forms
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct JsonStyle {
    /// Non-ASCII as `\uXXXX` (Python's and PHP's default).
    ascii_only: bool,
    /// `\u00E9` rather than `\u00e9`.
    upper_hex: bool,
    /// `<`, `>`, `&`, U+2028, U+2029 as `\uXXXX` (Go's encoding/json).
    html_safe: bool,
    /// `/` as `\/` (PHP).
    escape_slash: bool,
}

/// The body of a JSON string literal holding `s` (without the quotes).
pub(super) fn json_escape(s: &str, style: JsonStyle) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    let unicode = |out: &mut String, unit: u16| {
        if style.upper_hex {
            out.push_str(&format!("\\u{unit:04X}"));
        } else {
            out.push_str(&format!("\\u{unit:04x}"));
        }
    };
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '/' if style.escape_slash => out.push_str("\\/"),
            c if (c as u32) < 0x20 => unicode(&mut out, c as u16),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' if style.html_safe => {
                unicode(&mut out, c as u16)
            }
            c if style.ascii_only && !c.is_ascii() => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    unicode(&mut out, *unit);
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// Percent-encode every byte of `s` except ASCII alphanumerics and the bytes in `safe`.
pub(super) fn percent_encode(s: &str, safe: &str, plus_for_space: bool, upper: bool) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || safe.as_bytes().contains(&b) {
            out.push(char::from(b));
        } else if b == b' ' && plus_for_space {
            out.push('+');
        } else if upper {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push_str(&format!("%{b:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::Redactor;
    use serde_json::json;

    const SECRET: &str = "s3cr3t-Value_42";

    fn with_secret(secret: &str) -> Redactor {
        let mut r = Redactor::new();
        r.add_secret(secret);
        r
    }

    #[test]
    fn plain_secret_is_replaced_everywhere_it_occurs() {
        let r = with_secret(SECRET);
        assert_eq!(
            r.scrub_secrets_str(&format!("a {SECRET} b{SECRET}")),
            "a [redacted] b[redacted]"
        );
    }

    #[test]
    fn short_boolean_and_numeric_values_are_not_secrets() {
        let mut r = Redactor::new();
        for v in [
            "short",
            "true",
            "false",
            "12345678",
            "-1234.5678",
            "1.5e10000",
            "",
        ] {
            r.add_secret(v);
        }
        let text = "short true false 12345678 -1234.5678 1.5e10000";
        assert_eq!(r.scrub_secrets_str(text), text);
        assert!(r.secrets.is_empty());
        assert!(qualifies_as_secret("1234-5678"));
        assert!(qualifies_as_secret("0x1234abcd"));
    }

    #[test]
    fn a_padded_secret_also_registers_its_trimmed_form() {
        let r = with_secret("  hunter2hunter2\n");
        assert_eq!(r.scrub_secrets_str("pw hunter2hunter2."), "pw [redacted].");
    }

    #[test]
    fn json_escaped_forms_are_replaced() {
        let secret = "pa\"ss\\wörd/<x>\u{1}";
        let r = with_secret(secret);
        let embedded = serde_json::to_string(&json!({ "p": secret })).unwrap();
        assert_eq!(r.scrub_secrets_str(&embedded), r#"{"p":"[redacted]"}"#);
        let twice = serde_json::to_string(&json!({ "outer": embedded })).unwrap();
        assert!(!r.scrub_secrets_str(&twice).contains("ss\\\\\\\\w"));
        for style in [
            JsonStyle {
                ascii_only: true,
                ..JsonStyle::default()
            },
            JsonStyle {
                html_safe: true,
                ..JsonStyle::default()
            },
            JsonStyle {
                ascii_only: true,
                escape_slash: true,
                ..JsonStyle::default()
            },
        ] {
            let form = json_escape(secret, style);
            assert_eq!(r.scrub_secrets_str(&format!("<{form}>")), "<[redacted]>");
        }
    }

    #[test]
    fn our_json_escaping_matches_serde_json() {
        for s in [
            "plain",
            "q\"b\\s/",
            "\u{0}\u{1f}\u{7f}\n\t\r\u{8}\u{c}",
            "é😀\u{2028}",
        ] {
            let serde = serde_json::to_string(s).unwrap();
            assert_eq!(
                format!("\"{}\"", json_escape(s, JsonStyle::default())),
                serde
            );
        }
    }

    #[test]
    fn url_encoded_forms_are_replaced() {
        let secret = "p@ss word/with&more!";
        let r = with_secret(secret);
        for encoded in [
            "p%40ss%20word%2Fwith%26more%21",
            "p%40ss%20word%2fwith%26more%21",
            "p%40ss+word%2Fwith%26more%21",
            "p%40ss%20word%2Fwith%26more!",
            "p%40ss%20word/with%26more%21",
        ] {
            assert_eq!(
                r.scrub_secrets_str(&format!("https://x/?q={encoded}&y=1")),
                "https://x/?q=[redacted]&y=1",
                "{encoded}"
            );
        }
    }

    #[test]
    fn base64_forms_are_replaced_standalone_and_inside_basic_credentials() {
        let secret = "ab>c?d~efgh"; // bytes that differ between the two alphabets
        let r = with_secret(secret);
        for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
            let encoded = engine.encode(secret);
            assert_eq!(
                r.scrub_secrets_str(&format!("x {encoded} y")),
                "x [redacted] y"
            );
        }
        for prefix in ["", "u:", "us:", "user:"] {
            let basic = STANDARD.encode(format!("{prefix}{secret}"));
            let out = r.scrub_secrets_str(&basic);
            assert!(out.contains(REDACTED), "{prefix}: {out}");
        }
    }

    #[test]
    fn a_secret_added_after_use_is_scrubbed_too() {
        let mut r = with_secret("first-secret");
        assert_eq!(r.scrub_secrets_str("second-secret"), "second-secret");
        r.add_secret("second-secret");
        assert_eq!(
            r.redact_str("first-secret second-secret"),
            "[redacted] [redacted]"
        );
    }

    #[test]
    fn the_longest_of_overlapping_secrets_wins() {
        let mut r = Redactor::new();
        r.add_secret("abcdefgh");
        r.add_secret("abcdefgh-and-more");
        assert_eq!(r.scrub_secrets_str("<abcdefgh-and-more>"), "<[redacted]>");
        assert_eq!(r.scrub_secrets_str("<abcdefgh-and>"), "<[redacted]-and>");
    }

    #[test]
    fn a_secret_spelled_like_a_marker_keeps_redaction_idempotent() {
        let mut r = Redactor::new();
        r.add_secret("redacted");
        r.add_secret("host-path");
        r.add_secret("ted][red");
        let once = r.redact_str("redacted host-path ted][red /root/x");
        assert_eq!(once, "[redacted] [redacted] [redacted] [host-path]/x");
        assert_eq!(r.redact_str(&once), once);
        assert_eq!(r.scrub_secrets_str(&once), once);
    }

    #[test]
    fn the_fallback_search_agrees_with_the_automaton() {
        let mut r = Redactor::new();
        r.add_secret("abcdefgh");
        r.add_secret("abcdefgh-and-more");
        r.add_secret("redacted");
        let mut slow = r.clone();
        slow.matcher();
        if let Some(m) = slow.matcher.get_mut() {
            m.automaton = None;
        }
        assert!(slow.matcher().is_some_and(|m| m.automaton.is_none()));
        for text in [
            "",
            "x abcdefgh-and-more abcdefgh [redacted] redacted é",
            "abcdefghabcdefgh",
        ] {
            assert_eq!(slow.scrub_secrets_str(text), r.scrub_secrets_str(text));
        }
    }

    /// A hang-class finding of the `redact` fuzz target: the search over a long secret's
    /// forms was a DFA whose construction grows with the square of their length (a 16 KiB
    /// secret took minutes in a debug build). Time is the behaviour here: the bound is far
    /// above the linear build (well under a second) and far below the quadratic one.
    #[test]
    fn a_long_secret_is_registered_and_found_in_linear_time() {
        let secret: String = (0..16 * 1024)
            .map(|i| char::from(b'A' + (i * 7 % 26) as u8))
            .collect();
        let started = std::time::Instant::now();
        let mut r = Redactor::new();
        r.add_secret(&secret);
        let text = format!("{}{secret}{}", "x".repeat(1 << 20), "y".repeat(1 << 10));
        let out = r.scrub_secrets_str(&text);
        assert!(out.ends_with(&format!("[redacted]{}", "y".repeat(1 << 10))));
        assert!(!out.contains(&secret));
        let took = started.elapsed();
        assert!(took < std::time::Duration::from_secs(20), "{took:?}");
    }
}
