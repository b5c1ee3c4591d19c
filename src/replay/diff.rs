//! Comparing what a case expects with what the main job did, and saying how they differ.
//!
//! Rules (SPEC §7):
//! - `status`, `error_code` (`/error/code`) and `exit_code` compare when given;
//! - `result` is a subset of the printed envelope: every key given must be there with a
//!   matching value, objects recursively; arrays match whole (same length, every item equal
//!   in full); numbers compare by value (`1` equals `1.0`);
//! - durations, resource usage and digests of timestamped files never compare:
//!   `diagnostics.dispatch.duration_ms`, `diagnostics.dispatch.resources` (and everything in
//!   it) and the `sha256` of refs in `artifacts.transcripts` are skipped wherever they appear,
//!   in the expectation or the envelope ([`is_volatile`]).
//!
//! Every difference carries the JSON Pointer of its place in the envelope. Values are shown as
//! compact JSON, cut to a readable length, control characters escaped (JSON text escapes
//! them): nothing a case or an adapter wrote can move the terminal's cursor.
//!
//! It must not run anything, nor read or write files.

use super::cases::Expectation;
use super::runner::Actual;
use serde_json::{Map, Value};

/// Where an exit status difference is reported (it has no place in the envelope).
pub(crate) const EXIT_STATUS: &str = "(exit status)";
/// Longest value shown in a difference, in bytes.
const SHOWN_BYTES: usize = 300;

/// One difference between the expectation and the outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// JSON Pointer into the envelope, or [`EXIT_STATUS`].
    pub pointer: String,
    /// `None`: the expectation has nothing there (never for a difference it asked for).
    pub expected: Option<Value>,
    /// `None`: absent from the outcome.
    pub actual: Option<Value>,
}

/// Whether a place in an envelope changes from run to run by nature.
pub(crate) fn is_volatile(pointer: &str) -> bool {
    if pointer == "/diagnostics/dispatch/duration_ms"
        || pointer == "/diagnostics/dispatch/trace_id"
        || pointer == "/diagnostics/dispatch/resources"
        || pointer.starts_with("/diagnostics/dispatch/resources/")
        || pointer == "/diagnostics/dispatch/network"
        || pointer.starts_with("/diagnostics/dispatch/network/")
    {
        return true;
    }
    // /artifacts/transcripts/<n>/sha256: the digest of a file that records timestamps.
    pointer
        .strip_prefix("/artifacts/transcripts/")
        .and_then(|rest| rest.strip_suffix("/sha256"))
        .is_some_and(|index| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()))
}

/// Every difference between `expect` and `actual`, in a stable order.
pub fn compare(expect: &Expectation, actual: &Actual) -> Vec<Difference> {
    let mut out = Vec::new();
    let status = actual.status().map(Value::from);
    if status.as_ref().and_then(Value::as_str) != Some(expect.status.as_str()) {
        out.push(Difference {
            pointer: "/status".into(),
            expected: Some(Value::from(expect.status.as_str())),
            actual: status,
        });
    }
    if let Some(code) = &expect.error_code {
        if actual.error_code() != Some(code.as_str()) {
            out.push(Difference {
                pointer: "/error/code".into(),
                expected: Some(Value::from(code.as_str())),
                actual: actual.error_code().map(Value::from),
            });
        }
    }
    if let Some(code) = expect.exit_code {
        if actual.exit != Some(code) {
            out.push(Difference {
                pointer: EXIT_STATUS.into(),
                expected: Some(Value::from(code)),
                actual: actual.exit.map(Value::from),
            });
        }
    }
    if let Some(result) = &expect.result {
        subset(result, actual.envelope.as_ref(), "", &mut out);
    }
    out
}

fn push_key(pointer: &str, key: &str) -> String {
    format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// `expected` (an object: every key must match) against `actual`.
fn subset(expected: &Value, actual: Option<&Value>, pointer: &str, out: &mut Vec<Difference>) {
    if is_volatile(pointer) {
        return;
    }
    match (expected, actual) {
        (Value::Object(want), Some(Value::Object(got))) => {
            for (key, value) in want {
                subset(value, got.get(key), &push_key(pointer, key), out);
            }
        }
        (Value::Object(_), _) => out.push(Difference {
            pointer: pointer.to_string(),
            expected: Some(expected.clone()),
            actual: actual.cloned(),
        }),
        _ => whole(expected, actual, pointer, out),
    }
}

/// `expected` equal in full to `actual` (volatile places aside).
fn whole(expected: &Value, actual: Option<&Value>, pointer: &str, out: &mut Vec<Difference>) {
    if is_volatile(pointer) {
        return;
    }
    let differ = |out: &mut Vec<Difference>| {
        out.push(Difference {
            pointer: pointer.to_string(),
            expected: Some(expected.clone()),
            actual: actual.cloned(),
        })
    };
    match (expected, actual) {
        (Value::Object(want), Some(Value::Object(got))) => {
            for (key, value) in want {
                whole(value, got.get(key), &push_key(pointer, key), out);
            }
            for (key, value) in got {
                let here = push_key(pointer, key);
                if !want.contains_key(key) && !is_volatile(&here) {
                    out.push(Difference {
                        pointer: here,
                        expected: None,
                        actual: Some(value.clone()),
                    });
                }
            }
        }
        (Value::Array(want), Some(Value::Array(got))) if want.len() == got.len() => {
            for (i, (w, g)) in want.iter().zip(got).enumerate() {
                whole(w, Some(g), &format!("{pointer}/{i}"), out);
            }
        }
        (Value::Number(a), Some(Value::Number(b))) => {
            if !numbers_equal(a, b) {
                differ(out);
            }
        }
        (want, Some(got)) if want == got => {}
        _ => differ(out),
    }
}

fn numbers_equal(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    match (a.as_i64(), b.as_i64(), a.as_u64(), b.as_u64()) {
        (Some(x), Some(y), _, _) => x == y,
        (_, _, Some(x), Some(y)) => x == y,
        _ => a.as_f64() == b.as_f64(),
    }
}

/// The value of `actual` cut to the shape of `shape`: the keys `shape` names (objects
/// recursively), the whole value elsewhere; keys `actual` lacks and volatile places are left
/// out. This is what `--bless` writes as the new `expect.result`.
pub fn project(shape: &Value, actual: &Value, pointer: &str) -> Value {
    match (shape, actual) {
        (Value::Object(want), Value::Object(got)) => {
            let mut out = Map::new();
            for (key, sub) in want {
                let here = push_key(pointer, key);
                if is_volatile(&here) {
                    continue;
                }
                if let Some(value) = got.get(key) {
                    out.insert(key.clone(), project(sub, value, &here));
                }
            }
            Value::Object(out)
        }
        _ => actual.clone(),
    }
}

/// The differences as indented lines: the pointer, then the expected and actual values.
pub fn render(differences: &[Difference]) -> Vec<String> {
    let mut lines = Vec::new();
    for d in differences {
        // "" is the JSON Pointer of the whole envelope: say so rather than print a blank line.
        lines.push(if d.pointer.is_empty() {
            "(the envelope)".to_string()
        } else {
            d.pointer.clone()
        });
        lines.push(format!("  expected: {}", show(d.expected.as_ref())));
        lines.push(format!("  actual:   {}", show(d.actual.as_ref())));
    }
    lines
}

/// A value as one line of compact JSON, cut at [`SHOWN_BYTES`].
pub fn show(value: Option<&Value>) -> String {
    let Some(value) = value else {
        return "(absent)".to_string();
    };
    let text = serde_json::to_string(value).unwrap_or_default();
    cut(&text, SHOWN_BYTES)
}

/// `text` cut at a character boundary at most `max` bytes in, saying how much was left out.
pub fn cut(text: &str, max: usize) -> String {
    let shown = ptd_wire::terminal::cut_at_char_boundary(text, max);
    if shown.len() == text.len() {
        return text.to_string();
    }
    format!("{shown}… ({} more bytes)", text.len() - shown.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_says_how_much_it_left_out() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("abcdef", 3), "abc… (3 more bytes)");
        assert_eq!(cut("aéz", 2), "a… (3 more bytes)");
    }
    use ptd_wire::error::Status;
    use serde_json::json;

    fn actual(envelope: Value, exit: i32) -> Actual {
        Actual {
            envelope: Some(envelope),
            exit: Some(exit),
            ..Actual::default()
        }
    }

    fn expect(result: Value) -> Expectation {
        Expectation {
            status: Status::Succeeded,
            error_code: None,
            exit_code: Some(0),
            result: Some(result),
        }
    }

    fn pointers(d: &[Difference]) -> Vec<&str> {
        d.iter().map(|d| d.pointer.as_str()).collect()
    }

    #[test]
    fn objects_are_subsets_and_arrays_are_whole() {
        let got = actual(
            json!({"status": "succeeded", "output": {"a": 1, "b": [1, {"c": 2, "d": 3}], "e": 1.0}}),
            0,
        );
        assert!(compare(&expect(json!({"output": {"a": 1, "e": 1}})), &got).is_empty());
        let d = compare(
            &expect(json!({"output": {"a": 2, "b": [1, {"c": 2}], "x": null}})),
            &got,
        );
        assert_eq!(pointers(&d), ["/output/a", "/output/b/1/d", "/output/x"]);
        assert_eq!(d[1].expected, None);
        assert_eq!(d[2].actual, None);
        let d = compare(&expect(json!({"output": {"b": [1]}})), &got);
        assert_eq!(pointers(&d), ["/output/b"]);
        let none = Actual::default();
        let d = compare(&expect(json!({"output": {}})), &none);
        assert_eq!(pointers(&d), ["/status", EXIT_STATUS, ""]);
        assert_eq!(render(&d)[6], "(the envelope)");
    }

    #[test]
    fn status_code_and_exit_are_reported_with_their_places() {
        let got = actual(json!({"status": "failed", "error": {"code": "x"}}), 1);
        let e = Expectation {
            status: Status::Denied,
            error_code: Some("y".into()),
            exit_code: Some(77),
            result: None,
        };
        let d = compare(&e, &got);
        assert_eq!(pointers(&d), ["/status", "/error/code", EXIT_STATUS]);
        assert_eq!(
            render(&d[..1]),
            [
                "/status",
                "  expected: \"denied\"",
                "  actual:   \"failed\""
            ]
        );
    }

    #[test]
    fn durations_and_transcript_digests_never_compare() {
        let got = actual(
            json!({"status": "succeeded",
                "diagnostics": {"dispatch": {"duration_ms": 7, "exit_code": 0}},
                "artifacts": {"transcripts": [{"kind": "t", "sha256": "b"}]}}),
            0,
        );
        let e = expect(json!({
            "diagnostics": {"dispatch": {"duration_ms": 1, "exit_code": 0}},
            "artifacts": {"transcripts": [{"kind": "t", "sha256": "a"}]}
        }));
        assert!(compare(&e, &got).is_empty());
        let projected = project(
            &json!({"diagnostics": {"dispatch": {"duration_ms": 1, "exit_code": 5}}}),
            got.envelope.as_ref().unwrap(),
            "",
        );
        assert_eq!(
            projected,
            json!({"diagnostics": {"dispatch": {"exit_code": 0}}})
        );
    }

    #[test]
    fn resource_usage_never_compares() {
        // SPEC §13: max_rss_bytes, user_ms and system_ms differ from run to run.
        let got = actual(
            json!({"status": "succeeded",
                "diagnostics": {"dispatch": {"exit_code": 0,
                    "resources": {"max_rss_bytes": 4096, "user_ms": 9, "system_ms": 2}}}}),
            0,
        );
        for expected in [
            json!({"diagnostics": {"dispatch": {"exit_code": 0,
                "resources": {"max_rss_bytes": 1, "user_ms": 0, "system_ms": 0}}}}),
            json!({"diagnostics": {"dispatch": {"resources": "anything"}}}),
        ] {
            assert!(compare(&expect(expected), &got).is_empty());
        }
        // What is next to it still compares.
        let e = expect(json!({"diagnostics": {"dispatch": {"exit_code": 3}}}));
        assert_eq!(
            pointers(&compare(&e, &got)),
            ["/diagnostics/dispatch/exit_code"]
        );
        let projected = project(
            &json!({"diagnostics": {"dispatch": {"exit_code": 5, "resources": {"user_ms": 1}}}}),
            got.envelope.as_ref().unwrap(),
            "",
        );
        assert_eq!(
            projected,
            json!({"diagnostics": {"dispatch": {"exit_code": 0}}})
        );
    }

    #[test]
    fn long_values_are_cut_at_a_character_boundary() {
        let long = "é".repeat(400);
        let shown = show(Some(&json!(long)));
        assert!(
            shown.len() < 340 && shown.ends_with("more bytes)"),
            "{shown}"
        );
        assert_eq!(show(Some(&json!("\u{1b}[2J"))), "\"\\u001b[2J\"");
    }
}
