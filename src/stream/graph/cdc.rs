//! The jobs of sources and CDC tables.
//!
//! A source runs one actor, the slot reader. A CDC table runs a `cdc backfill` actor fed by the
//! source actor's output, hash-dispatching to the table's materialize fragment (upsert mode);
//! its job attaches to the source at the next checkpoint, like a view's job attaches to its
//! upstreams.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use crate::catalog::{ActorId, ColumnCatalog, SourceCatalog, TableCatalog};
use crate::connector::pg_reader::UpstreamTable;
use crate::connector::upstream::SourceConfig;
use crate::error::{Error, Result};
use crate::stream::dispatch::Output;
use crate::stream::executor::BoxedExecutor;
use crate::stream::executor::backfill::cdc::{CdcBackfillConfig, CdcBackfillExecutor};
use crate::stream::executor::backfill::status::{BackfillStatus, BackfillWatch};
use crate::stream::executor::binlog_source::BinlogSourceExecutor;
use crate::stream::executor::cdc_source::CdcSourceExecutor;
use crate::stream::executor::receiver::ReceiverExecutor;
use crate::stream::graph::StreamGraph;
use crate::stream::graph::build::CHANNEL_CAPACITY;
use crate::stream::graph::job::PreparedJob;
use crate::types::DataType;

impl StreamGraph {
    /// Builds the slot-reader job of a source.
    pub fn prepare_source_job(&self, source: &SourceCatalog) -> Result<PreparedJob> {
        let state = self.catalog.table_by_id(source.state_table).ok_or_else(|| {
            Error::Storage(format!("the state table of source {} is missing", source.name))
        })?;
        let actor = self.new_actor_id();
        let (barrier_tx, barrier_rx) = mpsc::unbounded_channel();
        let metrics = (source.name.clone(), self.metrics.clone());
        let reader: BoxedExecutor = match SourceConfig::from_options(&source.name, &source.options)?
        {
            SourceConfig::Postgres(config) => Box::new(
                CdcSourceExecutor::new(
                    barrier_rx,
                    config,
                    self.store.clone(),
                    state,
                    self.barrier.clone(),
                )
                .with_metrics(metrics.0, metrics.1),
            ),
            SourceConfig::MySql(config) => Box::new(BinlogSourceExecutor::new(
                barrier_rx,
                config,
                self.store.clone(),
                state,
                self.barrier.clone(),
                metrics,
            )),
        };
        Ok(PreparedJob::single(source.id, actor, reader, Some(barrier_tx)))
    }

    /// Builds the job of a CDC table, reading from `source_actor`.
    pub fn prepare_cdc_table_job(
        &self,
        table: &Arc<TableCatalog>,
        source_actor: ActorId,
    ) -> Result<PreparedJob> {
        let cdc = table.cdc.as_ref().expect("a CDC table");
        let source =
            self.catalog.sources().into_iter().find(|s| s.id == cdc.source).ok_or_else(|| {
                Error::Storage(format!("the source of {} is missing", table.name))
            })?;
        let state = self.catalog.table_by_id(table.internal_tables[0]).ok_or_else(|| {
            Error::Storage(format!("the state table of {} is missing", table.name))
        })?;
        let upstream = UpstreamTable {
            schema: cdc.schema.clone(),
            name: cdc.table.clone(),
            columns: cdc
                .upstream_names
                .iter()
                .map(|n| ColumnCatalog::new(n.clone(), DataType::Varchar))
                .collect(),
            upstream_types: cdc.upstream_types.clone(),
            pk: cdc.upstream_pk.clone(),
        };
        let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
        let (status, watcher) = watch::channel(BackfillStatus::default());
        let watch = BackfillWatch {
            state_table: state.id,
            upstream: format!("{}.{}", cdc.schema, cdc.table),
            status: watcher,
        };
        let config = CdcBackfillConfig {
            source: SourceConfig::from_options(&source.name, &source.options)?,
            upstream,
            table: table.clone(),
            upstream_columns: cdc.upstream_columns.clone(),
            state,
            batch_size: cdc.batch_size,
            snapshot: cdc.snapshot,
            barrier: self.barrier.clone(),
            rate_limit: table.backfill_rate_limit,
            parallelism: cdc.parallelism,
            rows_per_split: cdc.rows_per_split,
        };
        let backfill = CdcBackfillExecutor::new(
            Box::new(ReceiverExecutor::new(rx)),
            self.store.clone(),
            config,
            status,
        );
        let actor = self.new_actor_id();
        let mut job = PreparedJob::single(table.id, actor, Box::new(backfill), None);
        job.outputs.insert(source_actor, vec![Output { keys: Vec::new(), senders: vec![tx] }]);
        job.backfills.push(watch);
        job.absorb(self.prepare_materialize_fragment(table, actor, true));
        job.feeder = Some(actor);
        Ok(job)
    }
}
