//! `rw_catalog`: system tables describing Sluice's relations, sources and running jobs.
//!
//! Each table is a typed row struct (implementing [`SystemRow`]) plus one function that fills
//! it from the catalog, the storage and the progress tracker. Rows are computed when a query
//! plans the table, so every query sees the current state.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{
    ArrayRef, BooleanArray, DurationSecondArray, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result as DfResult};

use crate::catalog::{
    Catalog, RelationKind, SourceCatalog, StatePurpose, TableCatalog, VirtualNode,
};
use crate::connector::postgres_cdc::PgSourceConfig;
use crate::engine::jobs::JobMap;
use crate::engine::progress::{ProgressTracker, create_type, persisted_progress};
use crate::engine::recovery::RecoveryEvent;
use crate::error::Result;
use crate::storage::store::Store;
use crate::stream::dispatch::owned_vnodes;

/// The schema the system tables live in.
pub const SYSTEM_SCHEMA: &str = "rw_catalog";

/// How long `rw_cdc_progress` waits for an upstream to report its slot lag.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(2);

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
    tracker: Arc<ProgressTracker>,
    jobs: JobMap,
}

impl std::fmt::Debug for SystemSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SystemSchema")
    }
}

/// The tables of `rw_catalog`.
const TABLES: &[&str] = &[
    "rw_ddl_progress",
    "rw_fragment_backfill_progress",
    "rw_cdc_progress",
    "rw_internal_tables",
    "rw_tables",
    "rw_materialized_views",
    "rw_sources",
    "rw_rate_limit",
    "rw_fragments",
    "rw_actors",
    "rw_recovery_events",
];

impl SystemSchema {
    /// The system schema over the engine's state.
    pub fn new(
        catalog: Arc<Catalog>,
        store: Arc<Store>,
        tracker: Arc<ProgressTracker>,
        jobs: JobMap,
    ) -> Self {
        Self { catalog, store, tracker, jobs }
    }

    async fn batch(&self, name: &str) -> Result<Option<RecordBatch>> {
        Ok(Some(match name {
            "rw_ddl_progress" => to_batch(self.ddl_progress())?,
            "rw_fragment_backfill_progress" => to_batch(self.fragment_progress())?,
            "rw_cdc_progress" => to_batch(self.cdc_progress().await?)?,
            "rw_internal_tables" => to_batch(self.internal_tables())?,
            "rw_tables" => to_batch(self.relations(RelationKind::Table))?,
            "rw_materialized_views" => to_batch(self.relations(RelationKind::MaterializedView))?,
            "rw_sources" => to_batch(self.sources())?,
            "rw_rate_limit" => to_batch(self.rate_limits())?,
            "rw_fragments" => to_batch(self.fragments().0)?,
            "rw_actors" => to_batch(self.fragments().1)?,
            "rw_recovery_events" => to_batch(self.recovery_events())?,
            _ => return Ok(None),
        }))
    }
}

#[async_trait]
impl SchemaProvider for SystemSchema {
    fn table_names(&self) -> Vec<String> {
        TABLES.iter().map(|t| (*t).to_owned()).collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let batch = self.batch(name).await.map_err(|e| DataFusionError::External(Box::new(e)))?;
        Ok(match batch {
            Some(batch) => Some(Arc::new(MemTable::try_new(batch.schema(), vec![vec![batch]])?)),
            None => None,
        })
    }

    fn table_exist(&self, name: &str) -> bool {
        TABLES.contains(&name)
    }
}

/// `rw_ddl_progress`: one row per job still creating.
pub struct DdlProgressRow {
    ddl_id: i64,
    ddl_statement: String,
    create_type: &'static str,
    progress: String,
    initialized_at_ms: i64,
    rows_done: u64,
    rows_total: Option<u64>,
    rows_per_second: f64,
    eta_seconds: Option<f64>,
    status: String,
}

impl SystemRow for DdlProgressRow {
    fn columns() -> Vec<(&'static str, DataType)> {
        vec![
            ("ddl_id", BIGINT),
            ("ddl_statement", VARCHAR),
            ("create_type", VARCHAR),
            ("progress", VARCHAR),
            ("initialized_at", timestamptz()),
            ("rows_done", BIGINT),
            ("rows_total", BIGINT),
            ("rows_per_second", DOUBLE),
            ("eta", interval()),
            ("status", VARCHAR),
        ]
    }

    fn values(self) -> Vec<Value> {
        vec![
            Value::Int(Some(self.ddl_id)),
            text(self.ddl_statement),
            text(self.create_type),
            text(self.progress),
            Value::TimestampMs(Some(self.initialized_at_ms)),
            Value::Int(Some(self.rows_done as i64)),
            Value::Int(self.rows_total.map(|n| n as i64)),
            Value::Float(Some(self.rows_per_second)),
            Value::Seconds(self.eta_seconds),
            text(self.status),
        ]
    }
}

/// `rw_fragment_backfill_progress`: one row per backfilling scan of a creating job.
pub struct FragmentProgressRow {
    job_id: i64,
    job_name: String,
    fragment_id: i64,
    backfill_type: &'static str,
    upstream: String,
    actors: i32,
    rows_done: u64,
    rows_total: Option<u64>,
    units_done: i32,
    units_total: i32,
    rows_per_second: f64,
}

impl SystemRow for FragmentProgressRow {
    fn columns() -> Vec<(&'static str, DataType)> {
        vec![
            ("job_id", BIGINT),
            ("job_name", VARCHAR),
            ("fragment_id", BIGINT),
            ("backfill_type", VARCHAR),
            ("upstream", VARCHAR),
            ("actor_count", INT),
            ("rows_done", BIGINT),
            ("rows_total", BIGINT),
            ("units_done", INT),
            ("units_total", INT),
            ("rows_per_second", DOUBLE),
        ]
    }

    fn values(self) -> Vec<Value> {
        vec![
            Value::Int(Some(self.job_id)),
            text(self.job_name),
            Value::Int(Some(self.fragment_id)),
            text(self.backfill_type),
            text(self.upstream),
            Value::Int32(Some(self.actors)),
            Value::Int(Some(self.rows_done as i64)),
            Value::Int(self.rows_total.map(|n| n as i64)),
            Value::Int32(Some(self.units_done)),
            Value::Int32(Some(self.units_total)),
            Value::Float(Some(self.rows_per_second)),
        ]
    }
}

/// `rw_cdc_progress`: one row per CDC table.
pub struct CdcProgressRow {
    job_id: i64,
    table_name: String,
    upstream_table: String,
    split_total_count: i32,
    split_backfilled_count: i32,
    rows_done: u64,
    backfill_finished: bool,
    upstream_offset: Option<String>,
    slot_name: String,
    slot_lag_bytes: Option<i64>,
}

impl SystemRow for CdcProgressRow {
    fn columns() -> Vec<(&'static str, DataType)> {
        vec![
            ("job_id", BIGINT),
            ("table_name", VARCHAR),
            ("upstream_table", VARCHAR),
            ("split_total_count", INT),
            ("split_backfilled_count", INT),
            ("rows_done", BIGINT),
            ("backfill_finished", BOOLEAN),
            ("upstream_offset", VARCHAR),
            ("slot_name", VARCHAR),
            ("slot_lag_bytes", BIGINT),
        ]
    }

    fn values(self) -> Vec<Value> {
        vec![
            Value::Int(Some(self.job_id)),
            text(self.table_name),
            text(self.upstream_table),
            Value::Int32(Some(self.split_total_count)),
            Value::Int32(Some(self.split_backfilled_count)),
            Value::Int(Some(self.rows_done as i64)),
            Value::Bool(Some(self.backfill_finished)),
            Value::Text(self.upstream_offset),
            text(self.slot_name),
            Value::Int(self.slot_lag_bytes),
        ]
    }
}

/// `rw_internal_tables`: the state tables of streaming jobs.
pub struct InternalTableRow {
    id: i64,
    name: String,
    job_id: Option<i64>,
    job_name: Option<String>,
    purpose: String,
}

impl SystemRow for InternalTableRow {
    fn columns() -> Vec<(&'static str, DataType)> {
        vec![
            ("id", BIGINT),
            ("name", VARCHAR),
            ("job_id", BIGINT),
            ("job_name", VARCHAR),
            ("purpose", VARCHAR),
        ]
    }

    fn values(self) -> Vec<Value> {
        vec![
            Value::Int(Some(self.id)),
            text(self.name),
            Value::Int(self.job_id),
            Value::Text(self.job_name),
            text(self.purpose),
        ]
    }
}

/// `rw_tables` and `rw_materialized_views`.
pub struct RelationRow {
    id: i64,
    name: String,
    definition: String,
    source_name: Option<String>,
    upstream_table: Option<String>,
    parallelism: i32,
    backfill_rate_limit: Option<i64>,
    status: &'static str,
}

impl SystemRow for RelationRow {
    fn columns() -> Vec<(&'static str, DataType)> {
        vec![
            ("id", BIGINT),
            ("name", VARCHAR),
            ("schema_name", VARCHAR),
            ("definition", VARCHAR),
            ("source_name", VARCHAR),
            ("upstream_table", VARCHAR),
            ("parallelism", INT),
            ("backfill_rate_limit", BIGINT),
            ("status", VARCHAR),
        ]
    }

    fn values(self) -> Vec<Value> {
        vec![
            Value::Int(Some(self.id)),
            text(self.name),
            text(crate::catalog::DEFAULT_SCHEMA),
            text(self.definition),
            Value::Text(self.source_name),
            Value::Text(self.upstream_table),
            Value::Int32(Some(self.parallelism)),
            Value::Int(self.backfill_rate_limit),
            text(self.status),
        ]
    }
}

/// `rw_sources`.
pub struct SourceRow {
    id: i64,
    name: String,
    connector: String,
    hostname: String,
    port: i32,
    database_name: String,
    slot_name: String,
    publication_name: String,
    definition: String,
}

impl SystemRow for SourceRow {
    fn columns() -> Vec<(&'static str, DataType)> {
        vec![
            ("id", BIGINT),
            ("name", VARCHAR),
            ("connector", VARCHAR),
            ("hostname", VARCHAR),
            ("port", INT),
            ("database_name", VARCHAR),
            ("slot_name", VARCHAR),
            ("publication_name", VARCHAR),
            ("definition", VARCHAR),
        ]
    }

    fn values(self) -> Vec<Value> {
        vec![
            Value::Int(Some(self.id)),
            text(self.name),
            text(self.connector),
            text(self.hostname),
            Value::Int32(Some(self.port)),
            text(self.database_name),
            text(self.slot_name),
            text(self.publication_name),
            text(self.definition),
        ]
    }
}

/// `rw_fragments`: one row per fragment of a running job.
pub struct FragmentRow {
    fragment_id: i64,
    job_id: i64,
    job_name: String,
    kind: String,
    parallelism: i32,
    vnodes_per_actor: String,
}

impl SystemRow for FragmentRow {
    fn columns() -> Vec<(&'static str, DataType)> {
        vec![
            ("fragment_id", BIGINT),
            ("job_id", BIGINT),
            ("job_name", VARCHAR),
            ("kind", VARCHAR),
            ("parallelism", INT),
            ("vnodes_per_actor", VARCHAR),
        ]
    }

    fn values(self) -> Vec<Value> {
        vec![
            Value::Int(Some(self.fragment_id)),
            Value::Int(Some(self.job_id)),
            text(self.job_name),
            text(self.kind),
            Value::Int32(Some(self.parallelism)),
            text(self.vnodes_per_actor),
        ]
    }
}

/// `rw_actors`: one row per actor of a running job.
pub struct ActorRow {
    actor_id: i64,
    fragment_id: i64,
    job_id: i64,
    job_name: String,
    vnode_count: i32,
    vnodes: String,
}

impl SystemRow for ActorRow {
    fn columns() -> Vec<(&'static str, DataType)> {
        vec![
            ("actor_id", BIGINT),
            ("fragment_id", BIGINT),
            ("job_id", BIGINT),
            ("job_name", VARCHAR),
            ("vnode_count", INT),
            ("vnodes", VARCHAR),
        ]
    }

    fn values(self) -> Vec<Value> {
        vec![
            Value::Int(Some(self.actor_id)),
            Value::Int(Some(self.fragment_id)),
            Value::Int(Some(self.job_id)),
            text(self.job_name),
            Value::Int32(Some(self.vnode_count)),
            text(self.vnodes),
        ]
    }
}

/// `rw_recovery_events`: each time the streaming jobs were rebuilt after an actor failed.
pub struct RecoveryEventRow {
    event: RecoveryEvent,
}

impl SystemRow for RecoveryEventRow {
    fn columns() -> Vec<(&'static str, DataType)> {
        vec![("failed_at", timestamptz()), ("error", VARCHAR), ("recovered", BOOLEAN)]
    }

    fn values(self) -> Vec<Value> {
        let RecoveryEvent { at_ms, error, recovered } = self.event;
        vec![Value::TimestampMs(Some(at_ms)), text(error), Value::Bool(Some(recovered))]
    }
}

/// `rw_rate_limit`: the jobs whose backfill has a rate limit.
pub struct RateLimitRow {
    job_id: i64,
    job_name: String,
    job_kind: &'static str,
    rate_limit: i64,
}

impl SystemRow for RateLimitRow {
    fn columns() -> Vec<(&'static str, DataType)> {
        vec![
            ("job_id", BIGINT),
            ("job_name", VARCHAR),
            ("job_kind", VARCHAR),
            ("rate_limit", BIGINT),
        ]
    }

    fn values(self) -> Vec<Value> {
        vec![
            Value::Int(Some(self.job_id)),
            text(self.job_name),
            text(self.job_kind),
            Value::Int(Some(self.rate_limit)),
        ]
    }
}

impl SystemSchema {
    fn recovery_events(&self) -> Vec<RecoveryEventRow> {
        self.tracker
            .recoveries
            .events()
            .into_iter()
            .map(|event| RecoveryEventRow { event })
            .collect()
    }

    fn rate_limit_of(&self, id: crate::catalog::TableId) -> Option<u64> {
        self.catalog.table_by_id(id).and_then(|t| t.backfill_rate_limit)
    }

    fn ddl_progress(&self) -> Vec<DdlProgressRow> {
        self.tracker
            .jobs()
            .iter()
            .map(|job| {
                let progress = job.progress(self.rate_limit_of(job.id));
                DdlProgressRow {
                    ddl_id: job.id.0 as i64,
                    ddl_statement: job.statement.clone(),
                    create_type: create_type(&job.info),
                    progress: progress.progress,
                    initialized_at_ms: job.info.initialized_at_ms,
                    rows_done: progress.rows_done,
                    rows_total: progress.rows_total,
                    rows_per_second: progress.rows_per_second,
                    eta_seconds: progress.eta_seconds,
                    status: progress.status,
                }
            })
            .collect()
    }

    fn fragment_progress(&self) -> Vec<FragmentProgressRow> {
        let mut rows = Vec::new();
        for job in self.tracker.jobs() {
            for fragment in job.fragments() {
                rows.push(FragmentProgressRow {
                    job_id: job.id.0 as i64,
                    job_name: job.name.clone(),
                    fragment_id: fragment.state_table.0 as i64,
                    backfill_type: if job.is_cdc { "CDC" } else { "ARRANGEMENT" },
                    upstream: fragment.upstream,
                    actors: fragment.actors as i32,
                    rows_done: fragment.rows_done,
                    rows_total: fragment.rows_total,
                    units_done: fragment.units_done as i32,
                    units_total: fragment.units_total as i32,
                    rows_per_second: fragment.rows_per_second,
                });
            }
        }
        rows
    }

    async fn cdc_progress(&self) -> Result<Vec<CdcProgressRow>> {
        let sources = self.catalog.sources();
        let mut rows = Vec::new();
        let mut lags = std::collections::HashMap::new();
        for table in self.catalog.tables() {
            let Some(cdc) = &table.cdc else { continue };
            let Some(source) = sources.iter().find(|s| s.id == cdc.source) else { continue };
            let config = PgSourceConfig::from_options(&source.name, &source.options)?;
            if let std::collections::hash_map::Entry::Vacant(entry) = lags.entry(source.id) {
                entry.insert(slot_lag(&config).await);
            }
            let live = self.tracker.get(table.id).and_then(|job| job.fragments().pop());
            let (rows_done, finished, offset) = self.persisted_cdc_state(&table)?;
            rows.push(CdcProgressRow {
                job_id: table.id.0 as i64,
                table_name: table.name.clone(),
                upstream_table: format!("{}.{}", cdc.schema, cdc.table),
                split_total_count: 1,
                split_backfilled_count: i32::from(finished || table.creating.is_none()),
                rows_done: live.as_ref().map_or(rows_done, |l| l.rows_done.max(rows_done)),
                backfill_finished: finished || table.creating.is_none(),
                upstream_offset: live.and_then(|l| l.upstream_offset).or(offset),
                slot_name: config.slot.clone(),
                slot_lag_bytes: lags[&source.id],
            });
        }
        Ok(rows)
    }

    /// `row_count`, `backfill_finished` and the offset of a CDC table's committed state.
    fn persisted_cdc_state(&self, table: &TableCatalog) -> Result<(u64, bool, Option<String>)> {
        let state = table
            .internal_tables
            .iter()
            .filter_map(|id| self.catalog.table_by_id(*id))
            .find(|t| t.purpose == Some(StatePurpose::StreamCdcScan));
        let Some(state) = state else {
            return Ok((0, false, None));
        };
        let persisted = persisted_progress(&self.store, &state)?;
        Ok((persisted.rows, persisted.units_finished > 0, persisted.offset))
    }

    fn internal_tables(&self) -> Vec<InternalTableRow> {
        let mut owners: std::collections::HashMap<_, String> =
            self.catalog.tables().iter().map(|t| (t.id, t.name.clone())).collect();
        for source in self.catalog.sources() {
            owners.insert(source.id, source.name.clone());
        }
        self.catalog
            .tables()
            .iter()
            .filter(|t| t.kind == RelationKind::Internal)
            .map(|t| InternalTableRow {
                id: t.id.0 as i64,
                name: t.name.clone(),
                job_id: t.owner.map(|o| o.0 as i64),
                job_name: t.owner.and_then(|o| owners.get(&o).cloned()),
                purpose: t.purpose.map_or("unknown", StatePurpose::name).to_owned(),
            })
            .collect()
    }

    fn relations(&self, kind: RelationKind) -> Vec<RelationRow> {
        let sources = self.catalog.sources();
        self.catalog
            .tables()
            .iter()
            .filter(|t| t.kind == kind)
            .map(|t| RelationRow {
                id: t.id.0 as i64,
                name: t.name.clone(),
                definition: match kind {
                    RelationKind::MaterializedView => {
                        format!("CREATE MATERIALIZED VIEW {} AS {}", t.name, t.definition)
                    }
                    _ => t.definition.clone(),
                },
                source_name: t.cdc.as_ref().and_then(|c| {
                    sources.iter().find(|s| s.id == c.source).map(|s| s.name.clone())
                }),
                upstream_table: t.cdc.as_ref().map(|c| format!("{}.{}", c.schema, c.table)),
                parallelism: t.parallelism.max(1) as i32,
                backfill_rate_limit: t.backfill_rate_limit.map(|n| n as i64),
                status: if t.creating.is_some() { "creating" } else { "created" },
            })
            .collect()
    }

    fn sources(&self) -> Vec<SourceRow> {
        self.catalog.sources().iter().map(source_row).collect()
    }

    /// `rw_fragments` and `rw_actors`, by job id then fragment.
    fn fragments(&self) -> (Vec<FragmentRow>, Vec<ActorRow>) {
        let mut names: std::collections::HashMap<_, String> =
            self.catalog.tables().iter().map(|t| (t.id, t.name.clone())).collect();
        for source in self.catalog.sources() {
            names.insert(source.id, source.name.clone());
        }
        let mut jobs: Vec<_> =
            self.jobs.lock().iter().map(|(id, job)| (*id, job.clone())).collect();
        jobs.sort_by_key(|(id, _)| *id);
        let (mut fragments, mut actors) = (Vec::new(), Vec::new());
        for (id, job) in jobs {
            let name = names.get(&id).cloned().unwrap_or_default();
            for fragment in &job.layout.lock().fragments {
                let n = fragment.actors.len();
                let vnodes: Vec<Vec<VirtualNode>> = (0..n)
                    .map(|i| match fragment.partitioned {
                        true => owned_vnodes(i, n),
                        false => (0..VirtualNode::COUNT as u16).map(VirtualNode).collect(),
                    })
                    .collect();
                fragments.push(FragmentRow {
                    fragment_id: fragment.id as i64,
                    job_id: id.0 as i64,
                    job_name: name.clone(),
                    kind: fragment.label.clone(),
                    parallelism: n as i32,
                    vnodes_per_actor: vnodes
                        .iter()
                        .map(|v| v.len().to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
                for (actor, owned) in fragment.actors.iter().zip(vnodes) {
                    actors.push(ActorRow {
                        actor_id: actor.0 as i64,
                        fragment_id: fragment.id as i64,
                        job_id: id.0 as i64,
                        job_name: name.clone(),
                        vnode_count: owned.len() as i32,
                        vnodes: vnode_ranges(&owned),
                    });
                }
            }
        }
        (fragments, actors)
    }

    fn rate_limits(&self) -> Vec<RateLimitRow> {
        self.catalog
            .tables()
            .iter()
            .filter_map(|t| {
                Some(RateLimitRow {
                    job_id: t.id.0 as i64,
                    job_name: t.name.clone(),
                    job_kind: t.kind.noun(),
                    rate_limit: t.backfill_rate_limit? as i64,
                })
            })
            .collect()
    }
}

fn source_row(source: &Arc<SourceCatalog>) -> SourceRow {
    let option = |key: &str| source.options.get(key).cloned().unwrap_or_default();
    let config = PgSourceConfig::from_options(&source.name, &source.options).ok();
    SourceRow {
        id: source.id.0 as i64,
        name: source.name.clone(),
        connector: option("connector"),
        hostname: option("hostname"),
        port: config.as_ref().map_or(5432, |c| c.port as i32),
        database_name: option("database.name"),
        slot_name: config.as_ref().map(|c| c.slot.clone()).unwrap_or_default(),
        publication_name: config.as_ref().map(|c| c.publication.clone()).unwrap_or_default(),
        definition: source.definition.clone(),
    }
}

/// Vnodes as ranges: `0-63, 128-191`.
fn vnode_ranges(vnodes: &[VirtualNode]) -> String {
    let mut ranges: Vec<(u16, u16)> = Vec::new();
    for v in vnodes {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == v.0 => *end = v.0,
            _ => ranges.push((v.0, v.0)),
        }
    }
    let text: Vec<String> = ranges
        .iter()
        .map(|(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") })
        .collect();
    text.join(", ")
}

/// Bytes of WAL the source's slot has not confirmed yet; `None` when the upstream does not
/// answer in time.
async fn slot_lag(config: &PgSourceConfig) -> Option<i64> {
    let query = async {
        let client = config.connect().await.ok()?;
        let row = client
            .query_opt(
                "SELECT (pg_current_wal_lsn() - confirmed_flush_lsn)::int8 \
                 FROM pg_replication_slots WHERE slot_name = $1",
                &[&config.slot],
            )
            .await
            .ok()??;
        row.get::<_, Option<i64>>(0)
    };
    tokio::time::timeout(UPSTREAM_TIMEOUT, query).await.ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vnode_ranges_are_compact() {
        let v = |list: &[u16]| list.iter().map(|&n| VirtualNode(n)).collect::<Vec<_>>();
        assert_eq!(vnode_ranges(&v(&[0, 1, 2, 5, 7, 8])), "0-2, 5, 7-8");
        assert_eq!(vnode_ranges(&[]), "");
    }
}
