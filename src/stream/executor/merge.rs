//! `MergeExecutor`: the input of an actor fed by several upstream actors.
//!
//! Chunks are forwarded as they arrive from any input. A barrier is forwarded only once every
//! input has delivered it; an input that delivered the barrier is not read again until then.

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::stream::executor::union::next_from;
use crate::stream::executor::{BoxedMessageStream, Executor};
use crate::stream::message::{Barrier, Message};

/// Merges upstream channels, aligning barriers.
pub struct MergeExecutor {
    inputs: Vec<mpsc::Receiver<Message>>,
}

impl MergeExecutor {
    /// Merges `inputs`.
    pub fn new(inputs: Vec<mpsc::Receiver<Message>>) -> Self {
        Self { inputs }
    }
}

impl Executor for MergeExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let mut inputs: Vec<ReceiverStream<Message>> =
            self.inputs.into_iter().map(ReceiverStream::new).collect();
        async_stream::try_stream! {
            let mut barriers: Vec<Option<Barrier>> = vec![None; inputs.len()];
            let mut start = 0;
            loop {
                let (index, msg) = next_from(&mut inputs, &barriers, &mut start).await;
                let Some(msg) = msg else { break };
                match msg {
                    Message::Barrier(barrier) => {
                        barriers[index] = Some(barrier);
                        if barriers.iter().all(Option::is_some) {
                            let barrier = barriers[0].take().expect("all inputs delivered it");
                            barriers.iter_mut().for_each(|b| *b = None);
                            yield Message::Barrier(barrier);
                        }
                    }
                    other => yield other,
                }
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "MergeExecutor"
    }
}
