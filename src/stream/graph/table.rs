//! The jobs of tables and views.
//!
//! A table's job is its DML actor hash-dispatching changes by key to the table's materialize
//! fragment (`parallelism` actors, each storing its vnodes). A view's job runs its plan in
//! fragments of `parallelism` actors each (scans, operators, then a `MaterializeExecutor`); its
//! scans read from channels attached to the output actors of each upstream relation.

use std::collections::HashMap;

use tokio::sync::mpsc;

use crate::catalog::{ActorId, TableCatalog, TableId};
use crate::error::{Error, Result};
use crate::stream::dispatch::owned_vnodes;
use crate::stream::executor::BoxedExecutor;
use crate::stream::executor::dml::DmlExecutor;
use crate::stream::executor::materialize::MaterializeExecutor;
use crate::stream::graph::StreamGraph;
use crate::stream::graph::build::{BuildContext, build_plan, channels, input_of, key_exprs};
use crate::stream::graph::job::PreparedJob;
use crate::stream::graph::order;
use crate::stream::message::Output;
use crate::stream::plan::StreamPlan;

/// How many DML requests may queue for one table.
const DML_QUEUE: usize = 16;

impl StreamGraph {
    /// Builds the job of a table: its DML actor feeding the materialize fragment.
    pub fn prepare_table_job(&self, table: &TableCatalog) -> PreparedJob {
        let actor = self.new_actor_id();
        let (barrier_tx, barrier_rx) = mpsc::unbounded_channel();
        let (dml_tx, dml_rx) = mpsc::channel(DML_QUEUE);
        let source = Box::new(DmlExecutor::new(barrier_rx, dml_rx));
        let mut job = PreparedJob::single(table.id, actor, source, Some(barrier_tx));
        job.dml = Some(dml_tx);
        job.absorb(self.prepare_materialize_fragment(table, actor, false));
        job.feeder = Some(actor);
        job
    }

    /// Builds the materialize fragment of a table: `table.parallelism` actors, each storing
    /// the rows of its vnodes, fed by `feeder` hash-dispatching the changes by key.
    pub fn prepare_materialize_fragment(
        &self,
        table: &TableCatalog,
        feeder: ActorId,
        upsert: bool,
    ) -> PreparedJob {
        let n = table.parallelism.max(1);
        let (senders, receivers) = channels(n);
        let mut ids = Vec::with_capacity(n);
        let mut executors = Vec::with_capacity(n);
        for (i, rx) in receivers.into_iter().enumerate() {
            let input = input_of(vec![rx], &self.store);
            let state = table.state_table(self.store.clone());
            let schema = table.full_schema();
            let materialize = if upsert {
                MaterializeExecutor::upsert(input, state, schema)
            } else {
                MaterializeExecutor::new(input, state, schema)
            };
            let counters = self.metrics.relation_changes(&table.name);
            let materialize = materialize.owning(owned_vnodes(i, n)).counting(counters);
            let root: BoxedExecutor = Box::new(materialize);
            ids.push(self.new_actor_id());
            executors.push(root);
        }
        let output = Output { keys: key_exprs(table), senders, broadcast: false };
        PreparedJob {
            relation: table.id,
            ids: ids.clone(),
            executors,
            fixed_outputs: HashMap::new(),
            output_actors: ids.clone(),
            sources: Vec::new(),
            outputs: HashMap::from([(feeder, vec![output])]),
            backfills: Vec::new(),
            dml: None,
            fragments: vec![(format!("Materialize {{ table: {} }}", table.name), ids, true)],
            feeder: Some(feeder),
        }
    }

    /// Builds a view's job from its plan; `upstream` finds the output actor of a relation.
    pub fn prepare_view_job(
        &self,
        view: &TableCatalog,
        plan: &StreamPlan,
        upstream: &dyn Fn(TableId) -> Vec<ActorId>,
    ) -> Result<PreparedJob> {
        let tables = view
            .internal_tables
            .iter()
            .map(|id| {
                self.catalog.table_by_id(*id).ok_or_else(|| {
                    Error::Storage(format!("internal table {id} of {} is missing", view.name))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if tables.len() != plan.slots.len() {
            return Err(Error::Storage(format!(
                "the plan of {} needs {} state tables but the catalog has {}",
                view.name,
                plan.slots.len(),
                tables.len()
            )));
        }
        let new_actor = || self.new_actor_id();
        let ctx = BuildContext {
            store: self.store.clone(),
            tables: &tables,
            upstream_actors: upstream,
            new_actor: &new_actor,
            parallelism: view.parallelism.max(1),
            rate_limit: view.backfill_rate_limit,
            barrier: self.barrier.clone(),
            // The monitor releases only views planned with eager aggregation.
            hold: view.creating.is_some() && view.eager_aggregation,
            // A created view's scans have read: they follow their upstreams, in no order.
            order: match view.creating {
                Some(_) => order::gates(
                    &plan.root,
                    &view.backfill_order,
                    &self.store,
                    view.parallelism.max(1),
                )?,
                None => None,
            },
        };
        let built = build_plan(plan, &ctx)?;
        let mut ids = Vec::new();
        let mut executors = Vec::new();
        let mut fixed_outputs = HashMap::new();
        for (id, executor, outputs) in built.inner_actors {
            ids.push(id);
            executors.push(executor);
            fixed_outputs.insert(id, outputs);
        }
        let mut fragments = built.fragments;
        let mut output_actors = Vec::new();
        for root in built.roots {
            let state = view.state_table(self.store.clone());
            let id = self.new_actor_id();
            ids.push(id);
            output_actors.push(id);
            executors.push(Box::new(
                MaterializeExecutor::new(root, state, view.full_schema())
                    .counting(self.metrics.relation_changes(&view.name)),
            ) as _);
        }
        Ok(PreparedJob {
            relation: view.id,
            ids,
            executors,
            fixed_outputs,
            output_actors: output_actors.clone(),
            sources: Vec::new(),
            outputs: built.outputs,
            backfills: built.backfills,
            dml: None,
            fragments: {
                fragments.push((format!("Materialize({})", built.root_label), output_actors));
                fragments.into_iter().map(|(label, actors)| (label, actors, true)).collect()
            },
            feeder: None,
        })
    }
}
