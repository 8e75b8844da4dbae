//! Dates and timestamps written as Postgres reads them: `2024-01-01 10:00` (no seconds),
//! `2024-1-2 3:04:05`, `2024-01-01T10:00Z`, `20240101 100000`, `January 8, 2024`, `Jan 2 2024`,
//! `01/02/2024` (month first, Postgres's default `DateStyle`), `24:00:00`, offsets as `+02`,
//! `+0530`, `-05:30`, `UTC`, `Z`, and fractions rounded to the microsecond.
//!
//! An offset moves a `timestamptz` to UTC; a `timestamp` (without time zone) ignores it, as
//! Postgres does (Arrow's reading converted it). Text this module does not read is left to
//! Arrow's reader, which keeps its own errors.

use chrono::{NaiveDate, NaiveDateTime, NaiveTime, TimeDelta};

/// What a text was read as: the local date and time, and the offset east of UTC (seconds)
/// when the text names one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Read {
    /// The date and time as written.
    pub at: NaiveDateTime,
    /// Seconds east of UTC, when written.
    pub offset: Option<i32>,
    /// The date as written (`2024-01-01 24:00` is 2024-01-01 as a date).
    pub date: NaiveDate,
}

impl Read {
    /// Microseconds since 1970 of a `timestamptz` (the offset applied) or of a `timestamp`.
    pub fn micros(&self, zoned: bool) -> i64 {
        let local = self.at.and_utc().timestamp_micros();
        match (zoned, self.offset) {
            (true, Some(offset)) => local - offset as i64 * 1_000_000,
            _ => local,
        }
    }

    /// Days since 1970 of its date.
    pub fn days(&self) -> i32 {
        (self.date - NaiveDate::from_ymd_opt(1970, 1, 1).expect("a date")).num_days() as i32
    }
}

const MONTHS: [&str; 12] =
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

/// Reads `text`, `None` when it is not in one of the module's forms.
pub fn read(text: &str) -> Option<Read> {
    let text = text.trim();
    let (date, rest) = date_part(text)?;
    let rest = rest.trim_start_matches(['T', 't', ' ']);
    let (time, rest) = match rest.is_empty() {
        true => (Some((NaiveTime::MIN, TimeDelta::zero())), ""),
        false => time_part(rest)?,
    };
    let (time, later) = time?;
    let offset = zone_part(rest.trim())?;
    Some(Read { at: date.and_time(time) + later, offset, date })
}

/// The date at the front of `text` and what follows it.
fn date_part(text: &str) -> Option<(NaiveDate, &str)> {
    let bytes = text.as_bytes();
    let digits = |from: usize| bytes[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let first = digits(0);
    // `YYYYMMDD`.
    if first == 8 && bytes.get(8).is_none_or(|b| !b.is_ascii_digit()) {
        let (y, m, d) = (&text[..4], &text[4..6], &text[6..8]);
        let date = NaiveDate::from_ymd_opt(y.parse().ok()?, m.parse().ok()?, d.parse().ok()?)?;
        return Some((date, &text[8..]));
    }
    // `Y-M-D` and `M/D/Y`.
    if first >= 1 && matches!(bytes.get(first), Some(b'-' | b'/')) {
        let separator = bytes[first];
        let second = digits(first + 1);
        let at_third = first + 1 + second;
        if second == 0 || bytes.get(at_third) != Some(&separator) {
            return None;
        }
        let third = digits(at_third + 1);
        if third == 0 {
            return None;
        }
        let parts =
            [&text[..first], &text[first + 1..at_third], &text[at_third + 1..at_third + 1 + third]];
        let n: Vec<u32> = parts.iter().map(|p| p.parse().ok()).collect::<Option<_>>()?;
        let (y, m, d) = match (separator, first) {
            (b'-', 3..) => (n[0], n[1], n[2]),
            (b'/', 1..=2) if third >= 3 => (n[2], n[0], n[1]),
            _ => return None,
        };
        let date = NaiveDate::from_ymd_opt(y as i32, m, d)?;
        return Some((date, &text[at_third + 1 + third..]));
    }
    // `Month D, YYYY`, `Mon D YYYY` or `D Mon YYYY`.
    let words: Vec<&str> = text.splitn(4, [' ', ',']).filter(|w| !w.is_empty()).collect();
    let month_of = |w: &str| {
        let w = w.to_ascii_lowercase();
        MONTHS.iter().position(|m| w.len() >= 3 && m.starts_with(&w[..3]) && full_or_short(&w))
    };
    let (month, day, year, used) = match words.as_slice() {
        [m, d, y, ..] if month_of(m).is_some() => (month_of(m)?, d, y, 3),
        [d, m, y, ..] if month_of(m).is_some() => (month_of(m)?, d, y, 3),
        _ => return None,
    };
    let date = NaiveDate::from_ymd_opt(year.parse().ok()?, month as u32 + 1, day.parse().ok()?)?;
    // What follows the three words.
    let mut rest = text;
    for _ in 0..used {
        rest = rest.trim_start_matches([' ', ',']);
        let end = rest.find([' ', ',']).unwrap_or(rest.len());
        rest = &rest[end..];
    }
    Some((date, rest.trim_start_matches([' ', ','])))
}

/// Whether `word` (lower case) is a month's name or its three-letter abbreviation.
fn full_or_short(word: &str) -> bool {
    const FULL: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    word.len() == 3 || FULL.contains(&word)
}

/// The time at the front of `text` and how much later than it the text means (`24:00:00` is
/// a day after `00:00:00`), then what follows it.
#[allow(clippy::type_complexity)]
fn time_part(text: &str) -> Option<(Option<(NaiveTime, TimeDelta)>, &str)> {
    let bytes = text.as_bytes();
    let run = |from: usize| bytes[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let (hour, minute, mut second, mut end);
    let first = run(0);
    if first == 6 && bytes.get(6) != Some(&b':') {
        // `HHMMSS`.
        (hour, minute, second) =
            (text[..2].parse::<u32>().ok()?, text[2..4].parse().ok()?, text[4..6].parse().ok()?);
        end = 6;
    } else {
        if !(1..=2).contains(&first) || bytes.get(first) != Some(&b':') {
            return None;
        }
        hour = text[..first].parse().ok()?;
        let m = run(first + 1);
        if m != 2 {
            return None;
        }
        minute = text[first + 1..first + 3].parse().ok()?;
        end = first + 3;
        second = 0;
        if bytes.get(end) == Some(&b':') {
            let s = run(end + 1);
            if s != 2 {
                return None;
            }
            second = text[end + 1..end + 3].parse().ok()?;
            end += 3;
        }
    }
    let mut micros: u64 = 0;
    if bytes.get(end) == Some(&b'.') {
        let f = run(end + 1);
        let digits = &text[end + 1..end + 1 + f];
        // Rounded to the microsecond, half up, as Postgres rounds.
        let mut padded: String = digits.chars().take(7).collect();
        while padded.len() < 7 {
            padded.push('0');
        }
        let seventh: u64 = padded.parse().ok()?;
        micros = (seventh + 5) / 10;
        end += 1 + f;
    }
    if micros == 1_000_000 {
        micros = 0;
        second += 1;
    }
    // `24:00:00` is the next day's midnight; a second of 60 (leap, or rounded up) the next
    // minute's first.
    let (time, later) = match (hour, second) {
        (24, _) if (minute, second, micros) == (0, 0, 0) => (NaiveTime::MIN, TimeDelta::days(1)),
        (24, _) => return None,
        (_, 60) => (NaiveTime::from_hms_micro_opt(hour, minute, 59, 0)?, TimeDelta::seconds(1)),
        _ => {
            (NaiveTime::from_hms_micro_opt(hour, minute, second, micros as u32)?, TimeDelta::zero())
        }
    };
    Some((Some((time, later)), &text[end..]))
}

/// The offset `text` names (seconds east of UTC), `Some(None)` for none.
fn zone_part(text: &str) -> Option<Option<i32>> {
    match text.to_ascii_uppercase().as_str() {
        "" => return Some(None),
        "Z" | "UTC" | "GMT" | "+00" | "-00" => return Some(Some(0)),
        _ => {}
    }
    let sign = match text.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let body = &text[1..];
    let (hours, minutes) = match body.split_once(':') {
        Some((h, m)) => (h, m),
        None if body.len() == 4 => (&body[..2], &body[2..]),
        None => (body, "0"),
    };
    if hours.is_empty()
        || hours.len() > 2
        || !hours.bytes().chain(minutes.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let (hours, minutes): (i32, i32) = (hours.parse().ok()?, minutes.parse().ok()?);
    (hours <= 15 && minutes < 60).then_some(Some(sign * (hours * 3600 + minutes * 60)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_as_postgres() {
        // (text, timestamp, timestamptz in UTC), Postgres 15's answers.
        for (text, local, utc) in [
            ("2024-01-01 10:00", "2024-01-01 10:00:00", "2024-01-01 10:00:00"),
            ("2024-01-01T10:00", "2024-01-01 10:00:00", "2024-01-01 10:00:00"),
            ("2024-01-01 10:00:00+02", "2024-01-01 10:00:00", "2024-01-01 08:00:00"),
            ("2024-01-01 10:00+02", "2024-01-01 10:00:00", "2024-01-01 08:00:00"),
            ("2024-01-01 10:00:00 UTC", "2024-01-01 10:00:00", "2024-01-01 10:00:00"),
            ("2024-1-2 3:04:05", "2024-01-02 03:04:05", "2024-01-02 03:04:05"),
            (
                "2024-01-01 10:00:00.123456789",
                "2024-01-01 10:00:00.123457",
                "2024-01-01 10:00:00.123457",
            ),
            ("January 8, 2024", "2024-01-08 00:00:00", "2024-01-08 00:00:00"),
            ("Jan 2 2024 10:00", "2024-01-02 10:00:00", "2024-01-02 10:00:00"),
            ("2 Jan 2024", "2024-01-02 00:00:00", "2024-01-02 00:00:00"),
            ("2024-01-01 10:00:00-0530", "2024-01-01 10:00:00", "2024-01-01 15:30:00"),
            ("2024-01-01 10:00:00-05:30", "2024-01-01 10:00:00", "2024-01-01 15:30:00"),
            ("20240101 100000", "2024-01-01 10:00:00", "2024-01-01 10:00:00"),
            ("2024-01-01 24:00:00", "2024-01-02 00:00:00", "2024-01-02 00:00:00"),
            ("01/02/2024", "2024-01-02 00:00:00", "2024-01-02 00:00:00"),
            ("2024-01-01T10:00:00Z", "2024-01-01 10:00:00", "2024-01-01 10:00:00"),
            ("2024-01-01 23:59:59.9999999", "2024-01-02 00:00:00", "2024-01-02 00:00:00"),
        ] {
            let read = read(text).unwrap_or_else(|| panic!("{text}"));
            let show = |micros: i64| {
                let at = chrono::DateTime::from_timestamp_micros(micros).unwrap().naive_utc();
                at.format("%Y-%m-%d %H:%M:%S%.f").to_string()
            };
            assert_eq!(show(read.micros(false)), local, "{text}");
            assert_eq!(show(read.micros(true)), utc, "{text} as timestamptz");
        }
        for bad in ["2024-13-01", "2024-01-01 25:00", "x", "2024-01-01 10:00 Mars/Base", "10:00"] {
            assert!(read(bad).is_none(), "{bad}");
        }
        assert_eq!(read("2024-01-02 10:00").unwrap().days(), 19_724);
        assert_eq!(read("2024-01-01 24:00:00").unwrap().days(), 19_723, "a date ignores the time");
    }
}
