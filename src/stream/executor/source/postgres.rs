//! `CdcSourceExecutor`: the one reader of a Postgres source's replication slot.
//!
//! It streams the slot over a replication connection ([`ChangeStream`]) and emits every change
//! of every published table as a row of [`change_schema`], in commit order. On a barrier it
//! records the end LSN of the last transaction it emitted in its state table, forwards the
//! barrier, and, once that checkpoint is committed, lets the slot move to it (the stream reports
//! it as flushed). After a restart it streams from the committed LSN and skips transactions at
//! or below it, so every change reaches the tables exactly once. Upstream failures are logged,
//! shown in `rw_cdc_progress`, and the stream started again with backoff.
//!
//! It emits rows of [`change_schema`](super::change::change_schema) (see [`super::change`]).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::{mpsc, watch};

use crate::catalog::{Epoch, TableCatalog, TableId};
use crate::connector::common::RowChange;
use crate::connector::postgres::PgSourceConfig;
use crate::connector::postgres::replication::{Batch, ChangeStream};
use crate::connector::postgres::snapshot::durable_wal_end;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::storage::state_table::StateTable;
use crate::storage::store::Store;
use crate::stream::barrier::BarrierHandle;
use crate::stream::executor::source::backoff::Backoff;
use crate::stream::executor::source::change::changes_chunk;
use crate::stream::executor::source::offset_table::{self, RecordedOffset};
use crate::stream::executor::{BoxedMessageStream, Executor};
use crate::stream::graph::cdc::CdcRebuilds;
use crate::stream::message::{Barrier, Message, StreamChunk};

/// Bytes of WAL the offset may move past without a checkpoint; beyond them the reader asks for
/// one, so the slot releases them.
const CHECKPOINT_WAL_BYTES: u64 = 1 << 20;

/// Changes per emitted chunk, at most. A large upstream transaction goes down as several
/// chunks of one epoch (no barrier comes between them), so what each executor below holds for
/// a chunk stays bounded whatever the transaction's size.
const CHUNK_CHANGES: usize = 4096;

/// How often the upstream's WAL position is read, for the lag.
const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);
/// How long reading it may take before the connection is given up.
const SAMPLE_TIMEOUT: Duration = Duration::from_secs(10);
/// WAL positions kept waiting for the stream to pass them, at most.
const MAX_SAMPLES: usize = 64;
/// How long the stream may read nothing while the upstream's WAL is ahead of it before it is
/// taken for stuck, shown as the source's error and started again. A healthy stream reads at
/// least a keepalive (which carries the upstream's progress) well within it. Each stall in a
/// row doubles it (up to [`MAX_STALL_AFTER`]): an upstream that sends no keepalives
/// (`wal_sender_timeout = 0`) while it decodes a transaction longer than that is not started
/// over and over.
const STALL_AFTER: Duration = Duration::from_secs(60);
const MAX_STALL_AFTER: Duration = Duration::from_secs(3600);

/// The wait after a first failure; it doubles with each failure after it, up to the most.
const INITIAL_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Reads a source's slot and emits its changes.
pub struct CdcSourceExecutor {
    barriers: mpsc::UnboundedReceiver<Barrier>,
    config: PgSourceConfig,
    store: Arc<Store>,
    state: Arc<TableCatalog>,
    barrier: BarrierHandle,
    /// The source's name and where its changes are counted.
    metrics: (String, Arc<Metrics>),
    /// The source's id and where a lost slot asks for its tables to be read again.
    rebuilds: Option<(TableId, Arc<CdcRebuilds>)>,
}

impl CdcSourceExecutor {
    /// A reader for the source `config`, keeping its offset in `state`.
    pub fn new(
        barriers: mpsc::UnboundedReceiver<Barrier>,
        config: PgSourceConfig,
        store: Arc<Store>,
        state: Arc<TableCatalog>,
        barrier: BarrierHandle,
    ) -> Self {
        Self {
            barriers,
            config,
            store,
            state,
            barrier,
            metrics: Default::default(),
            rebuilds: None,
        }
    }

    /// With `slot.lost = 'resnapshot'`: where a slot created again after it was lost asks for
    /// the tables of `source` to read their snapshots again.
    pub fn with_rebuilds(mut self, source: TableId, rebuilds: Arc<CdcRebuilds>) -> Self {
        self.rebuilds = Some((source, rebuilds));
        self
    }

    /// Counts the changes read, and when the reader last caught up, as those of `source`.
    pub fn with_metrics(mut self, source: String, metrics: Arc<Metrics>) -> Self {
        self.metrics = (source, metrics);
        self
    }
}

impl Executor for CdcSourceExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { mut barriers, config, store, state, barrier, metrics, rebuilds } = *self;
        async_stream::try_stream! {
            let mut reader = Reader::load(config, store, &state, barrier)?;
            reader.metrics = metrics;
            reader.rebuilds = rebuilds;
            // Nothing is read before the initial barrier says which epoch this is.
            let first = barriers.recv().await.ok_or(Error::Shutdown)?;
            if first.is_checkpoint() {
                reader.commit(first.epoch.prev)?;
            }
            yield Message::Barrier(first);
            let mut sampler = tokio::time::interval(SAMPLE_INTERVAL);
            sampler.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let event = tokio::select! {
                    biased;
                    barrier = barriers.recv() => Event::Barrier(barrier),
                    read = reader.next() => Event::Read(read),
                    _ = sampler.tick() => Event::Sample,
                };
                match event {
                    Event::Barrier(None) => break,
                    Event::Barrier(Some(barrier)) => {
                        if barrier.is_checkpoint() {
                            reader.commit(barrier.epoch.prev)?;
                        }
                        yield Message::Barrier(barrier);
                    }
                    Event::Read(read) => {
                        for chunk in reader.accept(read)? {
                            yield Message::Chunk(chunk);
                        }
                    }
                    Event::Sample => reader.sample(),
                }
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "CdcSourceExecutor"
    }
}

/// What the executor's loop waits for.
enum Event {
    Barrier(Option<Barrier>),
    Read(Option<Result<Batch>>),
    Sample,
}

struct Reader {
    config: PgSourceConfig,
    store: Arc<Store>,
    table: StateTable,
    state: TableCatalog,
    /// The running change stream; `None` after a failure, until `retry_at`.
    stream: Option<ChangeStream>,
    /// Reads the upstream's WAL position, started at the first sample.
    sampler: Option<Sampler>,
    /// End LSN of the last transaction emitted, or a later position no transaction emitted
    /// yet can commit at or below.
    emitted: u64,
    /// The offset recorded at the last barrier.
    recorded: u64,
    /// After a failure: when to try again, and the wait after the next failure.
    backoff: Backoff,
    /// Whether the last attempt failed (its error is shown until the stream reads again).
    failing: bool,
    /// The offset the slot may move to once the checkpoint of the epoch is committed.
    advance_to: Option<(Epoch, u64)>,
    /// The last offset inside a committed checkpoint: the slot may always be moved up to it.
    durable: u64,
    /// Upstream WAL positions, oldest first, each with when it was read: once the stream has
    /// passed one, everything the upstream committed before that moment has been read.
    samples: VecDeque<(Instant, u64)>,
    /// When the stream last handed over anything (or was started).
    last_read: Instant,
    /// How long it may read nothing (see [`STALL_AFTER`]).
    stall_after: Duration,
    barrier: BarrierHandle,
    metrics: (String, Arc<Metrics>),
    /// See [`CdcSourceExecutor::with_rebuilds`].
    rebuilds: Option<(TableId, Arc<CdcRebuilds>)>,
    /// The slot was found gone upstream, and `slot.lost = 'resnapshot'`: it is created again
    /// before the stream starts again.
    slot_lost: bool,
}

impl Reader {
    fn load(
        config: PgSourceConfig,
        store: Arc<Store>,
        state: &TableCatalog,
        barrier: BarrierHandle,
    ) -> Result<Self> {
        let table = state.state_table(store.clone());
        let emitted = offset_table::recorded_position(&store, state)?;
        Ok(Self {
            config,
            store,
            table,
            state: state.clone(),
            stream: None,
            sampler: None,
            emitted,
            recorded: emitted,
            backoff: Backoff::new(INITIAL_BACKOFF, MAX_BACKOFF),
            failing: false,
            advance_to: None,
            durable: emitted,
            samples: VecDeque::new(),
            last_read: Instant::now(),
            stall_after: STALL_AFTER,
            barrier,
            metrics: Default::default(),
            rebuilds: None,
            slot_lost: false,
        })
    }

    /// The next item of the change stream, starting the stream (after the backoff of a failed
    /// one) when there is none. Cancel-safe.
    async fn next(&mut self) -> Option<Result<Batch>> {
        if self.stream.is_none() {
            if let Some(at) = self.backoff.retry_at() {
                tokio::time::sleep_until(at.into()).await;
                self.backoff.retried();
            }
            if self.slot_lost
                && let Err(e) = self.create_slot_again().await
            {
                return Some(Err(e));
            }
            // From the emitted offset: what this process emitted past the committed one is in
            // the epoch under way, and after a crash the stream starts from the committed one.
            self.stream =
                Some(ChangeStream::spawn(self.config.clone(), self.emitted, self.durable));
            self.last_read = Instant::now();
        }
        self.stream.as_mut().expect("started above").next().await
    }

    /// Takes an item of the change stream: the chunks of its new changes (at most
    /// [`CHUNK_CHANGES`] each), if any. A failure is logged and shown, and the stream started
    /// again after a backoff.
    fn accept(&mut self, read: Option<Result<Batch>>) -> Result<Vec<StreamChunk>> {
        let batch = match read {
            Some(Ok(batch)) => batch,
            Some(Err(e)) => {
                self.fail(e);
                return Ok(vec![]);
            }
            None => {
                self.fail(Error::Upstream {
                    code: "08006",
                    message: "the replication stream ended".into(),
                });
                return Ok(vec![]);
            }
        };
        self.last_read = Instant::now();
        self.stall_after = STALL_AFTER;
        if std::mem::take(&mut self.failing) {
            self.metrics.1.cdc_error(&self.metrics.0, None);
        }
        self.backoff.succeeded();
        self.confirm_committed();
        let emitted = self.emitted;
        let mut changes = batch.changes;
        // A stream started again re-sends what commits after its start, which may be less
        // than what was emitted. A table's columns come once a stream, in the first
        // transaction that changes it: they pass even when that transaction is skipped.
        changes.retain(|c| c.position > emitted || c.relation);
        self.emitted =
            changes.iter().map(|c| c.position).fold(emitted.max(batch.position), u64::max);
        self.caught_up();
        if self.emitted.saturating_sub(self.recorded) > CHECKPOINT_WAL_BYTES {
            // The slot keeps the WAL until a checkpoint records the offset.
            self.barrier.request_checkpoint();
        }
        if changes.is_empty() {
            return Ok(vec![]);
        }
        self.count(&changes);
        tracing::debug!(slot = %self.config.slot, changes = changes.len(), upto = self.emitted, "read changes");
        changes.chunks(CHUNK_CHANGES).map(changes_chunk).collect()
    }

    /// Creates the lost slot again and has every table of the source read its snapshot again
    /// (`slot.lost = 'resnapshot'`): the changes made while the slot was gone are lost to the
    /// stream, and the snapshots, read after the slot starts again, hold them. The stream
    /// forwards from the new slot's start.
    async fn create_slot_again(&mut self) -> Result<()> {
        let start = self.config.create_slot_again().await?;
        self.slot_lost = false;
        tracing::warn!(slot = %self.config.slot, ?start, "the replication slot was lost upstream: created it again; every table of the source reads its snapshot again");
        if let Some((source, rebuilds)) = &self.rebuilds {
            rebuilds.push_source_resnapshot(*source);
            let reason = format!(
                "the replication slot \"{}\" was lost upstream and created again",
                self.config.slot
            );
            self.barrier.rebuild(reason)?;
        }
        Ok(())
    }

    fn fail(&mut self, e: Error) {
        if self.config.resnapshot_lost_slot && is_slot_gone(&e) {
            self.slot_lost = true;
        }
        let e = slot_gone(e, &self.config.slot);
        let retry_in = self.backoff.failed(Instant::now());
        tracing::warn!(slot = %self.config.slot, error = %e, ?retry_in, "reading the upstream slot failed");
        self.metrics.1.cdc_error(&self.metrics.0, Some(e.to_string()));
        self.failing = true;
        self.stream = None;
    }

    /// Tells the stream the offset of the last committed checkpoint, once it is committed.
    fn confirm_committed(&mut self) {
        if let Some((epoch, lsn)) = self.advance_to
            && self.store.committed_epoch() >= epoch
        {
            self.advance_to = None;
            self.durable = self.durable.max(lsn);
        }
        if let Some(stream) = &self.stream {
            stream.confirm(self.durable);
        }
    }

    /// Takes the upstream's latest WAL position (see [`Sampler`]), for the lag
    /// (`sluice_cdc_lag_seconds`): the stream has read everything committed before it was read
    /// once its position passes it.
    fn sample(&mut self) {
        self.confirm_committed();
        let config = &self.config;
        let sampler = self.sampler.get_or_insert_with(|| Sampler::spawn(config.clone()));
        if !sampler.latest.has_changed().unwrap_or(false) {
            return;
        }
        let Some(sample) = *sampler.latest.borrow_and_update() else { return };
        if self.samples.len() == MAX_SAMPLES {
            // Far behind: the oldest sample tells the lag; drop the newest.
            self.samples.pop_back();
        }
        self.samples.push_back(sample);
        self.caught_up();
        self.check_stall(Instant::now());
    }

    /// Takes the stream for stuck when it has read nothing for [`STALL_AFTER`] while the
    /// upstream's WAL has been ahead of it all that time: the stall is shown as the source's
    /// error and the stream started again from the emitted offset (nothing is lost or read
    /// twice), never left silent.
    fn check_stall(&mut self, now: Instant) {
        let Some(&(since, position)) = self.samples.front() else { return };
        let quiet = now.saturating_duration_since(self.last_read);
        if self.stream.is_none()
            || quiet < self.stall_after
            || now.saturating_duration_since(since) < self.stall_after
        {
            return;
        }
        self.samples.clear();
        self.stall_after = (self.stall_after * 2).min(MAX_STALL_AFTER);
        self.fail(Error::Upstream {
            code: "08006",
            message: format!(
                "the replication stream read nothing for {} s while the upstream's WAL was {} \
                 bytes ahead of it; reading it again",
                quiet.as_secs(),
                position.saturating_sub(self.emitted)
            ),
        });
    }

    /// Marks the source caught up as of the latest sample the stream has passed.
    fn caught_up(&mut self) {
        let mut at = None;
        while let Some(&(when, position)) = self.samples.front() {
            if position > self.emitted {
                break;
            }
            at = Some(when);
            self.samples.pop_front();
        }
        if let Some(at) = at {
            self.metrics.1.cdc_caught_up(&self.metrics.0, at);
        }
    }

    /// Counts `changes` per upstream table (they come grouped by transaction, so runs of one
    /// table are long).
    fn count(&self, changes: &[RowChange]) {
        let (source, metrics) = &self.metrics;
        for run in changes.chunk_by(|a, b| a.table == b.table) {
            metrics.cdc_changes(source, &run[0].table, run.len() as u64);
        }
    }

    /// Records the emitted offset for the checkpoint of `epoch`; the slot may move to it once
    /// that checkpoint commits.
    fn commit(&mut self, epoch: Epoch) -> Result<()> {
        self.confirm_committed();
        if self.emitted != self.recorded {
            let offset = RecordedOffset { position: self.emitted, gtid: None };
            self.table.write_chunk(&offset_table::row(&self.state, &offset)?)?;
            self.recorded = self.emitted;
            self.advance_to = Some((epoch, self.emitted));
        }
        self.table.commit(epoch);
        Ok(())
    }
}

/// A task reading the upstream's WAL position every [`SAMPLE_INTERVAL`] on a connection of its
/// own, so a slow upstream never holds up the reader's barriers; ends when dropped.
struct Sampler {
    /// When the latest position was asked for, and the position.
    latest: watch::Receiver<Option<(Instant, u64)>>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    fn spawn(config: PgSourceConfig) -> Self {
        let (sender, latest) = watch::channel(None);
        let task = tokio::spawn(async move {
            let mut client = None;
            let mut ticker = tokio::time::interval(SAMPLE_INTERVAL);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                if client.is_none() {
                    client = config.connect().await.ok();
                }
                let Some(connection) = &client else { continue };
                let asked = Instant::now();
                match tokio::time::timeout(SAMPLE_TIMEOUT, durable_wal_end(connection)).await {
                    Ok(Ok(Some(position))) => {
                        if sender.send(Some((asked, position))).is_err() {
                            return;
                        }
                    }
                    Ok(Ok(None)) => {}
                    Ok(Err(_)) | Err(_) => client = None,
                }
            }
        });
        Self { latest, task }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Whether `e` says the source's slot is gone upstream.
/// Whether `e` says the source's slot is gone upstream: dropped, or invalidated (it kept more
/// WAL than `max_slot_wal_keep_size` allows).
fn is_slot_gone(e: &Error) -> bool {
    match e {
        Error::Upstream { code: "42704", message } => message.contains("replication slot"),
        Error::Upstream { message, .. } => {
            message.contains("can no longer get changes from replication slot")
        }
        _ => false,
    }
}

/// `e`, said plainly when it is the slot that is gone upstream (dropped behind Sluice's back):
/// changes made since are lost to the stream; snapshots read again hold them.
fn slot_gone(e: Error, slot: &str) -> Error {
    match e {
        Error::Upstream { code: "42704", message } if message.contains("replication slot") => {
            Error::Upstream {
                code: "55000",
                message: format!(
                    "the replication slot \"{slot}\" is gone from the upstream ({message}): \
                     it was dropped outside Sluice, and the changes made since are lost to this \
                     source; create the slot again upstream (pg_create_logical_replication_slot('{slot}', \
                     'pgoutput')) and run ALTER TABLE .. RESNAPSHOT for each table of the source, \
                     or create the source with slot.lost = 'resnapshot' to have Sluice do so"
                ),
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::RecordBatch;

    use crate::catalog::{RelationKind, TableId};
    use crate::storage::row_codec::RowDecoder;
    use crate::stream::barrier::BarrierManager;
    use crate::stream::test_utils::{Pretty, dedent, run};

    use super::*;
    use crate::stream::executor::source::change::tests::insert;

    /// The offset table of a source, as `CREATE SOURCE` makes it: `(partition int, lsn bigint)`.
    fn state() -> Arc<TableCatalog> {
        let columns = offset_table::columns(false);
        let mut state =
            TableCatalog::new_table(TableId(20), "s".into(), columns, vec![0], String::new());
        state.kind = RelationKind::Internal;
        Arc::new(state)
    }

    /// A source on `hostname:port`; most tests never connect to it.
    fn config(hostname: &str, port: u16) -> PgSourceConfig {
        crate::stream::test_utils::pg_source_config(hostname, port)
    }

    fn handle(store: &Arc<Store>) -> BarrierHandle {
        BarrierManager::new(store.clone(), Duration::MAX).1
    }

    /// A reader of the source's offset in `store`, as the executor loads it.
    fn load(store: &Arc<Store>) -> Reader {
        Reader::load(config("upstream.invalid", 5432), store.clone(), &state(), handle(store))
            .unwrap()
    }

    /// The committed rows of the offset table, as a text table.
    fn stored(store: &Arc<Store>) -> String {
        let state = state();
        let table = state.state_table(store.clone());
        let (start, end) = table.full_range();
        let rows = table.iter_range(&start, &end, 16).unwrap();
        let mut decoder = RowDecoder::new(&state.types(), &state.pk, &[0, 1], rows.len());
        for (key, row) in &rows {
            decoder.push(key, row).unwrap();
        }
        let batch = RecordBatch::try_new(state.full_schema(), decoder.finish()).unwrap();
        StreamChunk::inserts(batch).to_pretty()
    }

    #[test]
    fn a_checkpoint_records_the_emitted_offset() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut reader = load(&store);
        reader.emitted = 250;
        reader.commit(Epoch(1)).unwrap();
        assert_eq!(stored(&store), "i I", "durable only once the checkpoint commits");
        // The slot may move to it once epoch 1 is committed, not before.
        assert_eq!(reader.advance_to, Some((Epoch(1), 250)));
        reader.confirm_committed();
        assert_eq!(reader.durable, 0);
        store.commit(Epoch(1)).unwrap();
        assert_eq!(stored(&store), "i I\n+ 0 250");
        reader.confirm_committed();
        assert_eq!((reader.durable, reader.advance_to, reader.recorded), (250, None, 250));
    }

    #[test]
    fn a_later_checkpoint_replaces_the_recorded_offset() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut reader = load(&store);
        reader.emitted = 250;
        reader.commit(Epoch(1)).unwrap();
        reader.emitted = 300;
        reader.commit(Epoch(2)).unwrap();
        store.commit(Epoch(2)).unwrap();
        assert_eq!(stored(&store), "i I\n+ 0 300");
        assert_eq!(reader.advance_to, Some((Epoch(2), 300)));
    }

    #[test]
    fn a_checkpoint_with_nothing_new_records_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut reader = load(&store);
        reader.commit(Epoch(1)).unwrap();
        store.commit(Epoch(1)).unwrap();
        assert_eq!(stored(&store), "i I");
        assert_eq!(reader.advance_to, None);
    }

    #[test]
    fn a_restart_reads_on_from_the_committed_offset() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut reader = load(&store);
        reader.emitted = 250;
        reader.commit(Epoch(1)).unwrap();
        store.commit(Epoch(1)).unwrap();
        // `emitted` is where the stream starts: transactions ending at or below it are
        // skipped. The slot may move up to it (`durable`) at once.
        let reader = load(&store);
        let offsets = [reader.emitted, reader.recorded, reader.durable];
        assert_eq!(offsets, [250; 3]);
        assert_eq!(reader.advance_to, None);
    }

    #[test]
    fn a_restart_ignores_an_offset_whose_checkpoint_did_not_commit() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut reader = load(&store);
        reader.emitted = 250;
        reader.commit(Epoch(1)).unwrap();
        store.commit(Epoch(1)).unwrap();
        reader.emitted = 300;
        reader.commit(Epoch(2)).unwrap();
        store.discard_uncommitted(Epoch(2));
        assert_eq!(load(&store).emitted, 250);
    }

    #[tokio::test]
    async fn a_stream_that_reads_nothing_while_the_upstream_is_ahead_is_started_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut reader = load(&store);
        reader.emitted = 100;
        let start = |reader: &mut Reader, read_at: Instant, ahead_since: Instant| {
            let (emitted, durable) = (reader.emitted, reader.durable);
            reader.stream = Some(ChangeStream::spawn(reader.config.clone(), emitted, durable));
            reader.last_read = read_at;
            reader.samples = VecDeque::from([(ahead_since, 500)]);
        };
        let t0 = Instant::now();
        // Quiet for less than the limit: left alone.
        start(&mut reader, t0, t0);
        reader.check_stall(t0 + STALL_AFTER - Duration::from_secs(1));
        assert!(reader.stream.is_some() && !reader.failing);
        // Read something a while ago, but the upstream has been ahead for long: left alone.
        start(&mut reader, t0 + Duration::from_secs(30), t0);
        reader.check_stall(t0 + STALL_AFTER + Duration::from_secs(1));
        assert!(reader.stream.is_some() && !reader.failing);
        // Quiet past the limit with the upstream ahead all along: stuck.
        start(&mut reader, t0, t0);
        reader.check_stall(t0 + STALL_AFTER + Duration::from_secs(1));
        assert!(reader.stream.is_none() && reader.failing);
        assert!(reader.samples.is_empty());
        // A second stall in a row waits twice as long before the stream is started again.
        reader.failing = false;
        start(&mut reader, t0, t0);
        reader.check_stall(t0 + STALL_AFTER + Duration::from_secs(1));
        assert!(reader.stream.is_some() && !reader.failing);
        reader.check_stall(t0 + STALL_AFTER * 2 + Duration::from_secs(1));
        assert!(reader.stream.is_none() && reader.failing);
        reader.stall_after = STALL_AFTER;
        // Nothing ahead (the stream passed every sample): never stuck, however quiet.
        reader.failing = false;
        start(&mut reader, t0, t0);
        reader.samples.clear();
        reader.check_stall(t0 + STALL_AFTER * 10);
        assert!(reader.stream.is_some() && !reader.failing);
    }

    #[test]
    fn a_slot_gone_upstream_is_said_plainly_and_other_errors_pass() {
        let gone = Error::Upstream {
            code: "42704",
            message: "upstream: replication slot \"s\" does not exist".into(),
        };
        assert!(is_slot_gone(&gone));
        let said = slot_gone(gone, "s").to_string();
        assert!(said.contains("dropped outside Sluice") && said.contains("\"s\""), "{said}");
        let other = Error::Upstream { code: "42704", message: "upstream: type x".into() };
        assert!(!is_slot_gone(&other));
        assert_eq!(slot_gone(other, "s").to_string(), "upstream: type x");
        let invalidated = Error::Upstream {
            code: "55000",
            message: "upstream: can no longer get changes from replication slot \"s\"".into(),
        };
        assert!(is_slot_gone(&invalidated));
    }

    #[tokio::test]
    async fn a_failed_stream_backs_off_and_is_not_started_again_within_the_backoff() {
        // A local port nothing listens on: connecting fails at once.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut reader =
            Reader::load(config("127.0.0.1", port), store.clone(), &state(), handle(&store))
                .unwrap();
        reader.metrics.0 = "s".into();
        let before = Instant::now();
        let read = reader.next().await;
        assert!(matches!(read, Some(Err(_))), "{read:?}");
        assert!(reader.accept(read).unwrap().is_empty());
        assert!(reader.stream.is_none() && reader.failing);
        assert!(reader.backoff.retry_at().unwrap() >= before + Duration::from_millis(100));
        assert_eq!(reader.backoff.next_wait(), Duration::from_millis(200));
        assert!(reader.metrics.1.cdc_last_error("s").is_some(), "the error is shown");
        // Before `retry_at`, nothing is started (a failed attempt would double the backoff).
        reader.backoff.wait_until(Instant::now() + Duration::from_secs(60));
        let waited = tokio::time::timeout(Duration::from_millis(100), reader.next()).await;
        assert!(waited.is_err() && reader.stream.is_none());
        assert_eq!(reader.backoff.next_wait(), Duration::from_millis(200));
        for _ in 0..4 {
            reader.backoff.failed(Instant::now());
        }
        reader.backoff.retried();
        let read = reader.next().await;
        reader.accept(read).unwrap();
        assert_eq!(reader.backoff.next_wait(), Duration::from_secs(5), "the backoff is capped");
        // A batch read clears the error and the backoff.
        reader.accept(Some(Ok(Batch::default()))).unwrap();
        assert!(reader.metrics.1.cdc_last_error("s").is_none() && !reader.failing);
        assert_eq!(reader.backoff.next_wait(), INITIAL_BACKOFF);
    }

    #[test]
    fn a_batch_emits_what_commits_after_the_offset_and_moves_the_offset_to_its_position() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut reader = load(&store);
        reader.emitted = 100;
        // A stream started again at 100 re-sends the transaction ending at 100.
        let changes = vec![
            insert("public.t", 100, &[Some("1")]),
            insert("public.t", 130, &[Some("2")]),
            insert("public.u", 130, &[Some("3")]),
        ];
        let chunks = reader.accept(Some(Ok(Batch { changes, position: 150 }))).unwrap();
        let [chunk] = &chunks[..] else { panic!("{chunks:?}") };
        let expected = "T B I [T] [u] B B B I
                        + public.t false 130 [2] . false false false 0
                        + public.u false 130 [3] . false false false 0";
        assert_eq!(chunk.to_pretty(), dedent(expected));
        assert_eq!(reader.emitted, 150, "nothing commits at or below 150 unsent");
        // A keepalive's position alone moves the offset, with nothing to emit.
        assert!(
            reader.accept(Some(Ok(Batch { changes: vec![], position: 400 }))).unwrap().is_empty()
        );
        assert_eq!(reader.emitted, 400);
        // An older position does not move it back.
        reader.accept(Some(Ok(Batch { changes: vec![], position: 90 }))).unwrap();
        assert_eq!(reader.emitted, 400);
    }

    #[test]
    fn a_large_transaction_goes_down_as_bounded_chunks_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut reader = load(&store);
        let values: Vec<String> = (0..CHUNK_CHANGES + 1).map(|i| i.to_string()).collect();
        let changes = values.iter().map(|v| insert("public.t", 200, &[Some(v.as_str())])).collect();
        let chunks = reader.accept(Some(Ok(Batch { changes, position: 200 }))).unwrap();
        let sizes: Vec<usize> = chunks.iter().map(StreamChunk::len).collect();
        assert_eq!(sizes, [CHUNK_CHANGES, 1]);
        let last = "T B I [T] [u] B B B I\n+ public.t false 200 [4096] . false false false 0";
        assert_eq!(chunks[1].to_pretty(), last);
        assert_eq!(reader.emitted, 200);
    }

    #[test]
    fn the_source_is_caught_up_as_of_the_last_upstream_position_the_stream_passed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut reader = load(&store);
        reader.metrics.0 = "s".into();
        let start = Instant::now() - Duration::from_secs(3);
        let at = |ms| start + Duration::from_millis(ms);
        reader.samples = [(at(0), 100), (at(1000), 200), (at(2000), 300)].into();
        reader.emitted = 250;
        reader.caught_up();
        assert_eq!(reader.samples, [(at(2000), 300)], "passed 100 and 200");
        let lag = reader.metrics.1.cdc_lag_seconds("s").unwrap();
        assert!((2.0..2.5).contains(&lag), "caught up as of 2 s ago: {lag}");
    }

    /// A source executor on `store`, fed barriers through the returned sender.
    fn executor(store: &Arc<Store>) -> (mpsc::UnboundedSender<Barrier>, Box<dyn Executor>) {
        let (barriers, barrier_rx) = mpsc::unbounded_channel();
        let config = config("upstream.invalid", 5432);
        let source =
            CdcSourceExecutor::new(barrier_rx, config, store.clone(), state(), handle(store));
        (barriers, Box::new(source))
    }

    #[tokio::test]
    async fn nothing_is_emitted_before_the_first_barrier() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (barriers, source) = executor(&store);
        let mut out = source.execute();
        // Five poll intervals pass without a message.
        let waited = tokio::time::timeout(Duration::from_millis(100), out.next()).await;
        assert!(waited.is_err(), "emitted {:?}", waited.unwrap().map(|m| m.unwrap().pretty()));
        barriers.send(Barrier::checkpoint(Epoch(1))).unwrap();
        assert_eq!(out.next().await.unwrap().unwrap().pretty(), "barrier 1");
        // Dropped before the next poll, so nothing connects.
        drop(barriers);
        assert!(out.next().await.is_none());
    }

    #[tokio::test]
    async fn without_a_first_barrier_the_stream_fails_with_shutdown() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (barriers, source) = executor(&store);
        drop(barriers);
        assert_eq!(run(source).await, "error: the server is shutting down");
    }

    #[tokio::test]
    async fn barriers_are_forwarded_in_order_and_the_stream_ends_with_their_channel() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (barriers, source) = executor(&store);
        barriers.send(Barrier::initial(Epoch(0), Epoch(1))).unwrap();
        barriers.send(Barrier::checkpoint(Epoch(1))).unwrap();
        barriers.send(Barrier::checkpoint(Epoch(2))).unwrap();
        drop(barriers);
        // Queued barriers go before any poll of the upstream.
        assert_eq!(run(source).await, dedent("barrier 0\n\nbarrier 1\n\nbarrier 2"));
    }
}
