//! Canonical JSON: object keys sorted by their UTF-8 bytes, no insignificant whitespace, the
//! string and number spellings of `serde_json`. The bridge ref (SPEC §4.6) and the transcript
//! digests are SHA-256 over this form, so two bridges that differ only in key order or layout
//! have one ref.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Serialize `value` canonically.
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// Lowercase hex SHA-256 of the canonical form of `value`.
pub fn digest(value: &Value) -> String {
    sha256_hex(to_string(value).as_bytes())
}

/// The canonical form of JSON text the strict reader accepted, without building a tree:
/// object keys sorted by their UTF-8 bytes, strings re-quoted as [`to_string`] would write
/// them, insignificant whitespace dropped — and numbers kept as they were written (opaque
/// payload is never converted), so `1.0` and `1` stay two requests. Text that is not JSON is
/// copied minified.
pub fn to_string_raw(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    write_raw(raw, &mut out);
    out
}

fn write_raw(raw: &str, out: &mut String) {
    use crate::json::{raw as text, Kind};
    match Kind::of(raw) {
        Kind::Object => {
            let Some(fields) = text::Fields::parse(raw) else {
                return text::minify_into(raw, out);
            };
            let mut members: Vec<(&str, &str)> = fields.iter().collect();
            members.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, value)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.to_string()).to_string());
                out.push(':');
                write_raw(value, out);
            }
            out.push('}');
        }
        Kind::Array => {
            out.push('[');
            text::for_each_item(raw, |i, item| {
                if i > 0 {
                    out.push(',');
                }
                write_raw(item, out);
            });
            out.push(']');
        }
        Kind::String => match text::string(raw) {
            Some(decoded) => out.push_str(&Value::String(decoded.into_owned()).to_string()),
            None => text::minify_into(raw, out),
        },
        _ => text::minify_into(raw, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_at_every_depth_and_whitespace_dropped() {
        let v: Value =
            serde_json::from_str(r#"{ "b": [ {"z":1, "a":"x y"} ], "a": null }"#).unwrap();
        assert_eq!(to_string(&v), r#"{"a":null,"b":[{"a":"x y","z":1}]}"#);
    }

    #[test]
    fn raw_canonical_form_agrees_with_the_tree_one_but_keeps_number_spellings() {
        let text = r#"{ "b": [ {"z":1, "a":"x\u0079 \n"} ], "a": null, "\u00e9": true }"#;
        let v: Value = serde_json::from_str(text).unwrap();
        assert_eq!(to_string_raw(text), to_string(&v));
        assert_eq!(
            to_string_raw(r#"{"n": 1.0e0, "m": [ ]}"#),
            r#"{"m":[],"n":1.0e0}"#
        );
    }

    #[test]
    fn sha256_matches_a_known_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(digest(&json!({})), sha256_hex(b"{}"));
    }
}
