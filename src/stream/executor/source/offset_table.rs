//! A source's offset table: one row `partition | lsn [| gtid]` where its reader records, at
//! each checkpoint, the upstream position of the last change the checkpoint holds. `lsn` is a
//! Postgres LSN or a binlog position (see
//! [`CdcOffset::position`](crate::connector::offset::CdcOffset::position)); `gtid` is
//! MariaDB's GTID position, for mysql-cdc sources only. The persisted column names stay as
//! they are; this file is the one place that reads and writes them.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::Int64Type;

use crate::catalog::{ColumnCatalog, TableCatalog};
use crate::error::Result;
use crate::storage::row_codec::RowDecoder;
use crate::storage::store::Store;
use crate::stream::message::StreamChunk;
use crate::types::DataType;

/// What an offset table records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordedOffset {
    /// The upstream position (the `lsn` column); 0 when none is recorded.
    pub position: u64,
    /// MariaDB's GTID position (`0-1-42,1-1-7`), where the source has one.
    pub gtid: Option<String>,
}

/// The columns of a source's offset table: with the `gtid` column for a mysql-cdc source.
pub fn columns(with_gtid: bool) -> Vec<ColumnCatalog> {
    let mut columns = vec![
        ColumnCatalog::new("partition", DataType::Int32),
        ColumnCatalog::new("lsn", DataType::Int64),
    ];
    if with_gtid {
        columns.push(ColumnCatalog::new("gtid", DataType::Varchar));
    }
    columns
}

/// The offset recorded in `state` (committed), if any.
pub fn read(store: &Arc<Store>, state: &TableCatalog) -> Result<Option<RecordedOffset>> {
    let table = state.state_table(store.clone());
    let (start, end) = table.full_range();
    let Some((key, row)) = table.iter_range(&start, &end, 1)?.pop() else { return Ok(None) };
    let value_columns: Vec<usize> = (1..state.columns.len()).collect();
    let mut decoder = RowDecoder::new(&state.types(), &state.pk, &value_columns, 1);
    decoder.push(&key, &row)?;
    let columns = decoder.finish();
    let position = columns[0].as_primitive::<Int64Type>();
    let gtid = columns.get(1).and_then(|g| {
        let g = g.as_string::<i32>();
        g.is_valid(0).then(|| g.value(0).to_owned()).filter(|g| !g.is_empty())
    });
    let position = if position.is_valid(0) { position.value(0) as u64 } else { 0 };
    Ok(Some(RecordedOffset { position, gtid }))
}

/// The position recorded in `state`; 0 when none is recorded yet.
pub fn recorded_position(store: &Arc<Store>, state: &TableCatalog) -> Result<u64> {
    Ok(read(store, state)?.map_or(0, |o| o.position))
}

/// The row that records `offset` in `state` (replacing the one there).
pub fn row(state: &TableCatalog, offset: &RecordedOffset) -> Result<StreamChunk> {
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(vec![0])),
        Arc::new(Int64Array::from(vec![offset.position as i64])),
    ];
    if state.columns.len() > 2 {
        columns.push(Arc::new(StringArray::from(vec![offset.gtid.clone()])));
    }
    Ok(StreamChunk::inserts(RecordBatch::try_new(state.full_schema(), columns)?))
}

#[cfg(test)]
mod tests {
    use crate::catalog::{Epoch, RelationKind, TableId};

    use super::*;

    fn state(with_gtid: bool) -> TableCatalog {
        let mut state = TableCatalog::new_table(
            TableId(30 + u32::from(with_gtid)),
            "s".into(),
            columns(with_gtid),
            vec![0],
            "".into(),
        );
        state.kind = RelationKind::Internal;
        state
    }

    #[test]
    fn an_offset_reads_back_as_written_and_nothing_written_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for with_gtid in [false, true] {
            let state = state(with_gtid);
            assert_eq!(read(&store, &state).unwrap(), None);
            assert_eq!(recorded_position(&store, &state).unwrap(), 0);
            let gtid = with_gtid.then(|| "0-1-42".to_owned());
            let offset = RecordedOffset { position: 97_500_059_720, gtid };
            let mut table = state.state_table(store.clone());
            table.write_chunk(&row(&state, &offset).unwrap()).unwrap();
            let epoch = Epoch(store.committed_epoch().0 + 1);
            table.commit(epoch);
            store.commit(epoch).unwrap();
            assert_eq!(read(&store, &state).unwrap(), Some(offset));
            assert_eq!(recorded_position(&store, &state).unwrap(), 97_500_059_720);
        }
    }
}
