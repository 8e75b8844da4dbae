//! Value encoding of stored rows.
//!
//! A stored row is the columns of the relation that its key does not already hold, in order,
//! written as
//!
//! ```text
//! 0x03 | column count (LEB128) | NULL bitmap (a bit per column, set = NULL) | payloads
//! ```
//!
//! where each present value's payload is fixed-width little-endian for numbers, dates and
//! timestamps, one byte for booleans, and a LEB128 length and the bytes for text and binary.
//! The primary-key columns are read back from the row's key (see
//! [`keycodec::KeyValues`](crate::storage::keycodec::KeyValues)), except float ones, whose key
//! encoding is not exact ([`key_holds_value`]). For `t(id bigint primary key, a int, b int, c
//! text, d text)` with 24- and 9-byte texts that is 46 bytes a row.
//!
//! Rows written before are still read, each by its first byte: `0x02` rows hold every column,
//! key columns too (54 bytes for the same row); older ones carry a tag byte per value (0 =
//! NULL, 1 = present, so never `0x02` or `0x03` first) and a `u32` length per text (62 bytes).
//! Every byte a row saves is a byte less to sort, write, compact and read back. A row with
//! fewer columns than its relation reads the missing ones as NULL.
//!
//! Encoding goes column by column over Arrow arrays into per-row buffers; decoding appends
//! straight into Arrow builders and skips the columns a scan does not need.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayBuilder, ArrayRef, AsArray, BinaryBuilder, BooleanBuilder, Date32Builder,
    Decimal128Builder, Decimal256Builder, Float32Builder, Float64Builder, Int16Builder,
    Int32Builder, Int64Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::datatypes::{
    Date32Type, Decimal128Type, Decimal256Type, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, TimestampMicrosecondType, i256,
};

use crate::error::{Error, Result};
use crate::storage::keycodec::{KeyValues, key_holds_value};
use crate::types::{DataType, UTC};

mod widened;

pub use widened::{InPlace, in_place};

/// First byte of a row in the encoding of the module docs.
const KEYED: u8 = 3;

/// First byte of a row that holds every column, its key's too.
const COMPACT: u8 = 2;

/// Appends the encoding of every row of `columns` (all columns of the relation) to the buffer
/// of its row; `key` lists the primary-key columns, which the row's key holds.
pub fn encode_rows(columns: &[ArrayRef], key: &[usize], out: &mut [Vec<u8>]) {
    let in_key = |i: usize, column: &ArrayRef| {
        key.contains(&i) && DataType::from_arrow(column.data_type()).is_ok_and(key_holds_value)
    };
    let stored: Vec<&ArrayRef> =
        columns.iter().enumerate().filter(|&(i, c)| !in_key(i, c)).map(|(_, c)| c).collect();
    let bitmap_len = stored.len().div_ceil(8);
    let bitmaps: Vec<usize> = out
        .iter_mut()
        .map(|buf| {
            buf.push(KEYED);
            put_varint(buf, stored.len());
            let at = buf.len();
            buf.resize(at + bitmap_len, 0);
            at
        })
        .collect();
    for (i, column) in stored.into_iter().enumerate() {
        encode_column(column, Column { out: &mut *out, bitmaps: &bitmaps, index: i });
    }
}

/// The rows' buffers as one column is appended to them.
struct Column<'a> {
    out: &'a mut [Vec<u8>],
    /// Where each row's NULL bitmap starts in its buffer.
    bitmaps: &'a [usize],
    index: usize,
}

impl Column<'_> {
    fn null(&mut self, row: usize) {
        self.out[row][self.bitmaps[row] + self.index / 8] |= 1 << (self.index % 8);
    }
}

fn put_varint(buf: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        buf.push(n as u8 | 0x80);
        n >>= 7;
    }
    buf.push(n as u8);
}

fn read_varint(bytes: &[u8]) -> Result<(usize, &[u8])> {
    let mut n = 0usize;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        n |= usize::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((n, &bytes[i + 1..]));
        }
    }
    Err(corrupt())
}

fn put_fixed<const N: usize>(
    array: &dyn Array,
    mut col: Column<'_>,
    bytes: impl Fn(usize) -> [u8; N],
) {
    for i in 0..col.out.len() {
        if array.is_null(i) {
            col.null(i);
        } else {
            col.out[i].extend_from_slice(&bytes(i));
        }
    }
}

fn put_var<'a>(array: &'a dyn Array, mut col: Column<'_>, bytes: impl Fn(usize) -> &'a [u8]) {
    for i in 0..col.out.len() {
        if array.is_null(i) {
            col.null(i);
        } else {
            let b = bytes(i);
            put_varint(&mut col.out[i], b.len());
            col.out[i].extend_from_slice(b);
        }
    }
}

fn encode_column(column: &ArrayRef, out: Column<'_>) {
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
        A::Decimal256(_, _) => {
            put_fixed(c, out, |i| c.as_primitive::<Decimal256Type>().value(i).to_le_bytes())
        }
        A::Date32 => put_fixed(c, out, |i| c.as_primitive::<Date32Type>().value(i).to_le_bytes()),
        A::Timestamp(_, _) => put_fixed(c, out, |i| {
            c.as_primitive::<TimestampMicrosecondType>().value(i).to_le_bytes()
        }),
        A::Time64(_) => put_fixed(c, out, |i| {
            c.as_primitive::<arrow::datatypes::Time64MicrosecondType>().value(i).to_le_bytes()
        }),
        // Months, days and nanoseconds, each little-endian.
        A::Interval(_) => put_fixed(c, out, |i| {
            let v = c.as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>().value(i);
            interval_bytes(v)
        }),
        A::Utf8 => {
            let s = c.as_string::<i32>();
            put_var(c, out, |i| s.value(i).as_bytes())
        }
        A::Binary => {
            let b = c.as_binary::<i32>();
            put_var(c, out, |i| b.value(i))
        }
        A::List(_) => {
            let lists = c.as_list::<i32>();
            let encoded: Vec<Vec<u8>> = (0..lists.len())
                .map(|i| if lists.is_null(i) { Vec::new() } else { list_payload(&lists.value(i)) })
                .collect();
            put_var(c, out, |i| &encoded[i])
        }
        other => unreachable!("tables only hold catalog types, found {other}"),
    }
}

/// An array value's payload: its elements as the payload of a row of as many columns of the
/// element type (a count, a NULL bitmap, the present elements' payloads).
fn list_payload(elements: &ArrayRef) -> Vec<u8> {
    let k = elements.len();
    let mut each = vec![vec![0u8]; k];
    encode_column(elements, Column { out: &mut each, bitmaps: &vec![0; k], index: 0 });
    let mut payload = Vec::new();
    put_varint(&mut payload, k);
    let at = payload.len();
    payload.resize(at + k.div_ceil(8), 0);
    for (i, element) in each.iter().enumerate() {
        if element[0] != 0 {
            payload[at + i / 8] |= 1 << (i % 8);
        }
        payload.extend_from_slice(&element[1..]);
    }
    payload
}

/// An interval's stored bytes: months, days and nanoseconds, each little-endian.
fn interval_bytes(v: arrow::datatypes::IntervalMonthDayNano) -> [u8; 16] {
    let mut bytes = [0; 16];
    bytes[..4].copy_from_slice(&v.months.to_le_bytes());
    bytes[4..8].copy_from_slice(&v.days.to_le_bytes());
    bytes[8..].copy_from_slice(&v.nanoseconds.to_le_bytes());
    bytes
}

/// Decodes stored rows (key and value) into Arrow columns.
///
/// `types` lists every column of the relation, `key` its primary-key columns in key order, and
/// `projection` the indices to materialize, in output order (each index at most once, ascending
/// order not required).
pub struct RowDecoder {
    /// Every column up to the last projected one, with its output slot if projected: the
    /// columns after the last projected one are not even walked over (rows that hold every
    /// column).
    every: Vec<(DataType, Option<usize>)>,
    /// The columns a [`KEYED`] row's value holds, up to the last projected one, with their
    /// output slots.
    values: Vec<(DataType, Option<usize>)>,
    /// The key's columns up to the last projected one the key holds, with their output slots
    /// (`None` also for a column read from the value).
    keys: Vec<(DataType, Option<usize>)>,
    /// A key value's payload, as it is appended.
    scratch: Vec<u8>,
    builders: Vec<Builder>,
    /// For a relation whose columns were widened in place: the layouts its rows may have.
    widened: Option<Box<widened::Layouts>>,
}

impl RowDecoder {
    /// A decoder for rows of `types`, keyed by the columns `key`, that keeps the columns in
    /// `projection`.
    pub fn new(types: &[DataType], key: &[usize], projection: &[usize], capacity: usize) -> Self {
        let slot_of = |col: usize| projection.iter().position(|&c| c == col);
        let walked = projection.iter().max().map_or(0, |&c| c + 1);
        let every = (0..walked).map(|c| (types[c], slot_of(c))).collect();
        let held = |col: usize| key.contains(&col) && key_holds_value(types[col]);
        let mut values: Vec<_> =
            (0..types.len()).filter(|&c| !held(c)).map(|c| (types[c], slot_of(c))).collect();
        while values.last().is_some_and(|(_, slot)| slot.is_none()) {
            values.pop();
        }
        let mut keys: Vec<_> =
            key.iter().map(|&c| (types[c], slot_of(c).filter(|_| held(c)))).collect();
        while keys.last().is_some_and(|(_, slot)| slot.is_none()) {
            keys.pop();
        }
        let builders = projection.iter().map(|&c| Builder::new(types[c], capacity)).collect();
        Self { every, values, keys, scratch: Vec::new(), builders, widened: None }
    }

    /// The same, for a relation whose columns were widened in place as `widened` lists
    /// (`(column, type before)`, oldest first; see
    /// [`TableCatalog::widened`](crate::catalog::TableCatalog::widened)): rows written before a
    /// widening are read in the layout they have, their values converted.
    pub fn widened(
        types: &[DataType],
        key: &[usize],
        projection: &[usize],
        capacity: usize,
        widened: &[(usize, DataType)],
    ) -> Self {
        let mut decoder = Self::new(types, key, projection, capacity);
        if !widened.is_empty() {
            let layouts = widened::Layouts::new(types, key, projection, widened);
            decoder.widened = Some(Box::new(layouts));
        }
        decoder
    }

    /// Decodes one stored row, its key and value, appending its projected values.
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        match value.split_first() {
            Some((&KEYED, rest)) => self.push_keyed(key, rest),
            Some((&COMPACT, rest)) => self.push_compact(rest),
            _ => self.push_tagged(value),
        }
    }

    /// A row in the encoding of the module docs, past its first byte.
    fn push_keyed(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        match &mut self.widened {
            Some(layouts) => layouts.push(widened::Format::Keyed, value, &mut self.builders)?,
            None => push_values(&self.values, &mut self.builders, value)?,
        }
        if self.keys.is_empty() {
            return Ok(());
        }
        let mut values = KeyValues::new(key)?;
        for &(ty, slot) in &self.keys {
            match slot {
                Some(slot) => {
                    let present = values.next_into(ty, &mut self.scratch)?;
                    self.builders[slot].append(present.then_some(self.scratch.as_slice()));
                }
                None => values.skip(ty)?,
            }
        }
        Ok(())
    }

    /// A row that holds every column, past its first byte.
    fn push_compact(&mut self, value: &[u8]) -> Result<()> {
        match &mut self.widened {
            Some(layouts) => layouts.push(widened::Format::Compact, value, &mut self.builders),
            None => push_values(&self.every, &mut self.builders, value),
        }
    }

    /// A row written with a tag byte per value and `u32` text lengths.
    fn push_tagged(&mut self, mut value: &[u8]) -> Result<()> {
        if let Some(layouts) = &mut self.widened {
            return layouts.push(widened::Format::Tagged, value, &mut self.builders);
        }
        for (ty, slot) in &self.every {
            let (&tag, rest) = value.split_first().ok_or_else(corrupt)?;
            value = rest;
            let (skip, len) = match (tag, fixed_len(*ty)) {
                (0, _) => (0, 0),
                (_, Some(len)) => (0, len),
                (_, None) => {
                    let len: [u8; 4] =
                        value.get(..4).ok_or_else(corrupt)?.try_into().expect("4 bytes");
                    (4, u32::from_le_bytes(len) as usize)
                }
            };
            let (payload, rest) = value.split_at_checked(skip + len).ok_or_else(corrupt)?;
            value = rest;
            if let Some(slot) = *slot {
                self.builders[slot].append((tag != 0).then_some(&payload[skip..]));
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

/// Appends the values of `columns` (with their output slots) that `value` holds: a column
/// count, a NULL bitmap and the present values' payloads (the module docs' encoding, past its
/// first byte). Columns past the count read as NULL.
fn push_values(
    columns: &[(DataType, Option<usize>)],
    builders: &mut [Builder],
    value: &[u8],
) -> Result<()> {
    let (stored, rest) = read_varint(value)?;
    let (bitmap, mut rest) = rest.split_at_checked(stored.div_ceil(8)).ok_or_else(corrupt)?;
    for (i, &(ty, slot)) in columns.iter().enumerate() {
        let payload = if i >= stored || bitmap[i / 8] & (1 << (i % 8)) != 0 {
            None
        } else {
            let (len, after) = match fixed_len(ty) {
                Some(len) => (len, rest),
                None => read_varint(rest)?,
            };
            let (payload, after) = after.split_at_checked(len).ok_or_else(corrupt)?;
            rest = after;
            Some(payload)
        };
        if let Some(slot) = slot {
            builders[slot].append(payload);
        }
    }
    Ok(())
}

fn corrupt() -> Error {
    Error::Storage("stored row is truncated or corrupt".into())
}

/// Payload size of a present value of a fixed-width type (`None`: text and binary, whose
/// payload carries its length).
fn fixed_len(ty: DataType) -> Option<usize> {
    Some(match ty {
        DataType::Boolean => 1,
        DataType::Int16 => 2,
        DataType::Int32 | DataType::Float32 | DataType::Date => 4,
        DataType::Int64
        | DataType::Float64
        | DataType::Timestamp
        | DataType::Timestamptz
        | DataType::Time => 8,
        DataType::Interval => 16,
        DataType::Decimal { precision, .. } if precision > 38 => 32,
        DataType::Decimal { .. } => 16,
        DataType::Varchar | DataType::Jsonb | DataType::Bytea | DataType::Array(_) => return None,
    })
}

/// The Arrow builder of one decoded column, by type: a match per value rather than a call
/// through `dyn ArrayBuilder` and a downcast.
enum Builder {
    Boolean(BooleanBuilder),
    Int16(Int16Builder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    Float32(Float32Builder),
    Float64(Float64Builder),
    Decimal(Decimal128Builder),
    Decimal256(Decimal256Builder),
    Text(StringBuilder),
    Date(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder),
    Bytea(BinaryBuilder),
    Time(arrow::array::Time64MicrosecondBuilder),
    Interval(arrow::array::IntervalMonthDayNanoBuilder),
    List(Box<ListBuilder>),
}

/// The builder of an array column: its elements' builder, each array's end and NULLs.
struct ListBuilder {
    element: DataType,
    elements: Builder,
    offsets: Vec<i32>,
    nulls: arrow::array::NullBufferBuilder,
}

impl Builder {
    fn new(ty: DataType, capacity: usize) -> Self {
        match ty {
            DataType::Boolean => Builder::Boolean(BooleanBuilder::with_capacity(capacity)),
            DataType::Int16 => Builder::Int16(Int16Builder::with_capacity(capacity)),
            DataType::Int32 => Builder::Int32(Int32Builder::with_capacity(capacity)),
            DataType::Int64 => Builder::Int64(Int64Builder::with_capacity(capacity)),
            DataType::Float32 => Builder::Float32(Float32Builder::with_capacity(capacity)),
            DataType::Float64 => Builder::Float64(Float64Builder::with_capacity(capacity)),
            DataType::Decimal { precision, scale } if precision > 38 => Builder::Decimal256(
                Decimal256Builder::with_capacity(capacity)
                    .with_precision_and_scale(precision, scale)
                    .expect("catalog validated precision and scale"),
            ),
            DataType::Decimal { precision, scale } => Builder::Decimal(
                Decimal128Builder::with_capacity(capacity)
                    .with_precision_and_scale(precision, scale)
                    .expect("catalog validated precision and scale"),
            ),
            DataType::Varchar | DataType::Jsonb => {
                Builder::Text(StringBuilder::with_capacity(capacity, capacity * 16))
            }
            DataType::Date => Builder::Date(Date32Builder::with_capacity(capacity)),
            DataType::Timestamp => {
                Builder::Timestamp(TimestampMicrosecondBuilder::with_capacity(capacity))
            }
            DataType::Timestamptz => Builder::Timestamp(
                TimestampMicrosecondBuilder::with_capacity(capacity).with_timezone(Arc::from(UTC)),
            ),
            DataType::Bytea => {
                Builder::Bytea(BinaryBuilder::with_capacity(capacity, capacity * 16))
            }
            DataType::Time => {
                Builder::Time(arrow::array::Time64MicrosecondBuilder::with_capacity(capacity))
            }
            DataType::Interval => Builder::Interval(
                arrow::array::IntervalMonthDayNanoBuilder::with_capacity(capacity),
            ),
            DataType::Array(element) => Builder::List(Box::new(ListBuilder {
                element: element.get(),
                elements: Builder::new(element.get(), capacity),
                offsets: vec![0],
                nulls: arrow::array::NullBufferBuilder::new(capacity),
            })),
        }
    }

    /// Appends a value whose payload length was checked (`None`: NULL); a text's or binary's
    /// payload is its bytes alone.
    fn append(&mut self, payload: Option<&[u8]>) {
        match self {
            Builder::Boolean(b) => b.append_option(payload.map(|p| p[0] != 0)),
            Builder::Int16(b) => b.append_option(payload.map(|p| i16::from_le_bytes(le(p)))),
            Builder::Int32(b) => b.append_option(payload.map(|p| i32::from_le_bytes(le(p)))),
            Builder::Int64(b) => b.append_option(payload.map(|p| i64::from_le_bytes(le(p)))),
            Builder::Float32(b) => b.append_option(payload.map(|p| f32::from_le_bytes(le(p)))),
            Builder::Float64(b) => b.append_option(payload.map(|p| f64::from_le_bytes(le(p)))),
            Builder::Decimal(b) => b.append_option(payload.map(|p| i128::from_le_bytes(le(p)))),
            Builder::Decimal256(b) => b.append_option(payload.map(|p| i256::from_le_bytes(le(p)))),
            Builder::Date(b) => b.append_option(payload.map(|p| i32::from_le_bytes(le(p)))),
            Builder::Timestamp(b) => b.append_option(payload.map(|p| i64::from_le_bytes(le(p)))),
            Builder::Text(b) => b.append_option(
                payload.map(|p| std::str::from_utf8(p).expect("text was valid UTF-8 when stored")),
            ),
            Builder::Bytea(b) => b.append_option(payload),
            Builder::Time(b) => b.append_option(payload.map(|p| i64::from_le_bytes(le(p)))),
            Builder::Interval(b) => b.append_option(payload.map(|p| {
                arrow::datatypes::IntervalMonthDayNano::new(
                    i32::from_le_bytes(le(p)),
                    i32::from_le_bytes(le(&p[4..])),
                    i64::from_le_bytes(le(&p[8..])),
                )
            })),
            Builder::List(b) => {
                let end = match payload {
                    Some(p) => {
                        let (k, _) = read_varint(p).expect("an array was stored whole");
                        let columns = vec![(b.element, Some(0)); k];
                        push_values(&columns, std::slice::from_mut(&mut b.elements), p)
                            .expect("an array was stored whole");
                        b.nulls.append_non_null();
                        k
                    }
                    None => {
                        b.nulls.append_null();
                        0
                    }
                };
                let last = *b.offsets.last().expect("starts with 0");
                b.offsets.push(last + end as i32);
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            Builder::List(b) => b.offsets.len() - 1,
            other => other.as_dyn().len(),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::Boolean(b) => Arc::new(b.finish()),
            Builder::Int16(b) => Arc::new(b.finish()),
            Builder::Int32(b) => Arc::new(b.finish()),
            Builder::Int64(b) => Arc::new(b.finish()),
            Builder::Float32(b) => Arc::new(b.finish()),
            Builder::Float64(b) => Arc::new(b.finish()),
            Builder::Decimal(b) => Arc::new(b.finish()),
            Builder::Decimal256(b) => Arc::new(b.finish()),
            Builder::Text(b) => Arc::new(b.finish()),
            Builder::Date(b) => Arc::new(b.finish()),
            Builder::Timestamp(b) => Arc::new(b.finish()),
            Builder::Bytea(b) => Arc::new(b.finish()),
            Builder::Time(b) => Arc::new(b.finish()),
            Builder::Interval(b) => Arc::new(b.finish()),
            Builder::List(b) => {
                let values = b.elements.finish();
                let field = Arc::new(arrow::datatypes::Field::new_list_field(
                    values.data_type().clone(),
                    true,
                ));
                let offsets = std::mem::replace(&mut b.offsets, vec![0]);
                let offsets = arrow::buffer::OffsetBuffer::new(offsets.into());
                Arc::new(arrow::array::ListArray::new(field, offsets, values, b.nulls.finish()))
            }
        }
    }

    fn as_dyn(&self) -> &dyn ArrayBuilder {
        match self {
            Builder::Boolean(b) => b,
            Builder::Int16(b) => b,
            Builder::Int32(b) => b,
            Builder::Int64(b) => b,
            Builder::Float32(b) => b,
            Builder::Float64(b) => b,
            Builder::Decimal(b) => b,
            Builder::Decimal256(b) => b,
            Builder::Text(b) => b,
            Builder::Date(b) => b,
            Builder::Timestamp(b) => b,
            Builder::Bytea(b) => b,
            Builder::Time(b) => b,
            Builder::Interval(b) => b,
            Builder::List(_) => unreachable!("an array builder's length is its own"),
        }
    }
}

fn le<const N: usize>(p: &[u8]) -> [u8; N] {
    p[..N].try_into().expect("payload length checked by fixed_len")
}

#[cfg(test)]
mod tests {
    use arrow::array::{
        BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int16Array,
        Int32Array, Int64Array, StringArray, TimestampMicrosecondArray,
    };

    use super::*;
    use crate::ids::TableId;
    use crate::storage::keycodec::encode_keys;

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
        encode_rows(&[ints.clone(), text.clone(), dec.clone()], &[], &mut rows);

        let mut all = RowDecoder::new(&types, &[], &[0, 1, 2], 3);
        rows.iter().for_each(|r| all.push(&[], r).unwrap());
        let out = all.finish();
        assert_eq!(&out[0], &ints);
        assert_eq!(&out[1], &text);
        assert_eq!(&out[2], &dec);

        let mut some = RowDecoder::new(&types, &[], &[2, 0], 3);
        rows.iter().for_each(|r| some.push(&[], r).unwrap());
        let out = some.finish();
        assert_eq!(&out[0], &dec);
        assert_eq!(&out[1], &ints);
    }

    #[test]
    fn columns_after_the_last_projected_one_are_not_walked() {
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![Some(7), None]));
        let text: ArrayRef = Arc::new(StringArray::from(vec![Some("abc"), Some("de")]));
        let types = [DataType::Int32, DataType::Varchar];
        let mut rows = vec![Vec::new(); 2];
        encode_rows(&[ints.clone(), text], &[], &mut rows);
        // The text column of each row is cut short: only a decoder that walks it notices.
        let cut: Vec<Vec<u8>> = rows.iter().map(|r| r[..r.len() - 1].to_vec()).collect();
        let mut first = RowDecoder::new(&types, &[], &[0], 2);
        cut.iter().for_each(|r| first.push(&[], r).unwrap());
        assert_eq!(&first.finish()[0], &ints);
        let mut both = RowDecoder::new(&types, &[], &[1, 0], 2);
        assert!(both.push(&[], &cut[0]).is_err(), "a projected column cut short is corrupt");
    }

    /// Rows of `columns` as a table keyed by `key` stores them: their keys and values.
    fn stored(columns: &[ArrayRef], key: &[usize]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let n = columns[0].len();
        let pk: Vec<ArrayRef> = key.iter().map(|&i| columns[i].clone()).collect();
        let keys = encode_keys(TableId(9), &pk, n, key.len().min(1)).unwrap();
        let mut values = vec![Vec::new(); n];
        encode_rows(columns, key, &mut values);
        keys.into_iter().zip(values).collect()
    }

    fn decode(
        rows: &[(Vec<u8>, Vec<u8>)],
        types: &[DataType],
        key: &[usize],
        projection: &[usize],
    ) -> Vec<ArrayRef> {
        let mut d = RowDecoder::new(types, key, projection, rows.len());
        rows.iter().for_each(|(k, v)| d.push(k, v).unwrap());
        d.finish()
    }

    fn bench_row() -> Vec<ArrayRef> {
        // t(id bigint primary key, a int, b int, c text, d text), texts of 24 and 9 bytes.
        vec![
            Arc::new(Int64Array::from(vec![7])),
            Arc::new(Int32Array::from(vec![7])),
            Arc::new(Int32Array::from(vec![7])),
            Arc::new(StringArray::from(vec!["8f14e45fceea167a5a36dedd"])),
            Arc::new(StringArray::from(vec!["c9f0f895f"])),
        ]
    }

    #[test]
    fn a_row_of_the_bench_table_takes_46_bytes_and_its_key_holds_the_id() {
        let columns = bench_row();
        let rows = stored(&columns, &[0]);
        assert_eq!(rows[0].1.len(), 46);
        let types = [
            DataType::Int64,
            DataType::Int32,
            DataType::Int32,
            DataType::Varchar,
            DataType::Varchar,
        ];
        assert_eq!(decode(&rows, &types, &[0], &[0, 1, 2, 3, 4]), columns);
        assert_eq!(
            decode(&rows, &types, &[0], &[3, 0]),
            vec![columns[3].clone(), columns[0].clone()]
        );
        // Without the id projected the key is not read at all.
        assert_eq!(
            decode(&[(vec![], rows[0].1.clone())], &types, &[0], &[2]),
            vec![columns[2].clone()]
        );
    }

    #[test]
    fn key_columns_of_every_type_are_read_back_from_the_key() {
        // A key of text, bigint, timestamp, decimal, bytea, date, smallint and boolean, NULLs
        // and texts of 0, 8 and 9 bytes (a whole group, and one more) among them, then a float
        // key column (kept in the value) and a value column.
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![Some(""), Some("abcdefgh"), Some("abcdefghi"), None])),
            Arc::new(Int64Array::from(vec![Some(i64::MIN), Some(-1), Some(0), Some(i64::MAX)])),
            Arc::new(TimestampMicrosecondArray::from(vec![Some(-5), None, Some(0), Some(1 << 50)])),
            Arc::new(
                Decimal128Array::from(vec![Some(-12345), Some(0), None, Some(99_999)])
                    .with_precision_and_scale(10, 2)
                    .unwrap(),
            ),
            Arc::new(BinaryArray::from(vec![
                Some(&[0u8, 255][..]),
                Some(&[]),
                None,
                Some(&[9; 17]),
            ])),
            Arc::new(Date32Array::from(vec![Some(-1), Some(0), Some(19000), None])),
            Arc::new(Int16Array::from(vec![Some(i16::MIN), Some(3), None, Some(i16::MAX)])),
            Arc::new(BooleanArray::from(vec![Some(true), Some(false), None, Some(true)])),
            Arc::new(Float64Array::from(vec![Some(-0.0), Some(1.5), Some(f64::NAN), None])),
            Arc::new(Int32Array::from(vec![Some(1), None, Some(3), Some(4)])),
        ];
        let types = [
            DataType::Varchar,
            DataType::Int64,
            DataType::Timestamp,
            DataType::Decimal { precision: 10, scale: 2 },
            DataType::Bytea,
            DataType::Date,
            DataType::Int16,
            DataType::Boolean,
            DataType::Float64,
            DataType::Int32,
        ];
        let key = [0, 1, 2, 3, 4, 5, 6, 7, 8];
        let rows = stored(&columns, &key);
        let all: Vec<usize> = (0..columns.len()).collect();
        let out = decode(&rows, &types, &key, &all);
        for (i, (got, want)) in out.iter().zip(&columns).enumerate() {
            if i == 8 {
                // Bit for bit: -0 stays -0, which the key's encoding of a float does not keep.
                let (got, want) =
                    (got.as_primitive::<Float64Type>(), want.as_primitive::<Float64Type>());
                let bits = |a: &arrow::array::Float64Array| -> Vec<Option<u64>> {
                    a.iter().map(|v| v.map(f64::to_bits)).collect()
                };
                assert_eq!(bits(got), bits(want));
            } else {
                assert_eq!(got, want, "column {i}");
            }
        }
        // A projection of some key columns in another order steps over the others.
        let some = decode(&rows, &types, &key, &[6, 9, 0]);
        assert_eq!(some, vec![columns[6].clone(), columns[9].clone(), columns[0].clone()]);
        // A key cut short is an error, not a panic: row 0 ends in its boolean (2 bytes) and
        // its float (9 bytes).
        let (k, v) = &rows[0];
        let mut d = RowDecoder::new(&types, &key, &[7], 1);
        assert!(d.push(&k[..k.len() - 9], v).is_ok());
        assert!(d.push(&k[..k.len() - 10], v).is_err());
    }

    #[test]
    fn intervals_and_times_round_trip_as_keys_and_values() {
        use arrow::array::{IntervalMonthDayNanoArray, Time64MicrosecondArray};
        use arrow::datatypes::IntervalMonthDayNano as Iv;
        let spans = vec![
            Some(Iv::new(-1, 3, 0)),
            Some(Iv::new(0, 1, 7_200_000_000_000)),
            None,
            Some(Iv::new(i32::MAX, i32::MIN, i64::MIN)),
        ];
        let times = vec![Some(0), Some(86_399_999_999), None, Some(36_000_000_000)];
        let columns: Vec<ArrayRef> = vec![
            Arc::new(IntervalMonthDayNanoArray::from(spans.clone())),
            Arc::new(Time64MicrosecondArray::from(times.clone())),
            Arc::new(IntervalMonthDayNanoArray::from(spans)),
            Arc::new(Time64MicrosecondArray::from(times)),
        ];
        let types = [DataType::Interval, DataType::Time, DataType::Interval, DataType::Time];
        // The first two are the key; the last two are values.
        let rows = stored(&columns, &[0, 1]);
        let out = decode(&rows, &types, &[0, 1], &[0, 1, 2, 3]);
        assert_eq!(out, columns);
    }

    #[test]
    fn arrays_round_trip_with_null_and_empty_ones() {
        use crate::types::Element;
        use arrow::array::ListArray;
        use arrow::datatypes::Int32Type;
        let ints = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1), None, Some(-3)]),
            None,
            Some(vec![]),
            Some(vec![Some(i32::MAX)]),
        ]);
        let texts: Vec<Option<Vec<Option<&str>>>> =
            vec![Some(vec![Some("a b"), Some("")]), Some(vec![None]), None, Some(vec![])];
        let mut builder = arrow::array::ListBuilder::new(arrow::array::StringBuilder::new());
        for list in &texts {
            match list {
                Some(items) => {
                    for item in items {
                        builder.values().append_option(*item);
                    }
                    builder.append(true);
                }
                None => builder.append(false),
            }
        }
        let id: ArrayRef = Arc::new(Int32Array::from(vec![1, 2, 3, 4]));
        let columns: Vec<ArrayRef> = vec![id, Arc::new(ints), Arc::new(builder.finish())];
        let types = [
            DataType::Int32,
            DataType::Array(Element::new(DataType::Int32).unwrap()),
            DataType::Array(Element::new(DataType::Varchar).unwrap()),
        ];
        let rows = stored(&columns, &[0]);
        let out = decode(&rows, &types, &[0], &[0, 1, 2]);
        assert_eq!(out, columns);
        // A projection of the second array alone skips the first.
        assert_eq!(decode(&rows, &types, &[0], &[2]), vec![columns[2].clone()]);
    }

    #[test]
    fn rows_that_hold_their_key_columns_too_still_decode() {
        // 7, NULL, 'ab' as the rows before the key held the id: marker 2, 3 columns, the
        // bitmap, then the values.
        let row = [[2, 3, 0b010].as_slice(), &7i64.to_le_bytes(), &[2, b'a', b'b']].concat();
        let types = [DataType::Int64, DataType::Int32, DataType::Varchar];
        // The key says 8: the row's own id is what such a row reads.
        let key = encode_keys(TableId(9), &[Arc::new(Int64Array::from(vec![8])) as ArrayRef], 1, 1)
            .unwrap()
            .remove(0);
        let mut d = RowDecoder::new(&types, &[0], &[2, 0, 1], 1);
        d.push(&key, &row).unwrap();
        let out = d.finish();
        assert_eq!(&out[0], &(Arc::new(StringArray::from(vec!["ab"])) as ArrayRef));
        assert_eq!(&out[1], &(Arc::new(Int64Array::from(vec![7])) as ArrayRef));
        assert_eq!(&out[2], &(Arc::new(Int32Array::from(vec![None])) as ArrayRef));
    }

    #[test]
    fn rows_written_with_a_tag_per_value_still_decode() {
        // 7, 'ab', NULL as a tag byte per value and a u32 text length.
        let row = [[1, 7, 0, 0, 0].as_slice(), &[1, 2, 0, 0, 0, b'a', b'b'], &[0]].concat();
        let types = [DataType::Int32, DataType::Varchar, DataType::Int64];
        let mut d = RowDecoder::new(&types, &[], &[2, 1, 0], 1);
        d.push(&[], &row).unwrap();
        let out = d.finish();
        assert_eq!(&out[0], &(Arc::new(Int64Array::from(vec![None])) as ArrayRef));
        assert_eq!(&out[1], &(Arc::new(StringArray::from(vec!["ab"])) as ArrayRef));
        assert_eq!(&out[2], &(Arc::new(Int32Array::from(vec![7])) as ArrayRef));
        assert!(d.push(&[], &row[..6]).is_err(), "a tagged row cut short is corrupt");
    }

    #[test]
    fn columns_a_row_was_written_without_read_as_null() {
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![Some(1), None]));
        let mut rows = vec![Vec::new(); 2];
        encode_rows(std::slice::from_ref(&ints), &[], &mut rows);
        let mut d = RowDecoder::new(&[DataType::Int32, DataType::Varchar], &[], &[0, 1], 2);
        rows.iter().for_each(|r| d.push(&[], r).unwrap());
        let out = d.finish();
        assert_eq!(&out[0], &ints);
        assert_eq!(&out[1], &(Arc::new(StringArray::from(vec![None::<&str>; 2])) as ArrayRef));
    }

    #[test]
    fn long_texts_and_many_columns_round_trip() {
        let long = "x".repeat(300);
        let columns: Vec<ArrayRef> = (0..10)
            .map(|i| -> ArrayRef {
                Arc::new(StringArray::from(vec![(i % 3 != 0).then_some(long.as_str())]))
            })
            .collect();
        let mut rows = vec![Vec::new(); 1];
        encode_rows(&columns, &[], &mut rows);
        let types = [DataType::Varchar; 10];
        let mut d = RowDecoder::new(&types, &[], &(0..10).collect::<Vec<_>>(), 1);
        d.push(&[], &rows[0]).unwrap();
        assert_eq!(d.finish(), columns);
    }

    #[test]
    fn truncated_rows_are_an_error() {
        let mut rows = vec![Vec::new(); 1];
        encode_rows(&[Arc::new(StringArray::from(vec!["hello"])) as ArrayRef], &[], &mut rows);
        let mut d = RowDecoder::new(&[DataType::Varchar], &[], &[0], 1);
        assert!(d.push(&[], &rows[0][..4]).is_err());
    }
}
