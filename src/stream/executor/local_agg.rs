//! `LocalAggExecutor`: the first phase of a two-phase aggregation.
//!
//! A grouped aggregate runs behind an exchange that sends each row to the actor owning its
//! group. Without a first phase, every input row crosses that exchange and is folded into its
//! group there one by one. With it, each actor of the input fragment first adds up its own rows
//! per group and sends one *partial row* per group instead, laid out as the aggregate's result
//! table: `group values ++ row_count ++ one state per call`, where a `count` state is the change
//! of the count and a `sum` state the change of the sum and of the number of non-NULL inputs.
//! The final aggregate ([`HashAggExecutor`](super::hash_agg::HashAggExecutor) in merge mode)
//! adds a partial row to its group as it would have added the rows it stands for.
//!
//! Signs travel in the values: a retraction subtracts from its group's partial row, so every
//! partial row is an insert, and a group whose changes cancel out is not sent at all.
//!
//! ```text
//! SELECT a, count(*), sum(b) .. GROUP BY a
//!
//! input (one actor)            partial rows sent at the barrier
//! + a=1 b=10                   a  row_count  count  sum  nonnull
//! + a=1 b=.                    1  0          0      -10  0
//! + a=2 b=5                    2  1          1      5    1
//! - a=1 b=20
//! - a=1 b=.
//! ```
//!
//! It keeps nothing across barriers: it sends what it has before it forwards a barrier, and
//! also once it holds [`LOCAL_GROUPS`] groups, so its memory is bounded whatever the epoch. When
//! the rows it folded since its last send were fewer than twice its groups, pre-aggregating
//! does not pay (nearly every row is a group of its own): it then passes every row on as a
//! partial row of its own, without hashing, until the next barrier.
//!
//! Only functions whose states add up exactly take part: `count`, and `sum` of integers and
//! numerics (the planner decides, see `src/sql/planner.rs`).

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Decimal128Array, Int64Array, RecordBatch,
    RecordBatchOptions,
};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{DataType as ArrowType, Decimal128Type, Int64Type, SchemaRef};
use arrow::row::{RowConverter, Rows, SortField};
use datafusion::physical_plan::PhysicalExpr;
use futures::StreamExt;

use crate::error::{Error, Result};
use crate::stream::eval::{eval, validity};
use crate::stream::executor::hash_agg::sum::SumLayout;
use crate::stream::executor::hash_agg::{AggCall, AggKind, cast};
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::{Message, Op, StreamChunk, unexpected_truncate};
use crate::types::numeric::Special;
use crate::types::specials::{Specials, special_index, split_specials};

/// Groups one actor adds up before it sends them (see the module docs). Above the group
/// count of a join key with a hundred thousand values (an eager aggregation's partial groups):
/// at 65 536, such an input filled the table after fewer than two rows per group and went
/// through unaggregated.
pub const LOCAL_GROUPS: usize = 1 << 18;

/// Partial rows per chunk sent: the final aggregate takes a chunk's groups into memory at once,
/// so a send of [`LOCAL_GROUPS`] goes as many chunks, between which it may flush (see
/// [`HashAggExecutor`](super::hash_agg::HashAggExecutor)).
pub const SEND_ROWS: usize = 8192;

/// Pre-aggregates its input per group (see the module docs).
pub struct LocalAggExecutor {
    input: BoxedExecutor,
    group_exprs: Vec<Arc<dyn PhysicalExpr>>,
    calls: Vec<AggCall>,
    output_schema: SchemaRef,
    max_groups: usize,
}

impl LocalAggExecutor {
    /// Pre-aggregates `input` by `group_exprs` into partial rows of `output_schema`: the group
    /// columns (typed as the final aggregate's), `row_count`, then per call its state columns.
    pub fn new(
        input: BoxedExecutor,
        group_exprs: Vec<Arc<dyn PhysicalExpr>>,
        calls: Vec<AggCall>,
        output_schema: SchemaRef,
    ) -> Result<Self> {
        for call in &calls {
            if !partial_state_adds_up(call.kind, &call.output_type) {
                return Err(Error::Stream(format!(
                    "{:?} of {} has no partial state that adds up",
                    call.kind, call.output_type
                )));
            }
        }
        Ok(Self { input, group_exprs, calls, output_schema, max_groups: LOCAL_GROUPS })
    }

    /// The same, sending its groups once it holds `max_groups` of them.
    pub fn with_max_groups(mut self, max_groups: usize) -> Self {
        self.max_groups = max_groups.max(1);
        self
    }
}

/// True if a call of `kind` with result type `output_type` can be pre-aggregated: its state
/// is a count, or the sum of integers (kept as `Int64`) or numerics, which add up exactly
/// (wrapping as the final aggregate's own sums do) in any order.
pub fn partial_state_adds_up(kind: AggKind, output_type: &ArrowType) -> bool {
    match kind {
        AggKind::Count => true,
        AggKind::Sum => matches!(output_type, ArrowType::Int64 | ArrowType::Decimal128(..)),
        _ => false,
    }
}

impl Executor for LocalAggExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { input, group_exprs, calls, output_schema, max_groups } = *self;
        async_stream::try_stream! {
            let mut partial = Partial::new(group_exprs, calls, output_schema, max_groups)?;
            let mut input = input.execute();
            while let Some(msg) = input.next().await {
                match msg? {
                    Message::Chunk(chunk) => {
                        if let Some(chunk) = partial.apply(&chunk)? {
                            for part in chunk.split(SEND_ROWS) {
                                yield Message::Chunk(part);
                            }
                        }
                    }
                    Message::Barrier(barrier) => {
                        if let Some(chunk) = partial.flush()? {
                            for part in chunk.split(SEND_ROWS) {
                                yield Message::Chunk(part);
                            }
                        }
                        partial.passing = false;
                        yield Message::Barrier(barrier);
                    }
                    Message::Watermark(_) => {}
                    Message::Truncate => Err(unexpected_truncate("an aggregate"))?,
                }
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "LocalAggExecutor"
    }
}

/// The running sums of one call, one entry per group.
enum Acc {
    /// `count`: the change of the count.
    Count(Vec<i64>),
    /// `sum`: the change of the sum of the finite inputs and of their number, and (a numeric
    /// sum) of the numbers of `NaN`, `Infinity` and `-Infinity` inputs.
    Sum { sums: Vec<i128>, nonnull: Vec<i64>, specials: Option<Vec<Specials>> },
}

/// The groups added up since the last send.
struct Partial {
    group_exprs: Vec<Arc<dyn PhysicalExpr>>,
    calls: Vec<AggCall>,
    schema: SchemaRef,
    max_groups: usize,
    groups: Groups,
    /// The group of each row of the chunk being folded (kept to reuse its allocation).
    slots: Vec<usize>,
    row_counts: Vec<i64>,
    accs: Vec<Acc>,
    /// Input rows folded since the last send.
    folded: usize,
    /// Passing rows on one by one until the next barrier (see the module docs).
    passing: bool,
}

impl Partial {
    fn new(
        group_exprs: Vec<Arc<dyn PhysicalExpr>>,
        calls: Vec<AggCall>,
        schema: SchemaRef,
        max_groups: usize,
    ) -> Result<Self> {
        let types: Vec<ArrowType> =
            schema.fields()[..group_exprs.len()].iter().map(|f| f.data_type().clone()).collect();
        let mut at = group_exprs.len() + 1;
        let accs = calls
            .iter()
            .map(|c| match c.kind {
                AggKind::Count => {
                    at += 1;
                    Acc::Count(Vec::new())
                }
                _ => {
                    let layout = SumLayout::of_fields(schema.fields(), at);
                    at += layout.width();
                    let specials = layout.specials.then(Vec::new);
                    Acc::Sum { sums: Vec::new(), nonnull: Vec::new(), specials }
                }
            })
            .collect();
        Ok(Self {
            group_exprs,
            calls,
            schema,
            max_groups,
            groups: Groups::new(&types)?,
            slots: Vec::new(),
            row_counts: Vec::new(),
            accs,
            folded: 0,
            passing: false,
        })
    }

    /// The group columns of `chunk`, typed as the output's.
    fn group_columns(&self, chunk: &StreamChunk) -> Result<Vec<ArrayRef>> {
        self.group_exprs
            .iter()
            .enumerate()
            .map(|(i, e)| cast(eval(e.as_ref(), chunk.data())?, self.schema.field(i).data_type()))
            .collect()
    }

    /// Call `i`'s argument over `chunk`, typed as its state, and for a sum which rows hold
    /// `NaN` or an infinity (left out of the argument).
    fn argument(
        &self,
        i: usize,
        chunk: &StreamChunk,
    ) -> Result<(ArrayRef, Option<Vec<Option<Special>>>)> {
        let call = &self.calls[i];
        let value = eval(call.arg.as_ref(), chunk.data())?;
        match (call.kind, &self.accs[i]) {
            // A NULL literal evaluates to a `NullArray`, which has no validity buffer: its rows
            // answer `is_valid` true. As a typed array of NULLs they count as the NULLs they are.
            (AggKind::Count, _) if value.data_type() == &ArrowType::Null => {
                Ok((arrow::array::new_null_array(&ArrowType::Int64, value.len()), None))
            }
            (AggKind::Count, _) => Ok((value, None)),
            (_, Acc::Sum { specials: Some(_), .. }) => {
                let (finite, specials) = split_specials(value);
                Ok((cast(finite, &call.output_type)?, specials))
            }
            _ => {
                Ok((cast(crate::types::numeric::specials_as_null(value), &call.output_type)?, None))
            }
        }
    }

    /// Folds `chunk` into the groups, or passes it on as partial rows; returns what must be
    /// sent now.
    fn apply(&mut self, chunk: &StreamChunk) -> Result<Option<StreamChunk>> {
        if self.passing {
            return self.pass(chunk).map(Some);
        }
        let n = chunk.len();
        let columns = self.group_columns(chunk)?;
        let mut slots = std::mem::take(&mut self.slots);
        self.groups.slots(&columns, &mut slots)?;
        let groups = self.groups.len();
        self.row_counts.resize(groups, 0);
        for acc in &mut self.accs {
            match acc {
                Acc::Count(counts) => counts.resize(groups, 0),
                Acc::Sum { sums, nonnull, specials } => {
                    sums.resize(groups, 0);
                    nonnull.resize(groups, 0);
                    if let Some(specials) = specials {
                        specials.resize(groups, [0; 3]);
                    }
                }
            }
        }
        let signs = signs(chunk);
        for (&slot, &sign) in slots.iter().zip(&signs) {
            self.row_counts[slot] += sign;
        }
        for i in 0..self.calls.len() {
            let (arg, special_rows) = self.argument(i, chunk)?;
            if let (Some(rows), Acc::Sum { specials: Some(specials), .. }) =
                (special_rows, &mut self.accs[i])
            {
                for (row, special) in rows.into_iter().enumerate() {
                    if let Some(s) = special {
                        specials[slots[row]][special_index(s)] += signs[row];
                    }
                }
            }
            match (&mut self.accs[i], arg.data_type()) {
                (Acc::Count(counts), _) => {
                    let valid = validity(&arg);
                    for (row, (&slot, &sign)) in slots.iter().zip(&signs).enumerate() {
                        if valid(row) {
                            counts[slot] += sign;
                        }
                    }
                }
                (Acc::Sum { sums, nonnull, .. }, ArrowType::Int64) => {
                    let values = arg.as_primitive::<Int64Type>().values();
                    add_up(sums, nonnull, &slots, &signs, &arg, |row| i128::from(values[row]));
                }
                (Acc::Sum { sums, nonnull, .. }, ArrowType::Decimal128(..)) => {
                    let values = arg.as_primitive::<Decimal128Type>().values();
                    add_up(sums, nonnull, &slots, &signs, &arg, |row| values[row]);
                }
                (Acc::Sum { .. }, other) => {
                    return Err(Error::Stream(format!("a partial sum of {other}")));
                }
            }
        }
        self.slots = slots;
        self.folded += n;
        if self.row_counts.len() < self.max_groups {
            return Ok(None);
        }
        // Pre-aggregating pays only if the groups are much fewer than the rows.
        self.passing = self.folded < 2 * self.row_counts.len();
        self.flush()
    }

    /// The partial rows of the groups added up so far (those that changed), and forgets them.
    fn flush(&mut self) -> Result<Option<StreamChunk>> {
        let n = self.row_counts.len();
        if n == 0 {
            return Ok(None);
        }
        let mut columns = self.groups.take_columns()?;
        let mut changed: Vec<bool> = self.row_counts.iter().map(|&c| c != 0).collect();
        columns.push(Arc::new(Int64Array::from(std::mem::take(&mut self.row_counts))));
        for (i, acc) in self.accs.iter_mut().enumerate() {
            match acc {
                Acc::Count(counts) => {
                    mark_changed(&mut changed, counts.iter().map(|&c| c != 0));
                    columns.push(Arc::new(Int64Array::from(std::mem::take(counts))));
                }
                Acc::Sum { sums, nonnull, specials } => {
                    mark_changed(&mut changed, sums.iter().map(|&s| s != 0));
                    mark_changed(&mut changed, nonnull.iter().map(|&c| c != 0));
                    let sums = std::mem::take(sums);
                    columns.push(sum_array(sums, &self.calls[i].output_type)?);
                    columns.push(Arc::new(Int64Array::from(std::mem::take(nonnull))));
                    if let Some(specials) = specials {
                        let specials = std::mem::take(specials);
                        mark_changed(&mut changed, specials.iter().map(|s| *s != [0; 3]));
                        for k in 0..3 {
                            columns.push(Arc::new(Int64Array::from_iter_values(
                                specials.iter().map(|s| s[k]),
                            )));
                        }
                    }
                }
            }
        }
        self.folded = 0;
        let options = RecordBatchOptions::new().with_row_count(Some(n));
        let batch = RecordBatch::try_new_with_options(self.schema.clone(), columns, &options)?;
        let kept = changed.iter().filter(|&&c| c).count();
        if kept == 0 {
            return Ok(None);
        }
        let batch = match kept == n {
            true => batch,
            false => filter_record_batch(&batch, &BooleanArray::from(changed))?,
        };
        Ok(Some(StreamChunk::new(vec![Op::Insert; kept], batch)))
    }

    /// Every row of `chunk` as a partial row of its own.
    fn pass(&self, chunk: &StreamChunk) -> Result<StreamChunk> {
        let n = chunk.len();
        let signs = signs(chunk);
        let mut columns = self.group_columns(chunk)?;
        columns.push(Arc::new(Int64Array::from(signs.clone())));
        for i in 0..self.calls.len() {
            let (arg, special_rows) = self.argument(i, chunk)?;
            let valid = validity(&arg);
            let counted = |row: usize| if valid(row) { signs[row] } else { 0 };
            let counts: Int64Array = (0..n).map(|row| Some(counted(row))).collect();
            if self.calls[i].kind != AggKind::Count {
                let sums: Vec<i128> = match arg.data_type() {
                    ArrowType::Int64 => {
                        let values = arg.as_primitive::<Int64Type>().values();
                        (0..n).map(|row| i128::from(values[row]) * counted(row) as i128).collect()
                    }
                    ArrowType::Decimal128(..) => {
                        let values = arg.as_primitive::<Decimal128Type>().values();
                        (0..n).map(|row| values[row].wrapping_mul(counted(row) as i128)).collect()
                    }
                    other => return Err(Error::Stream(format!("a partial sum of {other}"))),
                };
                columns.push(sum_array(sums, &self.calls[i].output_type)?);
            }
            columns.push(Arc::new(counts));
            if let Acc::Sum { specials: Some(_), .. } = &self.accs[i] {
                let special_rows = special_rows.unwrap_or_else(|| vec![None; n]);
                for k in 0..3 {
                    let is = |row: usize| special_rows[row].is_some_and(|s| special_index(s) == k);
                    let counts = (0..n).map(|row| if is(row) { signs[row] } else { 0 });
                    columns.push(Arc::new(Int64Array::from_iter_values(counts)));
                }
            }
        }
        let options = RecordBatchOptions::new().with_row_count(Some(n));
        let batch = RecordBatch::try_new_with_options(self.schema.clone(), columns, &options)?;
        Ok(StreamChunk::new(vec![Op::Insert; n], batch))
    }
}

/// The groups of a [`Partial`], each numbered by the order it was first seen (its slot in the
/// running sums).
enum Groups {
    /// One integer group column, grouped by value: no row encoding, and a lookup hashes and
    /// compares a number rather than bytes behind a pointer.
    Int {
        ty: ArrowType,
        index: hashbrown::HashMap<i64, usize>,
        /// The slot of the NULL group, if seen.
        null: Option<usize>,
        /// Each group's value (`None`: NULL), by slot.
        values: Vec<Option<i64>>,
        /// The slots by value while the values lie in a narrow range (then `index` is empty).
        dense: Dense,
    },
    /// Any other group key, grouped by the row-format bytes of its values.
    Rows {
        converter: RowConverter,
        /// The groups' values, by slot.
        rows: Rows,
        index: hashbrown::HashMap<Box<[u8]>, usize>,
    },
}

/// The slots of integer groups by value while the values seen lie in a range of at most
/// [`DENSE_SPAN`]: a row's lookup is then one read of an array that stays in a core's cache
/// (100 000 groups take 400 KB), where a hash table probe of as many groups misses it (an
/// eager aggregation's groups, visited in any order).
#[derive(Default)]
struct Dense {
    /// The value of entry 0.
    base: i64,
    /// The slot of each value from `base` on; [`NO_SLOT`] where no group has it.
    slots: Vec<u32>,
    /// The values went beyond the span: the hash index holds the groups until they are taken.
    off: bool,
}

/// The widest range of values [`Dense`] indexes: 4 MB of slots.
const DENSE_SPAN: i128 = 1 << 20;

/// A value no group has yet.
const NO_SLOT: u32 = u32::MAX;

impl Dense {
    /// Widens the index to the values `lo..=hi`, or turns it off (moving the groups of
    /// `values` into `index`) when the range grows past [`DENSE_SPAN`].
    fn cover(
        &mut self,
        lo: i64,
        hi: i64,
        values: &[Option<i64>],
        index: &mut hashbrown::HashMap<i64, usize>,
    ) {
        let (start, end) = match self.slots.is_empty() {
            true => (i128::from(lo), i128::from(hi) + 1),
            false => {
                let end = i128::from(self.base) + self.slots.len() as i128;
                (i128::from(lo).min(self.base.into()), end.max(i128::from(hi) + 1))
            }
        };
        if end - start > DENSE_SPAN {
            self.off = true;
            self.slots = Vec::new();
            let groups = values.iter().enumerate();
            index.extend(groups.filter_map(|(slot, v)| v.map(|v| (v, slot))));
            return;
        }
        if self.slots.is_empty() || start < i128::from(self.base) {
            let shift = match self.slots.is_empty() {
                true => 0,
                false => (i128::from(self.base) - start) as usize,
            };
            let mut slots = vec![NO_SLOT; shift];
            slots.append(&mut self.slots);
            self.slots = slots;
            self.base = start as i64;
        }
        self.slots.resize((end - start) as usize, NO_SLOT);
    }
}

impl Groups {
    fn new(types: &[ArrowType]) -> Result<Self> {
        if let [ty @ (ArrowType::Int16 | ArrowType::Int32 | ArrowType::Int64)] = types {
            return Ok(Groups::Int {
                ty: ty.clone(),
                index: hashbrown::HashMap::new(),
                null: None,
                values: Vec::new(),
                dense: Dense::default(),
            });
        }
        let converter =
            RowConverter::new(types.iter().map(|t| SortField::new(t.clone())).collect())?;
        let rows = converter.empty_rows(0, 0);
        Ok(Groups::Rows { converter, rows, index: hashbrown::HashMap::new() })
    }

    /// The number of groups.
    fn len(&self) -> usize {
        match self {
            Groups::Int { values, .. } => values.len(),
            Groups::Rows { rows, .. } => rows.num_rows(),
        }
    }

    /// Sets `slots` to the slot of each row's group in `columns` (the group values), adding
    /// the groups not seen yet.
    fn slots(&mut self, columns: &[ArrayRef], slots: &mut Vec<usize>) -> Result<()> {
        slots.clear();
        match self {
            Groups::Int { index, null, values, dense, .. } => {
                let column = arrow::compute::cast(&columns[0], &ArrowType::Int64)?;
                let column = column.as_primitive::<Int64Type>();
                if !dense.off
                    && let (Some(lo), Some(hi)) =
                        (arrow::compute::min(column), arrow::compute::max(column))
                {
                    dense.cover(lo, hi, values, index);
                }
                for (row, &v) in column.values().iter().enumerate() {
                    let slot = if column.is_null(row) {
                        *null.get_or_insert_with(|| {
                            values.push(None);
                            values.len() - 1
                        })
                    } else if !dense.off {
                        let slot = &mut dense.slots[(v - dense.base) as usize];
                        if *slot == NO_SLOT {
                            values.push(Some(v));
                            *slot = (values.len() - 1) as u32;
                        }
                        *slot as usize
                    } else {
                        *index.entry(v).or_insert_with(|| {
                            values.push(Some(v));
                            values.len() - 1
                        })
                    };
                    slots.push(slot);
                }
            }
            Groups::Rows { converter, rows, index } => {
                for row in converter.convert_columns(columns)?.iter() {
                    let bytes = row.as_ref();
                    let slot = match index.get(bytes) {
                        Some(&slot) => slot,
                        None => {
                            let slot = rows.num_rows();
                            rows.push(row);
                            index.insert(bytes.into(), slot);
                            slot
                        }
                    };
                    slots.push(slot);
                }
            }
        }
        Ok(())
    }

    /// The group values as columns, by slot; forgets the groups.
    fn take_columns(&mut self) -> Result<Vec<ArrayRef>> {
        match self {
            Groups::Int { ty, index, null, values, dense } => {
                index.clear();
                *null = None;
                *dense = Dense::default();
                let column: ArrayRef = Arc::new(Int64Array::from(std::mem::take(values)));
                Ok(vec![arrow::compute::cast(&column, ty)?])
            }
            Groups::Rows { converter, rows, index } => {
                let columns = converter.convert_rows(rows.iter())?;
                rows.clear();
                index.clear();
                Ok(columns)
            }
        }
    }
}

/// +1 for each inserted row of `chunk`, -1 for each deleted one.
fn signs(chunk: &StreamChunk) -> Vec<i64> {
    chunk.ops().iter().map(|op| if op.is_insert() { 1 } else { -1 }).collect()
}

/// Adds the signed non-NULL values of `arg` to their groups' sums and counts, wrapping.
fn add_up(
    sums: &mut [i128],
    nonnull: &mut [i64],
    slots: &[usize],
    signs: &[i64],
    arg: &ArrayRef,
    value: impl Fn(usize) -> i128,
) {
    let valid = validity(arg);
    for (row, (&slot, &sign)) in slots.iter().zip(signs).enumerate() {
        if valid(row) {
            let v = value(row);
            sums[slot] =
                if sign > 0 { sums[slot].wrapping_add(v) } else { sums[slot].wrapping_sub(v) };
            nonnull[slot] += sign;
        }
    }
}

fn mark_changed(changed: &mut [bool], by: impl Iterator<Item = bool>) {
    for (c, b) in changed.iter_mut().zip(by) {
        *c |= b;
    }
}

/// Sums as a column of the call's state type (`Int64` wraps, as the final aggregate's sums do).
fn sum_array(sums: Vec<i128>, ty: &ArrowType) -> Result<ArrayRef> {
    Ok(match ty {
        ArrowType::Int64 => {
            Arc::new(sums.into_iter().map(|s| Some(s as i64)).collect::<Int64Array>())
        }
        &ArrowType::Decimal128(p, s) => {
            Arc::new(Decimal128Array::from(sums).with_precision_and_scale(p, s)?)
        }
        other => return Err(Error::Stream(format!("a partial sum of {other}"))),
    })
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{Field, Schema};
    use datafusion::physical_expr::expressions::{Column, Literal};
    use datafusion::scalar::ScalarValue;

    use super::*;
    use crate::stream::test_utils::{MockSource, barrier, chunk, dedent, run, schema};

    /// A local aggregation of `input` (rows of the column types `header`) grouped by its first
    /// column, computing `calls` (e.g. `"count(*) sum(c1)"`), sending at `max_groups` groups.
    async fn local(
        header: &str,
        calls: &str,
        max_groups: usize,
        input: impl IntoIterator<Item = Message>,
    ) -> String {
        let in_schema = schema(header);
        let mut fields = vec![
            Field::new("group_0", in_schema.field(0).data_type().clone(), true),
            Field::new("row_count", ArrowType::Int64, true),
        ];
        let mut agg_calls = Vec::new();
        for call in calls.split_whitespace() {
            let (name, arg) = call.strip_suffix(')').and_then(|c| c.split_once('(')).unwrap();
            let arg: Arc<dyn PhysicalExpr> = match arg {
                "*" => Arc::new(Literal::new(ScalarValue::Int64(Some(1)))),
                "null" => Arc::new(Literal::new(ScalarValue::Null)),
                column => {
                    let index: usize = column.strip_prefix('c').unwrap().parse().unwrap();
                    Arc::new(Column::new(column, index))
                }
            };
            let (kind, output_type) = match (name, arg.data_type(&in_schema).unwrap()) {
                ("count", _) => (AggKind::Count, ArrowType::Int64),
                ("sum", ArrowType::Decimal128(p, s)) => (AggKind::Sum, ArrowType::Decimal128(p, s)),
                ("sum", _) => (AggKind::Sum, ArrowType::Int64),
                (other, _) => panic!("no partial state for {other}"),
            };
            fields.push(Field::new("state", output_type.clone(), true));
            if kind == AggKind::Sum {
                fields.push(Field::new("nonnull", ArrowType::Int64, true));
            }
            agg_calls.push(AggCall {
                kind,
                arg,
                output_type,
                multiset: None,
                distinct: false,
                listing: None,
            });
        }
        let group: Arc<dyn PhysicalExpr> = Arc::new(Column::new("c0", 0));
        let output = Arc::new(Schema::new(fields));
        let executor =
            LocalAggExecutor::new(MockSource::boxed(input), vec![group], agg_calls, output)
                .unwrap()
                .with_max_groups(max_groups);
        sorted(&run(Box::new(executor)).await)
    }

    /// `out` with the rows of each chunk sorted: groups come out in hash-map order.
    fn sorted(out: &str) -> String {
        let blocks = out.split("\n\n").map(|block| {
            let mut lines: Vec<&str> = block.lines().collect();
            if !lines[0].starts_with("barrier") {
                lines[1..].sort();
            }
            lines.join("\n")
        });
        blocks.collect::<Vec<_>>().join("\n\n")
    }

    #[tokio::test]
    async fn rows_of_a_group_are_added_up_signed_and_sent_before_the_barrier() {
        let input = [
            chunk("i I\n+ 1 10\n+ 1 .\n+ 2 5"),
            chunk("i I\n- 1 20\nU- 1 .\nU+ 3 7"),
            barrier(1),
            chunk("i I\n+ 2 1"),
            barrier(2),
        ];
        let expected = "i I I I I
                        + 1 0 0 -10 0
                        + 2 1 1 5 1
                        + 3 1 1 7 1

                        barrier 1

                        i I I I I
                        + 2 1 1 1 1

                        barrier 2";
        assert_eq!(local("i I", "count(*) sum(c1)", 100, input).await, dedent(expected));
    }

    #[tokio::test]
    async fn a_count_of_null_counts_nothing_folded_or_passed_on() {
        // The first chunk is folded; past the limit of 1 group the second is passed on row by
        // row (see the test below).
        let input = [chunk("i I\n+ 1 10\n+ 1 11"), chunk("i I\n+ 2 5\n+ 3 6"), barrier(1)];
        let expected = "i I I
                        + 1 2 0

                        i I I
                        + 2 1 0
                        + 3 1 0

                        barrier 1";
        assert_eq!(local("i I", "count(null)", 1, input).await, dedent(expected));
    }

    #[tokio::test]
    async fn a_group_whose_changes_cancel_out_is_not_sent_but_a_moved_sum_is() {
        let input =
            [chunk("i I I\n+ 1 10 .\n- 1 10 ."), chunk("i I I\nU- 2 3 4\nU+ 2 5 4"), barrier(1)];
        let expected = "i I I I I I
                        + 2 0 0 2 0 0

                        barrier 1";
        assert_eq!(
            local("i I I", "count(*) sum(c1) count(c2)", 100, input).await,
            dedent(expected)
        );
    }

    #[tokio::test]
    async fn past_its_group_limit_it_sends_early_and_passes_rows_on_when_pre_aggregating_does_not_pay()
     {
        let input = [
            // 3 rows, 3 groups at a limit of 2: sent at once, and the rest of the epoch passes.
            chunk("i I\n+ 1 10\n+ 2 20\n+ 3 30"),
            chunk("i I\n+ 1 1\n- 1 .\n+ 1 2"),
            barrier(1),
            // A new epoch adds up again: 4 rows, 2 groups.
            chunk("i I\n+ 1 1\n+ 1 2\n+ 2 3\n+ 2 4"),
            chunk("i I\n+ 5 5"),
            barrier(2),
        ];
        let expected = "i I I I
                        + 1 1 10 1
                        + 2 1 20 1
                        + 3 1 30 1

                        i I I I
                        + 1 -1 0 0
                        + 1 1 1 1
                        + 1 1 2 1

                        barrier 1

                        i I I I
                        + 1 2 3 2
                        + 2 2 7 2

                        i I I I
                        + 5 1 5 1

                        barrier 2";
        assert_eq!(local("i I", "sum(c1)", 2, input).await, dedent(expected));
    }

    #[tokio::test]
    async fn null_is_a_group_of_its_own_whether_grouped_by_number_or_by_text() {
        // One integer group column is grouped by value, any other key by its encoded bytes.
        let numbers = [chunk("i I\n+ . 1\n+ 1 2\n+ . 3\n- 1 2"), barrier(1)];
        let expected = "i I I I
                        + . 2 4 2

                        barrier 1";
        assert_eq!(local("i I", "sum(c1)", 100, numbers).await, dedent(expected));
        let texts = [chunk("T I\n+ a 1\n+ . 2\n+ a 3\n- b 4"), barrier(1)];
        let expected = "T I I I
                        + . 1 2 1
                        + a 2 4 2
                        + b -1 -4 -1

                        barrier 1";
        assert_eq!(local("T I", "sum(c1)", 100, texts).await, dedent(expected));
    }

    #[test]
    fn integer_groups_keep_their_slots_as_the_index_widens_and_turns_to_hashing() {
        let mut groups = Groups::new(&[ArrowType::Int32]).unwrap();
        let mut slots = Vec::new();
        let mut slots_of = |groups: &mut Groups, values: Vec<Option<i32>>| {
            let column: ArrayRef = Arc::new(arrow::array::Int32Array::from(values));
            groups.slots(&[column], &mut slots).unwrap();
            slots.clone()
        };
        assert_eq!(slots_of(&mut groups, vec![Some(5), Some(7), Some(5)]), [0, 1, 0]);
        // Below the range: the index moves its base.
        assert_eq!(slots_of(&mut groups, vec![Some(3), None, Some(7)]), [2, 3, 1]);
        // Far beyond it: the groups move to the hash index.
        assert_eq!(slots_of(&mut groups, vec![Some(1 << 30), Some(-9)]), [4, 5]);
        assert_eq!(
            slots_of(&mut groups, vec![Some(7), Some(1 << 30), Some(3), None]),
            [1, 4, 2, 3]
        );
        let values = groups.take_columns().unwrap();
        let expected: ArrayRef = Arc::new(arrow::array::Int32Array::from(vec![
            Some(5),
            Some(7),
            Some(3),
            None,
            Some(1 << 30),
            Some(-9),
        ]));
        assert_eq!(&values[0], &expected);
        // Taken: the next groups start over, indexed densely again.
        assert_eq!(slots_of(&mut groups, vec![Some(1 << 30), Some((1 << 30) - 2)]), [0, 1]);
        assert!(matches!(&groups, Groups::Int { dense, .. } if !dense.off));
    }

    #[tokio::test]
    async fn sums_of_numerics_keep_their_scale() {
        let input = [chunk("i N\n+ 1 1.25\n+ 1 2.50\n- 1 0.05"), barrier(1)];
        let expected = "i I N I
                        + 1 1 3.70 1

                        barrier 1";
        assert_eq!(local("i N", "sum(c1)", 100, input).await, dedent(expected));
    }

    #[tokio::test]
    async fn a_call_whose_state_does_not_add_up_is_refused() {
        let group: Arc<dyn PhysicalExpr> = Arc::new(Column::new("c0", 0));
        let call = AggCall {
            kind: AggKind::Max,
            arg: group.clone(),
            output_type: ArrowType::Int32,
            multiset: None,
            distinct: false,
            listing: None,
        };
        let made =
            LocalAggExecutor::new(MockSource::boxed([]), vec![group], vec![call], schema("i"));
        assert!(made.is_err());
    }
}
