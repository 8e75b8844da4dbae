//! `MaterializeExecutor`: writes its input into a relation's state table.
//!
//! The state table is the relation's arrangement: batch queries read it, and backfills of
//! downstream views scan it. On a barrier the epoch's writes are sealed and staged for the
//! checkpoint before the barrier is forwarded. Rows are cast to the relation's column types
//! first, so what is stored always decodes as the catalog says.

use std::collections::HashMap;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use futures::StreamExt;

use crate::error::Result;
use crate::storage::row_codec::RowDecoder;
use crate::storage::state_table::StateTable;
use crate::stream::cast_columns;
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::{Message, Op, StreamChunk};

/// Applies every change to a state table and passes it on.
pub struct MaterializeExecutor {
    input: BoxedExecutor,
    table: StateTable,
    schema: SchemaRef,
    upsert: bool,
}

impl MaterializeExecutor {
    /// Materializes `input` into `table`, whose rows have `schema`.
    pub fn new(input: BoxedExecutor, table: StateTable, schema: SchemaRef) -> Self {
        Self { input, table, schema, upsert: false }
    }

    /// Materializes upserts: an insert replaces the row with its key, a delete needs only the
    /// key. What it passes on are exact changes (the replaced row is retracted), so downstream
    /// views see the same as from a DML-fed table. CDC tables use this, which also makes a
    /// change applied twice harmless.
    pub fn upsert(input: BoxedExecutor, table: StateTable, schema: SchemaRef) -> Self {
        Self { input, table, schema, upsert: true }
    }
}

impl Executor for MaterializeExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { input, mut table, schema, upsert } = *self;
        async_stream::try_stream! {
            let mut input = input.execute();
            while let Some(msg) = input.next().await {
                let msg = match msg? {
                    Message::Chunk(chunk) => {
                        let chunk = conform(chunk, &schema)?;
                        let chunk = if upsert { resolve_upserts(&table, &schema, chunk)? } else { Some(chunk) };
                        let Some(chunk) = chunk else { continue };
                        table.write_chunk(&chunk)?;
                        Message::Chunk(chunk)
                    }
                    Message::Barrier(barrier) => {
                        if barrier.is_checkpoint() {
                            table.commit(barrier.epoch.prev);
                        }
                        Message::Barrier(barrier)
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

/// Turns upserts into exact changes against the stored rows: an insert over an existing row
/// becomes an update pair, a delete takes the stored row, a delete of a missing row vanishes.
fn resolve_upserts(
    table: &StateTable,
    schema: &SchemaRef,
    chunk: StreamChunk,
) -> Result<Option<StreamChunk>> {
    let keys = table.keys(chunk.columns(), chunk.len())?;
    // The current row per key as this chunk goes: (batch 0 = stored, 1 = chunk, row).
    let mut current: HashMap<Vec<u8>, Option<(usize, usize)>> = HashMap::new();
    let types: Vec<crate::types::DataType> = schema
        .fields()
        .iter()
        .map(|f| crate::types::DataType::from_arrow(f.data_type()))
        .collect::<Result<_>>()?;
    let all: Vec<usize> = (0..types.len()).collect();
    let mut stored = RowDecoder::new(&types, &all, chunk.len());
    let mut picks: Vec<(usize, usize)> = Vec::new();
    let mut ops = Vec::new();
    for (row, key) in keys.iter().enumerate() {
        let existing = match current.get(key) {
            Some(c) => *c,
            None => match table.get(key)? {
                Some(value) => {
                    stored.push(&value)?;
                    Some((0, stored.len() - 1))
                }
                None => None,
            },
        };
        if chunk.ops()[row].is_insert() {
            match existing {
                Some(old) => {
                    ops.extend([Op::UpdateDelete, Op::UpdateInsert]);
                    picks.extend([old, (1, row)]);
                }
                None => {
                    ops.push(Op::Insert);
                    picks.push((1, row));
                }
            }
            current.insert(key.clone(), Some((1, row)));
        } else {
            if let Some(old) = existing {
                ops.push(Op::Delete);
                picks.push(old);
            }
            current.insert(key.clone(), None);
        }
    }
    if ops.is_empty() {
        return Ok(None);
    }
    let stored = RecordBatch::try_new(schema.clone(), stored.finish())?;
    let sources = [&stored, chunk.data()];
    let columns = (0..schema.fields().len())
        .map(|c| {
            let arrays: Vec<&dyn arrow::array::Array> =
                sources.iter().map(|b| b.column(c).as_ref()).collect();
            arrow::compute::interleave(&arrays, &picks)
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(Some(StreamChunk::new(ops, RecordBatch::try_new(schema.clone(), columns)?)))
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
