//! `parent-tool-dispatch adapter workspace`: the reference adapter of SPEC §9, driven through
//! the built binary with a request on stdin; results are compared as parsed JSON.

use super::Cmd;
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// A workspace root at `tmp/root`, with `tmp/outside/secret.txt` beside it.
pub(super) struct Workspace {
    pub(super) tmp: tempfile::TempDir,
}

impl Workspace {
    pub(super) fn new() -> Workspace {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join("root/src")).unwrap();
        fs::create_dir_all(tmp.path().join("outside")).unwrap();
        fs::write(tmp.path().join("outside/secret.txt"), "top secret\n").unwrap();
        Workspace { tmp }
    }

    pub(super) fn root(&self) -> PathBuf {
        self.tmp.path().join("root")
    }

    pub(super) fn file(&self, rel: &str, content: &str) -> &Workspace {
        let path = self.root().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
        self
    }

    pub(super) fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.root().join(rel)).unwrap()
    }

    /// Run one call with `--root`; see [`run`].
    pub(super) fn call(&self, tool: &str, operation: &str, input: Value) -> Value {
        run(&request(tool, operation, input), Some(&self.root()), None)
    }
}

pub(super) fn request(tool: &str, operation: &str, input: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "schema": "wp-codebox/parent-tool-request/v1",
        "version": 1,
        "request_id": "ptr_ws_1",
        "tool": tool,
        "operation": operation,
        "input": input,
        "sandbox_session": {"sandbox_session_id": "sandbox_1"},
        "authorization": {"allowed_tools": [tool]},
        "metadata": {}
    }))
    .unwrap()
}

/// Run the adapter with `stdin`; check exit 0, nothing on stderr (a failure is an envelope
/// like any other) and exactly one JSON line; return it parsed.
fn run(stdin: &[u8], root: Option<&Path>, cwd: Option<&Path>) -> Value {
    let mut cmd = Cmd::new(["adapter", "workspace"]).stdin(stdin);
    if let Some(root) = root {
        cmd = cmd.arg("--root").arg(root);
    }
    if let Some(cwd) = cwd {
        cmd = cmd.cwd(cwd);
    }
    cmd.run().exit(0).stderr_empty().json()
}

/// The full envelope of a success.
pub(super) fn succeeded(tool: &str, operation: &str, output: Value) -> Value {
    json!({
        "schema": "wp-codebox/parent-tool-result/v1",
        "version": 1,
        "request_id": "ptr_ws_1",
        "tool": tool,
        "operation": operation,
        "status": "succeeded",
        "output": output,
        "artifacts": {"transcripts": [], "evidence": []},
        "diagnostics": {},
        "metadata": {}
    })
}

/// `(status, error.code)` of an envelope, after checking no host path leaked into the message.
pub(super) fn failure(env: &Value, ws: &Workspace) -> (String, String) {
    let message = env["error"]["message"].as_str().unwrap_or_default();
    let host = ws.tmp.path().to_str().unwrap();
    assert!(!message.contains(host), "host path in message: {message}");
    assert!(
        !message.contains("/etc/passwd"),
        "link target in message: {message}"
    );
    assert!(
        env.get("output").is_none(),
        "a failure carries no output: {env}"
    );
    assert!(env["error"]["retryable"].is_boolean());
    (
        env["status"].as_str().unwrap().to_owned(),
        env["error"]["code"].as_str().unwrap().to_owned(),
    )
}

pub(super) fn pair(status: &str, code: &str) -> (String, String) {
    (status.to_owned(), code.to_owned())
}

#[test]
fn read_returns_content_and_pages_by_lines() {
    let ws = Workspace::new();
    ws.file("src/lib.rs", "line 1\nline 2\nline 3\n");
    let env = ws.call("workspace.read", "call", json!({"path": "src/lib.rs"}));
    assert_eq!(
        env,
        succeeded(
            "workspace.read",
            "call",
            json!({"path": "src/lib.rs", "content": "line 1\nline 2\nline 3\n", "bytes": 21, "truncated": false})
        )
    );
    let env = ws.call(
        "workspace_read",
        "read",
        json!({"path": "src/lib.rs", "offset": 1, "limit": 1}),
    );
    assert_eq!(
        env,
        succeeded(
            "workspace_read",
            "read",
            json!({"path": "src/lib.rs", "content": "line 2\n", "bytes": 7, "truncated": true})
        )
    );
}

#[test]
fn search_finds_matching_lines_like_rg() {
    let ws = Workspace::new();
    ws.file("src/a.rs", "fn alpha() {}\nfn beta() {}\n")
        .file("src/b.txt", "alpha in text\n")
        .file("README.md", "nothing here\n");
    let env = ws.call(
        "workspace.search",
        "search",
        json!({"pattern": "^fn \\w+", "glob": "*.rs"}),
    );
    assert_eq!(
        env,
        succeeded(
            "workspace.search",
            "search",
            json!({"matches": [
                {"path": "src/a.rs", "line": 1, "text": "fn alpha() {}"},
                {"path": "src/a.rs", "line": 2, "text": "fn beta() {}"}
            ], "truncated": false})
        )
    );
    let env = ws.call(
        "workspace.search",
        "call",
        json!({"pattern": "alpha", "path": "src", "max_results": 1}),
    );
    assert_eq!(env["output"]["matches"].as_array().unwrap().len(), 1);
    assert_eq!(env["output"]["truncated"], true);
}

#[test]
fn write_is_atomic_and_creates_parents_on_request() {
    let ws = Workspace::new();
    let env = ws.call(
        "workspace.write",
        "write",
        json!({"path": "docs/new/guide.md", "content": "# Guide\n", "create_dirs": true}),
    );
    assert_eq!(
        env,
        succeeded(
            "workspace.write",
            "write",
            json!({"path": "docs/new/guide.md", "bytes": 8})
        )
    );
    assert_eq!(ws.read("docs/new/guide.md"), "# Guide\n");
    let env = ws.call(
        "workspace.write",
        "call",
        json!({"path": "docs/new/guide.md", "content": "v2"}),
    );
    assert_eq!(env["status"], "succeeded");
    assert_eq!(ws.read("docs/new/guide.md"), "v2");
    let names: Vec<_> = fs::read_dir(ws.root().join("docs/new")).unwrap().collect();
    assert_eq!(names.len(), 1, "a temp file was left behind");
    let env = ws.call(
        "workspace.write",
        "call",
        json!({"path": "missing/x.md", "content": "x"}),
    );
    assert_eq!(failure(&env, &ws), pair("failed", "not_found"));
}

#[test]
fn edit_requires_exactly_one_occurrence() {
    let ws = Workspace::new();
    ws.file("src/main.rs", "let a = 1;\nlet b = 1;\n");
    let env = ws.call(
        "workspace.edit",
        "edit",
        json!({"path": "src/main.rs", "old": "let a = 1;", "new": "let a = 2;"}),
    );
    assert_eq!(
        env,
        succeeded(
            "workspace.edit",
            "edit",
            json!({"path": "src/main.rs", "bytes": 22})
        )
    );
    assert_eq!(ws.read("src/main.rs"), "let a = 2;\nlet b = 1;\n");

    let env = ws.call(
        "workspace.edit",
        "call",
        json!({"path": "src/main.rs", "old": "let c", "new": "x"}),
    );
    assert_eq!(failure(&env, &ws), pair("failed", "no_match"));
    let env = ws.call(
        "workspace.edit",
        "call",
        json!({"path": "src/main.rs", "old": " = ", "new": " := "}),
    );
    assert_eq!(failure(&env, &ws), pair("failed", "ambiguous_match"));
    assert_eq!(env["error"]["details"]["occurrences"], 2);
    assert_eq!(ws.read("src/main.rs"), "let a = 2;\nlet b = 1;\n");
}

#[test]
fn every_escape_is_denied_as_path_outside_root() {
    let ws = Workspace::new();
    let outside = ws.tmp.path().join("outside");
    symlink("/etc/passwd", ws.root().join("passwd")).unwrap();
    symlink(&outside, ws.root().join("src/abs-dir")).unwrap();
    symlink("../../outside", ws.root().join("src/rel-dir")).unwrap();
    symlink("../outside/secret.txt", ws.root().join("secret-link")).unwrap();
    let paths = [
        "../outside/secret.txt",
        "src/../../outside/secret.txt",
        "/etc/passwd",
        "passwd",
        "src/abs-dir/secret.txt",
        "src/rel-dir/secret.txt",
        "secret-link",
    ];
    for path in paths {
        let calls = [
            ("workspace.read", json!({ "path": path })),
            (
                "workspace.search",
                json!({"pattern": "secret", "path": path}),
            ),
            (
                "workspace.write",
                json!({"path": path, "content": "pwned", "create_dirs": true}),
            ),
            (
                "workspace.edit",
                json!({"path": path, "old": "top", "new": "pwned"}),
            ),
        ];
        for (tool, input) in calls {
            let env = ws.call(tool, "call", input);
            assert_eq!(
                failure(&env, &ws),
                pair("denied", "path_outside_root"),
                "{tool} {path}"
            );
            assert_eq!(env["request_id"], "ptr_ws_1");
        }
    }
    assert_eq!(
        fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "top secret\n"
    );
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 1);
}

#[test]
fn search_of_the_whole_root_never_reads_through_links_out() {
    let ws = Workspace::new();
    ws.file("src/ok.txt", "secret but inside\n");
    symlink(ws.tmp.path().join("outside"), ws.root().join("src/abs-dir")).unwrap();
    symlink("/etc/passwd", ws.root().join("passwd")).unwrap();
    let env = ws.call(
        "workspace.search",
        "call",
        json!({"pattern": "secret|root"}),
    );
    assert_eq!(
        env["output"],
        json!({"matches": [{"path": "src/ok.txt", "line": 1, "text": "secret but inside"}], "truncated": false})
    );
}

#[test]
fn inside_symlinks_keep_working() {
    let ws = Workspace::new();
    ws.file("docs/real.md", "real\n");
    symlink("../docs/real.md", ws.root().join("src/alias.md")).unwrap();
    let env = ws.call("workspace.read", "call", json!({"path": "src/alias.md"}));
    assert_eq!(env["output"]["content"], "real\n");
}

#[test]
fn unknown_tool_and_operation() {
    let ws = Workspace::new();
    let env = ws.call("workspace.delete", "call", json!({"path": "x"}));
    assert_eq!(failure(&env, &ws), pair("failed", "unknown_tool"));
    assert_eq!(env["tool"], "workspace.delete");
    let env = ws.call("workspace.read", "delete", json!({"path": "x"}));
    assert_eq!(failure(&env, &ws), pair("failed", "unknown_operation"));
    assert_eq!(env["operation"], "delete");
    // Another tool's verb is not this tool's operation.
    let env = ws.call("workspace.read", "write", json!({"path": "x"}));
    assert_eq!(failure(&env, &ws), pair("failed", "unknown_operation"));
}

#[test]
fn bad_inputs_have_clear_codes() {
    let ws = Workspace::new();
    ws.file("bin.dat", "a\u{0}b").file("a.txt", "a\n");
    fs::create_dir(ws.root().join("dir")).unwrap();
    let cases = [
        ("workspace.read", json!({}), "invalid_input"),
        ("workspace.read", json!({"path": 1}), "invalid_input"),
        (
            "workspace.read",
            json!({"path": "a.txt", "root": "/"}),
            "invalid_input",
        ),
        ("workspace.read", json!("a.txt"), "invalid_input"),
        ("workspace.read", json!({"path": "nope.txt"}), "not_found"),
        ("workspace.read", json!({"path": "dir"}), "not_a_file"),
        (
            "workspace.read",
            json!({"path": "a.txt/x"}),
            "not_a_directory",
        ),
        ("workspace.read", json!({"path": "bin.dat"}), "binary_file"),
        (
            "workspace.search",
            json!({"pattern": "(unclosed"}),
            "invalid_pattern",
        ),
        (
            "workspace.write",
            json!({"path": "dir", "content": "x"}),
            "not_a_file",
        ),
        (
            "workspace.write",
            json!({"path": "a.txt", "content": 5}),
            "invalid_input",
        ),
        (
            "workspace.edit",
            json!({"path": "a.txt", "old": "", "new": "b"}),
            "invalid_input",
        ),
    ];
    for (tool, input, code) in cases {
        let env = ws.call(tool, "call", input.clone());
        assert_eq!(failure(&env, &ws), pair("failed", code), "{tool} {input}");
    }
}

#[test]
fn malformed_requests_still_get_one_envelope() {
    let ws = Workspace::new();
    let root = ws.root();
    let env = run(b"not json", Some(&root), None);
    assert_eq!(failure(&env, &ws), pair("failed", "request_invalid"));
    assert_eq!(
        (env["request_id"].as_str(), env["tool"].as_str()),
        (Some(""), Some(""))
    );
    let env = run(b"", Some(&root), None);
    assert_eq!(failure(&env, &ws), pair("failed", "request_invalid"));
    let dup = br#"{"schema":"wp-codebox/parent-tool-request/v1","version":1,"request_id":"r","tool":"workspace.read","tool":"workspace.write","operation":"call","input":{}}"#;
    let env = run(dup, Some(&root), None);
    assert_eq!(failure(&env, &ws), pair("failed", "request_invalid"));
    assert_eq!(
        env["error"]["details"]["issues"][0]["code"],
        "duplicate_key"
    );
}

#[test]
fn without_root_the_working_directory_is_the_root() {
    let ws = Workspace::new();
    ws.file("here.txt", "from cwd\n");
    let req = request("workspace.read", "call", json!({"path": "here.txt"}));
    let env = run(&req, None, Some(&ws.root()));
    assert_eq!(env["output"]["content"], "from cwd\n");
    // A root that does not exist is `unavailable`, and the message names no host path.
    let env = run(&req, Some(&ws.tmp.path().join("gone")), None);
    assert_eq!(failure(&env, &ws), pair("unavailable", "root_unavailable"));
}

#[test]
fn unreadable_stdin_exits_1_without_an_envelope() {
    let ws = Workspace::new();
    // A directory as stdin: every read fails with EISDIR.
    Cmd::new(["adapter", "workspace", "--root"])
        .arg(ws.root())
        .stdin_file(fs::File::open("/").unwrap())
        .run()
        .exit(1)
        .stdout_empty()
        .stderr_starts_with("error[stdin]:");
}

impl Workspace {
    /// Run one call with `--root` and `--allow-git-dir`.
    pub(super) fn call_allowing_git(&self, tool: &str, input: Value) -> Value {
        Cmd::new(["adapter", "workspace", "--allow-git-dir"])
            .arg("--root")
            .arg(self.root())
            .stdin(request(tool, "call", input))
            .run()
            .exit(0)
            .stderr_empty()
            .json()
    }

    /// `git` in the root, which must succeed.
    pub(super) fn git(&self, args: &[&str]) {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(self.root())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", self.tmp.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }
}

/// Both writing tools at `path`: each must be refused with `git_dir_denied` and leave every
/// file as it was.
fn assert_git_write_denied(ws: &Workspace, path: &str) {
    assert_git_denied(ws, path, true);
}

/// [`assert_git_write_denied`] for a path whose directories do not exist yet: `write` with
/// `create_dirs` is refused before it makes any (`edit` finds nothing there: `not_found`).
fn assert_git_create_denied(ws: &Workspace, path: &str) {
    assert_git_denied(ws, path, false);
}

fn assert_git_denied(ws: &Workspace, path: &str, edit_too: bool) {
    let calls = [
        (
            "workspace.write",
            json!({"path": path, "content": "[core]\n\tfsmonitor = touch /tmp/pwned\n", "create_dirs": true}),
        ),
        (
            "workspace.edit",
            json!({"path": path, "old": "[core]", "new": "[core]\n\thooksPath = /tmp"}),
        ),
    ];
    for (tool, input) in &calls[..if edit_too { 2 } else { 1 }] {
        let env = ws.call(tool, "call", input.clone());
        assert_eq!(
            failure(&env, ws),
            pair("denied", "git_dir_denied"),
            "{tool} {path}: {env}"
        );
        let message = env["error"]["message"].as_str().unwrap();
        assert!(message.contains("--allow-git-dir"), "{message}");
        assert_eq!(env["error"]["retryable"], false);
    }
}

#[test]
fn writes_into_dot_git_are_denied_at_any_depth_and_in_any_case() {
    let ws = Workspace::new();
    ws.git(&["init", "-q"]);
    let config = ws.read(".git/config");
    ws.file("vendor/lib/.git/config", "[core]\n");
    fs::create_dir_all(ws.root().join("sub")).unwrap();
    for path in [
        ".git/config",
        ".git/hooks/pre-commit",
        "./src/../.git/config",
        ".GIT/config",
        ".Git/info/attributes",
        "vendor/lib/.git/config",
        "vendor/lib/.git/hooks/post-checkout",
        // A .git file would make `sub` a checkout whose git dir the sandbox chooses.
        "sub/.git",
        "sub/.GIT",
        ".git",
    ] {
        assert_git_write_denied(&ws, path);
    }
    assert_eq!(ws.read(".git/config"), config);
    assert_eq!(ws.read("vendor/lib/.git/config"), "[core]\n");
    assert!(!ws.root().join(".git/hooks/pre-commit").exists());
    assert!(!ws.root().join(".GIT").exists());
    assert!(!ws.root().join("sub/.git").exists());
    // Reading is as before.
    let env = ws.call("workspace.read", "call", json!({"path": ".git/config"}));
    assert_eq!(env["status"], "succeeded", "{env}");
    assert_eq!(env["output"]["content"], config);
}

#[test]
fn a_symlink_into_dot_git_does_not_reach_it() {
    let ws = Workspace::new();
    ws.git(&["init", "-q"]);
    let config = ws.read(".git/config");
    symlink(".git", ws.root().join("innocent")).unwrap();
    symlink("../.git/config", ws.root().join("src/settings.ini")).unwrap();
    symlink("hooks", ws.root().join(".git/hooklink")).unwrap();
    // Where a link leads to a .git that does not exist yet, create_dirs does not make it.
    symlink(".GIT/deep", ws.root().join("maker")).unwrap();
    for path in ["innocent/config", "src/settings.ini", "innocent/hooklink/x"] {
        assert_git_write_denied(&ws, path);
    }
    assert_git_create_denied(&ws, "maker/config");
    assert_eq!(ws.read(".git/config"), config);
    assert!(!ws.root().join(".GIT").exists());
    assert!(fs::symlink_metadata(ws.root().join("src/settings.ini"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn a_git_dir_outside_dot_git_is_denied_too() {
    let ws = Workspace::new();
    // `--separate-git-dir`: a .git file in the root points at `store`, a git dir by its shape.
    ws.git(&["init", "-q", "--separate-git-dir=store"]);
    assert!(ws.root().join(".git").is_file());
    // A linked worktree's git dir: HEAD and commondir.
    ws.file("meta/wt/HEAD", "ref: refs/heads/x\n")
        .file("meta/wt/commondir", "../..\n");
    // A .git file naming, relatively and absolutely, a directory that does not look like a
    // git dir (yet): what it points at is still git's.
    ws.file("nested/.git", "gitdir: pending\n")
        .file("nested/pending/config", "[core]\n");
    ws.file("abs/config", "[core]\n");
    let absolute = format!("gitdir: {}\n", ws.root().join("abs").display());
    fs::write(ws.root().join("abs/.git"), absolute).unwrap();
    for path in [
        "store/config",
        "store/hooks/pre-commit",
        "meta/wt/config.worktree",
        "nested/pending/config",
        "abs/config",
    ] {
        assert_git_write_denied(&ws, path);
    }
    assert_git_create_denied(&ws, "store/new/dirs/x");
    assert!(!ws.root().join("store/hooks/pre-commit").exists());
    assert!(!ws.root().join("store/new").exists());
    assert_eq!(ws.read("nested/pending/config"), "[core]\n");
    // Beside the git dirs, the checkout is written as usual.
    let env = ws.call(
        "workspace.write",
        "call",
        json!({"path": "nested/src.txt", "content": "ok\n"}),
    );
    assert_eq!(env["status"], "succeeded", "{env}");
}

#[test]
fn names_that_only_look_like_dot_git_are_ordinary() {
    let ws = Workspace::new();
    ws.git(&["init", "-q"]);
    for path in [
        ".gitignore",
        ".git./x",
        ".git /x",
        "x.git/config",
        "git/config",
    ] {
        let env = ws.call(
            "workspace.write",
            "call",
            json!({"path": path, "content": "ok\n", "create_dirs": true}),
        );
        assert_eq!(env["status"], "succeeded", "{path}: {env}");
        assert_eq!(ws.read(path), "ok\n");
    }
}

#[test]
fn allow_git_dir_lets_the_host_opt_in() {
    let ws = Workspace::new();
    ws.git(&["init", "-q"]);
    let env = ws.call_allowing_git(
        "workspace.write",
        json!({"path": ".git/description", "content": "opted in\n"}),
    );
    assert_eq!(
        env,
        succeeded(
            "workspace.write",
            "call",
            json!({"path": ".git/description", "bytes": 9})
        )
    );
    assert_eq!(ws.read(".git/description"), "opted in\n");
    let env = ws.call_allowing_git(
        "workspace.edit",
        json!({"path": ".git/description", "old": "opted", "new": "still"}),
    );
    assert_eq!(env["status"], "succeeded", "{env}");
    assert_eq!(ws.read(".git/description"), "still in\n");
}
