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
    fn sha256_matches_a_known_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(digest(&json!({})), sha256_hex(b"{}"));
    }
}
