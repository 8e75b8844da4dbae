//! The crate error type.
//!
//! Every layer reports failures through [`Error`]. Variants that describe a user mistake carry a
//! message the user can act on; the frontend maps each variant to a Postgres SQLSTATE in exactly
//! one place (`frontend::sqlstate`).

use thiserror::Error;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, classified by who has to act on it.
#[derive(Debug, Error)]
pub enum Error {
    /// The statement text could not be parsed.
    #[error("syntax error: {0}")]
    Parse(String),
    /// A referenced relation does not exist.
    #[error("{kind} \"{name}\" does not exist")]
    UnknownRelation {
        /// "table", "materialized view", "source", ...
        kind: &'static str,
        /// The name as the user wrote it.
        name: String,
    },
    /// A referenced column does not exist.
    #[error("column \"{0}\" does not exist")]
    UnknownColumn(String),
    /// A relation with this name already exists.
    #[error("relation \"{0}\" already exists")]
    DuplicateRelation(String),
    /// A row with this primary key already exists.
    #[error("duplicate key value violates unique constraint \"{table}_pkey\"")]
    DuplicateKey {
        /// The table written to.
        table: String,
        /// The offending key, rendered for the user.
        key: String,
    },
    /// A NULL written to a column that must not be NULL (a primary-key column).
    #[error("null value in column \"{0}\" violates not-null constraint")]
    NotNull(String),
    /// A value does not fit the column it is written to.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A type mismatch found while binding the statement.
    #[error("type mismatch: {0}")]
    TypeMismatch(String),
    /// `SHOW` of a variable that does not exist.
    #[error("unrecognized configuration parameter \"{0}\"")]
    UnknownSetting(String),
    /// `FETCH` or `CLOSE` of a cursor the session has not declared.
    #[error("cursor \"{0}\" does not exist")]
    UnknownCursor(String),
    /// `DECLARE` of a cursor the session has already.
    #[error("cursor \"{0}\" already exists")]
    DuplicateCursor(String),
    /// The statement names a relation of another kind (DROP TABLE on a view, ...).
    #[error("{0}")]
    WrongObjectType(String),
    /// Other objects depend on the one being dropped.
    #[error("{0}")]
    DependentObjects(String),
    /// A valid statement that Sluice does not support (yet).
    #[error("not supported: {0}")]
    Unsupported(String),
    /// A statement that is well-formed but wrong in this context (for example a bad option).
    #[error("{0}")]
    InvalidStatement(String),
    /// An error raised by DataFusion while planning or running a query.
    #[error(transparent)]
    DataFusion(#[from] datafusion::error::DataFusionError),
    /// An error raised by Arrow while building or converting batches.
    #[error(transparent)]
    Arrow(#[from] arrow::error::ArrowError),
    /// The upstream system of a source failed or refused; `code` is the SQLSTATE to report.
    #[error("{message}")]
    Upstream {
        /// The SQLSTATE.
        code: &'static str,
        /// What happened and what to do.
        message: String,
    },
    /// A setting's value is out of its range.
    #[error("{0}")]
    InvalidParameter(String),
    /// The object is not in a state that allows the statement (a view still being created).
    #[error("{0}")]
    ObjectState(String),
    /// The statement was cancelled.
    #[error("canceling statement: {0}")]
    Canceled(String),
    /// The storage engine failed.
    #[error("storage error: {0}")]
    Storage(String),
    /// The streaming runtime is shutting down or an actor failed.
    #[error("stream error: {0}")]
    Stream(String),
    /// A value beyond what its type can hold.
    #[error("{0}")]
    OutOfRange(String),
    /// Data of a `COPY .. FROM STDIN (FORMAT binary)` that is not in that format.
    #[error("{0}")]
    BadCopyData(String),
    /// A string longer than its column's `varchar(n)` allows.
    #[error("{0}")]
    StringTooLong(String),
    /// The statement exceeds a limit of the implementation (expression nesting).
    #[error("{0}")]
    ProgramLimit(String),
    /// A recovery of the streaming jobs discarded the statement's uncommitted changes.
    #[error("the statement's changes were not committed: {0}; they were not applied, run it again")]
    Recovered(String),
    /// The server is shutting down.
    #[error("the server is shutting down")]
    Shutdown,
}

impl From<rocksdb::Error> for Error {
    fn from(e: rocksdb::Error) -> Self {
        Error::Storage(e.to_string())
    }
}

impl From<datafusion::sql::sqlparser::parser::ParserError> for Error {
    fn from(e: datafusion::sql::sqlparser::parser::ParserError) -> Self {
        Error::Parse(e.to_string())
    }
}

/// Shorthand for a [`Error::Unsupported`] with a formatted message.
#[macro_export]
macro_rules! unsupported {
    ($($arg:tt)*) => { $crate::error::Error::Unsupported(format!($($arg)*)) };
}

/// Shorthand for a [`Error::InvalidStatement`] with a formatted message.
#[macro_export]
macro_rules! invalid {
    ($($arg:tt)*) => { $crate::error::Error::InvalidStatement(format!($($arg)*)) };
}
