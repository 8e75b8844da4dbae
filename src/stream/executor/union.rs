//! `UnionExecutor`: `UNION ALL` of several inputs of one actor.
//!
//! Chunks pass through from whichever input has one; a barrier is forwarded once every input
//! has delivered it, and an input that delivered it is not read again until then.

use std::task::Poll;

use futures::{Stream, StreamExt};

use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor};
use crate::stream::message::{Barrier, Message};

/// Merges its inputs' rows, aligning barriers.
pub struct UnionExecutor {
    inputs: Vec<BoxedExecutor>,
}

impl UnionExecutor {
    /// The union of `inputs`, whose rows all have the same schema.
    pub fn new(inputs: Vec<BoxedExecutor>) -> Self {
        Self { inputs }
    }
}

impl Executor for UnionExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let mut inputs: Vec<BoxedMessageStream> =
            self.inputs.into_iter().map(|i| i.execute()).collect();
        async_stream::try_stream! {
            let mut barriers: Vec<Option<Barrier>> = vec![None; inputs.len()];
            let mut start = 0;
            loop {
                let (index, msg) = next_from(&mut inputs, &barriers, &mut start).await;
                let Some(msg) = msg else { break };
                match msg? {
                    Message::Barrier(barrier) => {
                        barriers[index] = Some(barrier);
                        if barriers.iter().all(Option::is_some) {
                            let barrier = barriers[0].take().expect("all inputs delivered it");
                            barriers.iter_mut().for_each(|b| *b = None);
                            yield Message::Barrier(barrier);
                        }
                    }
                    Message::Watermark(_) => {}
                    chunk => yield chunk,
                }
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "UnionExecutor"
    }
}

/// The next item of any input not waiting at a barrier, round robin.
async fn next_from<S: Stream + Unpin>(
    inputs: &mut [S],
    barriers: &[Option<Barrier>],
    start: &mut usize,
) -> (usize, Option<S::Item>) {
    std::future::poll_fn(|cx| {
        let n = inputs.len();
        for k in 0..n {
            let i = (*start + k) % n;
            if barriers[i].is_some() {
                continue;
            }
            if let Poll::Ready(item) = inputs[i].poll_next_unpin(cx) {
                *start = (i + 1) % n;
                return Poll::Ready((i, item));
            }
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use tokio::sync::mpsc;

    use super::*;
    use crate::stream::executor::receiver::ReceiverExecutor;
    use crate::stream::test_utils::{MockSource, Pretty, barrier, chunk, dedent, run};

    /// Everything the union of `inputs` emits.
    async fn union<const N: usize>(inputs: [Vec<Message>; N]) -> String {
        let inputs = inputs.into_iter().map(MockSource::boxed).collect();
        run(Box::new(UnionExecutor::new(inputs))).await
    }

    /// What `stream` emits without waiting for more input.
    fn ready(stream: &mut BoxedMessageStream) -> String {
        let mut out = Vec::new();
        while let Some(msg) = stream.next().now_or_never() {
            out.push(msg.expect("the inputs are open").expect("no error").pretty());
        }
        out.join("\n\n")
    }

    #[tokio::test]
    async fn chunks_from_every_input_come_out() {
        let a = vec![chunk("i\n+ 1"), chunk("i\n+ 2"), barrier(1)];
        let b = vec![chunk("i\n- 10"), barrier(1)];
        let c = vec![chunk("i\nU- 20\nU+ 21"), barrier(1)];
        let expected = "i
                        + 1

                        i
                        - 10

                        i
                        U- 20
                        U+ 21

                        i
                        + 2

                        barrier 1";
        assert_eq!(union([a, b, c]).await, dedent(expected));
    }

    #[tokio::test]
    async fn one_barrier_per_epoch_comes_out_after_every_input_sent_it() {
        // `a` reaches each barrier first; its next chunk waits until `b` reaches it too.
        let a = vec![barrier(1), chunk("i\n+ 1"), barrier(2)];
        let b = vec![chunk("i\n+ 10"), chunk("i\n+ 11"), barrier(1), chunk("i\n+ 12"), barrier(2)];
        let expected = "i
                        + 10

                        i
                        + 11

                        barrier 1

                        i
                        + 1

                        i
                        + 12

                        barrier 2";
        assert_eq!(union([a, b]).await, dedent(expected));
    }

    #[tokio::test]
    async fn an_input_at_a_barrier_is_not_read_until_every_input_sent_it() {
        let (tx_a, rx_a) = mpsc::channel(8);
        let (tx_b, rx_b) = mpsc::channel(8);
        let inputs: Vec<BoxedExecutor> =
            vec![Box::new(ReceiverExecutor::new(rx_a)), Box::new(ReceiverExecutor::new(rx_b))];
        let mut out = Box::new(UnionExecutor::new(inputs)).execute();

        for msg in [chunk("i\n+ 1"), barrier(1), chunk("i\n+ 2")] {
            tx_a.send(msg).await.unwrap();
        }
        assert_eq!(ready(&mut out), "i\n+ 1");
        tx_b.send(chunk("i\n+ 10")).await.unwrap();
        assert_eq!(ready(&mut out), "i\n+ 10");
        tx_b.send(barrier(1)).await.unwrap();
        assert_eq!(ready(&mut out), dedent("barrier 1\n\ni\n+ 2"));
        tx_b.send(barrier(2)).await.unwrap();
        assert_eq!(ready(&mut out), "");
        tx_a.send(barrier(2)).await.unwrap();
        assert_eq!(ready(&mut out), "barrier 2");
    }
}
