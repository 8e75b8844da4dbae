//! Reading a MySQL / MariaDB table's snapshot: pages in primary-key order, single rows, split
//! points and row estimates.
//!
//! Snapshot pages are read in primary-key order, each inside `START TRANSACTION WITH
//! CONSISTENT SNAPSHOT`: MariaDB reports the binlog position that snapshot corresponds to
//! (`binlog_snapshot_file` / `binlog_snapshot_position`), which is the page's exact low offset;
//! elsewhere the end of the binlog read just before the snapshot starts is. String keys compare
//! and sort by their bytes, as Sluice's keys do.

use arrow::array::{StringArray, StringBuilder};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

use crate::connector::common::SplitRange;
use crate::connector::common::UpstreamTable;
use crate::connector::mysql::text::{column_text, map_type, protocol_text};
use crate::connector::mysql::{current_offset, quote_ident, quote_literal, upstream_error};
use crate::connector::offset::CdcOffset;
use crate::error::{Error, Result};
use crate::types::DataType;

/// The Sluice type of upstream column `index`, from its MySQL type (the description a table
/// is bound with; a running backfill knows the types only as text).
fn column_type(table: &UpstreamTable, index: usize) -> DataType {
    let ty = table.upstream_types[index].as_str();
    map_type(ty.split(['(', ' ']).next().unwrap_or(ty), ty)
}

/// Whether a text column's collation orders by bytes, as Sluice orders text keys (the
/// description records it: `varchar(10) collate utf8mb4_bin`).
fn byte_ordered(table: &UpstreamTable, index: usize) -> bool {
    let ty = &table.upstream_types[index];
    ["collate utf8mb4_bin", "collate utf8mb3_bin", "collate utf8_bin", "collate ascii_bin"]
        .iter()
        .any(|c| ty.ends_with(c))
}

/// A key column for comparisons and ordering: text compares by its bytes, as Sluice's keys do
/// (a case-insensitive collation would order `a` and `B` otherwise; such a key cannot use its
/// index for the order, so paging it costs a sort per page).
fn key_column(table: &UpstreamTable, index: usize) -> String {
    let column = format!("t.{}", quote_ident(&table.columns[index].name));
    match column_type(table, index) {
        DataType::Varchar if !byte_ordered(table, index) => format!("CAST({column} AS BINARY)"),
        _ => column,
    }
}

/// A key value (as text) for comparing against [`key_column`].
fn key_literal(table: &UpstreamTable, index: usize, value: &Option<String>) -> String {
    match value {
        None => "NULL".to_owned(),
        Some(v) => match column_type(table, index) {
            DataType::Varchar if !byte_ordered(table, index) => {
                format!("CAST({} AS BINARY)", quote_literal(v))
            }
            DataType::Bytea => format!("UNHEX({})", quote_literal(v.trim_start_matches("\\x"))),
            DataType::Timestamptz => quote_literal(v.trim_end_matches("+00")),
            _ => quote_literal(v),
        },
    }
}

/// `(keys) > (values)` as MariaDB's range optimizer takes it: `k1 > v1 OR (k1 = v1 AND k2 >
/// v2) OR ..` (it reads a row comparison by scanning the whole index, making paging
/// quadratic).
fn after_cursor(keys: &[String], values: &[String]) -> String {
    let terms: Vec<String> = (0..keys.len())
        .map(|k| {
            let mut parts: Vec<String> =
                (0..k).map(|j| format!("{} = {}", keys[j], values[j])).collect();
            parts.push(format!("{} > {}", keys[k], values[k]));
            format!("({})", parts.join(" AND "))
        })
        .collect();
    terms.join(" OR ")
}

/// One page of the snapshot, read in a consistent snapshot: rows after `cursor` (a key, as
/// text values) in key order, as one text column per upstream column, and the binlog position
/// the snapshot corresponds to.
pub async fn snapshot_page(
    conn: &mut Conn,
    table: &UpstreamTable,
    cursor: Option<&[Option<String>]>,
    range: &SplitRange,
    limit: usize,
) -> Result<(Vec<StringArray>, CdcOffset)> {
    let columns: Vec<String> = (0..table.columns.len()).map(|i| column_text(table, i)).collect();
    let key: Vec<String> = table.pk.iter().map(|&i| key_column(table, i)).collect();
    let mut sql = format!(
        "SELECT {} FROM {}.{} AS t",
        columns.join(", "),
        quote_ident(&table.schema),
        quote_ident(&table.name)
    );
    let mut conditions = Vec::new();
    if let Some(cursor) = cursor {
        let values: Vec<String> =
            table.pk.iter().zip(cursor).map(|(&i, v)| key_literal(table, i, v)).collect();
        conditions.push(format!("({})", after_cursor(&key, &values)));
    }
    let first = table.pk[0];
    if let Some(start) = &range.start {
        conditions.push(format!(
            "{} >= {}",
            key[0],
            key_literal(table, first, &Some(start.clone()))
        ));
    }
    if let Some(end) = &range.end {
        conditions.push(format!("{} < {}", key[0], key_literal(table, first, &Some(end.clone()))));
    }
    if !conditions.is_empty() {
        sql.push_str(&format!(" WHERE {}", conditions.join(" AND ")));
    }
    sql.push_str(&format!(" ORDER BY {} LIMIT {limit}", key.join(", ")));
    // The end of the binlog before the snapshot starts is a safe low offset anywhere (a change
    // between it and the snapshot is applied twice, harmlessly); MariaDB then tells the
    // snapshot's exact position.
    let before = current_offset(conn).await?;
    conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT").await.map_err(upstream_error)?;
    let read = async {
        let offset = snapshot_offset(conn).await?.unwrap_or(before);
        let rows: Vec<Row> = conn.query(&sql).await.map_err(upstream_error)?;
        Ok::<_, Error>((offset, rows))
    }
    .await;
    // The transaction ends whatever happened: its locks must not outlive the page.
    let ended = conn.query_drop("COMMIT").await.map_err(upstream_error);
    let (offset, rows) = read?;
    ended?;
    let mut builders: Vec<StringBuilder> = table
        .columns
        .iter()
        .map(|_| StringBuilder::with_capacity(rows.len(), rows.len() * 16))
        .collect();
    for row in rows {
        for (builder, value) in builders.iter_mut().zip(row.unwrap()) {
            builder.append_option(protocol_text(value));
        }
    }
    Ok((builders.iter_mut().map(StringBuilder::finish).collect(), offset))
}

/// The current row with `key` (text of the key columns), as text in upstream column order.
pub async fn fetch_row(
    conn: &mut Conn,
    table: &UpstreamTable,
    key: &[Option<String>],
) -> Result<Option<Vec<Option<String>>>> {
    let columns: Vec<String> = (0..table.columns.len()).map(|i| column_text(table, i)).collect();
    let key_columns: Vec<String> = table.pk.iter().map(|&i| key_column(table, i)).collect();
    let values: Vec<String> =
        table.pk.iter().zip(key).map(|(&i, v)| key_literal(table, i, v)).collect();
    let sql = format!(
        "SELECT {} FROM {}.{} AS t WHERE ({}) = ({})",
        columns.join(", "),
        quote_ident(&table.schema),
        quote_ident(&table.name),
        key_columns.join(", "),
        values.join(", ")
    );
    let row: Option<Row> = conn.query_first(&sql).await.map_err(upstream_error)?;
    Ok(row.map(|row| row.unwrap().into_iter().map(protocol_text).collect()))
}

/// The binlog position of the consistent snapshot the session's transaction reads, where the
/// server tells it (MariaDB).
async fn snapshot_offset(conn: &mut Conn) -> Result<Option<CdcOffset>> {
    let status: Vec<(String, String)> =
        conn.query("SHOW STATUS LIKE 'binlog_snapshot_%'").await.map_err(upstream_error)?;
    let get = |name: &str| status.iter().find(|(n, _)| n.eq_ignore_ascii_case(name));
    match (get("binlog_snapshot_file"), get("binlog_snapshot_position")) {
        (Some((_, file)), Some((_, pos))) if !file.is_empty() => {
            Ok(Some(CdcOffset::mysql(file, pos.parse().unwrap_or_default())?))
        }
        _ => Ok(None),
    }
}

/// Up to `splits - 1` values of the first key column cutting the table into `splits` ranges:
/// evenly between its lowest and highest value for an integer column (the index answers both
/// at once); none for other types, which are read as one split.
pub async fn split_points(
    conn: &mut Conn,
    table: &UpstreamTable,
    splits: usize,
) -> Result<Vec<String>> {
    let first = table.pk[0];
    if !matches!(column_type(table, first), DataType::Int16 | DataType::Int32 | DataType::Int64) {
        return Ok(Vec::new());
    }
    let column = quote_ident(&table.columns[first].name);
    let sql = format!(
        "SELECT CAST(MIN({column}) AS CHAR), CAST(MAX({column}) AS CHAR) FROM {}.{}",
        quote_ident(&table.schema),
        quote_ident(&table.name)
    );
    let bounds: Option<(Option<String>, Option<String>)> =
        conn.query_first(sql).await.map_err(upstream_error)?;
    let Some((Some(low), Some(high))) = bounds else { return Ok(Vec::new()) };
    let (Ok(low), Ok(high)) = (low.parse::<i128>(), high.parse::<i128>()) else {
        return Ok(Vec::new());
    };
    Ok(even_points(low, high, splits))
}

/// The values cutting `low..=high` into `splits` ranges of about equal width, without repeats.
pub fn even_points(low: i128, high: i128, splits: usize) -> Vec<String> {
    let width = high - low + 1;
    let mut points: Vec<i128> =
        (1..splits as i128).map(|i| low + width * i / splits as i128).collect();
    points.dedup();
    points.retain(|&p| p > low && p <= high);
    points.iter().map(i128::to_string).collect()
}

/// The rows of an upstream table as the server estimates them (`TABLE_ROWS`), or counted when
/// it has no estimate yet (a table never analyzed says 0).
pub async fn estimate_rows(conn: &mut Conn, database: &str, table: &str) -> Result<u64> {
    let estimate: Option<Option<u64>> = conn
        .exec_first(
            "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
            (database, table),
        )
        .await
        .map_err(upstream_error)?;
    match estimate.flatten() {
        Some(n) if n > 0 => Ok(n),
        _ => {
            let sql =
                format!("SELECT count(*) FROM {}.{}", quote_ident(database), quote_ident(table));
            let count: Option<u64> = conn.query_first(sql).await.map_err(upstream_error)?;
            Ok(count.unwrap_or_default())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::ColumnCatalog;

    #[test]
    fn even_points_cut_an_integer_range() {
        assert_eq!(even_points(1, 100, 4), ["26", "51", "76"]);
        assert_eq!(even_points(-10, 9, 2), ["0"]);
        // Fewer values than splits: no empty split, no repeated point.
        assert_eq!(even_points(5, 6, 4), ["6"]);
        assert!(even_points(7, 7, 4).is_empty());
    }

    #[test]
    fn keys_page_by_index_order() {
        let table = UpstreamTable {
            schema: "shop".into(),
            name: "t".into(),
            columns: ["id", "name", "code"]
                .map(|n| ColumnCatalog::new(n, DataType::Varchar))
                .to_vec(),
            upstream_types: vec![
                "bigint(20)".into(),
                "varchar(10) collate utf8mb4_general_ci".into(),
                "varchar(10) collate utf8mb4_bin".into(),
            ],
            pk: vec![0, 1, 2],
            type_ids: Vec::new(),
            dropped: Vec::new(),
        };
        // Numbers by value (not as text, whatever the backfill's own column types say).
        assert_eq!(key_column(&table, 0), "t.`id`");
        assert_eq!(key_column(&table, 1), "CAST(t.`name` AS BINARY)");
        assert_eq!(key_column(&table, 2), "t.`code`");
        let keys: Vec<String> = (0..3).map(|i| key_column(&table, i)).collect();
        let values: Vec<String> = ["1", "a", "b"]
            .iter()
            .enumerate()
            .map(|(i, v)| key_literal(&table, i, &Some((*v).to_owned())))
            .collect();
        assert_eq!(
            after_cursor(&keys, &values),
            "(t.`id` > '1') OR (t.`id` = '1' AND CAST(t.`name` AS BINARY) > CAST('a' AS BINARY)) \
             OR (t.`id` = '1' AND CAST(t.`name` AS BINARY) = CAST('a' AS BINARY) AND t.`code` > 'b')"
        );
    }
}
