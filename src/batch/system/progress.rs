//! Progress tables: `rw_ddl_progress`, `rw_fragment_backfill_progress`, `rw_cdc_progress` and
//! `rw_cdc_split_progress`.

use std::time::Duration;

use arrow::datatypes::DataType;

use super::{
    BIGINT, BOOLEAN, DOUBLE, INT, SystemRow, SystemSchema, VARCHAR, Value, interval, text,
    timestamptz,
};
use crate::catalog::{StatePurpose, TableCatalog};
use crate::connector::source::SourceConfig;
use crate::error::Result;
use crate::stream::executor::backfill::state::{
    PersistedProgress, persisted_progress, persisted_splits,
};
use crate::stream::executor::source::offset_table::recorded_position;
use crate::stream::graph::creating::{FragmentProgress, create_type};

/// How long `rw_cdc_progress` waits for an upstream to report its slot lag.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(2);

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
    progress: FragmentProgress,
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
        let p = self.progress;
        vec![
            Value::Int(Some(self.job_id)),
            text(self.job_name),
            Value::Int(Some(i64::from(p.state_table.0))),
            text(p.kind.name()),
            text(p.upstream),
            Value::Int32(Some(p.actors as i32)),
            Value::Int(Some(p.rows_done as i64)),
            Value::Int(p.rows_total.map(|n| n as i64)),
            Value::Int32(Some(p.units_done as i32)),
            Value::Int32(Some(p.units_total as i32)),
            Value::Float(Some(p.rows_per_second)),
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
    source_error: Option<String>,
    table_error: Option<String>,
    schema_note: Option<String>,
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
            ("source_error", VARCHAR),
            ("table_error", VARCHAR),
            ("schema_note", VARCHAR),
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
            Value::Text(self.source_error),
            Value::Text(self.table_error),
            Value::Text(self.schema_note),
        ]
    }
}

/// `rw_cdc_split_progress`: one row per snapshot split of each CDC table, as committed.
pub struct CdcSplitProgressRow {
    job_id: i64,
    table_name: String,
    split_id: String,
    split_start: Option<String>,
    split_end: Option<String>,
    cursor: Option<String>,
    rows_done: u64,
    backfill_finished: bool,
    upstream_offset: Option<String>,
}

impl SystemRow for CdcSplitProgressRow {
    fn columns() -> Vec<(&'static str, DataType)> {
        vec![
            ("job_id", BIGINT),
            ("table_name", VARCHAR),
            ("split_id", VARCHAR),
            ("split_start", VARCHAR),
            ("split_end", VARCHAR),
            ("cursor", VARCHAR),
            ("rows_done", BIGINT),
            ("backfill_finished", BOOLEAN),
            ("upstream_offset", VARCHAR),
        ]
    }

    fn values(self) -> Vec<Value> {
        vec![
            Value::Int(Some(self.job_id)),
            text(self.table_name),
            text(self.split_id),
            Value::Text(self.split_start),
            Value::Text(self.split_end),
            Value::Text(self.cursor),
            Value::Int(Some(self.rows_done as i64)),
            Value::Bool(Some(self.backfill_finished)),
            Value::Text(self.upstream_offset),
        ]
    }
}

impl SystemSchema {
    fn rate_limit_of(&self, id: crate::catalog::TableId) -> Option<u64> {
        self.catalog.table_by_id(id).and_then(|t| t.backfill_rate_limit)
    }

    pub(super) fn ddl_progress(&self) -> Vec<DdlProgressRow> {
        self.graph
            .creating
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
                    status: progress.status.to_string(),
                }
            })
            .collect()
    }

    pub(super) fn fragment_progress(&self) -> Vec<FragmentProgressRow> {
        let mut rows = Vec::new();
        for job in self.graph.creating.jobs() {
            for fragment in job.fragments() {
                rows.push(FragmentProgressRow {
                    job_id: job.id.0 as i64,
                    job_name: job.name.clone(),
                    progress: fragment,
                });
            }
        }
        rows
    }

    pub(super) async fn cdc_progress(&self) -> Result<Vec<CdcProgressRow>> {
        let sources = self.catalog.sources();
        let mut rows = Vec::new();
        let mut lags = std::collections::HashMap::new();
        for table in self.catalog.tables() {
            let Some(cdc) = &table.cdc else { continue };
            let Some(source) = sources.iter().find(|s| s.id == cdc.source) else { continue };
            let config = SourceConfig::from_options(&source.name, &source.options)?;
            if let std::collections::hash_map::Entry::Vacant(entry) = lags.entry(source.id) {
                let state = self.catalog.table_by_id(source.state_table);
                let position = match state {
                    Some(state) => recorded_position(&self.store, &state)?,
                    None => 0,
                };
                entry.insert(config.lag_bytes(UPSTREAM_TIMEOUT, position).await);
            }
            let live = self.graph.creating.get(table.id).and_then(|job| job.fragments().pop());
            let persisted = self.persisted_cdc_state(&table)?;
            let (rows_done, offset) = (persisted.rows, persisted.offset);
            let splits = persisted.units.max(1) as i32;
            let finished = persisted.units > 0 && persisted.units_finished == persisted.units;
            let done = table.creating.is_none();
            rows.push(CdcProgressRow {
                job_id: table.id.0 as i64,
                table_name: table.name.clone(),
                upstream_table: format!("{}.{}", cdc.schema, cdc.table),
                split_total_count: splits,
                split_backfilled_count: if done { splits } else { persisted.units_finished as i32 },
                rows_done: live.as_ref().map_or(rows_done, |l| l.rows_done.max(rows_done)),
                backfill_finished: finished || done,
                upstream_offset: live.and_then(|l| l.upstream_offset).or(offset),
                slot_name: config.postgres().map(|pg| pg.slot.clone()).unwrap_or_default(),
                slot_lag_bytes: lags[&source.id],
                source_error: self.graph.metrics.cdc_last_error(&source.name),
                table_error: self.graph.metrics.cdc_table_stopped(table.id.0),
                schema_note: schema_note(&table, cdc),
            });
        }
        Ok(rows)
    }

    pub(super) fn cdc_split_progress(&self) -> Result<Vec<CdcSplitProgressRow>> {
        let mut rows = Vec::new();
        for table in self.catalog.tables() {
            if table.cdc.is_none() {
                continue;
            }
            let Some(state) = self.cdc_state_table(&table) else { continue };
            for split in persisted_splits(&self.store, &state)? {
                let cursor = split
                    .cursor
                    .map(|key| key.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "));
                rows.push(CdcSplitProgressRow {
                    job_id: table.id.0 as i64,
                    table_name: table.name.clone(),
                    split_id: split.split,
                    split_start: split.range.start,
                    split_end: split.range.end,
                    cursor,
                    rows_done: split.rows,
                    backfill_finished: split.finished,
                    upstream_offset: (!split.offset.is_start()).then(|| split.offset.to_string()),
                });
            }
        }
        Ok(rows)
    }

    /// The state table of a CDC table's backfill.
    fn cdc_state_table(&self, table: &TableCatalog) -> Option<std::sync::Arc<TableCatalog>> {
        table
            .internal_tables
            .iter()
            .filter_map(|id| self.catalog.table_by_id(*id))
            .find(|t| t.purpose == Some(StatePurpose::StreamCdcScan))
    }

    /// The committed progress of a CDC table's splits.
    fn persisted_cdc_state(&self, table: &TableCatalog) -> Result<PersistedProgress> {
        let Some(state) = self.cdc_state_table(table) else {
            return Ok(PersistedProgress::default());
        };
        persisted_progress(&self.store, &state)
    }
}

/// What a CDC table keeps of columns dropped upstream that views read (see
/// `Engine::drop_upstream_columns`), and of columns widened upstream that views read as
/// their narrower type (`Engine::retype_columns`).
fn schema_note(table: &TableCatalog, cdc: &crate::catalog::CdcTableInfo) -> Option<String> {
    let columns = || cdc.upstream_columns.iter().zip(&table.columns);
    let kept: Vec<&str> = columns()
        .filter(|&(&u, column)| cdc.is_dropped(u) && !column.hidden)
        .map(|(_, column)| column.name.as_str())
        .collect();
    let pinned: Vec<String> = columns()
        .filter(|&(u, _)| cdc.pinned.contains(u) && !cdc.is_dropped(*u))
        .map(|(&u, column)| {
            format!(
                "{} ({} upstream, kept as {})",
                column.name, cdc.upstream_types[u], column.data_type
            )
        })
        .collect();
    let mut notes = Vec::new();
    if !kept.is_empty() {
        notes.push(format!(
            "column(s) {} dropped upstream: kept for the views that read them, with the values \
             they had and NULL in rows changed since",
            kept.join(", ")
        ));
    }
    if !pinned.is_empty() {
        notes.push(format!(
            "column(s) {} widened upstream: kept in their type for the views that read them; a \
             value that does not fit stops the table",
            pinned.join(", ")
        ));
    }
    (!notes.is_empty()).then(|| notes.join("; "))
}
