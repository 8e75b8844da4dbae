//! The joins that count each row's matches (its degree): outer joins (left, right, full),
//! semi joins and anti joins, variants of
//! [`HashJoinExecutor`](crate::stream::executor::hash_join::HashJoinExecutor).
//!
//! A side whose output depends on whether its rows match ([`JoinKind::counts`]) stores each
//! row with its degree: how many rows of the other side it currently matches. A change on one
//! side is joined with the other side's stored rows, whose degrees it moves; a row whose degree
//! goes from 0 to 1 or from 1 to 0 changes the output:
//!
//! - outer: a row without a match is output once, padded with NULLs; its first match retracts
//!   the padded row, and when its last match goes the padded row comes back;
//! - semi: a row is output (its own columns) while it has a match;
//! - anti: a row is output while it has none.
//!
//! A condition besides the key equalities (`ON a.k = b.k AND a.x < b.y`, the correlation of
//! `EXISTS`) decides which pairs match, so only pairs that meet it count in the degrees.
//!
//! A row with a NULL in its join key matches nothing (unless NULLs are equal, as in INTERSECT
//! and EXCEPT) and is not stored: an outer join outputs
//! it padded, an anti join outputs it, a semi join drops it (`NOT EXISTS` semantics; `NOT IN`'s
//! NULL-aware form is refused by the planner).
//!
//! Output rows of an outer join are `left visible ++ right visible ++ left hidden ++ right
//! hidden ++ join key`; of a semi or anti join, `kept visible ++ kept hidden ++ join key`.

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, UInt32Array};
use arrow::compute::{interleave, take};
use arrow::datatypes::SchemaRef;
use datafusion::physical_plan::PhysicalExpr;

use super::{JoinKind, Rows, Side, pair_columns};
use crate::error::Result;
use crate::storage::keycodec::encode_keys;
use crate::stream::cast_columns;
use crate::stream::eval::eval;
use crate::stream::executor::filter::mask_chunk;
use crate::stream::message::{Op, StreamChunk};

/// Where one output row's columns come from: per side, a row of that side's data (the chunk's
/// row on the changed side, a stored row on the other) or NULLs; and the chunk row whose join
/// key it carries.
struct OutRow {
    op: Op,
    sides: [Option<u32>; 2],
    key_row: u32,
}

/// What a row of side `side` outputs alone while its degree is `degree`.
fn shown_alone(kind: JoinKind, side: usize, degree: i64) -> bool {
    match kind {
        JoinKind::LeftSemi | JoinKind::RightSemi => degree > 0,
        _ => kind.counts(side) && degree == 0,
    }
}

/// Joins one chunk of either side for a join that counts matches (every kind but inner).
///
/// Vectorised per chunk: the other side's stored rows of the chunk's join keys are read and
/// decoded once, the condition is evaluated over every candidate pair at once, and each side's
/// writes go to its state table as one chunk. Only the degree bookkeeping runs row by row, in
/// the chunk's order, over degrees held in memory: two rows of the chunk with one join key see
/// each other's effect on the stored rows' degrees, as they would one chunk at a time.
pub(crate) fn degree_chunk(
    kind: JoinKind,
    sides: &mut [Side; 2],
    chunk: &StreamChunk,
    from_left: bool,
    schema: &SchemaRef,
    condition: Option<&dyn PhysicalExpr>,
) -> Result<Option<StreamChunk>> {
    let this = if from_left { 0 } else { 1 };
    let other = 1 - this;
    let n = chunk.len();
    let keys = sides[this].key_columns(chunk)?;
    let n_keys = keys.len();
    let nulls_equal = sides[this].nulls_equal;
    let has_key: Vec<bool> =
        (0..n).map(|i| nulls_equal || keys.iter().all(|k| k.is_valid(i))).collect();
    let prefixes = encode_keys(sides[other].def.id, &keys, n, n_keys)?;
    sides[other].preload(&prefixes, &has_key)?;

    // The other side's stored rows of each distinct join key, decoded once; `candidates[row]`
    // is the range of them the chunk's row `row` may match.
    let mut first_of: hashbrown::HashMap<&[u8], (u32, u32)> = hashbrown::HashMap::new();
    let mut stored_refs: Vec<(Rows, usize)> = Vec::new();
    let mut candidates: Vec<(u32, u32)> = Vec::with_capacity(n);
    for (row, prefix) in prefixes.iter().enumerate() {
        if !has_key[row] {
            candidates.push((0, 0));
            continue;
        }
        let range = match first_of.get(prefix.as_slice()) {
            Some(&range) => range,
            None => {
                let rows = sides[other].matches(prefix)?;
                let start = stored_refs.len() as u32;
                stored_refs.extend((0..rows.len()).map(|i| (rows.clone(), i)));
                let range = (start, stored_refs.len() as u32);
                first_of.insert(prefix.as_slice(), range);
                range
            }
        };
        candidates.push(range);
    }
    let stored_width = sides[other].def.types().len();
    let stored = sides[other].decode_columns(&stored_refs, 0..stored_width)?;
    // The cache's rows are written below: no probe may share them then.
    drop(stored_refs);
    let other_width = sides[other].input_width();
    let other_input = &stored[n_keys..n_keys + other_width];
    let other_counts = kind.counts(other);
    let mut degrees: Vec<i64> = match other_counts {
        true => stored[n_keys + other_width]
            .as_primitive::<arrow::datatypes::Int64Type>()
            .iter()
            .map(|d| d.unwrap_or(0))
            .collect(),
        false => Vec::new(),
    };
    let mut touched = vec![false; degrees.len()];

    // This side's rows as stored: join key ++ input columns (typed as stored).
    let this_def = sides[this].def.clone();
    let this_schema = this_def.full_schema();
    let this_width = sides[this].input_width();
    let mut this_stored = keys.clone();
    this_stored.extend(chunk.columns().iter().cloned());
    let this_stored = cast_columns(this_stored, &this_schema)?;
    let this_input = &this_stored[n_keys..n_keys + this_width];

    let met = pairs_met(sides, this, this_input, other_input, &candidates, condition)?;

    // The changes in the chunk's order, degrees moving as they go.
    let mut out: Vec<OutRow> = Vec::new();
    let mut this_degrees: Vec<i64> = Vec::with_capacity(n);
    let mut pairs_before = 0;
    for (row, (&(start, end), chunk_op)) in candidates.iter().zip(chunk.ops()).enumerate() {
        let op = if chunk_op.is_insert() { Op::Insert } else { Op::Delete };
        let key_row = row as u32;
        let alone = |side: usize, i: u32, op: Op| {
            let mut sources = [None, None];
            sources[side] = Some(i);
            OutRow { op, sides: sources, key_row }
        };
        let matched: Vec<u32> =
            (start..end).filter(|&j| met[pairs_before + (j - start) as usize]).collect();
        pairs_before += (end - start) as usize;
        let degree = matched.len() as i64;
        this_degrees.push(degree);
        // A row without a join key has no candidates: it shows alone as a row without a match
        // and is not stored.
        if kind.kept() != Some(other) && shown_alone(kind, this, degree) {
            out.push(alone(this, key_row, op));
        }
        for j in matched {
            let old = if other_counts { degrees[j as usize] } else { 0 };
            let new = if op == Op::Insert { old + 1 } else { old - 1 };
            let (was, is) = (shown_alone(kind, other, old), shown_alone(kind, other, new));
            // Retract what goes before adding what comes.
            if other_counts && was && !is {
                out.push(alone(other, j, Op::Delete));
            }
            if kind.kept().is_none() {
                let mut sources = [None, None];
                sources[this] = Some(key_row);
                sources[other] = Some(j);
                out.push(OutRow { op, sides: sources, key_row });
            }
            if other_counts && is && !was {
                out.push(alone(other, j, Op::Insert));
            }
            if other_counts {
                degrees[j as usize] = new;
                touched[j as usize] = true;
            }
        }
    }

    // The other side's rows whose degree moved, rewritten once each.
    if touched.iter().any(|&t| t) {
        let rows: Vec<u32> = (0..touched.len() as u32).filter(|&j| touched[j as usize]).collect();
        let indices = UInt32Array::from(rows.clone());
        let mut columns = stored[..n_keys + other_width]
            .iter()
            .map(|c| take(c, &indices, None))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        columns.push(std::sync::Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|&j| degrees[j as usize]),
        )));
        let side = &mut sides[other];
        let batch = RecordBatch::try_new(side.def.full_schema(), columns)?;
        side.write(&StreamChunk::new(vec![Op::Insert; rows.len()], batch))?;
    }
    // This side's rows with a join key, stored (with their degree where this side counts).
    let mut columns = this_stored.clone();
    if kind.counts(this) {
        columns.push(std::sync::Arc::new(Int64Array::from(this_degrees)));
    }
    let rows = StreamChunk::new(chunk.ops().to_vec(), RecordBatch::try_new(this_schema, columns)?);
    if let Some(rows) = mask_chunk(&rows, |i| has_key[i])? {
        sides[this].write(&rows)?;
    }

    if out.is_empty() {
        return Ok(None);
    }
    let side_data: [&[ArrayRef]; 2] = match this {
        0 => [this_input, other_input],
        _ => [other_input, this_input],
    };
    let gather = |side: usize| -> Result<Vec<ArrayRef>> {
        side_data[side]
            .iter()
            .map(|column| gather_rows(column, out.iter().map(|o| o.sides[side])))
            .collect()
    };
    let key_rows = UInt32Array::from_iter_values(out.iter().map(|o| o.key_row));
    let mut columns = Vec::new();
    match kind.kept() {
        // A semi or anti join's row: the kept side's input columns.
        Some(kept) => columns.extend(gather(kept)?),
        // An outer join's row: left visible ++ right visible ++ left hidden ++ right hidden.
        None => columns.extend(pair_columns(sides, &gather(0)?, &gather(1)?)),
    }
    for key in &keys {
        columns.push(take(key, &key_rows, None)?);
    }
    let columns = cast_columns(columns, schema)?;
    let ops = out.iter().map(|o| o.op).collect();
    Ok(Some(StreamChunk::new(ops, RecordBatch::try_new(schema.clone(), columns)?)))
}

/// Rows of `column` by index, NULL where the index is `None`.
fn gather_rows(column: &ArrayRef, rows: impl Iterator<Item = Option<u32>>) -> Result<ArrayRef> {
    let nulls = arrow::array::new_null_array(column.data_type(), 1);
    let indices: Vec<(usize, usize)> =
        rows.map(|r| r.map_or((1, 0), |r| (0, r as usize))).collect();
    Ok(interleave(&[column.as_ref(), nulls.as_ref()], &indices)?)
}

/// For every candidate pair (the chunk's row `row` with the other side's stored rows
/// `candidates[row]`, in order), whether it meets the join's `condition`: evaluated once over
/// all pairs, as `left visible ++ right visible`; NULL is not met. All pairs meet no condition.
fn pairs_met(
    sides: &[Side; 2],
    this: usize,
    this_input: &[ArrayRef],
    other_input: &[ArrayRef],
    candidates: &[(u32, u32)],
    condition: Option<&dyn PhysicalExpr>,
) -> Result<Vec<bool>> {
    let total: usize = candidates.iter().map(|(s, e)| (e - s) as usize).sum();
    let Some(condition) = condition else { return Ok(vec![true; total]) };
    if total == 0 {
        return Ok(Vec::new());
    }
    let mut this_rows = Vec::with_capacity(total);
    let mut other_rows = Vec::with_capacity(total);
    for (row, &(start, end)) in candidates.iter().enumerate() {
        this_rows.extend(std::iter::repeat_n(row as u32, (end - start) as usize));
        other_rows.extend(start..end);
    }
    let (this_rows, other_rows) = (UInt32Array::from(this_rows), UInt32Array::from(other_rows));
    let visible = |columns: &[ArrayRef], side: usize, rows: &UInt32Array| {
        columns[..sides[side].visible]
            .iter()
            .map(|c| take(c, rows, None))
            .collect::<std::result::Result<Vec<_>, _>>()
    };
    let (mine, theirs) =
        (visible(this_input, this, &this_rows)?, visible(other_input, 1 - this, &other_rows)?);
    let columns: Vec<ArrayRef> = match this {
        0 => mine.into_iter().chain(theirs).collect(),
        _ => theirs.into_iter().chain(mine).collect(),
    };
    let fields: Vec<arrow::datatypes::Field> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| arrow::datatypes::Field::new(format!("c{i}"), c.data_type().clone(), true))
        .collect();
    let batch =
        RecordBatch::try_new(std::sync::Arc::new(arrow::datatypes::Schema::new(fields)), columns)?;
    let met = eval(condition, &batch)?;
    let met = met.as_boolean();
    Ok((0..met.len()).map(|i| met.is_valid(i) && met.value(i)).collect())
}
