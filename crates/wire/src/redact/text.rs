//! The string rules (SPEC §5) that work on text rather than on registered values:
//! `key=value` / `key: value` assignments with a sensitive key, `Cookie:` headers, URL userinfo,
//! `Bearer`/`Basic` credentials and well-known token shapes, each replaced by `[redacted]`.
//!
//! Invariants: a rule only ever replaces a credential with the marker and never matches a
//! marker, so running it on its own output changes nothing; prose without an explicit `=` or
//! `:` is left alone. It must not know about registered secrets or host paths.

use super::keys::is_sensitive_key;
use super::{Edits, MIN_SECRET_CHARS, REDACTED};

/// Keys longer than this are read from their last this-many characters.
const MAX_KEY_BYTES: usize = 64;

/// A key holding this keeps the auth scheme of its value (`Authorization: Bearer [redacted]`).
const AUTHORIZATION: &[u8] = b"authorization";

/// HTTP authentication schemes kept in front of a redacted credential.
const AUTH_SCHEMES: [&str; 6] = ["bearer", "basic", "digest", "token", "negotiate", "ntlm"];

/// Values of sensitive keys in `key=value` / `key: value` text → `[redacted]`. Only an explicit
/// separator counts, so prose ("the token was rejected") stays as it is.
///
/// Linear: each separator looks back over the key in front of it, which ends at the previous
/// separator; every forward question (where does this value end, does it hold a digit) is
/// answered by a [`Seek`], and the questions come in increasing order.
pub(super) fn scrub_assignments(s: &str, edits: &mut Edits<'_>) {
    let bytes = s.as_bytes();
    let mut floor = 0; // nothing before this can be part of a key (it was a value)
    let mut authorities = Authorities::new(s);
    let mut values = Values::new(s);
    let mut verdicts = LastKey::default();
    let mut pos = 0;
    while let Some(off) = memchr::memchr2(b':', b'=', &bytes[pos..]) {
        let sep = pos + off;
        pos = sep + 1;
        // `scheme://` and a `user:pass@host` authority are URLs, which `scrub_credentials` owns.
        if s[sep..].starts_with("://") || authorities.contain(sep) {
            continue;
        }
        let Some(key) = key_before(s, sep, floor) else {
            continue;
        };
        if !verdicts.is_sensitive(&s[key.start..key.end]) {
            continue;
        }
        let mut start = sep + 1;
        while matches!(bytes.get(start), Some(b' ' | b'\t')) {
            start += 1;
        }
        let Some(value) = values.at(start) else {
            continue;
        };
        // A bare `name:value` is too often a namespaced id (`secrets:list`) to redact blindly.
        // The test ignores length: a later pass may put a longer marker inside the value, and
        // the decision must not change when the output is redacted again.
        let bare_colon = bytes[sep] == b':' && !key.quoted && start == sep + 1 && !value.quoted;
        if bare_colon && !values.has_credential_traits(value.inner.0, value.inner.1) {
            continue;
        }
        let inner = &s[value.inner.0..value.inner.1];
        let keep_scheme = bytes[key.start..key.end]
            .windows(AUTHORIZATION.len())
            .any(|w| w.eq_ignore_ascii_case(AUTHORIZATION));
        if let Some(kept) = kept_before_marker(inner, keep_scheme) {
            edits.replace(value.inner.0 + kept, value.inner.1, REDACTED);
        }
        authorities.restart_at(value.end);
        floor = value.end;
        pos = value.end;
    }
}

/// The last key judged and its verdict: text repeats its keys (`token=…` on every line), and
/// a key is at most [`MAX_KEY_BYTES`] long, so comparing is cheaper than judging again.
#[derive(Default)]
struct LastKey<'a> {
    key: Option<(&'a str, bool)>,
}

impl<'a> LastKey<'a> {
    fn is_sensitive(&mut self, key: &'a str) -> bool {
        match self.key {
            Some((last, verdict)) if last == key => verdict,
            _ => {
                let verdict = is_sensitive_key(key);
                self.key = Some((key, verdict));
                verdict
            }
        }
    }
}

/// The first position at or after a given one where a predicate holds, for questions asked in
/// increasing order: a scan that found the answer `at` starting from `from` also answers every
/// later question in `[from, at]`, so each byte is read once however many questions overlap.
/// (A question out of order is still answered correctly, by scanning again.)
struct Seek<'a, P> {
    s: &'a str,
    stop: P,
    /// No position in `from..at` satisfies the predicate; `at` does, or is the end of `s`.
    from: usize,
    at: usize,
}

impl<'a, P: Fn(&'a str, usize, char) -> bool> Seek<'a, P> {
    fn new(s: &'a str, stop: P) -> Self {
        Seek {
            s,
            stop,
            from: 1,
            at: 0,
        }
    }

    /// The first position at or after `from` (a char boundary) where the predicate holds, or
    /// the end of the text.
    fn from(&mut self, from: usize) -> usize {
        if !(self.from <= from && from <= self.at) {
            self.from = from;
            self.at = self.s[from..]
                .char_indices()
                .find(|&(i, c)| (self.stop)(self.s, from + i, c))
                .map_or(self.s.len(), |(i, _)| from + i);
        }
        self.at
    }
}

type StopFn = fn(&str, usize, char) -> bool;

/// Where values end and what they hold, for values asked about left to right.
struct Values<'a> {
    s: &'a str,
    unquoted_end: Seek<'a, StopFn>,
    digit_or_symbol: Seek<'a, StopFn>,
    capital: Seek<'a, StopFn>,
}

impl<'a> Values<'a> {
    fn new(s: &'a str) -> Self {
        Values {
            s,
            unquoted_end: Seek::new(s, ends_unquoted),
            digit_or_symbol: Seek::new(s, |_, _, c| c.is_ascii_digit() || "+/=".contains(c)),
            capital: Seek::new(s, |_, _, c| c.is_ascii_uppercase()),
        }
    }

    /// The value starting at `start`: a quoted string (`"…"` with escapes, `\"…\"`, `'…'`) up
    /// to its closing quote on the same line, or an unquoted run up to whitespace, `&`, `,`,
    /// `;` or a quote. An unquoted auth scheme takes its credential with it (`Bearer abc`).
    ///
    /// A closing quote is looked for only up to the end of the line. When there is none, no
    /// value opening with that quote can start later on the line, so the search is never
    /// repeated over the same bytes.
    fn at(&mut self, start: usize) -> Option<ValueSpan> {
        let s = self.s;
        let b = s.as_bytes();
        let rest = &s[start..];
        let (open, close, close_len) = if rest.starts_with('"') {
            (1, closing_quote(b, start + 1), 1)
        } else if rest.starts_with("\\\"") {
            (2, closing_escaped_quote(b, start + 2), 2)
        } else if rest.starts_with('\'') {
            let close = b[start + 1..]
                .iter()
                .position(|&c| matches!(c, b'\'' | b'\n' | b'\r'))
                .map(|i| start + 1 + i)
                .filter(|&i| b[i] == b'\'');
            (1, close, 1)
        } else if rest.starts_with('=') {
            return None; // `==`: a comparison, not an assignment
        } else {
            let mut end = self.unquoted_end.from(start);
            let word = &s[start..end];
            if AUTH_SCHEMES.iter().any(|a| word.eq_ignore_ascii_case(a)) {
                let mut next = end;
                while matches!(b.get(next), Some(b' ' | b'\t')) {
                    next += 1;
                }
                let credential_end = self.unquoted_end.from(next);
                if next > end && credential_end > next {
                    end = credential_end;
                }
            }
            return (end > start).then_some(ValueSpan {
                inner: (start, end),
                end,
                quoted: false,
            });
        };
        let span = match close {
            Some(close) => ValueSpan {
                inner: (start + open, close),
                end: close + close_len,
                quoted: true,
            },
            None => {
                let end = self.unquoted_end.from(start + open);
                ValueSpan {
                    inner: (start + open, end),
                    end,
                    quoted: true,
                }
            }
        };
        (span.inner.1 > span.inner.0).then_some(span)
    }

    /// A digit, one of `+/=`, or a capital after the first character in `start..end`. The
    /// markers have none of these, so inserting one never turns a value into a credential.
    fn has_credential_traits(&mut self, start: usize, end: usize) -> bool {
        let Some(first) = self.s[start..end].chars().next() else {
            return false;
        };
        self.digit_or_symbol.from(start) < end || self.capital.from(start + first.len_utf8()) < end
    }
}

/// End of an unquoted value: whitespace, `&`, `,`, `;`, a quote, or a backslash-escaped quote.
fn ends_unquoted(s: &str, at: usize, c: char) -> bool {
    c.is_whitespace()
        || matches!(c, '&' | ',' | ';' | '"' | '\'')
        || (c == '\\' && s.as_bytes().get(at + 1) == Some(&b'"'))
}

/// The closing `"` of a JSON-style string whose body starts at `from`, skipping escapes, if it
/// comes before the end of the line.
fn closing_quote(b: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            b'\n' | b'\r' => return None,
            _ => i += 1,
        }
    }
    None
}

/// The closing `\"` of an escaped string whose body starts at `from`, if it comes before the
/// end of the line.
fn closing_escaped_quote(b: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b'\n' | b'\r' => return None,
            b'\\' if b.get(i + 1) == Some(&b'"') => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// The authority parts (`user:pass@host:port`) of the URLs in a text, found left to right;
/// each `://` is found once, so asking about every separator in order is linear.
struct Authorities<'a> {
    s: &'a str,
    /// Position of the next `://` not yet read.
    upcoming: Option<usize>,
    /// The latest authority read: [start, end).
    current: (usize, usize),
}

impl<'a> Authorities<'a> {
    fn new(s: &'a str) -> Self {
        Authorities {
            s,
            upcoming: find_scheme_separator(s, 0),
            current: (0, 0),
        }
    }

    /// Whether `at` lies inside an authority; `at` never decreases between calls.
    fn contain(&mut self, at: usize) -> bool {
        while let Some(colon) = self.upcoming.filter(|&colon| colon <= at) {
            let start = colon + 3;
            self.current = (start, start + authority_len(&self.s[start..]));
            self.upcoming = find_scheme_separator(self.s, start);
        }
        self.current.0 <= at && at < self.current.1
    }

    /// Forget any URL that starts before `at`: that text was a value, now redacted, and a
    /// `://` inside it must not make what follows look like an authority. Searches again only
    /// past a `://` it has already found, so the total work stays linear.
    fn restart_at(&mut self, at: usize) {
        self.current = (0, 0);
        if self.upcoming.is_some_and(|colon| colon < at) {
            self.upcoming = find_scheme_separator(self.s, at);
        }
    }
}

/// The first `://` at or after `from` (a plain scan: no searcher to set up for short strings).
fn find_scheme_separator(s: &str, from: usize) -> Option<usize> {
    let b = s.as_bytes();
    let mut at = from;
    while let Some(i) = memchr::memchr(b':', b.get(at..)?) {
        at += i;
        if b[at + 1..].starts_with(b"//") {
            return Some(at);
        }
        at += 1;
    }
    None
}

/// Length of the authority at the start of `rest` (the text after `://`). Brackets are allowed
/// (IPv6 hosts, and markers put there by redaction, which must not change the answer).
fn authority_len(rest: &str) -> usize {
    rest.find(|c: char| {
        c.is_whitespace() || matches!(c, '/' | '?' | '#' | '"' | '\'' | '<' | '>' | '\\')
    })
    .unwrap_or(rest.len())
}

struct KeySpan {
    start: usize,
    end: usize,
    /// The key is wrapped in quotes (`"password": …`), as in JSON or Python text.
    quoted: bool,
}

/// The key in front of the separator at `sep`: `[A-Za-z0-9_.-]+`, then an optional closing
/// quote (possibly backslash-escaped), then spaces.
fn key_before(s: &str, sep: usize, floor: usize) -> Option<KeySpan> {
    let b = s.as_bytes();
    let mut j = sep;
    while j > floor && matches!(b[j - 1], b' ' | b'\t') {
        j -= 1;
    }
    let mut quoted = false;
    if j > floor && matches!(b[j - 1], b'"' | b'\'') {
        quoted = true;
        j -= 1;
        if j > floor && b[j - 1] == b'\\' {
            j -= 1;
        }
    }
    let end = j;
    while j > floor && end - j < MAX_KEY_BYTES && is_key_byte(b[j - 1]) {
        j -= 1;
    }
    (j < end).then_some(KeySpan {
        start: j,
        end,
        quoted,
    })
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

struct ValueSpan {
    /// The part that is replaced (inside the quotes, if any).
    inner: (usize, usize),
    /// Where the value ends, closing quote included.
    end: usize,
    quoted: bool,
}

/// How much of a sensitive value stays in front of the marker that replaces the rest (an auth
/// scheme and its spaces, when `keep_scheme`), or `None` when it is already redacted.
fn kept_before_marker(inner: &str, keep_scheme: bool) -> Option<usize> {
    if inner == REDACTED {
        return None;
    }
    let scheme_end = inner
        .bytes()
        .position(|b| !b.is_ascii_alphabetic())
        .unwrap_or(inner.len());
    let scheme = &inner[..scheme_end];
    let after = inner[scheme_end..].trim_start_matches([' ', '\t']);
    let has_scheme = AUTH_SCHEMES.iter().any(|a| scheme.eq_ignore_ascii_case(a))
        && after.len() < inner.len() - scheme_end
        && !after.is_empty();
    if keep_scheme && has_scheme {
        if after == REDACTED {
            return None;
        }
        return Some(inner.len() - after.len());
    }
    Some(0)
}

/// A word after `Bearer`/`Basic` at least this long is a credential whatever its characters:
/// no word of ordinary prose is ("internationalization" has 20 letters), while a token made
/// only of lowercase letters has no other trait to be told by.
const LONG_CREDENTIAL_CHARS: usize = 24;

/// At least 8 characters with [`has_credential_traits`], or at least
/// [`LONG_CREDENTIAL_CHARS`] of any kind: random credentials nearly always qualify, prose
/// words ("authentication") do not. A shorter token of lowercase letters only
/// (`Bearer abcdefgh`) is prose to this rule; under a sensitive key or header
/// (`Authorization: Bearer …`) or registered as a secret it is redacted all the same.
fn looks_like_credential(s: &str) -> bool {
    let chars = s.chars().count();
    chars >= LONG_CREDENTIAL_CHARS || (chars >= MIN_SECRET_CHARS && has_credential_traits(s))
}

/// A digit, one of `+/=`, or a capital after the first character. The markers have none of
/// these, so inserting one never turns a value into a credential.
fn has_credential_traits(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit())
        || s.contains(['+', '/', '='])
        || s.chars().skip(1).any(|c| c.is_ascii_uppercase())
}

// ---------------------------------------------------------------------------------------------
// Credentials by shape: headers, URLs, auth schemes, well-known tokens
// ---------------------------------------------------------------------------------------------

/// What starts a shape-based rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trigger {
    /// `Cookie:` / `Set-Cookie:` (any case, spaces before the colon).
    Header,
    /// `Bearer` / `Basic` (any case) and the spaces after it.
    AuthScheme,
    /// The fixed prefix of a well-known token shape.
    Token(&'static str),
    /// `scheme://`.
    Url,
}

/// The first bytes of `cookie`, `set-cookie`, `bearer`, `basic` (any case) and of the
/// [`TOKEN_PREFIXES`].
const STARTS_A_WORD_TRIGGER: [bool; 256] = {
    let mut table = [false; 256];
    let firsts = b"sScCbBgxAe";
    let mut i = 0;
    while i < firsts.len() {
        table[firsts[i] as usize] = true;
        i += 1;
    }
    table
};

/// Prefixes of the well-known token shapes; each needs a word boundary in front.
const TOKEN_PREFIXES: [&str; 17] = [
    "sk-",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxo-",
    "xoxs-",
    "xoxr-",
    "AKIA",
    "ASIA",
    "glpat-",
    "eyJ",
];

/// The longest URL scheme recognised, in bytes (`[A-Za-z][A-Za-z0-9+.-]{0,31}`).
const MAX_SCHEME_BYTES: usize = 32;

/// Finds the triggers of the shape rules left to right: the leftmost one, and at one position
/// the first of header, auth scheme, token, URL (the order of the alternatives of the regex
/// `\b(?i:set-cookie|cookie)[ \t]*:|\b(?i:bearer|basic)[ \t]+|\b(?:sk-|gh[pousr]_|…|eyJ)|
/// [A-Za-z][A-Za-z0-9+.-]{0,31}://` it implements).
///
/// Linear: questions come with increasing `from`, and each kind of trigger keeps the answer
/// it found, which stays the answer until `from` passes it. The check at one position reads a
/// bounded number of bytes, except the blanks after `cookie`/`bearer`, which only the word in
/// front of them reads; each `://` is found once and looks back at most 32 bytes for its
/// scheme once per question that reaches it, and there is at most one question per trigger.
struct Triggers<'a> {
    s: &'a str,
    /// The next header, auth-scheme or token trigger at or after `word_from`.
    word_from: usize,
    word: Option<(usize, usize, Trigger)>,
    /// The next URL trigger at or after `url_from`.
    url_from: usize,
    url: Option<(usize, usize, Trigger)>,
}

impl<'a> Triggers<'a> {
    fn new(s: &'a str) -> Self {
        Triggers {
            s,
            word_from: usize::MAX,
            word: None,
            url_from: usize::MAX,
            url: None,
        }
    }

    /// The first trigger starting at or after `from`: (start, end, kind).
    fn next(&mut self, from: usize) -> Option<(usize, usize, Trigger)> {
        if !answers(self.word_from, self.word, from) {
            self.word_from = from;
            let b = self.s.as_bytes();
            self.word = (from..b.len())
                .filter(|&p| STARTS_A_WORD_TRIGGER[usize::from(b[p])])
                .find_map(|p| self.word_trigger_at(p));
        }
        if !answers(self.url_from, self.url, from) {
            self.url_from = from;
            self.url = self.url_at_or_after(from);
        }
        let (word, url) = (self.word, self.url);
        match (word, url) {
            (Some(w), Some(u)) if u.0 < w.0 => Some(u),
            (None, url) => url,
            (word, _) => word,
        }
    }

    /// A header, auth-scheme or token trigger starting at `p` (whose byte is in
    /// [`STARTS_A_WORD_TRIGGER`]); each needs a word boundary in
    /// front.
    fn word_trigger_at(&self, p: usize) -> Option<(usize, usize, Trigger)> {
        let s = self.s;
        let b = s.as_bytes();
        let first = b[p];
        if p > 0 && is_word_byte(b[p - 1]) {
            return None;
        }
        let rest = &b[p..];
        if matches!(first, b's' | b'S' | b'c' | b'C') {
            let word = ["set-cookie", "cookie"]
                .into_iter()
                .find(|w| starts_with_ignore_case(rest, w));
            if let Some(word) = word {
                let colon = p + word.len() + run_len(s, p + word.len(), is_blank);
                if b.get(colon) == Some(&b':') {
                    return Some((p, colon + 1, Trigger::Header));
                }
            }
        }
        if matches!(first, b'b' | b'B') {
            let scheme = ["bearer", "basic"]
                .into_iter()
                .find(|w| starts_with_ignore_case(rest, w));
            if let Some(scheme) = scheme {
                let blanks = run_len(s, p + scheme.len(), is_blank);
                if blanks > 0 {
                    return Some((p, p + scheme.len() + blanks, Trigger::AuthScheme));
                }
            }
        }
        TOKEN_PREFIXES
            .into_iter()
            .find(|t| rest.starts_with(t.as_bytes()))
            .map(|prefix| (p, p + prefix.len(), Trigger::Token(prefix)))
    }

    /// The leftmost `scheme://` starting at or after `from`.
    fn url_at_or_after(&self, from: usize) -> Option<(usize, usize, Trigger)> {
        let b = self.s.as_bytes();
        let mut search = from;
        loop {
            let colon = find_scheme_separator(self.s, search)?;
            // The scheme is the run of scheme characters right before `://`, at most 32 bytes
            // long, starting with a letter.
            let mut lo = colon;
            while lo > from.max(colon.saturating_sub(MAX_SCHEME_BYTES))
                && is_scheme_char(char::from(b[lo - 1]))
            {
                lo -= 1;
            }
            if let Some(start) = (lo..colon).find(|&p| b[p].is_ascii_alphabetic()) {
                return Some((start, colon + 3, Trigger::Url));
            }
            search = colon + 1;
        }
    }
}

/// Whether the trigger found at or after `found_from` is still the next one at or after
/// `from`: nothing between the two positions was a trigger.
fn answers(found_from: usize, found: Option<(usize, usize, Trigger)>, from: usize) -> bool {
    found_from <= from && !matches!(found, Some((start, _, _)) if from > start)
}

fn is_scheme_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-')
}

/// An ASCII word byte, as `\b` sees it.
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn starts_with_ignore_case(haystack: &[u8], word: &str) -> bool {
    haystack.len() >= word.len() && haystack[..word.len()].eq_ignore_ascii_case(word.as_bytes())
}

/// `Cookie:`/`Set-Cookie:` values (to the end of the line), URL userinfo, `Bearer`/`Basic`
/// credentials, and well-known token shapes → `[redacted]`.
///
/// Linear: the scan resumes at or after the end of each trigger, and what a rule reads past
/// it is either replaced and skipped, or holds no trigger that could make a rule read it again.
pub(super) fn scrub_credentials(s: &str, edits: &mut Edits<'_>) {
    let mut triggers = Triggers::new(s);
    let mut pos = 0;
    while let Some((start, end, trigger)) = triggers.next(pos) {
        let (edit, resume) = match trigger {
            Trigger::Url => userinfo(s, end),
            Trigger::Header => header_value(s, end),
            Trigger::AuthScheme => auth_credential(s, end),
            Trigger::Token(prefix) => token_shape(s, start, prefix),
        };
        if let Some((start, end)) = edit {
            edits.replace(start, end, REDACTED);
        }
        pos = resume.max(end);
    }
}

/// A range to replace (if any) and where the scan resumes.
type Verdict = (Option<(usize, usize)>, usize);

fn line_end(s: &str, from: usize) -> usize {
    s[from..].find(['\n', '\r']).map_or(s.len(), |i| from + i)
}

fn header_value(s: &str, after_colon: usize) -> Verdict {
    let start = after_colon + run_len(s, after_colon, |b| b == b' ' || b == b'\t');
    let end = line_end(s, start);
    let value = &s[start..end];
    if value.trim().is_empty() || value == REDACTED {
        return (None, end);
    }
    (Some((start, end)), end)
}

/// `scheme://userinfo@host` → `scheme://[redacted]@host`; the userinfo runs to the last `@`
/// before the host part ends.
fn userinfo(s: &str, start: usize) -> Verdict {
    let authority_end = start + authority_len(&s[start..]);
    match s[start..authority_end].rfind('@') {
        Some(at) if at > 0 && &s[start..start + at] != REDACTED => {
            (Some((start, start + at)), start + at + 1)
        }
        _ => (None, start),
    }
}

/// `Bearer <token68>` / `Basic <token68>`, when the word after the scheme looks like a
/// credential ("Basic authentication" stays).
fn auth_credential(s: &str, start: usize) -> Verdict {
    let b = s.as_bytes();
    let mut end = start;
    while end < b.len()
        && (b[end].is_ascii_alphanumeric()
            || matches!(b[end], b'-' | b'.' | b'_' | b'~' | b'+' | b'/'))
    {
        end += 1;
    }
    while end < b.len() && b[end] == b'=' {
        end += 1;
    }
    if looks_like_credential(&s[start..end]) {
        (Some((start, end)), end)
    } else {
        (None, start)
    }
}

/// Length of the run of bytes from `from` that satisfy `keep`.
fn run_len(s: &str, from: usize, keep: impl Fn(u8) -> bool) -> usize {
    s.as_bytes()[from..]
        .iter()
        .take_while(|&&b| keep(b))
        .count()
}

fn token_shape(s: &str, start: usize, prefix: &str) -> Verdict {
    let tail = start + prefix.len();
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    let alnum_dash_underscore = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    let has_digit = |from: usize, to: usize| s.as_bytes()[from..to].iter().any(u8::is_ascii_digit);
    let (end, ok) = match prefix {
        "sk-" => {
            // OpenAI-style; the digit keeps "sk-learn-compatible-estimator" prose intact.
            let end = tail + run_len(s, tail, alnum_dash_underscore);
            (end, end - tail >= 20 && has_digit(tail, end))
        }
        "github_pat_" => {
            let end = tail + run_len(s, tail, |b| alnum(b) || b == b'_');
            (end, end - tail >= 20)
        }
        "glpat-" => {
            let end = tail + run_len(s, tail, alnum_dash_underscore);
            (end, end - tail >= 20)
        }
        "AKIA" | "ASIA" => {
            let end = tail + run_len(s, tail, alnum);
            let upper = s.as_bytes()[tail..end]
                .iter()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
            (end, end - tail == 16 && upper)
        }
        "eyJ" => return jwt(s, start),
        p if p.starts_with("xox") => {
            let end = tail + run_len(s, tail, |b| alnum(b) || b == b'-');
            (end, end - tail >= 10 && has_digit(tail, end))
        }
        _ => {
            // gh[pousr]_
            let end = tail + run_len(s, tail, alnum);
            (end, end - tail >= 20)
        }
    };
    (ok.then_some((start, end)), end)
}

/// A JWT (or JWE): `eyJ…` header, then two to four more dot-separated base64url segments (the
/// last may be empty, as in an unsigned token).
fn jwt(s: &str, start: usize) -> Verdict {
    let b64url = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    let header_end = start + run_len(s, start, b64url);
    if header_end - start < 10 {
        return (None, header_end);
    }
    let mut end = header_end;
    let mut segments = 1;
    while segments < 5 && s.as_bytes().get(end) == Some(&b'.') {
        let len = run_len(s, end + 1, b64url);
        // Only the signature, the third segment, may be empty.
        if len == 0 && segments != 2 {
            break;
        }
        end += 1 + len;
        segments += 1;
        if len == 0 {
            break;
        }
    }
    let payload_ok = segments >= 3;
    (payload_ok.then_some((start, end)), end)
}

#[cfg(test)]
mod tests {
    use crate::redact::Redactor;

    fn redact(s: &str) -> String {
        Redactor::new().redact_str(s)
    }

    #[test]
    fn assignments_with_sensitive_keys_are_redacted() {
        for (input, expected) in [
            ("token=abc", "token=[redacted]"),
            ("GITHUB_TOKEN=ghx_1 next", "GITHUB_TOKEN=[redacted] next"),
            ("password: hunter2", "password: [redacted]"),
            ("x-api-key = k1, other", "x-api-key = [redacted], other"),
            ("?token=abc&x=1", "?token=[redacted]&x=1"),
            ("a=1;secret=two;b=3", "a=1;secret=[redacted];b=3"),
            (r#"password="a b c" rest"#, r#"password="[redacted]" rest"#),
            ("password='a b' rest", "password='[redacted]' rest"),
            (
                r#"{"password": "a b", "user": "bob"}"#,
                r#"{"password": "[redacted]", "user": "bob"}"#,
            ),
            (r#"{\"token\":\"abc\"}"#, r#"{\"token\":\"[redacted]\"}"#),
            (
                r#"password="unterminated value"#,
                r#"password="[redacted] value"#,
            ),
            ("'TOKEN=abc' next", "'TOKEN=[redacted]' next"),
            ("env=DB_PASSWORD=xyz", "env=DB_PASSWORD=[redacted]"),
            ("password:Hunter2hunter2", "password:[redacted]"),
            (
                "Authorization: Bearer abc",
                "Authorization: Bearer [redacted]",
            ),
            (
                r#""authorization": "Basic dXNlcjpwYXNz""#,
                r#""authorization": "Basic [redacted]""#,
            ),
            ("token: Bearer abc", "token: [redacted]"),
        ] {
            assert_eq!(redact(input), expected, "{input}");
        }
    }

    #[test]
    fn prose_and_lookalikes_are_left_alone() {
        for text in [
            "token validation passed",
            "the password is wrong",
            "Secret values, bearer tokens, cookies, and host-local paths stay out",
            "max_tokens=100 prompt_tokens: 20 token_count=3",
            "tokenizer_model=cl100k sandbox_session_id=s-1",
            "uses Basic authentication and a Bearer token",
            "install sk-learn or sk-learn-compatible-estimators",
            "tool secrets:list and password-manager:get",
            "if token == expected",
            "see https://example.com/a/b?page=2#top and mail a@b.com",
            "at 10:30, ratio=2:1",
            "/rootfs /homepage home/alice ./root relative/path /home/ /tmp/x",
            "eyJhbGciOiJIUzI1NiJ9 alone is just base64",
            "AKIA is a prefix; AKIAIOSFODNN7EXAMPLEX is too long",
            "[redacted] [host-path] stay as they are",
        ] {
            assert_eq!(redact(text), text);
        }
    }

    #[test]
    fn auth_schemes_keep_the_scheme_word() {
        assert_eq!(
            redact("curl -H 'x: Bearer eyJabc.def.ghi' -u x"),
            "curl -H 'x: Bearer [redacted]' -u x"
        );
        assert_eq!(redact("Basic dXNlcjpwYXNz"), "Basic [redacted]");
        assert_eq!(redact("bearer abcDEF123456=="), "bearer [redacted]");
    }

    #[test]
    fn a_lowercase_only_bearer_token_is_a_credential_from_24_characters() {
        let long = "qwertyuiopasdfghjklzxcvb";
        assert_eq!(long.len(), 24);
        assert_eq!(redact(&format!("Bearer {long}")), "Bearer [redacted]");
        assert_eq!(
            redact(&format!("sent basic {long}x, ok")),
            "sent basic [redacted], ok"
        );
        // Shorter: prose, as ordinary words after the scheme are.
        for text in [
            "Bearer qwertyuiopasdfghjklzxcv",
            "basic internationalization and Basic authentication",
            "a Bearer token, bearer credentials",
        ] {
            assert_eq!(redact(text), text);
        }
        // Under a sensitive header or key the value goes whatever it looks like.
        assert_eq!(
            redact("Authorization: Bearer abcdefgh"),
            "Authorization: Bearer [redacted]"
        );
        assert_eq!(redact("token=Bearer abcdefgh"), "token=[redacted]");
    }

    #[test]
    fn cookie_headers_are_redacted_to_the_end_of_the_line() {
        assert_eq!(
            redact("Cookie: a=b; c=d\nnext line"),
            "Cookie: [redacted]\nnext line"
        );
        assert_eq!(
            redact("set-cookie:id=1; Path=/; HttpOnly\r\nX: y"),
            "set-cookie:[redacted]\r\nX: y"
        );
    }

    #[test]
    fn url_userinfo_is_redacted() {
        assert_eq!(
            redact("git clone https://user:p@ss@github.com/o/r.git"),
            "git clone https://[redacted]@github.com/o/r.git"
        );
        assert_eq!(
            redact("https://ghp_token_value@host/x?access_token=abc#f"),
            "https://[redacted]@host/x?access_token=[redacted]"
        );
        assert_eq!(redact("ssh://git@host:22/x"), "ssh://[redacted]@host:22/x");
    }

    #[test]
    fn known_token_shapes_are_redacted() {
        for token in [
            "sk-abcdefghijklmnop1234567890",
            "sk-proj-Abc_def-1234567890abcdefghij",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "gho_abcdefghijklmnopqrstuvwxyz0123456789",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
            "xoxb-1234567890-abcdefghij",
            "xoxp-12345-67890-abcdef",
            "AKIAIOSFODNN7EXAMPLE",
            "ASIAIOSFODNN7EXAMPLE",
            "glpat-abcdefghij0123456789",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl",
            "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.",
        ] {
            assert_eq!(
                redact(&format!("got {token}, ok")),
                "got [redacted], ok",
                "{token}"
            );
        }
    }

    #[test]
    fn a_url_scheme_is_not_an_assignment() {
        // Found by proptest: `token.https:` once read as a key whose value changed length
        // after the userinfo was redacted, so a second redaction differed from the first.
        let once = redact("Bearer token.https://&@");
        assert_eq!(once, "Bearer token.https://[redacted]@");
        assert_eq!(redact(&once), once);
        assert_eq!(redact("token://host/x"), "token://host/x");
        assert_eq!(redact("a://b://x-token:abc123@h"), "a://b://[redacted]@h");
        // A URL inside a redacted value must not hide the assignment after it.
        let once = redact("token=https://&token=abc");
        assert_eq!(once, "token=[redacted]&token=[redacted]");
        let once = redact("https://ghp_abc123XYZ456def789sk-token: /");
        assert_eq!(redact(&once), once);
        assert_eq!(
            redact("https://x-access-token:ghs_abc@github.com/o/r.git?token=1"),
            "https://[redacted]@github.com/o/r.git?token=[redacted]"
        );
        assert_eq!(
            redact("sk-proj-abc123def456ghi789://u@h"),
            "[redacted]://u@h"
        );
    }

    #[test]
    fn the_first_byte_table_covers_every_word_trigger() {
        use super::{STARTS_A_WORD_TRIGGER, TOKEN_PREFIXES};
        let words = ["cookie", "set-cookie", "bearer", "basic"];
        let firsts = words
            .iter()
            .flat_map(|w| [w.as_bytes()[0], w.as_bytes()[0].to_ascii_uppercase()])
            .chain(TOKEN_PREFIXES.iter().map(|t| t.as_bytes()[0]));
        for first in firsts {
            assert!(
                STARTS_A_WORD_TRIGGER[usize::from(first)],
                "{}",
                char::from(first)
            );
        }
        let listed = STARTS_A_WORD_TRIGGER.iter().filter(|&&on| on).count();
        assert_eq!(listed, 10);
    }
}
