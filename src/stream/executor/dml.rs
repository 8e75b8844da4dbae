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
use crate::stream::message::{Barrier, Message, StreamChunk};

/// One statement's changes to a table.
pub struct DmlRequest {
    /// The changes, applied in order.
    pub chunks: Vec<StreamChunk>,
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
                        for chunk in request.chunks {
                            yield Message::Chunk(chunk);
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
