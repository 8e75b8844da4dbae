//! CDC sources: the one reader of each upstream's change log ([`postgres`]: a replication slot;
//! [`mysql`]: the binlog), the change rows both emit ([`change`]), where they record their
//! position ([`offset_table`]) and how they wait after a failure ([`backoff`]).

/// The wait before a reader tries its upstream again.
pub mod backoff;
/// The change rows a source emits, shared by both upstreams and read by the CDC backfills.
pub mod change;
/// A mysql-cdc source's shared change stream, read from the upstream's binlog.
pub mod mysql;
/// Where a source records its upstream position at each checkpoint.
pub mod offset_table;
/// A postgres-cdc source's shared change stream, polled from the upstream's slot.
pub mod postgres;
