//! Upstream connectors: the systems Sluice ingests changes from.

/// Upstream positions (`CdcOffset`) and how progress tables store them.
pub mod offset;
/// Reading an upstream Postgres: table descriptions, snapshot pages, decoded changes.
pub mod pg_reader;
/// A Postgres CDC source's options, connection, slot and publication.
pub mod postgres_cdc;
