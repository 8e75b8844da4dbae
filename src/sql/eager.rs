//! Eager aggregation: a view's aggregate over an inner join first aggregates the join side its
//! functions read, grouped by that side's join keys (and its own group-by columns), so the join
//! meets one row per partial group instead of one per input row ("eager group-by", Yan and
//! Larson, VLDB 1995).
//!
//! ```text
//! Aggregate [dim.name] count(*), sum(t.a)       Projection (the same names and types)
//!   Join t.b = dim.id                     =>      Aggregate [dim.name] sum(c), sum(s)
//!     t                                             Join t.b = dim.id
//!     dim                                             Aggregate [t.b] count(*) AS c, sum(t.a) AS s
//!                                                       t
//!                                                     dim
//! ```
//!
//! Every row of `t` in a partial group joins the same rows of `dim` (the group holds its join
//! key), so a partial group joined to `k` rows stands for its `n` rows joined to `k` rows each,
//! and the final aggregate adds up what the original one would have counted and summed:
//! `count` becomes a `sum` of partial counts, `sum` a sum of partial sums, `min` and `max` take
//! the extreme of the partial ones. It applies when
//! - the join is inner, on equalities of columns, with no other condition;
//! - the aggregate groups by columns (at least one: a global `count` of nothing is 0, a sum of
//!   no partial counts NULL) and calls only `count`, `sum` of integers or numerics (a float sum
//!   added up in another order may differ in its last bits), `min` and `max`, without
//!   `DISTINCT`, `FILTER` or `ORDER BY`;
//! - every argument reads one side (with no argument, as `count(*)`, the side that holds none
//!   of the group-by columns, else the left one);
//! - that side is not already unique by the partial group: when it is a table scan whose
//!   primary key is among the partial group's columns, each group is one row, and the rewrite
//!   would only add state;
//! - nor nearly so: when it is a scan of a table of [`MIN_SAMPLED_ROWS`] rows or more, whose
//!   sampled rows (`crate::engine::stats`) have fewer than [`MIN_ROWS_PER_GROUP`] rows per
//!   value of the partial group's columns, the partial aggregate would keep about as many
//!   groups as the side has rows, and every group read back and written at each change costs
//!   more than the join rows it saves (an order's lines grouped by order: the partial groups
//!   of a 6 M-row table are 1.5 M).
//!
//! Streaming, the partial aggregate retracts and re-emits a group's row when the group changes,
//! and the join and final aggregate take those as they take any update, so the view stays
//! exact under changes too. Views record whether they were planned with the rewrite, so a
//! restart plans them as they were created.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema, Result as DfResult};
use datafusion::logical_expr::expr::{AggregateFunction, Cast};
use datafusion::logical_expr::{
    Aggregate, Expr, ExprSchemable, Join, JoinType, LogicalPlan, Projection,
};

use crate::catalog::{Catalog, TableCatalog};
use crate::error::Result;

/// Tables with fewer rows are pre-aggregated whatever their groups (see the module docs).
pub const MIN_SAMPLED_ROWS: u64 = 50_000;

/// The fewest rows per partial group, estimated, for which a side is pre-aggregated.
pub const MIN_ROWS_PER_GROUP: f64 = 10.0;

/// The average rows of a table per distinct value of some of its columns (by index), when it
/// is known.
pub type RowsPerGroup<'a> = &'a dyn Fn(&TableCatalog, &[usize]) -> Option<f64>;

/// The prefix of the partial aggregates' output names.
const PARTIAL: &str = "__eager_";

/// True if `agg` is a partial aggregate this rewrite added.
pub fn is_partial(agg: &Aggregate) -> bool {
    agg.aggr_expr.iter().any(|e| e.schema_name().to_string().starts_with(PARTIAL))
}

/// `plan` with every aggregate over an inner join that qualifies pre-aggregated (see the module
/// docs).
pub fn eager_aggregation(
    plan: LogicalPlan,
    catalog: &Catalog,
    rows_per_group: RowsPerGroup<'_>,
) -> Result<LogicalPlan> {
    let rewritten = plan.transform_up(|node| match rewrite(&node, catalog, rows_per_group)? {
        Some(new) => Ok(Transformed::yes(new)),
        None => Ok(Transformed::no(node)),
    })?;
    Ok(rewritten.data)
}

/// How the final aggregate combines the partial results of one call.
#[derive(Clone, Copy, PartialEq)]
enum Combine {
    /// `count` and `sum`: add them up.
    Sum,
    /// `min` and `max`: the same function over the partial results.
    Same,
}

/// One aggregate call of the original aggregate.
struct Call {
    /// The call, without its alias.
    expr: AggregateFunction,
    combine: Combine,
}

/// The join side the partial aggregate goes under.
#[derive(Clone, Copy, PartialEq)]
enum Side {
    Left,
    Right,
}

fn rewrite(
    node: &LogicalPlan,
    catalog: &Catalog,
    rows_per_group: RowsPerGroup<'_>,
) -> DfResult<Option<LogicalPlan>> {
    let LogicalPlan::Aggregate(agg) = node else { return Ok(None) };
    let join = match agg.input.as_ref() {
        LogicalPlan::Join(join) => join,
        LogicalPlan::Projection(p) if p.expr.iter().all(|e| matches!(e, Expr::Column(_))) => {
            match p.input.as_ref() {
                LogicalPlan::Join(join) => join,
                _ => return Ok(None),
            }
        }
        _ => return Ok(None),
    };
    if join.join_type != JoinType::Inner || join.filter.is_some() || join.on.is_empty() {
        return Ok(None);
    }
    let Some(groups) = plain_columns(&agg.group_expr) else { return Ok(None) };
    if groups.is_empty() {
        return Ok(None);
    }
    let Some(calls) = calls(agg)? else { return Ok(None) };
    let (left, right) = (join.left.schema(), join.right.schema());
    let read: Vec<Column> = calls
        .iter()
        .flat_map(|c| c.expr.params.args.iter())
        .flat_map(|a| a.column_refs())
        .cloned()
        .collect();
    let side = if read.iter().any(|c| !left.has_column(c)) {
        if read.iter().all(|c| right.has_column(c)) { Side::Right } else { return Ok(None) }
    } else if read.is_empty() && groups.iter().all(|g| left.has_column(g)) {
        Side::Right
    } else {
        Side::Left
    };
    let (pre, pre_schema) = match side {
        Side::Left => (&join.left, left),
        Side::Right => (&join.right, right),
    };
    let keys = join.on.iter().map(|(l, r)| if side == Side::Left { l } else { r });
    let Some(keys) = plain_columns(&keys.cloned().collect::<Vec<_>>()) else { return Ok(None) };
    let mut partial_groups = keys;
    for group in &groups {
        if pre_schema.has_column(group) && !partial_groups.contains(group) {
            partial_groups.push(group.clone());
        }
    }
    if few_rows_per_group(pre, &partial_groups, catalog, rows_per_group) {
        return Ok(None);
    }
    let partial_calls = calls
        .iter()
        .enumerate()
        .map(|(i, c)| Expr::AggregateFunction(c.expr.clone()).alias(format!("{PARTIAL}{i}")));
    let partial = Aggregate::try_new(
        pre.clone(),
        partial_groups.into_iter().map(Expr::Column).collect(),
        partial_calls.collect(),
    )?;
    let partial = Arc::new(LogicalPlan::Aggregate(partial));
    let (new_left, new_right) = match side {
        Side::Left => (partial, join.right.clone()),
        Side::Right => (join.left.clone(), partial),
    };
    let joined = Join::try_new(
        new_left,
        new_right,
        join.on.clone(),
        None,
        JoinType::Inner,
        join.join_constraint,
        join.null_equality,
        join.null_aware,
    )?;
    let sum = datafusion::functions_aggregate::sum::sum_udaf();
    let final_calls = calls.iter().enumerate().map(|(i, call)| {
        let partial = Expr::Column(Column::new_unqualified(format!("{PARTIAL}{i}")));
        let func = match call.combine {
            Combine::Sum => sum.clone(),
            Combine::Same => call.expr.func.clone(),
        };
        Expr::AggregateFunction(AggregateFunction::new_udf(
            func,
            vec![partial],
            false,
            None,
            vec![],
            None,
        ))
    });
    let combined = Aggregate::try_new(
        Arc::new(LogicalPlan::Join(joined)),
        agg.group_expr.clone(),
        final_calls.collect(),
    )?;
    let combined = LogicalPlan::Aggregate(combined);
    // The original aggregate's output, column for column: same names, same types.
    let combined_schema = combined.schema().clone();
    let outputs = combined_schema.columns().into_iter().enumerate().zip(agg.schema.iter()).map(
        |((i, column), (qualifier, field))| {
            let mut expr = Expr::Column(column);
            if combined_schema.field(i).data_type() != field.data_type() {
                expr = Expr::Cast(Cast::new(Box::new(expr), field.data_type().clone()));
            }
            expr.alias_qualified(qualifier.cloned(), field.name())
        },
    );
    let outputs = outputs.collect();
    Ok(Some(LogicalPlan::Projection(Projection::try_new(outputs, Arc::new(combined))?)))
}

/// The columns `exprs` are, if each is a plain column.
fn plain_columns(exprs: &[Expr]) -> Option<Vec<Column>> {
    exprs
        .iter()
        .map(|e| match e {
            Expr::Column(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

/// The calls of `agg`, if every one can be combined from partial results.
fn calls(agg: &Aggregate) -> DfResult<Option<Vec<Call>>> {
    let input: &DFSchema = agg.input.schema();
    let mut calls = Vec::with_capacity(agg.aggr_expr.len());
    for expr in &agg.aggr_expr {
        let expr = match expr {
            Expr::Alias(alias) => alias.expr.as_ref(),
            other => other,
        };
        let Expr::AggregateFunction(f) = expr else { return Ok(None) };
        let p = &f.params;
        if p.distinct || p.filter.is_some() || !p.order_by.is_empty() || p.args.len() > 1 {
            return Ok(None);
        }
        let combine = match f.func.name() {
            "count" => Combine::Sum,
            "sum" => {
                let Some(arg) = p.args.first() else { return Ok(None) };
                let exact = arg.get_type(input)?.is_integer()
                    || matches!(arg.get_type(input)?, arrow::datatypes::DataType::Decimal128(..));
                if !exact {
                    return Ok(None);
                }
                Combine::Sum
            }
            "min" | "max" => Combine::Same,
            _ => return Ok(None),
        };
        calls.push(Call { expr: f.clone(), combine });
    }
    Ok(Some(calls))
}

/// Whether `plan` (a table scan under filters and column projections) has at most one row per
/// value of `columns` (they hold its table's primary key), or too few to pre-aggregate (see
/// the module docs).
fn few_rows_per_group(
    plan: &LogicalPlan,
    columns: &[Column],
    catalog: &Catalog,
    rows_per_group: RowsPerGroup<'_>,
) -> bool {
    let scan = match plan {
        LogicalPlan::TableScan(scan) => scan,
        LogicalPlan::Filter(filter) => {
            return few_rows_per_group(&filter.input, columns, catalog, rows_per_group);
        }
        LogicalPlan::SubqueryAlias(alias) => {
            return few_rows_per_group(&alias.input, columns, catalog, rows_per_group);
        }
        LogicalPlan::Projection(p) if p.expr.iter().all(|e| matches!(e, Expr::Column(_))) => {
            return few_rows_per_group(&p.input, columns, catalog, rows_per_group);
        }
        _ => return false,
    };
    let Some(table) = catalog.table_by_name(scan.table_name.table()) else { return false };
    // The columns are all of this one scan's (the side's) schema: their names are its own.
    let names: HashSet<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    if table.pk.iter().all(|&i| names.contains(table.columns[i].name.as_str())) {
        return true;
    }
    let indices: Option<Vec<usize>> =
        columns.iter().map(|c| table.columns.iter().position(|t| t.name == c.name)).collect();
    let Some(indices) = indices else { return false };
    rows_per_group(&table, &indices).is_some_and(|rows| rows < MIN_ROWS_PER_GROUP)
}
