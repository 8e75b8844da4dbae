//! Arithmetic that fails on overflow, as Postgres's does.
//!
//! DataFusion plans `+`, `-` and `*` as wrapping operations: `2147483647::int + 1` would be
//! `-2147483648`. Postgres raises `integer out of range` (22003) instead, and a streaming
//! database that silently wraps a sum would store a wrong value forever. Every expression
//! Sluice evaluates goes through [`checked`]: batch plans through the
//! [`CheckedArithmetic`] physical optimizer rule, streaming plans where the planner builds
//! their physical expressions. (Streaming evaluation is non-strict: the failing row gets NULL,
//! see `stream::eval`.)

use std::sync::Arc;

use arrow::datatypes::Schema;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::error::Result;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{BinaryExpr, Literal, NegativeExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::scalar::ScalarValue;

/// `expr` (over rows of `schema`) with every `+`, `-` and `*`, and the negation of an integer,
/// failing on overflow instead of wrapping, and arithmetic over numerics answering as Postgres
/// where a value is `NaN` or infinite ([`crate::sql::special_arith`]).
pub fn checked(expr: Arc<dyn PhysicalExpr>, schema: &Schema) -> Result<Arc<dyn PhysicalExpr>> {
    expr.transform_up(|e| {
        let e = overflow_checked(e, schema)?;
        match crate::sql::special_arith::guarded(&e.data, schema)? {
            Some(guarded) => Ok(Transformed::yes(guarded)),
            None => Ok(e),
        }
    })
    .data()
}

/// `e` failing on overflow, if it is `+`, `-`, `*` or an integer's negation.
fn overflow_checked(
    e: Arc<dyn PhysicalExpr>,
    schema: &Schema,
) -> Result<Transformed<Arc<dyn PhysicalExpr>>> {
    {
        if let Some(negative) = e.downcast_ref::<NegativeExpr>() {
            // `-x` as `0 - x`: the negation of the smallest integer overflows.
            let ty = negative.arg().data_type(schema)?;
            if !ty.is_signed_integer() {
                return Ok(Transformed::no(e));
            }
            let zero = Arc::new(Literal::new(ScalarValue::new_zero(&ty)?));
            let rebuilt = BinaryExpr::new(zero, Operator::Minus, Arc::clone(negative.arg()))
                .with_fail_on_overflow(true);
            return Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn PhysicalExpr>));
        }
        let Some(binary) = e.downcast_ref::<BinaryExpr>() else {
            return Ok(Transformed::no(e));
        };
        if !matches!(binary.op(), Operator::Plus | Operator::Minus | Operator::Multiply) {
            return Ok(Transformed::no(e));
        }
        let rebuilt =
            BinaryExpr::new(Arc::clone(binary.left()), *binary.op(), Arc::clone(binary.right()))
                .with_fail_on_overflow(true);
        Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn PhysicalExpr>))
    }
}

/// The physical optimizer rule that makes a batch plan's projections, filters and aggregate
/// arguments use [`checked`] arithmetic.
#[derive(Debug, Default)]
pub struct CheckedArithmetic;

impl PhysicalOptimizerRule for CheckedArithmetic {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            if let Some(projection) = node.downcast_ref::<ProjectionExec>() {
                let exprs = projection
                    .expr()
                    .iter()
                    .map(|p| {
                        let expr = checked(Arc::clone(&p.expr), &projection.input().schema())?;
                        Ok(ProjectionExpr::new(expr, p.alias.clone()))
                    })
                    .collect::<Result<Vec<_>>>()?;
                let rebuilt = ProjectionExec::try_new_with_schema_metadata(
                    exprs,
                    Arc::clone(projection.input()),
                    &projection.schema(),
                )?;
                return Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn ExecutionPlan>));
            }
            if let Some(filter) = node.downcast_ref::<FilterExec>() {
                let predicate = checked(Arc::clone(filter.predicate()), &filter.input().schema())?;
                let rebuilt = FilterExecBuilder::from(filter).with_predicate(predicate).build()?;
                return Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn ExecutionPlan>));
            }
            if let Some(aggregate) = node.downcast_ref::<AggregateExec>() {
                let mut exprs = Vec::with_capacity(aggregate.aggr_expr().len());
                for expr in aggregate.aggr_expr() {
                    let schema = aggregate.input_schema();
                    let args = expr
                        .expressions()
                        .into_iter()
                        .map(|arg| checked(arg, &schema))
                        .collect::<Result<Vec<_>>>()?;
                    let order_by = expr.order_bys().iter().map(|o| Arc::clone(&o.expr)).collect();
                    match expr.with_new_expressions(args, order_by) {
                        Some(rebuilt) => exprs.push(Arc::new(rebuilt)),
                        None => exprs.push(Arc::clone(expr)),
                    }
                }
                let rebuilt = aggregate.with_new_aggr_exprs(exprs);
                return Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn ExecutionPlan>));
            }
            Ok(Transformed::no(node))
        })
        .data()
    }

    fn name(&self) -> &str {
        "checked_arithmetic"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
