//! SQL column types and their Arrow representation.
//!
//! Sluice stores and moves data as Arrow arrays. Each SQL type maps to exactly one Arrow type;
//! the mapping is the contract between the catalog, the storage codecs and DataFusion.
//!
//! [`cast_to`] is the one conversion of values (text above all) to a column type: strict for
//! what users write (INSERT, UPDATE, COPY), lenient for what an upstream Postgres prints.

/// One-dimensional arrays written as Postgres reads them (`{1,2,NULL}`).
pub mod array_text;
/// Dates and timestamps written as Postgres reads them.
pub mod datetime_text;
/// Intervals and times as Postgres prints and reads them.
pub mod interval_text;
/// Numeric values: decimals of up to 76 digits with NaN and the infinities.
pub mod numeric;
pub mod quotient;
pub mod specials;

use std::fmt;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray, BooleanArray, StringArray};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType as ArrowType, Field, IntervalUnit, TimeUnit};
use arrow::util::display::FormatOptions;
use datafusion::sql::sqlparser::ast;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::unsupported;

/// The time zone attached to `timestamptz` columns: values are UTC instants.
pub const UTC: &str = "+00:00";

/// Precision and scale used for `numeric` without a declared precision: 56 digits before the
/// point and 20 after (Postgres's division gives 20 fraction digits to small quotients; token
/// amounts use 18). Values print with their own digits, not the scale (see
/// [`crate::types::numeric::is_unconstrained`]).
pub const DEFAULT_NUMERIC: (u8, i8) = (crate::types::numeric::MAX_PRECISION, 20);

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
    /// `interval`: months, days and microseconds, as Postgres keeps it
    Interval,
    /// `time` (without time zone), microseconds since midnight
    Time,
    /// A one-dimensional array of values of its element type (`integer[]`, `text[]`).
    Array(Element),
}

/// The element type of an array: any type but an array, interned so that [`DataType`] stays
/// `Copy` (there are as many as the element types in use).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Element(&'static DataType);

impl Element {
    /// The element type `ty`; an array of arrays is refused.
    pub fn new(ty: DataType) -> Result<Self> {
        use std::collections::HashSet;
        use std::sync::{LazyLock, Mutex};
        static INTERNED: LazyLock<Mutex<HashSet<&'static DataType>>> =
            LazyLock::new(Default::default);
        if let DataType::Array(_) = ty {
            return Err(unsupported!("arrays of arrays (multi-dimensional arrays)"));
        }
        let mut interned = INTERNED.lock().expect("not poisoned");
        if let Some(found) = interned.get(&ty) {
            return Ok(Element(found));
        }
        let leaked: &'static DataType = Box::leak(Box::new(ty));
        interned.insert(leaked);
        Ok(Element(leaked))
    }

    /// The element type.
    pub fn get(self) -> DataType {
        *self.0
    }
}

impl fmt::Debug for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0, f)
    }
}

impl Serialize for Element {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Element {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        let ty = DataType::deserialize(deserializer)?;
        Element::new(ty).map_err(serde::de::Error::custom)
    }
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
            DataType::Decimal { precision, scale } if precision > 38 => {
                ArrowType::Decimal256(precision, scale)
            }
            DataType::Decimal { precision, scale } => ArrowType::Decimal128(precision, scale),
            DataType::Varchar | DataType::Jsonb => ArrowType::Utf8,
            DataType::Date => ArrowType::Date32,
            DataType::Timestamp => ArrowType::Timestamp(TimeUnit::Microsecond, None),
            DataType::Timestamptz => {
                ArrowType::Timestamp(TimeUnit::Microsecond, Some(Arc::from(UTC)))
            }
            DataType::Bytea => ArrowType::Binary,
            DataType::Interval => ArrowType::Interval(IntervalUnit::MonthDayNano),
            DataType::Time => ArrowType::Time64(TimeUnit::Microsecond),
            DataType::Array(element) => {
                ArrowType::List(Arc::new(Field::new_list_field(element.get().to_arrow(), true)))
            }
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
            ArrowType::Decimal128(p, s) | ArrowType::Decimal256(p, s) if *s >= 0 => {
                DataType::Decimal { precision: *p, scale: *s }
            }
            ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View => DataType::Varchar,
            ArrowType::Binary | ArrowType::LargeBinary | ArrowType::BinaryView => DataType::Bytea,
            ArrowType::Date32 | ArrowType::Date64 => DataType::Date,
            ArrowType::Timestamp(_, None) => DataType::Timestamp,
            ArrowType::Timestamp(_, Some(_)) => DataType::Timestamptz,
            ArrowType::Null => DataType::Varchar,
            // A difference of timestamps is an interval, as in Postgres.
            ArrowType::Interval(_) | ArrowType::Duration(_) => DataType::Interval,
            ArrowType::Time32(_) | ArrowType::Time64(_) => DataType::Time,
            ArrowType::List(item) | ArrowType::LargeList(item) => {
                DataType::Array(Element::new(DataType::from_arrow(item.data_type())?)?)
            }
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
            S::Interval { fields: None, precision: None } => DataType::Interval,
            S::Time(None, ast::TimezoneInfo::None | ast::TimezoneInfo::WithoutTimeZone) => {
                DataType::Time
            }
            S::Custom(name, _) => return from_custom_name(&name.to_string()),
            S::Array(
                ast::ArrayElemTypeDef::SquareBracket(element, _)
                | ast::ArrayElemTypeDef::AngleBracket(element)
                | ast::ArrayElemTypeDef::Parenthesis(element),
            ) => DataType::Array(Element::new(DataType::from_sql(element)?)?),
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
    let max = crate::types::numeric::MAX_PRECISION;
    if precision == 0 || precision > max || scale < 0 || scale as u8 > precision {
        return Err(Error::InvalidStatement(format!(
            "numeric({precision},{scale}) is out of range: precision must be 1..{max} and scale 0..precision"
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
            DataType::Decimal { precision, scale }
                if crate::types::numeric::is_unconstrained(*precision, *scale) =>
            {
                f.write_str("numeric")
            }
            DataType::Decimal { precision, scale } => write!(f, "numeric({precision},{scale})"),
            DataType::Varchar => f.write_str("character varying"),
            DataType::Date => f.write_str("date"),
            DataType::Timestamp => f.write_str("timestamp without time zone"),
            DataType::Timestamptz => f.write_str("timestamp with time zone"),
            DataType::Jsonb => f.write_str("jsonb"),
            DataType::Bytea => f.write_str("bytea"),
            DataType::Interval => f.write_str("interval"),
            DataType::Time => f.write_str("time without time zone"),
            DataType::Array(element) => write!(f, "{}[]", element.get()),
        }
    }
}

/// A string column declared `varchar` or `varchar(n)` rather than `text`: the same values, with
/// an optional length limit that writes are held to (22001), as in Postgres.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Varchar {
    /// The most characters a value may have; `None` for plain `varchar`.
    pub max_length: Option<u32>,
}

impl Varchar {
    /// The `varchar` declaration of a column of SQL type `ty`, if it is one.
    pub fn from_sql(ty: &ast::DataType) -> Result<Option<Varchar>> {
        use ast::DataType as S;
        let length = match ty {
            S::Varchar(length) | S::CharacterVarying(length) => length,
            _ => return Ok(None),
        };
        let max_length = match length {
            None | Some(ast::CharacterLength::Max) => None,
            Some(ast::CharacterLength::IntegerLength { length, .. }) => {
                match u32::try_from(*length) {
                    Ok(0) => {
                        return Err(Error::InvalidParameter(
                            "length for type varchar must be at least 1".into(),
                        ));
                    }
                    Ok(n) if n <= 10_485_760 => Some(n),
                    _ => {
                        return Err(Error::InvalidParameter(
                            "length for type varchar cannot exceed 10485760".into(),
                        ));
                    }
                }
            }
        };
        Ok(Some(Varchar { max_length }))
    }

    /// Holds the values of `array` (Utf8) to the length limit: a longer value is an error
    /// (22001), except that spaces beyond the limit are cut off, as Postgres does.
    pub fn enforce(self, array: &ArrayRef) -> Result<ArrayRef> {
        let Some(max) = self.max_length.map(|n| n as usize) else { return Ok(array.clone()) };
        let strings = array.as_string::<i32>();
        let too_long = |s: &str| s.len() > max && s.chars().count() > max;
        if !strings.iter().flatten().any(too_long) {
            return Ok(array.clone());
        }
        let mut out = arrow::array::StringBuilder::with_capacity(strings.len(), 0);
        for value in strings.iter() {
            match value {
                Some(s) if too_long(s) => {
                    let cut = s.char_indices().nth(max).map_or(s.len(), |(i, _)| i);
                    if !s[cut..].chars().all(|c| c == ' ') {
                        return Err(Error::StringTooLong(format!(
                            "value too long for type character varying({max})"
                        )));
                    }
                    out.append_value(&s[..cut]);
                }
                other => out.append_option(other),
            }
        }
        Ok(Arc::new(out.finish()))
    }
}

/// How [`cast_to`] reads values, text above all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CastMode {
    /// Values a user wrote (INSERT, UPDATE, COPY): one that does not convert is an error,
    /// out of range (22003) between numbers, invalid input (22P02) otherwise. Bytea text is
    /// `\x` and hex digits, or else the text's own bytes.
    Strict,
    /// Text as an upstream Postgres prints it (its output format), trusted: booleans are
    /// `t`/`f` (`true` also reads as true, anything else as false), bytea is hex (an optional
    /// `\x`, bad digit pairs skipped), and a value that does not convert becomes NULL.
    Upstream,
}

/// `array` cast to the column type `to`, reading text as `mode` says; other arrays are cast
/// by Arrow (strictly in [`CastMode::Strict`]).
pub fn cast_to(array: &ArrayRef, to: DataType, mode: CastMode) -> Result<ArrayRef> {
    let target = to.to_arrow();
    if let (DataType::Jsonb, CastMode::Strict, Some(text)) =
        (to, mode, array.as_string_opt::<i32>())
    {
        // Checked and stored as Postgres stores jsonb (what an upstream sends already is).
        let values = text.iter().map(|v| v.map(crate::sql::jsonb::normalize).transpose());
        let values: std::result::Result<StringArray, String> = values.collect();
        return values
            .map(|v| Arc::new(v) as ArrayRef)
            .map_err(|e| Error::InvalidInput(format!("invalid input syntax for type json: {e}")));
    }
    if array.data_type() == &target {
        return Ok(array.clone());
    }
    if let (ArrowType::Duration(_), DataType::Interval) = (array.data_type(), to) {
        return Ok(interval_text::justified_column(array)?);
    }
    let decimal =
        matches!(array.data_type(), ArrowType::Decimal128(..) | ArrowType::Decimal256(..));
    if decimal && matches!(to, DataType::Float32 | DataType::Float64) {
        return numeric_floats(array, &target);
    }
    if crate::types::numeric::has_special(array.as_ref()) {
        return match to {
            DataType::Decimal { .. } => {
                crate::types::numeric::cast_keeping_specials(array, to, |n| cast_to(n, to, mode))
            }
            DataType::Varchar => Ok(Arc::new(crate::types::numeric::texts(array.as_ref()))),
            // Floats hold NaN and the infinities too (Postgres: `'NaN'::numeric::float8`).
            DataType::Float32 | DataType::Float64 => numeric_floats(array, &target),
            _ => Err(Error::OutOfRange(format!(
                "cannot convert NaN or infinite numeric values to {to}"
            ))),
        };
    }
    if let (DataType::Array(element), Some(text)) = (to, array.as_string_opt::<i32>()) {
        return array_text::arrays_from_text(text, element.get(), mode);
    }
    if let Some(text) = array.as_string_opt::<i32>() {
        match (to, mode) {
            (DataType::Bytea, _) => return bytea_from_text(text, mode),
            (DataType::Date | DataType::Timestamp | DataType::Timestamptz, _)
                if text.iter().flatten().any(|v| infinity(v).is_some()) =>
            {
                return with_infinities(text, to, mode);
            }
            (DataType::Date | DataType::Timestamp | DataType::Timestamptz, CastMode::Upstream)
                if text.iter().flatten().any(|v| v.ends_with(" BC")) =>
            {
                return with_years_before_christ(text, to);
            }
            (DataType::Date | DataType::Timestamp | DataType::Timestamptz, _) => {
                if let Some(read) = datetimes_from_text(text, to) {
                    return Ok(read);
                }
            }
            (DataType::Interval, _) => return intervals_from_text(text, mode),
            (DataType::Boolean, CastMode::Upstream) => {
                let values = text.iter().map(|v| v.map(|v| v == "t" || v == "true"));
                return Ok(Arc::new(BooleanArray::from_iter(values)));
            }
            (DataType::Decimal { precision, scale }, _)
                if text
                    .iter()
                    .flatten()
                    .any(|v| crate::types::numeric::Special::parse(v).is_some()) =>
            {
                return crate::types::numeric::with_specials(text, precision, scale, mode);
            }
            _ => {}
        }
    }
    let safe = mode == CastMode::Upstream;
    let options = CastOptions { safe, format_options: FormatOptions::default() };
    // numeric to an integer rounds half away from zero, as in Postgres (Arrow truncates).
    let rounded;
    let array = match rounding_scale(array.data_type(), &target) {
        Some(to_scale_zero) => {
            rounded = cast_with_options(array, &to_scale_zero, &options)
                .map_err(|e| Error::OutOfRange(format!("{to} out of range: {e}")))?;
            &rounded
        }
        None => array,
    };
    cast_with_options(array, &target, &options).map_err(|e| {
        // A number that does not fit the column is out of range (22003), as in Postgres;
        // text that does not parse is invalid input (22P02).
        // A number too wide for a numeric column (given as a number or as text) is Postgres's
        // "numeric field overflow" (22003).
        let too_wide = matches!(to, DataType::Decimal { .. })
            && e.to_string().contains("is too large to store in a Decimal");
        if (array.data_type().is_numeric() && target.is_numeric()) || too_wide {
            Error::OutOfRange(format!("{to} out of range: {e}"))
        } else {
            Error::InvalidInput(format!("cannot convert {} to {to}: {e}", array.data_type()))
        }
    })
}

/// Dates or timestamps (`to`) from `text` read as Postgres reads them
/// ([`datetime_text`]), `None` when a value is in a form left to Arrow's reader.
pub fn datetimes_from_text(text: &StringArray, to: DataType) -> Option<ArrayRef> {
    use arrow::array::{Date32Array, TimestampMicrosecondArray};
    let reads: Vec<Option<datetime_text::Read>> = text
        .iter()
        .map(|v| v.map(datetime_text::read).map(|r| r.ok_or(())).transpose())
        .collect::<std::result::Result<_, ()>>()
        .ok()?;
    Some(match to {
        DataType::Date => {
            Arc::new(Date32Array::from_iter(reads.iter().map(|r| r.map(|r| r.days()))))
        }
        DataType::Timestamp => Arc::new(TimestampMicrosecondArray::from_iter(
            reads.iter().map(|r| r.map(|r| r.micros(false))),
        )),
        _ => Arc::new(
            TimestampMicrosecondArray::from_iter(reads.iter().map(|r| r.map(|r| r.micros(true))))
                .with_timezone(UTC),
        ),
    })
}

/// Intervals from `text` as Postgres prints and people write them ([`interval_text`]), each
/// value in another form (`1.5 hours`) read by Arrow.
fn intervals_from_text(text: &StringArray, mode: CastMode) -> Result<ArrayRef> {
    use arrow::datatypes::IntervalMonthDayNanoType;
    let mut out = arrow::array::IntervalMonthDayNanoBuilder::with_capacity(text.len());
    for v in text.iter() {
        let Some(v) = v else {
            out.append_null();
            continue;
        };
        match interval_text::parse(v) {
            Some(read) => out.append_value(read),
            None => {
                let one: ArrayRef = Arc::new(StringArray::from(vec![v]));
                let safe = mode == CastMode::Upstream;
                let options = CastOptions { safe, format_options: FormatOptions::default() };
                let cast = cast_with_options(&one, &DataType::Interval.to_arrow(), &options)
                    .map_err(|e| {
                        Error::InvalidInput(format!(
                            "invalid input syntax for type interval: \"{v}\" ({e})"
                        ))
                    })?;
                let cast = cast.as_primitive::<IntervalMonthDayNanoType>();
                out.append_option(cast.is_valid(0).then(|| cast.value(0)));
            }
        }
    }
    Ok(Arc::new(out.finish()))
}

/// The scale-0 decimal type to round a `from` value to before it is cast to the integer type
/// `to`: Arrow's decimal rescale rounds half away from zero, as Postgres's numeric to integer
/// cast does, where a direct cast truncates.
pub fn rounding_scale(from: &ArrowType, to: &ArrowType) -> Option<ArrowType> {
    match from {
        ArrowType::Decimal128(p, s) if *s > 0 && to.is_integer() => {
            Some(ArrowType::Decimal128((*p as i8 - *s + 1).clamp(1, 38) as u8, 0))
        }
        ArrowType::Decimal256(p, s) if *s > 0 && to.is_integer() => {
            Some(ArrowType::Decimal256((*p as i8 - *s + 1).clamp(1, 76) as u8, 0))
        }
        _ => None,
    }
}

/// Dates and timestamps as Postgres prints them, some before year 1 (`0044-03-15 BC`), which
/// Arrow does not read: those are read here, the others by Arrow.
fn with_years_before_christ(text: &StringArray, to: DataType) -> Result<ArrayRef> {
    use arrow::array::{Date32Array, TimestampMicrosecondArray};
    use arrow::datatypes::{Date32Type, TimestampMicrosecondType};
    use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime};
    let ad: StringArray = text.iter().map(|v| v.filter(|v| !v.ends_with(" BC"))).collect();
    let cast = cast_to(&(Arc::new(ad) as ArrayRef), to, CastMode::Upstream)?;
    // Year `y` BC is year `1 - y` of the proleptic calendar Arrow counts in.
    let bc = |v: Option<&str>| -> Option<i64> {
        let v = v?.strip_suffix(" BC")?;
        match to {
            DataType::Date => {
                let date = NaiveDate::parse_from_str(v, "%Y-%m-%d").ok()?;
                let date = date.with_year(1 - date.year())?;
                Some(i64::from(Date32Type::from_naive_date(date)))
            }
            DataType::Timestamp => {
                let at = NaiveDateTime::parse_from_str(v, "%Y-%m-%d %H:%M:%S%.f").ok()?;
                Some(at.with_year(1 - at.year())?.and_utc().timestamp_micros())
            }
            _ => {
                let at = DateTime::parse_from_str(v, "%Y-%m-%d %H:%M:%S%.f%#z").ok()?;
                Some(at.with_year(1 - at.year())?.timestamp_micros())
            }
        }
    };
    Ok(match to {
        DataType::Date => {
            let days = cast.as_primitive::<Date32Type>().iter().zip(text.iter());
            Arc::new(Date32Array::from_iter(days.map(|(ad, v)| bc(v).map(|d| d as i32).or(ad))))
        }
        _ => {
            let micros = cast.as_primitive::<TimestampMicrosecondType>();
            let values = micros.iter().zip(text.iter()).map(|(ad, v)| bc(v).or(ad));
            let array = TimestampMicrosecondArray::from_iter(values);
            Arc::new(array.with_timezone_opt(micros.timezone().map(str::to_owned)))
        }
    })
}

/// `Some(true)` for `infinity`, `Some(false)` for `-infinity` (as dates and timestamps).
fn infinity(v: &str) -> Option<bool> {
    let v = v.trim();
    match v.trim_start_matches('+') {
        v if v.eq_ignore_ascii_case("infinity") => Some(true),
        _ if v.eq_ignore_ascii_case("-infinity") => Some(false),
        _ => None,
    }
}

/// The largest and smallest value of a date (days) or timestamp (microseconds) column stand for
/// `infinity` and `-infinity`, as in Postgres: they order after and before every other value
/// and print as those words.
pub fn infinite_date(positive: bool) -> i32 {
    if positive { i32::MAX } else { i32::MIN }
}

/// See [`infinite_date`].
pub fn infinite_timestamp(positive: bool) -> i64 {
    if positive { i64::MAX } else { i64::MIN }
}

/// Dates or timestamps from text holding `infinity` or `-infinity` (see [`infinite_date`]).
fn with_infinities(text: &StringArray, to: DataType, mode: CastMode) -> Result<ArrayRef> {
    use arrow::array::{Date32Array, TimestampMicrosecondArray};
    use arrow::datatypes::{Date32Type, TimestampMicrosecondType};
    let finite: StringArray = text.iter().map(|v| v.filter(|v| infinity(v).is_none())).collect();
    let cast = cast_to(&(Arc::new(finite) as ArrayRef), to, mode)?;
    let special = text.iter().map(|v| v.and_then(infinity));
    Ok(match to {
        DataType::Date => {
            let days = cast.as_primitive::<Date32Type>().iter().zip(special);
            Arc::new(Date32Array::from_iter(days.map(|(d, inf)| inf.map(infinite_date).or(d))))
        }
        _ => {
            let micros = cast.as_primitive::<TimestampMicrosecondType>();
            let values =
                micros.iter().zip(special).map(|(t, inf)| inf.map(infinite_timestamp).or(t));
            let array = TimestampMicrosecondArray::from_iter(values);
            Arc::new(array.with_timezone_opt(micros.timezone().map(str::to_owned)))
        }
    })
}

/// Bytea from text (see [`CastMode`] for the formats).
fn bytea_from_text(text: &StringArray, mode: CastMode) -> Result<ArrayRef> {
    let decode = |v: &str| match mode {
        CastMode::Strict => decode_bytea(v),
        CastMode::Upstream => Ok(decode_hex(v)),
    };
    let decoded: Vec<Option<Vec<u8>>> =
        text.iter().map(|v| v.map(decode).transpose()).collect::<Result<_>>()?;
    Ok(Arc::new(BinaryArray::from_iter(decoded)))
}

/// Bytea input: `\x` followed by hex digits, or the raw text bytes.
fn decode_bytea(text: &str) -> Result<Vec<u8>> {
    let Some(hex) = text.strip_prefix("\\x") else {
        return Ok(text.as_bytes().to_vec());
    };
    if hex.len() % 2 != 0 {
        return Err(Error::InvalidInput(format!(
            "invalid hexadecimal data: odd number of digits in {text:?}"
        )));
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            // `get`: a pair inside a multi-byte character is not hex either.
            let pair = hex.get(i..i + 2).and_then(|pair| u8::from_str_radix(pair, 16).ok());
            pair.ok_or_else(|| {
                Error::InvalidInput(format!("invalid hexadecimal digit in {text:?}"))
            })
        })
        .collect()
}

/// Bytea as Postgres prints it (hex): pairs of hex digits after an optional `\x`; a pair that
/// is not hex is skipped.
fn decode_hex(text: &str) -> Vec<u8> {
    let hex = text.strip_prefix("\\x").unwrap_or(text);
    let pair = |i: usize| hex.get(2 * i..2 * i + 2).and_then(|p| u8::from_str_radix(p, 16).ok());
    (0..hex.len() / 2).filter_map(pair).collect()
}

/// The field metadata key that marks a text column declared `varchar` (value: its length limit,
/// or empty for none), so that a view of it is declared the same.
pub const VARCHAR_KEY: &str = "sluice.varchar";

/// `field` marked as a column declared `varchar`.
pub fn mark_varchar(field: Field, varchar: Varchar) -> Field {
    let mut metadata = field.metadata().clone();
    let limit = varchar.max_length.map(|n| n.to_string()).unwrap_or_default();
    metadata.insert(VARCHAR_KEY.to_owned(), limit);
    field.with_metadata(metadata)
}

/// The `varchar` declaration `field` is marked with (see [`mark_varchar`]).
pub fn varchar_mark(field: &Field) -> Option<Varchar> {
    let limit = field.metadata().get(VARCHAR_KEY)?;
    Some(Varchar { max_length: limit.parse().ok() })
}

/// A numeric column as floats of `target`, each the float nearest its value
/// ([`numeric::floats`]).
fn numeric_floats(array: &ArrayRef, target: &ArrowType) -> Result<ArrayRef> {
    let floats: ArrayRef = Arc::new(numeric::floats(array.as_ref()));
    Ok(cast_with_options(&floats, target, &CastOptions::default())?)
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
        assert_eq!(bind("numeric(50,2)").unwrap(), DataType::Decimal { precision: 50, scale: 2 });
        assert_eq!(bind("numeric(50,2)").unwrap().to_arrow(), ArrowType::Decimal256(50, 2));
        assert!(matches!(bind("numeric(77,2)"), Err(Error::InvalidStatement(_))));
        let ints = bind("int[]").unwrap();
        assert_eq!(ints, DataType::Array(Element::new(DataType::Int32).unwrap()));
        assert_eq!(ints.to_string(), "integer[]");
        assert_eq!(DataType::from_arrow(&ints.to_arrow()).unwrap(), ints);
        assert_eq!(bind("text[]").unwrap().to_string(), "character varying[]");
        assert!(matches!(bind("int[][]"), Err(Error::Unsupported(_))));
    }

    fn text(values: &[Option<&str>]) -> ArrayRef {
        Arc::new(StringArray::from(values.to_vec()))
    }

    /// `values` cast to `to` in `mode`, printed one a line (`.` for NULL), or the error.
    fn cast(values: &[Option<&str>], to: DataType, mode: CastMode) -> String {
        match cast_to(&text(values), to, mode) {
            Ok(array) => {
                let options = FormatOptions::default().with_null(".");
                let format = arrow::util::display::ArrayFormatter::try_new(&array, &options);
                let format = format.unwrap();
                (0..array.len()).map(|i| format.value(i).to_string()).collect::<Vec<_>>().join(" ")
            }
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn bytea_hex_input() {
        assert_eq!(decode_bytea("\\x01ff").unwrap(), vec![1, 255]);
        assert!(decode_bytea("\\x0").is_err());
        assert_eq!(decode_bytea("ab").unwrap(), b"ab".to_vec());
        // As an upstream prints it, always hex; a bad pair is skipped, an odd digit dropped.
        assert_eq!(decode_hex("\\x01ff"), vec![1, 255]);
        assert_eq!(decode_hex("ab"), vec![0xab]);
        assert_eq!(decode_hex("\\x01zzf"), vec![1]);
        // Not hex, and no panic inside a multi-byte character.
        assert!(decode_bytea("\\xaéa").is_err());
        assert_eq!(decode_hex("\\x01aéa"), vec![1]);
    }

    #[test]
    fn upstream_text_reads_postgres_output_and_bad_values_become_null() {
        use CastMode::Upstream;
        let booleans = [Some("t"), Some("f"), Some("true"), Some("yes"), None];
        assert_eq!(cast(&booleans, DataType::Boolean, Upstream), "true false true false .");
        let bytea = cast(&[Some("\\x01ff"), None], DataType::Bytea, Upstream);
        assert_eq!(bytea, "01ff .");
        assert_eq!(cast(&[Some("12"), Some("x"), None], DataType::Int32, Upstream), "12 . .");
        let numeric = DataType::Decimal { precision: 10, scale: 2 };
        assert_eq!(cast(&[Some("12.5"), Some("-0.01")], numeric, Upstream), "12.50 -0.01");
        let timestamps = [Some("2024-01-02 03:04:05+02"), Some("2024-01-02 03:04:05.5+00")];
        let expected = "2024-01-02T01:04:05Z 2024-01-02T03:04:05.500Z";
        assert_eq!(cast(&timestamps, DataType::Timestamptz, Upstream), expected);
        assert_eq!(cast(&[Some(r#"{"a": 1}"#)], DataType::Jsonb, Upstream), r#"{"a": 1}"#);
        // Years before 1, as Postgres writes them: year 1 BC is year 0.
        let dates = [Some("0044-03-15 BC"), Some("2024-01-02"), None, Some("x BC")];
        assert_eq!(cast(&dates, DataType::Date, Upstream), "-0043-03-15 2024-01-02 . .");
        let times = [Some("0001-12-31 23:59:59.5 BC"), Some("2024-01-02 03:04:05")];
        let expected = "0000-12-31T23:59:59.500 2024-01-02T03:04:05";
        assert_eq!(cast(&times, DataType::Timestamp, Upstream), expected);
        let zoned = [Some("0001-12-31 23:59:59+02 BC"), Some("2024-01-02 03:04:05+00")];
        let expected = "0000-12-31T21:59:59Z 2024-01-02T03:04:05Z";
        assert_eq!(cast(&zoned, DataType::Timestamptz, Upstream), expected);
    }

    #[test]
    fn strict_input_refuses_what_does_not_convert() {
        use CastMode::Strict;
        let booleans = [Some("t"), Some("false"), Some("yes"), None];
        assert_eq!(cast(&booleans, DataType::Boolean, Strict), "true false true .");
        assert!(cast(&[Some("maybe")], DataType::Boolean, Strict).starts_with("error: "));
        assert_eq!(cast(&[Some("\\x01ff"), Some("ab")], DataType::Bytea, Strict), "01ff 6162");
        assert!(matches!(
            cast_to(&text(&[Some("\\x0")]), DataType::Bytea, Strict),
            Err(Error::InvalidInput(_))
        ));
        assert!(matches!(
            cast_to(&text(&[Some("x")]), DataType::Int32, Strict),
            Err(Error::InvalidInput(_))
        ));
        let big: ArrayRef = Arc::new(arrow::array::Int64Array::from(vec![1_i64 << 40]));
        assert!(matches!(cast_to(&big, DataType::Int32, Strict), Err(Error::OutOfRange(_))));
        let same: ArrayRef = Arc::new(arrow::array::Int32Array::from(vec![7]));
        assert_eq!(&cast_to(&same, DataType::Int32, Strict).unwrap(), &same);
    }
}
