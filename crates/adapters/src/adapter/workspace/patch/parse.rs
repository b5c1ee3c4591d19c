//! The unified-diff reader of `workspace.apply_patch`: patch text → file diffs, or the line
//! where it stops making sense.
//!
//! Written here rather than taken from a crate: the crates that parse unified diffs (`patch`,
//! its forks `gitpatch` and `patch-apply`; `diffy`) either read one file diff only (`diffy`),
//! keep a single "no newline" flag per file instead of one per side, do not hold a hunk to the
//! line counts of its header, drop line terminators (so a CRLF line and an LF line look alike),
//! or skip git's extended headers instead of understanding them — and each of those would make
//! a patch apply differently from what it says. What is read:
//!
//! - File diffs in `git diff` style (`diff --git a/X b/Y`, then `old mode`/`new mode`, `new file
//!   mode`, `deleted file mode`, `rename from`/`rename to`, `similarity index`, `index`) or plain
//!   `--- X` / `+++ Y` pairs, each followed by hunks. Text before the first file diff and between
//!   file diffs (a commit message, a mail header, `-- ` and a signature) is commentary. Names
//!   may be C-quoted as git quotes them; a tab ends a name (a timestamp follows); one trailing
//!   `\r` of a header line is dropped; `a/` (old side) and `b/` (new side) are removed, as
//!   `git apply -p1` does; `/dev/null` is the missing side of a file added or deleted.
//! - Hunks `@@ -A[,B] +C[,D] @@`: exactly B old and D new lines (` ` context, `-` removed,
//!   `+` added; an empty line is an empty context line), each with its terminator as written
//!   (a `\r` before the `\n` is part of the line). `\ No newline at end of file` takes the `\n`
//!   off the line before it; the patch's own last line needs no `\n`. Hunks of a file must be
//!   in order and must not overlap.
//! - Refused (`patch_invalid`, with the line): binary patches (`GIT binary patch`, `Binary
//!   files … differ`), mode changes, copies, symlinks and submodules (modes 120000, 160000), a
//!   hunk without a file header, a hunk that is shorter or longer than its header says, a file
//!   named by two file diffs, a NUL byte, and a patch without any file diff.

use std::borrow::Cow;
use std::collections::HashMap;

/// Why the patch cannot be read: the 1-based line, and a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invalid {
    /// `None` when no one line is to blame (an empty patch).
    pub line: Option<usize>,
    pub message: String,
}

fn invalid(line: usize, message: impl Into<String>) -> Invalid {
    Invalid {
        line: Some(line),
        message: message.into(),
    }
}

/// One line of a hunk: its text without the `\n` (a `\r` stays), and whether the `\n` is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Line<'a> {
    pub text: &'a [u8],
    pub newline: bool,
}

/// What a hunk line does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Context,
    Remove,
    Add,
}

/// One hunk: where its old lines start (0-based index of the first old line, or of the line
/// they are inserted before when it has none) and its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hunk<'a> {
    /// Line of the `@@` header.
    pub line: usize,
    pub old_at: usize,
    pub old_count: usize,
    pub lines: Vec<(Kind, Line<'a>)>,
}

/// One file diff. `old: None` adds `new`; `new: None` deletes `old`; different names rename.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileDiff<'a> {
    /// Line where the file diff starts.
    pub line: usize,
    pub old: Option<String>,
    pub new: Option<String>,
    /// `new file mode 100755`.
    pub executable: bool,
    pub hunks: Vec<Hunk<'a>>,
}

/// The patch's lines, each with its terminator, numbered from 1.
struct Lines<'a> {
    all: Vec<&'a [u8]>,
    next: usize,
}

impl<'a> Lines<'a> {
    fn new(text: &'a [u8]) -> Lines<'a> {
        Lines {
            all: text.split_inclusive(|&b| b == b'\n').collect(),
            next: 0,
        }
    }

    fn peek(&self) -> Option<&'a [u8]> {
        self.all.get(self.next).copied()
    }

    fn peek2(&self) -> Option<&'a [u8]> {
        self.all.get(self.next + 1).copied()
    }

    /// The 1-based number of the line `peek` shows.
    fn number(&self) -> usize {
        self.next + 1
    }

    fn take(&mut self) -> Option<&'a [u8]> {
        let line = self.peek()?;
        self.next += 1;
        Some(line)
    }
}

/// A header line without its terminator (`\n`, and one `\r` before it).
fn header(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn is_file_header(lines: &Lines<'_>) -> bool {
    match lines.peek() {
        Some(l) if l.starts_with(b"diff --git ") => true,
        Some(l) if l.starts_with(b"--- ") => lines.peek2().is_some_and(|n| n.starts_with(b"+++ ")),
        _ => false,
    }
}

fn is_binary(line: &[u8]) -> bool {
    let line = header(line);
    line.starts_with(b"GIT binary patch")
        || (line.starts_with(b"Binary files ") && line.ends_with(b" differ"))
}

/// Read the whole patch.
pub(crate) fn parse(text: &str) -> Result<Vec<FileDiff<'_>>, Invalid> {
    let bytes = text.as_bytes();
    let mut lines = Lines::new(bytes);
    if let Some(at) = lines.all.iter().position(|l| l.contains(&0)) {
        return Err(invalid(at + 1, "the patch contains a NUL byte"));
    }
    let mut files: Vec<FileDiff<'_>> = Vec::new();
    // Every name a file diff used (as the containment check will see it) → its line.
    let mut named: HashMap<String, usize> = HashMap::new();
    while let Some(line) = lines.peek() {
        if is_file_header(&lines) {
            let file = file_diff(&mut lines)?;
            let mut mine: Vec<String> = [&file.old, &file.new]
                .into_iter()
                .flatten()
                .map(|n| normalise(n))
                .collect();
            mine.dedup();
            for name in mine {
                if let Some(first) = named.get(&name) {
                    return Err(invalid(
                        file.line,
                        format!(
                            "the file diff names {} again (line {first} named it already); a \
                             patch may change each file once",
                            super::super::quote(&name),
                        ),
                    ));
                }
                named.insert(name, file.line);
            }
            files.push(file);
        } else if line.starts_with(b"@@ ") {
            return Err(invalid(
                lines.number(),
                "a hunk without a file header (`--- a/PATH` and `+++ b/PATH` before it)",
            ));
        } else if is_binary(line) {
            return Err(binary(lines.number()));
        } else {
            lines.take();
        }
    }
    if files.is_empty() {
        return Err(Invalid {
            line: None,
            message: "the patch contains no file diff (no `--- a/PATH` / `+++ b/PATH` header)"
                .into(),
        });
    }
    Ok(files)
}

fn binary(line: usize) -> Invalid {
    invalid(
        line,
        "binary patches are not applied; only text diffs are (use workspace.write for the file)",
    )
}

/// A name as the containment check will see it (`./a//b` is `a/b`), for comparing.
fn normalise(name: &str) -> String {
    name.split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// What the extended header lines of a git file diff said.
#[derive(Default)]
struct GitHeader {
    added: bool,
    deleted: bool,
    executable: bool,
    rename_from: Option<String>,
    rename_to: Option<String>,
}

/// One file diff, starting at a file header.
fn file_diff<'a>(lines: &mut Lines<'a>) -> Result<FileDiff<'a>, Invalid> {
    let start = lines.number();
    let mut git = None;
    let first = lines.peek().unwrap_or_default();
    if first.starts_with(b"diff --git ") {
        lines.take();
        git = Some((first, git_header(lines)?));
    }
    let (mut old, mut new) = (None, None);
    let mut sides_given = false;
    if lines.peek().is_some_and(|l| l.starts_with(b"--- "))
        && lines.peek2().is_some_and(|l| l.starts_with(b"+++ "))
    {
        let at = lines.number();
        let old_line = lines.take().unwrap_or_default();
        let new_line = lines.take().unwrap_or_default();
        old = side(&header(old_line)[4..], b"a/", at)?;
        new = side(&header(new_line)[4..], b"b/", at + 1)?;
        if old.is_none() && new.is_none() {
            return Err(invalid(at, "both sides of the file diff are /dev/null"));
        }
        sides_given = true;
    }
    let mut executable = false;
    if let Some((diff_line, head)) = &git {
        executable = head.executable;
        if !sides_given {
            // No hunks follow: the names come from the rename lines or the `diff --git` line.
            let (a, b) = match (&head.rename_from, &head.rename_to) {
                (Some(from), Some(to)) => (from.clone(), to.clone()),
                _ => git_names(header(diff_line)).ok_or_else(|| {
                    invalid(
                        start,
                        "the `diff --git` line does not name one file as a/X b/X",
                    )
                })?,
            };
            old = (!head.added).then_some(a);
            new = (!head.deleted).then_some(b);
        } else {
            if head.added && old.is_some() {
                return Err(invalid(
                    start,
                    "`new file mode` with an old side that is not /dev/null",
                ));
            }
            if head.deleted && new.is_some() {
                return Err(invalid(
                    start,
                    "`deleted file mode` with a new side that is not /dev/null",
                ));
            }
        }
        if head.added && head.deleted {
            return Err(invalid(
                start,
                "a file diff cannot both add and delete its file",
            ));
        }
    }
    let mut hunks: Vec<Hunk<'a>> = Vec::new();
    while lines.peek().is_some_and(|l| l.starts_with(b"@@ ")) {
        let hunk = hunk(lines)?;
        if let Some(prev) = hunks.last() {
            if hunk.old_at < prev.old_at + prev.old_count {
                return Err(invalid(
                    hunk.line,
                    format!(
                        "the hunk overlaps the one at line {} or comes before it; hunks must be in \
                         file order",
                        prev.line
                    ),
                ));
            }
        }
        hunks.push(hunk);
    }
    if let Some(line) = lines.peek() {
        if is_binary(line) {
            return Err(binary(lines.number()));
        }
    }
    let renamed = old.is_some() && new.is_some() && old != new;
    if hunks.is_empty() && git.is_none() {
        return Err(invalid(start, "the file diff has no hunk"));
    }
    if hunks.is_empty() && old.is_some() && new.is_some() && !renamed {
        return Err(invalid(
            start,
            "the file diff changes nothing (no hunk, no rename)",
        ));
    }
    Ok(FileDiff {
        line: start,
        old,
        new,
        executable,
        hunks,
    })
}

/// The extended header lines after `diff --git`, up to the `---` line, a hunk or the next file.
fn git_header(lines: &mut Lines<'_>) -> Result<GitHeader, Invalid> {
    let mut head = GitHeader::default();
    while let Some(raw) = lines.peek() {
        let at = lines.number();
        let line = header(raw);
        let mode_of = |prefix: &[u8]| line.strip_prefix(prefix).map(|m| m.to_vec());
        if raw.starts_with(b"diff --git ") || raw.starts_with(b"--- ") || raw.starts_with(b"@@ ") {
            break;
        } else if is_binary(raw) {
            return Err(binary(at));
        } else if line.starts_with(b"old mode ") || line.starts_with(b"new mode ") {
            return Err(invalid(
                at,
                "mode changes are not applied; only file contents are",
            ));
        } else if line.starts_with(b"copy from ") || line.starts_with(b"copy to ") {
            return Err(invalid(
                at,
                "copies are not applied; add the copy as a new file",
            ));
        } else if let Some(mode) = mode_of(b"new file mode ") {
            head.added = true;
            head.executable = check_mode(&mode, at)?;
        } else if let Some(mode) = mode_of(b"deleted file mode ") {
            head.deleted = true;
            check_mode(&mode, at)?;
        } else if let Some(name) = line.strip_prefix(b"rename from ") {
            head.rename_from = Some(name_of(name, at)?);
        } else if let Some(name) = line.strip_prefix(b"rename to ") {
            head.rename_to = Some(name_of(name, at)?);
        } else if let Some(rest) = line.strip_prefix(b"index ") {
            if let Some(mode) = rest.split(|&b| b == b' ').nth(1) {
                check_mode(mode, at)?;
            }
        } else if line.starts_with(b"similarity index ")
            || line.starts_with(b"dissimilarity index ")
        {
        } else {
            break;
        }
        lines.take();
    }
    if head.rename_from.is_some() != head.rename_to.is_some() {
        return Err(invalid(
            lines.number(),
            "`rename from` without `rename to`, or the reverse",
        ));
    }
    Ok(head)
}

/// A git file mode: regular (`100644`) or executable (`100755`, true); anything else (a symlink
/// `120000`, a submodule `160000`) is refused.
fn check_mode(mode: &[u8], at: usize) -> Result<bool, Invalid> {
    match mode {
        b"100644" => Ok(false),
        b"100755" => Ok(true),
        b"120000" => Err(invalid(
            at,
            "symlinks are not applied; only regular files are",
        )),
        b"160000" => Err(invalid(
            at,
            "submodules are not applied; only regular files are",
        )),
        _ => Err(invalid(at, "an unknown file mode")),
    }
}

/// The name on a `---`/`+++` line (`None`: `/dev/null`), less its side's prefix.
fn side(field: &[u8], prefix: &[u8], at: usize) -> Result<Option<String>, Invalid> {
    // A tab ends the name (a timestamp may follow, and git adds one after a name with a space);
    // a quoted name has its tabs as `\t`, so the first raw tab ends it too.
    let field = field.split(|&b| b == b'\t').next().unwrap_or_default();
    if field == b"/dev/null" {
        return Ok(None);
    }
    let name = name_of(field, at)?;
    Ok(Some(
        match name.strip_prefix(std::str::from_utf8(prefix).unwrap_or("")) {
            Some(rest) => rest.to_owned(),
            None => name,
        },
    ))
}

/// A file name as written: bare, or C-quoted as git quotes it (`"a/caf\303\251"`).
fn name_of(field: &[u8], at: usize) -> Result<String, Invalid> {
    let bytes: Cow<'_, [u8]> = if field.first() == Some(&b'"') {
        Cow::Owned(unquote(field).ok_or_else(|| invalid(at, "a badly quoted file name"))?)
    } else {
        Cow::Borrowed(field)
    };
    if bytes.is_empty() {
        return Err(invalid(at, "an empty file name"));
    }
    String::from_utf8(bytes.into_owned()).map_err(|_| invalid(at, "a file name that is not UTF-8"))
}

/// Git's C quoting: `\\ \" \a \b \f \n \r \t \v` and three octal digits; the closing quote
/// must end the field.
fn unquote(field: &[u8]) -> Option<Vec<u8>> {
    let inner = field.strip_prefix(b"\"")?;
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        match inner[i] {
            b'"' => return (i + 1 == inner.len()).then_some(out),
            b'\\' => {
                let c = *inner.get(i + 1)?;
                i += 2;
                out.push(match c {
                    b'\\' => b'\\',
                    b'"' => b'"',
                    b'a' => 0x07,
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'v' => 0x0b,
                    b'0'..=b'3' => {
                        let digits = inner.get(i..i + 2)?;
                        if !digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                            return None;
                        }
                        i += 2;
                        (c - b'0') * 64 + (digits[0] - b'0') * 8 + (digits[1] - b'0')
                    }
                    _ => return None,
                });
                continue;
            }
            b => out.push(b),
        }
        i += 1;
    }
    None
}

/// The one name of `diff --git a/X b/X` (both halves the same), for a file diff without hunks.
fn git_names(line: &[u8]) -> Option<(String, String)> {
    let rest = line.strip_prefix(b"diff --git ")?;
    if rest.first() == Some(&b'"') {
        // `"a/x y" "b/x y"`: two quoted names.
        let split = rest.windows(3).position(|w| w == b"\" \"")? + 1;
        let a = name_of(&rest[..split], 0).ok()?;
        let b = name_of(&rest[split + 1..], 0).ok()?;
        let (a, b) = (
            a.strip_prefix("a/")?.to_owned(),
            b.strip_prefix("b/")?.to_owned(),
        );
        return (a == b).then_some((a, b));
    }
    // `a/X b/X`: the halves have the same length.
    if rest.len() < 5 || rest.len() % 2 == 0 {
        return None;
    }
    let half = (rest.len() - 1) / 2;
    let (a, b) = (&rest[..half], &rest[half + 1..]);
    let a = std::str::from_utf8(a.strip_prefix(b"a/")?).ok()?;
    let b = std::str::from_utf8(b.strip_prefix(b"b/")?).ok()?;
    (a == b && rest[half] == b' ' && !a.is_empty()).then(|| (a.to_owned(), b.to_owned()))
}

/// `A[,B]` of a hunk header.
fn range(text: &[u8]) -> Option<(usize, usize)> {
    let number = |t: &[u8]| -> Option<usize> {
        if t.is_empty() || t.len() > 10 || !t.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(t).ok()?.parse().ok()
    };
    match text.iter().position(|&b| b == b',') {
        Some(comma) => Some((number(&text[..comma])?, number(&text[comma + 1..])?)),
        None => Some((number(text)?, 1)),
    }
}

/// One hunk, at its `@@` line.
fn hunk<'a>(lines: &mut Lines<'a>) -> Result<Hunk<'a>, Invalid> {
    let at = lines.number();
    let head = header(lines.take().unwrap_or_default());
    let bad = || invalid(at, "a hunk header that is not `@@ -A,B +C,D @@`");
    let rest = head.strip_prefix(b"@@ -").ok_or_else(bad)?;
    let end = rest.windows(3).position(|w| w == b" @@").ok_or_else(bad)?;
    let mut ranges = rest[..end].split(|&b| b == b' ');
    let (old_start, old_count) = ranges.next().and_then(range).ok_or_else(bad)?;
    let new = ranges
        .next()
        .and_then(|r| r.strip_prefix(b"+"))
        .ok_or_else(bad)?;
    let (_, new_count) = range(new).ok_or_else(bad)?;
    if ranges.next().is_some() || (old_start == 0 && old_count > 0) {
        return Err(bad());
    }
    // With no old lines, A is the line they go after.
    let old_at = if old_count == 0 {
        old_start
    } else {
        old_start - 1
    };
    let (mut old_left, mut new_left) = (old_count, new_count);
    let mut out: Vec<(Kind, Line<'a>)> = Vec::new();
    while old_left > 0 || new_left > 0 {
        let number = lines.number();
        let Some(raw) = lines.peek() else {
            return Err(invalid(
                at,
                format!(
                    "the patch ends inside the hunk at line {at}: {old_left} old and {new_left} \
                     new lines are missing"
                ),
            ));
        };
        let (kind, body) = match raw.first() {
            Some(b' ') => (Kind::Context, &raw[1..]),
            Some(b'-') => (Kind::Remove, &raw[1..]),
            Some(b'+') => (Kind::Add, &raw[1..]),
            // An empty context line whose space an editor took away.
            Some(b'\n') => (Kind::Context, raw),
            Some(b'\r') if raw == b"\r\n" => (Kind::Context, raw),
            Some(b'\\') => {
                lines.take();
                no_newline(&mut out, number)?;
                continue;
            }
            _ => {
                return Err(invalid(
                    number,
                    format!(
                        "not a hunk line (` `, `-`, `+` or `\\`), but the hunk at line {at} still \
                         needs {old_left} old and {new_left} new lines"
                    ),
                ))
            }
        };
        let uses_old = kind != Kind::Add;
        let uses_new = kind != Kind::Remove;
        if (uses_old && old_left == 0) || (uses_new && new_left == 0) {
            return Err(invalid(
                number,
                format!("the hunk at line {at} has more lines than its header counts"),
            ));
        }
        old_left -= usize::from(uses_old);
        new_left -= usize::from(uses_new);
        lines.take();
        // The patch's own last line may lack its `\n`: that is the patch's, not the file's.
        let text = body.strip_suffix(b"\n").unwrap_or(body);
        out.push((
            kind,
            Line {
                text,
                newline: true,
            },
        ));
    }
    // Markers for the last lines.
    while lines.peek().is_some_and(|l| l.starts_with(b"\\")) {
        let number = lines.number();
        lines.take();
        no_newline(&mut out, number)?;
    }
    if let Some(next) = lines.peek() {
        let signature = matches!(header(next), b"--" | b"-- ");
        let header_follows = is_file_header(lines);
        if !signature && !header_follows && matches!(next.first(), Some(b' ' | b'+' | b'-')) {
            return Err(invalid(
                lines.number(),
                format!("the hunk at line {at} has more lines than its header counts"),
            ));
        }
    }
    check_last_lines(&out, at)?;
    Ok(Hunk {
        line: at,
        old_at,
        old_count,
        lines: out,
    })
}

/// `\ No newline at end of file`: the line before it has no `\n`.
fn no_newline(out: &mut [(Kind, Line<'_>)], number: usize) -> Result<(), Invalid> {
    match out.last_mut() {
        Some((_, line)) if line.newline => {
            line.newline = false;
            Ok(())
        }
        _ => Err(invalid(
            number,
            "`\\ No newline at end of file` must follow a hunk line, once",
        )),
    }
}

/// Only the last line of each side may lack its `\n`.
fn check_last_lines(lines: &[(Kind, Line<'_>)], at: usize) -> Result<(), Invalid> {
    for side in [Kind::Remove, Kind::Add] {
        let mine: Vec<&Line<'_>> = lines
            .iter()
            .filter(|(k, _)| *k == Kind::Context || *k == side)
            .map(|(_, l)| l)
            .collect();
        if mine.iter().rev().skip(1).any(|l| !l.newline) {
            return Err(invalid(
                at,
                format!(
                    "the hunk at line {at} says a line other than the last of a side has no \
                     newline at the end of the file"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Line<'_> {
        Line {
            text: text.as_bytes(),
            newline: true,
        }
    }

    fn err(patch: &str) -> (Option<usize>, String) {
        let e = parse(patch).unwrap_err();
        (e.line, e.message)
    }

    #[test]
    fn a_git_diff_with_two_files_and_commentary() {
        let patch = "From abc Mon Sep 17 00:00:00 2001\nSubject: x\n\n---\n a | 1 +\n\n\
diff --git a/a.txt b/a.txt\nindex 111..222 100644\n--- a/a.txt\n+++ b/a.txt\n\
@@ -1,2 +1,2 @@ fn ctx\n one\n-two\n+TWO\n\
diff --git a/new.sh b/new.sh\nnew file mode 100755\nindex 0000000..333\n--- /dev/null\n+++ b/new.sh\n\
@@ -0,0 +1 @@\n+#!/bin/sh\n-- \n2.43.0\n";
        let files = parse(patch).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].old.as_deref(), Some("a.txt"));
        assert_eq!(files[0].new.as_deref(), Some("a.txt"));
        assert_eq!(files[0].line, 7);
        let h = &files[0].hunks[0];
        assert_eq!((h.line, h.old_at, h.old_count), (11, 0, 2));
        assert_eq!(
            h.lines,
            vec![
                (Kind::Context, line("one")),
                (Kind::Remove, line("two")),
                (Kind::Add, line("TWO"))
            ]
        );
        assert_eq!(files[1].old, None);
        assert_eq!(files[1].new.as_deref(), Some("new.sh"));
        assert!(files[1].executable);
        assert_eq!(files[1].hunks[0].old_at, 0);
    }

    #[test]
    fn crlf_and_no_newline_markers_are_kept_per_side() {
        let patch = "--- a/w.txt\r\n+++ b/w.txt\r\n@@ -1 +1 @@\r\n-old\r\n\\ No newline at end of file\r\n+new\r\n";
        let files = parse(patch).unwrap();
        let h = &files[0].hunks[0];
        assert_eq!(
            h.lines,
            vec![
                (
                    Kind::Remove,
                    Line {
                        text: b"old\r",
                        newline: false
                    }
                ),
                (Kind::Add, line("new\r")),
            ]
        );
        // The patch's own last line without its newline still has one.
        let files = parse("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b").unwrap();
        assert_eq!(files[0].hunks[0].lines[1], (Kind::Add, line("b")));
    }

    #[test]
    fn names_quoted_tabbed_and_header_only_diffs() {
        let files =
            parse("--- \"a/caf\\303\\251 x\"\n+++ \"b/caf\\303\\251 x\"\n@@ -1 +1 @@\n-a\n+b\n")
                .unwrap();
        assert_eq!(files[0].old.as_deref(), Some("café x"));
        // As git writes a name with a space: quoted, then a tab.
        let files =
            parse("--- \"a/caf\\303\\251 x\"\t\n+++ \"b/c\\tx\"\t\n@@ -1 +1 @@\n-a\n+b\n").unwrap();
        assert_eq!(files[0].old.as_deref(), Some("café x"));
        assert_eq!(files[0].new.as_deref(), Some("c\tx"));
        let files = parse(
            "--- old.txt\t2002-02-21 23:30:39\n+++ new.txt\t2002-02-21\n@@ -1 +1 @@\n-a\n+b\n",
        )
        .unwrap();
        assert_eq!(
            (files[0].old.as_deref(), files[0].new.as_deref()),
            (Some("old.txt"), Some("new.txt"))
        );
        let files =
            parse("diff --git a/empty b/empty\nnew file mode 100644\nindex 0000000..e69de29\n")
                .unwrap();
        assert_eq!(
            (files[0].old.clone(), files[0].new.as_deref()),
            (None, Some("empty"))
        );
        let files =
            parse("diff --git a/gone b/gone\ndeleted file mode 100644\nindex e69de29..0000000\n")
                .unwrap();
        assert_eq!(
            (files[0].old.as_deref(), files[0].new.clone()),
            (Some("gone"), None)
        );
        let files =
            parse("diff --git a/x y b/z\nsimilarity index 100%\nrename from x y\nrename to z\n")
                .unwrap();
        assert_eq!(
            (files[0].old.as_deref(), files[0].new.as_deref()),
            (Some("x y"), Some("z"))
        );
    }

    #[test]
    fn bad_patches_name_their_line() {
        let cases: &[(&str, Option<usize>, &str)] = &[
            ("", None, "no file diff"),
            ("just words\n", None, "no file diff"),
            ("@@ -1 +1 @@\n-a\n+b\n", Some(1), "without a file header"),
            ("--- a/x\n+++ b/x\n@@ -1,2 +1 @@\n-a\n", Some(3), "ends inside the hunk"),
            ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n+c\n", Some(6), "more lines than"),
            ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\nzzz\n", Some(5), "not a hunk line"),
            ("--- a/x\n+++ b/x\n@@ -1 +1\n-a\n+b\n", Some(3), "hunk header"),
            ("--- a/x\n+++ b/x\n@@ -0,1 +1 @@\n-a\n+b\n", Some(3), "hunk header"),
            ("--- a/x\n+++ b/x\n", Some(1), "no hunk"),
            ("--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+a\n", Some(1), "both sides"),
            ("--- a/x\n+++ b/x\n@@ -5 +5 @@\n-a\n+b\n@@ -2 +2 @@\n-c\n+d\n", Some(6), "file order"),
            ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n\\ No newline at end of file\n-a\n+b\n", Some(4), "must follow"),
            ("diff --git a/b b/b\nindex 1..2\nGIT binary patch\nliteral 5\n", Some(3), "binary"),
            ("diff --git a/b b/b\nindex 1..2 100644\nBinary files a/b and b/b differ\n", Some(3), "binary"),
            ("Binary files a/b and b/b differ\n", Some(1), "binary"),
            ("diff --git a/m b/m\nold mode 100644\nnew mode 100755\n", Some(2), "mode changes"),
            ("diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+t\n", Some(2), "symlinks"),
            ("diff --git a/c b/d\ncopy from c\ncopy to d\n", Some(2), "copies"),
            ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- a/./x\n+++ b/x\n@@ -3 +3 @@\n-c\n+d\n", Some(6), "names `x` again"),
            ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\0\n+b\n", Some(4), "NUL"),
            ("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n\\ No newline at end of file\n-b\n+c\n+d\n", Some(3), "other than the last"),
        ];
        for (patch, line, needle) in cases {
            let (got_line, message) = err(patch);
            assert_eq!(got_line, *line, "{patch:?}: {message}");
            assert!(message.contains(needle), "{patch:?}: {message}");
        }
    }

    #[test]
    fn unquote_follows_git() {
        assert_eq!(unquote(b"\"a\\tb\\\"c\\\\\"").unwrap(), b"a\tb\"c\\");
        assert_eq!(unquote(b"\"\\303\\251\"").unwrap(), "é".as_bytes());
        assert_eq!(unquote(b"\"open"), None);
        assert_eq!(unquote(b"\"a\" trailing"), None);
        assert_eq!(unquote(b"\"\\9\""), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Any text is a patch or an error with a line inside the text; never a panic.
        #[test]
        fn any_text_parses_or_names_a_line(lines in proptest::collection::vec(
            proptest::sample::select(vec![
                "--- a/x\n", "+++ b/x\n", "@@ -1 +1 @@\n", "@@ -0,0 +1,2 @@\n", "-a\n", "+b\n",
                " c\n", "\\ No newline at end of file\n", "diff --git a/x b/x\n", "\n",
                "new file mode 100644\n", "--- /dev/null\n", "+++ /dev/null\n", "rename from y\n",
            ]),
            0..24,
        )) {
            let text = lines.concat();
            match parse(&text) {
                Ok(files) => proptest::prop_assert!(!files.is_empty()),
                Err(e) => {
                    let count = text.lines().count();
                    proptest::prop_assert!(e.line.is_none_or(|l| l >= 1 && l <= count + 1), "{:?}", e);
                }
            }
        }
    }
}
