//! `MaterializeExecutor`: writes its input into a relation's state table.
//!
//! The state table is the relation's arrangement: batch queries read it, and backfills of
//! downstream views scan it. On a barrier the epoch's writes are sealed and staged for the
//! checkpoint before the barrier is forwarded. Rows are cast to the relation's column types
//! first, so what is stored always decodes as the catalog says.

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use futures::StreamExt;

use crate::error::Result;
use crate::storage::state_table::StateTable;
use crate::stream::cast_columns;
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::{Message, StreamChunk};

/// Applies every change to a state table and passes it on.
pub struct MaterializeExecutor {
    input: BoxedExecutor,
    table: StateTable,
    schema: SchemaRef,
}

impl MaterializeExecutor {
    /// Materializes `input` into `table`, whose rows have `schema`.
    pub fn new(input: BoxedExecutor, table: StateTable, schema: SchemaRef) -> Self {
        Self { input, table, schema }
    }
}

impl Executor for MaterializeExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { input, mut table, schema } = *self;
        async_stream::try_stream! {
            let mut input = input.execute();
            while let Some(msg) = input.next().await {
                let msg = match msg? {
                    Message::Chunk(chunk) => {
                        let chunk = conform(chunk, &schema)?;
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

/// The chunk with its columns cast to `schema`'s types and named as in `schema`.
fn conform(chunk: StreamChunk, schema: &SchemaRef) -> Result<StreamChunk> {
    if chunk.schema().fields() == schema.fields() {
        return Ok(chunk);
    }
    let columns = cast_columns(chunk.columns().to_vec(), schema)?;
    let data = RecordBatch::try_new(schema.clone(), columns)?;
    Ok(StreamChunk::new(chunk.ops().to_vec(), data))
}
