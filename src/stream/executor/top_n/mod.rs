//! `TopNExecutor`: the first rows of an order, per group or overall: `ORDER BY .. LIMIT n
//! [OFFSET m]` at the top of a view, and `row_number() OVER (PARTITION BY .. ORDER BY ..) <= n`.
//!
//! Every input row is stored in a state table keyed by `group | order | stream key`, where
//! `order` is the row's sort key encoded so that its bytes order as the `ORDER BY` does
//! ([`order_keys`]: direction and NULL placement included); the group columns are the
//! distribution key, so a group is one prefix scan on one actor, and top-N without groups runs
//! on one actor. A chunk's changes are stored, and for each group they touched the first `m + n`
//! rows are read before and after: the rows that left positions `m .. m + n` are deleted from
//! the output, those that entered are inserted. With a rank column (the `row_number` form) a
//! row whose position moved is deleted and inserted again with its new rank.
//!
//! Output rows are the input's visible columns, the rank (with one), the input's hidden
//! columns, then the group values, which join the stream key.
//!
//! Each touched group's first `m + n` stored rows are cached ([`Window`]), so a change that
//! lands past them (most rows of a large group) is only stored: no read. A group's window is
//! read from the state table when first touched, and again only when one of its rows leaves
//! and more rows may follow. The cache holds at most [`MAX_CACHED_ROWS`] rows (it is emptied
//! when it grows past them); the rows themselves stay in the state table. Ties at the boundary
//! are broken by the stream key, so the output is deterministic (Postgres leaves that choice
//! open).

#[cfg(test)]
mod tests;

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BinaryArray, Int64Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::physical_plan::PhysicalExpr;
use futures::StreamExt;

use crate::catalog::TableCatalog;
use crate::error::Result;
use crate::storage::keycodec::{encode_column, encode_keys, prefix_end};
use crate::storage::row_codec::RowDecoder;
use crate::storage::state_table::StateTable;
use crate::storage::store::Store;
use crate::stream::eval::eval;
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::{Message, Op, StreamChunk, unexpected_truncate};

/// One `ORDER BY` item.
#[derive(Debug, Clone)]
pub struct SortKey {
    /// The value sorted by, over the input rows.
    pub expr: Arc<dyn PhysicalExpr>,
    /// `DESC`.
    pub descending: bool,
    /// `NULLS FIRST` (Postgres's default for `DESC`), else `NULLS LAST`.
    pub nulls_first: bool,
}

/// What a top-N keeps and outputs.
#[derive(Debug, Clone)]
pub struct TopNSpec {
    /// Group (partition) expressions; none for one top-N over all rows.
    pub group: Vec<Arc<dyn PhysicalExpr>>,
    /// The order.
    pub order: Vec<SortKey>,
    /// Rows skipped at the start of each group (`OFFSET`).
    pub offset: usize,
    /// Rows output per group after those (`LIMIT`).
    pub limit: usize,
    /// Whether the output carries each row's position in its group (1-based, `row_number`)
    /// after the input's visible columns.
    pub rank: bool,
}

/// The top-N operator (see the module docs).
pub struct TopNExecutor {
    input: BoxedExecutor,
    spec: TopNSpec,
    /// `group columns ++ _order ++ input columns`, keyed by `group ++ _order ++ stream key`.
    table: Arc<TableCatalog>,
    store: Arc<Store>,
    /// How many of the input's columns are visible.
    visible: usize,
    output_schema: SchemaRef,
}

impl TopNExecutor {
    /// A top-N of `input` (rows of `visible` visible columns) storing its rows in `table`.
    pub fn new(
        input: BoxedExecutor,
        spec: TopNSpec,
        table: Arc<TableCatalog>,
        store: Arc<Store>,
        visible: usize,
        output_schema: SchemaRef,
    ) -> Self {
        Self { input, spec, table, store, visible, output_schema }
    }
}

impl Executor for TopNExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { input, spec, table, store, visible, output_schema } = *self;
        async_stream::try_stream! {
            let mut state = TopN {
                table: table.state_table(store),
                def: table,
                spec,
                visible,
                output_schema,
                windows: hashbrown::HashMap::new(),
                cached_rows: 0,
            };
            let mut input = input.execute();
            while let Some(msg) = input.next().await {
                match msg? {
                    Message::Chunk(chunk) => {
                        if let Some(out) = state.apply(&chunk)? {
                            yield Message::Chunk(out);
                        }
                    }
                    Message::Barrier(barrier) => {
                        if barrier.is_checkpoint() {
                            state.table.commit(barrier.epoch.prev);
                        }
                        yield Message::Barrier(barrier);
                    }
                    Message::Watermark(w) => yield Message::Watermark(w),
                    Message::Truncate => Err(unexpected_truncate("a top-N"))?,
                }
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "TopNExecutor"
    }
}

/// A stored row: its key and value.
type Stored = (Vec<u8>, Vec<u8>);

/// Cached rows past which the window cache is emptied (few in tests, so they empty it often).
const MAX_CACHED_ROWS: usize = if cfg!(test) { 8 } else { 200_000 };

/// The first `m + n` stored rows of one group, in key order.
#[derive(Debug, Clone, Default)]
struct Window {
    rows: Vec<Stored>,
    /// The group has no rows past `rows` (then it holds fewer than `m + n`, or exactly that
    /// many after deletes).
    complete: bool,
}

impl Window {
    /// Whether storing (`insert`) or removing the row `key` changes the window, `wanted` rows
    /// long.
    fn touched_by(&self, insert: bool, key: &[u8], wanted: usize) -> bool {
        match insert {
            true => {
                let at = self.rows.partition_point(|(k, _)| k.as_slice() < key);
                at < self.rows.len() || self.rows.len() < wanted
            }
            false => self.rows.binary_search_by(|(k, _)| k.as_slice().cmp(key)).is_ok(),
        }
    }

    /// Stores the row `key` (`value`) in the window, `wanted` rows long.
    fn insert(&mut self, key: &[u8], value: &[u8], wanted: usize) {
        let at = self.rows.partition_point(|(k, _)| k.as_slice() < key);
        if self.rows.get(at).is_some_and(|(k, _)| k == key) {
            self.rows[at].1 = value.to_vec();
            return;
        }
        if at == self.rows.len() && self.rows.len() >= wanted {
            self.complete = false;
            return;
        }
        self.rows.insert(at, (key.to_vec(), value.to_vec()));
        if self.rows.len() > wanted {
            self.rows.pop();
            self.complete = false;
        }
    }

    /// Removes the row `key` from the window; whether it must be read again (a row left it and
    /// more may follow).
    fn delete(&mut self, key: &[u8]) -> bool {
        match self.rows.binary_search_by(|(k, _)| k.as_slice().cmp(key)) {
            Ok(at) => {
                self.rows.remove(at);
                !self.complete
            }
            Err(_) => false,
        }
    }
}

struct TopN {
    def: Arc<TableCatalog>,
    table: StateTable,
    spec: TopNSpec,
    visible: usize,
    output_schema: SchemaRef,
    /// Group key prefix -> its window.
    windows: hashbrown::HashMap<Vec<u8>, Window>,
    /// Rows in `windows`.
    cached_rows: usize,
}

impl TopN {
    /// Stores a chunk's changes and returns how the output changes.
    fn apply(&mut self, chunk: &StreamChunk) -> Result<Option<StreamChunk>> {
        let types = self.def.full_schema();
        let n_group = self.spec.group.len();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(types.fields().len());
        for (i, expr) in self.spec.group.iter().enumerate() {
            let values = eval(expr.as_ref(), chunk.data())?;
            columns.push(arrow::compute::cast(&values, types.field(i).data_type())?);
        }
        let prefixes = encode_keys(self.def.id, &columns, chunk.len(), n_group)?;
        columns.push(Arc::new(order_keys(&self.spec.order, chunk.data())?));
        columns.extend(chunk.columns().iter().cloned());
        // Typed as stored: an unsigned count (a window's `row_number()`) is a numeric.
        let columns = crate::stream::cast_columns(columns, &types)?;
        let rows = StreamChunk::new(chunk.ops().to_vec(), RecordBatch::try_new(types, columns)?);
        let wanted = self.spec.offset + self.spec.limit;
        // Every touched group's window, read where not cached (before the chunk is stored).
        for prefix in &prefixes {
            if !self.windows.contains_key(prefix) {
                let rows = self.table.iter_range(prefix, &prefix_end(prefix), wanted)?;
                self.cached_rows += rows.len();
                let complete = rows.len() < wanted;
                self.windows.insert(prefix.clone(), Window { rows, complete });
            }
        }
        self.table.write_chunk(&rows)?;
        // Each change applied to its group's window; the windows as they were before the
        // chunk, of the groups whose window changed; the groups to read again.
        let mut before: hashbrown::HashMap<&[u8], Vec<Stored>> = hashbrown::HashMap::new();
        let mut reread: hashbrown::HashSet<&[u8]> = hashbrown::HashSet::new();
        let written = self.table.last_written();
        for ((op, (key, value)), prefix) in chunk.ops().iter().zip(written).zip(&prefixes) {
            let prefix = prefix.as_slice();
            if reread.contains(prefix) {
                continue;
            }
            let window = self.windows.get_mut(prefix).expect("read above");
            if window.touched_by(op.is_insert(), key, wanted) && !before.contains_key(prefix) {
                before.insert(prefix, window.rows.clone());
            }
            let len = window.rows.len();
            let again = match op.is_insert() {
                true => {
                    window.insert(key, value, wanted);
                    false
                }
                false => window.delete(key),
            };
            self.cached_rows = self.cached_rows + window.rows.len() - len;
            if again {
                reread.insert(prefix);
            }
        }
        for &prefix in &reread {
            let rows = self.table.iter_range(prefix, &prefix_end(prefix), wanted)?;
            let complete = rows.len() < wanted;
            self.cached_rows += rows.len();
            let old = self.windows.insert(prefix.to_vec(), Window { rows, complete });
            self.cached_rows -= old.map_or(0, |w| w.rows.len());
        }
        let mut deletes: Vec<(Stored, usize)> = Vec::new();
        let mut inserts: Vec<(Stored, usize)> = Vec::new();
        let mut groups: Vec<&[u8]> = before.keys().copied().collect();
        groups.sort_unstable();
        for prefix in groups {
            let after = self.windows[prefix].rows.clone();
            let window = |rows: Vec<Stored>| -> Vec<(Stored, usize)> {
                rows.into_iter().enumerate().skip(self.spec.offset).map(|(i, r)| (r, i)).collect()
            };
            let (before, after) = (window(before[prefix].clone()), window(after));
            // With ranks a row is the same output row only at the same position.
            let same = |a: &(Stored, usize), b: &(Stored, usize)| {
                a.0.0 == b.0.0 && a.0.1 == b.0.1 && (!self.spec.rank || a.1 == b.1)
            };
            for row in &before {
                if !after.iter().any(|r| same(r, row)) {
                    deletes.push(row.clone());
                }
            }
            for row in after {
                if !before.iter().any(|r| same(r, &row)) {
                    inserts.push(row);
                }
            }
        }
        if self.cached_rows > MAX_CACHED_ROWS {
            self.windows.clear();
            self.cached_rows = 0;
        }
        if deletes.is_empty() && inserts.is_empty() {
            return Ok(None);
        }
        let mut ops = vec![Op::Delete; deletes.len()];
        ops.resize(deletes.len() + inserts.len(), Op::Insert);
        let out: Vec<(Stored, usize)> = deletes.into_iter().chain(inserts).collect();
        Ok(Some(StreamChunk::new(ops, self.output(&out)?)))
    }

    /// The output rows of stored rows at their positions: the input columns, with the rank
    /// after the visible ones when asked for, then the group values (part of the output's
    /// stream key: a row that changes groups is deleted by one actor and inserted by another,
    /// so the two must be different rows).
    fn output(&self, rows: &[(Stored, usize)]) -> Result<RecordBatch> {
        let types = self.def.types();
        let n_group = self.spec.group.len();
        let first_input = n_group + 1;
        let mut projection: Vec<usize> = (first_input..types.len()).collect();
        projection.extend(0..n_group);
        let mut decoder = RowDecoder::new(&types, &self.def.pk, &projection, rows.len());
        for ((key, value), _) in rows {
            decoder.push(key, value)?;
        }
        let mut columns = decoder.finish();
        if self.spec.rank {
            let ranks = Int64Array::from_iter_values(rows.iter().map(|(_, i)| *i as i64 + 1));
            columns.insert(self.visible, Arc::new(ranks) as ArrayRef);
        }
        let columns = columns
            .into_iter()
            .zip(self.output_schema.fields())
            .map(|(c, f)| Ok(arrow::compute::cast(&c, f.data_type())?))
            .collect::<Result<Vec<_>>>()?;
        Ok(RecordBatch::try_new(self.output_schema.clone(), columns)?)
    }
}

/// Each row's sort key as bytes that order as `order` does: per item a NULL marker placed
/// first or last, then the value's memcomparable encoding, inverted for `DESC`.
pub fn order_keys(order: &[SortKey], batch: &RecordBatch) -> Result<BinaryArray> {
    let rows = batch.num_rows();
    let mut keys = vec![Vec::new(); rows];
    let mut encoded = vec![Vec::new(); rows];
    for item in order {
        let values = eval(item.expr.as_ref(), batch)?;
        for e in encoded.iter_mut() {
            e.clear();
        }
        encode_column(&values, &mut encoded)?;
        for (row, key) in keys.iter_mut().enumerate() {
            if values.is_null(row) {
                key.push(if item.nulls_first { 0 } else { 2 });
                continue;
            }
            key.push(1);
            // The encoding of a present value: its marker byte, then the value's bytes.
            let value = &encoded[row][1..];
            match item.descending {
                true => key.extend(value.iter().map(|b| !b)),
                false => key.extend_from_slice(value),
            }
        }
    }
    Ok(BinaryArray::from_iter_values(keys.iter()))
}
