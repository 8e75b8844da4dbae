//! Relation tables: `rw_tables`, `rw_materialized_views`, `rw_sources` and `rw_internal_tables`.

use std::sync::Arc;

use arrow::datatypes::DataType;

use super::{BIGINT, INT, SystemRow, SystemSchema, VARCHAR, Value, text};
use crate::catalog::{RelationKind, SourceCatalog, StatePurpose};
use crate::connector::source::SourceConfig;

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
    table_patterns: Option<String>,
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
            ("table_patterns", VARCHAR),
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
            Value::Text(self.table_patterns),
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

impl SystemSchema {
    pub(super) fn relations(&self, kind: RelationKind) -> Vec<RelationRow> {
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

    pub(super) fn sources(&self) -> Vec<SourceRow> {
        self.catalog.sources().iter().map(source_row).collect()
    }

    pub(super) fn internal_tables(&self) -> Vec<InternalTableRow> {
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
}

fn source_row(source: &Arc<SourceCatalog>) -> SourceRow {
    let option = |key: &str| source.options.get(key).cloned().unwrap_or_default();
    let config = SourceConfig::from_options(&source.name, &source.options).ok();
    let port = config.as_ref().map_or(0, SourceConfig::port);
    let config = config.as_ref().and_then(SourceConfig::postgres);
    SourceRow {
        id: source.id.0 as i64,
        name: source.name.clone(),
        connector: option("connector"),
        hostname: option("hostname"),
        port: i32::from(port),
        database_name: option("database.name"),
        slot_name: config.as_ref().map(|c| c.slot.clone()).unwrap_or_default(),
        publication_name: config.as_ref().map(|c| c.publication.clone()).unwrap_or_default(),
        definition: source.definition.clone(),
        table_patterns: (!source.table_patterns.is_empty()).then(|| {
            let patterns: Vec<&str> =
                source.table_patterns.iter().map(|p| p.pattern.as_str()).collect();
            patterns.join(", ")
        }),
    }
}
