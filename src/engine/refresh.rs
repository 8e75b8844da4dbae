//! `ALTER TABLE t REFRESH SCHEMA`: a CDC table built again from its upstream table as it is
//! now, under its name, with its options and source: the one-statement way on after a change
//! that the table stops at (a column renamed, moved, narrowed or retyped to another kind, a
//! key column changed, the upstream table dropped and created again with other columns).
//!
//! The table's own statement is run again (a table declared `(*)` takes the upstream's
//! columns as they are now; one declared with a column list must still find them). It binds
//! the upstream table first; only then is the old table dropped (its job, rows and state, not
//! its source or publication) and the new one created in its place, all under the DDL lock,
//! so a refresh that cannot bind leaves the table as it was. The new table reads its snapshot
//! like a new one (`SHOW JOBS`, `rw_ddl_progress`). Views read the table by its columns, so a
//! table that views read is refused: drop them first.

use datafusion::sql::sqlparser::ast;

use crate::catalog::TableCatalog;
use crate::engine::ddl::relation_name;
use crate::engine::{CommandTag, Engine, Output, Session};
use crate::error::{Error, Result};
use crate::sql::parser::{Statement, parse};

impl Engine {
    /// `ALTER TABLE name REFRESH SCHEMA`.
    pub(crate) async fn refresh_schema(
        &self,
        name: &ast::ObjectName,
        session: &Session,
    ) -> Result<Output> {
        let ddl = self.ddl_lock.lock().await;
        let name = relation_name(name)?;
        let (table, cdc) = self.cdc_table(&name, "has an upstream schema to refresh")?;
        let dependents = self.catalog.dependents(table.id);
        if !dependents.is_empty() {
            let names: Vec<&str> = dependents.iter().map(|d| d.name.as_str()).collect();
            return Err(Error::DependentObjects(format!(
                "cannot refresh the schema of \"{name}\" because views read it: {}; it is built \
                 again from its upstream table, so drop them first (or use ALTER TABLE {name} \
                 RESNAPSHOT when its columns are still the ones the table reads)",
                names.join(", ")
            )));
        }
        let statement = parse(&table.definition)?.into_iter().next();
        let Some(Statement::CreateTableFrom { table: create, source, external }) = statement else {
            return Err(Error::Storage(format!(
                "the statement that created \"{name}\" does not read again: {}",
                table.definition
            )));
        };
        let mut create = *create;
        create.if_not_exists = false;
        tracing::info!(table = %name, upstream = %external, "building the table again from its upstream table as it is now");
        let started = self
            .start_table_from(create, &source, &external, cdc.private_source, Some(&table), session)
            .await?;
        drop(ddl);
        if let Some((job, false)) = started {
            self.wait_created(&job, session).await?;
        }
        Ok(Output::Command(CommandTag::new("ALTER TABLE")))
    }

    /// Drops `table`, which a table of the same name and upstream replaces: its job, rows and
    /// state, not its source, publication or the patterns that created it.
    pub(crate) async fn drop_replaced(&self, table: &TableCatalog) -> Result<()> {
        self.drop_job_and_rows(table).await?;
        tracing::info!(relation = %table.name, id = %table.id, "dropped the table it replaces");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The statement a CDC table records as it records it (see `Engine::start_table_from`).
    fn recorded(sql: &str) -> String {
        let Some(Statement::CreateTableFrom { table, source, external }) =
            parse(sql).unwrap().into_iter().next()
        else {
            panic!("not a CREATE TABLE .. FROM: {sql}")
        };
        format!("{table} FROM {source} TABLE '{external}'")
    }

    #[test]
    fn a_recorded_definition_reads_again_as_the_same_statement() {
        for sql in [
            "CREATE TABLE t (*) WITH (snapshot.batch_size = '3', schema.change = 'stop') \
             FROM pg TABLE 'public.t'",
            "CREATE TABLE \"T\" (id int PRIMARY KEY, a text) FROM pg TABLE 'public.\"T\"'",
            "CREATE TABLE t (*) FROM my TABLE 'shop.t'",
        ] {
            let definition = recorded(sql);
            let Some(Statement::CreateTableFrom { table, source, external }) =
                parse(&definition).unwrap().into_iter().next()
            else {
                panic!("{definition} does not read again")
            };
            assert_eq!(recorded(&definition), definition, "{sql}");
            let Some(Statement::CreateTableFrom { table: first, source: s, external: e }) =
                parse(sql).unwrap().into_iter().next()
            else {
                unreachable!()
            };
            assert_eq!((table.columns, table.table_options), (first.columns, first.table_options));
            assert_eq!((source, external), (s, e));
        }
    }
}
