//! The join sides' caches of stored rows by join key, written through by the join (the only
//! writer of its sides' state) and bounded by one budget for the whole process.
//!
//! A side whose state table was empty when its join started (a new view's) begins **complete**:
//! its cache holds every row it stores, so a join key it lacks has no rows and a probe reads
//! nothing from storage. A view's backfill then joins in memory, where reading each probed key
//! back from RocksDB (and from the epoch's write buffer, sorted again after every write) was
//! most of a multi-way join's build time. A side stays complete while the caches of all joins
//! together hold less than [`BUDGET`] bytes; the side whose write passes it drops its cache and
//! becomes **partial**: it caches the keys it reads (at most [`PARTIAL_KEYS`]), keeps them
//! right as it writes, and forgets them all when the budget is passed again. A side restarted
//! over stored rows (recovery, rescaling) starts partial.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Stored rows of one join key, shared by the cache and the probes that read it.
pub(crate) type Rows = Arc<KeyRows>;

/// Rows read from storage come in key order; rows written since are appended, and a removed
/// row's place takes the last row. A key with many rows (a join on a column of few values) is
/// indexed, so each write costs the same however many rows share its key (kept in key order,
/// each write moved the rows after it).
#[derive(Clone, Debug)]
pub(crate) enum KeyRows {
    /// Up to [`INDEXED_ROWS`] rows, found by a linear search.
    Few(Vec<(Vec<u8>, Vec<u8>)>),
    /// More, found by hash.
    Many(indexmap::IndexMap<Vec<u8>, Vec<u8>, hashbrown::DefaultHashBuilder>),
}

/// The most rows a join key holds unindexed.
const INDEXED_ROWS: usize = 16;

impl Default for KeyRows {
    fn default() -> Self {
        KeyRows::Few(Vec::new())
    }
}

impl From<Vec<(Vec<u8>, Vec<u8>)>> for KeyRows {
    fn from(rows: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        match rows.len() <= INDEXED_ROWS {
            true => KeyRows::Few(rows),
            false => KeyRows::Many(rows.into_iter().collect()),
        }
    }
}

impl KeyRows {
    /// How many rows.
    pub(crate) fn len(&self) -> usize {
        match self {
            KeyRows::Few(rows) => rows.len(),
            KeyRows::Many(rows) => rows.len(),
        }
    }

    /// Whether there is none.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i`: its key and value.
    pub(crate) fn row(&self, i: usize) -> (&[u8], &[u8]) {
        match self {
            KeyRows::Few(rows) => (&rows[i].0, &rows[i].1),
            KeyRows::Many(rows) => {
                let (k, v) = rows.get_index(i).expect("a row of the key");
                (k, v)
            }
        }
    }

    /// Every row, as [`KeyRows::row`].
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        (0..self.len()).map(|i| self.row(i))
    }

    /// Puts `value` under `key`; returns the bytes it added and removed.
    fn put(&mut self, key: &[u8], value: &[u8]) -> (usize, usize) {
        let old = match self {
            KeyRows::Few(rows) => match rows.iter().position(|(k, _)| k.as_slice() == key) {
                Some(i) => Some(std::mem::replace(&mut rows[i].1, value.to_vec())),
                None if rows.len() < INDEXED_ROWS => {
                    rows.push((key.to_vec(), value.to_vec()));
                    None
                }
                None => {
                    let mut many: indexmap::IndexMap<_, _, _> =
                        std::mem::take(rows).into_iter().collect();
                    many.insert(key.to_vec(), value.to_vec());
                    *self = KeyRows::Many(many);
                    None
                }
            },
            KeyRows::Many(rows) => match rows.get_mut(key) {
                Some(v) => Some(std::mem::replace(v, value.to_vec())),
                None => rows.insert(key.to_vec(), value.to_vec()),
            },
        };
        match old {
            Some(old) => (value.len(), old.len()),
            None => (ROW_BYTES + key.len() + value.len(), 0),
        }
    }

    /// Removes the row `key`; returns the bytes it removed.
    fn remove(&mut self, key: &[u8]) -> usize {
        let removed = match self {
            KeyRows::Few(rows) => {
                rows.iter().position(|(k, _)| k.as_slice() == key).map(|i| rows.swap_remove(i).1)
            }
            KeyRows::Many(rows) => rows.swap_remove(key),
        };
        removed.map_or(0, |v| ROW_BYTES + key.len() + v.len())
    }
}

/// The most bytes the join caches of the process hold together.
pub const BUDGET: usize = 256 << 20;

/// The join keys a partial cache holds before it starts over.
const PARTIAL_KEYS: usize = 1 << 18;

/// What one cached row costs beside its key and value: its two vectors.
const ROW_BYTES: usize = std::mem::size_of::<(Vec<u8>, Vec<u8>)>();

/// What one cached join key costs beside its prefix: its map slot and shared vector.
const KEY_BYTES: usize = 64;

/// Bytes held by every join cache of the process.
static CACHED: AtomicUsize = AtomicUsize::new(0);

/// One join side's cache.
pub(crate) struct JoinCache {
    map: hashbrown::HashMap<Vec<u8>, Rows>,
    complete: bool,
    bytes: usize,
    empty: Rows,
}

impl JoinCache {
    /// A cache of a side that stores nothing yet (`complete`) or whose stored rows are unknown.
    pub(crate) fn new(complete: bool) -> Self {
        Self { map: Default::default(), complete, bytes: 0, empty: Rows::default() }
    }

    /// Whether the cache holds every stored row of its side.
    #[cfg(test)]
    pub(crate) fn is_complete(&self) -> bool {
        self.complete
    }

    /// The stored rows of the join key `prefix`, if the cache knows them.
    pub(crate) fn get(&self, prefix: &[u8]) -> Option<Rows> {
        match self.map.get(prefix) {
            Some(rows) => Some(rows.clone()),
            None if self.complete => Some(self.empty.clone()),
            None => None,
        }
    }

    /// Whether the cache knows the stored rows of `prefix`.
    pub(crate) fn knows(&self, prefix: &[u8]) -> bool {
        self.complete || self.map.contains_key(prefix)
    }

    /// Remembers `rows`, read from storage, as the stored rows of `prefix`.
    pub(crate) fn fill(&mut self, prefix: &[u8], rows: Rows) {
        if self.map.len() >= PARTIAL_KEYS {
            self.forget();
        }
        let bytes = KEY_BYTES + prefix.len() + rows_bytes(&rows);
        if let Some(old) = self.map.insert(prefix.to_vec(), rows) {
            self.shrink(KEY_BYTES + prefix.len() + rows_bytes(&old));
        }
        self.grow(bytes);
    }

    /// Applies a write of the row `key` (of join key `prefix`): `Some(value)` puts, `None`
    /// deletes. A join key the cache does not know stays unknown.
    pub(crate) fn write(&mut self, prefix: &[u8], key: &[u8], value: Option<&[u8]>) {
        let rows = match self.map.get_mut(prefix) {
            Some(rows) => rows,
            None if self.complete && value.is_some() => {
                self.bytes += KEY_BYTES + prefix.len();
                CACHED.fetch_add(KEY_BYTES + prefix.len(), Ordering::Relaxed);
                self.map.entry(prefix.to_vec()).or_default()
            }
            None => return,
        };
        let rows = Arc::make_mut(rows);
        let (added, mut removed) = match value {
            Some(value) => rows.put(key, value),
            None => (0, rows.remove(key)),
        };
        if rows.is_empty() && self.complete {
            // Absent means empty in a complete cache.
            self.map.remove(prefix);
            removed += KEY_BYTES + prefix.len();
        }
        self.shrink(removed);
        self.grow(added);
    }

    fn grow(&mut self, bytes: usize) {
        self.bytes += bytes;
        let total = CACHED.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if total > BUDGET {
            self.forget();
        }
    }

    fn shrink(&mut self, bytes: usize) {
        self.bytes -= bytes;
        CACHED.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Drops every cached row; the side is partial from now on.
    fn forget(&mut self) {
        self.map = Default::default();
        self.complete = false;
        CACHED.fetch_sub(self.bytes, Ordering::Relaxed);
        self.bytes = 0;
    }
}

impl Drop for JoinCache {
    fn drop(&mut self) {
        CACHED.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

fn rows_bytes(rows: &Rows) -> usize {
    rows.iter().map(|(k, v)| ROW_BYTES + k.len() + v.len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_complete_cache_knows_every_key_and_a_partial_one_only_what_it_read() {
        let mut complete = JoinCache::new(true);
        assert_eq!(complete.get(b"k1").unwrap().len(), 0);
        complete.write(b"k1", b"k1a", Some(b"v1"));
        complete.write(b"k1", b"k1c", Some(b"v3"));
        complete.write(b"k1", b"k1b", Some(b"v2"));
        complete.write(b"k1", b"k1c", Some(b"v4"));
        let rows = complete.get(b"k1").unwrap();
        let printed: Vec<_> = rows.iter().collect();
        assert_eq!(printed, [(&b"k1a"[..], &b"v1"[..]), (b"k1c", b"v4"), (b"k1b", b"v2")]);
        drop(rows);
        complete.write(b"k1", b"k1a", None);
        complete.write(b"k1", b"k1b", None);
        complete.write(b"k1", b"k1c", None);
        assert!(complete.map.is_empty() && complete.bytes == 0);

        let mut partial = JoinCache::new(false);
        assert!(partial.get(b"k1").is_none());
        partial.write(b"k1", b"k1a", Some(b"v1"));
        assert!(partial.get(b"k1").is_none(), "an unknown key stays unknown");
        partial.fill(b"k1", Arc::new(vec![(b"k1a".to_vec(), b"v1".to_vec())].into()));
        partial.write(b"k1", b"k1a", None);
        assert_eq!(partial.get(b"k1").unwrap().len(), 0, "a known key follows its writes");
    }

    #[test]
    fn a_key_with_many_rows_is_indexed_and_keeps_every_write() {
        let mut cache = JoinCache::new(true);
        let mut expected = std::collections::BTreeMap::new();
        let mut rng = crate::stream::test_utils::Lcg::new(7);
        for step in 0..2000u64 {
            let key = format!("k{:03}", rng.below(60)).into_bytes();
            if rng.below(3) == 0 {
                cache.write(b"p", &key, None);
                expected.remove(&key);
            } else {
                let value = step.to_string().into_bytes();
                cache.write(b"p", &key, Some(&value));
                expected.insert(key, value);
            }
            let rows = cache.get(b"p").unwrap();
            let mut held: Vec<_> = rows.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
            held.sort();
            let want: Vec<_> = expected.clone().into_iter().collect();
            assert_eq!(held, want, "step {step}");
        }
        assert!(matches!(*cache.get(b"p").unwrap(), KeyRows::Many(_)));
    }

    #[test]
    fn a_cache_past_the_budget_forgets_its_rows_and_turns_partial() {
        let mut cache = JoinCache::new(true);
        let big = vec![0u8; BUDGET / 2];
        cache.write(b"k1", b"k1a", Some(&big));
        assert!(cache.is_complete());
        cache.write(b"k2", b"k2a", Some(&big));
        assert!(!cache.is_complete());
        assert!(cache.get(b"k1").is_none() && cache.bytes == 0);
    }
}
