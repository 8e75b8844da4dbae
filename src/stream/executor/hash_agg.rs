//! `HashAggExecutor`: grouped aggregation with retraction.
//!
//! Groups live in a result state table keyed by the group key: `group | row_count | agg states`.
//! count, sum and avg retract arithmetically; min and max keep a multiset of their input values
//! per group in their own state table (`group | value | count`) and re-read the extreme when it
//! may have changed. Changed groups are emitted on each barrier, before it is forwarded: an
//! update pair for a group that existed and still exists, an insert for a new group, a delete
//! for a group whose last row went away. Groups touched in an epoch count as its memory
//! ([`EpochMemory`]); past [`FLUSH_BYTES`] of them they are flushed mid-epoch the same way, so
//! an aggregate with a group per input row holds a bounded number of them.
//!
//! ## Holding a partial aggregate while its job creates
//!
//! A partial aggregate of eager aggregation ([`crate::sql::eager`]) built for a creating job
//! runs in *hold* mode ([`Hold`]): it keeps its groups in its result table as always but emits
//! nothing, so the join and the final aggregate above it do no work per backfill epoch. A
//! backfill page touches most groups, so emitting would send every group again at each epoch.
//! Once every backfill of the job has finished, the job's release barrier
//! ([`crate::stream::message::Mutation::release`]) makes it emit each stored group once, as an
//! insert, and it runs as any aggregate from then on. The view cannot be queried while its job
//! creates, so holding is invisible.
//!
//! The release of a vnode writes a marker key ([`crate::storage::keycodec::release_marker`])
//! in the epoch it emits in, so after a restart (or a rescale, which reassigns vnodes) an actor
//! knows which of its vnodes downstream has seen: those run normally, the others hold until the
//! release. An actor holding more than [`HOLD_LIMIT`] groups releases early, so the epoch of a
//! release, and what the operators above write in it, stays bounded.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType as ArrowType, Decimal128Type, Int64Type, SchemaRef};
use datafusion::physical_plan::PhysicalExpr;
use datafusion::scalar::ScalarValue;
use futures::StreamExt;

use crate::catalog::{Epoch, TableCatalog, TableId, VirtualNode};
use crate::error::{Error, Result};
use crate::storage::keycodec::{
    encode_keys, encode_keys_into, prefix_end, prefix_successor, release_marker, vnode_in_key,
    vnode_prefix,
};
use crate::storage::row_codec::RowDecoder;
use crate::storage::state_table::StateTable;
use crate::storage::store::{EpochMemory, Store};
use crate::stream::eval::{eval, validity};
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::{Barrier, Message, Op, StreamChunk, unexpected_truncate};

/// Groups one actor may hold (see the module docs) before it releases them early.
pub const HOLD_LIMIT: usize = 100_000;

/// Groups an actor keeps in memory between epochs (see `Aggregation::cache`): a backfill's
/// epochs touch most groups again when there are fewer than its rows.
const CACHE_GROUPS: usize = 100_000;

/// The memory an actor's groups touched since its last flush may take ([`footprint`]) before
/// it flushes them mid-epoch: stored, emitted unless held, and cached as after a barrier. So an
/// aggregate with as many groups as rows holds a bounded number of them whatever its epochs,
/// and one with fewer groups than fit (an eager aggregation's 50 k per actor) still writes
/// each group once per epoch.
const FLUSH_BYTES: usize = 32 << 20;

/// Stored groups emitted per chunk when held groups are released.
const RELEASE_CHUNK: usize = 4096;

/// Where a partial aggregate holds its output while its job creates (see the module docs).
#[derive(Debug, Clone)]
pub struct Hold {
    /// The creating job, whose release barrier ends the hold.
    pub job: TableId,
    /// The vnodes of the result table this actor owns.
    pub vnodes: Vec<VirtualNode>,
    /// The most groups it holds before it releases them early ([`HOLD_LIMIT`]).
    pub limit: usize,
}

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
    /// The vnode of its result key.
    vnode: VirtualNode,
    values: Vec<ScalarValue>,
    row_count: i64,
    states: Vec<AggState>,
    /// The group has a stored row.
    stored: bool,
    /// The row last emitted for it, unless it is new or held.
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
    hold: Option<Hold>,
    merge: bool,
    /// [`FLUSH_BYTES`], or less in tests.
    flush_bytes: usize,
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
        Self {
            input,
            store,
            group_exprs,
            calls,
            result_table,
            output_schema,
            hold: None,
            merge: false,
            flush_bytes: FLUSH_BYTES,
        }
    }

    /// The same, flushing its touched groups mid-epoch once they take `bytes` (see
    /// [`FLUSH_BYTES`]).
    pub fn with_flush_bytes(mut self, bytes: usize) -> Self {
        self.flush_bytes = bytes;
        self
    }

    /// The same aggregate as the final phase of a two-phase aggregation: its input rows are
    /// the partial rows of a [`LocalAggExecutor`](super::local_agg::LocalAggExecutor), laid out
    /// as its result table, and `group_exprs` are their group columns.
    pub fn merging(mut self) -> Self {
        self.merge = true;
        self
    }

    /// The same aggregate holding its output until `hold.job` is released (see the module
    /// docs). An aggregate without groups does not hold.
    pub fn holding(mut self, hold: Hold) -> Self {
        self.hold = (!self.group_exprs.is_empty()).then_some(hold);
        self
    }
}

impl Executor for HashAggExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self {
            input,
            store,
            group_exprs,
            calls,
            result_table,
            output_schema,
            hold,
            merge,
            flush_bytes,
        } = *self;
        async_stream::try_stream! {
            let mut agg = Aggregation::new(store, group_exprs, calls, result_table, output_schema);
            agg.merge = merge;
            if let Some(hold) = hold {
                agg.hold(hold)?;
            }
            let mut input = input.execute();
            while let Some(msg) = input.next().await {
                match msg? {
                    Message::Chunk(chunk) => {
                        agg.apply(&chunk)?;
                        let full = agg.memory.bytes() >= flush_bytes;
                        if let Some(chunk) = if full { agg.flush()? } else { None } {
                            yield Message::Chunk(chunk);
                        }
                    }
                    Message::Barrier(barrier) => {
                        if let Some(chunk) = agg.flush()? {
                            yield Message::Chunk(chunk);
                        }
                        if agg.must_release(&barrier) {
                            for chunk in agg.release()? {
                                yield Message::Chunk(chunk);
                            }
                        }
                        if barrier.is_checkpoint() {
                            agg.commit(barrier.epoch.prev);
                        }
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
    /// Groups touched in this epoch, in the order first touched.
    groups: Vec<Group>,
    /// Where each group of `groups` is, by result key.
    group_index: hashbrown::HashMap<Vec<u8>, usize>,
    /// The result keys of the last chunk's rows (buffers reused from chunk to chunk).
    keys: Vec<Vec<u8>>,
    /// Per min/max call: multiset key -> (group values, value, count change).
    deltas: Vec<HashMap<Vec<u8>, MultisetDelta>>,
    /// For an aggregate without GROUP BY: whether its single group has been emitted.
    global_loaded: bool,
    /// While some of its vnodes hold their groups: which (see the module docs).
    held: Option<Held>,
    /// Groups as the last flush left them (stored, and emitted unless held), by result key:
    /// a group touched again needs no read. Emptied when it would pass [`CACHE_GROUPS`].
    cache: hashbrown::HashMap<Vec<u8>, Group>,
    /// Input rows are partial rows (see [`HashAggExecutor::merging`]).
    merge: bool,
    /// What `groups`, `group_index` and `deltas` take, counted until the flush stages them.
    memory: EpochMemory,
}

/// The vnodes of an actor whose groups are held, and how many groups they store.
struct Held {
    job: TableId,
    /// By vnode: true while its groups are held.
    vnodes: Vec<bool>,
    /// The groups stored in held vnodes.
    groups: usize,
    /// See [`Hold::limit`].
    limit: usize,
}

impl Aggregation {
    fn new(
        store: Arc<Store>,
        group_exprs: Vec<Arc<dyn PhysicalExpr>>,
        calls: Vec<AggCall>,
        result_def: Arc<TableCatalog>,
        output_schema: SchemaRef,
    ) -> Self {
        let result = result_def.state_table(store.clone()).rewriting();
        let multisets = calls
            .iter()
            .map(|c| c.multiset.as_ref().map(|t| t.state_table(store.clone()).rewriting()))
            .collect();
        let deltas = calls.iter().map(|_| HashMap::new()).collect();
        let memory = EpochMemory::new(store.clone());
        Self {
            group_exprs,
            calls,
            result_def,
            result,
            multisets,
            output_schema,
            groups: Vec::new(),
            group_index: hashbrown::HashMap::new(),
            keys: Vec::new(),
            deltas,
            global_loaded: false,
            held: None,
            cache: hashbrown::HashMap::new(),
            merge: false,
            memory,
        }
    }

    /// Starts holding the groups of the vnodes of `hold` that have not been released yet, and
    /// counts the groups they already store (up to just past its limit).
    fn hold(&mut self, hold: Hold) -> Result<()> {
        let mut vnodes = vec![false; VirtualNode::COUNT];
        let mut groups = 0;
        for vnode in hold.vnodes {
            if self.result.get(&release_marker(self.result_def.id, vnode))?.is_some() {
                continue;
            }
            vnodes[vnode.0 as usize] = true;
            let start = vnode_prefix(self.result_def.id, vnode);
            let end = prefix_successor(&start).expect("a vnode prefix has a successor");
            let left = (hold.limit + 1).saturating_sub(groups);
            groups += self.result.iter_range(&start, &end, left)?.len();
        }
        if vnodes.contains(&true) {
            self.held = Some(Held { job: hold.job, vnodes, groups, limit: hold.limit });
        }
        Ok(())
    }

    /// True if the groups held must be emitted at `barrier`: it releases the job, or this
    /// actor holds more groups than it may.
    fn must_release(&self, barrier: &Barrier) -> bool {
        self.held.as_ref().is_some_and(|h| barrier.releases(h.job) || h.groups > h.limit)
    }

    /// Emits every group stored in a held vnode, as inserts (downstream has seen none of
    /// them), and marks those vnodes released in this epoch.
    fn release(&mut self) -> Result<Vec<StreamChunk>> {
        let Some(held) = self.held.take() else { return Ok(Vec::new()) };
        let mut chunks = Vec::new();
        let mut rows = Vec::new();
        for vnode in (0..VirtualNode::COUNT).filter(|&v| held.vnodes[v]) {
            let vnode = VirtualNode(vnode as u16);
            let mut from = vnode_prefix(self.result_def.id, vnode).to_vec();
            let end = prefix_successor(&from).expect("a vnode prefix has a successor");
            loop {
                let page = self.result.iter_range(&from, &end, RELEASE_CHUNK)?;
                let Some((last, _)) = page.last() else { break };
                from = last.clone();
                from.push(0);
                let rows_of_page = page.iter().map(|(key, row)| (key.as_slice(), row.as_slice()));
                for stored in self.decode_stored(rows_of_page)? {
                    rows.push(self.output_row(&self.stored_group(vnode, &stored)?)?);
                    if rows.len() == RELEASE_CHUNK {
                        chunks.push(self.inserts(std::mem::take(&mut rows))?);
                    }
                }
                if page.len() < RELEASE_CHUNK {
                    break;
                }
            }
            self.result.insert(release_marker(self.result_def.id, vnode), Vec::new());
        }
        if !rows.is_empty() {
            chunks.push(self.inserts(rows)?);
        }
        tracing::debug!(job = %held.job, groups = held.groups, "held aggregate groups released");
        Ok(chunks)
    }

    /// `rows` (output rows) as a chunk of inserts.
    fn inserts(&self, rows: Vec<Vec<ScalarValue>>) -> Result<StreamChunk> {
        let batch = rows_to_batch(&rows, &self.output_schema)?;
        Ok(StreamChunk::new(vec![Op::Insert; rows.len()], batch))
    }

    /// Stored result rows (key and value), decoded: one vector of every column's value per
    /// row.
    fn decode_stored<'a>(
        &self,
        rows: impl ExactSizeIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<Vec<Vec<ScalarValue>>> {
        let types = self.result_def.types();
        let all: Vec<usize> = (0..types.len()).collect();
        let mut decoder = RowDecoder::new(&types, &self.result_def.pk, &all, rows.len());
        let n = rows.len();
        for (key, row) in rows {
            decoder.push(key, row)?;
        }
        let columns = decoder.finish();
        (0..n)
            .map(|r| {
                let row = columns.iter().map(|c| ScalarValue::try_from_array(c, r));
                Ok(row.collect::<datafusion::error::Result<Vec<_>>>()?)
            })
            .collect()
    }

    /// A group from its stored row's columns: `group values ++ row_count ++ agg states`.
    fn stored_group(&self, vnode: VirtualNode, stored: &[ScalarValue]) -> Result<Group> {
        let values = stored[..self.n_groups()].to_vec();
        let mut at = self.n_groups();
        let row_count = match &stored[at] {
            ScalarValue::Int64(Some(n)) => *n,
            _ => return Err(Error::Storage("aggregate group without a row count".into())),
        };
        at += 1;
        let mut states = Vec::with_capacity(self.calls.len());
        for call in &self.calls {
            states.push(match call.kind {
                AggKind::Count => AggState::Count(as_i64(&stored[at])),
                AggKind::Sum | AggKind::Avg => {
                    let sum = stored[at].cast_to(&call.state_type())?;
                    at += 1;
                    AggState::Sum { sum, count: as_i64(&stored[at]) }
                }
                AggKind::Min | AggKind::Max => {
                    AggState::Extreme(stored[at].cast_to(&call.output_type)?)
                }
            });
            at += 1;
        }
        Ok(Group { vnode, values, row_count, states, stored: true, previous: None })
    }

    fn n_groups(&self) -> usize {
        self.group_exprs.len()
    }

    /// Folds one chunk of input changes into the touched groups.
    ///
    /// Each row is looked up once to find its group. Counts and the sums of integers and
    /// decimals are then folded column by column: a chunk's changes to a group are added up
    /// natively and added to the group's state once. The sums wrap like the per-row `+` and
    /// `-` of the state would, so the result is the same; float sums and min/max go row by row.
    fn apply(&mut self, chunk: &StreamChunk) -> Result<()> {
        let n = chunk.len();
        let (group_columns, slots) = self.slots(chunk)?;
        let signs: Vec<i64> =
            chunk.ops().iter().map(|op| if op.is_insert() { 1 } else { -1 }).collect();
        if self.merge {
            return self.apply_partial(chunk, &slots, &signs);
        }
        for (&slot, &sign) in slots.iter().zip(&signs) {
            self.groups[slot].row_count += sign;
        }
        for i in 0..self.calls.len() {
            let call = &self.calls[i];
            let target = match call.kind {
                AggKind::Count => call.arg.data_type(chunk.data().schema().as_ref())?,
                _ => call.state_type(),
            };
            let mut arg = eval(call.arg.as_ref(), chunk.data())?;
            if matches!(call.kind, AggKind::Sum | AggKind::Avg) {
                arg = crate::numeric::specials_as_null(arg);
            }
            let arg = cast(arg, &target)?;
            let valid = validity(&arg);
            match (call.kind, arg.data_type()) {
                (AggKind::Count, _) => {
                    for (row, (&slot, &sign)) in slots.iter().zip(&signs).enumerate() {
                        if let (true, AggState::Count(c)) =
                            (valid(row), &mut self.groups[slot].states[i])
                        {
                            *c += sign;
                        }
                    }
                }
                (AggKind::Sum | AggKind::Avg, ArrowType::Int64) => {
                    let values = arg.as_primitive::<Int64Type>().values();
                    let deltas = fold(&slots, &signs, valid, |row| values[row] as i128);
                    for (slot, (sum, count)) in deltas {
                        let delta = ScalarValue::Int64(Some(sum as i64));
                        add_to_sum(&mut self.groups[slot], i, &delta, count)?;
                    }
                }
                (AggKind::Sum | AggKind::Avg, &ArrowType::Decimal128(p, s)) => {
                    let values = arg.as_primitive::<Decimal128Type>().values();
                    let deltas = fold(&slots, &signs, valid, |row| values[row]);
                    for (slot, (sum, count)) in deltas {
                        let delta = ScalarValue::Decimal128(Some(sum), p, s);
                        add_to_sum(&mut self.groups[slot], i, &delta, count)?;
                    }
                }
                (AggKind::Sum | AggKind::Avg, _) => {
                    for (row, (&slot, &sign)) in slots.iter().zip(&signs).enumerate() {
                        if valid(row) {
                            let v = ScalarValue::try_from_array(&arg, row)?;
                            if let AggState::Sum { sum, count } = &mut self.groups[slot].states[i] {
                                *sum = if sign > 0 { sum.add(&v)? } else { sum.sub(&v)? };
                                *count += sign;
                            }
                        }
                    }
                }
                (AggKind::Min | AggKind::Max, _) => {
                    let def = call.multiset.as_ref().expect("min/max has a multiset");
                    let mut cols = group_columns.clone();
                    cols.push(arg.clone());
                    let mkeys = encode_keys(def.id, &cols, n, self.n_groups())?;
                    for (row, mkey) in mkeys.into_iter().enumerate() {
                        if !valid(row) {
                            continue;
                        }
                        let group = &self.groups[slots[row]];
                        let value = ScalarValue::try_from_array(&arg, row)?;
                        let entry = match self.deltas[i].entry(mkey) {
                            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
                            std::collections::hash_map::Entry::Vacant(entry) => {
                                let at = footprint(entry.key(), &group.values, &[]);
                                self.memory.add(at + size_of::<ScalarValue>());
                                entry.insert((group.values.clone(), value, 0))
                            }
                        };
                        entry.2 += signs[row];
                    }
                }
            }
        }
        Ok(())
    }

    /// The group columns of `chunk` and the slot in `groups` of each row's group, loaded or
    /// created where it is not there yet.
    fn slots(&mut self, chunk: &StreamChunk) -> Result<(Vec<ArrayRef>, Vec<usize>)> {
        let n = chunk.len();
        let schema = self.result_def.full_schema();
        let group_columns = self
            .group_exprs
            .iter()
            .enumerate()
            .map(|(i, e)| cast(eval(e.as_ref(), chunk.data())?, schema.field(i).data_type()))
            .collect::<Result<Vec<_>>>()?;
        let mut keys = std::mem::take(&mut self.keys);
        encode_keys_into(self.result_def.id, &group_columns, n, self.n_groups(), &mut keys)?;
        let mut slots = Vec::with_capacity(n);
        for (row, key) in keys.iter().enumerate() {
            let slot = match self.group_index.get(key.as_slice()) {
                Some(&slot) => slot,
                None => {
                    let group = self.take_group(key, || {
                        Ok(group_columns
                            .iter()
                            .map(|c| ScalarValue::try_from_array(c, row))
                            .collect::<datafusion::error::Result<Vec<_>>>()?)
                    })?;
                    self.memory.add(footprint(key, &group.values, &group.states));
                    self.groups.push(group);
                    self.group_index.insert(key.clone(), self.groups.len() - 1);
                    self.groups.len() - 1
                }
            };
            slots.push(slot);
        }
        self.keys = keys;
        Ok((group_columns, slots))
    }

    /// Folds a chunk of partial rows (group columns, `row_count`, then per call its state
    /// columns, as in the result table) into the touched groups: each adds its counts and sums,
    /// signed by its op.
    fn apply_partial(&mut self, chunk: &StreamChunk, slots: &[usize], signs: &[i64]) -> Result<()> {
        let data = chunk.data();
        let int64 = |column: usize| -> Result<&arrow::array::Int64Array> {
            data.column(column)
                .as_primitive_opt::<Int64Type>()
                .ok_or_else(|| Error::Stream(format!("partial row column {column} is not a count")))
        };
        let mut column = self.n_groups();
        let row_counts = int64(column)?.values();
        for ((&slot, &sign), &count) in slots.iter().zip(signs).zip(row_counts) {
            self.groups[slot].row_count += sign * count;
        }
        column += 1;
        for i in 0..self.calls.len() {
            match self.calls[i].kind {
                AggKind::Count => {
                    let counts = int64(column)?.values();
                    for ((&slot, &sign), &count) in slots.iter().zip(signs).zip(counts) {
                        if let AggState::Count(c) = &mut self.groups[slot].states[i] {
                            *c += sign * count;
                        }
                    }
                    column += 1;
                }
                AggKind::Sum => {
                    let sums = data.column(column);
                    let counts = int64(column + 1)?.values();
                    let count = |row: usize| counts[row];
                    let deltas = match sums.data_type() {
                        ArrowType::Int64 => {
                            let values = sums.as_primitive::<Int64Type>().values();
                            fold_partial(slots, signs, count, |row| i128::from(values[row]))
                        }
                        ArrowType::Decimal128(..) => {
                            let values = sums.as_primitive::<Decimal128Type>().values();
                            fold_partial(slots, signs, count, |row| values[row])
                        }
                        other => Err(Error::Stream(format!("a partial sum of {other}")))?,
                    };
                    for (slot, (sum, count)) in deltas {
                        let delta = match sums.data_type() {
                            &ArrowType::Decimal128(p, s) => {
                                ScalarValue::Decimal128(Some(sum), p, s)
                            }
                            _ => ScalarValue::Int64(Some(sum as i64)),
                        };
                        add_to_sum(&mut self.groups[slot], i, &delta, count)?;
                    }
                    column += 2;
                }
                kind => Err(Error::Stream(format!("{kind:?} has no partial rows to merge")))?,
            }
        }
        Ok(())
    }

    /// Reads a group's stored state, or starts an empty one.
    fn load(&self, key: &[u8], values: Vec<ScalarValue>) -> Result<Group> {
        let vnode = vnode_in_key(key);
        let Some(row) = self.result.get(key)? else {
            let states = self.calls.iter().map(empty_state).collect::<Result<_>>()?;
            let stored = false;
            return Ok(Group { vnode, values, row_count: 0, states, stored, previous: None });
        };
        let stored = self.decode_stored(std::iter::once((key, row.as_slice())))?.remove(0);
        let mut group = self.stored_group(vnode, &stored)?;
        // The group's values as emitted before, not as in this input row: values that are
        // one group (0 and -0) may print differently, and a retraction must be what was sent.
        for (stored, input) in group.values.iter_mut().zip(&values) {
            *stored = stored.cast_to(&input.data_type())?;
        }
        if !self.is_held(vnode) {
            group.previous = Some(self.output_row(&group)?);
        }
        Ok(group)
    }

    /// True if the groups of `vnode` are held.
    fn is_held(&self, vnode: VirtualNode) -> bool {
        self.held.as_ref().is_some_and(|h| h.vnodes[vnode.0 as usize])
    }

    /// The group under result key `key`: from the cache, else from its stored row, else new
    /// (with the group-by `values` of an input row).
    fn take_group(
        &mut self,
        key: &[u8],
        values: impl FnOnce() -> Result<Vec<ScalarValue>>,
    ) -> Result<Group> {
        let Some(mut group) = self.cache.remove(key) else {
            return self.load(key, values()?);
        };
        if group.previous.is_none() && !self.is_held(group.vnode) {
            // Cached while held, and released since: what the release emitted.
            group.previous = Some(self.output_row(&group)?);
        }
        Ok(group)
    }

    /// Applies min/max multiset changes, writes changed groups, and returns the output changes.
    fn flush(&mut self) -> Result<Option<StreamChunk>> {
        if self.n_groups() == 0 && !self.global_loaded {
            // An aggregate without GROUP BY always has its one row, also over no input.
            let key = encode_keys(self.result_def.id, &[], 1, 0)?.remove(0);
            if !self.group_index.contains_key(&key) {
                let group = self.take_group(&key, || Ok(Vec::new()))?;
                self.groups.push(group);
                self.group_index.insert(key, self.groups.len() - 1);
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
        let mut keys = vec![Vec::new(); self.groups.len()];
        for (key, slot) in self.group_index.drain() {
            keys[slot] = key;
        }
        if self.cache.len() + keys.len() > CACHE_GROUPS {
            self.cache.clear();
        }
        for (mut group, key) in std::mem::take(&mut self.groups).into_iter().zip(keys) {
            self.refresh_extremes(&mut group)?;
            let keep = group.row_count > 0 || self.n_groups() == 0;
            state_ops.push(if keep { Op::Insert } else { Op::Delete });
            state_rows.push(self.state_row(&group));
            if let Some(held) = self.held.as_mut().filter(|h| h.vnodes[group.vnode.0 as usize]) {
                // Stored, not emitted: the release emits what the state holds then.
                match (group.stored, keep) {
                    (false, true) => held.groups += 1,
                    (true, false) => held.groups = held.groups.saturating_sub(1),
                    _ => {}
                }
            } else {
                let current = keep.then(|| self.output_row(&group)).transpose()?;
                match (std::mem::replace(&mut group.previous, current.clone()), current) {
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
            }
            if keep {
                group.stored = true;
                self.cache.insert(key, group);
            }
        }
        // The groups become the staged writes of `result`, counted there.
        self.memory.clear();
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
                    Some(row) => last_i64(def, &key, &row)?,
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
            let end = prefix_end(&prefix);
            // The extreme is the first (min) or last (max) value of the group's multiset.
            let pick = table.edge_of_range(&prefix, &end, call.kind != AggKind::Min)?;
            group.states[i] = AggState::Extreme(match pick {
                Some((key, row)) => {
                    column_of(def, &key, &row, self.n_groups())?.cast_to(&call.output_type)?
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

/// About the memory a touched group (or a min/max multiset change) takes until the flush: the
/// key in the index, the group with its values (twice: the row last emitted is kept too) and
/// states.
fn footprint(key: &[u8], values: &[ScalarValue], states: &[AggState]) -> usize {
    let header = size_of::<Group>() + size_of::<Vec<u8>>() + 2 * size_of::<usize>();
    header + key.len() + 2 * size_of_val(values) + size_of_val(states)
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

/// Adds `delta` (the change of `count` non-NULL inputs) to call `call`'s sum in `group`.
fn add_to_sum(group: &mut Group, call: usize, delta: &ScalarValue, count: i64) -> Result<()> {
    if let AggState::Sum { sum, count: n } = &mut group.states[call] {
        *sum = sum.add(delta)?;
        *n += count;
    }
    Ok(())
}

/// Adds up the signed values of a chunk's non-NULL rows per group: `(group slot, (sum, number
/// of values))` for every group with one, wrapping on overflow.
fn fold(
    slots: &[usize],
    signs: &[i64],
    valid: impl Fn(usize) -> bool,
    value: impl Fn(usize) -> i128,
) -> Vec<(usize, (i128, i64))> {
    fold_rows(slots, signs, valid, |_| 1, value)
}

/// [`fold`] for partial rows: per group, the signed sum of their sums and of their counts of
/// non-NULL inputs, wrapping on overflow.
fn fold_partial(
    slots: &[usize],
    signs: &[i64],
    count: impl Fn(usize) -> i64,
    value: impl Fn(usize) -> i128,
) -> Vec<(usize, (i128, i64))> {
    fold_rows(slots, signs, |_| true, count, value)
}

/// Per group slot of the rows for which `include` holds: the signed sum of `value` and of
/// `count`, wrapping on overflow.
fn fold_rows(
    slots: &[usize],
    signs: &[i64],
    include: impl Fn(usize) -> bool,
    count: impl Fn(usize) -> i64,
    value: impl Fn(usize) -> i128,
) -> Vec<(usize, (i128, i64))> {
    let mut deltas: hashbrown::HashMap<usize, (i128, i64)> = hashbrown::HashMap::new();
    for (row, (&slot, &sign)) in slots.iter().zip(signs).enumerate() {
        if include(row) {
            let (sum, n) = deltas.entry(slot).or_default();
            let v = value(row);
            *sum = if sign > 0 { sum.wrapping_add(v) } else { sum.wrapping_sub(v) };
            *n += sign * count(row);
        }
    }
    deltas.into_iter().collect()
}

/// `array` cast to `to`, unless it already has that type.
pub(crate) fn cast(array: ArrayRef, to: &ArrowType) -> Result<ArrayRef> {
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

/// The value of column `index` of a stored row (key and value) of `table`.
fn column_of(table: &TableCatalog, key: &[u8], row: &[u8], index: usize) -> Result<ScalarValue> {
    let types = table.types();
    let mut decoder = RowDecoder::new(&types, &table.pk, &[index], 1);
    decoder.push(key, row)?;
    Ok(ScalarValue::try_from_array(&decoder.finish()[0], 0)?)
}

/// The last column of a stored multiset row: the value's count.
fn last_i64(table: &TableCatalog, key: &[u8], row: &[u8]) -> Result<i64> {
    Ok(as_i64(&column_of(table, key, row, table.columns.len() - 1)?))
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

#[cfg(test)]
mod tests {
    use arrow::datatypes::{Field, Schema};
    use datafusion::physical_expr::expressions::{Column, Literal};

    use super::*;
    use crate::catalog::{ColumnCatalog, RelationKind, TableId};
    use crate::stream::message::{Barrier, Mutation};
    use crate::stream::test_utils::{MockSource, barrier, chunk, dedent, initial, run, schema};
    use crate::types::DataType;

    /// An internal state table of `types`, keyed by its first `pk_len` columns, of which the
    /// first `dist_key_len` choose the vnode (as the planner makes them).
    fn state_table(
        id: u32,
        types: &[ArrowType],
        pk_len: usize,
        dist_key_len: usize,
    ) -> Arc<TableCatalog> {
        let columns = types
            .iter()
            .enumerate()
            .map(|(i, t)| ColumnCatalog::new(format!("s{i}"), DataType::from_arrow(t).unwrap()))
            .collect();
        let pk = (0..pk_len).collect();
        let mut table =
            TableCatalog::new_table(TableId(id), format!("t{id}"), columns, pk, String::new());
        table.kind = RelationKind::Internal;
        table.dist_key_len = dist_key_len;
        Arc::new(table)
    }

    /// The output type of an aggregate over `arg`, as DataFusion types it.
    fn output_type(kind: AggKind, arg: &ArrowType) -> ArrowType {
        match (kind, arg) {
            (AggKind::Count, _) => ArrowType::Int64,
            (AggKind::Avg, _) => ArrowType::Float64,
            (AggKind::Sum, ArrowType::Int16 | ArrowType::Int32 | ArrowType::Int64) => {
                ArrowType::Int64
            }
            (AggKind::Sum, ArrowType::Float32) => ArrowType::Float64,
            _ => arg.clone(),
        }
    }

    /// A hash aggregation over `input` (rows of the column types `header`) grouped by the
    /// input columns `group_by`, computing `calls` (e.g. `"count(*) sum(c1) min(c1)"`), with its
    /// state tables (ids 100, 101, ..) in `store`, as the planner builds it.
    fn hash_agg(
        store: &Arc<Store>,
        header: &str,
        group_by: &[usize],
        calls: &str,
        input: BoxedExecutor,
    ) -> BoxedExecutor {
        Box::new(hash_agg_executor(store, header, group_by, calls, input))
    }

    /// [`hash_agg`], unboxed.
    fn hash_agg_executor(
        store: &Arc<Store>,
        header: &str,
        group_by: &[usize],
        calls: &str,
        input: BoxedExecutor,
    ) -> HashAggExecutor {
        let in_schema = schema(header);
        let mut group_exprs: Vec<Arc<dyn PhysicalExpr>> = Vec::new();
        let mut group_types = Vec::new();
        for &i in group_by {
            group_exprs.push(Arc::new(Column::new(&format!("c{i}"), i)));
            group_types.push(in_schema.field(i).data_type().clone());
        }
        let n_groups = group_types.len();
        let mut result_types = group_types.clone();
        result_types.push(ArrowType::Int64);
        let mut agg_calls = Vec::new();
        for (i, call) in calls.split_whitespace().enumerate() {
            let (name, arg) = call.strip_suffix(')').and_then(|c| c.split_once('(')).unwrap();
            let kind = match name {
                "count" => AggKind::Count,
                "sum" => AggKind::Sum,
                "avg" => AggKind::Avg,
                "min" => AggKind::Min,
                "max" => AggKind::Max,
                other => panic!("unknown aggregate {other}"),
            };
            let (arg, arg_type): (Arc<dyn PhysicalExpr>, _) = match arg {
                "*" => (Arc::new(Literal::new(ScalarValue::Int64(Some(1)))), ArrowType::Int64),
                column => {
                    let index: usize = column.strip_prefix('c').unwrap().parse().unwrap();
                    let ty = in_schema.field(index).data_type().clone();
                    (Arc::new(Column::new(column, index)), ty)
                }
            };
            let output_type = output_type(kind, &arg_type);
            let mut multiset = None;
            match kind {
                AggKind::Count => result_types.push(ArrowType::Int64),
                AggKind::Sum | AggKind::Avg => {
                    let sum_type =
                        if kind == AggKind::Avg { ArrowType::Float64 } else { output_type.clone() };
                    result_types.extend([sum_type, ArrowType::Int64]);
                }
                AggKind::Min | AggKind::Max => {
                    result_types.push(output_type.clone());
                    let mut types = group_types.clone();
                    types.extend([output_type.clone(), ArrowType::Int64]);
                    multiset = Some(state_table(101 + i as u32, &types, n_groups + 1, n_groups));
                }
            }
            agg_calls.push(AggCall { kind, arg, output_type, multiset });
        }
        let fields: Vec<Field> = group_types
            .iter()
            .chain(agg_calls.iter().map(|c| &c.output_type))
            .enumerate()
            .map(|(i, t)| Field::new(format!("o{i}"), t.clone(), true))
            .collect();
        HashAggExecutor::new(
            input,
            store.clone(),
            group_exprs,
            agg_calls,
            state_table(100, &result_types, n_groups, n_groups),
            Arc::new(Schema::new(fields)),
        )
    }

    /// Passes its input through and, when the next message is asked for after a checkpoint
    /// barrier (that is, once every executor above has handled that barrier), commits the
    /// epoch the barrier ends, as the barrier manager does once it collects the barrier.
    /// Epochs after `until` are left uncommitted, as a crash would.
    struct CommitAtBarriers {
        input: BoxedExecutor,
        store: Arc<Store>,
        until: Epoch,
    }

    /// `messages` as an input whose checkpoints up to epoch `until` commit in `store`.
    fn committing_until(
        store: &Arc<Store>,
        until: u64,
        messages: impl IntoIterator<Item = Message>,
    ) -> BoxedExecutor {
        let input = MockSource::boxed(messages);
        Box::new(CommitAtBarriers { input, store: store.clone(), until: Epoch(until) })
    }

    /// `messages` as an input whose checkpoints commit in `store`.
    fn committing(
        store: &Arc<Store>,
        messages: impl IntoIterator<Item = Message>,
    ) -> BoxedExecutor {
        committing_until(store, u64::MAX, messages)
    }

    impl Executor for CommitAtBarriers {
        fn execute(self: Box<Self>) -> BoxedMessageStream {
            let Self { input, store, until } = *self;
            async_stream::try_stream! {
                let mut input = input.execute();
                while let Some(msg) = input.next().await {
                    let msg = msg?;
                    let ends = match &msg {
                        Message::Barrier(b) if b.is_checkpoint() && b.epoch.prev <= until => {
                            Some(b.epoch.prev)
                        }
                        _ => None,
                    };
                    yield msg;
                    if let Some(epoch) = ends {
                        store.commit(epoch)?;
                    }
                }
            }
            .boxed()
        }

        fn identity(&self) -> &str {
            "CommitAtBarriers"
        }
    }

    /// Everything `executor` emits, with the rows of each chunk sorted by their cells (an
    /// update pair kept together): the executor emits changed groups in hash-map order.
    async fn run_sorted(executor: BoxedExecutor) -> String {
        let out = run(executor).await;
        let blocks = out.split("\n\n").map(|block| {
            let mut lines = block.lines();
            let header = lines.next().unwrap_or_default();
            if header.starts_with("barrier") || header.starts_with("error") {
                return block.to_owned();
            }
            let mut units: Vec<Vec<&str>> = Vec::new();
            for line in lines {
                match units.last_mut() {
                    Some(u) if u.len() == 1 && u[0].starts_with("U-") && line.starts_with("U+") => {
                        u.push(line)
                    }
                    _ => units.push(vec![line]),
                }
            }
            units.sort_by_key(|u| (u[0].split_once(' ').unwrap().1.to_owned(), u.clone()));
            std::iter::once(header).chain(units.concat()).collect::<Vec<_>>().join("\n")
        });
        blocks.collect::<Vec<_>>().join("\n\n")
    }

    /// Runs a hash aggregation (see [`hash_agg`]) over a fresh store.
    async fn aggregate(
        header: &str,
        group_by: &[usize],
        calls: &str,
        input: impl IntoIterator<Item = Message>,
    ) -> String {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        run_sorted(hash_agg(&store, header, group_by, calls, committing(&store, input))).await
    }

    #[tokio::test]
    async fn touched_groups_count_as_the_epochs_memory_until_the_flush_stages_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let HashAggExecutor { group_exprs, calls, result_table, output_schema, .. } =
            hash_agg_executor(&store, "i I", &[0], "count(*) min(c1)", MockSource::boxed([]));
        let mut agg =
            Aggregation::new(store.clone(), group_exprs, calls, result_table, output_schema);
        let rows: String = (0..1000).map(|g| format!("\n+ {g} {g}")).collect();
        agg.apply(&StreamChunk::from_pretty(&format!("i I{rows}"))).unwrap();
        let held = store.uncommitted_bytes();
        assert!(held >= 1000 * size_of::<Group>(), "1000 groups hold {held} bytes");
        // The same groups and values again: nothing more is held.
        agg.apply(&StreamChunk::from_pretty(&format!("i I{rows}"))).unwrap();
        assert_eq!(store.uncommitted_bytes(), held);
        // The flush turns them into staged rows, far smaller than the groups were.
        agg.flush().unwrap();
        assert_eq!(agg.memory.bytes(), 0);
        let staged = store.uncommitted_bytes();
        assert!(staged > 0 && staged < held / 2, "staged {staged} of {held}");
        // An actor that stops mid-epoch gives back what its groups held.
        let more: String = (1000..1100).map(|g| format!("\n+ {g} {g}")).collect();
        agg.apply(&StreamChunk::from_pretty(&format!("i I{more}"))).unwrap();
        assert!(store.uncommitted_bytes() > staged);
        drop(agg);
        assert_eq!(store.uncommitted_bytes(), 0);
    }

    #[tokio::test]
    async fn groups_past_the_memory_bound_are_flushed_mid_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let input = [
            initial(0),
            chunk("i I\n+ 1 10\n+ 2 5"),
            chunk("i I\n+ 1 1"),
            chunk("i I\n+ 3 7"),
            barrier(1),
        ];
        // Two groups pass the bound: the first chunk's groups go out before the next chunk,
        // and group 1, touched again in the same epoch, changes as an update pair.
        let bound = 2 * footprint(&[0; 9], &[ScalarValue::Int32(Some(0))], &[]);
        let agg =
            hash_agg_executor(&store, "i I", &[0], "count(*) sum(c1)", committing(&store, input))
                .with_flush_bytes(bound);
        let expected = "barrier 0

                        i I I
                        + 1 1 10
                        + 2 1 5

                        i I I
                        U- 1 1 10
                        U+ 1 2 11
                        + 3 1 7

                        barrier 1";
        assert_eq!(run_sorted(Box::new(agg)).await, dedent(expected));
    }

    #[tokio::test]
    async fn new_groups_are_inserted_at_the_barrier_not_per_chunk() {
        let input =
            [initial(0), chunk("i I\n+ 1 10\n+ 2 5\n+ 1 20"), chunk("i I\n+ 3 7"), barrier(1)];
        let expected = "barrier 0

                        i I I
                        + 1 2 30
                        + 2 1 5
                        + 3 1 7

                        barrier 1";
        assert_eq!(aggregate("i I", &[0], "count(*) sum(c1)", input).await, dedent(expected));
    }

    #[tokio::test]
    async fn a_changed_group_is_an_update_pair_and_an_emptied_group_a_delete() {
        let input = [
            initial(0),
            chunk("i I\n+ 1 10\n+ 1 20\n+ 2 5"),
            barrier(1),
            chunk("i I\n- 1 10\n- 2 5\n+ 3 1"),
            barrier(2),
        ];
        let expected = "barrier 0

                        i I I
                        + 1 2 30
                        + 2 1 5

                        barrier 1

                        i I I
                        U- 1 2 30
                        U+ 1 1 20
                        - 2 1 5
                        + 3 1 1

                        barrier 2";
        assert_eq!(aggregate("i I", &[0], "count(*) sum(c1)", input).await, dedent(expected));
    }

    #[tokio::test]
    async fn input_update_pairs_retract_the_old_row_and_add_the_new_one() {
        let input = [
            initial(0),
            chunk("i I\n+ 1 10\n+ 2 5"),
            barrier(1),
            // 1: 10 -> 15 in place; 2's row moves to group 1.
            chunk("i I\nU- 1 10\nU+ 1 15\nU- 2 5\nU+ 1 5"),
            barrier(2),
        ];
        let expected = "barrier 0

                        i I I
                        + 1 1 10
                        + 2 1 5

                        barrier 1

                        i I I
                        U- 1 1 10
                        U+ 1 2 20
                        - 2 1 5

                        barrier 2";
        assert_eq!(aggregate("i I", &[0], "count(*) sum(c1)", input).await, dedent(expected));
    }

    #[tokio::test]
    async fn a_group_changed_and_changed_back_within_an_epoch_emits_nothing() {
        let input = [
            initial(0),
            chunk("i I\n+ 1 10"),
            barrier(1),
            chunk("i I\n+ 1 5\n+ 2 3"),
            chunk("i I\n- 1 5\n- 2 3"),
            barrier(2),
        ];
        let expected = "barrier 0

                        i I I
                        + 1 1 10

                        barrier 1

                        barrier 2";
        assert_eq!(aggregate("i I", &[0], "count(*) sum(c1)", input).await, dedent(expected));
    }

    #[tokio::test]
    async fn retracting_the_extreme_reads_the_next_one_from_the_stored_values() {
        let input = [
            initial(0),
            chunk("i i\n+ 1 5\n+ 1 3\n+ 1 9\n+ 1 3\n+ 2 -7\n+ 2 -2"),
            barrier(1),
            // One of the two 3s goes: the minimum stays 3.
            chunk("i i\n- 1 3\n- 1 9\n- 2 -7"),
            barrier(2),
            chunk("i i\n- 1 3"),
            barrier(3),
        ];
        let expected = "barrier 0

                        i i i
                        + 1 3 9
                        + 2 -7 -2

                        barrier 1

                        i i i
                        U- 1 3 9
                        U+ 1 3 5
                        U- 2 -7 -2
                        U+ 2 -2 -2

                        barrier 2

                        i i i
                        U- 1 3 5
                        U+ 1 5 5

                        barrier 3";
        assert_eq!(aggregate("i i", &[0], "min(c1) max(c1)", input).await, dedent(expected));
    }

    #[tokio::test]
    async fn min_and_max_of_floats_and_text_order_by_value() {
        let input = [
            initial(0),
            chunk("T F T\n+ a -1.5 pear\n+ a -0.5 apple\n+ a 2.25 plum"),
            barrier(1),
            chunk("T F T\n- a -1.5 pear\n- a 2.25 plum"),
            barrier(2),
        ];
        let expected = "barrier 0

                        T F F T T
                        + a -1.5 2.25 apple plum

                        barrier 1

                        T F F T T
                        U- a -1.5 2.25 apple plum
                        U+ a -0.5 -0.5 apple apple

                        barrier 2";
        let calls = "min(c1) max(c1) min(c2) max(c2)";
        assert_eq!(aggregate("T F T", &[0], calls, input).await, dedent(expected));
    }

    #[tokio::test]
    async fn a_null_group_key_is_a_group_of_its_own() {
        let input = [
            initial(0),
            chunk("i I\n+ . 4\n+ . 2\n+ 1 3"),
            barrier(1),
            chunk("i I\n- . 2"),
            barrier(2),
            chunk("i I\n- . 4"),
            barrier(3),
        ];
        let expected = "barrier 0

                        i I I I
                        + . 2 6 2
                        + 1 1 3 3

                        barrier 1

                        i I I I
                        U- . 2 6 2
                        U+ . 1 4 4

                        barrier 2

                        i I I I
                        - . 1 4 4

                        barrier 3";
        let calls = "count(*) sum(c1) min(c1)";
        assert_eq!(aggregate("i I", &[0], calls, input).await, dedent(expected));
    }

    #[tokio::test]
    async fn count_of_a_column_skips_nulls_and_sum_and_min_of_only_nulls_are_null() {
        let input = [
            initial(0),
            chunk("i I\n+ 1 .\n+ 1 ."),
            barrier(1),
            chunk("i I\n+ 1 4"),
            barrier(2),
            // Back to only NULLs: the group stays, its sum and min are NULL again.
            chunk("i I\n- 1 4"),
            barrier(3),
        ];
        let expected = "barrier 0

                        i I I I I
                        + 1 2 0 . .

                        barrier 1

                        i I I I I
                        U- 1 2 0 . .
                        U+ 1 3 1 4 4

                        barrier 2

                        i I I I I
                        U- 1 3 1 4 4
                        U+ 1 2 0 . .

                        barrier 3";
        let calls = "count(*) count(c1) sum(c1) min(c1)";
        assert_eq!(aggregate("i I", &[0], calls, input).await, dedent(expected));
    }

    #[tokio::test]
    async fn avg_divides_the_sum_by_the_non_null_count() {
        let input = [
            initial(0),
            chunk("i i\n+ 1 1\n+ 1 2\n+ 1 ."),
            barrier(1),
            chunk("i i\n- 1 1\n- 1 2"),
            barrier(2),
        ];
        let expected = "barrier 0

                        i F
                        + 1 1.5

                        barrier 1

                        i F
                        U- 1 1.5
                        U+ 1 .

                        barrier 2";
        assert_eq!(aggregate("i i", &[0], "avg(c1)", input).await, dedent(expected));
    }

    #[tokio::test]
    async fn sum_and_min_of_numeric_keep_the_scale() {
        let input = [
            initial(0),
            chunk("i N\n+ 1 1.25\n+ 1 -0.50\n+ 1 10"),
            barrier(1),
            chunk("i N\n- 1 -0.50"),
            barrier(2),
        ];
        let expected = "barrier 0

                        i N N
                        + 1 10.75 -0.50

                        barrier 1

                        i N N
                        U- 1 10.75 -0.50
                        U+ 1 11.25 1.25

                        barrier 2";
        assert_eq!(aggregate("i N", &[0], "sum(c1) min(c1)", input).await, dedent(expected));
    }

    /// Like Postgres, an aggregate without GROUP BY has one row also over no rows: count 0,
    /// sum and min NULL. It is inserted at the first barrier and then only ever updated.
    #[tokio::test]
    async fn without_group_by_there_is_always_one_row_with_count_0_when_empty() {
        let input = [
            initial(0),
            barrier(1),
            chunk("I\n+ 5\n+ 3\n+ ."),
            barrier(2),
            chunk("I\n- 5\n- 3\n- ."),
            barrier(3),
        ];
        let expected = "I I I I
                        + 0 0 . .

                        barrier 0

                        barrier 1

                        I I I I
                        U- 0 0 . .
                        U+ 3 2 8 3

                        barrier 2

                        I I I I
                        U- 3 2 8 3
                        U+ 0 0 . .

                        barrier 3";
        let calls = "count(*) count(c0) sum(c0) min(c0)";
        assert_eq!(aggregate("I", &[], calls, input).await, dedent(expected));
    }

    /// The job the held aggregates of these tests belong to.
    const JOB: TableId = TableId(7);

    /// A checkpoint barrier ending epoch `prev` that releases [`JOB`].
    fn release(prev: u64) -> Message {
        let mutation = Mutation { release: [JOB].into(), ..Default::default() };
        Message::Barrier(Barrier::checkpoint(Epoch(prev)).with_mutation(mutation))
    }

    /// A `count(*) sum(c1)` aggregation of `i I` rows grouped by `c0`, holding the groups of
    /// `vnodes` (all when `None`) for [`JOB`] up to `limit` groups.
    fn held(
        store: &Arc<Store>,
        vnodes: Option<Vec<VirtualNode>>,
        limit: usize,
        input: BoxedExecutor,
    ) -> BoxedExecutor {
        let vnodes =
            vnodes.unwrap_or_else(|| (0..VirtualNode::COUNT as u16).map(VirtualNode).collect());
        let agg = hash_agg_executor(store, "i I", &[0], "count(*) sum(c1)", input);
        Box::new(agg.holding(Hold { job: JOB, vnodes, limit }))
    }

    #[tokio::test]
    async fn a_held_aggregate_emits_nothing_until_released_then_each_group_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let input = [
            initial(0),
            chunk("i I\n+ 1 10\n+ 1 20\n+ 2 5"),
            barrier(1),
            chunk("i I\n- 2 5\n+ 3 1"),
            barrier(2),
            chunk("i I\n+ 1 1"),
            release(3),
            chunk("i I\n+ 3 2"),
            barrier(4),
        ];
        // Group 2 came and went while held: downstream never hears of it.
        let expected = "barrier 0

                        barrier 1

                        barrier 2

                        i I I
                        + 1 3 31
                        + 3 1 1

                        barrier 3

                        i I I
                        U- 3 1 1
                        U+ 3 2 3

                        barrier 4";
        let out = run_sorted(held(&store, None, 100, committing(&store, input))).await;
        assert_eq!(out, dedent(expected));
    }

    #[tokio::test]
    async fn a_held_aggregate_restarted_before_its_release_still_holds_and_after_it_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let first = [initial(0), chunk("i I\n+ 1 10"), barrier(1)];
        let out = run_sorted(held(&store, None, 100, committing(&store, first))).await;
        assert_eq!(out, dedent("barrier 0\n\nbarrier 1"));
        drop(store);

        // Restarted before the release: what it held before the restart is released with the
        // rest, once.
        let store = Store::open(dir.path()).unwrap();
        let second = [initial(1), chunk("i I\n+ 1 5\n+ 2 1"), barrier(2), release(3)];
        let expected = "barrier 1

                        barrier 2

                        i I I
                        + 1 2 15
                        + 2 1 1

                        barrier 3";
        let out = run_sorted(held(&store, None, 100, committing(&store, second))).await;
        assert_eq!(out, dedent(expected));
        drop(store);

        // Restarted after the release (the job not yet marked created, so built holding): its
        // vnodes are released, and it runs as any aggregate.
        let store = Store::open(dir.path()).unwrap();
        let third = [initial(3), chunk("i I\n+ 2 1"), barrier(4), release(5)];
        let expected = "barrier 3

                        i I I
                        U- 2 1 1
                        U+ 2 2 2

                        barrier 4

                        barrier 5";
        let out = run_sorted(held(&store, None, 100, committing(&store, third))).await;
        assert_eq!(out, dedent(expected));
    }

    #[tokio::test]
    async fn a_held_aggregate_past_its_limit_releases_early_and_other_vnodes_never_hold() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // Only the vnodes of groups 1, 2 and 3 hold; group 4's vnode is not this actor's hold.
        let vnodes_of_groups = |groups: &[i32]| {
            let column: ArrayRef = Arc::new(arrow::array::Int32Array::from(groups.to_vec()));
            crate::stream::dispatch::vnodes_of(&[column], groups.len()).unwrap()
        };
        let mut vnodes = vnodes_of_groups(&[1, 2, 3]);
        assert!(!vnodes.contains(&vnodes_of_groups(&[4])[0]), "pick groups of other vnodes");
        vnodes.sort();
        vnodes.dedup();
        let input = [
            initial(0),
            chunk("i I\n+ 1 10\n+ 2 20\n+ 4 40"),
            barrier(1),
            chunk("i I\n+ 3 30"),
            barrier(2),
            chunk("i I\n+ 1 1"),
            barrier(3),
        ];
        // Two groups held are within the limit; the third is one too many.
        let expected = "barrier 0

                        i I I
                        + 4 1 40

                        barrier 1

                        i I I
                        + 1 1 10
                        + 2 1 20
                        + 3 1 30

                        barrier 2

                        i I I
                        U- 1 1 10
                        U+ 1 2 11

                        barrier 3";
        let out = run_sorted(held(&store, Some(vnodes), 2, committing(&store, input))).await;
        assert_eq!(out, dedent(expected));
    }

    #[tokio::test]
    async fn a_restarted_executor_continues_from_the_committed_state() {
        let dir = tempfile::tempdir().unwrap();
        let calls = "count(*) sum(c1) min(c1)";
        let store = Store::open(dir.path()).unwrap();
        let first = [initial(0), chunk("i I\n+ 1 10\n+ 1 20\n+ 2 5"), barrier(1)];
        let expected = "barrier 0

                        i I I I
                        + 1 2 30 10
                        + 2 1 5 5

                        barrier 1";
        assert_eq!(
            run_sorted(hash_agg(&store, "i I", &[0], calls, committing(&store, first))).await,
            dedent(expected)
        );
        drop(store);

        let store = Store::open(dir.path()).unwrap();
        let second = [initial(1), chunk("i I\n- 1 10\n+ 2 7"), barrier(2)];
        let expected = "barrier 1

                        i I I I
                        U- 1 2 30 10
                        U+ 1 1 20 20
                        U- 2 1 5 5
                        U+ 2 2 12 5

                        barrier 2";
        assert_eq!(
            run_sorted(hash_agg(&store, "i I", &[0], calls, committing(&store, second))).await,
            dedent(expected)
        );
    }

    #[tokio::test]
    async fn a_restart_forgets_the_epochs_that_were_not_committed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // Epoch 2 reaches the executor's barrier but never commits.
        let first =
            [initial(0), chunk("i I\n+ 1 10"), barrier(1), chunk("i I\n+ 1 20"), barrier(2)];
        let expected = "barrier 0

                        i I I
                        + 1 1 10

                        barrier 1

                        i I I
                        U- 1 1 10
                        U+ 1 2 30

                        barrier 2";
        let input = committing_until(&store, 1, first);
        let out = run_sorted(hash_agg(&store, "i I", &[0], "count(*) sum(c1)", input)).await;
        assert_eq!(out, dedent(expected));
        drop(store);

        let store = Store::open(dir.path()).unwrap();
        // The recovery restarts from epoch 1 in epoch 3; epoch 2 is lost.
        let second = [
            Message::Barrier(Barrier::initial(Epoch(1), Epoch(3))),
            chunk("i I\n+ 1 1"),
            barrier(3),
        ];
        let expected = "barrier 1

                        i I I
                        U- 1 1 10
                        U+ 1 2 11

                        barrier 3";
        let input = committing(&store, second);
        let out = run_sorted(hash_agg(&store, "i I", &[0], "count(*) sum(c1)", input)).await;
        assert_eq!(out, dedent(expected));
    }

    #[tokio::test]
    async fn without_group_by_a_restart_does_not_insert_the_row_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let first = [initial(0), chunk("I\n+ 5"), barrier(1)];
        let expected = "I I
                        + 0 .

                        barrier 0

                        I I
                        U- 0 .
                        U+ 1 5

                        barrier 1";
        let out =
            run_sorted(hash_agg(&store, "I", &[], "count(*) sum(c0)", committing(&store, first)))
                .await;
        assert_eq!(out, dedent(expected));
        drop(store);

        let store = Store::open(dir.path()).unwrap();
        let second = [initial(1), chunk("I\n+ 2"), barrier(2)];
        let expected = "barrier 1

                        I I
                        U- 1 5
                        U+ 2 7

                        barrier 2";
        let out =
            run_sorted(hash_agg(&store, "I", &[], "count(*) sum(c0)", committing(&store, second)))
                .await;
        assert_eq!(out, dedent(expected));
    }

    #[tokio::test]
    async fn groups_of_several_columns_differ_in_any_column_null_included() {
        let input = [
            initial(0),
            chunk("i T I\n+ 1 a 5\n+ 1 b 6\n+ 1 a 3\n+ . a 1\n+ 1 . 2"),
            barrier(1),
            chunk("i T I\n- 1 a 3\n- 1 . 2"),
            barrier(2),
        ];
        let expected = "barrier 0

                        i T I I I
                        + . a 1 1 1
                        + 1 . 1 2 2
                        + 1 a 2 3 5
                        + 1 b 1 6 6

                        barrier 1

                        i T I I I
                        - 1 . 1 2 2
                        U- 1 a 2 3 5
                        U+ 1 a 1 5 5

                        barrier 2";
        let calls = "count(*) min(c2) max(c2)";
        assert_eq!(aggregate("i T I", &[0, 1], calls, input).await, dedent(expected));
    }

    /// As in Postgres, -0 groups with 0 and NaN with NaN; the group shows its first row's key.
    #[tokio::test]
    async fn float_group_keys_put_minus_zero_with_zero_and_nan_with_nan() {
        let input = [initial(0), chunk("F I\n+ 0 1\n+ -0 2\n+ NaN 3\n+ NaN 4"), barrier(1)];
        let expected = "barrier 0

                        F I I
                        + 0.0 2 3
                        + NaN 2 7

                        barrier 1";
        assert_eq!(aggregate("F I", &[0], "count(*) sum(c1)", input).await, dedent(expected));
    }

    #[tokio::test]
    async fn a_group_loaded_from_state_retracts_the_values_it_emitted() {
        // -0 is the group of 0; the update retracts the row as it was emitted (0.0).
        let input = [initial(0), chunk("F I\n+ 0 1"), barrier(1), chunk("F I\n+ -0 2"), barrier(2)];
        let expected = "barrier 0

                        F I I
                        + 0.0 1 1

                        barrier 1

                        F I I
                        U- 0.0 1 1
                        U+ 0.0 2 3

                        barrier 2";
        assert_eq!(aggregate("F I", &[0], "count(*) sum(c1)", input).await, dedent(expected));
    }

    /// The aggregation of [`hash_agg`] in two phases, as the planner builds it: a
    /// [`LocalAggExecutor`](crate::stream::executor::local_agg::LocalAggExecutor) over `input`
    /// sending its groups at `max_groups`, and the aggregate merging its partial rows.
    fn two_phase(
        store: &Arc<Store>,
        header: &str,
        group_by: &[usize],
        calls: &str,
        max_groups: usize,
        input: BoxedExecutor,
    ) -> BoxedExecutor {
        use crate::stream::executor::local_agg::LocalAggExecutor;
        let one = hash_agg_executor(store, header, group_by, calls, MockSource::boxed([]));
        let partial = one.result_table.full_schema();
        let copy = |c: &AggCall, arg| AggCall {
            kind: c.kind,
            arg,
            output_type: c.output_type.clone(),
            multiset: None,
        };
        let locals = one.calls.iter().map(|c| copy(c, c.arg.clone())).collect();
        let local = LocalAggExecutor::new(input, one.group_exprs.clone(), locals, partial.clone())
            .unwrap()
            .with_max_groups(max_groups);
        let n = group_by.len();
        let column = |i: usize| -> Arc<dyn PhysicalExpr> {
            Arc::new(Column::new(partial.field(i).name(), i))
        };
        let mut at = n + 1;
        let mut finals = Vec::new();
        for call in &one.calls {
            finals.push(copy(call, column(at)));
            at += if call.kind == AggKind::Count { 1 } else { 2 };
        }
        let groups = (0..n).map(column).collect();
        let agg = HashAggExecutor::new(
            Box::new(local),
            store.clone(),
            groups,
            finals,
            one.result_table.clone(),
            one.output_schema.clone(),
        );
        Box::new(agg.merging())
    }

    /// Inserts, deletes and update pairs over several epochs, with NULLs, emptied groups and a
    /// group emptied and refilled within an epoch.
    fn changes() -> Vec<Message> {
        vec![
            initial(0),
            chunk("i I I\n+ 1 10 1\n+ 1 . 2\n+ 2 5 .\n+ 3 7 3"),
            chunk("i I I\n+ 1 20 4\n+ 4 . .\n- 3 7 3"),
            barrier(1),
            chunk("i I I\n- 1 10 1\nU- 2 5 .\nU+ 2 6 5\n+ 5 1 1"),
            chunk("i I I\n- 4 . .\n+ 4 8 8\nU- 1 . 2\nU+ 3 9 9"),
            barrier(2),
            chunk("i I I\n- 1 20 4\n- 5 1 1\n+ 6 . ."),
            barrier(3),
            barrier(4),
            chunk("i I I\n+ 1 1 1\n+ 2 2 2\n+ 3 3 3\n+ 4 4 4\n+ 5 5 5\n+ 6 6 6"),
            barrier(5),
        ]
    }

    #[tokio::test]
    async fn two_phases_emit_what_one_aggregate_emits() {
        let calls = "count(*) sum(c1) count(c2) sum(c2)";
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let one = hash_agg(&store, "i I I", &[0], calls, committing(&store, changes()));
        let expected = run_sorted(one).await;
        assert!(expected.contains("U- 2 1 5 0 ."), "{expected}");
        for max_groups in [1, 2, 100] {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            let input = committing(&store, changes());
            let two = two_phase(&store, "i I I", &[0], calls, max_groups, input);
            assert_eq!(run_sorted(two).await, expected, "at {max_groups} groups");
        }
    }

    #[tokio::test]
    async fn the_final_phase_merges_partial_rows_into_stored_groups() {
        // Partial rows as a local phase sends them: group, row_count, count(*), sum, nonnull.
        let input = [
            initial(0),
            chunk("i I I I I\n+ 1 2 2 30 2\n+ 2 1 1 0 0"),
            barrier(1),
            chunk("i I I I I\n+ 1 -1 -1 -10 -1\n+ 2 -1 -1 0 0\n+ 1 0 0 5 0"),
            barrier(2),
        ];
        let expected = "barrier 0

                        i I I
                        + 1 2 30
                        + 2 1 .

                        barrier 1

                        i I I
                        U- 1 2 30
                        U+ 1 1 25
                        - 2 1 .

                        barrier 2";
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // The final phase over partial rows of `(i, I)` input rows: group by c0, count(c2) as
        // count(*), sum(c3) with its non-NULL count in c4.
        let one = hash_agg_executor(&store, "i I", &[0], "count(*) sum(c1)", MockSource::boxed([]));
        let partial: Arc<dyn PhysicalExpr> = Arc::new(Column::new("c0", 0));
        let mut calls = Vec::new();
        for (call, at) in one.calls.iter().zip([2, 3]) {
            calls.push(AggCall {
                kind: call.kind,
                arg: Arc::new(Column::new(&format!("c{at}"), at)),
                output_type: call.output_type.clone(),
                multiset: None,
            });
        }
        let agg = HashAggExecutor::new(
            committing(&store, input),
            store.clone(),
            vec![partial],
            calls,
            one.result_table.clone(),
            one.output_schema.clone(),
        )
        .merging();
        assert_eq!(run_sorted(Box::new(agg)).await, dedent(expected));
    }
}
