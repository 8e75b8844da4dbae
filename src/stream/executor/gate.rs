//! `GateExecutor`: holds an actor's input after its first barrier until that barrier's epoch
//! is committed.
//!
//! Actors that replace others (a rescale) or rebuild a job start with a checkpoint barrier whose
//! epoch holds the last writes of the actors they replace. Those writes become readable only
//! when that epoch is committed, so nothing after the first barrier may reach the executors
//! above (which read their state from storage) before then. The barrier itself passes at once:
//! the epoch cannot commit before every actor has collected it.

use std::sync::Arc;

use futures::StreamExt;

use crate::storage::store::Store;
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::Message;

/// Passes its input through, pausing after the first barrier until its epoch is committed.
pub struct GateExecutor {
    input: BoxedExecutor,
    store: Arc<Store>,
}

impl GateExecutor {
    /// A gate over `input`.
    pub fn new(input: BoxedExecutor, store: Arc<Store>) -> Self {
        Self { input, store }
    }
}

impl Executor for GateExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { input, store } = *self;
        async_stream::try_stream! {
            let mut input = input.execute();
            while let Some(msg) = input.next().await {
                let msg = msg?;
                let wait = match &msg {
                    Message::Barrier(b) => b.is_checkpoint().then_some(b.epoch.prev),
                    _ => None,
                };
                let is_barrier = matches!(msg, Message::Barrier(_));
                yield msg;
                if let Some(epoch) = wait {
                    store.wait_committed(epoch).await?;
                }
                if is_barrier {
                    break;
                }
            }
            while let Some(msg) = input.next().await {
                yield msg?;
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "GateExecutor"
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int32Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use futures::FutureExt;
    use tokio::sync::mpsc;

    use super::*;
    use crate::stream::executor::receiver::ReceiverExecutor;
    use crate::stream::message::{Barrier, StreamChunk};

    #[tokio::test]
    async fn holds_messages_after_the_first_barrier_until_its_epoch_commits() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (tx, rx) = mpsc::channel(4);
        let gate = GateExecutor::new(Box::new(ReceiverExecutor::new(rx)), store.clone());
        let mut stream = Box::new(gate).execute();
        let epoch = store.committed_epoch().next();
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int32, false)]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(Int32Array::from(vec![1]))]);
        tx.send(Message::Barrier(Barrier::checkpoint(epoch))).await.unwrap();
        tx.send(Message::Chunk(StreamChunk::inserts(batch.unwrap()))).await.unwrap();
        assert!(matches!(stream.next().await, Some(Ok(Message::Barrier(_)))));
        // The chunk is in the channel, but the epoch is not committed yet.
        assert!(stream.next().now_or_never().is_none());
        store.commit(epoch).unwrap();
        assert!(matches!(stream.next().await, Some(Ok(Message::Chunk(_)))));
    }
}
