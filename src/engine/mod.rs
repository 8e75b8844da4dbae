//! The engine: runs parsed statements against the catalog, the stream runtime and storage.
//!
//! Each statement kind has its own module: [`ddl`] creates and drops relations and their
//! streaming jobs, [`dml`] turns INSERT, UPDATE, DELETE and COPY into chunks for a table's
//! stream, [`query`] plans and runs batch queries with DataFusion, [`session`] keeps the
//! per-connection variables of SET and SHOW.

pub mod ddl;
pub mod dml;
pub mod query;
pub mod session;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use arrow::datatypes::SchemaRef;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::catalog::{ActorId, Catalog, TableCatalog, TableId};
use crate::error::{Error, Result};
use crate::sql::parser::Statement;
use crate::storage::state_table::StateTable;
use crate::storage::store::Store;
use crate::stream::actor::Actor;
use crate::stream::barrier::{BarrierHandle, BarrierManager};
use crate::stream::executor::dml::{DmlExecutor, DmlRequest};
use crate::stream::executor::materialize::MaterializeExecutor;
use crate::unsupported;

pub use session::Session;

/// How many DML requests may queue for one table.
const DML_QUEUE: usize = 16;

/// Start-up settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where RocksDB keeps its files.
    pub data_dir: PathBuf,
    /// Time between checkpoints when nothing asks for one sooner.
    pub barrier_interval: Duration,
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
    CopyIn(dml::CopyTarget),
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
        Self {
            command,
            rows: None,
        }
    }

    /// A tag with a row count.
    pub fn with_rows(command: &'static str, rows: usize) -> Self {
        Self {
            command,
            rows: Some(rows),
        }
    }
}

/// The running streaming job of a table.
pub(crate) struct TableJob {
    actor: ActorId,
    dml: mpsc::Sender<DmlRequest>,
    /// Held by a DML statement from its read until its epoch commits, so statements on one
    /// table apply one after another against committed data.
    write_lock: Arc<tokio::sync::Mutex<()>>,
}

/// The database: catalog, storage, stream runtime and query engine.
pub struct Engine {
    store: Arc<Store>,
    catalog: Arc<Catalog>,
    barrier: BarrierHandle,
    jobs: Mutex<HashMap<TableId, Arc<TableJob>>>,
    ctx: SessionContext,
    /// Serializes DDL statements.
    ddl_lock: tokio::sync::Mutex<()>,
    next_actor: AtomicU32,
}

impl Engine {
    /// Opens the data dir, reloads the catalog, and restarts every table's job from the last
    /// committed epoch. The returned task runs the barrier manager; it ends with an error if a
    /// checkpoint fails.
    pub async fn start(config: Config) -> Result<(Arc<Engine>, JoinHandle<Result<()>>)> {
        std::fs::create_dir_all(&config.data_dir).map_err(|e| {
            Error::Storage(format!(
                "cannot create data dir {}: {e}",
                config.data_dir.display()
            ))
        })?;
        let store = Store::open(&config.data_dir)?;
        let catalog = Arc::new(Catalog::load(store.clone())?);
        let (manager, barrier) = BarrierManager::new(store.clone(), config.barrier_interval);
        let manager = tokio::spawn(manager.run());
        let ctx = query::session_context(catalog.clone(), store.clone())?;
        let engine = Arc::new(Engine {
            store,
            catalog,
            barrier,
            jobs: Mutex::new(HashMap::new()),
            ctx,
            ddl_lock: tokio::sync::Mutex::new(()),
            next_actor: AtomicU32::new(1),
        });
        for table in engine.catalog.tables() {
            engine.start_table_job(&table).await?;
        }
        tracing::info!(
            tables = engine.catalog.tables().len(),
            committed_epoch = %engine.store.committed_epoch(),
            "engine started"
        );
        Ok((engine, manager))
    }

    /// Runs one statement for `session`.
    pub async fn execute(&self, session: &Session, statement: Statement) -> Result<Output> {
        match statement {
            Statement::Flush => {
                self.barrier.flush().await?;
                Ok(Output::Command(CommandTag::new("FLUSH")))
            }
            Statement::Sql(stmt) => self.execute_sql(session, *stmt).await,
        }
    }

    async fn execute_sql(&self, session: &Session, stmt: ast::Statement) -> Result<Output> {
        use ast::Statement as S;
        match stmt {
            S::Query(_) | S::Explain { .. } => self.query(session, stmt).await,
            S::CreateTable(create) => self.create_table(create).await,
            S::Drop {
                object_type: ast::ObjectType::Table,
                if_exists,
                names,
                ..
            } => self.drop_tables(if_exists, &names).await,
            S::Insert(insert) => self.insert(insert).await,
            S::Update(update) => self.update(update).await,
            S::Delete(delete) => self.delete(delete).await,
            S::Copy {
                source,
                to: false,
                target: ast::CopyTarget::Stdin,
                options,
                legacy_options,
                ..
            } => self.copy_from_stdin(source, &options, &legacy_options),
            S::ShowTables { .. } => self.show_tables(),
            S::ExplainTable { table_name, .. } => self.describe(&table_name),
            S::Set(set) => session.set(set),
            S::ShowVariable { variable } => session.show(&variable),
            S::StartTransaction { .. } => Ok(Output::Transaction {
                tag: "BEGIN",
                start: true,
            }),
            S::Commit { .. } => Ok(Output::Transaction {
                tag: "COMMIT",
                start: false,
            }),
            S::Rollback { .. } => Ok(Output::Transaction {
                tag: "ROLLBACK",
                start: false,
            }),
            other => Err(unsupported!("{}", statement_kind(&other))),
        }
    }

    /// The catalog.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// Builds and starts the `dml -> materialize` job of a table.
    async fn start_table_job(&self, table: &TableCatalog) -> Result<()> {
        let actor = ActorId(self.next_actor.fetch_add(1, Ordering::Relaxed));
        let (barrier_tx, barrier_rx) = mpsc::unbounded_channel();
        let (dml_tx, dml_rx) = mpsc::channel(DML_QUEUE);
        let state = StateTable::new(self.store.clone(), table.id, table.pk.clone());
        let source = Box::new(DmlExecutor::new(barrier_rx, dml_rx));
        let root = Box::new(MaterializeExecutor::new(source, state));
        Actor::new(actor, root, self.barrier.collector()).spawn();
        self.barrier.add_actor(actor, barrier_tx).await?;
        let job = TableJob {
            actor,
            dml: dml_tx,
            write_lock: Arc::new(tokio::sync::Mutex::new(())),
        };
        self.jobs.lock().insert(table.id, Arc::new(job));
        Ok(())
    }

    fn job(&self, table: TableId) -> Result<Arc<TableJob>> {
        self.jobs
            .lock()
            .get(&table)
            .cloned()
            .ok_or_else(|| Error::Stream(format!("table {table} has no running job")))
    }
}

/// A short name of a statement kind for "not supported" errors.
fn statement_kind(stmt: &ast::Statement) -> String {
    let text = stmt.to_string();
    let words: Vec<&str> = text.split_whitespace().take(2).collect();
    format!("the statement {}", words.join(" ").to_uppercase())
}
