//! Containment: turning a request's path into an open descriptor that lies beneath the root.
//!
//! Owns the two invariants every tool relies on:
//!
//! 1. **Lexical**: a request path is relative, has no NUL, is at most [`MAX_PATH_BYTES`] bytes,
//!    and its `..` components never climb above the root ([`RelPath::parse`]). `.` and empty
//!    components are dropped and `..` is folded into its parent lexically, before anything
//!    touches the disk (so `link/..` means the root even when `link` is a symlink).
//! 2. **Resolved**: every open starts from the root's directory handle, never from a path string,
//!    and no step of the resolution may leave the tree under it — whatever symlinks exist or are
//!    swapped in meanwhile. Two mechanisms provide this:
//!    - [`Resolver::Openat2`] (Linux ≥ 5.6): `openat2(root_fd, path, RESOLVE_BENEATH |
//!      RESOLVE_NO_MAGICLINKS)`. The kernel follows symlinks that stay inside and fails with
//!      `EXDEV` on any escape: an absolute symlink target (even one pointing back inside), a
//!      `..` above the root, a `/proc` magic link.
//!    - [`Resolver::Walk`]: a userspace walk that opens one component at a time with
//!      `O_NOFOLLOW` relative to the previous directory handle, reads symlinks itself with
//!      `readlinkat` and splices their targets in, and applies `..` by popping its own stack of
//!      handles — so neither the kernel nor a concurrent rename can take it above the root.
//!      Absolute targets and `..` past the root are refused exactly as `openat2` refuses them.
//!      It is the fallback when `openat2` is `ENOSYS`, and it is what `write`/`edit` use
//!      ([`Root::locate`]), because they need the *parent directory handle* of the resolved
//!      entry to create a temp file and `renameat` next to it, which `openat2` cannot give.
//!
//! This module must not read or write file contents, and must never put a host path into an
//! error: [`PathError`] carries no path at all; callers phrase messages with the request's path.

use super::{quote, Code, ToolError};
use ptd_sys::fs::{self, FileType, Mode, OFlags};
use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

/// Longest request path accepted, in bytes (Linux `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest single path component accepted, in bytes (Linux `NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;
/// Symlinks followed in one resolution before it is a loop (Linux `MAXSYMLINKS`).
pub const MAX_SYMLINKS: usize = 40;
/// Steps of one userspace walk (components, `..`, created directories) before it gives up; a
/// bound against an adversary that keeps deleting what the walk just created.
const MAX_WALK_STEPS: usize = 4096;
/// Mode for directories made by `create_dirs` (the umask applies).
const DIR_MODE: Mode = Mode::from_raw_mode(0o777);

/// Why a path could not be resolved. Deliberately path-free.
#[derive(Debug)]
pub enum PathError {
    /// Not a usable path string; the text says why.
    Invalid(&'static str),
    /// Absolute, or a `..` / symlink that leaves the root.
    OutsideRoot,
    /// A component does not exist.
    NotFound,
    /// A component that must be a directory is something else.
    NotADirectory,
    /// More than [`MAX_SYMLINKS`] links, or a link swapped in where none was allowed.
    SymlinkLoop,
    /// The caller's [`Guard`] refused the entry (or a directory to create); the text says why.
    Refused(&'static str),
    /// Any other operating-system error.
    Io(io::Error),
}

impl From<io::Error> for PathError {
    fn from(err: io::Error) -> PathError {
        match err.raw_os_error() {
            Some(libc::EXDEV) => PathError::OutsideRoot,
            Some(libc::ENOENT) => PathError::NotFound,
            Some(libc::ENOTDIR) => PathError::NotADirectory,
            Some(libc::ELOOP) => PathError::SymlinkLoop,
            Some(libc::ENAMETOOLONG) => {
                PathError::Invalid("the path or one of its parts is too long")
            }
            // fs::cstring's error: no errno, kind InvalidInput (a real EINVAL has an errno).
            None if err.kind() == io::ErrorKind::InvalidInput => {
                PathError::Invalid("the path contains a NUL byte")
            }
            _ => PathError::Io(err),
        }
    }
}

/// A request path that passed the lexical checks: normal components only, root-relative.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RelPath {
    parts: Vec<String>,
}

impl RelPath {
    /// The root itself.
    pub fn root() -> RelPath {
        RelPath::default()
    }

    /// Check and normalise a request path. `"."` (or `"a/.."`) is the root; `""` is refused.
    pub fn parse(raw: &str) -> Result<RelPath, PathError> {
        if raw.is_empty() {
            return Err(PathError::Invalid("the path is empty"));
        }
        if raw.len() > MAX_PATH_BYTES {
            return Err(PathError::Invalid("the path is longer than 4096 bytes"));
        }
        if raw.contains('\0') {
            return Err(PathError::Invalid("the path contains a NUL byte"));
        }
        if raw.starts_with('/') {
            return Err(PathError::OutsideRoot);
        }
        let mut parts: Vec<String> = Vec::new();
        for part in raw.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    if parts.pop().is_none() {
                        return Err(PathError::OutsideRoot);
                    }
                }
                name if name.len() > MAX_NAME_BYTES => {
                    return Err(PathError::Invalid(
                        "a path component is longer than 255 bytes",
                    ));
                }
                name => parts.push(name.to_owned()),
            }
        }
        Ok(RelPath { parts })
    }

    /// The normalised components, in order.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().map(String::as_str)
    }

    /// True for the root itself.
    pub fn is_root(&self) -> bool {
        self.parts.is_empty()
    }

    /// The normalised, root-relative spelling (`"."` for the root) used in outputs and messages.
    pub fn display(&self) -> String {
        if self.parts.is_empty() {
            ".".to_owned()
        } else {
            self.parts.join("/")
        }
    }

    /// The path handed to `openat2`: never absolute, never `..`.
    fn to_cstring(&self) -> Result<CString, PathError> {
        Ok(fs::cstring(self.display().as_bytes())?)
    }
}

/// Which containment mechanism a [`Root`] uses for plain opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolver {
    /// `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`.
    Openat2,
    /// The userspace walk (see the module docs).
    Walk,
}

/// A caller's veto on where a resolution for writing ends, or on a directory it would create:
/// given the root's handle, the directories walked through below it (name, handle) and the
/// entry's name in the last of them, `Some(why)` refuses. It only looks, never changes anything.
pub(crate) type Guard<'a> =
    &'a dyn Fn(BorrowedFd<'_>, &[(Vec<u8>, OwnedFd)], &[u8]) -> Option<&'static str>;

/// Where [`Root::locate`] ended: the directory handle holding the entry, and the entry's name
/// in it (`None` when the path resolved to a directory itself, e.g. the root).
#[derive(Debug)]
pub struct Located {
    pub parent: OwnedFd,
    pub name: Option<CString>,
}

/// The workspace root: an open directory handle every resolution starts from.
#[derive(Debug)]
pub struct Root {
    dir: OwnedFd,
    resolver: Cell<Resolver>,
}

impl Root {
    /// Open `path` (the host's `--root` or `.`) as the root directory.
    pub fn open(path: &Path) -> io::Result<Root> {
        let default = if cfg!(target_os = "linux") {
            Resolver::Openat2
        } else {
            Resolver::Walk
        };
        Root::open_with(path, default)
    }

    /// Open `path` as the root and force a resolver (the tests run both).
    pub fn open_with(path: &Path, resolver: Resolver) -> io::Result<Root> {
        // The host chose this path, so it is opened like any host path (following links,
        // relative to the working directory): the only place the process's cwd is ever used.
        let dir = fs::open_dir_path(path)?;
        Ok(Root {
            dir,
            resolver: Cell::new(resolver),
        })
    }

    /// The root's directory handle (for the Landlock rule that confines the adapter to it).
    pub fn handle(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// The resolver plain opens currently use (`Openat2` turns into `Walk` after an `ENOSYS`).
    #[cfg(test)]
    pub fn resolver(&self) -> Resolver {
        self.resolver.get()
    }

    /// Open `rel` with `flags`, following symlinks only while they stay beneath the root.
    pub fn open_beneath(&self, rel: &RelPath, flags: OFlags) -> Result<OwnedFd, PathError> {
        #[cfg(target_os = "linux")]
        if self.resolver.get() == Resolver::Openat2 {
            match fs::open_beneath(self.dir.as_fd(), &rel.to_cstring()?, flags) {
                Err(err) if err.raw_os_error() == Some(libc::ENOSYS) => {
                    self.resolver.set(Resolver::Walk);
                }
                other => return other.map_err(PathError::from),
            }
        }
        let located = self.walk(rel, false, None)?;
        let fd = match located.name {
            None => fs::open_at(located.parent.as_fd(), c".", flags, Mode::empty())?,
            // O_NOFOLLOW: the walk saw a non-link here; a link swapped in since is ELOOP.
            Some(name) => fs::open_at(
                located.parent.as_fd(),
                &name,
                flags | OFlags::NOFOLLOW,
                Mode::empty(),
            )?,
        };
        Ok(fd)
    }

    /// Resolve `rel` to its parent directory handle and final name, following symlinks (the
    /// final one included) while they stay beneath the root. The final entry need not exist.
    /// With `create_dirs`, missing directories on the way are created (inside the root only).
    /// A `guard` is asked before each directory is created and about the final entry; its
    /// refusal is [`PathError::Refused`], with nothing created past that point.
    pub fn locate(
        &self,
        rel: &RelPath,
        create_dirs: bool,
        guard: Option<Guard<'_>>,
    ) -> Result<Located, PathError> {
        self.walk(rel, create_dirs, guard)
    }

    /// The userspace walk. `stack` holds a handle per directory below the root, with the name
    /// it was opened by; `..` pops it.
    fn walk(
        &self,
        rel: &RelPath,
        create_dirs: bool,
        guard: Option<Guard<'_>>,
    ) -> Result<Located, PathError> {
        let vetoed = |stack: &[(Vec<u8>, OwnedFd)], name: &[u8]| match guard {
            Some(guard) => guard(self.dir.as_fd(), stack, name)
                .map_or(Ok(()), |why| Err(PathError::Refused(why))),
            None => Ok(()),
        };
        let mut stack: Vec<(Vec<u8>, OwnedFd)> = Vec::new();
        let mut queue: VecDeque<Vec<u8>> =
            rel.parts.iter().map(|p| p.as_bytes().to_vec()).collect();
        let mut links = 0usize;
        let mut steps = 0usize;
        while let Some(part) = queue.pop_front() {
            steps += 1;
            if steps > MAX_WALK_STEPS {
                return Err(PathError::SymlinkLoop);
            }
            let cur: BorrowedFd<'_> = stack.last().map_or(self.dir.as_fd(), |(_, fd)| fd.as_fd());
            match part.as_slice() {
                b"" | b"." => {}
                b".." => {
                    if stack.pop().is_none() {
                        return Err(PathError::OutsideRoot);
                    }
                }
                name => {
                    if name.len() > MAX_NAME_BYTES {
                        return Err(PathError::Invalid(
                            "a path component is longer than 255 bytes",
                        ));
                    }
                    let cname = fs::cstring(name)?;
                    if queue.is_empty() {
                        // The final component: report where it is, following a link.
                        match fs::lstat_at(cur, &cname) {
                            Ok(st) if fs::kind(&st) == FileType::Symlink => {
                                if !splice_link(cur, &cname, &mut queue, &mut links)? {
                                    queue.push_front(part);
                                }
                            }
                            Ok(_) => {
                                vetoed(&stack, name)?;
                                return located(self.dir.as_fd(), Some(cname), &stack);
                            }
                            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {
                                vetoed(&stack, name)?;
                                return located(self.dir.as_fd(), Some(cname), &stack);
                            }
                            Err(err) => return Err(err.into()),
                        }
                        continue;
                    }
                    match fs::open_dir_at(cur, &cname) {
                        Ok(fd) => stack.push((part, fd)),
                        Err(err) => match err.raw_os_error() {
                            Some(libc::ELOOP) | Some(libc::ENOTDIR) => {
                                let st = fs::lstat_at(cur, &cname)?;
                                if fs::kind(&st) != FileType::Symlink {
                                    return Err(PathError::NotADirectory);
                                }
                                if !splice_link(cur, &cname, &mut queue, &mut links)? {
                                    queue.push_front(part);
                                }
                            }
                            Some(libc::ENOENT) if create_dirs => {
                                vetoed(&stack, name)?;
                                match fs::mkdir_at(cur, &cname, DIR_MODE) {
                                    Ok(()) => {}
                                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                                    Err(e) => return Err(e.into()),
                                }
                                // Open what we made on the next step, like any other entry.
                                queue.push_front(part);
                            }
                            _ => return Err(err.into()),
                        },
                    }
                }
            }
        }
        // The queue ran out on `.`/`..` (or was empty): the path is a directory itself.
        located(self.dir.as_fd(), None, &stack)
    }
}

/// Where a walk from `root` through `dirs` ended: the last of `dirs` (or the root) holds `name`.
fn located(
    root: BorrowedFd<'_>,
    name: Option<CString>,
    dirs: &[(Vec<u8>, OwnedFd)],
) -> Result<Located, PathError> {
    let parent = dirs.last().map_or(root, |(_, fd)| fd.as_fd());
    Ok(Located {
        parent: parent.try_clone_to_owned()?,
        name,
    })
}

/// Replace the symlink `name` in `dir` by its target's components at the front of `queue`.
/// `Ok(false)`: `name` stopped being a symlink since it was looked at (a concurrent swap); the
/// caller looks at it again (the walk's step bound keeps that finite).
fn splice_link(
    dir: BorrowedFd<'_>,
    name: &CStr,
    queue: &mut VecDeque<Vec<u8>>,
    links: &mut usize,
) -> Result<bool, PathError> {
    *links += 1;
    if *links > MAX_SYMLINKS {
        return Err(PathError::SymlinkLoop);
    }
    let target = match fs::readlink_at(dir, name) {
        Ok(target) => target,
        Err(err) if err.raw_os_error() == Some(libc::EINVAL) => return Ok(false),
        Err(err) => return Err(err.into()),
    };
    if target.is_empty() {
        return Err(PathError::NotFound);
    }
    if target.starts_with(b"/") {
        // As with RESOLVE_BENEATH: an absolute target is outside, even if it names the root.
        return Err(PathError::OutsideRoot);
    }
    for part in target.split(|&b| b == b'/').rev() {
        queue.push_front(part.to_vec());
    }
    Ok(true)
}

// ---- request paths as the tools see them ------------------------------------------------------

/// Map a resolution failure to a tool error about `shown` (the request's own path).
pub(crate) fn path_error(err: PathError, shown: &str) -> ToolError {
    match err {
        PathError::Invalid(why) => ToolError::new(Code::InvalidInput, format!("input.path: {why}")),
        PathError::OutsideRoot => ToolError::new(
            Code::PathOutsideRoot,
            format!(
                "{} resolves outside the workspace root; paths must be relative and stay inside it",
                quote(shown)
            ),
        ),
        PathError::NotFound => {
            ToolError::new(Code::NotFound, format!("{} does not exist", quote(shown)))
        }
        PathError::NotADirectory => ToolError::new(
            Code::NotADirectory,
            format!("a component of {} is not a directory", quote(shown)),
        ),
        PathError::SymlinkLoop => ToolError::new(
            Code::SymlinkLoop,
            format!(
                "{} has too many levels of symbolic links, or one changed during the call",
                quote(shown)
            ),
        ),
        PathError::Refused(why) => super::gitdir::denied(shown, why),
        PathError::Io(err) => ToolError::io("resolve", shown, &err),
    }
}

/// Parse `input.path`; `shown` for messages is the raw request text (relative or refused).
pub fn parse_path(raw: &str) -> Result<RelPath, ToolError> {
    RelPath::parse(raw).map_err(|err| match err {
        PathError::OutsideRoot if raw.starts_with('/') => ToolError::new(
            Code::PathOutsideRoot,
            "absolute paths are refused; paths are relative to the workspace root",
        ),
        other => path_error(other, raw),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::io::Read;
    use std::os::unix::fs::symlink;

    /// A root at `tmp/root` with `tmp/outside/secret.txt` next to it.
    fn fixture() -> (tempfile::TempDir, std::path::PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        fs::create_dir_all(root.join("src/deep")).unwrap();
        fs::write(root.join("src/deep/a.txt"), "inside\n").unwrap();
        fs::create_dir(tmp.path().join("outside")).unwrap();
        fs::write(tmp.path().join("outside/secret.txt"), "secret\n").unwrap();
        (tmp, root)
    }

    fn both(root: &Path) -> [Root; 2] {
        [
            Root::open_with(root, Resolver::Openat2).unwrap(),
            Root::open_with(root, Resolver::Walk).unwrap(),
        ]
    }

    fn read(root: &Root, path: &str) -> Result<String, PathError> {
        let fd = root.open_beneath(&RelPath::parse(path)?, OFlags::RDONLY)?;
        let mut text = String::new();
        fs::File::from(fd).read_to_string(&mut text).unwrap();
        Ok(text)
    }

    fn assert_outside(result: Result<String, PathError>) {
        assert!(
            matches!(result, Err(PathError::OutsideRoot)),
            "expected OutsideRoot, got {result:?}"
        );
    }

    #[test]
    fn parse_normalises_and_refuses_lexical_escapes() {
        assert_eq!(RelPath::parse("./a//b/./c/").unwrap().display(), "a/b/c");
        assert_eq!(RelPath::parse("a/../b").unwrap().display(), "b");
        assert!(RelPath::parse("a/..").unwrap().is_root());
        assert_eq!(RelPath::parse(".").unwrap().display(), ".");
        assert!(matches!(RelPath::parse(".."), Err(PathError::OutsideRoot)));
        assert!(matches!(
            RelPath::parse("a/../../b"),
            Err(PathError::OutsideRoot)
        ));
        assert!(matches!(
            RelPath::parse("/etc/passwd"),
            Err(PathError::OutsideRoot)
        ));
        assert!(matches!(RelPath::parse(""), Err(PathError::Invalid(_))));
        assert!(matches!(RelPath::parse("a\0b"), Err(PathError::Invalid(_))));
        assert!(matches!(
            RelPath::parse(&"a/".repeat(3000)),
            Err(PathError::Invalid(_))
        ));
        assert!(matches!(
            RelPath::parse(&"x".repeat(256)),
            Err(PathError::Invalid(_))
        ));
    }

    #[test]
    fn plain_paths_resolve_with_both_resolvers() {
        let (_tmp, root) = fixture();
        for r in both(&root) {
            let before = r.resolver();
            assert_eq!(read(&r, "src/deep/a.txt").unwrap(), "inside\n");
            assert!(matches!(read(&r, "src/nope.txt"), Err(PathError::NotFound)));
            assert!(matches!(
                read(&r, "src/deep/a.txt/x"),
                Err(PathError::NotADirectory)
            ));
            // This suite runs on Linux ≥ 5.6: openat2 really is in use, not silently bypassed.
            assert_eq!(r.resolver(), before);
        }
    }

    #[test]
    fn symlink_to_etc_passwd_is_outside() {
        let (_tmp, root) = fixture();
        symlink("/etc/passwd", root.join("passwd")).unwrap();
        for r in both(&root) {
            assert_outside(read(&r, "passwd"));
        }
    }

    #[test]
    fn symlinked_directory_in_the_middle_pointing_outside_is_outside() {
        let (tmp, root) = fixture();
        // One absolute, one relative climbing out through `..`.
        symlink(tmp.path().join("outside"), root.join("src/abs")).unwrap();
        symlink("../../outside", root.join("src/rel")).unwrap();
        for r in both(&root) {
            assert_outside(read(&r, "src/abs/secret.txt"));
            assert_outside(read(&r, "src/rel/secret.txt"));
        }
    }

    #[test]
    fn symlinks_that_stay_inside_keep_working() {
        let (_tmp, root) = fixture();
        symlink("deep/a.txt", root.join("src/link.txt")).unwrap();
        symlink("../src/deep", root.join("src/deeplink")).unwrap();
        symlink("src/link.txt", root.join("chain")).unwrap();
        for r in both(&root) {
            assert_eq!(read(&r, "src/link.txt").unwrap(), "inside\n");
            assert_eq!(read(&r, "src/deeplink/a.txt").unwrap(), "inside\n");
            assert_eq!(read(&r, "chain").unwrap(), "inside\n");
        }
    }

    #[test]
    fn a_link_back_to_the_root_by_absolute_path_is_still_refused() {
        // RESOLVE_BENEATH semantics, mirrored by the walk: absolute targets never resolve.
        let (_tmp, root) = fixture();
        symlink(root.join("src/deep/a.txt"), root.join("abs-inside")).unwrap();
        for r in both(&root) {
            assert_outside(read(&r, "abs-inside"));
        }
    }

    #[test]
    fn symlink_loops_are_reported_not_followed_forever() {
        let (_tmp, root) = fixture();
        symlink("loop-b", root.join("loop-a")).unwrap();
        symlink("loop-a", root.join("loop-b")).unwrap();
        for r in both(&root) {
            assert!(matches!(read(&r, "loop-a"), Err(PathError::SymlinkLoop)));
        }
    }

    #[test]
    fn locate_follows_a_final_link_and_refuses_one_that_leaves() {
        let (_tmp, root) = fixture();
        symlink("deep/a.txt", root.join("src/link.txt")).unwrap();
        symlink("../../outside/new.txt", root.join("src/dangling-out")).unwrap();
        let r = Root::open(&root).unwrap();
        let loc = r
            .locate(&RelPath::parse("src/link.txt").unwrap(), false, None)
            .unwrap();
        assert_eq!(loc.name.unwrap().as_bytes(), b"a.txt");
        assert!(matches!(
            r.locate(&RelPath::parse("src/dangling-out").unwrap(), false, None),
            Err(PathError::OutsideRoot)
        ));
    }

    #[test]
    fn locate_creates_missing_directories_only_when_asked() {
        let (tmp, root) = fixture();
        let r = Root::open(&root).unwrap();
        let rel = RelPath::parse("new/sub/file.txt").unwrap();
        assert!(matches!(
            r.locate(&rel, false, None),
            Err(PathError::NotFound)
        ));
        let loc = r.locate(&rel, true, None).unwrap();
        assert_eq!(loc.name.unwrap().as_bytes(), b"file.txt");
        assert!(root.join("new/sub").is_dir());
        // Through a link that leaves, nothing is created outside.
        symlink("../outside", root.join("out")).unwrap();
        let rel = RelPath::parse("out/made/file.txt").unwrap();
        assert!(matches!(
            r.locate(&rel, true, None),
            Err(PathError::OutsideRoot)
        ));
        assert!(!tmp.path().join("outside/made").exists());
    }

    /// Atomically exchange two names (renameat2 RENAME_EXCHANGE).
    fn exchange(a: &Path, b: &Path) {
        use rustix::fs::{renameat_with, RenameFlags, CWD};
        renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).expect("renameat2");
    }

    #[test]
    fn a_symlink_swapped_in_during_resolution_never_escapes() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let (tmp, root) = fixture();
        fs::create_dir(root.join("swap")).unwrap();
        fs::write(root.join("swap/secret.txt"), "inside\n").unwrap();
        symlink(tmp.path().join("outside"), root.join("other")).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (stop, a, b) = (stop.clone(), root.join("swap"), root.join("other"));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    exchange(&a, &b);
                }
            })
        };
        let mut inside = 0;
        for r in both(&root) {
            for i in 0..3000 {
                match read(&r, "swap/secret.txt") {
                    Ok(text) => {
                        assert_eq!(text, "inside\n", "read escaped the root");
                        inside += 1;
                    }
                    Err(PathError::OutsideRoot | PathError::NotFound | PathError::SymlinkLoop) => {}
                    Err(PathError::NotADirectory) => {}
                    Err(other) => panic!("unexpected {other:?}"),
                }
                let rel = RelPath::parse(&format!("swap/new-{i}/f")).unwrap();
                if let Ok(loc) = r.locate(&rel, true, None) {
                    let name = loc.name.unwrap();
                    let _ = ptd_sys::fs::open_at(
                        loc.parent.as_fd(),
                        &name,
                        OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW,
                        Mode::from_raw_mode(0o644),
                    );
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        assert!(
            inside > 0,
            "the race never let a read through; the test proves nothing"
        );
        let leaked: Vec<_> = fs::read_dir(tmp.path().join("outside"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leaked, vec![std::ffi::OsString::from("secret.txt")]);
    }

    #[test]
    fn the_root_itself_resolves_to_a_directory() {
        let (_tmp, root) = fixture();
        for r in both(&root) {
            let fd = r.open_beneath(&RelPath::root(), OFlags::RDONLY).unwrap();
            assert!(fs::File::from(fd).metadata().unwrap().is_dir());
        }
        symlink(".", root.join("self")).unwrap();
        let loc = Root::open(&root)
            .unwrap()
            .locate(&RelPath::parse("self").unwrap(), false, None)
            .unwrap();
        assert!(loc.name.is_none());
    }
}
