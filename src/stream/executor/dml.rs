//! `DmlExecutor`: the source of a table's stream.
//!
//! It merges the barriers injected by the barrier manager with the statements users run against
//! the table. A statement's chunks are emitted back to back, with no barrier in between, so a
//! statement is always committed whole. The statement learns the epoch its chunks belong to, and
//! returns to the user once that epoch is committed.

use futures::StreamExt;
use tokio::sync::{mpsc, oneshot};

use crate::catalog::Epoch;
use crate::error::Error;
use crate::stream::executor::{BoxedMessageStream, Executor};
use crate::stream::message::{Barrier, Message};

/// One statement's changes to a table.
pub struct DmlRequest {
    /// The changes, applied in order: chunks, or [`Message::Truncate`] for `TRUNCATE`.
    pub changes: Vec<Message>,
    /// Receives the epoch that holds the changes.
    pub reply: oneshot::Sender<Epoch>,
}

/// Emits barriers and DML chunks for one table.
pub struct DmlExecutor {
    barriers: mpsc::UnboundedReceiver<Barrier>,
    requests: mpsc::Receiver<DmlRequest>,
}

impl DmlExecutor {
    /// An executor fed by the barrier manager and by the table's DML channel.
    pub fn new(
        barriers: mpsc::UnboundedReceiver<Barrier>,
        requests: mpsc::Receiver<DmlRequest>,
    ) -> Self {
        Self { barriers, requests }
    }
}

enum Event {
    Barrier(Option<Barrier>),
    Request(DmlRequest),
}

/// Waits for the next barrier or statement; barriers go first when both are ready.
async fn next_event(
    barriers: &mut mpsc::UnboundedReceiver<Barrier>,
    requests: &mut mpsc::Receiver<DmlRequest>,
) -> Event {
    tokio::select! {
        biased;
        barrier = barriers.recv() => Event::Barrier(barrier),
        Some(request) = requests.recv() => Event::Request(request),
    }
}

impl Executor for DmlExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { mut barriers, mut requests } = *self;
        async_stream::try_stream! {
            // Nothing is accepted before the initial barrier says which epoch we are in.
            let first = barriers.recv().await.ok_or(Error::Shutdown)?;
            let mut epoch = first.epoch.curr;
            yield Message::Barrier(first);
            loop {
                match next_event(&mut barriers, &mut requests).await {
                    // The barrier manager dropped us: the table is being dropped.
                    Event::Barrier(None) => break,
                    Event::Barrier(Some(barrier)) => {
                        epoch = barrier.epoch.curr;
                        yield Message::Barrier(barrier);
                    }
                    Event::Request(request) => {
                        for change in request.changes {
                            yield change;
                        }
                        // The statement may have given up waiting; its chunks still commit.
                        let _ = request.reply.send(epoch);
                    }
                }
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "DmlExecutor"
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use tokio::sync::oneshot::error::TryRecvError;

    use super::*;
    use crate::stream::message::StreamChunk;
    use crate::stream::test_utils::{Pretty, dedent, run};

    /// A running DML executor, fed one input at a time.
    struct Dml {
        barriers: mpsc::UnboundedSender<Barrier>,
        requests: mpsc::Sender<DmlRequest>,
        out: BoxedMessageStream,
    }

    impl Dml {
        fn start() -> Self {
            let (barriers, barrier_rx) = mpsc::unbounded_channel();
            let (requests, request_rx) = mpsc::channel(16);
            let out = Box::new(DmlExecutor::new(barrier_rx, request_rx)).execute();
            Self { barriers, requests, out }
        }

        /// Sends the checkpoint barrier ending epoch `prev`.
        fn barrier(&self, prev: u64) {
            self.barriers.send(Barrier::checkpoint(Epoch(prev))).unwrap();
        }

        /// Sends a statement of `chunks` (text tables); the receiver learns its epoch.
        fn request(&self, chunks: &[&str]) -> oneshot::Receiver<Epoch> {
            let (reply, epoch) = oneshot::channel();
            let changes =
                chunks.iter().map(|c| Message::Chunk(StreamChunk::from_pretty(c))).collect();
            self.requests.try_send(DmlRequest { changes, reply }).unwrap();
            epoch
        }

        /// The next message, if the executor has one without waiting for more input.
        fn next(&mut self) -> Option<String> {
            match self.out.next().now_or_never() {
                Some(Some(message)) => Some(message.unwrap().pretty()),
                Some(None) => Some("end".into()),
                None => None,
            }
        }

        /// Everything the executor emits before it waits for more input, as text (see
        /// [`Pretty`]); `end` when its stream ended, empty for nothing.
        fn emitted(&mut self) -> String {
            let mut out = Vec::new();
            while let Some(message) = self.next() {
                let end = message == "end";
                out.push(message);
                if end {
                    break;
                }
            }
            out.join("\n\n")
        }
    }

    /// What a statement learned: `epoch <n>`, `waiting` or `dropped`.
    fn reply(epoch: &mut oneshot::Receiver<Epoch>) -> String {
        match epoch.try_recv() {
            Ok(epoch) => format!("epoch {}", epoch.0),
            Err(TryRecvError::Empty) => "waiting".into(),
            Err(TryRecvError::Closed) => "dropped".into(),
        }
    }

    #[tokio::test]
    async fn nothing_is_emitted_before_the_first_barrier() {
        let mut dml = Dml::start();
        let mut epoch = dml.request(&["i\n+ 1"]);
        assert_eq!(dml.emitted(), "");
        assert_eq!(reply(&mut epoch), "waiting");
        dml.barrier(1);
        assert_eq!(dml.emitted(), dedent("barrier 1\n\ni\n+ 1"));
        assert_eq!(reply(&mut epoch), "epoch 2");
    }

    #[tokio::test]
    async fn without_a_first_barrier_the_stream_fails_with_shutdown() {
        let (barriers, barrier_rx) = mpsc::unbounded_channel::<Barrier>();
        let (_requests, request_rx) = mpsc::channel(16);
        drop(barriers);
        let out = run(Box::new(DmlExecutor::new(barrier_rx, request_rx))).await;
        assert_eq!(out, "error: the server is shutting down");
    }

    #[tokio::test]
    async fn a_statement_comes_out_in_the_epoch_it_was_sent_in_and_learns_it() {
        let mut dml = Dml::start();
        dml.barrier(1);
        assert_eq!(dml.emitted(), "barrier 1");
        let mut epoch = dml.request(&["i T\n+ 1 a\n- 2 b"]);
        assert_eq!(dml.emitted(), "i T\n+ 1 a\n- 2 b");
        assert_eq!(reply(&mut epoch), "epoch 2");
    }

    #[tokio::test]
    async fn statements_and_barriers_interleave_in_the_order_sent() {
        let mut dml = Dml::start();
        dml.barrier(1);
        assert_eq!(dml.emitted(), "barrier 1");
        let mut first = dml.request(&["i\n+ 1"]);
        let mut second = dml.request(&["i\n+ 2"]);
        assert_eq!(dml.emitted(), dedent("i\n+ 1\n\ni\n+ 2"));
        dml.barrier(2);
        assert_eq!(dml.emitted(), "barrier 2");
        let mut third = dml.request(&["i\n- 1"]);
        assert_eq!(dml.emitted(), "i\n- 1");
        let replies = [reply(&mut first), reply(&mut second), reply(&mut third)];
        assert_eq!(replies, ["epoch 2", "epoch 2", "epoch 3"]);
    }

    #[tokio::test]
    async fn a_barrier_ready_together_with_a_statement_goes_first() {
        let mut dml = Dml::start();
        dml.barrier(1);
        assert_eq!(dml.emitted(), "barrier 1");
        let mut epoch = dml.request(&["i\n+ 1"]);
        dml.barrier(2);
        assert_eq!(dml.emitted(), dedent("barrier 2\n\ni\n+ 1"));
        assert_eq!(reply(&mut epoch), "epoch 3");
    }

    #[tokio::test]
    async fn a_statement_is_never_split_by_a_barrier() {
        let mut dml = Dml::start();
        dml.barrier(1);
        assert_eq!(dml.emitted(), "barrier 1");
        let mut epoch = dml.request(&["i\n+ 1", "i i\nU- 1 10\nU+ 1 11", "i\n- 2"]);
        assert_eq!(dml.next().as_deref(), Some("i\n+ 1"));
        // The barrier arrives while the statement is half emitted: it waits for the rest.
        dml.barrier(2);
        let expected = "i i
                        U- 1 10
                        U+ 1 11

                        i
                        - 2

                        barrier 2";
        assert_eq!(dml.emitted(), dedent(expected));
        assert_eq!(reply(&mut epoch), "epoch 2");
    }

    #[tokio::test]
    async fn a_statement_learns_its_epoch_once_its_last_chunk_is_taken() {
        let mut dml = Dml::start();
        dml.barrier(1);
        assert_eq!(dml.emitted(), "barrier 1");
        let mut epoch = dml.request(&["i\n+ 1", "i\n+ 2"]);
        assert_eq!(dml.next().as_deref(), Some("i\n+ 1"));
        assert_eq!(dml.next().as_deref(), Some("i\n+ 2"));
        assert_eq!(reply(&mut epoch), "waiting");
        assert_eq!(dml.emitted(), "");
        assert_eq!(reply(&mut epoch), "epoch 2");
    }

    #[tokio::test]
    async fn a_statement_without_chunks_emits_nothing_and_learns_its_epoch() {
        let mut dml = Dml::start();
        dml.barrier(1);
        let mut epoch = dml.request(&[]);
        assert_eq!(dml.emitted(), "barrier 1");
        assert_eq!(reply(&mut epoch), "epoch 2");
    }

    #[tokio::test]
    async fn a_statement_that_stopped_waiting_is_still_emitted() {
        let mut dml = Dml::start();
        dml.barrier(1);
        drop(dml.request(&["i\n+ 1"]));
        assert_eq!(dml.emitted(), dedent("barrier 1\n\ni\n+ 1"));
        // The executor goes on with the next input.
        dml.barrier(2);
        assert_eq!(dml.emitted(), "barrier 2");
    }

    #[tokio::test]
    async fn closing_the_statement_channel_leaves_barriers_flowing() {
        let mut dml = Dml::start();
        dml.barrier(1);
        dml.requests = mpsc::channel(1).0;
        dml.barrier(2);
        assert_eq!(dml.emitted(), dedent("barrier 1\n\nbarrier 2"));
    }

    #[tokio::test]
    async fn dropping_the_barrier_channel_ends_the_stream_and_drops_pending_statements() {
        let mut dml = Dml::start();
        dml.barrier(1);
        assert_eq!(dml.emitted(), "barrier 1");
        let mut epoch = dml.request(&["i\n+ 1"]);
        // The barrier manager drops the channel when the table is dropped.
        dml.barriers = mpsc::unbounded_channel().0;
        assert_eq!(dml.emitted(), "end");
        assert_eq!(reply(&mut epoch), "dropped");
    }
}
