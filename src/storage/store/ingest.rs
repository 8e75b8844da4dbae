//! Committing an epoch as sorted files: the files an epoch's rows are cut into, how they are
//! written, and how level 0 of the state column family is kept while a CDC snapshot copies.
//!
//! An epoch of many rows (a backfill's, a snapshot's pages) is written as SST files ingested
//! together with the epoch record ([`Store::commit`] chooses); a vnode-ordered stretch (a
//! backfill's output) gets files of its own so that RocksDB can place them below level 0
//! ([`file_pieces`]). While a snapshot copies, level 0 merges late
//! ([`Store::defer_level0_merges`]).

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use rocksdb::{IngestExternalFileOptions, SstFileWriter};

use crate::error::Result;
use crate::ids::{Epoch, TableId};
use crate::storage::keycodec::KEY_PREFIX_LEN;
use crate::storage::page_cache;
use crate::storage::store::{STATE_EPOCH_KEY, Store, state_options};
use crate::storage::write_buffer::prefetch;
/// An epoch writing at least this many rows is committed by ingesting them as sorted files
/// ([`Store::commit`]); so is a smaller one holding a vnode-ordered stretch (see
/// [`file_pieces`]). A backfill's epochs hold 64 k rows or more per actor; a change stream
/// at 50 k changes/s writes about 25 k rows per epoch and keeps the batch, whose commit has no
/// fixed cost (an ingestion syncs its file, and flushes a memtable overlapping it).
pub(super) const INGEST_MIN_ROWS: usize = 32 * 1024;

/// Keeps level 0's merges deferred while held (see [`Store::defer_level0_merges`]).
pub struct MergeDeferral {
    store: Arc<Store>,
    table: TableId,
}

impl Drop for MergeDeferral {
    fn drop(&mut self) {
        let mut deferred = self.store.deferred.lock();
        if let Some(at) = deferred.iter().position(|t| *t == self.table) {
            deferred.swap_remove(at);
        }
        if deferred.is_empty() {
            self.store.set_level0(&LEVEL0_NORMAL);
        }
    }
}

/// When RocksDB merges the state column family's level 0 into the level below, and when it
/// slows and stops writes for level 0's sake (a count of files), and the size of the level
/// below that also has level 0 merged once level 0 is larger.
pub(super) struct Level0 {
    pub(super) compaction_trigger: usize,
    pub(super) slowdown_trigger: usize,
    pub(super) stop_trigger: usize,
    pub(super) max_bytes_for_level_base: u64,
}

/// Level 0 most of the time (see [`state_options`]; the level base is RocksDB's default).
pub(super) const LEVEL0_NORMAL: Level0 = Level0 {
    compaction_trigger: 16,
    slowdown_trigger: 64,
    stop_trigger: 96,
    max_bytes_for_level_base: 256 << 20,
};

/// Level 0 while a CDC snapshot copies (see [`Store::defer_level0_merges`]): a copy ingests two
/// files per epoch (its rows and the epoch record), 50 for 10 M rows at the default two splits,
/// so 64 let such a copy finish before any merge; no merge for size alone.
const LEVEL0_DEFERRED: Level0 = Level0 {
    compaction_trigger: 64,
    slowdown_trigger: 96,
    stop_trigger: 128,
    max_bytes_for_level_base: 1 << 40,
};

/// How many rows ahead an ingestion fetches into the cache (see [`Store::commit`]).
const PREFETCH_ROWS: usize = 16;

/// A key and its newest value (`None`: deleted).
pub(super) type Write<'a> = (&'a [u8], Option<&'a [u8]>);

/// Writes the rows of `pieces[i]` as the SST file `paths[i]`, the epoch record first in the
/// first one (it sorts before every row); returns the files' bytes. The unordered files of the
/// tables in `uncached` leave the page cache (see [`Store::defer_level0_merges`]).
fn write_files(
    epoch: Epoch,
    rows: &[Write<'_>],
    pieces: &[Piece],
    paths: &[PathBuf],
    uncached: &[TableId],
) -> Result<u64> {
    let opts = state_options();
    let mut bytes = 0;
    for (i, (piece, path)) in pieces.iter().zip(paths).enumerate() {
        let mut writer = SstFileWriter::create(&opts);
        writer.open(path)?;
        if i == 0 {
            writer.put(STATE_EPOCH_KEY, epoch.0.to_be_bytes())?;
        }
        for at in piece.rows.clone() {
            // The rows lie in the write buffers' arenas in the order they were written, not in
            // key order: fetching the ones a few rows ahead hides the cache misses the writer's
            // order check and copy would otherwise wait for.
            if let Some(&(ahead, ahead_value)) = rows.get(at + PREFETCH_ROWS) {
                prefetch(ahead);
                prefetch(ahead_value.unwrap_or_default());
            }
            match rows[at] {
                (key, Some(v)) => writer.put(key, v)?,
                (key, None) => writer.delete(key)?,
            }
        }
        writer.finish()?;
        bytes += writer.file_size();
        let table = rows[piece.rows.clone()].first().and_then(|row| key_table(row.0));
        if !piece.ordered && table.is_some_and(|t| uncached.contains(&TableId(t))) {
            // Only a hint: the file is correct either way.
            let _ = page_cache::drop_cached(path);
        }
    }
    Ok(bytes)
}

/// The table id a stored row's key starts with (none for a key shorter than one).
fn key_table(key: &[u8]) -> Option<u32> {
    key.get(..4).map(|t| u32::from_be_bytes(t.try_into().expect("four bytes")))
}

/// A stretch of a table's rows over at most this many consecutive vnodes is a backfill's
/// vnode-ordered output (see [`file_pieces`]); an epoch of writes spread over the whole table
/// (a CDC snapshot's pages) touches every vnode.
const ORDERED_MAX_VNODES: usize = 64;

/// A stretch of fewer rows is not worth files of its own (see [`file_pieces`]).
pub(super) const ORDERED_MIN_ROWS: usize = 4096;

/// One file of an ingested epoch: a range of its sorted rows.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Piece {
    pub(super) rows: Range<usize>,
    /// Whether the rows are (part of) a vnode-ordered stretch (see [`file_pieces`]).
    pub(super) ordered: bool,
}

/// How an ingested epoch's sorted `rows` are cut into files, in key order.
///
/// RocksDB puts an ingested file in the lowest level where it overlaps no file (and no running
/// compaction's output), and a file in level 0 costs a compaction later. A view's backfill
/// reads its upstream vnode by vnode, so each actor writes, per epoch, a stretch of consecutive
/// vnodes of the view's table: the first and the last may be partial (the previous epoch read
/// the first one's start, the next epoch reads the last one's rest), those between are whole.
/// Each such stretch becomes three *ordered* files: the first vnode, the whole ones, the last
/// vnode. The whole ones overlap nothing stored, and the partial ones nothing either when the
/// view's key follows the upstream's order within a vnode (a filter and projection keeping the
/// key): they go below level 0 and are never compacted. The rows between stretches (a CDC
/// snapshot's pages spread over every vnode, progress rows rewritten at each epoch) overlap
/// earlier epochs' and go to level 0 anyway. They go in one file per table, so that a file (and
/// the compaction that merges it) never spans another table's rows; but tables with
/// consecutive ids (a CDC table and its progress) share one, so that an epoch adds as few files
/// to level 0 as it can (each file there counts towards the compaction trigger).
///
/// For example, rows of table 7 in vnodes 10 (partial), 11, 12 and 13 (partial), then the
/// progress rows of table 8: files `[7/10] [7/11..7/12] [7/13]` ordered, `[8/*]` not.
pub(super) fn file_pieces(rows: &[Write<'_>]) -> Vec<Piece> {
    // Runs of rows sharing table and vnode; a key shorter than that prefix is a run of its own.
    // The rows are in key order, so a run's end is found by a binary search: a few keys read
    // per run rather than every key (which lie in the write buffers' arenas in the order
    // written, not in key order: a cache miss each, a sixth of a CDC snapshot's commit).
    let prefix = |i: usize| rows[i].0.get(..KEY_PREFIX_LEN);
    let mut runs: Vec<Range<usize>> = Vec::new();
    let mut start = 0;
    while start < rows.len() {
        let end = match prefix(start) {
            Some(p) => {
                let rest = &rows[start + 1..];
                start + 1 + rest.partition_point(|row| row.0.get(..KEY_PREFIX_LEN) == Some(p))
            }
            None => start + 1,
        };
        runs.push(start..end);
        start = end;
    }
    // Stretches: runs of one table over consecutive vnodes.
    let follows = |a: &Range<usize>, b: &Range<usize>| match (prefix(a.start), prefix(b.start)) {
        (Some(a), Some(b)) => {
            let vnode = |k: &[u8]| u16::from_be_bytes([k[4], k[5]]);
            a[..4] == b[..4] && vnode(a).checked_add(1) == Some(vnode(b))
        }
        _ => false,
    };
    // Rows between stretches: one file per table, or per run of tables with consecutive ids
    // (a CDC table and its progress), between which no other table's rows can lie. A run's
    // rows share its first row's table.
    let table_id = |i: usize| key_table(rows[i].0);
    let unordered = |gap: &[Range<usize>], pieces: &mut Vec<Piece>| {
        let Some(first) = gap.first() else { return };
        let mut from = first.start;
        for pair in gap.windows(2) {
            let (before, at) = (table_id(pair[0].start), table_id(pair[1].start));
            if before != at && before.and_then(|t| t.checked_add(1)) != at {
                pieces.push(Piece { rows: from..pair[1].start, ordered: false });
                from = pair[1].start;
            }
        }
        pieces.push(Piece { rows: from..gap[gap.len() - 1].end, ordered: false });
    };
    let mut pieces = Vec::new();
    let mut unordered_from = 0;
    let mut first = 0;
    for i in 1..=runs.len() {
        if i < runs.len() && follows(&runs[i - 1], &runs[i]) {
            continue;
        }
        let stretch = &runs[first..i];
        let stretch_start = first;
        first = i;
        let (head, tail) = (&stretch[0], &stretch[stretch.len() - 1]);
        if stretch.len() > ORDERED_MAX_VNODES || tail.end - head.start < ORDERED_MIN_ROWS {
            continue;
        }
        unordered(&runs[unordered_from..stretch_start], &mut pieces);
        let mut cuts = [head.start, head.end, tail.start, tail.end];
        cuts.sort_unstable();
        for w in cuts.windows(2).filter(|w| w[0] < w[1]) {
            pieces.push(Piece { rows: w[0]..w[1], ordered: true });
        }
        unordered_from = i;
    }
    unordered(&runs[unordered_from..], &mut pieces);
    pieces
}

/// The rows of `runs` (each in key order, oldest run first) in key order, the newest write of a
/// key winning. Runs whose key ranges do not overlap (buffers of different tables, the usual
/// case) are laid end to end without comparing their rows.
pub(super) fn merged(mut runs: Vec<Vec<Write<'_>>>) -> Vec<Write<'_>> {
    runs.retain(|run| !run.is_empty());
    let mut by_start: Vec<&Vec<_>> = runs.iter().collect();
    by_start.sort_by_key(|run| run[0].0);
    let disjoint = by_start.windows(2).all(|w| w[0].last().expect("not empty").0 < w[1][0].0);
    if disjoint {
        let mut rows = Vec::with_capacity(runs.iter().map(Vec::len).sum());
        for run in by_start {
            rows.extend_from_slice(run);
        }
        return rows;
    }
    // Merged two at a time, each run with its neighbour, so that of two runs merged the later
    // is still the newer: a linear merge per level where one sort of all the rows compared
    // every row about log2(rows) times.
    while runs.len() > 1 {
        let mut level = Vec::with_capacity(runs.len().div_ceil(2));
        let mut runs_left = runs.into_iter();
        while let Some(older) = runs_left.next() {
            level.push(match runs_left.next() {
                Some(newer) => merge_two(&older, &newer),
                None => older,
            });
        }
        runs = level;
    }
    runs.pop().unwrap_or_default()
}

/// The rows of `older` and `newer` (each in key order, no key twice) in key order, `newer`'s
/// write of a key in both winning. A stretch of one run that sorts before the other's next row
/// is found by galloping and copied whole: two actors' buffers of one table interleave by vnode
/// in stretches of thousands of rows.
fn merge_two<'a>(older: &[Write<'a>], newer: &[Write<'a>]) -> Vec<Write<'a>> {
    let mut rows = Vec::with_capacity(older.len() + newer.len());
    let (mut i, mut j) = (0, 0);
    while let (Some(next_new), Some(_)) = (newer.get(j), older.get(i)) {
        let n = prefix_len(&older[i..], |row| row.0 < next_new.0);
        rows.extend_from_slice(&older[i..i + n]);
        i += n;
        let Some(next_old) = older.get(i) else { break };
        let m = prefix_len(&newer[j..], |row| row.0 <= next_old.0);
        rows.extend_from_slice(&newer[j..j + m]);
        j += m;
        if rows.last().is_some_and(|last| last.0 == next_old.0) {
            i += 1;
        }
    }
    rows.extend_from_slice(&older[i..]);
    rows.extend_from_slice(&newer[j..]);
    rows
}

/// How many of `rows` from the first hold `holds`, which holds for a prefix of them: an
/// exponential search from the front, then a binary one, so a short prefix costs a few
/// comparisons and a long one its logarithm.
fn prefix_len<T>(rows: &[T], holds: impl Fn(&T) -> bool) -> usize {
    if !rows.first().is_some_and(&holds) {
        return 0;
    }
    let mut bound = 1;
    while bound < rows.len() && holds(&rows[bound]) {
        bound *= 2;
    }
    // `holds` holds at `bound / 2` and not at `bound` (or `bound` is past the end).
    let from = bound / 2 + 1;
    from + rows[from..bound.min(rows.len())].partition_point(holds)
}

impl Store {
    /// Commits the `rows` of an epoch's buffers (merged, none with clears), cut into `pieces`
    /// by [`file_pieces`], and the epoch record as SST files ingested together.
    pub(super) fn ingest(
        &self,
        epoch: Epoch,
        rows: &[Write<'_>],
        mut pieces: Vec<Piece>,
    ) -> Result<u64> {
        // The record, in a file of its own: with rows of a table, it would stretch their file
        // over every table stored before.
        pieces.insert(0, Piece { rows: 0..0, ordered: false });
        let paths: Vec<PathBuf> = (0..pieces.len())
            .map(|i| self.ingest_dir.join(format!("{}.{i}.sst", epoch.0)))
            .collect();
        let uncached = self.deferred.lock().clone();
        let written = write_files(epoch, rows, &pieces, &paths, &uncached);
        let ingested = written.and_then(|bytes| {
            let mut io = IngestExternalFileOptions::default();
            io.set_move_files(true);
            self.db.ingest_external_file_cf_opts(self.state_cf(), &io, paths.iter().collect())?;
            Ok(bytes)
        });
        for path in &paths {
            let _ = std::fs::remove_file(path);
        }
        ingested
    }

    /// Defers RocksDB's merges of level 0 until the returned guard (and every other one) is
    /// dropped: level 0 is then merged when it holds [`LEVEL0_DEFERRED`]'s file count rather
    /// than [`LEVEL0_NORMAL`]'s, and never for its size alone. Meanwhile the files of `table`'s
    /// rows that an ingestion puts in level 0 leave the page cache once written.
    ///
    /// Held while a CDC table copies its snapshot. Each of the copy's epochs is ingested as a
    /// file spanning the whole table (its pages are spread over every vnode), so each merge of
    /// level 0 into the level below rewrites every row copied so far: at the usual trigger a
    /// 10 M-row copy merged 3-4 times as it ran, a fifth of Sluice's CPU beside the copy, and
    /// the rewrites grow with the square of the table. Deferred, the copy's files are merged
    /// once, by [`Store::compact_table`] when it finishes, and a copy too large for the deferred
    /// count merges a few times rather than many.
    ///
    /// Those files are read once, by that merge, which writes the table's lasting files through
    /// the page cache; kept cached until then, the copy's files took fresh pages for every
    /// epoch, each costing the kernel a fault to the host where the VM had handed idle memory
    /// back (a third of the time spent writing them). Dropped once written, their pages are
    /// reused by the next epoch's file. Reads of the table meanwhile (a change's lookup of the
    /// row it replaces, a query) may go to the disk.
    pub fn defer_level0_merges(self: &Arc<Self>, table: TableId) -> MergeDeferral {
        let mut deferred = self.deferred.lock();
        deferred.push(table);
        if deferred.len() == 1 {
            self.set_level0(&LEVEL0_DEFERRED);
        }
        MergeDeferral { store: self.clone(), table }
    }

    /// Sets the state column family's level-0 triggers; a failure is logged, as the store
    /// works either way.
    pub(super) fn set_level0(&self, level0: &Level0) {
        let values = [
            level0.compaction_trigger.to_string(),
            level0.slowdown_trigger.to_string(),
            level0.stop_trigger.to_string(),
            level0.max_bytes_for_level_base.to_string(),
        ];
        let options: Vec<(&str, &str)> = [
            "level0_file_num_compaction_trigger",
            "level0_slowdown_writes_trigger",
            "level0_stop_writes_trigger",
            "max_bytes_for_level_base",
        ]
        .into_iter()
        .zip(values.iter().map(String::as_str))
        .collect();
        if let Err(error) = self.db.set_options_cf(self.state_cf(), &options) {
            tracing::warn!(%error, ?options, "cannot set the level-0 triggers");
        }
    }
}
