//! Expressions evaluated by streaming executors: a row an expression fails on gets NULL.
//!
//! A batch query returns an expression's error (division by zero, an overflowing cast, `sqrt`
//! of a negative number) to its client with its SQLSTATE. A streaming job has no client to
//! return it to, and failing the job would stop every view for one bad row, so streaming
//! follows RisingWave's non-strict mode: the rows the expression fails on get NULL for it, the
//! other rows of the chunk are computed as usual, and the failures are counted and logged with
//! the job's name, at most once per [`LOG_INTERVAL`] per job.
//!
//! The fast path evaluates the whole chunk; only a chunk that fails is evaluated again row by
//! row, to find the rows at fault.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, ArrayRef, RecordBatch, new_null_array};
use datafusion::error::DataFusionError;
use datafusion::physical_plan::PhysicalExpr;
use parking_lot::Mutex;

use crate::error::Result;

/// The shortest time between two log lines about one job's failing expressions.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

tokio::task_local! {
    /// The name of the job the running actor belongs to.
    static JOB: Arc<str>;
}

/// Runs `actor` as part of `job`: expression failures inside it are reported under that name.
pub async fn in_job<F: Future>(job: Arc<str>, actor: F) -> F::Output {
    JOB.scope(job, actor).await
}

/// Failures per job since the server started, and when each job was last logged.
static FAILURES: Mutex<Option<HashMap<Arc<str>, JobFailures>>> = Mutex::new(None);

#[derive(Debug, Default, Clone)]
struct JobFailures {
    total: u64,
    unlogged: u64,
    logged_at: Option<Instant>,
}

/// Rows on which the expressions of `job` failed since the server started.
pub fn failures_of(job: &str) -> u64 {
    FAILURES.lock().as_ref().and_then(|m| m.get(job)).map_or(0, |f| f.total)
}

/// `expr` over every row of `batch`; a row it fails on gets NULL.
pub fn eval(expr: &dyn PhysicalExpr, batch: &RecordBatch) -> Result<ArrayRef> {
    match evaluate(expr, batch) {
        Ok(array) => Ok(array),
        Err(error) => eval_rows(expr, batch, error),
    }
}

fn evaluate(expr: &dyn PhysicalExpr, batch: &RecordBatch) -> datafusion::error::Result<ArrayRef> {
    expr.evaluate(batch)?.into_array(batch.num_rows())
}

/// The slow path: one row at a time, NULL where the expression fails.
fn eval_rows(
    expr: &dyn PhysicalExpr,
    batch: &RecordBatch,
    error: DataFusionError,
) -> Result<ArrayRef> {
    let data_type = expr.data_type(batch.schema_ref())?;
    let mut rows: Vec<ArrayRef> = Vec::with_capacity(batch.num_rows());
    let mut failed = 0;
    let mut last_error = error;
    for i in 0..batch.num_rows() {
        match evaluate(expr, &batch.slice(i, 1)) {
            Ok(value) if value.data_type() == &data_type => rows.push(value),
            Ok(value) => rows.push(arrow::compute::cast(&value, &data_type)?),
            Err(e) => {
                failed += 1;
                last_error = e;
                rows.push(new_null_array(&data_type, 1));
            }
        }
    }
    report(failed, expr, &last_error);
    let parts: Vec<&dyn Array> = rows.iter().map(|a| a.as_ref()).collect();
    if parts.is_empty() {
        return Ok(new_null_array(&data_type, 0));
    }
    Ok(arrow::compute::concat(&parts)?)
}

/// Counts `failed` rows against the running job and logs them unless it was logged lately.
fn report(failed: u64, expr: &dyn PhysicalExpr, error: &DataFusionError) {
    if failed == 0 {
        return;
    }
    let job = JOB.try_with(Arc::clone).unwrap_or_else(|_| Arc::from("?"));
    let mut guard = FAILURES.lock();
    let entry = guard.get_or_insert_with(HashMap::new).entry(job.clone()).or_default();
    entry.total += failed;
    entry.unlogged += failed;
    if entry.logged_at.is_some_and(|at| at.elapsed() < LOG_INTERVAL) {
        return;
    }
    tracing::warn!(
        job = %job,
        rows = entry.unlogged,
        total = entry.total,
        expression = %expr,
        error = %error.strip_backtrace(),
        "an expression failed on some rows; they get NULL for it"
    );
    entry.unlogged = 0;
    entry.logged_at = Some(Instant::now());
}

/// Whether a row of `array` holds a value, read from its validity bitmap: `is_valid` through
/// the `dyn Array` costs a call per row.
pub fn validity(array: &ArrayRef) -> impl Fn(usize) -> bool + '_ {
    let nulls = array.nulls();
    move |row| nulls.is_none_or(|n| n.is_valid(row))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{AsArray, Int32Array};
    use arrow::datatypes::{DataType, Field, Int32Type, Schema};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{BinaryExpr, Column};

    use super::*;

    /// `x / y` over rows `(x, y)`.
    fn divide(rows: &[(i32, i32)]) -> Vec<Option<i32>> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("x", DataType::Int32, false),
            Field::new("y", DataType::Int32, false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.1))),
            ],
        )
        .unwrap();
        let expr = BinaryExpr::new(
            Arc::new(Column::new("x", 0)),
            Operator::Divide,
            Arc::new(Column::new("y", 1)),
        );
        let out = eval(&expr, &batch).unwrap();
        out.as_primitive::<Int32Type>().iter().collect()
    }

    #[tokio::test]
    async fn a_failing_row_gets_null_and_the_others_their_value() {
        let out = in_job(Arc::from("eval_test_view"), async {
            //   x | y | x / y
            //   6 | 3 | 2
            //   1 | 0 | NULL (division by zero)
            //   9 | 3 | 3
            divide(&[(6, 3), (1, 0), (9, 3)])
        })
        .await;
        assert_eq!(out, vec![Some(2), None, Some(3)]);
        assert_eq!(failures_of("eval_test_view"), 1);
        assert_eq!(divide(&[(4, 2)]), vec![Some(2)]);
        assert_eq!(divide(&[]), Vec::<Option<i32>>::new());
    }
}
