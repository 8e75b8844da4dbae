//! `CREATE TABLE FROM source TABLES 'schema.pattern' [WITH (..)]`: a CDC table for each
//! upstream table matching a pattern, now and as matching tables are created upstream.
//!
//! The pattern is recorded with its source ([`TablePattern`]); each matching upstream table
//! gets a table declared `(*)`, named as the upstream table, created as `CREATE TABLE name (*)
//! WITH (..) FROM source TABLE 'schema.table'` would create it, over the source's one change
//! stream. A task looks upstream every `discovery.interval` seconds (default 10) for tables
//! that match and have no CDC table yet, and creates theirs in the background (listed in
//! `rw_ddl_progress` while they read their snapshots). A table dropped by the user is not
//! created again; one whose name another relation has is skipped, said in the log.

use std::sync::Weak;
use std::time::Duration;

use datafusion::sql::sqlparser::ast;

use crate::catalog::{SourceCatalog, TablePattern};
use crate::connector::source::SourceConfig;
use crate::engine::ddl::relation_name;
use crate::engine::{CommandTag, Engine, Output, Session};
use crate::error::{Error, Result};
use crate::sql::parser::Statement;

/// How often the task looks for new upstream tables when no pattern says.
const DEFAULT_INTERVAL_SECS: u64 = 10;

impl Engine {
    /// `CREATE TABLE FROM source TABLES 'pattern' [WITH (..)]`: records the pattern and
    /// creates the tables that match now, as the session creates tables (in the background
    /// with `background_ddl`).
    pub(crate) async fn create_tables_from(
        &self,
        source: &ast::ObjectName,
        pattern: &str,
        options: Vec<(String, String)>,
        session: &Session,
    ) -> Result<Output> {
        let source_name = relation_name(source)?;
        let source = self
            .catalog
            .source_by_name(&source_name)
            .ok_or_else(|| Error::UnknownRelation { kind: "source", name: source_name.clone() })?;
        let config = SourceConfig::from_options(&source.name, &source.options)?;
        let pattern = qualified_pattern(&config, pattern)?;
        let mut interval_secs = DEFAULT_INTERVAL_SECS;
        let mut table_options = Vec::new();
        for (key, value) in options {
            match key.as_str() {
                "discovery.interval" => {
                    interval_secs = value.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                        Error::InvalidStatement(format!(
                            "discovery.interval must be a positive number of seconds, not '{value}'"
                        ))
                    })?;
                }
                _ => table_options.push((key, value)),
            }
        }
        let pattern =
            TablePattern { pattern, options: table_options, interval_secs, excluded: vec![] };
        // The options are checked as the tables' own before anything is recorded.
        let checked = create_sql(&pattern, "checked", &source.name, "s.t", '"');
        if let Some(Statement::CreateTableFrom { table, .. }) =
            crate::sql::parser::parse(&checked)?.pop()
        {
            super::cdc::check_table_options(&table.table_options)?;
        }
        let tables = self.matching_tables(&source, &pattern).await?;
        let source = self.catalog.update_source(source.id, |s| {
            s.table_patterns.retain(|p| p.pattern != pattern.pattern);
            s.table_patterns.push(pattern.clone());
        })?;
        let mut created = Vec::new();
        for (schema, table) in tables {
            if let Some(name) =
                self.create_pattern_table(&source, &pattern, &schema, &table, session).await?
            {
                created.push(name);
            }
        }
        session.notice(match created.is_empty() {
            true => format!(
                "no upstream table matches '{}' yet; tables created upstream that match are \
                 picked up within {interval_secs} s",
                pattern.pattern
            ),
            false => format!("created table(s) {}", created.join(", ")),
        });
        Ok(Output::Command(CommandTag::new("CREATE TABLE")))
    }

    /// Looks upstream for tables matching the sources' patterns that have no CDC table yet, and
    /// creates theirs in the background.
    pub(crate) async fn pick_up_tables(&self, due: impl Fn(&TablePattern) -> bool) {
        let session = Session::default();
        if let Err(e) = session.set_value("background_ddl", "true".into()) {
            tracing::warn!(error = %e, "cannot pick up upstream tables");
            return;
        }
        for source in self.catalog.sources() {
            for pattern in source.table_patterns.iter().filter(|p| due(p)) {
                let tables = match self.matching_tables(&source, pattern).await {
                    Ok(tables) => tables,
                    Err(e) => {
                        tracing::warn!(source = %source.name, pattern = %pattern.pattern, error = %e, "cannot list the upstream's tables; looking again later");
                        continue;
                    }
                };
                for (schema, table) in tables {
                    match self
                        .create_pattern_table(&source, pattern, &schema, &table, &session)
                        .await
                    {
                        Ok(Some(name)) => {
                            tracing::info!(source = %source.name, %name, upstream = %format!("{schema}.{table}"), "picked up an upstream table")
                        }
                        Ok(None) => {}
                        Err(e) => {
                            tracing::warn!(source = %source.name, upstream = %format!("{schema}.{table}"), error = %e, "cannot create the table of an upstream table that matches a pattern; trying again later")
                        }
                    }
                }
            }
        }
    }

    /// The upstream tables matching `pattern` that have no CDC table of `source` and were not
    /// dropped by the user.
    async fn matching_tables(
        &self,
        source: &SourceCatalog,
        pattern: &TablePattern,
    ) -> Result<Vec<(String, String)>> {
        let config = SourceConfig::from_options(&source.name, &source.options)?;
        let database = match &config {
            SourceConfig::MySql(my) => my.database.clone(),
            SourceConfig::Postgres(_) => String::new(),
        };
        let upstream = config.session().await?.list_tables(&database).await?;
        let followed: Vec<(String, String)> = self
            .catalog
            .tables()
            .iter()
            .filter_map(|t| t.cdc.as_ref())
            .filter(|c| c.source == source.id)
            .map(|c| (c.schema.clone(), c.table.clone()))
            .collect();
        Ok(upstream
            .into_iter()
            .filter(|(s, t)| pattern.matches(s, t))
            .filter(|(s, t)| !pattern.excluded.contains(&format!("{s}.{t}")))
            .filter(|st| !followed.contains(st))
            .collect())
    }

    /// Creates the CDC table of upstream table `schema.table` for `pattern`; its name, or
    /// `None` when another relation has the name (said in the log).
    async fn create_pattern_table(
        &self,
        source: &SourceCatalog,
        pattern: &TablePattern,
        schema: &str,
        table: &str,
        session: &Session,
    ) -> Result<Option<String>> {
        if self.catalog.name_taken(table) {
            tracing::warn!(source = %source.name, upstream = %format!("{schema}.{table}"), "an upstream table matches a pattern, but a relation has its name: it gets no table");
            return Ok(None);
        }
        let config = SourceConfig::from_options(&source.name, &source.options)?;
        let quote = if matches!(config, SourceConfig::MySql(_)) { '`' } else { '"' };
        let sql = create_sql(pattern, table, &source.name, &format!("{schema}.{table}"), quote);
        let Some(Statement::CreateTableFrom { table: create, source: from, external }) =
            crate::sql::parser::parse(&sql)?.pop()
        else {
            return Err(Error::InvalidStatement(format!("cannot create a table as {sql}")));
        };
        self.create_table_from(*create, &from, &external, false, session).await?;
        Ok(Some(table.to_owned()))
    }

    /// Records that the user dropped CDC table `table` of `source`'s upstream table
    /// `schema.name`: a pattern it matches does not create it again.
    pub(crate) fn exclude_from_patterns(&self, source: &SourceCatalog, schema: &str, name: &str) {
        if !source.table_patterns.iter().any(|p| p.matches(schema, name)) {
            return;
        }
        let upstream = format!("{schema}.{name}");
        let excluded = self.catalog.update_source(source.id, |s| {
            for pattern in s.table_patterns.iter_mut().filter(|p| p.matches(schema, name)) {
                if !pattern.excluded.contains(&upstream) {
                    pattern.excluded.push(upstream.clone());
                }
            }
        });
        if let Err(e) = excluded {
            tracing::warn!(%upstream, error = %e, "cannot record the dropped table: its pattern may create it again");
        }
    }
}

/// Looks for new upstream tables for the sources' patterns, each at its interval, while the
/// engine runs.
pub(crate) async fn pick_up_forever(engine: Weak<Engine>) {
    let mut ticks: u64 = 0;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        ticks += 1;
        let Some(engine) = engine.upgrade() else { return };
        let due = |p: &TablePattern| ticks.is_multiple_of(p.interval_secs.max(1));
        if engine.catalog.sources().iter().any(|s| s.table_patterns.iter().any(due)) {
            engine.pick_up_tables(due).await;
        }
    }
}

/// The pattern with its schema: MySQL's may leave it out (the source's database).
fn qualified_pattern(config: &SourceConfig, pattern: &str) -> Result<String> {
    match (pattern.split_once('.'), config) {
        (Some((schema, table)), _) if !schema.is_empty() && !table.is_empty() => {
            Ok(pattern.to_owned())
        }
        (None, SourceConfig::MySql(my)) if !pattern.is_empty() => {
            Ok(format!("{}.{pattern}", my.database))
        }
        _ => Err(Error::InvalidStatement(format!(
            "TABLES '{pattern}' needs a schema and a table pattern, as 'public.orders_*' (* any \
             characters, ? one)"
        ))),
    }
}

/// The statement that creates the table `name` of upstream table `external` for `pattern`.
/// Upstream names are quoted with `upstream_quote` (Postgres `"`, MySQL `` ` ``).
fn create_sql(
    pattern: &TablePattern,
    name: &str,
    source: &str,
    external: &str,
    upstream_quote: char,
) -> String {
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let q = upstream_quote.to_string();
    let up = |s: &str| format!("{q}{}{q}", s.replace(&q, &format!("{q}{q}")));
    let options: Vec<String> = pattern
        .options
        .iter()
        .map(|(k, v)| format!("{} = '{}'", quote(k), v.replace('\'', "''")))
        .collect();
    let with = match options.is_empty() {
        true => String::new(),
        false => format!(" WITH ({})", options.join(", ")),
    };
    let (schema, table) = external.split_once('.').unwrap_or(("", external));
    let external = format!("{}.{}", up(schema), up(table)).replace('\'', "''");
    format!("CREATE TABLE {} (*){with} FROM {} TABLE '{external}'", quote(name), quote(source))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_matching_table_is_created_as_a_table_declared_with_all_columns() {
        let pattern = TablePattern {
            pattern: "public.orders_*".into(),
            options: vec![("snapshot.batch_size".into(), "100".into())],
            interval_secs: 10,
            excluded: vec![],
        };
        let sql = create_sql(&pattern, "orders_2024", "pg", "public.orders_2024", '"');
        assert_eq!(
            sql,
            "CREATE TABLE \"orders_2024\" (*) WITH (\"snapshot.batch_size\" = '100') FROM \"pg\" \
             TABLE '\"public\".\"orders_2024\"'"
        );
        let Some(Statement::CreateTableFrom { table, external, .. }) =
            crate::sql::parser::parse(&sql).unwrap().pop()
        else {
            panic!("{sql}")
        };
        assert_eq!(table.name.to_string(), "\"orders_2024\"");
        assert_eq!(external, "\"public\".\"orders_2024\"");
        let sql = create_sql(&pattern, "Items", "my", "shop.Items", '`');
        assert!(sql.ends_with("FROM \"my\" TABLE '`shop`.`Items`'"), "{sql}");
    }

    #[test]
    fn the_statement_names_a_source_and_a_pattern() {
        let sql = "CREATE TABLE FROM pg TABLES 'public.orders_*' WITH (discovery.interval = '2')";
        let Some(Statement::CreateTablesFrom { source, pattern, options }) =
            crate::sql::parser::parse(sql).unwrap().pop()
        else {
            panic!("{sql}")
        };
        assert_eq!((source.to_string().as_str(), pattern.as_str()), ("pg", "public.orders_*"));
        assert_eq!(options, [("discovery.interval".to_owned(), "2".to_owned())]);
        let err = crate::sql::parser::parse("CREATE TABLE FROM pg TABLE 'public.t'").unwrap_err();
        assert!(err.to_string().contains("needs TABLES 'schema.pattern'"), "{err}");
    }
}
