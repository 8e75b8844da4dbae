//! `MaterializeExecutor`: writes its input into a relation's state table.
//!
//! The state table is the relation's arrangement: batch queries read it, and backfills of
//! downstream views scan it. On a barrier the epoch's writes are sealed and staged for the
//! checkpoint before the barrier is forwarded. Rows are cast to the relation's column types
//! first, so what is stored always decodes as the catalog says.
//!
//! In upsert mode (CDC tables) a chunk may carry one more column, named [`UNCHANGED_COLUMN`]
//! and typed as [`unchanged_field`]: per row, the indices of the table columns an update did
//! not send, which keep their stored value. A chunk without it holds plain inserts.
//!
//! A [`Message::Truncate`] (an upstream `TRUNCATE` of a CDC table) deletes every row of the
//! executor's vnodes: it emits their deletes page by page, so views downstream retract them,
//! and empties the vnodes' key ranges in the state table with one range delete each at the
//! checkpoint, so the write does not grow with the table.

use std::collections::HashMap;

use arrow::array::{AsArray, ListArray, RecordBatch};
use arrow::datatypes::{Field, SchemaRef};
use futures::StreamExt;
use prometheus_client::metrics::counter::Counter;

use crate::error::Result;
use crate::ids::VirtualNode;
use crate::storage::row_codec::RowDecoder;
use crate::storage::state_table::StateTable;
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::{Message, Op, StreamChunk};
use crate::stream::{cast_columns, index_list_type, indices_at};

/// The name of the column of an upsert's input that lists, per row, the columns to keep.
pub const UNCHANGED_COLUMN: &str = "_unchanged";

/// The [`UNCHANGED_COLUMN`] field: a list of table column indices per row (NULL or empty:
/// every column was sent). No SQL type is a list, so a table column of that name is not it.
pub fn unchanged_field() -> Field {
    Field::new(UNCHANGED_COLUMN, index_list_type(), true)
}

/// Rows per chunk of the deletes a truncate emits.
const TRUNCATE_PAGE: usize = 4096;

/// Applies every change to a state table and passes it on.
pub struct MaterializeExecutor {
    input: BoxedExecutor,
    table: StateTable,
    schema: SchemaRef,
    upsert: bool,
    /// The vnodes whose rows this executor stores: what a truncate deletes.
    vnodes: Vec<VirtualNode>,
    /// Where the rows inserted and deleted are counted.
    counters: Option<(Counter, Counter)>,
}

impl MaterializeExecutor {
    /// Materializes `input` into `table`, whose rows have `schema`.
    pub fn new(input: BoxedExecutor, table: StateTable, schema: SchemaRef) -> Self {
        let vnodes = (0..VirtualNode::COUNT).map(|v| VirtualNode(v as u16)).collect();
        Self { input, table, schema, upsert: false, vnodes, counters: None }
    }

    /// The same executor counting the rows it passes on, inserted and deleted (see
    /// [`Metrics::relation_changes`](crate::metrics::Metrics::relation_changes)).
    pub fn counting(mut self, counters: (Counter, Counter)) -> Self {
        self.counters = Some(counters);
        self
    }

    /// The same executor storing only the rows of `vnodes` (its share of a fragment).
    pub fn owning(mut self, vnodes: Vec<VirtualNode>) -> Self {
        self.vnodes = vnodes;
        self
    }

    /// Materializes upserts: an insert replaces the row with its key, a delete needs only the
    /// key. What it passes on are exact changes (the replaced row is retracted), so downstream
    /// views see the same as from a DML-fed table. CDC tables use this, which also makes a
    /// change applied twice harmless.
    pub fn upsert(input: BoxedExecutor, table: StateTable, schema: SchemaRef) -> Self {
        Self { upsert: true, ..Self::new(input, table, schema) }
    }
}

impl Executor for MaterializeExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { input, mut table, schema, upsert, vnodes, counters } = *self;
        let count = move |chunk: &StreamChunk| {
            if let Some((inserts, deletes)) = &counters {
                let inserted = chunk.ops().iter().filter(|op| op.is_insert()).count() as u64;
                inserts.inc_by(inserted);
                deletes.inc_by(chunk.len() as u64 - inserted);
            }
        };
        async_stream::try_stream! {
            let mut input = input.execute();
            while let Some(msg) = input.next().await {
                let msg = match msg? {
                    Message::Chunk(chunk) => {
                        let (chunk, unchanged) = split_unchanged(chunk)?;
                        let chunk = conform(chunk, &schema)?;
                        // In upsert mode a chunk without the `_unchanged` column holds plain
                        // inserts of keys not stored yet (a CDC snapshot page).
                        let chunk = match unchanged {
                            Some(unchanged) if upsert => {
                                resolve_upserts(&table, &schema, chunk, &unchanged)?
                            }
                            _ => Some(chunk),
                        };
                        let Some(chunk) = chunk else { continue };
                        table.write_chunk(&chunk)?;
                        count(&chunk);
                        Message::Chunk(chunk)
                    }
                    Message::Barrier(barrier) => {
                        if barrier.is_checkpoint() {
                            table.commit(barrier.epoch.prev);
                        }
                        Message::Barrier(barrier)
                    }
                    Message::Truncate => {
                        let ranges = table.vnode_ranges(&vnodes);
                        let types = column_types(&schema)?;
                        for (start, end) in &ranges {
                            let mut from = start.clone();
                            while let Some((deletes, next)) =
                                stored_page(&table, &schema, &types, &from, end)?
                            {
                                count(&deletes);
                                yield Message::Chunk(deletes);
                                let Some(next) = next else { break };
                                from = next;
                            }
                        }
                        table.clear_ranges(&ranges);
                        continue;
                    }
                    watermark => watermark,
                };
                yield msg;
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "MaterializeExecutor"
    }
}

/// The deletes of the stored rows from `from` on, below `end`, a page at a time, and where the
/// next page starts (`None`: the range ends with this page); `None` when no row is left.
fn stored_page(
    table: &StateTable,
    schema: &SchemaRef,
    types: &[crate::types::DataType],
    from: &[u8],
    end: &[u8],
) -> Result<Option<(StreamChunk, Option<Vec<u8>>)>> {
    let rows = table.iter_range(from, end, TRUNCATE_PAGE)?;
    let Some((last, _)) = rows.last() else { return Ok(None) };
    let next = (rows.len() == TRUNCATE_PAGE).then(|| [last.as_slice(), &[0]].concat());
    let all: Vec<usize> = (0..types.len()).collect();
    let mut decoder =
        RowDecoder::widened(types, table.pk_indices(), &all, rows.len(), table.widened());
    for (key, value) in &rows {
        decoder.push(key, value)?;
    }
    let data = RecordBatch::try_new(schema.clone(), decoder.finish())?;
    Ok(Some((StreamChunk::new(vec![Op::Delete; rows.len()], data), next)))
}

/// Turns upserts into exact changes against the stored rows: an insert over an existing row
/// becomes an update pair, a delete takes the stored row, a delete of a missing row vanishes.
/// `unchanged` lists, per row, the columns an update did not send, which keep their stored value.
fn resolve_upserts(
    table: &StateTable,
    schema: &SchemaRef,
    chunk: StreamChunk,
    unchanged: &ListArray,
) -> Result<Option<StreamChunk>> {
    let width = schema.fields().len();
    let keys = table.keys(chunk.columns(), chunk.len())?;
    // The current version of a row as the chunk goes: per column, (batch, row) with batch 0 =
    // stored rows, 1 = this chunk.
    let mut current: HashMap<Vec<u8>, Option<Vec<(usize, usize)>>> = HashMap::new();
    let types = column_types(schema)?;
    let all: Vec<usize> = (0..width).collect();
    let mut stored =
        RowDecoder::widened(&types, table.pk_indices(), &all, chunk.len(), table.widened());
    let mut rows: Vec<Vec<(usize, usize)>> = Vec::new();
    let mut ops = Vec::new();
    let mut stored_values = table.get_many(&keys)?;
    for (row, key) in keys.iter().enumerate() {
        let existing = match current.get(key) {
            Some(c) => c.clone(),
            None => match stored_values[row].take() {
                Some(value) => {
                    stored.push(key, &value)?;
                    Some(vec![(0, stored.len() - 1); width])
                }
                None => None,
            },
        };
        if chunk.ops()[row].is_insert() {
            let mut new = vec![(1, row); width];
            if let Some(old) = &existing {
                for c in indices_at(unchanged, row).iter().map(|&c| c as usize) {
                    if c < width {
                        new[c] = old[c];
                    }
                }
            }
            match existing {
                Some(old) => {
                    ops.extend([Op::UpdateDelete, Op::UpdateInsert]);
                    rows.extend([old, new.clone()]);
                }
                None => {
                    ops.push(Op::Insert);
                    rows.push(new.clone());
                }
            }
            current.insert(key.clone(), Some(new));
        } else {
            if let Some(old) = existing {
                ops.push(Op::Delete);
                rows.push(old);
            }
            current.insert(key.clone(), None);
        }
    }
    if ops.is_empty() {
        return Ok(None);
    }
    let stored = RecordBatch::try_new(schema.clone(), stored.finish())?;
    let sources = [&stored, chunk.data()];
    let columns = (0..width)
        .map(|c| {
            let arrays: Vec<&dyn arrow::array::Array> =
                sources.iter().map(|b| b.column(c).as_ref()).collect();
            let picks: Vec<(usize, usize)> = rows.iter().map(|r| r[c]).collect();
            arrow::compute::interleave(&arrays, &picks)
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let data = RecordBatch::try_new(schema.clone(), columns)?;
    without_noop_updates(StreamChunk::new(ops, data))
}

/// `chunk` without its update pairs whose new row equals the old one: an upsert of the row
/// the table holds (an upstream `UPDATE` that changed nothing, a snapshot read again) changes
/// nothing downstream. `None` when nothing is left.
fn without_noop_updates(chunk: StreamChunk) -> Result<Option<StreamChunk>> {
    use arrow::row::{RowConverter, SortField};
    let ops = chunk.ops();
    if !ops.contains(&Op::UpdateDelete) {
        return Ok(Some(chunk));
    }
    let fields = chunk.data().schema();
    let sort_fields = fields.fields().iter().map(|f| SortField::new(f.data_type().clone()));
    let rows = RowConverter::new(sort_fields.collect())?.convert_columns(chunk.columns())?;
    let mut keep = vec![true; ops.len()];
    for i in 0..ops.len().saturating_sub(1) {
        if ops[i] == Op::UpdateDelete
            && ops[i + 1] == Op::UpdateInsert
            && rows.row(i) == rows.row(i + 1)
        {
            keep[i] = false;
            keep[i + 1] = false;
        }
    }
    if keep.iter().all(|&k| k) {
        return Ok(Some(chunk));
    }
    if !keep.iter().any(|&k| k) {
        return Ok(None);
    }
    let ops: Vec<Op> = ops.iter().zip(&keep).filter(|(_, k)| **k).map(|(op, _)| *op).collect();
    let data = arrow::compute::filter_record_batch(chunk.data(), &keep.into())?;
    Ok(Some(StreamChunk::new(ops, data)))
}

/// The SQL type of each column of `schema`.
fn column_types(schema: &SchemaRef) -> Result<Vec<crate::types::DataType>> {
    schema.fields().iter().map(|f| crate::types::DataType::from_arrow(f.data_type())).collect()
}

/// Separates the [`UNCHANGED_COLUMN`] of CDC chunks, found by name and type, from the rows.
fn split_unchanged(chunk: StreamChunk) -> Result<(StreamChunk, Option<ListArray>)> {
    let schema = chunk.schema();
    let field = unchanged_field();
    let is_unchanged = |f: &Field| f.name() == field.name() && f.data_type() == field.data_type();
    let Some(at) = schema.fields().iter().position(|f| is_unchanged(f)) else {
        return Ok((chunk, None));
    };
    let unchanged = chunk.columns()[at].as_list::<i32>().clone();
    let rest: Vec<usize> = (0..schema.fields().len()).filter(|&c| c != at).collect();
    let data = chunk.data().project(&rest)?;
    Ok((StreamChunk::new(chunk.ops().to_vec(), data), Some(unchanged)))
}

/// The chunk with its columns cast to `schema`'s types and named as in `schema`.
fn conform(chunk: StreamChunk, schema: &SchemaRef) -> Result<StreamChunk> {
    if chunk.schema().fields() == schema.fields() {
        return Ok(chunk);
    }
    let columns = cast_columns(chunk.columns().to_vec(), schema)?;
    let data = RecordBatch::try_new(schema.clone(), columns)?;
    Ok(StreamChunk::new(chunk.ops().to_vec(), data))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::catalog::{Epoch, TableId};
    use crate::storage::store::Store;
    use crate::stream::test_utils::{MockSource, barrier, chunk, dedent, run, schema};

    const TABLE: TableId = TableId(7);

    /// Upserts from a text table whose `[u]` column is the `_unchanged` column.
    fn upserts(text: &str) -> Message {
        let chunk = StreamChunk::from_pretty(text);
        let fields: Vec<Field> = chunk
            .schema()
            .fields()
            .iter()
            .map(|f| match f.data_type() == &index_list_type() {
                true => f.as_ref().clone().with_name(UNCHANGED_COLUMN),
                false => f.as_ref().clone(),
            })
            .collect();
        let schema = Arc::new(arrow::datatypes::Schema::new(fields));
        let data = RecordBatch::try_new(schema, chunk.columns().to_vec()).unwrap();
        Message::Chunk(StreamChunk::new(chunk.ops().to_vec(), data))
    }

    /// A state table keyed by `c0`; every row in one vnode, so rows are stored in key order.
    fn state_table(store: &Arc<Store>) -> StateTable {
        StateTable::new(store.clone(), TABLE, vec![0], 0)
    }

    /// Materializes `input` into a fresh table of columns `header`, commits every epoch a
    /// barrier ended, and returns what it emitted and the stored rows as inserts.
    async fn materialize(
        header: &str,
        upsert: bool,
        input: impl IntoIterator<Item = Message>,
    ) -> (String, String) {
        materialize_vnodes(header, upsert, None, input).await
    }

    /// [`materialize`] by an executor owning only `vnodes`, if given.
    async fn materialize_vnodes(
        header: &str,
        upsert: bool,
        vnodes: Option<Vec<VirtualNode>>,
        input: impl IntoIterator<Item = Message>,
    ) -> (String, String) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let input = MockSource::boxed(input);
        let (table, schema) = (state_table(&store), schema(header));
        let mut executor = match upsert {
            true => MaterializeExecutor::upsert(input, table, schema.clone()),
            false => MaterializeExecutor::new(input, table, schema.clone()),
        };
        if let Some(vnodes) = vnodes {
            executor = executor.owning(vnodes);
        }
        let out = run(Box::new(executor)).await;
        // Commits every epoch the barriers ended.
        store.commit(Epoch(100)).unwrap();
        (out, stored_rows(&store, &schema))
    }

    /// The committed rows of the table, in key order, as a chunk of inserts.
    fn stored_rows(store: &Arc<Store>, schema: &SchemaRef) -> String {
        let table = state_table(store);
        let (start, end) = table.full_range();
        let types: Vec<crate::types::DataType> = schema
            .fields()
            .iter()
            .map(|f| crate::types::DataType::from_arrow(f.data_type()).unwrap())
            .collect();
        let all: Vec<usize> = (0..types.len()).collect();
        let mut decoder = RowDecoder::new(&types, table.pk_indices(), &all, 16);
        for (key, value) in table.iter_range(&start, &end, usize::MAX).unwrap() {
            decoder.push(&key, &value).unwrap();
        }
        let data = RecordBatch::try_new(schema.clone(), decoder.finish()).unwrap();
        StreamChunk::inserts(data).to_pretty()
    }

    #[tokio::test]
    async fn stores_inserts_updates_and_deletes_and_passes_them_on() {
        let first = "i I T
                     + 1 10 a
                     + 2 20 b
                     + 3 30 c";
        let second = "i  I  T
                      U- 2 20 b
                      U+ 2 21 bb
                      -  3 30 c";
        let (out, stored) =
            materialize("i I T", false, [chunk(first), barrier(1), chunk(second), barrier(2)])
                .await;
        let expected = "i I T
                        + 1 10 a
                        + 2 20 b
                        + 3 30 c

                        barrier 1

                        i I T
                        U- 2 20 b
                        U+ 2 21 bb
                        - 3 30 c

                        barrier 2";
        assert_eq!(out, dedent(expected));
        assert_eq!(stored, dedent("i I T\n+ 1 10 a\n+ 2 21 bb"));
    }

    #[tokio::test]
    async fn writes_after_the_last_barrier_are_not_stored() {
        let (out, stored) =
            materialize("i I", false, [chunk("i I\n+ 1 10"), barrier(1), chunk("i I\n+ 2 20")])
                .await;
        assert_eq!(out, dedent("i I\n+ 1 10\n\nbarrier 1\n\ni I\n+ 2 20"));
        assert_eq!(stored, "i I\n+ 1 10");
    }

    #[tokio::test]
    async fn an_insert_over_a_stored_key_replaces_the_row() {
        let input = [chunk("i I\n+ 1 10"), barrier(1), chunk("i I\n+ 1 11"), barrier(2)];
        let (out, stored) = materialize("i I", false, input).await;
        // Without upsert the change passes on as it came.
        assert_eq!(out, dedent("i I\n+ 1 10\n\nbarrier 1\n\ni I\n+ 1 11\n\nbarrier 2"));
        assert_eq!(stored, "i I\n+ 1 11");
    }

    #[tokio::test]
    async fn rows_are_cast_to_the_table_types() {
        let (out, stored) = materialize("i I", false, [chunk("i i\n+ 1 10"), barrier(1)]).await;
        assert_eq!(out, dedent("i I\n+ 1 10\n\nbarrier 1"));
        assert_eq!(stored, "i I\n+ 1 10");
    }

    #[tokio::test]
    async fn upsert_of_a_stored_key_becomes_an_update_pair() {
        // The last column is `_unchanged`: NULL or empty, every column was sent.
        let input =
            [upserts("i I [u]\n+ 1 10 ."), barrier(1), upserts("i I [u]\n+ 1 11 []"), barrier(2)];
        let (out, stored) = materialize("i I", true, input).await;
        let expected = "i I
                        + 1 10

                        barrier 1

                        i I
                        U- 1 10
                        U+ 1 11

                        barrier 2";
        assert_eq!(out, dedent(expected));
        assert_eq!(stored, "i I\n+ 1 11");
    }

    #[tokio::test]
    async fn an_upsert_of_the_stored_row_changes_nothing() {
        let input = [
            upserts("i I T [u]\n+ 1 10 a .\n+ 2 20 b ."),
            barrier(1),
            upserts("i I T [u]\n+ 1 10 a .\n+ 2 21 b .\n+ 2 21 b ."),
            barrier(2),
            upserts("i I T [u]\n+ 1 10 . [2]"),
            barrier(3),
        ];
        let (out, stored) = materialize("i I T", true, input).await;
        // Row 1 sent again as stored, row 2 twice alike, row 1 with its text unsent: one
        // change in all.
        let expected = "i I T
                        + 1 10 a
                        + 2 20 b

                        barrier 1

                        i I T
                        U- 2 20 b
                        U+ 2 21 b

                        barrier 2

                        barrier 3";
        assert_eq!(out, dedent(expected));
        assert_eq!(stored, "i I T\n+ 1 10 a\n+ 2 21 b");
    }

    #[tokio::test]
    async fn upsert_delete_by_key_retracts_the_stored_row() {
        let input =
            [upserts("i I [u]\n+ 1 10 ."), barrier(1), upserts("i I [u]\n- 1 . ."), barrier(2)];
        let (out, stored) = materialize("i I", true, input).await;
        assert_eq!(out, dedent("i I\n+ 1 10\n\nbarrier 1\n\ni I\n- 1 10\n\nbarrier 2"));
        assert_eq!(stored, "i I");
    }

    #[tokio::test]
    async fn upsert_delete_of_a_missing_key_emits_nothing() {
        let input = [upserts("i I [u]\n- 1 . ."), barrier(1)];
        let (out, stored) = materialize("i I", true, input).await;
        assert_eq!(out, "barrier 1");
        assert_eq!(stored, "i I");
    }

    #[tokio::test]
    async fn upsert_without_the_unchanged_column_stores_snapshot_rows_as_inserts() {
        let (out, stored) = materialize("i I", true, [chunk("i I\n+ 1 10"), barrier(1)]).await;
        assert_eq!(out, dedent("i I\n+ 1 10\n\nbarrier 1"));
        assert_eq!(stored, "i I\n+ 1 10");
    }

    #[tokio::test]
    async fn toast_unchanged_columns_keep_the_stored_value() {
        // Column 2 of the second change is unchanged (TOAST): it arrives as NULL.
        let first = "i I T [u]
                     + 1 10 a .
                     + 2 20 b .";
        let second = "i I T [u]
                      + 1 11 . [2]
                      + 2 21 . [1, 2]";
        let input = [upserts(first), barrier(1), upserts(second), barrier(2)];
        let (out, stored) = materialize("i I T", true, input).await;
        let expected = "i I T
                        + 1 10 a
                        + 2 20 b

                        barrier 1

                        i I T
                        U- 1 10 a
                        U+ 1 11 a

                        barrier 2";
        // Row 2 keeps both columns from the stored row: nothing changed.
        assert_eq!(out, dedent(expected));
        assert_eq!(stored, dedent("i I T\n+ 1 11 a\n+ 2 20 b"));
    }

    #[tokio::test]
    async fn upserts_of_one_key_in_one_chunk_apply_in_order() {
        let changes = "i I T [u]
                       + 1 10 a .
                       + 1 11 . [2]
                       - 1 .  . .
                       + 1 12 c .";
        let (out, stored) = materialize("i I T", true, [upserts(changes), barrier(1)]).await;
        let expected = "i I T
                        + 1 10 a
                        U- 1 10 a
                        U+ 1 11 a
                        - 1 11 a
                        + 1 12 c

                        barrier 1";
        assert_eq!(out, dedent(expected));
        assert_eq!(stored, "i I T\n+ 1 12 c");
    }

    #[tokio::test]
    async fn an_unchanged_column_of_a_new_key_stays_as_sent() {
        let (out, stored) =
            materialize("i I T", true, [upserts("i I T [u]\n+ 1 10 . [2]"), barrier(1)]).await;
        assert_eq!(out, dedent("i I T\n+ 1 10 .\n\nbarrier 1"));
        assert_eq!(stored, "i I T\n+ 1 10 .");
    }

    #[tokio::test]
    async fn the_unchanged_column_is_found_by_name_wherever_it_stands() {
        let first = upserts("[u] i I T\n+ . 1 10 a");
        let second = upserts("i [u] I T\n+ 1 [2] 11 .");
        let (out, stored) =
            materialize("i I T", true, [first, barrier(1), second, barrier(2)]).await;
        let expected = "i I T
                        + 1 10 a

                        barrier 1

                        i I T
                        U- 1 10 a
                        U+ 1 11 a

                        barrier 2";
        assert_eq!(out, dedent(expected));
        assert_eq!(stored, "i I T\n+ 1 11 a");
    }

    #[tokio::test]
    async fn a_column_named_like_the_unchanged_column_but_not_a_list_is_a_table_column() {
        let Message::Chunk(plain) = chunk("i T\n+ 1 a") else { unreachable!() };
        let schema = arrow::datatypes::Schema::new(vec![
            Field::new("id", arrow::datatypes::DataType::Int32, true),
            Field::new(UNCHANGED_COLUMN, arrow::datatypes::DataType::Utf8, true),
        ]);
        let data = RecordBatch::try_new(Arc::new(schema), plain.columns().to_vec()).unwrap();
        let input = [Message::Chunk(StreamChunk::inserts(data)), barrier(1)];
        let (out, stored) = materialize("i T", true, input).await;
        assert_eq!(out, dedent("i T\n+ 1 a\n\nbarrier 1"));
        assert_eq!(stored, "i T\n+ 1 a");
    }

    #[tokio::test]
    async fn a_truncate_emits_the_deletes_of_every_stored_row_and_later_rows_stay() {
        let input = [
            upserts("i I T [u]\n+ 1 10 a .\n+ 2 20 b ."),
            barrier(1),
            upserts("i I T [u]\n+ 3 30 c .\n+ 2 21 bb ."),
            Message::Truncate,
            upserts("i I T [u]\n+ 2 22 . .\n+ 4 40 d ."),
            barrier(2),
        ];
        let (out, stored) = materialize("i I T", true, input).await;
        // The deletes are of the rows as they stand, committed or written this epoch; the
        // rows after the truncate are new rows, not updates.
        let expected = "i I T
                        + 1 10 a
                        + 2 20 b

                        barrier 1

                        i I T
                        + 3 30 c
                        U- 2 20 b
                        U+ 2 21 bb

                        i I T
                        - 1 10 a
                        - 2 21 bb
                        - 3 30 c

                        i I T
                        + 2 22 .
                        + 4 40 d

                        barrier 2";
        assert_eq!(out, dedent(expected));
        assert_eq!(stored, dedent("i I T\n+ 2 22 .\n+ 4 40 d"));
    }

    #[tokio::test]
    async fn a_truncate_of_an_empty_table_emits_nothing_and_pages_big_ones() {
        let (out, stored) = materialize("i I", false, [Message::Truncate, barrier(1)]).await;
        assert_eq!((out.as_str(), stored.as_str()), ("barrier 1", "i I"));
        let rows: String = (0..TRUNCATE_PAGE + 1).map(|i| format!("\n+ {i} {i}")).collect();
        let input = [chunk(&format!("i I{rows}")), barrier(1), Message::Truncate, barrier(2)];
        let (out, stored) = materialize("i I", false, input).await;
        let pages: Vec<usize> = out
            .split("\n\n")
            .filter(|m| m.contains("\n- "))
            .map(|m| m.lines().count() - 1)
            .collect();
        assert_eq!(pages, [TRUNCATE_PAGE, 1]);
        assert_eq!(stored, "i I");
    }

    #[tokio::test]
    async fn a_truncate_deletes_only_the_rows_of_the_executors_vnodes() {
        // Every row of the test table is in vnode 0.
        let input = [chunk("i I\n+ 1 10"), barrier(1), Message::Truncate, barrier(2)];
        let (out, stored) =
            materialize_vnodes("i I", false, Some(vec![VirtualNode(1)]), input).await;
        assert_eq!(out, dedent("i I\n+ 1 10\n\nbarrier 1\n\nbarrier 2"));
        assert_eq!(stored, "i I\n+ 1 10");
    }
}
