//! Committed generated files (the man pages) match a fresh rendering, and render cleanly.
//! Re-bless with `UPDATE_GENERATED=1 cargo test --locked --test cli generated`.

use super::man_pages;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn man_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("man")
}

#[test]
fn man_pages_are_current() {
    let dir = man_dir();
    let pages = man_pages::pages();
    if std::env::var_os("UPDATE_GENERATED").is_some() {
        // Only what changed, each file atomically: the other tests read man/ concurrently.
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !pages.iter().any(|(n, _)| *n == name) {
                std::fs::remove_file(path).unwrap();
            }
        }
        for (name, bytes) in &pages {
            let path = dir.join(name);
            if std::fs::read(&path).ok().as_ref() != Some(bytes) {
                let tmp = dir.join(format!(".{name}.tmp"));
                std::fs::write(&tmp, bytes).unwrap();
                std::fs::rename(&tmp, &path).unwrap();
            }
        }
    }
    let mut committed: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    committed.sort();
    let mut expected: Vec<String> = pages.iter().map(|(n, _)| n.clone()).collect();
    expected.sort();
    assert_eq!(
        committed, expected,
        "man/ holds other pages; run with UPDATE_GENERATED=1"
    );
    for (name, bytes) in pages {
        let on_disk = std::fs::read(dir.join(&name)).unwrap();
        assert!(
            on_disk == bytes,
            "man/{name} is stale; run with UPDATE_GENERATED=1"
        );
    }
}

#[test]
fn main_page_documents_exit_statuses_and_every_error_code() {
    let page = std::fs::read_to_string(man_dir().join("parent-tool-dispatch.1")).unwrap();
    assert!(page.contains(".SH \"EXIT STATUS\""));
    for row in ptd_wire::error::EXIT_STATUSES {
        let item = format!(".TP\n\\fB{}\\fR\n", row.code);
        assert!(page.contains(&item), "exit {} is not an item", row.code);
    }
    for code in ptd_wire::error::ErrorCode::ALL {
        let item = format!(".TP\n\\fB{}\\fR\n", code.as_str().replace('-', "\\-"));
        assert!(page.contains(&item), "{code} is not an item");
    }
    assert!(page.contains(".SH EXAMPLES\n") && !page.contains("EXTRA"));
}

#[test]
fn every_option_on_every_page_says_what_it_does() {
    // An option item is `.TP`, the option's line (`\fB-...`), then its text: an empty line or
    // the next item in its place is an option listed without a word (what clap_mangen does
    // with an option hidden from `-h` and described in one paragraph).
    let mut options = 0;
    for (name, bytes) in man_pages::pages() {
        let page = String::from_utf8(bytes).unwrap();
        let lines: Vec<&str> = page.lines().collect();
        for at in 0..lines.len().saturating_sub(2) {
            if lines[at] == ".TP" && lines[at + 1].starts_with("\\fB\\-") {
                options += 1;
                let text = lines[at + 2];
                assert!(
                    !text.is_empty() && !text.starts_with('.'),
                    "{name}: {} has no description",
                    lines[at + 1]
                );
            }
        }
    }
    assert!(
        options > 100,
        "only {options} options found: the pattern is off"
    );
}

/// Run groff over one page the way `man` does, but with every warning on.
fn groff_warnings(page: &Path) -> String {
    let out = match Command::new("groff")
        .args(["-ww", "-z", "-man", "-Tutf8"])
        .arg(page)
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) => out,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => panic!(
            "groff is not installed, so the man pages cannot be checked: install it \
             (`apt-get install -y groff-base`, the step .ci/run runs when groff is missing)"
        ),
        Err(err) => panic!("running groff: {err}"),
    };
    assert!(out.status.success(), "groff failed on {}", page.display());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn every_man_page_renders_without_a_groff_warning() {
    let mut seen = 0;
    for entry in std::fs::read_dir(man_dir()).unwrap() {
        let page = entry.unwrap().path();
        let bytes = std::fs::read(&page).unwrap();
        assert!(bytes.is_ascii(), "{} is not ASCII", page.display());
        let warnings = groff_warnings(&page);
        assert!(warnings.is_empty(), "{}:\n{warnings}", page.display());
        seen += 1;
    }
    assert!(seen >= 6, "only {seen} pages");
}

#[test]
fn man_pages_name_real_commands_and_real_pages() {
    let dir = man_dir();
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let page =
        std::fs::read_to_string(dir.join("parent-tool-dispatch-adapter-workspace.1")).unwrap();
    let synopsis = page.split(".SH SYNOPSIS\n").nth(1).unwrap();
    assert!(
        synopsis.starts_with("\\fBparent\\-tool\\-dispatch adapter workspace\\fR"),
        "{synopsis}"
    );
    assert!(
        page.contains(".TH PARENT-TOOL-DISPATCH-ADAPTER-WORKSPACE 1 \"\" \"parent-tool-dispatch ")
    );
    assert!(page.contains(".nh\n"));
    // Every page another page refers to exists.
    for name in &names {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        for (i, _) in text.match_indices("\\fR(1)") {
            let start = text[..i].rfind("\\fB").unwrap() + 3;
            let target = text[start..i].replace("\\-", "-");
            assert!(
                names.contains(&format!("{target}.1")),
                "{name} refers to {target}(1), which does not exist"
            );
        }
        assert!(!text.contains("help(1)"), "{name} mentions a help page");
    }
}
