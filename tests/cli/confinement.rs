//! Confinement (SPEC §13) through the binary, on the real kernel (Landlock ABI 6+, seccomp,
//! network namespaces, the cgroup v1 `memory` and `pids` controllers, as root): an adapter
//! that tries each forbidden thing reports what the kernel answered; each limit is hit and
//! named; a host that cannot do what was asked fails closed; bad options are usage errors.

use super::host_reach::dispatcher_as_nobody;
use super::*;
use std::os::linux::net::SocketAddrExt;

/// What the adapter reported on its `host-reach:` lines (from the envelope's stderr tail).
pub(crate) fn reached(run: &Run) -> Vec<String> {
    run.dispatch()["stderr_tail"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.strip_prefix("host-reach: "))
        .map(str::to_string)
        .collect()
}

/// A folder the adapter may write (`--fs-write`), with a file in it. A root dispatcher's
/// adapter runs as `nobody` (SPEC §13.2) and file modes still apply under a grant: the folder
/// is given to the adapter's user.
fn work() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("allowed"), "readable\n").unwrap();
    give_to_adapter(dir.path());
    dir
}

/// A file outside everything granted.
fn secret() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("host-key");
    std::fs::write(&file, "-----BEGIN PRIVATE KEY-----\n").unwrap();
    (dir, file)
}

/// `diagnostics.dispatch.confinement.mechanisms` of a confined run: `first` (cgroup, rlimits),
/// then what every confined run has (SPEC §13.2), with the network namespace when asked.
fn in_force(first: &[&str], network_none: bool) -> Value {
    let mut all: Vec<&str> = first.to_vec();
    if !rustix::process::geteuid().is_root() {
        all.push("user_namespace");
    }
    all.push("pid_namespace");
    if network_none {
        all.push("network_namespace");
    }
    all.extend(["no_privileges", "no_new_privs", "landlock", "seccomp"]);
    json!(all)
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn landlock_and_seccomp_refuse_what_is_not_granted_and_allow_what_is() {
    require!(confinable());
    let work = work();
    let (_outside, secret) = secret();
    let name = format!("ptd-confinement-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let _bus = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    let allowed = work.path().join("allowed");
    let written = work.path().join("written");
    let outside_write = secret.with_file_name("planted");
    let steps = [
        format!("read-file:{}", path(&secret)),
        format!("write-file:{}", path(&outside_write)),
        format!("abstract-connect:{name}"),
        // SIGCONT: harmless if it got through; the scope refuses it before delivery.
        "signal-parent:18".to_string(),
        "keyctl".to_string(),
        format!("read-file:{}", path(&allowed)),
        format!("write-file:{}", path(&written)),
        "read-file:/etc/passwd".to_string(),
        "read-file:/etc/shadow".to_string(),
        "echo".to_string(),
    ];
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let run = Dispatch::adapter(&steps)
        .args(&["--fs-write", &path(work.path())])
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(run.stderr, "");
    let eacces = format!("refused({})", libc::EACCES);
    let eperm = format!("refused({})", libc::EPERM);
    assert_eq!(
        reached(&run),
        vec![
            format!("read-file={eacces}"),
            format!("write-file={eacces}"),
            format!("abstract-connect={eperm}"),
            format!("signal-parent={eperm}"),
            format!("keyctl={eperm}"),
            "read-file=ok".to_string(),
            "write-file=ok".to_string(),
            "read-file=ok".to_string(),
            format!("read-file={eacces}"),
        ]
    );
    assert!(!outside_write.exists());
    assert!(written.exists());
    let confinement = &run.dispatch()["confinement"];
    assert_eq!(confinement["mechanisms"], in_force(&[], false));
    assert!(confinement["landlock"]["abi"].as_u64().unwrap() >= 6);
    assert_eq!(confinement["landlock"]["scoped"], true);
    assert_eq!(confinement["network"], "any");
    assert_eq!(confinement["limits"], json!({}));
    // The listed path is a host path: redacted in the dispatcher's own report.
    let text = run.dispatch().to_string();
    assert!(!text.contains(&path(work.path())), "{text}");
    assert_eq!(
        confinement["landlock"]["fs_write"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// SPEC §13.2: the base of `/etc` is an allow list. With Landlock on for an unrelated folder,
/// the adapter reads `passwd`, `hosts` and a CA bundle of the list, but not `profile` or
/// `environment`, which any Debian has and the first version's deny list let through (the
/// dispatcher runs as root here: only Landlock refuses them).
#[test]
fn the_base_of_etc_is_an_allow_list() {
    require!(confinable());
    let unrelated = work();
    let listed = [
        "/etc/passwd",
        "/etc/hosts",
        "/etc/ssl/certs/ca-certificates.crt",
    ];
    let unlisted = ["/etc/profile", "/etc/environment"];
    for file in listed.iter().chain(&unlisted) {
        assert!(
            Path::new(file).is_file(),
            "this test expects {file} on the host"
        );
    }
    let steps: Vec<String> = listed
        .iter()
        .chain(&unlisted)
        .map(|file| format!("read-file:{file}"))
        .chain(["echo".to_string()])
        .collect();
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let run = Dispatch::adapter(&steps)
        .args(&["--fs-read", &path(unrelated.path())])
        .run();
    run.expect("succeeded", None, 0);
    let eacces = format!("read-file=refused({})", libc::EACCES);
    assert_eq!(
        reached(&run),
        vec![
            "read-file=ok".to_string(),
            "read-file=ok".to_string(),
            "read-file=ok".to_string(),
            eacces.clone(),
            eacces,
        ]
    );
}

/// SPEC §13.2: a grant that covers the ledger's folder — holds it, or lies in it — is a usage
/// error naming the option and the ledger, before anything runs (the ledger is not even made).
#[test]
fn a_grant_covering_the_ledgers_folder_is_a_usage_error() {
    require!(confinable());
    let top = tempfile::tempdir().unwrap();
    let top = top.path().canonicalize().unwrap();
    let state = top.join("state");
    std::fs::create_dir(&state).unwrap();
    let ledger = state.join("ledger.db");
    // Where the adapter may write, beside the ledger's folder.
    let beside = top.join("work");
    std::fs::create_dir(&beside).unwrap();
    give_to_adapter(&beside);
    let pidfile = beside.join("pids");
    let step = format!("pidfile:{}", pidfile.display());
    let refused = |run: Run, flag: &str, grant: &Path, relation: &str| {
        run.output().exit(2).stdout_empty().stderr_eq(format!(
            "error[usage]: {flag}: `{grant}` {relation} the ledger's folder {state} (--ledger \
             `{ledger}`), which is the dispatcher's own: grant folders that neither hold it nor \
             lie in it\n\nFor more information, try '--help'.\n",
            grant = grant.display(),
            state = state.display(),
            ledger = ledger.display(),
        ));
        assert!(!ledger.exists(), "the ledger was made");
        assert!(!pidfile.exists(), "the adapter ran");
    };
    let run = Dispatch::adapter(&[&step, "echo"])
        .args(&["--fs-write", &path(&state), "--ledger", &path(&ledger)])
        .run();
    refused(run, "--fs-write", &state, "lies in");
    let run = Dispatch::adapter(&[&step, "echo"])
        .args(&["--fs-read", &path(&top), "--ledger", &path(&ledger)])
        .run();
    refused(run, "--fs-read", &top, "holds");
    // The ledger from its variable, the grant from its own.
    let run = Dispatch::adapter(&[&step, "echo"])
        .env("PARENT_TOOL_DISPATCH_LEDGER", &path(&ledger))
        .env("PARENT_TOOL_DISPATCH_FS_READ", &path(&top))
        .run();
    run.output()
        .exit(2)
        .stdout_empty()
        .stderr_starts_with(format!(
        "error[usage]: PARENT_TOOL_DISPATCH_FS_READ (--fs-read): `{}` holds the ledger's folder",
        top.display()
    ));
    // A folder beside the ledger's is fine.
    let run = Dispatch::adapter(&[&step, "echo"])
        .args(&["--fs-write", &path(&beside), "--ledger", &path(&ledger)])
        .run();
    run.expect("succeeded", None, 0);
    assert!(ledger.exists() && pidfile.exists());
}

#[test]
fn the_private_tmpdir_is_0700_the_adapters_and_removed_afterwards() {
    require!(confinable());
    let work = work();
    let record = work.path().join("tmpdir");
    let step = format!("tmpdir:{}", path(&record));
    let run = Dispatch::adapter(&[&step, "write-tmp:10", "echo"])
        .args(&["--fs-write", &path(work.path())])
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(reached(&run), vec!["tmpdir-mode=700", "write-tmp=ok"]);
    let tmpdir = PathBuf::from(std::fs::read_to_string(&record).unwrap());
    assert!(
        tmpdir.starts_with(std::env::temp_dir().canonicalize().unwrap()),
        "{tmpdir:?}"
    );
    assert!(!tmpdir.exists(), "the private TMPDIR was left behind");
    assert!(!run.dispatch().to_string().contains(&path(&tmpdir)));
}

#[test]
fn network_none_leaves_no_route_even_to_the_hosts_loopback() {
    require!(confinable());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let step = format!("connect:{}", listener.local_addr().unwrap());
    let confined = Dispatch::adapter(&[&step, "echo"])
        .args(&["--network", "none"])
        .run();
    confined.expect("succeeded", None, 0);
    assert_eq!(
        reached(&confined),
        vec![format!("connect=refused({})", libc::ENETUNREACH)]
    );
    assert_eq!(
        confined.dispatch()["confinement"]["mechanisms"],
        in_force(&[], true)
    );
    assert_eq!(confined.dispatch()["confinement"]["network"], "none");
    // The same adapter unconfined reaches the listener: the refusal was the namespace's.
    let unconfined = Dispatch::adapter(&[&step, "echo"]).run();
    unconfined.expect("succeeded", None, 0);
    assert_eq!(reached(&unconfined), vec!["connect=ok"]);
    assert!(unconfined.dispatch().get("confinement").is_none());
}

#[test]
fn a_chain_forking_into_a_new_session_at_every_step_ends_with_a_confined_call() {
    // Without confinement the sweep can only kill such a chain one process at a time, a race
    // (docs/guide.md); the adapter's PID namespace ends it whole when the adapter exits.
    require!(confinable());
    let name = format!("ptd-chain-{}", std::process::id() % 10_000);
    let run = Dispatch::adapter(&[
        &format!("session-chain:10000:{name}"),
        "sleep:100",
        &format!("named:{name}"),
        "echo",
    ])
    .args(&["--network", "none"])
    .run();
    run.expect("succeeded", None, 0);
    // The chain ran: the adapter saw it in its own /proc just before it ended.
    let seen = reached(&run);
    assert!(
        seen.len() == 1 && seen[0] != "named=0",
        "the chain did not run: {seen:?}"
    );
    let left = ptd_testkit::procs::live_named(&name);
    for pid in &left {
        // SAFETY: a kill of a test's own leftover; nothing else bears this name.
        unsafe {
            libc::kill(*pid, libc::SIGKILL);
        }
    }
    assert!(left.is_empty(), "the chain outlived the call: {left:?}");
}

#[test]
fn a_confined_adapters_descendants_end_with_it_and_get_no_window() {
    // docs/confinement.md: unconfined, a descendant holding the pipes gets 100 ms after the
    // adapter's end (`hostile::grandchildren_holding_pipes_are_counted_as_leaked`); confined,
    // the namespace ends with the adapter, at once: the line the descendant would write
    // 80 ms later never comes, and nothing is counted.
    require!(confinable());
    let confined = Dispatch::adapter(&["spawn:sleep:80+eprint:LATE-LINE", "echo"])
        .args(&["--network", "none"])
        .run();
    confined.expect("succeeded", None, 0);
    assert_eq!(confined.dispatch()["stderr_tail"], "");
    assert_eq!(confined.dispatch()["leaked_processes"], 0);
}

#[test]
fn the_variables_set_the_options_when_the_flags_do_not() {
    require!(confinable());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let step = format!("connect:{}", listener.local_addr().unwrap());
    let run = Dispatch::adapter(&[&step, "echo"])
        .env("PARENT_TOOL_DISPATCH_NETWORK", "none")
        .env("PARENT_TOOL_DISPATCH_LIMIT_OPEN_FILES", "64")
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(
        reached(&run),
        vec![format!("connect=refused({})", libc::ENETUNREACH)]
    );
    assert_eq!(
        run.dispatch()["confinement"]["limits"],
        json!({"open_files": 64})
    );
}

#[test]
fn the_memory_limit_is_hit_and_named() {
    require!(confinable());
    require!(skip::cgroup(Controller::Memory));
    let run = Dispatch::adapter(&["allocate:512", "echo"])
        .args(&["--limit-memory", "64M"])
        .run();
    run.expect("failed", Some("resource_limit_exceeded"), 1);
    assert_eq!(run.envelope["error"]["details"]["limit"], "memory");
    assert_eq!(run.envelope["error"]["details"]["signal"], "SIGKILL");
    assert!(
        run.envelope["error"]["message"]
            .as_str()
            .unwrap()
            .contains("memory limit (--limit-memory)"),
        "{:#}",
        run.envelope
    );
    let confinement = &run.dispatch()["confinement"];
    assert_eq!(confinement["limits"]["memory_bytes"], 64 << 20);
    assert_eq!(confinement["cgroup"]["memory"], "v1");
    assert!(
        reached(&run).is_empty(),
        "the allocation was never finished"
    );
}

#[test]
fn the_pids_limit_is_hit_and_named() {
    require!(confinable());
    require!(skip::cgroup(Controller::Pids));
    let run = Dispatch::adapter(&["fork-many:64", "exit:3"])
        .args(&["--limit-pids", "8"])
        .run();
    run.expect("failed", Some("resource_limit_exceeded"), 1);
    assert_eq!(run.envelope["error"]["details"]["limit"], "pids");
    assert_eq!(run.envelope["error"]["details"]["exit_code"], 3);
    assert_eq!(
        reached(&run),
        vec![format!("fork-many=refused({})", libc::EAGAIN)]
    );
    assert_eq!(run.dispatch()["confinement"]["cgroup"]["pids"], "v1");
}

#[test]
fn the_file_size_limit_is_hit_and_named() {
    require!(confinable());
    let work = work();
    let run = Dispatch::adapter(&["write-tmp:4194304", "echo"])
        .args(&["--limit-file-size", "1M", "--fs-write", &path(work.path())])
        .run();
    run.expect("failed", Some("resource_limit_exceeded"), 1);
    assert_eq!(run.envelope["error"]["details"]["limit"], "file_size");
    assert_eq!(run.envelope["error"]["details"]["signal"], "SIGXFSZ");
}

#[test]
fn a_valid_failure_envelope_stands_even_when_a_limit_was_hit() {
    require!(confinable());
    require!(skip::cgroup(Controller::Pids));
    // The adapter's own answer says what happened: it is not replaced by a guess.
    let run = Dispatch::adapter(&["fork-many:64", "echo:failed:too_many"])
        .args(&["--limit-pids", "8"])
        .run();
    run.expect("failed", Some("too_many"), 1);
}

#[test]
fn a_host_that_cannot_confine_as_asked_starts_nothing() {
    require!(confinable());
    require!(skip::root());
    let (_dir, cmd) = dispatcher_as_nobody(&["exit:7"]);
    let out = cmd.args(["--limit-memory", "64M"]).run();
    out.exit(69).stderr_starts_with(
        "error[confinement_unavailable]: confinement is unavailable, the adapter was not started: \
         cannot make the call's cgroup in ",
    );
    let envelope = out.json();
    assert_eq!(envelope["status"], "unavailable", "{envelope:#}");
    assert_eq!(envelope["error"]["code"], "confinement_unavailable");
    assert_eq!(
        envelope["error"]["details"]["missing"],
        json!(["cgroup_writable"])
    );
    assert_eq!(
        envelope["diagnostics"]["dispatch"]["adapter_started"],
        false
    );
    assert!(envelope["diagnostics"]["dispatch"]
        .get("exit_code")
        .is_none());
}

#[test]
fn bad_confinement_options_are_usage_errors_naming_the_option() {
    let missing = tempfile::tempdir().unwrap().path().join("gone");
    let cases: [(&[&str], &str); 7] = [
        (
            &["--limit-memory", "12MB"],
            "error[usage]: --limit-memory: `12MB` has an ambiguous unit",
        ),
        (
            &["--fs-read", "/"],
            "error[usage]: --fs-read: `/` is the whole file system: read access to it confines \
             nothing (list the folders the adapter reads)",
        ),
        (
            &["--fs-read", "/usr", "--fs-read", "/tmp/.."],
            "error[usage]: --fs-read: `/tmp/..` is the whole file system",
        ),
        (
            &["--limit-pids", "many"],
            "error[usage]: --limit-pids: `many` is not a whole number",
        ),
        (
            &["--fs-read", missing.to_str().unwrap()],
            "error[usage]: --fs-read: `",
        ),
        (
            &["--fs-write", "/"],
            "error[usage]: --fs-write: `/` is the whole file system",
        ),
        (
            &["--network", "off"],
            "error[usage]: --network: `off` is not a network mode",
        ),
    ];
    for (args, message) in cases {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pids");
        let step = format!("pidfile:{}", pidfile.display());
        let run = Dispatch::adapter(&[&step, "echo"]).args(args).run();
        run.output()
            .exit(2)
            .stdout_empty()
            .stderr_starts_with(message);
        // The message, then the pointer every usage error of the main job ends with.
        assert_eq!(run.stderr.lines().count(), 3, "{}", run.stderr);
        assert!(run
            .stderr
            .ends_with("\n\nFor more information, try '--help'.\n"));
        assert!(!pidfile.exists(), "{args:?}: the adapter ran");
    }
    let run = Dispatch::adapter(&["echo"])
        .env("PARENT_TOOL_DISPATCH_LIMIT_FILE_SIZE", "1.5G")
        .run();
    run.output().exit(2).stdout_empty().stderr_starts_with(
        "error[usage]: PARENT_TOOL_DISPATCH_LIMIT_FILE_SIZE (--limit-file-size): `1.5G` is not a size",
    );
}

/// The first `python3` on the dispatcher's `PATH`, as `#!/usr/bin/env python3` finds it.
fn first_python3() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap();
    std::env::split_paths(&path)
        .map(|dir| dir.join("python3"))
        .find(|p| p.is_file())
        .unwrap()
}

/// The first `python3` on `PATH` is a shim in the home folder (pyenv's, as on the CI hosts):
/// the layout the test below is about.
fn python3_in_home() -> Need {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let python = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("python3"))
            .find(|p| p.is_file())
    });
    match (python, home) {
        (Some(python), Some(home)) if python.starts_with(&home) => Ok(()),
        (python, _) => skip::unmet(
            "python3-in-home",
            format!(
                "needs the first python3 on PATH in the home folder (a pyenv shim); here it is \
                 {python:?}"
            ),
        ),
    }
}

#[test]
fn an_interpreter_outside_the_base_is_named_and_one_fs_read_lets_it_run() {
    require!(confinable());
    require!(python3_in_home());
    let python = first_python3();
    let home = PathBuf::from(std::env::var("HOME").unwrap());
    assert!(
        python.starts_with(&home),
        "on these hosts the python3 first on PATH is a pyenv shim in the home folder: {python:?}"
    );
    // ~/.pyenv/shims/python3 → ~/.pyenv: the installation, shims, versions and all.
    let install = python.parent().unwrap().parent().unwrap().to_path_buf();
    let dir = tempfile::tempdir().unwrap();
    let adapter = dir.path().join("adapter.py");
    std::fs::write(
        &adapter,
        "#!/usr/bin/env python3\n\
         import json, sys\n\
         r = json.load(sys.stdin)\n\
         print(json.dumps({'schema': 'wp-codebox/parent-tool-result/v1', 'version': 1,\n\
           'request_id': r['request_id'], 'tool': r['tool'], 'operation': r['operation'],\n\
           'status': 'succeeded', 'output': {'python': sys.version.split()[0]}}))\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&adapter, std::fs::Permissions::from_mode(0o755)).unwrap();
    let argv = json!([path(&adapter)]);
    let bridge = bridge(&[]);
    let with = |extra: &[&str]| {
        let mut args = vec!["--fs-read", dir.path().to_str().unwrap()];
        args.extend_from_slice(extra);
        let argv = argv.clone();
        Dispatch::with_bridge(bridge.clone())
            .bridge(move |b| b["dispatcher"]["command"]["argv"] = argv)
            .args(&args)
            .run()
    };
    let refused = with(&[]);
    refused.expect("unavailable", Some("confinement_unavailable"), 69);
    assert_eq!(
        refused.envelope["error"]["details"]["missing"],
        json!(["fs_read_interpreter"])
    );
    refused.output().stderr_contains(format!(
        "allow it and its libraries with --fs-read {}",
        install.display()
    ));
    assert_eq!(refused.dispatch()["adapter_started"], false);
    let ran = with(&["--fs-read", install.to_str().unwrap()]);
    ran.expect("succeeded", None, 0);
    assert!(ran.envelope["output"]["python"]
        .as_str()
        .unwrap()
        .starts_with('3'));
}

#[test]
fn an_unconfined_run_is_unchanged() {
    require!(confinable());
    let run = Dispatch::adapter(&["echo"]).run();
    run.expect("succeeded", None, 0);
    assert!(run.dispatch().get("confinement").is_none());
    // The host's TMPDIR (or none) as before: no private folder was made.
    let env = &run.envelope["output"]["env"];
    assert_eq!(
        env.get("TMPDIR").and_then(Value::as_str),
        std::env::var("TMPDIR").ok().as_deref()
    );
}

#[test]
fn delegation_run_is_confined_the_same_way() {
    require!(confinable());
    require!(skip::cgroup(Controller::Pids));
    let (_outside, secret) = secret();
    let ptd_test = test_bin().display().to_string();
    let read = format!("read-file:{}", path(&secret));
    let request = json!({"goal": "g", "request_id": "hd-1"}).to_string();
    let work = work();
    let out = Cmd::new([
        "delegation",
        "run",
        "--fs-write",
        work.path().to_str().unwrap(),
        "--",
        &ptd_test,
        "adapter",
        &read,
        "exit:4",
    ])
    .stdin(request.clone())
    .run();
    // Without a limit in force, a failure is what it was; its stderr tells what was refused.
    out.exit(1).stderr_starts_with(
        "error[wp_codebox_host_delegation_provider_result_invalid]: the host adapter exited with \
         status 4",
    );
    let envelope = out.json();
    assert_eq!(
        envelope["error"]["data"]["stderr_tail"],
        format!("host-reach: read-file=refused({})\n", libc::EACCES),
        "{envelope:#}"
    );
    // A limit hit is named in delegation's vocabulary.
    let out = Cmd::new([
        "delegation",
        "run",
        "--limit-pids",
        "8",
        "--",
        &ptd_test,
        "adapter",
        "fork-many:64",
        "exit:3",
    ])
    .stdin(request.clone())
    .run();
    out.exit(1).stderr_contains(
        "error[wp_codebox_host_delegation_provider_result_invalid]: the host adapter reached its \
         pids limit (--limit-pids)",
    );
    let envelope = out.json();
    assert_eq!(envelope["error"]["data"]["limit"], "pids", "{envelope:#}");
    // A bad option is a usage error before anything runs.
    let out = Cmd::new([
        "delegation",
        "run",
        "--limit-memory",
        "x",
        "--",
        &ptd_test,
        "adapter",
    ])
    .stdin(request)
    .run();
    out.exit(2)
        .stdout_empty()
        .stderr_eq("error[usage]: --limit-memory: `x` is not a size: digits (bytes), optionally followed by K, M, G or T (binary units: 1K = 1024 bytes), e.g. 256M\n");
}

#[test]
fn the_mcp_adapter_confines_its_server() {
    require!(confinable());
    require!(skip::cgroup(Controller::Pids));
    let (_outside, secret) = secret();
    let server = tempfile::tempdir().unwrap();
    give_to_adapter(server.path());
    let log = server.path().join("log");
    let mut argv = vec![
        bin().display().to_string(),
        "adapter".into(),
        "mcp".into(),
        "--fs-write".into(),
        path(server.path()),
        "--".into(),
        test_bin().display().to_string(),
        "mcp-server".into(),
        format!("log:{}", log.display()),
        "on:tools/call".into(),
        format!("spawn:read-file:{}", path(&secret)),
        "sleep:300".into(),
        "text:done".into(),
    ];
    let bridge_argv = json!(argv.clone());
    let run = Dispatch::adapter(&[])
        .bridge(move |b| b["dispatcher"]["command"]["argv"] = bridge_argv)
        .run();
    run.expect("succeeded", None, 0);
    assert!(
        reached(&run).contains(&format!("read-file=refused({})", libc::EACCES)),
        "{:#}",
        run.envelope
    );
    assert!(
        log.exists(),
        "the server wrote its log in the granted folder"
    );
    // A limit the server dies of is named.
    argv.truncate(5);
    argv[3] = "--limit-pids".into();
    argv[4] = "8".into();
    argv.extend([
        "--".into(),
        test_bin().display().to_string(),
        "mcp-server".into(),
        "on:tools/call".into(),
        "spawn:fork-many:64".into(),
        "sleep:500".into(),
        "exit:1".into(),
    ]);
    let bridge_argv = json!(argv);
    let run = Dispatch::adapter(&[])
        .bridge(move |b| b["dispatcher"]["command"]["argv"] = bridge_argv)
        .run();
    run.expect("failed", Some("resource_limit_exceeded"), 1);
    assert_eq!(run.envelope["error"]["details"]["limit"], "pids");
}

#[test]
fn a_confinement_step_the_kernel_refuses_in_the_child_starts_nothing() {
    require!(confinable());
    // RLIMIT_NOFILE above the kernel's fs.nr_open: setrlimit fails even for root, in the
    // child, after the fork: the adapter must not run all the same.
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    let step = format!("pidfile:{}", pidfile.display());
    let run = Dispatch::adapter(&[&step, "echo"])
        .args(&["--limit-open-files", "9223372036854775807"])
        .run();
    run.expect("unavailable", Some("confinement_unavailable"), 69);
    assert_eq!(
        run.envelope["error"]["details"]["missing"],
        json!(["rlimits"])
    );
    run.output()
        .stderr_contains("confinement step rlimits failed: Operation not permitted");
    assert!(!pidfile.exists(), "the adapter ran");
    assert!(
        run.dispatch().get("confinement").is_none(),
        "nothing was in force"
    );
    assert_eq!(run.dispatch()["adapter_started"], false);
}

#[test]
fn the_file_transports_folder_is_granted_under_landlock() {
    require!(confinable());
    let work = work();
    let run = Dispatch::adapter(&["file-echo"])
        .bridge(|b| b["dispatcher"]["command"]["transport"] = json!("file"))
        .args(&["--fs-read", &path(work.path())])
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(run.envelope["output"]["request_file_mode"], "600");
    assert_eq!(run.dispatch()["transport"], "file");
    assert_eq!(
        run.dispatch()["confinement"]["mechanisms"],
        in_force(&[], false)
    );
}

#[test]
fn a_confined_adapter_that_fails_saying_nothing_gets_a_note_of_what_it_had() {
    require!(confinable());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let step = format!("connect:{}", listener.local_addr().unwrap());
    let work = work();
    let run = Dispatch::adapter(&[&step, "exit:3"])
        .args(&[
            "--network",
            "none",
            "--fs-write",
            work.path().to_str().unwrap(),
        ])
        .run();
    run.expect("failed", Some("adapter_exit_nonzero"), 1);
    run.output().stderr_contains(
        "  note: the adapter ran confined and printed nothing: it had no network; it could read \
         only the base and write only its private TMPDIR and 1 granted folder. A program that \
         needs more (npx fetching a package, a file elsewhere) fails or hangs there: grant it \
         (--network, --fs-read, --fs-write, or the policy's keys: docs/confinement.md), and see \
         its stderr with -v",
    );
    // An adapter that answered, or one not confined, gets no such note.
    let answered = Dispatch::adapter(&["read-stdin", "echo:failed:tool_broke"])
        .args(&["--network", "none"])
        .run();
    answered.expect("failed", Some("tool_broke"), 1);
    answered.output().stderr_lacks("printed nothing");
    let unconfined = Dispatch::adapter(&["exit:3"]).run();
    unconfined.expect("failed", Some("adapter_exit_nonzero"), 1);
    unconfined.output().stderr_lacks("note:");
}

#[test]
fn a_confined_mcp_server_that_never_answers_is_explained() {
    require!(confinable());
    let argv = json!([
        bin().display().to_string(),
        "adapter",
        "mcp",
        "--network",
        "none",
        "--",
        test_bin().display().to_string(),
        "mcp-server",
        "on:initialize",
        "exit:1",
    ]);
    let run = Dispatch::adapter(&[])
        .bridge(move |b| b["dispatcher"]["command"]["argv"] = argv)
        .run();
    run.expect("unavailable", Some("mcp_server_exited"), 69);
    assert!(
        run.dispatch()["stderr_tail"]
            .as_str()
            .unwrap()
            .contains("adapter mcp: the MCP server ran confined (no network; files: the base and its grants) and did not answer"),
        "{:#}",
        run.envelope
    );
}
