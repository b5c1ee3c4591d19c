//! The `wp-codebox/parent-tool-result/v1` envelope (SPEC §2.3, §4.5): checking an adapter's
//! answer and building the dispatcher's own envelopes.
//!
//! Checking normalises the containers (`artifacts`, `diagnostics`, `metadata` filled in when
//! absent) but never rewrites the adapter's `output` or `error`.

use super::request::Echo;
use crate::error::{ErrorCode, Status};
use crate::validate::{codes, join, Checker, Issue};
use serde_json::{json, Map, Value};

/// Schema id of the result.
pub const SCHEMA: &str = "wp-codebox/parent-tool-result/v1";

/// What the result must echo: the request as the adapter saw it, and the canonical tool id
/// (which the adapter may echo instead of the mapped one, SPEC §4.4).
#[derive(Debug, Clone, Copy)]
pub struct Expect<'a> {
    pub sent: &'a Echo,
    pub canonical_tool: &'a str,
}

/// Check an adapter's result (or a file given to `validate result`), fill absent containers,
/// and return the normalised envelope with its status — or every issue.
pub fn check(
    mut raw: Map<String, Value>,
    expect: Option<Expect>,
) -> Result<(Map<String, Value>, Status), Vec<Issue>> {
    let mut c = Checker::new();
    c.constant(&raw, "", "schema", SCHEMA);
    c.version_one(&raw, "");
    let got = (
        c.string(&raw, "", "request_id"),
        c.string(&raw, "", "tool"),
        c.string(&raw, "", "operation"),
    );
    if let (Some(expect), (request_id, tool, operation)) = (expect, got) {
        let sent = expect.sent;
        if request_id.is_some_and(|id| id != sent.request_id) {
            c.push(
                codes::REQUEST_ID_MISMATCH,
                "/request_id",
                "the result's request_id does not echo the request's",
            );
        }
        if tool.is_some_and(|t| t != sent.tool && t != expect.canonical_tool) {
            c.push(
                codes::TOOL_MISMATCH,
                "/tool",
                "the result's tool does not echo the request's",
            );
        }
        if operation.is_some_and(|op| op != sent.operation) {
            c.push(
                codes::OPERATION_MISMATCH,
                "/operation",
                "the result's operation does not echo the request's",
            );
        }
    }
    let status = c.string(&raw, "", "status").and_then(|s| {
        let status = Status::parse(s);
        if status.is_none() {
            c.push(
                codes::WRONG_VALUE,
                "/status",
                format!("\"status\" must be one of succeeded, denied, unavailable, timeout, failed; found {s:?}"),
            );
        }
        status
    });
    match (status, raw.get("error")) {
        (Some(Status::Succeeded) | None, None) => {}
        (Some(_), None) => c.push(
            codes::MISSING,
            "/error",
            "a non-succeeded result must carry \"error\"",
        ),
        (_, Some(error)) => check_error(&mut c, error),
    }
    check_artifacts(&mut c, raw.get("artifacts"));
    for key in ["diagnostics", "metadata"] {
        if let Some(value) = raw.get(key) {
            c.as_object(value, &join("", key));
        }
    }
    let status = match status {
        Some(status) if c.is_clean() => status,
        _ => return Err(c.into_issues()),
    };
    let artifacts = raw
        .entry("artifacts")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .expect("checked above");
    for list in ["transcripts", "evidence"] {
        artifacts.entry(list).or_insert_with(|| json!([]));
    }
    raw.entry("diagnostics").or_insert_with(|| json!({}));
    raw.entry("metadata").or_insert_with(|| json!({}));
    Ok((raw, status))
}

fn check_error(c: &mut Checker, error: &Value) {
    let Some(error) = c.as_object(error, "/error") else {
        return;
    };
    c.non_empty_string(error, "/error", "code");
    c.string(error, "/error", "message");
    if let Some(retryable) = c.required(error, "/error", "retryable") {
        c.as_bool(retryable, "/error/retryable");
    }
}

fn check_artifacts(c: &mut Checker, artifacts: Option<&Value>) {
    let Some(artifacts) = artifacts else { return };
    let Some(artifacts) = c.as_object(artifacts, "/artifacts") else {
        return;
    };
    for list in ["transcripts", "evidence"] {
        let path = join("/artifacts", list);
        match artifacts.get(list) {
            None => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    check_artifact_ref(c, item, &format!("{path}/{i}"));
                }
            }
            Some(other) => {
                c.as_string_array(other, &path);
            }
        }
    }
}

/// `{kind, path?, id?, uri?, sha256?, metadata?}`; `path` relative, `sha256` lowercase hex.
fn check_artifact_ref(c: &mut Checker, item: &Value, base: &str) {
    let Some(obj) = c.as_object(item, base) else {
        return;
    };
    c.non_empty_string(obj, base, "kind");
    if let Some(path) = c.optional_string(obj, base, "path") {
        if !is_relative_path(path) {
            c.push(
                codes::PATH_NOT_RELATIVE,
                join(base, "path"),
                "artifact paths must be relative and stay below their folder",
            );
        }
    }
    c.optional_string(obj, base, "id");
    c.optional_string(obj, base, "uri");
    if let Some(sha) = c.optional_string(obj, base, "sha256") {
        if !(sha.len() == 64
            && sha
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        {
            c.push(
                codes::INVALID_SHA256,
                join(base, "sha256"),
                "sha256 must be 64 lowercase hex characters",
            );
        }
    }
    c.optional_object(obj, base, "metadata");
}

fn is_relative_path(path: &str) -> bool {
    let drive = path.len() >= 2 && path.as_bytes()[1] == b':';
    !path.is_empty()
        && !path.starts_with('/')
        && !path.starts_with('\\')
        && !drive
        && !path.split(['/', '\\']).any(|part| part == "..")
}

/// An envelope the dispatcher writes itself: `status` with `error {code, message, retryable}`
/// (`details` when given), empty artifacts, diagnostics and metadata.
pub fn failure(
    echo: &Echo,
    status: Status,
    code: ErrorCode,
    message: &str,
    details: Option<Value>,
) -> Map<String, Value> {
    let mut error = json!({
        "code": code.as_str(),
        "message": message,
        "retryable": code.retryable(),
    });
    if let Some(details) = details {
        error["details"] = details;
    }
    let Value::Object(map) = json!({
        "schema": SCHEMA,
        "version": 1,
        "request_id": echo.request_id,
        "tool": echo.tool,
        "operation": echo.operation,
        "status": status.as_str(),
        "error": error,
        "artifacts": {"transcripts": [], "evidence": []},
        "diagnostics": {},
        "metadata": {},
    }) else {
        unreachable!("json! of an object literal is an object")
    };
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo() -> Echo {
        Echo {
            request_id: "r1".into(),
            tool: "ext_tool".into(),
            operation: "call".into(),
        }
    }

    fn check_json(v: Value) -> Result<(Map<String, Value>, Status), Vec<Issue>> {
        let Value::Object(map) = v else {
            unreachable!()
        };
        let sent = echo();
        check(
            map,
            Some(Expect {
                sent: &sent,
                canonical_tool: "canon.tool",
            }),
        )
    }

    #[test]
    fn minimal_success_gets_its_containers() {
        let (map, status) = check_json(json!({
            "schema": SCHEMA, "version": 1, "request_id": "r1", "tool": "canon.tool",
            "operation": "call", "status": "succeeded", "output": [1]
        }))
        .unwrap();
        assert_eq!(status, Status::Succeeded);
        assert_eq!(map["artifacts"], json!({"transcripts": [], "evidence": []}));
        assert_eq!(map["diagnostics"], json!({}));
        assert_eq!(map["output"], json!([1]));
    }

    #[test]
    fn echo_and_shape_errors_are_all_reported() {
        let issues = check_json(json!({
            "schema": SCHEMA, "version": 1, "request_id": "other", "tool": "x",
            "operation": "read", "status": "failed", "error": {"code": "", "retryable": "no"},
            "artifacts": {"transcripts": [{"kind": "t", "path": "/etc/x", "sha256": "ABC"}]},
            "diagnostics": []
        }))
        .unwrap_err();
        let got = crate::validate::code_paths(&issues);
        assert_eq!(
            got,
            [
                ("request_id_mismatch", "/request_id"),
                ("tool_mismatch", "/tool"),
                ("operation_mismatch", "/operation"),
                ("empty", "/error/code"),
                ("missing", "/error/message"),
                ("wrong_type", "/error/retryable"),
                ("path_not_relative", "/artifacts/transcripts/0/path"),
                ("invalid_sha256", "/artifacts/transcripts/0/sha256"),
                ("wrong_type", "/diagnostics"),
            ]
        );
    }

    #[test]
    fn non_success_needs_an_error_and_unknown_status_is_refused() {
        let base = json!({"schema": SCHEMA, "version": 1, "request_id": "r1", "tool": "ext_tool", "operation": "call"});
        let mut v = base.clone();
        v["status"] = json!("denied");
        assert_eq!(check_json(v).unwrap_err()[0].code, "missing");
        let mut v = base;
        v["status"] = json!("maybe");
        assert_eq!(check_json(v).unwrap_err()[0].code, "wrong_value");
    }
}
