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
