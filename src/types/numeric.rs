//! Sluice's `numeric`: Arrow decimals of up to 76 digits (`Decimal128` up to 38, `Decimal256`
//! beyond), with Postgres's special values `NaN`, `Infinity` and `-Infinity`.
//!
//! The special values are the three largest-magnitude values of the Arrow type, as infinite
//! dates and timestamps are (see [`crate::types::infinite_date`]): `NaN` is the largest value,
//! `Infinity` the next, `-Infinity` the smallest. They lie far outside every precision, so no
//! number collides with them, and they order as Postgres orders numerics (`-Infinity` < every
//! number < `Infinity` < `NaN`, and `NaN` equals `NaN`), in keys, sorts and comparisons. They
//! print, and go out in binary, as Postgres writes them. Arithmetic on them is not Postgres's
//! (documented in docs/sql.md).
//!
//! An unconstrained `numeric` is [`crate::types::DEFAULT_NUMERIC`]; its values print with their
//! own digits (`1.5`, not `1.50000000000000000000`), see [`is_unconstrained`].

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, Decimal128Array, Decimal256Array, Float64Array,
    StringArray,
};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType as ArrowType, Decimal128Type, Decimal256Type, i256};

use crate::error::{Error, Result};
use crate::types::{CastMode, DataType};

/// The most digits a Sluice numeric holds (Arrow's `Decimal256`).
pub const MAX_PRECISION: u8 = 76;

/// One of Postgres's numeric values that are not numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// `NaN`: greater than every other value, equal to itself.
    NaN,
    /// `Infinity`
    Infinity,
    /// `-Infinity`
    NegInfinity,
}

impl Special {
    /// The special value `text` spells, as Postgres reads it (any case, `inf` too).
    pub fn parse(text: &str) -> Option<Special> {
        let text = text.trim();
        let (negative, word) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let infinite = word.eq_ignore_ascii_case("infinity") || word.eq_ignore_ascii_case("inf");
        match (negative, infinite) {
            (false, false) if text.eq_ignore_ascii_case("nan") => Some(Special::NaN),
            (false, true) => Some(Special::Infinity),
            (true, true) => Some(Special::NegInfinity),
            _ => None,
        }
    }

    /// As Postgres prints it.
    pub fn text(self) -> &'static str {
        match self {
            Special::NaN => "NaN",
            Special::Infinity => "Infinity",
            Special::NegInfinity => "-Infinity",
        }
    }

    /// The stored value in a `Decimal128` column.
    pub fn as_i128(self) -> i128 {
        match self {
            Special::NaN => i128::MAX,
            Special::Infinity => i128::MAX - 1,
            Special::NegInfinity => i128::MIN,
        }
    }

    /// The stored value in a `Decimal256` column.
    pub fn as_i256(self) -> i256 {
        match self {
            Special::NaN => i256::MAX,
            Special::Infinity => i256::MAX.wrapping_sub(i256::ONE),
            Special::NegInfinity => i256::MIN,
        }
    }

    /// The special value a stored `Decimal128` value stands for, if it is one.
    pub fn of_i128(v: i128) -> Option<Special> {
        [Special::NaN, Special::Infinity, Special::NegInfinity]
            .into_iter()
            .find(|s| s.as_i128() == v)
    }

    /// The special value a stored `Decimal256` value stands for, if it is one.
    pub fn of_i256(v: i256) -> Option<Special> {
        [Special::NaN, Special::Infinity, Special::NegInfinity]
            .into_iter()
            .find(|s| s.as_i256() == v)
    }
}

/// Whether a decimal of this precision and scale is an unconstrained `numeric`: Sluice's
/// ([`crate::types::DEFAULT_NUMERIC`]) or DataFusion's own default (38, 10).
pub fn is_unconstrained(precision: u8, scale: i8) -> bool {
    (precision, scale) == crate::types::DEFAULT_NUMERIC
        || (precision, scale) == (38, 10)
        || is_quotient(precision, scale)
}

/// Whether a decimal of this precision and scale is a quotient ([`crate::types::quotient`]).
pub fn is_quotient(precision: u8, scale: i8) -> bool {
    (precision, scale) == (crate::types::quotient::PRECISION, crate::types::quotient::SCALE)
}

/// Whether values of this decimal type print with their own digits, as Postgres prints an
/// unconstrained numeric's: an unconstrained numeric and any result of arithmetic on one (whose
/// precision is the most, 76).
pub fn prints_own_digits(precision: u8, scale: i8) -> bool {
    digits_of(precision, scale) == Digits::Own
}

/// How many fraction digits the values of a decimal type print with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Digits {
    /// The type's scale (a constrained `numeric(p, s)`).
    Scale,
    /// The value's own, without trailing zeros (an unconstrained numeric, arithmetic on one).
    Own,
    /// A quotient's, at least 16 significant ([`crate::types::quotient::display_scale`]).
    Quotient,
}

/// How the values of `numeric(precision, scale)` print.
pub fn digits_of(precision: u8, scale: i8) -> Digits {
    if is_quotient(precision, scale) {
        Digits::Quotient
    } else if precision == MAX_PRECISION || is_unconstrained(precision, scale) {
        Digits::Own
    } else {
        Digits::Scale
    }
}

/// The fraction digits `v` (stored at `scale`) prints with (Postgres's display scale).
pub fn display_scale(v: i256, scale: i8, digits: Digits) -> i32 {
    match digits {
        Digits::Scale => i32::from(scale.max(0)),
        Digits::Own => crate::types::quotient::own_digits(v, i32::from(scale)),
        Digits::Quotient => crate::types::quotient::display_scale(v, scale),
    }
}

/// The values of a decimal column (`Decimal128` or `Decimal256`) as `i256`, `None` for NULL.
pub fn values(column: &dyn Array) -> Vec<Option<i256>> {
    match column.data_type() {
        ArrowType::Decimal128(..) => column
            .as_primitive::<Decimal128Type>()
            .iter()
            .map(|v| {
                v.map(|v| match Special::of_i128(v) {
                    Some(s) => s.as_i256(),
                    None => i256::from_i128(v),
                })
            })
            .collect(),
        ArrowType::Decimal256(..) => column.as_primitive::<Decimal256Type>().iter().collect(),
        other => unreachable!("a decimal column, found {other}"),
    }
}

/// Whether a decimal column holds a special value.
pub fn has_special(column: &dyn Array) -> bool {
    // A scan of the raw values first (a NULL's slot may hold anything, so a hit is checked).
    match column.data_type() {
        ArrowType::Decimal128(..) => {
            let values = column.as_primitive::<Decimal128Type>();
            let special = |v: i128| v >= i128::MAX - 1 || v == i128::MIN;
            values.values().iter().any(|&v| special(v))
                && values.iter().any(|v| v.is_some_and(special))
        }
        ArrowType::Decimal256(..) => column
            .as_primitive::<Decimal256Type>()
            .iter()
            .any(|v| v.is_some_and(|v| Special::of_i256(v).is_some())),
        _ => false,
    }
}

/// An error when a decimal column holds a value beyond its precision that is not a special
/// value: what arithmetic or an aggregate over `NaN` or an infinity gives, as Sluice computes
/// them on the values that stand for them (Postgres gives `NaN` or an infinity).
pub fn check_range(column: &dyn Array) -> Result<()> {
    let beyond = match column.data_type() {
        ArrowType::Decimal128(p, _) => {
            let limit = 10i128.pow(u32::from(*p));
            let beyond = |v: &i128| Special::of_i128(*v).is_none() && (*v >= limit || *v <= -limit);
            column.as_primitive::<Decimal128Type>().iter().flatten().any(|v| beyond(&v))
        }
        ArrowType::Decimal256(p, _) => {
            let Some(limit) = i256::from_i128(10).checked_pow(u32::from(*p)) else {
                return Ok(());
            };
            let beyond = |v: &i256| {
                Special::of_i256(*v).is_none() && (*v >= limit || *v <= limit.wrapping_neg())
            };
            column.as_primitive::<Decimal256Type>().iter().flatten().any(|v| beyond(&v))
        }
        _ => false,
    };
    match beyond {
        false => Ok(()),
        true => Err(Error::OutOfRange(
            "numeric result out of range: arithmetic or an aggregate over NaN or Infinity \
             (Sluice stores, compares and prints them, but does not compute with them yet)"
                .into(),
        )),
    }
}

/// `column` with its special values as NULL, when it is a decimal column holding any: what a
/// view's `sum` and `avg` add up (see docs/sql.md; Postgres's result would be `NaN` or an
/// infinity, which Sluice's aggregates do not compute yet).
pub fn specials_as_null(column: ArrayRef) -> ArrayRef {
    if !has_special(column.as_ref()) {
        return column;
    }
    let specials: Vec<Option<Special>> =
        values(column.as_ref()).into_iter().map(|v| v.and_then(Special::of_i256)).collect();
    tracing::warn!(
        values = specials.iter().flatten().count(),
        "a sum or average in a view leaves out numeric NaN and infinite values"
    );
    without_specials(&column, &specials)
}

/// `column` (decimal) with NULL where `specials` has a special value.
fn without_specials(column: &ArrayRef, specials: &[Option<Special>]) -> ArrayRef {
    let nulls: NullBuffer =
        specials.iter().enumerate().map(|(i, s)| s.is_none() && column.is_valid(i)).collect();
    arrow::array::make_array(
        column.to_data().into_builder().nulls(Some(nulls)).build().expect("same layout"),
    )
}

/// An error (22003, as Postgres's) when a constrained `numeric(precision, scale)` would hold an
/// infinity among `specials`; `NaN` it holds.
fn holds_specials(precision: u8, scale: i8, specials: &[Option<Special>]) -> Result<()> {
    let infinite =
        |s: &Option<Special>| matches!(s, Some(Special::Infinity | Special::NegInfinity));
    if is_unconstrained(precision, scale) || !specials.iter().any(infinite) {
        return Ok(());
    }
    Err(Error::OutOfRange(format!(
        "numeric field overflow: a field with precision {precision}, scale {scale} cannot hold \
         an infinite value"
    )))
}

/// A number's digits with the point `scale` digits from the right (`-0.05` for -5 at scale 2).
pub fn number_text(v: i256, scale: i8) -> String {
    let negative = v < i256::ZERO;
    let digits = v.wrapping_abs().to_string();
    let digits = digits.trim_start_matches('-');
    let scale = scale.max(0) as usize;
    let sign = if negative { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

/// A stored value as Postgres prints it: its special word, or its digits, as many fraction
/// digits as `digits` says.
pub fn text(v: i256, scale: i8, digits: Digits) -> String {
    if let Some(special) = Special::of_i256(v) {
        return special.text().to_owned();
    }
    let text = number_text(v, scale);
    let cut = (i32::from(scale.max(0)) - display_scale(v, scale, digits)).max(0) as usize;
    match cut {
        0 => text,
        n if n == scale as usize => text[..text.len() - n - 1].to_owned(),
        n => text[..text.len() - n].to_owned(),
    }
}

/// The precision and scale of a decimal column.
fn precision_and_scale(column: &dyn Array) -> (u8, i8) {
    match column.data_type() {
        ArrowType::Decimal128(p, s) | ArrowType::Decimal256(p, s) => (*p, *s),
        other => unreachable!("a decimal column, found {other}"),
    }
}

/// A decimal column's values as Postgres prints them.
pub fn texts(column: &dyn Array) -> StringArray {
    let (precision, scale) = precision_and_scale(column);
    let digits = digits_of(precision, scale);
    values(column).into_iter().map(|v| v.map(|v| text(v, scale, digits))).collect()
}

/// A decimal column's values as floats, each the float nearest its exact value (as Postgres
/// reads a numeric's text into a float), `NaN` and the infinities included. Arrow's cast
/// divides by the scale in floating point: `2.500000000000000000000000` became
/// `2.5000000000000004`.
pub fn floats(column: &dyn Array) -> Float64Array {
    let (_, scale) = precision_and_scale(column);
    values(column).into_iter().map(|v| v.map(|v| to_f64(v, scale))).collect()
}

/// The float nearest the decimal `v` of `scale` (see [`floats`]).
pub fn to_f64(v: i256, scale: i8) -> f64 {
    if let Some(special) = Special::of_i256(v) {
        return match special {
            Special::NaN => f64::NAN,
            Special::Infinity => f64::INFINITY,
            Special::NegInfinity => f64::NEG_INFINITY,
        };
    }
    // Both exact as floats: their quotient is correctly rounded.
    const EXACT: i128 = 1 << 53;
    if let Some(small) = v.to_i128().filter(|n| n.abs() < EXACT)
        && (0..=22).contains(&scale)
    {
        return small as f64 / 10f64.powi(i32::from(scale));
    }
    number_text(v, scale).parse().unwrap_or(f64::NAN)
}

/// A decimal column's values in Postgres's binary form: `ndigits`, `weight`, `sign`, `dscale`
/// (16 bits each, big-endian), then `ndigits` base-10000 digits, the first worth
/// 10000^`weight`.
pub fn binaries(column: &dyn Array) -> BinaryArray {
    let (precision, scale) = precision_and_scale(column);
    let digits = digits_of(precision, scale);
    values(column).into_iter().map(|v| v.map(|v| binary(v, scale, digits))).collect()
}

/// One value in Postgres's binary form (see [`binaries`]).
pub fn binary(v: i256, scale: i8, digits: Digits) -> Vec<u8> {
    let header = |ndigits: u16, weight: i16, sign: u16, dscale: u16| {
        let mut out = Vec::with_capacity(8 + 2 * ndigits as usize);
        for word in [ndigits, weight as u16, sign, dscale] {
            out.extend_from_slice(&word.to_be_bytes());
        }
        out
    };
    match Special::of_i256(v) {
        Some(Special::NaN) => return header(0, 0, 0xC000, 0),
        Some(Special::Infinity) => return header(0, 0, 0xD000, 0),
        Some(Special::NegInfinity) => return header(0, 0, 0xF000, 0),
        None => {}
    }
    let printed = text(v, scale, digits);
    let (sign, unsigned) = match printed.strip_prefix('-') {
        Some(rest) => (0x4000, rest),
        None => (0, printed.as_str()),
    };
    let (int, frac) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let int = int.trim_start_matches('0');
    let dscale = frac.len() as u16;
    // Base-10000 groups aligned on the point: the integer part padded on the left, the
    // fraction on the right.
    let int = format!("{}{int}", "0".repeat((4 - int.len() % 4) % 4));
    let frac = format!("{frac}{}", "0".repeat((4 - frac.len() % 4) % 4));
    let group = |s: &str| s.parse::<u16>().expect("four digits");
    let mut groups: Vec<u16> = (0..int.len()).step_by(4).map(|i| group(&int[i..i + 4])).collect();
    let mut weight = groups.len() as i16 - 1;
    groups.extend((0..frac.len()).step_by(4).map(|i| group(&frac[i..i + 4])));
    let leading = groups.iter().take_while(|&&g| g == 0).count();
    groups.drain(..leading);
    weight -= leading as i16;
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        return header(0, 0, 0, dscale);
    }
    let mut out = header(groups.len() as u16, weight, sign, dscale);
    for g in groups {
        out.extend_from_slice(&g.to_be_bytes());
    }
    out
}

/// Text holding numbers and special values, cast to `numeric(precision, scale)`: the numbers
/// as Arrow reads them (in `mode`), the special values as theirs. A constrained numeric holds
/// `NaN` but not the infinities, as in Postgres (22003).
pub fn with_specials(
    text: &StringArray,
    precision: u8,
    scale: i8,
    mode: CastMode,
) -> Result<ArrayRef> {
    let specials: Vec<Option<Special>> = text.iter().map(|v| v.and_then(Special::parse)).collect();
    holds_specials(precision, scale, &specials)?;
    let numbers: StringArray =
        text.iter().zip(&specials).map(|(v, s)| v.filter(|_| s.is_none())).collect();
    let ty = DataType::Decimal { precision, scale };
    let cast = crate::types::cast_to(&(Arc::new(numbers) as ArrayRef), ty, mode)?;
    Ok(patched(&cast, &specials))
}

/// `column` (decimal) with the special values set where `specials` has them.
pub fn patched(column: &ArrayRef, specials: &[Option<Special>]) -> ArrayRef {
    let valid = |i: usize, s: &Option<Special>| s.is_some() || column.is_valid(i);
    let nulls: NullBuffer = specials.iter().enumerate().map(|(i, s)| valid(i, s)).collect();
    match column.data_type() {
        ArrowType::Decimal128(p, s) => {
            let values = column.as_primitive::<Decimal128Type>().values();
            let values = values.iter().zip(specials).map(|(v, s)| s.map_or(*v, Special::as_i128));
            let array = Decimal128Array::new(values.collect(), Some(nulls));
            Arc::new(array.with_precision_and_scale(*p, *s).expect("the column's own type"))
        }
        ArrowType::Decimal256(p, s) => {
            let values = column.as_primitive::<Decimal256Type>().values();
            let values = values.iter().zip(specials).map(|(v, s)| s.map_or(*v, Special::as_i256));
            let array = Decimal256Array::new(values.collect(), Some(nulls));
            Arc::new(array.with_precision_and_scale(*p, *s).expect("the column's own type"))
        }
        other => unreachable!("a decimal column, found {other}"),
    }
}

/// A decimal column holding special values, cast to another decimal type: the numbers as
/// Arrow casts them (`cast` does that), the special values kept.
pub fn cast_keeping_specials(
    column: &ArrayRef,
    to: DataType,
    cast: impl FnOnce(&ArrayRef) -> Result<ArrayRef>,
) -> Result<ArrayRef> {
    let specials: Vec<Option<Special>> =
        values(column.as_ref()).into_iter().map(|v| v.and_then(Special::of_i256)).collect();
    if let DataType::Decimal { precision, scale } = to {
        holds_specials(precision, scale, &specials)?;
    }
    let numbers = without_specials(column, &specials);
    Ok(patched(&cast(&numbers)?, &specials))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn i(v: i128) -> i256 {
        i256::from_i128(v)
    }

    #[test]
    fn a_numeric_becomes_the_float_nearest_its_value() {
        let big = |text: &str| i256::from_string(text).unwrap();
        assert_eq!(to_f64(big("2500000000000000000000000"), 24), 2.5, "not 2.5000000000000004");
        assert_eq!(to_f64(i256::from_i128(1), 1), 0.1);
        assert_eq!(to_f64(i256::from_i128(-7), 0), -7.0);
        let wide = big("1234567890123456789012345678901234567890");
        assert_eq!(
            to_f64(wide, 20),
            "12345678901234567890.1234567890123456789".parse::<f64>().unwrap()
        );
        assert!(to_f64(Special::NaN.as_i256(), 2).is_nan());
        assert_eq!(to_f64(Special::NegInfinity.as_i256(), 2), f64::NEG_INFINITY);
    }

    #[test]
    fn special_values_read_and_print_as_in_postgres() {
        for (text, special) in [
            ("NaN", Some(Special::NaN)),
            ("nan", Some(Special::NaN)),
            (" Infinity ", Some(Special::Infinity)),
            ("+inf", Some(Special::Infinity)),
            ("-Infinity", Some(Special::NegInfinity)),
            ("-nan", None),
            ("1.5", None),
            ("infinite", None),
        ] {
            assert_eq!(Special::parse(text), special, "{text}");
        }
        assert_eq!(text(Special::NaN.as_i256(), 2, Digits::Scale), "NaN");
        assert_eq!(text(Special::NegInfinity.as_i256(), 20, Digits::Own), "-Infinity");
    }

    #[test]
    fn special_values_order_as_in_postgres() {
        let mut values = [
            Special::NaN.as_i256(),
            i(5),
            Special::NegInfinity.as_i256(),
            Special::Infinity.as_i256(),
            i(-5),
        ];
        values.sort();
        let printed: Vec<String> = values.iter().map(|v| text(*v, 0, Digits::Scale)).collect();
        assert_eq!(printed, ["-Infinity", "-5", "5", "Infinity", "NaN"]);
        let mut narrow = [Special::NaN.as_i128(), 7, Special::Infinity.as_i128()];
        narrow.sort();
        assert_eq!(
            narrow.map(Special::of_i128),
            [None, Some(Special::Infinity), Some(Special::NaN)]
        );
    }

    #[test]
    fn numbers_print_with_the_scale_or_their_own_digits() {
        assert_eq!(text(i(-5), 2, Digits::Scale), "-0.05");
        assert_eq!(text(i(150), 2, Digits::Scale), "1.50");
        assert_eq!(text(i(150), 2, Digits::Own), "1.5");
        assert_eq!(text(i(100), 2, Digits::Own), "1");
        assert_eq!(text(i(0), 3, Digits::Own), "0");
        assert_eq!(text(i(42), 0, Digits::Own), "42");
        let big = i256::from_string(&"9".repeat(76)).unwrap();
        assert_eq!(text(big, 20, Digits::Scale).len(), 77);
    }

    /// Postgres's binary numeric (ndigits, weight, sign, dscale, digits).
    fn pg(ndigits: u16, weight: i16, sign: u16, dscale: u16, digits: &[u16]) -> Vec<u8> {
        let mut out = vec![];
        for w in [ndigits, weight as u16, sign, dscale].iter().chain(digits) {
            out.extend_from_slice(&w.to_be_bytes());
        }
        out
    }

    #[test]
    fn binary_form_is_postgres_s() {
        // Cases checked against Postgres's `numeric_send`.
        assert_eq!(binary(i(1250), 2, Digits::Scale), pg(2, 0, 0, 2, &[12, 5000]));
        assert_eq!(binary(i(-1), 8, Digits::Scale), pg(1, -2, 0x4000, 8, &[1]));
        assert_eq!(binary(i(1), 4, Digits::Scale), pg(1, -1, 0, 4, &[1]));
        assert_eq!(binary(i(30000), 0, Digits::Scale), pg(1, 1, 0, 0, &[3]));
        assert_eq!(binary(i(0), 2, Digits::Scale), pg(0, 0, 0, 2, &[]));
        assert_eq!(binary(i(150), 2, Digits::Own), pg(2, 0, 0, 1, &[1, 5000]));
        assert_eq!(binary(i(123456789), 0, Digits::Scale), pg(3, 2, 0, 0, &[1, 2345, 6789]));
        assert_eq!(binary(Special::NaN.as_i256(), 2, Digits::Scale), pg(0, 0, 0xC000, 0, &[]));
        assert_eq!(binary(Special::Infinity.as_i256(), 2, Digits::Scale), pg(0, 0, 0xD000, 0, &[]));
        assert_eq!(
            binary(Special::NegInfinity.as_i256(), 2, Digits::Scale),
            pg(0, 0, 0xF000, 0, &[])
        );
    }

    #[test]
    fn text_with_special_values_casts_to_numerics() {
        let text = StringArray::from(vec![Some("1.5"), Some("NaN"), None, Some("-Infinity")]);
        let (p, s) = crate::types::DEFAULT_NUMERIC;
        let cast = with_specials(&text, p, s, CastMode::Strict).unwrap();
        let printed: Vec<Option<String>> =
            texts(cast.as_ref()).iter().map(|v| v.map(str::to_owned)).collect();
        assert_eq!(
            printed,
            [Some("1.5".into()), Some("NaN".into()), None, Some("-Infinity".into())]
        );
        // A constrained numeric holds NaN, not the infinities.
        let nan = StringArray::from(vec!["NaN", "2"]);
        let cast = with_specials(&nan, 10, 2, CastMode::Strict).unwrap();
        assert_eq!(texts(cast.as_ref()).value(0), "NaN");
        assert_eq!(texts(cast.as_ref()).value(1), "2.00");
        let err = with_specials(&text, 10, 2, CastMode::Strict).unwrap_err();
        assert!(err.to_string().contains("cannot hold an infinite value"), "{err}");
    }
}
