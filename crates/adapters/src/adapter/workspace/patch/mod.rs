//! `workspace.apply_patch {patch}` → `{files: [{path, action, bytes?}]}` (SPEC §15.1): a
//! unified diff applied all or nothing.
//!
//! Owns planning and committing a patch; reading it is `parse.rs`. Three phases:
//!
//! 1. **Plan** (nothing changes): every path is checked by §9's rules and, for the files it
//!    writes, by the `.git` guard of `write` (unless `--allow-git-dir`); each file to change is
//!    read (a regular file, at most [`limits::MAX_WRITE_BYTES`], no NUL byte) and every hunk is
//!    applied in memory. A hunk applies only **exactly**: at the line its header names, with
//!    every context and removed line equal byte for byte, line ending included — no offset, no
//!    fuzz, no whitespace or CRLF leniency. A file to add must not exist, one to change or delete
//!    must; a file deleted must be exactly what its hunks remove; a path that is itself a
//!    symlink is not deleted or renamed (its target would be). Two file diffs reaching the same
//!    file (through a symlink or a hard link) are refused like two naming it.
//! 2. **Stage** (nothing visible changes but missing parent directories of added files): each
//!    new content goes to a temp file beside its target, fsynced, with the old file's mode and
//!    owner (`new file mode 100755` makes an added file executable).
//! 3. **Commit**, file by file: a changed file is replaced by `rename(2)` after a second name
//!    (a hard link) was given to the old one; a deleted file is renamed to such a name; an added
//!    file is published only if its name is still free. A file that was replaced behind the
//!    adapter's back since it was planned is a conflict. If any step fails, every step done is
//!    undone in reverse order (the second names are renamed back, added files removed, the
//!    directories made for them removed) and the error is returned; on success the second names
//!    are removed. Readers see each file old or new, never half-written.
//!
//! Must not: write anything before every hunk of every file has applied in memory; follow a
//! symlink out of the root; leave a temp file or a second name behind on any path it controls.

mod parse;

use super::files::{self, Keep};
use super::path::{parse_path, Root};
use super::{limits, quote, Code, GitDir, Input, ToolError};
use parse::{FileDiff, Hunk, Kind, Line};
use ptd_sys::fs::{self, FileType, Mode, OFlags, TempFile};
use serde_json::{json, Value};
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// Mode of an added file that `new file mode 100755` marks executable (the umask applies).
const EXEC_FILE_MODE: Mode = Mode::from_raw_mode(0o777);
/// Mode of the placeholder that reserves a second name (it is replaced before it is used).
const PLACEHOLDER_MODE: Mode = Mode::from_raw_mode(0o600);

/// `workspace.apply_patch`.
pub(super) fn apply_patch(root: &Root, input: &Value, git: GitDir) -> Result<Value, ToolError> {
    let input = Input::new(input, &["patch"])?;
    let text = input.string("patch")?;
    if text.len() > limits::MAX_PATCH_BYTES {
        return Err(ToolError::new(
            Code::TooLarge,
            format!(
                "the patch is {} bytes, over the {}-byte limit",
                text.len(),
                limits::MAX_PATCH_BYTES
            ),
        ));
    }
    let line_count = memchr::memchr_iter(b'\n', text.as_bytes()).count();
    if line_count > limits::MAX_PATCH_LINES {
        return Err(ToolError::new(
            Code::TooLarge,
            format!(
                "the patch has {line_count} lines, over the limit of {}",
                limits::MAX_PATCH_LINES
            ),
        ));
    }
    let diffs = parse::parse(text).map_err(|e| {
        let message = match e.line {
            Some(line) => format!("the patch is invalid at line {line}: {}", e.message),
            None => format!("the patch is invalid: {}", e.message),
        };
        ToolError::new(Code::PatchInvalid, message).with_details(json!({ "line": e.line }))
    })?;
    if diffs.len() > limits::MAX_PATCH_FILES {
        return Err(ToolError::new(
            Code::TooLarge,
            format!(
                "the patch changes {} files, over the limit of {}",
                diffs.len(),
                limits::MAX_PATCH_FILES
            ),
        ));
    }
    let mut plan = Plan::make(root, &diffs, git)?;
    plan.commit(root, git)?;
    Ok(json!({ "files": plan.report }))
}

/// What one file diff does to one path.
enum Change {
    /// Replace an existing file (`keep`: its mode and owner; `id`: its identity when planned).
    Replace {
        data: Vec<u8>,
        keep: Keep,
        id: (u64, u64),
    },
    /// Create a new file; `missing` lists the directories (root-relative, outermost first)
    /// that do not exist yet and are made for it.
    Create {
        data: Vec<u8>,
        executable: bool,
        missing: Vec<String>,
    },
    /// Remove an existing file (`id` as for `Replace`).
    Remove { id: (u64, u64) },
}

/// One path to change: its request spelling, where it lives (once known), and the change.
struct Step {
    shown: String,
    rel: super::path::RelPath,
    /// The parent directory and the name in it; `None` while a parent must still be created.
    at: Option<(OwnedFd, CString)>,
    change: Change,
}

/// A file as the duplicate check knows it: an existing file's device and inode (and no name),
/// or a new file's directory and its name there.
type FileKey = (u64, u64, Vec<u8>);

/// Which file diff reached which file first (its patch line).
#[derive(Default)]
struct Reached(Vec<(FileKey, usize)>);

impl Reached {
    /// Note that the file diff at `line` reaches `key`; a second one reaching it is refused.
    fn note(&mut self, key: FileKey, line: usize, shown: &str) -> Result<(), ToolError> {
        if let Some((_, first)) = self.0.iter().find(|(k, _)| *k == key) {
            return Err(ToolError::new(
                Code::PatchInvalid,
                format!(
                    "the patch is invalid at line {line}: its file diff reaches the same file as \
                     the one at line {first} ({} through a symlink or a hard link); a patch may \
                     change each file once",
                    quote(shown)
                ),
            )
            .with_details(json!({ "line": line })));
        }
        self.0.push((key, line));
        Ok(())
    }
}

struct Plan {
    steps: Vec<Step>,
    report: Vec<Value>,
}

/// The identity of a file (device, inode).
#[allow(clippy::useless_conversion)]
fn identity(st: &fs::Stat) -> (u64, u64) {
    (u64::from(st.st_dev), u64::from(st.st_ino))
}

fn conflict(shown: &str, hunk: Option<usize>, message: String) -> ToolError {
    ToolError::new(Code::PatchConflict, message).with_details(json!({"path": shown, "hunk": hunk}))
}

impl Plan {
    /// Phase 1: check every path and apply every hunk in memory.
    fn make(root: &Root, diffs: &[FileDiff<'_>], git: GitDir) -> Result<Plan, ToolError> {
        let mut plan = Plan {
            steps: Vec::new(),
            report: Vec::new(),
        };
        let mut reached = Reached::default();
        let mut held = 0usize;
        for diff in diffs {
            let source = match &diff.old {
                Some(old) => Some(Source::read(root, old, git)?),
                None => None,
            };
            if let Some(source) = &source {
                let (dev, ino) = source.id;
                reached.note((dev, ino, Vec::new()), diff.line, &source.shown)?;
            }
            let target = diff.new.as_deref().map(parse_path).transpose()?;
            let shown = match (&target, &source) {
                (Some(rel), _) => rel.display(),
                (None, Some(source)) => source.shown.clone(),
                (None, None) => String::new(),
            };
            let old_bytes = source.as_ref().map_or(&[][..], |s| s.bytes.as_slice());
            let data = apply_hunks(old_bytes, &diff.hunks).map_err(|(hunk, why)| {
                let line = diff.hunks.get(hunk - 1).map_or(diff.line, |h| h.line);
                conflict(
                    &shown,
                    Some(hunk),
                    format!(
                        "hunk {hunk} (line {line} of the patch) does not apply to {}: {why}",
                        quote(&shown)
                    ),
                )
            })?;
            held += data.len();
            if held > limits::MAX_PATCH_RESULT_BYTES {
                return Err(ToolError::new(
                    Code::TooLarge,
                    format!(
                        "the patched files come to more than {} bytes together",
                        limits::MAX_PATCH_RESULT_BYTES
                    ),
                ));
            }
            match (source, target) {
                (Some(source), Some(target)) if source.rel == target => {
                    plan.report.push(
                        json!({"path": source.shown, "action": "modified", "bytes": data.len()}),
                    );
                    plan.steps.push(Step {
                        shown: source.shown,
                        rel: source.rel,
                        at: Some((source.dir, source.name)),
                        change: Change::Replace {
                            data,
                            keep: source.keep,
                            id: source.id,
                        },
                    });
                }
                (Some(source), target) => {
                    // Deleted, or the source of a rename: gone from its place either way.
                    if target.is_none() && !data.is_empty() {
                        return Err(conflict(
                            &source.shown,
                            None,
                            format!(
                                "the patch deletes {}, but its hunks do not remove all of it",
                                quote(&source.shown)
                            ),
                        ));
                    }
                    source.refuse_symlink(root)?;
                    plan.report
                        .push(json!({"path": source.shown, "action": "deleted"}));
                    plan.steps.push(Step {
                        shown: source.shown,
                        rel: source.rel,
                        at: Some((source.dir, source.name)),
                        change: Change::Remove { id: source.id },
                    });
                    if let Some(target) = target {
                        plan.add(root, target, data, diff, git, &mut reached)?;
                    }
                }
                (None, Some(target)) => plan.add(root, target, data, diff, git, &mut reached)?,
                (None, None) => {
                    return Err(ToolError::new(
                        Code::InternalError,
                        "a file diff with /dev/null on both sides got past the parser (a bug)",
                    ))
                }
            }
        }
        Ok(plan)
    }

    /// Plan the creation of `new` with `data`.
    fn add(
        &mut self,
        root: &Root,
        rel: super::path::RelPath,
        data: Vec<u8>,
        diff: &FileDiff<'_>,
        git: GitDir,
        reached: &mut Reached,
    ) -> Result<(), ToolError> {
        let shown = rel.display();
        let at = match files::locate_file(root, &rel, &shown, false, git) {
            Ok((located, name)) => {
                match fs::lstat_at(located.parent.as_fd(), &name) {
                    Ok(_) => {
                        return Err(conflict(
                            &shown,
                            None,
                            format!("the patch adds {}, which exists already", quote(&shown)),
                        ))
                    }
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                    Err(e) => return Err(ToolError::io("inspect", &shown, &e)),
                }
                let st = fs::lstat_at(located.parent.as_fd(), c".")
                    .map_err(|e| ToolError::io("inspect", &shown, &e))?;
                let (dev, ino) = identity(&st);
                reached.note((dev, ino, name.as_bytes().to_vec()), diff.line, &shown)?;
                Some((located.parent, name))
            }
            Err(e) if e.code == Code::NotFound => None,
            Err(e) => return Err(e),
        };
        let missing = match at {
            Some(_) => Vec::new(),
            None => missing_dirs(root, &rel)?,
        };
        self.report
            .push(json!({"path": shown, "action": "added", "bytes": data.len()}));
        self.steps.push(Step {
            shown,
            rel,
            at,
            change: Change::Create {
                data,
                executable: diff.executable,
                missing,
            },
        });
        Ok(())
    }

    /// Phases 2 and 3: stage every new content, then commit file by file, undoing all on any
    /// failure.
    fn commit(&mut self, root: &Root, git: GitDir) -> Result<(), ToolError> {
        // Directories for added files come first: every later step needs its parent's handle.
        let mut made: Vec<String> = Vec::new();
        let mut dirs: Vec<(OwnedFd, CString)> = Vec::new();
        for step in &mut self.steps {
            let at = match step.at.take() {
                Some(at) => Ok(at),
                None => {
                    if let Change::Create { missing, .. } = &step.change {
                        for dir in missing {
                            if !made.contains(dir) {
                                made.push(dir.clone());
                            }
                        }
                    }
                    files::locate_file(root, &step.rel, &step.shown, true, git)
                        .map(|(located, name)| (located.parent, name))
                }
            };
            match at {
                Ok(at) => dirs.push(at),
                Err(e) => {
                    remove_dirs(root, &made);
                    return Err(e);
                }
            }
        }
        let result = self.commit_in(&dirs);
        if result.is_err() {
            drop(dirs);
            remove_dirs(root, &made);
        }
        result
    }

    fn commit_in(&self, dirs: &[(OwnedFd, CString)]) -> Result<(), ToolError> {
        let mut staged: Vec<Option<TempFile<'_>>> = Vec::new();
        for (step, (dir, name)) in self.steps.iter().zip(dirs) {
            let temp = match &step.change {
                Change::Replace { data, keep, .. } => Some(files::stage(
                    dir.as_fd(),
                    name,
                    data,
                    Some(*keep),
                    files::NEW_FILE_MODE,
                )),
                Change::Create {
                    data, executable, ..
                } => {
                    let mode = if *executable {
                        EXEC_FILE_MODE
                    } else {
                        files::NEW_FILE_MODE
                    };
                    Some(files::stage(dir.as_fd(), name, data, None, mode))
                }
                Change::Remove { .. } => None,
            };
            staged.push(
                temp.transpose()
                    .map_err(|e| ToolError::io("stage the new content of", &step.shown, &e))?,
            );
        }
        let mut done: Vec<Done<'_>> = Vec::new();
        for ((step, (dir, name)), temp) in self.steps.iter().zip(dirs).zip(staged) {
            match commit_one(step, dir.as_fd(), name, temp) {
                Ok(d) => done.push(d),
                Err(err) => {
                    let undone = undo(done);
                    return Err(match undone {
                        Ok(()) => err,
                        Err(stuck) => ToolError::new(
                            Code::IoError,
                            format!(
                                "{} and undoing the files already changed failed for {}: the \
                                 workspace is partly patched",
                                err.message,
                                quote(&stuck)
                            ),
                        ),
                    });
                }
            }
        }
        // Committed: the second names (the old contents) go when `done` is dropped.
        for (dir, _) in dirs {
            let _ = fs::fsync(dir.as_fd());
        }
        Ok(())
    }
}

/// A file the patch changes, deletes or renames, as it was when planned.
struct Source {
    shown: String,
    rel: super::path::RelPath,
    dir: OwnedFd,
    name: CString,
    bytes: Vec<u8>,
    keep: Keep,
    id: (u64, u64),
}

impl Source {
    fn read(root: &Root, raw: &str, git: GitDir) -> Result<Source, ToolError> {
        let rel = parse_path(raw)?;
        let shown = rel.display();
        let (located, name) = files::locate_file(root, &rel, &shown, false, git).map_err(|e| {
            if e.code == Code::NotFound {
                conflict(
                    &shown,
                    None,
                    format!("the patch changes {}, which does not exist", quote(&shown)),
                )
            } else {
                e
            }
        })?;
        let (bytes, meta) = match files::read_for_change(located.parent.as_fd(), &name, &shown) {
            Err(e) if e.code == Code::NotFound => {
                return Err(conflict(
                    &shown,
                    None,
                    format!("the patch changes {}, which does not exist", quote(&shown)),
                ))
            }
            other => other?,
        };
        use std::os::unix::fs::MetadataExt;
        Ok(Source {
            shown,
            rel,
            dir: located.parent,
            name,
            bytes,
            keep: Keep::of_metadata(&meta),
            id: (meta.dev(), meta.ino()),
        })
    }

    /// A path that is itself a symlink is not deleted or renamed: its target would be.
    fn refuse_symlink(&self, root: &Root) -> Result<(), ToolError> {
        let parts: Vec<&str> = self.rel.components().collect();
        let Some((last, parents)) = parts.split_last() else {
            return Ok(());
        };
        let parent = if parents.is_empty() {
            super::path::RelPath::root()
        } else {
            parse_path(&parents.join("/"))?
        };
        let dir = root
            .open_beneath(&parent, OFlags::PATH | OFlags::DIRECTORY)
            .map_err(|e| super::path::path_error(e, &self.shown))?;
        let name =
            fs::cstring(last.as_bytes()).map_err(|e| ToolError::io("inspect", &self.shown, &e))?;
        match fs::lstat_at(dir.as_fd(), &name) {
            Ok(st) if fs::kind(&st) == FileType::Symlink => Err(conflict(
                &self.shown,
                None,
                format!(
                    "{} is a symbolic link; the patch would delete or rename the file it points at",
                    quote(&self.shown)
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// The directories on the way to `rel` that do not exist yet, outermost first.
fn missing_dirs(root: &Root, rel: &super::path::RelPath) -> Result<Vec<String>, ToolError> {
    let parts: Vec<&str> = rel.components().collect();
    let mut missing = Vec::new();
    for n in 1..parts.len() {
        let prefix = parts[..n].join("/");
        let prefix_rel = parse_path(&prefix)?;
        // Only what is not there is made (and removed on undo); any other failure is left to
        // the resolution that creates the directories, which reports it.
        let absent = !missing.is_empty()
            || matches!(
                root.open_beneath(&prefix_rel, OFlags::PATH | OFlags::DIRECTORY),
                Err(super::path::PathError::NotFound)
            );
        if absent {
            missing.push(prefix);
        }
    }
    Ok(missing)
}

/// Remove the directories made for added files (deepest first; only empty ones go).
fn remove_dirs(root: &Root, made: &[String]) {
    for dir in made.iter().rev() {
        let Some((parent, name)) = dir.rsplit_once('/').map_or(Some(("", dir.as_str())), Some)
        else {
            continue;
        };
        let parent = if parent.is_empty() {
            super::path::RelPath::root()
        } else {
            match parse_path(parent) {
                Ok(p) => p,
                Err(_) => continue,
            }
        };
        if let (Ok(fd), Ok(name)) = (
            root.open_beneath(&parent, OFlags::RDONLY | OFlags::DIRECTORY),
            fs::cstring(name.as_bytes()),
        ) {
            let _ = fs::rmdir_at(fd.as_fd(), &name);
        }
    }
}

/// A step committed, and how to undo it.
enum Done<'d> {
    /// The old file lives on under `backup`'s name (renamed back on undo, removed on drop).
    Moved {
        backup: TempFile<'d>,
        name: CString,
        shown: String,
    },
    /// A file added: removed on undo.
    Added {
        dir: BorrowedFd<'d>,
        name: CString,
        shown: String,
    },
}

/// Undo `done` in reverse order; the first path that could not be restored is the error.
fn undo(done: Vec<Done<'_>>) -> Result<(), String> {
    let mut stuck = None;
    for step in done.into_iter().rev() {
        let (result, shown) = match step {
            Done::Moved {
                backup,
                name,
                shown,
            } => (backup.replace(&name), shown),
            Done::Added { dir, name, shown } => (fs::unlink_at(dir, &name), shown),
        };
        if result.is_err() && stuck.is_none() {
            stuck = Some(shown);
        }
    }
    stuck.map_or(Ok(()), Err)
}

/// A fresh name beside `name` that nobody holds: a placeholder temp file, removed again so that
/// the name can be linked or renamed to; dropped, the name is removed (whatever holds it then).
fn second_name<'d>(dir: BorrowedFd<'d>, name: &CString) -> std::io::Result<TempFile<'d>> {
    TempFile::create(dir, name.as_bytes(), PLACEHOLDER_MODE)
}

/// Commit one step.
fn commit_one<'d>(
    step: &Step,
    dir: BorrowedFd<'d>,
    name: &CString,
    temp: Option<TempFile<'d>>,
) -> Result<Done<'d>, ToolError> {
    let shown = &step.shown;
    let io = |what: &'static str| move |e: std::io::Error| ToolError::io(what, shown, &e);
    let still_planned = |at: &std::ffi::CStr, id: (u64, u64)| -> Result<(), ToolError> {
        let st = fs::lstat_at(dir, at).map_err(io("inspect"))?;
        if identity(&st) == id {
            Ok(())
        } else {
            Err(conflict(
                shown,
                None,
                format!(
                    "{} was replaced while the patch was being applied",
                    quote(shown)
                ),
            ))
        }
    };
    match (&step.change, temp) {
        (Change::Replace { id, .. }, Some(temp)) => {
            let backup = second_name(dir, name).map_err(io("back up"))?;
            fs::unlink_at(dir, backup.name()).map_err(io("back up"))?;
            fs::link_at(dir, name, backup.name()).map_err(io("back up"))?;
            still_planned(backup.name(), *id)?;
            temp.replace(name).map_err(io("replace"))?;
            Ok(Done::Moved {
                backup,
                name: name.clone(),
                shown: shown.clone(),
            })
        }
        (Change::Remove { id }, _) => {
            let backup = second_name(dir, name).map_err(io("delete"))?;
            still_planned(name, *id)?;
            fs::rename_at(dir, name, backup.name()).map_err(io("delete"))?;
            Ok(Done::Moved {
                backup,
                name: name.clone(),
                shown: shown.clone(),
            })
        }
        (Change::Create { .. }, Some(mut temp)) => {
            if !temp.publish_noreplace(name).map_err(io("create"))? {
                return Err(conflict(
                    shown,
                    None,
                    format!(
                        "{} appeared while the patch was being applied",
                        quote(shown)
                    ),
                ));
            }
            Ok(Done::Added {
                dir,
                name: name.clone(),
                shown: shown.clone(),
            })
        }
        (_, None) => Err(ToolError::new(
            Code::InternalError,
            "a staged file is missing (a bug)",
        )),
    }
}

/// The lines of a file, each with its text without `\n` and whether the `\n` is there.
fn file_lines(bytes: &[u8]) -> impl Iterator<Item = Line<'_>> {
    bytes
        .split_inclusive(|&b| b == b'\n')
        .map(|l| match l.strip_suffix(b"\n") {
            Some(text) => Line {
                text,
                newline: true,
            },
            None => Line {
                text: l,
                newline: false,
            },
        })
}

/// The patched file as it is written out: a line without `\n` may only be the last.
struct Output {
    data: Vec<u8>,
    /// The last line written has no `\n`, and who wrote it (`None`: the file).
    open: Option<Option<usize>>,
}

impl Output {
    /// Append `line`, written by hunk `by` (`None`: copied from the file).
    fn push(&mut self, line: Line<'_>, by: Option<usize>) -> Result<(), (usize, String)> {
        if let Some(earlier) = self.open {
            let blame = earlier.or(by).unwrap_or(1);
            return Err((
                blame,
                "a line without a newline at the end of the file would be followed by more lines"
                    .into(),
            ));
        }
        self.data.extend_from_slice(line.text);
        if line.newline {
            self.data.push(b'\n');
        } else {
            self.open = Some(by);
        }
        Ok(())
    }
}

/// Apply `hunks` to `old` exactly; `Err((hunk, why))` names the 1-based hunk that does not fit.
/// Memory: the new content, whatever the number of lines.
fn apply_hunks(old: &[u8], hunks: &[Hunk<'_>]) -> Result<Vec<u8>, (usize, String)> {
    let mut lines = file_lines(old);
    let mut out = Output {
        data: Vec::with_capacity(old.len()),
        open: None,
    };
    // The 0-based number of the next line `lines` gives.
    let mut pos = 0usize;
    for (index, hunk) in hunks.iter().enumerate() {
        let number = index + 1;
        while pos < hunk.old_at {
            let Some(line) = lines.next() else {
                return Err((
                    number,
                    format!(
                        "it starts at line {}, but the file has {pos} lines",
                        hunk.old_at + 1
                    ),
                ));
            };
            out.push(line, None)?;
            pos += 1;
        }
        for (kind, line) in &hunk.lines {
            if *kind != Kind::Add {
                match lines.next() {
                    Some(have) if have == *line => {}
                    Some(_) => {
                        return Err((
                            number,
                            format!(
                                "line {} of the file is not what the hunk expects there",
                                pos + 1
                            ),
                        ))
                    }
                    None => {
                        return Err((
                            number,
                            format!("the file ends at line {pos}, before the hunk does"),
                        ))
                    }
                }
                pos += 1;
            }
            if *kind != Kind::Remove {
                out.push(*line, Some(number))?;
            }
        }
    }
    for line in lines {
        out.push(line, None)?;
    }
    Ok(out.data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(old: &str, patch: &str) -> Result<String, (usize, String)> {
        let files = parse::parse(patch).unwrap();
        apply_hunks(old.as_bytes(), &files[0].hunks).map(|b| String::from_utf8(b).unwrap())
    }

    #[test]
    fn hunks_apply_exactly_and_in_place() {
        let old = "a\nb\nc\nd\ne\n";
        let patch = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n@@ -4,0 +5 @@\n+after d\n@@ -5 +6,0 @@\n-e\n";
        assert_eq!(apply(old, patch).unwrap(), "a\nB\nc\nd\nafter d\n");
        // Context elsewhere in the file does not count: the header's line is where it must be.
        let shifted = "--- a/f\n+++ b/f\n@@ -2,2 +2,2 @@\n a\n-b\n+B\n";
        assert_eq!(apply(old, shifted).unwrap_err().0, 1);
    }

    #[test]
    fn line_endings_are_matched_and_written_as_the_patch_has_them() {
        let crlf = "one\r\ntwo\r\n";
        let lf_patch = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n";
        assert!(
            apply(crlf, lf_patch).is_err(),
            "an LF patch does not match a CRLF file"
        );
        let crlf_patch = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n one\r\n-two\r\n+TWO\r\n";
        assert_eq!(apply(crlf, crlf_patch).unwrap(), "one\r\nTWO\r\n");
        // A patch whose own lines end in CRLF carries CR into an LF file's lines: no match.
        assert!(apply("one\ntwo\n", crlf_patch).is_err());
    }

    #[test]
    fn no_newline_markers_add_and_remove_the_last_newline() {
        let add_nl = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-last\n\\ No newline at end of file\n+last\n";
        assert_eq!(apply("last", add_nl).unwrap(), "last\n");
        assert!(
            apply("last\n", add_nl).is_err(),
            "the file has the newline the patch says it lacks"
        );
        let drop_nl = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-last\n+last\n\\ No newline at end of file\n";
        assert_eq!(apply("last\n", drop_nl).unwrap(), "last");
        // Appending after a last line without newline needs the marker on its removal.
        let after = "--- a/f\n+++ b/f\n@@ -1,0 +2 @@\n+more\n";
        assert_eq!(apply("x", after).unwrap_err().0, 1);
    }

    /// A file replaced behind the adapter's back between planning and committing is a conflict
    /// found half-way through the commit: every step already done is undone.
    #[test]
    fn a_commit_that_fails_half_way_is_undone() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(dir.join("a.txt"), "a\n").unwrap();
        std::fs::write(dir.join("gone.txt"), "bye\n").unwrap();
        std::fs::write(dir.join("z.txt"), "z\n").unwrap();
        let patch = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n\
--- /dev/null\n+++ b/new/deep/n.txt\n@@ -0,0 +1 @@\n+n\n\
--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n\
--- a/z.txt\n+++ b/z.txt\n@@ -1 +1 @@\n-z\n+Z\n";
        let root = Root::open(dir).unwrap();
        let diffs = parse::parse(patch).unwrap();
        let mut plan = Plan::make(&root, &diffs, GitDir::Protected).unwrap();
        // Someone replaces z.txt (same content, new file) after the plan was made.
        std::fs::write(dir.join("z.new"), "z\n").unwrap();
        std::fs::rename(dir.join("z.new"), dir.join("z.txt")).unwrap();
        let before: Vec<_> = ["a.txt", "gone.txt", "z.txt"]
            .iter()
            .map(|n| std::fs::read(dir.join(n)).unwrap())
            .collect();
        let err = plan.commit(&root, GitDir::Protected).unwrap_err();
        assert_eq!(err.code, Code::PatchConflict, "{}", err.message);
        assert_eq!(err.details.unwrap(), json!({"path": "z.txt", "hunk": null}));
        let after: Vec<_> = ["a.txt", "gone.txt", "z.txt"]
            .iter()
            .map(|n| std::fs::read(dir.join(n)).unwrap())
            .collect();
        assert_eq!(after, before);
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["a.txt", "gone.txt", "z.txt"],
            "leftovers or made folders"
        );
        // The same plan on an untouched tree commits, and leaves no second name behind.
        let mut plan = Plan::make(&root, &diffs, GitDir::Protected).unwrap();
        plan.commit(&root, GitDir::Protected).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "A\n");
        assert_eq!(
            std::fs::read_to_string(dir.join("new/deep/n.txt")).unwrap(),
            "n\n"
        );
        assert!(!dir.join("gone.txt").exists());
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["a.txt", "new", "z.txt"]);
    }

    #[test]
    fn a_hunk_past_the_end_conflicts() {
        let patch = "--- a/f\n+++ b/f\n@@ -9 +9 @@\n-x\n+y\n";
        let (hunk, why) = apply("x\n", patch).unwrap_err();
        assert_eq!(hunk, 1);
        assert!(why.contains("the file has 1 lines"), "{why}");
        let patch = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n x\n-y\n+z\n";
        assert!(apply("x\n", patch)
            .unwrap_err()
            .1
            .contains("ends at line 1"));
    }
}
