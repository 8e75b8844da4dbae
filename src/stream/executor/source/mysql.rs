//! `BinlogSourceExecutor`: the one reader of a mysql-cdc source's binlog.
//!
//! It streams the binlog from the position its state table records (the end of the last
//! transaction it emitted), and emits the changes of every table of the source's database as
//! rows of [`change_schema`](super::change::change_schema), whole transactions at a time,
//! in commit order: the same stream a Postgres source emits, so the CDC backfill and the table
//! downstream do not know which upstream they read. Changes are gathered for a few milliseconds
//! (or 4096 of them) into one chunk. On a checkpoint barrier it records the position of the last
//! transaction emitted; after a restart it streams again from there, so every change reaches the
//! tables exactly once. Nothing needs to be acknowledged upstream: a binlog is not consumed.
//! On MariaDB it also records the GTID position after that transaction and resumes by it, so a
//! failover to a replica (other binlog files, other positions) does not lose the place.
//! Upstream failures are logged and retried with backoff; a position the upstream has purged
//! is said in the log at every retry, never skipped.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use tokio::sync::mpsc;

use crate::catalog::{Epoch, TableCatalog, TableId};
use crate::connector::common::RowChange;
use crate::connector::mysql::MySqlSourceConfig;
use crate::connector::mysql::binlog::BinlogReader;
use crate::connector::offset::CdcOffset;
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

/// How long changes gather before they are emitted as one chunk.
const FLUSH_INTERVAL: Duration = Duration::from_millis(10);
/// Changes gathered after which they are emitted at once.
const FLUSH_CHANGES: usize = 4096;
/// Changes emitted since the last checkpoint after which the reader asks for the next one.
const CHECKPOINT_CHANGES: usize = 16 * 1024;

/// Reads a mysql-cdc source's binlog and emits its changes.
pub struct BinlogSourceExecutor {
    barriers: mpsc::UnboundedReceiver<Barrier>,
    config: MySqlSourceConfig,
    store: Arc<Store>,
    state: Arc<TableCatalog>,
    barrier: BarrierHandle,
    /// The source's name and where its changes are counted.
    metrics: (String, Arc<Metrics>),
    /// Where to start while the state table records no position (see
    /// [`SourceCatalog::start`](crate::catalog::SourceCatalog::start)).
    start: Option<(u64, Option<String>)>,
    /// The source's id and where a lost binlog asks for its tables to be read again.
    rebuilds: Option<(TableId, Arc<CdcRebuilds>)>,
}

impl BinlogSourceExecutor {
    /// A reader for the source `config`, keeping its position in `state`.
    pub fn new(
        barriers: mpsc::UnboundedReceiver<Barrier>,
        config: MySqlSourceConfig,
        store: Arc<Store>,
        state: Arc<TableCatalog>,
        barrier: BarrierHandle,
        metrics: (String, Arc<Metrics>),
    ) -> Self {
        Self { barriers, config, store, state, barrier, metrics, start: None, rebuilds: None }
    }

    /// With `binlog.lost = 'resnapshot'`: where a reader that moved to the binlog's end after
    /// its position was purged asks for the tables of `source` to be read again.
    pub fn with_rebuilds(mut self, source: TableId, rebuilds: Arc<CdcRebuilds>) -> Self {
        self.rebuilds = Some((source, rebuilds));
        self
    }

    /// Starts at `start` (a position and GTID position) while the state table records none:
    /// the binlog's end when the source was created. Without it, a reader that never recorded
    /// a position starts at the binlog's end of its own start.
    pub fn starting_at(mut self, start: Option<(u64, Option<String>)>) -> Self {
        self.start = start;
        self
    }
}

impl Executor for BinlogSourceExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { mut barriers, config, store, state, barrier, metrics, start, rebuilds } = *self;
        async_stream::try_stream! {
            let mut source = Source::load(config, store, &state, barrier, metrics, start)?;
            source.rebuilds = rebuilds;
            // Nothing is read before the initial barrier says which epoch this is.
            let first = barriers.recv().await.ok_or(Error::Shutdown)?;
            if first.is_checkpoint() {
                source.commit(first.epoch.prev)?;
            }
            yield Message::Barrier(first);
            let mut flush = tokio::time::interval(FLUSH_INTERVAL);
            flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let retry_at = source.backoff.retry_at();
                let step = tokio::select! {
                    biased;
                    barrier = barriers.recv() => Step::Barrier(barrier),
                    _ = flush.tick(), if !source.ready.is_empty() => Step::Flush,
                    _ = sleep_until(retry_at), if retry_at.is_some() => Step::Retry,
                    transaction = source.reader.next_transaction(), if retry_at.is_none() => {
                        Step::Transaction(transaction)
                    }
                };
                match step {
                    Step::Barrier(None) => break,
                    Step::Barrier(Some(barrier)) => {
                        if barrier.is_checkpoint() {
                            source.commit(barrier.epoch.prev)?;
                        }
                        source.rebuild_once_recorded()?;
                        yield Message::Barrier(barrier);
                    }
                    Step::Flush => yield Message::Chunk(source.flush()?),
                    Step::Retry => {
                        source.backoff.retried();
                        if source.lost {
                            source.read_on_from_the_end().await;
                        }
                    }
                    Step::Transaction(transaction) => {
                        if let Some(chunk) = source.on_transaction(transaction)? {
                            yield Message::Chunk(chunk);
                        }
                    }
                }
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "BinlogSourceExecutor"
    }
}

/// What woke the reader.
enum Step {
    Barrier(Option<Barrier>),
    Flush,
    Retry,
    Transaction(Result<crate::connector::mysql::binlog::Transaction>),
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at.into()).await;
    }
}

/// The reader's state between barriers.
struct Source {
    reader: BinlogReader,
    table: StateTable,
    state: Arc<TableCatalog>,
    /// Changes of whole transactions not emitted yet, and the position (and GTID position)
    /// they end at.
    ready: Vec<RowChange>,
    ready_at: (u64, Option<String>),
    /// The end of the last transaction emitted (or skipped, having no changes).
    emitted: (u64, Option<String>),
    /// The position recorded at the last checkpoint.
    recorded: (u64, Option<String>),
    /// Changes emitted since the last checkpoint.
    unrecorded: usize,
    backoff: Backoff,
    barrier: BarrierHandle,
    metrics: (String, Arc<Metrics>),
    config: MySqlSourceConfig,
    store: Arc<Store>,
    /// See [`BinlogSourceExecutor::with_rebuilds`].
    rebuilds: Option<(TableId, Arc<CdcRebuilds>)>,
    /// The binlog where the reader stood is purged upstream, and `binlog.lost = 'resnapshot'`.
    lost: bool,
    /// The reader moved to the binlog's end; the next checkpoint records it.
    moved: bool,
    /// The checkpoint that records the move; once committed, every job is rebuilt and the
    /// source's tables read their snapshots again.
    rebuild_after: Option<Epoch>,
}

impl Source {
    fn load(
        config: MySqlSourceConfig,
        store: Arc<Store>,
        state: &Arc<TableCatalog>,
        barrier: BarrierHandle,
        metrics: (String, Arc<Metrics>),
        created_at: Option<(u64, Option<String>)>,
    ) -> Result<Self> {
        let recorded = match offset_table::read(&store, state)? {
            Some(offset) => (offset.position, offset.gtid),
            None => created_at.unwrap_or((0, None)),
        };
        let table_store = store.clone();
        let table = state.state_table(store);
        let start =
            (recorded.0 > 0).then(|| CdcOffset::MySql { file_seq: 0, pos: 0 }.at(recorded.0));
        tracing::info!(source = %metrics.0, from = ?start.map(|s| s.to_string()), gtid = ?recorded.1, "reading the binlog");
        Ok(Self {
            reader: BinlogReader::new(config.clone(), start, recorded.1.as_deref()),
            table,
            state: state.clone(),
            ready: Vec::new(),
            ready_at: recorded.clone(),
            emitted: recorded.clone(),
            recorded,
            unrecorded: 0,
            backoff: Backoff::new(Duration::from_millis(100), Duration::from_secs(5)),
            barrier,
            metrics,
            config,
            store: table_store,
            rebuilds: None,
            lost: false,
            moved: false,
            rebuild_after: None,
        })
    }

    /// After the binlog where the reader stood was purged upstream (`binlog.lost =
    /// 'resnapshot'`): reads on from the binlog's end, which the next checkpoint records; once
    /// it is committed the source's tables read their snapshots again
    /// ([`Self::rebuild_once_recorded`]), which hold the changes the purge lost.
    async fn read_on_from_the_end(&mut self) {
        let end = match crate::connector::mysql::binlog::current_position(&self.config).await {
            Ok(end) => end,
            Err(e) => {
                tracing::warn!(source = %self.metrics.0, error = %e, "cannot read the binlog's end");
                return;
            }
        };
        tracing::warn!(source = %self.metrics.0, to = ?end, "the binlog where the source stood is purged upstream: reading on from its end; every table of the source reads its snapshot again");
        let start = CdcOffset::MySql { file_seq: 0, pos: 0 }.at(end.0);
        self.reader = BinlogReader::new(self.config.clone(), Some(start), end.1.as_deref());
        self.ready.clear();
        self.ready_at = end.clone();
        self.emitted = end;
        self.lost = false;
        self.moved = true;
        self.barrier.request_checkpoint();
    }

    /// Asks for the rebuild that reads the source's tables again, once the checkpoint that
    /// records the reader's move to the binlog's end is committed (a rebuild before would
    /// start from the purged position again).
    fn rebuild_once_recorded(&mut self) -> Result<()> {
        let Some(epoch) = self.rebuild_after else { return Ok(()) };
        if self.store.committed_epoch() < epoch {
            return Ok(());
        }
        self.rebuild_after = None;
        if let Some((source, rebuilds)) = &self.rebuilds {
            rebuilds.push_source_resnapshot(*source);
            let reason = format!(
                "the binlog where source {} stood was purged upstream; it reads on from the \
                 binlog's end",
                self.metrics.0
            );
            self.barrier.rebuild(reason)?;
        }
        Ok(())
    }

    /// Takes a transaction (or a failure to read one); returns a chunk to emit when enough
    /// changes have gathered.
    fn on_transaction(
        &mut self,
        transaction: Result<crate::connector::mysql::binlog::Transaction>,
    ) -> Result<Option<StreamChunk>> {
        let transaction = match transaction {
            Ok(transaction) => transaction,
            Err(e @ (Error::Upstream { .. } | Error::Shutdown)) => {
                if self.config.resnapshot_lost_binlog
                    && e.to_string().contains("no longer has the binlog")
                {
                    self.lost = true;
                }
                let retry_in = self.backoff.failed(Instant::now());
                tracing::warn!(source = %self.metrics.0, error = %e, at = %self.reader.position(),
                    ?retry_in, "reading the upstream binlog failed");
                self.metrics.1.cdc_error(&self.metrics.0, Some(e.to_string()));
                self.reader.reset();
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if self.backoff.succeeded() {
            self.metrics.1.cdc_error(&self.metrics.0, None);
        }
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        let behind = Duration::from_secs(now.saturating_sub(u64::from(transaction.committed_at)));
        let (source, metrics) = &self.metrics;
        metrics
            .cdc_caught_up(source, Instant::now().checked_sub(behind).unwrap_or_else(Instant::now));
        for run in transaction.changes.chunk_by(|a, b| a.table == b.table) {
            metrics.cdc_changes(source, &run[0].table, run.len() as u64);
        }
        let at = (transaction.position, transaction.gtid);
        if transaction.changes.is_empty() && self.ready.is_empty() && transaction.complete {
            // Nothing to emit: the position moves past it at once.
            self.emitted = at;
            return Ok(None);
        }
        self.ready.extend(transaction.changes);
        // A part of a large transaction is emitted, but the position to resume from stays at
        // the last commit until the transaction's own.
        if transaction.complete {
            self.ready_at = at;
        }
        if self.ready.len() >= FLUSH_CHANGES {
            return self.flush().map(Some);
        }
        Ok(None)
    }

    /// The gathered changes as one chunk.
    fn flush(&mut self) -> Result<StreamChunk> {
        let chunk = changes_chunk(&self.ready)?;
        self.unrecorded += self.ready.len();
        self.ready.clear();
        self.emitted = self.ready_at.clone();
        if self.unrecorded >= CHECKPOINT_CHANGES {
            self.barrier.request_checkpoint();
        }
        Ok(chunk)
    }

    /// Records the position of the last transaction emitted for the checkpoint of `epoch`.
    fn commit(&mut self, epoch: Epoch) -> Result<()> {
        if self.emitted != self.recorded {
            let offset = RecordedOffset { position: self.emitted.0, gtid: self.emitted.1.clone() };
            self.table.write_chunk(&offset_table::row(&self.state, &offset)?)?;
            self.recorded = self.emitted.clone();
        }
        if std::mem::take(&mut self.moved) {
            self.rebuild_after = Some(epoch);
        }
        self.unrecorded = 0;
        self.table.commit(epoch);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::RecordBatch;

    use crate::catalog::{RelationKind, TableId};
    use crate::connector::mysql::binlog::Transaction;
    use crate::storage::row_codec::RowDecoder;
    use crate::stream::barrier::BarrierManager;
    use crate::stream::test_utils::dedent;

    use super::*;

    /// The state table of a mysql-cdc source, as `CREATE SOURCE` makes it.
    fn state() -> Arc<TableCatalog> {
        let columns = offset_table::columns(true);
        let mut state =
            TableCatalog::new_table(TableId(21), "s".into(), columns, vec![0], String::new());
        state.kind = RelationKind::Internal;
        Arc::new(state)
    }

    /// A source nobody connects to: these tests feed transactions by hand.
    fn load(store: &Arc<Store>) -> Source {
        let config = MySqlSourceConfig {
            hostname: "upstream.invalid".into(),
            port: 3306,
            username: "root".into(),
            password: String::new(),
            database: "shop".into(),
            server_id: 5401,
            resnapshot_lost_binlog: false,
        };
        let barrier = BarrierManager::new(store.clone(), Duration::MAX).1;
        let metrics = ("my".to_owned(), Arc::new(Metrics::default()));
        Source::load(config, store.clone(), &state(), barrier, metrics, None).unwrap()
    }

    /// The committed rows of the state table, as a text table.
    fn stored(store: &Arc<Store>) -> String {
        let state = state();
        let table = state.state_table(store.clone());
        let (start, end) = table.full_range();
        let rows = table.iter_range(&start, &end, 16).unwrap();
        let mut decoder = RowDecoder::new(&state.types(), &state.pk, &[0, 1, 2], rows.len());
        for (key, row) in &rows {
            decoder.push(key, row).unwrap();
        }
        let batch = RecordBatch::try_new(state.full_schema(), decoder.finish()).unwrap();
        StreamChunk::inserts(batch).to_pretty()
    }

    /// A transaction of inserts of `ids` into `shop.t`, ending at `position`.
    fn transaction(ids: &[&str], position: u64, gtid: &str, complete: bool) -> Transaction {
        let changes = ids
            .iter()
            .map(|id| RowChange {
                table: "shop.t".into(),
                values: vec![Some((*id).to_owned())],
                position,
                ..RowChange::default()
            })
            .collect();
        let gtid = (!gtid.is_empty()).then(|| gtid.to_owned());
        Transaction { changes, position, committed_at: 0, gtid, complete }
    }

    #[test]
    fn transactions_gather_into_one_chunk_and_their_end_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut source = load(&store);
        assert!(
            source
                .on_transaction(Ok(transaction(&["1", "2"], 100, "0-1-7", true)))
                .unwrap()
                .is_none()
        );
        assert!(
            source.on_transaction(Ok(transaction(&["3"], 130, "0-1-8", true))).unwrap().is_none()
        );
        let expected = "T B I [T] [u] B B B I
                        + shop.t false 100 [1] . false false false 0
                        + shop.t false 100 [2] . false false false 0
                        + shop.t false 130 [3] . false false false 0";
        assert_eq!(source.flush().unwrap().to_pretty(), dedent(expected));
        source.commit(Epoch(1)).unwrap();
        store.commit(Epoch(1)).unwrap();
        assert_eq!(stored(&store), dedent("i I T\n+ 0 130 0-1-8"));
    }

    #[test]
    fn parts_of_a_transaction_go_on_but_the_position_waits_for_its_commit() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut source = load(&store);
        source.on_transaction(Ok(transaction(&["1"], 100, "0-1-7", true))).unwrap();
        source.flush().unwrap();
        // A part of the next transaction is emitted; a checkpoint now still records 100.
        source.on_transaction(Ok(transaction(&["2"], 150, "", false))).unwrap();
        let part = source.flush().unwrap();
        assert_eq!(
            part.to_pretty(),
            dedent("T B I [T] [u] B B B I\n+ shop.t false 150 [2] . false false false 0")
        );
        source.commit(Epoch(1)).unwrap();
        store.commit(Epoch(1)).unwrap();
        assert_eq!(stored(&store), dedent("i I T\n+ 0 100 0-1-7"));
        // Its commit moves it; a transaction with nothing for the source's tables moves it at
        // once, without a chunk.
        source.on_transaction(Ok(transaction(&["3"], 200, "0-1-8", true))).unwrap();
        source.flush().unwrap();
        assert!(source.on_transaction(Ok(transaction(&[], 260, "0-1-9", true))).unwrap().is_none());
        assert!(source.ready.is_empty());
        source.commit(Epoch(2)).unwrap();
        store.commit(Epoch(2)).unwrap();
        assert_eq!(stored(&store), dedent("i I T\n+ 0 260 0-1-9"));
        // A restart resumes there.
        let reloaded = load(&store);
        assert_eq!(reloaded.recorded, (260, Some("0-1-9".to_owned())));
        assert_eq!(reloaded.reader.position().position(), 260);
    }

    #[test]
    fn a_failed_read_backs_off_and_is_shown_as_the_source_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut source = load(&store);
        let failure = Error::Upstream { code: "55000", message: "binlog purged".into() };
        assert!(source.on_transaction(Err(failure)).unwrap().is_none());
        assert!(source.backoff.retry_at().is_some());
        let error = source.metrics.1.cdc_last_error("my");
        assert!(error.is_some_and(|e| e.contains("binlog purged")));
        source.on_transaction(Ok(transaction(&[], 300, "", true))).unwrap();
        assert_eq!(source.metrics.1.cdc_last_error("my"), None);
    }
}
