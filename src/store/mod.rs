//! The results store: every measured run in one database, each trial
//! written in its own transaction as it ends. One interface, two back ends
//! ([`db`]): a SQLite file (the default; WAL mode, busy timeout, the log
//! folded back into the database file when the last writer closes it), or
//! a PostgreSQL database named by a `postgres://` URL, a team's archive
//! ([`postgres`]); the same schema, migrations and queries on both.
//! Commands that only read open it read-only. It consumes serialized result
//! documents and never reaches into workloads or sessions. See
//! docs/STORE.md for the schema.

pub mod backup;
pub mod cases;
pub mod columns;
pub mod compare;
pub mod copy;
pub mod db;
pub mod digest;
pub mod import;
pub mod pg_tls;
pub mod plan_runs;
pub mod postgres;
pub mod query;
pub mod save;
pub mod schema;
pub mod spool;
pub mod tags;
#[cfg(test)]
pub(crate) mod testing;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};

pub use save::{RunMeta, RunWriter};
pub use tags::Tag;

/// The largest document the store takes in (`import`) or reads whole
/// (`show`, `export`, `report`): far above a run nicbench measures (the
/// agent's part of it travels in one frame of at most 16 MiB), and below
/// what costs a report seconds and hundreds of MB per run.
pub const MAX_DOCUMENT_BYTES: u64 = 64 << 20;

/// A row's document in SQL for the JSON functions: NULL where it is not
/// JSON, so that one malformed document (in a database anyone may have
/// written) reads as absent figures instead of failing the whole query.
pub(crate) const DOCUMENT_SQL: &str = "iif(json_valid(runs.document), runs.document, NULL)";

/// How long a writer waits for another process's transaction to end.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// What went wrong with the database, said so the user knows what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database {path} is read-only ({detail}): make it writable, or use --db PATH or --no-save")]
    ReadOnly { path: PathBuf, detail: String },
    #[error("database {path} is corrupt or not a nicbench database ({detail}): move it aside, or use --db PATH")]
    Corrupt { path: PathBuf, detail: String },
    #[error("database {path} stayed locked by another process for more than {seconds} s ({detail}): try again, or use --db PATH")]
    Locked {
        path: PathBuf,
        seconds: u64,
        detail: String,
    },
    #[error("database {path}: the disk is full ({detail}): free some space, or use --db PATH")]
    Full { path: PathBuf, detail: String },
    #[error(
        "database {path} has schema version {found}, newer than this nicbench {ours} knows ({known}): \
         use a newer nicbench, or another --db"
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
        ours: &'static str,
    },
    #[error(
        "database {path} has schema version {found}, older than this nicbench's {ours}, and reading it needs \
         the upgrade, which needs write access: run a nicbench command that saves into it as a user who may \
         write it (its owner), then read it again"
    )]
    NeedsUpgrade { path: PathBuf, found: i64, ours: i64 },
    #[error(
        "database {path}: its write-ahead log {path}-wal holds changes, and reading them needs {path}-shm, \
         which this user cannot create ({detail}): ask its owner to run a nicbench command that saves into it \
         (closing folds the log into the file), or to give you a copy made with `{}`",
        given(path).command(&["db", "backup", "FILE"])
    )]
    UnreadableLog { path: PathBuf, detail: String },
    #[error("backup {path}: {detail}")]
    Backup { path: PathBuf, detail: String },
    #[error("cannot create the directory of database {path}: {source}")]
    Directory { path: PathBuf, source: std::io::Error },
    #[error(
        "cannot use the PostgreSQL database {path} ({detail}): check that the server runs and the URL's host, \
         port, user and database name; a password comes from PGPASSWORD or ~/.pgpass (PGPASSFILE)"
    )]
    Unreachable { path: PathBuf, detail: String },
    #[error("database {path}: {detail}")]
    Other { path: PathBuf, detail: String },
    #[error(
        "not saved into {path}: {field}: {what}; whoever measured it (an agent, an iperf3 peer, a file) \
         sent a figure no network gives"
    )]
    Implausible { path: PathBuf, field: String, what: String },
    #[error("no run with id {id} in {}: `{}` lists the ids", path.display(), given(path).command(&["runs"]))]
    NoSuchRun { path: PathBuf, id: i64 },
    /// A saved document that cannot be read: not JSON, or over
    /// [`MAX_DOCUMENT_BYTES`]. Commands over many runs leave it out with
    /// this message; `show` of it fails with it.
    #[error("run {id} in {}: {why} (`{}` removes the run)", path.display(), given(path).command(&["rm", &id.to_string()]))]
    BadDocument { path: PathBuf, id: i64, why: String },
    #[error("{0}")]
    NothingMatched(String),
}

impl StoreError {
    /// Classifies an error of either back end on the database at `path`.
    pub fn from_db(path: &Path, error: db::DbError) -> StoreError {
        use ::postgres::error::SqlState;
        let path_buf = path.to_path_buf();
        let code = match &error {
            db::DbError::Sqlite(_) => {
                let db::DbError::Sqlite(e) = error else { unreachable!() };
                return StoreError::from_sqlite(path, e);
            }
            db::DbError::Postgres(e) => e.as_db_error().map(|server| server.code().clone()),
            db::DbError::Decode { .. } => {
                return StoreError::Other {
                    path: path_buf,
                    detail: error.to_string(),
                }
            }
        };
        let detail = error.to_string();
        match code {
            // No answer from the server: not reachable, or the connection broke.
            None => StoreError::Unreachable { path: path_buf, detail },
            Some(c)
                if c == SqlState::INVALID_PASSWORD
                    || c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
                    || c == SqlState::INVALID_CATALOG_NAME
                    || c == SqlState::CANNOT_CONNECT_NOW
                    || c == SqlState::ADMIN_SHUTDOWN
                    || c == SqlState::TOO_MANY_CONNECTIONS =>
            {
                StoreError::Unreachable { path: path_buf, detail }
            }
            Some(c) if c == SqlState::READ_ONLY_SQL_TRANSACTION || c == SqlState::INSUFFICIENT_PRIVILEGE => {
                StoreError::ReadOnly { path: path_buf, detail }
            }
            Some(c) if c == SqlState::DISK_FULL => StoreError::Full { path: path_buf, detail },
            Some(c)
                if c == SqlState::T_R_SERIALIZATION_FAILURE
                    || c == SqlState::T_R_DEADLOCK_DETECTED
                    || c == SqlState::LOCK_NOT_AVAILABLE =>
            {
                StoreError::Locked {
                    path: path_buf,
                    seconds: BUSY_TIMEOUT.as_secs(),
                    detail,
                }
            }
            Some(_) => StoreError::Other { path: path_buf, detail },
        }
    }

    /// Classifies a SQLite error on the database at `path`.
    pub fn from_sqlite(path: &Path, error: rusqlite::Error) -> StoreError {
        let path = path.to_path_buf();
        let detail = error.to_string();
        match error.sqlite_error_code() {
            Some(ErrorCode::ReadOnly) => StoreError::ReadOnly { path, detail },
            Some(ErrorCode::CannotOpen) if is_read_only(&path) => StoreError::ReadOnly { path, detail },
            Some(ErrorCode::NotADatabase) | Some(ErrorCode::DatabaseCorrupt) => StoreError::Corrupt { path, detail },
            Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => StoreError::Locked {
                path,
                seconds: BUSY_TIMEOUT.as_secs(),
                detail,
            },
            Some(ErrorCode::DiskFull) => StoreError::Full { path, detail },
            _ => StoreError::Other { path, detail },
        }
    }
}

/// Whether this process may not write the database file, or the directory
/// where SQLite keeps its WAL and shared-memory files beside it.
fn is_read_only(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let denied = |p: &Path| {
        let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
            return false;
        };
        // SAFETY: access(2) only reads the NUL-terminated path.
        p.exists() && unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0
    };
    denied(path)
        || path
            .parent()
            .is_some_and(|d| denied(if d.as_os_str().is_empty() { Path::new(".") } else { d }))
}

/// Whether a `-wal` file beside the database holds frames (changes not yet
/// in the database file). An absent or empty one holds none.
fn wal_holds_changes(path: &Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(wal).is_ok_and(|m| m.len() > 0)
}

/// `path` joined to the current directory when it is relative (as given
/// when the current directory cannot be read).
pub(crate) fn absolute(path: &Path) -> std::path::PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}

/// `path` as an SQLite `file:` URI, every byte outside the unreserved set
/// and `/` percent-encoded (so `?`, `#` and `%` in a name stay the name's).
fn file_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let absolute = absolute(path);
    let mut uri = String::from("file:");
    for &b in absolute.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// What a hint's command must be given to open the database at `path`:
/// `--db PATH` unless it is the one a command opens without `--db` here
/// (`NICBENCH_DB`'s, else [`default_path`]).
pub fn given(path: &Path) -> crate::shell::Given {
    let implicit = std::env::var_os("NICBENCH_DB")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(default_path);
    crate::shell::Given::db((path != implicit).then(|| path.to_path_buf()))
}

/// Whether there is a database at `path` to read: a file, or a PostgreSQL
/// URL (whose server says, when connected, whether it holds one).
pub fn exists(path: &Path) -> bool {
    postgres::is_url(path) || path.exists()
}

/// The database a command uses when no `--db` or `NICBENCH_DB` names one:
/// `$XDG_DATA_HOME/nicbench/results.db`, else `~/.local/share/nicbench/results.db`.
pub fn default_path() -> PathBuf {
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    data.join("nicbench").join("results.db")
}

/// Lets SQLite read the database file through memory mapped pages (up to
/// 1 GiB of it): a column after a large document (`source`, the CPU split,
/// the digest) is reached by walking the document's overflow pages, which
/// costs a read() per page, and a report over 10,000 runs walks a few
/// hundred MB of them. A database where mapping fails is read as before.
fn map_into_memory(conn: &Connection) {
    let _ = conn.pragma_update(None, "mmap_size", 1i64 << 30);
}

/// What SQL may do in a database file anyone may have written (a shared
/// results database, a copy from elsewhere): no trigger fires and no view
/// is read (nicbench's schema has neither, so one there is planted: a
/// trigger could rewrite every saved figure), functions in the schema run
/// only if SQLite deems them harmless (`trusted_schema` off), and SQL
/// cannot corrupt the file on purpose (`SQLITE_DBCONFIG_DEFENSIVE`). Set
/// on every connection before its first statement.
fn harden(conn: &Connection) -> rusqlite::Result<()> {
    use rusqlite::config::DbConfig;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_VIEW, false)?;
    Ok(())
}

/// A connection to `path` (a file name, or a `file:` URI with
/// `SQLITE_OPEN_URI`), hardened ([`harden`]) and mapped into memory.
fn connect(path: &Path, name: impl AsRef<Path>, flags: OpenFlags) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(name, flags).map_err(|e| StoreError::from_sqlite(path, e))?;
    harden(&conn).map_err(|e| StoreError::from_sqlite(path, e))?;
    map_into_memory(&conn);
    Ok(conn)
}

/// An open, migrated results database.
pub struct Store {
    pub(crate) db: db::Db,
    /// What messages name it by: the file, or the URL (which never holds
    /// a password: [`postgres::config`] refuses one).
    path: PathBuf,
    /// Runs whose unreadable document was named already (one warning each).
    warned: std::cell::RefCell<std::collections::BTreeSet<i64>>,
}

impl Store {
    fn new(db: db::Db, path: &Path) -> Store {
        Store {
            db,
            path: path.to_path_buf(),
            warned: Default::default(),
        }
    }

    /// Opens (creating if needed) the database at `path` and brings its
    /// schema up to date. `:memory:` gives a private in-memory database; a
    /// `postgres://` URL a PostgreSQL database ([`postgres`]).
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(url) = postgres::url_of(path) {
            let store = Store::new(postgres::connect(url)?, path);
            store.migrate_postgres()?;
            store.drain_spool_and_say();
            return Ok(store);
        }
        if path != Path::new(":memory:") {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|source| StoreError::Directory {
                    path: path.to_path_buf(),
                    source,
                })?;
            }
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = connect(path, path, flags)?;
        let mut store = Store::new(db::Db::Sqlite(conn), path);
        store.prepare().map_err(|e| match e {
            StoreError::Other { path, detail } if store.read_only() => StoreError::ReadOnly { path, detail },
            other => other,
        })?;
        store.drain_spool_and_say();
        Ok(store)
    }

    /// Opens an existing database for reading only, as commands that only
    /// read do: it works on a file this user may not write (0444, another
    /// user's) and never changes it. A database in WAL mode needs its `-shm`
    /// file; where this user can neither open nor create it (a read-only
    /// directory) and no `-wal` holds changes, the file alone is the whole
    /// database and is opened immutable. A database of an older schema is
    /// upgraded first when this user may write it. On PostgreSQL, the
    /// session is read-only after the same checks. Runs waiting in the
    /// store's spool are saved first where this user may write it
    /// ([`spool::save_before_reading`]).
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        spool::save_before_reading(path);
        if let Some(url) = postgres::url_of(path) {
            let store = Store::new(postgres::connect(url)?, path);
            let version = store.check_schema()?;
            if version < schema::CURRENT_VERSION {
                match store.migrate_postgres() {
                    Ok(()) => {}
                    Err(StoreError::ReadOnly { .. }) => {
                        return Err(StoreError::NeedsUpgrade {
                            path: path.to_path_buf(),
                            found: version,
                            ours: schema::CURRENT_VERSION,
                        })
                    }
                    Err(other) => return Err(other),
                }
            }
            store
                .db
                .execute_batch("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
                .map_err(|e| store.err(e))?;
            return Ok(store);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = connect(path, path, flags)?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| StoreError::from_sqlite(path, e))?;
        // The first read opens the -shm and -wal files (or fails to).
        let probe = conn.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()));
        let mut store = Store::new(db::Db::Sqlite(conn), path);
        if let Err(e) = probe {
            if !matches!(
                e.sqlite_error_code(),
                Some(ErrorCode::CannotOpen) | Some(ErrorCode::ReadOnly)
            ) {
                return Err(store.err(e.into()));
            }
            if wal_holds_changes(path) {
                return Err(StoreError::UnreadableLog {
                    path: path.to_path_buf(),
                    detail: e.to_string(),
                });
            }
            store = Store::open_immutable(path)?;
        }
        let version = store.check_schema()?;
        if version < schema::CURRENT_VERSION {
            drop(store);
            return match Store::open(path) {
                Ok(store) => Ok(store),
                Err(StoreError::ReadOnly { .. }) => Err(StoreError::NeedsUpgrade {
                    path: path.to_path_buf(),
                    found: version,
                    ours: schema::CURRENT_VERSION,
                }),
                Err(other) => Err(other),
            };
        }
        Ok(store)
    }

    /// The database file opened as `immutable` (no locks, no `-shm`): only
    /// when no `-wal` beside it holds changes.
    fn open_immutable(path: &Path) -> Result<Store, StoreError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        let uri = format!("{}?immutable=1", file_uri(path));
        let conn = connect(path, uri, flags)?;
        Ok(Store::new(db::Db::Sqlite(conn), path))
    }

    /// The database's path, as given (a URL for PostgreSQL).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Which back end holds it.
    pub fn backend(&self) -> db::Backend {
        self.db.backend()
    }

    /// The SQLite connection; only called on a SQLite store.
    fn sqlite(&self) -> &Connection {
        self.db.sqlite().expect("only called on a SQLite store")
    }

    fn read_only(&self) -> bool {
        self.db
            .sqlite()
            .is_some_and(|c| c.is_readonly(rusqlite::DatabaseName::Main).unwrap_or(false))
    }

    pub(crate) fn err(&self, error: db::DbError) -> StoreError {
        StoreError::from_db(&self.path, error)
    }

    /// Busy timeout, then whether the database is a nicbench database of
    /// a schema this build knows; returns its version.
    fn check_schema(&self) -> Result<i64, StoreError> {
        let (version, tables, ours) = match &self.db {
            db::Db::Sqlite(conn) => {
                conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| self.err(e.into()))?;
                // Reading the schema first tells a non-database file apart early. One
                // statement reads all three from one snapshot: another process may be
                // creating the tables right now, and three separate reads could see
                // its tables without the mark it sets in the same transaction.
                let (version, application_id, tables): (i64, i64, i64) = conn
                    .query_row(
                        "SELECT (SELECT user_version FROM pragma_user_version), \
                                (SELECT application_id FROM pragma_application_id), \
                                (SELECT count(*) FROM sqlite_schema)",
                        [],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )
                    .map_err(|e| self.err(e.into()))?;
                (version, tables, application_id == schema::APPLICATION_ID)
            }
            db::Db::Postgres(_) => postgres::schema_state(&self.db).map_err(|e| self.err(e))?,
        };
        if tables > 0 && !ours {
            return Err(StoreError::Corrupt {
                path: self.path.clone(),
                detail: format!("it holds {tables} tables but is not marked as a nicbench results database"),
            });
        }
        if version > schema::CURRENT_VERSION {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found: version,
                known: schema::CURRENT_VERSION,
                ours: env!("CARGO_PKG_VERSION"),
            });
        }
        Ok(version)
    }

    /// The schema check, WAL, foreign keys, then the migrations.
    fn prepare(&mut self) -> Result<(), StoreError> {
        let version = self.check_schema()?;
        if self.read_only() {
            return Err(StoreError::ReadOnly {
                path: self.path.clone(),
                detail: "SQLite could only open it for reading".into(),
            });
        }
        self.wal()?;
        // In WAL mode NORMAL syncs at checkpoints, not at every commit: a
        // killed process still loses nothing committed (only a power cut may
        // lose the last commits), and a save no longer waits for fsync twice.
        self.sqlite()
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| self.err(e.into()))?;
        // Closing the last connection checkpoints (SQLite's default, kept on
        // purpose): the database file alone then holds every run, so a copy
        // of it without its -wal is a whole copy. Measuring commands drop
        // the store after printing the result, so its few ms come after it.
        self.sqlite()
            .pragma_update(None, "foreign_keys", "ON")
            .map_err(|e| self.err(e.into()))?;
        self.migrate(version)
    }

    /// Switches to WAL. Two processes opening a new database at once can
    /// both ask; the switch needs the database to themselves, and SQLite
    /// answers BUSY at once instead of calling the busy handler, so retry
    /// for as long as the busy timeout.
    fn wal(&self) -> Result<(), StoreError> {
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        loop {
            match self.sqlite().pragma_update(None, "journal_mode", "WAL") {
                Ok(()) => return Ok(()),
                Err(rusqlite::Error::SqliteFailure(f, _))
                    if matches!(
                        f.code,
                        rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                    ) && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(self.err(e.into())),
            }
        }
    }

    /// Checks a PostgreSQL database and runs the migrations it lacks.
    fn migrate_postgres(&self) -> Result<(), StoreError> {
        let version = self.check_schema()?;
        self.migrate(version)
    }

    /// Runs the migrations past `from`, each in its own transaction, under
    /// the back end's write lock (SQLite's, PostgreSQL's advisory lock).
    fn migrate(&self, from: i64) -> Result<(), StoreError> {
        for (index, sql) in schema::MIGRATIONS.iter().enumerate().skip(from as usize) {
            let to = index as i64 + 1;
            let step = || -> Result<bool, db::DbError> {
                let tx = self.db.transaction(true)?;
                if self.backend() == db::Backend::Postgres {
                    postgres::lock_and_prepare(&tx)?;
                }
                // Another process may have migrated while we waited for the lock.
                if self.version_in(&tx)? >= to {
                    return Ok(false);
                }
                match self.backend() {
                    db::Backend::Sqlite => tx.execute_batch(sql)?,
                    db::Backend::Postgres => tx.execute_batch(&postgres::migration(index, sql))?,
                }
                if schema::fills_digests(sql) {
                    digest::fill(&tx)?;
                }
                match self.backend() {
                    db::Backend::Sqlite => tx.execute_batch(&format!(
                        "PRAGMA user_version = {to}; PRAGMA application_id = {}",
                        schema::APPLICATION_ID
                    ))?,
                    db::Backend::Postgres => postgres::set_version(&tx, to)?,
                }
                tx.commit()?;
                Ok(true)
            };
            step().map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// The schema version, read through `db` (a transaction's view).
    fn version_in(&self, db: &db::Db) -> Result<i64, db::DbError> {
        match db {
            db::Db::Sqlite(_) => db.query_row("PRAGMA user_version", &[])?.map_or(Ok(0), |r| r.get(0)),
            db::Db::Postgres(_) => Ok(postgres::schema_state(db)?.0),
        }
    }

    /// The schema version of the open database.
    pub fn version(&self) -> Result<i64, StoreError> {
        self.version_in(&self.db).map_err(|e| self.err(e))
    }
}

/// Seconds since the Unix epoch, now.
pub fn now_unix_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::store::testing::store_test!(
    fn a_new_database_gets_the_current_schema(store) {
        assert_eq!(store.version().unwrap(), schema::CURRENT_VERSION);
    });

    // SQLite only: it writes PRAGMA user_version into a file; PostgreSQL keeps its version in nicbench_schema, where no test forges one (not covered there).
    #[test]
    fn a_newer_database_is_refused_naming_both_versions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        drop(Store::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
        drop(conn);
        let error = Store::open(&path).err().unwrap().to_string();
        assert!(error.contains("schema version 99"), "{error}");
        assert!(
            error.contains(&format!("knows ({})", schema::CURRENT_VERSION)),
            "{error}"
        );
    }

    /// A database as schema `version` left it, written by raw SQL, with a
    /// complete tcp run per document (ids from 1), for a migration to upgrade.
    fn tcp_runs_at_version(path: &Path, version: usize, documents: &[&str]) {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(&schema::MIGRATIONS[..version].concat()).unwrap();
        conn.pragma_update(None, "user_version", version as i64).unwrap();
        conn.pragma_update(None, "application_id", schema::APPLICATION_ID)
            .unwrap();
        for (i, document) in documents.iter().enumerate() {
            conn.execute(
                "INSERT INTO runs (id, started_at_unix_seconds, saved_at_unix_seconds, command_line, \
                 nicbench_version, workload, document, complete) VALUES (?1, 1.0, 2.0, 'x', '0.1.0', 'tcp', ?2, 1)",
                rusqlite::params![i as i64 + 1, document],
            )
            .unwrap();
        }
    }

    // SQLite only: an old SQLite file is migrated; no PostgreSQL archive was ever at this version (POSTGRES_DATA_MIGRATIONS_FROM).
    #[test]
    fn migration_3_fills_the_cpu_split_from_documents_and_skips_what_is_not_a_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v2.db");
        let documents = [
            // Integers are numbers too; a missing irq stays NULL.
            r#"{"cpu": {"client": {"user_percent": 10, "system_percent": 20.5, "softirq_percent": 3.25, "irq_percent": 1.0},
                        "agent": {"user_percent": 1.5, "system_percent": 2.5, "softirq_percent": 4.5}}}"#,
            // A string where a number belongs is not a figure.
            r#"{"cpu": {"client": {"user_percent": "10"}, "agent": null}}"#,
            // Not JSON at all (never written by nicbench, but no reason to fail).
            "not json",
        ];
        tcp_runs_at_version(&path, 2, &documents);
        let store = Store::open(&path).unwrap();
        assert_eq!(store.version().unwrap(), schema::CURRENT_VERSION);
        let split = store
            .column_rows(&query::Filter::default(), &columns::CPU_PART_COLUMNS)
            .unwrap();
        use rusqlite::types::Value::{Null, Real};
        assert_eq!(
            split[0].1,
            vec![
                Real(10.0),
                Real(20.5),
                Real(3.25),
                Real(1.0),
                Real(1.5),
                Real(2.5),
                Real(4.5),
                Null
            ]
        );
        assert_eq!(split[1].1, vec![Null; 8]);
        assert_eq!(split[2].1, vec![Null; 8]);
    }

    // SQLite only: an old SQLite file is migrated; no PostgreSQL archive was ever at this version (POSTGRES_DATA_MIGRATIONS_FROM).
    #[test]
    fn migration_4_heads_files_runs_and_trials_by_their_payload_rate_and_leaves_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v3.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(&schema::MIGRATIONS[..3].concat()).unwrap();
        conn.pragma_update(None, "user_version", 3).unwrap();
        conn.pragma_update(None, "application_id", schema::APPLICATION_ID)
            .unwrap();
        // As schema 3 stored them: every run headed by the receiver's rate.
        let runs = [
            (
                "files",
                r#"{"sum": {"receiver": {"bits_per_second": 9e9}, "files": {"payload_bits_per_second": 7e9}}}"#,
            ),
            (
                "files",
                r#"{"sum": {"receiver": {"bits_per_second": 9e9}, "files": {"payload_bits_per_second": "fast"}}}"#,
            ),
            (
                "tcp",
                r#"{"sum": {"receiver": {"bits_per_second": 9e9}, "files": {"payload_bits_per_second": 7e9}}}"#,
            ),
        ];
        for (i, (workload, document)) in runs.iter().enumerate() {
            let id = i as i64 + 1;
            conn.execute(
                "INSERT INTO runs (id, started_at_unix_seconds, saved_at_unix_seconds, command_line, nicbench_version, \
                 workload, document, complete, headline_metric, headline_unit, headline_value) \
                 VALUES (?1, 1.0, 2.0, 'x', '0.1.0', ?2, ?3, 1, 'receiver_bits_per_second', 'bit/s', 9e9)",
                rusqlite::params![id, workload, document],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO trials (run_id, trial, saved_at_unix_seconds, headline_value, document) \
                 VALUES (?1, 1, 2.0, 9e9, ?2)",
                rusqlite::params![id, document],
            )
            .unwrap();
        }
        drop(conn);
        let store = Store::open(&path).unwrap();
        assert_eq!(store.version().unwrap(), schema::CURRENT_VERSION);
        let headlines: Vec<(String, String, f64, f64)> = store
            .sqlite()
            .prepare(
                "SELECT headline_metric, headline_unit, r.headline_value, t.headline_value \
                 FROM runs r JOIN trials t ON t.run_id = r.id ORDER BY r.id",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let receiver = ("receiver_bits_per_second".to_string(), "bit/s".to_string(), 9e9, 9e9);
        assert_eq!(
            headlines,
            vec![
                ("payload_bits_per_second".into(), "bit/s".into(), 7e9, 7e9),
                // Not a number: kept as it was, as a new save would not head it.
                receiver.clone(),
                receiver,
            ]
        );
    }

    // SQLite only: an old SQLite file is migrated; no PostgreSQL archive was ever at this version.
    #[test]
    fn migration_5_adds_an_empty_plan_runs_table_and_keeps_the_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v4.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(&schema::MIGRATIONS[..4].concat()).unwrap();
        conn.pragma_update(None, "user_version", 4).unwrap();
        conn.pragma_update(None, "application_id", schema::APPLICATION_ID)
            .unwrap();
        conn.execute(
            "INSERT INTO runs (id, started_at_unix_seconds, saved_at_unix_seconds, command_line, nicbench_version, \
             workload, document) VALUES (1, 1.0, 2.0, 'x', '0.1.0', 'tcp', '{}')",
            [],
        )
        .unwrap();
        drop(conn);
        let store = Store::open(&path).unwrap();
        assert_eq!(store.version().unwrap(), schema::CURRENT_VERSION);
        let count = |sql: &str| -> i64 { store.sqlite().query_row(sql, [], |r| r.get(0)).unwrap() };
        assert_eq!(count("SELECT count(*) FROM runs"), 1);
        assert_eq!(count("SELECT count(*) FROM plan_runs"), 0);
        store
            .sqlite()
            .execute(
                "INSERT INTO plan_runs VALUES ('20261124-000000-abcd', 'p', 1.0, '18446744073709551615', 'f', '{}')",
                [],
            )
            .unwrap();
        assert_eq!(count("SELECT count(*) FROM plan_runs WHERE plan = 'p'"), 1);
    }

    // SQLite only: an old SQLite file is migrated; no PostgreSQL archive was ever at this version.
    #[test]
    fn migration_6_gives_every_run_the_digest_of_its_document() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v5.db");
        let documents = [
            r#"{"spec": {"streams": 4}, "client": {"facts": {"hostname": "a"}}, "intervals": [1, 2, 3]}"#,
            // Not JSON (never written by nicbench): no digest, read from the document.
            "not json",
        ];
        tcp_runs_at_version(&path, 5, &documents);
        let store = Store::open(&path).unwrap();
        assert_eq!(store.version().unwrap(), schema::CURRENT_VERSION);
        let digests: Vec<Option<String>> = store
            .sqlite()
            .prepare("SELECT d.digest FROM runs r LEFT JOIN digests d ON d.run_id = r.id ORDER BY r.id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let first: serde_json::Value = serde_json::from_str(digests[0].as_deref().unwrap()).unwrap();
        assert_eq!(first["spec"], serde_json::json!({"streams": 4}));
        assert_eq!(first["client"], serde_json::json!({"facts": {"hostname": "a"}}));
        assert!(first.get("intervals").is_none(), "{first}");
        assert_eq!(digests[1], None);
    }

    /// Writes schema version 7 into the empty database `db` opens to,
    /// with one run tagged src=host-17 and mtu=9000 (id 1).
    fn at_version_7_with_a_tagged_run(db: &db::Db) {
        let tx = db.transaction(true).unwrap();
        let postgres = db.backend() == db::Backend::Postgres;
        if postgres {
            postgres::lock_and_prepare(&tx).unwrap();
        }
        for (index, sql) in schema::MIGRATIONS[..7].iter().enumerate() {
            match postgres {
                false => tx.execute_batch(sql).unwrap(),
                true => tx.execute_batch(&postgres::migration(index, sql)).unwrap(),
            }
        }
        match postgres {
            false => tx
                .execute_batch(&format!(
                    "PRAGMA user_version = 7; PRAGMA application_id = {}",
                    schema::APPLICATION_ID
                ))
                .unwrap(),
            true => postgres::set_version(&tx, 7).unwrap(),
        }
        tx.execute(
            "INSERT INTO runs (id, started_at_unix_seconds, saved_at_unix_seconds, command_line, \
             nicbench_version, workload, document, complete) VALUES (1, 1.0, 2.0, 'x', '0.1.0', 'tcp', '{}', 1)",
            &[],
        )
        .unwrap();
        tx.execute(
            "INSERT INTO tags (run_id, key, value) VALUES (1, 'src', 'host-17'), (1, 'mtu', '9000')",
            &[],
        )
        .unwrap();
        tx.commit().unwrap();
    }

    /// Whether the database has an index of this name.
    fn has_index(store: &Store, name: &str) -> bool {
        let sql = match store.backend() {
            db::Backend::Sqlite => "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = ?1",
            db::Backend::Postgres => "SELECT count(*) FROM pg_indexes WHERE indexname = ?1",
        };
        let row = store.db.query_row(sql, db::params![name]).unwrap().unwrap();
        row.get::<i64>(0).unwrap() == 1
    }

    /// Migration 8 on a version-7 database: the tag index that holds the
    /// run replaces the one that did not, and the tagged run is found.
    fn version_7_gains_the_tag_index_holding_the_run(path: &Path) {
        let store = Store::open(path).unwrap();
        assert_eq!(store.version().unwrap(), schema::CURRENT_VERSION);
        assert!(has_index(&store, "tags_key_value_run"));
        assert!(!has_index(&store, "tags_key_value"));
        let filter = query::Filter {
            tags: vec!["src=host-17".parse().unwrap(), "mtu=9000".parse().unwrap()],
            ..Default::default()
        };
        let runs = store.runs(&filter).unwrap();
        assert_eq!(runs.iter().map(|r| r.id).collect::<Vec<_>>(), vec![1]);
        assert_eq!(runs[0].tags.len(), 2);
    }

    #[test]
    fn migration_8_indexes_tags_with_their_run_on_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v7.db");
        at_version_7_with_a_tagged_run(&db::Db::Sqlite(Connection::open(&path).unwrap()));
        version_7_gains_the_tag_index_holding_the_run(&path);
    }

    #[test]
    fn migration_8_indexes_tags_with_their_run_on_postgres() {
        let Some((_, cluster)) = testing::postgres() else {
            return;
        };
        let url = cluster.url("postgres");
        // The test server's database, emptied back to nothing.
        cluster
            .client("postgres")
            .batch_execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public; DROP SCHEMA nicbench_sql CASCADE")
            .unwrap();
        at_version_7_with_a_tagged_run(&postgres::connect(&url).unwrap());
        version_7_gains_the_tag_index_holding_the_run(Path::new(&url));
    }

    // SQLite only: about the file format (a file that is not SQLite's).
    #[test]
    fn a_file_that_is_not_a_database_is_called_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        std::fs::write(&path, vec![0x5a; 8192]).unwrap();
        match Store::open(&path) {
            Err(StoreError::Corrupt { .. }) => {}
            other => panic!("expected Corrupt, got {:?}", other.err()),
        }
    }

    /// Issue 67: every connection nicbench opens runs no trigger and reads
    /// no view a database file brings, trusts no function in its schema,
    /// and may not corrupt it on purpose: writable, read-only, immutable.
    // SQLite only: SQLite's connection flags (trusted_schema, triggers in a file).
    #[test]
    fn every_connection_is_opened_without_triggers_views_or_trusted_schema() {
        use rusqlite::config::DbConfig;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let writable = Store::open(&path).unwrap();
        writable
            .sqlite()
            .execute_batch(
                "CREATE TABLE planted (n INTEGER); \
                 CREATE TRIGGER fire AFTER INSERT ON tags BEGIN INSERT INTO planted VALUES (1); END; \
                 CREATE VIEW seen AS SELECT 1;",
            )
            .unwrap();
        drop(writable);
        let stores = [
            Store::open(&path).unwrap(),
            Store::open_read_only(&path).unwrap(),
            Store::open_immutable(&path).unwrap(),
        ];
        for store in &stores {
            let c = &store.sqlite();
            assert!(!c.db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER).unwrap());
            assert!(!c.db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_VIEW).unwrap());
            assert!(!c.db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA).unwrap());
            assert!(c.db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE).unwrap());
            assert!(
                c.query_row("SELECT * FROM seen", [], |_| Ok(())).is_err(),
                "a view is not read"
            );
        }
        let store = &stores[0];
        let columns = columns::Columns {
            workload: "tcp".into(),
            started_at_unix_seconds: 1.7e9,
            ..Default::default()
        };
        let meta = RunMeta {
            tags: vec!["nic=a".parse().unwrap()],
            ..RunMeta::default()
        };
        let mut writer = RunWriter::new(Store::open(&path).unwrap(), meta);
        writer
            .finish_with_columns(&serde_json::json!({"format": "test"}), &columns, None)
            .unwrap();
        let fired: i64 = store
            .sqlite()
            .query_row("SELECT count(*) FROM planted", [], |r| r.get(0))
            .unwrap();
        assert_eq!(fired, 0, "the planted trigger did not fire");
    }

    // SQLite only: application_id of a foreign SQLite file.
    #[test]
    fn a_foreign_sqlite_database_is_not_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("other.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE x (a)")
            .unwrap();
        assert!(matches!(Store::open(&path), Err(StoreError::Corrupt { .. })));
    }
}
