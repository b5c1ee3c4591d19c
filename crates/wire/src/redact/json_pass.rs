//! The one pass behind [`super::json`]: it reads a JSON text left to right and writes its
//! compact form with the rules of a [`Scope`] applied, keys made unique the way the tree walk
//! makes them, values under sensitive keys replaced whole, numbers and literals copied byte
//! for byte, strings written the way `serde_json` writes them.
//!
//! Invariants: linear time, an explicit stack (no recursion), memory is the output, the keys
//! of the objects still open and one string's worth of scratch; input that is not JSON is an
//! [`InvalidJson`] and never a panic.

use super::{is_sensitive_key, InvalidJson, KeyNames, Redactor, Scope, PIECE_BYTES, REDACTED};
use crate::json::find_special;
use std::borrow::Cow;

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

pub(super) struct JsonPass<'a, 'o> {
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

impl<'a, 'o> JsonPass<'a, 'o> {
    /// A pass of `redactor` with `rules` (`None`: the fast path, nothing can change) over
    /// `json`, writing to `out`, or in pieces to `sink`.
    pub(super) fn new(
        redactor: &'a Redactor,
        rules: Option<Scope>,
        json: &'a str,
        out: &'o mut String,
        sink: Option<&'o mut dyn FnMut(&str)>,
    ) -> Self {
        JsonPass {
            redactor,
            rules,
            src: json.as_bytes(),
            text: json,
            pos: 0,
            out,
            sink,
            scratch: String::new(),
            keys: Vec::new(),
        }
    }

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
    pub(super) fn flush(&mut self) {
        if let Some(sink) = self.sink.as_mut() {
            if !self.out.is_empty() {
                sink(self.out);
                self.out.clear();
            }
        }
    }

    pub(super) fn run(&mut self) -> Result<(), InvalidJson> {
        let mut stack: Vec<Frame> = Vec::new();
        let mut mode = Mode::Keep;
        'value: loop {
            if self.out.len() >= PIECE_BYTES {
                self.flush();
            }
            self.skip_whitespace();
            match self.peek() {
                Some(open @ (b'{' | b'[')) => {
                    if let Some((frame, next)) = self.open_container(open, mode, stack.len())? {
                        mode = next;
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

    /// Enter the container at `open` (`{` or `[`), written as `mode` says, with `outer` open
    /// containers around it. An empty one is read (and written) whole: `None`; otherwise its
    /// frame, and how its first value is written (an object's first key and `:` already read).
    #[inline]
    fn open_container(
        &mut self,
        open: u8,
        mode: Mode,
        outer: usize,
    ) -> Result<Option<(Frame, Mode)>, InvalidJson> {
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
            return Ok(None);
        }
        let mut frame = Frame {
            object,
            mute,
            keys_from: self.keys.len(),
            names: None,
        };
        let first = if object {
            // The depth the frame has once pushed.
            self.key(&mut frame, outer + 1)?
        } else if mute {
            Mode::Mute
        } else {
            Mode::Keep
        };
        Ok(Some((frame, first)))
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
