//! Redaction (SPEC §5): the only way anything from a secret-bearing source reaches disk or
//! stdout.
//!
//! It owns three kinds of rewriting, each replacing text with a fixed marker:
//! - exact secret values in all their encoded forms → `[redacted]` (`secrets.rs`;
//!   [`Redactor::scrub_secrets_str`], [`Redactor::scrub_secrets_value`]);
//! - the string rules: credentials in `key=value` text, headers, URLs and well-known token
//!   shapes → `[redacted]` (`text.rs`), host-local paths → `[host-path]` (`paths.rs`)
//!   ([`Redactor::redact_str`], and for a cut capture [`Redactor::redact_tail`] /
//!   [`Redactor::redact_head`]);
//! - the key rules on JSON: whole values under sensitive keys (`keys.rs`, [`is_sensitive_key`]),
//!   on a parsed tree ([`Redactor::redact_value`]) or on raw JSON text without building one
//!   (`json.rs` over the one pass in `json_pass.rs`, [`Redactor::redact_json`], or in pieces
//!   for a caller that streams them on: [`Redactor::redact_json_pieces`]).
//!
//! Invariants, for any input:
//! - **Linear in the input; each byte is examined a bounded number of times.** Every rule is
//!   one left-to-right pass that never rescans its own output: a look-ahead either consumes
//!   what it read or is answered from a cursor that the next question reuses, and questions
//!   come in increasing order. The bounds depend only on what was registered, never on the
//!   input: the secret search is one Aho–Corasick automaton; a registered host path is
//!   compared once per path start; and only a secret that contains `[`/`]` or is part of a
//!   marker makes the secret rule repeat, at most `MAX_SETTLE_PASSES` (8) times.
//! - The markers are never matched again, so redaction is idempotent.
//! - Trees and JSON texts are walked with an explicit stack, so depth cannot overflow; object
//!   keys get the same rules as strings and stay unique (`[redacted]`, `[redacted]~2`, …), so
//!   a redacted document is always valid JSON.
//! - A cut capture never keeps part of a secret: the whole capture is redacted first, then
//!   cut, and nothing from before the window's edge survives.
//!
//! The one case no marker-based scheme can cover: a secret made of marker fragments
//! (`redacted][`) that straddles a marker already present in the input is left in place.
//!
//! It must not decide *which* values are secret (callers register them) and does no I/O.

mod json;
mod json_pass;
mod keys;
mod paths;
mod secrets;
mod text;

pub use keys::is_sensitive_key;

pub use secrets::qualifies_as_secret;
use secrets::SecretMatcher;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;
use text::{scrub_assignments, scrub_credentials};

/// What a secret or credential is replaced with.
pub const REDACTED: &str = "[redacted]";
/// What a host-local path prefix is replaced with.
pub const HOST_PATH: &str = "[host-path]";
/// Secrets shorter than this many characters are not registered (they would match prose).
pub(crate) const MIN_SECRET_CHARS: usize = 8;

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
    /// Object keys never rewritten (the caller's own structure), see [`Redactor::keep_keys`].
    kept_keys: HashSet<String>,
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

    /// Object keys that no rule rewrites, wherever they occur in a JSON document (tree or
    /// text): the names of the caller's own structure (`transcripts`, `exit_code`, …), so
    /// that a registered secret that is, or is part of, one of them (`--secret-env` set to
    /// `transcripts`) cannot reshape the document. Keeping them reveals nothing: these names
    /// are printed in every document the caller writes. Values under them get every rule.
    pub fn keep_keys<'k>(&mut self, names: impl IntoIterator<Item = &'k str>) {
        self.kept_keys.extend(names.into_iter().map(str::to_string));
    }

    /// The string rules of `rules` on an object key: none on a kept one.
    fn apply_key<'a>(&self, key: &'a str, rules: Rules) -> Cow<'a, str> {
        if self.kept_keys.contains(key) {
            return Cow::Borrowed(key);
        }
        self.apply(key, rules)
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

    /// Whether any secret is registered (without one, [`Scope::SecretsOnly`] changes nothing
    /// but the layout).
    pub(crate) fn has_secrets(&self) -> bool {
        !self.secrets.is_empty()
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

    /// The full string rules on the end of a captured stream (a stderr tail), cut to at most
    /// `keep` bytes. `raw` is what the capture kept: its last bytes, ideally `keep` plus an
    /// overlap longer than any secret. The bytes are decoded lossily and ALL of `raw` is
    /// redacted; then only the last `keep` bytes of the result are kept (on a char boundary),
    /// and never anything that came from `raw`'s overlap before the window. When anything was
    /// dropped, the partial first line goes too (up to and including the first `\n` of the
    /// kept text, if it has one). Returns the text and whether anything was dropped.
    ///
    /// Why no half secret survives: a registered secret, or a pattern shorter than the
    /// overlap, that straddles the window's edge lies wholly inside `raw`, so it is matched
    /// and replaced before the cut, and the cut falls inside or beside its marker. A secret
    /// cut by the capture itself at the start of `raw` lies in the overlap, which is dropped
    /// whole, however much redaction shrank it.
    pub fn redact_tail(&self, raw: &[u8], keep: usize) -> (String, bool) {
        let mut cut = raw.len().saturating_sub(keep);
        // Put the window's edge on a character's first byte (at most 3 continuation bytes).
        for _ in 0..3 {
            if raw.get(cut).is_some_and(|b| b & 0xC0 == 0x80) {
                cut += 1;
            }
        }
        let (text, edge) = decode_around(raw, cut);
        let mut anchor = Some(Anchor {
            at: edge,
            side: Side::Start,
        });
        let redacted = self.redact_text(&text, &mut anchor);
        let edge = anchor.map_or(0, |a| a.at);
        let mut start = edge.max(redacted.len().saturating_sub(keep));
        while !redacted.is_char_boundary(start) {
            start += 1;
        }
        let dropped = start > 0;
        if dropped {
            if let Some(newline) = redacted[start..].find('\n') {
                start += newline + 1;
            }
        }
        (redacted[start..].to_string(), dropped)
    }

    /// The mirror of [`Redactor::redact_tail`] for the start of a captured stream (a stdout
    /// head): `raw` is the first bytes the capture kept, `keep` plus an overlap. All of it is
    /// redacted; at most the first `keep` bytes of the result are kept, never anything from
    /// the overlap after the window, and when anything was dropped the partial last line goes
    /// too (from the last `\n` of the kept text on, that `\n` included, if it has one).
    pub fn redact_head(&self, raw: &[u8], keep: usize) -> (String, bool) {
        let mut cut = keep.min(raw.len());
        // Keep a character cut by the window's edge out of the window.
        for _ in 0..3 {
            if raw.get(cut).is_some_and(|b| b & 0xC0 == 0x80) && cut > 0 {
                cut -= 1;
            }
        }
        let (text, edge) = decode_around(raw, cut);
        let mut anchor = Some(Anchor {
            at: edge,
            side: Side::End,
        });
        let redacted = self.redact_text(&text, &mut anchor);
        let edge = anchor.map_or(redacted.len(), |a| a.at);
        let mut end = edge.min(keep);
        while !redacted.is_char_boundary(end) {
            end -= 1;
        }
        let dropped = end < redacted.len();
        if dropped {
            if let Some(newline) = redacted[..end].rfind('\n') {
                end = newline;
            }
        }
        (redacted[..end].to_string(), dropped)
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
        self.scrub_text(s, &mut None)
    }

    fn redact<'a>(&self, s: &'a str) -> Cow<'a, str> {
        self.redact_text(s, &mut None)
    }

    /// The exact-secret rule, carrying `anchor` to the same place in the output.
    fn scrub_text<'a>(&self, s: &'a str, anchor: &mut Option<Anchor>) -> Cow<'a, str> {
        self.settle(s, anchor, |t, anchor| self.scrub_once(t, anchor))
    }

    /// Every string rule, carrying `anchor` to the same place in the output.
    fn redact_text<'a>(&self, s: &'a str, anchor: &mut Option<Anchor>) -> Cow<'a, str> {
        self.settle(s, anchor, |t, anchor| self.redact_once(t, anchor))
    }

    /// Secrets first, so no later rule splits one. Paths next: a path never starts right after
    /// `]`, so markers inserted later cannot expose a new one. Assignments before credential
    /// shapes, so `token: Bearer x` is read as one value; and the assignment rule's decisions
    /// never depend on what the shape rule later puts inside a value. Together these make a
    /// second run a no-op.
    fn redact_once<'a>(&self, s: &'a str, anchor: &mut Option<Anchor>) -> Cow<'a, str> {
        let s = self.scrub_once(s, anchor);
        let s = then(s, anchor, &|t, edits| self.scrub_paths(t, edits));
        let s = then(s, anchor, &scrub_assignments);
        then(s, anchor, &scrub_credentials)
    }

    /// Run `pass` once, or to a fixed point when a secret form could overlap a marker. Only
    /// such contrived secrets (holding `[` or `]`, or part of a marker) ever need more than
    /// one pass, and never more than [`MAX_SETTLE_PASSES`].
    fn settle<'a, F>(&self, s: &'a str, anchor: &mut Option<Anchor>, pass: F) -> Cow<'a, str>
    where
        F: for<'b> Fn(&'b str, &mut Option<Anchor>) -> Cow<'b, str>,
    {
        let mut current = pass(s, anchor);
        if !self.matcher().is_some_and(|m| m.touches_markers) {
            return current;
        }
        for _ in 1..MAX_SETTLE_PASSES {
            let mut next_anchor = *anchor;
            let next = match pass(&current, &mut next_anchor) {
                Cow::Borrowed(_) => break,
                Cow::Owned(next) => next,
            };
            if next == *current {
                break;
            }
            *anchor = next_anchor;
            current = Cow::Owned(next);
        }
        current
    }

    fn scrub_once<'a>(&self, s: &'a str, anchor: &mut Option<Anchor>) -> Cow<'a, str> {
        match self.matcher() {
            Some(matcher) => run(s, anchor, &|t, edits| matcher.replace(t, edits)),
            None => Cow::Borrowed(s),
        }
    }

    fn walk(&self, root: &mut Value, rules: Rules) {
        let mut stack: Vec<(&mut Value, bool)> = vec![(root, true)];
        while let Some((value, at_root)) = stack.pop() {
            match value {
                Value::String(s) => {
                    if let Cow::Owned(new) = self.apply(s, rules) {
                        *s = new;
                    }
                }
                Value::Array(items) => stack.extend(items.iter_mut().map(|item| (item, false))),
                Value::Object(map) => {
                    self.rewrite_keys(map, rules);
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

    /// Apply the string rules to the keys of one object, keeping key order. Two keys that
    /// come out the same stay distinct (`[redacted]`, `[redacted]~2`, …): a map cannot hold
    /// both.
    fn rewrite_keys(&self, map: &mut Map<String, Value>, rules: Rules) {
        if !map
            .keys()
            .any(|k| matches!(self.apply_key(k, rules), Cow::Owned(_)))
        {
            return;
        }
        let old = std::mem::take(map);
        let mut names = KeyNames::default();
        for (key, value) in old {
            let key = names.claim(self.apply_key(&key, rules).into_owned());
            map.insert(key, value);
        }
    }

    /// The string rules of `rules` on one string.
    fn apply<'a>(&self, s: &'a str, rules: Rules) -> Cow<'a, str> {
        match rules {
            Rules::Full => self.redact(s),
            Rules::SecretsOnly if self.secrets.is_empty() => Cow::Borrowed(s),
            Rules::SecretsOnly => self.scrub(s),
        }
    }
}

/// The keys written so far in one object: a key already taken gets the first free `~2`,
/// `~3`, … suffix. Where each such search stopped is remembered (the keys it passed stay
/// taken), so n keys that redact to the same text cost O(n), not O(n²).
#[derive(Debug, Default)]
struct KeyNames {
    taken: HashSet<String>,
    next_suffix: HashMap<String, usize>,
}

impl KeyNames {
    /// `key`, or the first free suffixed form of it; either way, taken from now on.
    fn claim(&mut self, key: String) -> String {
        if self.taken.insert(key.clone()) {
            return key;
        }
        let n = self.next_suffix.entry(key.clone()).or_insert(2);
        loop {
            let candidate = format!("{key}~{n}");
            *n += 1;
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
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

/// `raw` decoded lossily, and where `raw[cut..]` starts in the text.
fn decode_around(raw: &[u8], cut: usize) -> (String, usize) {
    let mut text = String::from_utf8_lossy(&raw[..cut]).into_owned();
    let edge = text.len();
    text.push_str(&String::from_utf8_lossy(&raw[cut..]));
    (text, edge)
}

/// One rule: it reads a text and records its replacements, in order, in an [`Edits`].
type Pass<'r> = dyn for<'b> Fn(&'b str, &mut Edits<'b>) + 'r;

/// Run one rule over `s`, keeping it borrowed when nothing changes.
fn run<'a>(s: &'a str, anchor: &mut Option<Anchor>, pass: &Pass<'_>) -> Cow<'a, str> {
    let mut edits = Edits::new(s, *anchor);
    pass(s, &mut edits);
    let (out, moved) = edits.finish();
    *anchor = moved;
    out
}

/// Run one rule over the result of an earlier one.
fn then<'a>(prev: Cow<'a, str>, anchor: &mut Option<Anchor>, pass: &Pass<'_>) -> Cow<'a, str> {
    match prev {
        Cow::Borrowed(s) => run(s, anchor, pass),
        Cow::Owned(s) => {
            let next = match run(&s, anchor, pass) {
                Cow::Borrowed(_) => None,
                Cow::Owned(next) => Some(next),
            };
            Cow::Owned(next.unwrap_or(s))
        }
    }
}

/// A position in a text, carried through every rule to the same place in the output: what was
/// before it stays before it, what was after it stays after it. A replaced range that spans it
/// puts it at the start or the end of the marker, as `side` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Anchor {
    at: usize,
    side: Side,
}

/// Which end of a marker an [`Anchor`] inside the replaced range moves to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The marker stays after the anchor (it is kept by a tail).
    Start,
    /// The marker stays before the anchor (it is kept by a head).
    End,
}

/// Builds the output of one pass: the input with some non-overlapping ranges replaced, in order.
struct Edits<'a> {
    input: &'a str,
    out: String,
    /// End of the last replaced range; nothing before it may be replaced again.
    done: usize,
    changed: bool,
    /// An input position not yet carried to the output (it lies at or after `done`).
    pending: Option<Anchor>,
    /// The anchor's output position, once known.
    moved: Option<Anchor>,
}

impl<'a> Edits<'a> {
    fn new(input: &'a str, anchor: Option<Anchor>) -> Self {
        Edits {
            input,
            out: String::new(),
            done: 0,
            changed: false,
            pending: anchor,
            moved: None,
        }
    }

    fn replace(&mut self, start: usize, end: usize, with: &str) {
        debug_assert!(self.done <= start && start < end);
        if !self.changed {
            self.out.reserve(self.input.len());
        }
        if let Some(anchor) = self.pending.filter(|a| a.at < end) {
            let marker = self.out.len() + start - self.done;
            let at = if anchor.at <= start {
                self.out.len() + anchor.at - self.done
            } else if anchor.side == Side::Start {
                marker
            } else {
                marker + with.len()
            };
            self.moved = Some(Anchor { at, ..anchor });
            self.pending = None;
        }
        self.out.push_str(&self.input[self.done..start]);
        self.out.push_str(with);
        self.done = end;
        self.changed = true;
    }

    fn finish(mut self) -> (Cow<'a, str>, Option<Anchor>) {
        if let Some(anchor) = self.pending.take() {
            let at = self.out.len() + anchor.at - self.done;
            self.moved = Some(Anchor { at, ..anchor });
        }
        if !self.changed {
            return (Cow::Borrowed(self.input), self.moved);
        }
        self.out.push_str(&self.input[self.done..]);
        (Cow::Owned(self.out), self.moved)
    }
}

/// Every string in `v`, object keys included (what a leak check must look at).
/// Which rules apply to a JSON document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Only exact secrets, in every string and key (as [`Redactor::scrub_secrets_value`]).
    SecretsOnly,
    /// Every string rule on every string and key, and whole values under sensitive keys
    /// replaced (as [`Redactor::redact_value`]). With `envelope_root`, the document is an
    /// envelope: its top-level `authorization` object is structural (its members still get
    /// every rule).
    Full { envelope_root: bool },
}

/// Why a text could not be redacted as JSON: it is not one valid JSON document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not valid JSON at byte {offset}: {reason}")]
pub struct InvalidJson {
    /// Byte offset in the input where reading stopped.
    pub offset: usize,
    /// What was wrong there.
    pub reason: &'static str,
}

/// The most output [`Redactor::redact_json_pieces`] gathers before it emits a piece.
pub(crate) const PIECE_BYTES: usize = 64 * 1024;

#[doc(hidden)]
pub fn strings_in(v: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Array(items) => stack.extend(items),
            serde_json::Value::Object(map) => {
                out.extend(map.keys().cloned());
                stack.extend(map.values());
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests;
