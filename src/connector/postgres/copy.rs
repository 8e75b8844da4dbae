//! Snapshot pages in Postgres's binary `COPY` format, decoded straight into Arrow arrays.
//!
//! A page is `COPY (SELECT .. ORDER BY pk LIMIT n) TO STDOUT (FORMAT binary)`: Postgres sends
//! each value in its binary send format, which Sluice appends to a typed Arrow builder in one
//! pass over the page, without text in between. Each upstream column is read as a [`Wire`]
//! format chosen from its type; types Sluice has no binary decoder for are selected as `::text`
//! and read as text, as the text protocol would print them.
//!
//! A numeric the column cannot hold exactly (more digits than its precision, a fraction digit
//! below its scale) stops the page with an error (22003) naming it. Numeric `NaN` and the
//! infinities, and `infinity` and `-infinity` dates and timestamps, are the special values of
//! their Arrow types (see [`crate::types::numeric`] and [`crate::types::infinite_date`]).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Decimal256Builder,
    Float32Builder, Float64Builder, Int16Builder, Int32Builder, Int64Builder, StringBuilder,
    TimestampMicrosecondBuilder,
};
use postgres_protocol::types as pg;

use crate::error::{Error, Result};
use crate::types::numeric::Special;
use crate::types::{DataType, UTC};
use arrow::datatypes::i256;

/// Microseconds from the Unix epoch to Postgres's epoch, 2000-01-01.
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;
/// Days from the Unix epoch to Postgres's epoch.
const PG_EPOCH_DAYS: i32 = 10_957;
/// The signature opening a binary `COPY` stream.
const SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";

/// How one upstream column travels in a binary page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// `boolean`
    Bool,
    /// `smallint`
    Int2,
    /// `integer`
    Int4,
    /// `bigint`
    Int8,
    /// `real`
    Float4,
    /// `double precision`
    Float8,
    /// `numeric`, read into a decimal of this precision and scale.
    Numeric {
        /// Total digits of the decimal.
        precision: u8,
        /// Digits after the point.
        scale: i8,
    },
    /// `date`
    Date,
    /// `timestamp without time zone`
    Timestamp,
    /// `timestamp with time zone`
    Timestamptz,
    /// `bytea`
    Bytea,
    /// Text: `text`, `varchar` and `char(n)` as they are, any other type cast to text upstream.
    Text,
}

impl Wire {
    /// The format for an upstream column of type `upstream_type` (as `format_type` prints it)
    /// that Sluice holds as `data_type`.
    pub fn of(upstream_type: &str, data_type: DataType) -> Self {
        let base = crate::connector::postgres::base_type(upstream_type);
        match (base.as_str(), data_type) {
            ("boolean", DataType::Boolean) => Wire::Bool,
            ("smallint", DataType::Int16) => Wire::Int2,
            ("integer", DataType::Int32) => Wire::Int4,
            ("bigint", DataType::Int64) => Wire::Int8,
            ("real", DataType::Float32) => Wire::Float4,
            ("double precision", DataType::Float64) => Wire::Float8,
            // An unconstrained numeric's text keeps each value's display scale (`1.50`), which
            // its table keeps beside it (`crate::batch::display_scale`).
            ("numeric", DataType::Decimal { precision, scale })
                if !crate::types::numeric::is_unconstrained(precision, scale) =>
            {
                Wire::Numeric { precision, scale }
            }
            ("date", DataType::Date) => Wire::Date,
            ("timestamp without time zone", DataType::Timestamp) => Wire::Timestamp,
            ("timestamp with time zone", DataType::Timestamptz) => Wire::Timestamptz,
            ("bytea", DataType::Bytea) => Wire::Bytea,
            _ => Wire::Text,
        }
    }

    /// The type a binary-read column is cast to in the page's query (its type without a
    /// modifier, so the cast never rounds): binary values carry no type, so a column retyped
    /// upstream after the table was created is converted by Postgres (or fails there) rather
    /// than decoded as the type it no longer has. `None` for text.
    pub fn cast_target(self) -> Option<&'static str> {
        Some(match self {
            Wire::Bool => "boolean",
            Wire::Int2 => "smallint",
            Wire::Int4 => "integer",
            Wire::Int8 => "bigint",
            Wire::Float4 => "real",
            Wire::Float8 => "double precision",
            Wire::Numeric { .. } => "numeric",
            Wire::Date => "date",
            Wire::Timestamp => "timestamp",
            Wire::Timestamptz => "timestamptz",
            Wire::Bytea => "bytea",
            Wire::Text => return None,
        })
    }

    /// Whether the upstream sends the column as text only after a `::text` cast. A `char(n)`
    /// is cast too: its text drops the blank padding, as Postgres's comparisons of it do (a
    /// view's `WHERE c = 'BUILDING'` on a `char(10)` must match).
    /// Arrays are cast whatever their element (`varchar(5)[]` too): their binary form is not
    /// their text.
    pub fn needs_text_cast(self, upstream_type: &str) -> bool {
        let base = crate::connector::postgres::base_type(upstream_type);
        self == Wire::Text && !matches!(base.as_str(), "text" | "character varying")
    }
}

/// A typed builder for one column of a page.
enum Column {
    Bool(BooleanBuilder),
    Int2(Int16Builder),
    Int4(Int32Builder),
    Int8(Int64Builder),
    Float4(Float32Builder),
    Float8(Float64Builder),
    Numeric(Decimal128Builder, u8, i8),
    Numeric256(Decimal256Builder, u8, i8),
    Date(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder),
    Bytea(BinaryBuilder),
    Text(StringBuilder),
}

impl Column {
    fn new(wire: Wire, rows: usize) -> Result<Self> {
        Ok(match wire {
            Wire::Bool => Column::Bool(BooleanBuilder::with_capacity(rows)),
            Wire::Int2 => Column::Int2(Int16Builder::with_capacity(rows)),
            Wire::Int4 => Column::Int4(Int32Builder::with_capacity(rows)),
            Wire::Int8 => Column::Int8(Int64Builder::with_capacity(rows)),
            Wire::Float4 => Column::Float4(Float32Builder::with_capacity(rows)),
            Wire::Float8 => Column::Float8(Float64Builder::with_capacity(rows)),
            Wire::Numeric { precision, scale } if precision > 38 => Column::Numeric256(
                Decimal256Builder::with_capacity(rows)
                    .with_precision_and_scale(precision, scale)?,
                precision,
                scale,
            ),
            Wire::Numeric { precision, scale } => Column::Numeric(
                Decimal128Builder::with_capacity(rows)
                    .with_precision_and_scale(precision, scale)?,
                precision,
                scale,
            ),
            Wire::Date => Column::Date(Date32Builder::with_capacity(rows)),
            Wire::Timestamp => Column::Timestamp(TimestampMicrosecondBuilder::with_capacity(rows)),
            Wire::Timestamptz => Column::Timestamp(
                TimestampMicrosecondBuilder::with_capacity(rows).with_timezone(UTC),
            ),
            Wire::Bytea => Column::Bytea(BinaryBuilder::with_capacity(rows, rows * 16)),
            Wire::Text => Column::Text(StringBuilder::with_capacity(rows, rows * 16)),
        })
    }

    fn append_null(&mut self) {
        match self {
            Column::Bool(b) => b.append_null(),
            Column::Int2(b) => b.append_null(),
            Column::Int4(b) => b.append_null(),
            Column::Int8(b) => b.append_null(),
            Column::Float4(b) => b.append_null(),
            Column::Float8(b) => b.append_null(),
            Column::Numeric(b, ..) => b.append_null(),
            Column::Numeric256(b, ..) => b.append_null(),
            Column::Date(b) => b.append_null(),
            Column::Timestamp(b) => b.append_null(),
            Column::Bytea(b) => b.append_null(),
            Column::Text(b) => b.append_null(),
        }
    }

    /// Appends a value in its binary send format.
    fn append(&mut self, value: &[u8]) -> Result<()> {
        match self {
            Column::Bool(b) => b.append_value(pg::bool_from_sql(value).map_err(bad)?),
            Column::Int2(b) => b.append_value(pg::int2_from_sql(value).map_err(bad)?),
            Column::Int4(b) => b.append_value(pg::int4_from_sql(value).map_err(bad)?),
            Column::Int8(b) => b.append_value(pg::int8_from_sql(value).map_err(bad)?),
            Column::Float4(b) => b.append_value(pg::float4_from_sql(value).map_err(bad)?),
            Column::Float8(b) => b.append_value(pg::float8_from_sql(value).map_err(bad)?),
            Column::Numeric(b, precision, scale) => {
                let v = numeric(value, *precision, *scale)?;
                b.append_value(match Special::of_i256(v) {
                    Some(special) => special.as_i128(),
                    None => v.as_i128(),
                })
            }
            Column::Numeric256(b, precision, scale) => {
                b.append_value(numeric(value, *precision, *scale)?)
            }
            Column::Date(b) => {
                let days = pg::date_from_sql(value).map_err(bad)?;
                // `infinity` and `-infinity` are the extremes, in Sluice as in Postgres.
                b.append_value(match days {
                    i32::MAX | i32::MIN => days,
                    _ => days.checked_add(PG_EPOCH_DAYS).ok_or_else(|| range("date"))?,
                })
            }
            Column::Timestamp(b) => {
                let micros = pg::timestamp_from_sql(value).map_err(bad)?;
                b.append_value(match micros {
                    i64::MAX | i64::MIN => micros,
                    _ => micros.checked_add(PG_EPOCH_MICROS).ok_or_else(|| range("timestamp"))?,
                })
            }
            Column::Bytea(b) => b.append_value(pg::bytea_from_sql(value)),
            Column::Text(b) => b.append_value(pg::text_from_sql(value).map_err(bad)?),
        }
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Column::Bool(b) => Arc::new(b.finish()),
            Column::Int2(b) => Arc::new(b.finish()),
            Column::Int4(b) => Arc::new(b.finish()),
            Column::Int8(b) => Arc::new(b.finish()),
            Column::Float4(b) => Arc::new(b.finish()),
            Column::Float8(b) => Arc::new(b.finish()),
            Column::Numeric(b, ..) => Arc::new(b.finish()),
            Column::Numeric256(b, ..) => Arc::new(b.finish()),
            Column::Date(b) => Arc::new(b.finish()),
            Column::Timestamp(b) => Arc::new(b.finish()),
            Column::Bytea(b) => Arc::new(b.finish()),
            Column::Text(b) => Arc::new(b.finish()),
        }
    }
}

fn range(ty: &str) -> Error {
    Error::Upstream { code: "22008", message: format!("a snapshot {ty} is out of Sluice's range") }
}

fn bad(e: Box<dyn std::error::Error + Sync + Send>) -> Error {
    Error::Upstream { code: "XX000", message: format!("a snapshot value does not decode: {e}") }
}

fn malformed(what: &str) -> Error {
    Error::Upstream { code: "XX000", message: format!("malformed binary COPY data: {what}") }
}

/// A decoded page: one array per column, and the last row's values in their send format.
pub struct Decoded {
    /// One array per column.
    pub columns: Vec<ArrayRef>,
    /// The last row's values as sent (`None`: NULL); empty for an empty page.
    pub last_row: Vec<Option<Vec<u8>>>,
}

/// Reads a binary `COPY` stream whose rows have one value per entry of `wires`, about `rows`
/// of them, into one array per column.
pub fn decode(data: &[u8], wires: &[Wire], rows: usize) -> Result<Decoded> {
    let mut decoder = PageDecoder::new(wires, rows)?;
    decoder.feed(data)?;
    decoder.finish()
}

/// A binary `COPY` stream decoded as it arrives: [`PageDecoder::feed`] takes each piece the
/// connection delivers and decodes every row the piece completes, so a page's rows are decoded
/// while Postgres still sends the rest, not all after its last byte.
pub struct PageDecoder {
    wires: Vec<Wire>,
    columns: Vec<Column>,
    /// Received bytes not decoded yet: part of the header or of a row.
    pending: Vec<u8>,
    header_read: bool,
    /// Whether the stream's end marker came.
    ended: bool,
    /// The last row decoded, as sent; empty before the first.
    last_row: Vec<u8>,
}

impl PageDecoder {
    /// A decoder of rows of one value per entry of `wires`, about `rows` of them.
    pub fn new(wires: &[Wire], rows: usize) -> Result<Self> {
        Ok(Self {
            wires: wires.to_vec(),
            columns: wires.iter().map(|&w| Column::new(w, rows)).collect::<Result<_>>()?,
            pending: Vec::new(),
            header_read: false,
            ended: false,
            last_row: Vec::new(),
        })
    }

    /// Decodes the rows `bytes`, the next piece of the stream, completes.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<()> {
        if self.pending.is_empty() {
            // Postgres sends a row per message: most pieces are whole rows, decoded in place.
            let used = self.decode_rows(bytes)?;
            self.pending.extend_from_slice(&bytes[used..]);
        } else {
            self.pending.extend_from_slice(bytes);
            let mut pending = std::mem::take(&mut self.pending);
            let used = self.decode_rows(&pending)?;
            pending.drain(..used);
            self.pending = pending;
        }
        Ok(())
    }

    /// Decodes the header, if still to read, and every complete row at the start of `data`;
    /// returns how many bytes it decoded.
    fn decode_rows(&mut self, data: &[u8]) -> Result<usize> {
        let mut at = 0;
        if !self.header_read {
            match complete_header(data)? {
                Some(len) => at = len,
                None => return Ok(0),
            }
            self.header_read = true;
        }
        while !self.ended {
            let Some(end) = row_end(data, at, self.wires.len())? else { break };
            let fields = i16::from_be_bytes(take::<2>(data, &mut at)?);
            if fields == -1 {
                self.ended = true;
                break;
            }
            let start = at;
            for column in &mut self.columns {
                match value(data, &mut at)? {
                    Some(value) => column.append(value)?,
                    None => column.append_null(),
                }
            }
            debug_assert_eq!(at, end);
            self.last_row.clear();
            self.last_row.extend_from_slice(&data[start..at]);
        }
        Ok(at)
    }

    /// The decoded page; an error if the stream ended early.
    pub fn finish(mut self) -> Result<Decoded> {
        if !self.ended || !self.pending.is_empty() {
            return Err(malformed("truncated"));
        }
        let last_row = match self.last_row.is_empty() {
            true => Vec::new(),
            false => {
                let mut at = 0;
                let row = &self.last_row;
                let values =
                    self.wires.iter().map(|_| Ok(value(row, &mut at)?.map(<[u8]>::to_vec)));
                values.collect::<Result<_>>()?
            }
        };
        Ok(Decoded { columns: self.columns.iter_mut().map(Column::finish).collect(), last_row })
    }
}

/// The length of the stream's header if `data` holds all of it (`None`: not yet).
fn complete_header(data: &[u8]) -> Result<Option<usize>> {
    let fixed = SIGNATURE.len() + 8;
    if data.len() < fixed {
        return match SIGNATURE.starts_with(&data[..data.len().min(SIGNATURE.len())]) {
            true => Ok(None),
            false => Err(malformed("no PGCOPY signature")),
        };
    }
    let len = header_len(data)?;
    Ok((data.len() >= len).then_some(len))
}

/// Where the row (or end marker) starting at `at` ends, if `data` holds all of it (`None`: not
/// yet); an error for a row of another number of values than `width`.
fn row_end(data: &[u8], mut at: usize, width: usize) -> Result<Option<usize>> {
    let Some(fields) = data.get(at..at + 2) else { return Ok(None) };
    let fields = i16::from_be_bytes([fields[0], fields[1]]);
    at += 2;
    if fields == -1 {
        return Ok(Some(at));
    }
    if fields as usize != width {
        return Err(malformed(&format!("a row of {fields} values, {width} expected")));
    }
    for _ in 0..width {
        let Some(len) = data.get(at..at + 4) else { return Ok(None) };
        let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
        at += 4 + len.max(0) as usize;
    }
    Ok((at <= data.len()).then_some(at))
}

/// The rows of a binary `COPY` stream a client sent, as text columns: each value as Postgres
/// prints it (`infinity` and `NaN` included), decoded by its column's type in `types`. They then
/// go the way of text `COPY` rows, through the same casts and checks.
pub fn text_columns(data: &[u8], types: &[DataType]) -> Result<Vec<Vec<Option<String>>>> {
    let mut columns: Vec<Vec<Option<String>>> = vec![Vec::new(); types.len()];
    let mut at = header_len(data)?;
    loop {
        let fields = i16::from_be_bytes(take::<2>(data, &mut at)?);
        if fields == -1 {
            break;
        }
        if fields as usize != types.len() {
            return Err(malformed(&format!("a row of {fields} values, {} expected", types.len())));
        }
        for (column, &ty) in columns.iter_mut().zip(types) {
            let text = match value(data, &mut at)? {
                Some(value) => Some(value_text(value, ty)?),
                None => None,
            };
            column.push(text);
        }
    }
    Ok(columns)
}

/// A value in the binary send format of `ty` as Postgres prints it.
fn value_text(value: &[u8], ty: DataType) -> Result<String> {
    use chrono::{Duration, NaiveDate};
    let epoch = NaiveDate::from_ymd_opt(2000, 1, 1).expect("a valid date");
    Ok(match ty {
        DataType::Boolean => pg::bool_from_sql(value).map_err(bad)?.to_string(),
        DataType::Int16 => pg::int2_from_sql(value).map_err(bad)?.to_string(),
        DataType::Int32 => pg::int4_from_sql(value).map_err(bad)?.to_string(),
        DataType::Int64 => pg::int8_from_sql(value).map_err(bad)?.to_string(),
        DataType::Float32 => float_text(pg::float4_from_sql(value).map_err(bad)?.into()),
        DataType::Float64 => float_text(pg::float8_from_sql(value).map_err(bad)?),
        DataType::Decimal { .. } => numeric_text(value)?,
        DataType::Array(_) => {
            return Err(crate::unsupported!("array columns in a table from an upstream"));
        }
        DataType::Date => match pg::date_from_sql(value).map_err(bad)? {
            i32::MAX => "infinity".to_owned(),
            i32::MIN => "-infinity".to_owned(),
            days => {
                let date = epoch.checked_add_signed(Duration::days(days.into()));
                date.ok_or_else(|| malformed("a date out of range"))?.to_string()
            }
        },
        DataType::Timestamp | DataType::Timestamptz => {
            match pg::timestamp_from_sql(value).map_err(bad)? {
                i64::MAX => "infinity".to_owned(),
                i64::MIN => "-infinity".to_owned(),
                micros => {
                    let midnight = epoch.and_hms_opt(0, 0, 0).expect("midnight exists");
                    let at = midnight.checked_add_signed(Duration::microseconds(micros));
                    let text = at.ok_or_else(|| malformed("a timestamp out of range"))?;
                    let text = text.format("%Y-%m-%d %H:%M:%S%.6f").to_string();
                    if ty == DataType::Timestamptz { text + "+00" } else { text }
                }
            }
        }
        DataType::Bytea => {
            let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
            format!("\\x{hex}")
        }
        DataType::Varchar => pg::text_from_sql(value).map_err(bad)?.to_owned(),
        // jsonb's binary form is a version byte, 1, then the text.
        DataType::Jsonb => match value.split_first() {
            Some((1, text)) => pg::text_from_sql(text).map_err(bad)?.to_owned(),
            _ => return Err(malformed("a jsonb value without its version byte")),
        },
        // Microseconds, days and months, big-endian.
        DataType::Interval => {
            let bytes: [u8; 16] =
                value.try_into().map_err(|_| malformed("an interval of another size"))?;
            let micros = i64::from_be_bytes(bytes[..8].try_into().expect("8 bytes"));
            let days = i32::from_be_bytes(bytes[8..12].try_into().expect("4 bytes"));
            let months = i32::from_be_bytes(bytes[12..].try_into().expect("4 bytes"));
            let v = arrow::datatypes::IntervalMonthDayNano::new(months, days, micros * 1000);
            crate::types::interval_text::format(v)
        }
        // Microseconds since midnight.
        DataType::Time => {
            let micros = pg::int8_from_sql(value).map_err(bad)?;
            crate::types::interval_text::time(micros)
        }
    })
}

/// A float as text that Sluice's casts read back to the same value.
fn float_text(v: f64) -> String {
    match v {
        v if v.is_nan() => "NaN".to_owned(),
        v if v == f64::INFINITY => "Infinity".to_owned(),
        v if v == f64::NEG_INFINITY => "-Infinity".to_owned(),
        v => v.to_string(),
    }
}

/// The next value of a row (`None`: NULL), moving `at` past it.
fn value<'a>(data: &'a [u8], at: &mut usize) -> Result<Option<&'a [u8]>> {
    let len = i32::from_be_bytes(take::<4>(data, at)?);
    if len < 0 {
        return Ok(None);
    }
    let end = *at + len as usize;
    let value = data.get(*at..end).ok_or_else(|| malformed("a value past the end"))?;
    *at = end;
    Ok(Some(value))
}

/// A numeric in its send format as Postgres prints it, every digit kept.
pub fn numeric_text(value: &[u8]) -> Result<String> {
    use std::fmt::Write;
    let mut at = 0;
    let ndigits = i16::from_be_bytes(take::<2>(value, &mut at)?).max(0) as i32;
    let weight = i16::from_be_bytes(take::<2>(value, &mut at)?) as i32;
    let sign = u16::from_be_bytes(take::<2>(value, &mut at)?);
    let dscale = u16::from_be_bytes(take::<2>(value, &mut at)?) as usize;
    let mut digits = Vec::with_capacity(ndigits as usize);
    for _ in 0..ndigits {
        digits.push(i16::from_be_bytes(take::<2>(value, &mut at)?));
    }
    let mut text = match sign {
        0x0000 => String::new(),
        0x4000 => "-".to_owned(),
        0xC000 => return Ok("NaN".to_owned()),
        0xD000 => return Ok("Infinity".to_owned()),
        0xF000 => return Ok("-Infinity".to_owned()),
        _ => return Err(malformed("a numeric sign")),
    };
    // Digit `k` weighs 10000^(weight - k); digits beyond those sent are zeros.
    let digit = |k: i32| if (0..ndigits).contains(&k) { digits[k as usize] } else { 0 };
    if weight < 0 {
        text.push('0');
    }
    for k in 0..=weight {
        if k == 0 {
            write!(text, "{}", digit(k)).expect("writing to a String");
        } else {
            write!(text, "{:04}", digit(k)).expect("writing to a String");
        }
    }
    if dscale > 0 {
        let mut fraction = String::with_capacity(dscale + 4);
        let mut k = weight + 1;
        while fraction.len() < dscale {
            write!(fraction, "{:04}", digit(k)).expect("writing to a String");
            k += 1;
        }
        fraction.truncate(dscale);
        text.push('.');
        text.push_str(&fraction);
    }
    Ok(text)
}

/// The length of the stream's header: signature, flags and header extension.
fn header_len(data: &[u8]) -> Result<usize> {
    if !data.starts_with(SIGNATURE) {
        return Err(malformed("no PGCOPY signature"));
    }
    let mut at = SIGNATURE.len() + 4;
    let extension = u32::from_be_bytes(take::<4>(data, &mut at)?) as usize;
    Ok(at + extension)
}

fn take<const N: usize>(data: &[u8], at: &mut usize) -> Result<[u8; N]> {
    let bytes = data.get(*at..*at + N).ok_or_else(|| malformed("truncated"))?;
    *at += N;
    Ok(bytes.try_into().expect("N bytes"))
}

/// A numeric in its send format as the unscaled value of a `numeric(precision, scale)`, or its
/// special value (`NaN` in any numeric, the infinities in an unconstrained one, as Postgres
/// allows). A value the column cannot hold exactly (more digits than the precision, a fraction
/// digit below the scale) is an error (22003): the table stops there rather than hold NULL or
/// a rounded value.
fn numeric(value: &[u8], precision: u8, scale: i8) -> Result<i256> {
    let lost = || {
        let text = numeric_text(value).unwrap_or_else(|_| "?".to_owned());
        Error::OutOfRange(format!(
            "the upstream value {text} cannot be held exactly by numeric({precision},{scale})"
        ))
    };
    let mut at = 0;
    let ndigits = i16::from_be_bytes(take::<2>(value, &mut at)?);
    let weight = i16::from_be_bytes(take::<2>(value, &mut at)?) as i32;
    let sign = u16::from_be_bytes(take::<2>(value, &mut at)?);
    at += 2; // dscale: the digits carry the value.
    let unconstrained = crate::types::numeric::is_unconstrained(precision, scale);
    let negative = match sign {
        0x0000 => false,
        0x4000 => true,
        0xC000 => return Ok(Special::NaN.as_i256()),
        0xD000 if unconstrained => return Ok(Special::Infinity.as_i256()),
        0xF000 if unconstrained => return Ok(Special::NegInfinity.as_i256()),
        _ => return Err(lost()),
    };
    let ten = i256::from_i128(10);
    let mut magnitude = i256::ZERO;
    for i in 0..ndigits.max(0) as i32 {
        let digit = i16::from_be_bytes(take::<2>(value, &mut at)?) as i128;
        // The power of ten of this base-10000 digit's last decimal digit, at `scale`.
        let exponent = 4 * (weight - i) + scale as i32;
        if exponent >= 0 {
            let add = u32::try_from(exponent)
                .ok()
                .and_then(|e| ten.checked_pow(e))
                .and_then(|p| p.checked_mul(i256::from_i128(digit)))
                .and_then(|d| magnitude.checked_add(d));
            magnitude = add.ok_or_else(lost)?;
            continue;
        }
        // A digit reaching below the scale: what lies below must be zero.
        let cut = 10i128.pow((-exponent).min(4) as u32);
        if digit % cut != 0 {
            return Err(lost());
        }
        magnitude = magnitude.checked_add(i256::from_i128(digit / cut)).ok_or_else(lost)?;
    }
    if magnitude >= ten.checked_pow(precision as u32).ok_or_else(lost)? {
        return Err(lost());
    }
    Ok(if negative { magnitude.wrapping_neg() } else { magnitude })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{CastMode, cast_to};
    use arrow::array::AsArray;
    use arrow::array::{Array, StringArray};
    use arrow::util::display::array_value_to_string;

    /// A numeric's send format, built from its text the way Postgres's `numeric_send` does.
    fn numeric_send(text: &str) -> Vec<u8> {
        let (negative, text) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (int, frac) = text.split_once('.').unwrap_or((text, ""));
        let dscale = frac.len();
        // Pad the integer part on the left and the fraction on the right to whole groups.
        let int = format!("{}{int}", "0".repeat((4 - int.len() % 4) % 4));
        let frac = format!("{frac}{}", "0".repeat((4 - frac.len() % 4) % 4));
        let all = format!("{int}{frac}");
        let mut digits: Vec<i16> =
            (0..all.len() / 4).map(|i| all[4 * i..4 * i + 4].parse().unwrap()).collect();
        let mut weight = (int.len() / 4) as i16 - 1;
        while digits.first() == Some(&0) {
            digits.remove(0);
            weight -= 1;
        }
        while digits.last() == Some(&0) {
            digits.pop();
        }
        if digits.is_empty() {
            weight = 0;
        }
        let mut out = Vec::new();
        out.extend((digits.len() as i16).to_be_bytes());
        out.extend(weight.to_be_bytes());
        out.extend((if negative { 0x4000u16 } else { 0 }).to_be_bytes());
        out.extend((dscale as u16).to_be_bytes());
        for d in digits {
            out.extend(d.to_be_bytes());
        }
        out
    }

    /// A binary COPY stream of `rows`, each value in its send format (`None`: NULL).
    fn stream(rows: &[Vec<Option<Vec<u8>>>]) -> Vec<u8> {
        let mut out = SIGNATURE.to_vec();
        out.extend(0u32.to_be_bytes());
        out.extend(0u32.to_be_bytes());
        for row in rows {
            out.extend((row.len() as i16).to_be_bytes());
            for value in row {
                match value {
                    Some(v) => {
                        out.extend((v.len() as i32).to_be_bytes());
                        out.extend(v);
                    }
                    None => out.extend((-1i32).to_be_bytes()),
                }
            }
        }
        out.extend((-1i16).to_be_bytes());
        out
    }

    fn show(array: &ArrayRef) -> Vec<String> {
        if array.data_type().is_numeric() && crate::types::numeric::has_special(array.as_ref()) {
            let texts = crate::types::numeric::texts(array.as_ref());
            return texts.iter().map(|v| v.unwrap_or("NULL").to_owned()).collect();
        }
        (0..array.len())
            .map(|i| {
                if array.is_null(i) {
                    "NULL".to_owned()
                } else {
                    array_value_to_string(array, i).unwrap()
                }
            })
            .collect()
    }

    #[test]
    fn numerics_decode_as_their_text_casts_or_fail_where_not_exact() {
        let cases = [
            "0",
            "1",
            "-1",
            "3.14",
            "3.145",
            "-3.145",
            "3.144999",
            "12345678.9",
            "0.0001",
            "0.00005",
            "0.00004",
            "10000",
            "99999999.995",
            "123456789012345678",
            "-0.5",
            "1000000000000000000000000000000000000000",
            "1.50",
            "123456789012345678901234567890123456789012345678901234.5678",
            "-0.00000000000000000001",
            "0.000000000000000000001",
        ];
        for (precision, scale) in [(10, 2), (38, 10), (20, 0), (5, 4), (76, 20), (60, 4)] {
            let ty = DataType::Decimal { precision, scale };
            for case in cases {
                let data = stream(&[vec![Some(numeric_send(case))]]);
                let binary = decode(&data, &[Wire::Numeric { precision, scale }], 1);
                let (int, fraction) =
                    case.trim_start_matches('-').split_once('.').unwrap_or((case, ""));
                let int = int.trim_start_matches('-').trim_start_matches('0');
                let exact = fraction.trim_end_matches('0').len() <= scale as usize
                    && int.len() + scale as usize <= precision as usize;
                match binary {
                    Ok(binary) => {
                        assert!(exact, "{case} as numeric({precision},{scale}) decoded");
                        let text: ArrayRef = Arc::new(StringArray::from(vec![case]));
                        let cast = cast_to(&text, ty, CastMode::Upstream).unwrap();
                        assert_eq!(show(&binary.columns[0]), show(&cast), "{case} {ty}");
                    }
                    Err(Error::OutOfRange(message)) => {
                        assert!(!exact, "{case} as numeric({precision},{scale}): {message}");
                        assert!(message.contains(case), "{message}");
                    }
                    Err(e) => panic!("{case}: {e}"),
                }
            }
        }
    }

    #[test]
    fn numeric_nan_is_held_and_infinities_by_unconstrained_numerics_only() {
        let special = |sign: u16| {
            let mut v = 0i16.to_be_bytes().to_vec();
            v.extend(0i16.to_be_bytes());
            v.extend(sign.to_be_bytes());
            v.extend(0u16.to_be_bytes());
            v
        };
        let (p, s) = crate::types::DEFAULT_NUMERIC;
        for (sign, text) in [(0xC000, "NaN"), (0xD000, "Infinity"), (0xF000, "-Infinity")] {
            let data = stream(&[vec![Some(special(sign))]]);
            let out = decode(&data, &[Wire::Numeric { precision: p, scale: s }], 1).unwrap();
            assert_eq!(show(&out.columns[0]), [text.to_owned()]);
            let out = decode(&data, &[Wire::Numeric { precision: 10, scale: 2 }], 1);
            match text {
                "NaN" => assert_eq!(show(&out.unwrap().columns[0]), ["NaN".to_owned()]),
                _ => {
                    let Err(Error::OutOfRange(message)) = out else { panic!("{text} held") };
                    assert!(message.contains(&format!("value {text} cannot be held")), "{message}");
                }
            }
        }
    }

    #[test]
    fn every_wire_decodes_its_send_format() {
        let be = |v: &[u8]| Some(v.to_vec());
        let rows = vec![
            vec![
                be(&[1]),
                be(&(-7i16).to_be_bytes()),
                be(&70000i32.to_be_bytes()),
                be(&(-5_000_000_000i64).to_be_bytes()),
                be(&1.5f32.to_be_bytes()),
                be(&0.1f64.to_be_bytes()),
                // 2024-02-29: 8825 days after 2000-01-01.
                be(&8825i32.to_be_bytes()),
                // 1999-12-31 23:59:59.5, before Postgres's epoch.
                be(&(-500_000i64).to_be_bytes()),
                be(&0i64.to_be_bytes()),
                be(&[0, 255, b'\\']),
                be("héllo".as_bytes()),
            ],
            vec![
                be(&[0]),
                None,
                None,
                None,
                be(&f32::NAN.to_be_bytes()),
                be(&f64::NEG_INFINITY.to_be_bytes()),
                be(&i32::MAX.to_be_bytes()),
                be(&i64::MIN.to_be_bytes()),
                be(&i64::MAX.to_be_bytes()),
                be(&[]),
                be(b""),
            ],
        ];
        let wires = [
            Wire::Bool,
            Wire::Int2,
            Wire::Int4,
            Wire::Int8,
            Wire::Float4,
            Wire::Float8,
            Wire::Date,
            Wire::Timestamp,
            Wire::Timestamptz,
            Wire::Bytea,
            Wire::Text,
        ];
        let decoded = decode(&stream(&rows), &wires, 2).unwrap();
        assert_eq!(decoded.last_row, rows[1]);
        let out = decoded.columns;
        let table: Vec<String> = (0..2)
            .map(|r| out.iter().map(|c| show(c)[r].clone()).collect::<Vec<_>>().join(" | "))
            .collect();
        assert_eq!(
            table,
            [
                "true | -7 | 70000 | -5000000000 | 1.5 | 0.1 | 2024-02-29 | 1999-12-31T23:59:59.500 \
                 | 2000-01-01T00:00:00Z | 00ff5c | héllo",
                "false | NULL | NULL | NULL | NaN | -inf | ERROR: Cast error: Failed to convert \
                 2147483647 to temporal for Date32 | ERROR: Cast error: Failed to convert \
                 -9223372036854775808 to datetime for Timestamp(µs) | ERROR: Cast error: Failed \
                 to convert 9223372036854775807 to datetime for Timestamp(µs, \"+00:00\") |  | ",
            ]
        );
        // Infinite dates and timestamps are the extremes, as in Postgres (Arrow cannot print
        // them; Sluice prints them as `infinity` and `-infinity`).
        assert_eq!(out[6].as_primitive::<arrow::datatypes::Date32Type>().value(1), i32::MAX);
        let micros =
            |c: usize| out[c].as_primitive::<arrow::datatypes::TimestampMicrosecondType>().value(1);
        assert_eq!((micros(7), micros(8)), (i64::MIN, i64::MAX));
    }

    #[test]
    fn numerics_print_every_digit_sent() {
        let cases = [
            "0",
            "1",
            "-1",
            "3.14",
            "0.0001",
            "0.00005",
            "10000",
            "100000000",
            "-99999999.995",
            "0.33333333333333333333",
            "123456789012345678901234567890.5",
            "1.000",
        ];
        for case in cases {
            assert_eq!(numeric_text(&numeric_send(case)).unwrap(), case);
        }
        let mut nan = 0i32.to_be_bytes().to_vec();
        nan.extend(0xC000u16.to_be_bytes());
        nan.extend(0u16.to_be_bytes());
        assert_eq!(numeric_text(&nan).unwrap(), "NaN");
        assert!(numeric_text(&[0, 1]).is_err());
    }

    #[test]
    fn a_stream_fed_in_any_pieces_decodes_as_a_whole() {
        let rows: Vec<Vec<Option<Vec<u8>>>> = (0..5i32)
            .map(|i| {
                let text = (i % 2 == 0).then(|| "x".repeat(i as usize * 3).into_bytes());
                vec![Some(i.to_be_bytes().to_vec()), text]
            })
            .collect();
        let data = stream(&rows);
        let wires = [Wire::Int4, Wire::Text];
        let whole = decode(&data, &wires, 5).unwrap();
        let pieces = |cuts: &[usize]| {
            let mut d = PageDecoder::new(&wires, 5).unwrap();
            let mut from = 0;
            for &cut in cuts.iter().chain([&data.len()]) {
                d.feed(&data[from..cut]).unwrap();
                from = cut;
            }
            d.finish().unwrap()
        };
        for cut in 0..=data.len() {
            let split = pieces(&[cut]);
            assert_eq!(split.columns, whole.columns, "cut at {cut}");
            assert_eq!(split.last_row, whole.last_row, "cut at {cut}");
        }
        let bytewise = pieces(&(1..data.len()).collect::<Vec<_>>());
        assert_eq!(bytewise.columns, whole.columns);
        assert_eq!(whole.last_row, rows[4]);
    }

    #[test]
    fn malformed_streams_are_errors_not_panics() {
        let good = stream(&[vec![Some(7i32.to_be_bytes().to_vec())]]);
        for cut in 0..good.len() - 2 {
            assert!(decode(&good[..cut], &[Wire::Int4], 1).is_err(), "cut at {cut}");
        }
        assert!(decode(&good, &[Wire::Int4, Wire::Int4], 1).is_err());
        let short = stream(&[vec![Some(vec![0, 7])]]);
        assert!(decode(&short, &[Wire::Int4], 1).is_err());
    }

    #[test]
    fn types_without_a_decoder_are_read_as_text() {
        assert_eq!(Wire::of("integer", DataType::Int32), Wire::Int4);
        assert_eq!(
            Wire::of("numeric(10,2)", DataType::Decimal { precision: 10, scale: 2 }),
            Wire::Numeric { precision: 10, scale: 2 }
        );
        // A column Sluice holds as another type than the upstream's arrives as text.
        assert_eq!(Wire::of("integer", DataType::Int64), Wire::Text);
        assert!(Wire::of("uuid", DataType::Varchar).needs_text_cast("uuid"));
        assert!(Wire::of("jsonb", DataType::Jsonb).needs_text_cast("jsonb"));
        assert!(
            !Wire::of("character varying(5)", DataType::Varchar)
                .needs_text_cast("character varying(5)")
        );
        assert!(Wire::of("character(5)", DataType::Varchar).needs_text_cast("character(5)"));
        let texts = DataType::Array(crate::types::Element::new(DataType::Varchar).unwrap());
        assert!(
            Wire::of("character varying(5)[]", texts).needs_text_cast("character varying(5)[]")
        );
        assert!(Wire::of("text[]", DataType::Varchar).needs_text_cast("text[]"));
    }
}
