//! Redaction of raw JSON text, without building a tree (SPEC §5): opaque payloads stay as
//! the text they arrived as, so numbers such as `12345678901234567890123` or `1e400` keep
//! their exact spelling and memory stays a small multiple of the document.
//!
//! It owns one left-to-right pass that reads a JSON text and writes its compact form with the
//! rules of a [`Scope`] applied: the same result, value for value, as the tree walk
//! ([`Redactor::redact_value`], [`Redactor::scrub_secrets_value`]) on the parsed document.
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

use super::{is_sensitive_key, KeyNames, Redactor, REDACTED};
use crate::json::find_special;
use std::borrow::Cow;

/// Which rules apply to a JSON document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Only exact secrets, in every string and key (as [`Redactor::scrub_secrets_value`]).
    SecretsOnly,
    /// Every string rule on every string and key, and whole values under sensitive keys
    /// replaced (as [`Redactor::redact_value`]). With `envelope_root`, the document is an
    /// envelope: its top-level `authorization` object is structural (its members still get
    /// every rule).
    Full { envelope_root: bool },
}

/// Why a text could not be redacted as JSON: it is not one valid JSON document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not valid JSON at byte {offset}: {reason}")]
pub struct InvalidJson {
    /// Byte offset in the input where reading stopped.
    pub offset: usize,
    /// What was wrong there.
    pub reason: &'static str,
}

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
    pub fn redact_json_into(
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
        let mut pass = JsonPass {
            redactor: self,
            rules,
            src: json.as_bytes(),
            text: json,
            pos: 0,
            out,
            sink: None,
            scratch: String::new(),
            keys: Vec::new(),
        };
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
    pub fn redact_json_pieces(
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
        let mut pass = JsonPass {
            redactor: self,
            rules: None,
            src: json.as_bytes(),
            text: json,
            pos: 0,
            out: &mut buffer,
            sink: Some(emit),
            scratch: String::new(),
            keys: Vec::new(),
        };
        let result = pass.run();
        if result.is_ok() {
            pass.flush();
        }
        result
    }
}

/// The most output [`Redactor::redact_json_pieces`] gathers before it emits a piece.
pub const PIECE_BYTES: usize = 64 * 1024;

/// How the value being read is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// As it is, with the string rules applied to its strings and keys.
    Keep,
    /// It sits under a sensitive key: null and booleans as they are, anything else becomes
    /// `"[redacted]"`.
    Hide,
    /// It is inside a hidden value: read (and checked) only.
    Mute,
}

/// An array or object still open.
struct Frame {
    object: bool,
    /// Read only, nothing written (inside a hidden value).
    mute: bool,
    /// Where this object's keys start in [`JsonPass::keys`].
    keys_from: usize,
    /// The keys written so far, once a key of this object was rewritten: from then on every
    /// key is checked against them. Until then the keys are only remembered (where they are
    /// in the output), which costs no allocation.
    names: Option<KeyNames>,
}

struct JsonPass<'a, 'o> {
    redactor: &'a Redactor,
    /// `None` on the fast path: no rule can change anything.
    rules: Option<Scope>,
    src: &'a [u8],
    text: &'a str,
    pos: usize,
    out: &'o mut String,
    /// Piece mode (fast path only, where no key is tracked in `out`): `out` is a buffer
    /// handed to the sink whenever it fills up.
    sink: Option<&'o mut dyn FnMut(&str)>,
    /// Decoded strings that held escapes.
    scratch: String,
    /// Where the keys of the open objects are in `out` (their JSON-encoded text between the
    /// quotes), innermost object last.
    keys: Vec<(usize, usize)>,
}

impl JsonPass<'_, '_> {
    /// Append `s`, a run of copied input; in piece mode a full buffer is emitted first, and a
    /// long run is emitted as it is instead of being copied.
    fn put(&mut self, s: &str) {
        if let Some(sink) = self.sink.as_mut() {
            if self.out.len() + s.len() > PIECE_BYTES {
                if !self.out.is_empty() {
                    sink(self.out);
                    self.out.clear();
                }
                if s.len() >= PIECE_BYTES {
                    sink(s);
                    return;
                }
            }
        }
        self.out.push_str(s);
    }

    /// Piece mode: emit what the buffer holds.
    fn flush(&mut self) {
        if let Some(sink) = self.sink.as_mut() {
            if !self.out.is_empty() {
                sink(self.out);
                self.out.clear();
            }
        }
    }

    fn run(&mut self) -> Result<(), InvalidJson> {
        let mut stack: Vec<Frame> = Vec::new();
        let mut mode = Mode::Keep;
        'value: loop {
            if self.out.len() >= PIECE_BYTES {
                self.flush();
            }
            self.skip_whitespace();
            match self.peek() {
                Some(open @ (b'{' | b'[')) => {
                    self.pos += 1;
                    let object = open == b'{';
                    let close = if object { b'}' } else { b']' };
                    let mute = match mode {
                        Mode::Keep => {
                            self.out.push(char::from(open));
                            false
                        }
                        Mode::Hide => {
                            self.write_marker();
                            true
                        }
                        Mode::Mute => true,
                    };
                    self.skip_whitespace();
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        if !mute {
                            self.out.push(char::from(close));
                        }
                    } else {
                        let mut frame = Frame {
                            object,
                            mute,
                            keys_from: self.keys.len(),
                            names: None,
                        };
                        mode = if object {
                            // The depth the frame has once pushed.
                            self.key(&mut frame, stack.len() + 1)?
                        } else if mute {
                            Mode::Mute
                        } else {
                            Mode::Keep
                        };
                        stack.push(frame);
                        continue 'value;
                    }
                }
                Some(b'"') => self.string_value(mode)?,
                Some(b't') => self.literal("true", mode)?,
                Some(b'f') => self.literal("false", mode)?,
                Some(b'n') => self.literal("null", mode)?,
                Some(b'-' | b'0'..=b'9') => self.number(mode)?,
                Some(_) => return Err(self.error("expected a value")),
                None => return Err(self.error("unexpected end of input")),
            }
            // A value is complete: close what it completes, then find the next value.
            loop {
                if self.out.len() >= PIECE_BYTES {
                    self.flush();
                }
                self.skip_whitespace();
                let depth = stack.len();
                let Some(frame) = stack.last_mut() else {
                    break 'value;
                };
                let close = if frame.object { b'}' } else { b']' };
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        if !frame.mute {
                            self.out.push(',');
                        }
                        mode = if frame.object {
                            self.key(frame, depth)?
                        } else if frame.mute {
                            Mode::Mute
                        } else {
                            Mode::Keep
                        };
                        continue 'value;
                    }
                    Some(b) if b == close => {
                        self.pos += 1;
                        if !frame.mute {
                            self.out.push(char::from(close));
                        }
                        self.keys.truncate(frame.keys_from);
                        stack.pop();
                    }
                    Some(_) => return Err(self.error("expected `,` or the end of the container")),
                    None => return Err(self.error("unexpected end of input")),
                }
            }
        }
        self.skip_whitespace();
        if self.pos != self.src.len() {
            return Err(self.error("trailing characters after the document"));
        }
        Ok(())
    }

    /// Read one object key and its `:`, write them, and say how the value after them is
    /// written. `depth` is the number of open containers (1 for the top-level object).
    fn key(&mut self, frame: &mut Frame, depth: usize) -> Result<Mode, InvalidJson> {
        self.skip_whitespace();
        if self.peek() != Some(b'"') {
            return Err(self.error("expected a string key"));
        }
        let mode = if frame.mute {
            self.read_string()?;
            Mode::Mute
        } else if self.rules.is_none() {
            // Nothing can change and nothing is tracked: the key goes out as it is read.
            self.copy_string()?;
            self.out.push(':');
            Mode::Keep
        } else {
            let range = self.read_string()?;
            let key = decoded(self.text, &self.scratch, range);
            let key = match self.rules {
                Some(_) if self.redactor.kept_keys.contains(key) => Cow::Borrowed(key),
                Some(scope) => apply(self.redactor, key, scope),
                None => Cow::Borrowed(key),
            };
            let key = write_key(self.out, &mut self.keys, self.rules.is_some(), frame, key);
            match self.rules {
                Some(Scope::Full { envelope_root }) => {
                    // The envelope's own `authorization` object holds the allowlist, not a
                    // credential; its members still get every rule.
                    let structural = envelope_root
                        && depth == 1
                        && key == "authorization"
                        && self.next_value_is_object();
                    if !structural && is_sensitive_key(&key) {
                        Mode::Hide
                    } else {
                        Mode::Keep
                    }
                }
                _ => Mode::Keep,
            }
        };
        self.skip_whitespace();
        if self.peek() != Some(b':') {
            return Err(self.error("expected `:` after an object key"));
        }
        self.pos += 1;
        Ok(mode)
    }

    /// Whether the value after the `:` ahead is an object (looks past whitespace only).
    fn next_value_is_object(&self) -> bool {
        let rest = &self.src[self.pos..];
        let mut after = rest.iter().skip_while(|b| is_whitespace(**b));
        after.next() == Some(&b':') && after.find(|b| !is_whitespace(**b)) == Some(&b'{')
    }

    fn string_value(&mut self, mode: Mode) -> Result<(), InvalidJson> {
        if mode == Mode::Keep && self.rules.is_none() {
            return self.copy_string();
        }
        let range = self.read_string()?;
        match mode {
            Mode::Keep => {
                let value = decoded(self.text, &self.scratch, range);
                let value = match self.rules {
                    Some(scope) => apply(self.redactor, value, scope),
                    None => Cow::Borrowed(value),
                };
                write_string(self.out, &value);
            }
            // `"[redacted]"` itself is kept, which is the same text.
            Mode::Hide => self.write_marker(),
            Mode::Mute => {}
        }
        Ok(())
    }

    fn literal(&mut self, word: &'static str, mode: Mode) -> Result<(), InvalidJson> {
        if !self.src[self.pos..].starts_with(word.as_bytes()) {
            return Err(self.error("expected `true`, `false` or `null`"));
        }
        self.pos += word.len();
        // Null and booleans carry no secret: kept even under a sensitive key.
        if mode != Mode::Mute {
            self.out.push_str(word);
        }
        Ok(())
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, copied as written.
    fn number(&mut self, mode: Mode) -> Result<(), InvalidJson> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.skip_digits(),
            _ => return Err(self.error("expected a digit")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
                return Err(self.error("expected a digit after `.`"));
            }
            self.skip_digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
                return Err(self.error("expected a digit in the exponent"));
            }
            self.skip_digits();
        }
        match mode {
            Mode::Keep => {
                let text = self.text;
                self.put(&text[start..self.pos]);
            }
            Mode::Hide => self.write_marker(),
            Mode::Mute => {}
        }
        Ok(())
    }

    fn skip_digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    /// Read a string literal (at its opening quote) and check it. Returns where its body lies
    /// in the input when it holds no escape; otherwise its decoded text is in `scratch`.
    fn read_string(&mut self) -> Result<Option<(usize, usize)>, InvalidJson> {
        self.pos += 1;
        let start = self.pos;
        // The common case: no escape at all, so the body is the text itself.
        self.pos = find_special(self.src, start).unwrap_or(self.src.len());
        match self.peek() {
            Some(b'"') => {
                self.pos += 1;
                return Ok(Some((start, self.pos - 1)));
            }
            Some(b'\\') => {}
            Some(_) => return Err(self.error("control character in a string")),
            None => return Err(self.error("unterminated string")),
        }
        self.scratch.clear();
        self.scratch.push_str(&self.text[start..self.pos]);
        loop {
            let run = self.pos;
            self.pos = find_special(self.src, run).unwrap_or(self.src.len());
            self.scratch.push_str(&self.text[run..self.pos]);
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(None);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let decoded = self.escape()?;
                    self.scratch.push(decoded);
                }
                Some(_) => return Err(self.error("control character in a string")),
                None => return Err(self.error("unterminated string")),
            }
        }
    }

    /// The fast path's string: read a string literal (at its opening quote), check it, and
    /// write what [`write_string`] writes for its decoded text, without decoding it: runs
    /// between escapes are copied as they are, escapes that are already canonical (`\"`,
    /// `\\`, `\b`, `\f`, `\n`, `\r`, `\t`) too, and only the others (`\/`, `\uXXXX`) are
    /// decoded and written again. No scratch copy of the string is made, however long it is.
    fn copy_string(&mut self) -> Result<(), InvalidJson> {
        self.pos += 1;
        self.out.push('"');
        loop {
            let run = self.pos;
            let Some(at) = find_special(self.src, run) else {
                self.pos = self.src.len();
                return Err(self.error("unterminated string"));
            };
            let text = self.text;
            self.put(&text[run..at]);
            self.pos = at;
            match self.src[at] {
                b'"' => {
                    self.pos += 1;
                    self.out.push('"');
                    return Ok(());
                }
                b'\\' => match self.src.get(at + 1) {
                    Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') => {
                        let text = self.text;
                        self.put(&text[at..at + 2]);
                        self.pos = at + 2;
                    }
                    _ => {
                        self.pos = at + 1;
                        let decoded = self.escape()?;
                        let mut utf8 = [0u8; 4];
                        write_string_body(self.out, decoded.encode_utf8(&mut utf8));
                        if self.out.len() >= PIECE_BYTES {
                            self.flush();
                        }
                    }
                },
                _ => return Err(self.error("control character in a string")),
            }
        }
    }

    /// The character of the escape after a `\`.
    fn escape(&mut self) -> Result<char, InvalidJson> {
        let Some(b) = self.peek() else {
            return Err(self.error("unterminated string"));
        };
        self.pos += 1;
        Ok(match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = self.hex4()?;
                let code = match unit {
                    0xD800..=0xDBFF => {
                        if !self.src[self.pos..].starts_with(b"\\u") {
                            return Err(self.error("lone leading surrogate in a \\u escape"));
                        }
                        self.pos += 2;
                        let low = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return Err(self.error("invalid trailing surrogate in a \\u escape"));
                        }
                        0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00)
                    }
                    0xDC00..=0xDFFF => {
                        return Err(self.error("lone trailing surrogate in a \\u escape"))
                    }
                    unit => u32::from(unit),
                };
                char::from_u32(code).ok_or_else(|| self.error("invalid \\u escape"))?
            }
            _ => {
                self.pos -= 1;
                return Err(self.error("invalid escape"));
            }
        })
    }

    fn hex4(&mut self) -> Result<u16, InvalidJson> {
        let digits = self
            .src
            .get(self.pos..self.pos + 4)
            .filter(|d| d.iter().all(u8::is_ascii_hexdigit))
            .ok_or_else(|| self.error("expected four hex digits in a \\u escape"))?;
        // Checked above: each is an ASCII hex digit, so `to_digit` answers for every one.
        let value = digits.iter().fold(0u16, |acc, &d| {
            (acc << 4) | char::from(d).to_digit(16).unwrap_or(0) as u16
        });
        self.pos += 4;
        Ok(value)
    }

    fn write_marker(&mut self) {
        self.out.push('"');
        self.out.push_str(REDACTED);
        self.out.push('"');
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while self.peek().is_some_and(is_whitespace) {
            self.pos += 1;
        }
    }

    fn error(&self, reason: &'static str) -> InvalidJson {
        InvalidJson {
            offset: self.pos,
            reason,
        }
    }
}

/// Write an object key (with the rules already applied) and its `:`, made unique within
/// its object the way the tree walk does it; returns the key as written. On the fast path
/// nothing can change, so nothing is tracked.
fn write_key<'k>(
    out: &mut String,
    keys: &mut Vec<(usize, usize)>,
    tracking: bool,
    frame: &mut Frame,
    key: Cow<'k, str>,
) -> Cow<'k, str> {
    let rewritten = matches!(key, Cow::Owned(_));
    if !tracking || (frame.names.is_none() && !rewritten) {
        out.push('"');
        let start = out.len();
        write_string_body(out, &key);
        if tracking {
            keys.push((start, out.len()));
        }
        out.push_str("\":");
        return key;
    }
    // Keys are compared in their JSON-encoded form, which is one-to-one with the text and
    // takes a `~n` suffix unchanged.
    let written = &*out;
    let names = frame.names.get_or_insert_with(|| {
        let mut names = KeyNames::default();
        for &(start, end) in &keys[frame.keys_from..] {
            names.claim(written[start..end].to_string());
        }
        names
    });
    let mut encoded = String::with_capacity(key.len());
    write_string_body(&mut encoded, &key);
    let plain_len = encoded.len();
    let unique = names.claim(encoded);
    out.push('"');
    out.push_str(&unique);
    out.push_str("\":");
    if unique.len() == plain_len {
        key
    } else {
        Cow::Owned(format!("{key}{}", &unique[plain_len..]))
    }
}

/// The text of a string read by [`JsonPass::read_string`].
fn decoded<'t>(text: &'t str, scratch: &'t str, range: Option<(usize, usize)>) -> &'t str {
    match range {
        Some((start, end)) => &text[start..end],
        None => scratch,
    }
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The string rules of `scope` on one string.
fn apply<'s>(redactor: &Redactor, s: &'s str, scope: Scope) -> Cow<'s, str> {
    match scope {
        Scope::SecretsOnly => redactor.scrub(s),
        Scope::Full { .. } => redactor.redact(s),
    }
}

/// Write `s` as a JSON string literal, the way `serde_json` does: `"` and `\` escaped, control
/// characters as `\n`-style or `\u00XX` escapes, everything else as it is.
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    write_string_body(out, s);
    out.push('"');
}

/// The body of [`write_string`], without the quotes.
fn write_string_body(out: &mut String, s: &str) {
    let bytes = s.as_bytes();
    let mut run = 0;
    while let Some(i) = find_special(bytes, run) {
        let b = bytes[i];
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            // The other control characters (find_special stops at nothing else).
            _ => "",
        };
        out.push_str(&s[run..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push_str(escape);
        }
        run = i + 1;
    }
    out.push_str(&s[run..]);
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
