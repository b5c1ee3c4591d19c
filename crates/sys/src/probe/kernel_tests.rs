//! Real-kernel tests of the building blocks together: each probe on this host, and adapters
//! run through `std::process::Command` with the child steps in a `pre_exec` (the same calls
//! `exec/` will make in its ordered set-up).

use crate::confine::cgroup::{CgroupError, Controller, Host};
use crate::confine::landlock::LandlockError;
use crate::confine::namespaces::{PreparedNamespaces, UserMaps};
use crate::confine::*;
use crate::probe::{self, Outcome};
use crate::skip::{self, require};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

fn executable(path: &Path, body: &str) -> PathBuf {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.canonicalize().unwrap()
}

/// Run `program` confined by `prepared`, with `env`, and return what it did.
fn run_confined(prepared: Prepared, program: &Path, env: &[(&str, &OsStr)]) -> Output {
    let prepared = Arc::new(prepared);
    let mut command = Command::new(program);
    command.env_clear().stdin(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    if let Some(tmp) = prepared.tmpdir() {
        command.env("TMPDIR", tmp);
    }
    let child_side = Arc::clone(&prepared);
    // SAFETY: the closure only makes system calls on data prepared before the fork.
    unsafe {
        command.pre_exec(move || child_side.apply_all().map_err(std::io::Error::from));
    }
    let output = command.output().unwrap();
    drop(prepared);
    output
}

/// Let every user reach and run what a test made in `dir` (a root dispatcher's adapter runs
/// as `nobody`, SPEC §13.2; `tempdir` makes folders 0700).
fn open_up(dir: &Path) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn landlock_probe_refuses_a_file_outside() {
    require!(skip::landlock(3));
    let report = probe::landlock_fs().unwrap();
    assert_eq!(
        report.outcome,
        Outcome::Refused {
            errno: libc::EACCES
        },
        "{report:?}"
    );
    assert!(report.held());
}

#[test]
fn landlock_scopes_refuse_signalling_the_parent_and_abstract_sockets() {
    require!(skip::landlock(6));
    let signal = probe::landlock_signal_scope().unwrap().unwrap();
    assert_eq!(
        signal.outcome,
        Outcome::Refused { errno: libc::EPERM },
        "{signal:?}"
    );
    let unix = probe::landlock_abstract_unix_scope().unwrap().unwrap();
    assert_eq!(
        unix.outcome,
        Outcome::Refused { errno: libc::EPERM },
        "{unix:?}"
    );
}

#[test]
fn a_new_network_namespace_has_no_route_to_the_hosts_loopback() {
    require!(skip::root());
    let report = probe::network(&PreparedNamespaces {
        user: None,
        network: true,
        proxy: None,
    })
    .unwrap();
    assert_eq!(
        report.outcome,
        Outcome::Refused {
            errno: libc::ENETUNREACH
        },
        "{report:?}"
    );
}

#[test]
fn an_unprivileged_child_makes_its_own_user_and_network_namespace() {
    require!(skip::root());
    // As nobody, the child cannot write its map from outside nor (non-dumpable after the
    // uid change) open its own without becoming dumpable again: the user-namespace way.
    let netns = PreparedNamespaces {
        user: Some(UserMaps::identity(65534, 65534)),
        network: true,
        proxy: None,
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target = listener.local_addr().unwrap();
    let outcome = probe::fork_probe(|| {
        use rustix::process::{Gid, Uid};
        let drop_root = rustix::thread::set_thread_groups(&[])
            .and_then(|()| rustix::thread::set_thread_gid(Gid::from_raw(65534)))
            .and_then(|()| rustix::thread::set_thread_uid(Uid::from_raw(65534)));
        if let Err(errno) = drop_root {
            return probe::Record::Failed(ChildError {
                step: Step::Control,
                errno,
            });
        }
        if let Err(errno) = netns.enter_user().and_then(|()| netns.enter_network()) {
            return probe::Record::Failed(ChildError {
                step: Step::Namespaces,
                errno,
            });
        }
        if rustix::process::getuid().as_raw() != 65534 {
            return probe::Record::Failed(ChildError {
                step: Step::Control,
                errno: Errno::INVAL,
            });
        }
        let socket = match rustix::net::socket(
            rustix::net::AddressFamily::INET,
            rustix::net::SocketType::STREAM,
            None,
        ) {
            Ok(s) => s,
            Err(errno) => {
                return probe::Record::Failed(ChildError {
                    step: Step::Control,
                    errno,
                })
            }
        };
        match rustix::net::connect(&socket, &target) {
            Ok(()) => probe::Record::NotRefused(0),
            Err(errno) => probe::Record::Refused(errno),
        }
    });
    assert_eq!(
        outcome,
        Outcome::Refused {
            errno: libc::ENETUNREACH
        }
    );
}

#[test]
fn pids_probe_is_refused_and_counted_on_cgroup_v1() {
    require!(skip::cgroup_v1(Controller::Pids));
    require!(skip::cgroup(Controller::Pids));
    let host = Host::read();
    let report = probe::pids(&host).unwrap();
    assert_eq!(
        report.outcome,
        Outcome::Refused {
            errno: libc::EAGAIN
        },
        "{report:?}"
    );
    assert!(report.counter >= Some(1), "{report:?}");
}

#[test]
fn memory_probe_is_oom_killed_and_counted() {
    require!(skip::cgroup(Controller::Memory));
    let host = Host::read();
    let report = probe::memory(&host).unwrap();
    assert_eq!(
        report.outcome,
        Outcome::Killed {
            signal: libc::SIGKILL
        },
        "{report:?}"
    );
    assert!(report.counter >= Some(1), "{report:?}");
}

#[test]
fn seccomp_probe_answers_eperm_to_every_attempt() {
    let report = probe::seccomp().unwrap();
    assert_eq!(
        report.outcome,
        Outcome::Refused { errno: libc::EPERM },
        "{report:?}"
    );
}

#[test]
fn no_new_privs_probe_cannot_clear_the_bit() {
    let report = probe::no_new_privs();
    assert_eq!(
        report.outcome,
        Outcome::Refused {
            errno: libc::EINVAL
        },
        "{report:?}"
    );
    assert!(report.held());
}

#[test]
fn rlimit_probes_hold() {
    let size = probe::file_size().unwrap();
    assert_eq!(
        size.outcome,
        Outcome::Killed {
            signal: libc::SIGXFSZ
        },
        "{size:?}"
    );
    let files = probe::open_files().unwrap();
    assert_eq!(
        files.outcome,
        Outcome::Refused {
            errno: libc::EINVAL
        },
        "{files:?}"
    );
}

#[test]
fn the_call_cgroup_on_v1_is_limited_and_removed() {
    require!(skip::cgroup_v1(Controller::Memory));
    require!(skip::cgroup_v1(Controller::Pids));
    require!(skip::cgroup(Controller::Memory));
    require!(skip::cgroup(Controller::Pids));
    let host = Host::read();
    let limits = cgroup::Limits {
        memory_bytes: Some(32 << 20),
        pids: Some(8),
    };
    let call = cgroup::CallCgroup::create(&host, &limits).unwrap();
    let dirs: Vec<PathBuf> = call.dirs().iter().map(|d| d.to_path_buf()).collect();
    assert_eq!(
        dirs.len(),
        2,
        "memory and pids are separate v1 hierarchies here"
    );
    let memory = dirs
        .iter()
        .find(|d| d.join("memory.limit_in_bytes").exists())
        .unwrap();
    let limit = std::fs::read_to_string(memory.join("memory.limit_in_bytes")).unwrap();
    assert_eq!(limit.trim(), (32u64 << 20).to_string());
    let pids = dirs.iter().find(|d| d.join("pids.max").exists()).unwrap();
    assert_eq!(
        std::fs::read_to_string(pids.join("pids.max"))
            .unwrap()
            .trim(),
        "8"
    );
    assert_eq!(call.counters().limit_hit(), None);
    assert!(!call.kill(), "v1 has no cgroup.kill");
    drop(call);
    assert!(dirs.iter().all(|d| !d.exists()), "removed on drop");
}

#[test]
fn unavailable_names_every_missing_piece() {
    let options = Options {
        limit_memory_bytes: Some(1 << 20),
        limit_pids: Some(4),
        ..Options::default()
    };
    let run = Run {
        program: Path::new("/bin/true"),
        path_var: None,
        transport_dir: None,
        tmp_parent: Path::new("/tmp"),
    };
    let err = Prepared::prepare(&options, &run, Host::default).unwrap_err();
    assert_eq!(err.missing(), vec!["cgroup_memory", "cgroup_pids"]);
    assert!(
        err.to_string()
            .contains("no cgroup hierarchy has the memory controller"),
        "{err}"
    );
    assert!(Prepared::prepare(&Options::default(), &run, Host::default)
        .unwrap()
        .is_none());
    assert_eq!(CgroupError::NoController("pids").missing(), "cgroup_pids");
}

#[test]
fn a_confined_adapter_reads_its_grants_and_nothing_else() {
    let work = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("input"), "granted\n").unwrap();
    std::fs::write(other.path().join("secret"), "SECRET\n").unwrap();
    let adapter = executable(
        &work.path().join("adapter"),
        &format!(
            "#!/bin/sh\n\
             cat {input}\n\
             cat {secret} || echo 'secret refused'\n\
             cat /etc/shadow || echo 'shadow refused'\n\
             cat /etc/profile || echo 'profile refused'\n\
             head -c 4 /etc/passwd; echo\n\
             grep -q localhost /etc/hosts && echo hosts\n\
             echo tmp > \"$TMPDIR/x\" && cat \"$TMPDIR/x\"\n\
             echo no > {work}/written || echo 'read-only refused'\n\
             echo hi > /dev/null && echo devnull\n",
            input = work.path().join("input").display(),
            secret = other.path().join("secret").display(),
            work = work.path().display(),
        ),
    );
    let options = Options {
        fs_read: vec![work.path().canonicalize().unwrap()],
        ..Options::default()
    };
    let path = OsStr::new("/usr/bin:/bin");
    let run = Run {
        program: &adapter,
        path_var: Some(path),
        transport_dir: None,
        tmp_parent: &std::env::temp_dir(),
    };
    let prepared = Prepared::prepare(&options, &run, Host::read)
        .unwrap()
        .unwrap();
    let tmp = prepared.tmpdir().unwrap().to_path_buf();
    let out = run_confined(prepared, &adapter, &[("PATH", path)]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        text(&out.stdout),
        "granted\nsecret refused\nshadow refused\nprofile refused\nroot\nhosts\ntmp\nread-only refused\n\
         devnull\n"
    );
    let stderr = text(&out.stderr);
    assert_eq!(stderr.matches("Permission denied").count(), 4, "{stderr}");
    assert!(
        !tmp.exists(),
        "the private TMPDIR is removed with the prepared run"
    );
    assert!(!work.path().join("written").exists());
}

#[test]
fn a_confined_adapter_cannot_use_filtered_calls_or_the_network() {
    let work = tempfile::tempdir().unwrap();
    let adapter = executable(
        &work.path().join("adapter"),
        "#!/bin/sh\ncat /proc/self/status | grep -E '^(Uid|CapEff|CapBnd|NoNewPrivs|Seccomp):'\n",
    );
    open_up(work.path());
    let options = Options {
        network: Network::None,
        ..Options::default()
    };
    let run = Run {
        program: &adapter,
        path_var: None,
        transport_dir: None,
        tmp_parent: &std::env::temp_dir(),
    };
    let prepared = Prepared::prepare(&options, &run, Host::read)
        .unwrap()
        .unwrap();
    let landlock = prepared
        .landlock
        .as_ref()
        .expect("Landlock always (SPEC §13.2)");
    assert!(
        !landlock.handles_fs && landlock.scoped,
        "no --fs-*: the scopes only"
    );
    let out = run_confined(prepared, &adapter, &[("PATH", OsStr::new("/usr/bin:/bin"))]);
    assert!(out.status.success(), "{out:?}");
    let uid = if rustix::process::geteuid().is_root() {
        65534
    } else {
        rustix::process::geteuid().as_raw()
    };
    assert_eq!(
        text(&out.stdout),
        format!(
            "Uid:\t{uid}\t{uid}\t{uid}\t{uid}\nCapEff:\t0000000000000000\n\
             CapBnd:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n"
        )
    );
    assert_eq!(text(&out.stderr), "");
}

/// A pyenv-like installation under a home directory: `#!/usr/bin/env python3` finds a shim
/// that is itself a script.
fn fake_pyenv(home: &Path) -> (PathBuf, PathBuf, String) {
    let shims = home.join(".pyenv/shims");
    std::fs::create_dir_all(&shims).unwrap();
    let shim = executable(
        &shims.join("python3"),
        "#!/usr/bin/env bash\necho \"shim ran $1\"\n",
    );
    let adapter = executable(&home.join("adapter.py"), "#!/usr/bin/env python3\n");
    let path = format!("{}:/usr/bin:/bin", shims.display());
    (shim, adapter, path)
}

#[test]
fn an_interpreter_outside_the_base_is_named_and_one_fs_read_fixes_it() {
    let home = tempfile::tempdir().unwrap();
    let (shim, adapter, path) = fake_pyenv(home.path());
    let run = Run {
        program: &adapter,
        path_var: Some(OsStr::new(&path)),
        transport_dir: None,
        tmp_parent: &std::env::temp_dir(),
    };
    let work = tempfile::tempdir().unwrap();
    let options = Options {
        fs_read: vec![work.path().canonicalize().unwrap()],
        ..Options::default()
    };
    let err = Prepared::prepare(&options, &run, Host::read).unwrap_err();
    let pyenv = home.path().canonicalize().unwrap().join(".pyenv");
    assert_eq!(err.missing(), vec!["fs_read_interpreter"]);
    assert!(
        err.to_string().contains(&shim.display().to_string()),
        "{err}"
    );
    assert!(
        err.to_string().contains(&format!(
            "allow it and its libraries with --fs-read {}",
            pyenv.display()
        )),
        "{err}"
    );
    let direct = landlock::prepare(&landlock::FsRequest {
        read: &options.fs_read,
        write: &[],
        program: &adapter,
        path_var: run.path_var,
        transport_dir: None,
        tmpdir: run.tmp_parent,
        handle_fs: true,
    })
    .unwrap_err();
    assert!(
        matches!(direct, LandlockError::InterpreterOutsideBase { ref interpreter, .. } if *interpreter == shim)
    );

    let options = Options {
        fs_read: vec![pyenv],
        ..Options::default()
    };
    let prepared = Prepared::prepare(&options, &run, Host::read)
        .unwrap()
        .unwrap();
    let out = run_confined(prepared, &adapter, &[("PATH", OsStr::new(&path))]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        text(&out.stdout),
        format!("shim ran {}\n", adapter.display())
    );
}

#[test]
fn a_file_size_kill_is_reported_as_the_file_size_limit() {
    let run = Run {
        program: Path::new("/bin/true"),
        path_var: None,
        transport_dir: None,
        tmp_parent: Path::new("/tmp"),
    };
    let options = Options {
        limit_file_size_bytes: Some(0),
        ..Options::default()
    };
    let prepared = Prepared::prepare(&options, &run, Host::default)
        .unwrap()
        .unwrap();
    assert_eq!(
        prepared.limit_hit(Some(libc::SIGXFSZ)),
        Some(Limit::FileSize)
    );
    assert_eq!(prepared.limit_hit(Some(libc::SIGKILL)), None);
    assert_eq!(prepared.limit_hit(None), None);
}

#[test]
fn a_pids_limit_hit_by_an_adapter_is_reported() {
    require!(skip::cgroup(Controller::Pids));
    let work = tempfile::tempdir().unwrap();
    let adapter = executable(
        &work.path().join("adapter"),
        "#!/bin/sh\n{ sleep 1 & sleep 1 & sleep 1 & sleep 1 & } 2>/dev/null\nexit 3\n",
    );
    let options = Options {
        limit_pids: Some(3),
        ..Options::default()
    };
    let run = Run {
        program: &adapter,
        path_var: None,
        transport_dir: None,
        tmp_parent: &std::env::temp_dir(),
    };
    let prepared = Prepared::prepare(&options, &run, Host::read)
        .unwrap()
        .unwrap();
    let prepared = Arc::new(prepared);
    let child_side = Arc::clone(&prepared);
    let mut command = Command::new(&adapter);
    command.env_clear().env("PATH", "/usr/bin:/bin");
    // SAFETY: system calls on prepared data only.
    unsafe {
        command.pre_exec(move || child_side.apply_all().map_err(std::io::Error::from));
    }
    let out = command.output().unwrap();
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(prepared.limit_hit(None), Some(Limit::Pids), "{out:?}");
}
