//! A bound on DataFusion's grouped top-k aggregation.
//!
//! For `SELECT DISTINCT x .. ORDER BY x LIMIT n` (and `GROUP BY x` with `min`/`max` ordered by
//! them), DataFusion's `LimitAggregation` rule lets the aggregate keep only the best `n` groups
//! in a priority map that it sizes for `10 n` entries up front. A large `n` (`LIMIT
//! 9223372036854775807`, which clients send for "no limit") overflowed that size, a panic
//! (XX000), or allocated it. [`BoundedTopK`] runs after that rule and hands aggregates whose
//! limit passes [`MAX_TOPK_LIMIT`] back to the plain hash aggregation: the sort above them still
//! keeps the first `n` rows, so only the shortcut is lost.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;

/// The largest limit an aggregate keeps its best groups for (a map of ten times as many
/// entries); past it, all groups are kept and sorted.
pub const MAX_TOPK_LIMIT: usize = 100_000;

/// The physical optimizer rule (see the module).
#[derive(Debug, Default)]
pub struct BoundedTopK;

impl PhysicalOptimizerRule for BoundedTopK {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(aggregate) = node.downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            match aggregate.limit_options() {
                // An ordered limit is the top-k map; an unordered one only stops early.
                Some(limit) if limit.descending().is_some() && limit.limit() > MAX_TOPK_LIMIT => {
                    let plain = aggregate.with_new_limit_options(None);
                    Ok(Transformed::yes(Arc::new(plain) as Arc<dyn ExecutionPlan>))
                }
                _ => Ok(Transformed::no(node)),
            }
        })
        .data()
    }

    fn name(&self) -> &str {
        "bounded_topk"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
