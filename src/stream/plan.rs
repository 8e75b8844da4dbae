//! The stream plan: a tree of streaming operators, before it is built into executors.
//!
//! Every node's output rows are its visible columns (those of the DataFusion plan node it comes
//! from, in order) followed by hidden columns that complete its stream key, the columns that
//! identify a row of the node's output. The root's stream key becomes the primary key of the
//! view's state table.

use std::fmt::Write;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::physical_plan::PhysicalExpr;

use crate::catalog::{ColumnCatalog, StatePurpose, TableCatalog};
use crate::stream::executor::hash_agg::AggKind;

/// An internal state table a node needs, before it has an id.
#[derive(Debug, Clone)]
pub struct StateSlot {
    /// What the table holds.
    pub purpose: StatePurpose,
    /// Columns, in storage order.
    pub columns: Vec<ColumnCatalog>,
    /// Primary key column indices.
    pub pk: Vec<usize>,
    /// Leading primary-key columns that choose the vnode.
    pub dist_key_len: usize,
}

/// An aggregate call in the plan.
#[derive(Debug, Clone)]
pub struct AggCallPlan {
    /// Which function.
    pub kind: AggKind,
    /// Its argument over the input rows.
    pub arg: Arc<dyn PhysicalExpr>,
    /// Its output type.
    pub output_type: arrow::datatypes::DataType,
    /// For min and max, and a DISTINCT call, the value multiset table (index into the plan's
    /// slots).
    pub multiset: Option<usize>,
    /// Over the distinct values only (see [`crate::stream::executor::hash_agg::AggCall`]).
    pub distinct: bool,
    /// For `string_agg`, its separator and order.
    pub listing: Option<crate::stream::executor::hash_agg::Listing>,
}

/// What a node does.
#[derive(Debug, Clone)]
pub enum NodeKind {
    /// Backfill and then follow an upstream relation.
    Scan {
        /// The upstream relation.
        table: Arc<TableCatalog>,
        /// Storage indices of the upstream columns output, visible then hidden.
        output_indices: Vec<usize>,
        /// The progress table (slot index).
        progress: usize,
    },
    /// Keep rows satisfying a predicate.
    Filter {
        /// The predicate.
        predicate: Arc<dyn PhysicalExpr>,
    },
    /// Compute output columns.
    Project {
        /// One expression per output column, hidden ones included.
        exprs: Vec<Arc<dyn PhysicalExpr>>,
    },
    /// Grouped aggregation.
    HashAgg {
        /// Group-by expressions.
        group_exprs: Vec<Arc<dyn PhysicalExpr>>,
        /// Aggregate calls.
        calls: Vec<AggCallPlan>,
        /// The result table (slot index).
        result: usize,
        /// A partial aggregate of eager aggregation: while its job is creating it keeps its
        /// groups in state and emits them once the backfills have finished.
        hold: bool,
        /// The final phase of a two-phase aggregation: the input rows are the partial rows of
        /// a [`NodeKind::LocalAgg`], and `group_exprs` their group columns.
        merge: bool,
    },
    /// The first phase of a two-phase aggregation: each actor adds up its own rows per group
    /// and sends partial rows (`group values ++ row_count ++ call states`), keeping no state.
    LocalAgg {
        /// Group-by expressions over the input rows.
        group_exprs: Vec<Arc<dyn PhysicalExpr>>,
        /// Aggregate calls over the input rows (count, and sums of integers or numerics).
        calls: Vec<AggCallPlan>,
    },
    /// Redistribute rows to the actors of the next fragment by the hash of key expressions.
    Exchange {
        /// Expressions over the input rows whose values choose the receiving actor.
        keys: Vec<Arc<dyn PhysicalExpr>>,
    },
    /// Send every row to every actor of the next fragment (a one-row subquery's changes, to
    /// a dynamic filter).
    Broadcast,
    /// `UNION ALL` of the inputs, each already projected to the same row layout.
    Union,
    /// The left input's rows whose value compares as the condition says with the right
    /// input's one row (see [`crate::stream::executor::dynamic_filter`]).
    DynamicFilter {
        /// `value op threshold`.
        condition: crate::stream::executor::dynamic_filter::DynamicCondition,
        /// The left rows' distribution key (the keys of the exchange under the left input).
        dist: Vec<Arc<dyn PhysicalExpr>>,
        /// The rows and the threshold tables (slot indices).
        tables: [usize; 2],
    },
    /// Equi-join of the two inputs.
    HashJoin {
        /// Which rows it outputs.
        kind: crate::stream::executor::hash_join::JoinKind,
        /// Join key expressions over the left input.
        left_keys: Vec<Arc<dyn PhysicalExpr>>,
        /// Join key expressions over the right input.
        right_keys: Vec<Arc<dyn PhysicalExpr>>,
        /// Residual condition over the output.
        filter: Option<Arc<dyn PhysicalExpr>>,
        /// Left and right state tables (slot indices).
        tables: [usize; 2],
        /// NULL keys match each other (`IS NOT DISTINCT FROM`).
        nulls_equal: bool,
    },
    /// The first rows of an order, per group or overall.
    TopN {
        /// Groups, order, offset, limit, rank column.
        spec: crate::stream::executor::top_n::TopNSpec,
        /// Its rows (slot index).
        table: usize,
    },
    /// Window functions over partitions (see [`crate::stream::executor::over_window`]).
    OverWindow {
        /// Partitions, order, functions.
        spec: crate::stream::executor::over_window::OverWindowSpec,
        /// Its rows (slot index).
        table: usize,
    },
    /// Conditions on `now()` (see [`crate::stream::executor::temporal_filter`]), on one actor.
    TemporalFilter {
        /// The condition rows leave by, with its state table (slot index).
        leaving: Option<(crate::stream::executor::temporal_filter::TemporalCondition, usize)>,
        /// The condition rows enter by, with its state table (slot index).
        entering: Option<(crate::stream::executor::temporal_filter::TemporalCondition, usize)>,
    },
}

/// A node of the stream plan.
#[derive(Debug, Clone)]
pub struct StreamNode {
    /// What the node does.
    pub kind: NodeKind,
    /// Its inputs.
    pub inputs: Vec<StreamNode>,
    /// Output row schema: visible columns, then hidden ones.
    pub schema: SchemaRef,
    /// How many leading columns are visible.
    pub visible: usize,
    /// Columns identifying an output row.
    pub stream_key: Vec<usize>,
    /// Columns whose values alone decide which actor of the fragment handles a row, when
    /// known: rows agreeing on them are always handled by the same actor.
    pub dist: Option<Vec<usize>>,
}

/// A view's whole stream plan: the tree and the state tables it needs.
#[derive(Debug, Clone)]
pub struct StreamPlan {
    /// The root; its output is materialized.
    pub root: StreamNode,
    /// Internal state tables, in the order their ids are assigned.
    pub slots: Vec<StateSlot>,
    /// Planned with eager aggregation allowed (whether or not it applied).
    pub eager_aggregation: bool,
    /// Output column -> the output column holding its values' display scales, for the
    /// unconstrained numerics the view reads from a CDC table as they are
    /// ([`crate::batch::display_scale`]); the view keeps those columns hidden.
    pub display_scales: std::collections::HashMap<usize, usize>,
}

impl StreamNode {
    fn name(&self) -> String {
        match &self.kind {
            NodeKind::Scan { table, output_indices, .. } => {
                // The hidden stream-key columns after the visible ones, as `key(name)`.
                let columns: Vec<String> = output_indices
                    .iter()
                    .enumerate()
                    .map(|(pos, &i)| match pos < self.visible {
                        true => table.columns[i].name.clone(),
                        false => format!("key({})", table.columns[i].name),
                    })
                    .collect();
                format!(
                    "StreamTableScan {{ table: {}, columns: [{}] }}",
                    table.name,
                    columns.join(", ")
                )
            }
            NodeKind::Filter { predicate } => format!("StreamFilter {{ predicate: {predicate} }}"),
            NodeKind::Project { exprs } => {
                let exprs: Vec<String> = exprs.iter().map(|e| e.to_string()).collect();
                format!("StreamProject {{ exprs: [{}] }}", exprs.join(", "))
            }
            NodeKind::HashAgg { group_exprs, calls, merge, .. } => {
                let merges = if *merge { ", merges: partial rows" } else { "" };
                format!("StreamHashAgg {{ {}{merges} }}", agg_text(group_exprs, calls))
            }
            NodeKind::LocalAgg { group_exprs, calls } => {
                format!("StreamLocalAgg {{ {} }}", agg_text(group_exprs, calls))
            }
            NodeKind::Union => "StreamUnion { all: true }".to_owned(),
            NodeKind::Broadcast => "StreamExchange { dist: Broadcast }".to_owned(),
            NodeKind::DynamicFilter { condition, .. } => format!(
                "StreamDynamicFilter {{ predicate: {} {} {} }}",
                condition.value, condition.op, condition.threshold
            ),
            NodeKind::Exchange { keys } => {
                let keys: Vec<String> = keys.iter().map(|e| e.to_string()).collect();
                format!("StreamExchange {{ dist: HashShard([{}]) }}", keys.join(", "))
            }
            NodeKind::HashJoin { kind, left_keys, right_keys, filter, .. } => {
                let on: Vec<String> =
                    left_keys.iter().zip(right_keys).map(|(l, r)| format!("{l} = {r}")).collect();
                let filter = filter.as_ref().map_or(String::new(), |f| format!(", filter: {f}"));
                format!("StreamHashJoin {{ type: {kind:?}, on: [{}]{filter} }}", on.join(", "))
            }
            NodeKind::TopN { spec, .. } => {
                let groups: Vec<String> = spec.group.iter().map(|e| e.to_string()).collect();
                let order: Vec<String> = spec
                    .order
                    .iter()
                    .map(|k| {
                        let dir = if k.descending { "DESC" } else { "ASC" };
                        let nulls = if k.nulls_first { "NULLS FIRST" } else { "NULLS LAST" };
                        format!("{} {dir} {nulls}", k.expr)
                    })
                    .collect();
                format!(
                    "StreamTopN {{ group_key: [{}], order: [{}], offset: {}, limit: {}{} }}",
                    groups.join(", "),
                    order.join(", "),
                    spec.offset,
                    spec.limit,
                    if spec.rank { ", with row_number" } else { "" }
                )
            }
            NodeKind::OverWindow { spec, .. } => {
                let partition: Vec<String> = spec.partition.iter().map(|e| e.to_string()).collect();
                let calls: Vec<String> = spec.calls.iter().map(|c| c.name().to_owned()).collect();
                format!(
                    "StreamOverWindow {{ partition_by: [{}], calls: [{}] }}",
                    partition.join(", "),
                    calls.join(", ")
                )
            }
            NodeKind::TemporalFilter { leaving, entering } => {
                let conditions: Vec<String> = [leaving, entering]
                    .into_iter()
                    .flatten()
                    .map(|(c, _)| c.predicate.to_string())
                    .collect();
                format!("StreamTemporalFilter {{ conditions: [{}] }}", conditions.join(", "))
            }
        }
    }

    fn explain(&self, depth: usize, out: &mut String) {
        let _ = writeln!(out, "{}└─{}", "  ".repeat(depth), self.name());
        for input in &self.inputs {
            input.explain(depth + 1, out);
        }
    }
}

/// `group_key: [..], aggs: [..]` of an aggregate node, for EXPLAIN.
fn agg_text(group_exprs: &[Arc<dyn PhysicalExpr>], calls: &[AggCallPlan]) -> String {
    let groups: Vec<String> = group_exprs.iter().map(|e| e.to_string()).collect();
    let calls: Vec<String> = calls
        .iter()
        .map(|c| format!("{:?}({}{})", c.kind, if c.distinct { "DISTINCT " } else { "" }, c.arg))
        .collect();
    format!("group_key: [{}], aggs: [{}]", groups.join(", "), calls.join(", "))
}

impl StreamPlan {
    /// The plan as an indented tree, one operator per line, materialize at the top.
    pub fn explain(&self, view: &str) -> String {
        let key: Vec<String> = self
            .root
            .stream_key
            .iter()
            .map(|&i| self.root.schema.field(i).name().clone())
            .collect();
        let mut out = format!("StreamMaterialize {{ view: {view}, pk: [{}] }}\n", key.join(", "));
        self.root.explain(1, &mut out);
        out
    }
}
