//! `ArrangementBackfillExecutor` (the stream scan): a view's input from an upstream relation.
//!
//! It reads the upstream's stored rows (its arrangement) vnode by vnode in key order, and merges
//! the upstream's live changes arriving meanwhile, so the view sees every row exactly once.
//!
//! Per vnode the state is `NotStarted`, `InProgress(position)` or `Completed`, persisted at every
//! checkpoint in the progress table `vnode | upstream pk | backfill_finished | row_count` (no row
//! means not started). Within an epoch the executor reads snapshot pages from the state committed
//! at the previous barrier and buffers upstream chunks; at the barrier it emits the buffered
//! changes by the rule
//!
//! - vnode `Completed`: emit;
//! - vnode `NotStarted`: drop (a later snapshot read sees the change);
//! - vnode `InProgress(p)`: emit iff the row's key is `<= p` (it was read already), else drop;
//!   an update whose halves land on different sides becomes a plain insert or delete;
//!
//! then persists the positions, forwards the barrier, waits until the epoch it ended is
//! committed and continues from a snapshot of it. An epoch in which no change arrived (the
//! upstream wrote nothing) does not wait: the snapshot in hand still is the upstream as of that
//! epoch, so reading goes on from it while the epoch commits. Once every vnode is complete (and that is
//! persisted) it passes upstream messages straight through.
//!
//! A scan that comes after others in its view's backfill order ([`crate::stream::graph::order`])
//! reads nothing while its gate ([`StartGate`]) is shut: its vnodes stay `NotStarted`, so it
//! drops every change and passes barriers on, and it starts reading, mid-epoch or not, once the
//! scans before it have read theirs.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::scalar::ScalarValue;
use futures::StreamExt;
use tokio::sync::watch;

use crate::catalog::{Epoch, TableCatalog, VirtualNode};
use crate::error::{Error, Result};
use crate::storage::keycodec::{encode_keys, vnode_in_key, vnode_prefix};
use crate::storage::row_codec::RowDecoder;
use crate::storage::state_table::StateTable;
use crate::storage::store::Store;
use crate::storage::store::snapshot::ReadSnapshot;
use crate::stream::barrier::BarrierHandle;
use crate::stream::batch_with_rows;
use crate::stream::executor::backfill::order::StartGate;
use crate::stream::executor::backfill::state::{VnodeProgress, read_rows};
use crate::stream::executor::backfill::status::{
    BackfillStatus, CommittedRows, RateLimiter, RateMeter,
};
use crate::stream::executor::filter::mask_chunk;
use crate::stream::executor::{BoxedExecutor, BoxedMessageStream, Executor, first_barrier};
use crate::stream::message::{Barrier, Message, StreamChunk, unexpected_truncate};

/// Rows read from the snapshot per page, unless the config says otherwise
/// ([`BackfillConfig::page_rows`]). Each page opens a RocksDB iterator and seeks it, and goes
/// downstream as one chunk: fewer, larger pages cost less per row.
pub const PAGE_ROWS: usize = 8192;

/// Where the backfill of one vnode stands.
#[derive(Debug, Clone, PartialEq)]
enum VnodeState {
    NotStarted,
    /// Rows up to and including the storage key `key` (whose primary key is `pk`) were read.
    InProgress {
        key: Vec<u8>,
        pk: Vec<ScalarValue>,
    },
    Completed,
}

/// The backfill of one vnode, as this executor tracks it.
#[derive(Debug, Clone)]
struct Vnode {
    state: VnodeState,
    rows: u64,
    dirty: bool,
}

/// How the executor is set up.
pub struct BackfillConfig {
    /// The relation whose stored rows and changes are read.
    pub upstream_table: Arc<TableCatalog>,
    /// Storage indices of the upstream columns this scan outputs, in output order.
    pub output_indices: Vec<usize>,
    /// Schema of the output rows.
    pub output_schema: SchemaRef,
    /// The progress table's catalog entry.
    pub progress_table: Arc<TableCatalog>,
    /// Snapshot rows per second; `None` for no limit, `Some(0)` pauses the backfill.
    pub rate_limit: Option<u64>,
    /// The most rows a snapshot page reads (and a chunk of them holds): [`PAGE_ROWS`].
    pub page_rows: usize,
    /// The vnodes this actor backfills (and whose upstream changes it receives).
    pub vnodes: Vec<VirtualNode>,
    /// Asks for an early checkpoint once the snapshot is read, so completion is recorded
    /// without waiting out the barrier interval.
    pub barrier: BarrierHandle,
    /// Holds the reading back until the scans this one waits for have read theirs
    /// ([`crate::stream::graph::order`]); `None` when it waits for none and none for it.
    pub order: Option<StartGate>,
}

/// The backfilling stream scan.
pub struct ArrangementBackfillExecutor {
    upstream: BoxedExecutor,
    store: Arc<Store>,
    config: BackfillConfig,
    status: watch::Sender<BackfillStatus>,
}

impl ArrangementBackfillExecutor {
    /// A scan of `config.upstream_table` fed by `upstream`, its change stream.
    pub fn new(
        upstream: BoxedExecutor,
        store: Arc<Store>,
        config: BackfillConfig,
        status: watch::Sender<BackfillStatus>,
    ) -> Self {
        Self { upstream, store, config, status }
    }
}

impl Executor for ArrangementBackfillExecutor {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { upstream, store, config, status } = *self;
        async_stream::try_stream! {
            let mut upstream = upstream.execute();
            let first = first_barrier(&mut upstream, "a stream scan").await?;
            let prev = first.epoch.prev;
            yield Message::Barrier(first);
            // A rebuilt job's progress is committed with the first barrier's epoch.
            store.wait_committed(prev).await?;
            let mut backfill = Backfill::load(store, config, status)?;
            if !backfill.is_finished() {
                let _ticket = backfill.config.barrier.backfilling();
                backfill.start_epoch(prev, false).await?;
                while let Some(msg) = backfill.next_message(&mut upstream).await? {
                    let barrier = match msg {
                        Message::Barrier(barrier) => barrier,
                        other => {
                            yield other;
                            continue;
                        }
                    };
                    // No change arrived this epoch: the upstream wrote nothing in it.
                    let quiet = backfill.buffer.is_empty();
                    for chunk in backfill.flush_buffer()? {
                        yield Message::Chunk(chunk);
                    }
                    backfill.persist(barrier.epoch.prev)?;
                    backfill.apply_throttle(&barrier);
                    let prev = barrier.epoch.prev;
                    yield Message::Barrier(barrier);
                    if backfill.is_finished() {
                        break;
                    }
                    backfill.start_epoch(prev, quiet).await?;
                }
            }
            // Steady state: the view follows the upstream.
            while let Some(msg) = upstream.next().await {
                match msg? {
                    Message::Chunk(chunk) => yield Message::Chunk(backfill.project(&chunk)?),
                    other => yield other,
                }
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "ArrangementBackfillExecutor"
    }
}

/// The state machine of one backfill.
struct Backfill {
    store: Arc<Store>,
    config: BackfillConfig,
    progress_table: StateTable,
    vnodes: Vec<Vnode>,
    /// The owned vnodes, in the order they are read.
    owned: Vec<usize>,
    /// Index into `owned` of the first vnode not yet completed.
    cursor: usize,
    /// Snapshot of the epoch before the current one; `None` before the first barrier.
    snapshot: Option<ReadSnapshot>,
    /// Upstream changes of the current epoch.
    buffer: Vec<StreamChunk>,
    /// Snapshot rows read in this epoch.
    read_this_epoch: usize,
    /// This epoch has asked for its checkpoint.
    asked_checkpoint: bool,
    limiter: RateLimiter,
    status: watch::Sender<BackfillStatus>,
    meter: RateMeter,
    /// The rows read, as far as committed checkpoints record them.
    shown_rows: CommittedRows,
    finished_persisted: bool,
    /// Held back by its gate: the scans it waits for are still reading.
    held: bool,
}

/// What the executor does next.
enum Step {
    Upstream(Option<Result<Message>>),
    ReadSnapshot,
}

impl Backfill {
    /// Loads the persisted progress (committed at the last checkpoint).
    fn load(
        store: Arc<Store>,
        config: BackfillConfig,
        status: watch::Sender<BackfillStatus>,
    ) -> Result<Self> {
        let progress_table = config.progress_table.state_table(store.clone());
        let mut vnodes = vec![
            Vnode { state: VnodeState::NotStarted, rows: 0, dirty: false };
            VirtualNode::COUNT
        ];
        let persisted = read_rows(&config.progress_table, &progress_table)?;
        for row in 0..persisted.num_rows() {
            let progress = VnodeProgress::decode(&persisted, row)?;
            let state = match progress.cursor {
                Some(pk) => {
                    let pk_columns =
                        pk.iter().map(|v| v.to_array()).collect::<Result<Vec<_>, _>>()?;
                    let table = &config.upstream_table;
                    let key = encode_keys(table.id, &pk_columns, 1, table.dist_key_len)?.remove(0);
                    VnodeState::InProgress { key, pk }
                }
                None => VnodeState::Completed,
            };
            let vnode = Vnode { state, rows: progress.rows, dirty: false };
            vnodes[progress.vnode.0 as usize] = vnode;
        }
        let owned: Vec<usize> = config.vnodes.iter().map(|v| v.0 as usize).collect();
        let cursor = owned
            .iter()
            .position(|&v| vnodes[v].state != VnodeState::Completed)
            .unwrap_or(owned.len());
        let finished_persisted = cursor == owned.len();
        let mut config = config;
        let held = match &mut config.order {
            Some(gate) if cursor == owned.len() => {
                gate.count_out();
                false
            }
            Some(gate) => !gate.is_open(),
            None => false,
        };
        let mut backfill = Self {
            limiter: RateLimiter::new(config.rate_limit),
            store,
            config,
            progress_table,
            vnodes,
            owned,
            cursor,
            snapshot: None,
            buffer: Vec::new(),
            read_this_epoch: 0,
            asked_checkpoint: false,
            status,
            meter: RateMeter::default(),
            shown_rows: CommittedRows::default(),
            finished_persisted,
            held,
        };
        backfill.report(Epoch(0), finished_persisted.then_some(Epoch(0)));
        Ok(backfill)
    }

    /// True once every vnode is complete and that is committed to the progress table.
    fn is_finished(&self) -> bool {
        self.finished_persisted
    }

    /// Starts an epoch whose snapshot reads see the upstream as of `prev`: from a snapshot of
    /// `prev` once it is committed. But when the upstream wrote nothing since the snapshot in
    /// hand was taken (`quiet`: no change arrived in the epoch `prev` ended, nor in those
    /// before it since the snapshot), that snapshot already is the upstream as of `prev`, so
    /// while `prev` commits reading goes on from it. The snapshot is renewed at the first
    /// epoch start that finds its epoch committed, so it pins few old versions of other tables'
    /// rows.
    async fn start_epoch(&mut self, prev: Epoch, quiet: bool) -> Result<()> {
        let keep = quiet && self.snapshot.is_some() && self.store.committed_epoch() < prev;
        if !keep {
            let mut committed = self.store.subscribe_committed();
            committed.wait_for(|c| *c >= prev).await.map_err(|_| Error::Shutdown)?;
            self.snapshot = Some(self.store.snapshot());
        }
        self.read_this_epoch = 0;
        self.asked_checkpoint = false;
        self.limiter.refill();
        Ok(())
    }

    /// Takes a new rate limit for this backfill's job from the barrier, if it carries one.
    fn apply_throttle(&mut self, barrier: &Barrier) {
        let Some(job) = self.config.progress_table.owner else { return };
        if let Some(limit) = barrier.throttle_of(job) {
            tracing::info!(%job, ?limit, "backfill rate limit changed");
            self.limiter.set_limit(limit);
        }
    }

    /// True when this epoch has read enough (see [`super::EPOCH_ROWS`]).
    fn epoch_full(&self) -> bool {
        super::epoch_full(self.read_this_epoch, &self.store)
    }

    /// The most snapshot rows the next page may read (0: not now).
    fn page_budget(&self) -> usize {
        if self.held || self.cursor == self.owned.len() || self.epoch_full() {
            return 0;
        }
        self.limiter.budget(self.config.page_rows)
    }

    /// The next message to emit downstream; upstream chunks are buffered, snapshot pages
    /// emitted, and a barrier returned for the caller to flush and persist around.
    async fn next_message(&mut self, upstream: &mut BoxedMessageStream) -> Result<Option<Message>> {
        loop {
            let can_read = self.page_budget() > 0;
            if !can_read && !self.asked_checkpoint && self.epoch_full() {
                self.config.barrier.request_checkpoint();
                self.asked_checkpoint = true;
            }
            let step = if can_read && self.read_this_epoch == 0 {
                // At least one page per epoch, so long runs of deleted keys cannot stall it.
                Step::ReadSnapshot
            } else if can_read {
                tokio::select! {
                    biased;
                    msg = upstream.next() => Step::Upstream(msg),
                    _ = std::future::ready(()) => Step::ReadSnapshot,
                }
            } else if let Some(gate) = self.config.order.as_mut().filter(|_| self.held) {
                tokio::select! {
                    msg = upstream.next() => Step::Upstream(msg),
                    () = gate.opened() => {
                        tracing::debug!(table = %self.config.upstream_table.name, "the scans before this one have read; reading");
                        self.held = false;
                        continue;
                    }
                }
            } else {
                Step::Upstream(upstream.next().await)
            };
            match step {
                Step::Upstream(None) => return Ok(None),
                Step::Upstream(Some(msg)) => match msg? {
                    Message::Chunk(chunk) => self.buffer.push(chunk),
                    Message::Watermark(_) => {}
                    Message::Truncate => {
                        return Err(unexpected_truncate("an arrangement backfill"));
                    }
                    barrier @ Message::Barrier(_) => return Ok(Some(barrier)),
                },
                Step::ReadSnapshot => {
                    if let Some(chunk) = self.read_page()? {
                        return Ok(Some(Message::Chunk(chunk)));
                    }
                }
            }
        }
    }

    /// Reads the next page of the vnode at the cursor; a short page completes the vnode.
    fn read_page(&mut self) -> Result<Option<StreamChunk>> {
        let limit = self.page_budget();
        let current = self.owned[self.cursor];
        let vnode = VirtualNode(current as u16);
        let table = &self.config.upstream_table;
        let start = match &self.vnodes[current].state {
            VnodeState::InProgress { key, .. } => successor(key),
            _ => vnode_prefix(table.id, vnode).to_vec(),
        };
        let end = vnode_end(table.id, vnode);
        let types = table.types();
        // Only the columns the page is emitted with are decoded, and the key of a full page's
        // last row, where the vnode's next page starts (a short page completes the vnode).
        let mut needed = self.config.output_indices.clone();
        needed.sort_unstable();
        needed.dedup();
        let mut decoder = RowDecoder::widened(&types, &table.pk, &needed, limit, &table.widened);
        let mut last_pk = RowDecoder::widened(&types, &table.pk, &table.pk, 1, &table.widened);
        let snapshot = self.snapshot.as_ref().expect("an epoch has started");
        let mut rows = 0;
        let last = snapshot.scan_once(&start, &end, limit, |k, v| {
            rows += 1;
            if rows == limit {
                last_pk.push(k, v)?;
            }
            decoder.push(k, v)
        })?;
        let decoded = decoder.finish();
        let column = |i: usize| decoded[needed.binary_search(&i).expect("decoded")].clone();
        let output: Vec<ArrayRef> = self.config.output_indices.iter().map(|&i| column(i)).collect();
        self.read_this_epoch += rows.max(1);
        self.limiter.consume(rows);
        let progress = &mut self.vnodes[current];
        progress.dirty = true;
        progress.rows += rows as u64;
        if let Some(key) = last.filter(|_| rows == limit) {
            let pk = last_pk
                .finish()
                .iter()
                .map(|c| ScalarValue::try_from_array(c, 0))
                .collect::<datafusion::error::Result<Vec<_>>>()?;
            progress.state = VnodeState::InProgress { key, pk };
        }
        if rows < limit {
            progress.state = VnodeState::Completed;
            self.cursor += 1;
            while self.cursor < self.owned.len()
                && self.vnodes[self.owned[self.cursor]].state == VnodeState::Completed
            {
                self.cursor += 1;
            }
            if self.cursor == self.owned.len() {
                self.config.barrier.request_checkpoint();
                if let Some(gate) = &mut self.config.order {
                    gate.count_out();
                }
            }
        }
        if rows == 0 {
            return Ok(None);
        }
        let data = batch_with_rows(self.config.output_schema.clone(), output, rows)?;
        Ok(Some(StreamChunk::inserts(data)))
    }

    /// Applies the merge rule to the buffered upstream changes of this epoch.
    fn flush_buffer(&mut self) -> Result<Vec<StreamChunk>> {
        let table = self.config.upstream_table.clone();
        let mut out = Vec::new();
        for chunk in std::mem::take(&mut self.buffer) {
            let pk: Vec<ArrayRef> = table.pk.iter().map(|&i| chunk.columns()[i].clone()).collect();
            let keys = encode_keys(table.id, &pk, chunk.len(), table.dist_key_len)?;
            let emit = |i: usize| {
                let key = &keys[i];
                match &self.vnodes[vnode_in_key(key).0 as usize].state {
                    VnodeState::Completed => true,
                    VnodeState::NotStarted => false,
                    VnodeState::InProgress { key: position, .. } => key <= position,
                }
            };
            if let Some(kept) = mask_chunk(&chunk, emit)? {
                out.push(self.project(&kept)?);
            }
        }
        Ok(out)
    }

    /// An upstream chunk narrowed to the scan's output columns.
    fn project(&self, chunk: &StreamChunk) -> Result<StreamChunk> {
        let output: Vec<ArrayRef> =
            self.config.output_indices.iter().map(|&i| chunk.columns()[i].clone()).collect();
        let data = batch_with_rows(self.config.output_schema.clone(), output, chunk.len())?;
        Ok(StreamChunk::new(chunk.ops().to_vec(), data))
    }

    /// Writes the progress rows that changed in this epoch and commits the progress table.
    fn persist(&mut self, epoch: Epoch) -> Result<()> {
        let dirty: Vec<usize> =
            self.owned.iter().copied().filter(|&v| self.vnodes[v].dirty).collect();
        if !dirty.is_empty() {
            let batch = self.progress_batch(&dirty)?;
            self.progress_table.write_chunk(&StreamChunk::inserts(batch))?;
            for &v in &dirty {
                self.vnodes[v].dirty = false;
            }
        }
        self.progress_table.commit(epoch);
        let done = self.cursor == self.owned.len();
        if done {
            self.finished_persisted = true;
        }
        self.report(epoch, done.then_some(epoch));
        Ok(())
    }

    /// The progress rows of the vnodes `dirty`.
    fn progress_batch(&self, dirty: &[usize]) -> Result<RecordBatch> {
        let rows: Vec<VnodeProgress> = dirty
            .iter()
            .map(|&v| VnodeProgress {
                vnode: VirtualNode(v as u16),
                cursor: match &self.vnodes[v].state {
                    VnodeState::InProgress { pk, .. } => Some(pk.clone()),
                    _ => None,
                },
                finished: self.vnodes[v].state == VnodeState::Completed,
                rows: self.vnodes[v].rows,
            })
            .collect();
        VnodeProgress::encode(&rows, &self.config.progress_table.full_schema())
    }

    fn report(&mut self, epoch: Epoch, finished: Option<Epoch>) {
        let rows = self.owned.iter().map(|&v| self.vnodes[v].rows).sum();
        let rows = self.shown_rows.record(epoch, rows, self.store.committed_epoch());
        let (rows_per_second, idle_checkpoints) = self.meter.sample(rows);
        let units_done =
            self.owned.iter().filter(|&&v| self.vnodes[v].state == VnodeState::Completed).count()
                as u32;
        self.status.send_replace(BackfillStatus {
            rows,
            finished,
            rows_per_second,
            rate_limit: self.limiter.limit(),
            idle_checkpoints,
            units_done,
            units_total: self.owned.len() as u32,
            upstream_error: None,
            upstream_offset: None,
            stopped: None,
        });
    }
}

/// The smallest key greater than `key`.
fn successor(key: &[u8]) -> Vec<u8> {
    let mut next = key.to_vec();
    next.push(0);
    next
}

/// The first key after every key of `vnode` of `table`.
fn vnode_end(table: crate::catalog::TableId, vnode: VirtualNode) -> Vec<u8> {
    match vnode.0.checked_add(1).filter(|v| (*v as usize) < VirtualNode::COUNT) {
        Some(next) => vnode_prefix(table, VirtualNode(next)).to_vec(),
        None => (table.0 + 1).to_be_bytes().to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use super::*;
    use crate::catalog::{ColumnCatalog, RelationKind, TableId};
    use crate::storage::keycodec::vnode_of;
    use crate::stream::barrier::BarrierManager;
    use crate::stream::executor::backfill::order::OrderGates;
    use crate::stream::executor::receiver::ReceiverExecutor;
    use crate::stream::message::Mutation;
    use crate::stream::test_utils::{MockSource, Pretty, barrier, chunk, dedent, schema};
    use crate::types::DataType;

    const UPSTREAM: TableId = TableId(1);
    const PROGRESS: TableId = TableId(2);
    const JOB: TableId = TableId(3);

    fn columns(cols: &[(&str, DataType)]) -> Vec<ColumnCatalog> {
        cols.iter().map(|&(name, data_type)| ColumnCatalog::new(name, data_type)).collect()
    }

    /// The upstream `(k int primary key, v bigint)`, all rows in one vnode (no distribution
    /// key), so the snapshot is read in `k` order.
    fn upstream_table() -> Arc<TableCatalog> {
        let columns = columns(&[("k", DataType::Int32), ("v", DataType::Int64)]);
        let mut table = TableCatalog::new_table(UPSTREAM, "t".into(), columns, vec![0], "".into());
        table.dist_key_len = 0;
        Arc::new(table)
    }

    /// The progress table `vnode | k | backfill_finished | row_count`, as the planner makes it.
    fn progress_table() -> Arc<TableCatalog> {
        let columns = columns(&[
            ("vnode", DataType::Int32),
            ("k", DataType::Int32),
            ("backfill_finished", DataType::Boolean),
            ("row_count", DataType::Int64),
        ]);
        let mut table = TableCatalog::new_table(PROGRESS, "p".into(), columns, vec![0], "".into());
        table.kind = RelationKind::Internal;
        table.owner = Some(JOB);
        Arc::new(table)
    }

    /// The vnode of every upstream row.
    fn the_vnode() -> VirtualNode {
        let vnode = vnode_of(&[]);
        assert_eq!(vnode, VirtualNode(0), "the progress rows below name vnode 0");
        vnode
    }

    /// Writes `rows` (a text table) into `table` and commits them with epoch `epoch`.
    fn fill(store: &Arc<Store>, table: &TableCatalog, rows: &str, epoch: u64) {
        let mut state = table.state_table(store.clone());
        state.write_chunk(&StreamChunk::from_pretty(rows)).unwrap();
        state.commit(Epoch(epoch));
        store.commit(Epoch(epoch)).unwrap();
    }

    /// A store whose upstream holds `rows` and whose progress table holds `progress`, both
    /// committed with epoch 0.
    fn store_with(dir: &tempfile::TempDir, rows: &str, progress: &str) -> Arc<Store> {
        let store = Store::open(dir.path()).unwrap();
        fill(&store, &upstream_table(), rows, 0);
        fill(&store, &progress_table(), progress, 0);
        store
    }

    /// A backfill of the upstream's vnode, reading at most `rate_limit` rows a second.
    fn backfill(
        store: &Arc<Store>,
        rate_limit: Option<u64>,
        input: impl IntoIterator<Item = Message>,
    ) -> BoxedExecutor {
        backfill_after(store, rate_limit, MockSource::boxed(input), None)
    }

    /// A backfill of the upstream's vnode fed by `upstream`, held back by `order`.
    fn backfill_after(
        store: &Arc<Store>,
        rate_limit: Option<u64>,
        upstream: BoxedExecutor,
        order: Option<StartGate>,
    ) -> BoxedExecutor {
        let (_manager, handle, _recoveries) = BarrierManager::new(store.clone(), Duration::MAX);
        let config = BackfillConfig {
            upstream_table: upstream_table(),
            output_indices: vec![0, 1],
            output_schema: schema("i I"),
            progress_table: progress_table(),
            rate_limit,
            page_rows: 1024,
            vnodes: vec![the_vnode()],
            barrier: handle,
            order,
        };
        let (status, _) = watch::channel(BackfillStatus::default());
        Box::new(ArrangementBackfillExecutor::new(upstream, store.clone(), config, status))
    }

    /// Runs `executor` to its end, committing each epoch as its barrier comes out (as the
    /// barrier manager would once every actor collected it), and prints what it emitted.
    async fn run_committing(executor: BoxedExecutor, store: &Arc<Store>) -> String {
        let mut stream = executor.execute();
        let mut out = Vec::new();
        while let Some(message) = stream.next().await {
            let message = message.unwrap();
            if let Message::Barrier(b) = &message {
                store.commit(b.epoch.prev).unwrap();
            }
            out.push(message.pretty());
        }
        out.join("\n\n")
    }

    /// The committed progress rows, as inserts `vnode k finished row_count`.
    fn progress(store: &Arc<Store>) -> String {
        let catalog = progress_table();
        let rows = read_rows(&catalog, &catalog.state_table(store.clone())).unwrap();
        StreamChunk::inserts(rows).to_pretty()
    }

    /// `i I` inserts of `(k, 10 k)` for every `k` of `keys`.
    fn rows(keys: std::ops::RangeInclusive<i32>) -> String {
        let lines: Vec<String> = keys.map(|k| format!("+ {k} {}", k * 10)).collect();
        format!("i I\n{}", lines.join("\n"))
    }

    /// A checkpoint barrier ending `prev` that sets the job's rate limit to `limit`.
    fn throttle(prev: u64, limit: Option<u64>) -> Message {
        let mutation = Mutation { throttle: HashMap::from([(JOB, limit)]), ..Default::default() };
        Message::Barrier(Barrier::checkpoint(Epoch(prev)).with_mutation(mutation))
    }

    #[tokio::test]
    async fn snapshot_rows_come_out_then_changes_pass_once_the_vnode_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with(&dir, &rows(1..=3), "i i B I");
        let input = [
            barrier(1),
            chunk("i I\n+ 4 40\n- 1 10"),
            barrier(2),
            chunk("i I\n+ 5 50"),
            barrier(3),
        ];
        let out = run_committing(backfill(&store, None, input), &store).await;
        let expected = "barrier 1

                        i I
                        + 1 10
                        + 2 20
                        + 3 30

                        i I
                        + 4 40
                        - 1 10

                        barrier 2

                        i I
                        + 5 50

                        barrier 3";
        assert_eq!(out, dedent(expected));
        // Completed: no position, the rows read.
        assert_eq!(progress(&store), "i i B I\n+ 0 . true 3");
    }

    #[tokio::test]
    async fn a_scan_held_by_its_gate_reads_nothing_until_the_scans_before_it_have_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with(&dir, &rows(1..=3), "i i B I");
        // Scan 1 (this one) waits for scan 0, of one actor.
        let gates = OrderGates::new(&[0, 1], 1);
        let mut before = StartGate::new(gates.clone(), 0, vec![]);
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let upstream = Box::new(ReceiverExecutor::new(rx));
        let held = Some(StartGate::new(gates, 1, vec![0]));
        let mut stream = backfill_after(&store, None, upstream, held).execute();
        let mut next = async || {
            let message = stream.next().await.unwrap().unwrap();
            if let Message::Barrier(b) = &message {
                store.commit(b.epoch.prev).unwrap();
            }
            message.pretty()
        };
        for message in [barrier(1), chunk("i I\n+ 4 40"), barrier(2)] {
            tx.send(message).await.unwrap();
        }
        // Held: the barriers pass, the change above the (unstarted) position is dropped.
        assert_eq!(next().await, "barrier 1");
        assert_eq!(next().await, "barrier 2");
        before.count_out();
        let expected = "i I
                        + 1 10
                        + 2 20
                        + 3 30";
        assert_eq!(next().await, dedent(expected));
        tx.send(barrier(3)).await.unwrap();
        assert_eq!(next().await, "barrier 3");
        assert_eq!(progress(&store), "i i B I\n+ 0 . true 3");
    }

    #[tokio::test]
    async fn changes_at_or_below_the_position_pass_and_those_above_it_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        // Read up to k = 2; paused (rate 0), so the position stays there.
        let store = store_with(&dir, &rows(1..=3), "i i B I\n+ 0 2 false 2");
        let changes = "i  I
                       -  1 10
                       U- 2 20
                       U+ 2 21
                       U- 3 30
                       U+ 3 31
                       +  4 40";
        let input = [barrier(1), chunk(changes), barrier(2)];
        let out = run_committing(backfill(&store, Some(0), input), &store).await;
        let expected = "barrier 1

                        i I
                        - 1 10
                        U- 2 20
                        U+ 2 21

                        barrier 2";
        assert_eq!(out, dedent(expected));
    }

    #[tokio::test]
    async fn an_update_straddling_the_position_becomes_an_insert_or_delete() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with(&dir, &rows(1..=3), "i i B I\n+ 0 2 false 2");
        // Updates that change the key: 1 -> 5 leaves the read range, 4 -> 2 enters it.
        let changes = "i  I
                       U- 1 10
                       U+ 5 50
                       U- 4 40
                       U+ 2 20";
        let input = [barrier(1), chunk(changes), barrier(2)];
        let out = run_committing(backfill(&store, Some(0), input), &store).await;
        assert_eq!(out, dedent("barrier 1\n\ni I\n- 1 10\n+ 2 20\n\nbarrier 2"));
    }

    #[tokio::test]
    async fn a_vnode_not_started_drops_every_change() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with(&dir, &rows(1..=3), "i i B I");
        let input = [barrier(1), chunk("i I\n+ 4 40\n- 1 10"), barrier(2)];
        let out = run_committing(backfill(&store, Some(0), input), &store).await;
        assert_eq!(out, dedent("barrier 1\n\nbarrier 2"));
    }

    #[tokio::test]
    async fn a_paused_backfill_resumes_when_a_barrier_lifts_its_rate_limit() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with(&dir, &rows(1..=2), "i i B I");
        let input = [barrier(1), throttle(2, None), chunk("i I\n+ 3 30"), barrier(3)];
        let out = run_committing(backfill(&store, Some(0), input), &store).await;
        let expected = "barrier 1

                        barrier 2

                        i I
                        + 1 10
                        + 2 20

                        i I
                        + 3 30

                        barrier 3";
        assert_eq!(out, dedent(expected));
    }

    #[tokio::test]
    async fn a_backfill_completed_before_a_restart_passes_changes_straight_through() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with(&dir, &rows(1..=3), "i i B I\n+ 0 . true 3");
        let input = [barrier(1), chunk("i I\n+ 7 70"), barrier(2)];
        let out = run_committing(backfill(&store, None, input), &store).await;
        assert_eq!(out, dedent("barrier 1\n\ni I\n+ 7 70\n\nbarrier 2"));
    }

    #[tokio::test]
    async fn the_position_is_persisted_at_a_barrier_and_a_restart_reads_on_from_it() {
        let dir = tempfile::tempdir().unwrap();
        // One page more than a page: the first epoch reads 1..=1024 and stops there.
        let store = store_with(&dir, &rows(1..=1026), "i i B I");
        let changes = "i  I
                       U- 1024 10240
                       U+ 1024 1
                       U- 1025 10250
                       U+ 1025 2";
        let input = [barrier(1), chunk(changes), barrier(2)];
        let out = run_committing(backfill(&store, None, input), &store).await;
        let expected = format!(
            "barrier 1\n\n{}\n\ni I\nU- 1024 10240\nU+ 1024 1\n\nbarrier 2\n\n{}",
            rows(1..=1024),
            rows(1025..=1026),
        );
        assert_eq!(out, expected);
        // The page read after barrier 2 is not recorded: no barrier followed it.
        assert_eq!(progress(&store), "i i B I\n+ 0 1024 false 1024");

        let input = [barrier(3), barrier(4)];
        let out = run_committing(backfill(&store, None, input), &store).await;
        assert_eq!(out, format!("barrier 3\n\n{}\n\nbarrier 4", rows(1025..=1026)));
        assert_eq!(progress(&store), "i i B I\n+ 0 . true 1026");
    }

    #[tokio::test]
    async fn after_a_quiet_epoch_reading_goes_on_while_it_commits_and_after_a_change_it_waits() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with(&dir, &rows(1..=3000), "i i B I");
        let input = [barrier(1), barrier(2), chunk("i I\n+ 4000 1"), barrier(3), barrier(4)];
        let mut stream = backfill(&store, None, input).execute();
        let mut next = async || {
            let next = tokio::time::timeout(Duration::from_secs(10), stream.next()).await;
            next.expect("a message in time").unwrap().unwrap().pretty()
        };
        assert_eq!(next().await, "barrier 1");
        store.commit(Epoch(1)).unwrap();
        assert_eq!(next().await, rows(1..=1024));
        assert_eq!(next().await, "barrier 2");
        // Epoch 2 brought no change: its upstream is the snapshot in hand, read on at once.
        assert_eq!(next().await, rows(1025..=2048));
        assert_eq!(store.committed_epoch(), Epoch(1));
        // Epoch 3 brought a change; its rows after the position were dropped.
        assert_eq!(next().await, "barrier 3");
        let mut stream = std::pin::pin!(stream);
        let early = tokio::time::timeout(Duration::from_millis(300), stream.next()).await;
        assert!(early.is_err(), "read before epoch 3 was committed: {early:?}");
        store.commit(Epoch(3)).unwrap();
        let page = tokio::time::timeout(Duration::from_secs(10), stream.next()).await;
        assert_eq!(page.unwrap().unwrap().unwrap().pretty(), rows(2049..=3000));
    }
}
