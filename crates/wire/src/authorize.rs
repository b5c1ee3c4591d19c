//! Authorization (SPEC §4.1 step 3): the tool must be in the bridge's allowlist AND in the
//! request's own `authorization.allowed_tools` (a request may narrow, never widen), and a
//! request that pins a bridge through `metadata.bridge_ref` must name this bridge.
//!
//! Pure checks on validated envelopes: this module never spawns or writes anything. The
//! allowlist is always checked on the canonical tool id, never on a mapped one (SPEC §4.4).

use crate::envelope::bridge::Bridge;
use crate::envelope::request::{BridgePin, Request};
use crate::error::ErrorCode;
use serde_json::{json, Value};

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    /// The tool is missing from the bridge's allowlist, the request's, or both.
    ToolNotAllowed { by_bridge: bool, by_request: bool },
    /// `metadata.bridge_ref` names another bridge (or is not a string).
    BridgeRefMismatch,
}

impl Denial {
    /// The stable error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Denial::ToolNotAllowed { .. } => ErrorCode::ToolNotAllowed,
            Denial::BridgeRefMismatch => ErrorCode::BridgeRefMismatch,
        }
    }

    /// One human sentence (names no host detail).
    pub fn message(&self, tool: &str) -> String {
        match self {
            Denial::ToolNotAllowed {
                by_bridge: false, ..
            } => {
                format!("tool {tool:?} is not in the bridge's allowed_tools")
            }
            Denial::ToolNotAllowed { .. } => {
                format!("tool {tool:?} is not in the request's authorization.allowed_tools")
            }
            Denial::BridgeRefMismatch => {
                "the request's metadata.bridge_ref does not match this bridge".to_string()
            }
        }
    }

    /// Machine-readable details for `error.details`.
    pub fn details(&self) -> Value {
        match self {
            Denial::ToolNotAllowed {
                by_bridge,
                by_request,
            } => json!({"allowed_by_bridge": by_bridge, "allowed_by_request": by_request}),
            Denial::BridgeRefMismatch => json!({}),
        }
    }
}

/// Decide whether `request` may run under `bridge`.
pub fn authorize(bridge: &Bridge, request: &Request, bridge_ref: &str) -> Result<(), Denial> {
    let tool = request.echo.tool.as_str();
    let by_bridge = bridge.allows(tool);
    let by_request = request.lists_its_tool;
    if !(by_bridge && by_request) {
        return Err(Denial::ToolNotAllowed {
            by_bridge,
            by_request,
        });
    }
    match &request.bridge_pin {
        None => Ok(()),
        Some(BridgePin::Ref(pinned)) if pinned == bridge_ref => Ok(()),
        Some(_) => Err(Denial::BridgeRefMismatch),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    fn bridge(tools: &[&str]) -> Bridge {
        let v = json!({
            "schema": "wp-codebox/parent-tool-bridge/v1", "version": 1, "allowed_tools": tools,
            "dispatcher": {"owner": "wp-codebox", "mode": "host_command", "command": {"argv": ["x"]},
                "request_schema": "wp-codebox/parent-tool-request/v1",
                "result_schema": "wp-codebox/parent-tool-result/v1"},
            "sandbox_env": {}, "authorization": {}, "redaction": {}, "metadata": {}
        });
        let Value::Object(map) = v else {
            unreachable!()
        };
        Bridge::from_json(map).unwrap()
    }

    fn request(tool: &str, allowed: &[&str], metadata: Value) -> Request {
        let v = json!({
            "schema": "wp-codebox/parent-tool-request/v1", "version": 1, "request_id": "r",
            "tool": tool, "operation": "call", "input": {},
            "sandbox_session": {"sandbox_session_id": "s"},
            "authorization": {"allowed_tools": allowed}, "metadata": metadata
        });
        let doc = crate::json::Document::parse(v.to_string().into_bytes(), 1 << 20);
        Request::from_document(std::rc::Rc::new(doc.unwrap())).unwrap()
    }

    #[test]
    fn both_lists_must_allow_the_tool() {
        let b = bridge(&["a", "b"]);
        let r = b.bridge_ref();
        assert_eq!(authorize(&b, &request("a", &["a"], json!({})), &r), Ok(()));
        assert_eq!(
            authorize(&b, &request("c", &["c"], json!({})), &r),
            Err(Denial::ToolNotAllowed {
                by_bridge: false,
                by_request: true
            })
        );
        assert_eq!(
            authorize(&b, &request("b", &["a"], json!({})), &r),
            Err(Denial::ToolNotAllowed {
                by_bridge: true,
                by_request: false
            })
        );
        assert!(authorize(&bridge(&[]), &request("a", &["a"], json!({})), &r).is_err());
    }

    #[test]
    fn a_pinned_bridge_ref_must_match() {
        let b = bridge(&["a"]);
        let r = b.bridge_ref();
        assert_eq!(
            authorize(
                &b,
                &request("a", &["a"], json!({"bridge_ref": r.clone()})),
                &r
            ),
            Ok(())
        );
        for pinned in [json!("sha256:00"), json!(1), Value::Object(Map::new())] {
            assert_eq!(
                authorize(&b, &request("a", &["a"], json!({"bridge_ref": pinned})), &r),
                Err(Denial::BridgeRefMismatch)
            );
        }
    }
}
