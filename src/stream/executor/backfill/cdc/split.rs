//! A CDC backfill's splits: ranges of the first key column, each read after its own cursor, and
//! how they are planned from the upstream's split points.

use super::*;

impl CdcBackfill {
    /// Whether the table is read in more than one split.
    pub(super) fn splits_wanted(&self) -> bool {
        self.config.parallelism > 1 || self.config.rows_per_split.is_some()
    }

    /// Cuts the table into splits, once, before the first page: `backfill.num_rows_per_split`
    /// rows each (by the upstream's estimate), else one per reader.
    pub(super) async fn plan(&mut self) -> Result<()> {
        let upstream = self.config.upstream.clone();
        let (parallelism, rows_per_split) = (self.config.parallelism, self.config.rows_per_split);
        let session = self.session().await?;
        let wanted = match rows_per_split {
            Some(per_split) => {
                let estimate = session.estimate_rows(&upstream.schema, &upstream.name).await?;
                estimate.div_ceil(per_split).clamp(1, MAX_SPLITS as u64) as usize
            }
            None => parallelism,
        };
        let points = session.split_points(&upstream, wanted).await?;
        let splits = self.splits_at(points)?;
        tracing::info!(table = %self.upstream_name, splits = splits.len(), "planned the snapshot splits");
        self.splits = splits;
        Ok(())
    }

    /// The splits that the values `points` of the first key column cut the table into, in the
    /// order of Sluice's keys (which the routing of changes to splits relies on), whatever the
    /// order of `points`.
    pub(super) fn splits_at(&self, points: Vec<String>) -> Result<Vec<Split>> {
        let mut points = points
            .into_iter()
            .map(|p| Ok((self.bound_key(Some(&p))?.expect("a bound"), p)))
            .collect::<Result<Vec<_>>>()?;
        points.sort();
        points.dedup_by(|a, b| a.0 == b.0);
        let mut splits = Vec::with_capacity(points.len() + 1);
        let mut start = None;
        let bounds = points.into_iter().map(|(k, p)| (Some(k), Some(p)));
        for (key, point) in bounds.chain([(None, None)]) {
            let range = SplitRange { start: start.take(), end: point.clone() };
            let id = format!("{}/{}", self.upstream_name, splits.len());
            splits.push(Split::new(id, range, key));
            start = point;
        }
        Ok(splits)
    }

    /// The storage-key form of a split bound (text of the first key column): keys of rows whose
    /// first key column is at or above it compare at or above it.
    pub(super) fn bound_key(&self, bound: Option<&str>) -> Result<Option<Vec<u8>>> {
        let Some(bound) = bound else { return Ok(None) };
        let table = &self.config.table;
        let text: ArrayRef = Arc::new(StringArray::from(vec![bound]));
        let typed = cast_to(&text, table.columns[table.pk[0]].data_type, CastMode::Upstream)?;
        let mut key = vec![Vec::new()];
        encode_column(&typed, &mut key)?;
        Ok(key.pop())
    }

    /// Plans the splits if that is still to do; an upstream error is retried after the next
    /// barrier.
    pub(super) async fn ensure_planned(&mut self) -> Result<()> {
        if !self.splits.is_empty() || self.phase != Phase::Reading {
            return Ok(());
        }
        match self.plan().await {
            Ok(()) => Ok(()),
            Err(e @ Error::Upstream { .. }) => {
                self.failed(e);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// One range of the upstream table's keys, read page after page after its own cursor, with
/// the merge rule applied to its own pages.
pub(super) struct Split {
    /// `schema.table` for a table read as one split, `schema.table/n` for split `n`.
    pub(super) id: String,
    pub(super) range: SplitRange,
    /// The storage-key form of `range.end`: keys at or above it belong to later splits.
    pub(super) end_key: Option<Vec<u8>>,
    /// The key of the last row read, as text (for the next page) and as a storage key.
    pub(super) cursor: Option<(Vec<Option<String>>, Vec<u8>)>,
    /// Every row of the range is read.
    pub(super) finished: bool,
    pub(super) rows: u64,
    /// Pages whose low offset may still be above an arriving change's LSN.
    pub(super) pages: VecDeque<Page>,
    /// Rows with keys up to this one (inclusive) take every change.
    pub(super) settled: Option<Vec<u8>>,
    pub(super) last_low: u64,
    /// Progress changed since the last checkpoint.
    pub(super) dirty: bool,
    /// A page of the split is being read; its connection is with the read.
    pub(super) reading: bool,
    pub(super) held: Vec<Held>,
    /// Rows beyond the cursor that changes wrote to the table ahead of the snapshot, by
    /// storage key, with their key values: the page that reads their range overwrites or
    /// deletes them.
    pub(super) ahead: BTreeMap<Vec<u8>, Vec<ScalarValue>>,
    pub(super) session: Option<UpstreamSession>,
}

impl Split {
    pub(super) fn new(id: String, range: SplitRange, end_key: Option<Vec<u8>>) -> Self {
        Split {
            id,
            range,
            end_key,
            cursor: None,
            finished: false,
            rows: 0,
            pages: VecDeque::new(),
            settled: None,
            last_low: 0,
            dirty: true,
            reading: false,
            held: Vec::new(),
            ahead: BTreeMap::new(),
            session: None,
        }
    }

    /// Whether `key` is beyond the cursor of a split still reading: a later page reads it.
    pub(super) fn ahead(&self, key: &[u8]) -> bool {
        !self.finished && self.cursor.as_ref().is_none_or(|(_, cursor)| key > cursor.as_slice())
    }

    /// Whether a change to the row with `key`, committed at `position`, must be applied.
    pub(super) fn applies(&self, key: &[u8], position: u64) -> bool {
        if self.ahead(key) {
            return false;
        }
        if self.settled.as_ref().is_some_and(|s| key <= s.as_slice()) {
            return true;
        }
        match self.pages.iter().find(|p| key <= p.last_key.as_slice()) {
            Some(page) => position >= page.low,
            None => true,
        }
    }

    /// Pages whose low offset is at or below `position` cannot see an older change any more.
    pub(super) fn settle(&mut self, position: u64) {
        while self.pages.front().is_some_and(|p| p.low <= position) {
            let page = self.pages.pop_front().expect("checked");
            self.settled = Some(page.last_key);
        }
    }
}
