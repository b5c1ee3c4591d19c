//! Redaction of raw JSON text, without building a tree (SPEC §5): opaque payloads stay as
//! the text they arrived as, so numbers such as `12345678901234567890123` or `1e400` keep
//! their exact spelling and memory stays a small multiple of the document.
//!
//! It owns the entry points ([`Redactor::redact_json_into`], [`Redactor::redact_json`],
//! [`Redactor::redact_json_pieces`]) over one left-to-right pass (`json_pass.rs`) that reads a
//! JSON text and writes its compact form with the rules of a [`Scope`] applied: the same
//! result, value for value, as the tree walk ([`Redactor::redact_value`],
//! [`Redactor::scrub_secrets_value`]) on the parsed document.
//!
//! Invariants: linear time (each input byte is read once by the reader, and each string goes
//! through the string rules once, which are linear); nesting is tracked on an explicit stack,
//! so no depth can overflow the call stack; memory is the output, the keys of the objects
//! still open, and one string's worth of scratch; numbers and literals are copied byte for
//! byte, never re-formatted; strings are written the way `serde_json` writes them (control
//! characters escaped, everything else as UTF-8), so the output is one line that any JSON
//! reader accepts, with unique keys in every object when the input had them. Input that is
//! not JSON is refused with an [`InvalidJson`] and nothing is written; it never panics.
//!
//! It must not check what a document means (the strict reader and the validators do that).

use super::json_pass::JsonPass;
use super::{InvalidJson, Redactor, Scope, PIECE_BYTES};

impl Redactor {
    /// Append to `out` the compact form of `json` (a valid JSON text, already checked by the
    /// strict reader) with the rules of `scope` applied. Object keys that come out the same
    /// are made unique (`[redacted]`, `[redacted]~2`, …) exactly as the tree walk does. A key
    /// repeated in the input (which the strict reader refuses, and a tree cannot hold) is
    /// left as it is, unless a key of its object was rewritten: then it is made unique too.
    ///
    /// Fast path: with [`Scope::SecretsOnly`] and no secret registered nothing can change, so
    /// this only minifies (and writes strings in the canonical form).
    ///
    /// On input that is not one valid JSON document, `out` is left as it was and the error
    /// says where reading stopped.
    pub(crate) fn redact_json_into(
        &self,
        json: &str,
        scope: Scope,
        out: &mut String,
    ) -> Result<(), InvalidJson> {
        let rules = match scope {
            Scope::SecretsOnly if self.secrets.is_empty() => None,
            scope => Some(scope),
        };
        let mark = out.len();
        let mut pass = JsonPass::new(self, rules, json, out, None);
        let result = pass.run();
        if result.is_err() {
            out.truncate(mark);
        }
        result
    }

    /// [`Redactor::redact_json_into`] into a new string.
    pub fn redact_json(&self, json: &str, scope: Scope) -> Result<String, InvalidJson> {
        let mut out = String::with_capacity(json.len());
        self.redact_json_into(json, scope, &mut out)?;
        Ok(out)
    }

    /// What [`Redactor::redact_json_into`] writes, handed to `emit` in pieces, so that a large
    /// document never has to be held twice: on the fast path (see there) the pieces are at
    /// most [`PIECE_BYTES`] of output each, or one run of a string's characters borrowed from
    /// `json` itself however long it is, and they are emitted as the pass reads. Every other
    /// scope collects the whole output first and emits it only once the pass succeeded.
    ///
    /// On the fast path an error can therefore come after pieces were emitted: give it text a
    /// strict reader already accepted (the grammar is the same, so the error cannot happen).
    /// Elsewhere nothing is emitted on an error.
    pub(crate) fn redact_json_pieces(
        &self,
        json: &str,
        scope: Scope,
        emit: &mut dyn FnMut(&str),
    ) -> Result<(), InvalidJson> {
        let fast = matches!(scope, Scope::SecretsOnly) && self.secrets.is_empty();
        if !fast {
            let out = self.redact_json(json, scope)?;
            emit(&out);
            return Ok(());
        }
        let mut buffer = String::with_capacity(PIECE_BYTES.min(json.len()) + 64);
        let mut pass = JsonPass::new(self, None, json, &mut buffer, Some(emit));
        let result = pass.run();
        if result.is_ok() {
            pass.flush();
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    const FULL: Scope = Scope::Full {
        envelope_root: true,
    };

    fn full(r: &Redactor, json: &str) -> String {
        r.redact_json(json, FULL).expect("valid JSON")
    }

    /// The tree walk's answer, serialized.
    fn tree_full(r: &Redactor, json: &str) -> String {
        let mut v: Value = serde_json::from_str(json).unwrap();
        r.redact_value(&mut v);
        serde_json::to_string(&v).unwrap()
    }

    #[test]
    fn numbers_are_copied_exactly_as_written() {
        let doc = r#"{"big":12345678901234567890123,"huge":1e400,"odd":[-0.0e-0,0,1E+2,-12.50]}"#;
        let mut r = Redactor::new();
        for scope in [Scope::SecretsOnly, FULL] {
            assert_eq!(r.redact_json(doc, scope).unwrap(), doc);
        }
        r.add_secret("registered-secret");
        for scope in [Scope::SecretsOnly, FULL] {
            assert_eq!(r.redact_json(doc, scope).unwrap(), doc);
        }
        let spaced = "[ 12345678901234567890123 ,\n\t1e400 ]";
        assert_eq!(
            r.redact_json(spaced, FULL).unwrap(),
            "[12345678901234567890123,1e400]"
        );
    }

    #[test]
    fn whitespace_goes_and_strings_are_written_canonically() {
        let doc = " {\n \"a\\u0062\" : [ \"\\u00e9\\/\\ud83d\\ude00\\u0001\\u007f\\n\" , true , null ] } \n";
        let expected = "{\"ab\":[\"é/😀\\u0001\u{7f}\\n\",true,null]}";
        assert_eq!(
            Redactor::new()
                .redact_json(doc, Scope::SecretsOnly)
                .unwrap(),
            expected
        );
        assert_eq!(full(&Redactor::new(), doc), expected);
        let parsed: Value = serde_json::from_str(doc).unwrap();
        assert_eq!(serde_json::to_string(&parsed).unwrap(), expected);
    }

    #[test]
    fn values_under_sensitive_keys_are_replaced_whole_as_in_the_tree() {
        let doc = r#"{
            "input": {
                "headers": {"Authorization": "Bearer x", "Cookie": ["a", "b"], "x-api-key": 42},
                "credentials": {"user": "bob", "pass": {"deep": [1, {"x": "y"}]}},
                "password": null, "token": false, "secret": true, "api_key": "[redacted]",
                "passphrase": "\u005bredacted]", "max_tokens": 100, "token_count": 3,
                "tokenizer_model": "cl100k", "sandbox_session_id": "s-1",
                "note": "password=hunter2 at /home/alice/x", "signing_key": 1e400
            }
        }"#;
        let out = full(&Redactor::new(), doc);
        assert_eq!(
            out,
            concat!(
                r#"{"input":{"headers":{"Authorization":"[redacted]","Cookie":"[redacted]","#,
                r#""x-api-key":"[redacted]"},"credentials":"[redacted]","password":null,"#,
                r#""token":false,"secret":true,"api_key":"[redacted]","passphrase":"[redacted]","#,
                r#""max_tokens":100,"token_count":3,"tokenizer_model":"cl100k","#,
                r#""sandbox_session_id":"s-1","note":"password=[redacted] at [host-path]/x","#,
                r#""signing_key":"[redacted]"}}"#
            )
        );
        let without_huge = doc.replace("1e400", "1");
        assert_eq!(
            full(&Redactor::new(), &without_huge),
            tree_full(&Redactor::new(), &without_huge)
        );
    }

    #[test]
    fn only_the_envelope_root_authorization_object_is_structural() {
        let doc = r#"{"authorization":{"allowed_tools":["t"],"principal":{"token":"abc"}},
                      "metadata":{"authorization":{"x":1}}}"#;
        let r = Redactor::new();
        let structural = r#"{"authorization":{"allowed_tools":["t"],"principal":{"token":"[redacted]"}},"metadata":{"authorization":"[redacted]"}}"#;
        assert_eq!(full(&r, doc), structural);
        assert_eq!(tree_full(&r, doc), structural);
        assert_eq!(
            r.redact_json(
                doc,
                Scope::Full {
                    envelope_root: false
                }
            )
            .unwrap(),
            r#"{"authorization":"[redacted]","metadata":{"authorization":"[redacted]"}}"#
        );
        assert_eq!(
            full(&r, r#"{"authorization" :  "Bearer abc"}"#),
            r#"{"authorization":"[redacted]"}"#
        );
        assert_eq!(
            full(&r, r#"[{"authorization":{"x":1}}]"#),
            r#"[{"authorization":"[redacted]"}]"#
        );
    }

    #[test]
    fn secrets_only_touches_nothing_but_secrets() {
        let mut r = Redactor::new();
        r.add_secret("s3cr3t-Value_42");
        let doc = r#"{"password":"visible","note":"Bearer abcdef123456","path":"/home/alice/x",
                      "deep":[{"s":"xs3cr3t-Value_42x"}],"n":12345678,"s3cr3t-Value_42":1}"#;
        assert_eq!(
            r.redact_json(doc, Scope::SecretsOnly).unwrap(),
            r#"{"password":"visible","note":"Bearer abcdef123456","path":"/home/alice/x","deep":[{"s":"x[redacted]x"}],"n":12345678,"[redacted]":1}"#
        );
    }

    #[test]
    fn keys_that_come_out_the_same_are_made_unique_as_in_the_tree() {
        let mut r = Redactor::new();
        r.add_secret("key-secret-one");
        r.add_secret("key-secret-two");
        let doc =
            r#"{"key-secret-one":1,"key-secret-two":2,"[redacted]~2":3,"/home/a":4,"/home/b":5}"#;
        let expected = r#"{"[redacted]":1,"[redacted]~2":2,"[redacted]~2~2":3,"[host-path]":4,"[host-path]~2":5}"#;
        assert_eq!(full(&r, doc), expected);
        assert_eq!(tree_full(&r, doc), expected);
        // A key repeated in the input (refused by the strict reader) is left alone, unless a
        // key of its object was rewritten: then every key is checked.
        assert_eq!(full(&r, r#"{"a":1,"a":2}"#), r#"{"a":1,"a":2}"#);
        assert_eq!(
            full(&r, r#"{"a":1,"/home/x":0,"a":2,"b":{"a":3,"a":4}}"#),
            r#"{"a":1,"[host-path]":0,"a~2":2,"b":{"a":3,"a":4}}"#
        );
    }

    #[test]
    fn the_fast_path_only_minifies() {
        let doc =
            "{ \"token\" : \"Bearer abcdef123456\", \"p\": \"/home/alice\", \"e\": \"\\u0041\" }";
        assert_eq!(
            Redactor::new()
                .redact_json(doc, Scope::SecretsOnly)
                .unwrap(),
            r#"{"token":"Bearer abcdef123456","p":"/home/alice","e":"A"}"#
        );
    }

    #[test]
    fn depth_is_not_limited_by_the_call_stack() {
        let depth = 200_000;
        let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(full(&Redactor::new(), &arrays), arrays);
        let objects = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
        assert_eq!(full(&Redactor::new(), &objects), objects);
        let hidden = format!(r#"{{"token":{objects},"b":{arrays}}}"#);
        assert_eq!(
            full(&Redactor::new(), &hidden),
            format!(r#"{{"token":"[redacted]","b":{arrays}}}"#)
        );
    }

    #[test]
    fn input_that_is_not_json_is_refused_and_nothing_is_written() {
        for bad in [
            "",
            "   ",
            "{",
            "[1,]",
            "[1 2]",
            "{\"a\" 1}",
            "{\"a\":}",
            "{1:2}",
            "{\"a\":1,}",
            "\"unterminated",
            "\"bad \\x escape\"",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "\"\\ud800\\u0041\"",
            "\"\\u12\"",
            "\"raw \u{1} control\"",
            "01",
            "-",
            "1.",
            "1e",
            ".5",
            "+1",
            "tru",
            "nul",
            "[] []",
            "{} x",
            "[\"a\"]]",
            "{\"token\": [1, }",
            "{\"token\": {\"a\" 1}}",
            "NaN",
        ] {
            for scope in [Scope::SecretsOnly, FULL] {
                let mut out = String::from("kept");
                let err = Redactor::new().redact_json_into(bad, scope, &mut out);
                assert!(err.is_err(), "{bad:?} was accepted");
                assert_eq!(out, "kept", "{bad:?}");
                assert!(serde_json::from_str::<Value>(bad).is_err(), "{bad:?}");
            }
        }
        let err = Redactor::new().redact_json("[1,]", FULL).unwrap_err();
        assert_eq!(err.offset, 3);
        assert_eq!(
            err.to_string(),
            "not valid JSON at byte 3: expected a value"
        );
    }

    fn pieces(r: &Redactor, json: &str, scope: Scope) -> (Result<(), InvalidJson>, Vec<String>) {
        let mut got = Vec::new();
        let result = r.redact_json_pieces(json, scope, &mut |piece| got.push(piece.to_string()));
        (result, got)
    }

    #[test]
    fn pieces_add_up_to_the_whole_output_and_stay_small() {
        let long = "y".repeat(3 * PIECE_BYTES);
        let many: Vec<String> = (0..20_000).map(|i| format!("[{i},\"\\u00e9\"]")).collect();
        let doc = format!(
            "{{ \"long\" : \"{long}\\n{long}\", \"many\": [{}], \"n\": 1e400, \"e\": [[], {{}}] }}",
            many.join(" , ")
        );
        let mut secret = Redactor::new();
        secret.add_secret("never-in-the-document");
        for (r, scope) in [
            (Redactor::new(), Scope::SecretsOnly),
            (secret, Scope::SecretsOnly),
            (Redactor::new(), FULL),
        ] {
            let (result, got) = pieces(&r, &doc, scope);
            result.unwrap();
            assert_eq!(
                got.concat(),
                r.redact_json(&doc, scope).unwrap(),
                "{scope:?}"
            );
        }
        // The fast path: every piece is a bounded buffer, or a run of the input as it is.
        let (_, got) = pieces(&Redactor::new(), &doc, Scope::SecretsOnly);
        assert!(got.len() > 3, "{}", got.len());
        for piece in &got {
            assert!(
                piece.len() <= PIECE_BYTES + 16 || piece == &long,
                "{}",
                piece.len()
            );
        }
    }

    #[test]
    fn pieces_of_a_long_run_are_borrowed_from_the_input() {
        let doc = format!("[\"{}\"]", "z".repeat(2 * PIECE_BYTES));
        let inside = doc.as_bytes().as_ptr_range();
        let mut borrowed = 0;
        Redactor::new()
            .redact_json_pieces(&doc, Scope::SecretsOnly, &mut |piece| {
                if inside.contains(&piece.as_ptr()) {
                    borrowed += piece.len();
                }
            })
            .unwrap();
        assert_eq!(borrowed, 2 * PIECE_BYTES);
    }

    #[test]
    fn pieces_of_a_bad_document_are_never_emitted_outside_the_fast_path() {
        let mut secret = Redactor::new();
        secret.add_secret("never-in-the-document");
        for (r, scope) in [(secret, Scope::SecretsOnly), (Redactor::new(), FULL)] {
            let (result, got) = pieces(&r, "[\"ok\", \"cut", scope);
            assert!(result.is_err());
            assert!(got.is_empty(), "{got:?}");
        }
        // On the fast path the pieces read so far may have gone out; the error still comes.
        let (result, _) = pieces(&Redactor::new(), "[\"ok\", \"cut", Scope::SecretsOnly);
        assert!(result.is_err());
    }

    #[test]
    fn output_goes_after_what_is_already_there() {
        let mut out = String::from("prefix:");
        Redactor::new()
            .redact_json_into(r#"{"password": "x"}"#, FULL, &mut out)
            .unwrap();
        assert_eq!(out, r#"prefix:{"password":"[redacted]"}"#);
        assert_eq!(
            full(&Redactor::new(), r#""just a string with token=abc""#),
            r#""just a string with token=[redacted]""#
        );
        assert_eq!(json!(1).to_string(), full(&Redactor::new(), " 1 "));
    }
}
