//! The RocksDB store: state tables' rows, the catalog, and the committed epoch.
//!
//! Two column families: `meta` (format version, committed epoch, catalog entries) and `state`
//! (every state table's rows under `table id | vnode | pk`). State-table writes are staged per
//! epoch in memory by [`Store::stage`]; [`Store::commit`] writes every staged buffer up to an
//! epoch together with the new committed epoch in one atomic `WriteBatch`. Readers take a
//! [`ReadSnapshot`], which therefore always sees exactly one committed epoch.
//!
//! A recovery ([`Store::discard_uncommitted`]) throws away what is staged but not committed;
//! the epochs it covers are *lost*: they are never committed (epochs after a recovery start
//! above them), writes staged for them later are ignored, and whoever waits for one of them
//! learns that its writes are gone.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use rocksdb::{
    ColumnFamily, ColumnFamilyDescriptor, DB, Direction, IteratorMode, Options, ReadOptions,
    SnapshotWithThreadMode, WriteBatch, WriteOptions,
};
use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::ids::{Epoch, TableId};
use crate::storage::keycodec::table_prefix;

/// Version of the on-disk layout. A data dir written with another version is refused.
pub const FORMAT_VERSION: u32 = 1;

const META_CF: &str = "meta";
const STATE_CF: &str = "state";
const FORMAT_KEY: &[u8] = b"format_version";
const EPOCH_KEY: &[u8] = b"committed_epoch";

/// Writes of one state table in one epoch: full key to new value, `None` deletes the key.
pub use crate::storage::write_buffer::WriteBuffer;

/// The persistent store shared by the catalog, the stream runtime and batch queries.
pub struct Store {
    db: Arc<DB>,
    committed: AtomicU64,
    committed_tx: watch::Sender<Epoch>,
    pending: Mutex<BTreeMap<Epoch, Vec<Arc<WriteBuffer>>>>,
    /// Epoch ranges (inclusive) that recoveries discarded, oldest first.
    lost: Mutex<Vec<(Epoch, Epoch)>>,
}

impl Store {
    /// Opens (or creates) the store in `dir`, refusing data written by an incompatible version.
    pub fn open(dir: &Path) -> Result<Arc<Store>> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
        let cfs = [META_CF, STATE_CF].map(|n| ColumnFamilyDescriptor::new(n, Options::default()));
        let db = DB::open_cf_descriptors(&opts, dir, cfs)
            .map_err(|e| Error::Storage(format!("cannot open data dir {}: {e}", dir.display())))?;
        let db = Arc::new(db);
        let meta = db.cf_handle(META_CF).expect("meta column family exists");
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
            Some(v) if v.as_slice() != FORMAT_VERSION.to_be_bytes() => {
                return Err(Error::Storage(format!(
                    "data dir {} was written with format {:?}, this Sluice reads format {FORMAT_VERSION}; \
                     use the matching Sluice version or another --data-dir",
                    dir.display(),
                    v
                )));
            }
            Some(_) => match db.get_cf(meta, EPOCH_KEY)? {
                Some(v) => u64::from_be_bytes(
                    v.as_slice()
                        .try_into()
                        .map_err(|_| Error::Storage("committed epoch record is corrupt".into()))?,
                ),
                None => 0,
            },
        };
        let (committed_tx, _) = watch::channel(Epoch(committed));
        Ok(Arc::new(Store {
            db,
            committed: AtomicU64::new(committed),
            committed_tx,
            pending: Mutex::new(BTreeMap::new()),
            lost: Mutex::new(Vec::new()),
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
        self.pending.lock().clear();
    }

    /// Atomically writes every staged buffer of epochs up to `epoch` and records `epoch` as
    /// committed; returns the size of the write in bytes.
    pub fn commit(&self, epoch: Epoch) -> Result<u64> {
        let buffers = {
            let mut pending = self.pending.lock();
            let later = pending.split_off(&epoch.next());
            std::mem::replace(&mut *pending, later)
        };
        let state = self.state_cf();
        let mut batch = WriteBatch::default();
        for buffer in buffers.values().flatten() {
            for (start, end) in buffer.cleared() {
                batch.delete_range_cf(state, start, end);
            }
            for (key, value) in buffer.writes() {
                match value {
                    Some(v) => batch.put_cf(state, key, v),
                    None => batch.delete_cf(state, key),
                }
            }
        }
        batch.put_cf(self.meta_cf(), EPOCH_KEY, epoch.0.to_be_bytes());
        let bytes = batch.size_in_bytes() as u64;
        self.db.write_opt(batch, &write_options())?;
        self.committed.store(epoch.0, Ordering::Release);
        self.committed_tx.send_replace(epoch);
        Ok(bytes)
    }

    /// Deletes every stored row of `table`, durably.
    pub fn drop_table_data(&self, table: TableId) -> Result<()> {
        let mut batch = WriteBatch::default();
        let end = TableId(table.0 + 1);
        batch.delete_range_cf(self.state_cf(), table_prefix(table), table_prefix(end));
        self.db.write_opt(batch, &write_options())?;
        Ok(())
    }

    /// RocksDB's estimate of the bytes `table`'s rows take on disk; rows still in the memtable
    /// are not counted until they are flushed.
    pub fn approximate_table_size(&self, table: TableId) -> u64 {
        let (start, end) = (table_prefix(table), table_prefix(TableId(table.0 + 1)));
        let range = rocksdb::Range::new(&start, &end);
        self.db.get_approximate_sizes_cf(self.state_cf(), &[range]).first().copied().unwrap_or(0)
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

    fn state_cf(&self) -> &ColumnFamily {
        self.db.cf_handle(STATE_CF).expect("state column family exists")
    }

    fn meta_cf(&self) -> &ColumnFamily {
        self.db.cf_handle(META_CF).expect("meta column family exists")
    }
}

fn write_options() -> WriteOptions {
    // The WAL makes every commit survive a process crash; fsync per commit would only add
    // protection against power loss at the cost of latency.
    let mut wo = WriteOptions::default();
    wo.set_sync(false);
    wo
}

/// A RocksDB snapshot that owns its database handle, so queries can hold it across awaits.
pub struct ReadSnapshot {
    // Declared before `db` so it is dropped first: the snapshot borrows the database.
    snapshot: SnapshotWithThreadMode<'static, DB>,
    db: Arc<DB>,
}

impl ReadSnapshot {
    fn new(db: Arc<DB>) -> Self {
        let snapshot = db.snapshot();
        // SAFETY: the snapshot borrows `*db`, which lives in an `Arc` owned by this struct and is
        // dropped after the snapshot (field order), so the borrow never outlives the database.
        let snapshot = unsafe {
            std::mem::transmute::<SnapshotWithThreadMode<'_, DB>, SnapshotWithThreadMode<'static, DB>>(
                snapshot,
            )
        };
        ReadSnapshot { snapshot, db }
    }

    /// Reads one row by its full key.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let cf = self.db.cf_handle(STATE_CF).expect("state column family exists");
        Ok(self.snapshot.get_cf(cf, key)?)
    }

    /// Reads many rows by full key, in the order of `keys`.
    pub fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        let cf = self.db.cf_handle(STATE_CF).expect("state column family exists");
        self.snapshot
            .multi_get_cf(keys.iter().map(|k| (cf, k.as_slice())))
            .into_iter()
            .map(|r| r.map_err(Error::from))
            .collect()
    }

    /// Visits rows with `start <= key < end` in key order, at most `limit` of them, and returns
    /// the last key visited (`None` if the range was empty).
    pub fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        mut visit: impl FnMut(&[u8], &[u8]) -> Result<()>,
    ) -> Result<Option<Vec<u8>>> {
        let cf = self.db.cf_handle(STATE_CF).expect("state column family exists");
        let mut ro = ReadOptions::default();
        ro.set_iterate_range(start.to_vec()..end.to_vec());
        let mut iter = self.snapshot.raw_iterator_cf_opt(cf, ro);
        iter.seek(start);
        let mut last = Vec::new();
        let mut n = 0;
        while iter.valid() && n < limit {
            let (k, v) = (iter.key().expect("valid"), iter.value().expect("valid"));
            visit(k, v)?;
            last.clear();
            last.extend_from_slice(k);
            n += 1;
            iter.next();
        }
        let last = (n > 0).then_some(last);
        iter.status()?;
        Ok(last)
    }

    /// Visits rows with `start <= key < end` in ascending (or, if `reverse`, descending) key
    /// order until `visit` returns false.
    pub fn scan_until(
        &self,
        start: &[u8],
        end: &[u8],
        reverse: bool,
        mut visit: impl FnMut(&[u8], &[u8]) -> Result<bool>,
    ) -> Result<()> {
        let cf = self.db.cf_handle(STATE_CF).expect("state column family exists");
        let mut ro = ReadOptions::default();
        ro.set_iterate_range(start.to_vec()..end.to_vec());
        let mut iter = self.snapshot.raw_iterator_cf_opt(cf, ro);
        if reverse {
            iter.seek_to_last()
        } else {
            iter.seek_to_first()
        }
        while iter.valid() {
            let (k, v) = (iter.key().expect("valid"), iter.value().expect("valid"));
            if !visit(k, v)? {
                break;
            }
            if reverse { iter.prev() } else { iter.next() }
        }
        iter.status()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
