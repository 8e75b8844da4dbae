//! Batch queries: planning with DataFusion over a snapshot of the last committed epoch.

use std::sync::Arc;

use datafusion::execution::SessionState;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::{LogicalPlan, ScalarUDF};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast;
use datafusion_pg_catalog::pg_catalog::context::EmptyContextProvider;
use datafusion_pg_catalog::setup_pg_catalog;

use crate::batch::{QuerySnapshot, SluiceCatalog};
use crate::catalog::{Catalog, DEFAULT_DATABASE, DEFAULT_SCHEMA};
use crate::engine::{Engine, Output, Session};
use crate::error::{Error, Result};
use crate::sql::checked::CheckedArithmetic;
use crate::storage::store::Store;
use crate::stream::graph::StreamGraph;

/// The shared DataFusion context: Sluice's catalog as `dev.public`, plus `pg_catalog`.
pub fn session_context(
    catalog: Arc<Catalog>,
    store: Arc<Store>,
    graph: Arc<StreamGraph>,
) -> Result<SessionContext> {
    let mut config = SessionConfig::new()
        .with_default_catalog_and_schema(DEFAULT_DATABASE, DEFAULT_SCHEMA)
        .with_create_default_catalog_and_schema(false)
        .with_information_schema(true)
        .with_target_partitions(2);
    // Literals like 12.50 are numeric in Postgres, not double precision.
    config.options_mut().sql_parser.parse_float_as_decimal = true;
    // `::text` and `::varchar` make Utf8 strings, the one string type Sluice stores and keys
    // by (a view grouping by `x::varchar` failed its actor on Utf8View keys).
    config.options_mut().sql_parser.map_string_types_to_utf8view = false;
    // `timestamptz` (and `now()`) carry a time zone, as Sluice's timestamptz columns do: without
    // one, `'..'::timestamptz` was a timestamp without time zone.
    config.options_mut().execution.time_zone = Some(crate::types::UTC.to_owned());
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_expr_planners({
            let mut planners = datafusion::execution::SessionStateDefaults::default_expr_planners();
            planners.insert(0, Arc::new(crate::sql::interval::SpanArithmetic));
            planners.insert(1, Arc::new(crate::sql::division::NumericDivision));
            planners
        })
        .with_analyzer_rule(Arc::new(crate::sql::analyzer::OpaqueDayDurations))
        .with_analyzer_rule(Arc::new(crate::sql::analyzer::PostgresCasts::default()))
        .with_physical_optimizer_rule(Arc::new(CheckedArithmetic))
        .with_physical_optimizer_rule(Arc::new(crate::sql::topk::BoundedTopK))
        .build();
    let ctx = SessionContext::new_with_state(state);
    for udaf in crate::sql::aggregates::udafs() {
        ctx.register_udaf(udaf);
    }
    for udwf in crate::sql::ranks::udwfs() {
        ctx.register_udwf(udwf);
    }
    ctx.register_udf(crate::sql::functions::version_udf());
    // The defaults; a query of a session answers with its own values (see `query`).
    let defaults = Session::default();
    ctx.register_udf(crate::sql::functions::current_setting_udf(defaults.settings()));
    ctx.register_udf(crate::sql::functions::set_config_udf(defaults.variables().setter()));
    for udf in crate::sql::jsonb::udfs() {
        ctx.register_udf(udf);
    }
    ctx.register_udf(crate::sql::array_ops::udf());
    ctx.register_udf(ScalarUDF::from(crate::sql::functions::OctetLength::default()));
    ctx.register_udf(ScalarUDF::from(crate::sql::functions::PgTypeof::default()));
    for udf in crate::sql::format::udfs() {
        ctx.register_udf(udf);
    }
    ctx.register_udf(crate::sql::json_agg::udf());
    for udf in crate::sql::math::udfs() {
        ctx.register_udf(udf);
    }
    for udf in crate::sql::interval::udfs() {
        ctx.register_udf(udf);
    }
    let sluice = Arc::new(SluiceCatalog::new(catalog.clone(), store.clone(), graph));
    let oids = sluice.relation_oids();
    ctx.register_catalog(DEFAULT_DATABASE, sluice);
    setup_pg_catalog(&ctx, DEFAULT_DATABASE, EmptyContextProvider)
        .map_err(|e| Error::DataFusion(*e))?;
    // After the pg_catalog extension's, so Sluice's size functions replace its.
    for udf in crate::batch::pg_catalog::catalog_udfs(oids, catalog, store) {
        ctx.register_udf(udf);
    }
    Ok(ctx)
}

impl Engine {
    /// A planning state whose scans all read one snapshot of the last committed epoch.
    pub(crate) fn query_state(&self) -> SessionState {
        let mut state = self.ctx.state();
        state.config_mut().set_extension(Arc::new(QuerySnapshot(self.store.snapshot())));
        state
    }

    /// Plans a statement DataFusion understands (a query or EXPLAIN), its `EXCEPT ALL` and
    /// `INTERSECT ALL` counted as Postgres counts them ([`super::set_ops`]).
    pub(crate) async fn plan(
        &self,
        state: &SessionState,
        mut stmt: ast::Statement,
    ) -> Result<LogicalPlan> {
        // Boxed: its state stays off the stack a deep statement's planning needs.
        Box::pin(super::set_ops::count_duplicates(state, &mut stmt)).await?;
        Ok(state.statement_to_plan(DfStatement::Statement(Box::new(stmt))).await?)
    }

    /// Runs a query or EXPLAIN.
    pub(crate) async fn query(&self, session: &Session, stmt: ast::Statement) -> Result<Output> {
        crate::sql::parser::check_ordered_aggregates(&stmt)?;
        let mut state = self.query_state();
        if let Some(user) = session.user() {
            // `current_user` and its kin answer the login role.
            use datafusion::execution::FunctionRegistry;
            state.register_udf(Arc::new(crate::sql::functions::session_user_udf(user)))?;
        }
        {
            use datafusion::execution::FunctionRegistry;
            let settings = session.settings();
            state.register_udf(Arc::new(crate::sql::functions::current_setting_udf(settings)))?;
            let variables = session.variables();
            state.register_udf(Arc::new(crate::sql::functions::set_config_udf(
                variables.setter(),
            )))?;
        }
        let plan = self.plan(&state, stmt).await?;
        self.run_plan(state, plan).await
    }

    /// Executes a planned query, streaming its rows.
    pub(crate) async fn run_plan(&self, state: SessionState, plan: LogicalPlan) -> Result<Output> {
        // Unconstrained numerics of CDC tables print with the upstream's digits: the rewrite
        // changes the result's types (numeric text), so it follows the optimizer.
        let optimized = state.optimize(&plan)?;
        let plan =
            crate::batch::display_scale::with_display_scales(&optimized)?.unwrap_or(optimized);
        let physical = state.query_planner().create_physical_plan(&plan, &state).await?;
        let stream = datafusion::physical_plan::execute_stream(physical, state.task_ctx())?;
        Ok(Output::Rows { schema: stream.schema(), stream })
    }
}
