//! Sluice: a streaming database that speaks the Postgres wire protocol.
//!
//! A statement travels: [`frontend`] (pgwire) -> [`sql`] (parse) -> [`engine`] (run it). DDL
//! changes the [`catalog`] and starts or stops streaming jobs in [`stream`]; DML becomes chunks
//! that flow through a table's job into its state table in [`storage`]; queries are planned by
//! DataFusion and read committed state through [`batch`]. The barrier manager in [`stream`]
//! commits every state table's writes of an epoch atomically, and a restart resumes from the
//! last committed epoch.
//!
//! Where each concept lives:
//! - the streaming job graph (jobs, fragments, actors, their builders and registry):
//!   [`stream::graph`];
//! - backfills and their progress-table contract: [`stream::executor::backfill`] and
//!   [`stream::executor::backfill::state`];
//! - system tables (`rw_catalog`): [`batch::system`];
//! - CDC: the upstream side in [`connector`], the executors in
//!   [`stream::executor::source`] and [`stream::executor::backfill::cdc`];
//! - COPY formats: [`engine::copy`]; the checkpoint protocol: [`stream::barrier`].

/// Batch queries: DataFusion table providers over committed state.
pub mod batch;
/// Catalog objects, ids and their persistence.
pub mod catalog;
/// Chunks of row changes (`StreamChunk`, `Op`), shared by streaming and storage.
pub mod chunk;
/// The server's command line and its config file.
pub mod cli;
/// Upstream connectors (Postgres and MySQL / MariaDB CDC).
pub mod connector;
/// Runs statements: DDL, DML, queries, session variables.
pub mod engine;
/// The crate error type.
pub mod error;
/// Fault injection for tests.
pub mod failpoint;
/// The Postgres wire protocol server.
pub mod frontend;
/// The HTTP server: Prometheus metrics, the dashboard and its JSON API.
pub mod http;
/// Identifiers (tables, actors, epochs, vnodes), shared by the catalog, storage and streaming.
pub mod ids;
/// The server's metrics.
pub mod metrics;
/// Statement parsing.
pub mod sql;
/// RocksDB store, key and row codecs, state tables.
pub mod storage;
/// Streaming runtime: messages, executors, actors, barriers and checkpoints.
pub mod stream;
/// SQL types and their Arrow representation.
pub mod types;
