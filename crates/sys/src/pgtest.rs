//! A throwaway PostgreSQL cluster for the tests of a PostgreSQL ledger (test scaffolding:
//! compiled for the unit tests and with `test-support`, never into the product).
//!
//! [`cluster`] starts ONE cluster per test process, the first time a test asks: a fresh 0700
//! folder (owned by the `postgres` user when the tests run as root, since the server refuses
//! to run as root), `initdb` with a scram password for the test user [`USER`], `pg_ctl start`
//! listening on `127.0.0.1` and a free port, with a private socket folder. It is stopped
//! (`pg_ctl stop -m immediate`) and its folder removed when the process exits (`atexit`), and a
//! small reaper process does the same if the test process is killed. [`fresh_database`] makes
//! a new database in it for one test, so tests run in parallel without sharing rows.
//!
//! No mock, no shared server: what the tests talk to is a real PostgreSQL.

use crate::skip::{unmet, Need};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// The cluster's superuser, whose password is [`Cluster::password`].
pub const USER: &str = "ptd_test";

/// A running cluster.
#[derive(Debug)]
pub struct Cluster {
    /// The folder holding the data, the socket and the log.
    pub dir: PathBuf,
    /// The TCP port on 127.0.0.1.
    pub port: u16,
    /// [`USER`]'s password.
    pub password: String,
    bin: PathBuf,
    /// The server's self-signed certificate, the root a TLS client trusts; `None` when the
    /// cluster has no TLS (no `openssl` to make a certificate).
    pub tls_root: Option<PathBuf>,
}

/// The newest `/usr/lib/postgresql/N/bin` that has `initdb`, `pg_ctl` and `createdb`.
fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            ["initdb", "pg_ctl", "createdb", "postgres"]
                .iter()
                .all(|p| bin.join(p).exists())
                .then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A command running `program` as the cluster's owner: the `postgres` user when this process
/// is root, else this user.
fn as_owner(program: &Path) -> Command {
    if is_root() {
        let mut cmd = Command::new("setpriv");
        cmd.args([
            "--reuid=postgres",
            "--regid=postgres",
            "--clear-groups",
            "--",
        ])
        .arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// [`crate::skip::postgres`].
pub(crate) fn postgres() -> Need {
    match cluster() {
        Ok(_) => Ok(()),
        Err(reason) => unmet("postgres", reason.clone()),
    }
}

static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
/// What the `atexit` handler stops and removes.
static STARTED: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();

/// The process's cluster, started the first time.
pub fn cluster() -> Result<&'static Cluster, &'static String> {
    CLUSTER.get_or_init(start).as_ref()
}

fn free_port() -> Result<u16, String> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

fn start() -> Result<Cluster, String> {
    let bin = bin_dir().ok_or("needs PostgreSQL's server programs (/usr/lib/postgresql/N/bin)")?;
    let owner = if is_root() {
        Some(rustix::process::Uid::from_raw(
            users_id("postgres").ok_or("needs the `postgres` user to run the server as")?,
        ))
    } else {
        None
    };
    run(
        as_owner(&bin.join("initdb")).arg("--version"),
        "initdb cannot run as the cluster's owner",
    )?;
    let dir = tempfile::Builder::new()
        .prefix("ptd-pgtest-")
        .tempdir()
        .map_err(|e| format!("no temporary folder: {e}"))?
        .keep();
    let setup = || -> Result<Cluster, String> {
        let io = |e: std::io::Error| format!("the cluster's folder: {e}");
        std::fs::create_dir(dir.join("sock")).map_err(io)?;
        let password = format!("pw-{}-{:016x}", std::process::id(), crate::fs::random_u64());
        std::fs::write(dir.join("pwfile"), format!("{password}\n")).map_err(io)?;
        if let Some(uid) = owner {
            for p in [dir.clone(), dir.join("sock"), dir.join("pwfile")] {
                rustix::fs::chown(&p, Some(uid), None).map_err(|e| io(e.into()))?;
            }
        }
        run(
            as_owner(&bin.join("initdb"))
                .arg("-D")
                .arg(dir.join("data"))
                .args(["-U", USER, "-E", "UTF8", "--no-sync", "--no-instructions"])
                .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
                .arg(format!("--pwfile={}", dir.join("pwfile").display())),
            "initdb",
        )?;
        let tls_root = server_certificate(&dir, owner);
        let tls = match &tls_root {
            Some(_) => format!(
                " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                dir.join("server.crt").display(),
                dir.join("server.key").display()
            ),
            None => String::new(),
        };
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port()?;
            let opts = format!(
                "-h 127.0.0.1 -p {port} -k {} -c fsync=off -c max_connections=200{tls}",
                dir.join("sock").display()
            );
            let started = run(
                as_owner(&bin.join("pg_ctl"))
                    .arg("-D")
                    .arg(dir.join("data"))
                    .args(["-w", "-t", "60", "-o", &opts, "-l"])
                    .arg(dir.join("log"))
                    .arg("start"),
                "pg_ctl start",
            );
            match started {
                Ok(()) => {
                    return Ok(Cluster {
                        dir: dir.clone(),
                        port,
                        password,
                        bin: bin.clone(),
                        tls_root: tls_root.clone(),
                    })
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    };
    match setup() {
        Ok(cluster) => {
            let _ = STARTED.set((cluster.bin.clone(), dir.clone()));
            // SAFETY: `stop_at_exit` is an `extern "C" fn()` that never unwinds (it catches
            // nothing that can panic: only process starts whose errors it ignores).
            unsafe { libc::atexit(stop_at_exit) };
            reaper(&cluster.bin, &dir);
            Ok(cluster)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(format!("a PostgreSQL cluster cannot be started here ({e})"))
        }
    }
}

/// A test authority, and a certificate it signed for `127.0.0.1` (and `localhost`) with its key,
/// made in `dir` by `openssl` and given to the cluster's owner (the key 0600, as the server
/// demands), so that the server also speaks TLS; the authority's certificate (the root a client
/// trusts), or `None` where `openssl` cannot make them (the cluster then has no TLS, and the TLS
/// tests say so).
fn server_certificate(dir: &Path, owner: Option<rustix::process::Uid>) -> Option<PathBuf> {
    let (ca, ca_key) = (dir.join("ca.crt"), dir.join("ca.key"));
    let (crt, key) = (dir.join("server.crt"), dir.join("server.key"));
    let openssl = |args: &[&str], extra: &[&Path]| {
        Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .args(args)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let authority = openssl(
        &["-subj", "/CN=ptd-test-ca", "-keyout"],
        &[&ca_key, Path::new("-out"), &ca],
    );
    let server = authority
        && openssl(
            &[
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1,DNS:localhost",
                "-addext",
                "basicConstraints=critical,CA:FALSE",
                "-CA",
            ],
            &[
                &ca,
                Path::new("-CAkey"),
                &ca_key,
                Path::new("-keyout"),
                &key,
                Path::new("-out"),
                &crt,
            ],
        );
    if !server {
        return None;
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).ok()?;
    if let Some(uid) = owner {
        for p in [&crt, &key] {
            rustix::fs::chown(p, Some(uid), None).ok()?;
        }
    }
    Some(ca)
}

/// The uid of the user `name` (from `/etc/passwd`).
fn users_id(name: &str) -> Option<u32> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        (fields.next()? == name)
            .then(|| fields.nth(1)?.parse().ok())
            .flatten()
    })
}

fn stop(bin: &Path, dir: &Path) {
    stop_pooler(dir);
    let _ = as_owner(&bin.join("pg_ctl"))
        .arg("-D")
        .arg(dir.join("data"))
        .args(["-m", "immediate", "-w", "stop"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let _ = std::fs::remove_dir_all(dir);
}

extern "C" fn stop_at_exit() {
    if let Some((bin, dir)) = STARTED.get() {
        stop(bin, dir);
    }
}

/// A process that stops the cluster when this one is gone without its `atexit` (killed).
fn reaper(bin: &Path, dir: &Path) {
    let script = "while kill -0 \"$1\" 2>/dev/null; do sleep 1; done; \
                  [ -d \"$3\" ] || exit 0; \
                  [ -f \"$3/pgbouncer.pid\" ] && kill \"$(cat \"$3/pgbouncer.pid\")\"; \
                  if [ \"$(id -u)\" = 0 ]; then \
                    setpriv --reuid=postgres --regid=postgres --clear-groups -- \
                      \"$2/pg_ctl\" -D \"$3/data\" -m immediate -w stop; \
                  else \"$2/pg_ctl\" -D \"$3/data\" -m immediate -w stop; fi; \
                  rm -rf \"$3\"";
    let _ = Command::new("sh")
        .args(["-c", script, "reaper"])
        .arg(std::process::id().to_string())
        .arg(bin)
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

static NEXT_DB: AtomicU32 = AtomicU32::new(0);

impl Cluster {
    /// A new, empty database of the cluster, named for this process and a counter.
    pub fn create_database(&self) -> Result<String, String> {
        let name = format!(
            "ptd_{}_{}",
            std::process::id(),
            NEXT_DB.fetch_add(1, Ordering::Relaxed)
        );
        run(
            Command::new(self.bin.join("createdb"))
                .arg("-h")
                .arg(self.dir.join("sock"))
                .args(["-p", &self.port.to_string(), "-U", USER, &name]),
            "createdb",
        )?;
        Ok(name)
    }

    /// The URL of database `name` over TCP, without the password (`sslmode=disable`: the test
    /// cluster has no certificate).
    pub fn url(&self, name: &str) -> String {
        format!(
            "postgres://{USER}@127.0.0.1:{}/{name}?sslmode=disable",
            self.port
        )
    }
}

/// A connection pooler in front of the process's cluster: `pgbouncer` in session-pooling mode
/// (docs/ledger.md), on a loopback port, SCRAM for its clients, the cluster's socket behind it.
#[derive(Debug)]
pub struct Pooler {
    /// Its TCP port on 127.0.0.1.
    pub port: u16,
}

static POOLER: OnceLock<Result<Pooler, String>> = OnceLock::new();

/// The process's pooler, started the first time (after the cluster); stopped with it.
pub fn pooler() -> Result<&'static Pooler, &'static String> {
    POOLER.get_or_init(start_pooler).as_ref()
}

/// [`crate::skip::pgbouncer`].
pub(crate) fn pgbouncer() -> Need {
    match pooler() {
        Ok(_) => Ok(()),
        Err(reason) => unmet("pgbouncer", reason.clone()),
    }
}

impl Pooler {
    /// The URL of the cluster's database `name` through the pooler, without the password.
    pub fn url(&self, name: &str) -> String {
        format!(
            "postgres://{USER}@127.0.0.1:{}/{name}?sslmode=disable",
            self.port
        )
    }
}

/// The URL (without password) of a new database reached through the pooler; panics when there
/// is none (a test asks [`crate::skip::pgbouncer`] first).
pub fn fresh_pooled_database() -> String {
    let (cluster, pooler) = match (cluster(), pooler()) {
        (Ok(c), Ok(p)) => (c, p),
        (Err(e), _) | (_, Err(e)) => panic!("no PostgreSQL pooler: {e}"),
    };
    match cluster.create_database() {
        Ok(name) => pooler.url(&name),
        Err(e) => panic!("{e}"),
    }
}

fn start_pooler() -> Result<Pooler, String> {
    let cluster = cluster().map_err(Clone::clone)?;
    let program = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or("needs `pgbouncer` (Debian's package) to test a ledger behind a pooler")?;
    let dir = &cluster.dir;
    let io = |e: std::io::Error| format!("the pooler's files: {e}");
    let port = free_port()?;
    // `*`: every database of the cluster, over its private socket (trusted there).
    let config = format!(
        "[databases]\n* = host={sock} port={server}\n\
         [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
         auth_type = scram-sha-256\nauth_file = {dir}/pgbouncer.users\npool_mode = session\n\
         max_client_conn = 500\ndefault_pool_size = 40\n\
         logfile = {dir}/pgbouncer.log\npidfile = {dir}/pgbouncer.pid\n",
        sock = dir.join("sock").display(),
        server = cluster.port,
        dir = dir.display(),
    );
    let ini = dir.join("pgbouncer.ini");
    std::fs::write(&ini, config).map_err(io)?;
    // The user's SCRAM secret, as the server keeps it, not the password: with a plain password
    // pgbouncer would derive the key anew (4,096 rounds of PBKDF2) at every connection — the
    // set-up docs/ledger.md recommends.
    let secret = Command::new(cluster.bin.join("psql"))
        .arg("-h")
        .arg(dir.join("sock"))
        .args([
            "-p",
            &cluster.port.to_string(),
            "-U",
            USER,
            "-d",
            "postgres",
            "-tAc",
        ])
        .arg(format!(
            "SELECT rolpassword FROM pg_authid WHERE rolname = '{USER}'"
        ))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("psql: {e}"))?;
    let secret = String::from_utf8_lossy(&secret.stdout).trim().to_string();
    if !secret.starts_with("SCRAM-SHA-256$") {
        return Err("the test user has no SCRAM secret to give pgbouncer".into());
    }
    let users = dir.join("pgbouncer.users");
    std::fs::write(&users, format!("\"{USER}\" \"{secret}\"\n")).map_err(io)?;
    if is_root() {
        let uid = users_id("postgres").ok_or("needs the `postgres` user")?;
        for p in [&ini, &users] {
            rustix::fs::chown(p, Some(rustix::process::Uid::from_raw(uid)), None)
                .map_err(|e| io(e.into()))?;
        }
    }
    run(as_owner(&program).arg("-d").arg(&ini), "pgbouncer")?;
    // `-d` returns once it forked; wait until it accepts.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if std::time::Instant::now() > until {
            stop_pooler(dir);
            return Err("pgbouncer did not start listening within 10 s".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(Pooler { port })
}

/// Stop the pooler of the cluster in `dir`, if one was started.
fn stop_pooler(dir: &Path) {
    let pid = std::fs::read_to_string(dir.join("pgbouncer.pid"))
        .ok()
        .and_then(|text| text.trim().parse::<i32>().ok())
        .and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
    }
}

/// The URL (without password) of a new database for one test; panics when there is no
/// cluster (a test asks [`postgres`] first).
pub fn fresh_database() -> String {
    let cluster = match cluster() {
        Ok(c) => c,
        Err(e) => panic!("no PostgreSQL cluster: {e}"),
    };
    match cluster.create_database() {
        Ok(name) => cluster.url(&name),
        Err(e) => panic!("{e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_database_is_made_in_the_process_cluster() {
        crate::skip::require!(crate::skip::postgres());
        let (a, b) = (fresh_database(), fresh_database());
        assert_ne!(a, b);
        let cluster = cluster().unwrap();
        assert!(a.starts_with(&format!("postgres://{USER}@127.0.0.1:{}/", cluster.port)));
        assert!(!a.contains(&cluster.password));
        assert!(cluster.dir.join("data/postmaster.pid").exists());
    }
}
