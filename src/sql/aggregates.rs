//! Aggregate functions Sluice registers over DataFusion's own.
//!
//! [`min_max_udafs`]: DataFusion's grouped `min` and `max` over floats start from the largest
//! (smallest) finite value, so the `min` of a group holding only `Infinity` came out as
//! `1.7976931348623157e+308` (Postgres: `Infinity`), and a view, which keeps its own min/max,
//! differed from the same query run as a batch query. These wrappers are DataFusion's `min`
//! and `max` with the grouped accumulator turned off for floats; the per-group accumulator
//! they fall back to starts from "no value" and is right.

use std::sync::Arc;

use arrow::datatypes::{DataType, FieldRef};
use datafusion::error::Result;
use datafusion::functions_aggregate::min_max::{max_udaf, min_udaf};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, GroupsAccumulator, ReversedUDAF, SetMonotonicity,
    Signature,
};
use datafusion::scalar::ScalarValue;

/// `min` and `max`, right for floats in groups (see the module docs).
pub fn min_max_udafs() -> Vec<AggregateUDF> {
    [min_udaf(), max_udaf()]
        .into_iter()
        .map(|udaf| {
            AggregateUDF::new_from_impl(FloatSafeMinMax { inner: Arc::clone(udaf.inner()) })
        })
        .collect()
}

/// DataFusion's `min` or `max` without the grouped accumulator for floats.
#[derive(Debug)]
struct FloatSafeMinMax {
    inner: Arc<dyn AggregateUDFImpl>,
}

impl PartialEq for FloatSafeMinMax {
    fn eq(&self, other: &Self) -> bool {
        self.inner.name() == other.inner.name()
    }
}

impl Eq for FloatSafeMinMax {}

impl std::hash::Hash for FloatSafeMinMax {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.inner.name().hash(state);
    }
}

impl AggregateUDFImpl for FloatSafeMinMax {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        self.inner.return_field(arg_fields)
    }

    fn is_nullable(&self) -> bool {
        self.inner.is_nullable()
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.inner.accumulator(args)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        self.inner.state_fields(args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        let float = matches!(
            args.return_field.data_type(),
            DataType::Float16 | DataType::Float32 | DataType::Float64
        );
        !float && self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        self.inner.create_groups_accumulator(args)
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.inner.create_sliding_accumulator(args)
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.order_sensitivity()
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        self.inner.reverse_expr()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
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
