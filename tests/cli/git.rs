//! `parent-tool-dispatch adapter git` (SPEC §15.2) with the host's real git: the tools, their
//! refusals, and a checkout rigged with every way a repository can make git run a program —
//! each rigged program writes a marker, and after every tool the marker folder must be empty
//! while the tool still worked and stored the file's exact bytes. The rig runs with every git
//! found on the machine (Debian's and a newer one under /usr/local, where both exist), and a
//! control run of plain git on a copy of the same checkout proves that each rig is live.

use super::{require, skip, Cmd};
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every distinct git binary on this machine new enough for the adapter (2.32), found on
/// `PATH` and in the usual places. The suite needs one: `.ci/run` installs git when missing.
pub(super) fn gits() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).collect();
    dirs.extend(["/usr/local/bin", "/usr/bin", "/bin"].map(PathBuf::from));
    let mut found: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        let candidate = dir.join("git");
        let Ok(real) = fs::canonicalize(&candidate) else {
            continue;
        };
        if found
            .iter()
            .any(|f| fs::canonicalize(f).ok() == Some(real.clone()))
        {
            continue;
        }
        let version = Command::new(&candidate).arg("--version").output().unwrap();
        let text = String::from_utf8_lossy(&version.stdout);
        let numbers: Vec<u32> = text
            .trim()
            .trim_start_matches("git version ")
            .split('.')
            .take(2)
            .filter_map(|n| n.parse().ok())
            .collect();
        if numbers.len() == 2 && (numbers[0], numbers[1]) >= (2, 32) {
            found.push(candidate);
        }
    }
    assert!(!found.is_empty(), "no git 2.32 or later on this machine");
    eprintln!("the rig runs with {found:?}");
    found
}

/// A folder with only `git` in it (a link to `git`), for the adapter's `PATH`.
pub(super) fn path_with(tmp: &Path, git: &Path) -> String {
    let dir = tmp.join(format!(
        "bin-{}",
        git.display().to_string().replace('/', "_")
    ));
    fs::create_dir_all(&dir).unwrap();
    let link = dir.join("git");
    if !link.exists() {
        symlink(git, &link).unwrap();
    }
    format!("{}:/usr/bin:/bin", dir.display())
}

/// Plain git for the tests' own set-up and checks, hardened so that the set-up itself runs
/// nothing of the rig (fails the test on a non-zero exit).
/// `chown -R` to `uid` (and the group of that number), without following links.
fn chown_tree(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
    if fs::symlink_metadata(path).unwrap().is_dir() {
        for entry in fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path(), uid);
        }
    }
}

pub(super) fn test_git(root: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("git")
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
        ])
        // A repository given to a confined adapter's user (SPEC §13.2) is still the test's.
        .args(["-c", "safe.directory=*"])
        .args(args)
        .current_dir(root)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Set Up")
        .env("GIT_AUTHOR_EMAIL", "setup@example.org")
        .env("GIT_COMMITTER_NAME", "Set Up")
        .env("GIT_COMMITTER_EMAIL", "setup@example.org")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A repository at `tmp/root` with one commit of `a.txt`.
pub(super) struct Repo {
    pub(super) tmp: tempfile::TempDir,
}

impl Repo {
    pub(super) fn new() -> Repo {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        fs::create_dir_all(&root).unwrap();
        test_git(&root, &["init", "-q", "-b", "main"]);
        fs::write(root.join("a.txt"), "one\n").unwrap();
        test_git(&root, &["add", "a.txt"]);
        test_git(&root, &["commit", "-q", "-m", "first"]);
        Repo { tmp }
    }

    pub(super) fn root(&self) -> PathBuf {
        self.tmp.path().join("root")
    }

    pub(super) fn write(&self, rel: &str, bytes: &[u8]) {
        let path = self.root().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }

    pub(super) fn git(&self, args: &[&str]) -> String {
        String::from_utf8(test_git(&self.root(), args)).unwrap()
    }

    pub(super) fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"]).trim().to_string()
    }
}

pub(super) fn request(tool: &str, input: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "schema": "wp-codebox/parent-tool-request/v1",
        "version": 1,
        "request_id": "ptr_git_1",
        "tool": tool,
        "operation": "call",
        "input": input,
        "sandbox_session": {"sandbox_session_id": "sandbox_1"},
        "authorization": {"allowed_tools": [tool]},
        "metadata": {}
    }))
    .unwrap()
}

/// The adapter on `root` with `flags`, run with a `PATH` and nothing else of the test's
/// environment that git reads: exit 0, nothing on stderr, one envelope.
pub(super) fn adapter(root: &Path, flags: &[&str]) -> Cmd {
    Cmd::new(["adapter", "git", "--root"])
        .arg(root)
        .args(flags)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env_remove("HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
}

pub(super) fn call(cmd: Cmd, tool: &str, input: Value) -> Value {
    cmd.stdin(request(tool, input))
        .run()
        .exit(0)
        .stderr_empty()
        .json()
}

pub(super) fn succeeded(env: &Value) -> &Value {
    assert_eq!(env["status"], "succeeded", "{env}");
    &env["output"]
}

/// `(status, code)` of a failure, which carries no output.
pub(super) fn failure(env: &Value) -> (String, String) {
    assert!(env.get("output").is_none(), "{env}");
    (
        env["status"].as_str().unwrap().to_string(),
        env["error"]["code"].as_str().unwrap().to_string(),
    )
}

pub(super) fn pair(status: &str, code: &str) -> (String, String) {
    (status.to_string(), code.to_string())
}

/// A failure with this status and code whose message names no path under `host`.
#[track_caller]
pub(super) fn refused(
    env: &Value,
    status: &str,
    code: &str,
    host: &Path,
    what: impl std::fmt::Display,
) {
    assert_eq!(failure(env), pair(status, code), "{what}");
    let message = env["error"]["message"].as_str().unwrap();
    assert!(
        !message.contains(host.to_str().unwrap()),
        "{what}: {message}"
    );
}

#[test]
fn status_diff_log_add_and_commit_work_end_to_end() {
    let repo = Repo::new();
    let root = repo.root();
    repo.write("a.txt", b"one\ntwo\n");
    repo.write("new file.txt", b"new\n");
    let out = call(adapter(&root, &[]), "git.status", json!({}));
    let out = succeeded(&out);
    assert_eq!(out["branch"], "main");
    assert_eq!(out["head"], repo.head());
    assert_eq!(
        out["entries"],
        json!([
            {"path": "a.txt", "index": ".", "worktree": "M"},
            {"path": "new file.txt", "index": "?", "worktree": "?"}
        ])
    );
    assert_eq!(out["truncated"], false);

    let out = call(adapter(&root, &[]), "git.diff", json!({}));
    let out = succeeded(&out);
    let diff = out["diff"].as_str().unwrap();
    assert!(diff.starts_with("diff --git a/a.txt b/a.txt\n"), "{diff}");
    assert!(diff.contains("\n+two\n"), "{diff}");
    assert_eq!(out["bytes"], diff.len());
    assert_eq!(out["truncated"], false);

    let env = call(
        adapter(&root, &["--allow-commit"]),
        "git_add",
        json!({"paths": ["./a.txt", "new file.txt"]}),
    );
    assert_eq!(succeeded(&env)["added"], json!(["a.txt", "new file.txt"]));
    assert_eq!(env["tool"], "git_add");
    let out = call(
        adapter(&root, &[]),
        "git.diff",
        json!({"staged": true, "path": "new file.txt"}),
    );
    let diff = succeeded(&out)["diff"].as_str().unwrap().to_string();
    assert!(
        diff.contains("+++ b/new file.txt\t\n@@ -0,0 +1 @@\n+new\n"),
        "{diff}"
    );
    assert!(!diff.contains("a.txt"), "{diff}");

    let env = call(
        adapter(
            &root,
            &["--allow-commit", "--author", "Ann Agent <ann@example.org>"],
        ),
        "git.commit",
        json!({"message": "\nSecond commit\n\n# kept, not a comment\n\n"}),
    );
    let commit = succeeded(&env)["commit"].as_str().unwrap().to_string();
    assert_eq!(commit, repo.head());
    assert_eq!(
        repo.git(&["log", "-1", "--format=%an <%ae>|%cn <%ce>|%B"]),
        "Ann Agent <ann@example.org>|Ann Agent <ann@example.org>|Second commit\n\n# kept, not a comment\n\n"
    );

    let out = call(adapter(&root, &[]), "git.log", json!({"max": 5}));
    let commits = succeeded(&out)["commits"].as_array().unwrap().clone();
    assert_eq!(commits.len(), 2);
    assert_eq!(commits[0]["commit"], commit);
    assert_eq!(commits[0]["subject"], "Second commit");
    assert_eq!(commits[0]["author_name"], "Ann Agent");
    assert_eq!(commits[0]["author_email"], "ann@example.org");
    assert!(commits[0]["author_date"].as_str().unwrap().contains('T'));
    assert_eq!(commits[1]["subject"], "first");
    let out = call(adapter(&root, &[]), "git.log", json!({"max": 1}));
    assert_eq!(succeeded(&out)["commits"].as_array().unwrap().len(), 1);
    // Nothing left to commit: git's own reason.
    let env = call(
        adapter(&root, &["--allow-commit", "--author", "A <a@example.org>"]),
        "git.commit",
        json!({"message": "empty"}),
    );
    assert_eq!(failure(&env), pair("failed", "git_failed"));
    let message = env["error"]["message"].as_str().unwrap();
    assert!(message.contains("nothing to commit"), "{message}");
}

#[test]
fn an_unborn_branch_and_a_detached_head_are_told_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    fs::create_dir_all(&root).unwrap();
    test_git(&root, &["init", "-q", "-b", "trunk"]);
    let out = call(adapter(&root, &[]), "git.status", json!({}));
    assert_eq!(
        succeeded(&out),
        &json!({"branch": "trunk", "entries": [], "truncated": false})
    );
    let out = call(adapter(&root, &[]), "git.log", json!({}));
    assert_eq!(succeeded(&out), &json!({"commits": [], "truncated": false}));
    let repo = Repo::new();
    let head = repo.head();
    repo.git(&["checkout", "-q", "--detach"]);
    let out = call(adapter(&repo.root(), &[]), "git.status", json!({}));
    assert_eq!(succeeded(&out)["branch"], Value::Null);
    assert_eq!(succeeded(&out)["head"], head);
}

#[test]
fn a_large_diff_is_cut_and_says_so() {
    let repo = Repo::new();
    // 2 MiB of changes, with multi-byte characters so that the cut must find a boundary.
    let line = "é".repeat(99) + "\n";
    repo.write(
        "a.txt",
        line.repeat(2 * 1024 * 1024 / line.len()).as_bytes(),
    );
    let out = call(adapter(&repo.root(), &[]), "git.diff", json!({}));
    let out = succeeded(&out);
    assert_eq!(out["truncated"], true);
    let diff = out["diff"].as_str().unwrap();
    assert!(
        diff.len() <= 1 << 20 && diff.len() > (1 << 20) - 4,
        "{}",
        diff.len()
    );
    assert_eq!(out["bytes"], diff.len());
    assert!(!diff.contains('\u{fffd}'));
}

#[test]
fn writing_tools_need_allow_commit_and_change_nothing_without_it() {
    let repo = Repo::new();
    repo.write("b.txt", b"b\n");
    let head = repo.head();
    for (tool, input) in [
        ("git.add", json!({"paths": ["b.txt"]})),
        ("git_commit", json!({"message": "x"})),
        // Refused before the input is even looked at.
        ("git.add", json!({"bogus": 1})),
    ] {
        let env = call(adapter(&repo.root(), &[]), tool, input);
        assert_eq!(
            failure(&env),
            pair("denied", "operation_not_permitted"),
            "{tool}"
        );
        assert!(env["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--allow-commit"));
    }
    assert_eq!(repo.head(), head);
    assert_eq!(repo.git(&["status", "--porcelain"]), "?? b.txt\n");
}

#[test]
fn paths_outside_the_root_are_denied_and_nothing_is_staged() {
    let repo = Repo::new();
    let root = repo.root();
    fs::write(repo.tmp.path().join("outside.txt"), "secret\n").unwrap();
    symlink("../outside.txt", root.join("out-link")).unwrap();
    symlink("/etc/passwd", root.join("abs-link")).unwrap();
    for paths in [
        json!(["../outside.txt"]),
        json!(["a.txt", "sub/../../outside.txt"]),
        json!(["/etc/passwd"]),
        json!([root.join("a.txt")]),
        json!(["out-link"]),
        json!(["abs-link"]),
    ] {
        let env = call(
            adapter(&root, &["--allow-commit"]),
            "git.add",
            json!({ "paths": paths }),
        );
        refused(&env, "denied", "path_outside_root", repo.tmp.path(), &paths);
        let env = call(adapter(&root, &[]), "git.diff", json!({ "paths": paths }));
        assert_eq!(
            failure(&env),
            pair("denied", "path_outside_root"),
            "{paths}"
        );
    }
    assert_eq!(
        repo.git(&["status", "--porcelain"]),
        "?? abs-link\n?? out-link\n"
    );
}

#[test]
fn bad_input_is_invalid_input_and_changes_nothing() {
    let repo = Repo::new();
    repo.write("a.txt", b"changed\n");
    repo.git(&["add", "a.txt"]);
    let head = repo.head();
    let cases = [
        ("git.commit", json!({"message": "a\u{0}b"}), "NUL"),
        ("git.commit", json!({"message": " \n\t "}), "whitespace"),
        ("git.commit", json!({"message": ""}), "whitespace"),
        ("git.commit", json!({}), "input.message is required"),
        ("git.commit", json!({"message": 3}), "must be a string"),
        ("git.add", json!({"paths": []}), "at least one"),
        ("git.add", json!({"paths": "a.txt"}), "array of strings"),
        ("git.add", json!({"paths": [1]}), "input.paths[0]"),
        ("git.add", json!({"paths": [""]}), "empty"),
        ("git.add", json!({"paths": ["a\u{0}b"]}), "NUL"),
        ("git.add", json!({}), "input.paths is required"),
        (
            "git.diff",
            json!({"path": "a.txt", "paths": ["a.txt"]}),
            "not both",
        ),
        ("git.diff", json!({"staged": "yes"}), "boolean"),
        ("git.log", json!({"max": 0}), "between 1 and 100"),
        ("git.log", json!({"max": 101}), "between 1 and 100"),
        ("git.log", json!({"max": -1}), "non-negative integer"),
        (
            "git.status",
            json!({"path": "a.txt"}),
            "unknown input field",
        ),
        ("git.status", json!([]), "must be an object"),
    ];
    for (tool, input, says) in cases {
        let env = call(
            adapter(&repo.root(), &["--allow-commit"]),
            tool,
            input.clone(),
        );
        assert_eq!(
            failure(&env),
            pair("failed", "invalid_input"),
            "{tool} {input}"
        );
        let message = env["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{tool} {input}: {message}");
    }
    assert_eq!(repo.head(), head);
    assert_eq!(repo.git(&["status", "--porcelain"]), "M  a.txt\n");
}

#[test]
fn unknown_tools_operations_and_malformed_requests_get_their_codes() {
    let repo = Repo::new();
    let env = call(adapter(&repo.root(), &[]), "git.push", json!({}));
    assert_eq!(failure(&env), pair("failed", "unknown_tool"));
    let mut req: Value = serde_json::from_slice(&request("git.status", json!({}))).unwrap();
    req["operation"] = json!("write");
    let env = adapter(&repo.root(), &[])
        .stdin(serde_json::to_vec(&req).unwrap())
        .run()
        .exit(0)
        .stderr_empty()
        .json();
    assert_eq!(failure(&env), pair("failed", "unknown_operation"));
    req["operation"] = json!("status");
    let env = adapter(&repo.root(), &[])
        .stdin(serde_json::to_vec(&req).unwrap())
        .run()
        .exit(0)
        .stderr_empty()
        .json();
    assert_eq!(env["status"], "succeeded");
    let env = adapter(&repo.root(), &[])
        .stdin("{\"tool\":")
        .run()
        .exit(0)
        .stderr_empty()
        .json();
    assert_eq!(failure(&env), pair("failed", "request_invalid"));
}

#[test]
fn a_root_without_its_own_repository_is_not_a_repository() {
    let repo = Repo::new();
    // A plain folder; a folder inside a repository (git must not look above the root).
    let plain = repo.tmp.path().join("plain");
    fs::create_dir(&plain).unwrap();
    let sub = repo.root().join("sub");
    fs::create_dir(&sub).unwrap();
    // A .git file and a .git link that point at the repository beside the root.
    let by_file = repo.tmp.path().join("by-file");
    fs::create_dir(&by_file).unwrap();
    fs::write(
        by_file.join(".git"),
        format!("gitdir: {}\n", repo.root().join(".git").display()),
    )
    .unwrap();
    let by_link = repo.tmp.path().join("by-link");
    fs::create_dir(&by_link).unwrap();
    symlink(repo.root().join(".git"), by_link.join(".git")).unwrap();
    // A .git that is not a repository at all.
    let fake = repo.tmp.path().join("fake");
    fs::create_dir_all(fake.join(".git")).unwrap();
    for root in [&plain, &sub, &by_file, &by_link, &fake] {
        for tool in ["git.status", "git.log"] {
            let env = call(adapter(root, &[]), tool, json!({}));
            refused(
                &env,
                "failed",
                "not_a_repository",
                repo.tmp.path(),
                root.display(),
            );
        }
    }
    let env = call(
        adapter(&repo.tmp.path().join("gone"), &[]),
        "git.status",
        json!({}),
    );
    assert_eq!(failure(&env), pair("unavailable", "root_unavailable"));
}

/// Another repository of the host, beside the root, with its own history and file.
fn host_repo(tmp: &Path) -> PathBuf {
    let other = tmp.join("other");
    fs::create_dir_all(&other).unwrap();
    test_git(&other, &["init", "-q", "-b", "main"]);
    fs::write(other.join("secret.txt"), "host secret\n").unwrap();
    test_git(&other, &["add", "secret.txt"]);
    test_git(&other, &["commit", "-q", "-m", "host history"]);
    other
}

#[test]
fn a_git_directory_with_any_part_outside_the_root_is_not_a_repository() {
    // Each way a part of `.git` can lead to another repository of the host: its objects and
    // branches by symlinks (git.log would print its history, git.diff --staged its files and
    // git.commit move its branch), an alternate object store, a symlinked index.
    type Rigging = fn(&Path, &Path);
    let rigs: [(&str, Rigging); 5] = [
        ("objects and refs/heads", |root, other| {
            let dot = root.join(".git");
            fs::remove_dir_all(dot.join("objects")).unwrap();
            fs::remove_dir_all(dot.join("refs/heads")).unwrap();
            symlink(other.join(".git/objects"), dot.join("objects")).unwrap();
            symlink(other.join(".git/refs/heads"), dot.join("refs/heads")).unwrap();
            fs::copy(other.join(".git/index"), dot.join("index")).unwrap();
        }),
        ("a loose ref", |root, other| {
            let dot = root.join(".git");
            let main = dot.join("refs/heads/main");
            fs::remove_file(&main).unwrap();
            symlink(other.join(".git/refs/heads/main"), &main).unwrap();
        }),
        ("alternates", |root, other| {
            let alternates = root.join(".git/objects/info/alternates");
            fs::create_dir_all(alternates.parent().unwrap()).unwrap();
            fs::write(
                &alternates,
                format!("{}\n", other.join(".git/objects").display()),
            )
            .unwrap();
        }),
        ("a relative alternate", |root, _| {
            let alternates = root.join(".git/objects/info/alternates");
            fs::create_dir_all(alternates.parent().unwrap()).unwrap();
            fs::write(&alternates, "../../../other/.git/objects\n").unwrap();
        }),
        ("index", |root, other| {
            let index = root.join(".git/index");
            fs::remove_file(&index).unwrap();
            symlink(other.join(".git/index"), &index).unwrap();
        }),
    ];
    for (what, rig) in rigs {
        let repo = Repo::new();
        let other = host_repo(repo.tmp.path());
        let other_head = test_git(&other, &["rev-parse", "HEAD"]);
        rig(&repo.root(), &other);
        for (tool, input) in [
            ("git.log", json!({})),
            ("git.status", json!({})),
            ("git.diff", json!({"staged": true})),
            ("git.commit", json!({"message": "moved"})),
        ] {
            let cmd = adapter(&repo.root(), &["--allow-commit", "--author", "A <a@b.c>"]);
            let env = call(cmd, tool, input);
            refused(
                &env,
                "failed",
                "not_a_repository",
                repo.tmp.path(),
                format!("{what}: {tool}"),
            );
            let message = env["error"]["message"].as_str().unwrap();
            assert!(message.contains("resolves outside"), "{what}: {message}");
        }
        assert_eq!(
            test_git(&other, &["rev-parse", "HEAD"]),
            other_head,
            "{what}"
        );
    }
    // Links that stay inside the root are fine.
    let repo = Repo::new();
    let dot = repo.root().join(".git");
    fs::rename(dot.join("refs/heads"), repo.root().join("heads")).unwrap();
    symlink(repo.root().join("heads"), dot.join("refs/heads")).unwrap();
    let env = call(adapter(&repo.root(), &[]), "git.log", json!({}));
    assert_eq!(succeeded(&env)["commits"][0]["subject"], "first");
}

#[test]
fn a_thousand_paths_of_four_kilobytes_are_added_and_diffed_with_every_git() {
    // Within the documented limits (1000 paths, 4096 bytes each), 4 MB of paths: more than
    // the kernel takes on one command line. Some names look like pathspec magic: literal.
    let repo = Repo::new();
    let dir: String = (0..15)
        .map(|i| format!("{}{i:02}/", "d".repeat(248)))
        .collect();
    let paths: Vec<String> = (0..1000)
        .map(|i| {
            let magic = if i % 100 == 0 { ":(glob)*" } else { "" };
            let name = format!("{magic}{i:04}{}", "f".repeat(200));
            format!("{dir}{name}")
        })
        .collect();
    assert!(paths.iter().all(|p| p.len() > 3900 && p.len() <= 4096));
    for path in &paths {
        repo.write(path, b"new\n");
    }
    for git in gits() {
        test_git(&repo.root(), &["reset", "-q"]);
        let path_var = path_with(repo.tmp.path(), &git);
        let cmd = || adapter(&repo.root(), &["--allow-commit"]).env("PATH", &path_var);
        let env = call(cmd(), "git.add", json!({ "paths": paths }));
        assert_eq!(succeeded(&env)["added"], json!(paths), "{git:?}");
        let staged = repo.git(&["diff", "--cached", "--name-only", "-z"]);
        assert_eq!(staged.split_terminator('\0').count(), 1000, "{git:?}");
        // Three changes, in the first, a middle and the last batch: their diffs, joined (all
        // 1000 would pass the 1 MiB a diff may have: each names its path four times).
        let changed = [0, 500, 999];
        for i in changed {
            repo.write(&paths[i], b"changed\n");
        }
        let env = call(cmd(), "git.diff", json!({ "paths": paths }));
        let out = succeeded(&env);
        assert_eq!(out["truncated"], false, "{git:?}");
        let diff = out["diff"].as_str().unwrap();
        assert_eq!(diff.matches("\n+changed\n").count(), 3, "{git:?}");
        for i in changed {
            assert!(diff.contains(&format!("+++ b/{}\n", paths[i])), "{git:?}");
            repo.write(&paths[i], b"new\n");
        }
    }
}

#[test]
fn the_adapter_confines_git_to_the_root_and_what_git_needs() {
    // An included configuration outside the root: the kernel refuses git reading it (git
    // stops on it), where plain git reads it and takes an identity from it.
    let repo = Repo::new();
    let outside = repo.tmp.path().join("outside.config");
    fs::write(
        &outside,
        "[user]\n\tname = Outside\n\temail = out@example.org\n",
    )
    .unwrap();
    repo.git(&["config", "include.path", outside.to_str().unwrap()]);
    assert_eq!(repo.git(&["config", "user.name"]), "Outside\n");
    for git in gits() {
        let path_var = path_with(repo.tmp.path(), &git);
        for (tool, input) in [
            ("git.status", json!({})),
            ("git.commit", json!({"message": "identity from outside"})),
        ] {
            let cmd = adapter(&repo.root(), &["--allow-commit"]).env("PATH", &path_var);
            let env = call(cmd, tool, input);
            assert_eq!(failure(&env).0, "failed", "{git:?} {tool}: {env}");
            let stderr = env["error"]["details"]["stderr"].as_str().unwrap_or("");
            assert!(
                stderr.contains("Permission denied"),
                "{git:?} {tool}: {env}"
            );
        }
    }
    assert_eq!(repo.git(&["log", "-1", "--format=%s"]), "first\n");
    // Without it, every tool works confined (read-only for the readers, the root writable
    // for git.add and git.commit).
    repo.git(&["config", "--unset", "include.path"]);
    repo.write("a.txt", b"two\n");
    let cmd = || adapter(&repo.root(), &["--allow-commit", "--author", "A <a@b.c>"]);
    assert_eq!(
        succeeded(&call(cmd(), "git.status", json!({})))["entries"][0]["path"],
        "a.txt"
    );
    succeeded(&call(cmd(), "git.add", json!({"paths": ["a.txt"]})));
    succeeded(&call(cmd(), "git.commit", json!({"message": "confined"})));
    assert_eq!(repo.git(&["log", "-1", "--format=%s"]), "confined\n");
}

#[test]
fn a_missing_or_old_git_is_git_unavailable() {
    let repo = Repo::new();
    let empty = repo.tmp.path().join("empty-bin");
    fs::create_dir(&empty).unwrap();
    let old = repo.tmp.path().join("old-bin");
    fs::create_dir(&old).unwrap();
    let fake = old.join("git");
    fs::write(&fake, "#!/bin/sh\necho 'git version 2.20.1'\n").unwrap();
    fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).unwrap();
    for (path, says) in [(&empty, "not found"), (&old, "2.20 is too old")] {
        let cmd = adapter(&repo.root(), &[]).env("PATH", path);
        let env = call(cmd, "git.status", json!({}));
        assert_eq!(failure(&env), pair("unavailable", "git_unavailable"));
        let message = env["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    }
}

#[test]
fn git_failing_is_git_failed_with_its_stderr_without_host_paths() {
    let repo = Repo::new();
    // A lock another git left behind: git names the lock by its absolute path.
    fs::write(repo.root().join(".git/index.lock"), "").unwrap();
    repo.write("b.txt", b"b\n");
    let env = call(
        adapter(&repo.root(), &["--allow-commit"]),
        "git.add",
        json!({"paths": ["b.txt"]}),
    );
    assert_eq!(failure(&env), pair("failed", "git_failed"));
    let text = env["error"].to_string();
    assert!(text.contains("index.lock"), "{text}");
    assert!(!text.contains(repo.tmp.path().to_str().unwrap()), "{text}");
    assert_eq!(env["error"]["details"]["exit_status"], 128);
}

#[test]
fn without_author_the_repository_then_the_host_config_names_the_committer_and_else_git_refuses() {
    let repo = Repo::new();
    let home = repo.tmp.path().join("home");
    fs::create_dir(&home).unwrap();
    fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = Host Person\n\temail = host@example.org\n",
    )
    .unwrap();
    let commit = |message: &str, home: Option<&Path>| {
        repo.write("a.txt", message.as_bytes());
        repo.git(&["add", "a.txt"]);
        let mut cmd = adapter(&repo.root(), &["--allow-commit"]);
        if let Some(home) = home {
            cmd = cmd.env("HOME", home);
        }
        call(cmd, "git.commit", json!({ "message": message }))
    };
    // No identity anywhere: git's own refusal, nothing invented from the host name.
    let env = commit("nobody", None);
    assert_eq!(failure(&env), pair("failed", "git_failed"));
    let env = commit("host", Some(&home));
    succeeded(&env);
    assert_eq!(
        repo.git(&["log", "-1", "--format=%an <%ae> %cn"]),
        "Host Person <host@example.org> Host Person\n"
    );
    repo.git(&["config", "user.name", "Repo Person"]);
    repo.git(&["config", "user.email", "repo@example.org"]);
    let env = commit("repo", Some(&home));
    succeeded(&env);
    assert_eq!(
        repo.git(&["log", "-1", "--format=%an <%ae>"]),
        "Repo Person <repo@example.org>\n"
    );
}

#[test]
fn a_bad_author_flag_is_a_usage_error() {
    Cmd::new(["adapter", "git", "--author", "no email here"])
        .run()
        .exit(2)
        .stdout_empty()
        .stderr_contains("Name <email>");
}

#[test]
fn a_checkout_owned_by_another_user_is_served() {
    require!(skip::root());
    let repo = Repo::new();
    repo.write("b.txt", b"b\n");
    let chown = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(repo.root())
        .status()
        .unwrap();
    assert!(chown.success());
    let out = call(adapter(&repo.root(), &[]), "git.status", json!({}));
    assert_eq!(succeeded(&out)["entries"][0]["path"], "b.txt");
}

#[test]
fn the_dispatcher_runs_the_adapter_from_a_bridge_and_passes_its_codes_through() {
    let repo = Repo::new();
    repo.write("b.txt", b"b\n");
    let root = repo.root().display().to_string();
    let bridge = |flags: &[&str]| {
        let mut argv = vec![
            super::bin().display().to_string(),
            "adapter".into(),
            "git".into(),
            "--root".into(),
            root.clone(),
        ];
        argv.extend(flags.iter().map(|f| f.to_string()));
        move |b: &mut Value| {
            b["allowed_tools"] = json!(["git.status", "git.add"]);
            b["dispatcher"]["command"] = json!({ "argv": argv });
        }
    };
    let request = |tool: &str, input: Value| {
        let tool = tool.to_string();
        move |r: &mut Value| {
            r["tool"] = json!(tool);
            r["input"] = input;
            r["authorization"]["allowed_tools"] = json!([tool]);
        }
    };
    let run = super::Dispatch::adapter(&[])
        .bridge(bridge(&[]))
        .request(request("git.status", json!({})))
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(
        run.envelope["output"]["entries"],
        json!([{"path": "b.txt", "index": "?", "worktree": "?"}])
    );
    let run = super::Dispatch::adapter(&[])
        .bridge(bridge(&[]))
        .request(request("git.add", json!({"paths": ["b.txt"]})))
        .run();
    run.expect("denied", Some("operation_not_permitted"), 77);
    assert_eq!(repo.git(&["status", "--porcelain"]), "?? b.txt\n");
}

#[test]
fn the_docs_and_the_help_list_every_code() {
    let docs =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/git.md")).unwrap();
    let help = ptd_adapters::git::after_help();
    for code in ptd_adapters::git::Code::ALL {
        let row = format!(
            "| `{}` | {} | {} |",
            code.as_str(),
            code.status().as_str(),
            code.retryable()
        );
        assert!(docs.contains(&row), "docs/git.md lacks the row {row}");
        assert!(
            help.contains(code.as_str()),
            "help misses {}",
            code.as_str()
        );
    }
}

#[test]
fn the_bridge_in_the_docs_is_valid() {
    let docs =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/git.md")).unwrap();
    let block = docs
        .split("```json\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/git.md shows a bridge");
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("git.bridge.json");
    fs::write(&file, block).unwrap();
    Cmd::new(["validate", "bridge", "--strict"])
        .arg(&file)
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_json(|v| assert_eq!(v, &json!({"valid": true, "issues": []})));
}

/// A host confines the adapter — and every git it starts — with the dispatcher's own options
/// (docs/git.md, "Confining git"), on the real kernel: with `--fs-write ROOT` and `--network
/// none` every tool works, committing included; with `--fs-read ROOT` the reading tools work,
/// and the kernel refuses git's index lock, so `git.add` fails and nothing is staged.
#[test]
fn under_the_dispatchers_confinement_git_works_within_what_the_host_granted() {
    let repo = Repo::new();
    let root = repo.root();
    repo.write("a.txt", b"one\ntwo\n");
    let root_arg = root.display().to_string();
    let mut bridge = super::bridge(&[]);
    bridge["allowed_tools"] = json!(["git.status", "git.diff", "git.add", "git.commit"]);
    bridge["dispatcher"]["command"]["argv"] = json!([
        super::bin().display().to_string(),
        "adapter",
        "git",
        "--root",
        root_arg,
        "--allow-commit",
        "--author",
        "Ann Agent <ann@example.org>"
    ]);
    let call = |flags: &[&str], tool: &str, input: Value| {
        super::Dispatch::with_bridge(bridge.clone())
            .stdin(request(tool, input))
            .args(flags)
            .run()
    };

    let read_only = ["--fs-read", root_arg.as_str()];
    let run = call(&read_only, "git.status", json!({}));
    run.expect("succeeded", None, 0);
    assert_eq!(run.stderr, "");
    assert_eq!(
        run.envelope["output"]["entries"],
        json!([{"path": "a.txt", "index": ".", "worktree": "M"}])
    );
    let confinement = &run.dispatch()["confinement"];
    assert_eq!(confinement["landlock"]["fs_read"], json!(["[host-path]"]));
    assert_eq!(confinement["landlock"]["fs_write"], json!([]));
    let run = call(&read_only, "git.diff", json!({}));
    run.expect("succeeded", None, 0);
    assert!(run.envelope["output"]["diff"]
        .as_str()
        .unwrap()
        .contains("+two"));
    let run = call(&read_only, "git.add", json!({"paths": ["a.txt"]}));
    run.expect("failed", Some("git_failed"), 1);
    let message = run.envelope["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("index.lock") && message.contains("Permission denied"),
        "{message}"
    );
    assert!(!message.contains(root.to_str().unwrap()), "{message}");
    assert!(
        run.stderr.starts_with("error[git_failed]: git add failed"),
        "{}",
        run.stderr
    );
    assert_eq!(repo.git(&["diff", "--cached", "--name-only"]), "");

    // The adapter runs as `nobody` under a root dispatcher (SPEC §13.2): a grant does not
    // override file modes, so the host gives it the checkout it may write.
    chown_tree(&root, super::adapter_uid());
    let writable = ["--fs-write", root_arg.as_str(), "--network", "none"];
    let run = call(&writable, "git.add", json!({"paths": ["a.txt"]}));
    run.expect("succeeded", None, 0);
    assert_eq!(run.stderr, "");
    assert_eq!(run.envelope["output"]["added"], json!(["a.txt"]));
    let mechanisms = &run.dispatch()["confinement"]["mechanisms"];
    assert!(
        mechanisms.as_array().unwrap().contains(&json!("landlock")),
        "{mechanisms}"
    );
    assert_eq!(run.dispatch()["confinement"]["network"], "none");
    let before = repo.head();
    let run = call(
        &writable,
        "git.commit",
        json!({"message": "Confined commit"}),
    );
    run.expect("succeeded", None, 0);
    assert_eq!(run.stderr, "");
    let commit = run.envelope["output"]["commit"].as_str().unwrap();
    assert_eq!(commit, repo.head());
    assert_ne!(commit, before);
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s"]).trim(),
        "Confined commit"
    );
}
