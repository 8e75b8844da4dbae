//! Lowering `GROUPING SETS`, `ROLLUP` and `CUBE`: one aggregate per grouping set, each padded
//! with NULLs to the columns of all sets and marked with its grouping id, in a `UNION ALL`.

use datafusion::logical_expr::{Aggregate, GroupingSet, Projection, Union};

use super::*;

impl Planner<'_> {
    /// `agg` when it groups by grouping sets, as the union of an aggregate per set; `None`
    /// otherwise.
    pub(super) fn grouping_sets(&mut self, agg: &Aggregate) -> Result<Option<StreamNode>> {
        let [Expr::GroupingSet(set)] = agg.group_expr.as_slice() else { return Ok(None) };
        let sets: Vec<Vec<Expr>> = match set {
            GroupingSet::GroupingSets(sets) => sets.clone(),
            // ROLLUP (a, b): (a, b), (a), ().
            GroupingSet::Rollup(exprs) => {
                (0..=exprs.len()).rev().map(|k| exprs[..k].to_vec()).collect()
            }
            // CUBE (a, b): every subset.
            GroupingSet::Cube(exprs) => (0..1usize << exprs.len())
                .map(|mask| {
                    let kept = exprs.iter().enumerate().filter(|(i, _)| mask & (1 << i) == 0);
                    kept.map(|(_, e)| e.clone()).collect()
                })
                .collect(),
        };
        let all: Vec<&Expr> = set.distinct_expr();
        let n = all.len();
        // The `__grouping_id` of each set, as DataFusion computes it: per column (the first is
        // the highest bit) whether the set leaves it NULL, and above those bits how many times
        // the same set came before.
        let id_type = agg.schema.field(n).data_type().clone();
        let mut seen: Vec<Vec<bool>> = Vec::new();
        let mut branches = Vec::with_capacity(sets.len());
        for set in &sets {
            let nulls: Vec<bool> = all.iter().map(|e| !set.contains(e)).collect();
            let ordinal = seen.iter().filter(|s| **s == nulls).count() as u64;
            seen.push(nulls.clone());
            let id = nulls.iter().fold(0u64, |acc, &null| (acc << 1) | u64::from(null));
            let id = ScalarValue::UInt64(Some(id | (ordinal << n))).cast_to(&id_type)?;
            let per_set =
                Aggregate::try_new(agg.input.clone(), set.clone(), agg.aggr_expr.clone())?;
            let per_set = LogicalPlan::Aggregate(per_set);
            let schema = per_set.schema().clone();
            let column = |i: usize| {
                Expr::Column(datafusion::common::Column::from(schema.qualified_field(i)))
            };
            let named = |e: Expr, i: usize| {
                let (qualifier, field) = agg.schema.qualified_field(i);
                e.alias_qualified(qualifier.cloned(), field.name())
            };
            let mut exprs = Vec::with_capacity(agg.schema.fields().len());
            for (i, e) in all.iter().enumerate() {
                let value = match set.iter().position(|s| s == *e) {
                    Some(j) => column(j),
                    None => {
                        Expr::Literal(ScalarValue::try_from(agg.schema.field(i).data_type())?, None)
                    }
                };
                exprs.push(named(value, i));
            }
            exprs.push(named(Expr::Literal(id, None), n));
            for k in 0..agg.aggr_expr.len() {
                exprs.push(named(column(set.len() + k), n + 1 + k));
            }
            branches.push(Arc::new(LogicalPlan::Projection(Projection::try_new(
                exprs,
                Arc::new(per_set),
            )?)));
        }
        let union = LogicalPlan::Union(Union::try_new_with_loose_types(branches)?);
        Ok(Some(self.lower(&union)?))
    }
}
