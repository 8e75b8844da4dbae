//! Turns statement outputs into wire responses, encoding rows with arrow-pg.

use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch, StringArray};
use arrow::datatypes::{
    DataType as ArrowType, Field, Schema, SchemaRef, TimeUnit, TimestampMicrosecondType,
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

/// The wire fields of a result schema, in `format`.
pub fn fields(schema: &SchemaRef, format: &Format) -> PgWireResult<Vec<FieldInfo>> {
    arrow_schema_to_pg_fields(schema, format, None)
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

/// Rewrites the text-format timestamp columns of `batch` as Postgres prints them: fractional
/// seconds only when present, with trailing zeros trimmed, and `+00` for UTC instants.
fn postgres_text(batch: RecordBatch, format: &Format) -> RecordBatch {
    let mut columns = batch.columns().to_vec();
    let mut changed = false;
    for (i, column) in columns.iter_mut().enumerate() {
        let ArrowType::Timestamp(_, tz) = column.data_type() else {
            continue;
        };
        if !format.is_text(i) {
            continue;
        }
        let Ok(micros) =
            arrow::compute::cast(column, &ArrowType::Timestamp(TimeUnit::Microsecond, None))
        else {
            continue;
        };
        let suffix = if tz.is_some() { "+00" } else { "" };
        let micros = micros.as_primitive::<TimestampMicrosecondType>();
        let text: StringArray = micros
            .iter()
            .map(|v| v.map(|v| format_timestamp(v, suffix)))
            .collect();
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
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .expect("same columns, text timestamps")
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
    ty.and_then(|t| arrow_pg::datatypes::into_pg_type(t).ok())
        .unwrap_or(Type::UNKNOWN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_print_like_postgres() {
        assert_eq!(format_timestamp(0, ""), "1970-01-01 00:00:00");
        assert_eq!(
            format_timestamp(1_250_000, "+00"),
            "1970-01-01 00:00:01.25+00"
        );
        assert_eq!(format_timestamp(-1, ""), "1969-12-31 23:59:59.999999");
    }
}
