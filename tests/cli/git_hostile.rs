//! `adapter git` (SPEC §15.2) against what a host cannot trust, with the helpers of `git.rs`: a
//! checkout (and a submodule) rigged with every way a repository can make git run a program —
//! each rigged program writes a marker, and after every tool the marker folder must be empty
//! while the tool still worked and stored the file's exact bytes, with every git found on the
//! machine, and a control run of plain git on a copy of the same checkout proving that each rig
//! is live — and a git that hangs past the budget or through a signal.

use super::git::{
    adapter, call, failure, gits, pair, path_with, refused, request, succeeded, test_git, Repo,
};
use super::Cmd;
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

// ---- the rigged checkout ---------------------------------------------------------------------

/// The programs of the rig: each appends its name to `marks/` and then does what git expects
/// of it (a filter that did run would store different bytes).
const RIG_PROGRAMS: [(&str, &str); 13] = [
    ("fsmonitor", "exit 1"),
    ("hook", "exit 0"),
    ("extdiff", "exit 0"),
    ("driverdiff", "exit 0"),
    ("textconv", "printf 'TEXTCONV\\n'"),
    ("clean", "cat >/dev/null; printf 'CLEANED\\n'"),
    ("smudge", "cat"),
    ("process", "exit 1"),
    ("gpg", "exit 1"),
    ("pager", "cat"),
    ("editor", "echo edited > \"$1\""),
    ("include", "cat >/dev/null; printf 'INCLUDED\\n'"),
    ("odd", "cat >/dev/null; printf 'ODD\\n'"),
];

/// The files the rig commits: text with CRLF and a line a clean filter would drop, a file of
/// the process filter, one of an included config's filter, and binary bytes.
const RIG_FILES: [(&str, &[u8]); 6] = [
    ("a.txt", b"line one\r\nsecret = 1\r\nno newline at end"),
    ("data.proc", b"process me\n"),
    ("notes.inc", b"included filter\n"),
    ("conv.tc", b"textconv me\n"),
    ("blob.bin", b"\x00\x01\x02\xff\xfe binary\n"),
    ("weird.odd", b"a driver whose name has case, dots and =\n"),
];

/// A checkout whose `.git/config`, `.gitattributes`, hooks and includes each try to make git
/// run a program; `marks()` lists which ran.
struct Rig {
    repo: Repo,
}

impl Rig {
    fn new() -> Rig {
        let repo = Repo::new();
        let tmp = repo.tmp.path().to_path_buf();
        let bin = tmp.join("rig-bin");
        fs::create_dir_all(tmp.join("marks")).unwrap();
        fs::create_dir_all(&bin).unwrap();
        for (name, then) in RIG_PROGRAMS {
            let script = bin.join(name);
            fs::write(
                &script,
                format!(
                    "#!/bin/sh\necho \"$0 $*\" >> '{}/marks/{name}'\n{then}\n",
                    tmp.display()
                ),
            )
            .unwrap();
            fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        }
        let prog = |name: &str| bin.join(name).display().to_string();
        // Hooks, in the hooks folder git uses by default and in a core.hooksPath one.
        let hooks_path = tmp.join("rig-hooks");
        fs::create_dir_all(&hooks_path).unwrap();
        let root = repo.root();
        for dir in [root.join(".git/hooks"), hooks_path.clone()] {
            for hook in [
                "pre-commit",
                "prepare-commit-msg",
                "commit-msg",
                "post-commit",
                "post-index-change",
                "reference-transaction",
                "pre-auto-gc",
            ] {
                symlink(bin.join("hook"), dir.join(hook)).unwrap();
            }
        }
        // An included config and a conditionally included one, each with its own filter.
        fs::write(
            root.join(".git/included.config"),
            format!(
                "[filter \"inc\"]\n\tclean = {}\n\trequired = true\n",
                prog("include")
            ),
        )
        .unwrap();
        fs::write(
            root.join(".git/conditional.config"),
            format!(
                "[core]\n\tfsmonitor = {}\n\thooksPath = {}\n",
                prog("fsmonitor"),
                hooks_path.display()
            ),
        )
        .unwrap();
        let config = format!(
            "[core]\n\tfsmonitor = {fsmonitor}\n\thooksPath = {hooks}\n\tpager = {pager}\n\teditor = {editor}\n\
             [pager]\n\tstatus = {pager}\n\tdiff = {pager}\n\tlog = {pager}\n\
             [sequence]\n\teditor = {editor}\n\
             [diff]\n\texternal = {extdiff}\n\tnoprefix = true\n\tmnemonicPrefix = true\n\tcontext = 0\n\
             [status]\n\tshowUntrackedFiles = no\n\
             [diff \"drv\"]\n\tcommand = {driverdiff}\n\
             [diff \"tc\"]\n\ttextconv = {textconv}\n\
             [filter \"evil\"]\n\tclean = {clean}\n\tsmudge = {smudge}\n\trequired = true\n\
             [filter \"proc\"]\n\tprocess = {process}\n\trequired = true\n\
             [filter \"Odd.Name=x\"]\n\tclean = {odd}\n\trequired = true\n\
             [commit]\n\tgpgSign = true\n\
             [tag]\n\tgpgSign = true\n\
             [gpg]\n\tprogram = {gpg}\n\
             [gpg \"ssh\"]\n\tprogram = {gpg}\n\
             [log]\n\tshowSignature = true\n\
             [gc]\n\tauto = 1\n\
             [hook \"configured\"]\n\tevent = pre-commit\n\tevent = post-commit\n\tcommand = {hook}\n\
             [include]\n\tpath = {included}\n\
             [includeIf \"gitdir:{root}/\"]\n\tpath = {conditional}\n",
            fsmonitor = prog("fsmonitor"),
            hooks = hooks_path.display(),
            pager = prog("pager"),
            editor = prog("editor"),
            extdiff = prog("extdiff"),
            driverdiff = prog("driverdiff"),
            textconv = prog("textconv"),
            clean = prog("clean"),
            smudge = prog("smudge"),
            process = prog("process"),
            odd = prog("odd"),
            gpg = prog("gpg"),
            hook = prog("hook"),
            included = root.join(".git/included.config").display(),
            conditional = root.join(".git/conditional.config").display(),
            root = fs::canonicalize(&root).unwrap().display(),
        );
        let mut text = fs::read_to_string(root.join(".git/config")).unwrap();
        text.push_str(&config);
        fs::write(root.join(".git/config"), text).unwrap();
        fs::write(
            root.join(".gitattributes"),
            "*.txt filter=evil diff=drv\n*.proc filter=proc\n*.inc filter=inc\n*.tc diff=tc\n\
             *.odd filter=Odd.Name=x\n",
        )
        .unwrap();
        Rig { repo }
    }

    /// The markers written so far, by program name.
    fn marks(&self) -> Vec<String> {
        let mut marks: Vec<String> = fs::read_dir(self.repo.tmp.path().join("marks"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        marks.sort();
        marks
    }

    /// The host's environment as hostile as it gets: every variable git would read to run
    /// something, find another repository or read another configuration.
    fn hostile_env(&self, cmd: Cmd) -> Cmd {
        let tmp = self.repo.tmp.path();
        let bin = tmp.join("rig-bin");
        let home = tmp.join("home");
        fs::create_dir_all(home.join(".config/git")).unwrap();
        let global = format!(
            "[core]\n\tfsmonitor = {}\n[diff]\n\texternal = {}\n",
            bin.join("fsmonitor").display(),
            bin.join("extdiff").display()
        );
        fs::write(home.join(".gitconfig"), &global).unwrap();
        fs::write(home.join(".config/git/config"), &global).unwrap();
        fs::write(home.join(".config/git/attributes"), "* filter=evil\n").unwrap();
        let other = tmp.join("other");
        cmd.env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("GIT_DIR", other.join(".git"))
            .env("GIT_WORK_TREE", &other)
            .env("GIT_CEILING_DIRECTORIES", "/")
            .env("GIT_EXTERNAL_DIFF", bin.join("extdiff"))
            .env("GIT_PAGER", bin.join("pager"))
            .env("PAGER", bin.join("pager"))
            .env("GIT_EDITOR", bin.join("editor"))
            .env("EDITOR", bin.join("editor"))
            .env("GIT_SEQUENCE_EDITOR", bin.join("editor"))
            .env(
                "GIT_CONFIG_PARAMETERS",
                format!("'core.fsmonitor'='{}'", bin.join("fsmonitor").display()),
            )
            .env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "core.pager")
            .env("GIT_CONFIG_VALUE_0", bin.join("pager"))
            .env("GIT_CONFIG_SYSTEM", home.join(".gitconfig"))
            .env("GIT_CONFIG_GLOBAL", home.join(".gitconfig"))
            .env("GIT_EXEC_PATH", &bin)
            .env("GIT_ALLOW_PROTOCOL", "file:ext")
            .env("GIT_SSH_COMMAND", bin.join("hook"))
    }
}

#[test]
fn the_rig_is_live_for_plain_git() {
    // The control: plain git on a copy of the rigged checkout runs each rigged program, so the
    // empty marker folder of the next test means the adapter neutralised them.
    let rig = Rig::new();
    let root = rig.repo.root();
    for (name, bytes) in RIG_FILES {
        rig.repo.write(name, bytes);
    }
    let plain = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(&root)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "P")
            .env("GIT_AUTHOR_EMAIL", "p@example.org")
            .env("GIT_COMMITTER_NAME", "P")
            .env("GIT_COMMITTER_EMAIL", "p@example.org")
            .output()
            .unwrap()
    };
    plain(&["status"]);
    plain(&["add", "a.txt", "notes.inc", "conv.tc", "weird.odd"]);
    plain(&["add", "data.proc"]);
    plain(&["diff", "HEAD"]);
    plain(&["diff", "--no-ext-diff", "--cached", "--", "conv.tc"]);
    plain(&["commit", "-m", "signed"]);
    plain(&["commit", "--allow-empty", "--no-gpg-sign"]);
    let marks = rig.marks();
    for expected in [
        "clean",
        "driverdiff",
        "editor",
        "fsmonitor",
        "gpg",
        "hook",
        "include",
        "odd",
        "process",
        "textconv",
    ] {
        assert!(
            marks.iter().any(|m| m == expected),
            "plain git did not run {expected}: {marks:?}"
        );
    }
}

#[test]
fn a_rigged_checkout_runs_nothing_and_every_tool_still_works_with_every_git() {
    for git in gits() {
        let rig = Rig::new();
        let root = rig.repo.root();
        let path = path_with(rig.repo.tmp.path(), &git);
        let run = |tool: &str, input: Value| {
            let cmd = rig.hostile_env(adapter(
                &root,
                &["--allow-commit", "--author", "Rig Test <rig@example.org>"],
            ));
            let env = call(cmd.env("PATH", &path), tool, input.clone());
            assert_eq!(env["status"], "succeeded", "{git:?} {tool} {input}: {env}");
            assert_eq!(
                rig.marks(),
                Vec::<String>::new(),
                "{git:?} {tool} {input} ran a rigged program"
            );
            env["output"].clone()
        };
        for (name, bytes) in RIG_FILES {
            rig.repo.write(name, bytes);
        }
        rig.repo.write("a.txt", RIG_FILES[0].1);
        let out = run("git.status", json!({}));
        let paths: Vec<&str> = out["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap())
            .collect();
        let mut sorted = paths.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            [
                ".gitattributes",
                "a.txt",
                "blob.bin",
                "conv.tc",
                "data.proc",
                "notes.inc",
                "weird.odd"
            ],
            "{git:?}: {out}"
        );
        assert_eq!(
            out["entries"][0],
            json!({"path": "a.txt", "index": ".", "worktree": "M"})
        );
        let out = run("git.diff", json!({}));
        let diff = out["diff"].as_str().unwrap();
        assert!(
            diff.contains("\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1,3 @@\n-one\n"),
            "{git:?}: {diff}"
        );
        assert!(
            diff.contains("+line one\r\n+secret = 1\r\n+no newline at end"),
            "{git:?}: {diff}"
        );
        let all: Vec<&str> = RIG_FILES
            .iter()
            .map(|(n, _)| *n)
            .chain([".gitattributes"])
            .collect();
        run("git.add", json!({ "paths": all }));
        let out = run(
            "git.diff",
            json!({"staged": true, "paths": ["conv.tc", "a.txt"]}),
        );
        let diff = out["diff"].as_str().unwrap();
        assert!(
            diff.contains("+textconv me\n") && !diff.contains("TEXTCONV"),
            "{git:?}: {diff}"
        );
        assert!(diff.contains("+secret = 1\r\n"), "{git:?}: {diff}");
        let out = run("git.commit", json!({"message": "rigged"}));
        let commit = out["commit"].as_str().unwrap().to_string();
        let out = run("git.log", json!({"max": 2}));
        assert_eq!(out["commits"][0]["commit"], commit);
        assert_eq!(out["commits"][0]["subject"], "rigged");
        run("git.status", json!({}));
        // Exactly the bytes of each file, in the index and in the commit.
        for (name, bytes) in RIG_FILES {
            for object in [format!(":{name}"), format!("{commit}:{name}")] {
                let blob = test_git(&root, &["cat-file", "blob", &object]);
                assert_eq!(blob, bytes, "{git:?} {object}");
            }
        }
        // Unsigned, and on the branch the repository had (not the host's GIT_DIR).
        let raw = rig.repo.git(&["cat-file", "commit", &commit]);
        assert!(!raw.contains("gpgsig"), "{raw}");
        assert_eq!(rig.repo.head(), commit);
        assert!(!rig.repo.tmp.path().join("other").exists());
    }
}

#[test]
fn a_rigged_submodule_runs_nothing_either() {
    // Plain `git status` starts a `git status` inside each submodule, with the submodule's own
    // configuration: its fsmonitor and its filters, which the superproject does not name.
    let repo = Repo::new();
    let tmp = repo.tmp.path();
    let sub = tmp.join("sub");
    fs::create_dir(&sub).unwrap();
    test_git(&sub, &["init", "-q"]);
    fs::write(sub.join("s.txt"), "s\n").unwrap();
    test_git(&sub, &["add", "s.txt"]);
    test_git(&sub, &["commit", "-q", "-m", "s"]);
    let root = repo.root();
    let sub_url = sub.display().to_string();
    test_git(
        &root,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            &sub_url,
            "sub",
        ],
    );
    test_git(&root, &["commit", "-q", "-m", "add sub"]);
    let marks = tmp.join("marks");
    fs::create_dir(&marks).unwrap();
    let rig = tmp.join("rig");
    fs::write(
        &rig,
        format!("#!/bin/sh\ntouch '{}'/\"$1\"\ncat\n", marks.display()),
    )
    .unwrap();
    fs::set_permissions(&rig, fs::Permissions::from_mode(0o755)).unwrap();
    let checkout = root.join("sub");
    test_git(
        &checkout,
        &[
            "config",
            "core.fsmonitor",
            &format!("{} fsmonitor", rig.display()),
        ],
    );
    test_git(
        &checkout,
        &[
            "config",
            "filter.subf.clean",
            &format!("{} clean", rig.display()),
        ],
    );
    fs::write(checkout.join(".gitattributes"), "* filter=subf\n").unwrap();
    // The same size, a new mtime: git must hash the file to know, through the filter.
    fs::write(checkout.join("s.txt"), "t\n").unwrap();
    // `.gitmodules` may ask git to look into the submodule whatever the defaults say.
    test_git(
        &root,
        &[
            "config",
            "-f",
            ".gitmodules",
            "submodule.sub.ignore",
            "none",
        ],
    );
    test_git(&root, &["config", "submodule.sub.ignore", "none"]);
    repo.write("b.txt", b"b\n");
    for git in gits() {
        let path_var = path_with(tmp, &git);
        let cmd =
            || adapter(&root, &["--allow-commit", "--author", "A <a@b.c>"]).env("PATH", &path_var);
        for (tool, input) in [
            ("git.status", json!({})),
            ("git.diff", json!({})),
            ("git.diff", json!({"staged": true})),
            ("git.add", json!({"paths": ["b.txt"]})),
            ("git.add", json!({"paths": ["."]})),
            ("git.commit", json!({"message": "with a dirty submodule"})),
        ] {
            let env = call(cmd(), tool, input.clone());
            succeeded(&env);
            let ran: Vec<_> = fs::read_dir(&marks).unwrap().collect();
            assert!(ran.is_empty(), "{git:?} {tool} {input} ran {ran:?}");
        }
        // The submodule, and a path inside it, are refused: they are not the superproject's.
        for path in ["sub", "sub/s.txt", "./sub/"] {
            let env = call(cmd(), "git.add", json!({ "paths": ["b.txt", path] }));
            refused(&env, "denied", "path_outside_root", tmp, path);
            assert!(fs::read_dir(&marks).unwrap().next().is_none());
        }
        repo.write("b.txt", format!("{git:?}\n").as_bytes());
    }
}

/// A git whose `add` hangs, writing its pid in the root (the one place the confined adapter
/// may write, with `--allow-commit`).
fn hanging_add(repo: &Repo) -> (String, PathBuf) {
    let bin = repo.tmp.path().join("slow-bin");
    fs::create_dir(&bin).unwrap();
    let pid_file = repo.root().join("slow.pid");
    let git = gits().remove(0);
    let script = format!(
        "#!/bin/sh\nif [ \"$2\" = add ]; then echo $$ > '{}'; exec sleep 60; fi\nexec '{}' \"$@\"\n",
        pid_file.display(),
        git.display()
    );
    fs::write(bin.join("git"), script).unwrap();
    fs::set_permissions(bin.join("git"), fs::Permissions::from_mode(0o755)).unwrap();
    (format!("{}:/usr/bin:/bin", bin.display()), pid_file)
}

/// The hanging git whose pid is in `pid_file` is gone.
fn assert_stopped(pid_file: &Path) {
    let pid = fs::read_to_string(pid_file).unwrap();
    let pid = pid.trim();
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "the hanging git ({pid}) was left running"
    );
}

#[test]
fn a_git_slower_than_the_budget_is_git_timeout_and_is_stopped() {
    let repo = Repo::new();
    let (path, pid_file) = hanging_add(&repo);
    let cmd = adapter(&repo.root(), &["--allow-commit"])
        .env("PATH", path)
        .env("WP_CODEBOX_PARENT_TOOL_TIMEOUT_MS", "2000");
    let env = call(cmd, "git.add", json!({"paths": ["a.txt"]}));
    assert_eq!(failure(&env), pair("timeout", "git_timeout"));
    assert_eq!(env["error"]["retryable"], true);
    assert_stopped(&pid_file);
}

#[test]
fn sigterm_stops_git_and_is_interrupted() {
    let repo = Repo::new();
    let (path, pid_file) = hanging_add(&repo);
    let running = adapter(&repo.root(), &["--allow-commit"])
        .env("PATH", path)
        .stdin(request("git.add", json!({"paths": ["a.txt"]})))
        .spawn();
    let waited = std::time::Instant::now();
    while !pid_file.exists() || fs::read_to_string(&pid_file).unwrap().trim().is_empty() {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(60),
            "git add never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    running.signal(rustix::process::Signal::TERM);
    let env = running.wait().exit(0).stderr_empty().json();
    assert_eq!(failure(&env), pair("failed", "interrupted"));
    assert!(
        env["error"]["message"]
            .as_str()
            .unwrap()
            .contains("SIGTERM"),
        "{env}"
    );
    assert_stopped(&pid_file);
}
