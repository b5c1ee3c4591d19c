//! The README's command examples are run: each ```console block in the README is one of the
//! cases in `tests/cmd/*.md`, which trycmd runs against the built binary from the repository
//! root (stdout and stderr together, stderr first; `? N` is the exit status; `[..]` matches
//! anything on one line). Re-bless: `TRYCMD=overwrite cargo test --test cli readme` updates
//! the cases, then `UPDATE_GENERATED=1 cargo test --test cli readme` copies them into the
//! README.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn readme_examples_run_as_shown() {
    // The fixture bridge names target/debug/parent-tool-dispatch relative to the repository
    // root, as the README's first command does.
    trycmd::TestCases::new()
        .register_bin("parent-tool-dispatch", super::bin())
        .case("tests/cmd/*.md");
}

/// The ```console blocks of a Markdown text, each from its opening fence to its closing one.
fn console_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match &mut current {
            None if line == "```console" => current = Some(String::new()),
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
    let readme_path = root().join("README.md");
    let mut readme = std::fs::read_to_string(&readme_path).unwrap();
    let tested: Vec<String> = cases()
        .iter()
        .flat_map(|(_, text)| console_blocks(text))
        .collect();
    if std::env::var_os("UPDATE_GENERATED").is_some() {
        // Replace each README block by the tested block that starts with the same command.
        for shown in console_blocks(&readme) {
            let first = shown.lines().next().unwrap_or_default();
            if let Some(fresh) = tested.iter().find(|t| t.lines().next() == Some(first)) {
                readme = readme.replacen(&shown, fresh, 1);
            }
        }
        // Atomically: the other README tests read it concurrently.
        let tmp = readme_path.with_extension("md.tmp");
        std::fs::write(&tmp, &readme).unwrap();
        std::fs::rename(&tmp, &readme_path).unwrap();
    }
    let shown = console_blocks(&readme);
    for block in &shown {
        assert!(
            tested.contains(block),
            "README shows an example that tests/cmd does not run:\n{block}"
        );
    }
    for block in &tested {
        assert!(
            shown.contains(block),
            "tests/cmd runs an example the README does not show:\n{block}"
        );
    }
    assert!(shown.len() >= 5, "only {} examples", shown.len());
}

#[test]
fn readme_shows_the_example_files_verbatim() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    for file in [
        "fixtures/examples/own-adapter.bridge.json",
        "fixtures/examples/adapter-answer.json",
        "fixtures/examples/adapter-failure.json",
    ] {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        assert!(
            readme.contains(&format!("```json\n{text}```\n")),
            "README does not show {file} as it is"
        );
    }
}

#[test]
fn readme_cites_nothing_outside_the_repository() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
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
    for doc in ["README.md", "ARCHITECTURE.md"] {
        let text =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(doc)).unwrap();
        for marker in ["<<<<<<< ", "=======\n", ">>>>>>> "] {
            assert!(
                !text.lines().any(|l| format!("{l}\n").starts_with(marker)),
                "{doc} holds a conflict marker {marker:?}"
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
