//! The source's changes to this table: checked against the upstream's description, cast to the
//! table's types (a value a column cannot hold stops the table), and merged with the snapshot.

use super::*;

impl CdcBackfill {
    /// Takes the source's changes to this table, in order: row changes go through the merge
    /// rule ([`Self::merge_changes`]), and a truncate ends the snapshot ([`Self::truncate`])
    /// and goes on to the materialize, which deletes every row.
    pub(super) async fn on_changes(&mut self, chunk: &StreamChunk) -> Result<Vec<Message>> {
        let changes = Changes::of(chunk)?;
        let rows: Vec<usize> =
            (0..chunk.len()).filter(|&i| changes.table.value(i) == self.upstream_name).collect();
        let mut out = Vec::new();
        let special = |i: usize| changes.truncate.value(i) || changes.relation.value(i);
        for run in rows.split_inclusive(|&i| special(i)) {
            let &last = run.last().expect("runs are not empty");
            let rows = if special(last) { &run[..run.len() - 1] } else { run };
            if self.stopped.is_some() {
                break;
            }
            if let Some(chunk) = self.merge_changes(&changes, rows).await? {
                out.push(Message::Chunk(chunk));
            }
            let position = changes.position.value(last) as u64;
            if changes.truncate.value(last)
                && self.config.overwrite
                && self.config.snapshot
                && position < self.config.truncates_from
            {
                self.restart_snapshot(position);
                out.push(Message::Truncate);
            } else if changes.truncate.value(last) {
                self.truncate(position);
                out.push(Message::Truncate);
            } else if changes.relation.value(last) {
                let (names, types) = (changes.values_of(last), changes.types_of(last));
                self.check_columns(&names, &types, position).await?;
            }
        }
        Ok(out)
    }

    /// Checks the columns (`names`, and `types` where the stream names them) the upstream
    /// says the table's changes have from here on; stops the table at a change it cannot
    /// follow (see [`upstream_guard`](super::upstream_guard)). When the types cannot be told
    /// from the description and the upstream does not answer, fails: the changes after the
    /// description must not be applied unchecked.
    pub(super) async fn check_columns(
        &mut self,
        names: &[Option<&str>],
        types: &[TypeId],
        position: u64,
    ) -> Result<()> {
        match self.guard.check_names(names, position) {
            Described::Stop(reason) => {
                self.stop(reason);
                return Ok(());
            }
            Described::Changed { dropped, added } => {
                self.follow_columns(dropped, added, Vec::new(), position)?;
                if self.stopped.is_some() {
                    return Ok(());
                }
            }
            Described::Same => {}
        }
        // The changes from here on are laid out as the description names its columns (a
        // transaction may describe the table more than once, all at one position).
        let named: Option<Vec<&str>> = names.iter().copied().collect();
        let layout = match &named {
            Some(named) => self.guard.places(named),
            None => self.guard.layout_at(position),
        };
        if named.is_some() {
            self.described = Some(layout.clone());
        }
        // A text column retyped to another text type is followed in place: the stored values
        // and the views over them keep their type; the snapshot is read again once (the
        // upstream may have rewritten the values, `USING ..`), and descriptions from before
        // are taken as they come.
        let mut retyped = Vec::new();
        while let Some(Some(column)) = self.guard.retyped_column(types, &layout) {
            let now = self.type_at(types, column, &layout);
            if self.guard.retype_followed(column, position) {
                // A description from before a retype the table followed (read again) names
                // the type the column had then.
                self.guard.take_described_type(column, now);
                continue;
            }
            let Some((name, holds)) = self.guard.retypes_in_place_to(column, now) else { break };
            retyped.push((column, name.clone(), holds));
            self.guard.retype(column, now, name, holds);
        }
        if !retyped.is_empty() {
            return self.follow_columns(Vec::new(), Vec::new(), retyped, position);
        }
        match self.guard.retyped_column(types, &layout) {
            // Only the identity is left to ask; the periodic check asks again if this fails.
            Some(None) => _ = self.check_upstream(false).await,
            Some(Some(column)) => {
                // The upstream's description names the new type, when it answers.
                self.check_upstream(true).await;
                if self.stopped.is_none() {
                    self.stop_retyped(column, self.type_at(types, column, &layout)).await;
                }
            }
            None => {
                if !self.check_upstream(true).await {
                    return Err(Error::Upstream {
                        code: "08006",
                        message: format!(
                            "cannot check the columns {} has from here on: the upstream did not \
                             answer (its changes are read again)",
                            self.upstream_name
                        ),
                    });
                }
                if self.stopped.is_none()
                    && let Some(Some(column)) = self.guard.retyped_column(types, &layout)
                {
                    self.stop_retyped(column, self.type_at(types, column, &layout)).await;
                }
            }
        }
        Ok(())
    }

    /// Columns the upstream dropped (`dropped`), or added after the others (`added`), at
    /// `position`: records them for the recovery this asks for by failing, which changes the
    /// table and, for added columns, reads its snapshot again (`docs/cdc.md`, "When the
    /// upstream changes"); the changes from the description on are read again once it has.
    /// Columns added to a table declared with a column list are not read, and nothing
    /// changes; with `schema.change = 'stop'` the table stops instead.
    fn follow_columns(
        &mut self,
        dropped: Vec<usize>,
        mut added: Vec<String>,
        retyped: Vec<Retype>,
        position: u64,
    ) -> Result<()> {
        if !self.config.follow_columns {
            added.clear();
        }
        if dropped.is_empty() && added.is_empty() && retyped.is_empty() {
            return Ok(());
        }
        let names = |us: &[usize]| {
            let names: Vec<&str> =
                us.iter().map(|&u| self.config.upstream.columns[u].name.as_str()).collect();
            names.join(", ")
        };
        let mut what = Vec::new();
        if !dropped.is_empty() {
            what.push(format!("dropped column(s) {}", names(&dropped)));
        }
        if !added.is_empty() {
            what.push(format!("gained column(s) {}", added.join(", ")));
        }
        for (u, ty, _) in &retyped {
            what.push(format!("changed column {} to {ty}", self.config.upstream.columns[*u].name));
        }
        let what = what.join(" and ");
        if self.config.stop_at_schema_change {
            self.stop(format!(
                "the table stopped following {}: the upstream table {what}, and the table was \
                 created with schema.change = 'stop'. It keeps the rows it had; ALTER TABLE {} \
                 REFRESH SCHEMA builds it again from the upstream table as it is now",
                self.upstream_name, self.config.table.name
            ));
            return Ok(());
        }
        tracing::info!(table = %self.config.table.name, upstream = %self.upstream_name, %what, position, "the upstream's columns changed; the table follows them");
        self.config.rebuilds.push_change(crate::stream::graph::cdc::ColumnChange {
            table: self.config.table.id,
            position,
            dropped,
            added,
            retyped,
        });
        Err(Error::Stream(format!(
            "the upstream table {} {what}: the table follows the change",
            self.upstream_name
        )))
    }

    /// The type a description naming `types`, laid out as `layout`, gives upstream column `u`.
    fn type_at(&self, types: &[TypeId], u: usize, layout: &[Option<usize>]) -> TypeId {
        let place = layout[u].unwrap_or(u);
        types.get(place).copied().unwrap_or((0, 0))
    }

    /// Stops the table at column `column` retyped to `now` by the stream's description. The
    /// upstream may not show the change to a fresh description yet (a transaction is sent once
    /// its commit is logged, a moment before other sessions see it), so the new type is named
    /// by its id.
    async fn stop_retyped(&mut self, column: usize, now: TypeId) {
        let named = match self.take_session().await {
            Ok(mut session) => {
                let named = session.type_name(now).await;
                self.session = named.is_ok().then_some(session);
                named.ok().flatten()
            }
            Err(_) => None,
        };
        self.stop(self.guard.retyped(column, named.as_deref()));
    }

    /// Checks the upstream table is still the one the table was created over; the first
    /// check after a start also checks its columns (a change made while Sluice was down may
    /// have altered them before any change shows it).
    /// Columns the table reads that are gone upstream (a table the stream has not described
    /// since, as a quiet Postgres table) are followed as dropped at the upstream's current
    /// position: a description the stream sends from before it moves the drop back to its own.
    pub(super) async fn check_identity(&mut self) -> Result<()> {
        if self.stopped.is_some() {
            return Ok(());
        }
        let columns = !self.columns_checked;
        self.columns_checked |= self.check_upstream(columns).await;
        let missing = self.guard.missing().to_vec();
        let retyped = self.guard.pending_retypes().to_vec();
        if self.stopped.is_some() || (missing.is_empty() && retyped.is_empty()) {
            return Ok(());
        }
        if let Some(&key) = missing.iter().find(|&&u| self.guard.is_key(u)) {
            let name = &self.config.upstream.columns[key].name;
            self.stop(format!(
                "the table stopped following {}: key column {name} was dropped upstream. It \
                 keeps the rows it had; ALTER TABLE {} REFRESH SCHEMA builds it again from the \
                 upstream table as it is now",
                self.upstream_name, self.config.table.name
            ));
            return Ok(());
        }
        let position = match self.config.source.current_position().await {
            Ok(position) => position,
            Err(e) => {
                tracing::warn!(table = %self.upstream_name, error = %e, "cannot read the upstream's position to follow a changed column; asking again later");
                return Ok(());
            }
        };
        self.follow_columns(missing, Vec::new(), retyped, position)
    }

    /// Asks the upstream (see [`UpstreamGuard::check`]) and stops the table at a change it
    /// cannot follow; whether the upstream answered (if not, the next check asks again).
    pub(super) async fn check_upstream(&mut self, columns: bool) -> bool {
        let checked = match self.take_session().await {
            Ok(mut session) => {
                let checked = self.guard.check(&mut session, columns).await;
                self.session = Some(session);
                checked
            }
            Err(e) => Err(e),
        };
        match checked {
            Ok(Some(reason)) => self.stop(reason),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(table = %self.upstream_name, error = %e, "cannot check the upstream table");
                self.session = None;
                return false;
            }
        }
        true
    }

    /// Stops following the upstream: no page is read and no change applied from here on; the
    /// table keeps its rows.
    /// Stops the table for `reason`: no page is read and no change applied from here on, and
    /// the reason is shown (and recorded at the next checkpoint).
    pub(super) fn stop(&mut self, reason: String) {
        tracing::error!(table = %self.config.table.name, upstream = %self.upstream_name, %reason, "a CDC table stopped");
        self.config.metrics.cdc_table_error(self.config.table.id.0, Some(reason.clone()));
        self.status.send_modify(|s| s.stopped = Some(reason.clone()));
        self.stopped = Some(reason);
        self.stop_recorded = false;
        self.config.barrier.request_checkpoint();
    }

    /// An upstream `TRUNCATE`, committed at `position`: the table is empty there, and each row it
    /// holds later was written by a change after the truncate, which the source delivers. So
    /// the snapshot has nothing left to read: every split finishes, what was held or applied
    /// ahead is forgotten (the truncate deletes it), pages in flight are dropped when they
    /// arrive (they may have been read before the truncate), and every later change applies.
    /// A crash before the checkpoint that records it loses the epoch, and the source delivers
    /// the truncate again.
    pub(super) fn truncate(&mut self, position: u64) {
        tracing::info!(table = %self.upstream_name, position, "an upstream TRUNCATE emptied the table");
        self.generation += 1;
        if self.splits.is_empty() {
            self.splits.push(Split::new(self.upstream_name.clone(), SplitRange::default(), None));
        }
        for split in &mut self.splits {
            split.finished = true;
            split.dirty = true;
            split.held.clear();
            split.ahead.clear();
            split.pages.clear();
            split.settled = None;
        }
        if !matches!(self.phase, Phase::Done { .. }) {
            self.phase = Phase::Finishing;
            self.last_error = None;
            self.config.barrier.request_checkpoint();
        }
    }

    /// An upstream `TRUNCATE` at `position`, read again from before the snapshot that
    /// overwrites the table began (see [`CdcBackfillConfig::truncates_from`]): it empties the
    /// table, and the snapshot starts over, every page reading after it. Ending the snapshot
    /// there, as a live truncate does, would leave the rows the stream sends after it as the
    /// stream has them (without the values of columns added later); keeping the pages read
    /// before it would keep rows it deleted (the CDC matrix found both).
    pub(super) fn restart_snapshot(&mut self, position: u64) {
        tracing::info!(table = %self.upstream_name, position, "an upstream TRUNCATE from before the snapshot read again: emptied the table and reading the snapshot from its start");
        self.generation += 1;
        for split in &mut self.splits {
            *split = Split::new(split.id.clone(), split.range.clone(), split.end_key.clone());
        }
        self.phase = Phase::Reading;
        self.last_error = None;
        if self.ticket.is_none() {
            self.ticket = Some(self.config.barrier.backfilling());
        }
    }

    /// Applies the merge rule to the changes `rows` (none a truncate); returns the ones to
    /// emit. Changes to rows beyond the cursor of a split with a page in flight are held until
    /// it is applied.
    pub(super) async fn merge_changes(
        &mut self,
        changes: &Changes<'_>,
        rows: &[usize],
    ) -> Result<Option<StreamChunk>> {
        if rows.is_empty() {
            return Ok(None);
        }
        let layouts = Layouts::of(&self.guard, self.described.as_ref(), changes, rows);
        let fetched = self.fetch_unchanged(changes, rows, &layouts).await?;
        let added = self.config.columns_since.iter().map(|&(_, n)| n).min().unwrap_or(usize::MAX);
        let data = match self.typed(|u| fetched.gather(changes, rows, u, added, &layouts)) {
            Err(Error::OutOfRange(what)) => {
                self.stop(format!("the table stopped following {}: {what}", self.upstream_name));
                return Ok(None);
            }
            data => data?,
        };
        let unchanged = self.unchanged_columns(changes, rows, &layouts);
        let all_sent: Vec<bool> = (0..rows.len())
            .map(|i| unchanged.is_null(i) || unchanged.value_length(i) == 0)
            .collect();
        let data = with_unchanged(data, unchanged)?;
        let keys = self.keys(&data)?;
        let positions: Vec<u64> = rows.iter().map(|&i| changes.position.value(i) as u64).collect();
        let ops: Vec<Op> = rows
            .iter()
            .map(|&i| if changes.delete.value(i) { Op::Delete } else { Op::Insert })
            .collect();
        let trace = tracing::enabled!(tracing::Level::TRACE);
        let mut keep = vec![false; rows.len()];
        let mut held: HashMap<usize, Vec<usize>> = HashMap::new();
        for (row, key) in keys.iter().enumerate() {
            let Some(index) = self.split_of(key) else { continue };
            if self.splits[index].ahead(key) {
                if self.splits[index].reading {
                    held.entry(index).or_default().push(row);
                }
                keep[row] = self.apply_ahead(index, key, ops[row], all_sent[row], &data, row)?;
            } else {
                // A snapshot read again over the table reads every page after
                // `truncates_from`: a row it has read holds every change from before, which
                // replayed now (after a restart, once its pages are forgotten) would take back
                // values that only the snapshot has (a column added since).
                let read_since =
                    self.config.overwrite && positions[row] < self.config.truncates_from;
                keep[row] = !read_since && self.splits[index].applies(key, positions[row]);
            }
            if trace {
                let split = &self.splits[index];
                let pk = ScalarValue::try_from_array(data.column(self.config.table.pk[0]), row)?;
                let cursor = split.cursor.as_ref().map(|c| c.0.clone());
                tracing::trace!(split = index, %pk, position = positions[row], op = ?ops[row], ?cursor, reading = split.reading, finished = split.finished, keep = keep[row], "change");
            }
        }
        for (index, held_rows) in held {
            let indices = UInt32Array::from_iter_values(held_rows.iter().map(|&r| r as u32));
            let columns = data
                .columns()
                .iter()
                .map(|c| take(c, &indices, None))
                .collect::<Result<Vec<_>, _>>()?;
            self.splits[index].held.push(Held {
                ops: held_rows.iter().map(|&r| ops[r]).collect(),
                data: RecordBatch::try_new(data.schema(), columns)?,
                keys: held_rows.iter().map(|&r| keys[r].clone()).collect(),
                positions: held_rows.iter().map(|&r| positions[r]).collect(),
            });
        }
        if let Some(&max) = positions.iter().max() {
            for split in &mut self.splits {
                split.settle(max);
            }
        }
        kept(&ops, &data, keep)
    }

    /// Reads from the upstream the columns that the replacing updates among `rows` did not
    /// send. Later changes of the row follow in commit order, so values newer than the change's
    /// are overwritten or were current anyway. A row gone upstream keeps NULLs: its delete
    /// follows.
    pub(super) async fn fetch_unchanged(
        &mut self,
        changes: &Changes<'_>,
        rows: &[usize],
        layouts: &Layouts,
    ) -> Result<Fetched> {
        let mut at = HashMap::new();
        let mut values = StringBuilder::new();
        let width = self.config.upstream.columns.len() as u32;
        for &row in rows {
            if !changes.replaces.value(row) {
                continue;
            }
            // Columns added after the change are read from the upstream too (see
            // `unchanged_columns`).
            let position = changes.position.value(row) as u64;
            let added = self.added_after(position).map_or(width, |n| n as u32);
            let unsent = changes.unchanged(row);
            if unsent.is_empty() && added == width {
                continue;
            }
            let unsent = unsent.iter().filter_map(|&t| layouts.column_at(changes, row, t as usize));
            let unchanged: Vec<u32> = unsent.map(|u| u as u32).chain(added..width).collect();
            let pk = &self.config.upstream.pk;
            let key: Vec<Option<String>> = pk
                .iter()
                .map(|&u| {
                    let Some(t) = layouts.place(changes, row, u) else { return Ok(None) };
                    Ok(changes.text(row, t)?.map(str::to_owned))
                })
                .collect::<Result<_>>()?;
            let upstream = self.config.upstream.clone();
            let Some(current) = self.session().await?.fetch_row(&upstream, &key).await? else {
                continue;
            };
            for u in unchanged {
                if let Some(value) = current.get(u as usize) {
                    at.insert((row, u as usize), values.len());
                    values.append_option(value.as_deref());
                }
            }
        }
        Ok(Fetched { at, values: values.finish() })
    }

    /// The first upstream column a change committed at `position` has no value for (the
    /// columns from it on were added and followed later), if any.
    pub(super) fn added_after(&self, position: u64) -> Option<usize> {
        let later = self.config.columns_since.iter().filter(|&&(at, _)| position < at);
        later.map(|&(_, n)| n).min()
    }

    /// The `_unchanged` column of the changes `rows`: the table columns whose upstream columns
    /// an update did not send, or NULL. A replacing update has none: they were read from the
    /// upstream (see [`Self::fetch_unchanged`]). A change read again from before columns were
    /// added has no value for them either: the stored row keeps its own (which the snapshot
    /// read since the addition wrote), rather than take NULL.
    pub(super) fn unchanged_columns(
        &self,
        changes: &Changes<'_>,
        rows: &[usize],
        layouts: &Layouts,
    ) -> ListArray {
        let mut lists = ListBuilder::with_capacity(UInt32Builder::new(), rows.len());
        for &row in rows {
            let upstream: Vec<u32> = changes
                .unchanged(row)
                .iter()
                .filter_map(|&t| layouts.column_at(changes, row, t as usize))
                .map(|u| u as u32)
                .collect();
            let position = changes.position.value(row) as u64;
            let added = self.added_after(position).unwrap_or(usize::MAX);
            let columns: Vec<Option<u32>> = match changes.replaces.value(row) {
                true => Vec::new(),
                false => self
                    .config
                    .upstream_columns
                    .iter()
                    .enumerate()
                    .filter(|&(_, &u)| upstream.contains(&(u as u32)) || u >= added)
                    .map(|(c, _)| Some(c as u32))
                    .collect(),
            };
            match columns.is_empty() {
                true => lists.append_null(),
                false => lists.append_value(columns),
            }
        }
        lists.finish()
    }
}

/// Where the values of upstream columns are among a change's values: at their own index,
/// unless columns were dropped upstream and followed, when each change is laid out as the
/// upstream described the table at its position ([`UpstreamGuard::layout_at`]).
pub(super) struct Layouts(pub(super) Option<HashMap<u64, Vec<Option<usize>>>>);

impl Layouts {
    /// The layouts of the changes `rows`.
    /// The layouts of the changes `rows`: as `described` (the last description of the table
    /// the stream sent, if any), else as the upstream described the table at each one's
    /// position.
    pub(super) fn of(
        guard: &UpstreamGuard,
        described: Option<&Vec<Option<usize>>>,
        changes: &Changes<'_>,
        rows: &[usize],
    ) -> Self {
        if !guard.has_drops() {
            return Self(None);
        }
        let mut layouts = HashMap::new();
        for &row in rows {
            let position = changes.position.value(row) as u64;
            layouts.entry(position).or_insert_with(|| match described {
                Some(layout) => layout.clone(),
                None => guard.layout_at(position),
            });
        }
        Self(Some(layouts))
    }

    /// The place of upstream column `u` among change `row`'s values; `None` where it has none.
    pub(super) fn place(&self, changes: &Changes<'_>, row: usize, u: usize) -> Option<usize> {
        match &self.0 {
            None => Some(u),
            Some(layouts) => {
                let layout = &layouts[&(changes.position.value(row) as u64)];
                layout.get(u).copied().flatten()
            }
        }
    }

    /// The upstream column at place `t` among change `row`'s values, if the table knows it.
    pub(super) fn column_at(&self, changes: &Changes<'_>, row: usize, t: usize) -> Option<usize> {
        match &self.0 {
            None => Some(t),
            Some(layouts) => {
                let layout = &layouts[&(changes.position.value(row) as u64)];
                layout.iter().position(|&p| p == Some(t))
            }
        }
    }
}

/// Upstream values read for changes that did not send them (see
/// [`CdcBackfill::fetch_unchanged`]).
pub(super) struct Fetched {
    /// Where the value of (change row, upstream column) is in `values`.
    pub(super) at: HashMap<(usize, usize), usize>,
    pub(super) values: StringArray,
}

impl Fetched {
    /// The text of upstream column `column` of each change in `rows`: the value read from the
    /// upstream where there is one, else the change's own. Upstream columns from `added` on
    /// were added later (see [`CdcTableInfo::columns_since`](crate::catalog::CdcTableInfo::columns_since)):
    /// a change from before has no value for them, and reads NULL; so does a change from after
    /// the column was dropped upstream (see [`Layouts`]).
    pub(super) fn gather(
        &self,
        changes: &Changes<'_>,
        rows: &[usize],
        column: usize,
        added: usize,
        layouts: &Layouts,
    ) -> Result<ArrayRef> {
        let index = |row: usize| {
            let Some(place) = layouts.place(changes, row, column) else { return Ok(None) };
            match changes.value_index(row, place) {
                Ok(at) => Ok(Some(at)),
                Err(_) if column >= added => Ok(None),
                Err(e) => Err(e),
            }
        };
        if self.at.is_empty() {
            let indices: Vec<Option<u32>> = rows
                .iter()
                .map(|&row| Ok(index(row)?.map(|at| at as u32)))
                .collect::<Result<_>>()?;
            return Ok(take(changes.texts(), &UInt32Array::from(indices), None)?);
        }
        let missing = StringArray::new_null(1);
        let picks: Vec<(usize, usize)> = rows
            .iter()
            .map(|&row| match self.at.get(&(row, column)) {
                Some(&at) => Ok((1, at)),
                None => Ok(index(row)?.map_or((2, 0), |at| (0, at))),
            })
            .collect::<Result<_>>()?;
        let sources = [changes.texts() as &dyn Array, &self.values, &missing];
        Ok(interleave(&sources, &picks)?)
    }
}

/// The columns of `table` from the text of their upstream columns (`text(u)`: upstream column
/// `u`; `upstream_columns[c]`: the upstream column of table column `c`), cast to their types.
pub(super) fn typed_batch(
    table: &TableCatalog,
    upstream_columns: &[usize],
    mut text: impl FnMut(usize) -> Result<ArrayRef>,
) -> Result<RecordBatch> {
    let schema: SchemaRef = table.full_schema();
    let inputs = upstream_columns.iter().map(|&u| text(u)).collect::<Result<Vec<_>>>()?;
    let columns = inputs
        .iter()
        .zip(&table.columns)
        .map(|(input, column)| match column.scale_of {
            Some(_) => Ok(display_scales(input)),
            None => cast_to(input, column.data_type, CastMode::Upstream),
        })
        .collect::<Result<Vec<_>>>()?;
    if let Some((row, c)) = lost_value(table, &inputs, &columns) {
        let key: Vec<String> = table
            .pk
            .iter()
            .map(|&k| {
                arrow::util::display::array_value_to_string(&inputs[k], row)
                    .unwrap_or_else(|_| "?".to_owned())
            })
            .collect();
        let value = inputs[c].as_string::<i32>().value(row);
        let column = &table.columns[c];
        let cdc = table.cdc.as_ref();
        let pinned = cdc.filter(|cdc| cdc.pinned.contains(&upstream_columns[c]));
        let holds = match (column.data_type, pinned) {
            (_, Some(cdc)) => format!(
                "the column was widened upstream (to {}) and is kept in its type for the views \
                 that read it: drop those views, then ALTER TABLE {} RESNAPSHOT widens it",
                cdc.upstream_types[upstream_columns[c]], table.name
            ),
            (crate::types::DataType::Array(_), None) => "Sluice's arrays have one dimension and \
                 elements of their type; declare the column varchar for its text and create the \
                 table again"
                .to_owned(),
            _ => "declare the column with a type that holds it (numeric(p, s) up to 38 digits, \
                  or varchar for its text) and create the table again"
                .to_owned(),
        };
        return Err(Error::OutOfRange(format!(
            "the upstream value {value} of column {} (key {}) cannot be held exactly by {}; \
             {holds}",
            column.name,
            key.join(", "),
            column.data_type
        )));
    }
    Ok(RecordBatch::try_new(nullable(&schema), columns)?)
}

/// The display scale of each upstream numeric of `input` (text as the upstream prints it; a
/// typed numeric has its own digits), for a table's hidden display scale column.
fn display_scales(input: &ArrayRef) -> ArrayRef {
    use crate::batch::display_scale::scale_of_text;
    let scales: arrow::array::Int16Array = match input.as_string_opt::<i32>() {
        Some(text) => text.iter().map(|t| t.map(scale_of_text)).collect(),
        None if matches!(
            input.data_type(),
            arrow::datatypes::DataType::Decimal128(..) | arrow::datatypes::DataType::Decimal256(..)
        ) =>
        {
            let texts = crate::types::numeric::texts(input.as_ref());
            texts.iter().map(|t| t.map(scale_of_text)).collect()
        }
        // Not a number: the value prints with its own digits.
        None => arrow::array::Int16Array::new_null(input.len()),
    };
    Arc::new(scales)
}

/// The first value (row, column) of `inputs` (upstream text) that its cast in `columns` did not
/// keep: it became NULL, or a numeric lost fraction digits to the column's scale.
pub(super) fn lost_value(
    table: &TableCatalog,
    inputs: &[ArrayRef],
    columns: &[ArrayRef],
) -> Option<(usize, usize)> {
    for (c, (input, cast)) in inputs.iter().zip(columns).enumerate() {
        let Some(text) = input.as_string_opt::<i32>() else { continue };
        let scale = match table.columns[c].data_type {
            crate::types::DataType::Decimal { scale, .. } => Some(scale.max(0) as usize),
            _ => None,
        };
        for row in 0..text.len() {
            if text.is_null(row) {
                continue;
            }
            if cast.is_null(row) {
                return Some((row, c));
            }
            if let Some(scale) = scale
                && fraction_digits(text.value(row)) > scale
            {
                return Some((row, c));
            }
        }
    }
    None
}

/// The digits after the point of a number as text, trailing zeros aside.
pub(super) fn fraction_digits(number: &str) -> usize {
    let mantissa = number.split(['e', 'E']).next().unwrap_or(number);
    match mantissa.split_once('.') {
        Some((_, fraction)) => fraction.trim_end_matches('0').len(),
        None => 0,
    }
}

/// An `_unchanged` column of `m` rows that sent every column: the materialize upserts them.
pub(super) fn all_sent_list(m: usize) -> ListArray {
    let nulls = arrow::array::new_null_array(unchanged_field().data_type(), m);
    nulls.as_list::<i32>().clone()
}

/// Appends the `_unchanged` column the upsert materialize reads (see [`unchanged_field`]).
pub(super) fn with_unchanged(data: RecordBatch, unchanged: ListArray) -> Result<RecordBatch> {
    let mut fields: Vec<_> = data.schema().fields().iter().cloned().collect();
    fields.push(Arc::new(unchanged_field()));
    let mut columns = data.columns().to_vec();
    columns.push(Arc::new(unchanged));
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}
