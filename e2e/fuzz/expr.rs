//! Random expressions of every type.

use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ty {
    Int,
    BigInt,
    Numeric,
    Double,
    Text,
    Date,
    Bool,
}

impl Ty {
    pub(super) const ALL: [Ty; 7] =
        [Ty::Int, Ty::BigInt, Ty::Numeric, Ty::Double, Ty::Text, Ty::Date, Ty::Bool];

    pub(super) fn sql(self) -> &'static str {
        match self {
            Ty::Int => "int",
            Ty::BigInt => "bigint",
            Ty::Numeric => "numeric",
            Ty::Double => "double precision",
            Ty::Text => "varchar",
            Ty::Date => "date",
            Ty::Bool => "boolean",
        }
    }

    pub(super) fn is_number(self) -> bool {
        matches!(self, Ty::Int | Ty::BigInt | Ty::Numeric | Ty::Double)
    }
}

/// A column an expression may use: its SQL name and type (`None` for types expressions do
/// not generate: timestamps, jsonb, bytea).
pub(super) type Col = (String, Option<Ty>);

/// Random typed SQL expressions.
pub(super) struct ExprGen<'a> {
    pub(super) rng: &'a mut Rng,
    pub(super) cols: &'a [Col],
    /// Whether scalar subqueries may appear (views do not support them).
    pub(super) scalar_subqueries: bool,
}

impl ExprGen<'_> {
    pub(super) fn any_ty(&mut self) -> Ty {
        *self.rng.pick(&Ty::ALL)
    }

    pub(super) fn expr(&mut self, ty: Ty, depth: u32) -> String {
        if depth == 0 || self.rng.chance(20) {
            return self.leaf(ty);
        }
        let d = depth - 1;
        match ty {
            Ty::Int | Ty::BigInt | Ty::Numeric | Ty::Double => match self.rng.below(12) {
                0..=3 => {
                    let op = *self.rng.pick(&["+", "-", "*", "/", "%"]);
                    format!("({} {op} {})", self.expr(ty, d), self.expr(ty, d))
                }
                4 => format!("(- {})", self.expr(ty, d)),
                5 | 6 => self.cast(ty, d),
                7 => self.case(ty, d),
                8 => {
                    let f = *self.rng.pick(&["coalesce", "nullif"]);
                    format!("{f}({}, {})", self.expr(ty, d), self.expr(ty, d))
                }
                9 => match ty {
                    Ty::Int | Ty::BigInt => {
                        let f = *self.rng.pick(&["length", "char_length", "octet_length"]);
                        format!("{f}({})", self.expr(Ty::Text, d))
                    }
                    Ty::Numeric => {
                        format!("round({}, {})", self.expr(ty, d), self.rng.range(-2, 4))
                    }
                    _ => {
                        let f = *self.rng.pick(&["abs", "sqrt", "ceil", "floor", "ln", "exp"]);
                        format!("{f}({})", self.expr(ty, d))
                    }
                },
                10 => format!("abs({})", self.expr(ty, d)),
                _ if self.scalar_subqueries => format!("(SELECT {})", self.expr(ty, d)),
                _ => self.leaf(ty),
            },
            Ty::Text => match self.rng.below(11) {
                0..=1 => format!("({} || {})", self.expr(Ty::Text, d), self.expr(Ty::Text, d)),
                2 => {
                    let f =
                        *self.rng.pick(&["upper", "lower", "trim", "reverse", "btrim", "initcap"]);
                    format!("{f}({})", self.expr(Ty::Text, d))
                }
                3 => format!(
                    "substr({}, {}, {})",
                    self.expr(Ty::Text, d),
                    self.expr(Ty::Int, d.min(1)),
                    self.expr(Ty::Int, d.min(1))
                ),
                4 | 5 => self.cast(ty, d),
                6 => self.case(ty, d),
                7 => format!("coalesce({}, {})", self.expr(Ty::Text, d), self.expr(Ty::Text, d)),
                8 => format!(
                    "replace({}, {}, {})",
                    self.expr(Ty::Text, d),
                    self.expr(Ty::Text, 0),
                    self.expr(Ty::Text, 0)
                ),
                9 => {
                    let f = *self.rng.pick(&["left", "right"]);
                    format!("{f}({}, {})", self.expr(Ty::Text, d), self.rng.range(-3, 5))
                }
                _ => {
                    let ty = self.any_ty_no_bool();
                    format!("concat({}, {})", self.expr(ty, d), self.expr(Ty::Text, d))
                }
            },
            Ty::Date => match self.rng.below(4) {
                0 => format!("({} + {})", self.expr(Ty::Date, d), self.expr(Ty::Int, d.min(1))),
                1 => self.cast(ty, d),
                2 => self.case(ty, d),
                _ => format!("coalesce({}, {})", self.expr(Ty::Date, d), self.expr(Ty::Date, d)),
            },
            Ty::Bool => match self.rng.below(12) {
                0..=3 => {
                    let (a, b) = self.comparable_pair();
                    let op = *self.rng.pick(&["=", "<>", "<", "<=", ">", ">="]);
                    format!("({} {op} {})", self.expr(a, d), self.expr(b, d))
                }
                4 => {
                    let op = *self.rng.pick(&["AND", "OR"]);
                    format!("({} {op} {})", self.expr(Ty::Bool, d), self.expr(Ty::Bool, d))
                }
                5 => format!("(NOT {})", self.expr(Ty::Bool, d)),
                6 => {
                    let t = self.any_ty();
                    let not = if self.rng.chance(50) { " NOT" } else { "" };
                    format!("({} IS{not} NULL)", self.expr(t, d))
                }
                7 => {
                    let (a, b) = self.comparable_pair();
                    format!(
                        "({} BETWEEN {} AND {})",
                        self.expr(a, d),
                        self.expr(b, d.min(1)),
                        self.expr(b, d.min(1))
                    )
                }
                8 => {
                    let (a, b) = self.comparable_pair();
                    let items: Vec<String> =
                        (0..1 + self.rng.below(4)).map(|_| self.expr(b, 0)).collect();
                    format!("({} IN ({}))", self.expr(a, d), items.join(", "))
                }
                9 => {
                    let pattern = *self.rng.pick(&["'a%'", "'%b%'", "'_'", "'%'", "''", "'%\\%'"]);
                    let not = if self.rng.chance(30) { " NOT" } else { "" };
                    format!("({}{not} LIKE {pattern})", self.expr(Ty::Text, d))
                }
                10 => {
                    let (a, b) = self.comparable_pair();
                    format!("({} IS DISTINCT FROM {})", self.expr(a, d), self.expr(b, d))
                }
                _ => self.cast(ty, d),
            },
        }
    }

    pub(super) fn any_ty_no_bool(&mut self) -> Ty {
        *self.rng.pick(&[Ty::Int, Ty::BigInt, Ty::Numeric, Ty::Double, Ty::Text, Ty::Date])
    }

    /// Two types to compare: mostly equal or both numbers, sometimes anything.
    pub(super) fn comparable_pair(&mut self) -> (Ty, Ty) {
        let a = self.any_ty();
        let b = match self.rng.below(10) {
            0..=5 => a,
            6..=8 if a.is_number() => {
                *self.rng.pick(&[Ty::Int, Ty::BigInt, Ty::Numeric, Ty::Double])
            }
            _ => self.any_ty(),
        };
        (a, b)
    }

    pub(super) fn cast(&mut self, ty: Ty, depth: u32) -> String {
        let from = self.any_ty();
        let inner = self.expr(from, depth);
        if self.rng.chance(30) {
            format!("{inner}::{}", ty.sql())
        } else {
            format!("CAST({inner} AS {})", ty.sql())
        }
    }

    pub(super) fn case(&mut self, ty: Ty, depth: u32) -> String {
        let when = self.expr(Ty::Bool, depth);
        let then = self.expr(ty, depth);
        if self.rng.chance(30) {
            return format!("CASE WHEN {when} THEN {then} END");
        }
        format!("CASE WHEN {when} THEN {then} ELSE {} END", self.expr(ty, depth))
    }

    pub(super) fn leaf(&mut self, ty: Ty) -> String {
        let matching: Vec<&String> =
            self.cols.iter().filter(|(_, t)| *t == Some(ty)).map(|(n, _)| n).collect();
        if !matching.is_empty() && self.rng.chance(60) {
            return (*self.rng.pick(&matching)).clone();
        }
        literal(self.rng, ty)
    }
}

/// A literal of `ty`, with NULLs and extremes.
pub(super) fn literal(rng: &mut Rng, ty: Ty) -> String {
    if rng.chance(10) {
        return if rng.chance(50) { "NULL".into() } else { format!("CAST(NULL AS {})", ty.sql()) };
    }
    let extreme = rng.chance(12);
    match ty {
        Ty::Int if extreme => rng.pick(&["2147483647", "(-2147483648)", "0"]).to_string(),
        Ty::Int => rng.range(-10, 100).to_string(),
        Ty::BigInt if extreme => rng
            .pick(&["9223372036854775807", "(-9223372036854775807)", "CAST(3000000000 AS bigint)"])
            .to_string(),
        Ty::BigInt => format!("CAST({} AS bigint)", rng.range(-1000, 1000)),
        Ty::Numeric if extreme => rng
            .pick(&["99999999999999999999999999999999999999", "0.000000000000000000001", "1e-30"])
            .to_string(),
        Ty::Numeric => rng.pick(&["1.5", "0.001", "-12345.678", "2.50", "0.0", "7"]).to_string(),
        Ty::Double if extreme => rng
            .pick(&[
                "CAST('1e308' AS double precision)",
                "CAST('NaN' AS double precision)",
                "CAST('-Infinity' AS double precision)",
                "CAST(5e-324 AS double precision)",
            ])
            .to_string(),
        Ty::Double => {
            format!("CAST({} AS double precision)", rng.pick(&["1.5", "0.25", "-3", "100.125"]))
        }
        Ty::Text if extreme => {
            rng.pick(&["repeat('ab', 300)", "'é日本🦀'", "'2147483648'", "''"]).to_string()
        }
        Ty::Text => rng
            .pick(&[
                "'abc'",
                "'A'",
                "'it''s'",
                "'12'",
                "' 42 '",
                "'2024-02-29'",
                "'true'",
                "'NaN'",
                "'1.5'",
            ])
            .to_string(),
        Ty::Date if extreme => rng
            .pick(&["DATE '0001-01-01'", "DATE '9999-12-31'", "CAST('4713-01-01 BC' AS date)"])
            .to_string(),
        Ty::Date => rng
            .pick(&["DATE '2024-02-29'", "DATE '1970-01-01'", "CAST('2000-01-01' AS date)"])
            .to_string(),
        Ty::Bool => rng.pick(&["true", "false"]).to_string(),
    }
}
