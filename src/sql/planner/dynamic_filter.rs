//! Lowering a comparison with a one-row subquery (`WHERE a > (SELECT avg(a) FROM t)`) to a
//! dynamic filter rather than a cross join.
//!
//! DataFusion plans an uncorrelated scalar subquery as an inner join without key equalities
//! whose condition compares the rows with the subquery's one row. When that condition is one
//! comparison of a left expression with a right one, the right side is one row (an aggregate
//! without `GROUP BY`), and nothing above reads the right side's columns, the join is a
//! [`DynamicFilter`](crate::stream::executor::dynamic_filter): it outputs the left rows alone,
//! at the same column positions, which is all its parent reads.

use std::collections::HashSet;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::logical_expr::{BinaryExpr, ExprSchemable, Operator};

use super::*;
use crate::catalog::TableCatalog;
use crate::stream::executor::dynamic_filter::DynamicCondition;

/// The joins of `plan` whose right side's columns nothing above reads (their addresses): the
/// input of a projection or an aggregation that reads left columns only.
pub(super) fn right_unread(plan: &LogicalPlan) -> HashSet<usize> {
    let mut unread = HashSet::new();
    let _ = plan.apply(|node| {
        let (exprs, input): (Vec<&Expr>, &LogicalPlan) = match node {
            LogicalPlan::Projection(p) => (p.expr.iter().collect(), &p.input),
            LogicalPlan::Aggregate(a) => {
                (a.group_expr.iter().chain(&a.aggr_expr).collect(), &a.input)
            }
            _ => return Ok(TreeNodeRecursion::Continue),
        };
        if let LogicalPlan::Join(join) = input {
            let left_width = join.left.schema().fields().len();
            let reads_right = exprs.iter().any(|e| {
                e.column_refs()
                    .iter()
                    .any(|c| join.schema.index_of_column(c).map_or(true, |i| i >= left_width))
            });
            if !reads_right {
                unread.insert(std::ptr::from_ref(join) as usize);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    unread
}

/// Whether `plan` outputs at most one row.
fn one_row(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Aggregate(agg) => agg.group_expr.is_empty(),
        LogicalPlan::Projection(p) => one_row(&p.input),
        LogicalPlan::SubqueryAlias(a) => one_row(&a.input),
        LogicalPlan::Filter(f) => one_row(&f.input),
        _ => false,
    }
}

/// The table a scan reads, when `node` is the scan or filters over it: its rows come to each
/// actor by the vnodes of the table's distribution key (its leading primary-key columns, which
/// the scan outputs first among its stream key).
fn scanned_table(node: &StreamNode) -> Option<&TableCatalog> {
    match &node.kind {
        NodeKind::Scan { table, .. } => {
            let key_first = table.pk.len() == node.stream_key.len();
            key_first.then_some(table.as_ref())
        }
        NodeKind::Filter { .. } => scanned_table(&node.inputs[0]),
        _ => None,
    }
}

/// `op` with its sides swapped: `a op b` is `b (flipped op) a`.
fn flipped(op: Operator) -> Option<Operator> {
    Some(match op {
        Operator::Lt => Operator::Gt,
        Operator::LtEq => Operator::GtEq,
        Operator::Gt => Operator::Lt,
        Operator::GtEq => Operator::LtEq,
        _ => return None,
    })
}

/// The plan of the join's left side with the dynamic filter moved below the join under it,
/// when that join keeps the rows of its own left side unchanged (a semi, anti, inner or left
/// outer join, maybe under a projection) and the compared value reads only that side: there
/// the filter commutes with the join and the join then stores only the rows that pass (in
/// `WHERE NOT EXISTS (..) AND a > (SELECT ..)` the anti join stored every row).
fn pushed_below(
    join: &datafusion::logical_expr::Join,
    value: &Expr,
) -> Result<Option<LogicalPlan>> {
    use datafusion::logical_expr::{LogicalPlanBuilder, Projection};
    let (projection, below) = match join.left.as_ref() {
        LogicalPlan::Projection(p) => match p.input.as_ref() {
            LogicalPlan::Join(below) => (Some(p), below),
            _ => return Ok(None),
        },
        LogicalPlan::Join(below) => (None, below),
        _ => return Ok(None),
    };
    let keeps_left_rows = matches!(
        below.join_type,
        JoinType::Inner | JoinType::Left | JoinType::LeftSemi | JoinType::LeftAnti
    );
    let side = below.left.schema();
    if !keeps_left_rows || !value.column_refs().iter().all(|c| side.index_of_column(c).is_ok()) {
        return Ok(None);
    }
    let filtered = LogicalPlanBuilder::from(below.left.as_ref().clone())
        .join_on(join.right.as_ref().clone(), JoinType::Inner, join.filter.clone())?
        .project(side.columns().into_iter().map(Expr::Column))?
        .build()?;
    if filtered.schema().as_arrow() != side.as_arrow() {
        return Ok(None);
    }
    let mut below = below.clone();
    below.left = Arc::new(filtered);
    let mut plan = LogicalPlan::Join(below);
    if let Some(p) = projection {
        let input = Arc::new(plan);
        plan = LogicalPlan::Projection(Projection::try_new_with_schema(
            p.expr.clone(),
            input,
            p.schema.clone(),
        )?);
    }
    Ok(Some(plan))
}

impl Planner<'_> {
    /// The join as a dynamic filter, when it is one (see the module docs).
    pub(super) fn dynamic_filter(
        &mut self,
        join: &datafusion::logical_expr::Join,
    ) -> Result<Option<StreamNode>> {
        if join.join_type != JoinType::Inner
            || !join.on.is_empty()
            || !self.right_unread.contains(&(std::ptr::from_ref(join) as usize))
            || !one_row(&join.right)
        {
            return Ok(None);
        }
        let Some(Expr::BinaryExpr(BinaryExpr { left: a, op, right: b })) = &join.filter else {
            return Ok(None);
        };
        let (left_schema, right_schema) = (join.left.schema(), join.right.schema());
        let reads_only = |e: &Expr, schema: &DFSchema| {
            e.column_refs().iter().all(|c| schema.index_of_column(c).is_ok())
        };
        let (value, op, threshold) = if reads_only(a, left_schema) && reads_only(b, right_schema) {
            (a, *op, b)
        } else if reads_only(b, left_schema) && reads_only(a, right_schema) {
            let Some(op) = flipped(*op) else { return Ok(None) };
            (b, op, a)
        } else {
            return Ok(None);
        };
        if flipped(op).is_none() {
            return Ok(None);
        }
        let value_type = value.get_type(left_schema)?;
        if threshold.get_type(right_schema)? != value_type || column("_value", &value_type).is_err()
        {
            return Ok(None);
        }
        if let Some(plan) = pushed_below(join, value)? {
            // The new joins' addresses are known while the plan lives: forgotten after.
            let added: Vec<usize> =
                right_unread(&plan).difference(&self.right_unread).copied().collect();
            self.right_unread.extend(&added);
            let node = self.lower(&plan);
            for address in added {
                self.right_unread.remove(&address);
            }
            return node.map(Some);
        }
        let condition = DynamicCondition {
            value: self.physical(value, left_schema)?,
            op,
            threshold: self.physical(threshold, right_schema)?,
        };
        let left = self.lower(&join.left)?;
        // Rows are placed by the keys they were routed by: those of an exchange right below,
        // those of the table a scan (maybe filtered) reads, else an exchange's by the stream key.
        let (left, dist) = match (&left.kind, scanned_table(&left)) {
            (NodeKind::Exchange { keys }, _) => {
                let keys = keys.clone();
                (left, keys)
            }
            (_, Some(table)) => {
                let keys = left.stream_key[..table.dist_key_len]
                    .iter()
                    .map(|&i| column_expr(&left, i))
                    .collect();
                (left, keys)
            }
            _ => {
                let keys: Vec<_> = left.stream_key.iter().map(|&i| column_expr(&left, i)).collect();
                (exchange(left, keys.clone()), keys)
            }
        };
        let right = self.lower(&join.right)?;
        let right = StreamNode {
            schema: right.schema.clone(),
            visible: right.visible,
            stream_key: right.stream_key.clone(),
            dist: None,
            kind: NodeKind::Broadcast,
            inputs: vec![right],
        };
        let mut columns = vec![column("_value", &value_type)?];
        for field in left.schema.fields() {
            columns.push(column(field.name(), field.data_type())?);
        }
        let mut pk = vec![0];
        pk.extend(left.stream_key.iter().map(|&k| k + 1));
        let rows = self.slot(StateSlot {
            purpose: StatePurpose::DynamicFilterLeft,
            columns,
            pk,
            dist_key_len: 0,
        });
        let threshold = self.slot(StateSlot {
            purpose: StatePurpose::DynamicFilterRight,
            columns: vec![column("_key", &ArrowType::Int32)?, column("_threshold", &value_type)?],
            pk: vec![0],
            dist_key_len: 0,
        });
        Ok(Some(StreamNode {
            kind: NodeKind::DynamicFilter { condition, dist, tables: [rows, threshold] },
            schema: left.schema.clone(),
            visible: left.visible,
            stream_key: left.stream_key.clone(),
            dist: left.dist.clone(),
            inputs: vec![left, right],
        }))
    }
}
