//! The scanner behind the strict reader: one left-to-right pass over a JSON text that checks
//! the grammar, nesting depth and duplicate keys, and reports the root's direct members as it
//! passes them; plus the string helpers built on the same byte rules ([`find_special`],
//! [`decode_string`]).
//!
//! Invariants: linear time (every byte examined a bounded number of times, strings scanned
//! eight bytes at a step), no recursion (an explicit stack of open containers), memory is that
//! stack and, per open object, its keys. It converts no number and builds no tree.

use super::{is_space, pointer_token, JsonIssue, Kind, MAX_DEPTH};
use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::Range;

/// A string read whole (by the scanner, or ahead of it by the prescan): what the scanner would
/// learn by reading it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadString {
    /// The opening quote.
    pub(crate) start: usize,
    /// Just past the closing quote.
    pub(crate) end: usize,
    /// It holds escapes.
    pub(crate) escaped: bool,
    /// Escapes a compact canonical writer would write differently (`\/`, `\u`).
    pub(crate) rewrites: usize,
}

/// A direct member of the scanned root container, reported as the scan passes it.
pub(crate) enum Member<'t> {
    /// A member of the root object: its decoded key, the span of its value, and whether the
    /// value is canonical: written exactly as a compact canonical writer (serde_json's, and
    /// the redactor's when it changes nothing) would write it — no whitespace between its
    /// tokens, no `\/` or `\uXXXX` escape in its strings and keys — so that copying it
    /// unchanged is the same as minifying it and writing its strings again.
    Key(Cow<'t, str>, Range<usize>, bool),
    /// An item of the root array: the span of its value.
    Item(Range<usize>),
}

/// Scan one complete document: the value, then nothing but whitespace. Reports the root's
/// direct members to `on_member` and returns the root's kind.
pub(crate) fn scan_document<'t>(
    text: &'t str,
    on_member: &mut dyn FnMut(Member<'t>),
) -> Result<Kind, JsonIssue> {
    scan_document_read(text, &[], on_member)
}

/// [`scan_document`], told which long strings were already read whole (by a
/// [`super::Prescan`], in order): it takes their ends and escapes from there instead of
/// reading them again. The result is the same as without them.
pub(crate) fn scan_document_read<'t>(
    text: &'t str,
    read: &[ReadString],
    on_member: &mut dyn FnMut(Member<'t>),
) -> Result<Kind, JsonIssue> {
    let mut scanner = Scanner::new(text);
    scanner.read = read;
    let kind = scanner.value(on_member)?;
    scanner.skip_space();
    if scanner.pos < text.len() {
        let (line, column) = scanner.line_column(scanner.pos);
        // A second complete value there is a second document; anything else is noise.
        let mut second = Scanner::new(&text[scanner.pos..]);
        return Err(match second.value(&mut |_| {}) {
            Ok(_) => JsonIssue::MultipleDocuments { line, column },
            Err(_) => JsonIssue::TrailingBytes { line, column },
        });
    }
    Ok(kind)
}

/// The keys of one open object: a short list while it is small, a set once it grows, so that
/// duplicate detection stays linear for objects of any size.
enum Keys<'t> {
    Few(Vec<Cow<'t, str>>),
    Many(HashSet<Cow<'t, str>>),
}

impl<'t> Keys<'t> {
    const FEW: usize = 16;

    /// Record `key`; false when it was already there.
    fn insert(&mut self, key: Cow<'t, str>) -> bool {
        match self {
            Keys::Few(list) => {
                if list.contains(&key) {
                    return false;
                }
                if list.len() < Self::FEW {
                    list.push(key);
                } else {
                    let mut set: HashSet<_> = list.drain(..).collect();
                    set.insert(key);
                    *self = Keys::Many(set);
                }
                true
            }
            Keys::Many(set) => set.insert(key),
        }
    }
}

enum Frame<'t> {
    Array { index: usize },
    Object { keys: Keys<'t>, key: Cow<'t, str> },
}

struct Scanner<'t, 'r> {
    text: &'t str,
    bytes: &'t [u8],
    pos: usize,
    /// Strings read whole already, in order; those before `pos` are behind the scanner.
    read: &'r [ReadString],
    stack: Vec<Frame<'t>>,
    /// How many places so far a compact canonical writer would write differently: runs of
    /// whitespace, and `\/` or `\u` escapes (see [`Member::Key`]).
    rewrites: usize,
}

type Scan<T> = Result<T, JsonIssue>;

impl<'t> Scanner<'t, '_> {
    fn new(text: &'t str) -> Scanner<'t, 'static> {
        Scanner {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            read: &[],
            stack: Vec::new(),
            rewrites: 0,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        let start = self.pos;
        while self.peek().is_some_and(is_space) {
            self.pos += 1;
        }
        if self.pos != start {
            self.rewrites += 1;
        }
    }

    /// 1-based line and byte column of `pos` (only computed for messages).
    fn line_column(&self, pos: usize) -> (usize, usize) {
        let before = &self.bytes[..pos.min(self.bytes.len())];
        let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        (line, pos - line_start + 1)
    }

    fn syntax<T>(&self, detail: &'static str) -> Scan<T> {
        let (line, column) = self.line_column(self.pos);
        Err(JsonIssue::Syntax {
            line,
            column,
            detail,
        })
    }

    /// The pointer of the place being read: one token per open container.
    fn pointer(&self) -> String {
        let mut out = String::new();
        for frame in &self.stack {
            out.push('/');
            match frame {
                Frame::Array { index } => out.push_str(&index.to_string()),
                Frame::Object { key, .. } => out.push_str(&pointer_token(key)),
            }
        }
        out
    }

    /// Read one value with everything inside it, iteratively.
    fn value(&mut self, on_member: &mut dyn FnMut(Member<'t>)) -> Scan<Kind> {
        let root = self.stack.len();
        let mut root_kind = None;
        // Where the current direct member of the root began, and the rewrites before it.
        let mut member_start = 0;
        let mut rewrites_before = 0;
        loop {
            // A value starts here.
            self.skip_space();
            let start = self.pos;
            if self.stack.len() == root + 1 {
                member_start = start;
                rewrites_before = self.rewrites;
            }
            let kind = match self.peek() {
                Some(b'{') => {
                    if self.open_object()? {
                        root_kind.get_or_insert(Kind::Object);
                        continue;
                    }
                    Kind::Object
                }
                Some(b'[') => {
                    if self.open_array()? {
                        root_kind.get_or_insert(Kind::Array);
                        continue;
                    }
                    Kind::Array
                }
                Some(b'"') => {
                    self.string()?;
                    Kind::String
                }
                Some(b'-' | b'0'..=b'9') => {
                    self.number()?;
                    Kind::Number
                }
                Some(b't') => self.literal(b"true", Kind::Bool)?,
                Some(b'f') => self.literal(b"false", Kind::Bool)?,
                Some(b'n') => self.literal(b"null", Kind::Null)?,
                Some(_) => return self.syntax("expected a value"),
                None => return self.syntax("unexpected end of input, expected a value"),
            };
            root_kind.get_or_insert(kind);
            // The value is complete; close whatever completes with it.
            loop {
                if self.stack.len() == root {
                    return Ok(root_kind.unwrap_or(kind));
                }
                if self.stack.len() == root + 1 {
                    self.report_member(root, member_start, rewrites_before, on_member);
                }
                self.skip_space();
                let next = self.peek();
                let in_array = match self.stack.last_mut() {
                    Some(Frame::Array { index }) => {
                        if next == Some(b',') {
                            *index += 1;
                        }
                        true
                    }
                    Some(Frame::Object { .. }) => false,
                    None => return Ok(root_kind.unwrap_or(kind)),
                };
                match (in_array, next) {
                    (_, Some(b',')) => {
                        self.pos += 1;
                        if !in_array {
                            self.skip_space();
                            let key = self.key()?;
                            self.record_key(key)?;
                            self.colon()?;
                        }
                        break;
                    }
                    (true, Some(b']')) | (false, Some(b'}')) => {
                        self.pos += 1;
                        self.stack.pop();
                    }
                    (true, _) => return self.syntax("expected ',' or ']' after an array item"),
                    (false, _) => return self.syntax("expected ',' or '}' after an object member"),
                }
            }
        }
    }

    /// Enter the object at `{`: `true` when it has a first member (its key and colon read, its
    /// frame pushed), `false` when it is empty (and read whole).
    #[inline]
    fn open_object(&mut self) -> Scan<bool> {
        self.open()?;
        self.pos += 1;
        self.skip_space();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(false);
        }
        let key = self.key()?;
        self.stack.push(Frame::Object {
            keys: Keys::Few(vec![key.clone()]),
            key,
        });
        self.colon()?;
        Ok(true)
    }

    /// Enter the array at `[`: `true` when it has a first item (its frame pushed), `false`
    /// when it is empty (and read whole).
    #[inline]
    fn open_array(&mut self) -> Scan<bool> {
        self.open()?;
        self.pos += 1;
        self.skip_space();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(false);
        }
        self.stack.push(Frame::Array { index: 0 });
        Ok(true)
    }

    /// Hand the direct member of the root (at `root` in the stack) that just ended to
    /// `on_member`: it began at `member_start`, after `rewrites_before` rewrites.
    #[inline]
    fn report_member(
        &self,
        root: usize,
        member_start: usize,
        rewrites_before: usize,
        on_member: &mut dyn FnMut(Member<'t>),
    ) {
        let span = member_start..self.pos;
        let canonical = self.rewrites == rewrites_before;
        match &self.stack[root] {
            Frame::Object { key, .. } => on_member(Member::Key(key.clone(), span, canonical)),
            Frame::Array { .. } => on_member(Member::Item(span)),
        }
    }

    /// Check the depth before entering a container.
    fn open(&self) -> Scan<()> {
        if self.stack.len() + 1 > MAX_DEPTH {
            return Err(JsonIssue::TooDeep {
                pointer: self.pointer(),
            });
        }
        Ok(())
    }

    /// Add `key` to the innermost object (the caller is inside one); a duplicate is an issue.
    fn record_key(&mut self, key: Cow<'t, str>) -> Scan<()> {
        if let Some(Frame::Object { keys, key: current }) = self.stack.last_mut() {
            if keys.insert(key.clone()) {
                *current = key;
                return Ok(());
            }
            // The pointer names the object holding the duplicate, not the key before it.
            self.stack.pop();
            return Err(JsonIssue::DuplicateKey {
                pointer: self.pointer(),
                key: key.into_owned(),
            });
        }
        Ok(())
    }

    fn colon(&mut self) -> Scan<()> {
        self.skip_space();
        if self.peek() != Some(b':') {
            return self.syntax("expected ':' after an object key");
        }
        self.pos += 1;
        Ok(())
    }

    fn literal(&mut self, word: &[u8], kind: Kind) -> Scan<Kind> {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(kind)
        } else {
            self.syntax("expected a value")
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, checked, never converted.
    fn number(&mut self) -> Scan<()> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return self.syntax("invalid number"),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return self.syntax("invalid number: expected a digit after '.'");
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return self.syntax("invalid number: expected a digit in the exponent");
            }
        }
        Ok(())
    }

    /// A key: a string, decoded (borrowed unless it holds escapes).
    fn key(&mut self) -> Scan<Cow<'t, str>> {
        if self.peek() != Some(b'"') {
            return self.syntax("expected a string key");
        }
        let start = self.pos + 1;
        let escaped = self.string()?;
        let inner = &self.text[start..self.pos - 1];
        Ok(if escaped {
            Cow::Owned(decode_string(inner))
        } else {
            Cow::Borrowed(inner)
        })
    }

    /// A string starting at the opening quote; returns whether it held escapes.
    fn string(&mut self) -> Scan<bool> {
        if let Some(read) = self.read_string() {
            self.pos = read.end;
            self.rewrites += read.rewrites;
            return Ok(read.escaped);
        }
        self.pos += 1;
        let mut escaped = false;
        loop {
            let Some(at) = find_special(self.bytes, self.pos) else {
                self.pos = self.bytes.len();
                return self.syntax("unterminated string");
            };
            self.pos = at;
            match self.bytes[at] {
                b'"' => {
                    self.pos += 1;
                    return Ok(escaped);
                }
                b'\\' => {
                    escaped = true;
                    self.escape()?;
                }
                _ => return self.syntax("control character in a string (escape it)"),
            }
        }
    }

    /// The string opening at `pos`, if it was read whole already.
    fn read_string(&mut self) -> Option<ReadString> {
        while let Some((first, rest)) = self.read.split_first() {
            if first.start >= self.pos {
                let here = first.start == self.pos && first.end <= self.bytes.len();
                return here.then_some(*first);
            }
            self.read = rest;
        }
        None
    }

    /// One escape sequence at `pos` (which holds the backslash).
    fn escape(&mut self) -> Scan<()> {
        match escape_at(self.bytes, self.pos) {
            Ok((len, rewrite)) => {
                self.pos += len;
                self.rewrites += usize::from(rewrite);
                Ok(())
            }
            Err((at, detail)) => {
                self.pos = at;
                self.syntax(detail)
            }
        }
    }
}

/// The escape sequence at `pos` (which holds the backslash): its length and whether a
/// compact canonical writer would write it differently (`\/`, `\u`, see [`Member::Key`]);
/// or where it goes wrong and how.
pub(super) fn escape_at(bytes: &[u8], pos: usize) -> Result<(usize, bool), (usize, &'static str)> {
    const LONE: &str = "lone surrogate in a \\u escape";
    match bytes.get(pos + 1) {
        Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') => Ok((2, false)),
        Some(b'/') => Ok((2, true)),
        Some(b'u') => match hex4(bytes, pos + 2)? {
            0xD800..=0xDBFF => {
                let low = if bytes.get(pos + 6..pos + 8) == Some(b"\\u") {
                    hex4(bytes, pos + 8)?
                } else {
                    0
                };
                if (0xDC00..=0xDFFF).contains(&low) {
                    Ok((12, true))
                } else {
                    Err((pos + 6, LONE))
                }
            }
            0xDC00..=0xDFFF => Err((pos + 6, LONE)),
            _ => Ok((6, true)),
        },
        _ => Err((pos, "invalid escape in a string")),
    }
}

/// The four hex digits at `at` as a UTF-16 unit.
fn hex4(bytes: &[u8], at: usize) -> Result<u32, (usize, &'static str)> {
    match bytes.get(at..at + 4) {
        Some(digits) if digits.iter().all(u8::is_ascii_hexdigit) => {
            Ok(digits.iter().fold(0, |unit, &d| {
                unit * 16 + char::from(d).to_digit(16).unwrap_or(0)
            }))
        }
        _ => Err((at, "invalid \\u escape: expected four hex digits")),
    }
}

/// Bytes [`find_special`] checks at a step before it looks for the exact one.
const SPECIAL_BLOCK: usize = 32;

/// The first byte at or after `from` that is `"`, `\` or a control character: the bytes a
/// string scan must stop at. Eight bytes at a step: the classic "has a zero byte" bit trick,
/// whose lowest flagged byte is always exact, so the first match is found without false hits.
pub(crate) fn find_special(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut i = from;
    // Long runs first, a block at a time: a fixed-size fold the compiler turns into vector
    // compares (docs/PERFORMANCE.md, "the string scan"); the word loop below then finds the
    // exact byte in the block that has one.
    while let Some(block) = bytes.get(i..i + SPECIAL_BLOCK) {
        let hit = block.iter().fold(false, |hit, &b| {
            hit | (b == b'"') | (b == b'\\') | (b < 0x20)
        });
        if hit {
            break;
        }
        i += SPECIAL_BLOCK;
    }
    while i + 8 <= bytes.len() {
        let mut chunk = [0u8; 8];
        chunk.copy_from_slice(&bytes[i..i + 8]);
        let x = u64::from_le_bytes(chunk);
        let quote = x ^ (ONES * u64::from(b'"'));
        let backslash = x ^ (ONES * u64::from(b'\\'));
        let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
        let control = x.wrapping_sub(ONES * 0x20) & !x & HIGHS;
        let hits = zero_byte(quote) | zero_byte(backslash) | control;
        if hits != 0 {
            return Some(i + (hits.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    bytes[i.min(bytes.len())..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|p| i + p)
}

/// Decode the inside of a JSON string the scanner accepted (escapes valid, surrogates paired).
pub(crate) fn decode_string(inner: &str) -> String {
    let mut out = String::with_capacity(inner.len());
    let mut rest = inner;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let esc = &rest[at..];
        let (ch, used) = match esc.as_bytes().get(1) {
            Some(b'"') => ('"', 2),
            Some(b'\\') => ('\\', 2),
            Some(b'/') => ('/', 2),
            Some(b'b') => ('\u{8}', 2),
            Some(b'f') => ('\u{c}', 2),
            Some(b'n') => ('\n', 2),
            Some(b'r') => ('\r', 2),
            Some(b't') => ('\t', 2),
            Some(b'u') => {
                let unit =
                    |s: &str| u32::from_str_radix(s.get(2..6).unwrap_or("0"), 16).unwrap_or(0);
                let high = unit(esc);
                if (0xD800..=0xDBFF).contains(&high) {
                    let low = unit(&esc[6..]);
                    let code =
                        0x10000 + ((high - 0xD800) << 10) + (low.wrapping_sub(0xDC00) & 0x3FF);
                    (char::from_u32(code).unwrap_or('\u{FFFD}'), 12)
                } else {
                    (char::from_u32(high).unwrap_or('\u{FFFD}'), 6)
                }
            }
            _ => ('\u{FFFD}', 1),
        };
        out.push(ch);
        rest = &esc[used.min(esc.len())..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_special_finds_the_first_stop_byte_at_every_offset() {
        // Past three blocks, so that the block step, the word step and the tail all find it.
        for len in 0..(3 * SPECIAL_BLOCK + 9) {
            for at in 0..len {
                for stop in [b'"', b'\\', 0x00, 0x1f] {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = stop;
                    // Bytes just above the thresholds must not be hits.
                    if at + 1 < len {
                        bytes[at + 1] = 0x20;
                    }
                    assert_eq!(find_special(&bytes, 0), Some(at), "len {len} at {at}");
                    for from in [1, 7, SPECIAL_BLOCK - 1, SPECIAL_BLOCK + 3] {
                        let want = (from <= at).then_some(at);
                        assert_eq!(
                            find_special(&bytes, from),
                            want,
                            "len {len} at {at} from {from}"
                        );
                    }
                }
            }
            assert_eq!(find_special(&vec![0xC3; len], 0), None);
            assert_eq!(find_special(&vec![b'!'; len], 3), None);
        }
    }

    #[test]
    fn decode_string_handles_every_escape() {
        assert_eq!(
            decode_string(r#"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00"#),
            "a\"b\\c/d\u{8}\u{c}\n\r\té😀"
        );
    }
}
