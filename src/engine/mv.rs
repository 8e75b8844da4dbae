//! `CREATE MATERIALIZED VIEW`, `EXPLAIN CREATE MATERIALIZED VIEW`.
//!
//! Creating a view plans its query (DataFusion, then the stream planner), writes the catalog
//! entries of the view and of its internal state tables, starts its job, attaches the job to
//! its upstreams at the next checkpoint, and returns once every backfill has finished and that
//! is committed. If any step fails, the catalog entries and stored state are removed again.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::execution::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::sqlparser::ast;

use crate::catalog::{
    BackfillOrder, ColumnCatalog, CreatingInfo, RelationKind, TableCatalog, TableId,
};
use crate::engine::ddl::{name_is_free, relation_name};
use crate::engine::session::parse_rate_limit;
use crate::engine::session::text_rows;
use crate::engine::stats;
use crate::engine::{CommandTag, Engine, Output, Session};
use crate::error::{Error, Result};
use crate::sql::eager::{MIN_SAMPLED_ROWS, eager_aggregation};
use crate::sql::parser::{Statement, parse};
use crate::sql::planner::{check_deterministic, mark_now, plan_stream};
use crate::stream::graph::creating::{CreatingJob, now_ms};
use crate::stream::graph::order;
use crate::stream::plan::{NodeKind, StreamNode, StreamPlan};
use crate::types::DataType;
use crate::{invalid, unsupported};

impl Engine {
    /// Plans a view's query text into a stream plan, with eager aggregation if `eager`.
    pub(crate) async fn plan_view(&self, query: &str, eager: bool) -> Result<StreamPlan> {
        self.plan_view_inner(query, eager).await
    }

    /// Plans an existing view's query again (a restart, a recovery, a rescale), over the
    /// relations as it was created over them: columns added to a CDC table since are not its
    /// (see [`TableCatalog::seen_versions`]).
    pub(crate) async fn replan_view(&self, view: &TableCatalog) -> Result<StreamPlan> {
        let planning = self.plan_view_inner(&view.definition, view.eager_aggregation);
        crate::catalog::with_seen_versions(view.seen_versions.clone(), planning).await
    }

    async fn plan_view_inner(&self, query: &str, eager: bool) -> Result<StreamPlan> {
        let (mut state, plan) = self.logical_view_plan(query).await?;
        // An uncorrelated scalar subquery becomes a join with its one row, which streams, not
        // a value computed once before the query runs.
        state.config_mut().options_mut().optimizer.enable_physical_uncorrelated_scalar_subquery =
            false;
        let mut plan = state.optimize(&plan)?;
        if eager {
            let rows_per_group = |table: &TableCatalog, columns: &[usize]| {
                stats::rows_per_group(&self.store, table, columns, MIN_SAMPLED_ROWS)
            };
            plan = eager_aggregation(plan, &self.catalog, &rows_per_group)?;
        }
        // Unconstrained numerics read as they are from a CDC table keep their display scales.
        let (plan, display_scales) = crate::batch::display_scale::trace(&plan)?;
        let mut plan = plan_stream(&state, &self.catalog, &plan)?;
        plan.eager_aggregation = eager;
        plan.display_scales = display_scales;
        Ok(plan)
    }

    /// The view query's logical plan, before optimization.
    async fn logical_view_plan(&self, query: &str) -> Result<(SessionState, LogicalPlan)> {
        let Some(Statement::Sql(stmt)) = parse(query)?.pop() else {
            return Err(invalid!("a materialized view needs a query"));
        };
        let ast::Statement::Query(_) = stmt.as_ref() else {
            return Err(invalid!("a materialized view is defined by a SELECT query"));
        };
        let state = self.query_state();
        let plan = mark_now(self.plan(&state, *stmt).await?)?;
        check_deterministic(&plan)?;
        Ok((state, plan))
    }

    /// Every relation the query names, also those the optimizer removes from its plan (a
    /// branch `WHERE NULL` reads nothing): the view depends on all of them, so none can be
    /// dropped while it exists (its query would no longer plan, nor the server start).
    async fn referenced_relations(&self, query: &str) -> Result<Vec<TableId>> {
        use datafusion::common::tree_node::TreeNodeRecursion;

        let (_, plan) = self.logical_view_plan(query).await?;
        let mut ids = Vec::new();
        plan.apply_with_subqueries(|node| {
            if let LogicalPlan::TableScan(scan) = node
                && let Some(table) = self.catalog.table_by_name(scan.table_name.table())
                && !ids.contains(&table.id)
            {
                ids.push(table.id);
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        Ok(ids)
    }

    /// `CREATE MATERIALIZED VIEW [IF NOT EXISTS] name [WITH (..)] AS query`.
    pub(crate) async fn create_materialized_view(
        &self,
        view: ast::CreateView,
        session: &Session,
    ) -> Result<Output> {
        let tag = Output::Command(CommandTag::new("CREATE MATERIALIZED VIEW"));
        let ddl = self.ddl_lock.lock().await;
        let name = relation_name(&view.name)?;
        if !name_is_free(&self.catalog, &name, view.if_not_exists)? {
            return Ok(tag);
        }
        if !view.columns.is_empty() {
            return Err(unsupported!(
                "a column list in CREATE MATERIALIZED VIEW; alias the columns in the query"
            ));
        }
        let options = view_options(&view.options)?;
        let rate_limit = match options.rate_limit {
            Some(limit) => limit,
            None => session.backfill_rate_limit()?,
        };
        let creating =
            CreatingInfo { background: session.background_ddl()?, initialized_at_ms: now_ms() };
        let definition = view.query.to_string();
        let plan = self.plan_view(&definition, session.eager_aggregation()?).await?;
        // A FIXED order must name what the view reads, in an order that can be kept.
        order::scan_waits(&plan.root, &options.order, &|_| 0)?;
        let parallelism = session.streaming_parallelism()?;
        let settings = ViewSettings { rate_limit, order: options.order, parallelism };
        let view = self.register_view(name, definition, &plan, settings, creating).await?;
        let job = match self.start_view(&view, &plan).await {
            Ok(job) => job,
            Err(e) => {
                tracing::warn!(view = %view.name, error = %e, "creating the view failed; removing it");
                self.forget_view(&view).await;
                return Err(e);
            }
        };
        // Other DDL (CANCEL JOBS, DROP) may run while the backfill does.
        drop(ddl);
        if creating.background {
            return Ok(tag);
        }
        match self.wait_created(&job, session).await {
            Ok(()) => Ok(tag),
            Err(e @ Error::Canceled(_)) => Err(e),
            Err(e) => {
                tracing::warn!(view = %view.name, error = %e, "creating the view failed; removing it");
                let _ddl = self.ddl_lock.lock().await;
                if self.catalog.table_by_id(view.id).is_some() {
                    self.forget_view(&view).await;
                }
                Err(e)
            }
        }
    }

    /// Writes the catalog entries of a new view and its internal tables.
    async fn register_view(
        &self,
        name: String,
        definition: String,
        plan: &StreamPlan,
        settings: ViewSettings,
        creating: CreatingInfo,
    ) -> Result<Arc<TableCatalog>> {
        let mut references = self.referenced_relations(&definition).await?;
        for id in scanned_relations(&plan.root) {
            if !references.contains(&id) {
                references.push(id);
            }
        }
        let columns = view_columns(plan)?;
        let seen_versions = references
            .iter()
            .filter_map(|&id| self.catalog.table_by_id(id))
            .map(|t| (t.id, t.schema_version()))
            .filter(|&(_, version)| version > 0)
            .collect();
        // The internal tables take ids below the view's: the view's rows, which a backfill
        // writes in vnode order straight to the bottom level, then lie above every table
        // written before or beside them, so no memtable flush of other tables' rows (the
        // backfill's own progress included) spans them (see `Store::commit`).
        let internal_ids = (0..plan.slots.len())
            .map(|_| self.catalog.next_table_id())
            .collect::<Result<Vec<_>>>()?;
        let id = self.catalog.next_table_id()?;
        let mut internal_tables = Vec::with_capacity(plan.slots.len());
        for (slot, internal_id) in plan.slots.iter().zip(internal_ids) {
            let table = TableCatalog::internal(
                internal_id,
                id,
                1,
                slot.purpose,
                slot.columns.clone(),
                slot.pk.clone(),
                slot.dist_key_len,
            );
            self.catalog.create_table(table)?;
            internal_tables.push(internal_id);
        }
        let pk = plan.root.stream_key.clone();
        let view = TableCatalog {
            id,
            name,
            kind: RelationKind::MaterializedView,
            dist_key_len: pk.len(),
            columns,
            pk,
            definition,
            dependencies: references,
            internal_tables,
            owner: None,
            backfill_rate_limit: settings.rate_limit,
            parallelism: settings.parallelism,
            cdc: None,
            creating: Some(creating),
            purpose: None,
            eager_aggregation: plan.eager_aggregation,
            backfill_order: settings.order,
            seen_versions,
            widened: Vec::new(),
        };
        self.catalog.create_table(view)
    }

    /// Starts a new view's job and follows its backfill.
    async fn start_view(&self, view: &TableCatalog, plan: &StreamPlan) -> Result<Arc<CreatingJob>> {
        let job = self.graph.prepare_view_job(view, plan, &|id| self.graph.output_actors(id))?;
        let (_, backfills) = self.graph.start_job(job).await?;
        tracing::info!(view = %view.name, id = %view.id, "started the job of a materialized view");
        self.graph.track_job(view, backfills)
    }

    /// Removes a view that could not be created: its job, catalog entries and state.
    async fn forget_view(&self, view: &TableCatalog) {
        if let Err(e) = self.graph.stop_job(view.id).await {
            tracing::warn!(error = %e, "stopping the failed view's job");
        }
        for id in view.internal_tables.iter().copied().chain([view.id]) {
            let _ = self.catalog.drop_table(id);
            let _ = self.store.drop_table_data(id);
        }
    }

    /// `EXPLAIN CREATE MATERIALIZED VIEW ..`: the stream plan, one operator per line.
    pub(crate) async fn explain_materialized_view(
        &self,
        session: &Session,
        stmt: ast::Statement,
    ) -> Result<Output> {
        let ast::Statement::CreateView(view) = stmt else { unreachable!("checked by the caller") };
        let options = view_options(&view.options)?;
        let plan = self.plan_view(&view.query.to_string(), session.eager_aggregation()?).await?;
        let mut lines: Vec<String> =
            plan.explain(&view.name.to_string()).lines().map(str::to_owned).collect();
        // The order the scans would read in, by the upstreams' rows now.
        let waits = order::stored_waits(&plan.root, &options.order, &self.store)?;
        let waiting = order::explain(&plan.root, &waits);
        if !waiting.is_empty() {
            lines.push("Backfill order:".to_owned());
            lines.extend(waiting.into_iter().map(|l| format!("  {l}")));
        }
        Ok(text_rows(&["QUERY PLAN"], lines.into_iter().map(|l| vec![l]).collect()))
    }
}

/// How a new view's job runs.
struct ViewSettings {
    rate_limit: Option<u64>,
    order: BackfillOrder,
    parallelism: usize,
}

/// The options of `CREATE MATERIALIZED VIEW .. WITH (..)`.
#[derive(Default)]
struct ViewOptions {
    /// `backfill_rate_limit`: `None` when not given, else the limit (`None` for -1, no limit).
    rate_limit: Option<Option<u64>>,
    /// `backfill_order`: `'auto'` (the default), `'none'` or `FIXED(a -> b, ..)`.
    order: BackfillOrder,
}

/// The view options in `WITH (..)`; an unknown one is an error naming it.
fn view_options(options: &ast::CreateTableOptions) -> Result<ViewOptions> {
    let list = match options {
        ast::CreateTableOptions::None => return Ok(ViewOptions::default()),
        ast::CreateTableOptions::With(list) | ast::CreateTableOptions::Options(list) => list,
        other => return Err(unsupported!("view options {other}")),
    };
    let mut parsed = ViewOptions::default();
    for option in list {
        let ast::SqlOption::KeyValue { key, value } = option else {
            return Err(unsupported!("view option {option}"));
        };
        let text = value.to_string().trim_matches('\'').to_owned();
        match key.value.to_lowercase().as_str() {
            "backfill_rate_limit" => {
                let n: i64 = text
                    .parse()
                    .map_err(|_| invalid!("backfill_rate_limit must be an integer, not {text}"))?;
                parsed.rate_limit = Some(parse_rate_limit(Some(n))?);
            }
            "backfill_order" => {
                parsed.order = match text.to_lowercase().as_str() {
                    "auto" => BackfillOrder::Auto,
                    "none" => BackfillOrder::None,
                    _ => BackfillOrder::Fixed(order::parse_fixed(&text)?),
                };
            }
            other => {
                return Err(invalid!(
                    "unknown materialized view option {other}; known: backfill_rate_limit, \
                     backfill_order"
                ));
            }
        }
    }
    Ok(parsed)
}

/// The view's columns: the query's output columns, then hidden key columns. The display scale
/// columns of its numerics ([`StreamPlan::display_scales`]) are hidden too.
fn view_columns(plan: &StreamPlan) -> Result<Vec<ColumnCatalog>> {
    let root = &plan.root;
    let scale_of: HashMap<usize, usize> =
        plan.display_scales.iter().map(|(&c, &s)| (s, c)).collect();
    let mut seen = HashSet::new();
    let mut columns = Vec::with_capacity(root.schema.fields().len());
    for (i, field) in root.schema.fields().iter().enumerate() {
        let scale_of = scale_of.get(&i).copied();
        let hidden = i >= root.visible || scale_of.is_some();
        let name = match scale_of {
            Some(c) => format!("_scale_of_{}", root.schema.field(c).name()),
            None if hidden => format!("_key_{}", i - root.visible),
            None => field.name().clone(),
        };
        if !seen.insert(name.clone()) {
            return Err(invalid!(
                "column \"{name}\" specified more than once; give the columns distinct aliases"
            ));
        }
        columns.push(ColumnCatalog {
            name,
            data_type: match crate::sql::jsonb::is_marked(field) {
                true => DataType::Jsonb,
                false => DataType::from_arrow(field.data_type())?,
            },
            hidden,
            varchar: crate::types::varchar_mark(field),
            default: None,
            scale_of,
            since: 0,
        });
    }
    Ok(columns)
}

/// The relations a plan scans, each once.
fn scanned_relations(node: &StreamNode) -> Vec<TableId> {
    let mut ids = Vec::new();
    collect_scans(node, &mut ids);
    ids.dedup();
    ids
}

fn collect_scans(node: &StreamNode, ids: &mut Vec<TableId>) {
    if let NodeKind::Scan { table, .. } = &node.kind
        && !ids.contains(&table.id)
    {
        ids.push(table.id);
    }
    for input in &node.inputs {
        collect_scans(input, ids);
    }
}
