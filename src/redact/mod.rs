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

mod keys;
mod paths;
mod secrets;
mod text;

pub use keys::is_sensitive_key;

use secrets::{qualifies_as_secret, SecretMatcher};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::sync::OnceLock;
use text::{scrub_assignments, scrub_credentials};

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

#[cfg(test)]
mod tests;
