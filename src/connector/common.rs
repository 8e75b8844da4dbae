//! What both upstreams share: the description of an upstream table and the change rows their
//! readers produce. Nothing here knows Postgres or MySQL.

use crate::catalog::ColumnCatalog;
use crate::error::{Error, Result};

/// An upstream table: its columns (with Sluice types) and primary key.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamTable {
    /// Schema name.
    pub schema: String,
    /// Table name.
    pub name: String,
    /// Columns in upstream order.
    pub columns: Vec<ColumnCatalog>,
    /// Upstream type of each column, as the upstream prints it (Postgres's `format_type`,
    /// MySQL's `COLUMN_TYPE`).
    pub upstream_types: Vec<String>,
    /// Indices of the primary-key columns, in key order.
    pub pk: Vec<usize>,
}

impl UpstreamTable {
    /// Sets the primary key from its column names, in key order; a table without one cannot
    /// be followed.
    pub fn set_key(&mut self, names: &[String]) -> Result<()> {
        self.pk = names
            .iter()
            .map(|name| self.columns.iter().position(|c| &c.name == name))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                Error::Stream(format!("a key column of {} is not a column", self.name))
            })?;
        if self.pk.is_empty() {
            let (schema, table) = (&self.schema, &self.name);
            return Err(Error::InvalidStatement(format!(
                "upstream table {schema}.{table} has no primary key; CDC needs one: ALTER TABLE {schema}.{table} ADD PRIMARY KEY (..)"
            )));
        }
        Ok(())
    }
}

/// A change of one row, from a committed upstream transaction; or an upstream `TRUNCATE` of the
/// table, which deletes every row ([`RowChange::truncate`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RowChange {
    /// `schema.table` of the row (unquoted).
    pub table: String,
    /// True for deletes (the values then only need the key columns).
    pub delete: bool,
    /// The new row (or the old key, for a delete), each value as text; `None` is NULL.
    pub values: Vec<Option<String>>,
    /// Upstream columns an update left unchanged and did not send (TOASTed values): the stored
    /// row has them.
    pub unchanged: Vec<usize>,
    /// The new row of an update that also sent the old row (its key changed, or the table has
    /// `REPLICA IDENTITY FULL`): the old row is deleted first, so no stored row holds the
    /// `unchanged` columns; they are read from the upstream.
    pub replaces: bool,
    /// The end LSN of the transaction's commit record: every change of the transaction has it.
    pub position: u64,
    /// The table was truncated: every row goes (`delete` is set, and there are no values).
    pub truncate: bool,
    /// Not a change but the table's columns as the upstream describes them from here on
    /// (`values` holds their names): a Postgres `Relation` message, a MySQL table map of a
    /// new layout. The CDC backfill checks them against the columns it reads.
    pub relation: bool,
}

impl RowChange {
    /// An upstream `TRUNCATE` of `table` (`schema.table`); the commit gives its LSN.
    pub fn truncation(table: String) -> Self {
        Self { table, delete: true, truncate: true, ..Self::default() }
    }

    /// `table` was reshaped by DDL the stream names (`statement`) rather than describes: a
    /// relation whose first name is NULL, then the statement (see [`Self::relation`]).
    pub fn reshaped(table: String, statement: &str) -> Self {
        let values = vec![None, Some(statement.to_owned())];
        Self { table, values, relation: true, ..Self::default() }
    }

    /// The columns (by name) of `table` from here on in the stream (see [`Self::relation`]).
    pub fn relation(table: String, columns: Vec<String>) -> Self {
        Self {
            table,
            values: columns.into_iter().map(Some).collect(),
            relation: true,
            ..Self::default()
        }
    }
}

/// A snapshot split's range of the first key column, as upstream text: from `start` (inclusive;
/// `None`: the lowest key) to `end` (exclusive; `None`: past the highest key).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SplitRange {
    /// The first value of the range.
    pub start: Option<String>,
    /// The first value past the range.
    pub end: Option<String>,
}
