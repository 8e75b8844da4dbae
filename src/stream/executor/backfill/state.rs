//! The progress state tables of the backfills: their columns, in one place.
//!
//! Both tables are internal tables a user can `SELECT` (as in RisingWave):
//! - a view's stream scan: `vnode | <upstream pk> | backfill_finished | row_count`, one row per
//!   vnode, the pk being the last key read in that vnode (NULL: none yet);
//! - a CDC table: `split_id | <table pk> | backfill_finished | row_count | cdc_offset`, one row
//!   per upstream table (split), the pk being the snapshot cursor and `cdc_offset` the JSON of a
//!   [`CdcOffset`](crate::connector::offset::CdcOffset).
//!
//! [`persisted_progress`] reads either kind by the column names below.

use std::sync::Arc;

use arrow::array::AsArray;

use crate::catalog::{ColumnCatalog, TableCatalog};
use crate::connector::offset::CdcOffset;
use crate::error::Result;
use crate::storage::row_codec::RowDecoder;
use crate::storage::store::Store;
use crate::types::DataType;

/// Whether the unit (vnode or split) has read all of its snapshot.
pub const FINISHED: &str = "backfill_finished";
/// Snapshot rows the unit has read.
pub const ROW_COUNT: &str = "row_count";
/// The upstream position of a CDC backfill's last page.
pub const CDC_OFFSET: &str = "cdc_offset";

fn column(name: &str, data_type: DataType) -> ColumnCatalog {
    ColumnCatalog { name: name.into(), data_type, hidden: false }
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
    let mut columns = vec![column("split_id", DataType::Varchar)];
    columns.extend(pk.into_iter().map(|c| ColumnCatalog { hidden: false, ..c }));
    columns.extend([
        column(FINISHED, DataType::Boolean),
        column(ROW_COUNT, DataType::Int64),
        column(CDC_OFFSET, DataType::Jsonb),
    ]);
    columns
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
    let position = |name: &str| table.columns.iter().position(|c| c.name == name);
    let (Some(rows), Some(finished)) = (position(ROW_COUNT), position(FINISHED)) else {
        return Ok(PersistedProgress::default());
    };
    let mut projection = vec![rows, finished];
    projection.extend(position(CDC_OFFSET));
    let state = table.state_table(store.clone());
    let (start, end) = state.full_range();
    let types = table.types();
    let mut decoder = RowDecoder::new(&types, &projection, 256);
    for (_, value) in state.iter_range(&start, &end, usize::MAX)? {
        decoder.push(&value)?;
    }
    let columns = decoder.finish();
    let counts = columns[0].as_primitive::<arrow::datatypes::Int64Type>();
    let flags = columns[1].as_boolean();
    let offset = columns.get(2).and_then(|c| {
        let text = c.as_string::<i32>();
        let offset = CdcOffset::from_json(text.iter().flatten().last()?).ok()?;
        (!offset.is_start()).then(|| offset.to_string())
    });
    Ok(PersistedProgress {
        rows: counts.iter().flatten().map(|n| n.max(0) as u64).sum(),
        units_finished: flags.iter().filter(|f| *f == Some(true)).count() as u32,
        units: counts.len() as u32,
        offset,
    })
}

#[cfg(test)]
mod tests {
    use arrow::array::{ArrayRef, BooleanArray, Int32Array, Int64Array, RecordBatch, StringArray};

    use super::*;
    use crate::catalog::{Epoch, TableId};
    use crate::chunk::StreamChunk;

    fn key_column() -> ColumnCatalog {
        ColumnCatalog { name: "id".into(), data_type: DataType::Int32, hidden: true }
    }

    fn names(columns: &[ColumnCatalog]) -> Vec<String> {
        columns.iter().map(|c| format!("{} {}", c.name, c.data_type)).collect()
    }

    /// Commits `columns` as the rows of `table` in epoch 1.
    fn commit_rows(store: &Arc<Store>, table: &TableCatalog, columns: Vec<ArrayRef>) {
        let batch = RecordBatch::try_new(table.full_schema(), columns).unwrap();
        let mut state = table.state_table(store.clone());
        state.write_chunk(&StreamChunk::inserts(batch)).unwrap();
        state.commit(Epoch(1));
        store.commit(Epoch(1)).unwrap();
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
    fn committed_progress_sums_the_units() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let table = TableCatalog::new_table(
            TableId(9),
            "p".into(),
            arrangement_columns([key_column()]),
            vec![0],
            String::new(),
        );
        assert_eq!(persisted_progress(&store, &table).unwrap(), PersistedProgress::default());
        commit_rows(
            &store,
            &table,
            vec![
                Arc::new(Int32Array::from(vec![0, 1])),
                Arc::new(Int32Array::from(vec![Some(10), None])),
                Arc::new(BooleanArray::from(vec![false, true])),
                Arc::new(Int64Array::from(vec![10, 5])),
            ],
        );
        let progress = persisted_progress(&store, &table).unwrap();
        let expected = PersistedProgress { rows: 15, units_finished: 1, units: 2, offset: None };
        assert_eq!(progress, expected);
    }

    #[test]
    fn committed_cdc_progress_shows_the_offset_as_the_upstream_prints_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let table = TableCatalog::new_table(
            TableId(9),
            "p".into(),
            cdc_columns([key_column()]),
            vec![0],
            String::new(),
        );
        let offset = CdcOffset::Postgres { lsn: 0x1_0000_0064 }.to_json();
        commit_rows(
            &store,
            &table,
            vec![
                Arc::new(StringArray::from(vec!["public.t"])),
                Arc::new(Int32Array::from(vec![7])),
                Arc::new(BooleanArray::from(vec![true])),
                Arc::new(Int64Array::from(vec![42])),
                Arc::new(StringArray::from(vec![offset])),
            ],
        );
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
