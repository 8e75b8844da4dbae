//! Streaming executors, one per file.
//!
//! An executor turns an input stream of [`Message`]s into an output stream. Every executor
//! follows the same order on a barrier: first make the epoch's effects visible in its state
//! tables (commit), then forward the barrier, then do any post-commit work. Chunks are never
//! reordered across a barrier.
//!
//! Every actor's first message is a barrier: it tells the epoch the actor starts in, and the
//! state it loads is the one committed before it. Executors that produce data of their own (a
//! DML, CDC source or CDC backfill executor) emit nothing before their first barrier, so every
//! executor downstream may rely on it (a stream scan after a restart waits for that barrier's
//! epoch to be committed before it reads).

pub mod backfill;
pub mod cdc_source;
pub mod dml;
pub mod filter;
pub mod gate;
pub mod hash_agg;
pub mod hash_join;
pub mod left_join;
pub mod materialize;
pub mod merge;
pub mod project;
pub mod receiver;
pub mod union;

use futures::StreamExt;
use futures::stream::BoxStream;

use crate::error::{Error, Result};
use crate::stream::message::{Barrier, Message};

/// The output of an executor.
pub type BoxedMessageStream = BoxStream<'static, Result<Message>>;

/// A streaming operator.
pub trait Executor: Send + 'static {
    /// Starts the executor; the stream ends when its input ends.
    fn execute(self: Box<Self>) -> BoxedMessageStream;

    /// A short name for logs.
    fn identity(&self) -> &str;
}

/// A type-erased executor.
pub type BoxedExecutor = Box<dyn Executor>;

/// The first message of `input`, which must be a barrier (see the module docs).
pub async fn first_barrier(input: &mut BoxedMessageStream, who: &str) -> Result<Barrier> {
    match input.next().await {
        Some(Ok(Message::Barrier(b))) => Ok(b),
        Some(Ok(_)) => Err(Error::Stream(format!("{who} received data before its first barrier"))),
        Some(Err(e)) => Err(e),
        None => Err(Error::Shutdown),
    }
}
