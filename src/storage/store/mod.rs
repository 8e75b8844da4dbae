//! The RocksDB store: state tables' rows, the catalog, and the committed epoch.
//!
//! Two column families: `meta` (format version, committed epoch, catalog entries) and `state`
//! (every state table's rows under `table id | vnode | pk`). State-table writes are staged per
//! epoch in memory by [`Store::stage`]; [`Store::commit`] writes every staged buffer up to an
//! epoch together with the new committed epoch in one atomic write (a `WriteBatch`, or SST
//! files ingested together). Readers take a
//! [`ReadSnapshot`], which therefore always sees exactly one committed epoch.
//!
//! A recovery ([`Store::discard_uncommitted`]) throws away what is staged but not committed;
//! the epochs it covers are *lost*: they are never committed (epochs after a recovery start
//! above them), writes staged for them later are ignored, and whoever waits for one of them
//! learns that its writes are gone.

/// Committing an epoch as sorted files ingested together; level 0 while a snapshot copies.
pub mod ingest;
/// Reading the store at one committed epoch.
pub mod snapshot;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use parking_lot::Mutex;
use rocksdb::{
    ColumnFamily, ColumnFamilyDescriptor, DB, Direction, IteratorMode, Options, WriteBatch,
    WriteOptions,
};
use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::ids::{Epoch, TableId};
use crate::storage::keycodec::{prefix_successor, release_marker_prefix, table_prefix};
use crate::storage::store::ingest::{
    INGEST_MIN_ROWS, LEVEL0_NORMAL, ORDERED_MIN_ROWS, Piece, file_pieces, merged,
};
pub use crate::storage::store::snapshot::ReadSnapshot;

/// Version of the on-disk layout. A data dir written with another version is refused, except
/// older versions, which are upgraded in place: 1 and 2 kept the committed epoch in one of the
/// two places format 3 reads it from; format 4 writes rows in a shorter encoding, and format 5
/// leaves a row's key columns to its key, each still reading the rows the formats before wrote
/// (see [`row_codec`](crate::storage::row_codec)); a Sluice of an older format refuses a data
/// dir that may hold rows it cannot read.
pub const FORMAT_VERSION: u32 = 5;

const META_CF: &str = "meta";
pub(super) const STATE_CF: &str = "state";
const FORMAT_KEY: &[u8] = b"format_version";
/// The committed epoch of the last commit written as a batch, in `meta`.
const EPOCH_KEY: &[u8] = b"committed_epoch";
/// The committed epoch of the last commit ingested as files, in `state` under table id 0 (no
/// table has it), as a file of its own in each ingestion. The committed epoch is the greater
/// of the two records; each is written atomically with its commit's rows.
///
/// Kept apart from the rows so that no file and no flush spans from the record to a table's
/// rows: an ingested file goes below level 0 only where no file's range in that level (nor
/// any running compaction's) reaches over it (see [`file_pieces`]).
pub(super) const STATE_EPOCH_KEY: &[u8] = b"\0\0\0\0committed_epoch";
/// Writes of one state table in one epoch: full key to new value, `None` deletes the key.
pub use crate::storage::write_buffer::WriteBuffer;

/// What a [`Store::commit`] wrote.
#[derive(Debug, Clone, Copy)]
pub struct Committed {
    /// The size of the write in bytes.
    pub bytes: u64,
    /// Whether it was ingested as sorted files rather than written as a batch.
    pub ingested: bool,
}

/// The persistent store shared by the catalog, the stream runtime and batch queries.
pub struct Store {
    pub(super) db: Arc<DB>,
    committed: AtomicU64,
    committed_tx: watch::Sender<Epoch>,
    pending: Mutex<BTreeMap<Epoch, Vec<Arc<WriteBuffer>>>>,
    /// Where a commit writes the file it ingests.
    pub(super) ingest_dir: PathBuf,
    /// Epoch ranges (inclusive) that recoveries discarded, oldest first.
    lost: Mutex<Vec<(Epoch, Epoch)>>,
    /// Bytes of the write buffers not committed yet, written in the current epoch or sealed
    /// (see [`Store::uncommitted_bytes`]).
    uncommitted: AtomicI64,
    /// The tables of the [`MergeDeferral`]s held, once per guard: while any is, level 0
    /// merges late, and their rows' level-0 files leave the page cache once written.
    pub(super) deferred: Mutex<Vec<TableId>>,
    /// Set by [`Store::stop_background_work`].
    stopping: std::sync::atomic::AtomicBool,
}

impl Store {
    /// Opens (or creates) the store in `dir`, refusing data written by an incompatible version.
    pub fn open(dir: &Path) -> Result<Arc<Store>> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
        let cfs = [(META_CF, Options::default()), (STATE_CF, state_options())]
            .map(|(name, cf_opts)| ColumnFamilyDescriptor::new(name, cf_opts));
        let db = DB::open_cf_descriptors(&opts, dir, cfs)
            .map_err(|e| Error::Storage(format!("cannot open data dir {}: {e}", dir.display())))?;
        let db = Arc::new(db);
        let meta = db.cf_handle(META_CF).expect("meta column family exists");
        let state = db.cf_handle(STATE_CF).expect("state column family exists");
        let parse_epoch = |v: Vec<u8>| {
            v.as_slice()
                .try_into()
                .map(u64::from_be_bytes)
                .map_err(|_| Error::Storage("committed epoch record is corrupt".into()))
        };
        let committed = match db.get_cf(meta, FORMAT_KEY)? {
            None if db.get_cf(meta, EPOCH_KEY)?.is_some() => {
                return Err(Error::Storage(format!(
                    "data dir {} has no format version: it was not written by Sluice; \
                     move it away or pass another --data-dir",
                    dir.display()
                )));
            }
            None => {
                db.put_cf(meta, FORMAT_KEY, FORMAT_VERSION.to_be_bytes())?;
                0
            }
            Some(v) if v.as_slice() != FORMAT_VERSION.to_be_bytes() && !upgradable(&v) => {
                return Err(Error::Storage(format!(
                    "data dir {} was written with format {:?}, this Sluice reads format {FORMAT_VERSION}; \
                     use the matching Sluice version or another --data-dir",
                    dir.display(),
                    v
                )));
            }
            Some(v) => {
                // Format 1 kept the committed epoch in `meta` only, format 2 in `state` only.
                let in_meta = db.get_cf(meta, EPOCH_KEY)?.map(parse_epoch).transpose()?;
                let in_state = db.get_cf(state, STATE_EPOCH_KEY)?.map(parse_epoch).transpose()?;
                if upgradable(&v) {
                    db.put_cf(meta, FORMAT_KEY, FORMAT_VERSION.to_be_bytes())?;
                }
                in_meta.max(in_state).unwrap_or(0)
            }
        };
        let ingest_dir = dir.join("ingest");
        // A file left by a crash during an ingestion was not ingested: its epoch is not
        // committed.
        let _ = std::fs::remove_dir_all(&ingest_dir);
        std::fs::create_dir_all(&ingest_dir)
            .map_err(|e| Error::Storage(format!("cannot create {}: {e}", ingest_dir.display())))?;
        let (committed_tx, _) = watch::channel(Epoch(committed));
        Ok(Arc::new(Store {
            db,
            ingest_dir,
            committed: AtomicU64::new(committed),
            committed_tx,
            pending: Mutex::new(BTreeMap::new()),
            lost: Mutex::new(Vec::new()),
            uncommitted: AtomicI64::new(0),
            deferred: Mutex::new(Vec::new()),
            stopping: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// The last epoch whose writes are durable.
    pub fn committed_epoch(&self) -> Epoch {
        Epoch(self.committed.load(Ordering::Acquire))
    }

    /// A receiver that observes every advance of the committed epoch.
    pub fn subscribe_committed(&self) -> watch::Receiver<Epoch> {
        self.committed_tx.subscribe()
    }

    /// Waits until `epoch` is committed; fails if a recovery discarded it.
    pub async fn wait_committed(&self, epoch: Epoch) -> Result<()> {
        let mut committed = self.subscribe_committed();
        committed.wait_for(|c| *c >= epoch).await.map_err(|_| Error::Shutdown)?;
        match self.is_lost(epoch) {
            true => Err(Error::Recovered(format!(
                "epoch {epoch} was discarded by a recovery of the streaming jobs"
            ))),
            false => Ok(()),
        }
    }

    /// True if a recovery discarded `epoch`: it is never committed.
    pub fn is_lost(&self, epoch: Epoch) -> bool {
        self.lost.lock().iter().any(|&(from, to)| from <= epoch && epoch <= to)
    }

    /// Stages one table's writes of `epoch`; they become durable with [`Store::commit`].
    /// Writes of a lost epoch (an actor of before a recovery finishing its last barrier) are
    /// dropped.
    pub fn stage(&self, epoch: Epoch, writes: Arc<WriteBuffer>) {
        let lost = self.lost.lock();
        if lost.last().is_some_and(|&(_, to)| epoch <= to) {
            self.note_buffered(-(writes.bytes() as i64));
            return;
        }
        self.pending.lock().entry(epoch).or_default().push(writes);
    }

    /// Drops every staged write and marks the epochs after the committed one up to `upto` as
    /// lost; the caller goes on with epochs above `upto`.
    pub fn discard_uncommitted(&self, upto: Epoch) {
        let mut lost = self.lost.lock();
        let from = self.committed_epoch().next();
        if from <= upto {
            lost.push((from, upto));
        }
        let discarded = std::mem::take(&mut *self.pending.lock());
        let bytes: usize = discarded.values().flatten().map(|b| b.bytes()).sum();
        self.note_buffered(-(bytes as i64));
    }

    /// Records that write buffers not yet committed grew (or shrank) by `bytes`.
    pub fn note_buffered(&self, bytes: i64) {
        self.uncommitted.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The memory the write buffers of every state table take until their epochs commit, and
    /// what operators hold for the epoch in flight ([`EpochMemory`]), about: what a backfill
    /// bounds when it sizes its epochs.
    pub fn uncommitted_bytes(&self) -> usize {
        self.uncommitted.load(Ordering::Relaxed).max(0) as usize
    }

    /// Atomically writes every staged buffer of epochs up to `epoch` and records `epoch` as
    /// committed.
    ///
    /// A small commit is one `WriteBatch` (through the memtable and the WAL). A large one (a
    /// backfill's epoch: at least [`INGEST_MIN_ROWS`] rows) is written as sorted SST files,
    /// one of them the epoch record, and ingested: RocksDB adds the files to the tree in one
    /// manifest write, so the commit is as atomic as a batch, and the rows skip the memtable,
    /// the WAL and the flush. Range clears (a truncate) always take the batch, and so do epochs
    /// that mostly rewrite rows of recent epochs (an aggregate's groups, see
    /// [`StateTable::rewriting`](crate::storage::state_table::StateTable::rewriting)): in the
    /// memtable a group rewritten at every epoch is flushed once, ingested it would add a file
    /// overlapping the last one at every epoch, for compactions to merge.
    pub fn commit(&self, epoch: Epoch) -> Result<Committed> {
        let buffers = {
            let mut pending = self.pending.lock();
            let later = pending.split_off(&epoch.next());
            std::mem::replace(&mut *pending, later)
        };
        let buffers: Vec<&WriteBuffer> = buffers.values().flatten().map(|b| b.as_ref()).collect();
        self.note_buffered(-(buffers.iter().map(|b| b.bytes()).sum::<usize>() as i64));
        let (mut new_rows, mut rewritten) = (0, 0);
        for buffer in &buffers {
            *if buffer.rewrites { &mut rewritten } else { &mut new_rows } += buffer.len();
        }
        let ingestible = rewritten <= new_rows && buffers.iter().all(|b| b.cleared().is_empty());
        // A smaller epoch holding a vnode-ordered stretch of new rows (a view's backfill
        // starting or ending) is ingested too: through the memtable its rows would be flushed
        // in a file spanning the rest of the stretch, ahead of the backfill (see
        // [`file_pieces`]). A stretch an aggregate rewrites (the values of a `max` without
        // groups, all in one vnode) is not one: its table's rows are absorbed by the memtable.
        let mut ingested = false;
        let mut bytes = 0;
        if ingestible && new_rows >= ORDERED_MIN_ROWS {
            let rows = merged(buffers.iter().map(|b| b.iter()).collect());
            let pieces = file_pieces(&rows);
            let rewritten_tables: Vec<&[u8]> = buffers
                .iter()
                .filter(|b| b.rewrites)
                .filter_map(|b| b.writes().next().and_then(|(key, _)| key.get(..4)))
                .collect();
            let new_stretch =
                |p: &Piece| p.ordered && !rewritten_tables.contains(&&rows[p.rows.start].0[..4]);
            if new_rows >= INGEST_MIN_ROWS || pieces.iter().any(new_stretch) {
                bytes = self.ingest(epoch, &rows, pieces)?;
                ingested = true;
            }
        }
        if !ingested {
            bytes = self.write_batch(epoch, &buffers)?;
        }
        self.committed.store(epoch.0, Ordering::Release);
        self.committed_tx.send_replace(epoch);
        Ok(Committed { bytes, ingested })
    }

    /// Commits `buffers` (oldest epoch first) and the epoch record as one `WriteBatch`.
    ///
    /// Each buffer's rows go in key order: RocksDB's skip-list memtable inserts a run of
    /// ascending keys by continuing from the previous insert's position, where keys in arrival
    /// order each search the memtable from its top (a third less CPU for an aggregate's epoch).
    fn write_batch(&self, epoch: Epoch, buffers: &[&WriteBuffer]) -> Result<u64> {
        let state = self.state_cf();
        let mut batch = WriteBatch::default();
        for buffer in buffers {
            for (start, end) in buffer.cleared() {
                batch.delete_range_cf(state, start, end);
            }
            for (key, value) in buffer.iter() {
                match value {
                    Some(v) => batch.put_cf(state, key, v),
                    None => batch.delete_cf(state, key),
                }
            }
        }
        batch.put_cf(self.meta_cf(), EPOCH_KEY, epoch.0.to_be_bytes());
        let bytes = batch.size_in_bytes() as u64;
        self.db.write_opt(batch, &write_options())?;
        Ok(bytes)
    }

    /// Deletes every stored row of `table`, durably.
    pub fn drop_table_data(&self, table: TableId) -> Result<()> {
        let mut batch = WriteBatch::default();
        let end = TableId(table.0 + 1);
        batch.delete_range_cf(self.state_cf(), table_prefix(table), table_prefix(end));
        let markers = release_marker_prefix(table);
        let markers_end = prefix_successor(&markers).expect("the prefix ends in the table id");
        batch.delete_range_cf(self.state_cf(), markers, markers_end);
        self.db.write_opt(batch, &write_options())?;
        Ok(())
    }

    /// Merges the level-0 files holding `table`'s rows into the levels below, blocking until
    /// done. Called when a CDC table's snapshot has finished: its epochs were ingested as files
    /// spanning every vnode, which stay in level 0 until the compaction trigger fires, and
    /// would fire it later under whatever runs then (a view's backfill over the table). Merged
    /// at once, the table is read through one sorted run. Not exclusive: commits, ingestions
    /// and RocksDB's own compactions go on beside it.
    /// Returns false if [`Store::stop_background_work`] cut it short (or came first): RocksDB
    /// merges what is left on its own, once level 0 reaches its trigger.
    pub fn compact_table(&self, table: TableId) -> bool {
        let mut opts = rocksdb::CompactOptions::default();
        opts.set_exclusive_manual_compaction(false);
        // Files already in the last level are left as they are (nothing older lies below).
        opts.set_bottommost_level_compaction(rocksdb::BottommostLevelCompaction::Skip);
        let (start, end) = (table_prefix(table), table_prefix(TableId(table.0 + 1)));
        if self.stopping.load(Ordering::Acquire) {
            return false;
        }
        self.db.compact_range_cf_opt(self.state_cf(), Some(start), Some(end), &opts);
        !self.stopping.load(Ordering::Acquire)
    }

    /// Stops RocksDB's merges and flushes, running or due, without waiting for them: for a
    /// server shutting down, which would otherwise wait for them to end (seconds for the merge
    /// after a large CDC snapshot, see [`Store::compact_table`]). Batch commits still write (to
    /// the memtable and the log), but nothing is merged or flushed any more; a merge cut short
    /// is redone by the compactions of the next start.
    pub fn stop_background_work(&self) {
        self.stopping.store(true, Ordering::Release);
        self.db.cancel_all_background_work(false);
    }

    /// RocksDB's estimate of the bytes `table`'s rows take on disk; rows still in the memtable
    /// are not counted until they are flushed.
    pub fn approximate_table_size(&self, table: TableId) -> u64 {
        self.approximate_range_size(&table_prefix(table), &table_prefix(TableId(table.0 + 1)))
    }

    /// RocksDB's estimate of the bytes the rows of `[start, end)` take in files; rows still in
    /// the memtable are not counted.
    pub fn approximate_range_size(&self, start: &[u8], end: &[u8]) -> u64 {
        let range = rocksdb::Range::new(start, end);
        self.db.get_approximate_sizes_cf(self.state_cf(), &[range]).first().copied().unwrap_or(0)
    }

    /// The number of committed rows in `[start, end)`: exact when there are at most `exact` of
    /// them, else an estimate that reads only the first `exact`. A table's keys start with a
    /// hashed vnode, so its first rows are a fair sample of its rows' sizes: the estimate scales
    /// their count by the share of the range's bytes they take in RocksDB's files. When those
    /// rows are still in the memtable, which the size estimate does not see, every row is
    /// counted.
    pub fn estimate_rows(self: &Arc<Self>, start: &[u8], end: &[u8], exact: u64) -> Result<u64> {
        let snapshot = self.snapshot();
        let mut n = 0u64;
        let mut sample_end = Vec::new();
        snapshot.scan_until(start, end, false, |key, _| {
            n += 1;
            if n == exact {
                sample_end = key.to_vec();
                sample_end.push(0);
            }
            Ok(n <= exact)
        })?;
        if n <= exact {
            return Ok(n);
        }
        let sample = self.approximate_range_size(start, &sample_end);
        let whole = self.approximate_range_size(start, end);
        if sample == 0 || whole < sample {
            // The rows after the first `exact` are counted one by one.
            let mut n = exact;
            snapshot.scan(&sample_end, end, usize::MAX, |_, _| {
                n += 1;
                Ok(())
            })?;
            return Ok(n);
        }
        Ok(((exact as f64 * whole as f64 / sample as f64) as u64).max(exact + 1))
    }

    /// Reads a committed row by its full key.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get_cf(self.state_cf(), key)?)
    }

    /// Writes a metadata entry durably.
    pub fn put_meta(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::default();
        batch.put_cf(self.meta_cf(), key, value);
        Ok(self.db.write_opt(batch, &write_options())?)
    }

    /// Deletes a metadata entry durably.
    pub fn delete_meta(&self, key: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::default();
        batch.delete_cf(self.meta_cf(), key);
        Ok(self.db.write_opt(batch, &write_options())?)
    }

    /// Every metadata entry whose key starts with `prefix`.
    pub fn scan_meta(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let meta = self.meta_cf();
        let mode = IteratorMode::From(prefix, Direction::Forward);
        let mut out = Vec::new();
        for item in self.db.iterator_cf(meta, mode) {
            let (k, v) = item?;
            if !k.starts_with(prefix) {
                break;
            }
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }

    /// An integer property of the state column family (`rocksdb.cur-size-all-mem-tables`,
    /// `rocksdb.total-sst-files-size`, ...), if RocksDB knows it.
    pub fn state_property(&self, name: &str) -> Option<u64> {
        self.db.property_int_value_cf(self.state_cf(), name).ok().flatten()
    }

    /// A consistent view of the last committed epoch.
    pub fn snapshot(self: &Arc<Self>) -> ReadSnapshot {
        ReadSnapshot::new(self.db.clone())
    }

    pub(super) fn state_cf(&self) -> &ColumnFamily {
        self.db.cf_handle(STATE_CF).expect("state column family exists")
    }

    fn meta_cf(&self) -> &ColumnFamily {
        self.db.cf_handle(META_CF).expect("meta column family exists")
    }
}

/// Whether `format` (the stored version) is one [`Store::open`] upgrades in place.
fn upgradable(format: &[u8]) -> bool {
    [1u32, 2, 3, 4].iter().any(|v| format == v.to_be_bytes())
}

/// Options of the `state` column family.
///
/// Uncompressed: on the bulk of a backfill's writes (sequential keys, hex and short text),
/// LZ4 saved little space and cost about a fifth of the CPU of a CDC snapshot, in flushes and
/// compactions. Level 0 compacts at 16 files rather than 4: a backfill adds a file of rows and
/// one of the epoch record per large epoch (see [`file_pieces`]), and each compaction out of
/// level 0 rewrites the overlapping data below it, so fewer, larger ones rewrite less
/// (docs/benchmarks-history.md, "Ingested epochs" and "Files per vnode stretch"). Data blocks are 16 KiB
/// rather than 4: backfills and batch queries scan tables end to end, and every block read
/// costs a read call, a cache lookup and an allocation whatever its size (docs/benchmarks.md,
/// "Scans that pass once").
pub(super) fn state_options() -> Options {
    let mut opts = Options::default();
    opts.set_compression_type(rocksdb::DBCompressionType::None);
    let mut table = rocksdb::BlockBasedOptions::default();
    table.set_block_size(16 * 1024);
    opts.set_block_based_table_factory(&table);
    opts.set_level_zero_file_num_compaction_trigger(LEVEL0_NORMAL.compaction_trigger as i32);
    opts.set_level_zero_slowdown_writes_trigger(LEVEL0_NORMAL.slowdown_trigger as i32);
    opts.set_level_zero_stop_writes_trigger(LEVEL0_NORMAL.stop_trigger as i32);
    opts.set_max_bytes_for_level_base(LEVEL0_NORMAL.max_bytes_for_level_base);
    // Compactions cut their output files where the table id changes, so a file never spans
    // from one table into another, where a later ingestion of that table could otherwise not
    // go below it (see [`file_pieces`]).
    opts.get_options_from_string(
        "sst_partitioner_factory={id=SstPartitionerFixedPrefixFactory;length=4}",
    )
    .expect("RocksDB knows its fixed-prefix SST partitioner")
}

/// Turns RocksDB's performance counters off on the calling thread. RocksDB counts by default:
/// every block read, key compared and entry skipped bumps a counter in a thread-local context
/// (a thread-local access each, in the innermost loops of a scan). Nothing reads them, so the
/// runtime calls this on each of its threads as it starts.
pub fn disable_perf_counters() {
    rocksdb::perf::set_perf_stats(rocksdb::perf::PerfStatsLevel::Disable);
}

fn write_options() -> WriteOptions {
    // The WAL makes every commit survive a process crash; fsync per commit would only add
    // protection against power loss at the cost of latency.
    let mut wo = WriteOptions::default();
    wo.set_sync(false);
    wo
}

/// Memory an operator holds for the epoch in flight outside any write buffer (an aggregate's
/// groups touched since its last flush), counted with the write buffers in
/// [`Store::uncommitted_bytes`]: a backfill ends its epoch early on it as on staged writes, so
/// an aggregate with as many groups as its input has rows holds a bounded number of them. The
/// count is given back by [`EpochMemory::clear`] (at the flush, when the groups become staged
/// writes) or when it is dropped (the actor stopped).
pub struct EpochMemory {
    store: Arc<Store>,
    bytes: usize,
}

impl EpochMemory {
    /// Nothing counted yet.
    pub fn new(store: Arc<Store>) -> Self {
        EpochMemory { store, bytes: 0 }
    }

    /// Counts `bytes` more.
    pub fn add(&mut self, bytes: usize) {
        self.bytes += bytes;
        self.store.note_buffered(bytes as i64);
    }

    /// Gives back everything counted.
    pub fn clear(&mut self) {
        self.store.note_buffered(-(self.bytes as i64));
        self.bytes = 0;
    }

    /// What is counted now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for EpochMemory {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::store::ingest::Write;
    use rocksdb::SstFileWriter;

    #[test]
    fn merged_runs_come_out_in_key_order_with_the_newest_write_of_a_key() {
        let run = |rows: &[(&'static str, Option<&'static str>)]| -> Vec<(&[u8], Option<&[u8]>)> {
            rows.iter().map(|(k, v)| (k.as_bytes(), v.map(str::as_bytes))).collect()
        };
        let show = |rows: Vec<(&[u8], Option<&[u8]>)>| -> Vec<String> {
            rows.iter()
                .map(|(k, v)| {
                    let v = v.map_or("-".into(), |v| String::from_utf8_lossy(v).into_owned());
                    format!("{}={v}", String::from_utf8_lossy(k))
                })
                .collect()
        };
        // Disjoint runs, given out of order (two tables' buffers), are laid end to end.
        let disjoint = merged(vec![
            run(&[("t2/a", Some("1")), ("t2/b", None)]),
            run(&[]),
            run(&[("t1/a", Some("2")), ("t1/z", Some("3"))]),
        ]);
        assert_eq!(show(disjoint), ["t1/a=2", "t1/z=3", "t2/a=1", "t2/b=-"]);
        // Overlapping runs (one table's buffers of two epochs, oldest first) merge, and the
        // newer epoch's write of a key wins, a delete as well as a put.
        let overlapping = merged(vec![
            run(&[("a", Some("old")), ("c", Some("old")), ("e", Some("old"))]),
            run(&[("b", Some("new")), ("c", Some("new")), ("e", None)]),
        ]);
        assert_eq!(show(overlapping), ["a=old", "b=new", "c=new", "e=-"]);
        // Runs that only touch at a key overlap.
        let touching =
            merged(vec![run(&[("a", Some("1")), ("b", Some("1"))]), run(&[("b", Some("2"))])]);
        assert_eq!(show(touching), ["a=1", "b=2"]);
    }

    #[test]
    fn merged_runs_equal_one_stable_sort_of_their_rows_whatever_their_overlap() {
        type OwnedWrite = (Vec<u8>, Option<Vec<u8>>);
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        };
        for case in 0..300 {
            // Keys from a small space (many shared between runs) or a large one (few), in
            // stretches (interleaved vnodes) or scattered.
            let space = if case % 2 == 0 { 64 } else { 1 << 20 };
            let stretch = 1 + next(64);
            let runs: Vec<Vec<OwnedWrite>> = (0..1 + next(9))
                .map(|run| {
                    let mut keys: Vec<u64> = (0..next(300))
                        .map(|_| (next(space) / stretch) * stretch + next(stretch))
                        .collect();
                    keys.sort_unstable();
                    keys.dedup();
                    let value =
                        |k: u64| (!k.is_multiple_of(3)).then(|| format!("{run}").into_bytes());
                    keys.into_iter().map(|k| (k.to_be_bytes().to_vec(), value(k))).collect()
                })
                .collect();
            let borrowed: Vec<Vec<Write>> = runs
                .iter()
                .map(|run| run.iter().map(|(k, v)| (k.as_slice(), v.as_deref())).collect())
                .collect();
            let mut expected: Vec<(&[u8], Option<&[u8]>)> =
                borrowed.iter().flatten().copied().collect();
            expected.sort_by(|a, b| a.0.cmp(b.0));
            expected.dedup_by(|next, prev| {
                let same = next.0 == prev.0;
                if same {
                    *prev = *next;
                }
                same
            });
            assert_eq!(merged(borrowed), expected, "case {case}");
        }
    }

    #[test]
    fn commit_is_atomic_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            let snap_before = store.snapshot();
            let mut buf = WriteBuffer::new();
            buf.insert(b"\0\0\0\x01k1", Some(b"v1"));
            store.stage(Epoch(1), Arc::new(buf));
            assert_eq!(store.get(b"\0\0\0\x01k1").unwrap(), None, "staged is not visible");
            store.commit(Epoch(1)).unwrap();
            assert_eq!(store.committed_epoch(), Epoch(1));
            assert_eq!(store.get(b"\0\0\0\x01k1").unwrap(), Some(b"v1".to_vec()));
            assert_eq!(snap_before.get(b"\0\0\0\x01k1").unwrap(), None, "snapshot is stable");
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.committed_epoch(), Epoch(1));
        assert_eq!(store.get(b"\0\0\0\x01k1").unwrap(), Some(b"v1".to_vec()));
        store.drop_table_data(TableId(1)).unwrap();
        assert_eq!(store.get(b"\0\0\0\x01k1").unwrap(), None);
    }

    #[tokio::test]
    async fn a_recovery_loses_the_uncommitted_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let write = |epoch: u64, key: &[u8]| {
            let mut buf = WriteBuffer::new();
            buf.insert(key, Some(b"v"));
            store.stage(Epoch(epoch), Arc::new(buf));
        };
        write(1, b"\0\0\0\x01a");
        store.commit(Epoch(1)).unwrap();
        write(2, b"\0\0\0\x01b");
        // A statement waits for epoch 2 while the jobs recover: epochs 2 and 3 are lost.
        let waiter = tokio::spawn({
            let store = store.clone();
            async move { store.wait_committed(Epoch(2)).await }
        });
        store.discard_uncommitted(Epoch(3));
        assert!(store.is_lost(Epoch(2)) && store.is_lost(Epoch(3)) && !store.is_lost(Epoch(1)));
        // An actor of before the recovery finishing epoch 3: dropped.
        write(3, b"\0\0\0\x01c");
        write(4, b"\0\0\0\x01d");
        store.commit(Epoch(4)).unwrap();
        assert!(matches!(waiter.await.unwrap(), Err(Error::Recovered(_))));
        store.wait_committed(Epoch(4)).await.unwrap();
        let read = |key: &[u8]| store.get(key).unwrap().is_some();
        assert_eq!(
            [
                read(b"\0\0\0\x01a"),
                read(b"\0\0\0\x01b"),
                read(b"\0\0\0\x01c"),
                read(b"\0\0\0\x01d")
            ],
            [true, false, false, true]
        );
    }

    /// A buffer putting `rows` keys `table 1 | i` (value `i` then `tag`), in reverse order.
    fn rows(keys: std::ops::Range<u32>, tag: &[u8]) -> WriteBuffer {
        let mut buf = WriteBuffer::new();
        for i in keys.rev() {
            buf.insert(&key(i), Some(&[&i.to_be_bytes()[..], tag].concat()));
        }
        buf
    }

    fn key(i: u32) -> Vec<u8> {
        [&[0, 0, 0, 1][..], &i.to_be_bytes()].concat()
    }

    #[test]
    fn prefixes_read_with_one_iterator_visit_exactly_their_rows_whether_it_steps_or_seeks() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.stage(Epoch(1), Arc::new(rows(0..4096, b"a")));
        store.commit(Epoch(1)).unwrap();
        let snapshot = store.snapshot();
        let visited = |prefixes: &[&[u8]]| {
            let mut seen = Vec::new();
            snapshot
                .scan_prefixes(prefixes, |i, k, v| {
                    assert!(k.starts_with(prefixes[i]), "row {k:?} under prefix {i}");
                    assert_eq!(&v[..4], &k[4..], "the value of {k:?}");
                    seen.push((i, u32::from_be_bytes(k[4..].try_into().unwrap())));
                    Ok(())
                })
                .unwrap();
            seen
        };
        // Whole keys: the next one a row or two ahead (steps), or far ahead (a seek); absent.
        let keys: Vec<Vec<u8>> = [7, 8, 10, 3000, 5000].map(key).into();
        let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        assert_eq!(visited(&keys), [(0, 7), (1, 8), (2, 10), (3, 3000)]);
        // Prefixes of 256 rows each: adjacent, three groups apart, empty, and the last.
        let groups: Vec<Vec<u8>> = [0, 1, 5, 100, 15].map(|g| key(g << 8)[..7].to_vec()).into();
        let mut groups: Vec<&[u8]> = groups.iter().map(Vec::as_slice).collect();
        groups.sort();
        let seen = visited(&groups);
        let expected: Vec<(usize, u32)> = [0u32, 1, 5, 15]
            .iter()
            .enumerate()
            .flat_map(|(i, &g)| (g << 8..(g + 1) << 8).map(move |k| (i, k)))
            .collect();
        assert_eq!(seen, expected);
        assert!(visited(&[]).is_empty());
    }

    /// The pages of `path` in the page cache, and its pages (of 4 KiB).
    #[cfg(target_os = "linux")]
    fn cached_pages(path: &Path) -> (usize, usize) {
        use std::ffi::{c_int, c_void};
        use std::os::fd::AsRawFd;
        unsafe extern "C" {
            fn mmap(
                at: *mut c_void,
                len: usize,
                prot: c_int,
                flags: c_int,
                fd: c_int,
                offset: i64,
            ) -> *mut c_void;
            fn munmap(at: *mut c_void, len: usize) -> c_int;
            fn mincore(at: *mut c_void, len: usize, pages: *mut u8) -> c_int;
        }
        const PROT_READ: c_int = 1;
        const MAP_SHARED: c_int = 1;
        let file = std::fs::File::open(path).unwrap();
        let len = file.metadata().unwrap().len() as usize;
        let mut pages = vec![0u8; len.div_ceil(4096)];
        // SAFETY: a read-only shared mapping of a file this test holds open, unmapped before it
        // returns; `mincore` writes one byte per page of it into a vector of that many bytes.
        unsafe {
            let at = mmap(std::ptr::null_mut(), len, PROT_READ, MAP_SHARED, file.as_raw_fd(), 0);
            assert_ne!(at as isize, -1, "mmap of {}", path.display());
            assert_eq!(mincore(at, len, pages.as_mut_ptr()), 0);
            munmap(at, len);
        }
        (pages.iter().filter(|&&p| p & 1 == 1).count(), pages.len())
    }

    /// An ingested epoch's file stays in the page cache, though RocksDB's writer asks the kernel
    /// to drop it (see [`crate::storage::page_cache`]).
    #[cfg(target_os = "linux")]
    #[test]
    fn an_ingested_epoch_stays_in_the_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut buf = WriteBuffer::new();
        for i in 0..4 * INGEST_MIN_ROWS as u32 {
            buf.insert(&key(i), Some(&[i as u8; 100]));
        }
        store.stage(Epoch(1), Arc::new(buf));
        assert!(store.commit(Epoch(1)).unwrap().ingested);
        let (mut cached, mut pages) = (0, 0);
        for file in std::fs::read_dir(dir.path()).unwrap() {
            let path = file.unwrap().path();
            if path.extension().is_some_and(|e| e == "sst") {
                let (c, p) = cached_pages(&path);
                (cached, pages) = (cached + c, pages + p);
            }
        }
        assert!(pages > 3000, "the epoch's 14 MB are in files: {pages} pages");
        assert!(cached * 10 >= pages * 9, "{cached} of {pages} pages cached");
    }

    /// While a table's level-0 merges are deferred (a CDC snapshot copying), its files that
    /// land in level 0 leave the page cache once written; another table's stay.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_deferred_tables_level0_files_leave_the_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let _deferral = store.defer_level0_merges(TableId(2));
        // Epochs of tables 2 and 3 alike: rows spread over every vnode, as a snapshot's pages.
        for (epoch, table) in [(1, 2u32), (2, 3)] {
            let mut buf = WriteBuffer::new();
            for i in 0..2 * INGEST_MIN_ROWS as u32 {
                let key =
                    [&table.to_be_bytes()[..], &((i % 256) as u16).to_be_bytes(), &i.to_be_bytes()];
                buf.insert(&key.concat(), Some(&[i as u8; 100]));
            }
            store.stage(Epoch(epoch), Arc::new(buf));
            assert!(store.commit(Epoch(epoch)).unwrap().ingested);
        }
        let cached = |table: u32| {
            let (mut cached, mut pages) = (0, 0);
            for file in store.db.live_files().unwrap() {
                if file.start_key.as_ref().unwrap()[..4] == table.to_be_bytes() {
                    let (c, p) = cached_pages(&dir.path().join(file.name.trim_start_matches('/')));
                    (cached, pages) = (cached + c, pages + p);
                }
            }
            assert!(pages > 1500, "table {table}'s 7 MB are in files: {pages} pages");
            cached as f64 / pages as f64
        };
        assert!(cached(2) < 0.1, "{} of table 2's pages cached", cached(2));
        assert!(cached(3) > 0.9, "{} of table 3's pages cached", cached(3));
    }

    #[test]
    fn a_large_epoch_is_ingested_atomically_and_later_epochs_win() {
        let dir = tempfile::tempdir().unwrap();
        let n = INGEST_MIN_ROWS as u32;
        {
            let store = Store::open(dir.path()).unwrap();
            // Epoch 1: a small batch.
            store.stage(Epoch(1), Arc::new(rows(0..10, b"a")));
            assert!(!store.commit(Epoch(1)).unwrap().ingested);
            let before = store.snapshot();
            // Epochs 2 and 3 commit together: two buffers of epoch 2 (disjoint keys, as two
            // actors write), and epoch 3 overwriting and deleting some of them.
            store.stage(Epoch(2), Arc::new(rows(5..n / 2, b"b")));
            store.stage(Epoch(2), Arc::new(rows(n / 2..n + 5, b"b")));
            let mut three = rows(0..3, b"c");
            three.insert(&key(7), None);
            store.stage(Epoch(3), Arc::new(three));
            let committed = store.commit(Epoch(3)).unwrap();
            assert!(committed.ingested && committed.bytes > 0);
            assert_eq!(store.committed_epoch(), Epoch(3));
            assert_eq!(before.get(&key(100)).unwrap(), None, "an older snapshot sees none of it");
            assert_eq!(
                before.get(&key(7)).unwrap(),
                Some([&7u32.to_be_bytes()[..], b"a"].concat())
            );
            assert_eq!(std::fs::read_dir(dir.path().join("ingest")).unwrap().count(), 0);
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.committed_epoch(), Epoch(3));
        let value = |i: u32| store.get(&key(i)).unwrap();
        let tagged = |i: u32, tag: &[u8]| Some([&i.to_be_bytes()[..], tag].concat());
        assert_eq!(value(1), tagged(1, b"c"), "epoch 3 over epoch 1");
        assert_eq!(value(4), tagged(4, b"a"), "untouched since epoch 1");
        assert_eq!(value(6), tagged(6, b"b"), "epoch 2 over epoch 1");
        assert_eq!(value(7), None, "deleted in epoch 3");
        assert_eq!(value(n - 1), tagged(n - 1, b"b"));
        let mut count = 0;
        store
            .snapshot()
            .scan(&key(0), &key(n), usize::MAX, |_, _| {
                count += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!(count, n as usize - 1, "keys 0..n but 7");
    }

    #[test]
    fn a_scan_once_leaves_the_block_cache_to_point_reads() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let n = INGEST_MIN_ROWS as u32;
        store.stage(Epoch(1), Arc::new(rows(0..n, b"a")));
        assert!(store.commit(Epoch(1)).unwrap().ingested, "the rows are in a file");
        let cached = || store.state_property("rocksdb.block-cache-usage").unwrap();
        let snapshot = store.snapshot();
        let count = |fill: bool| {
            let mut count = 0;
            let visit = |_: &[u8], _: &[u8]| {
                count += 1;
                Ok(())
            };
            if fill {
                snapshot.scan(&key(0), &key(n), usize::MAX, visit).unwrap();
            } else {
                snapshot.scan_once(&key(0), &key(n), usize::MAX, visit).unwrap();
            }
            count
        };
        let before = cached();
        assert_eq!(count(false), n as usize);
        assert_eq!(cached(), before, "a scan once caches no block");
        assert_eq!(count(true), n as usize);
        assert!(cached() > before, "a scan caches the blocks it reads");
    }

    #[test]
    fn a_thread_with_perf_counters_off_counts_nothing_while_it_scans() {
        use rocksdb::perf::{PerfContext, PerfMetric};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let n = INGEST_MIN_ROWS as u32;
        store.stage(Epoch(1), Arc::new(rows(0..n, b"a")));
        store.commit(Epoch(1)).unwrap();
        // Each scan runs on a thread of its own: the counters and their switch are per thread.
        let bytes_read = |off: bool| {
            let store = store.clone();
            std::thread::spawn(move || {
                if off {
                    disable_perf_counters();
                }
                let mut context = PerfContext::default();
                context.reset();
                let mut count = 0;
                let snapshot = store.snapshot();
                snapshot
                    .scan_once(&key(0), &key(n), usize::MAX, |_, _| {
                        count += 1;
                        Ok(())
                    })
                    .unwrap();
                assert_eq!(count, n as usize);
                context.metric(PerfMetric::IterReadBytes)
            })
            .join()
            .unwrap()
        };
        assert!(bytes_read(false) > 0, "RocksDB counts by default");
        assert_eq!(bytes_read(true), 0, "nothing is counted once the counters are off");
    }

    #[test]
    fn an_epoch_that_mostly_rewrites_rows_takes_the_batch() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let n = INGEST_MIN_ROWS as u32;
        let rewriting = |range, tag| {
            let mut buffer = rows(range, tag);
            buffer.rewrites = true;
            Arc::new(buffer)
        };
        // An aggregate's groups, rewritten: more than an ingestion's worth, all in the batch.
        store.stage(Epoch(1), rewriting(0..n * 2, b"a"));
        assert!(!store.commit(Epoch(1)).unwrap().ingested);
        // New rows beside more rewritten ones: still the batch.
        store.stage(Epoch(2), rewriting(0..n * 2, b"b"));
        store.stage(Epoch(2), Arc::new(rows(n * 2..n * 3, b"b")));
        assert!(!store.commit(Epoch(2)).unwrap().ingested);
        // New rows outnumbering the rewritten ones: ingested, the rewritten ones with them.
        store.stage(Epoch(3), rewriting(0..10, b"c"));
        store.stage(Epoch(3), Arc::new(rows(n * 3..n * 4, b"c")));
        assert!(store.commit(Epoch(3)).unwrap().ingested);
        assert_eq!(store.get(&key(5)).unwrap(), Some([&5u32.to_be_bytes()[..], b"c"].concat()));
        assert_eq!(store.get(&key(n)).unwrap(), Some([&n.to_be_bytes()[..], b"b"].concat()));
    }

    #[test]
    fn rows_are_counted_exactly_up_to_a_bound_and_estimated_beyond_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // Table 1: 200 000 rows in files (an ingested epoch).
        store.stage(Epoch(1), Arc::new(rows(0..200_000, b"a")));
        assert!(store.commit(Epoch(1)).unwrap().ingested);
        // Table 2: 3 000 rows in the memtable.
        let mut small = WriteBuffer::new();
        for i in 0..3_000u32 {
            small.insert(&[&[0, 0, 0, 2][..], &i.to_be_bytes()].concat(), Some(b"v"));
        }
        store.stage(Epoch(2), Arc::new(small));
        assert!(!store.commit(Epoch(2)).unwrap().ingested);
        let (one, two, three) = ([0, 0, 0, 1], [0, 0, 0, 2], [0, 0, 0, 3]);

        assert_eq!(store.estimate_rows(&one, &two, 300_000).unwrap(), 200_000, "exact");
        let estimate = store.estimate_rows(&one, &two, 10_000).unwrap();
        assert!((180_000..=220_000).contains(&estimate), "estimated {estimate} for 200 000");
        assert_eq!(store.estimate_rows(&two, &three, 1_000).unwrap(), 3_000, "memtable rows");
        assert_eq!(store.estimate_rows(&three, &[0, 0, 0, 4], 1_000).unwrap(), 0);
    }

    #[test]
    fn a_file_left_by_a_crash_during_an_ingestion_is_not_ingested() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            store.stage(Epoch(1), Arc::new(rows(0..10, b"a")));
            store.commit(Epoch(1)).unwrap();
            // What a crash after writing epoch 2's file and before ingesting it leaves.
            let opts = Options::default();
            let mut writer = SstFileWriter::create(&opts);
            writer.open(dir.path().join("ingest").join("2.0.sst")).unwrap();
            writer.put(key(20), b"x").unwrap();
            writer.finish().unwrap();
            let mut writer = SstFileWriter::create(&opts);
            writer.open(dir.path().join("ingest").join("2.1.sst")).unwrap();
            writer.put(STATE_EPOCH_KEY, 2u64.to_be_bytes()).unwrap();
            writer.finish().unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.committed_epoch(), Epoch(1));
        assert_eq!(store.get(&key(20)).unwrap(), None);
        assert_eq!(std::fs::read_dir(dir.path().join("ingest")).unwrap().count(), 0);
        // Epoch 2 is written again, and commits.
        store.stage(Epoch(2), Arc::new(rows(20..INGEST_MIN_ROWS as u32 + 20, b"b")));
        assert!(store.commit(Epoch(2)).unwrap().ingested);
        assert_eq!(store.get(&key(20)).unwrap(), Some([&20u32.to_be_bytes()[..], b"b"].concat()));
    }

    #[test]
    fn format_1_to_4_data_dirs_are_upgraded_with_their_committed_epoch() {
        // Format 1 kept the epoch in `meta` only, format 2 in `state` only, formats 3 and 4 in
        // both.
        for (format, in_meta, in_state, committed) in [
            (1u32, Some(9), None, 9),
            (2, None, Some(7), 7),
            (3, Some(5), Some(6), 6),
            (4, Some(8), Some(4), 8),
        ] {
            let dir = tempfile::tempdir().unwrap();
            {
                let store = Store::open(dir.path()).unwrap();
                store.stage(Epoch(1), Arc::new(rows(0..10, b"a")));
                store.commit(Epoch(1)).unwrap();
                let mut batch = WriteBatch::default();
                match in_meta {
                    Some(e) => batch.put_cf(store.meta_cf(), EPOCH_KEY, u64::to_be_bytes(e)),
                    None => batch.delete_cf(store.meta_cf(), EPOCH_KEY),
                }
                match in_state {
                    Some(e) => batch.put_cf(store.state_cf(), STATE_EPOCH_KEY, u64::to_be_bytes(e)),
                    None => batch.delete_cf(store.state_cf(), STATE_EPOCH_KEY),
                }
                batch.put_cf(store.meta_cf(), FORMAT_KEY, format.to_be_bytes());
                store.db.write(batch).unwrap();
            }
            let store = Store::open(dir.path()).unwrap();
            assert_eq!(store.committed_epoch(), Epoch(committed), "format {format}");
            drop(store);
            let store = Store::open(dir.path()).unwrap();
            assert_eq!(store.committed_epoch(), Epoch(committed), "upgraded once, kept after");
            let format_now = store.db.get_cf(store.meta_cf(), FORMAT_KEY).unwrap();
            assert_eq!(format_now, Some(FORMAT_VERSION.to_be_bytes().to_vec()));
            assert_eq!(store.get(&key(3)).unwrap(), Some([&3u32.to_be_bytes()[..], b"a"].concat()));
        }
    }

    #[test]
    fn the_committed_epoch_is_the_later_of_a_batch_and_an_ingestion() {
        let dir = tempfile::tempdir().unwrap();
        let reopened = |store: Arc<Store>| {
            drop(store);
            Store::open(dir.path()).unwrap()
        };
        let store = Store::open(dir.path()).unwrap();
        store.stage(Epoch(1), Arc::new(rows(0..10, b"a")));
        assert!(!store.commit(Epoch(1)).unwrap().ingested);
        let store = reopened(store);
        assert_eq!(store.committed_epoch(), Epoch(1));
        store.stage(Epoch(2), Arc::new(rows(10..INGEST_MIN_ROWS as u32 + 10, b"b")));
        assert!(store.commit(Epoch(2)).unwrap().ingested);
        let store = reopened(store);
        assert_eq!(store.committed_epoch(), Epoch(2), "the ingested record is the later");
        store.stage(Epoch(3), Arc::new(rows(0..10, b"c")));
        assert!(!store.commit(Epoch(3)).unwrap().ingested);
        let store = reopened(store);
        assert_eq!(store.committed_epoch(), Epoch(3), "the batch's record is the later");
        assert_eq!(store.get(&key(3)).unwrap(), Some([&3u32.to_be_bytes()[..], b"c"].concat()));
        assert_eq!(store.get(&key(11)).unwrap(), Some([&11u32.to_be_bytes()[..], b"b"].concat()));
    }

    /// The live files of the `state` column family holding rows of `table`.
    fn files_of(store: &Store, table: u32) -> Vec<rocksdb::LiveFile> {
        let files = store.db.live_files().unwrap();
        files
            .into_iter()
            .filter(|f| {
                f.column_family_name == STATE_CF
                    && f.start_key.as_ref().unwrap()[..4] == table.to_be_bytes()
            })
            .collect()
    }

    #[test]
    fn the_files_of_a_newer_table_do_not_reach_over_older_tables() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let n = INGEST_MIN_ROWS as u32;
        let table = |id: u32, keys: std::ops::Range<u32>| {
            let mut buf = WriteBuffer::new();
            for i in keys {
                buf.insert(&[&id.to_be_bytes()[..], &i.to_be_bytes()].concat(), Some(b"v"));
            }
            Arc::new(buf)
        };
        // Table 1 is ingested; table 2 is ingested, then written by a batch and flushed.
        store.stage(Epoch(1), table(1, 0..n));
        assert!(store.commit(Epoch(1)).unwrap().ingested);
        store.stage(Epoch(2), table(2, 0..n));
        assert!(store.commit(Epoch(2)).unwrap().ingested);
        store.stage(Epoch(3), table(2, n..n + 10));
        assert!(!store.commit(Epoch(3)).unwrap().ingested);
        store.db.flush_cf(store.state_cf()).unwrap();
        assert_eq!(files_of(&store, 1).len(), 1);
        let table_2 = files_of(&store, 2);
        assert_eq!(table_2.len(), 2, "{table_2:?}");
        for file in files_of(&store, 1).iter().chain(&table_2) {
            let end = file.end_key.as_ref().unwrap();
            assert_eq!(end[..4], file.start_key.as_ref().unwrap()[..4], "{file:?}");
        }
        assert_eq!(files_of(&store, 0).len(), 2, "the records of the two ingestions");
        assert_eq!(store.committed_epoch(), Epoch(3));
    }

    #[test]
    fn compactions_cut_their_files_where_the_table_changes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for epoch in 1..=4u32 {
            // Every batch writes rows of tables 1 and 2: every flush spans both.
            let mut buf = WriteBuffer::new();
            for id in [1u32, 2] {
                for i in 0..100u32 {
                    let key = [&id.to_be_bytes()[..], &(i * 4 + epoch).to_be_bytes()].concat();
                    buf.insert(&key, Some(b"v"));
                }
            }
            store.stage(Epoch(epoch.into()), Arc::new(buf));
            store.commit(Epoch(epoch.into())).unwrap();
            store.db.flush_cf(store.state_cf()).unwrap();
        }
        store.db.compact_range_cf(store.state_cf(), None::<&[u8]>, None::<&[u8]>);
        let files = store.db.live_files().unwrap();
        let state: Vec<_> = files.iter().filter(|f| f.column_family_name == STATE_CF).collect();
        assert_eq!(state.len(), 2, "one file per table: {state:?}");
        for file in state {
            assert_eq!(file.num_entries, 400);
            let (start, end) = (file.start_key.as_ref().unwrap(), file.end_key.as_ref().unwrap());
            assert_eq!(start[..4], end[..4], "{file:?}");
        }
    }

    #[test]
    fn a_tables_merge_leaves_its_rows_in_one_sorted_run() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // The level of each of table 5's files (the epoch records', table 0, are not counted).
        let levels = |store: &Store| {
            let files = store.db.live_files().unwrap();
            let of_5 = |f: &&rocksdb::LiveFile| f.start_key.as_ref().unwrap()[..4] == [0, 0, 0, 5];
            files.iter().filter(of_5).map(|f| f.level).collect::<Vec<_>>()
        };
        // A CDC snapshot's epochs: each spans every vnode of table 5, so each after the first
        // overlaps the files before it and is ingested into level 0.
        let rows_per_epoch = snapshot_epochs(&store, 5, 3);
        assert_eq!(levels(&store).iter().filter(|l| **l == 0).count(), 2, "{:?}", levels(&store));
        let rows = |store: &Arc<Store>| {
            let mut rows = Vec::new();
            let (start, end) = (table_prefix(TableId(5)), table_prefix(TableId(6)));
            store
                .snapshot()
                .scan(&start, &end, usize::MAX, |k, v| {
                    rows.push((k.to_vec(), v.to_vec()));
                    Ok(())
                })
                .unwrap();
            rows
        };
        let before = rows(&store);
        assert!(store.compact_table(TableId(5)));
        let merged = levels(&store);
        assert!(merged.iter().all(|l| *l > 0 && *l == merged[0]), "one sorted run: {merged:?}");
        let after = rows(&store);
        assert_eq!(after.len(), 3 * rows_per_epoch as usize);
        assert_eq!(after, before);
        assert_eq!(store.committed_epoch(), Epoch(3));
    }

    /// A server shutting down stops the merge after a snapshot rather than wait for it; what
    /// is committed stays, and a later start merges.
    #[test]
    fn a_merge_stops_for_a_shutdown_and_a_later_start_merges() {
        let dir = tempfile::tempdir().unwrap();
        let level0 = |store: &Store| store.state_property("rocksdb.num-files-at-level0").unwrap();
        let rows_per_epoch;
        {
            let store = Store::open(dir.path()).unwrap();
            let _deferral = store.defer_level0_merges(TableId(5));
            rows_per_epoch = snapshot_epochs(&store, 5, 20);
            let piled = level0(&store);
            assert!(piled > LEVEL0_NORMAL.compaction_trigger as u64, "{piled} files in level 0");
            store.stop_background_work();
            assert!(!store.compact_table(TableId(5)), "no merge after the stop");
            assert_eq!(level0(&store), piled);
            // A batch commit still writes.
            store.stage(Epoch(21), Arc::new(rows(0..10, b"z")));
            assert!(!store.commit(Epoch(21)).unwrap().ingested);
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.committed_epoch(), Epoch(21));
        wait_level0_below_trigger(&store);
        let rows = table_rows(&store, 5);
        assert_eq!(rows, 20 * rows_per_epoch as usize);
    }

    #[test]
    fn level0_waits_for_its_merge_while_deferred() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let level0 = |store: &Store| store.state_property("rocksdb.num-files-at-level0").unwrap();
        let pending = |store: &Store| store.state_property("rocksdb.compaction-pending").unwrap();
        let deferral = store.defer_level0_merges(TableId(5));
        // Epochs of a CDC snapshot, each spanning every vnode of table 5: from the second on
        // they overlap the ones before, and their files pile up in level 0.
        let rows_per_epoch = snapshot_epochs(&store, 5, 24);
        // Past the usual trigger, yet no merge due.
        let piled = level0(&store);
        assert!(piled > LEVEL0_NORMAL.compaction_trigger as u64, "{piled} files in level 0");
        assert_eq!(pending(&store), 0);
        assert_eq!(store.state_property("rocksdb.num-running-compactions"), Some(0));
        // The guard gone, the usual trigger holds again and RocksDB merges on its own.
        drop(deferral);
        wait_level0_below_trigger(&store);
        let rows = table_rows(&store, 5);
        assert_eq!(rows, 24 * rows_per_epoch as usize);
    }

    /// Commits epochs `1..=epochs` of a CDC snapshot of `table`: each ingested, with rows spread
    /// over every vnode, so that from the second on each overlaps the ones before. Returns the
    /// rows per epoch.
    fn snapshot_epochs(store: &Store, table: u32, epochs: u32) -> u32 {
        let rows_per_epoch = INGEST_MIN_ROWS as u32;
        for epoch in 1..=epochs {
            let mut buf = WriteBuffer::new();
            for i in 0..rows_per_epoch {
                let (vnode, pk) = ((i % 256) as u16, (epoch - 1) * rows_per_epoch + i);
                let key = [&table.to_be_bytes()[..], &vnode.to_be_bytes(), &pk.to_be_bytes()];
                buf.insert(&key.concat(), Some(b"row"));
            }
            store.stage(Epoch(epoch.into()), Arc::new(buf));
            assert!(store.commit(Epoch(epoch.into())).unwrap().ingested);
        }
        rows_per_epoch
    }

    /// Waits (up to a minute) until RocksDB has merged level 0 below its usual trigger.
    fn wait_level0_below_trigger(store: &Store) {
        let level0 = || store.state_property("rocksdb.num-files-at-level0").unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while level0() >= LEVEL0_NORMAL.compaction_trigger as u64 {
            assert!(std::time::Instant::now() < deadline, "{} files in level 0", level0());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// The number of committed rows of `table`.
    fn table_rows(store: &Arc<Store>, table: u32) -> usize {
        let mut rows = 0;
        let (start, end) = (table_prefix(TableId(table)), table_prefix(TableId(table + 1)));
        let count = |_: &[u8], _: &[u8]| {
            rows += 1;
            Ok(())
        };
        store.snapshot().scan(&start, &end, usize::MAX, count).unwrap();
        rows
    }

    /// Keys `table/vnode/i` for `i` in `0..n`, for each `(vnode, n)`.
    fn vnode_keys(table: u32, vnodes: &[(u16, u32)]) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        for &(vnode, n) in vnodes {
            for i in 0..n {
                let parts = [&table.to_be_bytes()[..], &vnode.to_be_bytes(), &i.to_be_bytes()];
                keys.push(parts.concat());
            }
        }
        keys
    }

    /// The files `file_pieces` cuts `keys` into, each as `first-last xrows` (`table/vnode`),
    /// ordered ones marked `*`.
    fn pieces_of(keys: &[Vec<u8>]) -> Vec<String> {
        let rows: Vec<Write<'_>> = keys.iter().map(|k| (k.as_slice(), Some(&b"v"[..]))).collect();
        let at = |k: &[u8]| format!("{}/{}", k[3], u16::from_be_bytes([k[4], k[5]]));
        file_pieces(&rows)
            .into_iter()
            .map(|Piece { rows: p, ordered }| {
                let mark = if ordered { "*" } else { "" };
                format!("{mark}{}-{} x{}", at(&keys[p.start]), at(&keys[p.end - 1]), p.len())
            })
            .collect()
    }

    #[test]
    fn an_epoch_is_cut_into_files_at_the_ends_of_vnode_ordered_stretches() {
        // A view's backfill: table 7, vnodes 10 (partial) to 13 (partial); then the progress
        // rows of table 8 over vnodes 0-3.
        let mut keys = vnode_keys(7, &[(10, 1000), (11, 2000), (12, 2000), (13, 500)]);
        keys.extend(vnode_keys(8, &[(0, 1), (1, 1), (2, 1), (3, 1)]));
        assert_eq!(
            pieces_of(&keys),
            ["*7/10-7/10 x1000", "*7/11-7/12 x4000", "*7/13-7/13 x500", "8/0-8/3 x4"]
        );
        // Rows of older tables first, and a stretch of one vnode and of two.
        let mut keys = vnode_keys(3, &[(0, 1)]);
        keys.extend(vnode_keys(5, &[(0, 1), (9, 1)]));
        keys.extend(vnode_keys(7, &[(10, 5000)]));
        keys.extend(vnode_keys(7, &[(20, 3000), (21, 3000)]));
        assert_eq!(
            pieces_of(&keys),
            [
                "3/0-3/0 x1",
                "5/0-5/9 x2",
                "*7/10-7/10 x5000",
                "*7/20-7/20 x3000",
                "*7/21-7/21 x3000"
            ]
        );
        // Two actors' stretches (vnodes 10-12 and 138-140).
        let mut keys = vnode_keys(7, &[(10, 2000), (11, 2000), (12, 2000)]);
        keys.extend(vnode_keys(7, &[(138, 2000), (139, 2000), (140, 2000)]));
        assert_eq!(
            pieces_of(&keys),
            [
                "*7/10-7/10 x2000",
                "*7/11-7/11 x2000",
                "*7/12-7/12 x2000",
                "*7/138-7/138 x2000",
                "*7/139-7/139 x2000",
                "*7/140-7/140 x2000",
            ]
        );
        // A CDC snapshot's epoch touches every vnode, and its progress rows (the next table
        // id) follow: one file; a small stretch is not worth files of its own either.
        let every: Vec<(u16, u32)> = (0..256).map(|v| (v, 20)).collect();
        let mut keys = vnode_keys(7, &every);
        keys.extend(vnode_keys(8, &[(0, 1), (200, 1)]));
        assert_eq!(pieces_of(&keys), ["7/0-8/200 x5122"]);
        assert_eq!(pieces_of(&vnode_keys(7, &[(3, 100), (4, 100)])), ["7/3-7/4 x200"]);
        assert!(pieces_of(&[]).is_empty());
    }

    #[test]
    fn a_small_epoch_is_ingested_when_it_holds_a_vnode_ordered_stretch() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let epoch = |vnodes: &[(u16, u32)]| {
            let mut buf = WriteBuffer::new();
            for key in vnode_keys(7, vnodes) {
                buf.insert(&key, Some(b"v"));
            }
            Arc::new(buf)
        };
        // 6 000 rows over two vnodes: a view's backfill starting, ingested.
        store.stage(Epoch(1), epoch(&[(0, 3000), (1, 3000)]));
        assert!(store.commit(Epoch(1)).unwrap().ingested);
        // 6 000 rows spread over 200 vnodes (changes): the batch.
        let spread: Vec<(u16, u32)> = (0..200).map(|v| (v, 30)).collect();
        store.stage(Epoch(2), epoch(&spread));
        assert!(!store.commit(Epoch(2)).unwrap().ingested);
        // Fewer rows than a stretch takes: the batch.
        store.stage(Epoch(3), epoch(&[(2, 4000)]));
        assert!(!store.commit(Epoch(3)).unwrap().ingested);
        // 6 000 new rows spread over 200 vnodes beside 5 000 rows in one vnode that an
        // aggregate rewrites (the values of a `max` without groups): the batch.
        let mut values = WriteBuffer::new();
        for key in vnode_keys(9, &[(0, 5000)]) {
            values.insert(&key, Some(b"v"));
        }
        values.rewrites = true;
        store.stage(Epoch(4), epoch(&spread));
        store.stage(Epoch(4), Arc::new(values));
        assert!(!store.commit(Epoch(4)).unwrap().ingested);
    }

    #[test]
    fn a_backfills_vnode_ordered_epochs_are_ingested_below_level_0() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let write = |buf: &mut WriteBuffer, vnode: u16, keys: std::ops::Range<u32>, tag: &[u8]| {
            for i in keys {
                let key = [&7u32.to_be_bytes()[..], &vnode.to_be_bytes(), &i.to_be_bytes()];
                buf.insert(&key.concat(), Some(tag));
            }
        };
        let progress = [&8u32.to_be_bytes()[..], &[0, 1]].concat();
        // Vnode 11 is read across the two epochs: 0..20000 and then 20000..40000 of its rows;
        // each epoch also rewrites its progress (table 8), and a small batch of table 7 rows
        // and progress goes through the memtable between the two.
        // Commits one epoch of table 7 rows (vnode, keys) tagged `tag` and progress `p`;
        // whether it was ingested.
        let commit = |epoch: u64, rows: &[(u16, std::ops::Range<u32>)], tag: &[u8], p: &[u8]| {
            let mut buf = WriteBuffer::new();
            for (vnode, keys) in rows {
                write(&mut buf, *vnode, keys.clone(), tag);
            }
            buf.insert(&progress, Some(p));
            store.stage(Epoch(epoch), Arc::new(buf));
            store.commit(Epoch(epoch)).unwrap().ingested
        };
        assert!(commit(1, &[(10, 0..20_000), (11, 0..20_000)], b"v", b"p1"));
        assert!(!commit(2, &[(200, 0..10)], b"s", b"p2"));
        assert!(commit(3, &[(11, 20_000..40_000), (12, 0..20_000)], b"w", b"p3"));
        // The backfill's four files (the flush of the small batch, vnode 200 and the progress,
        // is in level 0).
        let files = files_of(&store, 7);
        let rows: Vec<_> = files.iter().filter(|f| f.num_entries == 20_000).collect();
        assert_eq!(rows.len(), 4, "{files:?}");
        assert!(rows.iter().all(|f| f.level > 0), "{files:?}");
        assert_eq!(store.committed_epoch(), Epoch(3));
        let last =
            [&7u32.to_be_bytes()[..], &11u16.to_be_bytes(), &39_999u32.to_be_bytes()].concat();
        assert_eq!(store.get(&last).unwrap(), Some(b"w".to_vec()));
        assert_eq!(store.get(&progress).unwrap(), Some(b"p3".to_vec()));
    }

    #[test]
    fn refuses_a_foreign_format_version() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            store.put_meta(FORMAT_KEY, &99u32.to_be_bytes()).unwrap();
        }
        let err = Store::open(dir.path()).err().expect("must refuse");
        assert!(err.to_string().contains("format"), "{err}");
    }
}
