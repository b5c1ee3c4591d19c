//! Where a ledger is opened, migrated and restored (SPEC §19.1): the choice of store by
//! [`Location`], for the main job ([`Ledger::open_at`]), readers ([`Ledger::open_existing_at`]),
//! `ledger migrate` ([`migrate`]) and `ledger restore` ([`restore`]).

use super::*;

/// What [`migrate`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrateReport {
    /// The schema version found; `None` when there was none (the ledger was created).
    pub from: Option<i64>,
    /// The version now.
    pub to: i64,
}

/// `ledger migrate`: create the ledger's schema at `location`, or upgrade it, waiting until
/// `deadline` at most. Idempotent. The only function that changes a PostgreSQL ledger's
/// schema; an SQLite file is created (or upgraded) as [`Ledger::open`] does.
pub fn migrate(
    location: &Location,
    env: &HostEnv,
    deadline: Instant,
) -> Result<MigrateReport, LedgerError> {
    match location {
        Location::File(path) => {
            let (_, from) = sqlite::SqliteStore::open_found(path, deadline)?;
            Ok(MigrateReport {
                from,
                to: sqlite::SCHEMA_VERSION,
            })
        }
        Location::Postgres(url) => {
            let password = location::password_for(url, env)?;
            pg::migrate(url, password.as_ref(), deadline)
        }
    }
}

/// `ledger restore`: read a JSON Lines export made by [`Ledger::backup`] of a PostgreSQL
/// ledger into the PostgreSQL ledger at `location`, which must be migrated and empty (one
/// transaction). Returns the rows restored. An SQLite file is restored by copying its backup:
/// [`LedgerError::Url`] here.
pub fn restore(
    location: &Location,
    env: &HostEnv,
    src: &Path,
    deadline: Instant,
) -> Result<u64, LedgerError> {
    match location {
        Location::File(_) => Err(LedgerError::Url(
            "restore reads a PostgreSQL ledger's export; an SQLite backup is a ledger file".into(),
        )),
        Location::Postgres(url) => {
            let password = location::password_for(url, env)?;
            let mut client = pg::connect(url, password.as_ref(), deadline)?;
            pg::restore(&mut client, src)
        }
    }
}

impl Ledger {
    /// Open the ledger at `location` for the main job: a file as [`Ledger::open`]; a
    /// PostgreSQL database with the password from `env` (see [`location`]), whose schema must
    /// be current (never changed here: [`migrate`]).
    pub fn open_at(
        location: &Location,
        env: &HostEnv,
        deadline: Instant,
    ) -> Result<Ledger, LedgerError> {
        match location {
            Location::File(path) => Ledger::open(path, deadline),
            Location::Postgres(url) => {
                let password = location::password_for(url, env)?;
                Ok(Ledger::with(Box::new(pg::PgStore::open(
                    url,
                    password.as_ref(),
                    deadline,
                )?)))
            }
        }
    }

    /// [`Ledger::open_existing`] at `location`: a PostgreSQL ledger is opened as by
    /// [`Ledger::open_at`] (reading it writes nothing).
    pub fn open_existing_at(
        location: &Location,
        env: &HostEnv,
        deadline: Instant,
    ) -> Result<Ledger, LedgerError> {
        match location {
            Location::File(path) => Ledger::open_existing(path, deadline),
            Location::Postgres(_) => Ledger::open_at(location, env, deadline),
        }
    }
}
