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

#[cfg(test)]
mod tests {
    use futures::{FutureExt, StreamExt};

    use super::*;
    use crate::stream::test_utils::{Pretty, barrier, chunk, dedent};

    /// What `stream` emits without waiting for more input.
    fn ready(stream: &mut BoxedMessageStream) -> String {
        let mut out = Vec::new();
        while let Some(msg) = stream.next().now_or_never() {
            out.push(msg.expect("the inputs are open").expect("no error").pretty());
        }
        out.join("\n\n")
    }

    /// A merge of `n` upstream channels, and their senders.
    fn merge(n: usize) -> (Vec<mpsc::Sender<Message>>, BoxedMessageStream) {
        let (senders, receivers) = (0..n).map(|_| mpsc::channel(8)).unzip();
        (senders, Box::new(MergeExecutor::new(receivers)).execute())
    }

    #[tokio::test]
    async fn chunks_from_every_upstream_come_out_as_they_arrive() {
        let (tx, mut out) = merge(3);
        tx[2].send(chunk("i\n+ 3")).await.unwrap();
        assert_eq!(ready(&mut out), "i\n+ 3");
        tx[0].send(chunk("i\n- 1")).await.unwrap();
        tx[1].send(chunk("i\nU- 2\nU+ 20")).await.unwrap();
        let expected = "i
                        - 1

                        i
                        U- 2
                        U+ 20";
        assert_eq!(ready(&mut out), dedent(expected));
    }

    #[tokio::test]
    async fn a_barrier_comes_out_once_after_every_upstream_sent_it() {
        let (tx, mut out) = merge(3);
        tx[0].send(barrier(1)).await.unwrap();
        tx[1].send(barrier(1)).await.unwrap();
        assert_eq!(ready(&mut out), "");
        tx[2].send(chunk("i\n+ 3")).await.unwrap();
        assert_eq!(ready(&mut out), "i\n+ 3");
        tx[2].send(barrier(1)).await.unwrap();
        assert_eq!(ready(&mut out), "barrier 1");
    }

    #[tokio::test]
    async fn an_upstream_at_a_barrier_is_not_read_until_the_others_sent_it() {
        let (tx, mut out) = merge(2);
        for msg in [barrier(1), chunk("i\n+ 1"), barrier(2), chunk("i\n+ 2")] {
            tx[0].send(msg).await.unwrap();
        }
        assert_eq!(ready(&mut out), "");
        tx[1].send(chunk("i\n+ 10")).await.unwrap();
        assert_eq!(ready(&mut out), "i\n+ 10");
        tx[1].send(barrier(1)).await.unwrap();
        assert_eq!(ready(&mut out), dedent("barrier 1\n\ni\n+ 1"));
        tx[1].send(barrier(2)).await.unwrap();
        assert_eq!(ready(&mut out), dedent("barrier 2\n\ni\n+ 2"));
    }
}
