//! Where a ledger is (SPEC §14, §19.1): a file (SQLite) or a `postgres://` URL, and the
//! PostgreSQL password, which never comes from the URL.
//!
//! The password is looked up in this order: the file named by
//! `PARENT_TOOL_DISPATCH_LEDGER_PASSWORD_FILE` (one trailing newline ignored), `PGPASSWORD`,
//! then `~/.pgpass` (or `PGPASSFILE`), read like libpq reads it: `host:port:db:user:password`
//! lines, `*` matching anything, `\:` and `\\` escapes, and the file ignored unless it has no
//! group or other permission. It is held in a [`Password`], whose `Debug` shows nothing, and
//! never enters a message.

use super::LedgerError;
use ptd_sys::hostenv::HostEnv;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The variable naming a file that holds the ledger's password.
pub const PASSWORD_FILE_VAR: &str = "PARENT_TOOL_DISPATCH_LEDGER_PASSWORD_FILE";

/// The largest password file (or `~/.pgpass`) read.
const MAX_PASSWORD_FILE: u64 = 64 * 1024;

/// Where the ledger is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// An SQLite file.
    File(PathBuf),
    /// A PostgreSQL database.
    Postgres(PgUrl),
}

impl std::fmt::Display for Location {
    /// The file's path, or the URL without any secret (`postgres://user@host:port/db`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::File(path) => write!(f, "{}", path.display()),
            Location::Postgres(url) => write!(f, "{url}"),
        }
    }
}

impl Location {
    /// A `postgres://` or `postgresql://` URL is PostgreSQL (checked here: a password in it
    /// is an error), anything else a file path.
    pub fn parse(text: &str) -> Result<Location, LedgerError> {
        if Location::is_url(text) {
            PgUrl::parse(text).map(Location::Postgres)
        } else {
            Ok(Location::File(PathBuf::from(text)))
        }
    }

    /// Whether `text` names a PostgreSQL ledger (a `postgres://` or `postgresql://` URL,
    /// case-insensitive) rather than a file: the one test every reader of `--ledger` uses.
    pub fn is_url(text: &str) -> bool {
        let lower = text.get(..13).unwrap_or(text).to_ascii_lowercase();
        lower.starts_with("postgres://") || lower.starts_with("postgresql://")
    }

    /// The ledger a command-line path names (a path that is not UTF-8 is a file).
    pub fn of_path(path: &Path) -> Result<Location, LedgerError> {
        match path.to_str() {
            Some(text) => Location::parse(text),
            None => Ok(Location::File(path.to_path_buf())),
        }
    }
}

/// `sslmode` (libpq's meanings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Never TLS.
    Disable,
    /// TLS when the server offers it, no certificate check (the default).
    Prefer,
    /// TLS, no certificate check.
    Require,
    /// TLS, the server's certificate checked against the roots, not its name.
    VerifyCa,
    /// TLS, the certificate and the host name checked.
    VerifyFull,
}

/// A PostgreSQL ledger's URL, without a password: `postgres://USER@HOST[:PORT]/DB?…` with
/// `host`, `port`, `sslmode`, `sslrootcert`, `connect_timeout` and `application_name`
/// understood (anything else is refused). As in libpq, a host that is an absolute path
/// (`postgres://USER@%2Frun%2Fpostgresql/DB`, or `postgres://USER@/DB?host=/run/postgresql`)
/// is the folder of the server's unix socket: no TCP, no TLS, and the server may authenticate
/// the connecting process by its user (`peer`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgUrl {
    /// The user.
    pub user: String,
    /// The host name or address (an IPv6 address without its brackets), or the folder of
    /// the server's unix socket (an absolute path).
    pub host: String,
    /// The port (5432 by default).
    pub port: u16,
    /// The database (the user's name by default).
    pub dbname: String,
    /// `sslmode` (`prefer` by default).
    pub sslmode: SslMode,
    /// `sslrootcert`: the roots to check the server against instead of the platform's.
    pub sslrootcert: Option<PathBuf>,
    /// `connect_timeout` in seconds.
    pub connect_timeout: Option<Duration>,
    /// `application_name`.
    pub application_name: Option<String>,
}

impl std::fmt::Display for PgUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = if self.is_socket() {
            self.host.replace('/', "%2F")
        } else if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        write!(
            f,
            "postgres://{}@{host}:{}/{}",
            self.user, self.port, self.dbname
        )
    }
}

fn bad(why: impl std::fmt::Display) -> LedgerError {
    LedgerError::Url(why.to_string())
}

/// `%XX` decoded; an invalid escape or non-UTF-8 result is an error.
fn decode(text: &str) -> Result<String, LedgerError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| bad("an invalid %-escape"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad("an escape that is not UTF-8"))
}

impl PgUrl {
    /// Parse a `postgres://` URL. A password in it is an error whose message does not repeat
    /// the URL.
    pub fn parse(text: &str) -> Result<PgUrl, LedgerError> {
        let rest = text
            .split_once("://")
            .map(|(_, rest)| rest)
            .ok_or_else(|| bad("not a postgres:// URL"))?;
        let (before_query, query) = match rest.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = match before_query.split_once('/') {
            Some((a, p)) => (a, p),
            None => (before_query, ""),
        };
        let (userinfo, hostport) = authority
            .rsplit_once('@')
            .ok_or_else(|| bad("the URL names no user (postgres://USER@HOST/DB)"))?;
        if userinfo.contains(':') {
            return Err(bad(
                "the URL carries a password, which would show in process lists: give it \
                 through PGPASSWORD, ~/.pgpass or PARENT_TOOL_DISPATCH_LEDGER_PASSWORD_FILE",
            ));
        }
        let user = decode(userinfo)?;
        if user.is_empty() {
            return Err(bad("the URL names no user (postgres://USER@HOST/DB)"));
        }
        let (host, port) = split_host_port(hostport)?;
        let dbname = match decode(path)? {
            db if db.is_empty() => user.clone(),
            db => db,
        };
        let mut url = PgUrl {
            user,
            host,
            port,
            dbname,
            sslmode: SslMode::Prefer,
            sslrootcert: None,
            connect_timeout: None,
            application_name: None,
        };
        let named_host = !url.host.is_empty();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = decode(name)?;
            if name == "host" && (named_host || !url.host.is_empty()) {
                return Err(bad("the URL names its host twice"));
            }
            url.set(&name, &decode(value)?)?;
        }
        url.check_host()?;
        Ok(url)
    }

    /// Whether the host is the folder of the server's unix socket.
    pub fn is_socket(&self) -> bool {
        self.host.starts_with('/')
    }

    fn check_host(&self) -> Result<(), LedgerError> {
        if self.host.is_empty() || self.host.contains(',') {
            return Err(bad("the URL must name exactly one host"));
        }
        if self.is_socket() {
            if matches!(
                self.sslmode,
                SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull
            ) {
                return Err(bad(
                    "TLS is not used over a unix socket: sslmode require, verify-ca and \
                     verify-full need a host name or address",
                ));
            }
        } else if self.host.contains('/') {
            return Err(bad(
                "the host is neither a name, an address nor an absolute socket folder",
            ));
        }
        Ok(())
    }

    fn set(&mut self, name: &str, value: &str) -> Result<(), LedgerError> {
        match name {
            "sslmode" => {
                self.sslmode = match value {
                    "disable" => SslMode::Disable,
                    "prefer" => SslMode::Prefer,
                    "require" => SslMode::Require,
                    "verify-ca" => SslMode::VerifyCa,
                    "verify-full" => SslMode::VerifyFull,
                    other => {
                        return Err(bad(format!(
                            "sslmode {other:?} is not disable, prefer, require, verify-ca or \
                             verify-full"
                        )))
                    }
                }
            }
            "sslrootcert" => self.sslrootcert = Some(PathBuf::from(value)),
            "connect_timeout" => {
                let secs: u64 = value
                    .parse()
                    .map_err(|_| bad("connect_timeout is not a number of seconds"))?;
                self.connect_timeout = Some(Duration::from_secs(secs));
            }
            "application_name" => self.application_name = Some(value.to_string()),
            "host" => self.host = value.to_string(),
            "port" => {
                self.port = value.parse().map_err(|_| bad("the port is not a number"))?;
            }
            "password" => {
                return Err(bad(
                    "the URL carries a password, which would show in process lists: give it \
                     through PGPASSWORD, ~/.pgpass or PARENT_TOOL_DISPATCH_LEDGER_PASSWORD_FILE",
                ))
            }
            other => return Err(bad(format!("the URL parameter {other:?} is not supported"))),
        }
        Ok(())
    }
}

fn split_host_port(hostport: &str) -> Result<(String, u16), LedgerError> {
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| bad("an IPv6 host without its closing bracket"))?;
        (host.to_string(), after.strip_prefix(':'))
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (decode(h)?, Some(p)),
            None => (decode(hostport)?, None),
        }
    };
    let port = match port {
        None | Some("") => 5432,
        Some(p) => p.parse().map_err(|_| bad("the port is not a number"))?,
    };
    Ok((host, port))
}

/// A password: its `Debug` shows nothing.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(pub(crate) String);

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(…)")
    }
}

/// The password for `url`, from `env` (see the module's comment); `None` when none is given
/// (the server may not ask). A password file that cannot be read is an error naming the
/// variable, not the file's content.
pub fn password_for(url: &PgUrl, env: &HostEnv) -> Result<Option<Password>, LedgerError> {
    if let Some(file) = env.var_os(PASSWORD_FILE_VAR) {
        let bytes = ptd_sys::fs::read_file(Path::new(&file), MAX_PASSWORD_FILE).map_err(|e| {
            LedgerError::Password(format!("the file {PASSWORD_FILE_VAR} names: {e}"))
        })?;
        let text = String::from_utf8(bytes).map_err(|_| {
            LedgerError::Password(format!("the file {PASSWORD_FILE_VAR} names is not UTF-8"))
        })?;
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        return Ok(Some(Password(text.to_string())));
    }
    if let Some(pw) = env.var("PGPASSWORD") {
        return Ok(Some(Password(pw)));
    }
    let pgpass = match (env.var_os("PGPASSFILE"), env.var_os("HOME")) {
        (Some(file), _) => PathBuf::from(file),
        (None, Some(home)) => PathBuf::from(home).join(".pgpass"),
        (None, None) => return Ok(None),
    };
    // Like libpq: a missing or unreadable file, or one others may read, is ignored.
    let Ok((bytes, st)) = ptd_sys::fs::read_file_with_status(&pgpass, MAX_PASSWORD_FILE) else {
        return Ok(None);
    };
    if st.st_mode & 0o077 != 0 {
        return Ok(None);
    }
    Ok(String::from_utf8(bytes)
        .ok()
        .and_then(|text| pgpass_lookup(&text, url)))
}

/// The password of the first `~/.pgpass` line matching `url`.
/// Over a unix socket the host field may also be `localhost`, as libpq allows for its default
/// socket folder.
pub(crate) fn pgpass_lookup(text: &str, url: &PgUrl) -> Option<Password> {
    let port = url.port.to_string();
    let want = [url.host.as_str(), &port, &url.dbname, &url.user];
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let fields = pgpass_fields(line);
            if fields.len() < 5 {
                return None;
            }
            let host_is_localhost = url.is_socket() && fields[0] == "localhost";
            let matches = want
                .iter()
                .zip(&fields)
                .enumerate()
                .all(|(i, (want, field))| {
                    field == "*" || field == want || (i == 0 && host_is_localhost)
                });
            matches.then(|| Password(fields[4..].join(":")))
        })
}

/// A `~/.pgpass` line split at its unescaped colons, `\:` and `\\` unescaped.
fn pgpass_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(next), Some(field)) = (chars.next(), fields.last_mut()) {
                    field.push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => {
                if let Some(field) = fields.last_mut() {
                    field.push(c);
                }
            }
        }
    }
    fields
}
