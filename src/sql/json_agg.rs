//! `to_jsonb(x)` / `to_json(x)`, and the aggregates `jsonb_agg(x)` / `json_agg(x)` written with
//! them as a `string_agg`, which views maintain:
//!
//! ```text
//! jsonb_agg(x ORDER BY o)  =>  ('[' || string_agg(coalesce(to_jsonb(x)::text, 'null'), ', '
//!                               ORDER BY o) || ']')::jsonb   (json_agg: ::json)
//! ```
//!
//! NULL inputs are `null` elements and no rows give NULL, as in Postgres. Values are written as
//! Postgres's `to_jsonb` writes them: numbers as numbers (`NaN` and the infinities as strings),
//! booleans, text as JSON strings, dates and timestamps as ISO 8601 strings
//! (`"2024-01-01T10:00:00"`), intervals and times as they print, jsonb as itself.

use std::ops::ControlFlow;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::datatypes::{DataType, TimeUnit};
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// `to_jsonb` (and its other name, `to_json`), to register.
pub fn udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(ToJsonb { signature: Signature::any(1, Volatility::Immutable) })
        .with_aliases(["to_json"])
}

/// Rewrites `jsonb_agg` and `json_agg` calls (see the module docs).
pub fn rewrite(statement: &mut ast::Statement) {
    let _ = ast::visit_expressions_mut(statement, |expr| {
        if let ast::Expr::Function(f) = expr
            && matches!(f.name.to_string().to_ascii_lowercase().as_str(), "jsonb_agg" | "json_agg")
            && f.over.is_none()
            && let ast::FunctionArguments::List(list) = &f.args
            && let [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x))] = list.args.as_slice()
            && let Some(rewritten) = as_string_agg(
                x,
                list,
                f.filter.as_deref(),
                f.name.to_string().eq_ignore_ascii_case("jsonb_agg"),
            )
        {
            *expr = rewritten;
        }
        ControlFlow::<()>::Continue(())
    });
}

fn as_string_agg(
    x: &ast::Expr,
    list: &ast::FunctionArgumentList,
    filter: Option<&ast::Expr>,
    jsonb: bool,
) -> Option<ast::Expr> {
    // The parser's casts to jsonb are already calls of these.
    let read = if jsonb { "sluice_jsonb_in" } else { "sluice_json_in" };
    let distinct = match list.duplicate_treatment {
        Some(ast::DuplicateTreatment::Distinct) => "DISTINCT ",
        _ => "",
    };
    let order = list
        .clauses
        .iter()
        .map(|c| match c {
            ast::FunctionArgumentClause::OrderBy(items) => {
                let items: Vec<String> = items.iter().map(ToString::to_string).collect();
                Some(format!(" ORDER BY {}", items.join(", ")))
            }
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?
        .concat();
    let filter = filter.map(|f| format!(" FILTER (WHERE {f})")).unwrap_or_default();
    let sql = format!(
        "{read}('[' || string_agg({distinct}coalesce(CAST(to_jsonb({x}) AS text), 'null'), ', '{order}){filter} || ']')"
    );
    Parser::new(&PostgreSqlDialect {}).try_with_sql(&sql).and_then(|mut p| p.parse_expr()).ok()
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ToJsonb {
    signature: Signature,
}

impl ScalarUDFImpl for ToJsonb {
    fn name(&self) -> &str {
        "to_jsonb"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(
        &self,
        _args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> Result<arrow::datatypes::FieldRef> {
        let field = arrow::datatypes::Field::new(self.name(), DataType::Utf8, true);
        Ok(Arc::new(crate::sql::jsonb::mark(field)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let jsonb = crate::sql::jsonb::is_marked(&args.arg_fields[0]);
        let values = ColumnarValue::values_to_arrays(&args.args)?;
        let out = Arc::new(json_texts(&values[0], jsonb)?) as ArrayRef;
        match scalar {
            true => {
                Ok(ColumnarValue::Scalar(datafusion::scalar::ScalarValue::try_from_array(&out, 0)?))
            }
            false => Ok(ColumnarValue::Array(out)),
        }
    }
}

fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

/// Each value of `values` as the JSON text `to_jsonb` gives it (NULL for NULL).
fn json_texts(values: &ArrayRef, jsonb: bool) -> Result<StringArray> {
    use crate::types::interval_text;
    let n = values.len();
    let texts: Vec<Option<String>> = match values.data_type() {
        DataType::Null => vec![None; n],
        DataType::Boolean => values.as_boolean().iter().map(|v| v.map(|b| b.to_string())).collect(),
        t if t.is_integer() => {
            let text = arrow::compute::cast(values, &DataType::Utf8)?;
            text.as_string::<i32>().iter().map(|v| v.map(str::to_owned)).collect()
        }
        DataType::Float16 | DataType::Float32 | DataType::Float64 => {
            let floats = arrow::compute::cast(values, &DataType::Float64)?;
            let floats = floats.as_primitive::<arrow::datatypes::Float64Type>();
            floats
                .iter()
                .map(|v| {
                    v.map(|v| match v {
                        v if v.is_nan() => quoted("NaN"),
                        v if v.is_infinite() => {
                            quoted(if v > 0.0 { "Infinity" } else { "-Infinity" })
                        }
                        v => format!("{v}"),
                    })
                })
                .collect()
        }
        DataType::Decimal128(..) | DataType::Decimal256(..) => {
            let texts = crate::types::numeric::texts(values.as_ref());
            texts
                .iter()
                .map(|v| {
                    v.map(|v| {
                        match v.bytes().all(|b| b.is_ascii_digit() || b == b'-' || b == b'.') {
                            true => v.to_owned(),
                            false => quoted(v),
                        }
                    })
                })
                .collect()
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let text = arrow::compute::cast(values, &DataType::Utf8)?;
            let text = text.as_string::<i32>();
            text.iter().map(|v| v.map(|v| if jsonb { v.to_owned() } else { quoted(v) })).collect()
        }
        DataType::Date32 => {
            let days = values.as_primitive::<arrow::datatypes::Date32Type>();
            days.iter()
                .map(|v| {
                    v.map(|d| match chrono::DateTime::from_timestamp(d as i64 * 86_400, 0) {
                        Some(at) => quoted(&at.format("%Y-%m-%d").to_string()),
                        None => quoted(if d > 0 { "infinity" } else { "-infinity" }),
                    })
                })
                .collect()
        }
        DataType::Timestamp(_, zone) => {
            let micros =
                arrow::compute::cast(values, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
            let micros = micros.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
            let suffix = if zone.is_some() { "+00:00" } else { "" };
            micros
                .iter()
                .map(|v| {
                    v.map(|t| match chrono::DateTime::from_timestamp_micros(t) {
                        Some(at) if t != i64::MAX && t != i64::MIN => quoted(&format!(
                            "{}{suffix}",
                            at.naive_utc().format("%Y-%m-%dT%H:%M:%S%.f")
                        )),
                        _ => quoted(if t > 0 { "infinity" } else { "-infinity" }),
                    })
                })
                .collect()
        }
        DataType::Interval(_) => {
            let spans = values.as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>();
            spans.iter().map(|v| v.map(|v| quoted(&interval_text::format(v)))).collect()
        }
        DataType::Time64(_) => {
            let micros = arrow::compute::cast(values, &DataType::Time64(TimeUnit::Microsecond))?;
            let micros = micros.as_primitive::<arrow::datatypes::Time64MicrosecondType>();
            micros.iter().map(|v| v.map(|t| quoted(&interval_text::time(t)))).collect()
        }
        _ => {
            let text = arrow::compute::cast(values, &DataType::Utf8)?;
            text.as_string::<i32>().iter().map(|v| v.map(quoted)).collect()
        }
    };
    Ok(texts.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_as_to_jsonb_writes_them() {
        let texts = |a: ArrayRef| {
            json_texts(&a, false).unwrap().iter().map(|v| v.map(str::to_owned)).collect::<Vec<_>>()
        };
        let ints: ArrayRef = Arc::new(arrow::array::Int32Array::from(vec![Some(1), None]));
        assert_eq!(texts(ints), vec![Some("1".to_owned()), None]);
        let floats: ArrayRef =
            Arc::new(arrow::array::Float64Array::from(vec![f64::NAN, 2.5, 1e20]));
        assert_eq!(
            texts(floats),
            vec![Some("\"NaN\"".into()), Some("2.5".into()), Some("100000000000000000000".into())]
        );
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["a\"b"]));
        assert_eq!(texts(strings), vec![Some("\"a\\\"b\"".into())]);
        let stamps: ArrayRef =
            Arc::new(arrow::array::TimestampMicrosecondArray::from(vec![1_704_103_200_000_000]));
        assert_eq!(texts(stamps), vec![Some("\"2024-01-01T10:00:00\"".into())]);
    }

    #[test]
    fn the_aggregates_are_a_string_agg() {
        let mut statement = Parser::parse_sql(
            &PostgreSqlDialect {},
            "SELECT g, jsonb_agg(x ORDER BY y DESC) FILTER (WHERE x > 0) FROM t GROUP BY g",
        )
        .unwrap()
        .remove(0);
        rewrite(&mut statement);
        assert_eq!(
            statement.to_string(),
            "SELECT g, sluice_jsonb_in('[' || string_agg(coalesce(CAST(to_jsonb(x) AS TEXT), \
             'null'), ', ' ORDER BY y DESC) FILTER (WHERE x > 0) || ']') FROM t GROUP BY g"
        );
    }
}
