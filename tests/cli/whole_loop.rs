//! The whole loop: the dispatcher running its own reference workspace adapter (SPEC §9), as
//! the README's first command does (through the launcher `fixtures/bin/parent-tool-dispatch`).

use super::*;

fn workspace_bridge() -> Value {
    let mut b = bridge(&[]);
    b["allowed_tools"] = json!([
        "workspace.read",
        "workspace.search",
        "workspace.write",
        "workspace.edit"
    ]);
    b["dispatcher"]["command"] = json!({
        "argv": [bin().display().to_string(), "adapter", "workspace"],
        "cwd_env": "WORKSPACE_ROOT"
    });
    b
}

fn call(root: &Path, tool: &str, input: Value) -> Run {
    Dispatch::with_bridge(workspace_bridge())
        .env("WORKSPACE_ROOT", root.to_str().unwrap())
        .request(|r| {
            r["tool"] = json!(tool);
            r["input"] = input;
            r["authorization"]["allowed_tools"] = json!([tool]);
        })
        .run()
}

#[test]
fn readme_first_command_reads_the_fixture_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The fixture bridge names the launcher, which runs the binary that started it: this one.
    let out = Cmd::new([
        "--parent-tool-bridge",
        "@fixtures/bridge.json",
        "--pretty",
        "fixtures/request.json",
    ])
    .cwd(root)
    .run();
    let want = std::fs::read_to_string(root.join("fixtures/workspace/docs/hello.txt")).unwrap();
    out.exit(0).stderr_empty().stdout_with(|stdout| {
        let envelope: Value = serde_json::from_str(stdout).unwrap();
        assert_eq!(envelope["status"], "succeeded");
        assert_eq!(envelope["output"]["content"], json!(want));
        assert_eq!(envelope["output"]["path"], "docs/hello.txt");
    });
}

#[test]
fn each_tool_works_through_the_dispatcher() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();

    let run = call(
        ws.path(),
        "workspace.read",
        json!({"path": "notes.txt", "offset": 1, "limit": 1}),
    );
    run.expect("succeeded", None, 0);
    assert_eq!(run.envelope["output"]["content"], "beta\n");
    assert_eq!(run.envelope["output"]["truncated"], true);

    let run = call(ws.path(), "workspace.search", json!({"pattern": "^g.m+a$"}));
    run.expect("succeeded", None, 0);
    assert_eq!(
        run.envelope["output"]["matches"],
        json!([{"path": "notes.txt", "line": 3, "text": "gamma"}])
    );

    let run = call(
        ws.path(),
        "workspace.write",
        json!({"path": "new/dir/file.txt", "content": "hi", "create_dirs": true}),
    );
    run.expect("succeeded", None, 0);
    assert_eq!(
        run.envelope["output"],
        json!({"path": "new/dir/file.txt", "bytes": 2})
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("new/dir/file.txt")).unwrap(),
        "hi"
    );

    let run = call(
        ws.path(),
        "workspace.edit",
        json!({"path": "notes.txt", "old": "beta", "new": "BETA"}),
    );
    run.expect("succeeded", None, 0);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(),
        "alpha\nBETA\ngamma\n"
    );
}

#[test]
fn escapes_through_the_dispatcher_are_denied_with_77() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("inner")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", ws.path().join("passwd")).unwrap();
    std::os::unix::fs::symlink("/etc", ws.path().join("inner/etc")).unwrap();
    for path in [
        "../outside.txt",
        "/etc/passwd",
        "passwd",
        "inner/etc/passwd",
    ] {
        let run = call(ws.path(), "workspace.read", json!({"path": path}));
        run.expect("denied", Some("path_outside_root"), 77);
        assert!(
            !run.stdout.contains("root:"),
            "{path}: nothing of /etc/passwd leaks"
        );
    }
    let run = call(
        ws.path(),
        "workspace.write",
        json!({"path": "inner/etc/evil", "content": "x"}),
    );
    run.expect("denied", Some("path_outside_root"), 77);
    assert!(!Path::new("/etc/evil").exists());
}

#[test]
fn edit_failures_and_unknown_tools_come_back_as_failed() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("f.txt"), "one two two").unwrap();
    let run = call(
        ws.path(),
        "workspace.edit",
        json!({"path": "f.txt", "old": "three", "new": "x"}),
    );
    run.expect("failed", Some("no_match"), 1);
    let run = call(
        ws.path(),
        "workspace.edit",
        json!({"path": "f.txt", "old": "two", "new": "x"}),
    );
    run.expect("failed", Some("ambiguous_match"), 1);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("f.txt")).unwrap(),
        "one two two"
    );

    let mut b = workspace_bridge();
    b["allowed_tools"] = json!(["workspace.delete"]);
    let run = Dispatch::with_bridge(b)
        .env("WORKSPACE_ROOT", ws.path().to_str().unwrap())
        .request(|r| {
            r["tool"] = json!("workspace.delete");
            r["authorization"]["allowed_tools"] = json!(["workspace.delete"]);
        })
        .run();
    run.expect("failed", Some("unknown_tool"), 1);
    let run = Dispatch::with_bridge(workspace_bridge())
        .env("WORKSPACE_ROOT", ws.path().to_str().unwrap())
        .request(|r| {
            r["operation"] = json!("delete");
            r["input"] = json!({"path": "f.txt"});
        })
        .run();
    run.expect("failed", Some("unknown_operation"), 1);
}

#[test]
fn provider_safe_ids_reach_the_workspace_adapter() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "x").unwrap();
    let run = Dispatch::with_bridge(workspace_bridge())
        .env("WORKSPACE_ROOT", ws.path().to_str().unwrap())
        .args(&["--tool-map", "provider-safe"])
        .request(|r| r["input"] = json!({"path": "a.txt"}))
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(run.envelope["tool"], "workspace.read");
    assert_eq!(run.envelope["output"]["content"], "x");
}
