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

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::SchemaRef;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::scalar::ScalarValue;

use super::{JoinKind, Side};
use crate::error::Result;
use crate::storage::keycodec::encode_keys;
use crate::storage::row_codec::RowDecoder;
use crate::stream::eval::eval;
use crate::stream::executor::hash_agg::rows_to_batch;
use crate::stream::message::{Op, StreamChunk};

/// Output rows under construction.
struct Out<'a> {
    kind: JoinKind,
    sides: &'a [Side; 2],
    ops: Vec<Op>,
    rows: Vec<Vec<ScalarValue>>,
}

impl Out<'_> {
    /// An outer join's row: `left visible ++ right visible ++ left hidden ++ right hidden ++
    /// join key`; NULLs for a missing side.
    fn pair(
        &mut self,
        op: Op,
        key: &[ScalarValue],
        left: Option<&[ScalarValue]>,
        right: Option<&[ScalarValue]>,
    ) -> Result<()> {
        let (lv, rv) = (self.sides[0].visible, self.sides[1].visible);
        let left: Vec<ScalarValue> = match left {
            Some(l) => l.to_vec(),
            None => self.sides[0].null_row()?,
        };
        let right: Vec<ScalarValue> = match right {
            Some(r) => r.to_vec(),
            None => self.sides[1].null_row()?,
        };
        let mut row = Vec::with_capacity(left.len() + right.len() + key.len());
        row.extend_from_slice(&left[..lv]);
        row.extend_from_slice(&right[..rv]);
        row.extend_from_slice(&left[lv..]);
        row.extend_from_slice(&right[rv..]);
        row.extend_from_slice(key);
        self.ops.push(op);
        self.rows.push(row);
        Ok(())
    }

    /// A semi or anti join's row: the kept side's input columns, then the join key.
    fn kept(&mut self, op: Op, key: &[ScalarValue], values: &[ScalarValue]) {
        let mut row = Vec::with_capacity(values.len() + key.len());
        row.extend_from_slice(values);
        row.extend_from_slice(key);
        self.ops.push(op);
        self.rows.push(row);
    }

    /// The output of side `side`'s row `values` (input columns) alone: padded (outer), itself
    /// (semi, anti).
    fn alone(
        &mut self,
        op: Op,
        side: usize,
        key: &[ScalarValue],
        values: &[ScalarValue],
    ) -> Result<()> {
        match self.kind.kept() {
            Some(_) => {
                self.kept(op, key, values);
                Ok(())
            }
            None if side == 0 => self.pair(op, key, Some(values), None),
            None => self.pair(op, key, None, Some(values)),
        }
    }

    /// What a row of side `side` outputs alone while its degree is `degree`.
    fn shown_alone(&self, side: usize, degree: i64) -> bool {
        match self.kind {
            JoinKind::LeftSemi | JoinKind::RightSemi => degree > 0,
            _ => self.kind.counts(side) && degree == 0,
        }
    }
}

/// Joins one chunk of either side for a join that counts matches (every kind but inner).
pub(crate) fn degree_chunk(
    kind: JoinKind,
    sides: &mut [Side; 2],
    chunk: &StreamChunk,
    from_left: bool,
    schema: &SchemaRef,
    condition: Option<&dyn PhysicalExpr>,
) -> Result<Option<StreamChunk>> {
    let this = if from_left { 0 } else { 1 };
    let keys = sides[this].key_columns(chunk)?;
    let n_keys = keys.len();
    let other_table = sides[1 - this].def.id;
    let prefixes = encode_keys(other_table, &keys, chunk.len(), n_keys)?;
    let mut ops = Vec::new();
    let mut rows = Vec::new();
    for (row, prefix) in prefixes.iter().enumerate() {
        let op = if chunk.ops()[row].is_insert() { Op::Insert } else { Op::Delete };
        let values = scalars(chunk.columns(), row)?;
        let key: Vec<ScalarValue> = keys
            .iter()
            .map(|k| ScalarValue::try_from_array(k, row))
            .collect::<datafusion::error::Result<_>>()?;
        let has_key = sides[this].nulls_equal || key.iter().all(|k| !k.is_null());
        let mut out = Out { kind, sides, ops: Vec::new(), rows: Vec::new() };
        let (writes, degree) = if has_key {
            change(&mut out, this, op, &key, &values, prefix, condition)?
        } else {
            // No match, ever: shown alone as a row without one, and not stored.
            if out.shown_alone(this, 0) {
                out.alone(op, this, &key, &values)?;
            }
            (Vec::new(), 0)
        };
        ops.append(&mut out.ops);
        rows.append(&mut out.rows);
        for (side, op, row) in writes {
            sides[side].store_row(op, row)?;
        }
        if has_key {
            let mut stored = key;
            stored.extend(values);
            if kind.counts(this) {
                stored.push(ScalarValue::Int64(Some(degree)));
            }
            sides[this].store_row(op, stored)?;
        }
    }
    if ops.is_empty() {
        return Ok(None);
    }
    Ok(Some(StreamChunk::new(ops, rows_to_batch(&rows, schema)?)))
}

/// A stored-row write: side, op, full stored row.
type Write = (usize, Op, Vec<ScalarValue>);

/// A change with a join key on side `this`: its output, the other side's degree changes (as
/// writes), and the row's own degree.
fn change(
    out: &mut Out<'_>,
    this: usize,
    op: Op,
    key: &[ScalarValue],
    values: &[ScalarValue],
    prefix: &[u8],
    condition: Option<&dyn PhysicalExpr>,
) -> Result<(Vec<Write>, i64)> {
    let other = 1 - this;
    let kind = out.kind;
    let n_keys = key.len();
    let mut matches = out.sides[other].stored_rows(prefix)?;
    if let Some(condition) = condition {
        let met = meets(out.sides, this, values, &matches, n_keys, condition)?;
        matches = matches.into_iter().zip(met).filter_map(|(m, met)| met.then_some(m)).collect();
    }
    let other_counts = kind.counts(other);
    let degree = matches.len() as i64;
    // This row alone, as it shows with its matches.
    if kind.kept() != Some(other) && out.shown_alone(this, degree) {
        out.alone(op, this, key, values)?;
    }
    let mut writes = Vec::new();
    for mut stored in matches {
        let old = match other_counts {
            true => match stored.pop() {
                Some(ScalarValue::Int64(Some(d))) => d,
                _ => 0,
            },
            false => 0,
        };
        let theirs = &stored[n_keys..];
        let new = if op == Op::Insert { old + 1 } else { old - 1 };
        let (was, is) = (out.shown_alone(other, old), out.shown_alone(other, new));
        // Retract what goes before adding what comes.
        if other_counts && was && !is {
            out.alone(Op::Delete, other, key, theirs)?;
        }
        if kind.kept().is_none() {
            let (left, right) = if this == 0 { (values, theirs) } else { (theirs, values) };
            out.pair(op, key, Some(left), Some(right))?;
        }
        if other_counts && is && !was {
            out.alone(Op::Insert, other, key, theirs)?;
        }
        if other_counts {
            stored.push(ScalarValue::Int64(Some(new)));
            writes.push((other, Op::Insert, stored));
        }
    }
    Ok((writes, degree))
}

/// Which of the other side's `stored` rows (key columns first) meet the join's `condition`
/// paired with this side's row `values`: the condition reads `left visible ++ right visible`,
/// and NULL is not met.
fn meets(
    sides: &[Side; 2],
    this: usize,
    values: &[ScalarValue],
    stored: &[Vec<ScalarValue>],
    n_keys: usize,
    condition: &dyn PhysicalExpr,
) -> Result<Vec<bool>> {
    if stored.is_empty() {
        return Ok(Vec::new());
    }
    let visible_fields = |side: &Side| {
        let schema = side.def.full_schema();
        let n = side.keys.len();
        schema.fields()[n..n + side.visible]
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>()
    };
    let mut fields = visible_fields(&sides[0]);
    fields.extend(visible_fields(&sides[1]));
    let schema = std::sync::Arc::new(arrow::datatypes::Schema::new(fields));
    let mine = &values[..sides[this].visible];
    let rows: Vec<Vec<ScalarValue>> = stored
        .iter()
        .map(|s| {
            let theirs = &s[n_keys..n_keys + sides[1 - this].visible];
            match this {
                0 => [mine, theirs].concat(),
                _ => [theirs, mine].concat(),
            }
        })
        .collect();
    let batch = rows_to_batch(&rows, &schema)?;
    let met = eval(condition, &batch)?;
    let met = met.as_boolean();
    Ok((0..met.len()).map(|i| met.is_valid(i) && met.value(i)).collect())
}

fn scalars(columns: &[ArrayRef], row: usize) -> Result<Vec<ScalarValue>> {
    Ok(columns
        .iter()
        .map(|c| ScalarValue::try_from_array(c, row))
        .collect::<datafusion::error::Result<_>>()?)
}

impl Side {
    /// Every stored row (all columns) whose join key encodes to `prefix`.
    pub(crate) fn stored_rows(&self, prefix: &[u8]) -> Result<Vec<Vec<ScalarValue>>> {
        let rows = self.matches(prefix)?;
        let types = self.def.types();
        let all: Vec<usize> = (0..types.len()).collect();
        let mut decoder = RowDecoder::new(&types, &self.def.pk, &all, rows.len());
        for (key, value) in rows.iter() {
            decoder.push(key, value)?;
        }
        let columns = decoder.finish();
        (0..rows.len()).map(|r| scalars(&columns, r)).collect()
    }

    /// Writes one stored row (all columns) with `op`.
    pub(crate) fn store_row(&mut self, op: Op, row: Vec<ScalarValue>) -> Result<()> {
        let batch = rows_to_batch(&[row], &self.def.full_schema())?;
        self.invalidate(&batch.columns()[..self.keys.len()], 1)?;
        self.table.write_chunk(&StreamChunk::new(vec![op], batch))
    }

    /// NULLs for every input column of this side.
    fn null_row(&self) -> Result<Vec<ScalarValue>> {
        let n_keys = self.keys.len();
        let schema = self.def.full_schema();
        let width = self.input_width();
        (n_keys..n_keys + width)
            .map(|i| Ok(ScalarValue::try_from(schema.field(i).data_type())?))
            .collect()
    }
}
