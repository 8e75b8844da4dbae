//! `OverWindowExecutor`: window functions (`rank() OVER (PARTITION BY g ORDER BY x)`,
//! `lag(x)`, running sums, any frame) kept exact as their partitions change.
//!
//! Every input row is stored in a state table keyed by `partition | order | stream key`
//! (`order` as in the top-N: bytes that compare as the `ORDER BY` does, ties broken by the
//! stream key), with the window values last emitted for it and whether it was emitted. The
//! partition columns are the distribution key: a partition is one prefix scan on one actor.
//!
//! A chunk's changes are stored at once. A deleted row that was emitted is deleted from the
//! output at once, with the values emitted for it. At the barrier each partition the epoch
//! touched is read whole, in order, and DataFusion's window expressions are evaluated over it
//! as a batch query would evaluate them; rows not emitted yet are inserted, rows whose values
//! changed are updated, and the stored values follow. So a change costs its partition once per
//! epoch, whatever the number of changes; memory holds one partition at a time.
//!
//! Output rows are the input's visible columns, the window values, the input's hidden
//! columns, then the partition values, which join the stream key (a row whose partition
//! changes is deleted by one actor and inserted by another: two different rows).

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, BooleanArray, RecordBatch, new_null_array};
use arrow::compute::kernels::cmp::distinct;
use arrow::compute::{filter_record_batch, or};
use arrow::datatypes::{Schema, SchemaRef};
use datafusion::physical_plan::PhysicalExpr;
use datafusion::physical_plan::WindowExpr;
use futures::StreamExt;

use crate::catalog::TableCatalog;
use crate::error::Result;
use crate::storage::keycodec::{encode_keys, prefix_end};
use crate::storage::row_codec::RowDecoder;
use crate::storage::state_table::StateTable;
use crate::storage::store::Store;
use crate::stream::eval::eval;
use crate::stream::executor::top_n::{SortKey, order_keys};
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::{Message, Op, StreamChunk, unexpected_truncate};

/// What an over-window computes.
#[derive(Debug, Clone)]
pub struct OverWindowSpec {
    /// `PARTITION BY` expressions over the input rows.
    pub partition: Vec<Arc<dyn PhysicalExpr>>,
    /// `ORDER BY`.
    pub order: Vec<SortKey>,
    /// The window functions, over the input's visible columns as the batch query reads them
    /// (`visible_schema`).
    pub calls: Vec<Arc<dyn WindowExpr>>,
    /// The input's visible columns.
    pub visible_schema: SchemaRef,
}

/// The over-window operator (see the module docs).
pub struct OverWindowExecutor {
    input: BoxedExecutor,
    spec: OverWindowSpec,
    /// `partition columns ++ _order ++ input columns ++ window values ++ _emitted`, keyed by
    /// `partition ++ _order ++ stream key`.
    table: Arc<TableCatalog>,
    store: Arc<Store>,
    output_schema: SchemaRef,
}

impl OverWindowExecutor {
    /// Window functions over `input`, storing its rows in `table`.
    pub fn new(
        input: BoxedExecutor,
        spec: OverWindowSpec,
        table: Arc<TableCatalog>,
        store: Arc<Store>,
        output_schema: SchemaRef,
    ) -> Self {
        Self { input, spec, table, store, output_schema }
    }
}

impl Executor for OverWindowExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { input, spec, table, store, output_schema } = *self;
        async_stream::try_stream! {
            let mut window = Window {
                table: table.state_table(store),
                def: table,
                spec,
                output_schema,
                touched: Vec::new(),
                touched_set: hashbrown::HashSet::new(),
            };
            let mut input = input.execute();
            while let Some(msg) = input.next().await {
                match msg? {
                    Message::Chunk(chunk) => {
                        if let Some(out) = window.apply(&chunk)? {
                            yield Message::Chunk(out);
                        }
                    }
                    Message::Barrier(barrier) => {
                        while let Some(out) = window.flush_one()? {
                            yield Message::Chunk(out);
                        }
                        if barrier.is_checkpoint() {
                            window.table.commit(barrier.epoch.prev);
                        }
                        yield Message::Barrier(barrier);
                    }
                    Message::Watermark(_) => {}
                    Message::Truncate => Err(unexpected_truncate("a window function"))?,
                }
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "OverWindowExecutor"
    }
}

struct Window {
    def: Arc<TableCatalog>,
    table: StateTable,
    spec: OverWindowSpec,
    output_schema: SchemaRef,
    /// Partitions (key prefixes) changed in this epoch, in the order first changed.
    touched: Vec<Vec<u8>>,
    touched_set: hashbrown::HashSet<Vec<u8>>,
}

impl Window {
    fn n_partition(&self) -> usize {
        self.spec.partition.len()
    }

    /// Where a stored row's columns are: its input columns, its window values, `_emitted`.
    fn layout(&self) -> (std::ops::Range<usize>, std::ops::Range<usize>, usize) {
        let first_input = self.n_partition() + 1;
        let width = self.def.columns.len() - first_input - self.spec.calls.len() - 1;
        let inputs = first_input..first_input + width;
        let values = inputs.end..inputs.end + self.spec.calls.len();
        let emitted = values.end;
        (inputs, values, emitted)
    }

    /// Stores a chunk's changes; returns the deletes of emitted rows it removes.
    fn apply(&mut self, chunk: &StreamChunk) -> Result<Option<StreamChunk>> {
        let n = chunk.len();
        let schema = self.def.full_schema();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for (i, expr) in self.spec.partition.iter().enumerate() {
            let values = eval(expr.as_ref(), chunk.data())?;
            columns.push(arrow::compute::cast(&values, schema.field(i).data_type())?);
        }
        let prefixes = encode_keys(self.def.id, &columns, n, self.n_partition())?;
        columns.push(Arc::new(order_keys(&self.spec.order, chunk.data())?));
        columns.extend(chunk.columns().iter().cloned());
        // Typed as stored: an unsigned count (another window's `row_number()`) is a numeric.
        let mut columns = crate::stream::cast_columns(columns, &schema)?;
        let (_, values, emitted) = self.layout();
        for i in values {
            columns.push(new_null_array(schema.field(i).data_type(), n));
        }
        columns.push(Arc::new(BooleanArray::from(vec![false; n])));
        debug_assert_eq!(columns.len(), emitted + 1);
        let rows = RecordBatch::try_new(schema, columns)?;
        let keys = self.table.keys(rows.columns(), n)?;
        // A deleted row was emitted if it was stored before this chunk and emitted then, and
        // no earlier change of the chunk took it away.
        let deleted: Vec<Vec<u8>> = (chunk.ops().iter().zip(&keys))
            .filter(|(op, _)| !op.is_insert())
            .map(|(_, k)| k.clone())
            .collect();
        let stored: HashMap<&[u8], Vec<u8>> = deleted
            .iter()
            .zip(self.table.get_many(&deleted)?)
            .filter_map(|(k, v)| Some((k.as_slice(), v?)))
            .collect();
        let mut changed: hashbrown::HashSet<&[u8]> = hashbrown::HashSet::new();
        let mut gone = Vec::new();
        for (op, key) in chunk.ops().iter().zip(&keys) {
            if !op.is_insert()
                && changed.insert(key.as_slice())
                && let Some(value) = stored.get(key.as_slice())
            {
                gone.push((key.clone(), value.clone()));
            }
            changed.insert(key.as_slice());
        }
        let ops = chunk.ops().iter().map(|op| if op.is_insert() { Op::Insert } else { Op::Delete });
        self.table.write_chunk(&StreamChunk::new(ops.collect(), rows))?;
        for prefix in prefixes {
            if self.touched_set.insert(prefix.clone()) {
                self.touched.push(prefix);
            }
        }
        let rows = self.decode(&gone)?;
        let (_, _, emitted) = self.layout();
        let mask: BooleanArray =
            rows.column(emitted).as_boolean().iter().map(|f| Some(f == Some(true))).collect();
        let rows = filter_record_batch(&rows, &mask)?;
        if rows.num_rows() == 0 {
            return Ok(None);
        }
        let (inputs, values, _) = self.layout();
        let old: Vec<ArrayRef> = values.map(|i| rows.column(i).clone()).collect();
        let out = self.output(&rows, inputs, &old)?;
        Ok(Some(StreamChunk::deletes(out)))
    }

    /// Recomputes the next partition the epoch touched: inserts its new rows, updates the rows
    /// whose window values changed. `None` when every touched partition is done.
    fn flush_one(&mut self) -> Result<Option<StreamChunk>> {
        while let Some(prefix) = self.touched.pop() {
            self.touched_set.remove(&prefix);
            let stored = self.table.iter_range(&prefix, &prefix_end(&prefix), usize::MAX)?;
            if stored.is_empty() {
                continue;
            }
            let rows = self.decode(&stored)?;
            let (inputs, values, emitted) = self.layout();
            let width = self.spec.visible_schema.fields().len();
            let visible = inputs.start..inputs.start + width;
            let batch = RecordBatch::try_new(
                self.spec.visible_schema.clone(),
                (visible.clone().zip(self.spec.visible_schema.fields()))
                    .map(|(i, f)| Ok(arrow::compute::cast(rows.column(i), f.data_type())?))
                    .collect::<Result<Vec<_>>>()?,
            )?;
            let new: Vec<ArrayRef> = self
                .spec
                .calls
                .iter()
                .zip(values.clone())
                .map(|(call, i)| {
                    let value = call.evaluate(&batch)?;
                    Ok(arrow::compute::cast(&value, rows.schema().field(i).data_type())?)
                })
                .collect::<Result<_>>()?;
            let old: Vec<ArrayRef> = values.clone().map(|i| rows.column(i).clone()).collect();
            let was: Vec<bool> =
                rows.column(emitted).as_boolean().iter().map(|f| f == Some(true)).collect();
            let mut differs = BooleanArray::from(vec![false; rows.num_rows()]);
            for (o, n) in old.iter().zip(&new) {
                differs = or(&differs, &distinct(o, n)?)?;
            }
            // Rows emitted with other values: an update; rows never emitted: an insert.
            let updated: BooleanArray =
                (0..rows.num_rows()).map(|i| Some(was[i] && differs.value(i))).collect();
            let inserted: BooleanArray = was.iter().map(|w| Some(!w)).collect();
            let written: BooleanArray =
                (0..rows.num_rows()).map(|i| Some(updated.value(i) || inserted.value(i))).collect();
            if written.true_count() == 0 {
                continue;
            }
            // Store the new values, emitted.
            let mut columns = rows.columns().to_vec();
            for (i, n) in values.clone().zip(&new) {
                columns[i] = n.clone();
            }
            columns[emitted] = Arc::new(BooleanArray::from(vec![true; rows.num_rows()]));
            let restored =
                filter_record_batch(&RecordBatch::try_new(rows.schema(), columns)?, &written)?;
            self.table.write_chunk(&StreamChunk::inserts(restored))?;

            let pick = |mask: &BooleanArray,
                        arrays: &[ArrayRef]|
             -> Result<(RecordBatch, Vec<ArrayRef>)> {
                let rows = filter_record_batch(&rows, mask)?;
                let arrays = arrays
                    .iter()
                    .map(|a| Ok(arrow::compute::filter(a, mask)?))
                    .collect::<Result<Vec<_>>>()?;
                Ok((rows, arrays))
            };
            let (before_rows, before) = pick(&updated, &old)?;
            let (after_rows, after) = pick(&updated, &new)?;
            let (new_rows, fresh) = pick(&inserted, &new)?;
            let mut ops = Vec::new();
            let mut parts = Vec::new();
            let before = self.output(&before_rows, inputs.clone(), &before)?;
            let after = self.output(&after_rows, inputs.clone(), &after)?;
            // Update pairs side by side: U- then U+ of each row.
            for i in 0..before.num_rows() {
                ops.extend([Op::UpdateDelete, Op::UpdateInsert]);
                parts.push(before.slice(i, 1));
                parts.push(after.slice(i, 1));
            }
            let fresh = self.output(&new_rows, inputs, &fresh)?;
            ops.extend(std::iter::repeat_n(Op::Insert, fresh.num_rows()));
            parts.push(fresh);
            let data = arrow::compute::concat_batches(&self.output_schema, &parts)?;
            return Ok(Some(StreamChunk::new(ops, data)));
        }
        Ok(None)
    }

    /// Stored rows, every column.
    fn decode(&self, stored: &[(Vec<u8>, Vec<u8>)]) -> Result<RecordBatch> {
        let types = self.def.types();
        let all: Vec<usize> = (0..types.len()).collect();
        let mut decoder = RowDecoder::new(&types, &self.def.pk, &all, stored.len());
        for (key, value) in stored {
            decoder.push(key, value)?;
        }
        Ok(RecordBatch::try_new(self.def.full_schema(), decoder.finish())?)
    }

    /// Output rows of stored `rows` with window values `values`: the input's visible columns,
    /// the values, the input's hidden columns, the partition values.
    fn output(
        &self,
        rows: &RecordBatch,
        inputs: std::ops::Range<usize>,
        values: &[ArrayRef],
    ) -> Result<RecordBatch> {
        let visible = self.spec.visible_schema.fields().len();
        let mut columns: Vec<ArrayRef> =
            (inputs.start..inputs.start + visible).map(|i| rows.column(i).clone()).collect();
        columns.extend(values.iter().cloned());
        columns.extend((inputs.start + visible..inputs.end).map(|i| rows.column(i).clone()));
        columns.extend((0..self.n_partition()).map(|i| rows.column(i).clone()));
        let columns = columns
            .into_iter()
            .zip(self.output_schema.fields())
            .map(|(c, f)| Ok(arrow::compute::cast(&c, f.data_type())?))
            .collect::<Result<Vec<_>>>()?;
        Ok(RecordBatch::try_new(self.output_schema.clone(), columns)?)
    }
}

/// The schema of an over-window's output: `input visible ++ window values ++ input hidden ++
/// partition values`.
pub fn output_schema(
    input: &Schema,
    visible: usize,
    values: &[arrow::datatypes::Field],
    partition: &[arrow::datatypes::Field],
) -> SchemaRef {
    let mut fields: Vec<arrow::datatypes::Field> =
        input.fields()[..visible].iter().map(|f| f.as_ref().clone()).collect();
    fields.extend(values.iter().cloned());
    fields.extend(input.fields()[visible..].iter().map(|f| f.as_ref().clone()));
    fields.extend(partition.iter().cloned());
    Arc::new(Schema::new(fields))
}
