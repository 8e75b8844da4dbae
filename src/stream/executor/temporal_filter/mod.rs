//! `TemporalFilterExecutor`: a view's `WHERE` conditions on `now()`, such as
//! `created > now() - interval '1 hour'` (rows leave as time passes) or `due <= now()` (rows
//! enter as time passes).
//!
//! `now()` is the time of the barrier that opened the epoch ([`Barrier::time_us`]): within an
//! epoch it stands still, so a chunk's rows are judged by one clock, and each barrier moves it
//! on; the rows that moves in or out are the first changes of the epoch the barrier opens.
//! Between two barriers the view is the query's answer at the first one's time.
//!
//! A condition is one of two kinds:
//! - **leaving** (`col > f(now())`, `col >= f(now())`): true while the row is young; once false
//!   it stays false. Rows shown are kept in a state table ordered by `col`; at each barrier the
//!   rows at its start that have turned false are deleted from the output and from the table.
//! - **entering** (`col < f(now())`, `col <= f(now())`): false until its time comes, then true
//!   for good. Rows not shown yet are kept ordered by `col`; at each barrier those at the start
//!   that have turned true are inserted into the output (and kept as leaving rows, if the
//!   filter has a leaving condition too) and leave the table.
//!
//! So each barrier reads the rows that change and one more. A row whose condition is NULL
//! (`col` NULL) never shows and is never kept. An input change is judged by the current time:
//! the output changes if the row shows, and the state tables if the row is kept there, which is
//! the same judgement that was made when it came (the barriers since moved what changed).
//! After a restart the first barrier's time is later than the last committed one; the stored
//! rows are judged by it, which catches up the output with what happened meanwhile.
//!
//! The state tables are keyed `col | stream key` without a distribution key: the filter runs on
//! one actor. The output is the input's rows, its stream key the input's.
//!
//! [`Barrier::time_us`]: crate::stream::message::Barrier::time_us

#[cfg(test)]
mod tests;

use std::sync::Arc;

use arrow::array::{Array, AsArray, BooleanArray, RecordBatch, TimestampNanosecondArray};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{DataType as ArrowType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::physical_plan::PhysicalExpr;
use futures::StreamExt;

use crate::catalog::{TableCatalog, VirtualNode};
use crate::error::Result;
use crate::storage::row_codec::RowDecoder;
use crate::storage::state_table::StateTable;
use crate::storage::store::Store;
use crate::stream::eval::eval;
use crate::stream::executor::filter::mask_chunk;
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::{Message, Op, StreamChunk, unexpected_truncate};

/// Rows read from a state table at a time while a barrier looks for those that change.
const PAGE_ROWS: usize = 1024;

/// The type `now()` has in a condition: a UTC timestamp in nanoseconds, as DataFusion types it.
pub fn now_type() -> ArrowType {
    ArrowType::Timestamp(TimeUnit::Nanosecond, Some("+00:00".into()))
}

/// One condition on `now()`.
#[derive(Debug, Clone)]
pub struct TemporalCondition {
    /// The input column the condition compares with a function of `now()`; its state table is
    /// ordered by it.
    pub column: usize,
    /// The condition over `input columns ++ [now]` (the last column of type [`now_type`]).
    pub predicate: Arc<dyn PhysicalExpr>,
}

/// A condition and the state table of the rows it keeps: `_time | input columns`, keyed by
/// `_time | stream key`, where `_time` is the condition's column.
#[derive(Debug, Clone)]
pub struct KeptBy {
    /// The condition.
    pub condition: TemporalCondition,
    /// Its table.
    pub table: Arc<TableCatalog>,
}

/// The temporal filter (see the module docs).
pub struct TemporalFilterExecutor {
    input: BoxedExecutor,
    store: Arc<Store>,
    /// How many of the input's columns are visible: the conditions read those.
    visible: usize,
    /// The vnodes of the state tables this actor owns.
    vnodes: Vec<VirtualNode>,
    leaving: Option<KeptBy>,
    entering: Option<KeptBy>,
}

impl TemporalFilterExecutor {
    /// Filters `input` (rows of `visible` visible columns) by a leaving condition, an entering
    /// one, or both, keeping its rows in `vnodes` of their tables.
    pub fn new(
        input: BoxedExecutor,
        store: Arc<Store>,
        visible: usize,
        vnodes: Vec<VirtualNode>,
        leaving: Option<KeptBy>,
        entering: Option<KeptBy>,
    ) -> Self {
        Self { input, store, visible, vnodes, leaving, entering }
    }
}

impl Executor for TemporalFilterExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { input, store, visible, vnodes, leaving, entering } = *self;
        async_stream::try_stream! {
            let kept = |k: Option<KeptBy>| k.map(|k| Kept::new(k, &store, visible, &vnodes));
            let mut filter =
                Filter { leaving: kept(leaving), entering: kept(entering), now: i64::MIN };
            let mut input = input.execute();
            while let Some(msg) = input.next().await {
                match msg? {
                    Message::Chunk(chunk) => {
                        if let Some(out) = filter.apply(&chunk)? {
                            yield Message::Chunk(out);
                        }
                    }
                    Message::Barrier(barrier) => {
                        // The barrier opens an epoch whose `now()` is its time: what that
                        // changes is the epoch's first output.
                        if barrier.is_checkpoint() {
                            filter.commit(barrier.epoch.prev);
                        }
                        let time = barrier.time_us;
                        yield Message::Barrier(barrier);
                        filter.advance(time);
                        while let Some(out) = filter.next_changes()? {
                            yield Message::Chunk(out);
                        }
                    }
                    Message::Watermark(_) => {}
                    Message::Truncate => Err(unexpected_truncate("a temporal filter"))?,
                }
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "TemporalFilterExecutor"
    }
}

/// A condition with its open state table.
struct Kept {
    def: Arc<TableCatalog>,
    table: StateTable,
    condition: TemporalCondition,
    visible: usize,
    /// The input's schema (the table's columns after `_time`).
    input_schema: SchemaRef,
    /// The key ranges of the actor's vnodes: each is ordered by `_time`.
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
    /// Where the current barrier's scan for rows that changed goes on: a range (by index) and
    /// a key in it; `None` once every range met its first row that did not change.
    cursor: Option<(usize, Vec<u8>)>,
}

impl Kept {
    fn new(kept: KeptBy, store: &Arc<Store>, visible: usize, vnodes: &[VirtualNode]) -> Self {
        let table = kept.table.state_table(store.clone());
        let full = kept.table.full_schema();
        let input_schema = Arc::new(Schema::new(full.fields()[1..].to_vec()));
        let ranges = table.vnode_ranges(vnodes);
        let condition = kept.condition;
        Self { def: kept.table, table, condition, visible, input_schema, ranges, cursor: None }
    }

    /// The condition on each row of `data` (input rows) at `now`: `Some(true)`,
    /// `Some(false)`, or `None` where it is NULL.
    fn judge(&self, data: &RecordBatch, now: i64) -> Result<Vec<Option<bool>>> {
        let mut columns = data.columns()[..self.visible].to_vec();
        let mut fields: Vec<Field> =
            data.schema().fields()[..self.visible].iter().map(|f| f.as_ref().clone()).collect();
        let nanos = now.saturating_mul(1000);
        let clock =
            TimestampNanosecondArray::from(vec![nanos; data.num_rows()]).with_timezone("+00:00");
        columns.push(Arc::new(clock));
        fields.push(Field::new("now", now_type(), false));
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
        let value = eval(self.condition.predicate.as_ref(), &batch)?;
        let value = value.as_boolean();
        Ok((0..value.len()).map(|i| value.is_valid(i).then(|| value.value(i))).collect())
    }

    /// Writes the rows of `chunk` for which `keep` holds into the table: inserted or deleted
    /// as their ops say.
    fn write(&mut self, chunk: &StreamChunk, keep: &[bool]) -> Result<()> {
        if !keep.contains(&true) {
            return Ok(());
        }
        let data = filter_record_batch(chunk.data(), &BooleanArray::from(keep.to_vec()))?;
        let ops: Vec<Op> = (chunk.ops().iter().zip(keep))
            .filter(|(_, k)| **k)
            .map(|(op, _)| if op.is_insert() { Op::Insert } else { Op::Delete })
            .collect();
        let schema = self.def.full_schema();
        let time = data.column(self.condition.column);
        let mut columns = vec![arrow::compute::cast(time, schema.field(0).data_type())?];
        columns.extend(data.columns().iter().cloned());
        // Typed as stored: an unsigned count (a window's `row_number()`) is a numeric.
        let columns = crate::stream::cast_columns(columns, &schema)?;
        let rows = RecordBatch::try_new(schema, columns)?;
        self.table.write_chunk(&StreamChunk::new(ops, rows))
    }

    /// The next page of the rows at the start of each range whose condition at `now` is
    /// `turned` (or NULL), taken out of the table: `None` once the scan met, in every range, a
    /// row whose condition is not.
    fn take_page(&mut self, now: i64, turned: bool) -> Result<Option<RecordBatch>> {
        while let Some((range, from)) = self.cursor.take() {
            let page = self.table.iter_range(&from, &self.ranges[range].1, PAGE_ROWS)?;
            let rows = if page.is_empty() { None } else { Some(self.decode(&page)?) };
            let n = match &rows {
                Some(rows) => {
                    let judged = self.judge(rows, now)?;
                    judged.iter().take_while(|j| j.is_none_or(|j| j == turned)).count()
                }
                None => 0,
            };
            for (key, _) in &page[..n] {
                self.table.delete(key.clone());
            }
            self.cursor = match n == PAGE_ROWS {
                true => Some((range, key_after(&page[n - 1].0))),
                false => self.next_range(range),
            };
            if let Some(rows) = rows.filter(|_| n > 0) {
                return Ok(Some(rows.slice(0, n)));
            }
        }
        Ok(None)
    }

    /// The start of the range after `range`, if there is one.
    fn next_range(&self, range: usize) -> Option<(usize, Vec<u8>)> {
        self.ranges.get(range + 1).map(|(start, _)| (range + 1, start.clone()))
    }

    /// Stored rows, as input rows.
    fn decode(&self, page: &[(Vec<u8>, Vec<u8>)]) -> Result<RecordBatch> {
        let types = self.def.types();
        let columns: Vec<usize> = (1..types.len()).collect();
        let mut decoder = RowDecoder::new(&types, &self.def.pk, &columns, page.len());
        for (key, value) in page {
            decoder.push(key, value)?;
        }
        let columns = crate::stream::cast_columns(decoder.finish(), &self.input_schema)?;
        Ok(RecordBatch::try_new(self.input_schema.clone(), columns)?)
    }
}

/// The least key after `key`.
fn key_after(key: &[u8]) -> Vec<u8> {
    let mut next = key.to_vec();
    next.push(0);
    next
}

/// The filter's state between messages.
struct Filter {
    leaving: Option<Kept>,
    entering: Option<Kept>,
    /// The time of the last barrier, in microseconds since 1970 (it never goes back).
    now: i64,
}

impl Filter {
    /// The output changes of an input chunk, judged at the current time; the rows to keep
    /// are stored.
    fn apply(&mut self, chunk: &StreamChunk) -> Result<Option<StreamChunk>> {
        let n = chunk.len();
        let leave = match &self.leaving {
            Some(k) => k.judge(chunk.data(), self.now)?,
            None => vec![Some(true); n],
        };
        let enter = match &self.entering {
            Some(k) => k.judge(chunk.data(), self.now)?,
            None => vec![Some(true); n],
        };
        let shown: Vec<bool> =
            leave.iter().zip(&enter).map(|(l, e)| *l == Some(true) && *e == Some(true)).collect();
        if let Some(kept) = &mut self.leaving {
            kept.write(chunk, &shown)?;
        }
        if let Some(kept) = &mut self.entering {
            // Not shown yet, but will be. A delete goes whatever the leaving condition says
            // now: the row was kept while it was true.
            let waiting: Vec<bool> = (enter.iter().zip(&leave).zip(chunk.ops()))
                .map(|((e, l), op)| *e == Some(false) && (!op.is_insert() || *l == Some(true)))
                .collect();
            kept.write(chunk, &waiting)?;
        }
        mask_chunk(chunk, |i| shown[i])
    }

    /// Moves the clock to a barrier's time (never back) and starts the scans for the rows
    /// that changed: see [`Filter::next_changes`].
    fn advance(&mut self, time_us: i64) {
        self.now = self.now.max(time_us);
        for kept in [&mut self.leaving, &mut self.entering].into_iter().flatten() {
            kept.cursor = kept.ranges.first().map(|(start, _)| (0, start.clone()));
        }
    }

    /// The next output changes the clock's move makes, a page at a time: deletes of the rows
    /// whose leaving condition turned false, then inserts of those whose entering condition
    /// turned true (and whose leaving condition holds). `None` when there are no more.
    fn next_changes(&mut self) -> Result<Option<StreamChunk>> {
        let now = self.now;
        if let Some(kept) = &mut self.leaving {
            while kept.cursor.is_some() {
                if let Some(gone) = kept.take_page(now, false)? {
                    return Ok(Some(StreamChunk::deletes(gone)));
                }
            }
        }
        let Some(kept) = &mut self.entering else { return Ok(None) };
        while kept.cursor.is_some() {
            let Some(come) = kept.take_page(now, true)? else { continue };
            let come = match &mut self.leaving {
                Some(leaving) => {
                    let shown: Vec<bool> =
                        leaving.judge(&come, now)?.iter().map(|l| *l == Some(true)).collect();
                    let come = filter_record_batch(&come, &BooleanArray::from(shown))?;
                    let chunk = StreamChunk::inserts(come.clone());
                    leaving.write(&chunk, &vec![true; come.num_rows()])?;
                    come
                }
                None => come,
            };
            if come.num_rows() > 0 {
                return Ok(Some(StreamChunk::inserts(come)));
            }
        }
        Ok(None)
    }

    fn commit(&mut self, epoch: crate::catalog::Epoch) {
        for kept in [&mut self.leaving, &mut self.entering].into_iter().flatten() {
            kept.table.commit(epoch);
        }
    }
}
