//! `CREATE SOURCE`, `DROP SOURCE`, `SHOW SOURCES`.
//!
//! Creating a source validates the upstream and creates its publication and replication slot
//! (when absent) before the catalog entry is written; if writing fails, the upstream objects
//! are dropped again, so nothing is left half-created.

use std::collections::BTreeMap;

use datafusion::sql::sqlparser::ast;

use crate::catalog::SourceCatalog;
use crate::connector::postgres_cdc::PgSourceConfig;
use crate::engine::ddl::relation_name;
use crate::engine::session::text_rows;
use crate::engine::{CommandTag, Engine, Output};
use crate::error::{Error, Result};
use crate::invalid;

impl Engine {
    /// `CREATE SOURCE [IF NOT EXISTS] name WITH (connector = 'postgres-cdc', ..)`.
    pub(crate) async fn create_source(
        &self,
        name: &ast::ObjectName,
        if_not_exists: bool,
        options: Vec<(String, String)>,
    ) -> Result<Output> {
        let _ddl = self.ddl_lock.lock().await;
        let name = relation_name(name)?;
        if self.catalog.name_taken(&name) {
            if if_not_exists {
                return Ok(Output::Command(CommandTag::new("CREATE SOURCE")));
            }
            return Err(Error::DuplicateRelation(name));
        }
        let mut map = BTreeMap::new();
        for (key, value) in options {
            if map.insert(key.clone(), value).is_some() {
                return Err(invalid!("option {key} is given twice"));
            }
        }
        let config = PgSourceConfig::from_options(&name, &map)?;
        let client = config.connect().await?;
        let created = config.prepare(&client).await?;
        let source = SourceCatalog {
            id: self.catalog.next_table_id()?,
            name: name.clone(),
            definition: masked_definition(&name, &map),
            options: map,
            created,
        };
        if let Err(e) = self.catalog.create_source(source) {
            let _ = config.cleanup(&client, created).await;
            return Err(e);
        }
        tracing::info!(source = %name, slot = %config.slot, publication = %config.publication, "created source");
        Ok(Output::Command(CommandTag::new("CREATE SOURCE")))
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
        let config = PgSourceConfig::from_options(&source.name, &source.options)?;
        match config.connect().await {
            Ok(client) => config.cleanup(&client, source.created).await?,
            Err(e) => {
                // The source goes anyway; what it created upstream must then be dropped by hand.
                tracing::warn!(source = %name, error = %e, slot = %config.slot, "cannot reach the upstream to drop the slot");
            }
        }
        self.catalog.drop_source(source.id)?;
        Ok(Output::Command(CommandTag::new("DROP SOURCE")))
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
