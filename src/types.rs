//! SQL column types and their Arrow representation.
//!
//! Sluice stores and moves data as Arrow arrays. Each SQL type maps to exactly one Arrow type;
//! the mapping is the contract between the catalog, the storage codecs and DataFusion.

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{DataType as ArrowType, TimeUnit};
use datafusion::sql::sqlparser::ast;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::unsupported;

/// The time zone attached to `timestamptz` columns: values are UTC instants.
pub const UTC: &str = "+00:00";

/// Precision and scale used for `numeric` without a declared precision.
pub const DEFAULT_NUMERIC: (u8, i8) = (38, 10);

/// A SQL column type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DataType {
    /// `boolean`
    Boolean,
    /// `smallint` / `int2`
    Int16,
    /// `integer` / `int4`
    Int32,
    /// `bigint` / `int8`
    Int64,
    /// `real` / `float4`
    Float32,
    /// `double precision` / `float8`
    Float64,
    /// `numeric(p, s)`
    Decimal {
        /// Total number of digits.
        precision: u8,
        /// Digits after the decimal point.
        scale: i8,
    },
    /// `varchar` / `text`
    Varchar,
    /// `date`
    Date,
    /// `timestamp` (without time zone), microseconds
    Timestamp,
    /// `timestamptz`, microseconds since the epoch in UTC
    Timestamptz,
    /// `jsonb`, stored as validated JSON text
    Jsonb,
    /// `bytea`
    Bytea,
}

impl DataType {
    /// The Arrow type that carries values of this type.
    pub fn to_arrow(self) -> ArrowType {
        match self {
            DataType::Boolean => ArrowType::Boolean,
            DataType::Int16 => ArrowType::Int16,
            DataType::Int32 => ArrowType::Int32,
            DataType::Int64 => ArrowType::Int64,
            DataType::Float32 => ArrowType::Float32,
            DataType::Float64 => ArrowType::Float64,
            DataType::Decimal { precision, scale } => ArrowType::Decimal128(precision, scale),
            DataType::Varchar | DataType::Jsonb => ArrowType::Utf8,
            DataType::Date => ArrowType::Date32,
            DataType::Timestamp => ArrowType::Timestamp(TimeUnit::Microsecond, None),
            DataType::Timestamptz => {
                ArrowType::Timestamp(TimeUnit::Microsecond, Some(Arc::from(UTC)))
            }
            DataType::Bytea => ArrowType::Binary,
        }
    }

    /// The catalog type that holds values of an Arrow type computed by a query; values are cast
    /// to [`DataType::to_arrow`] of the result before they are stored.
    pub fn from_arrow(ty: &ArrowType) -> Result<Self> {
        Ok(match ty {
            ArrowType::Boolean => DataType::Boolean,
            ArrowType::Int8 | ArrowType::Int16 | ArrowType::UInt8 => DataType::Int16,
            ArrowType::Int32 | ArrowType::UInt16 => DataType::Int32,
            ArrowType::Int64 | ArrowType::UInt32 => DataType::Int64,
            ArrowType::UInt64 => DataType::Decimal { precision: 20, scale: 0 },
            ArrowType::Float16 | ArrowType::Float32 => DataType::Float32,
            ArrowType::Float64 => DataType::Float64,
            ArrowType::Decimal128(p, s) if *s >= 0 => {
                DataType::Decimal { precision: *p, scale: *s }
            }
            ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View => DataType::Varchar,
            ArrowType::Binary | ArrowType::LargeBinary | ArrowType::BinaryView => DataType::Bytea,
            ArrowType::Date32 | ArrowType::Date64 => DataType::Date,
            ArrowType::Timestamp(_, None) => DataType::Timestamp,
            ArrowType::Timestamp(_, Some(_)) => DataType::Timestamptz,
            ArrowType::Null => DataType::Varchar,
            other => return Err(unsupported!("values of type {other} in a materialized view")),
        })
    }

    /// Binds a type written in SQL.
    pub fn from_sql(ty: &ast::DataType) -> Result<Self> {
        use ast::DataType as S;
        Ok(match ty {
            S::Bool | S::Boolean => DataType::Boolean,
            S::SmallInt(_) | S::Int2(_) => DataType::Int16,
            S::Int(_) | S::Integer(_) | S::Int4(_) => DataType::Int32,
            S::BigInt(_) | S::Int8(_) => DataType::Int64,
            S::Real | S::Float4 => DataType::Float32,
            S::Double(_) | S::DoublePrecision | S::Float8 => DataType::Float64,
            S::Float(ast::ExactNumberInfo::Precision(p)) if *p <= 24 => DataType::Float32,
            S::Float(_) => DataType::Float64,
            S::Numeric(info) | S::Decimal(info) | S::Dec(info) => decimal(info)?,
            S::Varchar(_)
            | S::CharacterVarying(_)
            | S::Text
            | S::String(_)
            | S::Char(_)
            | S::Character(_) => DataType::Varchar,
            S::Date => DataType::Date,
            S::Timestamp(_, tz) => match tz {
                ast::TimezoneInfo::WithTimeZone | ast::TimezoneInfo::Tz => DataType::Timestamptz,
                _ => DataType::Timestamp,
            },
            S::JSONB | S::JSON => DataType::Jsonb,
            S::Bytea => DataType::Bytea,
            S::Custom(name, _) => return from_custom_name(&name.to_string()),
            other => return Err(unsupported!("column type {other}")),
        })
    }
}

fn decimal(info: &ast::ExactNumberInfo) -> Result<DataType> {
    let (precision, scale) = match info {
        ast::ExactNumberInfo::None => DEFAULT_NUMERIC,
        ast::ExactNumberInfo::Precision(p) => (narrow(*p)?, 0),
        ast::ExactNumberInfo::PrecisionAndScale(p, s) => (narrow(*p)?, narrow(*s as u64)? as i8),
    };
    if precision == 0 || precision > 38 || scale < 0 || scale as u8 > precision {
        return Err(Error::InvalidStatement(format!(
            "numeric({precision},{scale}) is out of range: precision must be 1..38 and scale 0..precision"
        )));
    }
    Ok(DataType::Decimal { precision, scale })
}

fn narrow(v: u64) -> Result<u8> {
    u8::try_from(v)
        .map_err(|_| Error::InvalidStatement(format!("numeric precision {v} is too large")))
}

fn from_custom_name(name: &str) -> Result<DataType> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "timestamptz" => DataType::Timestamptz,
        "int2" => DataType::Int16,
        "int4" | "serial" => DataType::Int32,
        "int8" | "bigserial" => DataType::Int64,
        "float4" => DataType::Float32,
        "float8" => DataType::Float64,
        "bool" => DataType::Boolean,
        _ => return Err(unsupported!("column type {name}")),
    })
}

impl fmt::Display for DataType {
    /// Postgres' spelling of the type, as `\d` and `DESCRIBE` show it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataType::Boolean => f.write_str("boolean"),
            DataType::Int16 => f.write_str("smallint"),
            DataType::Int32 => f.write_str("integer"),
            DataType::Int64 => f.write_str("bigint"),
            DataType::Float32 => f.write_str("real"),
            DataType::Float64 => f.write_str("double precision"),
            DataType::Decimal { precision, scale } => write!(f, "numeric({precision},{scale})"),
            DataType::Varchar => f.write_str("character varying"),
            DataType::Date => f.write_str("date"),
            DataType::Timestamp => f.write_str("timestamp without time zone"),
            DataType::Timestamptz => f.write_str("timestamp with time zone"),
            DataType::Jsonb => f.write_str("jsonb"),
            DataType::Bytea => f.write_str("bytea"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::{dialect::PostgreSqlDialect, parser::Parser};

    fn bind(sql_type: &str) -> Result<DataType> {
        let sql = format!("CREATE TABLE t (c {sql_type})");
        let stmt = Parser::parse_sql(&PostgreSqlDialect {}, &sql).unwrap().remove(0);
        let ast::Statement::CreateTable(t) = stmt else { panic!("not a create table") };
        DataType::from_sql(&t.columns[0].data_type)
    }

    #[test]
    fn binds_every_supported_type() {
        let cases = [
            ("boolean", DataType::Boolean),
            ("smallint", DataType::Int16),
            ("int", DataType::Int32),
            ("bigint", DataType::Int64),
            ("real", DataType::Float32),
            ("double precision", DataType::Float64),
            ("numeric(10,2)", DataType::Decimal { precision: 10, scale: 2 }),
            ("varchar", DataType::Varchar),
            ("text", DataType::Varchar),
            ("date", DataType::Date),
            ("timestamp", DataType::Timestamp),
            ("timestamptz", DataType::Timestamptz),
            ("timestamp with time zone", DataType::Timestamptz),
            ("jsonb", DataType::Jsonb),
            ("bytea", DataType::Bytea),
        ];
        for (sql, expected) in cases {
            assert_eq!(bind(sql).unwrap(), expected, "{sql}");
        }
        assert!(matches!(bind("numeric(50,2)"), Err(Error::InvalidStatement(_))));
        assert!(matches!(bind("int[]"), Err(Error::Unsupported(_))));
    }
}
