//! Intervals and times as Postgres prints and reads them.

use arrow::datatypes::IntervalMonthDayNano;

/// An interval as Postgres prints it (`IntervalStyle` `postgres`): `1 year 2 mons -3 days
/// +04:05:06.5`, the time shown when it is not zero or when nothing else is.
pub fn format(v: arrow::datatypes::IntervalMonthDayNano) -> String {
    let mut out = String::new();
    let mut before_negative = false;
    let part = |out: &mut String, n: i64, unit: &str, before_negative: &mut bool| {
        if n == 0 {
            return;
        }
        let space = if out.is_empty() { "" } else { " " };
        let plus = if *before_negative && n > 0 { "+" } else { "" };
        let plural = if n == 1 { "" } else { "s" };
        out.push_str(&format!("{space}{plus}{n} {unit}{plural}"));
        *before_negative = n < 0;
    };
    let (years, months) = (v.months / 12, v.months % 12);
    part(&mut out, years as i64, "year", &mut before_negative);
    part(&mut out, months as i64, "mon", &mut before_negative);
    part(&mut out, v.days as i64, "day", &mut before_negative);
    let micros = v.nanoseconds / 1000;
    if micros != 0 || out.is_empty() {
        let sign = match (micros < 0, before_negative) {
            (true, _) => "-",
            (false, true) => "+",
            (false, false) => "",
        };
        let micros = micros.unsigned_abs();
        let (hours, minutes) = (micros / 3_600_000_000, micros / 60_000_000 % 60);
        let (seconds, fraction) = (micros / 1_000_000 % 60, micros % 1_000_000);
        let space = if out.is_empty() { "" } else { " " };
        out.push_str(&format!("{space}{sign}{hours:02}:{minutes:02}:{seconds:02}"));
        if fraction != 0 {
            out.push_str(format!(".{fraction:06}").trim_end_matches('0'));
        }
    }
    out
}

/// A span of `micros` microseconds as the interval a difference of timestamps is in Postgres:
/// whole days, then the time (`1 day 02:30:15`, not `26:30:15`).
pub fn justified(micros: i64) -> IntervalMonthDayNano {
    const DAY: i64 = 86_400_000_000;
    IntervalMonthDayNano::new(0, (micros / DAY) as i32, (micros % DAY) * 1000)
}

/// A column of durations (a difference of timestamps) as Postgres's intervals ([`justified`]).
pub fn justified_column(
    column: &arrow::array::ArrayRef,
) -> arrow::error::Result<arrow::array::ArrayRef> {
    use arrow::array::{AsArray, IntervalMonthDayNanoArray};
    use arrow::datatypes::{DataType, DurationMicrosecondType, TimeUnit};
    let micros = arrow::compute::cast(column, &DataType::Duration(TimeUnit::Microsecond))?;
    let micros = micros.as_primitive::<DurationMicrosecondType>();
    let out: IntervalMonthDayNanoArray = micros.iter().map(|v| v.map(justified)).collect();
    Ok(std::sync::Arc::new(out))
}

/// A time of day (microseconds since midnight) as Postgres prints it: `10:00:00`,
/// `10:00:00.5`; `24:00:00` for a whole day.
pub fn time(micros: i64) -> String {
    let (seconds, fraction) = (micros / 1_000_000, micros % 1_000_000);
    let text = format!("{:02}:{:02}:{:02}", seconds / 3600, seconds / 60 % 60, seconds % 60);
    match fraction {
        0 => text,
        f => format!("{text}.{f:06}").trim_end_matches('0').to_owned(),
    }
}

/// An interval as Postgres prints it (`1 year 2 mons -3 days +04:05:06.5`) or as people write
/// it (`1 day 02:00:00`, `-00:00:01.25`, `3 weeks`): whole numbers with their units and a
/// clock time. `None` for another form (left to Arrow's reader: `1.5 hours`).
pub fn parse(text: &str) -> Option<IntervalMonthDayNano> {
    let (mut months, mut days, mut micros) = (0i64, 0i64, 0i64);
    let mut words = text.split_whitespace().peekable();
    let mut clock = false;
    while let Some(word) = words.next() {
        if word.contains(':') {
            let (negative, body) = match word.as_bytes()[0] {
                b'-' => (true, &word[1..]),
                b'+' => (false, &word[1..]),
                _ => (false, word),
            };
            let mut parts = body.split(':');
            let hours: i64 = parts.next()?.parse().ok()?;
            let minutes: i64 = parts.next()?.parse().ok()?;
            let seconds = parts.next().unwrap_or("0");
            if parts.next().is_some() || minutes >= 60 {
                return None;
            }
            let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
            let whole: i64 = whole.parse().ok()?;
            if whole >= 60 || fraction.len() > 6 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let fraction: i64 = format!("{fraction:0<6}").parse().ok()?;
            let total = ((hours * 60 + minutes) * 60 + whole) * 1_000_000 + fraction;
            micros += if negative { -total } else { total };
            clock = true;
            continue;
        }
        let n: i64 = word.parse().ok()?;
        let unit = words.next()?.to_ascii_lowercase();
        match unit.trim_end_matches('s') {
            "year" => months += n * 12,
            "mon" | "month" => months += n,
            "week" => days += n * 7,
            "day" => days += n,
            "hour" => micros += n * 3_600_000_000,
            "min" | "minute" => micros += n * 60_000_000,
            "sec" | "second" => micros += n * 1_000_000,
            _ => return None,
        }
    }
    if !clock && months == 0 && days == 0 && micros == 0 && text.split_whitespace().next().is_none()
    {
        return None;
    }
    Some(IntervalMonthDayNano::new(
        i32::try_from(months).ok()?,
        i32::try_from(days).ok()?,
        micros.checked_mul(1000)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_and_reads_as_postgres() {
        for text in [
            "1 day",
            "-1 days +02:00:00",
            "2 years 2 mons -3 days +04:05:06.5",
            "00:00:00",
            "-00:00:01.25",
            "100:00:00",
            "1 mon -00:00:01",
            "1 day 02:30:15",
        ] {
            let read = parse(text).or_else(|| {
                // No clock time: as Arrow would read it.
                text.strip_suffix(" day")
                    .map(|d| IntervalMonthDayNano::new(0, d.parse().unwrap(), 0))
            });
            assert_eq!(read.map(format).as_deref(), Some(text), "{text}");
        }
        assert_eq!(time(36_000_000_000), "10:00:00");
        assert_eq!(time(36_000_500_000), "10:00:00.5");
        assert!(parse("1 fortnight 00:00:01").is_none());
        assert!(parse("1.5 hours").is_none(), "left to Arrow");
        assert_eq!(parse("-1 mons +3 days").map(format).as_deref(), Some("-1 mons +3 days"));
    }
}
