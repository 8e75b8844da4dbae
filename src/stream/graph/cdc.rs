//! The jobs of sources and CDC tables.
//!
//! A source runs one actor, the slot reader. A CDC table runs a `cdc backfill` actor fed by the
//! source actor's output, hash-dispatching to the table's materialize fragment (upsert mode);
//! its job attaches to the source at the next checkpoint, like a view's job attaches to its
//! upstreams.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};

use crate::catalog::{ActorId, CdcTableInfo, ColumnCatalog, SourceCatalog, TableCatalog, TableId};
use crate::connector::common::UpstreamTable;
use crate::connector::source::SourceConfig;
use crate::error::{Error, Result};
use crate::stream::executor::backfill::cdc::{CdcBackfillConfig, CdcBackfillExecutor};
use crate::stream::executor::backfill::status::{BackfillStatus, BackfillWatch};
use crate::stream::executor::receiver::ReceiverExecutor;
use crate::stream::executor::source::{self, ReaderParts};
use crate::stream::graph::StreamGraph;
use crate::stream::graph::build::CHANNEL_CAPACITY;
use crate::stream::graph::job::PreparedJob;
use crate::stream::message::Output;
use crate::types::DataType;

/// Columns dropped upstream, or added after the ones a CDC table declared `(*)` reads, as its
/// backfill found them in the source's description of the table; the recovery that the
/// backfill asks for by failing changes the table before the jobs run again.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnChange {
    /// The CDC table.
    pub table: TableId,
    /// Where the description came: changes from here on have the columns it names.
    pub position: u64,
    /// The upstream columns dropped (indices into the table's upstream columns).
    pub dropped: Vec<usize>,
    /// The names of the columns added, after the others.
    pub added: Vec<String>,
    /// Columns retyped in a way the table follows (text to text, a number widened), with
    /// the new type as printed and the Sluice type that holds it.
    pub retyped: Vec<crate::stream::executor::backfill::upstream_guard::Retype>,
}

/// `ALTER TABLE .. RESNAPSHOT` of a CDC table, for the next recovery.
#[derive(Debug)]
pub struct Resnapshot {
    /// The CDC table.
    pub table: TableId,
    /// The upstream table's identity now (its columns checked to be the ones the table reads):
    /// a table dropped and created again upstream is read as the table's upstream from now on.
    pub identity: Option<String>,
    /// The upstream's position when it was asked for: every page of the snapshot reads after it.
    pub from: u64,
    /// Fires once the jobs run again.
    pub done: oneshot::Sender<()>,
}

/// What the next recovery changes of CDC tables before it rebuilds their jobs: columns found
/// dropped or added upstream ([`ColumnChange`]), and tables to read again (`ALTER TABLE .. RESNAPSHOT`,
/// each with whom to tell once the jobs run again).
#[derive(Debug, Default)]
pub struct CdcRebuilds {
    changed: parking_lot::Mutex<Vec<ColumnChange>>,
    resnapshots: parking_lot::Mutex<Vec<Resnapshot>>,
    /// Sources whose every table reads its snapshot again (their position was lost upstream).
    sources: parking_lot::Mutex<Vec<TableId>>,
    /// Who waits for the jobs to run again with the changes made (`RESNAPSHOT` statements).
    waiting: parking_lot::Mutex<Vec<oneshot::Sender<()>>>,
}

impl CdcRebuilds {
    /// Records `change` (once per table: the first description with changed columns counts).
    pub fn push_change(&self, change: ColumnChange) {
        let mut pending = self.changed.lock();
        if !pending.iter().any(|p| p.table == change.table) {
            pending.push(change);
        }
    }

    /// Takes every recorded change of columns.
    pub fn take_changes(&self) -> Vec<ColumnChange> {
        std::mem::take(&mut self.changed.lock())
    }

    /// Asks for a table's snapshot to be read again.
    pub fn push_resnapshot(&self, resnapshot: Resnapshot) {
        self.resnapshots.lock().push(resnapshot);
    }

    /// Asks for every table of `source` to read its snapshot again.
    pub fn push_source_resnapshot(&self, source: TableId) {
        let mut sources = self.sources.lock();
        if !sources.contains(&source) {
            sources.push(source);
        }
    }

    /// Takes every source whose tables read their snapshots again.
    pub fn take_source_resnapshots(&self) -> Vec<TableId> {
        std::mem::take(&mut self.sources.lock())
    }

    /// `done` fires once the jobs run again, after a rebuild that failed if need be.
    pub fn push_waiting(&self, done: oneshot::Sender<()>) {
        self.waiting.lock().push(done);
    }

    /// Tells everyone waiting that the jobs run again.
    pub fn jobs_run_again(&self) {
        for done in std::mem::take(&mut *self.waiting.lock()) {
            let _ = done.send(());
        }
    }

    /// Takes every requested resnapshot.
    pub fn take_resnapshots(&self) -> Vec<Resnapshot> {
        std::mem::take(&mut self.resnapshots.lock())
    }
}

impl StreamGraph {
    /// Builds the slot-reader job of a source.
    pub fn prepare_source_job(&self, source: &SourceCatalog) -> Result<PreparedJob> {
        let state = self.catalog.table_by_id(source.state_table).ok_or_else(|| {
            Error::Storage(format!("the state table of source {} is missing", source.name))
        })?;
        let actor = self.new_actor_id();
        let (barrier_tx, barrier_rx) = mpsc::unbounded_channel();
        let parts = ReaderParts {
            barriers: barrier_rx,
            store: self.store.clone(),
            state,
            barrier: self.barrier.clone(),
            metrics: self.metrics.clone(),
            rebuilds: self.cdc_rebuilds.clone(),
        };
        let reader = source::reader(source, parts)?;
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
        let upstream = upstream_table(cdc, table);
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
            upstream_identity: cdc.upstream_identity.clone(),
            metrics: self.metrics.clone(),
            follow_columns: cdc.follow_columns,
            columns_since: cdc.columns_since.clone(),
            dropped: cdc.dropped.clone(),
            retyped: cdc.retyped.clone(),
            stop_at_schema_change: cdc.stop_at_schema_change,
            overwrite: cdc.resnapshot_from.is_some(),
            truncates_from: cdc.resnapshot_from.unwrap_or(0),
            rebuilds: self.cdc_rebuilds.clone(),
        };
        let backfill = CdcBackfillExecutor::new(
            Box::new(ReceiverExecutor::new(rx)),
            self.store.clone(),
            config,
            status,
        );
        let actor = self.new_actor_id();
        let mut job = PreparedJob::single(table.id, actor, Box::new(backfill), None);
        job.outputs.insert(
            source_actor,
            vec![Output { keys: Vec::new(), senders: vec![tx], broadcast: false }],
        );
        job.backfills.push(watch);
        job.absorb(self.prepare_materialize_fragment(table, actor, true));
        job.feeder = Some(actor);
        Ok(job)
    }
}

/// The upstream table a CDC table reads. Each upstream column is read as the type of the table
/// column it fills, so a Postgres page arrives typed (binary `COPY`) rather than as text to be
/// parsed; a column the table does not hold, or holds as `varchar`, is read as text.
/// The upstream table `table` follows, as its catalog entry records it (each column typed as
/// the table holds it; text for those it leaves out).
pub fn upstream_table(cdc: &CdcTableInfo, table: &TableCatalog) -> UpstreamTable {
    let column_type = |u: usize| {
        let filled = cdc.upstream_columns.iter().position(|&c| c == u);
        filled.map_or(DataType::Varchar, |c| table.columns[c].data_type)
    };
    UpstreamTable {
        schema: cdc.schema.clone(),
        name: cdc.table.clone(),
        columns: cdc
            .upstream_names
            .iter()
            .enumerate()
            .map(|(u, n)| ColumnCatalog::new(n.clone(), column_type(u)))
            .collect(),
        upstream_types: cdc.upstream_types.clone(),
        pk: cdc.upstream_pk.clone(),
        // Learnt from the upstream at the backfill's first check (see `UpstreamGuard`).
        type_ids: Vec::new(),
        dropped: cdc.dropped.iter().map(|&(_, u)| u).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connector::postgres::copy::Wire;

    #[test]
    fn upstream_columns_are_read_as_the_types_the_table_holds() {
        // Upstream `(id bigint, a integer, note text, extra integer)`; the table holds `id`,
        // `a` as varchar and `note`, and leaves `extra` out.
        let columns = vec![
            ColumnCatalog::new("id", DataType::Int64),
            ColumnCatalog::new("a", DataType::Varchar),
            ColumnCatalog::new("note", DataType::Varchar),
        ];
        let table =
            TableCatalog::new_table(TableId(7), "t".into(), columns, vec![0], String::new());
        let cdc = CdcTableInfo {
            source: TableId(1),
            schema: "public".into(),
            table: "t".into(),
            upstream_columns: vec![0, 1, 2],
            upstream_names: ["id", "a", "note", "extra"].map(String::from).to_vec(),
            upstream_types: ["bigint", "integer", "text", "integer"].map(String::from).to_vec(),
            upstream_pk: vec![0],
            batch_size: 1000,
            snapshot: true,
            parallelism: 1,
            rows_per_split: None,
            private_source: false,
            upstream_identity: None,
            follow_columns: false,
            columns_since: Vec::new(),
            resnapshot_from: None,
            dropped: Vec::new(),
            retyped: Vec::new(),
            pinned: Vec::new(),
            stop_at_schema_change: false,
        };
        let upstream = upstream_table(&cdc, &table);
        let wires = upstream.wires();
        assert_eq!(wires, [Wire::Int8, Wire::Text, Wire::Text, Wire::Text]);
        let text_cast: Vec<bool> = wires
            .iter()
            .zip(&upstream.upstream_types)
            .map(|(w, ty)| w.needs_text_cast(ty))
            .collect();
        assert_eq!(text_cast, [false, true, false, true]);
    }
}
