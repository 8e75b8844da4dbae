//! Upstream connectors: the systems Sluice ingests changes from.

/// What both upstreams share: upstream table descriptions and change rows.
pub mod common;
/// Reading a MySQL / MariaDB binlog: committed transactions as row changes.
pub mod mysql_binlog;
/// A MySQL / MariaDB CDC source: options, connection, validation, snapshot pages.
pub mod mysql_cdc;
/// What the binlog's statements (query events) say: truncates, reshaping DDL, row changes
/// logged as statements.
pub mod mysql_statements;
/// Upstream positions (`CdcOffset`) and how progress tables store them.
pub mod offset;
/// Postgres snapshot pages in binary `COPY` format, decoded into Arrow arrays.
pub mod pg_copy;
/// Reading an upstream Postgres: table descriptions, snapshot pages, decoded changes.
pub mod pg_reader;
/// A Postgres source's change stream over a streaming replication connection.
pub mod pg_replication;
/// TLS to an upstream Postgres (`ssl.mode`, `ssl.root.cert`).
pub mod pg_tls;
/// A Postgres CDC source's options, connection, slot and publication.
pub mod postgres_cdc;
/// The interface both upstreams implement: `SourceConfig` and `UpstreamSession`.
pub mod upstream;
