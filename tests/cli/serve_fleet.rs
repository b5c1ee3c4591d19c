//! Several `serve` processes sharing one PostgreSQL ledger behave as one (SPEC §19.2): three
//! servers on three loopback ports over this test process's throwaway cluster
//! (`ptd_sys::pgtest`), `PGPASSWORD` in their environment (their child dispatchers get the
//! same). Concurrent requests with overlapping ids run each key once and answer alike; a
//! session's budget holds across the three; a server killed mid-call leaves
//! `dispatch_indeterminate`, never a second run.

use super::serve::{children, steady, Reply, Server, TOKEN};
use super::*;
use ptd_sys::pgtest;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Three servers over one migrated database, each with `extra` options.
struct Fleet {
    servers: Vec<Server>,
    password: String,
}

impl Fleet {
    fn start(steps: &[&str], extra: &[&str]) -> Fleet {
        let url = pgtest::fresh_database();
        let password = pgtest::cluster().unwrap().password.clone();
        Cmd::new(["ledger", "migrate", "--ledger", &url])
            .env("PGPASSWORD", &password)
            .run()
            .exit(0)
            .stderr_empty()
            .stdout_contains("\"to\"");
        let mut args = vec!["--ledger", &url, "--session", "sandbox_123"];
        args.extend(extra);
        let servers = (0..3)
            .map(|_| {
                Server::start_with(
                    &bridge(steps),
                    &format!("{TOKEN}\n"),
                    &args,
                    &[("PGPASSWORD", &password)],
                )
            })
            .collect();
        Fleet { servers, password }
    }

    /// Stop every server (exit 0, JSON lines), and check none logged the password.
    fn stop(self) {
        for server in self.servers {
            for line in server.stop() {
                assert!(!line.to_string().contains(&self.password), "{line}");
            }
        }
    }
}

/// The request with this id.
fn request_with(id: &str) -> Vec<u8> {
    let mut r = request();
    r["request_id"] = json!(id);
    r.to_string().into_bytes()
}

/// Send every `(server, request id)` of `jobs` from `threads` client threads at once; the
/// replies in the order of `jobs`.
fn send_all(fleet: &Fleet, jobs: &[(usize, String)], threads: usize) -> Vec<Reply> {
    let ports: Vec<u16> = fleet.servers.iter().map(|s| s.port).collect();
    let next = Arc::new(AtomicUsize::new(0));
    let replies = Arc::new(Mutex::new(BTreeMap::new()));
    let jobs = Arc::new(jobs.to_vec());
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (next, replies, jobs, ports) =
                (next.clone(), replies.clone(), jobs.clone(), ports.clone());
            std::thread::spawn(move || loop {
                let n = next.fetch_add(1, Ordering::SeqCst);
                let Some((server, id)) = jobs.get(n) else {
                    return;
                };
                let reply = post(ports[*server], &request_with(id));
                replies.lock().unwrap().insert(n, reply);
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let mut replies = replies.lock().unwrap();
    std::mem::take(&mut *replies).into_values().collect()
}

/// `POST /v1/dispatch` on its own connection.
fn post(port: u16, body: &[u8]) -> Reply {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let head = format!(
        "POST /v1/dispatch HTTP/1.1\r\nHost: t\r\nConnection: close\r\nAuthorization: Bearer \
         {TOKEN}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    use std::io::{Read, Write};
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    Reply::parse(&out)
}

/// An envelope without what may differ between a run and its replays.
fn comparable(envelope: Value) -> Value {
    let mut envelope = steady(envelope);
    if let Some(ledger) = envelope["diagnostics"]["ledger"].as_object_mut() {
        ledger.remove("replayed");
    }
    envelope
}

#[test]
fn three_servers_on_one_postgresql_ledger_run_each_key_once() {
    require!(skip::postgres());
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let log = format!("pidfile:{}", ran.display());
    let fleet = Fleet::start(&["read-stdin", &log, "echo"], &[]);
    let started = Instant::now();
    // 60 ids, each sent 5 times in a row (so the copies overlap), each copy to another server.
    let jobs: Vec<(usize, String)> = (0..300)
        .map(|n| {
            let (id, copy) = (n / 5, n % 5);
            ((id + copy) % 3, format!("ptr_fleet_{id:02}"))
        })
        .collect();
    let replies = send_all(&fleet, &jobs, 30);
    let mut by_id: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for ((_, id), reply) in jobs.iter().zip(&replies) {
        assert_eq!(reply.status, 200, "{id}: {}", reply.body);
        let envelope = reply.json();
        assert_eq!(envelope["status"], "succeeded", "{id}: {}", reply.body);
        assert_eq!(envelope["request_id"], id.as_str());
        by_id.entry(id).or_default().push(envelope);
    }
    assert_eq!(by_id.len(), 60);
    for (id, envelopes) in &by_id {
        let fresh = envelopes
            .iter()
            .filter(|e| e["diagnostics"]["ledger"]["replayed"] != true)
            .count();
        assert_eq!(fresh, 1, "{id}: one run, the others replays");
        let first = comparable(envelopes[0].clone());
        for other in &envelopes[1..] {
            assert_eq!(comparable(other.clone()), first, "{id}");
        }
    }
    assert_eq!(pids(&ran).len(), 60, "each key's adapter ran once");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    fleet.stop();
}

#[test]
fn a_session_budget_holds_across_three_servers() {
    require!(skip::postgres());
    let fleet = Fleet::start(&["read-stdin", "echo"], &["--budget-calls", "5"]);
    let jobs: Vec<(usize, String)> = (0..12)
        .map(|n| (n % 3, format!("ptr_budget_{n:02}")))
        .collect();
    let replies = send_all(&fleet, &jobs, 12);
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    for reply in &replies {
        assert_eq!(reply.status, 200, "{}", reply.body);
        let envelope = reply.json();
        let code = match envelope["status"].as_str() {
            Some("succeeded") => "succeeded".to_string(),
            _ => envelope["error"]["code"]
                .as_str()
                .unwrap_or("?")
                .to_string(),
        };
        *codes.entry(code).or_default() += 1;
    }
    let want: BTreeMap<String, usize> = [("succeeded".into(), 5), ("budget_exhausted".into(), 7)]
        .into_iter()
        .collect();
    assert_eq!(codes, want);
    fleet.stop();
}

#[test]
fn a_server_killed_mid_call_leaves_the_key_indeterminate_never_run_twice() {
    require!(skip::postgres());
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let log = format!("pidfile:{}", ran.display());
    let mut fleet = Fleet::start(
        &["read-stdin", &log, "sleep:20000", "echo"],
        &["--lease-ttl", "3s"],
    );
    let body = request_with("ptr_killed");
    let port = fleet.servers[0].port;
    let sent = body.clone();
    let first = std::thread::spawn(move || post(port, &sent));
    let until = Instant::now() + Duration::from_secs(20);
    while pids(&ran).is_empty() {
        assert!(Instant::now() < until, "the adapter never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SIGKILL the server and its child dispatcher, the lease's holder.
    let victim = fleet.servers.remove(0);
    let dispatchers = children(victim.pid());
    assert_eq!(dispatchers.len(), 1, "{dispatchers:?}");
    let kill = |pid: i32| {
        let pid = rustix::process::Pid::from_raw(pid).unwrap();
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    };
    victim.signal(rustix::process::Signal::KILL);
    dispatchers.iter().copied().for_each(kill);
    let mut victim = victim;
    victim
        .running
        .take()
        .unwrap()
        .wait()
        .exit_with(|_| {})
        .stdout_empty()
        .stderr_with(|_| {});
    assert_eq!(
        first.join().unwrap().status,
        0,
        "no answer from a killed server"
    );
    // After the lease's time, the same request on another server: not run again.
    std::thread::sleep(Duration::from_millis(3500));
    for server in &fleet.servers {
        let reply = post(server.port, &body);
        assert_eq!(reply.status, 200, "{}", reply.body);
        let envelope = reply.json();
        assert_eq!(
            envelope["error"]["code"], "dispatch_indeterminate",
            "{}",
            reply.body
        );
    }
    assert_eq!(pids(&ran).len(), 1, "never a second run");
    pids(&ran).into_iter().for_each(kill);
    fleet.stop();
}
