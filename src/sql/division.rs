//! `numeric / numeric` (and a numeric and an integer either way) as Postgres divides:
//! [`NumericDivision`] plans each such `/` as a call of [`NumericDiv`], whose quotient has
//! Postgres's digits and prints as Postgres prints it ([`crate::types::quotient`]).
//! DataFusion's own division kept four digits more than the dividend's scale and truncated:
//! `6.50 / 3` was `2.166666` (Postgres: `2.1666666666666667`).
//!
//! `NaN` and the infinities divide as in Postgres: `NaN` if either is `NaN` or both are
//! infinite, a finite number over an infinity is `0`, an infinity over a finite number is the
//! signed infinity, and anything over `0` is a division by zero (22012).

use std::sync::Arc;

use arrow::array::{ArrayRef, Decimal256Array};
use arrow::datatypes::{DataType, i256};
use datafusion::common::DFSchema;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::sql::sqlparser::ast;

use crate::types::numeric::{self, Special};
use crate::types::quotient::{self, DivError, Operand};

/// Plans `a / b` over a numeric and a numeric or an integer as [`NumericDiv`].
#[derive(Debug)]
pub struct NumericDivision;

impl ExprPlanner for NumericDivision {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        if expr.op != ast::BinaryOperator::Divide {
            return Ok(PlannerResult::Original(expr));
        }
        let (Ok(left), Ok(right)) = (expr.left.get_type(schema), expr.right.get_type(schema))
        else {
            return Ok(PlannerResult::Original(expr));
        };
        let decimal =
            |t: &DataType| matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..));
        let operand = |t: &DataType| decimal(t) || t.is_integer() || t.is_null();
        if !(decimal(&left) || decimal(&right)) || !operand(&left) || !operand(&right) {
            return Ok(PlannerResult::Original(expr));
        }
        // An integer is a numeric of no fraction digits (20 digits hold every 64-bit one).
        let exact = |e: Expr, t: &DataType| match decimal(t) {
            true => Ok(e),
            false => e.cast_to(&DataType::Decimal128(20, 0), schema),
        };
        let args = vec![exact(expr.left, &left)?, exact(expr.right, &right)?];
        let udf = Arc::new(ScalarUDF::from(NumericDiv::new()));
        Ok(PlannerResult::Planned(Expr::ScalarFunction(ScalarFunction::new_udf(udf, args))))
    }
}

/// `numeric_div(a, b)`: Postgres's numeric division (see the module docs).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct NumericDiv {
    signature: Signature,
}

impl NumericDiv {
    /// The function.
    pub fn new() -> Self {
        Self { signature: Signature::any(2, Volatility::Immutable) }
    }
}

impl Default for NumericDiv {
    fn default() -> Self {
        Self::new()
    }
}

impl ScalarUDFImpl for NumericDiv {
    fn name(&self) -> &str {
        "numeric_div"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(quotient::TYPE)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let out = divide_columns(&arrays[0], &arrays[1])?;
        match scalar {
            true => {
                Ok(ColumnarValue::Scalar(datafusion::scalar::ScalarValue::try_from_array(&out, 0)?))
            }
            false => Ok(ColumnarValue::Array(out)),
        }
    }
}

/// The precision and scale of a decimal (or NULL) column.
fn decimal_type(column: &ArrayRef) -> Result<(u8, i8)> {
    match column.data_type() {
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => Ok((*p, *s)),
        DataType::Null => Ok((1, 0)),
        other => Err(DataFusionError::Internal(format!("numeric_div of {other}"))),
    }
}

/// The stored values of a decimal (or NULL) column.
fn column_values(column: &ArrayRef) -> Vec<Option<i256>> {
    match column.data_type() {
        DataType::Null => vec![None; column.len()],
        _ => numeric::values(column.as_ref()),
    }
}

/// `a / b`, row by row, as [`quotient::TYPE`].
pub fn divide_columns(a: &ArrayRef, b: &ArrayRef) -> Result<ArrayRef> {
    let ((pa, sa), (pb, sb)) = (decimal_type(a)?, decimal_type(b)?);
    let (da, db) = (numeric::digits_of(pa, sa), numeric::digits_of(pb, sb));
    let quotients: Vec<Option<i256>> = column_values(a)
        .into_iter()
        .zip(column_values(b))
        .map(|(x, y)| {
            let (Some(x), Some(y)) = (x, y) else { return Ok(None) };
            if let Some(special) = special_quotient(x, y)? {
                return Ok(Some(special));
            }
            match quotient::divide(
                &Operand::of(x, sa, da),
                &Operand::of(y, sb, db),
                quotient::SCALE,
            ) {
                Ok(q) => Ok(Some(q)),
                Err(DivError::ByZero) => Err(by_zero()),
                Err(DivError::Overflow) => Err(DataFusionError::ArrowError(
                    Box::new(arrow::error::ArrowError::ArithmeticOverflow(
                        "numeric field overflow: the quotient has more than 55 integer digits"
                            .into(),
                    )),
                    None,
                )),
            }
        })
        .collect::<Result<_>>()?;
    let out = Decimal256Array::from(quotients)
        .with_precision_and_scale(quotient::PRECISION, quotient::SCALE)?;
    Ok(Arc::new(out))
}

/// A division by zero (22012).
fn by_zero() -> DataFusionError {
    DataFusionError::ArrowError(Box::new(arrow::error::ArrowError::DivideByZero), None)
}

/// The stored quotient when `a` or `b` is a special value (`None` when both are numbers).
fn special_quotient(a: i256, b: i256) -> Result<Option<i256>> {
    let (sa, sb) = (Special::of_i256(a), Special::of_i256(b));
    let infinite = |s: Option<Special>| matches!(s, Some(Special::Infinity | Special::NegInfinity));
    let special = match (sa, sb) {
        (None, None) => return Ok(None),
        (Some(Special::NaN), _) | (_, Some(Special::NaN)) => Special::NaN,
        _ if infinite(sa) && infinite(sb) => Special::NaN,
        // A number over an infinity.
        (None, Some(_)) => return Ok(Some(i256::ZERO)),
        (Some(_), None) if b == i256::ZERO => return Err(by_zero()),
        (Some(s), _) => match (s == Special::Infinity) == (b > i256::ZERO) {
            true => Special::Infinity,
            false => Special::NegInfinity,
        },
    };
    Ok(Some(special.as_i256()))
}
