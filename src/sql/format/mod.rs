//! Postgres's formatting functions, in place of DataFusion's namesakes whose templates are
//! chrono's (`to_char(d, 'YYYY-MM')` printed `YYYY-MM`, without a word):
//!
//! - `to_char(timestamp | timestamptz | date | interval, template)` and `to_char(number,
//!   template)`;
//! - `to_date(text, template)`, `to_timestamp(text, template)` and `to_timestamp(seconds)`;
//! - `age(timestamp, timestamp)` (and `age(timestamp)`, from today's midnight), Postgres's
//!   years-months-days difference;
//! - `format(template, ..)` with `%s`, `%I`, `%L`, `%%`, positions (`%2$s`) and widths.
//!
//! Templates are in [`template`] (dates and times) and [`number`].

pub mod number;
pub mod template;

use std::ops::ControlFlow;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Date32Array, IntervalMonthDayNanoArray, StringArray,
    TimestampMicrosecondArray,
};
use arrow::datatypes::{
    DataType, Float64Type, Int64Type, IntervalMonthDayNano, TimeUnit, TimestampMicrosecondType,
};
use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Timelike};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast;

use crate::error::Error;
use crate::types::{UTC, infinite_timestamp};

/// The functions of this module, to register after DataFusion's (they replace its
/// `to_char`, `to_date` and `to_timestamp`).
///
/// `to_char` takes over DataFusion's other name for it, `date_format`, too: a UDF left
/// registered under any name is registered again under its own name whenever a setting
/// changes (DataFusion refreshes the functions that read settings), which put DataFusion's
/// `to_char` back in about half the server starts.
pub fn udfs() -> Vec<ScalarUDF> {
    [Format::ToChar, Format::ToDate, Format::ToTimestamp, Format::Age, Format::Printf]
        .into_iter()
        .map(|f| {
            let signature = Signature::user_defined(Volatility::Immutable);
            let udf = ScalarUDF::new_from_impl(FormatFunction { f, signature });
            match f {
                Format::ToChar => udf.with_aliases(["date_format"]),
                _ => udf,
            }
        })
        .collect()
}

/// Writes `age(x)` as `age(current_date::timestamp, x)`, as Postgres defines it.
pub fn rewrite(statement: &mut ast::Statement) {
    let _ = ast::visit_expressions_mut(statement, |expr| {
        if let ast::Expr::Function(f) = expr
            && f.name.to_string().eq_ignore_ascii_case("age")
            && let ast::FunctionArguments::List(list) = &mut f.args
            && list.args.len() == 1
        {
            let today = ast::Expr::Cast {
                kind: ast::CastKind::DoubleColon,
                expr: Box::new(ast::Expr::Function(ast::Function {
                    name: ast::ObjectName::from(vec![ast::Ident::new("current_date")]),
                    uses_odbc_syntax: false,
                    parameters: ast::FunctionArguments::None,
                    args: ast::FunctionArguments::List(ast::FunctionArgumentList {
                        duplicate_treatment: None,
                        args: Vec::new(),
                        clauses: Vec::new(),
                    }),
                    filter: None,
                    null_treatment: None,
                    over: None,
                    within_group: Vec::new(),
                })),
                data_type: ast::DataType::Timestamp(None, ast::TimezoneInfo::None),
                array: false,
                format: None,
            };
            list.args.insert(0, ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(today)));
        }
        ControlFlow::<()>::Continue(())
    });
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Format {
    ToChar,
    ToDate,
    ToTimestamp,
    Age,
    Printf,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct FormatFunction {
    f: Format,
    signature: Signature,
}

fn plan_error(message: String) -> DataFusionError {
    DataFusionError::Plan(format!("{message} (failed to match any signature)"))
}

fn invalid(message: String) -> DataFusionError {
    DataFusionError::External(Box::new(Error::InvalidInput(message)))
}

const MICROS: TimeUnit = TimeUnit::Microsecond;

/// A date or timestamp argument as the timestamp it is read as.
fn as_timestamp(ty: &DataType) -> Option<DataType> {
    match ty {
        DataType::Date32 | DataType::Date64 | DataType::Null => {
            Some(DataType::Timestamp(MICROS, None))
        }
        DataType::Timestamp(_, tz) => Some(DataType::Timestamp(MICROS, tz.clone())),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            Some(DataType::Timestamp(MICROS, None))
        }
        _ => None,
    }
}

impl ScalarUDFImpl for FormatFunction {
    fn name(&self) -> &str {
        match self.f {
            Format::ToChar => "to_char",
            Format::ToDate => "to_date",
            Format::ToTimestamp => "to_timestamp",
            Format::Age => "age",
            Format::Printf => "format",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        let name = self.name();
        match (self.f, args) {
            (Format::ToChar, [value, _]) => {
                let value = match value {
                    v if v.is_integer() => DataType::Int64,
                    DataType::Float16 | DataType::Float32 | DataType::Float64 => DataType::Float64,
                    DataType::Decimal128(..) | DataType::Decimal256(..) => value.clone(),
                    DataType::Interval(_) => {
                        DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano)
                    }
                    DataType::Duration(_) => DataType::Duration(MICROS),
                    v => as_timestamp(v)
                        .ok_or_else(|| plan_error(format!("to_char({v}, text) does not exist")))?,
                };
                Ok(vec![value, DataType::Utf8])
            }
            (Format::ToDate | Format::ToTimestamp, [_, _]) => Ok(vec![DataType::Utf8; 2]),
            (Format::ToTimestamp, [seconds]) if seconds.is_numeric() || seconds.is_null() => {
                Ok(vec![DataType::Float64])
            }
            (Format::Age, [a, b]) => {
                let zone = |t: &DataType| matches!(t, DataType::Timestamp(_, Some(_)));
                let (a, b) = (as_timestamp(a), as_timestamp(b));
                match (a, b) {
                    (Some(a), Some(b)) if zone(&a) || zone(&b) => {
                        Ok(vec![DataType::Timestamp(MICROS, Some(Arc::from(UTC))); 2])
                    }
                    (Some(_), Some(_)) => Ok(vec![DataType::Timestamp(MICROS, None); 2]),
                    _ => Err(plan_error(format!("{name}({args:?}) does not exist"))),
                }
            }
            (Format::Printf, [_, rest @ ..]) => {
                Ok(std::iter::repeat_n(DataType::Utf8, rest.len() + 1).collect())
            }
            _ => Err(plan_error(format!("{name}() does not take {} arguments", args.len()))),
        }
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(match self.f {
            Format::ToChar | Format::Printf => DataType::Utf8,
            Format::ToDate => DataType::Date32,
            Format::ToTimestamp => DataType::Timestamp(MICROS, Some(Arc::from(UTC))),
            Format::Age => DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano),
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let out: ArrayRef = match self.f {
            Format::ToChar => to_char(&arrays[0], arrays[1].as_string::<i32>())?,
            Format::ToDate | Format::ToTimestamp if arrays.len() == 2 => {
                let (text, template) = (arrays[0].as_string::<i32>(), arrays[1].as_string::<i32>());
                read(text, template, self.f == Format::ToDate)?
            }
            Format::ToTimestamp => from_seconds(&arrays[0]),
            Format::Age => age(&arrays[0], &arrays[1]),
            Format::Printf => format(&arrays)?,
            Format::ToDate => unreachable!("two arguments"),
        };
        Ok(ColumnarValue::Array(out))
    }
}

/// A template's tokens, read again only when the template changes from row to row.
struct Cached<T> {
    text: Option<String>,
    value: Option<T>,
}

impl<T> Cached<T> {
    fn get(&mut self, text: &str, make: impl FnOnce(&str) -> Result<T>) -> Result<&T> {
        if self.text.as_deref() != Some(text) {
            self.value = Some(make(text)?);
            self.text = Some(text.to_owned());
        }
        Ok(self.value.as_ref().expect("set above"))
    }
}

fn at_micros(micros: i64) -> Option<NaiveDateTime> {
    DateTime::from_timestamp_micros(micros).map(|t| t.naive_utc())
}

fn to_char(values: &ArrayRef, templates: &StringArray) -> Result<ArrayRef> {
    let n = values.len();
    let mut out = arrow::array::StringBuilder::new();
    match values.data_type() {
        DataType::Timestamp(_, zone) => {
            let zone = zone.as_ref().map(|_| ("UTC", 0));
            let values = values.as_primitive::<TimestampMicrosecondType>();
            let mut cached = Cached { text: None, value: None };
            for i in 0..n {
                let finite = values.is_valid(i)
                    && ![infinite_timestamp(true), infinite_timestamp(false)]
                        .contains(&values.value(i));
                if !finite || templates.is_null(i) {
                    out.append_null();
                    continue;
                }
                let tokens = cached.get(templates.value(i), |t| Ok(template::tokens(t)))?;
                match at_micros(values.value(i)) {
                    Some(at) => out.append_value(template::print(tokens, at, zone)),
                    None => out.append_null(),
                }
            }
        }
        DataType::Interval(_) | DataType::Duration(_) => {
            // A difference of timestamps is an interval of whole days and the time left.
            let spans: Vec<Option<(i32, i32, i64)>> = match values.data_type() {
                DataType::Duration(_) => values
                    .as_primitive::<arrow::datatypes::DurationMicrosecondType>()
                    .iter()
                    .map(|v| v.map(|v| (0, (v / 86_400_000_000) as i32, v % 86_400_000_000)))
                    .collect(),
                _ => values
                    .as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>()
                    .iter()
                    .map(|v| v.map(|v| (v.months, v.days, v.nanoseconds / 1000)))
                    .collect(),
            };
            let mut cached = Cached { text: None, value: None };
            for (i, span) in spans.into_iter().enumerate() {
                let (Some((months, days, micros)), false) = (span, templates.is_null(i)) else {
                    out.append_null();
                    continue;
                };
                let tokens = cached.get(templates.value(i), |t| Ok(template::tokens(t)))?;
                let text =
                    template::print_interval(tokens, months, days, micros).map_err(invalid)?;
                out.append_value(text);
            }
        }
        _ => {
            let texts = number_texts(values);
            let mut cached = Cached { text: None, value: None };
            for (i, text) in texts.iter().enumerate() {
                let (Some(text), false) = (text, templates.is_null(i)) else {
                    out.append_null();
                    continue;
                };
                let template = cached
                    .get(templates.value(i), |t| number::NumberTemplate::new(t).map_err(invalid))?;
                match text.bytes().all(|b| b.is_ascii_digit() || b == b'-' || b == b'.') {
                    true => out.append_value(template.print(text)),
                    // NaN and the infinities print as themselves.
                    false => out.append_value(text),
                }
            }
        }
    }
    Ok(Arc::new(out.finish()))
}

/// Numbers as text, all digits written out (`1e20` as twenty-one digits).
fn number_texts(values: &ArrayRef) -> Vec<Option<String>> {
    match values.data_type() {
        DataType::Int64 => {
            values.as_primitive::<Int64Type>().iter().map(|v| v.map(|v| v.to_string())).collect()
        }
        DataType::Float64 => values
            .as_primitive::<Float64Type>()
            .iter()
            .map(|v| {
                v.map(|v| match v {
                    v if v.is_nan() => "NaN".to_owned(),
                    v if v.is_infinite() => {
                        if v > 0.0 { "Infinity" } else { "-Infinity" }.to_owned()
                    }
                    v => format!("{v}"),
                })
            })
            .collect(),
        _ => {
            let texts = crate::types::numeric::texts(values.as_ref());
            texts.iter().map(|v| v.map(str::to_owned)).collect()
        }
    }
}

/// `to_date` (`date`) or `to_timestamp` of `text` read by `templates`.
fn read(text: &StringArray, templates: &StringArray, date: bool) -> Result<ArrayRef> {
    let mut cached = Cached { text: None, value: None };
    let mut values = Vec::with_capacity(text.len());
    for i in 0..text.len() {
        if text.is_null(i) || templates.is_null(i) {
            values.push(None);
            continue;
        }
        let tokens = cached.get(templates.value(i), |t| Ok(template::tokens(t)))?;
        let (at, offset) = template::parse(tokens, text.value(i))
            .map_err(|e| invalid(format!("{e} (reading \"{}\")", text.value(i))))?;
        let micros = at.and_utc().timestamp_micros() - offset.unwrap_or(0) as i64 * 1_000_000;
        values.push(Some(match date {
            true => at.date().num_days_from_ce() as i64 - EPOCH_DAYS_FROM_CE,
            false => micros,
        }));
    }
    Ok(match date {
        true => Arc::new(Date32Array::from_iter(values.into_iter().map(|v| v.map(|d| d as i32)))),
        false => Arc::new(TimestampMicrosecondArray::from_iter(values).with_timezone(UTC)),
    })
}

/// Days from 0001-01-01 to 1970-01-01, plus one (chrono counts 0001-01-01 as day 1).
const EPOCH_DAYS_FROM_CE: i64 = 719_163;

/// `to_timestamp(seconds since 1970)`, infinities included.
fn from_seconds(seconds: &ArrayRef) -> ArrayRef {
    let values = seconds.as_primitive::<Float64Type>().iter().map(|v| {
        v.and_then(|v| match v {
            v if v.is_nan() => None,
            v if v == f64::INFINITY => Some(infinite_timestamp(true)),
            v if v == f64::NEG_INFINITY => Some(infinite_timestamp(false)),
            v => Some((v * 1e6).round() as i64),
        })
    });
    Arc::new(TimestampMicrosecondArray::from_iter(values).with_timezone(UTC))
}

/// `age(a, b)` as Postgres computes it: field by field, borrowing from the next larger field,
/// a month borrowed being as long as the month of the earlier timestamp's.
fn age(a: &ArrayRef, b: &ArrayRef) -> ArrayRef {
    let (a, b) = (
        a.as_primitive::<TimestampMicrosecondType>(),
        b.as_primitive::<TimestampMicrosecondType>(),
    );
    let values = a.iter().zip(b.iter()).map(|(a, b)| {
        let (a, b) = (at_micros(a?)?, at_micros(b?)?);
        Some(age_of(a, b))
    });
    Arc::new(IntervalMonthDayNanoArray::from_iter(values))
}

fn days_in_month(year: i32, month: u32) -> i64 {
    let next = if month == 12 { (year + 1, 1) } else { (year, month + 1) };
    let first = NaiveDate::from_ymd_opt(year, month, 1).expect("a valid month");
    let next = NaiveDate::from_ymd_opt(next.0, next.1, 1).expect("a valid month");
    (next - first).num_days()
}

fn age_of(a: NaiveDateTime, b: NaiveDateTime) -> IntervalMonthDayNano {
    let negative = a < b;
    let sign = if negative { -1 } else { 1 };
    let micros = |t: NaiveDateTime| (t.nanosecond() / 1000) as i64;
    let mut f = [
        micros(a) - micros(b),
        a.second() as i64 - b.second() as i64,
        a.minute() as i64 - b.minute() as i64,
        a.hour() as i64 - b.hour() as i64,
        a.day() as i64 - b.day() as i64,
        a.month() as i64 - b.month() as i64,
        a.year() as i64 - b.year() as i64,
    ];
    for v in &mut f {
        *v *= sign;
    }
    let [us, s, mi, h, d, mo, y] = &mut f;
    while *us < 0 {
        *us += 1_000_000;
        *s -= 1;
    }
    while *s < 0 {
        *s += 60;
        *mi -= 1;
    }
    while *mi < 0 {
        *mi += 60;
        *h -= 1;
    }
    while *h < 0 {
        *h += 24;
        *d -= 1;
    }
    while *d < 0 {
        let earlier = if negative { a } else { b };
        *d += days_in_month(earlier.year(), earlier.month());
        *mo -= 1;
    }
    while *mo < 0 {
        *mo += 12;
        *y -= 1;
    }
    let months = (*y * 12 + *mo) * sign;
    let days = *d * sign;
    let nanos = ((*h * 3600 + *mi * 60 + *s) * 1_000_000 + *us) * 1000 * sign;
    IntervalMonthDayNano::new(months as i32, days as i32, nanos)
}

/// `format(template, args..)`.
fn format(arrays: &[ArrayRef]) -> Result<ArrayRef> {
    let templates = arrays[0].as_string::<i32>();
    let args: Vec<&StringArray> = arrays[1..].iter().map(|a| a.as_string::<i32>()).collect();
    let mut out = arrow::array::StringBuilder::new();
    for row in 0..templates.len() {
        if templates.is_null(row) {
            out.append_null();
            continue;
        }
        let values: Vec<Option<&str>> =
            args.iter().map(|a| a.is_valid(row).then(|| a.value(row))).collect();
        out.append_value(format_one(templates.value(row), &values).map_err(invalid)?);
    }
    Ok(Arc::new(out.finish()))
}

fn format_one(template: &str, args: &[Option<&str>]) -> std::result::Result<String, String> {
    let mut out = String::new();
    let mut chars = template.chars().peekable();
    let mut next_arg = 0;
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = String::new();
        while let Some(&c) = chars.peek() {
            chars.next();
            if c.is_ascii_alphabetic() || c == '%' {
                spec.push(c);
                break;
            }
            spec.push(c);
        }
        let kind = spec.pop().ok_or("unterminated format() type specifier")?;
        if kind == '%' && spec.is_empty() {
            out.push('%');
            continue;
        }
        // `n$` picks the argument; then an optional `-` and width.
        let (position, rest) = match spec.split_once('$') {
            Some((n, rest)) => (Some(n.parse::<usize>().map_err(|_| "invalid position")?), rest),
            None => (None, spec.as_str()),
        };
        let (left, width) = match rest.strip_prefix('-') {
            Some(w) => (true, w),
            None => (false, rest),
        };
        let width: usize = match width {
            "" => 0,
            w => w.parse().map_err(|_| format!("unsupported format() width \"{w}\""))?,
        };
        let index = match position {
            Some(0) => {
                return Err("format specifies argument 0, but arguments are numbered from 1".into());
            }
            Some(n) => n - 1,
            None => next_arg,
        };
        next_arg = index + 1;
        let value = *args.get(index).ok_or("too few arguments for format()")?;
        let text = match kind {
            's' => value.unwrap_or("").to_owned(),
            'I' => {
                quote_ident(value.ok_or("null values cannot be formatted as an SQL identifier")?)
            }
            'L' => value.map_or_else(|| "NULL".to_owned(), quote_literal),
            other => return Err(format!("unrecognized format() type specifier \"{other}\"")),
        };
        match left {
            true => out.push_str(&format!("{text:<width$}")),
            false => out.push_str(&format!("{text:>width$}")),
        }
    }
    Ok(out)
}

/// Postgres's reserved key words, which `quote_ident` quotes.
const RESERVED: &[&str] = &[
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "both",
    "case",
    "cast",
    "check",
    "collate",
    "column",
    "constraint",
    "create",
    "current_catalog",
    "current_date",
    "current_role",
    "current_time",
    "current_timestamp",
    "current_user",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "false",
    "fetch",
    "for",
    "foreign",
    "from",
    "grant",
    "group",
    "having",
    "in",
    "initially",
    "intersect",
    "into",
    "lateral",
    "leading",
    "limit",
    "localtime",
    "localtimestamp",
    "not",
    "null",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "placing",
    "primary",
    "references",
    "returning",
    "select",
    "session_user",
    "some",
    "symmetric",
    "table",
    "then",
    "to",
    "trailing",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "variadic",
    "when",
    "where",
    "window",
    "with",
];

/// `name` as Postgres's `quote_ident` writes it: as it is when it needs no quotes.
fn quote_ident(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !RESERVED.contains(&name);
    match plain {
        true => name.to_owned(),
        false => format!("\"{}\"", name.replace('"', "\"\"")),
    }
}

/// `text` as Postgres's `quote_literal` writes it.
fn quote_literal(text: &str) -> String {
    let quoted = text.replace('\'', "''");
    match text.contains('\\') {
        true => format!("E'{}'", quoted.replace('\\', "\\\\")),
        false => format!("'{quoted}'"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").unwrap()
    }

    #[test]
    fn age_as_postgres() {
        // Postgres 15's answers: (months, days, seconds).
        for (a, b, months, days, seconds) in [
            ("2024-03-05 10:00:00", "2024-01-01 00:00:00", 2, 4, 36_000),
            ("2024-01-01 00:00:00", "2024-03-05 10:00:00", -2, -4, -36_000),
            ("2024-03-31 00:00:00", "2024-02-29 00:00:00", 1, 2, 0),
            ("2023-01-31 00:00:00", "2022-12-31 12:00:00", 0, 30, 43_200),
        ] {
            let got = age_of(at(a), at(b));
            assert_eq!(
                got,
                IntervalMonthDayNano::new(months, days, seconds * 1_000_000_000),
                "{a} {b}"
            );
        }
    }

    #[test]
    fn format_as_postgres() {
        let f = |t: &str, args: &[Option<&str>]| format_one(t, args);
        assert_eq!(f("%s-%s", &[Some("a"), Some("1")]).unwrap(), "a-1");
        assert_eq!(f("%I.%L", &[Some("my col"), Some("it's")]).unwrap(), "\"my col\".'it''s'");
        assert_eq!(f("%s %%", &[None]).unwrap(), " %");
        assert_eq!(f("%2$s %1$s", &[Some("a"), Some("b")]).unwrap(), "b a");
        assert_eq!(f("[%5s|%-5s]", &[Some("a"), Some("b")]).unwrap(), "[    a|b    ]");
        assert_eq!(f("%L", &[None]).unwrap(), "NULL");
        assert!(f("%s %s", &[Some("a")]).is_err());
        assert!(f("%x", &[Some("a")]).is_err());
    }
}
