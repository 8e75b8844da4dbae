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

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::catalog::{SourceCatalog, TableCatalog};
use crate::connector::source::SourceConfig;
use crate::error::Result;
use crate::metrics::Metrics;
use crate::storage::store::Store;
use crate::stream::barrier::BarrierHandle;
use crate::stream::executor::BoxedExecutor;
use crate::stream::message::Barrier;

/// What a source's reader is built from besides its upstream's settings.
pub struct ReaderParts {
    /// The barriers injected into the reader.
    pub barriers: mpsc::UnboundedReceiver<Barrier>,
    /// The store its offset table lives in.
    pub store: Arc<Store>,
    /// Its offset table ([`offset_table`]).
    pub state: Arc<TableCatalog>,
    /// The barrier manager, to learn when its epochs commit.
    pub barrier: BarrierHandle,
    /// Where it reports (the source's name and the metrics registry).
    pub metrics: Arc<Metrics>,
    /// Where a lost position asks for the source's tables to be read again.
    pub rebuilds: Arc<crate::stream::graph::cdc::CdcRebuilds>,
}

/// The reader of `source`'s change log: a slot reader for postgres-cdc, a binlog reader for
/// mysql-cdc.
pub fn reader(source: &SourceCatalog, parts: ReaderParts) -> Result<BoxedExecutor> {
    let ReaderParts { barriers, store, state, barrier, metrics, rebuilds } = parts;
    Ok(match SourceConfig::from_options(&source.name, &source.options)? {
        SourceConfig::Postgres(config) => Box::new(
            postgres::CdcSourceExecutor::new(barriers, config, store, state, barrier)
                .with_metrics(source.name.clone(), metrics)
                .with_rebuilds(source.id, rebuilds),
        ),
        SourceConfig::MySql(config) => Box::new(
            mysql::BinlogSourceExecutor::new(
                barriers,
                config,
                store,
                state,
                barrier,
                (source.name.clone(), metrics),
            )
            .starting_at(source.start.clone())
            .with_rebuilds(source.id, rebuilds),
        ),
    })
}
