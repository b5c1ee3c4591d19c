//! Every section the code cites (`SPEC §N` or `SPEC §N.M`, in `src/`, `tests/`, `benches/` and
//! `fuzz/`) is a numbered heading of `docs/SPEC.md`, the repository's own copy of the
//! specification: a citation never points at a section nobody can read.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const MARK: &str = "SPEC §";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The section numbers cited in `text`: `4.3` for a citation of §4.3, `5` for §5. Only a dot
/// followed by a digit continues a number, so a sentence ending in a citation of §5 cites `5`.
fn citations(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices(MARK) {
        let rest = &text[at + MARK.len()..];
        let major = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if major == 0 {
            continue;
        }
        let mut end = major;
        let after = &rest[major..];
        if let Some(minor) = after.strip_prefix('.') {
            let digits = minor.len() - minor.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits > 0 {
                end += 1 + digits;
            }
        }
        found.push(rest[..end].to_string());
    }
    found
}

/// The section numbers of the Markdown headings in `text`: `## 4. The main job` is `4`,
/// `### 4.3 Deadlines` is `4.3` (a leading `§` is allowed).
fn headings(text: &str) -> BTreeSet<String> {
    let mut numbers = BTreeSet::new();
    for line in text.lines() {
        let Some(title) = line.strip_prefix('#') else {
            continue;
        };
        let title = title.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let title = title.trim_start().trim_start_matches('§');
        let number: String = title
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let rest = &title[number.len()..];
        let number = number.trim_end_matches('.');
        let numbered = !number.is_empty()
            && number.split('.').all(|part| !part.is_empty())
            && (rest.starts_with(' ') || rest.is_empty());
        if numbered {
            numbers.insert(number.to_string());
        }
    }
    numbers
}

/// Every `.rs` file beneath `dir` (none when it does not exist).
fn rust_sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                // fuzz/ has its own target/ and corpora: not code of ours.
                if !matches!(path.file_name().and_then(|n| n.to_str()), Some("target")) {
                    pending.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// (file relative to the repository, section) for each citation no heading of `spec` carries.
fn unresolved(spec: &str, sources: &[(String, String)]) -> Vec<(String, String)> {
    let known = headings(spec);
    let mut missing = Vec::new();
    for (name, text) in sources {
        for cited in citations(text) {
            if !known.contains(&cited) {
                missing.push((name.clone(), cited));
            }
        }
    }
    missing
}

#[test]
fn every_cited_spec_section_is_a_heading_of_docs_spec() {
    let spec = std::fs::read_to_string(repo().join("docs/SPEC.md")).unwrap();
    let mut sources = Vec::new();
    for dir in ["src", "tests", "benches", "fuzz"] {
        for path in rust_sources(&repo().join(dir)) {
            let text = std::fs::read_to_string(&path).unwrap();
            let name = path.strip_prefix(repo()).unwrap().display().to_string();
            sources.push((name, text));
        }
    }
    let cited: BTreeSet<String> = sources.iter().flat_map(|(_, t)| citations(t)).collect();
    // The scan found the code's citations (src/ cites §4.3 and §5, among many).
    assert!(cited.contains("4.3") && cited.contains("5"), "{cited:?}");
    let missing = unresolved(&spec, &sources);
    assert!(
        missing.is_empty(),
        "sections cited by the code but not headings of docs/SPEC.md: {missing:?}"
    );
}

#[test]
fn docs_spec_numbers_sections_1_to_15() {
    let spec = std::fs::read_to_string(repo().join("docs/SPEC.md")).unwrap();
    let numbers = headings(&spec);
    for n in 1..=15 {
        assert!(
            numbers.contains(&n.to_string()),
            "no section {n}: {numbers:?}"
        );
    }
}

#[test]
fn the_check_reports_a_citation_without_a_heading() {
    let spec = "# Title\n\n## 4. The main job\n\n### 4.3 Deadlines\n\n## 15. The rest\n";
    let cite = |n: &str| format!("// {MARK}{n}");
    let sources = vec![
        (
            "a.rs".to_string(),
            format!("{} and {}.", cite("4.3"), cite("4")),
        ),
        (
            "b.rs".to_string(),
            format!("{}: {}", cite("4.7"), cite("1")),
        ),
        // Not a citation: no number after the mark, or only a sentence's full stop.
        ("c.rs".to_string(), format!("{MARK}N, {}.", cite("15"))),
    ];
    assert_eq!(
        unresolved(spec, &sources),
        vec![
            ("b.rs".to_string(), "4.7".to_string()),
            ("b.rs".to_string(), "1".to_string())
        ]
    );
    // `4.` names section 4, never 4.3; `4.3` names only 4.3.
    assert_eq!(
        headings(spec),
        ["4", "4.3", "15"].map(String::from).into_iter().collect()
    );
    assert_eq!(citations(&cite("4.3–4.5")), vec!["4.3"]);
}
