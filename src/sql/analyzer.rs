//! Rewrites of DataFusion's analyzed logical plans that keep Postgres queries from reaching
//! DataFusion bugs.
//!
//! [`OpaqueDayDurations`]: `date + integer` (Postgres: that many days later) is planned by
//! DataFusion as `date + CAST(CAST(n * 86400 AS Duration(s)) AS Interval)`. In a filter, the
//! interval analysis that estimates its selectivity then panics ("Interval bounds have
//! different types: Int64 != Duration(s)") and the connection is lost. The cast to a duration
//! is made a `TRY_CAST`, which gives the same values (an integer always converts to a
//! duration) and which the analysis skips.
//!
//! [`NumericToIntegerRounds`]: Postgres rounds a `numeric` cast to an integer type half away
//! from zero (`2.5::int` is 3, `-2.5::int` is -3); DataFusion truncates. Such a cast first
//! casts to a `numeric` of scale 0, which rounds (see [`crate::types::rounding_scale`]). It runs
//! before the optimizer folds constant casts, so literals round too.

use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::error::Result;
use datafusion::logical_expr::expr::{Cast, TryCast};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan};
use datafusion::optimizer::AnalyzerRule;

use crate::types::rounding_scale;

/// The analyzer rule described in the module docs; runs after DataFusion's type coercion.
#[derive(Debug, Default)]
pub struct OpaqueDayDurations;

impl AnalyzerRule for OpaqueDayDurations {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|plan| {
            let names = NamePreserver::new(&plan);
            plan.map_expressions(|expr| {
                let name = names.save(&expr);
                let rewritten = expr.transform_up(|e| match e {
                    Expr::Cast(Cast { expr, field })
                        if matches!(field.data_type(), DataType::Duration(_)) =>
                    {
                        Ok(Transformed::yes(Expr::TryCast(TryCast::new_from_field(expr, field))))
                    }
                    other => Ok(Transformed::no(other)),
                })?;
                Ok(rewritten.update_data(|e| name.restore(e)))
            })
        })
        .data()
    }

    fn name(&self) -> &str {
        "opaque_day_durations"
    }
}

/// The analyzer rule described in the module docs; runs after DataFusion's type coercion.
#[derive(Debug, Default)]
pub struct NumericToIntegerRounds;

impl AnalyzerRule for NumericToIntegerRounds {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|plan| {
            let schema = merge_schema(&plan.inputs());
            let names = NamePreserver::new(&plan);
            plan.map_expressions(|expr| {
                let name = names.save(&expr);
                let rewritten = expr.transform_up(|e| match e {
                    Expr::Cast(Cast { expr, field }) => {
                        let from = expr.get_type(&schema).ok();
                        match from.and_then(|f| rounding_scale(&f, field.data_type())) {
                            Some(scale_zero) => {
                                let rounded = Expr::Cast(Cast::new(expr, scale_zero));
                                let cast = Cast::new_from_field(Box::new(rounded), field);
                                Ok(Transformed::yes(Expr::Cast(cast)))
                            }
                            None => Ok(Transformed::no(Expr::Cast(Cast { expr, field }))),
                        }
                    }
                    other => Ok(Transformed::no(other)),
                })?;
                Ok(rewritten.update_data(|e| name.restore(e)))
            })
        })
        .data()
    }

    fn name(&self) -> &str {
        "numeric_to_integer_rounds"
    }
}
