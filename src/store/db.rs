//! One connection to either back end of the store, SQLite or PostgreSQL,
//! behind one small interface: statements with `?N` placeholders and
//! values of one type ([`Sql`], SQLite's dynamic value), rows read as such
//! values, transactions. The store writes each query once, in SQL both
//! back ends run: SQLite's own, with what PostgreSQL lacks of it (the JSON
//! functions the store reads documents with) given to PostgreSQL by
//! functions of the same names ([`super::postgres`]). Here PostgreSQL gets
//! `$N` for `?N`, and its typed values come back as SQLite's would.

use std::cell::RefCell;

use rusqlite::types::{FromSql, Value as Sql, ValueRef};

/// What went wrong in either back end.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("{}", postgres_text(.0))]
    Postgres(#[from] postgres::Error),
    /// A value that is not of the type the store reads it as.
    #[error("column {column}: {detail}")]
    Decode { column: usize, detail: String },
}

/// A PostgreSQL error with the server's own message (the crate's Display
/// says only "db error" for those).
fn postgres_text(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => match std::error::Error::source(e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}

/// One row, every column as the value SQLite would give.
#[derive(Debug, Clone, PartialEq)]
pub struct Row(pub Vec<Sql>);

impl Row {
    /// Column `i` as `T` (as rusqlite converts: an integer reads as a
    /// float, 0 and 1 as booleans, NULL as `None`).
    pub fn get<T: FromSql>(&self, i: usize) -> Result<T, DbError> {
        let value = self.0.get(i).ok_or_else(|| DbError::Decode {
            column: i,
            detail: format!("the row has {} columns", self.0.len()),
        })?;
        T::column_result(ValueRef::from(value)).map_err(|e| DbError::Decode {
            column: i,
            detail: e.to_string(),
        })
    }

    /// Column `i` as it is.
    pub fn value(&self, i: usize) -> Sql {
        self.0.get(i).cloned().unwrap_or(Sql::Null)
    }
}

/// Values for a statement's `?1`, `?2`... in order.
#[macro_export]
#[doc(hidden)]
macro_rules! sql_params {
    ($($value:expr),* $(,)?) => {
        &[$($crate::store::db::IntoSql::into_sql($value)),*][..]
    };
}
pub use crate::sql_params as params;

/// A Rust value as a statement parameter.
pub trait IntoSql {
    fn into_sql(self) -> Sql;
}

impl IntoSql for Sql {
    fn into_sql(self) -> Sql {
        self
    }
}
impl IntoSql for &Sql {
    fn into_sql(self) -> Sql {
        self.clone()
    }
}
impl IntoSql for i64 {
    fn into_sql(self) -> Sql {
        Sql::Integer(self)
    }
}
impl IntoSql for &i64 {
    fn into_sql(self) -> Sql {
        Sql::Integer(*self)
    }
}
impl IntoSql for f64 {
    fn into_sql(self) -> Sql {
        Sql::Real(self)
    }
}
impl IntoSql for bool {
    fn into_sql(self) -> Sql {
        Sql::Integer(self.into())
    }
}
impl IntoSql for &str {
    fn into_sql(self) -> Sql {
        Sql::Text(self.to_string())
    }
}
impl IntoSql for String {
    fn into_sql(self) -> Sql {
        Sql::Text(self)
    }
}
impl IntoSql for &String {
    fn into_sql(self) -> Sql {
        Sql::Text(self.clone())
    }
}
impl<T: IntoSql> IntoSql for Option<T> {
    fn into_sql(self) -> Sql {
        self.map_or(Sql::Null, IntoSql::into_sql)
    }
}

/// Which back end a connection talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// An open connection.
pub enum Db {
    Sqlite(rusqlite::Connection),
    /// A RefCell: the store reads through `&self`, and the client's calls
    /// take `&mut`. The store is used by one thread at a time.
    Postgres(RefCell<postgres::Client>),
}

impl Db {
    pub fn backend(&self) -> Backend {
        match self {
            Db::Sqlite(_) => Backend::Sqlite,
            Db::Postgres(_) => Backend::Postgres,
        }
    }

    /// The SQLite connection, for what only SQLite has (its online backup,
    /// pragmas); None on PostgreSQL.
    pub fn sqlite(&self) -> Option<&rusqlite::Connection> {
        match self {
            Db::Sqlite(c) => Some(c),
            Db::Postgres(_) => None,
        }
    }

    /// Runs one statement; returns the rows it changed.
    pub fn execute(&self, sql: &str, params: &[Sql]) -> Result<usize, DbError> {
        match self {
            Db::Sqlite(c) => {
                let mut statement = c.prepare_cached(sql)?;
                Ok(statement.execute(rusqlite::params_from_iter(params.iter()))?)
            }
            Db::Postgres(c) => {
                let sql = postgres_sql(sql);
                with_pg_params(params, |refs| Ok(c.borrow_mut().execute(sql.as_str(), refs)? as usize))
            }
        }
    }

    /// Runs statements without parameters, one after the other.
    pub fn execute_batch(&self, sql: &str) -> Result<(), DbError> {
        match self {
            Db::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Db::Postgres(c) => Ok(c.borrow_mut().batch_execute(sql)?),
        }
    }

    /// Every row of a query.
    pub fn query(&self, sql: &str, params: &[Sql]) -> Result<Vec<Row>, DbError> {
        match self {
            Db::Sqlite(c) => {
                let mut statement = c.prepare_cached(sql)?;
                let columns = statement.column_count();
                let mut rows = statement.query(rusqlite::params_from_iter(params.iter()))?;
                let mut out = Vec::new();
                while let Some(row) = rows.next()? {
                    out.push(Row((0..columns)
                        .map(|i| row.get::<_, Sql>(i))
                        .collect::<Result<_, _>>()?));
                }
                Ok(out)
            }
            Db::Postgres(c) => {
                let sql = postgres_sql(sql);
                let rows = with_pg_params(params, |refs| c.borrow_mut().query(sql.as_str(), refs))?;
                rows.iter().map(sqlite_row).collect()
            }
        }
    }

    /// The first row of a query, if it gave one.
    pub fn query_row(&self, sql: &str, params: &[Sql]) -> Result<Option<Row>, DbError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// A transaction, rolled back unless committed. `immediate` takes
    /// SQLite's write lock at once (PostgreSQL's writers lock rows as they go).
    pub fn transaction(&self, immediate: bool) -> Result<Tx<'_>, DbError> {
        let begin = match (self, immediate) {
            (Db::Sqlite(_), true) => "BEGIN IMMEDIATE",
            _ => "BEGIN",
        };
        self.execute_batch(begin)?;
        Ok(Tx { db: self, done: false })
    }
}

/// An open transaction; rolled back when dropped uncommitted.
pub struct Tx<'d> {
    db: &'d Db,
    done: bool,
}

impl Tx<'_> {
    pub fn commit(mut self) -> Result<(), DbError> {
        self.done = true;
        self.db.execute_batch("COMMIT")
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Db;
    fn deref(&self) -> &Db {
        self.db
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.db.execute_batch("ROLLBACK");
        }
    }
}

/// A statement for PostgreSQL: `?N` becomes `$N` (a bare `?` the next
/// number), outside quoted literals and names.
pub fn postgres_sql(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut quote: Option<char> = None;
    let mut next = 0usize;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                out.push(c);
                if c == q {
                    quote = None;
                }
            }
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                out.push(c);
            }
            None if c == '?' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                // As SQLite numbers them: a bare `?` is one past the largest so far.
                let n = digits.parse::<usize>().unwrap_or(next + 1);
                next = next.max(n);
                out.push('$');
                out.push_str(&n.to_string());
            }
            None => out.push(c),
        }
    }
    out
}

/// A PostgreSQL row as SQLite would give it: integers and booleans as
/// integers, floats as reals, text as text, and a JSON value as SQLite's
/// `json_extract` gives one (a number as a number, a string as text, true
/// and false as 1 and 0, an object or array as its JSON text).
fn sqlite_row(row: &postgres::Row) -> Result<Row, DbError> {
    use postgres::types::Type;
    let mut values = Vec::with_capacity(row.len());
    for (i, column) in row.columns().iter().enumerate() {
        let decode = |e: postgres::Error| DbError::Decode {
            column: i,
            detail: postgres_text(&e),
        };
        let ty = column.type_();
        let value = match *ty {
            Type::BOOL => row
                .try_get::<_, Option<bool>>(i)
                .map_err(decode)?
                .map(|b| Sql::Integer(b.into())),
            Type::INT2 => row
                .try_get::<_, Option<i16>>(i)
                .map_err(decode)?
                .map(|n| Sql::Integer(n.into())),
            Type::INT4 => row
                .try_get::<_, Option<i32>>(i)
                .map_err(decode)?
                .map(|n| Sql::Integer(n.into())),
            Type::INT8 => row.try_get::<_, Option<i64>>(i).map_err(decode)?.map(Sql::Integer),
            Type::FLOAT4 => row
                .try_get::<_, Option<f32>>(i)
                .map_err(decode)?
                .map(|x| Sql::Real(x.into())),
            Type::FLOAT8 => row.try_get::<_, Option<f64>>(i).map_err(decode)?.map(Sql::Real),
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                row.try_get::<_, Option<String>>(i).map_err(decode)?.map(Sql::Text)
            }
            Type::BYTEA => row.try_get::<_, Option<Vec<u8>>>(i).map_err(decode)?.map(Sql::Blob),
            Type::JSON | Type::JSONB => row
                .try_get::<_, Option<serde_json::Value>>(i)
                .map_err(decode)?
                .map(json_value),
            _ => {
                return Err(DbError::Decode {
                    column: i,
                    detail: format!("PostgreSQL type {ty} is not one the store reads"),
                })
            }
        };
        values.push(value.unwrap_or(Sql::Null));
    }
    Ok(Row(values))
}

/// One JSON value as SQLite's `json_extract` gives it.
pub fn json_value(v: serde_json::Value) -> Sql {
    match v {
        serde_json::Value::Null => Sql::Null,
        serde_json::Value::Bool(b) => Sql::Integer(b.into()),
        serde_json::Value::Number(x) => match x.as_i64() {
            Some(i) => Sql::Integer(i),
            None => x.as_f64().map_or(Sql::Null, Sql::Real),
        },
        serde_json::Value::String(t) => Sql::Text(t),
        other => Sql::Text(other.to_string()),
    }
}

/// A parameter for PostgreSQL, encoded as the type the server gave its
/// placeholder (an integer for a float column is a float, and so on).
#[derive(Debug)]
struct PgValue<'a>(&'a Sql);

/// Calls `f` with the parameters as the postgres crate takes them.
fn with_pg_params<T>(params: &[Sql], f: impl FnOnce(&[&(dyn postgres::types::ToSql + Sync)]) -> T) -> T {
    let values: Vec<PgValue> = params.iter().map(PgValue).collect();
    let refs: Vec<&(dyn postgres::types::ToSql + Sync)> = values
        .iter()
        .map(|v| v as &(dyn postgres::types::ToSql + Sync))
        .collect();
    f(&refs)
}

impl postgres::types::ToSql for PgValue<'_> {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use postgres::types::{IsNull, Type};
        let textual = matches!(
            *ty,
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN
        );
        match self.0 {
            Sql::Null => Ok(IsNull::Yes),
            Sql::Integer(n) => match *ty {
                Type::INT8 => n.to_sql(ty, out),
                Type::INT4 => i32::try_from(*n)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*n)?.to_sql(ty, out),
                Type::FLOAT8 => (*n as f64).to_sql(ty, out),
                Type::FLOAT4 => (*n as f32).to_sql(ty, out),
                Type::BOOL => (*n != 0).to_sql(ty, out),
                _ if textual => n.to_string().to_sql(ty, out),
                _ => Err(format!("an integer for a parameter of type {ty}").into()),
            },
            Sql::Real(x) => match *ty {
                Type::FLOAT8 => x.to_sql(ty, out),
                Type::FLOAT4 => (*x as f32).to_sql(ty, out),
                Type::INT8 if x.fract() == 0.0 && x.abs() < 9.0e18 => (*x as i64).to_sql(ty, out),
                _ if textual => x.to_string().to_sql(ty, out),
                _ => Err(format!("a number for a parameter of type {ty}").into()),
            },
            Sql::Text(t) => match *ty {
                Type::JSON | Type::JSONB => {
                    let value: serde_json::Value = serde_json::from_str(t)?;
                    value.to_sql(ty, out)
                }
                Type::INT8 => t.parse::<i64>()?.to_sql(ty, out),
                Type::FLOAT8 => t.parse::<f64>()?.to_sql(ty, out),
                _ if textual => t.as_str().to_sql(ty, out),
                _ => Err(format!("text for a parameter of type {ty}").into()),
            },
            Sql::Blob(b) => b.as_slice().to_sql(ty, out),
        }
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_postgres_numbers_outside_quotes() {
        assert_eq!(
            postgres_sql("SELECT a FROM t WHERE b = ?2 AND c = ?1 AND d = '?3' AND \"e?\" = ?"),
            "SELECT a FROM t WHERE b = $2 AND c = $1 AND d = '?3' AND \"e?\" = $3"
        );
        assert_eq!(postgres_sql("VALUES (?, ?, 'it''s ?')"), "VALUES ($1, $2, 'it''s ?')");
    }

    #[test]
    fn json_values_read_as_sqlite_reads_them() {
        use serde_json::json;
        assert_eq!(json_value(json!(3)), Sql::Integer(3));
        assert_eq!(json_value(json!(2.5)), Sql::Real(2.5));
        assert_eq!(json_value(json!(true)), Sql::Integer(1));
        assert_eq!(json_value(json!("x")), Sql::Text("x".into()));
        assert_eq!(json_value(json!(null)), Sql::Null);
        assert_eq!(json_value(json!({"a": [1]})), Sql::Text(r#"{"a":[1]}"#.into()));
    }
}
