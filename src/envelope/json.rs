//! The strict JSON reader used for every envelope that crosses a trust boundary: the bridge,
//! the request, and the adapter's result (SPEC §2.2, §4.5).
//!
//! It owns the byte-level checks and nothing else: size cap, UTF-8, byte-order mark, exactly
//! one document, an object at the top, no duplicate key at any depth, nesting depth. Each
//! failure has its own stable issue code ([`JsonIssue::code`]) so that callers can tell a
//! parser-differential attack (a duplicate `tool` key) from a truncated file.
//!
//! It must not know what an envelope contains; shape checks live in `validate.rs`.

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::fmt;

/// The nesting cap: the top-level object is depth 1.
pub const MAX_DEPTH: usize = 128;

/// Why a document was refused. `code()` is the stable issue code; `pointer()` the JSON Pointer
/// of the offending place where one is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonIssue {
    /// More bytes than the cap allows.
    TooLarge { limit: usize, actual: usize },
    /// Nothing but whitespace.
    Empty,
    /// Not valid UTF-8 (offset of the first bad byte).
    InvalidUtf8 { offset: usize },
    /// A UTF-8 byte-order mark before the document.
    ByteOrderMark,
    /// The JSON itself is malformed.
    Syntax {
        line: usize,
        column: usize,
        detail: String,
    },
    /// Non-whitespace bytes after the document that are not a second document.
    TrailingBytes { line: usize, column: usize },
    /// A second JSON document after the first.
    MultipleDocuments { line: usize, column: usize },
    /// The top level is not an object.
    NotObject { found: &'static str },
    /// The same key twice in one object.
    DuplicateKey { pointer: String, key: String },
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep { pointer: String },
}

impl JsonIssue {
    /// The stable issue code.
    pub fn code(&self) -> &'static str {
        match self {
            JsonIssue::TooLarge { .. } => "too_large",
            JsonIssue::Empty => "empty",
            JsonIssue::InvalidUtf8 { .. } => "invalid_utf8",
            JsonIssue::ByteOrderMark => "byte_order_mark",
            JsonIssue::Syntax { .. } => "json_syntax",
            JsonIssue::TrailingBytes { .. } => "trailing_bytes",
            JsonIssue::MultipleDocuments { .. } => "multiple_documents",
            JsonIssue::NotObject { .. } => "not_object",
            JsonIssue::DuplicateKey { .. } => "duplicate_key",
            JsonIssue::TooDeep { .. } => "too_deep",
        }
    }

    /// The JSON Pointer of the offending place ("" for the document as a whole).
    pub fn pointer(&self) -> &str {
        match self {
            JsonIssue::DuplicateKey { pointer, .. } | JsonIssue::TooDeep { pointer } => pointer,
            _ => "",
        }
    }
}

impl fmt::Display for JsonIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonIssue::TooLarge { limit, actual } => {
                write!(f, "document is {actual} bytes, over the {limit}-byte limit")
            }
            JsonIssue::Empty => f.write_str("document is empty"),
            JsonIssue::InvalidUtf8 { offset } => {
                write!(f, "document is not valid UTF-8 (first bad byte at offset {offset})")
            }
            JsonIssue::ByteOrderMark => f.write_str("document starts with a byte-order mark"),
            JsonIssue::Syntax { line, column, detail } => {
                write!(f, "invalid JSON at line {line}, column {column}: {detail}")
            }
            JsonIssue::TrailingBytes { line, column } => {
                write!(f, "unexpected bytes after the document at line {line}, column {column}")
            }
            JsonIssue::MultipleDocuments { line, column } => write!(
                f,
                "a second JSON document starts at line {line}, column {column}; exactly one is allowed"
            ),
            JsonIssue::NotObject { found } => {
                write!(f, "top level is {found}, not an object")
            }
            JsonIssue::DuplicateKey { pointer, key } => {
                let at = if pointer.is_empty() { "the top level" } else { pointer };
                write!(f, "duplicate key {key:?} in the object at {at}")
            }
            JsonIssue::TooDeep { .. } => {
                write!(f, "nesting is deeper than {MAX_DEPTH} levels")
            }
        }
    }
}

impl std::error::Error for JsonIssue {}

/// Parse `bytes` as exactly one JSON object, refusing everything SPEC §2.2 refuses.
pub fn parse_object(bytes: &[u8], max_bytes: usize) -> Result<Map<String, Value>, JsonIssue> {
    match parse_value(bytes, max_bytes)? {
        Value::Object(map) => Ok(map),
        other => Err(JsonIssue::NotObject {
            found: kind_name(&other),
        }),
    }
}

/// Parse `bytes` as exactly one JSON document of any type, with the same strictness.
pub fn parse_value(bytes: &[u8], max_bytes: usize) -> Result<Value, JsonIssue> {
    if bytes.len() > max_bytes {
        return Err(JsonIssue::TooLarge {
            limit: max_bytes,
            actual: bytes.len(),
        });
    }
    if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Err(JsonIssue::ByteOrderMark);
    }
    let text = std::str::from_utf8(bytes).map_err(|e| JsonIssue::InvalidUtf8 {
        offset: e.valid_up_to(),
    })?;
    if text.trim_matches(is_json_space).is_empty() {
        return Err(JsonIssue::Empty);
    }

    let state = RefCell::new(State::default());
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    let value = match (StrictSeed {
        state: &state,
        depth: 0,
    })
    .deserialize(&mut de)
    {
        Ok(value) => value,
        Err(err) => {
            return Err(state.into_inner().found.unwrap_or_else(|| syntax(&err)));
        }
    };
    if let Err(err) = de.end() {
        let (line, column) = (err.line(), err.column());
        let offset = offset_of(text, line, column);
        let rest = &text[offset..];
        let second = serde_json::Deserializer::from_str(rest)
            .into_iter::<de::IgnoredAny>()
            .next();
        return Err(match second {
            Some(Ok(_)) => JsonIssue::MultipleDocuments { line, column },
            _ => JsonIssue::TrailingBytes { line, column },
        });
    }
    Ok(value)
}

/// JSON's four whitespace characters (RFC 8259 §2); `char::is_whitespace` is broader.
fn is_json_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

fn syntax(err: &serde_json::Error) -> JsonIssue {
    // serde_json appends " at line L column C" to its messages; we report those separately.
    let text = err.to_string();
    let detail = match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    };
    JsonIssue::Syntax {
        line: err.line(),
        column: err.column(),
        detail,
    }
}

/// Byte offset of serde_json's 1-based (line, column) position, where column counts bytes.
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let mut offset = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            return (offset + column.saturating_sub(1)).min(text.len());
        }
        offset += l.len();
    }
    text.len()
}

/// A human name for a JSON value's type.
pub fn kind_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Escape one JSON Pointer reference token (RFC 6901).
pub fn pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

#[derive(Default)]
struct State {
    /// The first structural issue found; serde only carries strings, so we keep the typed one.
    found: Option<JsonIssue>,
    /// The pointer of the container being read, one token per open level.
    path: Vec<String>,
}

impl State {
    fn pointer(&self) -> String {
        self.path.iter().map(|t| format!("/{t}")).collect()
    }
}

struct StrictSeed<'a> {
    state: &'a RefCell<State>,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for StrictSeed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl StrictSeed<'_> {
    fn enter<E: de::Error>(&self) -> Result<usize, E> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            let mut state = self.state.borrow_mut();
            let pointer = state.pointer();
            state.found.get_or_insert(JsonIssue::TooDeep { pointer });
            return Err(E::custom("nesting too deep"));
        }
        Ok(depth)
    }

    fn child(&self, depth: usize) -> StrictSeed<'_> {
        StrictSeed {
            state: self.state,
            depth,
        }
    }
}

impl<'de> Visitor<'de> for StrictSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let depth = self.enter()?;
        let mut items = Vec::new();
        loop {
            self.state.borrow_mut().path.push(items.len().to_string());
            let next = seq.next_element_seed(self.child(depth));
            self.state.borrow_mut().path.pop();
            match next? {
                Some(item) => items.push(item),
                None => break,
            }
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let depth = self.enter()?;
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                let mut state = self.state.borrow_mut();
                let pointer = state.pointer();
                state
                    .found
                    .get_or_insert(JsonIssue::DuplicateKey { pointer, key });
                return Err(de::Error::custom("duplicate key"));
            }
            self.state.borrow_mut().path.push(pointer_token(&key));
            let value = map.next_value_seed(self.child(depth));
            self.state.borrow_mut().path.pop();
            object.insert(key, value?);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(bytes: &[u8]) -> &'static str {
        parse_object(bytes, 1 << 20).unwrap_err().code()
    }

    #[test]
    fn accepts_one_object_with_surrounding_whitespace() {
        let map = parse_object(b" \n{\"a\": [1, {\"b\": null}]}\n", 1024).unwrap();
        assert_eq!(map["a"][1]["b"], Value::Null);
    }

    #[test]
    fn each_malformed_class_has_its_own_code() {
        assert_eq!(code(b""), "empty");
        assert_eq!(code(b"  \n"), "empty");
        assert_eq!(code(b"\xEF\xBB\xBF{}"), "byte_order_mark");
        assert_eq!(code(b"{\"a\": \"\xff\"}"), "invalid_utf8");
        assert_eq!(code(b"{\"a\": 1"), "json_syntax");
        assert_eq!(code(b"{} x"), "trailing_bytes");
        assert_eq!(code(b"{}{}"), "multiple_documents");
        assert_eq!(code(b"{} [1]"), "multiple_documents");
        assert_eq!(code(b"[1]"), "not_object");
        assert_eq!(code(b"\"s\""), "not_object");
        assert_eq!(code(b"{\"a\":1,\"a\":2}"), "duplicate_key");
        assert_eq!(
            parse_object(b"{}", 1).unwrap_err(),
            JsonIssue::TooLarge {
                limit: 1,
                actual: 2
            }
        );
    }

    #[test]
    fn duplicate_keys_are_found_at_any_depth_with_their_pointer() {
        let err = parse_object(br#"{"x":[{"a/b":{"k":1,"k":2}}]}"#, 1024).unwrap_err();
        assert_eq!(
            err,
            JsonIssue::DuplicateKey {
                pointer: "/x/0/a~1b".into(),
                key: "k".into()
            }
        );
    }

    #[test]
    fn depth_cap_is_exactly_max_depth() {
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH - 1), "]".repeat(MAX_DEPTH - 1));
        let ok = format!("{{\"a\":{ok}}}");
        parse_object(ok.as_bytes(), 1 << 20).unwrap();
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        let deep = format!("{{\"a\":{deep}}}");
        assert_eq!(code(deep.as_bytes()), "too_deep");
        // Far past the cap must not overflow the stack either.
        let huge = "[".repeat(1_000_000);
        assert_eq!(
            parse_value(huge.as_bytes(), 1 << 21).unwrap_err().code(),
            "too_deep"
        );
    }

    #[test]
    fn lone_surrogate_escape_is_a_syntax_error() {
        assert_eq!(code(br#"{"a":"\ud800"}"#), "json_syntax");
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        fn json_value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                ".{0,12}".prop_map(Value::String),
            ];
            leaf.prop_recursive(4, 32, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                    prop::collection::btree_map(".{0,6}", inner, 0..6)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        proptest! {
            #[test]
            fn never_panics_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
                let _ = parse_object(&bytes, 1 << 20);
                let _ = parse_value(&bytes, 1 << 20);
            }

            #[test]
            fn what_serde_json_writes_reads_back_the_same(value in json_value()) {
                let text = serde_json::to_string(&value).unwrap();
                prop_assert_eq!(parse_value(text.as_bytes(), 1 << 20).unwrap(), value);
            }
        }
    }
}
