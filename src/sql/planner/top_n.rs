//! Lowering top-N: `ORDER BY .. LIMIT`, `LIMIT` alone, and `row_number() <= n` per group.

use super::*;

impl Planner<'_> {
    /// `LIMIT n [OFFSET m]`, over an `ORDER BY` or not (then ordered by the stream key).
    pub(super) fn limit(&mut self, limit: &datafusion::logical_expr::Limit) -> Result<StreamNode> {
        use datafusion::logical_expr::{FetchType, SkipType};
        let SkipType::Literal(offset) = limit.get_skip_type()? else {
            return Err(unsupported!("an OFFSET that is not a constant in a materialized view"));
        };
        let fetch = match limit.get_fetch_type()? {
            FetchType::Literal(Some(fetch)) => fetch,
            FetchType::Literal(None) => {
                return Err(unsupported!(
                    "OFFSET without LIMIT in a materialized view (its rows are all but the first)"
                ));
            }
            FetchType::UnsupportedExpr => {
                return Err(unsupported!("a LIMIT that is not a constant in a materialized view"));
            }
        };
        match limit.input.as_ref() {
            LogicalPlan::Sort(sort) => self.top_n(&sort.input, &sort.expr, offset, fetch),
            input => self.top_n(input, &[], offset, fetch),
        }
    }

    /// A top-N over all rows of `input`: they go to one actor.
    pub(super) fn top_n(
        &mut self,
        input: &LogicalPlan,
        order: &[datafusion::logical_expr::SortExpr],
        offset: usize,
        limit: usize,
    ) -> Result<StreamNode> {
        let order = self.sort_keys(order, input.schema())?;
        let node = self.lower(input)?;
        let spec = TopNSpec { group: Vec::new(), order, offset, limit, rank: false };
        self.top_n_node(exchange(node, Vec::new()), spec)
    }

    pub(super) fn sort_keys(
        &self,
        order: &[datafusion::logical_expr::SortExpr],
        schema: &DFSchema,
    ) -> Result<Vec<SortKey>> {
        order
            .iter()
            .map(|s| {
                let expr = self.physical(&s.expr, schema)?;
                Ok(SortKey { expr, descending: !s.asc, nulls_first: s.nulls_first })
            })
            .collect()
    }

    /// `WHERE rn <= n` (or `< n`, `= 1`) over `row_number() OVER (PARTITION BY .. ORDER BY ..)
    /// AS rn`: a top-N per partition that outputs each row's rank. `None` when `filter` is not
    /// that pattern; other conditions ANDed to it filter the top-N's output.
    pub(super) fn group_top_n(
        &mut self,
        filter: &datafusion::logical_expr::Filter,
    ) -> Result<Option<StreamNode>> {
        use datafusion::logical_expr::expr::WindowFunction;
        use datafusion::logical_expr::{BinaryExpr, Operator, WindowFunctionDefinition};
        // The window directly below, or below a projection that only picks its columns.
        let (window, projection) = match filter.input.as_ref() {
            LogicalPlan::Window(window) => (window, None),
            LogicalPlan::Projection(p) => match p.input.as_ref() {
                LogicalPlan::Window(window)
                    if p.expr.iter().all(|e| matches!(e, Expr::Column(_))) =>
                {
                    (window, Some(p))
                }
                _ => return Ok(None),
            },
            _ => return Ok(None),
        };
        let [Expr::WindowFunction(function)] = window.window_expr.as_slice() else {
            return Ok(None);
        };
        let WindowFunction { fun, params } = function.as_ref();
        let WindowFunctionDefinition::WindowUDF(udf) = fun else { return Ok(None) };
        if udf.name() != "row_number" || !params.args.is_empty() || params.filter.is_some() {
            return Ok(None);
        }
        let rank_column = window.input.schema().fields().len();
        let (rank_qualifier, rank_field) = window.schema.qualified_field(rank_column);
        let rank = datafusion::common::Column::new(rank_qualifier.cloned(), rank_field.name());
        // The bound on the rank, from one conjunct; the other conjuncts stay a filter.
        let mut limit = None;
        let mut rest = Vec::new();
        for conjunct in datafusion::logical_expr::utils::split_conjunction(&filter.predicate) {
            let bound = match conjunct {
                Expr::BinaryExpr(BinaryExpr { left, op, right }) if limit.is_none() => {
                    let literal = |e: &Expr| match e {
                        Expr::Literal(v, _) => {
                            v.cast_to(&ArrowType::Int64).ok().and_then(|v| match v {
                                ScalarValue::Int64(Some(n)) => Some(n),
                                _ => None,
                            })
                        }
                        _ => None,
                    };
                    let is_rank = |e: &Expr| matches!(e, Expr::Column(c) if *c == rank);
                    match (is_rank(left), literal(right), is_rank(right), literal(left)) {
                        (true, Some(n), _, _) => match op {
                            Operator::LtEq => Some(n),
                            Operator::Lt => Some(n - 1),
                            Operator::Eq if n == 1 => Some(1),
                            _ => None,
                        },
                        (_, _, true, Some(n)) => match op {
                            Operator::GtEq => Some(n),
                            Operator::Gt => Some(n - 1),
                            Operator::Eq if n == 1 => Some(1),
                            _ => None,
                        },
                        _ => None,
                    }
                }
                _ => None,
            };
            match bound {
                Some(n) => limit = Some(n.max(0) as usize),
                None => rest.push(conjunct.clone()),
            }
        }
        let Some(limit) = limit else { return Ok(None) };
        let input_schema = window.input.schema();
        let group = params
            .partition_by
            .iter()
            .map(|e| self.physical(e, input_schema))
            .collect::<Result<Vec<_>>>()?;
        let order = self.sort_keys(&params.order_by, input_schema)?;
        let node = self.lower(&window.input)?;
        let spec = TopNSpec { group: group.clone(), order, offset: 0, limit, rank: true };
        let mut node = self.top_n_node(exchange(node, group), spec)?;
        if let Some(projection) = projection {
            let exprs = projection
                .expr
                .iter()
                .map(|e| self.physical(e, &window.schema))
                .collect::<Result<Vec<_>>>()?;
            node = with_hidden_key(NodeKind::Project { exprs }, projection.schema.as_arrow(), node);
        }
        if let Some(predicate) = datafusion::logical_expr::utils::conjunction(rest) {
            let predicate = self.physical(&predicate, filter.input.schema())?;
            let (schema, visible) = (node.schema.clone(), node.visible);
            let (stream_key, dist) = (node.stream_key.clone(), node.dist.clone());
            let kind = NodeKind::Filter { predicate };
            node = StreamNode { kind, inputs: vec![node], schema, visible, stream_key, dist };
        }
        Ok(Some(node))
    }

    /// The top-N node over `input` (already exchanged by the groups), with its state table:
    /// `group values ++ _order ++ input columns`, keyed by `group ++ _order ++ stream key`.
    pub(super) fn top_n_node(&mut self, input: StreamNode, spec: TopNSpec) -> Result<StreamNode> {
        let table = self.ordered_rows(StatePurpose::TopN, &spec.group, &input, Vec::new())?;
        let visible = input.visible;
        let mut fields: Vec<Field> =
            input.schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        let mut stream_key = input.stream_key.clone();
        let mut out_visible = visible;
        if spec.rank {
            fields.insert(visible, Field::new("row_number", ArrowType::UInt64, false));
            for k in &mut stream_key {
                if *k >= visible {
                    *k += 1;
                }
            }
            out_visible += 1;
        }
        // The group values join the stream key: a row that moves to another group is deleted
        // by one actor and inserted by another, as two different rows.
        for (i, g) in spec.group.iter().enumerate() {
            stream_key.push(fields.len());
            fields.push(Field::new(
                format!("_group_{i}"),
                g.data_type(input.schema.as_ref())?,
                true,
            ));
        }
        Ok(StreamNode {
            kind: NodeKind::TopN { spec, table },
            inputs: vec![input],
            schema: Arc::new(Schema::new(fields)),
            visible: out_visible,
            stream_key,
            dist: None,
        })
    }
}

impl Planner<'_> {
    /// `SELECT DISTINCT ON (on ..) e .. ORDER BY s ..`, which DataFusion plans as an aggregate
    /// of `first_value(e ORDER BY s ..)` calls grouped by `on`: the first row of each group by
    /// that order, a top-1 per group, projected to the aggregate's columns. `None` when `agg`
    /// has another call, or calls ordered differently.
    pub(super) fn first_values(
        &mut self,
        agg: &datafusion::logical_expr::Aggregate,
    ) -> Result<Option<StreamNode>> {
        let mut order = None;
        let mut args = Vec::with_capacity(agg.aggr_expr.len());
        for expr in &agg.aggr_expr {
            let expr = match expr {
                Expr::Alias(alias) => alias.expr.as_ref(),
                other => other,
            };
            let Expr::AggregateFunction(f) = expr else { return Ok(None) };
            let p = &f.params;
            if f.func.name() != "first_value" || p.distinct || p.filter.is_some() {
                return Ok(None);
            }
            let [arg] = p.args.as_slice() else { return Ok(None) };
            match &order {
                None => order = Some(p.order_by.clone()),
                Some(order) if *order == p.order_by => {}
                Some(_) => return Ok(None),
            }
            args.push(arg.clone());
        }
        let Some(order) = order else { return Ok(None) };
        if matches!(agg.group_expr.first(), Some(Expr::GroupingSet(_))) {
            return Ok(None);
        }
        let in_schema = agg.input.schema();
        let group = agg
            .group_expr
            .iter()
            .map(|e| self.physical(e, in_schema))
            .collect::<Result<Vec<_>>>()?;
        let order = self.sort_keys(&order, in_schema)?;
        let node = self.lower(&agg.input)?;
        let spec = TopNSpec { group: group.clone(), order, offset: 0, limit: 1, rank: false };
        let node = self.top_n_node(exchange(node, group.clone()), spec)?;
        // The top-N's rows start with its input's: the aggregate's columns are computed over
        // them as over the input.
        let mut exprs = group;
        for arg in &args {
            exprs.push(self.physical(arg, in_schema)?);
        }
        Ok(Some(with_hidden_key(NodeKind::Project { exprs }, agg.schema.as_arrow(), node)))
    }
}

impl Planner<'_> {
    /// The state table of an operator that keeps every input row by group and order (top-N,
    /// over-window): `group_i .. ++ _order ++ input columns ++ extra`, keyed by `group ++
    /// _order ++ stream key`, distributed by the group.
    pub(super) fn ordered_rows(
        &mut self,
        purpose: StatePurpose,
        group: &[Arc<dyn PhysicalExpr>],
        input: &StreamNode,
        extra: Vec<ColumnCatalog>,
    ) -> Result<usize> {
        let mut columns = Vec::new();
        for (i, g) in group.iter().enumerate() {
            columns.push(column(&format!("group_{i}"), &g.data_type(input.schema.as_ref())?)?);
        }
        columns.push(column("_order", &ArrowType::Binary)?);
        for field in input.schema.fields() {
            columns.push(column(field.name(), field.data_type())?);
        }
        columns.extend(extra);
        let n_group = group.len();
        let mut pk: Vec<usize> = (0..=n_group).collect();
        pk.extend(input.stream_key.iter().map(|&k| n_group + 1 + k));
        Ok(self.slot(StateSlot { purpose, columns, pk, dist_key_len: n_group }))
    }
}
