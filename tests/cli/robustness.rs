//! Robustness through the binary: panic safety at every stage after the adapter started (the
//! debug-only `PARENT_TOOL_DISPATCH_TEST_PANIC` hook), the sensitive keys SPEC §5 added, and
//! the load check (ignored by default; see docs/robustness.md).

use super::*;
use serde_json::json;

const PANIC_ENV: &str = "PARENT_TOOL_DISPATCH_TEST_PANIC";

/// One `error[internal_error]` line naming the panic, and nothing else on stderr.
fn assert_one_panic_line(run: &Run, point: &str) {
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "stderr: {}", run.stderr);
    assert!(
        lines[0].starts_with("error[internal_error]: the dispatcher hit an internal error: thread"),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains(&format!("a panic provoked at {point}")),
        "{}",
        lines[0]
    );
    assert!(lines[0].ends_with("; please report it"), "{}", lines[0]);
}

/// The envelope is the dispatcher's `internal_error` and echoes the default request's ids.
fn assert_internal_error_with_ids(run: &Run) {
    run.expect("failed", Some("internal_error"), 70);
    assert_eq!(run.envelope["request_id"], "ptr_123");
    assert_eq!(run.envelope["tool"], "workspace.read");
    assert_eq!(run.envelope["operation"], "call");
    assert_eq!(run.envelope["error"]["retryable"], false);
    assert_eq!(
        run.envelope["error"]["message"],
        "the dispatcher hit an internal error (a panic in the main job); please report it"
    );
    assert!(run.envelope.get("output").is_none(), "{}", run.envelope);
}

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "the panic hook exists in debug builds only"
)]
fn a_panic_while_the_adapter_runs_kills_its_group_and_still_prints_one_envelope() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    let p = pidfile.display().to_string();
    // The adapter and a child of it record their pids and sleep; the dispatcher panics
    // 3 s after the spawn, long after both wrote their pid.
    let run = Dispatch::adapter(&[
        &format!("pidfile:{p}"),
        &format!("spawn:pidfile:{p}+sleep:60000"),
        "sleep:60000",
    ])
    .env(PANIC_ENV, "adapter_started:3000")
    .run();
    assert_internal_error_with_ids(&run);
    assert_one_panic_line(&run, "AdapterStarted");
    assert!(
        run.stderr.contains("crates/sys/src/exec/mod.rs"),
        "{}",
        run.stderr
    );
    assert_eq!(pids(&pidfile).len(), 2, "both recorded their pid");
    assert_all_gone(&pidfile);
    // Killed, not waited for: far less than the adapters' 60 s.
    assert!(run.elapsed < Duration::from_secs(30), "{:?}", run.elapsed);
}

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "the panic hook exists in debug builds only"
)]
fn a_panic_while_judging_still_writes_the_transcript_and_one_envelope() {
    let dir = tempfile::tempdir().unwrap();
    let artifacts = dir.path().join("out");
    let run = Dispatch::adapter(&["echo"])
        .env(PANIC_ENV, "judging")
        .args(&["--artifact-dir", artifacts.to_str().unwrap()])
        .run();
    assert_internal_error_with_ids(&run);
    assert_one_panic_line(&run, "Judging");
    let refs = run.envelope["artifacts"]["transcripts"].as_array().unwrap();
    assert_eq!(refs.len(), 1, "{}", run.envelope);
    let file = artifacts.join(refs[0]["path"].as_str().unwrap());
    let transcript: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    assert_eq!(transcript["tool_calls"][0]["status"], "failed");
    assert_eq!(
        transcript["tool_calls"][0]["metadata"]["result"]["error"]["code"],
        "internal_error"
    );
}

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "the panic hook exists in debug builds only"
)]
fn a_panic_while_judging_a_file_transport_answer_still_removes_the_private_folder() {
    let tmpdir = tempfile::tempdir().unwrap();
    let run = Dispatch::adapter(&["file-echo"])
        .bridge(|b| b["dispatcher"]["command"]["transport"] = json!("file"))
        .env("TMPDIR", tmpdir.path().to_str().unwrap())
        .env(PANIC_ENV, "judging")
        .run();
    assert_internal_error_with_ids(&run);
    assert_one_panic_line(&run, "Judging");
    assert_eq!(run.dispatch()["transport"], "file", "{}", run.envelope);
    let left: Vec<_> = std::fs::read_dir(tmpdir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "the panic hook exists in debug builds only"
)]
fn a_panic_while_concluding_still_prints_one_envelope_with_the_ids() {
    let run = Dispatch::adapter(&["echo"])
        .env(PANIC_ENV, "concluding")
        .run();
    assert_internal_error_with_ids(&run);
    assert_one_panic_line(&run, "Concluding");
}

#[test]
fn the_panic_hook_ignores_names_it_does_not_know() {
    Dispatch::adapter(&["echo"])
        .env(PANIC_ENV, "everywhere")
        .run()
        .expect("succeeded", None, 0);
}

#[test]
fn every_sensitive_key_spec_5_names_is_redacted_in_envelopes_and_transcripts() {
    const KEYS: [&str; 7] = [
        "passphrase",
        "private_key",
        "privatekey",
        "x-api-key",
        "secret_key",
        "signing_key",
        "session_token",
    ];
    let value = |key: &str| format!("value-under-{key}-0123");
    let keyed: serde_json::Map<String, Value> = KEYS
        .iter()
        .map(|k| (k.to_string(), json!(value(k))))
        .collect();
    let answer = json!({
        "schema": "wp-codebox/parent-tool-result/v1", "version": 1,
        "request_id": "ptr_123", "tool": "workspace.read", "operation": "call",
        "status": "succeeded", "output": {"keyed": keyed},
        "diagnostics": {"keyed": keyed}, "metadata": {"keyed": keyed}
    });
    let dir = tempfile::tempdir().unwrap();
    let artifacts = dir.path().join("out");
    let run = Dispatch::adapter(&["read-stdin", &format!("print:{answer}")])
        .request(|r| {
            r["input"] = json!({ "keyed": keyed });
            r["metadata"] = json!({ "keyed": keyed });
        })
        .args(&["--artifact-dir", artifacts.to_str().unwrap()])
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(run.stderr, "");
    let path = run.envelope["artifacts"]["transcripts"][0]["path"]
        .as_str()
        .unwrap()
        .to_string();
    let transcript: Value =
        serde_json::from_slice(&std::fs::read(artifacts.join(path)).unwrap()).unwrap();
    let call = &transcript["tool_calls"][0]["metadata"];
    for key in KEYS {
        // The envelope: the key rules on everything but `output`, which is product payload
        // passed through apart from exact secrets (SPEC §5).
        for part in ["diagnostics", "metadata"] {
            assert_eq!(
                run.envelope[part]["keyed"][key], "[redacted]",
                "{part}.{key}"
            );
        }
        assert_eq!(run.envelope["output"]["keyed"][key], value(key).as_str());
        // The transcript: the key rules everywhere, `output` and the request included.
        for at in [
            &call["request"]["input"],
            &call["request"]["metadata"],
            &call["result"]["output"],
            &call["result"]["diagnostics"],
            &call["result"]["metadata"],
        ] {
            assert_eq!(at["keyed"][key], "[redacted]", "{key} in {at}");
        }
    }
    let text = serde_json::to_string(&transcript).unwrap();
    for key in KEYS {
        assert!(!text.contains(&value(key)), "{key} in the transcript");
    }
}

/// The load check (SPEC §5: concurrent dispatches into one directory lose nothing and tear
/// nothing). Ignored by default; run it in release, where the figures mean something:
/// `cargo test --release --locked --test cli load_ -- --ignored --nocapture`.
#[test]
#[ignore = "a load run: about 200 processes at once; run it on purpose (docs/robustness.md)"]
fn load_200_concurrent_dispatches_into_one_artifact_dir_lose_nothing() {
    const RUNS: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let artifacts = dir.path().join("out");
    let pidfile = dir.path().join("pids");
    let p = pidfile.display().to_string();
    // Each adapter records its pid, leaves a sleeping child behind (the sweep's job), and
    // answers with the request it received.
    let steps = [
        format!("pidfile:{p}"),
        format!("spawn:pidfile:{p}+sleep:60000"),
        "echo".to_string(),
    ];
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let id_of = |i: usize| {
        if i.is_multiple_of(2) {
            "load-same".to_string()
        } else {
            format!("load-{i}")
        }
    };
    let start = Instant::now();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(RUNS));
    let runs: Vec<(usize, Run)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..RUNS)
            .map(|i| {
                let dispatch = Dispatch::adapter(&steps)
                    .request(|r| {
                        r["request_id"] = json!(id_of(i));
                        r["input"] = json!({ "run": i });
                    })
                    .args(&["--artifact-dir", artifacts.to_str().unwrap()]);
                let barrier = std::sync::Arc::clone(&barrier);
                scope.spawn(move || {
                    barrier.wait();
                    (i, dispatch.run())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let wall = start.elapsed();

    let mut paths = std::collections::BTreeSet::new();
    for (i, run) in &runs {
        run.expect("succeeded", None, 0);
        assert_eq!(run.stderr, "", "run {i}");
        assert_eq!(run.envelope["request_id"], id_of(*i).as_str(), "run {i}");
        // Its own answer: the adapter saw this run's request.
        let seen: Value =
            serde_json::from_str(run.envelope["output"]["stdin"].as_str().unwrap()).unwrap();
        assert_eq!(seen["input"]["run"], *i, "run {i} got another run's answer");
        // Its own transcript, whole, matching its ref.
        let refs = run.envelope["artifacts"]["transcripts"].as_array().unwrap();
        assert_eq!(refs.len(), 1, "run {i}");
        let path = refs[0]["path"].as_str().unwrap().to_string();
        let bytes = std::fs::read(artifacts.join(&path)).unwrap();
        assert_eq!(
            refs[0]["sha256"],
            ptd_wire::envelope::canonical::sha256_hex(&bytes).as_str(),
            "run {i}: {path}"
        );
        let transcript: Value = serde_json::from_slice(&bytes).unwrap();
        let call = &transcript["tool_calls"][0];
        assert_eq!(call["call_id"], id_of(*i).as_str(), "{path}");
        assert_eq!(call["metadata"]["request"]["input"]["run"], *i, "{path}");
        assert!(paths.insert(path.clone()), "two runs share {path}");
    }
    let on_disk = std::fs::read_dir(artifacts.join("files/parent-tools"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect::<Vec<_>>();
    assert_eq!(
        on_disk.len(),
        RUNS,
        "one file per run, no temp file left: {on_disk:?}"
    );
    // Every adapter wrote its pid before it spawned; a child may be swept before it wrote
    // its own (the adapter answers without waiting for it), so count those, and find every
    // process of the run by its command line, which names this test's folder.
    let recorded = pids(&pidfile);
    assert!(recorded.len() >= RUNS, "{} pids recorded", recorded.len());
    assert_all_gone(&pidfile);
    let left = processes_naming(&p);
    assert!(left.is_empty(), "processes left running: {left:?}");
    eprintln!(
        "load: {RUNS} dispatches in {:.2} s wall ({:.1} ms each on average); {} transcripts, \
         {} distinct; {} pids recorded (adapters and the children that got to write theirs), \
         0 processes left running",
        wall.as_secs_f64(),
        wall.as_secs_f64() * 1000.0 / RUNS as f64,
        on_disk.len(),
        paths.len(),
        recorded.len()
    );
}

/// The pids of live processes whose command line contains `needle` (but this test's own).
fn processes_naming(needle: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        let found: Vec<i32> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&pid| pid != me)
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
            })
            .filter(|&pid| alive(pid))
            .collect();
        if found.is_empty() || Instant::now() >= until {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// Every file of `dir` (not recursive), sorted.
fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// The malformed-input corpus (`fixtures/cases/malformed/`, replayed with the rest of
/// `fixtures/cases` by `the_fixture_suite_passes` and `.ci/run`): each case names the code it
/// expects and the issue code it is about, its expectation pins both, and together the cases
/// cover every rejection class of the strict reader and of both validators, on both sides.
#[test]
fn the_malformed_corpus_names_and_pins_every_rejection_class() {
    let mut seen: std::collections::BTreeSet<(String, String)> = Default::default();
    let mut count = 0;
    for side in ["request", "result"] {
        for file in files_in(&repo(&format!("fixtures/cases/malformed/{side}"))) {
            count += 1;
            let case: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
            let name = case["name"].as_str().unwrap();
            let expect = &case["expect"];
            let code = expect["error_code"].as_str().unwrap();
            assert!(
                name.starts_with(&format!("malformed {side}: ")),
                "{}",
                file.display()
            );
            assert!(name.contains(&format!(" is {code}")), "{name}");
            assert_eq!(expect["result"]["error"]["code"], code, "{name}");
            let issues: Vec<&str> = expect["result"]["error"]["details"]["issues"]
                .as_array()
                .map(|a| a.iter().map(|i| i["code"].as_str().unwrap()).collect())
                .unwrap_or_default();
            match name.rsplit_once(" (") {
                Some((_, issue)) => {
                    let issue = issue.trim_end_matches(')');
                    assert!(issues.contains(&issue), "{name}: {issues:?}");
                    seen.insert((side.to_string(), issue.to_string()));
                }
                None => {
                    seen.insert((side.to_string(), code.to_string()));
                }
            }
        }
    }
    // The bytes a case file cannot hold (not UTF-8).
    for file in files_in(&repo("fixtures/malformed-bytes")) {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if let Some((side, _)) = name.split_once('-') {
            count += 1;
            seen.insert((side.to_string(), "invalid_utf8".to_string()));
        }
    }
    assert!(count >= 60, "only {count} malformed inputs");
    let strict = [
        "empty",
        "invalid_utf8",
        "byte_order_mark",
        "json_syntax",
        "trailing_bytes",
        "multiple_documents",
        "not_object",
        "duplicate_key",
        "too_deep",
    ];
    let request_checks = [
        "missing",
        "wrong_type",
        "wrong_value",
        "empty",
        "too_long",
        "contains_nul",
        "too_many_issues",
        "too_large",
    ];
    let result_checks = [
        "missing",
        "wrong_type",
        "wrong_value",
        "empty",
        "request_id_mismatch",
        "tool_mismatch",
        "operation_mismatch",
        "path_not_relative",
        "invalid_sha256",
        "result_too_large",
        "adapter_exit_nonzero",
    ];
    let wanted = strict
        .iter()
        .chain(&request_checks)
        .map(|c| ("request", *c))
        .chain(strict.iter().chain(&result_checks).map(|c| ("result", *c)));
    for (side, class) in wanted {
        assert!(
            seen.contains(&(side.to_string(), class.to_string())),
            "no malformed {side} case for {class}"
        );
    }
}

#[test]
fn requests_that_are_not_utf8_are_refused_before_anything_runs() {
    for file in files_in(&repo("fixtures/malformed-bytes")) {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("request-") {
            continue;
        }
        let run = Dispatch::adapter(&["echo"])
            .stdin(std::fs::read(&file).unwrap())
            .run();
        run.expect("failed", Some("request_invalid"), 65);
        assert_eq!(run.issue_codes(), ["invalid_utf8"], "{name}");
        assert_eq!(run.dispatch()["adapter_started"], false, "{name}");
        assert!(
            run.stderr
                .starts_with("error[request_invalid]: document is not valid UTF-8"),
            "{name}: {}",
            run.stderr
        );
        assert_eq!(run.stderr.lines().count(), 1, "{name}: {}", run.stderr);
    }
}

#[test]
fn answers_that_are_not_utf8_are_result_invalid() {
    for file in files_in(&repo("fixtures/malformed-bytes")) {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("result-") {
            continue;
        }
        // `cat FILE` prints the answer's exact bytes (and never reads the request).
        let run = Dispatch::adapter(&[])
            .bridge(|b| b["dispatcher"]["command"]["argv"] = json!(["cat", file]))
            .run();
        run.expect("failed", Some("result_invalid"), 1);
        assert_eq!(run.issue_codes(), ["invalid_utf8"], "{name}");
        assert!(run.envelope.get("output").is_none(), "{name}");
        assert_eq!(run.envelope["request_id"], "ptr_123");
        // What stdout began with is kept, as text (the bad bytes replaced).
        let head = run.dispatch()["stdout_head"].as_str().unwrap();
        assert!(head.starts_with("{\"schema\""), "{name}: {head}");
        assert!(
            run.stderr.starts_with(
                "error[result_invalid]: the adapter's answer is not a valid result envelope: \
                 document is not valid UTF-8"
            ),
            "{name}: {}",
            run.stderr
        );
        assert_eq!(run.stderr.lines().count(), 1, "{name}: {}", run.stderr);
    }
}
