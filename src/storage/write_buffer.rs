//! `WriteBuffer`: one epoch's writes to one state table, without an allocation per row.
//!
//! Keys and values are appended to an arena of blocks that never move, and each write is an
//! entry saying where its key and value are. Nothing else happens at a write until something
//! reads the buffer:
//!
//! - A read by key ([`WriteBuffer::get`]) needs a hash index of every key's newest entry. The
//!   first one builds it from the entries written so far, and from then on every write keeps it
//!   (an aggregate, which reads its groups before it writes them, keeps it from its first row).
//!   A buffer only ever written (a backfill's rows, a CDC snapshot's pages) never builds one.
//! - Key order is needed only by range reads and by the commit: the first range read sorts the
//!   entries, and entries written after it are sorted on their own and merged in by the next
//!   range read. A buffer written once and committed (a backfill's epoch) is sorted exactly
//!   once. The sort drops every write a later write of the same key replaced, index or not.
//!
//! Reads see the newest write of each key: `Some(value)` for a put, `None` for a delete.
//!
//! A buffer may also empty key ranges ([`WriteBuffer::clear_ranges`]): every row stored there
//! before the buffer's epoch, or written by the buffer before the clear, is gone, and the
//! commit deletes the ranges before it writes the buffer's rows.

use std::hash::BuildHasher;
use std::ops::Bound;

use hashbrown::{DefaultHashBuilder, HashTable};
use parking_lot::Mutex;

/// The value length of a delete.
const DELETE: u32 = u32::MAX;

/// The bit of [`Entry::key_len`] saying that a later write of the same key replaced the entry.
const SUPERSEDED: u32 = 1 << 31;

/// One write: where its key and its value (right after the key) are in the arena.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// See [`Arena::push`]. Grows with every write, so it also orders a key's writes.
    key_at: u64,
    /// The key's length, and [`SUPERSEDED`] when an indexed write replaced this one (a write
    /// without the index replaces without marking; the sort drops it all the same).
    key_len: u32,
    /// [`DELETE`] for a delete.
    value_len: u32,
}

impl Entry {
    fn superseded(&self) -> bool {
        self.key_len & SUPERSEDED != 0
    }
}

/// The first arena block's size; each next block is twice the last, up to [`BLOCK_MAX`].
const BLOCK_MIN: usize = 4 << 10;

/// See [`BLOCK_MIN`]; a write larger than this gets a block of its own size.
const BLOCK_MAX: usize = 1 << 20;

/// Keys and values, appended to blocks that never move: a buffer that grows copies nothing
/// (a `Vec` grown by doubling copied a backfill epoch's rows again at every doubling, into
/// memory the process had to fault in anew), and a small buffer stays small.
#[derive(Debug, Default)]
struct Arena {
    blocks: Vec<Vec<u8>>,
    /// The blocks' capacities, summed: kept rather than summed when asked, since
    /// [`WriteBuffer::bytes`] is asked at every write (an aggregate writes a row at a time).
    bytes: usize,
}

impl Arena {
    /// Appends `key` and `value`; returns where the key starts: the block's index in the high
    /// 32 bits, the offset in it in the low ones.
    fn push(&mut self, key: &[u8], value: &[u8]) -> u64 {
        let need = key.len() + value.len();
        let room = self.blocks.last().map_or(0, |b| b.capacity() - b.len());
        if room < need {
            let last = self.blocks.last().map_or(0, Vec::capacity);
            let size = (last * 2).clamp(BLOCK_MIN, BLOCK_MAX).max(need);
            self.blocks.push(Vec::with_capacity(size));
            self.bytes += self.blocks.last().map_or(0, Vec::capacity);
        }
        let block = self.blocks.len() - 1;
        let bytes = &mut self.blocks[block];
        let at = bytes.len();
        bytes.extend_from_slice(key);
        bytes.extend_from_slice(value);
        ((block as u64) << 32) | at as u64
    }

    fn get(&self, at: u64, len: usize) -> &[u8] {
        let offset = at as u32 as usize;
        &self.blocks[(at >> 32) as usize][offset..offset + len]
    }

    fn key(&self, entry: &Entry) -> &[u8] {
        self.get(entry.key_at, (entry.key_len & !SUPERSEDED) as usize)
    }

    fn value(&self, entry: &Entry) -> Option<&[u8]> {
        let value_at = entry.key_at + (entry.key_len & !SUPERSEDED) as u64;
        (entry.value_len != DELETE).then(|| self.get(value_at, entry.value_len as usize))
    }
}

/// Entries per chunk of [`Entries`], as a power of two.
const CHUNK_BITS: u32 = 16;

/// The writes in the order they came, in chunks of `1 << CHUNK_BITS` that never move (the
/// first grows up to that size), for the reason of [`Arena`].
#[derive(Debug, Default)]
struct Entries {
    chunks: Vec<Vec<Entry>>,
    len: usize,
    /// The chunks' capacities, summed, in entries (kept, as [`Arena::bytes`] is).
    capacity: usize,
}

impl Entries {
    fn push(&mut self, entry: Entry) {
        if self.chunks.last().is_none_or(|c| c.len() == 1 << CHUNK_BITS) {
            let size = if self.chunks.is_empty() { 0 } else { 1 << CHUNK_BITS };
            self.chunks.push(Vec::with_capacity(size));
        }
        let last = self.chunks.last_mut().expect("a chunk with room");
        let before = last.capacity();
        last.push(entry);
        self.capacity += last.capacity() - before;
        self.len += 1;
    }

    fn get(&self, i: u32) -> &Entry {
        &self.chunks[(i >> CHUNK_BITS) as usize][(i & ((1 << CHUNK_BITS) - 1)) as usize]
    }

    fn get_mut(&mut self, i: u32) -> &mut Entry {
        &mut self.chunks[(i >> CHUNK_BITS) as usize][(i & ((1 << CHUNK_BITS) - 1)) as usize]
    }

    /// The entries from the `from`th on, in the order written.
    fn iter_from(&self, from: usize) -> impl Iterator<Item = &Entry> + Clone {
        let chunk = from >> CHUNK_BITS;
        let skip = from & ((1 << CHUNK_BITS) - 1);
        self.chunks.iter().skip(chunk).flatten().skip(skip)
    }
}

/// The newest entry of each key, once something has read the buffer by key.
#[derive(Debug, Default)]
struct Index {
    /// Entry and 32-bit key hash: growing the table rehashes from the hashes it holds, without
    /// reading the entries in random order.
    table: HashTable<(u32, u32)>,
    /// Whether the table is built and every write keeps it: from the first read by key on.
    kept: bool,
    /// The distinct keys in `table`.
    keys: usize,
}

impl Index {
    /// Files entry `at`, whose key hashes to `hash`, as its key's newest; returns the entry it
    /// replaces, if the key was filed before. `same_key(i)`: whether entry `i` has the key.
    fn file(&mut self, at: u32, hash: u32, same_key: impl Fn(u32) -> bool) -> Option<u32> {
        match self.table.find_mut(widen(hash), |&(i, h)| h == hash && same_key(i)) {
            Some((newest, _)) => Some(std::mem::replace(newest, at)),
            None => {
                self.table.insert_unique(widen(hash), (at, hash), |&(_, h)| widen(h));
                self.keys += 1;
                None
            }
        }
    }
}

/// The live entries in key order, as far as they have been sorted.
#[derive(Debug, Default)]
struct Order {
    /// Copies of the newest entries of `..sorted_upto`, one per key, in key order; a later
    /// write of a key replaces its copy at the next merge.
    sorted: Vec<Entry>,
    /// Entries at and after this index are not in `sorted` yet.
    sorted_upto: usize,
}

/// One epoch's writes to a state table: puts and deletes by encoded key, newest winning.
#[derive(Default)]
pub struct WriteBuffer {
    arena: Arena,
    entries: Entries,
    index: Mutex<Index>,
    hasher: DefaultHashBuilder,
    order: Mutex<Order>,
    /// Key ranges `start..end` emptied before the buffer's writes, sorted and disjoint.
    cleared: Vec<(Vec<u8>, Vec<u8>)>,
    /// The writes mostly replace rows written in recent epochs (an aggregate's groups), so
    /// they are better absorbed by the memtable than ingested ([`crate::storage::store::Store::commit`]).
    pub rewrites: bool,
}

impl std::fmt::Debug for WriteBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WriteBuffer({} writes, {} bytes)", self.entries.len, self.arena.bytes)
    }
}

/// The 64-bit hash the index files a 32-bit key hash under: its bits twice, so that both the
/// low bits (the bucket) and the top ones (the tag) come from the key.
fn widen(hash: u32) -> u64 {
    ((hash as u64) << 32) | hash as u64
}

/// What a write costs [`WriteBuffer::bytes`] beside its key and value: its entry, and its slot
/// in the index were the index built (counted whether it is or not, so that a buffer's size
/// changes only when it is written).
const ENTRY_BYTES: usize = std::mem::size_of::<Entry>() + std::mem::size_of::<(u32, u32)>() + 1;

impl WriteBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// The memory it holds, about: the room reserved for keys, values and their entries,
    /// written or not, and an index slot per entry. It changes only when the buffer is written.
    pub fn bytes(&self) -> usize {
        self.arena.bytes + self.entries.capacity * ENTRY_BYTES
    }

    /// The number of keys written: exact once the buffer has been read by key (see the module
    /// docs); before, the number of writes, a key written twice counting twice.
    pub fn len(&self) -> usize {
        let index = self.index.lock();
        if index.kept { index.keys } else { self.entries.len }
    }

    /// Whether nothing was written or cleared.
    pub fn is_empty(&self) -> bool {
        self.entries.len == 0 && self.cleared.is_empty()
    }

    /// Empties the key ranges `start..end` of `ranges`: the rows stored there, and the ones this
    /// buffer wrote there, are gone; later writes are not.
    pub fn clear_ranges(&mut self, ranges: &[(Vec<u8>, Vec<u8>)]) {
        let inside =
            |key: &[u8]| ranges.iter().any(|(s, e)| s.as_slice() <= key && key < e.as_slice());
        let mut kept = WriteBuffer::new();
        // In the order written, so a key written twice ends with its newest write again.
        for (key, value) in self.writes().filter(|(k, _)| !inside(k)) {
            kept.insert(key, value);
        }
        kept.cleared = std::mem::take(&mut self.cleared);
        kept.cleared.extend(ranges.iter().cloned());
        kept.cleared.sort();
        kept.cleared.dedup_by(|next, prev| {
            // Overlapping or touching ranges merge into `prev`.
            if next.0 <= prev.1 {
                prev.1 = prev.1.clone().max(next.1.clone());
                true
            } else {
                false
            }
        });
        *self = kept;
    }

    /// The ranges emptied before the buffer's writes, sorted and disjoint.
    pub fn cleared(&self) -> &[(Vec<u8>, Vec<u8>)] {
        &self.cleared
    }

    /// Whether `key` lies in a range this buffer emptied.
    pub fn clears(&self, key: &[u8]) -> bool {
        let at = self.cleared.partition_point(|(start, _)| start.as_slice() <= key);
        at > 0 && key < self.cleared[at - 1].1.as_slice()
    }

    /// Puts `value` under `key` (`None`: deletes it), replacing an earlier write of `key`.
    pub fn insert(&mut self, key: &[u8], value: Option<&[u8]>) {
        assert!(key.len() < SUPERSEDED as usize, "a key of 2 GiB or more");
        let at = self.entries.len as u32;
        let entry = Entry {
            key_at: self.arena.push(key, value.unwrap_or_default()),
            key_len: key.len() as u32,
            value_len: value.map_or(DELETE, |v| v.len() as u32),
        };
        self.entries.push(entry);
        let index = self.index.get_mut();
        if !index.kept {
            return;
        }
        let hash = hash_key(&self.hasher, key);
        let (arena, entries) = (&self.arena, &self.entries);
        if let Some(replaced) = index.file(at, hash, |i| arena.key(entries.get(i)) == key) {
            self.entries.get_mut(replaced).key_len |= SUPERSEDED;
        }
    }

    /// The newest write of `key`: `Some(Some(value))` for a put, `Some(None)` for a delete,
    /// `None` if the key was not written. The first call builds the index (see the module docs).
    pub fn get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        let hash = hash_key(&self.hasher, key);
        let mut index = self.index.lock();
        if !index.kept {
            self.build_index(&mut index);
        }
        let arena = &self.arena;
        let &(i, _) = index
            .table
            .find(widen(hash), |&(i, h)| h == hash && arena.key(self.entries.get(i)) == key)?;
        drop(index);
        Some(arena.value(self.entries.get(i)))
    }

    /// Files every entry written so far in `index`, newest last, and has later writes keep it.
    fn build_index(&self, index: &mut Index) {
        let arena = &self.arena;
        for (at, entry) in self.entries.iter_from(0).enumerate() {
            let key = arena.key(entry);
            let hash = hash_key(&self.hasher, key);
            index.file(at as u32, hash, |i| arena.key(self.entries.get(i)) == key);
        }
        index.kept = true;
    }

    /// The newest write of every key with `start <= key` and `key` below `end`, in key order.
    pub fn range(&self, start: &[u8], end: Bound<&[u8]>) -> Vec<(&[u8], Option<&[u8]>)> {
        let mut order = self.order.lock();
        self.sort(&mut order);
        let arena = &self.arena;
        let from = order.sorted.partition_point(|e| arena.key(e) < start);
        let sorted = &order.sorted[from..];
        // Sized up front: grown by doubling, a commit's whole-buffer read copied itself over
        // and over into memory it had not touched yet.
        let mut rows = Vec::with_capacity(sorted.len());
        rows.extend(sorted.iter().map(|e| (arena.key(e), arena.value(e))).take_while(
            |(key, _)| match end {
                Bound::Included(end) => *key <= end,
                Bound::Excluded(end) => *key < end,
                Bound::Unbounded => true,
            },
        ));
        rows
    }

    /// The writes in the order written, but for those known to be replaced: each key's newest
    /// write is among them, and an older write of the key may be too (no sort, no index).
    pub fn writes(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.entries
            .iter_from(0)
            .filter(|e| !e.superseded())
            .map(|e| (self.arena.key(e), self.arena.value(e)))
    }

    /// The newest write of every key, in key order.
    pub fn iter(&self) -> Vec<(&[u8], Option<&[u8]>)> {
        self.range(&[], Bound::Unbounded)
    }

    /// Brings `order` up to date: sorts the entries written since, keeps each key's newest,
    /// and merges them in.
    fn sort(&self, order: &mut Order) {
        if order.sorted_upto == self.entries.len {
            return;
        }
        let arena = &self.arena;
        let live = self.entries.iter_from(order.sorted_upto).filter(|e| !e.superseded());
        // Sorted by the 16 bytes after the keys' common prefix first, compared as one integer
        // in the sort's own array, and by the whole key only where those tie: comparing
        // through the arena cost a cache miss and a `memcmp` per comparison. The array holds
        // the entries themselves, so that what follows reads no entry in random order.
        let first = live.clone().next().map_or(&[][..], |e| arena.key(e));
        let common = live.clone().fold(first.len().min(8), |common, e| {
            let key = arena.key(e);
            (0..common.min(key.len()))
                .find(|&at| key[at] != first[at])
                .unwrap_or(common.min(key.len()))
        });
        let mut fresh: Vec<(u128, Entry)> =
            Vec::with_capacity(self.entries.len - order.sorted_upto);
        fresh.extend(live.map(|e| (window(arena.key(e), common), *e)));
        // A key's writes tie on the key and come out oldest first (`key_at` grows with every
        // write), so the last of each run of equal keys is the one kept.
        sort_by_window(&mut fresh, |(wa, a), (wb, b)| {
            wa.cmp(wb).then_with(|| arena.key(a).cmp(arena.key(b))).then(a.key_at.cmp(&b.key_at))
        });
        let mut newest: Vec<Entry> = Vec::with_capacity(fresh.len());
        let mut last_window = None;
        for (w, entry) in fresh {
            match newest.last_mut() {
                Some(prev) if last_window == Some(w) && arena.key(prev) == arena.key(&entry) => {
                    *prev = entry;
                }
                _ => newest.push(entry),
            }
            last_window = Some(w);
        }
        order.sorted_upto = self.entries.len;
        if order.sorted.is_empty() {
            // The first sort (a backfill's buffer is sorted once, at its commit): nothing to
            // merge with.
            order.sorted = newest;
            return;
        }
        let old = std::mem::take(&mut order.sorted);
        let mut merged = Vec::with_capacity(old.len() + newest.len());
        let mut old = old.into_iter().peekable();
        let mut fresh = newest.into_iter().peekable();
        loop {
            let next = match (old.peek(), fresh.peek()) {
                (Some(a), Some(b)) => match arena.key(a).cmp(arena.key(b)) {
                    std::cmp::Ordering::Less => old.next(),
                    std::cmp::Ordering::Greater => fresh.next(),
                    // Written again since the last sort: the newer write replaces the older.
                    std::cmp::Ordering::Equal => {
                        old.next();
                        fresh.next()
                    }
                },
                (None, Some(_)) => fresh.next(),
                (Some(_), None) => old.next(),
                (None, None) => break,
            };
            merged.extend(next);
        }
        order.sorted = merged;
    }
}

/// Entries at least this many are spread into buckets before they are sorted (see
/// [`sort_by_window`]).
const BUCKETED_SORT_MIN: usize = 4096;

/// Sorts `entries` by `compare`, which orders by window first. A large buffer whose windows
/// are not in order already (a view's rows come in vnode order, and are left to the plain sort,
/// which finds them sorted) is first spread by the top byte of its windows into 256 buckets, in
/// one pass that keeps their order, and each bucket is then sorted on its own: a CDC snapshot's
/// epoch of 300 k rows spans every vnode, the byte after its keys' common prefix, so each
/// bucket is a vnode's 1 k rows, sorted in the CPU's cache, where one sort of 10 MB of entries
/// missed it at every level of its recursion. (Spreading in place, each entry swapped into its
/// bucket, saved the second array but read the entries out of order: no faster.)
fn sort_by_window(
    entries: &mut Vec<(u128, Entry)>,
    compare: impl Fn(&(u128, Entry), &(u128, Entry)) -> std::cmp::Ordering,
) {
    if entries.len() < BUCKETED_SORT_MIN || entries.windows(2).all(|w| w[0].0 <= w[1].0) {
        entries.sort_unstable_by(compare);
        return;
    }
    let top = |w: u128| (w >> 120) as usize;
    let mut starts = [0usize; 257];
    for &(w, _) in entries.iter() {
        starts[top(w) + 1] += 1;
    }
    for b in 0..256 {
        starts[b + 1] += starts[b];
    }
    let mut spread = vec![entries[0]; entries.len()];
    let mut free = starts;
    for &entry in entries.iter() {
        let b = top(entry.0);
        spread[free[b]] = entry;
        free[b] += 1;
    }
    for b in 0..256 {
        spread[starts[b]..starts[b + 1]].sort_unstable_by(&compare);
    }
    *entries = spread;
}

/// The key's hash, folded to 32 bits.
fn hash_key(hasher: &DefaultHashBuilder, key: &[u8]) -> u32 {
    let hash = hasher.hash_one(key);
    (hash ^ (hash >> 32)) as u32
}

/// The 16 bytes of `key` after its first `skip`, zero-padded, as a big-endian integer. Keys
/// sharing their first `skip` bytes are ordered by their windows wherever the windows differ:
/// where two keys first differ inside the window, so do their windows, in the keys' order; a
/// key that is a prefix of another is padded with zeros, which sort first.
fn window(key: &[u8], skip: usize) -> u128 {
    let mut bytes = [0u8; 16];
    let rest = &key[skip..];
    let n = rest.len().min(16);
    bytes[..n].copy_from_slice(&rest[..n]);
    u128::from_be_bytes(bytes)
}

/// Asks the CPU to bring the start of `value` into its cache; a hint with no effect on what runs.
pub(crate) fn prefetch<T: ?Sized>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address; this one is of a live value.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (value as *const T).cast(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn a_cleared_range_drops_the_earlier_writes_in_it_and_keeps_the_later_ones() {
        let mut buffer = WriteBuffer::new();
        buffer.insert(b"a", Some(b"1"));
        buffer.insert(b"c", Some(b"2"));
        buffer.insert(b"e", None);
        assert!(!buffer.clears(b"c"));
        buffer.clear_ranges(&[(b"d".to_vec(), b"f".to_vec()), (b"b".to_vec(), b"d".to_vec())]);
        assert_eq!(buffer.cleared(), [(b"b".to_vec(), b"f".to_vec())], "merged, in order");
        assert_eq!(
            (buffer.get(b"a"), buffer.get(b"c"), buffer.get(b"e")),
            (Some(Some(&b"1"[..])), None, None)
        );
        let clears: Vec<bool> =
            [&b"a"[..], b"b", b"c", b"e", b"f"].iter().map(|k| buffer.clears(k)).collect();
        assert_eq!(clears, [false, true, true, true, false]);
        buffer.insert(b"c", Some(b"3"));
        assert_eq!(buffer.iter(), [(&b"a"[..], Some(&b"1"[..])), (&b"c"[..], Some(&b"3"[..]))]);
        let mut only_cleared = WriteBuffer::new();
        only_cleared.clear_ranges(&[(b"x".to_vec(), b"y".to_vec())]);
        assert!(!only_cleared.is_empty(), "a clear alone is still to commit");
    }

    #[test]
    fn newest_write_wins_and_ranges_are_ordered() {
        let mut buffer = WriteBuffer::new();
        buffer.insert(b"b", Some(b"1"));
        buffer.insert(b"a", Some(b"2"));
        buffer.insert(b"c", None);
        assert_eq!(buffer.len(), 3);
        assert_eq!(buffer.get(b"a"), Some(Some(&b"2"[..])));
        assert_eq!(buffer.get(b"c"), Some(None));
        assert_eq!(buffer.get(b"d"), None);
        let all = buffer.iter();
        assert_eq!(all, vec![(&b"a"[..], Some(&b"2"[..])), (b"b", Some(b"1")), (b"c", None)]);
        // Writes after a range read are merged into the order by the next one.
        buffer.insert(b"b", None);
        buffer.insert(b"aa", Some(b"3"));
        buffer.insert(b"a", Some(b"4"));
        assert_eq!(buffer.len(), 4);
        assert_eq!(buffer.get(b"b"), Some(None));
        let keys: Vec<&[u8]> = buffer.iter().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, vec![&b"a"[..], b"aa", b"b", b"c"]);
        assert_eq!(buffer.range(b"aa", Bound::Excluded(b"c")).len(), 2);
        assert_eq!(buffer.range(b"aa", Bound::Included(b"c")).len(), 3);
        assert_eq!(buffer.range(b"a", Bound::Included(b"a")), vec![(&b"a"[..], Some(&b"4"[..]))]);
        assert!(buffer.range(b"d", Bound::Unbounded).is_empty());
    }

    /// A xorshift generator from `seed`: each call gives a number below its argument.
    fn random(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        }
    }

    /// Long keys that tie in their first bytes, differ only past 16 bytes, are prefixes of each
    /// other or end in zero bytes come out in key order.
    #[test]
    fn long_and_zero_padded_keys_sort_in_key_order() {
        let mut next = random(0x2545_f491_4f6c_dd1d_u64);
        for round in 0..50 {
            let mut buffer = WriteBuffer::new();
            let mut model = BTreeMap::new();
            // Most rounds share a prefix, as a state table's keys do; some do not.
            let shared = vec![7u8; if round % 5 == 0 { 0 } else { next(10) as usize }];
            for _ in 0..300 {
                let mut key = shared.clone();
                let len = next(30) as usize;
                key.extend((0..len).map(|_| [0u8, 1, 255][next(3) as usize]));
                buffer.insert(&key, Some(b"v"));
                model.insert(key, ());
            }
            let keys: Vec<Vec<u8>> = buffer.iter().into_iter().map(|(k, _)| k.to_vec()).collect();
            assert_eq!(keys, model.into_keys().collect::<Vec<_>>(), "round {round}");
        }
    }

    /// A buffer past its first arena blocks and entry chunks (and with a value larger than a
    /// block) still reads back every newest write, in key order.
    #[test]
    fn grows_past_its_first_blocks_and_chunks() {
        let mut buffer = WriteBuffer::new();
        let mut model = BTreeMap::new();
        let rows: usize = (1 << CHUNK_BITS) + 5000;
        for n in 0..rows {
            // Keys in a scattered order; every 7th row is written again, every 11th deleted.
            let key = ((n * 7919) % rows).to_be_bytes().to_vec();
            let value = vec![n as u8; 100 + n % 50];
            buffer.insert(&key, Some(&value));
            model.insert(key.clone(), Some(value));
            if n % 7 == 0 {
                let again = vec![1u8; n % 30];
                buffer.insert(&key, Some(&again));
                model.insert(key.clone(), Some(again));
            }
            if n % 11 == 0 {
                buffer.insert(&key, None);
                model.insert(key, None);
            }
        }
        // Sorted here, without an index, part-way through the second chunk of entries; then the
        // first keys are written again: the next sort starts mid-chunk and its merge replaces
        // their older writes.
        assert_eq!(buffer.iter().len(), model.len());
        for n in 0..300 {
            let key = ((n * 7919) % rows).to_be_bytes().to_vec();
            buffer.insert(&key, Some(b"again"));
            model.insert(key, Some(b"again".to_vec()));
        }
        let big = vec![9u8; 3 * BLOCK_MAX];
        buffer.insert(b"big", Some(&big));
        model.insert(b"big".to_vec(), Some(big.clone()));
        assert!(buffer.arena.blocks.len() > 2 && buffer.entries.chunks.len() == 2);
        assert_eq!(buffer.get(b"big"), Some(Some(&big[..])));
        assert_eq!(buffer.len(), model.len());
        let got: Vec<(&[u8], Option<&[u8]>)> = buffer.iter();
        let want: Vec<(&[u8], Option<&[u8]>)> =
            model.iter().map(|(k, v)| (k.as_slice(), v.as_deref())).collect();
        assert!(got == want, "every newest write, in key order");
        assert!(buffer.bytes() >= buffer.arena.blocks.iter().map(Vec::len).sum::<usize>());
    }

    /// A buffer large enough to be sorted in buckets comes out in key order with each key's
    /// newest write: keys of many lengths sharing prefixes of any length, rewritten and deleted.
    #[test]
    fn a_large_buffer_sorts_in_buckets_as_an_ordered_map_would() {
        let mut next = random(0x2545_f491_4f6c_dd1d_u64);
        for prefix in [&b""[..], b"t", b"table", b"table_id:vnode:"] {
            let mut buffer = WriteBuffer::new();
            let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
            for _ in 0..3 * BUCKETED_SORT_MIN {
                let mut key = prefix.to_vec();
                let len = next(24) as usize;
                key.extend((0..len).map(|_| next(4) as u8 * 60));
                let value = (next(8) > 0).then(|| vec![next(256) as u8; next(4) as usize]);
                buffer.insert(&key, value.as_deref());
                model.insert(key, value);
            }
            let got: Vec<(Vec<u8>, Option<Vec<u8>>)> = buffer
                .iter()
                .into_iter()
                .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                .collect();
            assert!(model.len() > BUCKETED_SORT_MIN, "{} keys", model.len());
            assert_eq!(got, model.into_iter().collect::<Vec<_>>());
        }
    }

    /// Random writes and range reads agree with an ordered map of the same writes: with the
    /// index kept from the first write, and (odd rounds) with writes that go unindexed, and
    /// are sorted and merged, until the first read by key half-way.
    #[test]
    fn agrees_with_an_ordered_map() {
        let mut next = random(0x9e37_79b9_7f4a_7c15_u64);
        for round in 0..20 {
            let mut buffer = WriteBuffer::new();
            let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
            for op in 0..500 {
                let key = vec![b'k', next(4) as u8, next(50) as u8];
                match next(10) {
                    0..=5 => {
                        let value = vec![next(256) as u8; next(5) as usize];
                        buffer.insert(&key, Some(&value));
                        model.insert(key.clone(), Some(value));
                    }
                    6..=7 => {
                        buffer.insert(&key, None);
                        model.insert(key.clone(), None);
                    }
                    _ => {
                        let start = vec![b'k', next(4) as u8];
                        let end = vec![b'k', next(5) as u8, next(50) as u8];
                        let got: Vec<(Vec<u8>, Option<Vec<u8>>)> = buffer
                            .range(&start, Bound::Excluded(&end))
                            .into_iter()
                            .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                            .collect();
                        let want: Vec<(Vec<u8>, Option<Vec<u8>>)> = if start < end {
                            model.range(start..end).map(|(k, v)| (k.clone(), v.clone())).collect()
                        } else {
                            Vec::new()
                        };
                        assert_eq!(got, want);
                    }
                }
                if round % 2 == 0 || op >= 250 {
                    assert_eq!(buffer.get(&key), model.get(&key).map(|v| v.as_deref()));
                } else {
                    assert!(!buffer.index.lock().kept, "no read by key yet");
                }
            }
            assert_eq!(buffer.len(), model.len());
            let all: Vec<Vec<u8>> = buffer.iter().into_iter().map(|(k, _)| k.to_vec()).collect();
            assert_eq!(all, model.keys().cloned().collect::<Vec<_>>());
        }
    }
}
