//! Values that are not numbers, `NaN`, `Infinity` and `-Infinity` of floats and numerics, as
//! sums and averages count them: a running sum cannot hold one (`NaN` added and taken away
//! again leaves `NaN`; `Infinity - Infinity` is `NaN`), so the finite values are added up and
//! the special ones counted apart; the result is Postgres's ([`special_output`]). Views
//! (`stream::executor::hash_agg::sum`) and batch queries (`sql::aggregates`) both count them so.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType as ArrowType, Float32Type, Float64Type};
use datafusion::scalar::ScalarValue;

use crate::error::{Error, Result};
use crate::types::numeric::{self, Special};

/// How many inputs of a group are `NaN`, `Infinity` and `-Infinity`, in that order.
pub type Specials = [i64; 3];

/// Where a special value is counted in [`Specials`].
pub fn special_index(special: Special) -> usize {
    match special {
        Special::NaN => 0,
        Special::Infinity => 1,
        Special::NegInfinity => 2,
    }
}

/// `column` without its special values (NULL in their place) and, when it holds any, which
/// rows hold which: a float's `NaN` and infinities, a numeric's stored special values.
pub fn split_specials(column: ArrayRef) -> (ArrayRef, Option<Vec<Option<Special>>>) {
    let specials: Vec<Option<Special>> = match column.data_type() {
        ArrowType::Decimal128(..) | ArrowType::Decimal256(..) => {
            if !numeric::has_special(column.as_ref()) {
                return (column, None);
            }
            numeric::values(column.as_ref())
                .into_iter()
                .map(|v| v.and_then(Special::of_i256))
                .collect()
        }
        ArrowType::Float64 => {
            let values = column.as_primitive::<Float64Type>();
            if values.values().iter().all(|v| v.is_finite()) {
                return (column, None);
            }
            values.iter().map(|v| v.and_then(float_special)).collect()
        }
        ArrowType::Float32 => {
            let values = column.as_primitive::<Float32Type>();
            if values.values().iter().all(|v| v.is_finite()) {
                return (column, None);
            }
            values.iter().map(|v| v.and_then(|v| float_special(f64::from(v)))).collect()
        }
        _ => return (column, None),
    };
    if specials.iter().all(Option::is_none) {
        return (column, None);
    }
    let nulls: NullBuffer =
        specials.iter().enumerate().map(|(i, s)| s.is_none() && column.is_valid(i)).collect();
    let data = column.to_data().into_builder().nulls(Some(nulls)).build();
    let without = arrow::array::make_array(data.expect("the same layout with fewer values"));
    (without, Some(specials))
}

/// The special value a float is, if it is one.
fn float_special(v: f64) -> Option<Special> {
    match v {
        v if v.is_nan() => Some(Special::NaN),
        f64::INFINITY => Some(Special::Infinity),
        f64::NEG_INFINITY => Some(Special::NegInfinity),
        _ => None,
    }
}

/// The special value a single input `value` is, if it is one.
pub fn special_of(value: &ScalarValue) -> Option<Special> {
    match value {
        ScalarValue::Float64(Some(v)) => float_special(*v),
        ScalarValue::Float32(Some(v)) => float_special(f64::from(*v)),
        ScalarValue::Decimal128(Some(v), ..) => Special::of_i128(*v),
        ScalarValue::Decimal256(Some(v), ..) => Special::of_i256(*v),
        _ => None,
    }
}

/// The output of a group whose inputs include `specials`, as Postgres's: `NaN` if any is
/// `NaN` or both infinities are there, else the infinity; `None` when there are none.
pub fn special_output(specials: &Specials, output_type: &ArrowType) -> Result<Option<ScalarValue>> {
    special_of_counts(specials).map(|s| special_value(s, output_type)).transpose()
}

/// Which special value a result over inputs with `specials` is (see [`special_output`]).
pub fn special_of_counts(specials: &Specials) -> Option<Special> {
    Some(match *specials {
        [0, 0, 0] => return None,
        [nan, pos, neg] if nan > 0 || (pos > 0 && neg > 0) => Special::NaN,
        [_, pos, _] if pos > 0 => Special::Infinity,
        _ => Special::NegInfinity,
    })
}

/// `special` as a value of `ty` (a float or a numeric).
pub fn special_value(special: Special, ty: &ArrowType) -> Result<ScalarValue> {
    let float = match special {
        Special::NaN => f64::NAN,
        Special::Infinity => f64::INFINITY,
        Special::NegInfinity => f64::NEG_INFINITY,
    };
    Ok(match *ty {
        ArrowType::Float64 => ScalarValue::Float64(Some(float)),
        ArrowType::Float32 => ScalarValue::Float32(Some(float as f32)),
        ArrowType::Decimal128(p, s) => ScalarValue::Decimal128(Some(special.as_i128()), p, s),
        ArrowType::Decimal256(p, s) => ScalarValue::Decimal256(Some(special.as_i256()), p, s),
        ref other => {
            return Err(Error::Stream(format!("a {} result of type {other}", special.text())));
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Decimal128Array, Float64Array};

    use super::*;

    #[test]
    fn the_special_counts_decide_the_output_as_in_postgres() {
        let ty = ArrowType::Float64;
        let out = |s: Specials| special_output(&s, &ty).unwrap().map(|v| v.to_string());
        assert_eq!(out([0, 0, 0]), None);
        assert_eq!(out([1, 0, 0]).as_deref(), Some("NaN"));
        assert_eq!(out([0, 2, 0]).as_deref(), Some("inf"));
        assert_eq!(out([0, 0, 1]).as_deref(), Some("-inf"));
        assert_eq!(out([0, 1, 1]).as_deref(), Some("NaN"), "Infinity + -Infinity");
        let numeric = ArrowType::Decimal128(38, 10);
        let nan = special_output(&[2, 0, 0], &numeric).unwrap().unwrap();
        assert_eq!(nan, ScalarValue::Decimal128(Some(Special::NaN.as_i128()), 38, 10));
        assert!(special_output(&[1, 0, 0], &ArrowType::Int64).is_err());
    }

    #[test]
    fn specials_are_split_from_floats_and_numerics() {
        let floats: ArrayRef = Arc::new(Float64Array::from(vec![
            Some(1.0),
            Some(f64::NAN),
            None,
            Some(f64::NEG_INFINITY),
        ]));
        let (finite, specials) = split_specials(floats);
        assert_eq!(
            specials,
            Some(vec![None, Some(Special::NaN), None, Some(Special::NegInfinity)])
        );
        assert_eq!(finite.null_count(), 3);
        assert!(finite.is_valid(0));
        let plain: ArrayRef = Arc::new(Float64Array::from(vec![1.0, 2.5]));
        assert!(split_specials(plain).1.is_none());
        let numerics = Decimal128Array::from(vec![Some(150), Some(Special::Infinity.as_i128())]);
        let numerics: ArrayRef = Arc::new(numerics.with_precision_and_scale(38, 2).unwrap());
        let (finite, specials) = split_specials(numerics);
        assert_eq!(specials, Some(vec![None, Some(Special::Infinity)]));
        assert_eq!((finite.is_valid(0), finite.is_valid(1)), (true, false));
    }
}
