//! `ReceiverExecutor`: the input of an actor fed by an upstream actor's output channel.

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::stream::executor::{BoxedMessageStream, Executor};
use crate::stream::message::Message;

/// Yields what an upstream actor sends; ends when the upstream goes away.
pub struct ReceiverExecutor {
    input: mpsc::Receiver<Message>,
}

impl ReceiverExecutor {
    /// Reads from `input`.
    pub fn new(input: mpsc::Receiver<Message>) -> Self {
        Self { input }
    }
}

impl Executor for ReceiverExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        ReceiverStream::new(self.input).map(Ok).boxed()
    }

    fn identity(&self) -> &str {
        "ReceiverExecutor"
    }
}
