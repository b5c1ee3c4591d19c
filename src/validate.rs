//! Validation issues and the checker that collects them.
//!
//! Every check reports *all* of its issues as `{code, path, message}` with `path` a JSON
//! Pointer, never just the first: a host fixing a bridge should see everything wrong at once.
//! The envelope-specific rules live next to their types in `envelope/`; this module owns the
//! issue shape, the stable issue codes and the typed accessors that record an issue whenever a
//! value is missing or of the wrong type.

use crate::envelope::json::{kind_name, pointer_token, JsonIssue, Kind};
use crate::envelope::raw::{self, Fields};
use serde::Serialize;
use serde_json::{Map, Value};
use std::borrow::Cow;

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
    pub const INVALID_ENV_NAME: &str = "invalid_env_name";
    /// An artifact path is absolute or escapes upward.
    pub const PATH_NOT_RELATIVE: &str = "path_not_relative";
    /// A sha256 is not 64 lowercase hex characters.
    pub const INVALID_SHA256: &str = "invalid_sha256";
    /// The adapter's result does not echo the request's `request_id`.
    pub const REQUEST_ID_MISMATCH: &str = "request_id_mismatch";
    /// The adapter's result does not echo the request's `tool`.
    pub const TOOL_MISMATCH: &str = "tool_mismatch";
    /// The adapter's result does not echo the request's `operation`.
    pub const OPERATION_MISMATCH: &str = "operation_mismatch";
    /// More issues than a report lists; the message says how many were left out.
    pub const TOO_MANY_ISSUES: &str = "too_many_issues";
    /// A string that must travel in an environment variable holds a NUL character.
    pub const CONTAINS_NUL: &str = "contains_nul";
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

    fn wrong_type(&mut self, path: &str, want: &str, got: &Value) {
        self.push(
            codes::WRONG_TYPE,
            path,
            format!("expected {want}, found {}", kind_name(got)),
        );
    }

    /// A value that must be present; records `missing` when it is not.
    pub fn required<'v>(
        &mut self,
        obj: &'v Map<String, Value>,
        base: &str,
        key: &str,
    ) -> Option<&'v Value> {
        let value = obj.get(key);
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
    pub fn string<'v>(
        &mut self,
        obj: &'v Map<String, Value>,
        base: &str,
        key: &str,
    ) -> Option<&'v str> {
        let value = self.required(obj, base, key)?;
        self.as_str(value, &join(base, key))
    }

    /// A required string that must not be empty.
    pub fn non_empty_string<'v>(
        &mut self,
        obj: &'v Map<String, Value>,
        base: &str,
        key: &str,
    ) -> Option<&'v str> {
        let s = self.string(obj, base, key)?;
        if s.is_empty() {
            self.push(
                codes::EMPTY,
                join(base, key),
                format!("{key:?} must not be empty"),
            );
            return None;
        }
        Some(s)
    }

    /// An optional string: absent is fine, present must be a string.
    pub fn optional_string<'v>(
        &mut self,
        obj: &'v Map<String, Value>,
        base: &str,
        key: &str,
    ) -> Option<&'v str> {
        let value = obj.get(key)?;
        self.as_str(value, &join(base, key))
    }

    /// The value as a string, or a `wrong_type` issue.
    pub fn as_str<'v>(&mut self, value: &'v Value, path: &str) -> Option<&'v str> {
        match value {
            Value::String(s) => Some(s),
            other => {
                self.wrong_type(path, "a string", other);
                None
            }
        }
    }

    /// The value as a boolean, or a `wrong_type` issue.
    pub fn as_bool(&mut self, value: &Value, path: &str) -> Option<bool> {
        match value {
            Value::Bool(b) => Some(*b),
            other => {
                self.wrong_type(path, "a boolean", other);
                None
            }
        }
    }

    /// A required object.
    pub fn object<'v>(
        &mut self,
        obj: &'v Map<String, Value>,
        base: &str,
        key: &str,
    ) -> Option<&'v Map<String, Value>> {
        let value = self.required(obj, base, key)?;
        self.as_object(value, &join(base, key))
    }

    /// An optional object.
    pub fn optional_object<'v>(
        &mut self,
        obj: &'v Map<String, Value>,
        base: &str,
        key: &str,
    ) -> Option<&'v Map<String, Value>> {
        let value = obj.get(key)?;
        self.as_object(value, &join(base, key))
    }

    /// The value as an object, or a `wrong_type` issue.
    pub fn as_object<'v>(
        &mut self,
        value: &'v Value,
        path: &str,
    ) -> Option<&'v Map<String, Value>> {
        match value {
            Value::Object(map) => Some(map),
            other => {
                self.wrong_type(path, "an object", other);
                None
            }
        }
    }

    /// The value as an array of strings; every non-string item is its own issue.
    pub fn as_string_array(&mut self, value: &Value, path: &str) -> Option<Vec<String>> {
        let Value::Array(items) = value else {
            self.wrong_type(path, "an array of strings", value);
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            match self.as_str(item, &format!("{path}/{i}")) {
                Some(s) => out.push(s.to_string()),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// A required array of strings.
    pub fn string_array(
        &mut self,
        obj: &Map<String, Value>,
        base: &str,
        key: &str,
    ) -> Option<Vec<String>> {
        let value = self.required(obj, base, key)?;
        self.as_string_array(value, &join(base, key))
    }

    /// A required string equal to `want`.
    pub fn constant(&mut self, obj: &Map<String, Value>, base: &str, key: &str, want: &str) {
        if let Some(got) = self.string(obj, base, key) {
            if got != want {
                self.push(
                    codes::WRONG_VALUE,
                    join(base, key),
                    format!("{key:?} must be {want:?}, found {got:?}"),
                );
            }
        }
    }

    /// An optional string that, when present, must be one of `allowed`.
    pub fn optional_enum<'v>(
        &mut self,
        obj: &'v Map<String, Value>,
        base: &str,
        key: &str,
        allowed: &[&str],
    ) -> Option<&'v str> {
        let got = self.optional_string(obj, base, key)?;
        if allowed.contains(&got) {
            Some(got)
        } else {
            self.push(
                codes::WRONG_VALUE,
                join(base, key),
                format!("{key:?} must be one of {allowed:?}, found {got:?}"),
            );
            None
        }
    }

    /// A required `version` equal to 1 (an integer, not `1.0` or `"1"`).
    pub fn version_one(&mut self, obj: &Map<String, Value>, base: &str) {
        let Some(value) = self.required(obj, base, "version") else {
            return;
        };
        let path = join(base, "version");
        match value {
            Value::Number(n) if n.as_u64() == Some(1) => {}
            Value::Number(n) if n.is_u64() || n.is_i64() => self.push(
                codes::WRONG_VALUE,
                path,
                format!("\"version\" must be 1, found {n}"),
            ),
            other => self.wrong_type(&path, "the integer 1", other),
        }
    }

    /// An environment variable NAME (`^[A-Za-z_][A-Za-z0-9_]*$`).
    pub fn env_name(&mut self, value: &Value, path: &str) -> Option<String> {
        let name = self.as_str(value, path)?;
        if is_env_name(name) {
            Some(name.to_string())
        } else {
            self.push(
                codes::INVALID_ENV_NAME,
                path,
                format!("{name:?} is not an environment variable name"),
            );
            None
        }
    }
}

/// The same checks on raw JSON text (envelopes that carry opaque payload), with the same
/// codes and messages as their tree counterparts above.
impl Checker {
    fn wrong_kind(&mut self, path: &str, want: &str, raw: &str) {
        self.push(
            codes::WRONG_TYPE,
            path,
            format!("expected {want}, found {}", Kind::of(raw).name()),
        );
    }

    /// A member that must be present.
    pub fn field<'t>(&mut self, obj: &Fields<'t>, base: &str, key: &str) -> Option<&'t str> {
        let value = obj.get(key);
        if value.is_none() {
            self.push(
                codes::MISSING,
                join(base, key),
                format!("required key {key:?} is missing"),
            );
        }
        value
    }

    /// The raw value as a string, or a `wrong_type` issue.
    pub fn raw_str<'t>(&mut self, raw: &'t str, path: &str) -> Option<Cow<'t, str>> {
        let s = raw::string(raw);
        if s.is_none() {
            self.wrong_kind(path, "a string", raw);
        }
        s
    }

    /// The raw value as a boolean, or a `wrong_type` issue.
    pub fn raw_bool(&mut self, raw: &str, path: &str) -> Option<bool> {
        let b = raw::boolean(raw);
        if b.is_none() {
            self.wrong_kind(path, "a boolean", raw);
        }
        b
    }

    /// The raw value as an object, or a `wrong_type` issue.
    pub fn raw_object<'t>(&mut self, raw: &'t str, path: &str) -> Option<Fields<'t>> {
        let fields = Fields::parse(raw);
        if fields.is_none() {
            self.wrong_kind(path, "an object", raw);
        }
        fields
    }

    /// A required string member.
    pub fn field_string<'t>(
        &mut self,
        obj: &Fields<'t>,
        base: &str,
        key: &str,
    ) -> Option<Cow<'t, str>> {
        let raw = self.field(obj, base, key)?;
        self.raw_str(raw, &join(base, key))
    }

    /// A required string member that must not be empty.
    pub fn field_non_empty_string<'t>(
        &mut self,
        obj: &Fields<'t>,
        base: &str,
        key: &str,
    ) -> Option<Cow<'t, str>> {
        let s = self.field_string(obj, base, key)?;
        if s.is_empty() {
            self.push(
                codes::EMPTY,
                join(base, key),
                format!("{key:?} must not be empty"),
            );
            return None;
        }
        Some(s)
    }

    /// An optional string member.
    pub fn field_optional_string<'t>(
        &mut self,
        obj: &Fields<'t>,
        base: &str,
        key: &str,
    ) -> Option<Cow<'t, str>> {
        let raw = obj.get(key)?;
        self.raw_str(raw, &join(base, key))
    }

    /// A required object member.
    pub fn field_object<'t>(
        &mut self,
        obj: &Fields<'t>,
        base: &str,
        key: &str,
    ) -> Option<Fields<'t>> {
        let raw = self.field(obj, base, key)?;
        self.raw_object(raw, &join(base, key))
    }

    /// An optional object member.
    pub fn field_optional_object<'t>(
        &mut self,
        obj: &Fields<'t>,
        base: &str,
        key: &str,
    ) -> Option<Fields<'t>> {
        let raw = obj.get(key)?;
        self.raw_object(raw, &join(base, key))
    }

    /// A required string member equal to `want`.
    pub fn field_constant(&mut self, obj: &Fields<'_>, base: &str, key: &str, want: &str) {
        if let Some(got) = self.field_string(obj, base, key) {
            if got != want {
                self.push(
                    codes::WRONG_VALUE,
                    join(base, key),
                    format!("{key:?} must be {want:?}, found {got:?}"),
                );
            }
        }
    }

    /// A required `version` member equal to the integer 1.
    pub fn field_version_one(&mut self, obj: &Fields<'_>, base: &str) {
        let Some(raw) = self.field(obj, base, "version") else {
            return;
        };
        let path = join(base, "version");
        let text = raw.trim();
        let digits = text.strip_prefix('-').unwrap_or(text);
        let is_integer = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
        if text == "1" {
        } else if is_integer {
            self.push(
                codes::WRONG_VALUE,
                path,
                format!("\"version\" must be 1, found {text}"),
            );
        } else {
            self.wrong_kind(&path, "the integer 1", raw);
        }
    }

    /// The raw value as an array of strings, each passed to `each`; every non-string item is
    /// its own issue. Nothing is collected.
    pub fn raw_string_items(&mut self, raw: &str, path: &str, mut each: impl FnMut(&str)) -> bool {
        if Kind::of(raw) != Kind::Array {
            self.wrong_kind(path, "an array of strings", raw);
            return false;
        }
        let mut ok = true;
        raw::for_each_item(raw, |i, item| match raw::string(item) {
            Some(s) => each(&s),
            None => {
                ok = false;
                self.push(
                    codes::WRONG_TYPE,
                    format!("{path}/{i}"),
                    format!("expected a string, found {}", Kind::of(item).name()),
                );
            }
        });
        ok
    }
}

/// `^[A-Za-z_][A-Za-z0-9_]*$`.
pub fn is_env_name(name: &str) -> bool {
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
}

impl Report {
    /// A report from a validation outcome.
    pub fn from_issues(issues: Vec<Issue>) -> Report {
        Report {
            valid: issues.is_empty(),
            issues,
        }
    }
}

/// `(code, path)` of each issue, for tests that compare issue lists.
#[cfg(test)]
pub(crate) fn code_paths(issues: &[Issue]) -> Vec<(&str, &str)> {
    issues
        .iter()
        .map(|i| (i.code.as_str(), i.path.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn checker_collects_every_issue() {
        let obj: Map<String, Value> =
            serde_json::from_str(r#"{"a": 1, "b": "", "c": [1, "x", true]}"#).unwrap();
        let mut c = Checker::new();
        assert_eq!(c.string(&obj, "", "a"), None);
        assert_eq!(c.non_empty_string(&obj, "", "b"), None);
        assert_eq!(c.string_array(&obj, "", "c"), None);
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
