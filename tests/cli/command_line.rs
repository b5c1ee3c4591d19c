//! The command line's smaller promises (issue 23, docs/cli-notes.md): `-h` short and `--help`
//! long, a pointer to `--help` when nothing is given, `validate` over several files and
//! `--strict` inside every described object, `delegation run REQUEST` beside `--request`.

use super::*;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn no_arguments_at_all_point_to_help() {
    Cmd::new(Vec::<&str>::new())
        .run()
        .exit(2)
        .stdout_empty()
        .stderr_eq(
            "error[usage]: no bridge: pass --parent-tool-bridge '<json>|@FILE' or set \
             PARENT_TOOL_DISPATCH_BRIDGE\n\nFor more information, try '--help'.\n",
        );
}

#[test]
fn short_help_is_short_and_long_help_keeps_everything() {
    let short = Cmd::new(["-h"]);
    let short = short.run();
    short
        .exit(0)
        .stderr_empty()
        .stdout_contains("--parent-tool-bridge")
        .stdout_contains("-v, --verbose")
        .stdout_contains("see --help")
        .stdout_lacks("--fs-read")
        .stdout_lacks("Exit status");
    let lines = short.stdout().lines().count();
    assert!(lines <= 60, "-h is {lines} lines:\n{}", short.stdout());
    let long = Cmd::new(["--help"]).run();
    long.exit(0)
        .stderr_empty()
        .stdout_contains("--fs-read")
        .stdout_contains("Examples:")
        .stdout_contains("Exit status");
    assert!(long.stdout().lines().count() > lines);
    // Subcommands too: their code tables are in --help only.
    let short = Cmd::new(["delegation", "run", "-h"]).run();
    short
        .exit(0)
        .stderr_empty()
        .stdout_lacks("wp_codebox_host_delegation_timeout\n");
    Cmd::new(["delegation", "run", "--help"])
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_contains("wp_codebox_host_delegation_timeout");
}

fn bridge_with(edit: impl FnOnce(&mut Value)) -> Value {
    let text = std::fs::read_to_string(root().join("fixtures/bridge.json")).unwrap();
    let mut bridge: Value = serde_json::from_str(&text).unwrap();
    edit(&mut bridge);
    bridge
}

#[test]
fn strict_validation_sees_a_typo_inside_authorization() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bridge.json");
    let bridge = bridge_with(|b| b["authorization"]["failure_stauts"] = json!("unavailable"));
    std::fs::write(&path, bridge.to_string()).unwrap();
    let warning = "warning[unknown_key]: /authorization/failure_stauts: unknown key \
                   \"failure_stauts\" (did you mean \"failure_status\"?)\n";
    Cmd::new(["validate", "bridge"])
        .arg(&path)
        .run()
        .exit(0)
        .stdout_json(|report| {
            assert_eq!(report["valid"], true);
            assert_eq!(
                report["warnings"][0]["path"],
                "/authorization/failure_stauts"
            );
        })
        .stderr_eq(warning);
    Cmd::new(["validate", "bridge", "--strict"])
        .arg(&path)
        .run()
        .exit(65)
        .stdout_json(|report| {
            assert_eq!(report["valid"], false);
            assert_eq!(report["issues"][0]["code"], "unknown_key");
            assert_eq!(report["issues"][0]["path"], "/authorization/failure_stauts");
        })
        // (An issue now, no longer a warning.)
        .stderr_eq(
            "error[bridge_invalid]: /authorization/failure_stauts: unknown key \
             \"failure_stauts\" (did you mean \"failure_status\"?)\n",
        );
}

#[test]
fn validate_takes_several_files_and_reports_each() {
    let dir = tempfile::tempdir().unwrap();
    let good = root().join("fixtures/bridge.json");
    let typo = dir.path().join("typo.json");
    std::fs::write(
        &typo,
        bridge_with(|b| b["sandbox_env"]["secret_evn"] = json!([])).to_string(),
    )
    .unwrap();
    let missing = dir.path().join("missing.json");
    let out = Cmd::new(["validate", "bridge"])
        .arg(&good)
        .arg(&typo)
        .arg(&missing)
        .run();
    out.exit(65)
        .stdout_with(|stdout| {
            let reports: Vec<Value> = stdout
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(reports.len(), 3);
            assert_eq!(reports[0]["file"], good.display().to_string());
            assert_eq!(reports[0]["valid"], true);
            assert_eq!(reports[1]["file"], typo.display().to_string());
            assert_eq!(reports[1]["valid"], true);
            assert_eq!(reports[1]["warnings"][0]["path"], "/sandbox_env/secret_evn");
            assert_eq!(reports[2]["valid"], false);
            assert_eq!(reports[2]["issues"][0]["code"], "unreadable");
        })
        .stderr_eq(format!(
            "warning[unknown_key]: {}: /sandbox_env/secret_evn: unknown key \"secret_evn\" \
             (did you mean \"secret_env\"?)\n\
             error[bridge_invalid]: reading bridge file {}: No such file or directory (os error 2)\n",
            typo.display(),
            missing.display()
        ));
    // All valid: exit 0, a line each.
    Cmd::new(["validate", "bridge"])
        .arg(&good)
        .arg(&good)
        .run()
        .exit(0)
        .stdout_with(|stdout| assert_eq!(stdout.lines().count(), 2))
        .stderr_empty();
    // stdin at most once.
    Cmd::new(["validate", "request", "-", "-"])
        .run()
        .exit(2)
        .stdout_empty()
        .stderr_starts_with("error[usage]: `-` (stdin) can be given once");
}

#[test]
fn delegation_run_takes_the_request_as_an_argument_or_by_request() {
    let request = root().join("fixtures/delegation/request.json");
    let adapter = root().join("fixtures/delegation/adapter.sh");
    for spelling in [
        vec![request.clone()],
        vec!["--request".into(), request.clone()],
    ] {
        Cmd::new(["delegation", "run"])
            .args(&spelling)
            .arg("--")
            .arg(&adapter)
            .run()
            .exit(0)
            .stdout_json(|envelope| {
                assert_eq!(envelope["status"], "completed", "{envelope}");
                assert_eq!(envelope["request_id"], "hd-demo-1");
            })
            .stderr_empty();
    }
    Cmd::new(["delegation", "run", "--request"])
        .arg(&request)
        .arg(&request)
        .arg("--")
        .arg(&adapter)
        .run()
        .exit(2)
        .stdout_empty()
        .stderr_contains("cannot be used with");
}

#[test]
fn request_prints_an_envelope_that_validate_request_accepts_and_a_dispatch_runs() {
    let first = Cmd::new([
        "request",
        "workspace.read",
        "--input",
        r#"{"path": "README.md", "n": 1.50}"#,
    ])
    .run();
    first.exit(0).stderr_empty().stdout_with(|_| ());
    let text = first.stdout().to_string();
    assert_eq!(text.lines().count(), 1, "{text}");
    // The input is carried as written (numbers keep their spelling), minified.
    assert!(
        text.contains(r#""input":{"path":"README.md","n":1.50}"#),
        "{text}"
    );
    let envelope = first.json();
    assert_eq!(envelope["tool"], "workspace.read");
    assert_eq!(envelope["operation"], "call");
    assert_eq!(envelope["sandbox_session"]["sandbox_session_id"], "local");
    assert_eq!(
        envelope["authorization"]["allowed_tools"],
        json!(["workspace.read"])
    );
    let id = envelope["request_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("ptr-"), "{id}");
    Cmd::new(["validate", "request", "-"])
        .stdin(text.clone())
        .run()
        .exit(0)
        .stdout_eq("{\"valid\":true,\"issues\":[]}\n")
        .stderr_empty();
    // A fresh id every time.
    let second = Cmd::new(["request", "workspace.read"]).run();
    second.exit(0).stderr_empty().stdout_with(|_| ());
    assert_ne!(second.json()["request_id"], json!(id));
    assert_eq!(second.json()["input"], json!({}));
    // What it prints is what the main job takes.
    Dispatch::adapter(&["echo"])
        .stdin(text)
        .run()
        .expect("succeeded", None, 0);
}

#[test]
fn request_takes_every_field_and_an_input_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.json");
    std::fs::write(
        &input,
        "{\n  \"pattern\": \"fn main\",\n  \"max_results\": 5\n}\n",
    )
    .unwrap();
    let out = Cmd::new([
        "request",
        "workspace.search",
        "--id",
        "req-7",
        "--session",
        "s-1",
    ])
    .args(["--operation", "query", "--input"])
    .arg(format!("@{}", input.display()))
    .run();
    out.exit(0)
        .stdout_json(|envelope| {
            assert_eq!(envelope["request_id"], "req-7");
            assert_eq!(envelope["sandbox_session"]["sandbox_session_id"], "s-1");
            assert_eq!(envelope["operation"], "query");
            assert_eq!(
                envelope["input"],
                json!({"pattern": "fn main", "max_results": 5})
            );
        })
        .stderr_empty()
        .stdout_with(|stdout| assert_eq!(stdout.lines().count(), 1));
}

#[test]
fn request_refuses_bad_input_with_documented_statuses() {
    Cmd::new(["request", "t", "--input", "{\"a\":"])
        .run()
        .exit(65)
        .stdout_empty()
        .stderr_starts_with("error[request_invalid]: --input is not one JSON value: ");
    Cmd::new(["request", "t", "--input", "1 2"])
        .run()
        .exit(65)
        .stdout_empty()
        .stderr_starts_with("error[request_invalid]: --input is not one JSON value: ");
    Cmd::new(["request", ""])
        .run()
        .exit(65)
        .stdout_empty()
        .stderr_eq(
        "error[request_invalid]: the request would be invalid: /tool: \"tool\" must not be empty\n",
    );
    let long_id = "x".repeat(300);
    Cmd::new(["request", "t", "--id", &long_id])
        .run()
        .exit(65)
        .stdout_empty()
        .stderr_starts_with("error[request_invalid]: the request would be invalid: /request_id: ");
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.json");
    Cmd::new(["request", "t", "--input"])
        .arg(format!("@{}", missing.display()))
        .run()
        .exit(2)
        .stdout_empty()
        .stderr_eq(format!(
            "error[usage]: the --input file {} cannot be read: No such file or directory (os error 2)\n\n\
             For more information, try '--help'.\n",
            missing.display()
        ));
    // A directory (the one reader takes regular files only).
    Cmd::new(["request", "t", "--input"])
        .arg(format!("@{}", dir.path().display()))
        .run()
        .exit(2)
        .stdout_empty()
        .stderr_contains("not a regular file");
}

/// A case for `workspace.read` with the bridge given as `bridge` and this adapter.
fn case_with(name: &str, bridge: Value, adapter: Value, options: &[&str]) -> Value {
    let mut req = request();
    req["request_id"] = json!("case-rel");
    json!({
        "schema": "parent-tool-dispatch/fixture/v1",
        "name": name,
        "bridge": bridge,
        "request": req,
        "adapter": adapter,
        "options": options,
        "expect": {"status": "succeeded", "exit_code": 0}
    })
}

#[test]
fn replay_resolves_every_relative_path_of_a_case_against_its_folder() {
    let suite = tempfile::tempdir().unwrap();
    let cases = suite.path().join("cases");
    std::fs::create_dir_all(&cases).unwrap();
    // The bridge one folder up, named relatively; its argv is the case's.
    std::fs::write(
        suite.path().join("bridge.json"),
        bridge(&["unused"]).to_string(),
    )
    .unwrap();
    // A relative argv[0], found from the case's folder (the child dispatcher runs there).
    std::os::unix::fs::symlink(test_bin(), cases.join("adapter")).unwrap();
    let live = case_with(
        "argv with an @FILE bridge",
        json!("@../bridge.json"),
        json!({"argv": ["./adapter", "adapter", "read-stdin", "echo"]}),
        &["--result-file", "live-result.json"],
    );
    std::fs::write(cases.join("live.case.json"), live.to_string()).unwrap();
    let answer = json!({"schema": "wp-codebox/parent-tool-result/v1", "version": 1,
        "request_id": "case-rel", "tool": "workspace.read", "operation": "call",
        "status": "succeeded", "output": {}});
    let recorded = case_with(
        "recorded with an @FILE bridge",
        json!("@../bridge.json"),
        json!({"recorded": {"stdout": format!("{answer}\n"), "exit_code": 0}}),
        &["--result-file=recorded-result.json"],
    );
    std::fs::write(cases.join("recorded.case.json"), recorded.to_string()).unwrap();
    // Run from somewhere else entirely.
    let elsewhere = tempfile::tempdir().unwrap();
    Cmd::new(["replay", "--jobs", "1"])
        .arg(&cases)
        .cwd(elsewhere.path())
        .run()
        .exit(0)
        .stdout_eq(
            "ok argv with an @FILE bridge\nok recorded with an @FILE bridge\n2 passed, 0 failed\n",
        )
        .stderr_empty();
    for file in ["live-result.json", "recorded-result.json"] {
        let text = std::fs::read_to_string(cases.join(file)).unwrap();
        let envelope: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(envelope["status"], "succeeded", "{file}");
    }
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    // An @FILE that is not there fails the argv case with the reason.
    let broken = case_with(
        "argv with a missing bridge file",
        json!("@../missing.json"),
        json!({"argv": ["./adapter", "adapter", "echo"]}),
        &[],
    );
    std::fs::write(cases.join("live.case.json"), broken.to_string()).unwrap();
    std::fs::remove_file(cases.join("recorded.case.json")).unwrap();
    Cmd::new(["replay"])
        .arg(&cases)
        .cwd(elsewhere.path())
        .run()
        .exit(1)
        .stdout_with(|stdout| {
            assert!(
                stdout.starts_with("FAIL argv with a missing bridge file\n"),
                "{stdout}"
            );
            assert!(
                stdout.contains("an argv case's bridge cannot be used: reading "),
                "{stdout}"
            );
            assert!(stdout.ends_with("0 passed, 1 failed\n"), "{stdout}");
        })
        .stderr_empty();
}

/// The binary's command line with these words after its name.
fn argv(words: &[&str]) -> Vec<std::ffi::OsString> {
    std::iter::once("parent-tool-dispatch")
        .chain(words.iter().copied())
        .map(std::ffi::OsString::from)
        .collect()
}

/// The main job's quick parse (`main_job_command_line`, which skips building every
/// subcommand) knows every subcommand by name, and gives exactly what the whole command tree
/// gives — or leaves the command line to it.
#[test]
fn the_main_jobs_quick_parse_agrees_with_the_whole_command_tree() {
    use clap::{CommandFactory, FromArgMatches};
    use parent_tool_dispatch::cli::Cli;
    use parent_tool_dispatch::{main_job_command_line, SUBCOMMAND_NAMES};
    let mut full = Cli::command();
    full.build();
    let mut names: Vec<&str> = full.get_subcommands().map(|s| s.get_name()).collect();
    names.sort_unstable();
    let mut listed = SUBCOMMAND_NAMES.to_vec();
    listed.sort_unstable();
    assert_eq!(listed, names, "SUBCOMMAND_NAMES is the command tree's");
    assert!(full
        .get_subcommands()
        .all(|s| s.get_all_aliases().next().is_none() && !s.is_hide_set()));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("request.json");
    std::fs::write(&file, "{}").unwrap();
    let file = file.to_str().unwrap();
    let quick: &[&[&str]] = &[
        &[],
        &["--parent-tool-bridge", "{}"],
        &["--parent-tool-bridge", "@bridge.json", file],
        &["--parent-tool-bridge={}", "--pretty", "-v", file],
        &[
            "-q",
            "--artifact-dir",
            "validate",
            "--result-file",
            "schema",
        ],
        &[
            "--parent-tool-bridge",
            "{}",
            "--pass-env",
            "A",
            "--pass-env",
            "B",
        ],
        &[
            "--ledger",
            "l.db",
            "--budget-tool",
            "a=1",
            "--budget-tool",
            "b=2",
        ],
        &[
            "--fs-read",
            "/usr",
            "--network",
            "none",
            "--limit-memory",
            "64M",
        ],
        &[
            "--kill-grace-ms",
            "5",
            "--max-output-bytes",
            "10",
            "--",
            "-",
        ],
    ];
    // The shapes nearly every call has give the same too.
    let plain: &[&[&str]] = &[
        &["--parent-tool-bridge", "{}"],
        &["--parent-tool-bridge", "@bridge.json"],
        &["--parent-tool-bridge={\"a\": 1}"],
        &["--parent-tool-bridge", "validate"],
        &["--parent-tool-bridge", "a=b"],
        &["--parent-tool-bridge", "{}", "--policy", "p.toml"],
        &["--policy=p.toml", "--parent-tool-bridge={}"],
        &[
            "--policy",
            "/etc/ptd/policy.toml",
            "--parent-tool-bridge",
            "@b.json",
        ],
    ];
    for line in quick.iter().chain(plain) {
        let args = argv(line);
        let fast = main_job_command_line(&args)
            .unwrap_or_else(|| panic!("{line:?} was left to the whole tree"));
        let mut cmd = Cli::command();
        let mut matches = cmd.try_get_matches_from_mut(&args).unwrap();
        let whole = Cli::from_arg_matches_mut(&mut matches).unwrap();
        assert_eq!(format!("{fast:?}"), format!("{whole:?}"), "{line:?}");
    }
    // `DispatchArgs::with_bridge` is what clap gives for the bridge alone.
    let mut matches = Cli::command()
        .try_get_matches_from(argv(&["--parent-tool-bridge", "{}"]))
        .unwrap();
    let whole = Cli::from_arg_matches_mut(&mut matches).unwrap();
    assert_eq!(
        format!(
            "{:?}",
            parent_tool_dispatch::cli::DispatchArgs::with_bridge("{}".into())
        ),
        format!("{:?}", whole.dispatch)
    );
    let left: &[&[&str]] = &[
        &["validate", "bridge"],
        &["help"],
        &["--help"],
        &["-h"],
        &["--version"],
        &["-V"],
        &["valdate"],
        &["__test-adapter"],
        &["--no-such-option"],
        &["--pretty", "adapter", "workspace"],
        &["--kill-grace-ms", "soon"],
        &["a.json", "b.json"],
    ];
    for line in left {
        assert!(main_job_command_line(&argv(line)).is_none(), "{line:?}");
    }
}
