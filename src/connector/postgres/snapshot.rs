//! Reading a Postgres upstream: table descriptions, snapshot pages, and the change stream.
//!
//! Snapshot pages are queries in key order (`WHERE (pk) > (cursor) ORDER BY pk LIMIT n`) read
//! as binary `COPY` (see [`copy`](super::copy)). Changes are streamed from the logical replication slot
//! by [`replication`](super::replication), as [`RowChange`](crate::connector::common::RowChange)s.

use arrow::array::Array;
use futures::TryStreamExt;

use tokio_postgres::{Client, SimpleQueryMessage};

use crate::catalog::ColumnCatalog;
use crate::connector::common::SplitRange;
use crate::connector::common::UpstreamTable;
use crate::connector::common::{SnapshotPage, upstream_text};
use crate::connector::postgres::copy::{self, Decoded, PageDecoder, Wire};
use crate::connector::postgres::{quote_ident, upstream_error};
use crate::error::{Error, Result};
use crate::types::DataType;

/// What Postgres needs of an upstream table.
impl UpstreamTable {
    /// How a snapshot page carries each column (typed binary, or text).
    pub fn wires(&self) -> Vec<Wire> {
        self.columns
            .iter()
            .zip(&self.upstream_types)
            .map(|(c, ty)| Wire::of(ty, c.data_type))
            .collect()
    }

    /// `"schema"."name"`.
    pub fn qualified(&self) -> String {
        format!("{}.{}", quote_ident(&self.schema), quote_ident(&self.name))
    }
}

/// Splits `schema.table` (each part optionally double-quoted) into its parts.
pub fn split_qualified(name: &str) -> Result<(String, String)> {
    crate::connector::common::split_two_parts(name, '"', true).ok_or_else(|| {
        Error::InvalidStatement(format!(
            "the upstream table must be schema-qualified, like 'public.{name}'; got '{name}'"
        ))
    })
}

/// Reads the columns and primary key of an upstream table.
pub async fn describe_table(client: &Client, schema: &str, table: &str) -> Result<UpstreamTable> {
    let columns = client
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), t.typtype::text, t.typcategory::text, \
             a.atttypid, a.atttypmod \
             FROM pg_attribute a JOIN pg_class c ON a.attrelid = c.oid \
             JOIN pg_namespace n ON c.relnamespace = n.oid JOIN pg_type t ON a.atttypid = t.oid \
             WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped \
             ORDER BY a.attnum",
            &[&schema, &table],
        )
        .await
        .map_err(upstream_error)?;
    if columns.is_empty() {
        return Err(Error::UnknownRelation {
            kind: "upstream table",
            name: format!("{schema}.{table}"),
        });
    }
    let pk_names: Vec<String> = client
        .query(
            "SELECT a.attname::text FROM pg_index i \
             JOIN pg_class c ON i.indrelid = c.oid JOIN pg_namespace n ON c.relnamespace = n.oid \
             JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true \
             JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum \
             WHERE n.nspname = $1 AND c.relname = $2 AND i.indisprimary ORDER BY k.ord",
            &[&schema, &table],
        )
        .await
        .map_err(upstream_error)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut out = UpstreamTable {
        schema: schema.to_owned(),
        name: table.to_owned(),
        columns: Vec::new(),
        upstream_types: Vec::new(),
        pk: Vec::new(),
        type_ids: Vec::new(),
        dropped: Vec::new(),
    };
    for row in &columns {
        let (name, ty, typtype, category): (String, String, String, String) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        out.columns.push(ColumnCatalog::new(name, map_type(&ty, &typtype, &category)));
        out.upstream_types.push(ty);
        out.type_ids.push((row.get(4), row.get(5)));
    }
    out.set_key(&pk_names)?;
    // An array cannot be a key in Sluice: an array key column is held as its text.
    for &k in &out.pk {
        if let DataType::Array(_) = out.columns[k].data_type {
            out.columns[k].data_type = DataType::Varchar;
        }
    }
    Ok(out)
}

/// `oid:attnum=name,attnum=name,..` of `schema.table` (its live columns' numbers and names,
/// the names in hex, in order), `None` when there is no such table. A table dropped and created
/// again has another oid; a column dropped and added again under its name has another number.
pub async fn table_identity(client: &Client, schema: &str, table: &str) -> Result<Option<String>> {
    let rows = client
        .query(
            "SELECT c.oid::text || ':' || coalesce((SELECT string_agg(a.attnum::text || '=' || \
             encode(convert_to(a.attname::text, 'UTF8'), 'hex'), ',' \
             ORDER BY a.attnum) FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 \
             AND NOT a.attisdropped), '') \
             FROM pg_class c JOIN pg_namespace n ON c.relnamespace = n.oid \
             WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')",
            &[&schema, &table],
        )
        .await
        .map_err(upstream_error)?;
    Ok(rows.first().map(|r| r.get(0)))
}

/// The Sluice type that holds values of an upstream type: enums and types Sluice has not as
/// text, arrays of the element types below as arrays (other arrays as text).
fn map_type(ty: &str, typtype: &str, category: &str) -> DataType {
    if category == "A" {
        return array_type(ty).unwrap_or(DataType::Varchar);
    }
    if typtype == "e" {
        return DataType::Varchar;
    }
    scalar_type(ty)
}

/// Sluice's array type for an upstream array type (`integer[]`, `numeric(10,2)[]`) whose
/// elements are numbers, text, booleans or dates: each value is read from its text. The
/// upstream type does not fix a number of dimensions; a value of more than one stops the
/// table naming it (see `typed_batch`). Arrays of other element types, whose text Sluice would
/// print otherwise, are held as their text; so are arrays of unconstrained numerics, whose
/// elements each have their own display scale (`{1.50,3}`), which only their text keeps.
fn array_type(ty: &str) -> Option<DataType> {
    let element = scalar_type(ty.strip_suffix("[]")?);
    let held = match element {
        DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::Float32
        | DataType::Float64
        | DataType::Boolean
        | DataType::Date => true,
        DataType::Decimal { precision, scale } => {
            !crate::types::numeric::is_unconstrained(precision, scale)
        }
        DataType::Varchar => is_text(ty.trim_end_matches("[]")),
        _ => false,
    };
    held.then(|| crate::types::Element::new(element).ok().map(DataType::Array)).flatten()
}

/// Whether an upstream type is `text`, `varchar(n)` or `char(n)`.
fn is_text(ty: &str) -> bool {
    let base = super::base_type(ty);
    matches!(base.as_str(), "text" | "character varying" | "character")
}

/// The Sluice type of an upstream type that is not an array nor an enum.
fn scalar_type(ty: &str) -> DataType {
    let base = super::base_type(ty);
    let base = base.as_str();
    match base {
        "smallint" => DataType::Int16,
        "integer" => DataType::Int32,
        "bigint" => DataType::Int64,
        "real" => DataType::Float32,
        "double precision" => DataType::Float64,
        "boolean" => DataType::Boolean,
        "numeric" => numeric(ty),
        "date" => DataType::Date,
        "timestamp without time zone" => DataType::Timestamp,
        "timestamp with time zone" => DataType::Timestamptz,
        "json" | "jsonb" => DataType::Jsonb,
        "bytea" => DataType::Bytea,
        _ => DataType::Varchar,
    }
}

/// Sluice's type for an upstream `numeric` column: its own precision and scale when Sluice's
/// numerics hold them (76 digits), else unconstrained (whose values past 76 digits stop the
/// table with an error naming them).
fn numeric(ty: &str) -> DataType {
    use crate::types::numeric::MAX_PRECISION;
    let inner = ty.trim_start_matches("numeric").trim_matches(|c| c == '(' || c == ')');
    let mut parts = inner.split(',').map(|p| p.trim().parse::<u8>());
    match (parts.next(), parts.next()) {
        (Some(Ok(p)), Some(Ok(s))) if p <= MAX_PRECISION && s <= p => {
            DataType::Decimal { precision: p, scale: s as i8 }
        }
        (Some(Ok(p)), None) if p <= MAX_PRECISION => DataType::Decimal { precision: p, scale: 0 },
        _ => {
            let (precision, scale) = crate::types::DEFAULT_NUMERIC;
            DataType::Decimal { precision, scale }
        }
    }
}

/// The row estimate of an upstream table: `reltuples`, or `count(*)` when the table was
/// never analyzed.
pub async fn estimate_rows(client: &Client, schema: &str, table: &str) -> Result<u64> {
    let qualified = format!("{}.{}", quote_ident(schema), quote_ident(table));
    let row = client
        .query_one(
            "SELECT reltuples::float8 FROM pg_class WHERE oid = $1::text::regclass",
            &[&qualified],
        )
        .await
        .map_err(upstream_error)?;
    let estimate: f64 = row.get(0);
    if estimate >= 0.0 {
        return Ok(estimate as u64);
    }
    let row = client
        .query_one(&format!("SELECT count(*) FROM {qualified}"), &[])
        .await
        .map_err(upstream_error)?;
    Ok(row.get::<_, i64>(0) as u64)
}

/// The upstream's current WAL position.
pub async fn current_lsn(client: &Client) -> Result<u64> {
    let rows =
        client.simple_query("SELECT pg_current_wal_lsn()::text").await.map_err(upstream_error)?;
    let text = first_value(&rows)
        .ok_or_else(|| Error::Upstream { code: "XX000", message: "no WAL position".into() })?;
    parse_lsn(&text)
}

/// A position every transaction committed so far ends at or before, which no later WAL can
/// take: the WAL insert position (the end of the last WAL record), if it is flushed already.
///
/// The flush position itself will not do: the WAL writer flushes whole pages, so it may lie
/// inside a record still being written, and after an upstream crash the WAL goes on from the
/// end of the last complete record, giving new transactions positions below it.
pub async fn durable_wal_end(client: &Client) -> Result<Option<u64>> {
    let rows = client
        .simple_query("SELECT pg_current_wal_insert_lsn()::text, pg_current_wal_flush_lsn()::text")
        .await
        .map_err(upstream_error)?;
    let row = rows.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(r) => Some((r.get(0), r.get(1))),
        _ => None,
    });
    let Some((Some(insert), Some(flush))) = row else {
        return Err(Error::Upstream { code: "XX000", message: "no WAL position".into() });
    };
    let (insert, flush) = (parse_lsn(insert)?, parse_lsn(flush)?);
    Ok((flush >= insert).then_some(insert))
}

fn parse_lsn(text: &str) -> Result<u64> {
    pg_walstream::parse_lsn(text)
        .map_err(|e| Error::Upstream { code: "XX000", message: format!("bad LSN {text}: {e}") })
}

fn first_value(messages: &[SimpleQueryMessage]) -> Option<String> {
    messages.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
        _ => None,
    })
}

/// One page of the snapshot: up to `limit` rows after `cursor` (a key, as text values) in
/// `range`, in key order, as one array per upstream column (see [`copy`](super::copy) for their types),
/// and the last row's key as text.
pub async fn snapshot_page(
    client: &Client,
    table: &UpstreamTable,
    cursor: Option<&[Option<String>]>,
    range: &SplitRange,
    limit: usize,
) -> Result<SnapshotPage> {
    let wires = table.wires();
    // Columns are qualified: an unqualified ORDER BY name would sort by an output column.
    let columns: Vec<String> = table
        .columns
        .iter()
        .zip(&wires)
        .zip(&table.upstream_types)
        .enumerate()
        .map(|(i, ((c, wire), ty))| {
            let column = match table.is_dropped(i) {
                true => "NULL".to_owned(),
                false => format!("t.{}", quote_ident(&c.name)),
            };
            match (wire.needs_text_cast(ty), wire.cast_target()) {
                (true, _) => as_printed(&column, ty),
                (false, Some(target)) => format!("{column}::{target}"),
                (false, None) => column,
            }
        })
        .collect();
    let key: Vec<String> = table.pk.iter().map(|&i| key_column(table, i)).collect();
    let mut sql = format!("COPY (SELECT {} FROM {} AS t", columns.join(", "), table.qualified());
    let mut conditions = Vec::new();
    if let Some(cursor) = cursor {
        let values = key_literals(table, cursor);
        conditions.push(format!("({}) > ({})", key.join(", "), values.join(", ")));
    }
    let first = table.pk[0];
    if let Some(start) = &range.start {
        conditions.push(format!("{} >= {}", key[0], key_literal(table, first, start)));
    }
    if let Some(end) = &range.end {
        conditions.push(format!("{} < {}", key[0], key_literal(table, first, end)));
    }
    if !conditions.is_empty() {
        sql.push_str(&format!(" WHERE {}", conditions.join(" AND ")));
    }
    sql.push_str(&format!(" ORDER BY {} LIMIT {limit}) TO STDOUT (FORMAT binary)", key.join(", ")));
    let stream = client.copy_out(sql.as_str()).await.map_err(upstream_error)?;
    let mut stream = std::pin::pin!(stream);
    // Decoded as the rows arrive: the page is ready as soon as its last row is.
    let mut decoder = PageDecoder::new(&wires, limit)?;
    while let Some(bytes) = stream.try_next().await.map_err(upstream_error)? {
        decoder.feed(&bytes)?;
    }
    let Decoded { columns, last_row } = decoder.finish()?;
    if last_row.is_empty() {
        return Ok(SnapshotPage { columns, last_key: None });
    }
    let n = columns[0].len();
    // The cursor keeps every digit a numeric key was sent with: the column may round it.
    let key = table.pk.iter().map(|&i| match (&last_row[i], wires[i]) {
        (None, _) => Ok(None),
        (Some(raw), Wire::Numeric { .. }) => copy::numeric_text(raw).map(Some),
        (Some(_), _) => upstream_text(&columns[i].slice(n - 1, 1)),
    });
    let last_key = Some(key.collect::<Result<_>>()?);
    Ok(SnapshotPage { columns, last_key })
}

/// A key's text values as typed literals, in key order.
fn key_literals(table: &UpstreamTable, key: &[Option<String>]) -> Vec<String> {
    table
        .pk
        .iter()
        .zip(key)
        .map(|(&i, v)| match v {
            Some(v) => key_literal(table, i, v),
            None => "NULL".to_owned(),
        })
        .collect()
}

/// The text value `v` of upstream column `column` as a typed literal.
fn key_literal(table: &UpstreamTable, column: usize, v: &str) -> String {
    format!("'{}'::{}", v.replace('\'', "''"), table.upstream_types[column])
}

/// Up to `splits - 1` values of the first key column cutting the table into `splits` ranges of
/// about as many rows, from a sample of its pages (`TABLESAMPLE SYSTEM`) sized by the row
/// estimate; fewer (none) when the sample is too small to tell.
pub async fn split_points(
    client: &Client,
    table: &UpstreamTable,
    splits: usize,
    estimate: u64,
) -> Result<Vec<String>> {
    // About 2000 sampled keys per split (some tens of pages each: `SYSTEM` samples whole
    // pages, so fewer would come from a handful of neighbouring pages), at most 200 k in all.
    let wanted = (splits as f64 * 2000.0).min(200_000.0);
    let percent = (100.0 * wanted / estimate.max(1) as f64).clamp(0.0001, 100.0);
    let first = table.pk[0];
    // Ordered by the key itself: its text (the output column) would order 10 before 9.
    let sql = format!(
        "SELECT s.k::text AS point FROM (SELECT {key} AS k FROM {table} AS t \
         TABLESAMPLE SYSTEM ({percent}) REPEATABLE (7)) AS s WHERE s.k IS NOT NULL ORDER BY s.k",
        key = key_column(table, first),
        table = table.qualified(),
    );
    let messages = client.simple_query(&sql).await.map_err(upstream_error)?;
    let sample: Vec<String> = messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
            _ => None,
        })
        .collect();
    Ok(quantiles(&sample, splits))
}

/// The values cutting sorted `sample` into `splits` parts of about equal size, without repeats.
pub fn quantiles(sample: &[String], splits: usize) -> Vec<String> {
    let mut points: Vec<String> = Vec::new();
    for i in 1..splits {
        let at = i * sample.len() / splits;
        if at == 0 || at >= sample.len() {
            continue;
        }
        if points.last() != Some(&sample[at]) {
            points.push(sample[at].clone());
        }
    }
    points
}

/// The current row with `key` (text values of the key columns), as text values in upstream
/// column order; `None` if the upstream has no such row.
pub async fn fetch_row(
    client: &Client,
    table: &UpstreamTable,
    key: &[Option<String>],
) -> Result<Option<Vec<Option<String>>>> {
    let columns: Vec<String> = table
        .columns
        .iter()
        .zip(&table.upstream_types)
        .enumerate()
        .map(|(i, (c, ty))| match table.is_dropped(i) {
            true => "NULL::text".to_owned(),
            false => as_printed(&format!("t.{}", quote_ident(&c.name)), ty),
        })
        .collect();
    let key_columns: Vec<String> = table.pk.iter().map(|&i| key_column(table, i)).collect();
    let sql = format!(
        "SELECT {} FROM {} AS t WHERE ({}) = ({})",
        columns.join(", "),
        table.qualified(),
        key_columns.join(", "),
        key_literals(table, key).join(", ")
    );
    let messages = client.simple_query(&sql).await.map_err(upstream_error)?;
    Ok(messages.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(row) => {
            Some((0..table.columns.len()).map(|i| row.get(i).map(str::to_owned)).collect())
        }
        _ => None,
    }))
}

/// `column` as text exactly as the type's output prints it, which is what the change stream
/// sends. `::text` is that for most types, but not for `inet` and `cidr`, whose cast to text
/// always adds the mask length (`::1/128` where the output is `::1`).
fn as_printed(column: &str, upstream_type: &str) -> String {
    match upstream_type {
        "inet" | "cidr" => {
            format!("CASE WHEN {column} IS NULL THEN NULL ELSE format('%s', {column}) END")
        }
        _ => format!("{column}::text"),
    }
}

/// A key column for comparisons and ordering: text compares bytewise, as Sluice's keys do.
fn key_column(table: &UpstreamTable, index: usize) -> String {
    let column = format!("t.{}", quote_ident(&table.columns[index].name));
    let ty = &table.upstream_types[index];
    if ty == "text" || ty.starts_with("character") {
        format!("{column} COLLATE \"C\"")
    } else {
        column
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_cut_a_sorted_sample_evenly_without_repeats() {
        let sample: Vec<String> = (1..=12).map(|i| i.to_string()).collect();
        assert_eq!(quantiles(&sample, 4), ["4", "7", "10"]);
        let repeats: Vec<String> = ["a", "a", "a", "a", "b", "c"].map(String::from).to_vec();
        assert_eq!(quantiles(&repeats, 3), ["a", "b"]);
        assert!(quantiles(&[], 4).is_empty());
        assert!(quantiles(&sample, 1).is_empty());
    }

    #[test]
    fn qualified_names_split_with_quotes() {
        assert_eq!(split_qualified("public.person").unwrap(), ("public".into(), "person".into()));
        assert_eq!(
            split_qualified("public.\"Orders\"").unwrap(),
            ("public".into(), "Orders".into())
        );
        assert_eq!(split_qualified("\"my.schema\".t").unwrap(), ("my.schema".into(), "t".into()));
        assert!(split_qualified("person").is_err());
    }

    #[test]
    fn upstream_types_map_to_sluice_types() {
        assert_eq!(map_type("timestamp(3) without time zone", "b", "D"), DataType::Timestamp);
        assert_eq!(map_type("timestamp(6) with time zone", "b", "D"), DataType::Timestamptz);
        assert_eq!(
            map_type("numeric(10,2)", "b", "N"),
            DataType::Decimal { precision: 10, scale: 2 }
        );
        let array = |element| DataType::Array(crate::types::Element::new(element).unwrap());
        assert_eq!(map_type("integer[]", "b", "A"), array(DataType::Int32));
        assert_eq!(
            map_type("numeric(10,2)[]", "b", "A"),
            array(DataType::Decimal { precision: 10, scale: 2 })
        );
        assert_eq!(map_type("character varying(5)[]", "b", "A"), array(DataType::Varchar));
        assert_eq!(map_type("boolean[]", "b", "A"), array(DataType::Boolean));
        // Arrays of types held as text (uuid, an enum) or printed otherwise (timestamps,
        // jsonb) are held as their text.
        assert_eq!(map_type("uuid[]", "b", "A"), DataType::Varchar);
        assert_eq!(map_type("mood[]", "b", "A"), DataType::Varchar);
        assert_eq!(map_type("timestamp with time zone[]", "b", "A"), DataType::Varchar);
        assert_eq!(map_type("jsonb[]", "b", "A"), DataType::Varchar);
        assert_eq!(map_type("numeric[]", "b", "A"), DataType::Varchar);
        assert_eq!(map_type("timestamp with time zone", "b", "D"), DataType::Timestamptz);
        assert_eq!(map_type("uuid", "b", "U"), DataType::Varchar);
    }
}
