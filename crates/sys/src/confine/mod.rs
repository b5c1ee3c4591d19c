//! Confinement of what the dispatcher starts (SPEC §13): the building blocks `exec/` puts in
//! the child's one ordered set-up (SPEC §13.1).
//!
//! Each mechanism has a file: [`options`] (the flags and variables, checked), [`landlock`]
//! (+ [`interpreter`], the program's `#!` chain), [`seccomp`], [`cgroup`], [`rlimit`],
//! [`namespaces`], [`proxy`] (the proxy's listener of `--network allow:`, SPEC §17, handed
//! from the adapter's network namespace to the dispatcher), [`creds`] (who the adapter runs
//! as); [`allow`] reads SPEC §17's allow rules. `crate::probe` proves each on the running
//! kernel (what `doctor` runs). [`Prepared`] gathers them for one run.
//!
//! Invariants:
//! - two halves per mechanism: a *prepare* step in the parent, before the fork, that does
//!   everything that can allocate or fail for a reason other than the kernel refusing (open
//!   descriptors, build the Landlock ruleset, compile the BPF program, make and limit the
//!   cgroup, format the uid map); and a *child* step that makes system calls only — no
//!   allocation, no lock, no panic path — so it is safe between `fork` and `execve` in a
//!   multi-threaded parent;
//! - fail closed: a requested mechanism that cannot be put in place is an error naming what is
//!   missing ([`Unavailable::missing`]), before anything runs; a child step that fails is a
//!   [`ChildError`] naming the step, and the adapter must not be executed then;
//! - the child steps are called in SPEC §13.1's and §13.2's order: [`Prepared::join_cgroups`]
//!   → [`Prepared::set_rlimits`] → [`Prepared::enter_namespaces`] (user, mount and PID,
//!   network, then — `--network allow:` — the proxy's listener handed to the dispatcher, so
//!   that the init never holds it) → (`exec/` forks the PID
//!   namespace's init) → [`Prepared::in_pid_namespace`] → (the init forks the adapter's
//!   process) → [`Prepared::drop_privileges`] → (`close_range`, `exec/`'s) →
//!   [`set_no_new_privs`] → [`Prepared::restrict_landlock`] → [`Prepared::apply_seccomp`];
//! - what a child step gives the dispatcher travels over a descriptor prepared before the fork:
//!   the refused step's code (`exec/`'s report pipe) and, under `--network allow:`, the
//!   proxy's listener ([`Prepared::proxy_receiver`]), which the dispatcher checks before use.
//!
//! Must not: spawn, wait for or signal the adapter (that is `exec/`), know JSON or envelopes.

pub mod allow;
pub mod attack;
pub mod cgroup;
pub mod creds;
pub mod interpreter;
pub mod landlock;
pub mod namespaces;
pub mod options;
pub mod proxy;
pub mod rlimit;
pub mod seccomp;

pub use options::{Network, OptionError, OptionName, Options, RawOptions};

use cgroup::{CallCgroup, Host, Limits};
use creds::Credentials;
use landlock::{FsRequest, PreparedLandlock};
use namespaces::{PreparedNamespaces, UserMaps};
use proxy::{ProxyChildEnd, ProxyParentEnd, ProxyReceiver};
use rlimit::Rlimits;
use rustix::io::Errno;
use seccomp::Filter;
use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The most entries of the file transport's private folder handed to the run-as user (the
/// dispatcher put one or two files there).
const TRANSPORT_ENTRIES: usize = 1024;

/// A child-side step of SPEC §13.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    JoinCgroups,
    Rlimits,
    /// The network namespace (`--network none`, `--network allow:`).
    Namespaces,
    NoNewPrivs,
    Landlock,
    Seccomp,
    /// A probe's control: something the mechanism must still allow did not work.
    Control,
    /// The user namespace of a dispatcher that is not root.
    UserNamespace,
    /// The mount and PID namespaces, their init and its fresh `/proc`.
    PidNamespace,
    /// Dropping to the run-as user with no capability (SPEC §13.2).
    Privileges,
    /// `--network allow:`: the loopback brought up and the proxy's listener handed to the
    /// dispatcher (SPEC §17).
    NetworkProxy,
}

impl Step {
    pub fn as_str(self) -> &'static str {
        match self {
            Step::JoinCgroups => "join_cgroups",
            Step::Rlimits => "rlimits",
            Step::Namespaces => "namespaces",
            Step::NoNewPrivs => "no_new_privs",
            Step::Landlock => "landlock",
            Step::Seccomp => "seccomp",
            Step::Control => "control",
            Step::UserNamespace => "user_namespace",
            Step::PidNamespace => "pid_namespace",
            Step::Privileges => "privileges",
            Step::NetworkProxy => "network_proxy",
        }
    }

    pub(crate) fn from_index(i: u8) -> Step {
        match i {
            0 => Step::JoinCgroups,
            1 => Step::Rlimits,
            2 => Step::Namespaces,
            3 => Step::NoNewPrivs,
            4 => Step::Landlock,
            5 => Step::Seccomp,
            7 => Step::UserNamespace,
            8 => Step::PidNamespace,
            9 => Step::Privileges,
            10 => Step::NetworkProxy,
            _ => Step::Control,
        }
    }

    pub(crate) fn index(self) -> u8 {
        self as u8
    }

    /// What SPEC §13's `error.details.missing` names when the kernel refused this step in
    /// the child (the adapter was not started).
    pub fn missing(self) -> &'static str {
        match self {
            Step::JoinCgroups => "cgroup_join",
            Step::Rlimits => "rlimits",
            Step::Namespaces => "network_namespace",
            Step::NoNewPrivs => "no_new_privs",
            Step::Landlock => "landlock",
            Step::Seccomp => "seccomp",
            Step::Control => "control",
            Step::UserNamespace => "user_namespace",
            Step::PidNamespace => "pid_namespace",
            Step::Privileges => "user",
            Step::NetworkProxy => "network_proxy",
        }
    }

    /// The step a byte written by [`ChildError::code`] names.
    pub(crate) fn from_code(code: u8) -> Step {
        Step::from_index(code)
    }
}

/// A child-side step the kernel refused. Plain data (no allocation), so the child can carry it
/// to the exec-error pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildError {
    pub step: Step,
    pub errno: Errno,
}

impl ChildError {
    /// One byte naming the step, for a child to write to its parent (no allocation).
    pub fn code(&self) -> u8 {
        self.step.index()
    }
}

impl fmt::Display for ChildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "confinement step {} failed: {}",
            self.step.as_str(),
            self.errno
        )
    }
}

impl std::error::Error for ChildError {}

impl From<ChildError> for std::io::Error {
    fn from(e: ChildError) -> std::io::Error {
        std::io::Error::from_raw_os_error(e.errno.raw_os_error())
    }
}

/// `no_new_privs` (child side: one `prctl`).
pub(crate) fn set_no_new_privs() -> Result<(), ChildError> {
    rustix::thread::set_no_new_privs(true).map_err(|errno| ChildError {
        step: Step::NoNewPrivs,
        errno,
    })
}

/// Requested confinement that this host cannot put in place: every missing piece, each with
/// its `error.details.missing` name and a sentence for the human.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// `(missing, message)` pairs, in the order of the mechanisms.
    pub missing: Vec<(String, String)>,
}

impl Unavailable {
    /// The names for `error.details.missing`.
    pub fn missing(&self) -> Vec<&str> {
        self.missing.iter().map(|(m, _)| m.as_str()).collect()
    }
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("confinement is unavailable: ")?;
        for (i, (_, message)) in self.missing.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            f.write_str(message)?;
        }
        Ok(())
    }
}

impl std::error::Error for Unavailable {}

/// What one run's child needs besides the options.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// The program `execve` will run.
    pub program: &'a Path,
    /// The child's `PATH`.
    pub path_var: Option<&'a OsStr>,
    /// The file transport's private folder, if any (given to the run-as user).
    pub transport_dir: Option<&'a Path>,
    /// Where the private `TMPDIR` is made.
    pub tmp_parent: &'a Path,
}

/// Everything prepared for one confined run (before the fork). Dropping it removes the
/// private `TMPDIR` and the call's cgroup: keep it until the adapter's tree is reaped.
#[derive(Debug)]
pub struct Prepared {
    /// `None` where there is nothing for Landlock to enforce (no `--fs-*` and a kernel
    /// without scopes).
    pub landlock: Option<PreparedLandlock>,
    pub seccomp: Filter,
    pub cgroup: Option<CallCgroup>,
    pub rlimits: Rlimits,
    pub namespaces: PreparedNamespaces,
    /// Who the adapter runs as (SPEC §13.2).
    pub credentials: Credentials,
    /// The private `TMPDIR` (0700, the run-as user's; removed when this value is dropped).
    tmpdir: tempfile::TempDir,
    /// `--network allow:`: the dispatcher's end of the proxy's handoff (SPEC §17).
    proxy: Option<ProxyParentEnd>,
}

/// The limit SPEC §13's `error.details.limit` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Memory,
    Pids,
    FileSize,
    /// Named by SPEC §13, never inferred here: a hit `RLIMIT_NOFILE` is only an `EMFILE`
    /// inside the adapter, which leaves no trace the dispatcher can read.
    OpenFiles,
}

impl Limit {
    /// The option that sets this limit, for messages.
    pub fn flag(self) -> &'static str {
        match self {
            Limit::Memory => OptionName::LimitMemory.flag(),
            Limit::Pids => OptionName::LimitPids.flag(),
            Limit::FileSize => OptionName::LimitFileSize.flag(),
            Limit::OpenFiles => OptionName::LimitOpenFiles.flag(),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Memory => "memory",
            Limit::Pids => "pids",
            Limit::FileSize => "file_size",
            Limit::OpenFiles => "open_files",
        }
    }
}

/// The private `TMPDIR`: 0700 whatever the umask (SPEC §13), owned by the run-as user.
fn make_tmpdir(parent: &Path, credentials: &Credentials) -> Result<tempfile::TempDir, String> {
    let dir = tempfile::Builder::new()
        .prefix("ptd-tmp-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in(parent)
        .map_err(|e| e.to_string())?;
    give_to(dir.path(), credentials)?;
    Ok(dir)
}

/// Hand a folder the dispatcher made for the adapter (the private `TMPDIR`, the file
/// transport's folder) to the run-as user. Nothing to do when the adapter stays the
/// dispatcher's user.
pub(crate) fn give_to(dir: &Path, credentials: &Credentials) -> Result<(), String> {
    if !credentials.change_ids {
        return Ok(());
    }
    std::os::unix::fs::lchown(dir, Some(credentials.uid), Some(credentials.gid)).map_err(|e| {
        format!(
            "cannot give {} to uid {}: {e}",
            dir.display(),
            credentials.uid
        )
    })
}

/// `--network allow:`: both ends of the proxy's handoff (SPEC §17), or the missing piece.
fn prepare_proxy(
    network: Network,
    missing: &mut Vec<(String, String)>,
) -> (Option<ProxyParentEnd>, Option<ProxyChildEnd>) {
    if network != Network::Allow {
        return (None, None);
    }
    match proxy::handoff() {
        Ok((parent, child)) => (Some(parent), Some(child)),
        Err(errno) => {
            missing.push((
                "network_proxy".into(),
                format!(
                    "cannot make the socket pair that hands the proxy's listener to the \
                     dispatcher: {errno}"
                ),
            ));
            (None, None)
        }
    }
}

impl Prepared {
    /// Prepare every mechanism `options` asks for; `Ok(None)` when it asks for none. All
    /// missing pieces are collected, not only the first. `host` is asked for the cgroup
    /// mounts only when a cgroup limit is asked for (reading them parses `/proc/self/mountinfo`).
    pub fn prepare(
        options: &Options,
        run: &Run<'_>,
        host: impl FnOnce() -> Host,
    ) -> Result<Option<Prepared>, Unavailable> {
        if !options.is_requested() {
            return Ok(None);
        }
        let mut missing: Vec<(String, String)> = Vec::new();
        let credentials = Credentials::for_dispatcher(options.run_as.as_ref())
            .map_err(|e| missing.push(("user".into(), e.to_string())))
            .ok();
        let fallback = Credentials {
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
            change_ids: false,
        };
        let who = credentials.unwrap_or(fallback);
        let tmpdir = make_tmpdir(run.tmp_parent, &who)
            .map_err(|e| {
                missing.push((
                    "tmpdir".into(),
                    format!(
                        "cannot make the private TMPDIR in {}: {e}",
                        run.tmp_parent.display()
                    ),
                ))
            })
            .ok();
        if let Some(dir) = run.transport_dir {
            // The folder and what the dispatcher put in it (the request file).
            let entries = crate::fs::list_dir_path(dir, TRANSPORT_ENTRIES)
                .map(|(list, _)| {
                    list.iter()
                        .map(|e| dir.join(OsStr::from_bytes(&e.name)))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            for path in std::iter::once(dir.to_path_buf()).chain(entries) {
                if let Err(e) = give_to(&path, &who) {
                    missing.push(("transport_dir".into(), e));
                }
            }
        }
        let landlock = match &tmpdir {
            Some(dir) => {
                let tmp = std::fs::canonicalize(dir.path()).unwrap_or_else(|_| dir.path().into());
                let request = FsRequest {
                    read: &options.fs_read,
                    write: &options.fs_write,
                    program: run.program,
                    path_var: run.path_var,
                    transport_dir: run.transport_dir,
                    tmpdir: &tmp,
                    handle_fs: options.wants_landlock(),
                };
                landlock::prepare(&request)
                    .map_err(|e| missing.push((e.missing(), e.to_string())))
                    .ok()
                    .flatten()
            }
            None => None,
        };
        let seccomp = seccomp::compile(options.network)
            .map_err(|e| missing.push(("seccomp".into(), e.to_string())));
        let cgroup = if options.wants_cgroup() {
            let limits = Limits {
                memory_bytes: options.limit_memory_bytes,
                pids: options.limit_pids,
            };
            CallCgroup::create(&host(), &limits)
                .map_err(|errors| {
                    for e in errors {
                        missing.push((e.missing(), e.to_string()));
                    }
                })
                .ok()
        } else {
            None
        };
        let (proxy, proxy_child) = prepare_proxy(options.network, &mut missing);
        let namespaces = PreparedNamespaces {
            user: who
                .needs_user_namespace()
                .then(|| UserMaps::identity(who.uid, who.gid)),
            network: options.network.has_namespace(),
            proxy: proxy_child,
        };
        match (seccomp, credentials, tmpdir) {
            (Ok(seccomp), Some(credentials), Some(tmpdir)) if missing.is_empty() => {
                Ok(Some(Prepared {
                    landlock,
                    seccomp,
                    cgroup,
                    rlimits: Rlimits {
                        open_files: options.limit_open_files,
                        file_size_bytes: options.limit_file_size_bytes,
                    },
                    namespaces,
                    credentials,
                    tmpdir,
                    proxy,
                }))
            }
            _ => Err(Unavailable { missing }),
        }
    }

    /// A run with only the always-on mechanisms and the given cgroup and rlimits (unit
    /// tests of `exec/`).
    #[cfg(test)]
    pub(crate) fn bare(cgroup: Option<CallCgroup>, rlimits: Rlimits) -> Prepared {
        let credentials = Credentials::for_dispatcher(None).expect("credentials");
        let tmpdir = make_tmpdir(&std::env::temp_dir(), &credentials).expect("tmpdir");
        Prepared {
            landlock: None,
            seccomp: seccomp::compile(Network::Any).expect("seccomp"),
            cgroup,
            rlimits,
            namespaces: PreparedNamespaces {
                user: credentials
                    .needs_user_namespace()
                    .then(|| UserMaps::identity(credentials.uid, credentials.gid)),
                network: false,
                proxy: None,
            },
            credentials,
            tmpdir,
            proxy: None,
        }
    }

    /// Child step 1: join the call's cgroups.
    pub(crate) fn join_cgroups(&self) -> Result<(), ChildError> {
        match &self.cgroup {
            Some(c) => c.join().map_err(|errno| ChildError {
                step: Step::JoinCgroups,
                errno,
            }),
            None => Ok(()),
        }
    }

    /// Child step 2: the per-process limits.
    pub(crate) fn set_rlimits(&self) -> Result<(), ChildError> {
        self.rlimits.apply().map_err(|errno| ChildError {
            step: Step::Rlimits,
            errno,
        })
    }

    /// Child step 3: the new namespaces — user (not root), mount and PID, network (`--network
    /// none` and `allow:`), then under `allow:` the proxy's listener handed to the dispatcher.
    /// After it the caller's next child is PID 1 of the new PID namespace.
    pub(crate) fn enter_namespaces(&self) -> Result<(), ChildError> {
        self.enter_namespaces_with(true)
    }

    /// [`Prepared::enter_namespaces`], with or without the mount and PID namespaces (without:
    /// for a child that does not fork an init of its own, the tests' and probes'
    /// [`Prepared::apply_all`]).
    fn enter_namespaces_with(&self, pid: bool) -> Result<(), ChildError> {
        let refused = |step| move |errno| ChildError { step, errno };
        self.namespaces
            .enter_user()
            .map_err(refused(Step::UserNamespace))?;
        if pid {
            self.namespaces
                .enter_pid_and_mount()
                .map_err(refused(Step::PidNamespace))?;
        }
        self.namespaces
            .enter_network()
            .map_err(refused(Step::Namespaces))?;
        self.namespaces
            .hand_over_proxy()
            .map_err(refused(Step::NetworkProxy))
    }

    /// Child step 4, in the PID namespace's init: its own `/proc`, and Landlock's rule for it.
    pub(crate) fn in_pid_namespace(&self) -> Result<(), ChildError> {
        let refused = |errno| ChildError {
            step: Step::PidNamespace,
            errno,
        };
        namespaces::mount_proc().map_err(refused)?;
        match &self.landlock {
            Some(l) => l.grant_proc().map_err(|errno| ChildError {
                step: Step::Landlock,
                errno,
            }),
            None => Ok(()),
        }
    }

    /// Child step 5, in the adapter's process: the run-as user, no capability left.
    pub(crate) fn drop_privileges(&self) -> Result<(), ChildError> {
        self.credentials.drop_all().map_err(|errno| ChildError {
            step: Step::Privileges,
            errno,
        })
    }

    /// Child step 7 (after `close_range` and [`set_no_new_privs`]): Landlock.
    pub(crate) fn restrict_landlock(&self) -> Result<(), ChildError> {
        match &self.landlock {
            Some(l) => l.enforce().map_err(|errno| ChildError {
                step: Step::Landlock,
                errno,
            }),
            None => Ok(()),
        }
    }

    /// Child step 8, the last before `execve`: the seccomp filter.
    pub(crate) fn apply_seccomp(&self) -> Result<(), ChildError> {
        self.seccomp.apply().map_err(|errno| ChildError {
            step: Step::Seccomp,
            errno,
        })
    }

    #[cfg(test)] // only the tests call it
    /// Every child step but the PID namespace (which needs `exec/`'s fork of an init), in
    /// SPEC §13.1's order, for callers without a `close_range` of their own to put between
    /// them (the tests, `doctor`'s probes).
    pub(crate) fn apply_all(&self) -> Result<(), ChildError> {
        self.join_cgroups()?;
        self.set_rlimits()?;
        self.enter_namespaces_with(false)?;
        self.drop_privileges()?;
        set_no_new_privs()?;
        self.restrict_landlock()?;
        self.apply_seccomp()
    }

    /// Kill every process in the call's cgroup through `cgroup.kill` (SPEC §13: "in the kill
    /// ladder where available"): cgroup v2 only; `false` when there is no v2 cgroup to kill
    /// through (the ladder's own signals and sweep end the tree then).
    pub(crate) fn kill_cgroup(&self) -> bool {
        self.cgroup.as_ref().is_some_and(CallCgroup::kill)
    }

    /// `--network allow:`: the dispatcher's side of the proxy's handoff (SPEC §17), which
    /// receives the listener the child makes in the adapter's network namespace. Given out
    /// once: a second call (and any call without `allow:`) gets `None`.
    pub fn proxy_receiver(&self) -> Option<ProxyReceiver> {
        self.proxy.as_ref().and_then(ProxyParentEnd::receiver)
    }

    /// After a spawn returned (started or not): the dispatcher's copy of the child's end of the
    /// proxy's handoff closed, so the receiver reads end of file once the child's is gone.
    pub(crate) fn spawn_returned(&self) {
        if let Some(end) = &self.namespaces.proxy {
            end.close();
        }
    }

    /// Before a spawn is tried again (`ETXTBSY`): drop the listener the failed attempt sent
    /// (its namespace has no adapter).
    pub(crate) fn spawn_tried_again(&self) {
        if let Some(end) = &self.proxy {
            end.discard_sent();
        }
    }

    /// The private `TMPDIR`: the adapter's `TMPDIR`, removed when this value is dropped.
    pub fn tmpdir(&self) -> Option<&Path> {
        Some(self.tmpdir.path())
    }

    /// The mechanisms in force, in SPEC §13.1's order (for `diagnostics.dispatch.confinement`).
    pub fn mechanisms(&self) -> Vec<&'static str> {
        let mut in_force = Vec::new();
        if self.cgroup.is_some() {
            in_force.push("cgroup");
        }
        if !self.rlimits.is_empty() {
            in_force.push("rlimits");
        }
        if self.namespaces.user.is_some() {
            in_force.push("user_namespace");
        }
        in_force.push("pid_namespace");
        if self.namespaces.network {
            in_force.push("network_namespace");
        }
        if self.proxy.is_some() {
            in_force.push("network_proxy");
        }
        in_force.push("no_privileges");
        in_force.push("no_new_privs");
        if self.landlock.is_some() {
            in_force.push("landlock");
        }
        in_force.push("seccomp");
        in_force
    }

    /// The limit that was hit, when the adapter failed (SPEC §13 "A limit that was hit"):
    /// the cgroup counters first, then death by `SIGXFSZ` under `--limit-file-size`.
    pub fn limit_hit(&self, killed_by_signal: Option<i32>) -> Option<Limit> {
        if let Some(hit) = self.cgroup.as_ref().and_then(|c| c.counters().limit_hit()) {
            return Some(match hit {
                cgroup::LimitHit::Memory => Limit::Memory,
                cgroup::LimitHit::Pids => Limit::Pids,
            });
        }
        let xfsz = killed_by_signal == Some(libc::SIGXFSZ);
        (xfsz && self.rlimits.file_size_bytes.is_some()).then_some(Limit::FileSize)
    }
}
