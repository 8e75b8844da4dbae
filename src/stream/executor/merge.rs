//! `MergeExecutor`: the input of an actor fed by several upstream actors.
//!
//! Chunks are forwarded as they arrive from any input. A barrier is forwarded only once every
//! input has delivered it; an input that delivered the barrier is not read again until then.
//! This is the barrier alignment of [`UnionExecutor`] over one receiver per upstream actor.

use tokio::sync::mpsc;

use crate::stream::executor::receiver::ReceiverExecutor;
use crate::stream::executor::union::UnionExecutor;
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::Message;

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
        let inputs: Vec<BoxedExecutor> =
            self.inputs.into_iter().map(|rx| Box::new(ReceiverExecutor::new(rx)) as _).collect();
        Box::new(UnionExecutor::new(inputs)).execute()
    }

    fn identity(&self) -> &str {
        "MergeExecutor"
    }
}
