//! The policy file's JSON Schema (draft 2020-12), `parent-tool-dispatch/policy/v1`, which
//! `parent-tool-dispatch schema policy` prints: the document as JSON once TOML is mapped onto
//! JSON's data model (tables are objects, arrays are arrays, strings, integers and booleans are
//! themselves).
//!
//! It states what [`parse`](crate::parse) accepts as far as JSON Schema can: every key and its
//! type, the bounds (with the loader's own constants: [`MAX_TOOLS`], the longest `match`, the
//! longest `approval_ttl`), the spellings of sizes, durations, `match`, variable names,
//! `run_as` and `host:port`, and `additionalProperties: false` wherever the loader refuses an
//! unknown key. The loader stays the authority for the rest, which the descriptions name: what
//! depends on the host (a grant path exists and is neither `/` nor the ledger's folder, an
//! adapter's program is found on `PATH`, `run_as` names a usable user, a size fits in 2^63 − 1
//! bytes), on the bridge or the command line (`timeout_ms` up to the bridge's, `decision =
//! "ask"` needs a ledger), on the file itself (1 MiB at most, its owner and mode), two entries
//! with the same `match`, and TOML's types that JSON does not keep apart (a float `1.0` or a
//! datetime where the loader wants an integer or a string). `tests/cli/schema_policy.rs` holds
//! the schema and the loader to the same verdict on a corpus, and the schema's keys to the
//! loader's key lists.
//!
//! It must not read or validate anything: nothing in the loader consults it.

use crate::entry::MAX_TTL_SECONDS;
use crate::load::{MAX_MATCH_BYTES, MAX_TOOLS};
use serde_json::{json, Map, Value};

/// The policy schema's `$id`.
pub const SCHEMA_ID: &str = "parent-tool-dispatch/policy/v1";
/// The JSON Schema dialect.
const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// The JSON Schema of the policy file.
pub fn schema() -> Value {
    let entry = entry();
    // A `[[tool]]` takes `match` and the entry's keys, each described once (in `$defs/entry`).
    let mut tool_properties = Map::new();
    tool_properties.insert("match".into(), matcher());
    if let Some(keys) = entry["properties"].as_object() {
        for key in keys.keys() {
            let reference = format!("#/$defs/entry/properties/{key}");
            tool_properties.insert(key.clone(), json!({"$ref": reference}));
        }
    }
    json!({
        "$schema": DIALECT,
        "$id": SCHEMA_ID,
        "title": "parent-tool-dispatch host policy",
        "description": "The host's policy file: per tool, which adapter runs and with what. The file is TOML; this schema describes it as JSON once TOML is mapped onto JSON's data model (tables are objects, arrays are arrays). No key takes a float or a datetime. The loader stays the authority for what a schema cannot state: a file of at most 1 MiB that only its owner (root or the dispatcher's user) may write; grant paths that exist and confine something; adapter programs found on PATH; a usable run_as user; timeout_ms up to the bridge's; decision = \"ask\" only with a ledger; no two [[tool]] entries with the same match.",
        "type": "object",
        "required": ["version"],
        "additionalProperties": false,
        "properties": {
            "version": {"type": "integer", "const": 1, "description": "The policy format: 1."},
            "defaults": {"$ref": "#/$defs/entry", "description": "What every tool gets unless its [[tool]] entry says otherwise."},
            "ledger": ledger(),
            "tool": {
                "type": "array",
                "description": "[[tool]] entries. An exact match beats every prefix; among prefixes the longer literal wins.",
                "maxItems": MAX_TOOLS,
                "items": {"$ref": "#/$defs/tool"}
            }
        },
        "$defs": {
            "entry": entry,
            "tool": {
                "type": "object",
                "required": ["match"],
                "additionalProperties": false,
                "properties": tool_properties,
                "not": max_bytes_beside_plain_network()
            }
        }
    })
}

/// `match`: a canonical tool id, or a prefix ending in one `*`; printable ASCII, no space.
fn matcher() -> Value {
    json!({
        "type": "string",
        "description": "A canonical tool id (git.commit) or a prefix ending in one * (git.*, *): printable ASCII without spaces. The loader refuses two entries with the same match.",
        "maxLength": MAX_MATCH_BYTES,
        "pattern": r"^(?:[\x21-\x29\x2B-\x7E]+\*?|\*)$"
    })
}

/// `[ledger]`.
fn ledger() -> Value {
    json!({
        "type": "object",
        "description": "Ledger settings the policy carries instead of the command line (SPEC 14).",
        "additionalProperties": false,
        "properties": {
            "path": {"type": "string", "minLength": 1, "description": "The ledger: a file path or a postgres:// URL. No fs_read or fs_write grant may hold its folder or lie in it (the loader checks)."},
            "session_env": var_name("The variable the host's session id is read from."),
            "budget_calls": {"type": "integer", "minimum": 0, "description": "Admitted calls per session."},
            "budget_adapter_ms": {"type": "integer", "minimum": 0, "description": "Adapter wall time per session, in milliseconds."},
            "max_concurrent": {"type": "integer", "minimum": 1, "description": "Calls of one session in flight at once."},
            "lease_ttl": lease_ttl(),
            "durability": {"enum": ptd_ledger::Durability::NAMES, "description": "When the ledger's commits are on the disk (--ledger-durability, SPEC 14.4): full (the default: before the next step, power loss included) or normal (a file ledger on the disk when its dispatcher exits; a host crash during a call can lose that call's records)."}
        }
    })
}

/// The keys of an entry (`[defaults]` or a `[[tool]]`), in the order SPEC §16 lists them.
fn entry() -> Value {
    let names = |what: &str| {
        json!({
            "type": "array",
            "description": format!("Host variables (names: non-empty, without = or NUL) {what}."),
            "items": var_name("A variable name.")
        })
    };
    let grants = |access: &str| {
        json!({
            "type": "array",
            "description": format!("Paths the adapter may {access} beneath. Each must exist on the host and must not be / (however spelled) or hold or lie in the ledger's folder (the loader checks)."),
            "items": {"type": "string", "minLength": 1}
        })
    };
    let counts = |what: &str| json!({"type": "integer", "minimum": 1, "description": what});
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "adapter": {
                "type": "array",
                "description": "The adapter's argv. Its program is an absolute path, or a name (no /) that the loader finds on PATH.",
                "minItems": 1,
                "prefixItems": [{"type": "string", "pattern": "^(?:/|[^/]+$)"}],
                "items": {"type": "string"}
            },
            "cwd": {"type": "string", "minLength": 1, "description": "The adapter's working directory."},
            "timeout_ms": {"type": "integer", "minimum": 1, "description": "The call's deadline; the loader refuses one above the bridge's dispatcher.timeout_ms."},
            "pass_env": names("passed to the adapter"),
            "secret_env": names("passed to the adapter, their values scrubbed from everything that leaves"),
            "fs_read": grants("read and execute"),
            "fs_write": grants("read, write, create and remove"),
            "network": network(),
            "network_max_bytes": size(1),
            "run_as": {"type": "string", "pattern": r"^[^:\x00]+(?::[^:\x00]+)?$", "description": "USER or USER:GROUP, names or numbers. The loader resolves it on the host: never root, and a dispatcher that is not root may only name itself."},
            "limit_memory": size(1),
            "limit_pids": counts("Processes of the adapter's tree."),
            "limit_open_files": counts("Open files per process."),
            "limit_file_size": size(0),
            "decision": {"type": "string", "enum": ["allow", "ask", "deny"], "description": "ask needs a ledger ([ledger] path or --ledger; the loader checks)."},
            "budget_calls": {"type": "integer", "minimum": 0, "description": "Admitted calls of this tool per session."},
            "approval_ttl": approval_ttl(),
            "approval_notify": {
                "type": "array",
                "description": "An argv run to ask for an approval.",
                "minItems": 1,
                "prefixItems": [{"type": "string", "minLength": 1}],
                "items": {"type": "string"}
            },
            "unconfined": {"type": "boolean", "description": "true: run this adapter without confinement (an explicit opt-out). The loader refuses a confinement key in a table that runs unconfined (unconfined = true there, or in [defaults] and not overridden)."}
        },
        "not": max_bytes_beside_plain_network()
    })
}

/// What an entry may not hold: `network_max_bytes` beside a `network` of `"none"` or `"any"` in
/// the same table (it bounds the egress proxy, which only an allow list has). Set in
/// `[defaults]` without a `network` there, it applies to the entries that allow hosts.
fn max_bytes_beside_plain_network() -> Value {
    json!({
        "description": "network_max_bytes bounds the egress proxy of network = { allow = [...] }: a table whose network is \"none\" or \"any\" may not set it.",
        "required": ["network", "network_max_bytes"],
        "properties": {"network": {"type": "string"}}
    })
}

/// A variable name: non-empty, without `=` or NUL.
fn var_name(description: &str) -> Value {
    json!({"type": "string", "pattern": r"^[^=\x00]+$", "description": description})
}

/// `network`: `"none"`, `"any"`, or `{ allow = ["host:port", …] }`.
fn network() -> Value {
    let port = format!("0*(?:{})", numbers_up_to(u64::from(u16::MAX)));
    let octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
    let label = "[A-Za-z0-9_-]{1,63}";
    // The last label of a name is not a number (`127.1` is another spelling of an address).
    let last = "(?=[A-Za-z0-9_-]{1,63}\\.?:)[A-Za-z0-9_-]*[A-Za-z_-][A-Za-z0-9_-]*";
    let rule = format!(
        r"^(?:{octet}(?:\.{octet}){{3}}|\[[0-9A-Fa-f:.]+\]|(?:\*\.)?(?:{label}\.)*{last}\.?):{port}$"
    );
    json!({
        "description": "\"none\", \"any\", or { allow = [\"host:port\", ...] } (SPEC 17): egress by name to these hosts only, through the dispatcher's proxy. A rule is NAME:PORT, *.NAME:PORT (one or more labels under NAME) or ADDRESS:PORT (IPv6 in brackets); a port from 1 to 65535. The loader also refuses a name longer than 253 bytes, a last label in hexadecimal (0x7f) and a bracketed text that is not an IPv6 address. An empty table sets nothing.",
        "oneOf": [
            {"type": "string", "enum": ["none", "any"]},
            {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "allow": {"type": "array", "minItems": 1, "maxItems": 256, "items": {"type": "string", "pattern": rule}}
                }
            }
        ]
    })
}

/// A size in bytes: digits with an optional binary unit, or an integer; at least `min` (0 or 1).
fn size(min: u8) -> Value {
    let digits = if min == 0 { "[0-9]+" } else { "0*[1-9][0-9]*" };
    json!({
        "type": ["string", "integer"],
        "description": format!("Bytes, at least {min}: an integer, or digits optionally followed by K, M, G or T (binary units, optionally with iB: 512M, 1GiB). The loader also refuses more than 2^63 - 1 bytes."),
        "pattern": format!("^{digits}(?:[kKmMgGtT](?:iB)?)?$"),
        "minimum": min
    })
}

/// `[ledger] lease_ttl`: 3 s to 24 h, as seconds (an integer or digits, optionally `s`), `m` or
/// `h`.
fn lease_ttl() -> Value {
    let seconds = "(?:[3-9]|[1-9][0-9]{1,3}|[1-7][0-9]{4}|8[0-5][0-9]{3}|86[0-3][0-9]{2}|86400)";
    let minutes = "(?:[1-9]|[1-9][0-9]{1,2}|1[0-3][0-9]{2}|14[0-3][0-9]|1440)";
    let hours = "(?:[1-9]|1[0-9]|2[0-4])";
    json!({
        "type": ["string", "integer"],
        "description": "How long a call held by a dispatcher on another host counts as running without a heartbeat (--lease-ttl, SPEC 19.1): an integer number of seconds, or digits followed by s, m or h; from 3 s to 24 h.",
        "pattern": format!("^0*(?:{seconds}s?|{minutes}m|{hours}h)$"),
        "minimum": 3,
        "maximum": 86400
    })
}

/// `approval_ttl`: `30s`, `15m`, `1h`, digits (seconds), or an integer; one second to a year.
fn approval_ttl() -> Value {
    let pattern = format!(
        "^0*(?:(?:{})s?|(?:{})m|(?:{})h)$",
        numbers_up_to(MAX_TTL_SECONDS),
        numbers_up_to(MAX_TTL_SECONDS / 60),
        numbers_up_to(MAX_TTL_SECONDS / 3600)
    );
    json!({
        "type": ["string", "integer"],
        "description": format!("How long an approval holds: an integer number of seconds, or digits followed by s, m or h (30s, 15m, 1h); from 1 second to {MAX_TTL_SECONDS} seconds (366 days)."),
        "pattern": pattern,
        "minimum": 1,
        "maximum": MAX_TTL_SECONDS
    })
}

/// A regular expression (an alternation, unanchored) matching the decimal numbers from 1 to
/// `max` written without leading zeros; `max` at least 1.
fn numbers_up_to(max: u64) -> String {
    let digits: Vec<u8> = max.to_string().bytes().map(|b| b - b'0').collect();
    let len = digits.len();
    let mut alternatives = Vec::new();
    // Every number with fewer digits.
    match len {
        0 | 1 => {}
        2 => alternatives.push("[1-9]".to_string()),
        _ => alternatives.push(format!("[1-9][0-9]{{0,{}}}", len - 2)),
    }
    // Numbers of as many digits: the same first `i` digits, then a smaller one, then any.
    for (i, &digit) in digits.iter().enumerate() {
        let lowest = u8::from(i == 0);
        if digit > lowest {
            let prefix: String = digits[..i].iter().map(|d| char::from(b'0' + d)).collect();
            let range = if digit - 1 == lowest {
                lowest.to_string()
            } else {
                format!("[{lowest}-{}]", digit - 1)
            };
            let rest = match len - i - 1 {
                0 => String::new(),
                1 => "[0-9]".to_string(),
                n => format!("[0-9]{{{n}}}"),
            };
            alternatives.push(format!("{prefix}{range}{rest}"));
        }
    }
    alternatives.push(max.to_string());
    alternatives.join("|")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn anchored(max: u64) -> regex::Regex {
        regex::Regex::new(&format!("^(?:{})$", numbers_up_to(max))).unwrap()
    }

    #[test]
    fn numbers_up_to_spells_each_range() {
        assert_eq!(numbers_up_to(1), "1");
        assert_eq!(numbers_up_to(9), "[1-8]|9");
        assert_eq!(numbers_up_to(10), "[1-9]|10");
        assert_eq!(
            numbers_up_to(8784),
            "[1-9][0-9]{0,2}|[1-7][0-9]{3}|8[0-6][0-9]{2}|87[0-7][0-9]|878[0-3]|8784"
        );
        assert_eq!(
            numbers_up_to(65535),
            "[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-4]|65535"
        );
        for max in [
            1, 2, 9, 10, 11, 19, 20, 99, 100, 101, 109, 110, 999, 1000, 1001,
        ] {
            let re = anchored(max);
            for n in 0..=1100u64 {
                assert_eq!(
                    re.is_match(&n.to_string()),
                    (1..=max).contains(&n),
                    "{n} ≤ {max}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn numbers_up_to_matches_exactly_one_to_max(max in 1u64..u64::MAX, n in 0u64..u64::MAX, near in -3i64..3) {
            let re = anchored(max);
            let close = max.saturating_add_signed(near);
            for n in [n, n % (max.saturating_mul(2).max(1)), close] {
                prop_assert_eq!(re.is_match(&n.to_string()), (1..=max).contains(&n), "{} ≤ {}", n, max);
            }
            let padded = format!("0{max}");
            prop_assert!(!re.is_match("0") && !re.is_match(&padded));
        }
    }
}
