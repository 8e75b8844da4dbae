//! Turns statement outputs into wire responses, encoding rows with arrow-pg.

use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch, StringArray};
use arrow::datatypes::{
    DataType as ArrowType, Field, Float32Type, Float64Type, Schema, SchemaRef, TimeUnit,
    TimestampMicrosecondType,
};
use arrow_pg::datatypes::{arrow_schema_to_pg_fields, encode_recordbatch};
use datafusion::execution::SendableRecordBatchStream;
use futures::StreamExt;
use pgwire::api::Type;
use pgwire::api::portal::Format;
use pgwire::api::results::{FieldInfo, QueryResponse, Response, Tag};
use pgwire::error::PgWireResult;
use pgwire::messages::data::DataRow;

use crate::engine::CommandTag;
use crate::error::Error;
use crate::frontend::sqlstate::pg_error;

/// The wire fields of a result schema, in `format`, named as the query names its columns.
pub fn fields(schema: &SchemaRef, format: &Format) -> PgWireResult<Vec<FieldInfo>> {
    arrow_schema_to_pg_fields(&shown_names(schema), format, None)
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
    let encoder_fields = fields.clone();
    let format = format.clone();
    let rows = stream
        .map(move |batch| {
            let rows: Box<dyn Iterator<Item = PgWireResult<DataRow>> + Send> = match batch {
                Ok(batch) => {
                    encode_recordbatch(encoder_fields.clone(), postgres_text(batch, &format))
                }
                Err(e) => Box::new(std::iter::once(Err(pg_error(&Error::DataFusion(e))))),
            };
            futures::stream::iter(rows)
        })
        .flatten();
    Ok(Response::Query(QueryResponse::new(fields, rows)))
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
        let text = match column.data_type() {
            ArrowType::Timestamp(_, tz) => {
                let suffix = if tz.is_some() { "+00" } else { "" };
                let Ok(micros) = arrow::compute::cast(
                    column,
                    &ArrowType::Timestamp(TimeUnit::Microsecond, None),
                ) else {
                    continue;
                };
                let micros = micros.as_primitive::<TimestampMicrosecondType>();
                micros
                    .iter()
                    .map(|v| v.map(|v| format_timestamp(v, suffix)))
                    .collect::<StringArray>()
            }
            ArrowType::Float64 => {
                let values = column.as_primitive::<Float64Type>();
                values.iter().map(|v| v.map(|v| format_float(v, 15))).collect()
            }
            ArrowType::Float32 => {
                let values = column.as_primitive::<Float32Type>();
                values.iter().map(|v| v.map(|v| format_float(v, 6))).collect()
            }
            // Arrow prints every digit; the encoder's own path goes through a 28-digit decimal
            // and fails on larger numbers (`numeric` holds 38).
            ArrowType::Decimal128(..) => match arrow::compute::cast(column, &ArrowType::Utf8) {
                Ok(text) => text.as_string::<i32>().clone(),
                Err(_) => continue,
            },
            _ => continue,
        };
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
        .map(|(f, c)| Field::new(f.name(), c.data_type().clone(), true))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("same columns, text values")
}

/// A float as Postgres prints it: the shortest digits that read back as the same `f32` or
/// `f64` (`123.45::real` is `123.45`, not the double's `123.44999694824219`), in exponent
/// form when the decimal exponent is below -4 or at least `max_exponent` (15 for double
/// precision, 6 for real): `6`, `1.5`, `1e+15`, `1e+06`, `1.5e-05`, `NaN`, `Infinity`.
fn format_float<F>(v: F, max_exponent: i32) -> String
where
    F: Copy + Into<f64> + std::fmt::Display + std::fmt::LowerExp,
{
    let wide: f64 = v.into();
    if wide.is_nan() {
        return "NaN".into();
    }
    if wide.is_infinite() {
        return if wide > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    if wide == 0.0 {
        return if wide.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let s = format!("{v:e}");
    let (mantissa, exponent) = s.split_once('e').expect("exponent format");
    let exponent: i32 = exponent.parse().expect("exponent is a number");
    if exponent < -4 || exponent >= max_exponent {
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    format!("{v}")
}

/// `2024-01-02 03:04:05.25` from microseconds since the epoch.
fn format_timestamp(micros: i64, suffix: &str) -> String {
    let Some(t) = chrono::DateTime::from_timestamp_micros(micros) else {
        return micros.to_string();
    };
    let mut out = t.format("%Y-%m-%d %H:%M:%S").to_string();
    let fraction = micros.rem_euclid(1_000_000);
    if fraction != 0 {
        let digits = format!("{fraction:06}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
    out.push_str(suffix);
    out
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
    ty.and_then(|t| arrow_pg::datatypes::into_pg_type(t).ok()).unwrap_or(Type::UNKNOWN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_print_like_postgres() {
        assert_eq!(format_timestamp(0, ""), "1970-01-01 00:00:00");
        assert_eq!(format_timestamp(1_250_000, "+00"), "1970-01-01 00:00:01.25+00");
        assert_eq!(format_timestamp(-1, ""), "1969-12-31 23:59:59.999999");
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
    }
}
