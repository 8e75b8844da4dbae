//! The oracle: a model of `fz_a` and `fz_b`.

use super::*;

/// A row of `fz_a (id int PRIMARY KEY, x int, y int, s varchar)` without its key.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ARow {
    pub(super) x: Option<i64>,
    pub(super) y: Option<i64>,
    pub(super) s: Option<String>,
}

/// A row of `fz_b (id int PRIMARY KEY, k int, v double precision)` without its key.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct BRow {
    pub(super) k: Option<i64>,
    pub(super) v: Option<f64>,
}

/// The exact contents of the oracle tables after every acknowledged write.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Model {
    pub(super) a: BTreeMap<i64, ARow>,
    pub(super) b: BTreeMap<i64, BRow>,
}

pub(super) const CREATE_A: &str = "CREATE TABLE fz_a (id int PRIMARY KEY, x int, y int, s varchar)";
pub(super) const CREATE_B: &str =
    "CREATE TABLE fz_b (id int PRIMARY KEY, k int, v double precision)";
pub(super) const SELECT_A: &str = "SELECT id, x, y, s FROM fz_a";
pub(super) const SELECT_B: &str = "SELECT id, k, v FROM fz_b";

/// One row of either table, as expressions see it.
pub(super) struct RowRef<'a> {
    pub(super) id: i64,
    pub(super) x: Option<i64>,
    pub(super) y: Option<i64>,
    pub(super) k: Option<i64>,
    pub(super) s: Option<&'a str>,
    pub(super) v: Option<f64>,
}

impl<'a> RowRef<'a> {
    pub(super) fn of_a(id: i64, row: &'a ARow) -> Self {
        RowRef { id, x: row.x, y: row.y, k: None, s: row.s.as_deref(), v: None }
    }

    pub(super) fn of_b(id: i64, row: &'a BRow) -> Self {
        RowRef { id, x: None, y: None, k: row.k, s: None, v: row.v }
    }

    pub(super) fn int(&self, column: &str) -> Option<i64> {
        match column {
            "id" => Some(self.id),
            "x" => self.x,
            "y" => self.y,
            "k" => self.k,
            other => unreachable!("no int column {other}"),
        }
    }
}

pub(super) const INT4_MIN: i64 = i32::MIN as i64;
pub(super) const INT4_MAX: i64 = i32::MAX as i64;

pub(super) fn is_int4(v: i64) -> bool {
    (INT4_MIN..=INT4_MAX).contains(&v)
}

/// Why Postgres rejects a write.
pub(super) type Fail = &'static str;

/// An operand of integer arithmetic: an int column, or a literal (int4 when it fits, as in
/// Postgres, else int8).
#[derive(Clone, Debug)]
pub(super) enum Operand {
    Col(&'static str),
    Lit(i64),
}

impl Operand {
    pub(super) fn sql(&self) -> String {
        match self {
            Operand::Col(c) => (*c).to_owned(),
            Operand::Lit(v) if *v < 0 => format!("({v})"),
            Operand::Lit(v) => v.to_string(),
        }
    }

    pub(super) fn eval(&self, row: &RowRef) -> Option<i64> {
        match self {
            Operand::Col(c) => row.int(c),
            Operand::Lit(v) => Some(*v),
        }
    }

    pub(super) fn is_int8(&self) -> bool {
        matches!(self, Operand::Lit(v) if !is_int4(*v))
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) enum IntOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

/// An integer expression of Postgres semantics: one operator deep, so that the overflow of
/// an intermediate result never depends on the engine's choice of integer width.
#[derive(Clone, Debug)]
pub(super) enum IntExpr {
    Lit(Option<i64>),
    /// The literal written as a quoted string (an unknown-typed literal in Postgres).
    Quoted(i64),
    /// The literal wrapped in a scalar subquery.
    Subquery(Option<i64>),
    Bin(Operand, IntOp, Operand),
    Neg(&'static str),
    Case(Box<Pred>, Operand, Operand),
    Coalesce(&'static str, i64),
    /// `length(s)`.
    Length,
}

impl IntExpr {
    pub(super) fn sql(&self) -> String {
        match self {
            IntExpr::Lit(None) => "NULL".into(),
            IntExpr::Lit(Some(v)) => v.to_string(),
            IntExpr::Quoted(v) => format!("'{v}'"),
            IntExpr::Subquery(None) => "(SELECT NULL)".into(),
            IntExpr::Subquery(Some(v)) => format!("(SELECT {v})"),
            IntExpr::Bin(a, op, b) => {
                let op = match op {
                    IntOp::Add => "+",
                    IntOp::Sub => "-",
                    IntOp::Mul => "*",
                    IntOp::Div => "/",
                    IntOp::Mod => "%",
                };
                format!("{} {op} {}", a.sql(), b.sql())
            }
            IntExpr::Neg(c) => format!("-{c}"),
            IntExpr::Case(p, a, b) => {
                format!("CASE WHEN {} THEN {} ELSE {} END", p.sql(), a.sql(), b.sql())
            }
            IntExpr::Coalesce(c, v) => format!("coalesce({c}, {v})"),
            IntExpr::Length => "length(s)".into(),
        }
    }

    /// The value Postgres computes, or why it fails.
    pub(super) fn eval(&self, row: &RowRef) -> Result<Option<i64>, Fail> {
        match self {
            IntExpr::Lit(v) | IntExpr::Subquery(v) => Ok(*v),
            IntExpr::Quoted(v) => Ok(Some(*v)),
            IntExpr::Bin(a, op, b) => {
                let (Some(x), Some(y)) = (a.eval(row), b.eval(row)) else {
                    return Ok(None);
                };
                let int8 = a.is_int8() || b.is_int8();
                let v = match op {
                    IntOp::Add => x.checked_add(y),
                    IntOp::Sub => x.checked_sub(y),
                    IntOp::Mul => x.checked_mul(y),
                    IntOp::Div if y == 0 => return Err("division by zero"),
                    IntOp::Div => x.checked_div(y),
                    IntOp::Mod if y == 0 => return Err("division by zero"),
                    // Postgres special-cases `% -1` (never an overflow).
                    IntOp::Mod if y == -1 => Some(0),
                    IntOp::Mod => x.checked_rem(y),
                };
                match v {
                    Some(v) if int8 || is_int4(v) => Ok(Some(v)),
                    _ => Err("integer out of range"),
                }
            }
            IntExpr::Neg(c) => match row.int(c) {
                None => Ok(None),
                Some(v) if is_int4(-v) => Ok(Some(-v)),
                Some(_) => Err("integer out of range"),
            },
            IntExpr::Case(p, a, b) => {
                Ok(if p.eval(row) == Some(true) { a.eval(row) } else { b.eval(row) })
            }
            IntExpr::Coalesce(c, v) => Ok(row.int(c).or(Some(*v))),
            IntExpr::Length => Ok(row.s.map(|s| s.chars().count() as i64)),
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub(super) fn sql(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "<>",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }

    pub(super) fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
        }
    }
}

/// A predicate of three-valued logic that never fails (no arithmetic), so that whether a
/// statement errors never depends on the order rows or conjuncts are evaluated in.
#[derive(Clone, Debug)]
pub(super) enum Pred {
    Const(Option<bool>),
    Cmp(Operand, CmpOp, Operand),
    IsNull(&'static str, bool),
    Between(&'static str, i64, i64),
    In(&'static str, Vec<i64>),
    TextCmp(CmpOp, String),
    /// `s LIKE 'prefix%'`.
    Like(String),
    /// `v > literal` on `fz_b`.
    DoubleGt(&'static str, f64),
    Not(Box<Pred>),
    And(Box<Pred>, Box<Pred>),
    Or(Box<Pred>, Box<Pred>),
}

impl Pred {
    pub(super) fn sql(&self) -> String {
        match self {
            Pred::Const(None) => "NULL".into(),
            Pred::Const(Some(b)) => b.to_string(),
            Pred::Cmp(a, op, b) => format!("{} {} {}", a.sql(), op.sql(), b.sql()),
            Pred::IsNull(c, true) => format!("{c} IS NULL"),
            Pred::IsNull(c, false) => format!("{c} IS NOT NULL"),
            Pred::Between(c, lo, hi) => format!("{c} BETWEEN {lo} AND {hi}"),
            Pred::In(c, list) => format!(
                "{c} IN ({})",
                list.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
            ),
            Pred::TextCmp(op, lit) => format!("s {} {}", op.sql(), quote(lit)),
            Pred::Like(prefix) => format!("s LIKE {}", quote(&format!("{prefix}%"))),
            Pred::DoubleGt(text, _) => format!("v > {text}"),
            Pred::Not(p) => format!("NOT ({})", p.sql()),
            Pred::And(a, b) => format!("({}) AND ({})", a.sql(), b.sql()),
            Pred::Or(a, b) => format!("({}) OR ({})", a.sql(), b.sql()),
        }
    }

    pub(super) fn eval(&self, row: &RowRef) -> Option<bool> {
        match self {
            Pred::Const(b) => *b,
            Pred::Cmp(a, op, b) => Some(op.holds(a.eval(row)?, b.eval(row)?)),
            Pred::IsNull(c, is_null) => {
                let null = match *c {
                    "s" => row.s.is_none(),
                    "v" => row.v.is_none(),
                    c => row.int(c).is_none(),
                };
                Some(null == *is_null)
            }
            Pred::Between(c, lo, hi) => row.int(c).map(|v| *lo <= v && v <= *hi),
            Pred::In(c, list) => row.int(c).map(|v| list.contains(&v)),
            Pred::TextCmp(op, lit) => row.s.map(|s| op.holds(s, lit.as_str())),
            Pred::Like(prefix) => row.s.map(|s| s.starts_with(prefix.as_str())),
            Pred::DoubleGt(_, lit) => row.v.map(|v| v > *lit),
            Pred::Not(p) => p.eval(row).map(|b| !b),
            Pred::And(a, b) => match (a.eval(row), b.eval(row)) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
            Pred::Or(a, b) => match (a.eval(row), b.eval(row)) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
        }
    }
}

/// A text expression for `s`.
#[derive(Clone, Debug)]
pub(super) enum TextExpr {
    Lit(Option<String>),
    /// `s || 'lit'` (or `'lit' || s` when the flag is set).
    Concat(String, bool),
    Upper,
    Lower,
    /// `CAST(col AS varchar)` of an int column.
    FromInt(&'static str),
}

impl TextExpr {
    pub(super) fn sql(&self) -> String {
        match self {
            TextExpr::Lit(None) => "NULL".into(),
            TextExpr::Lit(Some(s)) => quote(s),
            TextExpr::Concat(lit, false) => format!("s || {}", quote(lit)),
            TextExpr::Concat(lit, true) => format!("{} || s", quote(lit)),
            TextExpr::Upper => "upper(s)".into(),
            TextExpr::Lower => "lower(s)".into(),
            TextExpr::FromInt(c) => format!("CAST({c} AS varchar)"),
        }
    }

    pub(super) fn eval(&self, row: &RowRef) -> Option<String> {
        match self {
            TextExpr::Lit(s) => s.clone(),
            TextExpr::Concat(lit, false) => row.s.map(|s| format!("{s}{lit}")),
            TextExpr::Concat(lit, true) => row.s.map(|s| format!("{lit}{s}")),
            TextExpr::Upper => row.s.map(str::to_uppercase),
            TextExpr::Lower => row.s.map(str::to_lowercase),
            TextExpr::FromInt(c) => row.int(c).map(|v| v.to_string()),
        }
    }
}

/// A double expression for `v`. Literals are short decimals, factors powers of two, so every
/// result is the same IEEE double however the engine types the literal.
#[derive(Clone, Debug)]
pub(super) enum DoubleExpr {
    Lit(Option<(&'static str, f64)>),
    Add(&'static str, f64),
    Mul(&'static str, f64),
    Neg,
    /// `CAST(k AS double precision)`.
    FromK,
}

impl DoubleExpr {
    pub(super) fn sql(&self) -> String {
        match self {
            DoubleExpr::Lit(None) => "NULL".into(),
            DoubleExpr::Lit(Some((text, _))) => (*text).to_owned(),
            DoubleExpr::Add(text, _) => format!("v + {text}"),
            DoubleExpr::Mul(text, _) => format!("v * {text}"),
            DoubleExpr::Neg => "-v".into(),
            DoubleExpr::FromK => "CAST(k AS double precision)".into(),
        }
    }

    pub(super) fn eval(&self, row: &RowRef) -> Result<Option<f64>, Fail> {
        let v = match self {
            DoubleExpr::Lit(lit) => lit.map(|(_, v)| v),
            DoubleExpr::Add(_, c) => row.v.map(|v| v + c),
            DoubleExpr::Mul(_, c) => row.v.map(|v| v * c),
            DoubleExpr::Neg => row.v.map(|v| -v),
            DoubleExpr::FromK => row.k.map(|k| k as f64),
        };
        match v {
            Some(v) if !v.is_finite() => Err("value out of range: overflow"),
            v => Ok(v),
        }
    }
}

/// Short decimal literals for `v` and their values.
pub(super) const DOUBLES: &[(&str, f64)] = &[
    ("0", 0.0),
    ("0.1", 0.1),
    ("-2.5", -2.5),
    ("3.375", 3.375),
    ("1024", 1024.0),
    ("1e10", 1e10),
    ("-7.75", -7.75),
    ("123456789.125", 123_456_789.125),
];

/// Strings for `s`: empty, quotes, a backslash, non-ASCII, LIKE metacharacters, long.
pub(super) fn text_pool() -> Vec<String> {
    vec![
        "a".into(),
        "abc".into(),
        "b".into(),
        "Mixed Case".into(),
        String::new(),
        "it's".into(),
        "back\\slash".into(),
        "é日本🦀".into(),
        "100%_".into(),
        " padded ".into(),
        "12".into(),
        "NULL".into(),
        "x".repeat(5000),
    ]
}

/// What a write on the oracle tables must do.
pub(super) enum Expect {
    /// It succeeds, reports `count` rows, and the tables become `next`.
    Ok { next: Model, count: u64 },
    /// It fails (any SQLSTATE but XX000) and changes nothing.
    Fail(Fail),
}

pub(super) struct PlannedWrite {
    pub(super) sql: String,
    pub(super) expect: Expect,
}

/// Rows of a model table a predicate selects, in key order.
pub(super) fn matching<'a, R>(
    rows: &'a BTreeMap<i64, R>,
    pred: Option<&Pred>,
    view: impl Fn(i64, &'a R) -> RowRef<'a>,
) -> Vec<i64> {
    rows.iter()
        .filter(|(id, row)| pred.is_none_or(|p| p.eval(&view(**id, row)) == Some(true)))
        .map(|(id, _)| *id)
        .collect()
}

/// Generators of oracle writes; every one computes its own expected outcome.
pub(super) struct WriteGen<'a> {
    pub(super) rng: &'a mut Rng,
    pub(super) model: &'a Model,
    pub(super) texts: &'a [String],
}

impl WriteGen<'_> {
    pub(super) fn plan(&mut self) -> PlannedWrite {
        match self.rng.below(20) {
            0..=4 => self.insert_a(),
            5..=7 => self.insert_b(),
            8 => self.insert_a_from_b(),
            9..=11 => self.update_a(),
            12 => self.update_a_key(),
            13..=14 => self.update_b(),
            15..=16 => self.delete_a(),
            17 => self.delete_b(),
            18 => self.nulls_everywhere(),
            _ => self.insert_a(),
        }
    }

    /// A key: mostly from a small range (so duplicates happen), sometimes NULL or extreme.
    pub(super) fn key(&mut self) -> Option<i64> {
        match self.rng.below(100) {
            0..=69 => Some(self.rng.range(0, KEY_SPACE)),
            70..=79 => match self.model.a.keys().nth(self.rng.below(self.model.a.len().max(1))) {
                Some(id) => Some(*id),
                None => Some(0),
            },
            80..=84 => None,
            85..=89 => Some(*self.rng.pick(&[INT4_MAX, INT4_MIN, -1])),
            90..=94 => Some(*self.rng.pick(&[INT4_MAX + 1, INT4_MIN - 1, 10_000_000_000])),
            _ => Some(self.rng.range(-5, 5)),
        }
    }

    pub(super) fn int_value(&mut self) -> Option<i64> {
        match self.rng.below(100) {
            0..=19 => None,
            20..=69 => Some(self.rng.range(-10, 10)),
            70..=79 => Some(0),
            80..=89 => Some(*self.rng.pick(&[INT4_MAX, INT4_MIN, INT4_MAX - 1, -1])),
            90..=94 => Some(*self.rng.pick(&[INT4_MAX + 1, INT4_MIN - 1, 1 << 40])),
            _ => Some(self.rng.range(-100_000, 100_000)),
        }
    }

    pub(super) fn text_value(&mut self) -> Option<String> {
        if self.rng.chance(20) { None } else { Some(self.rng.pick(self.texts).clone()) }
    }

    /// An int value as SQL: a literal, or (sometimes) quoted or in a scalar subquery.
    pub(super) fn int_sql(&mut self, v: Option<i64>) -> String {
        let expr = match (v, self.rng.below(30)) {
            (Some(v), 0..=2) if v >= 0 => IntExpr::Quoted(v),
            (v, 3) => IntExpr::Subquery(v),
            (v, _) => IntExpr::Lit(v),
        };
        expr.sql()
    }

    pub(super) fn text_sql(&mut self, s: &Option<String>) -> String {
        let lit = TextExpr::Lit(s.clone()).sql();
        if self.rng.chance(3) { format!("(SELECT {lit})") } else { lit }
    }

    pub(super) fn insert_a(&mut self) -> PlannedWrite {
        let n = 1 + self.rng.below(4);
        let mut rows = Vec::new();
        for _ in 0..n {
            let id = if !rows.is_empty() && self.rng.chance(5) {
                let (id, _): &(Option<i64>, ARow) = &rows[0];
                *id
            } else {
                self.key()
            };
            let row = ARow { x: self.int_value(), y: self.int_value(), s: self.text_value() };
            rows.push((id, row));
        }
        // All four columns in a random order (or no column list).
        let mut columns = ["id", "x", "y", "s"];
        let listed = self.rng.chance(40);
        if listed {
            for i in (1..columns.len()).rev() {
                columns.swap(i, self.rng.below(i + 1));
            }
        }
        let values: Vec<String> = rows
            .iter()
            .map(|(id, row)| {
                let items: Vec<String> = columns
                    .iter()
                    .map(|c| match *c {
                        "id" => self.int_sql(*id),
                        "x" => self.int_sql(row.x),
                        "y" => self.int_sql(row.y),
                        _ => self.text_sql(&row.s),
                    })
                    .collect();
                format!("({})", items.join(", "))
            })
            .collect();
        let target = if listed { format!(" ({})", columns.join(", ")) } else { String::new() };
        let sql = format!("INSERT INTO fz_a{target} VALUES {}", values.join(", "));

        let mut next = self.model.clone();
        let expect = (|| {
            for (id, row) in &rows {
                let id = id.ok_or("null value in the primary key")?;
                let ints = [Some(id), row.x, row.y];
                if ints.iter().flatten().any(|v| !is_int4(*v)) {
                    return Err("integer out of range");
                }
                if next.a.insert(id, row.clone()).is_some() {
                    return Err("duplicate key");
                }
            }
            Ok(())
        })();
        PlannedWrite { sql, expect: outcome(expect, next, rows.len()) }
    }

    pub(super) fn insert_b(&mut self) -> PlannedWrite {
        let n = 1 + self.rng.below(3);
        let mut rows = Vec::new();
        for _ in 0..n {
            let id = match self.model.b.keys().nth(self.rng.below(self.model.b.len().max(1))) {
                Some(id) if self.rng.chance(10) => Some(*id),
                _ => self.key(),
            };
            let v = if self.rng.chance(15) { None } else { Some(*self.rng.pick(DOUBLES)) };
            rows.push((id, self.int_value(), v));
        }
        let values: Vec<String> = rows
            .iter()
            .map(|(id, k, v)| {
                let v = DoubleExpr::Lit(*v).sql();
                format!("({}, {}, {v})", self.int_sql(*id), self.int_sql(*k))
            })
            .collect();
        let sql = format!("INSERT INTO fz_b VALUES {}", values.join(", "));
        let mut next = self.model.clone();
        let expect = (|| {
            for (id, k, v) in &rows {
                let id = id.ok_or("null value in the primary key")?;
                if !is_int4(id) || k.is_some_and(|k| !is_int4(k)) {
                    return Err("integer out of range");
                }
                if next.b.insert(id, BRow { k: *k, v: v.map(|(_, v)| v) }).is_some() {
                    return Err("duplicate key");
                }
            }
            Ok(())
        })();
        PlannedWrite { sql, expect: outcome(expect, next, rows.len()) }
    }

    /// `INSERT INTO fz_a (id, x, s) SELECT id + off, k, '..' FROM fz_b WHERE ..`.
    pub(super) fn insert_a_from_b(&mut self) -> PlannedWrite {
        let offset = *self.rng.pick(&[0, 1, 7, 100, -3, INT4_MAX - 20]);
        let pred = self.pred_b();
        let tag = self.rng.pick(self.texts).clone();
        let sql = format!(
            "INSERT INTO fz_a (id, x, s) SELECT id + {}, k, {} FROM fz_b WHERE {}",
            Operand::Lit(offset).sql(),
            quote(&tag),
            pred.sql()
        );
        let ids = matching(&self.model.b, Some(&pred), RowRef::of_b);
        let mut next = self.model.clone();
        let expect = (|| {
            for id in &ids {
                let new_id = id + offset;
                if !is_int4(new_id) {
                    return Err("integer out of range");
                }
                let row = ARow { x: self.model.b[id].k, y: None, s: Some(tag.clone()) };
                if next.a.insert(new_id, row).is_some() {
                    return Err("duplicate key");
                }
            }
            Ok(())
        })();
        PlannedWrite { sql, expect: outcome(expect, next, ids.len()) }
    }

    pub(super) fn operand(&mut self, columns: &[&'static str]) -> Operand {
        if self.rng.chance(50) {
            Operand::Col(self.rng.copy_of(columns))
        } else {
            Operand::Lit(match self.rng.below(10) {
                0 => 0,
                1 => *self.rng.pick(&[INT4_MAX, INT4_MIN, 3_000_000_000]),
                _ => self.rng.range(-10, 10),
            })
        }
    }

    /// An int expression over `columns` for a SET clause.
    pub(super) fn int_expr(&mut self, columns: &[&'static str], with_s: bool) -> IntExpr {
        let ops = [IntOp::Add, IntOp::Sub, IntOp::Mul, IntOp::Div, IntOp::Mod];
        match self.rng.below(9) {
            0 => IntExpr::Lit(self.int_value()),
            1..=3 => {
                let a = Operand::Col(self.rng.copy_of(columns));
                let b = self.operand(columns);
                let op = *self.rng.pick(&ops);
                if self.rng.chance(30) { IntExpr::Bin(b, op, a) } else { IntExpr::Bin(a, op, b) }
            }
            4 => IntExpr::Neg(self.rng.copy_of(columns)),
            5 => {
                let p = self.pred(columns, with_s, 1);
                IntExpr::Case(Box::new(p), self.operand(columns), self.operand(columns))
            }
            6 => IntExpr::Coalesce(self.rng.copy_of(columns), self.rng.range(-5, 5)),
            7 if with_s => IntExpr::Length,
            _ => IntExpr::Subquery(self.int_value()),
        }
    }

    pub(super) fn pred(&mut self, columns: &[&'static str], with_s: bool, depth: u32) -> Pred {
        if depth > 0 && self.rng.chance(30) {
            let a = Box::new(self.pred(columns, with_s, depth - 1));
            return match self.rng.below(3) {
                0 => Pred::Not(a),
                1 => Pred::And(a, Box::new(self.pred(columns, with_s, depth - 1))),
                _ => Pred::Or(a, Box::new(self.pred(columns, with_s, depth - 1))),
            };
        }
        let ops = [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge];
        let column = *self.rng.pick(columns);
        match self.rng.below(if with_s { 10 } else { 7 }) {
            0..=1 => Pred::Cmp(
                Operand::Col(column),
                *self.rng.pick(&ops),
                Operand::Lit(self.rng.range(-5, KEY_SPACE)),
            ),
            2 => Pred::Cmp(Operand::Col(column), *self.rng.pick(&ops), self.operand(columns)),
            3 => Pred::IsNull(column, self.rng.chance(50)),
            4 => {
                let lo = self.rng.range(-5, KEY_SPACE);
                Pred::Between(column, lo, lo + self.rng.range(0, 20))
            }
            5 => Pred::In(
                column,
                (0..1 + self.rng.below(5)).map(|_| self.rng.range(-3, 30)).collect(),
            ),
            6 => Pred::Const(*self.rng.pick(&[Some(true), Some(false), None])),
            7 => Pred::IsNull("s", self.rng.chance(50)),
            8 => Pred::Like(self.rng.pick(&["a", "ab", "M", "x", ""]).to_string()),
            _ => Pred::TextCmp(*self.rng.pick(&ops), self.rng.pick(self.texts).clone()),
        }
    }

    pub(super) fn pred_b(&mut self) -> Pred {
        if self.rng.chance(20) {
            let (text, v) = *self.rng.pick(DOUBLES);
            return Pred::DoubleGt(text, v);
        }
        self.pred(&["id", "k"], false, 2)
    }

    pub(super) fn text_expr(&mut self) -> TextExpr {
        match self.rng.below(6) {
            0 => TextExpr::Lit(self.text_value()),
            1 => TextExpr::Concat(
                self.rng.pick(&["!", "", "ü", "''"]).to_string(),
                self.rng.chance(50),
            ),
            2 => TextExpr::Upper,
            3 => TextExpr::Lower,
            4 => TextExpr::FromInt(self.rng.copy_of(&["id", "x", "y"])),
            _ => TextExpr::Lit(Some(self.rng.pick(self.texts).clone())),
        }
    }

    pub(super) fn update_a(&mut self) -> PlannedWrite {
        let columns = ["id", "x", "y"];
        let mut sets: Vec<(&str, Result<IntExpr, TextExpr>)> = Vec::new();
        let mut targets = vec!["x", "y", "s"];
        for _ in 0..1 + self.rng.below(2) {
            let target = targets.remove(self.rng.below(targets.len()));
            let expr = match target {
                "s" => Err(self.text_expr()),
                _ => Ok(self.int_expr(&columns, true)),
            };
            sets.push((target, expr));
        }
        let pred = if self.rng.chance(8) { None } else { Some(self.pred(&columns, true, 2)) };
        let assignments: Vec<String> = sets
            .iter()
            .map(|(c, e)| match e {
                Ok(e) => format!("{c} = {}", e.sql()),
                Err(e) => format!("{c} = {}", e.sql()),
            })
            .collect();
        let mut sql = format!("UPDATE fz_a SET {}", assignments.join(", "));
        if let Some(p) = &pred {
            write!(sql, " WHERE {}", p.sql()).unwrap();
        }
        let ids = matching(&self.model.a, pred.as_ref(), RowRef::of_a);
        let mut next = self.model.clone();
        let expect = (|| {
            for id in &ids {
                let old = &self.model.a[id];
                let row = RowRef::of_a(*id, old);
                let mut new = old.clone();
                for (c, e) in &sets {
                    match (c, e) {
                        (_, Err(e)) => new.s = e.eval(&row),
                        (c, Ok(e)) => {
                            let v = e.eval(&row)?;
                            if v.is_some_and(|v| !is_int4(v)) {
                                return Err("integer out of range");
                            }
                            if *c == "x" { new.x = v } else { new.y = v }
                        }
                    }
                }
                next.a.insert(*id, new);
            }
            Ok(())
        })();
        PlannedWrite { sql, expect: outcome(expect, next, ids.len()) }
    }

    /// `UPDATE fz_a SET id = .. WHERE id = ..`: moves one row to another key.
    pub(super) fn update_a_key(&mut self) -> PlannedWrite {
        let old = match self.model.a.keys().nth(self.rng.below(self.model.a.len().max(1))) {
            Some(id) if self.rng.chance(85) => *id,
            _ => self.rng.range(0, KEY_SPACE),
        };
        let (new_sql, new) = match self.rng.below(4) {
            0 => {
                let delta = *self.rng.pick(&[1, 100, -1, INT4_MAX]);
                (format!("id + {}", Operand::Lit(delta).sql()), Some(old + delta))
            }
            1 => ("NULL".to_owned(), None),
            _ => {
                let v = self.key();
                (IntExpr::Lit(v).sql(), v)
            }
        };
        let sql = format!("UPDATE fz_a SET id = {new_sql} WHERE id = {old}");
        let mut next = self.model.clone();
        let Some(row) = next.a.remove(&old) else {
            return PlannedWrite { sql, expect: Expect::Ok { next: self.model.clone(), count: 0 } };
        };
        let expect = match new {
            None => Err("null value in the primary key"),
            Some(new) if !is_int4(new) => Err("integer out of range"),
            Some(new) if next.a.contains_key(&new) => Err("duplicate key"),
            Some(new) => {
                next.a.insert(new, row);
                Ok(())
            }
        };
        PlannedWrite { sql, expect: outcome(expect, next, 1) }
    }

    pub(super) fn update_b(&mut self) -> PlannedWrite {
        let columns = ["id", "k"];
        let set_k = self.rng.chance(50);
        let set_v = !set_k || self.rng.chance(40);
        let k_expr = self.int_expr(&columns, false);
        let v_expr = match self.rng.below(6) {
            0 => DoubleExpr::Lit(if self.rng.chance(15) {
                None
            } else {
                Some(*self.rng.pick(DOUBLES))
            }),
            1 => {
                let (text, c) = *self.rng.pick(&[("1.5", 1.5), ("-0.25", -0.25), ("100", 100.0)]);
                DoubleExpr::Add(text, c)
            }
            2 => {
                let (text, c) = *self.rng.pick(&[("2", 2.0), ("-1", -1.0), ("0.5", 0.5)]);
                DoubleExpr::Mul(text, c)
            }
            3 => DoubleExpr::Neg,
            _ => DoubleExpr::FromK,
        };
        let mut assignments = Vec::new();
        if set_k {
            assignments.push(format!("k = {}", k_expr.sql()));
        }
        if set_v {
            assignments.push(format!("v = {}", v_expr.sql()));
        }
        let pred = if self.rng.chance(8) { None } else { Some(self.pred_b()) };
        let mut sql = format!("UPDATE fz_b SET {}", assignments.join(", "));
        if let Some(p) = &pred {
            write!(sql, " WHERE {}", p.sql()).unwrap();
        }
        let ids = matching(&self.model.b, pred.as_ref(), RowRef::of_b);
        let mut next = self.model.clone();
        let expect = (|| {
            for id in &ids {
                let old = &self.model.b[id];
                let row = RowRef::of_b(*id, old);
                let mut new = old.clone();
                if set_k {
                    new.k = k_expr.eval(&row)?;
                    if new.k.is_some_and(|k| !is_int4(k)) {
                        return Err("integer out of range");
                    }
                }
                if set_v {
                    new.v = v_expr.eval(&row)?;
                }
                next.b.insert(*id, new);
            }
            Ok(())
        })();
        PlannedWrite { sql, expect: outcome(expect, next, ids.len()) }
    }

    pub(super) fn delete_a(&mut self) -> PlannedWrite {
        let pred =
            if self.rng.chance(3) { None } else { Some(self.pred(&["id", "x", "y"], true, 2)) };
        let ids = matching(&self.model.a, pred.as_ref(), RowRef::of_a);
        let mut next = self.model.clone();
        for id in &ids {
            next.a.remove(id);
        }
        let sql = match &pred {
            Some(p) => format!("DELETE FROM fz_a WHERE {}", p.sql()),
            None => "DELETE FROM fz_a".to_owned(),
        };
        PlannedWrite { sql, expect: Expect::Ok { next, count: ids.len() as u64 } }
    }

    pub(super) fn delete_b(&mut self) -> PlannedWrite {
        let pred = self.pred_b();
        let ids = matching(&self.model.b, Some(&pred), RowRef::of_b);
        let mut next = self.model.clone();
        for id in &ids {
            next.b.remove(id);
        }
        let sql = format!("DELETE FROM fz_b WHERE {}", pred.sql());
        PlannedWrite { sql, expect: Expect::Ok { next, count: ids.len() as u64 } }
    }

    /// NULL in every position Postgres allows one (and in the key, where it does not).
    pub(super) fn nulls_everywhere(&mut self) -> PlannedWrite {
        match self.rng.below(4) {
            0 => PlannedWrite {
                sql: "INSERT INTO fz_a VALUES (NULL, NULL, NULL, NULL)".into(),
                expect: Expect::Fail("null value in the primary key"),
            },
            1 => PlannedWrite {
                sql: "UPDATE fz_a SET x = NULL, y = NULL, s = NULL WHERE NULL".into(),
                expect: Expect::Ok { next: self.model.clone(), count: 0 },
            },
            2 => {
                let id = self.rng.range(0, KEY_SPACE);
                let sql = format!(
                    "INSERT INTO fz_a (id, x, y, s) VALUES ({id}, (SELECT NULL), NULL, (SELECT NULL))"
                );
                let mut next = self.model.clone();
                let fresh = next.a.insert(id, ARow { x: None, y: None, s: None }).is_none();
                let expect = if fresh { Ok(()) } else { Err("duplicate key") };
                PlannedWrite { sql, expect: outcome(expect, next, 1) }
            }
            _ => {
                let id = self.rng.range(0, KEY_SPACE);
                let sql = format!("INSERT INTO fz_b (id) VALUES ({id})");
                let mut next = self.model.clone();
                let fresh = next.b.insert(id, BRow { k: None, v: None }).is_none();
                let expect = if fresh { Ok(()) } else { Err("duplicate key") };
                PlannedWrite { sql, expect: outcome(expect, next, 1) }
            }
        }
    }
}

pub(super) fn outcome(result: Result<(), Fail>, next: Model, count: usize) -> Expect {
    match result {
        Ok(()) => Expect::Ok { next, count: count as u64 },
        Err(why) => Expect::Fail(why),
    }
}

/// A SQL string literal.
pub(super) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// Reads the oracle tables' rows (as `SELECT_A` / `SELECT_B` return them) into a model.
pub(super) fn parse_model(
    a: &[Vec<Option<String>>],
    b: &[Vec<Option<String>>],
) -> anyhow::Result<Model> {
    let int = |v: &Option<String>| -> anyhow::Result<Option<i64>> {
        v.as_deref().map(|t| t.parse::<i64>().map_err(|e| anyhow!("{t:?}: {e}"))).transpose()
    };
    let mut model = Model::default();
    for row in a {
        ensure!(row.len() == 4, "fz_a row of {} columns", row.len());
        let id = int(&row[0])?.ok_or_else(|| anyhow!("NULL key in fz_a"))?;
        let new = ARow { x: int(&row[1])?, y: int(&row[2])?, s: row[3].clone() };
        ensure!(model.a.insert(id, new).is_none(), "fz_a returned key {id} twice");
    }
    for row in b {
        ensure!(row.len() == 3, "fz_b row of {} columns", row.len());
        let id = int(&row[0])?.ok_or_else(|| anyhow!("NULL key in fz_b"))?;
        let v = row[2]
            .as_deref()
            .map(|t| t.parse::<f64>().map_err(|e| anyhow!("{t:?}: {e}")))
            .transpose()?;
        ensure!(
            model.b.insert(id, BRow { k: int(&row[1])?, v }).is_none(),
            "fz_b returned key {id} twice"
        );
    }
    Ok(model)
}

/// How `found` differs from `expected`, briefly.
pub(super) fn model_diff(expected: &Model, found: &Model) -> String {
    fn side<R: PartialEq + std::fmt::Debug>(
        name: &str,
        expected: &BTreeMap<i64, R>,
        found: &BTreeMap<i64, R>,
    ) -> Option<String> {
        let missing: Vec<String> = expected
            .iter()
            .filter(|(id, _)| !found.contains_key(id))
            .map(|(id, r)| format!("{id}: {r:?}"))
            .collect();
        let extra: Vec<String> = found
            .iter()
            .filter(|(id, _)| !expected.contains_key(id))
            .map(|(id, r)| format!("{id}: {r:?}"))
            .collect();
        let changed: Vec<String> = expected
            .iter()
            .filter_map(|(id, r)| match found.get(id) {
                Some(f) if f != r => Some(format!("{id}: expected {r:?}, found {f:?}")),
                _ => None,
            })
            .collect();
        if missing.is_empty() && extra.is_empty() && changed.is_empty() {
            return None;
        }
        let few = |v: &[String]| v.iter().take(3).map(|s| clip(s, 120)).collect::<Vec<_>>();
        Some(format!(
            "{name}: {} missing {:?}, {} unexpected {:?}, {} different {:?}",
            missing.len(),
            few(&missing),
            extra.len(),
            few(&extra),
            changed.len(),
            few(&changed)
        ))
    }
    [side("fz_a", &expected.a, &found.a), side("fz_b", &expected.b, &found.b)]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("; ")
}
