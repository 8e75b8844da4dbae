//! The running state of one aggregate of one group, and how a chunk's values fold into it.

use arrow::array::{Array, ArrayRef};
use arrow::datatypes::DataType as ArrowType;
use datafusion::scalar::ScalarValue;

use super::sum::SumLayout;
use super::{AggCall, AggKind, Group};
use crate::catalog::TableCatalog;
use crate::error::Result;
use crate::storage::row_codec::RowDecoder;
use crate::types::specials::{Specials, special_index, special_of};

/// The running state of one aggregate of one group.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum AggState {
    Count(i64),
    /// sum and avg: the sum of the finite non-NULL inputs, how many there were, and how many
    /// inputs were `NaN` or infinite (see [`super::sum`]).
    Sum {
        sum: ScalarValue,
        count: i64,
        specials: Specials,
    },
    /// min and max: the current extreme (NULL when the multiset is empty).
    Extreme(ScalarValue),
}

/// The state of call `call` (with `layout`, for a sum or avg) of a group without rows.
pub(super) fn empty_state(call: &AggCall, layout: Option<&SumLayout>) -> Result<AggState> {
    Ok(match (call.kind, layout) {
        (AggKind::Count, _) => AggState::Count(0),
        (AggKind::Sum | AggKind::Avg, Some(layout)) => AggState::Sum {
            sum: ScalarValue::new_zero(&layout.sum_type)?,
            count: 0,
            specials: [0; 3],
        },

        (kind, _) if kind.reads_multiset() => {
            AggState::Extreme(ScalarValue::try_from(&call.output_type)?)
        }
        (kind, _) => {
            return Err(crate::error::Error::Stream(format!("{kind:?} without its layout")));
        }
    })
}

/// Adds `delta` (the change of `count` non-NULL inputs) to call `call`'s sum in `group`.
pub(super) fn add_to_sum(
    group: &mut Group,
    call: usize,
    delta: &ScalarValue,
    count: i64,
) -> Result<()> {
    if let AggState::Sum { sum, count: n, .. } = &mut group.states[call] {
        *sum = sum.add(delta)?;
        *n += count;
    }
    Ok(())
}

/// Adds (`sign` 1) or takes away (-1) one non-NULL input `value` of a count, sum or avg (a
/// sum's in `layout`).
pub(super) fn add_value(
    state: &mut AggState,
    layout: Option<&SumLayout>,
    value: &ScalarValue,
    sign: i64,
) -> Result<()> {
    match (state, layout) {
        (AggState::Count(c), _) => *c += sign,
        (AggState::Sum { sum, count, specials }, Some(layout)) => {
            match special_of(value).filter(|_| layout.specials) {
                Some(special) => specials[special_index(special)] += sign,
                None => {
                    let v = value.cast_to(&layout.sum_type)?;
                    *sum = if sign > 0 { sum.add(&v)? } else { sum.sub(&v)? };
                    *count += sign;
                }
            }
        }
        (AggState::Sum { .. }, None) => {}
        (AggState::Extreme(_), _) => {}
    }
    Ok(())
}

/// Adds up the signed values of a chunk's non-NULL rows per group: `(group slot, (sum, number
/// of values))` for every group with one, wrapping on overflow.
pub(super) fn fold(
    slots: &[usize],
    signs: &[i64],
    valid: impl Fn(usize) -> bool,
    value: impl Fn(usize) -> i128,
) -> Vec<(usize, (i128, i64))> {
    fold_rows(slots, signs, valid, |_| 1, value)
}

/// [`fold`] for partial rows: per group, the signed sum of their sums and of their counts of
/// non-NULL inputs, wrapping on overflow.
pub(super) fn fold_partial(
    slots: &[usize],
    signs: &[i64],
    count: impl Fn(usize) -> i64,
    value: impl Fn(usize) -> i128,
) -> Vec<(usize, (i128, i64))> {
    fold_rows(slots, signs, |_| true, count, value)
}

/// Per group slot of the rows for which `include` holds: the signed sum of `value` and of
/// `count`, wrapping on overflow.
pub(super) fn fold_rows(
    slots: &[usize],
    signs: &[i64],
    include: impl Fn(usize) -> bool,
    count: impl Fn(usize) -> i64,
    value: impl Fn(usize) -> i128,
) -> Vec<(usize, (i128, i64))> {
    let mut deltas: hashbrown::HashMap<usize, (i128, i64)> = hashbrown::HashMap::new();
    for (row, (&slot, &sign)) in slots.iter().zip(signs).enumerate() {
        if include(row) {
            let (sum, n) = deltas.entry(slot).or_default();
            let v = value(row);
            *sum = if sign > 0 { sum.wrapping_add(v) } else { sum.wrapping_sub(v) };
            *n += sign * count(row);
        }
    }
    deltas.into_iter().collect()
}

/// `array` cast to `to`, unless it already has that type.
pub(crate) fn cast(array: ArrayRef, to: &ArrowType) -> Result<ArrayRef> {
    if array.data_type() == to {
        return Ok(array);
    }
    Ok(arrow::compute::cast(&array, to)?)
}

pub(super) fn as_i64(v: &ScalarValue) -> i64 {
    match v {
        ScalarValue::Int64(Some(n)) => *n,
        _ => 0,
    }
}

pub(super) fn as_f64(v: &ScalarValue) -> Result<f64> {
    match v.cast_to(&ArrowType::Float64)? {
        ScalarValue::Float64(Some(f)) => Ok(f),
        _ => Ok(0.0),
    }
}

/// The value of column `index` of a stored row (key and value) of `table`.
pub(super) fn column_of(
    table: &TableCatalog,
    key: &[u8],
    row: &[u8],
    index: usize,
) -> Result<ScalarValue> {
    let types = table.types();
    let mut decoder = RowDecoder::new(&types, &table.pk, &[index], 1);
    decoder.push(key, row)?;
    Ok(ScalarValue::try_from_array(&decoder.finish()[0], 0)?)
}

/// The last column of a stored multiset row: the value's count.
pub(super) fn last_i64(table: &TableCatalog, key: &[u8], row: &[u8]) -> Result<i64> {
    Ok(as_i64(&column_of(table, key, row, table.columns.len() - 1)?))
}
