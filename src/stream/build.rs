//! Builds a view's stream plan into executors, wired to the actors of its upstream relations.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use crate::catalog::{ActorId, TableCatalog, TableId};
use crate::error::{Error, Result};
use crate::storage::store::Store;
use crate::stream::barrier::BarrierHandle;
use crate::stream::executor::BoxedExecutor;
use crate::stream::executor::arrangement_backfill::{
    ArrangementBackfillExecutor, BackfillConfig, BackfillStatus,
};
use crate::stream::executor::filter::FilterExecutor;
use crate::stream::executor::hash_agg::{AggCall, HashAggExecutor};
use crate::stream::executor::hash_join::{HashJoinExecutor, JoinSide};
use crate::stream::executor::project::ProjectExecutor;
use crate::stream::executor::receiver::ReceiverExecutor;
use crate::stream::message::OutputSender;
use crate::stream::plan::{NodeKind, StreamNode, StreamPlan};

/// Messages buffered between two actors.
pub const CHANNEL_CAPACITY: usize = 16;

/// What building a view's plan produced.
pub struct BuiltPlan {
    /// The root executor; the caller puts a materialize on top.
    pub root: BoxedExecutor,
    /// Channels to attach to upstream actors' outputs.
    pub outputs: HashMap<ActorId, Vec<OutputSender>>,
    /// Progress of each backfill of the plan.
    pub backfills: Vec<watch::Receiver<BackfillStatus>>,
}

/// Everything building needs besides the plan.
pub struct BuildContext<'a> {
    /// The store every state table lives in.
    pub store: Arc<Store>,
    /// The internal tables of the plan's slots, by slot index.
    pub tables: &'a [Arc<TableCatalog>],
    /// The actor whose output carries a relation's changes.
    pub upstream_actor: &'a dyn Fn(TableId) -> Option<ActorId>,
    /// Snapshot rows per second for every backfill (`None`: unlimited).
    pub rate_limit: Option<u64>,
    /// The barrier manager, for backfills to ask for early checkpoints.
    pub barrier: BarrierHandle,
}

/// Builds the executors of `plan`.
pub fn build_plan(plan: &StreamPlan, ctx: &BuildContext<'_>) -> Result<BuiltPlan> {
    let mut outputs = HashMap::new();
    let mut backfills = Vec::new();
    let root = build_node(&plan.root, ctx, &mut outputs, &mut backfills)?;
    Ok(BuiltPlan { root, outputs, backfills })
}

fn build_node(
    node: &StreamNode,
    ctx: &BuildContext<'_>,
    outputs: &mut HashMap<ActorId, Vec<OutputSender>>,
    backfills: &mut Vec<watch::Receiver<BackfillStatus>>,
) -> Result<BoxedExecutor> {
    let mut inputs = Vec::with_capacity(node.inputs.len());
    for input in &node.inputs {
        inputs.push(build_node(input, ctx, outputs, backfills)?);
    }
    Ok(match &node.kind {
        NodeKind::Scan { table, output_indices, progress } => {
            let actor = (ctx.upstream_actor)(table.id)
                .ok_or_else(|| Error::Stream(format!("{} has no running job", table.name)))?;
            let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
            outputs.entry(actor).or_default().push(tx);
            let (status, watcher) = watch::channel(BackfillStatus::default());
            backfills.push(watcher);
            let config = BackfillConfig {
                upstream_table: table.clone(),
                output_indices: output_indices.clone(),
                output_schema: node.schema.clone(),
                progress_table: ctx.tables[*progress].clone(),
                rate_limit: ctx.rate_limit,
                barrier: ctx.barrier.clone(),
            };
            let upstream = Box::new(ReceiverExecutor::new(rx));
            Box::new(ArrangementBackfillExecutor::new(upstream, ctx.store.clone(), config, status))
        }
        NodeKind::Filter { predicate } => {
            Box::new(FilterExecutor::new(pop(&mut inputs), predicate.clone()))
        }
        NodeKind::Project { exprs } => {
            Box::new(ProjectExecutor::new(pop(&mut inputs), exprs.clone(), node.schema.clone()))
        }
        NodeKind::HashAgg { group_exprs, calls, result } => {
            let calls = calls
                .iter()
                .map(|c| AggCall {
                    kind: c.kind,
                    arg: c.arg.clone(),
                    output_type: c.output_type.clone(),
                    multiset: c.multiset.map(|s| ctx.tables[s].clone()),
                })
                .collect();
            Box::new(HashAggExecutor::new(
                pop(&mut inputs),
                ctx.store.clone(),
                group_exprs.clone(),
                calls,
                ctx.tables[*result].clone(),
                node.schema.clone(),
            ))
        }
        NodeKind::HashJoin { left_keys, right_keys, filter, tables } => {
            let right_input = pop(&mut inputs);
            let left_input = pop(&mut inputs);
            let left = JoinSide {
                input: left_input,
                keys: left_keys.clone(),
                table: ctx.tables[tables[0]].clone(),
                visible: node.inputs[0].visible,
            };
            let right = JoinSide {
                input: right_input,
                keys: right_keys.clone(),
                table: ctx.tables[tables[1]].clone(),
                visible: node.inputs[1].visible,
            };
            Box::new(HashJoinExecutor::new(
                left,
                right,
                ctx.store.clone(),
                filter.clone(),
                node.schema.clone(),
            ))
        }
    })
}

fn pop(inputs: &mut Vec<BoxedExecutor>) -> BoxedExecutor {
    inputs.pop().expect("the planner gives every operator its inputs")
}
