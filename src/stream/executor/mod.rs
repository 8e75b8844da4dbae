//! Streaming executors, one per file.
//!
//! An executor turns an input stream of [`Message`]s into an output stream. Every executor
//! follows the same order on a barrier: first make the epoch's effects visible in its state
//! tables (commit), then forward the barrier, then do any post-commit work. Chunks are never
//! reordered across a barrier.

pub mod arrangement_backfill;
pub mod cdc_backfill;
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

use futures::stream::BoxStream;

use crate::error::Result;
use crate::stream::message::Message;

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
