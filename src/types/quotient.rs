//! Numeric division as Postgres computes it: the quotient's scale depends on the values.
//!
//! Postgres divides two numerics (`a / b`, and every `avg`, which is `sum / count`) to
//! `rscale` fraction digits, rounded half away from zero, where (`select_div_scale`)
//!
//! ```text
//! w1, w2     the base-10000 weights of a and b (a in [10000^w1, 10000^(w1+1)))
//! f1, f2     their first base-10000 digits (1..9999; 0 for a zero a)
//! qweight    w1 - w2, less one when f1 <= f2 (the quotient's weight, as estimated)
//! rscale     max(16 - 4 * qweight, dscale(a), dscale(b), 0)
//! ```
//!
//! so a quotient has at least 16 significant digits: `10 / 3` is `3.3333333333333333`,
//! `1 / 1` is `1.00000000000000000000`, `avg` of `1.5` and `2` is `1.7500000000000000`.
//!
//! Sluice computes the same digits and holds them in [`TYPE`], `numeric(75, 20)`: a quotient
//! whose `rscale` is above 20 (one below `0.0001`) is rounded at 20 digits. The type prints as
//! a quotient ([`crate::types::numeric::Digits::Quotient`]): with `16 - 4 * weight` fraction
//! digits, the weight being the quotient's own, and never fewer than its digits. That is
//! Postgres's text except where Postgres's estimated weight is one less than the quotient's
//! (the two first digits equal, as in `1 / 1`): there it prints four more zeros.

use arrow::datatypes::{DataType as ArrowType, i256};
use num_bigint::BigInt;

/// The type of a quotient: an unconstrained numeric of 20 fraction digits that prints as a
/// quotient (see the module docs).
pub const TYPE: ArrowType = ArrowType::Decimal256(PRECISION, SCALE);

/// [`TYPE`]'s precision: one digit less than the most, which marks the type.
pub const PRECISION: u8 = crate::types::numeric::MAX_PRECISION - 1;

/// [`TYPE`]'s scale.
pub const SCALE: i8 = 20;

/// Postgres's least significant digits of a quotient.
const MIN_SIG_DIGITS: i32 = 16;

/// Why a division has no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DivError {
    /// The divisor is zero (22012).
    ByZero,
    /// The quotient has more than [`PRECISION`] digits (22003).
    Overflow,
}

/// A numeric operand: its stored value, the scale it is stored at and its display scale (the
/// fraction digits it prints with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operand {
    /// The value times `10^scale`.
    pub value: i256,
    /// Fraction digits of `value`.
    pub scale: i8,
    /// Fraction digits it prints with (Postgres's `dscale`).
    pub dscale: i32,
}

impl Operand {
    /// The stored `value` of a decimal of `scale` whose values print as `digits`.
    pub fn of(value: i256, scale: i8, digits: crate::types::numeric::Digits) -> Self {
        let dscale = crate::types::numeric::display_scale(value, scale, digits);
        Self { value, scale, dscale }
    }
}

/// `sum / count` as Postgres's `avg` computes it (a division of numerics), at [`SCALE`]: the
/// sum of values stored at `scale` that print as `digits`; `None` for no values.
pub fn average(
    sum: i256,
    scale: i8,
    digits: crate::types::numeric::Digits,
    count: u64,
) -> Result<Option<i256>, DivError> {
    if count == 0 {
        return Ok(None);
    }
    let count = Operand { value: i256::from_i128(i128::from(count)), scale: 0, dscale: 0 };
    divide(&Operand::of(sum, scale, digits), &count, SCALE).map(Some)
}

/// `10^n`.
fn pow10(n: u32) -> i256 {
    i256::from_i128(10).wrapping_pow(n)
}

/// Decimal digits of `v` (at least 0; `0` has none).
fn digits(v: i256) -> u32 {
    let v = v.wrapping_abs();
    if let Some(small) = v.to_i128() {
        return small.checked_ilog10().map_or(0, |l| l + 1);
    }
    let high = v / pow10(38);
    38 + high.to_i128().and_then(|h| h.checked_ilog10()).map_or(0, |l| l + 1)
}

/// The base-10000 weight and first base-10000 digit of `value / 10^scale` (`(0, 0)` for zero),
/// as Postgres's `NumericVar` holds them.
pub fn weight_and_first_digit(value: i256, scale: i8) -> (i32, u32) {
    let n = digits(value) as i32;
    if n == 0 {
        return (0, 0);
    }
    // The power of ten of the leading digit, then the base-10000 group it falls in.
    let exponent = n - 1 - i32::from(scale);
    let weight = exponent.div_euclid(4);
    let leading = exponent - 4 * weight + 1;
    // The group's digits below the stored ones are zeros (`3` at scale 10 is group `0300`).
    let first = match n >= leading {
        true => value.wrapping_abs() / pow10((n - leading) as u32),
        false => value.wrapping_abs() * pow10((leading - n) as u32),
    };
    (weight, first.as_i128() as u32)
}

/// Postgres's `select_div_scale`: the fraction digits of `a / b` (see the module docs).
pub fn select_div_scale(a: &Operand, b: &Operand) -> i32 {
    let (w1, f1) = weight_and_first_digit(a.value, a.scale);
    let (w2, f2) = weight_and_first_digit(b.value, b.scale);
    let qweight = w1 - w2 - i32::from(f1 <= f2);
    (MIN_SIG_DIGITS - 4 * qweight).max(a.dscale).max(b.dscale).clamp(0, 1000)
}

/// The fraction digits a quotient stored at `scale` prints with: `16 - 4 * weight` (all of
/// them for zero), never fewer than its own digits nor more than `scale`.
pub fn display_scale(value: i256, scale: i8) -> i32 {
    let scale = i32::from(scale);
    let own = own_digits(value, scale);
    let wanted = match value == i256::ZERO {
        true => scale,
        false => MIN_SIG_DIGITS - 4 * weight_and_first_digit(value, scale as i8).0,
    };
    wanted.clamp(own, scale.max(own))
}

/// The fraction digits of `value / 10^scale` without trailing zeros.
pub fn own_digits(value: i256, scale: i32) -> i32 {
    let mut digits = scale.max(0);
    let mut v = value;
    let ten = i256::from_i128(10);
    while digits > 0 && v % ten == i256::ZERO {
        v /= ten;
        digits -= 1;
    }
    digits
}

/// `a / b` as Postgres computes it (see the module docs), stored at `out_scale`: rounded half
/// away from zero at `min(rscale, out_scale)` digits.
pub fn divide(a: &Operand, b: &Operand, out_scale: i8) -> Result<i256, DivError> {
    if b.value == i256::ZERO {
        return Err(DivError::ByZero);
    }
    let digits = select_div_scale(a, b).min(i32::from(out_scale));
    // a/10^sa / (b/10^sb) * 10^digits = a * 10^(sb + digits - sa) / b.
    let exponent = i32::from(b.scale) + digits - i32::from(a.scale);
    let quotient = match fast_quotient(a.value, b.value, exponent) {
        Some(q) => q,
        None => wide_quotient(a.value, b.value, exponent)?,
    };
    let widened = quotient
        .checked_mul(pow10((i32::from(out_scale) - digits) as u32))
        .ok_or(DivError::Overflow)?;
    match widened.wrapping_abs() < pow10(u32::from(PRECISION)) {
        true => Ok(widened),
        false => Err(DivError::Overflow),
    }
}

/// `round(a * 10^exponent / b)` in 256 bits, `None` where that overflows.
fn fast_quotient(a: i256, b: i256, exponent: i32) -> Option<i256> {
    let (num, den) = match exponent >= 0 {
        true => (a.checked_mul(i256::from_i128(10).checked_pow(exponent as u32)?)?, b),
        false => (a, b.checked_mul(i256::from_i128(10).checked_pow((-exponent) as u32)?)?),
    };
    let (q, r) = (num.checked_div(den)?, num.checked_rem(den)?);
    // Half away from zero: |2r| >= |den| rounds the magnitude up.
    let twice = r.checked_mul(i256::from_i128(2))?.checked_abs()?;
    match twice >= den.checked_abs()? {
        true => {
            let away = if (num < i256::ZERO) != (den < i256::ZERO) { -1 } else { 1 };
            q.checked_add(i256::from_i128(away))
        }
        false => Some(q),
    }
}

/// [`fast_quotient`] in as many bits as it takes.
fn wide_quotient(a: i256, b: i256, exponent: i32) -> Result<i256, DivError> {
    let big = |v: i256| BigInt::from_signed_bytes_be(&v.to_be_bytes());
    let ten = BigInt::from(10);
    let (num, den) = match exponent >= 0 {
        true => (big(a) * ten.pow(exponent as u32), big(b)),
        false => (big(a), big(b) * ten.pow((-exponent) as u32)),
    };
    let (q, r) = (&num / &den, &num % &den);
    let twice: BigInt = r * 2;
    let q = match twice.magnitude() >= den.magnitude() {
        true if num.sign() != den.sign() => q - 1,
        true => q + 1,
        false => q,
    };
    let bytes = q.to_signed_bytes_be();
    if bytes.len() > 32 {
        return Err(DivError::Overflow);
    }
    let fill = if q.sign() == num_bigint::Sign::Minus { 0xFF } else { 0 };
    let mut word = [fill; 32];
    word[32 - bytes.len()..].copy_from_slice(&bytes);
    Ok(i256::from_be_bytes(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An operand from its text (`"-1.50"`: value -150, scale 2, dscale 2).
    fn operand(text: &str) -> Operand {
        let dscale = text.split_once('.').map_or(0, |(_, f)| f.len() as i32);
        let value = i256::from_string(&text.replace('.', "")).expect("a number");
        Operand { value, scale: dscale as i8, dscale }
    }

    /// The quotient as Postgres prints it, from Sluice's digits and display rule.
    fn quotient(a: &str, b: &str) -> String {
        let q = divide(&operand(a), &operand(b), SCALE).expect("a quotient");
        crate::types::numeric::text(q, SCALE, crate::types::numeric::Digits::Quotient)
    }

    /// Postgres 15's answers (`SELECT a::numeric / b::numeric`).
    #[test]
    fn quotients_have_postgres_digits() {
        let table = [
            ("10", "3", "3.3333333333333333"),
            ("2", "1", "2.0000000000000000"),
            ("1", "3", "0.33333333333333333333"),
            ("-2", "3", "-0.66666666666666666667"),
            ("2", "-3", "-0.66666666666666666667"),
            ("100000.5", "2", "50000.250000000000"),
            ("6.875", "3", "2.2916666666666667"),
            ("13.500", "3", "4.5000000000000000"),
            ("6.50", "3", "2.1666666666666667"),
            ("7", "3", "2.3333333333333333"),
            ("70", "3", "23.3333333333333333"),
            ("1.123456789012345678", "7", "0.16049382700176366829"),
            ("123456789012345678901234", "7", "17636684144620811271605"),
            ("0", "3", "0.00000000000000000000"),
            // Postgres: 0.000033333333333333333333 (24 digits); Sluice holds 20.
            ("1", "30000", "0.00003333333333333333"),
            ("5", "0.001", "5000.0000000000000000"),
        ];
        for (a, b, want) in table {
            assert_eq!(quotient(a, b), want, "{a} / {b}");
        }
    }

    #[test]
    fn the_scale_follows_postgres_estimate_of_the_weight() {
        // Equal first digits: the estimate is one less, four more digits (1 / 1 prints
        // 1.00000000000000000000 in Postgres; stored, the value is 1).
        assert_eq!(select_div_scale(&operand("1"), &operand("1")), 20);
        assert_eq!(select_div_scale(&operand("2"), &operand("1")), 16);
        assert_eq!(select_div_scale(&operand("1.50"), &operand("1")), 20);
        assert_eq!(select_div_scale(&operand("3.0"), &operand("2")), 16);
        assert_eq!(select_div_scale(&operand("38250.00"), &operand("1500")), 16);
        assert_eq!(select_div_scale(&operand("382500.00"), &operand("15")), 12);
        assert_eq!(weight_and_first_digit(i256::from_i128(123456), 0), (1, 12));
        assert_eq!(weight_and_first_digit(i256::from_i128(5), 5), (-2, 5000));
        assert_eq!(weight_and_first_digit(i256::from_i128(-15), 1), (0, 1));
        assert_eq!(weight_and_first_digit(i256::from_i128(3), 10), (-3, 300));
    }

    #[test]
    fn division_by_zero_and_overflow_are_errors() {
        assert_eq!(divide(&operand("1"), &operand("0"), SCALE), Err(DivError::ByZero));
        let huge = Operand { value: pow10(74), scale: 0, dscale: 0 };
        assert_eq!(divide(&huge, &operand("0.01"), SCALE), Err(DivError::Overflow));
        // Wider than 256 bits on the way, not at the end: 10^30 / 1.000..0 (30 zeros).
        let big = Operand { value: pow10(50), scale: 20, dscale: 20 };
        let one = Operand { value: pow10(30), scale: 30, dscale: 30 };
        assert_eq!(divide(&big, &one, SCALE), Ok(pow10(50)));
        let third = Operand { value: -pow10(30) * i256::from_i128(3), scale: 30, dscale: 30 };
        let q = divide(&big, &third, SCALE).unwrap();
        assert_eq!(q, -(pow10(50) / i256::from_i128(3)));
    }
}
