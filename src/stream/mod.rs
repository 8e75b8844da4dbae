//! The streaming runtime: messages between executors, executors, actors and the barrier
//! manager that cuts epochs and commits checkpoints.

/// An actor: a tokio task driving one chain of executors and sending to its outputs.
pub mod actor;
/// The barrier manager: injects barriers, collects them, commits epochs, reports failures.
pub mod barrier;
/// How an actor's output is split between downstream actors (hash by key, broadcast).
pub mod dispatch;
/// Non-strict expression evaluation for streaming (a failing row gives NULL).
pub mod eval;
/// The executors, one per file, and the backfills.
pub mod executor;
/// The job graph: jobs, fragments and actors; building, spawning, rescaling, creating jobs.
pub mod graph;
/// What flows between executors: chunks, barriers, watermarks.
pub mod message;
/// A view's stream plan: nodes, their state tables, their keys.
pub mod plan;
/// Text-table chunks and a mock source, for executor unit tests.
#[cfg(test)]
pub mod test_utils;

use arrow::array::{Array, ArrayRef, AsArray, ListArray};
use arrow::datatypes::{DataType, SchemaRef, UInt32Type};

use crate::error::Result;

/// A batch of `rows` rows; `columns` may be empty (a scan a view reads no column of, as in
/// `SELECT 1 FROM t`), which a plain `RecordBatch::try_new` refuses.
pub fn batch_with_rows(
    schema: SchemaRef,
    columns: Vec<ArrayRef>,
    rows: usize,
) -> Result<arrow::array::RecordBatch> {
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(arrow::array::RecordBatch::try_new_with_options(schema, columns, &options)?)
}

/// Casts each column to the type of its field in `schema` where the two differ.
pub fn cast_columns(columns: Vec<ArrayRef>, schema: &SchemaRef) -> Result<Vec<ArrayRef>> {
    columns
        .into_iter()
        .zip(schema.fields())
        .map(|(column, field)| {
            match (column.data_type(), field.data_type()) {
                (from, to) if from == to => Ok(column),
                // A difference of timestamps is stored as Postgres's interval.
                (DataType::Duration(_), DataType::Interval(_)) => {
                    Ok(crate::types::interval_text::justified_column(&column)?)
                }
                (_, to) => Ok(arrow::compute::cast(&column, to)?),
            }
        })
        .collect()
}

/// The Arrow type of a list of column indices per row, `List<UInt32>` (items never NULL): the
/// upstream columns a CDC change did not send, and the `_unchanged` columns of an upsert.
pub fn index_list_type() -> DataType {
    DataType::new_list(DataType::UInt32, true)
}

/// The indices of row `row` of an index list (see [`index_list_type`]); none for NULL.
pub fn indices_at(list: &ListArray, row: usize) -> &[u32] {
    if list.is_null(row) {
        return &[];
    }
    let offsets = list.value_offsets();
    let values = list.values().as_primitive::<UInt32Type>().values();
    &values[offsets[row] as usize..offsets[row + 1] as usize]
}
