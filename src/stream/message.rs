//! What flows between executors: chunks of changes ([`crate::chunk`]), barriers and
//! watermarks.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::physical_plan::PhysicalExpr;
use datafusion::scalar::ScalarValue;
use tokio::sync::mpsc;

use crate::catalog::{ActorId, Epoch, TableId};
pub use crate::chunk::{Op, StreamChunk};

/// The epoch a barrier opens and the one it closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochPair {
    /// The epoch that starts after this barrier.
    pub curr: Epoch,
    /// The epoch this barrier ends; its changes are committed once the barrier is collected.
    pub prev: Epoch,
}

/// Why a barrier was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarrierKind {
    /// The first barrier an actor sees: it only tells the actor its starting epoch. It ends no
    /// epoch and is not collected.
    Initial,
    /// A checkpoint: every actor commits its state for `epoch.prev`.
    Checkpoint,
}

/// The sending end of a channel between two actors.
pub type OutputSender = mpsc::Sender<Message>;

/// The output of an actor to one downstream fragment.
#[derive(Clone)]
pub struct Output {
    /// Expressions over the actor's output rows whose values choose the vnode.
    pub keys: Vec<Arc<dyn PhysicalExpr>>,
    /// One channel per downstream actor; actor `i` of `n` owns [`owned_vnodes`](crate::stream::dispatch::owned_vnodes)`(i, n)`.
    pub senders: Vec<OutputSender>,
    /// Every row goes to every downstream actor (`keys` are not used).
    pub broadcast: bool,
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Output({} keys, {} actors)", self.keys.len(), self.senders.len())
    }
}

/// Changes to the running graph that travel with a barrier; each applies at that barrier.
#[derive(Debug, Clone, Default)]
pub struct Mutation {
    /// New downstream channels: each listed actor sends this barrier, and everything after
    /// it, to its new outputs too. This is how a new job attaches to running upstreams.
    pub add_outputs: HashMap<ActorId, Vec<Output>>,
    /// New backfill rate limits, by job: rows per second per actor, `None` for no limit.
    pub throttle: HashMap<TableId, Option<u64>>,
    /// Actors that stop after this barrier: they commit their state for the epoch it ends,
    /// pass it on, and exit. Their upstreams drop the outputs to them.
    pub stop: HashSet<ActorId>,
    /// Creating jobs whose backfills have finished: their held partial aggregates emit what
    /// they hold (see [`crate::stream::executor::hash_agg`]).
    pub release: HashSet<TableId>,
}

impl Mutation {
    /// True when the mutation changes nothing.
    pub fn is_empty(&self) -> bool {
        self.add_outputs.is_empty()
            && self.throttle.is_empty()
            && self.stop.is_empty()
            && self.release.is_empty()
    }
}

/// A barrier: cuts the stream into epochs.
#[derive(Debug, Clone)]
pub struct Barrier {
    /// Epochs closed and opened by this barrier.
    pub epoch: EpochPair,
    /// Initial or checkpoint.
    pub kind: BarrierKind,
    /// An optional change to the graph applied at this barrier.
    pub mutation: Option<Arc<Mutation>>,
    /// The wall-clock time it was made, in microseconds since 1970-01-01 UTC: what `now()`
    /// is in the epoch it opens (temporal filters read it).
    pub time_us: i64,
}

impl Barrier {
    /// A checkpoint barrier ending `prev` and starting the next epoch.
    pub fn checkpoint(prev: Epoch) -> Self {
        let epoch = EpochPair { curr: prev.next(), prev };
        Self { epoch, kind: BarrierKind::Checkpoint, mutation: None, time_us: wall_clock_us() }
    }

    /// The initial barrier of an actor that starts in epoch `curr` from the state committed at
    /// `committed` (the epoch before `curr`, except after a recovery, whose lost epochs lie
    /// between the two).
    pub fn initial(committed: Epoch, curr: Epoch) -> Self {
        let epoch = EpochPair { curr, prev: committed };
        Self { epoch, kind: BarrierKind::Initial, mutation: None, time_us: wall_clock_us() }
    }

    /// The same barrier made at `time_us` (microseconds since 1970-01-01 UTC).
    pub fn at(mut self, time_us: i64) -> Self {
        self.time_us = time_us;
        self
    }

    /// The same barrier carrying `mutation`.
    pub fn with_mutation(mut self, mutation: Mutation) -> Self {
        self.mutation = Some(Arc::new(mutation));
        self
    }

    /// The outputs this barrier adds to `actor`.
    pub fn added_outputs(&self, actor: ActorId) -> &[Output] {
        match self.mutation.as_deref() {
            Some(m) => m.add_outputs.get(&actor).map_or(&[], Vec::as_slice),
            None => &[],
        }
    }

    /// True if `actor` stops after this barrier.
    pub fn stops(&self, actor: ActorId) -> bool {
        self.mutation.as_deref().is_some_and(|m| m.stop.contains(&actor))
    }

    /// The backfill rate limit this barrier sets for `job`'s backfills, if it sets one.
    pub fn throttle_of(&self, job: TableId) -> Option<Option<u64>> {
        self.mutation.as_deref().and_then(|m| m.throttle.get(&job).copied())
    }

    /// True if this barrier releases the held output of `job`'s partial aggregates.
    pub fn releases(&self, job: TableId) -> bool {
        self.mutation.as_deref().is_some_and(|m| m.release.contains(&job))
    }

    /// True for checkpoint barriers, which end an epoch.
    pub fn is_checkpoint(&self) -> bool {
        self.kind == BarrierKind::Checkpoint
    }
}

/// Microseconds since 1970-01-01 UTC now.
fn wall_clock_us() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| d.as_micros() as i64)
}

/// A promise that no later row has a smaller value in column `col_idx`.
#[derive(Debug, Clone)]
pub struct Watermark {
    /// The column the watermark is on.
    pub col_idx: usize,
    /// The lower bound of future values.
    pub value: ScalarValue,
}

/// The error of an executor other than a materialize that receives [`Message::Truncate`]:
/// only the table's materialize, right below its input, can take one.
pub fn unexpected_truncate(executor: &str) -> crate::error::Error {
    crate::error::Error::Stream(format!(
        "{executor} received a truncate, which only a materialize takes"
    ))
}

/// One item of a stream between executors.
#[derive(Debug, Clone)]
pub enum Message {
    /// Row changes.
    Chunk(StreamChunk),
    /// An epoch boundary.
    Barrier(Barrier),
    /// A progress promise on one column.
    Watermark(Watermark),
    /// Every row of the relation this stream feeds is deleted (an upstream `TRUNCATE` of a
    /// CDC table). Dispatchers send it to every downstream actor; a materialize deletes the
    /// rows of its vnodes and emits their deletes, so nothing below it sees this message.
    Truncate,
}
