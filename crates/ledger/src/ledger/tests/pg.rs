//! What only the PostgreSQL ledger has (SPEC §19.1): the URL and the password, the versioned
//! schema and `migrate`, many connections racing, leases of other hosts, the export and its
//! restore. The rules it shares with SQLite are the shared suite's (`both!`).

use super::*;
use crate::ledger::location::{pgpass_lookup, Password};

fn pg_db() -> Option<Db> {
    Db::new(Backend::Postgres)
}

#[test]
fn a_location_is_a_url_or_a_file_and_a_password_in_the_url_is_refused() {
    assert_eq!(
        Location::parse("/var/lib/ptd/ledger.db").unwrap(),
        Location::File("/var/lib/ptd/ledger.db".into())
    );
    let Location::Postgres(url) = Location::parse(
        "postgresql://ptd%40x@[::1]:6543/led?sslmode=verify-full&sslrootcert=/ca.pem",
    )
    .unwrap() else {
        panic!("not postgres")
    };
    assert_eq!(
        (
            url.user.as_str(),
            url.host.as_str(),
            url.port,
            url.dbname.as_str()
        ),
        ("ptd@x", "::1", 6543, "led")
    );
    assert_eq!(url.sslmode, SslMode::VerifyFull);
    assert_eq!(url.to_string(), "postgres://ptd@x@[::1]:6543/led");
    for secret in [
        "postgres://u:s3cret-pw@h/db",
        "postgres://u@h/db?password=s3cret-pw",
    ] {
        let err = Location::parse(secret).unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(shown.contains("password"), "{shown}");
        assert!(!shown.contains("s3cret-pw"), "{shown}");
    }
    assert!(Location::parse("postgres://u@h/db?sslmode=bogus").is_err());
    assert!(Location::parse("postgres://u@h/db?host=x").is_err());
    assert!(Location::parse("postgres://h/db").is_err());
}

#[test]
fn a_host_that_is_an_absolute_path_is_the_servers_unix_socket_folder() {
    let socket = |text: &str| match Location::parse(text).unwrap() {
        Location::Postgres(url) => url,
        Location::File(_) => panic!("not postgres"),
    };
    let encoded = socket("postgres://ann@%2Frun%2Fpostgresql:5433/led");
    let query = socket("postgresql://ann@/led?host=/run/postgresql&port=5433");
    assert_eq!(encoded, query);
    assert_eq!(
        (query.host.as_str(), query.port, query.dbname.as_str()),
        ("/run/postgresql", 5433, "led")
    );
    assert!(query.is_socket());
    assert!(!socket("postgres://ann@db.example/led").is_socket());
    assert_eq!(
        query.to_string(),
        "postgres://ann@%2Frun%2Fpostgresql:5433/led"
    );
    // `prefer` (the default) and `disable` mean no TLS over a socket; the modes that need
    // TLS are refused rather than silently dropped.
    assert_eq!(
        socket("postgres://ann@/led?host=/s&sslmode=disable").sslmode,
        SslMode::Disable
    );
    for refused in [
        "postgres://ann@/led",
        "postgres://ann@h/led?host=/run/postgresql",
        "postgres://ann@/led?host=/a&host=/b",
        "postgres://ann@/led?host=relative/folder",
        "postgres://ann@/led?host=/s&sslmode=require",
        "postgres://ann@/led?host=/s&sslmode=verify-ca",
        "postgres://ann@/led?host=/s&sslmode=verify-full",
        "postgres://ann@/led?host=/s&port=http",
    ] {
        assert!(Location::parse(refused).is_err(), "{refused}");
    }
    // `.pgpass`: the folder itself, or `localhost` as libpq allows for a socket.
    assert_eq!(
        pgpass_lookup("localhost:5433:led:ann:by-name\n", &query),
        Some(Password("by-name".into()))
    );
    assert_eq!(
        pgpass_lookup("/run/postgresql:5433:led:ann:by-folder\n", &query),
        Some(Password("by-folder".into()))
    );
    assert_eq!(
        pgpass_lookup(
            "localhost:5433:led:ann:tcp-only\n",
            &socket("postgres://ann@h:5433/led")
        ),
        None
    );
}

#[test]
fn the_ledger_reaches_the_server_over_its_unix_socket_without_a_password() {
    if let Err(unmet) = ptd_sys::skip::postgres() {
        ptd_sys::skip::report(&unmet);
        return;
    }
    let Location::Postgres(tcp) = Location::parse(&ptd_sys::pgtest::fresh_database()).unwrap()
    else {
        panic!()
    };
    let cluster = ptd_sys::pgtest::cluster().unwrap();
    let folder = cluster.dir.join("sock");
    let location = Location::parse(&format!(
        "postgres://{}@/{}?host={}&port={}",
        tcp.user,
        tcp.dbname,
        folder.display(),
        tcp.port
    ))
    .unwrap();
    // The test cluster trusts its socket (`--auth-local=trust`): no password is given.
    let none = ptd_sys::hostenv::HostEnv::with(std::iter::empty::<(String, String)>());
    migrate(&location, &none, soon()).unwrap();
    let mut ledger = Ledger::open_at(&location, &none, soon()).unwrap();
    let k = key("over-the-socket");
    let me = Lease::current().unwrap();
    assert!(matches!(
        ledger
            .begin(&call(&k, "d", &Budgets::default()), &me)
            .unwrap(),
        Decision::Start { .. }
    ));
    // A folder with no server in it is unreachable (retryable), like a closed port.
    let empty = tempfile::tempdir().unwrap();
    let nobody_there = Location::parse(&format!(
        "postgres://{}@/{}?host={}&port={}",
        tcp.user,
        tcp.dbname,
        empty.path().display(),
        tcp.port
    ))
    .unwrap();
    let err = Ledger::open_at(&nobody_there, &none, soon()).unwrap_err();
    assert!(err.is_unreachable(), "{err:?}");
}

#[test]
fn pgpass_lines_match_with_wildcards_and_escapes() {
    let Location::Postgres(url) = Location::parse("postgres://ann@db.example:5433/ledger").unwrap()
    else {
        panic!()
    };
    let text = "# comment\nother:*:*:*:no\ndb.example:5433:ledger:bob:no\n\
                *:5433:*:ann:pa\\:ss\\\\w:rd\n*:*:*:*:late\n";
    assert_eq!(
        pgpass_lookup(text, &url),
        Some(Password("pa:ss\\w:rd".into()))
    );
    assert_eq!(pgpass_lookup("x:1:y:z:w\n", &url), None);
    assert_eq!(format!("{:?}", Password("hunter2".into())), "Password(…)");
}

#[test]
fn the_password_comes_from_the_file_then_pgpassword_then_pgpass() {
    let dir = tempfile::tempdir().unwrap();
    let Location::Postgres(url) = Location::parse("postgres://ann@h/db").unwrap() else {
        panic!()
    };
    let file = dir.path().join("pw");
    std::fs::write(&file, "from-file\n").unwrap();
    let pgpass = dir.path().join("pgpass");
    std::fs::write(&pgpass, "*:*:*:ann:from-pgpass\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o644)).unwrap();
    let env = |vars: &[(&str, &std::path::Path)]| {
        ptd_sys::hostenv::HostEnv::with(
            vars.iter()
                .map(|(k, v)| (k.to_string(), v.display().to_string())),
        )
    };
    let got = |e| location::password_for(&url, &e).unwrap().map(|p| p.0);
    let both = env(&[
        (PASSWORD_FILE_VAR, &file),
        ("PGPASSWORD", "env-pw".as_ref()),
    ]);
    assert_eq!(got(both).as_deref(), Some("from-file"));
    let only_env = env(&[("PGPASSWORD", "env-pw".as_ref()), ("PGPASSFILE", &pgpass)]);
    assert_eq!(got(only_env).as_deref(), Some("env-pw"));
    // A `.pgpass` others may read is ignored, as libpq ignores it.
    let loose = env(&[("PGPASSFILE", &pgpass)]);
    if std::env::var_os("PGPASSWORD").is_none() {
        assert_eq!(got(loose.clone()), None);
        std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(got(loose).as_deref(), Some("from-pgpass"));
    }
    let missing = env(&[(PASSWORD_FILE_VAR, &dir.path().join("nope"))]);
    let err = location::password_for(&url, &missing).unwrap_err();
    assert!(err.to_string().contains(PASSWORD_FILE_VAR), "{err}");
}

#[test]
fn many_connections_racing_start_each_key_once_and_hold_the_budget() {
    let Some(db) = pg_db() else { return };
    let budgets = Budgets {
        calls: Some(7),
        ..Budgets::default()
    };
    let starts = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..8u32 {
            let (db, budgets, starts) = (&db, &budgets, &starts);
            s.spawn(move || {
                let mut ledger = db.open();
                let me = Lease::current().unwrap();
                for i in 0..50u32 {
                    let k = key(&format!("r{}", (i + t) % 10));
                    if let Decision::Start { .. } =
                        ledger.begin(&call(&k, "d", budgets), &me).unwrap()
                    {
                        starts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
            });
        }
    });
    assert_eq!(starts.into_inner(), 7);
    match db.verify() {
        Verification::Intact { .. } => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn concurrent_appends_keep_one_chain() {
    let Some(db) = pg_db() else { return };
    std::thread::scope(|s| {
        for t in 0..4 {
            let db = &db;
            s.spawn(move || {
                let mut ledger = db.open();
                for i in 0..20 {
                    let k = key(&format!("a{t}-{i}"));
                    ledger
                        .record(&record(&k, Verdict::Refuse, "bridge_ref", "denied"))
                        .unwrap();
                }
            });
        }
    });
    match db.verify() {
        Verification::Intact { records, .. } => assert_eq!(records, 80),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_holder_on_another_host_is_alive_until_its_heartbeat_is_stale() {
    let Some(db) = pg_db() else { return };
    let mut ledger = db.open();
    let me = Lease::current().unwrap();
    let none = Budgets::default();
    let elsewhere = Lease {
        boot_id: "another-host-boot".into(),
        pid: 1,
        start_ticks: 1,
        heartbeat_ms: None,
    };
    let k = key("remote");
    let c = call(&k, "d", &none);
    assert!(matches!(
        ledger.begin(&c, &elsewhere).unwrap(),
        Decision::Start { .. }
    ));
    assert_eq!(
        ledger.begin(&c, &me).unwrap(),
        Decision::Held(elsewhere.clone())
    );
    ledger.set_lease_ttl(Duration::from_millis(300));
    std::thread::sleep(Duration::from_millis(200));
    assert!(ledger.renew(&k, &elsewhere).unwrap());
    std::thread::sleep(Duration::from_millis(200));
    // Renewed 200 ms ago: still alive.
    assert_eq!(
        ledger.begin(&c, &me).unwrap(),
        Decision::Held(elsewhere.clone())
    );
    std::thread::sleep(Duration::from_millis(200));
    match ledger.begin(&c, &me).unwrap() {
        Decision::Indeterminate { attempt, holder } => {
            assert_eq!((attempt, holder), (1, elsewhere))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ledger.call(&k).unwrap().unwrap().lease, me);
}

#[test]
fn the_pure_rule_for_a_foreign_holder() {
    assert!(lease::foreign_alive(Some(1_000), 1_500, 1_000));
    assert!(!lease::foreign_alive(Some(1_000), 2_000, 1_000));
    assert!(!lease::foreign_alive(None, 0, 1_000));
}

#[test]
fn migrate_is_idempotent_and_the_main_job_refuses_other_schemas() {
    if let Err(unmet) = ptd_sys::skip::postgres() {
        ptd_sys::skip::report(&unmet);
        return;
    }
    let location = Location::parse(&ptd_sys::pgtest::fresh_database()).unwrap();
    let env = pg_env();
    let err = Ledger::open_at(&location, &env, soon()).unwrap_err();
    assert!(matches!(err, LedgerError::Schema(_)), "{err:?}");
    assert!(
        err.to_string()
            .contains("ledger migrate --ledger postgres://"),
        "{err}"
    );
    assert!(!err.is_unreachable());
    let first = migrate(&location, &env, soon()).unwrap();
    assert_eq!(
        (first.from, first.to),
        (None, crate::ledger::pg::SCHEMA_VERSION)
    );
    let again = migrate(&location, &env, soon()).unwrap();
    assert_eq!(again.from, Some(crate::ledger::pg::SCHEMA_VERSION));
    Ledger::open_at(&location, &env, soon()).unwrap();
    let Location::Postgres(url) = &location else {
        panic!()
    };
    let password = location::password_for(url, &env).unwrap();
    let mut client = crate::ledger::pg::connect(url, password.as_ref(), soon()).unwrap();
    client
        .execute("UPDATE ptd_ledger_meta SET version = 99", &[])
        .unwrap();
    let err = Ledger::open_at(&location, &env, soon()).unwrap_err();
    assert!(err.to_string().contains("version 99"), "{err}");
    assert!(migrate(&location, &env, soon()).is_err());
}

#[test]
fn a_wrong_password_is_not_retryable_and_never_shown_and_a_closed_port_is() {
    if let Err(unmet) = ptd_sys::skip::postgres() {
        ptd_sys::skip::report(&unmet);
        return;
    }
    let location = Location::parse(&ptd_sys::pgtest::fresh_database()).unwrap();
    let wrong = ptd_sys::hostenv::HostEnv::with([(
        "PGPASSWORD".to_string(),
        "wrong-Pa55word-xyz".to_string(),
    )]);
    let err = Ledger::open_at(&location, &wrong, soon()).unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(matches!(err, LedgerError::Connect(_)), "{shown}");
    assert!(!err.is_unreachable());
    assert!(!shown.contains("wrong-Pa55word-xyz"), "{shown}");
    let real = ptd_sys::pgtest::cluster().unwrap().password.clone();
    let ok_env = pg_env();
    migrate(&location, &ok_env, soon()).unwrap();
    let ledger = Ledger::open_at(&location, &ok_env, soon()).unwrap();
    assert!(!format!("{ledger:?} {location:?}").contains(&real));
    // Nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let closed =
        Location::parse(&format!("postgres://u@127.0.0.1:{port}/db?sslmode=disable")).unwrap();
    let err = Ledger::open_at(&closed, &ok_env, soon()).unwrap_err();
    assert!(err.is_unreachable(), "{err:?}");
    let Location::Postgres(mut url) = location.clone() else {
        panic!()
    };
    if ptd_sys::pgtest::cluster().unwrap().tls_root.is_some() {
        // The test cluster speaks TLS: `require` gets it; `verify-ca` with no root that
        // vouches for the test's authority is refused, not downgraded.
        url.sslmode = SslMode::Require;
        Ledger::open_at(&Location::Postgres(url.clone()), &ok_env, soon()).unwrap();
        url.sslmode = SslMode::VerifyCa;
        let err = Ledger::open_at(&Location::Postgres(url), &ok_env, soon()).unwrap_err();
        assert!(!format!("{err}").contains(&real), "{err}");
    } else {
        // `require` against a server without TLS is refused, not downgraded.
        url.sslmode = SslMode::Require;
        let err = Ledger::open_at(&Location::Postgres(url), &ok_env, soon()).unwrap_err();
        assert!(!err.is_unreachable(), "{err:?}");
    }
}

#[test]
fn a_backup_is_an_export_that_restores_into_a_new_database() {
    let Some(db) = pg_db() else { return };
    let mut ledger = db.open();
    let me = Lease::current().unwrap();
    let none = Budgets::default();
    let k = key("b");
    ledger.begin(&call(&k, "d", &none), &me).unwrap();
    let rec = record(&k, Verdict::Admit, "bridge.allowed_tools", "succeeded");
    ledger
        .finish(&k, &me, &outcome("{\"b\":1}", false), &rec)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("ledger.jsonl");
    ledger.backup(&dest).unwrap();
    assert_eq!(ptd_sys::fs::test_support::mode(&dest), 0o600);
    assert!(matches!(ledger.backup(&dest), Err(BackupError::Exists)));
    let Some(copy) = pg_db() else { return };
    assert!(restore(&copy.location, &pg_env(), &dest, soon()).unwrap() >= 4);
    assert_eq!(db.verify(), copy.verify());
    assert!(restore(&copy.location, &pg_env(), &dest, soon()).is_err());
    assert_eq!(
        copy.open().begin(&call(&k, "d", &none), &me).unwrap(),
        Decision::Replay(Recorded {
            envelope: "{\"b\":1}".into(),
            exit_status: 0
        })
    );
}
