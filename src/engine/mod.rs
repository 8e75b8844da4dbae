//! The engine: runs parsed statements against the catalog, the stream runtime and storage.
//!
//! Each statement kind has its own module:
//! - [`ddl`]: creates and drops relations and their streaming jobs (with `mv`, `cdc`, `source`
//!   for views, CDC tables and sources, `alter` and `rescale` for changing running jobs);
//! - [`dml`]: INSERT, UPDATE, DELETE and COPY become chunks for a table's stream;
//! - [`copy`]: the options and data formats of `COPY .. FROM STDIN`;
//! - [`query`]: batch queries, planned and run by DataFusion;
//! - [`session`]: the per-connection variables of SET and SHOW;
//! - `jobs`: building every job at start-up, and job control (`SHOW JOBS`, `WAIT`,
//!   `CANCEL JOBS`);
//! - [`recovery`]: rebuilding every job after an actor failure.
//!
//! The streaming jobs themselves (building, spawning, the registry, creating jobs' progress)
//! live in [`crate::stream::graph`]; the engine holds one
//! [`StreamGraph`](crate::stream::graph::StreamGraph).

mod alter;
mod cdc;
pub mod copy;
pub mod cursor;
pub mod ddl;
pub mod dml;
mod jobs;
mod mv;
mod patterns;
pub mod query;
pub mod recovery;
mod refresh;
mod rescale;
mod resnapshot;
pub mod session;
mod set_ops;
mod source;
mod stats;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arrow::datatypes::SchemaRef;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast;

use tokio::task::JoinHandle;

use crate::catalog::{Catalog, RelationKind};
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::sql::parser::Statement;
use crate::storage::store::Store;
use crate::stream::barrier::{BarrierHandle, BarrierManager};
use crate::stream::graph::StreamGraph;
use crate::unsupported;

pub use session::Session;

/// Start-up settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where RocksDB keeps its files.
    pub data_dir: PathBuf,
    /// Time between checkpoints when nothing asks for one sooner.
    pub barrier_interval: Duration,
    /// The least time between timed checkpoints while a backfill runs.
    pub backfill_barrier_interval: Duration,
}

/// What a statement produced.
pub enum Output {
    /// Rows, streamed.
    Rows {
        /// Their schema.
        schema: SchemaRef,
        /// The rows.
        stream: SendableRecordBatchStream,
    },
    /// A command tag such as `CREATE TABLE` or `INSERT 0 3`.
    Command(CommandTag),
    /// `COPY .. FROM STDIN`: the client sends the data next.
    CopyIn(copy::CopyTarget),
    /// `COPY .. TO STDOUT`: rows for the client, in a COPY format.
    CopyOut {
        /// Their schema.
        schema: SchemaRef,
        /// The rows.
        stream: SendableRecordBatchStream,
        /// How they are written.
        format: copy::CopyFormat,
    },
    /// A transaction statement (`BEGIN`, `COMMIT`, ...), accepted for client compatibility.
    Transaction {
        /// The command tag.
        tag: &'static str,
        /// True for `BEGIN`/`START TRANSACTION`.
        start: bool,
    },
}

/// A command tag and its row count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandTag {
    /// `INSERT`, `CREATE TABLE`, ...
    pub command: &'static str,
    /// Rows affected, for commands that report it.
    pub rows: Option<usize>,
}

impl CommandTag {
    /// A tag without a row count.
    pub fn new(command: &'static str) -> Self {
        Self { command, rows: None }
    }

    /// A tag with a row count.
    pub fn with_rows(command: &'static str, rows: usize) -> Self {
        Self { command, rows: Some(rows) }
    }
}

/// The database: catalog, storage, stream runtime and query engine.
pub struct Engine {
    store: Arc<Store>,
    catalog: Arc<Catalog>,
    barrier: BarrierHandle,
    /// The running streaming jobs.
    graph: Arc<StreamGraph>,
    ctx: SessionContext,
    /// Serializes DDL statements.
    ddl_lock: tokio::sync::Mutex<()>,
}

impl Engine {
    /// Opens the data dir, reloads the catalog, and restarts every table's job from the last
    /// committed epoch. The returned task runs the barrier manager; it ends with an error if a
    /// checkpoint fails.
    pub async fn start(config: Config) -> Result<(Arc<Engine>, JoinHandle<Result<()>>)> {
        std::fs::create_dir_all(&config.data_dir).map_err(|e| {
            Error::Storage(format!("cannot create data dir {}: {e}", config.data_dir.display()))
        })?;
        let store = Store::open(&config.data_dir)?;
        let catalog = Arc::new(Catalog::load(store.clone())?);
        let metrics = Arc::new(Metrics::default());
        let (manager, barrier, recovery_requests) =
            BarrierManager::new(store.clone(), config.barrier_interval);
        let manager = manager
            .with_metrics(metrics.clone())
            .with_backfill_interval(config.backfill_barrier_interval);
        let manager = tokio::spawn(manager.run());
        let graph = Arc::new(StreamGraph::new(
            store.clone(),
            catalog.clone(),
            barrier.clone(),
            metrics.clone(),
        ));
        let ctx = query::session_context(catalog.clone(), store.clone(), graph.clone())?;
        let engine = Arc::new(Engine {
            store,
            catalog,
            barrier,
            graph,
            ctx,
            ddl_lock: tokio::sync::Mutex::new(()),
        });
        engine.start_jobs().await?;
        tokio::spawn(recovery::run(Arc::downgrade(&engine), recovery_requests));
        tokio::spawn(patterns::pick_up_forever(Arc::downgrade(&engine)));
        tracing::info!(
            tables = engine.catalog.tables().len(),
            committed_epoch = %engine.store.committed_epoch(),
            "engine started"
        );
        Ok((engine, manager))
    }

    /// Runs one statement for `session`.
    ///
    /// A panic while planning or running it (a bug, in Sluice or in a library) fails the
    /// statement with XX000 and is logged; the connection and the server go on.
    pub async fn execute(&self, session: &Session, statement: Statement) -> Result<Output> {
        use futures::FutureExt;
        let kind = statement_label(&statement);
        let run = std::panic::AssertUnwindSafe(self.execute_statement(session, statement));
        let result = match run.catch_unwind().await {
            Ok(result) => result,
            Err(panic) => {
                let message = crate::stream::actor::panic_message(&panic);
                tracing::error!("a statement failed with an internal error: {message}");
                Err(Error::Stream(format!("internal error while running the statement: {message}")))
            }
        };
        self.metrics().statement(kind, result.is_ok());
        result
    }

    async fn execute_statement(&self, session: &Session, statement: Statement) -> Result<Output> {
        match statement {
            Statement::Flush => {
                if crate::failpoint::fires(|| "flush:panic".to_owned()) {
                    panic!("failpoint flush:panic");
                }
                self.barrier.flush().await?;
                Ok(Output::Command(CommandTag::new("FLUSH")))
            }
            Statement::ShowInternalTables => self.show_relations(RelationKind::Internal),
            Statement::ShowSources => self.show_sources(),
            Statement::ExplainCreateTableFrom(inner) => self.explain_create_table_from(*inner),
            Statement::CreateSource { name, if_not_exists, options } => {
                self.create_source(&name, if_not_exists, options).await
            }
            Statement::DropSource { name, if_exists } => self.drop_source(&name, if_exists).await,
            Statement::CreateTableFrom { table, source, external } => {
                self.create_table_from(*table, &source, &external, false, session).await
            }
            Statement::CreateTablesFrom { source, pattern, options } => {
                self.create_tables_from(&source, &pattern, options, session).await
            }
            Statement::ShowJobs => Ok(self.show_jobs()),
            Statement::Wait => self.wait_jobs().await,
            Statement::CancelJobs(ids) => self.cancel_jobs(&ids).await,
            Statement::Resnapshot(name) => Box::pin(self.resnapshot(&name)).await,
            Statement::RefreshSchema(name) => Box::pin(self.refresh_schema(&name, session)).await,
            Statement::AlterSet { materialized_view, name, setting, value } => {
                self.alter_set(materialized_view, &name, setting, value).await
            }
            Statement::Sql(stmt) => self.execute_sql(session, *stmt).await,
        }
    }

    async fn execute_sql(&self, session: &Session, stmt: ast::Statement) -> Result<Output> {
        use ast::Statement as S;
        match stmt {
            S::Explain { statement, .. } if is_create_materialized_view(&statement) => {
                self.explain_materialized_view(session, *statement).await
            }
            S::Query(_) | S::Explain { .. } => self.query(session, stmt).await,
            S::CreateTable(create) => self.create_table(create, session).await,
            S::CreateView(view) if view.materialized => {
                self.create_materialized_view(view, session).await
            }
            S::Drop { object_type: ast::ObjectType::Table, if_exists, names, cascade, .. } => {
                self.drop_relations(RelationKind::Table, if_exists, &names, cascade).await
            }
            S::Drop {
                object_type: ast::ObjectType::MaterializedView,
                if_exists,
                names,
                cascade,
                ..
            } => {
                self.drop_relations(RelationKind::MaterializedView, if_exists, &names, cascade)
                    .await
            }
            S::Insert(insert) => self.insert(insert).await,
            S::Update(update) => self.update(update).await,
            S::Delete(delete) => self.delete(delete).await,
            S::Truncate(truncate) => self.truncate(truncate).await,
            S::Copy {
                source,
                to: false,
                target: ast::CopyTarget::Stdin,
                options,
                legacy_options,
                ..
            } => self.copy_from_stdin(source, &options, &legacy_options),
            S::Copy {
                source,
                to: true,
                target: ast::CopyTarget::Stdout,
                options,
                legacy_options,
                ..
            } => self.copy_to_stdout(session, source, &options, &legacy_options).await,
            S::Declare { stmts } => self.declare(session, stmts).await,
            S::Fetch { name, direction, into, .. } => {
                self.fetch(session, &name, &direction, into).await
            }
            S::Close { cursor } => self.close(session, cursor).await,
            S::ShowTables { .. } => self.show_tables(),
            S::ShowViews { materialized: true, .. } => {
                self.show_relations(RelationKind::MaterializedView)
            }
            S::ExplainTable { table_name, .. } => self.describe(&table_name),
            S::Set(set) => session.set(set),
            S::ShowVariable { variable } => session.show(&variable),
            S::StartTransaction { .. } => Ok(Output::Transaction { tag: "BEGIN", start: true }),
            S::Commit { .. } => Ok(Output::Transaction { tag: "COMMIT", start: false }),
            S::Rollback { .. } => Ok(Output::Transaction { tag: "ROLLBACK", start: false }),
            other => Err(unsupported!("{}", statement_kind(&other))),
        }
    }

    /// The catalog.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// The running streaming jobs.
    pub fn graph(&self) -> &Arc<StreamGraph> {
        &self.graph
    }

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The server's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.graph.metrics
    }
}

fn is_create_materialized_view(stmt: &ast::Statement) -> bool {
    matches!(stmt, ast::Statement::CreateView(v) if v.materialized)
}

/// The `kind` label of a statement in `sluice_statements_total`.
fn statement_label(statement: &Statement) -> &'static str {
    use ast::Statement as S;
    match statement {
        Statement::Flush => "flush",
        Statement::CreateSource { .. }
        | Statement::CreateTableFrom { .. }
        | Statement::CreateTablesFrom { .. } => "create",
        Statement::DropSource { .. } => "drop",
        Statement::AlterSet { .. } | Statement::Resnapshot(_) | Statement::RefreshSchema(_) => {
            "alter"
        }
        Statement::ShowInternalTables | Statement::ShowSources | Statement::ShowJobs => "show",
        Statement::ExplainCreateTableFrom(_) => "explain",
        Statement::Wait | Statement::CancelJobs(_) => "job_control",
        Statement::Sql(stmt) => match stmt.as_ref() {
            S::Query(_) => "select",
            S::Explain { .. } | S::ExplainTable { .. } => "explain",
            S::Insert(_) => "insert",
            S::Update(_) => "update",
            S::Delete(_) => "delete",
            S::Copy { .. } => "copy",
            S::CreateTable(_) | S::CreateView(_) => "create",
            S::Drop { .. } => "drop",
            S::Set(_) => "set",
            S::ShowVariable { .. } | S::ShowTables { .. } | S::ShowViews { .. } => "show",
            S::StartTransaction { .. } | S::Commit { .. } | S::Rollback { .. } => "transaction",
            _ => "other",
        },
    }
}

/// A short name of a statement kind for "not supported" errors.
fn statement_kind(stmt: &ast::Statement) -> String {
    let text = stmt.to_string();
    let words: Vec<&str> = text.split_whitespace().take(2).collect();
    format!("the statement {}", words.join(" ").to_uppercase())
}

#[cfg(test)]
mod tests;
