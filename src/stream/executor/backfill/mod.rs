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
