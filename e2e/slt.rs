//! Runs every `sql_tests/**/*.slt` file against one real server.
//!
//! [`SltDb`] adapts a tokio-postgres session to sqllogictest's [`AsyncDB`]. It uses the simple
//! query protocol, so every value arrives as Postgres text: `NULL` is shown as `NULL` and the
//! empty string as `(empty)`. Column types are not checked (every column is reported as `Any`),
//! so a record may say `query IT` for any result.
//!
//! Errors display their SQLSTATE, e.g. `db error: table "t" does not exist (SQLSTATE 42P01)`,
//! so a record can assert the code (`statement error SQLSTATE 42P01`), the message
//! (`statement error does not exist`), or use sqllogictest's own `statement error (42P01)`.
//!
//! Each file runs with a fresh [`Runner`] and fresh connections; all files share one server, so
//! each file names its objects with a prefix of its own and drops them at the end.
//!
//! Environment:
//! - `SLT_FILTER=substring` runs only the files whose path contains `substring`;
//! - `SLT_PG_URL=<connection string>` runs the files against that server (e.g. a real Postgres,
//!   as an oracle for the expected output) instead of starting Sluice. The engine name is then
//!   `postgres`, so records can use `skipif postgres` / `onlyif sluice`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType, Runner, default_column_validator};
use tokio_postgres::{Client, SimpleQueryMessage, SimpleQueryRow};

use crate::harness::{self, Sluice};

/// How long one `.slt` file may run before it counts as hung.
const FILE_TIMEOUT: Duration = Duration::from_secs(120);

/// An error from the server, displayed with its SQLSTATE when it has one.
#[derive(Debug)]
pub struct SltError {
    /// The server's message, or the client error for non-server failures.
    message: String,
    /// The five-character SQLSTATE code, if the server sent one.
    sqlstate: Option<String>,
}

impl fmt::Display for SltError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.sqlstate {
            Some(code) => write!(f, "db error: {} (SQLSTATE {code})", self.message),
            None => write!(f, "{}", self.message),
        }
    }
}

impl std::error::Error for SltError {}

impl From<tokio_postgres::Error> for SltError {
    fn from(error: tokio_postgres::Error) -> Self {
        match error.as_db_error() {
            Some(db) => SltError {
                message: db.message().to_owned(),
                sqlstate: Some(db.code().code().to_owned()),
            },
            None => SltError { message: error.to_string(), sqlstate: None },
        }
    }
}

/// One sqllogictest connection: a tokio-postgres session using the simple query protocol.
pub struct SltDb {
    /// The session.
    client: Client,
    /// `sluice`, or `postgres` when running against `SLT_PG_URL`.
    engine: &'static str,
}

impl SltDb {
    /// Opens a session on `conn` (a libpq-style connection string).
    pub async fn connect(conn: &str, engine: &'static str) -> Result<Self, SltError> {
        let client = harness::connect(conn).await?;
        Ok(SltDb { client, engine })
    }
}

#[async_trait]
impl AsyncDB for SltDb {
    type Error = SltError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, SltError> {
        let mut columns = None;
        let mut rows = Vec::new();
        let mut count = 0;
        for message in self.client.simple_query(sql).await? {
            match message {
                SimpleQueryMessage::RowDescription(description) => {
                    columns = Some(description.len());
                }
                SimpleQueryMessage::Row(row) => {
                    columns.get_or_insert(row.len());
                    rows.push(row_to_strings(&row));
                }
                SimpleQueryMessage::CommandComplete(n) => count = n,
                _ => {}
            }
        }
        Ok(match columns {
            Some(n) => DBOutput::Rows { types: vec![DefaultColumnType::Any; n], rows },
            None => DBOutput::StatementComplete(count),
        })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        self.engine
    }

    async fn sleep(dur: Duration) {
        tokio::time::sleep(dur).await;
    }

    fn error_sql_state(error: &SltError) -> Option<String> {
        error.sqlstate.clone()
    }
}

/// Formats one row as sqllogictest expects: `NULL` for null, `(empty)` for the empty string.
fn row_to_strings(row: &SimpleQueryRow) -> Vec<String> {
    (0..row.len())
        .map(|i| match row.get(i) {
            None => "NULL".to_owned(),
            Some("") => "(empty)".to_owned(),
            Some(value) => value.to_owned(),
        })
        .collect()
}

/// Every `.slt` file under `dir`, recursively, sorted by path.
fn slt_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries =
            std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("read a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "slt") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Runs one file with a fresh runner; returns the failure, if any, as text.
async fn run_file(path: &Path, conn: &str, engine: &'static str) -> Result<(), String> {
    let conn = conn.to_owned();
    let mut runner = Runner::new(move || {
        let conn = conn.clone();
        async move { SltDb::connect(&conn, engine).await }
    });
    // Results come back untyped (`Any`), so never compare the declared column types.
    runner.with_column_validator(default_column_validator);
    let outcome = tokio::time::timeout(FILE_TIMEOUT, runner.run_file_async(path)).await;
    runner.shutdown_async().await;
    match outcome {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(error.display(false).to_string()),
        Err(_) => Err(format!("timed out after {FILE_TIMEOUT:?}")),
    }
}

#[tokio::test]
async fn sql_logic_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let filter = std::env::var("SLT_FILTER").unwrap_or_default();
    let files: Vec<PathBuf> = slt_files(&root.join("sql_tests"))
        .into_iter()
        .filter(|path| path.to_string_lossy().contains(&filter))
        .collect();
    assert!(!files.is_empty(), "no .slt files match SLT_FILTER={filter:?}");

    let (server, conn, engine) = match std::env::var("SLT_PG_URL") {
        Ok(url) => (None, url, "postgres"),
        Err(_) => {
            let server = Sluice::start().await.expect("start sluice");
            let conn = server.conn_string();
            (Some(server), conn, "sluice")
        }
    };

    let mut failures = Vec::new();
    for path in &files {
        let name = path.strip_prefix(root).unwrap_or(path).display().to_string();
        if let Err(error) = run_file(path, &conn, engine).await {
            failures.push(format!("=== {name}\n{error}"));
        }
    }

    if !failures.is_empty() {
        let log = server.as_ref().map(Sluice::log_tail).unwrap_or_default();
        panic!(
            "slt: {} of {} files failed\n\n{}\n\n{log}",
            failures.len(),
            files.len(),
            failures.join("\n\n")
        );
    }
    println!("slt: {} files passed", files.len());
}
