//! The value multisets of an aggregate's calls: `min`/`max`, DISTINCT calls and `string_agg`
//! stage their input values by group, the flush writes the count changes (a DISTINCT call's
//! state follows a value that comes or goes), and each flushed group's extremes and strings are
//! read again from them.

use super::*;

/// What a flush's staged changes did to one group's values of one call that reads its multiset.
pub(super) enum Moved {
    /// Values only came: the most extreme of them for a `min`/`max` (its multiset key and
    /// value).
    Came(Vec<u8>, ScalarValue),
    /// A value went, or came and went.
    Went,
}

impl Aggregation {
    /// Stages the count changes of call `i`'s non-NULL values `arg` in its multiset, by group.
    pub(super) fn stage_values(
        &mut self,
        i: usize,
        group_columns: &[ArrayRef],
        (arg, data): (ArrayRef, &RecordBatch),
        slots: &[usize],
        signs: &[i64],
    ) -> Result<()> {
        let def = self.calls[i].multiset.as_ref().expect("staged calls have a multiset");
        let n_groups = self.n_groups();
        let mut cols = group_columns.to_vec();
        if let Some(listing) = &self.calls[i].listing {
            cols.push(Arc::new(order_keys(&listing.order, data)?));
        }
        let arg = cast(arg, def.full_schema().field(cols.len()).data_type())?;
        let valid = validity(&arg);
        cols.push(arg.clone());
        let mkeys = encode_keys(def.id, &cols, arg.len(), n_groups)?;
        let keeps_nulls = self.calls[i].kind == AggKind::ArrayAgg;
        for (row, mkey) in mkeys.into_iter().enumerate() {
            if !valid(row) && !keeps_nulls {
                continue;
            }
            let slot = slots[row];
            let group = &self.groups[slot];
            let entry = match self.deltas[i].entry(mkey) {
                std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
                std::collections::hash_map::Entry::Vacant(entry) => {
                    let values = cols[n_groups..]
                        .iter()
                        .map(|c| ScalarValue::try_from_array(c, row))
                        .collect::<datafusion::error::Result<Vec<_>>>()?;
                    let at = footprint(entry.key(), &group.values, &[]);
                    self.memory.add(at + values.len() * size_of::<ScalarValue>());
                    entry.insert((slot, group.values.clone(), values, 0))
                }
            };
            entry.3 += signs[row];
        }
        Ok(())
    }

    /// Writes the staged multiset changes; a DISTINCT call's value that comes or goes counts
    /// in its group's state.
    pub(super) fn apply_multisets(&mut self) -> Result<()> {
        self.moved.iter_mut().for_each(|m| m.clear());
        for (i, deltas) in self.deltas.iter_mut().enumerate() {
            let call = &self.calls[i];
            let layout = self.layouts[i].as_ref();
            let (Some(table), Some(def)) = (self.multisets[i].as_mut(), call.multiset.as_ref())
            else {
                continue;
            };
            let mut ops = Vec::new();
            let mut rows = Vec::new();
            for (key, (slot, group, values, delta)) in deltas.drain() {
                if call.kind.reads_multiset() {
                    let max = call.kind == AggKind::Max;
                    let moved = self.moved[i].entry(slot);
                    match (delta > 0, moved) {
                        (false, moved) => {
                            moved.insert(Moved::Went);
                        }
                        (true, hashbrown::hash_map::Entry::Vacant(entry)) => {
                            let value = values.last().expect("a value").clone();
                            entry.insert(Moved::Came(key.clone(), value));
                        }
                        (true, hashbrown::hash_map::Entry::Occupied(mut entry)) => {
                            if let Moved::Came(best, _) = entry.get()
                                && (key > *best) == max
                                && key != *best
                            {
                                let value = values.last().expect("a value").clone();
                                entry.insert(Moved::Came(key.clone(), value));
                            }
                        }
                    }
                }
                let stored = match table.get(&key)? {
                    Some(row) => last_i64(def, &key, &row)?,
                    None => 0,
                };
                let count = stored + delta;
                if call.distinct && (stored > 0) != (count > 0) {
                    let sign = if count > 0 { 1 } else { -1 };
                    let value = values.last().expect("a value");
                    add_value(&mut self.groups[slot].states[i], layout, value, sign)?;
                }
                let mut row = group;
                row.extend(values);
                row.push(ScalarValue::Int64(Some(count.max(0))));
                ops.push(if count > 0 { Op::Insert } else { Op::Delete });
                rows.push(row);
            }
            if !rows.is_empty() {
                let batch = rows_to_batch(&rows, &def.full_schema())?;
                table.write_chunk(&StreamChunk::new(ops, batch))?;
            }
        }
        Ok(())
    }

    /// Brings the state of every call of group `slot` that reads its multiset (min/max,
    /// string_agg, variance) up to date with the changes [`Aggregation::apply_multisets`]
    /// wrote. A call none of whose values came or went keeps its state; a min/max to which
    /// values only came takes the most extreme of them if it beats the state's; the others
    /// read the group's multiset again.
    pub(super) fn refresh_extremes(&self, slot: usize, group: &mut Group) -> Result<()> {
        for (i, call) in self.calls.iter().enumerate() {
            let (Some(table), Some(def)) = (self.multisets[i].as_ref(), call.multiset.as_ref())
            else {
                continue;
            };
            if !call.kind.reads_multiset() {
                continue;
            }
            let Some(moved) = self.moved[i].get(&slot) else {
                // None of the group's values came or went: its state stands.
                continue;
            };
            let group_columns: Vec<ArrayRef> = group
                .values
                .iter()
                .map(|v| v.to_array())
                .collect::<datafusion::error::Result<_>>()?;
            let plain = call.listing.is_none() && !call.kind.spreads();
            match moved {
                Moved::Came(key, value) if plain => {
                    let AggState::Extreme(current) = &group.states[i] else {
                        unreachable!("a min/max keeps its extreme")
                    };
                    let beats = current.is_null() || {
                        let value_type =
                            def.full_schema().field(self.n_groups()).data_type().clone();
                        let mut columns = group_columns.clone();
                        columns.push(current.cast_to(&value_type)?.to_array()?);
                        let current_key =
                            encode_keys(def.id, &columns, 1, self.n_groups())?.remove(0);
                        *key != current_key && (*key > current_key) == (call.kind == AggKind::Max)
                    };
                    if beats {
                        group.states[i] = AggState::Extreme(value.cast_to(&call.output_type)?);
                    }
                    continue;
                }
                Moved::Came(..) | Moved::Went => {}
            }
            let prefix = encode_keys(def.id, &group_columns, 1, self.n_groups())?.remove(0);
            let end = prefix_end(&prefix);
            if let Some(listing) = &call.listing {
                // The group's values in order, each as often as it is there.
                let rows = table.iter_range(&prefix, &end, usize::MAX)?;
                let n = self.n_groups();
                let types = def.types();
                let mut decoder = RowDecoder::new(&types, &def.pk, &[n + 1, n + 2], rows.len());
                for (key, row) in &rows {
                    decoder.push(key, row)?;
                }
                let columns = decoder.finish();
                if call.kind == AggKind::ArrayAgg {
                    group.states[i] = AggState::Extreme(array_of(&columns, &call.output_type)?);
                    continue;
                }
                let values = cast(columns[0].clone(), &ArrowType::Utf8)?;
                let (values, counts) =
                    (values.as_string::<i32>(), columns[1].as_primitive::<Int64Type>());
                let mut text: Option<String> = None;
                for row in 0..values.len() {
                    for _ in 0..counts.value(row) {
                        match &mut text {
                            Some(text) => {
                                text.push_str(&listing.separator);
                                text.push_str(values.value(row));
                            }
                            None => text = Some(values.value(row).to_owned()),
                        }
                    }
                }
                group.states[i] =
                    AggState::Extreme(ScalarValue::Utf8(text).cast_to(&call.output_type)?);
                continue;
            }
            if call.kind.spreads() {
                let rows = table.iter_range(&prefix, &end, usize::MAX)?;
                let n = self.n_groups();
                let types = def.types();
                let mut decoder = RowDecoder::new(&types, &def.pk, &[n, n + 1], rows.len());
                for (key, row) in &rows {
                    decoder.push(key, row)?;
                }
                let columns = decoder.finish();
                let values = cast(columns[0].clone(), &ArrowType::Float64)?;
                let values = values.as_primitive::<arrow::datatypes::Float64Type>();
                let counts = columns[1].as_primitive::<Int64Type>();
                let weighted = (0..values.len()).map(|row| {
                    let count = if call.distinct { 1 } else { counts.value(row) };
                    (values.value(row), count as f64)
                });
                let spread = spread(call.kind, weighted.collect());
                group.states[i] = AggState::Extreme(ScalarValue::Float64(spread));
                continue;
            }
            // The extreme is the first (min) or last (max) value of the group's multiset.
            let pick = table.edge_of_range(&prefix, &end, call.kind != AggKind::Min)?;
            group.states[i] = AggState::Extreme(match pick {
                Some((key, row)) => {
                    column_of(def, &key, &row, self.n_groups())?.cast_to(&call.output_type)?
                }
                None => ScalarValue::try_from(&call.output_type)?,
            });
        }
        Ok(())
    }
}

/// An `array_agg`'s array (of type `output_type`) from its group's multiset rows (values and
/// their counts, in order): each value as often as it is there; NULL for no values.
fn array_of(columns: &[ArrayRef], output_type: &ArrowType) -> Result<ScalarValue> {
    let ArrowType::List(item) = output_type else {
        return Err(Error::Stream(format!("array_agg typed {output_type}")));
    };
    let counts = columns[1].as_primitive::<Int64Type>();
    let indices: arrow::array::UInt32Array = (0..counts.len())
        .flat_map(|row| std::iter::repeat_n(row as u32, counts.value(row).max(0) as usize))
        .collect();
    if indices.is_empty() {
        return Ok(ScalarValue::try_from(output_type)?);
    }
    let values = arrow::compute::take(&columns[0], &indices, None)?;
    let values = cast(values, item.data_type())?;
    let offsets = arrow::buffer::OffsetBuffer::from_lengths([values.len()]);
    let list = arrow::array::ListArray::new(item.clone(), offsets, values, None);
    Ok(ScalarValue::List(Arc::new(list)))
}

/// The variance or standard deviation (`kind`) of values each present `count` times, as
/// Postgres computes them over floats (Youngs and Cramer's running sums, value by value, in
/// the multiset's order; a value present very often joins as a group of equal values): the
/// squared deviations from the mean, divided by the number of values (population) or one less
/// (sample); `None` where that number is 0.
fn spread(kind: AggKind, values: Vec<(f64, f64)>) -> Option<f64> {
    let (mut n, mut sx, mut sxx) = (0f64, 0f64, 0f64);
    for (x, count) in values {
        if count > 1000.0 {
            // Postgres's combination of two states, the second `count` times `x`.
            if n == 0.0 {
                (n, sx) = (count, x * count);
                continue;
            }
            let tmp = sx / n - x;
            sxx += n * count * tmp * tmp / (n + count);
            (n, sx) = (n + count, sx + x * count);
            continue;
        }
        for _ in 0..count as u64 {
            n += 1.0;
            sx += x;
            if n > 1.0 {
                let tmp = x * n - sx;
                sxx += tmp * tmp / (n * (n - 1.0));
            }
        }
    }
    let divisor = match kind {
        AggKind::VarSamp | AggKind::StddevSamp => n - 1.0,
        _ => n,
    };
    if divisor <= 0.0 {
        return None;
    }
    let variance = sxx / divisor;
    match kind {
        AggKind::StddevSamp | AggKind::StddevPop => Some(variance.sqrt()),
        _ => Some(variance),
    }
}
