//! The backfills: executors that read data which existed before their job (a snapshot) while
//! they merge the changes that keep arriving, and persist their progress at every checkpoint.
//!
//! - [`arrangement`]: a view's stream scan, reading the upstream table's stored rows per vnode;
//! - [`cdc`]: a CDC table's snapshot of its upstream table, merged with the change stream;
//! - [`state`]: the progress state tables both persist (their schemas, in one place);
//! - [`status`]: what a running backfill reports (rows, rate, finished), for progress views.

pub mod arrangement;
pub mod cdc;
pub mod state;
pub mod status;

use crate::storage::store::Store;

/// Snapshot rows an epoch reads before it looks at what it has written. Everything an epoch
/// writes stays in memory until its checkpoint; an epoch past [`EPOCH_ROWS`] whose writes (of
/// every state table not yet committed) take [`EPOCH_BYTES`], or that has read
/// [`EPOCH_ROWS_MAX`], is full ([`epoch_full`]): the backfill asks for the next checkpoint early
/// instead of waiting out the barrier interval. So the memory of a backfill stays bounded
/// whatever the table size, and a backfill whose state grows slower than its input (an
/// aggregate with few groups rewritten at each epoch) reads in fewer, larger epochs; a
/// committed epoch large enough is ingested as one file, and larger files mean fewer
/// compactions of them.
pub const EPOCH_ROWS: usize = 64 * 1024;

/// See [`EPOCH_ROWS`].
pub const EPOCH_BYTES: usize = 32 << 20;

/// See [`EPOCH_ROWS`]. Rarely what ends an epoch: one second of reading at the backfill
/// barrier interval is fewer rows. At 1 M, a view aggregating its input into many groups
/// (eager aggregation's 100 k partial groups) ended its epochs here, and each epoch sent every
/// group through the final phase again (docs/benchmarks.md, "Epochs of up to 4 M rows").
pub const EPOCH_ROWS_MAX: usize = 4 << 20;

/// True when an epoch that has read `rows` snapshot rows is full (see [`EPOCH_ROWS`]).
pub fn epoch_full(rows: usize, store: &Store) -> bool {
    rows >= EPOCH_ROWS_MAX || (rows >= EPOCH_ROWS && store.uncommitted_bytes() >= EPOCH_BYTES)
}
