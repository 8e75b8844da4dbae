//! The space the CDC matrix draws from: upstream column types and their values, key shapes,
//! replica identities, and the change events applied to a table.
//!
//! Everything here is a pure function of a [`Rng`]: a case is replayed from its seed.

use std::collections::BTreeSet;

use crate::harness::Rng;

/// An upstream column type and how its values are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ColType {
    Int2,
    Int4,
    Int8,
    /// `numeric(p, s)` within 38 digits.
    Numeric(u8, u8),
    /// `numeric(p, s)` past 38 digits.
    WideNumeric(u8, u8),
    /// `numeric` with no precision: each value its own scale.
    FreeNumeric,
    Float4,
    Float8,
    Bool,
    Text,
    /// `text` with `STORAGE EXTERNAL` and values of 2 to 300 kB: TOASTed out of line.
    Toasted,
    Varchar(u8),
    Char(u8),
    Date,
    Timestamp,
    Timestamp3,
    Timestamptz,
    Timestamptz6,
    Jsonb,
    Bytea,
    Uuid,
    Inet,
    Interval,
    Time,
    IntArray,
    /// `text[]`: elements quoted, with commas, braces, quotes, blanks, `NULL` and `"NULL"`.
    TextArray,
    /// `varchar(6)[]`
    VarcharArray,
    /// `numeric(8,2)[]`, `NaN` among the elements.
    NumericArray,
    /// `boolean[]`
    BoolArray,
    /// `date[]`, infinities among the elements.
    DateArray,
    /// MariaDB `point`: Sluice holds a geometry as bytea, MySQL's stored form.
    Point,
}

impl ColType {
    /// Every type the matrix draws.
    pub const ALL: [ColType; 30] = [
        ColType::Int2,
        ColType::Int4,
        ColType::Int8,
        ColType::Numeric(12, 3),
        ColType::WideNumeric(60, 20),
        ColType::FreeNumeric,
        ColType::Float4,
        ColType::Float8,
        ColType::Bool,
        ColType::Text,
        ColType::Toasted,
        ColType::Varchar(12),
        ColType::Char(10),
        ColType::Date,
        ColType::Timestamp,
        ColType::Timestamp3,
        ColType::Timestamptz,
        ColType::Timestamptz6,
        ColType::Jsonb,
        ColType::Bytea,
        ColType::Uuid,
        ColType::Inet,
        ColType::Interval,
        ColType::Time,
        ColType::IntArray,
        ColType::TextArray,
        ColType::VarcharArray,
        ColType::NumericArray,
        ColType::BoolArray,
        ColType::DateArray,
    ];

    /// The upstream type as written in `CREATE TABLE`.
    pub fn sql(self) -> String {
        match self {
            ColType::Int2 => "smallint".into(),
            ColType::Int4 => "integer".into(),
            ColType::Int8 => "bigint".into(),
            ColType::Numeric(p, s) | ColType::WideNumeric(p, s) => format!("numeric({p},{s})"),
            ColType::FreeNumeric => "numeric".into(),
            ColType::Float4 => "real".into(),
            ColType::Float8 => "double precision".into(),
            ColType::Bool => "boolean".into(),
            ColType::Text | ColType::Toasted => "text".into(),
            ColType::Varchar(n) => format!("varchar({n})"),
            ColType::Char(n) => format!("char({n})"),
            ColType::Date => "date".into(),
            ColType::Timestamp => "timestamp".into(),
            ColType::Timestamp3 => "timestamp(3)".into(),
            ColType::Timestamptz => "timestamptz".into(),
            ColType::Timestamptz6 => "timestamptz(6)".into(),
            ColType::Jsonb => "jsonb".into(),
            ColType::Bytea => "bytea".into(),
            ColType::Uuid => "uuid".into(),
            ColType::Inet => "inet".into(),
            ColType::Interval => "interval".into(),
            ColType::Time => "time".into(),
            ColType::IntArray => "int[]".into(),
            ColType::TextArray => "text[]".into(),
            ColType::VarcharArray => "varchar(6)[]".into(),
            ColType::NumericArray => "numeric(8,2)[]".into(),
            ColType::BoolArray => "boolean[]".into(),
            ColType::DateArray => "date[]".into(),
            ColType::Point => "point".into(),
        }
    }

    /// The types the MySQL matrix draws: what MariaDB has (no infinite dates, no arrays,
    /// intervals or inet, no float NaN or infinities). Floats and JSON print otherwise in
    /// MariaDB than in Sluice, so both sides' values of those are compared as values
    /// ([`crate::cdc_matrix::case::Case::as_values`]).
    pub const MYSQL: [ColType; 19] = [
        ColType::Int2,
        ColType::Int4,
        ColType::Int8,
        ColType::Numeric(12, 3),
        ColType::WideNumeric(60, 20),
        ColType::Bool,
        ColType::Text,
        ColType::Toasted,
        ColType::Varchar(12),
        ColType::Char(10),
        ColType::Date,
        ColType::Timestamp,
        ColType::Timestamptz,
        ColType::Bytea,
        ColType::Uuid,
        ColType::Point,
        ColType::Float4,
        ColType::Float8,
        ColType::Jsonb,
    ];

    /// The MariaDB type of a [`Self::MYSQL`] type.
    pub fn mysql_sql(self) -> String {
        match self {
            ColType::Int2 => "smallint".into(),
            ColType::Int4 => "int".into(),
            ColType::Int8 => "bigint".into(),
            ColType::Numeric(p, s) | ColType::WideNumeric(p, s) => format!("decimal({p},{s})"),
            ColType::Bool => "tinyint(1)".into(),
            ColType::Text => "varchar(40)".into(),
            ColType::Toasted => "mediumtext".into(),
            ColType::Varchar(n) => format!("varchar({n})"),
            ColType::Char(n) => format!("char({n})"),
            ColType::Date => "date".into(),
            ColType::Timestamp => "datetime".into(),
            ColType::Timestamptz => "timestamp NULL".into(),
            ColType::Bytea => "varbinary(16)".into(),
            ColType::Uuid => "char(36)".into(),
            ColType::Point => "point".into(),
            ColType::Float4 => "float".into(),
            ColType::Float8 => "double".into(),
            ColType::Jsonb => "json".into(),
            other => panic!("{other:?} is not in the MySQL space"),
        }
    }

    /// How MariaDB's value of column `name` reads as Sluice prints the column.
    pub fn mysql_select(self, name: &str) -> String {
        match self {
            ColType::Timestamptz => format!("CONCAT({name}, '+00') AS {name}"),
            // MariaDB prints a FLOAT to 6 digits, not as the value it holds.
            ColType::Float4 => format!("CAST({name} AS DOUBLE) AS {name}"),
            ColType::Bytea | ColType::Point => {
                format!("CONCAT('\\x', LOWER(HEX({name}))) AS {name}")
            }
            _ => name.to_owned(),
        }
    }

    /// A value for MariaDB (with `NO_BACKSLASH_ESCAPES`), as an SQL expression.
    pub fn mysql_value(self, rng: &mut Rng) -> String {
        if rng.chance(12) {
            return "NULL".into();
        }
        let pick = |rng: &mut Rng, options: &[&str]| {
            options[rng.below(options.len() as u64) as usize].to_owned()
        };
        match self {
            ColType::Date => {
                format!(
                    "DATE_ADD('2000-01-01', INTERVAL {} DAY)",
                    rng.below(40_000) as i64 - 20_000
                )
            }
            ColType::Timestamp => format!(
                "TIMESTAMPADD(SECOND, {}, '2000-01-01 00:00:00')",
                rng.below(60_000_000_000) as i64 - 30_000_000_000
            ),
            ColType::Timestamptz => format!(
                "TIMESTAMPADD(SECOND, {}, '2000-01-01 00:00:00')",
                rng.below(1_800_000_000) as i64 - 900_000_000
            ),
            ColType::Bytea => {
                let n = rng.below(12) as usize;
                format!("X'{}'", hex(rng, n))
            }
            // MariaDB has no float NaN or infinities.
            ColType::Float4 | ColType::Float8 => match rng.below(4) {
                0 if self == ColType::Float8 => {
                    pick(rng, &["-0", "1e-30", "1.7976931348623157e308", "5e-324", "-2.5e-310"])
                }
                0 => pick(rng, &["-0", "1e-30", "3.4e38", "-1.17549435e-38"]),
                _ => format!(
                    "{}e{}",
                    rng.below(2_000_000) as i64 - 1_000_000,
                    rng.below(20) as i64 - 12
                ),
            },
            ColType::Point => {
                let x = rng.below(2_000_000) as f64 / 1000.0 - 1000.0;
                let y = rng.below(2_000_000) as f64 / 1000.0 - 1000.0;
                format!("ST_GeomFromText('POINT({x} {y})')")
            }
            other => other.value(rng),
        }
    }

    /// A value as an SQL expression (NULL now and then).
    pub fn value(self, rng: &mut Rng) -> String {
        if rng.chance(12) {
            return "NULL".into();
        }
        let pick = |rng: &mut Rng, options: &[&str]| {
            options[rng.below(options.len() as u64) as usize].to_owned()
        };
        match self {
            ColType::Int2 => match rng.below(4) {
                0 => pick(rng, &["-32768", "32767", "0"]),
                _ => (rng.below(65536) as i64 - 32768).to_string(),
            },
            ColType::Int4 => match rng.below(4) {
                0 => pick(rng, &["-2147483648", "2147483647", "0"]),
                _ => (rng.below(1 << 32) as i64 - (1 << 31)).to_string(),
            },
            ColType::Int8 => match rng.below(4) {
                0 => pick(rng, &["-9223372036854775808", "9223372036854775807", "0"]),
                _ => (rng.next() as i64).to_string(),
            },
            ColType::Numeric(p, s) | ColType::WideNumeric(p, s) => decimal(rng, p - s, s),
            // Sluice's unconstrained numeric holds 56 integer and 20 fraction digits; a value
            // beyond (one in 50) stops the table, naming it.
            ColType::FreeNumeric => match rng.below(7) {
                0 => pick(rng, &["'NaN'", "'Infinity'", "'-Infinity'", "0.00000000001", "-0.0"]),
                // Trailing fraction zeros: the display scale Postgres keeps per value.
                3 if rng.chance(50) => pick(rng, &["1.50", "2.000", "-10.0100", "0.000", "7.10"]),
                1 => format!("{}.{}", digits(rng, 30), digits(rng, 18)),
                2 if rng.chance(7) => pick(rng, &["1e-21", "1e56", "-0.000000000000000000001"]),
                2 => format!("{}.{}", digits(rng, 56), digits(rng, 20)),
                _ => {
                    let int = rng.below(12) as u8;
                    let frac = rng.below(14) as u8;
                    decimal(rng, int, frac)
                }
            },
            ColType::Float4 | ColType::Float8 => match rng.below(4) {
                0 => pick(rng, &["'NaN'", "'Infinity'", "'-Infinity'", "'-0'", "1e-30", "3.4e38"]),
                _ => format!(
                    "{}e{}",
                    rng.below(2_000_000) as i64 - 1_000_000,
                    rng.below(20) as i64 - 12
                ),
            },
            ColType::Bool => pick(rng, &["true", "false"]),
            ColType::Text => quote(&text(rng, 0, 14)),
            ColType::Toasted => {
                let unit = text(rng, 3, 8).replace('\'', "q");
                // Now and then far past a page (up to about 300 kB).
                let times = match rng.chance(10) {
                    true => rng.between(20_000, 40_000),
                    false => rng.between(600, 6000),
                };
                format!("repeat({}, {times})", quote(&unit))
            }
            ColType::Varchar(n) => quote(&text(rng, 0, n as u64)),
            ColType::Char(n) => quote(text(rng, 0, n as u64).trim_end()),
            ColType::Date => match rng.below(6) {
                0 => pick(
                    rng,
                    &[
                        "'infinity'",
                        "'-infinity'",
                        "'0044-03-15 BC'",
                        "'9999-12-31'",
                        "'0001-01-01'",
                    ],
                ),
                _ => format!("date '2000-01-01' + {}", rng.below(40_000) as i64 - 20_000),
            },
            ColType::Timestamp
            | ColType::Timestamp3
            | ColType::Timestamptz
            | ColType::Timestamptz6 => {
                let ty = self.sql();
                match rng.below(6) {
                    0 => format!(
                        "{}::{ty}",
                        pick(
                            rng,
                            &[
                                "'infinity'",
                                "'-infinity'",
                                "'0001-01-01 00:00:00'",
                                "'1999-12-31 23:59:59.999999'"
                            ]
                        )
                    ),
                    _ => format!(
                        "(timestamptz '2000-01-01 00:00:00+00' + {} * interval '1 microsecond')::{ty}",
                        (rng.next() % 4_000_000_000_000_000) as i64 - 2_000_000_000_000_000
                    ),
                }
            }
            ColType::Jsonb => pick(
                rng,
                &[
                    "'{\"a\": 1}'",
                    "'[1, 2.50, \"x\"]'",
                    "'null'",
                    "'{\"k\": {\"n\": [true, null]}}'",
                    "'\"s\"'",
                    "'1e3'",
                ],
            ),
            ColType::Bytea => {
                let n = rng.below(12) as usize;
                format!("'\\x{}'", hex(rng, n))
            }
            ColType::Uuid => format!("'{}'", uuid(rng)),
            ColType::Inet => pick(
                rng,
                &["'::1'", "'10.1.2.3/8'", "'192.168.0.1'", "'2001:db8::1/64'", "'127.0.0.1/32'"],
            ),
            ColType::Interval => pick(
                rng,
                &["'1 day 02:03:04'", "'-1 mon'", "'3 years'", "'0'", "'00:00:00.000001'"],
            ),
            ColType::Time => {
                format!("time '00:00' + {} * interval '1 microsecond'", rng.below(86_400_000_000))
            }
            ColType::IntArray => pick(rng, &["'{1,2,NULL}'", "'{}'", "'{{1,2},{3,4}}'", "'{-1}'"]),
            ColType::TextArray => pick(
                rng,
                &[
                    r#"'{"a,b",c,NULL,"NULL",""}'"#,
                    r#"'{"q\"z","{x}","back\\slash"}'"#,
                    "'{}'",
                    "ARRAY['  lead', 'tab\there', 'é']",
                    "'{{a},{b}}'",
                ],
            ),
            ColType::VarcharArray => {
                pick(rng, &["'{ab,\"c d\",NULL}'", "'{}'", "'{\"\"}'", "'{xyzxyz}'"])
            }
            ColType::NumericArray => {
                pick(rng, &["'{1.5,NaN,-0.01}'", "'{}'", "'{NULL,123456.78}'", "'{0}'"])
            }
            ColType::BoolArray => pick(rng, &["'{t,f,NULL}'", "'{}'", "'{true}'"]),
            ColType::DateArray => {
                pick(rng, &["'{2024-02-29,infinity,-infinity}'", "'{}'", "'{NULL,1999-12-31}'"])
            }
            ColType::Point => panic!("a Postgres point is not in the matrix"),
        }
    }
}

/// A primary key's shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KeyShape {
    Int,
    BigInt,
    /// `text`, compared in byte order.
    TextC,
    /// `text COLLATE "en-x-icu"`: the upstream's index orders it unlike Sluice's keys.
    TextIcu,
    /// `(text, int)`.
    Composite,
    Uuid,
    /// `numeric(18, 4)`.
    Numeric,
}

impl KeyShape {
    pub const ALL: [KeyShape; 7] = [
        KeyShape::Int,
        KeyShape::BigInt,
        KeyShape::TextC,
        KeyShape::TextIcu,
        KeyShape::Composite,
        KeyShape::Uuid,
        KeyShape::Numeric,
    ];

    /// The key columns' definitions.
    pub fn columns(self) -> Vec<(String, String)> {
        let one = |ty: &str| vec![("k".to_owned(), ty.to_owned())];
        match self {
            KeyShape::Int => one("integer"),
            KeyShape::BigInt => one("bigint"),
            KeyShape::TextC => one("text COLLATE \"C\""),
            KeyShape::TextIcu => one("text COLLATE \"en-x-icu\""),
            KeyShape::Composite => {
                vec![("k".into(), "text".into()), ("k2".into(), "integer".into())]
            }
            KeyShape::Uuid => one("uuid"),
            KeyShape::Numeric => one("numeric(18,4)"),
        }
    }

    /// The key columns' definitions in MariaDB: text in byte order (`utf8mb4_bin`), or under
    /// the case- and accent-blind `utf8mb4_unicode_ci` for [`KeyShape::TextIcu`].
    pub fn mysql_columns(self) -> Vec<(String, String)> {
        let one = |ty: &str| vec![("k".to_owned(), ty.to_owned())];
        match self {
            KeyShape::Int => one("int"),
            KeyShape::BigInt => one("bigint"),
            KeyShape::TextC => one("varchar(40) COLLATE utf8mb4_bin"),
            KeyShape::TextIcu => one("varchar(40) COLLATE utf8mb4_unicode_ci"),
            KeyShape::Composite => vec![
                ("k".into(), "varchar(10) COLLATE utf8mb4_bin".into()),
                ("k2".into(), "int".into()),
            ],
            KeyShape::Uuid => one("char(36)"),
            KeyShape::Numeric => one("decimal(18,4)"),
        }
    }

    /// A new key for MariaDB, never one of `used`: text keys of letters and digits only (its
    /// collations pad with spaces, and a case-blind one takes `a` for `A`).
    pub fn mysql_fresh(self, rng: &mut Rng, used: &mut BTreeSet<Vec<String>>) -> Vec<String> {
        const ASCII: &[u8] = b"aAbBzZ09_-";
        const LOWER: &[u8] = b"abcz09_";
        let word = |rng: &mut Rng, alphabet: &[u8], lo: u64, hi: u64| {
            let n = rng.between(lo, hi);
            let w: String = (0..n)
                .map(|_| char::from(alphabet[rng.below(alphabet.len() as u64) as usize]))
                .collect();
            quote(&w)
        };
        loop {
            let key = match self {
                KeyShape::TextC => vec![word(rng, ASCII, 1, 10)],
                KeyShape::TextIcu => vec![word(rng, LOWER, 1, 10)],
                KeyShape::Composite => {
                    vec![word(rng, ASCII, 1, 2), (rng.below(40) as i64 - 20).to_string()]
                }
                other => {
                    let mut scratch = BTreeSet::new();
                    other.fresh(rng, &mut scratch)
                }
            };
            if used.insert(key.clone()) {
                return key;
            }
        }
    }

    /// A new key (its columns' literals), never one of `used`.
    pub fn fresh(self, rng: &mut Rng, used: &mut BTreeSet<Vec<String>>) -> Vec<String> {
        loop {
            let key = match self {
                KeyShape::Int => vec![(rng.below(1 << 32) as i64 - (1 << 31)).to_string()],
                KeyShape::BigInt => vec![match rng.below(8) {
                    0 => (i64::MAX - rng.below(1000) as i64).to_string(),
                    1 => (i64::MIN + rng.below(1000) as i64).to_string(),
                    _ => (rng.next() as i64 / 1_000).to_string(),
                }],
                KeyShape::TextC | KeyShape::TextIcu => vec![quote(&text(rng, 1, 10))],
                KeyShape::Composite => {
                    vec![quote(&text(rng, 0, 2)), (rng.below(40) as i64 - 20).to_string()]
                }
                KeyShape::Uuid => vec![format!("'{}'", uuid(rng))],
                KeyShape::Numeric => {
                    let v = rng.below(2_000_000_000) as i64 - 1_000_000_000;
                    let sign = if v < 0 { "-" } else { "" };
                    vec![format!("{sign}{}.{:04}", v.abs() / 10_000, v.abs() % 10_000)]
                }
            };
            if used.insert(key.clone()) {
                return key;
            }
        }
    }
}

/// `int` digits before the point and `frac` after, signed at random, as a literal.
fn decimal(rng: &mut Rng, int: u8, frac: u8) -> String {
    let sign = if rng.chance(30) { "-" } else { "" };
    let int = match int {
        0 => "0".to_owned(),
        n => {
            let n = rng.between(1, n as u64) as u8;
            digits(rng, n)
        }
    };
    match frac {
        0 => format!("{sign}{int}"),
        n => format!("{sign}{int}.{}", digits(rng, n)),
    }
}

/// `n` random decimal digits, the first not zero (when there are more than one).
fn digits(rng: &mut Rng, n: u8) -> String {
    let mut s: String = (0..n).map(|_| char::from(b'0' + rng.below(10) as u8)).collect();
    if n > 1 && s.starts_with('0') {
        s.replace_range(0..1, "7");
    }
    s
}

/// A string of `lo..=hi` characters, mixed case, accents, quotes, spaces and digits.
fn text(rng: &mut Rng, lo: u64, hi: u64) -> String {
    const ALPHABET: [&str; 24] = [
        "a", "A", "b", "B", "z", "Z", "é", "É", "ö", "Ö", "ß", "æ", "Æ", " ", "-", "_", "0", "9",
        "'", "\\", "\"", "☃", "Ω", "a",
    ];
    let n = rng.between(lo, hi.max(lo));
    (0..n).map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize]).collect()
}

fn hex(rng: &mut Rng, bytes: usize) -> String {
    (0..bytes).map(|_| format!("{:02x}", rng.below(256))).collect()
}

fn uuid(rng: &mut Rng) -> String {
    let h = hex(rng, 16);
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// A string literal (standard strings: only quotes are doubled).
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}
