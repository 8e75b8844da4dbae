//! Postgres's date and time templates (`YYYY-MM-DD HH24:MI:SS`, `FMMonth DDth`, ..): read once
//! into [`Token`]s, then used to print a timestamp ([`print`]) or to read one from text
//! ([`parse`]), as `to_char`, `to_date` and `to_timestamp` do.
//!
//! Every template pattern of Postgres's table is known except the ones of other calendars'
//! eras; `FM` (no padding) and `TH`/`th` (ordinal suffix) modify the pattern they touch;
//! `"quoted text"` and any other character print as they are.

use chrono::{Datelike, NaiveDate, NaiveDateTime, Timelike};

/// How a text pattern's words are written: `MONTH`, `Month` or `month`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    Upper,
    Capitalized,
    Lower,
}

impl Case {
    fn of(pattern: &str) -> Case {
        let mut letters = pattern.chars().filter(|c| c.is_ascii_alphabetic());
        match (letters.next(), letters.next()) {
            (Some(a), _) if a.is_ascii_lowercase() => Case::Lower,
            (Some(_), Some(b)) if b.is_ascii_lowercase() => Case::Capitalized,
            _ => Case::Upper,
        }
    }

    fn apply(self, word: &str) -> String {
        match self {
            Case::Upper => word.to_uppercase(),
            Case::Lower => word.to_lowercase(),
            Case::Capitalized => {
                let mut chars = word.chars();
                chars.next().map_or_else(String::new, |first| {
                    first.to_uppercase().chain(chars.flat_map(char::to_lowercase)).collect()
                })
            }
        }
    }
}

/// One pattern of a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Hour12,
    Hour24,
    Minute,
    Second,
    Millis,
    Micros,
    /// `FF1`..`FF6`: that many fraction digits.
    Fraction(u8),
    SecondsOfDay,
    /// `AM`, `PM` (`dots`: `A.M.`, `P.M.`).
    Meridiem {
        case: Case,
        dots: bool,
    },
    YearComma,
    Year4,
    Year3,
    Year2,
    Year1,
    IsoYear4,
    IsoYear3,
    IsoYear2,
    IsoYear1,
    Era {
        case: Case,
        dots: bool,
    },
    MonthName(Case),
    MonthAbbrev(Case),
    Month,
    DayName(Case),
    DayAbbrev(Case),
    DayOfYear,
    IsoDayOfYear,
    DayOfMonth,
    DayOfWeek,
    IsoDayOfWeek,
    WeekOfMonth,
    WeekOfYear,
    IsoWeek,
    Century,
    Julian,
    Quarter,
    RomanMonth(Case),
    ZoneName(Case),
    ZoneOffset,
    ZoneHours,
    ZoneMinutes,
}

/// A template read into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// A pattern; `fill` when `FM` removes its padding, `ordinal` when `TH`/`th` follows it.
    Field { field: Field, fill: bool, ordinal: Option<Case> },
    /// Text printed as it is (and skipped over when reading).
    Literal(String),
}

impl Token {
    /// A pattern's field, whether `FM` fills it and its ordinal suffix; a literal's text is
    /// written to `out` instead.
    fn pattern(&self, out: &mut String) -> Option<(Field, bool, Option<Case>)> {
        match self {
            Token::Field { field, fill, ordinal } => Some((*field, *fill, *ordinal)),
            Token::Literal(text) => {
                out.push_str(text);
                None
            }
        }
    }
}

/// A pattern's field, made from the pattern as written (its case).
type MakeField = fn(&str) -> Field;

/// The patterns, longest first where one begins another.
const PATTERNS: &[(&str, MakeField)] = &[
    ("Y,YYY", |_| Field::YearComma),
    ("SSSSS", |_| Field::SecondsOfDay),
    ("MONTH", |p| Field::MonthName(Case::of(p))),
    ("SSSS", |_| Field::SecondsOfDay),
    ("HH24", |_| Field::Hour24),
    ("HH12", |_| Field::Hour12),
    ("YYYY", |_| Field::Year4),
    ("IYYY", |_| Field::IsoYear4),
    ("IDDD", |_| Field::IsoDayOfYear),
    ("A.M.", |p| Field::Meridiem { case: Case::of(p), dots: true }),
    ("P.M.", |p| Field::Meridiem { case: Case::of(p), dots: true }),
    ("B.C.", |p| Field::Era { case: Case::of(p), dots: true }),
    ("A.D.", |p| Field::Era { case: Case::of(p), dots: true }),
    ("YYY", |_| Field::Year3),
    ("IYY", |_| Field::IsoYear3),
    ("MON", |p| Field::MonthAbbrev(Case::of(p))),
    ("DAY", |p| Field::DayName(Case::of(p))),
    ("DDD", |_| Field::DayOfYear),
    ("FF1", |_| Field::Fraction(1)),
    ("FF2", |_| Field::Fraction(2)),
    ("FF3", |_| Field::Fraction(3)),
    ("FF4", |_| Field::Fraction(4)),
    ("FF5", |_| Field::Fraction(5)),
    ("FF6", |_| Field::Fraction(6)),
    ("TZH", |_| Field::ZoneHours),
    ("TZM", |_| Field::ZoneMinutes),
    ("HH", |_| Field::Hour12),
    ("MI", |_| Field::Minute),
    ("SS", |_| Field::Second),
    ("MS", |_| Field::Millis),
    ("US", |_| Field::Micros),
    ("AM", |p| Field::Meridiem { case: Case::of(p), dots: false }),
    ("PM", |p| Field::Meridiem { case: Case::of(p), dots: false }),
    ("YY", |_| Field::Year2),
    ("IY", |_| Field::IsoYear2),
    ("BC", |p| Field::Era { case: Case::of(p), dots: false }),
    ("AD", |p| Field::Era { case: Case::of(p), dots: false }),
    ("MM", |_| Field::Month),
    ("DY", |p| Field::DayAbbrev(Case::of(p))),
    ("DD", |_| Field::DayOfMonth),
    ("ID", |_| Field::IsoDayOfWeek),
    ("WW", |_| Field::WeekOfYear),
    ("IW", |_| Field::IsoWeek),
    ("CC", |_| Field::Century),
    ("RM", |p| Field::RomanMonth(Case::of(p))),
    ("TZ", |p| Field::ZoneName(Case::of(p))),
    ("OF", |_| Field::ZoneOffset),
    ("Y", |_| Field::Year1),
    ("I", |_| Field::IsoYear1),
    ("D", |_| Field::DayOfWeek),
    ("W", |_| Field::WeekOfMonth),
    ("J", |_| Field::Julian),
    ("Q", |_| Field::Quarter),
];

/// Reads `template` into tokens.
pub fn tokens(template: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut literal = String::new();
    let mut rest = template;
    while let Some(c) = rest.chars().next() {
        if c == '"' {
            // Quoted text, `\"` for a quote inside it.
            let mut chars = rest[1..].char_indices();
            let mut end = rest.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, escaped)) = chars.next() {
                            literal.push(escaped);
                        }
                    }
                    '"' => {
                        end = i + 2;
                        break;
                    }
                    c => literal.push(c),
                }
            }
            rest = &rest[end.min(rest.len())..];
            continue;
        }
        if rest.starts_with("\\\"") {
            // Outside quotes a backslash escapes only a double quote.
            literal.push('"');
            rest = &rest[2..];
            continue;
        }
        let fill = starts_with_ci(rest, "FM");
        let after_fm = if fill { &rest[2..] } else { rest };
        if let Some((pattern, field)) = PATTERNS.iter().find(|(p, _)| starts_with_ci(after_fm, p)) {
            if !literal.is_empty() {
                out.push(Token::Literal(std::mem::take(&mut literal)));
            }
            let text = &after_fm[..pattern.len()];
            let after = &after_fm[pattern.len()..];
            let ordinal = match after.get(..2) {
                Some(s) if s.eq_ignore_ascii_case("th") => Some(Case::of(s)),
                _ => None,
            };
            rest = if ordinal.is_some() { &after[2..] } else { after };
            out.push(Token::Field { field: field(text), fill, ordinal });
            continue;
        }
        literal.push(c);
        rest = &rest[c.len_utf8()..];
    }
    if !literal.is_empty() {
        out.push(Token::Literal(literal));
    }
    out
}

fn starts_with_ci(text: &str, prefix: &str) -> bool {
    text.get(..prefix.len()).is_some_and(|t| t.eq_ignore_ascii_case(prefix))
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] =
    ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const ROMAN: [&str; 12] =
    ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII"];

/// `n`'s English ordinal suffix.
pub(super) fn suffix(n: i64) -> &'static str {
    match (n % 100, n % 10) {
        (11..=13, _) => "th",
        (_, 1) => "st",
        (_, 2) => "nd",
        (_, 3) => "rd",
        _ => "th",
    }
}

/// `at` (with its zone's name and offset in seconds, for a `timestamptz`) printed by `tokens`.
pub fn print(tokens: &[Token], at: NaiveDateTime, zone: Option<(&str, i32)>) -> String {
    let mut out = String::new();
    for token in tokens {
        let Some((field, fill, ordinal)) = token.pattern(&mut out) else { continue };
        let number = |out: &mut String, n: i64, width: usize| {
            match fill {
                true => out.push_str(&n.to_string()),
                false if n < 0 => out.push_str(&format!("-{:0width$}", -n)),
                false => out.push_str(&format!("{n:0width$}")),
            }
            if let Some(case) = ordinal {
                out.push_str(&case.apply(suffix(n)));
            }
        };
        let word = |out: &mut String, word: &str, case: Case, pad: usize| {
            let word = case.apply(word);
            match fill {
                true => out.push_str(&word),
                false => out.push_str(&format!("{word:<pad$}")),
            }
        };
        let year = at.year() as i64;
        // Years before 1 print as positive years BC.
        let shown_year = if year <= 0 { 1 - year } else { year };
        let iso = at.iso_week();
        let hour12 = match at.hour() % 12 {
            0 => 12,
            h => h,
        };
        match field {
            Field::Hour12 => number(&mut out, hour12 as i64, 2),
            Field::Hour24 => number(&mut out, at.hour() as i64, 2),
            Field::Minute => number(&mut out, at.minute() as i64, 2),
            Field::Second => number(&mut out, at.second() as i64, 2),
            Field::Millis => number(&mut out, (at.nanosecond() / 1_000_000) as i64, 3),
            Field::Micros => number(&mut out, (at.nanosecond() / 1_000) as i64, 6),
            Field::Fraction(digits) => {
                let micros = at.nanosecond() / 1_000;
                let n = micros / 10u32.pow(6 - digits as u32);
                number(&mut out, n as i64, digits as usize);
            }
            Field::SecondsOfDay => {
                let seconds = at.num_seconds_from_midnight() as i64;
                out.push_str(&seconds.to_string());
            }
            Field::Meridiem { case, dots } => out.push_str(&meridiem(at.hour() >= 12, case, dots)),
            Field::YearComma => {
                let (thousands, rest) = (shown_year / 1000, shown_year % 1000);
                out.push_str(&format!("{thousands},{rest:03}"));
            }
            Field::Year4 => number(&mut out, shown_year, 4),
            Field::Year3 => number(&mut out, shown_year % 1000, 3),
            Field::Year2 => number(&mut out, shown_year % 100, 2),
            Field::Year1 => number(&mut out, shown_year % 10, 1),
            Field::IsoYear4 => number(&mut out, iso.year() as i64, 4),
            Field::IsoYear3 => number(&mut out, iso.year() as i64 % 1000, 3),
            Field::IsoYear2 => number(&mut out, iso.year() as i64 % 100, 2),
            Field::IsoYear1 => number(&mut out, iso.year() as i64 % 10, 1),
            Field::Era { case, dots } => {
                let text = match (year <= 0, dots) {
                    (false, false) => "AD",
                    (true, false) => "BC",
                    (false, true) => "A.D.",
                    (true, true) => "B.C.",
                };
                out.push_str(&case.apply(text));
            }
            Field::MonthName(case) => word(&mut out, MONTHS[at.month0() as usize], case, 9),
            Field::MonthAbbrev(case) => word(&mut out, &MONTHS[at.month0() as usize][..3], case, 3),
            Field::Month => number(&mut out, at.month() as i64, 2),
            Field::DayName(case) => {
                let day = at.weekday().num_days_from_sunday() as usize;
                word(&mut out, DAYS[day], case, 9);
            }
            Field::DayAbbrev(case) => {
                let day = at.weekday().num_days_from_sunday() as usize;
                word(&mut out, &DAYS[day][..3], case, 3);
            }
            Field::DayOfYear => number(&mut out, at.ordinal() as i64, 3),
            Field::IsoDayOfYear => {
                let day = (iso.week() as i64 - 1) * 7 + at.weekday().number_from_monday() as i64;
                number(&mut out, day, 3);
            }
            Field::DayOfMonth => number(&mut out, at.day() as i64, 2),
            Field::DayOfWeek => number(&mut out, at.weekday().number_from_sunday() as i64, 1),
            Field::IsoDayOfWeek => {
                number(&mut out, at.weekday().number_from_monday() as i64, 1);
            }
            Field::WeekOfMonth => number(&mut out, (at.day0() / 7 + 1) as i64, 1),
            Field::WeekOfYear => number(&mut out, (at.ordinal0() / 7 + 1) as i64, 2),
            Field::IsoWeek => number(&mut out, iso.week() as i64, 2),
            Field::Century => {
                let century = match year > 0 {
                    true => (year + 99) / 100,
                    false => -((shown_year + 99) / 100),
                };
                number(&mut out, century, 2);
            }
            Field::Julian => number(&mut out, julian_day(at.date()), 1),
            Field::Quarter => number(&mut out, (at.month0() / 3 + 1) as i64, 1),
            Field::RomanMonth(case) => word(&mut out, ROMAN[at.month0() as usize], case, 4),
            Field::ZoneName(case) => {
                if let Some((name, _)) = zone {
                    out.push_str(&case.apply(name));
                }
            }
            Field::ZoneOffset | Field::ZoneHours | Field::ZoneMinutes => {
                let Some((_, offset)) = zone else { continue };
                let sign = if offset < 0 { '-' } else { '+' };
                let (hours, minutes) = (offset.abs() / 3600, offset.abs() % 3600 / 60);
                match field {
                    Field::ZoneHours => out.push_str(&format!("{sign}{hours:02}")),
                    Field::ZoneMinutes => out.push_str(&format!("{minutes:02}")),
                    _ if minutes == 0 => out.push_str(&format!("{sign}{hours:02}")),
                    _ => out.push_str(&format!("{sign}{hours:02}:{minutes:02}")),
                }
            }
        }
    }
    out
}

/// `AM`/`PM` (`A.M.`/`P.M.` with `dots`) in `case`.
fn meridiem(pm: bool, case: Case, dots: bool) -> String {
    let text = match (pm, dots) {
        (false, false) => "AM",
        (true, false) => "PM",
        (false, true) => "A.M.",
        (true, true) => "P.M.",
    };
    case.apply(text)
}

/// An interval's fields as Postgres's `to_char` reads them: years and months from the months,
/// the days as they are, hours (any number of them), minutes, seconds and microseconds from
/// the time, each with the sign of its part.
struct Span {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    micros: i64,
}

/// C's `%0*d`: at least `width` characters, a minus sign counted among them.
fn c_padded(out: &mut String, n: i64, width: usize) {
    match n < 0 {
        true => out.push_str(&format!("-{:0w$}", -n, w = width.saturating_sub(1))),
        false => out.push_str(&format!("{n:0width$}")),
    }
}

/// An interval (`months`, `days`, `micros` of time) printed by `tokens`, as Postgres's
/// `to_char(interval, text)` prints it: `HH24` counts every hour of the time (`30:00:00`),
/// `DD` the days, `MM` and `YYYY` the months; patterns tied to calendar dates (month and day
/// names, eras, zones, day of the week, ISO and Julian numbering) are an error, as there.
pub fn print_interval(
    tokens: &[Token],
    months: i32,
    days: i32,
    micros: i64,
) -> Result<String, String> {
    let months = months as i64;
    let (hour, rest) = (micros / 3_600_000_000, micros % 3_600_000_000);
    let span = Span {
        year: months / 12,
        month: months % 12,
        day: days as i64,
        hour,
        minute: rest / 60_000_000,
        second: rest % 60_000_000 / 1_000_000,
        micros: rest % 1_000_000,
    };
    let day_of_span = (span.year * 12 + span.month) * 30 + span.day;
    let mut out = String::new();
    for token in tokens {
        let Some((field, fill, ordinal)) = token.pattern(&mut out) else { continue };
        // Postgres's `%0*d`: `width` characters (one more for a minus sign when `signed`), none
        // under `FM` when `fm` (`MS` and `US` keep theirs); a `TH` suffix by the last digits.
        let pad = |out: &mut String, n: i64, width: usize, signed: bool, fm: bool| {
            match (fill && fm, signed && n < 0) {
                (true, _) => out.push_str(&n.to_string()),
                (false, true) => c_padded(out, n, width + 1),
                (false, false) => c_padded(out, n, width),
            }
            if let Some(case) = ordinal {
                out.push_str(&case.apply(suffix(n.abs())));
            }
        };
        let number = |out: &mut String, n: i64, width: usize| pad(out, n, width, true, true);
        let fixed = |out: &mut String, n: i64, width: usize| pad(out, n, width, false, true);
        match field {
            Field::Hour12 => {
                let h = match span.hour % 12 {
                    0 => 12,
                    h => h,
                };
                number(&mut out, h, 2);
            }
            Field::Hour24 => number(&mut out, span.hour, 2),
            Field::Minute => number(&mut out, span.minute, 2),
            Field::Second => number(&mut out, span.second, 2),
            Field::Millis => pad(&mut out, span.micros / 1000, 3, false, false),
            Field::Micros => pad(&mut out, span.micros, 6, false, false),
            Field::Fraction(digits) => {
                let n = span.micros / 10i64.pow(6 - digits as u32);
                pad(&mut out, n, digits as usize, false, false);
            }
            Field::SecondsOfDay => {
                let seconds = span.hour * 3600 + span.minute * 60 + span.second;
                pad(&mut out, seconds, 0, false, false);
            }
            Field::Meridiem { case, dots } => {
                out.push_str(&meridiem(span.hour % 24 >= 12, case, dots))
            }
            Field::YearComma => {
                let thousands = span.year / 1000;
                out.push_str(&format!("{thousands},{:03}", span.year - thousands * 1000));
            }
            Field::Year4 => number(&mut out, span.year, 4),
            Field::Year3 => number(&mut out, span.year % 1000, 3),
            Field::Year2 => number(&mut out, span.year % 100, 2),
            Field::Year1 => number(&mut out, span.year % 10, 1),
            Field::Month => number(&mut out, span.month, 2),
            Field::DayOfMonth => fixed(&mut out, span.day, 2),
            Field::DayOfYear => fixed(&mut out, day_of_span, 3),
            Field::WeekOfYear => fixed(&mut out, (day_of_span - 1) / 7 + 1, 2),
            Field::WeekOfMonth => fixed(&mut out, (span.day - 1) / 7 + 1, 1),
            Field::Quarter => {
                if span.month != 0 {
                    number(&mut out, (span.month - 1) / 3 + 1, 1);
                }
            }
            Field::Century => {
                let century = span.year / 100;
                match (-99..=99).contains(&century) {
                    true => number(&mut out, century, 2),
                    false => out.push_str(&century.to_string()),
                }
            }
            _ => {
                return Err("invalid format specification for an interval value: intervals \
                            are not tied to specific calendar dates"
                    .to_owned());
            }
        }
    }
    Ok(out)
}

/// The Julian day number of `date` (day 0 is 24 November 4714 BC of the proleptic Gregorian
/// calendar).
fn julian_day(date: NaiveDate) -> i64 {
    date.num_days_from_ce() as i64 + 1_721_425
}

/// What reading a template found; the fields it did not name keep Postgres's defaults.
#[derive(Debug, Default)]
struct Parsed {
    year: Option<i64>,
    bc: bool,
    month: Option<u32>,
    day: Option<u32>,
    day_of_year: Option<u32>,
    julian: Option<i64>,
    hour: u32,
    pm: Option<bool>,
    twelve_hour: bool,
    minute: u32,
    second: u32,
    micros: u32,
    offset: Option<i32>,
}

/// Reads `text` by `tokens` (as `to_timestamp` does): the local time, and the offset in
/// seconds east of UTC when the text names one. Separators and spaces in the text are loose,
/// as in Postgres: one or more match any separator of the template.
pub fn parse(tokens: &[Token], text: &str) -> Result<(NaiveDateTime, Option<i32>), String> {
    let mut p = Parsed::default();
    let mut rest = text;
    for (i, token) in tokens.iter().enumerate() {
        let field = match token {
            Token::Literal(literal) => {
                // An offset's sign is not a separator.
                let signed = matches!(
                    tokens.get(i + 1),
                    Some(Token::Field { field: Field::ZoneOffset | Field::ZoneHours, .. })
                );
                for c in literal.chars() {
                    if c.is_alphanumeric() {
                        if let Some(r) = rest.chars().next().filter(|r| r.eq_ignore_ascii_case(&c))
                        {
                            rest = &rest[r.len_utf8()..];
                        }
                    } else {
                        rest = rest.trim_start_matches(|r: char| {
                            !r.is_alphanumeric() && !(signed && (r == '+' || r == '-'))
                        });
                    }
                }
                continue;
            }
            Token::Field { field, .. } => *field,
        };
        rest = rest.trim_start();
        // Digits run on to the next separator unless another number follows at once.
        let next_is_number = matches!(
            tokens.get(i + 1),
            Some(Token::Field { field, .. }) if is_numeric(*field)
        );
        let signed = matches!(field, Field::Year4 | Field::YearComma);
        let digits = |rest: &mut &str, width: usize| {
            number(rest, width, next_is_number, signed).ok_or_else(|| bad(field, rest))
        };
        match field {
            Field::Hour12 => {
                p.hour = digits(&mut rest, 2)? as u32;
                p.twelve_hour = true;
            }
            Field::Hour24 => p.hour = digits(&mut rest, 2)? as u32,
            Field::Minute => p.minute = digits(&mut rest, 2)? as u32,
            Field::Second => p.second = digits(&mut rest, 2)? as u32,
            Field::Millis => p.micros = scaled(digits_text(&mut rest, 3)?, 3)?,
            Field::Micros => p.micros = scaled(digits_text(&mut rest, 6)?, 6)?,
            Field::Fraction(n) => p.micros = scaled(digits_text(&mut rest, n as usize)?, 6)?,
            Field::SecondsOfDay => {
                let s = digits(&mut rest, 5)?;
                (p.hour, p.minute, p.second) =
                    ((s / 3600) as u32, (s / 60 % 60) as u32, (s % 60) as u32);
            }
            Field::Meridiem { dots, .. } => {
                let len = if dots { 4 } else { 2 };
                let word = rest.get(..len).ok_or_else(|| bad(field, rest))?;
                p.pm = Some(match word.to_ascii_uppercase().as_str() {
                    "AM" | "A.M." => false,
                    "PM" | "P.M." => true,
                    _ => return Err(bad(field, rest)),
                });
                rest = &rest[len..];
            }
            Field::YearComma => {
                let thousands = digits(&mut rest, 3)?;
                rest = rest.strip_prefix(',').unwrap_or(rest);
                p.year = Some(thousands * 1000 + digits(&mut rest, 3)?);
            }
            Field::Year4 | Field::IsoYear4 => p.year = Some(digits(&mut rest, 4)?),
            Field::Year3 | Field::IsoYear3 => p.year = Some(2000 + digits(&mut rest, 3)? % 1000),
            Field::Year2 | Field::IsoYear2 => {
                // Postgres: the year nearest 2020.
                let y = digits(&mut rest, 2)?;
                p.year = Some(if y < 70 { 2000 + y } else { 1900 + y });
            }
            Field::Year1 | Field::IsoYear1 => p.year = Some(2000 + digits(&mut rest, 1)?),
            Field::Era { dots, .. } => {
                let len = if dots { 4 } else { 2 };
                let word = rest.get(..len).ok_or_else(|| bad(field, rest))?;
                p.bc = word.to_ascii_uppercase().starts_with('B');
                rest = &rest[len..];
            }
            Field::MonthName(_) | Field::MonthAbbrev(_) => {
                let full = matches!(field, Field::MonthName(_));
                let found = MONTHS.iter().position(|m| {
                    let name = if full { *m } else { &m[..3] };
                    starts_with_ci(rest, name)
                });
                let index = found.ok_or_else(|| bad(field, rest))?;
                let len = if full { MONTHS[index].len() } else { 3 };
                rest = &rest[len..];
                p.month = Some(index as u32 + 1);
            }
            Field::RomanMonth(_) => {
                // Longest numeral first (VIII before VII before VI before V).
                let mut order: Vec<usize> = (0..12).collect();
                order.sort_by_key(|&i| std::cmp::Reverse(ROMAN[i].len()));
                let index = order.into_iter().find(|&i| starts_with_ci(rest, ROMAN[i]));
                let index = index.ok_or_else(|| bad(field, rest))?;
                rest = &rest[ROMAN[index].len()..];
                p.month = Some(index as u32 + 1);
            }
            Field::Month => p.month = Some(digits(&mut rest, 2)? as u32),
            Field::DayName(_) | Field::DayAbbrev(_) => {
                let full = matches!(field, Field::DayName(_));
                let found =
                    DAYS.iter().find(|d| starts_with_ci(rest, if full { d } else { &d[..3] }));
                let day = found.ok_or_else(|| bad(field, rest))?;
                rest = &rest[if full { day.len() } else { 3 }..];
            }
            Field::DayOfYear | Field::IsoDayOfYear => {
                p.day_of_year = Some(digits(&mut rest, 3)? as u32)
            }
            Field::DayOfMonth => p.day = Some(digits(&mut rest, 2)? as u32),
            Field::DayOfWeek | Field::IsoDayOfWeek | Field::WeekOfMonth | Field::Quarter => {
                digits(&mut rest, 1)?;
            }
            Field::WeekOfYear | Field::IsoWeek | Field::Century => {
                digits(&mut rest, 2)?;
            }
            Field::Julian => p.julian = Some(digits(&mut rest, 7)?),
            Field::ZoneName(_) => {
                let name: String = rest.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
                match name.to_ascii_uppercase().as_str() {
                    "UTC" | "GMT" | "Z" => p.offset = Some(0),
                    _ => return Err(format!("time zone \"{name}\" is not recognized")),
                }
                rest = &rest[name.len()..];
            }
            Field::ZoneOffset | Field::ZoneHours => {
                let negative = rest.starts_with('-');
                rest = rest.trim_start_matches(['+', '-']);
                let hours = digits(&mut rest, 2)?;
                let mut minutes = 0;
                if field == Field::ZoneOffset && rest.starts_with(':') {
                    rest = &rest[1..];
                    minutes = digits(&mut rest, 2)?;
                }
                let seconds = (hours * 3600 + minutes * 60) as i32;
                p.offset = Some(if negative { -seconds } else { seconds });
            }
            Field::ZoneMinutes => {
                let minutes = digits(&mut rest, 2)? as i32 * 60;
                let offset = p.offset.unwrap_or(0);
                p.offset = Some(if offset < 0 { offset - minutes } else { offset + minutes });
            }
        }
    }
    p.finish()
}

/// The error for text that `field` cannot read.
fn bad(field: Field, rest: &str) -> String {
    let text: String = rest.chars().take(12).collect();
    format!("invalid value \"{text}\" for {field:?} in the template")
}

/// A number from the front of `rest`: up to `width` digits when `bounded` (another number
/// follows at once), else every digit there; a leading `-` when `signed`.
fn number(rest: &mut &str, width: usize, bounded: bool, signed: bool) -> Option<i64> {
    let negative = signed && rest.starts_with('-');
    let body = if negative { &rest[1..] } else { *rest };
    let run = body.bytes().take_while(u8::is_ascii_digit).count();
    let take = if bounded { run.min(width) } else { run };
    if take == 0 || take > 18 {
        return None;
    }
    let n: i64 = body[..take].parse().ok()?;
    *rest = &body[take..];
    Some(if negative { -n } else { n })
}

fn is_numeric(field: Field) -> bool {
    !matches!(
        field,
        Field::Meridiem { .. }
            | Field::Era { .. }
            | Field::MonthName(_)
            | Field::MonthAbbrev(_)
            | Field::DayName(_)
            | Field::DayAbbrev(_)
            | Field::RomanMonth(_)
            | Field::ZoneName(_)
    )
}

/// Up to `width` digits from the front of `rest`, as written.
fn digits_text<'a>(rest: &mut &'a str, width: usize) -> Result<&'a str, String> {
    let run = rest.bytes().take_while(u8::is_ascii_digit).count().min(width);
    if run == 0 {
        return Err(format!("invalid value \"{rest}\" for a fraction of a second"));
    }
    let (digits, after) = rest.split_at(run);
    *rest = after;
    Ok(digits)
}

/// Fraction digits `digits` as microseconds (`"12"` of milliseconds is 120 ms).
fn scaled(digits: &str, width: u32) -> Result<u32, String> {
    let n: u32 = digits.parse().map_err(|_| format!("invalid value \"{digits}\""))?;
    let n = n * 10u32.pow(width - digits.len() as u32);
    Ok(if width == 3 { n * 1000 } else { n })
}

impl Parsed {
    fn finish(self) -> Result<(NaiveDateTime, Option<i32>), String> {
        let date = match (self.julian, self.day_of_year) {
            (Some(j), _) => NaiveDate::from_num_days_from_ce_opt((j - 1_721_425) as i32),
            (None, Some(doy)) => NaiveDate::from_yo_opt(self.year_ce()? as i32, doy),
            (None, None) => NaiveDate::from_ymd_opt(
                self.year_ce()? as i32,
                self.month.unwrap_or(1),
                self.day.unwrap_or(1),
            ),
        };
        let date = date.ok_or_else(|| "date/time field value out of range".to_owned())?;
        let mut hour = self.hour;
        if self.twelve_hour || self.pm.is_some() {
            if !(1..=12).contains(&hour) {
                return Err(format!(
                    "hour \"{hour}\" is invalid for the 12-hour clock (use HH24 for the 24-hour clock)"
                ));
            }
            hour = match (hour, self.pm == Some(true)) {
                (12, false) => 0,
                (12, true) => 12,
                (h, true) => h + 12,
                (h, false) => h,
            };
        }
        let time = date.and_hms_micro_opt(hour, self.minute, self.second, self.micros);
        let time = time.ok_or_else(|| "date/time field value out of range".to_owned())?;
        Ok((time, self.offset))
    }

    /// The year as the proleptic calendar counts it (1 BC is year 0).
    fn year_ce(&self) -> Result<i64, String> {
        // No year read: year 0, 1 BC, as in Postgres.
        let Some(year) = self.year else { return Ok(0) };
        Ok(match self.bc || year < 0 {
            true => 1 - year.abs(),
            false if year == 0 => {
                return Err("cannot calculate day of year without year information".into());
            }
            false => year,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f").unwrap()
    }

    #[test]
    fn prints_intervals_as_postgres() {
        // Postgres 15's answers: (months, days, microseconds), template, text.
        let minus = -(5 * 3_600_000_000 + 6 * 60_000_000 + 7_123_456);
        for ((months, days, micros), template, printed) in [
            ((0, 1, 7_384_500_000), "HH24:MI:SS.MS AM", "02:03:04.500 AM"),
            ((-1, -3, minus), "HH24:MI:SS", "-05:-06:-07"),
            ((-1, -3, minus), "HH12:MI:SS.MS US FF1 SSSS", "-05:-06:-07.-123 -123456 -1 -18367"),
            ((-1, -3, minus), "YYYY-MM-DD DDD WW W Q", "0000--01--3 -33 -3 1 1"),
            ((-1, -3, minus), "FMDDth HH24th", "-3rd -05th"),
            ((0, 0, 109_800_000_000), "HH24:MI FMHH24 \"h\" HH12 PM", "30:30 30 h 06 AM"),
            ((26, 40, 46_800_000_000), "YYYY-MM-DD DDD WW W Q CC", "0002-02-40 820 118 6 1 00"),
            ((28_143, 0, 0), "Y,YYY YYY YY Y CC", "2,345 345 45 5 23"),
            ((0, 0, 0), "MM Q|", "00 |"),
        ] {
            let text = print_interval(&tokens(template), months, days, micros).unwrap();
            assert_eq!(text, printed, "{template}");
        }
        for template in ["Month", "Day", "D", "TZ", "AD", "IW", "J", "RM"] {
            let err = print_interval(&tokens(template), 0, 1, 0).unwrap_err();
            assert!(err.contains("not tied to specific calendar dates"), "{template}: {err}");
        }
    }

    #[test]
    fn prints_as_postgres() {
        // Postgres 15's answers.
        let t = at("2024-03-05 14:07:09.123456");
        for (template, printed) in [
            ("YYYY-MM-DD HH24:MI:SS.MS US HH12 AM", "2024-03-05 14:07:09.123 123456 02 PM"),
            ("Mon Month| Dy Day|", "Mar March    | Tue Tuesday  |"),
            ("DDD D WW Q YY FMDD FMMonth|", "065 3 10 1 24 5 March|"),
            ("\"lit\" TZ", "lit "),
            ("FMDDth \"of\" FMMonth, YYYY", "5th of March, 2024"),
            ("Y,YYY J CC IW ID IYYY rm", "2,024 2460375 21 10 2 2024 iii "),
            ("HH:MI a.m. SSSS", "02:07 p.m. 50829"),
            ("YYYYMMDD\\YFF2", "20240305\\412"),
            ("IDDD W DAY day MONTH", "065 1 TUESDAY   tuesday   MARCH    "),
        ] {
            assert_eq!(print(&tokens(template), t, None), printed, "{template}");
        }
        assert_eq!(print(&tokens("TZ OF"), t, Some(("UTC", 0))), "UTC +00");
        assert_eq!(print(&tokens("YYYY BC"), at("0000-01-01 00:00:00"), None), "0001 BC");
    }

    #[test]
    fn reads_as_postgres() {
        let read = |template: &str, text: &str| parse(&tokens(template), text).map(|r| r.0);
        assert_eq!(read("YYYY-MM-DD", "2024-01-02"), Ok(at("2024-01-02 00:00:00")));
        assert_eq!(read("YYYY-MM-DD", "2024-1-2"), Ok(at("2024-01-02 00:00:00")));
        assert_eq!(read("YYYYMMDD", "20240102"), Ok(at("2024-01-02 00:00:00")));
        assert_eq!(
            read("YYYY-MM-DD HH24:MI:SS.US", "2024-01-02 10:11:12.5"),
            Ok(at("2024-01-02 10:11:12.5"))
        );
        assert_eq!(
            read("DD Mon YYYY HH12:MI AM", "05 mar 2024 12:30 AM"),
            Ok(at("2024-03-05 00:30:00"))
        );
        assert_eq!(read("FMMonth DD, YYYY", "March 5, 2024"), Ok(at("2024-03-05 00:00:00")));
        assert_eq!(read("YYYY-DDD", "2024-065"), Ok(at("2024-03-05 00:00:00")));
        assert_eq!(read("J", "2460375"), Ok(at("2024-03-05 00:00:00")));
        assert!(read("YYYY-MM-DD", "2024-13-02").is_err());
        assert!(read("YYYY-MM-DD", "x").is_err());
        let (_, offset) =
            parse(&tokens("YYYY-MM-DD HH24:MI OF"), "2024-01-02 10:00 -05:30").unwrap();
        assert_eq!(offset, Some(-(5 * 3600 + 30 * 60)));
    }
}
