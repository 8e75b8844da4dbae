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
use crate::connector::common::UpstreamTable;
use crate::connector::offset::CdcOffset;
use crate::connector::source::{SnapshotPage, SourceConfig, UpstreamSession, upstream_text};
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::storage::keycodec::{KEY_PREFIX_LEN, encode_column, encode_keys};
use crate::storage::state_table::StateTable;
use crate::storage::store::Store;
use crate::stream::barrier::{BackfillTicket, BarrierHandle};
use crate::stream::executor::backfill::state::{CdcProgress, SplitRange, read_rows};
use crate::stream::executor::backfill::status::{
    BackfillStatus, CommittedRows, RateLimiter, RateMeter,
};
use crate::stream::executor::backfill::upstream_guard::{IDENTITY_INTERVAL, UpstreamGuard};
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
}

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
                    Event::Check => backfill.check_identity().await,
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
    lsns: Vec<u64>,
}

/// One range of the upstream table's keys, read page after page after its own cursor, with
/// the merge rule applied to its own pages.
struct Split {
    /// `schema.table` for a table read as one split, `schema.table/n` for split `n`.
    id: String,
    range: SplitRange,
    /// The storage-key form of `range.end`: keys at or above it belong to later splits.
    end_key: Option<Vec<u8>>,
    /// The key of the last row read, as text (for the next page) and as a storage key.
    cursor: Option<(Vec<Option<String>>, Vec<u8>)>,
    /// Every row of the range is read.
    finished: bool,
    rows: u64,
    /// Pages whose low offset may still be above an arriving change's LSN.
    pages: VecDeque<Page>,
    /// Rows with keys up to this one (inclusive) take every change.
    settled: Option<Vec<u8>>,
    last_low: u64,
    /// Progress changed since the last checkpoint.
    dirty: bool,
    /// A page of the split is being read; its connection is with the read.
    reading: bool,
    held: Vec<Held>,
    /// Rows beyond the cursor that changes wrote to the table ahead of the snapshot, by
    /// storage key, with their key values: the page that reads their range overwrites or
    /// deletes them.
    ahead: BTreeMap<Vec<u8>, Vec<ScalarValue>>,
    session: Option<UpstreamSession>,
}

impl Split {
    fn new(id: String, range: SplitRange, end_key: Option<Vec<u8>>) -> Self {
        Split {
            id,
            range,
            end_key,
            cursor: None,
            finished: false,
            rows: 0,
            pages: VecDeque::new(),
            settled: None,
            last_low: 0,
            dirty: true,
            reading: false,
            held: Vec::new(),
            ahead: BTreeMap::new(),
            session: None,
        }
    }

    /// Whether `key` is beyond the cursor of a split still reading: a later page reads it.
    fn ahead(&self, key: &[u8]) -> bool {
        !self.finished && self.cursor.as_ref().is_none_or(|(_, cursor)| key > cursor.as_slice())
    }

    /// Whether a change to the row with `key`, committed at `lsn`, must be applied.
    fn applies(&self, key: &[u8], lsn: u64) -> bool {
        if self.ahead(key) {
            return false;
        }
        if self.settled.as_ref().is_some_and(|s| key <= s.as_slice()) {
            return true;
        }
        match self.pages.iter().find(|p| key <= p.last_key.as_slice()) {
            Some(page) => lsn >= page.low,
            None => true,
        }
    }

    /// Pages whose low offset is at or below `lsn` cannot see an older change any more.
    fn settle(&mut self, lsn: u64) {
        while self.pages.front().is_some_and(|p| p.low <= lsn) {
            let page = self.pages.pop_front().expect("checked");
            self.settled = Some(page.last_key);
        }
    }
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
        let guard = UpstreamGuard::new(&config.upstream, config.upstream_identity.clone());
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
            backfill.restore_ahead()?;
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

    /// Whether the table is read in more than one split.
    fn splits_wanted(&self) -> bool {
        self.config.parallelism > 1 || self.config.rows_per_split.is_some()
    }

    /// Cuts the table into splits, once, before the first page: `backfill.num_rows_per_split`
    /// rows each (by the upstream's estimate), else one per reader.
    async fn plan(&mut self) -> Result<()> {
        let upstream = self.config.upstream.clone();
        let (parallelism, rows_per_split) = (self.config.parallelism, self.config.rows_per_split);
        let session = self.session().await?;
        let wanted = match rows_per_split {
            Some(per_split) => {
                let estimate = session.estimate_rows(&upstream.schema, &upstream.name).await?;
                estimate.div_ceil(per_split).clamp(1, MAX_SPLITS as u64) as usize
            }
            None => parallelism,
        };
        let points = session.split_points(&upstream, wanted).await?;
        let splits = self.splits_at(points)?;
        tracing::info!(table = %self.upstream_name, splits = splits.len(), "planned the snapshot splits");
        self.splits = splits;
        Ok(())
    }

    /// The splits that the values `points` of the first key column cut the table into, in the
    /// order of Sluice's keys (which the routing of changes to splits relies on), whatever the
    /// order of `points`.
    fn splits_at(&self, points: Vec<String>) -> Result<Vec<Split>> {
        let mut points = points
            .into_iter()
            .map(|p| Ok((self.bound_key(Some(&p))?.expect("a bound"), p)))
            .collect::<Result<Vec<_>>>()?;
        points.sort();
        points.dedup_by(|a, b| a.0 == b.0);
        let mut splits = Vec::with_capacity(points.len() + 1);
        let mut start = None;
        let bounds = points.into_iter().map(|(k, p)| (Some(k), Some(p)));
        for (key, point) in bounds.chain([(None, None)]) {
            let range = SplitRange { start: start.take(), end: point.clone() };
            let id = format!("{}/{}", self.upstream_name, splits.len());
            splits.push(Split::new(id, range, key));
            start = point;
        }
        Ok(splits)
    }

    /// The storage-key form of a split bound (text of the first key column): keys of rows whose
    /// first key column is at or above it compare at or above it.
    fn bound_key(&self, bound: Option<&str>) -> Result<Option<Vec<u8>>> {
        let Some(bound) = bound else { return Ok(None) };
        let table = &self.config.table;
        let text: ArrayRef = Arc::new(StringArray::from(vec![bound]));
        let typed = cast_to(&text, table.columns[table.pk[0]].data_type, CastMode::Upstream)?;
        let mut key = vec![Vec::new()];
        encode_column(&typed, &mut key)?;
        Ok(key.pop())
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

    /// Plans the splits if that is still to do; an upstream error is retried after the next
    /// barrier.
    async fn ensure_planned(&mut self) -> Result<()> {
        if !self.splits.is_empty() || self.phase != Phase::Reading {
            return Ok(());
        }
        match self.plan().await {
            Ok(()) => Ok(()),
            Err(e @ Error::Upstream { .. }) => {
                self.failed(e);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Records a failed upstream read: reading resumes after the next barrier.
    fn failed(&mut self, e: Error) {
        tracing::warn!(table = %self.upstream_name, error = %e, "reading the snapshot failed; retrying");
        self.session = None;
        self.phase = Phase::Retrying;
        self.last_error = Some(e.to_string());
    }

    /// Starts page reads while splits are idle and the epoch is not full
    /// ([`super::epoch_full`], counting the rows asked for).
    fn start_reads(
        &mut self,
        reads: &mut FuturesUnordered<PageRead>,
        asked_this_epoch: &mut Option<usize>,
    ) {
        // `None`: the epoch is full and its checkpoint is asked for.
        while let Some(asked) = *asked_this_epoch {
            if super::epoch_full(asked, &self.store) {
                // Commit it soon rather than at the interval.
                self.config.barrier.request_checkpoint();
                *asked_this_epoch = None;
                break;
            }
            let Some(read) = self.next_read(reads.len()) else { break };
            *asked_this_epoch = Some(asked + self.config.batch_size);
            reads.push(read);
        }
    }

    /// Starts reading the next page of an idle unfinished split, if the phase, the number of
    /// reads in flight and the rate limit allow one.
    fn next_read(&mut self, in_flight: usize) -> Option<PageRead> {
        if self.phase != Phase::Reading
            || in_flight >= self.config.parallelism
            || self.stopped.is_some()
        {
            return None;
        }
        let asked = self.limiter.budget(self.config.batch_size);
        if asked == 0 {
            return None;
        }
        let index = self.splits.iter().position(|s| !s.finished && !s.reading)?;
        self.limiter.consume(asked);
        let generation = self.generation;
        let split = &mut self.splits[index];
        split.reading = true;
        // On a task of its own: receiving and casting a page can use another core than the
        // merge.
        let read = tokio::spawn(read_page(PageRequest {
            session: split.session.take(),
            source: self.config.source.clone(),
            upstream: self.config.upstream.clone(),
            table: self.config.table.clone(),
            upstream_columns: self.upstream_columns.clone(),
            cursor: split.cursor.as_ref().map(|(text, _)| text.clone()),
            range: split.range.clone(),
            asked,
        }));
        Some(Box::pin(async move {
            let (session, page) = match read.await {
                Ok(done) => done,
                Err(e) => (None, Err(Error::Stream(format!("a snapshot page read failed: {e}")))),
            };
            PageDone { generation, split: index, asked, session, page }
        }))
    }

    /// Applies a page read: its rows, then the changes held back while it was read. A short page
    /// finishes its split. Upstream errors are retried after the next barrier.
    fn on_page(&mut self, done: PageDone) -> Result<Vec<StreamChunk>> {
        let PageDone { generation, split: index, asked, session, page } = done;
        self.splits[index].reading = false;
        if generation != self.generation || self.stopped.is_some() {
            // Read across an upstream truncate, which ended the snapshot: the page may hold
            // rows the truncate deleted.
            self.splits[index].session = session;
            return Ok(Vec::new());
        }
        let (page, low) = match page {
            Ok(read) => read,
            Err(e @ Error::Upstream { .. }) => {
                // The cursor did not move: the held changes are to rows a later page reads.
                self.splits[index].held.clear();
                self.failed(e);
                return Ok(Vec::new());
            }
            Err(Error::OutOfRange(what)) => {
                // A value the table cannot hold exactly: stopped, rather than NULL or rounded.
                let name = &self.upstream_name;
                self.stop(format!("the table stopped following {name}: a snapshot row: {what}"));
                return Ok(Vec::new());
            }
            Err(e) => return Err(e),
        };
        let low = low.position();
        let n = page.rows.num_rows();
        tracing::debug!(split = %self.splits[index].id, rows = n, low, last = ?page.last_key, held = self.splits[index].held.len(), "read a snapshot page");
        self.last_error = None;
        let mut out = Vec::new();
        let finishes = n < asked;
        let last_key = match n {
            0 => None,
            _ => Some(self.keys(&page.rows.slice(n - 1, 1))?.remove(0)),
        };
        // The rows applied ahead of the cursor that this page's range holds: up to its last
        // row, or all that are left when it ends the split.
        let split = &mut self.splits[index];
        let covered = match &last_key {
            _ if finishes => std::mem::take(&mut split.ahead),
            Some(last) => {
                let mut after = last.clone();
                after.push(0);
                let rest = split.ahead.split_off(&after);
                std::mem::replace(&mut split.ahead, rest)
            }
            None => BTreeMap::new(),
        };
        if let (Some(text_key), Some(key)) = (page.last_key, last_key) {
            split.pages.push_back(Page { last_key: key.clone(), low });
            split.cursor = Some((text_key, key));
            split.rows += n as u64;
        }
        if covered.is_empty() {
            // The page's keys are above every key the table holds from this split, so it is
            // plain inserts: no `_unchanged` column tells the materialize to skip its upsert
            // lookups.
            if n > 0 {
                out.push(StreamChunk::inserts(page.rows));
            }
        } else {
            out.extend(self.overwrite_ahead(page.rows, covered)?);
        }
        let split = &mut self.splits[index];
        split.session = session;
        split.dirty = true;
        split.last_low = low;
        if finishes {
            split.finished = true;
            if self.splits.iter().all(|s| s.finished) {
                self.phase = Phase::Finishing;
                self.config.barrier.request_checkpoint();
            }
        }
        for held in std::mem::take(&mut self.splits[index].held) {
            let split = &self.splits[index];
            let keep: Vec<bool> =
                held.keys.iter().zip(&held.lsns).map(|(k, &lsn)| split.applies(k, lsn)).collect();
            out.extend(kept(&held.ops, &held.data, keep)?);
        }
        Ok(out)
    }

    /// Whether a change to the row with `key`, beyond the cursor of split `index`, is applied
    /// at once rather than left to the page that will read the row; records the row as
    /// applied ahead. The table materializes upserts and the page overwrites what it finds (see
    /// [`CdcBackfill::overwrite_ahead`]), so only the order of changes to one key matters, and
    /// changes arrive in commit order. A delete is applied when the table holds the row; an
    /// insert or update when it carries every column or the table holds the row to keep the
    /// unsent ones from, and the table holds fewer than [`AHEAD_ROWS`] rows ahead.
    fn apply_ahead(
        &mut self,
        index: usize,
        key: &[u8],
        op: Op,
        all_sent: bool,
        data: &RecordBatch,
        row: usize,
    ) -> Result<bool> {
        if op == Op::Delete {
            return Ok(self.splits[index].ahead.remove(key).is_some());
        }
        if self.splits[index].ahead.contains_key(key) {
            return Ok(true);
        }
        if !all_sent || self.splits.iter().map(|s| s.ahead.len()).sum::<usize>() >= AHEAD_ROWS {
            return Ok(false);
        }
        let pk = &self.config.table.pk;
        let values = pk.iter().map(|&c| ScalarValue::try_from_array(data.column(c), row));
        let values = values.collect::<Result<_, _>>()?;
        self.splits[index].ahead.insert(key.to_vec(), values);
        Ok(true)
    }

    /// A page's rows when the table already holds some rows of its range (`covered`, applied
    /// ahead): those rows of the page go as upserts, which replace the stored version; rows
    /// of `covered` the page does not have were deleted upstream before its snapshot, and go
    /// as deletes; the other rows go as plain inserts.
    fn overwrite_ahead(
        &self,
        rows: RecordBatch,
        mut covered: BTreeMap<Vec<u8>, Vec<ScalarValue>>,
    ) -> Result<Vec<StreamChunk>> {
        let keys = self.keys(&rows)?;
        let stored: Vec<bool> = keys.iter().map(|k| covered.remove(k).is_some()).collect();
        let mut out = Vec::new();
        let fresh =
            filter_record_batch(&rows, &BooleanArray::from_iter(stored.iter().map(|s| Some(!s))))?;
        if fresh.num_rows() > 0 {
            out.push(StreamChunk::inserts(fresh));
        }
        let upserts = filter_record_batch(&rows, &BooleanArray::from(stored))?;
        if upserts.num_rows() > 0 {
            let m = upserts.num_rows();
            let data = with_unchanged(upserts, all_sent_list(m))?;
            out.push(StreamChunk::new(vec![Op::Insert; m], data));
        }
        if !covered.is_empty() {
            let m = covered.len();
            let table = &self.config.table;
            let schema = nullable(&table.full_schema());
            let columns = schema
                .fields()
                .iter()
                .enumerate()
                .map(|(c, field)| match table.pk.iter().position(|&p| p == c) {
                    Some(at) => {
                        let values = covered.values().map(|v| v[at].clone());
                        Ok(ScalarValue::iter_to_array(values)?)
                    }
                    None => Ok(arrow::array::new_null_array(field.data_type(), m)),
                })
                .collect::<Result<Vec<_>>>()?;
            let data = with_unchanged(RecordBatch::try_new(schema, columns)?, all_sent_list(m))?;
            out.push(StreamChunk::new(vec![Op::Delete; m], data));
        }
        Ok(out)
    }

    /// Finds the rows that changes applied ahead of the snapshot left in the table beyond each
    /// unfinished split's persisted cursor, after a restart.
    fn restore_ahead(&mut self) -> Result<()> {
        use crate::ids::VirtualNode;
        use crate::storage::keycodec::vnode_prefix;
        use crate::storage::row_codec::RowDecoder;
        let table = self.config.table.clone();
        let types: Vec<_> = table.columns.iter().map(|c| c.data_type).collect();
        let snapshot = self.store.snapshot();
        for index in 0..self.splits.len() {
            let split = &self.splits[index];
            if split.finished {
                continue;
            }
            let from = match &split.cursor {
                Some((_, cursor)) => {
                    let mut after = cursor.clone();
                    after.push(0);
                    after
                }
                None => self.bound_key(split.range.start.as_deref())?.unwrap_or_default(),
            };
            let to = split.end_key.clone();
            let mut found = Vec::new();
            let mut decoder = RowDecoder::new(&types, &table.pk, &table.pk, 16);
            for vnode in 0..VirtualNode::COUNT {
                let prefix = vnode_prefix(table.id, VirtualNode(vnode as u16));
                let start = [&prefix[..], &from].concat();
                let end = match &to {
                    Some(to) => [&prefix[..], to].concat(),
                    None => crate::storage::keycodec::prefix_successor(&prefix)
                        .expect("a table id below the greatest"),
                };
                snapshot.scan(&start, &end, usize::MAX, |k, v| {
                    found.push(k[KEY_PREFIX_LEN..].to_vec());
                    decoder.push(k, v)
                })?;
            }
            let pk = decoder.finish();
            let split = &mut self.splits[index];
            for (row, key) in found.into_iter().enumerate() {
                let values = pk.iter().map(|c| ScalarValue::try_from_array(c, row));
                split.ahead.insert(key, values.collect::<Result<_, _>>()?);
            }
            if !split.ahead.is_empty() {
                tracing::info!(split = %split.id, rows = split.ahead.len(), "rows applied ahead of the snapshot before the restart");
            }
        }
        Ok(())
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

    /// Takes the source's changes to this table, in order: row changes go through the merge
    /// rule ([`Self::merge_changes`]), and a truncate ends the snapshot ([`Self::truncate`])
    /// and goes on to the materialize, which deletes every row.
    async fn on_changes(&mut self, chunk: &StreamChunk) -> Result<Vec<Message>> {
        let changes = Changes::of(chunk)?;
        let rows: Vec<usize> =
            (0..chunk.len()).filter(|&i| changes.table.value(i) == self.upstream_name).collect();
        let mut out = Vec::new();
        let special = |i: usize| changes.truncate.value(i) || changes.relation.value(i);
        for run in rows.split_inclusive(|&i| special(i)) {
            let &last = run.last().expect("runs are not empty");
            let rows = if special(last) { &run[..run.len() - 1] } else { run };
            if self.stopped.is_some() {
                break;
            }
            if let Some(chunk) = self.merge_changes(&changes, rows).await? {
                out.push(Message::Chunk(chunk));
            }
            if changes.truncate.value(last) {
                self.truncate(changes.lsn.value(last) as u64);
                out.push(Message::Truncate);
            } else if changes.relation.value(last) {
                self.check_columns(&changes.values_of(last)).await;
            }
        }
        Ok(out)
    }

    /// Checks the columns the upstream says the table's changes have from here on; stops the
    /// table at a change it cannot follow (see [`upstream_guard`](super::upstream_guard)).
    async fn check_columns(&mut self, names: &[Option<&str>]) {
        if let Some(reason) = self.guard.check_names(names) {
            return self.stop(reason);
        }
        self.check_upstream(true).await;
    }

    /// Checks the upstream table is still the one the table was created over; the first
    /// check after a start also checks its columns (a change made while Sluice was down may
    /// have altered them before any change shows it).
    async fn check_identity(&mut self) {
        if self.stopped.is_none() {
            let columns = !self.columns_checked;
            self.columns_checked |= self.check_upstream(columns).await;
        }
    }

    /// Asks the upstream (see [`UpstreamGuard::check`]) and stops the table at a change it
    /// cannot follow; whether the upstream answered (if not, the next check asks again).
    async fn check_upstream(&mut self, columns: bool) -> bool {
        let checked = match self.take_session().await {
            Ok(mut session) => {
                let checked = self.guard.check(&mut session, columns).await;
                self.session = Some(session);
                checked
            }
            Err(e) => Err(e),
        };
        match checked {
            Ok(Some(reason)) => self.stop(reason),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(table = %self.upstream_name, error = %e, "cannot check the upstream table");
                self.session = None;
                return false;
            }
        }
        true
    }

    /// Stops following the upstream: no page is read and no change applied from here on; the
    /// table keeps its rows.
    fn stop(&mut self, reason: String) {
        tracing::error!(table = %self.config.table.name, upstream = %self.upstream_name, %reason, "a CDC table stopped");
        self.config.metrics.cdc_table_error(self.config.table.id.0, Some(reason.clone()));
        self.status.send_modify(|s| s.stopped = Some(reason.clone()));
        self.stopped = Some(reason);
        self.stop_recorded = false;
        self.config.barrier.request_checkpoint();
    }

    /// An upstream `TRUNCATE`, committed at `lsn`: the table is empty there, and each row it
    /// holds later was written by a change after the truncate, which the source delivers. So
    /// the snapshot has nothing left to read: every split finishes, what was held or applied
    /// ahead is forgotten (the truncate deletes it), pages in flight are dropped when they
    /// arrive (they may have been read before the truncate), and every later change applies.
    /// A crash before the checkpoint that records it loses the epoch, and the source delivers
    /// the truncate again.
    fn truncate(&mut self, lsn: u64) {
        tracing::info!(table = %self.upstream_name, lsn, "an upstream TRUNCATE emptied the table");
        self.generation += 1;
        if self.splits.is_empty() {
            self.splits.push(Split::new(self.upstream_name.clone(), SplitRange::default(), None));
        }
        for split in &mut self.splits {
            split.finished = true;
            split.dirty = true;
            split.held.clear();
            split.ahead.clear();
            split.pages.clear();
            split.settled = None;
        }
        if !matches!(self.phase, Phase::Done { .. }) {
            self.phase = Phase::Finishing;
            self.last_error = None;
            self.config.barrier.request_checkpoint();
        }
    }

    /// Applies the merge rule to the changes `rows` (none a truncate); returns the ones to
    /// emit. Changes to rows beyond the cursor of a split with a page in flight are held until
    /// it is applied.
    async fn merge_changes(
        &mut self,
        changes: &Changes<'_>,
        rows: &[usize],
    ) -> Result<Option<StreamChunk>> {
        if rows.is_empty() {
            return Ok(None);
        }
        let fetched = self.fetch_unchanged(changes, rows).await?;
        let data = match self.typed(|u| fetched.gather(changes, rows, u)) {
            Err(Error::OutOfRange(what)) => {
                self.stop(format!("the table stopped following {}: {what}", self.upstream_name));
                return Ok(None);
            }
            data => data?,
        };
        let unchanged = self.unchanged_columns(changes, rows);
        let all_sent: Vec<bool> = (0..rows.len())
            .map(|i| unchanged.is_null(i) || unchanged.value_length(i) == 0)
            .collect();
        let data = with_unchanged(data, unchanged)?;
        let keys = self.keys(&data)?;
        let lsns: Vec<u64> = rows.iter().map(|&i| changes.lsn.value(i) as u64).collect();
        let ops: Vec<Op> = rows
            .iter()
            .map(|&i| if changes.delete.value(i) { Op::Delete } else { Op::Insert })
            .collect();
        let trace = tracing::enabled!(tracing::Level::TRACE);
        let mut keep = vec![false; rows.len()];
        let mut held: HashMap<usize, Vec<usize>> = HashMap::new();
        for (row, key) in keys.iter().enumerate() {
            let Some(index) = self.split_of(key) else { continue };
            if self.splits[index].ahead(key) {
                if self.splits[index].reading {
                    held.entry(index).or_default().push(row);
                }
                keep[row] = self.apply_ahead(index, key, ops[row], all_sent[row], &data, row)?;
            } else {
                keep[row] = self.splits[index].applies(key, lsns[row]);
            }
            if trace {
                let split = &self.splits[index];
                let pk = ScalarValue::try_from_array(data.column(self.config.table.pk[0]), row)?;
                let cursor = split.cursor.as_ref().map(|c| c.0.clone());
                tracing::trace!(split = index, %pk, lsn = lsns[row], op = ?ops[row], ?cursor, reading = split.reading, finished = split.finished, keep = keep[row], "change");
            }
        }
        for (index, held_rows) in held {
            let indices = UInt32Array::from_iter_values(held_rows.iter().map(|&r| r as u32));
            let columns = data
                .columns()
                .iter()
                .map(|c| take(c, &indices, None))
                .collect::<Result<Vec<_>, _>>()?;
            self.splits[index].held.push(Held {
                ops: held_rows.iter().map(|&r| ops[r]).collect(),
                data: RecordBatch::try_new(data.schema(), columns)?,
                keys: held_rows.iter().map(|&r| keys[r].clone()).collect(),
                lsns: held_rows.iter().map(|&r| lsns[r]).collect(),
            });
        }
        if let Some(&max) = lsns.iter().max() {
            for split in &mut self.splits {
                split.settle(max);
            }
        }
        kept(&ops, &data, keep)
    }

    /// Reads from the upstream the columns that the replacing updates among `rows` did not
    /// send. Later changes of the row follow in commit order, so values newer than the change's
    /// are overwritten or were current anyway. A row gone upstream keeps NULLs: its delete
    /// follows.
    async fn fetch_unchanged(&mut self, changes: &Changes<'_>, rows: &[usize]) -> Result<Fetched> {
        let mut at = HashMap::new();
        let mut values = StringBuilder::new();
        for &row in rows {
            let unchanged = changes.unchanged(row);
            if unchanged.is_empty() || !changes.replaces.value(row) {
                continue;
            }
            let pk = &self.config.upstream.pk;
            let key: Vec<Option<String>> = pk
                .iter()
                .map(|&u| Ok(changes.text(row, u)?.map(str::to_owned)))
                .collect::<Result<_>>()?;
            let upstream = self.config.upstream.clone();
            let Some(current) = self.session().await?.fetch_row(&upstream, &key).await? else {
                continue;
            };
            for &u in unchanged {
                if let Some(value) = current.get(u as usize) {
                    at.insert((row, u as usize), values.len());
                    values.append_option(value.as_deref());
                }
            }
        }
        Ok(Fetched { at, values: values.finish() })
    }

    /// The `_unchanged` column of the changes `rows`: the table columns whose upstream columns
    /// an update did not send, or NULL. A replacing update has none: they were read from the
    /// upstream (see [`Self::fetch_unchanged`]).
    fn unchanged_columns(&self, changes: &Changes<'_>, rows: &[usize]) -> ListArray {
        let mut lists = ListBuilder::with_capacity(UInt32Builder::new(), rows.len());
        for &row in rows {
            let upstream = changes.unchanged(row);
            let columns: Vec<Option<u32>> = match changes.replaces.value(row) {
                true => Vec::new(),
                false => self
                    .config
                    .upstream_columns
                    .iter()
                    .enumerate()
                    .filter(|&(_, &u)| upstream.contains(&(u as u32)))
                    .map(|(c, _)| Some(c as u32))
                    .collect(),
            };
            match columns.is_empty() {
                true => lists.append_null(),
                false => lists.append_value(columns),
            }
        }
        lists.finish()
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

/// Upstream values read for changes that did not send them (see
/// [`CdcBackfill::fetch_unchanged`]).
struct Fetched {
    /// Where the value of (change row, upstream column) is in `values`.
    at: HashMap<(usize, usize), usize>,
    values: StringArray,
}

impl Fetched {
    /// The text of upstream column `column` of each change in `rows`: the value read from the
    /// upstream where there is one, else the change's own.
    fn gather(&self, changes: &Changes<'_>, rows: &[usize], column: usize) -> Result<ArrayRef> {
        if self.at.is_empty() {
            let indices: Vec<u32> = rows
                .iter()
                .map(|&row| Ok(changes.value_index(row, column)? as u32))
                .collect::<Result<_>>()?;
            return Ok(take(changes.texts(), &UInt32Array::from(indices), None)?);
        }
        let picks: Vec<(usize, usize)> = rows
            .iter()
            .map(|&row| match self.at.get(&(row, column)) {
                Some(&at) => Ok((1, at)),
                None => Ok((0, changes.value_index(row, column)?)),
            })
            .collect::<Result<_>>()?;
        Ok(interleave(&[changes.texts() as &dyn Array, &self.values], &picks)?)
    }
}

/// The columns of `table` from the text of their upstream columns (`text(u)`: upstream column
/// `u`; `upstream_columns[c]`: the upstream column of table column `c`), cast to their types.
fn typed_batch(
    table: &TableCatalog,
    upstream_columns: &[usize],
    mut text: impl FnMut(usize) -> Result<ArrayRef>,
) -> Result<RecordBatch> {
    let schema: SchemaRef = table.full_schema();
    let inputs = upstream_columns.iter().map(|&u| text(u)).collect::<Result<Vec<_>>>()?;
    let columns = inputs
        .iter()
        .zip(&table.columns)
        .map(|(input, column)| cast_to(input, column.data_type, CastMode::Upstream))
        .collect::<Result<Vec<_>>>()?;
    if let Some((row, c)) = lost_value(table, &inputs, &columns) {
        let key: Vec<String> = table
            .pk
            .iter()
            .map(|&k| inputs[k].as_string_opt::<i32>().map_or("?", |t| t.value(row)).to_owned())
            .collect();
        let value = inputs[c].as_string::<i32>().value(row);
        let column = &table.columns[c];
        return Err(Error::OutOfRange(format!(
            "the upstream value {value} of column {} (key {}) cannot be held exactly by {}; \
             declare the column with a type that holds it (numeric(p, s) up to 38 digits, or \
             varchar for its text) and create the table again",
            column.name,
            key.join(", "),
            column.data_type
        )));
    }
    Ok(RecordBatch::try_new(nullable(&schema), columns)?)
}

/// The first value (row, column) of `inputs` (upstream text) that its cast in `columns` did not
/// keep: it became NULL, or a numeric lost fraction digits to the column's scale.
fn lost_value(
    table: &TableCatalog,
    inputs: &[ArrayRef],
    columns: &[ArrayRef],
) -> Option<(usize, usize)> {
    for (c, (input, cast)) in inputs.iter().zip(columns).enumerate() {
        let Some(text) = input.as_string_opt::<i32>() else { continue };
        let scale = match table.columns[c].data_type {
            crate::types::DataType::Decimal { scale, .. } => Some(scale.max(0) as usize),
            _ => None,
        };
        for row in 0..text.len() {
            if text.is_null(row) {
                continue;
            }
            if cast.is_null(row) {
                return Some((row, c));
            }
            if let Some(scale) = scale
                && fraction_digits(text.value(row)) > scale
            {
                return Some((row, c));
            }
        }
    }
    None
}

/// The digits after the point of a number as text, trailing zeros aside.
fn fraction_digits(number: &str) -> usize {
    let mantissa = number.split(['e', 'E']).next().unwrap_or(number);
    match mantissa.split_once('.') {
        Some((_, fraction)) => fraction.trim_end_matches('0').len(),
        None => 0,
    }
}

/// A page as read from the upstream: the table's rows (typed) and the key of the last one as
/// the upstream prints it (none for an empty page).
struct ReadPage {
    rows: RecordBatch,
    last_key: Option<Vec<Option<String>>>,
}

/// What a page read needs, owned: it runs on a task of its own.
struct PageRequest {
    session: Option<UpstreamSession>,
    source: SourceConfig,
    upstream: UpstreamTable,
    table: Arc<TableCatalog>,
    upstream_columns: Arc<[usize]>,
    cursor: Option<Vec<Option<String>>>,
    range: SplitRange,
    asked: usize,
}

/// Reads the page `request` asks for and casts it to the table's types, on its connection (or
/// a new one, returned with the page).
async fn read_page(
    request: PageRequest,
) -> (Option<UpstreamSession>, Result<(ReadPage, CdcOffset)>) {
    let PageRequest { session, source, upstream, table, upstream_columns, cursor, range, asked } =
        request;
    let mut session = match session {
        Some(session) => session,
        None => match source.session().await {
            Ok(session) => session,
            Err(e) => return (None, Err(e)),
        },
    };
    let page = match session.snapshot_page(&upstream, cursor.as_deref(), &range, asked).await {
        Ok((page, low)) => typed_page(&table, &upstream_columns, page).map(|p| (p, low)),
        Err(e) => Err(e),
    };
    (Some(session), page)
}

/// A page as the upstream sent it (text or typed columns) as a [`ReadPage`].
fn typed_page(
    table: &TableCatalog,
    upstream_columns: &[usize],
    page: SnapshotPage,
) -> Result<ReadPage> {
    let rows = typed_batch(table, upstream_columns, |u| Ok(page.columns[u].clone()))?;
    Ok(ReadPage { rows, last_key: page.last_key })
}

/// An `_unchanged` column of `m` rows that sent every column: the materialize upserts them.
fn all_sent_list(m: usize) -> ListArray {
    let nulls = arrow::array::new_null_array(unchanged_field().data_type(), m);
    nulls.as_list::<i32>().clone()
}

/// Appends the `_unchanged` column the upsert materialize reads (see [`unchanged_field`]).
fn with_unchanged(data: RecordBatch, unchanged: ListArray) -> Result<RecordBatch> {
    let mut fields: Vec<_> = data.schema().fields().iter().cloned().collect();
    fields.push(Arc::new(unchanged_field()));
    let mut columns = data.columns().to_vec();
    columns.push(Arc::new(unchanged));
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}

/// The same fields, all nullable: change rows carry only the key for deletes.
fn nullable(schema: &SchemaRef) -> SchemaRef {
    let fields: Vec<arrow::datatypes::Field> =
        schema.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect();
    Arc::new(arrow::datatypes::Schema::new(fields))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::catalog::{ColumnCatalog, RelationKind, TableId};
    use crate::stream::barrier::BarrierManager;
    use crate::stream::test_utils::{MockSource, Pretty, barrier, dedent, run};
    use crate::types::DataType;

    fn columns(cols: &[(&str, DataType)]) -> Vec<ColumnCatalog> {
        cols.iter().map(|&(name, data_type)| ColumnCatalog::new(name, data_type)).collect()
    }

    /// The backfill of upstream `public.t (id int primary key, x text, v text)` into the table
    /// `(id int primary key, v varchar)` (upstream columns 0 and 2). The source is never
    /// connected to: these tests read no page and fill no unchanged column.
    fn config(store: &Arc<Store>, snapshot: bool) -> CdcBackfillConfig {
        let text = |n: &str| ColumnCatalog::new(n, DataType::Varchar);
        let table = TableCatalog::new_table(
            TableId(10),
            "t".into(),
            columns(&[("id", DataType::Int32), ("v", DataType::Varchar)]),
            vec![0],
            "".into(),
        );
        let mut state = TableCatalog::new_table(
            TableId(11),
            "s".into(),
            crate::stream::executor::backfill::state::cdc_columns(columns(&[(
                "id",
                DataType::Int32,
            )])),
            vec![0],
            "".into(),
        );
        state.kind = RelationKind::Internal;
        let (_manager, barrier, _recoveries) = BarrierManager::new(store.clone(), Duration::MAX);
        CdcBackfillConfig {
            source: SourceConfig::Postgres(crate::stream::test_utils::pg_source_config(
                "upstream.invalid",
                5432,
            )),
            upstream: UpstreamTable {
                schema: "public".into(),
                name: "t".into(),
                columns: vec![text("id"), text("x"), text("v")],
                upstream_types: vec!["integer".into(), "text".into(), "text".into()],
                pk: vec![0],
            },
            table: Arc::new(table),
            upstream_columns: vec![0, 2],
            state: Arc::new(state),
            batch_size: 3,
            snapshot,
            barrier,
            rate_limit: None,
            parallelism: 1,
            rows_per_split: None,
            upstream_identity: None,
            metrics: Arc::new(Metrics::default()),
        }
    }

    /// A backfill that has read no page yet (or, without a snapshot, takes every change).
    fn load(store: &Arc<Store>, snapshot: bool) -> CdcBackfill {
        let (status, _) = watch::channel(BackfillStatus::default());
        CdcBackfill::load(store.clone(), config(store, snapshot), status).unwrap()
    }

    /// The key `on_changes` compares for the row with primary key `id`.
    fn key(b: &CdcBackfill, id: i32) -> Vec<u8> {
        let text =
            |u: usize| Ok(Arc::new(StringArray::from(vec![(u == 0).then(|| id.to_string())])) as _);
        b.keys(&b.typed(text).unwrap()).unwrap().remove(0)
    }

    /// Records a snapshot page ending at `last_id` whose low offset was `low`, as a read does.
    fn read_page(b: &mut CdcBackfill, last_id: i32, low: u64) {
        read_page_of(b, 0, last_id, low);
    }

    /// [`read_page`] of split `split`.
    fn read_page_of(b: &mut CdcBackfill, split: usize, last_id: i32, low: u64) {
        let key = key(b, last_id);
        let split = &mut b.splits[split];
        split.pages.push_back(Page { last_key: key.clone(), low });
        split.cursor = Some((vec![Some(last_id.to_string())], key));
        split.last_low = low;
        split.dirty = true;
    }

    /// A backfill cut into splits at the ids `points`, none read yet.
    fn split_at(store: &Arc<Store>, points: &[i32]) -> CdcBackfill {
        let mut b = load(store, true);
        b.splits = b.splits_at(points.iter().map(i32::to_string).collect()).unwrap();
        b
    }

    /// A page of split `split` read from the upstream: `(id, v)` rows, text as the upstream
    /// sends them, asked for `asked` rows, with low offset `low`.
    fn page(
        b: &CdcBackfill,
        split: usize,
        rows: &[(i32, &str)],
        asked: usize,
        low: u64,
    ) -> PageDone {
        let ids: Vec<String> = rows.iter().map(|(id, _)| id.to_string()).collect();
        let x = vec!["x"; rows.len()];
        let v: Vec<&str> = rows.iter().map(|(_, v)| *v).collect();
        let last_key = ids.last().map(|id| vec![Some(id.clone())]);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(ids)),
            Arc::new(StringArray::from(x)),
            Arc::new(StringArray::from(v)),
        ];
        let page = SnapshotPage { columns, last_key };
        let c = &b.config;
        let page = typed_page(&c.table, &c.upstream_columns, page).unwrap();
        let page = Ok((page, CdcOffset::Postgres { lsn: low }));
        PageDone { generation: b.generation, split, asked, session: None, page }
    }

    /// Source changes, one a line: `upstream-table delete? lsn [values] [unchanged] replaces?`,
    /// `upstream-table truncate lsn`, or `upstream-table columns lsn [names]`.
    fn changes(lines: &str) -> StreamChunk {
        let lines: Vec<String> = lines
            .lines()
            .map(|line| match line.split_whitespace().collect::<Vec<_>>()[..] {
                [op, table, "truncate", lsn] => format!("{op} {table} t {lsn} [] . f t f"),
                [op, table, "columns", lsn, names] => {
                    format!("{op} {table} f {lsn} {names} . f f t")
                }
                _ => format!("{line} f f"),
            })
            .collect();
        StreamChunk::from_pretty(&format!("T B I [T] [u] B B B\n{}", lines.join("\n")))
    }

    /// What the backfill emits for `lines` (see [`changes`]), as text; `-` for nothing.
    async fn apply(b: &mut CdcBackfill, lines: &str) -> String {
        match b.on_changes(&changes(lines)).await.unwrap() {
            out if out.is_empty() => "-".into(),
            out => out.as_slice().pretty(),
        }
    }

    #[tokio::test]
    async fn changes_before_the_first_page_apply_ahead_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = load(&Store::open(dir.path()).unwrap(), true);
        assert_eq!(apply(&mut b, "+ public.t f 100 [1, x, a] . f").await, "i T [u]\n+ 1 a .");
        assert_eq!(b.splits[0].ahead.len(), 1);
    }

    #[tokio::test]
    async fn read_rows_take_newer_changes_and_rows_beyond_the_cursor_take_them_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = load(&Store::open(dir.path()).unwrap(), true);
        read_page(&mut b, 3, 100);
        let lines = "+ public.t f 150 [2, x, b] . f
                       + public.t t 150 [3, ., .] . f
                       + public.t f 150 [4, x, d] . f";
        // Deletes carry only the key; the last column is `_unchanged`.
        let expected = "i T [u]\n+ 2 b .\n- 3 . .\n+ 4 d .";
        assert_eq!(apply(&mut b, lines).await, dedent(expected));
    }

    #[tokio::test]
    async fn a_change_older_than_the_page_that_read_its_row_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = load(&Store::open(dir.path()).unwrap(), true);
        read_page(&mut b, 3, 100);
        // The page's snapshot (taken at or after LSN 100) holds the change of LSN 90.
        let lines = "+ public.t f 90  [2, x, b] . f
                       + public.t f 100 [2, x, c] . f";
        assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 2 c .");
    }

    #[tokio::test]
    async fn a_change_settles_the_pages_below_its_lsn_and_they_take_every_change() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = load(&Store::open(dir.path()).unwrap(), true);
        read_page(&mut b, 3, 100);
        read_page(&mut b, 6, 200);
        // Key 5 was read by the page of low offset 200: its snapshot holds LSN 150.
        let lines = "+ public.t f 150 [5, x, e] . f";
        assert_eq!(apply(&mut b, lines).await, "-");
        assert_eq!(b.splits[0].pages.len(), 1, "the page of low offset 100 settled");
        assert_eq!(b.splits[0].settled, Some(key(&b, 3)));
        // Rows of the settled range take every change, whatever its LSN.
        let lines = "+ public.t f 90 [2, x, b] . f
                       + public.t f 90 [5, x, e] . f";
        assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 2 b .");
    }

    #[tokio::test]
    async fn once_the_snapshot_is_finished_changes_beyond_the_cursor_pass() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = load(&Store::open(dir.path()).unwrap(), true);
        read_page(&mut b, 3, 100);
        b.splits[0].finished = true;
        b.phase = Phase::Finishing;
        // Key 2's page has not settled: its older change is still dropped.
        let lines = "+ public.t f 90 [2, x, b] . f
                       + public.t f 90 [7, x, g] . f";
        assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 7 g .");
    }

    #[tokio::test]
    async fn a_column_dropped_upstream_stops_the_table_before_its_changes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut b = load(&store, true);
        read_page(&mut b, 3, 100);
        b.splits[0].finished = true;
        b.phase = Phase::Finishing;
        // The same columns, and one more after them: followed.
        let lines = "+ public.t columns 110 [id,x,v,w]
                     + public.t f 110 [7, x, g, z] . f";
        assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 7 g .");
        assert_eq!(b.stopped, None);
        // Column x dropped: the values of later changes would land in the wrong columns.
        let lines = "+ public.t f 120 [8, x, h] . f
                     + public.t columns 120 [id,v]
                     + public.t f 120 [9, i] . f";
        assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 8 h .");
        let reason = b.stopped.clone().expect("stopped");
        assert!(reason.contains("column x was dropped or renamed upstream"), "{reason}");
        assert_eq!(b.config.metrics.cdc_table_stopped(b.config.table.id.0), Some(reason.clone()));
        assert_eq!(b.status.borrow().stopped, Some(reason));
        // And stays stopped: no change applies, no page is read.
        assert_eq!(apply(&mut b, "+ public.t f 130 [10, x, j] . f").await, "-");
        // Also after a restart, recorded with the checkpoint, while the progress is as it was.
        b.persist(Epoch(1)).unwrap();
        store.commit(Epoch(1)).unwrap();
        let mut restored = load(&store, true);
        assert_eq!(restored.stopped, b.stopped);
        assert_eq!((restored.splits.len(), restored.rows()), (1, b.rows()));
        assert_eq!(apply(&mut restored, "+ public.t f 140 [11, x, k] . f").await, "-");
        restored.phase = Phase::Reading;
        restored.splits[0].finished = false;
        assert!(restored.next_read(0).is_none());
    }

    #[tokio::test]
    async fn changes_of_other_upstream_tables_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = load(&Store::open(dir.path()).unwrap(), false);
        let lines = "+ public.u f 100 [1, x, a] . f
                       + public.t f 100 [2, x, b] . f";
        assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 2 b .");
    }

    #[tokio::test]
    async fn unchanged_upstream_columns_become_table_column_indices() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = load(&Store::open(dir.path()).unwrap(), false);
        // Upstream column 2 is table column 1; upstream column 1 is not in the table.
        let lines = "+ public.t f 100 [1, x, .] [2]    f
                       + public.t f 100 [2, ., b] [1]    f
                       + public.t f 100 [3, ., .] [1, 2] f";
        let expected = "i T [u]
                        + 1 . [1]
                        + 2 b .
                        + 3 . [1]";
        assert_eq!(apply(&mut b, lines).await, dedent(expected));
    }

    #[tokio::test]
    async fn a_replacing_update_sending_every_column_reads_nothing_upstream() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = load(&Store::open(dir.path()).unwrap(), false);
        // The upstream is never connected to: nothing is unchanged.
        let lines = "+ public.t f 100 [1, x, a] . t
                     + public.t f 100 [2, x, b] [] t";
        assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 1 a .\n+ 2 b .");
    }

    #[test]
    fn values_read_upstream_replace_the_unsent_ones_of_their_change_only() {
        let chunk = changes(
            "+ public.t f 100 [1, x, .] [2] t
             + public.u f 100 [9, y, z] .   f
             + public.t f 100 [3, ., c] [1] f",
        );
        let changes = Changes::of(&chunk).unwrap();
        // What `fetch_unchanged` reads for change 0, whose upstream row now has v = 'A'.
        let fetched = Fetched {
            at: HashMap::from([((0, 2), 0)]),
            values: StringArray::from(vec![Some("A")]),
        };
        let column = |u| fetched.gather(&changes, &[0, 2], u).unwrap();
        let text = |a: ArrayRef| {
            a.as_string::<i32>().iter().map(|v| v.map(String::from)).collect::<Vec<_>>()
        };
        let some = |v: &str| Some(v.to_owned());
        assert_eq!(text(column(0)), [some("1"), some("3")]);
        assert_eq!(text(column(2)), [some("A"), some("c")]);
        // Change 2 did not send column 1: it stays NULL, the materialize keeps the stored value.
        assert_eq!(text(column(1)), [some("x"), None]);
        let without = Fetched { at: HashMap::new(), values: StringArray::from(Vec::<&str>::new()) };
        assert_eq!(text(without.gather(&changes, &[0, 2], 2).unwrap()), [None, some("c")]);
    }

    #[tokio::test]
    async fn a_restart_applies_every_change_up_to_the_persisted_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut b = load(&store, true);
        read_page(&mut b, 3, 100);
        b.splits[0].rows = 3;
        b.persist(Epoch(1)).unwrap();
        store.commit(Epoch(1)).unwrap();

        let mut b = load(&store, true);
        assert_eq!(b.phase, Phase::Reading);
        assert_eq!(b.rows(), 3);
        // Every change to a row up to the cursor applies, and beyond it ahead of the snapshot.
        let lines = "+ public.t f 5 [3, x, c] . f
                       + public.t f 5 [4, x, d] . f";
        assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 3 c .\n+ 4 d .");
        assert_eq!(b.splits[0].ahead.len(), 1);
    }

    #[tokio::test]
    async fn without_a_snapshot_every_change_passes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (status, _) = watch::channel(BackfillStatus::default());
        let lines = "+ public.t f 100 [1, x, a] . f
                       + public.t t 101 [1, ., .] . f";
        let input = [barrier(1), Message::Chunk(changes(lines)), barrier(2)];
        let executor = CdcBackfillExecutor::new(
            MockSource::boxed(input),
            store.clone(),
            config(&store, false),
            status,
        );
        let expected = "barrier 1

                        i T [u]
                        + 1 a .
                        - 1 . .

                        barrier 2";
        assert_eq!(run(Box::new(executor)).await, dedent(expected));
    }

    #[test]
    fn a_restored_backfill_reports_its_last_offset() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut b = load(&store, true);
        read_page(&mut b, 10, 4242);
        b.persist(Epoch(1)).unwrap();
        store.commit(Epoch(1)).unwrap();
        let restored = load(&store, true);
        assert_eq!(restored.last_low(), 4242);
        assert_eq!(restored.rows(), b.rows());
    }

    #[tokio::test]
    async fn each_split_merges_changes_by_its_own_cursor_and_pages() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = split_at(&Store::open(dir.path()).unwrap(), &[5]);
        read_page_of(&mut b, 0, 3, 100);
        read_page_of(&mut b, 1, 7, 200);
        // Split 0 [.., 5) has read up to 3, split 1 [5, ..) up to 7; LSN 150 is older than
        // split 1's page, so its snapshot holds the change to 6; 4 and 8 are ahead of their
        // splits' cursors.
        let lines = "+ public.t f 150 [2, x, b] . f
                     + public.t f 150 [4, x, d] . f
                     + public.t f 150 [6, x, f] . f
                     + public.t f 150 [8, x, h] . f";
        assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 2 b .\n+ 4 d .\n+ 8 h .");
        assert_eq!((b.splits[0].ahead.len(), b.splits[1].ahead.len()), (1, 1));
        let lines = "+ public.t f 250 [6, x, f] . f";
        assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 6 f .");
    }

    #[tokio::test]
    async fn changes_ahead_of_a_page_in_flight_wait_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = split_at(&Store::open(dir.path()).unwrap(), &[5]);
        read_page_of(&mut b, 0, 1, 100);
        b.splits[0].reading = true;
        // Beyond split 0's cursor while its next page is read: applied ahead, and held to be
        // judged again once the page is applied. 7 is ahead of split 1, which reads nothing.
        let lines = "+ public.t f 150 [2, x, b] . f
                     + public.t f 250 [3, x, c] . f
                     + public.t f 250 [4, x, d] . f
                     + public.t f 250 [7, x, g] . f";
        let expected = "i T [u]\n+ 2 b .\n+ 3 c .\n+ 4 d .\n+ 7 g .";
        assert_eq!(apply(&mut b, lines).await, dedent(expected));
        // The page (low offset 200, asked for 3 rows) read 2 and 3: they overwrite what was
        // applied ahead, and 4, absent from its snapshot, is deleted. Its snapshot holds the
        // change of LSN 150 but maybe not those of 250, which apply again. It is short, so the
        // split is read to its end and the insert of 4 applies too.
        let out = b.on_page(page(&b, 0, &[(2, "b"), (3, "old")], 3, 200)).unwrap();
        let out: Vec<String> = out.iter().map(StreamChunk::to_pretty).collect();
        let expected =
            ["i T [u]\n+ 2 b .\n+ 3 old .", "i T [u]\n- 4 . .", "i T [u]\n+ 3 c .\n+ 4 d ."];
        assert_eq!(out, expected);
        assert!(b.splits[0].finished && !b.splits[1].finished);
        assert_eq!(b.phase, Phase::Reading);
        // Split 1 has no page in flight: a change ahead of its cursor applies, without waiting.
        let lines = "+ public.t f 300 [8, x, h] . f";
        assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 8 h .");
        assert!(b.splits[1].held.is_empty());
    }

    #[tokio::test]
    async fn changes_ahead_of_the_cursor_apply_at_once_and_the_page_reading_them_overwrites_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = load(&Store::open(dir.path()).unwrap(), true);
        read_page(&mut b, 2, 100);
        // Ahead of the cursor: an insert carrying every column applies at once; a delete of
        // a row the table does not hold, or an update without its unsent columns, does not.
        let lines = "+ public.t f 150 [5, x, e] . f
                     + public.t f 150 [8, x, h] . f
                     + public.t t 160 [6, ., .] . f
                     + public.t f 170 [7, x, g] [2] f";
        assert_eq!(apply(&mut b, lines).await, dedent("i T [u]\n+ 5 e .\n+ 8 h ."));
        // Rows applied ahead take every later change, the unsent columns kept from them.
        let lines = "+ public.t f 180 [5, x, e2] [2] f";
        assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 5 e2 [1]");
        // The page reading 3-5 overwrites 5 (an upsert); 8 waits for its page.
        let out = b.on_page(page(&b, 0, &[(3, "c"), (4, "d"), (5, "e3")], 3, 200)).unwrap();
        let out: Vec<String> = out.iter().map(StreamChunk::to_pretty).collect();
        assert_eq!(out, ["i T\n+ 3 c\n+ 4 d", "i T [u]\n+ 5 e3 ."]);
        assert_eq!(b.splits[0].ahead.len(), 1);
        // The last page has no 8: it was deleted upstream before the page's snapshot.
        let out = b.on_page(page(&b, 0, &[(6, "f")], 3, 300)).unwrap();
        let out: Vec<String> = out.iter().map(StreamChunk::to_pretty).collect();
        assert_eq!(out, ["i T\n+ 6 f", "i T [u]\n- 8 . ."]);
        assert!(b.splits[0].finished && b.splits[0].ahead.is_empty());
    }

    #[tokio::test]
    async fn a_delete_ahead_of_the_cursor_forgets_the_row_and_the_cap_bounds_the_rows() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = load(&Store::open(dir.path()).unwrap(), true);
        read_page(&mut b, 2, 100);
        let lines = "+ public.t f 150 [5, x, e] . f
                     + public.t t 160 [5, ., .] . f";
        assert_eq!(apply(&mut b, lines).await, dedent("i T [u]\n+ 5 e .\n- 5 . ."));
        assert!(b.splits[0].ahead.is_empty());
        // The page reading 5 again inserts it plainly: the table no longer holds it.
        let out = b.on_page(page(&b, 0, &[(5, "e")], 1, 200)).unwrap();
        let out: Vec<String> = out.iter().map(StreamChunk::to_pretty).collect();
        assert_eq!(out, ["i T\n+ 5 e"]);
        // At the cap, further rows wait for their page; rows already ahead still take changes.
        for id in 0..AHEAD_ROWS as i32 {
            let key = key(&b, 1000 + id);
            b.splits[0].ahead.insert(key, vec![ScalarValue::Int32(Some(1000 + id))]);
        }
        let lines = "+ public.t f 250 [9, x, i] . f
                     + public.t f 250 [1000, x, k] . f";
        assert_eq!(apply(&mut b, lines).await, "i T [u]\n+ 1000 k .");
    }

    #[tokio::test]
    async fn a_restart_finds_the_rows_applied_ahead_in_the_table() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut b = split_at(&store, &[5]);
        read_page_of(&mut b, 0, 2, 100);
        // Committed with the checkpoint: split 0 read up to 2; the table holds 1, 2 (read),
        // 4 (applied ahead in split 0) and 7 (ahead in split 1, which read nothing).
        b.persist(Epoch(1)).unwrap();
        let table = &b.config.table;
        let mut rows =
            StateTable::new(store.clone(), table.id, table.pk.clone(), table.dist_key_len);
        let chunk = StreamChunk::from_pretty("i T\n+ 1 a\n+ 2 b\n+ 4 d\n+ 7 g");
        rows.write_chunk(&chunk).unwrap();
        rows.commit(Epoch(1));
        store.commit(Epoch(1)).unwrap();
        let restored = load(&store, true);
        let ahead: Vec<Vec<Vec<u8>>> =
            restored.splits.iter().map(|s| s.ahead.keys().cloned().collect()).collect();
        assert_eq!(ahead, [vec![key(&b, 4)], vec![key(&b, 7)]]);
        assert_eq!(restored.splits[1].ahead[&key(&b, 7)], [ScalarValue::Int32(Some(7))]);
    }

    #[tokio::test]
    async fn a_restart_restores_every_split_where_it_stood() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut b = split_at(&store, &[5, 10]);
        read_page_of(&mut b, 0, 3, 100);
        b.splits[0].rows = 3;
        b.splits[1].finished = true;
        b.splits[1].rows = 5;
        b.persist(Epoch(1)).unwrap();
        store.commit(Epoch(1)).unwrap();

        let mut b = load(&store, true);
        let ids: Vec<&str> = b.splits.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["public.t/0", "public.t/1", "public.t/2"]);
        assert_eq!(b.rows(), 8);
        assert_eq!(
            b.splits[1].range,
            SplitRange { start: Some("5".into()), end: Some("10".into()) }
        );
        // Split 0 applies up to its cursor, finished split 1 everything, and rows beyond split
        // 0's cursor and in split 2 (nothing read yet) take their changes ahead.
        let lines = "+ public.t f 5 [3, x, c] . f
                     + public.t f 5 [4, x, d] . f
                     + public.t f 5 [9, x, i] . f
                     + public.t f 5 [12, x, l] . f";
        let expected = "i T [u]\n+ 3 c .\n+ 4 d .\n+ 9 i .\n+ 12 l .";
        assert_eq!(apply(&mut b, lines).await, dedent(expected));
        let ahead: Vec<usize> = b.splits.iter().map(|s| s.ahead.len()).collect();
        assert_eq!(ahead, [1, 0, 1]);
    }

    #[test]
    fn split_points_order_as_keys_do_not_as_text() {
        let dir = tempfile::tempdir().unwrap();
        let b = split_at(&Store::open(dir.path()).unwrap(), &[100, 9, 20, 9]);
        let ranges: Vec<(Option<&str>, Option<&str>)> =
            b.splits.iter().map(|s| (s.range.start.as_deref(), s.range.end.as_deref())).collect();
        let expected = [
            (None, Some("9")),
            (Some("9"), Some("20")),
            (Some("20"), Some("100")),
            (Some("100"), None),
        ];
        assert_eq!(ranges, expected);
        let ids: Vec<&str> = b.splits.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["public.t/0", "public.t/1", "public.t/2", "public.t/3"]);
        // Each key goes to the split whose range holds it: a bound belongs to the later split.
        let route = |id: i32| b.split_of(&key(&b, id)).unwrap();
        assert_eq!([-5, 8, 9, 19, 20, 99, 100, 1000].map(route), [0, 0, 1, 1, 2, 2, 3, 3]);
    }

    #[tokio::test]
    async fn an_upstream_truncate_ends_the_snapshot_and_every_later_change_applies() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = split_at(&Store::open(dir.path()).unwrap(), &[5]);
        read_page_of(&mut b, 0, 2, 100);
        b.splits[0].reading = true;
        let in_flight = page(&b, 0, &[(3, "c"), (4, "d")], 2, 150);
        // 3 is ahead of the cursor, applied ahead and held; then the truncate, then changes
        // committed after it, which apply whatever the cursors: the table holds nothing else.
        let lines = "+ public.t f 150 [3, x, c] . f
                     + public.t truncate 200
                     + public.t f 210 [1, x, a] . f
                     + public.t f 210 [8, x, h] . f";
        let expected = "i T [u]\n+ 3 c .\n\ntruncate\n\ni T [u]\n+ 1 a .\n+ 8 h .";
        assert_eq!(apply(&mut b, lines).await, expected);
        assert!(b.splits.iter().all(|s| s.finished && s.held.is_empty() && s.ahead.is_empty()));
        assert_eq!(b.phase, Phase::Finishing);
        // The page read across the truncate is dropped; no split reads again.
        assert!(b.on_page(in_flight).unwrap().is_empty());
        assert!(b.next_read(0).is_none());
        let lines = "+ public.t t 220 [1, ., .] . f";
        assert_eq!(apply(&mut b, lines).await, "i T [u]\n- 1 . .");
        // The checkpoint records every split finished: a restart reads no snapshot.
        b.persist(Epoch(3)).unwrap();
        assert_eq!(b.phase, Phase::Done { epoch: Epoch(3) });
    }

    #[tokio::test]
    async fn a_truncate_before_the_splits_are_planned_still_records_the_end_of_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut config = config(&store, true);
        config.parallelism = 2;
        let (status, _) = watch::channel(BackfillStatus::default());
        let mut b = CdcBackfill::load(store.clone(), config, status).unwrap();
        assert!(b.splits.is_empty(), "planned at the first page");
        assert_eq!(apply(&mut b, "+ public.t truncate 200").await, "truncate");
        b.persist(Epoch(3)).unwrap();
        store.commit(Epoch(3)).unwrap();
        let mut config = self::config(&store, true);
        config.parallelism = 2;
        let (status, _) = watch::channel(BackfillStatus::default());
        let b = CdcBackfill::load(store, config, status).unwrap();
        assert_eq!(b.phase, Phase::Done { epoch: Epoch(0) });
    }
}
