//! The progress state tables of the backfills: their columns, and their rows as typed structs,
//! in one place.
//!
//! Both tables are internal tables a user can `SELECT` (as in RisingWave):
//! - a view's stream scan: `vnode | <upstream pk> | backfill_finished | row_count`, one row per
//!   vnode ([`VnodeProgress`]), the pk being the last key read in that vnode (NULL: none yet);
//! - a CDC table: `split_id | split_start | split_end | <table pk> | backfill_finished |
//!   row_count | cdc_offset`, one row per split of the upstream table ([`CdcProgress`]): the
//!   split's range of the first key column (as upstream text, start inclusive, end exclusive,
//!   NULL: unbounded), the pk being the split's snapshot cursor and `cdc_offset` the JSON of a
//!   [`CdcOffset`].
//!
//! The backfills write and read their rows only through [`VnodeProgress`] and [`CdcProgress`],
//! which find the columns by the names below (the key columns are those between the first
//! column, or [`SPLIT_END`], and [`FINISHED`]); [`persisted_progress`] reads either kind for the progress views.

use std::ops::Range;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int32Array, Int64Array, RecordBatch, StringArray,
    new_empty_array,
};
use arrow::datatypes::{Int64Type, Schema, SchemaRef};
use datafusion::scalar::ScalarValue;

use crate::catalog::{ColumnCatalog, TableCatalog, VirtualNode};
use crate::connector::common::SplitRange;
use crate::connector::offset::CdcOffset;
use crate::error::{Error, Result};
use crate::storage::row_codec::RowDecoder;
use crate::storage::state_table::StateTable;
use crate::storage::store::Store;
use crate::stream::cast_columns;
use crate::types::DataType;

/// The upstream table (`schema.table`) a CDC backfill's row is about.
pub const SPLIT_ID: &str = "split_id";
/// Where a CDC split's range starts: the first key column's value (inclusive), as upstream text.
pub const SPLIT_START: &str = "split_start";
/// Where a CDC split's range ends: the first key column's value (exclusive), as upstream text.
pub const SPLIT_END: &str = "split_end";
/// Whether the unit (vnode or split) has read all of its snapshot.
pub const FINISHED: &str = "backfill_finished";
/// Snapshot rows the unit has read.
pub const ROW_COUNT: &str = "row_count";
/// The upstream position of a CDC backfill's last page.
pub const CDC_OFFSET: &str = "cdc_offset";

fn column(name: &str, data_type: DataType) -> ColumnCatalog {
    ColumnCatalog::new(name, data_type)
}

/// The columns of a stream scan's progress table, for an upstream keyed by `pk`.
pub fn arrangement_columns(pk: impl IntoIterator<Item = ColumnCatalog>) -> Vec<ColumnCatalog> {
    let mut columns = vec![column("vnode", DataType::Int32)];
    columns.extend(pk.into_iter().map(|c| ColumnCatalog { hidden: false, ..c }));
    columns.extend([column(FINISHED, DataType::Boolean), column(ROW_COUNT, DataType::Int64)]);
    columns
}

/// The columns of a CDC table's progress table, for a table keyed by `pk`.
pub fn cdc_columns(pk: impl IntoIterator<Item = ColumnCatalog>) -> Vec<ColumnCatalog> {
    let mut columns = vec![
        column(SPLIT_ID, DataType::Varchar),
        column(SPLIT_START, DataType::Varchar),
        column(SPLIT_END, DataType::Varchar),
    ];
    columns.extend(pk.into_iter().map(|c| ColumnCatalog { hidden: false, ..c }));
    columns.extend([
        column(FINISHED, DataType::Boolean),
        column(ROW_COUNT, DataType::Int64),
        column(CDC_OFFSET, DataType::Jsonb),
    ]);
    columns
}

/// One row of a stream scan's progress table: where the backfill of one vnode stands (a vnode
/// without a row has not started).
#[derive(Debug, Clone, PartialEq)]
pub struct VnodeProgress {
    /// The vnode.
    pub vnode: VirtualNode,
    /// The upstream primary key of the last row read, one value per key column (which may be
    /// NULL: a view's key may be); `None` once the vnode is finished (stored as NULLs).
    pub cursor: Option<Vec<ScalarValue>>,
    /// Whether every row of the vnode is read.
    pub finished: bool,
    /// Rows read.
    pub rows: u64,
}

impl VnodeProgress {
    /// `rows` as a batch of the progress table of `schema` (see [`arrangement_columns`]).
    pub fn encode(rows: &[Self], schema: &SchemaRef) -> Result<RecordBatch> {
        let vnodes = rows.iter().map(|p| i32::from(p.vnode.0));
        let mut columns: Vec<ArrayRef> = vec![Arc::new(Int32Array::from_iter_values(vnodes))];
        let cursors: Vec<_> = rows.iter().map(|p| p.cursor.as_deref()).collect();
        columns.extend(encode_cursors(&cursors, schema)?);
        columns.extend(encode_counts(rows.iter().map(|p| (p.finished, p.rows))));
        Ok(RecordBatch::try_new(schema.clone(), cast_columns(columns, schema)?)?)
    }

    /// Row `row` of `batch`, rows of a stream scan's progress table. A vnode not finished has a
    /// cursor, as stored.
    pub fn decode(batch: &RecordBatch, row: usize) -> Result<Self> {
        let ScalarValue::Int32(Some(vnode)) = ScalarValue::try_from_array(batch.column(0), row)?
        else {
            return Err(Error::Storage("backfill progress row without a vnode".into()));
        };
        let (finished, rows) = decode_counts(batch, row)?;
        let cursor = match finished {
            true => None,
            false => Some(decode_cursor(batch, row)?),
        };
        Ok(Self { vnode: VirtualNode(vnode as u16), cursor, finished, rows })
    }
}

/// The row of a CDC table's progress table: where the snapshot of its upstream table stands
/// (no row: not started).
#[derive(Debug, Clone, PartialEq)]
pub struct CdcProgress {
    /// The split: `schema.table` for a table read as one, `schema.table/n` for split `n`.
    pub split: String,
    /// The split's range of the first key column.
    pub range: SplitRange,
    /// The table's primary key of the last snapshot row read; `None` before the first (stored
    /// as NULLs; a key with a NULL is never read back as a position).
    pub cursor: Option<Vec<ScalarValue>>,
    /// Whether every snapshot row is read.
    pub finished: bool,
    /// Snapshot rows read.
    pub rows: u64,
    /// The upstream position of the last page read.
    pub offset: CdcOffset,
}

/// The `split_id` of the row that records why a CDC table stopped following its upstream (its
/// `split_start` holds the reason): a stop survives a restart even where nothing upstream
/// would show the reason again (a MySQL table dropped and created again).
pub const STOPPED_SPLIT: &str = "#stopped";

impl CdcProgress {
    /// The row recording that the table stopped, for `reason` (see [`STOPPED_SPLIT`]).
    pub fn stop(reason: &str, offset: CdcOffset) -> Self {
        Self {
            split: STOPPED_SPLIT.to_owned(),
            range: SplitRange { start: Some(reason.to_owned()), end: None },
            cursor: None,
            finished: false,
            rows: 0,
            offset,
        }
    }

    /// Why the table stopped, when this is the row recording it.
    pub fn stopped(&self) -> Option<&str> {
        (self.split == STOPPED_SPLIT).then(|| self.range.start.as_deref().unwrap_or("stopped"))
    }

    /// The row as a batch of the progress table of `schema` (see [`cdc_columns`]).
    pub fn encode(&self, schema: &SchemaRef) -> Result<RecordBatch> {
        let split: ArrayRef = Arc::new(StringArray::from(vec![self.split.as_str()]));
        let mut columns = vec![split];
        if schema.index_of(SPLIT_END).is_ok() {
            for bound in [&self.range.start, &self.range.end] {
                columns.push(Arc::new(StringArray::from(vec![bound.as_deref()])));
            }
        }
        columns.extend(encode_cursors(&[self.cursor.as_deref()], schema)?);
        columns.extend(encode_counts([(self.finished, self.rows)]));
        columns.push(Arc::new(StringArray::from(vec![self.offset.to_json()])));
        Ok(RecordBatch::try_new(schema.clone(), cast_columns(columns, schema)?)?)
    }

    /// Row `row` of `batch`, rows of a CDC table's progress table.
    pub fn decode(batch: &RecordBatch, row: usize) -> Result<Self> {
        let text = |name: &str| -> Result<Option<&str>> {
            let column = batch.column(batch.schema_ref().index_of(name)?).as_string::<i32>();
            Ok(column.is_valid(row).then(|| column.value(row)))
        };
        let missing = |what: &str| Error::Storage(format!("CDC progress row without {what}"));
        let split = text(SPLIT_ID)?.ok_or_else(|| missing("a split"))?.to_owned();
        let offset = CdcOffset::from_json(text(CDC_OFFSET)?.ok_or_else(|| missing("an offset"))?)?;
        let key = decode_cursor(batch, row)?;
        let cursor = key.iter().all(|v| !v.is_null()).then_some(key);
        let (finished, rows) = decode_counts(batch, row)?;
        let bound = |name: &str| -> Result<Option<String>> {
            match batch.schema_ref().index_of(name) {
                Ok(_) => Ok(text(name)?.map(str::to_owned)),
                Err(_) => Ok(None),
            }
        };
        let range = SplitRange { start: bound(SPLIT_START)?, end: bound(SPLIT_END)? };
        Ok(Self { split, range, cursor, finished, rows, offset })
    }
}

/// The key (cursor) columns of a progress table: those between the first (or [`SPLIT_END`])
/// and [`FINISHED`].
fn key_columns(schema: &Schema) -> Result<Range<usize>> {
    let first = schema.index_of(SPLIT_END).map_or(1, |end| end + 1);
    Ok(first..schema.index_of(FINISHED)?)
}

/// The key columns of `cursors` (`None`: NULLs).
fn encode_cursors(cursors: &[Option<&[ScalarValue]>], schema: &Schema) -> Result<Vec<ArrayRef>> {
    key_columns(schema)?
        .enumerate()
        .map(|(k, c)| {
            let ty = schema.field(c).data_type();
            if cursors.is_empty() {
                return Ok(new_empty_array(ty));
            }
            let null = ScalarValue::try_from(ty)?;
            let values = cursors.iter().map(|&cursor| match cursor {
                Some(key) => key[k].clone(),
                None => null.clone(),
            });
            Ok(ScalarValue::iter_to_array(values)?)
        })
        .collect()
}

/// The `backfill_finished` and `row_count` columns of `(finished, rows)`.
fn encode_counts(units: impl IntoIterator<Item = (bool, u64)> + Clone) -> [ArrayRef; 2] {
    let finished = units.clone().into_iter().map(|(finished, _)| Some(finished));
    let rows = units.into_iter().map(|(_, rows)| rows as i64);
    [Arc::new(BooleanArray::from_iter(finished)), Arc::new(Int64Array::from_iter_values(rows))]
}

fn decode_cursor(batch: &RecordBatch, row: usize) -> Result<Vec<ScalarValue>> {
    key_columns(batch.schema_ref())?
        .map(|c| Ok(ScalarValue::try_from_array(batch.column(c), row)?))
        .collect()
}

/// `backfill_finished` (NULL: false) and `row_count` (NULL: 0) of row `row`.
fn decode_counts(batch: &RecordBatch, row: usize) -> Result<(bool, u64)> {
    let schema = batch.schema_ref();
    let finished = batch.column(schema.index_of(FINISHED)?).as_boolean();
    let rows = batch.column(schema.index_of(ROW_COUNT)?).as_primitive::<Int64Type>();
    let finished = finished.is_valid(row) && finished.value(row);
    let rows = if rows.is_valid(row) { rows.value(row).max(0) as u64 } else { 0 };
    Ok((finished, rows))
}

/// Every row of the progress table `table`, as `state` (its state table) reads them.
pub fn read_rows(table: &TableCatalog, state: &StateTable) -> Result<RecordBatch> {
    let (start, end) = state.full_range();
    let rows = state.iter_range(&start, &end, usize::MAX)?;
    let types = table.types();
    let all: Vec<usize> = (0..types.len()).collect();
    let mut decoder = RowDecoder::new(&types, &table.pk, &all, rows.len());
    for (key, value) in &rows {
        decoder.push(key, value)?;
    }
    Ok(RecordBatch::try_new(table.full_schema(), decoder.finish())?)
}

/// What a backfill state table holds, as committed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PersistedProgress {
    /// The sum of `row_count`.
    pub rows: u64,
    /// Rows with `backfill_finished`, and rows in all (vnodes started, or the one split).
    pub units_finished: u32,
    /// See `units_finished`.
    pub units: u32,
    /// The upstream position of a CDC backfill, as Postgres prints an LSN.
    pub offset: Option<String>,
}

/// Reads a backfill state table's committed progress.
pub fn persisted_progress(store: &Arc<Store>, table: &TableCatalog) -> Result<PersistedProgress> {
    let has = |name: &str| table.columns.iter().any(|c| c.name == name);
    if !has(ROW_COUNT) || !has(FINISHED) {
        return Ok(PersistedProgress::default());
    }
    let batch = read_rows(table, &table.state_table(store.clone()))?;
    let mut units = Vec::with_capacity(batch.num_rows());
    let mut offset = None;
    for row in 0..batch.num_rows() {
        if has(CDC_OFFSET) {
            let split = CdcProgress::decode(&batch, row)?;
            if split.stopped().is_some() {
                continue;
            }
            units.push((split.finished, split.rows));
            let later = |o: &CdcOffset| {
                offset.as_ref().is_none_or(|s: &CdcOffset| o.position() > s.position())
            };
            offset = Some(split.offset).filter(|o| !o.is_start() && later(o)).or(offset);
        } else {
            let vnode = VnodeProgress::decode(&batch, row)?;
            units.push((vnode.finished, vnode.rows));
        }
    }
    Ok(PersistedProgress {
        rows: units.iter().map(|&(_, rows)| rows).sum(),
        units_finished: units.iter().filter(|&&(finished, _)| finished).count() as u32,
        units: units.len() as u32,
        offset: offset.map(|o| o.to_string()),
    })
}

/// Every split of a CDC backfill state table, as committed (none for another kind of table).
pub fn persisted_splits(store: &Arc<Store>, table: &TableCatalog) -> Result<Vec<CdcProgress>> {
    if !table.columns.iter().any(|c| c.name == CDC_OFFSET) {
        return Ok(Vec::new());
    }
    let batch = read_rows(table, &table.state_table(store.clone()))?;
    let splits = (0..batch.num_rows()).map(|row| CdcProgress::decode(&batch, row));
    splits.filter(|s| s.as_ref().map_or(true, |s| s.stopped().is_none())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Epoch, TableId};
    use crate::chunk::StreamChunk;
    use crate::stream::test_utils::dedent;

    fn key_column() -> ColumnCatalog {
        ColumnCatalog { hidden: true, ..ColumnCatalog::new("id", DataType::Int32) }
    }

    fn names(columns: &[ColumnCatalog]) -> Vec<String> {
        columns.iter().map(|c| format!("{} {}", c.name, c.data_type)).collect()
    }

    /// A progress table of `columns`, as the planner and `CREATE TABLE .. FROM` make them.
    fn progress_table(columns: Vec<ColumnCatalog>) -> TableCatalog {
        TableCatalog::new_table(TableId(9), "p".into(), columns, vec![0], String::new())
    }

    /// Commits `batch` as the rows of `table` in epoch 1.
    fn commit_rows(store: &Arc<Store>, table: &TableCatalog, batch: RecordBatch) {
        let mut state = table.state_table(store.clone());
        state.write_chunk(&StreamChunk::inserts(batch)).unwrap();
        state.commit(Epoch(1));
        store.commit(Epoch(1)).unwrap();
    }

    fn vnode(vnode: u16, cursor: Option<i32>, finished: bool, rows: u64) -> VnodeProgress {
        let cursor = cursor.map(|id| vec![ScalarValue::Int32(Some(id))]);
        VnodeProgress { vnode: VirtualNode(vnode), cursor, finished, rows }
    }

    fn split(cursor: Option<i32>, finished: bool, rows: u64, lsn: u64) -> CdcProgress {
        CdcProgress {
            split: "public.t".into(),
            range: SplitRange::default(),
            cursor: cursor.map(|id| vec![ScalarValue::Int32(Some(id))]),
            finished,
            rows,
            offset: CdcOffset::Postgres { lsn },
        }
    }

    #[test]
    fn progress_tables_have_the_documented_columns() {
        assert_eq!(
            names(&arrangement_columns([key_column()])),
            ["vnode integer", "id integer", "backfill_finished boolean", "row_count bigint"]
        );
        assert_eq!(
            names(&cdc_columns([key_column()])),
            [
                "split_id character varying",
                "split_start character varying",
                "split_end character varying",
                "id integer",
                "backfill_finished boolean",
                "row_count bigint",
                "cdc_offset jsonb"
            ]
        );
        // Key columns of the table are visible in its progress table.
        assert!(cdc_columns([key_column()]).iter().all(|c| !c.hidden));
    }

    #[test]
    fn vnode_progress_rows_round_trip() {
        let schema = progress_table(arrangement_columns([key_column()])).full_schema();
        // A view's key may be NULL: a vnode in progress keeps such a cursor as it is.
        let null_key = VnodeProgress {
            cursor: Some(vec![ScalarValue::Int32(None)]),
            ..vnode(7, None, false, 1)
        };
        let rows = [vnode(0, Some(10), false, 10), vnode(1, None, true, 5), null_key];
        let batch = VnodeProgress::encode(&rows, &schema).unwrap();
        let expected = "i i B I
                        + 0 10 false 10
                        + 1 . true 5
                        + 7 . false 1";
        assert_eq!(StreamChunk::inserts(batch.clone()).to_pretty(), dedent(expected));
        let decoded: Vec<_> = (0..3).map(|r| VnodeProgress::decode(&batch, r).unwrap()).collect();
        assert_eq!(decoded, rows);
        assert!(VnodeProgress::encode(&[], &schema).unwrap().num_rows() == 0);
    }

    #[test]
    fn a_finished_vnode_has_no_cursor_whatever_is_stored() {
        let schema = progress_table(arrangement_columns([key_column()])).full_schema();
        let batch = VnodeProgress::encode(&[vnode(3, Some(4), true, 4)], &schema).unwrap();
        assert_eq!(StreamChunk::inserts(batch.clone()).to_pretty(), "i i B I\n+ 3 4 true 4");
        assert_eq!(VnodeProgress::decode(&batch, 0).unwrap(), vnode(3, None, true, 4));
    }

    #[test]
    fn cdc_progress_rows_round_trip() {
        let schema = progress_table(cdc_columns([key_column()])).full_schema();
        let ranged = CdcProgress {
            split: "public.t/1".into(),
            range: SplitRange { start: Some("100".into()), end: Some("200".into()) },
            ..split(Some(150), false, 50, 9)
        };
        for progress in [split(Some(7), false, 42, 0x1_0000_0064), split(None, true, 0, 0), ranged]
        {
            let batch = progress.encode(&schema).unwrap();
            assert_eq!(CdcProgress::decode(&batch, 0).unwrap(), progress);
        }
        let batch = split(Some(7), true, 42, 100).encode(&schema).unwrap();
        assert_eq!(batch.column(6).as_string::<i32>().value(0), r#"{"Postgres":{"lsn":100}}"#);
    }

    #[test]
    fn a_cdc_cursor_with_a_null_is_no_cursor() {
        let columns =
            cdc_columns([key_column(), ColumnCatalog { name: "k".into(), ..key_column() }]);
        let schema = progress_table(columns).full_schema();
        let cursor = vec![ScalarValue::Int32(Some(1)), ScalarValue::Int32(None)];
        let progress = CdcProgress { cursor: Some(cursor), ..split(None, false, 1, 5) };
        let batch = progress.encode(&schema).unwrap();
        assert_eq!(CdcProgress::decode(&batch, 0).unwrap(), split(None, false, 1, 5));
    }

    #[test]
    fn committed_progress_sums_the_units() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let table = progress_table(arrangement_columns([key_column()]));
        assert_eq!(persisted_progress(&store, &table).unwrap(), PersistedProgress::default());
        let rows = [vnode(0, Some(10), false, 10), vnode(1, None, true, 5)];
        commit_rows(&store, &table, VnodeProgress::encode(&rows, &table.full_schema()).unwrap());
        let progress = persisted_progress(&store, &table).unwrap();
        let expected = PersistedProgress { rows: 15, units_finished: 1, units: 2, offset: None };
        assert_eq!(progress, expected);
    }

    #[test]
    fn committed_cdc_progress_shows_the_offset_as_the_upstream_prints_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let table = progress_table(cdc_columns([key_column()]));
        let batch = split(Some(7), true, 42, 0x1_0000_0064).encode(&table.full_schema()).unwrap();
        commit_rows(&store, &table, batch);
        let progress = persisted_progress(&store, &table).unwrap();
        let expected = PersistedProgress {
            rows: 42,
            units_finished: 1,
            units: 1,
            offset: Some("1/64".into()),
        };
        assert_eq!(progress, expected);
    }
}
