//! Lowering joins: inner, outer, semi and anti joins, with or without key equalities.

use super::*;

impl Planner<'_> {
    pub(super) fn join(&mut self, join: &datafusion::logical_expr::Join) -> Result<StreamNode> {
        if let Some(node) = self.dynamic_filter(join)? {
            return Ok(node);
        }
        let kind = match join.join_type {
            JoinType::Inner => JoinKind::Inner,
            JoinType::Left => JoinKind::LeftOuter,
            JoinType::Right => JoinKind::RightOuter,
            JoinType::Full => JoinKind::FullOuter,
            JoinType::LeftSemi => JoinKind::LeftSemi,
            JoinType::RightSemi => JoinKind::RightSemi,
            JoinType::LeftAnti if join.null_aware => return self.not_in(join),
            JoinType::LeftAnti => JoinKind::LeftAnti,
            JoinType::RightAnti => JoinKind::RightAnti,
            other => {
                return Err(unsupported!(
                    "{other} JOIN in a materialized view (inner, outer, semi and anti joins are)"
                ));
            }
        };
        let nulls_equal = join.null_equality == datafusion::common::NullEquality::NullEqualsNull;
        let (left_schema, right_schema) = (join.left.schema(), join.right.schema());
        let (left_keys, right_keys) = match join.on.is_empty() {
            // No equality (a cross join, a one-row subquery, a band join): every row has the
            // same key, so one actor joins them all, each pair decided by the condition.
            true => {
                let constant = || -> Arc<dyn PhysicalExpr> {
                    Arc::new(Literal::new(ScalarValue::Int32(Some(0))))
                };
                (vec![constant()], vec![constant()])
            }
            false => (
                join.on
                    .iter()
                    .map(|(l, _)| self.physical(l, left_schema))
                    .collect::<Result<Vec<_>>>()?,
                join.on
                    .iter()
                    .map(|(_, r)| self.physical(r, right_schema))
                    .collect::<Result<Vec<_>>>()?,
            ),
        };
        let left = exchange(self.lower(&join.left)?, left_keys.clone());
        let right = exchange(self.lower(&join.right)?, right_keys.clone());
        // An inner join's condition filters its output rows; the other kinds' decides which
        // pairs match, over `left visible ++ right visible`.
        let pair_schema = match kind {
            JoinKind::Inner => join.schema.as_ref().clone(),
            _ => left_schema.as_ref().clone().join(right_schema)?,
        };
        let filter = join.filter.as_ref().map(|f| self.physical(f, &pair_schema)).transpose()?;
        let mut tables = [0; 2];
        for (t, (side, keys)) in
            [(&left, &left_keys), (&right, &right_keys)].into_iter().enumerate()
        {
            let mut columns = Vec::new();
            for (i, key) in keys.iter().enumerate() {
                columns
                    .push(column(&format!("join_key_{i}"), &key.data_type(side.schema.as_ref())?)?);
            }
            for field in side.schema.fields() {
                columns.push(column(field.name(), field.data_type())?);
            }
            if kind.counts(t) {
                columns.push(column("_degree", &ArrowType::Int64)?);
            }
            let nk = keys.len();
            let mut pk: Vec<usize> = (0..nk).collect();
            pk.extend(side.stream_key.iter().map(|&k| nk + k));
            let purpose =
                if t == 0 { StatePurpose::HashJoinLeft } else { StatePurpose::HashJoinRight };
            tables[t] = self.slot(StateSlot { purpose, columns, pk, dist_key_len: nk });
        }
        if let Some(kept) = kind.kept() {
            // A semi or anti join outputs rows of one side: its columns, then the join key.
            let side = if kept == 0 { &left } else { &right };
            let mut fields: Vec<Field> =
                side.schema.fields().iter().map(|f| f.as_ref().clone()).collect();
            let mut stream_key = side.stream_key.clone();
            let keys = if kept == 0 { &left_keys } else { &right_keys };
            for (i, key) in keys.iter().enumerate() {
                stream_key.push(fields.len());
                fields.push(Field::new(
                    format!("_join_key_{i}"),
                    key.data_type(side.schema.as_ref())?,
                    true,
                ));
            }
            let visible = side.visible;
            return Ok(StreamNode {
                kind: NodeKind::HashJoin {
                    kind,
                    left_keys,
                    right_keys,
                    filter,
                    tables,
                    nulls_equal,
                },
                inputs: vec![left, right],
                schema: Arc::new(Schema::new(fields)),
                visible,
                stream_key,
                dist: None,
            });
        }
        let (lv, rv) = (left.visible, right.visible);
        let (lh, rh) = (left.schema.fields().len() - lv, right.schema.fields().len() - rv);
        let at_left = |i: usize| if i < lv { i } else { lv + rv + (i - lv) };
        let at_right = |i: usize| if i < rv { lv + i } else { lv + rv + lh + (i - rv) };
        let mut stream_key: Vec<usize> = left.stream_key.iter().map(|&i| at_left(i)).collect();
        stream_key.extend(right.stream_key.iter().map(|&i| at_right(i)));
        // A side padded with NULLs (that of an outer join's unmatched rows) may be NULL anywhere.
        let padded = |side: usize| kind.counts(1 - side);
        let field = |f: &Arc<Field>, side: usize| {
            f.as_ref().clone().with_nullable(f.is_nullable() || padded(side))
        };
        let mut fields: Vec<Field> = Vec::with_capacity(lv + rv + lh + rh);
        fields.extend(left.schema.fields()[..lv].iter().map(|f| field(f, 0)));
        fields.extend(right.schema.fields()[..rv].iter().map(|f| field(f, 1)));
        fields.extend(left.schema.fields()[lv..].iter().map(|f| field(f, 0)));
        fields.extend(right.schema.fields()[rv..].iter().map(|f| field(f, 1)));
        // The join key is part of the output's stream key: a pair whose key changed is a
        // different row, so the actors of two join keys never write the same output row.
        for (i, key) in left_keys.iter().enumerate() {
            stream_key.push(fields.len());
            fields.push(Field::new(
                format!("_join_key_{i}"),
                key.data_type(left.schema.as_ref())?,
                true,
            ));
        }
        Ok(StreamNode {
            kind: NodeKind::HashJoin { kind, left_keys, right_keys, filter, tables, nulls_equal },
            inputs: vec![left, right],
            schema: Arc::new(Schema::new(fields)),
            visible: lv + rv,
            stream_key,
            dist: None,
        })
    }

    /// `x NOT IN (SELECT y FROM r)`: true when `r` is empty, else when `x` is not NULL, no `y`
    /// equals it and no `y` is NULL (NULL otherwise, which a WHERE drops). Planned as the anti
    /// join on `x = y` (NULL keys never match) joined with one row saying whether `r` is empty
    /// and whether it has a NULL `y`: a row of flags that changes only when one flips, so the
    /// left rows are filtered again only then.
    fn not_in(&mut self, join: &datafusion::logical_expr::Join) -> Result<StreamNode> {
        use datafusion::functions_aggregate::expr_fn::count;
        use datafusion::logical_expr::{LogicalPlanBuilder, col, lit, when};
        let refuse = || {
            unsupported!(
                "NOT IN over a correlated or multi-column subquery in a materialized view; \
                 write NOT EXISTS (SELECT .. WHERE a = b), which is maintained (it differs only \
                 where NULLs are compared)"
            )
        };
        let [(x, y)] = join.on.as_slice() else { return Err(refuse()) };
        if join.filter.is_some() {
            return Err(refuse());
        }
        let mut anti = join.clone();
        anti.null_aware = false;
        let anti = LogicalPlan::Join(anti);
        let flags = LogicalPlanBuilder::from(join.right.as_ref().clone())
            .aggregate(
                Vec::<Expr>::new(),
                vec![
                    count(lit(1i64)).alias("__rows"),
                    count(when(y.clone().is_null(), lit(1i64)).end()?).alias("__nulls"),
                ],
            )?
            .project(vec![
                col("__rows").eq(lit(0i64)).alias("__empty"),
                col("__nulls").gt(lit(0i64)).alias("__has_null"),
            ])?
            .aggregate(vec![col("__empty"), col("__has_null")], Vec::<Expr>::new())?
            .alias("__not_in")?
            .build()?;
        let keep = col("__not_in.__empty")
            .or(x.clone().is_not_null().and(col("__not_in.__has_null").is_false()));
        let columns: Vec<Expr> = anti.schema().columns().into_iter().map(Expr::Column).collect();
        let plan = LogicalPlanBuilder::from(anti)
            .cross_join(flags)?
            .filter(keep)?
            .project(columns)?
            .build()?;
        self.lower(&plan)
    }
}
