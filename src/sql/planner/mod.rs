//! Turns a DataFusion logical plan into a stream plan.
//!
//! DataFusion parses, resolves and types the view's query and optimizes it; this module walks
//! the optimized plan and maps each node to a streaming operator, adding the hidden stream-key
//! columns each operator needs and describing the state tables it will own. Constructs with no
//! streaming operator yet fail here with an error naming them.

/// Lowering comparisons with a one-row subquery.
mod dynamic_filter;
/// Lowering grouping sets.
mod grouping_sets;
/// Lowering joins.
mod join;
/// Lowering window functions.
mod over_window;
/// Lowering conditions on `now()`.
mod temporal;
/// Lowering top-N.
mod top_n;

pub use temporal::mark_now;

use std::sync::Arc;

use arrow::datatypes::{DataType as ArrowType, Field, Schema};
use datafusion::common::DFSchema;
use datafusion::common::tree_node::TreeNode;
use datafusion::execution::SessionState;
use datafusion::logical_expr::{Expr, JoinType, LogicalPlan};
use datafusion::physical_expr::expressions::{Column, Literal};
use datafusion::physical_plan::PhysicalExpr;
use datafusion::scalar::ScalarValue;

use crate::catalog::{Catalog, ColumnCatalog, RelationKind, StatePurpose};
use crate::error::{Error, Result};
use crate::sql::eager::is_partial;
use crate::stream::executor::hash_agg::sum::SumLayout;
use crate::stream::executor::hash_agg::{AggKind, Listing};
use crate::stream::executor::hash_join::JoinKind;
use crate::stream::executor::local_agg::partial_state_adds_up;
use crate::stream::executor::top_n::{SortKey, TopNSpec};
use crate::stream::plan::{AggCallPlan, NodeKind, StateSlot, StreamNode, StreamPlan};
use crate::types::DataType;
use crate::unsupported;

/// Lowers an optimized logical plan.
pub fn plan_stream(
    state: &SessionState,
    catalog: &Catalog,
    plan: &LogicalPlan,
) -> Result<StreamPlan> {
    let right_unread = dynamic_filter::right_unread(plan);
    let mut planner = Planner { state, catalog, slots: Vec::new(), right_unread };
    let mut root = planner.lower(plan)?;
    // Each row of the view must always be written by the same actor.
    let written_by_one_actor =
        root.dist.as_ref().is_some_and(|d| d.iter().all(|c| root.stream_key.contains(c)));
    if !written_by_one_actor {
        let keys = root.stream_key.iter().map(|&i| column_expr(&root, i)).collect();
        root = exchange(root, keys);
    }
    refuse_array_keys(&root, &planner.slots)?;
    Ok(StreamPlan {
        root,
        slots: planner.slots,
        eager_aggregation: false,
        display_scales: Default::default(),
    })
}

/// Refuses a plan that would key state or route rows by an array value (`GROUP BY` an array,
/// `DISTINCT` over one, a join on one): keys are stored in an order-preserving encoding that
/// arrays do not have yet.
fn refuse_array_keys(root: &StreamNode, slots: &[StateSlot]) -> Result<()> {
    let refused = || {
        unsupported!(
            "an array value as a key in a materialized view (GROUP BY, DISTINCT, a join \
             condition or the view's rows' identity); use the array's elements or its text \
             (array_to_string) instead"
        )
    };
    for slot in slots {
        if slot.pk.iter().any(|&i| matches!(slot.columns[i].data_type, DataType::Array(_))) {
            return Err(refused());
        }
    }
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        let is_array = |t: &ArrowType| matches!(t, ArrowType::List(_) | ArrowType::LargeList(_));
        if node.stream_key.iter().any(|&i| is_array(node.schema.field(i).data_type())) {
            return Err(refused());
        }
        if let NodeKind::Exchange { keys } = &node.kind {
            let input = &node.inputs[0].schema;
            if keys.iter().any(|k| k.data_type(input).is_ok_and(|t| is_array(&t))) {
                return Err(refused());
            }
        }
        stack.extend(node.inputs.iter());
    }
    Ok(())
}

/// True if every row of `input` with the same values of `group_exprs` is handled by the same
/// actor already: the columns it is distributed by are all plain group-by columns.
fn distributed_by(input: &StreamNode, group_exprs: &[Arc<dyn PhysicalExpr>]) -> bool {
    let grouped: Vec<usize> =
        group_exprs.iter().filter_map(|e| as_column(e).map(Column::index)).collect();
    input.dist.as_ref().is_some_and(|d| !d.is_empty() && d.iter().all(|c| grouped.contains(c)))
}

/// `input` without the hidden stream-key columns its table scan adds, when only filters stand
/// between the scan and a local aggregation reading visible columns alone: the local phase
/// folds rows by group and never reads their keys, so a backfill then neither decodes nor
/// carries them (q_a's `SELECT a, count(*), sum(b) FROM t WHERE b > 10 GROUP BY a` read `t`'s
/// `id` for nothing). Any other plan is returned as it is.
fn without_scan_key(
    input: StreamNode,
    group_exprs: &[Arc<dyn PhysicalExpr>],
    calls: &[AggCallPlan],
) -> StreamNode {
    use datafusion::physical_expr::utils::collect_columns;

    /// Whether `node` is filters over a scan, whose predicates read visible columns only.
    fn prunable(node: &StreamNode) -> bool {
        match &node.kind {
            NodeKind::Scan { .. } => true,
            NodeKind::Filter { predicate } => {
                collect_columns(predicate).iter().all(|c| c.index() < node.visible)
                    && prunable(&node.inputs[0])
            }
            _ => false,
        }
    }
    fn prune(mut node: StreamNode) -> StreamNode {
        let fields = node.schema.fields()[..node.visible].to_vec();
        node.schema = Arc::new(Schema::new(fields));
        node.stream_key.clear();
        node.dist = None;
        match &mut node.kind {
            NodeKind::Scan { output_indices, .. } => output_indices.truncate(node.visible),
            _ => node.inputs = node.inputs.drain(..).map(prune).collect(),
        }
        node
    }
    let reads_visible_only = group_exprs
        .iter()
        .chain(calls.iter().map(|c| &c.arg))
        .all(|e| collect_columns(e).iter().all(|c| c.index() < input.visible));
    match reads_visible_only && prunable(&input) {
        true => prune(input),
        false => input,
    }
}

/// The first phase of a two-phase aggregation over `input` (see
/// [`crate::stream::executor::local_agg`]), and the final phase's calls over its partial rows:
/// `group values ++ row_count ++` per call its state (`count`; or `sum`, `nonnull`), typed as
/// the aggregate's result table.
fn local_agg(
    input: StreamNode,
    group_exprs: Vec<Arc<dyn PhysicalExpr>>,
    calls: Vec<AggCallPlan>,
    out: &Schema,
) -> (StreamNode, Vec<AggCallPlan>) {
    let n_groups = group_exprs.len();
    let mut fields: Vec<Field> = out.fields()[..n_groups]
        .iter()
        .enumerate()
        .map(|(i, f)| Field::new(format!("group_{i}"), f.data_type().clone(), true))
        .collect();
    fields.push(Field::new("row_count", ArrowType::Int64, true));
    let mut finals = Vec::with_capacity(calls.len());
    for (i, call) in calls.iter().enumerate() {
        let state = match call.kind {
            AggKind::Count => format!("count_{i}"),
            _ => format!("sum_{i}"),
        };
        let arg: Arc<dyn PhysicalExpr> = Arc::new(Column::new(&state, fields.len()));
        finals.push(AggCallPlan { arg, multiset: None, ..call.clone() });
        match call.kind {
            AggKind::Count => fields.push(Field::new(state, ArrowType::Int64, true)),
            // Only sums go two-phase: the argument's type decides nothing more than the
            // result's does (see `SumLayout::new`).
            kind => {
                let layout = SumLayout::new(kind, &call.output_type, &call.output_type);
                for (name, ty) in layout.columns(i) {
                    fields.push(Field::new(name, ty, true));
                }
            }
        }
    }
    let schema = Arc::new(Schema::new(fields));
    let local = StreamNode {
        kind: NodeKind::LocalAgg { group_exprs, calls },
        inputs: vec![input],
        visible: schema.fields().len(),
        schema,
        stream_key: (0..n_groups).collect(),
        dist: None,
    };
    (local, finals)
}

/// The column an expression is, if it is a plain column reference.
fn as_column(expr: &Arc<dyn PhysicalExpr>) -> Option<&Column> {
    let any: &dyn std::any::Any = expr.as_ref();
    any.downcast_ref::<Column>()
}

/// A column of a node's output as an expression.
fn column_expr(node: &StreamNode, index: usize) -> Arc<dyn PhysicalExpr> {
    Arc::new(Column::new(node.schema.field(index).name(), index))
}

/// Redistributes `input` by `keys`.
fn exchange(input: StreamNode, keys: Vec<Arc<dyn PhysicalExpr>>) -> StreamNode {
    let columns: Option<Vec<usize>> =
        keys.iter().map(|k| as_column(k).map(Column::index)).collect();
    StreamNode {
        schema: input.schema.clone(),
        visible: input.visible,
        stream_key: input.stream_key.clone(),
        dist: columns,
        kind: NodeKind::Exchange { keys },
        inputs: vec![input],
    }
}

struct Planner<'a> {
    state: &'a SessionState,
    catalog: &'a Catalog,
    slots: Vec<StateSlot>,
    /// The joins whose right side's columns nothing above reads (by address; see
    /// [`dynamic_filter::right_unread`]).
    right_unread: std::collections::HashSet<usize>,
}

impl Planner<'_> {
    fn lower(&mut self, plan: &LogicalPlan) -> Result<StreamNode> {
        match plan {
            LogicalPlan::TableScan(scan) => {
                let node = self.scan(scan.table_name.table(), scan.projection.as_deref())?;
                match scan.fetch {
                    // A LIMIT without ORDER BY pushed into the scan: any `n` rows, here the
                    // first by the stream key.
                    Some(limit) => {
                        let spec = TopNSpec {
                            group: Vec::new(),
                            order: Vec::new(),
                            offset: 0,
                            limit,
                            rank: false,
                        };
                        self.top_n_node(exchange(node, Vec::new()), spec)
                    }
                    None => Ok(node),
                }
            }
            LogicalPlan::Filter(filter) => {
                if let Some(node) = self.group_top_n(filter)? {
                    return Ok(node);
                }
                if let Some(node) = self.temporal_filter(filter)? {
                    return Ok(node);
                }
                let input = self.lower(&filter.input)?;
                let predicate = self.physical(&filter.predicate, filter.input.schema())?;
                let (schema, visible) = (input.schema.clone(), input.visible);
                let (stream_key, dist) = (input.stream_key.clone(), input.dist.clone());
                let kind = NodeKind::Filter { predicate };
                Ok(StreamNode { kind, inputs: vec![input], schema, visible, stream_key, dist })
            }
            LogicalPlan::Projection(projection) => {
                let input = self.lower(&projection.input)?;
                let exprs = projection
                    .expr
                    .iter()
                    .map(|e| self.physical(e, projection.input.schema()))
                    .collect::<Result<Vec<_>>>()?;
                Ok(with_hidden_key(
                    NodeKind::Project { exprs },
                    projection.schema.as_arrow(),
                    input,
                ))
            }
            LogicalPlan::SubqueryAlias(alias) => self.lower(&alias.input),
            LogicalPlan::Aggregate(agg) => {
                if let Some(node) = self.grouping_sets(agg)? {
                    return Ok(node);
                }
                match self.first_values(agg)? {
                    Some(node) => Ok(node),
                    None => self.aggregate(agg),
                }
            }
            LogicalPlan::Join(join) => self.join(join),
            // A view is a set of rows: its ORDER BY without LIMIT is left to the queries of it.
            LogicalPlan::Sort(sort) => match sort.fetch {
                Some(fetch) => self.top_n(&sort.input, &sort.expr, 0, fetch),
                None => self.lower(&sort.input),
            },
            LogicalPlan::Limit(limit) => self.limit(limit),
            LogicalPlan::Window(window) => self.over_window(window),
            LogicalPlan::Union(union) => self.union(union),
            LogicalPlan::Distinct(_) => Err(unsupported!("DISTINCT ON in a materialized view")),
            LogicalPlan::Values(_) | LogicalPlan::EmptyRelation(_) => {
                Err(unsupported!("a materialized view that reads no table"))
            }
            other => Err(unsupported!("{} in a materialized view", other.display())),
        }
    }

    fn physical(&self, expr: &Expr, schema: &DFSchema) -> Result<Arc<dyn PhysicalExpr>> {
        if temporal::reads_now(expr) {
            return Err(unsupported!("{expr}: {}", temporal::NOW_USE));
        }
        if is_volatile(expr) {
            return Err(unsupported!(
                "non-deterministic function in {expr} in a materialized view"
            ));
        }
        let physical = self.state.create_physical_expr(expr.clone(), schema)?;
        Ok(crate::sql::checked::checked(physical, schema.as_arrow())?)
    }

    fn slot(&mut self, slot: StateSlot) -> usize {
        self.slots.push(slot);
        self.slots.len() - 1
    }

    /// A scan outputs the projected visible columns, then the upstream's primary key, hidden.
    fn scan(&mut self, name: &str, projection: Option<&[usize]>) -> Result<StreamNode> {
        if self.catalog.source_by_name(name).is_some() {
            return Err(unsupported!(
                "a materialized view over the source {name}; create a table from it with \
                 CREATE TABLE t (..) FROM {name} TABLE 'schema.table' and use the table"
            ));
        }
        let table = self
            .catalog
            .table_by_name(name)
            .ok_or_else(|| Error::UnknownRelation { kind: "relation", name: name.to_owned() })?;
        if table.kind == RelationKind::Internal {
            return Err(Error::WrongObjectType(format!(
                "\"{name}\" is an internal table: it can be queried but not used in a view"
            )));
        }
        // The columns a scan's projection counts: the visible ones, then (a plan reading
        // display scales, see `crate::batch::display_scale`) those of their numerics.
        let mut visible = table.visible_indices();
        let scales: Vec<usize> = visible
            .iter()
            .filter_map(|&c| table.columns.iter().position(|x| x.scale_of == Some(c)))
            .collect();
        let n_exposed = visible.len();
        visible.extend(scales);
        let mut output: Vec<usize> = match projection {
            Some(p) => p.iter().map(|&i| visible[i]).collect(),
            None => visible[..n_exposed].to_vec(),
        };
        let n_visible = output.len();
        output.extend(table.pk.iter().copied());
        let fields: Vec<Field> = output
            .iter()
            .enumerate()
            .map(|(pos, &i)| {
                let column = &table.columns[i];
                match pos < n_visible {
                    true => {
                        column.mark(Field::new(&column.name, column.data_type.to_arrow(), true))
                    }
                    false => {
                        let name = format!("_key_{}", pos - n_visible);
                        Field::new(name, column.data_type.to_arrow(), true)
                    }
                }
            })
            .collect();
        let columns = crate::stream::executor::backfill::state::arrangement_columns(
            table.pk.iter().map(|&i| table.columns[i].clone()),
        );
        let progress = self.slot(StateSlot {
            purpose: StatePurpose::StreamScan,
            columns,
            pk: vec![0],
            dist_key_len: 1,
        });
        let stream_key: Vec<usize> = (n_visible..output.len()).collect();
        let dist = Some(stream_key[..table.dist_key_len].to_vec());
        Ok(StreamNode {
            dist,
            kind: NodeKind::Scan { table, output_indices: output, progress },
            inputs: Vec::new(),
            schema: Arc::new(Schema::new(fields)),
            visible: n_visible,
            stream_key,
        })
    }

    fn aggregate(&mut self, agg: &datafusion::logical_expr::Aggregate) -> Result<StreamNode> {
        let input = self.lower(&agg.input)?;
        let in_schema = agg.input.schema();
        let group_exprs = agg
            .group_expr
            .iter()
            .map(|e| self.physical(e, in_schema))
            .collect::<Result<Vec<_>>>()?;
        if matches!(agg.group_expr.first(), Some(Expr::GroupingSet(_))) {
            return Err(unsupported!("GROUPING SETS, CUBE and ROLLUP in a materialized view"));
        }
        let out = agg.schema.as_arrow().clone();
        let n_groups = group_exprs.len();
        if out.fields().iter().take(n_groups).any(|f| f.data_type() == &ArrowType::Null) {
            return Err(unsupported!(
                "GROUP BY an untyped NULL in a materialized view; give it a type (NULL::int)"
            ));
        }
        let group_columns: Vec<ColumnCatalog> = (0..n_groups)
            .map(|i| column(&format!("group_{i}"), out.field(i).data_type()))
            .collect::<Result<_>>()?;
        let mut result_columns = group_columns.clone();
        result_columns.push(column("row_count", &ArrowType::Int64)?);
        let mut calls = Vec::with_capacity(agg.aggr_expr.len());
        for (i, expr) in agg.aggr_expr.iter().enumerate() {
            let output_type = out.field(n_groups + i).data_type().clone();
            let CallExpr { kind, arg, distinct, listing } = agg_call(expr)?;
            if output_type == ArrowType::Null {
                // State tables store typed values; an untyped NULL has none to store.
                return Err(unsupported!(
                    "{expr} over an untyped NULL in a materialized view; give it a type \
                     (NULL::int)"
                ));
            }
            let arg = self.physical(&arg, in_schema)?;
            let listing = match listing {
                Some((separator, order)) => {
                    Some(Listing { separator, order: self.sort_keys(&order, in_schema)? })
                }
                None => None,
            };
            // min and max keep their values as their output type, DISTINCT calls and
            // string_agg as their argument's (string_agg after its order's bytes).
            let value_type = match kind {
                AggKind::Min | AggKind::Max => Some(output_type.clone()),
                // Added up as floats, as the batch engine's variance does.
                kind if kind.spreads() => Some(ArrowType::Float64),
                _ if distinct || listing.is_some() => Some(arg.data_type(in_schema.as_arrow())?),
                _ => None,
            };
            let multiset = match value_type {
                Some(value_type) => {
                    let mut columns = group_columns.clone();
                    if listing.is_some() {
                        columns.push(column("_order", &ArrowType::Binary)?);
                    }
                    columns.push(column("value", &value_type)?);
                    columns.push(column("count", &ArrowType::Int64)?);
                    let pk = (0..columns.len() - 1).collect();
                    Some(self.slot(StateSlot {
                        purpose: StatePurpose::HashAggValues,
                        columns,
                        pk,
                        dist_key_len: n_groups,
                    }))
                }
                None => None,
            };
            match kind {
                AggKind::Count => {
                    result_columns.push(column(&format!("count_{i}"), &ArrowType::Int64)?)
                }
                AggKind::Sum | AggKind::Avg => {
                    let arg_type = arg.data_type(in_schema.as_arrow())?;
                    for (name, ty) in SumLayout::new(kind, &output_type, &arg_type).columns(i) {
                        result_columns.push(column(&name, &ty)?);
                    }
                }
                _ => result_columns.push(column(&format!("extreme_{i}"), &output_type)?),
            }
            calls.push(AggCallPlan { kind, arg, output_type, multiset, distinct, listing });
        }
        let pk = (0..n_groups).collect();
        let result = self.slot(StateSlot {
            purpose: StatePurpose::HashAgg,
            columns: result_columns,
            pk,
            dist_key_len: n_groups,
        });
        // A partial aggregate holds its groups while the job creates, if it finds a group's
        // stored row in the vnode the exchange sent it by (its key columns typed as its input).
        let hold = is_partial(agg)
            && group_exprs.iter().zip(out.fields()).all(|(e, f)| {
                e.data_type(in_schema.as_arrow()).ok().as_ref() == Some(f.data_type())
            });
        let schema = Arc::new(relaxed(&out));
        // Two phases where the exchange would carry every row and each call's state adds up
        // (docs/backfill.md, "Two-phase aggregation"). Not over float group keys: the local
        // phase would keep 0 and -0 apart, and the group would show whichever came first.
        let two_phase = !group_exprs.is_empty()
            && calls.iter().all(|c| !c.distinct && partial_state_adds_up(c.kind, &c.output_type))
            && !out.fields()[..n_groups].iter().any(|f| f.data_type().is_floating())
            && !distributed_by(&input, &group_exprs);
        let (input, group_exprs, calls, merge) = match two_phase {
            false => (exchange(input, group_exprs.clone()), group_exprs, calls, false),
            true => {
                let input = without_scan_key(input, &group_exprs, &calls);
                let (local, finals) = local_agg(input, group_exprs, calls, &out);
                let groups: Vec<_> = (0..n_groups).map(|i| column_expr(&local, i)).collect();
                (exchange(local, groups.clone()), groups, finals, true)
            }
        };
        Ok(StreamNode {
            kind: NodeKind::HashAgg { group_exprs, calls, result, hold, merge },
            inputs: vec![input],
            visible: schema.fields().len(),
            schema,
            stream_key: (0..n_groups).collect(),
            dist: Some((0..n_groups).collect()),
        })
    }

    /// `UNION ALL`: every input is projected to `visible columns ++ branch ++ key slots`, where
    /// the key slots hold each branch's stream key (NULL in the other branches' rows).
    fn union(&mut self, union: &datafusion::logical_expr::Union) -> Result<StreamNode> {
        let inputs = union.inputs.iter().map(|i| self.lower(i)).collect::<Result<Vec<_>>>()?;
        let visible: Vec<Field> =
            relaxed(union.schema.as_arrow()).fields().iter().map(|f| f.as_ref().clone()).collect();
        let n_visible = visible.len();
        let mut fields = visible;
        fields.push(Field::new("_union_branch", ArrowType::Int32, true));
        let mut slots = Vec::new();
        for (b, input) in inputs.iter().enumerate() {
            for (k, &col) in input.stream_key.iter().enumerate() {
                let data_type = input.schema.field(col).data_type().clone();
                slots.push((b, col, data_type.clone()));
                fields.push(Field::new(format!("_union_key_{b}_{k}"), data_type, true));
            }
        }
        let schema = Arc::new(Schema::new(fields));
        let mut branches = Vec::with_capacity(inputs.len());
        for (b, input) in inputs.into_iter().enumerate() {
            if input.visible != n_visible {
                return Err(unsupported!("UNION inputs with different column counts"));
            }
            let mut exprs: Vec<Arc<dyn PhysicalExpr>> =
                (0..n_visible).map(|i| column_expr(&input, i)).collect();
            exprs.push(Arc::new(Literal::new(ScalarValue::Int32(Some(b as i32)))));
            // Each branch fills its own key slots; the other branches' slots are NULL of the
            // other branch's key type.
            for (branch, col, data_type) in &slots {
                exprs.push(if *branch == b {
                    column_expr(&input, *col)
                } else {
                    Arc::new(Literal::new(ScalarValue::try_from(data_type)?))
                });
            }
            let stream_key = (n_visible..schema.fields().len()).collect();
            branches.push(StreamNode {
                kind: NodeKind::Project { exprs },
                inputs: vec![input],
                schema: schema.clone(),
                visible: n_visible,
                stream_key,
                dist: None,
            });
        }
        Ok(StreamNode {
            kind: NodeKind::Union,
            inputs: branches,
            visible: n_visible,
            stream_key: (n_visible..schema.fields().len()).collect(),
            schema,
            dist: None,
        })
    }
}

/// A projection's node: its own columns, then the input's stream key carried along hidden.
fn with_hidden_key(kind: NodeKind, visible: &Schema, input: StreamNode) -> StreamNode {
    let NodeKind::Project { mut exprs } = kind else { unreachable!("only projections carry keys") };
    let mut fields: Vec<Field> =
        relaxed(visible).fields().iter().map(|f| f.as_ref().clone()).collect();
    let n_visible = fields.len();
    for (k, &i) in input.stream_key.iter().enumerate() {
        let field = input.schema.field(i);
        exprs.push(Arc::new(Column::new(field.name(), i)));
        fields.push(Field::new(format!("_key_{k}"), field.data_type().clone(), true));
    }
    let stream_key = (n_visible..fields.len()).collect();
    // The input's distribution survives where its columns are carried over unchanged.
    let position_of = |input_col: usize| {
        exprs.iter().position(|e| as_column(e).is_some_and(|c| c.index() == input_col))
    };
    let dist = input.dist.as_ref().and_then(|d| d.iter().map(|&c| position_of(c)).collect());
    StreamNode {
        kind: NodeKind::Project { exprs },
        inputs: vec![input],
        schema: Arc::new(Schema::new(fields)),
        visible: n_visible,
        stream_key,
        dist,
    }
}

/// The same fields, all nullable (a retraction may carry NULLs anywhere).
fn relaxed(schema: &Schema) -> Schema {
    Schema::new(
        schema.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>(),
    )
}

fn column(name: &str, ty: &ArrowType) -> Result<ColumnCatalog> {
    Ok(ColumnCatalog::new(name.to_owned(), DataType::from_arrow(ty)?))
}

/// An aggregate call of a view's query, as far as the expression tells it.
struct CallExpr {
    kind: AggKind,
    /// The argument, `FILTER (WHERE c)` folded in as `CASE WHEN c THEN arg END` (a row the
    /// filter drops adds a NULL, which no aggregate counts).
    arg: Expr,
    distinct: bool,
    /// For `string_agg`: the separator and the `ORDER BY` inside the call.
    listing: Option<(String, Vec<datafusion::logical_expr::SortExpr>)>,
}

/// The function, argument and options of an aggregate expression.
fn agg_call(expr: &Expr) -> Result<CallExpr> {
    let expr = match expr {
        Expr::Alias(alias) => alias.expr.as_ref(),
        other => other,
    };
    let Expr::AggregateFunction(f) = expr else {
        return Err(unsupported!("aggregate expression {expr} in a materialized view"));
    };
    let p = &f.params;
    let name = f.func.name();
    if !p.order_by.is_empty() && name != "string_agg" && name != "array_agg" {
        return Err(unsupported!("{expr} (ORDER BY in an aggregate) in a materialized view"));
    }
    let kind = match name {
        "count" => AggKind::Count,
        "sum" => AggKind::Sum,
        "avg" => AggKind::Avg,
        "min" => AggKind::Min,
        "max" => AggKind::Max,
        // false < true: every value is true when the least is, some is when the greatest is.
        "bool_and" => AggKind::Min,
        "bool_or" => AggKind::Max,
        "string_agg" => AggKind::StringAgg,
        "array_agg" => AggKind::ArrayAgg,
        "var" | "var_samp" | "var_sample" => AggKind::VarSamp,
        "var_pop" | "var_population" => AggKind::VarPop,
        "stddev" | "stddev_samp" => AggKind::StddevSamp,
        "stddev_pop" => AggKind::StddevPop,
        other => return Err(unsupported!("the aggregate {other} in a materialized view")),
    };
    let (arg, listing) = match (kind, p.args.as_slice()) {
        (AggKind::StringAgg, [arg, Expr::Literal(separator, _)]) if !p.distinct => {
            let separator = match separator {
                ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => {
                    s.clone().unwrap_or_default()
                }
                _ => return Err(unsupported!("{expr} with a separator that is not text")),
            };
            (arg.clone(), Some((separator, p.order_by.clone())))
        }
        (AggKind::ArrayAgg, [arg]) if !p.distinct => {
            // Without an order, by value with NULLs last, as Postgres's DISTINCT sorts them.
            let order = match p.order_by.is_empty() {
                true => vec![arg.clone().sort(true, false)],
                false => p.order_by.clone(),
            };
            (arg.clone(), Some((String::new(), order)))
        }
        (AggKind::ArrayAgg, _) => {
            return Err(unsupported!(
                "{expr} in a materialized view (array_agg(x [ORDER BY ..]) without DISTINCT is)"
            ));
        }
        (AggKind::StringAgg, _) => {
            return Err(unsupported!(
                "{expr} in a materialized view (string_agg(x, 'separator' [ORDER BY ..]) with \
                 a constant separator and without DISTINCT is)"
            ));
        }
        (_, [arg]) => (arg.clone(), None),
        (_, []) => (Expr::Literal(datafusion::scalar::ScalarValue::Int64(Some(1)), None), None),
        _ => return Err(unsupported!("{expr} with several arguments in a materialized view")),
    };
    let arg = match &p.filter {
        Some(filter) => datafusion::logical_expr::when(filter.as_ref().clone(), arg).end()?,
        None => arg,
    };
    // The least and greatest of the distinct values are those of all values.
    let distinct = p.distinct
        && (matches!(kind, AggKind::Count | AggKind::Sum | AggKind::Avg) || kind.spreads());
    Ok(CallExpr { kind, arg, distinct, listing })
}

/// Fails if the plan calls a function whose result may change between evaluations (`now()`,
/// `random()`, ...). Checked before optimization, which folds such calls into constants.
pub fn check_deterministic(plan: &LogicalPlan) -> Result<()> {
    let mut found = None;
    plan.apply(|node| {
        node.apply_expressions(|e| {
            if found.is_none() && is_volatile(e) {
                found = Some(e.to_string());
            }
            Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
        })
    })?;
    match found {
        Some(expr) => {
            Err(unsupported!("the non-deterministic function in {expr} in a materialized view"))
        }
        None => Ok(()),
    }
}

/// True if evaluating `expr` twice may give different results (now(), random(), ...).
fn is_volatile(expr: &Expr) -> bool {
    let mut volatile = false;
    let _ = expr.apply(|e| {
        if let Expr::ScalarFunction(f) = e
            && f.func.signature().volatility != datafusion::logical_expr::Volatility::Immutable
            && f.func.inner().downcast_ref::<temporal::BarrierNow>().is_none()
        {
            volatile = true;
        }
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    });
    volatile
}
