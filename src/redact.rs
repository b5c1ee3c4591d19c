//! Redaction (SPEC §5): the only way anything from a secret-bearing source reaches disk or
//! stdout.
//!
//! It owns three kinds of rewriting, each replacing text with a fixed marker:
//! - exact secret values in all their encoded forms → `[redacted]`
//!   ([`Redactor::scrub_secrets_str`], [`Redactor::scrub_secrets_value`]);
//! - the string rules: credentials in `key=value` text, headers, URLs and well-known token
//!   shapes → `[redacted]`, host-local paths → `[host-path]` ([`Redactor::redact_str`]);
//! - the key rules on JSON trees: whole values under sensitive keys ([`Redactor::redact_value`],
//!   [`is_sensitive_key`]).
//!
//! Invariants, for any input: every pass is a single left-to-right scan that never rescans its
//! own output, so it terminates and is linear in the input; the markers are never matched again,
//! so redaction is idempotent; trees are walked with an explicit stack, so depth cannot overflow;
//! keys stay unique, so a redacted tree always serializes to valid JSON. The one case no
//! marker-based scheme can cover: a secret made of marker fragments (`redacted][`) that
//! straddles a marker already present in the input is left in place.
//!
//! It must not decide *which* values are secret (callers register them) and does no I/O.

use aho_corasick::{AhoCorasick, Input, MatchKind};
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;
use regex::Regex;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::sync::OnceLock;

/// What a secret or credential is replaced with.
pub const REDACTED: &str = "[redacted]";
/// What a host-local path prefix is replaced with.
pub const HOST_PATH: &str = "[host-path]";
/// Secrets shorter than this many characters are not registered (they would match prose).
pub const MIN_SECRET_CHARS: usize = 8;

/// The markers, which every pass leaves alone. Secret matching treats them as patterns that
/// replace to themselves, so a secret such as `redacted` cannot eat into one.
const MARKERS: [&str; 2] = [REDACTED, HOST_PATH];

/// Passes of the secret scrub when a registered form could overlap a marker (it contains `[`
/// or `]`, or is part of a marker). Only such contrived secrets ever need more than one.
const MAX_SETTLE_PASSES: usize = 8;

/// Collected secrets and host paths, applied to strings and JSON trees.
#[derive(Debug, Default, Clone)]
pub struct Redactor {
    /// Registered secret values, deduplicated, in registration order.
    secrets: Vec<String>,
    /// Registered host path prefixes, without a trailing `/`, longest first.
    host_paths: Vec<String>,
    /// The search over every form of every secret, built on first use after a change.
    matcher: OnceLock<SecretMatcher>,
}

impl Redactor {
    /// An empty redactor (still applies the pattern rules).
    pub fn new() -> Self {
        Redactor::default()
    }

    /// Register an exact secret value (ignored when shorter than 8 chars, a boolean or a number).
    /// A value with surrounding whitespace also registers its trimmed form.
    pub fn add_secret(&mut self, value: &str) {
        let mut added = false;
        for candidate in [value, value.trim()] {
            if qualifies_as_secret(candidate) && !self.secrets.iter().any(|s| s == candidate) {
                self.secrets.push(candidate.to_string());
                added = true;
            }
        }
        if added {
            self.matcher = OnceLock::new();
        }
    }

    /// Register a host-local path prefix to become `[host-path]`. Only absolute paths count;
    /// `""` and `/` are ignored and trailing slashes are dropped.
    pub fn add_host_path(&mut self, path: &str) {
        let path = path.trim_end_matches('/');
        if !path.starts_with('/') || self.host_paths.iter().any(|p| p == path) {
            return;
        }
        self.host_paths.push(path.to_string());
        self.host_paths
            .sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    }

    /// Only the exact secret values (all their forms) → `[redacted]`.
    pub fn scrub_secrets_str(&self, s: &str) -> String {
        self.scrub(s).into_owned()
    }

    /// Only the exact secret values, on every string and key of the tree.
    pub fn scrub_secrets_value(&self, v: &mut Value) {
        if !self.secrets.is_empty() {
            self.walk(v, Rules::SecretsOnly);
        }
    }

    /// The full string rules: secrets, host paths, `key=value` assignments, credential patterns.
    pub fn redact_str(&self, s: &str) -> String {
        self.redact(s).into_owned()
    }

    /// The full rules on a JSON tree (an envelope root: its top-level `authorization` object is
    /// structural).
    pub fn redact_value(&self, v: &mut Value) {
        self.walk(v, Rules::Full);
    }

    /// The secret search, or `None` while no secret is registered.
    fn matcher(&self) -> Option<&SecretMatcher> {
        if self.secrets.is_empty() {
            return None;
        }
        Some(
            self.matcher
                .get_or_init(|| SecretMatcher::build(&self.secrets)),
        )
    }

    fn scrub<'a>(&self, s: &'a str) -> Cow<'a, str> {
        self.settle(s, |t| self.scrub_once(t))
    }

    fn redact<'a>(&self, s: &'a str) -> Cow<'a, str> {
        self.settle(s, |t| self.redact_once(t))
    }

    /// Secrets first, so no later rule splits one. Paths next: a path never starts right after
    /// `]`, so markers inserted later cannot expose a new one. Assignments before credential
    /// shapes, so `token: Bearer x` is read as one value; and the assignment rule's decisions
    /// never depend on what the shape rule later puts inside a value. Together these make a
    /// second run a no-op.
    fn redact_once<'a>(&self, s: &'a str) -> Cow<'a, str> {
        let s = self.scrub_once(s);
        let s = chain(s, |t| self.scrub_paths(t));
        let s = chain(s, scrub_assignments);
        chain(s, scrub_credentials)
    }

    /// Run `pass` once, or to a fixed point when a secret form could overlap a marker.
    fn settle<'a, F>(&self, s: &'a str, pass: F) -> Cow<'a, str>
    where
        F: for<'b> Fn(&'b str) -> Cow<'b, str>,
    {
        let mut current = pass(s);
        if !self.matcher().is_some_and(|m| m.touches_markers) {
            return current;
        }
        for _ in 1..MAX_SETTLE_PASSES {
            let next = match pass(&current) {
                Cow::Borrowed(_) => break,
                Cow::Owned(next) => next,
            };
            if next == *current {
                break;
            }
            current = Cow::Owned(next);
        }
        current
    }

    fn scrub_once<'a>(&self, s: &'a str) -> Cow<'a, str> {
        match self.matcher() {
            Some(matcher) => matcher.replace(s),
            None => Cow::Borrowed(s),
        }
    }

    /// Host path prefixes and `/home/<user>`, `/Users/<user>`, `/root` → `[host-path]`.
    fn scrub_paths<'a>(&self, s: &'a str) -> Cow<'a, str> {
        let bytes = s.as_bytes();
        let mut edits = Edits::new(s);
        let mut pos = 0;
        while let Some(off) = bytes[pos..].iter().position(|&b| b == b'/') {
            let at = pos + off;
            pos = at + 1;
            if at < edits.done || !path_may_start(s, at) {
                continue;
            }
            if let Some(len) = self.path_prefix_len(&s[at..]) {
                edits.replace(at, at + len, HOST_PATH);
                pos = at + len;
            }
        }
        edits.finish()
    }

    /// Length of the longest host-local prefix of `rest` (which starts with `/`), if any.
    fn path_prefix_len(&self, rest: &str) -> Option<usize> {
        let registered = self
            .host_paths
            .iter()
            .filter(|p| rest.starts_with(p.as_str()) && path_ends_at(rest, p.len()))
            .map(|p| p.len())
            .max();
        let generic = ["/home/", "/Users/"]
            .iter()
            .find_map(|prefix| {
                let user = rest.strip_prefix(prefix)?;
                let len = name_run_len(user);
                (len > 0).then_some(prefix.len() + len)
            })
            .or_else(|| (rest.starts_with("/root") && path_ends_at(rest, 5)).then_some(5));
        registered.max(generic)
    }

    fn walk(&self, root: &mut Value, rules: Rules) {
        let mut stack: Vec<(&mut Value, bool)> = vec![(root, true)];
        while let Some((value, at_root)) = stack.pop() {
            match value {
                Value::String(s) => {
                    let changed = match rules {
                        Rules::Full => self.redact(s),
                        Rules::SecretsOnly => self.scrub(s),
                    };
                    if let Cow::Owned(new) = changed {
                        *s = new;
                    }
                }
                Value::Array(items) => stack.extend(items.iter_mut().map(|item| (item, false))),
                Value::Object(map) => {
                    self.scrub_keys(map);
                    for (key, child) in map.iter_mut() {
                        if rules == Rules::Full {
                            // The envelope's own `authorization` object holds the allowlist, not a
                            // credential; its members still get every rule.
                            let structural = at_root && key == "authorization" && child.is_object();
                            if !structural && is_sensitive_key(key) {
                                redact_whole(child);
                                continue;
                            }
                        }
                        stack.push((child, false));
                    }
                }
                Value::Null | Value::Bool(_) | Value::Number(_) => {}
            }
        }
    }

    /// Scrub secrets out of the keys of one object, keeping key order. Two keys that scrub to
    /// the same text stay distinct (`[redacted]`, `[redacted]~2`, …): a map cannot hold both.
    fn scrub_keys(&self, map: &mut Map<String, Value>) {
        if self.secrets.is_empty() || !map.keys().any(|k| matches!(self.scrub(k), Cow::Owned(_))) {
            return;
        }
        let old = std::mem::take(map);
        for (key, value) in old {
            let scrubbed = self.scrub(&key).into_owned();
            let mut key = scrubbed.clone();
            let mut n = 2;
            while map.contains_key(&key) {
                key = format!("{scrubbed}~{n}");
                n += 1;
            }
            map.insert(key, value);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rules {
    SecretsOnly,
    Full,
}

/// Replace a value under a sensitive key. Booleans and null carry no secret and are kept.
fn redact_whole(value: &mut Value) {
    match value {
        Value::Null | Value::Bool(_) => {}
        Value::String(s) if s == REDACTED => {}
        _ => dismantle(std::mem::replace(
            value,
            Value::String(REDACTED.to_string()),
        )),
    }
}

/// Drop a tree without recursion (serde_json's own drop recurses once per level).
fn dismantle(value: Value) {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// Apply `pass` to the result of an earlier pass, keeping it borrowed when nothing changes.
fn chain<'a>(prev: Cow<'a, str>, pass: impl for<'b> Fn(&'b str) -> Cow<'b, str>) -> Cow<'a, str> {
    match prev {
        Cow::Borrowed(s) => pass(s),
        Cow::Owned(s) => {
            let next = match pass(&s) {
                Cow::Borrowed(_) => None,
                Cow::Owned(next) => Some(next),
            };
            Cow::Owned(next.unwrap_or(s))
        }
    }
}

/// Builds the output of one pass: the input with some non-overlapping ranges replaced, in order.
struct Edits<'a> {
    input: &'a str,
    out: String,
    /// End of the last replaced range; nothing before it may be replaced again.
    done: usize,
    changed: bool,
}

impl<'a> Edits<'a> {
    fn new(input: &'a str) -> Self {
        Edits {
            input,
            out: String::new(),
            done: 0,
            changed: false,
        }
    }

    fn replace(&mut self, start: usize, end: usize, with: &str) {
        if !self.changed {
            self.out.reserve(self.input.len());
        }
        self.out.push_str(&self.input[self.done..start]);
        self.out.push_str(with);
        self.done = end;
        self.changed = true;
    }

    fn finish(mut self) -> Cow<'a, str> {
        if !self.changed {
            return Cow::Borrowed(self.input);
        }
        self.out.push_str(&self.input[self.done..]);
        Cow::Owned(self.out)
    }
}

// ---------------------------------------------------------------------------------------------
// Exact secrets
// ---------------------------------------------------------------------------------------------

/// One leftmost-longest search over every form of every secret, plus the markers.
#[derive(Debug, Clone)]
struct SecretMatcher {
    /// `MARKERS` first, then the forms, longest first.
    patterns: Vec<String>,
    /// `None` only if the automaton could not be built (absurdly many patterns); the slow
    /// search over `patterns` is used instead, never nothing.
    automaton: Option<AhoCorasick>,
    /// A form that could overlap a marker: scrubbing runs to a fixed point (see `settle`).
    touches_markers: bool,
}

impl SecretMatcher {
    fn build(secrets: &[String]) -> Self {
        let mut forms: Vec<String> = secrets.iter().flat_map(|s| secret_forms(s)).collect();
        forms.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        forms.dedup();
        forms.retain(|f| !MARKERS.contains(&f.as_str()));
        let touches_markers = forms
            .iter()
            .any(|f| f.contains(['[', ']']) || MARKERS.iter().any(|m| m.contains(f.as_str())));
        let patterns: Vec<String> = MARKERS.iter().map(|m| m.to_string()).chain(forms).collect();
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&patterns)
            .ok();
        SecretMatcher {
            patterns,
            automaton,
            touches_markers,
        }
    }

    fn replace<'a>(&self, s: &'a str) -> Cow<'a, str> {
        let mut edits = Edits::new(s);
        let mut pos = 0;
        while let Some((start, end, pattern)) = self.find(s, pos) {
            if pattern >= MARKERS.len() {
                edits.replace(start, end, REDACTED);
            }
            pos = end;
        }
        edits.finish()
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

fn qualifies_as_secret(value: &str) -> bool {
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
fn secret_forms(secret: &str) -> Vec<String> {
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
struct JsonStyle {
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
fn json_escape(s: &str, style: JsonStyle) -> String {
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
fn percent_encode(s: &str, safe: &str, plus_for_space: bool, upper: bool) -> String {
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

// ---------------------------------------------------------------------------------------------
// Sensitive keys
// ---------------------------------------------------------------------------------------------

/// The sensitive terms, in `snake_case`. A key matches when a run of its segments, joined by
/// `_` or run together, equals one of them (or its plural, except plain `tokens`).
const SENSITIVE_TERMS: [&str; 14] = [
    "authorization",
    "cookie",
    "set_cookie",
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "private_key",
    "credential",
    "client_secret",
    "access_token",
    "refresh_token",
];

/// Contract keys whose values are environment variable NAMES, never secrets.
const EXEMPT_KEYS: [&str; 4] = ["token_env", "url_env", "cwd_env", "secret_env"];

/// A segment right after a matched term that makes the key describe the secret rather than hold
/// it: `token_count`, `password_length`, `token_type`.
const DESCRIPTOR_SEGMENTS: [&str; 16] = [
    "count",
    "counts",
    "len",
    "length",
    "limit",
    "limits",
    "size",
    "type",
    "kind",
    "usage",
    "budget",
    "ttl",
    "expiry",
    "expires",
    "expiration",
    "estimate",
];

/// Whether `key` names a credential (SPEC §5), matched on whole segments: `x-api-key`,
/// `github_token`, `passwordHash`, `Set-Cookie`, `clientSecret`, `credentials` are sensitive;
/// `sandbox_session_id`, `tokenizer_model`, `max_tokens`, `token_count`, `token_env` are not.
pub fn is_sensitive_key(key: &str) -> bool {
    if EXEMPT_KEYS.contains(&key) || !mentions_a_stem(key) {
        return false;
    }
    let segments = key_segments(key);
    for start in 0..segments.len() {
        for end in start..segments.len().min(start + 4) {
            let run = &segments[start..=end];
            if !is_term(&run.join("_")) && !is_term(&run.concat()) {
                continue;
            }
            let described = segments
                .get(end + 1)
                .is_some_and(|next| DESCRIPTOR_SEGMENTS.contains(&next.as_str()));
            if !described {
                return true;
            }
        }
    }
    false
}

fn is_term(run: &str) -> bool {
    let exact = |r: &str| {
        SENSITIVE_TERMS
            .iter()
            .any(|t| *t == r || (t.contains('_') && t.replace('_', "") == r))
    };
    // Plurals hold credentials too (`credentials`, `api_keys`), except `tokens`, which in LLM
    // payloads is a count (`max_tokens`).
    exact(run)
        || run
            .strip_suffix('s')
            .is_some_and(|r| r != "token" && exact(r))
}

/// A cheap test that `key` could match at all: every term contains one of these stems.
fn mentions_a_stem(key: &str) -> bool {
    const STEMS: [&[u8]; 7] = [
        b"auth",
        b"cookie",
        b"pass",
        b"secret",
        b"token",
        b"key",
        b"credential",
    ];
    let mut squashed = [0u8; 256];
    let mut len = 0;
    for b in key.bytes().filter(u8::is_ascii_alphanumeric) {
        if len == squashed.len() {
            return true; // too long to squash here; let the full check decide
        }
        squashed[len] = b.to_ascii_lowercase();
        len += 1;
    }
    let squashed = &squashed[..len];
    STEMS
        .iter()
        .any(|stem| squashed.windows(stem.len()).any(|w| w == *stem))
}

/// Lowercase segments of a key: split on anything but ASCII letters and digits, and at
/// camelCase boundaries (`passwordHash` → `password`, `hash`; `APIKey` → `api`, `key`).
fn key_segments(key: &str) -> Vec<String> {
    let chars: Vec<char> = key.chars().collect();
    let mut segments = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            if !current.is_empty() {
                segments.push(std::mem::take(&mut current));
            }
            continue;
        }
        if c.is_ascii_uppercase() && !current.is_empty() {
            let prev = chars[i - 1];
            let next_is_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            let boundary = prev.is_ascii_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_ascii_uppercase() && next_is_lower);
            if boundary {
                segments.push(std::mem::take(&mut current));
            }
        }
        current.push(c.to_ascii_lowercase());
    }
    if !current.is_empty() {
        segments.push(current);
    }
    segments
}

// ---------------------------------------------------------------------------------------------
// `key=value` and `key: value` assignments in text
// ---------------------------------------------------------------------------------------------

/// Keys longer than this are read from their last this-many characters.
const MAX_KEY_BYTES: usize = 64;

/// HTTP authentication schemes kept in front of a redacted credential.
const AUTH_SCHEMES: [&str; 6] = ["bearer", "basic", "digest", "token", "negotiate", "ntlm"];

/// Values of sensitive keys in `key=value` / `key: value` text → `[redacted]`. Only an explicit
/// separator counts, so prose ("the token was rejected") stays as it is.
fn scrub_assignments(s: &str) -> Cow<'_, str> {
    let bytes = s.as_bytes();
    let mut edits = Edits::new(s);
    let mut floor = 0; // nothing before this can be part of a key (it was a value)
    let mut authorities = Authorities::new(s);
    let mut pos = 0;
    while let Some(off) = bytes[pos..].iter().position(|&b| b == b':' || b == b'=') {
        let sep = pos + off;
        pos = sep + 1;
        // `scheme://` and a `user:pass@host` authority are URLs, which `scrub_credentials` owns.
        if s[sep..].starts_with("://") || authorities.contain(sep) {
            continue;
        }
        let Some(key) = key_before(s, sep, floor) else {
            continue;
        };
        if !is_sensitive_key(&s[key.start..key.end]) {
            continue;
        }
        let mut start = sep + 1;
        while matches!(bytes.get(start), Some(b' ' | b'\t')) {
            start += 1;
        }
        let Some(value) = value_at(s, start) else {
            continue;
        };
        let inner = &s[value.inner.0..value.inner.1];
        // A bare `name:value` is too often a namespaced id (`secrets:list`) to redact blindly.
        // The test ignores length: a later pass may put a longer marker inside the value, and
        // the decision must not change when the output is redacted again.
        let bare_colon = bytes[sep] == b':' && !key.quoted && start == sep + 1 && !value.quoted;
        if bare_colon && !has_credential_traits(inner) {
            continue;
        }
        let keep_scheme = s[key.start..key.end]
            .to_ascii_lowercase()
            .contains("authorization");
        if let Some(with) = value_replacement(inner, keep_scheme) {
            edits.replace(value.inner.0, value.inner.1, &with);
        }
        authorities.restart_at(value.end);
        floor = value.end;
        pos = value.end;
    }
    edits.finish()
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
            upcoming: s.find("://"),
            current: (0, 0),
        }
    }

    /// Whether `at` lies inside an authority; `at` never decreases between calls.
    fn contain(&mut self, at: usize) -> bool {
        while let Some(colon) = self.upcoming.filter(|&colon| colon <= at) {
            let start = colon + 3;
            self.current = (start, start + authority_len(&self.s[start..]));
            self.upcoming = self.s[start..].find("://").map(|i| start + i);
        }
        self.current.0 <= at && at < self.current.1
    }

    /// Forget any URL that starts before `at`: that text was a value, now redacted, and a
    /// `://` inside it must not make what follows look like an authority. Searches again only
    /// past a `://` it has already found, so the total work stays linear.
    fn restart_at(&mut self, at: usize) {
        self.current = (0, 0);
        if self.upcoming.is_some_and(|colon| colon < at) {
            self.upcoming = self.s[at..].find("://").map(|i| at + i);
        }
    }
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

/// The value starting at `start`: a quoted string (`"…"` with escapes, `\"…\"`, `'…'`) up to its
/// closing quote on the same line, or an unquoted run up to whitespace, `&`, `,`, `;` or a quote.
/// An unquoted auth scheme takes its credential with it (`Bearer abc`).
fn value_at(s: &str, start: usize) -> Option<ValueSpan> {
    let b = s.as_bytes();
    let rest = &s[start..];
    let quoted = |open: usize, close: Option<usize>, close_len: usize| match close {
        Some(close) => ValueSpan {
            inner: (start + open, close),
            end: close + close_len,
            quoted: true,
        },
        None => {
            let end = unquoted_end(s, start + open);
            ValueSpan {
                inner: (start + open, end),
                end,
                quoted: true,
            }
        }
    };
    let span = if rest.starts_with('"') {
        let mut i = start + 1;
        let mut close = None;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'"' => {
                    close = Some(i);
                    break;
                }
                b'\n' | b'\r' => break,
                _ => i += 1,
            }
        }
        quoted(1, close, 1)
    } else if rest.starts_with("\\\"") {
        let line = line_end(s, start + 2);
        let close = s[start + 2..line].find("\\\"").map(|i| start + 2 + i);
        quoted(2, close, 2)
    } else if rest.starts_with('\'') {
        let line = line_end(s, start + 1);
        let close = s[start + 1..line].find('\'').map(|i| start + 1 + i);
        quoted(1, close, 1)
    } else if rest.starts_with('=') {
        return None; // `==`: a comparison, not an assignment
    } else {
        let mut end = unquoted_end(s, start);
        let word = &s[start..end];
        if AUTH_SCHEMES.iter().any(|a| word.eq_ignore_ascii_case(a)) {
            let mut next = end;
            while matches!(b.get(next), Some(b' ' | b'\t')) {
                next += 1;
            }
            let credential_end = unquoted_end(s, next);
            if next > end && credential_end > next {
                end = credential_end;
            }
        }
        ValueSpan {
            inner: (start, end),
            end,
            quoted: false,
        }
    };
    (span.inner.1 > span.inner.0).then_some(span)
}

fn line_end(s: &str, from: usize) -> usize {
    s[from..].find(['\n', '\r']).map_or(s.len(), |i| from + i)
}

/// End of an unquoted value: whitespace, `&`, `,`, `;`, a quote, or a backslash-escaped quote.
fn unquoted_end(s: &str, start: usize) -> usize {
    let b = s.as_bytes();
    for (i, c) in s[start..].char_indices() {
        let at = start + i;
        let stop = c.is_whitespace()
            || matches!(c, '&' | ',' | ';' | '"' | '\'')
            || (c == '\\' && b.get(at + 1) == Some(&b'"'));
        if stop {
            return at;
        }
    }
    s.len()
}

/// What replaces a sensitive value, or `None` when it is already redacted.
fn value_replacement(inner: &str, keep_scheme: bool) -> Option<String> {
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
        let prefix_len = inner.len() - after.len();
        return Some(format!("{}{REDACTED}", &inner[..prefix_len]));
    }
    Some(REDACTED.to_string())
}

/// At least 8 characters with [`has_credential_traits`]: random credentials nearly always
/// qualify, prose words ("authentication") do not.
fn looks_like_credential(s: &str) -> bool {
    s.chars().count() >= MIN_SECRET_CHARS && has_credential_traits(s)
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

/// The start of every shape-based rule. Each alternative is short and bounded; the variable
/// part after it is read by hand, so the scan stays linear on any input.
fn credential_triggers() -> &'static Regex {
    static TRIGGERS: OnceLock<Regex> = OnceLock::new();
    TRIGGERS.get_or_init(|| {
        Regex::new(concat!(
            r"(?-u:\b)(?i-u:set-cookie|cookie)[ \t]*:",
            r"|(?-u:\b)(?i-u:bearer|basic)[ \t]+",
            // Before the URL scheme, which could otherwise start at the same place.
            r"|(?-u:\b)(?:sk-|gh[pousr]_|github_pat_|xox[abposr]-|A[KS]IA|glpat-|eyJ)",
            r"|[A-Za-z][A-Za-z0-9+.\-]{0,31}://",
        ))
        .expect("the credential trigger pattern is a valid regex")
    })
}

/// `Cookie:`/`Set-Cookie:` values (to the end of the line), URL userinfo, `Bearer`/`Basic`
/// credentials, and well-known token shapes → `[redacted]`.
fn scrub_credentials(s: &str) -> Cow<'_, str> {
    let triggers = credential_triggers();
    let mut edits = Edits::new(s);
    let mut pos = 0;
    while pos < s.len() {
        let Some(m) = triggers.find_at(s, pos) else {
            break;
        };
        let trigger = m.as_str();
        let (edit, resume) = if trigger.ends_with("://") {
            userinfo(s, m.end())
        } else if trigger.ends_with(':') {
            header_value(s, m.end())
        } else if trigger.ends_with([' ', '\t']) {
            auth_credential(s, m.end())
        } else {
            token_shape(s, m.start(), trigger)
        };
        if let Some((start, end)) = edit {
            edits.replace(start, end, REDACTED);
        }
        pos = resume.max(m.end());
    }
    edits.finish()
}

/// A range to replace (if any) and where the scan resumes.
type Verdict = (Option<(usize, usize)>, usize);

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

// ---------------------------------------------------------------------------------------------
// Host-local paths
// ---------------------------------------------------------------------------------------------

/// A character that continues a file name (so `/work/main` is not a prefix of `/work/mainframe`).
fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '~' | '+' | '@' | '%')
}

/// A path starts at `at` (a `/`) unless it continues a name (`a/home/x`) or follows a marker
/// (`[host-path]/root` must stay as it is for redaction to be idempotent).
fn path_may_start(s: &str, at: usize) -> bool {
    match s[..at].chars().next_back() {
        None => true,
        Some(prev) => !is_name_char(prev) && prev != ']',
    }
}

/// Whether a prefix of `rest` of length `len` ends at a path boundary: end of text, `/`, or a
/// character that cannot continue the name. Trailing dots are sentence punctuation (`/root.`).
/// `[` continues the name: later passes turn name characters into `[redacted]`
/// (`/root.AKIA…` → `/root.[redacted]`), and a second run must decide as the first did.
fn path_ends_at(rest: &str, len: usize) -> bool {
    match rest[len..].trim_start_matches('.').chars().next() {
        None => true,
        Some(c) => c == '/' || (!is_name_char(c) && c != '['),
    }
}

/// Length of the user-name segment at the start of `s`, without trailing dots.
fn name_run_len(s: &str) -> usize {
    let end = s.find(|c: char| !is_name_char(c)).unwrap_or(s.len());
    s[..end].trim_end_matches('.').len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRET: &str = "s3cr3t-Value_42";

    fn with_secret(secret: &str) -> Redactor {
        let mut r = Redactor::new();
        r.add_secret(secret);
        r
    }

    fn redact(s: &str) -> String {
        Redactor::new().redact_str(s)
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

    #[test]
    fn secrets_are_scrubbed_from_keys_without_merging_them() {
        let mut r = Redactor::new();
        r.add_secret("key-secret-one");
        r.add_secret("key-secret-two");
        let mut v =
            json!({"key-secret-one": 1, "key-secret-two": 2, "[redacted]~2": 3, "z": [SECRET]});
        r.scrub_secrets_value(&mut v);
        assert_eq!(
            v,
            json!({"[redacted]": 1, "[redacted]~2": 2, "[redacted]~2~2": 3, "z": [SECRET]})
        );
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["[redacted]", "[redacted]~2", "[redacted]~2~2", "z"]);
    }

    #[test]
    fn scrub_secrets_value_leaves_everything_but_secrets_alone() {
        let r = with_secret(SECRET);
        let mut v = json!({
            "password": "visible", "note": "Bearer abcdef123456", "path": "/home/alice/x",
            "deep": [{"s": format!("x{SECRET}x")}], "n": 12345678
        });
        r.scrub_secrets_value(&mut v);
        assert_eq!(
            v,
            json!({
                "password": "visible", "note": "Bearer abcdef123456", "path": "/home/alice/x",
                "deep": [{"s": "x[redacted]x"}], "n": 12345678
            })
        );
    }

    #[test]
    fn sensitive_keys_match_on_whole_segments() {
        for key in [
            "authorization",
            "Authorization",
            "cookie",
            "Set-Cookie",
            "set_cookie",
            "password",
            "passwd",
            "secret",
            "token",
            "api_key",
            "apikey",
            "APIKey",
            "x-api-key",
            "X-API-KEY",
            "private_key",
            "privateKey",
            "credential",
            "credentials",
            "client_secret",
            "clientSecret",
            "access_token",
            "refresh_token",
            "github_token",
            "GITHUB_TOKEN",
            "passwordHash",
            "db.password",
            "secrets",
            "passwords",
            "cookies",
            "api_keys",
            "access_tokens",
            "XAuthToken",
            "pass_word",
            "proxy-authorization",
            "secret_key",
        ] {
            assert!(is_sensitive_key(key), "{key} should be sensitive");
        }
        for key in [
            "sandbox_session_id",
            "tokenizer_model",
            "tokenizer",
            "max_tokens",
            "tokens",
            "prompt_tokens",
            "token_count",
            "token_type",
            "password_length",
            "keyboard",
            "primary_key",
            "key",
            "passage",
            "secretary",
            "author",
            "token_env",
            "url_env",
            "cwd_env",
            "secret_env",
            "authorized",
            "",
            "_-_",
            "monkey",
        ] {
            assert!(!is_sensitive_key(key), "{key} should not be sensitive");
        }
    }

    #[test]
    fn values_under_sensitive_keys_are_replaced_whole() {
        let mut v = json!({
            "input": {
                "headers": {"Authorization": "Bearer x", "Cookie": ["a", "b"], "x-api-key": 42},
                "credentials": {"user": "bob", "pass": "x"},
                "password": null, "token": false, "max_tokens": 100, "token_count": 3,
                "tokenizer_model": "cl100k", "sandbox_session_id": "s-1"
            }
        });
        Redactor::new().redact_value(&mut v);
        assert_eq!(
            v,
            json!({
                "input": {
                    "headers": {"Authorization": "[redacted]", "Cookie": "[redacted]", "x-api-key": "[redacted]"},
                    "credentials": "[redacted]",
                    "password": null, "token": false, "max_tokens": 100, "token_count": 3,
                    "tokenizer_model": "cl100k", "sandbox_session_id": "s-1"
                }
            })
        );
    }

    #[test]
    fn the_root_authorization_object_is_structural_but_its_members_are_not() {
        let mut v = json!({
            "authorization": {
                "allowed_tools": ["workspace.read"],
                "principal": {"id": "bob", "token": "abc"},
                "capability": "read"
            },
            "metadata": {"authorization": {"x": 1}},
            "dispatcher": {"endpoint": {"token_env": "GH_TOKEN", "url_env": "URL"}},
            "sandbox_env": {"secret_env": ["API_TOKEN", "DB_PASSWORD"]}
        });
        Redactor::new().redact_value(&mut v);
        assert_eq!(
            v,
            json!({
                "authorization": {
                    "allowed_tools": ["workspace.read"],
                    "principal": {"id": "bob", "token": "[redacted]"},
                    "capability": "read"
                },
                "metadata": {"authorization": "[redacted]"},
                "dispatcher": {"endpoint": {"token_env": "GH_TOKEN", "url_env": "URL"}},
                "sandbox_env": {"secret_env": ["API_TOKEN", "DB_PASSWORD"]}
            })
        );
        let mut not_an_object = json!({"authorization": "Bearer abc"});
        Redactor::new().redact_value(&mut not_an_object);
        assert_eq!(not_an_object, json!({"authorization": "[redacted]"}));
    }

    #[test]
    fn the_upstream_example_bridge_is_unchanged() {
        // The parts of upstream's example bridge that a careless rule would touch.
        let original = json!({
            "schema": "wp-codebox/parent-tool-bridge/v1",
            "allowed_tools": ["workspace.read"],
            "dispatcher": {
                "command": {"argv": ["wp-codebox-parent-dispatch"]},
                "endpoint": {"url_env": "WP_CODEBOX_PARENT_TOOL_URL", "method": "POST",
                             "token_env": "WP_CODEBOX_PARENT_TOOL_TOKEN"},
                "timeout_ms": 30000
            },
            "sandbox_env": {
                "mode": "metadata-only",
                "variables": {"bridge_ref": "WP_CODEBOX_PARENT_TOOL_BRIDGE_REF"},
                "secret_env": [],
                "notes": "It must not include parent credentials or tool result payloads."
            },
            "authorization": {
                "mode": "allowlist",
                "failure_status": "denied",
                "notes": "returns denied for authorization failures without attempting fallback"
            },
            "redaction": {
                "transcript_artifact_refs": [],
                "notes": "Secret values, bearer tokens, cookies, and host-local paths stay out of envelopes and transcripts."
            },
            "metadata": {}
        });
        let mut v = original.clone();
        Redactor::new().redact_value(&mut v);
        assert_eq!(v, original);
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
    fn host_paths_are_replaced_at_path_boundaries_only() {
        let mut r = Redactor::new();
        r.add_host_path("/work/main/");
        r.add_host_path("/work");
        r.add_host_path("/");
        r.add_host_path("");
        r.add_host_path("relative/dir");
        assert_eq!(r.host_paths, ["/work/main", "/work"]);
        for (input, expected) in [
            ("/work/main/src/lib.rs", "[host-path]/src/lib.rs"),
            ("/work/mainframe/x", "[host-path]/mainframe/x"),
            ("cd /work/main.", "cd [host-path]."),
            ("file:///work/main", "file://[host-path]"),
            ("/srv/work/main", "/srv/work/main"),
            ("/home/alice/x/y.txt", "[host-path]/x/y.txt"),
            ("/Users/bob", "[host-path]"),
            ("(/root/.ssh/id_rsa)", "([host-path]/.ssh/id_rsa)"),
            ("/root", "[host-path]"),
            ("/rootfs/x /homepage", "/rootfs/x /homepage"),
            ("/root.AKIAIOSFODNN7EXAMPLE=", "/root.[redacted]="),
        ] {
            assert_eq!(r.redact_str(input), expected, "{input}");
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
    fn redaction_is_idempotent_on_mixed_text() {
        let mut r = with_secret(SECRET);
        r.add_host_path("/work/main");
        let text = format!(
            "Authorization: Bearer {SECRET}\nCookie: x={SECRET}\nurl=https://u:{SECRET}@h/?token=1 \
             /work/main/a /home/bob/.netrc sk-abcdefghijklmnop1234567890 password=\"q w\""
        );
        let once = r.redact_str(&text);
        assert!(!once.contains(SECRET));
        assert_eq!(r.redact_str(&once), once);
    }

    #[test]
    fn a_redacted_tree_is_valid_json_even_when_deep() {
        // Built by hand: `json!` would serialize `v` recursively at every level.
        let mut v = Value::String("leaf password=x".into());
        for i in 0..100_000 {
            v = if i % 2 == 0 {
                Value::Array(vec![v])
            } else {
                let mut map = Map::new();
                map.insert("password".into(), Value::String("p".into()));
                map.insert("next".into(), v);
                Value::Object(map)
            };
        }
        let mut r = with_secret("deep-secret-value");
        r.add_host_path("/work");
        r.redact_value(&mut v);
        r.scrub_secrets_value(&mut v);
        // Walk down to the leaf iteratively to check it, then take the tree apart without
        // recursion (serde_json's drop would recurse once per level).
        let mut cursor = &v;
        loop {
            match cursor {
                Value::Array(items) => cursor = &items[0],
                Value::Object(map) => {
                    assert_eq!(map["password"], json!("[redacted]"));
                    cursor = &map["next"];
                }
                leaf => {
                    assert_eq!(leaf, &json!("leaf password=[redacted]"));
                    break;
                }
            }
        }
        dismantle(v);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// Printable secrets of at least 8 characters, with quotes, backslashes, brackets,
        /// URL-special characters and non-ASCII in the mix.
        fn secret() -> impl Strategy<Value = String> {
            proptest::string::string_regex(r#"[ -~é€😀\[\]"\\%+/=&?@]{8,24}"#)
                .expect("valid strategy regex")
                .prop_filter("a secret inside a marker cannot be kept out of it", |s| {
                    qualifies_as_secret(s)
                        && s.trim().chars().count() >= MIN_SECRET_CHARS
                        && !MARKERS
                            .iter()
                            .any(|m| m.contains(s.as_str()) || m.contains(s.trim()))
                })
        }

        /// Text made of fragments that the rules react to, so the properties probe their edges.
        fn tricky_text() -> impl Strategy<Value = String> {
            let fragments = prop::sample::select(vec![
                "token",
                "password",
                "x-api-key",
                "max_tokens",
                "=",
                ":",
                ": ",
                " ",
                "\"",
                "'",
                "\\",
                "\\\"",
                "&",
                ",",
                ";",
                "\n",
                "/",
                "/home/",
                "alice",
                "/root",
                "/work/main",
                "/Users/",
                "Bearer ",
                "Basic ",
                "Cookie: ",
                "https://",
                "@",
                "?",
                "#",
                "sk-",
                "ghp_",
                "AKIA",
                "eyJ",
                ".",
                "abc123XYZ456def789",
                "IOSFODNN7EXAMPLE",
                "[redacted]",
                "[host-path]",
                "[",
                "]",
                "redacted",
                "é",
                "==",
                "authorization",
                "-",
                "_",
            ]);
            prop::collection::vec(fragments, 0..40).prop_map(|parts| parts.concat())
        }

        fn forms_of(secret: &str) -> Vec<String> {
            vec![
                secret.to_string(),
                json_escape(secret, JsonStyle::default()),
                percent_encode(secret, "-._~", false, true),
                STANDARD.encode(secret),
                URL_SAFE_NO_PAD.encode(secret),
            ]
        }

        fn json_tree() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                any::<String>().prop_map(Value::String),
                tricky_text().prop_map(Value::String),
            ];
            leaf.prop_recursive(4, 64, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                    prop::collection::vec((tricky_text(), inner), 0..6)
                        .prop_map(|entries| Value::Object(entries.into_iter().collect())),
                ]
            })
        }

        fn strings_in(v: &Value) -> Vec<String> {
            let mut out = Vec::new();
            let mut stack = vec![v];
            while let Some(v) = stack.pop() {
                match v {
                    Value::String(s) => out.push(s.clone()),
                    Value::Array(items) => stack.extend(items),
                    Value::Object(map) => {
                        out.extend(map.keys().cloned());
                        stack.extend(map.values());
                    }
                    _ => {}
                }
            }
            out
        }

        proptest! {
            #[test]
            fn a_planted_secret_never_survives_in_text(
                secret in secret(), before in any::<String>(), after in tricky_text(), which in 0usize..5
            ) {
                let mut r = Redactor::new();
                r.add_secret(&secret);
                let planted = &forms_of(&secret)[which];
                let text = format!("{before}{planted}{after}");
                for out in [r.scrub_secrets_str(&text), r.redact_str(&text)] {
                    prop_assert!(!out.contains(&secret), "{out:?}");
                    prop_assert!(!out.contains(planted.as_str()), "{out:?}");
                }
            }

            #[test]
            fn a_planted_secret_never_survives_in_a_tree(
                secret in secret(), tree in json_tree(), noise in tricky_text()
            ) {
                let mut r = Redactor::new();
                r.add_secret(&secret);
                let embedded = serde_json::to_string(&json!({ "k": secret.as_str() })).unwrap();
                let mut planted = json!({
                    "tree": tree,
                    "plain": format!("{noise}{secret}{noise}"),
                    secret.as_str(): "as a key",
                    "embedded": embedded,
                    "url": format!("https://h/?q={}", percent_encode(&secret, "-._~", false, true)),
                    "b64": STANDARD.encode(&secret),
                });
                let mut scrubbed = planted.clone();
                r.scrub_secrets_value(&mut scrubbed);
                r.redact_value(&mut planted);
                for v in [&scrubbed, &planted] {
                    for s in strings_in(v) {
                        for form in forms_of(&secret) {
                            prop_assert!(!s.contains(&form), "{form:?} in {s:?}");
                        }
                    }
                }
            }

            #[test]
            fn redaction_is_idempotent(
                secret in secret(), text in tricky_text(), any_text in any::<String>()
            ) {
                let mut r = Redactor::new();
                r.add_secret(&secret);
                r.add_secret("abc123XYZ456");
                r.add_host_path("/work/main");
                for input in [&text, &any_text, &format!("{text}{secret}{any_text}{text}")] {
                    let once = r.redact_str(input);
                    prop_assert_eq!(&r.redact_str(&once), &once);
                    let scrubbed = r.scrub_secrets_str(input);
                    prop_assert_eq!(&r.scrub_secrets_str(&scrubbed), &scrubbed);
                    let plain = Redactor::new().redact_str(input);
                    prop_assert_eq!(&Redactor::new().redact_str(&plain), &plain);
                }
            }

            #[test]
            fn a_redacted_tree_serializes_to_json_that_parses_back(
                tree in json_tree(), secret in secret()
            ) {
                let mut r = Redactor::new();
                r.add_secret(&secret);
                r.add_host_path("/work/main");
                let mut v = json!({ "authorization": tree.clone(), "rest": tree });
                r.redact_value(&mut v);
                let text = serde_json::to_string(&v).unwrap();
                let back: Value = serde_json::from_str(&text).unwrap();
                prop_assert_eq!(&back, &v);
                let mut again = v.clone();
                r.redact_value(&mut again);
                prop_assert_eq!(&again, &v);
            }

            #[test]
            fn no_input_panics(s in any::<String>(), key in any::<String>(), secret in any::<String>()) {
                let mut r = Redactor::new();
                r.add_secret(&secret);
                r.add_host_path(&secret);
                let _ = r.redact_str(&s);
                let _ = r.scrub_secrets_str(&s);
                let _ = is_sensitive_key(&key);
                let mut v = json!({ key.as_str(): s.as_str(), "x": [s.as_str()] });
                r.redact_value(&mut v);
                r.scrub_secrets_value(&mut v);
            }
        }
    }
}
