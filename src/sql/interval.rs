//! An interval times or divided by a number, as Postgres computes it (`interval_mul`,
//! `interval_div`): `(g % 90) * interval '1 minute'`, `interval '1 month' * 1.5`,
//! `interval '1 day' / 3`. DataFusion plans no arithmetic between an interval and a number; the
//! parser's rewrites ([`rewrite`]) turn such a product or quotient with an interval literal or
//! cast into a call of these functions.
//!
//! Months and days are multiplied on their own; the fraction of a month cascades into days (30
//! per month) and the fraction of a day into time (24 hours), each rounded to the microsecond,
//! never upwards (`interval '1 month' * 1.5` is `1 mon 15 days`).

use std::ops::ControlFlow;
use std::sync::Arc;

use arrow::array::{Array, AsArray, IntervalMonthDayNanoArray};
use arrow::datatypes::{DataType, Float64Type, IntervalMonthDayNano, IntervalUnit};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast;

const DAYS_PER_MONTH: f64 = 30.0;
const SECS_PER_DAY: f64 = 86_400.0;

/// Postgres's `TSROUND`: to the microsecond.
fn ts_round(x: f64) -> f64 {
    (x * 1e6).round_ties_even() / 1e6
}

/// `span * factor` (or `span / factor` when `divide`), as Postgres's `interval_mul` and
/// `interval_div` compute it; `None` when the result does not fit.
pub fn scale(
    span: IntervalMonthDayNano,
    factor: f64,
    divide: bool,
) -> Option<IntervalMonthDayNano> {
    let apply = |x: f64| if divide { x / factor } else { x * factor };
    let (orig_month, orig_day) = (f64::from(span.months), f64::from(span.days));
    let (months, days) = (apply(orig_month), apply(orig_day));
    let fits = |x: f64| x.is_finite() && x >= f64::from(i32::MIN) && x <= f64::from(i32::MAX);
    if !fits(months) || !fits(days) {
        return None;
    }
    let (month, mut day) = (months as i32, days as i32);
    let month_remainder_days = ts_round((months - f64::from(month)) * DAYS_PER_MONTH);
    let mut sec_remainder = ts_round(
        (days - f64::from(day) + month_remainder_days - month_remainder_days.trunc())
            * SECS_PER_DAY,
    );
    if sec_remainder.abs() >= SECS_PER_DAY {
        let whole = (sec_remainder / SECS_PER_DAY).trunc();
        day = day.checked_add(whole as i32)?;
        sec_remainder -= whole * SECS_PER_DAY;
    }
    day = day.checked_add(month_remainder_days as i32)?;
    let micros = (apply(span.nanoseconds as f64 / 1000.0) + sec_remainder * 1e6).round_ties_even();
    if !micros.is_finite() || micros.abs() >= i64::MAX as f64 / 1000.0 {
        return None;
    }
    Some(IntervalMonthDayNano::new(month, day, micros as i64 * 1000))
}

/// `interval_mul(interval, double precision)` or `interval_div(..)`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct IntervalScale {
    signature: Signature,
    divide: bool,
}

impl IntervalScale {
    /// `interval_mul` (`divide` false) or `interval_div`.
    pub fn new(divide: bool) -> Self {
        let interval = DataType::Interval(IntervalUnit::MonthDayNano);
        let signature = Signature::exact(vec![interval, DataType::Float64], Volatility::Immutable);
        Self { signature, divide }
    }
}

impl ScalarUDFImpl for IntervalScale {
    fn name(&self) -> &str {
        if self.divide { "interval_div" } else { "interval_mul" }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(DataType::Interval(IntervalUnit::MonthDayNano))
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let spans = arrays[0].as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>();
        let factors = arrays[1].as_primitive::<Float64Type>();
        let mut out = Vec::with_capacity(rows);
        for row in 0..rows {
            if spans.is_null(row) || factors.is_null(row) {
                out.push(None);
                continue;
            }
            let factor = factors.value(row);
            if self.divide && factor == 0.0 {
                let zero = arrow::error::ArrowError::DivideByZero;
                return Err(DataFusionError::ArrowError(Box::new(zero), None));
            }
            match scale(spans.value(row), factor, self.divide) {
                Some(v) => out.push(Some(v)),
                None => {
                    return Err(DataFusionError::Execution("the interval is out of range".into()));
                }
            }
        }
        let array: Arc<dyn Array> = Arc::new(IntervalMonthDayNanoArray::from(out));
        Ok(ColumnarValue::Array(array))
    }
}

/// A duration (a difference of timestamps) as Postgres's interval: whole days, then the time.
pub fn justify_udf() -> ScalarUDF {
    datafusion::logical_expr::create_udf(
        "sluice_justify",
        vec![DataType::Duration(arrow::datatypes::TimeUnit::Microsecond)],
        DataType::Interval(IntervalUnit::MonthDayNano),
        Volatility::Immutable,
        Arc::new(|args| {
            let scalar = args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
            let spans = ColumnarValue::values_to_arrays(args)?;
            let out = crate::types::interval_text::justified_column(&spans[0])?;
            match scalar {
                true => Ok(ColumnarValue::Scalar(datafusion::scalar::ScalarValue::try_from_array(
                    &out, 0,
                )?)),
                false => Ok(ColumnarValue::Array(out)),
            }
        }),
    )
}

/// An interval or a time (`from`, microseconds) as the text Postgres prints for it.
pub fn text_udf(from: DataType) -> ScalarUDF {
    let interval = matches!(from, DataType::Interval(_));
    datafusion::logical_expr::create_udf(
        if interval { "sluice_interval_text" } else { "sluice_time_text" },
        vec![from],
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(move |args| {
            let scalar = args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
            let values = ColumnarValue::values_to_arrays(args)?;
            let out: arrow::array::StringArray = match interval {
                true => values[0]
                    .as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>()
                    .iter()
                    .map(|v| v.map(crate::types::interval_text::format))
                    .collect(),
                false => {
                    let micros = arrow::compute::cast(
                        &values[0],
                        &DataType::Time64(arrow::datatypes::TimeUnit::Microsecond),
                    )?;
                    micros
                        .as_primitive::<arrow::datatypes::Time64MicrosecondType>()
                        .iter()
                        .map(|v| v.map(crate::types::interval_text::time))
                        .collect()
                }
            };
            match scalar {
                true => Ok(ColumnarValue::Scalar(datafusion::scalar::ScalarValue::try_from_array(
                    &out, 0,
                )?)),
                false => Ok(ColumnarValue::Array(Arc::new(out))),
            }
        }),
    )
}

/// Both functions, to register.
pub fn udfs() -> [ScalarUDF; 2] {
    [ScalarUDF::from(IntervalScale::new(false)), ScalarUDF::from(IntervalScale::new(true))]
}

/// Plans `span * number`, `number * span` and `span / number` where `span` is any expression of
/// an interval type (a column, a difference of timestamps) as `interval_mul` / `interval_div`,
/// the number cast to `double precision`: DataFusion plans no such arithmetic. Literal spans
/// are rewritten before planning ([`rewrite`]); this takes the ones only types can tell.
#[derive(Debug)]
pub struct SpanArithmetic;

impl datafusion::logical_expr::planner::ExprPlanner for SpanArithmetic {
    fn plan_binary_op(
        &self,
        expr: datafusion::logical_expr::planner::RawBinaryExpr,
        schema: &datafusion::common::DFSchema,
    ) -> datafusion::error::Result<
        datafusion::logical_expr::planner::PlannerResult<
            datafusion::logical_expr::planner::RawBinaryExpr,
        >,
    > {
        use datafusion::logical_expr::planner::PlannerResult;
        use datafusion::logical_expr::{Expr, ExprSchemable, expr::ScalarFunction};
        let divide = match expr.op {
            ast::BinaryOperator::Multiply => false,
            ast::BinaryOperator::Divide => true,
            _ => return Ok(PlannerResult::Original(expr)),
        };
        let (Ok(left), Ok(right)) = (expr.left.get_type(schema), expr.right.get_type(schema))
        else {
            return Ok(PlannerResult::Original(expr));
        };
        let span = |t: &DataType| {
            matches!(t, DataType::Interval(IntervalUnit::MonthDayNano) | DataType::Duration(_))
        };
        let number = |t: &DataType| t.is_numeric() && !span(t);
        let (span_expr, span_type, factor) = if span(&left) && number(&right) {
            (expr.left, left, expr.right)
        } else if !divide && number(&left) && span(&right) {
            (expr.right, right, expr.left)
        } else {
            return Ok(PlannerResult::Original(expr));
        };
        let span_expr = match span_type {
            DataType::Duration(unit) => {
                let micros = DataType::Duration(arrow::datatypes::TimeUnit::Microsecond);
                let span_expr = if unit == arrow::datatypes::TimeUnit::Microsecond {
                    span_expr
                } else {
                    span_expr.cast_to(&micros, schema)?
                };
                Expr::ScalarFunction(ScalarFunction::new_udf(
                    Arc::new(justify_udf()),
                    vec![span_expr],
                ))
            }
            _ => span_expr,
        };
        let factor = factor.cast_to(&DataType::Float64, schema)?;
        let udf = Arc::new(ScalarUDF::from(IntervalScale::new(divide)));
        Ok(PlannerResult::Planned(Expr::ScalarFunction(ScalarFunction::new_udf(
            udf,
            vec![span_expr, factor],
        ))))
    }
}

/// Whether `expr` is an interval literal or a cast to `interval`.
fn is_interval(expr: &ast::Expr) -> bool {
    match expr {
        ast::Expr::Interval(_) => true,
        ast::Expr::Cast { data_type: ast::DataType::Interval { .. }, .. } => true,
        ast::Expr::Nested(inner) => is_interval(inner),
        _ => false,
    }
}

/// `n * interval '..'`, `interval '..' * n` and `interval '..' / n` written as calls of
/// `interval_mul` and `interval_div`, the number cast to `double precision`.
pub fn rewrite(statement: &mut ast::Statement) {
    let _ = ast::visit_expressions_mut(statement, |expr| {
        literal_in_units(expr);
        let ast::Expr::BinaryOp { left, op, right } = expr else {
            return ControlFlow::<()>::Continue(());
        };
        let (function, span, factor) = match op {
            ast::BinaryOperator::Multiply if is_interval(left) && !is_interval(right) => {
                ("interval_mul", left, right)
            }
            ast::BinaryOperator::Multiply if is_interval(right) && !is_interval(left) => {
                ("interval_mul", right, left)
            }
            ast::BinaryOperator::Divide if is_interval(left) && !is_interval(right) => {
                ("interval_div", left, right)
            }
            _ => return ControlFlow::Continue(()),
        };
        let factor = ast::Expr::Cast {
            kind: ast::CastKind::DoubleColon,
            expr: Box::new(ast::Expr::Nested(factor.clone())),
            data_type: ast::DataType::DoublePrecision,
            array: false,
            format: None,
        };
        let args = vec![span.as_ref().clone(), factor]
            .into_iter()
            .map(|e| ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)))
            .collect();
        *expr = ast::Expr::Function(ast::Function {
            name: ast::ObjectName::from(vec![ast::Ident::new(function)]),
            uses_odbc_syntax: false,
            parameters: ast::FunctionArguments::None,
            args: ast::FunctionArguments::List(ast::FunctionArgumentList {
                duplicate_treatment: None,
                args,
                clauses: Vec::new(),
            }),
            filter: None,
            null_treatment: None,
            over: None,
            within_group: Vec::new(),
        });
        ControlFlow::Continue(())
    });
}

/// An interval literal with a clock time or Postgres's unit names (`interval '1 day 01:00'`,
/// `'-1 mons +3 days'`), which DataFusion's reader refuses, written in the units it reads.
fn literal_in_units(expr: &mut ast::Expr) {
    let ast::Expr::Interval(interval) = expr else { return };
    if interval.leading_field.is_some() || interval.last_field.is_some() {
        return;
    }
    let ast::Expr::Value(value) = interval.value.as_mut() else { return };
    let ast::Value::SingleQuotedString(text) = &mut value.value else { return };
    if let Some(v) = crate::types::interval_text::parse(text) {
        *text =
            format!("{} months {} days {} microseconds", v.months, v.days, v.nanoseconds / 1000);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(months: i32, days: i32, micros: i64) -> IntervalMonthDayNano {
        IntervalMonthDayNano::new(months, days, micros * 1000)
    }

    #[test]
    fn products_and_quotients_cascade_fractions_down_as_postgres_does() {
        // (interval, factor, divide, expected), from PostgreSQL 15.
        let hour = 3_600_000_000;
        let cases = [
            (iv(0, 0, 60_000_000), 7.0, false, iv(0, 0, 420_000_000)),
            (iv(1, 0, 0), 1.5, false, iv(1, 15, 0)),
            (iv(0, 1, 0), 1.5, false, iv(0, 1, 12 * hour)),
            (iv(1, 1, hour), -2.0, false, iv(-2, -2, -2 * hour)),
            (iv(0, 1, 0), 3.0, true, iv(0, 0, 8 * hour)),
            (iv(1, 0, 0), 4.0, true, iv(0, 7, 12 * hour)),
            (iv(0, 0, 1), 0.5, false, iv(0, 0, 0)),
        ];
        for (span, factor, divide, expected) in cases {
            assert_eq!(scale(span, factor, divide), Some(expected), "{span:?} {factor} {divide}");
        }
        assert_eq!(scale(iv(i32::MAX, 0, 0), 2.0, false), None);
    }
}
