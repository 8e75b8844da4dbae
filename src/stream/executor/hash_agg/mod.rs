//! `HashAggExecutor`: grouped aggregation with retraction.
//!
//! Groups live in a result state table keyed by the group key: `group | row_count | agg states`.
//! count, sum and avg retract arithmetically; min and max keep a multiset of their input values
//! per group in their own state table (`group | value | count`) and re-read the extreme when it
//! may have changed. A DISTINCT count, sum or avg keeps such a multiset too, and counts a value
//! in its state when the value's count in the multiset leaves or returns to zero. Changed groups are emitted on each barrier, before it is forwarded: an
//! update pair for a group that existed and still exists, an insert for a new group, a delete
//! for a group whose last row went away. Groups touched in an epoch count as its memory
//! ([`EpochMemory`]); past [`FLUSH_BYTES`] of them they are flushed mid-epoch the same way, so
//! an aggregate with a group per input row holds a bounded number of them.
//!
//! A partial aggregate of eager aggregation may *hold* its output while its job creates
//! ([`hold`](crate::stream::executor::hash_agg::hold)).

/// Holding a partial aggregate's groups while its job creates, and releasing them.
mod cache;
pub mod hold;
/// The value multisets of min, max, DISTINCT calls and string_agg.
mod multiset;
/// Partial rows of a two-phase aggregation folded into their groups.
mod partial;
/// The running state of one aggregate of one group.
mod state;
/// Sums and averages with `NaN` and the infinities among their inputs.
pub mod sum;

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType as ArrowType, Decimal128Type, Int64Type, SchemaRef};
use datafusion::physical_plan::PhysicalExpr;
use datafusion::scalar::ScalarValue;
use futures::StreamExt;

use crate::catalog::{Epoch, TableCatalog, VirtualNode};
use crate::error::{Error, Result};
use crate::storage::keycodec::{encode_keys, encode_keys_into, prefix_end, vnode_in_key};
use crate::storage::row_codec::RowDecoder;
use crate::storage::state_table::StateTable;
use crate::storage::store::{EpochMemory, Store};
use crate::stream::eval::{eval, validity};
use crate::stream::executor::top_n::order_keys;
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::{Message, Op, StreamChunk, unexpected_truncate};

use crate::types::specials::{special_index, special_output, split_specials};
use cache::{CACHE_GROUPS, Elsewhere, GroupCache};
use hold::Held;
pub use hold::{HOLD_LIMIT, Hold};
pub(crate) use state::cast;
use state::{
    AggState, add_to_sum, add_value, as_f64, as_i64, column_of, empty_state, fold, fold_partial,
    last_i64,
};
use sum::{SumLayout, numeric_avg};

/// The memory an actor's groups touched since its last flush may take ([`footprint`]) before
/// it flushes them mid-epoch: stored, emitted unless held, and cached as after a barrier. So an
/// aggregate with as many groups as rows holds a bounded number of them whatever its epochs,
/// and one with fewer groups than fit (an eager aggregation's 50 k per actor) still writes
/// each group once per epoch.
const FLUSH_BYTES: usize = 32 << 20;

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
    /// `string_agg(x, separator [ORDER BY ..])`.
    StringAgg,
    /// `array_agg(x [ORDER BY ..])`: NULL values too.
    ArrayAgg,
    /// `var_samp(x)` (`variance`, DataFusion's `var`).
    VarSamp,
    /// `var_pop(x)`.
    VarPop,
    /// `stddev_samp(x)` (`stddev`).
    StddevSamp,
    /// `stddev_pop(x)`.
    StddevPop,
}

impl AggKind {
    /// Whether it is a variance or a standard deviation.
    pub fn spreads(self) -> bool {
        matches!(
            self,
            AggKind::VarSamp | AggKind::VarPop | AggKind::StddevSamp | AggKind::StddevPop
        )
    }

    /// Whether the call's result is computed again from its group's whole multiset at each
    /// flush (min and max read one end of it).
    pub fn reads_multiset(self) -> bool {
        matches!(
            self,
            AggKind::Min
                | AggKind::Max
                | AggKind::StringAgg
                | AggKind::ArrayAgg
                | AggKind::VarSamp
                | AggKind::VarPop
                | AggKind::StddevSamp
                | AggKind::StddevPop
        )
    }
}

/// What a `string_agg` call needs besides its argument.
#[derive(Debug, Clone)]
pub struct Listing {
    /// Written between two values.
    pub separator: String,
    /// Its `ORDER BY` (values in the order of their bytes when empty).
    pub order: Vec<crate::stream::executor::top_n::SortKey>,
}

/// One aggregate call of the query.
pub struct AggCall {
    /// Which function.
    pub kind: AggKind,
    /// The argument.
    pub arg: Arc<dyn PhysicalExpr>,
    /// The output type.
    pub output_type: ArrowType,
    /// For min and max, and for a DISTINCT call: the value multiset table.
    pub multiset: Option<Arc<TableCatalog>>,
    /// `count`, `sum` or `avg` of the distinct values only (`count(DISTINCT x)`): a value
    /// counts while the group's multiset holds it.
    pub distinct: bool,
    /// For `string_agg`: its separator and order. Its multiset is `group | order | value |
    /// count`, and the string is written again from it for each group it changed.
    pub listing: Option<Listing>,
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
    /// [`CACHE_GROUPS`], or fewer in tests.
    cache_groups: usize,
    /// Whether this actor owns the one group of an aggregate without `GROUP BY` (the vnode of
    /// the empty key): only that actor has its row when there is no input.
    owns_global: bool,
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
            cache_groups: CACHE_GROUPS,
            owns_global: true,
        }
    }

    /// The same aggregate as the actor owning `vnodes` of its fragment: without `GROUP BY`, it
    /// has the one row only if it owns the empty key's vnode (its input is sent there; every
    /// other actor of the fragment sees none).
    pub fn owning(mut self, vnodes: &[VirtualNode]) -> Result<Self> {
        let key = encode_keys(self.result_table.id, &[], 1, 0)?.remove(0);
        self.owns_global = vnodes.contains(&vnode_in_key(&key));
        Ok(self)
    }

    /// The same, flushing its touched groups mid-epoch once they take `bytes` (see
    /// [`FLUSH_BYTES`]).
    pub fn with_flush_bytes(mut self, bytes: usize) -> Self {
        self.flush_bytes = bytes;
        self
    }

    /// The same, keeping at most `groups` groups between flushes (see [`CACHE_GROUPS`]).
    #[cfg(test)]
    pub fn with_cache_groups(mut self, groups: usize) -> Self {
        self.cache_groups = groups;
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
            cache_groups,
            owns_global,
        } = *self;
        async_stream::try_stream! {
            let mut agg = Aggregation::new(store, group_exprs, calls, result_table, output_schema);
            agg.cache = GroupCache::new(cache_groups, agg.stores_nothing()?);
            agg.merge = merge;
            agg.global_loaded = !owns_global;
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

/// A pending change to one multiset entry: the group's slot and values, the entry's other key
/// values (the value; the order and the value of a `string_agg`), the count change.
type MultisetDelta = (usize, Vec<ScalarValue>, Vec<ScalarValue>, i64);

/// The state of the aggregation between barriers.
struct Aggregation {
    group_exprs: Vec<Arc<dyn PhysicalExpr>>,
    calls: Vec<AggCall>,
    result_def: Arc<TableCatalog>,
    result: StateTable,
    /// Per `sum` and `avg` call, how its result table keeps it (see [`sum`]).
    layouts: Vec<Option<SumLayout>>,
    multisets: Vec<Option<StateTable>>,
    output_schema: SchemaRef,
    /// Groups touched in this epoch, in the order first touched.
    groups: Vec<Group>,
    /// Where each group of `groups` is, by result key.
    group_index: hashbrown::HashMap<Vec<u8>, usize>,
    /// The result keys of the last chunk's rows (buffers reused from chunk to chunk).
    keys: Vec<Vec<u8>>,
    /// Per call with a multiset: multiset key -> (group slot and values, value, count change).
    deltas: Vec<HashMap<Vec<u8>, MultisetDelta>>,
    /// Per call, by group slot: what the last [`Aggregation::apply_multisets`] did to the
    /// group's values, for [`Aggregation::refresh_extremes`].
    moved: Vec<hashbrown::HashMap<usize, multiset::Moved>>,
    /// For an aggregate without GROUP BY: whether its single group has been emitted (or is
    /// another actor's to emit).
    global_loaded: bool,
    /// While some of its vnodes hold their groups: which (see the module docs).
    held: Option<Held>,
    /// Groups as the last flush left them (stored, and emitted unless held), by result key.
    cache: GroupCache,
    /// Stored rows of the groups of the chunk at hand, read at once ([`Self::prefetch`]).
    prefetched: HashMap<Vec<u8>, Option<Vec<u8>>>,
    /// Input rows are partial rows (see [`HashAggExecutor::merging`]).
    merge: bool,
    /// What `groups`, `group_index` and `deltas` take, counted until the flush stages them.
    memory: EpochMemory,
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
        let moved = calls.iter().map(|_| hashbrown::HashMap::new()).collect();
        let memory = EpochMemory::new(store.clone());
        let mut at = group_exprs.len() + 1;
        let layouts = calls
            .iter()
            .map(|call| {
                let layout = matches!(call.kind, AggKind::Sum | AggKind::Avg)
                    .then(|| SumLayout::stored(&result_def, at));
                at += layout.as_ref().map_or(1, SumLayout::width);
                layout
            })
            .collect();
        Self {
            group_exprs,
            calls,
            result_def,
            result,
            layouts,
            multisets,
            output_schema,
            groups: Vec::new(),
            group_index: hashbrown::HashMap::new(),
            keys: Vec::new(),
            deltas,
            moved,
            global_loaded: false,
            held: None,
            cache: GroupCache::new(CACHE_GROUPS, false),
            prefetched: HashMap::new(),
            merge: false,
            memory,
        }
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
        for (call, layout) in self.calls.iter().zip(&self.layouts) {
            states.push(match (call.kind, layout) {
                (AggKind::Sum | AggKind::Avg, Some(layout)) => {
                    let sum = stored[at].cast_to(&layout.sum_type)?;
                    let count = as_i64(&stored[at + 1]);
                    let mut specials = [0; 3];
                    if layout.specials {
                        specials = [2, 3, 4].map(|k| as_i64(&stored[at + k]));
                    }
                    at += layout.width() - 1;
                    AggState::Sum { sum, count, specials }
                }
                (AggKind::Count, _) => AggState::Count(as_i64(&stored[at])),
                _ => AggState::Extreme(stored[at].cast_to(&call.output_type)?),
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
            let mut arg = eval(call.arg.as_ref(), chunk.data())?;
            match &self.layouts[i] {
                // A view created before sums counted their special inputs leaves them out.
                Some(layout) if !layout.specials => {
                    arg = crate::types::numeric::specials_as_null(arg)
                }
                Some(_) if call.multiset.is_none() => {
                    let (finite, specials) = split_specials(arg);
                    arg = finite;
                    for (row, special) in specials.iter().flatten().enumerate() {
                        if let (Some(s), AggState::Sum { specials, .. }) =
                            (special, &mut self.groups[slots[row]].states[i])
                        {
                            specials[special_index(*s)] += signs[row];
                        }
                    }
                }
                _ => {}
            }
            if call.multiset.is_some() {
                self.stage_values(i, &group_columns, (arg, chunk.data()), &slots, &signs)?;
                continue;
            }
            let target = match (call.kind, &self.layouts[i]) {
                (AggKind::Count, _) => call.arg.data_type(chunk.data().schema().as_ref())?,
                (_, Some(layout)) => layout.sum_type.clone(),
                _ => call.output_type.clone(),
            };
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
                            let layout = self.layouts[i].as_ref();
                            add_value(&mut self.groups[slot].states[i], layout, &v, sign)?;
                        }
                    }
                }
                (kind, _) => unreachable!("{kind:?} keeps a multiset"),
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
        self.prefetch(&keys)?;
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

    /// Reads the stored rows of the groups under `keys` that are neither touched this epoch
    /// nor cached nor known new, with one batched read, for [`Self::load`] to take.
    fn prefetch(&mut self, keys: &[Vec<u8>]) -> Result<()> {
        self.prefetched.clear();
        let mut wanted: Vec<Vec<u8>> = keys
            .iter()
            .filter(|k| !self.group_index.contains_key(k.as_slice()))
            .filter(|k| self.cache.locate(k) == Some(Elsewhere::Storage))
            .cloned()
            .collect();
        if wanted.len() < 2 {
            return Ok(());
        }
        wanted.sort_unstable();
        wanted.dedup();
        let rows = self.result.get_many(&wanted)?;
        self.prefetched.extend(wanted.into_iter().zip(rows));
        Ok(())
    }

    /// Whether the result table holds no row at all (no group, no release marker).
    fn stores_nothing(&self) -> Result<bool> {
        let start = crate::storage::keycodec::table_prefix(self.result_def.id);
        Ok(self.result.iter_range(&start, &prefix_end(&start), 1)?.is_empty())
    }

    /// A group not stored: no rows, empty states.
    fn new_group(&self, key: &[u8], values: Vec<ScalarValue>) -> Result<Group> {
        let vnode = vnode_in_key(key);
        let states = self.calls.iter().zip(&self.layouts);
        let states = states.map(|(c, l)| empty_state(c, l.as_ref())).collect::<Result<_>>()?;
        Ok(Group { vnode, values, row_count: 0, states, stored: false, previous: None })
    }

    /// Reads a group's stored state, or starts an empty one.
    fn load(&mut self, key: &[u8], values: Vec<ScalarValue>) -> Result<Group> {
        let vnode = vnode_in_key(key);
        let row = match self.prefetched.remove(key) {
            Some(row) => row,
            None => self.result.get(key)?,
        };
        let Some(row) = row else {
            return self.new_group(key, values);
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

    /// The group under result key `key`: from the cache, else from its stored row, else new
    /// (with the group-by `values` of an input row).
    fn take_group(
        &mut self,
        key: &[u8],
        values: impl FnOnce() -> Result<Vec<ScalarValue>>,
    ) -> Result<Group> {
        let mut group = match self.cache.take(key) {
            Ok(group) => group,
            Err(Elsewhere::Nowhere) => return self.new_group(key, values()?),
            Err(Elsewhere::Storage) => return self.load(key, values()?),
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
        self.cache.make_room(keys.len());
        for (slot, (mut group, key)) in
            std::mem::take(&mut self.groups).into_iter().zip(keys).enumerate()
        {
            self.refresh_extremes(slot, &mut group)?;
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

    /// `group values ++ aggregate outputs`.
    fn output_row(&self, group: &Group) -> Result<Vec<ScalarValue>> {
        let mut row = group.values.clone();
        for (call, state) in self.calls.iter().zip(&group.states) {
            row.push(match state {
                AggState::Count(c) => ScalarValue::Int64(Some(*c)),
                AggState::Sum { specials, .. } if *specials != [0; 3] => {
                    special_output(specials, &call.output_type)?.expect("special inputs")
                }
                AggState::Sum { count: 0, .. } => ScalarValue::try_from(&call.output_type)?,
                AggState::Sum { sum, count, .. } if call.kind == AggKind::Avg => match sum {
                    ScalarValue::Decimal128(..) | ScalarValue::Decimal256(..) => {
                        numeric_avg(sum, *count, &call.output_type)?
                    }
                    _ => ScalarValue::Float64(Some(as_f64(sum)? / *count as f64))
                        .cast_to(&call.output_type)?,
                },
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
        for (state, layout) in group.states.iter().zip(&self.layouts) {
            match state {
                AggState::Count(c) => row.push(ScalarValue::Int64(Some(*c))),
                AggState::Sum { sum, count, specials } => {
                    row.push(sum.clone());
                    row.push(ScalarValue::Int64(Some(*count)));
                    if layout.as_ref().is_some_and(|l| l.specials) {
                        row.extend(specials.map(|n| ScalarValue::Int64(Some(n))));
                    }
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
mod tests;
