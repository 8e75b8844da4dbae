//! Turns statement outputs into wire responses, encoding rows with arrow-pg.

use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{
    DataType as ArrowType, Field, Schema, SchemaRef, TimeUnit, TimestampMicrosecondType,
};
use arrow_pg::datatypes::{arrow_schema_to_pg_fields, encode_recordbatch};
use arrow_pg::encoder::encode_value;
use bytes::BytesMut;
use datafusion::execution::SendableRecordBatchStream;
use futures::{StreamExt, TryStreamExt};
use pgwire::api::Type;
use pgwire::api::portal::Format;
use pgwire::api::results::{
    CopyEncoder, CopyResponse, CopyTextOptions, FieldInfo, QueryResponse, Response, Tag,
};
use pgwire::error::PgWireResult;
use pgwire::messages::copy::CopyData;
use pgwire::messages::data::DataRow;

use crate::engine::CommandTag;
use crate::engine::copy::CopyFormat;
use crate::error::Error;
use crate::frontend::pg_text::postgres_text_of;
use crate::frontend::sqlstate::pg_error;

/// The wire fields of a result schema, in `format`, named as the query names its columns.
pub fn fields(schema: &SchemaRef, format: &Format) -> PgWireResult<Vec<FieldInfo>> {
    let mut fields = arrow_schema_to_pg_fields(&announced(&shown_names(schema)), format, None)?;
    for (field, info) in schema.fields().iter().zip(fields.iter_mut()) {
        // Text is the type's text format; the binary format is written by `jsonb_binary` and
        // `numeric_binary`.
        let marked = match () {
            _ if crate::sql::jsonb::is_marked(field) => Some(Type::JSONB),
            _ if crate::batch::display_scale::is_marked(field) => Some(Type::NUMERIC),
            _ => None,
        };
        if let Some(ty) = marked {
            *info = FieldInfo::new(
                info.name().to_owned(),
                info.table_id(),
                info.column_id(),
                ty,
                info.format(),
            );
        }
    }
    Ok(fields)
}

/// An error when a numeric column of `batch` holds what arithmetic on `NaN` or an infinity
/// gives (see [`crate::types::numeric::check_range`]).
fn numbers_in_range(batch: &RecordBatch) -> Result<(), Error> {
    batch.columns().iter().try_for_each(|c| crate::types::numeric::check_range(c.as_ref()))
}

/// `schema` with the types the encoder announces columns by: a wide numeric (`Decimal256`,
/// which the encoder does not know) as a numeric, an array of them as a numeric array.
fn announced(schema: &SchemaRef) -> SchemaRef {
    let wide = |t: &ArrowType| matches!(t, ArrowType::Decimal256(..));
    let wide_field = |f: &Arc<Field>| match f.data_type() {
        ArrowType::List(element) => wide(element.data_type()),
        t => wide(t),
    };
    if !schema.fields().iter().any(wide_field) {
        return schema.clone();
    }
    let narrow = ArrowType::Decimal128(38, 0);
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            ArrowType::List(element) if wide(element.data_type()) => {
                let element = element.as_ref().clone().with_data_type(narrow.clone());
                f.as_ref().clone().with_data_type(ArrowType::List(Arc::new(element)))
            }
            t if wide(t) => f.as_ref().clone().with_data_type(narrow.clone()),
            _ => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The numeric columns of `batch` that go out in binary format, as Postgres's binary numeric
/// (see [`crate::types::numeric::binaries`]): every digit, and the special values; numeric text
/// ([`crate::batch::display_scale`]) with its display scale.
fn numeric_binary(batch: RecordBatch, format: &Format) -> RecordBatch {
    let schema = batch.schema();
    let text = |i: usize| crate::batch::display_scale::is_marked(schema.field(i));
    let decimal = |i: usize| {
        !format.is_text(i)
            && (text(i)
                || matches!(
                    batch.column(i).data_type(),
                    ArrowType::Decimal128(..) | ArrowType::Decimal256(..)
                ))
    };
    if !(0..batch.num_columns()).any(decimal) {
        return batch;
    }
    let mut columns = batch.columns().to_vec();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    for i in (0..columns.len()).filter(|&i| decimal(i)) {
        columns[i] = match text(i) {
            true => Arc::new(crate::batch::display_scale::binaries(columns[i].as_ref())),
            false => Arc::new(crate::types::numeric::binaries(columns[i].as_ref())),
        };
        fields[i] = Field::new(fields[i].name(), ArrowType::Binary, true);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("same rows, bytes")
}

/// The jsonb columns of `batch` that go out in binary format, as jsonb's binary form: the
/// version byte 1, then the text.
fn jsonb_binary(batch: RecordBatch, format: &Format) -> RecordBatch {
    let schema = batch.schema();
    let marked = |i: usize| crate::sql::jsonb::is_marked(schema.field(i)) && !format.is_text(i);
    if !(0..batch.num_columns()).any(marked) {
        return batch;
    }
    let mut columns = batch.columns().to_vec();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    for i in (0..columns.len()).filter(|&i| marked(i)) {
        let Some(text) = columns[i].as_string_opt::<i32>() else { continue };
        let binary: arrow::array::BinaryArray =
            text.iter().map(|v| v.map(|v| [&[1u8][..], v.as_bytes()].concat())).collect();
        columns[i] = Arc::new(binary);
        fields[i] = Field::new(fields[i].name(), ArrowType::Binary, true);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("same rows, bytes")
}

/// The date and timestamp columns of `batch` going out in binary format that hold `infinity`
/// or `-infinity` (the extremes of their types, see [`crate::types::infinite_date`]), as their
/// binary form: days or microseconds since 2000-01-01 as big-endian integers, the extremes as
/// Postgres writes them. The encoder has no date for them and would send NULL.
fn temporal_binary(batch: RecordBatch, format: &Format) -> RecordBatch {
    use arrow::array::BinaryArray;
    use arrow::datatypes::Date32Type;
    const DAYS: i32 = 10_957;
    const MICROS: i64 = 946_684_800_000_000;
    let infinite = |i: usize| {
        let column = batch.column(i);
        !format.is_text(i)
            && match column.data_type() {
                ArrowType::Date32 => column
                    .as_primitive::<Date32Type>()
                    .iter()
                    .any(|v| matches!(v, Some(i32::MAX | i32::MIN))),
                ArrowType::Timestamp(TimeUnit::Microsecond, _) => column
                    .as_primitive::<TimestampMicrosecondType>()
                    .iter()
                    .any(|v| matches!(v, Some(i64::MAX | i64::MIN))),
                // The encoder ignores NULLs of intervals.
                ArrowType::Interval(_) => column.null_count() > 0,
                _ => false,
            }
    };
    if !(0..batch.num_columns()).any(infinite) {
        return batch;
    }
    let schema = batch.schema();
    let mut columns = batch.columns().to_vec();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    for i in (0..columns.len()).filter(|&i| infinite(i)) {
        let binary: BinaryArray = match columns[i].data_type() {
            ArrowType::Date32 => columns[i]
                .as_primitive::<Date32Type>()
                .iter()
                .map(|v| {
                    v.map(|d| match d {
                        i32::MAX | i32::MIN => d.to_be_bytes(),
                        d => (d - DAYS).to_be_bytes(),
                    })
                })
                .collect(),
            // Microseconds, days and months, big-endian.
            ArrowType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano) => columns[i]
                .as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>()
                .iter()
                .map(|v| {
                    v.map(|v| {
                        let micros = (v.nanoseconds / 1000).to_be_bytes();
                        [&micros[..], &v.days.to_be_bytes(), &v.months.to_be_bytes()].concat()
                    })
                })
                .collect(),
            ArrowType::Interval(_) => continue,
            _ => columns[i]
                .as_primitive::<TimestampMicrosecondType>()
                .iter()
                .map(|v| {
                    v.map(|t| match t {
                        i64::MAX | i64::MIN => t.to_be_bytes(),
                        t => (t - MICROS).to_be_bytes(),
                    })
                })
                .collect(),
        };
        columns[i] = Arc::new(binary);
        fields[i] = Field::new(fields[i].name(), ArrowType::Binary, true);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("same rows, bytes")
}

/// `schema` with each column's name as the user sees it: a repeated output name carries a
/// suffix inside Sluice (see [`crate::sql::names::DUPLICATE_MARK`]), which the client does
/// not see, as Postgres allows `SELECT v, v`.
fn shown_names(schema: &SchemaRef) -> SchemaRef {
    use crate::sql::names::DUPLICATE_MARK;
    if !schema.fields().iter().any(|f| f.name().contains(DUPLICATE_MARK)) {
        return schema.clone();
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| {
            let name = f.name().split(DUPLICATE_MARK).next().unwrap_or_default().to_owned();
            f.as_ref().clone().with_name(name)
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// A streaming query response.
pub fn rows(
    schema: SchemaRef,
    stream: SendableRecordBatchStream,
    format: &Format,
) -> PgWireResult<Response> {
    let fields = Arc::new(fields(&schema, format)?);
    let encoder_fields = text_written_arrays(&fields, &schema, format);
    let format = format.clone();
    let rows = stream
        .map(move |batch| {
            let rows: Box<dyn Iterator<Item = PgWireResult<DataRow>> + Send> = match batch {
                Ok(batch) if let Err(e) = numbers_in_range(&batch) => {
                    Box::new(std::iter::once(Err(pg_error(&e))))
                }
                Ok(batch) => {
                    let batch = postgres_text(batch, &format);
                    let batch = jsonb_binary(temporal_binary(batch, &format), &format);
                    let batch = numeric_binary(batch, &format);
                    encode_recordbatch(encoder_fields.clone(), batch)
                }
                Err(e) => Box::new(std::iter::once(Err(pg_error(&Error::DataFusion(e))))),
            };
            futures::stream::iter(rows)
        })
        .flatten();
    Ok(Response::Query(QueryResponse::new(fields, rows)))
}

/// The response of a `COPY .. TO STDOUT`: each row as one CopyData message in `format`
/// (text, CSV or binary), values written as a query's text or binary results write them.
pub fn copy_out(
    schema: SchemaRef,
    stream: SendableRecordBatchStream,
    format: &CopyFormat,
) -> PgWireResult<Response> {
    let wire_format = if format.binary { Format::UnifiedBinary } else { Format::UnifiedText };
    let fields = Arc::new(fields(&schema, &wire_format)?);
    let mut encoder = (!format.csv).then(|| copy_encoder(fields.clone(), format));
    // The header line goes with the first row: pgwire counts messages as rows.
    let header =
        Arc::new(std::sync::Mutex::new(format.header.then(|| csv_header(&fields, format))));
    let pending = header.clone();
    let rows = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = rows.clone();
    let (binary, csv) = (format.binary, format.clone());
    let row_fields = match binary {
        true => fields.clone(),
        false => text_written_arrays(&fields, &schema, &wire_format),
    };
    let data = stream
        .map(move |batch| {
            let fields = &row_fields;
            let batch = batch.map_err(|e| pg_error(&Error::DataFusion(e)))?;
            numbers_in_range(&batch).map_err(|e| pg_error(&e))?;
            let batch = match binary {
                true => numeric_binary(temporal_binary(batch, &wire_format), &wire_format),
                false => postgres_text(batch, &wire_format),
            };
            let mut messages = Vec::with_capacity(batch.num_rows());
            match &mut encoder {
                Some(encoder) => {
                    let schema = batch.schema();
                    for row in 0..batch.num_rows() {
                        let columns = batch.columns().iter().zip(schema.fields().iter());
                        for ((column, field), pg_field) in columns.zip(fields.iter()) {
                            encode_value(encoder, column, row, field, pg_field)?;
                        }
                        messages.push(encoder.take_copy().data);
                    }
                }
                None => {
                    for row in encode_recordbatch(fields.clone(), batch.clone()) {
                        let row = row?;
                        messages.push(csv_line(row.field_count, &row.data, &csv));
                    }
                }
            }
            if let Some(first) = messages.first_mut()
                && let Some(mut line) = pending.lock().expect("not poisoned").take()
            {
                line.extend_from_slice(first);
                *first = line.freeze();
            }
            counted.fetch_add(messages.len(), std::sync::atomic::Ordering::Relaxed);
            PgWireResult::Ok(messages)
        })
        .chain(futures::stream::once(async move {
            // No row to carry it: the header alone (a binary COPY always has one).
            let none = rows.load(std::sync::atomic::Ordering::Relaxed) == 0;
            let alone = match header.lock().expect("not poisoned").take() {
                Some(line) if none => Some(line.freeze()),
                _ => (none && binary).then(binary_copy_header),
            };
            Ok(alone.into_iter().collect())
        }))
        .map_ok(|messages: Vec<bytes::Bytes>| {
            futures::stream::iter(messages.into_iter().map(|m| Ok(CopyData::new(m))))
        })
        .try_flatten();
    let format_code = if binary { 1 } else { 0 };
    Ok(Response::CopyOut(CopyResponse::new(format_code, schema.fields().len(), data)))
}

/// The encoder of text and binary COPY rows.
fn copy_encoder(fields: Arc<Vec<FieldInfo>>, format: &CopyFormat) -> CopyEncoder {
    if format.binary {
        return CopyEncoder::new_binary(fields);
    }
    let options = CopyTextOptions {
        delimiter: (format.delimiter as char).to_string().into(),
        null_string: format.null.clone().into(),
    };
    CopyEncoder::new_text(fields, options)
}

/// One CSV line of the `fields` text values of a data row (`data`: each as its length, -1 for
/// NULL, and its bytes), as Postgres writes it: NULL as the NULL string, and a value quoted
/// when it holds the delimiter, the quote, a line break, or reads as the NULL string.
fn csv_line(fields: i16, data: &[u8], format: &CopyFormat) -> bytes::Bytes {
    let (delimiter, quote) = (format.delimiter, format.quote);
    let mut line = BytesMut::with_capacity(data.len() + 8);
    let mut data = data;
    for i in 0..fields {
        if i > 0 {
            line.extend_from_slice(&[delimiter]);
        }
        let len = i32::from_be_bytes(data[..4].try_into().expect("4 bytes"));
        data = &data[4..];
        if len < 0 {
            line.extend_from_slice(format.null.as_bytes());
            continue;
        }
        let (value, rest) = data.split_at(len as usize);
        data = rest;
        let special = |&b: &u8| b == delimiter || b == quote || b == b'\n' || b == b'\r';
        let quoted = value.iter().any(special)
            || value == format.null.as_bytes()
            || (fields == 1 && value == b"\\.");
        if !quoted {
            line.extend_from_slice(value);
            continue;
        }
        line.extend_from_slice(&[quote]);
        for &b in value {
            if b == quote {
                line.extend_from_slice(&[quote]);
            }
            line.extend_from_slice(&[b]);
        }
        line.extend_from_slice(&[quote]);
    }
    line.extend_from_slice(b"\n");
    line.freeze()
}

/// The CSV header line: the column names, quoted where CSV needs it.
fn csv_header(fields: &[FieldInfo], format: &CopyFormat) -> BytesMut {
    let (delimiter, quote) = (format.delimiter as char, format.quote as char);
    let names: Vec<String> = fields
        .iter()
        .map(|f| {
            let name = f.name();
            let special = |c: char| c == delimiter || c == quote || c == '\n' || c == '\r';
            match name.contains(special) || name.is_empty() {
                true => {
                    let doubled = name.replace(quote, &format!("{quote}{quote}"));
                    format!("{quote}{doubled}{quote}")
                }
                false => name.to_owned(),
            }
        })
        .collect();
    let mut line = BytesMut::from(names.join(&delimiter.to_string()).as_bytes());
    line.extend_from_slice(b"\n");
    line
}

/// The start of a binary COPY: signature, flags and header extension length.
fn binary_copy_header() -> bytes::Bytes {
    let mut header = BytesMut::from(&b"PGCOPY\n\xff\r\n\0"[..]);
    header.extend_from_slice(&0i32.to_be_bytes());
    header.extend_from_slice(&0i32.to_be_bytes());
    header.freeze()
}

/// Rewrites the text-format timestamp, float and numeric columns of `batch` as Postgres prints
/// them: timestamps with fractional seconds only when present and `+00` for UTC instants; floats
/// in their shortest form (`6`, not `6.0`), with an exponent when very large or small; numerics
/// with all their digits.
fn postgres_text(batch: RecordBatch, format: &Format) -> RecordBatch {
    let mut columns = batch.columns().to_vec();
    let mut changed = false;
    for (i, column) in columns.iter_mut().enumerate() {
        if !format.is_text(i) {
            continue;
        }
        let Some(text) = postgres_text_of(column) else { continue };
        *column = Arc::new(text);
        changed = true;
    }
    if !changed {
        return batch;
    }
    let fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .zip(&columns)
        .map(|(f, c)| f.as_ref().clone().with_data_type(c.data_type().clone()).with_nullable(true))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("same columns, text values")
}

/// `fields` with the text-format array columns whose text [`postgres_text`] writes itself
/// encoded as text: their values are already Postgres's array text, which the encoder would
/// otherwise take for one element and quote.
fn text_written_arrays(
    fields: &Arc<Vec<FieldInfo>>,
    schema: &Schema,
    format: &Format,
) -> Arc<Vec<FieldInfo>> {
    let rewritten = |i: usize| {
        format.is_text(i)
            && matches!(schema.field(i).data_type(), ArrowType::List(item)
                if postgres_text_of(&arrow::array::new_empty_array(item.data_type())).is_some())
    };
    if !(0..fields.len().min(schema.fields().len())).any(rewritten) {
        return fields.clone();
    }
    let fields = fields
        .iter()
        .enumerate()
        .map(|(i, f)| match i < schema.fields().len() && rewritten(i) {
            true => FieldInfo::new(
                f.name().to_owned(),
                f.table_id(),
                f.column_id(),
                Type::TEXT,
                f.format(),
            ),
            false => f.clone(),
        })
        .collect();
    Arc::new(fields)
}

/// The completion tag of a command.
pub fn tag(tag: &CommandTag) -> Tag {
    let t = Tag::new(tag.command);
    match (tag.command, tag.rows) {
        ("INSERT", Some(n)) => t.with_oid(0).with_rows(n),
        (_, Some(n)) => t.with_rows(n),
        (_, None) => t,
    }
}

/// The Postgres type a parameter of Arrow type `ty` is announced as.
pub fn parameter_type(ty: Option<&arrow::datatypes::DataType>) -> Type {
    match ty {
        Some(arrow::datatypes::DataType::UInt32) => Type::OID,
        Some(arrow::datatypes::DataType::Decimal256(..)) => Type::NUMERIC,
        Some(t) if crate::frontend::params::is_oid_array(t) => Type::OID_ARRAY,
        _ => ty.and_then(|t| arrow_pg::datatypes::into_pg_type(t).ok()).unwrap_or(Type::UNKNOWN),
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::ast;

    use super::*;
    use crate::frontend::pg_text::{format_float, format_timestamp};

    #[test]
    fn csv_lines_quote_what_csv_needs_and_a_value_that_reads_as_null() {
        let format =
            crate::engine::copy::format(&[], &[ast::CopyLegacyOption::Csv(vec![])]).unwrap();
        let (mut data, mut fields) = (BytesMut::new(), 0);
        for value in [Some("plain"), None, Some(""), Some("a,b"), Some("say \"hi\""), Some("x\ny")]
        {
            match value {
                Some(v) => {
                    data.extend_from_slice(&(v.len() as i32).to_be_bytes());
                    data.extend_from_slice(v.as_bytes());
                }
                None => data.extend_from_slice(&(-1i32).to_be_bytes()),
            }
            fields += 1;
        }
        let line = csv_line(fields, &data, &format);
        assert_eq!(&line[..], b"plain,,\"\",\"a,b\",\"say \"\"hi\"\"\",\"x\ny\"\n");
    }

    #[test]
    fn numerics_print_like_postgres() {
        use arrow::array::{Decimal128Array, Decimal256Array};
        use arrow::datatypes::i256;
        let (p, s) = crate::types::DEFAULT_NUMERIC;
        let text_of = |array: arrow::array::ArrayRef| {
            let batch = RecordBatch::try_from_iter([("n", array)]).unwrap();
            let batch = postgres_text(batch, &Format::UnifiedText);
            let text = batch.column(0).as_string::<i32>().clone();
            text.iter().map(|v| v.unwrap_or("NULL").to_owned()).collect::<Vec<_>>()
        };
        let wide = |v: &str| i256::from_string(v).unwrap();
        let unconstrained = Decimal256Array::from(vec![
            Some(wide("314000000000000000000")),
            Some(wide("-1200000000000000000000")),
            Some(i256::ZERO),
            None,
            Some(crate::types::numeric::Special::NaN.as_i256()),
            Some(wide(&"9".repeat(76))),
        ])
        .with_precision_and_scale(p, s)
        .unwrap();
        let nines = format!("{}.{}", "9".repeat(56), "9".repeat(20));
        assert_eq!(text_of(Arc::new(unconstrained)), ["3.14", "-12", "0", "NULL", "NaN", &nines]);
        let money = Decimal128Array::from(vec![150, -5]).with_precision_and_scale(10, 2).unwrap();
        assert_eq!(text_of(Arc::new(money)), ["1.50", "-0.05"]);
    }

    #[test]
    fn timestamps_print_like_postgres() {
        assert_eq!(format_timestamp(0, ""), "1970-01-01 00:00:00");
        assert_eq!(format_timestamp(1_250_000, "+00"), "1970-01-01 00:00:01.25+00");
        assert_eq!(format_timestamp(-1, ""), "1969-12-31 23:59:59.999999");
    }

    #[test]
    fn infinite_and_bc_dates_and_timestamps_go_out_as_postgres_sends_them() {
        use arrow::array::{Array, ArrayRef, Date32Array, TimestampMicrosecondArray};
        let dates: ArrayRef = Arc::new(Date32Array::from(vec![i32::MAX, i32::MIN, 0, -735_000]));
        let times: ArrayRef =
            Arc::new(TimestampMicrosecondArray::from(vec![i64::MIN, 0, i64::MAX, 1]));
        let schema = Arc::new(Schema::new(vec![
            Field::new("d", ArrowType::Date32, true),
            Field::new("t", ArrowType::Timestamp(TimeUnit::Microsecond, None), true),
        ]));
        let batch = RecordBatch::try_new(schema, vec![dates, times]).unwrap();
        // Text: as psql shows them (checked against Postgres 15).
        let text = postgres_text(batch.clone(), &Format::UnifiedText);
        let shown = |c: usize| -> Vec<String> {
            let a = text.column(c).as_string::<i32>();
            (0..a.len()).map(|i| a.value(i).to_owned()).collect()
        };
        assert_eq!(shown(0), ["infinity", "-infinity", "1970-01-01", "0044-08-22 BC"]);
        assert_eq!(
            shown(1),
            ["-infinity", "1970-01-01 00:00:00", "infinity", "1970-01-01 00:00:00.000001"]
        );
        // Binary: the extremes as Postgres sends them, the rest from its epoch, 2000-01-01.
        let binary = temporal_binary(batch, &Format::UnifiedBinary);
        let bytes = |c: usize, r: usize| binary.column(c).as_binary::<i32>().value(r).to_vec();
        assert_eq!(bytes(0, 0), i32::MAX.to_be_bytes());
        assert_eq!(bytes(0, 1), i32::MIN.to_be_bytes());
        assert_eq!(bytes(0, 2), (-10_957i32).to_be_bytes());
        assert_eq!(bytes(1, 0), i64::MIN.to_be_bytes());
        assert_eq!(bytes(1, 3), (1 - 946_684_800_000_000i64).to_be_bytes());
    }

    #[test]
    fn floats_print_like_postgres() {
        // Expected values from PostgreSQL 15 (`SELECT x::float8`, `SELECT x::real`).
        let double = |v: f64| format_float(v, 15);
        assert_eq!(double(6.0), "6");
        assert_eq!(double(1.5), "1.5");
        assert_eq!(double(-0.25), "-0.25");
        assert_eq!(double(1e20), "1e+20");
        assert_eq!(double(1e15), "1e+15");
        assert_eq!(double(1e14), "100000000000000");
        assert_eq!(double(0.0001), "0.0001");
        assert_eq!(double(1.5e-5), "1.5e-05");
        assert_eq!(double(-0.0), "-0");
        assert_eq!(double(f64::NAN), "NaN");
        assert_eq!(double(f64::NEG_INFINITY), "-Infinity");
        let real = |v: f32| format_float(v, 6);
        assert_eq!(real(123.45), "123.45");
        assert_eq!(real(1.1 + 2.2), "3.3000002");
        assert_eq!(real(123456.0), "123456");
        assert_eq!(real(1e6), "1e+06");
        assert_eq!(real(1e-5), "1e-05");
        // Rust's shortest digits lie halfway to the neighbour here; Postgres prints one more.
        assert_eq!(real(-747964032.0), "-7.4796403e+08");
        assert_eq!(real(747964032.0), "7.4796403e+08");
        // An exact tie of the last digit goes to the even one (checked against Postgres 15 on
        // 20 000 random reals and 25 000 random doubles).
        assert_eq!(real(f32::from_bits(1245372313)), "3.0617342e+06");
        assert_eq!(real(f32::from_bits(3366537236)), "-346688.62");
        let bits = |b: u64| double(f64::from_bits(b));
        assert_eq!(bits(4850769698733276994), "1.9585998730493192e+16");
        assert_eq!(bits(14051413960075750994), "-585840288396746.2");
        assert_eq!(bits(4861681139036488600), "1.0881185169750259e+17");
    }
}
