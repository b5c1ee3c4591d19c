//! SPEC §13.2 through the binary, on the real kernel: confinement that holds when the
//! dispatcher is root. Each test is one finding of the attack on the first version (a root
//! adapter kept every capability), run as root in CI and, where it matters, with the
//! dispatcher as uid 65534: the adapter tries the attack and reports what the kernel answered.

use super::confinement::reached;
use super::host_reach::dispatcher_as_nobody;
use super::*;

/// A root-owned file outside every grant, in a folder anyone may enter (so only the
/// confinement stands between the adapter and it).
fn host_file() -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = dir.path().join("host.conf");
    std::fs::write(&file, "host setting\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    (dir, file)
}

/// A folder given to the adapter's user, granted with `--fs-write`.
fn adapter_folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    give_to_adapter(dir.path());
    dir
}

fn refused(errno: i32) -> String {
    format!("refused({errno})")
}

#[test]
fn the_adapter_is_never_root_and_holds_no_capability() {
    require!(confinable());
    require!(skip::root());
    let zero = "0000000000000000";
    let uid = adapter_uid().to_string();
    let expected = |groups: &str| {
        vec![
            format!("Uid={uid} {uid} {uid} {uid}"),
            format!("Gid={uid} {uid} {uid} {uid}"),
            format!("Groups={groups}"),
            format!("CapInh={zero}"),
            format!("CapPrm={zero}"),
            format!("CapEff={zero}"),
            format!("CapBnd={zero}"),
            format!("CapAmb={zero}"),
            "NoNewPrivs=1".to_string(),
        ]
    };
    // Each option alone turns confinement on, and with it no privilege.
    let work = adapter_folder();
    let work = work.path().display().to_string();
    for flags in [
        vec!["--network", "none"],
        vec!["--limit-open-files", "512"],
        vec!["--fs-write", &work],
        vec!["--run-as", "nobody"],
    ] {
        let run = Dispatch::adapter(&["creds", "echo"]).args(&flags).run();
        run.expect("succeeded", None, 0);
        assert_eq!(run.stderr, "");
        assert_eq!(reached(&run), expected(""), "{flags:?}");
    }
    // As uid 65534 the dispatcher runs it as itself, with no capability either (a user
    // namespace of its own, whose capabilities it gave up).
    let (_dir, cmd) = dispatcher_as_nobody(&["creds", "echo"]);
    let out = cmd.args(["--network", "none"]).run();
    out.exit(0).stderr_empty();
    let envelope = out.json();
    let tail = envelope["diagnostics"]["dispatch"]["stderr_tail"]
        .as_str()
        .unwrap()
        .to_string();
    for line in expected("65534")
        .iter()
        .filter(|l| !l.starts_with("Uid") && !l.starts_with("Gid") && !l.starts_with("Groups"))
    {
        assert!(
            tail.contains(&format!("host-reach: {line}\n")),
            "{line}: {tail}"
        );
    }
    assert!(
        tail.contains("host-reach: Uid=65534 65534 65534 65534\n"),
        "{tail}"
    );
}

#[test]
fn run_as_chooses_the_user_and_refuses_what_it_cannot_be() {
    require!(confinable());
    require!(skip::root());
    let run = Dispatch::adapter(&["creds", "echo"])
        .args(&["--run-as", "daemon:nogroup"])
        .run();
    run.expect("succeeded", None, 0);
    let lines = reached(&run);
    assert_eq!(lines[0], "Uid=1 1 1 1", "{lines:?}");
    assert_eq!(lines[1], "Gid=65534 65534 65534 65534", "{lines:?}");
    // The variable does the same.
    let run = Dispatch::adapter(&["creds", "echo"])
        .env("PARENT_TOOL_DISPATCH_RUN_AS", "daemon")
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(reached(&run)[0], "Uid=1 1 1 1");
    for (value, problem) in [
        (
            "no-such-user-ptd",
            "there is no user `no-such-user-ptd` on this host",
        ),
        (
            "nobody:no-such-group-ptd",
            "there is no group `no-such-group-ptd` on this host",
        ),
        ("root", "a confined adapter never runs as root (uid 0)"),
        ("", "expected USER or USER:GROUP"),
    ] {
        let run = Dispatch::adapter(&["echo"])
            .args(&["--run-as", value])
            .run();
        run.output
            .exit(2)
            .stdout_empty()
            .stderr_starts_with(format!("error[usage]: --run-as: `{value}`: {problem}"));
    }
    // A dispatcher that is not root may name only itself.
    let (_dir, cmd) = dispatcher_as_nobody(&["echo"]);
    cmd.args(["--run-as", "daemon"])
        .run()
        .exit(2)
        .stdout_empty()
        .stderr_contains(
            "error[usage]: --run-as: `daemon`: the dispatcher runs as uid 65534, not root",
        );
    let (_dir, cmd) = dispatcher_as_nobody(&["creds", "echo"]);
    let out = cmd.args(["--run-as", "nobody"]).run();
    out.exit(0)
        .stderr_empty()
        .stdout_contains("host-reach: Uid=65534 65534 65534 65534");
}

#[test]
fn metadata_and_devices_outside_the_grants_are_refused() {
    require!(confinable());
    require!(skip::root());
    let (_host, file) = host_file();
    let file = file.display().to_string();
    let work = adapter_folder();
    let node = work.path().join("kmsg").display().to_string();
    let mine = work.path().join("mine");
    std::fs::write(&mine, "mine\n").unwrap();
    give_to_adapter(&mine);
    let mine = mine.display().to_string();
    let steps = [
        format!("chmod:{file}"),
        format!("chown:{file}"),
        format!("setxattr:{file}"),
        format!("mknod:{node}"),
        // The control: its own file in its own folder.
        format!("chmod:{mine}"),
        "echo".to_string(),
    ];
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let work_arg = work.path().display().to_string();
    for flags in [
        vec!["--network", "none"],
        vec!["--fs-write", work_arg.as_str()],
    ] {
        let run = Dispatch::adapter(&steps).args(&flags).run();
        run.expect("succeeded", None, 0);
        let got = reached(&run);
        assert_eq!(
            got[0],
            format!("chmod={}", refused(libc::EPERM)),
            "{flags:?}"
        );
        assert_eq!(
            got[1],
            format!("chown={}", refused(libc::EPERM)),
            "{flags:?}"
        );
        assert!(
            got[2].starts_with("setxattr=refused("),
            "{flags:?}: {got:?}"
        );
        assert!(got[3].starts_with("mknod=refused("), "{flags:?}: {got:?}");
        assert_eq!(got[4], "chmod=ok", "{flags:?}");
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644, "the host file kept its mode");
    assert!(!work.path().join("kmsg").exists());
}

#[test]
fn the_adapter_sees_only_its_own_processes() {
    require!(confinable());
    require!(skip::root());
    let me = std::process::id();
    let steps = [
        format!("read-file:/proc/{me}/environ"),
        format!("read-file:/proc/{me}/cmdline"),
        "read-file:/proc/1/environ".to_string(),
        "read-file:/proc/kmsg".to_string(),
        "proc-pids".to_string(),
        "echo".to_string(),
    ];
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let run = Dispatch::adapter(&steps)
        .args(&["--network", "none"])
        .env("PTD_HOST_SECRET", "never-seen")
        .run();
    run.expect("succeeded", None, 0);
    let enoent = refused(libc::ENOENT);
    assert_eq!(
        reached(&run),
        vec![
            format!("read-file={enoent}"),
            format!("read-file={enoent}"),
            // The namespace's init (the dispatcher's own image) is hidden too.
            format!("read-file={enoent}"),
            format!("read-file={enoent}"),
            // Itself, PID 2 of its namespace; the init (1) is not shown.
            "proc-pids=2".to_string(),
        ]
    );
    // The same from a dispatcher that is not root.
    let (_dir, cmd) = dispatcher_as_nobody(&["read-file:/proc/1/cmdline", "proc-pids", "echo"]);
    let out = cmd.args(["--network", "none"]).run();
    out.exit(0).stderr_empty();
    let tail = out.json()["diagnostics"]["dispatch"]["stderr_tail"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        tail,
        format!("host-reach: read-file={enoent}\nhost-reach: proc-pids=2\n")
    );
}

#[test]
fn the_dispatcher_cannot_be_signalled_or_limited_by_its_adapter() {
    require!(confinable());
    // Only `--network none`: before SPEC §13.2 no Landlock was applied without `--fs-*`, and
    // the adapter SIGKILLed its dispatcher. Now its parent is the namespace's init (outside
    // its Landlock domain) and the host's processes are not in its namespace.
    let me = std::process::id().to_string();
    let run = Dispatch::adapter(&[
        "signal-parent:9",
        &format!("signal-pid:{me}"),
        &format!("prlimit:{me}"),
        "prlimit:1",
        "echo",
    ])
    .args(&["--network", "none"])
    .run();
    run.expect("succeeded", None, 0);
    let got = reached(&run);
    assert_eq!(got[0], format!("signal-parent={}", refused(libc::EPERM)));
    assert!(got[1].starts_with("signal-pid=refused("), "{got:?}");
    assert!(got[2].starts_with("prlimit=refused("), "{got:?}");
    assert!(got[3].starts_with("prlimit=refused("), "{got:?}");
    assert_eq!(run.dispatch()["leaked_processes"], 0);
}

#[test]
fn the_host_clock_and_raw_sockets_are_out_of_reach() {
    require!(confinable());
    let run = Dispatch::adapter(&["adjtimex-set", "packet-socket", "echo"])
        .args(&["--network", "none"])
        .run();
    run.expect("succeeded", None, 0);
    let eperm = refused(libc::EPERM);
    assert_eq!(
        reached(&run),
        vec![
            format!("adjtimex-set={eperm}"),
            format!("packet-socket={eperm}")
        ]
    );
}

#[test]
fn network_none_refuses_a_host_pathname_socket() {
    require!(confinable());
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = dir.path().join("host.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    // Anyone may connect as far as file modes go: only the confinement refuses.
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    let step = format!("unix-connect:{}", socket.display());
    let run = Dispatch::adapter(&[&step, "echo"])
        .args(&["--network", "none"])
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(
        reached(&run),
        vec![format!("unix-connect={}", refused(libc::EPERM))]
    );
    // The control: with the host's network the same adapter connects.
    let run = Dispatch::adapter(&[&step, "echo"])
        .args(&["--limit-open-files", "256"])
        .run();
    run.expect("succeeded", None, 0);
    assert_eq!(reached(&run), vec!["unix-connect=ok".to_string()]);
}

#[test]
fn the_adapter_cannot_leave_its_memory_cgroup() {
    require!(confinable());
    require!(skip::cgroup(Controller::Memory));
    let run = Dispatch::adapter(&["cgroup-escape", "echo"])
        .args(&["--limit-memory", "256M"])
        .run();
    run.expect("succeeded", None, 0);
    let got = reached(&run);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].starts_with("cgroup-escape=refused("), "{got:?}");
}

#[test]
fn the_adapter_cannot_plug_a_veth_into_the_host() {
    require!(confinable());
    let Some(ip) = ["/usr/sbin/ip", "/sbin/ip", "/bin/ip", "/usr/bin/ip"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        require!(skip::unmet(
            "ip",
            "needs the `ip` program (iproute2), not found here"
        ));
        return;
    };
    let name = format!("ptdv{}", std::process::id() % 100_000);
    let script = format!(
        "cat >/dev/null; {ip} link add {name} type veth peer name {name}p netns 1 2>/dev/null; \
         echo \"host-reach: veth=$?\" >&2; exit 3"
    );
    let run = Dispatch::adapter(&[])
        .bridge(|b| b["dispatcher"]["command"]["argv"] = json!(["/bin/sh", "-c", script]))
        .args(&["--network", "none"])
        .run();
    run.expect("failed", Some("adapter_exit_nonzero"), 1);
    let got = reached(&run);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_ne!(got[0], "veth=0", "the adapter made a veth");
    let host = std::process::Command::new(ip)
        .args(["link", "show", &name])
        .output()
        .unwrap();
    assert!(!host.status.success(), "{name} exists on the host");
}

#[test]
fn sigterm_still_reaches_the_adapter_in_its_pid_namespace() {
    require!(confinable());
    let dir = adapter_folder();
    let mark = dir.path().join("term");
    for extra in [&[][..], &["setsid"][..]] {
        let _ = std::fs::remove_file(&mark);
        let on_term = format!("on-term:{}", mark.display());
        let mut steps = vec![on_term.as_str()];
        steps.extend_from_slice(extra);
        steps.push("sleep:10000");
        let run = Dispatch::adapter(&steps)
            .bridge(|b| b["dispatcher"]["timeout_ms"] = json!(500))
            .args(&["--network", "none"])
            .run();
        run.expect("timeout", Some("dispatch_timeout"), 124);
        assert_eq!(
            std::fs::read_to_string(&mark).unwrap_or_default(),
            "term\n",
            "the adapter got no SIGTERM ({extra:?})"
        );
        // Everything in its namespace ended with it.
        assert_eq!(run.dispatch()["leaked_processes"], 0, "{extra:?}");
    }
}

#[test]
fn a_program_the_run_as_user_cannot_reach_is_named_so() {
    require!(confinable());
    require!(skip::root());
    use std::os::unix::fs::PermissionsExt;
    // A folder only root may enter (as a `mktemp -d` is), holding an executable script.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let program = dir.path().join("adapter.sh");
    std::fs::write(&program, "#!/bin/sh\ncat\n").unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let argv = json!([program.display().to_string()]);
    let run = Dispatch::adapter(&[])
        .bridge(move |b| b["dispatcher"]["command"]["argv"] = argv)
        .args(&["--network", "none"])
        .run();
    run.expect("unavailable", Some("adapter_not_executable"), 69);
    assert_eq!(
        run.envelope["error"]["details"]["reason"],
        "unreachable_for_run_as"
    );
    assert!(
        run.stderr.contains("runs as uid 65534 (--run-as), and a folder above the program is not searchable by that user"),
        "{}",
        run.stderr
    );
    // Unconfined, the same program runs (as the dispatcher's user): it echoes the request,
    // which is no result.
    let argv = json!([program.display().to_string()]);
    let run = Dispatch::adapter(&[])
        .bridge(move |b| b["dispatcher"]["command"]["argv"] = argv)
        .run();
    run.expect("failed", Some("result_invalid"), 1);
    assert_eq!(run.dispatch()["adapter_started"], true);
}
