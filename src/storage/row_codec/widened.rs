//! Reading the rows of a relation whose columns were widened in place (a CDC table following
//! `ALTER COLUMN a TYPE bigint` upstream): rows written before a widening hold the column in
//! the type it had then, rows written after in the new one, and no row says which.
//!
//! Every widening Sluice follows makes a present value's payload longer (2, 4 and 8-byte
//! integers, 4 and 8-byte floats, 16 and 32-byte decimals); a precision change that keeps
//! the payload's width and scale is no widening here (the payload means the same). So a row's
//! layout is told by its length: the widenings, in the order they were made, give layouts
//! 0 (the types before any) to k (the current ones), and a row of layout g walks to its end
//! exactly with layout g's types. Two layouts that both fit a row differ only in columns that
//! are NULL in it, so the newest one that fits reads it right. Values read in an older
//! layout's type are converted to the current type.

use crate::error::Result;
use crate::storage::keycodec::key_holds_value;
use crate::types::DataType;

use super::{Builder, corrupt, fixed_len, read_varint};

/// How a row is laid out, by its first byte.
#[derive(Clone, Copy)]
pub(super) enum Format {
    /// A column count, a NULL bitmap and the payloads of the columns the key does not hold.
    Keyed,
    /// The same, of every column.
    Compact,
    /// A tag byte per value and `u32` text lengths, every column.
    Tagged,
}

/// The layouts rows of a widened relation may have, and where the decoded values go.
pub(super) struct Layouts {
    /// Per layout, newest first, every column's stored type.
    types: Vec<Vec<crate::types::DataType>>,
    /// Whether each column is held by the key rather than the value.
    held: Vec<bool>,
    /// Each column's output slot, if projected.
    slots: Vec<Option<usize>>,
    /// Payload ranges of the row being read, per column walked.
    found: Vec<Option<(usize, usize)>>,
    /// A converted payload.
    scratch: Vec<u8>,
}

impl Layouts {
    /// The layouts of a relation of `types` (current), keyed by `key`, whose columns were
    /// widened as `widened` lists (`(column, type before)`, oldest first), for `projection`.
    pub(super) fn new(
        types: &[DataType],
        key: &[usize],
        projection: &[usize],
        widened: &[(usize, DataType)],
    ) -> Self {
        let mut layouts = vec![types.to_vec()];
        for &(column, before) in widened.iter().rev() {
            let mut older = layouts.last().expect("the current layout").clone();
            older[column] = before;
            layouts.push(older);
        }
        let held =
            (0..types.len()).map(|c| key.contains(&c) && key_holds_value(types[c])).collect();
        let slots = (0..types.len()).map(|c| projection.iter().position(|&p| p == c)).collect();
        Self { types: layouts, held, slots, found: Vec::new(), scratch: Vec::new() }
    }

    /// Appends the projected values `value` holds (past its first byte), read in the newest
    /// layout that fits it exactly.
    pub(super) fn push(
        &mut self,
        format: Format,
        value: &[u8],
        builders: &mut [Builder],
    ) -> Result<()> {
        let current = &self.types[0];
        let layout = (0..self.types.len())
            .find(|&l| walk(format, &self.types[l], &self.held, value, &mut self.found).is_ok())
            .ok_or_else(corrupt)?;
        let stored = &self.types[layout];
        let columns =
            (0..current.len()).filter(|&c| !matches!(format, Format::Keyed) || !self.held[c]);
        for (i, c) in columns.enumerate() {
            let Some(slot) = self.slots[c] else { continue };
            let payload = self.found.get(i).copied().flatten().map(|(a, b)| &value[a..b]);
            match payload {
                Some(p) if stored[c] != current[c] => {
                    widen(stored[c], current[c], p, &mut self.scratch);
                    builders[slot].append(Some(&self.scratch));
                }
                other => builders[slot].append(other),
            }
        }
        Ok(())
    }
}

/// Walks a row's value as `format` lays it out with `types`, recording each walked column's
/// payload range (`None`: NULL); an error unless it ends exactly at the value's end.
fn walk(
    format: Format,
    types: &[DataType],
    held: &[bool],
    value: &[u8],
    found: &mut Vec<Option<(usize, usize)>>,
) -> Result<()> {
    found.clear();
    let offset = |rest: &[u8]| value.len() - rest.len();
    match format {
        Format::Keyed | Format::Compact => {
            let keyed = matches!(format, Format::Keyed);
            let (stored, rest) = read_varint(value)?;
            let (bitmap, mut rest) =
                rest.split_at_checked(stored.div_ceil(8)).ok_or_else(corrupt)?;
            let columns = (0..types.len()).filter(|&c| !keyed || !held[c]);
            for (i, c) in columns.enumerate() {
                if i >= stored || bitmap[i / 8] & (1 << (i % 8)) != 0 {
                    found.push(None);
                    continue;
                }
                let (len, after) = match fixed_len(types[c]) {
                    Some(len) => (len, rest),
                    None => read_varint(rest)?,
                };
                let start = offset(after);
                rest = after.get(len..).ok_or_else(corrupt)?;
                found.push(Some((start, start + len)));
            }
            rest.is_empty().then_some(()).ok_or_else(corrupt)
        }
        Format::Tagged => {
            let mut rest = value;
            for &ty in types {
                let (&tag, after) = rest.split_first().ok_or_else(corrupt)?;
                rest = after;
                if tag == 0 {
                    found.push(None);
                    continue;
                }
                let len = match fixed_len(ty) {
                    Some(len) => len,
                    None => {
                        let len: [u8; 4] =
                            rest.get(..4).ok_or_else(corrupt)?.try_into().expect("4");
                        rest = &rest[4..];
                        u32::from_le_bytes(len) as usize
                    }
                };
                let start = offset(rest);
                rest = rest.get(len..).ok_or_else(corrupt)?;
                found.push(Some((start, start + len)));
            }
            rest.is_empty().then_some(()).ok_or_else(corrupt)
        }
    }
}

/// How a column of type `from` takes type `to` in place, if it can (`None`: it cannot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InPlace {
    /// Its stored payloads mean the same in the new type (the same type, or a decimal's
    /// precision up within the payload's width).
    Same,
    /// Its values keep their meaning and their payload grows: rows written before are read
    /// in their layout (see the module docs).
    Widened,
}

/// How a column of type `from` takes type `to` in place (see [`InPlace`]).
pub fn in_place(from: DataType, to: DataType) -> Option<InPlace> {
    use DataType::*;
    match (from, to) {
        _ if from == to => Some(InPlace::Same),
        (Int16, Int32 | Int64) | (Int32, Int64) | (Float32, Float64) => Some(InPlace::Widened),
        (Decimal { precision: p, scale: s }, Decimal { precision: q, scale: t }) => {
            let wider = t >= s && i32::from(q) - i32::from(t) >= i32::from(p) - i32::from(s);
            match (fixed_len(from) < fixed_len(to), t == s) {
                _ if !wider => None,
                (true, _) => Some(InPlace::Widened),
                (false, true) => Some(InPlace::Same),
                // The same width at another scale: a payload would not tell its layout.
                (false, false) => None,
            }
        }
        _ => None,
    }
}

/// Writes the payload of the `to` value equal to the `from` payload `p` into `out`.
fn widen(from: DataType, to: DataType, p: &[u8], out: &mut Vec<u8>) {
    use DataType::*;
    use arrow::datatypes::i256;
    out.clear();
    let int = |p: &[u8]| -> i128 {
        match p.len() {
            2 => i16::from_le_bytes([p[0], p[1]]).into(),
            4 => i32::from_le_bytes(p.try_into().expect("4 bytes")).into(),
            8 => i64::from_le_bytes(p.try_into().expect("8 bytes")).into(),
            _ => i128::from_le_bytes(p.try_into().expect("16 bytes")),
        }
    };
    match (from, to) {
        (Float32, Float64) => {
            let v = f32::from_le_bytes(p.try_into().expect("4 bytes"));
            out.extend_from_slice(&f64::from(v).to_le_bytes());
        }
        (Int16, Int32) => out.extend_from_slice(&(int(p) as i32).to_le_bytes()),
        (Int16 | Int32, Int64) => out.extend_from_slice(&(int(p) as i64).to_le_bytes()),
        (Decimal { scale: s, .. }, Decimal { scale: t, .. }) => {
            let mantissa = match p.len() {
                32 => i256::from_le_bytes(p.try_into().expect("32 bytes")),
                _ => i256::from_i128(int(p)),
            };
            let factor = i256::from_i128(10).wrapping_pow((t - s) as u32);
            let v = mantissa.wrapping_mul(factor);
            match fixed_len(to) {
                Some(32) => out.extend_from_slice(&v.to_le_bytes()),
                _ => out.extend_from_slice(&v.as_i128().to_le_bytes()),
            }
        }
        _ => unreachable!("{from} is not widened to {to}"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        ArrayRef, Decimal128Array, Decimal256Array, Float32Array, Float64Array, Int32Array,
        Int64Array, StringArray,
    };
    use arrow::datatypes::i256;

    use super::*;
    use crate::storage::row_codec::{RowDecoder, encode_rows};

    const DEC: DataType = DataType::Decimal { precision: 10, scale: 2 };
    const WIDE_DEC: DataType = DataType::Decimal { precision: 40, scale: 4 };

    /// Rows `(id, a, b, c, d)` of one layout, stored keyed by `id`.
    fn rows(columns: Vec<ArrayRef>) -> Vec<Vec<u8>> {
        let mut out = vec![Vec::new(); columns[0].len()];
        encode_rows(&columns, &[0], &mut out);
        out
    }

    fn key(id: i64) -> Vec<u8> {
        let ids: ArrayRef = Arc::new(Int64Array::from(vec![id]));
        crate::storage::keycodec::encode_keys(crate::catalog::TableId(1), &[ids], 1, 1)
            .unwrap()
            .remove(0)
    }

    #[test]
    fn rows_of_every_layout_read_in_the_current_types() {
        // Layout 0: a int, b real, c numeric(10,2); then a became bigint (layout 1), then b
        // double and c numeric(40,4) (layout 2). NULLs in widened columns make layouts tie.
        let text = |v: Vec<Option<&str>>| Arc::new(StringArray::from(v)) as ArrayRef;
        let dec = |v: Vec<Option<i128>>| {
            Arc::new(Decimal128Array::from(v).with_precision_and_scale(10, 2).unwrap()) as ArrayRef
        };
        let mut stored = rows(vec![
            Arc::new(Int64Array::from(vec![1, 2])),
            Arc::new(Int32Array::from(vec![Some(-7), None])),
            Arc::new(Float32Array::from(vec![Some(1.5), Some(-2.25)])),
            dec(vec![Some(12345), None]),
            text(vec![Some("zero"), None]),
        ]);
        stored.extend(rows(vec![
            Arc::new(Int64Array::from(vec![3, 4])),
            Arc::new(Int64Array::from(vec![Some(5_000_000_000), None])),
            Arc::new(Float32Array::from(vec![None, Some(0.5)])),
            dec(vec![Some(-1), Some(99)]),
            text(vec![Some("one"), Some("")]),
        ]));
        stored.extend(rows(vec![
            Arc::new(Int64Array::from(vec![5])),
            Arc::new(Int64Array::from(vec![Some(-1)])),
            Arc::new(Float64Array::from(vec![Some(0.1)])),
            Arc::new(
                Decimal256Array::from(vec![Some(i256::from_i128(10i128.pow(30)))])
                    .with_precision_and_scale(40, 4)
                    .unwrap(),
            ),
            text(vec![Some("two")]),
        ]));
        let types =
            [DataType::Int64, DataType::Int64, DataType::Float64, WIDE_DEC, DataType::Varchar];
        let widened = [(1, DataType::Int32), (2, DataType::Float32), (3, DEC)];
        let mut decoder = RowDecoder::widened(&types, &[0], &[4, 1, 2, 3, 0], 8, &widened);
        for (i, row) in stored.iter().enumerate() {
            decoder.push(&key(i as i64 + 1), row).unwrap();
        }
        let got = decoder.finish();
        let want: Vec<ArrayRef> = vec![
            text(vec![Some("zero"), None, Some("one"), Some(""), Some("two")]),
            Arc::new(Int64Array::from(vec![Some(-7), None, Some(5_000_000_000), None, Some(-1)])),
            Arc::new(Float64Array::from(vec![Some(1.5), Some(-2.25), None, Some(0.5), Some(0.1)])),
            Arc::new(
                Decimal256Array::from(vec![
                    Some(i256::from_i128(1_234_500)),
                    None,
                    Some(i256::from_i128(-100)),
                    Some(i256::from_i128(9_900)),
                    Some(i256::from_i128(10i128.pow(30))),
                ])
                .with_precision_and_scale(40, 4)
                .unwrap(),
            ),
            Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5])),
        ];
        assert_eq!(got, want);
        // Without the widenings the same rows do not read.
        let mut plain = RowDecoder::new(&types, &[0], &[4, 1, 2, 3, 0], 8);
        assert!(stored.iter().enumerate().any(|(i, r)| plain.push(&key(i as i64 + 1), r).is_err()));
    }

    #[test]
    fn what_is_taken_in_place() {
        use DataType::*;
        let dec = |precision, scale| Decimal { precision, scale };
        let cases = [
            (Int16, Int32, Some(InPlace::Widened)),
            (Int16, Int64, Some(InPlace::Widened)),
            (Int32, Int64, Some(InPlace::Widened)),
            (Float32, Float64, Some(InPlace::Widened)),
            (Int64, Int32, None),
            (Int32, Float64, None),
            (Float64, Float32, None),
            (Int32, Int32, Some(InPlace::Same)),
            (dec(10, 2), dec(12, 2), Some(InPlace::Same)),
            (dec(10, 2), dec(40, 2), Some(InPlace::Widened)),
            (dec(10, 2), dec(40, 4), Some(InPlace::Widened)),
            // Same width, another scale; fewer integer digits; a smaller scale.
            (dec(10, 2), dec(12, 4), None),
            (dec(10, 2), dec(40, 35), None),
            (dec(10, 2), dec(40, 1), None),
            (dec(12, 2), dec(10, 2), None),
        ];
        for (from, to, want) in cases {
            assert_eq!(in_place(from, to), want, "{from} to {to}");
        }
    }
}
