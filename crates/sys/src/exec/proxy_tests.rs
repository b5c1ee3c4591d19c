//! The proxy's handoff on the real kernel: a confined child started through the real exec path
//! (`ProcessGroup::spawn`) whose network namespace holds the proxy's listener (SPEC §17). Here,
//! in `exec/`, so that `confine/` does not depend on `exec/` even in its tests.

use crate::confine::allow::AllowRule;
use crate::confine::cgroup::Host;
use crate::confine::proxy::{wake_acceptor, PROXY_PORT};
use crate::confine::{ChildError, Network, Options, Prepared, Run, Step};
use crate::exec::{Launch, ProcessGroup, SpawnError};
use crate::skip::{self, require};
use rustix::io::Errno;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// What the confined adapter tries from its namespace, one line each: the proxy (it reads a
/// byte and answers `y`), the host's loopback server (argv[1]), a documentation address
/// (192.0.2.1, TEST-NET-1: no traffic leaves the machine), and `socket(AF_UNIX)`.
const ADAPTER: &str = r#"
import errno, socket, sys
def attempt(host, port):
    s = socket.socket()
    try:
        s.connect((host, port))
        return "connected"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()
p = socket.create_connection(("127.0.0.1", 3128), timeout=20)
got = p.recv(1).decode()
p.sendall(b"y")
p.close()
print("proxy", got)
print("host", attempt("127.0.0.1", int(sys.argv[1])))
print("outside", attempt("192.0.2.1", 80))
try:
    socket.socket(socket.AF_UNIX)
    print("unix allowed")
except OSError as e:
    print("unix", errno.errorcode.get(e.errno, str(e.errno)))
"#;

fn allow_options(port: u16) -> Options {
    Options {
        network: Network::Allow,
        network_allow: vec![AllowRule::parse(&format!("127.0.0.1:{port}")).unwrap()],
        ..Options::default()
    }
}

fn prepare(options: &Options, program: &Path) -> Arc<Prepared> {
    let run = Run {
        program,
        path_var: None,
        transport_dir: None,
        tmp_parent: &std::env::temp_dir(),
    };
    Arc::new(
        Prepared::prepare(options, &run, Host::read)
            .unwrap()
            .unwrap(),
    )
}

/// Accept one connection on `listener`, or fail after `within`.
fn accept_within(listener: TcpListener, within: Duration) -> TcpStream {
    let listener = Arc::new(listener);
    let accepting = Arc::clone(&listener);
    let (done, accepted) = mpsc::channel();
    std::thread::spawn(move || done.send(accepting.accept()));
    match accepted.recv_timeout(within) {
        Ok(got) => got.unwrap().0,
        Err(_) => {
            wake_acceptor(&listener).unwrap();
            panic!("the adapter did not connect to the proxy's port");
        }
    }
}

/// A confined adapter under `--network allow:`, started through `ProcessGroup::spawn`: the
/// dispatcher receives the listener of the adapter's namespace and accepts the adapter's
/// connection there; nothing else is reachable.
fn allow_mode_body() {
    let python = Path::new("/usr/bin/python3");
    let host = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    let prepared = prepare(&allow_options(port), python);
    let mechanisms = prepared.mechanisms();
    let at = mechanisms.iter().position(|m| *m == "network_namespace");
    assert_eq!(
        at.and_then(|i| mechanisms.get(i + 1)),
        Some(&"network_proxy"),
        "{mechanisms:?}"
    );
    let receiver = prepared.proxy_receiver().unwrap();
    assert!(prepared.proxy_receiver().is_none(), "given out once");
    let argv: Vec<String> = ["python3", "-c", ADAPTER, &port.to_string()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let env = [("PATH".to_string(), "/usr/bin:/bin".to_string())];
    let launch = Launch {
        program: python,
        argv: &argv,
        env: &env,
        cwd: Some(Path::new("/")),
        stdin: false,
        confinement: Some(&prepared),
    };
    let (mut group, mut pipes) = ProcessGroup::spawn(&launch).unwrap();
    let listener = receiver.receive(Duration::from_secs(20)).unwrap().unwrap();
    assert_eq!(
        listener.local_addr().unwrap(),
        std::net::SocketAddr::from(([127, 0, 0, 1], PROXY_PORT))
    );
    let mut stream = accept_within(listener, Duration::from_secs(20));
    stream.write_all(b"x").unwrap();
    let mut answer = [0u8; 1];
    stream.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"y");
    let mut out = String::new();
    pipes.stdout.read_to_string(&mut out).unwrap();
    let mut err = String::new();
    pipes.stderr.read_to_string(&mut err).unwrap();
    assert!(group
        .wait_exit(Instant::now() + Duration::from_secs(20))
        .is_some());
    group.finish(Instant::now() + crate::exec::SWEEP_BUDGET);
    assert_eq!(
        out, "proxy x\nhost ECONNREFUSED\noutside ENETUNREACH\nunix EPERM\n",
        "stderr: {err}"
    );
    // The host's server saw nothing.
    host.set_nonblocking(true).unwrap();
    assert_eq!(host.accept().unwrap_err().kind(), io::ErrorKind::WouldBlock);
}

/// Run the test `name` alone in a fresh copy of this test binary, started through `prefix`
/// (e.g. `setpriv …`), and assert it passed there; a skip there is reported here. `true` in
/// the copy, where the caller runs the body.
fn in_a_copy(name: &str, prefix: &[&str]) -> bool {
    const COPY: &str = "PTD_PROXY_COPY_TEST";
    if std::env::var_os(COPY).is_some() {
        return true;
    }
    let exe = std::env::current_exe().unwrap();
    let mut command = match prefix.split_first() {
        Some((first, rest)) => {
            let mut command = std::process::Command::new(first);
            command.args(rest).arg(&exe);
            command
        }
        None => std::process::Command::new(&exe),
    };
    let out = command
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(COPY, "1")
        .env("TMPDIR", "/tmp")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "the test did not run: {text}");
    if let Some(line) = text.lines().find(|l| l.starts_with("skipped: ")) {
        skip::report(&skip::Unmet {
            need: "namespaces",
            reason: format!("in the copy: {line}"),
        });
    }
    false
}

#[test]
fn allow_mode_hands_the_listener_of_the_adapters_namespace_to_the_dispatcher() {
    // The sweep after the run kills every child of this process: alone in a copy.
    if !in_a_copy(
        "exec::proxy_tests::allow_mode_hands_the_listener_of_the_adapters_namespace_to_the_dispatcher",
        &[],
    ) {
        return;
    }
    require!(skip::network_namespace());
    require!(skip::program("/usr/bin/python3", &["-c", ""]));
    allow_mode_body();
}

#[test]
fn allow_mode_works_for_a_dispatcher_that_is_not_root() {
    const NAME: &str = "exec::proxy_tests::allow_mode_works_for_a_dispatcher_that_is_not_root";
    if rustix::process::geteuid().is_root() {
        // As nobody, through a user namespace of the child's own.
        require!(skip::program("setpriv", &["--version"]));
        let nobody = [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ];
        if !in_a_copy(NAME, &nobody) {
            return;
        }
    } else if !in_a_copy(NAME, &[]) {
        return;
    }
    assert!(!rustix::process::geteuid().is_root());
    require!(skip::network_namespace());
    require!(skip::program("/usr/bin/python3", &["-c", ""]));
    allow_mode_body();
}

#[test]
fn a_failed_handoff_is_the_network_proxy_step() {
    require!(skip::network_namespace());
    let program = Path::new("/bin/true");
    let prepared = prepare(&allow_options(1), program);
    // The dispatcher gave up before the child sent anything: its step fails, nothing runs.
    prepared.proxy_receiver().unwrap().close();
    let argv = vec!["true".to_string()];
    let launch = Launch {
        program,
        argv: &argv,
        env: &[],
        cwd: None,
        stdin: false,
        confinement: Some(&prepared),
    };
    match ProcessGroup::spawn(&launch) {
        Err(SpawnError::Confinement(ChildError { step, errno })) => {
            assert_eq!(step, Step::NetworkProxy);
            assert_eq!(
                (step.as_str(), step.missing()),
                ("network_proxy", "network_proxy")
            );
            assert_eq!(errno, Errno::PIPE);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        Step::from_index(Step::NetworkProxy.index()),
        Step::NetworkProxy
    );
}
