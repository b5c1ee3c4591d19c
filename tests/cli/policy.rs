//! The host policy (SPEC §16) through the binary, with real adapters: routing of one bridge's
//! tools to their own adapters, each key taking effect (the adapter reports its user, its
//! variables, what it can read, write and reach), confinement by default, decisions, load
//! errors with their lines, the options refused beside a policy, `policy check` and `policy
//! explain`, the policy's digest in the envelope and the audit record, and budgets shared by
//! dispatcher processes.

use super::confinement::reached;
use super::*;
use std::os::unix::fs::PermissionsExt;

/// A bridge allowing `tools`, whose own adapter is the test adapter echoing with `bridge` as
/// its last argument (what runs when no entry gives another).
fn bridge_for(tools: &[&str]) -> Value {
    let mut b = bridge(&["echo", "--", "bridge"]);
    b["allowed_tools"] = json!(tools);
    b
}

/// The request for `tool` with `id`.
fn request_for(tool: &str, id: &str) -> Value {
    let mut r = request();
    r["tool"] = json!(tool);
    r["request_id"] = json!(id);
    r["authorization"]["allowed_tools"] = json!([tool]);
    r
}

/// A policy file with `text` in a folder of its own, mode 0600 (the file must be writable by
/// its owner alone).
struct PolicyFile {
    dir: tempfile::TempDir,
    path: PathBuf,
}

impl PolicyFile {
    fn new(text: &str) -> PolicyFile {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        PolicyFile { dir, path }
    }

    fn arg(&self) -> String {
        self.path.display().to_string()
    }

    fn sha256(&self) -> String {
        sha256_hex(std::fs::read(&self.path).unwrap())
    }
}

/// The test adapter's argv as a TOML array: `steps`, then `--` and `marker` (data the adapter
/// reports in `output.argv`, to tell adapters apart).
fn adapter_toml(steps: &[&str], marker: &str) -> String {
    let mut argv: Vec<String> = vec![test_bin().display().to_string(), "adapter".into()];
    argv.extend(steps.iter().map(|s| s.to_string()));
    argv.extend(["--".to_string(), marker.to_string()]);
    let quoted: Vec<String> = argv.iter().map(|a| format!("{a:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

/// One main job under `policy` for `tool`.
fn under(policy: &PolicyFile, tools: &[&str], tool: &str) -> Dispatch {
    Dispatch::with_bridge(bridge_for(tools))
        .request(|r| *r = request_for(tool, "ptr_policy_1"))
        .args(&["--policy", &policy.arg()])
}

/// `policy_invalid` (exit 69, nothing run), with `problem` among the lines on stderr.
#[track_caller]
fn refused_because(run: &Run, problem: &str) {
    run.expect("unavailable", Some("policy_invalid"), 69);
    assert_eq!(run.dispatch()["adapter_started"], false);
    assert!(run.stderr.contains(problem), "{}", run.stderr);
}

/// The marker of the adapter that answered (the last argument it was given).
fn marker(run: &Run) -> String {
    let argv = run.envelope["output"]["argv"].as_array().unwrap();
    argv.last().unwrap().as_str().unwrap().to_string()
}

#[test]
fn two_tools_of_one_bridge_reach_two_adapters_and_the_rest_the_bridges() {
    let text = format!(
        "version = 1\n\n[[tool]]\nmatch = \"workspace.read\"\nadapter = {}\nunconfined = true\n\n\
         [[tool]]\nmatch = \"git.*\"\nadapter = {}\nunconfined = true\n\n[defaults]\nunconfined = true\n",
        adapter_toml(&["echo"], "reader"),
        adapter_toml(&["echo"], "git"),
    );
    let policy = PolicyFile::new(&text);
    let tools = ["workspace.read", "git.status", "workspace.search"];
    let read = under(&policy, &tools, "workspace.read").run();
    read.expect("succeeded", None, 0);
    assert_eq!(marker(&read), "reader");
    assert_eq!(
        read.dispatch()["policy"],
        json!({"sha256": policy.sha256(), "entry": "workspace.read", "line": 3})
    );
    let git = under(&policy, &tools, "git.status").run();
    git.expect("succeeded", None, 0);
    assert_eq!(marker(&git), "git");
    assert_eq!(git.dispatch()["policy"]["entry"], "git.*");
    assert_eq!(git.dispatch()["policy"]["line"], 8);
    // No entry: the bridge's own adapter under [defaults].
    let other = under(&policy, &tools, "workspace.search").run();
    other.expect("succeeded", None, 0);
    assert_eq!(marker(&other), "bridge");
    assert_eq!(
        other.dispatch()["policy"],
        json!({"sha256": policy.sha256(), "entry": "defaults", "line": 13})
    );
    // Unconfined, as the file says.
    assert!(read.dispatch().get("confinement").is_none());
}

#[test]
fn an_exact_id_beats_patterns_and_the_longer_prefix_wins() {
    let entry = |pattern: &str, name: &str| {
        format!(
            "[[tool]]\nmatch = \"{pattern}\"\nadapter = {}\nunconfined = true\n",
            adapter_toml(&["echo"], name)
        )
    };
    let text = format!(
        "version = 1\n{}{}{}{}",
        entry("*", "star"),
        entry("git.*", "git"),
        entry("git.commit", "commit"),
        entry("git.com*", "com")
    );
    let policy = PolicyFile::new(&text);
    let tools = ["git.commit", "git.commits.list", "git.status", "mcp.x"];
    for (tool, want) in [
        ("git.commit", "commit"),
        ("git.commits.list", "com"),
        ("git.status", "git"),
        ("mcp.x", "star"),
    ] {
        let run = under(&policy, &tools, tool).run();
        run.expect("succeeded", None, 0);
        assert_eq!(marker(&run), want, "{tool}");
        assert_eq!(run.stderr, "");
    }
}

#[test]
fn a_policy_narrows_and_never_widens_the_bridge() {
    let text = "version = 1\n[[tool]]\nmatch = \"*\"\nunconfined = true\n";
    let policy = PolicyFile::new(text);
    // The bridge does not allow workspace.write: the entry matching it changes nothing.
    let run = under(&policy, &["workspace.read"], "workspace.write").run();
    run.expect("denied", Some("tool_not_allowed"), 77);
    assert_eq!(run.dispatch()["adapter_started"], false);
    assert!(run.dispatch().get("policy").is_none());
}

#[test]
fn deny_is_tool_denied_by_policy_and_starts_nothing() {
    let text = "version = 1\n[defaults]\nunconfined = true\n\n[[tool]]\nmatch = \"git.push\"\n\
                decision = \"deny\"\n";
    let policy = PolicyFile::new(text);
    let run = under(&policy, &["git.push"], "git.push").run();
    run.expect("denied", Some("tool_denied_by_policy"), 77);
    assert_eq!(run.envelope["error"]["retryable"], false);
    assert_eq!(
        run.envelope["error"]["message"],
        "the host's policy denies the tool git.push"
    );
    assert_eq!(run.dispatch()["adapter_started"], false);
    assert_eq!(
        run.dispatch()["policy"],
        json!({"sha256": policy.sha256(), "entry": "git.push", "line": 5})
    );
    assert!(
        run.stderr.contains(
            "error[tool_denied_by_policy]: the host policy denies git.push: the entry \
             \"git.push\" (line 5) says decision = \"deny\""
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn confined_by_default_with_the_entrys_grants() {
    require!(confinable());
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("allowed"), "readable\n").unwrap();
    give_to_adapter(work.path());
    let secret = tempfile::tempdir().unwrap();
    let key = secret.path().join("host-key");
    std::fs::write(&key, "-----BEGIN PRIVATE KEY-----\n").unwrap();
    std::fs::set_permissions(secret.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let steps = [
        "creds".to_string(),
        format!("read-file:{}", key.display()),
        format!("read-file:{}", work.path().join("allowed").display()),
        format!("write-file:{}", work.path().join("written").display()),
        "echo".to_string(),
    ];
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    // No confinement key at all for `workspace.read`; a grant for `workspace.write`.
    let text = format!(
        "version = 1\n[[tool]]\nmatch = \"workspace.read\"\nadapter = {}\n\n\
         [[tool]]\nmatch = \"workspace.write\"\nadapter = {}\nfs_write = [{:?}]\n",
        adapter_toml(&steps, "read"),
        adapter_toml(&steps, "write"),
        work.path().display().to_string()
    );
    let policy = PolicyFile::new(&text);
    let tools = ["workspace.read", "workspace.write"];
    let eacces = format!("refused({})", libc::EACCES);
    let bare = under(&policy, &tools, "workspace.read").run();
    bare.expect("succeeded", None, 0);
    let (creds, reach): (Vec<String>, Vec<String>) = reached(&bare)
        .into_iter()
        .partition(|line| !line.contains("-file="));
    // The baseline: never root, no capability in any set, no_new_privs.
    let uid = adapter_uid();
    let zero = "0000000000000000";
    for want in [
        format!("Uid={uid} {uid} {uid} {uid}"),
        format!("CapPrm={zero}"),
        format!("CapEff={zero}"),
        format!("CapBnd={zero}"),
        format!("CapAmb={zero}"),
        "NoNewPrivs=1".to_string(),
    ] {
        assert!(creds.contains(&want), "{want} not in {creds:?}");
    }
    // A file-mode-readable file outside the base is refused, and so is the folder no entry
    // granted.
    assert_eq!(
        reach,
        [
            format!("read-file={eacces}"),
            format!("read-file={eacces}"),
            format!("write-file={eacces}"),
        ]
    );
    let confinement = &bare.dispatch()["confinement"];
    let mechanisms = confinement["mechanisms"].as_array().unwrap();
    for mechanism in [
        "pid_namespace",
        "no_privileges",
        "no_new_privs",
        "landlock",
        "seccomp",
    ] {
        assert!(mechanisms.contains(&json!(mechanism)), "{confinement}");
    }
    assert_eq!(confinement["run_as"]["uid"], adapter_uid());
    assert_eq!(confinement["network"], "any");
    let granted = under(&policy, &tools, "workspace.write").run();
    granted.expect("succeeded", None, 0);
    let reach: Vec<String> = reached(&granted)
        .into_iter()
        .filter(|line| line.contains("-file="))
        .collect();
    assert_eq!(
        reach,
        [
            format!("read-file={eacces}"),
            "read-file=ok".to_string(),
            "write-file=ok".to_string(),
        ]
    );
    assert!(work.path().join("written").exists());
}

#[test]
fn each_key_takes_effect() {
    require!(confinable());
    require!(skip::cgroup(Controller::Memory));
    require!(skip::cgroup(Controller::Pids));
    let cwd = tempfile::tempdir().unwrap();
    std::fs::set_permissions(cwd.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let readable = tempfile::tempdir().unwrap();
    std::fs::set_permissions(readable.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = readable.path().join("data");
    std::fs::write(&data, "granted\n").unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o644)).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let steps = [
        format!("connect:127.0.0.1:{port}"),
        "fork-many:8".to_string(),
        format!("read-file:{}", data.display()),
        "echo".to_string(),
    ];
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let text = format!(
        "version = 1\n[defaults]\nnetwork = \"none\"\nlimit_pids = 4\ntimeout_ms = 7000\n\
         pass_env = [\"PTD_POLICY_PASSED\"]\n\n[[tool]]\nmatch = \"workspace.read\"\n\
         adapter = {}\ncwd = {:?}\nsecret_env = [\"PTD_POLICY_SECRET\"]\nlimit_open_files = 64\n\
         fs_read = [{:?}]\nrun_as = \"{}\"\nlimit_memory = \"256M\"\nlimit_file_size = \"1M\"\n",
        adapter_toml(&steps, "keys"),
        cwd.path().display().to_string(),
        readable.path().display().to_string(),
        adapter_uid()
    );
    let policy = PolicyFile::new(&text);
    let run = under(&policy, &["workspace.read"], "workspace.read")
        .env("PTD_POLICY_PASSED", "passed-value")
        .env("PTD_POLICY_SECRET", "s3cr3t-policy-value")
        .env("PTD_POLICY_NOT_PASSED", "nope")
        .run();
    run.expect("succeeded", None, 0);
    let reach = reached(&run);
    // network = "none" (from [defaults]): no route even to the host's loopback.
    assert!(reach[0].starts_with("connect=refused("), "{reach:?}");
    // limit_pids = 4: the forks stop.
    assert!(reach[1].starts_with("fork-many=refused("), "{reach:?}");
    // fs_read: the granted file is read.
    assert_eq!(reach[2], "read-file=ok", "{reach:?}");
    let output = &run.envelope["output"];
    let env = output["env"].as_object().unwrap();
    assert_eq!(env["PTD_POLICY_PASSED"], "passed-value");
    // The secret reached the adapter and nothing that left: it is scrubbed.
    assert!(env.contains_key("PTD_POLICY_SECRET"));
    assert!(!run.stdout.contains("s3cr3t-policy-value"));
    assert!(!env.contains_key("PTD_POLICY_NOT_PASSED"));
    // cwd: the adapter ran there.
    assert_eq!(output["cwd"], cwd.path().display().to_string());
    assert_eq!(env["WP_CODEBOX_PARENT_TOOL_TIMEOUT_MS"], "7000");
    assert_eq!(run.dispatch()["timeout_ms"], 7000);
    let confinement = &run.dispatch()["confinement"];
    assert_eq!(confinement["network"], "none");
    assert_eq!(confinement["run_as"]["uid"], adapter_uid());
    assert_eq!(
        confinement["limits"],
        json!({"memory_bytes": 256 << 20, "pids": 4, "open_files": 64, "file_size_bytes": 1 << 20})
    );
    assert_eq!(
        confinement["landlock"]["fs_read"].as_array().map(Vec::len),
        Some(1)
    );
}

#[test]
fn the_policys_timeout_stops_the_adapter() {
    let text = format!(
        "version = 1\n[[tool]]\nmatch = \"workspace.read\"\nadapter = {}\ntimeout_ms = 300\n\
         unconfined = true\n",
        adapter_toml(&["sleep:20000", "echo"], "slow")
    );
    let policy = PolicyFile::new(&text);
    let run = under(&policy, &["workspace.read"], "workspace.read").run();
    run.expect("timeout", Some("dispatch_timeout"), 124);
    assert_eq!(run.dispatch()["timeout_ms"], 300);
    assert!(run.elapsed < Duration::from_secs(15), "{:?}", run.elapsed);
}

#[test]
fn an_invalid_policy_is_policy_invalid_with_every_problem_and_its_line() {
    let text = "version = 1\n[defaults]\nlimit_pids = \"many\"\nnetwrk = \"none\"\n\n\
                [[tool]]\nmatch = \"a\"\ndecision = \"maybe\"\n";
    let policy = PolicyFile::new(text);
    let run = under(&policy, &["workspace.read"], "workspace.read").run();
    run.expect("unavailable", Some("policy_invalid"), 69);
    assert_eq!(run.dispatch()["adapter_started"], false);
    assert_eq!(
        run.envelope["error"]["message"],
        "the host's policy cannot be used (3 problems), so nothing was run; the host's \
         `parent-tool-dispatch policy check` lists them"
    );
    // The envelope names no host path; stderr names the file, each problem at its line.
    assert!(!run.stdout.contains(&policy.arg()));
    let file = policy.arg();
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stderr);
    assert!(lines[0].starts_with(&format!(
        "error[policy_invalid]: the host policy cannot be used, nothing was run: {file}:3:14: "
    )));
    assert!(lines[0].ends_with("(and 2 more, below)"), "{}", lines[0]);
    assert_eq!(
        lines[1],
        format!("  note: {file}:4:1: unknown key `netwrk` in [defaults]: did you mean `network`?")
    );
    assert_eq!(
        lines[2],
        format!("  note: {file}:8:12: `decision`: `maybe` is not one of allow, ask, deny")
    );
}

#[test]
fn a_policy_another_user_can_write_is_refused() {
    let policy = PolicyFile::new("version = 1\n");
    std::fs::set_permissions(&policy.path, std::fs::Permissions::from_mode(0o620)).unwrap();
    let run = under(&policy, &["workspace.read"], "workspace.read").run();
    refused_because(
        &run,
        &format!(
            "{}:1:1: the policy file is writable by its group (mode 620): only its owner may \
         write it",
            policy.arg()
        ),
    );
    // A folder others may write lets them replace the file: refused, unless it is sticky.
    std::fs::set_permissions(&policy.path, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(policy.dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let run = under(&policy, &["workspace.read"], "workspace.read").run();
    refused_because(
        &run,
        &format!(
            "{}:1:1: the policy file's folder is writable by others (mode 777): they could \
         replace the file",
            policy.arg()
        ),
    );
    std::fs::set_permissions(policy.dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let file = policy.arg();
    Cmd::new(["policy", "check", &file])
        .run()
        .exit(0)
        .stdout_contains(": valid, 0 [[tool]] entries")
        .stderr_empty();
    std::fs::set_permissions(policy.dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    // A missing file, a folder, a FIFO: each refused the same way, nothing run.
    let fifo = policy.dir.path().join("fifo.toml");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    for path in [
        policy.dir.path().join("missing.toml"),
        policy.dir.path().to_path_buf(),
        fifo,
    ] {
        let run = Dispatch::with_bridge(bridge_for(&["workspace.read"]))
            .args(&["--policy", &path.display().to_string()])
            .run();
        run.expect("unavailable", Some("policy_invalid"), 69);
        assert!(
            run.stderr.contains("the policy file cannot be read"),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn a_timeout_above_the_bridges_is_found_once_the_bridge_is_read() {
    let text = "version = 1\n[defaults]\nunconfined = true\ntimeout_ms = 60000\n";
    let policy = PolicyFile::new(text);
    let run = under(&policy, &["workspace.read"], "workspace.read").run();
    refused_because(
        &run,
        &format!(
            "{}:4:14: `timeout_ms` = 60000 is above the bridge's dispatcher.timeout_ms (20000)",
            policy.arg()
        ),
    );
}

#[test]
fn ask_an_allow_list_and_a_ledger_url_load_and_a_bad_url_is_refused_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.db");
    let text = format!(
        "version = 1\n[ledger]\npath = {:?}\n[[tool]]\nmatch = \"a\"\ndecision = \"ask\"\n\
         [[tool]]\nmatch = \"b\"\nnetwork = {{ allow = [\"api.example.com:443\"] }}\n",
        ledger.display().to_string()
    );
    let policy = PolicyFile::new(&text);
    let file = policy.arg();
    Cmd::new(["policy", "check", &file])
        .run()
        .exit(0)
        .stdout_contains("valid")
        .stderr_empty();
    // A PostgreSQL ledger (SPEC §19.1) is a URL; one it cannot use is refused at its line,
    // never quoting a password.
    let url = PolicyFile::new("version = 1\n[ledger]\npath = \"postgres://ptd@db.internal/ptd\"\n");
    let file = url.arg();
    Cmd::new(["policy", "check", &file])
        .run()
        .exit(0)
        .stdout_contains("valid")
        .stderr_empty();
    let bad = PolicyFile::new("version = 1\n[ledger]\npath = \"postgres://ptd:pw-4242@db/ptd\"\n");
    let file = bad.arg();
    Cmd::new(["policy", "check", &file])
        .run()
        .exit(65)
        .stdout_empty()
        .stderr_starts_with(format!("error[policy]: {file}:3:8: `[ledger] path`: "))
        .stderr_lacks("pw-4242");
    assert!(!ledger.exists());
}

#[test]
fn options_the_policy_holds_are_usage_errors_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "version = 1\n[ledger]\npath = {:?}\nsession_env = \"PTD_POLICY_SESSION\"\n\
         [defaults]\nsecret_env = [\"X_TOKEN\"]\nunconfined = true\n",
        dir.path().join("l.db").display().to_string()
    );
    let policy = PolicyFile::new(&text);
    // (arguments, variables, the usage error's start)
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 8] = [
        (
            &["--fs-read", "/usr"],
            &[],
            "--fs-read cannot be used with --policy: the policy confines each tool; write it as \
             `fs_read` in the policy's [defaults] or the tool's entry",
        ),
        (
            &[],
            &[("PARENT_TOOL_DISPATCH_NETWORK", "none")],
            "PARENT_TOOL_DISPATCH_NETWORK cannot be used with --policy",
        ),
        (
            &["--budget-calls", "3"],
            &[],
            "--budget-calls (or PARENT_TOOL_DISPATCH_BUDGET_CALLS) cannot be used with --policy: \
             the policy keeps the budgets; write it as [ledger] budget_calls",
        ),
        (
            &[],
            &[("PARENT_TOOL_DISPATCH_MAX_CONCURRENT", "2")],
            "--max-concurrent (or PARENT_TOOL_DISPATCH_MAX_CONCURRENT) cannot be used with \
             --policy",
        ),
        (
            &["--ledger", "/tmp/other.db"],
            &[],
            "--ledger (or PARENT_TOOL_DISPATCH_LEDGER) cannot be used with this policy: it sets \
             [ledger] path itself",
        ),
        (
            &["--session", "sandbox_123"],
            &[],
            "--session (or PARENT_TOOL_DISPATCH_SESSION) cannot be used with this policy: it \
             sets [ledger] session_env itself",
        ),
        (
            &["--secret-env", "OTHER"],
            &[],
            "--secret-env cannot be used with this policy: it sets secret_env itself",
        ),
        (
            &[],
            &[],
            "the policy's [ledger] session_env names PTD_POLICY_SESSION, which is not set: the \
             host's session comes from it",
        ),
    ];
    for (args, env, message) in cases {
        let mut run = under(&policy, &["workspace.read"], "workspace.read").args(args);
        // The host's session is set for every case but the last, which is about it.
        if !(args.is_empty() && env.is_empty()) {
            run = run.env("PTD_POLICY_SESSION", "sandbox_123");
        }
        for (name, value) in env {
            run = run.env(name, value);
        }
        let run = run.run();
        run.output()
            .exit(2)
            .stdout_empty()
            .stderr_starts_with(format!("error[usage]: {message}"));
        assert!(!dir.path().join("l.db").exists(), "{message}");
    }
}

#[test]
fn policy_check_reports_problems_lints_and_a_summary() {
    let good = PolicyFile::new(
        "version = 1\n[defaults]\nnetwork = \"none\"\n[[tool]]\nmatch = \"workspace.*\"\n\
         [[tool]]\nmatch = \"mcp.run\"\nunconfined = true\n",
    );
    let file = good.arg();
    let bridge = bridge_for(&["workspace.read", "git.status"]).to_string();
    let summary = format!(
        "{file}: valid, 2 [[tool]] entries, sha256 {}\n",
        good.sha256()
    );
    // Without a bridge: only what the file alone says.
    Cmd::new(["policy", "check", &file])
        .run()
        .exit(0)
        .stdout_eq(&summary)
        .stderr_eq(format!(
            "warning[policy]: {file}:8:1: `unconfined = true`: the entry `mcp.run` runs its \
             adapter without confinement (SPEC §13.2)\n"
        ));
    let lints = format!(
        "warning[policy]: {file}:1:1: the bridge allows `git.status`, which no entry covers: it \
         runs the bridge's dispatcher.command.argv under [defaults]\n\
         warning[policy]: {file}:7:9: `match = \"mcp.run\"` matches no tool the bridge allows\n\
         warning[policy]: {file}:8:1: `unconfined = true`: the entry `mcp.run` runs its adapter \
         without confinement (SPEC §13.2)\n"
    );
    Cmd::new(["policy", "check", &file, "--parent-tool-bridge", &bridge])
        .run()
        .exit(0)
        .stdout_eq(&summary)
        .stderr_eq(&lints);
    Cmd::new([
        "policy",
        "check",
        &file,
        "--parent-tool-bridge",
        &bridge,
        "--strict",
    ])
    .run()
    .exit(65)
    .stdout_eq(&summary)
    .stderr_eq(&lints);
    let bad =
        PolicyFile::new("version = 1\n[[tool]]\nmatch = \"git.*\"\n[[tool]]\nmatch = \"git.*\"\n");
    let file = bad.arg();
    Cmd::new(["policy", "check", &file])
        .run()
        .exit(65)
        .stdout_empty()
        .stderr_eq(format!(
            "error[policy]: {file}:5:9: `match = \"git.*\"` again: the entry at line 2 has the \
             same `match`\n"
        ));
    Cmd::new(["policy", "check", &file, "--parent-tool-bridge", "{"])
        .run()
        .exit(65)
        .stdout_empty()
        .stderr_starts_with("error[bridge_invalid]: ");
    Cmd::new(["policy", "check"])
        .run()
        .exit(2)
        .stdout_empty()
        .stderr_contains("FILE");
}

#[test]
fn policy_explain_says_what_the_main_job_would_do_and_runs_nothing() {
    let flag = tempfile::tempdir().unwrap();
    let touched = flag.path().join("touched");
    let steps = [
        format!("write-file:{}", touched.display()),
        "echo".to_string(),
    ];
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let text = format!(
        "version = 1\n[defaults]\nnetwork = \"none\"\nlimit_memory = \"256M\"\n\
         [[tool]]\nmatch = \"workspace.*\"\nadapter = {}\nsecret_env = [\"PTD_EXPLAIN_TOKEN\"]\n\
         [[tool]]\nmatch = \"git.push\"\ndecision = \"deny\"\n",
        adapter_toml(&steps, "ws")
    );
    let policy = PolicyFile::new(&text);
    let bridge = bridge_for(&["workspace.read", "git.push"]).to_string();
    let explain = |tool: &str, json: bool| {
        let mut cmd = Cmd::new(["policy", "explain", "--policy", &policy.arg()])
            .args(["--parent-tool-bridge", &bridge])
            .env("PTD_EXPLAIN_TOKEN", "tok-value-123")
            .stdin(request_for(tool, "ptr_explain").to_string());
        if json {
            cmd = cmd.arg("--json");
        }
        cmd.run()
    };
    let out = explain("workspace.read", true);
    out.exit(0).stderr_empty();
    let report = out.json();
    assert_eq!(report["schema"], "parent-tool-dispatch/policy-explain/v1");
    assert_eq!(report["policy"]["sha256"], policy.sha256());
    assert_eq!(report["entry"], json!({"match": "workspace.*", "line": 5}));
    assert_eq!(
        report["decision"],
        json!({"runs": true, "code": null, "replays": false})
    );
    assert_eq!(report["adapter"]["argv"][2], steps[0]);
    assert_eq!(report["adapter"]["timeout_ms"], 20000);
    let vars = report["adapter"]["variables"].as_array().unwrap();
    assert!(vars.contains(&json!("PTD_EXPLAIN_TOKEN")));
    assert_eq!(
        report["adapter"]["secret_variables"],
        json!(["PTD_EXPLAIN_TOKEN"])
    );
    out.stdout_with(|text| assert!(!text.contains("tok-value-123"), "{text}"));
    assert_eq!(report["confinement"]["network"], "none");
    assert_eq!(report["confinement"]["limits"]["memory_bytes"], 256 << 20);
    let checks: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["result"].as_str().unwrap())
        .collect();
    assert_eq!(
        checks,
        [
            "passed",
            "passed",
            "passed",
            "passed",
            "not_asked",
            "passed"
        ]
    );
    let denied = explain("git.push", false);
    denied
        .exit(0)
        .stderr_empty()
        .stdout_contains("entry: git.push at line 9\n")
        .stdout_contains("check decision: denied\n")
        .stdout_contains("decision: does not run: tool_denied_by_policy\n");
    let text = explain("workspace.read", false);
    text.exit(0)
        .stderr_empty()
        .stdout_contains("decision: runs the adapter\n")
        .stdout_contains("confinement: run as ")
        .stdout_contains("secret variables: PTD_EXPLAIN_TOKEN\n")
        .stdout_lacks("tok-value-123");
    // Nothing ran: the adapter's file was never written.
    assert!(!touched.exists());
    // A request that is not one: exit 65, the reason on stderr.
    Cmd::new(["policy", "explain", "--policy", &policy.arg()])
        .args(["--parent-tool-bridge", &bridge])
        .stdin("{}")
        .run()
        .exit(65)
        .stdout_contains("check request: failed\n")
        .stderr_starts_with("error[request_invalid]: ");
}

#[test]
fn the_audit_record_names_the_policy_and_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.db");
    let text = format!(
        "version = 1\n[ledger]\npath = {:?}\n[defaults]\nunconfined = true\n\
         [[tool]]\nmatch = \"git.push\"\ndecision = \"deny\"\n",
        ledger.display().to_string()
    );
    let policy = PolicyFile::new(&text);
    let tools = ["workspace.read", "git.push"];
    under(&policy, &tools, "workspace.read")
        .run()
        .expect("succeeded", None, 0);
    under(&policy, &tools, "git.push")
        .request(|r| *r = request_for("git.push", "ptr_policy_2"))
        .run()
        .expect("denied", Some("tool_denied_by_policy"), 77);
    let out = Cmd::new(["audit", "export", "--ledger", &ledger.display().to_string()]).run();
    out.exit(0).stderr_empty();
    let mut records: Vec<Value> = Vec::new();
    out.stdout_with(|text| {
        records = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
    });
    assert_eq!(records.len(), 2);
    assert_eq!(
        records[0]["policy"],
        json!({"sha256": policy.sha256(), "entry": "defaults", "line": 4})
    );
    assert_eq!(records[0]["rule"], "bridge.allowed_tools");
    assert_eq!(
        records[1]["policy"],
        json!({"sha256": policy.sha256(), "entry": "git.push", "line": 6})
    );
    assert_eq!(records[1]["rule"], "policy");
    assert_eq!(records[1]["decision"], "deny");
}

#[test]
fn a_policys_budgets_are_shared_by_every_dispatcher_process() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.db");
    let text = format!(
        "version = 1\n[ledger]\npath = {:?}\nsession_env = \"PTD_POLICY_SESSION\"\n\
         budget_calls = 3\n[defaults]\nunconfined = true\n\
         [[tool]]\nmatch = \"git.*\"\nbudget_calls = 1\n",
        ledger.display().to_string()
    );
    let policy = PolicyFile::new(&text);
    let tools = ["workspace.read", "git.status", "git.diff"];
    let call = |tool: &str, id: &str| {
        under(&policy, &tools, tool)
            .request(|r| *r = request_for(tool, id))
            .env("PTD_POLICY_SESSION", "sandbox_123")
            .run()
    };
    call("git.status", "ptr_b1").expect("succeeded", None, 0);
    // `budget_calls` of an entry counts per tool: git.diff has its own.
    call("git.diff", "ptr_b2").expect("succeeded", None, 0);
    let over = call("git.status", "ptr_b3");
    over.expect("denied", Some("budget_exhausted"), 77);
    assert_eq!(
        over.envelope["error"]["details"],
        json!({"budget": "tool", "limit": 1, "used": 1, "tool": "git.status"})
    );
    call("workspace.read", "ptr_b4").expect("succeeded", None, 0);
    // The session's budget of 3 admitted calls is spent.
    let spent = call("workspace.read", "ptr_b5");
    spent.expect("denied", Some("budget_exhausted"), 77);
    assert_eq!(spent.envelope["error"]["details"]["budget"], "calls");
    // Another session has its own.
    under(&policy, &tools, "workspace.read")
        .request(|r| {
            *r = request_for("workspace.read", "ptr_b6");
            r["sandbox_session"]["sandbox_session_id"] = json!("sandbox_other");
        })
        .env("PTD_POLICY_SESSION", "sandbox_other")
        .run()
        .expect("succeeded", None, 0);
    // explain reads the same counters without changing them: twice, the same report.
    let explain = || {
        let out = Cmd::new(["policy", "explain", "--policy", &policy.arg()])
            .args([
                "--parent-tool-bridge",
                &bridge_for(&tools).to_string(),
                "--json",
            ])
            .env("PTD_POLICY_SESSION", "sandbox_123")
            .stdin(request_for("git.status", "ptr_b7").to_string())
            .run();
        out.exit(0).stderr_empty();
        out.json()
    };
    let report = explain();
    assert_eq!(
        report["decision"],
        json!({"runs": false, "code": "budget_exhausted", "replays": false})
    );
    assert_eq!(report["ledger"]["durability"], "full");
    assert_eq!(
        report["ledger"]["budgets"],
        json!([
            {"budget": "calls", "limit": 3, "used": 3, "left": 0},
            {"budget": "tool", "limit": 1, "used": 1, "left": 0, "tool": "git.status"},
        ])
    );
    assert_eq!(explain(), report);
}

/// The tools and `match` patterns the property draws from: exact ids, prefixes, the catch-all.
const TOOLS: [&str; 5] = ["a.b", "a.c", "a.b.d", "b.x", "c"];
const PATTERNS: [&str; 7] = ["a.b", "a.*", "a.b*", "*", "b.*", "c", "a.b.d"];

mod explain_property {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// `policy explain` says what the main job then does, for any policy of allow and
        /// deny entries, any bridge allowlist and any tool: the same deciding entry (and line),
        /// whether the adapter runs, and the code when it does not.
        #[test]
        fn explain_decides_as_the_main_job(
            entries in proptest::sample::subsequence(PATTERNS.to_vec(), 0..=PATTERNS.len()),
            denies in proptest::collection::vec(any::<bool>(), PATTERNS.len()),
            allowed in proptest::sample::subsequence(TOOLS.to_vec(), 1..=TOOLS.len()),
            tool in proptest::sample::select(TOOLS.to_vec()),
        ) {
            let mut text = String::from("version = 1\n[defaults]\nunconfined = true\n");
            for (pattern, deny) in entries.iter().zip(&denies) {
                let decision = if *deny { "deny" } else { "allow" };
                text.push_str(&format!(
                    "[[tool]]\nmatch = \"{pattern}\"\ndecision = \"{decision}\"\n"
                ));
            }
            let policy = PolicyFile::new(&text);
            let bridge = bridge_for(&allowed);
            let explained = Cmd::new(["policy", "explain", "--policy", &policy.arg(), "--json"])
                .args(["--parent-tool-bridge", &bridge.to_string()])
                .stdin(request_for(tool, "ptr_prop").to_string())
                .run();
            explained.exit(0).stderr_empty();
            let report = explained.json();
            let run = under(&policy, &allowed, tool).run();
            let ran = run.dispatch()["adapter_started"] == json!(true);
            prop_assert_eq!(&report["decision"]["runs"], &json!(ran), "{}", run.stdout);
            if ran {
                run.expect("succeeded", None, 0);
                prop_assert_eq!(&report["decision"]["code"], &Value::Null);
            } else {
                let code = run.code().to_string();
                run.expect("denied", Some(&code), 77);
                prop_assert_eq!(&report["decision"]["code"], &json!(code));
            }
            let entry = run.dispatch().get("policy").map(|p| json!({"match": p["entry"], "line": p["line"]}));
            prop_assert_eq!(&report["entry"], &entry.unwrap_or(Value::Null));
        }
    }
}

#[test]
fn an_oversized_policy_is_refused_unread_and_many_entries_are_bounded() {
    // 10 MiB: refused before it is read (the most read is 1 MiB).
    let big = PolicyFile::new(&format!("version = 1\n#{}\n", "x".repeat(10 << 20)));
    let run = under(&big, &["workspace.read"], "workspace.read").run();
    refused_because(
        &run,
        &format!(
            "{}:1:1: the policy file is larger than 1048576 bytes (1 MiB), the most read",
            big.arg()
        ),
    );
    // 30,000 entries in under 1 MiB: one problem at the 1,001st, the rest not read further.
    let mut text = String::from("version = 1\n");
    for i in 0..30_000 {
        text.push_str(&format!("[[tool]]\nmatch=\"t{i}\"\n"));
    }
    assert!(text.len() < 1 << 20);
    let many = PolicyFile::new(&text);
    let file = many.arg();
    Cmd::new(["policy", "check", &file])
        .watchdog(Duration::from_secs(60))
        .run()
        .exit(65)
        .stdout_empty()
        .stderr_eq(format!(
            "error[policy]: {file}:2002:1: more than 1000 [[tool]] entries: the most a policy \
             may have\n"
        ));
}

#[test]
fn a_policy_owned_by_another_user_is_refused() {
    require!(skip::root());
    let policy = PolicyFile::new("version = 1\n");
    rustix::fs::chown(
        &policy.path,
        Some(rustix::fs::Uid::from_raw(65534)),
        Some(rustix::fs::Gid::from_raw(65534)),
    )
    .unwrap();
    let file = policy.arg();
    Cmd::new(["policy", "check", &file])
        .run()
        .exit(65)
        .stdout_empty()
        .stderr_eq(format!(
            "error[policy]: {file}:1:1: the policy file belongs to uid 65534, another user than \
             root or this dispatcher (uid 0), who could write it\n"
        ));
}

#[test]
fn a_missing_adapter_program_is_adapter_not_found_under_a_policy_too() {
    require!(confinable());
    let text = "version = 1\n[[tool]]\nmatch = \"workspace.read\"\n\
                adapter = [\"/nonexistent/ptd-policy-adapter\"]\n";
    let policy = PolicyFile::new(text);
    let run = under(&policy, &["workspace.read"], "workspace.read").run();
    // Confined (the policy's default), the missing program is what it is: not found.
    run.expect("unavailable", Some("adapter_not_found"), 69);
    assert_eq!(run.dispatch()["adapter_started"], false);
    assert!(
        run.stderr
            .contains("the adapter program /nonexistent/ptd-policy-adapter was not found"),
        "{}",
        run.stderr
    );
}
