//! `HashAggExecutor`: grouped aggregation with retraction.
//!
//! Groups live in a result state table keyed by the group key: `group | row_count | agg states`.
//! count, sum and avg retract arithmetically; min and max keep a multiset of their input values
//! per group in their own state table (`group | value | count`) and re-read the extreme when it
//! may have changed. Changed groups are emitted on each barrier, before it is forwarded: an
//! update pair for a group that existed and still exists, an insert for a new group, a delete
//! for a group whose last row went away.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::datatypes::{DataType as ArrowType, SchemaRef};
use datafusion::physical_plan::PhysicalExpr;
use datafusion::scalar::ScalarValue;
use futures::StreamExt;

use crate::catalog::{Epoch, TableCatalog};
use crate::error::{Error, Result};
use crate::storage::keycodec::{encode_keys, prefix_successor};
use crate::storage::row_codec::RowDecoder;
use crate::storage::state_table::StateTable;
use crate::storage::store::Store;
use crate::stream::eval::eval;
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::{Message, Op, StreamChunk};

/// An aggregate function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggKind {
    /// `count(x)` (non-NULL values) and `count(*)`.
    Count,
    /// `sum(x)`.
    Sum,
    /// `avg(x)`.
    Avg,
    /// `min(x)`.
    Min,
    /// `max(x)`.
    Max,
}

/// One aggregate call of the query.
pub struct AggCall {
    /// Which function.
    pub kind: AggKind,
    /// The argument.
    pub arg: Arc<dyn PhysicalExpr>,
    /// The output type.
    pub output_type: ArrowType,
    /// For min and max: the value multiset table.
    pub multiset: Option<Arc<TableCatalog>>,
}

impl AggCall {
    /// The type of the running state kept in the result table.
    fn state_type(&self) -> ArrowType {
        match self.kind {
            AggKind::Count => ArrowType::Int64,
            AggKind::Avg => ArrowType::Float64,
            AggKind::Sum | AggKind::Min | AggKind::Max => self.output_type.clone(),
        }
    }
}

/// The running state of one aggregate of one group.
#[derive(Debug, Clone, PartialEq)]
enum AggState {
    Count(i64),
    /// sum and avg: the sum of non-NULL inputs and how many there were.
    Sum {
        sum: ScalarValue,
        count: i64,
    },
    /// min and max: the current extreme (NULL when the multiset is empty).
    Extreme(ScalarValue),
}

#[derive(Debug)]
struct Group {
    values: Vec<ScalarValue>,
    row_count: i64,
    states: Vec<AggState>,
    previous: Option<Vec<ScalarValue>>,
}

/// Grouped aggregation over a changing input.
pub struct HashAggExecutor {
    input: BoxedExecutor,
    store: Arc<Store>,
    group_exprs: Vec<Arc<dyn PhysicalExpr>>,
    calls: Vec<AggCall>,
    result_table: Arc<TableCatalog>,
    output_schema: SchemaRef,
}

impl HashAggExecutor {
    /// Aggregates `input` by `group_exprs`, with results kept in `result_table`.
    pub fn new(
        input: BoxedExecutor,
        store: Arc<Store>,
        group_exprs: Vec<Arc<dyn PhysicalExpr>>,
        calls: Vec<AggCall>,
        result_table: Arc<TableCatalog>,
        output_schema: SchemaRef,
    ) -> Self {
        Self { input, store, group_exprs, calls, result_table, output_schema }
    }
}

impl Executor for HashAggExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { input, store, group_exprs, calls, result_table, output_schema } = *self;
        async_stream::try_stream! {
            let mut agg = Aggregation::new(store, group_exprs, calls, result_table, output_schema);
            let mut input = input.execute();
            while let Some(msg) = input.next().await {
                match msg? {
                    Message::Chunk(chunk) => agg.apply(&chunk)?,
                    Message::Barrier(barrier) => {
                        if let Some(chunk) = agg.flush()? {
                            yield Message::Chunk(chunk);
                        }
                        if barrier.is_checkpoint() {
                            agg.commit(barrier.epoch.prev);
                        }
                        yield Message::Barrier(barrier);
                    }
                    Message::Watermark(_) => {}
                }
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "HashAggExecutor"
    }
}

/// A pending change to one min/max multiset entry: the group, the value, the count change.
type MultisetDelta = (Vec<ScalarValue>, ScalarValue, i64);

/// The state of the aggregation between barriers.
struct Aggregation {
    group_exprs: Vec<Arc<dyn PhysicalExpr>>,
    calls: Vec<AggCall>,
    result_def: Arc<TableCatalog>,
    result: StateTable,
    multisets: Vec<Option<StateTable>>,
    output_schema: SchemaRef,
    /// Groups touched in this epoch, by result key.
    groups: HashMap<Vec<u8>, Group>,
    /// Per min/max call: multiset key -> (group values, value, count change).
    deltas: Vec<HashMap<Vec<u8>, MultisetDelta>>,
    /// For an aggregate without GROUP BY: whether its single group has been emitted.
    global_loaded: bool,
}

impl Aggregation {
    fn new(
        store: Arc<Store>,
        group_exprs: Vec<Arc<dyn PhysicalExpr>>,
        calls: Vec<AggCall>,
        result_def: Arc<TableCatalog>,
        output_schema: SchemaRef,
    ) -> Self {
        let result = StateTable::for_relation(store.clone(), &result_def);
        let multisets = calls
            .iter()
            .map(|c| c.multiset.as_ref().map(|t| StateTable::for_relation(store.clone(), t)))
            .collect();
        let deltas = calls.iter().map(|_| HashMap::new()).collect();
        Self {
            group_exprs,
            calls,
            result_def,
            result,
            multisets,
            output_schema,
            groups: HashMap::new(),
            deltas,
            global_loaded: false,
        }
    }

    fn n_groups(&self) -> usize {
        self.group_exprs.len()
    }

    /// Folds one chunk of input changes into the touched groups.
    fn apply(&mut self, chunk: &StreamChunk) -> Result<()> {
        let n = chunk.len();
        let schema = self.result_def.full_schema();
        let group_columns = self
            .group_exprs
            .iter()
            .enumerate()
            .map(|(i, e)| cast(eval(e.as_ref(), chunk.data())?, schema.field(i).data_type()))
            .collect::<Result<Vec<_>>>()?;
        let keys = encode_keys(self.result_def.id, &group_columns, n, self.n_groups())?;
        let mut args = Vec::with_capacity(self.calls.len());
        let mut multiset_keys = Vec::with_capacity(self.calls.len());
        for call in &self.calls {
            let target = match call.kind {
                AggKind::Count => call.arg.data_type(chunk.data().schema().as_ref())?,
                _ => call.state_type(),
            };
            let arg = cast(eval(call.arg.as_ref(), chunk.data())?, &target)?;
            multiset_keys.push(match &call.multiset {
                Some(t) => {
                    let mut cols = group_columns.clone();
                    cols.push(arg.clone());
                    Some(encode_keys(t.id, &cols, n, self.n_groups())?)
                }
                None => None,
            });
            args.push(arg);
        }
        for (row, op) in chunk.ops().iter().enumerate() {
            let sign = if op.is_insert() { 1 } else { -1 };
            let key = &keys[row];
            if !self.groups.contains_key(key) {
                let values = group_columns
                    .iter()
                    .map(|c| ScalarValue::try_from_array(c, row))
                    .collect::<datafusion::error::Result<Vec<_>>>()?;
                let group = self.load(key, values)?;
                self.groups.insert(key.clone(), group);
            }
            let group = self.groups.get_mut(key).expect("inserted above");
            group.row_count += sign;
            for (i, call) in self.calls.iter().enumerate() {
                let arg = &args[i];
                if arg.is_null(row) {
                    continue;
                }
                match (&mut group.states[i], call.kind) {
                    (AggState::Count(c), _) => *c += sign,
                    (AggState::Sum { sum, count }, _) => {
                        let v = ScalarValue::try_from_array(arg, row)?;
                        *sum = if sign > 0 { sum.add(&v)? } else { sum.sub(&v)? };
                        *count += sign;
                    }
                    (AggState::Extreme(_), _) => {
                        let mkey =
                            multiset_keys[i].as_ref().expect("min/max has a multiset")[row].clone();
                        let value = ScalarValue::try_from_array(arg, row)?;
                        let entry = self.deltas[i]
                            .entry(mkey)
                            .or_insert_with(|| (group.values.clone(), value, 0));
                        entry.2 += sign;
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads a group's stored state, or starts an empty one.
    fn load(&self, key: &[u8], values: Vec<ScalarValue>) -> Result<Group> {
        let Some(row) = self.result.get(key)? else {
            let states = self.calls.iter().map(empty_state).collect::<Result<_>>()?;
            return Ok(Group { values, row_count: 0, states, previous: None });
        };
        let types = self.result_def.types();
        let all: Vec<usize> = (0..types.len()).collect();
        let mut decoder = RowDecoder::new(&types, &all, 1);
        decoder.push(&row)?;
        let columns = decoder.finish();
        let scalar = |i: usize| ScalarValue::try_from_array(&columns[i], 0);
        let mut at = self.n_groups();
        let row_count = match scalar(at)? {
            ScalarValue::Int64(Some(n)) => n,
            _ => return Err(Error::Storage("aggregate group without a row count".into())),
        };
        at += 1;
        let mut states = Vec::with_capacity(self.calls.len());
        for call in &self.calls {
            states.push(match call.kind {
                AggKind::Count => AggState::Count(as_i64(&scalar(at)?)),
                AggKind::Sum | AggKind::Avg => {
                    let sum = scalar(at)?.cast_to(&call.state_type())?;
                    at += 1;
                    AggState::Sum { sum, count: as_i64(&scalar(at)?) }
                }
                AggKind::Min | AggKind::Max => {
                    AggState::Extreme(scalar(at)?.cast_to(&call.output_type)?)
                }
            });
            at += 1;
        }
        let mut group = Group { values, row_count, states, previous: None };
        group.previous = Some(self.output_row(&group)?);
        Ok(group)
    }

    /// Applies min/max multiset changes, writes changed groups, and returns the output changes.
    fn flush(&mut self) -> Result<Option<StreamChunk>> {
        if self.n_groups() == 0 && !self.global_loaded {
            // An aggregate without GROUP BY always has its one row, also over no input.
            let key = encode_keys(self.result_def.id, &[], 1, 0)?.remove(0);
            if !self.groups.contains_key(&key) {
                let group = self.load(&key, Vec::new())?;
                self.groups.insert(key, group);
            }
            self.global_loaded = true;
        }
        if self.groups.is_empty() {
            return Ok(None);
        }
        self.apply_multisets()?;
        let mut ops = Vec::new();
        let mut rows: Vec<Vec<ScalarValue>> = Vec::new();
        let mut state_ops = Vec::new();
        let mut state_rows = Vec::new();
        for (_, mut group) in std::mem::take(&mut self.groups) {
            self.refresh_extremes(&mut group)?;
            let keep = group.row_count > 0 || self.n_groups() == 0;
            let current = keep.then(|| self.output_row(&group)).transpose()?;
            match (group.previous.take(), current) {
                (Some(old), Some(new)) if old != new => {
                    ops.extend([Op::UpdateDelete, Op::UpdateInsert]);
                    rows.extend([old, new]);
                }
                (Some(_), Some(_)) | (None, None) => {}
                (Some(old), None) => {
                    ops.push(Op::Delete);
                    rows.push(old);
                }
                (None, Some(new)) => {
                    ops.push(Op::Insert);
                    rows.push(new);
                }
            }
            state_ops.push(if keep { Op::Insert } else { Op::Delete });
            state_rows.push(self.state_row(&group));
        }
        let state = rows_to_batch(&state_rows, &self.result_def.full_schema())?;
        self.result.write_chunk(&StreamChunk::new(state_ops, state))?;
        if ops.is_empty() {
            return Ok(None);
        }
        Ok(Some(StreamChunk::new(ops, rows_to_batch(&rows, &self.output_schema)?)))
    }

    fn apply_multisets(&mut self) -> Result<()> {
        for (i, deltas) in self.deltas.iter_mut().enumerate() {
            let (Some(table), Some(def)) =
                (self.multisets[i].as_mut(), self.calls[i].multiset.as_ref())
            else {
                continue;
            };
            let mut ops = Vec::new();
            let mut rows = Vec::new();
            for (key, (group, value, delta)) in deltas.drain() {
                let stored = match table.get(&key)? {
                    Some(row) => last_i64(def, &row)?,
                    None => 0,
                };
                let count = stored + delta;
                let mut row = group;
                row.push(value);
                row.push(ScalarValue::Int64(Some(count.max(0))));
                ops.push(if count > 0 { Op::Insert } else { Op::Delete });
                rows.push(row);
            }
            if !rows.is_empty() {
                let batch = rows_to_batch(&rows, &def.full_schema())?;
                table.write_chunk(&StreamChunk::new(ops, batch))?;
            }
        }
        Ok(())
    }

    /// Re-reads the extreme of every min/max call of a group from its multiset.
    fn refresh_extremes(&self, group: &mut Group) -> Result<()> {
        for (i, call) in self.calls.iter().enumerate() {
            let (Some(table), Some(def)) = (self.multisets[i].as_ref(), call.multiset.as_ref())
            else {
                continue;
            };
            let group_columns: Vec<ArrayRef> = group
                .values
                .iter()
                .map(|v| v.to_array())
                .collect::<datafusion::error::Result<_>>()?;
            let prefix = encode_keys(def.id, &group_columns, 1, self.n_groups())?.remove(0);
            let end = prefix_successor(&prefix).unwrap_or_else(|| vec![u8::MAX; prefix.len() + 1]);
            // The extreme is the first (min) or last (max) value of the group's multiset.
            let pick = table.edge_of_range(&prefix, &end, call.kind != AggKind::Min)?;
            group.states[i] = AggState::Extreme(match pick {
                Some((_, row)) => {
                    column_of(def, &row, self.n_groups())?.cast_to(&call.output_type)?
                }
                None => ScalarValue::try_from(&call.output_type)?,
            });
        }
        Ok(())
    }

    /// `group values ++ aggregate outputs`.
    fn output_row(&self, group: &Group) -> Result<Vec<ScalarValue>> {
        let mut row = group.values.clone();
        for (call, state) in self.calls.iter().zip(&group.states) {
            row.push(match state {
                AggState::Count(c) => ScalarValue::Int64(Some(*c)),
                AggState::Sum { count: 0, .. } => ScalarValue::try_from(&call.output_type)?,
                AggState::Sum { sum, count } if call.kind == AggKind::Avg => {
                    let avg = ScalarValue::Float64(Some(as_f64(sum)? / *count as f64));
                    avg.cast_to(&call.output_type)?
                }
                AggState::Sum { sum, .. } => sum.cast_to(&call.output_type)?,
                AggState::Extreme(v) => v.clone(),
            });
        }
        Ok(row)
    }

    /// `group values ++ row_count ++ agg states`, as stored.
    fn state_row(&self, group: &Group) -> Vec<ScalarValue> {
        let mut row = group.values.clone();
        row.push(ScalarValue::Int64(Some(group.row_count)));
        for state in &group.states {
            match state {
                AggState::Count(c) => row.push(ScalarValue::Int64(Some(*c))),
                AggState::Sum { sum, count } => {
                    row.push(sum.clone());
                    row.push(ScalarValue::Int64(Some(*count)));
                }
                AggState::Extreme(v) => row.push(v.clone()),
            }
        }
        row
    }

    fn commit(&mut self, epoch: Epoch) {
        self.result.commit(epoch);
        for table in self.multisets.iter_mut().flatten() {
            table.commit(epoch);
        }
    }
}

fn empty_state(call: &AggCall) -> Result<AggState> {
    Ok(match call.kind {
        AggKind::Count => AggState::Count(0),
        AggKind::Sum | AggKind::Avg => {
            AggState::Sum { sum: ScalarValue::new_zero(&call.state_type())?, count: 0 }
        }
        AggKind::Min | AggKind::Max => AggState::Extreme(ScalarValue::try_from(&call.output_type)?),
    })
}

fn cast(array: ArrayRef, to: &ArrowType) -> Result<ArrayRef> {
    if array.data_type() == to {
        return Ok(array);
    }
    Ok(arrow::compute::cast(&array, to)?)
}

fn as_i64(v: &ScalarValue) -> i64 {
    match v {
        ScalarValue::Int64(Some(n)) => *n,
        _ => 0,
    }
}

fn as_f64(v: &ScalarValue) -> Result<f64> {
    match v.cast_to(&ArrowType::Float64)? {
        ScalarValue::Float64(Some(f)) => Ok(f),
        _ => Ok(0.0),
    }
}

/// The value of column `index` of a stored row of `table`.
fn column_of(table: &TableCatalog, row: &[u8], index: usize) -> Result<ScalarValue> {
    let types = table.types();
    let mut decoder = RowDecoder::new(&types, &[index], 1);
    decoder.push(row)?;
    Ok(ScalarValue::try_from_array(&decoder.finish()[0], 0)?)
}

/// The last column of a stored multiset row: the value's count.
fn last_i64(table: &TableCatalog, row: &[u8]) -> Result<i64> {
    Ok(as_i64(&column_of(table, row, table.columns.len() - 1)?))
}

/// Builds a batch of `schema` from rows of scalars, casting where types differ.
pub fn rows_to_batch(rows: &[Vec<ScalarValue>], schema: &SchemaRef) -> Result<RecordBatch> {
    let columns = (0..schema.fields().len())
        .map(|c| {
            let field = schema.field(c);
            if rows.is_empty() {
                return Ok(arrow::array::new_empty_array(field.data_type()));
            }
            let values = rows.iter().map(|r| r[c].cast_to(field.data_type()));
            let values = values.collect::<datafusion::error::Result<Vec<_>>>()?;
            Ok(ScalarValue::iter_to_array(values)?)
        })
        .collect::<Result<Vec<_>>>()?;
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(rows.len()));
    Ok(RecordBatch::try_new_with_options(schema.clone(), columns, &options)?)
}
