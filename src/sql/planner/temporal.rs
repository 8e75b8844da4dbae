//! Lowering conditions on `now()` in a view's `WHERE` to a temporal filter
//! ([`crate::stream::executor::temporal_filter`]).
//!
//! DataFusion's optimizer folds `now()` into the time of planning. A view's plan therefore has
//! each `now()` replaced by [`BarrierNow`] before it is optimized ([`mark_now`]): a volatile
//! function that nothing folds or moves. A `WHERE` conjunct comparing a column with `now()`
//! plus or minus constants becomes a condition of the temporal filter, with `now()` read from
//! the barriers; `now()` anywhere else in a view is refused.

use datafusion::common::tree_node::{Transformed, TreeNodeRecursion};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Operator, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

use super::*;
use crate::stream::executor::temporal_filter::{TemporalCondition, now_type};

/// The name the clock has in a condition's input row (after the input's visible columns).
const NOW_COLUMN: &str = "__sluice_now";

/// What a view may do with `now()`, for the errors that refuse the rest.
pub(super) const NOW_USE: &str = "now() in a materialized view is supported in WHERE \
    conditions that compare a column with now() plus or minus constant intervals, ANDed with \
    the rest: one that rows leave as time passes (created > now() - interval '1 hour') and one \
    that rows enter by (due <= now())";

/// `now()` in a view's plan: the time of the barrier that opened the epoch, set by the
/// temporal filter. It is never evaluated on its own.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct BarrierNow {
    signature: Signature,
}

impl Default for BarrierNow {
    fn default() -> Self {
        Self { signature: Signature::nullary(Volatility::Volatile) }
    }
}

impl ScalarUDFImpl for BarrierNow {
    fn name(&self) -> &str {
        "now"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[ArrowType]) -> datafusion::error::Result<ArrowType> {
        Ok(now_type())
    }

    fn invoke_with_args(
        &self,
        _args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        datafusion::common::not_impl_err!("{NOW_USE}")
    }
}

/// `plan` with each `now()` (and `current_timestamp`) replaced by [`BarrierNow`], and each
/// `current_date` by its date (UTC, the session time zone).
pub fn mark_now(plan: LogicalPlan) -> Result<LogicalPlan> {
    let udf = Arc::new(ScalarUDF::new_from_impl(BarrierNow::default()));
    let now = || Expr::ScalarFunction(ScalarFunction::new_udf(udf.clone(), Vec::new()));
    let plan = plan.transform_up_with_subqueries(|node| {
        node.map_expressions(|expr| {
            expr.transform_up(|e| match e {
                Expr::ScalarFunction(f) if f.args.is_empty() && f.func.name() == "now" => {
                    Ok(Transformed::yes(now()))
                }
                Expr::ScalarFunction(f) if f.args.is_empty() && f.func.name() == "current_date" => {
                    let date =
                        datafusion::logical_expr::Cast::new(Box::new(now()), ArrowType::Date32);
                    Ok(Transformed::yes(Expr::Cast(date)))
                }
                e => Ok(Transformed::no(e)),
            })
        })
    })?;
    Ok(plan.data)
}

/// Whether `expr` reads [`BarrierNow`].
pub(super) fn reads_now(expr: &Expr) -> bool {
    let mut found = false;
    let _ = expr.apply(|e| {
        if is_now(e) {
            found = true;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    found
}

fn is_now(expr: &Expr) -> bool {
    matches!(expr, Expr::ScalarFunction(f) if f.func.inner().downcast_ref::<BarrierNow>().is_some())
}

/// Whether `expr` only grows (or stays) as `now()` grows and reads no column: `now()`, casts
/// of it, constants added to it or subtracted from it, `date_trunc(unit, ..)` of it.
fn grows_with_now(expr: &Expr) -> bool {
    let constant = |e: &Expr| !reads_now(e) && e.column_refs().is_empty();
    match expr {
        e if is_now(e) => true,
        Expr::Cast(c) => grows_with_now(&c.expr),
        Expr::TryCast(c) => grows_with_now(&c.expr),
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::Plus, right }) => {
            (grows_with_now(left) && constant(right)) || (constant(left) && grows_with_now(right))
        }
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::Minus, right }) => {
            grows_with_now(left) && constant(right)
        }
        Expr::ScalarFunction(f) if f.func.name() == "date_trunc" => {
            matches!(f.args.as_slice(), [unit, time] if constant(unit) && grows_with_now(time))
        }
        _ => false,
    }
}

/// Which way a condition moves as time passes.
enum Direction {
    /// True, then false for good (`col > now() - ..`).
    Leaving,
    /// False, then true for good (`col <= now()`).
    Entering,
}

/// The column a temporal conjunct compares and which way it moves, or why it cannot be one.
fn classify(conjunct: &Expr, schema: &DFSchema) -> Result<(usize, Direction)> {
    let refuse = || unsupported!("{conjunct}: {NOW_USE}");
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = conjunct else {
        return Err(refuse());
    };
    let (column_side, op) = match (grows_with_now(left), grows_with_now(right)) {
        (false, true) => (left.as_ref(), *op),
        (true, false) => (right.as_ref(), op.swap().ok_or_else(refuse)?),
        _ => return Err(refuse()),
    };
    let column = match column_side {
        Expr::Column(c) => c,
        Expr::Cast(c) => match c.expr.as_ref() {
            Expr::Column(c) => c,
            _ => return Err(refuse()),
        },
        Expr::TryCast(c) => match c.expr.as_ref() {
            Expr::Column(c) => c,
            _ => return Err(refuse()),
        },
        _ => return Err(refuse()),
    };
    let index = schema.index_of_column(column)?;
    let direction = match op {
        Operator::Gt | Operator::GtEq => Direction::Leaving,
        Operator::Lt | Operator::LtEq => Direction::Entering,
        _ => return Err(refuse()),
    };
    Ok((index, direction))
}

impl Planner<'_> {
    /// A filter whose `WHERE` has conditions on `now()`: the other conjuncts filter first, then
    /// the temporal filter on one actor. `None` when the predicate does not read `now()`.
    pub(super) fn temporal_filter(
        &mut self,
        filter: &datafusion::logical_expr::Filter,
    ) -> Result<Option<StreamNode>> {
        use datafusion::logical_expr::utils::{conjunction, split_conjunction};
        if !reads_now(&filter.predicate) {
            return Ok(None);
        }
        let schema = filter.input.schema();
        let (temporal, rest): (Vec<&Expr>, Vec<&Expr>) =
            split_conjunction(&filter.predicate).into_iter().partition(|c| reads_now(c));
        let clock =
            DFSchema::try_from(Schema::new(vec![Field::new(NOW_COLUMN, now_type(), false)]))?;
        let with_clock = schema.join(&clock)?;
        let (mut leaving, mut entering) = (None, None);
        for conjunct in temporal {
            let (column, direction) = classify(conjunct, schema)?;
            let predicate = conjunct.clone().transform_up(|e| match is_now(&e) {
                true => Ok(Transformed::yes(Expr::Column(datafusion::common::Column::from_name(
                    NOW_COLUMN,
                )))),
                false => Ok(Transformed::no(e)),
            })?;
            let predicate = self.physical(&predicate.data, &with_clock)?;
            let condition = TemporalCondition { column, predicate };
            let place = match direction {
                Direction::Leaving => &mut leaving,
                Direction::Entering => &mut entering,
            };
            if place.replace(condition).is_some() {
                return Err(unsupported!(
                    "{conjunct}: two conditions on now() of the same kind in a materialized \
                     view ({NOW_USE})"
                ));
            }
        }
        let mut input = self.lower(&filter.input)?;
        if let Some(predicate) = conjunction(rest.into_iter().cloned()) {
            let predicate = self.physical(&predicate, schema)?;
            let (schema, visible) = (input.schema.clone(), input.visible);
            let (stream_key, dist) = (input.stream_key.clone(), input.dist.clone());
            let kind = NodeKind::Filter { predicate };
            input = StreamNode { kind, inputs: vec![input], schema, visible, stream_key, dist };
        }
        let input = exchange(input, Vec::new());
        let mut kept = |condition: Option<TemporalCondition>| -> Result<_> {
            let Some(condition) = condition else { return Ok(None) };
            let time = input.schema.field(condition.column).data_type();
            let mut columns = vec![column("_time", time)?];
            for field in input.schema.fields() {
                columns.push(column(field.name(), field.data_type())?);
            }
            let mut pk = vec![0];
            pk.extend(input.stream_key.iter().map(|&k| k + 1));
            let slot = self.slot(StateSlot {
                purpose: StatePurpose::TemporalFilter,
                columns,
                pk,
                dist_key_len: 0,
            });
            Ok(Some((condition, slot)))
        };
        let (leaving, entering) = (kept(leaving)?, kept(entering)?);
        Ok(Some(StreamNode {
            kind: NodeKind::TemporalFilter { leaving, entering },
            schema: input.schema.clone(),
            visible: input.visible,
            stream_key: input.stream_key.clone(),
            dist: input.dist.clone(),
            inputs: vec![input],
        }))
    }
}
