//! `DynamicFilterExecutor`: a view's comparison of its rows with a one-row subquery, such as
//! `WHERE t.a > (SELECT avg(a) FROM t)` or `WHERE price >= (SELECT max(price) / 2 FROM p)`.
//!
//! The left input is the rows; the right input is the subquery's one row (its changes come to
//! every actor). The condition is `value op threshold`, `op` one of `<`, `<=`, `>`, `>=`, with
//! `value` an expression over a left row and `threshold` one over the right row. A row shows
//! while its condition is true; it is NULL (never shown) while the value is NULL or there is no
//! threshold (the subquery has no row, or a NULL).
//!
//! Every left row with a value is kept in a state table ordered by the value,
//! `_value | left columns` keyed by `_value | left stream key`, in the vnode the row's
//! distribution key routed it to: each actor owns its vnodes, so the filter runs in parallel.
//! A left change is judged by the current threshold and stored. A change of the threshold
//! takes effect at the barrier ending the epoch it came in: the rows whose condition it turns
//! are those with a value between the old and the new threshold, which one range read per
//! vnode finds (ordered by value), a page at a time; they go out as deletes and inserts before
//! the barrier. So a threshold that moves a little touches a few rows, whatever the table's
//! size, where a cross join with the subquery would rewrite every row.
//!
//! The threshold is kept in a second table (one row, written by the owner of vnode 0; every
//! actor reads it at start), so a restart judges by the committed one.
//!
//! The output is the left rows: their columns and stream key.

#[cfg(test)]
mod tests;

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Int32Array, RecordBatch, Scalar};
use arrow::compute::filter_record_batch;
use arrow::compute::kernels::cmp;
use arrow::datatypes::{DataType as ArrowType, Schema, SchemaRef};
use datafusion::logical_expr::Operator;
use datafusion::physical_plan::PhysicalExpr;
use futures::StreamExt;

use crate::catalog::{Epoch, TableCatalog, VirtualNode};
use crate::error::{Error, Result};
use crate::storage::keycodec::{encode_column, prefix_end, vnode_prefix};
use crate::storage::row_codec::RowDecoder;
use crate::storage::state_table::StateTable;
use crate::storage::store::Store;
use crate::stream::dispatch::vnodes_of;
use crate::stream::eval::eval;
use crate::stream::executor::filter::mask_chunk;
use crate::stream::executor::hash_join::{Aligned, align};
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::{Message, Op, StreamChunk};

/// Rows read from the state table at a time while a barrier looks for the rows that turn.
const PAGE_ROWS: usize = 1024;

/// `value op threshold`.
#[derive(Debug, Clone)]
pub struct DynamicCondition {
    /// The compared value, over a left row.
    pub value: Arc<dyn PhysicalExpr>,
    /// `<`, `<=`, `>` or `>=`.
    pub op: Operator,
    /// The threshold, over the right row; of the value's type.
    pub threshold: Arc<dyn PhysicalExpr>,
}

impl DynamicCondition {
    /// Whether rows show above the threshold (`>`, `>=`) rather than below it.
    fn upward(&self) -> bool {
        matches!(self.op, Operator::Gt | Operator::GtEq)
    }

    /// The condition of each of `values` against `threshold` (a one-row array): NULL-free,
    /// false where the value is NULL or there is no threshold.
    fn holds(&self, values: &ArrayRef, threshold: Option<&ArrayRef>) -> Result<Vec<bool>> {
        let Some(threshold) = threshold else { return Ok(vec![false; values.len()]) };
        let scalar = Scalar::new(threshold.clone());
        let held = match self.op {
            Operator::Lt => cmp::lt(values, &scalar)?,
            Operator::LtEq => cmp::lt_eq(values, &scalar)?,
            Operator::Gt => cmp::gt(values, &scalar)?,
            Operator::GtEq => cmp::gt_eq(values, &scalar)?,
            other => {
                return Err(Error::Stream(format!("a dynamic filter cannot compare by {other}")));
            }
        };
        Ok((0..held.len()).map(|i| held.is_valid(i) && held.value(i)).collect())
    }
}

/// The dynamic filter (see the module docs).
pub struct DynamicFilterExecutor {
    left: BoxedExecutor,
    right: BoxedExecutor,
    store: Arc<Store>,
    condition: DynamicCondition,
    /// The left rows' distribution key, whose vnode places each row.
    dist: Vec<Arc<dyn PhysicalExpr>>,
    /// The vnodes this actor owns.
    vnodes: Vec<VirtualNode>,
    /// `_value | left columns`, keyed by `_value | left stream key`.
    rows: Arc<TableCatalog>,
    /// `_key | _threshold`, one row.
    threshold: Arc<TableCatalog>,
    left_schema: SchemaRef,
}

impl DynamicFilterExecutor {
    /// Filters `left` by `condition` against `right`'s one row, keeping the left rows (of
    /// schema `left_schema`, placed by `dist`) of `vnodes` in `rows` and the threshold in
    /// `threshold`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        left: BoxedExecutor,
        right: BoxedExecutor,
        store: Arc<Store>,
        condition: DynamicCondition,
        dist: Vec<Arc<dyn PhysicalExpr>>,
        vnodes: Vec<VirtualNode>,
        rows: Arc<TableCatalog>,
        threshold: Arc<TableCatalog>,
        left_schema: SchemaRef,
    ) -> Self {
        Self { left, right, store, condition, dist, vnodes, rows, threshold, left_schema }
    }
}

impl Executor for DynamicFilterExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        async_stream::try_stream! {
            let mut filter = Filter::load(*self)?;
            let (left, right) = filter.inputs.take().expect("taken once");
            let mut input = align(left.execute(), right.execute());
            while let Some(msg) = input.next().await {
                match msg? {
                    Aligned::Left(chunk) => {
                        if let Some(out) = filter.apply(&chunk)? {
                            yield Message::Chunk(out);
                        }
                    }
                    Aligned::Right(chunk) => filter.set_threshold(&chunk)?,
                    Aligned::Barrier(barrier) => {
                        filter.start_turning()?;
                        while let Some(out) = filter.next_turned()? {
                            yield Message::Chunk(out);
                        }
                        if barrier.is_checkpoint() {
                            filter.commit(barrier.epoch.prev)?;
                        }
                        yield Message::Barrier(barrier);
                    }
                }
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "DynamicFilterExecutor"
    }
}

/// The rows whose condition may turn as the threshold moves: a range of values, per vnode.
struct Turning {
    /// The threshold before and after.
    old: Option<ArrayRef>,
    new: Option<ArrayRef>,
    /// The encoded values bounding the range (inclusive), `None` for no bound.
    low: Option<Vec<u8>>,
    high: Option<Vec<u8>>,
    /// The index in the actor's vnodes of the vnode read, and the key to read on from.
    at: Option<(usize, Vec<u8>)>,
}

/// The filter's state between messages.
struct Filter {
    inputs: Option<(BoxedExecutor, BoxedExecutor)>,
    condition: DynamicCondition,
    dist: Vec<Arc<dyn PhysicalExpr>>,
    vnodes: Vec<VirtualNode>,
    rows_def: Arc<TableCatalog>,
    rows: StateTable,
    threshold_def: Arc<TableCatalog>,
    threshold_table: StateTable,
    left_schema: SchemaRef,
    /// The compared values' type.
    value_type: ArrowType,
    /// The threshold rows are judged by (a one-row array; `None`: no row shows).
    current: Option<ArrayRef>,
    /// The threshold the right input's changes of this epoch leave (applied at its barrier).
    pending: Option<ArrayRef>,
    turning: Option<Turning>,
}

impl Filter {
    fn load(executor: DynamicFilterExecutor) -> Result<Self> {
        let DynamicFilterExecutor {
            left,
            right,
            store,
            condition,
            dist,
            vnodes,
            rows,
            threshold,
            left_schema,
        } = executor;
        let threshold_table = threshold.state_table(store.clone());
        let stored = stored_threshold(&threshold, &threshold_table)?;
        let value_type = condition.value.data_type(&left_schema)?;
        let current = stored.map(|t| arrow::compute::cast(&t, &value_type)).transpose()?;
        Ok(Self {
            inputs: Some((left, right)),
            condition,
            dist,
            vnodes,
            rows: rows.state_table(store.clone()),
            rows_def: rows,
            threshold_def: threshold,
            threshold_table,
            left_schema,
            value_type,
            pending: current.clone(),
            current,
            turning: None,
        })
    }

    /// Judges a left chunk by the current threshold and stores its rows that have a value.
    fn apply(&mut self, chunk: &StreamChunk) -> Result<Option<StreamChunk>> {
        let values = eval(self.condition.value.as_ref(), chunk.data())?;
        let keys =
            self.dist.iter().map(|k| eval(k.as_ref(), chunk.data())).collect::<Result<Vec<_>>>()?;
        let vnodes = vnodes_of(&keys, chunk.len())?;
        let valued: Vec<bool> = (0..values.len()).map(|i| values.is_valid(i)).collect();
        if valued.contains(&true) {
            let schema = self.rows_def.full_schema();
            let mut columns = vec![values.clone()];
            columns.extend(chunk.columns().iter().cloned());
            let columns = crate::stream::cast_columns(columns, &schema)?;
            let stored = RecordBatch::try_new(schema, columns)?;
            let ops: Vec<Op> = chunk.ops().to_vec();
            let (stored, ops, vnodes) = match valued.contains(&false) {
                false => (stored, ops, vnodes),
                true => {
                    let mask = BooleanArray::from(valued.clone());
                    let keep = |i: &usize| valued[*i];
                    (
                        filter_record_batch(&stored, &mask)?,
                        (0..ops.len()).filter(keep).map(|i| ops[i]).collect(),
                        (0..vnodes.len()).filter(keep).map(|i| vnodes[i]).collect(),
                    )
                }
            };
            self.rows.write_chunk_at(&StreamChunk::new(ops, stored), &vnodes)?;
        }
        let shown = self.condition.holds(&values, self.current.as_ref())?;
        mask_chunk(chunk, |i| shown[i])
    }

    /// Takes the right input's changes: the threshold its last row gives.
    fn set_threshold(&mut self, chunk: &StreamChunk) -> Result<()> {
        let Some(last) = chunk.len().checked_sub(1) else { return Ok(()) };
        if !chunk.ops()[last].is_insert() {
            self.pending = None;
            return Ok(());
        }
        let values = eval(self.condition.threshold.as_ref(), chunk.data())?;
        let value = arrow::compute::cast(&values.slice(last, 1), &self.value_type)?;
        self.pending = value.is_valid(0).then_some(value);
        Ok(())
    }

    /// Applies the threshold the epoch's right changes left: the range of values whose
    /// condition may turn, for [`Filter::next_turned`].
    fn start_turning(&mut self) -> Result<()> {
        if same(&self.pending, &self.current) {
            return Ok(());
        }
        let (old, new) = (self.current.clone(), self.pending.clone());
        self.current = self.pending.clone();
        let encoded = |t: &Option<ArrayRef>| -> Result<Option<Vec<u8>>> {
            let Some(t) = t else { return Ok(None) };
            let stored = crate::stream::cast_columns(
                vec![t.clone()],
                &Arc::new(Schema::new(vec![self.rows_def.full_schema().field(0).clone()])),
            )?;
            let mut out = vec![Vec::new()];
            encode_column(&stored[0], &mut out)?;
            Ok(out.pop())
        };
        let (a, b) = (encoded(&old)?, encoded(&new)?);
        // Floats compare in an order their encoding may not keep (-0 and 0): read them all.
        let exact = !self.value_type.is_floating();
        let (low, high) = match (a, b) {
            _ if !exact => (None, None),
            (Some(a), Some(b)) => (Some(a.clone().min(b.clone())), Some(a.max(b))),
            (Some(t), None) | (None, Some(t)) => match self.condition.upward() {
                true => (Some(t), None),
                false => (None, Some(t)),
            },
            (None, None) => return Ok(()),
        };
        let at = self.range_of(0, &low, &high).map(|(start, _)| (0, start));
        self.turning = Some(Turning { old, new, low, high, at });
        Ok(())
    }

    /// The key range of vnode number `index` (of the actor's) holding values in `low..=high`.
    fn range_of(
        &self,
        index: usize,
        low: &Option<Vec<u8>>,
        high: &Option<Vec<u8>>,
    ) -> Option<(Vec<u8>, Vec<u8>)> {
        let vnode = *self.vnodes.get(index)?;
        let id = self.rows_def.id;
        let prefix = vnode_prefix(id, vnode).to_vec();
        let start = match low {
            Some(low) => [prefix.as_slice(), low].concat(),
            None => prefix.clone(),
        };
        let end = match high {
            Some(high) => prefix_end(&[prefix.as_slice(), high].concat()),
            None => vnode_prefix(id, VirtualNode(vnode.0 + 1)).to_vec(),
        };
        Some((start, end))
    }

    /// The next output changes of the threshold's move, about a page at a time: deletes of
    /// the stored rows whose condition turned false, inserts of those it turned true. `None`
    /// once every vnode's range is read.
    fn next_turned(&mut self) -> Result<Option<StreamChunk>> {
        let (mut ops, mut parts, mut gathered) = (Vec::new(), Vec::new(), 0);
        while gathered < PAGE_ROWS {
            let Some(turning) = &mut self.turning else { break };
            let Some((index, from)) = turning.at.take() else {
                self.turning = None;
                break;
            };
            let (low, high) = (turning.low.clone(), turning.high.clone());
            let (old, new) = (turning.old.clone(), turning.new.clone());
            let (_, end) = self.range_of(index, &low, &high).expect("a vnode of the actor");
            let page = self.rows.iter_range(&from, &end, PAGE_ROWS)?;
            let next = match page.len() == PAGE_ROWS {
                true => Some((index, key_after(&page[PAGE_ROWS - 1].0))),
                false => self.range_of(index + 1, &low, &high).map(|(start, _)| (index + 1, start)),
            };
            if let Some(turning) = &mut self.turning {
                turning.at = next;
            }
            if page.is_empty() {
                continue;
            }
            let (values, rows) = self.decode(&page)?;
            let before = self.condition.holds(&values, old.as_ref())?;
            let after = self.condition.holds(&values, new.as_ref())?;
            let turned: Vec<bool> = before.iter().zip(&after).map(|(b, a)| b != a).collect();
            let n = turned.iter().filter(|t| **t).count();
            if n == 0 {
                continue;
            }
            ops.extend(
                (0..turned.len())
                    .filter(|&i| turned[i])
                    .map(|i| if after[i] { Op::Insert } else { Op::Delete }),
            );
            parts.push(filter_record_batch(&rows, &BooleanArray::from(turned))?);
            gathered += n;
        }
        if parts.is_empty() {
            return Ok(None);
        }
        let rows = arrow::compute::concat_batches(&self.left_schema, &parts)?;
        Ok(Some(StreamChunk::new(ops, rows)))
    }

    /// Stored rows: their values (of the value's type) and the left rows.
    fn decode(&self, page: &[(Vec<u8>, Vec<u8>)]) -> Result<(ArrayRef, RecordBatch)> {
        let types = self.rows_def.types();
        let all: Vec<usize> = (0..types.len()).collect();
        let mut decoder = RowDecoder::new(&types, &self.rows_def.pk, &all, page.len());
        for (key, value) in page {
            decoder.push(key, value)?;
        }
        let mut columns = decoder.finish();
        let values = arrow::compute::cast(&columns.remove(0), &self.value_type)?;
        let columns = crate::stream::cast_columns(columns, &self.left_schema)?;
        Ok((values, RecordBatch::try_new(self.left_schema.clone(), columns)?))
    }

    /// Records the current threshold (the owner of vnode 0 does) and commits both tables.
    fn commit(&mut self, epoch: Epoch) -> Result<()> {
        if self.vnodes.first() == Some(&VirtualNode(0)) {
            let schema = self.threshold_def.full_schema();
            let threshold = match &self.current {
                Some(t) => t.clone(),
                None => arrow::array::new_null_array(schema.field(1).data_type(), 1),
            };
            let columns = vec![Arc::new(Int32Array::from(vec![0])) as ArrayRef, threshold];
            let columns = crate::stream::cast_columns(columns, &schema)?;
            let row = RecordBatch::try_new(schema, columns)?;
            self.threshold_table.write_chunk(&StreamChunk::inserts(row))?;
        }
        self.rows.commit(epoch);
        self.threshold_table.commit(epoch);
        Ok(())
    }
}

/// The committed threshold in `table` (of definition `def`), if any.
fn stored_threshold(def: &TableCatalog, table: &StateTable) -> Result<Option<ArrayRef>> {
    let (start, end) = table.full_range();
    let page = table.iter_range(&start, &end, 1)?;
    let Some((key, value)) = page.first() else { return Ok(None) };
    let types = def.types();
    let mut decoder = RowDecoder::new(&types, &def.pk, &[1], 1);
    decoder.push(key, value)?;
    let value = decoder.finish().remove(0);
    Ok(value.is_valid(0).then_some(value))
}

/// Whether two thresholds are the same.
fn same(a: &Option<ArrayRef>, b: &Option<ArrayRef>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.to_data() == b.to_data(),
        _ => false,
    }
}

/// The least key after `key`.
fn key_after(key: &[u8]) -> Vec<u8> {
    let mut next = key.to_vec();
    next.push(0);
    next
}
