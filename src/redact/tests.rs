use super::secrets::{json_escape, percent_encode, JsonStyle};
use super::*;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use serde_json::json;

const SECRET: &str = "s3cr3t-Value_42";

fn with_secret(secret: &str) -> Redactor {
    let mut r = Redactor::new();
    r.add_secret(secret);
    r
}

#[test]
fn secrets_are_scrubbed_from_keys_without_merging_them() {
    let mut r = Redactor::new();
    r.add_secret("key-secret-one");
    r.add_secret("key-secret-two");
    let mut v = json!({"key-secret-one": 1, "key-secret-two": 2, "[redacted]~2": 3, "z": [SECRET]});
    r.scrub_secrets_value(&mut v);
    assert_eq!(
        v,
        json!({"[redacted]": 1, "[redacted]~2": 2, "[redacted]~2~2": 3, "z": [SECRET]})
    );
    let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["[redacted]", "[redacted]~2", "[redacted]~2~2", "z"]);
}

#[test]
fn scrub_secrets_value_leaves_everything_but_secrets_alone() {
    let r = with_secret(SECRET);
    let mut v = json!({
        "password": "visible", "note": "Bearer abcdef123456", "path": "/home/alice/x",
        "deep": [{"s": format!("x{SECRET}x")}], "n": 12345678
    });
    r.scrub_secrets_value(&mut v);
    assert_eq!(
        v,
        json!({
            "password": "visible", "note": "Bearer abcdef123456", "path": "/home/alice/x",
            "deep": [{"s": "x[redacted]x"}], "n": 12345678
        })
    );
}

#[test]
fn values_under_sensitive_keys_are_replaced_whole() {
    let mut v = json!({
        "input": {
            "headers": {"Authorization": "Bearer x", "Cookie": ["a", "b"], "x-api-key": 42},
            "credentials": {"user": "bob", "pass": "x"},
            "password": null, "token": false, "max_tokens": 100, "token_count": 3,
            "tokenizer_model": "cl100k", "sandbox_session_id": "s-1"
        }
    });
    Redactor::new().redact_value(&mut v);
    assert_eq!(
        v,
        json!({
            "input": {
                "headers": {"Authorization": "[redacted]", "Cookie": "[redacted]", "x-api-key": "[redacted]"},
                "credentials": "[redacted]",
                "password": null, "token": false, "max_tokens": 100, "token_count": 3,
                "tokenizer_model": "cl100k", "sandbox_session_id": "s-1"
            }
        })
    );
}

#[test]
fn the_root_authorization_object_is_structural_but_its_members_are_not() {
    let mut v = json!({
        "authorization": {
            "allowed_tools": ["workspace.read"],
            "principal": {"id": "bob", "token": "abc"},
            "capability": "read"
        },
        "metadata": {"authorization": {"x": 1}},
        "dispatcher": {"endpoint": {"token_env": "GH_TOKEN", "url_env": "URL"}},
        "sandbox_env": {"secret_env": ["API_TOKEN", "DB_PASSWORD"]}
    });
    Redactor::new().redact_value(&mut v);
    assert_eq!(
        v,
        json!({
            "authorization": {
                "allowed_tools": ["workspace.read"],
                "principal": {"id": "bob", "token": "[redacted]"},
                "capability": "read"
            },
            "metadata": {"authorization": "[redacted]"},
            "dispatcher": {"endpoint": {"token_env": "GH_TOKEN", "url_env": "URL"}},
            "sandbox_env": {"secret_env": ["API_TOKEN", "DB_PASSWORD"]}
        })
    );
    let mut not_an_object = json!({"authorization": "Bearer abc"});
    Redactor::new().redact_value(&mut not_an_object);
    assert_eq!(not_an_object, json!({"authorization": "[redacted]"}));
}

#[test]
fn the_upstream_example_bridge_is_unchanged() {
    // The parts of upstream's example bridge that a careless rule would touch.
    let original = json!({
        "schema": "wp-codebox/parent-tool-bridge/v1",
        "allowed_tools": ["workspace.read"],
        "dispatcher": {
            "command": {"argv": ["wp-codebox-parent-dispatch"]},
            "endpoint": {"url_env": "WP_CODEBOX_PARENT_TOOL_URL", "method": "POST",
                         "token_env": "WP_CODEBOX_PARENT_TOOL_TOKEN"},
            "timeout_ms": 30000
        },
        "sandbox_env": {
            "mode": "metadata-only",
            "variables": {"bridge_ref": "WP_CODEBOX_PARENT_TOOL_BRIDGE_REF"},
            "secret_env": [],
            "notes": "It must not include parent credentials or tool result payloads."
        },
        "authorization": {
            "mode": "allowlist",
            "failure_status": "denied",
            "notes": "returns denied for authorization failures without attempting fallback"
        },
        "redaction": {
            "transcript_artifact_refs": [],
            "notes": "Secret values, bearer tokens, cookies, and host-local paths stay out of envelopes and transcripts."
        },
        "metadata": {}
    });
    let mut v = original.clone();
    Redactor::new().redact_value(&mut v);
    assert_eq!(v, original);
}

#[test]
fn redaction_is_idempotent_on_mixed_text() {
    let mut r = with_secret(SECRET);
    r.add_host_path("/work/main");
    let text = format!(
        "Authorization: Bearer {SECRET}\nCookie: x={SECRET}\nurl=https://u:{SECRET}@h/?token=1 \
         /work/main/a /home/bob/.netrc sk-abcdefghijklmnop1234567890 password=\"q w\""
    );
    let once = r.redact_str(&text);
    assert!(!once.contains(SECRET));
    assert_eq!(r.redact_str(&once), once);
}

#[test]
fn a_redacted_tree_is_valid_json_even_when_deep() {
    // Built by hand: `json!` would serialize `v` recursively at every level.
    let mut v = Value::String("leaf password=x".into());
    for i in 0..100_000 {
        v = if i % 2 == 0 {
            Value::Array(vec![v])
        } else {
            let mut map = Map::new();
            map.insert("password".into(), Value::String("p".into()));
            map.insert("next".into(), v);
            Value::Object(map)
        };
    }
    let mut r = with_secret("deep-secret-value");
    r.add_host_path("/work");
    r.redact_value(&mut v);
    r.scrub_secrets_value(&mut v);
    // Walk down to the leaf iteratively to check it, then take the tree apart without
    // recursion (serde_json's drop would recurse once per level).
    let mut cursor = &v;
    loop {
        match cursor {
            Value::Array(items) => cursor = &items[0],
            Value::Object(map) => {
                assert_eq!(map["password"], json!("[redacted]"));
                cursor = &map["next"];
            }
            leaf => {
                assert_eq!(leaf, &json!("leaf password=[redacted]"));
                break;
            }
        }
    }
    dismantle(v);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Printable secrets of at least 8 characters, with quotes, backslashes, brackets,
    /// URL-special characters and non-ASCII in the mix.
    fn secret() -> impl Strategy<Value = String> {
        proptest::string::string_regex(r#"[ -~é€😀\[\]"\\%+/=&?@]{8,24}"#)
            .expect("valid strategy regex")
            .prop_filter("a secret inside a marker cannot be kept out of it", |s| {
                qualifies_as_secret(s)
                    && s.trim().chars().count() >= MIN_SECRET_CHARS
                    && !MARKERS
                        .iter()
                        .any(|m| m.contains(s.as_str()) || m.contains(s.trim()))
            })
    }

    /// Text made of fragments that the rules react to, so the properties probe their edges.
    fn tricky_text() -> impl Strategy<Value = String> {
        let fragments = prop::sample::select(vec![
            "token",
            "password",
            "x-api-key",
            "max_tokens",
            "=",
            ":",
            ": ",
            " ",
            "\"",
            "'",
            "\\",
            "\\\"",
            "&",
            ",",
            ";",
            "\n",
            "/",
            "/home/",
            "alice",
            "/root",
            "/work/main",
            "/Users/",
            "Bearer ",
            "Basic ",
            "Cookie: ",
            "https://",
            "@",
            "?",
            "#",
            "sk-",
            "ghp_",
            "AKIA",
            "eyJ",
            ".",
            "abc123XYZ456def789",
            "IOSFODNN7EXAMPLE",
            "[redacted]",
            "[host-path]",
            "[",
            "]",
            "redacted",
            "é",
            "==",
            "authorization",
            "-",
            "_",
        ]);
        prop::collection::vec(fragments, 0..40).prop_map(|parts| parts.concat())
    }

    fn forms_of(secret: &str) -> Vec<String> {
        vec![
            secret.to_string(),
            json_escape(secret, JsonStyle::default()),
            percent_encode(secret, "-._~", false, true),
            STANDARD.encode(secret),
            URL_SAFE_NO_PAD.encode(secret),
        ]
    }

    fn json_tree() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
            tricky_text().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((tricky_text(), inner), 0..6)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    fn strings_in(v: &Value) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![v];
        while let Some(v) = stack.pop() {
            match v {
                Value::String(s) => out.push(s.clone()),
                Value::Array(items) => stack.extend(items),
                Value::Object(map) => {
                    out.extend(map.keys().cloned());
                    stack.extend(map.values());
                }
                _ => {}
            }
        }
        out
    }

    proptest! {
        #[test]
        fn a_planted_secret_never_survives_in_text(
            secret in secret(), before in any::<String>(), after in tricky_text(), which in 0usize..5
        ) {
            let mut r = Redactor::new();
            r.add_secret(&secret);
            let planted = &forms_of(&secret)[which];
            let text = format!("{before}{planted}{after}");
            for out in [r.scrub_secrets_str(&text), r.redact_str(&text)] {
                prop_assert!(!out.contains(&secret), "{out:?}");
                prop_assert!(!out.contains(planted.as_str()), "{out:?}");
            }
        }

        #[test]
        fn a_planted_secret_never_survives_in_a_tree(
            secret in secret(), tree in json_tree(), noise in tricky_text()
        ) {
            let mut r = Redactor::new();
            r.add_secret(&secret);
            let embedded = serde_json::to_string(&json!({ "k": secret.as_str() })).unwrap();
            let mut planted = json!({
                "tree": tree,
                "plain": format!("{noise}{secret}{noise}"),
                secret.as_str(): "as a key",
                "embedded": embedded,
                "url": format!("https://h/?q={}", percent_encode(&secret, "-._~", false, true)),
                "b64": STANDARD.encode(&secret),
            });
            let mut scrubbed = planted.clone();
            r.scrub_secrets_value(&mut scrubbed);
            r.redact_value(&mut planted);
            for v in [&scrubbed, &planted] {
                for s in strings_in(v) {
                    for form in forms_of(&secret) {
                        prop_assert!(!s.contains(&form), "{form:?} in {s:?}");
                    }
                }
            }
        }

        #[test]
        fn redaction_is_idempotent(
            secret in secret(), text in tricky_text(), any_text in any::<String>()
        ) {
            let mut r = Redactor::new();
            r.add_secret(&secret);
            r.add_secret("abc123XYZ456");
            r.add_host_path("/work/main");
            for input in [&text, &any_text, &format!("{text}{secret}{any_text}{text}")] {
                let once = r.redact_str(input);
                prop_assert_eq!(&r.redact_str(&once), &once);
                let scrubbed = r.scrub_secrets_str(input);
                prop_assert_eq!(&r.scrub_secrets_str(&scrubbed), &scrubbed);
                let plain = Redactor::new().redact_str(input);
                prop_assert_eq!(&Redactor::new().redact_str(&plain), &plain);
            }
        }

        #[test]
        fn a_redacted_tree_serializes_to_json_that_parses_back(
            tree in json_tree(), secret in secret()
        ) {
            let mut r = Redactor::new();
            r.add_secret(&secret);
            r.add_host_path("/work/main");
            let mut v = json!({ "authorization": tree.clone(), "rest": tree });
            r.redact_value(&mut v);
            let text = serde_json::to_string(&v).unwrap();
            let back: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(&back, &v);
            let mut again = v.clone();
            r.redact_value(&mut again);
            prop_assert_eq!(&again, &v);
        }

        #[test]
        fn no_input_panics(s in any::<String>(), key in any::<String>(), secret in any::<String>()) {
            let mut r = Redactor::new();
            r.add_secret(&secret);
            r.add_host_path(&secret);
            let _ = r.redact_str(&s);
            let _ = r.scrub_secrets_str(&s);
            let _ = is_sensitive_key(&key);
            let mut v = json!({ key.as_str(): s.as_str(), "x": [s.as_str()] });
            r.redact_value(&mut v);
            r.scrub_secrets_value(&mut v);
        }
    }
}
