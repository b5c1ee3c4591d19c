//! The fuzz targets on stable: every input committed under `fuzz/regressions/<target>/`
//! (minimized findings, each fixed at its root) and `fuzz/seeds/<target>/` (the corpus the
//! fuzzers start from) runs through the very function the libFuzzer binary calls
//! (`ptd_testkit::fuzzing`). A finding that comes back fails here, without nightly.

use ptd_testkit::fuzzing::{self, PathFixture, TARGETS};
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The files of `fuzz/<kind>/<target>/`, sorted.
fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = fuzz_dir().join(kind).join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

/// Run `target` on every file of `fuzz/<kind>/<target>/`: how many ran, and the ones that
/// panicked.
fn replay(kind: &str, target: &str, run: fn(&[u8]), tree: &PathFixture) -> (usize, Vec<String>) {
    let files = inputs(kind, target);
    let mut failed = Vec::new();
    for file in &files {
        let data = std::fs::read(file).unwrap();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if target == "workspace_path" {
                // A tree this test removes, instead of the fuzzer's per-thread one.
                fuzzing::workspace_path_in(tree, &data);
            } else {
                run(&data);
            }
        }));
        if outcome.is_err() {
            failed.push(file.display().to_string());
        }
    }
    (files.len(), failed)
}

#[test]
fn every_committed_fuzz_input_passes_its_target() {
    let tree = PathFixture::new().unwrap();
    let mut failed = Vec::new();
    let mut ran = 0;
    for (target, run) in TARGETS {
        assert!(
            !inputs("seeds", target).is_empty(),
            "fuzz/seeds/{target} has no input"
        );
        for kind in ["regressions", "seeds"] {
            let (count, bad) = replay(kind, target, run, &tree);
            ran += count;
            failed.extend(bad);
        }
    }
    assert!(
        failed.is_empty(),
        "inputs that fail their target: {failed:#?}"
    );
    assert!(ran >= TARGETS.len(), "only {ran} inputs ran");
}

#[test]
fn every_target_has_a_fuzz_binary_and_every_folder_a_target() {
    let names: Vec<&str> = TARGETS.iter().map(|(name, _)| *name).collect();
    for name in &names {
        let source = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&source)
            .unwrap_or_else(|e| panic!("{}: {e}", source.display()));
        assert!(
            text.contains(&format!("ptd_testkit::fuzzing::{name}(data)")),
            "{} does not call fuzzing::{name}",
            source.display()
        );
    }
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("\n[workspace]\n"),
        "the fuzz crate is its own workspace"
    );
    for kind in ["regressions", "seeds"] {
        let Ok(entries) = std::fs::read_dir(fuzz_dir().join(kind)) else {
            continue;
        };
        for entry in entries {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            assert!(
                names.contains(&name.as_str()),
                "fuzz/{kind}/{name} belongs to no target"
            );
        }
    }
}

/// The in-process pipeline the `result` target and the properties drive concludes like the
/// binary: a valid answer after exit 0 succeeds, the same answer after exit 3 does not.
#[test]
fn the_in_process_pipeline_judges_like_the_main_job() {
    let ok = std::fs::read(fuzz_dir().join("seeds/result/succeeded")).unwrap();
    let concluded = fuzzing::dispatch_recorded(fuzzing::REQUEST.as_bytes(), &ok[1..], 0);
    assert_eq!(concluded.exit, 0, "{}", concluded.envelope);
    assert!(concluded.stderr.is_empty(), "{:?}", concluded.stderr);
    let failed = fuzzing::dispatch_recorded(fuzzing::REQUEST.as_bytes(), &ok[1..], 3);
    assert_eq!(failed.exit, 1, "{}", failed.envelope);
    assert!(failed.envelope.contains("\"adapter_exit_nonzero\""));
    assert_eq!(failed.stderr.len(), 1, "{:?}", failed.stderr);
}
