//! `doctor` (SPEC §13) through the binary, on the real kernel: as root every mechanism is
//! available and every probe is refused; as an unprivileged user the cgroup cannot be made, so
//! asking for `--limit-memory` is exit 69 naming it; bad options are usage errors naming the
//! option. The exit-70 path (a probe that was not refused) needs a broken kernel: it is tested
//! on the judging functions in `src/doctor.rs`.

use super::host_reach::{copies_for_nobody, NOBODY};
use super::*;
use parent_tool_dispatch::doctor::{adapter, egress, MECHANISMS};
use ptd_sys::confine::OptionName;

/// Whether `names` is the host's ten rows, then `adapter_*` rows in their order, then
/// `egress`.
#[track_caller]
fn check_names(names: &[&str], context: &str) {
    assert!(names.len() > MECHANISMS.len() + 1, "{context}");
    assert_eq!(names[..MECHANISMS.len()], MECHANISMS, "{context}");
    assert_eq!(names.last(), Some(&egress::NAME), "{context}");
    let order: Vec<&str> = adapter::ROWS.iter().map(|(n, _, _)| *n).collect();
    let mut at = 0;
    for name in &names[MECHANISMS.len()..names.len() - 1] {
        let found = order[at..].iter().position(|n| n == name);
        assert!(found.is_some(), "{name} out of order: {context}");
        at += found.unwrap_or(0) + 1;
    }
}

/// `doctor ARGS…` with none of the confinement variables set.
fn doctor(args: &[&str]) -> Cmd {
    clean(Cmd::new(["doctor"]).args(args))
}

fn clean(mut cmd: Cmd) -> Cmd {
    for name in OptionName::ALL {
        cmd = cmd.env_remove(name.env_var());
    }
    cmd
}

/// The table's rows as (mechanism, state, asked), after checking the header and the summary.
#[track_caller]
fn table(stdout: &str) -> Vec<(String, String, String)> {
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("MECHANISM "), "{stdout}");
    assert!(lines[0].ends_with("  DETAIL"), "{stdout}");
    let last = lines.len() - 2;
    let rows: Vec<(String, String, String)> = lines[1..=last]
        .iter()
        .map(|l| {
            let mut words = l.split_whitespace();
            let mut next = || words.next().unwrap_or("").to_string();
            (next(), next(), next())
        })
        .collect();
    let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    check_names(&names, stdout);
    // Aligned: the state column starts at the same place on every line.
    let at = lines[0].find("STATE").unwrap();
    for line in &lines[1..=last] {
        assert_eq!(line.as_bytes()[at - 1], b' ', "{line}");
        assert_ne!(line.as_bytes()[at], b' ', "{line}");
    }
    let count = |s: &str| rows.iter().filter(|r| r.1 == s).count();
    assert_eq!(
        *lines.last().unwrap(),
        format!(
            "{} ok, {} unavailable, {} failed",
            count("ok"),
            count("unavailable"),
            count("FAILED")
        )
    );
    rows
}

fn rows_of(json: &Value) -> Vec<Value> {
    assert_eq!(json["schema"], "parent-tool-dispatch/doctor/v1", "{json:#}");
    let rows = json["mechanisms"].as_array().unwrap().clone();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["mechanism"].as_str().unwrap())
        .collect();
    check_names(&names, &format!("{json:#}"));
    for r in &rows {
        // Every key, always.
        for key in [
            "requested",
            "state",
            "detail",
            "abi",
            "hierarchy",
            "missing",
            "reason",
            "probe",
        ] {
            assert!(r.get(key).is_some(), "{key} missing in {r:#}");
        }
    }
    rows
}

fn row<'a>(rows: &'a [Value], name: &str) -> &'a Value {
    rows.iter().find(|r| r["mechanism"] == name).unwrap()
}

#[test]
fn as_root_every_mechanism_is_there_and_every_probe_is_refused() {
    require!(skip::root());
    require!(confinable());
    let out = doctor(&[]).run();
    out.exit(0).stderr_empty().stdout_with(|stdout| {
        for (name, state, asked) in table(stdout) {
            assert_eq!(state, "ok", "{name}: {stdout}");
            assert_eq!(asked, "-", "{name}: nothing was asked for");
        }
        assert!(stdout.ends_with("18 ok, 0 unavailable, 0 failed\n"));
    });
}

/// The `adapter_*` rows of a JSON report.
fn adapter_rows(rows: &[Value]) -> Vec<&Value> {
    rows.iter()
        .filter(|r| r["mechanism"].as_str().unwrap().starts_with("adapter_"))
        .collect()
}

/// SPEC §13.2: the probes run as the adapter would, and what the first version let through is
/// refused — by default (a root dispatcher: as `nobody`), and with `--run-as`.
#[test]
fn as_root_the_adapter_probe_runs_as_the_run_as_user_and_every_attack_is_refused() {
    require!(skip::root());
    require!(confinable());
    let default = [
        "adapter_not_root",
        "adapter_capabilities",
        "adapter_chmod",
        "adapter_mknod",
        "adapter_proc_environ",
        "adapter_proc_cmdline",
        "adapter_prlimit",
    ];
    for (args, user, asked) in [
        (&[][..], "nobody (uid 65534)", false),
        (&["--run-as", "nobody"][..], "nobody (uid 65534)", true),
        (&["--run-as", "daemon:nogroup"][..], "daemon (uid 1)", true),
    ] {
        let out = doctor(&[&["--json"][..], args].concat()).run();
        out.exit(0).stderr_empty();
        let json = out.json();
        let rows = rows_of(&json);
        let adapter = adapter_rows(&rows);
        let names: Vec<&str> = adapter
            .iter()
            .map(|r| r["mechanism"].as_str().unwrap())
            .collect();
        assert_eq!(names, default, "{args:?}");
        for r in adapter {
            assert_eq!(r["state"], "ok", "{args:?}: {r:#}");
            assert_eq!(r["requested"], asked, "{args:?}: {r:#}");
            assert_eq!(r["probe"]["result"], "refused", "{r:#}");
            assert_eq!(r["detail"], format!("as {user}"), "{r:#}");
        }
        // The run-as user holds no capability: raising one is EPERM, and so is chmod of a
        // root file and a device node.
        for name in ["adapter_capabilities", "adapter_chmod", "adapter_mknod"] {
            assert_eq!(row(&rows, name)["probe"]["errno"], libc::EPERM, "{name}");
        }
        // The dispatcher is not in the adapter's PID namespace, the init is hidden.
        assert_eq!(
            row(&rows, "adapter_proc_environ")["probe"]["errno"],
            libc::ENOENT
        );
    }
}

/// SPEC §17.3: the `egress` row reaches a loopback server of doctor's own through the proxy,
/// is refused (403) on another port and finds nothing directly; asked for by `--network
/// allow:`.
#[test]
fn the_egress_row_reaches_its_server_through_the_proxy_and_nothing_else() {
    require!(confinable());
    for (args, asked) in [
        (&[][..], false),
        (&["--network", "allow:example.com:443"][..], true),
    ] {
        let out = doctor(&[&["--json"][..], args].concat()).run();
        out.exit(0).stderr_empty();
        let json = out.json();
        let rows = rows_of(&json);
        let r = row(&rows, "egress");
        assert_eq!(r["state"], "ok", "{args:?}: {r:#}");
        assert_eq!(r["requested"], asked, "{args:?}: {r:#}");
        assert_eq!(r["probe"]["result"], "refused", "{r:#}");
        assert_eq!(r["probe"]["errno"], libc::ECONNREFUSED, "{r:#}");
        let detail = r["detail"].as_str().unwrap();
        assert!(detail.contains("127.0.0.1:3128"), "{detail}");
    }
}

#[test]
fn the_limits_and_network_none_add_the_cgroup_and_socket_attacks() {
    require!(confinable());
    require!(skip::cgroup(Controller::Pids));
    let out = doctor(&["--json", "--network", "none", "--limit-pids", "64"]).run();
    out.exit(0).stderr_empty();
    let rows = rows_of(&out.json());
    for name in ["adapter_cgroup_escape", "adapter_unix_socket"] {
        let r = row(&rows, name);
        assert_eq!(r["state"], "ok", "{r:#}");
        assert_eq!(r["requested"], true, "{r:#}");
        assert_eq!(r["probe"]["result"], "refused", "{r:#}");
    }
    assert_eq!(
        row(&rows, "adapter_unix_socket")["probe"]["errno"],
        libc::EPERM
    );
    // Without them, neither is tried.
    let out = doctor(&["--json", "--limit-open-files", "64"]).run();
    out.exit(0).stderr_empty();
    let rows = rows_of(&out.json());
    assert!(adapter_rows(&rows)
        .iter()
        .all(|r| r["mechanism"] != "adapter_cgroup_escape"
            && r["mechanism"] != "adapter_unix_socket"));
}

#[test]
fn a_run_as_user_that_does_not_exist_is_a_usage_error() {
    let out = doctor(&["--run-as", "no-such-user-ptd"]).run();
    out.exit(2)
        .stdout_empty()
        .stderr_starts_with("error: --run-as: `no-such-user-ptd`: there is no user")
        .stderr_with(|stderr| assert_eq!(stderr.lines().count(), 1, "{stderr}"));
}

#[test]
fn with_every_option_the_json_report_says_what_was_asked_and_proved() {
    require!(confinable());
    require!(skip::cgroup(Controller::Memory));
    require!(skip::cgroup(Controller::Pids));
    let writable = tempfile::tempdir().unwrap();
    let w = writable.path().to_str().unwrap();
    let out = doctor(&[
        "--json",
        "--fs-read",
        "/tmp",
        "--fs-write",
        w,
        "--network",
        "none",
        "--limit-memory",
        "64M",
        "--limit-pids",
        "16",
        "--limit-open-files",
        "64",
        "--limit-file-size",
        "1M",
    ])
    .run();
    out.exit(0).stderr_empty();
    let json = out.json();
    assert_eq!(json["exit_code"], 0);
    let rows = rows_of(&json);
    for r in &rows {
        let name = r["mechanism"].as_str().unwrap();
        assert_eq!(r["state"], "ok", "{r:#}");
        assert!(r["missing"].is_null() && r["reason"].is_null(), "{r:#}");
        let probe = &r["probe"];
        assert!(
            probe["result"] == "refused" || probe["result"] == "killed",
            "{r:#}"
        );
        // The scopes come with Landlock; no option asks for them alone. `egress` is asked
        // for by `--network allow:`, not `none`.
        let scope = name.ends_with("_scope");
        assert_eq!(r["requested"], !scope && name != "egress", "{r:#}");
    }
    for name in ["landlock_fs", "landlock_signal_scope"] {
        assert!(row(&rows, name)["abi"].as_u64().unwrap() >= 6);
    }
    for name in ["memory", "pids"] {
        let r = row(&rows, name);
        let h = r["hierarchy"].as_str().unwrap();
        assert!(h == "v1" || h == "v2", "{r:#}");
        assert!(r["detail"]
            .as_str()
            .unwrap()
            .starts_with(&format!("cgroup {h} under ")));
        // The limit's own counter saw the probe hit it.
        assert!(r["probe"]["counter"].as_u64().unwrap() >= 1, "{r:#}");
    }
    assert_eq!(row(&rows, "file_size")["probe"]["signal"], "SIGXFSZ");
    assert_eq!(row(&rows, "seccomp")["probe"]["errno"], libc::EPERM);
}

#[test]
fn an_option_from_its_variable_counts_as_asked_for() {
    require!(confinable());
    require!(skip::cgroup(Controller::Pids));
    let out = doctor(&["--json"])
        .env(OptionName::LimitPids.env_var(), "8")
        .run();
    out.exit(0).stderr_empty();
    let rows = rows_of(&out.json());
    assert_eq!(row(&rows, "pids")["requested"], true);
    assert_eq!(row(&rows, "memory")["requested"], false);
    // Any option turns on no_new_privs and seccomp.
    assert_eq!(row(&rows, "seccomp")["requested"], true);
    assert_eq!(row(&rows, "no_new_privs")["requested"], true);
}

#[test]
fn a_bad_option_is_a_usage_error_naming_it() {
    /// Arguments, variables, and how stderr must begin after `error: `.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 8] = [
        (&["--limit-memory", "64MB"], &[], "--limit-memory: `64MB`"),
        (
            &["--fs-write", "/"],
            &[],
            "--fs-write: `/` is the whole file system",
        ),
        // SPEC §13.2: reading everything confines nothing either, however spelled.
        (
            &["--fs-read", "/."],
            &[],
            "--fs-read: `/.` is the whole file system: read access to it confines nothing",
        ),
        (
            &[],
            &[("PARENT_TOOL_DISPATCH_FS_READ", "/usr:/..")],
            "PARENT_TOOL_DISPATCH_FS_READ (--fs-read): `/..` is the whole file system",
        ),
        (
            &["--network", "maybe"],
            &[],
            "--network: `maybe` is not a network mode",
        ),
        (
            &["--fs-read", "/nonexistent/ptd"],
            &[],
            "--fs-read: `/nonexistent/ptd`",
        ),
        (
            &["--limit-pids=-1"],
            &[],
            "--limit-pids: `-1` is not a whole number",
        ),
        (
            &[],
            &[("PARENT_TOOL_DISPATCH_LIMIT_OPEN_FILES", "many")],
            "PARENT_TOOL_DISPATCH_LIMIT_OPEN_FILES (--limit-open-files): `many`",
        ),
    ];
    for (args, env, names) in cases {
        let mut cmd = doctor(args);
        for (k, v) in env {
            cmd = cmd.env(k, v);
        }
        let out = cmd.run();
        out.exit(2)
            .stdout_empty()
            .stderr_starts_with(format!("error: {names}"))
            .stderr_with(|stderr| assert_eq!(stderr.lines().count(), 1, "{stderr}"));
    }
}

/// `doctor ARGS…` run as [`NOBODY`] from a copy of the binary it can reach.
fn doctor_as_nobody(args: &[&str]) -> Output {
    let (_dir, copies) = copies_for_nobody(&[bin()]);
    clean(Cmd::of(copies[0].clone(), ["doctor"]).args(args))
        .cwd("/tmp")
        .user(NOBODY, NOBODY)
        .run()
}

#[test]
fn as_an_unprivileged_user_a_requested_memory_limit_is_unavailable_with_69() {
    require!(skip::root());
    let out = doctor_as_nobody(&["--limit-memory", "64M"]);
    out.exit(69).stderr_starts_with(
        "error[confinement_unavailable]: requested but unavailable: memory (missing cgroup_",
    );
    out.stderr_with(|stderr| assert_eq!(stderr.lines().count(), 1, "{stderr}"));
    out.stdout_with(|stdout| {
        let rows = table(stdout);
        let memory = rows.iter().find(|r| r.0 == "memory").unwrap();
        assert_eq!(
            (memory.1.as_str(), memory.2.as_str()),
            ("unavailable", "yes")
        );
        // What needs no privilege still holds for that user.
        for name in [
            "landlock_fs",
            "seccomp",
            "no_new_privs",
            "open_files",
            "file_size",
        ] {
            let r = rows.iter().find(|r| r.0 == name).unwrap();
            assert_eq!(r.1, "ok", "{name}: {stdout}");
        }
    });

    let out = doctor_as_nobody(&["--json", "--limit-memory", "64M"]);
    out.exit(69)
        .stderr_starts_with("error[confinement_unavailable]: ");
    let json = out.json();
    assert_eq!(json["exit_code"], 69);
    let rows = rows_of(&json);
    let memory = row(&rows, "memory");
    assert_eq!(memory["state"], "unavailable", "{memory:#}");
    assert_eq!(memory["requested"], true);
    assert!(
        memory["missing"].as_str().unwrap().starts_with("cgroup_"),
        "{memory:#}"
    );
    assert!(
        memory["reason"].as_str().unwrap().contains("cgroup"),
        "{memory:#}"
    );
}

#[test]
fn as_an_unprivileged_user_without_options_what_is_missing_is_only_reported() {
    require!(skip::root());
    let out = doctor_as_nobody(&[]);
    out.exit(0).stderr_empty().stdout_with(|stdout| {
        let rows = table(stdout);
        let memory = rows.iter().find(|r| r.0 == "memory").unwrap();
        assert_eq!((memory.1.as_str(), memory.2.as_str()), ("unavailable", "-"));
        // The probe runs as that user, in a user namespace it holds no capability in; a chmod
        // of its own user's file would prove nothing, so there is none.
        let adapter: Vec<&str> = rows
            .iter()
            .filter(|r| r.0.starts_with("adapter_"))
            .map(|r| r.0.as_str())
            .collect();
        assert_eq!(
            adapter,
            [
                "adapter_not_root",
                "adapter_capabilities",
                "adapter_mknod",
                "adapter_proc_environ",
                "adapter_proc_cmdline",
                "adapter_prlimit"
            ],
            "{stdout}"
        );
        for r in rows.iter().filter(|r| r.0.starts_with("adapter_")) {
            assert_eq!(r.1, "ok", "{stdout}");
        }
        assert!(
            stdout.contains("as nobody (uid 65534), in a user namespace"),
            "{stdout}"
        );
    });
}
