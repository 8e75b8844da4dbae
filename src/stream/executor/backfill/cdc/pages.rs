//! Snapshot pages: which split reads next, the reads in flight, and a page's rows merged with
//! the changes held while it was read.

use super::*;

impl CdcBackfill {
    /// Starts page reads while splits are idle and the epoch is not full
    /// ([`super::epoch_full`], counting the rows asked for).
    pub(super) fn start_reads(
        &mut self,
        reads: &mut FuturesUnordered<PageRead>,
        asked_this_epoch: &mut Option<usize>,
    ) {
        // `None`: the epoch is full and its checkpoint is asked for.
        while let Some(asked) = *asked_this_epoch {
            if super::super::epoch_full(asked, &self.store) {
                // Commit it soon rather than at the interval.
                self.config.barrier.request_checkpoint();
                *asked_this_epoch = None;
                break;
            }
            let Some(read) = self.next_read(reads.len()) else { break };
            *asked_this_epoch = Some(asked + self.config.batch_size);
            reads.push(read);
        }
    }

    /// Starts reading the next page of an idle unfinished split, if the phase, the number of
    /// reads in flight and the rate limit allow one.
    pub(super) fn next_read(&mut self, in_flight: usize) -> Option<PageRead> {
        if self.phase != Phase::Reading
            || in_flight >= self.config.parallelism
            || self.stopped.is_some()
        {
            return None;
        }
        let asked = self.limiter.budget(self.config.batch_size);
        if asked == 0 {
            return None;
        }
        let index = self.splits.iter().position(|s| !s.finished && !s.reading)?;
        self.limiter.consume(asked);
        let generation = self.generation;
        let split = &mut self.splits[index];
        split.reading = true;
        // On a task of its own: receiving and casting a page can use another core than the
        // merge.
        let read = tokio::spawn(read_page(PageRequest {
            session: split.session.take(),
            source: self.config.source.clone(),
            upstream: self.config.upstream.clone(),
            table: self.config.table.clone(),
            upstream_columns: self.upstream_columns.clone(),
            cursor: split.cursor.as_ref().map(|(text, _)| text.clone()),
            range: split.range.clone(),
            asked,
        }));
        Some(Box::pin(async move {
            let (session, page) = match read.await {
                Ok(done) => done,
                Err(e) => (None, Err(Error::Stream(format!("a snapshot page read failed: {e}")))),
            };
            PageDone { generation, split: index, asked, session, page }
        }))
    }

    /// Applies a page read: its rows, then the changes held back while it was read. A short page
    /// finishes its split. Upstream errors are retried after the next barrier.
    pub(super) fn on_page(&mut self, done: PageDone) -> Result<Vec<StreamChunk>> {
        let PageDone { generation, split: index, asked, session, page } = done;
        self.splits[index].reading = false;
        if generation != self.generation || self.stopped.is_some() {
            // Read across an upstream truncate, which ended the snapshot: the page may hold
            // rows the truncate deleted.
            self.splits[index].session = session;
            return Ok(Vec::new());
        }
        let (page, low) = match page {
            Ok(read) => read,
            Err(e @ Error::Upstream { .. }) => {
                // The cursor did not move: the held changes are to rows a later page reads.
                self.splits[index].held.clear();
                self.failed(e);
                return Ok(Vec::new());
            }
            Err(Error::OutOfRange(what)) => {
                // A value the table cannot hold exactly: stopped, rather than NULL or rounded.
                let name = &self.upstream_name;
                self.stop(format!("the table stopped following {name}: a snapshot row: {what}"));
                return Ok(Vec::new());
            }
            Err(e) => return Err(e),
        };
        let low = low.position();
        let n = page.rows.num_rows();
        tracing::debug!(split = %self.splits[index].id, rows = n, low, last = ?page.last_key, held = self.splits[index].held.len(), "read a snapshot page");
        self.last_error = None;
        let mut out = Vec::new();
        let finishes = n < asked;
        let last_key = match n {
            0 => None,
            _ => Some(self.keys(&page.rows.slice(n - 1, 1))?.remove(0)),
        };
        // Reading the snapshot again, the rows the table stored in the page's range before
        // (those of the pages before it are behind its cursor).
        let mut stored = BTreeMap::new();
        if self.config.overwrite {
            let split = &self.splits[index];
            let from = match &split.cursor {
                Some((_, cursor)) => super::ahead::after(cursor),
                None => self.bound_key(split.range.start.as_deref())?.unwrap_or_default(),
            };
            let to = match &last_key {
                Some(last) if !finishes => Some(super::ahead::after(last)),
                _ => split.end_key.clone(),
            };
            stored = self.stored_keys(&from, to.as_deref())?;
        }
        // The rows applied ahead of the cursor that this page's range holds: up to its last
        // row, or all that are left when it ends the split.
        let split = &mut self.splits[index];
        let mut covered = match &last_key {
            _ if finishes => std::mem::take(&mut split.ahead),
            Some(last) => {
                let mut after = last.clone();
                after.push(0);
                let rest = split.ahead.split_off(&after);
                std::mem::replace(&mut split.ahead, rest)
            }
            None => BTreeMap::new(),
        };
        covered.extend(stored);
        if let (Some(text_key), Some(key)) = (page.last_key, last_key) {
            split.pages.push_back(Page { last_key: key.clone(), low });
            split.cursor = Some((text_key, key));
            split.rows += n as u64;
        }
        if covered.is_empty() && !self.config.overwrite {
            // The page's keys are above every key the table holds from this split, so it is
            // plain inserts: no `_unchanged` column tells the materialize to skip its upsert
            // lookups.
            if n > 0 {
                out.push(StreamChunk::inserts(page.rows));
            }
        } else {
            out.extend(self.overwrite_ahead(page.rows, covered)?);
        }
        let split = &mut self.splits[index];
        split.session = session;
        split.dirty = true;
        split.last_low = low;
        if finishes {
            split.finished = true;
            if self.splits.iter().all(|s| s.finished) {
                self.phase = Phase::Finishing;
                self.config.barrier.request_checkpoint();
            }
        }
        for held in std::mem::take(&mut self.splits[index].held) {
            let split = &self.splits[index];
            let keep: Vec<bool> = held
                .keys
                .iter()
                .zip(&held.positions)
                .map(|(k, &position)| split.applies(k, position))
                .collect();
            out.extend(kept(&held.ops, &held.data, keep)?);
        }
        Ok(out)
    }
}

/// A page as read from the upstream: the table's rows (typed) and the key of the last one as
/// the upstream prints it (none for an empty page).
pub(super) struct ReadPage {
    pub(super) rows: RecordBatch,
    pub(super) last_key: Option<Vec<Option<String>>>,
}

/// What a page read needs, owned: it runs on a task of its own.
pub(super) struct PageRequest {
    pub(super) session: Option<UpstreamSession>,
    pub(super) source: SourceConfig,
    pub(super) upstream: UpstreamTable,
    pub(super) table: Arc<TableCatalog>,
    pub(super) upstream_columns: Arc<[usize]>,
    pub(super) cursor: Option<Vec<Option<String>>>,
    pub(super) range: SplitRange,
    pub(super) asked: usize,
}

/// Reads the page `request` asks for and casts it to the table's types, on its connection (or
/// a new one, returned with the page).
pub(super) async fn read_page(
    request: PageRequest,
) -> (Option<UpstreamSession>, Result<(ReadPage, CdcOffset)>) {
    let PageRequest { session, source, upstream, table, upstream_columns, cursor, range, asked } =
        request;
    let mut session = match session {
        Some(session) => session,
        None => match source.session().await {
            Ok(session) => session,
            Err(e) => return (None, Err(e)),
        },
    };
    let page = match session.snapshot_page(&upstream, cursor.as_deref(), &range, asked).await {
        Ok((page, low)) => typed_page(&table, &upstream_columns, page).map(|p| (p, low)),
        Err(e) => Err(e),
    };
    (Some(session), page)
}

/// A page as the upstream sent it (text or typed columns) as a [`ReadPage`].
pub(super) fn typed_page(
    table: &TableCatalog,
    upstream_columns: &[usize],
    page: SnapshotPage,
) -> Result<ReadPage> {
    let rows = typed_batch(table, upstream_columns, |u| Ok(page.columns[u].clone()))?;
    Ok(ReadPage { rows, last_key: page.last_key })
}
