//! Reading the store at one committed epoch: point reads and scans of a [`ReadSnapshot`].

use std::sync::Arc;

use rocksdb::{DB, ReadOptions, SnapshotWithThreadMode};

use crate::error::{Error, Result};
use crate::storage::keycodec::prefix_successor;
use crate::storage::store::STATE_CF;

/// Rows [`ReadSnapshot::scan_prefixes`] steps over before it seeks instead.
const STEPS_BEFORE_SEEK: usize = 8;

/// A RocksDB snapshot that owns its database handle, so queries can hold it across awaits.
pub struct ReadSnapshot {
    // Declared before `db` so it is dropped first: the snapshot borrows the database.
    snapshot: SnapshotWithThreadMode<'static, DB>,
    db: Arc<DB>,
}

impl ReadSnapshot {
    pub(super) fn new(db: Arc<DB>) -> Self {
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
        visit: impl FnMut(&[u8], &[u8]) -> Result<()>,
    ) -> Result<Option<Vec<u8>>> {
        self.scan_with(start, end, limit, true, visit)
    }

    /// [`ReadSnapshot::scan`] for a read that passes over a table once (a backfill page, a
    /// batch scan): the blocks it reads do not enter the block cache, so they neither cost an
    /// insert and an eviction each nor push out the blocks of point reads (joins, aggregates).
    pub fn scan_once(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        visit: impl FnMut(&[u8], &[u8]) -> Result<()>,
    ) -> Result<Option<Vec<u8>>> {
        self.scan_with(start, end, limit, false, visit)
    }

    fn scan_with(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        fill_cache: bool,
        mut visit: impl FnMut(&[u8], &[u8]) -> Result<()>,
    ) -> Result<Option<Vec<u8>>> {
        let cf = self.db.cf_handle(STATE_CF).expect("state column family exists");
        let mut ro = ReadOptions::default();
        ro.set_iterate_range(start.to_vec()..end.to_vec());
        ro.fill_cache(fill_cache);
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

    /// Visits the rows whose keys start with each of `prefixes` (ascending, none a prefix of
    /// another), in key order, as `visit(index of the prefix, key, value)`, with one iterator:
    /// probing a join side with a chunk's keys one iterator each cost an iterator's setup and
    /// a seek per key. Between two prefixes the iterator steps on rather than seeks when the
    /// next prefix's rows are at most a few rows ahead, so probes that cover most of a table
    /// read it as one scan.
    pub fn scan_prefixes(
        &self,
        prefixes: &[&[u8]],
        mut visit: impl FnMut(usize, &[u8], &[u8]) -> Result<()>,
    ) -> Result<()> {
        let (Some(first), Some(last)) = (prefixes.first(), prefixes.last()) else {
            return Ok(());
        };
        let cf = self.db.cf_handle(STATE_CF).expect("state column family exists");
        let mut ro = ReadOptions::default();
        match prefix_successor(last) {
            Some(end) => ro.set_iterate_range(first.to_vec()..end),
            None => ro.set_iterate_lower_bound(first.to_vec()),
        }
        let mut iter = self.snapshot.raw_iterator_cf_opt(cf, ro);
        iter.seek(first);
        for (i, prefix) in prefixes.iter().enumerate() {
            let mut steps = 0;
            while iter.valid() && iter.key().expect("valid") < *prefix {
                if steps == STEPS_BEFORE_SEEK {
                    iter.seek(prefix);
                    break;
                }
                iter.next();
                steps += 1;
            }
            while iter.valid() {
                let (k, v) = (iter.key().expect("valid"), iter.value().expect("valid"));
                if !k.starts_with(prefix) {
                    break;
                }
                visit(i, k, v)?;
                iter.next();
            }
            iter.status()?;
        }
        Ok(())
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
