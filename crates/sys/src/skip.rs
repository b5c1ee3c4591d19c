//! Tests that say what they did not do (test scaffolding: compiled for the unit tests and with
//! `test-support`, never into the product).
//!
//! A test that needs something of the host — root, a kernel feature, a cgroup controller this
//! user may use, a program on `PATH` — asks for it with one of the probes here, each of which
//! tries the real capability (no guess from a version number or a file's presence when the
//! thing itself can be tried). When the host cannot, the test reports
//! `skipped: TEST: REASON` and passes:
//!
//! - on the process's standard error descriptor directly, which the test harness does not
//!   capture, so the line is in plain `cargo test` output next to the test's `ok`;
//! - appended to `test-skips.txt` in the build's profile folder (`target/debug/`), which
//!   `.ci/run` empties before the tests and prints after them.
//!
//! A need named in `PTD_TEST_REQUIRE` (words separated by blanks or commas, e.g.
//! `mcp-filesystem-server`) is never skipped: the test fails instead, so a machine
//! that installed something for the tests (CI) cannot lose the test to a broken install.
//!
//! Must not: decide anything for the product; be reachable from the product's binary.

use std::io::Write;
use std::path::PathBuf;

/// A need of a test that this host does not meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmet {
    /// The need's stable name (what `PTD_TEST_REQUIRE` lists).
    pub need: &'static str,
    /// Why it is unmet, for the `skipped:` line.
    pub reason: String,
}

/// What a probe answers: `Ok` when the host meets the need.
pub type Need = Result<(), Unmet>;

/// An unmet need, named.
pub fn unmet(need: &'static str, reason: impl Into<String>) -> Need {
    Err(Unmet {
        need,
        reason: reason.into(),
    })
}

/// Report that the running test skipped (all of it, or the part its caller names in `reason`)
/// because of `unmet`. Panics instead when `PTD_TEST_REQUIRE` lists the need.
#[track_caller]
pub fn report(unmet: &Unmet) {
    let test = std::thread::current()
        .name()
        .unwrap_or("(unnamed test)")
        .to_string();
    let line = match skip_line(&test, unmet, &required()) {
        Ok(line) => line,
        Err(refusal) => panic!("{refusal}"),
    };
    // Straight to the descriptor: the harness captures `eprint!`, not fd 2.
    let _ = rustix::io::write(rustix::stdio::stderr(), line.as_bytes());
    if let Some(file) = summary_file() {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        // A build folder this user cannot write: the stderr line is the report.
        let _ = appended;
    }
}

/// The `skipped:` line for `test`, or why it may not skip (its need is in `required`).
fn skip_line(test: &str, unmet: &Unmet, required: &[String]) -> Result<String, String> {
    if required.iter().any(|need| need == unmet.need) {
        return Err(format!(
            "{test}: needs {} ({}), which PTD_TEST_REQUIRE says this host has",
            unmet.need, unmet.reason
        ));
    }
    Ok(format!("skipped: {test}: {}\n", unmet.reason))
}

/// The needs `PTD_TEST_REQUIRE` lists.
fn required() -> Vec<String> {
    std::env::var("PTD_TEST_REQUIRE")
        .unwrap_or_default()
        .split([' ', ',', '\t', '\n'])
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// `test-skips.txt` in the profile folder of the running test binary (`target/debug/`; test
/// binaries live in its `deps/`).
pub(crate) fn summary_file() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let mut dir = exe.parent()?;
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir = dir.parent()?;
    }
    Some(dir.join("test-skips.txt"))
}

/// Run the rest of the test only when `$need` is met; else report the skip and return.
#[cfg(test)]
macro_rules! require {
    ($need:expr) => {
        if let Err(unmet) = $need {
            $crate::skip::report(&unmet);
            return;
        }
    };
}
#[cfg(test)]
pub(crate) use require;

/// The process runs as root (effective uid 0).
pub fn root() -> Need {
    let euid = rustix::process::geteuid().as_raw();
    if euid == 0 {
        Ok(())
    } else {
        unmet(
            "root",
            format!("needs root (this process runs as uid {euid})"),
        )
    }
}

/// The kernel has Landlock, at ABI `min` or later (asked of the kernel).
pub fn landlock(min: u32) -> Need {
    match crate::confine::landlock::kernel_abi() {
        Ok(abi) if abi >= min => Ok(()),
        Ok(abi) => unmet(
            "landlock",
            format!("needs Landlock ABI {min} or later (this kernel has ABI {abi})"),
        ),
        Err(errno) => unmet(
            "landlock",
            format!("needs Landlock, which this kernel does not offer ({errno})"),
        ),
    }
}

/// This user can make a network namespace: directly as root, else inside a user namespace of
/// its own (a child process tries both; unprivileged user namespaces may be turned off).
pub fn network_namespace() -> Need {
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    let netns = crate::confine::namespaces::PreparedNamespaces {
        user: (uid != 0).then(|| crate::confine::namespaces::UserMaps::identity(uid, gid)),
        network: true,
        proxy: None,
    };
    match crate::probe::network(&netns) {
        Ok(probe) => match probe.outcome {
            crate::probe::Outcome::SetupFailed { step, errno } => unmet(
                "namespaces",
                format!(
                    "needs a user and network namespace, which uid {uid} may not make here \
                     ({step:?}: errno {errno})"
                ),
            ),
            _ => Ok(()),
        },
        Err(err) => unmet(
            "namespaces",
            format!("cannot probe namespaces here ({err})"),
        ),
    }
}

/// This user can make a cgroup for a call with `controller` (`memory` or `pids`) and write its
/// limit: what `--limit-memory` / `--limit-pids` need. Tried by making one, then removing it.
pub fn cgroup(controller: crate::confine::cgroup::Controller) -> Need {
    use crate::confine::cgroup::{CallCgroup, Controller, Host, Limits};
    let limits = Limits {
        memory_bytes: (controller == Controller::Memory).then_some(64 << 20),
        pids: (controller == Controller::Pids).then_some(64),
    };
    match CallCgroup::create(&Host::read(), &limits) {
        Ok(_made_and_removed) => Ok(()),
        Err(errors) => unmet(
            "cgroup",
            format!(
                "needs a {} cgroup this user may make ({})",
                controller.as_str(),
                errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ),
    }
}

#[cfg(test)] // only the tests call it
/// `controller` is used through cgroup v1 on this host (a test of v1's own layout).
pub(crate) fn cgroup_v1(controller: crate::confine::cgroup::Controller) -> Need {
    use crate::confine::cgroup::{Host, Version};
    match Host::read().locate(controller) {
        Ok(location) if location.version == Version::V1 => Ok(()),
        Ok(_) => unmet(
            "cgroup-v1",
            format!(
                "tests cgroup v1's layout, and this host's {} controller is in cgroup v2",
                controller.as_str()
            ),
        ),
        Err(err) => unmet("cgroup-v1", format!("tests cgroup v1's layout: {err}")),
    }
}

/// A real PostgreSQL for the PostgreSQL ledger's tests: the server's programs are installed,
/// run as the cluster's owner (the `postgres` user when the tests run as root), and the
/// process's throwaway cluster ([`crate::pgtest::cluster`]) started. The need's name:
/// `postgres`.
pub fn postgres() -> Need {
    crate::pgtest::postgres()
}

/// A connection pooler in front of the PostgreSQL test cluster: `pgbouncer` installed and
/// started ([`crate::pgtest::pooler`]). The need's name: `pgbouncer`.
pub fn pgbouncer() -> Need {
    crate::pgtest::pgbouncer()
}

/// A program found on `PATH` (or at this path) that runs: `args` must make it exit 0.
pub fn program(name: &'static str, args: &[&str]) -> Need {
    match std::process::Command::new(name)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
    {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => unmet(
            name,
            format!(
                "needs `{name}`, which did not run here (`{name} {}`: {status})",
                args.join(" ")
            ),
        ),
        Err(err) => unmet(name, format!("needs `{name}` on PATH ({err})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_one_line_and_a_required_need_fails_instead() {
        let unmet = Unmet {
            need: "groff",
            reason: "needs `groff` on PATH".to_string(),
        };
        assert_eq!(
            skip_line("man_pages::render", &unmet, &[]),
            Ok("skipped: man_pages::render: needs `groff` on PATH\n".to_string())
        );
        let required = ["git".to_string(), "groff".to_string()];
        let refused = skip_line("man_pages::render", &unmet, &required).unwrap_err();
        assert!(refused.contains("PTD_TEST_REQUIRE"), "{refused}");
    }

    #[test]
    fn the_summary_file_is_in_the_profile_folder() {
        let file = summary_file().unwrap();
        assert_eq!(file.file_name().unwrap(), "test-skips.txt");
        assert_ne!(file.parent().unwrap().file_name().unwrap(), "deps");
    }
}
