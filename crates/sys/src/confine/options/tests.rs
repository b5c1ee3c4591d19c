//! The options' parsing: sizes, counts, paths, the network modes, and that flags read back.

use super::*;
use proptest::prelude::*;

#[test]
fn flags_read_back_to_the_same_options() {
    let dir = tempfile::tempdir().unwrap();
    let mut raw = RawOptions::default();
    raw.flag(OptionName::FsRead, "/usr")
        .flag(OptionName::FsRead, dir.path())
        .flag(OptionName::FsWrite, dir.path())
        .flag(OptionName::Network, "none")
        .flag(OptionName::LimitMemory, "64M")
        .flag(OptionName::LimitPids, "16")
        .flag(OptionName::LimitOpenFiles, "64")
        .flag(OptionName::LimitFileSize, "0");
    let options = Options::parse(&raw).unwrap();
    let flags = options.to_flags();
    assert!(flags.contains(&OsString::from("67108864")), "{flags:?}");
    let mut again = RawOptions::default();
    for pair in flags.chunks(2) {
        let name = OptionName::ALL
            .into_iter()
            .find(|n| OsStr::new(n.flag()) == pair[0])
            .unwrap();
        again.flag(name, pair[1].clone());
    }
    assert_eq!(Options::parse(&again).unwrap(), options);
    assert!(Options::default().to_flags().is_empty());
}

/// `flags` (as [`Options::to_flags`] makes them) read back.
fn read_back(flags: &[OsString]) -> Options {
    let mut again = RawOptions::default();
    for pair in flags.chunks(2) {
        let name = OptionName::ALL
            .into_iter()
            .find(|n| OsStr::new(n.flag()) == pair[0])
            .unwrap();
        again.flag(name, pair[1].clone());
    }
    Options::parse(&again).unwrap()
}

#[test]
fn allow_mode_reads_back_to_the_same_options() {
    let mut raw = RawOptions::default();
    raw.flag(
        OptionName::Network,
        "allow:API.github.com:443,*.pythonhosted.org:443,203.0.113.7:8080,[::1]:80,\
         api.github.com:443",
    )
    .flag(OptionName::NetworkMaxBytes, "64M");
    let options = Options::parse(&raw).unwrap();
    assert_eq!(options.network, Network::Allow);
    assert_eq!(options.network.as_str(), "allow");
    assert!(options.is_requested() && options.network.has_namespace());
    assert_eq!(options.network_max_bytes, Some(64 << 20));
    let rules: Vec<String> = options
        .network_allow
        .iter()
        .map(|r| r.to_string())
        .collect();
    assert_eq!(
        rules,
        [
            "api.github.com:443",
            "*.pythonhosted.org:443",
            "203.0.113.7:8080",
            "[::1]:80"
        ],
        "lower case, a repeated rule kept once"
    );
    let flags = options.to_flags();
    assert_eq!(
        flags,
        [
            "--network",
            "allow:api.github.com:443,*.pythonhosted.org:443,203.0.113.7:8080,[::1]:80",
            "--network-max-bytes",
            "67108864"
        ]
        .map(OsString::from)
    );
    assert_eq!(read_back(&flags), options);
    // Without a bound, none is written.
    let mut only = RawOptions::default();
    only.flag(OptionName::Network, "allow:example.com:80");
    let options = Options::parse(&only).unwrap();
    assert_eq!(options.network_max_bytes, None);
    assert_eq!(options.to_flags().len(), 2);
    assert_eq!(read_back(&options.to_flags()), options);
}

#[test]
fn a_malformed_allow_rule_names_the_option_the_value_and_why() {
    for (value, why) in [
        ("allow:", "no port"),
        ("allow:example.com", "port"),
        ("allow:example.com:0", "port"),
        ("allow:example.com:65536", "port"),
        ("allow:*:443", "`*` alone"),
        ("allow:a.*.com:443", "first label"),
        ("allow:ok.com:443,", "`"),
    ] {
        let mut raw = RawOptions::default();
        raw.flag(OptionName::Network, value);
        let err = Options::parse(&raw).unwrap_err();
        assert!(
            matches!(&err.problem, Problem::BadAllowRule(reason) if !reason.is_empty()),
            "{value}: {err:?}"
        );
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "--network: `{value}` is not a list of allow rules: "
            )),
            "{text}"
        );
        assert!(text.contains(why), "{value}: {text}");
    }
    // From the variable, named as such.
    let env =
        |name: &str| (name == "PARENT_TOOL_DISPATCH_NETWORK").then(|| OsString::from("allow:nope"));
    let err = Options::parse(&RawOptions::from_env(env)).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("PARENT_TOOL_DISPATCH_NETWORK (--network): `allow:nope` is not"),
        "{err}"
    );
    // `allow` without its colon, or in another case, is no mode at all.
    for value in ["allow", "Allow:example.com:443", "allow=example.com:443"] {
        let mut raw = RawOptions::default();
        raw.flag(OptionName::Network, value);
        let err = Options::parse(&raw).unwrap_err();
        assert_eq!(err.problem, Problem::NotANetworkMode, "{value}");
    }
}

#[test]
fn network_max_bytes_is_a_size_beside_allow_mode_only() {
    let parse = |network: Option<&str>, bytes: &str| {
        let mut raw = RawOptions::default();
        if let Some(network) = network {
            raw.flag(OptionName::Network, network);
        }
        raw.flag(OptionName::NetworkMaxBytes, bytes);
        Options::parse(&raw)
    };
    let allow = Some("allow:example.com:443");
    assert_eq!(parse(allow, "1G").unwrap().network_max_bytes, Some(1 << 30));
    assert_eq!(parse(allow, "4096").unwrap().network_max_bytes, Some(4096));
    let err = parse(allow, "0").unwrap_err();
    assert_eq!(
        (err.option, err.problem),
        (OptionName::NetworkMaxBytes, Problem::Zero)
    );
    assert_eq!(
        parse(allow, "1MB").unwrap_err().problem,
        Problem::AmbiguousUnit
    );
    assert_eq!(parse(allow, "lots").unwrap_err().problem, Problem::NotASize);
    for network in [None, Some("none"), Some("any")] {
        let err = parse(network, "64M").unwrap_err();
        assert_eq!(
            (err.option, &err.problem),
            (OptionName::NetworkMaxBytes, &Problem::NoProxy),
            "{network:?}"
        );
        assert_eq!(
            err.to_string(),
            "--network-max-bytes: `64M` bounds the proxy of `--network allow:HOST:PORT,…`, \
             and the network is not in that mode"
        );
    }
    // The variables, the flag of one and the variable of the other together.
    let env = |name: &str| match name {
        "PARENT_TOOL_DISPATCH_NETWORK" => Some(OsString::from("allow:example.com:443")),
        "PARENT_TOOL_DISPATCH_NETWORK_MAX_BYTES" => Some(OsString::from("2M")),
        _ => None,
    };
    let options = Options::parse(&RawOptions::from_env(env)).unwrap();
    assert_eq!(options.network_max_bytes, Some(2 << 20));
    let mut flags = RawOptions::default();
    flags.flag(OptionName::Network, "none");
    let err = Options::parse(&flags.or_env(RawOptions::from_env(env))).unwrap_err();
    assert_eq!(err.problem, Problem::NoProxy);
    assert!(
        err.to_string()
            .starts_with("PARENT_TOOL_DISPATCH_NETWORK_MAX_BYTES (--network-max-bytes): `2M`"),
        "{err}"
    );
    let i = OptionName::ALL
        .iter()
        .position(|n| *n == OptionName::Network)
        .unwrap();
    assert_eq!(OptionName::ALL[i + 1], OptionName::NetworkMaxBytes);
}

fn size(text: &str) -> Result<u64, Problem> {
    parse_size(OptionName::LimitMemory, Source::Flag, OsStr::new(text)).map_err(|e| e.problem)
}

fn count(text: &str) -> Result<u64, Problem> {
    parse_count(OptionName::LimitPids, Source::Flag, OsStr::new(text)).map_err(|e| e.problem)
}

#[test]
fn sizes_are_binary() {
    assert_eq!(size("256M"), Ok(256 << 20));
    assert_eq!(size("256MiB"), Ok(256 << 20));
    assert_eq!(size("1G"), Ok(1 << 30));
    assert_eq!(size("1g"), Ok(1 << 30));
    assert_eq!(size("512k"), Ok(512 << 10));
    assert_eq!(size("512K"), Ok(512 << 10));
    assert_eq!(size("2T"), Ok(2 << 40));
    assert_eq!(size("4096"), Ok(4096));
    assert_eq!(size("0"), Ok(0));
}

#[test]
fn sizes_refuse_what_they_cannot_read_exactly() {
    assert_eq!(size("256MB"), Err(Problem::AmbiguousUnit));
    assert_eq!(size("1kB"), Err(Problem::AmbiguousUnit));
    for bad in [
        "", "M", "1.5G", " 1G", "1G ", "-1", "+1", "1X", "1GG", "0x10", "1 G",
    ] {
        assert_eq!(size(bad), Err(Problem::NotASize), "{bad:?}");
    }
    assert_eq!(size("8388608T"), Err(Problem::TooLarge));
    assert_eq!(size("99999999999999999999999"), Err(Problem::TooLarge));
    assert_eq!(size(&(i64::MAX as u64).to_string()), Ok(i64::MAX as u64));
    assert_eq!(
        size(&(i64::MAX as u64 + 1).to_string()),
        Err(Problem::TooLarge)
    );
}

#[test]
fn counts_are_positive_whole_numbers() {
    assert_eq!(count("64"), Ok(64));
    assert_eq!(count("0"), Err(Problem::Zero));
    for bad in ["", "1k", "-3", "1.0", " 2"] {
        assert_eq!(count(bad), Err(Problem::NotACount), "{bad:?}");
    }
    assert_eq!(count("9223372036854775808"), Err(Problem::TooLarge));
}

#[test]
fn network_is_none_or_any() {
    assert_eq!(
        parse_network(Source::Flag, OsStr::new("none")),
        Ok((Network::None, Vec::new()))
    );
    assert_eq!(
        parse_network(Source::Flag, OsStr::new("any")),
        Ok((Network::Any, Vec::new()))
    );
    assert_eq!(
        parse_network(Source::Flag, OsStr::new("allow:127.0.0.1:8080")),
        Ok((
            Network::Allow,
            vec![AllowRule::parse("127.0.0.1:8080").unwrap()]
        ))
    );
    let err = parse_network(Source::Env, OsStr::new("None")).unwrap_err();
    assert_eq!(err.problem, Problem::NotANetworkMode);
    assert_eq!(
        err.to_string(),
        "PARENT_TOOL_DISPATCH_NETWORK (--network): `None` is not a network mode \
         (expected `none`, `any` or `allow:HOST:PORT,…`)"
    );
}

#[test]
fn paths_must_exist_and_are_canonical() {
    let dir = tempfile::tempdir().unwrap();
    let inner = dir.path().join("inner");
    std::fs::create_dir(&inner).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&inner, &link).unwrap();
    let canonical = std::fs::canonicalize(&inner).unwrap();
    let mut raw = RawOptions::default();
    raw.flag(OptionName::FsRead, link.join("."));
    let options = Options::parse(&raw).unwrap();
    assert_eq!(options.fs_read, vec![canonical]);
    assert!(options.is_requested() && options.wants_landlock());

    let mut raw = RawOptions::default();
    raw.flag(OptionName::FsRead, dir.path().join("missing"));
    let err = Options::parse(&raw).unwrap_err();
    assert!(matches!(err.problem, Problem::PathUnusable(_)), "{err:?}");
    assert!(err.to_string().starts_with("--fs-read: `"), "{err}");
}

#[test]
fn fs_write_of_the_root_is_refused_however_spelled() {
    for root in ["/", "//", "/tmp/..", "/.", "/./", "/.."] {
        let mut raw = RawOptions::default();
        raw.flag(OptionName::FsWrite, root);
        let err = Options::parse(&raw).unwrap_err();
        assert_eq!(err.problem, Problem::WholeFileSystem, "{root}");
        assert!(err.to_string().starts_with("--fs-write: `"), "{err}");
    }
}

#[test]
fn fs_read_of_the_root_is_refused_however_spelled() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("root");
    std::os::unix::fs::symlink("/", &link).unwrap();
    let link = link.to_str().unwrap().to_string();
    for root in ["/", "//", "/.", "/./", "/..", "/tmp/..", &link] {
        let mut raw = RawOptions::default();
        raw.flag(OptionName::FsRead, "/usr")
            .flag(OptionName::FsRead, root);
        let err = Options::parse(&raw).unwrap_err();
        assert_eq!(
            (err.option, &err.problem),
            (OptionName::FsRead, &Problem::WholeFileSystem),
            "{root}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "--fs-read: `{root}` is the whole file system: read access to it confines \
                 nothing (list the folders the adapter reads)"
            )
        );
    }
    // The variable too, named as such; one entry of its list is enough.
    let env =
        |name: &str| (name == "PARENT_TOOL_DISPATCH_FS_READ").then(|| OsString::from("/usr:/"));
    let err = Options::parse(&RawOptions::from_env(env)).unwrap_err();
    assert_eq!(err.problem, Problem::WholeFileSystem);
    assert!(
        err.to_string()
            .starts_with("PARENT_TOOL_DISPATCH_FS_READ (--fs-read): `/` is the whole file system"),
        "{err}"
    );
}

#[test]
fn the_ledgers_folder_is_canonical_or_what_it_would_be() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().canonicalize().unwrap();
    let link = real.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert_eq!(ledger_folder(&real.join("ledger.db")), real);
    assert_eq!(ledger_folder(&link.join("ledger.db")), real);
    assert_eq!(
        ledger_folder(&link.join("not/yet/ledger.db")),
        real.join("not/yet")
    );
    std::fs::create_dir(real.join("sub")).unwrap();
    assert_eq!(
        ledger_folder(&link.join("./sub/../ledger.db")),
        real,
        "`..` after an existing folder is resolved"
    );
    // A bare name is in the current directory.
    assert_eq!(
        ledger_folder(Path::new("ledger.db")),
        std::env::current_dir().unwrap().canonicalize().unwrap()
    );
    // The ledger file itself is not followed: its folder is where the name is.
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path().join("l.db"), real.join("l.db")).unwrap();
    assert_eq!(ledger_folder(&real.join("l.db")), real);
}

#[test]
fn a_grant_that_holds_the_ledgers_folder_or_lies_in_it_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().canonicalize().unwrap();
    let folder = top.join("state");
    let inner = folder.join("inner");
    let beside = top.join("beside");
    std::fs::create_dir_all(&inner).unwrap();
    std::fs::create_dir(&beside).unwrap();
    // Not made yet: its would-be folder counts.
    let ledger = folder.join("ledger.db");
    let parse = |name: OptionName, path: &Path| {
        let mut raw = RawOptions::default();
        raw.flag(name, path);
        Options::parse_beside_ledger(&raw, Some(&ledger))
    };
    for name in [OptionName::FsRead, OptionName::FsWrite] {
        for (grant, inside) in [(&top, false), (&folder, true), (&inner, true)] {
            let err = parse(name, grant).unwrap_err();
            assert_eq!(
                err.problem,
                Problem::CoversLedger {
                    ledger: ledger.display().to_string(),
                    named_by: "--ledger",
                    folder: folder.clone(),
                    inside,
                },
                "{grant:?}"
            );
            let relation = if inside { "lies in" } else { "holds" };
            assert_eq!(
                err.to_string(),
                format!(
                    "{flag}: `{grant}` {relation} the ledger's folder {folder} (--ledger \
                     `{ledger}`), which is the dispatcher's own: grant folders that neither \
                     hold it nor lie in it",
                    flag = name.flag(),
                    grant = grant.display(),
                    folder = folder.display(),
                    ledger = ledger.display(),
                )
            );
        }
        let options = parse(name, &beside).unwrap();
        assert!(options.wants_landlock());
        // Without a ledger, nothing is in the way.
        let mut raw = RawOptions::default();
        raw.flag(name, &top);
        assert!(Options::parse(&raw).is_ok());
    }
    // A sibling whose name starts like the folder's is not in it.
    let similar = top.join("state-2");
    std::fs::create_dir(&similar).unwrap();
    assert!(parse(OptionName::FsWrite, &similar).is_ok());
}

#[test]
fn environment_lists_split_on_colons_and_flags_win() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    let list = format!("{}:{}", a.display(), b.display());
    let env = |name: &str| match name {
        "PARENT_TOOL_DISPATCH_FS_READ" => Some(OsString::from(&list)),
        "PARENT_TOOL_DISPATCH_LIMIT_MEMORY" => Some(OsString::from("64M")),
        "PARENT_TOOL_DISPATCH_LIMIT_PIDS" => Some(OsString::from("")),
        "PARENT_TOOL_DISPATCH_NETWORK" => Some(OsString::from("none")),
        _ => None,
    };
    let from_env = Options::parse(&RawOptions::from_env(env)).unwrap();
    assert_eq!(
        from_env.fs_read,
        vec![a.canonicalize().unwrap(), b.canonicalize().unwrap()]
    );
    assert_eq!(from_env.limit_memory_bytes, Some(64 << 20));
    assert_eq!(from_env.limit_pids, None, "an empty variable is unset");
    assert_eq!(from_env.network, Network::None);

    let mut flags = RawOptions::default();
    flags
        .flag(OptionName::FsRead, &b)
        .flag(OptionName::LimitMemory, "1G");
    let merged = Options::parse(&flags.clone().or_env(RawOptions::from_env(env))).unwrap();
    assert_eq!(merged.fs_read, vec![b.canonicalize().unwrap()]);
    assert_eq!(merged.limit_memory_bytes, Some(1 << 30));
    assert_eq!(merged.network, Network::None, "no flag: the variable holds");
}

#[test]
fn an_empty_list_entry_names_the_variable() {
    let env = |name: &str| {
        (name == "PARENT_TOOL_DISPATCH_FS_WRITE").then(|| OsString::from("/tmp::/var"))
    };
    let err = Options::parse(&RawOptions::from_env(env)).unwrap_err();
    assert_eq!(err.problem, Problem::EmptyPath);
    assert_eq!(err.option, OptionName::FsWrite);
    assert!(
        err.to_string()
            .starts_with("PARENT_TOOL_DISPATCH_FS_WRITE (--fs-write): an empty path"),
        "{err}"
    );
}

#[test]
fn zero_memory_is_refused_and_zero_file_size_allowed() {
    let mut raw = RawOptions::default();
    raw.flag(OptionName::LimitMemory, "0");
    let err = Options::parse(&raw).unwrap_err();
    assert_eq!(
        (err.option, err.problem),
        (OptionName::LimitMemory, Problem::Zero)
    );
    let mut raw = RawOptions::default();
    raw.flag(OptionName::LimitFileSize, "0");
    assert_eq!(Options::parse(&raw).unwrap().limit_file_size_bytes, Some(0));
}

#[test]
fn nothing_given_requests_nothing() {
    let options = Options::parse(&RawOptions::default()).unwrap();
    assert!(!options.is_requested());
    assert_eq!(options, Options::default());
}

proptest! {
    #[test]
    fn parsing_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
        use std::os::unix::ffi::OsStrExt;
        let value = OsStr::from_bytes(&bytes);
        for name in OptionName::ALL {
            let _ = parse_size(name, Source::Env, value);
            let _ = parse_count(name, Source::Flag, value);
        }
        let _ = parse_network(Source::Flag, value);
        let mut allow = b"allow:".to_vec();
        allow.extend_from_slice(&bytes);
        let allow = OsStr::from_bytes(&allow);
        if let Ok((network, rules)) = parse_network(Source::Env, allow) {
            prop_assert_eq!(network, Network::Allow);
            prop_assert!(!rules.is_empty());
        }
        let _ = parse_network_max_bytes(Source::Flag, value, Network::Allow);
        let env = |_: &str| Some(value.to_os_string());
        if let Err(err) = Options::parse(&RawOptions::from_env(env)) {
            prop_assert!(!err.to_string().is_empty());
        }
        let env = |name: &str| match name {
            "PARENT_TOOL_DISPATCH_NETWORK" => Some(allow.to_os_string()),
            _ => Some(value.to_os_string()),
        };
        if let Err(err) = Options::parse(&RawOptions::from_env(env)) {
            prop_assert!(!err.to_string().is_empty());
        }
    }

    #[test]
    fn a_size_with_a_unit_is_the_number_times_the_unit(n in 0u64..1_000_000, unit in 0usize..5) {
        let (suffix, shift) = [("", 0), ("K", 10), ("M", 20), ("G", 30), ("T", 40)][unit];
        let expected = n.checked_mul(1 << shift).filter(|b| *b <= i64::MAX as u64);
        prop_assert_eq!(size(&format!("{n}{suffix}")).ok(), expected);
    }
}
