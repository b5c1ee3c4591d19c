//! JSON as text: the strict reader used for every document that crosses a trust boundary (the
//! bridge, the request, the adapter's result: SPEC §2.2, §4.5), and in [`raw`] the tools to look
//! into such text and to write JSON around it. It sits below `validate` and `envelope`, which
//! both use it, and depends on neither.
//!
//! It owns the byte-level checks and nothing else: size cap, UTF-8, byte-order mark, exactly
//! one document, an object at the top, no duplicate key at any depth, nesting depth, and the
//! JSON grammar itself (RFC 8259). Each failure has its own stable issue code
//! ([`JsonIssue::code`]) so that callers can tell a parser-differential attack (a duplicate
//! `tool` key) from a truncated file.
//!
//! The reader is a hand-written scanner rather than a tree builder, for two reasons:
//! - **Opaque values stay as written.** A request's `input` and an adapter's `output` are
//!   product payload: a number such as `12345678901234567890123` or `1e400` must reach the
//!   other side exactly as it was written, so nothing here converts a number.
//! - **Memory stays a small multiple of the input.** Checking builds no tree: it keeps the
//!   stack of open containers and, per open object, its keys (borrowed from the input unless
//!   they hold escapes). A [`Document`] is the input text plus the spans of its top-level
//!   members; callers look one level deeper with [`super::raw::Fields`] only where they must.
//!
//! Time is linear in the input: every byte is examined a bounded number of times (strings are
//! scanned eight bytes at a step), and nothing recurses, so no depth can overflow the stack.
//!
//! It must not know what an envelope contains; shape checks live in `validate.rs` and next to
//! each envelope type.

mod prescan;
pub mod raw;
mod scan;

pub use prescan::Prescan;
use scan::scan_document_read;
pub(crate) use scan::{decode_string, find_special, scan_document, Member};

use serde_json::{Map, Value};
use std::fmt;
use std::ops::Range;

/// The nesting cap: the top-level object is depth 1.
pub const MAX_DEPTH: usize = 128;

/// Why a document was refused. `code()` is the stable issue code; `pointer()` the JSON Pointer
/// of the offending place where one is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonIssue {
    /// More bytes than the cap allows (`limit`); reading stopped past it.
    TooLarge { limit: usize },
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
        detail: &'static str,
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

/// `8 MiB` for exact multiples of a MiB or KiB, else `N bytes`: limits as people set them.
pub fn human_bytes(n: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * 1024;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= KIB && n.is_multiple_of(KIB) {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n} bytes")
    }
}

impl fmt::Display for JsonIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonIssue::TooLarge { limit } => {
                write!(f, "document is over the {} limit", human_bytes(*limit))
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

/// A JSON object the strict reader accepted, kept as its text, with the spans of its
/// top-level members. Nothing in it was converted: `input`, `output` and every number are
/// exactly as written.
#[derive(Debug, Clone)]
pub struct Document {
    text: String,
    members: Vec<(String, Range<usize>)>,
}

impl Document {
    /// Read `bytes` as exactly one JSON object, refusing everything SPEC §2.2 refuses.
    /// Takes the buffer so that the text is never copied.
    pub fn parse(bytes: Vec<u8>, max_bytes: usize) -> Result<Document, JsonIssue> {
        prechecks(&bytes, max_bytes)?;
        let text = String::from_utf8(bytes).map_err(|e| JsonIssue::InvalidUtf8 {
            offset: e.utf8_error().valid_up_to(),
        })?;
        let mut members = Vec::new();
        let kind = scan_document(&text, &mut |member| {
            if let Member::Key(key, span, _) = member {
                members.push((key.into_owned(), span));
            }
        })?;
        if kind != Kind::Object {
            return Err(JsonIssue::NotObject { found: kind.name() });
        }
        Ok(Document { text, members })
    }

    /// The whole document as read.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The raw JSON text of the top-level member `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, span)| &self.text[span.clone()])
    }

    /// Where the raw value of the top-level member `key` sits in [`Document::text`] (to
    /// rewrite one member and keep every other byte, as `replay --bless` does).
    pub fn span(&self, key: &str) -> Option<Range<usize>> {
        self.members
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, span)| span.clone())
    }

    /// Every top-level member in document order, values as raw JSON text.
    pub fn members(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.members
            .iter()
            .map(|(k, span)| (k.as_str(), &self.text[span.clone()]))
    }

    /// Bytes of the document.
    pub fn len(&self) -> usize {
        self.text.len()
    }

    /// Whether the document is empty (never true for a parsed object: `{}` is two bytes).
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }
}

/// Parse `bytes` as exactly one JSON object into a tree, with the same strictness. For small
/// host-side documents (the bridge, a tool map); envelopes that carry opaque payload use
/// [`Document`].
pub fn parse_object(bytes: &[u8], max_bytes: usize) -> Result<Map<String, Value>, JsonIssue> {
    match parse_value(bytes, max_bytes)? {
        Value::Object(map) => Ok(map),
        other => Err(JsonIssue::NotObject {
            found: kind_name(&other),
        }),
    }
}

/// Parse `bytes` as exactly one JSON document of any type into a tree, with the same
/// strictness. A number a tree cannot hold (`1e400`) is refused here, never rounded silently.
pub fn parse_value(bytes: &[u8], max_bytes: usize) -> Result<Value, JsonIssue> {
    let text = check(bytes, max_bytes)?;
    let mut de = serde_json::Deserializer::from_str(text);
    // The scan bounded the depth already; serde's own limit would cut at a different level.
    de.disable_recursion_limit();
    serde::Deserialize::deserialize(&mut de).map_err(|e: serde_json::Error| JsonIssue::Syntax {
        line: e.line(),
        column: e.column(),
        detail: "a number is out of the range this document type supports",
    })
}

/// Check `bytes` as exactly one JSON document of any type; the text on success.
pub fn check(bytes: &[u8], max_bytes: usize) -> Result<&str, JsonIssue> {
    check_kind(bytes, max_bytes).map(|(text, _)| text)
}

/// Check `bytes` as exactly one JSON object, without building anything; the text on success.
pub fn check_object(bytes: &[u8], max_bytes: usize) -> Result<&str, JsonIssue> {
    match check_kind(bytes, max_bytes)? {
        (text, Kind::Object) => Ok(text),
        (_, kind) => Err(JsonIssue::NotObject { found: kind.name() }),
    }
}

fn check_kind(bytes: &[u8], max_bytes: usize) -> Result<(&str, Kind), JsonIssue> {
    check_kind_with(bytes, max_bytes, &mut |_| {})
}

/// [`check_object`], reporting the object's members to `on_member` as the one scan passes
/// them (so that a caller who needs them does not scan the document again).
pub(crate) fn check_object_with<'t>(
    bytes: &'t [u8],
    max_bytes: usize,
    on_member: &mut dyn FnMut(Member<'t>),
) -> Result<&'t str, JsonIssue> {
    match check_kind_with(bytes, max_bytes, on_member)? {
        (text, Kind::Object) => Ok(text),
        (_, kind) => Err(JsonIssue::NotObject { found: kind.name() }),
    }
}

/// [`check_object_with`] on bytes a [`Prescan`] was fed as they arrived: the same checks and
/// the same answer, without doing again what the prescan did.
pub(crate) fn check_object_prescanned<'t>(
    bytes: &'t [u8],
    prescan: &Prescan,
    max_bytes: usize,
    on_member: &mut dyn FnMut(Member<'t>),
) -> Result<&'t str, JsonIssue> {
    match check_kind_prescanned(bytes, Some(prescan), max_bytes, on_member)? {
        (text, Kind::Object) => Ok(text),
        (_, kind) => Err(JsonIssue::NotObject { found: kind.name() }),
    }
}

fn check_kind_with<'t>(
    bytes: &'t [u8],
    max_bytes: usize,
    on_member: &mut dyn FnMut(Member<'t>),
) -> Result<(&'t str, Kind), JsonIssue> {
    check_kind_prescanned(bytes, None, max_bytes, on_member)
}

fn check_kind_prescanned<'t>(
    bytes: &'t [u8],
    prescan: Option<&Prescan>,
    max_bytes: usize,
    on_member: &mut dyn FnMut(Member<'t>),
) -> Result<(&'t str, Kind), JsonIssue> {
    prechecks(bytes, max_bytes)?;
    let text = match prescan {
        Some(prescan) => prescan.text(bytes),
        None => std::str::from_utf8(bytes).map_err(|e| e.valid_up_to()),
    }
    .map_err(|offset| JsonIssue::InvalidUtf8 { offset })?;
    let read = prescan.map_or(&[][..], |p| p.strings(bytes));
    let kind = scan_document_read(text, read, on_member)?;
    Ok((text, kind))
}

fn prechecks(bytes: &[u8], max_bytes: usize) -> Result<(), JsonIssue> {
    if bytes.len() > max_bytes {
        return Err(JsonIssue::TooLarge { limit: max_bytes });
    }
    if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Err(JsonIssue::ByteOrderMark);
    }
    if bytes.iter().all(|&b| is_space(b)) {
        return Err(JsonIssue::Empty);
    }
    Ok(())
}

/// A human name for a JSON value's type.
pub fn kind_name(value: &Value) -> &'static str {
    match value {
        Value::Null => Kind::Null,
        Value::Bool(_) => Kind::Bool,
        Value::Number(_) => Kind::Number,
        Value::String(_) => Kind::String,
        Value::Array(_) => Kind::Array,
        Value::Object(_) => Kind::Object,
    }
    .name()
}

/// Escape one JSON Pointer reference token (RFC 6901).
pub(crate) fn pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// The type of a JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl Kind {
    /// "an object", "a string", …: for messages.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Bool => "a boolean",
            Kind::Number => "a number",
            Kind::String => "a string",
            Kind::Array => "an array",
            Kind::Object => "an object",
        }
    }

    /// The kind of the value whose text starts at the first non-space byte of `raw`.
    pub fn of(raw: &str) -> Kind {
        match raw.bytes().find(|&b| !is_space(b)) {
            Some(b'{') => Kind::Object,
            Some(b'[') => Kind::Array,
            Some(b'"') => Kind::String,
            Some(b't' | b'f') => Kind::Bool,
            Some(b'n') | None => Kind::Null,
            Some(_) => Kind::Number,
        }
    }
}

/// JSON's four whitespace bytes (RFC 8259 §2).
pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(bytes: &[u8]) -> &'static str {
        parse_object(bytes, 1 << 20).unwrap_err().code()
    }

    fn doc(text: &str) -> Result<Document, JsonIssue> {
        Document::parse(text.as_bytes().to_vec(), 1 << 20)
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
            JsonIssue::TooLarge { limit: 1 }
        );
    }

    #[test]
    fn the_grammar_is_enforced_byte_by_byte() {
        for bad in [
            "{\"a\":01}",
            "{\"a\":1.}",
            "{\"a\":.5}",
            "{\"a\":1e}",
            "{\"a\":-}",
            "{\"a\":+1}",
            "{\"a\":[1,]}",
            "{\"a\":1,}",
            "{,}",
            "{\"a\" 1}",
            "{a:1}",
            "{\"a\":tru}",
            "{\"a\":nul}",
            "{\"a\":\"\\x\"}",
            "{\"a\":\"\\u12\"}",
            "{\"a\":\"tab\there\"}",
            "{\"a\":\"open}",
            "{\"a\":[}",
            "{\"a\":NaN}",
        ] {
            assert_eq!(code(bad.as_bytes()), "json_syntax", "{bad}");
        }
        for good in [
            r#"{"a":0,"b":-0.5e+10,"c":1E-2,"d":[true,false,null],"e":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"}"#,
            "{\"a\":{}, \"b\":[], \"c\":[[]], \"d\":{\"e\":{}}}",
        ] {
            check(good.as_bytes(), 1 << 20).unwrap();
        }
    }

    #[test]
    fn numbers_are_never_converted() {
        let d = doc(r#"{"input": {"big": 12345678901234567890123, "huge": 1e400, "x": -0.0}}"#)
            .unwrap();
        assert_eq!(
            d.get("input").unwrap(),
            r#"{"big": 12345678901234567890123, "huge": 1e400, "x": -0.0}"#
        );
    }

    #[test]
    fn documents_know_their_top_level_members() {
        let d = doc(" { \"a\" : [1, 2] , \"b\\u0031\": \"x\", \"c\":{\"d\":1} } ").unwrap();
        let got: Vec<_> = d.members().collect();
        assert_eq!(got, [("a", "[1, 2]"), ("b1", "\"x\""), ("c", "{\"d\":1}")]);
        assert_eq!(d.get("missing"), None);
        assert_eq!(doc("[1]").unwrap_err().code(), "not_object");
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
        // A key spelled with an escape is the same key.
        assert_eq!(code(br#"{"tool":"a","t\u006fol":"b"}"#), "duplicate_key");
        // Past the small-object threshold, through the set.
        let many: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
        let text = format!("{{{},\"k7\":0}}", many.join(","));
        assert_eq!(code(text.as_bytes()), "duplicate_key");
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
        assert_eq!(code(br#"{"a":"\udc00"}"#), "json_syntax");
        assert_eq!(code(br#"{"a":"\ud800\u0041"}"#), "json_syntax");
    }

    #[test]
    fn positions_are_reported_in_lines_and_columns() {
        let err = parse_object(b"{\n  \"a\": x\n}", 1024).unwrap_err();
        assert_eq!(
            err,
            JsonIssue::Syntax {
                line: 2,
                column: 8,
                detail: "expected a value"
            }
        );
        assert_eq!(
            parse_object(b"{}\n x", 1024).unwrap_err(),
            JsonIssue::TrailingBytes { line: 2, column: 2 }
        );
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
                let _ = Document::parse(bytes, 1 << 20);
            }

            #[test]
            fn what_serde_json_writes_reads_back_the_same(value in json_value()) {
                let text = serde_json::to_string(&value).unwrap();
                prop_assert_eq!(parse_value(text.as_bytes(), 1 << 20).unwrap(), value.clone());
                let pretty = serde_json::to_string_pretty(&value).unwrap();
                prop_assert_eq!(parse_value(pretty.as_bytes(), 1 << 20).unwrap(), value);
            }

            #[test]
            fn the_scanner_agrees_with_serde_json_on_any_text(text in "[\\[\\]{}\",:0-9a-z\\\\ .eE+-]{0,40}") {
                // serde_json accepts exactly the JSON grammar (numbers aside, which it may
                // refuse for range); our scanner must accept what serde accepts.
                if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok() {
                    prop_assert!(check(text.as_bytes(), 1 << 20).is_ok(), "{}", text);
                }
            }
        }
    }
}
