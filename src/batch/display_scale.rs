//! Unconstrained numerics of CDC tables printed with the upstream's own digits (`1.50`, not
//! `1.5`).
//!
//! Postgres keeps each unconstrained `numeric` value's display scale: `1.50` and `1.5` are
//! equal but print differently. Sluice's numerics are decimals of one scale per column, so a
//! CDC table keeps each such column's display scales in a hidden `smallint` column beside it
//! ([`crate::catalog::ColumnCatalog::scale_of`]), filled from the upstream's text.
//!
//! A query whose result columns are such columns, read through filters, sorts, limits,
//! aliases and projections of columns (what `SELECT * FROM t WHERE .. ORDER BY ..` plans to),
//! or their `sum`s (whose display scale is the greatest of their inputs'), reads the hidden
//! columns along ([`with_display_scales`]) and prints each value with its scale through
//! [`NumericText`], whose result the wire protocol sends as a numeric ([`is_marked`]). Any
//! other query (a join, arithmetic on the column, another aggregate) prints the column's values
//! with their own digits, as before.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::datatypes::{DataType, Field, FieldRef, Int16Type};
use datafusion::common::Column;
use datafusion::datasource::provider_as_source;
use datafusion::datasource::source_as_provider;
use datafusion::error::{DataFusionError, Result};
use datafusion::functions_aggregate::min_max::max_udaf;
use datafusion::logical_expr::expr::{AggregateFunction, ScalarFunction};
use datafusion::logical_expr::{
    Aggregate, ColumnarValue, Expr, Filter, Limit, LogicalPlan, Projection, ReturnFieldArgs,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Sort, SubqueryAlias, TableScan,
    TableScanBuilder, Volatility,
};

use super::RelationProvider;
use crate::types::numeric::{self, Special};

/// The metadata value of [`crate::sql::jsonb::TYPE_KEY`] on numeric text.
const NUMERIC_TEXT: &str = "numeric";

/// Whether `field` holds numeric values as text (see the module docs).
pub fn is_marked(field: &Field) -> bool {
    field.metadata().get(crate::sql::jsonb::TYPE_KEY).is_some_and(|t| t == NUMERIC_TEXT)
}

/// `plan` (optimized) printing the display scales of the CDC tables' unconstrained numerics it
/// returns as they are stored; `None` when it returns none.
pub fn with_display_scales(plan: &LogicalPlan) -> Result<Option<LogicalPlan>> {
    let (traced, scales) = trace(plan)?;
    if scales.is_empty() {
        return Ok(None);
    }
    let schema = plan.schema();
    let traced_schema = traced.schema().clone();
    let column = |i: usize| Expr::Column(Column::from(traced_schema.qualified_field(i)));
    let exprs = (0..schema.fields().len())
        .map(|i| {
            let (qualifier, field) = schema.qualified_field(i);
            let expr = match scales.get(&i) {
                Some(&scale) => Expr::ScalarFunction(ScalarFunction::new_udf(
                    Arc::new(ScalarUDF::from(NumericText::new())),
                    vec![column(i), column(scale)],
                )),
                None => return column(i),
            };
            expr.alias_qualified(qualifier.cloned(), field.name())
        })
        .collect();
    Ok(Some(LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(traced))?)))
}

/// `plan` returning, after its own columns, the display scale column of each it returns that
/// has one; and which: output column -> its scale's column.
pub fn trace(plan: &LogicalPlan) -> Result<(LogicalPlan, HashMap<usize, usize>)> {
    let untouched = || Ok((plan.clone(), HashMap::new()));
    match plan {
        LogicalPlan::TableScan(scan) => {
            trace_scan(scan).map(|t| t.unwrap_or((plan.clone(), HashMap::new())))
        }
        LogicalPlan::Filter(filter) => {
            let (input, scales) = trace(&filter.input)?;
            let filter = Filter::try_new(filter.predicate.clone(), Arc::new(input))?;
            Ok((LogicalPlan::Filter(filter), scales))
        }
        LogicalPlan::Sort(sort) => {
            let (input, scales) = trace(&sort.input)?;
            let sort = Sort { expr: sort.expr.clone(), input: Arc::new(input), fetch: sort.fetch };
            Ok((LogicalPlan::Sort(sort), scales))
        }
        LogicalPlan::Limit(limit) => {
            let (input, scales) = trace(&limit.input)?;
            let limit = Limit {
                skip: limit.skip.clone(),
                fetch: limit.fetch.clone(),
                input: Arc::new(input),
            };
            Ok((LogicalPlan::Limit(limit), scales))
        }
        LogicalPlan::SubqueryAlias(alias) => {
            let (input, scales) = trace(&alias.input)?;
            let alias = SubqueryAlias::try_new(Arc::new(input), alias.alias.clone())?;
            Ok((LogicalPlan::SubqueryAlias(alias), scales))
        }
        LogicalPlan::Projection(projection) => {
            let (input, input_scales) = trace(&projection.input)?;
            if input_scales.is_empty() {
                return untouched();
            }
            let original = projection.input.schema();
            let mut exprs = projection.expr.clone();
            let mut scales = HashMap::new();
            for (out, expr) in projection.expr.iter().enumerate() {
                let column = match expr {
                    Expr::Column(c) => c,
                    Expr::Alias(alias) => match alias.expr.as_ref() {
                        Expr::Column(c) => c,
                        _ => continue,
                    },
                    _ => continue,
                };
                let Ok(at) = original.index_of_column(column) else { continue };
                let Some(&scale) = input_scales.get(&at) else { continue };
                // One per output column, so a column read twice has two (named apart).
                let read = Expr::Column(Column::from(input.schema().qualified_field(scale)));
                scales.insert(out, exprs.len());
                exprs.push(read.alias(format!("_sluice_scale_{out}")));
            }
            let projection = Projection::try_new(exprs, Arc::new(input))?;
            Ok((LogicalPlan::Projection(projection), scales))
        }
        LogicalPlan::Aggregate(aggregate) => trace_aggregate(aggregate),
        _ => untouched(),
    }
}

/// An aggregate whose `sum`s of columns with display scales also take the greatest of their
/// scales: Postgres's sum has the largest display scale of its inputs (`1.50 + 2.5` is `4.00`).
fn trace_aggregate(aggregate: &Aggregate) -> Result<(LogicalPlan, HashMap<usize, usize>)> {
    let plain = |e: &Expr| !matches!(e, Expr::GroupingSet(_));
    let (input, input_scales) = trace(&aggregate.input)?;
    if input_scales.is_empty() || !aggregate.group_expr.iter().all(plain) {
        return Ok((LogicalPlan::Aggregate(aggregate.clone()), HashMap::new()));
    }
    let original = aggregate.input.schema();
    let groups = aggregate.group_expr.len();
    let mut aggr_expr = aggregate.aggr_expr.clone();
    let mut scales = HashMap::new();
    for (k, expr) in aggregate.aggr_expr.iter().enumerate() {
        let call = match expr {
            Expr::Alias(alias) => alias.expr.as_ref(),
            other => other,
        };
        let Expr::AggregateFunction(f) = call else { continue };
        let p = &f.params;
        let plain_call = !p.distinct && p.filter.is_none() && p.order_by.is_empty();
        let (true, "sum", [Expr::Column(column)]) = (plain_call, f.func.name(), p.args.as_slice())
        else {
            continue;
        };
        let Ok(at) = original.index_of_column(column) else { continue };
        let Some(&scale) = input_scales.get(&at) else { continue };
        let read = Expr::Column(Column::from(input.schema().qualified_field(scale)));
        let greatest = Expr::AggregateFunction(AggregateFunction::new_udf(
            max_udaf(),
            vec![read],
            false,
            None,
            vec![],
            None,
        ));
        scales.insert(groups + k, groups + aggr_expr.len());
        aggr_expr.push(greatest.alias(format!("_sluice_scale_{}", groups + k)));
    }
    let group_expr = aggregate.group_expr.clone();
    let traced = Aggregate::try_new(Arc::new(input), group_expr, aggr_expr)?;
    Ok((LogicalPlan::Aggregate(traced), scales))
}

/// A scan of a relation whose projected columns have display scale columns, reading them too.
fn trace_scan(scan: &TableScan) -> Result<Option<(LogicalPlan, HashMap<usize, usize>)>> {
    let Ok(provider) = source_as_provider(&scan.source) else { return Ok(None) };
    let Some(relation) = provider.as_ref().downcast_ref::<RelationProvider>() else {
        return Ok(None);
    };
    let Some(with_scales) = relation.with_display_scales() else { return Ok(None) };
    let projection: Vec<usize> = match &scan.projection {
        Some(p) => p.clone(),
        None => (0..relation.schema.fields().len()).collect(),
    };
    let mut extended = projection.clone();
    let mut scales = HashMap::new();
    for (out, &column) in projection.iter().enumerate() {
        if let Some(scale) = with_scales.scale_column(column) {
            scales.insert(out, extended.len());
            extended.push(scale);
        }
    }
    if scales.is_empty() {
        return Ok(None);
    }
    let scan =
        TableScanBuilder::new(scan.table_name.clone(), provider_as_source(Arc::new(with_scales)))
            .with_projection(Some(extended))
            .with_filters(scan.filters.clone())
            .with_fetch(scan.fetch)
            .build()?;
    Ok(Some((LogicalPlan::TableScan(scan), scales)))
}

/// `numeric_text(value, scale)`: a numeric printed with `scale` fraction digits (its own where
/// `scale` is NULL), marked as numeric text.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct NumericText {
    signature: Signature,
}

impl NumericText {
    /// The function.
    pub fn new() -> Self {
        Self { signature: Signature::any(2, Volatility::Immutable) }
    }
}

impl Default for NumericText {
    fn default() -> Self {
        Self::new()
    }
}

impl ScalarUDFImpl for NumericText {
    fn name(&self) -> &str {
        "numeric_text"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let nullable = args.arg_fields.first().is_none_or(|f| f.is_nullable());
        let mut metadata = std::collections::HashMap::new();
        metadata.insert(crate::sql::jsonb::TYPE_KEY.to_owned(), NUMERIC_TEXT.to_owned());
        Ok(Arc::new(Field::new(self.name(), DataType::Utf8, nullable).with_metadata(metadata)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        Ok(ColumnarValue::Array(numeric_texts(&arrays[0], &arrays[1])?))
    }
}

/// Each value of the decimal column `values` printed with its scale in `scales`.
fn numeric_texts(values: &ArrayRef, scales: &ArrayRef) -> Result<ArrayRef> {
    let (precision, scale) = match values.data_type() {
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => (*p, *s),
        other => return Err(DataFusionError::Internal(format!("numeric_text of {other}"))),
    };
    let scales = scales
        .as_primitive_opt::<Int16Type>()
        .ok_or_else(|| DataFusionError::Internal("numeric_text scales".into()))?;
    let digits = numeric::digits_of(precision, scale);
    let texts: StringArray = numeric::values(values.as_ref())
        .into_iter()
        .enumerate()
        .map(|(row, v)| {
            let v = v?;
            if Special::of_i256(v).is_some() || scales.is_null(row) {
                return Some(numeric::text(v, scale, digits));
            }
            Some(with_scale(&numeric::number_text(v, scale), scales.value(row).max(0) as usize))
        })
        .collect();
    Ok(Arc::new(texts))
}

/// A number's text (`12.3400`) with exactly `digits` fraction digits, cut or padded with zeros.
fn with_scale(text: &str, digits: usize) -> String {
    let (int, fraction) = text.split_once('.').unwrap_or((text, ""));
    match digits {
        0 => int.to_owned(),
        _ if fraction.len() >= digits => format!("{int}.{}", &fraction[..digits]),
        _ => format!("{int}.{fraction}{}", "0".repeat(digits - fraction.len())),
    }
}

/// Numeric text (see [`NumericText`]) in Postgres's binary numeric form, its display scale
/// kept.
pub fn binaries(column: &dyn Array) -> arrow::array::BinaryArray {
    let Some(texts) = column.as_string_opt::<i32>() else {
        return std::iter::repeat_n(None::<Vec<u8>>, column.len()).collect();
    };
    texts
        .iter()
        .map(|t| {
            let t = t?;
            if let Some(special) = Special::parse(t) {
                return Some(numeric::binary(special.as_i256(), 0, numeric::Digits::Scale));
            }
            let scale = scale_of_text(t);
            let v = arrow::datatypes::i256::from_string(&t.replace('.', ""))?;
            Some(numeric::binary(v, scale as i8, numeric::Digits::Scale))
        })
        .collect()
}

/// The display scale of a numeric as the upstream prints it (`1.50`: 2; `NaN`, `7`: 0).
pub fn scale_of_text(text: &str) -> i16 {
    text.split_once('.').map_or(0, |(_, fraction)| fraction.len() as i16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_prints_with_its_own_scale() {
        assert_eq!(with_scale("1.50000", 2), "1.50");
        assert_eq!(with_scale("-0.01000", 4), "-0.0100");
        assert_eq!(with_scale("12.00000", 0), "12");
        assert_eq!(with_scale("3.1", 5), "3.10000");
        assert_eq!(with_scale("42", 2), "42.00");
        assert_eq!(scale_of_text("1.50"), 2);
        assert_eq!(scale_of_text("-7"), 0);
        assert_eq!(scale_of_text("NaN"), 0);
    }

    #[test]
    fn numeric_text_goes_out_in_binary_with_its_scale() {
        let texts: ArrayRef = Arc::new(StringArray::from(vec![Some("1.50"), Some("NaN"), None]));
        let binary = binaries(texts.as_ref());
        // ndigits 2, weight 0, sign +, dscale 2: 1, 5000.
        assert_eq!(binary.value(0), [0, 2, 0, 0, 0, 0, 0, 2, 0, 1, 0x13, 0x88]);
        assert_eq!(binary.value(1), [0, 0, 0, 0, 0xC0, 0, 0, 0]);
        assert!(binary.is_null(2));
    }
}
