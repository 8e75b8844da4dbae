//! The backfills: executors that read data which existed before their job (a snapshot) while
//! they merge the changes that keep arriving, and persist their progress at every checkpoint.
//!
//! - [`arrangement`]: a view's stream scan, reading the upstream table's stored rows per vnode;
//! - [`cdc`]: a CDC table's snapshot of its upstream table, merged with the change stream;
//! - [`order`]: the gates that hold a view's scan back until those it waits for have read;
//! - [`state`]: the progress state tables both persist (their schemas, in one place);
//! - [`status`]: what a running backfill reports (rows, rate, finished), for progress views.

pub mod arrangement;
pub mod cdc;
pub mod order;
pub mod state;
pub mod status;
pub mod upstream_guard;

use crate::storage::store::Store;

/// Snapshot rows an epoch reads before it looks at what it holds. Everything an epoch writes
/// stays in memory until its checkpoint; an epoch past [`EPOCH_ROWS`] whose writes (of every
/// state table not yet committed) and operators' groups ([`EpochMemory`]) take [`EPOCH_BYTES`]
/// is full ([`epoch_full`]): the backfill asks for the next checkpoint early instead of waiting
/// out the barrier interval. So the memory of a backfill stays bounded whatever the table
/// size, and a backfill whose state grows slower than its input (an aggregate with few groups
/// rewritten at each epoch) reads in fewer, larger epochs, up to one backfill interval long; a
/// committed epoch large enough is ingested as one file, and larger files mean fewer
/// compactions of them.
///
/// Rows read are no bound of their own: an epoch that reads many rows and holds little (an
/// eager aggregation's 100 k partial groups) ends with the interval, and each epoch less is
/// every group sent through the final phase once less (docs/benchmarks-history.md, "Epochs sized by
/// memory").
///
/// [`EpochMemory`]: crate::storage::store::EpochMemory
pub const EPOCH_ROWS: usize = 64 * 1024;

/// See [`EPOCH_ROWS`].
pub const EPOCH_BYTES: usize = 32 << 20;

/// True when an epoch that has read `rows` snapshot rows is full (see [`EPOCH_ROWS`]).
pub fn epoch_full(rows: usize, store: &Store) -> bool {
    rows >= EPOCH_ROWS && store.uncommitted_bytes() >= EPOCH_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::store::EpochMemory;

    #[test]
    fn an_epoch_is_full_by_what_it_holds_not_by_the_rows_it_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // However many rows it read, an epoch holding nothing goes on to the interval.
        assert!(!epoch_full(1 << 30, &store));
        // An aggregate's groups count as what it holds.
        let mut groups = EpochMemory::new(store.clone());
        groups.add(EPOCH_BYTES);
        assert!(!epoch_full(EPOCH_ROWS - 1, &store), "reads its first rows whatever it holds");
        assert!(epoch_full(EPOCH_ROWS, &store));
        // Given back when the groups are staged (or the actor stops).
        drop(groups);
        assert_eq!(store.uncommitted_bytes(), 0);
        assert!(!epoch_full(EPOCH_ROWS, &store));
    }
}
