//! Sums and averages over floats and numerics, exact as Postgres computes them with `NaN` and
//! the infinities among their inputs.
//!
//! A running sum cannot hold a special value: `NaN` added and taken away again leaves `NaN`,
//! and `Infinity - Infinity` is `NaN`, so a sum that once saw one would never recover. Each
//! group keeps instead the sum of its finite inputs and, beside it, how many of its inputs
//! are `NaN`, `Infinity` and `-Infinity`. Its output is Postgres's: `NaN` if any input is
//! `NaN` or both infinities are there, else the infinity there is, else the finite sum (or
//! average). A numeric average is the exact sum divided by the count at the output's scale,
//! as the batch engine divides it (not in floating point).
//!
//! The result table says which layout a view's sum has ([`SumLayout`]): views created before
//! the special counts existed keep theirs (a float average summed in a float, numeric specials
//! left out), so a restart never reads a row by a layout it was not written in.
//!
//! ```text
//! sum(x), inputs in order        finite sum  nonnull  NaN  +Inf  -Inf   output
//! + 1.5                          1.5         1        0    0     0      1.5
//! + NaN                          1.5         1        1    0     0      NaN
//! + Infinity                     1.5         1        1    1     0      NaN
//! - NaN                          1.5         1        0    1     0      Infinity
//! - Infinity                     1.5         1        0    0     0      1.5
//! ```

use arrow::datatypes::{DataType as ArrowType, i256};
use datafusion::scalar::ScalarValue;

use super::AggKind;
use crate::catalog::TableCatalog;
use crate::error::{Error, Result};
use crate::types::numeric;
use crate::types::quotient;

/// What a `sum` or `avg` keeps per group in its result table: `sum_{i}` (of this type) and
/// `nonnull_{i}`, then with `specials` the counts `nan_{i}`, `posinf_{i}`, `neginf_{i}`.
#[derive(Debug, Clone, PartialEq)]
pub struct SumLayout {
    /// The type the finite inputs are added up in.
    pub sum_type: ArrowType,
    /// Whether the special inputs are counted (a float or numeric argument).
    pub specials: bool,
}

impl SumLayout {
    /// The layout of a new `kind` call (`sum` or `avg`) of `arg_type` with result
    /// `output_type`: a sum adds up in its result type; an average of numerics in the numeric
    /// a sum of them has (ten more digits, at most 76), of anything else in a float.
    pub fn new(kind: AggKind, output_type: &ArrowType, arg_type: &ArrowType) -> Self {
        let sum_type = match (kind, arg_type) {
            (AggKind::Avg, &ArrowType::Decimal128(p, s)) => {
                ArrowType::Decimal128((p + 10).min(38), s)
            }
            (AggKind::Avg, &ArrowType::Decimal256(p, s)) => {
                ArrowType::Decimal256((p + 10).min(numeric::MAX_PRECISION), s)
            }
            (AggKind::Avg, _) => ArrowType::Float64,
            _ => output_type.clone(),
        };
        let specials = has_specials(arg_type);
        Self { sum_type, specials }
    }

    /// The layout of the state stored from column `at` of `table` (its `sum_{i}` column).
    pub fn stored(table: &TableCatalog, at: usize) -> Self {
        let sum_type = table.columns[at].data_type.to_arrow();
        let specials = table.columns.get(at + 2).is_some_and(|c| c.name.starts_with("nan_"));
        Self { sum_type, specials }
    }

    /// The same, read from the fields of a schema (a partial row's) from column `at`.
    pub fn of_fields(fields: &arrow::datatypes::Fields, at: usize) -> Self {
        let sum_type = fields[at].data_type().clone();
        let specials = fields.get(at + 2).is_some_and(|f| f.name().starts_with("nan_"));
        Self { sum_type, specials }
    }

    /// Its columns for call `call`: name and type.
    pub fn columns(&self, call: usize) -> Vec<(String, ArrowType)> {
        let mut columns = vec![
            (format!("sum_{call}"), self.sum_type.clone()),
            (format!("nonnull_{call}"), ArrowType::Int64),
        ];
        if self.specials {
            for name in ["nan", "posinf", "neginf"] {
                columns.push((format!("{name}_{call}"), ArrowType::Int64));
            }
        }
        columns
    }

    /// How many columns it takes.
    pub fn width(&self) -> usize {
        if self.specials { 5 } else { 2 }
    }
}

/// Whether values of `ty` can be `NaN` or infinite.
fn has_specials(ty: &ArrowType) -> bool {
    ty.is_floating() || matches!(ty, ArrowType::Decimal128(..) | ArrowType::Decimal256(..))
}

/// The average of `count` inputs adding up to the numeric `sum`, of type `output_type`: a
/// quotient with Postgres's digits ([`crate::types::quotient`]); views created before averages
/// were quotients keep their type, the sum divided at its scale, truncated.
pub fn numeric_avg(sum: &ScalarValue, count: i64, output_type: &ArrowType) -> Result<ScalarValue> {
    let (value, precision, scale) = match *sum {
        ScalarValue::Decimal128(Some(v), p, s) => (i256::from_i128(v), p, s),
        ScalarValue::Decimal256(Some(v), p, s) => (v, p, s),
        ref other => return Err(Error::Stream(format!("a numeric average of the sum {other}"))),
    };
    if *output_type == quotient::TYPE {
        let digits = numeric::digits_of(precision, scale);
        let avg = quotient::average(value, scale, digits, count.max(0) as u64).map_err(|_| {
            Error::OutOfRange(
                "numeric field overflow: the average has more than 55 integer digits".into(),
            )
        })?;
        return Ok(ScalarValue::Decimal256(avg, quotient::PRECISION, quotient::SCALE));
    }
    let (precision, out_scale) = match *output_type {
        ArrowType::Decimal128(p, s) | ArrowType::Decimal256(p, s) => (p, s),
        ref other => return Err(Error::Stream(format!("a numeric average typed {other}"))),
    };
    let overflow = || {
        Error::OutOfRange(format!(
            "numeric average out of range for numeric({precision},{out_scale})"
        ))
    };
    let shift =
        i256::from_i128(10).checked_pow((out_scale - scale).max(0) as u32).ok_or_else(overflow)?;
    let avg = value
        .checked_mul(shift)
        .and_then(|v| v.checked_div(i256::from_i128(i128::from(count))))
        .ok_or_else(overflow)?;
    Ok(match *output_type {
        ArrowType::Decimal128(..) => {
            ScalarValue::Decimal128(Some(avg.to_i128().ok_or_else(overflow)?), precision, out_scale)
        }
        _ => ScalarValue::Decimal256(Some(avg), precision, out_scale),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_average_is_a_quotient_with_postgres_digits() {
        let quotient = |sum: ScalarValue, count| {
            let avg = numeric_avg(&sum, count, &quotient::TYPE).unwrap();
            avg.to_string()
        };
        // Postgres: avg of 1.50, 2.25, 3.125 (sum 6.875 at scale 3) is 2.2916666666666667.
        let sum = ScalarValue::Decimal128(Some(6875), 38, 3);
        assert_eq!(quotient(sum, 3), "2.29166666666666670000");
        // Integers: 7 / 3 is 2.3333333333333333.
        let sum = ScalarValue::Decimal128(Some(7), 30, 0);
        assert_eq!(quotient(sum, 3), "2.33333333333333330000");
        let sum = ScalarValue::Decimal128(Some(-2), 30, 0);
        assert_eq!(quotient(sum, 3), "-0.66666666666666666667");
    }

    #[test]
    fn a_numeric_average_divides_the_exact_sum_at_the_output_scale() {
        let sum = ScalarValue::Decimal128(Some(400), 38, 2); // 4.00
        let avg = numeric_avg(&sum, 3, &ArrowType::Decimal128(38, 6)).unwrap();
        assert_eq!(avg, ScalarValue::Decimal128(Some(1_333_333), 38, 6)); // 1.333333
        let sum = ScalarValue::Decimal256(Some(i256::from_i128(-7)), 76, 0);
        let avg = numeric_avg(&sum, 2, &ArrowType::Decimal256(76, 4)).unwrap();
        assert_eq!(avg, ScalarValue::Decimal256(Some(i256::from_i128(-35_000)), 76, 4));
    }

    #[test]
    fn layouts_count_specials_for_floats_and_numerics_only() {
        let int = SumLayout::new(AggKind::Sum, &ArrowType::Int64, &ArrowType::Int32);
        assert_eq!((int.specials, int.width()), (false, 2));
        let avg = SumLayout::new(AggKind::Avg, &ArrowType::Float64, &ArrowType::Int32);
        assert_eq!((avg.sum_type, avg.specials), (ArrowType::Float64, false));
        let avg = SumLayout::new(
            AggKind::Avg,
            &ArrowType::Decimal128(14, 6),
            &ArrowType::Decimal128(10, 2),
        );
        assert_eq!((avg.sum_type.clone(), avg.specials), (ArrowType::Decimal128(20, 2), true));
        let names: Vec<String> = avg.columns(3).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["sum_3", "nonnull_3", "nan_3", "posinf_3", "neginf_3"]);
    }
}
