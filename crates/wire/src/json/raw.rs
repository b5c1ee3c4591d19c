//! Working with JSON kept as text: looking one level into an object or array, reading a
//! scalar, writing compact or pretty JSON around raw pieces.
//!
//! Everything here takes text the strict reader (`json.rs`) already accepted, or text this
//! crate wrote; given anything else it returns `None` rather than panicking. Nothing here
//! builds a tree or converts a number: opaque payload is copied byte for byte (only
//! insignificant whitespace is dropped), so `1e400` stays `1e400`.

use super::{self as json, find_special, is_space, Kind, Member};
use std::borrow::Cow;

/// One level of a JSON object: its members in order, values as raw text.
#[derive(Debug, Clone, Default)]
pub struct Fields<'t> {
    members: Vec<(Cow<'t, str>, &'t str)>,
    /// Per member, whether its value is canonical (see [`Fields::is_canonical`]).
    canonical: Vec<bool>,
}

impl<'t> Fields<'t> {
    /// The members of `raw` when it is an object.
    pub fn parse(raw: &'t str) -> Option<Fields<'t>> {
        if Kind::of(raw) != Kind::Object {
            return None;
        }
        let mut fields = Fields::default();
        json::scan_document(raw, &mut |member| fields.take(raw, member)).ok()?;
        Some(fields)
    }

    /// Read `bytes` as exactly one JSON object with the strict reader (as
    /// [`json::check_object`] does, with the same issues) and return its text and its
    /// members, from the one scan; with `prescan`, on bytes it was fed as they arrived
    /// ([`json::Prescan`]).
    pub(crate) fn read_object(
        bytes: &'t [u8],
        prescan: Option<&json::Prescan>,
        max_bytes: usize,
    ) -> Result<(&'t str, Fields<'t>), json::JsonIssue> {
        let mut fields = Fields::default();
        // The text is only known once the scan is done; spans are resolved after it.
        let mut spans = Vec::new();
        let mut on_member = |member| {
            if let Member::Key(key, span, canonical) = member {
                spans.push((key, span, canonical));
            }
        };
        let text = match prescan {
            Some(prescan) => {
                json::check_object_prescanned(bytes, prescan, max_bytes, &mut on_member)
            }
            None => json::check_object_with(bytes, max_bytes, &mut on_member),
        }?;
        for (key, span, canonical) in spans {
            fields.members.push((key, &text[span]));
            fields.canonical.push(canonical);
        }
        Ok((text, fields))
    }

    fn take(&mut self, raw: &'t str, member: Member<'t>) {
        if let Member::Key(key, span, canonical) = member {
            self.members.push((key, &raw[span]));
            self.canonical.push(canonical);
        }
    }

    /// Whether the value of `key` is written exactly as the crate's compact canonical form
    /// would write it (no whitespace between tokens, no `\/` or `\u` escape), so that copying
    /// it unchanged is the same as minifying it and writing its strings again. False for a
    /// missing key.
    pub(crate) fn is_canonical(&self, key: &str) -> bool {
        self.members
            .iter()
            .position(|(k, _)| k == key)
            .is_some_and(|i| self.canonical[i])
    }

    /// The raw value of `key`.
    pub fn get(&self, key: &str) -> Option<&'t str> {
        self.members
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, value)| *value)
    }

    /// Members in document order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &'t str)> + '_ {
        self.members.iter().map(|(k, v)| (k.as_ref(), *v))
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

/// Call `f` with the index and raw text of every item of `raw`; false when `raw` is not an
/// array. Items are visited as the scan passes them: nothing is collected.
pub fn for_each_item<'t>(raw: &'t str, mut f: impl FnMut(usize, &'t str)) -> bool {
    if Kind::of(raw) != Kind::Array {
        return false;
    }
    let mut index = 0;
    json::scan_document(raw, &mut |member| {
        if let Member::Item(span) = member {
            f(index, &raw[span]);
            index += 1;
        }
    })
    .is_ok()
}

/// The decoded value of a raw JSON string.
pub fn string(raw: &str) -> Option<Cow<'_, str>> {
    let raw = raw.trim_matches(|c: char| c.is_ascii() && is_space(c as u8));
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    Some(if inner.contains('\\') {
        Cow::Owned(json::decode_string(inner))
    } else {
        Cow::Borrowed(inner)
    })
}

/// A raw JSON boolean.
pub fn boolean(raw: &str) -> Option<bool> {
    match raw.trim_matches(|c: char| c.is_ascii() && is_space(c as u8)) {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// A raw JSON number written as a non-negative integer without fraction or exponent.
pub fn integer(raw: &str) -> Option<u64> {
    let raw = raw.trim_matches(|c: char| c.is_ascii() && is_space(c as u8));
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    raw.parse().ok()
}

/// JSON text for a string.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    quote_into(s, &mut out);
    out
}

/// Append the JSON text for a string: `"`, `\` and control characters escaped, everything
/// else (non-ASCII included) as UTF-8.
pub(crate) fn quote_into(s: &str, out: &mut String) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut done = 0;
    while let Some(at) = find_special(bytes, done) {
        out.push_str(&s[done..at]);
        match bytes[at] {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'\x08' => out.push_str("\\b"),
            b'\x0c' => out.push_str("\\f"),
            other => out.push_str(&format!("\\u{other:04x}")),
        }
        done = at + 1;
    }
    out.push_str(&s[done..]);
    out.push('"');
}

/// Append `raw` without insignificant whitespace. Strings are copied as written.
pub(crate) fn minify_into(raw: &str, out: &mut String) {
    let bytes = raw.as_bytes();
    let mut pos = 0;
    let mut copied = 0;
    while pos < bytes.len() {
        match bytes[pos] {
            b'"' => pos = string_end(bytes, pos),
            b if is_space(b) => {
                out.push_str(&raw[copied..pos]);
                while pos < bytes.len() && is_space(bytes[pos]) {
                    pos += 1;
                }
                copied = pos;
            }
            _ => pos += 1,
        }
    }
    out.push_str(&raw[copied..]);
}

/// `raw` without insignificant whitespace, borrowed when it has none.
pub fn minify(raw: &str) -> Cow<'_, str> {
    if !has_outer_space(raw) {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    minify_into(raw, &mut out);
    Cow::Owned(out)
}

fn has_outer_space(raw: &str) -> bool {
    let bytes = raw.as_bytes();
    let mut pos = 0;
    while pos < bytes.len() {
        match bytes[pos] {
            b'"' => pos = string_end(bytes, pos),
            b if is_space(b) => return true,
            _ => pos += 1,
        }
    }
    false
}

/// The index just past the string that opens at `start`.
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut pos = start + 1;
    loop {
        match find_special(bytes, pos) {
            None => return bytes.len(),
            Some(at) if bytes[at] == b'"' => return at + 1,
            Some(at) if bytes[at] == b'\\' => pos = at + 2,
            Some(at) => pos = at + 1,
        }
    }
}

/// Pretty-print compact JSON (as this crate writes it): two-space indent, `"key": value`,
/// empty containers as `{}` / `[]`. Linear; strings copied as written. (What [`Pretty`]
/// writes, gathered into a string.)
pub fn pretty(compact: &str) -> String {
    let mut out = Vec::with_capacity(compact.len() + compact.len() / 4);
    let mut writer = Pretty::new(&mut out);
    // Writing into a Vec cannot fail.
    let _ =
        std::io::Write::write_all(&mut writer, compact.as_bytes()).and_then(|()| writer.finish());
    // Only ASCII punctuation and whitespace is added, whole characters are copied, and a
    // multi-byte character split between two writes is put back together in order.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A writer that pretty-prints the compact JSON written to it as [`pretty`] does, onto
/// `inner`, holding nothing but one pending bracket and a small buffer: an envelope can be
/// streamed through it in pieces of any size, cut anywhere (inside a string or an escape
/// included). Call [`finish`](Pretty::finish) at the end.
pub struct Pretty<W: std::io::Write> {
    inner: W,
    buf: Vec<u8>,
    depth: usize,
    in_string: bool,
    /// The last byte in a string was a backslash: the next one is escaped.
    escaped: bool,
    /// An opening bracket not written yet: it becomes `{}` / `[]` if its close follows.
    pending: Option<u8>,
}

/// How much [`Pretty`] gathers before it writes to its inner writer.
const PRETTY_BUFFER: usize = 64 * 1024;

impl<W: std::io::Write> Pretty<W> {
    /// Pretty-print onto `inner`.
    pub fn new(inner: W) -> Pretty<W> {
        Pretty {
            inner,
            buf: Vec::with_capacity(PRETTY_BUFFER),
            depth: 0,
            in_string: false,
            escaped: false,
            pending: None,
        }
    }

    /// Write what is still held (an opening bracket nothing followed) and flush.
    pub fn finish(&mut self) -> std::io::Result<()> {
        if let Some(open) = self.pending.take() {
            self.buf.push(open);
        }
        self.drain()?;
        self.inner.flush()
    }

    fn drain(&mut self) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            self.inner.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn newline(&mut self) {
        self.buf.push(b'\n');
        for _ in 0..self.depth {
            self.buf.extend_from_slice(b"  ");
        }
    }

    /// One byte outside a string.
    fn structural(&mut self, b: u8) {
        if let Some(open) = self.pending.take() {
            let close = if open == b'{' { b'}' } else { b']' };
            if b == close {
                self.buf.extend_from_slice(&[open, close]);
                return;
            }
            if is_space(b) {
                self.pending = Some(open);
                return;
            }
            self.buf.push(open);
            self.depth += 1;
            self.newline();
        }
        match b {
            b'"' => {
                self.in_string = true;
                self.buf.push(b);
            }
            b'{' | b'[' => self.pending = Some(b),
            b'}' | b']' => {
                self.depth = self.depth.saturating_sub(1);
                self.newline();
                self.buf.push(b);
            }
            b',' => {
                self.buf.push(b',');
                self.newline();
            }
            b':' => self.buf.extend_from_slice(b": "),
            b if is_space(b) => {}
            b => self.buf.push(b),
        }
    }
}

impl<W: std::io::Write> std::io::Write for Pretty<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let mut pos = 0;
        while pos < bytes.len() {
            if self.buf.len() >= PRETTY_BUFFER {
                self.drain()?;
            }
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    self.buf.push(bytes[pos]);
                    pos += 1;
                    continue;
                }
                // Copy up to the next quote or backslash as it is.
                let stop =
                    memchr::memchr2(b'"', b'\\', &bytes[pos..]).map_or(bytes.len(), |i| pos + i);
                let end = stop.min(pos + PRETTY_BUFFER);
                self.buf.extend_from_slice(&bytes[pos..end]);
                pos = end;
                if end == stop && stop < bytes.len() {
                    self.buf.push(bytes[stop]);
                    if bytes[stop] == b'"' {
                        self.in_string = false;
                    } else {
                        self.escaped = true;
                    }
                    pos += 1;
                }
                continue;
            }
            self.structural(bytes[pos]);
            pos += 1;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.drain()?;
        self.inner.flush()
    }
}

/// Writes one JSON object, member by member, into a string: typed values through serde, raw
/// pieces (already valid JSON) minified as they are copied.
pub struct ObjectWriter<'o> {
    out: &'o mut String,
    first: bool,
}

impl<'o> ObjectWriter<'o> {
    /// Open an object at the end of `out`.
    pub fn new(out: &'o mut String) -> ObjectWriter<'o> {
        out.push('{');
        ObjectWriter { out, first: true }
    }

    fn key(&mut self, key: &str) {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        quote_into(key, self.out);
        self.out.push(':');
    }

    /// A member whose value is raw JSON text.
    pub fn raw(&mut self, key: &str, raw: &str) -> &mut Self {
        self.key(key);
        minify_into(raw, self.out);
        self
    }

    /// A string member.
    pub fn str(&mut self, key: &str, value: &str) -> &mut Self {
        self.key(key);
        quote_into(value, self.out);
        self
    }

    /// A member written by `write` (which must append exactly one JSON value).
    pub fn with(&mut self, key: &str, write: impl FnOnce(&mut String)) -> &mut Self {
        self.key(key);
        write(self.out);
        self
    }

    /// A member serialized by serde (for the crate's own typed values).
    pub fn value<T: serde::Serialize + ?Sized>(&mut self, key: &str, value: &T) -> &mut Self {
        self.key(key);
        // Serializing the crate's own plain types into a String cannot fail; `null` would be
        // the visible symptom if a future type made it fail.
        match serde_json::to_string(value) {
            Ok(text) => self.out.push_str(&text),
            Err(_) => self.out.push_str("null"),
        }
        self
    }

    /// Close the object.
    pub fn finish(self) {
        self.out.push('}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn fields_and_items_look_one_level_in() {
        let f = Fields::parse(r#" {"a": {"b": 1}, "c": [1, 2], "d\n": "x"} "#).unwrap();
        assert_eq!(f.get("a"), Some(r#"{"b": 1}"#));
        assert_eq!(f.get("d\n"), Some(r#""x""#));
        assert_eq!(f.len(), 3);
        assert!(Fields::parse("[1]").is_none());
        let mut items = Vec::new();
        assert!(for_each_item(r#"[1, "two", {"3": [4]}]"#, |i, raw| items.push((i, raw))));
        assert_eq!(items, [(0, "1"), (1, "\"two\""), (2, r#"{"3": [4]}"#)]);
        assert!(!for_each_item("{}", |_, _| {}));
    }

    #[test]
    fn scalars_read_back() {
        assert_eq!(string(r#""a\nb""#).unwrap(), "a\nb");
        assert_eq!(string("1"), None);
        assert_eq!(boolean(" true"), Some(true));
        assert_eq!(integer("42"), Some(42));
        assert_eq!(integer("1.0"), None);
        assert_eq!(integer("-1"), None);
        assert_eq!(integer("99999999999999999999999"), None);
    }

    #[test]
    fn quoting_matches_serde_json() {
        for s in [
            "",
            "plain",
            "q\"b\\s",
            "\u{0}\u{1f}\n\t\r\u{8}\u{c}",
            "é😀\u{7f}",
            "</script>",
        ] {
            assert_eq!(quote(s), serde_json::to_string(s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn minify_drops_only_insignificant_space() {
        let raw = "{ \"a b\" : [ 1 ,\n 1e400 ] , \"c\":\"x \\\" y\" }";
        assert_eq!(minify(raw), "{\"a b\":[1,1e400],\"c\":\"x \\\" y\"}");
        assert!(matches!(minify("{\"a\":\" \"}"), Cow::Borrowed(_)));
    }

    #[test]
    fn pretty_matches_serde_json_for_ordinary_values() {
        let v: Value = serde_json::from_str(
            r#"{"a":[1,{"b":null,"c":[]},{}],"d":"x,y:{z}","e":{"f":true,"g":-1.5}}"#,
        )
        .unwrap();
        let compact = serde_json::to_string(&v).unwrap();
        assert_eq!(pretty(&compact), serde_json::to_string_pretty(&v).unwrap());
    }

    #[test]
    fn pretty_in_pieces_is_pretty_whole() {
        let compact = r#"{"a":[1,{"b":null,"c":[]},{}],"d":"x,y:{z}\"[]\\","e":{"f":true,"g":-1.5},"h":"é😀"}"#;
        let whole = pretty(compact);
        let v: Value = serde_json::from_str(compact).unwrap();
        assert_eq!(whole, serde_json::to_string_pretty(&v).unwrap());
        for size in 1..=compact.len() {
            let mut out = Vec::new();
            let mut writer = Pretty::new(&mut out);
            for piece in compact.as_bytes().chunks(size) {
                std::io::Write::write_all(&mut writer, piece).unwrap();
            }
            writer.finish().unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), whole, "pieces of {size}");
        }
    }

    #[test]
    fn the_object_writer_writes_valid_compact_json() {
        let mut out = String::new();
        let mut w = ObjectWriter::new(&mut out);
        w.str("s", "a\"b")
            .raw("r", "{ \"n\" : 1e400 }")
            .value("v", &[1, 2])
            .with("w", |o| o.push_str("null"));
        w.finish();
        assert_eq!(out, r#"{"s":"a\"b","r":{"n":1e400},"v":[1,2],"w":null}"#);
    }
}
