//! `fixtures/bin/parent-tool-dispatch`, the launcher the fixture bridges name as their adapter:
//! the README's first command works whatever was built — a debug or release build, a build
//! into CARGO_TARGET_DIR, an installed binary — while the dispatcher still runs `argv[0]`
//! exactly as given (SPEC §4.2). Each build is simulated by a link to the binary under test in
//! a folder of its own, next to a copy of the fixtures that has no `target/` of its own.

use super::*;
use std::os::unix::fs::symlink;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A stand-in for a clone: the launcher, the first command's bridge and request, and the
/// workspace it reads — and no build.
fn clone() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("fixtures/bin")).unwrap();
    for file in [
        "fixtures/bin/parent-tool-dispatch",
        "fixtures/bridge.json",
        "fixtures/request.json",
    ] {
        // std::fs::copy keeps the mode: the launcher stays executable.
        std::fs::copy(repo().join(file), root.join(file)).unwrap();
    }
    copy_tree(
        &repo().join("fixtures/workspace"),
        &root.join("fixtures/workspace"),
    );
    dir
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A "build" of the binary at `dir/parent-tool-dispatch`.
fn build_into(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let binary = dir.join("parent-tool-dispatch");
    symlink(bin(), &binary).unwrap();
    binary
}

/// A `PATH` on which no parent-tool-dispatch is found.
const BARE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// `sh -c 'exec PROGRAM "$@"'` in `cwd`: PROGRAM resolved by the shell from `cwd` (a relative
/// path, or a bare name through PATH), as a user typing it would.
fn typed(program: &str, args: &[&str], cwd: &Path) -> Cmd {
    Cmd::of(
        PathBuf::from("/bin/sh"),
        ["-c", &format!("exec {program} \"$@\""), "sh"],
    )
    .args(args)
    .cwd(cwd)
    .env("PATH", BARE_PATH)
    .env_remove("CARGO_TARGET_DIR")
}

/// The first command, typed in the clone as `FOLDER/parent-tool-dispatch …` after a build
/// into the clone's FOLDER.
fn first_command_of_a_build_in(clone: &Path, folder: &str) -> Output {
    build_into(&clone.join(folder));
    typed(
        &format!("{folder}/parent-tool-dispatch"),
        &FIRST_COMMAND,
        clone,
    )
    .run()
}

const FIRST_COMMAND: [&str; 3] = [
    "--parent-tool-bridge",
    "@fixtures/bridge.json",
    "fixtures/request.json",
];

/// The first command's envelope: the workspace's `docs/hello.txt`, read by the adapter.
fn assert_first_command_succeeded(out: &Output) {
    let want = std::fs::read_to_string(repo().join("fixtures/workspace/docs/hello.txt")).unwrap();
    out.exit(0).stderr_empty().stdout_json(|envelope| {
        assert_eq!(envelope["status"], "succeeded", "{envelope}");
        assert_eq!(envelope["output"]["content"], json!(want));
        assert_eq!(envelope["diagnostics"]["dispatch"]["adapter_started"], true);
    });
}

#[test]
fn the_fixture_bridge_names_the_launcher() {
    let bridge: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("fixtures/bridge.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        bridge["dispatcher"]["command"]["argv"][0],
        "fixtures/bin/parent-tool-dispatch"
    );
    let launcher =
        std::fs::read_to_string(repo().join("fixtures/bin/parent-tool-dispatch")).unwrap();
    assert!(launcher.starts_with("#!/bin/sh\n"), "a POSIX sh script");
}

#[test]
fn the_first_command_works_with_only_a_release_build() {
    let clone = clone();
    // Typed as `target/release/parent-tool-dispatch …`: a relative argv[0], so the launcher
    // finds the release build beside its checkout.
    let out = first_command_of_a_build_in(clone.path(), "target/release");
    assert_first_command_succeeded(&out);
}

#[test]
fn the_first_command_works_with_a_build_in_cargo_target_dir() {
    let clone = clone();
    let target = tempfile::tempdir().unwrap();
    let binary = build_into(&target.path().join("debug"));
    // As `cargo run` starts it: by its absolute path, CARGO_TARGET_DIR set — which the
    // dispatcher does not pass on to its adapter, so the launcher runs the binary that
    // started it.
    let out = Cmd::of(binary, FIRST_COMMAND)
        .cwd(clone.path())
        .env("PATH", BARE_PATH)
        .env("CARGO_TARGET_DIR", target.path())
        .run();
    assert_first_command_succeeded(&out);
}

#[test]
fn the_first_command_works_with_an_installed_binary() {
    let clone = clone();
    let home = tempfile::tempdir().unwrap();
    build_into(&home.path().join(".cargo/bin"));
    let path = format!("{}:{BARE_PATH}", home.path().join(".cargo/bin").display());
    let out = typed("parent-tool-dispatch", &FIRST_COMMAND, clone.path())
        .env("PATH", &path)
        .run();
    assert_first_command_succeeded(&out);
}

#[test]
fn run_by_hand_the_launcher_finds_cargo_target_dir_then_the_checkout() {
    let clone = clone();
    let launcher = clone.path().join("fixtures/bin/parent-tool-dispatch");
    let version = format!("parent-tool-dispatch {}\n", env!("CARGO_PKG_VERSION"));
    let target = tempfile::tempdir().unwrap();
    build_into(&target.path().join("release"));
    Cmd::of(launcher.clone(), ["--version"])
        .env("PATH", BARE_PATH)
        .env("CARGO_TARGET_DIR", target.path())
        .run()
        .exit(0)
        .stdout_eq(&version)
        .stderr_empty();
    build_into(&clone.path().join("target/debug"));
    Cmd::of(launcher, ["--version"])
        .env("PATH", BARE_PATH)
        .env_remove("CARGO_TARGET_DIR")
        .run()
        .exit(0)
        .stdout_eq(&version)
        .stderr_empty();
}

#[test]
fn without_any_build_the_launcher_says_so_and_exits_127() {
    let clone = clone();
    let launcher = clone.path().join("fixtures/bin/parent-tool-dispatch");
    let want = format!(
        "{}: no parent-tool-dispatch binary found: build one with `cargo build` (or install it with `cargo install --locked --path .`)\n",
        launcher.display()
    );
    Cmd::of(launcher.clone(), ["--version"])
        .env("PATH", BARE_PATH)
        .env_remove("CARGO_TARGET_DIR")
        .run()
        .exit(127)
        .stdout_empty()
        .stderr_eq(&want);
    // With the launcher's own folder on PATH it finds itself there once, and stops.
    let path = format!(
        "{}:{BARE_PATH}",
        clone.path().join("fixtures/bin").display()
    );
    let out = Cmd::of(launcher, ["--version"])
        .env("PATH", &path)
        .env_remove("CARGO_TARGET_DIR")
        .run();
    out.exit(127).stdout_empty().stderr_with(|stderr| {
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("no parent-tool-dispatch binary found"),
            "{stderr}"
        );
    });
    // Through the dispatcher (started by a relative path the launcher cannot use), that is
    // the adapter's failure, never a success, and the launcher's reason is in the envelope.
    let out = first_command_of_a_build_in(clone.path(), "elsewhere");
    out.exit(1)
        .stderr_starts_with("error[adapter_exit_nonzero]: ")
        .stdout_json(|envelope| {
            assert_eq!(envelope["status"], "failed");
            assert_eq!(envelope["error"]["code"], "adapter_exit_nonzero");
            let dispatch = &envelope["diagnostics"]["dispatch"];
            assert_eq!(dispatch["exit_code"], 127);
            let tail = dispatch["stderr_tail"].as_str().unwrap();
            assert!(
                tail.contains("no parent-tool-dispatch binary found"),
                "{tail}"
            );
        });
}
