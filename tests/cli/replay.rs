//! `replay`: the fixture suite, failures and their diffs, JUnit, `--bless`, transcripts
//! recorded with `--artifact-dir`, per-case environments, hostile files, determinism.

use super::*;
use std::os::unix::fs::symlink;

/// The repository root: cases name `fixtures/workspace` relative to it.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The closing line of a report, checked to be its last line and well-formed: (passed, failed).
fn closing(stdout: &str) -> (usize, usize) {
    let last = stdout.lines().last().unwrap_or_default();
    let (p, f) = last
        .strip_suffix(" failed")
        .and_then(|s| s.split_once(" passed, "))
        .unwrap_or_else(|| panic!("no closing line: {last:?}\n{stdout}"));
    (p.parse().unwrap(), f.parse().unwrap())
}

/// Run `replay ARGS` from the repository root with the binaries on PATH (as `.ci/run` does), so
/// that argv cases can name `parent-tool-dispatch` and the test adapter `ptd-test`.
fn replay(args: &[&str]) -> Output {
    replay_with(args, &[])
}

pub(super) fn replay_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let dir = bin().parent().unwrap().to_path_buf();
    assert_eq!(
        test_bin().parent(),
        Some(dir.as_path()),
        "ptd-test is built next to it"
    );
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Cmd::new(["replay"])
        .args(args)
        .cwd(root())
        .env("PATH", path);
    for (name, value) in env {
        cmd = cmd.env(name, value);
    }
    cmd.run()
}

/// A recorded case as a JSON value: a request for `workspace.read` answered with `output`.
fn recorded_case(name: &str, output: Value, expect: Value) -> Value {
    let mut req = request();
    req["request_id"] = json!("case-1");
    let answer = json!({"schema": "wp-codebox/parent-tool-result/v1", "version": 1,
        "request_id": "case-1", "tool": "workspace.read", "operation": "call",
        "status": "succeeded", "output": output});
    json!({
        "schema": "parent-tool-dispatch/fixture/v1",
        "name": name,
        "bridge": bridge(&["unused"]),
        "request": req,
        "adapter": {"recorded": {"stdout": format!("{answer}\n"), "exit_code": 0}},
        "expect": expect
    })
}

pub(super) fn write_case(dir: &Path, file: &str, case: &Value) -> PathBuf {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, serde_json::to_string_pretty(case).unwrap() + "\n").unwrap();
    path
}

#[test]
fn the_fixture_suite_passes() {
    let run = replay(&[
        "--parent-tool-bridge",
        "@fixtures/bridge.json",
        "fixtures/cases",
        "fixtures/transcripts/ptr_123.json",
        "fixtures/transcripts/ptr_denied_write.json",
    ]);
    let stdout = run
        .exit(0)
        .stderr_empty()
        .stdout_contains(" passed, 0 failed\n")
        .stdout();
    let (passed, failed) = closing(stdout);
    assert_eq!(failed, 0);
    assert!(passed >= 35, "{passed}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), passed + 1);
    assert!(
        lines[..passed].iter().all(|l| l.starts_with("ok ")),
        "{stdout}"
    );
    // Every row of SPEC §6 a local run can produce has its case (see docs/replay.md).
    for code in [
        "bridge_invalid",
        "dispatch_mode_unsupported",
        "request_invalid",
        "request_too_large",
        "tool_not_allowed",
        "bridge_ref_mismatch",
        "adapter_not_found",
        "adapter_not_executable",
        "cwd_unavailable",
        "artifact_dir_unavailable",
        "dispatch_timeout",
        "adapter_exit_nonzero",
        "adapter_signaled",
        "result_invalid",
        "result_too_large",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("ok {code}: "))),
            "no case for {code}"
        );
    }
    assert!(lines.contains(&"ok fixtures/transcripts/ptr_123.json"));
    assert!(lines.contains(&"ok fixtures/transcripts/ptr_denied_write.json"));
}

#[test]
fn a_failing_case_shows_its_diff_with_json_pointers() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    write_case(
        tmp.path(),
        "a/pass.case.json",
        &recorded_case(
            "passes",
            json!({"n": 1}),
            json!({"status": "succeeded", "result": {"output": {"n": 1}}}),
        ),
    );
    write_case(
        tmp.path(),
        "b/fail.case.json",
        &recorded_case(
            "expects the wrong things",
            json!({"n": 1, "list": [1, 2]}),
            json!({"status": "denied", "error_code": "nope", "exit_code": 77,
                   "result": {"output": {"n": 2, "list": [1], "gone": true}}}),
        ),
    );
    let run = replay(&[dir]);
    run.exit(1)
        .stderr_empty()
        .stdout_with(|stdout| assert_eq!(closing(stdout), (1, 1)));
    let expected = format!(
        "ok passes
FAIL expects the wrong things
    /status
      expected: \"denied\"
      actual:   \"succeeded\"
    /error/code
      expected: \"nope\"
      actual:   (absent)
    (exit status)
      expected: 77
      actual:   0
    /output/n
      expected: 2
      actual:   1
    /output/list
      expected: [1]
      actual:   [1,2]
    /output/gone
      expected: true
      actual:   (absent)
    file: {dir}/b/fail.case.json
1 passed, 1 failed
"
    );
    run.stdout_eq(expected);
}

#[test]
fn junit_reports_every_case_with_matching_counts_and_is_well_formed() {
    let tmp = tempfile::tempdir().unwrap();
    let hostile_name = "tricky <name> & \"quotes\" \u{1b}[31m\u{7}";
    write_case(
        tmp.path(),
        "1.case.json",
        &recorded_case("fine", json!(1), json!({"status": "succeeded"})),
    );
    write_case(
        tmp.path(),
        "2.case.json",
        &recorded_case(hostile_name, json!("]]>"), json!({"status": "failed"})),
    );
    std::fs::write(tmp.path().join("3.case.json"), "{ not json").unwrap();
    let report = tmp.path().join("out/junit.xml");
    std::fs::create_dir(tmp.path().join("out")).unwrap();
    let run = replay(&[
        tmp.path().to_str().unwrap(),
        "--junit",
        report.to_str().unwrap(),
    ]);
    run.exit(1)
        .stderr_empty()
        .stdout_with(|stdout| assert_eq!(closing(stdout), (1, 2)))
        // The terminal never sees the raw escape sequence.
        .stdout_lacks("\u{1b}")
        .stdout_contains("\\x1b[31m");

    let xml = std::fs::read_to_string(&report).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let suites = doc.root_element();
    assert_eq!(suites.tag_name().name(), "testsuites");
    assert_eq!(suites.attribute("tests"), Some("3"));
    assert_eq!(suites.attribute("failures"), Some("2"));
    let suite = suites
        .children()
        .find(|n| n.has_tag_name("testsuite"))
        .unwrap();
    assert_eq!(suite.attribute("tests"), Some("3"));
    assert_eq!(suite.attribute("failures"), Some("2"));
    assert_eq!(suite.attribute("errors"), Some("0"));
    let cases: Vec<_> = suite
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 3);
    assert_eq!(cases[0].attribute("name"), Some("fine"));
    assert!(cases[0].children().all(|n| !n.has_tag_name("failure")));
    assert_eq!(
        cases[1].attribute("name"),
        Some("tricky <name> & \"quotes\" \\x1b[31m\\x07")
    );
    let failure = cases[1]
        .children()
        .find(|n| n.has_tag_name("failure"))
        .unwrap();
    assert_eq!(failure.attribute("type"), Some("mismatch"));
    assert_eq!(
        failure.attribute("message"),
        Some("1 difference at /status")
    );
    assert!(failure.text().unwrap().contains("expected: \"failed\""));
    let broken = cases[2]
        .children()
        .find(|n| n.has_tag_name("failure"))
        .unwrap();
    assert_eq!(broken.attribute("type"), Some("error"));
    assert!(broken
        .attribute("message")
        .unwrap()
        .contains("not valid JSON"));
    for case in &cases {
        let time: f64 = case.attribute("time").unwrap().parse().unwrap();
        assert!(time >= 0.0);
        assert!(case.attribute("classname").unwrap().ends_with(".case.json"));
    }
}

#[test]
fn bidi_controls_and_line_separators_never_reach_the_log_raw() {
    // Trojan Source: U+202E reverses what follows on screen, U+2066 isolates, U+2028 breaks
    // the line in some viewers. In a name, in a path, in an expected and an actual value.
    let tmp = tempfile::tempdir().unwrap();
    let name = "safe\u{202e}}lanigiro{\u{2066}x\u{2028}fake line";
    write_case(
        tmp.path(),
        "d\u{202e}ir/1.case.json",
        &recorded_case(
            name,
            json!("out\u{202e}put\u{2029}"),
            json!({"status": "succeeded", "result": {"output": "exp\u{202e}ected\u{2028}"}}),
        ),
    );
    let report = tmp.path().join("junit.xml");
    let run = replay(&[
        tmp.path().to_str().unwrap(),
        "--junit",
        report.to_str().unwrap(),
    ]);
    let raw = ['\u{202e}', '\u{2066}', '\u{2028}', '\u{2029}'];
    run.exit(1)
        .stderr_empty()
        .stdout_with(|stdout| {
            assert!(!stdout.contains(raw), "{stdout}");
            assert_eq!(closing(stdout), (0, 1));
        })
        .stdout_contains("FAIL safe\\u{202e}}lanigiro{\\u{2066}x\\u{2028}fake line\n")
        .stdout_contains("expected: \"exp\\u{202e}ected\\u{2028}\"")
        .stdout_contains("actual:   \"out\\u{202e}put\\u{2029}\"")
        .stdout_contains("d\\u{202e}ir/1.case.json");
    let xml = std::fs::read_to_string(&report).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    assert!(!xml.contains(raw), "{xml}");
    let case = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase"))
        .unwrap();
    assert_eq!(
        case.attribute("name"),
        Some("safe\\u{202e}}lanigiro{\\u{2066}x\\u{2028}fake line")
    );
    let text = case
        .children()
        .find(|n| n.has_tag_name("failure"))
        .and_then(|n| n.text())
        .unwrap();
    assert!(text.contains("\"exp\\u{202e}ected\\u{2028}\""), "{text}");
    // A case file that cannot be read says so on stdout with its path escaped as well.
    std::fs::write(tmp.path().join("d\u{202e}ir/2.case.json"), "{ not json").unwrap();
    replay(&[tmp.path().to_str().unwrap()])
        .exit(1)
        .stderr_empty()
        .stdout_with(|stdout| assert!(!stdout.contains(raw), "{stdout}"));
}

#[test]
fn bless_rewrites_only_expect_and_then_the_case_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let original = "{\n    \"schema\": \"parent-tool-dispatch/fixture/v1\",\n    \"name\": \"blessable\",\n    \"bridge\": BRIDGE,\n    \"request\":   REQUEST,\n    \"adapter\": {\"result\": RESULT},\n    \"expect\": {\n        \"status\": \"denied\",\n        \"result\": {\"output\": {\"a\": 0}, \"metadata\": {}}\n    },\n    \"options\": []\n}\n";
    let mut req = request();
    req["request_id"] = json!("b-1");
    let result = json!({"schema": "wp-codebox/parent-tool-result/v1", "version": 1, "request_id": "b-1",
        "tool": "workspace.read", "operation": "call", "status": "succeeded",
        "output": {"a": 1, "b": 2}, "metadata": {"m": 1}});
    let text = original
        .replace("BRIDGE", &bridge(&["unused"]).to_string())
        .replace("REQUEST", &req.to_string())
        .replace("RESULT", &result.to_string());
    let path = tmp.path().join("x.case.json");
    std::fs::write(&path, &text).unwrap();
    let arg = path.to_str().unwrap();

    replay(&[arg])
        .exit(1)
        .stderr_empty()
        .stdout_with(|stdout| assert!(stdout.starts_with("FAIL blessable\n"), "{stdout}"));

    replay(&["--bless", arg])
        .exit(0)
        .stderr_empty()
        .stdout_with(|stdout| {
            assert!(stdout.starts_with("blessed blessable\n"), "{stdout}");
            assert_eq!(closing(stdout), (1, 0));
        })
        .stdout_contains("(expect rewritten)");

    let after = std::fs::read_to_string(&path).unwrap();
    let expect_at = text.find("\"expect\"").unwrap();
    let tail_at = text.find(",\n    \"options\"").unwrap();
    // Every byte outside the expect member is as it was.
    assert_eq!(&after[..expect_at], &text[..expect_at]);
    assert!(after.ends_with(&text[tail_at..]));
    assert_eq!(
        &after[expect_at..after.len() - (text.len() - tail_at)],
        // `metadata: {}` named no key of metadata: it stays `{}` (any object).
        "\"expect\": {\n        \"status\": \"succeeded\",\n        \"result\": {\n            \"output\": {\n                \"a\": 1\n            },\n            \"metadata\": {}\n        },\n        \"exit_code\": 0\n    }"
    );

    replay(&[arg])
        .exit(0)
        .stderr_empty()
        .stdout_eq("ok blessable\n1 passed, 0 failed\n");
}

#[test]
fn a_transcript_recorded_with_artifact_dir_replays_secrets_and_all() {
    let tmp = tempfile::tempdir().unwrap();
    let artifacts = tmp.path().join("artifacts");
    let secret = "rt-secret-Zq81-value";
    let bridge_file = tmp.path().join("bridge.json");
    std::fs::write(&bridge_file, bridge(&["echo"]).to_string()).unwrap();
    let bridge_arg = format!("@{}", bridge_file.display());
    let record = |edit: &dyn Fn(&mut Value)| {
        Dispatch::adapter(&["echo"])
            .raw_bridge(Some(&bridge_arg))
            .request(|r| edit(r))
            .env("PTD_RT_SECRET", secret)
            .args(&[
                "--secret-env",
                "PTD_RT_SECRET",
                "--artifact-dir",
                artifacts.to_str().unwrap(),
            ])
            .run()
    };
    // The secret is in the request id (so in the echo) and in the input.
    record(&|r| {
        r["request_id"] = json!(format!("rt-{secret}"));
        r["input"] = json!({"path": "README.md", "note": format!("uses {secret}")});
    })
    .expect("succeeded", None, 0);
    record(&|r| {
        r["request_id"] = json!("rt-denied");
        r["tool"] = json!("shell.exec");
    })
    .expect("denied", Some("tool_not_allowed"), 77);
    record(&|r| {
        r["request_id"] = json!("rt-invalid");
        r.as_object_mut().unwrap().remove("sandbox_session");
    })
    .expect("failed", Some("request_invalid"), 65);

    let folder = artifacts.join("files/parent-tools");
    let mut files: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .collect();
    files.sort();
    assert_eq!(files.len(), 3);
    for file in &files {
        assert!(
            !std::fs::read_to_string(file).unwrap().contains(secret),
            "{file}"
        );
    }

    let mut args = vec!["--parent-tool-bridge", bridge_arg.as_str()];
    args.extend(files.iter().map(String::as_str));
    let shown: Vec<String> = files.iter().map(|f| format!("ok {f}")).collect();
    replay(&args).exit(0).stderr_empty().stdout_with(|stdout| {
        assert_eq!(closing(stdout), (3, 0));
        assert_eq!(
            stdout.lines().collect::<Vec<_>>()[..3],
            shown.iter().map(String::as_str).collect::<Vec<_>>()[..]
        );
    });

    // Against a bridge that no longer allows the tool, the recorded success is a regression.
    let mut narrower = bridge(&["echo"]);
    narrower["allowed_tools"] = json!([]);
    let narrower = narrower.to_string();
    let succeeded = files
        .iter()
        .find(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .contains("\"parent_tool_status\":\"succeeded\"")
        })
        .unwrap();
    assert!(
        succeeded.ends_with("rt-_redacted_.json"),
        "the file name is redacted too: {succeeded}"
    );
    replay(&["--parent-tool-bridge", &narrower, succeeded])
        .exit(1)
        .stderr_empty()
        .stdout_contains("/status\n      expected: \"succeeded\"\n      actual:   \"denied\"");

    // Without any bridge a transcript cannot be replayed: a failed case says so.
    replay(&[&files[0]])
        .exit(1)
        .stderr_empty()
        .stdout_contains("needs the bridge it was recorded against")
        .stdout_with(|stdout| assert_eq!(closing(stdout), (0, 1)));
}

#[test]
fn each_case_gets_its_own_env_for_secret_env_even_in_parallel() {
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..6 {
        let secret = format!("secret-value-number-{i}-xyz");
        let mut case = recorded_case(
            &format!("secret {i}"),
            json!({"mine": secret, "text": format!("with {secret} inside")}),
            json!({"status": "succeeded", "exit_code": 0,
                   "result": {"output": {"mine": "[redacted]", "text": "with [redacted] inside"}}}),
        );
        case["env"] = json!({"PTD_CASE_SECRET": secret});
        case["options"] = json!(["--secret-env", "PTD_CASE_SECRET"]);
        write_case(tmp.path(), &format!("{i}.case.json"), &case);
    }
    // The variable in replay's own environment must not leak into any case.
    replay_with(
        &["--jobs", "4", tmp.path().to_str().unwrap()],
        &[("PTD_CASE_SECRET", "the-process-value-1")],
    )
    .exit(0)
    .stderr_empty()
    .stdout_with(|stdout| assert_eq!(closing(stdout), (6, 0)));

    // Without the option the value passes through: the expectation above means something.
    let mut case = recorded_case(
        "no secret-env",
        json!({"mine": "secret-value-plain-xyz"}),
        json!({"status": "succeeded", "result": {"output": {"mine": "[redacted]"}}}),
    );
    case["env"] = json!({"PTD_CASE_SECRET": "secret-value-plain-xyz"});
    let path = write_case(tmp.path(), "plain/x.case.json", &case);
    replay(&[path.to_str().unwrap()])
        .exit(1)
        .stderr_empty()
        .stdout_contains("actual:   \"secret-value-plain-xyz\"");
}

#[test]
fn unreadable_and_invalid_case_files_fail_with_a_reason_and_the_rest_still_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_case(
        dir,
        "a-good.case.json",
        &recorded_case("good", json!(1), json!({"status": "succeeded"})),
    );
    std::fs::write(dir.join("b-bad-utf8.case.json"), b"{\"name\": \"\xff\"}").unwrap();
    std::fs::write(
        dir.join("c-not-a-case.case.json"),
        r#"{"schema": "something/else"}"#,
    )
    .unwrap();
    let mut incomplete = recorded_case("incomplete", json!(1), json!({"status": "succeeded"}));
    incomplete.as_object_mut().unwrap().remove("request");
    incomplete["adapter"] = json!({"recorded": {"stdout": 1}});
    write_case(dir, "d-incomplete.case.json", &incomplete);
    symlink("nowhere", dir.join("e-dangling.case.json")).unwrap();
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        dir.join("f-fifo.case.json"),
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    std::fs::create_dir(dir.join("loop")).unwrap();
    symlink("..", dir.join("loop/up")).unwrap();
    std::fs::write(
        dir.join("g-deep.case.json"),
        format!("{{\"a\":{}{}}}", "[".repeat(500), "]".repeat(500)),
    )
    .unwrap();
    let mut no_expect = recorded_case("no expect yet", json!(1), json!({}));
    no_expect.as_object_mut().unwrap().remove("expect");
    write_case(dir, "h-no-expect.case.json", &no_expect);

    let started = std::time::Instant::now();
    let run = replay(&[
        dir.to_str().unwrap(),
        &dir.join("missing.case.json").display().to_string(),
    ]);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "never waits on a FIFO or a loop"
    );
    let stdout = run
        .exit(1)
        .stderr_contains("not following the symbolic link")
        .stdout_with(|stdout| assert_eq!(closing(stdout), (1, 8), "{stdout}"))
        .stdout();
    let p = |name: &str| dir.join(name).display().to_string();
    let expect_block = |head: &str, needle: &str| {
        let at = stdout
            .find(head)
            .unwrap_or_else(|| panic!("no {head:?} in\n{stdout}"));
        let block = &stdout[at..];
        let block = &block[..block[1..].find("\nFAIL ").map_or(block.len(), |i| i + 1)];
        assert!(block.contains(needle), "{needle:?} not in\n{block}");
    };
    assert!(stdout.starts_with("ok good\n"), "{stdout}");
    expect_block(
        &format!("FAIL {}", p("b-bad-utf8.case.json")),
        "not valid UTF-8",
    );
    expect_block(
        &format!("FAIL {}", p("c-not-a-case.case.json")),
        "not a replay case or transcript",
    );
    expect_block(
        "FAIL incomplete",
        "/request: required key \"request\" is missing [missing]",
    );
    expect_block(
        "FAIL incomplete",
        "/adapter/recorded/stdout: expected a string, found a number [wrong_type]",
    );
    expect_block("FAIL incomplete", "/adapter/recorded/exit_code:");
    expect_block(
        &format!("FAIL {}", p("e-dangling.case.json")),
        "cannot be read",
    );
    expect_block(
        &format!("FAIL {}", p("f-fifo.case.json")),
        "is a FIFO, not a regular file",
    );
    expect_block(
        &format!("FAIL {}", p("g-deep.case.json")),
        "deeper than 128 levels",
    );
    expect_block(
        "FAIL no expect yet",
        "has no \"expect\" yet (run with --bless to record one)",
    );
    expect_block(&format!("FAIL {}", p("missing.case.json")), "No such file");

    // --bless can record the missing expectation, and only that file changes.
    replay(&["--bless", &p("h-no-expect.case.json")])
        .exit(0)
        .stderr_empty()
        .stdout_with(|stdout| assert_eq!(closing(stdout), (1, 0), "{stdout}"));
    replay(&[&p("h-no-expect.case.json")])
        .exit(0)
        .stderr_empty()
        .stdout_eq("ok no expect yet\n1 passed, 0 failed\n");
}

#[test]
fn output_is_the_same_whatever_the_number_of_jobs() {
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..12 {
        let expect = if i % 3 == 0 {
            json!({"status": "denied", "result": {"output": {"i": i + 100}}})
        } else {
            json!({"status": "succeeded", "exit_code": 0, "result": {"output": {"i": i}}})
        };
        write_case(
            tmp.path(),
            &format!("d{}/c{i:02}.case.json", i % 4),
            &recorded_case(&format!("case {i}"), json!({"i": i}), expect),
        );
    }
    std::fs::write(tmp.path().join("d1/broken.case.json"), "[]").unwrap();
    let dir = tmp.path().to_str().unwrap();
    let one = replay(&["--jobs", "1", "fixtures/cases", dir]);
    let four = replay(&["--jobs", "4", "fixtures/cases", dir]);
    let again = replay(&["--jobs", "4", "fixtures/cases", dir]);
    let stdout = one
        .exit(1)
        .stderr_empty()
        .stdout_with(|stdout| assert!(closing(stdout).1 == 5, "{stdout}"))
        .stdout();
    four.exit(1).stderr_empty().stdout_eq(stdout);
    again.exit(1).stderr_empty().stdout_eq(stdout);
    // Sorted by path: d0/c00, d0/c04, d0/c08, d1/broken, d1/c01, …
    let ours: Vec<&str> = stdout
        .lines()
        .filter(|l| {
            l.starts_with("ok case") || l.starts_with("FAIL case") || l.contains("broken.case.json")
        })
        .collect();
    assert!(
        ours[0].ends_with("case 0") && ours[1].ends_with("case 4") && ours[2].ends_with("case 8"),
        "{ours:?}"
    );
    assert!(ours[3].contains("d1/broken.case.json"), "{ours:?}");
}

#[test]
fn filter_runs_matching_cases_but_never_hides_a_broken_file() {
    let tmp = tempfile::tempdir().unwrap();
    write_case(
        tmp.path(),
        "a.case.json",
        &recorded_case("alpha", json!(1), json!({"status": "succeeded"})),
    );
    write_case(
        tmp.path(),
        "b.case.json",
        &recorded_case("beta", json!(1), json!({"status": "succeeded"})),
    );
    std::fs::write(tmp.path().join("c.case.json"), "nonsense").unwrap();
    let dir = tmp.path().to_str().unwrap();
    replay(&["--filter", "alp", dir])
        .exit(1)
        .stderr_empty()
        .stdout_with(|stdout| {
            assert_eq!(closing(stdout), (1, 1));
            assert!(stdout.starts_with("ok alpha\nFAIL "), "{stdout}");
        });

    // No case ran: a failure.
    replay(&[
        "--filter",
        "zzz",
        &tmp.path().join("a.case.json").display().to_string(),
    ])
    .exit(1)
    .stdout_eq("0 passed, 0 failed\n")
    .stderr_contains("error[replay]: no case ran");
}

#[test]
fn usage_errors_exit_2_without_a_report() {
    for args in [&[][..], &["--jobs", "0", "x"], &["--jobs", "many", "x"]] {
        replay(args)
            .exit(2)
            .stdout_empty()
            .stderr_contains("error:");
    }
}

#[test]
fn argv_cases_run_through_the_main_job_with_options_and_env() {
    let tmp = tempfile::tempdir().unwrap();
    let mut b = bridge(&[]);
    b["dispatcher"]["command"] = json!({"cwd_env": "PTD_CASE_DIR"});
    let mut req = request();
    req["request_id"] = json!("argv-1");
    let case = json!({
        "schema": "parent-tool-dispatch/fixture/v1",
        "name": "argv with cwd_env and tool map",
        "bridge": b,
        "request": req,
        "adapter": {"argv": ["ptd-test", "adapter", "echo"]},
        "env": {"PTD_CASE_DIR": tmp.path().to_str().unwrap()},
        "options": ["--tool-map", "provider-safe"],
        "expect": {"status": "succeeded", "exit_code": 0, "result": {
            "tool": "workspace.read",
            // `output` is product payload: only exact secrets are scrubbed from it.
            "output": {"cwd": tmp.path().to_str().unwrap()},
            "diagnostics": {"dispatch": {"adapter_started": true, "transport": "stdin"}}}}
    });
    let path = write_case(tmp.path(), "argv.case.json", &case);
    replay(&[path.to_str().unwrap()])
        .exit(0)
        .stdout_eq("ok argv with cwd_env and tool map\n1 passed, 0 failed\n")
        .stderr_empty();
}
