//! Committed generated files (the man pages) match a fresh rendering.
//! Re-bless with `UPDATE_GENERATED=1 cargo test --test cli generated`.

use std::path::Path;

#[test]
fn man_pages_are_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
    let pages = parent_tool_dispatch::man::pages();
    if std::env::var_os("UPDATE_GENERATED").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        for (name, bytes) in &pages {
            std::fs::write(dir.join(name), bytes).unwrap();
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
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("man/parent-tool-dispatch.1"),
    )
    .unwrap();
    assert!(page.contains(".SH \"EXIT STATUS\""));
    for code in parent_tool_dispatch::error::ErrorCode::ALL {
        assert!(page.contains(code.as_str()), "{code}");
    }
}
