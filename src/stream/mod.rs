//! The streaming runtime: messages between executors, executors, actors and the barrier
//! manager that cuts epochs and commits checkpoints.

pub mod actor;
pub mod barrier;
pub mod build;
pub mod dispatch;
pub mod eval;
pub mod executor;
pub mod message;
pub mod plan;
#[cfg(test)]
pub mod test_utils;

use arrow::array::ArrayRef;
use arrow::datatypes::SchemaRef;

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
            if column.data_type() == field.data_type() {
                Ok(column)
            } else {
                Ok(arrow::compute::cast(&column, field.data_type())?)
            }
        })
        .collect()
}
