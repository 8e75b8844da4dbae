//! Estimates from a relation's stored rows, for planning choices that depend on the data.
//!
//! [`rows_per_group`] samples a table's first stored rows. A table's keys start with a hashed
//! vnode, so its first rows are a sample of its rows that is random in every column but the
//! distribution key; the number of distinct values of some columns is estimated from it as
//! Postgres's `ANALYZE` does (Haas and Stokes' `Duj1`: `n d / (n - f1 + f1 n / N)` for `d`
//! distinct values in a sample of `n` rows of `N`, `f1` of them seen once).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::row::{RowConverter, SortField};

use crate::catalog::{TableCatalog, TableId};
use crate::error::Result;
use crate::storage::keycodec::table_prefix;
use crate::storage::row_codec::RowDecoder;
use crate::storage::store::Store;

/// Rows sampled.
const SAMPLE_ROWS: usize = 8192;

/// The average number of rows of `table` per distinct value of its columns `columns`, or
/// `None` when the table holds fewer than `min_rows` rows (too few for the choice to matter)
/// or the sample cannot be read.
pub fn rows_per_group(
    store: &Arc<Store>,
    table: &TableCatalog,
    columns: &[usize],
    min_rows: u64,
) -> Option<f64> {
    sample(store, table, columns, min_rows).unwrap_or_else(|e| {
        tracing::debug!(table = %table.name, error = %e, "no sample of the table's rows");
        None
    })
}

fn sample(
    store: &Arc<Store>,
    table: &TableCatalog,
    columns: &[usize],
    min_rows: u64,
) -> Result<Option<f64>> {
    let start = table_prefix(table.id);
    let end = table_prefix(TableId(table.id.0 + 1));
    let total = store.estimate_rows(&start, &end, SAMPLE_ROWS as u64)?;
    if total < min_rows.max(1) || columns.is_empty() {
        return Ok(None);
    }
    let mut projection = columns.to_vec();
    projection.sort_unstable();
    projection.dedup();
    let types = table.types();
    let mut decoder =
        RowDecoder::widened(&types, &table.pk, &projection, SAMPLE_ROWS, &table.widened);
    store.snapshot().scan_once(&start, &end, SAMPLE_ROWS, |k, v| decoder.push(k, v))?;
    let decoded = decoder.finish();
    let fields = decoded.iter().map(|c| SortField::new(c.data_type().clone())).collect();
    let rows = RowConverter::new(fields)?.convert_columns(&decoded)?;
    let n = rows.num_rows();
    if n == 0 {
        return Ok(None);
    }
    let mut seen: HashMap<&[u8], u32> = HashMap::with_capacity(n);
    for row in rows.iter() {
        *seen.entry(row.data()).or_default() += 1;
    }
    let distinct = seen.len() as f64;
    let once = seen.values().filter(|&&c| c == 1).count() as f64;
    let (n, total) = (n as f64, total as f64);
    let groups = (n * distinct / (n - once + once * n / total)).clamp(distinct, total);
    Ok(Some(total / groups))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch};

    use super::*;
    use crate::catalog::{ColumnCatalog, Epoch};
    use crate::stream::message::StreamChunk;
    use crate::types::DataType;

    #[test]
    fn groups_of_many_rows_and_groups_of_few_are_told_apart_from_a_sample() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // 200 k rows keyed by (order, line): 4 lines an order, and 1 000 shops.
        let columns = vec![
            ColumnCatalog::new("order", DataType::Int64),
            ColumnCatalog::new("line", DataType::Int32),
            ColumnCatalog::new("shop", DataType::Int32),
        ];
        let table =
            TableCatalog::new_table(TableId(7), "lines".into(), columns, vec![0, 1], "".into());
        let n = 200_000i64;
        let order: ArrayRef = Arc::new(Int64Array::from_iter_values((0..n).map(|i| i / 4)));
        let line: ArrayRef = Arc::new(Int32Array::from_iter_values((0..n).map(|i| (i % 4) as i32)));
        let shop: ArrayRef =
            Arc::new(Int32Array::from_iter_values((0..n).map(|i| (i * 7919 % 1000) as i32)));
        let batch = RecordBatch::try_new(table.full_schema(), vec![order, line, shop]).unwrap();
        let mut state = table.state_table(store.clone());
        state.write_chunk(&StreamChunk::inserts(batch)).unwrap();
        state.commit(Epoch(1));
        store.commit(Epoch(1)).unwrap();

        let per_order = rows_per_group(&store, &table, &[0], 1).unwrap();
        assert!(per_order < 10.0, "4 lines an order, estimated {per_order}");
        let per_shop = rows_per_group(&store, &table, &[2], 1).unwrap();
        assert!((100.0..=400.0).contains(&per_shop), "200 rows a shop, estimated {per_shop}");
        let per_line = rows_per_group(&store, &table, &[0, 1], 1).unwrap();
        assert!(per_line < 1.5, "unique, estimated {per_line}");
        // Too small a table to matter: no estimate.
        assert_eq!(rows_per_group(&store, &table, &[2], 10 * n as u64), None);
    }
}
