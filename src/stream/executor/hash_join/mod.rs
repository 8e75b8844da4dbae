//! `HashJoinExecutor`: an equi-join of two changing inputs: inner here; outer (left, right,
//! full), semi and anti in [`degree`](crate::stream::executor::hash_join::degree).
//!
//! Each side's rows are kept in a state table keyed by `join key | side's stream key`, with the
//! join key as distribution key, so all rows of one join key are one prefix scan. A change on
//! one side is joined with the other side's current rows and then applied to its own side's
//! state; messages are processed one at a time, which makes the symmetric join exact. Barriers
//! of the two inputs are aligned: a side that delivered its barrier waits for the other.
//!
//! Output rows are `left columns ++ right columns ++ left hidden ++ right hidden`, where hidden
//! columns are the stream-key columns an input carries after its visible ones.

/// The sides' caches of stored rows.
pub mod cache;
/// Outer, semi and anti joins: match counts (degrees) per row.
pub mod degree;

use std::cell::RefCell;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::SchemaRef;
use datafusion::physical_plan::PhysicalExpr;
use futures::StreamExt;

use crate::catalog::{Epoch, TableCatalog};
use crate::error::Result;
use crate::storage::keycodec::{encode_keys, prefix_end, table_prefix};
use crate::storage::row_codec::RowDecoder;
use crate::storage::state_table::StateTable;
use crate::storage::store::Store;
use crate::stream::eval::eval;
use crate::stream::executor::filter::filter_chunk;
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::{Barrier, Message, Op, StreamChunk, unexpected_truncate};
use cache::{JoinCache, Rows};
use degree::degree_chunk;

/// One input of the join.
pub struct JoinSide {
    /// The input.
    pub input: BoxedExecutor,
    /// Join key expressions over the input's rows.
    pub keys: Vec<Arc<dyn PhysicalExpr>>,
    /// The side's state table: `join key columns ++ input columns`.
    pub table: Arc<TableCatalog>,
    /// How many of the input's columns are visible (the rest are hidden stream-key columns).
    pub visible: usize,
    /// How many columns the input's rows have.
    pub width: usize,
}

/// Which rows a join outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    /// Matching pairs only.
    Inner,
    /// Matching pairs, and every left row without a match padded with NULLs.
    LeftOuter,
    /// Matching pairs, and every right row without a match padded with NULLs.
    RightOuter,
    /// Matching pairs, and every row of either side without a match padded with NULLs.
    FullOuter,
    /// The left rows that have a match (`EXISTS`, `IN (subquery)`).
    LeftSemi,
    /// The right rows that have a match.
    RightSemi,
    /// The left rows that have no match (`NOT EXISTS`).
    LeftAnti,
    /// The right rows that have no match.
    RightAnti,
}

impl JoinKind {
    /// Whether side `side` (0 left, 1 right) stores each row's degree, its number of matches:
    /// the sides whose rows show without a match (outer), and the kept side of a semi or anti
    /// join.
    pub fn counts(self, side: usize) -> bool {
        use JoinKind::*;
        match self {
            Inner => false,
            LeftOuter | LeftSemi | LeftAnti => side == 0,
            RightOuter | RightSemi | RightAnti => side == 1,
            FullOuter => true,
        }
    }

    /// The side whose rows a semi or anti join outputs; `None` for joins that output pairs.
    pub fn kept(self) -> Option<usize> {
        use JoinKind::*;
        match self {
            LeftSemi | LeftAnti => Some(0),
            RightSemi | RightAnti => Some(1),
            Inner | LeftOuter | RightOuter | FullOuter => None,
        }
    }
}

/// Hash join of any [`JoinKind`].
pub struct HashJoinExecutor {
    kind: JoinKind,
    left: JoinSide,
    right: JoinSide,
    store: Arc<Store>,
    /// A residual (non-equi) condition: over the output row of an inner join, over `left
    /// visible ++ right visible` of a pair for the other kinds, where it decides what matches.
    filter: Option<Arc<dyn PhysicalExpr>>,
    output_schema: SchemaRef,
    /// NULL join keys match each other (`IS NOT DISTINCT FROM`: INTERSECT, EXCEPT).
    nulls_equal: bool,
}

impl HashJoinExecutor {
    /// Joins `left` and `right` on their keys.
    pub fn new(
        kind: JoinKind,
        left: JoinSide,
        right: JoinSide,
        store: Arc<Store>,
        filter: Option<Arc<dyn PhysicalExpr>>,
        output_schema: SchemaRef,
    ) -> Self {
        Self { kind, left, right, store, filter, output_schema, nulls_equal: false }
    }

    /// Lets NULL join keys match each other, as `IS NOT DISTINCT FROM` does.
    pub fn with_nulls_equal(mut self, nulls_equal: bool) -> Self {
        self.nulls_equal = nulls_equal;
        self
    }
}

/// A message from one side of a two-input executor, after barrier alignment.
pub enum Aligned {
    /// A chunk from the left input.
    Left(StreamChunk),
    /// A chunk from the right input.
    Right(StreamChunk),
    /// A barrier both inputs have delivered.
    Barrier(Barrier),
}

/// Merges two inputs, aligning their barriers.
pub fn align(
    mut left: BoxedMessageStream,
    mut right: BoxedMessageStream,
) -> futures::stream::BoxStream<'static, Result<Aligned>> {
    async_stream::try_stream! {
        let (mut left_barrier, mut right_barrier): (Option<Barrier>, Option<Barrier>) = (None, None);
        loop {
            let (msg, from_left) = tokio::select! {
                msg = left.next(), if left_barrier.is_none() => (msg, true),
                msg = right.next(), if right_barrier.is_none() => (msg, false),
            };
            let Some(msg) = msg else { break };
            match (msg?, from_left) {
                (Message::Chunk(c), true) => yield Aligned::Left(c),
                (Message::Chunk(c), false) => yield Aligned::Right(c),
                (Message::Barrier(b), true) => left_barrier = Some(b),
                (Message::Barrier(b), false) => right_barrier = Some(b),
                (Message::Watermark(_), _) => {}
                (Message::Truncate, _) => Err(unexpected_truncate("a join"))?,
            }
            if left_barrier.is_some() && right_barrier.is_some() {
                right_barrier = None;
                yield Aligned::Barrier(left_barrier.take().expect("checked"));
            }
        }
    }
    .boxed()
}

/// One input's join state.
pub(crate) struct Side {
    pub(crate) keys: Vec<Arc<dyn PhysicalExpr>>,
    pub(crate) def: Arc<TableCatalog>,
    pub(crate) table: StateTable,
    pub(crate) visible: usize,
    /// Columns of the input rows (the state table adds key columns, and for the left side of a
    /// left outer join a degree column).
    width: usize,
    /// NULL join keys match each other.
    pub(crate) nulls_equal: bool,
    /// Stored rows by join-key prefix: this executor is the only writer of its sides, so it
    /// writes its writes through (see [`cache`]).
    cache: RefCell<JoinCache>,
}

/// A chunk probing fewer uncached keys than this reads each on its own (see [`Side::preload`]).
const PRELOAD_MIN_KEYS: usize = 16;

impl Side {
    fn new(side: &JoinSide, store: &Arc<Store>, nulls_equal: bool) -> Result<Self> {
        let table = side.table.state_table(store.clone());
        // A side that stores nothing yet (a new view's) is cached whole from the start.
        let start = table_prefix(side.table.id);
        let empty = table.iter_range(&start, &prefix_end(&start), 1)?.is_empty();
        Ok(Self {
            nulls_equal,
            keys: side.keys.clone(),
            def: side.table.clone(),
            table,
            visible: side.visible,
            width: side.width,
            cache: RefCell::new(JoinCache::new(empty)),
        })
    }

    /// Writes `rows` (stored rows: join key columns first) to the state table, and through
    /// to the cache.
    pub(crate) fn write(&mut self, rows: &StreamChunk) -> Result<()> {
        let n_keys = self.keys.len();
        let prefixes = encode_keys(self.def.id, &rows.columns()[..n_keys], rows.len(), n_keys)?;
        self.table.write_chunk(rows)?;
        let mut cache = self.cache.borrow_mut();
        for ((prefix, op), (key, value)) in
            prefixes.iter().zip(rows.ops()).zip(self.table.last_written())
        {
            cache.write(prefix, key, op.is_insert().then_some(value));
        }
        Ok(())
    }

    /// Columns of the input rows.
    pub(crate) fn input_width(&self) -> usize {
        self.width
    }

    pub(crate) fn key_columns(&self, chunk: &StreamChunk) -> Result<Vec<ArrayRef>> {
        let schema = self.def.full_schema();
        self.keys
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let a = eval(e.as_ref(), chunk.data())?;
                Ok(arrow::compute::cast(&a, schema.field(i).data_type())?)
            })
            .collect()
    }

    /// Stores (or removes) the chunk's rows with a non-NULL join key.
    fn apply(&mut self, chunk: &StreamChunk, keys: &[ArrayRef], has_key: &[bool]) -> Result<()> {
        let mut columns = keys.to_vec();
        columns.extend(chunk.columns().iter().cloned());
        // Typed as stored: an unsigned count (a window's `row_number()`) is a numeric.
        let schema = self.def.full_schema();
        let batch =
            RecordBatch::try_new(schema.clone(), crate::stream::cast_columns(columns, &schema)?)?;
        let rows = StreamChunk::new(chunk.ops().to_vec(), batch);
        match crate::stream::executor::filter::mask_chunk(&rows, |i| has_key[i])? {
            Some(rows) => self.write(&rows),
            None => Ok(()),
        }
    }

    /// Reads the stored rows of the join keys `prefixes[i]` with `wanted[i]` that are not
    /// cached into the cache, with one iterator: a chunk's probes then hit the cache. One seek
    /// and iterator per probed key was most of what a join cost when a chunk probed thousands
    /// of keys (an eager aggregation's partial groups, released at once).
    pub(crate) fn preload(&self, prefixes: &[Vec<u8>], wanted: &[bool]) -> Result<()> {
        let mut missing: Vec<&[u8]> = {
            let cache = self.cache.borrow();
            prefixes
                .iter()
                .zip(wanted)
                .filter(|&(p, &w)| w && !cache.knows(p.as_slice()))
                .map(|(p, _)| p.as_slice())
                .collect()
        };
        if missing.len() < PRELOAD_MIN_KEYS {
            return Ok(());
        }
        missing.sort_unstable();
        missing.dedup();
        let rows = self.table.rows_by_prefix(&missing)?;
        let mut cache = self.cache.borrow_mut();
        for (prefix, rows) in missing.into_iter().zip(rows) {
            cache.fill(prefix, Arc::new(rows.into()));
        }
        Ok(())
    }

    /// The stored rows (input columns only) whose join key encodes to `prefix`.
    pub(crate) fn matches(&self, prefix: &[u8]) -> Result<Rows> {
        if let Some(rows) = self.cache.borrow().get(prefix) {
            return Ok(rows);
        }
        let end = prefix_end(prefix);
        let rows: Rows = Arc::new(self.table.iter_range(prefix, &end, usize::MAX)?.into());
        self.cache.borrow_mut().fill(prefix, rows.clone());
        Ok(rows)
    }

    /// Decodes the input columns of `rows`: for each `(matches, i)`, row `i` of `matches`.
    fn decode(&self, rows: &[(Rows, usize)]) -> Result<Vec<ArrayRef>> {
        let n_keys = self.keys.len();
        self.decode_columns(rows, n_keys..n_keys + self.width)
    }

    /// Decodes the stored columns `columns` of `rows` (as [`Side::decode`]).
    pub(crate) fn decode_columns(
        &self,
        rows: &[(Rows, usize)],
        columns: std::ops::Range<usize>,
    ) -> Result<Vec<ArrayRef>> {
        let types = self.def.types();
        let projection: Vec<usize> = columns.collect();
        let mut decoder = RowDecoder::new(&types, &self.def.pk, &projection, rows.len());
        for (matches, i) in rows {
            let (key, value) = matches.row(*i);
            decoder.push(key, value)?;
        }
        Ok(decoder.finish())
    }
}

impl Executor for HashJoinExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { kind, left, right, store, filter, output_schema, nulls_equal } = *self;
        async_stream::try_stream! {
            let mut sides =
                [Side::new(&left, &store, nulls_equal)?, Side::new(&right, &store, nulls_equal)?];
            let mut input = align(left.input.execute(), right.input.execute());
            while let Some(msg) = input.next().await {
                let (chunk, from_left) = match msg? {
                    Aligned::Left(c) => (c, true),
                    Aligned::Right(c) => (c, false),
                    Aligned::Barrier(barrier) => {
                        if barrier.is_checkpoint() {
                            commit(&mut sides, barrier.epoch.prev);
                        }
                        yield Message::Barrier(barrier);
                        continue;
                    }
                };
                let joined = match kind {
                    JoinKind::Inner => {
                        match join_chunk(&mut sides, &chunk, from_left, &output_schema)? {
                            Some(j) if filter.is_some() => filter_chunk(&j, filter.as_deref().expect("checked"))?,
                            j => j,
                        }
                    }
                    // The condition decides which pairs match, so it counts in the degrees.
                    kind => degree_chunk(kind, &mut sides, &chunk, from_left, &output_schema, filter.as_deref())?,
                };
                if let Some(joined) = joined {
                    yield Message::Chunk(joined);
                }
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "HashJoinExecutor"
    }
}

fn commit(sides: &mut [Side; 2], epoch: Epoch) {
    for side in sides {
        side.table.commit(epoch);
    }
}

/// Joins one side's chunk with the other side's stored rows, then stores the chunk.
fn join_chunk(
    sides: &mut [Side; 2],
    chunk: &StreamChunk,
    from_left: bool,
    schema: &SchemaRef,
) -> Result<Option<StreamChunk>> {
    let (this, other) = if from_left { (0, 1) } else { (1, 0) };
    let keys = sides[this].key_columns(chunk)?;
    let nulls_equal = sides[this].nulls_equal;
    let has_key: Vec<bool> =
        (0..chunk.len()).map(|i| nulls_equal || keys.iter().all(|k| k.is_valid(i))).collect();
    let other_def = sides[other].def.clone();
    let prefixes = encode_keys(other_def.id, &keys, chunk.len(), keys.len())?;
    sides[other].preload(&prefixes, &has_key)?;
    let mut ops = Vec::new();
    let mut this_rows = Vec::new();
    let mut other_rows = Vec::new();
    for row in 0..chunk.len() {
        if !has_key[row] {
            continue;
        }
        let matches = sides[other].matches(&prefixes[row])?;
        for i in 0..matches.len() {
            // Pairs of an update may match different rows, so changes are plain inserts and deletes.
            ops.push(if chunk.ops()[row].is_insert() { Op::Insert } else { Op::Delete });
            this_rows.push(row as u32);
            other_rows.push((matches.clone(), i));
        }
    }
    sides[this].apply(chunk, &keys, &has_key)?;
    if ops.is_empty() {
        return Ok(None);
    }
    let indices = UInt32Array::from(this_rows);
    let this_columns = chunk
        .columns()
        .iter()
        .map(|c| take(c, &indices, None))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let other_columns = sides[other].decode(&other_rows)?;
    let (left, right) =
        if from_left { (this_columns, other_columns) } else { (other_columns, this_columns) };
    let mut columns = pair_columns(sides, &left, &right);
    for key in &keys {
        columns.push(take(key, &indices, None)?);
    }
    let columns = crate::stream::cast_columns(columns, schema)?;
    Ok(Some(StreamChunk::new(ops, RecordBatch::try_new(schema.clone(), columns)?)))
}

/// The columns of output pairs whose sides' input columns are `left` and `right`: `left
/// visible ++ right visible ++ left hidden ++ right hidden` (the join key columns follow).
pub(crate) fn pair_columns(
    sides: &[Side; 2],
    left: &[ArrayRef],
    right: &[ArrayRef],
) -> Vec<ArrayRef> {
    let (lv, rv) = (sides[0].visible, sides[1].visible);
    let mut columns = Vec::with_capacity(left.len() + right.len());
    columns.extend_from_slice(&left[..lv]);
    columns.extend_from_slice(&right[..rv]);
    columns.extend_from_slice(&left[lv..]);
    columns.extend_from_slice(&right[rv..]);
    columns
}

#[cfg(test)]
pub(crate) mod tests;
