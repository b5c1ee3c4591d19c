use super::*;

fn rel(path: &str) -> Vec<&OsStr> {
    path.split('/').map(OsStr::new).collect()
}

#[test]
fn the_table_is_well_formed() {
    for (i, (entry, why)) in ETC_ALLOWED.iter().enumerate() {
        let (path, _, _) = entry_shape(entry);
        let names: Vec<&str> = path.split('/').collect();
        for name in &names {
            assert!(
                !name.is_empty() && *name != "." && *name != "..",
                "{entry}: every name is a name"
            );
            // A prefix only on the last name: a `*` elsewhere would be taken literally.
            assert!(!name.contains('*'), "{entry}: `*` only at the end");
        }
        assert!(!why.trim().is_empty() && !why.contains('|'), "{entry}");
        assert!(
            !ETC_ALLOWED[..i].iter().any(|(e, _)| e == entry),
            "{entry} twice"
        );
    }
}

#[test]
fn etc_allows_the_table_and_what_is_beneath_its_folders_only() {
    for allowed in [
        "passwd",
        "hosts",
        "resolv.conf",
        "ld.so.conf.d/libc.conf",
        "ssl/certs",
        "ssl/certs/ca-certificates.crt",
        "ssl/openssl.cnf",
        "ca-certificates.conf",
        "ca-certificates/extracted/tls-ca-bundle.pem",
        "pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
        "python3.11/sitecustomize.py",
        "alternatives/java",
    ] {
        assert!(etc_allows(&rel(allowed)), "{allowed}");
    }
    // What the first version's deny list let through, what it missed, and its secrets.
    for withheld in [
        "environment",
        "profile",
        "profile.d/locale.sh",
        "npmrc",
        "gitconfig",
        "pip.conf",
        "postgresql/15/main/environment",
        "mysql/debian.cnf",
        "kubernetes/admin.conf",
        "gitlab-runner/config.toml",
        "shadow",
        "gshadow",
        "passwd-",
        "sudoers",
        "ssh/ssh_host_ed25519_key",
        "ssl",
        "ssl/private/ssl-cert-snakeoil.key",
        "pki/tls/private/localhost.key",
        "machine-id",
        "java-17-openjdk/security/java.security",
    ] {
        assert!(!etc_allows(&rel(withheld)), "{withheld}");
    }
}

#[test]
fn the_base_grants_only_the_table_of_etc() {
    let (grants, withheld) = base_grants();
    let has = |p: &str| grants.iter().any(|(g, _)| g == Path::new(p));
    assert!(!has("/etc"), "/etc as a whole would grant shadow");
    assert!(has("/etc/passwd") && has("/etc/hosts") && has("/proc") && has("/dev/null"));
    assert!(grants
        .iter()
        .any(|(g, k)| g.starts_with("/usr") && *k == Grant::ReadExecute));
    for (path, grant) in &grants {
        if let Ok(rest) = path.strip_prefix("/etc") {
            let parts: Vec<&OsStr> = rest.iter().collect();
            assert!(etc_allows(&parts), "{path:?} is not in the table");
            assert_eq!(*grant, Grant::Read, "{path:?}");
        }
    }
    for secret in [
        "/etc/environment",
        "/etc/profile",
        "/etc/shadow",
        "/etc/gshadow",
        "/etc/gitconfig",
        "/etc/npmrc",
        "/etc/pip.conf",
        "/etc/ssl/private",
    ] {
        assert!(
            grants.iter().all(|(g, _)| !g.starts_with(secret)),
            "{secret}"
        );
    }
    if Path::new("/etc/ssl/certs").is_dir() {
        assert!(has("/etc/ssl/certs"), "a folder of the table is one rule");
    }
    // Withheld are entries of the table only (this host's /etc holds no unsafe link).
    for path in &withheld {
        let parts: Vec<&OsStr> = path.strip_prefix("/etc").unwrap().iter().collect();
        assert!(etc_allows(&parts), "{path:?}");
    }
    let etc = grants.iter().filter(|(g, _)| g.starts_with("/etc")).count();
    assert!(etc <= ETC_ALLOWED.len() + 4, "{etc} rules for /etc");
}

/// A made-up `/etc`: each way an entry can be found.
#[test]
fn an_etc_is_granted_by_the_table_and_its_links_by_their_targets() {
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "token\n").unwrap();
    let write = |rel: &str| {
        let path = etc.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "x\n").unwrap();
    };
    let link = |rel: &str, to: &Path| std::os::unix::fs::symlink(to, etc.join(rel)).unwrap();
    for file in [
        "passwd",
        "environment",
        "profile",
        "npmrc",
        "ssl/certs/ca.pem",
        "ssl/private/key.pem",
        "ssl/openssl.cnf",
        "ca-certificates.conf",
        "ca-certificates/update.d/hook",
        "python3.11/sitecustomize.py",
        "postgresql/15/main/environment",
        "elsewhere/ssl-like/certs/x.pem",
    ] {
        write(file);
    }
    std::fs::create_dir(etc.join("hosts")).unwrap();
    std::fs::write(etc.join("alternatives"), "a file, not the folder\n").unwrap();
    // Into the base: no rule of its own.
    link("localtime", Path::new("/usr/bin/env"));
    link("nsswitch.conf", &secret);
    link("group", Path::new("/etc/shadow"));
    link("services", Path::new("/etc/passwd"));
    link("gai.conf", &etc.join("missing"));
    link("pki", &etc.join("elsewhere"));
    let exec_roots = [PathBuf::from("/usr")];
    let mut scan = EtcScan {
        exec_roots: &exec_roots,
        grants: Vec::new(),
        targets: Vec::new(),
        withheld: Vec::new(),
        kinds: Kinds::new(),
    };
    scan.scan(&etc);
    let mut grants = Vec::new();
    let scan = scan.finish(&mut grants);
    let mut granted: Vec<PathBuf> = grants.iter().map(|(p, _)| p.clone()).collect();
    granted.sort();
    let mut expected = vec![
        etc.join("passwd"),
        etc.join("ssl/certs"),
        etc.join("ssl/openssl.cnf"),
        etc.join("ca-certificates"),
        etc.join("ca-certificates.conf"),
        etc.join("python3.11"),
        // `services` → the real /etc/passwd: an entry of the table.
        PathBuf::from("/etc/passwd"),
    ];
    expected.sort();
    assert_eq!(granted, expected);
    assert!(grants.iter().all(|(_, g)| *g == Grant::Read));
    let mut withheld = scan.withheld.clone();
    withheld.sort();
    let mut expected = vec![
        // A folder where the table says a file, and the other way round.
        etc.join("hosts"),
        etc.join("alternatives"),
        // Links to a secret, to a credential store, to nothing, and on the way.
        etc.join("nsswitch.conf"),
        etc.join("group"),
        etc.join("gai.conf"),
        etc.join("pki"),
    ];
    expected.sort();
    assert_eq!(withheld, expected);
    // The kinds came with the look-ups: no fstat for them when the rules are built.
    assert_eq!(scan.kinds.get(&etc.join("ssl/certs")), Some(&true));
    assert_eq!(scan.kinds.get(&etc.join("passwd")), Some(&false));
}

#[test]
fn a_links_target_is_granted_once_and_not_beneath_a_granted_folder() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("certs");
    let mut scan = EtcScan {
        exec_roots: &[],
        grants: vec![folder.clone()],
        targets: vec![
            folder.join("ca.pem"),
            PathBuf::from("/run/resolv.conf"),
            PathBuf::from("/run/resolv.conf"),
        ],
        withheld: Vec::new(),
        kinds: Kinds::new(),
    };
    scan.kinds.insert(folder.clone(), true);
    let mut grants = Vec::new();
    scan.finish(&mut grants);
    assert_eq!(
        grants,
        vec![
            (folder, Grant::Read),
            (PathBuf::from("/run/resolv.conf"), Grant::Read)
        ]
    );
}

#[test]
fn the_docs_show_the_same_table() {
    let docs = include_str!("../../../../../docs/confinement.md");
    let section = docs
        .split("### The base of `/etc`")
        .nth(1)
        .expect("docs/confinement.md has a section on the base of /etc");
    let rows: Vec<&str> = section
        .lines()
        .skip_while(|l| !l.starts_with("| entry"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    let expected: Vec<String> = ETC_ALLOWED
        .iter()
        .map(|(entry, why)| format!("| `{entry}` | {why} |"))
        .collect();
    assert_eq!(
        rows, expected,
        "the table of docs/confinement.md and ETC_ALLOWED"
    );
}

#[test]
fn the_suggestion_is_the_installation() {
    assert_eq!(
        suggestion(Path::new("/root/.pyenv/shims/python3")),
        Path::new("/root/.pyenv")
    );
    assert_eq!(
        suggestion(Path::new("/opt/py/bin/python3")),
        Path::new("/opt/py")
    );
    assert_eq!(
        suggestion(Path::new("/opt/tools/run")),
        Path::new("/opt/tools")
    );
}
