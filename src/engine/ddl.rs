//! DDL: `CREATE TABLE`, `DROP TABLE | MATERIALIZED VIEW`, `SHOW TABLES`, `DESCRIBE`.
//!
//! A table is created in two steps: its catalog entry is written, then its streaming job
//! (`dml -> materialize`) starts. Dropping stops the job between two checkpoints, then removes
//! the catalog entry and the stored rows.

use datafusion::sql::sqlparser::ast;

use crate::catalog::{
    CdcTableInfo, ColumnCatalog, DEFAULT_SCHEMA, ROW_ID_COLUMN, RelationKind, SourceCatalog,
    TableCatalog,
};
use crate::connector::source::SourceConfig;
use crate::engine::session::text_rows;
use crate::engine::{CommandTag, Engine, Output, Session};
use crate::error::{Error, Result};
use crate::types::{DataType, Varchar};
use crate::{invalid, unsupported};

/// How long a DROP of a CDC table waits for the upstream to take it out of the publication.
const UNPUBLISH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl Engine {
    /// `CREATE TABLE name (columns, PRIMARY KEY ..)`.
    pub(crate) async fn create_table(
        &self,
        create: ast::CreateTable,
        session: &Session,
    ) -> Result<Output> {
        if has_connector(&create.table_options) {
            return self.create_table_with_connector(create, session).await;
        }
        let _ddl = self.ddl_lock.lock().await;
        let name = relation_name(&create.name)?;
        if !name_is_free(&self.catalog, &name, create.if_not_exists)? {
            return Ok(Output::Command(CommandTag::new("CREATE TABLE")));
        }
        let (columns, pk) = bind_columns(&create)?;
        for column in &columns {
            if let Some(default) = &column.default {
                self.check_default(column, default).await?;
            }
        }
        let id = self.catalog.next_table_id()?;
        let table = TableCatalog::new_table(id, name, columns, pk, create.to_string());
        let table = self.catalog.create_table(table)?;
        let job = self.graph.prepare_table_job(&table);
        self.graph.start_job(job).await?;
        tracing::info!(table = %table.name, id = %table.id, "created table");
        Ok(Output::Command(CommandTag::new("CREATE TABLE")))
    }

    /// Checks a column's `DEFAULT` as Postgres does at CREATE: it may not read columns or run
    /// subqueries (0A000), and its value must convert to the column's type.
    async fn check_default(&self, column: &ColumnCatalog, default: &str) -> Result<()> {
        let query = match crate::sql::parser::parse(&format!("SELECT {default}"))?.pop() {
            Some(crate::sql::parser::Statement::Sql(query)) => query,
            _ => return Err(invalid!("DEFAULT {default} is not an expression")),
        };
        let mut subquery = false;
        let _ = ast::visit_expressions(query.as_ref(), |e| {
            subquery |= matches!(
                e,
                ast::Expr::Subquery(_) | ast::Expr::Exists { .. } | ast::Expr::InSubquery { .. }
            );
            std::ops::ControlFlow::<()>::Continue(())
        });
        if subquery {
            return Err(unsupported!("subqueries in a DEFAULT expression"));
        }
        let state = self.query_state();
        let plan = self.plan(&state, *query).await.map_err(|e| match e {
            Error::DataFusion(ref d) if d.to_string().contains("No field named") => {
                unsupported!("column references in a DEFAULT expression")
            }
            other => other,
        })?;
        let batches: Vec<arrow::array::RecordBatch> = match self.run_plan(state, plan).await? {
            Output::Rows { stream, .. } => futures::TryStreamExt::try_collect(stream).await?,
            _ => unreachable!("a query produces rows"),
        };
        for batch in &batches {
            let value = batch.column(0);
            crate::types::cast_to(value, column.data_type, crate::types::CastMode::Strict)?;
        }
        Ok(())
    }

    /// `DROP TABLE | MATERIALIZED VIEW [IF EXISTS] a, b [CASCADE]`.
    pub(crate) async fn drop_relations(
        &self,
        kind: RelationKind,
        if_exists: bool,
        names: &[ast::ObjectName],
        cascade: bool,
    ) -> Result<Output> {
        let _ddl = self.ddl_lock.lock().await;
        for name in names {
            let name = relation_name(name)?;
            let relation = match self.catalog.table_by_name(&name) {
                Some(r) if r.kind == kind => r,
                Some(r) => {
                    return Err(Error::WrongObjectType(format!(
                        "\"{name}\" is a {}, not a {}; use DROP {}",
                        r.kind.noun(),
                        kind.noun(),
                        r.kind.noun().to_uppercase()
                    )));
                }
                None if if_exists => continue,
                None => return Err(Error::UnknownRelation { kind: kind.noun(), name }),
            };
            let dependents = self.catalog.dependents(relation.id);
            if !dependents.is_empty() && !cascade {
                let names: Vec<&str> = dependents.iter().map(|d| d.name.as_str()).collect();
                return Err(Error::DependentObjects(format!(
                    "cannot drop {} \"{name}\" because other objects depend on it: {}; \
                     drop them first or use DROP .. CASCADE",
                    kind.noun(),
                    names.join(", ")
                )));
            }
            self.drop_with_dependents(&relation).await?;
        }
        let tag = match kind {
            RelationKind::MaterializedView => "DROP MATERIALIZED VIEW",
            _ => "DROP TABLE",
        };
        Ok(Output::Command(CommandTag::new(tag)))
    }

    /// Drops a relation after every view that reads it, dependents first.
    pub(crate) async fn drop_with_dependents(&self, relation: &TableCatalog) -> Result<()> {
        for dependent in self.catalog.dependents(relation.id) {
            // A view reading two of the dropped relations is dropped with the first.
            if self.catalog.table_by_id(dependent.id).is_some() {
                Box::pin(self.drop_with_dependents(&dependent)).await?;
            }
        }
        self.drop_job_and_rows(relation).await?;
        tracing::info!(relation = %relation.name, id = %relation.id, "dropped {}", relation.kind.noun());
        if let Some(cdc) = &relation.cdc
            && let Some(source) = self.catalog.sources().into_iter().find(|s| s.id == cdc.source)
        {
            match cdc.private_source {
                true => self.drop_source_locked(&source).await?,
                false => {
                    self.exclude_from_patterns(&source, &cdc.schema, &cdc.table);
                    self.unpublish(&source, cdc).await
                }
            }
        }
        Ok(())
    }

    /// Stops `relation`'s job and drops it from the catalog with its internal tables and
    /// their rows.
    pub(crate) async fn drop_job_and_rows(&self, relation: &TableCatalog) -> Result<()> {
        let job = self.graph.job(relation.id)?;
        // Wait for statements in flight; none can start once the job is gone.
        let _writes = job.write_lock.lock().await;
        self.graph.stop_job(relation.id).await?;
        for id in relation.internal_tables.iter().copied().chain([relation.id]) {
            self.catalog.drop_table(id)?;
            self.store.drop_table_data(id)?;
        }
        Ok(())
    }

    /// Takes a dropped CDC table's upstream table out of its source's publication when Sluice
    /// created that publication and no other table of the source reads the upstream table, so
    /// the upstream stops decoding its changes for Sluice. Best effort: the drop is done, and an
    /// unreachable upstream only leaves the table published (logged).
    async fn unpublish(&self, source: &SourceCatalog, cdc: &CdcTableInfo) {
        let still_read = self.catalog.tables().iter().any(|t| {
            t.cdc.as_ref().is_some_and(|c| {
                c.source == source.id && c.schema == cdc.schema && c.table == cdc.table
            })
        });
        if !source.created.publication || still_read {
            return;
        }
        let removal = async {
            let config = SourceConfig::from_options(&source.name, &source.options)?;
            config.remove_table(&cdc.schema, &cdc.table).await
        };
        let result = tokio::time::timeout(UNPUBLISH_TIMEOUT, removal).await;
        let error = match result {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(_) => "timed out".to_owned(),
        };
        tracing::warn!(
            source = %source.name,
            upstream = %format!("{}.{}", cdc.schema, cdc.table),
            %error,
            "the dropped table stays in the upstream publication"
        );
    }

    /// `SHOW TABLES`: the user tables, by name.
    pub(crate) fn show_tables(&self) -> Result<Output> {
        self.show_relations(RelationKind::Table)
    }

    /// The names of the relations of one kind, sorted.
    pub(crate) fn show_relations(&self, kind: RelationKind) -> Result<Output> {
        let tables = self.catalog.tables();
        let mut names: Vec<String> =
            tables.iter().filter(|t| t.kind == kind).map(|t| t.name.clone()).collect();
        names.sort();
        Ok(text_rows(&["Name"], names.into_iter().map(|n| vec![n]).collect()))
    }

    /// `DESCRIBE name`: columns, types, and the primary key.
    pub(crate) fn describe(&self, name: &ast::ObjectName) -> Result<Output> {
        let name = relation_name(name)?;
        let table = self
            .catalog
            .table_by_name(&name)
            .ok_or_else(|| Error::UnknownRelation { kind: "table", name })?;
        let mut rows: Vec<Vec<String>> = table
            .columns
            .iter()
            .map(|c| vec![c.name.clone(), c.data_type.to_string(), c.hidden.to_string()])
            .collect();
        let pk: Vec<&str> = table.pk.iter().map(|&i| table.columns[i].name.as_str()).collect();
        rows.push(vec!["primary key".into(), pk.join(", "), String::new()]);
        Ok(text_rows(&["Name", "Type", "Is Hidden"], rows))
    }
}

/// Checks a new relation's or source's name is free. `Ok(false)`: it is taken but `IF NOT
/// EXISTS` was given, so the statement does nothing.
pub(crate) fn name_is_free(
    catalog: &crate::catalog::Catalog,
    name: &str,
    if_not_exists: bool,
) -> Result<bool> {
    match (catalog.name_taken(name), if_not_exists) {
        (false, _) => Ok(true),
        (true, true) => Ok(false),
        (true, false) => Err(Error::DuplicateRelation(name.to_owned())),
    }
}

/// True if a CREATE TABLE's `WITH (..)` names a connector.
fn has_connector(options: &ast::CreateTableOptions) -> bool {
    match options {
        ast::CreateTableOptions::With(list) => list.iter().any(|o| {
            matches!(o, ast::SqlOption::KeyValue { key, .. } if key.value.eq_ignore_ascii_case("connector"))
        }),
        _ => false,
    }
}

/// The name of a relation in the default schema, with Postgres identifier case rules.
pub(crate) fn relation_name(name: &ast::ObjectName) -> Result<String> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| p.as_ident().map(normalize_ident).ok_or_else(|| invalid!("invalid name {name}")))
        .collect::<Result<_>>()?;
    match parts.as_slice() {
        [table] => Ok(table.clone()),
        [schema, table] if schema == DEFAULT_SCHEMA => Ok(table.clone()),
        [db, schema, table]
            if db == crate::catalog::DEFAULT_DATABASE && schema == DEFAULT_SCHEMA =>
        {
            Ok(table.clone())
        }
        _ => Err(Error::UnknownRelation { kind: "relation", name: name.to_string() }),
    }
}

/// Unquoted identifiers fold to lower case; quoted ones keep their case.
pub(crate) fn normalize_ident(ident: &ast::Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_lowercase(),
    }
}

/// Binds the column list and primary key of a CREATE TABLE. A table without a primary key gets
/// the hidden key column [`ROW_ID_COLUMN`].
fn bind_columns(create: &ast::CreateTable) -> Result<(Vec<ColumnCatalog>, Vec<usize>)> {
    if create.query.is_some() {
        return Err(unsupported!(
            "CREATE TABLE .. AS SELECT; create the table, then INSERT .. SELECT"
        ));
    }
    if create.columns.is_empty() {
        return Err(invalid!("a table needs at least one column"));
    }
    let mut columns = Vec::with_capacity(create.columns.len() + 1);
    let mut pk_names = Vec::new();
    for def in &create.columns {
        let name = normalize_ident(&def.name);
        if columns.iter().any(|c: &ColumnCatalog| c.name == name) {
            return Err(invalid!("column \"{name}\" specified more than once"));
        }
        let mut default = None;
        for option in &def.options {
            match &option.option {
                ast::ColumnOption::PrimaryKey(_) => pk_names.push(name.clone()),
                ast::ColumnOption::Null | ast::ColumnOption::NotNull => {}
                ast::ColumnOption::Default(expr) => default = Some(expr.to_string()),
                other => return Err(unsupported!("column option {other}")),
            }
        }
        columns.push(ColumnCatalog {
            name,
            data_type: DataType::from_sql(&def.data_type)?,
            hidden: false,
            varchar: Varchar::from_sql(&def.data_type)?,
            default,
            scale_of: None,
            since: 0,
        });
    }
    for constraint in &create.constraints {
        match constraint {
            ast::TableConstraint::PrimaryKey(pk) if pk_names.is_empty() => {
                for col in &pk.columns {
                    match &col.column.expr {
                        ast::Expr::Identifier(ident) => pk_names.push(normalize_ident(ident)),
                        other => {
                            return Err(invalid!(
                                "primary key column must be a column name, not {other}"
                            ));
                        }
                    }
                }
            }
            ast::TableConstraint::PrimaryKey(_) => {
                return Err(invalid!(
                    "multiple primary keys for table \"{}\" are not allowed",
                    create.name
                ));
            }
            other => return Err(unsupported!("table constraint {other}")),
        }
    }
    let pk = pk_names
        .iter()
        .map(|n| {
            columns
                .iter()
                .position(|c| &c.name == n)
                .ok_or_else(|| invalid!("column \"{n}\" named in key does not exist"))
        })
        .collect::<Result<Vec<_>>>()?;
    if let Some(&i) = pk.iter().find(|&&i| matches!(columns[i].data_type, DataType::Array(_))) {
        return Err(unsupported!(
            "the array column \"{}\" in a primary key; key the table by other columns",
            columns[i].name
        ));
    }
    if pk.is_empty() {
        let row_id = columns.len();
        columns.push(ColumnCatalog {
            hidden: true,
            ..ColumnCatalog::new(ROW_ID_COLUMN, DataType::Int64)
        });
        return Ok((columns, vec![row_id]));
    }
    Ok((columns, pk))
}
