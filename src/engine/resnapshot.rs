//! A CDC table reading its upstream table again over the rows it holds (`ALTER TABLE t
//! RESNAPSHOT`, and columns added upstream to a table declared `(*)`), and following columns
//! dropped upstream.
//!
//! Each changes the table's catalog entry while no job runs (in a recovery, which rebuilds
//! every job from the committed state): the table gets a fresh backfill state table, so its
//! backfill starts its snapshot over, in the mode that overwrites stored rows (each page's
//! rows are upserts and the stored rows of its range it lacks are deleted; the materialize
//! passes on only what differs). Queries and views see the old rows until the snapshot
//! reaches them. The old state table goes once the new one is in the catalog; a crash in
//! between leaves an internal table its owner does not list, which the next start drops.

use datafusion::sql::sqlparser::ast;
use tokio::sync::oneshot;

use crate::catalog::{ColumnCatalog, StatePurpose, TableCatalog, TableId};
use crate::connector::source::SourceConfig;
use crate::engine::ddl::relation_name;
use crate::engine::{CommandTag, Engine, Output};
use crate::error::{Error, Result};
use crate::storage::row_codec::{InPlace, in_place as in_place_storage};
use crate::stream::executor::backfill::upstream_guard::{Retype, UpstreamGuard};
use crate::stream::graph::cdc::{ColumnChange, Resnapshot, upstream_table};
use crate::stream::plan::{NodeKind, StreamNode};
use crate::types::DataType;

impl Engine {
    /// `ALTER TABLE name RESNAPSHOT`: returns once the table's job runs again, reading its
    /// snapshot (`rw_cdc_progress` follows it).
    pub(crate) async fn resnapshot(&self, name: &ast::ObjectName) -> Result<Output> {
        let name = relation_name(name)?;
        let (table, cdc) = self.cdc_table(&name, "reads a snapshot of its upstream")?;
        if !cdc.snapshot {
            return Err(Error::Unsupported(format!(
                "RESNAPSHOT of \"{name}\", created with snapshot = 'false': it reads no snapshot \
                 of its upstream; create it again without the option to read one"
            )));
        }
        // The upstream table must still have the columns the table reads; one dropped and
        // created again with them is read from now on.
        let source = self.catalog.sources().into_iter().find(|s| s.id == cdc.source);
        let source = source
            .ok_or_else(|| Error::Storage(format!("the source of {} is missing", table.name)))?;
        let config = SourceConfig::from_options(&source.name, &source.options)?;
        let mut session = config.session().await?;
        let upstream = session.describe_table(&cdc.schema, &cdc.table).await?;
        let now: Vec<(&str, &str)> = upstream
            .columns
            .iter()
            .zip(&upstream.upstream_types)
            .map(|(c, t)| (c.name.as_str(), t.as_str()))
            .collect();
        let read = cdc.live_columns();
        let live: Vec<usize> =
            (0..cdc.upstream_names.len()).filter(|&u| !cdc.is_dropped(u)).collect();
        // A column retyped upstream in a way the table follows is the same column (text to
        // text, a number widened); so is one widened that the table kept narrower for views.
        let guard = UpstreamGuard::new(&upstream_table(&cdc, &table), None);
        let held = |u: usize| {
            let c = cdc.upstream_columns.iter().position(|&x| x == u);
            c.map(|c| table.columns[c].data_type)
        };
        let mut retyped = Vec::new();
        let mut same = now.len() >= read.len();
        for (i, &u) in live.iter().enumerate().take(now.len()) {
            let ((name, ty), holds) = (now[i], upstream.columns[i].data_type);
            let pinned = cdc.pinned.contains(&u) && held(u) != Some(holds);
            if name != read[i].0 {
                same = false;
            } else if ty != read[i].1 || pinned {
                same &= guard.retypes_in_place(u, ty, holds);
                retyped.push((u, ty.to_owned(), holds));
            }
        }
        if !same {
            let list = |c: &[(&str, &str)]| {
                c.iter().map(|(n, t)| format!("{n} {t}")).collect::<Vec<_>>().join(", ")
            };
            return Err(Error::ObjectState(format!(
                "the upstream table {}.{} no longer has the columns \"{name}\" reads (it has {}; \
                 the table reads {}): ALTER TABLE {name} REFRESH SCHEMA builds it again from the \
                 upstream table as it is now",
                cdc.schema,
                cdc.table,
                list(&now),
                list(&read)
            )));
        }
        let identity = session.table_identity(&cdc.schema, &cdc.table).await?;
        let from = config.current_position().await?;
        // Record the types the live columns have now, and widen those no view reads.
        let retype = self.retype_columns(&table, retyped, from).await;
        self.catalog.update_table(table.id, retype)?;
        // A table created again upstream is not in the publication yet.
        config.add_table(&session, source.created.publication, &upstream).await?;
        // What the jobs did so far is committed; the rebuild discards nothing of it.
        self.barrier.flush().await?;
        let (done, rebuilt) = oneshot::channel();
        let table = table.id;
        self.graph.cdc_rebuilds.push_resnapshot(Resnapshot { table, identity, from, done });
        self.barrier.rebuild(format!("ALTER TABLE {name} RESNAPSHOT"))?;
        rebuilt.await.map_err(|_| Error::Shutdown)?;
        Ok(Output::Command(CommandTag::new("ALTER TABLE")))
    }

    /// The CDC table called `name` and where its rows come from; an error naming `what` only
    /// a CDC table does when it is another relation.
    pub(crate) fn cdc_table(
        &self,
        name: &str,
        what: &str,
    ) -> Result<(std::sync::Arc<TableCatalog>, crate::catalog::CdcTableInfo)> {
        let table = self
            .catalog
            .table_by_name(name)
            .ok_or_else(|| Error::UnknownRelation { kind: "table", name: name.to_owned() })?;
        let Some(cdc) = table.cdc.clone() else {
            return Err(Error::WrongObjectType(format!(
                "\"{name}\" is not a CDC table: only a table created FROM a source {what}"
            )));
        };
        Ok((table, cdc))
    }

    /// Applies what CDC tables asked of this recovery (every actor stopped, the DDL lock held):
    /// columns found added upstream, then snapshots to read again. A change that cannot be
    /// made now (the upstream does not answer) is logged; the table's backfill asks again.
    pub(crate) async fn apply_cdc_rebuilds(&self) {
        for change in self.graph.cdc_rebuilds.take_changes() {
            if let Err(e) = self.drop_upstream_columns(&change).await {
                tracing::warn!(table = %change.table, error = %e, "cannot follow the columns dropped upstream yet; the table's backfill finds them again");
                continue;
            }
            if let Err(e) = self.add_upstream_columns(&change).await {
                tracing::warn!(table = %change.table, error = %e, "cannot add the columns found upstream yet; the table's backfill finds them again");
            }
        }
        for source in self.graph.cdc_rebuilds.take_source_resnapshots() {
            let tables = self.catalog.tables();
            for table in
                tables.iter().filter(|t| t.cdc.as_ref().is_some_and(|c| c.source == source))
            {
                tracing::info!(table = %table.name, "its source lost its position upstream; reading the snapshot again");
                // The new slot starts after every change it sends: nothing to ignore.
                if let Err(e) = self.read_snapshot_again(table.id, 0, |_| {}) {
                    tracing::warn!(table = %table.name, error = %e, "cannot read the snapshot again");
                }
            }
        }
        for Resnapshot { table, identity, from, done } in self.graph.cdc_rebuilds.take_resnapshots()
        {
            let rebind = |t: &mut TableCatalog| {
                let cdc = t.cdc.as_mut().expect("a CDC table");
                cdc.upstream_identity = identity.or(cdc.upstream_identity.take());
            };
            if let Err(e) = self.read_snapshot_again(table, from, rebind) {
                tracing::warn!(%table, error = %e, "cannot read the snapshot again");
            }
            self.graph.cdc_rebuilds.push_waiting(done);
        }
    }

    /// Follows the columns `change` found dropped upstream: from its position on, changes
    /// hold NULL for them and snapshot reads select NULL. A table column no view reads goes
    /// out of sight (`SELECT *`, `\d`; its storage stays); one that a view reads stays, with
    /// the values it had and NULL in rows changed since, and `rw_cdc_progress.schema_note`
    /// says so.
    async fn drop_upstream_columns(&self, change: &ColumnChange) -> Result<()> {
        let Some(table) = self.catalog.table_by_id(change.table) else { return Ok(()) };
        let Some(cdc) = table.cdc.clone() else { return Ok(()) };
        if !change.retyped.is_empty() {
            self.follow_retyped_columns(&table, change).await?;
        }
        let dropped: Vec<usize> =
            change.dropped.iter().copied().filter(|&u| !cdc.is_dropped(u)).collect();
        let position = change.position;
        // Followed at a later position (the upstream's, when an identity check found it gone
        // before the stream described it): the description's own position holds.
        let earlier = |&(at, u): &(u64, usize)| change.dropped.contains(&u) && at > position;
        if cdc.dropped.iter().any(earlier) {
            self.catalog.update_table(table.id, |t| {
                let cdc = t.cdc.as_mut().expect("a CDC table");
                for (at, u) in &mut cdc.dropped {
                    if change.dropped.contains(u) {
                        *at = (*at).min(position);
                    }
                }
            })?;
        }
        if dropped.is_empty() {
            return Ok(());
        }
        let read = self.columns_views_read(&table).await;
        let mut kept = Vec::new();
        let mut hidden = Vec::new();
        for (c, &u) in cdc.upstream_columns.iter().enumerate() {
            let column = &table.columns[c];
            if !dropped.contains(&u) || column.hidden {
                continue;
            }
            match read.contains(&c) {
                true => kept.push(column.name.clone()),
                false => hidden.push(c),
            }
        }
        let names: Vec<&str> = dropped.iter().map(|&u| cdc.upstream_names[u].as_str()).collect();
        tracing::info!(table = %table.name, columns = %names.join(", "), kept = %kept.join(", "), "following the columns dropped upstream");
        self.catalog.update_table(table.id, |t| {
            let cdc = t.cdc.as_mut().expect("a CDC table");
            cdc.dropped.extend(dropped.iter().map(|&u| (position, u)));
            for &c in &hidden {
                t.columns[c].hidden = true;
            }
        })?;
        Ok(())
    }

    /// Follows the columns `change` found retyped upstream in a way Sluice takes in place
    /// (text to text, a number widened; see [`Engine::retype_columns`]) and reads the
    /// snapshot again (the upstream may have rewritten the values: `USING ..`).
    async fn follow_retyped_columns(
        &self,
        table: &TableCatalog,
        change: &ColumnChange,
    ) -> Result<()> {
        let retype = self.retype_columns(table, change.retyped.clone(), change.position).await;
        self.read_snapshot_again(table.id, change.position, retype)
    }

    /// What retyping `table`'s upstream columns `retyped` at `position` changes of its
    /// catalog entry: the recorded upstream types; a column widened (or a decimal's precision
    /// up) that no view reads takes the new type (rows written before keep their layout,
    /// [`TableCatalog::widened`]), one that a view reads keeps its type
    /// ([`CdcTableInfo::pinned`](crate::catalog::CdcTableInfo::pinned)); descriptions up to
    /// `position` may still name the old types.
    async fn retype_columns(
        &self,
        table: &TableCatalog,
        retyped: Vec<Retype>,
        position: u64,
    ) -> impl FnOnce(&mut TableCatalog) + use<> {
        let cdc = table.cdc.as_ref().expect("a CDC table");
        let read =
            if retyped.is_empty() { Vec::new() } else { self.columns_views_read(table).await };
        let mut widen = Vec::new();
        let mut pinned = Vec::new();
        for &(u, _, holds) in &retyped {
            let Some(c) = cdc.upstream_columns.iter().position(|&x| x == u) else { continue };
            let was = table.columns[c].data_type;
            match in_place_storage(was, holds) {
                Some(InPlace::Same) if was == holds => {}
                Some(kind) if !read.contains(&c) => {
                    widen.push((c, u, holds, (kind == InPlace::Widened).then_some(was)));
                }
                Some(_) => pinned.push(u),
                // Held as text whatever the upstream's type.
                None => {}
            }
        }
        if !retyped.is_empty() {
            tracing::info!(table = %table.name, ?retyped, widened = ?widen, kept_for_views = ?pinned, "following columns retyped upstream");
        }
        move |t: &mut TableCatalog| {
            for &(c, _, holds, before) in &widen {
                t.columns[c].data_type = holds;
                t.widened.extend(before.map(|b| (c, b)));
            }
            let cdc = t.cdc.as_mut().expect("a CDC table");
            for (u, ty, _) in retyped {
                if let Some(recorded) = cdc.upstream_types.get_mut(u) {
                    *recorded = ty;
                }
                cdc.retyped.retain(|&(_, r)| r != u);
                cdc.retyped.push((position, u));
            }
            cdc.pinned.retain(|u| !widen.iter().any(|w| w.1 == *u));
            for u in pinned {
                if !cdc.pinned.contains(&u) {
                    cdc.pinned.push(u);
                }
            }
        }
    }

    /// The columns of `table` that views created over it read (all of them when a view
    /// cannot be planned again).
    async fn columns_views_read(&self, table: &TableCatalog) -> Vec<usize> {
        fn scans(node: &StreamNode, table: TableId, read: &mut Vec<usize>) {
            if let NodeKind::Scan { table: scanned, output_indices, .. } = &node.kind
                && scanned.id == table
            {
                read.extend(output_indices);
            }
            node.inputs.iter().for_each(|input| scans(input, table, read));
        }
        let mut read = Vec::new();
        for view in self.catalog.dependents(table.id) {
            match self.replan_view(&view).await {
                Ok(plan) => scans(&plan.root, table.id, &mut read),
                Err(e) => {
                    tracing::warn!(view = %view.name, error = %e, "cannot plan the view again to see which columns it reads: it keeps them all");
                    return (0..table.columns.len()).collect();
                }
            }
        }
        read
    }

    /// Adds the columns `change` found added after the ones its table reads, typed as the
    /// upstream describes them now, and reads the table's snapshot again (rows before hold the
    /// upstream's values for them: a default, or what a rewrite computed).
    async fn add_upstream_columns(&self, change: &ColumnChange) -> Result<()> {
        let Some(table) = self.catalog.table_by_id(change.table) else { return Ok(()) };
        let Some(cdc) = table.cdc.clone() else { return Ok(()) };
        let first = cdc.upstream_names.len();
        let added: Vec<&String> =
            change.added.iter().filter(|n| !cdc.upstream_names.contains(n)).collect();
        if added.is_empty() {
            return Ok(());
        }
        let source = self.catalog.sources().into_iter().find(|s| s.id == cdc.source);
        let source = source
            .ok_or_else(|| Error::Storage(format!("the source of {} is missing", table.name)))?;
        let config = SourceConfig::from_options(&source.name, &source.options)?;
        let upstream = config.session().await?.describe_table(&cdc.schema, &cdc.table).await?;
        let version = table.schema_version() + 1;
        let mut columns = table.columns.clone();
        let mut upstream_columns = cdc.upstream_columns.clone();
        let mut names = cdc.upstream_names.clone();
        let mut types = cdc.upstream_types.clone();
        let from = columns.len();
        for name in added {
            let now = upstream.columns.iter().position(|c| &c.name == name);
            let column = match now {
                Some(i) => {
                    types.push(upstream.upstream_types[i].clone());
                    ColumnCatalog { since: version, ..upstream.columns[i].clone() }
                }
                // Gone or changed again upstream since it was described: held as text, which
                // every value arrives as; the description that says it changed stops the table.
                None => {
                    types.push("text".to_owned());
                    ColumnCatalog { since: version, ..ColumnCatalog::new(name, DataType::Varchar) }
                }
            };
            columns.push(column);
            upstream_columns.push(names.len());
            names.push(name.clone());
        }
        let (columns, upstream_columns) =
            super::cdc::with_scale_columns(columns, upstream_columns, from);
        let position = change.position;
        tracing::info!(table = %table.name, columns = %names[first..].join(", "), "added the columns found upstream; reading the snapshot again");
        // Changes read again from before the description have no value for the columns; every
        // page reads after it.
        self.read_snapshot_again(table.id, position, move |t| {
            let cdc = t.cdc.as_mut().expect("a CDC table");
            cdc.upstream_names = names;
            cdc.upstream_types = types;
            cdc.upstream_columns = upstream_columns;
            cdc.columns_since.push((position, first));
            t.columns = columns;
        })
    }

    /// Gives CDC table `id` a fresh backfill state table, so its snapshot is read again over
    /// its rows (every page after upstream position `from`), and makes `change` to its entry in
    /// the same catalog write.
    fn read_snapshot_again(
        &self,
        id: TableId,
        from: u64,
        change: impl FnOnce(&mut TableCatalog),
    ) -> Result<()> {
        let Some(table) = self.catalog.table_by_id(id) else { return Ok(()) };
        let old = self.catalog.table_by_id(table.internal_tables[0]).ok_or_else(|| {
            Error::Storage(format!("the state table of {} is missing", table.name))
        })?;
        let state_id = self.catalog.next_table_id()?;
        let purpose = StatePurpose::StreamCdcScan;
        let columns = old.columns.clone();
        let state = TableCatalog::internal(state_id, id, 1, purpose, columns, old.pk.clone(), 1);
        self.catalog.create_table(state)?;
        self.catalog.update_table(id, |t| {
            t.internal_tables[0] = state_id;
            t.cdc.as_mut().expect("a CDC table").resnapshot_from = Some(from);
            change(t);
        })?;
        self.catalog.drop_table(old.id)?;
        self.store.drop_table_data(old.id)?;
        Ok(())
    }
}
