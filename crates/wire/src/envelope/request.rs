//! The `wp-codebox/parent-tool-request/v1` envelope (SPEC §2.2): its checks, the echo fields
//! every result must carry, and the bytes the adapter receives.
//!
//! The request is kept as the text it arrived in ([`Document`]): `input` is opaque and is
//! carried through untouched — never parsed into a tree, never re-formatted beyond dropping
//! insignificant whitespace — and so is every other member nobody needs to read. Checking looks
//! one level into `sandbox_session`, `authorization` and `metadata` and reads only what the
//! contract names there.

use crate::json::raw::{self, Fields, ObjectWriter};
use crate::json::Document;
use crate::validate::{Checker, Issue};
use std::rc::Rc;

/// Schema id of the request.
pub const SCHEMA: &str = "wp-codebox/parent-tool-request/v1";
/// Longest accepted `request_id`, in bytes.
pub const MAX_REQUEST_ID_BYTES: usize = 256;
/// Longest accepted `tool` and `operation`, in bytes. Both travel to the adapter in
/// environment variables, which the kernel caps at 128 KiB each; a request that could not be
/// passed on is the request's fault, so it is refused here with the field's path.
pub const MAX_NAME_BYTES: usize = 64 * 1024;

/// The request's fields (SPEC §2.2), in the order the schema lists them: what
/// [`Request::from_document`] checks and `schema request` publishes.
pub mod fields {
    use super::{MAX_NAME_BYTES, MAX_REQUEST_ID_BYTES};
    use crate::validate::Presence::{Optional, Required};
    use crate::validate::{Fact, Field, Shape, Spec, Type};

    pub const SCHEMA: Field = Field::new(
        "schema",
        Required,
        Spec::string(&[Fact::Const(super::SCHEMA)]),
    );
    pub use crate::validate::VERSION;
    pub const REQUEST_ID: Field = Field::new(
        "request_id",
        Required,
        Spec::string(&[
            Fact::Doc("At most 256 bytes of UTF-8 (the dispatcher counts bytes), no NUL (it travels in an environment variable)."),
            Fact::NonEmpty,
            Fact::MaxBytes(MAX_REQUEST_ID_BYTES),
            Fact::Passable(None),
        ]),
    );
    /// `tool` and `operation` travel to the adapter in environment variables.
    const NAME: &[Fact] = &[Fact::NonEmpty, Fact::Passable(Some(MAX_NAME_BYTES))];
    pub const TOOL: Field = Field::new("tool", Required, Spec::string(NAME));
    pub const OPERATION: Field = Field::new("operation", Required, Spec::string(NAME));
    /// Opaque product payload.
    pub(crate) const INPUT: Field = Field::new("input", Required, Spec::ANY);
    pub(crate) const SANDBOX_SESSION: Field =
        Field::new("sandbox_session", Required, Spec::object(&SESSION));
    pub(crate) const SESSION: Shape = Shape::of(&[
        &Field::new(
            "sandbox_session_id",
            Required,
            Spec::string(&[Fact::NonEmpty]),
        ),
        &Field::new("caller_session_id", Optional, Spec::STRING),
        &Field::new("task_id", Optional, Spec::STRING),
    ]);
    pub(crate) const AUTHORIZATION: Field = Field::new(
        "authorization",
        Required,
        Spec::object(&AUTHORIZATION_SHAPE),
    );
    pub(crate) const ALLOWED_TOOLS: Field = Field::new(
        "allowed_tools",
        Required,
        Spec::of(
            Type::Array(Some(&Spec::STRING)),
            &[Fact::Doc(
                "May narrow the bridge's allowlist, never widen it.",
            )],
        ),
    );
    pub(crate) const PRINCIPAL: Field = Field::new("principal", Optional, Spec::OBJECT);
    pub(crate) const CAPABILITY: Field = Field::new("capability", Optional, Spec::STRING);
    pub(crate) const AUTHORIZATION_SHAPE: Shape =
        Shape::of(&[&ALLOWED_TOOLS, &PRINCIPAL, &CAPABILITY]);
    pub(crate) const METADATA: Field = Field::new("metadata", Required, Spec::OBJECT);
    /// The envelope.
    pub const TOP: Shape = Shape::of(&[
        &SCHEMA,
        &VERSION,
        &REQUEST_ID,
        &TOOL,
        &OPERATION,
        &INPUT,
        &SANDBOX_SESSION,
        &AUTHORIZATION,
        &METADATA,
    ]);
}

/// The three fields a result echoes back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Echo {
    pub request_id: String,
    pub tool: String,
    pub operation: String,
}

impl Echo {
    /// Whatever string `request_id`, `tool`, `operation` a document has (empty strings
    /// otherwise), for envelopes about requests that failed validation.
    pub fn best_effort(doc: Option<&Document>) -> Echo {
        let field = |key: &str| {
            doc.and_then(|d| d.get(key))
                .and_then(raw::string)
                .map(|s| s.into_owned())
                .unwrap_or_default()
        };
        Echo {
            request_id: field("request_id"),
            tool: field("tool"),
            operation: field("operation"),
        }
    }
}

impl Echo {
    /// The same, from a document read as a tree (the reference adapters read their small
    /// requests that way).
    pub fn from_map(map: &serde_json::Map<String, serde_json::Value>) -> Echo {
        let field = |key: &str| {
            map.get(key)
                .and_then(serde_json::Value::as_str)
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

/// What `metadata.bridge_ref` says, when the request pins a bridge (SPEC §4.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BridgePin {
    /// A ref, to compare with the bridge's own.
    Ref(String),
    /// Present but not a string: it can match no bridge.
    NotAString,
}

/// A validated request.
#[derive(Debug, Clone)]
pub struct Request {
    doc: Rc<Document>,
    pub echo: Echo,
    /// Whether the request's own `authorization.allowed_tools` lists its `tool`.
    pub lists_its_tool: bool,
    /// `metadata.bridge_ref`, when present.
    pub bridge_pin: Option<BridgePin>,
}

impl Request {
    /// Check `doc` and build the typed request, or return every issue.
    pub fn from_document(doc: Rc<Document>) -> Result<Request, Vec<Issue>> {
        let mut c = Checker::new();
        let parsed = Fields::parse(doc.text()).unwrap_or_default();
        let top = &parsed;
        c.check(top, "", &fields::SCHEMA);
        c.check(top, "", &fields::VERSION);
        let request_id = c.check_str(top, "", &fields::REQUEST_ID);
        let tool = c.check_str(top, "", &fields::TOOL);
        let operation = c.check_str(top, "", &fields::OPERATION);
        for (field, value) in [
            (&fields::REQUEST_ID, &request_id),
            (&fields::TOOL, &tool),
            (&fields::OPERATION, &operation),
        ] {
            if let Some(value) = value {
                c.passable("", field, value);
            }
        }
        c.check(top, "", &fields::INPUT);
        if let Some(session) = c.check_object(top, "", &fields::SANDBOX_SESSION) {
            c.check_shape(&session, "/sandbox_session", &fields::SESSION);
        }
        let mut lists_its_tool = false;
        let mut allowlist_ok = false;
        if let Some(auth) = c.check_object(top, "", &fields::AUTHORIZATION) {
            const BASE: &str = "/authorization";
            c.check(&auth, BASE, &fields::PRINCIPAL);
            c.check(&auth, BASE, &fields::CAPABILITY);
            if let Some(list) = c.check(&auth, BASE, &fields::ALLOWED_TOOLS) {
                let wanted = tool.as_deref().unwrap_or_default();
                raw::for_each_item(list, |_, t| {
                    lists_its_tool |= raw::string(t).is_some_and(|t| t == wanted);
                });
                allowlist_ok = true;
            }
        }
        let bridge_pin = c.check_object(top, "", &fields::METADATA).and_then(|meta| {
            meta.get("bridge_ref").map(|pin| match raw::string(pin) {
                Some(s) => BridgePin::Ref(s.into_owned()),
                None => BridgePin::NotAString,
            })
        });

        if request_id.is_none() || tool.is_none() || operation.is_none() || !allowlist_ok {
            return Err(c.into_issues());
        }
        let echo = Echo::best_effort(Some(&doc));
        c.finish(Request {
            doc,
            echo,
            lists_its_tool,
            bridge_pin,
        })
    }

    /// The request as it arrived.
    pub fn document(&self) -> &Document {
        &self.doc
    }

    /// `sandbox_session.sandbox_session_id` as the request has it (checked present and a
    /// string when the request was built; empty otherwise).
    pub fn session_id(&self) -> String {
        Fields::parse(self.doc.text())
            .and_then(|top| top.get("sandbox_session").and_then(Fields::parse))
            .and_then(|session| session.get("sandbox_session_id").and_then(raw::string))
            .map(|id| id.into_owned())
            .unwrap_or_default()
    }

    /// The bytes the adapter receives (SPEC §4.2): the request, compact, with `tool` replaced
    /// by the id the adapter knows it by (§4.4), and a final newline. Every other member is
    /// copied as written.
    pub fn for_adapter(&self, tool: &str) -> Vec<u8> {
        let mut out = String::with_capacity(self.doc.len() + tool.len() + 1);
        let mut w = ObjectWriter::new(&mut out);
        for (key, value) in self.doc.members() {
            if key == "tool" {
                w.str(key, tool);
            } else {
                w.raw(key, value);
            }
        }
        w.finish();
        out.push('\n');
        out.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn request(v: Value) -> Result<Request, Vec<Issue>> {
        let doc = Document::parse(v.to_string().into_bytes(), 1 << 24).unwrap();
        Request::from_document(Rc::new(doc))
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
        assert!(r.lists_its_tool);
        assert_eq!(r.bridge_pin, None);
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

    #[test]
    fn what_cannot_travel_in_the_environment_is_the_requests_fault() {
        let mut v = sdk_shaped();
        v["request_id"] = json!("a\u{0}b");
        v["operation"] = json!("o".repeat(MAX_NAME_BYTES + 1));
        let issues = request(v).unwrap_err();
        let got = crate::validate::code_paths(&issues);
        assert_eq!(
            got,
            [("contains_nul", "/request_id"), ("too_long", "/operation")]
        );
    }

    #[test]
    fn non_string_allowlist_items_are_each_an_issue_and_the_pin_is_read() {
        let mut v = sdk_shaped();
        v["authorization"]["allowed_tools"] = json!(["workspace.read", 3, null]);
        let got = crate::validate::code_paths(&request(v.clone()).unwrap_err()).len();
        assert_eq!(got, 2);
        v["authorization"]["allowed_tools"] = json!(["other"]);
        v["metadata"]["bridge_ref"] = json!(7);
        let r = request(v).unwrap();
        assert!(!r.lists_its_tool);
        assert_eq!(r.bridge_pin, Some(BridgePin::NotAString));
    }

    #[test]
    fn the_adapter_gets_the_request_compact_with_its_tool_and_numbers_as_written() {
        let text = r#"{ "schema": "wp-codebox/parent-tool-request/v1", "version": 1,
            "request_id": "r", "tool": "workspace.read", "operation": "call",
            "input": {"n": 12345678901234567890123, "f": 1e400, "s": "a  b"},
            "sandbox_session": {"sandbox_session_id": "s"},
            "authorization": {"allowed_tools": ["workspace.read"]}, "metadata": {} }"#;
        let doc = Document::parse(text.as_bytes().to_vec(), 1 << 20).unwrap();
        let r = Request::from_document(Rc::new(doc)).unwrap();
        let sent = String::from_utf8(r.for_adapter("workspace_read")).unwrap();
        assert!(sent.ends_with("}\n") && !sent[..sent.len() - 1].contains('\n'));
        assert!(sent.contains(r#""tool":"workspace_read""#), "{sent}");
        assert!(
            sent.contains(r#""input":{"n":12345678901234567890123,"f":1e400,"s":"a  b"}"#),
            "{sent}"
        );
    }
}
