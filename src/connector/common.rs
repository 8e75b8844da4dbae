//! What both upstreams share: the description of an upstream table, the change rows their
//! readers produce, snapshot pages and their cursors, and the reading of source options.
//! Nothing here knows Postgres or MySQL.

use std::collections::BTreeMap;

use arrow::array::{Array, ArrayRef, AsArray};

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
    /// Each column's type as the upstream's stream names it (Postgres: type oid and
    /// modifier, as a `Relation` message carries them); empty where not known.
    pub type_ids: Vec<TypeId>,
    /// Columns dropped upstream that a CDC table still holds: reads select NULL for them.
    pub dropped: Vec<usize>,
}

/// A column's type as Postgres's catalog and its `Relation` messages name it: `(type oid,
/// type modifier)`.
pub type TypeId = (u32, i32);

impl UpstreamTable {
    /// Whether column `index` was dropped upstream (see [`Self::dropped`]).
    pub fn is_dropped(&self, index: usize) -> bool {
        self.dropped.contains(&index)
    }

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
    /// With `relation`: each column's type as the stream names it (Postgres); empty where the
    /// description carries names only.
    pub types: Vec<TypeId>,
    /// The id of the change's transaction where the upstream names one (a Postgres xid, 32
    /// bits as pgoutput sends it); 0 otherwise. A table read from one snapshot tells by it
    /// which changes that snapshot holds.
    pub xid: u32,
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

    /// `table`'s columns `names` were dropped by DDL the stream names (`statement`): a
    /// relation whose first name is NULL, then the statement and the names.
    pub fn columns_dropped(table: String, statement: &str, names: Vec<String>) -> Self {
        let mut values = vec![None, Some(statement.to_owned())];
        values.extend(names.into_iter().map(Some));
        Self { table, values, relation: true, ..Self::default() }
    }

    /// The columns (by name) of `table` from here on in the stream (see [`Self::relation`]),
    /// with their `types` where the stream names them.
    pub fn relation(table: String, columns: Vec<String>, types: Vec<TypeId>) -> Self {
        Self {
            table,
            values: columns.into_iter().map(Some).collect(),
            relation: true,
            types,
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

/// The `WITH (..)` options of a source of `connector`, checked against the ones it `known`s.
pub(crate) struct SourceOptions<'a> {
    options: &'a BTreeMap<String, String>,
    connector: &'static str,
}

impl<'a> SourceOptions<'a> {
    /// Refuses an option not in `known`, naming it.
    pub(crate) fn new(
        options: &'a BTreeMap<String, String>,
        connector: &'static str,
        known: &[&str],
    ) -> Result<Self> {
        if let Some(unknown) = options.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(Error::InvalidStatement(format!(
                "unknown {connector} option {unknown}; known options: {}",
                known.join(", ")
            )));
        }
        Ok(Self { options, connector })
    }

    /// The option's value, if given.
    pub(crate) fn get(&self, key: &str) -> Option<String> {
        self.options.get(key).cloned()
    }

    /// What to do when the source's place in the upstream's log is lost, by option `key`
    /// (`slot.lost`, `binlog.lost`): `'stop'` (the default, false) or `'resnapshot'` (true).
    pub(crate) fn resnapshot_when_lost(&self, key: &str) -> Result<bool> {
        match self.get(key).as_deref() {
            None | Some("stop") => Ok(false),
            Some("resnapshot") => Ok(true),
            Some(other) => Err(Error::InvalidStatement(format!(
                "{key} must be 'stop' or 'resnapshot', not '{other}'"
            ))),
        }
    }

    /// The option's value; an error names it when it is missing.
    pub(crate) fn required(&self, key: &str) -> Result<String> {
        self.get(key).ok_or_else(|| {
            Error::InvalidStatement(format!(
                "the {} source needs the option {key} = '..'",
                self.connector
            ))
        })
    }

    /// `port`, or `default`.
    pub(crate) fn port(&self, default: u16) -> Result<u16> {
        match self.get("port") {
            Some(p) => p
                .parse()
                .map_err(|_| Error::InvalidStatement(format!("port must be a number, not '{p}'"))),
            None => Ok(default),
        }
    }
}

/// Splits `first.second`, each part optionally quoted with `quote` (doubled inside a quoted
/// part); unquoted parts are lower-cased when `fold` (Postgres), kept as they are otherwise.
/// `None` unless there are exactly two non-empty parts.
pub(crate) fn split_two_parts(name: &str, quote: char, fold: bool) -> Option<(String, String)> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c == quote && quoted && chars.peek() == Some(&quote) => {
                current.push(quote);
                chars.next();
            }
            c if c == quote => quoted = !quoted,
            '.' if !quoted => parts.push(std::mem::take(&mut current)),
            c if quoted || !fold => current.push(c),
            c => current.push(c.to_ascii_lowercase()),
        }
    }
    parts.push(current);
    match parts.as_slice() {
        [first, second] if !first.is_empty() && !second.is_empty() => {
            Some((first.clone(), second.clone()))
        }
        _ => None,
    }
}

/// A snapshot page as the upstream sent it.
#[derive(Debug)]
pub struct SnapshotPage {
    /// One array per upstream column: text, or the column's own Arrow type.
    pub columns: Vec<ArrayRef>,
    /// The last row's key as the upstream prints it, every digit kept (the next page's
    /// cursor); `None` for an empty page.
    pub last_key: Option<Vec<Option<String>>>,
}

/// The first value of `column` as the upstream prints it, for the snapshot query's cursor:
/// `bytea` as `\x` and hex digits, anything else as Arrow prints it (which Postgres parses).
pub fn upstream_text(column: &ArrayRef) -> Result<Option<String>> {
    use std::fmt::Write;
    if column.is_null(0) {
        return Ok(None);
    }
    if let Some(bytes) = column.as_binary_opt::<i32>() {
        let mut text = String::from("\\x");
        for b in bytes.value(0) {
            write!(text, "{b:02x}").expect("writing to a String");
        }
        return Ok(Some(text));
    }
    if let Some(bc) = before_christ(column) {
        return Ok(Some(bc));
    }
    let text = arrow::compute::cast(column, &arrow::datatypes::DataType::Utf8)?;
    Ok(Some(text.as_string::<i32>().value(0).to_owned()))
}

/// A date or timestamp before year 1 the way Postgres writes it (`0044-03-15 BC`): Arrow
/// writes a negative year, which Postgres does not read.
fn before_christ(column: &ArrayRef) -> Option<String> {
    use arrow::datatypes::{Date32Type, TimestampMicrosecondType};
    use chrono::Datelike;
    let (date, time, zone) = if let Some(days) = column.as_primitive_opt::<Date32Type>() {
        (Date32Type::to_naive_date_opt(days.value(0))?, None, "")
    } else if let Some(micros) = column.as_primitive_opt::<TimestampMicrosecondType>() {
        let at = chrono::DateTime::from_timestamp_micros(micros.value(0))?.naive_utc();
        let zone = if micros.timezone().is_some() { "+00" } else { "" };
        (at.date(), Some(at.time()), zone)
    } else {
        return None;
    };
    if date.year() > 0 {
        return None;
    }
    let day = format!("{:04}-{:02}-{:02}", 1 - date.year(), date.month(), date.day());
    Some(match time {
        Some(time) => format!("{day} {}{zone} BC", time.format("%H:%M:%S%.f")),
        None => format!("{day} BC"),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_restored_cursor_prints_as_the_upstream_does() {
        let bytes: ArrayRef = Arc::new(arrow::array::BinaryArray::from(vec![&[0u8, 255][..]]));
        assert_eq!(upstream_text(&bytes).unwrap().as_deref(), Some("\\x00ff"));
        let int: ArrayRef = Arc::new(arrow::array::Int32Array::from(vec![Some(-7)]));
        assert_eq!(upstream_text(&int).unwrap().as_deref(), Some("-7"));
        let null: ArrayRef = Arc::new(arrow::array::Int32Array::from(vec![None]));
        assert_eq!(upstream_text(&null).unwrap(), None);
        let date: ArrayRef = Arc::new(arrow::array::Date32Array::from(vec![-719_528 - 365]));
        assert_eq!(upstream_text(&date).unwrap().as_deref(), Some("0002-01-01 BC"));
        let ad: ArrayRef = Arc::new(arrow::array::Date32Array::from(vec![-719_162]));
        assert_eq!(upstream_text(&ad).unwrap().as_deref(), Some("0001-01-01"));
        let micros = (-719_528i64 * 86_400 + 3_723) * 1_000_000 + 500_000;
        let ts = arrow::array::TimestampMicrosecondArray::from(vec![micros]);
        let plain: ArrayRef = Arc::new(ts.clone());
        assert_eq!(upstream_text(&plain).unwrap().as_deref(), Some("0001-01-01 01:02:03.500 BC"));
        let utc: ArrayRef = Arc::new(ts.with_timezone(crate::types::UTC));
        assert_eq!(upstream_text(&utc).unwrap().as_deref(), Some("0001-01-01 01:02:03.500+00 BC"));
    }
}
