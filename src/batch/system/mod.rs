//! `rw_catalog`: system tables describing Sluice's relations, sources and running jobs.
//!
//! Each table is a typed row struct (implementing [`SystemRow`]) plus one function that fills
//! it from the catalog, the storage and the progress tracker. Rows are computed when a query
//! plans the table, so every query sees the current state.
//!
//! This module holds the shared machinery ([`Value`], [`SystemRow`], the column types, the
//! conversion of rows to a batch, [`SystemSchema`] and its DataFusion [`SchemaProvider`]) and
//! the registry of tables, `TABLES`: the one list naming each table and how its batch is built,
//! which listing, existence checks and scans all read. The tables themselves live in:
//!
//! - `progress`: `rw_ddl_progress`, `rw_fragment_backfill_progress`, `rw_cdc_progress` and
//!   `rw_cdc_split_progress`, the progress of creating jobs and CDC tables.
//! - `relations`: `rw_tables`, `rw_materialized_views`, `rw_sources` and
//!   `rw_internal_tables`, the relations of the catalog.
//! - `jobs`: `rw_fragments`, `rw_actors`, `rw_recovery_events` and `rw_rate_limit`, the
//!   running streaming jobs.
//!
//! To add a table: define its row struct and fill function in the submodule it belongs to,
//! then add one entry to `TABLES`.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, DurationSecondArray, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result as DfResult};
use futures::future::BoxFuture;

use crate::catalog::{Catalog, RelationKind};
use crate::error::Result;
use crate::storage::store::Store;
use crate::stream::graph::StreamGraph;

mod jobs;
mod progress;
mod relations;

pub use jobs::{ActorRow, FragmentRow, RateLimitRow, RecoveryEventRow, vnode_ranges};
pub use progress::{CdcProgressRow, DdlProgressRow, FragmentProgressRow};
pub use relations::{InternalTableRow, RelationRow, SourceRow};

/// The schema the system tables live in.
pub const SYSTEM_SCHEMA: &str = "rw_catalog";

/// One value of a system-table row.
pub enum Value {
    /// `bigint`.
    Int(Option<i64>),
    /// `integer`.
    Int32(Option<i32>),
    /// `double precision`.
    Float(Option<f64>),
    /// `varchar`.
    Text(Option<String>),
    /// `boolean`.
    Bool(Option<bool>),
    /// `timestamptz`, in milliseconds since the Unix epoch.
    TimestampMs(Option<i64>),
    /// `interval`, in seconds.
    Seconds(Option<f64>),
}

/// A row type of a system table.
pub trait SystemRow {
    /// Column names and types, in order.
    fn columns() -> Vec<(&'static str, DataType)>;
    /// This row's values, in column order.
    fn values(self) -> Vec<Value>;
}

fn text(s: impl Into<String>) -> Value {
    Value::Text(Some(s.into()))
}

/// Builds the batch of a system table from its rows.
fn to_batch<R: SystemRow>(rows: Vec<R>) -> Result<RecordBatch> {
    let columns = R::columns();
    let schema: SchemaRef = Arc::new(Schema::new(
        columns.iter().map(|(name, ty)| Field::new(*name, ty.clone(), true)).collect::<Vec<_>>(),
    ));
    let mut values: Vec<Vec<Value>> = columns.iter().map(|_| Vec::new()).collect();
    for row in rows {
        for (i, value) in row.values().into_iter().enumerate() {
            values[i].push(value);
        }
    }
    let arrays = values
        .into_iter()
        .zip(&columns)
        .map(|(column, (_, ty))| -> ArrayRef {
            match ty {
                DataType::Int64 => Arc::new(Int64Array::from_iter(
                    column.into_iter().map(|v| if let Value::Int(v) = v { v } else { None }),
                )),
                DataType::Int32 => Arc::new(Int32Array::from_iter(
                    column.into_iter().map(|v| if let Value::Int32(v) = v { v } else { None }),
                )),
                DataType::Float64 => Arc::new(Float64Array::from_iter(
                    column.into_iter().map(|v| if let Value::Float(v) = v { v } else { None }),
                )),
                DataType::Boolean => Arc::new(BooleanArray::from_iter(
                    column.into_iter().map(|v| if let Value::Bool(v) = v { v } else { None }),
                )),
                DataType::Timestamp(..) => Arc::new(
                    TimestampMicrosecondArray::from_iter(column.into_iter().map(|v| {
                        if let Value::TimestampMs(v) = v { v.map(|ms| ms * 1000) } else { None }
                    }))
                    .with_timezone("UTC"),
                ),
                // Whole seconds, as the estimates are no finer than that.
                DataType::Duration(_) => {
                    Arc::new(DurationSecondArray::from_iter(column.into_iter().map(|v| {
                        if let Value::Seconds(v) = v { v.map(|s| s.ceil() as i64) } else { None }
                    })))
                }
                _ => Arc::new(StringArray::from_iter(
                    column.into_iter().map(|v| if let Value::Text(v) = v { v } else { None }),
                )),
            }
        })
        .collect();
    Ok(RecordBatch::try_new(schema, arrays)?)
}

const BIGINT: DataType = DataType::Int64;
const INT: DataType = DataType::Int32;
const DOUBLE: DataType = DataType::Float64;
const VARCHAR: DataType = DataType::Utf8;
const BOOLEAN: DataType = DataType::Boolean;

fn timestamptz() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// An `interval` column, held as a duration in seconds.
fn interval() -> DataType {
    DataType::Duration(TimeUnit::Second)
}

/// The `rw_catalog` schema.
pub struct SystemSchema {
    catalog: Arc<Catalog>,
    store: Arc<Store>,
    graph: Arc<StreamGraph>,
}

impl std::fmt::Debug for SystemSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SystemSchema")
    }
}

/// Builds the batch of one system table from the engine's current state.
type Fill = for<'a> fn(&'a SystemSchema) -> BoxFuture<'a, Result<RecordBatch>>;

/// One table of `rw_catalog`: its name and how to build its batch.
struct SystemTable {
    name: &'static str,
    fill: Fill,
}

/// The tables of `rw_catalog`, in the order `table_names` lists them: the only list of them.
const TABLES: &[SystemTable] = &[
    SystemTable { name: "rw_ddl_progress", fill: |s| ready(s.ddl_progress()) },
    SystemTable { name: "rw_fragment_backfill_progress", fill: |s| ready(s.fragment_progress()) },
    SystemTable {
        name: "rw_cdc_progress",
        fill: |s| Box::pin(async move { to_batch(s.cdc_progress().await?) }),
    },
    SystemTable { name: "rw_cdc_split_progress", fill: |s| ready_result(s.cdc_split_progress()) },
    SystemTable { name: "rw_internal_tables", fill: |s| ready(s.internal_tables()) },
    SystemTable { name: "rw_tables", fill: |s| ready(s.relations(RelationKind::Table)) },
    SystemTable {
        name: "rw_materialized_views",
        fill: |s| ready(s.relations(RelationKind::MaterializedView)),
    },
    SystemTable { name: "rw_sources", fill: |s| ready(s.sources()) },
    SystemTable { name: "rw_rate_limit", fill: |s| ready(s.rate_limits()) },
    SystemTable { name: "rw_fragments", fill: |s| ready(s.fragments().0) },
    SystemTable { name: "rw_actors", fill: |s| ready(s.fragments().1) },
    SystemTable { name: "rw_recovery_events", fill: |s| ready(s.recovery_events()) },
];

/// The fill of a table whose rows are computed without waiting on anything.
fn ready<'a, R: SystemRow>(rows: Vec<R>) -> BoxFuture<'a, Result<RecordBatch>> {
    Box::pin(std::future::ready(to_batch(rows)))
}

/// [`ready`] of rows that may fail to be read.
fn ready_result<'a, R: SystemRow>(rows: Result<Vec<R>>) -> BoxFuture<'a, Result<RecordBatch>> {
    Box::pin(std::future::ready(rows.and_then(to_batch)))
}

/// The registered table called `name`.
fn registered(name: &str) -> Option<&'static SystemTable> {
    TABLES.iter().find(|t| t.name == name)
}

impl SystemSchema {
    /// The system schema over the engine's state.
    pub fn new(catalog: Arc<Catalog>, store: Arc<Store>, graph: Arc<StreamGraph>) -> Self {
        Self { catalog, store, graph }
    }

    async fn batch(&self, name: &str) -> Result<Option<RecordBatch>> {
        Ok(match registered(name) {
            Some(table) => Some((table.fill)(self).await?),
            None => None,
        })
    }
}

#[async_trait]
impl SchemaProvider for SystemSchema {
    fn table_names(&self) -> Vec<String> {
        TABLES.iter().map(|t| t.name.to_owned()).collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let batch = self.batch(name).await.map_err(|e| DataFusionError::External(Box::new(e)))?;
        Ok(match batch {
            Some(batch) => Some(Arc::new(MemTable::try_new(batch.schema(), vec![vec![batch]])?)),
            None => None,
        })
    }

    fn table_exist(&self, name: &str) -> bool {
        registered(name).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_are_unique() {
        for (i, t) in TABLES.iter().enumerate() {
            assert!(TABLES[..i].iter().all(|u| u.name != t.name), "{} registered twice", t.name);
        }
    }
}
