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

/// The backfills (a view's stream scan, a CDC table's snapshot) and their progress state.
pub mod backfill;
/// A table's input: DML statements' chunks, each in the epoch it is sent in.
pub mod dml;
/// Comparisons with a one-row subquery whose value changes: `WHERE a > (SELECT ..)`.
pub mod dynamic_filter;
/// Keeps the rows a predicate holds for.
pub mod filter;
/// Holds an actor's input after its first barrier until that barrier's epoch is committed.
pub mod gate;
/// Grouped aggregation with retractions (count, sum, avg, min, max).
pub mod hash_agg;
/// Inner and left outer equi-joins.
pub mod hash_join;
/// The first phase of a two-phase aggregation: per-actor partial groups before the exchange.
pub mod local_agg;
/// Writes a relation's rows to its state table (upserts for CDC tables).
pub mod materialize;
/// Merges the channels of several upstream actors, aligning barriers.
pub mod merge;
/// Window functions kept exact as their partitions change.
pub mod over_window;
/// Computes output columns.
pub mod project;
/// Reads one upstream actor's channel.
pub mod receiver;
/// CDC sources: each upstream's one reader, the change rows they emit, their offsets.
pub mod source;
/// Conditions on `now()`: rows that leave or enter a view as time passes.
pub mod temporal_filter;
/// The first rows of an order, per group or overall (`ORDER BY .. LIMIT`, `row_number() <= n`).
pub mod top_n;
/// UNION ALL of several inputs, aligning barriers.
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
