//! `serve`'s command line (SPEC 19.2): its own options, then every host option of the main job,
//! which each request's child dispatcher gets as given.

use super::{BridgeArg, LedgerArgs, RunArgs};
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;

/// `--max-connections`' default.
pub(crate) const DEFAULT_MAX_CONNECTIONS: u32 = 256;
/// `--max-in-flight`' default.
pub(crate) const DEFAULT_MAX_IN_FLIGHT: u32 = 64;
/// `--drain-ms`' default.
pub(crate) const DEFAULT_DRAIN_MS: u64 = 10_000;
/// `--header-timeout-ms`' default.
pub(crate) const DEFAULT_HEADER_TIMEOUT_MS: u64 = 10_000;
/// `--body-timeout-ms`' default.
pub(crate) const DEFAULT_BODY_TIMEOUT_MS: u64 = 30_000;

/// `serve`'s options.
#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// The address and port to listen on, e.g. 127.0.0.1:8700.
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// The bearer tokens: one a line (16 or more characters, no whitespace inside), optionally
    /// followed by ` session=ID` (the host session of that token's requests). Writable by its
    /// owner alone; reloaded on SIGHUP.
    #[arg(long, value_name = "FILE")]
    pub token_file: PathBuf,
    /// Serve HTTPS with this PEM certificate chain (needs --tls-key).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// At most N connections open at once; more wait in the listen backlog.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub max_connections: u32,
    /// At most N dispatches running at once; more are answered 503 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_IN_FLIGHT, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_in_flight: u32,
    /// On SIGTERM or SIGINT, how long dispatches in flight may take to finish (ms) before
    /// their child dispatchers are stopped.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_DRAIN_MS)]
    pub drain_ms: u64,
    /// How long a client may take to send a request's line and headers (ms), also the TLS
    /// handshake's bound.
    #[arg(long, hide_short_help = true, value_name = "MS", default_value_t = DEFAULT_HEADER_TIMEOUT_MS)]
    pub header_timeout_ms: u64,
    /// How long a client may take to send a request's body (ms).
    #[arg(long, hide_short_help = true, value_name = "MS", default_value_t = DEFAULT_BODY_TIMEOUT_MS)]
    pub body_timeout_ms: u64,

    #[command(flatten)]
    pub bridge: BridgeArg,

    /// The host policy (SPEC 16), as the main job's --policy; reloaded (checked) on SIGHUP.
    #[arg(long, value_name = "FILE", env = super::POLICY_ENV, hide_env_values = true)]
    pub policy: Option<PathBuf>,

    /// As the main job's --artifact-dir.
    #[arg(long, hide_short_help = true, value_name = "DIR")]
    pub artifact_dir: Option<PathBuf>,

    /// As the main job's --tool-map.
    #[arg(long, hide_short_help = true, value_name = "JSON|@FILE|provider-safe")]
    pub tool_map: Option<String>,

    /// As the main job's --ca-cert.
    #[arg(long, hide_short_help = true, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,

    #[command(flatten)]
    pub run: RunArgs,

    #[command(flatten)]
    pub ledger: LedgerArgs,
}
