//! Postgres's number templates for `to_char(number, template)`: `9` and `0` digit positions,
//! `.`/`D`, `,`/`G`, the sign patterns `S`, `MI`, `PL`, `SG`, `PR`, `FM` (no padding, no
//! trailing zeros in `9` places) and `TH`/`th`. `EEEE`, `V`, `RN` and `L` are refused by name.

/// One part of a number template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// `9` (`zero == false`) or `0`.
    Digit {
        zero: bool,
    },
    Point,
    Group,
    /// `S`, `MI`, `PL`, `SG`.
    Sign(&'static str),
    /// `TH` or `th`.
    Ordinal {
        upper: bool,
    },
    Literal(char),
}

/// A number template read once and used for every value.
#[derive(Debug, Clone)]
pub struct NumberTemplate {
    parts: Vec<Part>,
    fill: bool,
    brackets: bool,
}

impl NumberTemplate {
    /// Reads `template`; an error names a pattern Sluice does not print.
    pub fn new(template: &str) -> Result<NumberTemplate, String> {
        let (mut parts, mut fill, mut brackets) = (Vec::new(), false, false);
        let mut rest = template;
        while let Some(c) = rest.chars().next() {
            let upper = rest.to_ascii_uppercase();
            let (part, len) = match c {
                '9' => (Some(Part::Digit { zero: false }), 1),
                '0' => (Some(Part::Digit { zero: true }), 1),
                '.' => (Some(Part::Point), 1),
                ',' => (Some(Part::Group), 1),
                _ if upper.starts_with("FM") => {
                    fill = true;
                    (None, 2)
                }
                _ if upper.starts_with("PR") => {
                    brackets = true;
                    (None, 2)
                }
                _ if upper.starts_with("MI") => (Some(Part::Sign("MI")), 2),
                _ if upper.starts_with("PL") => (Some(Part::Sign("PL")), 2),
                _ if upper.starts_with("SG") => (Some(Part::Sign("SG")), 2),
                _ if upper.starts_with("TH") => {
                    (Some(Part::Ordinal { upper: rest.starts_with('T') }), 2)
                }
                _ if upper.starts_with("EEEE") || upper.starts_with("RN") => {
                    return Err(format!(
                        "to_char: the number pattern \"{}\" is not supported",
                        &rest[..if upper.starts_with("RN") { 2 } else { 4 }]
                    ));
                }
                'S' | 's' => (Some(Part::Sign("S")), 1),
                'D' | 'd' => (Some(Part::Point), 1),
                'G' | 'g' => (Some(Part::Group), 1),
                'V' | 'v' | 'L' | 'l' => {
                    return Err(format!("to_char: the number pattern \"{c}\" is not supported"));
                }
                c => (Some(Part::Literal(c)), c.len_utf8()),
            };
            parts.extend(part);
            rest = &rest[len..];
        }
        Ok(NumberTemplate { parts, fill, brackets })
    }

    fn positions(&self) -> (usize, usize) {
        let point = self.parts.iter().position(|p| *p == Part::Point).unwrap_or(self.parts.len());
        let count =
            |parts: &[Part]| parts.iter().filter(|p| matches!(p, Part::Digit { .. })).count();
        (count(&self.parts[..point]), count(&self.parts[point..]))
    }

    /// The number written in `text` (`-12.5`, as a numeric or float prints) by this template.
    pub fn print(&self, text: &str) -> String {
        let (int_places, frac_places) = self.positions();
        let (negative, mut int_digits, frac_digits) = rounded(text, frac_places);
        if int_digits.is_empty() && frac_places == 0 {
            int_digits = "0".to_owned();
        }
        let overflow = int_digits.len() > int_places;
        let first_digit = int_places.saturating_sub(int_digits.len());
        let digit_parts = self.parts.iter().filter(|p| matches!(p, Part::Digit { .. }));
        // Places from the first `0` on print zeros where the number has no digit.
        let first_zero = digit_parts
            .take(int_places)
            .position(|p| *p == Part::Digit { zero: true })
            .unwrap_or(int_places);
        // The sign that goes just before the number's first character: Postgres's default,
        // an `S` written before the digits, or `PR`'s bracket.
        let first_place =
            self.parts.iter().position(|p| matches!(p, Part::Digit { .. } | Part::Point));
        let leading_s = self.parts.iter().position(|p| *p == Part::Sign("S"));
        let leading_s = leading_s.filter(|&s| first_place.is_none_or(|d| s < d));
        let positional = self.parts.iter().enumerate().any(|(i, p)| {
            matches!(p, Part::Sign("MI" | "SG")) || (*p == Part::Sign("S") && Some(i) != leading_s)
        });
        let anchored = match (self.brackets, leading_s.is_some(), negative) {
            (true, _, true) => Some('<'),
            (false, true, true) => Some('-'),
            (false, true, false) => Some('+'),
            _ if positional => None,
            (false, false, true) => Some('-'),
            _ => (!self.fill).then_some(' '),
        };
        let mut sign = anchored;
        let mut out = String::new();
        let (mut int_index, mut frac_index, mut printed, mut after_point) = (0, 0, false, false);
        // In fill mode, trailing zeros in `9` fraction places go.
        let frac_keep = match self.fill {
            true => {
                let places = self.parts.iter().skip_while(|p| **p != Part::Point);
                let last_zero_place = places
                    .filter(|p| matches!(p, Part::Digit { .. }))
                    .enumerate()
                    .filter(|(_, p)| **p == Part::Digit { zero: true })
                    .map(|(i, _)| i + 1)
                    .last()
                    .unwrap_or(0);
                frac_digits.trim_end_matches('0').len().max(last_zero_place)
            }
            false => frac_places,
        };
        for (index, part) in self.parts.iter().enumerate() {
            match part {
                Part::Digit { .. } if !after_point => {
                    let i = int_index;
                    int_index += 1;
                    let c = if overflow {
                        Some('#')
                    } else if i >= first_digit {
                        Some(int_digits.as_bytes()[i - first_digit] as char)
                    } else if i >= first_zero {
                        Some('0')
                    } else {
                        None
                    };
                    match c {
                        Some(c) => {
                            out.extend(sign.take());
                            out.push(c);
                            printed = true;
                        }
                        None if !self.fill => out.push(' '),
                        None => {}
                    }
                }
                Part::Digit { .. } => {
                    let i = frac_index;
                    frac_index += 1;
                    match (overflow, i < frac_keep) {
                        (true, _) => out.push('#'),
                        (false, true) => out.push(frac_digits.as_bytes()[i] as char),
                        (false, false) if !self.fill => out.push(' '),
                        (false, false) => {}
                    }
                }
                Part::Point => {
                    out.extend(sign.take());
                    if self.fill && !printed && frac_keep == 0 {
                        // Fill mode leaves at least one digit: `0.`, not `.`.
                        out.push('0');
                    }
                    out.push('.');
                    after_point = true;
                }
                Part::Group => match (printed, self.fill) {
                    (true, _) => out.push(','),
                    (false, false) => out.push(' '),
                    (false, true) => {}
                },
                Part::Sign(_) if Some(index) == leading_s => {}
                Part::Sign(kind) => {
                    let c = match (*kind, negative) {
                        ("MI", false) | ("PL", true) => (!self.fill).then_some(' '),
                        (_, true) => Some('-'),
                        (_, false) => Some('+'),
                    };
                    out.extend(c);
                }
                Part::Ordinal { upper } => {
                    // The last two digits decide the suffix.
                    let tail = &int_digits[int_digits.len().saturating_sub(2)..];
                    let suffix = super::template::suffix(tail.parse().unwrap_or(0));
                    out.push_str(&if *upper { suffix.to_uppercase() } else { suffix.to_owned() });
                }
                Part::Literal(c) => out.push(*c),
            }
        }
        if let Some(sign) = sign {
            // Nothing printed where the sign goes: it goes first.
            out.insert(0, sign);
        }
        if self.brackets {
            match (negative, self.fill) {
                (true, _) => out.push('>'),
                (false, false) => out.push(' '),
                (false, true) => {}
            }
        }
        out
    }
}

/// `text` (digits with an optional `-` and `.`) rounded half away from zero to `places`
/// fraction digits: its sign, integer digits (none for 0) and exactly `places` fraction digits.
fn rounded(text: &str, places: usize) -> (bool, String, String) {
    let (negative, body) = match text.strip_prefix('-') {
        Some(body) => (true, body),
        None => (false, text),
    };
    let (int_part, frac_part) = body.split_once('.').unwrap_or((body, ""));
    let mut digits: Vec<u8> = int_part.bytes().map(|b| b - b'0').collect();
    let frac: Vec<u8> = frac_part.bytes().map(|b| b - b'0').collect();
    digits.extend(frac.iter().take(places));
    digits.extend(std::iter::repeat_n(0, places.saturating_sub(frac.len())));
    if frac.get(places).is_some_and(|&d| d >= 5) {
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, 1);
                break;
            }
            i -= 1;
            if digits[i] == 9 {
                digits[i] = 0;
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    let int_len = digits.len() - places;
    let as_text = |d: &[u8]| d.iter().map(|d| (d + b'0') as char).collect::<String>();
    let int_digits = as_text(&digits[..int_len]).trim_start_matches('0').to_owned();
    let frac_digits = as_text(&digits[int_len..]);
    let zero = int_digits.is_empty() && frac_digits.bytes().all(|b| b == b'0');
    (negative && !zero, int_digits, frac_digits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_as_postgres() {
        // Postgres 15's answers.
        for (value, template, printed) in [
            ("12.5", "999.99", "  12.50"),
            ("1234.5", "FM9,999.00", "1,234.50"),
            ("-5", "999", "  -5"),
            ("0.5", "0.99", " 0.50"),
            ("0.5", "9.99", "  .50"),
            ("1234.5", "9,999", " 1,235"),
            ("5", "9,999", "     5"),
            ("12345", "999", " ###"),
            ("-12.5", "FM999.99", "-12.5"),
            ("12", "FM999.99", "12."),
            ("7", "000", " 007"),
            ("-7", "S999", "  -7"),
            ("7", "999MI", "  7 "),
            ("-7", "999MI", "  7-"),
            ("-7", "999PR", "  <7>"),
            ("21", "99th", " 21st"),
            ("2.5", "9", " 3"),
            ("-0.001", "9.99", "  .00"),
            ("9.999", "9.99", " #.##"),
            ("7", "FMS999", "+7"),
            ("-7", "FM999PR", "<7>"),
            ("0", "999", "   0"),
            ("0", "FM999", "0"),
            ("-1234.567", "S9,999.999", "-1,234.567"),
            ("7", "PL999", "+   7"),
            ("-7", "SG999", "-  7"),
            ("1234", "FM0000000", "0001234"),
            ("-5", "FM999MI", "5-"),
            ("0.00", "FM9.99", "0."),
            ("0.5", "FM9.99", ".5"),
            ("-0.001", "FM9.99", "0."),
            ("0", "9.99", "  .00"),
        ] {
            let template = NumberTemplate::new(template).unwrap();
            assert_eq!(template.print(value), printed, "{value} {template:?}");
        }
        assert!(NumberTemplate::new("9.99EEEE").is_err());
    }
}
