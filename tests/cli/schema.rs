//! `schema`: the published JSON Schemas — current with the code, valid draft 2020-12,
//! compatible with upstream's, and in agreement with the product's own validators on every
//! envelope the fixtures hold, every upstream example and every envelope the dispatcher prints.
//! All validation here is done by a real JSON Schema implementation (the `jsonschema` crate).
//! Re-bless the committed copies with `UPDATE_GENERATED=1 cargo test --test cli generated`.

use super::*;
use parent_tool_dispatch::cli::SchemaKind;
use parent_tool_dispatch::replay::cases::{Adapter, Loaded};
use parent_tool_dispatch::schema;
use ptd_wire::envelope::bridge::Bridge;
use ptd_wire::envelope::request::Request;
use ptd_wire::envelope::result::ResultEnvelope;
use ptd_wire::json::Document;
use std::rc::Rc;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn validator(kind: SchemaKind) -> jsonschema::Validator {
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema::schema(kind))
        .unwrap_or_else(|e| panic!("{kind:?} does not compile: {e}"))
}

fn upstream(name: &str) -> Value {
    read_json(&root().join("fixtures/upstream").join(name))
}

fn upstream_validator(name: &str) -> jsonschema::Validator {
    // Upstream's files carry no $schema; they are read as draft 2020-12, the dialect ours use.
    jsonschema::draft202012::new(&upstream(name)).unwrap()
}

fn errors(v: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    v.iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

#[test]
fn generated_schemas_are_current() {
    let dir = root().join("fixtures/schemas");
    if std::env::var_os("UPDATE_GENERATED").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for kind in schema::ALL {
            std::fs::write(dir.join(schema::file_name(kind)), schema::render(kind)).unwrap();
        }
    }
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".schema.json"))
        .collect();
    on_disk.sort();
    let mut expected: Vec<String> = schema::ALL
        .iter()
        .map(|k| schema::file_name(*k).to_string())
        .collect();
    expected.sort();
    assert_eq!(
        on_disk, expected,
        "fixtures/schemas holds other schemas; run with UPDATE_GENERATED=1"
    );
    for kind in schema::ALL {
        let name = schema::file_name(kind);
        let committed = std::fs::read_to_string(dir.join(name)).unwrap();
        assert!(
            committed == schema::render(kind),
            "fixtures/schemas/{name} is stale; run UPDATE_GENERATED=1 cargo test --test cli generated"
        );
    }
}

#[test]
fn the_schema_subcommand_prints_the_committed_schema() {
    for kind in schema::ALL {
        let arg = match kind {
            SchemaKind::Bridge => "bridge",
            SchemaKind::Request => "request",
            SchemaKind::Result => "result",
            SchemaKind::Transcript => "transcript",
            SchemaKind::Fixture => "fixture",
            SchemaKind::DelegationRequest => "delegation-request",
            SchemaKind::DelegationResult => "delegation-result",
            SchemaKind::DelegationEvent => "delegation-event",
            SchemaKind::Policy => "policy",
        };
        Cmd::new(["schema", arg])
            .run()
            .exit(0)
            .stderr_empty()
            .stdout_with(|stdout| {
                let printed: Value = serde_json::from_str(stdout).unwrap();
                assert_eq!(
                    printed,
                    read_json(
                        &root()
                            .join("fixtures/schemas")
                            .join(schema::file_name(kind))
                    )
                );
                assert_eq!(
                    printed["$schema"],
                    "https://json-schema.org/draft/2020-12/schema"
                );
            });
    }
    Cmd::new(["schema", "nonsense"])
        .run()
        .exit(2)
        .stdout_empty()
        .stderr_contains("invalid value");
}

#[test]
fn every_schema_is_a_valid_draft_2020_12_schema() {
    for kind in schema::ALL {
        let s = schema::schema(kind);
        assert!(
            jsonschema::draft202012::meta::is_valid(&s),
            "{kind:?}: {:?}",
            jsonschema::draft202012::meta::validate(&s)
                .err()
                .map(|e| e.to_string())
        );
        validator(kind);
    }
}

/// Walk upstream's schema: wherever it has `required`, `const`, `enum` or `type`, ours has at
/// least those `required` keys and the same `const`, `enum` (as a set) and `type`.
fn assert_compatible(upstream: &Value, ours: &Value, at: &str, problems: &mut Vec<String>) {
    let Some(up) = upstream.as_object() else {
        return;
    };
    if let Some(required) = up.get("required").and_then(Value::as_array) {
        let ours_required = ours["required"].as_array().cloned().unwrap_or_default();
        for key in required {
            if !ours_required.contains(key) {
                problems.push(format!("{at}: ours does not require {key}"));
            }
        }
    }
    for keyword in ["const", "type"] {
        if let Some(value) = up.get(keyword) {
            if ours.get(keyword) != Some(value) {
                problems.push(format!(
                    "{at}/{keyword}: upstream {value}, ours {:?}",
                    ours.get(keyword)
                ));
            }
        }
    }
    if let Some(values) = up.get("enum").and_then(Value::as_array) {
        let mut a: Vec<String> = values.iter().map(Value::to_string).collect();
        let mut b: Vec<String> = ours["enum"]
            .as_array()
            .map(|v| v.iter().map(Value::to_string).collect())
            .unwrap_or_default();
        a.sort();
        b.sort();
        if a != b {
            problems.push(format!("{at}/enum: upstream {a:?}, ours {b:?}"));
        }
    }
    if let Some(properties) = up.get("properties").and_then(Value::as_object) {
        for (key, sub) in properties {
            match ours["properties"].get(key) {
                Some(mine) => {
                    assert_compatible(sub, mine, &format!("{at}/properties/{key}"), problems)
                }
                None => problems.push(format!("{at}: ours does not describe {key}")),
            }
        }
    }
}

#[test]
fn envelope_schemas_are_compatible_with_upstream() {
    for (kind, file) in [
        (SchemaKind::Bridge, "parent-tool-bridge.schema.json"),
        (SchemaKind::Request, "parent-tool-request.schema.json"),
        (SchemaKind::Result, "parent-tool-result.schema.json"),
    ] {
        let up = upstream(file);
        let ours = schema::schema(kind);
        assert_eq!(ours["$id"], up["$id"], "{file}: $id");
        let mut problems = Vec::new();
        assert_compatible(&up, &ours, "", &mut problems);
        assert!(problems.is_empty(), "{file}:\n{}", problems.join("\n"));
    }
}

/// The upstream examples: the builder's host_command bridge, and the contract's bridge,
/// request and result.
fn upstream_examples() -> Vec<(SchemaKind, PathBuf)> {
    let examples = root().join("fixtures/schemas/upstream-examples");
    vec![
        (
            SchemaKind::Bridge,
            root().join("fixtures/upstream/example-bridge.host_command.json"),
        ),
        (
            SchemaKind::Bridge,
            examples.join("contract-bridge.host_endpoint.json"),
        ),
        (SchemaKind::Request, examples.join("contract-request.json")),
        (SchemaKind::Result, examples.join("contract-result.json")),
    ]
}

#[test]
fn every_upstream_example_is_valid_under_ours_and_upstreams() {
    for (kind, path) in upstream_examples() {
        let example = read_json(&path);
        let ours = errors(&validator(kind), &example);
        assert!(ours.is_empty(), "{}: {ours:?}", path.display());
        let file = match kind {
            SchemaKind::Bridge => "parent-tool-bridge.schema.json",
            SchemaKind::Request => "parent-tool-request.schema.json",
            _ => "parent-tool-result.schema.json",
        };
        assert!(
            upstream_validator(file).is_valid(&example),
            "{}",
            path.display()
        );
    }
}

/// What the product's own validator says about an envelope.
fn product_accepts(kind: SchemaKind, value: &Value) -> bool {
    match kind {
        SchemaKind::Bridge => match value {
            Value::Object(map) => Bridge::from_json(map.clone()).is_ok(),
            _ => false,
        },
        SchemaKind::Request => Document::parse(value.to_string().into_bytes(), usize::MAX)
            .is_ok_and(|doc| Request::from_document(Rc::new(doc)).is_ok()),
        SchemaKind::Result => ResultEnvelope::check(&value.to_string(), None).is_ok(),
        _ => unreachable!(),
    }
}

/// Every envelope the fixture suite holds (bridges inline or by @FILE, requests that are JSON
/// objects, `result` answers and recorded stdout that is one envelope), with where it is.
fn fixture_envelopes() -> Vec<(SchemaKind, String, Value)> {
    let mut out = Vec::new();
    let cases = root().join("fixtures/cases");
    let files = parent_tool_dispatch::replay::walk::collect(&[cases], &mut Vec::new());
    assert!(files.len() >= 30, "the suite is there: {}", files.len());
    for source in files {
        let where_ = source.path.display().to_string();
        for loaded in parent_tool_dispatch::replay::load_cases(&source.path, None) {
            let Loaded::Case(case) = loaded else {
                panic!("{where_} is not a valid case")
            };
            let bridge = match case.bridge.strip_prefix('@') {
                Some(file) => std::fs::read_to_string(file).unwrap(),
                None => case.bridge.clone(),
            };
            if let Ok(bridge) = serde_json::from_str::<Value>(&bridge) {
                out.push((SchemaKind::Bridge, format!("{where_} bridge"), bridge));
            }
            if let Ok(request) = serde_json::from_slice::<Value>(&case.request) {
                out.push((SchemaKind::Request, format!("{where_} request"), request));
            }
            let answer = match &case.adapter {
                Adapter::Result(text) => serde_json::from_str::<Value>(text).ok(),
                Adapter::Recorded { stdout, .. } => serde_json::from_str::<Value>(stdout).ok(),
                Adapter::Argv(_) => None,
            };
            if let Some(answer) = answer {
                out.push((SchemaKind::Result, format!("{where_} answer"), answer));
            }
        }
    }
    out.push((
        SchemaKind::Bridge,
        "fixtures/bridge.json".into(),
        read_json(&root().join("fixtures/bridge.json")),
    ));
    out.push((
        SchemaKind::Request,
        "fixtures/request.json".into(),
        read_json(&root().join("fixtures/request.json")),
    ));
    out
}

#[test]
fn every_fixture_envelope_gets_the_same_verdict_from_the_schema_and_the_product() {
    let envelopes = fixture_envelopes();
    let (mut valid, mut invalid) = (0, 0);
    for (kind, at, value) in &envelopes {
        let by_schema = validator(*kind).is_valid(value);
        let by_product = product_accepts(*kind, value);
        assert_eq!(
            by_schema,
            by_product,
            "{at}: schema says {by_schema}, the product says {by_product}; schema errors: {:?}",
            errors(&validator(*kind), value)
        );
        if by_schema {
            valid += 1;
        } else {
            invalid += 1;
        }
    }
    // The suite holds both kinds on purpose: the check means something either way.
    assert!(
        valid > 40 && invalid >= 4,
        "valid {valid}, invalid {invalid}"
    );
}

#[test]
fn every_case_file_is_valid_under_the_fixture_schema_and_broken_ones_are_not() {
    let v = validator(SchemaKind::Fixture);
    let files = parent_tool_dispatch::replay::walk::collect(
        &[root().join("fixtures/cases")],
        &mut Vec::new(),
    );
    for source in &files {
        let case = read_json(&source.path);
        let problems = errors(&v, &case);
        assert!(
            problems.is_empty(),
            "{}: {problems:?}",
            source.path.display()
        );
    }
    let good = read_json(&files[0].path);
    type Breakage = Box<dyn Fn(&mut Value)>;
    let breakages: [(&str, Breakage); 6] = [
        ("unknown member", Box::new(|c| c["expects"] = json!({}))),
        (
            "no expect",
            Box::new(|c| {
                c.as_object_mut().unwrap().remove("expect");
            }),
        ),
        (
            "two adapter forms",
            Box::new(|c| c["adapter"]["argv"] = json!(["x"])),
        ),
        (
            "bad status",
            Box::new(|c| c["expect"]["status"] = json!("fine")),
        ),
        (
            "exit status out of range",
            Box::new(|c| c["expect"]["exit_code"] = json!(300)),
        ),
        ("bad env name", Box::new(|c| c["env"] = json!({"1X": "v"}))),
    ];
    let tmp = tempfile::tempdir().unwrap();
    for (what, breakage) in breakages {
        let mut case = good.clone();
        breakage(&mut case);
        assert!(!v.is_valid(&case), "the schema accepts a case with {what}");
        // …and so does not the product, unless the case only lacks `expect` (then it fails
        // when run, and --bless can record one).
        let path = tmp.path().join("x.case.json");
        std::fs::write(&path, case.to_string()).unwrap();
        let loaded = parent_tool_dispatch::replay::load_cases(&path, None);
        let broken = matches!(loaded.as_slice(), [Loaded::Broken { .. }]);
        let without_expect = matches!(loaded.as_slice(), [Loaded::Case(c)] if c.expect.is_none());
        assert!(
            broken || (what == "no expect" && without_expect),
            "the product accepts a case with {what}"
        );
    }
}

/// Envelopes as the dispatcher prints them: every in-process fixture case replayed through the
/// library, and a few live dispatches of the binary (success, adapter failures, refusals).
fn printed_envelopes() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let files = parent_tool_dispatch::replay::walk::collect(
        &[root().join("fixtures/cases")],
        &mut Vec::new(),
    );
    for source in files {
        for loaded in parent_tool_dispatch::replay::load_cases(&source.path, None) {
            let Loaded::Case(case) = loaded else { continue };
            if matches!(case.adapter, Adapter::Argv(_)) {
                continue;
            }
            let actual = parent_tool_dispatch::replay::runner::run(&case, None).unwrap();
            if let Some(envelope) = actual.envelope {
                out.push((case.name.clone(), envelope));
            }
        }
    }
    let live = [
        (Dispatch::adapter(&["echo"]), "succeeded", None, 0),
        (
            Dispatch::adapter(&["echo:denied:nope"]),
            "denied",
            Some("nope"),
            77,
        ),
        (
            Dispatch::adapter(&["print:noise"]),
            "failed",
            Some("result_invalid"),
            1,
        ),
        (
            Dispatch::adapter(&["exit:3"]),
            "failed",
            Some("adapter_exit_nonzero"),
            1,
        ),
        (
            Dispatch::adapter(&["sleep:5000"])
                .bridge(|b| b["dispatcher"]["timeout_ms"] = json!(100))
                .args(&["--kill-grace-ms", "100"]),
            "timeout",
            Some("dispatch_timeout"),
            124,
        ),
        (
            Dispatch::adapter(&["echo"]).request(|r| r["tool"] = json!("shell.exec")),
            "denied",
            Some("tool_not_allowed"),
            77,
        ),
        (
            Dispatch::adapter(&["echo"]).stdin("not json"),
            "failed",
            Some("request_invalid"),
            65,
        ),
        (
            Dispatch::adapter(&["echo"]).raw_bridge(Some("@/nonexistent/bridge.json")),
            "unavailable",
            Some("bridge_invalid"),
            69,
        ),
    ];
    for (dispatch, status, code, exit) in live {
        let run = dispatch.run();
        run.expect(status, code, exit);
        out.push((
            format!("live {}: {}", run.status(), run.code()),
            run.envelope,
        ));
    }
    out
}

#[test]
fn every_envelope_the_dispatcher_prints_is_valid_under_ours_and_upstreams() {
    let ours = validator(SchemaKind::Result);
    let theirs = upstream_validator("parent-tool-result.schema.json");
    let envelopes = printed_envelopes();
    assert!(envelopes.len() > 30);
    for (what, envelope) in envelopes {
        assert!(
            ours.is_valid(&envelope),
            "{what}: {:?}\n{envelope:#}",
            errors(&ours, &envelope)
        );
        assert!(theirs.is_valid(&envelope), "{what}");
    }
}

#[test]
fn ours_is_stricter_never_looser_on_everything_the_suite_holds() {
    let envelopes = fixture_envelopes();
    for (kind, file) in [
        (SchemaKind::Bridge, "parent-tool-bridge.schema.json"),
        (SchemaKind::Request, "parent-tool-request.schema.json"),
        (SchemaKind::Result, "parent-tool-result.schema.json"),
    ] {
        let ours = validator(kind);
        let theirs = upstream_validator(file);
        for (k, at, value) in &envelopes {
            if *k == kind && ours.is_valid(value) {
                assert!(
                    theirs.is_valid(value),
                    "{at}: ours accepts what upstream refuses"
                );
            }
        }
    }
    // Where upstream leaves a shape open, ours checks it: an empty argv, a request without a
    // session id, an error without a code.
    let bridge = {
        let mut b = read_json(&root().join("fixtures/upstream/example-bridge.host_command.json"));
        b["dispatcher"]["command"]["argv"] = json!([]);
        b
    };
    let mut request = read_json(&root().join("fixtures/request.json"));
    request["sandbox_session"] = json!({});
    let result = json!({"schema": "wp-codebox/parent-tool-result/v1", "version": 1,
        "request_id": "r", "tool": "t", "operation": "call", "status": "failed",
        "error": {"message": "m", "retryable": false},
        "artifacts": {"transcripts": [], "evidence": []}, "diagnostics": {}, "metadata": {}});
    for (kind, file, value) in [
        (SchemaKind::Bridge, "parent-tool-bridge.schema.json", bridge),
        (
            SchemaKind::Request,
            "parent-tool-request.schema.json",
            request,
        ),
        (SchemaKind::Result, "parent-tool-result.schema.json", result),
    ] {
        assert!(upstream_validator(file).is_valid(&value), "{kind:?}");
        assert!(!validator(kind).is_valid(&value), "{kind:?}");
        assert!(!product_accepts(kind, &value), "{kind:?}");
    }
}

#[test]
fn artifact_paths_are_judged_alike_by_the_schema_and_the_product() {
    let ours = validator(SchemaKind::Result);
    let envelope = |path: &str| {
        json!({"schema": "wp-codebox/parent-tool-result/v1", "version": 1, "request_id": "r",
            "tool": "t", "operation": "call", "status": "succeeded",
            "artifacts": {"transcripts": [{"kind": "k", "path": path}], "evidence": []},
            "diagnostics": {}, "metadata": {}})
    };
    for path in [
        "files/parent-tools/x.json",
        "a",
        "a/b..c",
        "..a",
        "a..",
        "/etc/passwd",
        "\\share\\x",
        "C:x",
        "C:\\x",
        "../up",
        "a/../b",
        "a/..",
        "..",
        "a\\..\\b",
        "",
        "\n:",
        "é:",
    ] {
        let value = envelope(path);
        assert_eq!(
            ours.is_valid(&value),
            product_accepts(SchemaKind::Result, &value),
            "{path:?}"
        );
    }
}

#[test]
fn transcripts_written_by_artifact_dir_and_the_committed_ones_are_valid() {
    let dir = tempfile::tempdir().unwrap();
    let arg = dir.path().to_str().unwrap().to_string();
    Dispatch::adapter(&["echo"])
        .args(&["--artifact-dir", &arg])
        .run()
        .expect("succeeded", None, 0);
    Dispatch::adapter(&["echo"])
        .request(|r| r["tool"] = json!("shell.exec"))
        .args(&["--artifact-dir", &arg])
        .run()
        .expect("denied", Some("tool_not_allowed"), 77);
    Dispatch::adapter(&["echo"])
        .stdin("{")
        .args(&["--artifact-dir", &arg])
        .run()
        .expect("failed", Some("request_invalid"), 65);
    let v = validator(SchemaKind::Transcript);
    let folder = dir.path().join("files/parent-tools");
    let mut count = 0;
    for entry in std::fs::read_dir(folder).unwrap() {
        let transcript = read_json(&entry.unwrap().path());
        assert!(
            v.is_valid(&transcript),
            "{:?}\n{transcript:#}",
            errors(&v, &transcript)
        );
        count += 1;
    }
    assert_eq!(count, 3);
    for name in ["ptr_123.json", "ptr_denied_write.json"] {
        let transcript = read_json(&root().join("fixtures/transcripts").join(name));
        assert!(
            v.is_valid(&transcript),
            "{name}: {:?}",
            errors(&v, &transcript)
        );
    }
}
