//! `StateTable`: the relational view of one relation's stored rows.
//!
//! Writes go to an in-memory buffer for the current epoch. [`StateTable::commit`] seals the
//! buffer and stages it with the [`Store`], which makes it durable when the epoch's checkpoint
//! commits. Until then the sealed buffer stays readable here, so the table always reads its own
//! writes: current buffer first, then sealed epochs newest first, then the committed data.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use arrow::array::ArrayRef;

use crate::chunk::StreamChunk;
use crate::error::Result;
use crate::ids::{Epoch, TableId, VirtualNode};
use crate::storage::keycodec::{
    KEY_PREFIX_LEN, encode_keys, encode_keys_into, prefix_end, table_prefix, vnode_prefix,
};
use crate::storage::row_codec::encode_rows;
use crate::storage::store::{Store, WriteBuffer};

/// Stored rows as (key, value) pairs, in key order.
pub type KeyedRows = Vec<(Vec<u8>, Vec<u8>)>;

/// Rows of a range read, and the last committed key read when the read stopped at its limit.
type RangePage = (Vec<(Vec<u8>, Vec<u8>)>, Option<Vec<u8>>);

/// One relation's rows, keyed by `table id | vnode | pk`.
pub struct StateTable {
    table_id: TableId,
    pk_indices: Vec<usize>,
    dist_key_len: usize,
    store: Arc<Store>,
    buffer: WriteBuffer,
    sealed: VecDeque<(Epoch, Arc<WriteBuffer>)>,
    /// Per-row key and value buffers reused by every chunk written.
    scratch: (Vec<Vec<u8>>, Vec<Vec<u8>>),
    /// See [`StateTable::rewriting`].
    rewrites: bool,
    /// See [`StateTable::widened`].
    widened: Vec<(usize, crate::types::DataType)>,
}

impl StateTable {
    /// A state table for relation `table_id` whose primary key is the columns `pk_indices`, of
    /// which the first `dist_key_len` choose the vnode.
    pub fn new(
        store: Arc<Store>,
        table_id: TableId,
        pk_indices: Vec<usize>,
        dist_key_len: usize,
    ) -> Self {
        Self {
            table_id,
            pk_indices,
            dist_key_len,
            store,
            buffer: WriteBuffer::new(),
            sealed: VecDeque::new(),
            scratch: Default::default(),
            rewrites: false,
            widened: Vec::new(),
        }
    }

    /// The same table, whose columns were widened in place as `widened` lists (see
    /// [`TableCatalog::widened`](crate::catalog::TableCatalog::widened)).
    pub fn with_widened(mut self, widened: Vec<(usize, crate::types::DataType)>) -> Self {
        self.widened = widened;
        self
    }

    /// The relation's columns widened in place, `(column, type before)`, oldest first: what
    /// [`RowDecoder::widened`](crate::storage::row_codec::RowDecoder::widened) takes.
    pub fn widened(&self) -> &[(usize, crate::types::DataType)] {
        &self.widened
    }

    /// The same table, marked as one whose epochs mostly rewrite the rows of recent epochs (an
    /// aggregate's groups): its writes then keep a commit in the memtable (see
    /// [`Store::commit`]).
    pub fn rewriting(mut self) -> Self {
        self.rewrites = true;
        self
    }

    /// The relation this table stores.
    pub fn table_id(&self) -> TableId {
        self.table_id
    }

    /// The primary-key columns, in key order: what a stored row's key holds.
    pub fn pk_indices(&self) -> &[usize] {
        &self.pk_indices
    }

    /// The storage keys of every row of `columns` (all columns of the relation).
    pub fn keys(&self, columns: &[ArrayRef], num_rows: usize) -> Result<Vec<Vec<u8>>> {
        let pk: Vec<ArrayRef> = self.pk_indices.iter().map(|&i| columns[i].clone()).collect();
        encode_keys(self.table_id, &pk, num_rows, self.dist_key_len)
    }

    /// Applies every change of `chunk`: inserts put the row under its key, deletes remove it.
    pub fn write_chunk(&mut self, chunk: &StreamChunk) -> Result<()> {
        self.write_rows(chunk, None)
    }

    /// [`StateTable::write_chunk`] with each row put in the vnode `vnodes` gives it rather than
    /// the one its key's first columns hash to: for a table ordered by a column other than the
    /// one that distributes its rows (a dynamic filter's rows, ordered by the compared value,
    /// live in the vnode their distribution key routed them to).
    pub fn write_chunk_at(&mut self, chunk: &StreamChunk, vnodes: &[VirtualNode]) -> Result<()> {
        self.write_rows(chunk, Some(vnodes))
    }

    fn write_rows(&mut self, chunk: &StreamChunk, vnodes: Option<&[VirtualNode]>) -> Result<()> {
        let (keys, values) = &mut self.scratch;
        let pk: Vec<ArrayRef> =
            self.pk_indices.iter().map(|&i| chunk.columns()[i].clone()).collect();
        let dist_key_len = if vnodes.is_some() { 0 } else { self.dist_key_len };
        encode_keys_into(self.table_id, &pk, chunk.len(), dist_key_len, keys)?;
        for (key, vnode) in keys.iter_mut().zip(vnodes.unwrap_or_default()) {
            key[..KEY_PREFIX_LEN].copy_from_slice(&vnode_prefix(self.table_id, *vnode));
        }
        values.truncate(chunk.len());
        values.iter_mut().for_each(Vec::clear);
        values.resize_with(chunk.len(), Vec::new);
        encode_rows(chunk.columns(), &self.pk_indices, values);
        let before = self.buffer.bytes();
        for ((op, key), value) in chunk.ops().iter().zip(keys.iter()).zip(values.iter()) {
            self.buffer.insert(key, op.is_insert().then_some(value.as_slice()));
        }
        self.note_growth(before);
        Ok(())
    }

    /// The encoded keys and values of the rows the last [`StateTable::write_chunk`] wrote, in
    /// its order (a delete's value is what the row would have held).
    pub fn last_written(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let (keys, values) = &self.scratch;
        keys.iter().zip(values).map(|(k, v)| (k.as_slice(), v.as_slice()))
    }

    /// Puts an encoded row under an encoded key.
    pub fn insert(&mut self, key: Vec<u8>, value: Vec<u8>) {
        let before = self.buffer.bytes();
        self.buffer.insert(&key, Some(&value));
        self.note_growth(before);
    }

    /// Removes the row under an encoded key.
    pub fn delete(&mut self, key: Vec<u8>) {
        let before = self.buffer.bytes();
        self.buffer.insert(&key, None);
        self.note_growth(before);
    }

    /// Replaces the row under `key`; the same as [`StateTable::insert`] for a keyed table.
    pub fn update(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.insert(key, value);
    }

    /// Tells the store how much this epoch's buffer grew (or shrank) since it took `before`
    /// bytes ([`Store::uncommitted_bytes`]).
    fn note_growth(&self, before: usize) {
        self.store.note_buffered(self.buffer.bytes() as i64 - before as i64);
    }

    /// The current encoded row under `key`, including writes not yet committed.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.overlay_get(key) {
            return Ok(v.map(<[u8]>::to_vec));
        }
        self.store.get(key)
    }

    /// The current encoded rows under many keys, with one storage read for all keys the
    /// uncommitted writes do not answer.
    pub fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut out: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        let mut misses = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            match self.overlay_get(key) {
                Some(v) => out[i] = v.map(<[u8]>::to_vec),
                None => misses.push(i),
            }
        }
        if !misses.is_empty() {
            let wanted: Vec<Vec<u8>> = misses.iter().map(|&i| keys[i].clone()).collect();
            let found = self.store.snapshot().multi_get(&wanted)?;
            for (i, value) in misses.into_iter().zip(found) {
                out[i] = value;
            }
        }
        Ok(out)
    }

    /// Empties the key ranges `start..end` of `ranges`: every row there, committed or not, is
    /// deleted, without a write per row (the checkpoint deletes the ranges).
    pub fn clear_ranges(&mut self, ranges: &[(Vec<u8>, Vec<u8>)]) {
        let before = self.buffer.bytes();
        self.buffer.clear_ranges(ranges);
        self.note_growth(before);
    }

    /// The key ranges of `vnodes` (sorted), adjacent vnodes in one range.
    pub fn vnode_ranges(&self, vnodes: &[VirtualNode]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut ranges: Vec<(u16, u16)> = Vec::new();
        for vnode in vnodes.iter().map(|v| v.0) {
            match ranges.last_mut() {
                Some((_, end)) if *end == vnode => *end = vnode + 1,
                _ => ranges.push((vnode, vnode + 1)),
            }
        }
        // The end of the last vnode is the prefix of vnode 256, below the next table's keys.
        let prefix = |v: u16| vnode_prefix(self.table_id, VirtualNode(v)).to_vec();
        ranges.into_iter().map(|(start, end)| (prefix(start), prefix(end))).collect()
    }

    /// What the uncommitted writes say of `key`, newest first: a write, or a delete when a
    /// clear covers it; `None` when only the committed data can tell.
    fn overlay_get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        let sealed = self.sealed.iter().rev().map(|(_, b)| b.as_ref());
        for buffer in [&self.buffer].into_iter().chain(sealed) {
            if let Some(value) = buffer.get(key) {
                return Some(value);
            }
            if buffer.clears(key) {
                return Some(None);
            }
        }
        None
    }

    /// The uncommitted buffers, oldest first.
    fn overlays(&self) -> Vec<&WriteBuffer> {
        self.sealed.iter().map(|(_, b)| b.as_ref()).chain([&self.buffer]).collect()
    }

    /// Up to `limit` current rows with `start <= key < end`, in key order, including writes not
    /// yet committed: fewer only when the range holds fewer. Continue a scan from just after
    /// the last key returned.
    pub fn iter_range(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut rows = Vec::new();
        let mut from = start.to_vec();
        loop {
            let (page, scanned_to) = self.range_page(&from, end, limit - rows.len())?;
            rows.extend(page);
            match scanned_to {
                // Committed rows the writes not yet committed deleted: read on past them.
                Some(last) if rows.len() < limit => {
                    from = last;
                    from.push(0);
                }
                _ => return Ok(rows),
            }
        }
    }

    /// One page of [`StateTable::iter_range`]: up to `limit` current rows from `start`, and the
    /// last committed key read when the committed scan stopped at its limit (the rows are
    /// complete up to it only; deleted ones may leave the page short).
    fn range_page(&self, start: &[u8], end: &[u8], limit: usize) -> Result<RangePage> {
        let snapshot = self.store.snapshot();
        let overlays = self.overlays();
        let mut rows: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        let mut last = None;
        for (from, to) in uncleared(start, end, &overlays) {
            if rows.len() >= limit {
                break;
            }
            let scanned = snapshot.scan(&from, &to, limit - rows.len(), |k, v| {
                rows.insert(k.to_vec(), Some(v.to_vec()));
                Ok(())
            })?;
            last = scanned.or(last);
        }
        // Committed rows are complete up to `last` when the scan hit its limit, else to `end`.
        let hit_limit = rows.len() >= limit;
        let upper = match (&last, hit_limit) {
            (Some(last), true) => Bound::Included(last.as_slice()),
            _ => Bound::Excluded(end),
        };
        for buffer in overlays {
            if !buffer.cleared().is_empty() {
                rows.retain(|k, _| !buffer.clears(k));
            }
            let writes = buffer.range(start, upper);
            rows.extend(writes.into_iter().map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec))));
        }
        let page = rows.into_iter().filter_map(|(k, v)| Some((k, v?))).take(limit).collect();
        Ok((page, if hit_limit { last } else { None }))
    }

    /// For each of `prefixes` (ascending, none a prefix of another), the current rows (key and
    /// value) whose keys start with it, in key order, including writes not yet committed. The
    /// committed rows of all of them are read with one iterator (see
    /// [`ReadSnapshot::scan_prefixes`](crate::storage::store::snapshot::ReadSnapshot::scan_prefixes)).
    pub fn rows_by_prefix(&self, prefixes: &[&[u8]]) -> Result<Vec<KeyedRows>> {
        let overlays = self.overlays();
        if overlays.iter().any(|b| !b.cleared().is_empty()) {
            // Rare (a truncate in an epoch not committed yet): each prefix on its own.
            return prefixes
                .iter()
                .map(|p| {
                    let end = prefix_end(p);
                    self.iter_range(p, &end, usize::MAX)
                })
                .collect();
        }
        let mut committed: Vec<Vec<(Vec<u8>, Vec<u8>)>> = vec![Vec::new(); prefixes.len()];
        self.store.snapshot().scan_prefixes(prefixes, |i, k, v| {
            committed[i].push((k.to_vec(), v.to_vec()));
            Ok(())
        })?;
        let mut out = Vec::with_capacity(prefixes.len());
        for (prefix, committed) in prefixes.iter().zip(committed) {
            let end = prefix_end(prefix);
            let written: Vec<_> = overlays
                .iter()
                .map(|b| b.range(prefix, Bound::Excluded(&end)))
                .filter(|w| !w.is_empty())
                .collect();
            if written.is_empty() {
                out.push(committed);
                continue;
            }
            // Oldest first: each newer write of a key replaces what came before it.
            let mut rows: BTreeMap<Vec<u8>, Option<Vec<u8>>> =
                committed.into_iter().map(|(k, v)| (k, Some(v))).collect();
            for writes in written {
                rows.extend(writes.into_iter().map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec))));
            }
            out.push(rows.into_iter().filter_map(|(k, v)| Some((k, v?))).collect());
        }
        Ok(out)
    }

    /// The current row with the greatest (`last`) or smallest key in `start <= key < end`,
    /// including writes not yet committed. Reads the committed rows from that end of the range,
    /// so it costs one row plus the uncommitted writes of the range, whatever the range holds.
    pub fn edge_of_range(
        &self,
        start: &[u8],
        end: &[u8],
        last: bool,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        // Uncommitted writes of the range, newest winning.
        let overlays = self.overlays();
        let mut overlay: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        for buffer in &overlays {
            if !buffer.cleared().is_empty() {
                overlay.retain(|k, _| !buffer.clears(k));
            }
            let writes = buffer.range(start, Bound::Excluded(end));
            overlay.extend(writes.into_iter().map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec))));
        }
        let mut committed = None;
        let snapshot = self.store.snapshot();
        let mut parts = uncleared(start, end, &overlays);
        if last {
            parts.reverse();
        }
        for (from, to) in parts {
            snapshot.scan_until(&from, &to, last, |k, v| {
                if overlay.contains_key(k) {
                    return Ok(true);
                }
                committed = Some((k.to_vec(), v.to_vec()));
                Ok(false)
            })?;
            if committed.is_some() {
                break;
            }
        }
        let mut present = overlay.into_iter().filter_map(|(k, v)| Some((k, v?)));
        let written = if last { present.next_back() } else { present.next() };
        Ok(match (committed, written) {
            (Some(c), Some(w)) => Some(if (c.0 > w.0) == last { c } else { w }),
            (c, w) => c.or(w),
        })
    }

    /// Seals this epoch's writes and stages them with the store for the checkpoint of `epoch`.
    /// Sealed buffers of already committed epochs are released.
    pub fn commit(&mut self, epoch: Epoch) {
        let committed = self.store.committed_epoch();
        while self.sealed.front().is_some_and(|(e, _)| *e <= committed) {
            self.sealed.pop_front();
        }
        if self.buffer.is_empty() {
            return;
        }
        // The next epoch's buffer starts empty: room reserved ahead (sized like this one) would
        // count against the epoch's memory before a row is written.
        let mut sealed = std::mem::take(&mut self.buffer);
        sealed.rewrites = self.rewrites;
        let sealed = Arc::new(sealed);
        self.store.stage(epoch, sealed.clone());
        self.sealed.push_back((epoch, sealed));
    }

    /// The key range holding all of this table's rows.
    pub fn full_range(&self) -> (Vec<u8>, Vec<u8>) {
        let end = TableId(self.table_id.0 + 1);
        (table_prefix(self.table_id).to_vec(), table_prefix(end).to_vec())
    }
}

impl Drop for StateTable {
    /// Writes of an epoch that will not be sealed (the actor stopped) no longer count as
    /// buffered.
    fn drop(&mut self) {
        self.store.note_buffered(-(self.buffer.bytes() as i64));
    }
}

/// The parts of `start..end` that no clear of `overlays` covers, in key order: where the
/// committed rows still count.
fn uncleared(start: &[u8], end: &[u8], overlays: &[&WriteBuffer]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut cleared: Vec<&(Vec<u8>, Vec<u8>)> = overlays.iter().flat_map(|b| b.cleared()).collect();
    cleared.sort();
    let mut parts = Vec::new();
    let mut from = start.to_vec();
    for (clear_start, clear_end) in cleared {
        if clear_start.as_slice() >= end {
            break;
        }
        if clear_end.as_slice() <= from.as_slice() {
            continue;
        }
        if clear_start.as_slice() > from.as_slice() {
            parts.push((from, clear_start.clone()));
        }
        from = clear_end.clone();
    }
    if from.as_slice() < end {
        parts.push((from, end.to_vec()));
    }
    parts
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int32Array, Int64Array, RecordBatch};
    use arrow::datatypes::{DataType as A, Field, Schema};

    use super::*;
    use crate::chunk::Op;

    fn chunk(ops: Vec<Op>, ids: Vec<i64>, vals: Vec<i32>) -> StreamChunk {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", A::Int64, false),
            Field::new("v", A::Int32, true),
        ]));
        let data = RecordBatch::try_new(
            schema,
            vec![Arc::new(Int64Array::from(ids)), Arc::new(Int32Array::from(vals))],
        )
        .unwrap();
        StreamChunk::new(ops, data)
    }

    #[test]
    fn a_cleared_range_hides_older_rows_until_and_after_its_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut table = StateTable::new(store.clone(), TableId(3), vec![0], 1);
        let ids: Vec<i64> = (1..=8).collect();
        let part = |r: std::ops::Range<usize>| {
            let ids = ids[r].to_vec();
            chunk(vec![Op::Insert; ids.len()], ids.clone(), ids.iter().map(|&i| i as i32).collect())
        };
        let all = part(0..8);
        let mut keys = table.keys(all.columns(), all.len()).unwrap();
        keys.sort();
        let rows = |range: std::ops::Range<usize>| -> Vec<Vec<u8>> { keys[range].to_vec() };
        table.write_chunk(&part(0..4)).unwrap();
        table.commit(Epoch(1));
        store.commit(Epoch(1)).unwrap();
        table.write_chunk(&part(4..7)).unwrap();
        table.commit(Epoch(2));
        table.write_chunk(&part(7..8)).unwrap();
        // Clear the middle of the key space: keys[2]..keys[6].
        table.clear_ranges(&[(keys[2].clone(), keys[6].clone())]);
        let (start, end) = table.full_range();
        let listed = |table: &StateTable, limit: usize| -> Vec<Vec<u8>> {
            let mut out = Vec::new();
            let mut from = start.clone();
            loop {
                let page = table.iter_range(&from, &end, limit).unwrap();
                let Some((last, _)) = page.last() else { break };
                from = [last.as_slice(), &[0]].concat();
                out.extend(page.into_iter().map(|(k, _)| k));
            }
            out
        };
        let kept = [rows(0..2), rows(6..8)].concat();
        for limit in [1, 2, 100] {
            assert_eq!(listed(&table, limit), kept, "limit {limit}");
        }
        let present: Vec<bool> = keys.iter().map(|k| table.get(k).unwrap().is_some()).collect();
        assert_eq!(present, [true, true, false, false, false, false, true, true]);
        let edge = |last| table.edge_of_range(&keys[2], &end, last).unwrap().map(|(k, _)| k);
        assert_eq!((edge(false), edge(true)), (Some(keys[6].clone()), Some(keys[7].clone())));
        assert_eq!(table.edge_of_range(&keys[2], &keys[6], false).unwrap(), None);
        // A row written after the clear stays.
        let unsorted = table.keys(all.columns(), all.len()).unwrap();
        let middle = unsorted.iter().position(|k| *k == keys[3]).unwrap();
        table.write_chunk(&part(middle..middle + 1)).unwrap();
        let kept = [rows(0..2), rows(3..4), rows(6..8)].concat();
        assert_eq!(listed(&table, 2), kept);
        table.commit(Epoch(3));
        store.commit(Epoch(3)).unwrap();
        table.commit(Epoch(4));
        let durable: Vec<bool> = keys.iter().map(|k| store.get(k).unwrap().is_some()).collect();
        assert_eq!(durable, [true, true, false, true, false, false, true, true]);
        assert_eq!(listed(&table, 3), kept);
    }

    #[test]
    fn the_store_counts_the_bytes_of_writes_until_their_epoch_commits() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut a = StateTable::new(store.clone(), TableId(3), vec![0], 1);
        let mut b = StateTable::new(store.clone(), TableId(4), vec![0], 1);
        a.write_chunk(&chunk(vec![Op::Insert; 3], vec![1, 2, 3], vec![10, 20, 30])).unwrap();
        let three = store.uncommitted_bytes();
        assert!(three > 0);
        b.write_chunk(&chunk(vec![Op::Insert; 3], vec![1, 2, 3], vec![10, 20, 30])).unwrap();
        assert_eq!(store.uncommitted_bytes(), 2 * three, "both tables' writes");
        // Sealed, they still count; committed, they no longer do.
        a.commit(Epoch(1));
        b.commit(Epoch(1));
        assert_eq!(store.uncommitted_bytes(), 2 * three);
        store.commit(Epoch(1)).unwrap();
        assert_eq!(store.uncommitted_bytes(), 0);
        // A clear shrinks the buffer; a table dropped with writes unsealed gives them back.
        a.write_chunk(&chunk(vec![Op::Insert; 3], vec![1, 2, 3], vec![10, 20, 30])).unwrap();
        a.clear_ranges(&[a.full_range()]);
        assert_eq!(store.uncommitted_bytes(), 0);
        b.write_chunk(&chunk(vec![Op::Insert; 3], vec![1, 2, 3], vec![10, 20, 30])).unwrap();
        drop(b);
        assert_eq!(store.uncommitted_bytes(), 0);
        // Discarded epochs give theirs back.
        a.write_chunk(&chunk(vec![Op::Insert; 3], vec![4, 5, 6], vec![10, 20, 30])).unwrap();
        a.commit(Epoch(2));
        store.discard_uncommitted(Epoch(2));
        assert_eq!(store.uncommitted_bytes(), 0);
    }

    #[test]
    fn reads_own_writes_across_commit_and_iterates_merged() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut table = StateTable::new(store.clone(), TableId(3), vec![0], 1);
        table.write_chunk(&chunk(vec![Op::Insert; 3], vec![1, 2, 3], vec![10, 20, 30])).unwrap();
        table.commit(Epoch(1));
        store.commit(Epoch(1)).unwrap();

        // Epoch 2: delete 2, update 3, insert 4; sealed but not committed.
        let c = chunk(
            vec![Op::Delete, Op::UpdateDelete, Op::UpdateInsert, Op::Insert],
            vec![2, 3, 3, 4],
            vec![20, 30, 31, 40],
        );
        table.write_chunk(&c).unwrap();
        table.commit(Epoch(2));
        let (start, end) = table.full_range();
        let rows = table.iter_range(&start, &end, 100).unwrap();
        assert_eq!(rows.len(), 3, "1, 3 and 4 remain");
        let keys = table.keys(c.columns(), c.len()).unwrap();
        assert_eq!(table.get(&keys[0]).unwrap(), None, "2 was deleted");
        assert!(table.get(&keys[3]).unwrap().is_some(), "4 is visible before commit");
        assert_eq!(store.get(&keys[3]).unwrap(), None, "but not yet durable");

        store.commit(Epoch(2)).unwrap();
        table.commit(Epoch(3));
        assert!(store.get(&keys[3]).unwrap().is_some());
        let limited = table.iter_range(&start, &end, 2).unwrap();
        assert_eq!(limited.len(), 2);
        assert_eq!(limited, rows[..2].to_vec());
    }

    #[test]
    fn a_limited_range_reads_past_committed_rows_deleted_since() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // One vnode for every key, so key order is id order.
        let mut table = StateTable::new(store.clone(), TableId(3), vec![0], 0);
        let ids: Vec<i64> = (1..=6).collect();
        table.write_chunk(&chunk(vec![Op::Insert; 6], ids, vec![0; 6])).unwrap();
        table.commit(Epoch(1));
        store.commit(Epoch(1)).unwrap();
        // The first four committed rows deleted, not yet committed: the first live row is 5.
        table.write_chunk(&chunk(vec![Op::Delete; 4], vec![1, 2, 3, 4], vec![0; 4])).unwrap();
        let (start, end) = table.full_range();
        let first = table.iter_range(&start, &end, 1).unwrap();
        let keys = table.keys(chunk(vec![Op::Insert], vec![5], vec![0]).columns(), 1).unwrap();
        assert_eq!(first.len(), 1, "a live row is left after the deleted ones");
        assert_eq!(first[0].0, keys[0]);
        assert_eq!(table.iter_range(&start, &end, 3).unwrap().len(), 2, "5 and 6 only");
    }

    #[test]
    fn range_edges_see_uncommitted_writes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // One vnode for every key, so key order is id order.
        let mut table = StateTable::new(store.clone(), TableId(3), vec![0], 0);
        let (start, end) = table.full_range();
        assert_eq!(table.edge_of_range(&start, &end, true).unwrap(), None);
        table.write_chunk(&chunk(vec![Op::Insert; 3], vec![1, 2, 3], vec![10, 20, 30])).unwrap();
        table.commit(Epoch(1));
        store.commit(Epoch(1)).unwrap();
        let last = |t: &StateTable| t.edge_of_range(&start, &end, true).unwrap().map(|(_, v)| v);
        let first = |t: &StateTable| t.edge_of_range(&start, &end, false).unwrap().map(|(_, v)| v);
        let value_of = |t: &StateTable, id: i64| {
            let c = chunk(vec![Op::Insert], vec![id], vec![0]);
            t.get(&t.keys(c.columns(), 1).unwrap()[0]).unwrap()
        };
        assert_eq!(last(&table), value_of(&table, 3));
        assert_eq!(first(&table), value_of(&table, 1));
        // Deleting the greatest (smallest) committed row uncovers the next one.
        table.write_chunk(&chunk(vec![Op::Delete, Op::Delete], vec![3, 1], vec![30, 10])).unwrap();
        assert_eq!(last(&table), value_of(&table, 2));
        assert_eq!(first(&table), value_of(&table, 2));
        // A sealed, uncommitted insert above everything wins.
        table.write_chunk(&chunk(vec![Op::Insert], vec![9], vec![90])).unwrap();
        table.commit(Epoch(2));
        assert_eq!(last(&table), value_of(&table, 9));
        table.write_chunk(&chunk(vec![Op::Delete], vec![9], vec![90])).unwrap();
        assert_eq!(last(&table), value_of(&table, 2));
        assert!(last(&table).is_some());
        // And one below everything wins at the other end.
        table.write_chunk(&chunk(vec![Op::Insert], vec![0], vec![0])).unwrap();
        assert_eq!(first(&table), value_of(&table, 0));
    }
}
