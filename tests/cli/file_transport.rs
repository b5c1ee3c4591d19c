//! The file transport (SPEC §4.2): a private folder, a result file that is judged before it is
//! read, and a cleanup that is bounded and comes after the envelope.
//!
//! Every run here gets its own `TMPDIR`, so "the private folder is gone" is "TMPDIR is empty".
//! The runner has a watchdog: a dispatcher that hangs fails the test instead of hanging it.

use super::*;

/// Far beyond anything a working dispatcher needs here; only a hang gets near it.
const WATCHDOG: Duration = Duration::from_secs(30);
/// Slack for a loaded 2-core machine on top of a bound.
const MARGIN: Duration = Duration::from_secs(5);
/// The bridge timeout used below.
const TIMEOUT_MS: u64 = 20_000;

/// A dispatch through the file transport, in a TMPDIR of its own.
struct FileRun {
    tmpdir: tempfile::TempDir,
    steps: Vec<String>,
    umask: Option<u32>,
}

/// What it produced, and when.
#[derive(Debug)]
struct Seen {
    envelope: Value,
    output: Output,
}

impl FileRun {
    fn new(steps: &[&str]) -> FileRun {
        FileRun {
            tmpdir: tempfile::tempdir().unwrap(),
            steps: steps.iter().map(|s| s.to_string()).collect(),
            umask: None,
        }
    }

    fn umask(mut self, mask: u32) -> FileRun {
        self.umask = Some(mask);
        self
    }

    /// What the dispatcher's TMPDIR holds after the run.
    fn leftovers(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.tmpdir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect()
    }

    fn run(&self) -> Seen {
        let steps: Vec<&str> = self.steps.iter().map(String::as_str).collect();
        let mut bridge = bridge(&steps);
        bridge["dispatcher"]["command"]["transport"] = json!("file");
        bridge["dispatcher"]["timeout_ms"] = json!(TIMEOUT_MS);
        let mut cmd = Cmd::new(["--parent-tool-bridge", &bridge.to_string()])
            .env("TMPDIR", self.tmpdir.path())
            .stdin(request().to_string())
            .watchdog(WATCHDOG);
        if let Some(mask) = self.umask {
            cmd = cmd.umask(mask);
        }
        let output = cmd.run();
        Seen {
            envelope: output.json(),
            output,
        }
    }
}

impl Seen {
    /// Status, code and exit together; stderr is stated by [`Seen::assert_stderr_has`], or
    /// else must be empty.
    fn expect(&self, status: &str, code: Option<&str>, exit: i32) -> &Seen {
        let context = format!("envelope: {:#}\n{:?}", self.envelope, self.output);
        assert_eq!(self.envelope["status"], status, "{context}");
        if let Some(code) = code {
            assert_eq!(self.envelope["error"]["code"], code, "{context}");
        }
        self.output.exit(exit);
        self
    }

    fn assert_stderr_has(&self, text: &str) -> &Seen {
        self.output.stderr_contains(text);
        self
    }

    /// From spawn to the envelope's newline on stdout.
    fn envelope_after(&self) -> Duration {
        self.output.first_line_after().expect("an envelope line")
    }

    /// Returned well within the bridge timeout: nothing waited on the adapter's leftovers.
    fn assert_prompt(&self) -> &Seen {
        let bound = Duration::from_millis(TIMEOUT_MS) + MARGIN;
        assert!(
            self.output.elapsed() < bound,
            "took {:?}",
            self.output.elapsed()
        );
        self
    }
}

#[test]
fn a_fifo_as_the_result_file_is_result_invalid_not_a_hang() {
    let run = FileRun::new(&["result-as:fifo"]);
    let seen = run.run();
    seen.expect("failed", Some("result_invalid"), 1)
        .assert_stderr_has("error[result_invalid]: the result file is a FIFO, not a regular file")
        .assert_prompt();
    assert_eq!(
        seen.envelope["error"]["message"],
        "the result file is a FIFO, not a regular file"
    );
    assert!(seen.envelope.get("output").is_none());
    assert!(run.leftovers().is_empty(), "{:?}", run.leftovers());
}

#[test]
fn a_symlink_as_the_result_file_is_refused_not_followed() {
    // The link points at a valid answer: following it would make this run succeed.
    let elsewhere = tempfile::tempdir().unwrap();
    let answer = elsewhere.path().join("answer.json");
    let envelope = json!({
        "schema": "wp-codebox/parent-tool-result/v1", "version": 1,
        "request_id": "ptr_123", "tool": "workspace.read", "operation": "call",
        "status": "succeeded", "output": "from the link"
    });
    std::fs::write(&answer, envelope.to_string()).unwrap();
    for target in [answer.to_str().unwrap(), "/dev/zero"] {
        let step = format!("result-as:symlink:{target}");
        let run = FileRun::new(&[&step]);
        run.run()
            .expect("failed", Some("result_invalid"), 1)
            .assert_stderr_has("the result file is a symbolic link, not a regular file")
            .assert_prompt();
        assert!(run.leftovers().is_empty(), "{:?}", run.leftovers());
    }
    assert!(
        answer.exists(),
        "the link's target is not the dispatcher's to remove"
    );
}

#[test]
fn a_directory_or_a_socket_as_the_result_file_is_refused() {
    for (kind, words) in [("dir", "a directory"), ("socket", "a socket")] {
        let run = FileRun::new(&[&format!("result-as:{kind}")]);
        run.run()
            .expect("failed", Some("result_invalid"), 1)
            .assert_stderr_has(&format!("the result file is {words}, not a regular file"))
            .assert_prompt();
        assert!(run.leftovers().is_empty(), "{kind}: {:?}", run.leftovers());
    }
}

#[test]
fn the_folder_is_0700_and_the_request_file_0600_under_any_umask() {
    // 000 would leave a plain mkdir 0777; 0277 would leave it 0500 (unusable) without a chmod.
    for mask in [0o000, 0o277] {
        let run = FileRun::new(&["file-echo"]).umask(mask);
        let seen = run.run();
        seen.expect("succeeded", None, 0);
        let output = &seen.envelope["output"];
        assert_eq!(output["folder_mode"], "700", "umask {mask:o}");
        assert_eq!(output["request_file_mode"], "600", "umask {mask:o}");
        assert!(run.leftovers().is_empty(), "{:?}", run.leftovers());
    }
}

#[test]
fn what_the_adapter_leaves_is_removed_without_following_links() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("keep"), "keep").unwrap();
    let tree = format!("litter-tree:{}", outside.path().display());
    let run = FileRun::new(&[&tree, "litter:2000", "file-echo"]);
    let seen = run.run();
    seen.expect("succeeded", None, 0).assert_prompt();
    seen.output.stderr_lacks("warning");
    assert!(run.leftovers().is_empty(), "{:?}", run.leftovers());
    let kept: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(kept, ["keep"]);
}

#[test]
fn a_flood_of_leftovers_is_cleaned_within_the_budget_and_the_rest_reported() {
    // Twice the entry budget: the cleanup stops, says so, and leaves the rest.
    let run = FileRun::new(&["litter:20000", "file-echo"]);
    let seen = run.run();
    seen.expect("succeeded", None, 0);
    let bound = Duration::from_millis(TIMEOUT_MS) + MARGIN;
    assert!(
        seen.envelope_after() < bound,
        "envelope after {:?}",
        seen.envelope_after()
    );
    // The cleanup's own budget is 2 s, on top of the envelope.
    assert!(
        seen.output.elapsed() < bound + Duration::from_secs(2),
        "exit after {:?}",
        seen.output.elapsed()
    );
    let left = run.leftovers();
    assert_eq!(left.len(), 1, "{left:?}");
    let folder = left[0].display().to_string();
    assert!(folder.contains("parent-tool-dispatch-"), "{folder}");
    seen.assert_stderr_has(&format!(
        "warning[file_transport]: the private folder {folder} was not fully removed"
    ))
    .assert_stderr_has("budget of 10000 entries ran out");
    let remaining = std::fs::read_dir(&left[0]).unwrap().count();
    assert!(
        (10_000..20_002).contains(&remaining),
        "{remaining} entries left"
    );
}
