//! `HashJoinExecutor`: an inner equi-join of two changing inputs.
//!
//! Each side's rows are kept in a state table keyed by `join key | side's stream key`, with the
//! join key as distribution key, so all rows of one join key are one prefix scan. A change on
//! one side is joined with the other side's current rows and then applied to its own side's
//! state; messages are processed one at a time, which makes the symmetric join exact. Barriers
//! of the two inputs are aligned: a side that delivered its barrier waits for the other.
//!
//! Output rows are `left columns ++ right columns ++ left hidden ++ right hidden`, where hidden
//! columns are the stream-key columns an input carries after its visible ones.

use std::cell::RefCell;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::SchemaRef;
use datafusion::physical_plan::PhysicalExpr;
use futures::StreamExt;

use crate::catalog::{Epoch, TableCatalog};
use crate::error::Result;
use crate::storage::keycodec::{encode_keys, prefix_end};
use crate::storage::row_codec::RowDecoder;
use crate::storage::state_table::StateTable;
use crate::storage::store::Store;
use crate::stream::eval::eval;
use crate::stream::executor::filter::filter_chunk;
use crate::stream::executor::left_join::left_outer_chunk;
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::{Barrier, Message, Op, StreamChunk, unexpected_truncate};

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
}

/// Inner hash join.
pub struct HashJoinExecutor {
    kind: JoinKind,
    left: JoinSide,
    right: JoinSide,
    store: Arc<Store>,
    /// A residual (non-equi) condition over the output row.
    filter: Option<Arc<dyn PhysicalExpr>>,
    output_schema: SchemaRef,
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
        Self { kind, left, right, store, filter, output_schema }
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

/// Stored rows (keys and values) of one join key, shared by the cache and its probes.
pub(crate) type Rows = Arc<[(Vec<u8>, Vec<u8>)]>;

/// One input's join state.
pub(crate) struct Side {
    pub(crate) keys: Vec<Arc<dyn PhysicalExpr>>,
    pub(crate) def: Arc<TableCatalog>,
    pub(crate) table: StateTable,
    pub(crate) visible: usize,
    /// Columns of the input rows (the state table adds key columns, and for the left side of a
    /// left outer join a degree column).
    width: usize,
    /// Stored rows by join-key prefix, for keys looked up recently. This executor is the only
    /// writer of its sides, so it drops a key's entry whenever it writes a row with that key.
    /// Shared with the probes that read it, so a hit copies no row.
    cache: RefCell<hashbrown::HashMap<Vec<u8>, Rows>>,
}

/// Join keys a side caches before it starts over; bounds the cache's memory.
const CACHE_KEYS: usize = 1 << 18;

/// A chunk probing fewer uncached keys than this reads each on its own (see [`Side::preload`]).
const PRELOAD_MIN_KEYS: usize = 16;

impl Side {
    fn new(side: &JoinSide, store: &Arc<Store>) -> Self {
        Self {
            keys: side.keys.clone(),
            def: side.table.clone(),
            table: side.table.state_table(store.clone()),
            visible: side.visible,
            width: side.width,
            cache: RefCell::default(),
        }
    }

    /// Forgets the cached rows of the keys in `key_columns` (the leading stored columns).
    pub(crate) fn invalidate(&self, key_columns: &[ArrayRef], rows: usize) -> Result<()> {
        let mut cache = self.cache.borrow_mut();
        if cache.is_empty() {
            return Ok(());
        }
        for prefix in encode_keys(self.def.id, key_columns, rows, key_columns.len())? {
            cache.remove(&prefix);
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
        let batch = RecordBatch::try_new(self.def.full_schema(), columns)?;
        let rows = StreamChunk::new(chunk.ops().to_vec(), batch);
        self.invalidate(keys, chunk.len())?;
        match crate::stream::executor::filter::mask_chunk(&rows, |i| has_key[i])? {
            Some(rows) => self.table.write_chunk(&rows),
            None => Ok(()),
        }
    }

    /// Reads the stored rows of the join keys `prefixes[i]` with `wanted[i]` that are not
    /// cached into the cache, with one iterator: a chunk's probes then hit the cache. One seek
    /// and iterator per probed key was most of what a join cost when a chunk probed thousands
    /// of keys (an eager aggregation's partial groups, released at once).
    fn preload(&self, prefixes: &[Vec<u8>], wanted: &[bool]) -> Result<()> {
        let mut missing: Vec<&[u8]> = {
            let cache = self.cache.borrow();
            prefixes
                .iter()
                .zip(wanted)
                .filter(|&(p, &w)| w && !cache.contains_key(p.as_slice()))
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
        if cache.len() + missing.len() > CACHE_KEYS {
            cache.clear();
        }
        for (prefix, rows) in missing.into_iter().zip(rows) {
            cache.insert(prefix.to_vec(), rows.into());
        }
        Ok(())
    }

    /// The stored rows (input columns only) whose join key encodes to `prefix`.
    pub(crate) fn matches(&self, prefix: &[u8]) -> Result<Rows> {
        if let Some(rows) = self.cache.borrow().get(prefix) {
            return Ok(rows.clone());
        }
        let end = prefix_end(prefix);
        let rows: Rows = self.table.iter_range(prefix, &end, usize::MAX)?.into();
        let mut cache = self.cache.borrow_mut();
        if cache.len() >= CACHE_KEYS {
            cache.clear();
        }
        cache.insert(prefix.to_vec(), rows.clone());
        Ok(rows)
    }

    /// Decodes the input columns of `rows`: for each `(matches, i)`, row `i` of `matches`.
    fn decode(&self, rows: &[(Rows, usize)]) -> Result<Vec<ArrayRef>> {
        let types = self.def.types();
        let n_keys = self.keys.len();
        let projection: Vec<usize> = (n_keys..n_keys + self.width).collect();
        let mut decoder = RowDecoder::new(&types, &self.def.pk, &projection, rows.len());
        for (matches, i) in rows {
            let (key, value) = &matches[*i];
            decoder.push(key, value)?;
        }
        Ok(decoder.finish())
    }
}

impl Executor for HashJoinExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { kind, left, right, store, filter, output_schema } = *self;
        async_stream::try_stream! {
            let mut sides = [Side::new(&left, &store), Side::new(&right, &store)];
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
                    JoinKind::Inner => join_chunk(&mut sides, &chunk, from_left, &output_schema)?,
                    JoinKind::LeftOuter => {
                        left_outer_chunk(&mut sides, &chunk, from_left, &output_schema)?
                    }
                };
                let joined = match (&filter, joined) {
                    (Some(f), Some(j)) => filter_chunk(&j, f.as_ref())?,
                    (_, j) => j,
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
    let has_key: Vec<bool> = (0..chunk.len()).map(|i| keys.iter().all(|k| k.is_valid(i))).collect();
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
    let (left, right, left_visible, right_visible) = if from_left {
        (this_columns, other_columns, sides[0].visible, sides[1].visible)
    } else {
        (other_columns, this_columns, sides[0].visible, sides[1].visible)
    };
    let mut columns = Vec::with_capacity(left.len() + right.len());
    columns.extend_from_slice(&left[..left_visible]);
    columns.extend_from_slice(&right[..right_visible]);
    columns.extend_from_slice(&left[left_visible..]);
    columns.extend_from_slice(&right[right_visible..]);
    for key in &keys {
        columns.push(take(key, &indices, None)?);
    }
    let columns = crate::stream::cast_columns(columns, schema)?;
    Ok(Some(StreamChunk::new(ops, RecordBatch::try_new(schema.clone(), columns)?)))
}

#[cfg(test)]
pub(crate) mod tests {
    use datafusion::physical_expr::expressions::Column;
    use futures::FutureExt;
    use tokio::sync::mpsc;

    use super::*;
    use crate::catalog::{ColumnCatalog, RelationKind, TableId};
    use crate::stream::executor::receiver::ReceiverExecutor;
    use crate::stream::test_utils::{
        MockSource, Pretty, barrier, chunk, dedent, initial, run, schema,
    };
    use crate::types::DataType;

    /// The rows of both inputs in most tests: `i T`, joined on `c0`.
    pub(crate) const ROWS: Shape = Shape { header: "i T", visible: 2 };

    /// The columns of a join input and how many of them are visible.
    #[derive(Clone, Copy)]
    pub(crate) struct Shape {
        pub(crate) header: &'static str,
        pub(crate) visible: usize,
    }

    /// The state table of one side: `join key (c0) ++ input columns`, keyed by all of them, with
    /// a trailing `_degree` for the left side of a left outer join.
    fn side_table(id: u32, shape: Shape, degree: bool) -> Arc<TableCatalog> {
        let types = schema(shape.header);
        let mut columns = vec![ColumnCatalog::new(
            "join_key_0",
            DataType::from_arrow(types.field(0).data_type()).unwrap(),
        )];
        for field in types.fields() {
            let data_type = DataType::from_arrow(field.data_type()).unwrap();
            columns.push(ColumnCatalog::new(field.name().clone(), data_type));
        }
        if degree {
            columns.push(ColumnCatalog::new("_degree", DataType::Int64));
        }
        let pk = (0..=types.fields().len()).collect();
        let mut table =
            TableCatalog::new_table(TableId(id), format!("t{id}"), columns, pk, "".into());
        table.kind = RelationKind::Internal;
        table.dist_key_len = 1;
        Arc::new(table)
    }

    /// A join of `left` and `right` (both of `shape`) on `c0`, as the planner builds it: output
    /// `left visible ++ right visible ++ left hidden ++ right hidden ++ join key`.
    pub(crate) fn join(
        kind: JoinKind,
        store: &Arc<Store>,
        shape: Shape,
        left: BoxedExecutor,
        right: BoxedExecutor,
    ) -> BoxedExecutor {
        let side = |input, id, degree| JoinSide {
            input,
            keys: vec![Arc::new(Column::new("c0", 0)) as Arc<dyn PhysicalExpr>],
            table: side_table(id, shape, degree),
            visible: shape.visible,
            width: schema(shape.header).fields().len(),
        };
        let letters: Vec<&str> = shape.header.split_whitespace().collect();
        let (visible, hidden) = letters.split_at(shape.visible);
        let header = [visible, visible, hidden, hidden, &letters[..1]].concat().join(" ");
        let left = side(left, 1001, kind == JoinKind::LeftOuter);
        let right = side(right, 1002, false);
        Box::new(HashJoinExecutor::new(kind, left, right, store.clone(), None, schema(&header)))
    }

    /// A running join fed message by message, printing what each message makes it emit.
    pub(crate) struct Join {
        store: Arc<Store>,
        left: mpsc::Sender<Message>,
        right: mpsc::Sender<Message>,
        out: BoxedMessageStream,
    }

    impl Join {
        /// A join of [`ROWS`] started, like an actor, with an initial barrier on both inputs
        /// from the state committed in `store`.
        pub(crate) async fn start(kind: JoinKind, store: &Arc<Store>) -> Join {
            let (left, left_rx) = mpsc::channel(16);
            let (right, right_rx) = mpsc::channel(16);
            let receiver = |rx| Box::new(ReceiverExecutor::new(rx)) as BoxedExecutor;
            let out = join(kind, store, ROWS, receiver(left_rx), receiver(right_rx)).execute();
            let mut join = Join { store: store.clone(), left, right, out };
            let committed = store.committed_epoch();
            let initial = Barrier::initial(committed, committed.next());
            assert_eq!(join.send(true, Message::Barrier(initial.clone())).await, "");
            let out = join.send(false, Message::Barrier(initial)).await;
            assert_eq!(out, format!("barrier {}", committed.0));
            join
        }

        /// Sends `msg` to one input and prints everything the join emits before it waits for
        /// more input.
        pub(crate) async fn send(&mut self, to_left: bool, msg: Message) -> String {
            let input = if to_left { &self.left } else { &self.right };
            input.send(msg).await.expect("the join is running");
            // A fresh task budget, so the channel never pretends to be empty.
            tokio::task::yield_now().await;
            let mut out = Vec::new();
            // Pending: the join processed everything it was sent and waits for more.
            while let Some(next) = self.out.next().now_or_never() {
                match next {
                    Some(Ok(msg)) => out.push(msg.pretty()),
                    Some(Err(e)) => {
                        out.push(format!("error: {e}"));
                        break;
                    }
                    None => {
                        out.push("end".to_owned());
                        break;
                    }
                }
            }
            out.join("\n\n")
        }

        /// Sends a chunk to the left input.
        pub(crate) async fn left(&mut self, text: &str) -> String {
            self.send(true, chunk(text)).await
        }

        /// Sends a chunk to the right input.
        pub(crate) async fn right(&mut self, text: &str) -> String {
            self.send(false, chunk(text)).await
        }

        /// Ends epoch `epoch` on both inputs and commits it, as the barrier manager does once
        /// every actor passed the barrier; returns what the join emitted.
        pub(crate) async fn checkpoint(&mut self, epoch: u64) -> String {
            let mut out = self.send(true, barrier(epoch)).await;
            out.push_str(&self.send(false, barrier(epoch)).await);
            self.store.commit(Epoch(epoch)).unwrap();
            out
        }
    }

    #[tokio::test]
    async fn a_left_row_then_a_matching_right_row_emit_one_joined_row() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // The right row comes an epoch after the left one, so the order of the two is fixed.
        let left =
            MockSource::boxed([initial(0), chunk("i T\n+ 1 a\n+ 2 b"), barrier(1), barrier(2)]);
        let right = MockSource::boxed([initial(0), barrier(1), chunk("i T\n+ 1 x"), barrier(2)]);
        let out = run(join(JoinKind::Inner, &store, ROWS, left, right)).await;
        let expected = "
            barrier 0

            barrier 1

            i T i T i
            + 1 a 1 x 1

            barrier 2";
        assert_eq!(out, dedent(expected));
    }

    #[tokio::test]
    async fn a_row_joins_every_match_on_the_other_side() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut j = Join::start(JoinKind::Inner, &store).await;
        assert_eq!(j.left("i T\n+ 1 a\n+ 1 b\n+ 2 c").await, "");
        assert_eq!(j.right("i T\n+ 1 x").await, "i T i T i\n+ 1 a 1 x 1\n+ 1 b 1 x 1");
        let expected = "
            i T i T i
            + 1 a 1 y 1
            + 1 b 1 y 1
            + 2 c 2 z 2";
        assert_eq!(j.right("i T\n+ 1 y\n+ 2 z").await, dedent(expected));
        assert_eq!(j.left("i T\n+ 1 d").await, "i T i T i\n+ 1 d 1 x 1\n+ 1 d 1 y 1");
    }

    #[tokio::test]
    async fn deleting_a_left_row_retracts_its_joined_rows() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut j = Join::start(JoinKind::Inner, &store).await;
        assert_eq!(j.left("i T\n+ 1 a\n+ 1 b").await, "");
        assert_eq!(j.right("i T\n+ 1 x").await, "i T i T i\n+ 1 a 1 x 1\n+ 1 b 1 x 1");
        assert_eq!(j.right("i T\n+ 1 y").await, "i T i T i\n+ 1 a 1 y 1\n+ 1 b 1 y 1");
        assert_eq!(j.left("i T\n- 1 a").await, "i T i T i\n- 1 a 1 x 1\n- 1 a 1 y 1");
        // The deleted row no longer joins.
        assert_eq!(j.right("i T\n+ 1 z").await, "i T i T i\n+ 1 b 1 z 1");
    }

    #[tokio::test]
    async fn deleting_a_right_row_retracts_its_joined_rows() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut j = Join::start(JoinKind::Inner, &store).await;
        assert_eq!(j.right("i T\n+ 1 x\n+ 1 y").await, "");
        let expected = "
            i T i T i
            + 1 a 1 x 1
            + 1 a 1 y 1
            + 1 b 1 x 1
            + 1 b 1 y 1";
        assert_eq!(j.left("i T\n+ 1 a\n+ 1 b").await, dedent(expected));
        assert_eq!(j.right("i T\n- 1 x").await, "i T i T i\n- 1 a 1 x 1\n- 1 b 1 x 1");
        assert_eq!(j.left("i T\n+ 1 c").await, "i T i T i\n+ 1 c 1 y 1");
    }

    #[tokio::test]
    async fn an_update_pair_becomes_a_delete_and_an_insert() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut j = Join::start(JoinKind::Inner, &store).await;
        assert_eq!(j.left("i T\n+ 1 a").await, "");
        assert_eq!(j.right("i T\n+ 1 x\n+ 2 y").await, "i T i T i\n+ 1 a 1 x 1");
        // The same key: the pair's halves match the same right row.
        assert_eq!(j.left("i T\nU- 1 a\nU+ 1 b").await, "i T i T i\n- 1 a 1 x 1\n+ 1 b 1 x 1");
        // Another key: each half matches its own rows.
        assert_eq!(j.left("i T\nU- 1 b\nU+ 2 b").await, "i T i T i\n- 1 b 1 x 1\n+ 2 b 2 y 2");
        assert_eq!(j.right("i T\nU- 2 y\nU+ 2 z").await, "i T i T i\n- 2 b 2 y 2\n+ 2 b 2 z 2");
    }

    #[tokio::test]
    async fn a_chunk_probing_many_keys_sees_committed_sealed_and_current_rows() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut j = Join::start(JoinKind::Inner, &store).await;
        // Committed: keys 1..=400, one right row each, and key 2 twice.
        let rows: String = (1..=400).map(|k| format!("\n+ {k} r{k}")).collect();
        assert_eq!(j.right(&format!("i T{rows}\n+ 2 s2")).await, "");
        assert_eq!(j.checkpoint(1).await, "barrier 1");
        // Epoch 2, sealed but not committed: key 3 changes its row, key 5 loses it.
        assert_eq!(j.right("i T\n- 3 r3\n+ 3 x3\n- 5 r5").await, "");
        assert_eq!(j.send(true, barrier(2)).await, "");
        assert_eq!(j.send(false, barrier(2)).await, "barrier 2");
        // Epoch 3, not sealed: key 7 gains a row, key 401 its first.
        assert_eq!(j.right("i T\n+ 7 y7\n+ 401 r401").await, "");
        // One left chunk probing 30 keys, most far apart among the stored ones.
        let probes: Vec<u32> = (1..=10).chain((0..20).map(|i| 20 * i + 13)).chain([401]).collect();
        let left: String = probes.iter().map(|k| format!("\n+ {k} l{k}")).collect();
        let out = j.left(&format!("i T{left}")).await;
        let mut expected = vec!["i T i T i".to_owned()];
        for &k in &probes {
            let mut matches = match k {
                2 => vec!["r2".to_owned(), "s2".to_owned()],
                3 => vec!["x3".to_owned()],
                5 => vec![],
                7 => vec!["r7".to_owned(), "y7".to_owned()],
                k => vec![format!("r{k}")],
            };
            matches.sort();
            expected.extend(matches.iter().map(|m| format!("+ {k} l{k} {k} {m} {k}")));
        }
        assert_eq!(out, expected.join("\n"));
    }

    #[tokio::test]
    async fn null_join_keys_never_match() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut j = Join::start(JoinKind::Inner, &store).await;
        assert_eq!(j.left("i T\n+ . a\n+ 1 b").await, "");
        assert_eq!(j.right("i T\n+ . x\n+ 1 y").await, "i T i T i\n+ 1 b 1 y 1");
        assert_eq!(j.left("i T\n+ . c").await, "");
        assert_eq!(j.right("i T\n- . x").await, "");
        assert_eq!(j.left("i T\n- . a\n- 1 b").await, "i T i T i\n- 1 b 1 y 1");
    }

    #[tokio::test]
    async fn the_barrier_passes_once_both_sides_sent_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut j = Join::start(JoinKind::Inner, &store).await;
        assert_eq!(j.send(true, barrier(1)).await, "");
        // Held behind the left barrier until the right one comes.
        assert_eq!(j.left("i T\n+ 1 a").await, "");
        // The right input is still in epoch 1: its rows pass, and meet no left row yet.
        assert_eq!(j.right("i T\n+ 1 x").await, "");
        assert_eq!(j.send(false, barrier(1)).await, "barrier 1\n\ni T i T i\n+ 1 a 1 x 1");
        assert_eq!(j.checkpoint(2).await, "barrier 2");
    }

    #[tokio::test]
    async fn hidden_columns_follow_the_visible_columns_of_both_sides() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let shape = Shape { header: "i T I", visible: 2 };
        let left =
            MockSource::boxed([initial(0), chunk("i T I\n+ 1 a 10"), barrier(1), barrier(2)]);
        let right =
            MockSource::boxed([initial(0), barrier(1), chunk("i T I\n+ 1 x 20"), barrier(2)]);
        let out = run(join(JoinKind::Inner, &store, shape, left, right)).await;
        let expected = "
            barrier 0

            barrier 1

            i T i T I I i
            + 1 a 1 x 10 20 1

            barrier 2";
        assert_eq!(out, dedent(expected));
    }
}
