//! The one rule for a MySQL / MariaDB value as Postgres text, for the snapshot and the binlog.
//!
//! Values travel as text in the forms Postgres prints (`\x..` for bytes, `+00` on timestamps
//! read in UTC), so the same casts read them as read a Postgres upstream's. A snapshot page
//! asks the server for that text
//! ([`column_text`](crate::connector::mysql::text::column_text) is the select-list expression
//! per column, [`protocol_text`](crate::connector::mysql::text::protocol_text) reads what
//! comes back); a binlog row is rendered to the same text from its decoded value
//! ([`binlog_text`](crate::connector::mysql::text::binlog_text)), so a row read by the
//! snapshot and the same row from the binlog are identical after the cast.
//! [`map_type`](crate::connector::mysql::text::map_type) is the Sluice type each MySQL type is
//! held as.

use mysql_async::Value;
use mysql_async::binlog::value::BinlogValue;
use mysql_async::consts::ColumnType;

use crate::connector::common::UpstreamTable;
use crate::connector::mysql::quote_ident;
use crate::types::DataType;

/// The Sluice type that holds values of a MySQL column (`data_type` as information_schema
/// names it, `column_type` its full type: `int(10) unsigned`, `decimal(10,2)`).
pub fn map_type(data_type: &str, column_type: &str) -> DataType {
    let unsigned = column_type.contains("unsigned");
    match (data_type, unsigned) {
        ("tinyint", _) | ("smallint", false) => DataType::Int16,
        ("smallint", true) | ("mediumint", _) | ("year", _) | ("int", false) => DataType::Int32,
        ("int", true) | ("bigint", false) => DataType::Int64,
        ("bigint", true) | ("bit", _) => DataType::Decimal { precision: 20, scale: 0 },
        ("float", _) => DataType::Float32,
        ("double" | "real", _) => DataType::Float64,
        ("decimal" | "numeric", _) => decimal(column_type),
        ("date", _) => DataType::Date,
        ("datetime", _) => DataType::Timestamp,
        ("timestamp", _) => DataType::Timestamptz,
        ("json", _) => DataType::Jsonb,
        ("binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob", _) => {
            DataType::Bytea
        }
        // Geometry: bytea holding MySQL's stored form, a 4-byte SRID then the WKB.
        (t, _) if GEOMETRY_TYPES.contains(&t) => DataType::Bytea,
        _ => DataType::Varchar,
    }
}

/// MySQL's spatial column types.
pub const GEOMETRY_TYPES: [&str; 8] = [
    "geometry",
    "point",
    "linestring",
    "polygon",
    "multipoint",
    "multilinestring",
    "multipolygon",
    "geometrycollection",
];

fn decimal(column_type: &str) -> DataType {
    let inner = column_type
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map_or("", |(inner, _)| inner);
    let mut parts = inner.split(',').map(|p| p.trim().parse::<u8>());
    match (parts.next(), parts.next()) {
        // MySQL's decimals hold at most 65 digits, Sluice's 76.
        (Some(Ok(p)), Some(Ok(s))) if p <= crate::types::numeric::MAX_PRECISION => {
            DataType::Decimal { precision: p, scale: s as i8 }
        }
        (Some(Ok(p)), None) if p <= crate::types::numeric::MAX_PRECISION => {
            DataType::Decimal { precision: p, scale: 0 }
        }
        _ => DataType::Varchar,
    }
}

/// The select-list expression giving a column's value as the text Sluice's upstream cast reads.
pub fn column_text(table: &UpstreamTable, index: usize) -> String {
    if table.is_dropped(index) {
        return "NULL".to_owned();
    }
    let column = format!("t.{}", quote_ident(&table.columns[index].name));
    let ty = table.upstream_types[index].as_str();
    let base = ty.split(['(', ' ']).next().unwrap_or(ty);
    match base {
        "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" => {
            format!("CONCAT('\\\\x', LOWER(HEX({column})))")
        }
        t if GEOMETRY_TYPES.contains(&t) => format!("CONCAT('\\\\x', LOWER(HEX({column})))"),
        "timestamp" => format!("CONCAT({column}, '+00')"),
        "bit" => format!("CAST({column} AS UNSIGNED)"),
        // FLOAT prints 6 digits; the double it widens to exactly reads back as the same value.
        "float" => format!("CAST({column} AS DOUBLE)"),
        _ => column,
    }
}

/// A text-protocol value (a snapshot page's column) as text.
pub fn protocol_text(value: Value) -> Option<String> {
    match value {
        Value::NULL => None,
        Value::Bytes(bytes) => Some(
            String::from_utf8(bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        ),
        other => Some(other.as_sql(true).trim_matches('\'').to_owned()),
    }
}

/// The collation id of binary strings (BINARY, VARBINARY, BLOB).
pub const BINARY_CHARSET: u16 = 63;

/// A column as one table map describes it.
#[derive(Debug, Clone)]
pub struct BinlogColumn {
    /// The real type (ENUM and SET resolved from the metadata).
    pub ty: ColumnType,
    /// The type's metadata bytes from the table map.
    pub meta: Vec<u8>,
    /// UNSIGNED (numeric columns).
    pub unsigned: bool,
    /// The collation id (character, ENUM and SET columns); 63 is binary.
    pub charset: u16,
    /// The members of an ENUM or SET, in definition order.
    pub members: Vec<String>,
    /// The column's name (from the table map's full metadata).
    pub name: Option<String>,
}

/// One binlog value as the text a snapshot page reads for it; `None` is NULL.
pub fn binlog_text(value: &BinlogValue<'_>, column: &BinlogColumn) -> Option<String> {
    use ColumnType::*;
    let value = match value {
        BinlogValue::Value(value) => value,
        // MySQL's binary JSON (MariaDB's JSON is text and arrives as bytes).
        BinlogValue::Jsonb(json) => {
            return match Value::try_from(BinlogValue::Jsonb(json.clone())) {
                Ok(Value::Bytes(bytes)) => Some(String::from_utf8_lossy(&bytes).into_owned()),
                _ => None,
            };
        }
        BinlogValue::JsonDiff(_) => return None,
    };
    let fsp = |temporal2: ColumnType| {
        if column.ty == temporal2 { column.meta.first().copied().unwrap_or(0) } else { 0 }
    };
    Some(match (column.ty, value) {
        (_, Value::NULL) => return None,
        // Signed MEDIUMINT arrives without its sign extended.
        (MYSQL_TYPE_INT24, Value::Int(i)) if !column.unsigned && *i >= 0x80_0000 => {
            (i - 0x100_0000).to_string()
        }
        (
            MYSQL_TYPE_TINY | MYSQL_TYPE_SHORT | MYSQL_TYPE_INT24 | MYSQL_TYPE_LONG
            | MYSQL_TYPE_LONGLONG,
            Value::Int(i),
        ) => i.to_string(),
        (
            MYSQL_TYPE_TINY | MYSQL_TYPE_SHORT | MYSQL_TYPE_INT24 | MYSQL_TYPE_LONG
            | MYSQL_TYPE_LONGLONG,
            Value::UInt(u),
        ) => u.to_string(),
        // The snapshot reads FLOAT as the DOUBLE it widens to.
        (MYSQL_TYPE_FLOAT, Value::Float(f)) => double_text(f64::from(*f)),
        (MYSQL_TYPE_DOUBLE, Value::Double(d)) => double_text(*d),
        // The decoder prints YEAR as 1900 + its byte; byte 0 is year 0000.
        (MYSQL_TYPE_YEAR, Value::Bytes(b)) if b == b"1900" => "0000".to_owned(),
        (MYSQL_TYPE_YEAR | MYSQL_TYPE_NEWDECIMAL | MYSQL_TYPE_DECIMAL, Value::Bytes(b)) => {
            String::from_utf8_lossy(b).into_owned()
        }
        (MYSQL_TYPE_NEWDATE | MYSQL_TYPE_DATE, Value::Date(y, m, d, ..)) => {
            format!("{y:04}-{m:02}-{d:02}")
        }
        (MYSQL_TYPE_DATETIME2 | MYSQL_TYPE_DATETIME, Value::Date(y, mo, d, h, mi, s, us)) => {
            let fraction = frac(*us, fsp(MYSQL_TYPE_DATETIME2));
            format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}{fraction}")
        }
        (MYSQL_TYPE_TIMESTAMP2 | MYSQL_TYPE_TIMESTAMP, value) => {
            timestamp_text(value, fsp(MYSQL_TYPE_TIMESTAMP2))?
        }
        // A TIME(1) / TIME(2) read raw through the patched table map.
        (MYSQL_TYPE_TIME2, Value::Bytes(b)) => time12_text(b, column.meta.first().copied()?)?,
        (MYSQL_TYPE_TIME2 | MYSQL_TYPE_TIME, Value::Time(neg, days, h, m, s, us)) => {
            let hours = days * 24 + u32::from(*h);
            let sign = if *neg { "-" } else { "" };
            format!("{sign}{hours:02}:{m:02}:{s:02}{}", frac(*us, fsp(MYSQL_TYPE_TIME2)))
        }
        (MYSQL_TYPE_BIT, Value::Bytes(b)) => {
            b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x)).to_string()
        }
        (MYSQL_TYPE_ENUM, Value::Int(index)) => match *index {
            0 => String::new(),
            i => column.members.get(i as usize - 1)?.clone(),
        },
        (MYSQL_TYPE_SET, Value::Bytes(b)) => {
            let mask = b.iter().rev().fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
            let members: Vec<&str> = column
                .members
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1u64 << i) != 0)
                .map(|(_, m)| m.as_str())
                .collect();
            members.join(",")
        }
        // Geometry: its stored form (SRID, then WKB), as the snapshot reads it.
        (MYSQL_TYPE_GEOMETRY, Value::Bytes(b)) => hex(b),
        // BINARY(n): the binlog drops trailing zero bytes, the snapshot reads all n.
        (MYSQL_TYPE_STRING, Value::Bytes(b)) if column.charset == BINARY_CHARSET => {
            let (hi, lo) = (column.meta.first().copied()?, column.meta.get(1).copied()?);
            let n = usize::from(lo) | (((usize::from(hi) & 0x30) ^ 0x30) << 4);
            let mut bytes = b.clone();
            if bytes.len() < n {
                bytes.resize(n, 0);
            }
            hex(&bytes)
        }
        (
            MYSQL_TYPE_VARCHAR
            | MYSQL_TYPE_VAR_STRING
            | MYSQL_TYPE_BLOB
            | MYSQL_TYPE_TINY_BLOB
            | MYSQL_TYPE_MEDIUM_BLOB
            | MYSQL_TYPE_LONG_BLOB,
            Value::Bytes(b),
        ) if column.charset == BINARY_CHARSET => hex(b),
        (
            MYSQL_TYPE_STRING
            | MYSQL_TYPE_VARCHAR
            | MYSQL_TYPE_VAR_STRING
            | MYSQL_TYPE_BLOB
            | MYSQL_TYPE_TINY_BLOB
            | MYSQL_TYPE_MEDIUM_BLOB
            | MYSQL_TYPE_LONG_BLOB,
            Value::Bytes(b),
        ) => decode_text(b, column.charset),
        // A type this reader does not know: NULL, and said loudly.
        (ty, other) => {
            tracing::error!(?ty, ?other, "a binlog value of an unknown type is read as NULL");
            return None;
        }
    })
}

/// A TIMESTAMP (seconds since the epoch, UTC) as the snapshot reads it in UTC, with `+00`.
fn timestamp_text(value: &Value, fsp: u8) -> Option<String> {
    let (secs, usec): (i64, u32) = match value {
        Value::Int(i) => (*i, 0),
        Value::Bytes(b) => {
            let s = std::str::from_utf8(b).ok()?;
            match s.split_once('.') {
                Some((secs, fraction)) => (secs.parse().ok()?, fraction.parse().ok()?),
                None => (s.parse().ok()?, 0),
            }
        }
        _ => return None,
    };
    if secs == 0 && usec == 0 {
        return Some(format!("0000-00-00 00:00:00{}+00", frac(0, fsp)));
    }
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let day = secs.rem_euclid(86_400);
    let (h, mi, s) = (day / 3600, day % 3600 / 60, day % 60);
    Some(format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}{}+00", frac(usec, fsp)))
}

/// A DOUBLE as MySQL and MariaDB print it: the shortest digits that read back as the same
/// value, positional when the decimal exponent is from -14 to 15, else `1.5e16` (no `+`).
pub fn double_text(v: f64) -> String {
    if v == 0.0 {
        return "0".to_owned();
    }
    if !v.is_finite() {
        return v.to_string();
    }
    let scientific = format!("{v:e}");
    let (mantissa, exponent) = scientific.split_once('e').expect("{:e} has an exponent");
    let exponent: i32 = exponent.parse().expect("an integer exponent");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let point = exponent + 1;
    let body = if !(-14..=15).contains(&point) {
        format!("{mantissa}e{exponent}")
    } else if point <= 0 {
        format!("0.{}{digits}", "0".repeat((-point) as usize))
    } else if digits.len() as i32 <= point {
        format!("{digits}{}", "0".repeat((point - digits.len() as i32) as usize))
    } else {
        format!("{}.{}", &digits[..point as usize], &digits[point as usize..])
    };
    format!("{sign}{body}")
}

/// The first `fsp` digits of the microseconds, after a point; nothing for `fsp` 0.
fn frac(usec: u32, fsp: u8) -> String {
    if fsp == 0 {
        return String::new();
    }
    let digits = format!("{usec:06}");
    format!(".{}", &digits[..usize::from(fsp.min(6))])
}

/// Bytes as Postgres prints `bytea`: `\x` and lower-case hex.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut text = String::with_capacity(2 + bytes.len() * 2);
    text.push_str("\\x");
    for b in bytes {
        let _ = write!(text, "{b:02x}");
    }
    text
}

/// The civil date of a day number since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = (z - era * 146_097) as u64;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe as i64 + era * 400;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// A column's bytes in its character set: latin1 (MySQL's is cp1252) or UTF-8.
fn decode_text(bytes: &[u8], charset: u16) -> String {
    match charset {
        5 | 8 | 15 | 31 | 47 | 48 | 49 | 94 => bytes.iter().map(|&b| cp1252(b)).collect(),
        _ => String::from_utf8_lossy(bytes).into_owned(),
    }
}

fn cp1252(b: u8) -> char {
    const HIGH: [u16; 32] = [
        0x20AC, 0x81, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160,
        0x2039, 0x0152, 0x8D, 0x017D, 0x8F, 0x90, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013,
        0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x9D, 0x017E, 0x0178,
    ];
    match b {
        0x80..=0x9F => char::from_u32(u32::from(HIGH[usize::from(b - 0x80)])).unwrap_or('?'),
        _ => char::from(b),
    }
}

/// A TIME(1) / TIME(2) value from its four raw bytes (as [`table_map_for_rows`] reads them).
fn time12_text(b: &[u8], fsp: u8) -> Option<String> {
    let raw = std::str::from_utf8(b).ok()?.parse::<i32>().ok()? as u32;
    let bytes = raw.to_be_bytes();
    let mut int_part = i64::from(u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]])) - 0x80_0000;
    let mut fraction = i64::from(bytes[3]);
    if int_part < 0 && fraction > 0 {
        int_part += 1;
        fraction -= 0x100;
    }
    let packed = (int_part << 24) + fraction * 10_000;
    let (negative, magnitude) = (packed < 0, packed.abs());
    let hms = magnitude >> 24;
    let usec = (magnitude % (1 << 24)) as u32;
    let (h, m, s) = ((hms >> 12) % (1 << 10), (hms >> 6) % (1 << 6), hms % (1 << 6));
    let sign = if negative { "-" } else { "" };
    Some(format!("{sign}{h:02}:{m:02}:{s:02}{}", frac(usec, fsp)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_map_to_sluice_types() {
        assert_eq!(map_type("tinyint", "tinyint(4)"), DataType::Int16);
        assert_eq!(map_type("smallint", "smallint(5) unsigned"), DataType::Int32);
        assert_eq!(map_type("int", "int(11)"), DataType::Int32);
        assert_eq!(map_type("int", "int(10) unsigned"), DataType::Int64);
        assert_eq!(map_type("bigint", "bigint(20)"), DataType::Int64);
        assert_eq!(
            map_type("bigint", "bigint(20) unsigned"),
            DataType::Decimal { precision: 20, scale: 0 }
        );
        assert_eq!(
            map_type("decimal", "decimal(10,2)"),
            DataType::Decimal { precision: 10, scale: 2 }
        );
        assert_eq!(
            map_type("decimal", "decimal(65,30)"),
            DataType::Decimal { precision: 65, scale: 30 }
        );
        assert_eq!(map_type("datetime", "datetime(6)"), DataType::Timestamp);
        assert_eq!(map_type("timestamp", "timestamp"), DataType::Timestamptz);
        assert_eq!(map_type("varbinary", "varbinary(10)"), DataType::Bytea);
        assert_eq!(map_type("enum", "enum('a','b')"), DataType::Varchar);
        assert_eq!(map_type("time", "time(3)"), DataType::Varchar);
        assert_eq!(map_type("year", "year(4)"), DataType::Int32);
    }

    #[test]
    fn doubles_print_as_mysql_prints_them() {
        let cases = [
            (0.1, "0.1"),
            (1e14, "100000000000000"),
            (1e15, "1e15"),
            (1e-15, "0.000000000000001"),
            (1e-16, "1e-16"),
            (-2.5, "-2.5"),
            (1e300, "1e300"),
            (f64::from(std::f32::consts::PI), "3.1415927410125732"),
            (-0.0, "0"),
            (123.456, "123.456"),
        ];
        for (value, text) in cases {
            assert_eq!(double_text(value), text, "{value}");
        }
    }

    #[test]
    fn temporal_values_print_as_the_snapshot_reads_them() {
        assert_eq!(
            timestamp_text(&Value::Bytes(b"1709251201.500000".to_vec()), 3).unwrap(),
            "2024-03-01 00:00:01.500+00"
        );
        assert_eq!(timestamp_text(&Value::Int(86_400), 0).unwrap(), "1970-01-02 00:00:00+00");
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(frac(123_456, 3), ".123");
        assert_eq!(frac(5, 6), ".000005");
        assert_eq!(hex(&[0, 255]), "\\x00ff");
        assert_eq!(decode_text(&[0x63, 0x61, 0x66, 0xe9, 0x80], 8), "café€");
    }
}
