//! Properties of the whole pipeline, driven in process the way `replay` runs a recorded
//! answer (`dispatch::conclude_recorded`: admission, the recorded answer through
//! `judge::judge`, `Report::build`), via `fuzzing::dispatch_recorded`, which also checks every
//! concluded run: one valid envelope on one line, status, error and exit status in agreement,
//! ids echoed, and `succeeded` only for a valid request answered by a clean exit with a valid
//! `succeeded` envelope that echoes it.

use parent_tool_dispatch::delegation::checks;
use proptest::prelude::*;
use ptd_testkit::fuzzing::{dispatch_recorded, REQUEST};
use ptd_wire::envelope::bridge::Bridge;
use ptd_wire::envelope::request::Request;
use ptd_wire::envelope::result::{Audience, ResultEnvelope};
use ptd_wire::error::Status;
use ptd_wire::json::raw::{self, Fields};
use ptd_wire::json::{self, Document};
use ptd_wire::redact::Redactor;
use serde_json::{json, Map, Value};
use std::rc::Rc;

fn json_tree() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn request() -> Value {
    serde_json::from_str(REQUEST).unwrap()
}

/// A request that is valid, or one field away from valid: a member dropped, or replaced by
/// any JSON value.
fn near_request() -> impl Strategy<Value = Vec<u8>> {
    let keys = prop::sample::select(vec![
        "schema",
        "version",
        "request_id",
        "tool",
        "operation",
        "input",
        "sandbox_session",
        "authorization",
        "metadata",
    ]);
    (
        keys,
        prop::option::of(json_tree()),
        any::<bool>(),
        json_tree(),
    )
        .prop_map(|(key, replacement, untouched, input)| {
            let mut r = request();
            r["input"] = input;
            if !untouched {
                match replacement {
                    Some(value) => r[key] = value,
                    None => {
                        r.as_object_mut().unwrap().remove(key);
                    }
                }
            }
            serde_json::to_vec(&r).unwrap()
        })
}

/// A result envelope for [`REQUEST`], valid, with any output, status and error.
fn answer() -> impl Strategy<Value = Value> {
    let status = prop::sample::select(Status::ALL.to_vec());
    (
        status,
        json_tree(),
        json_tree(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(status, output, metadata, canonical, with_containers)| {
            let mut a = json!({
                "schema": "wp-codebox/parent-tool-result/v1", "version": 1,
                "request_id": "fuzz-1",
                "tool": if canonical { "workspace.read" } else { "workspace_read" },
                "operation": "call", "status": status.as_str(), "output": output,
            });
            if status != Status::Succeeded {
                a["error"] =
                    json!({"code": "adapter_said_no", "message": "no", "retryable": false});
            }
            if with_containers {
                a["artifacts"] = json!({"transcripts": [], "evidence": []});
                a["diagnostics"] = json!({"adapter": {"took_ms": 3}});
                a["metadata"] = json!({ "m": metadata });
            }
            a
        })
}

/// An answer that is valid, or one field away from valid.
fn near_answer() -> impl Strategy<Value = Vec<u8>> {
    let keys = prop::sample::select(vec![
        "schema",
        "version",
        "request_id",
        "tool",
        "operation",
        "status",
        "error",
        "artifacts",
        "diagnostics",
        "metadata",
    ]);
    (answer(), keys, prop::option::of(json_tree()), any::<bool>()).prop_map(
        |(mut a, key, replacement, untouched)| {
            if !untouched {
                match replacement {
                    Some(value) => a[key] = value,
                    None => {
                        a.as_object_mut().unwrap().remove(key);
                    }
                }
            }
            serde_json::to_vec(&a).unwrap()
        },
    )
}

fn exit_code() -> impl Strategy<Value = i32> {
    prop_oneof![Just(0), Just(1), Just(3), Just(77), Just(124), any::<i32>()]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    /// Any bytes as the request: one valid envelope, never `succeeded` without a valid
    /// request and a validated answer (checked inside `dispatch_recorded`).
    #[test]
    fn any_bytes_as_a_request_give_exactly_one_valid_envelope(
        request in prop_oneof![prop::collection::vec(any::<u8>(), 0..256), near_request()],
        stdout in prop_oneof![near_answer(), prop::collection::vec(any::<u8>(), 0..64)],
        exit in exit_code(),
    ) {
        let concluded = dispatch_recorded(&request, &stdout, exit);
        if concluded.status == Status::Succeeded {
            prop_assert_eq!(exit, 0);
            let doc = Rc::new(Document::parse(request.clone(), 1 << 20).unwrap());
            prop_assert!(Request::from_document(doc).is_ok());
        }
    }

    /// Any bytes as the adapter's stdout, after any exit: one valid envelope.
    #[test]
    fn any_bytes_as_an_answer_give_exactly_one_valid_envelope(
        stdout in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..512),
            near_answer(),
            near_answer().prop_map(|mut a| { a.splice(0..0, b"noise\n".iter().copied()); a }),
        ],
        exit in exit_code(),
    ) {
        let concluded = dispatch_recorded(REQUEST.as_bytes(), &stdout, exit);
        let valid = json::check_object(&stdout, 1 << 20)
            .ok()
            .and_then(|t| ResultEnvelope::check(t, None).ok())
            .map(|e| e.status);
        match (exit, valid) {
            // A clean exit with a valid envelope that echoes the request is passed on as is.
            (0, Some(status)) if concluded.status != Status::Failed => {
                prop_assert_eq!(concluded.status, status);
            }
            // A non-zero exit never succeeds.
            (code, _) if code != 0 => prop_assert_ne!(concluded.status, Status::Succeeded),
            _ => {}
        }
    }

    /// Every valid envelope, compact or pretty, reads back through the strict reader and the
    /// result checks, and its rendering is a valid envelope with the same ids, status, error
    /// and output.
    #[test]
    fn strict_reading_round_trips_every_valid_envelope(a in answer(), pretty in any::<bool>()) {
        let text = if pretty {
            serde_json::to_string_pretty(&a).unwrap()
        } else {
            serde_json::to_string(&a).unwrap()
        };
        let checked_text = json::check_object(text.as_bytes(), 1 << 20).unwrap();
        prop_assert_eq!(checked_text, text.as_str());
        let envelope = ResultEnvelope::check(&text, None).unwrap();
        prop_assert_eq!(envelope.status.as_str(), a["status"].as_str().unwrap());
        let rendered = envelope.render(&Redactor::new(), Audience::Caller);
        // Compared as text: numbers keep their exact spelling (a tree would round floats).
        let original = Fields::parse(&text).unwrap();
        let back = Fields::parse(&rendered).unwrap();
        for key in ["schema", "version", "request_id", "tool", "operation", "status", "output", "error"] {
            prop_assert_eq!(
                back.get(key).map(raw::minify),
                original.get(key).map(raw::minify),
                "{}", key
            );
        }
        let again = ResultEnvelope::check(&rendered, None).unwrap();
        prop_assert_eq!(again.status, envelope.status);
        // A valid request reads back the same way, and what the adapter gets is valid again.
        let mut r = request();
        r["input"] = a["output"].clone();
        let bytes = if pretty { serde_json::to_vec_pretty(&r) } else { serde_json::to_vec(&r) }.unwrap();
        let doc = Rc::new(Document::parse(bytes, 1 << 20).unwrap());
        let valid = Request::from_document(doc).unwrap();
        let sent = String::from_utf8(valid.for_adapter("workspace_read")).unwrap();
        let sent_fields = Fields::parse(sent.trim_end()).unwrap();
        let input = serde_json::to_string(&r["input"]).unwrap();
        prop_assert_eq!(sent_fields.get("input").map(raw::minify), Some(raw::minify(&input)));
        prop_assert_eq!(sent_fields.get("tool"), Some("\"workspace_read\""));
    }

    /// Validation never panics: every validator on any JSON document, and on any text.
    #[test]
    fn validation_never_panics(tree in json_tree(), text in any::<String>()) {
        for doc in [serde_json::to_string(&tree).unwrap(), text.clone()] {
            let _ = Bridge::load(doc.trim_start_matches('@'));
            if let Ok(document) = Document::parse(doc.clone().into_bytes(), 1 << 20) {
                let _ = Request::from_document(Rc::new(document));
            }
            if let Ok(checked) = json::check_object(doc.as_bytes(), 1 << 20) {
                let _ = ResultEnvelope::check(checked, None);
            }
            if let Ok(checked) = json::check(doc.as_bytes(), 1 << 20) {
                let (scope, _) = checks::check_request(checked);
                let _ = checks::check_answer(checked, &scope);
            }
        }
        // The same validators on the tree placed where each envelope expects its members.
        let mut b = Map::new();
        for key in ["schema", "version", "allowed_tools", "dispatcher", "sandbox_env", "authorization", "redaction", "metadata"] {
            b.insert(key.into(), tree.clone());
        }
        let _ = Bridge::from_json(b);
    }
}
