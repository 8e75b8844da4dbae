//! Values as Postgres prints them in text format, for the types whose text Sluice writes
//! itself rather than the encoder: timestamps and dates (fractional seconds only when present,
//! `+00`, `BC`), floats in their shortest form, numerics with every digit, intervals and times,
//! and arrays of them in Postgres's array syntax.

use arrow::array::{AsArray, StringArray};
use arrow::datatypes::{
    DataType as ArrowType, Float32Type, Float64Type, TimeUnit, TimestampMicrosecondType,
};

/// The text Postgres prints for each value of `column`, for the types whose text Sluice writes
/// itself (see `encode::postgres_text`); `None` for the others. An array is written with its elements
/// so, in Postgres's array syntax (`{1.5,NULL,"a b"}`).
pub(super) fn postgres_text_of(column: &arrow::array::ArrayRef) -> Option<StringArray> {
    Some(match column.data_type() {
        ArrowType::Timestamp(_, tz) => {
            let suffix = if tz.is_some() { "+00" } else { "" };
            let Ok(micros) =
                arrow::compute::cast(column, &ArrowType::Timestamp(TimeUnit::Microsecond, None))
            else {
                return None;
            };
            let micros = micros.as_primitive::<TimestampMicrosecondType>();
            // `infinity` in another unit (a literal's nanoseconds) is still the extreme.
            let extreme = |i: usize| match column.data_type() {
                ArrowType::Timestamp(TimeUnit::Nanosecond, _) => {
                    let nanos = column.as_primitive::<arrow::datatypes::TimestampNanosecondType>();
                    Some(nanos.value(i)).filter(|v| *v == i64::MAX || *v == i64::MIN)
                }
                _ => None,
            };
            micros
                .iter()
                .enumerate()
                .map(|(i, v)| v.map(|v| format_timestamp(extreme(i).unwrap_or(v), suffix)))
                .collect::<StringArray>()
        }
        ArrowType::Date32 => {
            let values = column.as_primitive::<arrow::datatypes::Date32Type>();
            values.iter().map(|v| v.map(format_date)).collect()
        }
        ArrowType::Float64 => {
            let values = column.as_primitive::<Float64Type>();
            values.iter().map(|v| v.map(|v| format_float(v, 15))).collect()
        }
        ArrowType::Float32 => {
            let values = column.as_primitive::<Float32Type>();
            values.iter().map(|v| v.map(|v| format_float(v, 6))).collect()
        }
        // Written here: the encoder wrote NULL intervals as `00:00:00` or as another row's.
        ArrowType::Time64(TimeUnit::Microsecond) => {
            let values = column.as_primitive::<arrow::datatypes::Time64MicrosecondType>();
            values.iter().map(|v| v.map(crate::types::interval_text::time)).collect()
        }
        // A difference of timestamps: days and time, as Postgres prints it.
        ArrowType::Duration(_) => {
            let Ok(spans) = crate::types::interval_text::justified_column(column) else {
                return None;
            };
            let values = spans.as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>();
            values.iter().map(|v| v.map(crate::types::interval_text::format)).collect()
        }
        ArrowType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano) => {
            let values = column.as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>();
            values.iter().map(|v| v.map(crate::types::interval_text::format)).collect()
        }
        // Every digit (the encoder's own path goes through a 28-digit decimal), special
        // values as words, an unconstrained numeric's values with their own digits.
        ArrowType::Decimal128(..) | ArrowType::Decimal256(..) => {
            crate::types::numeric::texts(column.as_ref())
        }
        ArrowType::List(_) => {
            let lists = column.as_list::<i32>();
            let elements = lists.values();
            let texts = postgres_text_of(elements)?;
            let mut out = arrow::array::StringBuilder::new();
            for (i, offsets) in lists.offsets().windows(2).enumerate() {
                if arrow::array::Array::is_null(lists, i) {
                    out.append_null();
                    continue;
                }
                let items: Vec<String> = (offsets[0] as usize..offsets[1] as usize)
                    .map(|j| match arrow::array::Array::is_null(&texts, j) {
                        true => "NULL".to_owned(),
                        false => array_element(texts.value(j)),
                    })
                    .collect();
                out.append_value(format!("{{{}}}", items.join(",")));
            }
            out.finish()
        }
        _ => return None,
    })
}

/// An array element's text as Postgres writes it inside braces: quoted (with `"` and `\`
/// escaped) when empty, `NULL`, or holding a delimiter, a brace, a quote or white space.
fn array_element(text: &str) -> String {
    let quote = text.is_empty()
        || text.eq_ignore_ascii_case("NULL")
        || text.chars().any(|c| matches!(c, ',' | '{' | '}' | '"' | '\\') || c.is_whitespace());
    match quote {
        true => format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\"")),
        false => text.to_owned(),
    }
}

/// A float as Postgres prints it: the shortest digits that read back as the same `f32` or
/// `f64` (`123.45::real` is `123.45`, not the double's `123.44999694824219`), in exponent
/// form when the decimal exponent is below -4 or at least `max_exponent` (15 for double
/// precision, 6 for real): `6`, `1.5`, `1e+15`, `1e+06`, `1.5e-05`, `NaN`, `Infinity`.
pub(super) fn format_float<F>(v: F, max_exponent: i32) -> String
where
    F: Copy + Into<f64> + std::fmt::LowerExp,
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
    let s = shortest_digits(v);
    let (mantissa, exponent) = s.split_once('e').expect("exponent format");
    let exponent: i32 = exponent.parse().expect("exponent is a number");
    if exponent < -4 || exponent >= max_exponent {
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    // The same digits without an exponent.
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits = mantissa.replace('.', "");
    let point = exponent + 1;
    if point <= 0 {
        return format!("{sign}0.{}{digits}", "0".repeat((-point) as usize));
    }
    let point = point as usize;
    match digits.len() > point {
        true => format!("{sign}{}.{}", &digits[..point], &digits[point..]),
        false => format!("{sign}{digits}{}", "0".repeat(point - digits.len())),
    }
}

/// The shortest `d.ddde±x` that reads back as `v`, as Postgres finds it. For `real` Postgres
/// excludes the decimals that lie exactly halfway to a neighbour (they read back as `v` only by
/// round-half-even) and rounds an exact tie of the last digit to even, where Rust's shortest
/// digits take either (`-7.4796403e+08`, not `-7.47964e+08`; `3.0617342e+06`, not
/// `3.0617343e+06`): the shortest correctly rounded decimal that is strictly nearer to `v`
/// than to its neighbours is its output.
fn shortest_digits<F>(v: F) -> String
where
    F: Copy + Into<f64> + std::fmt::LowerExp,
{
    if std::mem::size_of::<F>() != 4 {
        return shortest_double(v.into());
    }
    let wide: f64 = v.into();
    let narrow = wide as f32;
    // The neighbours' midpoints, exact in a double.
    let step = |up: bool| {
        let bits = narrow.to_bits();
        let away = (narrow > 0.0) == up;
        f64::from(f32::from_bits(if away { bits + 1 } else { bits - 1 }))
    };
    let (low, high) = ((wide + step(false)) / 2.0, (wide + step(true)) / 2.0);
    let (low, high) = (low.min(high), low.max(high));
    // Every digit of `v` (a float's exact decimal expansion ends), to round by hand: an exact
    // tie goes to the even digit.
    let exact = format!("{wide:.120e}");
    let (mantissa, exponent) = exact.split_once('e').expect("exponent format");
    let exponent: i32 = exponent.parse().expect("exponent is a number");
    let sign = if mantissa.starts_with('-') { "-" } else { "" };
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).map(|b| b - b'0').collect();
    for precision in 0..9 {
        let text = rounded(sign, &digits, exponent, precision + 1);
        let inside = text.parse::<f64>().is_ok_and(|d| d > low && d < high);
        if inside {
            let (mantissa, exponent) = text.split_once('e').expect("exponent format");
            let mantissa = match mantissa.contains('.') {
                true => mantissa.trim_end_matches('0').trim_end_matches('.'),
                false => mantissa,
            };
            return format!("{mantissa}e{exponent}");
        }
    }
    format!("{v:e}")
}

/// [`shortest_digits`] of a double, whose neighbours' midpoints a double cannot hold: a
/// decimal lies on one when it reads back as `v` yet moving it by a hair (a digit far past
/// the double's precision) toward the neighbour reads back as the neighbour.
fn shortest_double(v: f64) -> String {
    let shortest = format!("{v:e}");
    let length =
        shortest.split_once('e').map_or(1, |(m, _)| m.bytes().filter(u8::is_ascii_digit).count());
    let on_midpoint = |text: &str| -> bool {
        let (mantissa, exponent) = text.split_once('e').expect("exponent format");
        let mantissa =
            if mantissa.contains('.') { mantissa.to_owned() } else { format!("{mantissa}.") };
        let toward = |nudge: &str| format!("{mantissa}000000000000000000000000{nudge}e{exponent}");
        let parse = |t: &str| t.parse::<f64>().unwrap_or(v);
        // Away from zero and toward it: either reaching another double means a midpoint.
        let above = parse(&toward("1"));
        let below = {
            let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
            // The same value less a hair: the last digit down one, then nines.
            let minus = (digits.parse::<u128>().unwrap_or(0)).saturating_sub(1);
            let width = digits.len();
            let minus = format!("{minus:0width$}");
            let sign = if mantissa.starts_with('-') { "-" } else { "" };
            parse(&format!(
                "{sign}{}.{}999999999999999999999999e{exponent}",
                &minus[..1],
                &minus[1..]
            ))
        };
        above != v || below != v
    };
    let exact = format!("{v:.60e}");
    let (mantissa, exponent) = exact.split_once('e').expect("exponent format");
    let exponent: i32 = exponent.parse().expect("exponent is a number");
    let sign = if mantissa.starts_with('-') { "-" } else { "" };
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).map(|b| b - b'0').collect();
    for n in length..=17 {
        let text = rounded(sign, &digits, exponent, n);
        if text.parse::<f64>() == Ok(v) && !on_midpoint(&text) {
            let (mantissa, exponent) = text.split_once('e').expect("exponent format");
            let mantissa = match mantissa.contains('.') {
                true => mantissa.trim_end_matches('0').trim_end_matches('.'),
                false => mantissa,
            };
            return format!("{mantissa}e{exponent}");
        }
    }
    shortest
}

/// `digits` (a mantissa `d.ddd..` times 10^`exponent`) rounded to `n` digits, half to even, as
/// `d.ddde±x` text.
fn rounded(sign: &str, digits: &[u8], exponent: i32, n: usize) -> String {
    let mut kept: Vec<u8> = digits[..n].to_vec();
    let rest = &digits[n..];
    let up = match rest.first() {
        Some(&d) if d > 5 => true,
        Some(5) => rest[1..].iter().any(|&d| d != 0) || kept[n - 1] % 2 == 1,
        _ => false,
    };
    let mut exponent = exponent;
    if up {
        let mut i = n;
        loop {
            if i == 0 {
                kept.insert(0, 1);
                kept.pop();
                exponent += 1;
                break;
            }
            i -= 1;
            if kept[i] == 9 {
                kept[i] = 0;
            } else {
                kept[i] += 1;
                break;
            }
        }
    }
    let text: String = kept.iter().map(|d| char::from(b'0' + d)).collect();
    match text.len() {
        1 => format!("{sign}{text}e{exponent}"),
        _ => format!("{sign}{}.{}e{exponent}", &text[..1], &text[1..]),
    }
}

/// `2024-01-02 03:04:05.25` from microseconds since the epoch.
pub(super) fn format_timestamp(micros: i64, suffix: &str) -> String {
    match micros {
        i64::MAX => return "infinity".to_owned(),
        i64::MIN => return "-infinity".to_owned(),
        _ => {}
    }
    let Some(t) = chrono::DateTime::from_timestamp_micros(micros) else {
        return micros.to_string();
    };
    let mut out = t.format(" %H:%M:%S").to_string();
    let fraction = micros.rem_euclid(1_000_000);
    if fraction != 0 {
        let digits = format!("{fraction:06}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
    out.push_str(suffix);
    with_era(t.date_naive(), &out)
}

/// A date as Postgres prints it: `infinity` and `-infinity` for the extremes, years before 1
/// as `.. BC`.
fn format_date(days: i32) -> String {
    use arrow::datatypes::Date32Type;
    match days {
        i32::MAX => "infinity".to_owned(),
        i32::MIN => "-infinity".to_owned(),
        _ => match Date32Type::to_naive_date_opt(days) {
            Some(date) => with_era(date, ""),
            None => days.to_string(),
        },
    }
}

/// `date` then `rest` (a time, a zone), with ` BC` after them for years before 1 (year 0 of the
/// proleptic calendar is 1 BC).
fn with_era(date: chrono::NaiveDate, rest: &str) -> String {
    use chrono::Datelike;
    let (year, era) = match date.year() {
        y if y <= 0 => (1 - y, " BC"),
        y => (y, ""),
    };
    format!("{year:04}-{:02}-{:02}{rest}{era}", date.month(), date.day())
}
