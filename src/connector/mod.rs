//! Upstream connectors: the systems Sluice ingests changes from.

pub mod pg_reader;
pub mod postgres_cdc;
