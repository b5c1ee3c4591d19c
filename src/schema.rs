//! The published JSON Schemas (draft 2020-12): the three envelopes of the contract, the
//! transcript this dispatcher writes, and the replay fixture format (SPEC §3, §7).
//!
//! Each schema is built here, once, as data; `schema KIND` prints it and `fixtures/schemas/`
//! holds the committed copies (a test fails when they drift; `UPDATE_GENERATED=1` re-blesses).
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
//! `replay/cases.rs`; the schemas are for other tools and for people.

use crate::cli::SchemaKind;
use crate::envelope::{bridge, request, result};
use crate::error::Status;
use crate::transcript;
use serde_json::{json, Value};

/// The JSON Schema dialect every schema declares.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";
/// Schema id of a replay case file.
pub const FIXTURE_SCHEMA: &str = "parent-tool-dispatch/fixture/v1";
/// `^[A-Za-z_][A-Za-z0-9_]*$`: an environment variable NAME (never a value).
const ENV_NAME_PATTERN: &str = "^[A-Za-z_][A-Za-z0-9_]*$";
/// A lowercase hex SHA-256.
const SHA256_PATTERN: &str = "^[0-9a-f]{64}$";
/// The request fields that travel in environment variables hold no NUL.
const NO_NUL_PATTERN: &str = r"^[^\x00]*$";
/// A relative artifact path that stays below its folder: not `/…` or `\…`, no drive prefix
/// (an ASCII character then `:`, as the product checks the second byte), no `..` segment
/// (split on `/` and `\`).
const RELATIVE_PATH_PATTERN: &str =
    r"^(?![/\\])(?![\x00-\x7F]:)(?!(?:[\s\S]*[/\\])?\.\.(?:[/\\]|$))[\s\S]+$";

/// The file name of the committed copy in `fixtures/schemas/`.
pub fn file_name(kind: SchemaKind) -> &'static str {
    match kind {
        SchemaKind::Bridge => "parent-tool-bridge.schema.json",
        SchemaKind::Request => "parent-tool-request.schema.json",
        SchemaKind::Result => "parent-tool-result.schema.json",
        SchemaKind::Transcript => "tool-call-transcript.schema.json",
        SchemaKind::Fixture => "fixture.schema.json",
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
        | SchemaKind::Fixture => None,
    }
}

/// Every kind, in the order `schema --help` lists them.
pub const ALL: [SchemaKind; 8] = [
    SchemaKind::Bridge,
    SchemaKind::Request,
    SchemaKind::Result,
    SchemaKind::Transcript,
    SchemaKind::Fixture,
    SchemaKind::DelegationRequest,
    SchemaKind::DelegationResult,
    SchemaKind::DelegationEvent,
];

/// The schema of `kind` as a JSON value.
pub fn schema(kind: SchemaKind) -> Value {
    match kind {
        SchemaKind::Bridge => bridge_schema(),
        SchemaKind::Request => request_schema(),
        SchemaKind::Result => result_schema(),
        SchemaKind::Transcript => transcript_schema(),
        SchemaKind::Fixture => fixture_schema(),
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
    crate::stdout::print(
        render(kind).as_bytes(),
        "the schema",
        crate::error::exit::SUCCESS,
    )
}

fn env_name() -> Value {
    json!({"type": "string", "pattern": ENV_NAME_PATTERN})
}

fn constant(value: &str) -> Value {
    json!({"type": "string", "const": value})
}

fn version() -> Value {
    json!({"type": "integer", "const": 1})
}

/// Upstream lists the statuses in this order; the set is the contract's five.
fn statuses() -> Value {
    let order = [
        Status::Succeeded,
        Status::Failed,
        Status::Denied,
        Status::Unavailable,
        Status::Timeout,
    ];
    json!({
        "type": "string",
        "enum": order.iter().map(|s| s.as_str()).collect::<Vec<_>>()
    })
}

fn argv() -> Value {
    json!({
        "type": "array",
        "description": "Executed exactly as given, without a shell; argv[0] is resolved through PATH when it has no '/'.",
        "minItems": 1,
        "prefixItems": [{"type": "string", "minLength": 1}],
        "items": {"type": "string"}
    })
}

fn bridge_schema() -> Value {
    json!({
        "$schema": DIALECT,
        "$id": bridge::SCHEMA,
        "title": "wp-codebox parent-tool bridge",
        "description": "The host's policy: which tools a sandbox may call, which dispatcher serves them, under what timeout. Unknown keys are allowed everywhere (forward compatibility).",
        "type": "object",
        "required": ["schema", "version", "allowed_tools", "dispatcher", "sandbox_env", "authorization", "redaction", "metadata"],
        "properties": {
            "schema": constant(bridge::SCHEMA),
            "version": version(),
            "allowed_tools": {
                "type": "array",
                "description": "Canonical tool ids the sandbox may call; duplicates are harmless, an empty list denies everything.",
                "items": {"type": "string"}
            },
            "dispatcher": {
                "type": "object",
                "required": ["owner", "mode", "request_schema", "result_schema"],
                "properties": {
                    "owner": constant("wp-codebox"),
                    "mode": {"type": "string", "enum": ["host_endpoint", "host_command"]},
                    "endpoint": {
                        "type": "object",
                        "description": "Mode host_endpoint: NAMES of host variables holding the URL and the bearer token, never their values.",
                        "required": ["url_env"],
                        "properties": {
                            "url_env": env_name(),
                            "method": constant("POST"),
                            "token_env": env_name()
                        }
                    },
                    "command": {
                        "type": "object",
                        "description": "Mode host_command: the host adapter.",
                        "required": ["argv"],
                        "properties": {
                            "argv": argv(),
                            "cwd_env": env_name(),
                            "env": {
                                "type": "object",
                                "propertyNames": {"pattern": ENV_NAME_PATTERN},
                                "additionalProperties": {"type": "string"}
                            },
                            "transport": {"type": "string", "enum": ["stdin", "file"], "default": "stdin"}
                        }
                    },
                    "request_schema": constant(request::SCHEMA),
                    "result_schema": constant(result::SCHEMA),
                    "timeout_ms": {"type": "integer", "minimum": 1, "default": bridge::DEFAULT_TIMEOUT_MS}
                },
                "allOf": [
                    {
                        "if": {"properties": {"mode": {"const": "host_command"}}, "required": ["mode"]},
                        "then": {"required": ["command"]}
                    },
                    {
                        "if": {"properties": {"mode": {"const": "host_endpoint"}}, "required": ["mode"]},
                        "then": {"required": ["endpoint"]}
                    }
                ]
            },
            "sandbox_env": {
                "type": "object",
                "properties": {
                    "mode": constant("metadata-only"),
                    "variables": {"type": "object", "additionalProperties": env_name()},
                    "secret_env": {"type": "array", "items": env_name()}
                }
            },
            "authorization": {
                "type": "object",
                "properties": {
                    "mode": constant("allowlist"),
                    "failure_status": {"type": "string", "enum": ["denied", "unavailable"], "default": "denied"}
                }
            },
            "redaction": {
                "type": "object",
                "properties": {"transcript_artifact_refs": {"type": "array"}}
            },
            "metadata": {"type": "object"}
        }
    })
}

fn request_schema() -> Value {
    json!({
        "$schema": DIALECT,
        "$id": request::SCHEMA,
        "title": "wp-codebox parent-tool request",
        "description": "One tool call from the sandbox. `input` is opaque product payload. Readers must refuse duplicate keys at any depth and nesting deeper than 128 levels (JSON Schema cannot say so).",
        "type": "object",
        "required": ["schema", "version", "request_id", "tool", "operation", "input", "sandbox_session", "authorization", "metadata"],
        "properties": {
            "schema": constant(request::SCHEMA),
            "version": version(),
            "request_id": {
                "type": "string",
                "description": "At most 256 bytes of UTF-8 (the dispatcher counts bytes), no NUL (it travels in an environment variable).",
                "minLength": 1,
                "maxLength": request::MAX_REQUEST_ID_BYTES,
                "pattern": NO_NUL_PATTERN
            },
            "tool": {"type": "string", "minLength": 1, "maxLength": request::MAX_NAME_BYTES, "pattern": NO_NUL_PATTERN},
            "operation": {"type": "string", "minLength": 1, "maxLength": request::MAX_NAME_BYTES, "pattern": NO_NUL_PATTERN},
            "input": {},
            "sandbox_session": {
                "type": "object",
                "required": ["sandbox_session_id"],
                "properties": {
                    "sandbox_session_id": {"type": "string", "minLength": 1},
                    "caller_session_id": {"type": "string"},
                    "task_id": {"type": "string"}
                }
            },
            "authorization": {
                "type": "object",
                "required": ["allowed_tools"],
                "properties": {
                    "allowed_tools": {
                        "type": "array",
                        "description": "May narrow the bridge's allowlist, never widen it.",
                        "items": {"type": "string"}
                    },
                    "principal": {"type": "object"},
                    "capability": {"type": "string"}
                }
            },
            "metadata": {"type": "object"}
        }
    })
}

fn artifact_ref() -> Value {
    json!({
        "type": "object",
        "required": ["kind"],
        "properties": {
            "kind": {"type": "string", "minLength": 1},
            "path": {
                "type": "string",
                "description": "Relative to the artifact directory; never absolute, never escaping upward.",
                "pattern": RELATIVE_PATH_PATTERN
            },
            "id": {"type": "string"},
            "uri": {"type": "string"},
            "sha256": {"type": "string", "pattern": SHA256_PATTERN},
            "metadata": {"type": "object"}
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
            "transport": {"type": "string", "description": "stdin or file for a process, replay for a recorded answer."},
            "exit_code": {"type": ["integer", "null"]},
            "signal": {"type": ["string", "null"]},
            "stdout_bytes": int,
            "stdin_bytes_written": int,
            "stdin_error": {"type": ["string", "null"]},
            "stderr_tail": text,
            "stderr_truncated": {"type": "boolean"},
            "leaked_processes": int,
            "stdout_head": text,
            "duration_ms": int,
            "transcript_error": text,
            "result_file_error": text
        }
    })
}

fn result_schema() -> Value {
    json!({
        "$schema": DIALECT,
        "$id": result::SCHEMA,
        "title": "wp-codebox parent-tool result",
        "description": "The outcome of one tool call. Every status other than succeeded carries `error`.",
        "type": "object",
        "required": ["schema", "version", "request_id", "tool", "operation", "status", "artifacts", "diagnostics", "metadata"],
        "properties": {
            "schema": constant(result::SCHEMA),
            "version": version(),
            "request_id": {"type": "string"},
            "tool": {"type": "string"},
            "operation": {"type": "string"},
            "status": statuses(),
            "output": {},
            "error": {
                "type": "object",
                "required": ["code", "message", "retryable"],
                "properties": {
                    "code": {"type": "string", "minLength": 1, "description": "Stable snake_case code."},
                    "message": {"type": "string", "description": "One human sentence, redacted, without host paths."},
                    "retryable": {"type": "boolean"},
                    "details": {}
                }
            },
            "artifacts": {
                "type": "object",
                "required": ["transcripts", "evidence"],
                "properties": {
                    "transcripts": {"type": "array", "items": {"$ref": "#/$defs/artifact_ref"}},
                    "evidence": {"type": "array", "items": {"$ref": "#/$defs/artifact_ref"}}
                }
            },
            "diagnostics": {
                "type": "object",
                "properties": {"dispatch": {"$ref": "#/$defs/dispatch_diagnostics"}}
            },
            "metadata": {"type": "object"}
        },
        "allOf": [
            {
                "if": {"properties": {"status": {"not": {"const": "succeeded"}}}, "required": ["status"]},
                "then": {"required": ["error"]}
            }
        ],
        "$defs": {
            "artifact_ref": artifact_ref(),
            "dispatch_diagnostics": dispatch_diagnostics()
        }
    })
}

fn transcript_schema() -> Value {
    let digest = json!({
        "type": "object",
        "required": ["algorithm", "value"],
        "properties": {
            "algorithm": constant("sha256"),
            "value": {"type": "string", "pattern": SHA256_PATTERN}
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
                "propertyNames": {"pattern": ENV_NAME_PATTERN},
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
