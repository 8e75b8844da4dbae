//! Postgres's array operators `@>`, `<@` (containment) and `&&` (overlap) over array columns,
//! whose other operand may be an array literal's text (`tags @> '{a}'`).
//!
//! `@>` and `<@` are written as calls of jsonb's containment function (the syntax tree does
//! not say which type a column has, see [`crate::sql::jsonb`]), which hands arrays here; `&&`
//! is written as a call of [`udf`]'s function. As in Postgres, an element matches an equal
//! element, a NULL element matches nothing, duplicates count once, and a NULL array gives NULL.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanBuilder, StringArray};
use arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result as DfResult, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::types::{CastMode, DataType as SluiceType};

/// The name `a && b` is planned as.
pub const OVERLAPS: &str = "sluice_array_overlaps";

/// How the elements of two arrays are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Test {
    /// Every element of the second is in the first (`@>`).
    Contains,
    /// Some element of one is in the other (`&&`).
    Overlaps,
}

/// `left` tested against `right` row by row; `right` is an array of `left`'s type or array
/// text (`'{a,b}'`), read as arrays of `left`'s element type.
pub fn test(left: &ArrayRef, right: &ArrayRef, test: Test) -> DfResult<ArrayRef> {
    let DataType::List(element) = left.data_type() else {
        return Err(DataFusionError::Plan(format!(
            "array operator on a value of type {}",
            left.data_type()
        )));
    };
    let right = match right.as_string_opt::<i32>() {
        Some(text) => text_arrays(text, element.data_type())?,
        None => arrow::compute::cast(right, left.data_type())?,
    };
    let (left, right) = (left.as_list::<i32>(), right.as_list::<i32>());
    let mut out = BooleanBuilder::with_capacity(left.len());
    for row in 0..left.len() {
        if left.is_null(row) || right.is_null(row) {
            out.append_null();
            continue;
        }
        let (mine, theirs) = (elements(&left.value(row))?, elements(&right.value(row))?);
        // A NULL element matches nothing.
        let found = |v: &Option<ScalarValue>| {
            v.as_ref().is_some_and(|v| mine.iter().any(|m| m.as_ref() == Some(v)))
        };
        out.append_value(match test {
            Test::Contains => theirs.iter().all(found),
            Test::Overlaps => theirs.iter().any(found),
        });
    }
    Ok(Arc::new(out.finish()))
}

/// `container @> contained` where either is an array and the other an array or its text:
/// the text is read as arrays of the other's type.
pub fn contains(container: &ArrayRef, contained: &ArrayRef) -> DfResult<ArrayRef> {
    match (container.data_type(), contained.as_string_opt::<i32>()) {
        (DataType::List(_), _) => test(container, contained, Test::Contains),
        (_, _) => {
            let DataType::List(element) = contained.data_type() else {
                return Err(DataFusionError::Plan("array containment of no array".into()));
            };
            let text = arrow::compute::cast(container, &DataType::Utf8)?;
            let container = text_arrays(text.as_string::<i32>(), element.data_type())?;
            test(&container, contained, Test::Contains)
        }
    }
}

/// The values of one array (`None`: a NULL element).
fn elements(values: &ArrayRef) -> DfResult<Vec<Option<ScalarValue>>> {
    (0..values.len())
        .map(|i| match values.is_null(i) {
            true => Ok(None),
            false => ScalarValue::try_from_array(values, i).map(Some),
        })
        .collect()
}

/// Array text read as arrays of `element`s.
fn text_arrays(text: &StringArray, element: &DataType) -> DfResult<ArrayRef> {
    let external = |e: crate::error::Error| DataFusionError::External(Box::new(e));
    let element = SluiceType::from_arrow(element).map_err(external)?;
    crate::types::array_text::arrays_from_text(text, element, CastMode::Strict).map_err(external)
}

/// `a && b`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Overlaps {
    signature: Signature,
}

impl ScalarUDFImpl for Overlaps {
    fn name(&self) -> &str {
        OVERLAPS
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        // A literal's text on the left: the column's type decides.
        let (left, right) = match arrays[0].data_type() {
            DataType::List(_) => (&arrays[0], &arrays[1]),
            _ => (&arrays[1], &arrays[0]),
        };
        test(left, right, Test::Overlaps).map(ColumnarValue::Array)
    }
}

/// The function `&&` is planned as.
pub fn udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(Overlaps { signature: Signature::any(2, Volatility::Immutable) })
}

#[cfg(test)]
mod tests {
    use arrow::array::ListArray;
    use arrow::datatypes::Int32Type;

    use super::*;

    fn lists(rows: Vec<Option<Vec<Option<i32>>>>) -> ArrayRef {
        Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(rows))
    }

    fn shown(result: ArrayRef) -> Vec<Option<bool>> {
        result.as_boolean().iter().collect()
    }

    #[test]
    fn containment_and_overlap_follow_postgres() {
        let left = lists(vec![
            Some(vec![Some(1), Some(2), None]),
            Some(vec![Some(1), Some(2), None]),
            Some(vec![]),
            None,
            Some(vec![Some(3), Some(3)]),
        ]);
        let right = lists(vec![
            Some(vec![Some(2), Some(1), Some(1)]),
            Some(vec![None]),
            Some(vec![]),
            Some(vec![Some(1)]),
            Some(vec![Some(3)]),
        ]);
        assert_eq!(
            shown(test(&left, &right, Test::Contains).unwrap()),
            [Some(true), Some(false), Some(true), None, Some(true)]
        );
        assert_eq!(
            shown(test(&left, &right, Test::Overlaps).unwrap()),
            [Some(true), Some(false), Some(false), None, Some(true)]
        );
        // Array text on the other side, read as the column's element type.
        let text: ArrayRef = Arc::new(StringArray::from(vec![
            Some("{1,2}"),
            Some("{4}"),
            None,
            Some("{}"),
            Some("{3}"),
        ]));
        assert_eq!(
            shown(test(&left, &text, Test::Contains).unwrap()),
            [Some(true), Some(false), None, None, Some(true)]
        );
    }
}
