//! Postgres's numeric functions that DataFusion lacks: `sign`, `div`, `scale`, `width_bucket`,
//! and `mod` and `every` (written as the `%` operator and `bool_and`, see [`rewrite`]).
//!
//! Each answers as Postgres 15 does, types included: `sign` of an integer or a float is
//! `double precision` and of a numeric a numeric (`NaN` stays `NaN`); `div` is the numeric
//! quotient truncated toward zero; `scale` is the number of fraction digits the value prints
//! with; `width_bucket` the bucket of an equal-width histogram (0 below, `count + 1` above).

use std::ops::ControlFlow;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Decimal256Array, Float64Array, Int32Array};
use arrow::datatypes::{DataType, Decimal256Type, Float64Type, Int64Type, i256};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast;

use crate::types::numeric::{self, MAX_PRECISION, Special};

/// The functions of this module, to register with a session.
pub fn udfs() -> Vec<ScalarUDF> {
    [Math::Sign, Math::Div, Math::Scale, Math::WidthBucket]
        .into_iter()
        .map(|f| ScalarUDF::new_from_impl(MathFunction::new(f)))
        .collect()
}

/// Writes `mod(a, b)` as `a % b` (the same rule in Postgres: the remainder has the dividend's
/// sign) and `every(x)` as `bool_and(x)`, Postgres's other name for it. Run after the output
/// columns are named, so they keep the names `mod` and `every`.
pub fn rewrite(statement: &mut ast::Statement) {
    let _ = ast::visit_expressions_mut(statement, |expr| {
        if let ast::Expr::Function(f) = expr
            && let [name] = f.name.0.as_slice()
            && let Some(ident) = name.as_ident()
            && let ast::FunctionArguments::List(list) = &f.args
        {
            let name = ident.value.to_ascii_lowercase();
            match (name.as_str(), list.args.as_slice()) {
                (
                    "mod",
                    [
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(a)),
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(b)),
                    ],
                ) if list.duplicate_treatment.is_none() && list.clauses.is_empty() => {
                    *expr = ast::Expr::Nested(Box::new(ast::Expr::BinaryOp {
                        left: Box::new(a.clone()),
                        op: ast::BinaryOperator::Modulo,
                        right: Box::new(b.clone()),
                    }));
                }
                ("every", _) => {
                    f.name = ast::ObjectName::from(vec![ast::Ident::new("bool_and")]);
                }
                _ => {}
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// Which function a [`MathFunction`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Math {
    Sign,
    Div,
    Scale,
    WidthBucket,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct MathFunction {
    math: Math,
    signature: Signature,
}

impl MathFunction {
    fn new(math: Math) -> Self {
        Self { math, signature: Signature::user_defined(Volatility::Immutable) }
    }
}

fn is_decimal(ty: &DataType) -> bool {
    matches!(ty, DataType::Decimal128(..) | DataType::Decimal256(..))
}

/// The type a numeric argument is read as: decimals as the widest decimal of their scale,
/// other numbers as `double precision` (`sign`) or as an unconstrained numeric (`div`).
fn widened(ty: &DataType, floats: bool) -> Result<DataType> {
    Ok(match ty {
        DataType::Decimal128(_, s) | DataType::Decimal256(_, s) => {
            DataType::Decimal256(MAX_PRECISION, *s)
        }
        DataType::Null => DataType::Int64,
        t if t.is_integer() && !floats => DataType::Int64,
        t if t.is_numeric() => match floats {
            true => DataType::Float64,
            false => {
                let (p, s) = crate::types::DEFAULT_NUMERIC;
                DataType::Decimal256(p, s)
            }
        },
        other => {
            return Err(DataFusionError::Plan(format!(
                "No function matches the given name and argument types: a number is needed, got \
                 {other} (failed to match any signature)"
            )));
        }
    })
}

impl ScalarUDFImpl for MathFunction {
    fn name(&self) -> &str {
        match self.math {
            Math::Sign => "sign",
            Math::Div => "div",
            Math::Scale => "scale",
            Math::WidthBucket => "width_bucket",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        let arity = match self.math {
            Math::Sign | Math::Scale => 1,
            Math::Div => 2,
            Math::WidthBucket => 4,
        };
        if args.len() != arity {
            return Err(DataFusionError::Plan(format!(
                "{}() takes {arity} arguments, got {} (failed to match any signature)",
                self.name(),
                args.len()
            )));
        }
        match self.math {
            Math::Sign => Ok(vec![widened(&args[0], !is_decimal(&args[0]))?]),
            // A numeric as it is: its type's scale is what its values print with.
            Math::Scale => match is_decimal(&args[0]) {
                true => Ok(vec![args[0].clone()]),
                false => Ok(vec![widened(&args[0], false)?]),
            },
            Math::Div => {
                // Both as one type: integers stay integers; otherwise numerics at the larger scale.
                let both = [widened(&args[0], false)?, widened(&args[1], false)?];
                let scale = both.iter().map(decimal_scale).max().unwrap_or(0);
                match both.iter().all(|t| *t == DataType::Int64) {
                    true => Ok(both.to_vec()),
                    false => Ok(vec![DataType::Decimal256(MAX_PRECISION, scale); 2]),
                }
            }
            Math::WidthBucket => {
                let mut out = vec![DataType::Float64; 3];
                for ty in &args[..3] {
                    widened(ty, true)?;
                }
                widened(&args[3], false)?;
                out.push(DataType::Int64);
                Ok(out)
            }
        }
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        Ok(match self.math {
            Math::Sign => match &args[0] {
                DataType::Decimal256(..) => DataType::Decimal256(MAX_PRECISION, 0),
                _ => DataType::Float64,
            },
            Math::Div => DataType::Decimal256(MAX_PRECISION, 0),
            Math::Scale | Math::WidthBucket => DataType::Int32,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let out: ArrayRef = match self.math {
            Math::Sign => sign(&arrays[0]),
            Math::Div => div(&arrays[0], &arrays[1])?,
            Math::Scale => Arc::new(scale(&arrays[0])),
            Math::WidthBucket => Arc::new(width_bucket(&arrays)?),
        };
        debug_assert_eq!(out.len(), rows.max(out.len()));
        Ok(ColumnarValue::Array(out))
    }
}

fn decimal_scale(ty: &DataType) -> i8 {
    match ty {
        DataType::Decimal128(_, s) | DataType::Decimal256(_, s) => *s,
        _ => 0,
    }
}

/// `sign`: -1, 0 or 1, `NaN` for `NaN`.
fn sign(values: &ArrayRef) -> ArrayRef {
    match values.data_type() {
        DataType::Decimal256(..) => {
            let out: Decimal256Array = values
                .as_primitive::<Decimal256Type>()
                .iter()
                .map(|v| {
                    v.map(|v| match Special::of_i256(v) {
                        Some(Special::NaN) => v,
                        _ if v > i256::ZERO => i256::ONE,
                        _ if v < i256::ZERO => i256::MINUS_ONE,
                        _ => i256::ZERO,
                    })
                })
                .collect();
            Arc::new(out.with_data_type(DataType::Decimal256(MAX_PRECISION, 0)))
        }
        _ => {
            let out: Float64Array = values
                .as_primitive::<Float64Type>()
                .iter()
                .map(|v| {
                    v.map(|v| match v {
                        v if v.is_nan() => v,
                        0.0 => 0.0,
                        v => v.signum(),
                    })
                })
                .collect();
            Arc::new(out)
        }
    }
}

/// `div(a, b)`: the quotient truncated toward zero, as a numeric of scale 0.
fn div(a: &ArrayRef, b: &ArrayRef) -> Result<ArrayRef> {
    let zero =
        || DataFusionError::ArrowError(Box::new(arrow::error::ArrowError::DivideByZero), None);
    let out: Decimal256Array = match a.data_type() {
        DataType::Int64 => {
            let (a, b) = (a.as_primitive::<Int64Type>(), b.as_primitive::<Int64Type>());
            a.iter()
                .zip(b.iter())
                .map(|(a, b)| match (a, b) {
                    (Some(_), Some(0)) => Err(zero()),
                    (Some(a), Some(b)) => Ok(Some(i256::from_i128(a as i128 / b as i128))),
                    _ => Ok(None),
                })
                .collect::<Result<_>>()?
        }
        _ => {
            let (a, b) = (a.as_primitive::<Decimal256Type>(), b.as_primitive::<Decimal256Type>());
            a.iter()
                .zip(b.iter())
                .map(|(a, b)| match (a, b) {
                    (Some(a), Some(b)) => div_one(a, b).map(Some),
                    _ => Ok(None),
                })
                .collect::<Result<_>>()?
        }
    };
    Ok(Arc::new(out.with_data_type(DataType::Decimal256(MAX_PRECISION, 0))))
}

/// One `div` of two numerics of the same scale (their raw values divide exactly as the numbers
/// do), with Postgres's answers for the special values.
fn div_one(a: i256, b: i256) -> Result<i256> {
    let zero =
        || DataFusionError::ArrowError(Box::new(arrow::error::ArrowError::DivideByZero), None);
    let negative = |v: i256| v < i256::ZERO;
    Ok(match (Special::of_i256(a), Special::of_i256(b)) {
        (Some(Special::NaN), _) | (_, Some(Special::NaN)) => a.max(b),
        (Some(_), _) if b == i256::ZERO => return Err(zero()),
        (Some(_), Some(_)) => Special::NaN.as_i256(),
        (Some(_), None) => match negative(a) != negative(b) {
            true => Special::NegInfinity.as_i256(),
            false => Special::Infinity.as_i256(),
        },
        (None, Some(_)) => i256::ZERO,
        (None, None) if b == i256::ZERO => return Err(zero()),
        // `/` on i256 truncates toward zero, as `div` does.
        (None, None) => a / b,
    })
}

/// `scale`: the fraction digits a numeric prints with (NULL for the special values).
fn scale(values: &ArrayRef) -> Int32Array {
    let (precision, scale) = match values.data_type() {
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => (*p, *s),
        _ => return (0..values.len()).map(|i| values.is_valid(i).then_some(0)).collect(),
    };
    let digits = numeric::digits_of(precision, scale);
    numeric::values(values.as_ref())
        .into_iter()
        .map(|v| {
            let v = v?;
            if Special::of_i256(v).is_some() {
                return None;
            }
            Some(numeric::display_scale(v, scale, digits))
        })
        .collect()
}

/// `width_bucket(operand, low, high, count)`.
fn width_bucket(args: &[ArrayRef]) -> Result<Int32Array> {
    let [operand, low, high] = [0, 1, 2].map(|i| args[i].as_primitive::<Float64Type>());
    let count = args[3].as_primitive::<Int64Type>();
    let invalid = |what: &str| {
        DataFusionError::External(Box::new(crate::error::Error::InvalidParameter(format!(
            "width_bucket: {what}"
        ))))
    };
    (0..operand.len())
        .map(|i| {
            if [operand.is_null(i), low.is_null(i), high.is_null(i), count.is_null(i)]
                .contains(&true)
            {
                return Ok(None);
            }
            let (x, low, high, count) =
                (operand.value(i), low.value(i), high.value(i), count.value(i));
            if count <= 0 {
                return Err(invalid("count must be greater than zero"));
            }
            if count >= i32::MAX as i64 {
                return Err(invalid("integer out of range"));
            }
            if x.is_nan() || low.is_nan() || high.is_nan() {
                return Err(invalid("operand, lower bound, and upper bound cannot be NaN"));
            }
            if !low.is_finite() || !high.is_finite() {
                return Err(invalid("lower and upper bounds must be finite"));
            }
            let bucket = if low < high {
                match x {
                    x if x < low => 0,
                    x if x >= high => count + 1,
                    x => ((x - low) / (high - low) * count as f64).floor() as i64 + 1,
                }
            } else if low > high {
                match x {
                    x if x > low => 0,
                    x if x <= high => count + 1,
                    x => ((low - x) / (low - high) * count as f64).floor() as i64 + 1,
                }
            } else {
                return Err(invalid("lower bound cannot equal upper bound"));
            };
            // Rounding may put a value just below the top into bucket count + 1.
            let bucket = match (low < high && x < high) || (low > high && x > high) {
                true => bucket.min(count),
                false => bucket,
            };
            Ok(Some(bucket as i32))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(values: &[i128], scale: i8) -> ArrayRef {
        let a: Decimal256Array = values.iter().map(|&v| Some(i256::from_i128(v))).collect();
        Arc::new(a.with_data_type(DataType::Decimal256(MAX_PRECISION, scale)))
    }

    #[test]
    fn div_truncates_toward_zero_and_keeps_specials() {
        let nan = Special::NaN.as_i256();
        let inf = Special::Infinity.as_i256();
        let n = |v: i64| i256::from_i128(v as i128);
        assert_eq!(div_one(n(75), n(20)).unwrap(), n(3), "7.5 div 2.0");
        assert_eq!(div_one(n(-75), n(20)).unwrap(), n(-3));
        assert_eq!(div_one(nan, n(2)).unwrap(), nan);
        assert_eq!(div_one(inf, n(-2)).unwrap(), Special::NegInfinity.as_i256());
        assert_eq!(div_one(n(5), inf).unwrap(), n(0));
        assert!(div_one(n(5), n(0)).is_err());
    }

    #[test]
    fn sign_and_scale_of_numerics() {
        let values = dec(&[150, -225, 0], 2);
        let signs = sign(&values);
        let signs = signs.as_primitive::<Decimal256Type>();
        assert_eq!(signs.values().to_vec(), vec![i256::ONE, i256::MINUS_ONE, i256::ZERO]);
        let constrained: arrow::array::Decimal128Array =
            [150i128, 0].into_iter().map(Some).collect();
        let constrained = constrained.with_data_type(DataType::Decimal128(10, 2));
        let constrained = Arc::new(constrained) as ArrayRef;
        assert_eq!(scale(&constrained).values().to_vec(), vec![2, 2], "numeric(10, 2)");
        let (_, s) = crate::types::DEFAULT_NUMERIC;
        let own = dec(&[150 * 10i128.pow(s as u32 - 2), 0], s);
        assert_eq!(scale(&own).values().to_vec(), vec![1, 0], "1.5 and 0 print with 1 and 0");
    }

    #[test]
    fn width_bucket_as_postgres() {
        let f = |v: f64| Arc::new(Float64Array::from(vec![v])) as ArrayRef;
        let n = |v: i64| Arc::new(arrow::array::Int64Array::from(vec![v])) as ArrayRef;
        for (x, low, high, count, bucket) in [
            (5.35, 0.024, 10.06, 5, 3),
            (-1.0, 0.0, 10.0, 5, 0),
            (10.0, 0.0, 10.0, 5, 6),
            (3.0, 0.0, 10.0, 5, 2),
            (5.0, 10.0, 0.0, 5, 3),
        ] {
            let got = width_bucket(&[f(x), f(low), f(high), n(count)]).unwrap();
            assert_eq!(got.value(0), bucket, "{x} {low} {high} {count}");
        }
        assert!(width_bucket(&[f(1.0), f(0.0), f(0.0), n(5)]).is_err());
        assert!(width_bucket(&[f(1.0), f(0.0), f(1.0), n(0)]).is_err());
    }
}
