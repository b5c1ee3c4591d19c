//! The rules of SPEC §8 on a host delegation request and on an adapter's answer to it.
//!
//! Both checks take JSON text the strict reader (`json`) already accepted and
//! collect *every* issue as `{code, path, message}` with the upstream issue codes, tagged with
//! an [`IssueKind`] that decides the failure code of `delegation run`. Values are read with
//! `json::raw` one level deep (two inside `result`): nothing is converted, no tree of the
//! product payload is built.
//!
//! Invariants: a check never panics on accepted JSON; messages quote at most
//! [`QUOTE_CHARS`] characters of a value (they are redacted by whoever prints them); the
//! [`Scope`] of a request only holds values that passed their own rule, so a malformed
//! request digest can never be "matched". This module reads no file and prints nothing.

use super::codes::{DelegationStatus, IssueKind};
use super::{REQUEST_SCHEMA, RESULT_SCHEMA};
use ptd_wire::json::raw::{self, Fields};
use ptd_wire::json::Kind;
use ptd_wire::validate::{join, Checker, Issue};
use std::borrow::Cow;

/// Longest `request_id` accepted: it travels in an environment variable and in every event.
pub const MAX_REQUEST_ID_BYTES: usize = 256;
/// How much of an offending value a message quotes.
pub(crate) const QUOTE_CHARS: usize = 64;

/// Members of a request that must be objects when present.
pub(crate) const OBJECT_FIELDS: [&str; 5] =
    ["target", "context", "execution", "orchestrator", "metadata"];
/// Members of a `source_digest` object that may carry the hex digest, in precedence order.
pub(crate) const DIGEST_KEYS: [&str; 3] = ["value", "sha256", "hash"];

/// Issues found by one check, and the most important kind among them.
#[derive(Debug, Default)]
pub struct Findings {
    checker: Checker,
    worst: Option<IssueKind>,
}

impl Findings {
    /// Record an issue.
    pub fn push(&mut self, kind: IssueKind, path: impl Into<String>, message: impl Into<String>) {
        self.worst = Some(self.worst.map_or(kind, |w| w.min(kind)));
        self.checker.push(kind.issue_code(), path, message);
    }

    /// True when nothing was found.
    pub fn is_clean(&self) -> bool {
        self.worst.is_none()
    }

    /// The most important kind found (it decides the failure code).
    pub fn worst(&self) -> Option<IssueKind> {
        self.worst
    }

    /// The issues, in the order found (capped, with a summary past the cap).
    pub fn into_issues(self) -> Vec<Issue> {
        self.checker.into_issues()
    }

    /// Add every issue of `other`, each path under `prefix`.
    pub(crate) fn absorb(&mut self, other: Findings, prefix: &str) {
        if let Some(kind) = other.worst {
            self.worst = Some(self.worst.map_or(kind, |w| w.min(kind)));
        }
        for issue in other.checker.into_issues() {
            self.checker.push(
                &issue.code,
                format!("{prefix}{}", issue.path),
                issue.message,
            );
        }
    }
}

/// What an answer must agree with: the request's ids, each only when the request carries a
/// valid, non-empty one. Strings are trimmed; the digest is lowercase hex.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    pub request_id: Option<String>,
    /// `sandbox_session_id`, else `session_id`.
    pub session: Option<String>,
    pub source_digest: Option<String>,
}

/// Check a request (SPEC §8): every issue, and the scope an answer must match.
pub fn check_request(text: &str) -> (Scope, Findings) {
    let mut f = Findings::default();
    let Some(top) = Fields::parse(text) else {
        f.push(
            IssueKind::RequestInvalid,
            "",
            format!(
                "a host delegation request must be a JSON object, found {}",
                Kind::of(text).name()
            ),
        );
        return (Scope::default(), f);
    };
    check_schema(&top, REQUEST_SCHEMA, &mut f);
    check_goal(&top, &mut f);
    check_request_shapes(&top, &mut f);
    let request_id = request_id(&top, &mut f);
    let session = request_session(&top, &mut f);
    let source_digest = request_digest(&top, &mut f);
    let scope = Scope {
        request_id,
        session,
        source_digest,
    };
    (scope, f)
}

/// `schema`, when present, must be `want`.
fn check_schema(top: &Fields, want: &str, f: &mut Findings) {
    if let Some(raw) = top.get("schema") {
        if raw::string(raw).as_deref() != Some(want) {
            f.push(
                IssueKind::SchemaInvalid,
                "/schema",
                format!("schema must be {want:?}, found {}", quote(raw)),
            );
        }
    }
}

/// A request needs a non-empty `goal` or `task`; each present must be a string.
fn check_goal(top: &Fields, f: &mut Findings) {
    let mut has_goal = false;
    for key in ["goal", "task"] {
        let Some(raw) = top.get(key) else { continue };
        match raw::string(raw) {
            Some(s) => has_goal |= !s.trim().is_empty(),
            None => f.push(
                IssueKind::RequestInvalid,
                join("", key),
                format!("{key} must be a string, found {}", Kind::of(raw).name()),
            ),
        }
    }
    if !has_goal {
        f.push(
            IssueKind::RequestInvalid,
            "/goal",
            "a host delegation request needs a non-empty goal or task",
        );
    }
}

/// The members that must be objects ([`OBJECT_FIELDS`]) or an array (`expected_artifacts`).
fn check_request_shapes(top: &Fields, f: &mut Findings) {
    for key in OBJECT_FIELDS {
        if let Some(raw) = top.get(key) {
            expect_kind(f, IssueKind::RequestInvalid, raw, key, Kind::Object);
        }
    }
    if let Some(raw) = top.get("expected_artifacts") {
        expect_kind(
            f,
            IssueKind::RequestInvalid,
            raw,
            "expected_artifacts",
            Kind::Array,
        );
    }
}

/// The request's `request_id`, trimmed, when it is a valid one.
fn request_id(top: &Fields, f: &mut Findings) -> Option<String> {
    let raw = top.get("request_id")?;
    match raw::string(raw) {
        None => f.push(
            IssueKind::RequestInvalid,
            "/request_id",
            format!(
                "request_id must be a string, found {}",
                Kind::of(raw).name()
            ),
        ),
        Some(id) if id.trim().is_empty() => f.push(
            IssueKind::RequestInvalid,
            "/request_id",
            "request_id must not be empty (leave it out to have one generated)",
        ),
        Some(id) if id.len() > MAX_REQUEST_ID_BYTES => f.push(
            IssueKind::RequestInvalid,
            "/request_id",
            format!("request_id is longer than {MAX_REQUEST_ID_BYTES} bytes"),
        ),
        Some(id) if id.contains('\0') => f.push(
            IssueKind::RequestInvalid,
            "/request_id",
            "request_id must not contain a NUL character",
        ),
        Some(id) => return Some(id.trim().to_string()),
    }
    None
}

/// The request's session, trimmed: `sandbox_session_id`, else `session_id` (both given must
/// agree).
fn request_session(top: &Fields, f: &mut Findings) -> Option<String> {
    let mut sessions = Vec::new();
    for key in ["sandbox_session_id", "session_id"] {
        let Some(raw) = top.get(key) else { continue };
        match raw::string(raw) {
            None => f.push(
                IssueKind::RequestInvalid,
                join("", key),
                format!("{key} must be a string, found {}", Kind::of(raw).name()),
            ),
            Some(s) if !s.trim().is_empty() => sessions.push(s.trim().to_string()),
            Some(_) => {}
        }
    }
    if let [first, second] = sessions.as_slice() {
        if first != second {
            f.push(
                IssueKind::RequestInvalid,
                "/session_id",
                format!(
                    "session_id {} disagrees with sandbox_session_id {}",
                    quote_str(second),
                    quote_str(first)
                ),
            );
        }
    }
    sessions.into_iter().next()
}

/// The request's `source_digest` as lowercase hex, when it is a valid one.
fn request_digest(top: &Fields, f: &mut Findings) -> Option<String> {
    let raw = top.get("source_digest")?;
    match digest(raw) {
        Ok(hex) => Some(hex),
        Err(why) => {
            f.push(
                IssueKind::SourceDigestInvalid,
                "/source_digest",
                format!("source_digest must be a 64-character SHA-256 hex digest: {why}"),
            );
            None
        }
    }
}

/// An adapter's answer that passed every check: what the envelope takes from it.
#[derive(Debug, Clone)]
pub struct Answer<'t> {
    pub status: DelegationStatus,
    /// `provider`, the adapter's own name for itself.
    pub provider: Option<Cow<'t, str>>,
    /// `result` as written (an object, or `null`).
    pub result: Option<&'t str>,
    /// `error` as written (an object, or `null`).
    pub error: Option<&'t str>,
}

/// Check an adapter's answer (or a result given to `check-result`) against the request's
/// scope (SPEC §8). `text` is one JSON document the strict reader accepted.
pub fn check_answer<'t>(text: &'t str, scope: &Scope) -> Result<Answer<'t>, Findings> {
    let mut f = Findings::default();
    let Some(top) = Fields::parse(text) else {
        f.push(
            IssueKind::ResultInvalid,
            "",
            format!(
                "a host delegation result must be a JSON object, found {}",
                Kind::of(text).name()
            ),
        );
        return Err(f);
    };
    check_schema(&top, RESULT_SCHEMA, &mut f);
    let status = answer_status(&top, &mut f);
    let result = top.get("result");
    let nested = result.and_then(|raw| answer_result(raw, &mut f));
    let provider = top
        .get("provider")
        .and_then(|raw| answer_provider(raw, &mut f));
    let error = top.get("error");
    if let Some(raw) = error {
        check_error(&mut f, raw);
    }
    check_request_id_matches(&top, scope, &mut f);
    let empty = Fields::default();
    let places: [(&Fields, &str); 2] = [(&top, ""), (nested.as_ref().unwrap_or(&empty), "/result")];
    for (fields, base) in places {
        check_sessions_match(fields, base, scope, &mut f);
        check_digest_matches(fields, base, scope, &mut f);
    }

    match status {
        Some(status) if f.is_clean() => Ok(Answer {
            status,
            provider,
            result,
            error,
        }),
        _ => Err(f),
    }
}

/// The members of `result` (an object or `null`), when it is an object.
fn answer_result<'t>(raw: &'t str, f: &mut Findings) -> Option<Fields<'t>> {
    match Kind::of(raw) {
        Kind::Null => None,
        Kind::Object => Fields::parse(raw),
        kind => {
            f.push(
                IssueKind::ResultInvalid,
                "/result",
                format!("result must be an object or null, found {}", kind.name()),
            );
            None
        }
    }
}

/// `provider`, when it is a non-empty string.
fn answer_provider<'t>(raw: &'t str, f: &mut Findings) -> Option<Cow<'t, str>> {
    match raw::string(raw) {
        Some(name) if !name.trim().is_empty() => Some(name),
        _ => {
            f.push(
                IssueKind::ResultInvalid,
                "/provider",
                format!(
                    "provider must be a non-empty string, found {}",
                    describe(raw)
                ),
            );
            None
        }
    }
}

/// The answer's `request_id`, when present, must be a string and the request's.
fn check_request_id_matches(top: &Fields, scope: &Scope, f: &mut Findings) {
    let Some(raw) = top.get("request_id") else {
        return;
    };
    let Some(got) = raw::string(raw) else {
        f.push(
            IssueKind::ResultInvalid,
            "/request_id",
            format!(
                "request_id must be a string, found {}",
                Kind::of(raw).name()
            ),
        );
        return;
    };
    if let Some(want) = &scope.request_id {
        if got.trim() != want {
            f.push(
                IssueKind::RequestIdMismatch,
                "/request_id",
                format!(
                    "the answer is for request {}, not {}",
                    quote_str(&got),
                    quote_str(want)
                ),
            );
        }
    }
}

/// Each session id in `fields` (under `base`), when present, must be a string and the
/// request's session.
fn check_sessions_match(fields: &Fields, base: &str, scope: &Scope, f: &mut Findings) {
    for key in ["sandbox_session_id", "session_id"] {
        let Some(raw) = fields.get(key) else { continue };
        let path = join(base, key);
        let Some(got) = raw::string(raw) else {
            f.push(
                IssueKind::ResultInvalid,
                path,
                format!("{key} must be a string, found {}", Kind::of(raw).name()),
            );
            continue;
        };
        if let Some(want) = &scope.session {
            if got.trim() != want {
                f.push(
                    IssueKind::ScopeMismatch,
                    path,
                    format!(
                        "the answer is for session {}, not {}",
                        quote_str(&got),
                        quote_str(want)
                    ),
                );
            }
        }
    }
}

/// The `source_digest` in `fields` (under `base`), when present, must be a valid digest and
/// the request's.
fn check_digest_matches(fields: &Fields, base: &str, scope: &Scope, f: &mut Findings) {
    let Some(raw) = fields.get("source_digest") else {
        return;
    };
    let path = join(base, "source_digest");
    match digest(raw) {
        Err(why) => f.push(
            IssueKind::ResultInvalid,
            path,
            format!("source_digest must be a 64-character SHA-256 hex digest: {why}"),
        ),
        Ok(got) => {
            if let Some(want) = &scope.source_digest {
                if &got != want {
                    f.push(
                        IssueKind::SourceDigestMismatch,
                        path,
                        format!(
                            "the answer was made from source {got}, not {want} (a stale \
                             or foreign source)"
                        ),
                    );
                }
            }
        }
    }
}

/// `status`; without one, the default of upstream's PHP validator (SPEC §8): `success: false`
/// → failed; no `success` but an `error` (not null) → failed; anything else → completed.
/// `success` and `status` both given must agree.
fn answer_status(top: &Fields, f: &mut Findings) -> Option<DelegationStatus> {
    let success = match top.get("success") {
        None => None,
        Some(raw) => match raw::boolean(raw) {
            Some(b) => Some(b),
            None => {
                f.push(
                    IssueKind::ResultInvalid,
                    "/success",
                    format!("success must be a boolean, found {}", Kind::of(raw).name()),
                );
                return None;
            }
        },
    };
    let status = match top.get("status") {
        Some(raw) => match raw::string(raw)
            .as_deref()
            .and_then(DelegationStatus::parse)
        {
            Some(status) => status,
            None => {
                f.push(
                    IssueKind::StatusInvalid,
                    "/status",
                    format!(
                        "status must be one of accepted, completed, failed, unavailable; found {}",
                        quote(raw)
                    ),
                );
                return None;
            }
        },
        None => match success {
            Some(false) => DelegationStatus::Failed,
            None if top
                .get("error")
                .is_some_and(|raw| Kind::of(raw) != Kind::Null) =>
            {
                DelegationStatus::Failed
            }
            Some(true) | None => DelegationStatus::Completed,
        },
    };
    match success {
        Some(success) if success != status.is_success() => {
            f.push(
                IssueKind::ResultInvalid,
                "/success",
                format!("success is {success} but status is {status}"),
            );
            None
        }
        _ => Some(status),
    }
}

/// `error`, when present: null, or an object with a non-empty string `code`, a string
/// `message`, and a boolean `retryable` when given.
fn check_error(f: &mut Findings, raw: &str) {
    if Kind::of(raw) == Kind::Null {
        return;
    }
    let Some(error) = Fields::parse(raw) else {
        f.push(
            IssueKind::ResultInvalid,
            "/error",
            format!(
                "error must be an object or null, found {}",
                Kind::of(raw).name()
            ),
        );
        return;
    };
    match error.get("code").map(|raw| (raw, raw::string(raw))) {
        Some((_, Some(code))) if !code.trim().is_empty() => {}
        found => f.push(
            IssueKind::ResultInvalid,
            "/error/code",
            format!(
                "error.code must be a non-empty string, found {}",
                found.map_or("nothing".into(), |(raw, _)| describe(raw))
            ),
        ),
    }
    match error.get("message") {
        Some(raw) if Kind::of(raw) == Kind::String => {}
        found => f.push(
            IssueKind::ResultInvalid,
            "/error/message",
            format!(
                "error.message must be a string, found {}",
                found.map_or("nothing", |raw| Kind::of(raw).name())
            ),
        ),
    }
    if let Some(raw) = error.get("retryable") {
        if raw::boolean(raw).is_none() {
            f.push(
                IssueKind::ResultInvalid,
                "/error/retryable",
                format!(
                    "error.retryable must be a boolean, found {}",
                    Kind::of(raw).name()
                ),
            );
        }
    }
}

/// A `source_digest` normalised to 64 lowercase hex characters: a string (surrounding
/// whitespace and case ignored), or an object whose `value`, `sha256` and `hash` members —
/// at least one, all that are present — hold that same digest, with `algorithm`, when
/// given, `sha256`. The error says why not.
pub fn digest(raw: &str) -> Result<String, String> {
    match Kind::of(raw) {
        Kind::String => hex64(&raw::string(raw).unwrap_or_default()),
        Kind::Object => {
            let fields = Fields::parse(raw).unwrap_or_default();
            if let Some(algorithm) = fields.get("algorithm") {
                match raw::string(algorithm) {
                    Some(a) if a.trim().eq_ignore_ascii_case("sha256") => {}
                    _ => return Err(format!("algorithm is {}, not \"sha256\"", quote(algorithm))),
                }
            }
            let mut found: Option<(&str, String)> = None;
            for key in DIGEST_KEYS {
                let Some(value) = fields.get(key) else {
                    continue;
                };
                let hex = match raw::string(value) {
                    Some(s) => hex64(&s).map_err(|why| format!("{key}: {why}"))?,
                    None => {
                        return Err(format!(
                            "{key} must be a string, found {}",
                            Kind::of(value).name()
                        ))
                    }
                };
                match &found {
                    Some((first, digest)) if *digest != hex => {
                        return Err(format!("{key} disagrees with {first}"))
                    }
                    Some(_) => {}
                    None => found = Some((key, hex)),
                }
            }
            found
                .map(|(_, hex)| hex)
                .ok_or_else(|| "an object needs value, sha256 or hash".to_string())
        }
        kind => Err(format!("found {}", kind.name())),
    }
}

fn hex64(s: &str) -> Result<String, String> {
    let t = s.trim();
    if t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(t.to_ascii_lowercase())
    } else {
        Err(format!("found {}", quote_str(s)))
    }
}

fn expect_kind(f: &mut Findings, kind: IssueKind, raw: &str, key: &str, want: Kind) {
    let got = Kind::of(raw);
    if got != want {
        f.push(
            kind,
            join("", key),
            format!("{key} must be {}, found {}", want.name(), got.name()),
        );
    }
}

/// A string value quoted (cut to [`QUOTE_CHARS`]); any other value by its kind.
fn quote(raw: &str) -> String {
    match raw::string(raw) {
        Some(s) => quote_str(&s),
        None => Kind::of(raw).name().to_string(),
    }
}

/// Like [`quote`], but an empty string reads as such.
fn describe(raw: &str) -> String {
    match raw::string(raw) {
        Some(s) if s.trim().is_empty() => "an empty string".into(),
        _ => quote(raw),
    }
}

fn quote_str(s: &str) -> String {
    let mut cut: String = s.chars().take(QUOTE_CHARS).collect();
    if cut.len() < s.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ptd_wire::validate::code_paths;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn request_issues(text: &str) -> Vec<(String, String)> {
        let (_, f) = check_request(text);
        code_paths(&f.into_issues())
            .into_iter()
            .map(|(c, p)| (c.to_string(), p.to_string()))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(c, p)| (c.to_string(), p.to_string()))
            .collect()
    }

    #[test]
    fn a_minimal_request_passes_and_yields_its_scope() {
        let text = format!(
            r#"{{"goal":" Check ","request_id":" r1 ","sandbox_session_id":"s1","source_digest":"{}"}}"#,
            A.to_uppercase()
        );
        let (scope, f) = check_request(&text);
        assert!(f.is_clean(), "{:?}", f.into_issues());
        assert_eq!(
            scope,
            Scope {
                request_id: Some("r1".into()),
                session: Some("s1".into()),
                source_digest: Some(A.into()),
            }
        );
        let (scope, f) = check_request(r#"{"task":"t","session_id":"s2"}"#);
        assert!(f.is_clean());
        assert_eq!(scope.session.as_deref(), Some("s2"));
    }

    #[test]
    fn every_request_rule_reports_its_own_issue() {
        let text = r#"{"schema":"wrong","goal":"  ","task":7,"target":[],"context":"x",
            "execution":1,"orchestrator":null,"metadata":true,"expected_artifacts":{},
            "request_id":"","sandbox_session_id":"a","session_id":"b","source_digest":"abc"}"#;
        assert_eq!(
            request_issues(text),
            pairs(&[
                ("schema-invalid", "/schema"),
                ("request-invalid", "/task"),
                ("request-invalid", "/goal"),
                ("request-invalid", "/target"),
                ("request-invalid", "/context"),
                ("request-invalid", "/execution"),
                ("request-invalid", "/orchestrator"),
                ("request-invalid", "/metadata"),
                ("request-invalid", "/expected_artifacts"),
                ("request-invalid", "/request_id"),
                ("request-invalid", "/session_id"),
                ("request-invalid", "/source_digest"),
            ])
        );
        assert_eq!(request_issues("[]"), pairs(&[("request-invalid", "")]));
    }

    #[test]
    fn request_ids_must_fit_an_environment_variable() {
        let long = format!(r#"{{"goal":"g","request_id":"{}"}}"#, "x".repeat(257));
        let fits = format!(r#"{{"goal":"g","request_id":"{}"}}"#, "x".repeat(256));
        assert_eq!(
            request_issues(&long),
            pairs(&[("request-invalid", "/request_id")])
        );
        assert_eq!(request_issues(&fits), pairs(&[]));
        assert_eq!(
            request_issues(r#"{"goal":"g","request_id":"a\u0000b"}"#),
            pairs(&[("request-invalid", "/request_id")])
        );
        assert_eq!(
            request_issues(r#"{"goal":"g","request_id":7}"#),
            pairs(&[("request-invalid", "/request_id")])
        );
    }

    #[test]
    fn the_failure_code_prefers_any_request_issue_over_the_digest() {
        use ptd_wire::error::delegation::Code;
        let (_, f) = check_request(r#"{"goal":"g","source_digest":"nope"}"#);
        assert_eq!(
            f.worst().map(IssueKind::request_code),
            Some(Code::SourceDigestInvalid)
        );
        let (_, f) = check_request(r#"{"source_digest":"nope"}"#);
        assert_eq!(
            f.worst().map(IssueKind::request_code),
            Some(Code::RequestInvalid)
        );
    }

    #[test]
    fn digests_come_as_strings_or_objects() {
        assert_eq!(digest(&format!("\" {A} \"")), Ok(A.into()));
        for ok in [
            format!(r#"{{"value":"{A}"}}"#),
            format!(r#"{{"sha256":"{A}","algorithm":"SHA256"}}"#),
            format!(r#"{{"hash":"{A}"}}"#),
            format!(r#"{{"value":"{A}","hash":"{}"}}"#, A.to_uppercase()),
        ] {
            assert_eq!(digest(&ok), Ok(A.into()), "{ok}");
        }
        for bad in [
            format!("\"{}\"", &A[1..]),
            format!("\"{}g\"", &A[1..]),
            "null".to_string(),
            "42".to_string(),
            "{}".to_string(),
            format!(r#"{{"value":"{A}","sha256":"{B}"}}"#),
            format!(r#"{{"value":"{A}","algorithm":"md5"}}"#),
            r#"{"value":7}"#.to_string(),
        ] {
            assert!(digest(&bad).is_err(), "{bad}");
        }
    }

    fn scope() -> Scope {
        Scope {
            request_id: Some("r1".into()),
            session: Some("s1".into()),
            source_digest: Some(A.into()),
        }
    }

    fn answer_issues(text: &str) -> (Option<IssueKind>, Vec<(String, String)>) {
        match check_answer(text, &scope()) {
            Ok(_) => (None, Vec::new()),
            Err(f) => {
                let worst = f.worst();
                let issues = f.into_issues();
                (
                    worst,
                    code_paths(&issues)
                        .into_iter()
                        .map(|(c, p)| (c.to_string(), p.to_string()))
                        .collect(),
                )
            }
        }
    }

    #[test]
    fn a_matching_answer_passes() {
        let text = format!(
            r#"{{"schema":"{RESULT_SCHEMA}","status":"completed","request_id":"r1",
               "sandbox_session_id":"s1","source_digest":{{"value":"{A}"}},"provider":"p",
               "result":{{"session_id":"s1","source_digest":"{A}","ok":true}}}}"#
        );
        let answer = check_answer(&text, &scope()).unwrap();
        assert_eq!(answer.status, DelegationStatus::Completed);
        assert_eq!(answer.provider.as_deref(), Some("p"));
        assert!(answer.result.unwrap().contains("\"ok\":true"));
        let answer = check_answer(r#"{"success":false}"#, &scope()).unwrap();
        assert_eq!(answer.status, DelegationStatus::Failed);
        let answer = check_answer(r#"{"success":true,"result":null}"#, &scope()).unwrap();
        assert_eq!(answer.status, DelegationStatus::Completed);
    }

    #[test]
    fn every_answer_rule_reports_its_own_issue() {
        let (worst, issues) = answer_issues(
            r#"{"schema":"x","status":"maybe","result":[1],"provider":3,"error":{"code":""},
                "request_id":"r2","session_id":"s2","source_digest":"zz"}"#,
        );
        assert_eq!(worst, Some(IssueKind::SchemaInvalid));
        assert_eq!(
            issues,
            pairs(&[
                ("schema-invalid", "/schema"),
                ("result-invalid", "/status"),
                ("result-invalid", "/result"),
                ("result-invalid", "/provider"),
                ("result-invalid", "/error/code"),
                ("result-invalid", "/error/message"),
                ("request-id-mismatch", "/request_id"),
                ("scope-mismatch", "/session_id"),
                ("result-invalid", "/source_digest"),
            ])
        );
    }

    #[test]
    fn nested_scope_values_are_checked_too() {
        let (worst, issues) = answer_issues(&format!(
            r#"{{"status":"completed","sandbox_session_id":"s1",
                "result":{{"sandbox_session_id":"s9","source_digest":"{B}"}}}}"#
        ));
        assert_eq!(worst, Some(IssueKind::ScopeMismatch));
        assert_eq!(
            issues,
            pairs(&[
                ("scope-mismatch", "/result/sandbox_session_id"),
                ("source-digest-mismatch", "/result/source_digest"),
            ])
        );
    }

    #[test]
    fn a_missing_status_defaults_as_upstream_does() {
        for (text, want) in [
            (r#"{"success":false}"#, DelegationStatus::Failed),
            (
                r#"{"success":false,"result":{"x":1}}"#,
                DelegationStatus::Failed,
            ),
            (
                r#"{"error":{"code":"quota","message":"spent"}}"#,
                DelegationStatus::Failed,
            ),
            (r#"{"error":null}"#, DelegationStatus::Completed),
            (r#"{}"#, DelegationStatus::Completed),
            (r#"{"result":{"ok":true}}"#, DelegationStatus::Completed),
            (r#"{"success":true}"#, DelegationStatus::Completed),
            // success says how it went; the error is only passed on.
            (
                r#"{"success":true,"error":{"code":"warn","message":"w"}}"#,
                DelegationStatus::Completed,
            ),
        ] {
            let answer = check_answer(text, &scope()).unwrap_or_else(|f| panic!("{text}: {f:?}"));
            assert_eq!(answer.status, want, "{text}");
        }
    }

    #[test]
    fn status_and_success_must_agree() {
        for (text, path) in [
            (r#"{"status":"completed","success":false}"#, "/success"),
            (r#"{"status":"failed","success":true}"#, "/success"),
            (r#"{"success":"no"}"#, "/success"),
            (r#"{"status":"Completed"}"#, "/status"),
            (r#"{"status":1}"#, "/status"),
        ] {
            let (_, issues) = answer_issues(text);
            assert_eq!(issues.len(), 1, "{text}: {issues:?}");
            assert_eq!(issues[0].1, path, "{text}");
        }
    }

    #[test]
    fn an_answer_without_a_scope_to_match_is_only_checked_for_shape() {
        let text = format!(r#"{{"status":"accepted","request_id":"x","source_digest":"{B}"}}"#);
        assert!(check_answer(&text, &Scope::default()).is_ok());
    }
}
