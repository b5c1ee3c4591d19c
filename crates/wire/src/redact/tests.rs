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

#[test]
fn keys_get_the_full_string_rules_in_a_full_redaction() {
    let mut r = with_secret(SECRET);
    r.add_host_path("/work/main");
    let mut v = json!({
        "/home/alice/notes.txt": 1,
        "/work/main/src": 2,
        "Bearer abcdEF123456": 3,
        "/home/bob": 4,
        "/home/carol": 5,
        SECRET: 6,
        "plain": 7
    });
    let mut scrubbed = v.clone();
    r.redact_value(&mut v);
    let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        [
            "[host-path]/notes.txt",
            "[host-path]/src",
            "Bearer [redacted]",
            "[host-path]",
            "[host-path]~2",
            "[redacted]",
            "plain"
        ]
    );
    // Exact secrets only, when that is all that is asked.
    r.scrub_secrets_value(&mut scrubbed);
    let keys: Vec<_> = scrubbed.as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys[..3],
        [
            "/home/alice/notes.txt",
            "/work/main/src",
            "Bearer abcdEF123456"
        ]
    );
    assert_eq!(keys[5], "[redacted]");
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

    use crate::redact::strings_in;

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

        /// The JSON text pass gives exactly what the tree walk gives, byte for byte once the
        /// tree is serialized, in both scopes, whatever the layout of the input.
        #[test]
        fn json_text_redaction_matches_the_tree_walk(
            tree in json_tree(), secret in secret(), pretty in any::<bool>()
        ) {
            let mut r = Redactor::new();
            r.add_secret(&secret);
            r.add_host_path("/work/main");
            let doc = json!({ "authorization": tree.clone(), "rest": tree, secret.as_str(): 1 });
            let text = if pretty {
                serde_json::to_string_pretty(&doc).unwrap()
            } else {
                serde_json::to_string(&doc).unwrap()
            };
            let mut full = doc.clone();
            r.redact_value(&mut full);
            let out = r.redact_json(&text, Scope::Full { envelope_root: true }).unwrap();
            prop_assert_eq!(&out, &serde_json::to_string(&full).unwrap());
            prop_assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), full);
            let mut scrubbed = doc.clone();
            r.scrub_secrets_value(&mut scrubbed);
            let out = r.redact_json(&text, Scope::SecretsOnly).unwrap();
            prop_assert_eq!(&out, &serde_json::to_string(&scrubbed).unwrap());
            let plain = Redactor::new().redact_json(&text, Scope::SecretsOnly).unwrap();
            prop_assert_eq!(&plain, &serde_json::to_string(&doc).unwrap());
        }

        #[test]
        fn json_text_redaction_parses_back_is_idempotent_and_keeps_no_secret(
            secret in secret(), tree in json_tree(), noise in tricky_text(), which in 0usize..5
        ) {
            let mut r = Redactor::new();
            r.add_secret(&secret);
            let planted = &forms_of(&secret)[which];
            let embedded = serde_json::to_string(&json!({ "k": secret.as_str() })).unwrap();
            let doc = json!({
                "tree": tree,
                "plain": format!("{noise}{planted}{noise}"),
                planted.as_str(): [secret.as_str(), embedded],
            });
            let text = serde_json::to_string_pretty(&doc).unwrap();
            for scope in [Scope::SecretsOnly, Scope::Full { envelope_root: true }] {
                let out = r.redact_json(&text, scope).unwrap();
                let parsed: Value = serde_json::from_str(&out).unwrap();
                for s in strings_in(&parsed) {
                    for form in forms_of(&secret) {
                        prop_assert!(!s.contains(&form), "{:?} in {:?}", form, s);
                    }
                }
                prop_assert_eq!(r.redact_json(&out, scope).unwrap(), out);
            }
        }

        /// The fast path (no rule can change anything) copies strings without decoding them;
        /// whatever escapes the input spells a string with, it writes what the decoding path
        /// writes for the decoded text: `serde_json`'s canonical form.
        #[test]
        fn the_fast_path_writes_every_spelling_of_a_string_canonically(
            chars in prop::collection::vec((any::<char>(), 0u8..4), 0..40),
            key_chars in prop::collection::vec((any::<char>(), 0u8..4), 0..8),
        ) {
            let spell = |chars: &[(char, u8)]| -> String {
                let mut out = String::from("\"");
                for &(c, how) in chars {
                    let mut units = [0u16; 2];
                    match (c, how) {
                        ('"', _) => out.push_str("\\\""),
                        ('\\', _) => out.push_str("\\\\"),
                        ('/', 1) => out.push_str("\\/"),
                        ('\n', 1) => out.push_str("\\n"),
                        (c, _) if (c as u32) < 0x20 || how == 2 => {
                            for unit in c.encode_utf16(&mut units) {
                                out.push_str(&format!("\\u{unit:04x}"));
                            }
                        }
                        (c, 3) => {
                            for unit in c.encode_utf16(&mut units) {
                                out.push_str(&format!("\\u{unit:04X}"));
                            }
                        }
                        (c, _) => out.push(c),
                    }
                }
                out.push('"');
                out
            };
            let (value, key) = (spell(&chars), spell(&key_chars));
            let text = format!("{{ {key} : [ {value} , {value} ] }}");
            let tree: Value = serde_json::from_str(&text).unwrap();
            let fast = Redactor::new().redact_json(&text, Scope::SecretsOnly).unwrap();
            prop_assert_eq!(&fast, &serde_json::to_string(&tree).unwrap());
            // A secret that occurs nowhere sends every string through the decoding path.
            let decoding = with_secret("\u{2603}-never-present-\u{2603}")
                .redact_json(&text, Scope::SecretsOnly)
                .unwrap();
            prop_assert_eq!(fast, decoding);
        }

        #[test]
        fn json_text_redaction_never_panics(text in any::<String>(), tree in json_tree()) {
            let r = Redactor::new();
            let accepted = serde_json::from_str::<Value>(&text).is_ok();
            for scope in [Scope::SecretsOnly, Scope::Full { envelope_root: false }] {
                let out = r.redact_json(&text, scope);
                prop_assert!(out.is_ok() || !accepted, "{:?}", out);
            }
            // Damaged documents: prefixes of a real one, cut anywhere.
            let whole = serde_json::to_string(&tree).unwrap();
            let step = (whole.len() / 64).max(1);
            for end in (0..whole.len()).step_by(step).filter(|&end| whole.is_char_boundary(end)) {
                // Only a number has a prefix that is a document too.
                let out = r.redact_json(&whole[..end], Scope::SecretsOnly);
                prop_assert!(out.is_err() || tree.is_number(), "{:?}", &whole[..end]);
            }
        }
    }
}

/// Adversarial shapes for every rule, each 1 MiB. Redaction is linear, so each takes well
/// under a second in a release build and a few seconds at most in a debug one; the quadratic
/// scans these guard against took many minutes on the same inputs (`token='x' ` at 128 KiB
/// already took 4 s in release, and time grew fourfold with each doubling).
mod linear_time {
    use super::*;
    use std::time::{Duration, Instant};

    /// Generous, for slow debug builds on shared machines: a regression costs minutes.
    const BOUND: Duration = Duration::from_secs(20);
    const SIZE: usize = 1 << 20;

    fn repeated(shape: &str) -> String {
        shape.repeat(SIZE / shape.len())
    }

    /// Redact `text`, check the time bound, and return the output.
    fn timed(r: &Redactor, text: &str) -> String {
        let started = Instant::now();
        let out = r.redact_str(text);
        let took = started.elapsed();
        assert!(took < BOUND, "{} bytes took {took:?}", text.len());
        out
    }

    /// `expected` as many times as `shape` is repeated.
    fn like(shape: &str, expected: &str) -> String {
        expected.repeat(SIZE / shape.len())
    }

    /// Redact `shape` repeated, check the time bound and that a second run changes nothing.
    fn idempotent(r: &Redactor, shape: &str) -> String {
        let out = timed(r, &repeated(shape));
        assert_eq!(timed(r, &out), out, "{shape}");
        out
    }

    #[test]
    fn quoted_values_never_rescan_the_line() {
        for (shape, expected) in [
            ("token='x' ", "token='[redacted]' "),
            ("token=\\\"x\\\" ", "token=\\\"[redacted]\\\" "),
            ("token=\"x\" ", "token=\"[redacted]\" "),
        ] {
            assert_eq!(idempotent(&Redactor::new(), shape), like(shape, expected));
        }
    }

    #[test]
    fn unbalanced_quotes_stay_linear() {
        let r = Redactor::new();
        assert_eq!(timed(&r, &repeated("a=\"")), repeated("a=\""));
        for shape in [
            "password=\"",
            "token='",
            "token=\\\"",
            "token=' x",
            "a=\" token=\"x",
        ] {
            let out = idempotent(&r, shape);
            assert!(out.contains(REDACTED), "{shape}");
        }
        // One opening quote and nothing to close it: the value runs to the first stop.
        let text = format!("password='{}", "x ".repeat(SIZE / 2));
        assert!(timed(&r, &text).starts_with("password='[redacted] x x"));
    }

    #[test]
    fn runs_of_keys_stay_linear() {
        let r = Redactor::new();
        // Bare `name:value` without credential traits is kept, and each separator asks where
        // the same long value ends and whether it holds a digit.
        assert_eq!(idempotent(&r, "token:"), like("token:", "token:"));
        assert_eq!(
            idempotent(&r, "token:bearer "),
            like("token:bearer ", "token:bearer ")
        );
        assert!(idempotent(&r, "token:Bearer ").contains(REDACTED));
        assert_eq!(idempotent(&r, "token="), "token=[redacted]");
        assert!(idempotent(&r, "token= ").starts_with("token= [redacted] token= [redacted]"));
        idempotent(&r, "token = = ");
        idempotent(&r, "password: Bearer ");
        idempotent(&r, "x-api-key==");
    }

    #[test]
    fn runs_of_auth_schemes_and_headers_stay_linear() {
        let r = Redactor::new();
        assert_eq!(idempotent(&r, "Bearer "), like("Bearer ", "Bearer "));
        assert_eq!(
            idempotent(&r, "Bearer abcDEF123 "),
            like("Bearer abcDEF123 ", "Bearer [redacted] ")
        );
        assert_eq!(idempotent(&r, "Cookie:"), "Cookie:[redacted]");
        assert_eq!(
            idempotent(&r, "Cookie: x\n"),
            like("Cookie: x\n", "Cookie: [redacted]\n")
        );
        assert_eq!(
            idempotent(&r, "cookie    "),
            like("cookie    ", "cookie    ")
        );
        assert_eq!(
            idempotent(&r, "Set-Cookie:\n"),
            like("Set-Cookie:\n", "Set-Cookie:\n")
        );
    }

    #[test]
    fn runs_of_urls_stay_linear() {
        let r = Redactor::new();
        assert_eq!(
            idempotent(&r, "https://a:b@"),
            like("https://a:b@", "https://[redacted]@")
        );
        assert_eq!(idempotent(&r, "a://"), like("a://", "a://"));
        let long_scheme = format!("{}://", "a".repeat(40));
        assert_eq!(
            idempotent(&r, &long_scheme),
            like(&long_scheme, &long_scheme)
        );
    }

    #[test]
    fn runs_of_paths_stay_linear() {
        let mut r = Redactor::new();
        r.add_host_path("/work/main");
        assert_eq!(idempotent(&r, "/home/"), like("/home/", "/home/"));
        assert_eq!(idempotent(&r, "/home/a/"), like("/home/a/", "[host-path]/"));
        assert_eq!(idempotent(&r, "/work/mai"), like("/work/mai", "/work/mai"));
        assert_eq!(
            idempotent(&r, " /work/main"),
            like(" /work/main", " [host-path]")
        );
        assert_eq!(
            idempotent(&r, "/root.... "),
            like("/root.... ", "[host-path].... ")
        );
        assert_eq!(
            idempotent(&r, "/root....x"),
            like("/root....x", "/root....x")
        );
    }

    #[test]
    fn runs_of_token_shapes_stay_linear() {
        let r = Redactor::new();
        assert_eq!(idempotent(&r, "eyJ."), like("eyJ.", "eyJ."));
        idempotent(&r, "eyJhbGciOiJIUzI1NiJ9.");
        assert_eq!(idempotent(&r, " sk-a"), like(" sk-a", " sk-a"));
        assert_eq!(idempotent(&r, " AKIA"), like(" AKIA", " AKIA"));
        assert_eq!(
            idempotent(&r, " ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
            like(" ghp_abcdefghijklmnopqrstuvwxyz0123456789", " [redacted]")
        );
    }

    #[test]
    fn a_long_line_without_a_newline_stays_linear() {
        let r = Redactor::new();
        let shape = "token='x' password=\\\"y\\\" Bearer abcdef123 k=v ";
        let expected = "token='[redacted]' password=\\\"[redacted]\\\" Bearer [redacted] k=v ";
        assert_eq!(idempotent(&r, shape), like(shape, expected));
        let plain = "x".repeat(SIZE);
        assert_eq!(timed(&r, &plain), plain);
    }

    #[test]
    fn many_secrets_stay_linear() {
        let mut r = Redactor::new();
        let secrets: Vec<String> = (0..2000).map(|i| format!("secret-{i:05}-value")).collect();
        for secret in &secrets {
            r.add_secret(secret);
        }
        // Every secret, and near misses that share a long prefix with many of them.
        let text = repeated(&(secrets.join(" ") + " secret-0000 secret-00001-valu "));
        let out = timed(&r, &text);
        assert!(!out.contains("-value"));
        assert_eq!(timed(&r, &out), out);
    }

    #[test]
    fn many_keys_that_redact_alike_stay_linear() {
        // Each key becomes `[host-path]`; finding the next free `~n` from 2 every time was
        // quadratic in the number of keys.
        let keys = 100_000;
        let doc: String = (0..keys)
            .map(|i| format!("\"/home/u{i}\":{i}"))
            .collect::<Vec<_>>()
            .join(",");
        let doc = format!("{{{doc}}}");
        let started = Instant::now();
        let out = Redactor::new()
            .redact_json(
                &doc,
                Scope::Full {
                    envelope_root: true,
                },
            )
            .unwrap();
        assert!(started.elapsed() < BOUND, "{:?}", started.elapsed());
        assert!(out.starts_with(r#"{"[host-path]":0,"[host-path]~2":1,"[host-path]~3":2,"#));
        assert!(out.ends_with(&format!(r#""[host-path]~{keys}":{}}}"#, keys - 1)));
        let mut tree: Value = serde_json::from_str(&doc).unwrap();
        let started = Instant::now();
        Redactor::new().redact_value(&mut tree);
        assert!(started.elapsed() < BOUND, "{:?}", started.elapsed());
        assert_eq!(serde_json::to_string(&tree).unwrap(), out);
    }

    #[test]
    fn json_documents_stay_linear() {
        let r = Redactor::new();
        let full = Scope::Full {
            envelope_root: true,
        };
        for shape in ["token='x' ", "token:", "/home/", "Bearer ", "\\\"\\u00e9"] {
            let doc = format!(
                "[\"{}\",{{\"k\":\"{}\"}}]",
                repeated(shape),
                repeated(shape)
            );
            let started = Instant::now();
            let out = r.redact_json(&doc, full).unwrap();
            assert!(
                started.elapsed() < BOUND,
                "{shape}: {:?}",
                started.elapsed()
            );
            assert_eq!(r.redact_json(&out, full).unwrap(), out, "{shape}");
        }
        let depth = 1 << 20;
        let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let started = Instant::now();
        assert_eq!(r.redact_json(&deep, full).unwrap(), deep);
        assert!(started.elapsed() < BOUND, "{:?}", started.elapsed());
    }
}

/// `redact_tail` / `redact_head`: no part of a secret survives a cut.
mod cuts {
    use super::*;

    const KEEP: usize = 64 * 1024;
    /// Upper case and digits only, so no fragment of it can come from a marker or the filler.
    const SECRET: &str = "QZ9X7741WVKQ0042";

    /// `len` bytes of blank lines with `planted` written over them at `at`.
    fn plant(len: usize, at: usize, planted: &str) -> Vec<u8> {
        let mut raw: Vec<u8> = (0..len)
            .map(|i| if i % 64 == 63 { b'\n' } else { b' ' })
            .collect();
        raw[at..at + planted.len()].copy_from_slice(planted.as_bytes());
        raw
    }

    fn assert_no_fragment(out: &str, context: &str) {
        for start in 0..SECRET.len() {
            for end in start + 3..=SECRET.len() {
                let fragment = &SECRET[start..end];
                assert!(!out.contains(fragment), "{fragment:?} survived ({context})");
            }
        }
    }

    /// Where to cut a planted text: next to each end, and every few bytes of the secret.
    fn cut_offsets(planted: &str) -> impl Iterator<Item = usize> {
        let len = planted.len();
        let secret_at = len - SECRET.len();
        (1..len).filter(move |&at| at < 3 || at + 3 > len || (at >= secret_at && at % 3 == 0))
    }

    /// The ways a secret is planted, with the redactor that must catch it.
    fn plantings() -> Vec<(String, Redactor)> {
        let mut registered = Redactor::new();
        registered.add_secret(SECRET);
        vec![
            (SECRET.to_string(), registered),
            (format!("token={SECRET}"), Redactor::new()),
            (format!("Bearer {SECRET}"), Redactor::new()),
            (format!("password: \"{SECRET}\""), Redactor::new()),
        ]
    }

    #[test]
    fn a_secret_across_the_tail_edge_never_survives() {
        let total = 2 * KEEP;
        let edge = total - KEEP;
        for (planted, r) in plantings() {
            for offset in cut_offsets(&planted) {
                let raw = plant(total, edge - offset, &planted);
                let (out, dropped) = r.redact_tail(&raw, KEEP);
                let context = format!("{planted:?} cut after {offset} bytes");
                assert!(dropped, "{context}");
                assert!(out.len() <= KEEP, "{context}");
                assert!(out.len() > KEEP - 2 * 64, "too much dropped ({context})");
                assert_no_fragment(&out, &context);
            }
        }
    }

    #[test]
    fn a_secret_across_the_head_edge_never_survives() {
        let total = 2 * KEEP;
        for (planted, r) in plantings() {
            for offset in cut_offsets(&planted) {
                let raw = plant(total, KEEP - offset, &planted);
                let (out, dropped) = r.redact_head(&raw, KEEP);
                let context = format!("{planted:?} cut after {offset} bytes");
                assert!(dropped, "{context}");
                assert!(out.len() <= KEEP, "{context}");
                assert!(out.len() > KEEP - 2 * 64, "too much dropped ({context})");
                assert_no_fragment(&out, &context);
            }
        }
    }

    #[test]
    fn the_partial_line_at_the_cut_is_dropped() {
        let raw = plant(2 * KEEP, 0, "");
        let (tail, dropped) = Redactor::new().redact_tail(&raw, KEEP);
        assert!(dropped);
        assert!(tail.len() <= KEEP && tail.len() >= KEEP - 64);
        assert_eq!(tail.len() % 64, 0, "starts on a line");
        let (head, dropped) = Redactor::new().redact_head(&raw, KEEP);
        assert!(dropped);
        assert_eq!(head.len() % 64, 63, "ends before a newline");
        // Without a newline in the kept text, the text itself is kept.
        let flat = vec![b'x'; 2 * KEEP];
        assert_eq!(
            Redactor::new().redact_tail(&flat, KEEP),
            ("x".repeat(KEEP), true)
        );
        assert_eq!(
            Redactor::new().redact_head(&flat, KEEP),
            ("x".repeat(KEEP), true)
        );
    }

    #[test]
    fn a_short_capture_is_redacted_whole() {
        let r = with_secret(SECRET);
        let raw = format!("one\ntoken=abc {SECRET}\nlast");
        let expected = ("one\ntoken=[redacted] [redacted]\nlast".to_string(), false);
        assert_eq!(r.redact_tail(raw.as_bytes(), 1024), expected);
        assert_eq!(r.redact_head(raw.as_bytes(), 1024), expected);
        assert_eq!(r.redact_tail(b"", 10), (String::new(), false));
        assert_eq!(r.redact_head(b"", 0), (String::new(), false));
    }

    #[test]
    fn a_secret_cut_by_the_capture_goes_with_the_overlap_even_when_redaction_shrinks_it() {
        // The capture kept only the end of a two-line secret; the long header after it shrinks
        // to a marker, so the whole redacted text is shorter than `keep`: the overlap, where the
        // capture's own cut lies, must still go.
        let raw = format!(
            "Z9X7741\nWVKQ0042 Cookie: {}\nlast line\n",
            "x".repeat(100 * 1024)
        );
        let (out, dropped) = Redactor::new().redact_tail(raw.as_bytes(), KEEP);
        assert_eq!(out, "last line\n");
        assert!(dropped);
        let raw = format!(
            "first line\nCookie: {}\nQZ9X77\n41WV",
            "x".repeat(100 * 1024)
        );
        let (out, dropped) = Redactor::new().redact_head(raw.as_bytes(), KEEP);
        assert_eq!(out, "first line");
        assert!(dropped);
    }

    #[test]
    fn growth_from_redaction_is_cut_too() {
        // An 8-character secret becomes a 10-byte marker.
        let r = with_secret("K7QX-99Z");
        let raw = "K7QX-99Z\n".repeat(100);
        let (out, dropped) = r.redact_tail(raw.as_bytes(), raw.len());
        assert!(dropped);
        assert!(out.len() <= raw.len());
        assert_eq!(out, "[redacted]\n".repeat(out.len() / 11));
        let (out, dropped) = r.redact_head(raw.as_bytes(), raw.len());
        assert!(dropped);
        assert_eq!(out, "[redacted]\n".repeat((out.len() + 1) / 11).trim_end());
    }

    #[test]
    fn cuts_fall_on_character_boundaries_and_bad_bytes_are_replaced() {
        let mut raw = "é".repeat(1000).into_bytes();
        raw.extend_from_slice(b"\xff\xfe tail");
        let whole = String::from_utf8_lossy(&raw).into_owned();
        for keep in [0, 1, 2, 3, 101, 1001, 5000] {
            let (tail, _) = Redactor::new().redact_tail(&raw, keep);
            assert!(tail.len() <= keep, "{keep}");
            assert!(whole.ends_with(&tail), "{keep}");
            let (head, _) = Redactor::new().redact_head(&raw, keep);
            assert!(head.len() <= keep, "{keep}");
            assert!(whole.starts_with(&head), "{keep}");
        }
        let (tail, dropped) = Redactor::new().redact_tail(&raw, 5000);
        assert!(!dropped);
        assert!(tail.ends_with("\u{fffd}\u{fffd} tail"));
    }
}
