//! The `wp-codebox/parent-tool-request/v1` envelope (SPEC §2.2): its checks and the echo
//! fields every result must carry.
//!
//! `input` is opaque: it is carried through untouched and never interpreted here.

use crate::validate::{codes, Checker, Issue};
use serde_json::{Map, Value};

/// Schema id of the request.
pub const SCHEMA: &str = "wp-codebox/parent-tool-request/v1";
/// Longest accepted `request_id`, in bytes.
pub const MAX_REQUEST_ID_BYTES: usize = 256;

/// The three fields a result echoes back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Echo {
    pub request_id: String,
    pub tool: String,
    pub operation: String,
}

impl Echo {
    /// Whatever string `request_id`, `tool`, `operation` an unvalidated document has (empty
    /// strings otherwise), for envelopes about requests that failed validation.
    pub fn best_effort(doc: Option<&Map<String, Value>>) -> Echo {
        let field = |key: &str| {
            doc.and_then(|d| d.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Echo {
            request_id: field("request_id"),
            tool: field("tool"),
            operation: field("operation"),
        }
    }
}

/// A validated request.
#[derive(Debug, Clone)]
pub struct Request {
    /// The envelope as given (re-serialized for the adapter).
    pub raw: Map<String, Value>,
    pub echo: Echo,
    /// The request's own narrowing of the allowlist.
    pub allowed_tools: Vec<String>,
}

impl Request {
    /// Check `raw` and build the typed request, or return every issue.
    pub fn from_json(raw: Map<String, Value>) -> Result<Request, Vec<Issue>> {
        let mut c = Checker::new();
        c.constant(&raw, "", "schema", SCHEMA);
        c.version_one(&raw, "");
        let request_id = c.non_empty_string(&raw, "", "request_id");
        if let Some(id) = request_id {
            if id.len() > MAX_REQUEST_ID_BYTES {
                c.push(
                    codes::TOO_LONG,
                    "/request_id",
                    format!(
                        "\"request_id\" is {} bytes, over the {MAX_REQUEST_ID_BYTES}-byte limit",
                        id.len()
                    ),
                );
            }
        }
        let tool = c.non_empty_string(&raw, "", "tool");
        let operation = c.non_empty_string(&raw, "", "operation");
        c.required(&raw, "", "input");
        if let Some(session) = c.object(&raw, "", "sandbox_session") {
            c.non_empty_string(session, "/sandbox_session", "sandbox_session_id");
            c.optional_string(session, "/sandbox_session", "caller_session_id");
            c.optional_string(session, "/sandbox_session", "task_id");
        }
        let allowed_tools = c.object(&raw, "", "authorization").and_then(|auth| {
            c.optional_object(auth, "/authorization", "principal");
            c.optional_string(auth, "/authorization", "capability");
            c.string_array(auth, "/authorization", "allowed_tools")
        });
        c.object(&raw, "", "metadata");

        let echo = Echo::best_effort(Some(&raw));
        if let (Some(_), Some(_), Some(_), Some(allowed_tools)) =
            (request_id, tool, operation, allowed_tools)
        {
            c.finish(Request {
                raw,
                echo,
                allowed_tools,
            })
        } else {
            Err(c.into_issues())
        }
    }

    /// `metadata.bridge_ref` when the request pins a bridge.
    pub fn bridge_ref(&self) -> Option<&Value> {
        self.raw.get("metadata")?.get("bridge_ref")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(v: Value) -> Result<Request, Vec<Issue>> {
        let Value::Object(map) = v else {
            unreachable!()
        };
        Request::from_json(map)
    }

    fn sdk_shaped() -> Value {
        // What the upstream browser SDK builds: no caller/task ids, no principal/capability.
        json!({
            "schema": SCHEMA, "version": 1, "request_id": "ptr-lq2k3j-abcd1234",
            "tool": "workspace.read", "operation": "call", "input": null,
            "sandbox_session": {"sandbox_session_id": "s"},
            "authorization": {"allowed_tools": ["workspace.read"]}, "metadata": {}
        })
    }

    #[test]
    fn sdk_shaped_request_is_valid_and_input_may_be_null() {
        let r = request(sdk_shaped()).unwrap();
        assert_eq!(r.echo.tool, "workspace.read");
        assert_eq!(r.allowed_tools, ["workspace.read"]);
    }

    #[test]
    fn every_issue_is_reported() {
        let mut v = sdk_shaped();
        let obj = v.as_object_mut().unwrap();
        obj.remove("input");
        obj.insert("request_id".into(), json!("x".repeat(257)));
        obj.insert("tool".into(), json!(""));
        obj.insert(
            "sandbox_session".into(),
            json!({"sandbox_session_id": 5, "task_id": 1}),
        );
        obj.insert("authorization".into(), json!({"allowed_tools": "t"}));
        let issues = request(v).unwrap_err();
        let got = crate::validate::code_paths(&issues);
        assert_eq!(
            got,
            [
                ("too_long", "/request_id"),
                ("empty", "/tool"),
                ("missing", "/input"),
                ("wrong_type", "/sandbox_session/sandbox_session_id"),
                ("wrong_type", "/sandbox_session/task_id"),
                ("wrong_type", "/authorization/allowed_tools"),
            ]
        );
    }
}
