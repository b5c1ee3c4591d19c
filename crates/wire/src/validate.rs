//! Validation issues and the checker that collects them.
//!
//! Every check reports *all* of its issues as `{code, path, message}` with `path` a JSON
//! Pointer, never just the first: a host fixing a bridge should see everything wrong at once.
//! The envelope-specific rules live next to their types in `envelope/`; this module owns the
//! issue shape, the stable issue codes and the typed accessors that record an issue whenever a
//! value is missing or of the wrong type.
//!
//! The accessors read any JSON through one view ([`View`], [`Members`]): a parsed tree or raw
//! text the strict reader accepted, with the same codes and messages. An envelope describes its
//! fields once, as data ([`Field`], [`Shape`], `fields` in each envelope module); the checks
//! read those descriptions ([`Checker::check`]) and `schema.rs` writes the published schemas
//! from them.

use crate::json::{pointer_token, JsonIssue, Kind};
use serde::Serialize;
use std::ops::Deref;

mod fields;
mod view;

pub use fields::{
    Condition, Expected, Fact, Field, Pattern, Presence, Refusal, Shape, Spec, Type, VERSION,
};
pub use view::{Members, View};

/// The string type of the values of `O`.
pub(crate) type StrOf<'v, O> = <<O as Members<'v>>::Value as View<'v>>::Str;
/// The object type of the values of `O`.
pub(crate) type ObjectOf<'v, O> = <<O as Members<'v>>::Value as View<'v>>::Object;

/// One validation finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Issue {
    /// Stable snake_case issue code (see [`codes`] and the JSON reader's codes).
    pub code: String,
    /// JSON Pointer of the offending place ("" for the whole document).
    pub path: String,
    /// One human sentence.
    pub message: String,
}

impl Issue {
    /// A new issue.
    pub fn new(code: &str, path: impl Into<String>, message: impl Into<String>) -> Issue {
        Issue {
            code: code.to_string(),
            path: path.into(),
            message: message.into(),
        }
    }

    /// The issue for a document the strict reader refused.
    pub fn from_json(issue: &JsonIssue) -> Issue {
        Issue::new(issue.code(), issue.pointer(), issue.to_string())
    }
}

/// Issue codes for envelope shape problems (the strict reader adds its own byte-level codes).
pub mod codes {
    /// A required key is absent.
    pub const MISSING: &str = "missing";
    /// A value has the wrong JSON type.
    pub const WRONG_TYPE: &str = "wrong_type";
    /// A value is not the constant or one of the values the contract allows.
    pub const WRONG_VALUE: &str = "wrong_value";
    /// A string that must not be empty is empty.
    pub const EMPTY: &str = "empty";
    /// A string is longer than allowed.
    pub const TOO_LONG: &str = "too_long";
    /// A number is below its minimum.
    pub const OUT_OF_RANGE: &str = "out_of_range";
    /// A string is not a valid environment variable name.
    pub(crate) const INVALID_ENV_NAME: &str = "invalid_env_name";
    /// An artifact path is absolute or escapes upward.
    pub(crate) const PATH_NOT_RELATIVE: &str = "path_not_relative";
    /// A sha256 is not 64 lowercase hex characters.
    pub(crate) const INVALID_SHA256: &str = "invalid_sha256";
    /// The adapter's result does not echo the request's `request_id`.
    pub(crate) const REQUEST_ID_MISMATCH: &str = "request_id_mismatch";
    /// The adapter's result does not echo the request's `tool`.
    pub(crate) const TOOL_MISMATCH: &str = "tool_mismatch";
    /// The adapter's result does not echo the request's `operation`.
    pub(crate) const OPERATION_MISMATCH: &str = "operation_mismatch";
    /// A file could not be read (the message says why; never which host path).
    pub const UNREADABLE: &str = "unreadable";
    /// More issues than a report lists; the message says how many were left out.
    pub(crate) const TOO_MANY_ISSUES: &str = "too_many_issues";
    /// A string that must travel in an environment variable holds a NUL character.
    pub const CONTAINS_NUL: &str = "contains_nul";
    /// A key the contract does not define, in an object whose keys are all known (a warning,
    /// not an error: an unknown key is ignored, which is exactly why a typo must be shown).
    pub const UNKNOWN_KEY: &str = "unknown_key";
}

/// One line for humans saying what is wrong: the first issue as `path: message` (`message`
/// alone for the whole document), then ` (and N more issues)` when there are others. Empty
/// for no issues. The text is raw: escape it before it reaches a terminal
/// ([`crate::terminal::error_line`] does).
pub fn summary(issues: &[Issue]) -> String {
    let Some(first) = issues.first() else {
        return String::new();
    };
    let mut out = if first.path.is_empty() {
        first.message.clone()
    } else {
        format!("{}: {}", first.path, first.message)
    };
    match issues.len() - 1 {
        0 => {}
        1 => out.push_str(" (and 1 more issue)"),
        more => out.push_str(&format!(" (and {more} more issues)")),
    }
    out
}

/// The candidate `word` was most likely meant to be, if any is close enough: `_` and `-` are
/// treated alike, case is ignored, and otherwise the edit distance (insertions, deletions,
/// substitutions and swaps of neighbours) must be at most a third of the candidate's length
/// (at least 1). Ties go to the earlier candidate. Words much longer than any candidate are
/// never compared, so the cost stays small whatever the input.
pub fn did_you_mean<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    let norm = |s: &str| -> Vec<char> {
        s.chars()
            .map(|c| {
                if c == '_' {
                    '-'
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect()
    };
    let word_chars = norm(word);
    let mut best: Option<(usize, &'c str)> = None;
    for candidate in candidates {
        let cand = norm(candidate);
        let allowed = (cand.len() / 3).max(1);
        if word_chars.len().abs_diff(cand.len()) > allowed {
            continue;
        }
        let d = edit_distance(&word_chars, &cand);
        if d <= allowed && !matches!(best, Some((b, _)) if b <= d) {
            best = Some((d, candidate));
        }
    }
    best.map(|(_, c)| c)
}

/// Optimal string alignment distance: Levenshtein plus transposition of adjacent characters
/// (`timeout_sm` is one edit from `timeout_ms`).
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1)
                .min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
        }
    }
    d[a.len() * w + b.len()]
}

/// Join a JSON Pointer and one key.
pub fn join(base: &str, key: &str) -> String {
    format!("{base}/{}", pointer_token(key))
}

/// Most issues one check reports; past it they are counted, and one `too_many_issues` issue
/// says how many more there were. A hostile document cannot make the report, or the memory
/// that holds it, grow with its size.
pub const MAX_ISSUES: usize = 100;

/// Collects issues while reading typed values out of JSON objects.
#[derive(Debug, Default)]
pub struct Checker {
    issues: Vec<Issue>,
    /// Issues past [`MAX_ISSUES`], counted only.
    dropped: usize,
}

impl Checker {
    /// A checker with no issues yet.
    pub fn new() -> Checker {
        Checker::default()
    }

    /// Record an issue.
    pub fn push(&mut self, code: &str, path: impl Into<String>, message: impl Into<String>) {
        if self.issues.len() < MAX_ISSUES {
            self.issues.push(Issue::new(code, path, message));
        } else {
            self.dropped += 1;
        }
    }

    /// True when nothing was recorded.
    pub fn is_clean(&self) -> bool {
        self.issues.is_empty()
    }

    /// The issues recorded, with the `too_many_issues` summary when some were dropped.
    pub fn into_issues(mut self) -> Vec<Issue> {
        if self.dropped > 0 {
            self.issues.push(Issue::new(
                codes::TOO_MANY_ISSUES,
                "",
                format!(
                    "{} more issues were found and not listed (at most {MAX_ISSUES} are)",
                    self.dropped
                ),
            ));
        }
        self.issues
    }

    /// `Ok(value)` when clean, else every issue.
    pub fn finish<T>(self, value: T) -> Result<T, Vec<Issue>> {
        if self.issues.is_empty() {
            Ok(value)
        } else {
            Err(self.into_issues())
        }
    }

    fn wrong_type<'v>(&mut self, path: &str, want: &str, got: impl View<'v>) {
        self.push(
            codes::WRONG_TYPE,
            path,
            format!("expected {want}, found {}", got.kind().name()),
        );
    }

    /// A value that must be present; records `missing` when it is not.
    pub fn required<'v, O: Members<'v>>(
        &mut self,
        obj: O,
        base: &str,
        key: &str,
    ) -> Option<O::Value> {
        let value = obj.member(key);
        if value.is_none() {
            self.push(
                codes::MISSING,
                join(base, key),
                format!("required key {key:?} is missing"),
            );
        }
        value
    }

    /// A required string.
    pub fn string<'v, O: Members<'v>>(
        &mut self,
        obj: O,
        base: &str,
        key: &str,
    ) -> Option<StrOf<'v, O>> {
        let value = self.required(obj, base, key)?;
        self.as_str(value, &join(base, key))
    }

    /// A required string that must not be empty.
    pub fn non_empty_string<'v, O: Members<'v>>(
        &mut self,
        obj: O,
        base: &str,
        key: &str,
    ) -> Option<StrOf<'v, O>> {
        let s = self.string(obj, base, key)?;
        self.non_empty(s, &join(base, key), key)
    }

    /// `s`, or an `empty` issue about `key` at `path`.
    fn non_empty<S: Deref<Target = str>>(&mut self, s: S, path: &str, key: &str) -> Option<S> {
        if s.is_empty() {
            self.push(codes::EMPTY, path, format!("{key:?} must not be empty"));
            return None;
        }
        Some(s)
    }

    /// An optional string: absent is fine, present must be a string.
    pub fn optional_string<'v, O: Members<'v>>(
        &mut self,
        obj: O,
        base: &str,
        key: &str,
    ) -> Option<StrOf<'v, O>> {
        let value = obj.member(key)?;
        self.as_str(value, &join(base, key))
    }

    /// The value as a string, or a `wrong_type` issue.
    pub fn as_str<'v, V: View<'v>>(&mut self, value: V, path: &str) -> Option<V::Str> {
        let s = value.as_str();
        if s.is_none() {
            self.wrong_type(path, "a string", value);
        }
        s
    }

    /// The value as a boolean, or a `wrong_type` issue.
    pub fn as_bool<'v, V: View<'v>>(&mut self, value: V, path: &str) -> Option<bool> {
        let b = value.as_bool();
        if b.is_none() {
            self.wrong_type(path, "a boolean", value);
        }
        b
    }

    /// The value as an object, or a `wrong_type` issue.
    pub fn as_object<'v, V: View<'v>>(&mut self, value: V, path: &str) -> Option<V::Object> {
        let object = value.as_object();
        if object.is_none() {
            self.wrong_type(path, "an object", value);
        }
        object
    }

    /// The value as an array of strings, each passed to `each`; every non-string item is its
    /// own issue. False when it is not such an array. Nothing is collected.
    pub fn string_items<'v, V: View<'v>>(
        &mut self,
        value: V,
        path: &str,
        mut each: impl FnMut(V::Str),
    ) -> bool {
        if value.kind() != Kind::Array {
            self.wrong_type(path, "an array of strings", value);
            return false;
        }
        let mut ok = true;
        value.each_item(|i, item| match self.as_str(item, &format!("{path}/{i}")) {
            Some(s) => each(s),
            None => ok = false,
        });
        ok
    }

    /// The value as an array of strings; every non-string item is its own issue.
    pub fn as_string_array<'v, V: View<'v>>(
        &mut self,
        value: V,
        path: &str,
    ) -> Option<Vec<String>> {
        let mut out = Vec::new();
        self.string_items(value, path, |s| out.push(s.to_string()))
            .then_some(out)
    }

    /// A required string equal to `want`.
    pub fn constant<'v, O: Members<'v>>(&mut self, obj: O, base: &str, key: &str, want: &str) {
        if let Some(got) = self.string(obj, base, key) {
            self.equal(&got, &join(base, key), key, want);
        }
    }

    /// `got` equals `want`, or a `wrong_value` issue about `key` at `path`.
    fn equal(&mut self, got: &str, path: &str, key: &str, want: &str) -> bool {
        if got != want {
            self.push(
                codes::WRONG_VALUE,
                path,
                format!("{key:?} must be {want:?}, found {got:?}"),
            );
        }
        got == want
    }

    /// `got` when it is one of `allowed`, or a `wrong_value` issue about `key` at `path`.
    fn one_of<S: Deref<Target = str>>(
        &mut self,
        got: S,
        path: &str,
        key: &str,
        allowed: &[&str],
    ) -> Option<S> {
        if allowed.contains(&&*got) {
            return Some(got);
        }
        self.push(
            codes::WRONG_VALUE,
            path,
            format!("{key:?} must be one of {allowed:?}, found {:?}", &*got),
        );
        None
    }

    /// A required `version` equal to 1 (an integer, not `1.0` or `"1"`).
    pub fn version_one<'v, O: Members<'v>>(&mut self, obj: O, base: &str) {
        self.check(obj, base, &VERSION);
    }

    /// `s` matches `pattern`, or `pattern`'s issue at `path`.
    fn pattern(&mut self, s: &str, path: &str, pattern: &Pattern) -> bool {
        let ok = (pattern.test)(s);
        if !ok {
            self.push(pattern.code, path, (pattern.message)(s));
        }
        ok
    }

    /// An object of environment variables (`{"NAME": "value"}`) at `base`: every name must be a
    /// variable name and every value a string without NUL (`nul_code` says which code that
    /// failure carries where). Returns the pairs whose value is usable.
    pub fn env_vars<'v>(
        &mut self,
        map: impl Members<'v>,
        base: &str,
        nul_code: &str,
    ) -> Vec<(String, String)> {
        let mut out = Vec::new();
        map.each_member(|name, value| {
            let path = join(base, name);
            self.pattern(name, &path, &ENV_NAME);
            if let Some(v) = self.as_str(value, &path) {
                if v.contains('\0') {
                    self.push(nul_code, path, "environment values must not contain NUL");
                } else {
                    out.push((name.to_string(), v.to_string()));
                }
            }
        });
        out
    }
}

/// An environment variable NAME, never a value.
pub const ENV_NAME: Pattern = Pattern {
    regex: "^[A-Za-z_][A-Za-z0-9_]*$",
    code: codes::INVALID_ENV_NAME,
    test: is_env_name,
    message: |name| format!("{name:?} is not an environment variable name"),
};

/// `^[A-Za-z_][A-Za-z0-9_]*$`.
pub(crate) fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The `validate` subcommand's report.
#[derive(Debug, Serialize)]
pub struct Report {
    /// True when there are no issues.
    pub valid: bool,
    /// Every issue found.
    pub issues: Vec<Issue>,
    /// Findings that do not make the envelope invalid (unknown keys in a bridge); left out of
    /// the JSON when there are none, so a clean report keeps its two keys.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Issue>,
}

impl Report {
    /// A report from a validation outcome.
    pub fn from_issues(issues: Vec<Issue>) -> Report {
        Report::with_warnings(issues, Vec::new())
    }

    /// A report with warnings beside the issues.
    pub fn with_warnings(issues: Vec<Issue>, warnings: Vec<Issue>) -> Report {
        Report {
            valid: issues.is_empty(),
            issues,
            warnings,
        }
    }
}

/// `(code, path)` of each issue, for tests that compare issue lists (here and in the layers
/// above).
#[doc(hidden)]
pub fn code_paths(issues: &[Issue]) -> Vec<(&str, &str)> {
    issues
        .iter()
        .map(|i| (i.code.as_str(), i.path.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value};

    #[test]
    fn env_names_follow_the_posix_shape() {
        for ok in ["A", "_", "PATH", "a_1", "_X9"] {
            assert!(is_env_name(ok), "{ok}");
        }
        for bad in ["", "1A", "A-B", "A B", "Ä", "A=B"] {
            assert!(!is_env_name(bad), "{bad}");
        }
    }

    #[test]
    fn summary_puts_the_path_first_and_counts_the_rest() {
        let missing = Issue::new(
            codes::MISSING,
            "/request_id",
            "required key \"request_id\" is missing",
        );
        let whole = Issue::new("json_syntax", "", "invalid JSON at line 1, column 1: x");
        assert_eq!(summary(&[]), "");
        assert_eq!(
            summary(std::slice::from_ref(&missing)),
            "/request_id: required key \"request_id\" is missing"
        );
        assert_eq!(
            summary(&[missing.clone(), whole.clone()]),
            "/request_id: required key \"request_id\" is missing (and 1 more issue)"
        );
        assert_eq!(
            summary(&[whole.clone(), missing.clone(), missing]),
            "invalid JSON at line 1, column 1: x (and 2 more issues)"
        );
    }

    #[test]
    fn did_you_mean_finds_typos_swaps_and_separator_mixups() {
        let keys = ["owner", "mode", "timeout_ms", "command", "endpoint"];
        assert_eq!(did_you_mean("timeout_sm", keys), Some("timeout_ms"));
        assert_eq!(did_you_mean("timout_ms", keys), Some("timeout_ms"));
        assert_eq!(did_you_mean("timeout-ms", keys), Some("timeout_ms"));
        assert_eq!(did_you_mean("comand", keys), Some("command"));
        assert_eq!(did_you_mean("Mode", keys), Some("mode"));
        assert_eq!(did_you_mean("transport", keys), None);
        assert_eq!(did_you_mean("x", keys), None);
        assert_eq!(did_you_mean(&"a".repeat(100_000), keys), None);
        let subs = ["validate", "sandbox-env", "completions", "adapter", "help"];
        assert_eq!(did_you_mean("valdate", subs), Some("validate"));
        assert_eq!(did_you_mean("sandbox_env", subs), Some("sandbox-env"));
        assert_eq!(did_you_mean("adaptr", subs), Some("adapter"));
        assert_eq!(did_you_mean("request.json", subs), None);
        assert_eq!(did_you_mean("valid.json", subs), None);
    }

    #[test]
    fn checker_collects_every_issue() {
        let obj: Map<String, Value> =
            serde_json::from_str(r#"{"a": 1, "b": "", "c": [1, "x", true]}"#).unwrap();
        let mut c = Checker::new();
        assert_eq!(c.string(&obj, "", "a"), None);
        assert_eq!(c.non_empty_string(&obj, "", "b"), None);
        assert_eq!(c.as_string_array(&obj["c"], "/c"), None);
        assert_eq!(c.string(&obj, "/x", "missing"), None);
        let issues = c.into_issues();
        let got = crate::validate::code_paths(&issues);
        assert_eq!(
            got,
            [
                ("wrong_type", "/a"),
                ("empty", "/b"),
                ("wrong_type", "/c/0"),
                ("wrong_type", "/c/2"),
                ("missing", "/x/missing"),
            ]
        );
    }
}
