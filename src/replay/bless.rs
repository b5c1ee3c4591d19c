//! `replay --bless`: rewrite a failing case file's `expect` from what actually happened.
//!
//! Invariants:
//! - Only the `expect` member's value changes; every other byte of the file — key order,
//!   indentation, the other members' formatting — stays as it was. A case without `expect`
//!   gets one appended as its last member.
//! - The new `expect` keeps the old one's key order; `status` and `exit_code` are always
//!   written, `error_code` when the envelope has one, and `result` keeps exactly the keys the
//!   old one named (volatile places left out, see `diff::is_volatile`).
//! - The file is replaced atomically (temp file in the same folder, fsync, rename, folder
//!   fsync) with its mode kept; a symbolic link or a special file is refused, never written
//!   through.
//!
//! It must not decide whether a case failed (the caller does) nor touch transcripts.

use super::cases::ReadError;
use super::diff;
use super::runner::Actual;
use ptd_sys::fs::{self, FileType, Mode, TempFile};
use ptd_wire::json::{Document, Kind};
use serde_json::{Map, Value};
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Why a case was not blessed.
#[derive(Debug, thiserror::Error)]
pub enum BlessError {
    /// A transcript's expectation is its recorded status.
    #[error("a transcript's expectation is its recorded status; it is never rewritten")]
    Transcript,
    #[error("there is no envelope to take an expectation from (the main job printed none)")]
    NoEnvelope,
    #[error("the envelope has no status to take an expectation from")]
    NoStatus,
    /// Reading the case file again failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("the case file is not UTF-8")]
    NotUtf8,
    #[error("the case file no longer reads as JSON: {0}")]
    NotJson(ptd_wire::json::JsonIssue),
    #[error("the case file has no closing brace")]
    NoClosingBrace,
    #[error("the rewritten case would not be a JSON object")]
    NotAnObject,
    #[error("the case file is a symbolic link; not rewriting it")]
    Symlink,
    #[error("the case file is {0}; not rewriting it")]
    NotRegular(&'static str),
    /// A step of the atomic replacement failed: what it was, and the OS error.
    #[error("{0}: {1}")]
    Io(&'static str, std::io::Error),
}

/// The new `expect` for a case whose old one (if any) was `old`.
pub(crate) fn new_expect(
    old: Option<&Map<String, Value>>,
    actual: &Actual,
) -> Result<Value, BlessError> {
    let envelope = actual.envelope.as_ref().ok_or(BlessError::NoEnvelope)?;
    let status = actual.status().ok_or(BlessError::NoStatus)?;
    let mut fresh = Map::new();
    fresh.insert("status".into(), Value::from(status));
    if let Some(code) = actual.error_code() {
        fresh.insert("error_code".into(), Value::from(code));
    }
    if let Some(exit) = actual.exit {
        fresh.insert("exit_code".into(), Value::from(exit));
    }
    if let Some(shape) = old.and_then(|o| o.get("result")) {
        let projected = diff::project(shape, envelope, "");
        if projected.as_object().is_some_and(|m| !m.is_empty()) {
            fresh.insert("result".into(), projected);
        }
    }
    // The old key order first, then what is new.
    let mut out = Map::new();
    for key in old.into_iter().flat_map(|o| o.keys()) {
        if let Some(value) = fresh.remove(key) {
            out.insert(key.clone(), value);
        }
    }
    for key in ["status", "error_code", "exit_code", "result"] {
        if let Some(value) = fresh.remove(key) {
            out.insert(key.to_string(), value);
        }
    }
    Ok(Value::Object(out))
}

/// `text` with its `expect` member's value replaced by `expect` (or `expect` added), written in
/// the style of the value it replaces: one line stays one line; several lines are indented
/// like the file.
pub fn splice(text: &str, expect: &Value) -> Result<String, BlessError> {
    let doc = Document::parse(text.as_bytes().to_vec(), usize::MAX).map_err(BlessError::NotJson)?;
    let unit = indent_unit(text);
    match doc.span("expect") {
        Some(span) => {
            let old = &text[span.clone()];
            let base = line_indent(text, span.start);
            let new = if old.contains('\n') {
                pretty(expect, &base, &unit)
            } else {
                one_line(expect)
            };
            Ok(format!("{}{new}{}", &text[..span.start], &text[span.end..]))
        }
        None => {
            let close = text.rfind('}').ok_or(BlessError::NoClosingBrace)?;
            let body_end = text[..close].trim_end().len();
            let multi_line = text[..close].contains('\n');
            let member = if multi_line {
                let base = doc
                    .members()
                    .next()
                    .and_then(|(k, _)| doc.span(k))
                    .map(|s| line_indent(text, s.start))
                    .unwrap_or_else(|| unit.clone());
                format!(",\n{base}\"expect\": {}", pretty(expect, &base, &unit))
            } else {
                format!(", \"expect\": {}", one_line(expect))
            };
            Ok(format!(
                "{}{member}{}",
                &text[..body_end],
                &text[body_end..]
            ))
        }
    }
}

/// The leading whitespace of the line holding byte `at`.
fn line_indent(text: &str, at: usize) -> String {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[start..]
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect()
}

/// The file's indentation step: the leading whitespace of its first indented line.
fn indent_unit(text: &str) -> String {
    text.lines()
        .map(|l| {
            l.chars()
                .take_while(|c| *c == ' ' || *c == '\t')
                .collect::<String>()
        })
        .find(|indent| !indent.is_empty())
        .unwrap_or_else(|| "  ".to_string())
}

/// Pretty JSON whose inner lines start with `base` + `unit` per level.
fn pretty(value: &Value, base: &str, unit: &str) -> String {
    let mut buf = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
    let _ = serde::Serialize::serialize(value, &mut ser);
    let text = String::from_utf8(buf).unwrap_or_default();
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            if i == 0 {
                line.to_string()
            } else {
                format!("{base}{line}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One line, with a space after each `:` and `,` (how people write one-line JSON).
fn one_line(value: &Value) -> String {
    match value {
        Value::Object(map) if !map.is_empty() => {
            let members: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", Value::from(k.as_str()), one_line(v)))
                .collect();
            format!("{{{}}}", members.join(", "))
        }
        Value::Array(items) if !items.is_empty() => {
            let items: Vec<String> = items.iter().map(one_line).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

/// Rewrite the case file at `path` with `expect`: read it again (bounded, non-blocking),
/// splice, and replace it atomically with its mode kept.
pub fn rewrite(path: &Path, expect: &Value) -> Result<(), BlessError> {
    let bytes = super::cases::read_file(path)?;
    let text = String::from_utf8(bytes).map_err(|_| BlessError::NotUtf8)?;
    let new = splice(&text, expect)?;
    if Kind::of(&new) != Kind::Object {
        return Err(BlessError::NotAnObject);
    }
    replace_file(path, new.as_bytes())
}

fn replace_file(path: &Path, bytes: &[u8]) -> Result<(), BlessError> {
    let io = |what: &'static str| move |e: std::io::Error| BlessError::Io(what, e);
    let name = path
        .file_name()
        .ok_or(BlessError::Read(ReadError::NoFileName))?;
    let name = fs::cstring(name.as_bytes()).map_err(io("the file name"))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = fs::open_dir_path(parent).map_err(io("cannot open the case's folder"))?;
    let dir = dir.as_fd();
    let mode = |when: &'static str| -> Result<Mode, BlessError> {
        let st = fs::lstat_at(dir, &name).map_err(io(when))?;
        match fs::kind(&st) {
            FileType::RegularFile => Ok(Mode::from_raw_mode(st.st_mode & 0o7777)),
            FileType::Symlink => Err(BlessError::Symlink),
            other => Err(BlessError::NotRegular(fs::describe(other))),
        }
    };
    let kept = mode("cannot look at the case file")?;
    let temp = TempFile::create(dir, name.as_bytes(), kept)
        .map_err(io("cannot create a temp file next to the case"))?;
    fs::set_mode(temp.file().as_fd(), kept).map_err(io("cannot set the temp file's mode"))?;
    temp.file()
        .write_all(bytes)
        .map_err(io("cannot write the case"))?;
    temp.file().sync_all().map_err(io("cannot sync the case"))?;
    // Again right before the rename: a symlink swapped in meanwhile is replaced, never
    // written through, but it is not ours to replace either.
    mode("cannot look at the case file")?;
    temp.replace(&name).map_err(io("cannot replace the case"))?;
    fs::fsync(dir).map_err(io("cannot sync the case's folder"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn actual(envelope: Value, exit: i32) -> Actual {
        Actual {
            envelope: Some(envelope),
            exit: Some(exit),
            ..Actual::default()
        }
    }

    #[test]
    fn the_new_expect_keeps_the_old_order_and_shape() {
        let old: Map<String, Value> = serde_json::from_value(json!({
            "exit_code": 0, "result": {"output": {"a": 1}, "gone": 1}, "status": "succeeded"
        }))
        .unwrap();
        let got = actual(
            json!({"status": "failed", "error": {"code": "x"}, "output": {"a": 2, "b": 3}}),
            1,
        );
        let new = new_expect(Some(&old), &got).unwrap();
        assert_eq!(
            serde_json::to_string(&new).unwrap(),
            r#"{"exit_code":1,"result":{"output":{"a":2}},"status":"failed","error_code":"x"}"#
        );
        let none = Actual::default();
        assert!(new_expect(None, &none).is_err());
    }

    #[test]
    fn splicing_keeps_every_other_byte() {
        let text = "{\n    \"name\": \"n\",\n    \"expect\": {\n        \"status\": \"failed\"\n    },\n    \"z\": [1,2]\n}\n";
        let new = splice(text, &json!({"status": "succeeded", "exit_code": 0})).unwrap();
        assert_eq!(
            new,
            "{\n    \"name\": \"n\",\n    \"expect\": {\n        \"status\": \"succeeded\",\n        \"exit_code\": 0\n    },\n    \"z\": [1,2]\n}\n"
        );
        let one = "{\"name\": \"n\", \"expect\": {\"status\": \"failed\"}, \"z\": 1}";
        assert_eq!(
            splice(one, &json!({"status": "denied", "result": {"a": [1, 2]}})).unwrap(),
            "{\"name\": \"n\", \"expect\": {\"status\": \"denied\", \"result\": {\"a\": [1, 2]}}, \"z\": 1}"
        );
    }

    #[test]
    fn a_missing_expect_is_appended_in_the_files_style() {
        let text = "{\n  \"name\": \"n\",\n  \"request\": {}\n}\n";
        assert_eq!(
            splice(text, &json!({"status": "failed"})).unwrap(),
            "{\n  \"name\": \"n\",\n  \"request\": {},\n  \"expect\": {\n    \"status\": \"failed\"\n  }\n}\n"
        );
    }

    #[test]
    fn rewriting_keeps_the_mode_and_refuses_symlinks() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("a.case.json");
        std::fs::write(&path, "{\"expect\": {\"status\": \"failed\"}}").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        rewrite(&path, &json!({"status": "succeeded"})).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"expect\": {\"status\": \"succeeded\"}}"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        let link = tmp.path().join("l.case.json");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let err = rewrite(&link, &json!({"status": "denied"})).unwrap_err();
        assert!(matches!(err, BlessError::Symlink), "{err:?}");
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .contains("succeeded"));
    }
}
