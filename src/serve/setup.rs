//! `serve`'s start: the checks before it listens (tokens, bridge, the main job's own usage
//! checks on the options its children get, TLS), the child dispatcher's command line, and the
//! accept loop with its bounds (connections, the header and TLS handshake time).

use super::child::{self, Launcher};
use super::tokens::Tokens;
use super::{http, reload, State};
use crate::cli::{ConfineArgs, DispatchArgs, ServeArgs};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use ptd_sys::hostenv::HostEnv;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::signal::unix::Signal;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

/// What start-up prepared.
pub(super) struct Ready {
    pub(super) tokens: Tokens,
    pub(super) launcher: Launcher,
    pub(super) tls: Option<TlsAcceptor>,
    /// The server's private copy of the last policy that loaded, which the children read.
    pub(super) policy: Option<PolicyCopy>,
    /// The ledger `/healthz` opens, when one is configured.
    pub(super) ledger: Option<ptd_ledger::Location>,
}

/// What a policy check found: the variable the children read their host session from, and
/// the ledger they use (the command line's, or the policy's `[ledger] path`).
pub(super) struct Checked {
    pub(super) session_var: String,
    pub(super) ledger: Option<ptd_ledger::Location>,
}

/// The largest PEM file read for TLS.
const MAX_PEM_BYTES: u64 = 1024 * 1024;

/// Every check before listening; the error is the one line the refusal logs.
pub(super) fn prepare(args: &ServeArgs) -> Result<Ready, String> {
    let tokens = Tokens::load(&args.token_file)?;
    let bridge_text = args.bridge.parent_tool_bridge.as_deref().ok_or_else(|| {
        format!(
            "no bridge: pass --parent-tool-bridge '<json>|@FILE' or set {}",
            crate::cli::BRIDGE_ENV
        )
    })?;
    let bridge = ptd_wire::envelope::bridge::Bridge::load(bridge_text)
        .map_err(|err| format!("the bridge does not load: {err}"))?;
    let policy = match &args.policy {
        Some(_) => Some(PolicyCopy::create()?),
        None => None,
    };
    let checked = match &policy {
        Some(copy) => copy.refresh(args)?,
        None => check_policy(args, None)?,
    };
    let session_var = checked.session_var;
    let exe = std::env::current_exe()
        .map_err(|err| format!("this program's own path is unknown: {err}"))?;
    let grace = Duration::from_millis(args.run.kill_grace_ms);
    let env = std::env::vars_os()
        .filter(|(name, _)| name != session_var.as_str() && name != crate::cli::SESSION_ENV)
        .collect();
    let launcher = Launcher {
        argv: child_argv(&exe, args, policy.as_ref().map(|p| p.path.as_path())),
        exe,
        env,
        session_var,
        bound: Launcher::bound_for(Duration::from_millis(bridge.timeout_ms), grace),
        grace,
        stdout_cap: child::stdout_cap(args.run.max_output_bytes),
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls_acceptor(cert, key)?),
        _ => None,
    };
    Ok(Ready {
        tokens,
        launcher,
        tls,
        policy,
        ledger: checked.ledger,
    })
}

/// The main job's own usage checks on the options every child gets, with the policy at
/// `policy` (the operator's file when `None`; a policy that does not load is refused here too).
pub(super) fn check_policy(args: &ServeArgs, policy: Option<&Path>) -> Result<Checked, String> {
    let process = HostEnv::process();
    let mut session_var = crate::cli::SESSION_ENV.to_string();
    let mut ledger = args.ledger.ledger.clone();
    if let Some(path) = policy.or(args.policy.as_deref()) {
        let policy =
            crate::dispatch::policy::load(path, args.ledger.ledger.as_deref(), None, &process)
                .map_err(|problems| {
                    let first = problems
                        .first()
                        .map(ToString::to_string)
                        .unwrap_or_default();
                    format!(
                        "the policy does not load ({} problems): {first}",
                        problems.len()
                    )
                })?;
        if let Some(section) = &policy.ledger {
            if let Some(var) = section.session_env.clone() {
                session_var = var;
            }
            if ledger.is_none() {
                ledger = section.path.as_ref().map(PathBuf::from);
            }
        }
    }
    // A token's session stands in for the variable, which the server itself may lack.
    let env = HostEnv::with([(session_var.clone(), "serve-start-check".to_string())]);
    let mut dispatch = dispatch_args(args);
    if session_var == crate::cli::SESSION_ENV {
        // A child reads that variable as `--session` (clap's `env`), not through `env`.
        dispatch.ledger.session = Some("serve-start-check".to_string());
    }
    if let Some(path) = policy {
        dispatch.policy = Some(path.to_path_buf());
    }
    crate::dispatch::check_usage(&dispatch, &env).map_err(|err| err.to_string())?;
    let ledger = match ledger {
        Some(path) => {
            Some(crate::dispatch::gate::location_of(&path).map_err(|err| err.to_string())?)
        }
        None => None,
    };
    Ok(Checked {
        session_var,
        ledger,
    })
}

/// The largest policy file copied.
const MAX_POLICY_BYTES: u64 = 16 * 1024 * 1024;

/// The server's private copy of the operator's policy file: a folder only the server may
/// enter (0700, removed when the server stops), holding the last policy that loaded. The
/// children read the copy, so an operator's broken edit reaches none of them: a SIGHUP replaces
/// the copy only when the new file loads.
pub(super) struct PolicyCopy {
    dir: tempfile::TempDir,
    pub(super) path: PathBuf,
}

impl PolicyCopy {
    fn create() -> Result<PolicyCopy, String> {
        let dir = tempfile::Builder::new()
            .prefix("ptd-serve-")
            .tempdir()
            .map_err(|err| format!("no private folder for the policy: {err}"))?;
        let path = dir.path().join("policy.toml");
        Ok(PolicyCopy { dir, path })
    }

    /// Check the operator's policy file, copy it (its bytes read once, written atomically to
    /// a staging file that is loaded again, so that what the children read is what loaded),
    /// then put it in place of the copy. On any error the copy is left as it was.
    pub(super) fn refresh(&self, args: &ServeArgs) -> Result<Checked, String> {
        let Some(operator) = &args.policy else {
            return check_policy(args, None);
        };
        check_policy(args, None)?;
        let bytes = ptd_sys::fs::read_file(operator, MAX_POLICY_BYTES)
            .map_err(|err| format!("the policy cannot be read: {err}"))?;
        let staging = self.dir.path().join("staging.toml");
        ptd_sys::fs::write_atomic(&staging, &bytes)
            .map_err(|err| format!("the policy cannot be copied: {err}"))?;
        let checked = check_policy(args, Some(&staging))?;
        rustix::fs::rename(&staging, &self.path)
            .map_err(|err| format!("the policy cannot be copied: {err}"))?;
        Ok(checked)
    }
}

/// The main job's options that a child dispatcher of `args` runs with.
fn dispatch_args(args: &ServeArgs) -> DispatchArgs {
    let mut dispatch = DispatchArgs::with_bridge(String::new());
    dispatch.bridge = args.bridge.clone();
    dispatch.policy = args.policy.clone();
    dispatch.artifact_dir = args.artifact_dir.clone();
    dispatch.tool_map = args.tool_map.clone();
    dispatch.ca_cert = args.ca_cert.clone();
    dispatch.run = args.run.clone();
    dispatch.ledger = args.ledger.clone();
    dispatch.ledger.session = None;
    dispatch
}

/// The child dispatcher's argv: the server's host options as flags (each at its default left
/// out); its host session travels in its environment.
fn child_argv(exe: &Path, args: &ServeArgs, policy: Option<&Path>) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec![exe.as_os_str().to_os_string()];
    let mut flag = |name: &str, value: OsString| {
        argv.push(OsString::from(name));
        argv.push(value);
    };
    if let Some(bridge) = &args.bridge.parent_tool_bridge {
        flag("--parent-tool-bridge", bridge.into());
    }
    if let Some(path) = policy {
        flag("--policy", path.into());
    }
    let paths = [
        ("--artifact-dir", &args.artifact_dir),
        ("--ca-cert", &args.ca_cert),
        ("--ledger", &args.ledger.ledger),
    ];
    for (name, value) in paths {
        if let Some(path) = value {
            flag(name, path.into());
        }
    }
    let texts = [
        ("--tool-map", &args.tool_map),
        ("--budget-calls", &args.ledger.budget_calls),
        ("--budget-adapter-ms", &args.ledger.budget_adapter_ms),
        ("--max-concurrent", &args.ledger.max_concurrent),
        ("--lease-ttl", &args.ledger.lease_ttl),
    ];
    for (name, value) in texts {
        if let Some(text) = value {
            flag(name, text.into());
        }
    }
    if let Some(choice) = args.ledger.ledger_durability {
        let choice = ptd_ledger::Durability::from(choice);
        flag("--ledger-durability", choice.name().into());
    }
    let lists = [
        ("--pass-env", &args.run.pass_env),
        ("--secret-env", &args.run.secret_env),
        ("--budget-tool", &args.ledger.budget_tool),
    ];
    for (name, values) in lists {
        for value in values {
            flag(name, value.into());
        }
    }
    let defaults = DispatchArgs::with_bridge(String::new()).run;
    let numbers = [
        (
            "--max-output-bytes",
            args.run.max_output_bytes,
            defaults.max_output_bytes,
        ),
        (
            "--max-request-bytes",
            args.run.max_request_bytes,
            defaults.max_request_bytes,
        ),
        (
            "--kill-grace-ms",
            args.run.kill_grace_ms,
            defaults.kill_grace_ms,
        ),
    ];
    for (name, value, default) in numbers {
        if value != default {
            flag(name, value.to_string().into());
        }
    }
    argv.extend(confine_flags(&args.run.confine));
    argv
}

/// The confinement flags as given (their variables reach the child through its environment).
fn confine_flags(confine: &ConfineArgs) -> Vec<OsString> {
    let mut out = Vec::new();
    let many = [
        ("--fs-read", &confine.fs_read),
        ("--fs-write", &confine.fs_write),
    ];
    for (name, values) in many {
        for value in values {
            out.extend([OsString::from(name), value.clone()]);
        }
    }
    let singles = [
        ("--network", &confine.network),
        ("--network-max-bytes", &confine.network_max_bytes),
        ("--limit-memory", &confine.limit_memory),
        ("--limit-pids", &confine.limit_pids),
        ("--limit-open-files", &confine.limit_open_files),
        ("--limit-file-size", &confine.limit_file_size),
        ("--run-as", &confine.run_as),
    ];
    for (name, value) in singles {
        if let Some(value) = value {
            out.extend([OsString::from(name), value.clone()]);
        }
    }
    out
}

/// The TLS acceptor of a PEM certificate chain and key (read through `ptd_sys::fs`).
fn tls_acceptor(cert: &std::path::Path, key: &std::path::Path) -> Result<TlsAcceptor, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let cert_pem = ptd_sys::fs::read_file(cert, MAX_PEM_BYTES)
        .map_err(|err| format!("--tls-cert cannot be read: {err}"))?;
    let key_pem = ptd_sys::fs::read_file(key, MAX_PEM_BYTES)
        .map_err(|err| format!("--tls-key cannot be read: {err}"))?;
    let certs = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| format!("--tls-cert is not PEM certificates: {err}"))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|err| format!("--tls-key is not a PEM private key: {err}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| format!("TLS cannot be set up: {err}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|err| format!("--tls-cert and --tls-key do not make a TLS identity: {err}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The listener and its bounds.
pub(super) struct Accept {
    pub(super) listener: TcpListener,
    pub(super) tls: Option<TlsAcceptor>,
    pub(super) connections: Arc<Semaphore>,
    pub(super) header_timeout: Duration,
}

/// SIGTERM, SIGINT and SIGHUP, as tokio's streams.
pub(super) type Signals = (Signal, Signal, Signal);

impl Accept {
    /// Accept connections until SIGTERM or SIGINT (whose name it returns); SIGHUP reloads.
    /// Past `--max-connections`, new connections wait in the listen backlog.
    pub(super) async fn run(
        self,
        state: &Arc<State>,
        graceful: &GracefulShutdown,
        signals: Signals,
        args: &ServeArgs,
    ) -> &'static str {
        let (mut term, mut int, mut hup) = signals;
        loop {
            let permit = tokio::select! {
                permit = self.connections.clone().acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => return "closed",
                },
                _ = term.recv() => return "SIGTERM",
                _ = int.recv() => return "SIGINT",
                _ = hup.recv() => { reload(state, args); continue; }
            };
            let (stream, peer) = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    // Out of descriptors or the like: the next try, a little later.
                    Err(_) => { tokio::time::sleep(Duration::from_millis(50)).await; continue; }
                },
                _ = term.recv() => return "SIGTERM",
                _ = int.recv() => return "SIGINT",
                _ = hup.recv() => { reload(state, args); continue; }
            };
            let _ = stream.set_nodelay(true);
            let (state, tls, watcher) = (Arc::clone(state), self.tls.clone(), graceful.watcher());
            let header_timeout = self.header_timeout;
            tokio::spawn(async move {
                state.metrics.connection(true);
                match tls {
                    None => {
                        connection(TokioIo::new(stream), &state, peer, watcher, header_timeout)
                            .await
                    }
                    Some(acceptor) => {
                        if let Ok(Ok(stream)) =
                            tokio::time::timeout(header_timeout, acceptor.accept(stream)).await
                        {
                            connection(TokioIo::new(stream), &state, peer, watcher, header_timeout)
                                .await;
                        }
                    }
                }
                state.metrics.connection(false);
                drop(permit);
            });
        }
    }
}

/// One connection: HTTP/1.1 (pipelining and keep-alive as hyper does them), its head within
/// the header timeout, watched for the graceful shutdown.
async fn connection<I>(
    io: TokioIo<I>,
    state: &Arc<State>,
    peer: SocketAddr,
    watcher: Watcher,
    header_timeout: Duration,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let state = Arc::clone(state);
    let service =
        hyper::service::service_fn(move |req| http::handle(Arc::clone(&state), peer, req));
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_buf_size(64 * 1024)
        .serve_connection(io, service);
    let _ = watcher.watch(conn).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    /// `serve`'s options as parsed from `extra`.
    fn serve_args(extra: &[&str]) -> ServeArgs {
        let mut argv = vec![
            "parent-tool-dispatch",
            "serve",
            "--listen",
            "127.0.0.1:8700",
            "--token-file",
            "/etc/ptd/tokens",
        ];
        argv.extend(extra);
        match Cli::try_parse_from(argv).unwrap().command {
            Some(Command::Serve(args)) => *args,
            other => panic!("{other:?}"),
        }
    }

    /// The value that follows `name` in `argv`, if `name` is there.
    fn value_of(argv: &[OsString], name: &str) -> Option<OsString> {
        let at = argv.iter().position(|a| a == name)?;
        argv.get(at + 1).cloned()
    }

    #[test]
    fn the_ledger_options_reach_every_child_dispatcher() {
        let exe = Path::new("/usr/bin/parent-tool-dispatch");
        let args = serve_args(&[
            "--ledger",
            "/var/lib/ptd/ledger.db",
            "--lease-ttl",
            "45s",
            "--ledger-durability",
            "normal",
        ]);
        let argv = child_argv(exe, &args, None);
        assert_eq!(argv[0], exe.as_os_str());
        assert_eq!(
            value_of(&argv, "--ledger"),
            Some("/var/lib/ptd/ledger.db".into())
        );
        assert_eq!(value_of(&argv, "--lease-ttl"), Some("45s".into()));
        assert_eq!(
            value_of(&argv, "--ledger-durability"),
            Some("normal".into())
        );
        // Left at its default, the choice is not written.
        let argv = child_argv(exe, &serve_args(&["--ledger", "/l.db"]), None);
        assert_eq!(value_of(&argv, "--ledger-durability"), None);
    }
}
