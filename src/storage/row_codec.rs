//! Value encoding of stored rows.
//!
//! A stored row is every column of the relation in order. Each value is one tag byte (0 = NULL,
//! 1 = present) followed by its payload: fixed-width little-endian for numbers, dates and
//! timestamps, one byte for booleans, a `u32` length and the bytes for text and binary. Encoding
//! goes column by column over Arrow arrays into per-row buffers; decoding appends straight into
//! Arrow builders and skips the columns a scan does not need.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayBuilder, ArrayRef, AsArray, BinaryBuilder, BooleanBuilder, Date32Builder,
    Decimal128Builder, Float32Builder, Float64Builder, Int16Builder, Int32Builder, Int64Builder,
    StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::datatypes::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    TimestampMicrosecondType,
};

use crate::error::{Error, Result};
use crate::types::{DataType, UTC};

/// Appends the encoding of every value of `columns` to the buffer of its row.
pub fn encode_rows(columns: &[ArrayRef], out: &mut [Vec<u8>]) {
    for column in columns {
        encode_column(column, out);
    }
}

fn put_fixed<const N: usize>(
    array: &dyn Array,
    out: &mut [Vec<u8>],
    bytes: impl Fn(usize) -> [u8; N],
) {
    for (i, buf) in out.iter_mut().enumerate() {
        if array.is_null(i) {
            buf.push(0);
        } else {
            buf.push(1);
            buf.extend_from_slice(&bytes(i));
        }
    }
}

fn put_var<'a>(array: &'a dyn Array, out: &mut [Vec<u8>], bytes: impl Fn(usize) -> &'a [u8]) {
    for (i, buf) in out.iter_mut().enumerate() {
        if array.is_null(i) {
            buf.push(0);
        } else {
            let b = bytes(i);
            buf.push(1);
            buf.extend_from_slice(&(b.len() as u32).to_le_bytes());
            buf.extend_from_slice(b);
        }
    }
}

fn encode_column(column: &ArrayRef, out: &mut [Vec<u8>]) {
    use arrow::datatypes::DataType as A;
    let c = column.as_ref();
    match c.data_type() {
        A::Boolean => put_fixed(c, out, |i| [c.as_boolean().value(i) as u8]),
        A::Int16 => put_fixed(c, out, |i| c.as_primitive::<Int16Type>().value(i).to_le_bytes()),
        A::Int32 => put_fixed(c, out, |i| c.as_primitive::<Int32Type>().value(i).to_le_bytes()),
        A::Int64 => put_fixed(c, out, |i| c.as_primitive::<Int64Type>().value(i).to_le_bytes()),
        A::Float32 => put_fixed(c, out, |i| c.as_primitive::<Float32Type>().value(i).to_le_bytes()),
        A::Float64 => put_fixed(c, out, |i| c.as_primitive::<Float64Type>().value(i).to_le_bytes()),
        A::Decimal128(_, _) => {
            put_fixed(c, out, |i| c.as_primitive::<Decimal128Type>().value(i).to_le_bytes())
        }
        A::Date32 => put_fixed(c, out, |i| c.as_primitive::<Date32Type>().value(i).to_le_bytes()),
        A::Timestamp(_, _) => put_fixed(c, out, |i| {
            c.as_primitive::<TimestampMicrosecondType>().value(i).to_le_bytes()
        }),
        A::Utf8 => {
            let s = c.as_string::<i32>();
            put_var(c, out, |i| s.value(i).as_bytes())
        }
        A::Binary => {
            let b = c.as_binary::<i32>();
            put_var(c, out, |i| b.value(i))
        }
        other => unreachable!("tables only hold catalog types, found {other}"),
    }
}

/// Decodes stored rows into Arrow columns.
///
/// `types` lists every column of the stored row; `projection` the indices to materialize, in
/// output order (each index at most once, ascending order not required).
pub struct RowDecoder {
    types: Vec<DataType>,
    /// For each stored column, the output slot it fills, if projected.
    slots: Vec<Option<usize>>,
    builders: Vec<Box<dyn ArrayBuilder>>,
}

impl RowDecoder {
    /// A decoder for rows of `types` that keeps the columns in `projection`.
    pub fn new(types: &[DataType], projection: &[usize], capacity: usize) -> Self {
        let mut slots = vec![None; types.len()];
        for (slot, &col) in projection.iter().enumerate() {
            slots[col] = Some(slot);
        }
        let builders = projection.iter().map(|&c| builder_for(types[c], capacity)).collect();
        Self { types: types.to_vec(), slots, builders }
    }

    /// Decodes one stored row, appending its projected values.
    pub fn push(&mut self, mut value: &[u8]) -> Result<()> {
        for (col, ty) in self.types.iter().enumerate() {
            let (&tag, rest) = value.split_first().ok_or_else(corrupt)?;
            value = rest;
            let len = if tag == 0 { 0 } else { payload_len(*ty, value)? };
            let (payload, rest) = value.split_at_checked(len).ok_or_else(corrupt)?;
            value = rest;
            if let Some(slot) = self.slots[col] {
                append(self.builders[slot].as_mut(), *ty, (tag != 0).then_some(payload));
            }
        }
        Ok(())
    }

    /// Number of rows decoded since the last [`RowDecoder::finish`].
    pub fn len(&self) -> usize {
        self.builders.first().map_or(0, |b| b.len())
    }

    /// True when no row has been decoded since the last [`RowDecoder::finish`].
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns the decoded columns and resets the builders.
    pub fn finish(&mut self) -> Vec<ArrayRef> {
        self.builders.iter_mut().map(|b| b.finish()).collect()
    }
}

fn corrupt() -> Error {
    Error::Storage("stored row is truncated or corrupt".into())
}

/// Payload size of a present value; `rest` starts at the payload.
fn payload_len(ty: DataType, rest: &[u8]) -> Result<usize> {
    Ok(match ty {
        DataType::Boolean => 1,
        DataType::Int16 => 2,
        DataType::Int32 | DataType::Float32 | DataType::Date => 4,
        DataType::Int64 | DataType::Float64 | DataType::Timestamp | DataType::Timestamptz => 8,
        DataType::Decimal { .. } => 16,
        DataType::Varchar | DataType::Jsonb | DataType::Bytea => {
            let len: [u8; 4] = rest.get(..4).ok_or_else(corrupt)?.try_into().expect("4 bytes");
            4 + u32::from_le_bytes(len) as usize
        }
    })
}

fn builder_for(ty: DataType, capacity: usize) -> Box<dyn ArrayBuilder> {
    match ty {
        DataType::Boolean => Box::new(BooleanBuilder::with_capacity(capacity)),
        DataType::Int16 => Box::new(Int16Builder::with_capacity(capacity)),
        DataType::Int32 => Box::new(Int32Builder::with_capacity(capacity)),
        DataType::Int64 => Box::new(Int64Builder::with_capacity(capacity)),
        DataType::Float32 => Box::new(Float32Builder::with_capacity(capacity)),
        DataType::Float64 => Box::new(Float64Builder::with_capacity(capacity)),
        DataType::Decimal { precision, scale } => Box::new(
            Decimal128Builder::with_capacity(capacity)
                .with_precision_and_scale(precision, scale)
                .expect("catalog validated precision and scale"),
        ),
        DataType::Varchar | DataType::Jsonb => {
            Box::new(StringBuilder::with_capacity(capacity, capacity * 16))
        }
        DataType::Date => Box::new(Date32Builder::with_capacity(capacity)),
        DataType::Timestamp => Box::new(TimestampMicrosecondBuilder::with_capacity(capacity)),
        DataType::Timestamptz => Box::new(
            TimestampMicrosecondBuilder::with_capacity(capacity).with_timezone(Arc::from(UTC)),
        ),
        DataType::Bytea => Box::new(BinaryBuilder::with_capacity(capacity, capacity * 16)),
    }
}

fn le<const N: usize>(p: &[u8]) -> [u8; N] {
    p[..N].try_into().expect("payload length checked by payload_len")
}

fn append(b: &mut dyn ArrayBuilder, ty: DataType, payload: Option<&[u8]>) {
    fn typed<T: 'static>(b: &mut dyn ArrayBuilder) -> &mut T {
        b.as_any_mut().downcast_mut::<T>().expect("builder made by builder_for")
    }
    match ty {
        DataType::Boolean => typed::<BooleanBuilder>(b).append_option(payload.map(|p| p[0] != 0)),
        DataType::Int16 => {
            typed::<Int16Builder>(b).append_option(payload.map(|p| i16::from_le_bytes(le(p))))
        }
        DataType::Int32 => {
            typed::<Int32Builder>(b).append_option(payload.map(|p| i32::from_le_bytes(le(p))))
        }
        DataType::Int64 => {
            typed::<Int64Builder>(b).append_option(payload.map(|p| i64::from_le_bytes(le(p))))
        }
        DataType::Float32 => {
            typed::<Float32Builder>(b).append_option(payload.map(|p| f32::from_le_bytes(le(p))))
        }
        DataType::Float64 => {
            typed::<Float64Builder>(b).append_option(payload.map(|p| f64::from_le_bytes(le(p))))
        }
        DataType::Decimal { .. } => {
            typed::<Decimal128Builder>(b).append_option(payload.map(|p| i128::from_le_bytes(le(p))))
        }
        DataType::Date => {
            typed::<Date32Builder>(b).append_option(payload.map(|p| i32::from_le_bytes(le(p))))
        }
        DataType::Timestamp | DataType::Timestamptz => typed::<TimestampMicrosecondBuilder>(b)
            .append_option(payload.map(|p| i64::from_le_bytes(le(p)))),
        DataType::Varchar | DataType::Jsonb => typed::<StringBuilder>(b).append_option(
            payload
                .map(|p| std::str::from_utf8(&p[4..]).expect("text was valid UTF-8 when stored")),
        ),
        DataType::Bytea => typed::<BinaryBuilder>(b).append_option(payload.map(|p| &p[4..])),
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Decimal128Array, Int32Array, StringArray};

    use super::*;

    #[test]
    fn rows_round_trip_with_projection() {
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![Some(1), None, Some(-3)]));
        let text: ArrayRef = Arc::new(StringArray::from(vec![Some("a"), Some(""), None]));
        let dec: ArrayRef = Arc::new(
            Decimal128Array::from(vec![Some(1250), Some(-1), None])
                .with_precision_and_scale(10, 2)
                .unwrap(),
        );
        let types =
            [DataType::Int32, DataType::Varchar, DataType::Decimal { precision: 10, scale: 2 }];
        let mut rows = vec![Vec::new(); 3];
        encode_rows(&[ints.clone(), text.clone(), dec.clone()], &mut rows);

        let mut all = RowDecoder::new(&types, &[0, 1, 2], 3);
        rows.iter().for_each(|r| all.push(r).unwrap());
        let out = all.finish();
        assert_eq!(&out[0], &ints);
        assert_eq!(&out[1], &text);
        assert_eq!(&out[2], &dec);

        let mut some = RowDecoder::new(&types, &[2, 0], 3);
        rows.iter().for_each(|r| some.push(r).unwrap());
        let out = some.finish();
        assert_eq!(&out[0], &dec);
        assert_eq!(&out[1], &ints);
    }

    #[test]
    fn truncated_rows_are_an_error() {
        let mut rows = vec![Vec::new(); 1];
        encode_rows(&[Arc::new(StringArray::from(vec!["hello"])) as ArrayRef], &mut rows);
        let mut d = RowDecoder::new(&[DataType::Varchar], &[0], 1);
        assert!(d.push(&rows[0][..4]).is_err());
    }
}
