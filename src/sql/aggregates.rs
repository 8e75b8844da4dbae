//! Aggregate functions Sluice registers over DataFusion's own, each DataFusion's with one
//! thing changed ([`Fix`]).
//!
//! - `min` and `max` ([`Fix::FloatMinMax`]): DataFusion's grouped `min` and `max` over floats
//!   start from the largest (smallest) finite value, so the `min` of a group holding only
//!   `Infinity` came out as `1.7976931348623157e+308` (Postgres: `Infinity`), and a view,
//!   which keeps its own min/max, differed from the same query run as a batch query. The
//!   grouped accumulator is turned off for floats; the per-group accumulator they fall back to
//!   starts from "no value" and is right.
//! - `sum` and `avg` of numerics ([`Fix::NumericSpecials`]): Sluice stores a numeric `NaN` and
//!   the infinities as the extreme values of the decimal type ([`crate::types::numeric`]);
//!   DataFusion added those up as numbers, and `sum` of `1`, `NaN` and `Infinity` came out as
//!   `0.99999999999999999997`. The special inputs are counted apart and the finite ones added
//!   up by DataFusion's own accumulators, the result being Postgres's
//!   ([`crate::types::specials`]), as a view's sums count them.
//! - `avg` of numerics and integers ([`Fix::NumericAvg`]): a numeric, `sum / count` with
//!   Postgres's digits ([`crate::types::quotient`]). DataFusion's kept four digits more than
//!   the argument's scale and truncated (`avg` of `1.50`, `2.25` and `3.125` was
//!   `2.291666`, Postgres `2.2916666666666667`), and averaged integers in floating point
//!   (`2.3333333333333335`, Postgres's numeric `2.3333333333333333`). Floats stay floats.
//! - `variance`: Postgres's name for DataFusion's `var_samp`.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Decimal256Array, Int64Array};
use arrow::datatypes::{DataType, Field, FieldRef, Int64Type, UInt64Type, i256};
use datafusion::error::Result;
use datafusion::functions_aggregate::average::avg_udaf;
use datafusion::functions_aggregate::min_max::{max_udaf, min_udaf};
use datafusion::functions_aggregate::sum::sum_udaf;
use datafusion::functions_aggregate::variance::var_samp_udaf;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, ReversedUDAF,
    SetMonotonicity, Signature,
};
use datafusion::scalar::ScalarValue;

use crate::types::numeric::{self, Special};
use crate::types::quotient;
use crate::types::specials::{
    Specials, special_index, special_of_counts, special_output, split_specials,
};

/// The aggregate functions that replace DataFusion's (see the module docs).
pub fn udafs() -> Vec<AggregateUDF> {
    let fixed = |udaf: Arc<AggregateUDF>, fix| {
        let signature = match fix {
            // Integers go to numerics, not floats ([`Fixed::coerce_types`]).
            Fix::NumericAvg => Signature::user_defined(udaf.signature().volatility),
            _ => udaf.signature().clone(),
        };
        AggregateUDF::new_from_impl(Fixed { inner: Arc::clone(udaf.inner()), fix, signature })
    };
    vec![
        fixed(min_udaf(), Fix::FloatMinMax),
        fixed(max_udaf(), Fix::FloatMinMax),
        fixed(sum_udaf(), Fix::NumericSpecials),
        fixed(avg_udaf(), Fix::NumericAvg),
        // Postgres's name for the sample variance.
        var_samp_udaf().as_ref().clone().with_aliases(["variance"]),
    ]
}

/// What a [`Fixed`] aggregate changes of DataFusion's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Fix {
    /// No grouped accumulator over floats.
    FloatMinMax,
    /// Numeric `NaN` and infinities counted apart.
    NumericSpecials,
    /// [`Fix::NumericSpecials`], and the average of numerics and integers a quotient.
    NumericAvg,
}

/// A DataFusion aggregate function with a [`Fix`].
#[derive(Debug)]
struct Fixed {
    inner: Arc<dyn AggregateUDFImpl>,
    fix: Fix,
    signature: Signature,
}

impl Fixed {
    /// Whether the fix applies to a call returning `ty` (`sum` and `avg` of numerics return
    /// numerics).
    fn counts_specials(&self, ty: &DataType) -> bool {
        matches!(self.fix, Fix::NumericSpecials | Fix::NumericAvg)
            && matches!(ty, DataType::Decimal128(..) | DataType::Decimal256(..))
    }

    /// Whether a call with these (coerced) argument types is an average that is a quotient.
    fn quotient(&self, arg_types: &[DataType]) -> bool {
        self.fix == Fix::NumericAvg
            && matches!(
                arg_types.first(),
                Some(DataType::Decimal128(..) | DataType::Decimal256(..))
            )
    }

    /// DataFusion's return field for a call, where [`Fixed::quotient`] changes it.
    fn inner_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        self.inner.return_field(arg_fields)
    }

    /// `args` with DataFusion's return field, and the argument's display digits when the call
    /// is a quotient.
    fn inner_args<'a>(
        &self,
        args: AccumulatorArgs<'a>,
    ) -> Result<(AccumulatorArgs<'a>, Option<numeric::Digits>)> {
        let types: Vec<DataType> = args.expr_fields.iter().map(|f| f.data_type().clone()).collect();
        if !self.quotient(&types) {
            return Ok((args, None));
        }
        let digits = match types[0] {
            DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => numeric::digits_of(p, s),
            _ => unreachable!("checked by quotient"),
        };
        let return_field = self.inner_field(args.expr_fields)?;
        Ok((AccumulatorArgs { return_field, ..args }, Some(digits)))
    }
}

impl PartialEq for Fixed {
    fn eq(&self, other: &Self) -> bool {
        self.inner.name() == other.inner.name()
    }
}

impl Eq for Fixed {}

impl std::hash::Hash for Fixed {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.inner.name().hash(state);
    }
}

impl AggregateUDFImpl for Fixed {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match self.quotient(arg_types) {
            true => Ok(quotient::TYPE),
            false => self.inner.return_type(arg_types),
        }
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        let field = self.inner.return_field(arg_fields)?;
        let types: Vec<DataType> = arg_fields.iter().map(|f| f.data_type().clone()).collect();
        Ok(match self.quotient(&types) {
            true => Arc::new(field.as_ref().clone().with_data_type(quotient::TYPE)),
            false => field,
        })
    }

    fn is_nullable(&self) -> bool {
        self.inner.is_nullable()
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let ty = args.return_field.data_type().clone();
        let distinct = args.is_distinct;
        let (args, quotient) = self.inner_args(args)?;
        let mut inner = self.inner.accumulator(args)?;
        if let Some(digits) = quotient {
            inner = Box::new(Average { inner, digits, distinct });
        }
        Ok(match self.counts_specials(&ty) {
            true => Box::new(CountingSpecials { inner, specials: [0; 3], ty }),
            false => inner,
        })
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let counts = self.counts_specials(args.return_field.data_type());
        let types: Vec<DataType> =
            args.input_fields.iter().map(|f| f.data_type().clone()).collect();
        let args = match self.quotient(&types) {
            true => StateFieldsArgs { return_field: self.inner_field(args.input_fields)?, ..args },
            false => args,
        };
        let mut fields = self.inner.state_fields(args)?;
        if counts {
            for name in ["nan", "posinf", "neginf"] {
                fields.push(Arc::new(Field::new(name, DataType::Int64, true)));
            }
        }
        Ok(fields)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        let float = matches!(
            args.return_field.data_type(),
            DataType::Float16 | DataType::Float32 | DataType::Float64
        );
        let Ok((args, _)) = self.inner_args(args) else { return false };
        !(float && self.fix == Fix::FloatMinMax) && self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        let ty = args.return_field.data_type().clone();
        let (args, quotient) = self.inner_args(args)?;
        let mut inner = self.inner.create_groups_accumulator(args)?;
        if let Some(digits) = quotient {
            inner = Box::new(GroupsAverage { inner, digits });
        }
        Ok(match self.counts_specials(&ty) {
            true => Box::new(GroupsCountingSpecials { inner, specials: Vec::new() }),
            false => inner,
        })
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let ty = args.return_field.data_type().clone();
        let distinct = args.is_distinct;
        let (args, quotient) = self.inner_args(args)?;
        let mut inner = self.inner.create_sliding_accumulator(args)?;
        if let Some(digits) = quotient {
            inner = Box::new(Average { inner, digits, distinct });
        }
        Ok(match self.counts_specials(&ty) {
            true => Box::new(CountingSpecials { inner, specials: [0; 3], ty }),
            false => inner,
        })
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.order_sensitivity()
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        self.inner.reverse_expr()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match (self.fix, arg_types) {
            // Integers are averaged as numerics of no fraction digits, exactly; floats and
            // durations as DataFusion averages them.
            (Fix::NumericAvg, [t]) if t.is_integer() => Ok(vec![DataType::Decimal128(20, 0)]),
            (Fix::NumericAvg, [t @ (DataType::Decimal128(..) | DataType::Decimal256(..))]) => {
                Ok(vec![t.clone()])
            }
            (Fix::NumericAvg, [t @ DataType::Duration(_)]) => Ok(vec![t.clone()]),
            (Fix::NumericAvg, [t]) if t.is_floating() || t.is_null() => Ok(vec![DataType::Float64]),
            (Fix::NumericAvg, [t]) => Err(datafusion::error::DataFusionError::Plan(format!(
                "function avg({t}) does not exist: avg takes a number or an interval"
            ))),
            _ => self.inner.coerce_types(arg_types),
        }
    }

    fn is_descending(&self) -> Option<bool> {
        self.inner.is_descending()
    }

    fn default_value(&self, data_type: &DataType) -> Result<ScalarValue> {
        self.inner.default_value(data_type)
    }

    fn set_monotonicity(&self, data_type: &DataType) -> SetMonotonicity {
        self.inner.set_monotonicity(data_type)
    }
}

/// Which rows of a call's argument are special values (counted apart), and the argument
/// without them.
fn without_specials(values: &[ArrayRef]) -> (Vec<ArrayRef>, Vec<Option<Special>>) {
    let mut values = values.to_vec();
    let (finite, specials) = split_specials(values[0].clone());
    values[0] = finite;
    (values, specials.unwrap_or_default())
}

/// The three special-value counts at the end of a state (`states`), as columns.
fn special_counts(states: &[ArrayRef]) -> Result<(&[ArrayRef], [&Int64Array; 3])> {
    let n = states.len().saturating_sub(3);
    let count = |k: usize| {
        states.get(n + k).and_then(|a| a.as_primitive_opt::<Int64Type>()).ok_or_else(|| {
            datafusion::error::DataFusionError::Internal("a state without special counts".into())
        })
    };
    Ok((&states[..n], [count(0)?, count(1)?, count(2)?]))
}

/// A numeric `sum` or `avg` of one group, counting special inputs apart (see the module docs).
#[derive(Debug)]
struct CountingSpecials {
    inner: Box<dyn Accumulator>,
    specials: Specials,
    /// The result type.
    ty: DataType,
}

impl CountingSpecials {
    /// Counts the special values of `values` (signed), and returns the rest.
    fn count(&mut self, values: &[ArrayRef], sign: i64) -> Vec<ArrayRef> {
        let (finite, specials) = without_specials(values);
        for special in specials.into_iter().flatten() {
            self.specials[special_index(special)] += sign;
        }
        finite
    }
}

impl Accumulator for CountingSpecials {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let finite = self.count(values, 1);
        self.inner.update_batch(&finite)
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let finite = self.count(values, -1);
        self.inner.retract_batch(&finite)
    }

    fn supports_retract_batch(&self) -> bool {
        self.inner.supports_retract_batch()
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        match special_output(&self.specials, &self.ty) {
            Ok(Some(special)) => Ok(special),
            Ok(None) => self.inner.evaluate(),
            Err(e) => Err(datafusion::error::DataFusionError::External(Box::new(e))),
        }
    }

    fn size(&self) -> usize {
        self.inner.size() + size_of::<Specials>()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let mut state = self.inner.state()?;
        state.extend(self.specials.map(|n| ScalarValue::Int64(Some(n))));
        Ok(state)
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let (inner, counts) = special_counts(states)?;
        for (k, column) in counts.iter().enumerate() {
            self.specials[k] += column.iter().flatten().sum::<i64>();
        }
        self.inner.merge_batch(inner)
    }
}

/// [`CountingSpecials`] for many groups at once.
struct GroupsCountingSpecials {
    inner: Box<dyn GroupsAccumulator>,
    /// Per group.
    specials: Vec<Specials>,
}

impl GroupsAccumulator for GroupsCountingSpecials {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.specials.resize(total_num_groups, [0; 3]);
        let (finite, specials) = without_specials(values);
        let counted = |row: usize| opt_filter.is_none_or(|f| f.is_valid(row) && f.value(row));
        for (row, special) in specials.into_iter().enumerate() {
            if let Some(special) = special
                && counted(row)
            {
                self.specials[group_indices[row]][special_index(special)] += 1;
            }
        }
        self.inner.update_batch(&finite, group_indices, opt_filter, total_num_groups)
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let specials = emit_to.take_needed(&mut self.specials);
        let out = self.inner.evaluate(emit_to)?;
        let specials: Vec<Option<Special>> = specials.iter().map(special_of_counts).collect();
        Ok(match specials.iter().any(Option::is_some) {
            true => numeric::patched(&out, &specials),
            false => out,
        })
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let specials = emit_to.take_needed(&mut self.specials);
        let mut state = self.inner.state(emit_to)?;
        for k in 0..3 {
            state.push(Arc::new(Int64Array::from_iter_values(specials.iter().map(|s| s[k]))));
        }
        Ok(state)
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.specials.resize(total_num_groups, [0; 3]);
        let (inner, counts) = special_counts(values)?;
        for (k, column) in counts.iter().enumerate() {
            for (row, &group) in group_indices.iter().enumerate() {
                self.specials[group][k] += column.value(row);
            }
        }
        self.inner.merge_batch(inner, group_indices, total_num_groups)
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let (finite, specials) = without_specials(values);
        let mut state = self.inner.convert_to_state(&finite, opt_filter)?;
        let counted = |row: usize| opt_filter.is_none_or(|f| f.is_valid(row) && f.value(row));
        for k in 0..3 {
            let count = |row: usize| {
                let special = specials.get(row).copied().flatten();
                i64::from(special.is_some_and(|s| special_index(s) == k) && counted(row))
            };
            state.push(Arc::new(Int64Array::from_iter_values((0..values[0].len()).map(count))));
        }
        Ok(state)
    }

    fn size(&self) -> usize {
        self.inner.size() + self.specials.capacity() * size_of::<Specials>()
    }
}

/// `sum / count` as Postgres divides them: the sum of `digits`-printing numerics, at `scale`.
fn average(sum: i256, scale: i8, digits: numeric::Digits, count: u64) -> Result<Option<i256>> {
    quotient::average(sum, scale, digits, count).map_err(|_| {
        datafusion::error::DataFusionError::ArrowError(
            Box::new(arrow::error::ArrowError::ArithmeticOverflow(
                "numeric field overflow: the average has more than 55 integer digits".into(),
            )),
            None,
        )
    })
}

/// The scale of a decimal state column.
fn decimal_scale(column: &ArrayRef) -> i8 {
    match column.data_type() {
        DataType::Decimal128(_, s) | DataType::Decimal256(_, s) => *s,
        _ => 0,
    }
}

/// An `avg` whose result is a quotient: DataFusion's accumulator adds up; its state, the count
/// and the exact sum (or the distinct values), is divided as Postgres divides.
#[derive(Debug)]
struct Average {
    inner: Box<dyn Accumulator>,
    /// How the argument prints (its sum's display scale).
    digits: numeric::Digits,
    /// DISTINCT: the state is the list of distinct values.
    distinct: bool,
}

impl Accumulator for Average {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.inner.update_batch(values)
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.inner.retract_batch(values)
    }

    fn supports_retract_batch(&self) -> bool {
        self.inner.supports_retract_batch()
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let state = self.inner.state()?;
        let (sum, scale, count) = match (self.distinct, state.as_slice()) {
            (true, [ScalarValue::List(list)]) => {
                let values = list.value(0);
                let scale = decimal_scale(&values);
                let sum = numeric::values(values.as_ref())
                    .into_iter()
                    .flatten()
                    .fold(i256::ZERO, |a, v| a.wrapping_add(v));
                (sum, scale, values.len() as u64 - values.null_count() as u64)
            }
            (false, [count, sum]) => {
                let count = match count {
                    ScalarValue::UInt64(c) => c.unwrap_or(0),
                    other => return Err(internal(format!("an average's count {other}"))),
                };
                let (sum, scale) = match *sum {
                    ScalarValue::Decimal128(v, _, s) => (i256::from_i128(v.unwrap_or(0)), s),
                    ScalarValue::Decimal256(v, _, s) => (v.unwrap_or(i256::ZERO), s),
                    ref other => return Err(internal(format!("an average's sum {other}"))),
                };
                (sum, scale, count)
            }
            (_, other) => return Err(internal(format!("an average's state {other:?}"))),
        };
        let q = average(sum, scale, self.digits, count)?;
        Ok(ScalarValue::Decimal256(q, quotient::PRECISION, quotient::SCALE))
    }

    fn size(&self) -> usize {
        self.inner.size()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.inner.state()
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.inner.merge_batch(states)
    }
}

/// [`Average`] for many groups at once.
struct GroupsAverage {
    inner: Box<dyn GroupsAccumulator>,
    digits: numeric::Digits,
}

impl GroupsAccumulator for GroupsAverage {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.inner.update_batch(values, group_indices, opt_filter, total_num_groups)
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let state = self.inner.state(emit_to)?;
        let [counts, sums] = state.as_slice() else {
            return Err(internal(format!("an average's state of {} columns", state.len())));
        };
        let counts = counts
            .as_primitive_opt::<UInt64Type>()
            .ok_or_else(|| internal("an average's counts".into()))?;
        let scale = decimal_scale(sums);
        let out = numeric::values(sums.as_ref())
            .into_iter()
            .enumerate()
            .map(|(row, sum)| match (sum, counts.is_valid(row)) {
                (Some(sum), true) => average(sum, scale, self.digits, counts.value(row)),
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;
        let out = Decimal256Array::from(out)
            .with_precision_and_scale(quotient::PRECISION, quotient::SCALE)?;
        Ok(Arc::new(out))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        self.inner.state(emit_to)
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.inner.merge_batch(values, group_indices, total_num_groups)
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        self.inner.convert_to_state(values, opt_filter)
    }

    fn size(&self) -> usize {
        self.inner.size()
    }
}

/// An internal error.
fn internal(message: String) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::Internal(message)
}
