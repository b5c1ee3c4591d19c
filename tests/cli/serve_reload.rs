//! `serve` beyond its routes (SPEC §19.2): a SIGHUP that finds the policy broken keeps the
//! last good one for every child, `/healthz` opens the ledger, and HTTPS with `--tls-cert`
//! and `--tls-key`.

use super::serve::{free_port, wait_for, Server, TOKEN};
use super::*;
use ptd_sys::pgtest;
use std::os::unix::fs::PermissionsExt;

/// A policy whose one tool is the test adapter reporting `marker` as its last argument.
fn policy_text(marker: &str) -> String {
    let mut argv: Vec<String> = vec![test_bin().display().to_string(), "adapter".into()];
    argv.extend(["echo", "--", marker].map(String::from));
    let quoted: Vec<String> = argv.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "version = 1\n\n[[tool]]\nmatch = \"workspace.read\"\nadapter = [{}]\nunconfined = true\n\n\
         [defaults]\nunconfined = true\n",
        quoted.join(", ")
    )
}

fn write_policy(path: &std::path::Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// The marker of the adapter that answered `server`'s dispatch.
fn marker(server: &Server, id: &str) -> String {
    let mut r = request();
    r["request_id"] = json!(id);
    let reply = server.post(Some(TOKEN), r.to_string().as_bytes(), "");
    assert_eq!(reply.status, 200);
    let envelope = reply.json();
    assert_eq!(envelope["status"], "succeeded", "{}", reply.body);
    let argv = envelope["output"]["argv"].as_array().unwrap();
    argv.last().unwrap().as_str().unwrap().to_string()
}

#[test]
fn sighup_keeps_the_last_good_policy_for_the_children() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    write_policy(&policy, &policy_text("old"));
    let policy_arg = policy.display().to_string();
    let server = Server::start(
        &bridge(&["echo", "--", "bridge"]),
        &format!("{TOKEN}\n"),
        &["--policy", &policy_arg],
    );
    assert_eq!(marker(&server, "ptr_1"), "old");
    // Broken: the children still run under the old policy, and the server stays healthy.
    write_policy(&policy, "version = 1\n[[tool]]\nmatch = 3\n");
    server.signal(rustix::process::Signal::HUP);
    wait_for(|| {
        server
            .get("/metrics", Some(TOKEN))
            .body
            .contains("ptd_serve_reloads_refused_total 1")
    });
    assert_eq!(marker(&server, "ptr_2"), "old");
    assert_eq!(server.get("/healthz", None).status, 200);
    // Fixed: the next calls see the new one.
    write_policy(&policy, &policy_text("new"));
    server.signal(rustix::process::Signal::HUP);
    let n = std::cell::Cell::new(3);
    wait_for(|| {
        n.set(n.get() + 1);
        marker(&server, &format!("ptr_{}", n.get())) == "new"
    });
    let lines = server.stop();
    let refused: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "reload_refused" && l["what"] == "policy")
        .collect();
    assert_eq!(refused.len(), 1, "{lines:?}");
    assert!(refused[0]["error"]
        .as_str()
        .unwrap()
        .contains("does not load"));
    assert!(lines
        .iter()
        .any(|l| l["event"] == "reload" && l["what"] == "policy"));
}

#[test]
fn healthz_opens_a_postgresql_ledger() {
    require!(skip::postgres());
    let url = pgtest::fresh_database();
    let password = pgtest::cluster().unwrap().password.clone();
    Cmd::new(["ledger", "migrate", "--ledger", &url])
        .env("PGPASSWORD", &password)
        .run()
        .exit(0)
        .stderr_empty()
        .stdout_contains("\"to\"");
    let server = Server::start_with(
        &bridge(&["read-stdin", "echo"]),
        &format!("{TOKEN}\n"),
        &["--ledger", &url],
        &[("PGPASSWORD", &password)],
    );
    let health = server.get("/healthz", None);
    assert_eq!(health.status, 200, "{}", health.body);
    assert_eq!(health.json(), json!({"status": "ok"}));
    server.stop();
}

#[test]
fn healthz_is_503_while_the_ledger_cannot_be_reached() {
    let url = format!(
        "postgres://ptd@127.0.0.1:{}/ptd?sslmode=disable&connect_timeout=2",
        free_port()
    );
    let server = Server::start_with(
        &bridge(&["read-stdin", "echo"]),
        &format!("{TOKEN}\n"),
        &["--ledger", &url],
        &[("PGPASSWORD", "not-used")],
    );
    let health = server.get("/healthz", None);
    assert_eq!(health.status, 503, "{}", health.body);
    let why = health.json();
    assert_eq!(why["status"], "unavailable");
    assert_eq!(why["code"], "ledger_unavailable");
    assert_eq!(why["retryable"], true);
    assert!(!health.body.contains("127.0.0.1"), "{}", health.body);
    server.stop();
}

/// A CA, and a leaf for 127.0.0.1 it signed: (CA PEM, leaf PEM, leaf key PEM).
fn test_pki() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.distinguished_name.push(
        rcgen::DnType::CommonName,
        "parent-tool-dispatch serve test CA",
    );
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    (ca_cert.pem(), leaf.pem(), leaf_key.serialize_pem())
}

#[test]
fn serve_over_tls_answers_a_client_that_trusts_it_and_not_plain_http() {
    let (ca, cert, key) = test_pki();
    let pki = tempfile::tempdir().unwrap();
    let path = |name: &str| pki.path().join(name).display().to_string();
    std::fs::write(path("ca.pem"), ca).unwrap();
    std::fs::write(path("cert.pem"), cert).unwrap();
    write_policy(&pki.path().join("key.pem"), &key);
    let server = Server::start(
        &bridge(&["read-stdin", "echo"]),
        &format!("{TOKEN}\n"),
        &[
            "--tls-cert",
            &path("cert.pem"),
            "--tls-key",
            &path("key.pem"),
        ],
    );
    let mut endpoint = bridge(&[]);
    let d = &mut endpoint["dispatcher"];
    d["mode"] = json!("host_endpoint");
    d.as_object_mut().unwrap().remove("command");
    d["endpoint"] =
        json!({"url_env": "PTD_SERVE_URL", "method": "POST", "token_env": "PTD_SERVE_TOKEN"});
    let url = format!("https://127.0.0.1:{}/v1/dispatch", server.port);
    let run = Dispatch::with_bridge(endpoint.clone())
        .args(&["--ca-cert", &path("ca.pem")])
        .env("PTD_SERVE_URL", &url)
        .env("PTD_SERVE_TOKEN", TOKEN)
        .run();
    assert_eq!(run.status(), "succeeded", "{}", run.stderr);
    // Without the CA the certificate is not trusted.
    let untrusted = Dispatch::with_bridge(endpoint)
        .env("PTD_SERVE_URL", &url)
        .env("PTD_SERVE_TOKEN", TOKEN)
        .run();
    untrusted.expect("unavailable", Some("endpoint_unreachable"), 69);
    assert!(
        untrusted.stderr.contains("UnknownIssuer"),
        "{}",
        untrusted.stderr
    );
    // Plain HTTP to the TLS port: no HTTP answer.
    let plain = server.try_send(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert!(plain.map_or(true, |reply| reply.status == 0));
    server.stop();
}
