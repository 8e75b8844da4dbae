//! `CdcBackfillExecutor`: a CDC table's input, merging the upstream snapshot with its changes.
//!
//! The snapshot is read in pages in primary-key order (`WHERE (pk) > (cursor) ORDER BY pk
//! LIMIT batch_size`); before each page the upstream's current WAL position is noted as the
//! page's low offset. A change arriving from the source (already committed upstream) is
//! - applied ahead of the snapshot if its key is beyond the cursor: a later page reads the row
//!   as it is then and overwrites it ([`CdcBackfill::apply_ahead`],
//!   [`CdcBackfill::overwrite_ahead`]; `docs/cdc.md`, "Rows ahead of the cursor");
//! - dropped if its key was read by a page whose low offset is above the change's LSN: that
//!   page's snapshot already holds it;
//! - emitted otherwise (the row was read before the change happened).
//!
//! Changes carry whole rows, so applying one that a page's snapshot already held (it committed
//! between the low offset and the page's query) is harmless: the table materializes them as
//! upserts. Pages whose low offset is below the LSN of a change seen since can no longer receive
//! an older change, so they merge into one "settled" range and the page list stays short.
//!
//! The table may be cut into [`Split`]s, ranges of the first key column each read after its own
//! cursor with its own pages, up to `backfill.parallelism` pages in flight at once. A change
//! goes to the split whose range holds its key. A change beyond the cursor of a split whose page
//! is in flight may or may not be in that page's snapshot: it is also held until the page is
//! applied, then judged by the rule above.
//!
//! At every barrier each split's cursor, `backfill_finished`, `row_count` and last low offset
//! are persisted in the state table `split_id | split_start | split_end | pk |
//! backfill_finished | row_count | cdc_offset` (no row: not started), in the same checkpoint as
//! the table's rows. After a restart each split resumes strictly after its cursor, and every
//! change to a row at or before it is applied in commit order, which ends at the upstream's
//! state. Held changes are to rows beyond the persisted cursors: a crash loses nothing with them.
//!
//! The snapshot goes through the [`Phase`]s `Reading` (with `Retrying` after a failed page,
//! until the next barrier), `Finishing` (every split read, not yet checkpointed) and `Done`.
//!
//! What it emits are rows of the table's own columns and types: changes arrive as upstream
//! text (the source's change rows are shared by all its tables, see
//! [`source`](crate::stream::executor::source)), snapshot pages as text or already
//! typed (Postgres's binary pages), and both are cast column by column, by the same cast. Change chunks carry one more column, `_unchanged` ([`unchanged_field`]): per row,
//! the table columns an update did not send (TOASTed values), which the upsert materialize keeps
//! from the stored row. An update that replaces its row (a key change, or `REPLICA IDENTITY
//! FULL`: the old row is deleted first) has no stored row to keep them from, so they are read
//! from the upstream instead.

mod ahead;
mod changes;
mod pages;
mod split;
#[cfg(test)]
mod tests;

use self::changes::*;
use self::pages::*;
use self::split::*;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayBuilder, ArrayRef, AsArray, BooleanArray, ListArray, ListBuilder, RecordBatch,
    StringArray, StringBuilder, UInt32Array, UInt32Builder,
};
use arrow::compute::{filter_record_batch, interleave, take};
use arrow::datatypes::{Schema, SchemaRef};
use datafusion::scalar::ScalarValue;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::watch;

use crate::catalog::{Epoch, TableCatalog};
use crate::connector::common::SplitRange;
use crate::connector::common::{SnapshotPage, upstream_text};
use crate::connector::common::{TypeId, UpstreamTable};
use crate::connector::offset::CdcOffset;
use crate::connector::source::{SourceConfig, UpstreamSession};
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::storage::keycodec::{KEY_PREFIX_LEN, encode_column, encode_keys};
use crate::storage::state_table::StateTable;
use crate::storage::store::Store;
use crate::stream::barrier::{BackfillTicket, BarrierHandle};
use crate::stream::executor::backfill::state::{CdcProgress, read_rows};
use crate::stream::executor::backfill::status::{
    BackfillStatus, CommittedRows, RateLimiter, RateMeter,
};
use crate::stream::executor::backfill::upstream_guard::{
    Described, IDENTITY_INTERVAL, Retype, UpstreamGuard,
};
use crate::stream::executor::materialize::unchanged_field;
use crate::stream::executor::source::change::Changes;
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor, first_barrier};
use crate::stream::message::{Message, Op, StreamChunk, unexpected_truncate};
use crate::types::{CastMode, cast_to};

/// The most splits a table is cut into.
const MAX_SPLITS: usize = 1024;

/// The most rows beyond the splits' cursors applied ahead of the snapshot at once; past it,
/// changes to further rows beyond a cursor wait for the page that reads them, as without the
/// early application.
const AHEAD_ROWS: usize = 100_000;

/// How the executor is set up.
pub struct CdcBackfillConfig {
    /// The source's upstream.
    pub source: SourceConfig,
    /// The upstream table.
    pub upstream: UpstreamTable,
    /// The Sluice table fed.
    pub table: Arc<TableCatalog>,
    /// For each table column, its index among the upstream's columns.
    pub upstream_columns: Vec<usize>,
    /// The state table.
    pub state: Arc<TableCatalog>,
    /// Rows per snapshot page.
    pub batch_size: usize,
    /// False: skip the snapshot, take only changes from now on.
    pub snapshot: bool,
    /// For early checkpoints.
    pub barrier: BarrierHandle,
    /// Snapshot rows per second; `None` for no limit, `Some(0)` pauses the snapshot.
    pub rate_limit: Option<u64>,
    /// Splits read at once.
    pub parallelism: usize,
    /// Rows per split; `None`: one split per reader (one split in all when `parallelism` is 1).
    pub rows_per_split: Option<u64>,
    /// What identified the upstream table at creation (see
    /// [`CdcTableInfo::upstream_identity`](crate::catalog::CdcTableInfo::upstream_identity)).
    pub upstream_identity: Option<String>,
    /// Where a stopped table says why.
    pub metrics: Arc<Metrics>,
    /// Declared `(*)`: columns added upstream are added to the table (see
    /// [`ColumnChange`](crate::stream::graph::cdc::ColumnChange)).
    pub follow_columns: bool,
    /// See [`CdcTableInfo::columns_since`](crate::catalog::CdcTableInfo::columns_since).
    pub columns_since: Vec<(u64, usize)>,
    /// See [`CdcTableInfo::dropped`](crate::catalog::CdcTableInfo::dropped).
    pub dropped: Vec<(u64, usize)>,
    /// See [`CdcTableInfo::retyped`](crate::catalog::CdcTableInfo::retyped).
    pub retyped: Vec<(u64, usize)>,
    /// `schema.change = 'stop'`: a change of the upstream's columns stops the table.
    pub stop_at_schema_change: bool,
    /// The snapshot is read again over the rows the table holds: each page overwrites the
    /// stored rows of its range (see [`CdcTableInfo::resnapshot`](crate::catalog::CdcTableInfo::resnapshot)).
    pub overwrite: bool,
    /// Reading the snapshot again, an upstream `TRUNCATE` before this position (read again
    /// from the stream) starts the snapshot over instead of ending it (see
    /// `CdcBackfill::restart_snapshot`).
    pub truncates_from: u64,
    /// Where columns found added upstream are recorded.
    pub rebuilds: Arc<crate::stream::graph::cdc::CdcRebuilds>,
}

/// How long a check of the upstream table may take before the actor goes back to its changes.
const CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// The CDC backfill of one table.
pub struct CdcBackfillExecutor {
    upstream: BoxedExecutor,
    store: Arc<Store>,
    config: CdcBackfillConfig,
    status: watch::Sender<BackfillStatus>,
}

impl CdcBackfillExecutor {
    /// A backfill of `config.table` reading the source's change stream `upstream`.
    pub fn new(
        upstream: BoxedExecutor,
        store: Arc<Store>,
        config: CdcBackfillConfig,
        status: watch::Sender<BackfillStatus>,
    ) -> Self {
        Self { upstream, store, config, status }
    }
}

impl Executor for CdcBackfillExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { upstream, store, config, status } = *self;
        async_stream::try_stream! {
            let mut upstream = upstream.execute();
            // Pages are read only after the first barrier: every actor downstream starts with one.
            let first = first_barrier(&mut upstream, "a CDC backfill").await?;
            let mut backfill = CdcBackfill::load(store, config, status)?;
            backfill.on_barrier(&first)?;
            yield Message::Barrier(first);
            let mut reads: FuturesUnordered<PageRead> = FuturesUnordered::new();
            let mut asked_this_epoch = Some(0);
            let mut checks = tokio::time::interval(IDENTITY_INTERVAL);
            checks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                backfill.ensure_planned().await?;
                backfill.start_reads(&mut reads, &mut asked_this_epoch);
                // Not biased: a busy change stream must not starve the pages in flight.
                let event = tokio::select! {
                    msg = upstream.next() => Event::Upstream(msg),
                    Some(done) = reads.next(), if !reads.is_empty() => Event::Page(done),
                    _ = checks.tick() => Event::Check,
                };
                match event {
                    Event::Check => {
                        // The actor takes no change while it waits: every table of the source
                        // would wait with it. A check that does not answer is asked again at
                        // the next tick, over a new session.
                        let check = tokio::time::timeout(CHECK_TIMEOUT, backfill.check_identity());
                        match check.await {
                            Ok(followed) => followed?,
                            Err(_) => {
                                tracing::warn!(table = %backfill.upstream_name, "the upstream did not answer the table's check in time; asking again later");
                            }
                        }
                    }
                    Event::Page(done) => {
                        let chunks = backfill.on_page(done)?;
                        // The next page is read while this one is materialized.
                        backfill.start_reads(&mut reads, &mut asked_this_epoch);
                        for chunk in chunks {
                            yield Message::Chunk(chunk);
                        }
                    }
                    Event::Upstream(None) => break,
                    Event::Upstream(Some(msg)) => match msg? {
                        Message::Chunk(chunk) => {
                            for msg in backfill.on_changes(&chunk).await? {
                                yield msg;
                            }
                        }
                        Message::Barrier(barrier) => {
                            backfill.on_barrier(&barrier)?;
                            asked_this_epoch = Some(0);
                            yield Message::Barrier(barrier);
                        }
                        Message::Watermark(_) => {}
                        Message::Truncate => Err(unexpected_truncate("a CDC backfill"))?,
                    },
                }
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "CdcBackfillExecutor"
    }
}

/// What the executor's loop waits for.
enum Event {
    /// A message from the source, or its end.
    Upstream(Option<Result<Message>>),
    /// A page read.
    Page(PageDone),
    /// Time to check the upstream table is still there.
    Check,
}

/// Where the snapshot stands. Each transition happens in one place: a failed page read
/// ([`CdcBackfill::read_page`]), a short page ([`CdcBackfill::try_read_page`]), a barrier
/// ([`CdcBackfill::on_barrier`]) and a checkpoint ([`CdcBackfill::persist`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Pages are being read.
    Reading,
    /// The last page read failed; reading resumes after the next barrier.
    Retrying,
    /// Every snapshot row is read (or the table takes no snapshot); the checkpoint that
    /// records it is still to come.
    Finishing,
    /// The end of the snapshot is recorded by the checkpoint of `epoch` (epoch 0: by an
    /// earlier run).
    Done {
        /// The epoch whose checkpoint recorded the end.
        epoch: Epoch,
    },
}

/// A page of the snapshot: the storage key of its last row and its low offset.
struct Page {
    last_key: Vec<u8>,
    low: u64,
}

/// Changes beyond a split's cursor that arrived while a page of the split was being read: that
/// page's snapshot may or may not hold them, so they are judged once it is applied.
struct Held {
    ops: Vec<Op>,
    data: RecordBatch,
    keys: Vec<Vec<u8>>,
    positions: Vec<u64>,
}

/// A page read in flight (see [`PageDone`]).
type PageRead = Pin<Box<dyn Future<Output = PageDone> + Send>>;

/// A page read: the split, the rows asked for, the connection (if there is one) and the page
/// with its low offset.
struct PageDone {
    /// [`CdcBackfill::generation`] when the read started.
    generation: u64,
    split: usize,
    asked: usize,
    session: Option<UpstreamSession>,
    page: Result<(ReadPage, CdcOffset)>,
}

struct CdcBackfill {
    config: CdcBackfillConfig,
    state: StateTable,
    /// `schema.table`: the upstream table, as source changes name it.
    upstream_name: String,
    /// `config.upstream_columns`, shared with the page reads.
    upstream_columns: Arc<[usize]>,
    /// The splits in key order; empty until planned.
    splits: Vec<Split>,
    /// The connection for planning and for reading rows that changes did not send.
    session: Option<UpstreamSession>,
    phase: Phase,
    /// Why the last page read failed, until one succeeds.
    last_error: Option<String>,
    limiter: RateLimiter,
    status: watch::Sender<BackfillStatus>,
    meter: RateMeter,
    /// The rows read, as far as committed checkpoints record them.
    shown_rows: CommittedRows,
    store: Arc<Store>,
    /// How many upstream truncates this run has applied: a page whose read started before the
    /// last one is dropped when it arrives.
    generation: u64,
    /// Held until the snapshot is done: checkpoints come less often meanwhile.
    ticket: Option<BackfillTicket>,
    /// Checks the upstream table's columns and identity.
    guard: UpstreamGuard,
    /// Why the table stopped following its upstream (see [`upstream_guard`](super::upstream_guard)):
    /// from then on no page is read and no change applied.
    stopped: Option<String>,
    /// The upstream's columns have been checked since the start.
    columns_checked: bool,
    /// Where each upstream column is among the values of the changes that follow the last
    /// description of the table the stream sent (by name), once one came in this run.
    described: Option<Vec<Option<usize>>>,
    /// The stop is recorded in the state table (or there is none to record).
    stop_recorded: bool,
}

impl CdcBackfill {
    fn load(
        store: Arc<Store>,
        config: CdcBackfillConfig,
        status: watch::Sender<BackfillStatus>,
    ) -> Result<Self> {
        let state = config.state.state_table(store.clone());
        let upstream_name = format!("{}.{}", config.upstream.schema, config.upstream.name);
        let guard = UpstreamGuard::new(&config.upstream, config.upstream_identity.clone())
            .for_relation(&config.table.name)
            .with_columns_since(config.columns_since.clone())
            .with_dropped(config.dropped.clone())
            .with_retyped(config.retyped.clone());
        config.metrics.cdc_table_error(config.table.id.0, None);
        let mut backfill = Self {
            state,
            upstream_name,
            upstream_columns: config.upstream_columns.clone().into(),
            splits: Vec::new(),
            session: None,
            phase: if config.snapshot { Phase::Reading } else { Phase::Finishing },
            last_error: None,
            limiter: RateLimiter::new(config.rate_limit),
            status,
            meter: RateMeter::default(),
            shown_rows: CommittedRows::default(),
            store,
            config,
            generation: 0,
            ticket: None,
            guard,
            stopped: None,
            columns_checked: false,
            described: None,
            stop_recorded: true,
        };
        let persisted = read_rows(&backfill.config.state, &backfill.state)?;
        let rows = (0..persisted.num_rows()).map(|r| CdcProgress::decode(&persisted, r));
        let (stops, rows): (Vec<CdcProgress>, Vec<CdcProgress>) =
            rows.collect::<Result<Vec<_>>>()?.into_iter().partition(|r| r.stopped().is_some());
        if let Some(reason) = stops.first().and_then(CdcProgress::stopped) {
            // Stopped before the restart: stays stopped, without anything upstream to say so.
            backfill.stop(reason.to_owned());
            backfill.stop_recorded = true;
        }
        if !rows.is_empty() {
            backfill.restore(rows)?;
            // Reading the snapshot again, every stored row beyond a cursor is found by the page
            // that covers it instead (all of them would not fit in memory).
            if !backfill.config.overwrite {
                backfill.restore_ahead()?;
            }
        } else if !backfill.config.snapshot || !backfill.splits_wanted() {
            let mut split = Split::new(backfill.upstream_name.clone(), SplitRange::default(), None);
            split.finished = !backfill.config.snapshot;
            backfill.splits.push(split);
        }
        if !matches!(backfill.phase, Phase::Done { .. }) {
            backfill.ticket = Some(backfill.config.barrier.backfilling());
        }
        backfill.report(Epoch(0));
        Ok(backfill)
    }

    /// Persists progress at a checkpoint barrier and takes the barrier's rate limit; failed
    /// pages are tried again after it.
    fn on_barrier(&mut self, barrier: &crate::stream::message::Barrier) -> Result<()> {
        if barrier.is_checkpoint() {
            self.persist(barrier.epoch.prev)?;
        }
        self.apply_throttle(barrier);
        self.limiter.refill();
        if self.phase == Phase::Retrying {
            self.phase = Phase::Reading;
        }
        Ok(())
    }

    /// Takes a new rate limit for this table from the barrier, if it carries one.
    fn apply_throttle(&mut self, barrier: &crate::stream::message::Barrier) {
        if let Some(limit) = barrier.throttle_of(self.config.table.id) {
            tracing::info!(table = %self.config.table.name, ?limit, "backfill rate limit changed");
            self.limiter.set_limit(limit);
        }
    }

    /// The highest low offset of the splits' pages (0: none read).
    fn last_low(&self) -> u64 {
        self.splits.iter().map(|s| s.last_low).max().unwrap_or(0)
    }

    /// Rows read by all splits.
    fn rows(&self) -> u64 {
        self.splits.iter().map(|s| s.rows).sum()
    }

    /// Publishes the backfill's status.
    fn report(&mut self, epoch: Epoch) {
        let rows = self.shown_rows.record(epoch, self.rows(), self.store.committed_epoch());
        let (rows_per_second, idle_checkpoints) = self.meter.sample(rows);
        let finished = match self.phase {
            Phase::Done { epoch } => Some(epoch),
            _ => None,
        };
        let last_low = self.last_low();
        self.status.send_replace(BackfillStatus {
            rows,
            finished,
            rows_per_second,
            rate_limit: self.limiter.limit(),
            idle_checkpoints,
            units_done: self.splits.iter().filter(|s| s.finished).count() as u32,
            units_total: self.splits.len().max(1) as u32,
            upstream_error: self.last_error.clone(),
            upstream_offset: (last_low > 0)
                .then(|| self.config.source.offset_at(last_low).to_string()),
            stopped: self.stopped.clone(),
        });
    }

    /// Restores the persisted splits: changes to rows up to each cursor all apply.
    fn restore(&mut self, rows: Vec<CdcProgress>) -> Result<()> {
        let mut splits = Vec::with_capacity(rows.len());
        for progress in rows {
            let end_key = self.bound_key(progress.range.end.as_deref())?;
            let mut split = Split::new(progress.split, progress.range, end_key);
            split.dirty = false;
            split.finished = progress.finished;
            split.rows = progress.rows;
            split.last_low = progress.offset.position();
            if let Some(pk) = progress.cursor {
                let pk: Vec<ArrayRef> =
                    pk.iter().map(|v| v.to_array()).collect::<Result<_, _>>()?;
                let table = &self.config.table;
                let key = encode_keys(table.id, &pk, 1, table.dist_key_len)?.remove(0);
                let key = key[KEY_PREFIX_LEN..].to_vec();
                let text = pk.iter().map(upstream_text).collect::<Result<Vec<_>>>()?;
                split.settled = Some(key.clone());
                split.cursor = Some((text, key));
            }
            splits.push(split);
        }
        // In key order: the unbounded end last.
        splits.sort_by(|a, b| match (&a.end_key, &b.end_key) {
            (Some(a), Some(b)) => a.cmp(b),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
        if splits.iter().all(|s| s.finished) {
            self.phase = Phase::Done { epoch: Epoch(0) };
        }
        self.splits = splits;
        Ok(())
    }

    /// The session for planning and checks, taken out (connected if need be); put it back.
    async fn take_session(&mut self) -> Result<UpstreamSession> {
        match self.session.take() {
            Some(session) => Ok(session),
            None => self.config.source.session().await,
        }
    }

    async fn session(&mut self) -> Result<&mut UpstreamSession> {
        if self.session.is_none() {
            self.session = Some(self.config.source.session().await?);
        }
        Ok(self.session.as_mut().expect("connected above"))
    }

    /// Records a failed upstream read: reading resumes after the next barrier.
    fn failed(&mut self, e: Error) {
        tracing::warn!(table = %self.upstream_name, error = %e, "reading the snapshot failed; retrying");
        self.session = None;
        // A column retyped upstream can fail a page (its binary values are cast to the type
        // the table was created over): the next check reads the columns again.
        self.columns_checked = false;
        self.phase = Phase::Retrying;
        self.last_error = Some(e.to_string());
    }

    /// The split whose range holds `key`; `None` before the splits are planned.
    fn split_of(&self, key: &[u8]) -> Option<usize> {
        let index =
            self.splits.partition_point(|s| s.end_key.as_deref().is_some_and(|end| end <= key));
        (index < self.splits.len()).then_some(index)
    }

    /// The table's columns from the text of their upstream columns (`text(u)`: upstream column
    /// `u`), cast to the column types.
    fn typed(&self, text: impl FnMut(usize) -> Result<ArrayRef>) -> Result<RecordBatch> {
        typed_batch(&self.config.table, &self.config.upstream_columns, text)
    }

    /// A primary key as text (as the upstream prints it), typed as the table's key columns.
    fn typed_key(&self, text: &[Option<String>]) -> Result<Vec<ScalarValue>> {
        let table = &self.config.table;
        text.iter()
            .zip(&table.pk)
            .map(|(text, &c)| {
                let text: ArrayRef = Arc::new(StringArray::from(vec![text.as_deref()]));
                let typed = cast_to(&text, table.columns[c].data_type, CastMode::Upstream)?;
                Ok(ScalarValue::try_from_array(&typed, 0)?)
            })
            .collect()
    }

    /// The memcomparable primary key of every row, without the table and vnode prefix: these
    /// order like the upstream's keys, so they compare against the snapshot cursor.
    fn keys(&self, data: &RecordBatch) -> Result<Vec<Vec<u8>>> {
        let table = &self.config.table;
        let pk: Vec<ArrayRef> = table.pk.iter().map(|&i| data.column(i).clone()).collect();
        let keys = encode_keys(table.id, &pk, data.num_rows(), table.dist_key_len)?;
        Ok(keys.into_iter().map(|k| k[KEY_PREFIX_LEN..].to_vec()).collect())
    }

    /// Writes the progress rows of the splits that moved and commits the state table.
    fn persist(&mut self, epoch: Epoch) -> Result<()> {
        let schema = self.config.state.full_schema();
        for index in 0..self.splits.len() {
            if !self.splits[index].dirty {
                continue;
            }
            let split = &self.splits[index];
            let cursor = match &split.cursor {
                Some((text, _)) => Some(self.typed_key(text)?),
                None => None,
            };
            let progress = CdcProgress {
                split: split.id.clone(),
                range: split.range.clone(),
                cursor,
                finished: split.finished,
                rows: split.rows,
                offset: self.config.source.offset_at(split.last_low),
            };
            let batch = progress.encode(&schema)?;
            self.state.write_chunk(&StreamChunk::inserts(batch))?;
            self.splits[index].dirty = false;
        }
        if let (Some(reason), false) = (&self.stopped, self.stop_recorded) {
            let stop = CdcProgress::stop(reason, self.config.source.offset_at(0));
            self.state.write_chunk(&StreamChunk::inserts(stop.encode(&schema)?))?;
            self.stop_recorded = true;
        }
        self.state.commit(epoch);
        if self.phase == Phase::Finishing {
            self.phase = Phase::Done { epoch };
            self.ticket = None;
        }
        self.report(epoch);
        Ok(())
    }
}

/// The rows of `data` (with `ops`) that `keep` marks, as a chunk; `None` for none.
fn kept(ops: &[Op], data: &RecordBatch, keep: Vec<bool>) -> Result<Option<StreamChunk>> {
    let ops: Vec<Op> =
        ops.iter().zip(&keep).filter(|(_, keep)| **keep).map(|(op, _)| *op).collect();
    if ops.is_empty() {
        return Ok(None);
    }
    let data = filter_record_batch(data, &BooleanArray::from(keep))?;
    Ok(Some(StreamChunk::new(ops, data)))
}

/// The same fields, all nullable: change rows carry only the key for deletes.
fn nullable(schema: &SchemaRef) -> SchemaRef {
    let fields: Vec<arrow::datatypes::Field> =
        schema.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect();
    Arc::new(arrow::datatypes::Schema::new(fields))
}
