//! Arithmetic over numeric `NaN` and infinities, as Postgres computes it.
//!
//! Sluice stores a numeric `NaN`, `Infinity` and `-Infinity` as the three extreme values of the
//! decimal type ([`crate::types::numeric`]). DataFusion's arithmetic would compute with those
//! values as numbers: `'NaN' - 'NaN'` came out as `0`, `'Infinity' * 0` as `0` and
//! `round('NaN'::numeric, 1)` as a 57-digit number, without a word. Every `+ - * / %`, unary
//! `-`, `abs`, `round`, `trunc`, `ceil` and `floor` over numerics is wrapped in a
//! [`SpecialArith`]: it evaluates the operation's inputs once, and when one holds a special
//! value, computes the operation on the value 1 in its place (so nothing overflows or divides
//! by zero) and then puts Postgres's answer in those rows:
//!
//! ```text
//! a + b, a - b    NaN if either is NaN or infinities of opposite sign meet; else the infinity
//! a * b           NaN if either is NaN or an infinity meets 0; else the signed infinity
//! a / b           NaN if either is NaN or both are infinite; a finite / an infinity is 0;
//!                 an infinity / 0 is a division by zero (22012)
//! a % b           NaN if either is NaN or a is infinite; a finite % an infinity is a;
//!                 an infinity % 0 is a division by zero (22012)
//! -a, abs(a)      the negated (absolute) special value
//! round(a, ..)    a itself, as trunc, ceil and floor
//! log(a)          a itself; no logarithm of -Infinity (22023)
//! ```
//!
//! Batch plans get it through [`crate::sql::checked`], streaming plans where the planner builds
//! their physical expressions, so a view computes what its batch query does.

use std::fmt;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef, i256};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, Operator};
use datafusion::physical_expr::expressions::{BinaryExpr, Column, NegativeExpr};
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use datafusion::scalar::ScalarValue;

use crate::types::numeric::{self, Special};
use crate::types::specials::special_value;

/// What an operation does with a special value (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Neg,
    Abs,
    /// The special value itself (`round`, `trunc`, `ceil`, `floor`).
    Same,
    /// `log(x)`: `NaN` and `Infinity` themselves; no logarithm of `-Infinity`.
    Log,
}

/// `expr` wrapped in a [`SpecialArith`] when it is an operation of the module docs over
/// numerics; `None` otherwise.
pub fn guarded(
    expr: &Arc<dyn PhysicalExpr>,
    schema: &Schema,
) -> Result<Option<Arc<dyn PhysicalExpr>>> {
    let decimal = |e: &Arc<dyn PhysicalExpr>| -> Result<bool> {
        Ok(matches!(e.data_type(schema)?, DataType::Decimal128(..) | DataType::Decimal256(..)))
    };
    let op = if let Some(binary) = expr.downcast_ref::<BinaryExpr>() {
        if !decimal(binary.left())? && !decimal(binary.right())? {
            return Ok(None);
        }
        match binary.op() {
            Operator::Plus => Op::Add,
            Operator::Minus => Op::Sub,
            Operator::Multiply => Op::Mul,
            Operator::Divide => Op::Div,
            Operator::Modulo => Op::Mod,
            _ => return Ok(None),
        }
    } else if let Some(negative) = expr.downcast_ref::<NegativeExpr>() {
        match decimal(negative.arg())? {
            true => Op::Neg,
            false => return Ok(None),
        }
    } else if let Some(function) = expr.downcast_ref::<ScalarFunctionExpr>() {
        let Some(first) = function.args().first() else { return Ok(None) };
        if !decimal(first)? {
            return Ok(None);
        }
        match function.name() {
            "abs" => Op::Abs,
            "round" | "trunc" | "ceil" | "floor" => Op::Same,
            "log" if function.args().len() == 1 => Op::Log,
            _ => return Ok(None),
        }
    } else {
        return Ok(None);
    };
    let children = expr.children();
    let fields: Vec<Field> = children
        .iter()
        .enumerate()
        .map(|(i, c)| Ok(Field::new(format!("c{i}"), c.data_type(schema)?, true)))
        .collect::<Result<_>>()?;
    let columns: Vec<Arc<dyn PhysicalExpr>> =
        (0..fields.len()).map(|i| Arc::new(Column::new(&format!("c{i}"), i)) as _).collect();
    let over_inputs = Arc::clone(expr).with_new_children(columns)?;
    let inputs = Arc::new(Schema::new(fields));
    Ok(Some(Arc::new(SpecialArith { node: Arc::clone(expr), over_inputs, inputs, op })))
}

/// An operation over numerics that answers as Postgres where its inputs hold `NaN` or an
/// infinity (see the module docs).
#[derive(Debug)]
pub struct SpecialArith {
    /// The operation over its own inputs.
    node: Arc<dyn PhysicalExpr>,
    /// The same operation over the columns of a batch of its evaluated inputs.
    over_inputs: Arc<dyn PhysicalExpr>,
    /// That batch's schema.
    inputs: SchemaRef,
    op: Op,
}

/// One input of a row, as the rules need it.
#[derive(Clone, Copy)]
enum Operand {
    Null,
    Special(Special),
    /// A number: its sign (-1, 0 or 1).
    Number(i8),
}

/// What a row with a special input becomes.
enum Outcome {
    Special(Special),
    Zero,
    /// The first input's value.
    Left,
    /// What the operation computed (a NULL input).
    Computed,
}

impl SpecialArith {
    fn batch(&self, columns: Vec<ArrayRef>, rows: usize) -> Result<RecordBatch> {
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        Ok(RecordBatch::try_new_with_options(Arc::clone(&self.inputs), columns, &options)?)
    }
}

/// Postgres's answer for a row of `op` whose inputs are `operands`.
fn outcome(op: Op, operands: &[Operand]) -> Result<Outcome> {
    use Operand::{Null, Number};
    use Special::{Infinity, NaN, NegInfinity};
    let negate = |o: Operand| match o {
        Operand::Special(Infinity) => Operand::Special(NegInfinity),
        Operand::Special(NegInfinity) => Operand::Special(Infinity),
        Number(sign) => Number(-sign),
        other => other,
    };
    let special = |s| Ok(Outcome::Special(s));
    let first = operands.first().copied().unwrap_or(Null);
    let second = operands.get(1).copied().unwrap_or(Null);
    if operands.iter().any(|o| matches!(o, Null)) {
        return Ok(Outcome::Computed);
    }
    let nan = |o: &Operand| matches!(o, Operand::Special(NaN));
    if nan(&first)
        || (nan(&second) && matches!(op, Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Mod))
    {
        return special(NaN);
    }
    let signed = |s: Special, sign: i8| match (s, sign) {
        (Infinity, 1) | (NegInfinity, -1) => Infinity,
        _ => NegInfinity,
    };
    let sign_of = |o: Operand| match o {
        Operand::Special(Infinity) | Number(1) => 1,
        Operand::Special(NegInfinity) | Number(-1) => -1,
        _ => 0,
    };
    match op {
        Op::Add | Op::Sub => {
            let second = if op == Op::Sub { negate(second) } else { second };
            match (first, second) {
                (Operand::Special(a), Operand::Special(b)) if a != b => special(NaN),
                (Operand::Special(s), _) | (_, Operand::Special(s)) => special(s),
                _ => Ok(Outcome::Computed),
            }
        }
        Op::Mul => match (first, second) {
            (Operand::Special(_), Number(0)) | (Number(0), Operand::Special(_)) => special(NaN),
            (Operand::Special(s), o) | (o, Operand::Special(s)) => special(signed(s, sign_of(o))),
            _ => Ok(Outcome::Computed),
        },
        Op::Div => match (first, second) {
            (Operand::Special(_), Operand::Special(_)) => special(NaN),
            (Operand::Special(_), Number(0)) => Err(DataFusionError::ArrowError(
                Box::new(arrow::error::ArrowError::DivideByZero),
                None,
            )),
            (Operand::Special(s), o) => special(signed(s, sign_of(o))),
            (Number(_), Operand::Special(_)) => Ok(Outcome::Zero),
            _ => Ok(Outcome::Computed),
        },
        Op::Mod => match (first, second) {
            (Operand::Special(_), Number(0)) => Err(DataFusionError::ArrowError(
                Box::new(arrow::error::ArrowError::DivideByZero),
                None,
            )),
            (Operand::Special(_), _) => special(NaN),
            (Number(_), Operand::Special(_)) => Ok(Outcome::Left),
            _ => Ok(Outcome::Computed),
        },
        Op::Neg => match negate(first) {
            Operand::Special(s) => special(s),
            _ => Ok(Outcome::Computed),
        },
        Op::Abs => match first {
            Operand::Special(_) => special(Infinity),
            _ => Ok(Outcome::Computed),
        },
        Op::Log => match first {
            Operand::Special(NegInfinity) => {
                Err(DataFusionError::External(Box::new(crate::error::Error::InvalidParameter(
                    "cannot take logarithm of a negative number".into(),
                ))))
            }
            Operand::Special(s) => special(s),
            _ => Ok(Outcome::Computed),
        },
        Op::Same => match first {
            Operand::Special(s) => special(s),
            _ => Ok(Outcome::Computed),
        },
    }
}

/// Each row's value of a decimal input as an [`Operand`], and whether any is special; `None`
/// for another type.
fn operands_of(input: &ArrayRef) -> Option<(Vec<Operand>, bool)> {
    if !matches!(input.data_type(), DataType::Decimal128(..) | DataType::Decimal256(..)) {
        return None;
    }
    let mut any = false;
    let operands = numeric::values(input.as_ref())
        .into_iter()
        .map(|v| match v {
            None => Operand::Null,
            Some(v) => match Special::of_i256(v) {
                Some(s) => {
                    any = true;
                    Operand::Special(s)
                }
                None => Operand::Number(v.signum().as_i128() as i8),
            },
        })
        .collect();
    Some((operands, any))
}

/// `input` (decimal) with 1 in place of each special value.
fn with_ones(input: &ArrayRef, operands: &[Operand]) -> Result<ArrayRef> {
    let (DataType::Decimal128(_, scale) | DataType::Decimal256(_, scale)) = *input.data_type()
    else {
        return Ok(Arc::clone(input));
    };
    let one = i256::from_i128(10).wrapping_pow(scale.max(0) as u32);
    let values = numeric::values(input.as_ref())
        .into_iter()
        .zip(operands)
        .map(|(v, o)| if matches!(o, Operand::Special(_)) { Some(one) } else { v });
    let ones: arrow::array::Decimal256Array = values.collect();
    let ones = ones.with_precision_and_scale(numeric::MAX_PRECISION, scale)?;
    Ok(arrow::compute::cast(&ones, input.data_type())?)
}

impl PartialEq for SpecialArith {
    fn eq(&self, other: &Self) -> bool {
        *self.node == *other.node && self.op == other.op
    }
}

impl Eq for SpecialArith {}

impl std::hash::Hash for SpecialArith {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.node.hash(state);
        self.op.hash(state);
    }
}

impl fmt::Display for SpecialArith {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.node)
    }
}

impl PhysicalExpr for SpecialArith {
    fn return_field(&self, input_schema: &Schema) -> Result<FieldRef> {
        self.node.return_field(input_schema)
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let rows = batch.num_rows();
        let inputs: Vec<ArrayRef> = self
            .node
            .children()
            .iter()
            .map(|c| c.evaluate(batch)?.into_array(rows))
            .collect::<Result<_>>()?;
        // The common case, no special value: one scan of each input, nothing allocated.
        if !inputs.iter().any(|input| numeric::has_special(input.as_ref())) {
            return self.over_inputs.evaluate(&self.batch(inputs, rows)?);
        }
        let operands: Vec<Option<(Vec<Operand>, bool)>> = inputs.iter().map(operands_of).collect();
        let replaced = inputs
            .iter()
            .zip(&operands)
            .map(|(input, o)| match o {
                Some((o, true)) => with_ones(input, o),
                _ => Ok(Arc::clone(input)),
            })
            .collect::<Result<Vec<_>>>()?;
        let out = self.over_inputs.evaluate(&self.batch(replaced, rows)?)?.into_array(rows)?;
        let ty = out.data_type().clone();
        let operand = |input: usize, row: usize| match &operands[input] {
            Some((o, _)) => o[row],
            // Another type (a `round` precision): a number as far as the rules go.
            None => Operand::Number(1),
        };
        let mut patched: Vec<(usize, ScalarValue)> = Vec::new();
        for row in 0..rows {
            let row_operands: Vec<Operand> = (0..inputs.len()).map(|i| operand(i, row)).collect();
            if !row_operands.iter().any(|o| matches!(o, Operand::Special(_))) {
                continue;
            }
            let value = match outcome(self.op, &row_operands)? {
                Outcome::Computed => continue,
                Outcome::Special(s) => {
                    special_value(s, &ty).map_err(|e| DataFusionError::External(Box::new(e)))?
                }
                Outcome::Zero => ScalarValue::new_zero(&ty)?,
                Outcome::Left => ScalarValue::try_from_array(&inputs[0], row)?.cast_to(&ty)?,
            };
            patched.push((row, value));
        }
        if patched.is_empty() {
            return Ok(ColumnarValue::Array(out));
        }
        let values = ScalarValue::iter_to_array(patched.iter().map(|(_, v)| v.clone()))?;
        let mut picks: Vec<(usize, usize)> = (0..rows).map(|row| (0, row)).collect();
        for (i, (row, _)) in patched.iter().enumerate() {
            picks[*row] = (1, i);
        }
        let out = arrow::compute::interleave(&[out.as_ref(), values.as_ref()], &picks)?;
        Ok(ColumnarValue::Array(out))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        self.node.children()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        let node = Arc::clone(&self.node).with_new_children(children)?;
        Ok(Arc::new(SpecialArith {
            node,
            over_inputs: Arc::clone(&self.over_inputs),
            inputs: Arc::clone(&self.inputs),
            op: self.op,
        }))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.node.fmt_sql(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An operand as written in the table: `NaN`, `Inf`, `-Inf`, `0`, `1`, `-1` (a number of
    /// that sign) or `.` (NULL).
    fn operand(text: &str) -> Operand {
        match text {
            "NaN" => Operand::Special(Special::NaN),
            "Inf" => Operand::Special(Special::Infinity),
            "-Inf" => Operand::Special(Special::NegInfinity),
            "." => Operand::Null,
            n => Operand::Number(n.parse().unwrap()),
        }
    }

    fn show(outcome: Result<Outcome>) -> String {
        match outcome {
            Ok(Outcome::Special(s)) => s.text().replace("Infinity", "Inf"),
            Ok(Outcome::Zero) => "0".into(),
            Ok(Outcome::Left) => "a".into(),
            Ok(Outcome::Computed) => "=".into(),
            Err(_) => "error".into(),
        }
    }

    /// Postgres's answers (`a`: the first operand; `=`: what the operation computes).
    #[test]
    fn special_operands_answer_as_postgres() {
        let table = "
            a     b     a+b   a-b   a*b   a/b    a%b
            NaN   1     NaN   NaN   NaN   NaN    NaN
            1     NaN   NaN   NaN   NaN   NaN    NaN
            Inf   Inf   Inf   NaN   Inf   NaN    NaN
            Inf   -Inf  NaN   Inf   -Inf  NaN    NaN
            -Inf  -1    -Inf  -Inf  Inf   Inf    NaN
            Inf   0     Inf   Inf   NaN   error  error
            -1    Inf   Inf   -Inf  -Inf  0      a
            0     -Inf  -Inf  Inf   NaN   0      a
            Inf   .     =     =     =     =      =";
        let ops = [Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Mod];
        for line in table.trim().lines().skip(1) {
            let cells: Vec<&str> = line.split_whitespace().collect();
            let operands = [operand(cells[0]), operand(cells[1])];
            for (op, expected) in ops.iter().zip(&cells[2..]) {
                let got = show(outcome(*op, &operands));
                assert_eq!(&got, expected, "{} {op:?} {}", cells[0], cells[1]);
            }
        }
        let unary = |op, a| show(outcome(op, &[operand(a)]));
        assert_eq!(
            [unary(Op::Neg, "Inf"), unary(Op::Neg, "-Inf"), unary(Op::Neg, "NaN")],
            ["-Inf", "Inf", "NaN"]
        );
        assert_eq!([unary(Op::Abs, "-Inf"), unary(Op::Abs, "NaN")], ["Inf", "NaN"]);
        assert_eq!([unary(Op::Same, "-Inf"), unary(Op::Same, "NaN")], ["-Inf", "NaN"]);
        assert_eq!([unary(Op::Log, "Inf"), unary(Op::Log, "-Inf")], ["Inf", "error"]);
        let round = outcome(Op::Same, &[operand("Inf"), Operand::Number(1)]);
        assert_eq!(show(round), "Inf", "round(Infinity, 1)");
    }
}
