//! The final phase of a two-phase aggregation: partial rows (see
//! [`LocalAggExecutor`](crate::stream::executor::local_agg::LocalAggExecutor)) folded into
//! their groups.

use super::*;

impl Aggregation {
    /// Folds a chunk of partial rows (group columns, `row_count`, then per call its state
    /// columns, as in the result table) into the touched groups: each adds its counts and sums,
    /// signed by its op.
    pub(super) fn apply_partial(
        &mut self,
        chunk: &StreamChunk,
        slots: &[usize],
        signs: &[i64],
    ) -> Result<()> {
        let data = chunk.data();
        let int64 = |column: usize| -> Result<&arrow::array::Int64Array> {
            data.column(column)
                .as_primitive_opt::<Int64Type>()
                .ok_or_else(|| Error::Stream(format!("partial row column {column} is not a count")))
        };
        let mut column = self.n_groups();
        let row_counts = int64(column)?.values();
        for ((&slot, &sign), &count) in slots.iter().zip(signs).zip(row_counts) {
            self.groups[slot].row_count += sign * count;
        }
        column += 1;
        for i in 0..self.calls.len() {
            match self.calls[i].kind {
                AggKind::Count => {
                    let counts = int64(column)?.values();
                    for ((&slot, &sign), &count) in slots.iter().zip(signs).zip(counts) {
                        if let AggState::Count(c) = &mut self.groups[slot].states[i] {
                            *c += sign * count;
                        }
                    }
                    column += 1;
                }
                AggKind::Sum => {
                    let sums = data.column(column);
                    let counts = int64(column + 1)?.values();
                    let count = |row: usize| counts[row];
                    let deltas = match sums.data_type() {
                        ArrowType::Int64 => {
                            let values = sums.as_primitive::<Int64Type>().values();
                            fold_partial(slots, signs, count, |row| i128::from(values[row]))
                        }
                        ArrowType::Decimal128(..) => {
                            let values = sums.as_primitive::<Decimal128Type>().values();
                            fold_partial(slots, signs, count, |row| values[row])
                        }
                        other => Err(Error::Stream(format!("a partial sum of {other}")))?,
                    };
                    for (slot, (sum, count)) in deltas {
                        let delta = match sums.data_type() {
                            &ArrowType::Decimal128(p, s) => {
                                ScalarValue::Decimal128(Some(sum), p, s)
                            }
                            _ => ScalarValue::Int64(Some(sum as i64)),
                        };
                        add_to_sum(&mut self.groups[slot], i, &delta, count)?;
                    }
                    // The partial rows' special counts, kept where the result table has them.
                    let partial = SumLayout::of_fields(data.schema().fields(), column);
                    if partial.specials && self.layouts[i].as_ref().is_some_and(|l| l.specials) {
                        for k in 0..3 {
                            let counts = int64(column + 2 + k)?.values();
                            for ((&slot, &sign), &n) in slots.iter().zip(signs).zip(counts) {
                                if let AggState::Sum { specials, .. } =
                                    &mut self.groups[slot].states[i]
                                {
                                    specials[k] += sign * n;
                                }
                            }
                        }
                    }
                    column += partial.width();
                }
                kind => Err(Error::Stream(format!("{kind:?} has no partial rows to merge")))?,
            }
        }
        Ok(())
    }
}
