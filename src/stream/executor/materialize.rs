//! `MaterializeExecutor`: writes its input into a relation's state table.
//!
//! The state table is the relation's arrangement: batch queries read it, and backfills of
//! downstream views scan it. On a barrier the epoch's writes are sealed and staged for the
//! checkpoint before the barrier is forwarded.

use futures::StreamExt;

use crate::storage::state_table::StateTable;
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::Message;

/// Applies every change to a state table and passes it on.
pub struct MaterializeExecutor {
    input: BoxedExecutor,
    table: StateTable,
}

impl MaterializeExecutor {
    /// Materializes `input` into `table`.
    pub fn new(input: BoxedExecutor, table: StateTable) -> Self {
        Self { input, table }
    }
}

impl Executor for MaterializeExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { input, mut table } = *self;
        async_stream::try_stream! {
            let mut input = input.execute();
            while let Some(msg) = input.next().await {
                let msg = msg?;
                match &msg {
                    Message::Chunk(chunk) => table.write_chunk(chunk)?,
                    Message::Barrier(barrier) if barrier.is_checkpoint() => {
                        table.commit(barrier.epoch.prev)
                    }
                    Message::Barrier(_) | Message::Watermark(_) => {}
                }
                yield msg;
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "MaterializeExecutor"
    }
}
