//! The documents' command examples are run: each ```console block of the README, of `docs/`
//! and of the other top-level documents is one of the cases in `tests/cmd/*.md`, which trycmd
//! runs against the built binary from the repository root (stdout and stderr together, stderr
//! first; `? N` is the exit status; `[..]` matches anything on one line). Re-bless:
//! `TRYCMD=overwrite cargo test --test cli readme` updates the cases, then
//! `UPDATE_GENERATED=1 cargo test --test cli readme` copies them into the documents.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every document a reader is sent to: the README, CONTRIBUTING.md, ARCHITECTURE.md and every
/// Markdown file of `docs/`, as (path relative to the root, text).
pub(crate) fn documents() -> Vec<(PathBuf, String)> {
    let mut paths: Vec<PathBuf> = ["README.md", "CONTRIBUTING.md", "ARCHITECTURE.md"]
        .into_iter()
        .map(PathBuf::from)
        .collect();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| p.strip_prefix(root()).unwrap().to_path_buf())
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(root().join(&p))
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, text)
        })
        .collect()
}

/// The text of one document (a path relative to the root).
pub(crate) fn document(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// trycmd reports every case on the test process's own stderr, past libtest's capture: the
/// cases run in a child test process (this binary again, running [`trycmd_cases`]), whose
/// output is shown only when a case failed — a passing suite prints nothing.
#[test]
fn readme_examples_run_as_shown() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "readme::trycmd_cases",
            "--ignored",
            "--nocapture",
            "--quiet",
        ])
        .args(["--test-threads", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the documents' examples failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // It ran the cases, not nothing.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Testing tests/cmd/first-command.md"),
        "{stderr}"
    );
}

#[test]
#[ignore = "run by readme_examples_run_as_shown in a child process, which shows its output only on failure"]
fn trycmd_cases() {
    // The fixture bridges name their adapters relative to the repository root, as the
    // README's first command runs them.
    trycmd::TestCases::new()
        .register_bin("parent-tool-dispatch", super::bin())
        .case("tests/cmd/*.md");
}

/// The ```console blocks of a Markdown text, each from its opening fence to its closing one.
fn console_blocks(text: &str) -> Vec<String> {
    fenced_blocks(text, "console")
}

/// The blocks of a Markdown text fenced as ```LANG, each from its opening fence to its closing
/// one.
fn fenced_blocks(text: &str, lang: &str) -> Vec<String> {
    let open = format!("```{lang}");
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match &mut current {
            None if line == open => current = Some(String::new()),
            None => {}
            Some(block) if line == "```" => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    blocks
}

fn cases() -> Vec<(PathBuf, String)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("tests/cmd"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

#[test]
fn readme_shows_exactly_the_tested_examples() {
    let tested: Vec<String> = cases()
        .iter()
        .flat_map(|(_, text)| console_blocks(text))
        .collect();
    let mut shown = Vec::new();
    for (path, mut text) in documents() {
        if std::env::var_os("UPDATE_GENERATED").is_some() {
            // Replace each block by the tested block that starts with the same command.
            let before = text.clone();
            for block in console_blocks(&before) {
                let first = block.lines().next().unwrap_or_default();
                if let Some(fresh) = tested.iter().find(|t| t.lines().next() == Some(first)) {
                    text = text.replacen(&block, fresh, 1);
                }
            }
            if text != before {
                // Atomically: the other document tests read it concurrently.
                let target = root().join(&path);
                let tmp = target.with_extension("md.tmp");
                std::fs::write(&tmp, &text).unwrap();
                std::fs::rename(&tmp, &target).unwrap();
            }
        }
        for block in console_blocks(&text) {
            assert!(
                tested.contains(&block),
                "{} shows an example that tests/cmd does not run:\n{block}",
                path.display()
            );
            shown.push(block);
        }
    }
    for block in &tested {
        assert!(
            shown.contains(block),
            "tests/cmd runs an example no document shows:\n{block}"
        );
    }
    assert!(shown.len() >= 10, "only {} examples", shown.len());
    // The front door shows the first run and the tutorial itself.
    let readme = document("README.md");
    assert!(
        console_blocks(&readme).len() >= 4,
        "the README shows its examples"
    );
}

/// Example files shown in a document as they are, each in its document.
#[test]
fn documents_show_the_example_files_verbatim() {
    for (file, lang, doc) in [
        (
            "fixtures/examples/own-adapter.bridge.json",
            "json",
            "docs/guide.md",
        ),
        (
            "fixtures/examples/adapter-answer.json",
            "json",
            "docs/guide.md",
        ),
        (
            "fixtures/examples/adapter-failure.json",
            "json",
            "docs/guide.md",
        ),
        ("fixtures/tutorial/clock-adapter", "python", "README.md"),
        ("fixtures/tutorial/bridge.json", "json", "README.md"),
        ("fixtures/tutorial/request.json", "json", "README.md"),
    ] {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        assert!(
            fenced_blocks(&document(doc), lang).contains(&text),
            "{doc} does not show {file} as it is"
        );
    }
}

/// The tutorial's adapter runs as the README says: executable, a Python script.
#[test]
fn the_tutorial_adapter_is_an_executable_script() {
    use std::os::unix::fs::PermissionsExt;
    let path = root().join("fixtures/tutorial/clock-adapter");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o111, 0o111, "{mode:o}");
    assert!(document("fixtures/tutorial/clock-adapter").starts_with("#!/usr/bin/env python3\n"));
}

/// The README's section `## TITLE`, to the next one.
fn readme_section(title: &str) -> String {
    let readme = document("README.md");
    let section = readme
        .split(&format!("\n## {title}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("README has no section {title}"));
    section.split("\n## ").next().unwrap().to_string()
}

/// The README's first run is `cargo run -- ARGS` with the ARGS of the tested first command
/// (`tests/cmd/first-command.md`), then `cargo test --locked`: the two commands a newcomer
/// runs first are the ones the suite checks.
#[test]
fn the_first_run_is_the_tested_command() {
    let section = readme_section("The first run");
    let commands = fenced_blocks(&section, "sh")
        .into_iter()
        .next()
        .expect("the first run shows its commands");
    let lines: Vec<&str> = commands.lines().collect();
    let tested = document("tests/cmd/first-command.md");
    let tested = console_blocks(&tested);
    let args = tested[0]
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("$ parent-tool-dispatch "))
        .expect("the tested first command");
    assert_eq!(
        lines,
        [
            format!("cargo run -- {args}").as_str(),
            "cargo test --locked"
        ]
    );
    // It says the first build is slow rather than hiding cargo's progress.
    assert!(!commands.contains("--quiet"));
    assert!(section.contains("The first build takes a few minutes"));
}

/// Every relative link of every document names a file of the repository.
#[test]
fn documents_link_only_to_files_that_exist() {
    for (path, text) in documents() {
        let dir = root().join(&path);
        let dir = dir.parent().unwrap();
        for (at, _) in text.match_indices("](") {
            let rest = &text[at + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = &rest[..end];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            if let Some(anchor) = target.strip_prefix('#') {
                assert!(
                    anchors(&text).iter().any(|a| a == anchor),
                    "{} links to {target}, a heading it does not have",
                    path.display()
                );
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
            assert!(
                dir.join(file).exists() || pending_document(file),
                "{} links to {target}, which does not exist",
                path.display()
            );
            if !anchor.is_empty() && dir.join(file).is_file() {
                let linked = std::fs::read_to_string(dir.join(file)).unwrap();
                assert!(
                    anchors(&linked).iter().any(|a| a == anchor),
                    "{} links to {target}, a heading {file} does not have",
                    path.display()
                );
            }
        }
    }
}

/// The anchors a Markdown renderer gives the headings of `text` (outside code fences):
/// lower case, spaces as `-`, letters, digits, `-` and `_` kept, the rest dropped.
fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut found = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        found.push(slug);
    }
    found
}

/// The documents other branches are writing at the same time (their sections are still in
/// the README on this one); linked from the README's list before they land.
fn pending_document(file: &str) -> bool {
    ["docs/workspace.md", "docs/confinement.md", "docs/ledger.md"].contains(&file)
}

#[test]
fn readme_cites_nothing_outside_the_repository() {
    let readme = document("README.md");
    // The specification is in the repository (docs/SPEC.md): the README may link it, and
    // mentions it in no other way.
    assert!(root().join("docs/SPEC.md").is_file());
    let links = readme.matches("[docs/SPEC.md](docs/SPEC.md)").count();
    assert!(links >= 1, "README does not link docs/SPEC.md");
    assert_eq!(
        readme.matches("SPEC").count(),
        2 * links,
        "README cites the SPEC other than by its link to docs/SPEC.md"
    );
}

#[test]
fn no_document_holds_a_merge_conflict_marker() {
    for (path, text) in documents() {
        for marker in ["<<<<<<< ", "=======\n", ">>>>>>> "] {
            assert!(
                !text.lines().any(|l| format!("{l}\n").starts_with(marker)),
                "{} holds a conflict marker {marker:?}",
                path.display()
            );
        }
    }
}

/// The README's first command is `cargo run -- …`: with the test tool `ptd-test` a second
/// binary of the package, cargo refuses to guess unless `default-run` names the product.
#[test]
fn cargo_run_runs_the_product() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    let bins = manifest.matches("[[bin]]").count();
    assert!(bins >= 1, "the manifest declares its binaries");
    if bins > 1 {
        assert!(
            manifest.contains("\ndefault-run = \"parent-tool-dispatch\"\n"),
            "{bins} binaries and no default-run: `cargo run -- …` in the README would fail"
        );
    }
}

/// The tutorial's "things to try next" do what it says: each change to its adapter, just
/// before the answer is printed, run through the tutorial's own bridge and request.
#[test]
fn the_tutorial_s_things_to_try_end_as_it_says() {
    use serde_json::{json, Value};
    use std::os::unix::fs::PermissionsExt;
    let readme = document("README.md");
    let adapter = document("fixtures/tutorial/clock-adapter");
    let bridge: Value = serde_json::from_str(&document("fixtures/tutorial/bridge.json")).unwrap();
    let request: Value = serde_json::from_str(&document("fixtures/tutorial/request.json")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Each change is made in `clock`, before it returns.
    for (n, (change, said, status, code, exit)) in [
        (
            "print(\"hello\")",
            "`print(\"hello\")` before the answer",
            "failed",
            "result_invalid",
            1,
        ),
        (
            "import os; os._exit(3)",
            "`os._exit(3)`\n(`adapter_exit_nonzero`",
            "failed",
            "adapter_exit_nonzero",
            1,
        ),
        (
            "import time; time.sleep(10)",
            "`time.sleep(10)`\n(`timeout` at 5 s, exit 124",
            "timeout",
            "dispatch_timeout",
            124,
        ),
        (
            "raise pta.Failure(\"no_clock\", \"the clock is unset\")",
            "`raise pta.Failure(\"no_clock\", \"the clock is\nunset\")` (a `failed` envelope with that code, exit 1)",
            "failed",
            "no_clock",
            1,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        assert!(readme.contains(said), "the README no longer says {said:?}");
        let at = "    return {\"utc\"";
        let changed = adapter.replacen(at, &format!("    {change}\n{at}"), 1);
        assert_ne!(changed, adapter);
        let path = dir.path().join(format!("adapter-{n}"));
        std::fs::write(&path, changed).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut bridge = bridge.clone();
        bridge["dispatcher"]["command"]["argv"] = json!([path.display().to_string()]);
        bridge["dispatcher"]["command"]["env"]["PYTHONPATH"] =
            json!(root().join("adapters/python").display().to_string());
        let request = request.clone();
        super::Dispatch::with_bridge(bridge)
            .request(|r| *r = request)
            .run()
            .expect(status, Some(code), exit);
    }
}

/// The README's Install section: `cargo install-static` — cargo's alias (from this
/// repository's `.cargo/config.toml`) for `cargo install` of this package, linked statically and
/// position-independent — then a completion script for each shell it names (each one the binary
/// prints) and the man pages of `man/`.
#[test]
fn the_install_section_installs_what_exists() {
    let section = readme_section("Install");
    let commands: Vec<String> = fenced_blocks(&section, "sh");
    assert!(commands[0].starts_with("cargo install-static "));
    let listed = std::process::Command::new(std::env::var_os("CARGO").unwrap_or("cargo".into()))
        .arg("--list")
        .current_dir(root())
        .output()
        .unwrap();
    assert!(listed.status.success());
    let listed = String::from_utf8(listed.stdout).unwrap();
    let alias = listed
        .lines()
        .find_map(|l| l.trim().strip_prefix("install-static"))
        .unwrap_or_else(|| panic!("cargo knows no install-static alias:\n{listed}"));
    let alias = alias.trim().strip_prefix("alias: ").unwrap();
    assert!(
        alias.starts_with("install --locked --path . --target "),
        "{alias}"
    );
    assert!(alias.contains("target-feature=+crt-static"), "{alias}");
    assert!(!alias.contains("relocation-model"), "PIE is kept: {alias}");
    assert!(
        section.contains("cargo install --locked --path ."),
        "the dynamic way too"
    );
    let mut shells = Vec::new();
    for line in commands.iter().flat_map(|c| c.lines()) {
        if let Some(rest) = line.strip_prefix("parent-tool-dispatch completions ") {
            let shell = rest.split_whitespace().next().unwrap();
            super::Cmd::new(["completions", shell])
                .run()
                .exit(0)
                .stderr_empty()
                .stdout_contains("parent-tool-dispatch");
            shells.push(shell.to_string());
        }
    }
    // The three shells, then bash again: sourced from ~/.bashrc where bash-completion is not.
    assert_eq!(shells, ["bash", "fish", "zsh", "bash"]);
    assert!(commands.iter().any(|c| c.contains("cp man/*.1 ")));
    let pages = std::fs::read_dir(root().join("man"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "1")
        })
        .count();
    assert!(pages >= 1, "man/ holds no page");
}
