//! `CREATE TABLE .. FROM source TABLE 'schema.table'`: binding a CDC table to its upstream
//! table, and starting a source's reader job. The jobs are built by `stream::graph::cdc`.

use datafusion::sql::sqlparser::ast;

use crate::catalog::{
    CdcTableInfo, ColumnCatalog, CreatingInfo, SourceCatalog, StatePurpose, TableCatalog,
};
use crate::connector::common::UpstreamTable;
use crate::connector::source::SourceConfig;
use crate::engine::ddl::{name_is_free, normalize_ident, relation_name};
use crate::engine::{CommandTag, Engine, Output, Session};
use crate::error::{Error, Result};
use crate::stream::graph::creating::now_ms;
use crate::types::DataType;
use crate::{invalid, unsupported};

impl Engine {
    /// `CREATE TABLE name (cols | *) [WITH (..)] FROM source TABLE 'schema.table'`.
    pub(crate) async fn create_table_from(
        &self,
        create: ast::CreateTable,
        source_name: &ast::ObjectName,
        external: &str,
        private_source: bool,
        session: &Session,
    ) -> Result<Output> {
        let tag = Output::Command(CommandTag::new("CREATE TABLE"));
        let ddl = self.ddl_lock.lock().await;
        let started = self
            .start_table_from(create, source_name, external, private_source, None, session)
            .await?;
        drop(ddl);
        if let Some((job, false)) = started {
            self.wait_created(&job, session).await?;
        }
        Ok(tag)
    }

    /// [`Engine::create_table_from`] up to its job running, with the DDL lock held: the job
    /// and whether it runs in the background (`None` when the table exists and the statement
    /// said `IF NOT EXISTS`). `replacing`: a table of the same name that the new one replaces
    /// (`ALTER TABLE .. REFRESH SCHEMA`), dropped once the upstream table is bound.
    pub(crate) async fn start_table_from(
        &self,
        create: ast::CreateTable,
        source_name: &ast::ObjectName,
        external: &str,
        private_source: bool,
        replacing: Option<&TableCatalog>,
        session: &Session,
    ) -> Result<Option<(std::sync::Arc<crate::stream::graph::creating::CreatingJob>, bool)>> {
        let name = relation_name(&create.name)?;
        if replacing.is_none() && !name_is_free(&self.catalog, &name, create.if_not_exists)? {
            return Ok(None);
        }
        let rate_limit = session.backfill_rate_limit()?;
        let creating =
            CreatingInfo { background: session.background_ddl()?, initialized_at_ms: now_ms() };
        let source_name = relation_name(source_name)?;
        let source = self
            .catalog
            .source_by_name(&source_name)
            .ok_or_else(|| Error::UnknownRelation { kind: "source", name: source_name.clone() })?;
        let config = SourceConfig::from_options(&source.name, &source.options)?;
        let (schema, table) = config.split_qualified(external)?;
        let options = table_options(&create.table_options)?;
        let mut reader = config.session().await?;
        let upstream = reader.describe_table(&schema, &table).await?;
        let upstream_identity = reader.table_identity(&schema, &table).await?;
        let (columns, pk, upstream_columns) = bind_cdc_columns(&create, &upstream)?;
        let (columns, upstream_columns) = with_scale_columns(columns, upstream_columns, 0);
        let parallelism = match (options.parallelism, options.rows_per_split) {
            (Some(n), _) => n,
            (None, Some(_)) => default_readers(),
            (None, None) if !options.snapshot => 1,
            (None, None) => default_splits(reader.estimate_rows(&schema, &table).await?),
        };
        config.add_table(&reader, source.created.publication, &upstream).await?;
        if let Some(old) = replacing {
            self.drop_replaced(old).await?;
        }

        let id = self.catalog.next_table_id()?;
        let state_id = self.catalog.next_table_id()?;
        let state_columns = crate::stream::executor::backfill::state::cdc_columns(
            pk.iter().map(|&i| columns[i].clone()),
        );
        let purpose = StatePurpose::StreamCdcScan;
        let state = TableCatalog::internal(state_id, id, 1, purpose, state_columns, vec![0], 1);
        self.catalog.create_table(state)?;
        let mut catalog = TableCatalog::new_table(
            id,
            name.clone(),
            columns,
            pk,
            format!("{create} FROM {source_name} TABLE '{external}'"),
        );
        catalog.internal_tables = vec![state_id];
        catalog.backfill_rate_limit = rate_limit;
        catalog.creating = Some(creating);
        catalog.cdc = Some(CdcTableInfo {
            source: source.id,
            schema,
            table,
            upstream_columns,
            upstream_names: upstream.columns.iter().map(|c| c.name.clone()).collect(),
            upstream_types: upstream.upstream_types.clone(),
            upstream_pk: upstream.pk.clone(),
            batch_size: options.batch_size,
            snapshot: options.snapshot,
            parallelism,
            rows_per_split: options.rows_per_split,
            private_source,
            upstream_identity,
            follow_columns: create.columns.is_empty(),
            columns_since: Vec::new(),
            resnapshot_from: None,
            dropped: Vec::new(),
            retyped: Vec::new(),
            pinned: Vec::new(),
            stop_at_schema_change: options.stop_at_schema_change,
        });
        let catalog = self.catalog.create_table(catalog)?;
        let source_actor = self
            .graph
            .output_actors(source.id)
            .first()
            .copied()
            .ok_or_else(|| Error::Stream(format!("source {source_name} is not running")))?;
        let job = self.graph.prepare_cdc_table_job(&catalog, source_actor)?;
        let (_, backfills) = self.graph.start_job(job).await?;
        tracing::info!(table = %name, upstream = %external, source = %source_name, "started CDC table");
        let job = self.graph.track_job(&catalog, backfills)?;
        Ok(Some((job, creating.background)))
    }

    /// `CREATE TABLE t (..) WITH (connector = 'postgres-cdc', .., table.name = 'schema.t')`: a
    /// source of its own plus `CREATE TABLE .. FROM` it; the source goes when the table goes.
    pub(crate) async fn create_table_with_connector(
        &self,
        mut create: ast::CreateTable,
        session: &Session,
    ) -> Result<Output> {
        let ast::CreateTableOptions::With(list) = &create.table_options else {
            return Err(invalid!("connector options go in WITH (..)"));
        };
        let mut source_options = Vec::new();
        let mut table_options = Vec::new();
        let mut external = None;
        for option in list {
            let ast::SqlOption::KeyValue { key, value } = option else {
                return Err(unsupported!("table option {option}"));
            };
            let text = value.to_string().trim_matches('\'').to_owned();
            match key.value.to_lowercase().as_str() {
                "table.name" => external = Some(text),
                "snapshot"
                | "snapshot.batch_size"
                | "snapshot.interval"
                | "backfill.parallelism"
                | "backfill.num_rows_per_split"
                | "schema.change" => table_options.push(option.clone()),
                other => source_options.push((other.to_owned(), text)),
            }
        }
        let external = external.ok_or_else(|| {
            invalid!("a table with a connector needs table.name = 'schema.table'")
        })?;
        let table_name = relation_name(&create.name)?;
        let source = ast::ObjectName::from(vec![ast::Ident::new(format!("_{table_name}_source"))]);
        self.create_source(&source, false, source_options).await?;
        create.table_options = ast::CreateTableOptions::With(table_options);
        let created = self.create_table_from(create, &source, &external, true, session).await;
        if created.is_err() {
            let _ = self.drop_source(&source, true).await;
        }
        created
    }

    /// `EXPLAIN CREATE TABLE .. FROM ..`: the chain the table's rows take.
    pub(crate) fn explain_create_table_from(
        &self,
        statement: crate::sql::parser::Statement,
    ) -> Result<Output> {
        let crate::sql::parser::Statement::CreateTableFrom { table, source, external } = statement
        else {
            unreachable!("the parser only wraps CREATE TABLE .. FROM")
        };
        let source_name = relation_name(&source)?;
        let source = self
            .catalog
            .source_by_name(&source_name)
            .ok_or_else(|| Error::UnknownRelation { kind: "source", name: source_name.clone() })?;
        let config = SourceConfig::from_options(&source.name, &source.options)?;
        let CdcTableOptions { batch_size: batch, snapshot, parallelism, rows_per_split, .. } =
            table_options(&table.table_options)?;
        let parallelism = parallelism.map_or("auto".to_owned(), |n| n.to_string());
        let splits = match rows_per_split {
            Some(rows) => format!(", parallelism: {parallelism}, rows_per_split: {rows}"),
            None => format!(", parallelism: {parallelism}"),
        };
        let lines = [
            format!(
                "StreamMaterialize {{ table: {}, conflict: Overwrite }}",
                relation_name(&table.name)?
            ),
            format!(
                "└─StreamCdcScan {{ upstream: {external}, snapshot: {snapshot}, batch_size: {batch}{splits} }}"
            ),
            format!("  └─StreamSource {{ source: {source_name}, {} }}", config.describe()),
        ];
        Ok(crate::engine::session::text_rows(
            &["QUERY PLAN"],
            lines.into_iter().map(|l| vec![l]).collect(),
        ))
    }

    /// Starts the reader job of a new source.
    pub(crate) async fn start_source_job(&self, source: &SourceCatalog) -> Result<()> {
        let job = self.graph.prepare_source_job(source)?;
        self.graph.start_job(job).await?;
        Ok(())
    }
}

/// The options of a CDC table's `WITH (..)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CdcTableOptions {
    /// `snapshot.batch_size`: rows per page (default 10 000).
    batch_size: usize,
    /// `snapshot`: whether existing rows are read (default true).
    snapshot: bool,
    /// `backfill.parallelism`: splits read at once (default: [`default_splits`], or
    /// [`default_readers`] when `backfill.num_rows_per_split` is given).
    parallelism: Option<usize>,
    /// `backfill.num_rows_per_split`: rows per split (default: one split per reader).
    rows_per_split: Option<u64>,
    /// `schema.change = 'stop'`: stop at any change of the upstream's columns (default
    /// `'follow'`).
    stop_at_schema_change: bool,
}

/// Upstream rows per split below which the default `backfill.parallelism` reads fewer splits:
/// a smaller split gains less from reading beside others than its page queries cost.
const ROWS_PER_DEFAULT_SPLIT: u64 = 1_000_000;

/// The splits read at once when `backfill.parallelism` is not given: one per million upstream
/// rows (by the upstream's estimate), up to [`default_readers`]. A small table is read as one
/// split, as before.
fn default_splits(estimate: u64) -> usize {
    (estimate / ROWS_PER_DEFAULT_SPLIT).clamp(1, default_readers() as u64) as usize
}

/// Readers that keep this machine busy: one per core, from 2 to 8. Pages are decoded while the
/// epochs before commit, one at a time, and the commits bound the copy: more readers than cores
/// take the cores from the committing thread (docs/benchmarks-history.md, "A finished snapshot's
/// level-0 files merged at once": on 2 cores, 10 M rows copied in 5.55-5.71 s with 2 splits
/// against 5.68-6.02 s with 4, five interleaved rounds).
fn default_readers() -> usize {
    crate::engine::session::default_parallelism().clamp(2, 8)
}

/// Refuses options a CDC table's `WITH (..)` cannot have, naming them.
pub(super) fn check_table_options(options: &ast::CreateTableOptions) -> Result<()> {
    table_options(options).map(|_| ())
}

/// The options of the table's `WITH (..)`; unknown ones are refused.
fn table_options(options: &ast::CreateTableOptions) -> Result<CdcTableOptions> {
    let mut parsed = CdcTableOptions {
        batch_size: 10_000,
        snapshot: true,
        parallelism: None,
        rows_per_split: None,
        stop_at_schema_change: false,
    };
    let list = match options {
        ast::CreateTableOptions::None => return Ok(parsed),
        ast::CreateTableOptions::With(list) | ast::CreateTableOptions::Options(list) => list,
        other => return Err(unsupported!("table options {other}")),
    };
    let positive = |key: &str, text: &str| -> Result<u64> {
        text.parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| invalid!("{key} must be a positive number, not '{text}'"))
    };
    for option in list {
        let ast::SqlOption::KeyValue { key, value } = option else {
            return Err(unsupported!("table option {option}"));
        };
        let text = value.to_string().trim_matches('\'').to_owned();
        match key.value.to_lowercase().as_str() {
            key @ "snapshot.batch_size" => parsed.batch_size = positive(key, &text)? as usize,
            key @ "backfill.parallelism" => {
                parsed.parallelism = Some(positive(key, &text)?.min(64) as usize);
            }
            key @ "backfill.num_rows_per_split" => {
                parsed.rows_per_split = Some(positive(key, &text)?);
            }
            "snapshot" => {
                parsed.snapshot = match text.to_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(invalid!("snapshot must be 'true' or 'false', not '{text}'")),
                }
            }
            "schema.change" => {
                parsed.stop_at_schema_change = match text.to_lowercase().as_str() {
                    "follow" => false,
                    "stop" => true,
                    _ => {
                        return Err(invalid!(
                            "schema.change must be 'follow' or 'stop', not '{text}'"
                        ));
                    }
                }
            }
            // Accepted at its default only: any other value would be ignored.
            "snapshot.interval" if text == "1" => {}
            "snapshot.interval" => {
                return Err(unsupported!(
                    "snapshot.interval = '{text}': a CDC table reads a page whenever its \
                     source has no change waiting; leave the option out (or set it to '1')"
                ));
            }
            other => {
                return Err(invalid!(
                    "unknown table option {other}; known: snapshot, snapshot.batch_size, \
                     snapshot.interval, backfill.parallelism, backfill.num_rows_per_split, \
                     schema.change"
                ));
            }
        }
    }
    Ok(parsed)
}

/// The table's columns and key: the declared ones checked against the upstream, or the
/// upstream's own for `(*)`. Also, for each column, its index among the upstream's columns.
fn bind_cdc_columns(
    create: &ast::CreateTable,
    upstream: &UpstreamTable,
) -> Result<(Vec<ColumnCatalog>, Vec<usize>, Vec<usize>)> {
    if create.columns.is_empty() {
        let all = (0..upstream.columns.len()).collect();
        return Ok((upstream.columns.clone(), upstream.pk.clone(), all));
    }
    let mut columns = Vec::new();
    let mut mapping = Vec::new();
    let mut pk_names = Vec::new();
    for def in &create.columns {
        let name = normalize_ident(&def.name);
        let index = upstream.columns.iter().position(|c| c.name == name).ok_or_else(|| {
            invalid!(
                "column \"{name}\" does not exist in upstream table {}.{}",
                upstream.schema,
                upstream.name
            )
        })?;
        let declared = DataType::from_sql(&def.data_type)?;
        let actual = upstream.columns[index].data_type;
        let compatible = declared == actual
            || declared == DataType::Varchar
            || matches!((declared, actual), (DataType::Decimal { .. }, DataType::Decimal { .. }));
        if !compatible {
            return Err(Error::TypeMismatch(format!(
                "column \"{name}\" is declared {declared} but the upstream column is {}; declare it as {actual}",
                upstream.upstream_types[index]
            )));
        }
        for option in &def.options {
            match &option.option {
                ast::ColumnOption::PrimaryKey(_) => pk_names.push(name.clone()),
                ast::ColumnOption::Null | ast::ColumnOption::NotNull => {}
                other => {
                    return Err(unsupported!(
                        "column option {other} on a CDC table: its rows come from the upstream"
                    ));
                }
            }
        }
        columns.push(ColumnCatalog::new(name, declared));
        mapping.push(index);
    }
    for constraint in &create.constraints {
        if let ast::TableConstraint::PrimaryKey(pk) = constraint {
            for col in &pk.columns {
                if let ast::Expr::Identifier(ident) = &col.column.expr {
                    pk_names.push(normalize_ident(ident));
                }
            }
        }
    }
    let upstream_pk: Vec<String> =
        upstream.pk.iter().map(|&i| upstream.columns[i].name.clone()).collect();
    if pk_names.is_empty() {
        return Err(invalid!(
            "a CDC table needs a primary key equal to the upstream's: add PRIMARY KEY ({})",
            upstream_pk.join(", ")
        ));
    }
    if pk_names != upstream_pk {
        return Err(invalid!(
            "the primary key ({}) differs from the upstream's ({}); declare PRIMARY KEY ({})",
            pk_names.join(", "),
            upstream_pk.join(", "),
            upstream_pk.join(", ")
        ));
    }
    let pk = pk_names
        .iter()
        .map(|n| columns.iter().position(|c| &c.name == n).expect("declared"))
        .collect();
    Ok((columns, pk, mapping))
}

/// `columns` and the upstream column each reads, with a hidden display scale column after
/// them for each unconstrained numeric from column `from` on (see
/// [`crate::batch::display_scale`]): it reads the same upstream column.
pub(super) fn with_scale_columns(
    mut columns: Vec<ColumnCatalog>,
    mut upstream_columns: Vec<usize>,
    from: usize,
) -> (Vec<ColumnCatalog>, Vec<usize>) {
    let (precision, scale) = crate::types::DEFAULT_NUMERIC;
    let unconstrained = DataType::Decimal { precision, scale };
    for c in from..columns.len() {
        if columns[c].data_type != unconstrained {
            continue;
        }
        // A name no other column has (users never see it).
        let mut name = format!("_scale_of_{}", columns[c].name);
        while columns.iter().any(|other| other.name == name) {
            name.insert(0, '_');
        }
        columns.push(ColumnCatalog {
            hidden: true,
            scale_of: Some(c),
            since: columns[c].since,
            ..ColumnCatalog::new(name, DataType::Int16)
        });
        upstream_columns.push(upstream_columns[c]);
    }
    (columns, upstream_columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_default_a_table_is_read_in_a_split_per_million_rows_up_to_one_per_core() {
        let readers = default_readers();
        assert!((2..=8).contains(&readers), "{readers}");
        assert_eq!(default_splits(0), 1, "an empty or unknown table");
        assert_eq!(default_splits(999_999), 1);
        assert_eq!(default_splits(2_500_000), 2);
        assert_eq!(default_splits(10_000_000), readers.min(10));
        assert_eq!(default_splits(u64::MAX), readers);
    }

    #[test]
    fn parallelism_is_left_to_the_default_unless_given() {
        let parse = |sql: &str| {
            let statement = crate::sql::parser::parse(sql).unwrap().remove(0);
            let crate::sql::parser::Statement::CreateTableFrom { table, .. } = statement else {
                panic!("{sql}")
            };
            table_options(&table.table_options).unwrap()
        };
        assert_eq!(parse("CREATE TABLE t (*) FROM pg TABLE 'public.t'").parallelism, None);
        let given =
            parse("CREATE TABLE t (*) WITH (backfill.parallelism = '3') FROM pg TABLE 'public.t'");
        assert_eq!(given.parallelism, Some(3));
    }

    #[test]
    fn schema_change_follows_unless_told_to_stop() {
        let parse = |with: &str| {
            let sql = format!("CREATE TABLE t (*) {with} FROM pg TABLE 'public.t'");
            let statement = crate::sql::parser::parse(&sql).unwrap().remove(0);
            let crate::sql::parser::Statement::CreateTableFrom { table, .. } = statement else {
                panic!("{sql}")
            };
            table_options(&table.table_options)
        };
        assert!(!parse("").unwrap().stop_at_schema_change);
        assert!(!parse("WITH (schema.change = 'follow')").unwrap().stop_at_schema_change);
        assert!(parse("WITH (schema.change = 'STOP')").unwrap().stop_at_schema_change);
        let wrong = parse("WITH (schema.change = 'ignore')").unwrap_err().to_string();
        assert!(wrong.contains("schema.change must be 'follow' or 'stop'"), "{wrong}");
    }
}
