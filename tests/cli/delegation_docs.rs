//! Host delegation (SPEC §8), what is written down about it: the failure code table pinned and
//! in the docs and the man page, the generated schemas current and naming what the code names,
//! a printed envelope holding every member its schema requires, and the docs' examples run from
//! the fixtures. The runs themselves are in `delegation.rs`.

use super::delegation::{example_request, root, run_adapter};
use super::*;
use parent_tool_dispatch::delegation::codes::{Code, DelegationStatus, Event, ISSUE_CODES};
use parent_tool_dispatch::delegation::{schema, SchemaKind};

/// The public table: code, status, retryable, exit.
const TABLE: [(&str, &str, bool, u8); 11] = [
    (
        "wp_codebox_host_delegation_request_invalid",
        "failed",
        false,
        65,
    ),
    (
        "wp_codebox_host_delegation_source_digest_invalid",
        "failed",
        false,
        65,
    ),
    (
        "wp_codebox_host_delegation_unavailable",
        "unavailable",
        false,
        69,
    ),
    (
        "wp_codebox_host_delegation_provider_result_invalid",
        "failed",
        false,
        1,
    ),
    (
        "wp_codebox_host_delegation_provider_result_schema_invalid",
        "failed",
        false,
        1,
    ),
    (
        "wp_codebox_host_delegation_provider_status_invalid",
        "failed",
        false,
        1,
    ),
    (
        "wp_codebox_host_delegation_request_id_mismatch",
        "failed",
        false,
        1,
    ),
    (
        "wp_codebox_host_delegation_scope_mismatch",
        "failed",
        false,
        1,
    ),
    (
        "wp_codebox_host_delegation_source_digest_mismatch",
        "failed",
        false,
        1,
    ),
    ("wp_codebox_host_delegation_timeout", "failed", true, 124),
    ("wp_codebox_host_delegation_interrupted", "failed", true, 1),
];

#[test]
fn the_failure_code_table_is_pinned_and_in_the_docs_and_man_page() {
    let actual: Vec<_> = Code::ALL
        .iter()
        .map(|c| {
            (
                c.as_str(),
                c.status().as_str(),
                c.retryable(),
                c.exit_code(),
            )
        })
        .collect();
    assert_eq!(actual, TABLE);
    let doc = std::fs::read_to_string(root().join("docs/delegation.md")).unwrap();
    let page =
        std::fs::read_to_string(root().join("man/parent-tool-dispatch-delegation-run.1")).unwrap();
    for (code, status, retryable, exit) in TABLE {
        let row = format!("| `{code}` | {status} | {retryable} | {exit} |");
        assert!(
            doc.contains(&row),
            "docs/delegation.md lacks the row: {row}"
        );
        // roff escapes nothing in these names, but may break lines between words.
        assert!(page.contains(code), "the man page lacks {code}");
    }
    for code in ISSUE_CODES {
        assert!(
            doc.contains(&format!("`{code}`")),
            "docs/delegation.md lacks {code}"
        );
    }
    for exit in ["124", "69", "65"] {
        assert!(page.contains(exit), "the man page lacks exit {exit}");
    }
}

#[test]
fn generated_schemas_are_current() {
    let dir = root().join("fixtures/schemas");
    for kind in SchemaKind::ALL {
        let path = dir.join(kind.file_name());
        let fresh = format!("{}\n", serde_json::to_string_pretty(&schema(kind)).unwrap());
        if std::env::var_os("UPDATE_GENERATED").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &fresh).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == fresh,
            "{} is stale; run UPDATE_GENERATED=1 cargo test --test cli generated",
            path.display()
        );
    }
}

#[test]
fn schemas_name_the_same_ids_statuses_and_events_as_the_code() {
    let request = schema(SchemaKind::Request);
    let result = schema(SchemaKind::Result);
    let event = schema(SchemaKind::Event);
    for (s, id) in [
        (&request, "wp-codebox/host-delegation-request/v1"),
        (&result, "wp-codebox/host-delegation-result/v1"),
        (&event, "wp-codebox/host-delegation-event/v1"),
    ] {
        assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
        assert_eq!(s["$id"], id);
        assert_eq!(s["properties"]["schema"]["const"], id);
    }
    let statuses: Vec<_> = DelegationStatus::ALL.iter().map(|s| s.as_str()).collect();
    let events: Vec<_> = Event::ALL.iter().map(|e| e.as_str()).collect();
    assert_eq!(result["properties"]["status"]["enum"], json!(statuses));
    assert_eq!(event["properties"]["event"]["enum"], json!(events));
    assert_eq!(event["properties"]["status"]["enum"], json!(statuses));
    assert_eq!(result["$defs"]["event"]["properties"], event["properties"]);
    let required = |s: &Value| s["required"].as_array().cloned().unwrap_or_default();
    for key in [
        "success",
        "schema",
        "execution",
        "status",
        "request_id",
        "request",
        "events",
        "timings",
    ] {
        assert!(required(&result).contains(&json!(key)), "{key}");
    }
    for key in ["target", "context", "execution", "orchestrator", "metadata"] {
        assert_eq!(request["properties"][key]["type"], "object", "{key}");
    }
    assert_eq!(request["properties"]["expected_artifacts"]["type"], "array");
}

#[test]
fn a_printed_envelope_has_every_member_the_result_schema_requires() {
    let out = run_adapter(&[], &example_request(), &["delegation-echo"]);
    let e = out.exit(0).stderr_empty().json();
    let result = schema(SchemaKind::Result);
    for key in result["required"].as_array().unwrap() {
        assert!(e.get(key.as_str().unwrap()).is_some(), "{key} missing: {e}");
    }
    for key in e.as_object().unwrap().keys() {
        assert!(
            result["properties"].get(key).is_some(),
            "{key} is not in the schema"
        );
    }
    let event = schema(SchemaKind::Event);
    for ev in e["events"].as_array().unwrap() {
        for key in ev.as_object().unwrap().keys() {
            assert!(event["properties"].get(key).is_some(), "{key}");
        }
    }
}

#[test]
fn the_docs_examples_run_from_the_fixtures() {
    let doc = std::fs::read_to_string(root().join("docs/delegation.md")).unwrap();
    let examples: Vec<&str> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("cargo run --quiet -- delegation "))
        .collect();
    assert_eq!(examples.len(), 3, "{examples:?}");
    for example in examples {
        let args: Vec<&str> = example.split_whitespace().collect();
        let v = Cmd::new(["delegation"])
            .args(&args)
            .cwd(root())
            .run()
            .exit(0)
            .stderr_empty()
            .json();
        assert!(v["valid"] == true || v["success"] == true, "{example}: {v}");
        if args[0] == "run" {
            assert_eq!(v["provider"], "shell-example");
            assert_eq!(v["result"], json!({"ok": true}));
        }
    }
}
