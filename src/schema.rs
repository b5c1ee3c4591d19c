//! The published JSON Schemas (draft 2020-12): the three envelopes of the contract, the
//! transcript this dispatcher writes, the replay fixture format (SPEC §3, §7), the delegation
//! envelopes (built with the delegation code) and the host policy file (built by `ptd-policy`,
//! beside its loader).
//!
//! The bridge, request and result schemas are written from the descriptions of the envelopes'
//! fields (`envelope::{bridge,request,result}::fields`), the same data their checks read, so a
//! field's type, presence, constants, enums, lengths and patterns are stated once; the
//! transcript's and the fixture's schemas are built here as data. `schema KIND` prints them and
//! `fixtures/schemas/` holds the committed copies (a test fails when they drift;
//! `UPDATE_GENERATED=1` re-blesses).
//!
//! Invariants:
//! - The three envelope schemas keep upstream's `$id` and stay compatible with upstream's
//!   published schemas: at least the same `required` keys at every level upstream names, the
//!   same `const` and `enum` values, the same types. Ours may be stricter (inner shapes, string
//!   lengths, conditional requirements), never looser.
//! - They describe what the validators in `envelope/` accept, as far as JSON Schema can say
//!   it; the validators stay the authority (byte-level rules such as duplicate keys, nesting
//!   depth and lengths in bytes are theirs alone).
//!
//! It must not validate anything itself: the product's checks live in `envelope/` and
//! `replay/cases.rs`; the schemas are for other tools and for people. What the checks do beyond
//! the descriptions (the echo, NUL bytes in argv and env values) is theirs alone.

use crate::cli::SchemaKind;
use ptd_wire::envelope::{bridge, request, result};
use ptd_wire::transcript;
use ptd_wire::validate::{Fact, Presence, Shape, Spec, Type, ENV_NAME};
use serde_json::{json, Map, Value};

/// The JSON Schema dialect every schema declares.
pub(crate) const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";
/// Schema id of a replay case file.
pub(crate) const FIXTURE_SCHEMA: &str = "parent-tool-dispatch/fixture/v1";
/// The request fields that travel in environment variables hold no NUL.
const NO_NUL_PATTERN: &str = r"^[^\x00]*$";

/// The file name of the committed copy in `fixtures/schemas/`.
pub fn file_name(kind: SchemaKind) -> &'static str {
    match kind {
        SchemaKind::Bridge => "parent-tool-bridge.schema.json",
        SchemaKind::Request => "parent-tool-request.schema.json",
        SchemaKind::Result => "parent-tool-result.schema.json",
        SchemaKind::Transcript => "tool-call-transcript.schema.json",
        SchemaKind::Fixture => "fixture.schema.json",
        SchemaKind::Policy => "policy.schema.json",
        other => delegation_kind(other).map_or("", |k| k.file_name()),
    }
}

/// The delegation schema behind a `delegation-*` kind (they live with the delegation code).
fn delegation_kind(kind: SchemaKind) -> Option<crate::delegation::schema::Kind> {
    use crate::delegation::schema::Kind;
    match kind {
        SchemaKind::DelegationRequest => Some(Kind::Request),
        SchemaKind::DelegationResult => Some(Kind::Result),
        SchemaKind::DelegationEvent => Some(Kind::Event),
        SchemaKind::Bridge
        | SchemaKind::Request
        | SchemaKind::Result
        | SchemaKind::Transcript
        | SchemaKind::Fixture
        | SchemaKind::Policy => None,
    }
}

/// Every kind, in the order `schema --help` lists them.
pub const ALL: [SchemaKind; 9] = [
    SchemaKind::Bridge,
    SchemaKind::Request,
    SchemaKind::Result,
    SchemaKind::Transcript,
    SchemaKind::Fixture,
    SchemaKind::DelegationRequest,
    SchemaKind::DelegationResult,
    SchemaKind::DelegationEvent,
    SchemaKind::Policy,
];

/// The schema of `kind` as a JSON value.
pub fn schema(kind: SchemaKind) -> Value {
    match kind {
        SchemaKind::Bridge => bridge_schema(),
        SchemaKind::Request => request_schema(),
        SchemaKind::Result => result_schema(),
        SchemaKind::Transcript => transcript_schema(),
        SchemaKind::Fixture => fixture_schema(),
        SchemaKind::Policy => ptd_policy::schema(),
        other => delegation_kind(other).map_or(Value::Null, crate::delegation::schema::schema),
    }
}

/// The schema of `kind` as `schema KIND` prints it: pretty JSON and a final newline.
pub fn render(kind: SchemaKind) -> String {
    let mut text = serde_json::to_string_pretty(&schema(kind)).unwrap_or_default();
    text.push('\n');
    text
}

/// `schema KIND`: print it; exit 0 (74 when stdout could not be written).
pub fn print(kind: SchemaKind) -> u8 {
    ptd_wire::stdout::print(
        render(kind).as_bytes(),
        "the schema",
        ptd_wire::error::exit::SUCCESS,
    )
}

/// The schema of a value described by `spec`: `type`, then what each fact states, in the
/// facts' order, then what the type holds (items, members).
pub(crate) fn spec_schema(spec: &Spec) -> Value {
    let mut out = Map::new();
    let ty = match spec.ty {
        Type::Any => None,
        Type::String => Some("string"),
        Type::Boolean => Some("boolean"),
        Type::Integer => Some("integer"),
        Type::Object(_) | Type::Map { .. } => Some("object"),
        Type::Array(_) => Some("array"),
        Type::Ref(name, _) => return json!({"$ref": format!("#/$defs/{name}")}),
    };
    if let Some(ty) = ty {
        out.insert("type".into(), ty.into());
    }
    let array = matches!(spec.ty, Type::Array(_));
    for fact in spec.facts {
        let (key, value) = match *fact {
            Fact::Doc(text) => ("description", text.into()),
            Fact::NonEmpty if array => ("minItems", 1.into()),
            Fact::NonEmpty => ("minLength", 1.into()),
            Fact::FirstNonEmpty => ("prefixItems", json!([{"type": "string", "minLength": 1}])),
            Fact::MaxBytes(max) => ("maxLength", max.into()),
            Fact::Passable(max) => {
                if let Some(max) = max {
                    out.insert("maxLength".into(), max.into());
                }
                ("pattern", NO_NUL_PATTERN.into())
            }
            Fact::Const(value) | Fact::Supported(value) => ("const", value.into()),
            Fact::OneOf([value], _) => ("const", (*value).into()),
            Fact::OneOf(values, _) => ("enum", values.into()),
            Fact::ConstInt(value) => ("const", value.into()),
            Fact::Min(min) => ("minimum", min.into()),
            Fact::Pattern(pattern) => ("pattern", pattern.regex.into()),
            Fact::DefaultStr(value) => ("default", value.into()),
            Fact::DefaultInt(value) => ("default", value.into()),
        };
        out.insert(key.into(), value);
    }
    match spec.ty {
        Type::Array(Some(items)) => {
            out.insert("items".into(), spec_schema(items));
        }
        Type::Map { names, values } => {
            if let Some(names) = names {
                out.insert("propertyNames".into(), json!({"pattern": names.regex}));
            }
            if let Some(values) = values {
                out.insert("additionalProperties".into(), spec_schema(values));
            }
        }
        Type::Object(Some(shape)) => out.extend(shape_schema(shape)),
        _ => {}
    }
    Value::Object(out)
}

/// `required`, `properties` and the conditional requirements (`allOf`) of a shape.
fn shape_schema(shape: &Shape) -> Map<String, Value> {
    let mut out = Map::new();
    let required: Vec<&str> = shape
        .fields
        .iter()
        .filter(|f| f.schema_requires())
        .map(|f| f.key)
        .collect();
    if !required.is_empty() {
        out.insert("required".into(), required.into());
    }
    let properties = shape
        .fields
        .iter()
        .map(|f| (f.key.to_string(), spec_schema(&f.spec)))
        .collect();
    out.insert("properties".into(), Value::Object(properties));
    let conditions: Vec<Value> = shape
        .conditional
        .iter()
        .filter_map(|f| match f.presence {
            Presence::When(condition) => Some((f.key, condition)),
            _ => None,
        })
        .map(|(then, c)| {
            let test = if c.negated {
                json!({"not": {"const": c.value}})
            } else {
                json!({"const": c.value})
            };
            json!({
                "if": {"properties": {c.when.key: test}, "required": [c.when.key]},
                "then": {"required": [then]}
            })
        })
        .collect();
    if !conditions.is_empty() {
        out.insert("allOf".into(), conditions.into());
    }
    out
}

/// An envelope's schema: its header, then its fields.
fn envelope_schema(
    id: &str,
    title: &str,
    description: &str,
    top: &'static Shape,
) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("$schema".into(), DIALECT.into());
    out.insert("$id".into(), id.into());
    out.insert("title".into(), title.into());
    out.insert("description".into(), description.into());
    if let Value::Object(body) = spec_schema(&Spec::object(top)) {
        out.extend(body);
    }
    out
}

fn constant(value: &str) -> Value {
    json!({"type": "string", "const": value})
}

/// The contract's five statuses, in the order upstream lists them.
fn statuses() -> Value {
    spec_schema(&result::fields::STATUS.spec)
}

fn argv() -> Value {
    spec_schema(&bridge::fields::ARGV.spec)
}

fn bridge_schema() -> Value {
    Value::Object(envelope_schema(
        bridge::SCHEMA,
        "wp-codebox parent-tool bridge",
        "The host's policy: which tools a sandbox may call, which dispatcher serves them, under what timeout. Unknown keys are allowed everywhere (forward compatibility).",
        &bridge::fields::TOP,
    ))
}

fn request_schema() -> Value {
    Value::Object(envelope_schema(
        request::SCHEMA,
        "wp-codebox parent-tool request",
        "One tool call from the sandbox. `input` is opaque product payload. Readers must refuse duplicate keys at any depth and nesting deeper than 128 levels (JSON Schema cannot say so).",
        &request::fields::TOP,
    ))
}

/// `diagnostics.dispatch.network` (SPEC §17).
fn network_diagnostics() -> Value {
    let int = json!({"type": "integer", "minimum": 0});
    json!({
        "type": "object",
        "description": "With --network allow: (SPEC 17): the connections the adapter asked the egress proxy for. Changes from run to run: replay never compares it.",
        "required": ["mode", "connections", "allowed", "refused"],
        "additionalProperties": false,
        "properties": {
            "mode": {"const": "allow"},
            "connections": {
                "type": "array",
                "maxItems": 64,
                "description": "The first 64 connections, in the order they arrived.",
                "items": {
                    "type": "object",
                    "required": ["host", "port", "allowed", "bytes_up", "bytes_down"],
                    "additionalProperties": false,
                    "properties": {
                        "host": {"type": "string", "description": "The host as asked: lower case, an IPv6 address in brackets."},
                        "port": {"type": "integer", "minimum": 0, "maximum": 65535},
                        "allowed": {"type": "boolean"},
                        "reason": {"type": "string", "description": "Why it was refused (the 403's one line), or why an allowed one was cut short."},
                        "bytes_up": int,
                        "bytes_down": int
                    }
                }
            },
            "more": {"type": "integer", "minimum": 1, "description": "Connections past the first 64, not listed."},
            "allowed": int,
            "refused": int
        }
    })
}

fn dispatch_diagnostics() -> Value {
    let int = json!({"type": "integer", "minimum": 0});
    let text = json!({"type": "string"});
    json!({
        "type": "object",
        "description": "What the dispatcher itself reports; it replaces any `dispatch` member an answer wrote.",
        "properties": {
            "version": text,
            "adapter_started": {"type": "boolean"},
            "timeout_ms": {"type": "integer", "minimum": 1},
            "transport": {"type": "string", "enum": ["stdin", "file", "http", "replay"], "description": "stdin or file for a process, http for a host_endpoint POST, replay for a recorded answer."},
            "endpoint": {"type": "string", "description": "host_endpoint mode: the endpoint's origin, scheme://host:port (never the rest of its URL)."},
            "http_status": {"type": "integer", "minimum": 100, "maximum": 599, "description": "host_endpoint mode: the endpoint's HTTP status, once one was received."},
            "response_bytes": {"type": "integer", "minimum": 0, "description": "host_endpoint mode: bytes of the endpoint's response body received."},
            "exit_code": {"type": ["integer", "null"]},
            "signal": {"type": ["string", "null"]},
            "stdout_bytes": int,
            "stdin_bytes_written": int,
            "stdin_error": {"type": ["string", "null"]},
            "stderr_tail": text,
            "stderr_truncated": {"type": "boolean"},
            "leaked_processes": int,
            "resources": {
                "type": "object",
                "description": "What the adapter's whole process tree used, confined or not (SPEC 13); absent for a recorded answer. Changes from run to run: replay never compares it.",
                "required": ["max_rss_bytes", "user_ms", "system_ms"],
                "properties": {
                    "max_rss_bytes": {"type": "integer", "minimum": 0, "description": "The largest resident set size any single process of the tree reached (getrusage RUSAGE_CHILDREN; the adapter's own peak when the dispatcher inherited a larger one across execve), in bytes."},
                    "user_ms": {"type": "integer", "minimum": 0, "description": "CPU time in user mode, summed over the tree, in milliseconds."},
                    "system_ms": {"type": "integer", "minimum": 0, "description": "CPU time in the kernel, summed over the tree, in milliseconds."}
                }
            },
            "stdout_head": text,
            "confinement": confinement_diagnostics(),
            "policy": {
                "type": "object",
                "description": "The host policy's entry that decided the call (SPEC 16); absent without --policy or before the call was routed.",
                "required": ["sha256", "entry"],
                "additionalProperties": false,
                "properties": {
                    "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "SHA-256 of the policy file's bytes."},
                    "entry": {"type": "string", "minLength": 1, "description": "The deciding entry's `match` as written, or `defaults` when no entry matched."},
                    "line": {"type": "integer", "minimum": 1, "description": "The line of the entry's header (`[[tool]]`, or `[defaults]`); absent when no entry matched and the file has no [defaults]."}
                }
            },
            "network": network_diagnostics(),
            "duration_ms": int,
            "trace_id": {"type": "string", "pattern": "^[0-9a-f]{32}$", "description": "With telemetry on (SPEC 20): the trace id of the call's span, so that a host can find the trace of an envelope. Changes from run to run: replay never compares it."},
            "transcript_error": text,
            "result_file_error": text
        }
    })
}

/// `diagnostics.dispatch.confinement` (SPEC §13 "Reported").
fn confinement_diagnostics() -> Value {
    let int = json!({"type": "integer", "minimum": 0});
    let paths = json!({"type": "array", "items": {"type": "string"}});
    let version = json!({"type": "string", "enum": ["v1", "v2"]});
    json!({
        "type": "object",
        "description": "What confined the adapter; absent when nothing did. Paths are host paths, redacted.",
        "required": ["mechanisms", "network", "limits"],
        "properties": {
            "mechanisms": {
                "type": "array",
                "description": "In force, in the order of the child's set-up.",
                "items": {"type": "string", "enum": ["cgroup", "rlimits", "user_namespace", "pid_namespace", "network_namespace", "no_privileges", "no_new_privs", "landlock", "seccomp"]}
            },
            "run_as": {
                "type": "object",
                "description": "The user and group the adapter ran as (never 0), with no capability (SPEC 13.2).",
                "required": ["uid", "gid"],
                "properties": {"uid": int, "gid": int}
            },
            "landlock": {
                "type": "object",
                "required": ["abi", "scoped", "fs_read", "fs_write"],
                "properties": {
                    "abi": {"type": "integer", "minimum": 1, "description": "The kernel's Landlock ABI."},
                    "scoped": {"type": "boolean", "description": "Signals and abstract unix sockets scoped to the adapter (ABI 6+)."},
                    "fs_read": paths,
                    "fs_write": paths
                }
            },
            "network": {"type": "string", "enum": ["none", "any"]},
            "limits": {
                "type": "object",
                "properties": {
                    "memory_bytes": int,
                    "pids": int,
                    "open_files": int,
                    "file_size_bytes": int
                }
            },
            "cgroup": {
                "type": "object",
                "description": "The cgroup interface each tree limit is used through.",
                "properties": {"memory": version, "pids": version}
            }
        }
    })
}

fn ledger_diagnostics() -> Value {
    json!({
        "type": "object",
        "description": "What the ledger (--ledger, SPEC 14) did with the call; it replaces any `ledger` member an answer wrote.",
        "required": ["replayed"],
        "properties": {
            "replayed": {"type": "boolean", "description": "True when this is a recorded envelope printed again: nothing was started and no transcript written; the rest of the envelope is the recorded one."},
            "attempt": {"type": "integer", "minimum": 1, "description": "The attempt of the call's key that produced the envelope (more than 1 after retryable outcomes)."},
            "adapter_ms_left": {"type": "integer", "minimum": 0, "description": "The session's adapter time left under --budget-adapter-ms when the call started (its timeout was cut to it)."},
            "error": {"type": "string", "description": "Why the outcome could not be recorded; the envelope is the real one nonetheless."}
        }
    })
}

fn result_schema() -> Value {
    let mut out = envelope_schema(
        result::SCHEMA,
        "wp-codebox parent-tool result",
        "The outcome of one tool call. Every status other than succeeded carries `error`.",
        &result::fields::TOP,
    );
    out.insert(
        "$defs".into(),
        json!({
            "artifact_ref": spec_schema(&Spec::object(&result::fields::ARTIFACT_REF)),
            "dispatch_diagnostics": dispatch_diagnostics(),
            "ledger_diagnostics": ledger_diagnostics()
        }),
    );
    Value::Object(out)
}

fn transcript_schema() -> Value {
    let digest = json!({
        "type": "object",
        "required": ["algorithm", "value"],
        "properties": {
            "algorithm": constant("sha256"),
            "value": {"type": "string", "pattern": result::fields::SHA256.regex}
        }
    });
    json!({
        "$schema": DIALECT,
        "$id": transcript::SCHEMA,
        "title": "Tool-call transcript written by --artifact-dir",
        "description": "One redacted record per dispatch, in the upstream tool-call-transcript shape. `replay` replays each tool call: its request against a bridge, its result as the answer, its status as the expectation.",
        "type": "object",
        "required": ["schema", "tool_calls", "redaction", "metadata"],
        "properties": {
            "schema": constant(transcript::SCHEMA),
            "tool_calls": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/tool_call"}},
            "redaction": {"type": "object", "required": ["policy"], "properties": {"policy": {"type": "string"}}},
            "metadata": {"type": "object"}
        },
        "$defs": {
            "tool_call": {
                "type": "object",
                "required": ["call_id", "tool_name", "tool_type", "phase", "status", "started_at", "finished_at", "input_digest", "output_digest", "redaction", "metadata"],
                "properties": {
                    "call_id": {"type": "string", "minLength": 1},
                    "tool_name": {"type": "string"},
                    "tool_type": constant("parent-tool"),
                    "phase": constant("execution"),
                    "status": statuses(),
                    "started_at": {"type": "string", "format": "date-time"},
                    "finished_at": {"type": "string", "format": "date-time"},
                    "input_digest": digest,
                    "output_digest": digest,
                    "redaction": {"type": "object", "required": ["policy"], "properties": {"policy": constant("applied")}},
                    "metadata": {
                        "type": "object",
                        "required": ["operation", "parent_tool_status", "request", "result", "dispatch"],
                        "properties": {
                            "operation": {"type": "string"},
                            "parent_tool_status": statuses(),
                            "request": {"type": ["object", "null"], "description": "The request as read, redacted; null when it was not a JSON object."},
                            "result": {
                                "type": "object",
                                "description": "The result envelope as printed, fully redacted.",
                                "required": ["schema", "version", "request_id", "tool", "operation", "status", "artifacts", "diagnostics", "metadata"],
                                "properties": {"schema": constant(result::SCHEMA), "status": statuses()}
                            },
                            "dispatch": {"type": ["object", "null"]}
                        }
                    }
                }
            }
        }
    })
}

fn fixture_schema() -> Value {
    let exit_code = json!({"type": "integer", "minimum": 0, "maximum": 255});
    json!({
        "$schema": DIALECT,
        "$id": FIXTURE_SCHEMA,
        "title": "parent-tool-dispatch replay case (*.case.json)",
        "description": "One regression case for `parent-tool-dispatch replay`: a bridge, a request, how the adapter answers, and what the dispatcher must make of it.",
        "type": "object",
        "required": ["schema", "name", "bridge", "request", "adapter", "expect"],
        "additionalProperties": false,
        "properties": {
            "schema": constant(FIXTURE_SCHEMA),
            "name": {"type": "string", "minLength": 1, "description": "Printed as `ok NAME` / `FAIL NAME`; matched by --filter."},
            "description": {"type": "string"},
            "bridge": {
                "type": ["object", "string"],
                "description": "The bridge: a JSON object, or the text given to --parent-tool-bridge (JSON text, or @FILE relative to the case file's folder). May be invalid on purpose."
            },
            "request": {
                "type": ["object", "string"],
                "description": "The request: a JSON object, or its exact text (for requests that are not valid JSON, or hold duplicate keys). May be invalid on purpose."
            },
            "adapter": {
                "type": "object",
                "description": "How the adapter answers: exactly one of argv (run it through the dispatcher, as the main job does), recorded (its stdout, exit code and stderr; no process), result (an envelope it printed, exit 0; no process).",
                "minProperties": 1,
                "maxProperties": 1,
                "additionalProperties": false,
                "properties": {
                    "argv": argv(),
                    "recorded": {
                        "type": "object",
                        "required": ["stdout", "exit_code"],
                        "additionalProperties": false,
                        "properties": {
                            "stdout": {"type": "string"},
                            "exit_code": exit_code,
                            "stderr": {"type": "string", "default": ""}
                        }
                    },
                    "result": {"type": "object"}
                }
            },
            "env": {
                "type": "object",
                "description": "Host variables set for this case only (for --secret-env, --pass-env, cwd_env).",
                "propertyNames": {"pattern": ENV_NAME.regex},
                "additionalProperties": {"type": "string"}
            },
            "options": {
                "type": "array",
                "description": "Extra arguments of the main job, e.g. [\"--tool-map\", \"provider-safe\"]. No subcommand, no REQUEST, no --parent-tool-bridge.",
                "items": {"type": "string"}
            },
            "expect": {
                "type": "object",
                "required": ["status"],
                "additionalProperties": false,
                "properties": {
                    "status": statuses(),
                    "error_code": {"type": "string", "minLength": 1},
                    "exit_code": exit_code,
                    "result": {
                        "type": "object",
                        "description": "A subset of the printed envelope: every key given must match (objects recursively), arrays match whole. diagnostics.dispatch.duration_ms and transcript sha256 values are never compared."
                    }
                }
            }
        },
        "allOf": [
            {
                "if": {"properties": {"adapter": {"required": ["argv"]}}, "required": ["adapter"]},
                "then": {"properties": {"bridge": {"type": "object"}}}
            }
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shape reachable from `top`.
    fn shapes(top: &'static Shape, out: &mut Vec<&'static Shape>) {
        out.push(top);
        for field in top.fields {
            let mut spec = &field.spec;
            loop {
                match spec.ty {
                    Type::Object(Some(shape)) | Type::Ref(_, Some(shape)) => shapes(shape, out),
                    Type::Array(Some(items)) => {
                        spec = items;
                        continue;
                    }
                    _ => {}
                }
                break;
            }
        }
    }

    /// A shape's `conditional` (the order of `allOf`) names exactly its conditional fields, so
    /// the schema states every condition the checks apply.
    #[test]
    fn every_condition_the_checks_apply_is_in_the_schema() {
        let mut all = Vec::new();
        for top in [
            &bridge::fields::TOP,
            &request::fields::TOP,
            &result::fields::TOP,
        ] {
            shapes(top, &mut all);
        }
        assert!(all.len() > 10);
        let mut conditions = 0;
        for shape in all {
            let mut when: Vec<&str> = shape
                .fields
                .iter()
                .filter(|f| matches!(f.presence, Presence::When(_)))
                .map(|f| f.key)
                .collect();
            let mut listed: Vec<&str> = shape.conditional.iter().map(|f| f.key).collect();
            when.sort_unstable();
            listed.sort_unstable();
            assert_eq!(when, listed);
            conditions += listed.len();
        }
        assert_eq!(conditions, 3);
    }

    /// A network diagnostic with every optional part set.
    pub(super) fn full_network() -> ptd_wire::envelope::result::NetworkDiagnostics {
        ptd_wire::envelope::result::NetworkDiagnostics {
            mode: "allow",
            connections: vec![ptd_wire::envelope::result::ConnectionDiagnostics {
                host: "api.example.com".into(),
                port: 443,
                allowed: false,
                reason: Some("not listed".into()),
                bytes_up: 1,
                bytes_down: 1,
            }],
            more: 1,
            allowed: 1,
            refused: 1,
        }
    }

    /// Every member `diagnostics.dispatch` can hold is described in the published schema: a
    /// diagnostics value with every optional part set, serialized, has no key the schema
    /// lacks (the schema allows more, so only this test notices a gap).
    #[test]
    fn every_dispatch_diagnostic_is_described() {
        use ptd_wire::envelope::result::{DispatchDiagnostics, Resources, RunDiagnostics};
        let full = DispatchDiagnostics {
            timeout_ms: Some(1),
            transport: Some(ptd_wire::envelope::result::Transport::Stdin),
            endpoint: Some("https://example.test:443".into()),
            http_status: Some(200),
            response_bytes: Some(1),
            run: Some(RunDiagnostics {
                exit_code: Some(0),
                signal: Some("SIGKILL".into()),
                stdout_bytes: 1,
                stdin_bytes_written: 1,
                stdin_error: None,
                stderr_tail: String::new(),
                stderr_truncated: false,
                stderr_bytes: 0,
                leaked_processes: 0,
                resources: Some(Resources {
                    max_rss_bytes: 1,
                    user_ms: 1,
                    system_ms: 1,
                }),
            }),
            stdout_head: Some(String::new()),
            policy: Some(ptd_wire::envelope::result::PolicyDiagnostics {
                sha256: "0".repeat(64),
                entry: "git.*".into(),
                line: Some(3),
            }),
            network: Some(full_network()),
            duration_ms: 1,
            trace_id: Some("0".repeat(32)),
            transcript_error: Some(String::new()),
            result_file_error: Some(String::new()),
            ..DispatchDiagnostics::default()
        };
        let value = serde_json::to_value(&full).unwrap();
        let schema = dispatch_diagnostics();
        for key in ["sha256", "entry", "line"] {
            assert!(
                schema["properties"]["policy"]["properties"]
                    .get(key)
                    .is_some(),
                "{key}"
            );
        }
        use ptd_wire::envelope::result::Transport;
        for transport in [
            Transport::Stdin,
            Transport::File,
            Transport::Http,
            Transport::Replay,
        ] {
            let spelled = serde_json::to_value(transport).unwrap();
            assert!(
                schema["properties"]["transport"]["enum"]
                    .as_array()
                    .unwrap()
                    .contains(&spelled),
                "{spelled}"
            );
        }
        let described = schema["properties"].as_object().unwrap();
        let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
        assert!(keys.len() >= 18, "{keys:?}");
        for key in keys {
            assert!(described.contains_key(key), "{key} is not in the schema");
        }
    }

    #[test]
    fn facts_become_keywords_in_their_order() {
        let spec = Spec::string(&[
            Fact::Doc("d"),
            Fact::NonEmpty,
            Fact::Passable(Some(9)),
            Fact::DefaultStr("x"),
        ]);
        assert_eq!(
            serde_json::to_string(&spec_schema(&spec)).unwrap(),
            r#"{"type":"string","description":"d","minLength":1,"maxLength":9,"pattern":"^[^\\x00]*$","default":"x"}"#
        );
        let one = Spec::string(&[Fact::OneOf(&["only"], ptd_wire::validate::Refusal::List)]);
        assert_eq!(
            spec_schema(&one),
            json!({"type": "string", "const": "only"})
        );
    }
}

/// The envelope's list of its own keys, held against the schemas this module prints.
#[cfg(test)]
mod own_keys {
    use crate::cli::SchemaKind;
    use ptd_wire::envelope::result::{
        DispatchDiagnostics, LedgerDiagnostics, RunDiagnostics, StdinError, Transport,
    };
    use ptd_wire::envelope::OWN_KEYS;
    use serde_json::Value;

    fn property_names(v: &Value, into: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::Object(props)) = map.get("properties") {
                    into.extend(props.keys().cloned());
                }
                map.values().for_each(|x| property_names(x, into));
            }
            Value::Array(items) => items.iter().for_each(|x| property_names(x, into)),
            _ => {}
        }
    }

    #[test]
    fn own_keys_cover_the_schemas_and_every_dispatch_diagnostic() {
        let mut names = Vec::new();
        for kind in [
            SchemaKind::Result,
            SchemaKind::Request,
            SchemaKind::Transcript,
        ] {
            property_names(&crate::schema::schema(kind), &mut names);
        }
        let full = DispatchDiagnostics {
            timeout_ms: Some(1),
            transport: Some(Transport::Http),
            endpoint: Some(String::new()),
            http_status: Some(200),
            response_bytes: Some(1),
            run: Some(RunDiagnostics {
                exit_code: Some(0),
                signal: Some(String::new()),
                stdout_bytes: 0,
                stdin_bytes_written: 0,
                stdin_error: Some(StdinError::BrokenPipe),
                stderr_tail: String::new(),
                stderr_truncated: false,
                stderr_bytes: 0,
                leaked_processes: 0,
                resources: Some(ptd_wire::envelope::result::Resources {
                    max_rss_bytes: 0,
                    user_ms: 0,
                    system_ms: 0,
                }),
            }),
            stdout_head: Some(String::new()),
            confinement: Some(ptd_wire::envelope::result::ConfinementDiagnostics {
                mechanisms: vec!["seccomp"],
                run_as: ptd_wire::envelope::result::RunAsDiagnostics {
                    uid: 65534,
                    gid: 65534,
                },
                landlock: Some(ptd_wire::envelope::result::LandlockDiagnostics {
                    abi: 7,
                    scoped: true,
                    fs_read: Vec::new(),
                    fs_write: Vec::new(),
                }),
                network: "none",
                limits: ptd_wire::envelope::result::LimitDiagnostics {
                    memory_bytes: Some(1),
                    pids: Some(1),
                    open_files: Some(1),
                    file_size_bytes: Some(1),
                },
                cgroup: [("memory", "v1"), ("pids", "v2")].into_iter().collect(),
            }),
            policy: Some(ptd_wire::envelope::result::PolicyDiagnostics {
                sha256: String::new(),
                entry: String::new(),
                line: Some(1),
            }),
            network: Some(super::tests::full_network()),
            trace_id: Some(String::new()),
            transcript_error: Some(String::new()),
            result_file_error: Some(String::new()),
            ..DispatchDiagnostics::default()
        };
        fn keys(v: &Value, into: &mut Vec<String>) {
            if let Value::Object(map) = v {
                into.extend(map.keys().cloned());
                map.values().for_each(|x| keys(x, into));
            }
        }
        let ledger = LedgerDiagnostics {
            replayed: true,
            attempt: Some(1),
            adapter_ms_left: Some(1),
            error: Some(String::new()),
        };
        keys(&serde_json::to_value(full).unwrap(), &mut names);
        keys(&serde_json::to_value(ledger).unwrap(), &mut names);
        let missing: Vec<&String> = names
            .iter()
            .filter(|n| !OWN_KEYS.contains(&n.as_str()))
            .collect();
        assert!(missing.is_empty(), "not in OWN_KEYS: {missing:?}");
        assert!(
            OWN_KEYS.windows(2).all(|w| w[0] < w[1]),
            "sorted, no repeats"
        );
    }
}
