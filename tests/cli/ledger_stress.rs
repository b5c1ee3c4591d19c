//! The ledger under load and under SIGKILL (SPEC §14.3), and the replay property (§14.1):
//! 200 dispatchers at once on one ledger lose no record and never fail on a busy database; a
//! dispatcher killed at random moments leaves the ledger consistent and no key runs twice; a
//! replayed envelope is the recorded one but for `diagnostics.ledger`.

use super::ledger_rules::Setup;
use super::*;
use proptest::prelude::*;
use ptd_ledger::{CallState, Key, Ledger};
use ptd_wire::envelope::bridge::Bridge;
use ptd_wire::envelope::canonical::sha256_hex;
use rustix::process::Signal;

#[test]
fn two_hundred_dispatchers_at_once_lose_no_record_and_never_fail_on_a_busy_ledger() {
    const N: usize = 200;
    let s = Setup::new();
    let running: Vec<_> = (0..N)
        .map(|n| {
            s.command(&["echo"], &format!("at-once-{n}"))
                .watchdog(Duration::from_secs(120))
                .spawn()
        })
        .collect();
    for (n, run) in running.into_iter().enumerate() {
        run.wait().exit(0).stderr_empty().stdout_with(|text| {
            let envelope = json_line(text);
            assert_eq!(envelope["status"], "succeeded", "{envelope}");
            assert_eq!(envelope["request_id"], format!("at-once-{n}"));
            assert_eq!(
                envelope["diagnostics"]["ledger"],
                json!({"replayed": false, "attempt": 1})
            );
        });
    }
    assert_eq!(s.runs(), N);
    let records = s.records();
    assert_eq!(records.len(), N);
    let mut ids: Vec<&str> = records
        .iter()
        .map(|r| r["request_id"].as_str().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), N, "one record per call");
    assert!(records.iter().all(|r| r["decision"] == "admit"));
    s.verify(N);
}

/// A small deterministic generator (the seed is printed, so a failure can be replayed).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// The ledger key of `request()` with `request_id` under `bridge`, as the dispatcher keeps it.
fn key_of(bridge: &Value, request_id: &str) -> Key {
    let digest = |id: &str| format!("sha256:{}", sha256_hex(id.as_bytes()));
    Key {
        bridge_ref: Bridge::load(&bridge.to_string()).unwrap().bridge_ref(),
        session_id: digest("sandbox_123"),
        request_id: digest(request_id),
    }
}

/// One key of the crash test: its bridge (whose adapter logs each run to `ran`, then sleeps
/// `sleep_ms` and answers) and the request id.
struct CrashKey {
    ran: PathBuf,
    bridge: Value,
}

impl CrashKey {
    fn new(dir: &Path, n: usize) -> CrashKey {
        let ran = dir.join(format!("ran-{n}"));
        let log = format!("pidfile:{}", ran.display());
        let sleep = format!("sleep:{}", 10 * n);
        CrashKey {
            bridge: bridge(&[log.as_str(), sleep.as_str(), "echo"]),
            ran,
        }
    }

    fn command(&self, ledger: &Path) -> Cmd {
        let mut req = request();
        req["request_id"] = json!("crash");
        Cmd::new(["--ledger"])
            .arg(ledger)
            .arg("--parent-tool-bridge")
            .arg(self.bridge.to_string())
            .stdin(req.to_string())
    }

    fn runs(&self) -> usize {
        pids(&self.ran).len()
    }
}

#[test]
fn sigkill_at_random_moments_leaves_the_ledger_consistent_and_no_key_runs_twice() {
    const KEYS: usize = 6;
    const ROUNDS: usize = 48;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut rng = Lcg(seed);
    let s = Setup::new();
    let keys: Vec<CrashKey> = (0..KEYS).map(|n| CrashKey::new(s.dir.path(), n)).collect();
    let mut killed = 0;
    for _ in 0..ROUNDS {
        let key = &keys[rng.below(KEYS as u64) as usize];
        let run = key.command(&s.ledger).spawn();
        std::thread::sleep(Duration::from_millis(rng.below(120)));
        // Not reaped yet: the pid is still this child's, even if it has exited.
        if rustix::process::kill_process(run.pid(), Signal::KILL).is_ok() {
            killed += 1;
        }
        let out = run.wait();
        let mut code = 0;
        out.exit_with(|exit| code = exit).stderr_with(|_| {});
        assert!([-1, 0, 1].contains(&code), "seed {seed}: exit {code}");
        out.stdout_with(|text| {
            // A run that ended by itself printed one envelope: the answer, its replay, or
            // the verdict on a key whose holder was killed.
            if code != -1 {
                let envelope = json_line(text);
                let error = envelope["error"]["code"].as_str().unwrap_or("");
                assert!(
                    envelope["status"] == "succeeded" || error == "dispatch_indeterminate",
                    "seed {seed}: {envelope}"
                );
            }
        });
    }
    assert!(killed > 0, "seed {seed}: no round was killed");
    s.verify_any();
    let mut ledger =
        Ledger::open_existing(&s.ledger, Instant::now() + Duration::from_secs(30)).unwrap();
    for key in &keys {
        assert!(
            key.runs() <= 1,
            "seed {seed}: a key ran {} times",
            key.runs()
        );
        let row = ledger.call(&key_of(&key.bridge, "crash")).unwrap();
        let ran_before = key.runs();
        let after = key.command(&s.ledger).run();
        let (exit, replayed) = match &row {
            // Never started (or killed before its claim was committed): it runs now.
            None => (0, false),
            Some(row) => match row.state {
                CallState::Final => (row.outcome.as_ref().unwrap().exit_status as i32, true),
                CallState::Running => {
                    assert!(
                        !row.lease.is_live(),
                        "seed {seed}: a live lease left: {row:?}"
                    );
                    (1, false)
                }
                CallState::Retryable => panic!("seed {seed}: nothing here is retryable: {row:?}"),
            },
        };
        after.exit(exit).stdout_with(|text| {
            let envelope = json_line(text);
            assert_eq!(
                envelope["diagnostics"]["ledger"]["replayed"], replayed,
                "seed {seed}"
            );
            if exit == 1 {
                assert_eq!(envelope["error"]["code"], "dispatch_indeterminate");
            }
        });
        after.stderr_with(|_| {});
        let ran_now = if row.is_none() {
            ran_before + 1
        } else {
            ran_before
        };
        assert_eq!(key.runs(), ran_now, "seed {seed}");
        assert!(
            key.runs() <= 1,
            "seed {seed}: a key ran {} times",
            key.runs()
        );
    }
    s.verify_any();
}

/// A replayed envelope is the recorded one, byte for byte in every member but
/// `diagnostics.ledger`, whatever the answer's status, payload and layout.
fn replay_equals_record(status: &str, input: &Value, pretty: bool) {
    let s = Setup::new();
    let step = format!("echo:{status}:some_code");
    let dispatch = |s: &Setup| {
        let mut cmd = s.command(&[step.as_str()], "prop");
        if pretty {
            cmd = cmd.arg("--pretty");
        }
        let mut req = request();
        req["request_id"] = json!("prop");
        req["input"] = input.clone();
        let out = cmd.stdin(req.to_string()).run();
        let mut envelope = Value::Null;
        let mut exit = 0;
        out.exit_with(|code| exit = code)
            .stderr_with(|_| {})
            .stdout_with(|text| envelope = serde_json::from_str(text).unwrap());
        (exit, envelope)
    };
    let (first_exit, mut first) = dispatch(&s);
    let (again_exit, mut again) = dispatch(&s);
    assert_eq!(first_exit, again_exit);
    assert_eq!(again["diagnostics"]["ledger"]["replayed"], true);
    assert_eq!(first["diagnostics"]["ledger"]["replayed"], false);
    first["diagnostics"]
        .as_object_mut()
        .unwrap()
        .remove("ledger");
    again["diagnostics"]
        .as_object_mut()
        .unwrap()
        .remove("ledger");
    assert_eq!(first, again);
    assert_eq!(s.runs(), 1);
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[ -~\u{e9}\u{1F600}]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    // Each case is four dispatcher processes: a few cases, each a whole round trip.
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn a_replayed_envelope_equals_the_recorded_one_but_for_diagnostics_ledger(
        status in prop_oneof![Just("succeeded"), Just("failed"), Just("denied"), Just("unavailable")],
        input in json_value(),
        pretty in any::<bool>(),
    ) {
        replay_equals_record(status, &input, pretty);
    }
}
