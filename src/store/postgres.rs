//! The PostgreSQL back end: a team's archive, named by a URL
//! (`--db postgres://user@host/dbname`, or `NICBENCH_DB`). What differs
//! from SQLite lives here: connecting (credentials from `PGPASSWORD`,
//! `PGPASSFILE` or `~/.pgpass`, never from the URL, so no password is ever
//! on a command line or in a message), where the schema version is kept,
//! the migrations' column types, and the SQLite functions the store's
//! queries use, given to PostgreSQL under the same names in the schema
//! `nicbench_sql`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::db::{Db, DbError};
use super::pg_tls;
use super::StoreError;

/// The schema that holds the SQLite functions the store's SQL uses.
const FUNCTIONS_SCHEMA: &str = "nicbench_sql";

/// The URL `path` holds, if it names a PostgreSQL database.
pub fn url_of(path: &Path) -> Option<&str> {
    let text = path.to_str()?;
    (text.starts_with("postgres://") || text.starts_with("postgresql://")).then_some(text)
}

/// Whether `path` names a PostgreSQL database rather than a file.
pub fn is_url(path: &Path) -> bool {
    url_of(path).is_some()
}

/// `url` with any password in it replaced by `***`: what every message says.
pub fn redact(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = out.find("://") {
        let rest = &out[scheme_end + 3..];
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@') {
            if let Some(colon) = rest[..at].find(':') {
                let start = scheme_end + 3 + colon + 1;
                out.replace_range(start..scheme_end + 3 + at, "***");
            }
        }
    }
    if let Some(query_start) = out.find('?') {
        let (head, query) = out.split_at(query_start + 1);
        let parts: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => p.to_string(),
            })
            .collect();
        out = format!("{head}{}", parts.join("&"));
    }
    out
}

/// The error for a URL the store cannot use, naming it redacted.
fn bad_url(url: &str, detail: impl Into<String>) -> StoreError {
    StoreError::Other {
        path: PathBuf::from(redact(url)),
        detail: detail.into(),
    }
}

/// The connection settings `url` and the environment give, and its TLS:
/// a password in the URL is refused (it would be in `ps`, shell history
/// and logs); the user defaults to `PGUSER`, else this user; the host to
/// `PGHOST`, else the local socket directory; the password comes from
/// `PGPASSWORD`, else the password file; `sslmode` and `sslrootcert` as
/// libpq reads them ([`pg_tls::resolve`]).
pub fn config(url: &str) -> Result<(postgres::Config, pg_tls::Tls), StoreError> {
    if redact(url) != url {
        return Err(bad_url(
            url,
            "the URL holds a password, which would be visible in `ps`, shell history and logs: \
             remove it and put it in PGPASSWORD or in ~/.pgpass (or the file PGPASSFILE names)",
        ));
    }
    // The TLS parameters are ours to read (the client crate knows neither
    // verify-ca, verify-full nor sslrootcert); the rest is the crate's.
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let (mut sslmode, mut sslrootcert) = (None, None);
    let mut rest = Vec::new();
    for part in query.split('&').filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some(("sslmode", value)) => sslmode = Some(value),
            Some(("sslrootcert", value)) => sslrootcert = Some(value),
            _ => rest.push(part),
        }
    }
    let tls = pg_tls::resolve(sslmode, sslrootcert).map_err(|e| bad_url(url, e))?;
    let parsed_url = match rest.is_empty() {
        true => base.to_string(),
        false => format!("{base}?{}", rest.join("&")),
    };
    let mut config: postgres::Config = parsed_url
        .parse()
        .map_err(|e: postgres::Error| bad_url(url, format!("not a PostgreSQL URL this nicbench reads: {e}")))?;
    if config.get_user().is_none() {
        let user = std::env::var("PGUSER")
            .ok()
            .filter(|u| !u.is_empty())
            .or_else(current_user)
            .ok_or_else(|| bad_url(url, "no user in the URL, PGUSER is unset and this user has no name"))?;
        config.user(&user);
    }
    if config.get_hosts().is_empty() {
        match std::env::var("PGHOST").ok().filter(|h| !h.is_empty()) {
            Some(host) => {
                config.host(&host);
            }
            None => {
                config.host_path("/var/run/postgresql");
            }
        }
    }
    if config.get_ports().is_empty() {
        if let Some(port) = std::env::var("PGPORT").ok().and_then(|p| p.parse().ok()) {
            config.port(port);
        }
    }
    if config.get_dbname().is_none() {
        if let Some(name) = std::env::var("PGDATABASE").ok().filter(|d| !d.is_empty()) {
            config.dbname(&name);
        }
    }
    if config.get_password().is_none() {
        if let Some(password) = std::env::var("PGPASSWORD").ok().filter(|p| !p.is_empty()) {
            config.password(password);
        } else if let Some(password) = password_from_file(&config, &network_host(url)) {
            config.password(password);
        }
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    config.application_name("nicbench");
    // The server refuses TLS on a unix socket, and libpq does not ask there.
    let sockets_only = config
        .get_hosts()
        .iter()
        .all(|h| matches!(h, postgres::config::Host::Unix(_)));
    config.ssl_mode(match sockets_only {
        true => postgres::config::SslMode::Disable,
        false => tls.mode.for_client(),
    });
    Ok((config, tls))
}

/// This process's user name, as libpq defaults to.
fn current_user() -> Option<String> {
    // SAFETY: getpwuid returns a pointer into static storage or NULL; the
    // name is copied out at once, and nothing else here calls it meanwhile.
    unsafe {
        let entry = libc::getpwuid(libc::geteuid());
        if entry.is_null() || (*entry).pw_name.is_null() {
            return None;
        }
        Some(
            std::ffi::CStr::from_ptr((*entry).pw_name)
                .to_string_lossy()
                .into_owned(),
        )
    }
}

/// The password for `config` from the password file (`PGPASSFILE`, else
/// `~/.pgpass`): lines of `host:port:database:user:password`, `*` matching
/// anything, `\` escaping `:` and `\`. As libpq, a file others may read is
/// ignored (with a warning).
fn password_from_file(config: &postgres::Config, network_host: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let file = std::env::var_os("PGPASSFILE")
        .filter(|f| !f.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pgpass")))?;
    let metadata = std::fs::metadata(&file).ok()?;
    if metadata.permissions().mode() & 0o077 != 0 {
        log::warn!(
            "password file {} is readable by others, so it is not used: chmod 0600 {}",
            file.display(),
            file.display()
        );
        return None;
    }
    let text = std::fs::read_to_string(&file).ok()?;
    let host = match config.get_hosts().first() {
        // libpq matches a socket connection as "localhost".
        Some(postgres::config::Host::Unix(_)) | None => "localhost",
        Some(_) => network_host,
    };
    let port = config.get_ports().first().copied().unwrap_or(5432).to_string();
    let user = config.get_user().unwrap_or_default();
    let dbname = config.get_dbname().unwrap_or(user);
    let wanted = [host, port.as_str(), dbname, user];
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(pgpass_fields)
        .find(|fields| fields.len() == 5 && (0..4).all(|i| fields[i] == "*" || fields[i] == wanted[i]))
        .map(|fields| fields[4].clone())
}

/// The host name `url` (else `PGHOST`) connects to over the network, as
/// the password file names it: the URL's host (without brackets), else
/// its `host=` parameter, else `PGHOST`; `localhost` when none.
fn network_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or(""),
        None => host_port.split([':', ',']).next().unwrap_or(""),
    };
    let from_query = || {
        url.split_once('?')
            .and_then(|(_, q)| q.split('&').find_map(|p| p.strip_prefix("host=")))
            .map(str::to_string)
    };
    Some(host.to_string())
        .filter(|h| !h.is_empty())
        .or_else(from_query)
        .or_else(|| std::env::var("PGHOST").ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The fields of one password-file line, `\:` and `\\` unescaped.
fn pgpass_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    fields.last_mut().expect("one field at least").push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            _ => fields.last_mut().expect("one field at least").push(c),
        }
    }
    fields
}

/// Connects to the database `url` names; the store's functions are on
/// the search path.
pub fn connect(url: &str) -> Result<Db, StoreError> {
    let (config, tls) = config(url)?;
    let connector = pg_tls::connector(&tls).map_err(|e| bad_url(url, e))?;
    let client = config
        .connect(connector)
        .map_err(|e| match pg_tls::advice(&e, &tls, &network_host(url)) {
            Some(advice) => bad_url(url, format!("{e}: {advice}")),
            None => StoreError::from_db(Path::new(&redact(url)), e.into()),
        })?;
    let db = Db::Postgres(std::cell::RefCell::new(client));
    db.execute_batch(&format!(
        "SELECT set_config('search_path', current_setting('search_path') || ', {FUNCTIONS_SCHEMA}', false); \
         SET client_min_messages = warning"
    ))
    .map_err(|e| StoreError::from_db(Path::new(&redact(url)), e))?;
    Ok(db)
}

/// Where a PostgreSQL database keeps what SQLite keeps in `PRAGMA
/// user_version` and `application_id`: one row.
const SCHEMA_TABLE: &str = "nicbench_schema";

/// The schema version and whether the database is nicbench's: (version,
/// tables in the current schema, marked as nicbench's).
pub fn schema_state(db: &Db) -> Result<(i64, i64, bool), DbError> {
    let row = db
        .query_row(
            "SELECT (SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()), \
                    to_regclass('nicbench_schema') IS NOT NULL",
            &[],
        )?
        .expect("one row");
    let tables: i64 = row.get(0)?;
    let marked: bool = row.get(1)?;
    if !marked {
        return Ok((0, tables, false));
    }
    let version = db
        .query_row(&format!("SELECT max(version) FROM {SCHEMA_TABLE}"), &[])?
        .and_then(|r| r.get::<Option<i64>>(0).ok().flatten())
        .unwrap_or(0);
    Ok((version, tables, true))
}

/// Takes the migration lock (a transaction-scoped advisory lock, so two
/// processes never migrate at once) and creates the schema table and the
/// functions on a new database. Inside the migration's transaction.
pub fn lock_and_prepare(db: &Db) -> Result<(), DbError> {
    db.execute_batch(&format!(
        "SELECT pg_advisory_xact_lock({}); \
         CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (version BIGINT NOT NULL, application_id BIGINT NOT NULL)",
        super::schema::APPLICATION_ID
    ))?;
    let exists = db
        .query_row(
            "SELECT count(*) FROM pg_namespace WHERE nspname = ?1",
            super::db::params![FUNCTIONS_SCHEMA],
        )?
        .map(|r| r.get::<i64>(0))
        .transpose()?
        .unwrap_or(0);
    if exists == 0 {
        db.execute_batch(FUNCTIONS)?;
    }
    Ok(())
}

/// Records that the database is at schema `version`.
pub fn set_version(db: &Db, version: i64) -> Result<(), DbError> {
    db.execute(&format!("DELETE FROM {SCHEMA_TABLE}"), &[])?;
    db.execute(
        &format!("INSERT INTO {SCHEMA_TABLE} (version, application_id) VALUES (?1, ?2)"),
        super::db::params![version, super::schema::APPLICATION_ID],
    )?;
    Ok(())
}

/// SQLite's functions that the store's SQL reads documents with, for
/// PostgreSQL, under their SQLite names: `json_extract` (one path: the
/// value; several: a JSON array of them) answering jsonb, which the
/// connection reads back as SQLite's typed value; `json_valid`; `iif`;
/// `json_each(doc, path)` over an array; the aggregate
/// `json_group_array`; and the `->>` operator on text (a path's value as
/// text). Paths are SQLite's `$.a.b[0].c`.
const FUNCTIONS: &str = r#"
CREATE SCHEMA nicbench_sql;
CREATE FUNCTION nicbench_sql.json_path(path text) RETURNS text[] IMMUTABLE LANGUAGE sql AS $$
    SELECT CASE WHEN path = '$' THEN ARRAY[]::text[]
        ELSE string_to_array(substr(regexp_replace(path, '\[(\d+)\]', '.\1', 'g'), 3), '.') END
$$;
CREATE FUNCTION nicbench_sql.json_extract(doc jsonb, VARIADIC paths text[]) RETURNS jsonb IMMUTABLE LANGUAGE sql AS $$
    SELECT CASE WHEN cardinality(paths) = 1 THEN doc #> nicbench_sql.json_path(paths[1])
        ELSE (SELECT jsonb_agg(doc #> nicbench_sql.json_path(p) ORDER BY i)
              FROM unnest(paths) WITH ORDINALITY AS u(p, i)) END
$$;
CREATE FUNCTION nicbench_sql.json_extract(doc text, VARIADIC paths text[]) RETURNS jsonb IMMUTABLE LANGUAGE sql AS $$
    SELECT nicbench_sql.json_extract(doc::jsonb, VARIADIC paths)
$$;
CREATE FUNCTION nicbench_sql.json_extract_text(doc text, path text) RETURNS text IMMUTABLE LANGUAGE sql AS $$
    SELECT doc::jsonb #>> nicbench_sql.json_path(path)
$$;
CREATE OPERATOR nicbench_sql.->> (LEFTARG = text, RIGHTARG = text, FUNCTION = nicbench_sql.json_extract_text);
CREATE FUNCTION nicbench_sql.json_valid(doc text) RETURNS boolean IMMUTABLE LANGUAGE plpgsql AS $$
BEGIN
    PERFORM doc::jsonb;
    RETURN doc IS NOT NULL;
EXCEPTION WHEN others THEN
    RETURN false;
END
$$;
CREATE FUNCTION nicbench_sql.iif(condition boolean, yes anyelement, no anyelement) RETURNS anyelement
    IMMUTABLE LANGUAGE sql AS $$ SELECT CASE WHEN condition THEN yes ELSE no END $$;
CREATE FUNCTION nicbench_sql.json_each(doc text, path text) RETURNS TABLE (value jsonb) IMMUTABLE LANGUAGE sql AS $$
    SELECT e FROM jsonb_array_elements(
        (SELECT CASE WHEN jsonb_typeof(d) = 'array' THEN d ELSE '[]'::jsonb END
         FROM (SELECT doc::jsonb #> nicbench_sql.json_path(path) AS d) AS s)) AS e
$$;
CREATE FUNCTION nicbench_sql.json_group_array_step(state jsonb, value jsonb) RETURNS jsonb IMMUTABLE LANGUAGE sql AS $$
    SELECT state || jsonb_build_array(value)
$$;
CREATE AGGREGATE nicbench_sql.json_group_array(jsonb) (
    SFUNC = nicbench_sql.json_group_array_step, STYPE = jsonb, INITCOND = '[]'
);
"#;

/// The first schema version a PostgreSQL archive is created at by
/// migrations: every earlier one is SQLite's history too. Their data
/// updates (filling columns from documents saved by older nicbench
/// versions) touch only rows an older nicbench wrote, and no nicbench
/// before this one wrote to PostgreSQL, so on PostgreSQL only their
/// schema changes run. A migration from this version on runs on both.
pub const POSTGRES_DATA_MIGRATIONS_FROM: usize = 6;

/// Migration `index` (from version `index` to `index + 1`) for
/// PostgreSQL: SQLite's types as PostgreSQL's (`INTEGER` is 64 bits,
/// `REAL` is a double, a table's `id INTEGER PRIMARY KEY` an identity),
/// and, before [`POSTGRES_DATA_MIGRATIONS_FROM`], without data updates.
pub fn migration(index: usize, sql: &str) -> String {
    let statements = sql
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .filter(|s| index >= POSTGRES_DATA_MIGRATIONS_FROM || !s.to_ascii_uppercase().starts_with("UPDATE"));
    let mut out = String::new();
    for statement in statements {
        let typed = statement
            .replace(
                "id INTEGER PRIMARY KEY,",
                "id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,",
            )
            .split_inclusive(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .map(
                |word| match word.trim_end_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_') {
                    "INTEGER" => word.replacen("INTEGER", "BIGINT", 1),
                    "REAL" => word.replacen("REAL", "DOUBLE PRECISION", 1),
                    _ => word.to_string(),
                },
            )
            .collect::<String>();
        out.push_str(&typed);
        out.push_str(";\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_from_urls() {
        assert_eq!(redact("postgres://a:s3cret@h:5/db"), "postgres://a:***@h:5/db");
        assert_eq!(
            redact("postgres://a@h/db?password=x&sslmode=disable"),
            "postgres://a@h/db?password=***&sslmode=disable"
        );
        assert_eq!(redact("postgres://a@h/db"), "postgres://a@h/db");
        assert_eq!(
            redact("postgresql://u:p@/db?host=/tmp/x"),
            "postgresql://u:***@/db?host=/tmp/x"
        );
    }

    #[test]
    fn a_password_in_the_url_is_refused_without_being_said() {
        for url in ["postgres://a:s3cret@h/db", "postgres://a@h/db?password=s3cret"] {
            let error = config(url).unwrap_err().to_string();
            assert!(!error.contains("s3cret"), "{error}");
            assert!(error.contains("PGPASSWORD"), "{error}");
        }
    }

    #[test]
    fn tls_modes_reach_the_client_and_an_unknown_one_is_refused_naming_the_choices() {
        use postgres::config::SslMode as Client;
        let mode = |url: &str| config(url).unwrap().0.get_ssl_mode();
        assert_eq!(mode("postgres://a@h/db?sslmode=disable"), Client::Disable);
        assert_eq!(mode("postgres://a@h/db?sslmode=allow"), Client::Prefer);
        assert_eq!(
            mode("postgres://a@h/db?sslmode=prefer&connect_timeout=3"),
            Client::Prefer
        );
        assert_eq!(mode("postgres://a@h/db?sslmode=require"), Client::Require);
        // Over a unix socket there is no TLS, whatever the mode (as libpq).
        assert_eq!(mode("postgres://a@/db?host=/tmp&sslmode=require"), Client::Disable);
        let error = config("postgres://a@h/db?sslmode=on").unwrap_err().to_string();
        assert!(error.contains("sslmode=on") && error.contains("verify-full"), "{error}");
    }

    #[test]
    fn verify_modes_without_a_root_certificate_say_where_to_put_one() {
        let missing = "/nonexistent/nicbench-root.crt";
        for mode in ["verify-ca", "verify-full"] {
            let error = config(&format!("postgres://a@h/db?sslmode={mode}&sslrootcert={missing}"))
                .unwrap_err()
                .to_string();
            assert!(
                error.contains(missing) && error.contains("sslrootcert=FILE") && error.contains("sslmode=require"),
                "{error}"
            );
        }
        let error = config("postgres://a@h/db?sslmode=require&sslrootcert=system")
            .unwrap_err()
            .to_string();
        assert!(error.contains("sslmode=verify-full"), "{error}");
        let (_, tls) = config("postgres://a@h/db?sslrootcert=system").unwrap();
        assert_eq!(
            (tls.mode, tls.roots),
            (pg_tls::SslMode::VerifyFull, Some(pg_tls::Roots::System))
        );
        let (_, tls) = config(&format!("postgres://a@h/db?sslmode=require&sslrootcert={missing}")).unwrap();
        assert_eq!(tls.roots, None, "require without the file encrypts unchecked");
    }

    #[test]
    fn the_network_host_is_read_from_the_url_as_the_password_file_names_it() {
        assert_eq!(network_host("postgres://team@db.example:5433/archive"), "db.example");
        assert_eq!(network_host("postgres://[::1]:5433/archive"), "::1");
        assert_eq!(network_host("postgres://team@/archive?host=db.example"), "db.example");
    }

    #[test]
    fn password_file_lines_unescape_and_match_wildcards() {
        assert_eq!(pgpass_fields(r"h:5432:*:u:p\:w\\d"), ["h", "5432", "*", "u", r"p:w\d"]);
        assert_eq!(pgpass_fields("a:b:c:d:e:f"), ["a", "b", "c", "d", "e:f"]);
    }

    #[test]
    fn migrations_get_postgres_types_and_keep_their_statements() {
        let v1 = migration(0, super::super::schema::MIGRATIONS[0]);
        assert!(
            v1.contains("id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"),
            "{v1}"
        );
        assert!(v1.contains("started_at_unix_seconds DOUBLE PRECISION NOT NULL"), "{v1}");
        assert!(v1.contains("run_id BIGINT NOT NULL REFERENCES runs(id)"), "{v1}");
        assert!(!v1.contains("INTEGER") && !v1.contains(" REAL"), "{v1}");
        let v3 = migration(2, super::super::schema::MIGRATIONS[2]);
        assert!(
            v3.contains("ADD COLUMN client_cpu_user_percent DOUBLE PRECISION;"),
            "{v3}"
        );
        assert!(!v3.contains("UPDATE"), "{v3}");
        let v6 = migration(5, super::super::schema::MIGRATIONS[5]);
        assert!(v6.contains("run_id BIGINT PRIMARY KEY REFERENCES runs(id)"), "{v6}");
    }
}
