//! Builds a view's stream plan into actors, wired to each other and to their upstreams.
//!
//! The plan is cut into fragments at its exchanges; every fragment runs `parallelism` actors,
//! actor `i` owning the vnodes [`owned_vnodes`]`(i, parallelism)`. Below an exchange each actor
//! hash-dispatches its output to the actors above it, which merge their inputs and align
//! barriers. A scan's fragment receives the upstream relation's changes the same way: every
//! upstream actor hash-dispatches by the upstream's distribution key, so a scan actor sees the
//! changes of exactly the vnodes it backfills.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::PhysicalExpr;
use tokio::sync::{mpsc, watch};

use crate::catalog::{ActorId, TableCatalog, TableId};
use crate::error::{Error, Result};
use crate::storage::store::Store;
use crate::stream::barrier::BarrierHandle;
use crate::stream::dispatch::owned_vnodes;
use crate::stream::executor::BoxedExecutor;
use crate::stream::executor::backfill::arrangement::{
    ArrangementBackfillExecutor, BackfillConfig, PAGE_ROWS,
};
use crate::stream::executor::backfill::status::{BackfillStatus, BackfillWatch};
use crate::stream::executor::dynamic_filter::DynamicFilterExecutor;
use crate::stream::executor::filter::FilterExecutor;
use crate::stream::executor::gate::GateExecutor;
use crate::stream::executor::hash_agg::{AggCall, HOLD_LIMIT, HashAggExecutor, Hold};
use crate::stream::executor::hash_join::{HashJoinExecutor, JoinSide};
use crate::stream::executor::local_agg::LocalAggExecutor;
use crate::stream::executor::merge::MergeExecutor;
use crate::stream::executor::over_window::OverWindowExecutor;
use crate::stream::executor::project::ProjectExecutor;
use crate::stream::executor::receiver::ReceiverExecutor;
use crate::stream::executor::temporal_filter::{KeptBy, TemporalCondition, TemporalFilterExecutor};
use crate::stream::executor::top_n::TopNExecutor;
use crate::stream::executor::union::UnionExecutor;
use crate::stream::graph::order::PlanGates;
use crate::stream::message::Message;
use crate::stream::message::Output;
use crate::stream::plan::{AggCallPlan, NodeKind, StreamNode, StreamPlan};

/// Messages buffered between two actors.
pub const CHANNEL_CAPACITY: usize = 16;

/// An actor of a lower fragment: its id, root executor and fixed outputs.
pub type InnerActor = (ActorId, BoxedExecutor, Vec<Output>);

/// What building a view's plan produced.
pub struct BuiltPlan {
    /// The top fragment's executors, one per actor; the caller puts a materialize on each.
    pub roots: Vec<BoxedExecutor>,
    /// Actors of the lower fragments, with their outputs to the fragments above.
    pub inner_actors: Vec<InnerActor>,
    /// Outputs to attach to upstream relations' actors.
    pub outputs: HashMap<ActorId, Vec<Output>>,
    /// Progress of every backfilling actor.
    pub backfills: Vec<BackfillWatch>,
    /// The lower fragments: the operators each runs, and its actors.
    pub fragments: Vec<(String, Vec<ActorId>)>,
    /// The operators of the top fragment.
    pub root_label: String,
}

/// Everything building needs besides the plan.
pub struct BuildContext<'a> {
    /// The store every state table lives in.
    pub store: Arc<Store>,
    /// The internal tables of the plan's slots, by slot index.
    pub tables: &'a [Arc<TableCatalog>],
    /// The actors whose outputs carry a relation's changes.
    pub upstream_actors: &'a dyn Fn(TableId) -> Vec<ActorId>,
    /// Allocates actor ids.
    pub new_actor: &'a dyn Fn() -> ActorId,
    /// Actors per fragment.
    pub parallelism: usize,
    /// Snapshot rows per second for every backfilling actor (`None`: unlimited).
    pub rate_limit: Option<u64>,
    /// The barrier manager, for backfills to ask for early checkpoints.
    pub barrier: BarrierHandle,
    /// The job is creating and will release held partial aggregates when its backfills finish
    /// (a view planned with eager aggregation, see `creating::monitor`): its partial aggregates
    /// hold their output until then.
    pub hold: bool,
    /// The gates that order the scans' reading, when any scan waits for another
    /// ([`crate::stream::graph::order`]).
    pub order: Option<PlanGates>,
}

/// Builds the actors of `plan`.
pub fn build_plan(plan: &StreamPlan, ctx: &BuildContext<'_>) -> Result<BuiltPlan> {
    let mut built = BuiltPlan {
        roots: Vec::new(),
        inner_actors: Vec::new(),
        outputs: HashMap::new(),
        backfills: Vec::new(),
        fragments: Vec::new(),
        root_label: fragment_label(&plan.root),
    };
    built.roots = build_fragment(&plan.root, ctx, &mut built)?;
    Ok(built)
}

/// The operators of the fragment rooted at `node`, down to its exchanges.
fn fragment_label(node: &StreamNode) -> String {
    let name = match &node.kind {
        NodeKind::Scan { table, .. } => return format!("StreamScan {{ table: {} }}", table.name),
        NodeKind::Exchange { .. } | NodeKind::Broadcast => return "Exchange".to_owned(),
        NodeKind::Filter { .. } => "Filter",
        NodeKind::Project { .. } => "Project",
        NodeKind::HashAgg { .. } => "HashAgg",
        NodeKind::LocalAgg { .. } => "LocalAgg",
        NodeKind::HashJoin { .. } => "HashJoin",
        NodeKind::TopN { .. } => "TopN",
        NodeKind::TemporalFilter { .. } => "TemporalFilter",
        NodeKind::OverWindow { .. } => "OverWindow",
        NodeKind::Union => "Union",
        NodeKind::DynamicFilter { .. } => "DynamicFilter",
    };
    let inputs: Vec<String> = node.inputs.iter().map(fragment_label).collect();
    format!("{name}({})", inputs.join(", "))
}

/// The executor form of a plan's aggregate calls.
fn agg_calls(calls: &[AggCallPlan], ctx: &BuildContext<'_>) -> Vec<AggCall> {
    calls
        .iter()
        .map(|c| AggCall {
            kind: c.kind,
            arg: c.arg.clone(),
            output_type: c.output_type.clone(),
            multiset: c.multiset.map(|s| ctx.tables[s].clone()),
            distinct: c.distinct,
            listing: c.listing.clone(),
        })
        .collect()
}

/// Expressions of a relation's distribution key columns, to hash-dispatch its rows by vnode.
pub fn key_exprs(table: &TableCatalog) -> Vec<Arc<dyn PhysicalExpr>> {
    table.pk[..table.dist_key_len]
        .iter()
        .map(|&i| Arc::new(Column::new(&table.columns[i].name, i)) as _)
        .collect()
}

/// `n` channels: the senders for an upstream output and the receivers, one per actor.
pub fn channels(n: usize) -> (Vec<mpsc::Sender<Message>>, Vec<mpsc::Receiver<Message>>) {
    (0..n).map(|_| mpsc::channel(CHANNEL_CAPACITY)).unzip()
}

/// An actor's input from its channels: one receiver, or a merge aligning barriers, under a
/// gate (see [`GateExecutor`]).
pub fn input_of(mut receivers: Vec<mpsc::Receiver<Message>>, store: &Arc<Store>) -> BoxedExecutor {
    let input: BoxedExecutor = if receivers.len() == 1 {
        Box::new(ReceiverExecutor::new(receivers.pop().expect("one receiver")))
    } else {
        Box::new(MergeExecutor::new(receivers))
    };
    Box::new(GateExecutor::new(input, store.clone()))
}

/// The executors of the fragment rooted at `node`, one per actor.
fn build_fragment(
    node: &StreamNode,
    ctx: &BuildContext<'_>,
    built: &mut BuiltPlan,
) -> Result<Vec<BoxedExecutor>> {
    let n = ctx.parallelism;
    match &node.kind {
        NodeKind::Scan { table, output_indices, progress } => {
            let upstreams = (ctx.upstream_actors)(table.id);
            if upstreams.is_empty() {
                return Err(Error::Stream(format!("{} has no running job", table.name)));
            }
            let keys = key_exprs(table);
            let mut inputs: Vec<Vec<mpsc::Receiver<Message>>> =
                (0..n).map(|_| Vec::new()).collect();
            for upstream in upstreams {
                let (senders, receivers) = channels(n);
                built.outputs.entry(upstream).or_default().push(Output {
                    keys: keys.clone(),
                    senders,
                    broadcast: false,
                });
                for (i, rx) in receivers.into_iter().enumerate() {
                    inputs[i].push(rx);
                }
            }
            let mut executors = Vec::with_capacity(n);
            for (i, receivers) in inputs.into_iter().enumerate() {
                let (status, watcher) = watch::channel(BackfillStatus::default());
                built.backfills.push(BackfillWatch {
                    state_table: ctx.tables[*progress].id,
                    upstream: table.name.clone(),
                    status: watcher,
                });
                let config = BackfillConfig {
                    upstream_table: table.clone(),
                    output_indices: output_indices.clone(),
                    output_schema: node.schema.clone(),
                    progress_table: ctx.tables[*progress].clone(),
                    rate_limit: ctx.rate_limit,
                    page_rows: PAGE_ROWS,
                    vnodes: owned_vnodes(i, n),
                    barrier: ctx.barrier.clone(),
                    order: ctx.order.as_ref().map(|o| o.start_gate(*progress)),
                };
                let scan = ArrangementBackfillExecutor::new(
                    input_of(receivers, &ctx.store),
                    ctx.store.clone(),
                    config,
                    status,
                );
                executors.push(Box::new(scan) as BoxedExecutor);
            }
            Ok(executors)
        }
        NodeKind::Exchange { .. } | NodeKind::Broadcast => {
            let (keys, broadcast) = match &node.kind {
                NodeKind::Exchange { keys } => (keys.clone(), false),
                _ => (Vec::new(), true),
            };
            let below = build_fragment(&node.inputs[0], ctx, built)?;
            let mut inputs: Vec<Vec<mpsc::Receiver<Message>>> =
                (0..n).map(|_| Vec::new()).collect();
            let mut ids = Vec::with_capacity(below.len());
            for executor in below {
                let (senders, receivers) = channels(n);
                let output = Output { keys: keys.clone(), senders, broadcast };
                let id = (ctx.new_actor)();
                ids.push(id);
                built.inner_actors.push((id, executor, vec![output]));
                for (i, rx) in receivers.into_iter().enumerate() {
                    inputs[i].push(rx);
                }
            }
            built.fragments.push((fragment_label(&node.inputs[0]), ids));
            Ok(inputs.into_iter().map(|r| input_of(r, &ctx.store)).collect())
        }
        NodeKind::Union => {
            let mut per_actor: Vec<Vec<BoxedExecutor>> = (0..n).map(|_| Vec::new()).collect();
            for input in &node.inputs {
                for (i, executor) in build_fragment(input, ctx, built)?.into_iter().enumerate() {
                    per_actor[i].push(executor);
                }
            }
            Ok(per_actor
                .into_iter()
                .map(|inputs| Box::new(UnionExecutor::new(inputs)) as _)
                .collect())
        }
        NodeKind::Filter { predicate } => {
            let inputs = build_fragment(&node.inputs[0], ctx, built)?;
            Ok(inputs
                .into_iter()
                .map(|i| Box::new(FilterExecutor::new(i, predicate.clone())) as _)
                .collect())
        }
        NodeKind::Project { exprs } => {
            let inputs = build_fragment(&node.inputs[0], ctx, built)?;
            Ok(inputs
                .into_iter()
                .map(|i| Box::new(ProjectExecutor::new(i, exprs.clone(), node.schema.clone())) as _)
                .collect())
        }
        NodeKind::LocalAgg { group_exprs, calls } => {
            let inputs = build_fragment(&node.inputs[0], ctx, built)?;
            let mut executors = Vec::with_capacity(inputs.len());
            for input in inputs {
                let calls = agg_calls(calls, ctx);
                let agg =
                    LocalAggExecutor::new(input, group_exprs.clone(), calls, node.schema.clone())?;
                executors.push(Box::new(agg) as BoxedExecutor);
            }
            Ok(executors)
        }
        NodeKind::HashAgg { group_exprs, calls, result, hold, merge } => {
            let inputs = build_fragment(&node.inputs[0], ctx, built)?;
            let mut executors = Vec::with_capacity(n);
            let result = &ctx.tables[*result];
            for (i, input) in inputs.into_iter().enumerate() {
                let calls = agg_calls(calls, ctx);
                let mut agg = HashAggExecutor::new(
                    input,
                    ctx.store.clone(),
                    group_exprs.clone(),
                    calls,
                    result.clone(),
                    node.schema.clone(),
                );
                if *merge {
                    agg = agg.merging();
                }
                agg = agg.owning(&owned_vnodes(i, n))?;
                if let (true, true, Some(job)) = (*hold, ctx.hold, result.owner) {
                    agg = agg.holding(Hold { job, vnodes: owned_vnodes(i, n), limit: HOLD_LIMIT });
                }
                executors.push(Box::new(agg) as BoxedExecutor);
            }
            Ok(executors)
        }
        NodeKind::OverWindow { spec, table } => {
            let inputs = build_fragment(&node.inputs[0], ctx, built)?;
            let table = &ctx.tables[*table];
            let executors = inputs
                .into_iter()
                .map(|input| {
                    Box::new(OverWindowExecutor::new(
                        input,
                        spec.clone(),
                        table.clone(),
                        ctx.store.clone(),
                        node.schema.clone(),
                    )) as BoxedExecutor
                })
                .collect();
            Ok(executors)
        }
        NodeKind::TemporalFilter { leaving, entering } => {
            let inputs = build_fragment(&node.inputs[0], ctx, built)?;
            let kept = |k: &Option<(TemporalCondition, usize)>| {
                k.as_ref().map(|(condition, slot)| KeptBy {
                    condition: condition.clone(),
                    table: ctx.tables[*slot].clone(),
                })
            };
            let visible = node.inputs[0].visible;
            let executors = inputs
                .into_iter()
                .enumerate()
                .map(|(i, input)| {
                    Box::new(TemporalFilterExecutor::new(
                        input,
                        ctx.store.clone(),
                        visible,
                        owned_vnodes(i, n),
                        kept(leaving),
                        kept(entering),
                    )) as BoxedExecutor
                })
                .collect();
            Ok(executors)
        }
        NodeKind::TopN { spec, table } => {
            let inputs = build_fragment(&node.inputs[0], ctx, built)?;
            let table = &ctx.tables[*table];
            let visible = node.inputs[0].visible;
            let executors = inputs
                .into_iter()
                .map(|input| {
                    Box::new(TopNExecutor::new(
                        input,
                        spec.clone(),
                        table.clone(),
                        ctx.store.clone(),
                        visible,
                        node.schema.clone(),
                    )) as BoxedExecutor
                })
                .collect();
            Ok(executors)
        }
        NodeKind::DynamicFilter { condition, dist, tables } => {
            let lefts = build_fragment(&node.inputs[0], ctx, built)?;
            let rights = build_fragment(&node.inputs[1], ctx, built)?;
            let executors = lefts
                .into_iter()
                .zip(rights)
                .enumerate()
                .map(|(i, (left, right))| {
                    Box::new(DynamicFilterExecutor::new(
                        left,
                        right,
                        ctx.store.clone(),
                        condition.clone(),
                        dist.clone(),
                        owned_vnodes(i, n),
                        ctx.tables[tables[0]].clone(),
                        ctx.tables[tables[1]].clone(),
                        node.inputs[0].schema.clone(),
                    )) as BoxedExecutor
                })
                .collect();
            Ok(executors)
        }
        NodeKind::HashJoin { kind, left_keys, right_keys, filter, tables, nulls_equal } => {
            let lefts = build_fragment(&node.inputs[0], ctx, built)?;
            let rights = build_fragment(&node.inputs[1], ctx, built)?;
            let mut executors = Vec::with_capacity(n);
            for (left_input, right_input) in lefts.into_iter().zip(rights) {
                let left = JoinSide {
                    input: left_input,
                    keys: left_keys.clone(),
                    table: ctx.tables[tables[0]].clone(),
                    visible: node.inputs[0].visible,
                    width: node.inputs[0].schema.fields().len(),
                };
                let right = JoinSide {
                    input: right_input,
                    keys: right_keys.clone(),
                    table: ctx.tables[tables[1]].clone(),
                    visible: node.inputs[1].visible,
                    width: node.inputs[1].schema.fields().len(),
                };
                let join = HashJoinExecutor::new(
                    *kind,
                    left,
                    right,
                    ctx.store.clone(),
                    filter.clone(),
                    node.schema.clone(),
                )
                .with_nulls_equal(*nulls_equal);
                executors.push(Box::new(join) as BoxedExecutor);
            }
            Ok(executors)
        }
    }
}
