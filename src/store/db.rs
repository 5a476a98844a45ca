//! The one place that knows both database engines: a [`Connection`] is an SQLite connection
//! or a PostgreSQL client, with the few calls the store makes (`execute`, `query_row`,
//! `prepare(..).query_map`, `last_insert_rowid`, transactions) and its own [`Value`] and
//! [`Row`]. The store's SQL is written once, in the subset both engines accept, with `?N`
//! placeholders; the dialect differences are here: `$N` sent to PostgreSQL, `lastval()` for
//! the last inserted id, booleans read as 0/1, how a write transaction starts.

use super::{Result, StoreError};
use std::cell::RefCell;
use std::collections::HashMap;

/// A value going into or coming out of the database.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

/// What can be passed as a statement parameter.
pub trait ToValue {
    fn to_value(&self) -> Value;
}

macro_rules! int_to_value {
    ($($t:ty),*) => {$(
        impl ToValue for $t {
            fn to_value(&self) -> Value {
                Value::Int(*self as i64)
            }
        }
    )*};
}
int_to_value!(i64, i32, u32, u8, u16, i16, u64, usize);

impl ToValue for bool {
    fn to_value(&self) -> Value {
        Value::Int(*self as i64)
    }
}
impl ToValue for f64 {
    fn to_value(&self) -> Value {
        Value::Real(*self)
    }
}
impl ToValue for f32 {
    fn to_value(&self) -> Value {
        Value::Real(*self as f64)
    }
}
impl ToValue for str {
    fn to_value(&self) -> Value {
        Value::Text(self.to_string())
    }
}
impl ToValue for String {
    fn to_value(&self) -> Value {
        Value::Text(self.clone())
    }
}
impl ToValue for [u8] {
    fn to_value(&self) -> Value {
        Value::Blob(self.to_vec())
    }
}
impl ToValue for Vec<u8> {
    fn to_value(&self) -> Value {
        Value::Blob(self.clone())
    }
}
impl ToValue for Value {
    fn to_value(&self) -> Value {
        self.clone()
    }
}
impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value {
        self.as_ref().map_or(Value::Null, T::to_value)
    }
}
impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
}

/// A statement's parameters: `[a]`, `params![a, b]`, `[]`.
pub trait Params {
    fn values(self) -> Vec<Value>;
}
impl Params for [&dyn ToValue; 0] {
    fn values(self) -> Vec<Value> {
        Vec::new()
    }
}
impl Params for &[&dyn ToValue] {
    fn values(self) -> Vec<Value> {
        self.iter().map(|v| v.to_value()).collect()
    }
}
impl Params for Vec<Value> {
    fn values(self) -> Vec<Value> {
        self
    }
}
macro_rules! array_params {
    ($($n:literal),*) => {$(
        impl<T: ToValue> Params for [T; $n] {
            fn values(self) -> Vec<Value> {
                self.iter().map(ToValue::to_value).collect()
            }
        }
    )*};
}
array_params!(1, 2, 3, 4, 5, 6);

/// `params![a, b, c]`: parameters of different types.
macro_rules! params {
    () => { &[] as &[&dyn $crate::store::db::ToValue] };
    ($($p:expr),+ $(,)?) => { &[$(&$p as &dyn $crate::store::db::ToValue),+] as &[&dyn $crate::store::db::ToValue] };
}
pub(crate) use params;

/// What a column can be read as.
pub trait FromValue: Sized {
    fn from_value(v: &Value) -> std::result::Result<Self, String>;
}

fn mismatch<T>(v: &Value, want: &str) -> std::result::Result<T, String> {
    Err(format!("a column holds {v:?} where {want} was expected"))
}

macro_rules! int_from_value {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(v: &Value) -> std::result::Result<Self, String> {
                match v {
                    Value::Int(i) => <$t>::try_from(*i).map_err(|_| format!("{i} is out of range")),
                    _ => mismatch(v, "an integer"),
                }
            }
        }
    )*};
}
int_from_value!(i64, i32, u32, u8, u16, u64, usize);

impl FromValue for bool {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        match v {
            Value::Int(i) => Ok(*i != 0),
            _ => mismatch(v, "a boolean"),
        }
    }
}
impl FromValue for f64 {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        match v {
            Value::Real(f) => Ok(*f),
            Value::Int(i) => Ok(*i as f64),
            _ => mismatch(v, "a number"),
        }
    }
}
impl FromValue for f32 {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        f64::from_value(v).map(|f| f as f32)
    }
}
impl FromValue for String {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        match v {
            Value::Text(s) => Ok(s.clone()),
            _ => mismatch(v, "text"),
        }
    }
}
impl FromValue for Vec<u8> {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        match v {
            Value::Blob(b) => Ok(b.clone()),
            Value::Text(s) => Ok(s.as_bytes().to_vec()),
            _ => mismatch(v, "bytes"),
        }
    }
}
impl FromValue for Value {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        Ok(v.clone())
    }
}
impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: &Value) -> std::result::Result<Self, String> {
        match v {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

/// A column index (as rusqlite's `row.get(0)`).
pub trait RowIndex {
    fn index(self) -> usize;
}
impl RowIndex for usize {
    fn index(self) -> usize {
        self
    }
}

/// One result row, read out of the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct Row(pub Vec<Value>);

impl Row {
    pub fn get<I: RowIndex, T: FromValue>(&self, i: I) -> Result<T> {
        let i = i.index();
        let v = self
            .0
            .get(i)
            .ok_or_else(|| StoreError::Database(format!("no column {i}")))?;
        T::from_value(v).map_err(|e| StoreError::Database(format!("column {i}: {e}")))
    }

    pub fn values(&self) -> &[Value] {
        &self.0
    }
}

/// `.optional()` on a one-row query: no row is `None`, not an error.
pub trait OptionalExtension<T> {
    fn optional(self) -> Result<Option<T>>;
}
impl<T> OptionalExtension<T> for Result<T> {
    fn optional(self) -> Result<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(StoreError::NoRow) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Which engine a library is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    Sqlite,
    Postgres,
}

enum Engine {
    Sqlite(rusqlite::Connection),
    Postgres(RefCell<postgres::Client>),
}

/// A connection to a library's database, on either engine.
pub struct Connection {
    engine: Engine,
    /// PostgreSQL statements prepared once per connection, by their SQL as sent.
    statements: RefCell<HashMap<String, postgres::Statement>>,
}

impl Connection {
    pub fn sqlite(conn: rusqlite::Connection) -> Connection {
        Connection {
            engine: Engine::Sqlite(conn),
            statements: RefCell::default(),
        }
    }

    pub fn postgres(client: postgres::Client) -> Connection {
        Connection {
            engine: Engine::Postgres(RefCell::new(client)),
            statements: RefCell::default(),
        }
    }

    pub fn kind(&self) -> EngineKind {
        match self.engine {
            Engine::Sqlite(_) => EngineKind::Sqlite,
            Engine::Postgres(_) => EngineKind::Postgres,
        }
    }

    /// The SQLite connection, for what only SQLite has (pragmas, integrity check).
    pub fn as_sqlite(&self) -> Option<&rusqlite::Connection> {
        match &self.engine {
            Engine::Sqlite(c) => Some(c),
            Engine::Postgres(_) => None,
        }
    }

    /// Runs several statements without parameters (schema text, `BEGIN`).
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        match &self.engine {
            Engine::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Engine::Postgres(c) => Ok(c.borrow_mut().batch_execute(sql)?),
        }
    }

    pub fn execute(&self, sql: &str, params: impl Params) -> Result<usize> {
        let values = params.values();
        match &self.engine {
            Engine::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                Ok(stmt.execute(rusqlite::params_from_iter(values.iter().map(sqlite_value)))?)
            }
            Engine::Postgres(c) => {
                let stmt = self.pg_statement(c, sql)?;
                let args = pg_args(&values);
                let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    args.iter().map(|a| a as _).collect();
                Ok(c.borrow_mut().execute(&stmt, &refs)? as usize)
            }
        }
    }

    /// Every row of a query, read out.
    pub fn rows(&self, sql: &str, params: impl Params) -> Result<Vec<Row>> {
        let values = params.values();
        match &self.engine {
            Engine::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                let n = stmt.column_count();
                let mut rows =
                    stmt.query(rusqlite::params_from_iter(values.iter().map(sqlite_value)))?;
                let mut out = Vec::new();
                while let Some(row) = rows.next()? {
                    let mut cells = Vec::with_capacity(n);
                    for i in 0..n {
                        cells.push(from_sqlite(row.get_ref(i)?));
                    }
                    out.push(Row(cells));
                }
                Ok(out)
            }
            Engine::Postgres(c) => {
                let stmt = self.pg_statement(c, sql)?;
                let args = pg_args(&values);
                let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    args.iter().map(|a| a as _).collect();
                let rows = c.borrow_mut().query(&stmt, &refs)?;
                rows.iter().map(super::pg_value::row_from_pg).collect()
            }
        }
    }

    pub fn query_row<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnOnce(&Row) -> Result<T>,
    ) -> Result<T> {
        let rows = self.rows(sql, params)?;
        match rows.first() {
            Some(row) => f(row),
            None => Err(StoreError::NoRow),
        }
    }

    pub fn prepare(&self, sql: &str) -> Result<Statement<'_>> {
        Ok(Statement {
            conn: self,
            sql: sql.to_string(),
        })
    }

    pub fn prepare_cached(&self, sql: &str) -> Result<Statement<'_>> {
        self.prepare(sql)
    }

    /// The id of the row the last `INSERT` on this connection made.
    pub fn last_insert_rowid(&self) -> Result<i64> {
        match &self.engine {
            Engine::Sqlite(c) => Ok(c.last_insert_rowid()),
            Engine::Postgres(_) => self.query_row("SELECT lastval()", [], |r| r.get(0)),
        }
    }

    /// Starts a write transaction: SQLite takes its write lock now (`BEGIN IMMEDIATE`);
    /// PostgreSQL takes the library's writer lock (writers one at a time, as on SQLite;
    /// readers never wait).
    pub fn transaction(&self) -> Result<Transaction<'_>> {
        match &self.engine {
            Engine::Sqlite(c) => c.execute_batch("BEGIN IMMEDIATE")?,
            Engine::Postgres(c) => c.borrow_mut().batch_execute(&format!(
                "BEGIN; SELECT pg_advisory_xact_lock({WRITER_LOCK})"
            ))?,
        }
        Ok(Transaction {
            conn: self,
            done: false,
        })
    }

    fn pg_statement(
        &self,
        client: &RefCell<postgres::Client>,
        sql: &str,
    ) -> Result<postgres::Statement> {
        if let Some(s) = self.statements.borrow().get(sql) {
            return Ok(s.clone());
        }
        let stmt = client.borrow_mut().prepare(&dollar_placeholders(sql))?;
        let mut statements = self.statements.borrow_mut();
        // Some SQL is built per call (ids inlined): the cache starts over rather than grow.
        if statements.len() >= MAX_STATEMENTS {
            statements.clear();
        }
        statements.insert(sql.to_string(), stmt.clone());
        Ok(stmt)
    }
}

/// PostgreSQL statements kept prepared per connection.
const MAX_STATEMENTS: usize = 256;

/// The advisory lock every PostgreSQL write transaction holds ("ETWN").
pub const WRITER_LOCK: i64 = 0x4554_574E;

/// A prepared statement (the SQL; engines cache their own plans).
pub struct Statement<'a> {
    conn: &'a Connection,
    sql: String,
}

impl Statement<'_> {
    pub fn execute(&mut self, params: impl Params) -> Result<usize> {
        self.conn.execute(&self.sql, params)
    }

    pub fn query_map<T>(
        &mut self,
        params: impl Params,
        mut f: impl FnMut(&Row) -> Result<T>,
    ) -> Result<std::vec::IntoIter<Result<T>>> {
        let rows = self.conn.rows(&self.sql, params)?;
        Ok(rows.iter().map(&mut f).collect::<Vec<_>>().into_iter())
    }

    pub fn query_row<T>(
        &mut self,
        params: impl Params,
        f: impl FnOnce(&Row) -> Result<T>,
    ) -> Result<T> {
        self.conn.query_row(&self.sql, params, f)
    }

    pub fn query(&mut self, params: impl Params) -> Result<Vec<Row>> {
        self.conn.rows(&self.sql, params)
    }
}

/// A write transaction: committed by [`Transaction::commit`], rolled back when dropped.
pub struct Transaction<'a> {
    conn: &'a Connection,
    done: bool,
}

impl Transaction<'_> {
    pub fn commit(mut self) -> Result<()> {
        self.done = true;
        self.conn.execute_batch("COMMIT")
    }
}

impl std::ops::Deref for Transaction<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

fn sqlite_value(v: &Value) -> rusqlite::types::Value {
    use rusqlite::types::Value as V;
    match v {
        Value::Null => V::Null,
        Value::Int(i) => V::Integer(*i),
        Value::Real(f) => V::Real(*f),
        Value::Text(s) => V::Text(s.clone()),
        Value::Blob(b) => V::Blob(b.clone()),
    }
}

fn from_sqlite(v: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef as V;
    match v {
        V::Null => Value::Null,
        V::Integer(i) => Value::Int(i),
        V::Real(f) => Value::Real(f),
        V::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        V::Blob(b) => Value::Blob(b.to_vec()),
    }
}

fn pg_args(values: &[Value]) -> Vec<super::pg_value::PgValue<'_>> {
    values.iter().map(super::pg_value::PgValue).collect()
}

/// `?N` (and bare `?`) placeholders as PostgreSQL's `$N`; quoted text is left alone.
pub fn dollar_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut quoted = false;
    let mut next = 0;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                out.push(c);
            }
            '?' if !quoted => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    next += 1;
                    digits = next.to_string();
                }
                out.push('$');
                out.push_str(&digits);
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_dollar_numbers_outside_quotes() {
        assert_eq!(
            dollar_placeholders("SELECT a FROM t WHERE b = ?2 AND c = ?1 AND d = '?x'"),
            "SELECT a FROM t WHERE b = $2 AND c = $1 AND d = '?x'"
        );
        assert_eq!(dollar_placeholders("VALUES (?, ?)"), "VALUES ($1, $2)");
    }

    #[test]
    fn values_read_back_as_rusqlite_read_them() {
        assert_eq!(f64::from_value(&Value::Int(6)), Ok(6.0));
        assert_eq!(Option::<i64>::from_value(&Value::Null), Ok(None));
        assert!(u32::from_value(&Value::Int(-1)).is_err());
        assert!(String::from_value(&Value::Int(1)).is_err());
    }
}
