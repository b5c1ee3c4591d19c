//! `adapter workspace`: `workspace.ls` and `workspace.apply_patch` (SPEC §15.1), and the
//! adapter's Landlock restriction to its root, through the built binary.

use super::workspace::{failure, pair, request, succeeded, Workspace};
use super::Cmd;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

/// Every entry under `dir` (the workspace's whole folder, outside included): path → file
/// bytes, `dir`, or `-> target` for a symlink. Hidden temp files would show too.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(base).unwrap().display().to_string();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_symlink() {
                let target = fs::read_link(&path).unwrap();
                out.insert(rel, format!("-> {}", target.display()).into_bytes());
            } else if meta.is_dir() {
                out.insert(rel, b"dir".to_vec());
                walk(base, &path, out);
            } else {
                out.insert(rel, fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

impl Workspace {
    fn patch(&self, patch: &str) -> Value {
        self.call("workspace.apply_patch", "call", json!({ "patch": patch }))
    }

    /// Apply `patch`, expect `(status, code)`, and check that nothing at all changed.
    fn refused(&self, patch: &str, status: &str, code: &str) -> Value {
        let before = snapshot(self.tmp.path());
        let env = self.patch(patch);
        assert_eq!(failure(&env, self), pair(status, code), "{patch}\n{env}");
        assert_eq!(
            snapshot(self.tmp.path()),
            before,
            "the tree changed: {patch}"
        );
        env
    }
}

#[test]
fn ls_lists_sorted_levels_without_git_and_without_following_symlinks() {
    let ws = Workspace::new();
    ws.file("src/main.rs", "fn main() {}\n")
        .file("src/deep/x.txt", "x")
        .file("a.txt", "abc")
        .file(".git/config", "[core]\n")
        .file("src-old", "");
    symlink(ws.tmp.path().join("outside"), ws.root().join("out")).unwrap();
    let env = ws.call("workspace.ls", "ls", json!({}));
    assert_eq!(
        env,
        succeeded(
            "workspace.ls",
            "ls",
            json!({"path": ".", "truncated": false, "entries": [
                {"path": "a.txt", "type": "file", "bytes": 3},
                {"path": "out", "type": "symlink"},
                {"path": "src", "type": "dir"},
                {"path": "src-old", "type": "file", "bytes": 0},
            ]})
        )
    );
    let env = ws.call("workspace_ls", "call", json!({"path": "src", "depth": 2}));
    assert_eq!(
        env["output"],
        json!({"path": "src", "truncated": false, "entries": [
            {"path": "src/deep", "type": "dir"},
            {"path": "src/deep/x.txt", "type": "file", "bytes": 1},
            {"path": "src/main.rs", "type": "file", "bytes": 13},
        ]})
    );
    let env = ws.call(
        "workspace.ls",
        "call",
        json!({"depth": 8, "max_entries": 2}),
    );
    assert_eq!(env["output"]["entries"].as_array().unwrap().len(), 2);
    assert_eq!(env["output"]["truncated"], true);
}

#[test]
fn ls_refuses_escapes_files_and_bad_depths() {
    let ws = Workspace::new();
    ws.file("a.txt", "a");
    symlink("../outside", ws.root().join("out")).unwrap();
    for (input, status, code) in [
        (json!({"path": "out"}), "denied", "path_outside_root"),
        (json!({"path": "../outside"}), "denied", "path_outside_root"),
        (json!({"path": "/etc"}), "denied", "path_outside_root"),
        (json!({"path": "a.txt"}), "failed", "not_a_directory"),
        (json!({"path": "nope"}), "failed", "not_found"),
        (json!({"depth": 0}), "failed", "invalid_input"),
        (json!({"depth": 9}), "failed", "invalid_input"),
        (json!({"depth": "2"}), "failed", "invalid_input"),
        (json!({"max_entries": 0}), "failed", "invalid_input"),
    ] {
        let env = ws.call("workspace.ls", "call", input.clone());
        assert_eq!(failure(&env, &ws), pair(status, code), "{input}");
    }
}

const THREE_FILES: &str = "diff --git a/src/lib.rs b/src/lib.rs
index 1111111..2222222 100644
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,3 +1,3 @@
 fn a() {}
-fn b() {}
+fn b() { a() }
 fn c() {}
diff --git a/docs/new/guide.md b/docs/new/guide.md
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/docs/new/guide.md
@@ -0,0 +1,2 @@
+# Guide
+text
diff --git a/old.txt b/old.txt
deleted file mode 100644
index 4444444..0000000
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
";

#[test]
fn apply_patch_modifies_adds_and_deletes_in_one_go() {
    let ws = Workspace::new();
    ws.file("src/lib.rs", "fn a() {}\nfn b() {}\nfn c() {}\n")
        .file("old.txt", "bye\n");
    fs::set_permissions(
        ws.root().join("src/lib.rs"),
        fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    let env = ws.call(
        "workspace_apply_patch",
        "apply_patch",
        json!({ "patch": THREE_FILES }),
    );
    assert_eq!(
        env,
        succeeded(
            "workspace_apply_patch",
            "apply_patch",
            json!({"files": [
                {"path": "src/lib.rs", "action": "modified", "bytes": 35},
                {"path": "docs/new/guide.md", "action": "added", "bytes": 13},
                {"path": "old.txt", "action": "deleted"},
            ]})
        )
    );
    assert_eq!(
        ws.read("src/lib.rs"),
        "fn a() {}\nfn b() { a() }\nfn c() {}\n"
    );
    assert_eq!(ws.read("docs/new/guide.md"), "# Guide\ntext\n");
    assert!(!ws.root().join("old.txt").exists());
    let mode = fs::metadata(ws.root().join("src/lib.rs"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640, "the replaced file keeps its mode");
    // No temp file or second name is left anywhere.
    let names: Vec<String> = snapshot(&ws.root()).into_keys().collect();
    assert_eq!(
        names,
        ["docs", "docs/new", "docs/new/guide.md", "src", "src/lib.rs"]
    );
}

#[test]
fn one_hunk_that_does_not_apply_leaves_everything_as_it_was() {
    let ws = Workspace::new();
    // The second hunk of lib.rs expects `fn c() {}`, which the file no longer has.
    ws.file("src/lib.rs", "fn a() {}\nfn b() {}\nfn C() {}\n")
        .file("old.txt", "bye\n");
    let patch = THREE_FILES.replace(
        "@@ -1,3 +1,3 @@\n fn a() {}\n-fn b() {}\n+fn b() { a() }\n fn c() {}\n",
        "@@ -1,2 +1,2 @@\n fn a() {}\n-fn b() {}\n+fn b() { a() }\n@@ -3 +3 @@\n-fn c() {}\n+fn c() { b() }\n",
    );
    let env = ws.refused(&patch, "failed", "patch_conflict");
    assert_eq!(
        env["error"]["details"],
        json!({"path": "src/lib.rs", "hunk": 2})
    );
    let message = env["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("hunk 2") && message.contains("line 3"),
        "{message}"
    );
    // A conflict in the last file: nothing is written, not even the folders of the file the
    // patch adds before it (undoing a commit that failed half-way is a unit test of patch/).
    let ws = Workspace::new();
    ws.file("src/lib.rs", "fn a() {}\nfn b() {}\nfn c() {}\n")
        .file("old.txt", "changed\n");
    let env = ws.refused(THREE_FILES, "failed", "patch_conflict");
    assert_eq!(
        env["error"]["details"],
        json!({"path": "old.txt", "hunk": 1})
    );
    assert!(!ws.root().join("docs").exists());
}

#[test]
fn crlf_files_take_crlf_patches_and_endings_are_never_converted() {
    let ws = Workspace::new();
    ws.file("win.txt", "one\r\ntwo\r\nthree\r\n");
    let lf = "--- a/win.txt\n+++ b/win.txt\n@@ -2 +2 @@\n-two\n+TWO\n";
    let env = ws.refused(lf, "failed", "patch_conflict");
    assert_eq!(
        env["error"]["details"],
        json!({"path": "win.txt", "hunk": 1})
    );
    let crlf = "--- a/win.txt\r\n+++ b/win.txt\r\n@@ -2 +2 @@\r\n-two\r\n+TWO\r\n";
    let env = ws.patch(crlf);
    assert_eq!(env["status"], "succeeded", "{env}");
    assert_eq!(ws.read("win.txt"), "one\r\nTWO\r\nthree\r\n");
    // Written as the patch has it: an LF line added into a CRLF file stays LF.
    let mixed = "--- a/win.txt\n+++ b/win.txt\n@@ -3 +3,2 @@\n three\r\n+four\n";
    assert_eq!(ws.patch(mixed)["status"], "succeeded");
    assert_eq!(ws.read("win.txt"), "one\r\nTWO\r\nthree\r\nfour\n");
}

#[test]
fn no_newline_at_end_of_file_is_honoured_on_both_sides() {
    let ws = Workspace::new();
    ws.file("a.txt", "x\nlast");
    let patch = "--- a/a.txt\n+++ b/a.txt\n@@ -2 +2,2 @@\n-last\n\\ No newline at end of file\n+last\n+more\n\\ No newline at end of file\n";
    let env = ws.patch(patch);
    assert_eq!(env["output"]["files"][0]["bytes"], 11, "{env}");
    assert_eq!(ws.read("a.txt"), "x\nlast\nmore");
    // The same patch again: the file now has no `last` without newline at line 2.
    let env = ws.refused(patch, "failed", "patch_conflict");
    assert_eq!(env["error"]["details"]["hunk"], 1);
}

#[test]
fn renames_move_the_file_with_its_changes() {
    let ws = Workspace::new();
    ws.file("src/old_name.rs", "a\nb\n");
    let patch = "diff --git a/src/old_name.rs b/lib/new_name.rs
similarity index 50%
rename from src/old_name.rs
rename to lib/new_name.rs
--- a/src/old_name.rs
+++ b/lib/new_name.rs
@@ -1,2 +1,2 @@
 a
-b
+B
";
    let env = ws.patch(patch);
    assert_eq!(
        env["output"],
        json!({"files": [
            {"path": "src/old_name.rs", "action": "deleted"},
            {"path": "lib/new_name.rs", "action": "added", "bytes": 4},
        ]})
    );
    assert_eq!(ws.read("lib/new_name.rs"), "a\nB\n");
    assert!(!ws.root().join("src/old_name.rs").exists());
    // A pure rename (no hunk), onto a name that is taken: refused, nothing moved.
    ws.file("taken.txt", "mine\n");
    let onto = "diff --git a/lib/new_name.rs b/taken.txt\nsimilarity index 100%\nrename from lib/new_name.rs\nrename to taken.txt\n";
    let env = ws.refused(onto, "failed", "patch_conflict");
    assert_eq!(
        env["error"]["details"],
        json!({"path": "taken.txt", "hunk": null})
    );
}

#[test]
fn bad_patches_are_patch_invalid_naming_the_line() {
    let ws = Workspace::new();
    ws.file("a.txt", "a\n").file("b.bin", "x\n");
    let twice = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n--- a/./a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+c\n";
    let cases: &[(&str, Value)] = &[
        (twice, json!(6)),
        (
            "diff --git a/b.bin b/b.bin\nindex 1..2 100644\nGIT binary patch\nliteral 3\nKcmV+p\n",
            json!(3),
        ),
        (
            "diff --git a/b.bin b/b.bin\nindex 1..2 100644\nBinary files a/b.bin and b/b.bin differ\n",
            json!(3),
        ),
        ("", Value::Null),
        ("please apply my change\n", Value::Null),
        ("--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n-a\n+b\n", json!(3)),
        ("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n+c\n", json!(6)),
        ("--- a/a.txt\n+++ b/a.txt\n@@ one @@\n-a\n+b\n", json!(3)),
        ("diff --git a/a.txt b/a.txt\nold mode 100644\nnew mode 100755\n", json!(2)),
    ];
    for (patch, line) in cases {
        let env = ws.refused(patch, "failed", "patch_invalid");
        assert_eq!(env["error"]["details"], json!({ "line": line }), "{patch}");
    }
    // The same file reached twice through a symlink is the same file twice.
    symlink("a.txt", ws.root().join("alias.txt")).unwrap();
    let aliased = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n--- a/alias.txt\n+++ b/alias.txt\n@@ -1 +1 @@\n-a\n+c\n";
    let env = ws.refused(aliased, "failed", "patch_invalid");
    assert_eq!(env["error"]["details"], json!({"line": 6}));
}

#[test]
fn a_patch_over_16_mib_is_too_large() {
    let ws = Workspace::new();
    ws.file("a.txt", "a\n");
    let mut patch = String::from("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1,2 @@\n a\n+");
    patch.push_str(&"x".repeat(17 << 20));
    patch.push('\n');
    let env = ws.refused(&patch, "failed", "too_large");
    assert!(env["error"]["message"].as_str().unwrap().contains("limit"));
    // A small patch of very many lines is bounded too (what it holds is a multiple of them).
    let many = format!("--- a/a.txt\n+++ b/a.txt\n{}", "\n".repeat(1 << 20));
    let env = ws.refused(&many, "failed", "too_large");
    assert!(env["error"]["message"].as_str().unwrap().contains("lines"));
    // More than 100 file diffs.
    let files: String = (0..101)
        .map(|i| format!("--- /dev/null\n+++ b/f{i}\n@@ -0,0 +1 @@\n+x\n"))
        .collect();
    let env = ws.refused(&files, "failed", "too_large");
    assert!(env["error"]["message"]
        .as_str()
        .unwrap()
        .contains("101 files"));
}

#[test]
fn paths_outside_the_root_and_in_git_are_refused() {
    let ws = Workspace::new();
    ws.git(&["init", "-q"]);
    ws.file("a.txt", "a\n");
    symlink("../outside", ws.root().join("out")).unwrap();
    let add = |path: &str| format!("--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+pwned\n");
    for path in ["../outside/new.txt", "out/new.txt", "x/../../escape.txt"] {
        ws.refused(&add(path), "denied", "path_outside_root");
    }
    let absolute = "--- /dev/null\n+++ /tmp/abs.txt\n@@ -0,0 +1 @@\n+pwned\n";
    ws.refused(absolute, "denied", "path_outside_root");
    let delete = "--- a/../outside/secret.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-top secret\n";
    ws.refused(delete, "denied", "path_outside_root");
    for path in [".git/hooks/pre-commit", ".GIT/config", "sub/.git"] {
        ws.refused(&add(path), "denied", "git_dir_denied");
    }
    let config = ws.read(".git/config");
    let edit = format!(
        "--- a/.git/config\n+++ b/.git/config\n@@ -1 +1,2 @@\n {}\n+\tfsmonitor = touch /tmp/pwned\n",
        config.lines().next().unwrap()
    );
    ws.refused(&edit, "denied", "git_dir_denied");
    // With --allow-git-dir the host lets it through.
    let env = ws.call_allowing_git(
        "workspace.apply_patch",
        json!({ "patch": add(".git/info/note") }),
    );
    assert_eq!(env["status"], "succeeded", "{env}");
    assert_eq!(ws.read(".git/info/note"), "pwned\n");
}

#[test]
fn files_must_be_where_the_patch_says() {
    let ws = Workspace::new();
    ws.file("here.txt", "a\nb\n").file("exists.txt", "x\n");
    symlink("here.txt", ws.root().join("link.txt")).unwrap();
    let cases = [
        // Changing a file that is not there.
        (
            "--- a/missing.txt\n+++ b/missing.txt\n@@ -1 +1 @@\n-a\n+b\n",
            "missing.txt",
            Value::Null,
        ),
        // Adding one that is.
        (
            "--- /dev/null\n+++ b/exists.txt\n@@ -0,0 +1 @@\n+y\n",
            "exists.txt",
            Value::Null,
        ),
        // Deleting more than the file holds, or less.
        (
            "--- a/here.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n",
            "here.txt",
            Value::Null,
        ),
        (
            "--- a/here.txt\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-a\n-b\n-c\n",
            "here.txt",
            json!(1),
        ),
        // Deleting a symlink would delete what it points at.
        (
            "--- a/link.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n",
            "link.txt",
            Value::Null,
        ),
    ];
    for (patch, path, hunk) in cases {
        let env = ws.refused(patch, "failed", "patch_conflict");
        assert_eq!(
            env["error"]["details"],
            json!({"path": path, "hunk": hunk}),
            "{patch}"
        );
    }
    // A binary file is not patched.
    fs::write(ws.root().join("bin"), b"a\0b\n").unwrap();
    ws.refused(
        "--- a/bin\n+++ b/bin\n@@ -1 +1 @@\n-a\n+b\n",
        "failed",
        "binary_file",
    );
    // Writing through an inside symlink changes its target, as write and edit do.
    let env = ws.patch("--- a/link.txt\n+++ b/link.txt\n@@ -2 +2 @@\n-b\n+B\n");
    assert_eq!(env["status"], "succeeded", "{env}");
    assert_eq!(ws.read("here.txt"), "a\nB\n");
    assert!(fs::symlink_metadata(ws.root().join("link.txt"))
        .unwrap()
        .is_symlink());
}

#[test]
fn an_executable_new_file_and_an_empty_one() {
    let ws = Workspace::new();
    let patch = "diff --git a/run.sh b/run.sh
new file mode 100755
index 0000000..1111111
--- /dev/null
+++ b/run.sh
@@ -0,0 +1 @@
+#!/bin/sh
diff --git a/empty b/empty
new file mode 100644
index 0000000..e69de29
";
    let env = ws.patch(patch);
    assert_eq!(
        env["output"],
        json!({"files": [
            {"path": "run.sh", "action": "added", "bytes": 10},
            {"path": "empty", "action": "added", "bytes": 0},
        ]})
    );
    let mode = fs::metadata(ws.root().join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111 & !umask_of_test(), "{mode:o}");
    assert_eq!(ws.read("empty"), "");
}

/// The umask the adapter runs with (inherited from the test process).
fn umask_of_test() -> u32 {
    let probe = tempfile::tempdir().unwrap();
    let path = probe.path().join("m");
    fs::create_dir(&path).unwrap();
    // mkdir(0777) less the umask.
    !fs::metadata(&path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_kernel_with_landlock_serves_every_tool_without_a_warning() {
    // On this kernel the adapter confines itself; its stderr stays empty (a kernel without
    // Landlock would give one warning[landlock] line) and every tool still works.
    let ws = Workspace::new();
    ws.file("a.txt", "a\n");
    for (tool, input) in [
        ("workspace.ls", json!({})),
        ("workspace.read", json!({"path": "a.txt"})),
        ("workspace.search", json!({"pattern": "a"})),
        (
            "workspace.write",
            json!({"path": "b.txt", "content": "b\n"}),
        ),
        (
            "workspace.edit",
            json!({"path": "b.txt", "old": "b", "new": "c"}),
        ),
        (
            "workspace.apply_patch",
            json!({"patch": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n"}),
        ),
    ] {
        let env = Cmd::new(["adapter", "workspace", "--root"])
            .arg(ws.root())
            .stdin(request(tool, "call", input))
            .run()
            .exit(0)
            .stderr_empty()
            .json();
        assert_eq!(env["status"], "succeeded", "{tool}: {env}");
    }
    assert_eq!(ws.read("a.txt"), "A\n");
    assert_eq!(ws.read("b.txt"), "c\n");
}

/// Through the dispatcher with `--tool-map provider-safe`: the adapter receives
/// `workspace_ls` / `workspace_apply_patch` and the caller sees the canonical ids back.
#[test]
fn the_dispatcher_reaches_ls_and_apply_patch_by_their_provider_safe_ids() {
    let ws = Workspace::new();
    ws.file("a.txt", "a\n");
    let mut bridge = super::bridge(&[]);
    bridge["allowed_tools"] = json!(["workspace.ls", "workspace.apply_patch"]);
    bridge["dispatcher"]["command"] = json!({
        "argv": [super::bin().display().to_string(), "adapter", "workspace"],
        "cwd_env": "WORKSPACE_ROOT"
    });
    let call = |tool: &str, input: Value| {
        super::Dispatch::with_bridge(bridge.clone())
            .env("WORKSPACE_ROOT", ws.root().to_str().unwrap())
            .args(&["--tool-map", "provider-safe"])
            .request(|r| {
                r["tool"] = json!(tool);
                r["input"] = input;
                r["authorization"]["allowed_tools"] = json!([tool]);
            })
            .run()
    };
    let run = call(
        "workspace.apply_patch",
        json!({"patch": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n"}),
    );
    run.expect("succeeded", None, 0);
    assert_eq!(run.envelope["tool"], "workspace.apply_patch");
    assert_eq!(
        run.envelope["output"],
        json!({"files": [{"path": "a.txt", "action": "modified", "bytes": 2}]})
    );
    assert_eq!(ws.read("a.txt"), "b\n");
    let run = call("workspace.ls", json!({}));
    run.expect("succeeded", None, 0);
    assert_eq!(run.envelope["tool"], "workspace.ls");
    assert_eq!(
        run.envelope["output"]["entries"],
        json!([{"path": "a.txt", "type": "file", "bytes": 2}, {"path": "src", "type": "dir"}])
    );
    // A conflict is the adapter's failure envelope, passed on with its details.
    let run = call(
        "workspace.apply_patch",
        json!({"patch": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+c\n"}),
    );
    run.expect("failed", Some("patch_conflict"), 1);
    assert_eq!(
        run.envelope["error"]["details"],
        json!({"path": "a.txt", "hunk": 1})
    );
    assert_eq!(ws.read("a.txt"), "b\n");
}

/// What `git diff` itself writes — modifications, an addition, a deletion, a rename with
/// changes, CRLF lines, a last line without newline, a name git quotes — applies to the old tree
/// and gives exactly the new one.
#[test]
fn a_real_git_diff_turns_the_old_tree_into_the_new_one() {
    let old = |ws: &Workspace| {
        ws.file(
            "src/lib.rs",
            &(1..=40).map(|i| format!("line {i}\n")).collect::<String>(),
        )
        .file("win.txt", "one\r\ntwo\r\nthree\r\n")
        .file("tail.txt", "no newline at the end")
        .file("gone.txt", "bye\n")
        .file("move/me.txt", "a\nb\nc\nd\ne\nf\ng\nh\n")
        .file("caf\u{e9} x.txt", "quoted name\n");
    };
    let ws = Workspace::new();
    ws.git(&["init", "-q"]);
    old(&ws);
    ws.git(&["add", "-A"]);
    ws.git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-qm",
        "old",
    ]);
    let lib: String = (1..=40)
        .map(|i| match i {
            3 => "line three\n".to_owned(),
            20 => String::new(),
            38 => "line 38\nline 38b\n".to_owned(),
            _ => format!("line {i}\n"),
        })
        .collect();
    ws.file("src/lib.rs", &lib)
        .file("win.txt", "one\r\nTWO\r\nthree\r\nfour\r\n")
        .file("tail.txt", "no newline at the end\nnow there is one\n")
        .file("new/deep/file.md", "# new\n")
        .file("caf\u{e9} x.txt", "quoted name, changed\n");
    fs::remove_file(ws.root().join("gone.txt")).unwrap();
    fs::create_dir_all(ws.root().join("moved")).unwrap();
    fs::remove_file(ws.root().join("move/me.txt")).unwrap();
    ws.file("moved/me.txt", "a\nb\nc\nd\ne\nf\ng\nH\n");
    ws.git(&["add", "-A"]);
    let out = std::process::Command::new("git")
        .args(["diff", "--cached", "-M", "--no-color", "--no-ext-diff"])
        .current_dir(ws.root())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", ws.tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let patch = String::from_utf8(out.stdout).unwrap();
    assert!(patch.contains("rename from move/me.txt"), "{patch}");
    assert!(patch.contains("\\ No newline at end of file"), "{patch}");
    assert!(patch.contains("\"a/caf\\303\\251 x.txt\""), "{patch}");
    let mut want = snapshot(&ws.root());
    want.retain(|k, _| !k.starts_with(".git"));
    // A fresh copy of the old tree takes the patch.
    let fresh = Workspace::new();
    old(&fresh);
    let env = fresh.patch(&patch);
    assert_eq!(env["status"], "succeeded", "{env}\n{patch}");
    let mut got = snapshot(&fresh.root());
    got.retain(|k, _| !k.starts_with(".git"));
    // `move` is left empty by the rename, as git leaves it in a checkout it patches.
    assert_eq!(got.remove("move"), Some(b"dir".to_vec()));
    want.remove("move");
    assert_eq!(got, want, "{patch}");
}

/// More of what `git diff` writes: an empty new file, an executable one, a pure rename (no
/// hunk), a deleted file without a final newline; and a binary change, which is refused.
#[test]
fn header_only_diffs_from_real_git_apply_and_binary_ones_are_refused() {
    let old = |ws: &Workspace| {
        ws.file("stay.txt", "same\n")
            .file("last.txt", "no newline")
            .file("bin.dat", "a\u{0}b");
    };
    let ws = Workspace::new();
    ws.git(&["init", "-q"]);
    old(&ws);
    ws.git(&["add", "-A"]);
    ws.git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-qm",
        "old",
    ]);
    fs::rename(ws.root().join("stay.txt"), ws.root().join("renamed.txt")).unwrap();
    fs::remove_file(ws.root().join("last.txt")).unwrap();
    ws.file("empty", "").file("run.sh", "#!/bin/sh\n");
    fs::set_permissions(ws.root().join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    let diff = |ws: &Workspace| {
        ws.git(&["add", "-A"]);
        let out = std::process::Command::new("git")
            .args(["diff", "--cached", "-M", "--no-color", "--no-ext-diff"])
            .current_dir(ws.root())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", ws.tmp.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let patch = diff(&ws);
    assert!(patch.contains("similarity index 100%"), "{patch}");
    let fresh = Workspace::new();
    old(&fresh);
    let env = fresh.patch(&patch);
    assert_eq!(env["status"], "succeeded", "{env}\n{patch}");
    let mut files: Vec<Value> = env["output"]["files"].as_array().unwrap().clone();
    files.sort_by_key(|f| f["path"].as_str().unwrap().to_owned());
    assert_eq!(
        files,
        [
            json!({"path": "empty", "action": "added", "bytes": 0}),
            json!({"path": "last.txt", "action": "deleted"}),
            json!({"path": "renamed.txt", "action": "added", "bytes": 5}),
            json!({"path": "run.sh", "action": "added", "bytes": 10}),
            json!({"path": "stay.txt", "action": "deleted"}),
        ]
    );
    assert_eq!(fresh.read("renamed.txt"), "same\n");
    let mode = fs::metadata(fresh.root().join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_ne!(mode & 0o100, 0, "{mode:o}");
    // A binary change, as git writes it without --binary and with it.
    ws.file("bin.dat", "a\u{0}c");
    let plain = diff(&ws);
    assert!(plain.contains("Binary files"), "{plain}");
    let env = fresh.refused(&plain, "failed", "patch_invalid");
    assert!(
        env["error"]["message"].as_str().unwrap().contains("binary"),
        "{env}"
    );
}
