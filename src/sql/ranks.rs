//! `row_number()`, `rank()`, `dense_rank()` and `ntile()` typed as Postgres types them.
//!
//! DataFusion's ranking window functions return `UInt64`, a type Postgres lacks: a query printed
//! their type as `UInt64` and a view stored them as `numeric(20, 0)`. Postgres returns `bigint`
//! for the first three and `integer` for `ntile`. [`udwfs`] registers each under its own name
//! over DataFusion's, with the same evaluation and the result cast; in batch queries and in
//! views alike (a view's window operator evaluates the same functions).

use std::ops::Range;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::error::Result;
use datafusion::logical_expr::function::{
    ExpressionArgs, PartitionEvaluatorArgs, WindowUDFFieldArgs,
};
use datafusion::logical_expr::window_state::WindowAggState;
use datafusion::logical_expr::{
    LimitEffect, PartitionEvaluator, ReversedUDWF, Signature, WindowUDF, WindowUDFImpl,
};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::scalar::ScalarValue;

/// The ranking functions, typed as Postgres types them, to register over DataFusion's.
pub fn udwfs() -> Vec<WindowUDF> {
    use datafusion::functions_window::{ntile, rank, row_number};
    [
        (row_number::row_number_udwf(), DataType::Int64),
        (rank::rank_udwf(), DataType::Int64),
        (rank::dense_rank_udwf(), DataType::Int64),
        (ntile::ntile_udwf(), DataType::Int32),
    ]
    .into_iter()
    .map(|(inner, output)| WindowUDF::new_from_impl(Typed { inner: (*inner).clone(), output }))
    .collect()
}

/// A window function whose results are cast to `output`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Typed {
    inner: WindowUDF,
    output: DataType,
}

impl WindowUDFImpl for Typed {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn expressions(&self, expr_args: ExpressionArgs) -> Vec<Arc<dyn PhysicalExpr>> {
        self.inner.inner().expressions(expr_args)
    }

    fn partition_evaluator(
        &self,
        args: PartitionEvaluatorArgs,
    ) -> Result<Box<dyn PartitionEvaluator>> {
        let inner = self.inner.inner().partition_evaluator(args)?;
        Ok(Box::new(TypedEvaluator { inner, output: self.output.clone() }))
    }

    fn field(&self, field_args: WindowUDFFieldArgs) -> Result<FieldRef> {
        let inner = self.inner.inner().field(field_args)?;
        Ok(Arc::new(Field::new(inner.name(), self.output.clone(), inner.is_nullable())))
    }

    fn sort_options(&self) -> Option<arrow::compute::SortOptions> {
        self.inner.inner().sort_options()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.inner().coerce_types(arg_types)
    }

    fn reverse_expr(&self) -> ReversedUDWF {
        match self.inner.inner().reverse_expr() {
            ReversedUDWF::Identical => ReversedUDWF::Identical,
            // A reversed function of DataFusion's own would be typed as DataFusion types it.
            _ => ReversedUDWF::NotSupported,
        }
    }

    fn limit_effect(&self, args: &[Arc<dyn PhysicalExpr>]) -> LimitEffect {
        self.inner.inner().limit_effect(args)
    }
}

/// An evaluator whose results are cast to `output`.
#[derive(Debug)]
struct TypedEvaluator {
    inner: Box<dyn PartitionEvaluator>,
    output: DataType,
}

impl TypedEvaluator {
    fn cast(&self, values: ArrayRef) -> Result<ArrayRef> {
        Ok(arrow::compute::cast(&values, &self.output)?)
    }
}

impl PartitionEvaluator for TypedEvaluator {
    fn memoize(&mut self, state: &mut WindowAggState) -> Result<()> {
        self.inner.memoize(state)
    }

    fn get_range(&self, idx: usize, n_rows: usize) -> Result<Range<usize>> {
        self.inner.get_range(idx, n_rows)
    }

    fn is_causal(&self) -> bool {
        self.inner.is_causal()
    }

    fn evaluate_all(&mut self, values: &[ArrayRef], num_rows: usize) -> Result<ArrayRef> {
        let values = self.inner.evaluate_all(values, num_rows)?;
        self.cast(values)
    }

    fn evaluate(&mut self, values: &[ArrayRef], range: &Range<usize>) -> Result<ScalarValue> {
        self.inner.evaluate(values, range)?.cast_to(&self.output)
    }

    fn evaluate_all_with_rank(
        &self,
        num_rows: usize,
        ranks_in_partition: &[Range<usize>],
    ) -> Result<ArrayRef> {
        self.cast(self.inner.evaluate_all_with_rank(num_rows, ranks_in_partition)?)
    }

    fn supports_bounded_execution(&self) -> bool {
        self.inner.supports_bounded_execution()
    }

    fn uses_window_frame(&self) -> bool {
        self.inner.uses_window_frame()
    }

    fn include_rank(&self) -> bool {
        self.inner.include_rank()
    }
}
