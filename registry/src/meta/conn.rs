//! What the registry's logic sees of a metadata database, whichever it is:
//! statements with numbered parameters (`?1`, `?2`...), rows of plain
//! values, and the few SQL fragments the two dialects write differently.
//! Everything else (the checks, the order of the steps, which statements
//! run in one transaction) is written once, above this. Also what both
//! backends' schemas share: the registry's id.

use crate::error::{Error, Result};

/// A statement's parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// SQL NULL.
    Null,
    /// A 64-bit integer (`BIGINT` on PostgreSQL).
    Int(i64),
    /// Text.
    Text(String),
    /// Bytes (`BYTEA` on PostgreSQL).
    Bytes(Vec<u8>),
    /// A truth value (an integer 0 or 1 in SQLite, `BOOLEAN` on PostgreSQL).
    Bool(bool),
}

impl From<i64> for Param {
    fn from(v: i64) -> Self {
        Param::Int(v)
    }
}

impl From<bool> for Param {
    fn from(v: bool) -> Self {
        Param::Bool(v)
    }
}

impl From<&str> for Param {
    fn from(v: &str) -> Self {
        Param::Text(v.to_string())
    }
}

impl From<&String> for Param {
    fn from(v: &String) -> Self {
        Param::Text(v.clone())
    }
}

impl From<String> for Param {
    fn from(v: String) -> Self {
        Param::Text(v)
    }
}

impl From<Vec<u8>> for Param {
    fn from(v: Vec<u8>) -> Self {
        Param::Bytes(v)
    }
}

impl From<Option<String>> for Param {
    fn from(v: Option<String>) -> Self {
        v.map_or(Param::Null, Param::Text)
    }
}

/// The parameters of a statement, each converted with `Param::from`.
macro_rules! params {
    ($($value:expr),* $(,)?) => {
        &[$($crate::meta::conn::Param::from($value)),*][..]
    };
}
pub(crate) use params;

/// A value of a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// Text.
    Text(String),
    /// A truth value (PostgreSQL's `BOOLEAN`; SQLite answers integers).
    Bool(bool),
}

/// A row of a query's answer.
#[derive(Debug, Clone)]
pub struct Row(pub Vec<Value>);

impl Row {
    fn at(&self, i: usize) -> Result<&Value> {
        self.0.get(i).ok_or_else(|| {
            Error::Internal(anyhow::anyhow!(
                "column {i} of a row of {} columns",
                self.0.len()
            ))
        })
    }

    fn mismatch(&self, i: usize, wanted: &str) -> Error {
        Error::Internal(anyhow::anyhow!(
            "column {i} is {:?}, not {wanted}",
            self.0.get(i)
        ))
    }

    /// Column `i` as an integer.
    pub fn int(&self, i: usize) -> Result<i64> {
        self.opt_int(i)?
            .ok_or_else(|| self.mismatch(i, "an integer"))
    }

    /// Column `i` as an integer or NULL.
    pub fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Int(v) => Ok(Some(*v)),
            _ => Err(self.mismatch(i, "an integer")),
        }
    }

    /// Column `i` as text.
    pub fn text(&self, i: usize) -> Result<String> {
        self.opt_text(i)?.ok_or_else(|| self.mismatch(i, "text"))
    }

    /// Column `i` as text or NULL.
    pub fn opt_text(&self, i: usize) -> Result<Option<String>> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Text(v) => Ok(Some(v.clone())),
            _ => Err(self.mismatch(i, "text")),
        }
    }

    /// Column `i` as a truth value (an integer is true when not 0).
    pub fn bool(&self, i: usize) -> Result<bool> {
        match self.at(i)? {
            Value::Bool(v) => Ok(*v),
            Value::Int(v) => Ok(*v != 0),
            _ => Err(self.mismatch(i, "a truth value")),
        }
    }
}

/// The SQL dialect of a database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite (the FTS5 search index, `json_each`).
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

impl Dialect {
    /// `column` ordered by its bytes, as SQLite orders text: PostgreSQL
    /// orders by the database's collation otherwise, which differs from
    /// one server to another.
    pub fn bytewise(self, column: &str) -> String {
        match self {
            Dialect::Sqlite => column.to_string(),
            Dialect::Postgres => format!("{column} COLLATE \"C\""),
        }
    }

    /// A table of the strings of the JSON array in `column`, as `value`.
    pub fn json_strings(self, column: &str) -> String {
        match self {
            Dialect::Sqlite => format!("json_each({column})"),
            Dialect::Postgres => {
                format!("jsonb_array_elements_text({column}::jsonb) AS strings(value)")
            }
        }
    }

    /// A condition on the version `v` that holds when its search text
    /// holds every one of `words` (lowercased, each of three characters or
    /// more) as a substring; the parameters it needs are pushed to `args`.
    /// SQLite looks them up in its trigram index (FTS5, quotes doubled so a
    /// word is text, never FTS5 syntax); PostgreSQL matches each word with
    /// `strpos`.
    pub fn search_words(self, words: &[String], args: &mut Vec<Param>) -> String {
        match self {
            Dialect::Sqlite => {
                let matched = words
                    .iter()
                    .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
                    .collect::<Vec<_>>()
                    .join(" AND ");
                args.push(Param::Text(matched));
                format!(
                    "v.rowid IN (SELECT rowid FROM versions_search WHERE versions_search \
                     MATCH ?{})",
                    args.len()
                )
            }
            Dialect::Postgres => words
                .iter()
                .map(|w| {
                    args.push(Param::Text(w.clone()));
                    format!("strpos(v.search_text, ?{}) > 0", args.len())
                })
                .collect::<Vec<_>>()
                .join(" AND "),
        }
    }
}

/// A connection to the metadata database, within a transaction or not (see
/// `Meta::read` and `Meta::write`). Statements name their parameters `?1`,
/// `?2`...; integers are 64-bit.
pub trait Conn {
    /// The database's dialect.
    fn dialect(&self) -> Dialect;

    /// Runs a statement: how many rows it changed.
    fn execute(&mut self, sql: &str, params: &[Param]) -> Result<u64>;

    /// Runs a query: its rows.
    fn query(&mut self, sql: &str, params: &[Param]) -> Result<Vec<Row>>;

    /// Runs a query: its first row, if any.
    fn query_opt(&mut self, sql: &str, params: &[Param]) -> Result<Option<Row>> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// Runs a query that answers one row: that row.
    fn query_one(&mut self, sql: &str, params: &[Param]) -> Result<Row> {
        self.query_opt(sql, params)?
            .ok_or_else(|| Error::Internal(anyhow::anyhow!("no row where one was expected: {sql}")))
    }
}

/// A new registry id: `swreg_` and 22 characters of base64url (16 random
/// bytes), no `:` (it is a field of the key registration statement).
pub fn new_registry_id() -> anyhow::Result<String> {
    use base64::Engine;
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("getrandom: {e}"))?;
    Ok(format!(
        "swreg_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}
