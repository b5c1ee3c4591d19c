//! Reading an answer while it arrives, so that little is left to do when it has.
//!
//! The strict reader needs the whole document: the same bytes could still turn out to be two
//! documents, or be cut short. But most of its work does not depend on what comes later: that
//! the bytes are UTF-8, and where each string ends and whether its escapes are valid. A
//! [`Prescan`] is fed the growing buffer as the adapter writes it (a bounded step per read, so
//! the supervisor's deadline never waits on it) and does exactly that work on the new bytes.
//! When the answer is complete, [`super::check_object_prescanned`] takes the proof instead of
//! checking the UTF-8 again, and its scanner jumps over every long string the prescan already
//! read — so after end of file a 64 MiB `output` string costs a few microseconds to judge,
//! not two passes over 64 MiB. Nothing is decided early: the verdict is still the scanner's,
//! on the whole document, and nothing is printed before it.
//!
//! What the scanner is told is a fact about the bytes, not a guess about the grammar: that a
//! string opening at a given quote ends at a given position, with or without escapes. That
//! holds whatever came before the quote, so a prescan confused by a malformed document (a
//! quote it took for the start of a string that the grammar never reaches) can only report
//! strings the scanner never asks about. The prescan stops at the first byte it cannot read
//! as part of a valid string or as UTF-8; from there the scanner does everything itself, as
//! it does for any document nobody prescanned.

use super::scan::{escape_at, find_special, ReadString};

/// Strings at least this long (quotes included) are recorded for the scanner to jump over.
/// Shorter ones cost it less to read again than to look up; the record stays small (at most
/// one entry of 32 bytes per 4 KiB of answer).
const LONG_STRING: usize = 4096;

/// The longest escape sequence (`\uD83D\uDE00`): an escape closer than this to the end of what
/// arrived waits for more bytes.
const LONGEST_ESCAPE: usize = 12;

/// A string being read: where it opened, what it held so far.
#[derive(Debug, Clone, Copy)]
struct Open {
    start: usize,
    escaped: bool,
    rewrites: usize,
}

/// The work done on an answer so far. Feed it with [`Prescan::advance`] after each read; ask
/// the strict reader to use it with [`super::check_object_prescanned`].
#[derive(Debug)]
pub struct Prescan {
    /// Strings at least this long are recorded ([`LONG_STRING`]; less in tests and fuzzing,
    /// so that small inputs exercise the jumps).
    long: usize,
    /// The bytes before this are UTF-8 (it ends on a character boundary).
    utf8: usize,
    /// The string pass looks at this byte next.
    pos: usize,
    /// The string being read, if the pass is inside one.
    open: Option<Open>,
    /// The pass met a byte that is not part of a valid string (or of UTF-8): it stopped.
    stopped: bool,
    /// Long strings read, in order.
    strings: Vec<ReadString>,
    /// The buffer of the last call: its address and length. The proof is only about those
    /// bytes (see [`Prescan::about`]).
    seen: (usize, usize),
}

impl Default for Prescan {
    fn default() -> Prescan {
        Prescan::recording_from(LONG_STRING)
    }
}

impl Prescan {
    pub fn new() -> Prescan {
        Prescan::default()
    }

    /// A prescan that records strings of at least `long` bytes, quotes included (the
    /// default is [`LONG_STRING`]). For tests and fuzzing: a short threshold makes a small
    /// input use the recorded strings.
    #[doc(hidden)]
    pub fn recording_from(long: usize) -> Prescan {
        Prescan {
            long,
            utf8: 0,
            pos: 0,
            open: None,
            stopped: false,
            strings: Vec::new(),
            seen: (0, 0),
        }
    }

    /// Read what is new in `bytes`: the answer so far, starting with everything an earlier
    /// call saw, unchanged (a buffer that grew: it may have moved).
    pub fn advance(&mut self, bytes: &[u8]) {
        self.seen = (bytes.as_ptr() as usize, bytes.len());
        if bytes.len() < self.utf8.max(self.pos) {
            // Not the bytes it saw grow: what it read is about something else.
            self.strings.clear();
            self.stopped = true;
        }
        if self.stopped {
            return;
        }
        match std::str::from_utf8(&bytes[self.utf8..]) {
            Ok(_) => self.utf8 = bytes.len(),
            // Cut in the middle of a character: the rest of it comes with the next read.
            Err(e) if e.error_len().is_none() => self.utf8 += e.valid_up_to(),
            Err(_) => {
                self.stopped = true;
                return;
            }
        }
        self.strings_in(bytes);
    }

    /// The string pass over `bytes[self.pos..]`.
    fn strings_in(&mut self, bytes: &[u8]) {
        while self.pos < bytes.len() {
            let Some(open) = &mut self.open else {
                // Between strings: only a quote matters to this pass.
                match bytes[self.pos..].iter().position(|&b| b == b'"') {
                    Some(at) => {
                        self.open = Some(Open {
                            start: self.pos + at,
                            escaped: false,
                            rewrites: 0,
                        });
                        self.pos += at + 1;
                    }
                    None => self.pos = bytes.len(),
                }
                continue;
            };
            let Some(at) = find_special(bytes, self.pos) else {
                self.pos = bytes.len();
                return;
            };
            match bytes[at] {
                b'"' => {
                    let end = at + 1;
                    if end - open.start >= self.long {
                        self.strings.push(ReadString {
                            start: open.start,
                            end,
                            escaped: open.escaped,
                            rewrites: open.rewrites,
                        });
                    }
                    self.open = None;
                    self.pos = end;
                }
                // An escape that reads as valid here is the same escape whatever follows.
                b'\\' => match escape_at(bytes, at) {
                    Ok((len, rewrite)) => {
                        open.escaped = true;
                        open.rewrites += usize::from(rewrite);
                        self.pos = at + len;
                    }
                    Err(_) if bytes.len() - at < LONGEST_ESCAPE => {
                        // Perhaps only cut short: read it again when more has arrived.
                        self.pos = at;
                        return;
                    }
                    Err(_) => {
                        self.stopped = true;
                        return;
                    }
                },
                // A raw control character: the scanner will say so.
                _ => {
                    self.stopped = true;
                    return;
                }
            }
        }
    }

    /// Whether this prescan's work is about `bytes`: the buffer of the last call, unchanged
    /// since. Its address and length must be the ones last seen; that nothing wrote to it
    /// in between is the caller's promise (the supervisor's buffer is only appended to, and
    /// only while this prescan is fed; debug builds check the proof itself).
    fn about(&self, bytes: &[u8]) -> bool {
        self.seen == (bytes.as_ptr() as usize, bytes.len())
    }

    /// `bytes` as text, checking only what the prescan did not; the error is the offset of
    /// the first byte that is not UTF-8.
    // The one `unsafe` outside `ptd-sys`: the prescan's reason to exist is not to read a large
    // answer's UTF-8 twice (docs/PERFORMANCE.md weighs it).
    #[allow(unsafe_code)]
    pub(crate) fn text<'b>(&self, bytes: &'b [u8]) -> Result<&'b str, usize> {
        if !self.about(bytes) || self.stopped {
            return std::str::from_utf8(bytes).map_err(|e| e.valid_up_to());
        }
        std::str::from_utf8(&bytes[self.utf8..]).map_err(|e| self.utf8 + e.valid_up_to())?;
        debug_assert!(std::str::from_utf8(bytes).is_ok(), "the prescan's proof");
        // SAFETY: `bytes[..self.utf8]` was checked as UTF-8 by `advance` (which only moves
        // `utf8` over complete characters it checked, and stops for good at an invalid one);
        // `about` says these are the same bytes, and the rest was checked just above. Two
        // UTF-8 texts end to end, the first ending on a character boundary, are UTF-8.
        Ok(unsafe { std::str::from_utf8_unchecked(bytes) })
    }

    /// The long strings read whole in `bytes`, in order (none when the prescan is about
    /// other bytes).
    pub(crate) fn strings(&self, bytes: &[u8]) -> &[ReadString] {
        if self.about(bytes) {
            &self.strings
        } else {
            &[]
        }
    }
}

#[cfg(test)]
mod tests;
