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
//! [`PostgresCasts`]: casts DataFusion plans differently from Postgres, rewritten before the
//! optimizer folds constant casts (so literals are covered too):
//! - a `numeric` cast to an integer type rounds half away from zero (`2.5::int` is 3,
//!   `-2.5::int` is -3) where DataFusion truncates: it first casts to a `numeric` of scale 0,
//!   which rounds (see [`crate::types::rounding_scale`]); a `real` or `double precision` one
//!   rounds half to even (`2.5::float8::int` is 2, `3.5::float8::int` is 4), as Postgres's
//!   `rint` does;
//! - text cast to `bytea` reads `\x` hex as Postgres does (`'\x00ff'::bytea` is two bytes)
//!   instead of taking the text's bytes: it is a call of `sql::functions::bytea_in_udf`;
//! - a `numeric` cast to text, a float or another numeric keeps `NaN` and the infinities and
//!   prints the value's digits: it is a call of `sql::functions::NumericCast`;
//! - `'infinity'` and `'-infinity'` cast to a date or timestamp are the values that stand for
//!   them (Arrow's cast does not read the words);
//! - `length(bytea)` counts bytes (type coercion had cast the bytes to text, which fails on
//!   anything but UTF-8): it is `octet_length`.

use std::sync::Arc;

use arrow::datatypes::{DataType, FieldRef, TimeUnit};
use datafusion::common::DFSchema;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::error::Result;
use datafusion::logical_expr::expr::{Cast, ScalarFunction, TryCast};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, ScalarUDF};
use datafusion::optimizer::AnalyzerRule;
use datafusion::scalar::ScalarValue;

use crate::sql::functions::{NumericCast, OctetLength, bytea_in_udf, round_half_even_udf};
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
#[derive(Debug)]
pub struct PostgresCasts {
    bytea_in: Arc<ScalarUDF>,
    octet_length: Arc<ScalarUDF>,
    round_half_even: Arc<ScalarUDF>,
    justify: Arc<ScalarUDF>,
}

impl Default for PostgresCasts {
    fn default() -> Self {
        Self {
            bytea_in: Arc::new(bytea_in_udf()),
            octet_length: Arc::new(ScalarUDF::from(OctetLength::default())),
            round_half_even: Arc::new(round_half_even_udf()),
            justify: Arc::new(crate::sql::interval::justify_udf()),
        }
    }
}

impl PostgresCasts {
    /// `expr` cast as described by `field`, the Postgres way where that differs.
    fn cast(&self, expr: Box<Expr>, field: FieldRef, schema: &DFSchema) -> Transformed<Expr> {
        let from = expr.get_type(schema).ok();
        if let (Some(DataType::Duration(_)), DataType::Interval(_)) = (&from, field.data_type()) {
            // A difference of timestamps is days and time (`25 hours` is `1 day 01:00:00`),
            // so it compares with intervals as in Postgres.
            let micros = Expr::Cast(Cast::new(expr, DataType::Duration(TimeUnit::Microsecond)));
            let call = ScalarFunction::new_udf(Arc::clone(&self.justify), vec![micros]);
            return Transformed::yes(Expr::ScalarFunction(call));
        }
        if let (Some(from @ (DataType::Interval(_) | DataType::Time64(_))), DataType::Utf8) =
            (&from, field.data_type())
        {
            // As Postgres prints them (Arrow's text was `1 days 2 hours`, `10:30:00.500`).
            let udf = crate::sql::interval::text_udf(from.clone());
            let call = ScalarFunction::new_udf(Arc::new(udf), vec![*expr]);
            return Transformed::yes(Expr::ScalarFunction(call));
        }
        if let Some(scale_zero) = from.as_ref().and_then(|f| rounding_scale(f, field.data_type())) {
            let rounded = Expr::Cast(Cast::new(expr, scale_zero));
            return Transformed::yes(Expr::Cast(Cast::new_from_field(Box::new(rounded), field)));
        }
        if matches!(from, Some(DataType::Float32 | DataType::Float64))
            && field.data_type().is_integer()
        {
            let float = Expr::Cast(Cast::new(expr, DataType::Float64));
            let call = ScalarFunction::new_udf(Arc::clone(&self.round_half_even), vec![float]);
            let rounded = Box::new(Expr::ScalarFunction(call));
            return Transformed::yes(Expr::Cast(Cast::new_from_field(rounded, field)));
        }
        if let Expr::Literal(ScalarValue::Utf8(Some(text)), _) = expr.as_ref()
            && let Some(infinite) = infinite_literal(text, field.data_type())
        {
            return Transformed::yes(Expr::Literal(infinite, None));
        }
        if let Some(from) = &from
            && NumericCast::applies(from, field.data_type())
        {
            let cast = ScalarUDF::from(NumericCast::new(field.data_type().clone()));
            let call = ScalarFunction::new_udf(Arc::new(cast), vec![*expr]);
            return Transformed::yes(Expr::ScalarFunction(call));
        }
        if from == Some(DataType::Utf8) && field.data_type() == &DataType::Binary {
            let call = ScalarFunction::new_udf(Arc::clone(&self.bytea_in), vec![*expr]);
            return Transformed::yes(Expr::ScalarFunction(call));
        }
        Transformed::no(Expr::Cast(Cast { expr, field }))
    }

    /// `length(x)` of a `bytea` `x`, which type coercion made `length(CAST(x AS text))`, as
    /// `octet_length(x)`.
    /// `ceil`, `floor`, `round` and `trunc` of a numeric with fraction digits, at the scale
    /// Postgres gives the result: 0, or the digits asked for (`round(1.50, 1)` is `1.5`); and
    /// `round` of a float half to even.
    fn rounding(&self, call: ScalarFunction, schema: &DFSchema) -> Transformed<Expr> {
        let rounds = matches!(call.name(), "ceil" | "floor" | "round" | "trunc");
        let from = call.args.first().and_then(|a| a.get_type(schema).ok());
        let (precision, scale) = match from {
            Some(DataType::Decimal128(p, s) | DataType::Decimal256(p, s)) if rounds => (p, s),
            // A float rounds half to even, as Postgres's `round(double precision)` does.
            Some(DataType::Float64 | DataType::Float32)
                if call.name() == "round" && call.args.len() == 1 =>
            {
                let float =
                    Expr::Cast(Cast::new(Box::new(call.args[0].clone()), DataType::Float64));
                let call = ScalarFunction::new_udf(Arc::clone(&self.round_half_even), vec![float]);
                return Transformed::yes(Expr::ScalarFunction(call));
            }
            _ => return Transformed::no(Expr::ScalarFunction(call)),
        };
        let digits = match call.args.get(1) {
            None => 0,
            Some(Expr::Literal(n, _)) => match n.cast_to(&DataType::Int64) {
                Ok(ScalarValue::Int64(Some(n))) if (0..=i8::MAX as i64).contains(&n) => n as i8,
                _ => return Transformed::no(Expr::ScalarFunction(call)),
            },
            Some(_) => return Transformed::no(Expr::ScalarFunction(call)),
        };
        if digits == scale || crate::types::numeric::prints_own_digits(precision, scale) {
            return Transformed::no(Expr::ScalarFunction(call));
        }
        let integer_digits = precision as i16 - scale as i16 + 1;
        let precision = (integer_digits + digits as i16).clamp(1, 76) as u8;
        let to = match precision {
            p if p <= 38 => DataType::Decimal128(p, digits),
            p => DataType::Decimal256(p, digits),
        };
        let cast = ScalarUDF::from(NumericCast::new(to));
        let call = ScalarFunction::new_udf(Arc::new(cast), vec![Expr::ScalarFunction(call)]);
        Transformed::yes(Expr::ScalarFunction(call))
    }

    fn length(&self, call: ScalarFunction, schema: &DFSchema) -> Transformed<Expr> {
        let is_length = matches!(call.name(), "length" | "char_length" | "character_length");
        if let (true, [Expr::Cast(Cast { expr, .. })]) = (is_length, call.args.as_slice())
            && matches!(expr.get_type(schema), Ok(DataType::Binary))
        {
            let octets =
                ScalarFunction::new_udf(Arc::clone(&self.octet_length), vec![*expr.clone()]);
            return Transformed::yes(Expr::ScalarFunction(octets));
        }
        Transformed::no(Expr::ScalarFunction(call))
    }
}

/// `'infinity'` or `'-infinity'` cast to a date or timestamp: the extreme value that stands for
/// it (see [`crate::types::infinite_date`]); Arrow's cast does not read the words.
fn infinite_literal(text: &str, to: &DataType) -> Option<ScalarValue> {
    let positive = match text.trim().to_ascii_lowercase().as_str() {
        "infinity" | "+infinity" => true,
        "-infinity" => false,
        _ => return None,
    };
    let micros = Some(crate::types::infinite_timestamp(positive));
    Some(match to {
        DataType::Date32 => ScalarValue::Date32(Some(crate::types::infinite_date(positive))),
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            ScalarValue::TimestampMicrosecond(micros, tz.clone())
        }
        DataType::Timestamp(TimeUnit::Nanosecond, tz) => {
            ScalarValue::TimestampNanosecond(micros, tz.clone())
        }
        _ => return None,
    })
}

impl AnalyzerRule for PostgresCasts {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|plan| {
            let schema = merge_schema(&plan.inputs());
            let names = NamePreserver::new(&plan);
            plan.map_expressions(|expr| {
                let name = names.save(&expr);
                let rewritten = expr.transform_up(|e| match e {
                    Expr::Cast(Cast { expr, field }) => Ok(self.cast(expr, field, &schema)),
                    Expr::ScalarFunction(call) => {
                        Ok(self.length(call, &schema).transform_data(|e| match e {
                            Expr::ScalarFunction(call) => Ok(self.rounding(call, &schema)),
                            other => Ok(Transformed::no(other)),
                        })?)
                    }
                    other => Ok(Transformed::no(other)),
                })?;
                Ok(rewritten.update_data(|e| name.restore(e)))
            })
        })
        .data()
    }

    fn name(&self) -> &str {
        "postgres_casts"
    }
}
