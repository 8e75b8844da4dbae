//! The left outer variant of [`HashJoinExecutor`](crate::stream::executor::hash_join::HashJoinExecutor).
//!
//! Each stored left row carries its degree: how many right rows it currently matches. A left
//! row with degree 0 is output once, padded with NULLs; when its first match arrives the padded
//! row is retracted, and when its last match goes the padded row comes back.

use arrow::array::ArrayRef;
use arrow::datatypes::SchemaRef;
use datafusion::scalar::ScalarValue;

use super::Side;
use crate::error::Result;
use crate::storage::keycodec::encode_keys;
use crate::storage::row_codec::RowDecoder;
use crate::stream::executor::hash_agg::rows_to_batch;
use crate::stream::message::{Op, StreamChunk};

/// Output rows under construction.
struct Out<'a> {
    sides: &'a [Side; 2],
    ops: Vec<Op>,
    rows: Vec<Vec<ScalarValue>>,
}

impl Out<'_> {
    /// `left visible ++ right visible ++ left hidden ++ right hidden ++ join key`; NULLs for a
    /// missing right.
    fn push(
        &mut self,
        op: Op,
        key: &[ScalarValue],
        left: &[ScalarValue],
        right: Option<&[ScalarValue]>,
    ) -> Result<()> {
        let (lv, rv) = (self.sides[0].visible, self.sides[1].visible);
        let right: Vec<ScalarValue> = match right {
            Some(r) => r.to_vec(),
            None => self.sides[1].null_row()?,
        };
        let mut row = Vec::with_capacity(left.len() + right.len());
        row.extend_from_slice(&left[..lv]);
        row.extend_from_slice(&right[..rv]);
        row.extend_from_slice(&left[lv..]);
        row.extend_from_slice(&right[rv..]);
        row.extend_from_slice(key);
        self.ops.push(op);
        self.rows.push(row);
        Ok(())
    }
}

/// Joins one chunk of either side, left outer.
pub(crate) fn left_outer_chunk(
    sides: &mut [Side; 2],
    chunk: &StreamChunk,
    from_left: bool,
    schema: &SchemaRef,
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
        let has_key = key.iter().all(|k| !k.is_null());
        let mut out = Out { sides, ops: Vec::new(), rows: Vec::new() };
        let writes = if from_left {
            left_row(&mut out, op, &key, &values, has_key.then_some(prefix.as_slice()))?
        } else if has_key {
            right_row(&mut out, op, &values, prefix)?
        } else {
            Vec::new()
        };
        ops.append(&mut out.ops);
        rows.append(&mut out.rows);
        for (side, op, row) in writes {
            sides[side].store_row(op, row)?;
        }
        if !from_left && has_key {
            let mut stored = key.clone();
            stored.extend(values);
            sides[1].store_row(op, stored)?;
        }
    }
    if ops.is_empty() {
        return Ok(None);
    }
    Ok(Some(StreamChunk::new(ops, rows_to_batch(&rows, schema)?)))
}

/// A stored-row write: side, op, full stored row.
type Write = (usize, Op, Vec<ScalarValue>);

fn left_row(
    out: &mut Out<'_>,
    op: Op,
    key: &[ScalarValue],
    values: &[ScalarValue],
    prefix: Option<&[u8]>,
) -> Result<Vec<Write>> {
    let matches = match prefix {
        Some(prefix) => out.sides[1].stored_rows(prefix)?,
        None => Vec::new(),
    };
    if matches.is_empty() {
        out.push(op, key, values, None)?;
    }
    for right in &matches {
        out.push(op, key, values, Some(&right[key.len()..]))?;
    }
    if prefix.is_none() {
        return Ok(Vec::new());
    }
    let mut stored = key.to_vec();
    stored.extend_from_slice(values);
    stored.push(ScalarValue::Int64(Some(matches.len() as i64)));
    Ok(vec![(0, op, stored)])
}

fn right_row(
    out: &mut Out<'_>,
    op: Op,
    values: &[ScalarValue],
    prefix: &[u8],
) -> Result<Vec<Write>> {
    let mut writes = Vec::new();
    for mut left in out.sides[0].stored_rows(prefix)? {
        let n_keys = out.sides[0].keys.len();
        let degree = match left.pop() {
            Some(ScalarValue::Int64(Some(d))) => d,
            _ => 0,
        };
        let key = left[..n_keys].to_vec();
        let left_values = left[n_keys..].to_vec();
        let new_degree = if op == Op::Insert {
            if degree == 0 {
                out.push(Op::Delete, &key, &left_values, None)?;
            }
            out.push(Op::Insert, &key, &left_values, Some(values))?;
            degree + 1
        } else {
            out.push(Op::Delete, &key, &left_values, Some(values))?;
            if degree == 1 {
                out.push(Op::Insert, &key, &left_values, None)?;
            }
            degree - 1
        };
        left.push(ScalarValue::Int64(Some(new_degree)));
        writes.push((0, Op::Insert, left));
    }
    Ok(writes)
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
