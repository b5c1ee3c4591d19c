//! `schema policy` held to the loader it describes (`ptd_policy::parse`):
//!
//! - its keys are the loader's key lists (`TOP_KEYS`, `ENTRY_KEYS` for `[defaults]` and for a
//!   `[[tool]]` beside `match`, `LEDGER_KEYS`), and every object it describes refuses other keys;
//! - on a corpus of policies written as TOML, the schema (a real JSON Schema implementation, on
//!   the TOML mapped to JSON as the schema says: tables are objects, arrays are arrays) and the
//!   loader give the same verdict — the one each case states, so neither can drift alone. Every
//!   key has accepted values and refused ones (a wrong type, out of range, a bad spelling), in
//!   `[defaults]` and in a `[[tool]]`; unknown keys at each level, a missing `version` or
//!   `match`, another version, bad `match` patterns, every form of `network`, 1,000 and 1,001
//!   tools;
//! - what a schema cannot decide is listed apart ([`loader_only`]): there the schema accepts and
//!   the loader refuses, for the reason each case names (the host's file system, users and
//!   PATH; the bridge's timeout and the command line's ledger; two entries with one `match`;
//!   the size bound; TOML types that JSON does not keep apart). The file's size, owner and mode
//!   are `load`'s, not `parse`'s, and are not in any corpus.
//!
//! The loader runs with a context in which the corpus means one thing on any host: PATH is
//! `/usr/bin:/bin` (so `sh` is found), no bridge timeout, a ledger given on the command line
//! (so `decision = "ask"` is accepted), and grants name `/tmp` and `/usr`, which exist.

use super::*;
use parent_tool_dispatch::cli::SchemaKind;
use parent_tool_dispatch::schema;
use proptest::prelude::*;
use ptd_policy::{LoadContext, ENTRY_KEYS, LEDGER_KEYS, MAX_TOOLS, TOP_KEYS};

fn policy_schema() -> Value {
    schema::schema(SchemaKind::Policy)
}

fn validator() -> jsonschema::Validator {
    jsonschema::draft202012::new(&policy_schema()).expect("the policy schema compiles")
}

/// TOML's data model mapped onto JSON's, as the schema's description says; a float JSON cannot
/// hold becomes null and a datetime its text (no key takes either).
fn to_json(value: toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(n) => json!(n),
        toml::Value::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => Value::Array(items.into_iter().map(to_json).collect()),
        toml::Value::Table(table) => {
            Value::Object(table.into_iter().map(|(k, v)| (k, to_json(v))).collect())
        }
    }
}

fn as_json(text: &str) -> Value {
    let table: toml::Table = text
        .parse()
        .unwrap_or_else(|e| panic!("not TOML: {e}\n{text}"));
    to_json(toml::Value::Table(table))
}

/// The context every corpus case is loaded in (see the module's comment).
fn context() -> LoadContext {
    LoadContext {
        bridge_timeout_ms: None,
        ledger: Some("/var/lib/ptd-test-ledger/l.db".into()),
        path: Some("/usr/bin:/bin".into()),
    }
}

/// The loader's verdict, with its problems.
fn loader(text: &str, cx: &LoadContext) -> Result<(), Vec<String>> {
    ptd_policy::parse(Path::new("policy.toml"), text, cx)
        .map(drop)
        .map_err(|problems| problems.iter().map(ToString::to_string).collect())
}

fn schema_errors(v: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    v.iter_errors(instance)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect()
}

/// A `run_as` this host resolves for the dispatcher running the tests: itself by number, or
/// `nobody`'s number for root (any other user may only name itself).
fn usable_run_as() -> String {
    match rustix::process::geteuid().as_raw() {
        0 => "65534".to_string(),
        me => me.to_string(),
    }
}

/// Values of every entry key, as TOML: (key, value, accepted by both).
fn entry_values() -> Vec<(&'static str, String, bool)> {
    let me = usable_run_as();
    let mut values: Vec<(&'static str, String, bool)> = Vec::new();
    let mut add = |key: &'static str, accepted: &[&str], refused: &[&str]| {
        values.extend(accepted.iter().map(|v| (key, v.to_string(), true)));
        values.extend(refused.iter().map(|v| (key, v.to_string(), false)));
    };
    add(
        "adapter",
        &[
            r#"["/bin/true"]"#,
            r#"["sh", "-c", "true"]"#,
            // An absolute program is taken as written: it need not exist at load.
            r#"["/no/such/program-ptd"]"#,
            r#"["/bin/sh", "", "x"]"#,
        ],
        &[
            "[]",
            r#"[""]"#,
            r#""/bin/true""#,
            r#"["./run"]"#,
            r#"["bin/sh"]"#,
            "[1]",
            r#"["/bin/true", 2]"#,
            "{}",
        ],
    );
    add(
        "cwd",
        &[r#""/srv/ws""#, r#""relative/dir""#],
        &[r#""""#, "1", r#"["/tmp"]"#],
    );
    add(
        "timeout_ms",
        &["1", "30000", "9223372036854775807", "0x10"],
        &["0", "-1", r#""30000""#, "1.5", "true"],
    );
    for key in ["pass_env", "secret_env"] {
        add(
            key,
            &[
                "[]",
                r#"["HOME", "GITHUB_TOKEN"]"#,
                r#"["lower.case-and é"]"#,
            ],
            &[
                r#"[""]"#,
                r#"["A=B"]"#,
                r#"["A\u0000"]"#,
                r#""HOME""#,
                "[1]",
                r#"["HOME", 1]"#,
            ],
        );
    }
    for key in ["fs_read", "fs_write"] {
        add(
            key,
            &["[]", r#"["/tmp"]"#, r#"["/tmp", "/usr"]"#],
            &[r#""/tmp""#, r#"[""]"#, "[1]", r#"["/tmp", ""]"#],
        );
    }
    add(
        "network",
        &[
            r#""none""#,
            r#""any""#,
            r#"{ allow = ["api.github.com:443"] }"#,
            r#"{ allow = ["[::1]:8080", "h:065535", "10.0.0.1:1"] }"#,
            r#"{ allow = ["*.pythonhosted.org:443", "API.GitHub.com.:443", "a_b-c.d:1"] }"#,
            // The loader takes an empty table as saying nothing; the schema agrees.
            "{}",
        ],
        &[
            r#""some""#,
            r#""None""#,
            "true",
            r#"["none"]"#,
            r#"{ allow = ["api.github.com"] }"#,
            r#"{ allow = ["h:0"] }"#,
            r#"{ allow = ["h:65536"] }"#,
            r#"{ allow = [":443"] }"#,
            r#"{ allow = ["a b:443"] }"#,
            r#"{ allow = ["h:"] }"#,
            r#"{ allow = ["h:4a"] }"#,
            r#"{ allow = ["é:443"] }"#,
            r#"{ allow = "h:443" }"#,
            r#"{ allow = [1] }"#,
            r#"{ allow = [] }"#,
            r#"{ allow = ["*:443"] }"#,
            r#"{ allow = ["a*.b:443"] }"#,
            r#"{ allow = ["*.*.b:443"] }"#,
            r#"{ allow = ["127.1:80"] }"#,
            r#"{ allow = ["*.10.0.0.1:80"] }"#,
            r#"{ allow = ["::1:80"] }"#,
            r#"{ allow = ["a..b:80"] }"#,
            r#"{ deny = [] }"#,
            r#"{ allow = [], deny = [] }"#,
        ],
    );
    let run_as = [format!("\"{me}\""), format!("\"{me}:{me}\"")];
    values.extend(run_as.into_iter().map(|v| ("run_as", v, true)));
    let mut add = |key: &'static str, accepted: &[&str], refused: &[&str]| {
        values.extend(accepted.iter().map(|v| (key, v.to_string(), true)));
        values.extend(refused.iter().map(|v| (key, v.to_string(), false)));
    };
    add(
        "run_as",
        &[],
        &[
            r#""""#,
            r#"":1""#,
            r#""1:""#,
            r#""a:b:c""#,
            "1",
            r#""a\u0000""#,
        ],
    );
    add(
        "network_max_bytes",
        &[r#""64M""#, r#""1GiB""#, "1", "1048576"],
        &[
            r#""0""#,
            "0",
            r#""5MB""#,
            r#""x""#,
            "-1",
            "true",
            r#"["1M"]"#,
        ],
    );
    add(
        "limit_memory",
        &[
            r#""512M""#,
            r#""1""#,
            r#""64KiB""#,
            r#""1g""#,
            r#""007t""#,
            "1",
            "536870912",
        ],
        &[
            r#""0""#,
            "0",
            r#""0M""#,
            "-1",
            r#""512MB""#,
            r#""512 M""#,
            r#""M""#,
            r#""""#,
            r#""1.5G""#,
            r#""1Mib""#,
            r#""-1""#,
            "true",
            "[]",
        ],
    );
    add(
        "limit_file_size",
        &[r#""0""#, "0", r#""0K""#, r#""10M""#, "1048576"],
        &["-1", r#""1kB""#, r#""x""#, "[]", "1.5e3"],
    );
    for key in ["limit_pids", "limit_open_files"] {
        add(key, &["1", "64"], &["0", "-5", r#""64""#, "1.5", "false"]);
    }
    add(
        "decision",
        &[r#""allow""#, r#""ask""#, r#""deny""#],
        &[r#""Allow""#, r#""""#, "1", r#"["deny"]"#],
    );
    add("budget_calls", &["0", "50"], &["-1", r#""50""#, "0.5"]);
    add(
        "approval_ttl",
        &[
            r#""30s""#,
            r#""15m""#,
            r#""1h""#,
            r#""90""#,
            r#""0015m""#,
            r#""31622400s""#,
            r#""31622400""#,
            r#""527040m""#,
            r#""8784h""#,
            "1",
            "31622400",
        ],
        &[
            r#""0s""#,
            r#""0""#,
            "0",
            "-1",
            r#""31622401""#,
            r#""527041m""#,
            r#""8785h""#,
            "31622401",
            r#""15 m""#,
            r#""1d""#,
            r#""m""#,
            r#""""#,
            r#""1.5h""#,
            r#""-5s""#,
            r#""99999999999999999999s""#,
            "true",
        ],
    );
    add(
        "approval_notify",
        &[r#"["/usr/bin/notify-send", "x"]"#, r#"["notify", ""]"#],
        &["[]", r#"[""]"#, r#""notify""#, "[1]", r#"["notify", 1]"#],
    );
    add("unconfined", &["true", "false"], &[r#""true""#, "1"]);
    values
}

/// Values of every `[ledger]` key: (key, value, accepted by both).
fn ledger_values() -> Vec<(&'static str, &'static str, bool)> {
    let accepted = [
        ("path", r#""/var/lib/ptd-schema-test/ledger.db""#),
        ("path", r#""postgres://ptd@db.example/ledger""#),
        ("session_env", r#""SANDBOX_SESSION_ID""#),
        ("budget_calls", "0"),
        ("budget_calls", "500"),
        ("budget_adapter_ms", "0"),
        ("budget_adapter_ms", "600000"),
        ("max_concurrent", "1"),
        ("lease_ttl", r#""30s""#),
        ("lease_ttl", r#""3""#),
        ("lease_ttl", r#""1440m""#),
        ("lease_ttl", r#""24h""#),
        ("lease_ttl", "86400"),
        ("durability", r#""full""#),
        ("durability", r#""normal""#),
    ];
    let refused = [
        ("lease_ttl", r#""2s""#),
        ("lease_ttl", r#""25h""#),
        ("lease_ttl", "2"),
        ("lease_ttl", "86401"),
        ("lease_ttl", r#""30 s""#),
        ("lease_ttl", "true"),
        ("durability", r#""FULL""#),
        ("durability", r#""off""#),
        ("durability", r#""""#),
        ("durability", "1"),
        ("path", r#""""#),
        ("path", "1"),
        ("session_env", r#""""#),
        ("session_env", r#""A=B""#),
        ("session_env", "1"),
        ("budget_calls", "-1"),
        ("budget_calls", r#""5""#),
        ("budget_adapter_ms", "-1"),
        ("budget_adapter_ms", "true"),
        ("max_concurrent", "0"),
        ("max_concurrent", "1.5"),
    ];
    let mut values: Vec<_> = accepted.iter().map(|&(k, v)| (k, v, true)).collect();
    values.extend(refused.iter().map(|&(k, v)| (k, v, false)));
    values
}

/// `[[tool]]` tables of `n` distinct entries.
fn tools(n: usize) -> String {
    (0..n)
        .map(|i| format!("[[tool]]\nmatch = \"t.{i}\"\n"))
        .collect()
}

/// The whole-document cases: (what, TOML text, accepted by both).
fn document_cases() -> Vec<(String, String, bool)> {
    let long = "a".repeat(256);
    let too_long = "a".repeat(257);
    let star = format!("{}*", "a".repeat(255));
    let cases: Vec<(&str, String, bool)> = vec![
        ("version alone", "version = 1\n".into(), true),
        ("version in hex", "version = 0x1\n".into(), true),
        (
            "empty sections",
            "version = 1\n[defaults]\n[ledger]\n".into(),
            true,
        ),
        (
            "an empty tool list",
            "version = 1\ntool = []\n".into(),
            true,
        ),
        ("the SPEC example", spec_example(), true),
        (
            "network_max_bytes beside an allow list",
            "version = 1\n[defaults]\nnetwork = { allow = [\"h:443\"] }\nnetwork_max_bytes = \"64M\"\n".into(),
            true,
        ),
        (
            "network_max_bytes in [defaults], network = \"none\" in a tool",
            "version = 1\n[defaults]\nnetwork_max_bytes = \"64M\"\n[[tool]]\nmatch = \"a\"\nnetwork = \"none\"\n".into(),
            true,
        ),
        (
            "network_max_bytes beside network = \"none\"",
            "version = 1\n[defaults]\nnetwork = \"none\"\nnetwork_max_bytes = \"64M\"\n".into(),
            false,
        ),
        (
            "network_max_bytes beside network = \"any\" in a tool",
            "version = 1\n[[tool]]\nmatch = \"a\"\nnetwork = \"any\"\nnetwork_max_bytes = 1\n".into(),
            false,
        ),
        ("no version", String::new(), false),
        ("no version, sections", "[defaults]\n".into(), false),
        ("version 2", "version = 2\n".into(), false),
        ("version 0", "version = 0\n".into(), false),
        ("version -1", "version = -1\n".into(), false),
        ("version as text", "version = \"1\"\n".into(), false),
        ("version true", "version = true\n".into(), false),
        ("version 1.5", "version = 1.5\n".into(), false),
        (
            "unknown top key",
            "version = 1\nversions = 1\n".into(),
            false,
        ),
        ("unknown top table", "version = 1\n[tools]\n".into(), false),
        (
            "defaults not a table",
            "version = 1\ndefaults = 1\n".into(),
            false,
        ),
        (
            "defaults an array",
            "version = 1\n[[defaults]]\n".into(),
            false,
        ),
        (
            "ledger not a table",
            "version = 1\nledger = \"x\"\n".into(),
            false,
        ),
        (
            "unknown ledger key",
            "version = 1\n[ledger]\npaths = \"/x\"\n".into(),
            false,
        ),
        (
            "ledger budget_tool",
            "version = 1\n[ledger]\nbudget_tool = 1\n".into(),
            false,
        ),
        (
            "unknown defaults key",
            "version = 1\n[defaults]\nrun_ass = \"x\"\n".into(),
            false,
        ),
        (
            "match in defaults",
            "version = 1\n[defaults]\nmatch = \"a\"\n".into(),
            false,
        ),
        (
            "tool a table",
            "version = 1\n[tool]\nmatch = \"a\"\n".into(),
            false,
        ),
        ("tool a number", "version = 1\ntool = 1\n".into(), false),
        (
            "tool items not tables",
            "version = 1\ntool = [1]\n".into(),
            false,
        ),
        (
            "a tool without match",
            "version = 1\n[[tool]]\nadapter = [\"/bin/true\"]\n".into(),
            false,
        ),
        ("an empty tool", "version = 1\n[[tool]]\n".into(), false),
        (
            "unknown tool key",
            "version = 1\n[[tool]]\nmatch = \"a\"\nadaptor = [\"/bin/true\"]\n".into(),
            false,
        ),
        (
            "1,000 tools",
            format!("version = 1\n{}", tools(MAX_TOOLS)),
            true,
        ),
        (
            "1,001 tools",
            format!("version = 1\n{}", tools(MAX_TOOLS + 1)),
            false,
        ),
    ];
    let mut out: Vec<(String, String, bool)> = cases
        .into_iter()
        .map(|(what, text, ok)| (what.to_string(), text, ok))
        .collect();
    let matches: [(&str, bool); 21] = [
        ("git.commit", true),
        ("git.*", true),
        ("*", true),
        ("a", true),
        ("!~{}[]()", true),
        (&long, true),
        (&star, true),
        ("", false),
        ("**", false),
        ("git.**", false),
        ("*git", false),
        ("git*commit", false),
        ("git.*.x", false),
        ("git commit", false),
        ("git\tcommit", false),
        ("é", false),
        ("git.\u{7f}", false),
        (&too_long, false),
        (&format!("{long}*"), false),
        ("git.*\n", false),
        (" *", false),
    ];
    for (pattern, ok) in matches {
        let text = format!(
            "version = 1\n[[tool]]\nmatch = {}\n",
            // A JSON string is a TOML basic string, but for DEL, which TOML wants escaped.
            serde_json::to_string(pattern)
                .unwrap()
                .replace('\u{7f}', "\\u007F")
        );
        let what = match pattern.len() {
            0..=40 => format!("match = {pattern:?}"),
            n => format!("match of {n} bytes ending {:?}", &pattern[n - 3..]),
        };
        out.push((what, text, ok));
    }
    for value in ["1", "true", "[\"a\"]"] {
        let text = format!("version = 1\n[[tool]]\nmatch = {value}\n");
        out.push((format!("match = {value}"), text, false));
    }
    out
}

/// The specification's example policy, with programs and paths every host has.
fn spec_example() -> String {
    format!(
        r#"version = 1

[defaults]
run_as = "{}"
network = "none"
limit_memory = "512M"
limit_pids = 64
timeout_ms = 30000
decision = "allow"

[ledger]
path = "/var/lib/ptd-schema-test/ledger.db"
session_env = "SANDBOX_SESSION_ID"
budget_calls = 500
budget_adapter_ms = 600000
max_concurrent = 4

[[tool]]
match = "workspace.*"
adapter = ["sh", "-c", "true"]
fs_write = ["/tmp"]

[[tool]]
match = "git.commit"
adapter = ["/bin/true", "--allow-commit"]
fs_write = ["/tmp"]
decision = "ask"
approval_ttl = "15m"
approval_notify = ["/usr/bin/notify-send", "approve?"]

[[tool]]
match = "github.*"
adapter = ["/opt/tools/github-adapter"]
network = {{ allow = ["api.github.com:443"] }}
secret_env = ["GITHUB_TOKEN"]
pass_env = ["HOME"]
budget_calls = 50
fs_read = ["/usr"]
cwd = "/srv/ws"
limit_open_files = 256
limit_file_size = "1G"

[[tool]]
match = "*"
decision = "deny"
unconfined = true
"#,
        usable_run_as()
    )
}

/// Every case of the corpus: (what, TOML text, accepted by both).
fn corpus() -> Vec<(String, String, bool)> {
    let mut cases = document_cases();
    for (key, value, ok) in entry_values() {
        cases.push((
            format!("[defaults] {key} = {value}"),
            format!("version = 1\n[defaults]\n{key} = {value}\n"),
            ok,
        ));
        cases.push((
            format!("[[tool]] {key} = {value}"),
            format!("version = 1\n[[tool]]\nmatch = \"x.y\"\n{key} = {value}\n"),
            ok,
        ));
    }
    for (key, value, ok) in ledger_values() {
        cases.push((
            format!("[ledger] {key} = {value}"),
            format!("version = 1\n[ledger]\n{key} = {value}\n"),
            ok,
        ));
    }
    cases
}

/// Each case's verdict from the loader and from the schema, against the one it states.
fn verdicts_disagree(
    v: &jsonschema::Validator,
    what: &str,
    text: &str,
    accepted: bool,
) -> Option<String> {
    let by_loader = loader(text, &context());
    let instance = as_json(text);
    let by_schema = v.is_valid(&instance);
    (by_loader.is_ok() != accepted || by_schema != accepted).then(|| {
        format!(
            "{what}: expected {}, the loader says {by_loader:?}, the schema says {by_schema} {:?}",
            if accepted { "accepted" } else { "refused" },
            schema_errors(v, &instance)
        )
    })
}

#[test]
fn the_schemas_keys_are_the_loaders_and_no_other_key_is_allowed() {
    let schema = policy_schema();
    assert_eq!(schema["$id"], ptd_policy::SCHEMA_ID);
    assert_eq!(ptd_policy::SCHEMA_ID, "parent-tool-dispatch/policy/v1");
    let resolve = |v: &Value| -> Value {
        match v.get("$ref").and_then(Value::as_str) {
            Some(reference) => schema
                .pointer(reference.strip_prefix('#').unwrap())
                .unwrap_or_else(|| panic!("{reference} points at nothing"))
                .clone(),
            None => v.clone(),
        }
    };
    let keys = |v: &Value| -> Vec<String> {
        v["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("no properties: {v}"))
            .keys()
            .cloned()
            .collect()
    };
    assert_eq!(keys(&schema), TOP_KEYS);
    assert_eq!(schema["required"], json!(["version"]));
    let defaults = resolve(&schema["properties"]["defaults"]);
    assert_eq!(keys(&defaults), ENTRY_KEYS);
    let ledger = resolve(&schema["properties"]["ledger"]);
    assert_eq!(keys(&ledger), LEDGER_KEYS);
    let list = &schema["properties"]["tool"];
    assert_eq!(list["maxItems"], json!(MAX_TOOLS));
    let tool = resolve(&list["items"]);
    assert_eq!(tool["required"], json!(["match"]));
    let tool_keys = keys(&tool);
    assert_eq!(tool_keys[0], "match");
    assert_eq!(tool_keys[1..], ENTRY_KEYS);
    // A [[tool]]'s entry keys are the very descriptions [defaults] has.
    for key in ENTRY_KEYS {
        assert_eq!(
            resolve(&tool["properties"][key]),
            defaults["properties"][key],
            "{key}"
        );
    }
    // The one rule across an entry's keys holds in a [[tool]] as in [defaults].
    assert_eq!(tool["not"], defaults["not"]);
    assert_eq!(
        defaults["not"]["required"],
        json!(["network", "network_max_bytes"])
    );
    // Every object the schema describes refuses keys it does not list, as the loader does.
    fn closed(v: &Value, at: &str, objects: &mut usize) {
        match v {
            Value::Object(map) => {
                if map.contains_key("properties") {
                    assert_eq!(map.get("additionalProperties"), Some(&json!(false)), "{at}");
                    *objects += 1;
                }
                for (k, sub) in map {
                    // A `not` states a condition on an object described elsewhere.
                    if k != "not" {
                        closed(sub, &format!("{at}/{k}"), objects);
                    }
                }
            }
            Value::Array(items) => {
                for (i, sub) in items.iter().enumerate() {
                    closed(sub, &format!("{at}/{i}"), objects);
                }
            }
            _ => {}
        }
    }
    let mut objects = 0;
    closed(&schema, "", &mut objects);
    // The document, [ledger], an entry, a [[tool]], network's table.
    assert_eq!(objects, 5);
}

#[test]
fn the_corpus_covers_every_key_with_accepted_and_refused_values() {
    let entry = entry_values();
    for key in ENTRY_KEYS {
        for accepted in [true, false] {
            assert!(
                entry.iter().any(|(k, _, ok)| *k == key && *ok == accepted),
                "{key}: no {} value",
                if accepted { "accepted" } else { "refused" }
            );
        }
    }
    let ledger = ledger_values();
    for key in LEDGER_KEYS {
        for accepted in [true, false] {
            assert!(
                ledger.iter().any(|(k, _, ok)| *k == key && *ok == accepted),
                "[ledger] {key}"
            );
        }
    }
    // The entry table names no key the loader does not know (those are the unknown-key cases).
    assert!(entry.iter().all(|(k, _, _)| ENTRY_KEYS.contains(k)));
    assert!(ledger.iter().all(|(k, _, _)| LEDGER_KEYS.contains(k)));
}

#[test]
fn the_schema_and_the_loader_give_every_case_the_same_verdict() {
    let v = validator();
    let cases = corpus();
    let disagreements: Vec<String> = cases
        .iter()
        .filter_map(|(what, text, ok)| verdicts_disagree(&v, what, text, *ok))
        .collect();
    assert!(
        disagreements.is_empty(),
        "{} of {} cases:\n{}",
        disagreements.len(),
        cases.len(),
        disagreements.join("\n")
    );
    let accepted = cases.iter().filter(|c| c.2).count();
    assert!(
        accepted > 80 && cases.len() - accepted > 200,
        "accepted {accepted} of {}",
        cases.len()
    );
}

/// What only the loader decides: policies the schema accepts and the loader refuses, each with
/// the reason and the context it is loaded in.
fn loader_only() -> Vec<(&'static str, String, LoadContext)> {
    let cx = context();
    let text = |body: &str| format!("version = 1\n{body}\n");
    vec![
        (
            "a grant path that does not exist",
            text("[defaults]\nfs_read = [\"/no/such/path-ptd\"]"),
            cx.clone(),
        ),
        (
            "a confinement key beside `unconfined = true`, in [defaults]",
            text("[defaults]\nunconfined = true\nfs_read = []"),
            cx.clone(),
        ),
        (
            "a confinement key in an entry that inherits `unconfined = true`",
            text("[defaults]\nunconfined = true\n[[tool]]\nmatch = \"a\"\nlimit_pids = 4"),
            cx.clone(),
        ),
        (
            "a grant of the whole file system",
            text("[defaults]\nfs_write = [\"/\"]"),
            cx.clone(),
        ),
        (
            "the whole file system spelled otherwise",
            text("[defaults]\nfs_read = [\"/tmp/..\"]"),
            cx.clone(),
        ),
        (
            "a grant that holds the ledger's folder",
            text("[ledger]\npath = \"/tmp/ptd-schema-test/ledger.db\"\n[defaults]\nfs_write = [\"/tmp\"]"),
            cx.clone(),
        ),
        (
            "an adapter program not on PATH",
            text("[defaults]\nadapter = [\"no-such-program-ptd\"]"),
            cx.clone(),
        ),
        (
            "run_as root",
            text("[defaults]\nrun_as = \"root\""),
            cx.clone(),
        ),
        ("run_as uid 0", text("[defaults]\nrun_as = \"0\""), cx.clone()),
        (
            "run_as a user this host does not have",
            text("[defaults]\nrun_as = \"no-such-user-ptd\""),
            cx.clone(),
        ),
        (
            "a size over 2^63 - 1 bytes",
            text("[defaults]\nlimit_memory = \"8589934592G\""),
            cx.clone(),
        ),
        (
            "a size in digits over 2^63 - 1",
            text("[defaults]\nlimit_file_size = \"9223372036854775808\""),
            cx.clone(),
        ),
        (
            "timeout_ms above the bridge's",
            text("[defaults]\ntimeout_ms = 60000"),
            LoadContext {
                bridge_timeout_ms: Some(30_000),
                ..cx.clone()
            },
        ),
        (
            "decision = \"ask\" without a ledger",
            text("[[tool]]\nmatch = \"a\"\ndecision = \"ask\""),
            LoadContext {
                ledger: None,
                ..cx.clone()
            },
        ),
        (
            "two entries with the same match",
            text("[[tool]]\nmatch = \"git.*\"\n[[tool]]\nmatch = \"git.*\""),
            cx.clone(),
        ),
        (
            "a float with no fraction for an integer (JSON does not tell 1.0 from 1)",
            "version = 1.0\n".to_string(),
            cx.clone(),
        ),
        (
            "a float with no fraction for a count",
            text("[defaults]\nlimit_pids = 64.0"),
            cx.clone(),
        ),
        (
            "a datetime for a string (JSON holds it as text)",
            text("[defaults]\ncwd = 1979-05-27"),
            cx.clone(),
        ),
    ]
}

#[test]
fn what_only_the_loader_decides_is_accepted_by_the_schema_and_refused_by_the_loader() {
    let v = validator();
    for (what, text, cx) in loader_only() {
        let instance = as_json(&text);
        assert!(
            v.is_valid(&instance),
            "{what}: the schema refuses it after all: {:?}",
            schema_errors(&v, &instance)
        );
        assert!(loader(&text, &cx).is_err(), "{what}: the loader accepts it");
    }
    // The same entries without what made them wrong are accepted by both.
    assert!(loader(
        "version = 1\n[[tool]]\nmatch = \"a\"\ndecision = \"ask\"\n",
        &context()
    )
    .is_ok());
    assert!(loader(
        "version = 1\n[defaults]\ntimeout_ms = 30000\n",
        &LoadContext {
            bridge_timeout_ms: Some(30_000),
            ..context()
        }
    )
    .is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any mix of the corpus's entry values, in `[defaults]` and in two `[[tool]]` entries:
    /// accepted by both exactly when every value is.
    #[test]
    fn mixed_entries_get_the_same_verdict(
        picks in proptest::collection::vec((any::<proptest::sample::Index>(), 0usize..3), 0..8)
    ) {
        let values = entry_values();
        let mut sections: [Vec<(&str, &str)>; 3] = Default::default();
        let mut all_accepted = true;
        for (index, section) in picks {
            let (key, value, ok) = &values[index.index(values.len())];
            // `unconfined = true` beside a confinement key (in its table, or inherited from
            // [defaults]) is a loader-only refusal (see `loader_only`): the corpus covers the
            // key alone, the mix leaves it out.
            if *key == "unconfined" {
                continue;
            }
            // One key once per section (TOML refuses a repeated key).
            if sections[section].iter().any(|(k, _)| k == key) {
                continue;
            }
            sections[section].push((*key, value.as_str()));
            all_accepted &= *ok;
        }
        // `network_max_bytes` beside a `network` of "none" or "any" in one table is refused
        // by both (it bounds the egress proxy, which only an allow list has).
        for section in &sections {
            let has = |key: &str| section.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
            if has("network_max_bytes").is_some() && has("network").is_some_and(|v| v.starts_with('"')) {
                all_accepted = false;
            }
        }
        let mut text = String::from("version = 1\n");
        for (i, section) in sections.iter().enumerate() {
            text.push_str(match i {
                0 => "[defaults]\n",
                1 => "[[tool]]\nmatch = \"a.*\"\n",
                _ => "[[tool]]\nmatch = \"a.b\"\n",
            });
            for (key, value) in section {
                text.push_str(&format!("{key} = {value}\n"));
            }
        }
        let v = validator();
        let disagreement = verdicts_disagree(&v, "mix", &text, all_accepted);
        prop_assert!(disagreement.is_none(), "{}\n{}", disagreement.unwrap_or_default(), text);
    }
}
