//! Scalar functions Sluice defines in place of DataFusion's.
//!
//! [`version_udf`]: `version()` answered `Apache DataFusion 55.2.0, ...`; client libraries that
//! parse `PostgreSQL X.Y` from it refused to connect. It now names the Postgres version whose
//! protocol and catalog Sluice speaks, and Sluice's own, as RisingWave does.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::logical_expr::{ColumnarValue, ScalarUDF, Volatility, create_udf};
use datafusion::scalar::ScalarValue;

/// What `version()` returns.
pub const VERSION: &str = concat!("PostgreSQL 15.0 (Sluice ", env!("CARGO_PKG_VERSION"), ")");

/// `version()`.
pub fn version_udf() -> ScalarUDF {
    create_udf(
        "version",
        Vec::new(),
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(|_| Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(VERSION.to_owned()))))),
    )
}
