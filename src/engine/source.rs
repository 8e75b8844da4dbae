//! `CREATE SOURCE`, `DROP SOURCE`, `SHOW SOURCES`.
//!
//! Creating a source validates the upstream and creates its publication and replication slot
//! (when absent) before the catalog entry is written; if writing fails, the upstream objects
//! are dropped again, so nothing is left half-created.

use std::collections::BTreeMap;

use datafusion::sql::sqlparser::ast;

use crate::catalog::{SourceCatalog, StatePurpose, TableCatalog};
use crate::connector::source::SourceConfig;
use crate::engine::ddl::{name_is_free, relation_name};
use crate::engine::session::text_rows;
use crate::engine::{CommandTag, Engine, Output};
use crate::error::{Error, Result};
use crate::invalid;

impl Engine {
    /// `CREATE SOURCE [IF NOT EXISTS] name WITH (connector = 'postgres-cdc' | 'mysql-cdc', ..)`.
    pub(crate) async fn create_source(
        &self,
        name: &ast::ObjectName,
        if_not_exists: bool,
        options: Vec<(String, String)>,
    ) -> Result<Output> {
        let _ddl = self.ddl_lock.lock().await;
        let name = relation_name(name)?;
        if !name_is_free(&self.catalog, &name, if_not_exists)? {
            return Ok(Output::Command(CommandTag::new("CREATE SOURCE")));
        }
        let mut map = BTreeMap::new();
        for (key, value) in options {
            if map.insert(key.clone(), value).is_some() {
                return Err(invalid!("option {key} is given twice"));
            }
        }
        let config = SourceConfig::from_options(&name, &map)?;
        self.check_slot_is_free(&config)?;
        let created = config.prepare().await?;
        let registered = match config.start_position().await {
            Ok(start) => self.register_source(&name, map, created, start).await,
            Err(e) => Err(e),
        };
        if let Err(e) = registered {
            let _ = config.cleanup(created).await;
            return Err(e);
        }
        tracing::info!(source = %name, connector = config.connector(), reads = %config.describe(), "created source");
        Ok(Output::Command(CommandTag::new("CREATE SOURCE")))
    }

    /// Refuses a Postgres source whose replication slot another source of the same upstream
    /// database already streams: a slot has one reader at a time, so the second would never
    /// read.
    fn check_slot_is_free(&self, config: &SourceConfig) -> Result<()> {
        let Some(new) = config.postgres() else { return Ok(()) };
        let place = |c: &crate::connector::postgres::PgSourceConfig| {
            (c.hostname.clone(), c.port, c.database.clone(), c.slot.clone())
        };
        for other in self.catalog.sources() {
            let Ok(theirs) = SourceConfig::from_options(&other.name, &other.options) else {
                continue;
            };
            if theirs.postgres().map(place) == Some(place(new)) {
                return Err(Error::Upstream {
                    code: "42710",
                    message: format!(
                        "source {} already streams replication slot \"{}\" of that upstream \
                         database; a slot has one reader: give this source another slot.name",
                        other.name, new.slot
                    ),
                });
            }
        }
        Ok(())
    }

    /// Writes a source's catalog entries (its own and its offset table's) and starts its job.
    async fn register_source(
        &self,
        name: &str,
        options: BTreeMap<String, String>,
        created: crate::catalog::Created,
        start: Option<(u64, Option<String>)>,
    ) -> Result<()> {
        let id = self.catalog.next_table_id()?;
        let state_id = self.catalog.next_table_id()?;
        // The binlog position is `lsn`; MariaDB's GTID position goes beside it.
        let mysql = options.get("connector").map(String::as_str) == Some("mysql-cdc");
        let columns = crate::stream::executor::source::offset_table::columns(mysql);
        let state =
            TableCatalog::internal(state_id, id, 0, StatePurpose::Source, columns, vec![0], 1);
        self.catalog.create_table(state)?;
        let source = SourceCatalog {
            id,
            name: name.to_owned(),
            definition: masked_definition(name, &options),
            options,
            created,
            state_table: state_id,
            start,
            table_patterns: Vec::new(),
        };
        let source = self.catalog.create_source(source)?;
        if let Err(e) = self.start_source_job(&source).await {
            let _ = self.catalog.drop_source(id);
            let _ = self.catalog.drop_table(state_id);
            return Err(e);
        }
        Ok(())
    }

    /// `DROP SOURCE [IF EXISTS] name`: drops the slot and publication the source created.
    pub(crate) async fn drop_source(
        &self,
        name: &ast::ObjectName,
        if_exists: bool,
    ) -> Result<Output> {
        let _ddl = self.ddl_lock.lock().await;
        let name = relation_name(name)?;
        let Some(source) = self.catalog.source_by_name(&name) else {
            if if_exists {
                return Ok(Output::Command(CommandTag::new("DROP SOURCE")));
            }
            return Err(Error::UnknownRelation { kind: "source", name });
        };
        self.drop_source_locked(&source).await?;
        Ok(Output::Command(CommandTag::new("DROP SOURCE")))
    }

    /// Drops a source; the caller holds the DDL lock.
    pub(crate) async fn drop_source_locked(&self, source: &SourceCatalog) -> Result<()> {
        let name = source.name.clone();
        let users: Vec<String> = self
            .catalog
            .tables()
            .iter()
            .filter(|t| t.cdc.as_ref().is_some_and(|c| c.source == source.id))
            .map(|t| t.name.clone())
            .collect();
        if !users.is_empty() {
            return Err(Error::DependentObjects(format!(
                "cannot drop source \"{name}\" because tables read from it: {}; drop them first",
                users.join(", ")
            )));
        }
        self.graph.stop_job(source.id).await?;
        let config = SourceConfig::from_options(&source.name, &source.options)?;
        if let Err(e) = config.cleanup(source.created).await {
            if !matches!(e, Error::Upstream { code: "08001", .. }) {
                return Err(e);
            }
            // The source goes anyway; what it created upstream must then be dropped by hand.
            tracing::warn!(source = %name, error = %e, reads = %config.describe(), "cannot reach the upstream to drop what the source created there");
        }
        self.catalog.drop_source(source.id)?;
        self.catalog.drop_table(source.state_table)?;
        self.store.drop_table_data(source.state_table)?;
        Ok(())
    }

    /// `SHOW SOURCES`.
    pub(crate) fn show_sources(&self) -> Result<Output> {
        let mut names: Vec<String> =
            self.catalog.sources().iter().map(|s| s.name.clone()).collect();
        names.sort();
        Ok(text_rows(&["Name"], names.into_iter().map(|n| vec![n]).collect()))
    }
}

/// The CREATE SOURCE statement with the password hidden.
fn masked_definition(name: &str, options: &BTreeMap<String, String>) -> String {
    let options: Vec<String> = options
        .iter()
        .map(|(k, v)| {
            let v = if k == "password" { "***" } else { v.as_str() };
            format!("{k} = '{}'", v.replace('\'', "''"))
        })
        .collect();
    format!("CREATE SOURCE {name} WITH ({})", options.join(", "))
}
