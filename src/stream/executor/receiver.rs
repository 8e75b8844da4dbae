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

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::stream::test_utils::{Pretty, barrier, chunk, dedent};

    #[tokio::test]
    async fn passes_on_what_the_upstream_sends_in_order_and_ends_with_it() {
        let (tx, rx) = mpsc::channel(8);
        let mut out = Box::new(ReceiverExecutor::new(rx)).execute();
        tx.send(chunk("i i\n+ 1 10\n- 2 20")).await.unwrap();
        tx.send(barrier(1)).await.unwrap();
        tx.send(chunk("i i\nU- 1 10\nU+ 1 11")).await.unwrap();
        drop(tx);
        let mut seen = Vec::new();
        while let Some(message) = out.next().await {
            seen.push(message.unwrap().pretty());
        }
        let expected = "i i
                        + 1 10
                        - 2 20
                        barrier 1
                        i i
                        U- 1 10
                        U+ 1 11";
        assert_eq!(seen.join("\n"), dedent(expected));
    }
}
