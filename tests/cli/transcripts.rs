//! `--artifact-dir` transcripts and `--result-file` (SPEC §5).

use super::*;
use std::os::unix::fs::PermissionsExt;

fn transcripts_in(dir: &Path) -> Vec<PathBuf> {
    let folder = dir.join("files/parent-tools");
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
        .map(|rd| rd.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

fn sha256_file(path: &Path) -> String {
    sha256_hex(std::fs::read(path).unwrap())
}

#[test]
fn a_transcript_is_written_and_its_ref_returned() {
    let dir = tempfile::tempdir().unwrap();
    let run = Dispatch::adapter(&["echo"])
        .args(&["--artifact-dir", dir.path().to_str().unwrap()])
        .run();
    run.expect("succeeded", None, 0);
    let refs = run.envelope["artifacts"]["transcripts"].as_array().unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0]["kind"], "tool-call-transcript");
    assert_eq!(refs[0]["path"], "files/parent-tools/ptr_123.json");
    let file = dir.path().join("files/parent-tools/ptr_123.json");
    assert_eq!(refs[0]["sha256"], sha256_file(&file));
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let doc: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(doc["schema"], "wp-codebox/tool-call-transcript/v1");
    let call = &doc["tool_calls"][0];
    assert_eq!(call["call_id"], "ptr_123");
    assert_eq!(call["tool_name"], "workspace.read");
    assert_eq!(call["tool_type"], "parent-tool");
    assert_eq!(call["phase"], "execution");
    assert_eq!(call["status"], "succeeded");
    assert_eq!(call["redaction"]["policy"], "applied");
    assert_eq!(call["input_digest"]["algorithm"], "sha256");
    assert_eq!(call["metadata"]["operation"], "call");
    assert_eq!(call["metadata"]["parent_tool_status"], "succeeded");
    assert_eq!(call["metadata"]["request"]["request_id"], "ptr_123");
    assert_eq!(call["metadata"]["result"]["status"], "succeeded");
    assert_eq!(call["metadata"]["dispatch"]["exit_code"], 0);
}

#[test]
fn denials_and_invalid_requests_get_transcripts_too() {
    let dir = tempfile::tempdir().unwrap();
    let arg = dir.path().to_str().unwrap();
    let run = Dispatch::adapter(&["echo"])
        .request(|r| r["authorization"]["allowed_tools"] = json!([]))
        .args(&["--artifact-dir", arg])
        .run();
    run.expect("denied", Some("tool_not_allowed"), 77);
    assert_eq!(
        run.envelope["artifacts"]["transcripts"][0]["path"],
        "files/parent-tools/ptr_123.json"
    );

    let garbage = b"not json at all".to_vec();
    let run = Dispatch::adapter(&["echo"])
        .stdin(garbage.clone())
        .args(&["--artifact-dir", arg])
        .run();
    run.expect("failed", Some("request_invalid"), 65);
    let hex = sha256_hex(&garbage);
    let want = format!("files/parent-tools/invalid-{}.json", &hex[..16]);
    assert_eq!(
        run.envelope["artifacts"]["transcripts"][0]["path"],
        json!(want)
    );
    assert_eq!(transcripts_in(dir.path()).len(), 2);
}

#[test]
fn existing_transcripts_are_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let arg = dir.path().to_str().unwrap();
    for _ in 0..3 {
        Dispatch::adapter(&["echo"])
            .args(&["--artifact-dir", arg])
            .run()
            .expect("succeeded", None, 0);
    }
    let names: Vec<String> = transcripts_in(dir.path())
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["ptr_123-2.json", "ptr_123-3.json", "ptr_123.json"]);
}

#[test]
fn traversal_request_ids_stay_inside_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let arg = dir.path().to_str().unwrap();
    for id in ["../../escape", "..", ".", "a/b\\c", "é"] {
        let run = Dispatch::adapter(&["echo"])
            .request(|r| r["request_id"] = json!(id))
            .args(&["--artifact-dir", arg])
            .run();
        run.expect("succeeded", None, 0);
        let path = run.envelope["artifacts"]["transcripts"][0]["path"]
            .as_str()
            .unwrap()
            .to_string();
        let name = path.strip_prefix("files/parent-tools/").unwrap();
        assert!(
            !name.contains('/') && !name.starts_with('.'),
            "{id:?} -> {name}"
        );
        assert!(dir.path().join(&path).is_file());
    }
    assert_eq!(transcripts_in(dir.path()).len(), 5);
    let top: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(top.len(), 1, "nothing written beside files/");
}

#[test]
fn symlinked_artifact_folders_fail_closed_before_the_adapter_runs() {
    for link in ["files", "files/parent-tools"] {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        if link == "files/parent-tools" {
            std::fs::create_dir(dir.path().join("files")).unwrap();
        }
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join(link)).unwrap();
        let marker = elsewhere.path().join("started");
        let run = Dispatch::adapter(&[&format!("pidfile:{}", marker.display()), "echo"])
            .args(&["--artifact-dir", dir.path().to_str().unwrap()])
            .run();
        run.expect("unavailable", Some("artifact_dir_unavailable"), 69);
        assert!(!marker.exists(), "adapter must not start");
        assert!(
            !run.stdout.contains(dir.path().to_str().unwrap()),
            "no host path"
        );
    }
}

#[test]
fn an_artifact_dir_that_is_a_file_fails_closed() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let run = Dispatch::adapter(&["echo"])
        .args(&["--artifact-dir", file.path().to_str().unwrap()])
        .run();
    run.expect("unavailable", Some("artifact_dir_unavailable"), 69);
}

#[test]
fn concurrent_dispatches_into_one_folder_lose_and_tear_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let arg = dir.path().to_str().unwrap().to_string();
    let handles: Vec<_> = (0..12)
        .map(|_| {
            let arg = arg.clone();
            std::thread::spawn(move || {
                Dispatch::adapter(&["echo"])
                    .args(&["--artifact-dir", &arg])
                    .run()
            })
        })
        .collect();
    let mut paths = std::collections::BTreeSet::new();
    for h in handles {
        let run = h.join().unwrap();
        run.expect("succeeded", None, 0);
        let r = &run.envelope["artifacts"]["transcripts"][0];
        let path = dir.path().join(r["path"].as_str().unwrap());
        assert_eq!(r["sha256"], sha256_file(&path));
        paths.insert(path);
    }
    assert_eq!(paths.len(), 12);
    let files = transcripts_in(dir.path());
    assert_eq!(files.len(), 12, "no temp files left: {files:?}");
    for f in files {
        let doc: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        assert_eq!(doc["tool_calls"][0]["status"], "succeeded");
    }
}

#[test]
fn result_file_holds_the_same_envelope() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("result.json");
    std::fs::write(&path, "old").unwrap();
    let run = Dispatch::adapter(&["echo"])
        .args(&["--result-file", path.to_str().unwrap()])
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), run.stdout);
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temp file left"
    );
}

#[test]
fn result_file_refuses_a_symlink_but_still_prints() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target");
    std::fs::write(&target, "keep").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let run = Dispatch::adapter(&["echo"])
        .args(&["--result-file", link.to_str().unwrap()])
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    assert!(run.dispatch()["result_file_error"].is_string());
    assert!(run.stderr.contains("result_file"), "{}", run.stderr);
}
